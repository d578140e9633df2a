"""Kernel configs (configs/<name>.yaml): loading and validation.

Schema (docs/ARCHITECTURE.md, "Configs"):

    model: <display name>                      required, string
    hf_repo: <HF repo id>                      optional, string
    architecture: <GGUF general.architecture>  optional, string
    layout:                                    the dimensions the weight shapes follow from
      hidden_size, intermediate_size, num_attention_heads, num_key_value_heads   required, int > 0
      num_hidden_layers, head_dim                                                optional, int > 0
    shapes: [[M, K], ...]                      instead of `layout`, for configs derived from a bare
                                               list of shapes (`python3 -m codegen derive --shape`)
    notes: <free text>                         optional
    tl1 / tl2:                                 target (codegen/targets.py) -> table
      default / pretuned:
        source: <where every number of this table came from>
        kernels: [{m, k, block_m, block_k, simd_m, note?}, ...]

Exactly one of `layout` and `shapes` is required, and at least one target. Every table must cover
exactly the shapes the layout implies (codegen/shapes.py: layout_shapes); that is what catches
"kernels generated for the wrong model's shapes" (design.md §5). The tile rules themselves live in
codegen/targets.py (Scheme.violations). The file stem is the config's name in the generated registry.

Validation collects every violation (never just the first) as one line each:
    <file>: <target>.<table>.kernels[<i>] (m=<M>, k=<K>): <field> = <value>: <rule>
    <file>: <key path>: <message>          (for everything that is not a kernel entry)
"""
from __future__ import annotations

import os
import re
import reprlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

import yaml

from .shapes import fmt_shape, layout_shapes
from .targets import SCHEMES

TABLE_NAMES = ("default", "pretuned")
TOP_KEYS = ("model", "hf_repo", "architecture", "layout", "shapes", "notes") + tuple(SCHEMES)
LAYOUT_REQUIRED = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads")
LAYOUT_OPTIONAL = ("num_hidden_layers", "head_dim")
TABLE_KEYS = ("source", "kernels")
ENTRY_REQUIRED = ("m", "k", "block_m", "block_k", "simd_m")
ENTRY_KEYS = ENTRY_REQUIRED + ("note",)
# \Z, not $: "$" also matches before a final newline, and "name\n" would break the registry's C strings
NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# YAML nesting the loader follows (a config needs 5 levels); deeper input is refused before Python's
# recursion limit turns it into a traceback
MAX_YAML_DEPTH = 64


class ConfigError(Exception):
    """One or more broken rules; str() lists every violation, one per line."""

    def __init__(self, violations: list[str]):
        super().__init__("\n".join(violations))
        self.violations = list(violations)


@dataclass(frozen=True)
class KernelEntry:
    """One tile entry of a table: shape M x K (M = weight rows) and its tiles (design.md §2)."""
    m: int
    k: int
    block_m: int
    block_k: int
    simd_m: int
    note: str | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.m, self.k)

    @property
    def tiles(self) -> tuple[int, int, int]:
        return (self.block_m, self.block_k, self.simd_m)


@dataclass(frozen=True)
class Table:
    target: str              # "tl1" | "tl2"
    name: str                # "default" | "pretuned"
    source: str
    kernels: tuple[KernelEntry, ...]

    @property
    def shapes(self) -> list[tuple[int, int]]:
        return [e.shape for e in self.kernels]

    def entry(self, m: int, k: int) -> KernelEntry | None:
        for e in self.kernels:
            if e.m == m and e.k == k:
                return e
        return None


@dataclass(frozen=True)
class Layout:
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int | None = None
    head_dim: int | None = None

    def shapes(self) -> list[tuple[int, int]]:
        return layout_shapes(self.hidden_size, self.intermediate_size, self.num_attention_heads,
                             self.num_key_value_heads, self.head_dim)


