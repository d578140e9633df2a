/* i2s_avx512.c — the AVX-512 VNNI I2_S × int8 product (bitnet_i2s_gemm__avx512): 1..3 columns
 * straight from the packed bytes (one column with K % 128 == 0: four rows per pass), 16 or more after
 * decoding rows to one byte per code (i2s.h); other column counts run the AVX2 version. Layout in
 * docs/LAYOUTS.md §2.

 * Layout facts used here: weight j of the flattened tensor (j = m·K + k) lives in block j / 128
 * (32 bytes), byte j % 32, bits 7-2r .. 6-2r with r = (j % 128) / 32; code c means w = c − 1.
 * So "run" G = j / 32 (32 consecutive weights) is (block[G / 4] >> (6 − 2·(G % 4))) & 3, byte by
 * byte. With K % 32 == 0 each row is the runs G = m·K/32 .. m·K/32 + K/32 − 1, whatever the block
 * boundaries are: rows that straddle blocks need no special case and no repacking.
 *
 * This file is compiled without -mavx512*: the functions carry the AVX-512 F/BW/VL/VNNI targets and
 * only run after bitnet_cpu_supports("avx512") said yes. On other targets it compiles to nothing. */
#include "kernels/i2s/i2s_internal.h"

#ifdef BITNET_I2S_HAVE_AVX2
#include <immintrin.h>

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

/* Bytes ahead of the current block that the four-row GEMV asks the memory for (row 0's pointer; the four
 * rows are one contiguous stretch of K bytes). */
#define BITNET_I2S_GEMV_PREFETCH 1024

/* One column, rows [m0, m0 + 4·n4) four at a time, K % 128 == 0 (every row whole blocks): each row's block
 * masked with 0xC0, 0x30, 0x0C, 0x03 and multiplied into the row's four accumulators as in
 * bitnet_i2s_row512, the four activation registers shared by the four rows: sixteen independent vpdpbusd
 * chains. Four rows that start on 64-byte boundaries (the tensor's data and K/4 both multiples of 64, so an
 * even number of blocks per row) take two consecutive blocks per zmm load (the activations of the two blocks
 * joined by vinserti64x4); other rows take one block per ymm load, so no load straddles two cache
 * lines (GGUF aligns tensors to 32 bytes only). One prefetch per row and 64 bytes, 1 KiB ahead. Every lane
 * of the 0xC0 accumulator is a sum of products code·64·q, so an exact multiple of 64 (likewise 16, 4), and is
 * divided back lane by lane (arithmetic shift, exact) before one horizontal sum per row.
 * out[m − m0] = Σ code·q for those rows (Σ q not yet subtracted). |lane| ≤ 192·128·4·K/128 < 2^31 for
 * K ≤ 65536. */
BITNET_I2S_T512 static void bitnet_i2s_gemv4_zmm(const uint8_t *p, size_t row, const int8_t *q, int64_t nb,
                                                 int32_t *out) {
    const __m512i k6 = _mm512_set1_epi8((char)0xC0), k4 = _mm512_set1_epi8(0x30), k2 = _mm512_set1_epi8(0x0C);
    const __m512i k0 = _mm512_set1_epi8(3);
    __m512i e[4][4];
    for (int r = 0; r < 4; ++r)
        for (int j = 0; j < 4; ++j) e[r][j] = _mm512_setzero_si512();
    for (int64_t b2 = 0; b2 < nb / 2; ++b2) {
        const size_t off = 64 * (size_t)b2;
        for (int r = 0; r < 4; ++r)
            _mm_prefetch((const char *)p + (size_t)r * row + off + BITNET_I2S_GEMV_PREFETCH, _MM_HINT_T0);
        const int8_t *qa = q + 256 * b2, *qb = qa + 128;
        __m512i qv[4];
        for (int j = 0; j < 4; ++j)
            qv[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(qa + 32 * j))),
                                       _mm256_loadu_si256((const __m256i *)(qb + 32 * j)), 1);
        for (int r = 0; r < 4; ++r) {
            const __m512i v = _mm512_load_si512((const void *)(p + (size_t)r * row + off));
            e[r][0] = _mm512_dpbusd_epi32(e[r][0], _mm512_and_si512(v, k6), qv[0]);
            e[r][1] = _mm512_dpbusd_epi32(e[r][1], _mm512_and_si512(v, k4), qv[1]);
            e[r][2] = _mm512_dpbusd_epi32(e[r][2], _mm512_and_si512(v, k2), qv[2]);
            e[r][3] = _mm512_dpbusd_epi32(e[r][3], _mm512_and_si512(v, k0), qv[3]);
        }
    }
    for (int r = 0; r < 4; ++r) {
        const __m512i t = _mm512_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(e[r][0], 6), _mm512_srai_epi32(e[r][1], 4)),
                                           _mm512_add_epi32(_mm512_srai_epi32(e[r][2], 2), e[r][3]));
        out[r] = _mm512_reduce_add_epi32(t);
    }
}

