#!/usr/bin/env python3
"""Set up a model for inference: pick (or derive) the LUT kernel config for its weight shapes, build
the C runtime with CMake, and prepare `<model dir>/ggml-model-<quant>.gguf`. bitnet.cpp's flags:

    python3 setup_env.py --hf-repo 1bitLLM/bitnet_b1_58-large -q i2_s
    python3 setup_env.py --model-dir models/my-model -q tl2 --use-pretuned
    python3 setup_env.py --build-only            # this project's: just codegen check + build

Steps (each prints one status line and logs to its own file in --log-dir):
  1. find model      the model folder (`<model-dir>/<repo name>` with --hf-repo, else --model-dir)
                     holds a BitNet GGUF or a Hugging Face checkpoint (config.json + *.safetensors).
                     Nothing is downloaded: with --hf-repo and no local files it says what to put where.
                     Log: prepare-model.log.
  2. codegen         `python3 -m codegen check`; the config covering the model's shapes for the kernel
                     target in use (TL2 on x86-64, TL1 on AArch64, or the -q type) is taken from
                     configs/ (the pretuned table with --use-pretuned when one covers). When none covers,
                     `codegen derive` writes build/derived/<name>.yaml and `codegen generate` renders
                     every config plus it into build/generated (also done when generated/ is stale).
                     --lut-tiles FILE (with -q tl1/tl2) adds a config of FILE's tiles (bitnet.cpp's
                     kernel_config.ini through `codegen import-ini` into build/derived/, or a YAML
                     config) so they get specialized kernels.
                     configs/ and generated/ are never written. Log: codegen.log.
  3. cmake configure build/ (Ninja when installed), -DBITNET_GENERATED_DIR, -DBITNET_LUT_TABLE.
                     Log: cmake-configure.log.
  4. cmake build     llama-cli, bitnet-dummy, bitnet-convert (and llama-bench, llama-embedding when the
                     project has them).
                     Log: cmake-build.log.
  5. prepare model   `ggml-model-<quant>.gguf` in the model folder: nothing to do when a GGUF of that
                     type is there (another file name gets a symlink); a Hugging Face checkpoint is
                     converted with utils/convert-hf-to-gguf-bitnet.py (the build's bitnet-convert;
                     --quant-embd [f16|q8_0|q6_k] sets the token embedding's type, f16 when the value
                     is omitted, as bitnet.cpp's flag). The embedding models (config.json model_type
                     qwen3 / gemma3_text: microsoft/bitnet-embedding-0.6b / -270m) are converted with
                     utils/convert-bitnet-embedding-to-gguf.py (bitnet.cpp's script; its file contract,
                     docs/EMBEDDINGS.md); run them with build/bin/llama-embedding. Converting a GGUF into
                     another type is not supported. Log: prepare-model.log.

Models: bitnet.cpp's list (KNOWN_HF_REPOS below, shown by --help: 1bitLLM bitnet_b1_58-large/3B,
HF1BitLLM Llama3-8B-1.58-100B-tokens, tiiuae Falcon3-*-1.58bit and Falcon-E-*, microsoft
BitNet-b1.58-2B-4T, and the embedding models microsoft bitnet-embedding-0.6b / -270m); any OWNER/NAME
folder is accepted. The shapes always come from the folder's
config.json or GGUF, never from a table of model names.

Exit status: 0 when every step succeeded; 1 naming the failed step and its log; 2 for bad arguments.
Design notes: ../shared/docs/design.md §4 (the flags and what users expect), docs/ARCHITECTURE.md.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)

from codegen import ggml_types  # noqa: E402  (needs ROOT on sys.path)
from codegen.targets import native_target  # noqa: E402  (needs ROOT on sys.path)
from utils import quant_embd  # noqa: E402  (needs ROOT on sys.path)

QUANT_TYPES = ("i2_s", "tl1", "tl2")
# bitnet.cpp's setup_env.py list, for the help text and the no-download instructions only.
KNOWN_HF_REPOS = (
    "1bitLLM/bitnet_b1_58-large", "1bitLLM/bitnet_b1_58-3B", "HF1BitLLM/Llama3-8B-1.58-100B-tokens",
    "tiiuae/Falcon3-1B-Instruct-1.58bit", "tiiuae/Falcon3-3B-Instruct-1.58bit", "tiiuae/Falcon3-7B-Instruct-1.58bit",
    "tiiuae/Falcon3-10B-Instruct-1.58bit", "tiiuae/Falcon3-1B-1.58bit", "tiiuae/Falcon3-3B-1.58bit",
    "tiiuae/Falcon3-7B-1.58bit", "tiiuae/Falcon3-10B-1.58bit", "tiiuae/Falcon-E-1B-Instruct",
    "tiiuae/Falcon-E-3B-Instruct", "tiiuae/Falcon-E-1B-Base", "tiiuae/Falcon-E-3B-Base",
    "microsoft/BitNet-b1.58-2B-4T", "microsoft/bitnet-embedding-0.6b", "microsoft/bitnet-embedding-270m",
)
# config.json model_type of the embedding models (docs/EMBEDDINGS.md): converted with
# utils/convert-bitnet-embedding-to-gguf.py, bitnet.cpp's script for them.
EMBEDDING_MODEL_TYPES = ("qwen3", "gemma3_text")
TERNARY_TYPE_IDS = {q: ggml_types.TYPE_IDS[q.upper()] for q in QUANT_TYPES}   # "tl2" -> 39
TYPE_NAMES = ggml_types.TYPE_NAMES


def runtime_archs(path: str | None = None) -> tuple[str, ...]:
    """The general.architecture names the runtime runs: the name column of the one table of
    architectures, src/base/arch.c (rows `{"name", BITNET_ARCH_...`), read as text because this step
    runs before anything is built. Raises StepFailed when the file has no rows."""
    path = path or os.path.join(ROOT, "src", "base", "arch.c")
    try:
        with open(path, encoding="utf-8") as f:
            names = tuple(re.findall(r'^\s*\{"([^"]+)",\s*BITNET_ARCH_', f.read(), re.M))
    except OSError as e:
        raise StepFailed(f"{path}: {e.strerror}: the table of architectures is missing") from e
    if not names:
        raise StepFailed(f"{path}: no architecture rows found")
    return names

TOOL_TARGETS = ("llama-cli", "bitnet-dummy", "bitnet-convert", "llama-bench", "llama-embedding")
N_STEPS = 5


class StepFailed(Exception):
    """A step failed; the message says why (the log holds the details)."""


class Runner:
    """Prints the one status line per step and keeps the step logs."""

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self.step_no = 0

    def log_path(self, name: str) -> str:
        return os.path.join(self.log_dir, name)

    def log(self, name: str, text: str) -> None:
        with open(self.log_path(name), "a", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")

    def run(self, cmd: list[str], log_name: str, cwd: str | None = None) -> int:
        """Run cmd with stdout+stderr appended to the log; return its exit status."""
        with open(self.log_path(log_name), "a", encoding="utf-8") as f:
            f.write(f"$ {' '.join(cmd)}\n")
            f.flush()
            try:
                rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd or ROOT)
            except OSError as e:
                f.write(f"cannot run {cmd[0]}: {e.strerror or e}\n")
                return 127
            f.write(f"[exit status {rc}]\n")
            return rc

    def status(self, title: str, text: str) -> None:
        self.step_no += 1
        print(f"setup_env: [{self.step_no}/{N_STEPS}] {title:<16} {text}", flush=True)


# --------------------------------------------------------------------------------------------
# Step 1: find the model
# --------------------------------------------------------------------------------------------

def gguf_facts(path: str) -> dict:
    """architecture, general.file_type and the type of the ternary projections of a GGUF."""
    from codegen.gguf_reader import GGUFError, read_gguf
    try:
        g = read_gguf(path)
    except (GGUFError, OSError) as e:
        raise StepFailed(f"{path}: not a readable GGUF ({e})") from None
    ternary = [t for t in g.tensors if re.match(r"blk\.\d+\.(attn_[qkv]|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$", t.name)]
    types = sorted({t.type for t in ternary})
    embd = [t.type for t in g.tensors if t.name == "token_embd.weight"]
    return {"path": path, "arch": g.kv.get("general.architecture"), "file_type": g.kv.get("general.file_type"),
            "ternary_types": types, "embd_type": embd[0] if embd else None}


def hf_instructions(repo: str, folder: str, quant: str) -> str:
    gguf_repo = f" (or the GGUF of https://huggingface.co/{repo}-gguf)" if repo.lower().endswith("2b-4t") else ""
    pooling = (" + modules.json and 1_Pooling/config.json (the pooling)"
               if "bitnet-embedding" in repo.lower() else "")
    return (f"nothing can be downloaded here; {folder}/ has no model. Put the files there, then run this again:\n"
            f"    {folder}/config.json + *.safetensors (or the shards and model.safetensors.index.json) + "
            f"tokenizer.json or tokenizer.model + tokenizer_config.json{pooling}   the Hugging Face checkpoint of "
            f"https://huggingface.co/{repo} (fetched elsewhere; it is converted here), or\n"
            f"    {folder}/ggml-model-{quant}.gguf   a BitNet GGUF{gguf_repo}\n"
            f"  To try the runtime without a download, make a random model of a known layout:\n"
            f"    python3 utils/generate-dummy-bitnet-model.py --model-size 125M --outtype {quant} "
            f"--outfile models/dummy-bitnet-125m.{quant}.gguf")


def find_model(args, r: Runner) -> dict:
    """Returns {"folder", "kind": "gguf"|"hf", "gguf": facts or None, "shape_source": path}."""
    if args.hf_repo:
        name = args.hf_repo.rstrip("/").split("/")[-1]
        folder = os.path.join(args.model_dir, name)
    else:
        folder = args.model_dir
    r.log("prepare-model.log", f"model folder: {folder}")
    want = os.path.join(folder, f"ggml-model-{args.quant_type}.gguf")
    if os.path.isfile(want):
        facts = gguf_facts(want)
        return {"folder": folder, "kind": "gguf", "gguf": facts, "shape_source": want}
    ggufs = sorted(glob.glob(os.path.join(folder, "*.gguf"))) if os.path.isdir(folder) else []
    archs = runtime_archs()
    candidates = []
    for p in ggufs:
        try:
            f = gguf_facts(p)
        except StepFailed as e:
            r.log("prepare-model.log", f"skipped {p}: {e}")
            continue
        r.log("prepare-model.log", f"found {p}: architecture {f['arch']}, ternary types {f['ternary_types']}")
        if f["arch"] in archs and f["ternary_types"]:
            candidates.append(f)
    # A GGUF already in the requested type wins; then a Hugging Face checkpoint (converted in step 5);
    # then a GGUF of another type (step 5 says what to do with it).
    same = [f for f in candidates if f["ternary_types"] == [TERNARY_TYPE_IDS[args.quant_type]]]
    if same:
        return {"folder": folder, "kind": "gguf", "gguf": same[0], "shape_source": same[0]["path"]}
    config = os.path.join(folder, "config.json")
    if os.path.isfile(config) and (glob.glob(os.path.join(folder, "*.safetensors")) or
                                   os.path.isfile(os.path.join(folder, "model.safetensors.index.json"))):
        r.log("prepare-model.log", f"Hugging Face checkpoint: {config}")
        return {"folder": folder, "kind": "hf", "gguf": None, "shape_source": config}
    if candidates:
        return {"folder": folder, "kind": "gguf", "gguf": candidates[0], "shape_source": candidates[0]["path"]}
    if os.path.isfile(config) and glob.glob(os.path.join(folder, "*.bin")):
        raise StepFailed(f"{folder} holds a PyTorch *.bin checkpoint: only safetensors checkpoints are converted "
                         f"(save it with safetensors first)")
    if args.hf_repo:
        raise StepFailed(hf_instructions(args.hf_repo, folder, args.quant_type))
    if not os.path.isdir(folder):
        raise StepFailed(f"model folder {folder} does not exist (give --hf-repo REPO to use {args.model_dir}/<repo name>, "
                         f"or --model-dir DIR holding a BitNet GGUF; --build-only just builds)")
    raise StepFailed(f"{folder} holds no BitNet GGUF (*.gguf of architecture bitnet) and no Hugging Face checkpoint "
                     f"(config.json + *.safetensors)")


# --------------------------------------------------------------------------------------------
# Step 2: kernel config
# --------------------------------------------------------------------------------------------

def choose_config(args, r: Runner, model: dict | None, build: str) -> dict:
    """Returns {"generated_dir", "lut_table", "text"}; runs codegen check / derive / generate."""
    from codegen import config as cfgmod
    from codegen import shapes as shapesmod

    log = "codegen.log"
    py = sys.executable
    rc = r.run([py, "-m", "codegen", "check"], log)
    if rc not in (0, 1):
        raise StepFailed(f"`python3 -m codegen check` failed (exit {rc}): configs/ or templates/ have errors")
    stale = rc == 1
    lut_table = "default"
    notes = []
    derived = None
    if stale:
        notes.append(f"generated/ is stale: rendering configs/ into {display(os.path.join(build, 'generated'))}")

    target = args.quant_type if args.quant_type in ("tl1", "tl2") else native_target()
    if model is not None and target is not None:
        try:
            shapes = shapesmod.shapes_of(model["shape_source"])
            configs = cfgmod.load_all(os.path.join(ROOT, "configs"))
        except (shapesmod.ShapeError, cfgmod.ConfigError, ValueError) as e:
            r.log(log, str(e))
            raise StepFailed(f"cannot read the model's shapes or the configs: {e}") from None
        cov = shapesmod.coverage(shapes, configs)
        shape_text = ", ".join(f"{m}x{k}" for m, k in shapes)
        r.log(log, f"shapes (MxK) of {model['shape_source']}: {shape_text}\ncoverage: {cov}")
        pre, dflt = cov["covering"][target]["pretuned"], cov["covering"][target]["default"]
        if args.use_pretuned and pre:
            lut_table = "pretuned"
            notes.append(f"{target.upper()} pretuned table of {pre[0]}")
        elif dflt or pre:
            if args.use_pretuned:
                notes.append(f"no pretuned {target.upper()} table covers {shape_text}; using the default table")
            notes.append(f"{target.upper()} default table of {(dflt or pre)[0]}")
        else:
            name = "local-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.basename(os.path.normpath(model["folder"])) or "model")
            derived = os.path.join(build, "derived", f"{name}.yaml")
            os.makedirs(os.path.dirname(derived), exist_ok=True)
            rc = r.run([py, "-m", "codegen", "derive", "--model", model["shape_source"], "--name", name,
                        "--out", derived], log)
            if rc != 0:
                raise StepFailed(f"no config covers {shape_text} and `codegen derive` failed (exit {rc})")
            notes.append(f"no config covers {shape_text}: derived {display(derived)}")
            if args.use_pretuned:
                notes.append("(no pretuned table exists for these shapes)")
    elif model is not None:
        notes.append(f"no LUT target on {platform.machine()}: the I2_S path needs no kernel config")

    extra = [derived] if derived else []
    if args.lut_tiles:
        extra.append(lut_tiles_config(args, r, build, args.quant_type, log))
        notes.append(f"specialized kernels for the tiles of {display(args.lut_tiles)} (run the model with "
                     f"--lut-tiles {display(args.lut_tiles)} when it records no tiles)")
    generated = os.path.join(ROOT, "generated")
    if stale or extra:
        generated = os.path.join(build, "generated")
        cmd = [py, "-m", "codegen", "generate", "--configs", os.path.join(ROOT, "configs"), *extra]
        cmd += ["--out", generated]
        rc = r.run(cmd, log)
        if rc != 0:
            raise StepFailed(f"`codegen generate` into {generated} failed (exit {rc})")
    elif not notes:
        notes.append("generated/ is current")
    return {"generated_dir": generated, "lut_table": lut_table, "text": "; ".join(notes) or "generated/ is current"}


def lut_tiles_config(args, r: Runner, build: str, target: str, log: str) -> str:
    """The config holding the tiles of --lut-tiles FILE for `target` (-q): bitnet.cpp's kernel_config.ini is
    imported (`codegen import-ini` into build/derived/lut-tiles-<stem>.yaml), a configs/-style YAML is
    validated and used as it is. Raises StepFailed naming the file."""
    path = os.path.abspath(args.lut_tiles)
    if target not in ("tl1", "tl2"):
        raise StepFailed(f"--lut-tiles {args.lut_tiles}: the tiles are for TL1/TL2 weights and the file does not "
                         f"say which: give -q tl1 or -q tl2")
    if not os.path.isfile(path):
        raise StepFailed(f"--lut-tiles {args.lut_tiles}: file not found")
    py = sys.executable
    if path.lower().endswith((".yaml", ".yml")):
        rc = r.run([py, "-m", "codegen", "validate", path], log)
        if rc != 0:
            raise StepFailed(f"--lut-tiles {args.lut_tiles}: the config does not validate (see {r.log_path(log)})")
        return path
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.splitext(os.path.basename(path))[0]) or "ini"
    out = os.path.join(build, "derived", f"lut-tiles-{stem}.yaml")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    rc = r.run([py, "-m", "codegen", "import-ini", path, "--target", target, "--out", out], log)
    if rc != 0:
        raise StepFailed(f"--lut-tiles {args.lut_tiles}: `codegen import-ini --target {target}` refused it "
                         f"(exit {rc}; see {r.log_path(log)})")
    return out


# --------------------------------------------------------------------------------------------
# Steps 3-4: CMake
# --------------------------------------------------------------------------------------------

def display(path: str) -> str:
    """path relative to the current directory when it is below it, else absolute."""
    rel = os.path.relpath(path, os.getcwd())
    return path if rel == ".." or rel.startswith(".." + os.sep) else rel


def cached_generator(build: str) -> str | None:
    cache = os.path.join(build, "CMakeCache.txt")
    try:
        with open(cache, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("CMAKE_GENERATOR:INTERNAL="):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def configure(args, r: Runner, build: str, cfg: dict) -> str:
    if not shutil.which("cmake"):
        raise StepFailed("cmake is not installed (deps/install.sh build installs what the build needs, or run ./quickstart.sh)")
    gen = cached_generator(build) or ("Ninja" if shutil.which("ninja") else "Unix Makefiles")
    gtest = os.path.isfile("/usr/src/googletest/CMakeLists.txt")
    cmd = ["cmake", "-S", ROOT, "-B", build, "-G", gen, "-DCMAKE_BUILD_TYPE=Release",
           f"-DBITNET_GENERATED_DIR={cfg['generated_dir']}", f"-DBITNET_LUT_TABLE={cfg['lut_table']}",
           f"-DBITNET_BUILD_TESTS={'ON' if gtest else 'OFF'}"]
    rc = r.run(cmd, "cmake-configure.log")
    if rc != 0:
        raise StepFailed(f"cmake configure failed (exit {rc})")
    return f"{display(build)}/ ({gen}, tile table {cfg['lut_table']}, kernels from {display(cfg['generated_dir'])}/)"


def build_tools(args, r: Runner, build: str) -> str:
    jobs = os.environ.get("BITNET_JOBS") or str(os.cpu_count() or 2)
    help_out = subprocess.run(["cmake", "--build", build, "--target", "help"], capture_output=True, text=True)
    targets = [t for t in TOOL_TARGETS if re.search(rf"(^|[\s:.]){re.escape(t)}(:|\s|$)", help_out.stdout, re.M)]
    if not targets:
        targets = ["llama-cli", "bitnet-dummy"]
    cmd = ["cmake", "--build", build, "--parallel", jobs]
    for t in targets:
        cmd += ["--target", t]
    t0 = time.time()
    rc = r.run(cmd, "cmake-build.log")
    if rc != 0:
        raise StepFailed(f"build failed (exit {rc})")
    return f"{', '.join(targets)} in {time.time() - t0:.0f} s"


# --------------------------------------------------------------------------------------------
# Step 5: prepare the model file
# --------------------------------------------------------------------------------------------

def hf_model_type(folder: str) -> str | None:
    """config.json's model_type (None when unreadable: the converter then names the problem)."""
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
            mt = json.load(f).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return mt if isinstance(mt, str) else None


