"""Kernel targets: the one table from target (TL1, TL2) to template, ISA, compiler flags, tile rules
and every number derived from a tile entry.

YAML holds choices (shapes, tiles, where they came from); this module holds decisions: which tiles are
legal for which kernel, the kernel names, and the derived numbers the templates loop over. Templates
receive `Kernel` objects and their `derived` dicts and do no arithmetic beyond base + i*stride.

Sources of the rules: ../shared/docs/design.md §2 (tile rules, int16 bounds), docs/LAYOUTS.md
(byte layouts this project's kernels read), ../shared/docs/formats.md (TL2 size formula).
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Callable

# --------------------------------------------------------------------------------------------
# Naming grammar (written down once; everything else calls these functions):
#   <target>_qgemm_m<M>_k<K>_bm<BM>_bk<BK>_sm<bm>__<isa>     specialized per-shape kernel
#   <target>_qgemm_generic__<isa>                           runtime-tiled kernel, same template
#   <target>_lut_ctor__<isa>                                LUT construction for one column
# e.g. tl2_qgemm_m2560_k6912_bm160_bk96_sm32__avx2. All exported symbols get the prefix "bitnet_".
# --------------------------------------------------------------------------------------------
SYMBOL_PREFIX = "bitnet_"


@dataclass(frozen=True)
class Violation:
    """One broken rule of one tile entry: field is a YAML key (m, k, block_m, block_k, simd_m)."""
    field: str
    value: object
    rule: str


@dataclass(frozen=True)
class Target:
    name: str                 # "tl1" | "tl2" (YAML key)
    ggml_type: str            # GGML type name
    type_id: int              # GGUF tensor type id (formats.md)
    isa: str                  # ISA suffix of kernel names
    template: str             # file in templates/
    output: str               # file in generated/
    guard: str                # C preprocessor condition under which the output compiles
    cmake_processor: str      # CMAKE_SYSTEM_PROCESSOR regex for which cflags apply
    cflags: tuple[str, ...]   # extra compiler flags for the output file on that processor
    simd_m_allowed: tuple[int, ...]
    block_k_max: int          # int16 accumulator bound (design.md §2)
    rules: Callable[[int, int, int, int, int], list[Violation]] = field(repr=False, compare=False)
    derive: Callable[[int, int, int, int, int], dict] = field(repr=False, compare=False)

    def kernel_name(self, m: int, k: int, block_m: int, block_k: int, simd_m: int) -> str:
        return f"{SYMBOL_PREFIX}{self.name}_qgemm_m{m}_k{k}_bm{block_m}_bk{block_k}_sm{simd_m}__{self.isa}"

    @property
    def generic_name(self) -> str:
        return f"{SYMBOL_PREFIX}{self.name}_qgemm_generic__{self.isa}"

    @property
    def ctor_name(self) -> str:
        return f"{SYMBOL_PREFIX}{self.name}_lut_ctor__{self.isa}"

    @property
    def type_macro(self) -> str:
        """The C enum constant of the GGUF type (src/base/common.h), e.g. BITNET_TYPE_TL2."""
        return f"BITNET_TYPE_{self.ggml_type}"

    def __str__(self) -> str:  # templates may write {{ kernel.target }} for the YAML name
        return self.name


def _common_rules(t_name: str, m: int, k: int, block_m: int, block_k: int, simd_m: int,
                  simd_m_allowed: tuple[int, ...], block_k_max: int) -> list[Violation]:
    v: list[Violation] = []
    for fname, val in (("m", m), ("k", k), ("block_m", block_m), ("block_k", block_k), ("simd_m", simd_m)):
        if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
            v.append(Violation(fname, val, "must be a positive integer"))
    if v:
        return v
    if simd_m not in simd_m_allowed:
        allowed = " or ".join(str(a) for a in simd_m_allowed)
        v.append(Violation("simd_m", simd_m, f"{t_name} kernels compute {allowed} rows per SIMD step"))
    if m % block_m != 0:
        v.append(Violation("block_m", block_m, f"m % block_m must be 0 (m = {m}, remainder {m % block_m})"))
    if block_m % simd_m != 0:
        v.append(Violation("block_m", block_m, f"block_m % simd_m must be 0 (simd_m = {simd_m})"))
    if block_k > block_k_max:
        v.append(Violation("block_k", block_k,
                           f"block_k <= {block_k_max}: the int16 accumulator of one block could overflow"))
    return v


def _tl1_rules(m: int, k: int, block_m: int, block_k: int, simd_m: int) -> list[Violation]:
    v = _common_rules("TL1", m, k, block_m, block_k, simd_m, (32, 64), 256)
    if any(x.rule == "must be a positive integer" for x in v):
        return v
    if k % block_k != 0:
        v.append(Violation("block_k", block_k, f"k % block_k must be 0 for TL1 (k = {k}, remainder {k % block_k})"))
    if simd_m in (32, 64):
        by = 256 // simd_m
        if block_k % by != 0:
            v.append(Violation("block_k", block_k,
                               f"block_k must be a multiple of {by} (the weights one TL1 step consumes with simd_m = {simd_m})"))
    return v


def _tl2_rules(m: int, k: int, block_m: int, block_k: int, simd_m: int) -> list[Violation]:
    v = _common_rules("TL2", m, k, block_m, block_k, simd_m, (32,), 255)
    if any(x.rule == "must be a positive integer" for x in v):
        return v
    if block_k % 24 != 0:
        v.append(Violation("block_k", block_k,
                           "block_k must be a multiple of 24 (the TL2 kernel consumes 8 groups of 3 per sign word; "
                           "block_k % 6 == 0 alone would silently drop weights)"))
    if (k % block_k) % 32 != 0:
        v.append(Violation("block_k", block_k,
                           f"(k % block_k) % 32 must be 0: the two-weight tail of K is processed 32 at a time "
                           f"(k = {k}, k % block_k = {k % block_k})"))
    if k < 256:
        v.append(Violation("k", k, "k >= 256: the TL2 tensor size formula of formats.md is defined with K - 256"))
    return v


def _tl1_derive(m: int, k: int, block_m: int, block_k: int, simd_m: int) -> dict:
    by = 256 // simd_m
    return {
        "by": by,                          # weights per 64-byte step of one micro tile
        "pairs_per_step": by // 2,
        "n_tiles": m // block_m,
        "n_k_blocks": k // block_k,
        "micro_tiles": block_m // simd_m,
        "steps_per_block": block_k // by,
        "tile_bytes": block_m * k // 4,    # packed bytes of one BM tile
        "block_bytes": block_m * block_k // 4,
        "qlut_bytes": 16 * k,              # LUT bytes per activation column (LAYOUTS.md §5)
        "weight_bytes": m * k // 4,
    }


def _tl2_derive(m: int, k: int, block_m: int, block_k: int, simd_m: int) -> dict:
    three_k = (k // block_k) * block_k
    two_k = k - three_k
    formula = (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8
    padded = (formula + 31) // 32 * 32
    return {
        "three_k": three_k,
        "two_k": two_k,
        "n_tiles": m // block_m,
        "n_k_blocks": three_k // block_k,          # three-part BK blocks
        "n_two_blocks": two_k // 32,               # two-part 32-wide blocks
        "micro_tiles": block_m // 32,
        "groups_per_block": block_k // 3,
        "index_steps_per_block": block_k // 6,     # 32-byte index loads per micro tile and block
        "sign_words_per_block": block_k // 24,     # 32-byte sign loads per micro tile and block
        "index_bytes": three_k * m // 6,           # stream sizes (LAYOUTS.md §4)
        "sign_bytes": three_k * m // 24,
        "two_bytes": two_k * m // 4,
        "sign_offset": three_k * m // 6,
        "two_offset": three_k * m // 6 + three_k * m // 24,
        "index_tile_bytes": block_m * three_k // 6,  # per BM tile, inside each stream
        "sign_tile_bytes": block_m * three_k // 24,
        "two_tile_bytes": block_m * two_k // 4,
        "qlut_bytes": 32 * (three_k // 3 + two_k // 2),
        "weight_bytes": padded,                    # scale sits here
        "tensor_bytes": padded + 32,
    }


TARGETS: dict[str, Target] = {
    "tl1": Target(
        name="tl1", ggml_type="TL1", type_id=38, isa="neon",
        template="tl1_neon.c.j2", output="bitnet-lut-kernels-tl1-neon.c",
        guard="defined(__aarch64__) && defined(__ARM_NEON)",
        cmake_processor="^(aarch64|arm64|ARM64)$", cflags=(),
        simd_m_allowed=(32, 64), block_k_max=256,
        rules=_tl1_rules, derive=_tl1_derive,
    ),
    "tl2": Target(
        name="tl2", ggml_type="TL2", type_id=39, isa="avx2",
        template="tl2_avx2.c.j2", output="bitnet-lut-kernels-tl2-avx2.c",
        guard="defined(__x86_64__) || defined(_M_X64)",
        cmake_processor="^(x86_64|AMD64|amd64)$", cflags=("-mavx2", "-mfma", "-mf16c"),
        simd_m_allowed=(32,), block_k_max=255,
        rules=_tl2_rules, derive=_tl2_derive,
    ),
}


def native_target() -> str | None:
    """The LUT target the runtime uses on this machine: tl2 on x86-64, tl1 on AArch64, else None.

    Decided from platform.machine() alone (docs/ARCHITECTURE.md "Runtime rules": x86 runs TL2,
    AArch64 runs TL1); used by setup_env.py and utils/generate-dummy-bitnet-model.py to pick the
    config table and tiles for the machine they run on.
    """
    m = platform.machine().lower()
    if m in ("x86_64", "amd64"):
        return "tl2"
    if m in ("aarch64", "arm64"):
        return "tl1"
    return None
