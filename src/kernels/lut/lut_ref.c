/* lut_ref.c — the scalar side of the LUT kernels:
 *  1. bitnet_ref_weight / bitnet_ref_gemm(_rows): the readable definition of each packed layout
 *     (LAYOUTS.md §2-4). Every weight is decoded from its byte by the layout formulas, then
 *     acc = Σ w·q exactly. No tables, no cleverness: this is what every kernel is compared with.
 *  2. bitnet_tl{1,2}_lut_ctor__scalar: the qlut of LAYOUTS.md §5 from one activation column; the SIMD
 *     constructors must produce the same bytes.
 *  3. bitnet_tl{1,2}_qgemm_generic__scalar: LUT kernels that read the packed bytes and the qlut in the
 *     same order as the SIMD kernels (int16 partial sums per BK block), with runtime tiles. They are
 *     the fallback when no registry row runs (the generated portable C kernels normally do) and a
 *     second definition the tests compare the others with.
 */
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"

#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * 1. Reference decoder
 * ------------------------------------------------------------------------------------------- */

/* I2_S (LAYOUTS.md §2): flat index j = m*K + k, block j/128 of 32 bytes, byte j%32,
 * bits 7-2*((j%128)/32) .. 6-2*((j%128)/32); value = code - 1. */
static int i2s_weight(const uint8_t *packed, const bitnet_lut_shape *sh, int64_t m, int64_t k) {
    const int64_t j = m * sh->K + k;
    const int64_t block = j / 128, in_block = j % 128;
    const uint8_t byte = packed[block * 32 + in_block % 32];
    const int code = byte >> (6 - 2 * (in_block / 32)) & 3;
    return code - 1;
}

/* Pair nibble idx = 3*w0 + w1 + 4 → the weight at position `second` (0: w0, 1: w1). */
static int pair_weight(unsigned nib, int second) {
    return second ? (int)(nib % 3) - 1 : (int)(nib / 3) - 1;
}

/* TL1 (LAYOUTS.md §3). Row m = t*BM + mt*bm + h*16 + i; pair p = k/2 lies in BK block kb = k/BK,
 * step s = (k%BK)/by, pair-of-pairs q = (k%by)/4, and is the high nibble when p is even. The byte sits
 * in the 64-byte chunk (t, kb, mt, s) at 16-byte row group (h, q), position i. */
static int tl1_weight(const uint8_t *packed, const bitnet_lut_shape *sh, int64_t m, int64_t k) {
    const int64_t K = sh->K, BM = sh->BM, BK = sh->BK, bm = sh->bm, by = 256 / bm;
    const int64_t t = m / BM, mt = m % BM / bm, h = m % bm / 16, i = m % 16;
    const int64_t kb = k / BK, s = k % BK / by, q = k % by / 4;
    const int64_t chunk = ((t * (K / BK) + kb) * (BM / bm) + mt) * (BK / by) + s;
    const uint8_t byte = packed[chunk * 64 + (h * (by / 4) + q) * 16 + i];
    const int64_t p = k / 2;
    const unsigned nib = p % 2 == 0 ? byte >> 4 : byte & 15u;
    return pair_weight(nib, (int)(k % 2));
}

/* Byte position of row r (0..31) of a 32-row TL2 micro tile: quarters stored in the order 0, 2, 1, 3
 * (the map is its own inverse). */
static int64_t tl2_byte_of_row(int64_t r) {
    static const int qmap[4] = {0, 2, 1, 3};
    return qmap[r / 8] * 8 + r % 8;
}

