"""build/bin/llama-perplexity and utils/test_perplexity.py (ctest perplexity_tool; native, ASan and
aarch64-under-qemu builds).

What is checked:
  * the tool's PPL equals exp(mean NLL) computed here with numpy, in float64, from the logits that
    build/bin/bitnet-logits writes for the same chunks (the text's tokens cut into chunks of -c, BOS in
    front of each when the vocabulary adds one, NLL of token j+1 from the logits at j for j in
    [c/2, c-1)), as are the running estimate after every chunk, the uncertainty (llama.cpp's formula)
    and the number of scored tokens; the token ids are the ones bitnet-logits gets for the same text.
    Both with bitnet.cpp's tiny model (SentencePiece vocabulary, BOS added) and with the same file set
    not to add BOS (the first token of each chunk is then kept); a vocabulary adding EOS is refused;
  * the same numbers, bit for bit, on every kernel path (i2_s, tl1, tl2), with 1 and 2 threads and other
    batch sizes; --chunks; the output format;
  * errors: exit status 1 and a message naming what is wrong, never a crash;
  * utils/test_perplexity.py: its CSV rows agree with the tool, and a failing file makes it exit 1 and
    is named.

Tolerance of the numpy comparison: 1e-10 on the mean NLL (absolute, in nats; the PPL and each running
estimate relative 1e-10). The logits are the same float32 numbers on both sides (the runtime's logits
do not depend on the batch split, the thread count or the other tokens of a call beyond those before
them: model.h, test_logits_tool.py), so what is left is float64 rounding in the log-softmax: exp and log
of glibc and numpy (< 2 ulp each) and a sum of n_vocab = 512 terms, relative error <= n_vocab * 2^-53
= 6e-14, i.e. an absolute error below 1e-13 per NLL and in the mean. A mistake in the method (the wrong
half scored, an off-by-one between logits and target, a missing BOS, a chunk boundary) moves the mean
NLL of these models by 1e-2 or more (their NLLs spread over tens of nats), 1e8 times the tolerance; the
test was checked to fail with such a mistake planted. The uncertainty is compared relative
1e-10 + 1e-13 * m2 / var: the m2 - m^2 of llama.cpp's formula cancels digits by that factor.

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build, e.g.
"qemu-aarch64 -L /usr/aarch64-linux-gnu"). Needs Debian's python3-numpy.
"""

import csv
import math
import os
import re
import shlex
import stat
import struct
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import bitnet_ref as R  # noqa: E402  (needs python3-numpy; says so when it is missing)
import numpy as np  # noqa: E402

BUILD = os.environ.get("BITNET_BUILD_DIR", os.path.join(ROOT, "build"))
PREFIX = shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))
TINY = os.path.join(ROOT, "tests", "data", "bitnetcpp-tiny", "ggml-model-i2_s.gguf")
SCRIPT = os.path.join(ROOT, "utils", "test_perplexity.py")
NLL_TOL = 1e-10
REL_TOL = 1e-10

RE_RUNNING = re.compile(r"\[(\d+)\]([0-9.]+|nan|inf),")
RE_FINAL = re.compile(r"^Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)$", re.M)
RE_PRECISE = re.compile(r"^llama-perplexity: mean NLL (\S+) over (\d+) tokens, PPL (\S+) \+/- (\S+)$", re.M)
RE_IDS = re.compile(r"^token ids:((?: \d+)*)$", re.M)


