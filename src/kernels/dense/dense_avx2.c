/* dense_avx2.c — the AVX2 (+F16C, FMA) versions of the F16 and Q8_0 dot products (dense.h has their
 * contracts: same lanes, same fold, same floats as the scalar versions in dense.c). This file is
 * compiled without -mavx2: the functions carry function target attributes and only run after
 * bitnet_cpu_supports("avx2") said yes. On other targets it compiles to nothing. */
#include "kernels/dense/dense_internal.h"

#if defined(__x86_64__)
#include <immintrin.h>

/* bitnet_dense_fold32 on the 32 lane sums in four accumulators (lanes 8j..8j+7 in acc[j]), on whole vectors
 * (the same additions lane by lane) down to the four sums s0..s3: lanes (l, l+16) are acc[0]+acc[2] and
 * acc[1]+acc[3], then (l, l+8), then (l, l+4) across the 128-bit halves. */
__attribute__((target("avx2,f16c"))) static inline __m128 f16_fold4(const __m256 acc[4]) {
    const __m256 h16 = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    return _mm_add_ps(_mm256_castps256_ps128(h16), _mm256_extractf128_ps(h16, 1));
}

/* The fold's last step, (s0+s1) + (s2+s3). */
__attribute__((target("avx2,f16c"))) static inline float f16_sum4(__m128 f4) {
    float s[4];
    _mm_storeu_ps(s, f4);
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* The 32-lane part of bitnet_dense_dot_f16 over a[0..n32) (n32 a multiple of 32), folded down to s0..s3.
 * The product of two binary16 values is exact in binary32 (22 significant bits, exponents from -48 to 32), so
 * the fused multiply-add rounds once where a multiply then an add rounds once too (at the add): the same
 * floats in half the instructions. AVX2 CPUs have FMA and F16C (bitnet_cpu_supports("avx2") checks all
 * three). */
__attribute__((target("avx2,f16c,fma"))) static inline __m128 f16_lanes4(const uint16_t *a, const float *b, int64_t n32) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < n32; i += 32) {
        for (int j = 0; j < 4; j++) {
            const __m256 va = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8 * j)));
            acc[j] = _mm256_fmadd_ps(va, _mm256_loadu_ps(b + i + 8 * j), acc[j]);
        }
    }
    return f16_fold4(acc);
}

__attribute__((target("avx2,f16c,fma"))) float bitnet_dense_dot_f16__avx2(const uint16_t *a, const float *b, int64_t n) {
    const int64_t n32 = n - n % 32;
    return bitnet_dense_dot_f16_tail(f16_sum4(f16_lanes4(a, b, n32)), a, 1, b, n32, n);
}

/* Four rows at a time: each row's 32-lane part as above (its last fold step for the four rows in one
 * vector), then the four tails together in the four double
 * lanes of one vector — per lane the single dot's operations (a binary16 value widened, multiplied by b[i]
 * in float, widened to double and added in index order), so each result is that row's single dot, while
 * four independent sums hide the latency of the additions (the tail is most of a short dot). */
__attribute__((target("avx2,f16c,fma"))) void bitnet_dense_dot_f16_rows__avx2(const uint16_t *a, size_t a_stride,
                                                                         const float *b, int64_t n, int64_t n_rows,
                                                                         float *out) {
    const int64_t n32 = n - n % 32;
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) {
        const uint16_t *a0 = a + (size_t)r * a_stride, *a1 = a0 + a_stride, *a2 = a1 + a_stride, *a3 = a2 + a_stride;
        /* the four rows' s0..s3 transposed into s0 of every row, s1 of every row, ...: the last step of the
         * fold, (s0+s1)+(s2+s3), for the four rows in one vector */
        __m128 s0 = f16_lanes4(a0, b, n32), s1 = f16_lanes4(a1, b, n32), s2 = f16_lanes4(a2, b, n32),
               s3 = f16_lanes4(a3, b, n32);
        _MM_TRANSPOSE4_PS(s0, s1, s2, s3);
        __m256d sum = _mm256_cvtps_pd(_mm_add_ps(_mm_add_ps(s0, s1), _mm_add_ps(s2, s3)));
        for (int64_t i = n32; i < n; i++) {
            const __m128 va = _mm_cvtph_ps(_mm_setr_epi16((short)a0[i], (short)a1[i], (short)a2[i], (short)a3[i], 0, 0, 0, 0));
            sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm_mul_ps(va, _mm_set1_ps(b[i]))));
        }
        _mm_storeu_ps(out + r, _mm256_cvtpd_ps(sum)); /* round to nearest, as the cast (float)sum */
    }
    for (; r < n_rows; r++) out[r] = bitnet_dense_dot_f16__avx2(a + (size_t)r * a_stride, b, n);
}

