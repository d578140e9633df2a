"""--quant-embd [f16|q8_0|q6_k], shared by setup_env.py, utils/convert-hf-to-gguf-bitnet.py and
utils/generate-dummy-bitnet-model.py: the token embedding's type, f16 when the value is omitted
(bitnet.cpp's bare flag). Block sizes and refusals: src/convert/dummy_model.h (bitnet_dummy_embd_type_check)."""
from __future__ import annotations

import argparse
import os

EMBD_TYPES = ("f16", "q8_0", "q6_k")


def add_argument(p: argparse.ArgumentParser, help: str) -> None:
    """Add --quant-embd [T] to p (dest quant_embd: None when absent, "f16" when bare)."""
    p.add_argument("--quant-embd", nargs="?", const="f16", default=None, type=str.lower, choices=EMBD_TYPES,
                   metavar="{" + ",".join(EMBD_TYPES) + "}", help=help)


def bare_flag_argv(argv: list[str]) -> list[str]:
    """argv with a bare --quant-embd made explicit (--quant-embd=f16) when the next word is not a value but
    an option or an existing path (bitnet.cpp's command lines put MODEL_DIR anywhere), so that argparse does
    not read MODEL_DIR as the value. A word that is neither stays the value and is reported as a bad choice."""
    out = []
    for i, a in enumerate(argv):
        if a == "--quant-embd":
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is None or (nxt.lower() not in EMBD_TYPES and (nxt.startswith("-") or os.path.exists(nxt))):
                a = "--quant-embd=f16"
        out.append(a)
    return out
