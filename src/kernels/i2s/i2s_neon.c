/* i2s_neon.c — the NEON I2_S × int8 product (bitnet_i2s_gemm__neon) for AArch64; contract in i2s.h,
 * layout in docs/LAYOUTS.md §2.

 * Layout facts used here: weight j of the flattened tensor (j = m·K + k) lives in block j / 128
 * (32 bytes), byte j % 32, bits 7-2r .. 6-2r with r = (j % 128) / 32; code c means w = c − 1.
 * So "run" G = j / 32 (32 consecutive weights) is (block[G / 4] >> (6 − 2·(G % 4))) & 3, byte by
 * byte. With K % 32 == 0 each row is the runs G = m·K/32 .. m·K/32 + K/32 − 1, whatever the block
 * boundaries are: rows that straddle blocks need no special case and no repacking.
 *
 * On other targets this file compiles to nothing. */
#include "kernels/i2s/i2s_internal.h"

#ifdef BITNET_I2S_HAVE_NEON
#include <arm_neon.h>

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

void bitnet_i2s_gemm__neon(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                                  const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                                  size_t acc_stride) {
    if (K % 32 != 0) {
        bitnet_i2s_gemm__portable(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
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
#else
typedef int bitnet_i2s_neon_not_built; /* keeps the translation unit non-empty */
#endif