/* B (1..4) vectors of 8 channels: lane l (0..31) of the defined order sums positions j ≡ l (mod 32) in
 * increasing j into acc[l] (fused, exact as in f16_lanes4); the rows are read in memory order, each into its
 * lane's accumulators (32 · B vectors, 4 KiB at most, in L1), an order the prefetchers follow (one lane after
 * another reads rows 32 apart); the fold (l, l+16), (l, l+8), (l, l+4), (s0+s1)+(s2+s3) runs on the vectors,
 * so channel by channel the additions of bitnet_dense_dot_f16; the tail is added in double, 4 channels per
 * vector. */
__attribute__((target("avx2,f16c,fma"), always_inline)) static inline void f16_columns(const uint16_t *a,
                                                                                  size_t a_stride, const float *b,
                                                                                  int64_t n, int B, float *out) {
    const int64_t n32 = n - n % 32;
    __m256 acc[32][4];
    for (int l = 0; l < 32; l++)
        for (int k = 0; k < B; k++) acc[l][k] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n32; j++) { /* the rows in memory order; lane j % 32 */
        const __m256 bj = _mm256_set1_ps(b[j]);
        const uint16_t *row = a + (size_t)j * a_stride;
        __m256 *al = acc[j % 32];
        for (int k = 0; k < B; k++)
            al[k] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 8 * k))), bj, al[k]);
    }
    for (int k = 0; k < B; k++) {
        for (int l = 0; l < 16; l++) acc[l][k] = _mm256_add_ps(acc[l][k], acc[l + 16][k]);
        for (int l = 0; l < 8; l++) acc[l][k] = _mm256_add_ps(acc[l][k], acc[l + 8][k]);
        for (int l = 0; l < 4; l++) acc[l][k] = _mm256_add_ps(acc[l][k], acc[l + 4][k]);
        const __m256 f = _mm256_add_ps(_mm256_add_ps(acc[0][k], acc[1][k]), _mm256_add_ps(acc[2][k], acc[3][k]));
        __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
        for (int64_t j = n32; j < n; j++) {
            const __m256 p = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + (size_t)j * a_stride + 8 * k))),
                                           _mm256_set1_ps(b[j]));
            lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
            hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
        }
        _mm_storeu_ps(out + 8 * k, _mm256_cvtpd_ps(lo)); /* round to nearest, as the cast (float)sum */
        _mm_storeu_ps(out + 8 * k + 4, _mm256_cvtpd_ps(hi));
    }
}

__attribute__((target("avx2,f16c,fma"))) void bitnet_dense_dot_f16_columns__avx2(const uint16_t *a, size_t a_stride,
                                                                                const float *b, int64_t n,
                                                                                int64_t n_cols, float *out) {
    int64_t i = 0;
    for (; i + 32 <= n_cols; i += 32) f16_columns(a + i, a_stride, b, n, 4, out + i);
    for (; i + 8 <= n_cols; i += 8) f16_columns(a + i, a_stride, b, n, 1, out + i);
    for (; i < n_cols; i++) out[i] = bitnet_dense_dot_f16_column(a + i, a_stride, b, n); /* fewer than 8 left */
}

