/* i2s.c — I2_S × int8 dot products (scalar, AVX2, NEON) for the I2_S reference path of the matmul
 * host; contract in i2s.h, layout in docs/LAYOUTS.md §2 / formats.md "I2_S".
 *
 * Layout facts used here: weight j of the flattened tensor (j = m·K + k) lives in block j / 128
 * (32 bytes), byte j % 32, bits 7-2r .. 6-2r with r = (j % 128) / 32; code c means w = c − 1.
 * So "run" G = j / 32 (32 consecutive weights) is (block[G / 4] >> (6 − 2·(G % 4))) & 3, byte by
 * byte. With K % 32 == 0 each row is the runs G = m·K/32 .. m·K/32 + K/32 − 1, whatever the block
 * boundaries are: rows that straddle blocks need no special case and no repacking.
 *
 * This file is compiled without -mavx2: the AVX2 kernel carries __attribute__((target("avx2,fma")))
 * and only runs after bitnet_cpu_supports("avx2") said yes; the AVX-512 kernel carries the AVX-512
 * F/BW/VL/VNNI targets and only runs after bitnet_cpu_supports("avx512"). */
#include "kernels/i2s/i2s.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "kernels/lut/lut.h"
#include "base/quants.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BITNET_I2S_HAVE_AVX2 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#define BITNET_I2S_HAVE_NEON 1
#endif

/* Columns handled together by the SIMD kernels: the weight codes of a run are extracted once and
 * used for up to this many activation columns. */
#define BITNET_I2S_COL_TILE 4

int32_t bitnet_i2s_qsum(const int8_t *q, int64_t K) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += q[k];
    return s;
}

/* ---- scalar ---------------------------------------------------------------------------------- */

/* Code (0..3) of flat weight j. */
static inline int bitnet_i2s_code_at(const uint8_t *w, int64_t j) {
    return (w[((j >> 7) << 5) | (j & 31)] >> (6 - 2 * ((j >> 5) & 3))) & 3;
}

static void bitnet_i2s_gemm__scalar(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
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

/* ---- AVX2 ------------------------------------------------------------------------------------ */

#ifdef BITNET_I2S_HAVE_AVX2
__attribute__((target("avx2,fma"))) static inline int32_t bitnet_i2s_hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* Σ code·q with _mm256_maddubs_epi16(codes, q): codes are unsigned 0..3, q signed, so each int16
 * pair sum is at most 2·3·128 = 768 in magnitude (no saturation); four of them (one block) stay below
 * 3072 before _mm256_madd_epi16 widens to int32. Then Σ w·q = Σ code·q − Σ q. */
__attribute__((target("avx2,fma"))) static void
bitnet_i2s_gemm__avx2(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                      const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride) {
    if (K % 32 != 0) {
        bitnet_i2s_gemm__scalar(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
        return;
    }
    const __m256i mask = _mm256_set1_epi8(3);
    const __m256i ones16 = _mm256_set1_epi16(1);
    const int64_t n_runs = K / 32;

    for (int64_t n0 = 0; n0 < n_cols; n0 += BITNET_I2S_COL_TILE) {
        const int nc = (int)(n_cols - n0 < BITNET_I2S_COL_TILE ? n_cols - n0 : BITNET_I2S_COL_TILE);
        const int8_t *qc[BITNET_I2S_COL_TILE];
        int32_t qs[BITNET_I2S_COL_TILE];
        for (int c = 0; c < nc; ++c) {
            qc[c] = q + (size_t)(n0 + c) * q_stride;
            qs[c] = qsum ? qsum[n0 + c] : bitnet_i2s_qsum(qc[c], K);
        }
        for (int64_t m = m0; m < m1; ++m) {
            __m256i av[BITNET_I2S_COL_TILE];
            for (int c = 0; c < nc; ++c) av[c] = _mm256_setzero_si256();
            int64_t G = m * n_runs; /* global run index */
            int64_t g = 0;          /* run index within the row */
            while (g < n_runs) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (G >> 2) * 32));
                if ((G & 3) == 0 && g + 4 <= n_runs) {
                    /* a whole block: four runs from one load */
                    const __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(v, 6), mask);
                    const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
                    const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(v, 2), mask);
                    const __m256i c3 = _mm256_and_si256(v, mask);
                    for (int c = 0; c < nc; ++c) {
                        const int8_t *qp = qc[c] + g * 32;
                        __m256i p = _mm256_maddubs_epi16(c0, _mm256_loadu_si256((const __m256i *)qp));
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c1, _mm256_loadu_si256((const __m256i *)(qp + 32))));
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c2, _mm256_loadu_si256((const __m256i *)(qp + 64))));
                        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c3, _mm256_loadu_si256((const __m256i *)(qp + 96))));
                        av[c] = _mm256_add_epi32(av[c], _mm256_madd_epi16(p, ones16));
                    }
                    G += 4;
                    g += 4;
                } else {
                    /* a single run (row start or end inside a block) */
                    const __m128i sh = _mm_cvtsi32_si128(6 - 2 * (int)(G & 3));
                    const __m256i cx = _mm256_and_si256(_mm256_srl_epi16(v, sh), mask);
                    for (int c = 0; c < nc; ++c) {
                        const __m256i qv = _mm256_loadu_si256((const __m256i *)(qc[c] + g * 32));
                        av[c] = _mm256_add_epi32(av[c], _mm256_madd_epi16(_mm256_maddubs_epi16(cx, qv), ones16));
                    }
                    G += 1;
                    g += 1;
                }
            }
            for (int c = 0; c < nc; ++c)
                acc[(size_t)(n0 + c) * acc_stride + (size_t)(m - m0)] = bitnet_i2s_hsum_avx2(av[c]) - qs[c];
        }
    }
}
#endif

