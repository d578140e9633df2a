"""setup_env.py with Hugging Face checkpoint folders of bitnet.cpp's models, made by
utils/make-hf-checkpoint.py (small dimensions, the models' config.json style): step 1 finds the folder
under --hf-repo's name, step 2 takes the shapes from its config.json (no table of model names) and
derives a kernel config into the build directory when none covers them, step 5 converts it with
utils/convert-hf-to-gguf-bitnet.py (the embedding models microsoft/bitnet-embedding-0.6b / -270m: with
utils/convert-bitnet-embedding-to-gguf.py, pooling from their 1_Pooling/config.json) into
<folder>/ggml-model-<quant>.gguf, --quant-embd [f16|q8_0|q6_k]
passing the token embedding's type through (bare: F16, bitnet.cpp's flag). The CMake steps are not run here (they would rebuild the test's own build): the
conversion uses BITNET_BUILD_DIR's bitnet-convert. Skipped when that build has no bitnet-convert.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETUP = os.path.join(REPO, "setup_env.py")
MAKE = os.path.join(REPO, "utils", "make-hf-checkpoint.py")
BUILD = os.environ.get("BITNET_BUILD_DIR") or os.path.join(REPO, "build")

if REPO not in sys.path:
    sys.path.insert(0, REPO)

from codegen.gguf_reader import read_gguf  # noqa: E402

# repo -> make-hf-checkpoint flags: each of bitnet.cpp's model families in its own config.json style
MODELS = {
    "1bitLLM/bitnet_b1_58-large": ["--arch", "bitnet", "--n-embd", "256", "--n-ff", "768", "--n-head", "4"],
    "microsoft/BitNet-b1.58-2B-4T": ["--arch", "bitnet-b1.58", "--n-embd", "256", "--n-ff", "640", "--n-head", "4",
                                     "--n-head-kv", "1", "--weights", "packed", "--shards", "2"],
    "HF1BitLLM/Llama3-8B-1.58-100B-tokens": ["--arch", "llama", "--n-embd", "256", "--n-ff", "896", "--n-head", "4",
                                             "--n-head-kv", "1", "--packing", "bitlinear"],
    # head_dim given explicitly, as Falcon3's config.json does (here not hidden / heads: key_length is written)
    "tiiuae/Falcon3-1B-Instruct-1.58bit": ["--arch", "llama", "--n-embd", "256", "--n-ff", "1024", "--n-head", "4",
                                           "--n-head-kv", "1", "--head-dim", "128"],
    "tiiuae/Falcon-E-1B-Instruct": ["--arch", "llama", "--n-embd", "256", "--n-ff", "512", "--n-head", "4",
                                    "--tied", "--weights", "latent"],
    # the embedding models (model_type qwen3 / gemma3_text): bitnet.cpp's embedding converter's script
    "microsoft/bitnet-embedding-0.6b": ["--arch", "qwen3", "--n-embd", "256", "--n-ff", "768", "--n-head", "4",
                                        "--head-dim", "128"],
    "microsoft/bitnet-embedding-270m": ["--arch", "gemma3", "--n-embd", "256", "--n-ff", "512", "--n-head", "4",
                                        "--head-dim", "128", "--pooling", "mean"],
}
EMBEDDING = {"microsoft/bitnet-embedding-0.6b": ("qwen3", 3), "microsoft/bitnet-embedding-270m": ("gemma3", 1)}


def have_tools() -> bool:
    return all(os.access(os.path.join(BUILD, "bin", t), os.X_OK) for t in ("bitnet-convert", "bitnet-dummy"))


def load_setup():
    spec = importlib.util.spec_from_file_location("setup_env_hf_under_test", SETUP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@unittest.skipUnless(have_tools(), f"{BUILD}/bin has no bitnet-convert / bitnet-dummy")
class SetupEnvConvertsCheckpoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="bitnet-setup-hf-")
        cls.models = os.path.join(cls.tmp, "models")
        env = dict(os.environ, BITNET_BUILD_DIR=BUILD)
        for repo, flags in MODELS.items():
            out = os.path.join(cls.models, repo.split("/")[1])
            r = subprocess.run([sys.executable, MAKE, out, "--tokenizer", "builtin", "--n-layer", "1", *flags],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                raise AssertionError(f"make-hf-checkpoint {repo}: {r.stderr}")
        cls.mod = load_setup()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def steps(self, repo: str, *extra: str, codegen: bool = True):
        """Steps 1, 2 (unless codegen=False) and 5 of setup_env for one repo; returns (model, codegen result,
        step-5 text, log)."""
        mod = self.mod
        logs = os.path.join(self.tmp, "logs-" + repo.split("/")[1])
        os.makedirs(logs, exist_ok=True)
        r = mod.Runner(logs)
        args = mod.parse_args(["--hf-repo", repo, "-md", self.models, "-ld", logs, "--build-dir", BUILD, *extra])
        model = mod.find_model(args, r)
        cfg = mod.choose_config(args, r, model, os.path.join(self.tmp, "build-" + repo.split("/")[1])) if codegen else None
        text = mod.prepare_model(args, r, model)
        with open(os.path.join(logs, "prepare-model.log"), encoding="utf-8") as f:
            log = f.read()
        return model, cfg, text, log

    def test_every_model_family_converts(self):
        want_arch = {"1bitLLM/bitnet_b1_58-large": "bitnet", "microsoft/BitNet-b1.58-2B-4T": "bitnet-b1.58",
                     **{repo: arch for repo, (arch, _) in EMBEDDING.items()}}
        for repo in MODELS:
            with self.subTest(repo=repo):
                model, cfg, text, log = self.steps(repo, "-q", "i2_s")
                folder = os.path.join(self.models, repo.split("/")[1])
                self.assertEqual(model["kind"], "hf")
                self.assertEqual(model["shape_source"], os.path.join(folder, "config.json"))
                out = os.path.join(folder, "ggml-model-i2_s.gguf")
                self.assertIn("converted", text)
                script = "convert-bitnet-embedding-to-gguf.py" if repo in EMBEDDING else "convert-hf-to-gguf-bitnet.py"
                self.assertIn(script, log)
                g = read_gguf(out)
                self.assertEqual(g.kv["general.architecture"], want_arch.get(repo, "llama"))
                if repo in EMBEDDING:
                    arch, pooling = EMBEDDING[repo]
                    self.assertIn("llama-embedding", text)
                    self.assertEqual(g.kv[f"{arch}.pooling_type"], pooling)  # from 1_Pooling/config.json
                    self.assertNotIn("output.weight", {t.name for t in g.tensors})
                    self.assertEqual({t.type for t in g.tensors if t.name.endswith("_norm_in.weight")}, {1})  # F16
                self.assertEqual({t.type for t in g.tensors if ".attn_q." in t.name}, {36})
                # shapes from config.json: nothing covers these small layouts, so a config is derived
                if cfg["generated_dir"] != os.path.join(REPO, "generated"):
                    self.assertIn("derived", cfg["text"])
                # a second run finds the converted file and has nothing to do
                _, _, again, _ = self.steps(repo, "-q", "i2_s", codegen=False)
                self.assertIn("nothing to do", again)

    def test_quant_embd_keeps_the_embedding_f16(self):
        repo = "tiiuae/Falcon3-1B-Instruct-1.58bit"
        folder = os.path.join(self.models, repo.split("/")[1])
        _, _, text, _ = self.steps(repo, "-q", "tl2", codegen=False)
        embd = {t.name: t.type_name for t in read_gguf(os.path.join(folder, "ggml-model-tl2.gguf")).tensors}
        self.assertEqual(embd["token_embd.weight"], "F32")
        self.assertEqual(embd["blk.0.attn_q.weight"], "TL2")
        os.remove(os.path.join(folder, "ggml-model-tl2.gguf"))
        _, _, text, _ = self.steps(repo, "-q", "tl2", "--quant-embd", codegen=False)
        self.assertIn("F16", text)
        g = read_gguf(os.path.join(folder, "ggml-model-tl2.gguf"))
        embd = {t.name: t.type_name for t in g.tensors}
        self.assertEqual(embd["token_embd.weight"], "F16")
        self.assertEqual(g.kv["llama.attention.key_length"], 128)  # head_dim, from config.json
        self.assertEqual(g.kv["llama.rope.dimension_count"], 128)

    def test_quant_embd_values_pass_through(self):
        repo = "tiiuae/Falcon3-1B-Instruct-1.58bit"
        folder = os.path.join(self.models, repo.split("/")[1])
        target = os.path.join(folder, "ggml-model-i2_s.gguf")
        for value, type_name in (("q6_k", "Q6_K"), ("q8_0", "Q8_0"), ("f16", "F16"), (None, "F16")):
            with self.subTest(quant_embd=value):
                if os.path.exists(target):
                    os.remove(target)
                extra = ["--quant-embd"] + ([value] if value else [])
                _, _, text, log = self.steps(repo, "-q", "i2_s", *extra, codegen=False)
                self.assertIn(f"--quant-embd {value or 'f16'}", log)  # the converter's command line
                self.assertIn(f"(token embedding {type_name})", text)
                types = {t.name: t.type_name for t in read_gguf(target).tensors}
                self.assertEqual(types["token_embd.weight"], type_name)
                self.assertEqual(types["output.weight"], "F16")  # untied: its default, whatever the flag
        os.remove(target)
        with self.assertRaises(SystemExit) as cm, contextlib.redirect_stderr(io.StringIO()) as err:
            self.mod.parse_args(["--quant-embd", "q4_0"])  # not a value of the flag: argparse's error, exit 2
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("q4_0", err.getvalue())
        self.assertEqual(self.mod.parse_args(["--quant-embd", "-q", "tl2"]).quant_embd, "f16")
        self.assertEqual(self.mod.parse_args(["--quant-embd=Q6_K"]).quant_embd, "q6_k")
        self.assertIsNone(self.mod.parse_args([]).quant_embd)

    def test_embedding_model_instructions_and_refusal(self):
        mod = self.mod
        logs = os.path.join(self.tmp, "logs-empty")
        os.makedirs(logs, exist_ok=True)
        args = mod.parse_args(["--hf-repo", "microsoft/bitnet-embedding-270m", "-md", os.path.join(self.tmp, "none"),
                               "-ld", logs])
        with self.assertRaises(mod.StepFailed) as cm:
            mod.find_model(args, mod.Runner(logs))
        self.assertIn("modules.json", str(cm.exception))   # what to put where, nothing downloaded
        self.assertIn("microsoft/bitnet-embedding-270m", str(cm.exception))
        # a conversion refusal of the embedding converter fails step 5 with its message
        folder = os.path.join(self.models, "bitnet-embedding-broken")
        shutil.copytree(os.path.join(self.models, "bitnet-embedding-0.6b"), folder)
        for f in os.listdir(folder):
            if f.endswith(".gguf"):
                os.remove(os.path.join(folder, f))
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            c = json.load(f)
        c["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(c, f)
        with self.assertRaises(mod.StepFailed) as cm:
            self.steps("microsoft/bitnet-embedding-broken", codegen=False)
        self.assertIn("rope_scaling", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(folder, "ggml-model-i2_s.gguf")))

    def test_conversion_errors_fail_step_5(self):
        repo = "tiiuae/Falcon-E-1B-Instruct"
        folder = os.path.join(self.models, "Falcon-E-broken")
        shutil.copytree(os.path.join(self.models, repo.split("/")[1]), folder)
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            c = json.load(f)
        c["architectures"] = ["FalconForCausalLM"]
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(c, f)
        with self.assertRaises(self.mod.StepFailed) as cm:
            self.steps("tiiuae/Falcon-E-broken", codegen=False)
        self.assertIn("FalconForCausalLM", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(folder, "ggml-model-i2_s.gguf")))


if __name__ == "__main__":
    unittest.main()
