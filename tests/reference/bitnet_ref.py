#!/usr/bin/python3
"""bitnet_ref — an independent reference forward pass for the runtime's architectures.

Written from the published descriptions of the graphs (sources below), not from src/model/: it shares
nothing with the C runtime but the file format. Its own small GGUF reader decodes F32, F16, BF16, Q8_0
and I2_S tensors (type ids and byte sizes from codegen/ggml_types.py); all arithmetic is float64 numpy (Debian python3-numpy).

Graphs (general.architecture):
  bitnet        BitNet b1.58 (Ma et al. 2024, arXiv:2402.17764) as bitnet.cpp runs 1bitLLM's models:
                attention and FFN sub-norms (RMSNorm before attn_output and before ffn_down), FFN
                silu(gate) * up, RoPE NEOX (pairs i, i + d/2). formats.md "Architecture bitnet".
  bitnet-b1.58  BitNet b1.58 2B4T (arXiv:2504.12285; Hugging Face transformers' BitNet model:
  bitnet-25     "hidden_act": "relu2", attn_sub_norm before o_proj, ffn_sub_norm before down_proj,
                rotate_half RoPE = NEOX): as bitnet with FFN relu(gate)^2 * up.
  llama         LLaMA (Touvron et al. 2023) with ternary projections: no sub-norms, silu(gate) * up,
                RoPE NORM (pairs 2i, 2i + 1: llama.cpp-style converters permute the Q/K rows).
  qwen3         BitNet-embedding 0.6B / Qwen3 (docs/EMBEDDINGS.md section 2): per-projection input RMSNorms
                (*_norm_in, each optional), QK head RMSNorms over head_dim before RoPE NEOX, silu(gate) * up,
                attention scale 1/sqrt(d).
  gemma3        BitNet-embedding 270M / Gemma3 (same section): as qwen3 with gelu_tanh(gate) * up, token
                embeddings times sqrt(n_embd) (float32), q times 1/sqrt(d) before attention with softmax
                scale 1, RMSNorms after attention (post_attention_norm) and after the FFN (post_ffw_norm),
                and local layers (when gemma3.attention.sliding_window n_swa > 0: layer l unless
                l % sliding_window_pattern == pattern - 1, pattern default 6) that see keys at p' > p - n_swa
                and rotate with gemma3.rope.freq_base_swa (default 10000, no frequency scaling); logits
                capped to c * tanh(l / c) when the file has gemma3.final_logit_softcapping c.
All: RMSNorm (Zhang & Sennrich 2019) y = x / sqrt(mean(x^2) + eps) * w; causal softmax attention with
scale 1/sqrt(d), GQA (query head h reads key/value head h // (n_head / n_head_kv)); RoPE angle of pair i
at position p: p * freq_scale * base^(-2i/d) (Su et al. 2021); logits = head . RMSNorm(x) with head =
output.weight, or token_embd when the file has none. Embeddings (docs/EMBEDDINGS.md sections 2-3):
e_t = RMSNorm(x_t, output_norm) of every token, pool() and normalize() as llama-embedding applies them.

Options that reproduce documented roundings of the runtime (so each kernel path can be compared with
its own definition, see tests/reference/test_reference.py):
  act_quant  each projection input quantized per token as docs/LAYOUTS.md section 1 defines for the
             ternary paths: s = 127 / max(max|x|, 1e-5) in float32, q = clamp(round_half_even(x*s),
             -127, 127), the projection sees q / s;
  f16        q, k, v and the softmax probabilities rounded to IEEE binary16 (the F16 KV cache and
             ggml's attention rounding; gemma3's q after its 1/sqrt(d) factor), the head input rounded to
             the head's format (binary16 for an F16 head, Q8_0 blocks for a Q8_0 head), the input of an
             F16 projection rounded to binary16 (ggml's F16 matrix product; docs/EMBEDDINGS.md section
             4), and GELU as ggml's CPU GELU computes it: 0 for x <= -10, x for x >= 10, else
             binary16(gelu(binary16(x))) (a table over the binary16 values); without the option GELU
             is exact.

Command line (also writes the same file format as build/bin/bitnet-logits):
  bitnet_ref.py MODEL --tokens 1,2,3 [--act-quant auto|on|off] [--no-f16] [--out FILE] [--top-k K]
  bitnet_ref.py MODEL --tokens 1,2,3 --embd [--out FILE]   e_t of every token (as bitnet-logits --embd)
"""

import argparse
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir))
from codegen import ggml_types  # noqa: E402  (the repository root is on sys.path now)

try:
    import numpy as np
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("the reference forward pass needs numpy (Debian package python3-numpy): run "
                      "deps/install.sh tests (tests/run-all.sh and .ci/run do)") from e

# ---- GGUF reader (GGUF v2/v3, little endian) -----------------------------------------------------

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
# type ids and byte sizes: codegen/ggml_types.py (the repository's one copy of the format facts)
T_F32, T_F16, T_Q8_0, T_Q6_K, T_BF16 = (ggml_types.TYPE_F32, ggml_types.TYPE_F16, ggml_types.TYPE_Q8_0,
                                        ggml_types.TYPE_Q6_K, ggml_types.TYPE_BF16)
