"""`validate` and codegen.config: every tile rule and schema rule is rejected with its message (exit 2
through the CLI), every violation is reported, and every real config validates with the numbers of
design.md §2."""
from __future__ import annotations

import os
import re
import unittest

from .helpers import CONFIGS, INVALID, REPO, run_cli, tempdir, write

from codegen import config as cfg

KERNEL_LINE = re.compile(r"^(?P<file>[^:]+): (?P<target>tl[12])\.(?P<table>default|pretuned)\.kernels\[(?P<i>\d+)\] "
                         r"\(m=(?P<m>[^,]+), k=(?P<k>[^)]+)\): (?P<field>[a-z_]+) = (?P<value>.+?): (?P<rule>.+)$")

# fixture -> the exact violation lines expected (after "<file>: "), in order
EXPECTED = {
    "tl1-m-mod-bm.yaml": [
        "tl1.default.kernels[2] (m=768, k=256): block_m = 160: m % block_m must be 0 (m = 768, remainder 128)"],
    "tl1-k-mod-bk.yaml": [
        "tl1.default.kernels[1] (m=256, k=768): block_k = 240: k % block_k must be 0 for TL1 (k = 768, remainder 48)"],
    "tl2-k-rem-32.yaml": [
        "tl2.default.kernels[0] (m=256, k=1536): block_k = 168: (k % block_k) % 32 must be 0: the two-weight tail "
        "of K is processed 32 at a time (k = 1536, k % block_k = 24)"],
    "tl2-bk-102.yaml": [
        "tl2.default.kernels[0] (m=256, k=3264): block_k = 102: block_k must be a multiple of 24 (the TL2 kernel "
        "consumes 8 groups of 3 per sign word; block_k % 6 == 0 alone would silently drop weights)"],
    "tl2-bk-90.yaml": [
        "tl2.default.kernels[0] (m=256, k=2880): block_k = 90: block_k must be a multiple of 24 (the TL2 kernel "
        "consumes 8 groups of 3 per sign word; block_k % 6 == 0 alone would silently drop weights)"],
    "tl1-simd-48.yaml": [
        "tl1.default.kernels[2] (m=768, k=256): simd_m = 48: TL1 kernels compute 32 or 64 rows per SIMD step"],
    "tl2-simd-64.yaml": [
        "tl2.default.kernels[0] (m=256, k=256): simd_m = 64: TL2 kernels compute 32 rows per SIMD step"],
    "tl1-bm-mod-simd.yaml": [
        "tl1.default.kernels[2] (m=768, k=256): block_m = 96: block_m % simd_m must be 0 (simd_m = 64)"],
    "tl1-bk-over-256.yaml": [
        "tl1.default.kernels[1] (m=256, k=768): block_k = 384: block_k <= 256: the int16 accumulator of one "
        "block could overflow"],
    "tl2-bk-over-255.yaml": [
        "tl2.default.kernels[0] (m=256, k=1056): block_k = 264: block_k <= 255: the int16 accumulator of one "
        "block could overflow"],
    "large-tl2-pretuned-bm64.yaml": [
        "tl2.pretuned.kernels[2] (m=4096, k=1536): simd_m = 64: TL2 kernels compute 32 rows per SIMD step"],
    "unknown-keys.yaml": [
        "unknown key 'colour' (allowed: model, hf_repo, architecture, layout, shapes, notes, tl1, tl2)",
        "layout: unknown key 'n_layers' (allowed: hidden_size, intermediate_size, num_attention_heads, "
        "num_key_value_heads, num_hidden_layers, head_dim)",
        "tl1.default: unknown key 'comment' (allowed: source, kernels)",
        "tl1.default.kernels[1] (m=256, k=768): unknown key 'bn' (allowed: m, k, block_m, block_k, simd_m, note)"],
    "duplicate-shapes.yaml": [
        "tl1.default.kernels[3] (m=256, k=768): shape = 256x768: duplicate shape within the table (first at kernels[1])"],
    "bad-table-name.yaml": ["tl1.fast: unknown table 'fast' (tables: default, pretuned)"],
    "bad-target-name.yaml": ["tl3: unknown target 'tl3' (targets: tl1, tl2)"],
    "wrong-types.yaml": [
        "model = 3: must be a non-empty string",
        "layout.hidden_size = '256': must be an integer, not str",
        "tl1.default.kernels[0] (m=256, k=256): m = '256': must be an integer, not str",
        "tl1.default.kernels[1] (m=256, k=768): block_k = True: must be an integer, not bool",
        "tl1.default.kernels[2] (m=768, k=256): simd_m = 32.0: must be an integer, not float",
        "tl1.default.kernels[2] (m=768, k=256): note = 5: must be a string, not int"],
    "layout-mismatch.yaml": [
        "tl1.default: the table does not cover exactly the shapes the layout implies (640x2560, 2560x2560, "
        "2560x6912, 6912x2560): missing 640x2560, 2560x6912, 6912x2560; extra 3200x3200, 3200x8640, 8640x3200"],
    "yaml-syntax.yaml": [
        "line 9, column 9: YAML syntax error: expected ',' or '}', but got '{' (while parsing a flow mapping at line 8)"],
    "missing-keys.yaml": [
        "missing required key 'model'",
        "layout: missing required key 'num_key_value_heads'",
        "tl1.default: missing required key 'source'",
        "tl1.default.kernels[0] (m=256, k=256): missing required key 'block_k'"],
    "duplicate-key.yaml": [
        "line 11: duplicate key 'default' (first at line 5)",
        "tl1.default: the table does not cover exactly the shapes the layout implies (256x256, 256x768, 768x256): "
        "missing 256x768, 768x256"],
    # found by the property tests (tests/codegen_props): each was a traceback, a multi-line or unbounded
    # message, or a config that validated but whose generated C did not compile
    "deep-nesting.yaml": ["line 3, column 72: YAML syntax error: nesting deeper than 64 levels"],
    "control-character.yaml": [
        "line 3, column 12: YAML syntax error: unacceptable character #x0001: special characters are not allowed"],
    "alias-bomb.yaml": [f"unknown key 'l{i}' (allowed: model, hf_repo, architecture, layout, shapes, notes, tl1, tl2)"
                        for i in range(6)] + [
        "model = [" + ", ".join(["[" + ", ".join(["[...]"] * 5) + ", ...]"] * 5) + ", ...]: must be a non-empty string"],
    "dimension-over-int32.yaml": [
        "tl1.default.kernels[0] (m=4294967296, k=256): m = 4294967296: m <= 2147483647: the generated C keeps "
        "block_m in an int32 field and M*K in int64"],
    "newline-in-key.yaml": [
        "'tl3\\n': unknown target 'tl3\\n' (targets: tl1, tl2)",
        "tl1.'fast\\n': unknown table 'fast\\n' (tables: default, pretuned)",
        "tl1.default.kernels[0] (m='2\\n56', k=256): m = '2\\n56': must be an integer, not str",
        "tl1.default.kernels[1] (m=256, k=256): unknown key 'x\\ny' (allowed: m, k, block_m, block_k, simd_m, note)"],
}


