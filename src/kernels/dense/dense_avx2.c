/* dense_avx2.c — the AVX2 (+F16C) versions of the F16 and Q8_0 dot products (dense.h has their
 * contracts: same lanes, same fold, same floats as the scalar versions in dense.c). This file is
 * compiled without -mavx2: the functions carry function target attributes and only run after
 * bitnet_cpu_supports("avx2") said yes. On other targets it compiles to nothing. */
#include "kernels/dense/dense_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* lanes 8j..8j+7 in accumulator j; AVX2 CPUs have F16C (bitnet_cpu_supports("avx2") checks both) */
__attribute__((target("avx2,f16c"))) float bitnet_dense_dot_f16__avx2(const uint16_t *a, const float *b, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int64_t n32 = n - n % 32;
    for (int64_t i = 0; i < n32; i += 32) {
        for (int j = 0; j < 4; j++) {
            const __m256 va = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8 * j)));
            acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(va, _mm256_loadu_ps(b + i + 8 * j)));
        }
    }
    /* bitnet_dense_dot_f16_finish's fold on whole vectors (the same additions lane by lane): lanes (l, l+16) are
     * acc[0]+acc[2] and acc[1]+acc[3], then (l, l+8), then (l, l+4) across the 128-bit halves */
    const __m256 h16 = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    const __m128 f4 = _mm_add_ps(_mm256_castps256_ps128(h16), _mm256_extractf128_ps(h16, 1));
    float s[4];
    _mm_storeu_ps(s, f4);
    double sum = (double)((s[0] + s[1]) + (s[2] + s[3]));
    for (int64_t i = n32; i < n; i++) sum += (double)(bitnet_dense_f16(a[i]) * b[i]);
    return (float)sum;
}

/* VCVTPS2PH with round-to-nearest-even and exceptions suppressed: bitnet_fp32_to_fp16's rounding,
 * overflow to infinity, subnormals and quiet-NaN payloads (tests/test_dense.cc compares them). */
#define F16_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

__attribute__((target("avx2,f16c"))) void bitnet_dense_to_f16__avx2(const float *x, float scale, uint16_t *h,
                                                                   size_t stride, int64_t n) {
    const __m256 vs = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i v = _mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), F16_RNE);
        if (stride == 1) {
            _mm_storeu_si128((__m128i *)(h + i), v);
        } else {
            uint16_t t[8];
            _mm_storeu_si128((__m128i *)t, v);
            for (int j = 0; j < 8; j++) h[(size_t)(i + j) * stride] = t[j];
        }
    }
    for (; i < n; i++) h[(size_t)i * stride] = bitnet_fp32_to_fp16(x[i] * scale);
}

__attribute__((target("avx2,f16c"))) void bitnet_dense_round_f16_row__avx2(const float *x, float scale, float *y,
                                                                          int64_t n) {
    const __m256 vs = _mm256_set1_ps(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), F16_RNE)));
    for (; i < n; i++) y[i] = bitnet_dense_round_f16(x[i] * scale);
}

/* Σ qa·qb of one block in 8 int32 lanes: |qa| (u8, ≤ 128) times qb with qa's sign (|qb| ≤ 127),
 * pairs summed to int16 (≤ 2·128·127 < 2^15, no saturation), then pairs of those to int32. */
__attribute__((target("avx2"))) static inline __m256i q8_block_dot(const bitnet_block_q8_0 *a,
                                                                   const bitnet_block_q8_0 *b) {
    const __m256i va = _mm256_loadu_si256((const __m256i *)a->qs);
    const __m256i vb = _mm256_loadu_si256((const __m256i *)b->qs);
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(va, va), _mm256_sign_epi8(vb, va));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

__attribute__((target("avx2,f16c"))) float bitnet_dense_dot_q8_0__avx2(const bitnet_block_q8_0 *a,
                                                                       const bitnet_block_q8_0 *b, int64_t n) {
    const int64_t nb = n / 32, nb4 = nb - nb % 4;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb4; i += 4) {
        const __m256i s0 = q8_block_dot(a + i, b + i), s1 = q8_block_dot(a + i + 1, b + i + 1);
        const __m256i s2 = q8_block_dot(a + i + 2, b + i + 2), s3 = q8_block_dot(a + i + 3, b + i + 3);
        /* lanes of block k summed into lane k (hadd pairs within 128-bit halves, then the two halves) */
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
        const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        /* da·db per block: the binary16 scales widened by F16C (exact, as the table) then multiplied */
        const __m128 da = _mm_cvtph_ps(_mm_setr_epi16((short)a[i].d, (short)a[i + 1].d, (short)a[i + 2].d,
                                                      (short)a[i + 3].d, 0, 0, 0, 0));
        const __m128 db = _mm_cvtph_ps(_mm_setr_epi16((short)b[i].d, (short)b[i + 1].d, (short)b[i + 2].d,
                                                      (short)b[i + 3].d, 0, 0, 0, 0));
        const __m128 d = _mm_mul_ps(da, db);
        float p[4];
        _mm_storeu_ps(p, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
        sum += p[0];
        sum += p[1];
        sum += p[2];
        sum += p[3];
    }
    for (int64_t i = nb4; i < nb; i++) {
        const __m256i s = q8_block_dot(a + i, b + i);
        const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        const __m128i h2 = _mm_hadd_epi32(h, h);
        const int32_t isum = _mm_cvtsi128_si32(_mm_hadd_epi32(h2, h2));
        sum += (float)isum * (bitnet_dense_f16(a[i].d) * bitnet_dense_f16(b[i].d));
    }
    return sum;
}
#else
typedef int bitnet_dense_avx2_not_built; /* keeps the translation unit non-empty */
#endif
