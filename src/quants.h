/* quants.h — per-type facts (names, byte sizes), FP16 conversion, dense row conversion
 * (F32/F16/Q8_0 → F32) and the one activation quantizer every ternary path shares
 * (docs/LAYOUTS.md §1). */
#ifndef BITNET_QUANTS_H
#define BITNET_QUANTS_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* IEEE binary16 <-> binary32 (IEEE 754-2008 §3.6). Both are exact matches of the x86 F16C and AArch64
 * fcvt instructions for every input: to_fp32 is exact (NaNs keep sign and payload and become quiet);
 * to_fp16 rounds to nearest even (as vcvtps2ph with imm 0), overflows to ±inf from 65520 up, and
 * turns a NaN into a quiet NaN with the top 10 payload bits. */
float bitnet_fp16_to_fp32(uint16_t h);
uint16_t bitnet_fp32_to_fp16(float f);

/* "F32", "F16", "Q8_0", "I2_S", "TL1", "TL2", ...; "unknown" for ids this build does not know. */
const char *bitnet_type_name(int type);

/* true for I2_S, TL1, TL2 */
bool bitnet_type_is_ternary(int type);

/* Q8_0 block (ggml): 32 weights, one fp16 scale. */
typedef struct bitnet_block_q8_0 {
    uint16_t d;      /* fp16 scale */
    int8_t qs[32];
} bitnet_block_q8_0;

/* Byte size of a tensor of `type` with n_dims dims ne[0..n_dims-1] (ne[0] fastest).
 * Block types need ne[0] % block == 0. Ternary types are 2-D [K, M] with the sizes of formats.md:
 * I2_S and TL1 M*K/4 + 32; TL2 pad32((K-256)*M/3*5/8 + 256*M/2*4/8) + 32.
 * Errors: BITNET_ERR_UNSUPPORTED for an unknown type id (message names the id),
 * BITNET_ERR_FORMAT for a shape the type cannot hold (names the dimension), overflow. */
bitnet_status bitnet_type_nbytes(int type, int n_dims, const int64_t *ne, size_t *out, bitnet_error *err);

/* Convert n elements of one row of a dense type (F32, F16, BF16, Q8_0) to float. row may be unaligned.
 * BITNET_ERR_UNSUPPORTED for other types; n must be a multiple of the block size. */
bitnet_status bitnet_row_to_f32(int type, const void *row, float *dst, int64_t n, bitnet_error *err);

/* Quantize n floats (n % 32 == 0) to Q8_0 as ggml's reference quantizer does: d = max|x|/127 (stored
 * as fp16), q = round_half_away(x * (1/d)), q = 0 for an all-zero block. */
void bitnet_quantize_row_q8_0(const float *x, bitnet_block_q8_0 *dst, int64_t n);

/* The activation quantizer of docs/LAYOUTS.md §1 (formats.md, I2_S activations):
 * s = 127 / max(max|x|, 1e-5); q[k] = clamp(round_half_even(x[k]*s), -127, 127). Returns s.
 * Non-finite input (not expected from a sane model) is defined, not UB: NaN entries are skipped by the
 * max and give q = 0; an infinite max gives s = 0 and q = 0 everywhere.
 * x: [K] floats; q: [K]. Every SIMD LUT constructor must produce exactly these q and s. */
float bitnet_quantize_act(const float *x, int64_t K, int8_t *q);

#ifdef __cplusplus
}
#endif

#endif
