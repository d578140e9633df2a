/* dense_internal.h — private to src/kernels/dense/: the per-ISA versions of the F16 and Q8_0 dot
 * products (dense.c: scalar; dense_avx2.c; dense_neon.c) and the fold they share. Contracts in dense.h. */
#ifndef BITNET_DENSE_INTERNAL_H
#define BITNET_DENSE_INTERNAL_H

#include "kernels/dense/dense.h"

/* The fold of bitnet_dense_dot_f16 (dense.h) on 32 lane sums s (changed in place): lanes (l, l+16),
 * (l, l+8), (l, l+4), then (s0+s1) + (s2+s3). */
static inline float bitnet_dense_fold32(float s[32]) {
    for (int l = 0; l < 16; l++) s[l] += s[l + 16];
    for (int l = 0; l < 8; l++) s[l] += s[l + 8];
    for (int l = 0; l < 4; l++) s[l] += s[l + 4];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* The tail of bitnet_dense_dot_f16: the folded lane sums plus a[i · a_stride] · b[i] for n32 <= i < n, added
 * in double, rounded to float at the end. */
static inline float bitnet_dense_dot_f16_tail(float folded, const uint16_t *a, size_t a_stride, const float *b,
                                              int64_t n32, int64_t n) {
    double sum = (double)folded;
    for (int64_t i = n32; i < n; i++) sum += (double)(bitnet_dense_f16(a[(size_t)i * a_stride]) * b[i]);
    return (float)sum;
}

/* bitnet_dense_dot_f16 from its 32 lane sums s over a[0..n32): the fold, then the tail. */
static inline float bitnet_dense_dot_f16_finish(float s[32], const uint16_t *a, const float *b, int64_t n32,
                                                int64_t n) {
    return bitnet_dense_dot_f16_tail(bitnet_dense_fold32(s), a, 1, b, n32, n);
}

/* bitnet_dense_dot_f16 of the column a[j · a_stride], j < n: the scalar lanes, fold and tail on values read
 * a_stride apart (bitnet_dense_dot_f16_columns one column at a time). */
static inline float bitnet_dense_dot_f16_column(const uint16_t *a, size_t a_stride, const float *b, int64_t n) {
    const int64_t n32 = n - n % 32;
    float s[32] = {0};
    for (int64_t j = 0; j < n32; j++) s[j % 32] += bitnet_dense_f16(a[(size_t)j * a_stride]) * b[j];
    return bitnet_dense_dot_f16_tail(bitnet_dense_fold32(s), a, a_stride, b, n32, n);
}

/* The prefetch of the one-column products that read a group of consecutive rows per pass (F16 and Q8_0, AVX2
 * and AVX-512): `next` is the first byte of the next group, group_bytes its size (rows × row stride), n_steps
 * the pass's steps; step s asks for bytes [s·per, (s+1)·per) of the next group into L2 (per = group_bytes /
 * n_steps rounded up), so the whole next group is requested in address order while this one is multiplied,
 * and every row starts warm. Asking a fixed distance ahead inside each row instead left each group's first
 * lines to the hardware prefetchers, which follow several short streams late: on the 2B-4T head (128256 ×
 * 2560, F16, 1 thread, AMD EPYC Zen 5 VM, read bandwidth 40 GB/s) 1024 bytes ahead in each row gave 28.9 GB/s
 * with AVX-512 and 21.6 with AVX2, the next group 32.8-33.6 and 31-34 (bitnet-kernel-bench --head). */
#if defined(__x86_64__)
#include <xmmintrin.h>
static inline int64_t bitnet_dense_prefetch_per_step(int64_t group_bytes, int64_t n_steps) {
    return n_steps > 0 ? (group_bytes + n_steps - 1) / n_steps : 0;
}
static inline void bitnet_dense_prefetch_step(const char *next, int64_t group_bytes, int64_t step, int64_t per) {
    const int64_t end = (step + 1) * per < group_bytes ? (step + 1) * per : group_bytes;
    for (int64_t o = step * per; o < end; o += 64) _mm_prefetch(next + o, _MM_HINT_T1);
}
#endif

#if defined(__x86_64__)
/* AVX2 + F16C (function target attributes; call only after bitnet_cpu_supports("avx2")). */
float bitnet_dense_dot_f16__avx2(const uint16_t *a, const float *b, int64_t n);
void bitnet_dense_dot_f16_rows__avx2(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_rows,
                                     float *out);
void bitnet_dense_dot_f16_columns__avx2(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_cols,
                                        float *out);
void bitnet_dense_mul_f16__avx2(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                                int64_t n_cols, int64_t n, float *out, size_t out_stride);
void bitnet_dense_mul_bf16__avx2(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                                 int64_t n_cols, int64_t n, float *out, size_t out_stride);
void bitnet_dense_mul_q6_k__avx2(const uint8_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                                 int64_t n_cols, int64_t n, float *out, size_t out_stride);
float bitnet_dense_dot_q8_0__avx2(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n);
void bitnet_dense_mul_q8_0__avx2(const bitnet_block_q8_0 *a, size_t a_stride, int64_t n_rows, const bitnet_block_q8_0 *b,
                                 size_t b_stride, int64_t n_cols, int64_t n, float *out, size_t out_stride);
void bitnet_dense_to_f16__avx2(const float *x, float scale, uint16_t *h, size_t stride, int64_t n);
void bitnet_dense_round_f16_row__avx2(const float *x, float scale, float *y, int64_t n);
/* AVX-512 (F, with F16C and FMA; the Q8_0 product also VL and VNNI; call only after
 * bitnet_cpu_supports("avx512"), which includes all of them). */
void bitnet_dense_mul_f16__avx512(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                                  int64_t n_cols, int64_t n, float *out, size_t out_stride);
void bitnet_dense_mul_q8_0__avx512(const bitnet_block_q8_0 *a, size_t a_stride, int64_t n_rows,
                                   const bitnet_block_q8_0 *b, size_t b_stride, int64_t n_cols, int64_t n,
                                   float *out, size_t out_stride);
#elif defined(__aarch64__)
float bitnet_dense_dot_f16__neon(const uint16_t *a, const float *b, int64_t n);
void bitnet_dense_mul_f16__neon(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                                int64_t n_cols, int64_t n, float *out, size_t out_stride);
float bitnet_dense_dot_q8_0__neon(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n);
#endif

#endif
