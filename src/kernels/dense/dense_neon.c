/* dense_neon.c — the NEON versions of the F16 and Q8_0 dot products for AArch64 (dense.h has their
 * contracts: same lanes, same fold, same floats as the scalar versions in dense.c). On other targets
 * this file compiles to nothing. */
#include "kernels/dense/dense_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

/* lanes 4j..4j+3 in accumulator j; the product of two binary16 values is exact in binary32, so the fused
 * multiply-add gives the float of a multiply then an add */
float bitnet_dense_dot_f16__neon(const uint16_t *a, const float *b, int64_t n) {
    float32x4_t acc[8];
    for (int j = 0; j < 8; j++) acc[j] = vdupq_n_f32(0.0f);
    const int64_t n32 = n - n % 32;
    for (int64_t i = 0; i < n32; i += 32) {
        for (int j = 0; j < 8; j++) {
            const float32x4_t va = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 4 * j)));
            acc[j] = vfmaq_f32(acc[j], va, vld1q_f32(b + i + 4 * j)); /* exact product: fused = mul, add */
        }
    }
    float s[32];
    for (int j = 0; j < 8; j++) vst1q_f32(s + 4 * j, acc[j]);
    return bitnet_dense_dot_f16_finish(s, a, b, n32, n);
}

/* C (1..2) columns at once: each 4 binary16 values of a are widened once and multiplied by every
 * column's 4 floats; a column has the eight accumulators and the fold of bitnet_dense_dot_f16__neon, so its
 * result is that function's (16 accumulators of the 32 q registers). */
static inline __attribute__((always_inline)) void f16_cols(const uint16_t *a, const float *b, size_t b_stride,
                                                           int64_t n, int C, float *out, size_t out_stride) {
    float32x4_t acc[2][8];
    for (int c = 0; c < C; c++)
        for (int j = 0; j < 8; j++) acc[c][j] = vdupq_n_f32(0.0f);
    const int64_t n32 = n - n % 32;
    for (int64_t i = 0; i < n32; i += 32) {
        for (int j = 0; j < 8; j++) {
            const float32x4_t va = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 4 * j)));
            for (int c = 0; c < C; c++)
                acc[c][j] = vfmaq_f32(acc[c][j], va, vld1q_f32(b + c * b_stride + i + 4 * j));
        }
    }
    for (int c = 0; c < C; c++) {
        float s[32];
        for (int j = 0; j < 8; j++) vst1q_f32(s + 4 * j, acc[c][j]);
        out[(size_t)c * out_stride] = bitnet_dense_dot_f16_finish(s, a, b + c * b_stride, n32, n);
    }
}

void bitnet_dense_mul_f16__neon(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                                int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++) {
        const uint16_t *ar = a + (size_t)r * a_stride;
        int64_t j = 0;
        for (; j + 2 <= n_cols; j += 2) f16_cols(ar, b + (size_t)j * b_stride, b_stride, n, 2, out + (size_t)j * out_stride + r, out_stride);
        if (j < n_cols) f16_cols(ar, b + (size_t)j * b_stride, b_stride, n, 1, out + (size_t)j * out_stride + r, out_stride);
    }
}

float bitnet_dense_dot_q8_0__neon(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 32; h += 16) {
            const int8x16_t va = vld1q_s8(a[i].qs + h), vb = vld1q_s8(b[i].qs + h);
            /* products ≤ 128·127 in int16; two of them summed by vpadal into int32 */
            acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(va), vget_low_s8(vb)));
            acc = vpadalq_s16(acc, vmull_s8(vget_high_s8(va), vget_high_s8(vb)));
        }
        sum += (float)vaddvq_s32(acc) * (bitnet_dense_f16(a[i].d) * bitnet_dense_f16(b[i].d));
    }
    return sum;
}
#else
typedef int bitnet_dense_neon_not_built; /* keeps the translation unit non-empty */
#endif