@dataclass(frozen=True)
class Config:
    path: str                     # as given to load_config
    name: str                     # file stem: the config's name in the registry
    model: str
    layout: Layout | None
    declared_shapes: tuple[tuple[int, int], ...] | None   # the `shapes:` key, when no layout
    tables: dict                  # target -> {table name -> Table}
    hf_repo: str | None = None
    architecture: str | None = None
    notes: str | None = None

    @property
    def shapes(self) -> list[tuple[int, int]]:
        """The sorted distinct (M, K) shapes this config is for."""
        if self.layout is not None:
            return self.layout.shapes()
        return sorted(set(self.declared_shapes or ()))

    def table(self, target: str, name: str) -> Table | None:
        return self.tables.get(target, {}).get(name)

    def all_tables(self) -> list[Table]:
        """Every table, sorted by (target, table name)."""
        return [self.tables[t][n] for t in sorted(self.tables) for n in sorted(self.tables[t])]


# ---------------------------------------------------------------------------------------------
# YAML loading with duplicate-key detection (PyYAML silently keeps the last duplicate)
# ---------------------------------------------------------------------------------------------
class _Loader(yaml.SafeLoader):
    _depth = 0

    def compose_node(self, parent, index):
        """PyYAML composes recursively: refuse nesting beyond MAX_YAML_DEPTH with the place it starts."""
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.composer.ComposerError(None, None, f"nesting deeper than {MAX_YAML_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # SafeLoader reports unhashable keys itself
        if key in seen:
            loader.duplicate_keys.append(
                f"line {key_node.start_mark.line + 1}: duplicate key {_show(key)} (first at line {seen[key]})")
        else:
            seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def parse_yaml(text: str, file: str) -> tuple[object, list[str]]:
    try:
        loader = _Loader(text)   # its Reader refuses characters YAML does not allow, here already
    except yaml.reader.ReaderError as e:
        return None, [f"{file}: {_text_position(text, e.position)}: YAML syntax error: {_reader_problem(e)}"]
    loader.duplicate_keys = []
    try:
        data = loader.get_single_data()
    except yaml.reader.ReaderError as e:
        return None, [f"{file}: {_text_position(text, e.position)}: YAML syntax error: {_reader_problem(e)}"]
    except RecursionError:   # MAX_YAML_DEPTH keeps the composer below the limit; this is a second guard
        return None, [f"{file}: YAML syntax error: nesting too deep"]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        ctx, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
        if ctx and cmark is not None and cmark is not mark:
            problem += f" ({ctx} at line {cmark.line + 1})"
        return None, [f"{file}: {where}YAML syntax error: {problem}"]
    finally:
        loader.dispose()
    return data, [f"{file}: {d}" for d in loader.duplicate_keys]


def _text_position(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"line {line}, column {pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


def _reader_problem(e: yaml.reader.ReaderError) -> str:
    """ReaderError's str() spans two lines; one line: the character and why."""
    ch = e.character
    ch = f"#x{ch:04x}" if isinstance(ch, int) else repr(ch)
    return f"unacceptable character {ch}: {e.reason}"


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------
_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxtuple, _REPR.maxdict, _REPR.maxset = 2, 5, 5, 4, 5
_REPR.maxstring, _REPR.maxlong, _REPR.maxother = 60, 40, 60


def _show(v: object) -> str:
    """repr() for messages, abridged: one short line whatever the value (a YAML alias can expand to a
    value whose full repr takes gigabytes; recursive aliases give self-containing lists)."""
    return _REPR.repr(v)


def _label(v: object) -> str:
    """A key or m/k value as it reads in a message path: a plain short printable string as it is, else
    _show (quoted, escaped, abridged)."""
    if isinstance(v, str) and v.isprintable() and len(v) <= 80:
        return v
    return _show(v)


def _type_name(v: object) -> str:
    return "null" if v is None else type(v).__name__


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_problem(v: object) -> str | None:
    """None when v is a positive int; else the rule it breaks (bool is not an int)."""
    if not _is_int(v):
        return f"must be an integer, not {_type_name(v)}"
    if v <= 0:
        return "must be a positive integer"
    return None


def _unknown(key: object, allowed: Iterable[str]) -> str:
    return f"unknown key {_show(key)} (allowed: {', '.join(allowed)})"


def _check_layout(file: str, raw: object, out: list[str]) -> Layout | None:
    if not isinstance(raw, dict):
        out.append(f"{file}: layout: must be a mapping, not {_type_name(raw)}")
        return None
    ok = True
    for key in raw:
        if key not in LAYOUT_REQUIRED + LAYOUT_OPTIONAL:
            out.append(f"{file}: layout: {_unknown(key, LAYOUT_REQUIRED + LAYOUT_OPTIONAL)}")
            ok = False
    for key in LAYOUT_REQUIRED:
        if key not in raw:
            out.append(f"{file}: layout: missing required key '{key}'")
            ok = False
    for key in LAYOUT_REQUIRED + LAYOUT_OPTIONAL:
        if key in raw:
            p = _int_problem(raw[key])
            if p:
                out.append(f"{file}: layout.{key} = {_show(raw[key])}: {p}")
                ok = False
    if not ok:
        return None
    layout = Layout(**{k: raw[k] for k in LAYOUT_REQUIRED + LAYOUT_OPTIONAL if k in raw})
    try:
        layout.shapes()
    except ValueError as e:
        out.append(f"{file}: layout: {e}")
        return None
    return layout


def _check_shapes_key(file: str, raw: object, out: list[str]) -> tuple[tuple[int, int], ...] | None:
    if not isinstance(raw, list) or not raw:
        out.append(f"{file}: shapes: must be a non-empty list of [M, K] pairs, not {_show(raw)}")
        return None
    shapes = []
    ok = True
    for i, s in enumerate(raw):
        if (not isinstance(s, list) or len(s) != 2 or _int_problem(s[0]) or _int_problem(s[1])):
            out.append(f"{file}: shapes[{i}] = {_show(s)}: must be a pair [M, K] of positive integers")
            ok = False
            continue
        if tuple(s) in shapes:
            out.append(f"{file}: shapes[{i}] = {fmt_shape(tuple(s))}: duplicate shape")
            ok = False
        shapes.append((s[0], s[1]))
    return tuple(shapes) if ok else None


def _check_entry(file: str, where: str, i: int, raw: object, target, out: list[str]) -> KernelEntry | None:
    if not isinstance(raw, dict):
        out.append(f"{file}: {where}.kernels[{i}]: must be a mapping with keys "
                   f"{', '.join(ENTRY_REQUIRED)}, not {_type_name(raw)}")
        return None
    mk = f"(m={_label(raw.get('m', '?'))}, k={_label(raw.get('k', '?'))})"
    head = f"{file}: {where}.kernels[{i}] {mk}"
    ok = True
    for key in raw:
        if key not in ENTRY_KEYS:
            out.append(f"{head}: {_unknown(key, ENTRY_KEYS)}")
            ok = False
    for key in ENTRY_REQUIRED:
        if key not in raw:
            out.append(f"{head}: missing required key '{key}'")
            ok = False
        else:
            p = _int_problem(raw[key])
            if p:
                out.append(f"{head}: {key} = {_show(raw[key])}: {p}")
                ok = False
    if "note" in raw and not isinstance(raw["note"], str):
        out.append(f"{head}: note = {_show(raw['note'])}: must be a string, not {_type_name(raw['note'])}")
        ok = False
    if not ok:
        return None
    args = [raw[k] for k in ENTRY_REQUIRED]
    broken = target.violations(*args)
    for v in broken:
        out.append(f"{head}: {v.field} = {v.value}: {v.rule}")
    if broken:
        return None
    return KernelEntry(*args, note=raw.get("note"))


def _check_table(file: str, tname: str, name: str, raw: object, target, out: list[str]) -> Table | None:
    where = f"{tname}.{name}"
    if not isinstance(raw, dict):
        out.append(f"{file}: {where}: must be a mapping with keys source, kernels, not {_type_name(raw)}")
        return None
    ok = True
    for key in raw:
        if key not in TABLE_KEYS:
            out.append(f"{file}: {where}: {_unknown(key, TABLE_KEYS)}")
            ok = False
    for key in TABLE_KEYS:
        if key not in raw:
            out.append(f"{file}: {where}: missing required key '{key}'")
            ok = False
    source = raw.get("source")
    if "source" in raw and (not isinstance(source, str) or not source.strip()):
        out.append(f"{file}: {where}.source = {_show(source)}: must be a non-empty string saying where the numbers came from")
        ok = False
    kernels = raw.get("kernels")
    entries: list[KernelEntry] = []
    if "kernels" in raw:
        if not isinstance(kernels, list) or not kernels:
            out.append(f"{file}: {where}.kernels: must be a non-empty list of tile entries, not {_show(kernels)}")
            ok = False
        else:
            first_at: dict[tuple, int] = {}
            for i, e in enumerate(kernels):
                entry = _check_entry(file, where, i, e, target, out)
                if isinstance(e, dict) and _is_int(e.get("m")) and _is_int(e.get("k")):
                    shape = (e["m"], e["k"])
                    if shape in first_at:
                        out.append(f"{file}: {where}.kernels[{i}] (m={shape[0]}, k={shape[1]}): "
                                   f"shape = {fmt_shape(shape)}: duplicate shape within the table "
                                   f"(first at kernels[{first_at[shape]}])")
                        ok = False
                    else:
                        first_at[shape] = i
                if entry is None:
                    ok = False
                else:
                    entries.append(entry)
    if not ok:
        return None
    return Table(target=tname, name=name, source=source, kernels=tuple(entries))


def validate_data(data: object, file: str, name: str) -> tuple[Config | None, list[str]]:
    """Validate one parsed YAML document. Returns (Config or None, violations)."""
    out: list[str] = []
    if not NAME_RE.match(name):
        out.append(f"{file}: name = {_show(name)}: the file stem is the config's name in C strings and file "
                   f"names; use letters, digits, '.', '_' and '-' (not first)")
    if not isinstance(data, dict):
        out.append(f"{file}: the document must be a mapping with keys {', '.join(TOP_KEYS)}, "
                   f"not {_type_name(data)}")
        return None, out
    bad_targets = 0
    for key in data:
        if key in TOP_KEYS:
            continue
        if isinstance(key, str) and (re.fullmatch(r"tl\d+", key) or
                                     (isinstance(data[key], dict) and set(data[key]) & set(TABLE_NAMES))):
            out.append(f"{file}: {_label(key)}: unknown target {_show(key)} (targets: {', '.join(SCHEMES)})")
            bad_targets += 1
        else:
            out.append(f"{file}: {_unknown(key, TOP_KEYS)}")
    model = data.get("model")
    if "model" not in data:
        out.append(f"{file}: missing required key 'model'")
    elif not isinstance(model, str) or not model.strip():
        out.append(f"{file}: model = {_show(model)}: must be a non-empty string")
    for key in ("hf_repo", "architecture", "notes"):
        if key in data and not isinstance(data[key], str):
            out.append(f"{file}: {key} = {_show(data[key])}: must be a string, not {_type_name(data[key])}")
    layout = declared = None
    shapes_ok = False
    if "layout" in data and "shapes" in data:
        out.append(f"{file}: give either 'layout' or 'shapes', not both")
    elif "layout" in data:
        layout = _check_layout(file, data["layout"], out)
        shapes_ok = layout is not None
    elif "shapes" in data:
        declared = _check_shapes_key(file, data["shapes"], out)
        shapes_ok = declared is not None
    else:
        out.append(f"{file}: missing required key 'layout' (or 'shapes' for a config of bare shapes)")
    expected = (layout.shapes() if layout is not None else sorted(set(declared))) if shapes_ok else None

    tables: dict = {}
    present_targets = [t for t in SCHEMES if t in data]
    if not present_targets and not bad_targets:
        out.append(f"{file}: missing required key: at least one target ({', '.join(SCHEMES)})")
    for tname in present_targets:
        target = SCHEMES[tname]
        raw = data[tname]
        if not isinstance(raw, dict) or not raw:
            out.append(f"{file}: {tname}: must be a mapping of tables ({', '.join(TABLE_NAMES)}), not {_show(raw)}")
            continue
        for tab in raw:
            if tab not in TABLE_NAMES:
                out.append(f"{file}: {tname}.{_label(tab)}: unknown table {_show(tab)} (tables: {', '.join(TABLE_NAMES)})")
                continue
            table = _check_table(file, tname, tab, raw[tab], target, out)
            if table is None:
                continue
            tables.setdefault(tname, {})[tab] = table
            if expected is not None:
                have = set(table.shapes)
                missing = [s for s in expected if s not in have]
                extra = sorted(have - set(expected))
                if missing or extra:
                    what = "layout" if layout is not None else "`shapes` list"
                    parts = []
                    if missing:
                        parts.append("missing " + ", ".join(fmt_shape(s) for s in missing))
                    if extra:
                        parts.append("extra " + ", ".join(fmt_shape(s) for s in extra))
                    out.append(f"{file}: {tname}.{tab}: the table does not cover exactly the shapes the "
                               f"{what} implies ({', '.join(fmt_shape(s) for s in expected)}): {'; '.join(parts)}")
    if out:
        return None, out
    cfg = Config(path=file, name=name, model=model, layout=layout,
                 declared_shapes=declared, tables=tables, hf_repo=data.get("hf_repo"),
                 architecture=data.get("architecture"), notes=data.get("notes"))
    return cfg, []


def name_of(path: str | os.PathLike) -> str:
    """The config's registry name: the file stem (configs/bitnet_b1_58-large.yaml -> bitnet_b1_58-large)."""
    base = os.path.basename(os.fspath(path))
    for ext in (".yaml", ".yml"):
        if base.endswith(ext):
            return base[: -len(ext)]
    return base


def shown_path(path: str) -> str:
    """A file name as messages show it: as given, or escaped (repr without the quotes) when it holds a
    newline or another unprintable character, so that every violation stays one line."""
    return path if path.isprintable() else repr(path)[1:-1]


def validate_file(path: str | os.PathLike) -> tuple[Config | None, list[str]]:
    """Read and validate one config file. Returns (Config or None, list of violation lines)."""
    file = os.fspath(path)
    shown = shown_path(file)
    try:
        with open(file, "rb") as f:
            raw = f.read()
    except OSError as e:
        return None, [f"{shown}: cannot read: {e.strerror or e}"]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        return None, [f"{shown}: not UTF-8 text (byte {e.start})"]
    data, problems = parse_yaml(text, shown)
    if data is None and problems:
        return None, problems
    cfg, more = validate_data(data, shown, name_of(file))
    problems += more
    if cfg is not None and shown != file:
        cfg = replace(cfg, path=file)
    return (cfg if not problems else None), problems


def load_config(path: str | os.PathLike) -> Config:
    """Load and validate configs/<name>.yaml.

    Returns the Config; raises ConfigError whose str() lists every violation, one per line, in the
    format of `python3 -m codegen validate`.
    """
    cfg, problems = validate_file(path)
    if problems:
        raise ConfigError(problems)
    return cfg


def expand_paths(paths_or_dir) -> list[str]:
    """A path, a directory (its *.yaml, sorted) or a list of either -> list of files (order kept,
    directories expanded in name order, duplicates by real path dropped)."""
    if isinstance(paths_or_dir, (str, os.PathLike)):
        paths_or_dir = [paths_or_dir]
    files: list[str] = []
    seen: set[str] = set()
    for p in paths_or_dir:
        p = os.fspath(p)
        if os.path.isdir(p):
            found = sorted(os.path.join(p, f) for f in os.listdir(p)
                           if f.endswith((".yaml", ".yml")) and os.path.isfile(os.path.join(p, f)))
        else:
            found = [p]
        for f in found:
            real = os.path.realpath(f)
            if real not in seen:
                seen.add(real)
                files.append(f)
    return files


def load_all(paths_or_dir) -> list[Config]:
    """Load several configs: a directory (every *.yaml in it), a file, or a list of either.

    Returns the configs sorted by name. Raises ConfigError listing every violation of every file,
    plus names used by two files (the name is the key in the generated registry) and an empty set.
    """
    files = expand_paths(paths_or_dir)
    problems: list[str] = []
    if not files:
        raise ConfigError([f"{shown_path(str(paths_or_dir))}: no config files (*.yaml) found"])
    configs: list[Config] = []
    for f in files:
        cfg, p = validate_file(f)
        problems += p
        if cfg is not None:
            configs.append(cfg)
    by_name: dict[str, str] = {}
    for f in files:
        n = name_of(f)
        if n in by_name:
            problems.append(f"{shown_path(f)}: name = {_show(n)}: also the name of {shown_path(by_name[n])} (the file stem is the "
                            f"config's key in the registry and must be unique)")
        else:
            by_name[n] = f
    if problems:
        raise ConfigError(problems)
    return sorted(configs, key=lambda c: c.name)


__all__ = ["ConfigError", "Config", "Table", "KernelEntry", "Layout", "TABLE_NAMES", "load_config",
           "load_all", "validate_file", "validate_data", "expand_paths", "name_of"]
