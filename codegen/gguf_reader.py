"""A small, bounds-checked reader for the metadata part of a GGUF file: header, key/value pairs and
tensor infos. Tensor data is never read, only checked to lie inside the file.

Format: GGUF v2/v3 as specified in https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
(little-endian; magic "GGUF", uint32 version, uint64 tensor count, uint64 KV count, KV pairs,
tensor infos, padding to `general.alignment` (default 32), data section). bitnet.cpp's own type ids
(I2_S 36, TL1 38, TL2 39) and their byte sizes come from ../shared/docs/formats.md.

Every read is checked against the file size, every count against what the remaining bytes could
hold, so a truncated or corrupt file raises GGUFError (naming the file and what was being read)
instead of allocating huge lists or reading past the end.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field

from . import ggml_types

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4           # GGML_MAX_DIMS

# GGUF metadata value types (gguf.md, "gguf_metadata_value_type").
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, \
    T_UINT64, T_INT64, T_FLOAT64 = range(13)

_SCALAR = {  # type -> (struct format, byte size)
    T_UINT8: ("<B", 1), T_INT8: ("<b", 1), T_UINT16: ("<H", 2), T_INT16: ("<h", 2),
    T_UINT32: ("<I", 4), T_INT32: ("<i", 4), T_FLOAT32: ("<f", 4), T_BOOL: ("<B", 1),
    T_UINT64: ("<Q", 8), T_INT64: ("<q", 8), T_FLOAT64: ("<d", 8),
}

# Tensor type ids, names and byte sizes: codegen/ggml_types.py (re-exported for this reader's users).
TYPE_I2_S, TYPE_TL1, TYPE_TL2 = ggml_types.TYPE_I2_S, ggml_types.TYPE_TL1, ggml_types.TYPE_TL2
TYPE_NAMES = ggml_types.TYPE_NAMES


class GGUFError(ValueError):
    """A file that is not a readable GGUF; the message names the file and the offending part."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor-info record. ne[0] is the fastest dimension (K of a weight), ne[1] its rows (M)."""
    name: str
    ne: tuple[int, ...]
    type: int
    offset: int            # relative to the start of the data section
    nbytes: int | None     # None when the type's size is unknown to this reader

    @property
    def type_name(self) -> str:
        return TYPE_NAMES.get(self.type, f"type {self.type}")


@dataclass
class GGUFFile:
    path: str
    version: int
    kv: dict[str, object] = field(default_factory=dict)
    kv_types: dict[str, int] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)
    alignment: int = DEFAULT_ALIGNMENT
    data_offset: int = 0
    file_size: int = 0

    def tensor(self, name: str) -> TensorInfo | None:
        for t in self.tensors:
            if t.name == name:
                return t
        return None


def tensor_nbytes(type_id: int, ne: tuple[int, ...]) -> int | None:
    """Bytes of one tensor's data, or None for a type whose size is not known: ggml_types.nbytes."""
    return ggml_types.nbytes(type_id, ne)


class _Cursor:
    """Sequential little-endian reads over a buffer with a bounds check on every read."""

    def __init__(self, buf, size: int, path: str):
        self.buf, self.size, self.path, self.pos = buf, size, path, 0

    def fail(self, what: str) -> GGUFError:
        return GGUFError(f"{self.path}: {what} (at byte {self.pos} of {self.size})")

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(f"truncated: {what} needs {n} bytes, {self.size - self.pos} left")

    def scalar(self, vtype: int, what: str):
        fmt, n = _SCALAR[vtype]
        self.need(n, what)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        if vtype == T_BOOL:
            if v > 1:
                raise self.fail(f"{what}: bool value {v} is neither 0 nor 1")
            return bool(v)
        return v

    def u32(self, what: str) -> int:
        return self.scalar(T_UINT32, what)

    def u64(self, what: str) -> int:
        return self.scalar(T_UINT64, what)

    def string(self, what: str) -> str:
        n = self.u64(f"length of {what}")
        self.need(n, what)
        raw = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} is not valid UTF-8 ({e.reason} at byte {e.start})") from None

    def value(self, vtype: int, what: str, depth: int = 0):
        if vtype in _SCALAR:
            return self.scalar(vtype, what)
        if vtype == T_STRING:
            return self.string(what)
        if vtype == T_ARRAY:
            if depth > 2:
                raise self.fail(f"{what}: arrays nested deeper than 3 levels")
            etype = self.u32(f"element type of {what}")
            count = self.u64(f"element count of {what}")
            if etype in _SCALAR:
                esize = _SCALAR[etype][1]
                self.need(count * esize, f"{count} elements of {what}")
                if etype == T_BOOL:
                    return [self.scalar(etype, f"{what}[{i}]") for i in range(count)]
                fmt = "<" + str(count) + _SCALAR[etype][0][1]
                vals = list(struct.unpack_from(fmt, self.buf, self.pos))
                self.pos += count * esize
                return vals
            if etype in (T_STRING, T_ARRAY):
                # each element needs at least 8 bytes (a length or a type + count)
                self.need(count * 8, f"{count} elements of {what}")
                return [self.value(etype, f"{what}[{i}]", depth + 1) for i in range(count)]
            raise self.fail(f"{what}: unknown array element type {etype}")
        raise self.fail(f"{what}: unknown value type {vtype}")