/* TL2 (LAYOUTS.md §4). */
static int tl2_weight(const uint8_t *packed, const bitnet_lut_shape *sh, int64_t m, int64_t k) {
    const int64_t M = sh->M, BM = sh->BM, BK = sh->BK, three_k = sh->three_k, two_k = sh->two_k;
    const int64_t t = m / BM, mt = m % BM / 32, r = m % 32, b = tl2_byte_of_row(r);
    if (k < three_k) {
        /* group G = k/3 in block kb; index step s holds groups 2s (high nibble) and 2s+1 */
        const int64_t G = k / 3, kb = G / (BK / 3), gg = G % (BK / 3);
        const uint8_t *index = packed + t * (BM * three_k / 6) + kb * (BM * BK / 6) + mt * (32 * BK / 6);
        const uint8_t byte = index[gg / 2 * 32 + b];
        const int nib = gg % 2 == 0 ? byte >> 4 : byte & 15;
        /* sign: word c = r%16 of the 24-weight step u = gg/8; bit 15-2j (rows 0..15) or 14-2j (16..31) */
        const uint8_t *sign = packed + three_k * M / 6 + t * (BM * three_k / 24) + kb * (BM * BK / 24) +
                              mt * (32 * BK / 24);
        const int64_t u = gg / 8, j = gg % 8, c = r % 16;
        const unsigned word = (unsigned)sign[u * 32 + 2 * c] | (unsigned)sign[u * 32 + 2 * c + 1] << 8;
        const int negative = (int)(word >> (15 - 2 * j - r / 16) & 1u);
        const int v = negative ? -nib : nib; /* v = 9*w0 + 3*w1 + w2 */
        const int u13 = v + 13;              /* = 9(w0+1) + 3(w1+1) + (w2+1) */
        const int digit[3] = {u13 / 9 - 1, u13 / 3 % 3 - 1, u13 % 3 - 1};
        return digit[k % 3];
    }
    /* two-part: pair P = (k - three_k)/2 in 32-wide block kb2 = P/16; step s = (P%16)/2 */
    const int64_t P = (k - three_k) / 2, kb2 = P / 16, s = P % 16 / 2;
    const uint8_t *two = packed + three_k * M / 6 + three_k * M / 24 + t * (BM * two_k / 4) + kb2 * (BM * 8) +
                         mt * 256;
    const uint8_t byte = two[s * 32 + b];
    const unsigned nib = P % 2 == 0 ? byte >> 4 : byte & 15u;
    return pair_weight(nib, (int)((k - three_k) % 2));
}

int bitnet_ref_weight(int type, const uint8_t *packed, const bitnet_lut_shape *sh, int64_t m, int64_t k) {
    switch (type) {
    case BITNET_TYPE_I2_S: return i2s_weight(packed, sh, m, k);
    case BITNET_TYPE_TL1: return tl1_weight(packed, sh, m, k);
    case BITNET_TYPE_TL2: return tl2_weight(packed, sh, m, k);
    default: return 0;
    }
}

void bitnet_ref_gemm_rows(int type, const uint8_t *packed, const bitnet_lut_shape *sh, const int8_t *q,
                          int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc) {
    const int64_t K = sh->K, rows = m1 - m0;
    for (int64_t i = 0; i < n_cols * rows; i++) acc[i] = 0;
    enum { CHUNK = 256 };
    int8_t w[CHUNK];
    for (int64_t m = m0; m < m1; m++) {
        for (int64_t k0 = 0; k0 < K; k0 += CHUNK) {
            const int64_t len = K - k0 < CHUNK ? K - k0 : CHUNK;
            for (int64_t k = 0; k < len; k++) w[k] = (int8_t)bitnet_ref_weight(type, packed, sh, m, k0 + k);
            for (int64_t n = 0; n < n_cols; n++) {
                const int8_t *qn = q + n * K + k0;
                int32_t sum = 0;
                for (int64_t k = 0; k < len; k++) sum += w[k] * qn[k];
                acc[n * rows + (m - m0)] += sum;
            }
        }
    }
}

void bitnet_ref_gemm(int type, const uint8_t *packed, const bitnet_lut_shape *sh, const int8_t *q, int64_t n_cols,
                     int32_t *acc) {
    bitnet_ref_gemm_rows(type, packed, sh, q, n_cols, 0, sh->M, acc);
}

/* ---------------------------------------------------------------------------------------------
 * 2. Scalar LUT constructors (LAYOUTS.md §5)
 *
 * q comes from bitnet_quantize_act (§1), which needs a [K] int8 buffer. The constructors have no
 * error channel (so no malloc): q is written into the LAST K bytes of the caller's qlut (which holds
 * at least bitnet_qlut_bytes >= 10*K bytes) and the tables are written from the front. Table j is
 * written only after its activations were read, and never reaches an activation not yet read:
 *   TL1: table p covers [32p, 32p+32); the next unread q[2p+2] is at 15K + 2p + 2 >= 32p + 32
 *        because p + 1 <= K/2.
 *   TL2: groups: [32g, 32g+32) vs q[3g+3] at 29G + 30P + 3g + 3 (G = three_k/3 groups, P = two_k/2
 *        pairs), fine since g + 1 <= G; pairs: [32G + 32p, +32) vs 32G + 30P + 2p + 2, fine since
 *        p + 1 <= P.
 * ------------------------------------------------------------------------------------------- */

