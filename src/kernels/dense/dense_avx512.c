/* dense_avx512.c — the AVX-512 version of bitnet_dense_mul_f16, the output head's product (dense.h has the
 * contract: the same lanes, the same fold, the same floats as the scalar version in dense.c). The 32 lane sums
 * of the defined order are two zmm accumulators: lanes 0..15 and 16..31 of each 32-value block, which is one
 * 64-byte cache line of binary16 weights. This file is compiled without -mavx512f: the functions carry
 * function target attributes and only run after bitnet_cpu_supports("avx512") said yes. On other targets it
 * compiles to nothing. */
#include "kernels/dense/dense_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AVX512_F16 __attribute__((target("avx512f,avx2,f16c,fma")))

/* The fold of the defined order on the lane sums lo (lanes 0..15) and hi (lanes 16..31): (l, l+16) is lo+hi,
 * (l, l+8) the two 256-bit halves of that, (l, l+4) the two 128-bit halves, then (s0+s1) + (s2+s3). */
AVX512_F16 static inline float f16_fold512(__m512 lo, __m512 hi) {
    const __m512 h16 = _mm512_add_ps(lo, hi);
    const __m256 h8 = _mm256_add_ps(_mm512_castps512_ps256(h16),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(h16), 1)));
    const __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    float s[4];
    _mm_storeu_ps(s, h4);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* 32 binary16 values at p widened to floats: lanes 0..15 and 16..31. */
AVX512_F16 static inline __m512 f16_lo(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
AVX512_F16 static inline __m512 f16_hi(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 16)));
}

/* One column (the generated token): two rows at a time, each read from start to end, while the next two rows
 * are prefetched (bitnet_dense_prefetch_step; two rows measured 5-8 % faster than four on the AMD EPYC Zen 5
 * VM, 1 thread); four independent accumulators. Each lane adds its products in index order (fused: the
 * product of two binary16 values is exact in binary32, so one rounding either way), then the fold and the
 * tail in double, as the single dot. */
AVX512_F16 static void f16_gemv(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, int64_t n,
                                float *out) {
    const int64_t n32 = n - n % 32;
    int64_t r = 0;
    for (; r + 2 <= n_rows; r += 2) {
        const uint16_t *a0 = a + (size_t)r * a_stride, *a1 = a0 + a_stride;
        __m512 l0 = _mm512_setzero_ps(), h0 = l0, l1 = l0, h1 = l0;
        const char *next = (const char *)(a0 + 2 * a_stride);
        const int64_t group = (int64_t)(4 * a_stride); /* two rows of binary16 */
        const int64_t per = r + 4 <= n_rows ? bitnet_dense_prefetch_per_step(group, n32 / 32) : 0;
        for (int64_t i = 0; i < n32; i += 32) {
            bitnet_dense_prefetch_step(next, group, i / 32, per);
            const __m512 bl = _mm512_loadu_ps(b + i), bh = _mm512_loadu_ps(b + i + 16);
            l0 = _mm512_fmadd_ps(f16_lo(a0 + i), bl, l0);
            h0 = _mm512_fmadd_ps(f16_hi(a0 + i), bh, h0);
            l1 = _mm512_fmadd_ps(f16_lo(a1 + i), bl, l1);
            h1 = _mm512_fmadd_ps(f16_hi(a1 + i), bh, h1);
        }
        out[r] = bitnet_dense_dot_f16_tail(f16_fold512(l0, h0), a0, 1, b, n32, n);
        out[r + 1] = bitnet_dense_dot_f16_tail(f16_fold512(l1, h1), a1, 1, b, n32, n);
    }
    for (; r < n_rows; r++) {
        const uint16_t *a0 = a + (size_t)r * a_stride;
        __m512 l0 = _mm512_setzero_ps(), h0 = l0;
        for (int64_t i = 0; i < n32; i += 32) {
            l0 = _mm512_fmadd_ps(f16_lo(a0 + i), _mm512_loadu_ps(b + i), l0);
            h0 = _mm512_fmadd_ps(f16_hi(a0 + i), _mm512_loadu_ps(b + i + 16), h0);
        }
        out[r] = bitnet_dense_dot_f16_tail(f16_fold512(l0, h0), a0, 1, b, n32, n);
    }
}

