#!/usr/bin/env python3
"""Write a dummy BitNet model (random ternary weights) of one of bitnet.cpp's named size layouts.

Usage, as with bitnet.cpp's script of the same name (its positional model directory is accepted and
ignored: nothing is read from it):

    python3 utils/generate-dummy-bitnet-model.py --model-size 125M --outtype i2_s \\
        --outfile models/dummy-bitnet-125m.i2_s.gguf [--seed N] [--tokenizer-dir DIR] [--use-pretuned] \\
        [--quant-embd [f16|q8_0|q6_k]]

The weights are made by the C tool build/bin/bitnet-dummy (src/convert/dummy_model.h documents the PRNG and
the value distributions); this script picks the layout, checks that a kernel config covers its weight
shapes and passes the covering config's TL1/TL2 tiles. The same --seed gives the same ternary weights
in every --outtype.

--quant-embd [T] (this project's, as in utils/convert-hf-to-gguf-bitnet.py) stores token_embd.weight as
f16 (T omitted), q8_0 or q6_k instead of the default (F16, or Q8_0 when hidden % 256 != 0; F32 files
stay F32); every named layout's hidden size is a multiple of 256, so each type fits. For measuring
what the embedding type costs and saves (docs/PERFORMANCE.md).

Layouts (hidden / FFN / layers / heads, KV heads = heads) are those of bitnet.cpp's
utils/generate-dummy-bitnet-model.py; configs/dummy-<size>.yaml holds the matching tile tables.

The embedding layouts (docs/EMBEDDINGS.md) are this project's: --model-size embed-0.6B is
BitNet-embedding-0.6B's (architecture qwen3: hidden 1024, FFN 3072, 28 layers, 16 heads, 8 KV heads,
head_dim 128, vocabulary 151936, RoPE base 1e6, RMS eps 1e-6, context 32768, pooling last), embed-270M
BitNet-embedding-270M's (gemma3: 640, 2048, 18 layers, 4 heads, 1 KV head, head_dim 256, vocabulary
262144, RoPE base 10000, RMS eps 1e-6, context 32768, pooling last); configs/bitnet-embedding-0.6b.yaml
and -270m.yaml cover their shapes. They take --outtype f32, f16 or i2_s (what bitnet.cpp's embedding
converter writes) and --no-norm-in (the plain teacher layout, without the <proj>_norm_in tensors). Their
vocabulary is the built-in one of the model's size (its tokens are not Qwen's or Gemma's; pass
--tokenizer-dir with a GGUF of the real model for those).

Exit status: 0 written; 1 the writer failed; 2 bad arguments, a size no config covers, a bad
--tokenizer-dir, or bitnet-dummy not built.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from codegen.targets import native_target  # noqa: E402  (needs ROOT on sys.path)
from utils import quant_embd  # noqa: E402  (needs ROOT on sys.path)

# size -> (hidden, ffn, layers, heads)
MODEL_SIZES = {
    "125M": (768, 3072, 11, 12),
    "350M": (1024, 3072, 24, 16),
    "1B": (2048, 3584, 24, 32),
    "1.5B": (1536, 9216, 28, 32),
    "2.7B": (3072, 7680, 24, 32),
    "3.8B": (3840, 8192, 24, 32),
    "7B": (4096, 12032, 32, 32),
    "13B": (5120, 13824, 40, 40),
    "30B": (6656, 16384, 60, 52),
    "70B": (8192, 24576, 80, 64),
    "100B": (8192, 45568, 72, 64),
}
OUTTYPES = ("f32", "f16", "i2_s", "tl1", "tl2")


class EmbedLayout(NamedTuple):
    """An embedding model's layout (docs/EMBEDDINGS.md §1) and the config covering its shapes."""
    arch: str
    hidden: int
    ffn: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    rope_base: float
    rms_eps: float
    ctx: int
    pooling: str
    config: str


