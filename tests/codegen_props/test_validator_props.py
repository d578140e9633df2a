"""Property tests (hypothesis) of codegen's config validator: whatever bytes a config file holds, codegen
either ACCEPTS it — and then the C it generates compiles with the project's flags — or REJECTS it with
exit status 2 and one line per violation that names the file and the offending entry or field; never a
Python traceback, never another exception type.

Three layers, bounded so the module runs in well under 90 s on two shared cores:
  * InProcess: the bulk (a few hundred examples): codegen.config.load_config on a file, with an
    independent oracle for the tile rules of design.md §2 and, for a targeted mutation of a valid
    config, the location the message must name;
  * TileRules: 300 one-entry configs whose tiles are legal, miss exactly one rule (each rule drawn in
    turn) or are arbitrary: accepted exactly when the oracle's rules hold, the broken field named;
  * ThroughTheCli: ~30 examples through `python3 -m codegen validate|generate|check` in a subprocess,
    which must agree with the in-process verdict line for line;
  * GeneratedCCompiles: a few accepted configs rendered by `generate` and compiled with gcc
    -std=c11 -Wall -Wextra -Werror and each file's ISA flags (the flags CMakeLists.txt and
    generated/kernels.cmake give the generated sources).

Runs with /usr/bin/python3 (Debian's python3-hypothesis; deps/debian-packages [tests]); ctest
codegen_properties. derandomize=True: the same examples on every run; database=None and hypothesis's
home directory in a temporary directory: nothing is written into the repository.
"""
from __future__ import annotations

import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import hypothesis.configuration  # noqa: E402

_HYP_HOME = tempfile.TemporaryDirectory(prefix="codegen-props-hypothesis-")
hypothesis.configuration.set_hypothesis_home_dir(_HYP_HOME.name)

from hypothesis import HealthCheck, example, given, note, settings, strategies as st  # noqa: E402

from codegen import config as cfg  # noqa: E402
from codegen.targets import PAIRS  # noqa: E402


