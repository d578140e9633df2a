"""`python3 -m codegen import-ini`: bitnet.cpp's include/kernel_config.ini -> a config that validates and
generates. The inis in tests/data/kernel_config/ are written by hand in bitnet.cpp's format; the first
test shows they are byte for byte what its codegen_tl*.py writes through ConfigParser."""
from __future__ import annotations

import configparser
import io
import os
import unittest

from .helpers import CONFIGS, REPO, run_cli, tempdir, write

from codegen import config as cfg
from codegen import import_ini

DATA = os.path.join(REPO, "tests", "data", "kernel_config")
TL2_INI = os.path.join(DATA, "tiny-tl2.ini")
TL1_INI = os.path.join(DATA, "tiny-tl1.ini")
TL2_TILES = [(256, 256, 128, 96, 32), (256, 768, 128, 48, 32), (768, 256, 384, 96, 32)]
TL1_TILES = [(256, 256, 128, 128, 64), (256, 768, 256, 192, 32), (768, 256, 384, 64, 32)]


def read_bytes(path: str) -> bytes | None:
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return f.read()


def bitnet_cpp_ini(tiles) -> str:
    """What bitnet.cpp's utils/codegen_tl1.py / codegen_tl2.py write: ConfigParser, one section per shape,
    keys set as 'M', 'K', 'BM', 'BK', 'bmm' (ConfigParser stores them lower case)."""
    c = configparser.ConfigParser()
    for i, (m, k, bm, bk, sm) in enumerate(tiles):
        s = f"Kernels_{i}"
        c.add_section(s)
        c.set(s, "M", str(m))
        c.set(s, "K", str(k))
        c.set(s, "BM", str(bm))
        c.set(s, "BK", str(bk))
        c.set(s, "bmm", str(sm))
    out = io.StringIO()
    c.write(out)
    return out.getvalue()


