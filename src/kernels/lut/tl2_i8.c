/* tl2_i8.c — bitnet_tl2_i8_gemm (tl2_i8.h): the int8 product of many activation columns read straight from
 * TL2 bytes (docs/LAYOUTS.md §4), AVX-512 F/BW/VL/VNNI.
 *
 * Per 32-row micro tile and K slice, the weights are decoded once into a stack buffer (the "stash", L1) in
 * the form vpdpbusd takes with rows in lanes: one dword lane per row holding the codes (w + 1, 0..2) of four
 * consecutive k. Every column then costs, per four k and 32 rows, one broadcast of its four int8 activations
 * and two 512-bit vpdpbusd; up to BITNET_TL2I8_CB columns share each pair of weight loads.
 *
 * Decoding one index step (32 bytes: groups 2s and 2s+1 of 32 rows, LAYOUTS.md §4) and its sign bits:
 *   nibble n = |v| (v = 9·w0 + 3·w1 + w2): three 16-entry byte shuffles give the codes of w0, w1, w2 for
 *   v = +n (code = digit + 1, from n + 13 = 9·code0 + 3·code1 + code2); v = −n negates every digit, i.e.
 *   code → 2 − code, applied under a 32-bit mask with one masked subtraction per digit vector.
 *   The mask of group j of a 24-weight step: word c of the 16 sign words holds rows c (bit 15 − 2j) and c + 16
 *   (bit 14 − 2j); shifting left by 2j (2j + 1) and taking each word's top bit (vpmovw2m) gives rows 0..15
 *   (16..31) in natural order, which are put in the index bytes' quarter order (0, 2, 1, 3).
 * Four digit vectors (k, k+1, k+2, k+3; byte b = the row at byte position b) become the dword lanes by two
 * rounds of byte/word unpacks: lane L = 8v + e of the 128-byte quad (v = stored vector 0..3) holds byte
 * position 16·(e / 4) + 4v + e % 4. The accumulators therefore hold rows in that order and are put back in
 * row order (two vpermt2d per column) once per call.
 *
 * Exactness: each lane adds code·q products (|code·q| ≤ 2·128) without saturation, so every int32 sum is the
 * exact Σ (w + 1)·q, and subtracting Σ q gives bitnet_ref_gemm's value. */
#include "kernels/lut/tl2_i8.h"

#include <string.h>

#include "kernels/isa.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define BITNET_TL2I8_T __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")))

/* Bytes of decoded codes per micro tile and K slice: 32 rows × 1024 k fit in L1 beside the activations. */
#define BITNET_TL2I8_STASH 32768
/* Columns per register block: 2 zmm accumulators each (32 rows), 16 in all. */
#define BITNET_TL2I8_CB 8

/* Row of byte position p (0..31) of a micro tile: quarters in the order 0, 2, 1, 3 (its own inverse). */
static int bitnet_tl2i8_row_of_pos(int p) {
    static const int qmap[4] = {0, 2, 1, 3};
    return qmap[p / 8] * 8 + p % 8;
}

/* Four digit vectors → the 128-byte quad (four stores of 32 bytes, dst 32-byte aligned). */
BITNET_TL2I8_T static inline __attribute__((always_inline)) void bitnet_tl2i8_quad(__m256i A, __m256i B, __m256i C,
                                                                                 __m256i D, uint8_t *dst) {
    const __m256i abl = _mm256_unpacklo_epi8(A, B), abh = _mm256_unpackhi_epi8(A, B);
    const __m256i cdl = _mm256_unpacklo_epi8(C, D), cdh = _mm256_unpackhi_epi8(C, D);
    _mm256_store_si256((__m256i *)dst, _mm256_unpacklo_epi16(abl, cdl));
    _mm256_store_si256((__m256i *)(dst + 32), _mm256_unpackhi_epi16(abl, cdl));
    _mm256_store_si256((__m256i *)(dst + 64), _mm256_unpacklo_epi16(abh, cdh));
    _mm256_store_si256((__m256i *)(dst + 96), _mm256_unpackhi_epi16(abh, cdh));
}

