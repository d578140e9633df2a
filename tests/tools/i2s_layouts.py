"""A small packer of the tests' own that writes an I2_S GGUF file in one of bitnet.cpp's three byte layouts,
from the layouts' formulas alone (../shared/docs/formats.md "I2_S"; bitnet.cpp's quantize_i2_s since commit
112f853), independent of the C code (src/kernels/lut/pack.c): every I2_S tensor of an x86-layout file is
decoded by the x86 formula and packed again by the asked one. Codes -1 -> 0, 0 -> 1, +1 -> 2 in every layout;
flat index j = m*K + k:

  x86:   128-weight blocks, weight j -> byte 32*(j // 128) + j % 32, bits 7-2*((j % 128) // 32) ..
  arm64:  64-weight blocks, weight j -> byte 16*(j // 64) + j % 16,  bits 7-2*((j % 64) // 16) ..
  rows4: rows in groups of 4, byte K*g + k = w[4g][k] << 6 | w[4g+1][k] << 4 | w[4g+2][k] << 2 | w[4g+3][k]

The scale (byte M*K/4) and everything else in the file are kept byte for byte, and nothing records the
layout: the output is what bitnet.cpp's quantizer writes on ARM (arm64) or in an x86 build without
ACT_PARALLEL (rows4). An input that records its layout (bitnet.i2s.layout, our writers' key) is refused: its
kept header would then name a layout the output does not hold.

    python3 tests/tools/i2s_layouts.py IN.gguf OUT.gguf --layout arm64|rows4|x86

Needs numpy (Debian's python3-numpy). Exit status 0 written, 1 on a file it cannot repack.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from codegen import gguf_reader  # noqa: E402  (tensor offsets and shapes only)

LAYOUTS = ("x86", "arm64", "rows4")


def decode_x86(data, n):
    """The n codes (0, 1, 2) of x86-layout bytes, in flat order."""
    blocks = np.frombuffer(data, dtype=np.uint8, count=n // 4).reshape(-1, 32)
    codes = np.stack([(blocks >> (6 - 2 * q)) & 3 for q in range(4)], axis=1)  # [block][q][p] = code 32q+p
    return codes.reshape(-1)


def pack(codes, m, k, layout):
    """codes (flat, m*k) packed in `layout`: m*k/4 bytes."""
    c = codes.astype(np.uint8)
    if layout == "x86":
        g = c.reshape(-1, 4, 32)
    elif layout == "arm64":
        g = c.reshape(-1, 4, 16)
    else:
        if m % 4:
            raise ValueError(f"rows4 needs M % 4 == 0, got M = {m}")
        g = c.reshape(m // 4, 4, k)
    return (g[:, 0] << 6 | g[:, 1] << 4 | g[:, 2] << 2 | g[:, 3]).astype(np.uint8).tobytes()


def repack_file(src, dst, layout):
    """Writes dst: src with every I2_S tensor (stored in the x86 layout) repacked in `layout`. Returns the
    number of I2_S tensors."""
    info = gguf_reader.read_gguf(src)
    if "bitnet.i2s.layout" in info.kv:  # the header is kept: the output would claim a layout it does not hold
        raise ValueError(f"{src} records its I2_S layout (bitnet.i2s.layout = {info.kv['bitnet.i2s.layout']!r}); "
                         "this packer writes files as bitnet.cpp does, without a record: give it a file without "
                         "one (bitnet-dummy --no-layout-record)")
    with open(src, "rb") as f:
        buf = bytearray(f.read())
    n_i2s = 0
    for t in info.tensors:
        if t.type != gguf_reader.TYPE_I2_S:
            continue
        k = t.ne[0]
        m = 1
        for d in t.ne[1:]:
            m *= d
        n = m * k
        if n % 128:
            raise ValueError(f"{t.name}: M*K = {n} is not a multiple of 128")
        off = info.data_offset + t.offset
        codes = decode_x86(bytes(buf[off:off + n // 4]), n)
        if (codes == 3).any():
            raise ValueError(f"{t.name}: code 3 in the x86 input")
        buf[off:off + n // 4] = pack(codes, m, k, layout)
        n_i2s += 1
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf)
    os.replace(tmp, dst)
    return n_i2s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--layout", choices=LAYOUTS, required=True)
    a = ap.parse_args(argv)
    try:
        n = repack_file(a.src, a.dst, a.layout)
    except (OSError, ValueError, gguf_reader.GGUFError) as e:
        print(f"i2s_layouts.py: {e}", file=sys.stderr)
        return 1
    print(f"i2s_layouts.py: wrote {a.dst}: {n} I2_S tensors in the {a.layout} layout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