def _settings(n: int) -> settings:
    return settings(max_examples=n, derandomize=True, deadline=None, database=None, print_blob=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# ---------------------------------------------------------------------------------------------------
# The oracle: design.md §2 written again, independently of codegen/targets.py
# ---------------------------------------------------------------------------------------------------
DIM_MAX = 2**31 - 1   # M, K (and so BM) fit the C side's int32 tile fields and M*K an int64


def _pos_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def broken_rules(scheme: str, m, k, BM, BK, bm) -> list[str]:
    """The tile rules of design.md §2 that (M, K, BM, BK, bm) breaks for the scheme, by name."""
    if not all(_pos_int(v) for v in (m, k, BM, BK, bm)):
        return ["positive integers"]
    r = [name for name, bad in (("m <= DIM_MAX", m > DIM_MAX), ("k <= DIM_MAX", k > DIM_MAX),
                                ("m % BM", m % BM), ("BM % bm", BM % bm)) if bad]
    if scheme == "tl1":
        r += [name for name, bad in (("bm 32|64", bm not in (32, 64)), ("BK <= 256", BK > 256), ("k % BK", k % BK),
                                     ("BK % (256/bm)", bm in (32, 64) and BK % (256 // bm))) if bad]
    else:
        r += [name for name, bad in (("bm 32", bm != 32), ("BK <= 255", BK > 255), ("BK % 24", BK % 24),
                                     ("(k % BK) % 32", (k % BK) % 32), ("k >= 256", k < 256)) if bad]
    return r


def tiles_legal(scheme: str, m, k, BM, BK, bm) -> bool:
    """True when (M, K, BM, BK, bm) obeys every tile rule of design.md §2 for the scheme."""
    return not broken_rules(scheme, m, k, BM, BK, bm)


def layout_shape_set(hidden, ffn, n_head, n_kv, head_dim):
    q, kv = n_head * head_dim, n_kv * head_dim
    return {(q, hidden), (kv, hidden), (hidden, q), (ffn, hidden), (hidden, ffn)}


C_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")   # what may go into the registry's C strings


# ---------------------------------------------------------------------------------------------------
# A YAML writer of our own: block style like configs/*.yaml, entries in flow style one per line, any
# scalar type, and mappings that carry duplicate keys (DupMap) — which no YAML library writes.
# ---------------------------------------------------------------------------------------------------
class DupMap(dict):
    """A mapping written with its items followed by `dups` (key, value) pairs: duplicate YAML keys."""

    def __init__(self, base: dict, dups: list):
        super().__init__(base)
        self.dups = list(dups)


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"}


def _yaml_printable(c: str) -> bool:
    o = ord(c)
    return (c in "\t" or 0x20 <= o <= 0x7E or o == 0x85 or 0xA0 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD
            or 0x10000 <= o <= 0x10FFFF)


def _quoted(s: str) -> str:
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif _yaml_printable(c) and c not in "\x85\t":
            out.append(c)
        elif ord(c) <= 0xFF:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    return '"' + "".join(out) + '"'


def scalar(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return ".nan"
        if math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        r = repr(v)
        if "." not in r:   # PyYAML's float needs a dot: 1e+20 -> 1.0e+20
            r = r.replace("e", ".0e") if "e" in r else r + ".0"
        return r
    if isinstance(v, str):
        if _PLAIN.fullmatch(v) and v.lower() not in _SPECIAL:
            return v
        return _quoted(v)
    raise TypeError(type(v))


def _is_container(v) -> bool:
    return isinstance(v, (dict, list))


def flow(v) -> str:
    if isinstance(v, dict):
        pairs = list(v.items()) + list(getattr(v, "dups", []))
        return "{" + ", ".join(f"{scalar(k)}: {flow(x)}" for k, x in pairs) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)


def _flat(v) -> bool:
    """Written on one line: scalars, and containers of scalars or of lists of scalars ([[M, K], ...])."""
    if not _is_container(v):
        return True
    items = v.values() if isinstance(v, dict) else v
    return all(not _is_container(x) or (isinstance(x, list) and not any(_is_container(y) for y in x))
               or (isinstance(x, dict) and not any(_is_container(y) for y in x.values()))
               for x in items) and not (isinstance(v, dict) and any(_is_container(x) for x in v.values()))


def block(v, ind: int = 0) -> list[str]:
    pad = " " * ind
    if isinstance(v, dict) and v:
        lines = []
        for k, x in list(v.items()) + list(getattr(v, "dups", [])):
            if _flat(x):
                lines.append(f"{pad}{scalar(k)}: {flow(x)}")
            else:
                lines.append(f"{pad}{scalar(k)}:")
                lines += block(x, ind + 2)
        return lines
    if isinstance(v, list) and v and not _flat(v):
        lines = []
        for x in v:
            if _flat(x):
                lines.append(f"{pad}- {flow(x)}")
            else:
                lines.append(f"{pad}-")
                lines += block(x, ind + 2)
        return lines
    return [pad + flow(v)]


def to_yaml(doc) -> str:
    return "\n".join(block(doc)) + "\n"


# ---------------------------------------------------------------------------------------------------
# Strategies
# ---------------------------------------------------------------------------------------------------
# Dimensions: multiples of 32, >= 256 (then TL1 and TL2 both have legal tiles), small, real, the largest
# legal ones, and (dims only) beyond DIM_MAX.
legal_dims = st.one_of(st.integers(8, 200).map(lambda x: 32 * x),
                       st.sampled_from([256, 1536, 2560, 3200, 4096, 6912, 8640, 14336, DIM_MAX // 32 * 32]),
                       st.integers(8, DIM_MAX // 32).map(lambda x: 32 * x))
dims = st.one_of(legal_dims, legal_dims, st.integers(DIM_MAX // 32 - 4, 2**40).map(lambda x: 32 * x),
                 st.sampled_from([32, 64, 96, 128, 160, 192, 224]))   # K < 256: no TL2
# Tile values anywhere near the rules' edges, and far away from them.
tile_ints = st.one_of(st.sampled_from([0, -1, 1, 4, 8, 16, 24, 32, 48, 64, 96, 100, 128, 160, 192, 240, 255,
                                       256, 257, 264, 384, 512, 8192]),
                      st.integers(-1000, 20000), st.integers(-2**70, 2**70))
free_text = st.text(max_size=40) | st.sampled_from(["*/", "/* x */", "a\nb", "\"\\", "%s%n", "{{ x }}", ""])
nonblank_text = st.text(min_size=1, max_size=30).filter(lambda s: s.strip())
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=20))
junk = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(
    st.one_of(st.text(max_size=8), st.integers(), st.none(), st.booleans()), c, max_size=3), max_leaves=8)
# a value that is never a positive integer
not_pos_int = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=20),
                        st.integers(-2**70, 0), st.lists(scalars, max_size=3),
                        st.dictionaries(st.text(max_size=5), scalars, max_size=2))
valid_stems = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,24}", fullmatch=True)
any_stems = st.text(min_size=1, max_size=30).filter(
    lambda s: "/" not in s and "\0" not in s and s not in (".", "..") and len(s.encode("utf-8", "surrogatepass")) < 200)


def _divisors_upto(n: int, cap: int = 300) -> list[int]:
    return sorted({d for d in range(1, min(n, cap) + 1) if n % d == 0} | {n})


@st.composite
def legal_tiles(draw, scheme: str, m: int, k: int):
    """(BM, BK, bm) that obey the scheme's rules for M x K (M, K multiples of 32, K >= 256)."""
    bm = draw(st.sampled_from([32, 64])) if scheme == "tl1" and m % 64 == 0 else 32
    BM = bm * draw(st.sampled_from(_divisors_upto(m // bm)))
    if scheme == "tl1":
        cands = [b for b in range(256 // bm, 257, 256 // bm) if k % b == 0]
    else:
        cands = [b for b in range(24, 256, 24) if (k % b) % 32 == 0]
    return BM, draw(st.sampled_from(cands)), bm


@st.composite
def near_miss_tiles(draw, scheme: str, m: int, k: int, BM: int, BK: int, bm: int):
    """Legal tiles with one value changed so that exactly one rule breaks (the rule drawn first, so every
    rule is exercised); when no single change breaks exactly one rule, any change."""
    cands = ([(x, BK, bm) for x in {BM + 32, BM * 2, BM // 2 or 1, bm * 3, bm * 5, 16, 48, 96, m, 2 * m}]
             + [(BM, x, bm) for x in range(1, 300)]
             + [(BM, BK, x) for x in (8, 16, 24, 48, 64, 96, 128)]
             + [(BM * 2, BK, 64), (BM, BK * 2, bm), (BM, BK + 24, bm)])
    by_rule: dict = {}
    for c in cands:
        broken = broken_rules(scheme, m, k, *c)
        if len(broken) == 1:
            by_rule.setdefault(broken[0], []).append(c)
    if not by_rule:
        return draw(st.sampled_from(cands))
    rule = draw(st.sampled_from(sorted(by_rule)))
    note(f"near miss: {rule}")
    return draw(st.sampled_from(by_rule[rule]))


@st.composite
def configs(draw, only_legal: bool = False):
    """A structurally valid config document, and whether the tile rules accept it (oracle).

    Returns (doc, legal, tables) with tables = [(target, table name, [shape of kernels[i]...])]."""
    dims_ = legal_dims if only_legal or draw(st.integers(0, 3)) else dims   # a quarter: bad dimensions too
    doc: dict = {"model": draw(nonblank_text)}
    for key in ("hf_repo", "architecture", "notes"):
        if draw(st.booleans()):
            doc[key] = draw(free_text)
    if draw(st.booleans()):
        n_kv, g = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        n_head = n_kv * g
        head_dim = 32 * draw(st.integers(-(-8 // n_head), 8))
        layout = {"hidden_size": n_head * head_dim, "intermediate_size": draw(dims_),
                  "num_attention_heads": n_head, "num_key_value_heads": n_kv}
        if draw(st.booleans()):
            layout["hidden_size"] = draw(dims_)
            layout["head_dim"] = head_dim
        if draw(st.booleans()):
            layout["num_hidden_layers"] = draw(st.integers(1, 200))
        doc["layout"] = layout
        shapes = sorted(layout_shape_set(layout["hidden_size"], layout["intermediate_size"], n_head, n_kv,
                                         head_dim))
    else:
        shapes = draw(st.lists(st.tuples(dims_, dims_), min_size=1, max_size=5, unique=True))
        doc["shapes"] = [list(s) for s in shapes]
    legal = True
    tables = []
    n_entries = len(shapes) * 4
    odd_one = -1 if only_legal else draw(st.integers(-n_entries, n_entries - 1))   # the entry with other tiles
    entry_no = 0
    targets = draw(st.lists(st.sampled_from(["tl1", "tl2"]), min_size=1, max_size=2, unique=True))
    for t in targets:
        doc[t] = {}
        for tab in draw(st.lists(st.sampled_from(["default", "pretuned"]), min_size=1, max_size=2, unique=True)):
            order = draw(st.permutations(shapes))
            kernels = []
            for (m, k) in order:
                BM, BK, bm = draw(legal_tiles(t, m, k))
                if entry_no == odd_one:   # about half the configs: one entry just misses one rule, or is arbitrary
                    if draw(st.integers(0, 3)):
                        BM, BK, bm = draw(near_miss_tiles(t, m, k, BM, BK, bm))
                    else:
                        BM, BK, bm = (draw(tile_ints) if draw(st.booleans()) else v for v in (BM, BK, bm))
                entry_no += 1
                legal = legal and tiles_legal(t, m, k, BM, BK, bm)
                e = {"m": m, "k": k, "block_m": BM, "block_k": BK, "simd_m": bm}
                if draw(st.integers(0, 3)) == 0:
                    e["note"] = draw(free_text)
                kernels.append(e)
            doc[t][tab] = {"source": draw(nonblank_text), "kernels": kernels}
            tables.append((t, tab, list(order)))
    return doc, legal, tables


def _entry_head(t, tab, i, e) -> str:
    return f"{t}.{tab}.kernels[{i}]"


@st.composite
def mutated(draw):
    """A valid-shaped config with ONE targeted break, and where the message must point:
    (doc or text, [(prefix, needle)]): some violation line must start with "<file>: <prefix>" and
    contain needle."""
    doc, _, tables = draw(configs(only_legal=True))
    t, tab, order = draw(st.sampled_from(tables))
    kernels = doc[t][tab]["kernels"]
    i = draw(st.integers(0, len(kernels) - 1))
    e = kernels[i]
    head = _entry_head(t, tab, i, e)
    kind = draw(st.sampled_from([
        "entry_field", "entry_missing", "entry_unknown", "entry_type", "entry_dup", "entry_drop",
        "entry_shift", "table_field", "table_missing", "table_unknown", "table_type", "target_type",
        "target_unknown_table", "top_field", "top_missing", "top_unknown", "layout_field", "shapes_item",
        "both_layout_shapes", "doc_type", "dup_key_top", "dup_key_entry", "no_target"]))
    note(f"mutation {kind} at {t}.{tab}.kernels[{i}]")
    if kind == "entry_field":
        f = draw(st.sampled_from(["m", "k", "block_m", "block_k", "simd_m"]))
        e[f] = draw(not_pos_int)
        return doc, [(head, f)]
    if kind == "entry_missing":
        f = draw(st.sampled_from(["m", "k", "block_m", "block_k", "simd_m"]))
        del e[f]
        return doc, [(head, f"missing required key '{f}'")]
    if kind == "entry_unknown":
        key = draw(st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none()).filter(
            lambda x: x not in cfg.ENTRY_KEYS))
        e[key] = draw(junk)
        return doc, [(head, "unknown key")]
    if kind == "entry_type":
        kernels[i] = draw(st.one_of(scalars, st.lists(scalars, max_size=3)))
        return doc, [(head, "must be a mapping")]
    if kind == "entry_dup":
        kernels.append(dict(e))
        return doc, [(f"{t}.{tab}.kernels[{len(kernels) - 1}]", "duplicate shape")]
    if kind == "entry_drop":
        if len(kernels) == 1:
            doc[t][tab]["kernels"] = []
            return doc, [(f"{t}.{tab}.kernels", "non-empty list")]
        del kernels[i]
        return doc, [(f"{t}.{tab}", "missing")]
    if kind == "entry_shift":
        e["m"] += 32 * draw(st.integers(1, 5))
        return doc, [(f"{t}.{tab}", "")]
    if kind == "table_field":
        f = draw(st.sampled_from(["source", "kernels"]))
        doc[t][tab][f] = draw(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.just(""),
                                        st.just("  "), st.just([]), st.dictionaries(st.text(max_size=3), scalars, max_size=2))
                              .filter(lambda v: not (f == "source" and isinstance(v, str) and v.strip())))
        return doc, [(f"{t}.{tab}.{f}", "")]
    if kind == "table_missing":
        f = draw(st.sampled_from(["source", "kernels"]))
        del doc[t][tab][f]
        return doc, [(f"{t}.{tab}", f"missing required key '{f}'")]
    if kind == "table_unknown":
        doc[t][tab][draw(st.text(max_size=10).filter(lambda x: x not in cfg.TABLE_KEYS))] = draw(junk)
        return doc, [(f"{t}.{tab}", "unknown key")]
    if kind == "table_type":
        doc[t][tab] = draw(st.one_of(scalars, st.lists(scalars, max_size=2)))
        return doc, [(f"{t}.{tab}", "must be a mapping")]
    if kind == "target_type":
        doc[t] = draw(st.one_of(scalars, st.lists(scalars, max_size=2), st.just({})))
        return doc, [(t, "must be a mapping")]
    if kind == "target_unknown_table":
        doc[t][draw(st.one_of(st.text(max_size=10), st.integers()).filter(lambda x: x not in cfg.TABLE_NAMES))] = {}
        return doc, [(t, "unknown table")]
    if kind == "top_field":
        f = draw(st.sampled_from(["model", "hf_repo", "architecture", "notes"]))
        bad = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.lists(scalars, max_size=2))
        doc[f] = draw(bad | st.just("  ") if f == "model" else bad)
        return doc, [(f, "")]
    if kind == "top_missing":
        f = "layout" if "layout" in doc else "shapes"
        f = draw(st.sampled_from(["model", f]))
        del doc[f]
        return doc, [("", f"missing required key '{'layout' if f == 'shapes' else f}'")]
    if kind == "top_unknown":
        key = draw(st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.none()).filter(
            lambda x: x not in cfg.TOP_KEYS))
        doc[key] = draw(junk)
        return doc, [("", "unknown")]
    if kind == "layout_field" and "layout" in doc:
        f = draw(st.sampled_from(list(cfg.LAYOUT_REQUIRED + cfg.LAYOUT_OPTIONAL)))
        doc["layout"][f] = draw(not_pos_int)
        return doc, [(f"layout.{f}", "")]
    if kind == "shapes_item" and "shapes" in doc:
        j = draw(st.integers(0, len(doc["shapes"]) - 1))
        doc["shapes"][j] = draw(st.one_of(not_pos_int, st.lists(st.integers(), max_size=3).filter(
            lambda s: not (len(s) == 2 and all(_pos_int(x) for x in s)))))
        return doc, [(f"shapes[{j}]", "")]
    if kind == "both_layout_shapes":
        doc["shapes" if "layout" in doc else "layout"] = {"hidden_size": 256} if "shapes" in doc else [[256, 256]]
        return doc, [("", "either 'layout' or 'shapes'")]
    if kind == "doc_type":
        return draw(st.one_of(scalars, st.lists(junk, max_size=3))), [("the document", "mapping")]
    if kind == "dup_key_top":
        key = draw(st.sampled_from(list(doc)))
        return DupMap(doc, [(key, doc[key])]), [("line ", "duplicate key")]
    if kind == "dup_key_entry":
        f = draw(st.sampled_from(list(e)))
        kernels[i] = DupMap(e, [(f, e[f])])
        return doc, [("line ", "duplicate key")]
    # no_target (and the layout/shapes kinds when the document has the other form)
    for tt in ("tl1", "tl2"):
        doc.pop(tt, None)
    return doc, [("", "at least one target")]


def _corrupt(data: bytes, edits) -> bytes:
    b = bytearray(data)
    for pos, op, val in edits:
        p = int(pos * len(b)) if b else 0
        if op == 0 and b:
            b[min(p, len(b) - 1)] = val
        elif op == 1:
            b[p:p] = bytes([val])
        elif b:
            del b[min(p, len(b) - 1)]
    return bytes(b)


BASE = ("model: t\nshapes: [[256, 256]]\ntl1: {default: {source: s, kernels: "
        "[{m: 256, k: 256, block_m: 256, block_k: 256, simd_m: 32}]}}\n")


@st.composite
def special_yaml(draw) -> str:
    """YAML that stresses the loader: deep nesting, anchors and aliases (exponential, recursive, undefined),
    tags, several documents, directives, odd characters."""
    n = draw(st.sampled_from([10, 100, 500, 1000, 3000, 20000]))
    frag = draw(st.sampled_from([
        "[" * n + "]" * n,
        "{a: " * n + "1" + "}" * n,
        "- " * n + "1",
        "\n".join(" " * i + "a:" for i in range(min(n, 3000))),
        "&a [*a]", "&a {x: *a}", "*undefined", "&a 1",
        "!!python/object/apply:os.system ['true']", "!!binary aGVsbG8=", "!!set {a, b}", "!!omap [a: 1]",
        "!!timestamp 2020-01-01", "!custom x", "!!int '12'", "!!float 1", "!!str 256", "2001-12-14t21:59:43.10-05:00",
        "0x100", "0o400", "1_024", "+256", "256.0", "2.56e2", "~", "''", "|\n  text\n", ">-\n  folded\n",
        "\t256", "'unterminated", "\"bad \\q escape\"", "[1, 2", "{a: 1, a: 2}", "? [1]\n: 2",
        "\x00", "\x01", "\x7f", "\ufeff", "\x85", "\u2028", "\ud800" if False else "\uffff",
    ]))
    laughs = []
    for lvl in range(draw(st.integers(1, 9))):
        prev = f"*l{lvl - 1}" if lvl else "256"
        laughs.append(f"l{lvl}: &l{lvl} [{', '.join([prev] * 10)}]")
    where = draw(st.sampled_from(["doc", "model", "shapes", "tl1", "kernels", "block_m", "laughs", "multi"]))
    if where == "doc":
        return frag
    if where == "laughs":
        key = draw(st.sampled_from(["model", "shapes", "notes", "tl1"]))
        return "\n".join(laughs) + f"\nmodel: t\nshapes: [[256, 256]]\n{key}: *l{len(laughs) - 1}\n"
    if where == "multi":
        return draw(st.sampled_from(["---\n" + BASE + "---\n" + BASE, "%YAML 1.1\n---\n" + BASE,
                                     "%TAG ! tag:x,2000:\n---\n" + BASE, BASE + "...\n", "...\n", "---\n",
                                     "# only a comment\n", "", BASE.replace("\n", "\r\n"), "\ufeff" + BASE]))
    if where in ("model", "shapes", "tl1"):
        lines = BASE.splitlines()
        idx = {"model": 0, "shapes": 1, "tl1": 2}[where]
        lines[idx] = f"{where}: {frag}"
        return "\n".join(lines) + "\n"
    if where == "kernels":
        return BASE.replace("kernels: [", "kernels: [" + frag.replace("\n", " ") + ", ")
    return BASE.replace("block_m: 256", "block_m: " + frag.replace("\n", " "))


@st.composite
def inputs(draw):
    """One config file: (stem, bytes, expectation) with expectation one of
    ("legal", bool) — a structurally valid config, the oracle's verdict on its tiles;
    ("broken", anchors) — a targeted break, must be rejected naming the anchor;
    ("any", None) — arbitrary bytes, only the general contract holds."""
    stem = draw(st.one_of(valid_stems, valid_stems, valid_stems, any_stems))
    kind = draw(st.sampled_from(["legal"] * 4 + ["broken"] * 3 + ["special", "bytes", "corrupt"]))
    if kind == "legal":
        doc, legal, _ = draw(configs())
        return stem, to_yaml(doc).encode(), ("legal", legal)
    if kind == "broken":
        doc, anchors = draw(mutated())
        return stem, to_yaml(doc).encode(), ("broken", anchors)
    if kind == "special":
        return stem, draw(special_yaml()).encode("utf-8", "surrogatepass"), ("any", None)
    if kind == "bytes":
        return stem, draw(st.binary(max_size=300)), ("any", None)
    doc, _, _ = draw(configs())
    edits = draw(st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 2), st.integers(0, 255)),
                          min_size=1, max_size=6))
    return stem, _corrupt(to_yaml(doc).encode(), edits), ("any", None)


# ---------------------------------------------------------------------------------------------------
# The contract, checked on one file
# ---------------------------------------------------------------------------------------------------
MAX_LINE = 1500   # "one line per violation": a bound on its length (a value is shown abridged)


def write_input(d: str, stem: str, data: bytes) -> str:
    path = os.path.join(d, stem + ".yaml")
    with open(path, "wb") as f:
        f.write(data)
    return path


def check_in_process(test: unittest.TestCase, path: str, expect) -> tuple[cfg.Config | None, list[str]]:
    """load_config either returns a Config or raises ConfigError (never another exception) whose
    violations are single lines starting with the file name; the verdict agrees with the expectation."""
    try:
        c = cfg.load_config(path)
        violations: list[str] = []
    except cfg.ConfigError as e:
        c, violations = None, e.violations
        test.assertTrue(violations, "ConfigError without a violation")
    shown = path if path.isprintable() else repr(path)[1:-1]   # a file name with a newline is shown escaped
    for v in violations:
        test.assertIsInstance(v, str)
        test.assertTrue(v.startswith(shown + ": "), f"violation does not name the file: {v!r}")
        test.assertEqual(v.splitlines(), [v], f"violation is not one line: {v!r}")
        test.assertLessEqual(len(v) - len(shown), MAX_LINE, f"violation line too long: {v[:300]!r}...")
        test.assertNotIn("Traceback", v)
    kind, what = expect
    if kind == "legal":
        test.assertEqual(c is not None, what and bool(C_NAME.fullmatch(cfg.name_of(path))),
                         f"oracle says legal={what}; validator says {violations}")
    elif kind == "broken":
        test.assertIsNone(c, "a broken config was accepted")
        rest = [v[len(shown) + 2:] for v in violations]
        test.assertTrue(any(r.startswith(prefix) and needle in r for r in rest for prefix, needle in what),
                        f"no violation names {what}: {rest}")
    if c is not None:
        check_accepted(test, c)
    return c, violations


def check_accepted(test: unittest.TestCase, c: cfg.Config) -> None:
    """An accepted config: a C-safe name, every entry legal by the oracle, every table covering exactly
    the config's shapes (recomputed from the layout or the list)."""
    test.assertRegex(c.name, r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
    if c.layout is not None:
        L = c.layout
        hd = L.head_dim if L.head_dim is not None else L.hidden_size // L.num_attention_heads
        want = layout_shape_set(L.hidden_size, L.intermediate_size, L.num_attention_heads, L.num_key_value_heads, hd)
    else:
        want = set(c.declared_shapes)
    for t in c.all_tables():
        test.assertEqual(sorted(t.shapes), sorted(want))
        for e in t.kernels:
            test.assertTrue(tiles_legal(t.target, e.m, e.k, e.block_m, e.block_k, e.simd_m), f"accepted {e}")


def _tmp(test: unittest.TestCase) -> str:
    td = tempfile.TemporaryDirectory(prefix="codegen-props-")
    test.addCleanup(td.cleanup)
    return td.name


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "codegen", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, errors="backslashreplace", timeout=120)


class InProcess(unittest.TestCase):
    """The bulk: codegen.config.load_config on hundreds of generated files."""

    @_settings(300)
    @given(inputs())
    def test_every_file_is_accepted_or_rejected_with_located_messages(self, inp):
        stem, data, expect = inp
        d = tempfile.mkdtemp(prefix="codegen-props-")
        try:
            check_in_process(self, write_input(d, stem, data), expect)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    @_settings(150)
    @given(configs(), any_stems)
    def test_the_name_is_checked_whatever_the_file_is_called(self, c, stem):
        """validate_data with any name: accepted only when the name is safe in a C string and a file name."""
        doc, legal, _ = c
        got, violations = cfg.validate_data(doc, "f.yaml", stem)
        self.assertEqual(got is not None, legal and bool(C_NAME.fullmatch(stem)), violations)
        if not C_NAME.fullmatch(stem):
            self.assertTrue(any(v.startswith("f.yaml: name = ") for v in violations), violations)


RULE_FIELD = {"m <= DIM_MAX": "m", "k <= DIM_MAX": "k", "m % BM": "block_m", "BM % bm": "block_m",
              "bm 32|64": "simd_m", "bm 32": "simd_m", "BK <= 256": "block_k", "BK <= 255": "block_k",
              "k % BK": "block_k", "BK % (256/bm)": "block_k", "BK % 24": "block_k", "(k % BK) % 32": "block_k",
              "k >= 256": "k"}


@st.composite
def one_entry(draw):
    """(scheme, m, k, BM, BK, bm): legal tiles, tiles that just miss one rule, or arbitrary ones."""
    scheme = draw(st.sampled_from(["tl1", "tl2"]))
    m, k = draw(dims), draw(dims)
    BM, BK, bm = draw(legal_tiles(scheme, m, k))
    how = draw(st.sampled_from(["legal", "near", "near", "near", "arbitrary"]))
    if how == "near":
        BM, BK, bm = draw(near_miss_tiles(scheme, m, k, BM, BK, bm))
    elif how == "arbitrary":
        BM, BK, bm = (draw(tile_ints) if draw(st.booleans()) else v for v in (BM, BK, bm))
    return scheme, m, k, BM, BK, bm


class TileRules(unittest.TestCase):
    """The tile rules alone, in process (validate_data on a one-entry config): accepted exactly when the
    oracle's rules hold, and a rejection names the entry and the field of every rule broken."""

    @_settings(300)
    @given(one_entry())
    def test_tiles_are_accepted_exactly_when_the_rules_hold(self, e):
        scheme, m, k, BM, BK, bm = e
        doc = {"model": "t", "shapes": [[m, k]],
               scheme: {"default": {"source": "s", "kernels": [
                   {"m": m, "k": k, "block_m": BM, "block_k": BK, "simd_m": bm}]}}}
        got, violations = cfg.validate_data(doc, "f.yaml", "f")
        broken = broken_rules(scheme, m, k, BM, BK, bm)
        note(f"broken {broken}; violations {violations}")
        self.assertEqual(got is None, bool(broken), violations)
        head = f"f.yaml: {scheme}.default.kernels[0] (m={m}, k={k}): "
        for rule in broken:
            if rule in RULE_FIELD:
                self.assertTrue(any(v.startswith(head + RULE_FIELD[rule] + " = ") for v in violations),
                                f"{rule}: no violation names {RULE_FIELD[rule]}: {violations}")


class ThroughTheCli(unittest.TestCase):
    """The real entry point: `python3 -m codegen validate|generate|check FILE` in a subprocess agrees with
    load_config; exit 0 or 2, no traceback, the violation lines exactly as in-process."""

    @_settings(30)
    @given(inputs(), st.sampled_from(["validate", "validate", "generate", "check"]))
    def test_cli_exit_status_and_messages(self, inp, command):
        stem, data, expect = inp
        d = _tmp(self)
        path = write_input(d, stem, data)
        c, violations = check_in_process(self, path, expect)
        out = os.path.join(d, "out")
        if command == "validate":
            r = run_cli("validate", path)
        else:
            r = run_cli(command, "--configs", path, "--out", out)
        note(f"rc {r.returncode}\nstdout {r.stdout!r}\nstderr {r.stderr!r}")
        self.assertNotIn("Traceback", r.stderr)
        if c is None:
            self.assertEqual(r.returncode, 2)
            lines = r.stderr.splitlines()
            if command != "validate":
                self.assertRegex(lines[-1], r"^codegen: \d+ violation\(s\); nothing generated$")
                lines = lines[:-1]
            self.assertEqual(lines, violations)
            self.assertFalse(os.path.exists(out))
        elif command == "validate":
            self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "ok\n", ""))
        elif command == "generate":
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.isfile(os.path.join(out, "bitnet-lut-registry.c")))
        else:   # check against a missing directory: stale
            self.assertEqual(r.returncode, 1, r.stderr)


# each generated file's ISA flags; on a host that is not x86-64 the x86 files are compiled without them (their
# code is behind the ISA's guard macro then), since gcc there does not take -mavx2 and the like
_HOST_X86 = platform.machine().lower() in ("x86_64", "amd64")
ISA_FLAGS = {t.output: list(t.isa.cflags) if _HOST_X86 or not any(f.startswith("-m") for f in t.isa.cflags) else []
             for t in PAIRS}
ISA_OF = {t.output: t.isa.name for t in PAIRS}
C_FLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-D_POSIX_C_SOURCE=200809L",
           '-DBITNET_LUT_TABLE_DEFAULT="default"', "-O1"]


def _largest_config():
    """Always compiled: the largest legal dimension with block_m = M, and free text that looks like C."""
    big = DIM_MAX // 32 * 32
    doc = {"model": "*/ #error x", "notes": "/* \n */", "shapes": [[big, big], [256, 256]]}
    for t, bk in (("tl1", 256), ("tl2", 96)):
        doc[t] = {"default": {"source": "*/", "kernels": [
            {"m": big, "k": big, "block_m": big, "block_k": 32 if t == "tl1" else bk, "simd_m": 32, "note": "*/"},
            {"m": 256, "k": 256, "block_m": 256, "block_k": bk, "simd_m": 32}]}}
    return doc, True, []


class GeneratedCCompiles(unittest.TestCase):
    """An accepted config (legal tiles; huge dimensions; odd names and free text) generates C that compiles
    with the project's flags: every generated .c with gcc (its ISA flags on x86-64), the NEON file also
    with aarch64-linux-gnu-gcc when installed."""

    @unittest.skipUnless(shutil.which("gcc"), "gcc not installed")
    @_settings(5)
    @given(configs(only_legal=True), valid_stems)
    @example(_largest_config(), "a.b-c_9")
    def test_accepted_configs_generate_c_that_compiles(self, c, stem):
        doc, legal, _ = c
        d = _tmp(self)
        path = write_input(d, stem, to_yaml(doc).encode())
        got, violations = check_in_process(self, path, ("legal", legal))
        out = os.path.join(d, "out")
        r = run_cli("generate", "--configs", path, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        for f in sorted(os.listdir(out)):
            if not f.endswith(".c"):
                continue
            compilers = [("gcc", ISA_FLAGS.get(f, []))]
            if ISA_OF.get(f) == "neon":
                compilers = [(cc, []) for cc in ("aarch64-linux-gnu-gcc",) if shutil.which(cc)] + compilers
            for cc, extra in compilers:
                cmd = [cc, *C_FLAGS, *extra, f"-I{out}", f"-I{os.path.join(REPO, 'src')}", "-c",
                       os.path.join(out, f), "-o", os.devnull]
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                self.assertEqual(p.returncode, 0, f"{' '.join(cmd)}\n{p.stderr[:3000]}")


if __name__ == "__main__":
    unittest.main()