/* Blocks of several columns: MB_R rows × MB_C columns, MB_K values at a time. The chunk of the block's
 * columns (MB_C · MB_K floats, 16 KiB), of its rows (2 KiB) and the accumulators (8 KiB) stay in L1 while
 * the block's rows run over the chunk; each row is read from memory once per MB_C columns. */
enum { MB_R = 4, MB_C = 16, MB_K = 256 };

/* Values k0..k1 (whole 32-blocks) of one row a times C (1..8) columns, b_stride floats apart: each 32 values
 * of a are widened once and multiplied into every column's two accumulators acc[2c], acc[2c+1] (lanes 0..15,
 * 16..31), loaded and stored around the chunk (floats stored and reloaded unchanged). C is a constant in each
 * call, so the loops unroll into 16 accumulators, the two widened vectors and the column loads. */
AVX512_F16 __attribute__((always_inline)) static inline void f16_chunk(const uint16_t *a, const float *b,
                                                                      size_t b_stride, int64_t k0, int64_t k1,
                                                                      int C, __m512 *acc) {
    __m512 v[16];
    for (int c = 0; c < 2 * C; c++) v[c] = acc[c];
    for (int64_t i = k0; i < k1; i += 32) {
        const __m512 lo = f16_lo(a + i), hi = f16_hi(a + i);
        for (int c = 0; c < C; c++) {
            v[2 * c] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(b + (size_t)c * b_stride + i), v[2 * c]);
            v[2 * c + 1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(b + (size_t)c * b_stride + i + 16), v[2 * c + 1]);
        }
    }
    for (int c = 0; c < 2 * C; c++) acc[c] = v[c];
}

/* f16_chunk for any C in 1..8 with C known at compile time in each branch. */
AVX512_F16 static void f16_chunk_any(const uint16_t *a, const float *b, size_t b_stride, int64_t k0, int64_t k1,
                                     int C, __m512 *acc) {
    switch (C) {
    case 8: f16_chunk(a, b, b_stride, k0, k1, 8, acc); break;
    case 7: f16_chunk(a, b, b_stride, k0, k1, 7, acc); break;
    case 6: f16_chunk(a, b, b_stride, k0, k1, 6, acc); break;
    case 5: f16_chunk(a, b, b_stride, k0, k1, 5, acc); break;
    case 4: f16_chunk(a, b, b_stride, k0, k1, 4, acc); break;
    case 3: f16_chunk(a, b, b_stride, k0, k1, 3, acc); break;
    case 2: f16_chunk(a, b, b_stride, k0, k1, 2, acc); break;
    default: f16_chunk(a, b, b_stride, k0, k1, 1, acc); break;
    }
}

AVX512_F16 void bitnet_dense_mul_f16__avx512(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b,
                                             size_t b_stride, int64_t n_cols, int64_t n, float *out,
                                             size_t out_stride) {
    if (n_cols == 1) {
        f16_gemv(a, a_stride, n_rows, b, n, out);
        return;
    }
    const int64_t n32 = n - n % 32;
    __m512 acc[MB_R][MB_C * 2]; /* row r, column c: acc[r][2c], acc[r][2c+1] */
    for (int64_t r0 = 0; r0 < n_rows; r0 += MB_R) {
        const int R = (int)(n_rows - r0 < MB_R ? n_rows - r0 : MB_R);
        for (int64_t c0 = 0; c0 < n_cols; c0 += MB_C) {
            const int C = (int)(n_cols - c0 < MB_C ? n_cols - c0 : MB_C);
            const float *bb = b + (size_t)c0 * b_stride;
            for (int r = 0; r < R; r++)
                for (int c = 0; c < 2 * C; c++) acc[r][c] = _mm512_setzero_ps();
            for (int64_t k0 = 0; k0 < n32; k0 += MB_K) {
                const int64_t k1 = n32 - k0 < MB_K ? n32 : k0 + MB_K;
                for (int r = 0; r < R; r++) {
                    const uint16_t *ar = a + (size_t)(r0 + r) * a_stride;
                    for (int c = 0; c < C; c += 8)
                        f16_chunk_any(ar, bb + (size_t)c * b_stride, b_stride, k0, k1, C - c < 8 ? C - c : 8,
                                      acc[r] + 2 * c);
                }
            }
            for (int r = 0; r < R; r++) {
                const uint16_t *ar = a + (size_t)(r0 + r) * a_stride;
                for (int c = 0; c < C; c++)
                    out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] = bitnet_dense_dot_f16_tail(
                        f16_fold512(acc[r][2 * c], acc[r][2 * c + 1]), ar, 1, bb + (size_t)c * b_stride, n32, n);
            }
        }
    }
}
/* bitnet_dense_mul_q8_0 with AVX-512 VNNI: the AVX2 version's four rows per pass, each block's 32 products
 * summed by one vpdpbusd (|qa| as u8 ≤ 128 times qb with qa's sign, |qb| ≤ 127: the same exact int32 lane
 * sums as maddubs + madd), the same hadd tree to one int32 block sum per row, and the same float steps
 * (p = (float)isum · (da·db), sum += p in block order), so the floats are those of every other version.
 * The next four rows are prefetched as in the AVX2 version. */