def convert_checkpoint(args, r: Runner, model: dict, target: str) -> str:
    """Step 5 for a Hugging Face checkpoint: utils/convert-hf-to-gguf-bitnet.py into `target`, or for the
    embedding models utils/convert-bitnet-embedding-to-gguf.py (bitnet.cpp's script for them)."""
    q = args.quant_type
    embedding = hf_model_type(model["folder"]) in EMBEDDING_MODEL_TYPES
    script = "convert-bitnet-embedding-to-gguf.py" if embedding else "convert-hf-to-gguf-bitnet.py"
    cmd = [sys.executable, os.path.join(ROOT, "utils", script), model["folder"],
           "--outtype", q, "--outfile", target, "--build-dir", os.path.abspath(args.build_dir)]
    if args.quant_embd:
        cmd += ["--quant-embd", args.quant_embd]
    if args.use_pretuned and not embedding:
        cmd.append("--use-pretuned")
    t0 = time.time()
    rc = r.run(cmd, "prepare-model.log")
    if rc != 0:
        last = [line for line in _tail(r.log_path("prepare-model.log"), 40).splitlines()
                if "bitnet-convert:" in line or "convert-hf-to-gguf-bitnet:" in line
                or "convert-bitnet-embedding-to-gguf:" in line]
        why = last[-1].strip() if last else f"exit {rc}"
        raise StepFailed(f"converting {model['folder']} to {q.upper()} failed: {why}")
    facts = gguf_facts(target)
    et = facts["embd_type"]
    embd = f" (token embedding {TYPE_NAMES.get(et, f'type {et}')})" if args.quant_embd else ""
    run = " (an embedding model: run it with build/bin/llama-embedding)" if embedding else ""
    return (f"{target}: converted from the Hugging Face checkpoint to {facts['arch']} {q.upper()}{embd} "
            f"in {time.time() - t0:.0f} s{run}")