def read_gguf(path: str | os.PathLike) -> GGUFFile:
    """Read the header, KV pairs and tensor infos of a GGUF v2/v3 file (gguf.md).

    Checks: magic, version (2 or 3), every length and count against the file size, n_dims <= 4,
    positive dimensions, unique tensor names, `general.alignment` a power of two, tensor offsets
    aligned, and every tensor of a known type lying inside the file (catches truncated files).
    Raises GGUFError naming the file and the key/tensor/offset at fault; OSError for I/O problems.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise GGUFError(f"{path}: empty file, not a GGUF")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _parse(mm, size, path)


def _parse(buf, size: int, path: str) -> GGUFFile:
    c = _Cursor(buf, size, path)
    c.need(4, "magic")
    magic = bytes(buf[0:4])
    if magic != GGUF_MAGIC:
        raise GGUFError(f"{path}: not a GGUF file (magic {magic!r}, expected b'GGUF')")
    c.pos = 4
    version = c.u32("version")
    if version not in (2, 3):
        raise GGUFError(f"{path}: unsupported GGUF version {version} (this reader handles 2 and 3)")
    n_tensors = c.u64("tensor count")
    n_kv = c.u64("KV count")
    # a KV pair needs >= 8 + 4 bytes, a tensor info >= 8 + 4 + 4 + 8 bytes
    if n_kv * 12 > size or n_tensors * 24 > size:
        raise GGUFError(f"{path}: header claims {n_tensors} tensors and {n_kv} KV pairs, "
                        f"more than a {size}-byte file can hold")
    g = GGUFFile(path=path, version=version, file_size=size)
    for i in range(n_kv):
        key = c.string(f"key of KV pair {i}")
        if key in g.kv:
            raise c.fail(f"duplicate key '{key}'")
        vtype = c.u32(f"value type of '{key}'")
        g.kv[key] = c.value(vtype, f"value of '{key}'")
        g.kv_types[key] = vtype
    if "general.alignment" in g.kv:
        a = g.kv["general.alignment"]
        if not isinstance(a, int) or isinstance(a, bool) or a <= 0 or a & (a - 1):
            raise GGUFError(f"{path}: general.alignment = {a!r} is not a positive power of two")
        g.alignment = a
    names: set[str] = set()
    infos = []
    for i in range(n_tensors):
        name = c.string(f"name of tensor {i}")
        if name in names:
            raise c.fail(f"duplicate tensor name '{name}'")
        names.add(name)
        n_dims = c.u32(f"n_dims of tensor '{name}'")
        if not 1 <= n_dims <= MAX_DIMS:
            raise c.fail(f"tensor '{name}': n_dims = {n_dims}, expected 1..{MAX_DIMS}")
        ne = tuple(c.u64(f"ne[{d}] of tensor '{name}'") for d in range(n_dims))
        if any(d == 0 or d > 1 << 40 for d in ne):
            raise c.fail(f"tensor '{name}': dimensions {list(ne)} out of range")
        ttype = c.u32(f"type of tensor '{name}'")
        offset = c.u64(f"offset of tensor '{name}'")
        infos.append((name, ne, ttype, offset))
    g.data_offset = (c.pos + g.alignment - 1) // g.alignment * g.alignment
    data_size = size - g.data_offset
    for name, ne, ttype, offset in infos:
        if offset % g.alignment:
            raise GGUFError(f"{path}: tensor '{name}': offset {offset} is not a multiple of the "
                            f"alignment {g.alignment}")
        try:
            nbytes = tensor_nbytes(ttype, ne)
        except ValueError as e:
            raise GGUFError(f"{path}: tensor '{name}' ({TYPE_NAMES.get(ttype, ttype)}): {e}") from None
        end = offset + (nbytes if nbytes is not None else 1)
        if end > data_size:
            raise GGUFError(f"{path}: truncated: tensor '{name}' ({TYPE_NAMES.get(ttype, f'type {ttype}')}, "
                            f"ne {list(ne)}) ends at data byte {end}, the data section has {max(data_size, 0)} bytes")
        g.tensors.append(TensorInfo(name, ne, ttype, offset, nbytes))
    return g
