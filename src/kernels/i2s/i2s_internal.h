/* i2s_internal.h — private to src/kernels/i2s/: the per-ISA versions of bitnet_i2s_gemm (one file each:
 * i2s_portable.c, i2s_avx2.c, i2s_avx512.c, i2s_neon.c), which i2s.c lists and chooses from. Each has the
 * contract of bitnet_i2s_gemm_fn (i2s.h). The x86 versions carry function target attributes (their files
 * are compiled without -mavx2) and may only be called after bitnet_cpu_supports said yes for their ISA. */
#ifndef BITNET_I2S_INTERNAL_H
#define BITNET_I2S_INTERNAL_H

#include "kernels/i2s/i2s.h"

#if defined(__x86_64__) || defined(__i386__)
#define BITNET_I2S_HAVE_AVX2 1
#endif
#if defined(__aarch64__)
#define BITNET_I2S_HAVE_NEON 1
#endif

/* Columns handled together by the SIMD kernels: the weight codes of a run are extracted once and
 * used for up to this many activation columns. */
#define BITNET_I2S_COL_TILE 4

/* Plain C11 for every CPU (32-bit indices, byte loads; whole 128-weight blocks a byte at a time, partial
 * runs where rows straddle blocks): any K; the last version of i2s.c's table and the fallback of the SIMD
 * versions for K % 32 != 0. */
void bitnet_i2s_gemm__portable(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                               const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                               size_t acc_stride);

#ifdef BITNET_I2S_HAVE_AVX2
#include <immintrin.h>

/* Σ of the 8 int32 lanes of v (the AVX2 and AVX-512 versions' horizontal sum). */
__attribute__((target("avx2,fma"))) static inline int32_t bitnet_i2s_hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* AVX2 (+FMA): K % 32 == 0 in SIMD, other K via the portable version. */
void bitnet_i2s_gemm__avx2(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                            const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                            size_t acc_stride);

/* AVX-VNNI (256-bit vpdpbusd, VEX): the AVX2 version's loop with dot-product instructions (i2s_avx2.c). */
void bitnet_i2s_gemm__avxvnni(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                              const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                              size_t acc_stride);

/* AVX-512 F/BW/VL/VNNI: 1..3 and >= 16 columns; other column counts and K % 32 != 0 via the AVX2 version. */
void bitnet_i2s_gemm__avx512(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                            const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                            size_t acc_stride);

/* bitnet_quantize_act + bitnet_i2s_qsum in AVX2, bit-identical to them (i2s_avx2.c). */
float bitnet_i2s_quantize_act__avx2(const float *x, int64_t K, int8_t *q, int32_t *qsum);
#endif

#ifdef BITNET_I2S_HAVE_NEON
/* NEON (base AArch64, no dot-product extension): K % 32 == 0 in SIMD, other K via the portable version. */
void bitnet_i2s_gemm__neon(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                            const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                            size_t acc_stride);
#endif

#endif
