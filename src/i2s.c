/* i2s.c — I2_S × int8 dot products (scalar, AVX2, NEON) for the I2_S reference path of the matmul
 * host; contract in i2s.h, layout in docs/LAYOUTS.md §2 / formats.md "I2_S".
 *
 * Layout facts used here: weight j of the flattened tensor (j = m·K + k) lives in block j / 128
 * (32 bytes), byte j % 32, bits 7-2r .. 6-2r with r = (j % 128) / 32; code c means w = c − 1.
 * So "run" G = j / 32 (32 consecutive weights) is (block[G / 4] >> (6 − 2·(G % 4))) & 3, byte by
 * byte. With K % 32 == 0 each row is the runs G = m·K/32 .. m·K/32 + K/32 − 1, whatever the block
 * boundaries are: rows that straddle blocks need no special case and no repacking.
 *
 * This file is compiled without -mavx2: the AVX2 kernel carries __attribute__((target("avx2,fma")))
 * and only runs after bitnet_cpu_supports("avx2") said yes. */
#include "i2s.h"

#include <stdatomic.h>
#include <string.h>

#include "lut.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BITNET_I2S_HAVE_AVX2 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define BITNET_I2S_HAVE_NEON 1
#endif

/* Columns handled together by the SIMD kernels: the weight codes of a run are extracted once and
 * used for up to this many activation columns. */
#define BITNET_I2S_COL_TILE 4

int32_t bitnet_i2s_qsum(const int8_t *q, int64_t K) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += q[k];
    return s;
}

/* ---- scalar ---------------------------------------------------------------------------------- */

/* Code (0..3) of flat weight j. */
static inline int bitnet_i2s_code_at(const uint8_t *w, int64_t j) {
    return (w[((j >> 7) << 5) | (j & 31)] >> (6 - 2 * ((j >> 5) & 3))) & 3;
}

static void bitnet_i2s_gemm__scalar(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                                    const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                                    size_t acc_stride) {
    (void)M;
    (void)qsum;
    for (int64_t n = 0; n < n_cols; ++n) {
        const int8_t *qn = q + (size_t)n * q_stride;
        int32_t *an = acc + (size_t)n * acc_stride;
        for (int64_t m = m0; m < m1; ++m) {
            int32_t s = 0;
            if (K % 32 == 0) {
                /* run by run: a fixed shift over 32 bytes (the compiler vectorizes this) */
                const int64_t G0 = m * (K / 32);
                for (int64_t g = 0; g < K / 32; ++g) {
                    const int64_t G = G0 + g;
                    const uint8_t *b = w + (G >> 2) * 32;
                    const int sh = 6 - 2 * (int)(G & 3);
                    const int8_t *qg = qn + g * 32;
                    int32_t t = 0;
                    for (int i = 0; i < 32; ++i) t += (((b[i] >> sh) & 3) - 1) * qg[i];
                    s += t;
                }
            } else {
                const int64_t j0 = m * K;
                for (int64_t k = 0; k < K; ++k) s += (bitnet_i2s_code_at(w, j0 + k) - 1) * qn[k];
            }
            an[m - m0] = s;
        }
    }
}

/* ---- AVX2 ------------------------------------------------------------------------------------ */

#ifdef BITNET_I2S_HAVE_AVX2
__attribute__((target("avx2,fma"))) static inline int32_t bitnet_i2s_hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Σ code·q with _mm256_maddubs_epi16(codes, q): codes are unsigned 0..3, q signed, so each int16
 * pair sum is at most 2·3·128 = 768 in magnitude (no saturation); four of them (one block) stay below
 * 3072 before _mm256_madd_epi16 widens to int32. Then Σ w·q = Σ code·q − Σ q. */