class FixtureRules(unittest.TestCase):
    def test_every_fixture_has_expectations(self):
        on_disk = sorted(f for f in os.listdir(INVALID) if f.endswith(".yaml"))
        self.assertEqual(on_disk, sorted(EXPECTED))

    def test_each_rule_is_rejected_with_its_message(self):
        for name, lines in EXPECTED.items():
            with self.subTest(fixture=name):
                rel = f"tests/codegen/invalid/{name}"
                r = run_cli("validate", rel)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stdout, "")
                self.assertEqual(r.stderr.splitlines(), [f"{rel}: {line}" for line in lines])
                self.assertNotIn("Traceback", r.stderr)

    def test_kernel_violation_lines_follow_the_format(self):
        r = run_cli("validate", "tests/codegen/invalid/tl2-k-rem-32.yaml")
        m = KERNEL_LINE.match(r.stderr.splitlines()[0])
        self.assertIsNotNone(m, r.stderr)
        self.assertEqual(m.group("file"), "tests/codegen/invalid/tl2-k-rem-32.yaml")
        self.assertEqual((m.group("target"), m.group("table"), m.group("i")), ("tl2", "default", "0"))
        self.assertEqual((m.group("m"), m.group("k"), m.group("field"), m.group("value")), ("256", "1536", "block_k", "168"))

    def test_all_violations_of_all_files_are_collected(self):
        names = sorted(EXPECTED)
        r = run_cli("validate", *[f"tests/codegen/invalid/{n}" for n in names])
        self.assertEqual(r.returncode, 2)
        self.assertEqual(len(r.stderr.splitlines()), sum(len(EXPECTED[n]) for n in names))

    def test_load_config_raises_with_every_violation(self):
        with self.assertRaises(cfg.ConfigError) as cm:
            cfg.load_config(os.path.join(INVALID, "wrong-types.yaml"))
        self.assertEqual(len(cm.exception.violations), 6)
        self.assertIn("block_k = True: must be an integer, not bool", str(cm.exception))

    def test_generate_and_check_refuse_invalid_configs(self):
        out = os.path.join(tempdir(self), "out")
        for cmd in ("generate", "check"):
            r = run_cli(cmd, "--configs", os.path.join(INVALID, "tl2-bk-90.yaml"), "--out", out)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("block_k must be a multiple of 24", r.stderr)
        self.assertFalse(os.path.exists(out))


