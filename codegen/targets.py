"""Kernel targets: the schemes (TL1, TL2: tile rules, derived numbers, tensor sizes), the ISAs (NEON,
AVX2, AVX-512, portable C: kernel-name suffix, C guard, compiler flags) and the table of (scheme, ISA) pairs that
have a template. A kernel target is one pair; every generated kernel file is one pair's template rendered.

YAML holds choices (shapes, tiles per scheme, where they came from); this module holds decisions: which
tiles are legal for which scheme, the kernel names, and the derived numbers the templates loop over.
Templates receive `Kernel` objects and their `derived` dicts and do no arithmetic beyond base + i*stride.
A config's table for a scheme yields kernels for every ISA of that scheme (PAIRS).

Adding an ISA for an existing scheme: one row in ISAS, one row in PAIRS, one template (and, when the C
side does not know the ISA's name yet, one row in src/kernels/isa.c: its BITNET_ISA rank and CPU check).

Sources of the rules: ../shared/docs/design.md §2 (tile rules, int16 bounds), docs/LAYOUTS.md
(byte layouts this project's kernels read), ../shared/docs/formats.md (TL2 size formula, via
codegen/ggml_types.py).
"""
from __future__ import annotations

import platform
from dataclasses import dataclass, field
from typing import Callable

from . import ggml_types

# --------------------------------------------------------------------------------------------
# Naming grammar (written down once; everything else calls these functions):
#   <scheme>_qgemm_m<M>_k<K>_bm<BM>_bk<BK>_sm<bm>__<isa>     specialized per-shape kernel
#   <scheme>_qgemm_generic__<isa>                           runtime-tiled kernel, same template
#   <scheme>_lut_ctor__<isa>                                LUT construction for one column
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
class Scheme:
    """A LUT weight scheme (the YAML key of its tables): the layout, its tile rules and derived numbers."""
    name: str                 # "tl1" | "tl2" (YAML key, CLI --target, symbol names)
    ggml_type: str            # GGML type name (codegen/ggml_types.py)
    layouts_section: int      # docs/LAYOUTS.md section of the packed layout
    simd_m_allowed: tuple[int, ...]
    block_k_max: int          # int16 accumulator bound (design.md §2)
    ctor_three_k: str         # what the LUT constructor does with its three_k argument (header comment)
    kernel_note_keys: tuple[str, ...]   # derived numbers the header names in each kernel's comment
    default_rule_text: str    # the default tile rule in words (codegen derive writes it into `source:`)
    rule_fn: Callable[[int, int, int, int, int], list[Violation]] = field(repr=False, compare=False)
    derive: Callable[[int, int, int, int, int], dict] = field(repr=False, compare=False)
    # the default rule's block_k for K (None: no legal one); block_m and simd_m are common (derive.py)
    default_block_k: Callable[[int], int | None] = field(repr=False, compare=False)
    # the block_k values `codegen tune` tries for K (before the rules filter them)
    search_block_ks: Callable[[int], list[int]] = field(repr=False, compare=False)

    @property
    def type_id(self) -> int:
        """GGUF tensor type id (formats.md)."""
        return ggml_types.TYPE_IDS[self.ggml_type]

    @property
    def type_macro(self) -> str:
        """The C enum constant of the GGUF type (src/base/common.h), e.g. BITNET_TYPE_TL2."""
        return f"BITNET_TYPE_{self.ggml_type}"

    def violations(self, m: int, k: int, block_m: int, block_k: int, simd_m: int) -> list[Violation]:
        """Every tile rule the entry (M, K, BM, BK, bm) breaks; empty when legal."""
        return self.rule_fn(m, k, block_m, block_k, simd_m)

    def tensor_bytes(self, m: int, k: int) -> int:
        """Bytes of a packed M x K weight of this scheme, scale tail included (formats.md)."""
        return ggml_types.tensor_nbytes(self.ggml_type, m, k)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Isa:
    """An instruction set kernels are written for."""
    name: str                 # kernel-name suffix and the name src/kernels/isa.c checks (bitnet_cpu_supports)
    guard: str                # C preprocessor condition under which its code compiles
    cmake_processor: str      # CMAKE_SYSTEM_PROCESSOR regex for which cflags apply
    cflags: tuple[str, ...]   # extra compiler flags for its files on that processor

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Target:
    """A kernel target: one (scheme, ISA) pair, its template and its output file."""
    scheme: Scheme
    isa: Isa
    template: str             # file in templates/
    output: str               # file in generated/

    @property
    def key(self) -> str:
        """"<scheme>-<isa>", e.g. "tl2-avx2"."""
        return f"{self.scheme.name}-{self.isa.name}"

    def kernel_name(self, m: int, k: int, block_m: int, block_k: int, simd_m: int) -> str:
        return (f"{SYMBOL_PREFIX}{self.scheme.name}_qgemm_m{m}_k{k}_bm{block_m}_bk{block_k}_sm{simd_m}"
                f"__{self.isa.name}")

    @property
    def generic_name(self) -> str:
        return f"{SYMBOL_PREFIX}{self.scheme.name}_qgemm_generic__{self.isa.name}"

    @property
    def ctor_name(self) -> str:
        return f"{SYMBOL_PREFIX}{self.scheme.name}_lut_ctor__{self.isa.name}"

    def __str__(self) -> str:
        return self.key


