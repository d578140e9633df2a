"""build/bin/bitnet-logits: the output file and its JSON header, top-k lines that agree with the file,
identical bytes for any thread count and batch size, and clear errors (exit 2 for the command line,
1 for the model or the output) that leave no partial file behind.

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (emulator of a cross build).
"""

import json
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bitnet_ref as R  # noqa: E402  (needs python3-numpy)
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BITNET_BUILD_DIR", os.path.join(ROOT, "build"))
PREFIX = shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))
TOKENS = [1, 300, 301, 302, 260, 270, 280]


def run(cmd):
    return subprocess.run(PREFIX + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class LogitsTool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tool = os.path.join(BUILD, "bin", "bitnet-logits")
        dummy = os.path.join(BUILD, "bin", "bitnet-dummy")
        for t in (cls.tool, dummy):
            if not os.path.exists(t):
                raise AssertionError(f"{t} is missing: build the project first (BITNET_BUILD_DIR={BUILD})")
        cls.tmp = tempfile.TemporaryDirectory(prefix="bitnet_logits_")
        cls.model = os.path.join(cls.tmp.name, "m.gguf")
        p = run([dummy, "-q", "-o", cls.model, "--arch", "llama", "--n-embd", "256", "--n-ff", "512", "--n-layer",
                 "1", "--n-head", "4", "--n-head-kv", "2", "--vocab-size", "320", "--ctx", "64", "--seed", "3"])
        assert p.returncode == 0, p.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def logits(self, out, *extra):
        p = run([self.tool, "-m", self.model, "--tokens", ",".join(map(str, TOKENS)), "--out", out, *extra])
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def test_file_header_and_top_k_agree(self):
        out = self.path("a.bin")
        p = self.logits(out, "--top-k", "3", "-t", "1")
        hdr, a = R.read_logits(out)
        with open(out + ".json", encoding="utf-8") as f:
            raw = json.load(f)
        self.assertEqual(raw, hdr)
        for k, v in {"format": "bitnet-logits", "version": 1, "arch": "llama", "n_vocab": 320,
                     "n_tokens": len(TOKENS), "tokens": TOKENS, "prompt": None, "dtype": "f32",
                     "byte_order": "little", "shape": [len(TOKENS), 320], "data_file": "a.bin",
                     "threads": 1, "model": self.model}.items():
            self.assertEqual(hdr[k], v, k)
        self.assertIn(hdr["kernel_path"], ("I2_S", "TL1", "TL2"))
        self.assertEqual(os.path.getsize(out), len(TOKENS) * 320 * 4)
        lines = p.stdout.splitlines()
        self.assertEqual(len(lines), len(TOKENS))
        for t, line in enumerate(lines):
            head, _, rest = line.partition(" top: ")
            self.assertEqual(head, f"pos={t} token={TOKENS[t]}")
            pairs = [x.split("=") for x in rest.split()]
            ids = [int(i) for i, _ in pairs]
            self.assertEqual(ids, list(np.argsort(-a[t], kind="stable")[:3]))
            for i, v in pairs:
                self.assertAlmostEqual(float(v), a[t][int(i)], places=5)

    def test_same_bytes_for_any_threads_and_batch(self):
        ref = None
        for t, b in (("1", "512"), ("2", "3"), ("3", "1")):
            out = self.path(f"t{t}b{b}.bin")
            self.logits(out, "-t", t, "-b", b)
            with open(out, "rb") as f:
                data = f.read()
            if ref is None:
                ref = data
            self.assertEqual(data, ref, f"-t {t} -b {b}")

    def test_q8_0_head(self):
        # --head-type q8_0: the head requantized at load (said in the header), logits that differ from the
        # stored head's by little, the same bytes for any thread count and batch size
        stored = self.path("h_stored.bin")
        self.logits(stored, "-t", "1", "--head-type", "stored")
        _, a = R.read_logits(stored)
        ref = None
        for t, b in (("1", "512"), ("2", "3"), ("3", "1")):
            out = self.path(f"h_q8_t{t}b{b}.bin")
            self.logits(out, "-t", t, "-b", b, "--head-type", "q8_0")
            with open(out, "rb") as f:
                data = f.read()
            if ref is None:
                ref = data
                hdr, q = R.read_logits(out)
                self.assertIn("head: Q8_0 (requantized from F16 at load)", hdr["kernel_summary"])
                self.assertFalse(np.array_equal(a, q))
                rel = np.linalg.norm(a - q, axis=1) / np.linalg.norm(a, axis=1)
                self.assertLess(rel.max(), 0.02)  # the bound is derived in tests/test_model.cc (Q8HeadStays...)
            self.assertEqual(data, ref, f"-t {t} -b {b}")

    def test_prompt_text(self):
        out = self.path("p.bin")
        p = run([self.tool, "-m", self.model, "-p", "the quick brown fox", "--out", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "")  # --out alone prints no top-k
        hdr, a = R.read_logits(out)
        self.assertEqual(hdr["prompt"], "the quick brown fox")
        self.assertTrue(hdr["add_bos"])
        self.assertEqual(hdr["tokens"][0], 1)
        self.assertEqual(a.shape, (len(hdr["tokens"]), 320))

    def test_errors(self):
        m = ["-m", self.model]
        cases = [
            ([], 2, "no model given"),
            (m, 2, "exactly one of -p TEXT and --tokens IDS"),
            (m + ["-p", "x", "--tokens", "1"], 2, "exactly one of"),
            (m + ["--tokens", "1,x"], 2, "--tokens expects"),
            (m + ["--tokens", "1", "--top-k", "0"], 2, "--top-k expects"),
            (m + ["--tokens", "1", "-t", "0"], 2, "-t expects"),
            (m + ["--tokens", "1", "--kernel", "tl3"], 2, "--kernel expects"),
            (m + ["--tokens", "1", "--head-type", "q4"], 2, "--head-type expects stored or q8_0, got 'q4'"),
            (m + ["--tokens", "1", "--bogus"], 2, "unknown argument '--bogus'"),
            (m + ["--tokens", "1", "--no-bos"], 2, "--no-bos only applies to -p"),
            (["-m", self.path("missing.gguf"), "--tokens", "1"], 1, "missing.gguf"),
            (m + ["--tokens", "1,320"], 1, "token id 320 at index 1 is out of range [0, 320)"),
            (m + ["--tokens", "1", "--out", self.path("no/such/dir/x.bin")], 1, "no/such/dir/x.bin.tmp"),
        ]
        for args, rc, msg in cases:
            p = run([self.tool] + args)
            self.assertEqual(p.returncode, rc, f"{args}: {p.stderr}")
            self.assertIn(msg, p.stderr, args)
        # a failed run leaves nothing under the output name
        out = self.path("failed.bin")
        p = run([self.tool, "-m", self.model, "--tokens", "1,999", "--out", out])
        self.assertEqual(p.returncode, 1)
        for f in (out, out + ".tmp", out + ".json", out + ".json.tmp"):
            self.assertFalse(os.path.exists(f), f)


if __name__ == "__main__":
    unittest.main()
