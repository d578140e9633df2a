"""The two copies of the format facts agree: tensor byte sizes (codegen/ggml_types.py vs the C traits
table, src/base/types.c) and the TL1/TL2 tile rules (codegen/targets.py SCHEMES vs bitnet_tiles_check,
src/kernels/lut/pack.c), asked of the C side through the test tool bin/bitnet-type-facts
(tests/type_facts.c) of the build in BITNET_BUILD_DIR.

Sizes: every dense and ternary type the runtime reads over a grid of shapes that includes the edges
(K below and at 256, M*K not a multiple of 128 or 4, K not a multiple of a block): both give the same
number, or both refuse. The default tile rule (codegen derive vs bitnet_lut_default_tiles) over a grid
of shapes: the same tiles, or none on both sides. Tiles: a seeded sample of 400 entries, legal and not: the same verdict, the
same fields in the same order, and each Python rule's text inside the C message.
"""
from __future__ import annotations

import os
import random
import subprocess
import unittest

from codegen import ggml_types
from codegen.targets import SCHEMES

BUILD = os.environ.get("BITNET_BUILD_DIR")
TOOL = os.path.join(BUILD, "bin", "bitnet-type-facts") if BUILD else None


def c_facts(*args: object) -> tuple[int, str]:
    r = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout.strip()


@unittest.skipUnless(BUILD, "BITNET_BUILD_DIR is not set (ctest sets it)")
class TypeFactsAgree(unittest.TestCase):
    def setUp(self):
        self.assertTrue(os.access(TOOL, os.X_OK), f"{TOOL} not built (tests/CMakeLists.txt builds it)")

    def test_tensor_sizes(self):
        types = ("F32", "F16", "BF16", "Q8_0", "Q6_K", "I2_S", "TL1", "TL2")
        ms = (1, 3, 32, 100, 256, 2560)
        ks = (32, 100, 128, 255, 256, 257, 512, 768, 4096, 6912)
        checked = refused = 0
        for t in types:
            for m in ms:
                for k in ks:
                    rc, out = c_facts("nbytes", t, m, k)
                    try:
                        want = ggml_types.tensor_nbytes(t, m, k)
                    except ValueError as e:
                        self.assertEqual(rc, 1, f"{t} {m}x{k}: Python refuses ({e}), C says {out}")
                        self.assertTrue(out.startswith("error: "), out)
                        refused += 1
                        continue
                    self.assertEqual(rc, 0, f"{t} {m}x{k}: Python {want}, C: {out}")
                    self.assertEqual(int(out), want, f"{t} {m}x{k}")
                    checked += 1
        # the grid has both kinds, so neither branch is vacuous
        self.assertGreater(checked, 300)
        self.assertGreater(refused, 50)

    def test_default_tile_rule(self):
        from codegen.derive import derive_tiles
        ms = (32, 64, 100, 160, 256, 640, 1536, 2560, 3200, 6912)
        ks = (8, 100, 128, 200, 256, 264, 640, 768, 1536, 2560, 4096, 6912, 8640)
        found = none = 0
        for scheme in ("tl1", "tl2"):
            for m in ms:
                for k in ks:
                    rc, out = c_facts("default", scheme.upper(), m, k)
                    want = derive_tiles(scheme, m, k)
                    what = f"{scheme} {m}x{k}"
                    if want is None:
                        self.assertEqual((rc, out), (1, "none"), what)
                        none += 1
                    else:
                        self.assertEqual((rc, out), (0, f"{want['block_m']} {want['block_k']} {want['simd_m']}"), what)
                        found += 1
        self.assertGreater(found, 100)
        self.assertGreater(none, 20)

    def test_tile_rules(self):
        rng = random.Random(20261201)
        cases = [("tl2", 256, 768, 256, 96, 32), ("tl1", 1536, 4096, 256, 128, 32)]   # legal
        for _ in range(400):
            cases.append((rng.choice(("tl1", "tl2")), rng.choice((64, 256, 1536, 2560)),
                          rng.choice((128, 256, 768, 1536, 4096, 6912)), rng.choice((32, 64, 100, 128, 160, 256)),
                          rng.choice((24, 40, 64, 90, 96, 128, 192, 256, 264)), rng.choice((16, 32, 48, 64))))
        legal = 0
        for scheme, m, k, bm, bk, sm in cases:
            v = SCHEMES[scheme].violations(m, k, bm, bk, sm)
            rc, out = c_facts("tiles", scheme.upper(), m, k, bm, bk, sm)
            what = f"{scheme} {m}x{k} tiles {bm}/{bk}/{sm}"
            if not v:
                self.assertEqual((rc, out), (0, "ok"), what)
                legal += 1
                continue
            self.assertEqual(rc, 1, f"{what}: Python finds {v}, C: {out}")
            fields, _, msg = out.removeprefix("invalid ").partition(": ")
            self.assertEqual(fields.split(","), [x.field for x in v], f"{what}: {out}")
            for x in v:
                self.assertIn(f"{x.field} = {x.value}: {x.rule}", msg, what)
        self.assertGreater(legal, 5)


if __name__ == "__main__":
    unittest.main()
