"""What the scripts that run a built tool share (run_inference.py, run_inference_server.py,
utils/e2e_benchmark.py, utils/test_perplexity.py): where the tool is, the checks of their input files with
the messages users see, an argparse type, and the --i2s-layout option they pass on."""
from __future__ import annotations

import argparse
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tool_path(build_dir: str | None, name: str) -> str:
    """build/bin/<name>, where build/ is build_dir, else $BITNET_BUILD_DIR, else <repo>/build."""
    return os.path.join(build_dir or os.environ.get("BITNET_BUILD_DIR") or os.path.join(ROOT, "build"), "bin", name)


def missing_input(prog: str, model: str, lut_tiles: str | None, tool: str, model_hint: str) -> str | None:
    """The message for the first input that is missing — the model file (model_hint says how to make
    one), the --lut-tiles file, the built tool — or None when all are there."""
    if not os.path.isfile(model):
        return f"{prog}: model file {model} not found ({model_hint})"
    if lut_tiles and not os.path.isfile(lut_tiles):
        return f"{prog}: --lut-tiles {lut_tiles}: file not found"
    if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
        return (f"{prog}: {tool} not found: build first (`python3 setup_env.py --build-only` or "
                f"`cmake -S . -B build && cmake --build build`)")
    return None


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{v} must be positive")
    return v


I2S_LAYOUTS = ("auto", "x86", "arm64", "rows4")


def add_i2s_layout(p: argparse.ArgumentParser, tool: str) -> None:
    """The --i2s-layout option of the tools (src/tools/common/args.h), passed on to `tool`."""
    p.add_argument("--i2s-layout", choices=I2S_LAYOUTS, default=None,
                   help="how bitnet.cpp packed the I2_S weights of a file that does not record it: x86 (its x86 "
                        "build, the official files), arm64 (its ARM builds), rows4 (x86 without ACT_PARALLEL); "
                        f"default: the file's record, else x86; passed to {tool} --i2s-layout")


def i2s_layout_args(a: argparse.Namespace) -> list[str]:
    """["--i2s-layout", L] when the option was given, else []."""
    return ["--i2s-layout", a.i2s_layout] if a.i2s_layout else []
