/* i2s_avx2.c — the AVX2 I2_S × int8 product (bitnet_i2s_gemm__avx2) and the AVX2 activation
 * quantizer (bitnet_i2s_quantize_act__avx2); contract in i2s.h, layout in docs/LAYOUTS.md §2.

 * Layout facts used here: weight j of the flattened tensor (j = m·K + k) lives in block j / 128
 * (32 bytes), byte j % 32, bits 7-2r .. 6-2r with r = (j % 128) / 32; code c means w = c − 1.
 * So "run" G = j / 32 (32 consecutive weights) is (block[G / 4] >> (6 − 2·(G % 4))) & 3, byte by
 * byte. With K % 32 == 0 each row is the runs G = m·K/32 .. m·K/32 + K/32 − 1, whatever the block
 * boundaries are: rows that straddle blocks need no special case and no repacking.
 *
 * This file is compiled without -mavx2: the functions carry __attribute__((target("avx2,fma"))) and
 * only run after bitnet_cpu_supports("avx2") said yes. On other targets it compiles to nothing. */
#include "kernels/i2s/i2s_internal.h"

#ifdef BITNET_I2S_HAVE_AVX2
#include <immintrin.h>
#include <math.h>

/* The per-block and per-run dot products of the two versions below. codes: unsigned 0..3 in bytes;
 * qp: 32 (run) or 128 (block) int8 activations; the result is acc + Σ code·q in 8 int32 lanes. */

/* AVX2: _mm256_maddubs_epi16(codes, q) — each int16 pair sum is at most 2·3·128 = 768 in magnitude (no
 * saturation), four of them (one block) stay below 3072 — then _mm256_madd_epi16 widens to int32. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256i
i2s_block_avx2(__m256i acc, __m256i c0, __m256i c1, __m256i c2, __m256i c3, const int8_t *qp) {
    __m256i p = _mm256_maddubs_epi16(c0, _mm256_loadu_si256((const __m256i *)qp));
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c1, _mm256_loadu_si256((const __m256i *)(qp + 32))));
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c2, _mm256_loadu_si256((const __m256i *)(qp + 64))));
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c3, _mm256_loadu_si256((const __m256i *)(qp + 96))));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

__attribute__((target("avx2,fma"), always_inline)) static inline __m256i i2s_run_avx2(__m256i acc, __m256i cx,
                                                                                     const int8_t *qp) {
    const __m256i p = _mm256_maddubs_epi16(cx, _mm256_loadu_si256((const __m256i *)qp));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

/* AVX-VNNI: _mm256_dpbusd_avx_epi32 (unsigned codes times signed q, four adjacent products summed into
 * an int32 lane, no saturation). The block's sum starts from 0, so the loop-carried chain through acc is
 * one add, not four vpdpbusd latencies (which made GEMV 3x slower than the AVX2 loop). */
__attribute__((target("avx2,fma,avxvnni"), always_inline)) static inline __m256i
i2s_block_avxvnni(__m256i acc, __m256i c0, __m256i c1, __m256i c2, __m256i c3, const int8_t *qp) {
    __m256i a = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), c0, _mm256_loadu_si256((const __m256i *)qp));
    a = _mm256_dpbusd_avx_epi32(a, c1, _mm256_loadu_si256((const __m256i *)(qp + 32)));
    a = _mm256_dpbusd_avx_epi32(a, c2, _mm256_loadu_si256((const __m256i *)(qp + 64)));
    a = _mm256_dpbusd_avx_epi32(a, c3, _mm256_loadu_si256((const __m256i *)(qp + 96)));
    return _mm256_add_epi32(acc, a);
}

__attribute__((target("avx2,fma,avxvnni"), always_inline)) static inline __m256i
i2s_run_avxvnni(__m256i acc, __m256i cx, const int8_t *qp) {
    return _mm256_dpbusd_avx_epi32(acc, cx, _mm256_loadu_si256((const __m256i *)qp));
}

/* The body of both versions: up to BITNET_I2S_COL_TILE columns at a time, row by row, a whole block
 * (four runs from one load) where the row covers one, else single runs (a row starting or ending inside
 * a block); then Σ w·q = Σ code·q − Σ q. BLOCK and RUN are the functions above. A macro, not a function,
 * because each version is compiled for its own target. */