/* Store int16 entry e at index i of the 16-byte low table and the 16-byte high table at t. */
static void put_entry(int8_t *t, int i, int v) {
    const uint16_t u = (uint16_t)(int16_t)v;
    t[i] = (int8_t)(uint8_t)(u & 0xff);
    t[16 + i] = (int8_t)(uint8_t)(u >> 8);
}

/* TL1-style table of one pair of activations: entry 3a + b + 4 = a*q0 + b*q1; entries 9..15 are 0. */
static void pair_table(int8_t *t, int q0, int q1) {
    for (int e = 0; e < 16; e++) {
        const int a = e / 3 - 1, b = e % 3 - 1;
        put_entry(t, e, e <= 8 ? a * q0 + b * q1 : 0);
    }
}

void bitnet_tl1_lut_ctor__scalar(const float *x, int64_t K, int64_t three_k, int8_t *qlut, float *lut_scale) {
    (void)three_k;
    int8_t *q = qlut + 15 * K; /* see the comment above */
    *lut_scale = bitnet_quantize_act(x, K, q);
    for (int64_t p = 0; p < K / 2; p++) {
        const int q0 = q[2 * p], q1 = q[2 * p + 1];
        pair_table(qlut + 32 * p, q0, q1);
    }
}

void bitnet_tl2_lut_ctor__scalar(const float *x, int64_t K, int64_t three_k, int8_t *qlut, float *lut_scale) {
    const int64_t G = three_k / 3, P = (K - three_k) / 2;
    int8_t *q = qlut + 32 * (G + P) - K;
    *lut_scale = bitnet_quantize_act(x, K, q);
    for (int64_t g = 0; g < G; g++) {
        const int q0 = q[3 * g], q1 = q[3 * g + 1], q2 = q[3 * g + 2];
        int8_t *t = qlut + 32 * g;
        for (int e = 0; e < 16; e++) {
            /* balanced-ternary digits of e = 9a + 3b + c (e = 0..13); entries 14, 15 are 0 */
            const int u = e + 13, a = u / 9 - 1, b = u / 3 % 3 - 1, c = u % 3 - 1;
            put_entry(t, e, e <= 13 ? a * q0 + b * q1 + c * q2 : 0);
        }
    }
    for (int64_t p = 0; p < P; p++) {
        const int q0 = q[three_k + 2 * p], q1 = q[three_k + 2 * p + 1];
        pair_table(qlut + 32 * (G + p), q0, q1);
    }
}

/* ---------------------------------------------------------------------------------------------
 * 3. Scalar LUT kernels
 * ------------------------------------------------------------------------------------------- */

/* int16 entry `e` of the table at t (low byte at t[e], high byte at t[16 + e]). */
static int16_t lut_entry(const int8_t *t, unsigned e) {
    return (int16_t)(uint16_t)((unsigned)(uint8_t)t[e] | (unsigned)(uint8_t)t[16 + e] << 8);
}

void bitnet_tl1_qgemm_generic__scalar(const bitnet_lut_shape *sh, int32_t *acc, const uint8_t *w,
                                      const int8_t *qlut, size_t qlut_stride, int64_t tile, int64_t n_cols) {
    const int64_t K = sh->K, BM = sh->BM, BK = sh->BK, bm = sh->bm, by = 256 / bm;
    const uint8_t *wt = w + tile * BM * K / 4;
    for (int64_t i = 0; i < n_cols * BM; i++) acc[i] = 0;
    for (int64_t kb = 0; kb < K / BK; kb++) {
        for (int64_t mt = 0; mt < BM / bm; mt++) {
            const uint8_t *blk = wt + kb * (BM * BK / 4) + mt * (bm * BK / 4);
            for (int64_t n = 0; n < n_cols; n++) {
                const int8_t *lut = qlut + n * (int64_t)qlut_stride + kb * BK / 2 * 32;
                int16_t part[64] = {0}; /* int16 per block: |sum| <= BK/2 * 254 <= 32512 */
                for (int64_t s = 0; s < BK / by; s++) {
                    for (int64_t h = 0; h < bm / 16; h++) {
                        for (int64_t q = 0; q < by / 4; q++) {
                            const uint8_t *bytes = blk + s * 64 + (h * (by / 4) + q) * 16;
                            const int8_t *t0 = lut + (s * by / 2 + 2 * q) * 32;
                            for (int i = 0; i < 16; i++) {
                                const int v = lut_entry(t0, bytes[i] >> 4) + lut_entry(t0 + 32, bytes[i] & 15u);
                                part[h * 16 + i] = (int16_t)(part[h * 16 + i] + v);
                            }
                        }
                    }
                }
                int32_t *out = acc + n * BM + mt * bm;
                for (int64_t i = 0; i < bm; i++) out[i] += part[i];
            }
        }
    }
}

