"""`shapes`, codegen.shapes and the GGUF reader: the bitnet.cpp-written test GGUFs, made-up
config.json files, truncated and malformed input (exit 2 naming the file and key)."""
from __future__ import annotations

import json
import os
import struct
import unittest

from .helpers import CONFIGS, TINY, run_cli, tempdir, write

from codegen import config as cfg
from codegen import gguf_reader, shapes

TINY_SHAPES = [(256, 256), (256, 768), (768, 256)]
F32 = os.path.join(TINY, "ggml-model-f32.gguf")
I2S = os.path.join(TINY, "ggml-model-i2_s.gguf")


def gguf_bytes(kv=(), tensors=(), version=3, alignment=32, data_size=None) -> bytes:
    """A minimal GGUF file. kv: (key, type, packed value bytes); tensors: (name, ne, type, offset)."""
    def s(x: str) -> bytes:
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kv))
    for key, vtype, raw in kv:
        out += s(key) + struct.pack("<I", vtype) + raw
    for name, ne, ttype, off in tensors:
        out += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        out += struct.pack("<IQ", ttype, off)
    out += b"\0" * ((-len(out)) % alignment)
    if data_size is None:
        data_size = sum(gguf_reader.tensor_nbytes(t, ne) for _, ne, t, _ in tensors)
    return out + b"\0" * data_size


class LayoutShapes(unittest.TestCase):
    def test_known_layouts(self):
        self.assertEqual(shapes.layout_shapes(2560, 6912, 20, 5), [(640, 2560), (2560, 2560), (2560, 6912), (6912, 2560)])
        self.assertEqual(shapes.layout_shapes(3200, 8640, 32, 32), [(3200, 3200), (3200, 8640), (8640, 3200)])
        self.assertEqual(shapes.layout_shapes(4096, 14336, 32, 8),
                         [(1024, 4096), (4096, 4096), (4096, 14336), (14336, 4096)])
        self.assertEqual(shapes.layout_shapes(1536, 4096, 16, 16), [(1536, 1536), (1536, 4096), (4096, 1536)])

    def test_explicit_head_dim(self):
        # q has n_head * head_dim rows when that differs from hidden (and o the transpose)
        self.assertEqual(shapes.layout_shapes(2048, 8192, 16, 4, head_dim=256),
                         [(1024, 2048), (2048, 4096), (2048, 8192), (4096, 2048), (8192, 2048)])

    def test_bad_layouts(self):
        for args in ((0, 1, 1, 1), (256, 768, 3, 3), (256, 768, 4, 3), (256, True, 4, 4)):
            with self.subTest(args=args), self.assertRaises(ValueError):
                shapes.layout_shapes(*args)

    def test_parse_shape(self):
        self.assertEqual(shapes.parse_shape("2560x6912"), (2560, 6912))
        self.assertEqual(shapes.parse_shape("640×2560"), (640, 2560))
        for bad in ("2560", "0x5", "axb", "1x2x3"):
            with self.subTest(bad=bad), self.assertRaises(ValueError):
                shapes.parse_shape(bad)


