"""codegen/ggml_types.py (tensor type facts) and the scheme/ISA/pair tables of codegen/targets.py."""
from __future__ import annotations

import unittest

from codegen import ggml_types
from codegen.targets import ISAS, PAIRS, SCHEMES, targets_of


class GgmlTypes(unittest.TestCase):
    def test_ids_and_names(self):
        self.assertEqual((ggml_types.TYPE_IDS["I2_S"], ggml_types.TYPE_IDS["TL1"], ggml_types.TYPE_IDS["TL2"]),
                         (36, 38, 39))
        self.assertEqual(ggml_types.TYPE_NAMES[8], "Q8_0")
        self.assertEqual((SCHEMES["tl1"].type_id, SCHEMES["tl2"].type_id), (38, 39))

    def test_tensor_nbytes(self):
        # formats.md: I2_S/TL1 M*K/4 + 32; TL2 pad32((K-256)*M/3*5/8 + 256*M/2*4/8) + 32
        self.assertEqual(ggml_types.tensor_nbytes("I2_S", 768, 256), 768 * 256 // 4 + 32)
        self.assertEqual(ggml_types.tensor_nbytes("TL1", 1536, 4096), 1536 * 4096 // 4 + 32)
        self.assertEqual(ggml_types.tensor_nbytes("TL2", 640, 2560), (2304 * 640 // 3 * 5 // 8 + 256 * 640 // 2 * 4 // 8 + 31) // 32 * 32 + 32)
        self.assertEqual(ggml_types.tensor_nbytes("Q8_0", 2, 64), 2 * 2 * 34)
        self.assertEqual(SCHEMES["tl2"].tensor_bytes(640, 2560), ggml_types.tensor_nbytes("TL2", 640, 2560))
        with self.assertRaises(ValueError):
            ggml_types.tensor_nbytes("Q8_0", 2, 33)
        with self.assertRaises(KeyError):
            ggml_types.tensor_nbytes("NO_SUCH", 2, 32)

    def test_violations(self):
        self.assertEqual(SCHEMES["tl2"].violations(640, 2560, 160, 96, 32), [])
        broken = SCHEMES["tl2"].violations(640, 2560, 160, 90, 32)
        self.assertEqual([v.field for v in broken], ["block_k", "block_k"])
        self.assertEqual([v.field for v in SCHEMES["tl1"].violations(1536, 4096, 256, 128, 16)], ["simd_m"])


class Pairs(unittest.TestCase):
    def test_every_scheme_has_a_pair_and_pairs_are_unique(self):
        for name in SCHEMES:
            self.assertTrue(targets_of(name), name)
        keys = [(t.scheme.name, t.isa.name) for t in PAIRS]
        self.assertEqual(len(keys), len(set(keys)))
        self.assertEqual(len({t.output for t in PAIRS}), len(PAIRS))
        for t in PAIRS:
            self.assertIs(ISAS[t.isa.name], t.isa)

    def test_names_follow_the_grammar(self):
        # a scheme's ISAs are listed best first: AVX-512 before AVX2 before portable C
        self.assertEqual([t.isa.name for t in targets_of("tl2")], ["avx512", "avx2", "portable"])
        t = targets_of("tl2")[1]
        self.assertEqual(t.kernel_name(2560, 6912, 160, 96, 32), "bitnet_tl2_qgemm_m2560_k6912_bm160_bk96_sm32__avx2")
        self.assertEqual(t.generic_name, "bitnet_tl2_qgemm_generic__avx2")
        self.assertEqual(t.ctor_name, "bitnet_tl2_lut_ctor__avx2")


if __name__ == "__main__":
    unittest.main()