/* ---- AVX-512 VNNI ---------------------------------------------------------------------------- */

#ifdef BITNET_I2S_HAVE_AVX2
#define BITNET_I2S_T512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

/* Rows and columns of one register block of the AVX-512 kernel (16 zmm accumulators). */
#define BITNET_I2S_RB 4
#define BITNET_I2S_CB 4
/* Bytes of the decoded-code buffer on the stack; rows are decoded in K slices of at most
 * BITNET_I2S_DEC_BYTES / BITNET_I2S_RB bytes. */
#define BITNET_I2S_DEC_BYTES 65536
#define BITNET_I2S_KSLICE (BITNET_I2S_DEC_BYTES / BITNET_I2S_RB)
/* From BITNET_I2S_DECODE_MIN columns on the AVX-512 kernel decodes the weights once; for 1 ..
 * BITNET_I2S_DIRECT_MAX columns it reads the packed bytes directly (four columns would spill registers);
 * other counts run the AVX2 kernel. Measured with weights streamed from DRAM, 1 thread, 2560 x 6912,
 * GOP/s decoded-zmm / AVX2: N = 8 189 / 206, N = 16 250 / 240, N = 128 325 / 267. */
#define BITNET_I2S_DIRECT_MAX 3
#define BITNET_I2S_DECODE_MIN 16

/* Codes (0..3, one byte each) of row m, weights k0 .. k0 + len − 1 (k0 and len multiples of 32,
 * K % 32 == 0) into dst; dst[len .. round64(len)) is zeroed so 64-byte steps read zeros there. */
BITNET_I2S_T512 static void bitnet_i2s_decode_row(const uint8_t *w, int64_t K, int64_t m, int64_t k0, int64_t len,
                                                  uint8_t *dst) {
    const __m256i mask = _mm256_set1_epi8(3);
    int64_t G = (m * K + k0) / 32;
    int64_t k = 0;
    while (k < len) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (G >> 2) * 32));
        if ((G & 3) == 0 && k + 128 <= len) {
            _mm256_store_si256((__m256i *)(dst + k), _mm256_and_si256(_mm256_srli_epi16(v, 6), mask));
            _mm256_store_si256((__m256i *)(dst + k + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), mask));
            _mm256_store_si256((__m256i *)(dst + k + 64), _mm256_and_si256(_mm256_srli_epi16(v, 2), mask));
            _mm256_store_si256((__m256i *)(dst + k + 96), _mm256_and_si256(v, mask));
            G += 4;
            k += 128;
        } else {
            const __m128i sh = _mm_cvtsi32_si128(6 - 2 * (int)(G & 3));
            _mm256_store_si256((__m256i *)(dst + k), _mm256_and_si256(_mm256_srl_epi16(v, sh), mask));
            G += 1;
            k += 32;
        }
    }
    if (len % 64) _mm256_store_si256((__m256i *)(dst + len), _mm256_setzero_si256());
}