def prepare_model(args, r: Runner, model: dict) -> str:
    q = args.quant_type
    folder = model["folder"]
    target = os.path.join(folder, f"ggml-model-{q}.gguf")
    if model["kind"] == "hf":
        return convert_checkpoint(args, r, model, target)
    facts = model["gguf"]
    have = facts["ternary_types"]
    have_text = "/".join(TYPE_NAMES.get(t, f"type {t}") for t in have)
    if args.quant_embd:
        r.log("prepare-model.log", f"--quant-embd {args.quant_embd}: applies when a Hugging Face checkpoint is "
                                   f"converted; the GGUF is used as is")
    if have != [TERNARY_TYPE_IDS[q]]:
        hint = " Use -q i2_s with an I2_S file: the runtime converts I2_S to TL1/TL2 when it loads the model." \
            if TERNARY_TYPE_IDS["i2_s"] in have else ""
        raise StepFailed(f"{facts['path']} holds {have_text} weights; converting a GGUF to {q.upper()} is not "
                         f"supported yet (put the Hugging Face checkpoint in {folder} to convert from it).{hint}")
    if os.path.abspath(facts["path"]) == os.path.abspath(target):
        return f"{target}: already {q.upper()}, nothing to do"
    if os.path.lexists(target):
        raise StepFailed(f"{target} exists but is not a BitNet GGUF in {q.upper()}; move it away")
    os.symlink(os.path.basename(facts["path"]), target)
    r.log("prepare-model.log", f"symlink {target} -> {os.path.basename(facts['path'])}")
    return f"{target} -> {os.path.basename(facts['path'])} ({q.upper()}, linked)"