/* Blocks of bitnet_dense_mul_f16: MB_R rows × MB_C columns, accumulated MB_K values at a time. A chunk of
 * the block's columns (MB_C · MB_K floats, 8 KiB), of its rows (4 KiB) and its accumulators (8 KiB) stay in
 * a 32 KiB L1 while every row of the block runs over the chunk, so each column value is read from L1, and a
 * row block (MB_R · n binary16 values) stays in L2 while the column blocks pass over it. */
enum { MB_R = 8, MB_C = 8, MB_K = 256 };

/* Values k0..k1 (whole 32-blocks) of one row a times C (1..3) columns: each 8 binary16 values of a are widened
 * once and multiplied into every column's accumulators (fused, exact as in f16_lanes4). acc holds the C
 * columns' four accumulators each (lanes 8j..8j+7 in acc[4c + j], as in f16_lanes4), loaded and stored
 * around the chunk: floats stored and reloaded unchanged, so each column adds its products in index order
 * into the lanes f16_lanes4 uses. C is a constant in each call, so the loops over c unroll into 12
 * accumulators, the widened vector and a product: the 16 ymm registers. */
__attribute__((target("avx2,f16c,fma"), always_inline)) static inline void f16_chunk(const uint16_t *a, const float *b,
                                                                                size_t b_stride, int64_t k0, int64_t k1,
                                                                                int C, __m256 *acc) {
    __m256 v[3][4];
    for (int c = 0; c < C; c++)
        for (int j = 0; j < 4; j++) v[c][j] = acc[4 * c + j];
    for (int64_t i = k0; i < k1; i += 32) {
        for (int j = 0; j < 4; j++) {
            const __m256 va = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8 * j)));
            for (int c = 0; c < C; c++)
                v[c][j] = _mm256_fmadd_ps(va, _mm256_loadu_ps(b + c * b_stride + i + 8 * j), v[c][j]);
        }
    }
    for (int c = 0; c < C; c++)
        for (int j = 0; j < 4; j++) acc[4 * c + j] = v[c][j];
}

/* One column (the generated token): two rows at a time, each read from start to end while the next two rows are
 * prefetched (bitnet_dense_prefetch_step), their eight accumulators independent (four per row, the lanes of
 * f16_lanes4); then each row's fold and tail as the single dot. */
__attribute__((target("avx2,f16c,fma"))) static void f16_gemv(const uint16_t *a, size_t a_stride, int64_t n_rows,
                                                             const float *b, int64_t n, float *out) {
    const int64_t n32 = n - n % 32;
    int64_t r = 0;
    for (; r + 2 <= n_rows; r += 2) {
        const uint16_t *a0 = a + (size_t)r * a_stride, *a1 = a0 + a_stride;
        __m256 x[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        __m256 y[4] = {x[0], x[0], x[0], x[0]};
        const char *next = (const char *)(a0 + 2 * a_stride);
        const int64_t group = (int64_t)(4 * a_stride); /* two rows of binary16 */
        const int64_t per = r + 4 <= n_rows ? bitnet_dense_prefetch_per_step(group, n32 / 32) : 0;
        for (int64_t i = 0; i < n32; i += 32) {
            bitnet_dense_prefetch_step(next, group, i / 32, per);
            for (int j = 0; j < 4; j++) {
                const __m256 bj = _mm256_loadu_ps(b + i + 8 * j);
                x[j] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a0 + i + 8 * j))), bj, x[j]);
                y[j] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a1 + i + 8 * j))), bj, y[j]);
            }
        }
        out[r] = bitnet_dense_dot_f16_tail(f16_sum4(f16_fold4(x)), a0, 1, b, n32, n);
        out[r + 1] = bitnet_dense_dot_f16_tail(f16_sum4(f16_fold4(y)), a1, 1, b, n32, n);
    }
    if (r < n_rows) out[r] = bitnet_dense_dot_f16__avx2(a + (size_t)r * a_stride, b, n);
}

