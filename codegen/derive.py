"""Tiles for shapes nobody tuned, and config files built from them (`python3 -m codegen derive`).

The rule (this text is the specification; the C runtime mirrors it in bitnet_lut_default_tiles):

  TL1: simd_m = 32; block_m = the largest multiple of 32 that divides M and is <= 256; block_k = the
       largest multiple of 8 that divides K and is <= 256. No tiles if M % 32 != 0 or K % 8 != 0.
  TL2: simd_m = 32; block_m as TL1; block_k = 96 if (K % 96) % 32 == 0 (bitnet.cpp's choice for
       every shape it tuned), else the largest multiple of 24 <= 240 with (K % block_k) % 32 == 0.
       No tiles if M % 32 != 0, K < 256, or no block_k qualifies.

Why: the largest legal block_m gives the fewest kernel calls while keeping a tile small enough to
split among threads; TL1's block_k is bounded by the int16 accumulator (design.md §2: BK <= 256)
and must divide K; TL2's block_k must be a multiple of 24 (8 groups of 3 per sign word) and leave a
K remainder the two-weight path takes 32 at a time. Every result is checked with Scheme.violations.
Where it lives: block_m and simd_m here, each scheme's block_k in codegen/targets.py
(SCHEMES[...].default_block_k); tests/codegen/test_type_facts.py checks it against the C copy.
"""
from __future__ import annotations

from .shapes import fmt_shape
from .targets import SCHEMES, Scheme, largest_dividing_multiple

# The default rule of each scheme in words (SCHEMES[...].default_rule_text).
RULE_TEXT = {name: sch.default_rule_text for name, sch in SCHEMES.items()}


def derive_tiles(target, m: int, k: int) -> dict | None:
    """Tiles for an (M, K) weight under the documented rule (module docstring).

    target: "tl1", "tl2" or a codegen.targets.Scheme. Returns {"block_m", "block_k", "simd_m"} or
    None when the rule finds no legal tiles (e.g. M % 32 != 0). Raises KeyError for an unknown target.
    Examples: tl1 2560x6912 -> 256/256/32; tl2 640x2560 -> 160/96/32; tl1 3200x8640 -> 160/240/32.
    """
    t: Scheme = target if isinstance(target, Scheme) else SCHEMES[target]
    if m <= 0 or k <= 0 or m % 32:
        return None
    block_m = largest_dividing_multiple(m, 32, 256)
    block_k = t.default_block_k(k)
    if block_k is None:
        return None
    tiles = {"block_m": block_m, "block_k": block_k, "simd_m": 32}
    broken = t.violations(m, k, block_m, block_k, 32)
    if broken:  # the rule above and Scheme.violations disagree: a bug here, not bad input
        raise AssertionError(f"derived tiles {tiles} for {t.name} {fmt_shape((m, k))} break "
                             f"{[b.rule for b in broken]}")
    return tiles


def _yaml_str(s: str) -> str:
    """A double-quoted YAML scalar (JSON string syntax is valid YAML)."""
    import json
    return json.dumps(s, ensure_ascii=False)


def derive_config_text(name: str, shapes, layout: dict | None = None, *, model: str | None = None,
                       architecture: str | None = None, origin: str = "") -> tuple[str, list[str]]:
    """YAML text of a config whose tables follow the derive rule, and a list of warnings.

    shapes: the (M, K) shapes to cover; layout: the config `layout:` mapping when known (then the
    shapes must be the ones it implies), else the config gets a `shapes:` list. A target gets a
    `default` table only when the rule gives tiles for every shape; the warnings name the shapes
    that left a target out. Raises ValueError when no target can cover the shapes.
    """
    shapes = sorted(set(shapes))
    lines = [
        f"# Derived by `python3 -m codegen derive`{(' from ' + origin) if origin else ''}.",
        "# Every tile below follows the rule in codegen/derive.py (no tuning, no reference table).",
        f"model: {_yaml_str(model or name)}",
    ]
    if architecture:
        lines.append(f"architecture: {_yaml_str(architecture)}")
    if layout is not None:
        lines.append("layout:" + ("  # from " + origin if origin else ""))
        for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
                    "num_hidden_layers", "head_dim"):
            if layout.get(key) is not None:
                lines.append(f"  {key}: {layout[key]}")
    else:
        lines.append("shapes:  # M x K, as given on the command line")
        for m, k in shapes:
            lines.append(f"  - [{m}, {k}]")
    warnings: list[str] = []
    tables = []
    for tname in SCHEMES:
        tiles = {s: derive_tiles(tname, *s) for s in shapes}
        bad = [s for s, t in tiles.items() if t is None]
        if bad:
            warnings.append(f"{tname}: the derive rule has no legal tiles for "
                            f"{', '.join(fmt_shape(s) for s in bad)}; no {tname} table written "
                            f"(the runtime falls back to its generic kernel)")
            continue
        src = (f"derived by `python3 -m codegen derive` (rule: {RULE_TEXT[tname]}); "
               f"shapes from {origin or 'the command line'}")
        tables.append(f"{tname}:")
        tables.append("  default:")
        tables.append(f"    source: {_yaml_str(src)}")
        tables.append("    kernels:")
        for (m, k), t in tiles.items():
            tables.append(f"      - {{m: {m}, k: {k}, block_m: {t['block_m']}, block_k: {t['block_k']}, "
                          f"simd_m: {t['simd_m']}}}")
    if not tables:
        raise ValueError("no target has legal tiles for every shape: " + " | ".join(warnings))
    notes = "Tiles derived by the rule of codegen/derive.py (see each table's source) for shapes no config covered."
    lines.append(f"notes: {_yaml_str(notes)}")
    return "\n".join(lines + tables) + "\n", warnings
