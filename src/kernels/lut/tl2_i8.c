/* tl2_i8.c — bitnet_tl2_i8_gemm (tl2_i8.h): the int8 product of many activation columns read straight from
 * TL2 bytes (docs/LAYOUTS.md §4), in three versions: AVX-512 F/BW/VL/VNNI, AVX-VNNI and AVX2.
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
 * The AVX2 and AVX-VNNI versions decode into the same stash with AVX2 instructions only: the sign bytes come
 * from arithmetic shifts of the same shifted words and one vpacksswb, whose in-lane order (words 0..7 of the
 * first operand, then of the second, per 128-bit lane) is exactly the quarter order; a digit table with signed
 * digits (−1, 0, +1) is negated by vpsignb and offset by one. The AVX2 product takes 32 rows (four 256-bit
 * registers per quad) and 2 columns at a time: vpmaddubsw (two adjacent products per int16, |·| ≤ 512) added
 * in int16 for at most BITNET_TL2I8_RUN16 quads, then widened by vpmaddwd against ones into the int32 lanes.
 * The AVX-VNNI product takes 16 rows and up to BITNET_TL2I8_CB2 columns with 256-bit vpdpbusd straight into
 * the int32 lanes. (Block sizes and the unroll pragmas were chosen by timing on an AMD EPYC Zen 5; GCC 12
 * spills with more accumulators.)
 *
 * Exactness: each lane adds code·q products (|code·q| ≤ 2·128) without saturation, so every int32 sum is the
 * exact Σ (w + 1)·q, and subtracting Σ q gives bitnet_ref_gemm's value. */
#include "kernels/lut/tl2_i8.h"

#include <stdatomic.h>
#include <string.h>

#include "kernels/isa.h"

/* The stack buffer of decoded codes: one BK block (BK ≤ 1008) or the two-weight part (two_k ≤ 1024) of a
 * 32-row micro tile at most. */
#define BITNET_TL2I8_STASH 32768
/* Bytes decoded per K slice (whole BK blocks, at least one): 32 rows × 512 k, half of a 32 KiB L1d (Zen 3/4 and
 * many Intel cores), so the slice stays in L1 beside the columns' activations and accumulators. On the AMD
 * EPYC Zen 5 it was chosen on (48 KiB L1d) 16 and 32 KiB measured the same. */
#define BITNET_TL2I8_SLICE 16384

#if defined(__x86_64__)
#include <immintrin.h>

#define BITNET_TL2I8_T __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")))
#define BITNET_TL2I8_T2 __attribute__((target("avx2,fma")))
#define BITNET_TL2I8_TV __attribute__((target("avx2,fma,avxvnni")))

/* Columns per register block: 2 zmm accumulators each (32 rows), 16 in all. */
#define BITNET_TL2I8_CB 8
/* AVX-VNNI: columns per register block, 2 ymm accumulators each (16 rows), 12 in all, beside 2 weight and the
 * broadcast registers (AVX2 takes 2 columns × 4 accumulators, 32 rows) */
#define BITNET_TL2I8_CB2 6
_Static_assert(BITNET_TL2I8_CB <= 8 && BITNET_TL2I8_CB2 <= BITNET_TL2I8_CB,
               "BITNET_TL2I8_COLUMNS has cases for up to 8 columns");
/* AVX2: quads added in int16 before widening (each adds at most 2·2·128 = 512 per int16: 63 · 512 ≤ 32767) */
#define BITNET_TL2I8_RUN16 63

/* Row of byte position p (0..31) of a micro tile: quarters in the order 0, 2, 1, 3 (its own inverse). */
static int bitnet_tl2i8_row_of_pos(int p) {
    static const int qmap[4] = {0, 2, 1, 3};
    return qmap[p / 8] * 8 + p % 8;
}