# The largest M or K: the registry's tile fields (bitnet_tiles in src/base/common.h) are int32_t and block_m
# can be M; with both <= 2^31 - 1, M*K fits the int64_t sizes of the C side.
DIM_MAX = 2**31 - 1


def _common_rules(t_name: str, m: int, k: int, block_m: int, block_k: int, simd_m: int,
                  simd_m_allowed: tuple[int, ...], block_k_max: int) -> list[Violation]:
    v: list[Violation] = []
    for fname, val in (("m", m), ("k", k), ("block_m", block_m), ("block_k", block_k), ("simd_m", simd_m)):
        if not isinstance(val, int) or isinstance(val, bool) or val <= 0:
            v.append(Violation(fname, val, "must be a positive integer"))
    if v:
        return v
    for fname, val in (("m", m), ("k", k)):
        if val > DIM_MAX:
            v.append(Violation(fname, val, f"{fname} <= {DIM_MAX}: the generated C keeps block_m in an int32 field "
                                           f"and M*K in int64"))
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
    return {
        "by": 256 // simd_m,               # weights per row per 64-byte step of one micro tile
        "n_tiles": m // block_m,
        "qlut_bytes": 16 * k,              # LUT bytes per activation column (LAYOUTS.md §5)
        "weight_bytes": ggml_types.tensor_nbytes("TL1", m, k) - ggml_types.TENSOR_SCALE_BYTES,
    }