/* Sign mask of group j (0..7) of the sign words S, one bit per byte position (quarter order). */
BITNET_TL2I8_T static inline __attribute__((always_inline)) __mmask32 bitnet_tl2i8_sign(__m256i S, int j) {
    const uint32_t lo = _mm256_movepi16_mask(_mm256_sll_epi16(S, _mm_cvtsi32_si128(2 * j)));
    const uint32_t hi = _mm256_movepi16_mask(_mm256_sll_epi16(S, _mm_cvtsi32_si128(2 * j + 1)));
    return (lo & 0xFFu) | (hi & 0xFFu) << 8 | (lo & 0xFF00u) << 8 | (hi & 0xFF00u) << 16;
}

/* One BK block of the three-weight part of one micro tile: idx = its BK/6 index steps, sgn = its BK/24
 * sign steps; writes BK/4 quads to dst. tab[e]: code of digit e for nibble n (both 128-bit lanes). */
BITNET_TL2I8_T static void bitnet_tl2i8_decode3(const uint8_t *idx, const uint8_t *sgn, int64_t BK,
                                                 const __m256i tab[3], uint8_t *dst) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(2);
    for (int64_t u = 0; u < BK / 24; ++u) {
        const __m256i S = _mm256_loadu_si256((const __m256i *)(sgn + 32 * u));
        __m256i d[12];
        for (int half = 0; half < 2; ++half) { /* steps 4u + 2·half, 4u + 2·half + 1: 12 weights, 3 quads */
            for (int i = 0; i < 2; ++i) {
                const int step = 2 * half + i;
                const __m256i x = _mm256_loadu_si256((const __m256i *)(idx + 32 * (4 * u + step)));
                const __m256i nib[2] = {_mm256_and_si256(_mm256_srli_epi16(x, 4), lo4), _mm256_and_si256(x, lo4)};
                for (int h = 0; h < 2; ++h) {
                    const __mmask32 m = bitnet_tl2i8_sign(S, 2 * step + h);
                    for (int e = 0; e < 3; ++e) {
                        const __m256i c = _mm256_shuffle_epi8(tab[e], nib[h]);
                        d[6 * i + 3 * h + e] = _mm256_mask_sub_epi8(c, m, two, c);
                    }
                }
            }
            uint8_t *o = dst + (size_t)(6 * u + 3 * half) * 128;
            bitnet_tl2i8_quad(d[0], d[1], d[2], d[3], o);
            bitnet_tl2i8_quad(d[4], d[5], d[6], d[7], o + 128);
            bitnet_tl2i8_quad(d[8], d[9], d[10], d[11], o + 256);
        }
    }
}

/* The two-weight part of one micro tile: two_k/32 blocks of 8 steps at stride BM·8 bytes (the other micro
 * tiles' steps in between); step s of block kb2 holds pairs 16·kb2 + 2s (high nibble) and + 1, i.e. one
 * quad. p0/p1: codes of the pair's first/second weight for nibble 3·w0 + w1 + 4. */
BITNET_TL2I8_T static void bitnet_tl2i8_decode2(const uint8_t *two, int64_t two_k, int64_t BM, __m256i p0,
                                                 __m256i p1, uint8_t *dst) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    for (int64_t kb2 = 0; kb2 < two_k / 32; ++kb2)
        for (int s = 0; s < 8; ++s) {
            const __m256i x = _mm256_loadu_si256((const __m256i *)(two + kb2 * BM * 8 + 32 * s));
            const __m256i nh = _mm256_and_si256(_mm256_srli_epi16(x, 4), lo4), nl = _mm256_and_si256(x, lo4);
            bitnet_tl2i8_quad(_mm256_shuffle_epi8(p0, nh), _mm256_shuffle_epi8(p1, nh), _mm256_shuffle_epi8(p0, nl),
                              _mm256_shuffle_epi8(p1, nl), dst + (size_t)(kb2 * 8 + s) * 128);
        }
}

/* C columns (constant after inlining) × n_quads quads of the stash: out[c][L] (+)= Σ codes·q in lane order.
 * q[c] points at the slice's first activation of column c. */