def run(cmd, **kw):
    """Run a tool of the build (through the emulator of a cross build). A sanitizer report fails the test
    even when the exit status is the expected 1 (ASan and UBSan exit with 1 in the ASan build)."""
    p = subprocess.run(PREFIX + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if "Sanitizer" in p.stderr or ": runtime error: " in p.stderr:
        raise AssertionError(f"{' '.join(cmd)}: sanitizer report:\n{p.stderr}")
    return p


def text_of(n_words, seed):
    """Deterministic English-like text: words, punctuation and line breaks."""
    rng = np.random.default_rng(seed)
    words = ("the quick brown fox jumps over a lazy dog while two cats sleep on the warm mat and birds "
             "sing in old trees near the river bank , . ; ?").split()
    out = []
    for i in range(n_words):
        out.append(words[rng.integers(len(words))])
        if i % 17 == 16:
            out.append("\n")
    return " ".join(out).replace(" \n ", "\n") + "\n"


def nll64(logits_row, token):
    """NLL of token under softmax(logits_row), in float64."""
    l = np.asarray(logits_row, dtype=np.float64)
    mx = l.max()
    return float(np.log(np.sum(np.exp(l - mx))) - (l[token] - mx))


def with_bool_key(src, dst, key, value):
    """Copy GGUF file src to dst with one more key: bool `key` = value (keys, tensor infos and tensor data
    unchanged; the data section re-aligned). The test's way to a vocabulary flag no tool writes."""
    with open(src, "rb") as f:
        data = f.read()
    r = R.Reader(memoryview(data), src)
    assert bytes(r.take(4)) == b"GGUF"
    r.scalar("<I")
    n_tensors, n_kv = r.scalar("<Q"), r.scalar("<Q")
    align = 32
    for _ in range(n_kv):
        k = r.string()
        v = r.value(r.scalar("<I"))
        assert k != key, f"{src} has {key} already"
        if k == "general.alignment":
            align = v
    kv_end = r.o
    for _ in range(n_tensors):
        r.string()
        r.take(8 * r.scalar("<I") + 4 + 8)
    info_end = r.o
    data_start = (info_end + align - 1) // align * align
    kb = key.encode()
    new_kv = struct.pack("<Q", len(kb)) + kb + struct.pack("<IB", 7, 1 if value else 0)  # 7 = GGUF bool
    head = data[:16] + struct.pack("<Q", n_kv + 1) + data[24:kv_end] + new_kv + data[kv_end:info_end]
    with open(dst, "wb") as f:
        f.write(head + b"\0" * (-len(head) % align) + data[data_start:])


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = os.path.join(BUILD, "bin", "llama-perplexity")
        cls.logits_tool = os.path.join(BUILD, "bin", "bitnet-logits")
        cls.dummy = os.path.join(BUILD, "bin", "bitnet-dummy")
        for t in (cls.tool, cls.logits_tool, cls.dummy):
            if not os.path.exists(t):
                raise AssertionError(f"{t} is missing: build the project first (BITNET_BUILD_DIR={BUILD})")
        cls.tmp = tempfile.TemporaryDirectory(prefix="bitnet_ppl_")
        cls.text = cls.write("text.txt", text_of(80, 1))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    @classmethod
    def write(cls, name, content):
        p = cls.path(name)
        with open(p, "w", encoding="utf-8") as f:
            f.write(content)
        return p

    def ppl(self, model, *args, text=None):
        """Run the tool; (stdout, stderr) after asserting success."""
        p = run([self.tool, "-m", model, "-f", text or self.text, *args])
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout, p.stderr

    @staticmethod
    def parse(stdout, stderr):
        """(running estimates, (final PPL, final +/-) as printed, (mean NLL, count, PPL, +/-) at full precision,
        token ids or None)."""
        lines = stdout.split("\n")
        assert len(lines) == 3 and lines[2] == "", stdout
        running = [(int(i), float(v)) for i, v in RE_RUNNING.findall(lines[0])]
        assert "".join(f"[{i}]{v}," for i, v in RE_RUNNING.findall(lines[0])) == lines[0], lines[0]
        assert [i for i, _ in running] == list(range(1, len(running) + 1)), lines[0]
        final = RE_FINAL.fullmatch(lines[1])
        assert final, lines[1]
        precise = RE_PRECISE.search(stderr)
        assert precise, stderr
        ids = RE_IDS.search(stderr)
        return ([v for _, v in running], (float(final.group(1)), float(final.group(2))),
                (float(precise.group(1)), int(precise.group(2)), float(precise.group(3)), float(precise.group(4))),
                [int(x) for x in ids.group(1).split()] if ids else None)


class PerplexityMatchesNumpy(Base):
    """The tool's numbers against numpy over bitnet-logits' logits of the same chunks."""

    def check(self, model, n_ctx, n_batch, add_bos, bos_id, chunks=None):
        extra = ["--chunks", str(chunks)] if chunks else []
        out, err = self.ppl(model, "-c", str(n_ctx), "-b", str(n_batch), "-t", "2", "--print-token-ids", *extra)
        running, final, (mean_nll, count, ppl, unc), ids = self.parse(out, err)

        # the same token ids as bitnet-logits gives for the text (its trailing newline dropped, as -f does)
        with open(self.text, encoding="utf-8") as f:
            text = f.read()
        self.assertTrue(text.endswith("\n"))
        hdr_out = self.path(f"text-{os.path.basename(model)}.logits")
        p = run([self.logits_tool, "-m", model, "-p", text[:-1], "--out", hdr_out])
        self.assertEqual(p.returncode, 0, p.stderr)
        hdr, _ = R.read_logits(hdr_out)
        self.assertEqual(ids, hdr["tokens"])
        self.assertEqual(hdr["add_bos"], add_bos)
        self.assertEqual(ids[0] == bos_id, add_bos)

        n_chunk = len(ids) // n_ctx if chunks is None else min(chunks, len(ids) // n_ctx)
        self.assertGreaterEqual(n_chunk, 2)
        self.assertEqual(len(running), n_chunk)
        first = n_ctx // 2
        nlls, cumulative = [], []
        for i in range(n_chunk):
            chunk = ids[i * n_ctx:(i + 1) * n_ctx]
            fed = ([bos_id] if add_bos else chunk[:1]) + chunk[1:]
            out_i = self.path(f"chunk{i}-{os.path.basename(model)}.logits")
            p = run([self.logits_tool, "-m", model, "--tokens", ",".join(map(str, fed)), "--out", out_i, "-t", "1"])
            self.assertEqual(p.returncode, 0, p.stderr)
            h, a = R.read_logits(out_i)
            self.assertEqual(h["tokens"], fed)
            nlls += [nll64(a[j], chunk[j + 1]) for j in range(first, n_ctx - 1)]
            cumulative.append(math.exp(np.mean(nlls)))
        nlls = np.array(nlls)
        self.assertEqual(count, n_chunk * (n_ctx - 1 - first))
        self.assertEqual(count, len(nlls))
        want_mean = float(np.mean(nlls))
        self.assertLess(abs(mean_nll - want_mean), NLL_TOL, f"mean NLL {mean_nll!r} vs numpy {want_mean!r}")
        self.assertLess(abs(ppl / math.exp(want_mean) - 1), REL_TOL)
        for k, (got, want) in enumerate(zip(running, cumulative)):
            # printed with 4 decimals: rounding, or the float64 agreement for numbers beyond 1e6
            self.assertLessEqual(abs(got - want), max(0.5e-4 + 1e-9, REL_TOL * want), f"chunk {k + 1}")
        m, m2 = float(np.mean(nlls)), float(np.mean(nlls ** 2))
        var = m2 - m * m
        self.assertGreater(var, 0)
        want_unc = math.exp(m) * math.sqrt(var / (count - 1))
        self.assertLess(abs(unc / want_unc - 1), REL_TOL + 1e-13 * m2 / var, f"+/- {unc!r} vs numpy {want_unc!r}")
        self.assertLessEqual(abs(final[0] - ppl), max(0.5e-4 + 1e-9, 1e-15 * ppl))
        self.assertLessEqual(abs(final[1] - unc), max(0.5e-5 + 1e-9, 1e-15 * unc))
        return nlls

    def test_tiny_model_bos(self):
        # odd n_ctx (first = 16 of 33) and batches of 10 that straddle the first scored position
        self.check(TINY, 33, 10, True, 1)

    def test_chunks_cap(self):
        self.check(TINY, 20, 512, True, 1, chunks=2)

    def test_vocabulary_without_bos(self):
        # the tiny model with tokenizer.ggml.add_bos_token = false: no BOS before the text, and the first
        # token of every chunk is kept
        model = self.path("tiny-no-bos.gguf")
        with_bool_key(TINY, model, "tokenizer.ggml.add_bos_token", False)
        self.check(model, 16, 5, False, 1, chunks=4)

    def test_vocabulary_adding_eos_is_refused(self):
        model = self.path("tiny-eos.gguf")
        with_bool_key(TINY, model, "tokenizer.ggml.add_eos_token", True)
        p = run([self.tool, "-m", model, "-f", self.text, "-c", "16"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn(f"the vocabulary of {model} appends EOS to every text (tokenizer.ggml.add_eos_token)", p.stderr)


class PerplexityIdentical(Base):
    def test_every_path_thread_count_and_batch(self):
        ref = None
        for kernel in ("i2_s", "tl1", "tl2"):
            for t, b in (("1", "512"), ("2", "7")):
                out, err = self.ppl(TINY, "-c", "24", "--chunks", "3", "--kernel", kernel, "-t", t, "-b", b)
                self.assertIn(f"path {kernel.upper()}:", err)
                precise = RE_PRECISE.search(err).group(0)
                if ref is None:
                    ref = (out, precise)
                    self.parse(out, err)  # the format
                self.assertEqual((out, precise), ref, f"--kernel {kernel} -t {t} -b {b}")

    def test_tl2_file_without_tile_record_with_lut_tiles(self):
        # bitnet.cpp's TL2 files record no tiles: refused without --lut-tiles; with the kernel_config.ini of
        # its tiles, the same numbers bit for bit as the I2_S file of the same weights
        ini = os.path.join(ROOT, "tests", "data", "kernel_config", "tiny-tl2.ini")
        dims = ["--n-embd", "256", "--n-ff", "768", "--n-layer", "2", "--n-head", "4", "--vocab-size", "512",
                "--seed", "1234", "-q"]
        i2s, tl2 = self.path("norecord-ref.i2_s.gguf"), self.path("norecord.tl2.gguf")
        for args in (["-o", i2s, "--outtype", "i2_s"],
                     ["-o", tl2, "--outtype", "tl2", "--no-tile-record", "--tiles", "256,256,128,96,32",
                      "--tiles", "256,768,128,48,32", "--tiles", "768,256,384,96,32"]):
            p = run([self.dummy, *dims, *args])
            self.assertEqual(p.returncode, 0, p.stderr)
        p = run([self.tool, "-m", tl2, "-f", self.text, "-c", "24", "--chunks", "2"])
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("records no tile table", p.stderr)
        ref_out, ref_err = self.ppl(i2s, "-c", "24", "--chunks", "2", "--kernel", "tl2")
        out, err = self.ppl(tl2, "-c", "24", "--chunks", "2", "--kernel", "tl2", "--lut-tiles", ini)
        self.assertIn("tiles from --lut-tiles", err)  # its own path (auto is TL1 on AArch64: repacked)
        self.assertEqual((out, RE_PRECISE.search(err).group(0)), (ref_out, RE_PRECISE.search(ref_err).group(0)))

    def test_default_ctx_is_capped_by_the_model(self):
        # a model with a 64-token context: -c defaults to 64, not llama.cpp's 512
        model = self.path("ctx64.gguf")
        p = run([self.dummy, "-q", "-o", model, "--arch", "llama", "--n-embd", "256", "--n-ff", "512", "--n-layer",
                 "1", "--n-head", "4", "--n-head-kv", "2", "--vocab-size", "320", "--ctx", "64", "--seed", "3"])
        self.assertEqual(p.returncode, 0, p.stderr)
        long_text = self.write("long.txt", text_of(200, 2))
        out, err = self.ppl(model, "--chunks", "2", text=long_text)
        self.assertRegex(err, r"; n_ctx 64 \(default\), \d+ of \d+ chunks")


class PerplexityErrors(Base):
    def test_errors(self):
        empty = self.write("empty.txt", "")
        newline = self.write("newline.txt", "\n")
        short = self.write("short.txt", "the quick brown fox jumps over the lazy dog\n")
        m = ["-m", TINY]
        f = m + ["-f", self.text]
        cases = [
            ([], "no model given", 2),
            (m, "no text given: use -f TEXT_FILE", 2),
            (f + ["--bogus"], "unknown argument '--bogus'", 2),
            (f + ["-c"], "-c needs a value", 2),
            (f + ["-c", "2"], "-c expects an integer in [3, 16777216] (a chunk scores the tokens after positions "
                              "n_ctx/2 .. n_ctx-2: -c 2 would score none), got '2'", 2),
            (f + ["-c", "x"], "-c expects an integer", 2),
            (f + ["-b", "0"], "-b expects an integer in [1,", 2),
            (f + ["-t", "0"], "-t expects an integer in [1, 1024]", 2),
            (f + ["--chunks", "0"], "--chunks expects -1 (all) or a number of chunks >= 1, got '0'", 2),
            (f + ["--chunks", "-2"], "--chunks expects an integer in [-1,", 2),
            (f + ["--kernel", "tl3"], "--kernel expects auto, i2_s, tl1 or tl2, got 'tl3'", 2),
            (f + ["--head-type", "q4"], "--head-type expects stored or q8_0, got 'q4'", 2),
            (m + ["-f", self.path("missing.txt")], f"cannot open text file '{self.path('missing.txt')}': No such file", 1),
            (m + ["-f", self.tmp.name], f"cannot read text file '{self.tmp.name}': Is a directory", 1),
            (m + ["-f", empty], f"text file '{empty}' is empty", 1),
            (m + ["-f", newline], f"text file '{newline}' is empty", 1),
            (["-m", self.path("missing.gguf"), "-f", self.text], "cannot load model", 1),
            (f + ["-c", "1024"], f"-c 1024 is larger than the model's context: {TINY} has bitnet.context_length 512", 1),
            (f + ["-c", "3", "--chunks", "1"], "n_ctx 3 with 1 chunk(s) scores only 1 token(s)", 1),
        ]
        for args, msg, code in cases:  # 2: a bad command line, 1: a file, model or text error (args.h)
            p = run([self.tool] + args)
            self.assertEqual(p.returncode, code, f"{args}: {p.stderr}")
            self.assertIn(msg, p.stderr, args)
            self.assertEqual(p.stderr.count("llama-perplexity: error: "), 1, p.stderr)
        # too short: the message gives the text's token count and what -c needs
        p = run([self.tool, "-m", TINY, "-f", short, "-c", "16", "--print-token-ids"])
        self.assertEqual(p.returncode, 1, p.stderr)
        n = len(RE_IDS.search(p.stderr).group(1).split())
        self.assertGreaterEqual(n, 6)
        self.assertLess(n, 32)
        self.assertIn(f"{short}: the text has {n} tokens, too few for n_ctx 16: one chunk is 16 tokens and the method "
                      f"needs at least 2 * n_ctx = 32 tokens (-c {n // 2} or less fits this text)", p.stderr)
        self.assertEqual(p.stdout, "")
        # --help: usage on stdout, status 0
        p = run([self.tool, "--help"])
        self.assertEqual(p.returncode, 0)
        self.assertIn("usage: llama-perplexity -m MODEL -f TEXT_FILE", p.stdout)
        # bitnet.cpp's script passes -ngl 0: accepted
        out, _ = self.ppl(TINY, "-c", "16", "--chunks", "2", "-ngl", "0")
        self.assertIn("Final estimate: PPL = ", out)


class TestPerplexityScript(Base):
    """utils/test_perplexity.py over several files (in a cross build through a wrapper that runs the tool
    under the emulator)."""

    def script(self, *args):
        tool = self.tool
        if PREFIX:
            tool = self.path("llama-perplexity-wrapper.sh")
            with open(tool, "w") as f:
                f.write("#!/bin/sh\nexec " + " ".join(map(shlex.quote, PREFIX + [self.tool])) + ' "$@"\n')
            os.chmod(tool, os.stat(tool).st_mode | stat.S_IXUSR)
        return subprocess.run([sys.executable, SCRIPT, "--llama-perplexity", tool, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=self.tmp.name)

    def test_csv_rows_and_failures(self):
        second = self.write("second.txt", text_of(90, 5))
        short = self.write("tooshort.txt", "a b c\n")
        out_csv = self.path("out/ppl.csv")
        p = self.script("-m", TINY, "-f", self.text, second, "-c", "24", "--chunks", "3", "-t", "2", "--kernel",
                        "i2_s", "--csv", out_csv)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(out_csv, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["dataset"] for r in rows], ["text", "second"])
        for r, path in zip(rows, (self.text, second)):
            out, err = self.ppl(TINY, "-c", "24", "--chunks", "3", "-t", "2", "--kernel", "i2_s", text=path)
            _, _, (_, count, ppl, unc), _ = self.parse(out, err)
            self.assertEqual(r["status"], "ok", r)
            self.assertEqual((float(r["ppl"]), float(r["ppl_err"]), int(r["scored_tokens"])), (ppl, unc, count))
            self.assertEqual((r["n_ctx"], r["threads"], r["kernel"], r["model"], r["file"]), ("24", "2", "I2_S", TINY, path))
            self.assertEqual(int(r["chunks"]), min(3, int(r["text_tokens"]) // 24))
            self.assertGreater(float(r["tokens_per_s"]), 0)
        self.assertTrue(os.path.exists(self.path("out/ppl.log")))

        # a file that fails: exit status 1, the file named, its row marked, the others still measured
        p = self.script("-m", TINY, "-f", self.text, short, "-c", "24", "--chunks", "2", "--csv", out_csv)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(f"test_perplexity: FAILED: {short}: the text has ", p.stderr)
        with open(out_csv, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["status"] for r in rows], ["ok", "failed"])
        self.assertIn("too few for n_ctx 24", rows[1]["error"])
        with open(self.path("out/ppl.log"), encoding="utf-8") as f:
            log = f.read()
        self.assertIn(f"-f {short} -c 24", log)
        self.assertNotIn("Sanitizer", log)
        # a missing file fails the same way
        p = self.script("-m", TINY, "-f", self.path("nope.txt"), "-c", "24", "--csv", out_csv)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"FAILED: {self.path('nope.txt')}: cannot open text file", p.stderr)
        # bitnet.cpp's -e needs llama-quantize: refused with a message
        p = self.script("-m", TINY, "-e")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no llama-quantize", p.stderr)

    def test_data_dir_and_quick(self):
        data = self.path("data")
        for name, seed in (("alpha", 11), ("beta", 12)):
            os.makedirs(os.path.join(data, name), exist_ok=True)
            with open(os.path.join(data, name, "test.txt"), "w", encoding="utf-8") as f:
                f.write(text_of(150, seed))
        os.makedirs(os.path.join(data, "no-test-file"), exist_ok=True)
        p = self.script("-m", TINY, "-d", data, "-c", "300", "--quick", "--chunks", "1", "-o", self.path("res"))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        found = [f for f in os.listdir(self.path("res")) if f.endswith(".csv")]
        self.assertEqual(len(found), 1, found)
        with open(os.path.join(self.path("res"), found[0]), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([(r["dataset"], r["n_ctx"], r["chunks"]) for r in rows], [("alpha", "128", "1"), ("beta", "128", "1")])


if __name__ == "__main__":
    unittest.main()
