/* i2s_portable.c — the plain C11 I2_S × int8 product (bitnet_i2s_gemm__portable): the version every CPU
 * runs (the last row of i2s.c's table, what BITNET_ISA=scalar selects) and the fallback of the SIMD
 * versions for K % 32 != 0. Written for 32-bit cores without SIMD for this (Cortex-M4F, Xtensa LX7):
 * byte loads only (any alignment of w and q), 32-bit indices and int32 accumulators in the inner loops,
 * no heap. Contract in i2s.h, layout in docs/LAYOUTS.md §2 / formats.md "I2_S".
 *
 * Layout facts used here: weight j of the flattened tensor (j = m·K + k) lives in block j / 128
 * (32 bytes), byte j % 32, bits 7-2r .. 6-2r with r = (j % 128) / 32; code c means w = c − 1.
 * A row is walked by its offset u from the start of the block that holds its first weight
 * (u0 = (m·K) % 128, u = u0 .. u0 + K − 1; the block pointer is computed once per row in size_t):
 *  - a whole block inside the row (u % 128 == 0 and 128 weights left): each of its 32 bytes is loaded
 *    once and gives the weights k, k + 32, k + 64, k + 96 (bits 7-6, 5-4, 3-2, 1-0);
 *  - otherwise (the row's first and last partial blocks when K % 128 != 0, e.g. K = 8640, or any K % 32
 *    != 0): the rest of the current 32-weight run, bytes u % 32 .. at the run's fixed shift.
 * So rows that straddle blocks need no special case and no repacking. Σ w·q is summed directly as
 * (code − 1)·q in int32: |Σ| ≤ 128·K, exact for K < 2^24 (i2s.h); qsum is not needed and not read. */
#include "kernels/i2s/i2s_internal.h"

/* Σ (code − 1)·q over the n weights of run bits `shift` .. shift+1 of bytes b[0..n-1] (q[0..n-1]). */
static inline int32_t bitnet_i2s_run_part(const uint8_t *b, unsigned shift, const int8_t *q, uint32_t n) {
    int32_t s = 0;
    for (uint32_t i = 0; i < n; ++i) s += ((int32_t)(b[i] >> shift & 3u) - 1) * q[i];
    return s;
}

/* Σ_k w[m][k]·q[k] of one row: blk = the block holding its first weight, u0 = that weight's offset in
 * the block (0..127), K weights. */
static int32_t bitnet_i2s_row(const uint8_t *blk, uint32_t u0, uint32_t K, const int8_t *q) {
    int32_t s = 0;
    const uint32_t end = u0 + K;
    uint32_t u = u0;
    while (u < end) {
        const uint8_t *b = blk + (u >> 7) * 32u;
        const int8_t *qu = q + (u - u0);
        if ((u & 127u) == 0 && end - u >= 128) {
            /* a whole block: byte i holds weights i, 32 + i, 64 + i, 96 + i of the block */
            for (uint32_t i = 0; i < 32; ++i) {
                const uint32_t v = b[i];
                s += ((int32_t)(v >> 6) - 1) * qu[i] + ((int32_t)(v >> 4 & 3u) - 1) * qu[32 + i] +
                     ((int32_t)(v >> 2 & 3u) - 1) * qu[64 + i] + ((int32_t)(v & 3u) - 1) * qu[96 + i];
            }
            u += 128;
        } else {
            /* the rest of run (u % 128) / 32, positions u % 32 .. 31, within the row */
            const uint32_t pos = u & 31u, left = end - u;
            const uint32_t n = 32 - pos < left ? 32 - pos : left;
            s += bitnet_i2s_run_part(b + pos, 6 - 2 * (unsigned)(u >> 5 & 3u), qu, n);
            u += n;
        }
    }
    return s;
}

void bitnet_i2s_gemm__portable(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                               const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                               size_t acc_stride) {
    (void)M;
    (void)qsum;
    if (n_cols <= 0 || m1 <= m0) return;
    const uint32_t k32 = K > 0 ? (uint32_t)K : 0; /* K < 2^24 (i2s.h) */
    const size_t rows = (size_t)(m1 - m0), cols = (size_t)n_cols;
    for (size_t n = 0; n < cols; ++n) {
        const int8_t *qn = q + n * q_stride;
        int32_t *an = acc + n * acc_stride;
        for (size_t r = 0; r < rows; ++r) {
            const size_t j0 = ((size_t)m0 + r) * k32; /* flat index of the row's first weight */
            an[r] = bitnet_i2s_row(w + (j0 >> 7) * 32, (uint32_t)(j0 & 127u), k32, qn);
        }
    }
}