void bitnet_tl2_qgemm_generic__scalar(const bitnet_lut_shape *sh, int32_t *acc, const uint8_t *w,
                                      const int8_t *qlut, size_t qlut_stride, int64_t tile, int64_t n_cols) {
    const int64_t M = sh->M, BM = sh->BM, BK = sh->BK, three_k = sh->three_k, two_k = sh->two_k;
    const uint8_t *index = w + tile * (BM * three_k / 6);
    const uint8_t *sign = w + three_k * M / 6 + tile * (BM * three_k / 24);
    const uint8_t *two = w + three_k * M / 6 + three_k * M / 24 + tile * (BM * two_k / 4);
    for (int64_t i = 0; i < n_cols * BM; i++) acc[i] = 0;
    for (int64_t kb = 0; kb < three_k / BK; kb++) {
        for (int64_t mt = 0; mt < BM / 32; mt++) {
            const uint8_t *ib = index + kb * (BM * BK / 6) + mt * (32 * BK / 6);
            const uint8_t *sb = sign + kb * (BM * BK / 24) + mt * (32 * BK / 24);
            for (int64_t n = 0; n < n_cols; n++) {
                const int8_t *lut = qlut + n * (int64_t)qlut_stride + kb * BK / 3 * 32;
                int16_t part[32] = {0}; /* |sum| <= BK/3 * 381 <= 32385 */
                for (int64_t u = 0; u < BK / 24; u++) {
                    for (int r4 = 0; r4 < 4; r4++) {
                        const int64_t s = 4 * u + r4; /* index step: groups 2s (high nibble), 2s + 1 */
                        for (int b = 0; b < 32; b++) {
                            const int row = (int)tl2_byte_of_row(b); /* the quarter map is an involution */
                            const uint8_t byte = ib[s * 32 + b];
                            const unsigned word = (unsigned)sb[u * 32 + 2 * (row % 16)] |
                                                  (unsigned)sb[u * 32 + 2 * (row % 16) + 1] << 8;
                            for (int hn = 0; hn < 2; hn++) {
                                const int j = 2 * r4 + hn;
                                const int e = lut_entry(lut + (2 * s + hn) * 32, hn == 0 ? byte >> 4 : byte & 15u);
                                const int neg = (int)(word >> (15 - 2 * j - row / 16) & 1u);
                                part[row] = (int16_t)(part[row] + (neg ? -e : e));
                            }
                        }
                    }
                }
                int32_t *out = acc + n * BM + mt * 32;
                for (int i = 0; i < 32; i++) out[i] += part[i];
            }
        }
    }
    /* two-part: one int16 sum over all of two_k (two_k < BK <= 255: <= 112 pairs * 254 = 28448) */
    for (int64_t mt = 0; mt < BM / 32; mt++) {
        for (int64_t n = 0; n < n_cols; n++) {
            const int8_t *lut = qlut + n * (int64_t)qlut_stride + three_k / 3 * 32;
            int16_t part[32] = {0};
            for (int64_t kb2 = 0; kb2 < two_k / 32; kb2++) {
                const uint8_t *tb = two + kb2 * (BM * 8) + mt * 256;
                for (int64_t s = 0; s < 8; s++) {
                    const int8_t *t0 = lut + (kb2 * 16 + 2 * s) * 32;
                    for (int b = 0; b < 32; b++) {
                        const int row = (int)tl2_byte_of_row(b);
                        const uint8_t byte = tb[s * 32 + b];
                        const int v = lut_entry(t0, byte >> 4) + lut_entry(t0 + 32, byte & 15u);
                        part[row] = (int16_t)(part[row] + v);
                    }
                }
            }
            int32_t *out = acc + n * BM + mt * 32;
            for (int i = 0; i < 32; i++) out[i] += part[i];
        }
    }
}
