"""The reference's embedding graphs (tests/reference/bitnet_ref.py: qwen3, gemma3, docs/EMBEDDINGS.md) on
their own, then build/bin/llama-embedding against them.

ReferenceSelfCheck needs no runtime: it writes small GGUF files with its own writer (F32 and F16 tensors,
the keys of docs/EMBEDDINGS.md section 1) and checks the reference against facts of the spec that do not
depend on its code: pooling and normalization values computed by hand, ggml's GELU rounding, the QK head
norms making q and k scale-free, a sliding window at least as long as the prompt changing nothing, a
window of 1 making a local layer's attention output its own v, the optional *_norm_in tensors, and the
errors of a file that lacks a tensor the graph needs.

LlamaEmbedding (needs build/bin/bitnet-dummy and build/bin/llama-embedding): several texts of different
lengths in one run (independent sequences of one batch) against the reference's embeddings of each text
alone: --pooling none with --embd-normalize -1 (every token's e_t, within test_reference's bound after its
near-tie flips), then every pooling (last, mean, cls, and the file's pooling_type by default) with every
normalization (-1, 0, 2, 3) of those embeddings as docs/EMBEDDINGS.md section 3 defines them, each of
which must also miss the other poolings by more than 25x the bound. The files are test_reference's
qwen3 and gemma3 cases (gemma3 with local layers shorter than the longer texts) written as F32: the
dense path, whose deviation stays far inside the bound over a 59-token text (3.9e-4 measured). Their
I2_S files are left to test_reference.py (every position of bitnet-logits --embd against the reference)
and tests/tools/test_llama_embedding.py (llama-embedding's rows equal bitnet-logits --embd's): over a
59-token text the I2_S path meets several near-tie roundings that its float32 took the other way, each
moving every later position by ~1e-2 in these random models: more than rounding_flips_explaining finds
in minutes (it gives up after 6).

Environment: BITNET_BUILD_DIR (default build/), BITNET_RUN_PREFIX (emulator of a cross build).
"""

import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bitnet_ref as R  # noqa: E402  (needs python3-numpy)
import numpy as np  # noqa: E402
import test_reference as T  # noqa: E402  (its cases, rescale, bound; its test class is not collected here)


# ---- a small GGUF writer (F32 / F16 tensors; uint32, float32, string keys) ----------------------------

def _gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kv, tensors):
    """kv: key -> int (uint32), float (float32) or str; tensors: name -> (numpy array with shape
    (ne1, ne0) or (ne0,), "f32" | "f16")."""
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for k, v in kv.items():
        out += _gguf_string(k)
        if isinstance(v, str):
            out += struct.pack("<I", 8) + _gguf_string(v)
        elif isinstance(v, float):
            out += struct.pack("<If", 6, v)
        else:
            out += struct.pack("<II", 4, v)
    blobs, off = [], 0
    for name, (a, kind) in tensors.items():
        data = np.ascontiguousarray(a, dtype="<f4" if kind == "f32" else "<f2").tobytes()
        ne = list(reversed(a.shape))
        out += _gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", R.T_F32 if kind == "f32" else R.T_F16, off)
        blobs.append(data)
        off += (len(data) + 31) // 32 * 32
    out += b"\0" * (-len(out) % 32)
    for data in blobs:
        out += data + b"\0" * (-len(data) % 32)
    with open(path, "wb") as f:
        f.write(out)


