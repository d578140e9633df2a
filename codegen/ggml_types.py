"""Tensor type facts, once for all Python code: GGUF type ids and names, block sizes, and the byte size
of a tensor of each type (the C side's copy is src/base/types.c; tests/codegen/test_type_facts.py checks that the two agree).

Sources: block sizes of the ggml types from ggml's type traits (public format facts); bitnet.cpp's
ternary ids (I2_S 36, I8_S 37, TL1 38, TL2 39) and their byte sizes from ../shared/docs/formats.md
("Byte size of one tensor"). Used by codegen/gguf_reader.py, codegen/targets.py (TL1/TL2 derived
sizes), setup_env.py and tests/reference/bitnet_ref.py.
"""
from __future__ import annotations

# id -> (name, elements per block, bytes per block); None sizes: the ternary types sized below.
_TYPES: dict[int, tuple[str, int | None, int | None]] = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144), 13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    36: ("I2_S", None, None), 37: ("I8_S", None, None), 38: ("TL1", None, None), 39: ("TL2", None, None),
}

TYPE_NAMES: dict[int, str] = {tid: name for tid, (name, _, _) in _TYPES.items()}   # 39 -> "TL2"
TYPE_IDS: dict[str, int] = {name: tid for tid, name in TYPE_NAMES.items()}          # "TL2" -> 39
TYPE_F32, TYPE_F16, TYPE_Q8_0, TYPE_Q6_K, TYPE_BF16 = 0, 1, 8, 14, 30
TYPE_I2_S, TYPE_TL1, TYPE_TL2 = TYPE_IDS["I2_S"], TYPE_IDS["TL1"], TYPE_IDS["TL2"]

TENSOR_SCALE_BYTES = 32   # the scale tail after the packed weights of I2_S, TL1 and TL2 (formats.md)

# The shapes a ternary type can hold: M*K a multiple of `unit` (0: no rule) and K >= `min_k` (the TL2
# formula is defined with K - 256). The same rules as src/base/types.c's ternary rows.
_TERNARY_SHAPE_RULES: dict[int, tuple[int, int]] = {TYPE_I2_S: (128, 1), TYPE_TL1: (4, 1), TYPE_TL2: (0, 256)}


def block_size(type_id: int) -> tuple[int, int] | None:
    """(elements per block, bytes per block) of a block type, or None (ternary or unknown type)."""
    info = _TYPES.get(type_id)
    if info is None or info[1] is None:
        return None
    return info[1], info[2]


def tl2_weight_bytes(m: int, k: int) -> int:
    """Packed TL2 weight bytes of an M x K weight before the 32-byte scale tail (k >= 256):
    pad32((K - 256) * M / 3 * 5 / 8 + 256 * M / 2 * 4 / 8), integer arithmetic in exactly that order
    (formats.md, "Byte size of one tensor")."""
    formula = (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8
    return (formula + 31) // 32 * 32


def nbytes(type_id: int, ne: tuple[int, ...]) -> int | None:
    """Bytes of one tensor's data with dimensions ne (ne[0] fastest, i.e. K of a weight), or None for
    a type whose size is not known here (I8_S, unknown ids).

    I2_S and TL1: n/4 + 32; TL2: tl2_weight_bytes(M, K) + 32; block types: n/block * block_bytes.
    Raises ValueError when ne[0] is not a multiple of the type's block size, or a ternary type cannot
    hold the shape (not 2-D, M*K not a multiple of 128 for I2_S / 4 for TL1, K < 256 for TL2).
    """
    n = 1
    for d in ne:
        n *= d
    if type_id in _TERNARY_SHAPE_RULES:
        unit, min_k = _TERNARY_SHAPE_RULES[type_id]
        if len(ne) != 2:
            raise ValueError(f"{TYPE_NAMES[type_id]} tensor must be 2-D [K, M], got {len(ne)} dimensions")
        if unit and n % unit != 0:
            raise ValueError(f"{TYPE_NAMES[type_id]} tensor {list(ne)}: M*K = {n} is not a multiple of {unit}")
        if ne[0] < min_k:
            raise ValueError(f"{TYPE_NAMES[type_id]} tensor {list(ne)}: K = {ne[0]} must be >= {min_k}")
    if type_id in (TYPE_I2_S, TYPE_TL1):
        return n // 4 + TENSOR_SCALE_BYTES
    if type_id == TYPE_TL2:
        k = ne[0]
        m = n // k if k else 0
        return tl2_weight_bytes(m, k) + TENSOR_SCALE_BYTES
    bs = block_size(type_id)
    if bs is None:
        return None
    block, size = bs
    if ne and ne[0] % block != 0:
        raise ValueError(f"ne[0] = {ne[0]} is not a multiple of the {TYPE_NAMES[type_id]} block size {block}")
    return n // block * size


def tensor_nbytes(type_name: str, m: int, k: int) -> int:
    """Bytes of an M x K weight (M rows, K per row) of type `type_name` ("TL2", "I2_S", "Q8_0", ...),
    scale tail included. Raises KeyError for an unknown name, ValueError for a size not known here
    or K not a multiple of the block size."""
    size = nbytes(TYPE_IDS[type_name], (k, m))
    if size is None:
        raise ValueError(f"the byte size of {type_name} tensors is not known")
    return size