/* out[r][c] = Σ_{k<len} codes[r·cs + k] · q[c][k] for r < R, c < C (R ≤ RB, C ≤ CB, constants after
 * inlining). codes: 64-byte aligned rows, zero from len to round64(len); q[c]: len readable bytes.
 * _mm512_dpbusd_epi32 multiplies unsigned codes by signed q and adds four products to an int32 lane
 * without saturation: exact, as |Σ| ≤ 3·128·len stays far inside int32. */
BITNET_I2S_T512 static inline __attribute__((always_inline)) void
bitnet_i2s_block512(const uint8_t *codes, size_t cs, const int8_t *const *q, int64_t len, int R, int C,
                    int32_t out[BITNET_I2S_RB][BITNET_I2S_CB]) {
    __m512i a[BITNET_I2S_RB][BITNET_I2S_CB];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) a[r][c] = _mm512_setzero_si512();
    int64_t k = 0;
    for (; k + 64 <= len; k += 64) {
        __m512i wv[BITNET_I2S_RB];
        for (int r = 0; r < R; ++r) wv[r] = _mm512_load_si512((const void *)(codes + (size_t)r * cs + k));
        for (int c = 0; c < C; ++c) {
            const __m512i qv = _mm512_loadu_si512((const void *)(q[c] + k));
            for (int r = 0; r < R; ++r) a[r][c] = _mm512_dpbusd_epi32(a[r][c], wv[r], qv);
        }
    }
    if (k < len) { /* 32 left: the codes are zero beyond len, q is read only where it exists */
        const __mmask64 lo = 0xFFFFFFFFull;
        __m512i wv[BITNET_I2S_RB];
        for (int r = 0; r < R; ++r) wv[r] = _mm512_load_si512((const void *)(codes + (size_t)r * cs + k));
        for (int c = 0; c < C; ++c) {
            const __m512i qv = _mm512_maskz_loadu_epi8(lo, (const void *)(q[c] + k));
            for (int r = 0; r < R; ++r) a[r][c] = _mm512_dpbusd_epi32(a[r][c], wv[r], qv);
        }
    }
    /* 16 sums at once: element 4r + c of t gets Σ a[r][c] (missing rows/columns are zero vectors) */
    for (int r = R; r < BITNET_I2S_RB; ++r)
        for (int c = 0; c < BITNET_I2S_CB; ++c) a[r][c] = _mm512_setzero_si512();
    for (int r = 0; r < R; ++r)
        for (int c = C; c < BITNET_I2S_CB; ++c) a[r][c] = _mm512_setzero_si512();
    __m512i v[BITNET_I2S_RB];
    for (int r = 0; r < BITNET_I2S_RB; ++r) {
        /* per 128-bit lane: [Σ a[r][0], Σ a[r][1], Σ a[r][2], Σ a[r][3]] over that lane's four int32 */
        const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[r][0], a[r][1]), _mm512_unpackhi_epi32(a[r][0], a[r][1]));
        const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(a[r][2], a[r][3]), _mm512_unpackhi_epi32(a[r][2], a[r][3]));
        v[r] = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    }
    /* then the four 128-bit lanes of each v[r]: u01 = [v0 L0+L2, v0 L1+L3, v1 L0+L2, v1 L1+L3] */
    const __m512i u01 = _mm512_add_epi32(_mm512_shuffle_i32x4(v[0], v[1], 0x44), _mm512_shuffle_i32x4(v[0], v[1], 0xEE));
    const __m512i u23 = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2], v[3], 0x44), _mm512_shuffle_i32x4(v[2], v[3], 0xEE));
    const __m512i t = _mm512_add_epi32(_mm512_shuffle_i32x4(u01, u23, 0x88), _mm512_shuffle_i32x4(u01, u23, 0xDD));
    _mm512_storeu_si512((void *)&out[0][0], t);
}

