#!/usr/bin/env python3
"""Convert a Hugging Face folder of a BitNet embedding model to GGUF, as bitnet.cpp's script of the same
name does (its flags are accepted):

    python3 utils/convert-bitnet-embedding-to-gguf.py MODEL_DIR [--outtype f32|f16|i2_s] [--outfile PATH]

MODEL_DIR holds config.json with model_type "qwen3" (microsoft/bitnet-embedding-0.6b → GGUF "qwen3") or
"gemma3_text" (microsoft/bitnet-embedding-270m → GGUF "gemma3"), the weights (model.safetensors or shards
with model.safetensors.index.json; BF16, F16 or F32), tokenizer.json + tokenizer_config.json, and
sentence-transformers' modules.json + 1_Pooling/config.json (the pooling; mean when absent, as bitnet.cpp).

The file is bitnet.cpp's (docs/EMBEDDINGS.md §1; src/convert/hf_convert.h says it all): its tensor names,
keys and types, so its files and these are interchangeable —
  --outtype f32   every tensor F32, the weights as stored (not ternarized);
  --outtype f16   every tensor F16, the weights as stored (the "F16 baseline" of bitnet.cpp's guide);
  --outtype i2_s  projections ternarized by absmean (scale = mean|W|, w = round(W / scale) clamped to
                  -1..1) and packed as I2_S in bitnet.cpp's x86 layout (recorded: bitnet.i2s.layout),
                  token embedding and norms F16.
Gemma 3's own norms are stored as w + 1; no output.weight (lm_head is skipped). Gemma 3's sliding-window
layers: bitnet.cpp's converter writes no SWA key (its 270M files attend globally in every layer), and
neither does this script unless --gemma3-swa (this project's) asks for them.

This script checks the folder and runs the C converter build/bin/bitnet-convert (memory about one tensor,
output written to PATH.tmp and renamed at the end, a progress bar on stderr). The tools run under
$BITNET_RUN_PREFIX when set (e.g. qemu-aarch64 for a cross build's binaries).

Exit status: 0 written; 1 the conversion failed (the message names the file, tensor, key or value);
2 bad arguments, a folder that is not a qwen3 / gemma3_text model, or bitnet-convert not built.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from utils import quant_embd  # noqa: E402  (needs ROOT on sys.path)

PROG = "convert-bitnet-embedding-to-gguf"
SUPPORTED = {"qwen3": "qwen3", "gemma3_text": "gemma3"}  # model_type -> GGUF architecture
# bitnet.cpp's default output names: MODEL_DIR/<folder name><suffix>.gguf
SUFFIX = {"f32": "-f32", "f16": "-f16", "i2_s": "-f16-new-i2_s", "tl1": "-tl1", "tl2": "-tl2"}


class UserError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def build_dir(explicit: str | None) -> str:
    return explicit or os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")


def run_prefix() -> list[str]:
    """BITNET_RUN_PREFIX: a command the build's tools run under (the emulator of a cross build); empty by default."""
    return shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))


def model_type(model: str) -> str:
    """config.json's model_type, checked to be one of SUPPORTED (UserError otherwise)."""
    path = os.path.join(model, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except FileNotFoundError:
        raise UserError(f"{path} is missing: not a Hugging Face model folder (it needs config.json, *.safetensors "
                        f"and tokenizer.json)") from None
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: {e}") from None
    mt = cfg.get("model_type") if isinstance(cfg, dict) else None
    if mt not in SUPPORTED:
        raise UserError(f"{path}: model_type {mt!r} is not an embedding model this script converts (supported: "
                        f"{', '.join(SUPPORTED)}); BitNet LLMs (bitnet, llama) go through "
                        f"utils/convert-hf-to-gguf-bitnet.py")
    return mt


def parse_args(argv):
    p = argparse.ArgumentParser(description="Convert a BitNet embedding model (Qwen3 / Gemma 3, Hugging Face folder) "
                                            "to GGUF, as bitnet.cpp's convert-bitnet-embedding-to-gguf.py.")
    p.add_argument("model", help="model directory (config.json, *.safetensors, tokenizer.json, modules.json)")
    p.add_argument("--outfile", help="output GGUF (default MODEL/<folder name>-f32.gguf, -f16.gguf or "
                                     "-f16-new-i2_s.gguf, bitnet.cpp's names)")
    p.add_argument("--outtype", choices=("f32", "f16", "i2_s", "tl1", "tl2"), default="f16",
                   help="f32, f16 or i2_s (ternary; default f16, as bitnet.cpp's script); tl1 / tl2 are this "
                        "project's (projections TL1/TL2, the rest F16)")
    p.add_argument("--gemma3-swa", action="store_true",
                   help="(this project) gemma3: write gemma3.attention.sliding_window, .sliding_window_pattern and "
                        "gemma3.rope.freq_base_swa from config.json; default none, as bitnet.cpp (global attention)")
    quant_embd.add_argument(p, help="(this project) type of token_embd.weight: f16 (the default outside f32; also "
                                    "when the value is omitted), q8_0 or q6_k")
    p.add_argument("--force", action="store_true",
                   help="(this project) ternarize a checkpoint without <proj>.norm weights (a plain Qwen3/Gemma 3)")
    p.add_argument("--model-name", help="general.name (default: the folder's name)")
    p.add_argument("--verbose", action="store_true", help="accepted for compatibility (the progress bar is shown anyway)")
    p.add_argument("--build-dir", help="where bin/bitnet-convert is (default build/, env BITNET_BUILD_DIR)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    a = p.parse_args(quant_embd.bare_flag_argv(sys.argv[1:] if argv is None else list(argv)))
    if a.outtype == "f32" and a.quant_embd in ("q8_0", "q6_k"):
        p.error(f"--quant-embd {a.quant_embd}: --outtype f32 writes every tensor as F32")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        model = a.model
        if not os.path.isdir(model):
            raise UserError(f"{model} is not a directory (expected a Hugging Face model folder)")
        mt = model_type(model)
        if a.gemma3_swa and mt != "gemma3_text":
            raise UserError(f"--gemma3-swa: {model} is a {mt} model (only gemma3_text has sliding-window layers)")
        name = os.path.basename(os.path.normpath(os.path.abspath(model)))
        outfile = a.outfile or os.path.join(model, f"{name}{SUFFIX[a.outtype]}.gguf")
        out_dir = os.path.dirname(os.path.abspath(outfile))
        if not os.path.isdir(out_dir):
            raise UserError(f"{out_dir}: the output directory does not exist")
        tool = os.path.join(build_dir(a.build_dir), "bin", "bitnet-convert")
        if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
            raise UserError(f"{tool} not found: build it first (`python3 setup_env.py --build-only`, or "
                            f"`cmake -S . -B build && cmake --build build --target bitnet-convert`)")
    except UserError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    cmd = [tool, model, "-o", outfile, "--outtype", a.outtype]
    if a.gemma3_swa:
        cmd.append("--gemma3-swa")
    if a.quant_embd:
        cmd += ["--quant-embd", a.quant_embd]
    if a.force:
        cmd.append("--force")
    if a.model_name:
        cmd += ["--name", a.model_name]
    if a.quiet:
        cmd.append("--quiet")
    rc = subprocess.call(run_prefix() + cmd)
    return 0 if rc == 0 else (2 if rc == 2 else 1)


if __name__ == "__main__":
    sys.exit(main())
