"""`python3 -m codegen <command>`: generate, check, validate, shapes, derive, import-ini, tune (codegen/tune.py).

Exit codes: 0 ok; 1 stale generated files (check only); 2 bad input, rule violations, or an output
directory that is not ours. Messages go to stderr; the data a command is asked for (shapes, a derived
YAML without --out, "ok") goes to stdout. User errors never show a Python traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from . import config as cfgmod
from . import derive as derivemod
from . import import_ini as inimod
from . import render, shapes as shapesmod, tune as tunemod
from .targets import SCHEMES

EXIT_OK, EXIT_STALE, EXIT_BAD = 0, 1, 2


def _err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _load_configs(paths) -> tuple[list, list[str]] | None:
    """Validate every config of the run; print violations and return None on any."""
    files = cfgmod.expand_paths(paths)
    try:
        configs = cfgmod.load_all(files)
    except cfgmod.ConfigError as e:
        for v in e.violations:
            _err(v)
        _err(f"codegen: {len(e.violations)} violation(s); nothing generated")
        return None
    return configs, files


def _render(args) -> tuple[dict, list[str]] | None:
    loaded = _load_configs(args.configs or [render.DEFAULT_CONFIGS])
    if loaded is None:
        return None
    configs, files = loaded
    try:
        return render.render_all(configs, files, args.templates), files
    except render.RenderError as e:
        _err(f"codegen: {e}")
        return None


def cmd_generate(args) -> int:
    """Validate, render, write changed files into --out (default generated/), remove orphans."""
    r = _render(args)
    if r is None:
        return EXIT_BAD
    files, _ = r
    out = args.out or render.DEFAULT_OUT
    try:
        render.check_out_dir(out, files)
        written, removed = render.write_outputs(out, files)
    except render.OutDirError as e:
        _err(f"codegen: {e}")
        return EXIT_BAD
    except OSError as e:
        _err(f"codegen: {out}: {e.strerror or e}")
        return EXIT_BAD
    _err(f"codegen: {out}: {len(files)} files, {len(written)} written"
         f"{' (' + ', '.join(written) + ')' if written else ''}, {len(removed)} removed"
         f"{' (' + ', '.join(removed) + ')' if removed else ''}")
    return EXIT_OK


def cmd_check(args) -> int:
    """Render in memory and compare with --out: exit 1 listing stale/missing/orphaned files."""
    r = _render(args)
    if r is None:
        return EXIT_BAD
    files, _ = r
    out = args.out or render.DEFAULT_OUT
    problems = render.check_outputs(out, files)
    if problems:
        for p in problems:
            _err(p)
        _err(f"codegen: {out} is out of date; run `python3 -m codegen generate` and commit the result")
        return EXIT_STALE
    _err(f"codegen: {out}: all {len(files)} generated files up to date")
    return EXIT_OK


def cmd_validate(args) -> int:
    """Validate each FILE; print one line per violation (every violation of every file)."""
    problems: list[str] = []
    for f in args.files:
        _, p = cfgmod.validate_file(f)
        problems += p
    if problems:
        for p in problems:
            _err(p)
        return EXIT_BAD
    print("ok")
    return EXIT_OK


def cmd_shapes(args) -> int:
    """Print a model's ternary matmul shapes and which config tables cover them."""
    try:
        info = shapesmod.model_info(args.path)
    except shapesmod.ShapeError as e:
        _err(f"codegen: {e}")
        return EXIT_BAD
    loaded = _load_configs(args.configs or [render.DEFAULT_CONFIGS])
    if loaded is None:
        return EXIT_BAD
    configs, _ = loaded
    cov = shapesmod.coverage(info.shapes, configs)
    if args.json:
        doc = {"source": args.path, "shapes": [[m, k] for m, k in info.shapes]}
        doc.update(cov)
        print(json.dumps(doc))
        return EXIT_OK
    print(f"{args.path}: {len(info.shapes)} ternary matmul shapes (M x K, M = output rows)"
          + (f", read from {info.source}" if info.source != args.path else ""))
    width = max(len(shapesmod.fmt_shape(s)) for s in info.shapes)
    for s in info.shapes:
        cols = []
        for t in SCHEMES:
            origins = shapesmod.shape_origins(s, configs, t)
            cols.append(f"{t}: {', '.join(origins) if origins else '(no table; default tile rule)'}")
        print(f"  {shapesmod.fmt_shape(s):>{width}}   " + "   ".join(cols))
    print("configs covering all shapes:")
    for t in SCHEMES:
        for tab, names in cov["covering"][t].items():
            print(f"  {t} {tab}: {', '.join(names) if names else '(none)'}")
    for t in SCHEMES:
        if cov["uncovered"][t]:
            print(f"  {t} uncovered: {', '.join(shapesmod.fmt_shape(s) for s in cov['uncovered'][t])} "
                  f"(`python3 -m codegen derive --model {args.path} --name NAME` writes a config)")
    return EXIT_OK