#define AVX512_Q8 __attribute__((target("avx512f,avx512vl,avx512vnni,avx2,f16c")))
AVX512_Q8 static inline __m256i q8_block_dot_vnni(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b) {
    const __m256i va = _mm256_loadu_si256((const __m256i *)a->qs);
    const __m256i vb = _mm256_loadu_si256((const __m256i *)b->qs);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(va), _mm256_sign_epi8(vb, va));
}

AVX512_Q8 void bitnet_dense_mul_q8_0__avx512(const bitnet_block_q8_0 *a, size_t a_stride, int64_t n_rows,
                                             const bitnet_block_q8_0 *b, size_t b_stride, int64_t n_cols, int64_t n,
                                             float *out, size_t out_stride) {
    const int64_t nb = n / 32;
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) {
        const bitnet_block_q8_0 *a0 = a + (size_t)r * a_stride, *a1 = a0 + a_stride, *a2 = a1 + a_stride,
                                *a3 = a2 + a_stride;
        const char *next = (const char *)(a0 + 4 * a_stride);
        const int64_t group = (int64_t)(4 * a_stride * sizeof *a);
        for (int64_t j = 0; j < n_cols; j++) {
            const bitnet_block_q8_0 *bj = b + (size_t)j * b_stride;
            /* the next four rows once, with the first column */
            const int64_t per = j == 0 && r + 8 <= n_rows ? bitnet_dense_prefetch_per_step(group, nb) : 0;
            __m128 sum = _mm_setzero_ps();
            for (int64_t i = 0; i < nb; i++) {
                bitnet_dense_prefetch_step(next, group, i, per);
                const __m256i s0 = q8_block_dot_vnni(a0 + i, bj + i), s1 = q8_block_dot_vnni(a1 + i, bj + i);
                const __m256i s2 = q8_block_dot_vnni(a2 + i, bj + i), s3 = q8_block_dot_vnni(a3 + i, bj + i);
                const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
                const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                const __m128 da = _mm_cvtph_ps(_mm_setr_epi16((short)a0[i].d, (short)a1[i].d, (short)a2[i].d,
                                                              (short)a3[i].d, 0, 0, 0, 0));
                const __m128 d = _mm_mul_ps(da, _mm_set1_ps(bitnet_dense_f16(bj[i].d)));
                sum = _mm_add_ps(sum, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
            }
            _mm_storeu_ps(out + (size_t)j * out_stride + (size_t)r, sum);
        }
    }
    for (; r < n_rows; r++)
        for (int64_t j = 0; j < n_cols; j++)
            out[(size_t)j * out_stride + (size_t)r] =
                bitnet_dense_dot_q8_0__avx2(a + (size_t)r * a_stride, b + (size_t)j * b_stride, n);
}
#else
typedef int bitnet_dense_avx512_not_built; /* keeps the translation unit non-empty */
#endif