/* One register block at (R, C) given at run time: dispatch to the inlined constant versions. */
BITNET_I2S_T512 static void bitnet_i2s_block512_any(const uint8_t *codes, size_t cs, const int8_t *const *q,
                                                    int64_t len, int R, int C,
                                                    int32_t out[BITNET_I2S_RB][BITNET_I2S_CB]) {
#define BITNET_I2S_CASE(r_, c_) \
    case (r_) * 8 + (c_): bitnet_i2s_block512(codes, cs, q, len, r_, c_, out); return;
    switch (R * 8 + C) {
        BITNET_I2S_CASE(4, 4) BITNET_I2S_CASE(4, 3) BITNET_I2S_CASE(4, 2) BITNET_I2S_CASE(4, 1)
        BITNET_I2S_CASE(3, 4) BITNET_I2S_CASE(3, 3) BITNET_I2S_CASE(3, 2) BITNET_I2S_CASE(3, 1)
        BITNET_I2S_CASE(2, 4) BITNET_I2S_CASE(2, 3) BITNET_I2S_CASE(2, 2) BITNET_I2S_CASE(2, 1)
        BITNET_I2S_CASE(1, 4) BITNET_I2S_CASE(1, 3) BITNET_I2S_CASE(1, 2) BITNET_I2S_CASE(1, 1)
    default: return;
    }
#undef BITNET_I2S_CASE
}

/* One run G (32 codes, shifted out of their block) of a row for C columns: sacc[c] += codes · q[c][g]. */
BITNET_I2S_T512 static inline __attribute__((always_inline)) void
bitnet_i2s_run512(const uint8_t *w, int64_t G, const int8_t *const *q, int64_t g, int C, __m256i *sacc) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (G >> 2) * 32));
    const __m256i cx = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(6 - 2 * (int)(G & 3))),
                                        _mm256_set1_epi8(3));
    for (int c = 0; c < C; ++c)
        sacc[c] = _mm256_dpbusd_epi32(sacc[c], cx, _mm256_loadu_si256((const __m256i *)(q[c] + g * 32)));
}

/* One to three columns: the packed bytes are read directly, without shifts. A 32-byte block
 * masked with 0xC0, 0x30, 0x0C and 0x03 holds code·64, code·16, code·4 and code for weights k..k+31,
 * k+32.., k+64.. and k+96.. of the block; _mm256_dpbusd_epi32 against the matching 32 activations
 * adds into one int32 accumulator per mask, whose lane sums are exact multiples of 64, 16, 4, 1 and are
 * divided back at the end. |Σ| ≤ 192·128·K/8 per accumulator (< 2^31 for K ≤ 65536; longer rows take
 * the AVX2 kernel). Runs of a row that starts or ends inside a block are done one at a time.
 * 256-bit on purpose: the same loop on 512-bit registers (two blocks per step) ran 2x faster with the
 * weights in cache but ~2x slower streaming them from DRAM on the Zen 4 VM this was measured on. */
BITNET_I2S_T512 static inline __attribute__((always_inline)) void
bitnet_i2s_row512(const uint8_t *w, int64_t G, int64_t n_runs, const int8_t *const *q, int C, int32_t *out) {
    const __m256i k6 = _mm256_set1_epi8((char)0xC0), k4 = _mm256_set1_epi8(0x30), k2 = _mm256_set1_epi8(0x0C);
    const __m256i mask = _mm256_set1_epi8(3);
    __m256i e6[BITNET_I2S_DIRECT_MAX], e4[BITNET_I2S_DIRECT_MAX], e2[BITNET_I2S_DIRECT_MAX], e0[BITNET_I2S_DIRECT_MAX];
    __m256i sacc[BITNET_I2S_DIRECT_MAX];
    for (int c = 0; c < C; ++c) e6[c] = e4[c] = e2[c] = e0[c] = sacc[c] = _mm256_setzero_si256();
    int64_t g = 0;
    while (g < n_runs && (G & 3) != 0) /* head runs inside the first block */
        bitnet_i2s_run512(w, G++, q, g++, C, sacc);
    for (; g + 4 <= n_runs; g += 4, G += 4) { /* whole blocks */
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + (G >> 2) * 32));
        const __m256i v6 = _mm256_and_si256(v, k6), v4 = _mm256_and_si256(v, k4);
        const __m256i v2 = _mm256_and_si256(v, k2), v0 = _mm256_and_si256(v, mask);
        for (int c = 0; c < C; ++c) {
            const int8_t *qp = q[c] + g * 32;
            e6[c] = _mm256_dpbusd_epi32(e6[c], v6, _mm256_loadu_si256((const __m256i *)qp));
            e4[c] = _mm256_dpbusd_epi32(e4[c], v4, _mm256_loadu_si256((const __m256i *)(qp + 32)));
            e2[c] = _mm256_dpbusd_epi32(e2[c], v2, _mm256_loadu_si256((const __m256i *)(qp + 64)));
            e0[c] = _mm256_dpbusd_epi32(e0[c], v0, _mm256_loadu_si256((const __m256i *)(qp + 96)));
        }
    }
    while (g < n_runs) /* tail runs (the row ends inside a block) */
        bitnet_i2s_run512(w, G++, q, g++, C, sacc);
    for (int c = 0; c < C; ++c) {
        const int32_t s6 = bitnet_i2s_hsum_avx2(e6[c]), s4 = bitnet_i2s_hsum_avx2(e4[c]);
        const int32_t s2 = bitnet_i2s_hsum_avx2(e2[c]), s0 = bitnet_i2s_hsum_avx2(e0[c]);
        out[c] = (s6 >> 6) + (s4 >> 4) + (s2 >> 2) + s0 + bitnet_i2s_hsum_avx2(sacc[c]);
    }
}