def tiny_model(path, arch, n_layer=2, n_embd=64, n_ff=96, n_head=4, n_head_kv=2, d=32, vocab=40, norm_in=True,
               norm_type="f16", swa=None, drop=(), seed=0, eps=1e-6):
    """A random dense model of arch (qwen3 | gemma3) in the tensor layout of docs/EMBEDDINGS.md section 1.
    swa: (n_swa, pattern, freq_base_swa) for gemma3's keys; drop: tensor names left out."""
    rng = np.random.default_rng(seed)
    kv = {"general.architecture": arch, f"{arch}.block_count": n_layer, f"{arch}.embedding_length": n_embd,
          f"{arch}.feed_forward_length": n_ff, f"{arch}.attention.head_count": n_head,
          f"{arch}.attention.head_count_kv": n_head_kv, f"{arch}.attention.key_length": d,
          f"{arch}.attention.value_length": d, f"{arch}.rope.freq_base": 1000.0,
          f"{arch}.attention.layer_norm_rms_epsilon": eps, f"{arch}.pooling_type": 3}
    if swa:
        kv.update({"gemma3.attention.sliding_window": swa[0], "gemma3.attention.sliding_window_pattern": swa[1],
                   "gemma3.rope.freq_base_swa": float(swa[2])})
    t = {"token_embd.weight": (rng.normal(0, 1, (vocab, n_embd)), "f32"),
         "output_norm.weight": (rng.uniform(0.5, 1.5, n_embd), norm_type)}
    shapes = {"attn_q": (n_head * d, n_embd), "attn_k": (n_head_kv * d, n_embd), "attn_v": (n_head_kv * d, n_embd),
              "attn_output": (n_embd, n_head * d), "ffn_gate": (n_ff, n_embd), "ffn_up": (n_ff, n_embd),
              "ffn_down": (n_embd, n_ff)}
    for l in range(n_layer):
        norms = {"attn_norm": n_embd, "ffn_norm": n_embd, "attn_q_norm": d, "attn_k_norm": d}
        if arch == "gemma3":
            norms.update(post_attention_norm=n_embd, post_ffw_norm=n_embd)
        if norm_in:
            norms.update({p + "_norm_in": shapes[p][1] for p in R.PROJ})
        for nm, n in norms.items():
            t[f"blk.{l}.{nm}.weight"] = (rng.uniform(0.5, 1.5, n), norm_type)
        for p, shp in shapes.items():
            t[f"blk.{l}.{p}.weight"] = (rng.normal(0, 1 / np.sqrt(shp[1]), shp), "f32")
    for name in drop:
        del t[name]
    write_gguf(path, kv, t)
    return path