/* The TL2 bytes of one decode, prefetched while the products of the previous one run (the weights come from
 * DRAM and a micro tile's bytes are 512- and 128-byte pieces at a stride of BM·BK/6 and BM·BK/24, which the
 * hardware prefetchers follow late): micro tile mt's K slice starting at BK block kb0 (kb0 < n_kb), else its
 * two-weight part (kb0 = n_kb). */
typedef struct {
    const uint8_t *index, *sign, *twop;
    int64_t BM, BK, n_kb, per_slice, two_k, n_mt;
} bitnet_tl2i8_src;

static void bitnet_tl2i8_prefetch(const bitnet_tl2i8_src *s, int64_t mt, int64_t kb0) {
    if (mt >= s->n_mt) return;
    if (kb0 < s->n_kb) {
        const int64_t kb1 = kb0 + s->per_slice < s->n_kb ? kb0 + s->per_slice : s->n_kb;
        for (int64_t kb = kb0; kb < kb1; ++kb) {
            const uint8_t *i = s->index + (size_t)(kb * s->BM * s->BK / 6 + mt * 32 * s->BK / 6);
            const uint8_t *g = s->sign + (size_t)(kb * s->BM * s->BK / 24 + mt * 32 * s->BK / 24);
            /* pieces start 32-byte aligned: every 64 bytes and the last byte reach each of their lines */
            for (int64_t o = 0; o < 32 * s->BK / 6; o += 64) __builtin_prefetch(i + o, 0, 3);
            __builtin_prefetch(i + 32 * s->BK / 6 - 1, 0, 3);
            for (int64_t o = 0; o < 32 * s->BK / 24; o += 64) __builtin_prefetch(g + o, 0, 3);
            __builtin_prefetch(g + 32 * s->BK / 24 - 1, 0, 3);
        }
    } else if (s->two_k > 0) {
        for (int64_t kb2 = 0; kb2 < s->two_k / 32; ++kb2)
            for (int o = 0; o <= 256; o += 64) /* 256 bytes, 32-byte aligned: up to 5 lines */
                __builtin_prefetch(s->twop + (size_t)(mt * 256 + kb2 * s->BM * 8) + (o < 256 ? o : 255), 0, 3);
    }
}

/* The decode that follows (mt, kb0) in the order of work: the next K slice, the two-weight part, the next micro
 * tile. */
static void bitnet_tl2i8_prefetch_next(const bitnet_tl2i8_src *s, int64_t mt, int64_t kb0) {
    if (kb0 < s->n_kb && kb0 + s->per_slice < s->n_kb)
        bitnet_tl2i8_prefetch(s, mt, kb0 + s->per_slice);
    else if (kb0 < s->n_kb && s->two_k > 0)
        bitnet_tl2i8_prefetch(s, mt, s->n_kb);
    else
        bitnet_tl2i8_prefetch(s, mt + 1, 0);
}

/* Four digit vectors → the 128-byte quad (four stores of 32 bytes, dst 32-byte aligned). AVX2 only, so every
 * version inlines it. */
