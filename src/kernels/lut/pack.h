/* pack.h — ternarization and the packers between ternary matrices and the stored layouts
 * I2_S, TL1 and TL2 (docs/LAYOUTS.md §2-4; formats.md). A ternary matrix here is int8 w[M*K],
 * row-major (row m = output m), values -1, 0, +1, plus one float scale per tensor.
 * Every packer has an unpacker; pack(unpack(x)) == x byte for byte (except the 28 tail bytes after
 * the scale, which packers write as zeros and unpackers ignore). */
#ifndef BITNET_PACK_H
#define BITNET_PACK_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Ternarize n floats as bitnet.cpp's converters do (formats.md "I2_S"):
 * s = 1 / max(mean|W|, 1e-5), w = clamp(round(W*s), -1, 1) (round half to even, as torch.round).
 * Returns the tensor scale max|w/s| = 1/s, or 0 when every weight rounds to 0. */
float bitnet_ternarize(const float *W, int64_t n, int8_t *w);

/* Check tiles for a TL1/TL2 weight of M rows, K columns against the kernel rules (the runtime mirror
 * of codegen/targets.py). BITNET_ERR_INVALID_ARG with a message naming M, K, the tile and the rule. */
bitnet_status bitnet_tiles_check(int type, int64_t M, int64_t K, bitnet_tiles tiles, bitnet_error *err);

/* Kernel view of a weight: fills three_k/two_k (TL2) or three_k = 0, two_k = K (TL1). */
bitnet_lut_shape bitnet_lut_shape_make(int type, int64_t M, int64_t K, bitnet_tiles tiles);

/* Sizes (bytes, including the 32-byte scale tail): bitnet_ternary_nbytes of the type traits (base/types.h). */
size_t bitnet_i2s_nbytes(int64_t M, int64_t K);
size_t bitnet_tl1_nbytes(int64_t M, int64_t K);
size_t bitnet_tl2_nbytes(int64_t M, int64_t K);
/* Byte offset of the float scale inside a packed tensor (bitnet_ternary_data_bytes: the TL2 rule for
 * TL2, the I2_S / TL1 rule M*K/4 otherwise). */
size_t bitnet_ternary_scale_offset(int type, int64_t M, int64_t K);

/* I2_S. M*K % 128 must be 0. unpack fails (BITNET_ERR_FORMAT, naming the flat index) on code 3.
 * Every unpacker accepts w == NULL: it then only checks the data (codes or nibbles, a finite scale) and
 * reads the scale, without the M*K bytes of output (how weights used in place are validated). */
bitnet_status bitnet_pack_i2s(const int8_t *w, int64_t M, int64_t K, float scale, uint8_t *dst, bitnet_error *err);
bitnet_status bitnet_unpack_i2s(const uint8_t *src, int64_t M, int64_t K, int8_t *w, float *scale, bitnet_error *err);

/* ---- The three I2_S byte layouts bitnet.cpp writes (bitnet_i2s_layout in base/common.h; LAYOUTS.md §2) ---- */

/* The layouts' names: bitnet_i2s_layout_name / _parse (base/types.h). */

/* The scalar reference of the layouts: the byte (offset from the tensor start) and the bit shift of the
 * 2-bit code of weight (m, k) of an M x K tensor (code = byte >> shift & 3; value = code - 1). With the
 * flat index j = m·K + k (formats.md "I2_S", bitnet.cpp's quantize_i2_s since commit 112f853):
 *   X86:   byte 32·(j / 128) + j % 32,           shift 6 − 2·((j % 128) / 32)
 *   ARM64: byte 16·(j / 64)  + j % 16,           shift 6 − 2·((j % 64) / 16)
 *   ROWS4: byte K·(m / 4) + k,                   shift 6 − 2·(m % 4)
 * Defined for 0 <= m < M, 0 <= k < K and a layout other than AUTO (AUTO reads as X86). */
void bitnet_i2s_locate(int layout, int64_t M, int64_t K, int64_t m, int64_t k, size_t *byte, int *shift);

/* Whether an M x K tensor can be held in `layout` and read by this runtime: M·K % 128 == 0 for every
 * layout (the runtime's X86 blocks; ARM64 needs % 64, which that implies), M % 4 == 0 for ROWS4
 * (bitnet.cpp's quantizer asserts it). BITNET_ERR_FORMAT naming M, K, the layout and the rule. */
