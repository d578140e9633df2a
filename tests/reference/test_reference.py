"""Runtime logits against the independent reference forward pass (tests/reference/bitnet_ref.py), one
test per architecture: the test that catches a wrong FFN activation (SiLU instead of relu² in
bitnet-b1.58), a wrong RoPE pairing, a missing or extra sub-norm, a wrong head or a wrong Q/K layout.

For each case a seeded dummy model is written twice by build/bin/bitnet-dummy — F32 (dense float
path) and I2_S (ternary path; the same ternary weights, dummy_model.h) — and evaluated by
build/bin/bitnet-logits on every kernel path (the F32 file on the dense path; the I2_S file on the
I2_S, TL1 and TL2 paths, the TL paths repacking it at load). The reference reads the same file with its
own GGUF reader and computes in float64:
  - F32 file: reference with the runtime's documented F16 roundings (KV cache, Q, softmax
    probabilities, head input) and no activation quantization;
  - I2_S file on any path: reference with the int8 activation quantization of LAYOUTS.md section 1
    as well (the product every ternary path computes exactly, in integers).

Bound: max over vocab of |runtime - reference| <= 2e-3 * max|reference| at every position. What is left
after the emulation is float32-vs-float64 rounding (about 1e-6 relative) and the rare F16 or int8
rounding that lands on the other side of a boundary in float32 than in float64: one F16 ulp is 2^-11
(4.9e-4) relative, one int8 step 1/127 of that token's largest activation, and the dummy models'
near-hard attention can pass such a step on to the logits. Measured: at most 3.4e-4 (an F16 boundary
in the bitnet F32 case), 0 to 3e-5 elsewhere. A wrong graph is far outside it: the test also computes
the reference with one fact changed (the other activation, the other RoPE pairing, sub-norms toggled,
the other head) and requires each such "mutant" to miss the runtime by more than 25x the bound, so a
bug of that kind cannot pass.

Environment: BITNET_BUILD_DIR (default build/) holds bin/bitnet-dummy and bin/bitnet-logits;
BITNET_RUN_PREFIX (e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu") runs them under an emulator in a
cross build. Needs Debian's python3-numpy (tests/run-all.sh and .ci/run install it).
"""

import os
import shlex
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
}


def run(cmd):
    p = subprocess.run(PREFIX + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}")
    return p.stdout


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
               str(c["n_ff"]), "--n-layer", "2", "--n-head", str(c["n_head"]), "--n-head-kv", str(c["n_head_kv"]),
               "--vocab-size", "320", "--ctx", "64", "--outtype", outtype, "--seed", str(c["seed"])]
        if "theta" in c:
            cmd += ["--rope-theta", str(c["theta"])]
        if c.get("output"):
            cmd += ["--output-weight"]
        if "n_embd_head" in c:
            cmd += ["--n-embd-head", str(c["n_embd_head"])]
        run(cmd)
        return path

    def runtime(self, model, kernel, tag):
        out = os.path.join(self.tmp.name, f"{tag}.logits")
        run([self.logits, "-m", model, "--tokens", ",".join(map(str, TOKENS)), "--out", out, "--kernel", kernel,
             "-t", "2", "-b", "5"])
        hdr, a = R.read_logits(out)
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
        # the two files hold the same ternary weights (dummy_model.h): the reference reads both
        for p in R.PROJ:
            np.testing.assert_array_equal(ref_f32.layers[1][p], ref_i2s.layers[1][p], err_msg=p)
        want_f32 = ref_f32.forward(TOKENS, act_quant_on=False)
        want_i2s = ref_i2s.forward(TOKENS, act_quant_on=True)

        runs = [("dense F32", f32, "auto", want_f32, ref_f32, False)]
        for kernel in ("i2_s", "tl1", "tl2"):
            runs.append((kernel.upper(), i2s, kernel, want_i2s, ref_i2s, True))
        report = []
        for label, model, kernel, want, ref, quant in runs:
            hdr, got = self.runtime(model, kernel, f"{name}-{label.replace(' ', '_')}")
            self.assertEqual(got.shape, want.shape, label)
            self.assertEqual(hdr["arch"], c["arch"])
            err = rel_err(got, want)
            report.append(f"{label} {err.max():.1e}")
            for t, e in enumerate(err):
                self.assertLessEqual(e, BOUND, f"{name}, {label} ({hdr['kernel_summary']}): position {t} "
                                               f"deviates by {e:.3e} of max|logit| from the reference")
            if kernel != "i2_s" and label != "dense F32":
                continue
            # the test can fail: a reference with one graph fact changed is far from the runtime
            for what, mutate in self.mutants(ref):
                saved = (ref.act, ref.rope, ref.sub_norms, ref.head)
                mutate(ref)
                try:
                    wrong = ref.forward(TOKENS, act_quant_on=quant)
                finally:
                    ref.act, ref.rope, ref.sub_norms, ref.head = saved
                miss = rel_err(got, wrong).max()
                self.assertGreater(miss, MUTANT_FACTOR * BOUND,
                                   f"{name}, {label}: the runtime is as close to a reference with {what} "
                                   f"({miss:.2e}) as the bound: this test would not catch that mistake")
        print(f"[ info ] {name}: largest deviation from the reference: " + ", ".join(report), file=sys.stderr)

    @staticmethod
    def mutants(ref):
        def other_act(r):
            r.act = "silu" if r.act == "relu2" else "relu2"

        def other_rope(r):
            r.rope = "norm" if r.rope == "neox" else "neox"

        def toggle_sub_norms(r):
            if r.sub_norms:
                r.sub_norms = False
            else:  # a llama file has no sub-norm weights: use unit ones
                r.sub_norms = True
                for L in r.layers:
                    L["attn_sub_norm"] = np.ones(r.n_head * r.d)
                    L["ffn_sub_norm"] = np.ones(L["ffn_gate"].shape[0])

        out = [("the other FFN activation", other_act), ("the other RoPE pairing", other_rope),
               ("sub-norms toggled", toggle_sub_norms)]
        if ref.head_name == "output.weight":
            out.append(("the tied head", lambda r: setattr(r, "head", r.embd)))
        return out


for _name in CASES:
    setattr(ReferenceLogits, "test_" + _name.replace("-", "_").replace(".", "_"),
            lambda self, n=_name: self.check_case(n))


if __name__ == "__main__":
    unittest.main()