BITNET_TL2I8_T2 static inline __attribute__((always_inline)) void bitnet_tl2i8_quad(__m256i A, __m256i B, __m256i C,
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
BITNET_TL2I8_T2 static inline __attribute__((always_inline)) void
bitnet_tl2i8_decode2(const uint8_t *two, int64_t two_k, int64_t BM, __m256i p0,
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
bitnet_tl2i8_block(const uint8_t *stash, int64_t n_quads, int h, const int8_t *const *q, int C, int32_t *const *out,
                   bool first) {
    (void)h; /* all 32 rows */
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

/* ---- AVX2 and AVX-VNNI ------------------------------------------------------------------------ */

/* decode3 with AVX2 only: the same quads as bitnet_tl2i8_decode3, from the same code tables; tabd[e] = tab[e] − 1
 * is the signed digit (−1, 0, +1). */
BITNET_TL2I8_T2 static void bitnet_tl2i8_decode3_avx2(const uint8_t *idx, const uint8_t *sgn, int64_t BK,
                                                      const __m256i tab[3], uint8_t *dst) {
    const __m256i lo4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    const __m256i tabd[3] = {_mm256_sub_epi8(tab[0], one), _mm256_sub_epi8(tab[1], one), _mm256_sub_epi8(tab[2], one)};
    for (int64_t u = 0; u < BK / 24; ++u) {
        const __m256i S = _mm256_loadu_si256((const __m256i *)(sgn + 32 * u));
        __m256i d[12];
        for (int half = 0; half < 2; ++half) { /* steps 4u + 2·half, 4u + 2·half + 1: 12 weights, 3 quads */
            for (int i = 0; i < 2; ++i) {
                const int step = 2 * half + i;
                const __m256i x = _mm256_loadu_si256((const __m256i *)(idx + 32 * (4 * u + step)));
                const __m256i nib[2] = {_mm256_and_si256(_mm256_srli_epi16(x, 4), lo4), _mm256_and_si256(x, lo4)};
                for (int h = 0; h < 2; ++h) {
                    const int j = 2 * step + h;
                    /* words of −1 where rows 0..15 (16..31) have the sign bit of group j, packed to bytes:
                     * lane 0 = rows 0..7, 16..23; lane 1 = rows 8..15, 24..31 — the quarter order */
                    const __m256i lo = _mm256_srai_epi16(_mm256_sll_epi16(S, _mm_cvtsi32_si128(2 * j)), 15);
                    const __m256i hi = _mm256_srai_epi16(_mm256_sll_epi16(S, _mm_cvtsi32_si128(2 * j + 1)), 15);
                    const __m256i sg = _mm256_or_si256(_mm256_packs_epi16(lo, hi), one); /* −1 or +1 per row */
                    for (int e = 0; e < 3; ++e)
                        d[6 * i + 3 * h + e] =
                            _mm256_add_epi8(_mm256_sign_epi8(_mm256_shuffle_epi8(tabd[e], nib[h]), sg), one);
                }
            }
            uint8_t *o = dst + (size_t)(6 * u + 3 * half) * 128;
            bitnet_tl2i8_quad(d[0], d[1], d[2], d[3], o);
            bitnet_tl2i8_quad(d[4], d[5], d[6], d[7], o + 128);
            bitnet_tl2i8_quad(d[8], d[9], d[10], d[11], o + 256);
        }
    }
}

/* AVX2: C (1 or 2) columns × n_quads quads, all 32 rows: out[c][l] (+)= Σ codes·q (lane order). Eight
 * accumulators, four weight and two broadcast registers: more columns would spill. */
BITNET_TL2I8_T2 static inline __attribute__((always_inline)) void
bitnet_tl2i8_block_avx2(const uint8_t *stash, int64_t n_quads, int h, const int8_t *const *q, int C,
                        int32_t *const *out, bool first) {
    (void)h;
    if (C < 1 || C > 2) __builtin_unreachable(); /* bitnet_tl2i8_slice_avx2 passes 1 or 2 */
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *q0 = q[0], *q1 = q[C - 1];
    for (int64_t j0 = 0; j0 < n_quads; j0 += BITNET_TL2I8_RUN16) {
        const int64_t j1 = j0 + BITNET_TL2I8_RUN16 < n_quads ? j0 + BITNET_TL2I8_RUN16 : n_quads;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
#pragma GCC unroll 4
        for (int64_t j = j0; j < j1; ++j) {
            const uint8_t *sp = stash + 128 * j;
            const __m256i w0 = _mm256_load_si256((const __m256i *)sp);
            const __m256i w1 = _mm256_load_si256((const __m256i *)(sp + 32));
            const __m256i w2 = _mm256_load_si256((const __m256i *)(sp + 64));
            const __m256i w3 = _mm256_load_si256((const __m256i *)(sp + 96));
            int32_t v;
            memcpy(&v, q0 + 4 * j, sizeof v);
            const __m256i x = _mm256_set1_epi32(v);
            a0 = _mm256_add_epi16(a0, _mm256_maddubs_epi16(w0, x));
            a1 = _mm256_add_epi16(a1, _mm256_maddubs_epi16(w1, x));
            a2 = _mm256_add_epi16(a2, _mm256_maddubs_epi16(w2, x));
            a3 = _mm256_add_epi16(a3, _mm256_maddubs_epi16(w3, x));
            if (C == 2) {
                memcpy(&v, q1 + 4 * j, sizeof v);
                const __m256i y = _mm256_set1_epi32(v);
                b0 = _mm256_add_epi16(b0, _mm256_maddubs_epi16(w0, y));
                b1 = _mm256_add_epi16(b1, _mm256_maddubs_epi16(w1, y));
                b2 = _mm256_add_epi16(b2, _mm256_maddubs_epi16(w2, y));
                b3 = _mm256_add_epi16(b3, _mm256_maddubs_epi16(w3, y));
            }
        }
        const __m256i acc[2][4] = {{a0, a1, a2, a3}, {b0, b1, b2, b3}};
        for (int c = 0; c < C; ++c)
            for (int r = 0; r < 4; ++r) {
                __m256i *o = (__m256i *)(out[c] + 8 * r);
                const __m256i wide = _mm256_madd_epi16(acc[c][r], ones);
                _mm256_storeu_si256(o, first && j0 == 0 ? wide : _mm256_add_epi32(_mm256_loadu_si256(o), wide));
            }
    }
}

/* AVX-VNNI: C ≤ BITNET_TL2I8_CB2 columns × n_quads quads, 16-row half h of the stash, with 256-bit vpdpbusd
 * straight into the int32 lanes: out[c][16h + l] (+)= Σ codes·q (lane order). */
BITNET_TL2I8_TV static inline __attribute__((always_inline)) void
bitnet_tl2i8_block_vnni(const uint8_t *stash, int64_t n_quads, int h, const int8_t *const *q, int C,
                        int32_t *const *out, bool first) {
    __m256i a[BITNET_TL2I8_CB2][2];
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < 2; ++r)
            a[c][r] = first ? _mm256_setzero_si256() : _mm256_loadu_si256((const __m256i *)(out[c] + 16 * h + 8 * r));
#pragma GCC unroll 2
    for (int64_t j = 0; j < n_quads; ++j) {
        const __m256i w0 = _mm256_load_si256((const __m256i *)(stash + 128 * j + 64 * h));
        const __m256i w1 = _mm256_load_si256((const __m256i *)(stash + 128 * j + 64 * h + 32));
        for (int c = 0; c < C; ++c) {
            int32_t v;
            memcpy(&v, q[c] + 4 * j, sizeof v);
            const __m256i qb = _mm256_set1_epi32(v);
            a[c][0] = _mm256_dpbusd_avx_epi32(a[c][0], w0, qb);
            a[c][1] = _mm256_dpbusd_avx_epi32(a[c][1], w1, qb);
        }
    }
    for (int c = 0; c < C; ++c)
        for (int r = 0; r < 2; ++r) _mm256_storeu_si256((__m256i *)(out[c] + 16 * h + 8 * r), a[c][r]);
}

/* Every column of one slice through BLOCK, CB columns at a time (CB ≤ BITNET_TL2I8_CB), over HALVES 16-row
 * halves (2; 1 for a block that takes all 32 rows). A macro so that each version's block inlines into a
 * function of its own target. */
#define BITNET_TL2I8_COLUMNS(BLOCK, CB, HALVES)                                                                \
    do {                                                                                                     \
        for (int64_t n0 = 0; n0 < n_cols; n0 += CB) {                                                        \
            const int C = (int)(n_cols - n0 < CB ? n_cols - n0 : CB);                                         \
            const int8_t *qc[BITNET_TL2I8_CB];                                                               \
            int32_t *oc[BITNET_TL2I8_CB];                                                                    \
            for (int c = 0; c < C; ++c) {                                                                    \
                qc[c] = q + (size_t)(n0 + c) * q_stride + k0;                                                \
                oc[c] = accm + (size_t)(n0 + c) * acc_stride;                                                \
            }                                                                                                \
            for (int h = 0; h < HALVES; ++h) switch (C) {                                                    \
                    case 8: if (CB >= 8) BLOCK(stash, n_quads, h, qc, 8, oc, first); break;                  \
                    case 7: if (CB >= 7) BLOCK(stash, n_quads, h, qc, 7, oc, first); break;                  \
                    case 6: if (CB >= 6) BLOCK(stash, n_quads, h, qc, 6, oc, first); break;                  \
                    case 5: if (CB >= 5) BLOCK(stash, n_quads, h, qc, 5, oc, first); break;                  \
                    case 4: if (CB >= 4) BLOCK(stash, n_quads, h, qc, 4, oc, first); break;                  \
                    case 3: if (CB >= 3) BLOCK(stash, n_quads, h, qc, 3, oc, first); break;                  \
                    case 2: if (CB >= 2) BLOCK(stash, n_quads, h, qc, 2, oc, first); break;                  \
                    default: BLOCK(stash, n_quads, h, qc, 1, oc, first); break;                              \
                }                                                                                            \
        }                                                                                                    \
    } while (0)

#define BITNET_TL2I8_SLICE_ARGS                                                                               \
    const uint8_t *stash, int64_t n_quads, const int8_t *q, size_t q_stride, int64_t k0, int64_t n_cols,     \
        int32_t *accm, size_t acc_stride, bool first
BITNET_TL2I8_T static void bitnet_tl2i8_slice_512(BITNET_TL2I8_SLICE_ARGS) {
    BITNET_TL2I8_COLUMNS(bitnet_tl2i8_block, BITNET_TL2I8_CB, 1);
}
BITNET_TL2I8_TV static void bitnet_tl2i8_slice_vnni(BITNET_TL2I8_SLICE_ARGS) {
    BITNET_TL2I8_COLUMNS(bitnet_tl2i8_block_vnni, BITNET_TL2I8_CB2, 2);
}
BITNET_TL2I8_T2 static void bitnet_tl2i8_slice_avx2(BITNET_TL2I8_SLICE_ARGS) {
    BITNET_TL2I8_COLUMNS(bitnet_tl2i8_block_avx2, 2, 1);
}

/* The versions, best first; each has its decode of the three-weight part, its slice of products and its way of
 * putting a micro tile's lanes back in row order. */
typedef enum { BITNET_TL2I8_AVX512, BITNET_TL2I8_AVXVNNI, BITNET_TL2I8_AVX2 } bitnet_tl2i8_version;

/* Lanes → row order and Σ q subtracted, AVX-512: two vpermt2d per column. */
BITNET_TL2I8_T static void bitnet_tl2i8_finish_512(int32_t *accm, size_t acc_stride, const int32_t *qsum,
                                                    int64_t n_cols, const int32_t lane_of_row[32]) {
    const __m512i perm_lo = _mm512_loadu_si512((const void *)lane_of_row);
    const __m512i perm_hi = _mm512_loadu_si512((const void *)(lane_of_row + 16));
    for (int64_t n = 0; n < n_cols; ++n) {
        int32_t *o = accm + (size_t)n * acc_stride;
        const __m512i a0 = _mm512_loadu_si512((const void *)o), a1 = _mm512_loadu_si512((const void *)(o + 16));
        const __m512i s = _mm512_set1_epi32(qsum[n]);
        _mm512_storeu_si512((void *)o, _mm512_sub_epi32(_mm512_permutex2var_epi32(a0, perm_lo, a1), s));
        _mm512_storeu_si512((void *)(o + 16), _mm512_sub_epi32(_mm512_permutex2var_epi32(a0, perm_hi, a1), s));
    }
}

/* The same with scalar moves (32 per column and micro tile), for the 256-bit versions. */
static void bitnet_tl2i8_finish_scalar(int32_t *accm, size_t acc_stride, const int32_t *qsum, int64_t n_cols,
                                       const int32_t lane_of_row[32]) {
    for (int64_t n = 0; n < n_cols; ++n) {
        int32_t *o = accm + (size_t)n * acc_stride, lanes[32];
        memcpy(lanes, o, sizeof lanes);
        for (int r = 0; r < 32; ++r) o[r] = lanes[lane_of_row[r]] - qsum[n];
    }
}

static void bitnet_tl2i8_slice_of(bitnet_tl2i8_version v, BITNET_TL2I8_SLICE_ARGS) {
    if (v == BITNET_TL2I8_AVX512)
        bitnet_tl2i8_slice_512(stash, n_quads, q, q_stride, k0, n_cols, accm, acc_stride, first);
    else if (v == BITNET_TL2I8_AVXVNNI)
        bitnet_tl2i8_slice_vnni(stash, n_quads, q, q_stride, k0, n_cols, accm, acc_stride, first);
    else
        bitnet_tl2i8_slice_avx2(stash, n_quads, q, q_stride, k0, n_cols, accm, acc_stride, first);
}

/* One call of version v (arguments checked by the caller): per 32-row micro tile, K slice by K slice, decode the
 * weights into the stash (prefetching the next decode's bytes) and multiply every column by it; then the
 * two-weight part; then the lanes back to row order. */
BITNET_TL2I8_T2 static void bitnet_tl2i8_gemm(bitnet_tl2i8_version v, const bitnet_lut_shape *sh, const uint8_t *w,
                                              int64_t tile, const int8_t *q, size_t q_stride, const int32_t *qsum,
                                              int64_t n_cols, int32_t *acc, size_t acc_stride) {
    const int64_t M = sh->M, BM = sh->BM, BK = sh->BK, three_k = sh->three_k, two_k = sh->two_k;
    /* code tables: three-weight nibbles (14, 15 never occur: the loader refuses them) and pair nibbles */
    _Alignas(32) uint8_t tb[5][32];
    for (int n = 0; n < 16; ++n) {
        const int u = n + 13;
        const uint8_t c[5] = {(uint8_t)(n < 14 ? u / 9 : 1), (uint8_t)(n < 14 ? u / 3 % 3 : 1),
                              (uint8_t)(n < 14 ? u % 3 : 1), (uint8_t)(n < 9 ? n / 3 : 1),
                              (uint8_t)(n < 9 ? n % 3 : 1)};
        for (int e = 0; e < 5; ++e) tb[e][n] = tb[e][n + 16] = c[e];
    }
    const __m256i tab[3] = {_mm256_load_si256((const __m256i *)tb[0]), _mm256_load_si256((const __m256i *)tb[1]),
                            _mm256_load_si256((const __m256i *)tb[2])};
    const __m256i p0 = _mm256_load_si256((const __m256i *)tb[3]), p1 = _mm256_load_si256((const __m256i *)tb[4]);
    /* lane order → row order: rows 0..15 and 16..31 gathered from the lanes 0..31 */
    int32_t lane_of_row[32];
    for (int L = 0; L < 32; ++L) {
        const int lv = L / 8, e = L % 8;
        lane_of_row[bitnet_tl2i8_row_of_pos(16 * (e / 4) + 4 * lv + e % 4)] = L;
    }

    _Alignas(64) uint8_t stash[BITNET_TL2I8_STASH];
    const int64_t n_kb = three_k / BK;
    const int64_t per_slice = BITNET_TL2I8_SLICE / (32 * BK) > 0 ? BITNET_TL2I8_SLICE / (32 * BK) : 1;
    const uint8_t *index = w + (size_t)(tile * BM * three_k / 6);
    const uint8_t *sign = w + (size_t)(three_k * M / 6) + (size_t)(tile * BM * three_k / 24);
    const uint8_t *twop = w + (size_t)(three_k * M / 6 + three_k * M / 24) + (size_t)(tile * BM * two_k / 4);
    const bitnet_tl2i8_src src = {index, sign, twop, BM, BK, n_kb, per_slice, two_k, BM / 32};
    bitnet_tl2i8_prefetch(&src, 0, 0); /* the first decode's lines requested at once, not one by one */
    for (int64_t mt = 0; mt < BM / 32; ++mt) {
        int32_t *accm = acc + 32 * mt;
        bool first = true;
        for (int64_t kb0 = 0; kb0 < n_kb; kb0 += per_slice) {
            const int64_t kb1 = kb0 + per_slice < n_kb ? kb0 + per_slice : n_kb;
            for (int64_t kb = kb0; kb < kb1; ++kb) {
                const uint8_t *ip = index + (size_t)(kb * BM * BK / 6 + mt * 32 * BK / 6);
                const uint8_t *sp = sign + (size_t)(kb * BM * BK / 24 + mt * 32 * BK / 24);
                uint8_t *dst = stash + (size_t)((kb - kb0) * 32 * BK);
                if (v == BITNET_TL2I8_AVX512)
                    bitnet_tl2i8_decode3(ip, sp, BK, tab, dst);
                else
                    bitnet_tl2i8_decode3_avx2(ip, sp, BK, tab, dst);
            }
            bitnet_tl2i8_prefetch_next(&src, mt, kb0);
            bitnet_tl2i8_slice_of(v, stash, (kb1 - kb0) * BK / 4, q, q_stride, kb0 * BK, n_cols, accm, acc_stride,
                                  first);
            first = false;
        }
        if (two_k > 0) {
            bitnet_tl2i8_decode2(twop + (size_t)(mt * 256), two_k, BM, p0, p1, stash);
            bitnet_tl2i8_prefetch_next(&src, mt, n_kb);
            bitnet_tl2i8_slice_of(v, stash, two_k / 4, q, q_stride, three_k, n_cols, accm, acc_stride, first);
        }
        if (v == BITNET_TL2I8_AVX512)
            bitnet_tl2i8_finish_512(accm, acc_stride, qsum, n_cols, lane_of_row);
        else
            bitnet_tl2i8_finish_scalar(accm, acc_stride, qsum, n_cols, lane_of_row);
    }
}
#endif

/* The tiles the kernel takes (every legal TL2 tiling: bitnet_tiles_check asks the same and more). */
static bool bitnet_tl2i8_shape_ok(const bitnet_lut_shape *sh) {
    return sh != NULL && sh->bm == 32 && sh->BM > 0 && sh->BM % 32 == 0 && sh->BK > 0 && sh->BK % 24 == 0 &&
           sh->BK <= BITNET_TL2I8_STASH / 32 && sh->two_k >= 0 && sh->two_k % 32 == 0 &&
           sh->two_k <= BITNET_TL2I8_STASH / 32 && sh->three_k % sh->BK == 0;
}

#if defined(__x86_64__)
/* The public form of version v: the arguments checked, then bitnet_tl2i8_gemm. */
#define BITNET_TL2I8_RUN(name_, v_)                                                                          \
    static bool name_(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile, const int8_t *q,          \
                      size_t q_stride, const int32_t *qsum, int64_t n_cols, int32_t *acc, size_t acc_stride) { \
        if (w == NULL || q == NULL || qsum == NULL || acc == NULL || n_cols < 1 || !bitnet_tl2i8_shape_ok(sh) || \
            acc_stride < (size_t)sh->BM)                                                                     \
            return false;                                                                                    \
        bitnet_tl2i8_gemm(v_, sh, w, tile, q, q_stride, qsum, n_cols, acc, acc_stride);                      \
        return true;                                                                                         \
    }
BITNET_TL2I8_RUN(bitnet_tl2i8_run_512, BITNET_TL2I8_AVX512)
BITNET_TL2I8_RUN(bitnet_tl2i8_run_vnni, BITNET_TL2I8_AVXVNNI)
BITNET_TL2I8_RUN(bitnet_tl2i8_run_avx2, BITNET_TL2I8_AVX2)
#undef BITNET_TL2I8_RUN

/* Best first. */
static const struct {
    const char *isa;
    bitnet_tl2_i8_fn fn;
} bitnet_tl2i8_versions[] = {
    {"avx512", bitnet_tl2i8_run_512}, {"avxvnni", bitnet_tl2i8_run_vnni}, {"avx2", bitnet_tl2i8_run_avx2}};
#define BITNET_TL2I8_N_VERSIONS ((int)(sizeof bitnet_tl2i8_versions / sizeof bitnet_tl2i8_versions[0]))

bitnet_tl2_i8_fn bitnet_tl2_i8_for_isa(const char *isa) {
    if (isa == NULL) return NULL;
    for (int i = 0; i < BITNET_TL2I8_N_VERSIONS; ++i)
        if (strcmp(isa, bitnet_tl2i8_versions[i].isa) == 0)
            return bitnet_cpu_supports(isa) ? bitnet_tl2i8_versions[i].fn : NULL;
    return NULL;
}

/* 0 = not chosen yet, else index + 1 into bitnet_tl2i8_versions (N_VERSIONS + 1: none). Racing first calls
 * choose the same. */
static atomic_int bitnet_tl2i8_choice = 0;

const char *bitnet_tl2_i8_isa(void) {
    int c = atomic_load_explicit(&bitnet_tl2i8_choice, memory_order_relaxed);
    if (c == 0) {
        int i = 0;
        while (i < BITNET_TL2I8_N_VERSIONS && !bitnet_cpu_supports(bitnet_tl2i8_versions[i].isa)) ++i;
        c = i + 1;
        atomic_store_explicit(&bitnet_tl2i8_choice, c, memory_order_relaxed);
    }
    return c <= BITNET_TL2I8_N_VERSIONS ? bitnet_tl2i8_versions[c - 1].isa : NULL;
}

bool bitnet_tl2_i8_available(void) { return bitnet_tl2_i8_isa() != NULL; }

bool bitnet_tl2_i8_gemm(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile, const int8_t *q,
                        size_t q_stride, const int32_t *qsum, int64_t n_cols, int32_t *acc, size_t acc_stride) {
    const char *isa = bitnet_tl2_i8_isa();
    for (int i = 0; isa != NULL && i < BITNET_TL2I8_N_VERSIONS; ++i)
        if (bitnet_tl2i8_versions[i].isa == isa)
            return bitnet_tl2i8_versions[i].fn(sh, w, tile, q, q_stride, qsum, n_cols, acc, acc_stride);
    return false;
}
#else
/* Not an x86-64 build: no version. */
bitnet_tl2_i8_fn bitnet_tl2_i8_for_isa(const char *isa) {
    (void)isa;
    return NULL;
}

const char *bitnet_tl2_i8_isa(void) { return NULL; }

bool bitnet_tl2_i8_available(void) { return false; }

bool bitnet_tl2_i8_gemm(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile, const int8_t *q,
                        size_t q_stride, const int32_t *qsum, int64_t n_cols, int32_t *acc, size_t acc_stride) {
    (void)sh, (void)w, (void)tile, (void)q, (void)q_stride, (void)qsum, (void)n_cols, (void)acc, (void)acc_stride;
    return false;
}
#endif

bool bitnet_tl2_i8_supports(const bitnet_lut_shape *sh) {
    return bitnet_tl2i8_shape_ok(sh) && bitnet_tl2_i8_available();
}