__attribute__((target("avx2,fma"))) static void
bitnet_i2s_gemm__avx2(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                      const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride) {
    if (K % 32 != 0) {
        bitnet_i2s_gemm__scalar(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
        return;
    }
    const __m256i mask = _mm256_set1_epi8(3);
    const __m256i ones16 = _mm256_set1_epi16(1);
    const int64_t n_runs = K / 32;

    for (int64_t n0 = 0; n0 < n_cols; n0 += BITNET_I2S_COL_TILE) {
        const int nc = (int)(n_cols - n0 < BITNET_I2S_COL_TILE ? n_cols - n0 : BITNET_I2S_COL_TILE);
        const int8_t *qc[BITNET_I2S_COL_TILE];
        int32_t qs[BITNET_I2S_COL_TILE];
        for (int c = 0; c < nc; ++c) {
            qc[c] = q + (size_t)(n0 + c) * q_stride;
            qs[c] = qsum ? qsum[n0 + c] : bitnet_i2s_qsum(qc[c], K);
        }
        for (int64_t m = m0; m < m1; ++m) {
            __m256i av[BITNET_I2S_COL_TILE];
            for (int c = 0; c < nc; ++c) av[c] = _mm256_setzero_si256();
            int64_t G = m * n_runs; /* global run index */
            int64_t g = 0;          /* run index within the row */
            while (g < n_runs) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (G >> 2) * 32));
                if ((G & 3) == 0 && g + 4 <= n_runs) {
                    /* a whole block: four runs from one load */
                    const __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(v, 6), mask);
                    const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
                    const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(v, 2), mask);
                    const __m256i c3 = _mm256_and_si256(v, mask);
                    for (int c = 0; c < nc; ++c) {
                        const int8_t *qp = qc[c] + g * 32;
                        __m256i p = _mm256_maddubs_epi16(c0, _mm256_loadu_si256((const __m256i *)qp));
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c1, _mm256_loadu_si256((const __m256i *)(qp + 32))));
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c2, _mm256_loadu_si256((const __m256i *)(qp + 64))));
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c3, _mm256_loadu_si256((const __m256i *)(qp + 96))));
                        av[c] = _mm256_add_epi32(av[c], _mm256_madd_epi16(p, ones16));
                    }
                    G += 4;
                    g += 4;
                } else {
                    /* a single run (row start or end inside a block) */
                    const __m128i sh = _mm_cvtsi32_si128(6 - 2 * (int)(G & 3));
                    const __m256i cx = _mm256_and_si256(_mm256_srl_epi16(v, sh), mask);
                    for (int c = 0; c < nc; ++c) {
                        const __m256i qv = _mm256_loadu_si256((const __m256i *)(qc[c] + g * 32));
                        av[c] = _mm256_add_epi32(av[c], _mm256_madd_epi16(_mm256_maddubs_epi16(cx, qv), ones16));
                    }
                    G += 1;
                    g += 1;
                }
            }
            for (int c = 0; c < nc; ++c)
                acc[(size_t)(n0 + c) * acc_stride + (size_t)(m - m0)] = bitnet_i2s_hsum_avx2(av[c]) - qs[c];
        }
    }
}
#endif

/* ---- NEON ------------------------------------------------------------------------------------ */

#ifdef BITNET_I2S_HAVE_NEON
/* w = code − 1 as int8 (−1, 0, +1; code 3 gives 2), products by widening multiplies vmull_s8 /
 * vmlal_high_s8 (no dot-product extension needed): one int16 lane sums 4 products of magnitude ≤ 256,
 * then vpadalq_s16 widens to int32. */
static inline int32x4_t bitnet_i2s_run_neon(int32x4_t a, int8x16_t w0, int8x16_t w1, const int8_t *qp) {
    const int8x16_t q0 = vld1q_s8(qp), q1 = vld1q_s8(qp + 16);
    int16x8_t p = vmull_s8(vget_low_s8(w0), vget_low_s8(q0));
    p = vmlal_high_s8(p, w0, q0);
    p = vmlal_s8(p, vget_low_s8(w1), vget_low_s8(q1));
    p = vmlal_high_s8(p, w1, q1);
    return vpadalq_s16(a, p);
}

