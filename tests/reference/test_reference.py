"""Runtime logits against the independent reference forward pass (tests/reference/bitnet_ref.py), one
test per architecture: the test that catches a wrong FFN activation (SiLU instead of relu² in
bitnet-b1.58), a wrong RoPE pairing, a missing or extra sub-norm, a wrong head or a wrong Q/K layout.
The embedding models' graphs (qwen3, gemma3: docs/EMBEDDINGS.md section 2) are compared twice, by their
logits through the tied head and by their token embeddings (bitnet-logits --embd), with and without
the per-projection input norms (*_norm_in), gemma3 with local (sliding-window) layers in the prompt.

For each case a seeded dummy model is written twice by build/bin/bitnet-dummy — F32 (dense float
path) and I2_S (ternary path; the same ternary weights, dummy_model.h) — and evaluated by
build/bin/bitnet-logits on every kernel path (the F32 file on the dense path; the I2_S file on the
I2_S, TL1 and TL2 paths, the TL paths repacking it at load). The reference reads the same file with its
own GGUF reader and computes in float64:
  - F32 file: reference with the runtime's documented F16 roundings (KV cache, Q, softmax
    probabilities, head input; gemma3's GELU table) and no activation quantization;
  - I2_S file on any path: reference with the int8 activation quantization of LAYOUTS.md section 1
    as well (the product every ternary path computes exactly, in integers);
  - qwen3/gemma3 also as an F16 file (the plain teacher models' format, dense path): reference with the
    F32 file's roundings and the projection inputs rounded to binary16 (docs/EMBEDDINGS.md section 4;
    measured 4.3e-4 / 7.6e-4 with that rounding, 1.5e-3 / 1.3e-3 without it).

Bound: max over vocab of |runtime - reference| <= 2e-3 * max|reference| at every position. What is left
after the emulation is float32-vs-float64 rounding (about 1e-6 relative) and the rare F16 or int8
rounding that lands on the other side of a boundary in float32 than in float64: one F16 ulp is 2^-11
(4.9e-4) relative, one int8 step 1/127 of that token's largest activation, and the dummy models'
near-hard attention can pass such a step on to the logits. Measured: at most 3.4e-4 (an F16 boundary
in the bitnet F32 case), 0 to 3e-5 elsewhere. In the qwen3/gemma3 cases one such step moves the output
by 2.5e-3 to 2.1e-2 (QK-normed attention and post norms pass it on undamped; one binary16 step of the
largest value of a vector that is quantized next rescales all of its int8 values), more than the
bound: where a run misses it, bitnet_ref.rounding_flips_explaining looks for the near-ties (inputs
within 5 % of a step of a rounding boundary) that the runtime rounded the other way, and the bound
must then hold with those flipped. Measured (x86-64, AVX2): 1 to 3 flips per I2_S file (an int8 value
of attn_v / ffn_up / attn_output, a binary16 k or softmax probability), after which every position is
within 4e-5 (most within 1e-6); the F32 files need none. A wrong graph is far outside it: the test
also computes the reference with one fact changed (the other activation, the other RoPE pairing,
sub-norms toggled, the other head; for qwen3/gemma3 also: no QK head norms, no *_norm_in, post norms toggled, the other
activation (GELU <-> SiLU), the embedding scale toggled, no sliding window, the local layers' RoPE base,
the attention scale applied twice or taken from n_embd / n_head) and requires each such "mutant" to
miss the runtime by more than 25x the bound, in logits and in embeddings, so a bug of that kind cannot
pass (flips cannot hide one either: at most 6, each changing positions from its own on by ~1e-2 at
most, where a mutant misses by > 5e-2 from the first positions on). The embeddings e_t = RMSNorm(x_t) *
output_norm use the same bound relative to max|e_t|: they carry the same roundings as the logits,
without the head's.

Environment: BITNET_BUILD_DIR (default build/) holds bin/bitnet-dummy and bin/bitnet-logits;
BITNET_RUN_PREFIX (e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu") runs them under an emulator in a
cross build. Needs Debian's python3-numpy (tests/run-all.sh and .ci/run install it).
"""