BITNET_TL2I8_T static inline __attribute__((always_inline)) void
bitnet_tl2i8_block(const uint8_t *stash, int64_t n_quads, const int8_t *const *q, int C, int32_t *const *out,
                   bool first) {
    __m512i a[BITNET_TL2I8_CB][2];
    for (int c = 0; c < C; ++c) {
        a[c][0] = first ? _mm512_setzero_si512() : _mm512_loadu_si512((const void *)out[c]);
        a[c][1] = first ? _mm512_setzero_si512() : _mm512_loadu_si512((const void *)(out[c] + 16));
    }
    for (int64_t j = 0; j < n_quads; ++j) {
        const __m512i w0 = _mm512_load_si512((const void *)(stash + 128 * j));
        const __m512i w1 = _mm512_load_si512((const void *)(stash + 128 * j + 64));
        for (int c = 0; c < C; ++c) {
            int32_t v;
            memcpy(&v, q[c] + 4 * j, sizeof v);
            const __m512i qb = _mm512_set1_epi32(v);
            a[c][0] = _mm512_dpbusd_epi32(a[c][0], w0, qb);
            a[c][1] = _mm512_dpbusd_epi32(a[c][1], w1, qb);
        }
    }
    for (int c = 0; c < C; ++c) {
        _mm512_storeu_si512((void *)out[c], a[c][0]);
        _mm512_storeu_si512((void *)(out[c] + 16), a[c][1]);
    }
}

/* Every column of one slice, BITNET_TL2I8_CB at a time. */
BITNET_TL2I8_T static void bitnet_tl2i8_slice(const uint8_t *stash, int64_t n_quads, const int8_t *q, size_t q_stride,
                                               int64_t k0, int64_t n_cols, int32_t *accm, size_t acc_stride,
                                               bool first) {
    for (int64_t n0 = 0; n0 < n_cols; n0 += BITNET_TL2I8_CB) {
        const int C = (int)(n_cols - n0 < BITNET_TL2I8_CB ? n_cols - n0 : BITNET_TL2I8_CB);
        const int8_t *qc[BITNET_TL2I8_CB];
        int32_t *oc[BITNET_TL2I8_CB];
        for (int c = 0; c < C; ++c) {
            qc[c] = q + (size_t)(n0 + c) * q_stride + k0;
            oc[c] = accm + (size_t)(n0 + c) * acc_stride;
        }
        switch (C) {
#define BITNET_TL2I8_CASE(c_) \
    case c_: bitnet_tl2i8_block(stash, n_quads, qc, c_, oc, first); break;
            BITNET_TL2I8_CASE(8) BITNET_TL2I8_CASE(7) BITNET_TL2I8_CASE(6) BITNET_TL2I8_CASE(5)
            BITNET_TL2I8_CASE(4) BITNET_TL2I8_CASE(3) BITNET_TL2I8_CASE(2) BITNET_TL2I8_CASE(1)
#undef BITNET_TL2I8_CASE
        default: break;
        }
    }
}