class GGUFShapes(unittest.TestCase):
    def test_bitnetcpp_tiny_files(self):
        for path in (F32, I2S):
            with self.subTest(path=path):
                self.assertEqual(shapes.shapes_of(path), TINY_SHAPES)
                info = shapes.model_info(path)
                self.assertEqual(info.architecture, "bitnet")
                self.assertEqual(info.layout, {"hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4,
                                               "num_key_value_heads": 4, "num_hidden_layers": 2})

    def test_reader_on_i2s_file(self):
        g = gguf_reader.read_gguf(I2S)
        self.assertEqual((g.version, g.alignment), (3, 32))
        self.assertEqual(g.kv["general.file_type"], 40)
        self.assertEqual(len(g.kv["tokenizer.ggml.tokens"]), 512)
        t = g.tensor("blk.0.ffn_down.weight")
        self.assertEqual((t.ne, t.type_name, t.nbytes), ((768, 256), "I2_S", 768 * 256 // 4 + 32))
        self.assertEqual(g.tensor("token_embd.weight").type_name, "F16")

    def test_cli_json(self):
        r = run_cli("shapes", "tests/data/bitnetcpp-tiny/ggml-model-i2_s.gguf", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["source"], "tests/data/bitnetcpp-tiny/ggml-model-i2_s.gguf")
        self.assertEqual(doc["shapes"], [[256, 256], [256, 768], [768, 256]])
        self.assertIn("bitnetcpp-tiny", doc["covering"]["tl1"]["default"])
        self.assertIn("bitnetcpp-tiny", doc["covering"]["tl2"]["default"])
        self.assertEqual(doc["covering"]["tl1"]["pretuned"], [])
        self.assertEqual(doc["uncovered"], {"tl1": [], "tl2": []})

    def test_cli_text(self):
        r = run_cli("shapes", "tests/data/bitnetcpp-tiny/ggml-model-f32.gguf")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("768x256   tl1: bitnetcpp-tiny/default   tl2: bitnetcpp-tiny/default", r.stdout)
        self.assertIn("tl1 default: bitnetcpp-tiny", r.stdout)

    def test_directory_with_gguf(self):
        r = run_cli("shapes", "tests/data/bitnetcpp-tiny", "--json")
        self.assertEqual(json.loads(r.stdout)["shapes"], [[256, 256], [256, 768], [768, 256]])

    def test_truncated_gguf(self):
        d = tempdir(self)
        with open(I2S, "rb") as f:
            data = f.read()
        g = gguf_reader.read_gguf(I2S)
        # cut inside the KV section, inside the tensor infos, and inside the data section
        for cut in (3, 20, 2000, g.data_offset - 100, g.data_offset + 1000, len(data) - 1):
            with self.subTest(cut=cut):
                p = write(os.path.join(d, f"cut{cut}.gguf"), "")
                with open(p, "wb") as f:
                    f.write(data[:cut])
                with self.assertRaises(shapes.ShapeError) as cm:
                    shapes.shapes_of(p)
                self.assertIn(p, str(cm.exception))
                r = run_cli("shapes", p)
                self.assertEqual(r.returncode, 2)
                self.assertIn(p, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
        r = run_cli("shapes", os.path.join(d, "cut2000.gguf"))
        self.assertIn("truncated", r.stderr)
        r = run_cli("shapes", os.path.join(d, f"cut{len(data) - 1}.gguf"))
        self.assertIn("truncated: tensor 'output_norm.weight'", r.stderr)   # the last tensor in the file

    def test_malformed_gguf(self):
        d = tempdir(self)
        cases = {
            "magic.gguf": (b"GGUX" + bytes(40), "not a GGUF file"),
            "v1.gguf": (gguf_bytes(version=1), "unsupported GGUF version 1"),
            "huge-count.gguf": (b"GGUF" + struct.pack("<IQQ", 3, 1 << 60, 0), "more than a"),
            "long-string.gguf": (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 50), "truncated"),
            "dims.gguf": (gguf_bytes(tensors=[("blk.0.attn_q.weight", (8, 8, 1, 1, 1), 0, 0)], data_size=0), "n_dims = 5"),
            "offset.gguf": (gguf_bytes(tensors=[("blk.0.attn_q.weight", (32, 32), 0, 8)], data_size=8192), "not a multiple of the alignment"),
            "no-tensors.gguf": (gguf_bytes(tensors=[("token_embd.weight", (32, 32), 0, 0)]), "no ternary matmul tensors"),
            "bad-kv-type.gguf": (gguf_bytes(kv=[("a.b", 99, b"")]), "unknown value type 99"),
            "bad-alignment.gguf": (gguf_bytes(kv=[("general.alignment", 4, struct.pack("<I", 24))]), "not a positive power of two"),
        }
        for name, (data, msg) in cases.items():
            with self.subTest(case=name):
                p = os.path.join(d, name)
                with open(p, "wb") as f:
                    f.write(data)
                r = run_cli("shapes", p)
                self.assertEqual(r.returncode, 2, r.stdout)
                self.assertIn(p, r.stderr)
                self.assertIn(msg, r.stderr)
                self.assertNotIn("Traceback", r.stderr)

    def test_minimal_gguf_shapes(self):
        p = os.path.join(tempdir(self), "m.gguf")
        with open(p, "wb") as f:
            f.write(gguf_bytes(kv=[("general.architecture", 8, struct.pack("<Q", 6) + b"bitnet")],
                               tensors=[("blk.0.attn_q.weight", (128, 64), 36, 0),
                                        ("blk.0.ffn_down.weight", (256, 64), 36, 2080),
                                        ("blk.0.ffn_up.weight", (64, 256), 38, 6208)]))
        self.assertEqual(shapes.shapes_of(p), [(64, 128), (64, 256), (256, 64)])
        self.assertIsNone(shapes.model_info(p).layout)   # no <arch>.embedding_length etc.


class ConfigJsonShapes(unittest.TestCase):
    HF_2B4T = {"architectures": ["BitNetForCausalLM"], "hidden_size": 2560, "intermediate_size": 6912,
               "num_attention_heads": 20, "num_key_value_heads": 5, "num_hidden_layers": 30}

    def test_made_up_config_json(self):
        d = tempdir(self)
        p = write(os.path.join(d, "config.json"), json.dumps(self.HF_2B4T))
        self.assertEqual(shapes.shapes_of(p), [(640, 2560), (2560, 2560), (2560, 6912), (6912, 2560)])
        self.assertEqual(shapes.shapes_of(d), shapes.shapes_of(p))   # the directory form
        r = run_cli("shapes", d, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        self.assertEqual(doc["covering"]["tl1"]["default"], ["BitNet-b1.58-2B-4T"])
        self.assertEqual(doc["covering"]["tl2"]["pretuned"], [])
        self.assertEqual(doc["uncovered"], {"tl1": [], "tl2": []})

    def test_kv_heads_default_to_heads_and_head_dim(self):
        d = tempdir(self)
        p = write(os.path.join(d, "config.json"), json.dumps(
            {"hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16}))
        self.assertEqual(shapes.shapes_of(p), [(1024, 1024), (1024, 3072), (3072, 1024)])
        p = write(os.path.join(d, "config.json"), json.dumps(
            {"hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 16, "num_key_value_heads": 4,
             "head_dim": 256}))
        self.assertEqual(shapes.shapes_of(p), [(1024, 2048), (2048, 4096), (2048, 8192), (4096, 2048), (8192, 2048)])

    def test_uncovered_shapes(self):
        d = tempdir(self)
        p = write(os.path.join(d, "config.json"), json.dumps(
            {"hidden_size": 3072, "intermediate_size": 23040, "num_attention_heads": 12, "num_key_value_heads": 4}))
        r = run_cli("shapes", p, "--json")
        doc = json.loads(r.stdout)
        self.assertEqual(doc["shapes"], [[1024, 3072], [3072, 3072], [3072, 23040], [23040, 3072]])
        self.assertEqual(doc["uncovered"]["tl1"], [[3072, 23040], [23040, 3072]])   # the others: dummy configs
        self.assertEqual(doc["covering"]["tl2"], {"default": [], "pretuned": []})

    def test_bad_config_json(self):
        d = tempdir(self)
        missing = dict(self.HF_2B4T)
        del missing["intermediate_size"]
        cases = {
            "missing": (json.dumps(missing), "missing key 'intermediate_size'"),
            "type": (json.dumps(dict(self.HF_2B4T, hidden_size="2560")), "key 'hidden_size' = '2560'"),
            "json": ("{not json", "neither a GGUF file nor a JSON config.json"),
            "array": ("[1, 2]", "expected a JSON object"),
        }
        for name, (text, msg) in cases.items():
            with self.subTest(case=name):
                p = write(os.path.join(d, name, "config.json"), text)
                r = run_cli("shapes", p)
                self.assertEqual(r.returncode, 2)
                self.assertIn(p, r.stderr)
                self.assertIn(msg, r.stderr)
                self.assertNotIn("Traceback", r.stderr)

    def test_missing_paths(self):
        d = tempdir(self)
        r = run_cli("shapes", os.path.join(d, "nope.gguf"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such file", r.stderr)
        r = run_cli("shapes", d)   # empty directory
        self.assertEqual(r.returncode, 2)
        self.assertIn("no config.json and no *.gguf", r.stderr)


class Coverage(unittest.TestCase):
    def test_coverage_api(self):
        configs = cfg.load_all(CONFIGS)
        cov = shapes.coverage([(3200, 8640), (3200, 3200), (8640, 3200)], configs)
        self.assertEqual(cov["covering"]["tl1"], {"default": ["bitnet_b1_58-3B"], "pretuned": ["bitnet_b1_58-3B"]})
        self.assertEqual(cov["uncovered"], {"tl1": [], "tl2": []})
        cov = shapes.coverage([(256, 256), (96, 96)], configs)
        self.assertEqual(cov["covering"]["tl2"], {"default": [], "pretuned": []})
        self.assertEqual(cov["uncovered"]["tl2"], [[96, 96]])
        # a subset of a table's shapes is covered by it
        cov = shapes.coverage([(1536, 1536)], configs)
        self.assertEqual(cov["covering"]["tl1"]["pretuned"], ["bitnet_b1_58-large"])


if __name__ == "__main__":
    unittest.main()