/* Rows [m0, m1) × C (≤ BITNET_I2S_DIRECT_MAX) columns with the on-the-fly kernel above. */
BITNET_I2S_T512 static void bitnet_i2s_direct512(const uint8_t *w, int64_t K, const int8_t *const *q, int C,
                                                 int64_t m0, int64_t m1, int32_t *const *out) {
    int32_t r[BITNET_I2S_CB] = {0};
    for (int64_t m = m0; m < m1; ++m) {
        switch (C) {
        case 1: bitnet_i2s_row512(w, m * (K / 32), K / 32, q, 1, r); break;
        case 2: bitnet_i2s_row512(w, m * (K / 32), K / 32, q, 2, r); break;
        default: bitnet_i2s_row512(w, m * (K / 32), K / 32, q, 3, r); break;
        }
        for (int c = 0; c < C; ++c) out[c][m - m0] = r[c];
    }
}

/* N > 1: the weights of RB rows × one K slice are decoded to one byte per code once (into a stack
 * buffer that stays in L1/L2) and reused for every column; 4 × 4 (row, column) blocks of
 * _mm512_dpbusd_epi32 accumulators give 16 multiply-adds per 8 loads. Σ w·q = Σ code·q − Σ q.
 * N = 1, 2, 3 read the packed bytes directly (bitnet_i2s_row512: few columns do not repay a decoding
 * pass). 4 ≤ N < BITNET_I2S_DECODE_MIN, K % 32 ≠ 0, and K > 65536 on the direct path take the AVX2
 * kernel. N = 4..15: three-column direct passes lost to AVX2's four-column tiles (N = 8, 1 thread,
 * weights from DRAM, GOP/s avx2 / direct: 2560x2560 210-213 / 171-174, 6912x2560 224-230 / 179-183)
 * and decoding does not pay yet (2560x6912 N = 8: 206 / 190). N = 1 (bitnet-kernel-bench
 * --config BitNet-b1.58-2B-4T --threads 1 --batch none, min µs of 7 reps in three alternating runs,
 * AVX2 / direct): 640x2560 36-39 / 28.5-30, 2560x2560 122-140 / 89-113, 2560x6912 288-293 / 230-284,
 * 6912x2560 303-322 / 233-276. */
