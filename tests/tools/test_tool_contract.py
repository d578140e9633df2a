"""The command-line contract of every tool in build/bin (src/tools/common/args.h):

- exit status 0 success, 1 runtime/model/file error, 2 bad command line;
- a bad flag: exit 2, "<tool>: error: unknown argument '<flag>'" (the message names the flag);
- a missing input file: exit 1, the message names the path;
- --help: exit 0, every option of the tool's table (every flag and alias it accepts) is listed, and the
  epilogue states the exit-status contract;
- `--flag=value` is the same as `--flag value`.
No run may print a sanitizer report (the ASan build runs this too).

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build).
"""
import hashlib
import os
import subprocess
import tempfile
import unittest

from tests.tools.paths import BIN, PREFIX, TINY
EXIT_LINE = "Exit status: 0 success, 1 runtime/model/file error, 2 bad command line."

# Every spelling each tool accepts (the option tables of src/tools/*.c, kernel-bench/main.c).
OPTIONS = {
    "llama-cli": "-m --model -p --prompt -f --file -n --n-predict -t --threads -c --ctx-size -b --batch-size --temp "
                 "--top-k --top-p -s --seed --kernel --lut-table --lut-tiles --i2s-layout --head-type --ignore-eos "
                 "--print-token-ids -ngl --n-gpu-layers -cnv --conversation --chat-template -h --help",
    "llama-bench": "-m --model -p --n-prompt -n --n-gen -pg -b --batch-size -t --threads --kernel --lut-table "
                   "--lut-tiles --i2s-layout --head-type -r --repetitions -o --output --seed --no-warmup --progress -ngl "
                   "--n-gpu-layers -h --help",
    "llama-perplexity": "-m --model -f --file -c --ctx-size -b --batch-size -t --threads --chunks --kernel "
                        "--lut-table --lut-tiles --i2s-layout --head-type --print-token-ids -ngl --n-gpu-layers -h --help",
    "bitnet-logits": "-m --model -p --prompt --tokens --no-bos --out --top-k -t --threads -b --batch-size --kernel "
                     "--lut-table --lut-tiles --i2s-layout --head-type --embd -h --help",
    "llama-embedding": "-m --model -p --prompt -f --file --embd-separator --pooling --embd-normalize "
                       "--embd-output-format -b --batch-size -c --ctx-size -t --threads --kernel --lut-table "
                       "--lut-tiles --i2s-layout --verbose-prompt -h --help",
    "bitnet-dummy": "-o --outfile --n-embd --n-ff --n-layer --n-head --n-head-kv --ctx --arch --n-embd-head "
                    "--rope-theta --output-weight --outtype --quant-embd --seed --vocab-size --vocab-from --tiles "
                    "--no-tile-record --no-layout-record --name --no-norm-in --pooling --swa --swa-pattern "
                    "--rope-freq-base-swa --rms-eps -q --quiet -h --help",
    "bitnet-convert": "-o --outfile --outtype --quant-embd --force --name --tiles --lut-table --relayout -q --quiet -h "
                      "--help",
    "bitnet-vocab": "-o --out --arch --n-vocab --name -q --quiet -h --help",
    "bitnet-kernel-bench": "--target --config --table --shape --tiles --generic --list --threads --batch --reps "
                           "--min-time --max-time --budget --quick --bw-mib --no-bw --llc-mib --bust-factor "
                           "--no-cache-bust --no-cache --no-i2s --no-lut --pool-run --seed --json -q --quiet -h --help",
    "bitnet-mcu-run": "-m --model --tokens -n --n-predict -c --ctx-size -b --batch-size --arena --i2s-layout "
                      "--logit-hashes -h --help",
    "bitnet-mcu-plan": "-m --model --board -c --ctx --ctx-size -b --batch --batch-size --json --i2s-layout -h --help",
}


