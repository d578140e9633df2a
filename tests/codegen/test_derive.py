"""codegen.derive: the tile rule for shapes nobody tuned, and `python3 -m codegen derive`."""
from __future__ import annotations

import os
import unittest

from .helpers import TINY, run_cli, stub_template_dir, tempdir

from codegen import config as cfg
from codegen.derive import derive_tiles
from codegen.targets import SCHEMES


def brute_force(target: str, m: int, k: int):
    """The rule of codegen/derive.py restated by exhaustive search, as an independent check."""
    if m % 32:
        return None
    bm = max(c for c in range(32, 257, 32) if m % c == 0)
    if target == "tl1":
        if k % 8:
            return None
        bk = max(c for c in range(8, 257, 8) if k % c == 0)
    else:
        if k < 256:
            return None
        cands = [96] if (k % 96) % 32 == 0 else [c for c in range(24, 241, 24) if (k % c) % 32 == 0]
        if not cands:
            return None
        bk = max(cands)
    return {"block_m": bm, "block_k": bk, "simd_m": 32}


class DeriveTiles(unittest.TestCase):
    def test_known_shapes(self):
        known = {
            ("tl1", 2560, 6912): (256, 256, 32), ("tl2", 2560, 6912): (256, 96, 32),
            ("tl1", 640, 2560): (160, 256, 32), ("tl2", 640, 2560): (160, 96, 32),
            ("tl1", 256, 256): (256, 256, 32), ("tl2", 256, 256): (256, 96, 32),
            ("tl1", 3200, 8640): (160, 240, 32), ("tl2", 3200, 8640): (160, 96, 32),
            ("tl1", 8640, 3200): (192, 200, 32), ("tl2", 8640, 3200): (192, 96, 32),
            ("tl2", 256, 1000): (256, 168, 32),     # (1000 % 96) % 32 = 8: search from 240 down
        }
        for (t, m, k), (bm, bk, sm) in known.items():
            with self.subTest(target=t, shape=f"{m}x{k}"):
                self.assertEqual(derive_tiles(t, m, k), {"block_m": bm, "block_k": bk, "simd_m": sm})
        self.assertEqual(derive_tiles(SCHEMES["tl2"], 640, 2560), {"block_m": 160, "block_k": 96, "simd_m": 32})

    def test_no_tiles(self):
        self.assertIsNone(derive_tiles("tl1", 100, 256))    # M % 32
        self.assertIsNone(derive_tiles("tl2", 100, 256))
        self.assertIsNone(derive_tiles("tl1", 256, 100))    # K % 8
        self.assertIsNone(derive_tiles("tl2", 256, 128))    # K < 256
        impossible = [k for k in range(256, 2000) if brute_force("tl2", 32, k) is None]
        self.assertTrue(impossible)
        for k in impossible[:20]:
            self.assertIsNone(derive_tiles("tl2", 32, k), k)
        with self.assertRaises(KeyError):
            derive_tiles("tl9", 256, 256)

    def test_rule_matches_brute_force_and_the_tile_rules(self):
        for t in ("tl1", "tl2"):
            for m in range(32, 1300, 32):
                for k in list(range(8, 700, 8)) + [1536, 2560, 3200, 4096, 6912, 8640, 14336]:
                    got = derive_tiles(t, m, k)
                    self.assertEqual(got, brute_force(t, m, k), (t, m, k))
                    if got:
                        self.assertEqual(SCHEMES[t].violations(m, k, got["block_m"], got["block_k"], got["simd_m"]), [])


class DeriveCommand(unittest.TestCase):
    def test_derive_shapes_writes_a_valid_config(self):
        d = tempdir(self)
        out = os.path.join(d, "mine.yaml")
        r = run_cli("derive", "--shape", "2560x6912", "640x2560", "--name", "mine", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        c = cfg.load_config(out)
        self.assertEqual(c.shapes, [(640, 2560), (2560, 6912)])
        e = c.table("tl1", "default").entry(640, 2560)
        self.assertEqual(e.tiles, (160, 256, 32))
        self.assertEqual(c.table("tl2", "default").entry(2560, 6912).tiles, (256, 96, 32))
        self.assertIn("derived by `python3 -m codegen derive` (rule: ", c.table("tl1", "default").source)

    def test_derive_to_stdout(self):
        r = run_cli("derive", "--shape", "256x256", "--name", "x")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("- {m: 256, k: 256, block_m: 256, block_k: 96, simd_m: 32}", r.stdout)

    def test_derive_model_uses_its_layout_and_generates(self):
        d = tempdir(self)
        out = os.path.join(d, "tiny-derived.yaml")
        r = run_cli("derive", "--model", os.path.join(TINY, "ggml-model-i2_s.gguf"), "--name", "tiny-derived", "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        c = cfg.load_config(out)
        self.assertEqual((c.layout.hidden_size, c.layout.intermediate_size, c.layout.num_attention_heads,
                          c.layout.num_key_value_heads, c.layout.num_hidden_layers), (256, 768, 4, 4, 2))
        self.assertEqual(c.architecture, "bitnet")
        # the derived tiles equal the hand-written bitnetcpp-tiny config (same rule)
        tiny = cfg.load_config(os.path.join(os.path.dirname(TINY), "..", "..", "configs", "bitnetcpp-tiny.yaml"))
        for t in ("tl1", "tl2"):
            self.assertEqual(c.table(t, "default").kernels, tiny.table(t, "default").kernels)
        # setup_env.py's next step: generate with the repo configs plus the new one
        gen = os.path.join(d, "gen")
        r = run_cli("generate", "--configs", "configs", out, "--out", gen, "--templates", stub_template_dir(d))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(gen, "bitnet-lut-registry.c")) as f:
            reg = f.read()
        self.assertIn('{"tiny-derived", "default", BITNET_TYPE_TL1, 3, ', reg)
        self.assertIn("tiny-derived.yaml", reg)
        self.assertNotIn(d, reg)

    def test_target_without_legal_tiles_is_left_out(self):
        r = run_cli("derive", "--shape", "256x128", "--name", "x")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("\ntl1:\n", r.stdout)
        self.assertNotIn("\ntl2:\n", r.stdout)
        self.assertIn("tl2: the derive rule has no legal tiles for 256x128", r.stderr)

    def test_bad_input(self):
        for args, msg in ((["--shape", "100x100"], "no target has legal tiles"),
                          (["--shape", "12by3"], "expected MxK"),
                          (["--model", "/nonexistent/x.gguf"], "no such file")):
            with self.subTest(args=args):
                r = run_cli("derive", *args, "--name", "x")
                self.assertEqual(r.returncode, 2)
                self.assertIn(msg, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
        r = run_cli("derive", "--shape", "256x256", "--name", "bad name")
        self.assertEqual(r.returncode, 2)
        r = run_cli("derive", "--name", "x")          # neither --shape nor --model
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    unittest.main()
