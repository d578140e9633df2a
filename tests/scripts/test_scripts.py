"""The user-facing scripts: utils/generate-dummy-bitnet-model.py, setup_env.py, run_inference.py.

Run from the repository root: `python3 -m unittest discover -s tests/scripts -t .` (a ctest entry).
BITNET_BUILD_DIR names the CMake build whose bin/bitnet-dummy the generator tests use (ctest sets it);
tests that need the binary are skipped without it. Nothing here builds, downloads or writes outside
temporary directories.
"""
from __future__ import annotations

import importlib.util
import io
import contextlib
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEN = os.path.join(REPO, "utils", "generate-dummy-bitnet-model.py")
SETUP = os.path.join(REPO, "setup_env.py")
RUN = os.path.join(REPO, "run_inference.py")
CASE = os.path.join(REPO, "tests", "data", "bitnetcpp-tiny")
INI = os.path.join(REPO, "tests", "data", "kernel_config", "tiny-tl2.ini")  # a kernel_config.ini in bitnet.cpp's format
BUILD = os.environ.get("BITNET_BUILD_DIR") or os.path.join(REPO, "build")

if REPO not in sys.path:
    sys.path.insert(0, REPO)


def run(script, *args, env=None, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=e, cwd=cwd or REPO,
                       timeout=300)
    return p.returncode, p.stdout + p.stderr


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def have_dummy_tool() -> bool:
    return os.access(os.path.join(BUILD, "bin", "bitnet-dummy"), os.X_OK)