class ReferenceSelfCheck(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="bitnet_embd_ref_")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def model(self, name, arch, **kw):
        return R.Model(tiny_model(os.path.join(self.tmp.name, name + ".gguf"), arch, **kw))

    def test_pool(self):
        e = np.arange(12.0).reshape(6, 2)  # two sequences: tokens 0-2 and 3-5
        seqs = [(0, 3), (3, 6)]
        np.testing.assert_array_equal(R.pool(e, seqs, "last"), [[4, 5], [10, 11]])
        np.testing.assert_array_equal(R.pool(e, seqs, 3), [[4, 5], [10, 11]])
        np.testing.assert_array_equal(R.pool(e, seqs, "cls"), [[0, 1], [6, 7]])
        np.testing.assert_array_equal(R.pool(e, seqs, "mean"), [[2, 3], [8, 9]])
        np.testing.assert_array_equal(R.pool(e, seqs, "none"), e)
        with self.assertRaises(ValueError):
            R.pool(e, seqs, "max")
        with self.assertRaises(ValueError):
            R.pool(e, [(4, 7)], "last")

    def test_normalize(self):
        v = np.array([[3.0, -4.0, 0.0], [0.0, 0.0, 0.0]])
        np.testing.assert_allclose(R.normalize(v, 2), [[0.6, -0.8, 0], [0, 0, 0]])
        np.testing.assert_allclose(R.normalize(v, 0), [[24570.0, -32760.0, 0], [0, 0, 0]])
        np.testing.assert_allclose(R.normalize(v, 1), [[3 / 7, -4 / 7, 0], [0, 0, 0]])
        np.testing.assert_allclose(R.normalize(v, 3), [[3 / 91 ** (1 / 3), -4 / 91 ** (1 / 3), 0], [0, 0, 0]])
        np.testing.assert_array_equal(R.normalize(v, -1), v)
        np.testing.assert_allclose(R.normalize(np.array([3.0, 4.0]), 2), [0.6, 0.8])  # one vector

    def test_gelu(self):
        x = np.array([-12.0, -10.0, -3.0, -0.5, 0.0, 0.3, 1.0, 2.5, 9.99, 10.0, 11.5])
        exact = R.gelu(x)
        self.assertAlmostEqual(exact[6], 0.5 * (1 + np.tanh(np.sqrt(2 / np.pi) * 1.044715)), places=15)
        r = R.gelu(x, rounded=True)
        self.assertEqual(r[0], 0.0)
        self.assertEqual(r[1], 0.0)
        self.assertEqual(r[9], 10.0)
        self.assertEqual(r[10], 11.5)
        mid = slice(2, 9)  # the table: binary16 in, binary16 out
        np.testing.assert_array_equal(r[mid], R.f16(R.gelu(R.f16(x[mid]))))
        np.testing.assert_allclose(r[mid], exact[mid], rtol=2e-3, atol=1e-4)
        # 1.0001 is not a binary16 value: the table reads gelu(1.0)
        self.assertEqual(R.gelu(np.array([1.0001]), rounded=True)[0], R.f16(R.gelu(np.array([1.0])))[0])

    def test_reads_spec_keys_and_f16_norms(self):
        m = self.model("g", "gemma3", n_layer=3, swa=(4, 2, 500.0))
        self.assertEqual((m.arch, m.n_swa, m.swa_pattern, m.base_swa, m.base), ("gemma3", 4, 2, 500.0, 1000.0))
        self.assertEqual([m.is_local(l) for l in range(3)], [True, False, True])
        self.assertEqual(m.pooling, "last")
        self.assertEqual(m.d, 32)
        self.assertTrue(m.has_norm_in)
        self.assertEqual(m.layers[0]["attn_q_norm"].shape, (32,))
        self.assertEqual(m.layers[0]["attn_output_norm_in"].shape, (128,))
        self.assertEqual(m.layers[0]["ffn_down_norm_in"].shape, (96,))
        self.assertEqual(m.head_name, "token_embd.weight")
        self.assertEqual(float(m.embd_scale), 8.0)
        d = self.model("g6", "gemma3", n_layer=6, swa=None)
        self.assertEqual((d.n_swa, d.swa_pattern, d.base_swa), (0, 6, 10000.0))
        self.assertFalse(any(d.is_local(l) for l in range(6)))
        q = self.model("q", "qwen3", norm_in=False)
        self.assertFalse(q.has_norm_in)
        self.assertIsNone(q.q_factor)
        self.assertAlmostEqual(q.kq_scale, 1 / np.sqrt(32))
        self.assertFalse(q.post_norms)
        self.assertIsNone(q.embd_scale)

    def test_missing_tensors_are_named(self):
        for arch, name in (("qwen3", "blk.1.attn_k_norm.weight"), ("gemma3", "blk.0.post_ffw_norm.weight")):
            with self.assertRaisesRegex(R.GGUFError, name.replace(".", r"\.")):
                self.model("miss-" + arch, arch, drop=(name,))
        # each *_norm_in is optional on its own
        m = self.model("partial", "qwen3", drop=("blk.0.attn_v_norm_in.weight",))
        self.assertNotIn("attn_v_norm_in", m.layers[0])
        self.assertIn("attn_v_norm_in", m.layers[1])

    def test_embeddings_and_logits_shapes(self):
        for arch in ("qwen3", "gemma3"):
            m = self.model("s-" + arch, arch)
            tokens = [1, 5, 7, 3]
            e = m.embeddings(tokens)
            self.assertEqual(e.shape, (4, 64))
            lg = m.forward(tokens)
            np.testing.assert_allclose(lg, e @ m.embd.T, rtol=1e-12)  # tied head, F32: no rounding
            # e_t = RMSNorm(x_t, output_norm): e / output_norm has RMS 1 (up to eps)
            rms = np.sqrt(np.mean((e / m.output_norm) ** 2, axis=1))
            np.testing.assert_allclose(rms, 1.0, rtol=1e-5)
            # causal: a token's embedding does not depend on later tokens
            np.testing.assert_allclose(m.embeddings(tokens[:2]), e[:2], rtol=1e-12)

    def test_qk_norm_makes_q_and_k_scale_free(self):
        for arch in ("qwen3", "gemma3"):
            m = self.model("qk-" + arch, arch, norm_in=False, eps=0.0)  # eps would break the scale freedom
            tokens = [2, 9, 4, 11, 6]
            want = m.embeddings(tokens, f16_on=False)
            for L in m.layers:
                L["attn_q"] = L["attn_q"] * 7.0
                L["attn_k"] = L["attn_k"] * 0.5
            np.testing.assert_allclose(m.embeddings(tokens, f16_on=False), want, rtol=1e-6, atol=1e-9)
            m.qk_norm = False  # without the head norms the same scaling changes everything
            self.assertGreater(np.max(np.abs(m.embeddings(tokens, f16_on=False) - want)), 1e-2)

    def test_norm_in_applies(self):
        m = self.model("ni", "qwen3", eps=0.0)
        tokens = [2, 9, 4]
        a = m.embeddings(tokens, f16_on=False)
        m.use_norm_in = False
        self.assertGreater(np.max(np.abs(m.embeddings(tokens, f16_on=False) - a)), 1e-2)
        # with every *_norm_in weight 1 the step is a plain RMSNorm: Wq's input scale drops out
        m.use_norm_in = True
        for L in m.layers:
            for p in R.PROJ:
                L[p + "_norm_in"] = np.ones_like(L[p + "_norm_in"])
        b = m.embeddings(tokens, f16_on=False)
        for L in m.layers:
            L["attn_norm"] = L["attn_norm"] * 3.0
            L["ffn_norm"] = L["ffn_norm"] * 0.2
        np.testing.assert_allclose(m.embeddings(tokens, f16_on=False), b, rtol=1e-6, atol=1e-9)

    def test_sliding_window(self):
        tokens = [3, 1, 4, 1, 5, 9, 2, 6]
        # a window as long as the prompt, same RoPE base: the same as global attention
        long = self.model("w-long", "gemma3", n_layer=3, swa=(8, 2, 1000.0), seed=4)
        glob = self.model("w-glob", "gemma3", n_layer=3, swa=None, seed=4)
        np.testing.assert_array_equal(long.embeddings(tokens), glob.embeddings(tokens))
        short = self.model("w-short", "gemma3", n_layer=3, swa=(3, 2, 1000.0), seed=4)
        e = short.embeddings(tokens)
        np.testing.assert_array_equal(e[:3], glob.embeddings(tokens)[:3])  # within the window: equal
        self.assertGreater(np.max(np.abs(e[3:] - glob.embeddings(tokens)[3:])), 1e-3)
        # the local layers' own RoPE base
        base = self.model("w-base", "gemma3", n_layer=3, swa=(8, 2, 50.0), seed=4)
        self.assertGreater(np.max(np.abs(base.embeddings(tokens)[1:] - glob.embeddings(tokens)[1:])), 1e-3)
        np.testing.assert_array_equal(base.embeddings(tokens)[0], glob.embeddings(tokens)[0])  # position 0
        # window 1: a local layer's attention output is the token's own v
        one = self.model("w-one", "gemma3", n_layer=1, swa=(1, 6, 1000.0), seed=4)
        self.assertTrue(one.is_local(0))
        one.post_norms = False
        hid = one.hidden(tokens, f16_on=False)
        L = one.layers[0]
        for t, tok in enumerate(tokens):
            x = one.embd[tok] * 8.0
            n = one.rmsnorm(x, L["attn_norm"])
            v = one.linear(L, "attn_v", n, False).reshape(2, 32)
            a = np.concatenate([v[h // 2] for h in range(4)])
            h1 = x + one.linear(L, "attn_output", a, False)
            m = one.rmsnorm(h1, L["ffn_norm"])
            f = R.gelu(one.linear(L, "ffn_gate", m, False)) * one.linear(L, "ffn_up", m, False)
            np.testing.assert_allclose(hid[t], h1 + one.linear(L, "ffn_down", f, False), rtol=1e-12, atol=1e-12)

    def test_gemma3_logit_softcapping(self):
        path = tiny_model(os.path.join(self.tmp.name, "cap.gguf"), "gemma3", seed=6)
        plain = R.Model(path).forward([1, 2, 3])
        g = R.GGUF(path)
        kv = dict(g.kv, **{"gemma3.final_logit_softcapping": 2.5})
        write_gguf(path, kv, {n: (g.matrix(n), "f32" if t == R.T_F32 else "f16") for n, (t, _, _) in g.tensors.items()})
        capped = R.Model(path)
        self.assertEqual(capped.softcap, 2.5)
        self.assertGreater(np.max(np.abs(plain)), 5.0)  # the cap matters
        np.testing.assert_allclose(capped.forward([1, 2, 3]), 2.5 * np.tanh(plain / 2.5), rtol=1e-12)

    def test_gemma3_scale_is_qwen3_scale_up_to_rounding(self):
        m = self.model("sc", "gemma3")
        tokens = [2, 9, 4, 11]
        a = m.embeddings(tokens, f16_on=False)
        m.q_factor, m.kq_scale = None, 1 / np.sqrt(m.d)
        np.testing.assert_allclose(m.embeddings(tokens, f16_on=False), a, rtol=1e-12, atol=1e-12)

    def test_f16_neighbours(self):
        x = np.array([1.0, 1.0 + 2.0 ** -11, 1.0 + 2.0 ** -11 * 0.98, -3.0 - 2.0 ** -10 * 1.02, 1e6])
        r, other, m = R.f16_neighbours(x)  # spacing 2^-10 in [1, 2), 2^-9 in [2, 4)
        np.testing.assert_array_equal(r[:4], [1.0, 1.0, 1.0, -3.0 - 2.0 ** -9])
        np.testing.assert_array_equal(other[:4], [1.0 + 2.0 ** -10, 1.0 + 2.0 ** -10, 1.0 + 2.0 ** -10, -3.0])
        np.testing.assert_allclose(m, [0.5, 0.0, 0.01, 0.01, 0.5], atol=1e-12)  # 1e6: beyond binary16

    def test_rounding_flips_explaining(self):
        m = self.model("flip", "gemma3", swa=(3, 2, 100.0), seed=5)
        tokens = [3, 1, 4, 1, 5, 9]
        m.trace = 0.02
        m.embeddings(tokens, act_quant_on=True)
        near = sorted((c for c in m.near if c[0][0] == 2), key=lambda c: c[2])
        m.trace = None
        want = m.embeddings(tokens, act_quant_on=True)
        rel = lambda a, b: np.max(np.abs(a - b), axis=1) / np.max(np.abs(b), axis=1)  # noqa: E731
        # a runtime that rounded a near-tie of position 2 the other way (one that shows: some are absorbed
        # by a later rounding); bound 1e-12, so only the exact flip passes
        for key, j, _ in near:
            m.flips = {key: (j,)}
            got = m.embeddings(tokens, act_quant_on=True)
            m.flips = {}
            if rel(got, want).max() > 1e-4:
                break
        else:
            self.fail("no near-tie of position 2 changes the embeddings")
        np.testing.assert_array_equal(rel(got, want)[:2], 0.0)  # a flip changes nothing before its position
        flips, err = R.rounding_flips_explaining(m, lambda r: r.embeddings(tokens, act_quant_on=True), got, 1e-12, rel)
        self.assertEqual(flips, {key: (j,)})
        self.assertEqual(err.max(), 0.0)
        self.assertEqual(m.flips, {})
        self.assertIn("position 2, layer", m.labels[key])
        # a graph fact changed is not a rounding: no flips explain it
        m.post_norms = False
        wrong = m.embeddings(tokens, act_quant_on=True)
        m.post_norms = True
        flips, err = R.rounding_flips_explaining(m, lambda r: r.embeddings(tokens, act_quant_on=True), wrong, 2e-3,
                                                 rel)
        self.assertIsNone(flips)
        self.assertGreater(err.max(), 0.1)

    def test_command_line_embd(self):
        path = tiny_model(os.path.join(self.tmp.name, "cli.gguf"), "gemma3", swa=(2, 2, 100.0))
        out = os.path.join(self.tmp.name, "cli.embd")
        self.assertEqual(R.main([path, "--tokens", "1,2,3", "--embd", "--out", out]), 0)
        hdr, e = R.read_embd(out)
        self.assertEqual((hdr["n_embd"], hdr["n_tokens"], hdr["shape"]), (64, 3, [3, 64]))
        np.testing.assert_allclose(e, R.Model(path).embeddings([1, 2, 3]), rtol=1e-6, atol=1e-7)
        with self.assertRaises(ValueError):
            R.read_logits(out)


class LlamaEmbedding(unittest.TestCase):
    TEXTS = ["hello world", "the quick brown fox jumps over the lazy dog", "a"]
    FILES = [("qwen3", "f32"), ("gemma3", "f32")]

    @classmethod
    def setUpClass(cls):
        cls.tool = os.path.join(T.BUILD, "bin", "llama-embedding")
        cls.dummy = os.path.join(T.BUILD, "bin", "bitnet-dummy")
        for tool in (cls.tool, cls.dummy):
            if not os.path.exists(tool):
                raise AssertionError(f"{tool} is missing: build the project first (BITNET_BUILD_DIR={T.BUILD})")
        cls.tmp = tempfile.TemporaryDirectory(prefix="bitnet_llama_embd_")
        writer = T.ReferenceLogits("write_model")  # its model writer, not its tests
        writer.dummy, writer.tmp = cls.dummy, cls.tmp
        cls.models = {(a, o): writer.write_model(a, T.CASES[a], o) for a, o in cls.FILES}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def embed(self, model, *args):
        """(vectors [n][n_embd], token ids of each text) of llama-embedding's json output."""
        p = subprocess.run(T.PREFIX + [self.tool, "-m", model, "-p", "\n".join(self.TEXTS), "--embd-output-format",
                                       "json", "--verbose-prompt", "-t", "2", *args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertEqual(p.returncode, 0, f"llama-embedding {args}: {p.stderr}")
        data = json.loads(p.stdout)["data"]
        self.assertEqual([d["index"] for d in data], list(range(len(data))))
        tokens = [[int(t) for t in m.group(2).split()]
                  for m in re.finditer(r"text (\d+): \d+ tokens: ([\d ]+)", p.stderr)]
        self.assertEqual(len(tokens), len(self.TEXTS), p.stderr)
        return np.array([d["embedding"] for d in data], dtype=np.float64), tokens

    def check_file(self, arch, outtype):
        model = self.models[(arch, outtype)]
        ref = R.Model(model)
        self.assertEqual(ref.pooling, "last")  # bitnet-dummy's default pooling_type
        rows, tokens = self.embed(model, "--pooling", "none", "--embd-normalize", "-1")
        lengths = [len(t) for t in tokens]
        self.assertEqual(rows.shape, (sum(lengths), ref.n_embd))
        if arch == "gemma3":
            self.assertGreater(max(lengths), ref.n_swa)  # a local layer drops keys
        ranges = [(sum(lengths[:i]), sum(lengths[:i + 1])) for i in range(len(lengths))]
        # every token's e_t: each text alone in the reference, within the bound after near-tie flips
        e, notes = [], []
        for i, (a, b) in enumerate(ranges):
            def compute(m, tok=tokens[i]):
                return m.embeddings(tok)
            err = T.rel_err(rows[a:b], compute(ref))
            if err.max() > T.BOUND:
                flips, err = R.rounding_flips_explaining(ref, compute, rows[a:b], T.BOUND, T.rel_err)
                if flips:
                    notes.append(f"text {i}: {sum(map(len, flips.values()))} near-tie(s) flipped")
                    ref.flips = flips
            e.append(compute(ref))
            ref.flips = {}
            for t, x in enumerate(err):
                self.assertLessEqual(x, T.BOUND, f"{arch} {outtype}: text {i} token {t}: e_t deviates by {x:.3e} of "
                                                 "max|e_t| from the reference (no near-tie flips explain it)")
        e = np.concatenate(e)
        worst = [T.rel_err(rows, e).max()]
        # pooled and normalized vectors
        for kind in ("last", "mean", "cls", None):
            for p in (2, 0, -1, 3):
                args = (["--pooling", kind] if kind else []) + ["--embd-normalize", str(p)]
                got, tok2 = self.embed(model, *args)
                self.assertEqual(tok2, tokens)
                want = R.normalize(R.pool(e, ranges, kind or ref.pooling), p)
                self.assertEqual(got.shape, want.shape, args)
                err = T.rel_err(got, want)
                worst.append(err.max())
                self.assertLessEqual(err.max(), T.BOUND, f"{arch} {outtype} {args}: deviates by {err.max():.3e}")
                if p == 2:
                    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
                if kind:  # the test can tell the poolings apart
                    for other in ("last", "mean", "cls"):
                        if other != kind:
                            miss = T.rel_err(got, R.normalize(R.pool(e, ranges, other), p)).max()
                            self.assertGreater(miss, T.MUTANT_FACTOR * T.BOUND, f"{args} vs {other}")
        print(f"[ info ] llama-embedding {arch} {outtype}: largest deviation from the reference "
              f"{max(worst):.1e}" + (f" ({'; '.join(notes)})" if notes else ""), file=sys.stderr)

    def test_qwen3_f32(self):
        self.check_file("qwen3", "f32")

    def test_gemma3_f32(self):
        self.check_file("gemma3", "f32")


if __name__ == "__main__":
    unittest.main()
