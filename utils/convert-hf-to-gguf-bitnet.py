#!/usr/bin/env python3
"""Convert a Hugging Face checkpoint of a ternary model to a BitNet GGUF, as bitnet.cpp's script of the
same name does (its flags are accepted):

    python3 utils/convert-hf-to-gguf-bitnet.py MODEL_DIR --outtype i2_s [--outfile PATH] [--quant-embd [f16|q8_0|q6_k]]

MODEL_DIR holds config.json, the weights (model.safetensors, or shards with
model.safetensors.index.json; BF16, F16 or F32, or transformers' packed 2-bit "bitnet" quantization),
and tokenizer.json or tokenizer.model (+ tokenizer_config.json). Architectures (config.json
"architectures", any letter case): BitnetForCausalLM / BitNetForCausalLM (GGUF "bitnet", or
"bitnet-b1.58" with hidden_act relu2) and LlamaForCausalLM with ternary weights (GGUF "llama"); and by
config.json "model_type" the embedding models qwen3 / gemma3_text (GGUF "qwen3" / "gemma3":
BitNet-embedding-0.6B / -270M), which get bitnet.cpp's embedding file contract — the same file
utils/convert-bitnet-embedding-to-gguf.py writes (bitnet.cpp's script name and flags for them).

This script checks the arguments and the model folder, reports which kernel config covers the model's
weight shapes for TL1/TL2, and runs the C converter build/bin/bitnet-convert (src/convert/hf_convert.h documents
what it does: ternarization, the weight kinds, the output types, the tensor and key sets). The heavy
bytes never pass through Python: memory stays about one projection tensor, the output is written to
PATH.tmp and renamed at the end (a failure leaves no truncated GGUF), and a progress bar goes to stderr.

--outtype is the type of every projection weight (never silently another one): f32 / f16 hold the
ternary values times the scale (qwen3 / gemma3: the float weights as stored, as bitnet.cpp's embedding
converter writes them), i2_s / tl1 / tl2 the packed codes. TL1/TL2 files record the tiles they
were packed with (bitnet.lut.<tensor>.tiles): those of the built-in kernel table that covers the model
(the kernels this build was generated for; --use-pretuned prefers the pretuned table), else the default
tile rule, which is what setup_env.py derives and builds kernels from when no config covers the shapes.

--quant-embd [T] stores token_embd.weight as T: f16 (the value when T is omitted: bitnet.cpp's flag, whose
llama-quantize step writes --token-embedding-type f16), q8_0 or q6_k (ggml's reference quantizers, so the
bytes are llama-quantize's; q6_k is what bitnet.cpp's setup_env.py briefly passed in January 2026).
Without it token_embd is F32, for i2_s F16 (Q8_0 when n_embd % 256 != 0). A type whose block does not
divide n_embd (q6_k 256, q8_0 32) is refused with the tensor, n_embd and block in the message — never
another type instead. An untied output.weight keeps its default (llama-quantize's --token-embedding-type
does not touch it either). --outtype f32 keeps every tensor F32: f16 changes nothing there, q8_0/q6_k are
refused. With a tied head (no output.weight) the type also sets the bytes the head reads per token.

The tools run under $BITNET_RUN_PREFIX when set (e.g. qemu-aarch64 for a cross build's binaries).

Exit status: 0 written; 1 the conversion failed (the message names the file, tensor, key or value);
2 bad arguments, a model folder without config.json, or bitnet-convert not built.
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

OUTTYPES = ("f32", "f16", "i2_s", "tl1", "tl2")


class UserError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def build_dir(explicit: str | None) -> str:
    return explicit or os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")


def run_prefix() -> list[str]:
    """BITNET_RUN_PREFIX: a command the build's tools run under (the emulator of a cross build); empty by default."""
    return shlex.split(os.environ.get("BITNET_RUN_PREFIX", ""))