class TempDir(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="bitnet-scripts-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


# --------------------------------------------------------------------------------------------
# utils/generate-dummy-bitnet-model.py
# --------------------------------------------------------------------------------------------

class GeneratorArguments(TempDir):
    def test_bad_arguments_exit_2_with_message(self):
        for args, needle in [
            (["--model-size", "9B"], "invalid choice: '9B'"),
            (["--outtype", "q4_0"], "invalid choice: 'q4_0'"),
            (["--seed", "-1"], "--seed -1"),
            (["--seed", "x"], "invalid int value: 'x'"),
            (["--vocab-size", "100"], "--vocab-size 100"),
            (["--vocab-size", "600", "--tokenizer-dir", CASE], "exclude each other"),
            (["--unknown-flag"], "unrecognized arguments: --unknown-flag"),
            (["--quant-embd", "q4_0"], "invalid choice: 'q4_0'"),
            (["--outtype", "f32", "--quant-embd", "q6_k"], "--outtype f32 writes every tensor as F32"),
        ]:
            rc, out = run(GEN, *args, "--outfile", self.path("x.gguf"))
            self.assertEqual(rc, 2, f"{args}: {out}")
            self.assertIn(needle, out, args)
            self.assertFalse(os.path.exists(self.path("x.gguf")))

    def test_refuses_size_no_config_covers(self):
        # A configs dir holding only the 125M config: 7B is not covered for TL1/TL2.
        cfgs = self.path("configs")
        os.makedirs(cfgs)
        shutil.copy(os.path.join(REPO, "configs", "dummy-125M.yaml"), cfgs)
        for outtype in ("tl1", "tl2"):
            rc, out = run(GEN, "--model-size", "7B", "--outtype", outtype, "--outfile", self.path("x.gguf"),
                          "--configs-dir", cfgs)
            self.assertEqual(rc, 2, out)
            self.assertIn("model size 7B", out)
            self.assertIn(outtype.upper(), out)
            for shape in ("4096x4096", "4096x12032", "12032x4096"):
                self.assertIn(shape, out)
        # The env var works as well, and i2_s is checked against this machine's LUT target.
        if platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64"):
            rc, out = run(GEN, "--model-size", "13B", "--outtype", "i2_s", "--outfile", self.path("x.gguf"),
                          env={"BITNET_CONFIGS_DIR": cfgs})
            self.assertEqual(rc, 2, out)
            self.assertIn("model size 13B", out)
            self.assertIn("5120x5120", out)
        self.assertFalse(os.path.exists(self.path("x.gguf")))

    def test_every_size_is_covered_by_the_shipped_configs(self):
        gen = load_module(GEN, "gen_dummy")
        from codegen import shapes as shapesmod
        for size, (h, f, layers, heads) in gen.MODEL_SIZES.items():
            shapes = shapesmod.layout_shapes(h, f, heads, heads)
            for target in ("tl1", "tl2"):
                tiles, note = gen.choose_tiles(size, shapes, target, os.path.join(REPO, "configs"), False, False)
                self.assertEqual(sorted((m, k) for m, k, *_ in tiles), sorted(shapes), size)
                self.assertIn(f"dummy-{size}", note)

    def test_layout_table_is_bitnet_cpps(self):
        gen = load_module(GEN, "gen_dummy2")
        self.assertEqual(gen.MODEL_SIZES["125M"], (768, 3072, 11, 12))
        self.assertEqual(gen.MODEL_SIZES["3.8B"], (3840, 8192, 24, 32))
        self.assertEqual(gen.MODEL_SIZES["100B"], (8192, 45568, 72, 64))
        self.assertEqual(len(gen.MODEL_SIZES), 11)

    def test_missing_tool_says_how_to_build(self):
        rc, out = run(GEN, "--model-size", "125M", "--outfile", self.path("x.gguf"),
                      env={"BITNET_BUILD_DIR": self.path("nobuild")})
        self.assertEqual(rc, 2, out)
        self.assertIn(os.path.join(self.path("nobuild"), "bin", "bitnet-dummy"), out)
        self.assertIn("setup_env.py", out)

    def test_tokenizer_dir_errors(self):
        empty = self.path("empty")
        os.makedirs(empty)
        rc, out = run(GEN, "--tokenizer-dir", empty, "--outfile", self.path("x.gguf"))
        self.assertEqual(rc, 2, out)
        self.assertIn("no .gguf file", out)
        with open(os.path.join(empty, "tokenizer.json"), "w") as f:
            f.write("{}")
        rc, out = run(GEN, "--tokenizer-dir", empty, "--outfile", self.path("x.gguf"))
        self.assertEqual(rc, 2, out)
        self.assertIn("not supported yet", out)
        rc, out = run(GEN, "--tokenizer-dir", CASE, "--outfile", self.path("x.gguf"))  # holds two GGUFs
        self.assertEqual(rc, 2, out)
        self.assertIn("2 .gguf files", out)
        rc, out = run(GEN, "--tokenizer-dir", os.path.join(CASE, "README.md"), "--outfile", self.path("x.gguf"))
        self.assertEqual(rc, 2, out)
        self.assertIn("not a GGUF file", out)
        rc, out = run(GEN, "--tokenizer-dir", self.path("missing"), "--outfile", self.path("x.gguf"))
        self.assertEqual(rc, 2, out)
        self.assertIn("no such file or directory", out)


@unittest.skipUnless(have_dummy_tool(), f"{BUILD}/bin/bitnet-dummy not built")
class GeneratorWrites(TempDir):
    def test_125m_tl2_with_config_tiles_and_copied_vocabulary(self):
        from codegen.gguf_reader import read_gguf
        out = self.path("models", "d.tl2.gguf")
        rc, log = run(GEN, "models/ignored-dir", "--model-size", "125M", "--outtype", "tl2", "--outfile", out,
                      "--seed", "9", "--tokenizer-dir", os.path.join(CASE, "ggml-model-i2_s.gguf"),
                      env={"BITNET_BUILD_DIR": BUILD})
        self.assertEqual(rc, 0, log)
        self.assertIn("ignored", log)
        g = read_gguf(out)
        self.assertEqual(g.kv["general.architecture"], "bitnet")
        self.assertEqual(g.kv["general.file_type"], 39)
        self.assertEqual(g.kv["bitnet.embedding_length"], 768)
        self.assertEqual(g.kv["bitnet.feed_forward_length"], 3072)
        self.assertEqual(g.kv["bitnet.block_count"], 11)
        self.assertEqual(g.kv["bitnet.attention.head_count"], 12)
        self.assertEqual(g.kv["bitnet.vocab_size"], 512)  # copied from the case file
        self.assertEqual(g.kv["tokenizer.ggml.tokens"][450], "\u2581The")
        # Tiles of configs/dummy-125M.yaml's TL2 default table, recorded per tensor.
        from codegen import config as cfgmod
        table = cfgmod.load_config(os.path.join(REPO, "configs", "dummy-125M.yaml")).table("tl2", "default")
        n = 0
        for t in g.tensors:
            if t.name.startswith("blk.") and t.type == 39:
                m, k = t.ne[1], t.ne[0]
                self.assertEqual(list(g.kv[f"bitnet.lut.{t.name}.tiles"]), list(table.entry(m, k).tiles), t.name)
                n += 1
        self.assertEqual(n, 11 * 7)

    def test_quant_embd_sets_the_token_embedding_type(self):
        from codegen.gguf_reader import read_gguf
        for args, want in ((["--quant-embd", "q6_k"], 14), (["--quant-embd", "MODEL_DIR"], 1),
                           (["--quant-embd=Q8_0"], 8), ([], 1)):
            with self.subTest(args=args):
                # the bare flag before the (ignored, existing) positional model directory: f16
                args = [self.tmp if a == "MODEL_DIR" else a for a in args]
                out = self.path("e.gguf")
                rc, log = run(GEN, "--model-size", "125M", "--outtype", "i2_s", "--outfile", out, "--vocab-size", "300",
                              "-q", *args, env={"BITNET_BUILD_DIR": BUILD})
                self.assertEqual(rc, 0, log)
                self.assertEqual({t.name: t.type for t in read_gguf(out).tensors}["token_embd.weight"], want)


# --------------------------------------------------------------------------------------------
# setup_env.py
# --------------------------------------------------------------------------------------------

class PackageList(unittest.TestCase):
    """deps/debian-packages is the one package list; deps/install.sh its only reader."""
    INSTALL = os.path.join(REPO, "deps", "install.sh")

    def test_groups_list_their_packages_once(self):
        r = subprocess.run([self.INSTALL, "--list", "build", "tests", "aarch64", "mcu"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        pkgs = r.stdout.split()
        self.assertEqual(len(pkgs), len(set(pkgs)))
        for p in ("cmake", "ninja-build", "libpcre2-dev", "libjson-c-dev", "libyaml-dev", "libinih-dev", "googletest",
                  "python3-numpy", "nodejs", "npm", "qemu-user", "libpcre2-dev:arm64", "libinih-dev:arm64",
                  "gcc-arm-none-eabi", "libnewlib-arm-none-eabi", "qemu-system-arm", "gcc-xtensa-lx106"):
            self.assertIn(p, pkgs)
        self.assertTrue(all(re.fullmatch(r"[a-z0-9][a-z0-9.+-]*(:arm64)?", p) for p in pkgs), pkgs)
        r = subprocess.run([self.INSTALL, "--list", "build"], capture_output=True, text=True)
        self.assertNotIn("googletest", r.stdout.split())  # quickstart.sh installs only what it needs
        # the microcontroller cross compilers (ctest cross_compile_portable_*) and the mcu stage's emulator
        r = subprocess.run([self.INSTALL, "--list", "mcu"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.split()), ["gcc-arm-none-eabi", "gcc-xtensa-lx106", "libnewlib-arm-none-eabi",
                                                    "picolibc-xtensa-lx106-elf", "qemu-system-arm"])

    def test_bad_group_or_flag_exits_2(self):
        for args, needle in ((["nope"], "no group 'nope'"), (["--bogus", "build"], "unknown flag '--bogus'"),
                             ([], "name at least one group")):
            r = subprocess.run([self.INSTALL, *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(needle, r.stderr)

    def test_no_other_file_installs_packages(self):
        # the scripts call deps/install.sh; none runs apt-get or keeps a package list of its own
        for rel in ("quickstart.sh", "tests/run-all.sh", ".ci/run", "setup_env.py", "CMakeLists.txt",
                    "tests/CMakeLists.txt"):
            with open(os.path.join(REPO, rel)) as f:
                text = f.read()
            self.assertNotRegex(text, r"apt(-get)? install", rel)
        for rel in ("quickstart.sh", "tests/run-all.sh", ".ci/run"):
            with open(os.path.join(REPO, rel)) as f:
                self.assertIn("deps/install.sh", f.read(), rel)


class SetupEnv(TempDir):
    @unittest.skipUnless(have_dummy_tool(), f"{BUILD}/bin/bitnet-dummy not built")
    def test_runtime_archs_are_the_names_the_c_table_accepts(self):
        mod = load_module(SETUP, "setup_env_archs")
        names = mod.runtime_archs()
        self.assertEqual(names[:4], ("bitnet", "bitnet-b1.58", "bitnet-25", "llama"))
        # the C side of the same table: bitnet-dummy's --arch help lists exactly these names
        out = subprocess.run([os.path.join(BUILD, "bin", "bitnet-dummy"), "--help"], capture_output=True,
                             text=True, check=True).stdout
        line = next(l for l in out.splitlines() if l.strip().startswith("--arch NAME"))
        listed = re.findall(r"[a-z][a-z0-9.-]*", line.split("NAME", 1)[1].split("(default")[0])
        self.assertEqual(tuple(x for x in listed if x != "or"), names)
        with self.assertRaises(mod.StepFailed):
            mod.runtime_archs(self.path("no-such-arch.c"))

    def test_hf_repo_without_local_files_says_where_to_put_them(self):
        rc, out = run(SETUP, "--hf-repo", "1bitLLM/bitnet_b1_58-large", "-md", self.path("models"),
                      "-ld", self.path("logs"), cwd=self.tmp)
        self.assertEqual(rc, 1, out)
        folder = os.path.join(self.path("models"), "bitnet_b1_58-large")
        self.assertIn(os.path.join(folder, "ggml-model-i2_s.gguf"), out)
        self.assertIn("config.json", out)
        self.assertIn("safetensors", out)
        self.assertIn("https://huggingface.co/1bitLLM/bitnet_b1_58-large", out)
        self.assertIn("[1/5] find model", out)
        self.assertIn("FAILED", out)
        self.assertIn(os.path.join(self.path("logs"), "prepare-model.log"), out)
        for log in ("codegen.log", "cmake-configure.log", "cmake-build.log", "prepare-model.log"):
            self.assertTrue(os.path.isfile(self.path("logs", log)), log)
        with open(self.path("logs", "prepare-model.log")) as f:
            self.assertIn("nothing can be downloaded", f.read())
        # -q changes the file name it asks for.
        rc, out = run(SETUP, "-hr", "1bitLLM/bitnet_b1_58-3B", "-q", "tl2", "-md", self.path("models"),
                      "-ld", self.path("logs"), cwd=self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn(os.path.join(self.path("models"), "bitnet_b1_58-3B", "ggml-model-tl2.gguf"), out)

    def test_bad_arguments_exit_2(self):
        for args, needle in [
            (["-q", "q4_0"], "invalid choice: 'q4_0'"),
            (["--hf-repo", "a/b/c"], "expected OWNER/NAME"),
            (["--hf-repo", "../x"], "expected OWNER/NAME"),
            (["--build-only", "--hf-repo", "a/b"], "exclude each other"),
            (["--bogus"], "unrecognized arguments"),
        ]:
            rc, out = run(SETUP, *args, "-ld", self.path("logs"), cwd=self.tmp)
            self.assertEqual(rc, 2, f"{args}: {out}")
            self.assertIn(needle, out, args)

    def test_model_dir_without_model_fails_at_step_1(self):
        os.makedirs(self.path("models", "empty"))
        rc, out = run(SETUP, "-md", self.path("models", "empty"), "-ld", self.path("logs"), cwd=self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("holds no BitNet GGUF", out)
        rc, out = run(SETUP, "-md", self.path("models", "nope"), "-ld", self.path("logs"), cwd=self.tmp)
        self.assertEqual(rc, 1, out)
        self.assertIn("does not exist", out)

    def _setup_module(self):
        mod = load_module(SETUP, "setup_env_under_test")
        r = mod.Runner(self.path("logs"))
        os.makedirs(self.path("logs"), exist_ok=True)
        return mod, r

    def _args(self, mod, *argv):
        return mod.parse_args(list(argv))

    def test_find_and_prepare_an_i2s_gguf(self):
        mod, r = self._setup_module()
        folder = self.path("models", "tiny")
        os.makedirs(folder)
        shutil.copy(os.path.join(CASE, "ggml-model-i2_s.gguf"), os.path.join(folder, "bitnetcpp.gguf"))
        args = self._args(mod, "-md", folder)
        model = mod.find_model(args, r)
        self.assertEqual(model["kind"], "gguf")
        self.assertEqual(model["gguf"]["ternary_types"], [36])
        text = mod.prepare_model(args, r, model)
        self.assertIn("linked", text)
        link = os.path.join(folder, "ggml-model-i2_s.gguf")
        self.assertTrue(os.path.islink(link))
        self.assertEqual(os.readlink(link), "bitnetcpp.gguf")
        # Second run: the file is found under its standard name; nothing to do.
        model = mod.find_model(args, r)
        self.assertIn("nothing to do", mod.prepare_model(args, r, model))
        # Asking for TL2 from an I2_S file: not supported yet, with the i2_s hint.
        args = self._args(mod, "-md", folder, "-q", "tl2")
        model = mod.find_model(args, r)
        with self.assertRaises(mod.StepFailed) as cm:
            mod.prepare_model(args, r, model)
        self.assertIn("not supported yet", str(cm.exception))
        self.assertIn("-q i2_s", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(folder, "ggml-model-tl2.gguf")))

    def test_f32_gguf_is_not_converted_and_a_broken_checkpoint_fails_step_5(self):
        mod, r = self._setup_module()
        folder = self.path("models", "f32")
        os.makedirs(folder)
        shutil.copy(os.path.join(CASE, "ggml-model-f32.gguf"), folder)
        args = self._args(mod, "-md", folder)
        model = mod.find_model(args, r)
        with self.assertRaises(mod.StepFailed) as cm:
            mod.prepare_model(args, r, model)
        self.assertIn("F32", str(cm.exception))
        self.assertIn("not supported yet", str(cm.exception))
        # A Hugging Face folder is converted in step 5 (tests/scripts/test_setup_env_hf.py converts real
        # ones); an empty safetensors file fails there with the converter's message, and no GGUF appears.
        hf = self.path("models", "hf")
        os.makedirs(hf)
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump({"hidden_size": 512, "intermediate_size": 1024, "num_attention_heads": 8}, f)
        open(os.path.join(hf, "model.safetensors"), "wb").close()
        args = self._args(mod, "-md", hf, "--build-dir", BUILD)
        model = mod.find_model(args, r)
        self.assertEqual(model["kind"], "hf")
        self.assertEqual(model["shape_source"], os.path.join(hf, "config.json"))
        with self.assertRaises(mod.StepFailed) as cm:
            mod.prepare_model(args, r, model)
        self.assertIn("converting", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(hf, "ggml-model-i2_s.gguf")))

    def test_codegen_step_uses_covering_config_or_derives_into_build(self):
        mod, r = self._setup_module()
        build = self.path("build")
        target = mod.native_target()
        if target is None:
            self.skipTest("no LUT target on this machine")
        # The case model is covered by configs/bitnetcpp-tiny.yaml.
        folder = self.path("models", "tiny")
        os.makedirs(folder)
        shutil.copy(os.path.join(CASE, "ggml-model-i2_s.gguf"), folder)
        args = self._args(mod, "-md", folder)
        cfg = mod.choose_config(args, r, mod.find_model(args, r), build)
        self.assertIn("bitnetcpp-tiny", cfg["text"])
        self.assertEqual(cfg["lut_table"], "default")
        # With --use-pretuned and no pretuned table: falls back to default and says so.
        args = self._args(mod, "-md", folder, "-p")
        cfg = mod.choose_config(args, r, mod.find_model(args, r), build)
        self.assertIn("no pretuned", cfg["text"])
        self.assertEqual(cfg["lut_table"], "default")
        # Shapes no config has: a config is derived into build/derived and rendered into build/generated.
        hf = self.path("models", "odd")
        os.makedirs(hf)
        with open(os.path.join(hf, "config.json"), "w") as f:
            json.dump({"hidden_size": 512, "intermediate_size": 1408, "num_attention_heads": 8}, f)
        open(os.path.join(hf, "model.safetensors"), "wb").close()
        before = sorted(os.listdir(os.path.join(REPO, "configs")))
        args = self._args(mod, "-md", hf)
        cfg = mod.choose_config(args, r, mod.find_model(args, r), build)
        self.assertEqual(cfg["generated_dir"], os.path.join(build, "generated"))
        self.assertTrue(os.path.isfile(os.path.join(build, "derived", "local-odd.yaml")))
        self.assertTrue(os.path.isfile(os.path.join(build, "generated", "kernels.cmake")))
        with open(os.path.join(build, "generated", "bitnet-lut-registry.c")) as f:
            self.assertIn("local-odd", f.read())
        self.assertEqual(sorted(os.listdir(os.path.join(REPO, "configs"))), before)
        self.assertIn("derived", cfg["text"])


    def test_lut_tiles_ini_gets_specialized_kernels(self):
        # --lut-tiles bitnet.cpp's kernel_config.ini: imported into build/derived/ and rendered with configs/
        mod, r = self._setup_module()
        build = self.path("build")
        folder = self.path("models", "tiny")
        os.makedirs(folder)
        shutil.copy(os.path.join(CASE, "ggml-model-i2_s.gguf"), folder)
        args = self._args(mod, "-md", folder, "-q", "tl2", "--lut-tiles", INI)
        cfg = mod.choose_config(args, r, mod.find_model(args, r), build)
        derived = os.path.join(build, "derived", "lut-tiles-tiny-tl2.yaml")
        self.assertTrue(os.path.isfile(derived))
        self.assertEqual(cfg["generated_dir"], os.path.join(build, "generated"))
        with open(os.path.join(build, "generated", "bitnet-lut-kernels.h")) as f:
            header = f.read()
        self.assertIn("bitnet_tl2_qgemm_m768_k256_bm384_bk96_sm32__", header)
        self.assertIn("run the model with --lut-tiles", cfg["text"])
        # the ini does not say TL1 or TL2: -q i2_s is refused; so is a missing file and tiles TL1 cannot use
        for argv, needle in ((["-q", "i2_s", "--lut-tiles", INI], "give -q tl1 or -q tl2"),
                             (["-q", "tl2", "--lut-tiles", self.path("none.ini")], "file not found"),
                             (["-q", "tl1", "--lut-tiles", INI], "codegen import-ini --target tl1` refused it")):
            args = self._args(mod, "-md", folder, *argv)
            with self.assertRaises(mod.StepFailed) as cm:
                mod.choose_config(args, r, mod.find_model(args, r), build)
            self.assertIn(needle, str(cm.exception))


# --------------------------------------------------------------------------------------------
# run_inference.py
# --------------------------------------------------------------------------------------------

class RunInference(TempDir):
    def fake_cli(self, rc: int) -> str:
        """A build dir whose bin/llama-cli records its arguments and exits with rc."""
        bdir = self.path("fakebuild")
        os.makedirs(os.path.join(bdir, "bin"), exist_ok=True)
        script = os.path.join(bdir, "bin", "llama-cli")
        with open(script, "w") as f:
            f.write(f"#!{sys.executable}\nimport json, sys\n"
                    f"json.dump(sys.argv[1:], open({self.path('args.json')!r}, 'w'))\nsys.exit({rc})\n")
        os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
        return bdir

    def test_missing_model_names_the_path(self):
        missing = self.path("no-such-model.gguf")
        rc, out = run(RUN, "-m", missing, "-p", "hello")
        self.assertNotEqual(rc, 0)
        self.assertIn(missing, out)

    def test_missing_binary_names_it(self):
        rc, out = run(RUN, "-m", os.path.join(CASE, "ggml-model-i2_s.gguf"), "-p", "hello",
                      "--build-dir", self.path("nobuild"))
        self.assertEqual(rc, 1, out)
        self.assertIn(os.path.join(self.path("nobuild"), "bin", "llama-cli"), out)

    def test_bad_arguments_exit_2(self):
        for args, needle in [
            ([], "the following arguments are required: -p/--prompt"),
            (["-p", "x", "-t", "0"], "0 must be positive"),
            (["-p", "x", "-c", "abc"], "'abc' is not an integer"),
            (["-p", "x", "-n", "-5"], "-n -5"),
            (["-p", "x", "-temp", "-1"], "-temp -1.0"),
            (["-p", "x", "--head-type", "q4"], "invalid choice: 'q4'"),
        ]:
            rc, out = run(RUN, *args)
            self.assertEqual(rc, 2, f"{args}: {out}")
            self.assertIn(needle, out, args)

    def test_flags_are_passed_and_exit_status_passed_through(self):
        bdir = self.fake_cli(3)
        model = os.path.join(CASE, "ggml-model-i2_s.gguf")
        rc, out = run(RUN, "-m", model, "-n", "7", "-p", "The quick brown fox", "-t", "1", "-c", "256",
                      "-temp", "0", "--head-type", "q8_0", "--lut-tiles", INI, "--build-dir", bdir)
        self.assertEqual(rc, 3, out)
        with open(self.path("args.json")) as f:
            argv = json.load(f)
        opts = dict(zip(argv[0::2], argv[1::2]))
        self.assertEqual(opts, {"-m": model, "-n": "7", "-t": "1", "-p": "The quick brown fox", "-c": "256",
                                "--temp": "0.0", "--head-type": "q8_0", "--lut-tiles": INI})
        missing = self.path("no-such.ini")
        rc, out = run(RUN, "-m", model, "-p", "x", "--lut-tiles", missing, "--build-dir", bdir)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"--lut-tiles {missing}: file not found", out)
        # Defaults of bitnet.cpp's script: -n 128, -t 2, -c 2048, -temp 0.8; -cnv passed on; -n -1 allowed.
        bdir = self.fake_cli(0)
        rc, out = run(RUN, "-m", model, "-p", "hi", "-cnv", "-n", "-1", env={"BITNET_BUILD_DIR": bdir})
        self.assertEqual(rc, 0, out)
        with open(self.path("args.json")) as f:
            argv = json.load(f)
        self.assertEqual(argv[-1], "-cnv")
        opts = dict(zip(argv[:-1][0::2], argv[:-1][1::2]))
        self.assertEqual(opts["-n"], "-1")
        self.assertEqual(opts["-t"], "2")
        self.assertEqual(opts["-c"], "2048")
        self.assertEqual(opts["--temp"], "0.8")


if __name__ == "__main__":
    unittest.main()