BITNET_I2S_T512 static void bitnet_i2s_gemv4_ymm(const uint8_t *p, size_t row, const int8_t *q, int64_t nb,
                                                 int32_t *out) {
    const __m256i k6 = _mm256_set1_epi8((char)0xC0), k4 = _mm256_set1_epi8(0x30), k2 = _mm256_set1_epi8(0x0C);
    const __m256i k0 = _mm256_set1_epi8(3);
    __m256i e[4][4];
    for (int r = 0; r < 4; ++r)
        for (int j = 0; j < 4; ++j) e[r][j] = _mm256_setzero_si256();
    for (int64_t b = 0; b < nb; ++b) {
        if (b % 2 == 0)
            for (int r = 0; r < 4; ++r)
                _mm_prefetch((const char *)p + (size_t)r * row + 32 * b + BITNET_I2S_GEMV_PREFETCH, _MM_HINT_T0);
        const int8_t *qb = q + 128 * b;
        const __m256i q6 = _mm256_loadu_si256((const __m256i *)qb);
        const __m256i q4 = _mm256_loadu_si256((const __m256i *)(qb + 32));
        const __m256i q2 = _mm256_loadu_si256((const __m256i *)(qb + 64));
        const __m256i q0 = _mm256_loadu_si256((const __m256i *)(qb + 96));
        for (int r = 0; r < 4; ++r) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(p + (size_t)r * row + 32 * b));
            e[r][0] = _mm256_dpbusd_epi32(e[r][0], _mm256_and_si256(v, k6), q6);
            e[r][1] = _mm256_dpbusd_epi32(e[r][1], _mm256_and_si256(v, k4), q4);
            e[r][2] = _mm256_dpbusd_epi32(e[r][2], _mm256_and_si256(v, k2), q2);
            e[r][3] = _mm256_dpbusd_epi32(e[r][3], _mm256_and_si256(v, k0), q0);
        }
    }
    for (int r = 0; r < 4; ++r) {
        const __m256i t = _mm256_add_epi32(_mm256_add_epi32(_mm256_srai_epi32(e[r][0], 6), _mm256_srai_epi32(e[r][1], 4)),
                                           _mm256_add_epi32(_mm256_srai_epi32(e[r][2], 2), e[r][3]));
        out[r] = bitnet_i2s_hsum_avx2(t);
    }
}

BITNET_I2S_T512 static void bitnet_i2s_gemv4_512(const uint8_t *w, int64_t K, const int8_t *q, int64_t m0,
                                                 int64_t n4, int32_t *out) {
    const size_t row = (size_t)(K / 4);
    for (int64_t i = 0; i < n4; ++i) {
        const uint8_t *p = w + (size_t)(m0 + 4 * i) * row;
        if ((uintptr_t)p % 64 == 0 && row % 64 == 0)
            bitnet_i2s_gemv4_zmm(p, row, q, K / 128, out + 4 * i);
        else
            bitnet_i2s_gemv4_ymm(p, row, q, K / 128, out + 4 * i);
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
 * pass); N = 1 with K % 128 == 0 four rows at a time (bitnet_i2s_gemv4_512: 1 thread, weights from DRAM,
 * the 2B-4T shapes 10.5-11.7 GB/s where one row at a time gave 6.1-7.4, Xeon VM with AVX-512). 4 ≤ N < BITNET_I2S_DECODE_MIN, K % 32 ≠ 0, and K > 65536 on the direct path take the AVX2
 * kernel. N = 4..15: three-column direct passes lost to AVX2's four-column tiles (N = 8, 1 thread,
 * weights from DRAM, GOP/s avx2 / direct: 2560x2560 210-213 / 171-174, 6912x2560 224-230 / 179-183)
 * and decoding does not pay yet (2560x6912 N = 8: 206 / 190). N = 1 (bitnet-kernel-bench
 * --config BitNet-b1.58-2B-4T --threads 1 --batch none, min µs of 7 reps in three alternating runs,
 * AVX2 / one row at a time, on the Zen 4 VM): 640x2560 36-39 / 28.5-30, 2560x2560 122-140 / 89-113,
 * 2560x6912 288-293 / 230-284, 6912x2560 303-322 / 233-276. */
BITNET_I2S_T512 void bitnet_i2s_gemm__avx512(const uint8_t *w, int64_t M, int64_t K, const int8_t *q,
                                                    size_t q_stride, const int32_t *qsum, int64_t n_cols, int64_t m0,
                                                    int64_t m1, int32_t *acc, size_t acc_stride) {
    if (K % 32 != 0 || (n_cols > BITNET_I2S_DIRECT_MAX && n_cols < BITNET_I2S_DECODE_MIN) ||
        (n_cols <= BITNET_I2S_DIRECT_MAX && K > 65536)) {
        bitnet_i2s_gemm__avx2(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
        return;
    }
    if (n_cols == 1 && K % 128 == 0) {
        const int64_t n4 = (m1 - m0) / 4;
        bitnet_i2s_gemv4_512(w, K, q, m0, n4, acc);
        if (m0 + 4 * n4 < m1) {
            int32_t *oc = acc + 4 * n4;
            bitnet_i2s_direct512(w, K, &q, 1, m0 + 4 * n4, m1, &oc);
        }
        const int32_t s = qsum ? qsum[0] : bitnet_i2s_qsum(q, K);
        for (int64_t m = m0; m < m1; ++m) acc[m - m0] -= s;
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
#else
typedef int bitnet_i2s_avx512_not_built; /* keeps the translation unit non-empty */
#endif