__attribute__((target("avx2,f16c,fma"))) void bitnet_dense_mul_f16__avx2(const uint16_t *a, size_t a_stride,
                                                                        int64_t n_rows, const float *b, size_t b_stride,
                                                                        int64_t n_cols, int64_t n, float *out,
                                                                        size_t out_stride) {
    if (n_cols == 1) {
        f16_gemv(a, a_stride, n_rows, b, n, out);
        return;
    }
    const int64_t n32 = n - n % 32;
    __m256 acc[MB_R][MB_C * 4]; /* row r, column c: acc[r][4c..4c+3] */
    for (int64_t r0 = 0; r0 < n_rows; r0 += MB_R) {
        const int R = (int)(n_rows - r0 < MB_R ? n_rows - r0 : MB_R);
        for (int64_t c0 = 0; c0 < n_cols; c0 += MB_C) {
            const int C = (int)(n_cols - c0 < MB_C ? n_cols - c0 : MB_C);
            const float *bb = b + (size_t)c0 * b_stride;
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++)
                    for (int j = 0; j < 4; j++) acc[r][4 * c + j] = _mm256_setzero_ps();
            for (int64_t k0 = 0; k0 < n32; k0 += MB_K) {
                const int64_t k1 = n32 - k0 < MB_K ? n32 : k0 + MB_K;
                for (int r = 0; r < R; r++) {
                    const uint16_t *ar = a + (size_t)(r0 + r) * a_stride;
                    int c = 0;
                    for (; c + 3 <= C; c += 3) f16_chunk(ar, bb + (size_t)c * b_stride, b_stride, k0, k1, 3, acc[r] + 4 * c);
                    if (C - c == 2) f16_chunk(ar, bb + (size_t)c * b_stride, b_stride, k0, k1, 2, acc[r] + 4 * c);
                    if (C - c == 1) f16_chunk(ar, bb + (size_t)c * b_stride, b_stride, k0, k1, 1, acc[r] + 4 * c);
                }
            }
            for (int r = 0; r < R; r++) {
                const uint16_t *ar = a + (size_t)(r0 + r) * a_stride;
                for (int c = 0; c < C; c++)
                    out[(size_t)(c0 + c) * out_stride + (size_t)(r0 + r)] =
                        bitnet_dense_dot_f16_tail(f16_sum4(f16_fold4(acc[r] + 4 * c)), ar, 1, bb + (size_t)c * b_stride, n32, n);
            }
        }
    }
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
/* Four rows of one column at a time: per block, the four rows' integer sums (as in the single dot) gathered
 * into the lanes of one vector, then per lane the single dot's float steps, p = (float)isum · (da·db) and
 * sum += p in block order, so each lane is its row's bitnet_dense_dot_q8_0 while four independent sums hide
 * the latency of the additions; the activation block is read once for the four rows, and the next four rows
 * are prefetched with the first column (bitnet_dense_prefetch_step). */