static void bitnet_i2s_gemm__neon(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                                  const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                                  size_t acc_stride) {
    if (K % 32 != 0) {
        bitnet_i2s_gemm__scalar(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
        return;
    }
    const uint8x16_t mask = vdupq_n_u8(3), one = vdupq_n_u8(1);
    const int64_t n_runs = K / 32;

    for (int64_t n0 = 0; n0 < n_cols; n0 += BITNET_I2S_COL_TILE) {
        const int nc = (int)(n_cols - n0 < BITNET_I2S_COL_TILE ? n_cols - n0 : BITNET_I2S_COL_TILE);
        const int8_t *qc[BITNET_I2S_COL_TILE];
        for (int c = 0; c < nc; ++c) qc[c] = q + (size_t)(n0 + c) * q_stride;
        for (int64_t m = m0; m < m1; ++m) {
            int32x4_t av[BITNET_I2S_COL_TILE];
            for (int c = 0; c < nc; ++c) av[c] = vdupq_n_s32(0);
            int64_t G = m * n_runs;
            int64_t g = 0;
            while (g < n_runs) {
                const uint8_t *b = w + (G >> 2) * 32;
                const uint8x16_t v0 = vld1q_u8(b), v1 = vld1q_u8(b + 16);
                if ((G & 3) == 0 && g + 4 <= n_runs) {
#define BITNET_I2S_NEON_RUN(r, SH)                                                                         \
    do {                                                                                                   \
        const int8x16_t w0 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(v0, SH), mask), one));       \
        const int8x16_t w1 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshrq_n_u8(v1, SH), mask), one));       \
        for (int c = 0; c < nc; ++c) av[c] = bitnet_i2s_run_neon(av[c], w0, w1, qc[c] + (g + (r)) * 32);   \
    } while (0)
                    BITNET_I2S_NEON_RUN(0, 6);
                    BITNET_I2S_NEON_RUN(1, 4);
                    BITNET_I2S_NEON_RUN(2, 2);
                    {
                        const int8x16_t w0 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(v0, mask), one));
                        const int8x16_t w1 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(v1, mask), one));
                        for (int c = 0; c < nc; ++c) av[c] = bitnet_i2s_run_neon(av[c], w0, w1, qc[c] + (g + 3) * 32);
                    }
#undef BITNET_I2S_NEON_RUN
                    G += 4;
                    g += 4;
                } else {
                    const int8x16_t sh = vdupq_n_s8((int8_t)(-(6 - 2 * (int)(G & 3))));
                    const int8x16_t w0 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshlq_u8(v0, sh), mask), one));
                    const int8x16_t w1 = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(vshlq_u8(v1, sh), mask), one));
                    for (int c = 0; c < nc; ++c) av[c] = bitnet_i2s_run_neon(av[c], w0, w1, qc[c] + g * 32);
                    G += 1;
                    g += 1;
                }
            }
            for (int c = 0; c < nc; ++c)
                acc[(size_t)(n0 + c) * acc_stride + (size_t)(m - m0)] = vaddvq_s32(av[c]);
        }
    }
}
#endif

/* ---- dispatch -------------------------------------------------------------------------------- */

typedef struct bitnet_i2s_version {
    const char *isa;
    bitnet_i2s_gemm_fn fn;
} bitnet_i2s_version;

/* Best first; "scalar" is last and always runs. */
static const bitnet_i2s_version bitnet_i2s_versions[] = {
#ifdef BITNET_I2S_HAVE_AVX2
    {"avx2", bitnet_i2s_gemm__avx2},
#endif
#ifdef BITNET_I2S_HAVE_NEON
    {"neon", bitnet_i2s_gemm__neon},
#endif
    {"scalar", bitnet_i2s_gemm__scalar},
};
#define BITNET_I2S_N_VERSIONS (sizeof(bitnet_i2s_versions) / sizeof(bitnet_i2s_versions[0]))

bitnet_i2s_gemm_fn bitnet_i2s_gemm_for_isa(const char *isa) {
    if (isa == NULL) return NULL;
    for (size_t i = 0; i < BITNET_I2S_N_VERSIONS; ++i)
        if (strcmp(isa, bitnet_i2s_versions[i].isa) == 0)
            return (i + 1 == BITNET_I2S_N_VERSIONS || bitnet_cpu_supports(isa)) ? bitnet_i2s_versions[i].fn : NULL;
    return NULL;
}

/* 0 = not chosen yet, else index + 1 into bitnet_i2s_versions. Racing first calls choose the same. */
static atomic_int bitnet_i2s_choice = 0;

static const bitnet_i2s_version *bitnet_i2s_chosen(void) {
    int c = atomic_load_explicit(&bitnet_i2s_choice, memory_order_relaxed);
    if (c == 0) {
        size_t i = 0;
        while (i + 1 < BITNET_I2S_N_VERSIONS && !bitnet_cpu_supports(bitnet_i2s_versions[i].isa)) ++i;
        c = (int)i + 1;
        atomic_store_explicit(&bitnet_i2s_choice, c, memory_order_relaxed);
    }
    return &bitnet_i2s_versions[c - 1];
}

const char *bitnet_i2s_isa(void) {
    return bitnet_i2s_chosen()->isa;
}

void bitnet_i2s_gemm(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                     const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride) {
    bitnet_i2s_chosen()->fn(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
}