T_I2_S, T_TL1, T_TL2 = ggml_types.TYPE_I2_S, ggml_types.TYPE_TL1, ggml_types.TYPE_TL2


class GGUFError(Exception):
    pass


class Reader:
    def __init__(self, data, path):
        self.d, self.o, self.path = data, 0, path

    def take(self, n):
        if n < 0 or self.o + n > len(self.d):
            raise GGUFError(f"{self.path}: truncated at byte {self.o} (need {n} more)")
        b = self.d[self.o:self.o + n]
        self.o += n
        return b

    def scalar(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        n = self.scalar("<Q")
        return bytes(self.take(n)).decode("utf-8", errors="surrogateescape")

    def value(self, t):
        if t in _SCALAR:
            return self.scalar(_SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.scalar("<I"), self.scalar("<Q")
            return [self.value(et) for _ in range(n)]
        raise GGUFError(f"{self.path}: unknown GGUF value type {t}")


class GGUF:
    """kv: dict of key -> value; tensors: dict of name -> (type, ne list, bytes); offsets: dict of
    name -> the byte offset of its data in the file."""

    def __init__(self, path):
        with open(path, "rb") as f:
            data = memoryview(f.read())
        r = Reader(data, path)
        if bytes(r.take(4)) != b"GGUF":
            raise GGUFError(f"{path}: not a GGUF file")
        version = r.scalar("<I")
        if version not in (2, 3):
            raise GGUFError(f"{path}: GGUF version {version}")
        n_tensors, n_kv = r.scalar("<Q"), r.scalar("<Q")
        self.kv = {}
        for _ in range(n_kv):
            key = r.string()
            self.kv[key] = r.value(r.scalar("<I"))
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            nd = r.scalar("<I")
            ne = [r.scalar("<Q") for _ in range(nd)]
            infos.append((name, ne, r.scalar("<I"), r.scalar("<Q")))
        align = self.kv.get("general.alignment", 32)
        start = (r.o + align - 1) // align * align
        self.tensors, self.offsets = {}, {}
        for name, ne, t, off in infos:
            n = _nbytes(t, ne, path, name)
            if start + off + n > len(data):
                raise GGUFError(f"{path}: tensor {name} runs past the end of the file")
            self.tensors[name] = (t, ne, data[start + off:start + off + n])
            self.offsets[name] = start + off

    def matrix(self, name):
        """Tensor as float64 numpy array of shape (ne[1], ne[0]) (rows = outputs), or (ne[0],)."""
        t, ne, b = self.tensors[name]
        if len(ne) == 1 or (len(ne) == 2 and ne[1] == 1 and t in (T_F32, T_F16, T_BF16)):
            return _dense(t, b, ne[0], name).reshape(ne[0])
        k, m = ne[0], ne[1]
        if t == T_I2_S:
            return _i2s(b, m, k, name)
        if t in (T_TL1, T_TL2):
            raise GGUFError(f"{name}: the reference reads I2_S, F32, F16, BF16 or Q8_0 files, not TL1/TL2")
        return _dense(t, b, m * k, name).reshape(m, k)


def _nbytes(t, ne, path, name):
    if t not in (T_F32, T_F16, T_BF16, T_Q8_0, T_Q6_K, T_I2_S, T_TL1, T_TL2):
        raise GGUFError(f"{path}: tensor {name} has type id {t}, which the reference does not read")
    return ggml_types.nbytes(t, tuple(ne))


def _dense(t, b, n, name):
    if t == T_F32:
        return np.frombuffer(b, dtype="<f4", count=n).astype(np.float64)
    if t == T_F16:
        return np.frombuffer(b, dtype="<f2", count=n).astype(np.float64)
    if t == T_BF16:
        u = np.frombuffer(b, dtype="<u2", count=n).astype(np.uint32) << 16
        return u.view(np.float32).astype(np.float64)
    if t == T_Q8_0:
        blk = np.frombuffer(b, dtype=np.uint8, count=n // 32 * 34).reshape(-1, 34)
        d = blk[:, :2].copy().view("<f2").astype(np.float64)
        q = blk[:, 2:].copy().view(np.int8).astype(np.float64)
        return (q * d).reshape(n)
    if t == T_Q6_K:
        # ggml's Q6_K: 210-byte blocks of 256 weights: ql[128] (low 4 bits), qh[64] (high 2 bits),
        # scales[16] (int8, one per 16 weights), d (binary16); value = d * scale * (q - 32). In each
        # 128-weight half, weights l, l+32, l+64, l+96 (l < 32) use the low nibble of ql[l], the low
        # nibble of ql[l+32], the high nibble of ql[l], the high nibble of ql[l+32] and bit pairs
        # 0-1, 2-3, 4-5, 6-7 of qh[l].
        blk = np.frombuffer(b, dtype=np.uint8, count=n // 256 * 210).reshape(-1, 210)
        ql, qh = blk[:, :128].astype(np.int64), blk[:, 128:192].astype(np.int64)
        sc = blk[:, 192:208].copy().view(np.int8).astype(np.float64)
        d = blk[:, 208:210].copy().view("<f2").astype(np.float64)[:, 0]
        q = np.empty((blk.shape[0], 256), dtype=np.int64)
        for half in range(2):
            lo, hi = ql[:, 64 * half:64 * half + 64], qh[:, 32 * half:32 * half + 32]
            base = 128 * half
            q[:, base:base + 32] = (lo[:, :32] & 15) | ((hi & 3) << 4)
            q[:, base + 32:base + 64] = (lo[:, 32:] & 15) | (((hi >> 2) & 3) << 4)
            q[:, base + 64:base + 96] = (lo[:, :32] >> 4) | (((hi >> 4) & 3) << 4)
            q[:, base + 96:base + 128] = (lo[:, 32:] >> 4) | (((hi >> 6) & 3) << 4)
        scale = np.repeat(sc, 16, axis=1)  # weight i uses scales[i // 16]
        return ((q - 32).astype(np.float64) * scale * d[:, None]).reshape(n)
    raise GGUFError(f"{name}: type id {t} is not a dense type")


def _i2s(b, m, k, name):
    """I2_S (formats.md): blocks of 128 weights over the flattened tensor, byte p of a block holds
    weights p (bits 7:6), p+32 (5:4), p+64 (3:2), p+96 (1:0); code 0, 1, 2 = -1, 0, +1; scale float32
    at byte m*k/4."""
    n = m * k
    if n % 128:
        raise GGUFError(f"{name}: I2_S needs M*K % 128 == 0")
    raw = np.frombuffer(b, dtype=np.uint8, count=n // 4).reshape(-1, 32)
    codes = np.stack([(raw >> 6) & 3, (raw >> 4) & 3, (raw >> 2) & 3, raw & 3], axis=1).reshape(n)
    if np.any(codes == 3):
        raise GGUFError(f"{name}: I2_S code 3 (not a ternary weight)")
    scale = struct.unpack_from("<f", b, n // 4)[0]
    return ((codes.astype(np.float64) - 1.0) * scale).reshape(m, k)


# ---- the graph --------------------------------------------------------------------------------------

ARCHS = {  # name: (FFN activation, RoPE style, sub-norms)
    "bitnet": ("silu", "neox", True),
    "bitnet-b1.58": ("relu2", "neox", True),
    "bitnet-25": ("relu2", "neox", True),
    "llama": ("silu", "norm", False),
    "qwen3": ("silu", "neox", False),
    "gemma3": ("gelu", "neox", False),
}
EMBED_ARCHS = ("qwen3", "gemma3")  # docs/EMBEDDINGS.md section 2: QK head norms, optional *_norm_in
PROJ = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
TERNARY = (T_I2_S, T_TL1, T_TL2)
POOLING = ("none", "mean", "cls", "last")  # <arch>.pooling_type 0..3 (docs/EMBEDDINGS.md section 1)


def f16(x):
    return np.asarray(x, dtype=np.float64).astype(np.float16).astype(np.float64)


def _act_scaled(x):
    """(x * s in float32, s) of docs/LAYOUTS.md section 1: s = 127 / max(max|x|, 1e-5) in float32."""
    xf = np.asarray(x, dtype=np.float32)
    amax = np.float32(np.max(np.abs(xf))) if xf.size else np.float32(0)
    s = np.float32(127.0) / np.maximum(amax, np.float32(1e-5))
    return xf * s, s


def act_quant(x, flip=()):
    """docs/LAYOUTS.md section 1, in float32 as specified; returns the dequantized q / s. flip: indices of
    values rounded to their other neighbouring integer instead (see rounding_flips_explaining)."""
    y, s = _act_scaled(x)
    q = np.clip(np.rint(y), -127, 127)
    for j in flip:
        q[j] = np.clip(np.floor(y[j]) if q[j] > y[j] else np.ceil(y[j]), -127, 127)
    return q.astype(np.float64) / np.float64(s)


def int8_margin(x):
    """Per value of x: the distance of act_quant's scaled value x * s from the nearest rounding boundary
    (a half-integer), in units of one int8 step."""
    y = np.abs(_act_scaled(x)[0].astype(np.float64))
    return np.abs(y - np.floor(y) - 0.5)


def f16_neighbours(x):
    """(x rounded to binary16, the other binary16 neighbour of x, margin) per value: margin is the distance
    of x from the midpoint of the two in units of their spacing (0 a tie, 0.5 a binary16 value; 0.5 also
    for values beyond the binary16 range)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        h = x.astype(np.float16)
        r = h.astype(np.float64)
        other = np.where(x >= r, np.nextafter(h, np.float16(np.inf)),
                         np.nextafter(h, np.float16(-np.inf))).astype(np.float64)
        margin = np.abs(x - (r + other) / 2) / np.abs(other - r)
    return r, other, np.where(np.isfinite(margin), margin, 0.5)


def q8_0_round(x):
    """ggml's Q8_0 quantization of a row (blocks of 32: d = amax/127, q = round-half-away(x/d), stored
    d in binary16), dequantized."""
    xf = np.asarray(x, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(xf), axis=1)
    d = amax / np.float32(127)
    inv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, 1), 0).astype(np.float32)
    v = xf * inv[:, None]
    q = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return (q.astype(np.float64) * f16(d)[:, None]).reshape(-1)


def gelu(x, rounded=False, rnd=None):
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks & Gimpel
    2016; docs/EMBEDDINGS.md section 2). rounded: as ggml's CPU GELU computes it from a float32 input x:
    0 for x <= -10, x for x >= 10, else its table over binary16 values, binary16(gelu(binary16(x)))
    (rnd: the binary16 rounding to use, default f16)."""
    def exact(v):
        return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))
    x = np.asarray(x, dtype=np.float64)
    if not rounded:
        return exact(x)
    rnd = rnd or f16
    xf = x.astype(np.float32).astype(np.float64)
    return np.where(xf <= -10.0, 0.0, np.where(xf >= 10.0, xf, rnd(exact(rnd(xf)))))


def pool(e, seq_ranges, kind):
    """docs/EMBEDDINGS.md section 3. e: [n_tokens][n_embd] embeddings of a batch; seq_ranges: (start, end)
    token ranges of its sequences (texts); kind: none|mean|cls|last or its pooling_type number 0..3.
    Returns one row per sequence (mean of its rows, its first row, its last row), or for none every row
    of every sequence in order."""
    if isinstance(kind, int):
        kind = POOLING[kind]
    if kind not in POOLING:
        raise ValueError(f"pooling {kind!r}: none, mean, cls or last")
    e = np.asarray(e, dtype=np.float64)
    rows = []
    for a, b in seq_ranges:
        if not 0 <= a < b <= e.shape[0]:
            raise ValueError(f"sequence range ({a}, {b}) outside the {e.shape[0]} embeddings")
        if kind == "none":
            rows.extend(e[a:b])
        elif kind == "mean":
            rows.append(np.mean(e[a:b], axis=0))
        elif kind == "cls":
            rows.append(e[a])
        else:
            rows.append(e[b - 1])
    return np.stack(rows)


def normalize(v, p=2):
    """docs/EMBEDDINGS.md section 3 (llama-embedding's --embd-normalize) of each row of v: -1 none;
    0 divide by max|v_i| / 32760 (the int16 range); 2 divide by the Euclidean norm; other p > 0 divide by
    (sum |v_i|^p)^(1/p). A zero row stays zero."""
    v = np.asarray(v, dtype=np.float64)
    rows = v.reshape(-1, v.shape[-1])
    if p < 0:
        return v.copy()
    if p == 0:
        div = np.max(np.abs(rows), axis=1) / 32760.0
    elif p == 2:
        div = np.sqrt(np.sum(rows * rows, axis=1))
    else:
        div = np.sum(np.abs(rows) ** p, axis=1) ** (1.0 / p)
    scale = np.where(div > 0, 1.0 / np.where(div > 0, div, 1.0), 0.0)
    return (rows * scale[:, None]).reshape(v.shape)


class Model:
    def __init__(self, path):
        g = GGUF(path)
        self.path = path
        kv = g.kv
        arch = kv.get("general.architecture")
        if arch not in ARCHS:
            raise GGUFError(f"{path}: architecture {arch!r} is not one the reference knows ({', '.join(ARCHS)})")
        self.arch = arch
        self.act, self.rope, self.sub_norms = ARCHS[arch]

        def key(s, default=None):
            v = kv.get(f"{arch}.{s}", default)
            if v is None:
                raise GGUFError(f"{path}: missing key {arch}.{s}")
            return v

        def tensor(name):
            if name not in g.tensors:
                raise GGUFError(f"{path}: missing tensor {name} (architecture {arch})")
            return g.matrix(name)

        self.n_layer = key("block_count")
        self.n_embd = key("embedding_length")
        self.n_head = key("attention.head_count")
        self.n_head_kv = key("attention.head_count_kv", self.n_head)
        self.d = key("attention.key_length", self.n_embd // self.n_head)
        dv = key("attention.value_length", self.d)
        if dv != self.d:
            raise GGUFError(f"{path}: {arch}.attention.value_length {dv} != key_length {self.d}: the reference "
                            "knows one head size")
        self.eps = key("attention.layer_norm_rms_epsilon")
        self.base = key("rope.freq_base", 10000.0)
        self.freq_scale = 1.0
        if kv.get(f"{arch}.rope.scaling.type", "linear") == "linear":
            factor = kv.get(f"{arch}.rope.scaling.factor", 0.0)
            if factor:
                self.freq_scale = 1.0 / factor
        pt = kv.get(f"{arch}.pooling_type")
        if pt is not None and pt not in range(len(POOLING)):
            raise GGUFError(f"{path}: {arch}.pooling_type {pt}: 0 none, 1 mean, 2 cls or 3 last")
        self.pooling = None if pt is None else POOLING[pt]
        # the graph's facts, one attribute each (the tests change one at a time: "mutants")
        self.qk_norm = arch in EMBED_ARCHS        # RMSNorm of every q / k head over d before RoPE
        self.use_norm_in = True                   # apply the *_norm_in tensors the file has
        self.post_norms = arch == "gemma3"        # post_attention_norm, post_ffw_norm
        # gemma3: token embeddings times sqrtf((float)n_embd), in float32 as the runtime does
        self.embd_scale = np.sqrt(np.float32(self.n_embd)) if arch == "gemma3" else None
        # attention scale: gemma3 multiplies q by 1/sqrt(d) (before the F16 rounding of q) and uses
        # softmax scale 1; the others scale the scores by 1/sqrt(d)
        inv_sqrt_d = 1.0 / math.sqrt(self.d)
        self.q_factor = inv_sqrt_d if arch == "gemma3" else None
        self.kq_scale = 1.0 if arch == "gemma3" else inv_sqrt_d
        # gemma3 local layers (docs/EMBEDDINGS.md section 1): none unless sliding_window > 0
        self.n_swa, self.swa_pattern, self.base_swa = 0, 6, 10000.0
        if arch == "gemma3":
            self.n_swa = key("attention.sliding_window", 0)
            self.swa_pattern = key("attention.sliding_window_pattern", 6)
            self.base_swa = key("rope.freq_base_swa", 10000.0)
            if self.n_swa and self.swa_pattern < 1:
                raise GGUFError(f"{path}: gemma3.attention.sliding_window_pattern {self.swa_pattern} < 1")
        # gemma3 logits: c * tanh(l / c) when the file has gemma3.final_logit_softcapping c
        # (docs/EMBEDDINGS.md section 4; Gemma 2/3's final_logit_softcapping)
        self.softcap = kv.get("gemma3.final_logit_softcapping") if arch == "gemma3" else None
        self.embd = tensor("token_embd.weight")
        self.head_name = "output.weight" if "output.weight" in g.tensors else "token_embd.weight"
        self.head = g.matrix(self.head_name)
        self.head_type = g.tensors[self.head_name][0]
        self.n_vocab = self.head.shape[0]
        self.output_norm = tensor("output_norm.weight")
        # For rounding_flips_explaining: the roundings of a position's values (int8 activation
        # quantizations and binary16 roundings, numbered k = 0, 1, ... in the order the graph does them)
        # can round chosen values to their other neighbour: flips maps (position, k) -> value indices.
        # When trace is a number, every value within that fraction of a step of a rounding boundary is
        # listed in near as ((position, k), index, margin).
        self.flips, self.trace, self.near, self.labels = {}, None, [], {}
        self._pos, self._count, self._where, self._f16_on = 0, {}, "", False
        self.ternary = False
        self.has_norm_in = False
        self.layers = []
        for l in range(self.n_layer):
            L = {}
            names = ["attn_norm", "ffn_norm"] + (["attn_sub_norm", "ffn_sub_norm"] if self.sub_norms else [])
            if self.qk_norm:
                names += ["attn_q_norm", "attn_k_norm"]
            if self.post_norms:
                names += ["post_attention_norm", "post_ffw_norm"]
            for nm in names:
                L[nm] = tensor(f"blk.{l}.{nm}.weight")
            for p in PROJ:
                name = f"blk.{l}.{p}.weight"
                L[p] = tensor(name)
                self.ternary = self.ternary or g.tensors[name][0] in TERNARY
                sname = f"blk.{l}.{p}.scale"
                L[p + ".scale"] = float(g.matrix(sname)[0]) if sname in g.tensors else 1.0
                L[p + ".type"] = g.tensors[name][0]
                nname = f"blk.{l}.{p}_norm_in.weight"
                if nname in g.tensors:  # optional, each on its own (bitnet.cpp's loader)
                    L[p + "_norm_in"] = g.matrix(nname)
                    if L[p + "_norm_in"].shape != (L[p].shape[1],):
                        raise GGUFError(f"{path}: {nname} has {L[p + '_norm_in'].size} values, the input of "
                                        f"{name} has {L[p].shape[1]}")
                    self.has_norm_in = True
            for nm in ("attn_q_norm", "attn_k_norm"):
                if nm in L and L[nm].shape != (self.d,):
                    raise GGUFError(f"{path}: blk.{l}.{nm}.weight has {L[nm].size} values, head size is {self.d}")
            self.layers.append(L)

    def rmsnorm(self, x, w):
        return x / math.sqrt(float(np.mean(x * x)) + self.eps) * w

    def linear(self, L, p, x, quant):
        """Projection p of layer L: its input RMSNorm (*_norm_in) when present, then the int8 activation
        quantization when quant, then the matrix product and the tensor's scale."""
        if self.use_norm_in and p + "_norm_in" in L:
            x = self.rmsnorm(x, L[p + "_norm_in"])
        if self._f16_on and L[p + ".type"] == T_F16:
            x = self._f16(x, f"binary16 input of {p}")
        return (L[p] @ (self._quant(x, f"int8 input of {p}") if quant else x)) * L[p + ".scale"]

    def _rounding(self, what):
        """The key (position, k) of the next rounding of the current position; when tracing, labels[key]
        says where it is."""
        key = (self._pos, self._count.get(self._pos, 0))
        self._count[self._pos] = key[1] + 1
        if self.trace is not None:
            self.labels[key] = f"position {self._pos}, {self._where}: {what}"
        return key

    def _quant(self, x, what):
        """act_quant, with the flips and trace of this rounding."""
        key = self._rounding(what)
        if self.trace is not None:
            m = int8_margin(x)
            self.near += [(key, int(j), float(m[j])) for j in np.nonzero(m <= self.trace)[0]]
        return act_quant(x, self.flips.get(key, ()))

    def _f16(self, x, what):
        """f16, with the flips and trace of this rounding."""
        key = self._rounding(what)
        flip = self.flips.get(key, ())
        if self.trace is None and not flip:
            return f16(x)
        x = np.asarray(x, dtype=np.float64)
        r, other, m = f16_neighbours(x)
        if self.trace is not None:
            m = m.reshape(-1)
            self.near += [(key, int(j), float(m[j])) for j in np.nonzero(m <= self.trace)[0]]
        if flip:
            r = r.reshape(-1).copy()
            r[list(flip)] = other.reshape(-1)[list(flip)]
            r = r.reshape(x.shape)
        return r

    def head_norm(self, v, w):
        """RMSNorm of every head of v (n_heads * d values) over its d values."""
        h = v.reshape(-1, self.d)
        return (h / np.sqrt(np.mean(h * h, axis=1, keepdims=True) + self.eps) * w).reshape(-1)

    def is_local(self, layer):
        """Gemma3: layer attends within the sliding window (and rotates with freq_base_swa)."""
        return self.n_swa > 0 and layer % self.swa_pattern != self.swa_pattern - 1

    def rotate(self, v, pos, base=None, freq_scale=None):
        """RoPE on every head of v (n_heads * d values)."""
        base = self.base if base is None else base
        freq_scale = self.freq_scale if freq_scale is None else freq_scale
        d, half = self.d, self.d // 2
        i = np.arange(half, dtype=np.float64)
        ang = pos * freq_scale * base ** (-2.0 * i / d)
        c, s = np.cos(ang), np.sin(ang)
        h = v.reshape(-1, d).copy()
        if self.rope == "neox":
            x0, x1 = h[:, :half].copy(), h[:, half:].copy()
            h[:, :half], h[:, half:] = x0 * c - x1 * s, x0 * s + x1 * c
        else:
            x0, x1 = h[:, 0::2].copy(), h[:, 1::2].copy()
            h[:, 0::2], h[:, 1::2] = x0 * c - x1 * s, x0 * s + x1 * c
        return h.reshape(-1)

    def activation(self, x, f16_on):
        if self.act == "relu2":
            return np.maximum(x, 0.0) ** 2
        if self.act == "gelu":
            return gelu(x, rounded=f16_on, rnd=lambda v: self._f16(v, "binary16 GELU table"))
        return x / (1.0 + np.exp(-x))

    def hidden(self, tokens, act_quant_on=None, f16_on=True):
        """Hidden states after the last layer, [len(tokens)][n_embd] (float64), of one sequence.
        act_quant_on None: on exactly when the projections are ternary-typed (I2_S/TL1/TL2), as the
        runtime does."""
        quant = self.ternary if act_quant_on is None else act_quant_on
        rnd = self._f16 if f16_on else (lambda x, what: x)
        n, d = len(tokens), self.d
        group = self.n_head // self.n_head_kv
        self._count, self.near, self._f16_on = {}, [], f16_on
        x = [self.embd[t].copy() for t in tokens]
        if self.embd_scale is not None:
            x = [(v.astype(np.float32) * np.float32(self.embd_scale)).astype(np.float64) for v in x]
        for l, L in enumerate(self.layers):
            self._where = f"layer {l}"
            local = self.is_local(l)
            base, fscale = (self.base_swa, 1.0) if local else (self.base, self.freq_scale)
            ks, vs = [], []
            for t in range(n):
                self._pos = t
                h = self.rmsnorm(x[t], L["attn_norm"])
                q = self.linear(L, "attn_q", h, quant)
                k = self.linear(L, "attn_k", h, quant)
                if self.qk_norm:
                    q, k = self.head_norm(q, L["attn_q_norm"]), self.head_norm(k, L["attn_k_norm"])
                q, k = self.rotate(q, t, base, fscale), self.rotate(k, t, base, fscale)
                if self.q_factor is not None:
                    q = q * self.q_factor
                q = rnd(q, "binary16 q").reshape(self.n_head, d)
                ks.append(rnd(k, "binary16 k (KV cache)").reshape(self.n_head_kv, d))
                vs.append(rnd(self.linear(L, "attn_v", h, quant), "binary16 v (KV cache)").reshape(self.n_head_kv, d))
                first = max(0, t - self.n_swa + 1) if local else 0  # keys p' with t - p' < n_swa
                K, V = np.stack(ks[first:]), np.stack(vs[first:])  # [keys][n_head_kv][d]
                att = np.empty((self.n_head, d))
                for hh in range(self.n_head):
                    sc = K[:, hh // group, :] @ q[hh] * self.kq_scale
                    e = np.exp(sc - np.max(sc))
                    att[hh] = rnd(e / np.sum(e), f"binary16 softmax of head {hh}") @ V[:, hh // group, :]
                a = att.reshape(-1)
                if self.sub_norms:
                    a = self.rmsnorm(a, L["attn_sub_norm"])
                o = self.linear(L, "attn_output", a, quant)
                if self.post_norms:
                    o = self.rmsnorm(o, L["post_attention_norm"])
                x[t] = x[t] + o
                m = self.rmsnorm(x[t], L["ffn_norm"])
                gte, up = self.linear(L, "ffn_gate", m, quant), self.linear(L, "ffn_up", m, quant)
                hid = self.activation(gte, f16_on) * up
                if self.sub_norms:
                    hid = self.rmsnorm(hid, L["ffn_sub_norm"])
                f = self.linear(L, "ffn_down", hid, quant)
                if self.post_norms:
                    f = self.rmsnorm(f, L["post_ffw_norm"])
                x[t] = x[t] + f
        return np.stack(x) if n else np.empty((0, self.n_embd))

    def embeddings(self, tokens, act_quant_on=None, f16_on=True):
        """e_t = RMSNorm(x_t, output_norm) of every token, [len(tokens)][n_embd] (float64): the token
        embeddings of docs/EMBEDDINGS.md section 2 (llama.cpp's t_embd), before pooling."""
        return np.stack([self.rmsnorm(v, self.output_norm) for v in self.hidden(tokens, act_quant_on, f16_on)])

    def forward(self, tokens, act_quant_on=None, f16_on=True):
        """Logits [len(tokens)][n_vocab] (float64) of every position. act_quant_on None: on exactly
        when the projections are ternary-typed (I2_S/TL1/TL2), as the runtime does."""
        out = np.empty((len(tokens), self.n_vocab))
        for t, h in enumerate(self.embeddings(tokens, act_quant_on, f16_on)):
            self._pos, self._where = t, "head"
            if f16_on and self.head_type == T_F16:
                h = self._f16(h, "binary16 head input")
            elif f16_on and self.head_type == T_Q8_0:
                h = q8_0_round(h)
            out[t] = self.head @ h
        if self.softcap:
            out = self.softcap * np.tanh(out / self.softcap)
        return out


# ---- comparing a ternary path with the reference ----------------------------------------------------

# A rounding whose input lies this close to a rounding boundary (in units of the rounding's step: one int8
# step, one binary16 spacing) may go the other way in the runtime: its float32 values differ from the
# reference's float64 ones by float32 rounding (~1e-6 relative), and by more once an earlier rounding
# of the position went the other way. Measured (x86-64): flips at up to 1.4e-2 of a binary16 spacing (a
# GELU input) and 2.7e-2 of an int8 step (an attention output, 2.1e-4 of its largest value: about one
# binary16 spacing of a softmax probability times a v value).
FLIP_MARGIN = 0.05


def rounding_flips_explaining(model, compute, got, bound, rel_err, margin=FLIP_MARGIN, max_flips=6, exact=1e-5):
    """The rounding flips that bring model's output within bound of the runtime's output got.

    The runtime computes in float32, the reference in float64; a value whose int8 quantization or
    binary16 rounding is nearly a tie may round to the other neighbour in the runtime. One int8 step of
    one value, or one binary16 spacing of the largest value of a vector that is quantized next (it sets
    that vector's int8 scale), moves the dummy models' outputs by ~3e-3 to ~2e-2 of their largest value,
    more than the comparison's bound. So when got misses compute(model) by more than bound somewhere,
    this looks for the values the runtime rounded the other way among those within margin of a rounding
    boundary: at the positions from the first one deviating by more than `exact` (float32 noise is
    ~1e-7; a flip at position t changes nothing before t) to the first one beyond bound, in order of
    margin, it takes the first flip that removes 90 % of the first position's deviation and lowers the
    sum over positions, else the one lowering that sum most; and repeats, at most max_flips times.
    compute(model) -> the reference output [n_tokens][n] (honouring model.flips); rel_err(a, b) -> the
    deviation of each position. Returns (flips, deviation): flips a dict (position, k) -> value indices
    (empty when none were needed), or None when no such flips bring every position within bound, with
    the deviation left. Leaves model.flips empty."""
    flips = {}
    try:
        while True:
            model.flips, model.trace = flips, margin
            err = rel_err(got, compute(model))
            near = sorted(model.near, key=lambda c: c[2])
            model.trace = None
            if err.max() <= bound:
                return flips, err
            if sum(len(v) for v in flips.values()) >= max_flips:
                return None, err
            first, last = int(np.argmax(err > exact)), int(np.argmax(err > bound))
            best = None
            for key, j, _ in near:
                if not first <= key[0] <= last or j in flips.get(key, ()):
                    continue
                trial = dict(flips)
                trial[key] = tuple(flips.get(key, ())) + (j,)
                model.flips = trial
                e = rel_err(got, compute(model))
                if best is None or e.sum() < best[1].sum():
                    best = (trial, e)
                if e[first] <= 0.1 * err[first] and e.sum() < err.sum():
                    best = (trial, e)
                    break
            if best is None or best[1].sum() >= err.sum():
                return None, err
            flips = best[0]
    finally:
        model.flips, model.trace = {}, None


# ---- the output files of build/bin/bitnet-logits (--out; --embd --out) ------------------------------

def read_output(path, fmt="bitnet-logits"):
    """(header dict, float64 array of the header's shape [n_tokens][n]) of a bitnet-logits --out file
    (fmt "bitnet-logits": n = n_vocab) or a bitnet-logits --embd --out file (fmt "bitnet-embd": n = n_embd)."""
    with open(path + ".json", encoding="utf-8") as f:
        hdr = json.load(f)
    if hdr.get("format") != fmt or hdr.get("dtype") != "f32" or hdr.get("byte_order") != "little":
        raise ValueError(f"{path}.json: not a little-endian f32 {fmt} header")
    t, v = hdr["shape"]
    a = np.fromfile(path, dtype="<f4")
    if a.size != t * v:
        raise ValueError(f"{path}: {a.size} floats, the header says {t} x {v}")
    return hdr, a.reshape(t, v).astype(np.float64)


def read_logits(path):
    """(header dict, float64 array [n_tokens][n_vocab]) of a bitnet-logits --out file."""
    return read_output(path, "bitnet-logits")


def read_embd(path):
    """(header dict, float64 array [n_tokens][n_embd]) of a bitnet-logits --embd --out file."""
    return read_output(path, "bitnet-embd")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--tokens", required=True, help="token ids, comma separated")
    ap.add_argument("--act-quant", choices=("auto", "on", "off"), default="auto")
    ap.add_argument("--no-f16", action="store_true", help="no binary16 / Q8_0 rounding emulation")
    ap.add_argument("--embd", action="store_true",
                    help="the embeddings e_t = RMSNorm(x_t, output_norm) of every token instead of logits")
    ap.add_argument("--out", help="write FILE (f32 little endian) + FILE.json like bitnet-logits (--embd)")
    ap.add_argument("--top-k", type=int, default=5)
    a = ap.parse_args(argv)
    try:
        tokens = [int(x) for x in a.tokens.replace(" ", ",").split(",") if x]
        m = Model(a.model)
    except (GGUFError, ValueError, OSError) as e:
        print(f"bitnet_ref: {e}", file=sys.stderr)
        return 1
    if not tokens or min(tokens) < 0 or max(tokens) >= m.n_vocab:
        print(f"bitnet_ref: token ids must be in [0, {m.n_vocab})", file=sys.stderr)
        return 2
    aq = None if a.act_quant == "auto" else a.act_quant == "on"
    if a.embd:
        out, fmt, width = m.embeddings(tokens, aq, not a.no_f16), "bitnet-embd", ("n_embd", m.n_embd)
    else:
        out, fmt, width = m.forward(tokens, aq, not a.no_f16), "bitnet-logits", ("n_vocab", m.n_vocab)
    if a.out:
        out.astype("<f4").tofile(a.out)
        hdr = {"format": fmt, "version": 1, "model": a.model, "arch": m.arch, width[0]: width[1],
               "n_tokens": len(tokens), "tokens": tokens, "prompt": None, "add_bos": False,
               "kernel_path": "reference", "kernel_summary": "tests/reference/bitnet_ref.py (float64)",
               "threads": 1, "batch": len(tokens), "dtype": "f32", "byte_order": "little",
               "shape": [len(tokens), width[1]], "data_file": a.out.rsplit("/", 1)[-1]}
        with open(a.out + ".json", "w", encoding="utf-8") as f:
            json.dump(hdr, f, indent=2)
    elif a.embd:
        for t, row in enumerate(out):
            print(f"pos={t} token={tokens[t]} embd[0:{min(8, row.size)}]: "
                  + " ".join(f"{v:.6f}" for v in row[:8]))
    else:
        for t, row in enumerate(out):
            best = np.argsort(-row, kind="stable")[:a.top_k]
            print(f"pos={t} token={tokens[t]} top: " + " ".join(f"{i}={row[i]:.6f}" for i in best))
    return 0


if __name__ == "__main__":
    sys.exit(main())
