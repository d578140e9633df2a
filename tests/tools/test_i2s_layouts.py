"""I2_S files in the three byte layouts bitnet.cpp writes (docs/LAYOUTS.md §2), end to end through the tools:
bitnet.cpp's tiny model (tests/data/bitnetcpp-tiny) repacked into its ARM layout (arm64) and its 4-row layout
(rows4) by the tests' own packer (tests/tools/i2s_layouts.py, from the layouts' formulas), then

- llama-cli with --i2s-layout gives bitnet.cpp's 16 greedy ids and says which layout it assumed; without the
  flag it says that x86 was assumed (and computes something else);
- bitnet-logits gives the x86 file's logits byte for byte on every kernel path, llama-perplexity its
  perplexity, bitnet-mcu-run (the microcontroller node) its logit hashes, llama-bench runs; bitnet-mcu-plan
  plans x86 images only and names the rewrite for the others;
- bitnet-convert --relayout writes the x86 file (same keys plus the record, same tensor bytes), which then
  loads without a flag; a contradicting flag or record, a code 3 and a file without I2_S weights are refused
  and leave no output;
- the Python wrappers pass --i2s-layout on; llama-server serves the x86 file's completion.

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build: the
wrappers and llama-server then are not run)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from codegen import gguf_reader
from tests.tools import i2s_layouts
from tests.tools.paths import BIN, PREFIX, ROOT, TINY

PROMPT_IDS = "1,450,439,293,110,289,307,122,113,285,114,123,432,398,115,118"
BITNET_CPP_IDS = "489 335 171 73 83 377 138 194 177 34 446 419 465 198 436 191"
LAYOUTS = ("arm64", "rows4")


def tool(name, *args, timeout=600):
    p = subprocess.run(PREFIX + [os.path.join(BIN, name)] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace", timeout=timeout)
    if re.search(r"Sanitizer|runtime error:|Segmentation", p.stderr):
        raise AssertionError(f"{name} {args}: crash or sanitizer report:\n{p.stderr}")
    return p


def read(path):
    with open(path, "rb") as f:
        return f.read()


class I2sLayouts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="bitnet-i2s-layouts-")
        cls.files = {}
        for layout in LAYOUTS:
            cls.files[layout] = os.path.join(cls.tmp.name, f"tiny-{layout}.gguf")
            i2s_layouts.repack_file(TINY, cls.files[layout], layout)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def cli(self, model, *args):
        p = tool("llama-cli", "-m", model, "-p", "The quick brown fox jumps", "-n", 16, "--temp", 0, "-c", 512,
                 "-t", 2, "--print-token-ids", *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        ids = re.search(r"^generated ids: (.*)$", p.stderr, re.M)  # --print-token-ids writes to stderr
        self.assertIsNotNone(ids, p.stderr)
        return ids.group(1), p.stderr

    def test_packer_changes_the_bytes_and_keeps_the_rest(self):
        tiny = read(TINY)
        info = gguf_reader.read_gguf(TINY)
        for layout in LAYOUTS:
            b = read(self.files[layout])
            self.assertEqual(len(b), len(tiny))
            self.assertEqual(b[:info.data_offset], tiny[:info.data_offset], "the header is kept")
            changed = [t.name for t in info.tensors
                       if b[info.data_offset + t.offset:][:t.nbytes] != tiny[info.data_offset + t.offset:][:t.nbytes]]
            self.assertEqual(len(changed), 14, changed)  # the I2_S tensors, and nothing else
            self.assertTrue(all(gguf_reader.TYPE_I2_S == info.tensor(n).type for n in changed))

    def test_llama_cli_gives_bitnet_cpps_ids_and_says_which_layout(self):
        for layout in LAYOUTS:
            with self.subTest(layout=layout):
                ids, err = self.cli(self.files[layout], "--i2s-layout", layout)
                self.assertEqual(ids, BITNET_CPP_IDS)
                self.assertIn(f"llama-cli: I2_S layout {layout} (--i2s-layout; the file records none), rewritten to "
                              "x86 at load (14 tensors, 0.4 MB; bitnet-convert --relayout", err)
                ids, err = self.cli(self.files[layout])
                self.assertNotEqual(ids, BITNET_CPP_IDS)
                self.assertIn("llama-cli: I2_S layout x86 (assumed: the file does not record how its I2_S weights "
                              "were packed", err)

    def test_logits_are_the_x86_files_on_every_kernel_path(self):
        for kernel in ("auto", "i2_s", "tl1", "tl2"):
            ref = self.path(f"ref-{kernel}.f32")
            p = tool("bitnet-logits", "-m", TINY, "--tokens", PROMPT_IDS, "--out", ref, "-t", 2, "--kernel", kernel)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(ref + ".json") as f:
                self.assertEqual(json.load(f)["i2s_layout"], "x86")
            for layout in LAYOUTS:
                with self.subTest(kernel=kernel, layout=layout):
                    out = self.path(f"{layout}-{kernel}.f32")
                    p = tool("bitnet-logits", "-m", self.files[layout], "--tokens", PROMPT_IDS, "--out", out, "-t",
                             2, "--kernel", kernel, "--i2s-layout", layout)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    self.assertEqual(read(out), read(ref))
                    with open(out + ".json") as f:
                        self.assertEqual(json.load(f)["i2s_layout"], layout)

    def test_perplexity_bench_and_the_microcontroller_node(self):
        text = self.path("text.txt")
        with open(text, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog " * 20)

        def ppl(model, *args):
            p = tool("llama-perplexity", "-m", model, "-f", text, "-c", 64, "-t", 2, *args)
            self.assertEqual(p.returncode, 0, p.stderr)
            return re.search(r"Final estimate: PPL = .*", p.stdout).group(0)

        def hashes(model, *args):
            p = tool("bitnet-mcu-run", "-m", model, "--tokens", PROMPT_IDS, "-n", 16, "--logit-hashes", *args)
            self.assertEqual(p.returncode, 0, p.stderr)
            return re.findall(r"^(?:generated ids|logits hash).*$", p.stdout, re.M), p.stdout

        want_ppl = ppl(TINY)
        want_hashes, _ = hashes(TINY)
        self.assertIn("generated ids: " + BITNET_CPP_IDS, want_hashes)
        for layout in LAYOUTS:
            with self.subTest(layout=layout):
                self.assertEqual(ppl(self.files[layout], "--i2s-layout", layout), want_ppl)
                got, out = hashes(self.files[layout], "--i2s-layout", layout)
                self.assertEqual(got, want_hashes)
                self.assertIn(f"I2_S layout {layout} (--i2s-layout; the file records none), rewritten", out)
                p = tool("llama-bench", "-m", self.files[layout], "--i2s-layout", layout, "-p", 8, "-n", 2, "-r", 1,
                         "--no-warmup", "-t", 1)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"llama-bench: I2_S layout {layout} (--i2s-layout", p.stderr)

    def test_relayout_writes_the_x86_file_which_loads_as_recorded(self):
        tiny = read(TINY)
        info = gguf_reader.read_gguf(TINY)
        for layout in LAYOUTS:
            with self.subTest(layout=layout):
                out = self.path(f"relayout-{layout}.gguf")
                p = tool("bitnet-convert", "--relayout", layout, self.files[layout], "-o", out)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn(f"14 I2_S tensors (0.4 MB) rewritten from the {layout} layout to x86, which the file "
                              "now records; 10 other tensors copied", p.stderr)
                self.assertIn(f"records no I2_S layout: its bytes were read as {layout} because --relayout says so "
                              f"(nothing in the file can confirm it); {out} records that it was rewritten from {layout}",
                              p.stderr)
                new = gguf_reader.read_gguf(out)
                self.assertEqual(new.kv.pop("bitnet.i2s.layout"), "x86")
                self.assertEqual(new.kv.pop("bitnet.i2s.rewritten_from"), layout)
                self.assertEqual({k: v for k, v in new.kv.items() if k != "general.alignment"},
                                 {k: v for k, v in info.kv.items() if k != "general.alignment"})
                b = read(out)
                for t in info.tensors:
                    n = t.nbytes if t.type != gguf_reader.TYPE_I2_S else t.ne[0] * t.ne[1] // 4 + 4  # codes, scale
                    nt = new.tensor(t.name)
                    self.assertEqual((nt.type, nt.ne, nt.nbytes), (t.type, t.ne, t.nbytes), t.name)
                    self.assertEqual(b[new.data_offset + nt.offset:][:n], tiny[info.data_offset + t.offset:][:n],
                                     t.name)
                ids, err = self.cli(out)
                self.assertEqual(ids, BITNET_CPP_IDS)
                self.assertIn("llama-cli: I2_S layout x86 (recorded in the file; bitnet-convert --relayout rewrote "
                              f"it from the {layout} layout it was told the original held)\n", err)
                self.assertNotIn("rewritten to x86 at load", err)
                # the record decides: another layout asked for is refused, naming both
                p = tool("llama-cli", "-m", out, "-p", "hi", "-n", 1, "--i2s-layout", layout)
                self.assertEqual(p.returncode, 1)
                self.assertIn(f"{out}: the file records I2_S layout x86 (key 'bitnet.i2s.layout'; bitnet-convert "
                              f"--relayout rewrote it from the {layout} layout it was told the original held), but "
                              f"layout {layout} was asked for (--i2s-layout {layout}): the file's bytes follow its "
                              "record; drop --i2s-layout or give x86 (if the original was packed in another layout, "
                              "rewrite the original again with that one)", p.stderr)
                p = tool("bitnet-convert", "--relayout", layout, out, "-o", self.path("again.gguf"))
                self.assertEqual(p.returncode, 1)
                self.assertIn("the file records I2_S layout x86", p.stderr)
                self.assertFalse(os.path.exists(self.path("again.gguf")))
        # in place (OUT = IN): read through the mapping while OUT.tmp is written, then renamed over it
        inplace = self.path("inplace.gguf")
        with open(inplace, "wb") as f:
            f.write(read(self.files["rows4"]))
        p = tool("bitnet-convert", "-q", "--relayout", "rows4", inplace, "-o", inplace)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(read(inplace), read(self.path("relayout-rows4.gguf")))
        self.assertEqual(self.cli(inplace)[0], BITNET_CPP_IDS)

    def test_relayout_refuses_what_it_cannot_verify_and_leaves_no_file(self):
        info = gguf_reader.read_gguf(TINY)
        t = info.tensor("blk.1.ffn_down.weight")  # M = 256, K = 768
        b = bytearray(read(self.files["rows4"]))
        b[info.data_offset + t.offset + 768 + 5] |= 0x30  # rows4: byte (group 1, column 5), bits 5:4 = row 5
        bad = self.path("code3.gguf")
        with open(bad, "wb") as f:
            f.write(b)
        out = self.path("never.gguf")
        p = tool("bitnet-convert", "--relayout", "rows4", bad, "-o", out)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"{bad}: tensor 'blk.1.ffn_down.weight': I2_S (rows4 layout): code 3 (no ternary value) at row 5, "
                      "column 5 of a 256 x 768 tensor", p.stderr)
        self.assertFalse(os.path.exists(out) or os.path.exists(out + ".tmp"))
        p = tool("llama-cli", "-m", bad, "-p", "hi", "-n", 1, "--i2s-layout", "rows4")
        self.assertEqual(p.returncode, 1)
        self.assertIn("code 3 (no ternary value) at row 5, column 5", p.stderr)
        p = tool("bitnet-convert", "--relayout", "arm64", TINY, "-o", out, "--outtype", "tl2")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--outtype converts a checkpoint; --relayout only rewrites a GGUF file's I2_S weights", p.stderr)
        p = tool("bitnet-convert", "--relayout", "arm64", "-o", out)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--relayout needs the GGUF file to rewrite", p.stderr)

    def test_mcu_plan_plans_x86_images_and_names_the_rewrite_for_the_others(self):
        arm = self.files["arm64"]
        p = tool("bitnet-mcu-plan", "-m", arm, "--board", "esp32s3", "--i2s-layout", "arm64")
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"{arm}: I2_S layout arm64: a board runs its image in place, in the x86 layout; rewrite it once "
                      f"(bitnet-convert --relayout arm64 {arm} -o OUT.gguf) and plan OUT.gguf", p.stderr)
        out = self.path("plan-x86.gguf")
        self.assertEqual(tool("bitnet-convert", "-q", "--relayout", "arm64", arm, "-o", out).returncode, 0)
        js = self.path("plan.json")
        p = tool("bitnet-mcu-plan", "-m", out, "--board", "esp32s3", "--json", js)
        self.assertEqual(p.returncode, 0, p.stderr)
        note = ("I2_S layout x86 (recorded in the file; bitnet-convert --relayout rewrote it from the arm64 layout it "
                "was told the original held)")
        self.assertIn(f"  {note}\n", p.stdout)
        with open(js) as f:
            self.assertEqual(json.load(f)["model"]["i2s_layout"], note)
        p = tool("bitnet-mcu-plan", "-m", arm, "--board", "esp32s3")  # no record, no flag: x86, and it says so
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("  I2_S layout x86 (assumed: the file does not record how its I2_S weights were packed", p.stdout)

    @unittest.skipIf(PREFIX, "the wrappers run build/bin's tools directly (no emulator)")
    def test_wrappers_pass_the_layout_on(self):
        arm = self.files["arm64"]
        p = subprocess.run([sys.executable, os.path.join(ROOT, "run_inference.py"), "-m", arm, "-p",
                            "The quick brown fox jumps", "-n", "16", "-temp", "0", "-t", "1", "--i2s-layout", "arm64"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", timeout=300,
                           env=dict(os.environ, BITNET_BUILD_DIR=os.path.dirname(BIN)))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("llama-cli: I2_S layout arm64 (--i2s-layout", p.stderr)
        cli = self.cli(TINY)[0]
        self.assertEqual(cli, BITNET_CPP_IDS)
        p = subprocess.run([sys.executable, os.path.join(ROOT, "utils", "e2e_benchmark.py"), "-m", arm, "-n", "2", "-p",
                            "8", "-t", "1", "-r", "1", "--i2s-layout", "arm64", "--build-dir", os.path.dirname(BIN)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("llama-bench: I2_S layout arm64 (--i2s-layout", p.stderr)
        text = self.path("wrap.txt")
        with open(text, "w") as f:
            f.write("the quick brown fox jumps over the lazy dog " * 20)
        ppl = {}
        for model, extra in ((TINY, []), (arm, ["--i2s-layout", "arm64"])):
            csv = self.path("ppl.csv")
            p = subprocess.run([sys.executable, os.path.join(ROOT, "utils", "test_perplexity.py"), "-m", model, "-f",
                                text, "-c", "64", "-t", "1", "--csv", csv, "-o", self.path("ppl-out"),
                                "--build-dir", os.path.dirname(BIN)] + extra,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace", timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            with open(csv) as f:
                row = f.read().splitlines()[1].split(",")
            ppl[model] = row[10:12]  # ppl, ppl_err
        self.assertEqual(ppl[arm], ppl[TINY])
        sys.path.insert(0, ROOT)
        import run_inference_server
        a = run_inference_server.parse_args(["-m", arm, "--i2s-layout", "rows4"])
        self.assertEqual(run_inference_server.command(a, "llama-server")[-2:], ["--i2s-layout", "rows4"])

    @unittest.skipIf(PREFIX or not os.path.exists(os.path.join(BIN, "llama-server")), "llama-server is native only")
    def test_llama_server_serves_the_x86_files_completion(self):
        from tests.server.server_util import Server, curl
        body = json.dumps({"prompt": [int(i) for i in PROMPT_IDS.split(",")], "max_tokens": 16, "temperature": 0})
        texts = {}
        for model, extra in ((TINY, []), (self.files["rows4"], ["--i2s-layout", "rows4"])):
            s = Server(model, "-np", 1, "-c", 512, "-t", 1, *extra, launcher=[os.path.join(BIN, "llama-server")])
            try:
                status, _, out = curl(s.url("/v1/completions"), data=body)
                self.assertEqual(status, 200, out)
                texts[model] = json.loads(out)["choices"][0]["text"]
            finally:
                s.stop()
            if extra:
                self.assertIn("llama-server: I2_S layout rows4 (--i2s-layout", "".join(s.log))
        self.assertEqual(texts[self.files["rows4"]], texts[TINY])


if __name__ == "__main__":
    unittest.main()