BITNET_TL2I8_T static void bitnet_tl2i8_gemm_512(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile,
                                                  const int8_t *q, size_t q_stride, const int32_t *qsum,
                                                  int64_t n_cols, int32_t *acc, size_t acc_stride) {
    const int64_t M = sh->M, BM = sh->BM, BK = sh->BK, three_k = sh->three_k, two_k = sh->two_k;
    /* code tables: three-weight nibbles (14, 15 never occur: the loader refuses them) and pair nibbles */
    _Alignas(32) uint8_t tb[5][32];
    for (int n = 0; n < 16; ++n) {
        const int u = n + 13;
        const uint8_t c[5] = {(uint8_t)(n < 14 ? u / 9 : 1), (uint8_t)(n < 14 ? u / 3 % 3 : 1),
                              (uint8_t)(n < 14 ? u % 3 : 1), (uint8_t)(n < 9 ? n / 3 : 1), (uint8_t)(n < 9 ? n % 3 : 1)};
        for (int e = 0; e < 5; ++e) tb[e][n] = tb[e][n + 16] = c[e];
    }
    const __m256i tab[3] = {_mm256_load_si256((const __m256i *)tb[0]), _mm256_load_si256((const __m256i *)tb[1]),
                            _mm256_load_si256((const __m256i *)tb[2])};
    const __m256i p0 = _mm256_load_si256((const __m256i *)tb[3]), p1 = _mm256_load_si256((const __m256i *)tb[4]);
    /* lane order → row order: rows 0..15 and 16..31 gathered from the two accumulators (lanes 0..31) */
    int32_t lane_of_row[32];
    for (int L = 0; L < 32; ++L) {
        const int v = L / 8, e = L % 8;
        lane_of_row[bitnet_tl2i8_row_of_pos(16 * (e / 4) + 4 * v + e % 4)] = L;
    }
    const __m512i perm_lo = _mm512_loadu_si512((const void *)lane_of_row);
    const __m512i perm_hi = _mm512_loadu_si512((const void *)(lane_of_row + 16));

    _Alignas(64) uint8_t stash[BITNET_TL2I8_STASH];
    const int64_t n_kb = three_k / BK, per_slice = BITNET_TL2I8_STASH / (32 * BK);
    const uint8_t *index = w + (size_t)(tile * BM * three_k / 6);
    const uint8_t *sign = w + (size_t)(three_k * M / 6) + (size_t)(tile * BM * three_k / 24);
    const uint8_t *twop = w + (size_t)(three_k * M / 6 + three_k * M / 24) + (size_t)(tile * BM * two_k / 4);
    for (int64_t mt = 0; mt < BM / 32; ++mt) {
        int32_t *accm = acc + 32 * mt;
        bool first = true;
        for (int64_t kb0 = 0; kb0 < n_kb; kb0 += per_slice) {
            const int64_t kb1 = kb0 + per_slice < n_kb ? kb0 + per_slice : n_kb;
            for (int64_t kb = kb0; kb < kb1; ++kb)
                bitnet_tl2i8_decode3(index + (size_t)(kb * BM * BK / 6 + mt * 32 * BK / 6),
                                     sign + (size_t)(kb * BM * BK / 24 + mt * 32 * BK / 24), BK, tab,
                                     stash + (size_t)((kb - kb0) * 32 * BK));
            bitnet_tl2i8_slice(stash, (kb1 - kb0) * BK / 4, q, q_stride, kb0 * BK, n_cols, accm, acc_stride, first);
            first = false;
        }
        if (two_k > 0) {
            bitnet_tl2i8_decode2(twop + (size_t)(mt * 256), two_k, BM, p0, p1, stash);
            bitnet_tl2i8_slice(stash, two_k / 4, q, q_stride, three_k, n_cols, accm, acc_stride, first);
        }
        for (int64_t n = 0; n < n_cols; ++n) {
            int32_t *o = accm + (size_t)n * acc_stride;
            const __m512i a0 = _mm512_loadu_si512((const void *)o), a1 = _mm512_loadu_si512((const void *)(o + 16));
            const __m512i s = _mm512_set1_epi32(qsum[n]);
            _mm512_storeu_si512((void *)o, _mm512_sub_epi32(_mm512_permutex2var_epi32(a0, perm_lo, a1), s));
            _mm512_storeu_si512((void *)(o + 16), _mm512_sub_epi32(_mm512_permutex2var_epi32(a0, perm_hi, a1), s));
        }
    }
}

bool bitnet_tl2_i8_available(void) { return bitnet_cpu_supports("avx512"); }

/* The tiles the kernel takes (every legal TL2 tiling: bitnet_tiles_check asks the same and more). */
static bool bitnet_tl2i8_shape_ok(const bitnet_lut_shape *sh) {
    return sh != NULL && sh->bm == 32 && sh->BM > 0 && sh->BM % 32 == 0 && sh->BK > 0 && sh->BK % 24 == 0 &&
           sh->BK <= BITNET_TL2I8_STASH / 32 && sh->two_k >= 0 && sh->two_k % 32 == 0 &&
           sh->two_k <= BITNET_TL2I8_STASH / 32 && sh->three_k % sh->BK == 0;
}

bool bitnet_tl2_i8_supports(const bitnet_lut_shape *sh) { return bitnet_tl2i8_shape_ok(sh) && bitnet_tl2_i8_available(); }

bool bitnet_tl2_i8_gemm(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile, const int8_t *q,
                        size_t q_stride, const int32_t *qsum, int64_t n_cols, int32_t *acc, size_t acc_stride) {
    if (w == NULL || q == NULL || qsum == NULL || acc == NULL || n_cols < 1 || !bitnet_tl2i8_shape_ok(sh) ||
        acc_stride < (size_t)sh->BM)
        return false;
    bitnet_tl2i8_gemm_512(sh, w, tile, q, q_stride, qsum, n_cols, acc, acc_stride);
    return true;
}
#else
bool bitnet_tl2_i8_available(void) { return false; }

bool bitnet_tl2_i8_supports(const bitnet_lut_shape *sh) {
    (void)sh;
    return false;
}

bool bitnet_tl2_i8_gemm(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile, const int8_t *q,
                        size_t q_stride, const int32_t *qsum, int64_t n_cols, int32_t *acc, size_t acc_stride) {
    (void)sh, (void)w, (void)tile, (void)q, (void)q_stride, (void)qsum, (void)n_cols, (void)acc, (void)acc_stride;
    return false;
}
#endif