class InlineRules(unittest.TestCase):
    """Rules without a fixture file: written to a temp dir."""

    TINY = """model: t
layout: {hidden_size: 256, intermediate_size: 768, num_attention_heads: 4, num_key_value_heads: 4}
tl1:
  default:
    source: s
    kernels:
      - {m: 256, k: 256, block_m: 256, block_k: 256, simd_m: 32}
      - {m: 256, k: 768, block_m: 256, block_k: 256, simd_m: 32}
      - {m: 768, k: 256, block_m: 256, block_k: 256, simd_m: 32}
"""

    def validate(self, text: str, name: str = "t.yaml") -> list[str]:
        path = write(os.path.join(tempdir(self), name), text)
        _, problems = cfg.validate_file(path)
        return [p[len(path) + 2:] for p in problems]

    def test_valid_inline_config(self):
        self.assertEqual(self.validate(self.TINY), [])

    def test_layout_and_shapes_are_exclusive(self):
        self.assertEqual(self.validate(self.TINY + "shapes: [[256, 256]]\n"), ["give either 'layout' or 'shapes', not both"])

    def test_layout_heads_must_divide(self):
        text = self.TINY.replace("num_attention_heads: 4, num_key_value_heads: 4", "num_attention_heads: 6, num_key_value_heads: 4")
        self.assertEqual(self.validate(text),
                         ["layout: hidden_size = 256 is not a multiple of num_attention_heads = 6 (give head_dim)"])

    def test_gqa_heads_must_be_multiple_of_kv(self):
        text = self.TINY.replace("num_key_value_heads: 4", "num_key_value_heads: 3")
        self.assertEqual(self.validate(text),
                         ["layout: num_attention_heads = 4 is not a multiple of num_key_value_heads = 3"])

    def test_bad_file_stem(self):
        self.assertEqual(self.validate(self.TINY, name="bad name.yaml")[0][:16], "name = 'bad name")

    def test_no_target(self):
        text = self.TINY.split("tl1:")[0]
        self.assertEqual(self.validate(text), ["missing required key: at least one target (tl1, tl2)"])

    def test_empty_kernels_and_non_mapping_document(self):
        self.assertEqual(self.validate("model: t\nshapes: [[256, 256]]\ntl1:\n  default: {source: s, kernels: []}\n"),
                         ["tl1.default.kernels: must be a non-empty list of tile entries, not []"])
        self.assertEqual(self.validate("- 1\n- 2\n")[0][:32], "the document must be a mapping w")

    def test_negative_and_zero_values(self):
        text = self.TINY.replace("{m: 256, k: 256, block_m: 256", "{m: 256, k: 256, block_m: 0")
        self.assertEqual(self.validate(text), ["tl1.default.kernels[0] (m=256, k=256): block_m = 0: must be a positive integer"])

    def test_file_stem_with_a_final_newline(self):
        """"$" matched before a final newline, so "t\\n.yaml" validated and its name broke the registry's C
        string; the file name itself is shown escaped, so the violation stays one line."""
        d = tempdir(self)
        path = write(os.path.join(d, "t\n.yaml"), self.TINY)
        _, problems = cfg.validate_file(path)
        self.assertEqual(len(problems), 1)
        self.assertTrue(problems[0].startswith(os.path.join(d, "t\\n.yaml") + ": name = 't\\n': "), problems)
        r = run_cli("validate", path)
        self.assertEqual((r.returncode, r.stderr.splitlines()), (2, problems))

    def test_comments_of_generated_files_stay_comments(self):
        """A config path inside the repository goes into C block comments and CMake line comments: "*/",
        "/*" and newlines in a folder name must not end them or open a nested comment."""
        from codegen import render
        self.assertEqual(render.comment_safe("configs/x*/a.yaml"), "configs/x*\\/a.yaml")
        self.assertEqual(render.comment_safe("configs/a\nb/c.yaml"), "configs/a\\nb/c.yaml")
        self.assertEqual(render.comment_safe("configs/*x/a.yaml"), "configs/\\*x/a.yaml")  # no nested "/*"
        banner = render.c_banner(["configs/x*/a\n.yaml", "configs/*y/b.yaml"], "t.j2")
        self.assertEqual(banner.count("*/"), 2)   # the banner's own end and "/* clang-format off */"
        self.assertEqual(banner.count("/*"), 2)   # the banner's own start and "/* clang-format off */"
        self.assertEqual(len(render.cmake_banner(["configs/a\nb/c.yaml"], "t.j2").splitlines()), 3)

    def test_duplicate_config_names_in_one_run(self):
        d = tempdir(self)
        a = write(os.path.join(d, "a", "same.yaml"), self.TINY)
        b = write(os.path.join(d, "b", "same.yaml"), self.TINY)
        with self.assertRaises(cfg.ConfigError) as cm:
            cfg.load_all([a, b])
        self.assertIn("name = 'same': also the name of", str(cm.exception))