# --------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description="Set up the environment for running BitNet inference "
                                            "(kernel config, build, model file). Nothing is downloaded.")
    p.add_argument("--hf-repo", "-hr", help="Hugging Face repo id, e.g. 1bitLLM/bitnet_b1_58-large: the model is "
                                            "expected in <model-dir>/<repo name>/ (nothing is downloaded). "
                                            "bitnet.cpp's models: " + ", ".join(KNOWN_HF_REPOS))
    p.add_argument("--model-dir", "-md", default="models", help="directory for models (default models)")
    p.add_argument("--log-dir", "-ld", default="logs", help="directory for the step logs (default logs)")
    p.add_argument("--quant-type", "-q", choices=QUANT_TYPES, default="i2_s", help="weight type (default i2_s)")
    quant_embd.add_argument(p, help="type of the token embedding when a Hugging Face checkpoint is converted: f16 when the "
                        "value is omitted (bitnet.cpp's flag), q8_0 or q6_k (ggml's quantizers; refused when the "
                        "hidden size is not a multiple of the block, 32 / 256); an untied output.weight keeps "
                        "its default")
    p.add_argument("--use-pretuned", "-p", action="store_true", help="prefer the pretuned tile tables")
    p.add_argument("--lut-tiles", metavar="FILE",
                   help="(this project) build specialized kernels for the tiles of a TL1/TL2 model written by "
                        "bitnet.cpp: its include/kernel_config.ini (imported with `codegen import-ini`) or a "
                        "configs/-style YAML; run the model with --lut-tiles FILE too")
    p.add_argument("--build-only", action="store_true", help="only codegen check and build (no model)")
    p.add_argument("--build-dir", default=os.path.join(ROOT, "build"), help="CMake build directory (default build/)")
    a = p.parse_args(argv)
    if a.hf_repo is not None:
        parts = a.hf_repo.strip("/").split("/")
        if not a.hf_repo.strip() or any(x in ("", ".", "..") for x in parts) or len(parts) > 2:
            p.error(f"--hf-repo '{a.hf_repo}': expected OWNER/NAME")
    if a.build_only and a.hf_repo:
        p.error("--build-only and --hf-repo exclude each other")
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    global N_STEPS
    N_STEPS = 3 if args.build_only else 5
    try:
        os.makedirs(args.log_dir, exist_ok=True)
        for name in ("codegen.log", "cmake-configure.log", "cmake-build.log", "prepare-model.log"):
            with open(os.path.join(args.log_dir, name), "w", encoding="utf-8") as f:
                f.write(f"# setup_env.py {' '.join(sys.argv[1:])}\n")
    except OSError as e:
        print(f"setup_env: cannot write logs into {args.log_dir}: {e.strerror or e}", file=sys.stderr)
        return 1
    r = Runner(args.log_dir)
    build = os.path.abspath(args.build_dir)
    model = None
    steps = []
    if not args.build_only:
        steps.append(("find model", "prepare-model.log", lambda: find_model(args, r)))
    steps += [
        ("codegen", "codegen.log", lambda: choose_config(args, r, model, build)),
        ("cmake configure", "cmake-configure.log", lambda: configure(args, r, build, cfg)),
        ("cmake build", "cmake-build.log", lambda: build_tools(args, r, build)),
    ]
    if not args.build_only:
        steps.append(("prepare model", "prepare-model.log", lambda: prepare_model(args, r, model)))
    cfg = None
    for title, log, fn in steps:
        try:
            result = fn()
        except StepFailed as e:
            r.log(log, f"FAILED: {e}")
            r.status(title, f"FAILED (log: {r.log_path(log)})")
            print(f"setup_env: {title}: {e}", file=sys.stderr)
            tail = _tail(r.log_path(log), 12)
            if tail and title.startswith("cmake"):
                print(tail, file=sys.stderr)
            return 1
        if title == "find model":
            model = result
            text = model["shape_source"] if model["kind"] == "gguf" else f"{model['folder']} (Hugging Face checkpoint)"
        elif title == "codegen":
            cfg = result
            text = result["text"]
        else:
            text = result
        r.status(title, f"ok: {text}")
    return 0


def _tail(path: str, n: int) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    return "\n".join("    " + line for line in lines[-n:])


if __name__ == "__main__":
    sys.exit(main())