__attribute__((target("avx2,f16c"))) void bitnet_dense_mul_q8_0__avx2(const bitnet_block_q8_0 *a, size_t a_stride,
                                                                     int64_t n_rows, const bitnet_block_q8_0 *b,
                                                                     size_t b_stride, int64_t n_cols, int64_t n,
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
                const __m256i s0 = q8_block_dot(a0 + i, bj + i), s1 = q8_block_dot(a1 + i, bj + i);
                const __m256i s2 = q8_block_dot(a2 + i, bj + i), s3 = q8_block_dot(a3 + i, bj + i);
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
/* 8 BF16 values at p widened to floats: zero-extended to 32 bits, shifted into the upper half. */
__attribute__((target("avx2"))) static inline __m256 bf16_load8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* The eight lane sums of a BF16 row (acc, lanes l = i % 8 for i < n8) finished as bitnet_dense_dot_bf16 does:
 * the tail i = n8 .. n−1 into lane i − n8, then the tree. */
__attribute__((target("avx2"))) static inline float bf16_finish(__m256 acc, const uint16_t *a, const float *b,
                                                                int64_t n8, int64_t n) {
    float s[8];
    _mm256_storeu_ps(s, acc);
    for (int64_t i = n8; i < n; i++) {
        const uint32_t u = (uint32_t)a[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        s[i - n8] += f * b[i];
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* bitnet_dense_mul_bf16 (dense.h): one column streams four rows at a time with a prefetch 1 KiB ahead of
 * each; several columns take each row's 8 widened values once for up to four columns. Separate multiply
 * and add (no FMA), in the lanes and order of bitnet_dense_dot_bf16, so every float is the scalar one. */
__attribute__((target("avx2"))) void bitnet_dense_mul_bf16__avx2(const uint16_t *a, size_t a_stride, int64_t n_rows,
                                                                 const float *b, size_t b_stride, int64_t n_cols,
                                                                 int64_t n, float *out, size_t out_stride) {
    const int64_t n8 = n - n % 8;
    if (n_cols == 1) {
        int64_t r = 0;
        for (; r + 4 <= n_rows; r += 4) {
            const uint16_t *a0 = a + (size_t)r * a_stride, *a1 = a0 + a_stride, *a2 = a1 + a_stride, *a3 = a2 + a_stride;
            __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
            for (int64_t i = 0; i < n8; i += 8) {
                if (i % 32 == 0) {
                    _mm_prefetch((const char *)(a0 + i) + 1024, _MM_HINT_T0);
                    _mm_prefetch((const char *)(a1 + i) + 1024, _MM_HINT_T0);
                    _mm_prefetch((const char *)(a2 + i) + 1024, _MM_HINT_T0);
                    _mm_prefetch((const char *)(a3 + i) + 1024, _MM_HINT_T0);
                }
                const __m256 bv = _mm256_loadu_ps(b + i);
                s0 = _mm256_add_ps(s0, _mm256_mul_ps(bf16_load8(a0 + i), bv));
                s1 = _mm256_add_ps(s1, _mm256_mul_ps(bf16_load8(a1 + i), bv));
                s2 = _mm256_add_ps(s2, _mm256_mul_ps(bf16_load8(a2 + i), bv));
                s3 = _mm256_add_ps(s3, _mm256_mul_ps(bf16_load8(a3 + i), bv));
            }
            out[r] = bf16_finish(s0, a0, b, n8, n);
            out[r + 1] = bf16_finish(s1, a1, b, n8, n);
            out[r + 2] = bf16_finish(s2, a2, b, n8, n);
            out[r + 3] = bf16_finish(s3, a3, b, n8, n);
        }
        for (; r < n_rows; r++) {
            const uint16_t *ar = a + (size_t)r * a_stride;
            __m256 s0 = _mm256_setzero_ps();
            for (int64_t i = 0; i < n8; i += 8) s0 = _mm256_add_ps(s0, _mm256_mul_ps(bf16_load8(ar + i), _mm256_loadu_ps(b + i)));
            out[r] = bf16_finish(s0, ar, b, n8, n);
        }
        return;
    }
    for (int64_t r = 0; r < n_rows; r++) {
        const uint16_t *ar = a + (size_t)r * a_stride;
        for (int64_t j0 = 0; j0 < n_cols; j0 += 4) {
            const int C = (int)(n_cols - j0 < 4 ? n_cols - j0 : 4);
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int64_t i = 0; i < n8; i += 8) {
                const __m256 w = bf16_load8(ar + i);
                for (int c = 0; c < C; c++)
                    acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(w, _mm256_loadu_ps(b + (size_t)(j0 + c) * b_stride + i)));
            }
            for (int c = 0; c < C; c++)
                out[(size_t)(j0 + c) * out_stride + (size_t)r] = bf16_finish(acc[c], ar, b + (size_t)(j0 + c) * b_stride, n8, n);
        }
    }
}
/* One Q6_K block (210 bytes at blk) into v[256] as bitnet_q6_k_block_to_f32 does: per half, the 32 low-bit
 * bytes ql[0..31], ql[32..63] and the 32 high-bit bytes qh give the four quarters' codes with byte masks
 * (16-bit shifts only move bits that the masks then drop); q − 32 widened to int32 and to float, times
 * d·scales[g] (exact) in one rounding, as the scalar decoder's second product. */
__attribute__((target("avx2"))) static inline void q6_k_block_avx2(const uint8_t *blk, float *v) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), k32 = _mm256_set1_epi8(32);
    const int8_t *sc = (const int8_t *)(blk + 192);
    uint16_t dh;
    memcpy(&dh, blk + 208, 2);
    const float d = bitnet_fp16_to_fp32(dh);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = blk + 64 * h, *qh = blk + 128 + 32 * h;
        const __m256i L0 = _mm256_loadu_si256((const __m256i *)ql), L1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
        const __m256i H = _mm256_loadu_si256((const __m256i *)qh);
        __m256i q[4];
        q[0] = _mm256_or_si256(_mm256_and_si256(L0, m4), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
        q[1] = _mm256_or_si256(_mm256_and_si256(L1, m4), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
        q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L0, 4), m4), _mm256_and_si256(H, m30));
        q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
        for (int k = 0; k < 4; k++) {
            const __m256i c = _mm256_sub_epi8(q[k], k32);
            const __m128i lo = _mm256_castsi256_si128(c), hi = _mm256_extracti128_si256(c, 1);
            const __m256 s0 = _mm256_set1_ps(d * (float)sc[8 * h + 2 * k]), s1 = _mm256_set1_ps(d * (float)sc[8 * h + 2 * k + 1]);
            float *o = v + 128 * h + 32 * k;
            _mm256_storeu_ps(o, _mm256_mul_ps(s0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
            _mm256_storeu_ps(o + 8, _mm256_mul_ps(s0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
            _mm256_storeu_ps(o + 16, _mm256_mul_ps(s1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
            _mm256_storeu_ps(o + 24, _mm256_mul_ps(s1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
        }
    }
}

/* bitnet_dense_mul_q6_k (dense.h): per row and group of up to four columns, each block decoded once into
 * 256 floats on the stack and multiplied into the columns' eight-lane sums (separate multiply and add, in
 * the order of bitnet_dense_dot_f32 over the decoded row), the next blocks of the row prefetched. */
__attribute__((target("avx2"))) void bitnet_dense_mul_q6_k__avx2(const uint8_t *a, size_t a_stride, int64_t n_rows,
                                                                 const float *b, size_t b_stride, int64_t n_cols,
                                                                 int64_t n, float *out, size_t out_stride) {
    _Alignas(32) float v[256];
    const int64_t nb = n / 256;
    for (int64_t r = 0; r < n_rows; r++) {
        const uint8_t *ar = a + (size_t)r * a_stride;
        for (int64_t j0 = 0; j0 < n_cols; j0 += 4) {
            const int C = (int)(n_cols - j0 < 4 ? n_cols - j0 : 4);
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            for (int64_t k = 0; k < nb; k++) {
                const char *pf = (const char *)ar + (size_t)k * 210 + 1024;
                _mm_prefetch(pf, _MM_HINT_T0);
                _mm_prefetch(pf + 64, _MM_HINT_T0);
                _mm_prefetch(pf + 128, _MM_HINT_T0);
                _mm_prefetch(pf + 192, _MM_HINT_T0);
                q6_k_block_avx2(ar + (size_t)k * 210, v);
                for (int c = 0; c < C; c++) {
                    const float *bc = b + (size_t)(j0 + c) * b_stride + 256 * k;
                    for (int i = 0; i < 256; i += 8)
                        acc[c] = _mm256_add_ps(acc[c], _mm256_mul_ps(_mm256_load_ps(v + i), _mm256_loadu_ps(bc + i)));
                }
            }
            for (int c = 0; c < C; c++) {
                float s[8];
                _mm256_storeu_ps(s, acc[c]);
                out[(size_t)(j0 + c) * out_stride + (size_t)r] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            }
        }
    }
}
#else
typedef int bitnet_dense_avx2_not_built; /* keeps the translation unit non-empty */
#endif