class RealConfigs(unittest.TestCase):
    def test_every_real_config_validates(self):
        files = sorted(f"configs/{f}" for f in os.listdir(CONFIGS) if f.endswith(".yaml"))
        self.assertGreaterEqual(len(files), 16)
        r = run_cli("validate", *files)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "ok\n", ""))

    def test_load_all_directory(self):
        configs = cfg.load_all(CONFIGS)
        names = [c.name for c in configs]
        self.assertEqual(names, sorted(names))
        for expected in ("bitnet_b1_58-large", "bitnet_b1_58-3B", "Llama3-8B-1.58-100B-tokens", "BitNet-b1.58-2B-4T",
                         "bitnetcpp-tiny", "dummy-125M", "dummy-350M", "dummy-1B", "dummy-1.5B", "dummy-2.7B",
                         "dummy-3.8B", "dummy-7B", "dummy-13B", "dummy-30B", "dummy-70B", "dummy-100B"):
            self.assertIn(expected, names)
        for c in configs:
            for t in c.all_tables():
                self.assertEqual(sorted(t.shapes), c.shapes, f"{c.name} {t.target}.{t.name}")
                self.assertTrue(t.source.strip())

    def tiles(self, name, target, table):
        c = cfg.load_config(os.path.join(CONFIGS, name + ".yaml"))
        return [(e.m, e.k, e.block_m, e.block_k, e.simd_m) for e in c.table(target, table).kernels]

    def test_reference_tables_of_design_section_2(self):
        large = [(1536, 4096), (1536, 1536), (4096, 1536)]
        for tab in ("default", "pretuned"):
            self.assertEqual(self.tiles("bitnet_b1_58-large", "tl1", tab),
                             [s + t for s, t in zip(large, [(256, 128, 32), (128, 64, 64), (256, 128, 32)])])
            self.assertEqual(self.tiles("bitnet_b1_58-large", "tl2", tab),
                             [s + t for s, t in zip(large, [(256, 96, 32), (128, 192, 32), (256, 96, 32)])])
        b3 = [(3200, 8640), (3200, 3200), (8640, 3200)]
        for tab in ("default", "pretuned"):
            self.assertEqual(self.tiles("bitnet_b1_58-3B", "tl1", tab),
                             [s + t for s, t in zip(b3, [(160, 64, 32), (320, 128, 64), (320, 64, 32)])])
            self.assertEqual(self.tiles("bitnet_b1_58-3B", "tl2", tab),
                             [s + t for s, t in zip(b3, [(160, 96, 32), (320, 96, 32), (320, 96, 32)])])
        l8 = [(14336, 4096), (4096, 14336), (1024, 4096), (4096, 4096)]
        self.assertEqual(self.tiles("Llama3-8B-1.58-100B-tokens", "tl1", "default"),
                         [s + t for s, t in zip(l8, [(256, 128, 32), (128, 64, 64), (256, 128, 32), (128, 64, 64)])])
        self.assertEqual(self.tiles("Llama3-8B-1.58-100B-tokens", "tl1", "pretuned"),
                         [s + t for s, t in zip(l8, [(256, 128, 64), (256, 128, 32), (128, 64, 64), (128, 64, 32)])])
        for tab in ("default", "pretuned"):
            self.assertEqual(self.tiles("Llama3-8B-1.58-100B-tokens", "tl2", tab),
                             [s + t for s, t in zip(l8, [(256, 96, 32), (128, 96, 32), (256, 96, 32), (128, 96, 32)])])

    def test_large_tl2_pretuned_keeps_32_with_a_note(self):
        c = cfg.load_config(os.path.join(CONFIGS, "bitnet_b1_58-large.yaml"))
        e = c.table("tl2", "pretuned").entry(4096, 1536)
        self.assertEqual(e.simd_m, 32)
        self.assertIn("bm 64", e.note)

    def test_2b4t_has_its_own_shapes_not_the_3b_tiles(self):
        c = cfg.load_config(os.path.join(CONFIGS, "BitNet-b1.58-2B-4T.yaml"))
        self.assertEqual(c.shapes, [(640, 2560), (2560, 2560), (2560, 6912), (6912, 2560)])
        self.assertEqual(set(c.tables["tl1"]), {"default"})
        self.assertIn("rule", c.table("tl2", "default").source)


if __name__ == "__main__":
    unittest.main()