# size -> layout of BitNet-embedding-0.6B (Qwen3) and -270M (Gemma3 text), from their config.json
EMBED_SIZES = {
    "embed-0.6B": EmbedLayout("qwen3", 1024, 3072, 28, 16, 8, 128, 151936, 1e6, 1e-6, 32768, "last",
                              "bitnet-embedding-0.6b"),
    "embed-270M": EmbedLayout("gemma3", 640, 2048, 18, 4, 1, 256, 262144, 10000.0, 1e-6, 32768, "last",
                              "bitnet-embedding-270m"),
}
EMBED_OUTTYPES = ("f32", "f16", "i2_s")


class UserError(Exception):
    """A problem the user can fix; printed without a traceback, exit status 2."""


def build_dir() -> str:
    return os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build")


def find_tool(name: str, bdir: str) -> str:
    path = os.path.join(bdir, "bin", name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise UserError(f"{path} not found: build it first (run `python3 setup_env.py --build-only`, or "
                        f"`cmake -S . -B build && cmake --build build`)")
    return path


def choose_tiles(size: str, shapes: list[tuple[int, int]], target: str, configs_dir: str,
                 use_pretuned: bool, check_only: bool,
                 config_name: str | None = None) -> tuple[list[tuple[int, int, int, int, int]], str]:
    """The covering config's tiles for `target` as [(M, K, BM, BK, bm)], and a note naming the config.

    Refuses (UserError) when no config in configs_dir covers every shape for the target.
    check_only: only check coverage (the tiles are not passed for f32/f16/i2_s outputs).
    config_name: the name the refusal's derive command suggests (default dummy-<size>).
    Source: codegen.shapes.coverage (docs/ARCHITECTURE.md "Configs").
    """
    from codegen import config as cfgmod
    from codegen import shapes as shapesmod

    try:
        configs = cfgmod.load_all(configs_dir)
    except cfgmod.ConfigError as e:
        raise UserError(f"configs in {configs_dir} are invalid:\n{e}") from None
    cov = shapesmod.coverage(shapes, configs)
    tables = ("pretuned", "default") if use_pretuned else ("default",)
    for tab in tables:
        names = cov["covering"][target][tab]
        if not names:
            continue
        # Prefer a config whose table has exactly these shapes (the model's own config).
        exact = [n for n in names
                 if set(next(c for c in configs if c.name == n).table(target, tab).shapes) == set(shapes)]
        name = (exact or names)[0]
        cfg = next(c for c in configs if c.name == name)
        table = cfg.table(target, tab)
        tiles = []
        for m, k in shapes:
            e = table.entry(m, k)
            tiles.append((m, k) + tuple(e.tiles))
        if check_only:
            note = f"shapes covered by config {cfg.name} ({target.upper()} {tab} table, {cfg.path})"
        else:
            note = f"{target.upper()} tiles of config {cfg.name} ({tab} table, {cfg.path})"
        if use_pretuned and tab == "default":
            note += "; no pretuned table covers these shapes"
        return ([] if check_only else tiles), note
    unc = cov["uncovered"][target]
    fmt = ", ".join(f"{m}x{k}" for m, k in (unc or shapes))
    what = "no config has the shapes" if unc else "no single config covers all of the shapes"
    cname = config_name or f"dummy-{size}"
    raise UserError(f"model size {size}: {what} {fmt} (MxK) for {target.upper()} in {configs_dir}; add a config "
                    f"(e.g. `python3 -m codegen derive --shape {' '.join(f'{m}x{k}' for m, k in shapes)} "
                    f"--name {cname} --out configs/{cname}.yaml`)")


def vocab_source(tokenizer_dir: str) -> str:
    """The GGUF file whose vocabulary to copy: tokenizer_dir itself, or the one .gguf inside it."""
    if os.path.isfile(tokenizer_dir):
        with open(tokenizer_dir, "rb") as f:
            if f.read(4) != b"GGUF":
                raise UserError(f"--tokenizer-dir {tokenizer_dir}: not a GGUF file")
        return tokenizer_dir
    if not os.path.isdir(tokenizer_dir):
        raise UserError(f"--tokenizer-dir {tokenizer_dir}: no such file or directory")
    ggufs = sorted(f for f in os.listdir(tokenizer_dir) if f.endswith(".gguf"))
    if len(ggufs) == 1:
        return os.path.join(tokenizer_dir, ggufs[0])
    if len(ggufs) > 1:
        raise UserError(f"--tokenizer-dir {tokenizer_dir}: {len(ggufs)} .gguf files ({', '.join(ggufs)}); "
                        f"pass the one to copy the vocabulary from as a file path")
    extra = ""
    if os.path.exists(os.path.join(tokenizer_dir, "tokenizer.json")) or \
            os.path.exists(os.path.join(tokenizer_dir, "tokenizer.model")):
        extra = " (reading tokenizer.json / tokenizer.model is not supported yet: pass a GGUF of the model)"
    raise UserError(f"--tokenizer-dir {tokenizer_dir}: no .gguf file in it{extra}")


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Write a dummy BitNet GGUF (random ternary weights) of a named size layout.",
        epilog="Sizes (hidden/FFN/layers/heads): " + ", ".join(
            f"{s} {h}/{f}/{l}/{n}" for s, (h, f, l, n) in MODEL_SIZES.items()) + ". Embedding sizes "
            "(arch hidden/FFN/layers/heads/KV heads/head_dim): " + ", ".join(
            f"{s} {e.arch} {e.hidden}/{e.ffn}/{e.layers}/{e.heads}/{e.kv_heads}/{e.head_dim}"
            for s, e in EMBED_SIZES.items()) + ".")
    p.add_argument("model", nargs="?", help="ignored (bitnet.cpp compatibility: its model directory)")
    p.add_argument("--model-size", choices=list(MODEL_SIZES) + list(EMBED_SIZES), default="125M",
                   help="size layout (default 125M)")
    p.add_argument("--outtype", choices=OUTTYPES, default="i2_s", help="weight type (default i2_s)")
    p.add_argument("--outfile", help="output GGUF (default models/dummy-bitnet-<size>.<outtype>.gguf)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed, 0 .. 2^64-1 (default 0)")
    p.add_argument("--no-norm-in", action="store_true",
                   help="embedding sizes: the plain teacher layout, without the <proj>_norm_in tensors")
    p.add_argument("--tokenizer-dir", help="copy the vocabulary of this GGUF file (or the one .gguf in this "
                                           "directory) instead of the built-in 32002-token vocabulary")
    p.add_argument("--vocab-size", type=int, help="size of the built-in vocabulary (default 32002; embedding "
                                                  "sizes: the model's)")
    p.add_argument("--ctx", type=int, help="context_length key (default 2048; embedding sizes: 32768)")
    p.add_argument("--use-pretuned", action="store_true", help="TL1/TL2 tiles from a pretuned table when one covers")
    quant_embd.add_argument(p, help="type of token_embd.weight (f16 when the value is omitted); default F16 (Q8_0 when "
                        "hidden %% 256 != 0), F32 for --outtype f32, where q8_0/q6_k are refused")
    p.add_argument("--configs-dir", default=os.environ.get("BITNET_CONFIGS_DIR") or os.path.join(ROOT, "configs"),
                   help="kernel configs to check coverage against (default configs/, env BITNET_CONFIGS_DIR)")
    p.add_argument("--build-dir", default=None, help="where bin/bitnet-dummy is (default build/, env BITNET_BUILD_DIR)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    a = p.parse_args(quant_embd.bare_flag_argv(sys.argv[1:] if argv is None else list(argv)))
    if a.outtype == "f32" and a.quant_embd in ("q8_0", "q6_k"):
        p.error(f"--quant-embd {a.quant_embd}: --outtype f32 writes every tensor as F32")
    if not 0 <= a.seed < 2 ** 64:
        p.error(f"--seed {a.seed}: must be in 0 .. 2^64-1")
    if a.vocab_size is not None and a.vocab_size < 259:
        p.error(f"--vocab-size {a.vocab_size}: must be at least 259")
    if a.vocab_size is not None and a.tokenizer_dir:
        p.error("--vocab-size and --tokenizer-dir exclude each other")
    if a.ctx is not None and a.ctx <= 0:
        p.error(f"--ctx {a.ctx}: must be positive")
    if a.model_size in EMBED_SIZES and a.outtype not in EMBED_OUTTYPES:
        p.error(f"--outtype {a.outtype}: the embedding size {a.model_size} is written as f32, f16 or i2_s (what "
                f"bitnet.cpp's embedding converter writes); build/bin/bitnet-dummy --arch "
                f"{EMBED_SIZES[a.model_size].arch} writes TL1/TL2 files of any layout")
    if a.no_norm_in and a.model_size not in EMBED_SIZES:
        p.error(f"--no-norm-in: only the embedding sizes ({', '.join(EMBED_SIZES)}) have <proj>_norm_in tensors")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    try:
        from codegen import shapes as shapesmod
        if a.model:
            print(f"note: positional model directory '{a.model}' is ignored (kept for bitnet.cpp compatibility)",
                  file=sys.stderr)
        emb = EMBED_SIZES.get(a.model_size)
        if emb:
            hidden, ffn, layers, heads, kv_heads = emb.hidden, emb.ffn, emb.layers, emb.heads, emb.kv_heads
            shapes = shapesmod.layout_shapes(hidden, ffn, heads, kv_heads, emb.head_dim)
        else:
            hidden, ffn, layers, heads = MODEL_SIZES[a.model_size]
            kv_heads = heads
            shapes = shapesmod.layout_shapes(hidden, ffn, heads, heads)
        tiles: list = []
        target = a.outtype if a.outtype in ("tl1", "tl2") else native_target()
        if target:
            tiles, note = choose_tiles(a.model_size, shapes, target, a.configs_dir, a.use_pretuned,
                                       check_only=a.outtype not in ("tl1", "tl2"),
                                       config_name=emb.config if emb else None)
            if not a.quiet:
                print(f"generate-dummy-bitnet-model: {a.model_size}: {note}", file=sys.stderr)
        vocab_from = vocab_source(a.tokenizer_dir) if a.tokenizer_dir else None
        tool = find_tool("bitnet-dummy", a.build_dir or build_dir())
    except UserError as e:
        print(f"generate-dummy-bitnet-model: {e}", file=sys.stderr)
        return 2

    outfile = a.outfile or os.path.join("models", f"dummy-bitnet-{a.model_size.lower()}.{a.outtype}.gguf")
    out_dir = os.path.dirname(os.path.abspath(outfile))
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        print(f"generate-dummy-bitnet-model: cannot create {out_dir}: {e.strerror or e}", file=sys.stderr)
        return 1
    cmd = [tool, "-o", outfile, "--n-embd", str(hidden), "--n-ff", str(ffn), "--n-layer", str(layers),
           "--n-head", str(heads), "--n-head-kv", str(kv_heads), "--outtype", a.outtype, "--seed", str(a.seed),
           "--name", f"dummy-bitnet-{a.model_size}"]
    vocab_size, ctx = a.vocab_size, a.ctx
    if emb:
        cmd += ["--arch", emb.arch, "--n-embd-head", str(emb.head_dim), "--rope-theta", repr(emb.rope_base),
                "--rms-eps", repr(emb.rms_eps),
                "--pooling", emb.pooling]
        if a.no_norm_in:
            cmd.append("--no-norm-in")
        if vocab_size is None and not vocab_from:
            vocab_size = emb.vocab
        if ctx is None:
            ctx = emb.ctx
    if vocab_from:
        cmd += ["--vocab-from", vocab_from]
    if vocab_size is not None:
        cmd += ["--vocab-size", str(vocab_size)]
    if ctx is not None:
        cmd += ["--ctx", str(ctx)]
    for t in tiles:
        cmd += ["--tiles", ",".join(str(x) for x in t)]
    if a.quant_embd:
        cmd += ["--quant-embd", a.quant_embd]
    if a.quiet:
        cmd.append("--quiet")
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