import copy
import math
import os
import re
import shlex
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bitnet_ref as R  # noqa: E402  (fails with an apt-get hint when python3-numpy is missing)
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BITNET_BUILD_DIR", os.path.join(ROOT, "build"))
PREFIX = shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))
BOUND = 2e-3
MUTANT_FACTOR = 25.0

# Prompt: BOS, then ids spread over the vocabulary (bytes, words, pseudo-words of the built-in one).
TOKENS = [1, 300, 301, 302, 260, 270, 280, 290, 310, 5, 17, 99]

# Tensors of the embedding cases' files multiplied by a power of two after bitnet-dummy wrote them (both
# files alike: exact for F32 values and I2_S's float32 scale; F16 values that become subnormal round, but
# runtime and reference read the same rescaled file). With the dummy's weights two facts of these graphs
# would hardly show: (1) the FFN gate's pre-activations have a standard deviation of about 11 (ternary
# weights of scale ~0.8 over 256 inputs of RMS 1), where SiLU and GELU both are max(x, 0) but for a small
# part — ffn_gate / 16 brings it to about 0.7, where they differ; (2) gemma3's token embeddings, N(0, 1)
# times sqrt(256), are 16 times the post-normed layer outputs (RMS ~1), so the layers would move the
# result by ~1/16 — token_embd / 16 gives the scaled embeddings RMS 1. Measured: every mutant below
# then misses by more than 2x the 25x-bound it must miss by (without: GELU vs SiLU by 3e-4 in gemma3).
GATE_SCALE = {"blk.*.ffn_gate.weight": 1 / 16}
GEMMA3_SCALE = {"blk.*.ffn_gate.weight": 1 / 16, "token_embd.weight": 1 / 16}

# name: dummy parameters. Small, but each exercises what its architecture's published models have.
CASES = {
    # bitnet_b1_58-large style, with GQA 4/2
    "bitnet": dict(arch="bitnet", n_embd=256, n_ff=512, n_head=4, n_head_kv=2, seed=11),
    # BitNet-b1.58-2B-4T style: relu², GQA 4/1, theta 500000, tied head
    "bitnet-b1.58": dict(arch="bitnet-b1.58", n_embd=256, n_ff=768, n_head=4, n_head_kv=1, theta=500000, seed=12),
    # bitnet-25 (same graph); n_embd 384 gives a Q8_0 token_embd / head in the I2_S file
    "bitnet-25-q8": dict(arch="bitnet-25", n_embd=384, n_ff=512, n_head=6, n_head_kv=2, theta=500000, seed=13),
    # Llama3-8B-1.58 style: RoPE NORM on permuted Q/K, separate output.weight, GQA 4/2, theta 500000
    "llama": dict(arch="llama", n_embd=256, n_ff=512, n_head=4, n_head_kv=2, theta=500000, output=True, seed=14),
    # Falcon3 style: head size from attention.key_length (4 heads of 128 on n_embd 256), tied head
    "llama-keylength": dict(arch="llama", n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_embd_head=128,
                            theta=1000042, seed=15),
    # BitNet-embedding-0.6B style: head_dim 128 != 256 / 4, GQA 4/2, theta 1e6, QK norms, *_norm_in
    "qwen3": dict(arch="qwen3", n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_embd_head=128, theta=1000000,
                  rescale=GATE_SCALE, seed=21),
    # its plain (teacher) layout: no *_norm_in
    "qwen3-plain": dict(arch="qwen3", n_embd=256, n_ff=512, n_head=4, n_head_kv=2, n_embd_head=128,
                        theta=1000000, no_norm_in=True, rescale=GATE_SCALE, seed=22),
    # BitNet-embedding-270M style: 4 heads / 1 kv of 128, GELU, post norms, scaled embeddings; a window
    # of 4 tokens on layers 0 and 2 (pattern 2) with a RoPE base of their own, so the 12-token prompt
    # has local layers that drop keys
    "gemma3": dict(arch="gemma3", n_embd=256, n_ff=512, n_head=4, n_head_kv=1, n_embd_head=128, theta=1000000,
                   n_layer=3, swa=4, swa_pattern=2, rope_freq_base_swa=100, rescale=GEMMA3_SCALE, seed=23),
    "gemma3-plain": dict(arch="gemma3", n_embd=256, n_ff=512, n_head=4, n_head_kv=1, n_embd_head=128,
                         theta=1000000, n_layer=3, swa=4, swa_pattern=2, rope_freq_base_swa=100,
                         no_norm_in=True, rescale=GEMMA3_SCALE, seed=24),
}


