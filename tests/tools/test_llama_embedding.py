"""build/bin/llama-embedding end to end (docs/EMBEDDINGS.md) on tiny qwen3 / gemma3 dummies written by bitnet-dummy:

- the output formats: json and json+ carry one vector per text (L2 norm 1 by default), json+ the cosine
  matrix (diagonal 1, a text repeated has cosine 1 with itself elsewhere), array the same numbers, the text
  format "embedding I:" lines and the matrix;
- a text's vector does not depend on the other texts, -b, -t or --kernel (the printed digits are equal);
- --pooling none gives one vector per token, mean/cls/last the rows bitnet-logits --embd writes for the same
  tokens (pooled here), --embd-normalize -1/0/2 as defined;
- --embd-separator, -f, --verbose-prompt; a warning when last-token pooling does not read an EOS;
- bad command lines exit 2 naming the flag, a missing model or an unreadable text file exit 1.

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (the emulator of a cross build)."""
import json
import math
import os
import struct
import subprocess
import tempfile
import unittest

from tests.tools.paths import BIN, PREFIX, TINY

TEXTS = ["the quick brown fox", "jumps over the lazy dog", "the quick brown fox", "a"]


def run(name, *args, timeout=300):
    p = subprocess.run(PREFIX + [os.path.join(BIN, name)] + [str(a) for a in args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, errors="replace", timeout=timeout)
    if "Sanitizer" in p.stderr or "runtime error:" in p.stderr:
        raise AssertionError(f"{name} {args}: sanitizer report:\n{p.stderr}")
    return p


class LlamaEmbedding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.models = {}
        for arch, extra in (("qwen3", ["--n-head-kv", "2"]), ("gemma3", ["--n-head-kv", "1", "--swa", "4",
                                                                       "--swa-pattern", "2"])):
            path = os.path.join(cls.tmp.name, f"{arch}.gguf")
            p = run("bitnet-dummy", "--arch", arch, "--n-embd", 256, "--n-ff", 512, "--n-layer", 2, "--n-head", 4,
                    "--n-embd-head", 128, "--vocab-size", 1000, "--outtype", "i2_s", "--seed", 7, "-q", "-o", path,
                    *extra)
            assert p.returncode == 0, p.stderr
            cls.models[arch] = path

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def embed(self, arch, texts, *args):
        p = run("llama-embedding", "-m", self.models[arch], "-p", "\n".join(texts), "--embd-output-format", "json+",
                *args)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout), p

    def test_json_plus_and_independence(self):
        for arch in self.models:
            with self.subTest(arch=arch):
                out, p = self.embed(arch, TEXTS)
                vecs = [d["embedding"] for d in out["data"]]
                self.assertEqual([d["index"] for d in out["data"]], [0, 1, 2, 3])
                self.assertEqual(len(vecs[0]), 256)
                for v in vecs:
                    self.assertAlmostEqual(math.sqrt(sum(x * x for x in v)), 1.0, places=5)
                cos = out["cosineSimilarity"]
                for i in range(4):
                    self.assertAlmostEqual(cos[i][i], 1.0, places=5)
                self.assertAlmostEqual(cos[0][2], 1.0, places=5)  # the same text twice
                self.assertLess(cos[0][1], 0.999)
                self.assertEqual(vecs[0], vecs[2])
                self.assertIn("pooling last (the model's)", p.stderr)
                # alone, other -b / -t / --kernel: the same digits
                for args in (["-b", "1"], ["-t", "1"], ["--kernel", "i2_s"], ["--kernel", "tl1"], ["-b", "7", "-t", "2"]):
                    alone, _ = self.embed(arch, [TEXTS[1]], *args)
                    self.assertEqual(alone["data"][0]["embedding"], vecs[1], args)

    def test_pooling_against_the_token_rows(self):
        arch = "qwen3"
        p = run("llama-embedding", "-m", self.models[arch], "-p", TEXTS[1], "--verbose-prompt",
                "--embd-output-format", "json", "--embd-normalize", "-1", "--pooling", "none")
        self.assertEqual(p.returncode, 0, p.stderr)
        ids = [int(x) for x in p.stderr.split("tokens:")[1].split("\n")[0].split()]
        rows = [d["embedding"] for d in json.loads(p.stdout)["data"]]
        self.assertEqual(len(rows), len(ids))
        self.assertEqual(ids[-1], 2)  # add_eos_token: the built-in vocabulary's EOS
        out = os.path.join(self.tmp.name, "rows.bin")
        q = run("bitnet-logits", "-m", self.models[arch], "--tokens", ",".join(map(str, ids)), "--embd", "--out", out)
        self.assertEqual(q.returncode, 0, q.stderr)
        with open(out + ".json") as f:
            self.assertEqual(json.load(f)["shape"], [len(ids), 256])
        with open(out, "rb") as f:
            raw = f.read()
        ref = [list(struct.unpack_from("<256f", raw, 1024 * t)) for t in range(len(ids))]
        for t in range(len(ids)):
            for i in range(256):
                self.assertAlmostEqual(rows[t][i], ref[t][i], delta=1e-6 + 1e-6 * abs(ref[t][i]))
        for pooling, want in (("cls", ref[0]), ("last", ref[-1]),
                              ("mean", [sum(r[i] for r in ref) / len(ref) for i in range(256)])):
            p = run("llama-embedding", "-m", self.models[arch], "-p", TEXTS[1], "--embd-output-format", "json",
                    "--embd-normalize", "-1", "--pooling", pooling)
            v = json.loads(p.stdout)["data"][0]["embedding"]
            for i in range(256):
                self.assertAlmostEqual(v[i], want[i], delta=2e-6 + 1e-6 * abs(want[i]), msg=pooling)
        # max-abs normalization: the largest |value| becomes 32760
        p = run("llama-embedding", "-m", self.models[arch], "-p", TEXTS[1], "--embd-output-format", "array",
                "--embd-normalize", "0")
        v = json.loads(p.stdout)[0]
        self.assertAlmostEqual(max(abs(x) for x in v), 32760.0, places=2)

    def test_text_format_separator_and_file(self):
        p = run("llama-embedding", "-m", self.models["gemma3"], "-p", "one||two||", "--embd-separator", "||")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertTrue(lines[0].startswith("embedding 0: ") and " ... " in lines[0], lines)
        self.assertTrue(lines[1].startswith("embedding 1: "), lines)
        self.assertIn("cosine similarity matrix:", p.stdout)
        self.assertIn("2 texts", p.stderr)
        path = os.path.join(self.tmp.name, "texts.txt")
        with open(path, "w") as f:
            f.write("\n".join(TEXTS) + "\n")
        a = run("llama-embedding", "-m", self.models["gemma3"], "-f", path, "--embd-output-format", "array")
        b = run("llama-embedding", "-m", self.models["gemma3"], "-p", "\n".join(TEXTS), "--embd-output-format", "array")
        self.assertEqual(a.returncode, 0, a.stderr)
        self.assertEqual(a.stdout, b.stdout)
        self.assertEqual(len(json.loads(a.stdout)), 4)

    def test_last_pooling_without_eos_warns(self):
        path = os.path.join(self.tmp.name, "mean.gguf")
        self.assertEqual(run("bitnet-dummy", "--arch", "qwen3", "--n-embd", 256, "--n-ff", 512, "--n-layer", 1,
                             "--n-head", 4, "--vocab-size", 600, "--outtype", "f32", "--pooling", "mean", "-q",
                             "-o", path).returncode, 0)
        p = run("llama-embedding", "-m", path, "-p", "hello", "--embd-output-format", "json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("pooling mean (the model's)", p.stderr)
        # bitnet.cpp's bitnet models have no EOS appended: last pooling warns that it reads another token
        p = run("llama-embedding", "-m", TINY, "-p", "hello", "--pooling", "last")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("does not end with EOS", p.stderr)

    def test_bad_command_lines(self):
        m = self.models["qwen3"]
        for args, needle in ((["-p", "x"], "no model"), (["-m", m], "exactly one of -p"),
                             (["-m", m, "-p", "x", "--pooling", "rank"], "--pooling"),
                             (["-m", m, "-p", "x", "--embd-output-format", "xml"], "--embd-output-format"),
                             (["-m", m, "-p", "x", "--embd-normalize", "-2"], "--embd-normalize"),
                             (["-m", m, "-p", "x", "--embd-separator", ""], "--embd-separator")):
            p = run("llama-embedding", *args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(needle, p.stderr)
        p = run("llama-embedding", "-m", os.path.join(self.tmp.name, "missing.gguf"), "-p", "x")
        self.assertEqual(p.returncode, 1)
        self.assertIn("missing.gguf", p.stderr)
        p = run("llama-embedding", "-m", m, "-f", os.path.join(self.tmp.name, "missing.txt"))
        self.assertEqual(p.returncode, 1)
        self.assertIn("missing.txt", p.stderr)
        p = run("llama-embedding", "-m", m, "-p", "a b c d e f g h", "-c", "3")
        self.assertEqual(p.returncode, 1)
        self.assertIn("more than -c 3", p.stderr)


if __name__ == "__main__":
    unittest.main()
