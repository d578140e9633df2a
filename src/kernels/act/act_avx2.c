/* act_avx2.c — the AVX2 activations: bitnet_expf's double operations (base/detmath.h) on four lanes at
 * once, in the same order and without contraction, so every float equals the scalar version's
 * (tests/test_act.cc). This file is compiled without -mavx2: the functions carry target attributes and
 * run only after bitnet_cpu_supports("avx2"). On other targets it compiles to nothing. */
#include "kernels/act/act_internal.h"

#if defined(BITNET_ACT_HAVE_AVX2)
#include <immintrin.h>

#include "base/detmath.h"

#define AVX2 __attribute__((target("avx2"))) static inline

/* bitnet_expf of 4 floats, widened to double, all inside [-104, 89] (the caller clamps and fixes the
 * lanes outside): detmath.h's steps lane by lane. The exponent m is added to y's exponent field as
 * (n − j) << 47: its low 17 bits are those of n − j = 32·m whatever the bits above them, so the 64-bit
 * shift of t's bits minus j gives exactly m << 52 (mod 2^64), as the scalar (uint64)m << 52. */
AVX2 __m128 exp4(__m256d x) {
    const __m256d t = _mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(BITNET_EXP_INV_C)), _mm256_set1_pd(BITNET_EXP_SHIFT));
    const __m256i tb = _mm256_castpd_si256(t);
    const __m256d nd = _mm256_sub_pd(t, _mm256_set1_pd(BITNET_EXP_SHIFT));
    const __m256d r = _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(nd, _mm256_set1_pd(BITNET_EXP_C_HI))),
                                    _mm256_mul_pd(nd, _mm256_set1_pd(BITNET_EXP_C_LO)));
    const __m256i j = _mm256_and_si256(tb, _mm256_set1_epi64x(31));
    const __m256i expo = _mm256_slli_epi64(_mm256_sub_epi64(tb, j), 47);
    const __m256d r2 = _mm256_mul_pd(r, r);
    const __m256d a = _mm256_mul_pd(r2, _mm256_add_pd(_mm256_set1_pd(BITNET_EXP_INV_F2),
                                                      _mm256_mul_pd(r, _mm256_set1_pd(BITNET_EXP_INV_F3))));
    const __m256d b = _mm256_mul_pd(
        _mm256_mul_pd(r2, r2),
        _mm256_add_pd(_mm256_add_pd(_mm256_set1_pd(BITNET_EXP_INV_F4), _mm256_mul_pd(r, _mm256_set1_pd(BITNET_EXP_INV_F5))),
                      _mm256_mul_pd(r2, _mm256_set1_pd(BITNET_EXP_INV_F6))));
    const __m256d p = _mm256_add_pd(_mm256_add_pd(r, a), b);
    const __m256d tab = _mm256_i64gather_pd(bitnet_exp_tab, j, 8);
    const __m256d y = _mm256_add_pd(tab, _mm256_mul_pd(tab, p));
    return _mm256_cvtpd_ps(_mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(y), expo)));
}

/* bitnet_expf of 8 floats: the lanes inside [-104, 89] through exp4, +0 below, +inf above, NaN as given. */
AVX2 __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-104.0f), hi = _mm256_set1_ps(89.0f);
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
    const __m128 e0 = exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(xc)));
    const __m128 e1 = exp4(_mm256_cvtps_pd(_mm256_extractf128_ps(xc, 1)));
    __m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(e0), e1, 1);
    e = _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
    e = _mm256_blendv_ps(e, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
    return _mm256_blendv_ps(e, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

__attribute__((target("avx2"))) void bitnet_act_silu_mul__avx2(float *g, const float *u, int64_t n) {
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 e = exp8(_mm256_xor_ps(x, sign)); /* e^-x */
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
    }
    bitnet_act_silu_mul__scalar(g + i, u + i, n - i);
}

__attribute__((target("avx2"))) void bitnet_act_exp_sub__avx2(float *x, float m, int64_t n) {
    const __m256 vm = _mm256_set1_ps(m);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm)));
    bitnet_act_exp_sub__scalar(x + i, m, n - i);
}
#endif
