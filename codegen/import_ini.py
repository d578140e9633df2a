"""bitnet.cpp's include/kernel_config.ini as a config (`python3 -m codegen import-ini`).

bitnet.cpp's utils/codegen_tl1.py and codegen_tl2.py write, next to the kernel header they generate,
one ConfigParser section per weight shape (keys lower case, as ConfigParser writes them):

    [Kernels_0]
    m = 1536        weight rows M (the first number of the shape as bitnet.cpp lists it)
    k = 4096        weight columns K
    bm = 256        BM   -> block_m
    bk = 128        BK   -> block_k
    bmm = 32        bm   -> simd_m

The file does not say TL1 or TL2; the caller names the target. The config written here has a
`shapes:` list (the ini knows no layout) and one `default` table, and is validated like any other
config before it is written: tiles that break the target's rules (design.md §2, e.g. a TL2 bm of 64
as in one of bitnet.cpp's presets) are refused with the validator's message. The C runtime reads the
same ini directly (src/tilefile/tile_file.h, `--lut-tiles FILE`) and checks the same rules.
"""
from __future__ import annotations

import configparser
import json
import os
import re

from .shapes import fmt_shape

SECTION_RE = re.compile(r"^Kernels_(0|[1-9][0-9]*)$")
KEYS = ("m", "k", "bm", "bk", "bmm")
YAML_KEY = {"bm": "block_m", "bk": "block_k", "bmm": "simd_m"}


class IniError(ValueError):
    """A kernel_config.ini that cannot be read or breaks its format; the message names file, section, key."""


def read_kernel_config(path: str) -> list[dict]:
    """The entries of a kernel_config.ini in file order: [{"section", "m", "k", "block_m", "block_k",
    "simd_m"}]. A shape listed twice with the same tiles appears once. Raises IniError for a missing or
    unreadable file, a syntax error, a section other than Kernels_<n>, a missing, unknown or non-integer
    key, a shape listed twice with different tiles, or a file without sections."""
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=(";",),
                                       default_section="\0no default section")
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f, source=path)
    except OSError as e:
        raise IniError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise IniError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except configparser.Error as e:
        raise IniError(f"{path}: {' '.join(str(e).split())}") from None
    entries: list[dict] = []
    seen: dict[tuple[int, int], dict] = {}
    for section in parser.sections():
        if not SECTION_RE.match(section):
            raise IniError(f"{path}: unknown section [{section}] (bitnet.cpp's kernel_config.ini has "
                           f"[Kernels_0], [Kernels_1], ...)")
        items = dict(parser.items(section))
        for key in items:
            if key not in KEYS:
                raise IniError(f"{path}: [{section}]: unknown key '{key}' (expected {', '.join(KEYS)})")
        values = {}
        for key in KEYS:
            if key not in items:
                raise IniError(f"{path}: [{section}]: no key '{key}' (every section needs {', '.join(KEYS)})")
            v = items[key].strip()
            if not re.fullmatch(r"[1-9][0-9]*", v):  # no leading zero: the runtime's reader refuses it too
                raise IniError(f"{path}: [{section}]: {key} = {items[key]!r} is not a positive decimal integer")
            values[key] = int(v)
        e = {"section": section, "m": values["m"], "k": values["k"], "block_m": values["bm"],
             "block_k": values["bk"], "simd_m": values["bmm"]}
        shape = (e["m"], e["k"])
        if shape in seen:
            f = seen[shape]
            if (f["block_m"], f["block_k"], f["simd_m"]) != (e["block_m"], e["block_k"], e["simd_m"]):
                raise IniError(f"{path}: shape {fmt_shape(shape)} is listed twice with different tiles: "
                               f"[{f['section']}] and [{section}]")
            continue
        seen[shape] = e
        entries.append(e)
    if not entries:
        raise IniError(f"{path}: no [Kernels_<n>] section: not a bitnet.cpp kernel_config.ini")
    return entries


def config_text(name: str, target: str, entries: list[dict], ini_path: str) -> str:
    """YAML text of a config named `name` holding the ini's tiles as the `default` table of `target`
    (the caller validates it)."""
    q = lambda s: json.dumps(s, ensure_ascii=False)  # noqa: E731 (a JSON string is a YAML scalar)
    src = (f"imported by `python3 -m codegen import-ini` from {os.path.basename(ini_path)}, bitnet.cpp's "
           f"kernel_config.ini (its codegen_{target}.py tiles; sections {entries[0]['section']}.."
           f"{entries[-1]['section']})")
    lines = [
        f"# Imported by `python3 -m codegen import-ini --target {target}` from {ini_path}.",
        "# Every tile below is the ini's; shapes are the ini's (M x K, M = weight rows).",
        f"model: {q(name)}",
        "shapes:",
    ]
    lines += [f"  - [{e['m']}, {e['k']}]" for e in entries]
    lines.append(f"notes: {q('Tiles of a bitnet.cpp setup (its include/kernel_config.ini), for TL1/TL2 files it wrote.')}")
    lines += [f"{target}:", "  default:", f"    source: {q(src)}", "    kernels:"]
    for e in entries:
        lines.append(f"      - {{m: {e['m']}, k: {e['k']}, block_m: {e['block_m']}, block_k: {e['block_k']}, "
                     f"simd_m: {e['simd_m']}, note: {q('[' + e['section'] + ']')}}}")
    return "\n".join(lines) + "\n"