def cmd_derive(args) -> int:
    """Write a config with rule-derived tiles for --shape MxK... or for a model's shapes."""
    if not cfgmod.NAME_RE.match(args.name):
        _err(f"codegen: --name {args.name!r}: use letters, digits, '.', '_' and '-' (not first)")
        return EXIT_BAD
    layout = arch = None
    if args.model:
        try:
            info = shapesmod.model_info(args.model)
        except shapesmod.ShapeError as e:
            _err(f"codegen: {e}")
            return EXIT_BAD
        shape_list, layout, arch = info.shapes, info.layout, info.architecture
        origin = render.display_path(info.source) if os.path.isabs(info.source) else info.source
        if layout is not None:
            try:
                implied = shapesmod.layout_shapes(layout["hidden_size"], layout["intermediate_size"],
                                                  layout["num_attention_heads"], layout["num_key_value_heads"],
                                                  layout.get("head_dim"))
            except ValueError as e:
                _err(f"codegen: {info.source}: {e}")
                return EXIT_BAD
            if implied != shape_list:
                _err(f"codegen: {info.source}: the metadata layout implies shapes "
                     f"{', '.join(map(shapesmod.fmt_shape, implied))} but the tensors have "
                     f"{', '.join(map(shapesmod.fmt_shape, shape_list))}; writing a `shapes:` list instead")
                layout = None
    else:
        try:
            shape_list = sorted({shapesmod.parse_shape(s) for s in args.shape})
        except ValueError as e:
            _err(f"codegen: --shape {e}")
            return EXIT_BAD
        origin = "--shape " + " ".join(shapesmod.fmt_shape(s) for s in shape_list)
    try:
        text, warnings = derivemod.derive_config_text(args.name, shape_list, layout, architecture=arch,
                                                      origin=origin)
    except ValueError as e:
        _err(f"codegen: {e}")
        return EXIT_BAD
    for w in warnings:
        _err(f"codegen: warning: {w}")
    # self-check: what we write must validate
    data, problems = cfgmod.parse_yaml(text, args.out or "<derived>")
    if not problems:
        _, problems = cfgmod.validate_data(data, args.out or "<derived>", args.name)
    if problems:
        for p in problems:
            _err(f"codegen: internal error, derived config does not validate: {p}")
        return EXIT_BAD
    return _emit_config(text, args.out, args.name, f"{len(shape_list)} shapes")


def _emit_config(text: str, out: str | None, name: str, what: str) -> int:
    """Write a config's text to `out` (its folders made; a note when the file stem is not `name`, the
    config's registry name), or to stdout without `out`. EXIT_OK or EXIT_BAD (message printed)."""
    if not out:
        sys.stdout.write(text)
        return EXIT_OK
    stem = cfgmod.name_of(out)
    if stem != name:
        _err(f"codegen: note: the registry names a config by its file stem: {stem!r}, not {name!r}")
    try:
        d = os.path.dirname(out)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        _err(f"codegen: {out}: {e.strerror or e}")
        return EXIT_BAD
    _err(f"codegen: wrote {out} ({what})")
    return EXIT_OK


