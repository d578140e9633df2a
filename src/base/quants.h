/* quants.h — FP16 conversion, the Q8_0 and Q6_K block layouts and quantizers of token embeddings / output heads (ggml's
 * reference rules, so files match llama-quantize's) and the one activation quantizer every ternary
 * path shares (docs/LAYOUTS.md §1). */
#ifndef BITNET_QUANTS_H
#define BITNET_QUANTS_H

#include "base/common.h"
#include "base/types.h" /* the per-type traits: names, sizes, row → float */

#ifdef __cplusplus
extern "C" {
#endif

/* IEEE binary16 <-> binary32 (IEEE 754-2008 §3.6). Both are exact matches of the x86 F16C and AArch64
 * fcvt instructions for every input: to_fp32 is exact (NaNs keep sign and payload and become quiet);
 * to_fp16 rounds to nearest even (as vcvtps2ph with imm 0), overflows to ±inf from 65520 up, and
 * turns a NaN into a quiet NaN with the top 10 payload bits. */
float bitnet_fp16_to_fp32(uint16_t h);
uint16_t bitnet_fp32_to_fp16(float f);

/* Q8_0 block (ggml): 32 weights, one fp16 scale. value[j] = d · qs[j]. */
typedef struct bitnet_block_q8_0 {
    uint16_t d;      /* fp16 scale */
    int8_t qs[32];
} bitnet_block_q8_0;

/* Q6_K block (ggml's 6-bit k-quant; the published layout of block_q6_K): one super-block of 256 weights
 * in 16 groups of 16, 210 bytes. Weight i has a 6-bit code q (0..63) and the value
 * d · scales[i / 16] · (q − 32). Code bits: in each half h (weights 128h .. 128h+127, bytes ql[64h ..],
 * qh[32h ..]) and for l < 32, the weights l, l+32, l+64, l+96 of the half keep their low 4 bits in the
 * low nibble of ql[l], the low nibble of ql[l+32], the high nibble of ql[l], the high nibble of
 * ql[l+32], and their high 2 bits in bits 0-1, 2-3, 4-5, 6-7 of qh[l]. */
typedef struct bitnet_block_q6_k {
    uint8_t ql[128];   /* low 4 bits of the codes */
    uint8_t qh[64];    /* high 2 bits of the codes */
    int8_t scales[16]; /* per 16-weight group, in units of d */
    uint16_t d;        /* fp16 super-block scale */
} bitnet_block_q6_k;

#ifdef __cplusplus
static_assert(sizeof(bitnet_block_q8_0) == 34, "Q8_0 block is 2 + 32 bytes");
static_assert(sizeof(bitnet_block_q6_k) == 210, "Q6_K block is 128 + 64 + 16 + 2 bytes");
#else
_Static_assert(sizeof(bitnet_block_q8_0) == 34, "Q8_0 block is 2 + 32 bytes");
_Static_assert(sizeof(bitnet_block_q6_k) == 210, "Q6_K block is 128 + 64 + 16 + 2 bytes");
#endif

/* Quantize n floats (n % 32 == 0) to Q8_0 as ggml's reference quantizer does: d = max|x|/127 (stored
 * as fp16), q = round_half_away(x * (1/d)), q = 0 for an all-zero block. */
void bitnet_quantize_row_q8_0(const float *x, bitnet_block_q8_0 *dst, int64_t n);

/* Quantize n floats to n/256 Q6_K blocks, bit-identical to ggml's reference quantizer without an
 * importance matrix (quantize_row_q6_K_ref in ggml-quants.c, the rule llama-quantize uses for Q6_K;
 * checked byte for byte against ggml, see tests/test_quants.cc). Per 256-value super-block:
 *  1. each group of 16 gets a float scale s_g by ggml's make_qx_quants(16, nmax = 32, rmse_type 1):
 *     with m = the value of largest |x| (the first one on ties; |m| < 1e-15 → s_g = 0), codes
 *     l = clamp(round(iscale·x), −32, 31) for iscale = −32/m and for the 18 candidates
 *     iscale = −(32 + 0.1·k)/m, k = ±1..±9, weights w = x²; the candidate with the largest
 *     (Σwxl)²/Σwl² (strictly larger than the best so far, k in increasing order, −32/m first)
 *     gives s_g = Σwxl / Σwl²;
 *  2. s_max = the s_g of largest |s_g| (first on ties); |s_max| < 1e-15 → an all-zero block (d = 0);
 *     else d = fp16(1 / (−128/s_max)), scales[g] = min(127, round((−128/s_max)·s_g));
 *  3. each code q = clamp(round(x / (fp16→fp32(d)·scales[g])), −32, 31) + 32; a group whose
 *     fp16(d)·scales[g] is 0 keeps the codes of step 1 (they decode to 0).
 * round() is ggml's nearest_int: the low 23 bits of the float sum x + 1.5·2^23 minus 2^22 (round half
 * to even for |x| < 2^22), every float operation in single precision in ggml's order (this file is
 * built with -ffp-contract=off, as ggml's x86-64 build has no FMA). Values decode as
 * d · scales[g] · (q − 32); for finite input the error of a value whose x / (d·scales[g]) lies in
 * [−32.5, 31.5] is at most |d·scales[g]| / 2 (a value beyond is clamped to the nearest end).
 * x: [n] floats, dst: [n/256] blocks. BITNET_ERR_INVALID_ARG (nothing written) when n is negative
 * or not a multiple of 256. */
bitnet_status bitnet_quantize_row_q6_k(const float *x, bitnet_block_q6_k *dst, int64_t n, bitnet_error *err);

/* The 256 values of one Q6_K block (210 bytes at blk, any alignment; bitnet_block_q6_k's layout) into y[256],
 * by the format's definition: in each half of 128 values, for l < 32 the values l, l+32, l+64, l+96 take
 * ql[l] & 15, ql[l+32] & 15, ql[l] >> 4, ql[l+32] >> 4 as low bits and bit pairs 0-1, 2-3, 4-5, 6-7 of
 * qh[l] as high bits; value = (d · scales[g]) · (q − 32) in binary32, in that order (d·scales[g] is exact,
 * the second product rounds to nearest even), g the value's 16-value group. */
void bitnet_q6_k_block_to_f32(const uint8_t *blk, float *y);

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