def run(cmd):
    p = subprocess.run(PREFIX + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}")
    return p.stdout


def rescale(path, factors):
    """Multiplies tensors of the GGUF file at path in place. factors: tensor name ("blk.*." standing for
    every layer's prefix) -> power of two. F32 / F16 tensors: every value; I2_S: its float32 scale."""
    g = R.GGUF(path)
    with open(path, "r+b") as f:
        for name, (t, ne, b) in g.tensors.items():
            factor = factors.get(re.sub(r"^blk\.\d+\.", "blk.*.", name))
            if factor is None:
                continue
            assert math.frexp(factor)[0] == 0.5, f"{factor} is not a power of two"
            if t in (R.T_F32, R.T_F16):
                dt = "<f4" if t == R.T_F32 else "<f2"
                data = (np.frombuffer(b, dtype=dt).astype(np.float64) * factor).astype(dt).tobytes()
                f.seek(g.offsets[name])
            elif t == R.T_I2_S:
                n = ne[0] * ne[1]
                data = struct.pack("<f", struct.unpack_from("<f", b, n // 4)[0] * factor)
                f.seek(g.offsets[name] + n // 4)
            else:
                raise AssertionError(f"{path}: {name} has type {t}: rescale reads F32, F16 and I2_S")
            f.write(data)


def rel_err(a, b):
    """Per position: max|a - b| / max|b|."""
    return np.max(np.abs(a - b), axis=1) / np.max(np.abs(b), axis=1)


class ReferenceLogits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dummy = os.path.join(BUILD, "bin", "bitnet-dummy")
        cls.logits = os.path.join(BUILD, "bin", "bitnet-logits")
        for tool in (cls.dummy, cls.logits):
            if not os.path.exists(tool):
                raise AssertionError(f"{tool} is missing: build the project first (BITNET_BUILD_DIR={BUILD})")
        cls.tmp = tempfile.TemporaryDirectory(prefix="bitnet_ref_")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def write_model(self, name, c, outtype):
        path = os.path.join(self.tmp.name, f"{name}-{outtype}.gguf")
        cmd = [self.dummy, "-q", "-o", path, "--arch", c["arch"], "--n-embd", str(c["n_embd"]), "--n-ff",
               str(c["n_ff"]), "--n-layer", str(c.get("n_layer", 2)), "--n-head", str(c["n_head"]), "--n-head-kv",
               str(c["n_head_kv"]), "--vocab-size", "320", "--ctx", "64", "--outtype", outtype, "--seed",
               str(c["seed"])]
        if "theta" in c:
            cmd += ["--rope-theta", str(c["theta"])]
        if c.get("output"):
            cmd += ["--output-weight"]
        if "n_embd_head" in c:
            cmd += ["--n-embd-head", str(c["n_embd_head"])]
        if c.get("no_norm_in"):
            cmd += ["--no-norm-in"]
        for k in ("swa", "swa_pattern", "rope_freq_base_swa"):
            if k in c:
                cmd += ["--" + k.replace("_", "-"), str(c[k])]
        run(cmd)
        if "rescale" in c:
            rescale(path, c["rescale"])
        return path

    def runtime(self, model, kernel, tag, embd=False):
        out = os.path.join(self.tmp.name, f"{tag}.{'embd' if embd else 'logits'}")
        run([self.logits, "-m", model, "--tokens", ",".join(map(str, TOKENS)), "--out", out, "--kernel", kernel,
             "-t", "2", "-b", "5"] + (["--embd"] if embd else []))
        hdr, a = R.read_embd(out) if embd else R.read_logits(out)
        self.assertEqual(hdr["tokens"], TOKENS)
        self.assertEqual(a.shape[0], len(TOKENS))
        return hdr, a

    def check_case(self, name):
        c = CASES[name]
        f32 = self.write_model(name, c, "f32")
        i2s = self.write_model(name, c, "i2_s")
        ref_f32 = R.Model(f32)
        ref_i2s = R.Model(i2s)
        self.assertEqual(ref_f32.arch, c["arch"])
        self.assertFalse(ref_f32.ternary)
        self.assertTrue(ref_i2s.ternary)
        embed = c["arch"] in R.EMBED_ARCHS
        if embed:  # the file holds what the case asked for
            self.assertEqual(ref_f32.has_norm_in, not c.get("no_norm_in"))
            self.assertEqual(ref_f32.d, c["n_embd_head"])
            self.assertEqual(ref_f32.n_swa, c.get("swa", 0))
            self.assertEqual(ref_f32.head_name, "token_embd.weight")
        # the two files hold the same ternary weights (dummy_model.h): the reference reads both
        for p in R.PROJ:
            np.testing.assert_array_equal(ref_f32.layers[1][p], ref_i2s.layers[1][p], err_msg=p)
        outputs = [("logits", False)] + ([("embeddings", True)] if embed else [])

        def compute(ref, quant, embd):
            return ref.embeddings(TOKENS, act_quant_on=quant) if embd else ref.forward(TOKENS, act_quant_on=quant)

        runs = [("dense F32", f32, "auto", ref_f32, False)]
        for kernel in ("i2_s", "tl1", "tl2"):
            runs.append((kernel.upper(), i2s, kernel, ref_i2s, True))
        if embed:  # the plain (teacher) models' F16 files: binary16 inputs to F16 weights
            f16 = self.write_model(name, c, "f16")
            runs.append(("dense F16", f16, "auto", R.Model(f16), False))
        report, flip_cache = [], {}
        for what_out, embd in outputs:
            wants = {id(ref): compute(ref, quant, embd) for _, _, _, ref, quant in runs}
            for label, model, kernel, ref, quant in runs:
                want = wants[id(ref)]
                hdr, got = self.runtime(model, kernel, f"{name}-{label.replace(' ', '_')}", embd)
                self.assertEqual(got.shape, want.shape, label)
                self.assertEqual(hdr["arch"], c["arch"])
                err = rel_err(got, want)
                note = ""
                if err.max() > BOUND:  # a near-tie rounded the other way? (R.rounding_flips_explaining)
                    key = (id(ref), embd, got.tobytes())
                    if key not in flip_cache:
                        flip_cache[key] = R.rounding_flips_explaining(
                            ref, lambda m, q=quant, e=embd: compute(m, q, e), got, BOUND, rel_err)
                        flips = flip_cache[key][0]
                        if flips:
                            print(f"[ info ] {name}, {label} {what_out}: near-ties the runtime rounded the other "
                                  "way: " + "; ".join(f"{ref.labels[k]} value {j}" for k, v in sorted(flips.items())
                                                      for j in v), file=sys.stderr)
                    flips, left = flip_cache[key]
                    if flips is not None:
                        note = f" -> {left.max():.1e} with {sum(map(len, flips.values()))} near-tie rounding(s) " \
                               "flipped"
                        err = left
                    else:
                        note = f" (no near-tie roundings flipped within {R.FLIP_MARGIN} of a step explain it)"
                report.append(f"{what_out} {label} {rel_err(got, want).max():.1e}{note}")
                for t, e in enumerate(err):
                    self.assertLessEqual(e, BOUND, f"{name}, {label} ({hdr['kernel_summary']}): {what_out} of "
                                                   f"position {t} deviate by {e:.3e} of their max|value| from "
                                                   f"the reference{note}")
                if kernel != "i2_s" and label != "dense F32":
                    continue
                # the test can fail: a reference with one graph fact changed is far from the runtime
                misses = []
                for what, mutate in self.mutants(ref):
                    wrong_ref = copy.copy(ref)
                    mutate(wrong_ref)
                    miss = rel_err(got, compute(wrong_ref, quant, embd)).max()
                    misses.append(miss)
                    self.assertGreater(miss, MUTANT_FACTOR * BOUND,
                                       f"{name}, {label}: the runtime's {what_out} are as close to a reference "
                                       f"with {what} ({miss:.2e}) as the bound: this test would not catch that "
                                       "mistake")
                report[-1] += f" (nearest mutant {min(misses):.1e})"
        print(f"[ info ] {name}: largest deviation from the reference: " + ", ".join(report), file=sys.stderr)

    @staticmethod
    def mutants(ref):
        """(what, function changing one graph fact of a shallow copy of ref) pairs. The functions replace
        attributes and lists (never change the shared weight arrays in place)."""
        embed = ref.arch in R.EMBED_ARCHS

        def other_act(r):
            r.act = {"relu2": "silu", "silu": "gelu" if embed else "relu2", "gelu": "silu"}[r.act]

        def other_rope(r):
            r.rope = "norm" if r.rope == "neox" else "neox"

        def toggle_sub_norms(r):
            if r.sub_norms:
                r.sub_norms = False
            else:  # a llama file has no sub-norm weights: use unit ones
                r.sub_norms = True
                r.layers = [dict(L, attn_sub_norm=np.ones(r.n_head * r.d),
                                 ffn_sub_norm=np.ones(L["ffn_gate"].shape[0])) for L in r.layers]

        def toggle_post_norms(r):
            if not r.post_norms:  # a qwen3 file has none: use unit ones
                r.layers = [dict(L, post_attention_norm=np.ones(r.n_embd), post_ffw_norm=np.ones(r.n_embd))
                            for L in r.layers]
            r.post_norms = not r.post_norms

        def toggle_embd_scale(r):
            r.embd_scale = None if r.embd_scale is not None else np.sqrt(np.float32(r.n_embd))

        def scale_twice(r):
            r.q_factor = r.kq_scale = 1.0 / math.sqrt(r.d)

        def scale_from_n_embd(r):
            s = 1.0 / math.sqrt(r.n_embd // r.n_head)
            if r.q_factor is not None:
                r.q_factor = s
            else:
                r.kq_scale = s

        out = [("the other FFN activation", other_act), ("the other RoPE pairing", other_rope)]
        if embed:
            out += [("no QK head norms", lambda r: setattr(r, "qk_norm", False)),
                    ("post norms toggled", toggle_post_norms), ("the embedding scale toggled", toggle_embd_scale),
                    ("the attention scale applied to q and to the scores", scale_twice)]
            if ref.d != ref.n_embd // ref.n_head:
                out.append(("the attention scale 1/sqrt(n_embd / n_head)", scale_from_n_embd))
            if ref.has_norm_in:
                out.append(("no *_norm_in", lambda r: setattr(r, "use_norm_in", False)))
            if ref.n_swa:
                out.append(("no sliding window", lambda r: setattr(r, "n_swa", 0)))
                if ref.base_swa != ref.base:
                    out.append(("the global RoPE base on local layers", lambda r: setattr(r, "base_swa", r.base)))
        else:
            out.append(("sub-norms toggled", toggle_sub_norms))
        if ref.head_name == "output.weight":
            out.append(("the tied head", lambda r: setattr(r, "head", r.embd)))
        return out


for _name in CASES:
    setattr(ReferenceLogits, "test_" + _name.replace("-", "_").replace(".", "_"),
            lambda self, n=_name: self.check_case(n))


if __name__ == "__main__":
    unittest.main()
