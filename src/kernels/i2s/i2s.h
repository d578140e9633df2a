/* i2s.h — I2_S × int8 products for the I2_S reference path of the matmul host (src/kernels/i2s/: the
 * dispatch in i2s.c, one file per version: i2s_portable.c, i2s_avx2.c (AVX2 and AVX-VNNI), i2s_avx512.c, i2s_neon.c):
 * exact int32 sums Σ_k w[m][k]·q[n][k] read straight from the I2_S layout (docs/LAYOUTS.md §2,
 * formats.md "I2_S"), in a portable C (for 32-bit cores and every CPU), an AVX2, an AVX-VNNI, an AVX-512 VNNI and a
 * NEON version chosen at run time (best the CPU runs; BITNET_ISA=scalar|avx2|avxvnni|avx512 caps the choice,
 * see bitnet_cpu_supports in kernels/isa.h).
 * The AVX-512 version (AVX-512 F/BW/VL/VNNI) multiplies unsigned codes 0..2 by the int8 activations
 * with vpdpbusd and subtracts Σ q: for 1 to 3 columns straight from the packed bytes (masks instead of
 * shifts, 256-bit), for 16 or more after decoding 4 rows × up to 16384 weights to one byte per code on
 * the stack (64 KiB) and reusing them for every column in 4-row × 4-column 512-bit register blocks;
 * 4..15 columns run the AVX2 kernel, which measured faster there.
 *
 * Rows that straddle 128-weight blocks (K % 128 ≠ 0, e.g. K = 8640) are handled in place, without
 * repacking: the kernels walk the tensor by flat index j = m·K + k. A 128-weight block holds four
 * runs of 32 consecutive weights (run r = bits 7-2r .. 6-2r of the block's 32 bytes), so when
 * K % 32 == 0 every row is a whole number of such runs and the SIMD kernels process one run (or one
 * aligned block of four runs) per step; for other K the portable kernel is used. */
#ifndef BITNET_I2S_H
#define BITNET_I2S_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows [m0, m1) of an I2_S weight times n_cols int8 activation columns:
 *   acc[n*acc_stride + (m - m0)] = Σ_{k<K} w[m][k] · q[n*q_stride + k]     (exact, written)
 * w: packed I2_S tensor base (M·K/4 code bytes; M·K % 128 == 0; codes 0..2 — code 3 gives
 *    (3 − 1)·q, the transform rejects such files); q: int8 (any value −128..127);
 * qsum: NULL or qsum[n] = Σ_k q[n*q_stride + k] (bitnet_i2s_qsum), which saves the AVX2 kernel
 *    recomputing it (it computes Σ code·q − Σ q with _mm256_maddubs_epi16 on codes 0..2);
 * strides in elements. |acc| ≤ 128·K, so K < 2^24 keeps it in int32.
 * Bit-exact with bitnet_ref_gemm(BITNET_TYPE_I2_S, ...) for every version. */
typedef void (*bitnet_i2s_gemm_fn)(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                                   const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                                   size_t acc_stride);

/* The best version this CPU runs (AVX-512 on x86 when bitnet_cpu_supports("avx512"), else AVX-VNNI when
 * bitnet_cpu_supports("avxvnni"), else AVX2 when bitnet_cpu_supports("avx2"), NEON on AArch64, else portable C); the choice is made on the first call
 * (reading BITNET_ISA then) and cached. */
void bitnet_i2s_gemm(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                     const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride);

/* One version by ISA name ("portable", "avx2", "avxvnni", "avx512", "neon"); NULL when it is not compiled into this
 * build or the CPU does not run it (or BITNET_ISA caps it away), and for other names. */
bitnet_i2s_gemm_fn bitnet_i2s_gemm_for_isa(const char *isa);

/* ISA name of the version bitnet_i2s_gemm uses: "avx512", "avxvnni", "avx2", "neon" or "portable". */
const char *bitnet_i2s_isa(void);

/* Σ_k q[k] over K int8 values (exact). */
int32_t bitnet_i2s_qsum(const int8_t *q, int64_t K);

/* bitnet_quantize_act (LAYOUTS.md §1: s = 127 / max(max|x|, 1e-5), q = clamp(round-half-even(x·s),
 * ±127), NaN → 0) of one column x[K] into q[K], and *qsum = Σ q (bitnet_i2s_qsum) in the same pass.
 * Returns s. Uses AVX2 when bitnet_i2s_isa() is "avx2", "avxvnni" or "avx512"; q, s and qsum are bit-identical
 * to the scalar functions on every input (tests/test_i2s.cc). */
float bitnet_i2s_quantize_act(const float *x, int64_t K, int8_t *q, int32_t *qsum);

#ifdef __cplusplus
}
#endif

#endif