def _tl2_derive(m: int, k: int, block_m: int, block_k: int, simd_m: int) -> dict:
    three_k = (k // block_k) * block_k
    two_k = k - three_k
    return {
        "three_k": three_k,
        "two_k": two_k,
        "n_tiles": m // block_m,
        "qlut_bytes": 32 * (three_k // 3 + two_k // 2),
        "tensor_bytes": ggml_types.tensor_nbytes("TL2", m, k),   # scale tail included
    }


def largest_dividing_multiple(n: int, step: int, limit: int) -> int | None:
    """The largest multiple of step, <= limit, that divides n; None when there is none."""
    for cand in range(limit - limit % step, 0, -step):
        if n % cand == 0:
            return cand
    return None


def _tl1_default_block_k(k: int) -> int | None:
    return largest_dividing_multiple(k, 8, 256) if k % 8 == 0 else None


def _tl2_default_block_k(k: int) -> int | None:
    if k < 256:
        return None
    if (k % 96) % 32 == 0:
        return 96
    return next((bk for bk in range(240, 0, -24) if (k % bk) % 32 == 0), None)


def _tl1_search_block_ks(k: int) -> list[int]:
    ks = [bk for bk in range(32, 256 + 1, 32) if k % bk == 0]
    return ks or [bk for bk in range(4, 256 + 1, 4) if k % bk == 0]


def _tl2_search_block_ks(k: int) -> list[int]:
    return list(range(24, 255 + 1, 24))


SCHEMES: dict[str, Scheme] = {
    "tl1": Scheme(
        name="tl1", ggml_type="TL1", layouts_section=3,
        simd_m_allowed=(32, 64), block_k_max=256,
        ctor_three_k="three_k is ignored (TL1 has no three-weight part).",
        kernel_note_keys=(),
        default_rule_text="simd_m 32; block_m = largest multiple of 32 dividing M, <= 256; "
                          "block_k = largest multiple of 8 dividing K, <= 256",
        rule_fn=_tl1_rules, derive=_tl1_derive,
        default_block_k=_tl1_default_block_k, search_block_ks=_tl1_search_block_ks,
    ),
    "tl2": Scheme(
        name="tl2", ggml_type="TL2", layouts_section=4,
        simd_m_allowed=(32,), block_k_max=255,
        ctor_three_k="three_k = floor(K / BK) * BK: the part of K grouped by three (the rest pairs, TL1 style).",
        kernel_note_keys=("three_k", "two_k"),
        default_rule_text="simd_m 32; block_m = largest multiple of 32 dividing M, <= 256; block_k = 96 if "
                          "(K % 96) % 32 == 0, else the largest multiple of 24 <= 240 with (K % block_k) % 32 == 0",
        rule_fn=_tl2_rules, derive=_tl2_derive,
        default_block_k=_tl2_default_block_k, search_block_ks=_tl2_search_block_ks,
    ),
}

ISAS: dict[str, Isa] = {
    "neon": Isa(name="neon", guard="defined(__aarch64__) && defined(__ARM_NEON)",
                cmake_processor="^(aarch64|arm64|ARM64)$", cflags=()),
    "avx2": Isa(name="avx2", guard="defined(__x86_64__) || defined(_M_X64)",
                cmake_processor="^(x86_64|AMD64|amd64)$", cflags=("-mavx2", "-mfma", "-mf16c")),
    # AVX-512 F/BW/VL (src/kernels/isa.c's "avx512" also requires VNNI, which the I2_S kernels use); a TL2
    # kernel file that needs VBMI checks it at run time and marks those functions target("avx512vbmi")
    "avx512": Isa(name="avx512", guard="defined(__x86_64__) || defined(_M_X64)",
                  cmake_processor="^(x86_64|AMD64|amd64)$",
                  cflags=("-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512vl")),
    # plain C11 integer code for 32-bit cores (Cortex-M4F, Xtensa LX7) that compiles on every target: the
    # fallback of every scheme where no SIMD ISA runs (src/kernels/isa.c ranks it with "scalar")
    "portable": Isa(name="portable", guard="1", cmake_processor=".*", cflags=()),
}

# (scheme, ISA) -> template in templates/, output file in generated/. Order: the registry's row order;
# list a scheme's ISAs best first, since bitnet_lut_select takes the first row the CPU runs.
PAIRS: tuple[Target, ...] = (
    Target(SCHEMES["tl1"], ISAS["neon"], template="tl1_neon.c.j2", output="bitnet-lut-kernels-tl1-neon.c"),
    Target(SCHEMES["tl1"], ISAS["portable"], template="tl1_portable.c.j2",
           output="bitnet-lut-kernels-tl1-portable.c"),
    Target(SCHEMES["tl2"], ISAS["avx512"], template="tl2_avx512.c.j2",
           output="bitnet-lut-kernels-tl2-avx512.c"),
    Target(SCHEMES["tl2"], ISAS["avx2"], template="tl2_avx2.c.j2", output="bitnet-lut-kernels-tl2-avx2.c"),
    Target(SCHEMES["tl2"], ISAS["portable"], template="tl2_portable.c.j2",
           output="bitnet-lut-kernels-tl2-portable.c"),
)


def targets_of(scheme: str) -> list[Target]:
    """The (scheme, ISA) pairs of one scheme, in PAIRS order."""
    return [t for t in PAIRS if t.scheme.name == scheme]


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
