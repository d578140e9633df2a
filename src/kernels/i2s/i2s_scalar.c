/* i2s_scalar.c — the scalar I2_S × int8 product (bitnet_i2s_gemm__scalar), the version every CPU runs
 * and the fallback of the SIMD ones for K % 32 != 0; contract in i2s.h, layout in docs/LAYOUTS.md §2 /
 * formats.md "I2_S".

 * Layout facts used here: weight j of the flattened tensor (j = m·K + k) lives in block j / 128
 * (32 bytes), byte j % 32, bits 7-2r .. 6-2r with r = (j % 128) / 32; code c means w = c − 1.
 * So "run" G = j / 32 (32 consecutive weights) is (block[G / 4] >> (6 − 2·(G % 4))) & 3, byte by
 * byte. With K % 32 == 0 each row is the runs G = m·K/32 .. m·K/32 + K/32 − 1, whatever the block
 * boundaries are: rows that straddle blocks need no special case and no repacking. */
#include "kernels/i2s/i2s_internal.h"

/* Code (0..3) of flat weight j. */
static inline int bitnet_i2s_code_at(const uint8_t *w, int64_t j) {
    return (w[((j >> 7) << 5) | (j & 31)] >> (6 - 2 * ((j >> 5) & 3))) & 3;
}

void bitnet_i2s_gemm__scalar(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
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