def find_tool(name: str, bdir: str) -> str:
    path = os.path.join(bdir, "bin", name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UserError(f"{path} not found: build it first (`python3 setup_env.py --build-only`, or "
                        f"`cmake -S . -B build && cmake --build build --target {name}`)")
    return path


def coverage_note(model_dir: str, target: str, use_pretuned: bool) -> str:
    """Which config in configs/ covers the model's shapes for TL1/TL2 (codegen.shapes.coverage)."""
    from codegen import config as cfgmod
    from codegen import shapes as shapesmod

    try:
        shapes = shapesmod.shapes_of(os.path.join(model_dir, "config.json"))
    except shapesmod.ShapeError as e:
        raise UserError(str(e)) from None
    try:
        configs = cfgmod.load_all(os.path.join(ROOT, "configs"))
    except cfgmod.ConfigError as e:
        return f"configs/ is invalid ({e}); the built-in tables decide the tiles"
    cov = shapesmod.coverage(shapes, configs)
    text = ", ".join(f"{m}x{k}" for m, k in shapes)
    for tab in (("pretuned", "default") if use_pretuned else ("default",)):
        names = cov["covering"][target][tab]
        if names:
            return f"shapes {text} covered by config {names[0]} ({target.upper()} {tab} table)"
    return (f"no config in configs/ covers {text} for {target.upper()}: the tiles follow the built-in tables or the "
            f"default tile rule (setup_env.py derives a config and builds kernels for them)")


def parse_args(argv):
    p = argparse.ArgumentParser(description="Convert a Hugging Face checkpoint of a ternary model to a BitNet GGUF.")
    p.add_argument("model", help="directory with config.json, *.safetensors and tokenizer files")
    p.add_argument("--outtype", choices=OUTTYPES, default="f32",
                   help="type of the projection weights (default f32, as bitnet.cpp's script)")
    p.add_argument("--outfile", help="output GGUF (default MODEL/ggml-model-<outtype>.gguf)")
    quant_embd.add_argument(p, help="type of token_embd.weight: f16 when the value is omitted (bitnet.cpp's flag), q8_0 or q6_k; "
                        "refused when n_embd is not a multiple of its block (q6_k 256, q8_0 32); an untied "
                        "output.weight keeps its default")
    p.add_argument("--force", action="store_true",
                   help="ternarize a plain model whose weights are not ternary (changes what it computes)")
    p.add_argument("--use-pretuned", action="store_true", help="TL1/TL2: prefer the pretuned built-in tile table")
    p.add_argument("--tiles", action="append", default=[], metavar="M,K,BM,BK,bm",
                   help="TL1/TL2 tiles for one weight shape (repeatable; overrides the built-in table)")
    p.add_argument("--model-name", help="general.name (default: the folder's name)")
    p.add_argument("--gemma3-swa", action="store_true",
                   help="gemma3: write the sliding-window keys from config.json (default none, as bitnet.cpp)")
    p.add_argument("--vocab-only", action="store_true", help="write only the tokenizer (build/bin/bitnet-vocab)")
    p.add_argument("--use-temp-file", action="store_true", help="accepted for compatibility: always done")
    p.add_argument("--verbose", action="store_true", help="accepted for compatibility")
    p.add_argument("--bigendian", action="store_true", help="not supported (refused)")
    p.add_argument("--awq-path", help="not supported (refused)")
    p.add_argument("--build-dir", help="where bin/bitnet-convert is (default build/, env BITNET_BUILD_DIR)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    a = p.parse_args(quant_embd.bare_flag_argv(sys.argv[1:] if argv is None else list(argv)))
    if a.outtype == "f32" and a.quant_embd in ("q8_0", "q6_k"):
        p.error(f"--quant-embd {a.quant_embd}: --outtype f32 writes every tensor as F32 (choose f16, i2_s, tl1 or tl2)")
    if a.bigendian:
        p.error("--bigendian: big-endian GGUF files are not supported")
    if a.awq_path:
        p.error("--awq-path: AWQ scales do not apply to ternary models")
    if a.tiles and a.outtype not in ("tl1", "tl2"):
        p.error(f"--tiles only applies to --outtype tl1 or tl2 (got {a.outtype})")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    prog = "convert-hf-to-gguf-bitnet"
    try:
        model = a.model
        if not os.path.isdir(model):
            raise UserError(f"{model} is not a directory (expected a Hugging Face model folder)")
        if not os.path.isfile(os.path.join(model, "config.json")):
            raise UserError(f"{model}/config.json is missing: not a Hugging Face model folder (it needs config.json, "
                            f"*.safetensors and tokenizer.json or tokenizer.model)")
        bdir = build_dir(a.build_dir)
        outfile = a.outfile or os.path.join(model, f"ggml-model-{a.outtype}.gguf")
        out_dir = os.path.dirname(os.path.abspath(outfile))
        if not os.path.isdir(out_dir):
            raise UserError(f"{out_dir}: the output directory does not exist")
        if a.vocab_only:
            cmd = [find_tool("bitnet-vocab", bdir), model, "--out", outfile]
            try:
                with open(os.path.join(model, "config.json"), encoding="utf-8") as f:
                    n_vocab = json.load(f).get("vocab_size")
            except (OSError, ValueError) as e:
                raise UserError(f"{model}/config.json: {e}") from None
            if isinstance(n_vocab, int) and not isinstance(n_vocab, bool) and n_vocab > 0:
                cmd += ["--n-vocab", str(n_vocab)]  # padded as the full conversion pads it
            if a.model_name:
                cmd += ["--name", a.model_name]
            if a.quiet:
                cmd.append("-q")
            return subprocess.call(run_prefix() + cmd)
        tool = find_tool("bitnet-convert", bdir)
        if a.outtype in ("tl1", "tl2") and not a.quiet:
            print(f"{prog}: {coverage_note(model, a.outtype, a.use_pretuned)}", file=sys.stderr)
    except UserError as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2
    cmd = [tool, model, "-o", outfile, "--outtype", a.outtype]
    if a.quant_embd:
        cmd += ["--quant-embd", a.quant_embd]
    if a.force:
        cmd.append("--force")
    if a.use_pretuned:
        cmd += ["--lut-table", "pretuned"]
    if a.model_name:
        cmd += ["--name", a.model_name]
    if a.gemma3_swa:
        cmd.append("--gemma3-swa")
    for t in a.tiles:
        cmd += ["--tiles", t]
    if a.quiet:
        cmd.append("--quiet")
    rc = subprocess.call(run_prefix() + cmd)
    return 0 if rc == 0 else (2 if rc == 2 else 1)


if __name__ == "__main__":
    sys.exit(main())