#define I2S_AVX2_GEMM_BODY(BLOCK, RUN)                                                                          \
    do {                                                                                                       \
        if (K % 32 != 0) {                                                                                     \
            bitnet_i2s_gemm__portable(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);           \
            return;                                                                                            \
        }                                                                                                      \
        const __m256i mask = _mm256_set1_epi8(3);                                                              \
        const int64_t n_runs = K / 32;                                                                         \
        for (int64_t n0 = 0; n0 < n_cols; n0 += BITNET_I2S_COL_TILE) {                                         \
            const int nc = (int)(n_cols - n0 < BITNET_I2S_COL_TILE ? n_cols - n0 : BITNET_I2S_COL_TILE);       \
            const int8_t *qc[BITNET_I2S_COL_TILE];                                                             \
            int32_t qs[BITNET_I2S_COL_TILE];                                                                   \
            for (int c = 0; c < nc; ++c) {                                                                     \
                qc[c] = q + (size_t)(n0 + c) * q_stride;                                                       \
                qs[c] = qsum ? qsum[n0 + c] : bitnet_i2s_qsum(qc[c], K);                                       \
            }                                                                                                  \
            for (int64_t m = m0; m < m1; ++m) {                                                                \
                __m256i av[BITNET_I2S_COL_TILE];                                                               \
                for (int c = 0; c < nc; ++c) av[c] = _mm256_setzero_si256();                                   \
                int64_t G = m * n_runs, g = 0; /* global run index, run index within the row */                \
                while (g < n_runs) {                                                                           \
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (G >> 2) * 32));                \
                    if ((G & 3) == 0 && g + 4 <= n_runs) {                                                     \
                        const __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(v, 6), mask);                    \
                        const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);                    \
                        const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(v, 2), mask);                    \
                        const __m256i c3 = _mm256_and_si256(v, mask);                                          \
                        for (int c = 0; c < nc; ++c) av[c] = BLOCK(av[c], c0, c1, c2, c3, qc[c] + g * 32);     \
                        G += 4;                                                                                \
                        g += 4;                                                                                \
                    } else {                                                                                   \
                        const __m128i sh = _mm_cvtsi32_si128(6 - 2 * (int)(G & 3));                            \
                        const __m256i cx = _mm256_and_si256(_mm256_srl_epi16(v, sh), mask);                    \
                        for (int c = 0; c < nc; ++c) av[c] = RUN(av[c], cx, qc[c] + g * 32);                   \
                        G += 1;                                                                                \
                        g += 1;                                                                                \
                    }                                                                                          \
                }                                                                                              \
                for (int c = 0; c < nc; ++c)                                                                   \
                    acc[(size_t)(n0 + c) * acc_stride + (size_t)(m - m0)] = bitnet_i2s_hsum_avx2(av[c]) - qs[c]; \
            }                                                                                                  \
        }                                                                                                      \
    } while (0)

__attribute__((target("avx2,fma"))) void
bitnet_i2s_gemm__avx2(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                      const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride) {
    I2S_AVX2_GEMM_BODY(i2s_block_avx2, i2s_run_avx2);
}

/* The AVX-VNNI version (256-bit VEX vpdpbusd, on CPUs that have it with or without AVX-512): the same
 * body with dot-product instructions; the int32 sums are the same exact integers. */
__attribute__((target("avx2,fma,avxvnni"))) void
bitnet_i2s_gemm__avxvnni(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                         const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride) {
    I2S_AVX2_GEMM_BODY(i2s_block_avxvnni, i2s_run_avxvnni);
}

/* bitnet_quantize_act + bitnet_i2s_qsum with the same operations per element: max|x| is exact in any
 * order and skips NaN as the scalar loop does (MAXPS returns its second operand, the running max, when
 * the first is NaN); s is computed by the same expression; x·s is one IEEE multiply; ROUNDPS with
 * _MM_FROUND_TO_NEAREST_INT is round-half-even as nearbyintf in the default mode; NaN products map to 0
 * and the rest clamp to ±127 before the exact float → int conversion. */
__attribute__((target("avx2,fma"))) float bitnet_i2s_quantize_act__avx2(const float *x, int64_t K, int8_t *q,
                                                                               int32_t *qsum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask), vmax);
    float lanes[8];
    _mm256_storeu_ps(lanes, vmax);
    float amax = 0.0f;
    for (int i = 0; i < 8; ++i)
        if (lanes[i] > amax) amax = lanes[i];
    for (; k < K; ++k) {
        const float a = fabsf(x[k]);
        if (a > amax) amax = a;
    }
    const float s = 127.0f / (amax > 1e-5f ? amax : 1e-5f);

    const __m256 vs = _mm256_set1_ps(s), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i vsum = _mm256_setzero_si256();
    k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i i32[4];
        for (int v = 0; v < 4; ++v) {
            __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * v), vs),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN → 0 */
            r = _mm256_max_ps(_mm256_min_ps(r, hi), lo);
            i32[v] = _mm256_cvtps_epi32(r);
        }
        const __m256i p01 = _mm256_packs_epi32(i32[0], i32[1]); /* int16, lanes interleaved */
        const __m256i p23 = _mm256_packs_epi32(i32[2], i32[3]);
        vsum = _mm256_add_epi32(vsum, _mm256_madd_epi16(_mm256_add_epi16(p01, p23), ones16));
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order);
        _mm256_storeu_si256((__m256i *)(q + k), b);
    }
    int32_t sums[8];
    _mm256_storeu_si256((__m256i *)sums, vsum);
    int32_t total = 0;
    for (int i = 0; i < 8; ++i) total += sums[i];
    for (; k < K; ++k) {
        float r = nearbyintf(x[k] * s);
        if (r > 127.0f) r = 127.0f;
        else if (r < -127.0f) r = -127.0f;
        else if (!(r == r)) r = 0.0f;
        q[k] = (int8_t)r;
        total += q[k];
    }
    *qsum = total;
    return s;
}
#else
typedef int bitnet_i2s_avx2_not_built; /* keeps the translation unit non-empty */
#endif