def cmd_import_ini(args) -> int:
    """Turn bitnet.cpp's kernel_config.ini into a config for --target (validated before it is written;
    a broken rule is reported against the ini's [Kernels_<n>] section)."""
    if args.out:
        if args.out.endswith(os.sep) or os.path.isdir(args.out):
            _err(f"codegen: --out {args.out}: is a directory; give a file name (its stem is the config's name)")
            return EXIT_BAD
        try:
            render.check_proposal_path(args.out, "codegen import-ini", "an imported config is a proposal")
        except render.ProposalPathError as e:
            _err(str(e))
            return EXIT_BAD
    name = args.name or (cfgmod.name_of(args.out) if args.out else os.path.splitext(os.path.basename(args.ini))[0])
    if not cfgmod.NAME_RE.match(name):
        _err(f"codegen: config name {name!r} (from {'--name' if args.name else 'the file name'}): use letters, "
             f"digits, '.', '_' and '-' (not first); give --name")
        return EXIT_BAD
    try:
        entries = inimod.read_kernel_config(args.ini)
    except inimod.IniError as e:
        _err(f"codegen: {e}")
        return EXIT_BAD
    text = inimod.config_text(name, args.target, entries, args.ini)
    data, problems = cfgmod.parse_yaml(text, args.ini)
    if not problems:
        _, problems = cfgmod.validate_data(data, args.ini, name)
    if problems:
        for p in problems:
            for i, e in enumerate(entries):  # the config's kernels[i] is the ini's section e
                p = p.replace(f".default.kernels[{i}] ", f".default.kernels[{i}] [{e['section']}] ")
            _err(p)
        _err(f"codegen: {args.ini}: the tiles break the {args.target} rules above; nothing written")
        return EXIT_BAD
    return _emit_config(text, args.out, name, f"{len(entries)} shapes, {args.target} default table")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m codegen",
                                description="Kernel generator: YAML tile configs -> C LUT kernels (TL1 NEON, TL2 AVX2).")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add_render_opts(sp):
        sp.add_argument("--configs", nargs="+", metavar="PATH",
                        help="config files or directories (default: configs/)")
        sp.add_argument("--out", metavar="DIR", help="output directory (default: generated/)")
        sp.add_argument("--templates", action="append", metavar="DIR",
                        help="extra template directory searched before templates/ (development)")

    sp = sub.add_parser("generate", help="render configs into the output directory")
    add_render_opts(sp)
    sp.set_defaults(func=cmd_generate)
    sp = sub.add_parser("check", help="exit 1 when the output directory is stale, incomplete or has orphans")
    add_render_opts(sp)
    sp.set_defaults(func=cmd_check)
    sp = sub.add_parser("validate", help="check config files against every rule")
    sp.add_argument("files", nargs="+", metavar="FILE")
    sp.set_defaults(func=cmd_validate)
    sp = sub.add_parser("shapes", help="a model's matmul shapes and the configs that cover them")
    sp.add_argument("path", metavar="PATH", help="GGUF file, HF config.json, or a directory holding one")
    sp.add_argument("--json", action="store_true", help="machine-readable output")
    sp.add_argument("--configs", nargs="+", metavar="PATH", help="configs to compare with (default: configs/)")
    sp.set_defaults(func=cmd_shapes)
    sp = sub.add_parser("derive", help="write a config with rule-derived tiles")
    g = sp.add_mutually_exclusive_group(required=True)
    g.add_argument("--shape", nargs="+", metavar="MxK", help="shapes, e.g. 2560x6912 640x2560")
    g.add_argument("--model", metavar="PATH", help="GGUF file, HF config.json, or a directory holding one")
    sp.add_argument("--name", required=True, help="config name (model: key; use it as the file stem)")
    sp.add_argument("--out", metavar="FILE", help="output YAML (default: stdout)")
    sp.set_defaults(func=cmd_derive)
    sp = sub.add_parser("import-ini", help="bitnet.cpp's kernel_config.ini -> a config (validated)")
    sp.add_argument("ini", metavar="KERNEL_CONFIG_INI", help="bitnet.cpp's include/kernel_config.ini")
    sp.add_argument("--target", required=True, choices=sorted(SCHEMES),
                    help="the scheme the ini's tiles are for (the ini does not say)")
    sp.add_argument("--out", metavar="FILE", help="output YAML (default: stdout); its stem is the config's name")
    sp.add_argument("--name", help="config name (default: the stem of --out, else of the ini)")
    sp.set_defaults(func=cmd_import_ini)
    tunemod.add_parser(sub)  # `tune`: measured tiles (codegen/tune.py; exit 3 when the benchmark fails)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        _err("codegen: interrupted")
        return EXIT_BAD
    except BrokenPipeError:
        return EXIT_OK