class ImportIni(unittest.TestCase):
    def test_test_inis_are_in_bitnet_cpps_format(self):
        for path, tiles in ((TL2_INI, TL2_TILES), (TL1_INI, TL1_TILES)):
            with open(path) as f:
                self.assertEqual(f.read(), bitnet_cpp_ini(tiles), path)

    def test_round_trip_validates_and_generates(self):
        d = tempdir(self)
        for ini, target, tiles in ((TL2_INI, "tl2", TL2_TILES), (TL1_INI, "tl1", TL1_TILES)):
            with self.subTest(target=target):
                out = os.path.join(d, f"imported-{target}.yaml")
                r = run_cli("import-ini", ini, "--target", target, "--out", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"wrote {out} (3 shapes, {target} default table)", r.stderr)
                r = run_cli("validate", out)
                self.assertEqual((r.returncode, r.stdout.strip()), (0, "ok"), r.stderr)
                c = cfg.load_config(out)
                self.assertEqual(c.name, f"imported-{target}")
                self.assertEqual(list(c.tables), [target])
                got = [(e.m, e.k, e.block_m, e.block_k, e.simd_m) for e in c.tables[target]["default"].kernels]
                self.assertEqual(got, tiles)
                gen = os.path.join(d, f"gen-{target}")
                r = run_cli("generate", "--configs", CONFIGS, out, "--out", gen)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(os.path.join(gen, "bitnet-lut-kernels.h")) as f:
                    header = f.read()
                with open(os.path.join(gen, "bitnet-lut-registry.c")) as f:
                    registry = f.read()
                isa = "avx2" if target == "tl2" else "neon"
                for m, k, bm, bk, sm in tiles:
                    self.assertIn(f"bitnet_{target}_qgemm_m{m}_k{k}_bm{bm}_bk{bk}_sm{sm}__{isa}", header)
                self.assertIn(f'"imported-{target}"', registry)

    def test_stdout_and_names(self):
        r = run_cli("import-ini", TL2_INI, "--target", "tl2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('model: "tiny-tl2"', r.stdout)  # the name defaults to the ini's stem
        self.assertIn("{m: 768, k: 256, block_m: 384, block_k: 96, simd_m: 32, note: \"[Kernels_2]\"}", r.stdout)
        r = run_cli("import-ini", TL2_INI, "--target", "tl2", "--name", "bad name")
        self.assertEqual(r.returncode, 2)
        self.assertIn("config name 'bad name'", r.stderr)

    def test_tiles_that_break_the_target_rules_are_refused(self):
        # the TL2 ini's BK 96 does not divide K = 256, which TL1 needs
        r = run_cli("import-ini", TL2_INI, "--target", "tl1", "--out", os.path.join(tempdir(self), "x.yaml"))
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"{TL2_INI}: tl1.default.kernels[0] [Kernels_0] (m=256, k=256): block_k = 96: "
                      f"k % block_k must be 0", r.stderr)
        self.assertIn("nothing written", r.stderr)
        # bitnet.cpp's bitnet_b1_58-large TL2 preset says bm 64 for one shape (design.md §2): refused
        d = tempdir(self)
        ini = write(os.path.join(d, "large.ini"), bitnet_cpp_ini([(1536, 4096, 256, 96, 32), (1536, 1536, 128, 192, 32),
                                                                   (4096, 1536, 256, 96, 64)]))
        r = run_cli("import-ini", ini, "--target", "tl2", "--out", os.path.join(d, "large.yaml"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("kernels[2] [Kernels_2] (m=4096, k=1536): simd_m = 64", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "large.yaml")))

    def test_malformed_inis_are_refused_by_name(self):
        d = tempdir(self)
        good = "[Kernels_0]\nm = 256\nk = 256\nbm = 128\nbk = 96\nbmm = 32\n\n"
        cases = [
            ("[Kernels_0]\nm = 256\nk = 256\nbm = 128\nbk = 96\n", "[Kernels_0]: no key 'bmm'"),
            (good.replace("bmm = 32", "bmm = 32\nbn = 1"), "[Kernels_0]: unknown key 'bn'"),
            (good.replace("k = 256", "k = -256"), "[Kernels_0]: k = '-256' is not a positive decimal integer"),
            (good.replace("k = 256", "k = 0256"), "[Kernels_0]: k = '0256' is not a positive decimal integer"),
            (good + "[Kernels_1]\n", "[Kernels_1]: no key 'm'"),
            (good.replace("Kernels_0", "kernels"), "unknown section [kernels]"),
            ("[DEFAULT]\nm = 1\n", "unknown section [DEFAULT]"),
            (good + good, "section 'Kernels_0' already exists"),
            ("m = 256\n", "File contains no section headers"),
            ("# nothing\n", "no [Kernels_<n>] section"),
            (good + good.replace("Kernels_0", "Kernels_1").replace("bm = 128", "bm = 256"),
             "shape 256x256 is listed twice with different tiles: [Kernels_0] and [Kernels_1]"),
        ]
        for i, (text, needle) in enumerate(cases):
            with self.subTest(needle=needle):
                ini = write(os.path.join(d, f"bad{i}.ini"), text)
                with self.assertRaises(import_ini.IniError) as e:
                    import_ini.read_kernel_config(ini)
                self.assertIn(ini, str(e.exception))
                self.assertIn(needle, str(e.exception))
                r = run_cli("import-ini", ini, "--target", "tl2", "--out", os.path.join(d, f"bad{i}.yaml"))
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(needle, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
        r = run_cli("import-ini", os.path.join(d, "missing.ini"), "--target", "tl2")
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.ini: No such file or directory", r.stderr)
        r = run_cli("import-ini", TL2_INI, "--target", "tl9")
        self.assertEqual(r.returncode, 2)
        self.assertIn("invalid choice: 'tl9'", r.stderr)

    def test_out_directory_is_refused(self):
        d = tempdir(self)
        r = run_cli("import-ini", TL2_INI, "--target", "tl2", "--out", d + os.sep)
        self.assertEqual(r.returncode, 2)
        self.assertIn("is a directory; give a file name", r.stderr)

    def test_never_overwrites_tracked_or_source_files(self):
        for out in (os.path.join(REPO, "README.md"), os.path.join(CONFIGS, "tiny-tl2.yaml")):
            before = read_bytes(out)
            r = run_cli("import-ini", TL2_INI, "--target", "tl2", "--name", "tiny-tl2", "--out", out)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertRegex(r.stderr, r"codegen import-ini: --out .*refusing to (write into|overwrite)")
            self.assertNotIn("tuning", r.stderr)
            self.assertEqual(read_bytes(out), before)


if __name__ == "__main__":
    unittest.main()