BITNET_I2S_T512 static void bitnet_i2s_gemm__avx512(const uint8_t *w, int64_t M, int64_t K, const int8_t *q,
                                                    size_t q_stride, const int32_t *qsum, int64_t n_cols, int64_t m0,
                                                    int64_t m1, int32_t *acc, size_t acc_stride) {
    if (K % 32 != 0 || (n_cols > BITNET_I2S_DIRECT_MAX && n_cols < BITNET_I2S_DECODE_MIN) ||
        (n_cols <= BITNET_I2S_DIRECT_MAX && K > 65536)) {
        bitnet_i2s_gemm__avx2(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
        return;
    }
    if (n_cols <= BITNET_I2S_DIRECT_MAX) {
        for (int64_t n0 = 0; n0 < n_cols; n0 += BITNET_I2S_DIRECT_MAX) {
            const int C = (int)(n_cols - n0 < BITNET_I2S_DIRECT_MAX ? n_cols - n0 : BITNET_I2S_DIRECT_MAX);
            const int8_t *qc[BITNET_I2S_DIRECT_MAX];
            int32_t *oc[BITNET_I2S_DIRECT_MAX];
            for (int c = 0; c < C; ++c) {
                qc[c] = q + (size_t)(n0 + c) * q_stride;
                oc[c] = acc + (size_t)(n0 + c) * acc_stride;
            }
            bitnet_i2s_direct512(w, K, qc, C, m0, m1, oc);
            for (int c = 0; c < C; ++c) {
                const int32_t s = qsum ? qsum[n0 + c] : bitnet_i2s_qsum(qc[c], K);
                for (int64_t m = m0; m < m1; ++m) oc[c][m - m0] -= s;
            }
        }
        return;
    }
    _Alignas(64) uint8_t dec[BITNET_I2S_RB * BITNET_I2S_KSLICE];
    const int64_t ks_max = K < BITNET_I2S_KSLICE ? K : BITNET_I2S_KSLICE;
    const size_t cs = (size_t)((ks_max + 63) / 64 * 64);
    for (int64_t r0 = m0; r0 < m1; r0 += BITNET_I2S_RB) {
        const int R = (int)(m1 - r0 < BITNET_I2S_RB ? m1 - r0 : BITNET_I2S_RB);
        for (int64_t k0 = 0; k0 < K; k0 += ks_max) {
            const int64_t len = K - k0 < ks_max ? K - k0 : ks_max;
            for (int r = 0; r < R; ++r) bitnet_i2s_decode_row(w, K, r0 + r, k0, len, dec + (size_t)r * cs);
            for (int64_t n0 = 0; n0 < n_cols; n0 += BITNET_I2S_CB) {
                const int C = (int)(n_cols - n0 < BITNET_I2S_CB ? n_cols - n0 : BITNET_I2S_CB);
                const int8_t *qc[BITNET_I2S_CB];
                for (int c = 0; c < C; ++c) qc[c] = q + (size_t)(n0 + c) * q_stride + k0;
                int32_t out[BITNET_I2S_RB][BITNET_I2S_CB];
                bitnet_i2s_block512_any(dec, cs, qc, len, R, C, out);
                for (int c = 0; c < C; ++c) {
                    int32_t *an = acc + (size_t)(n0 + c) * acc_stride + (size_t)(r0 - m0);
                    for (int r = 0; r < R; ++r) an[r] = k0 == 0 ? out[r][c] : an[r] + out[r][c];
                }
            }
        }
    }
    for (int64_t n = 0; n < n_cols; ++n) {
        const int32_t s = qsum ? qsum[n] : bitnet_i2s_qsum(q + (size_t)n * q_stride, K);
        int32_t *an = acc + (size_t)n * acc_stride;
        for (int64_t m = m0; m < m1; ++m) an[m - m0] -= s;
    }
}
#endif

/* ---- NEON ------------------------------------------------------------------------------------ */

#ifdef BITNET_I2S_HAVE_NEON
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

static void bitnet_i2s_gemm__neon(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                                  const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc,
                                  size_t acc_stride) {
    if (K % 32 != 0) {
        bitnet_i2s_gemm__scalar(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
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
#endif

/* ---- dispatch -------------------------------------------------------------------------------- */

typedef struct bitnet_i2s_version {
    const char *isa;
    bitnet_i2s_gemm_fn fn;
} bitnet_i2s_version;

/* Best first; "scalar" is last and always runs. */
static const bitnet_i2s_version bitnet_i2s_versions[] = {
#ifdef BITNET_I2S_HAVE_AVX2
    {"avx512", bitnet_i2s_gemm__avx512},
    {"avx2", bitnet_i2s_gemm__avx2},
#endif
#ifdef BITNET_I2S_HAVE_NEON
    {"neon", bitnet_i2s_gemm__neon},
#endif
    {"scalar", bitnet_i2s_gemm__scalar},
};
#define BITNET_I2S_N_VERSIONS (sizeof(bitnet_i2s_versions) / sizeof(bitnet_i2s_versions[0]))

bitnet_i2s_gemm_fn bitnet_i2s_gemm_for_isa(const char *isa) {
    if (isa == NULL) return NULL;
    for (size_t i = 0; i < BITNET_I2S_N_VERSIONS; ++i)
        if (strcmp(isa, bitnet_i2s_versions[i].isa) == 0)
            return (i + 1 == BITNET_I2S_N_VERSIONS || bitnet_cpu_supports(isa)) ? bitnet_i2s_versions[i].fn : NULL;
    return NULL;
}

/* 0 = not chosen yet, else index + 1 into bitnet_i2s_versions. Racing first calls choose the same. */
static atomic_int bitnet_i2s_choice = 0;

static const bitnet_i2s_version *bitnet_i2s_chosen(void) {
    int c = atomic_load_explicit(&bitnet_i2s_choice, memory_order_relaxed);
    if (c == 0) {
        size_t i = 0;
        while (i + 1 < BITNET_I2S_N_VERSIONS && !bitnet_cpu_supports(bitnet_i2s_versions[i].isa)) ++i;
        c = (int)i + 1;
        atomic_store_explicit(&bitnet_i2s_choice, c, memory_order_relaxed);
    }
    return &bitnet_i2s_versions[c - 1];
}

const char *bitnet_i2s_isa(void) {
    return bitnet_i2s_chosen()->isa;
}

void bitnet_i2s_gemm(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                     const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride) {
    bitnet_i2s_chosen()->fn(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
}

/* ---- activation quantization (LAYOUTS.md §1) ----------------------------------------------------- */

#ifdef BITNET_I2S_HAVE_AVX2
/* bitnet_quantize_act + bitnet_i2s_qsum with the same operations per element: max|x| is exact in any
 * order and skips NaN as the scalar loop does (MAXPS returns its second operand, the running max, when
 * the first is NaN); s is computed by the same expression; x·s is one IEEE multiply; ROUNDPS with
 * _MM_FROUND_TO_NEAREST_INT is round-half-even as nearbyintf in the default mode; NaN products map to 0
 * and the rest clamp to ±127 before the exact float → int conversion. */
__attribute__((target("avx2,fma"))) static float bitnet_i2s_quantize_act__avx2(const float *x, int64_t K, int8_t *q,
                                                                               int32_t *qsum) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + k), abs_mask), vmax);
    float lanes[8];
    _mm256_storeu_ps(lanes, vmax);
    float amax = 0.0f;
    for (int i = 0; i < 8; ++i)
        if (lanes[i] > amax) amax = lanes[i];
    for (; k < K; ++k) {
        const float a = fabsf(x[k]);
        if (a > amax) amax = a;
    }
    const float s = 127.0f / (amax > 1e-5f ? amax : 1e-5f);

    const __m256 vs = _mm256_set1_ps(s), hi = _mm256_set1_ps(127.0f), lo = _mm256_set1_ps(-127.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256i vsum = _mm256_setzero_si256();
    k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i i32[4];
        for (int v = 0; v < 4; ++v) {
            __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * v), vs),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            r = _mm256_and_ps(r, _mm256_cmp_ps(r, r, _CMP_ORD_Q)); /* NaN → 0 */
            r = _mm256_max_ps(_mm256_min_ps(r, hi), lo);
            i32[v] = _mm256_cvtps_epi32(r);
        }
        const __m256i p01 = _mm256_packs_epi32(i32[0], i32[1]); /* int16, lanes interleaved */
        const __m256i p23 = _mm256_packs_epi32(i32[2], i32[3]);
        vsum = _mm256_add_epi32(vsum, _mm256_madd_epi16(_mm256_add_epi16(p01, p23), ones16));
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p01, p23), order);
        _mm256_storeu_si256((__m256i *)(q + k), b);
    }
    int32_t sums[8];
    _mm256_storeu_si256((__m256i *)sums, vsum);
    int32_t total = 0;
    for (int i = 0; i < 8; ++i) total += sums[i];
    for (; k < K; ++k) {
        float r = nearbyintf(x[k] * s);
        if (r > 127.0f) r = 127.0f;
        else if (r < -127.0f) r = -127.0f;
        else if (!(r == r)) r = 0.0f;
        q[k] = (int8_t)r;
        total += q[k];
    }
    *qsum = total;
    return s;
}
#endif

float bitnet_i2s_quantize_act(const float *x, int64_t K, int8_t *q, int32_t *qsum) {
#ifdef BITNET_I2S_HAVE_AVX2
    const char *isa = bitnet_i2s_isa();
    if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avx512") == 0) return bitnet_i2s_quantize_act__avx2(x, K, q, qsum);
#endif
    const float s = bitnet_quantize_act(x, K, q);
    *qsum = bitnet_i2s_qsum(q, K);
    return s;
}