def run(args, **kw):
    p = subprocess.run(PREFIX + [os.path.join(BIN, args[0])] + args[1:], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace", **kw)
    if "Sanitizer" in p.stderr or ": runtime error: " in p.stderr or "Segmentation" in p.stderr:
        raise AssertionError(f"{' '.join(args)}: crash or sanitizer report:\n{p.stderr}")
    return p


class ToolContract(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.text = os.path.join(cls.dir, "text.txt")
        with open(cls.text, "w", encoding="utf-8") as f:
            f.write("the quick brown fox jumps over the lazy dog " * 30)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def test_bad_flag_is_exit_2_and_names_the_flag(self):
        for tool in OPTIONS:
            for bad in (["--no-such-flag"], ["--no-such-flag=3"], ["-zz"]):
                with self.subTest(tool=tool, args=bad):
                    p = run([tool] + bad)
                    self.assertEqual(p.returncode, 2, p.stderr)
                    self.assertIn(f"{tool}: error: unknown argument '{bad[0]}'", p.stderr)
                    self.assertEqual(p.stdout, "")

    def test_bad_value_and_missing_value_are_exit_2(self):
        cases = {
            "llama-cli": ["-m", TINY, "-n", "x"], "llama-bench": ["-m", TINY, "-t", "0"],
            "llama-perplexity": ["-m", TINY, "-f", self.text, "--chunks", "0"],
            "bitnet-logits": ["-m", TINY, "-p", "a", "--top-k", "-3"],
            "llama-embedding": ["-m", TINY, "-p", "a", "-b", "0"],
            "bitnet-dummy": ["-o", self.path("x.gguf"), "--n-embd", "abc"],
            "bitnet-convert": [self.dir, "-o", self.path("x.gguf"), "--outtype", "q4"],
            "bitnet-vocab": [self.dir, "--out", self.path("v.gguf"), "--n-vocab", "0"],
            "bitnet-kernel-bench": ["--reps", "0"],
            "bitnet-mcu-run": ["-m", TINY, "--batch-size", "0"],
            "bitnet-mcu-plan": ["-m", TINY, "--board", "esp32s3", "--ctx", "0"],
        }
        for tool, args in cases.items():
            with self.subTest(tool=tool):
                p = run([tool] + args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertTrue(p.stderr.startswith(f"{tool}: error: "), p.stderr)
                self.assertIn(args[-2], p.stderr)
            with self.subTest(tool=tool, missing_value=args[-2]):
                p = run([tool] + args[:-1])
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(f"{tool}: error: {args[-2]} needs a value", p.stderr)

    def test_missing_input_file_is_exit_1_and_names_the_path(self):
        missing = self.path("missing.gguf")
        missing_dir = self.path("no-such-model-dir")
        cases = {
            "llama-cli": (["-m", missing, "-p", "hi", "-n", "1"], missing),
            "llama-bench": (["-m", missing, "-p", "8", "-n", "0", "-r", "1"], missing),
            "llama-perplexity": (["-m", TINY, "-f", self.path("missing.txt")], self.path("missing.txt")),
            "bitnet-logits": (["-m", missing, "-p", "hi"], missing),
            "llama-embedding": (["-m", missing, "-p", "hi"], missing),
            "bitnet-dummy": (["-q", "-o", self.path("d.gguf"), "--n-embd", "256", "--n-ff", "512", "--n-layer", "1",
                              "--n-head", "4", "--vocab-from", missing], missing),
            "bitnet-convert": ([missing_dir, "-o", self.path("c.gguf"), "-q"], missing_dir),
            "bitnet-vocab": ([missing_dir, "--out", self.path("v.gguf")], missing_dir),
            "bitnet-kernel-bench": (["-q", "--quick", "--shape", "256x256", "--threads", "1", "--no-bw", "--no-i2s",
                                     "--json", self.path("no-dir/k.json")], self.path("no-dir/k.json")),
            "bitnet-mcu-run": (["-m", missing, "-n", "1"], missing),
            "bitnet-mcu-plan": (["-m", missing, "--board", "esp32s3"], missing),
        }
        for tool, (args, path) in cases.items():
            with self.subTest(tool=tool):
                p = run([tool] + args)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(path, p.stderr)

    def test_help_lists_every_option_and_the_exit_contract(self):
        for tool, names in OPTIONS.items():
            with self.subTest(tool=tool):
                p = run([tool, "--help"])
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stderr, "")
                self.assertTrue(p.stdout.startswith(f"usage: {tool}"), p.stdout[:80])
                self.assertIn(EXIT_LINE, p.stdout)
                spelled = set(p.stdout.replace(",", " ").split())
                for name in names.split():
                    self.assertIn(name, spelled, f"{tool} --help does not list {name}")
                self.assertEqual(run([tool, "-h"]).stdout, p.stdout)

    def assert_same_run(self, tool, spaced, joined, files=()):
        outs = []
        for args in (spaced, joined):
            p = run([tool] + args)
            digests = []
            for f in files:
                with open(f, "rb") as fh:
                    digests.append(hashlib.sha256(fh.read()).hexdigest())
                os.remove(f)
            outs.append((p.returncode, p.stdout, digests))
        self.assertEqual(outs[0], outs[1], f"{tool}: {spaced} vs {joined}")
        return outs[0]

    def test_flag_equals_value_is_flag_space_value(self):
        dummy = ["-q", "-o", self.path("e.gguf"), "--n-embd", "256", "--n-ff", "512", "--n-layer", "1", "--n-head",
                 "4", "--vocab-size", "300"]
        cases = [
            ("llama-cli", ["-m", TINY, "-p", "hello", "--temp", "0", "-t", "1", "--n-predict", "4"],
             ["-m", TINY, "-p", "hello", "--temp", "0", "-t", "1", "--n-predict=4"], (), 0),
            ("llama-bench", ["-m", TINY, "--repetitions", "0"], ["-m", TINY, "--repetitions=0"], (), 2),
            ("llama-perplexity", ["-m", TINY, "-f", self.text, "-c", "32", "-t", "1", "--chunks", "1"],
             ["-m", TINY, "-f", self.text, "-c", "32", "-t", "1", "--chunks=1"], (), 0),
            ("bitnet-logits", ["-m", TINY, "-p", "the cat", "-t", "1", "--top-k", "3"],
             ["-m", TINY, "-p", "the cat", "-t", "1", "--top-k=3"], (), 0),
            ("bitnet-dummy", dummy + ["--seed", "5"], dummy + ["--seed=5"], (self.path("e.gguf"),), 0),
            ("bitnet-dummy", dummy + ["--quant-embd", "q8_0"], dummy + ["--quant-embd=q8_0"], (self.path("e.gguf"),),
             0),
            ("bitnet-convert", [self.dir, "-o", self.path("c.gguf"), "--outtype", "q4"],
             [self.dir, "-o", self.path("c.gguf"), "--outtype=q4"], (), 2),
            ("bitnet-vocab", [self.dir, "--out", self.path("v.gguf"), "--n-vocab", "0"],
             [self.dir, "--out", self.path("v.gguf"), "--n-vocab=0"], (), 2),
            ("bitnet-kernel-bench", ["--list", "--target", "all"], ["--list", "--target=all"], (), 0),
            ("bitnet-mcu-run", ["-m", TINY, "--tokens", "1,2,3", "-n", "2"], ["-m", TINY, "--tokens=1,2,3", "--n-predict=2"], (),
             0),
            ("llama-cli", ["-m", TINY, "-p", "hello", "--temp", "0", "-n", "2", "--i2s-layout", "rows4"],
             ["-m", TINY, "-p", "hello", "--temp", "0", "-n", "2", "--i2s-layout=rows4"], (), 0),
            ("bitnet-convert", ["--relayout", "arm64", TINY, "-o", self.path("r.gguf"), "-q"],
             ["--relayout=arm64", TINY, "-o", self.path("r.gguf"), "-q"], (self.path("r.gguf"),), 0),
            ("bitnet-mcu-plan", ["-m", TINY, "--board", "cortex-m4f", "--ctx", "64", "--batch", "4"],
             ["-m", TINY, "--board=cortex-m4f", "--ctx=64", "--batch=4"], (), 0),
            ("bitnet-mcu-plan", ["-m", TINY, "--board", "esp32s3", "--json", self.path("p.json")],
             ["-m", TINY, "--board", "esp32s3", "--json=" + self.path("p.json")], (self.path("p.json"),), 0),
        ]
        for tool, spaced, joined, files, rc in cases:
            with self.subTest(tool=tool, args=joined):
                self.assertEqual(self.assert_same_run(tool, spaced, joined, files)[0], rc)


if __name__ == "__main__":
    unittest.main()