bitnet_status bitnet_i2s_layout_check(int layout, int64_t M, int64_t K, bitnet_error *err);

/* Rewrite an I2_S tensor stored in `layout` as the X86 layout: dst (bitnet_i2s_nbytes(M, K) bytes, not
 * overlapping src) gets every code at its X86 place, the float scale at byte M·K/4 and 28 zero bytes.
 * Checks as bitnet_unpack_i2s does: a code 3 → BITNET_ERR_FORMAT naming the row and column (decoded
 * with `layout`), a scale that is not finite → BITNET_ERR_FORMAT; the rules of bitnet_i2s_layout_check.
 * Memory: none beyond dst. Time: one pass over the bytes. X86 (or AUTO) in → the checked copy. */
bitnet_status bitnet_i2s_relayout(int layout, const uint8_t *src, int64_t M, int64_t K, uint8_t *dst,
                                  bitnet_error *err);

/* TL1 / TL2 with the given tiles (checked with bitnet_tiles_check). unpack fails on nibbles that
 * no ternary group produces (TL1 > 8, TL2 index > 13). */
bitnet_status bitnet_pack_tl1(const int8_t *w, int64_t M, int64_t K, bitnet_tiles tiles, float scale, uint8_t *dst, bitnet_error *err);
bitnet_status bitnet_unpack_tl1(const uint8_t *src, int64_t M, int64_t K, bitnet_tiles tiles, int8_t *w, float *scale, bitnet_error *err);
bitnet_status bitnet_pack_tl2(const int8_t *w, int64_t M, int64_t K, bitnet_tiles tiles, float scale, uint8_t *dst, bitnet_error *err);
bitnet_status bitnet_unpack_tl2(const uint8_t *src, int64_t M, int64_t K, bitnet_tiles tiles, int8_t *w, float *scale, bitnet_error *err);

/* An x86-order I2_S tensor (src: bitnet_i2s_nbytes(M, K) bytes, LAYOUTS.md §2) repacked as TL1 or TL2
 * (`target`) with `tiles` into dst (bitnet_ternary_nbytes(target, M, K) bytes), tile by tile: each
 * BM-row tile is decoded into a BM·K-byte buffer and packed from there, so the memory in flight is one tile,
 * not the M·K bytes of bitnet_unpack_i2s + bitnet_pack_tl1/tl2, whose bytes it writes exactly (the same
 * streams, padding and scale). *scale (may be NULL) gets the tensor scale. Errors: those of
 * bitnet_unpack_i2s (code 3 naming the row and column, a scale that is not finite: BITNET_ERR_FORMAT) and of
 * the packers (tiles that break a rule); a target other than TL1/TL2 → BITNET_ERR_INVALID_ARG; no memory for
 * the tile → BITNET_ERR_NOMEM. dst may be partly written on error. */
bitnet_status bitnet_repack_i2s(const uint8_t *src, int64_t M, int64_t K, int target, bitnet_tiles tiles, uint8_t *dst,
                                float *scale, bitnet_error *err);

/* Pack one BM-row tile only: w_tile is [BM*K] (rows tile*BM .. tile*BM+BM-1 of the matrix, row-major);
 * writes exactly the bytes of that tile inside the full packed tensor dst (bitnet_tl1_nbytes /
 * bitnet_tl2_nbytes bytes; the scale, tail and TL2 padding are not touched). Tiles of one tensor are
 * disjoint, so several threads may pack different tiles into one dst; bitnet_pack_tl1/tl2 is this
 * for every tile, then the scale. Errors as the full packers, plus tile out of range. */
bitnet_status bitnet_pack_tl1_tile(const int8_t *w_tile, int64_t M, int64_t K, bitnet_tiles tiles, int64_t tile,
                                   uint8_t *dst, bitnet_error *err);
bitnet_status bitnet_pack_tl2_tile(const int8_t *w_tile, int64_t M, int64_t K, bitnet_tiles tiles, int64_t tile,
                                   uint8_t *dst, bitnet_error *err);

#ifdef __cplusplus
}
#endif

#endif
