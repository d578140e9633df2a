/* pack.c — ternarization, the tile rules, and the packers/unpackers between a ternary int8 matrix
 * w[M*K] (row-major, row m = output m, values -1/0/+1) and the stored layouts I2_S, TL1 and TL2.
 *
 * Every byte position computed here is a formula of docs/LAYOUTS.md §2-4 (I2_S and TL2 restate
 * ../shared/docs/formats.md, measured on bitnet.cpp's files; TL1 follows bitnet.cpp's TL1
 * preprocessor order as LAYOUTS.md §3 states). The readable per-element decoder that the kernels are
 * tested against lives in lut_ref.c; the packers here loop in storage order instead, so the two are
 * independent implementations of the same page and the tests compare them.
 */
#include "kernels/lut/pack.h"

#include "base/mem.h"
#include "base/types.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Ternarization (formats.md "I2_S": the converters' rule)
 * ------------------------------------------------------------------------------------------- */

float bitnet_ternarize(const float *W, int64_t n, int8_t *w) {
    if (n <= 0) return 0.0f;
    /* mean|W| summed in double: the converters sum in float32 (torch/numpy pairwise sums), which can
     * differ in the last bit for huge tensors; double is the closer of the two to the exact mean. */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(W[i]);
        if (a == a) sum += a; /* NaN weights count as 0 */
    }
    const float mean = (float)(sum / (double)n);
    const float d = mean > 1e-5f ? mean : 1e-5f;
    const float s = 1.0f / d;
    bool any = false;
    for (int64_t i = 0; i < n; i++) {
        const float r = rintf(W[i] * s); /* default rounding mode: half to even, as torch.round */
        int8_t v = 0;
        if (r >= 1.0f) v = 1;
        else if (r <= -1.0f) v = -1; /* NaN compares false: 0 */
        w[i] = v;
        any |= v != 0;
    }
    return any ? 1.0f / s : 0.0f;
}

/* ---------------------------------------------------------------------------------------------
 * Tile rules — the runtime mirror of codegen/targets.py (_common_rules, _tl1_rules, _tl2_rules).
 * The rule sentences are the same strings, so a message reads the same from codegen and runtime.
 * ------------------------------------------------------------------------------------------- */

typedef struct rule_log {
    char text[768];
    size_t len;
    int count;
} rule_log;

/* Append "field = value: rule" to the log. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void rule_add(rule_log *log, const char *field, long long value, const char *fmt, ...) {
    char rule[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rule, sizeof rule, fmt, ap);
    va_end(ap);
    if (log->len < sizeof log->text) {
        int n = snprintf(log->text + log->len, sizeof log->text - log->len, "%s%s = %lld: %s",
                         log->count ? "; " : "", field, value, rule);
        if (n > 0) log->len += (size_t)n;
        if (log->len > sizeof log->text) log->len = sizeof log->text;
    }
    log->count++;
}

bitnet_status bitnet_tiles_check(int type, int64_t M, int64_t K, bitnet_tiles tiles, bitnet_error *err) {
    if (type != BITNET_TYPE_TL1 && type != BITNET_TYPE_TL2) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "tiles are defined for TL1 (38) and TL2 (39) weights only, got type id %d", type);
    }
    const bool tl1 = type == BITNET_TYPE_TL1;
    const char *tn = tl1 ? "TL1" : "TL2";
    const long long BM = tiles.BM, BK = tiles.BK, bm = tiles.bm;
    rule_log log = {{0}, 0, 0};

    const struct { const char *f; long long v; } pos[] = {
        {"m", (long long)M}, {"k", (long long)K}, {"block_m", BM}, {"block_k", BK}, {"simd_m", bm}};
    for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++) {
        if (pos[i].v <= 0) rule_add(&log, pos[i].f, pos[i].v, "must be a positive integer");
    }
    if (log.count == 0) {
        const bool bm_ok = tl1 ? (bm == 32 || bm == 64) : bm == 32;
        if (!bm_ok) {
            rule_add(&log, "simd_m", bm, "%s kernels compute %s rows per SIMD step", tn, tl1 ? "32 or 64" : "32");
        }
        if (M % BM != 0) {
            rule_add(&log, "block_m", BM, "m %% block_m must be 0 (m = %lld, remainder %lld)", (long long)M,
                     (long long)(M % BM));
        }
        if (BM % bm != 0) rule_add(&log, "block_m", BM, "block_m %% simd_m must be 0 (simd_m = %lld)", bm);
        const long long bk_max = tl1 ? 256 : 255;
        if (BK > bk_max) {
            rule_add(&log, "block_k", BK, "block_k <= %lld: the int16 accumulator of one block could overflow",
                     bk_max);
        }
        if (tl1) {
            if (K % BK != 0) {
                rule_add(&log, "block_k", BK, "k %% block_k must be 0 for TL1 (k = %lld, remainder %lld)",
                         (long long)K, (long long)(K % BK));
            }
            if (bm_ok) {
                const long long by = 256 / bm;
                if (BK % by != 0) {
                    rule_add(&log, "block_k", BK,
                             "block_k must be a multiple of %lld (the weights one TL1 step consumes with "
                             "simd_m = %lld)",
                             by, bm);
                }
            }
        } else {
            if (BK % 24 != 0) {
                rule_add(&log, "block_k", BK,
                         "block_k must be a multiple of 24 (the TL2 kernel consumes 8 groups of 3 per sign "
                         "word; block_k %% 6 == 0 alone would silently drop weights)");
            }
            if ((K % BK) % 32 != 0) {
                rule_add(&log, "block_k", BK,
                         "(k %% block_k) %% 32 must be 0: the two-weight tail of K is processed 32 at a time "
                         "(k = %lld, k %% block_k = %lld)",
                         (long long)K, (long long)(K % BK));
            }
            if (K < 256) {
                rule_add(&log, "k", (long long)K,
                         "k >= 256: the TL2 tensor size formula of formats.md is defined with K - 256");
            }
        }
    }
    if (log.count == 0) return BITNET_OK;
    return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s tiles for M=%lld, K=%lld (block_m=%lld, block_k=%lld, "
                       "simd_m=%lld) break %d rule%s: %s",
                       tn, (long long)M, (long long)K, BM, BK, bm, log.count, log.count == 1 ? "" : "s", log.text);
}

bitnet_lut_shape bitnet_lut_shape_make(int type, int64_t M, int64_t K, bitnet_tiles tiles) {
    bitnet_lut_shape sh;
    sh.M = M;
    sh.K = K;
    sh.BM = tiles.BM;
    sh.BK = tiles.BK;
    sh.bm = tiles.bm;
    if (type == BITNET_TYPE_TL2 && tiles.BK > 0) {
        sh.three_k = K / tiles.BK * tiles.BK;
        sh.two_k = K - sh.three_k;
    } else {
        sh.three_k = 0;
        sh.two_k = K;
    }
    return sh;
}

/* ---------------------------------------------------------------------------------------------
 * Sizes (formats.md "Byte size of one tensor")
 * ------------------------------------------------------------------------------------------- */

/* The formulas live once, in the type traits (base/types.c). */
size_t bitnet_i2s_nbytes(int64_t M, int64_t K) { return bitnet_ternary_nbytes(BITNET_TYPE_I2_S, M, K); }

size_t bitnet_tl1_nbytes(int64_t M, int64_t K) { return bitnet_ternary_nbytes(BITNET_TYPE_TL1, M, K); }

size_t bitnet_tl2_nbytes(int64_t M, int64_t K) { return bitnet_ternary_nbytes(BITNET_TYPE_TL2, M, K); }

size_t bitnet_ternary_scale_offset(int type, int64_t M, int64_t K) {
    return bitnet_ternary_data_bytes(type == BITNET_TYPE_TL2 ? BITNET_TYPE_TL2 : BITNET_TYPE_I2_S, M, K);
}

/* ---------------------------------------------------------------------------------------------
 * Shared checks
 * ------------------------------------------------------------------------------------------- */

static bitnet_status check_dims(const char *what, int64_t M, int64_t K, bitnet_error *err) {
    if (M <= 0 || K <= 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: M=%lld, K=%lld must be positive", what,
                           (long long)M, (long long)K);
    }
    if (M > INT64_MAX / K || M * K > (int64_t)(SIZE_MAX / 2)) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: M=%lld x K=%lld overflows", what, (long long)M,
                           (long long)K);
    }
    return BITNET_OK;
}

static bitnet_status check_ternary(const char *what, const int8_t *w, int64_t rows, int64_t K, int64_t row0,
                                   bitnet_error *err) {
    /* a branch-free pass first (vectorized by the compiler), the search for the place only when it fails */
    unsigned bad = 0;
    for (int64_t j = 0; j < rows * K; j++) bad |= (uint8_t)(w[j] + 1) > 2;
    if (!bad) return BITNET_OK;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t k = 0; k < K; k++) {
            const int8_t v = w[r * K + k];
            if (v < -1 || v > 1) {
                return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                                   "%s: weight at row %lld, column %lld is %d, not -1, 0 or +1", what,
                                   (long long)(row0 + r), (long long)k, (int)v);
            }
        }
    }
    return BITNET_OK;
}

static bitnet_status check_scale(const char *what, float scale, bitnet_status st, bitnet_error *err) {
    if (!isfinite(scale)) {
        return bitnet_fail(err, st, "%s: tensor scale is not finite (%g)", what, (double)scale);
    }
    return BITNET_OK;
}

/* The scale and the 28 zero bytes after it. */
static void write_tail(uint8_t *dst, size_t scale_off, float scale) {
    memcpy(dst + scale_off, &scale, sizeof scale);
    memset(dst + scale_off + 4, 0, 28);
}

/* ---------------------------------------------------------------------------------------------
 * I2_S (LAYOUTS.md §2): flat index j = m*K + k; block j/128 of 32 bytes; byte j%32 of the block,
 * bits 6-2*((j%128)/32) .. 7-2*((j%128)/32); code = w + 1.
 * ------------------------------------------------------------------------------------------- */

bitnet_status bitnet_pack_i2s(const int8_t *w, int64_t M, int64_t K, float scale, uint8_t *dst, bitnet_error *err) {
    bitnet_status st = check_dims("I2_S pack", M, K, err);
    if (st) return st;
    const int64_t n = M * K;
    if (n % 128 != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "I2_S pack: M*K = %lld x %lld = %lld is not a multiple of 128 (whole 32-byte blocks)",
                           (long long)M, (long long)K, (long long)n);
    }
    if ((st = check_ternary("I2_S pack", w, M, K, 0, err))) return st;
    if ((st = check_scale("I2_S pack", scale, BITNET_ERR_INVALID_ARG, err))) return st;
    for (int64_t blk = 0; blk < n / 128; blk++) {
        const int8_t *src = w + blk * 128;
        uint8_t *out = dst + blk * 32;
        for (int p = 0; p < 32; p++) {
            out[p] = (uint8_t)((src[p] + 1) << 6 | (src[p + 32] + 1) << 4 | (src[p + 64] + 1) << 2 |
                               (src[p + 96] + 1));
        }
    }
    write_tail(dst, (size_t)n / 4, scale);
    return BITNET_OK;
}

/* Blocks [blk0, blk1) of an x86-order I2_S tensor (32 bytes = 128 weights: byte b, bits 7-2r..6-2r hold
 * weight 32r + b) decoded into w (weight blk0·128 at w[0]; NULL: only checked). A block with a code-3 pair
 * (both bits set) is looked at weight by weight for the error message, which names the flat index, row and
 * column in the M x K tensor. */
static bitnet_status i2s_decode_blocks(const uint8_t *src, int64_t M, int64_t K, int64_t blk0, int64_t blk1, int8_t *w,
                                       bitnet_error *err) {
    for (int64_t blk = blk0; blk < blk1; blk++) {
        const uint8_t *p = src + blk * 32;
        unsigned bad = 0;
        for (int b = 0; b < 32; b++) bad |= (unsigned)(p[b] & (p[b] >> 1) & 0x55);
        if (bad) {
            for (int r = 0; r < 4; r++)
                for (int b = 0; b < 32; b++) {
                    if ((p[b] >> (6 - 2 * r) & 3) != 3) continue;
                    const int64_t j = blk * 128 + 32 * r + b;
                    return bitnet_fail(err, BITNET_ERR_FORMAT,
                                       "I2_S: code 3 (no ternary value) at flat index %lld (row %lld, column %lld) of "
                                       "a %lld x %lld tensor",
                                       (long long)j, (long long)(j / K), (long long)(j % K), (long long)M, (long long)K);
                }
        }
        if (!w) continue;
        int8_t *o = w + (blk - blk0) * 128;
        for (int r = 0; r < 4; r++)
            for (int b = 0; b < 32; b++) o[32 * r + b] = (int8_t)((p[b] >> (6 - 2 * r) & 3) - 1);
    }
    return BITNET_OK;
}

bitnet_status bitnet_unpack_i2s(const uint8_t *src, int64_t M, int64_t K, int8_t *w, float *scale,
                                bitnet_error *err) {
    bitnet_status st = check_dims("I2_S unpack", M, K, err);
    if (st) return st;
    const int64_t n = M * K;
    if (n % 128 != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "I2_S unpack: M*K = %lld x %lld = %lld is not a multiple of 128", (long long)M,
                           (long long)K, (long long)n);
    }
    float s;
    memcpy(&s, src + n / 4, sizeof s);
    if ((st = check_scale("I2_S unpack", s, BITNET_ERR_FORMAT, err))) return st;
    if ((st = i2s_decode_blocks(src, M, K, 0, n / 128, w, err))) return st;
    if (scale) *scale = s;
    return BITNET_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The three I2_S layouts of bitnet.cpp's quantize_i2_s (LAYOUTS.md §2, formats.md "Other layouts")
 * and their rewrite into the X86 layout above.
 * ------------------------------------------------------------------------------------------- */

void bitnet_i2s_locate(int layout, int64_t M, int64_t K, int64_t m, int64_t k, size_t *byte, int *shift) {
    (void)M;
    const int64_t j = m * K + k;
    switch (layout) {
    case BITNET_I2S_LAYOUT_ARM64:
        *byte = (size_t)(16 * (j / 64) + j % 16);
        *shift = 6 - 2 * (int)(j % 64 / 16);
        break;
    case BITNET_I2S_LAYOUT_ROWS4:
        *byte = (size_t)(K * (m / 4) + k);
        *shift = 6 - 2 * (int)(m % 4);
        break;
    default:
        *byte = (size_t)(32 * (j / 128) + j % 32);
        *shift = 6 - 2 * (int)(j % 128 / 32);
        break;
    }
}

/* The weight (m, k) whose code sits at bits 7-2q .. 6-2q of byte B: bitnet_i2s_locate inverted. */
static void i2s_weight_at(int layout, int64_t K, int64_t B, int q, int64_t *m, int64_t *k) {
    int64_t j;
    switch (layout) {
    case BITNET_I2S_LAYOUT_ARM64: j = B / 16 * 64 + 16 * q + B % 16; break;
    case BITNET_I2S_LAYOUT_ROWS4:
        *m = 4 * (B / K) + q;
        *k = B % K;
        return;
    default: j = B / 32 * 128 + 32 * q + B % 32; break;
    }
    *m = j / K;
    *k = j % K;
}

bitnet_status bitnet_i2s_layout_check(int layout, int64_t M, int64_t K, bitnet_error *err) {
    const char *name = bitnet_i2s_layout_name(layout);
    if (name == NULL) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "I2_S layout %d is unknown", layout);
    bitnet_status st = check_dims("I2_S layout", M, K, err);
    if (st) return st;
    if ((M * K) % 128 != 0) {
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "I2_S (%s layout): M*K = %lld x %lld = %lld is not a multiple of 128 (the runtime's "
                           "32-byte blocks)",
                           name, (long long)M, (long long)K, (long long)(M * K));
    }
    if (layout == BITNET_I2S_LAYOUT_ROWS4 && M % 4 != 0) {
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "I2_S (rows4 layout): M = %lld rows are not a whole number of 4-row groups (K = %lld)",
                           (long long)M, (long long)K);
    }
    return BITNET_OK;
}

bitnet_status bitnet_i2s_relayout(int layout, const uint8_t *src, int64_t M, int64_t K, uint8_t *dst,
                                  bitnet_error *err) {
    if (layout == BITNET_I2S_LAYOUT_AUTO) layout = BITNET_I2S_LAYOUT_X86;
    bitnet_status st = bitnet_i2s_layout_check(layout, M, K, err);
    if (st) return st;
    const int64_t nb = M * K / 4; /* code bytes */
    float s;
    memcpy(&s, src + nb, sizeof s);
    if ((st = check_scale("I2_S", s, BITNET_ERR_FORMAT, err))) return st;
    for (int64_t B = 0; B < nb; B++) {
        if ((src[B] & (src[B] >> 1) & 0x55) == 0) continue;
        int q = 0;
        while ((src[B] >> (6 - 2 * q) & 3) != 3) q++;
        int64_t m, k;
        i2s_weight_at(layout, K, B, q, &m, &k);
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "I2_S (%s layout): code 3 (no ternary value) at row %lld, column %lld of a %lld x %lld "
                           "tensor (byte %lld)",
                           bitnet_i2s_layout_name(layout), (long long)m, (long long)k, (long long)M, (long long)K,
                           (long long)B);
    }
    switch (layout) {
    case BITNET_I2S_LAYOUT_ARM64:
        /* 128 weights = two ARM64 blocks (bytes 0..15, 16..31) = one X86 block. X86 byte p < 16 holds
         * weights p, 32+p, 64+p, 96+p: bits 7:6 and 3:2 of ARM64 bytes p and 16+p; X86 byte 16+p holds
         * weights 16+p, 48+p, 80+p, 112+p: bits 5:4 and 1:0 of the same two bytes. */
        for (int64_t c = 0; c < nb / 32; c++) {
            const uint8_t *a = src + 32 * c;
            uint8_t *d = dst + 32 * c;
            for (int p = 0; p < 16; p++) {
                const unsigned s0 = a[p], s1 = a[16 + p];
                d[p] = (uint8_t)((s0 & 0xC0u) | (s0 & 0x0Cu) << 2 | (s1 & 0xC0u) >> 4 | (s1 & 0x0Cu) >> 2);
                d[16 + p] = (uint8_t)((s0 & 0x30u) << 2 | (s0 & 0x03u) << 4 | (s1 & 0x30u) >> 2 | (s1 & 0x03u));
            }
        }
        break;
    case BITNET_I2S_LAYOUT_ROWS4:
        /* X86 byte p of block b holds flat indices 128b + 32q + p, q = 0..3: four runs of 32 consecutive
         * weights, each read from its row's 2-bit field of the 4-row group bytes. A run inside one row (every
         * run when K % 32 == 0) is one shift of 32 consecutive bytes; a run across rows goes weight by weight. */
        for (int64_t b = 0; b < nb / 32; b++) {
            uint8_t *d = dst + 32 * b;
            memset(d, 0, 32);
            for (int q = 0; q < 4; q++) {
                int64_t m = (128 * b + 32 * q) / K, k = (128 * b + 32 * q) % K;
                const int to = 6 - 2 * q;
                if (k + 32 <= K) {
                    const uint8_t *r = src + K * (m / 4) + k;
                    const int from = 6 - 2 * (int)(m % 4);
                    for (int p = 0; p < 32; p++) d[p] |= (uint8_t)(((unsigned)r[p] >> from & 3u) << to);
                    continue;
                }
                for (int p = 0; p < 32; p++) {
                    d[p] |= (uint8_t)(((unsigned)src[K * (m / 4) + k] >> (6 - 2 * (m % 4)) & 3u) << to);
                    if (++k == K) k = 0, m++;
                }
            }
        }
        break;
    default: memcpy(dst, src, (size_t)nb); break;
    }
    write_tail(dst, (size_t)nb, s);
    return BITNET_OK;
}

/* ---------------------------------------------------------------------------------------------
 * TL1 (LAYOUTS.md §3). Pair nibble idx = 3*w0 + w1 + 4. Loops run in storage order:
 * t, kb, mt, s, h, q, i → one byte idx[row][p0] << 4 | idx[row][p0 + 1].
 * ------------------------------------------------------------------------------------------- */

static uint8_t pair_nibble(int w0, int w1) {
    return (uint8_t)(3 * w0 + w1 + 4);
}

static bitnet_status tl1_prepare(const char *what, int64_t M, int64_t K, bitnet_tiles tiles, bitnet_error *err) {
    bitnet_status st = check_dims(what, M, K, err);
    if (st) return st;
    return bitnet_tiles_check(BITNET_TYPE_TL1, M, K, tiles, err);
}

/* Pack rows of tile t (wt: [BM][K]) into dst (full tensor base). */
static void tl1_pack_tile(const int8_t *wt, int64_t M, int64_t K, bitnet_tiles tl, int64_t t, uint8_t *dst) {
    (void)M;
    const int64_t BM = tl.BM, BK = tl.BK, bm = tl.bm, by = 256 / bm;
    uint8_t *out = dst + t * BM * K / 4;
    for (int64_t kb = 0; kb < K / BK; kb++) {
        for (int64_t mt = 0; mt < BM / bm; mt++) {
            for (int64_t s = 0; s < BK / by; s++) {
                for (int64_t h = 0; h < bm / 16; h++) {
                    for (int64_t q = 0; q < by / 4; q++) {
                        const int64_t k0 = kb * BK + s * by + 4 * q; /* = 2 * p0 */
                        for (int64_t i = 0; i < 16; i++) {
                            const int8_t *row = wt + (mt * bm + h * 16 + i) * K;
                            *out++ = (uint8_t)(pair_nibble(row[k0], row[k0 + 1]) << 4 |
                                               pair_nibble(row[k0 + 2], row[k0 + 3]));
                        }
                    }
                }
            }
        }
    }
}

bitnet_status bitnet_pack_tl1_tile(const int8_t *w_tile, int64_t M, int64_t K, bitnet_tiles tiles, int64_t tile,
                                   uint8_t *dst, bitnet_error *err) {
    bitnet_status st = tl1_prepare("TL1 pack", M, K, tiles, err);
    if (st) return st;
    if (tile < 0 || tile >= M / tiles.BM) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "TL1 pack: tile %lld out of range (M=%lld / BM=%d tiles)",
                           (long long)tile, (long long)M, (int)tiles.BM);
    }
    if ((st = check_ternary("TL1 pack", w_tile, tiles.BM, K, tile * tiles.BM, err))) return st;
    tl1_pack_tile(w_tile, M, K, tiles, tile, dst);
    return BITNET_OK;
}

bitnet_status bitnet_pack_tl1(const int8_t *w, int64_t M, int64_t K, bitnet_tiles tiles, float scale, uint8_t *dst,
                              bitnet_error *err) {
    bitnet_status st = tl1_prepare("TL1 pack", M, K, tiles, err);
    if (st) return st;
    if ((st = check_ternary("TL1 pack", w, M, K, 0, err))) return st;
    if ((st = check_scale("TL1 pack", scale, BITNET_ERR_INVALID_ARG, err))) return st;
    for (int64_t t = 0; t < M / tiles.BM; t++) tl1_pack_tile(w + t * tiles.BM * K, M, K, tiles, t, dst);
    write_tail(dst, bitnet_ternary_scale_offset(BITNET_TYPE_TL1, M, K), scale);
    return BITNET_OK;
}

/* Decode one nibble of a pair into w[row][k], w[row][k+1] (w NULL: only check); false for nibbles > 8. */
static bool pair_decode(unsigned nib, int8_t *w) {
    if (nib > 8) return false;
    if (w) {
        w[0] = (int8_t)((int)nib / 3 - 1);
        w[1] = (int8_t)((int)nib % 3 - 1);
    }
    return true;
}

bitnet_status bitnet_unpack_tl1(const uint8_t *src, int64_t M, int64_t K, bitnet_tiles tiles, int8_t *w,
                                float *scale, bitnet_error *err) {
    bitnet_status st = tl1_prepare("TL1 unpack", M, K, tiles, err);
    if (st) return st;
    float s;
    memcpy(&s, src + bitnet_ternary_scale_offset(BITNET_TYPE_TL1, M, K), sizeof s);
    if ((st = check_scale("TL1 unpack", s, BITNET_ERR_FORMAT, err))) return st;
    const int64_t BM = tiles.BM, BK = tiles.BK, bm = tiles.bm, by = 256 / bm;
    const uint8_t *in = src;
    for (int64_t t = 0; t < M / BM; t++) {
        for (int64_t kb = 0; kb < K / BK; kb++) {
            for (int64_t mt = 0; mt < BM / bm; mt++) {
                for (int64_t s2 = 0; s2 < BK / by; s2++) {
                    for (int64_t h = 0; h < bm / 16; h++) {
                        for (int64_t q = 0; q < by / 4; q++) {
                            const int64_t k0 = kb * BK + s2 * by + 4 * q;
                            for (int64_t i = 0; i < 16; i++) {
                                const int64_t row = t * BM + mt * bm + h * 16 + i;
                                const uint8_t b = *in++;
                                for (int half = 0; half < 2; half++) {
                                    const unsigned nib = half == 0 ? b >> 4 : b & 15u;
                                    const int64_t k = k0 + 2 * half;
                                    if (!pair_decode(nib, w ? w + row * K + k : NULL)) {
                                        return bitnet_fail(err, BITNET_ERR_FORMAT,
                                                           "TL1: nibble %u > 8 at byte %lld (row %lld, columns "
                                                           "%lld-%lld) of a %lld x %lld tensor",
                                                           nib, (long long)(in - 1 - src), (long long)row,
                                                           (long long)k, (long long)(k + 1), (long long)M,
                                                           (long long)K);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    if (scale) *scale = s;
    return BITNET_OK;
}

/* ---------------------------------------------------------------------------------------------
 * TL2 (LAYOUTS.md §4; formats.md "TL2"). Quarter order: byte b of a 32-row micro tile holds row
 * qrow(b) = qmap[b/8]*8 + b%8 with qmap = {0, 2, 1, 3}.
 * ------------------------------------------------------------------------------------------- */

static int64_t qrow(int64_t b) {
    static const int qmap[4] = {0, 2, 1, 3};
    return qmap[b / 8] * 8 + b % 8;
}


typedef struct tl2_geom {
    int64_t M, K, BM, BK, three_k, two_k;
    size_t sign_off, two_off, padded;
} tl2_geom;

static tl2_geom tl2_geom_make(int64_t M, int64_t K, bitnet_tiles tl) {
    tl2_geom g;
    g.M = M;
    g.K = K;
    g.BM = tl.BM;
    g.BK = tl.BK;
    g.three_k = K / tl.BK * tl.BK;
    g.two_k = K - g.three_k;
    g.sign_off = (size_t)(g.three_k * M / 6);
    g.two_off = g.sign_off + (size_t)(g.three_k * M / 24);
    g.padded = bitnet_ternary_data_bytes(BITNET_TYPE_TL2, M, K);
    return g;
}

static bitnet_status tl2_prepare(const char *what, int64_t M, int64_t K, bitnet_tiles tiles, tl2_geom *g,
                                 bitnet_error *err) {
    bitnet_status st = check_dims(what, M, K, err);
    if (st) return st;
    if ((st = bitnet_tiles_check(BITNET_TYPE_TL2, M, K, tiles, err))) return st;
    *g = tl2_geom_make(M, K, tiles);
    /* Streams fit below the scale whenever the rules hold (two_k < BK <= 255 < 256); checked anyway. */
    if (g->two_off + (size_t)(g->two_k * M / 4) > g->padded) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s: TL2 streams (%llu bytes) exceed the formats.md size %llu for M=%lld, K=%lld, "
                           "block_k=%d",
                           what, (unsigned long long)(g->two_off + (size_t)(g->two_k * M / 4)), (unsigned long long)g->padded, (long long)M, (long long)K,
                           (int)tiles.BK);
    }
    return BITNET_OK;
}

/* Pack tile t (wt: [BM][K]) into the three streams of dst. For each 32-row micro tile and each BK-wide block
 * of the three-part, the group values v (BK/3 groups × 32 rows, group-major: gv[G·32 + r], at most 85 × 32
 * signed bytes on the stack) are computed once, then that block's bytes of the index and sign streams
 * (LAYOUTS.md §4) are written from 32-byte runs of gv: each value read twice instead of decoded twice from
 * three weights. No memory beyond the stack (the bare-metal build has no heap). */
enum { TL2_GV_GROUPS = 255 / 3 }; /* BK <= 255 (bitnet_tiles_check) */

static void tl2_pack_tile(const int8_t *wt, const tl2_geom *g, int64_t t, uint8_t *dst) {
    const int64_t BM = g->BM, BK = g->BK, K = g->K;
    uint8_t *idx = dst + t * BM * g->three_k / 6;
    uint8_t *sgn = dst + g->sign_off + t * BM * g->three_k / 24;
    const int64_t n_kb = g->three_k / BK, n_mt = BM / 32, s_per_kb = BK / 6, u_per_kb = BK / 24;
    int8_t gv[TL2_GV_GROUPS * 32];
    for (int64_t kb = 0; kb < n_kb; kb++) {
        for (int64_t mt = 0; mt < n_mt; mt++) {
            const int8_t *rows = wt + mt * 32 * K + kb * BK;
            for (int64_t G = 0; G < BK / 3; G++) /* three-weight group: v = 9·w0 + 3·w1 + w2 */
                for (int64_t r = 0; r < 32; r++) {
                    const int8_t *w3 = rows + r * K + 3 * G;
                    gv[G * 32 + r] = (int8_t)(9 * w3[0] + 3 * w3[1] + w3[2]);
                }
            /* index stream: byte b of a 32-byte run holds row qrow(b) = {0, 2, 1, 3}[b / 8]·8 + b % 8 */
            uint8_t *out = idx + ((kb * n_mt + mt) * s_per_kb) * 32;
            for (int64_t s = 0; s < s_per_kb; s++, out += 32) {
                const int8_t *g0 = gv + 2 * s * 32, *g1 = g0 + 32;
                uint8_t nib[32];
                for (int r = 0; r < 32; r++) {
                    const int v0 = g0[r], v1 = g1[r];
                    nib[r] = (uint8_t)((v0 < 0 ? -v0 : v0) << 4 | (v1 < 0 ? -v1 : v1));
                }
                memcpy(out, nib, 8);
                memcpy(out + 8, nib + 16, 8);
                memcpy(out + 16, nib + 8, 8);
                memcpy(out + 24, nib + 24, 8);
            }
            /* sign stream: 16 little-endian words per 24 weights; word c has bit 15 − 2j for row c and
             * 14 − 2j for row c + 16 of group j */
            uint8_t *so = sgn + ((kb * n_mt + mt) * u_per_kb) * 32;
            for (int64_t u = 0; u < u_per_kb; u++) {
                const int8_t *gu = gv + 8 * u * 32;
                unsigned word[16] = {0};
                for (int j = 0; j < 8; j++)
                    for (int c = 0; c < 16; c++)
                        word[c] |= (unsigned)(gu[j * 32 + c] < 0) << (15 - 2 * j) |
                                   (unsigned)(gu[j * 32 + c + 16] < 0) << (14 - 2 * j);
                for (int c = 0; c < 16; c++) {
                    *so++ = (uint8_t)(word[c] & 0xff);
                    *so++ = (uint8_t)(word[c] >> 8);
                }
            }
        }
    }
    /* two-part stream: 32-weight blocks, 4 weights (two pairs) per byte */
    uint8_t *out = dst + g->two_off + t * BM * g->two_k / 4;
    for (int64_t kb2 = 0; kb2 < g->two_k / 32; kb2++) {
        for (int64_t mt = 0; mt < BM / 32; mt++) {
            for (int64_t s = 0; s < 8; s++) {
                const int64_t k0 = g->three_k + kb2 * 32 + 4 * s; /* = three_k + 2 * P */
                for (int64_t b = 0; b < 32; b++) {
                    const int8_t *row = wt + (mt * 32 + qrow(b)) * K;
                    *out++ = (uint8_t)(pair_nibble(row[k0], row[k0 + 1]) << 4 | pair_nibble(row[k0 + 2], row[k0 + 3]));
                }
            }
        }
    }
}

bitnet_status bitnet_pack_tl2_tile(const int8_t *w_tile, int64_t M, int64_t K, bitnet_tiles tiles, int64_t tile,
                                   uint8_t *dst, bitnet_error *err) {
    tl2_geom g;
    bitnet_status st = tl2_prepare("TL2 pack", M, K, tiles, &g, err);
    if (st) return st;
    if (tile < 0 || tile >= M / tiles.BM) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "TL2 pack: tile %lld out of range (M=%lld / BM=%d tiles)",
                           (long long)tile, (long long)M, (int)tiles.BM);
    }
    if ((st = check_ternary("TL2 pack", w_tile, tiles.BM, K, tile * tiles.BM, err))) return st;
    tl2_pack_tile(w_tile, &g, tile, dst);
    return BITNET_OK;
}

bitnet_status bitnet_pack_tl2(const int8_t *w, int64_t M, int64_t K, bitnet_tiles tiles, float scale, uint8_t *dst,
                              bitnet_error *err) {
    tl2_geom g;
    bitnet_status st = tl2_prepare("TL2 pack", M, K, tiles, &g, err);
    if (st) return st;
    if ((st = check_ternary("TL2 pack", w, M, K, 0, err))) return st;
    if ((st = check_scale("TL2 pack", scale, BITNET_ERR_INVALID_ARG, err))) return st;
    for (int64_t t = 0; t < M / tiles.BM; t++) tl2_pack_tile(w + t * tiles.BM * K, &g, t, dst);
    const size_t used = g.two_off + (size_t)(g.two_k * M / 4);
    memset(dst + used, 0, g.padded - used); /* 4. zero padding up to the formula size */
    write_tail(dst, g.padded, scale);
    return BITNET_OK;
}

bitnet_status bitnet_repack_i2s(const uint8_t *src, int64_t M, int64_t K, int target, bitnet_tiles tiles, uint8_t *dst,
                                float *scale, bitnet_error *err) {
    const bool tl2 = target == BITNET_TYPE_TL2;
    if (!tl2 && target != BITNET_TYPE_TL1)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "I2_S repack: target %s (id %d) is not TL1 or TL2",
                           bitnet_type_name(target), target);
    const char *what = tl2 ? "I2_S to TL2 repack" : "I2_S to TL1 repack";
    tl2_geom g = {0};
    bitnet_status st = tl2 ? tl2_prepare(what, M, K, tiles, &g, err) : tl1_prepare(what, M, K, tiles, err);
    if (st) return st;
    /* a BM-row tile is BM·K weights, a whole number of 128-weight blocks (BM is a multiple of 32 and the
     * tile rules make K a multiple of 4) */
    if ((tiles.BM * K) % 128 != 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: a tile of BM = %d rows x K = %lld is not whole I2_S blocks",
                           what, (int)tiles.BM, (long long)K);
    float s;
    memcpy(&s, src + M * K / 4, sizeof s);
    if ((st = check_scale(what, s, BITNET_ERR_FORMAT, err))) return st;
    const int64_t tile_blocks = tiles.BM * K / 128;
    int8_t *wt = (int8_t *)bitnet_malloc((size_t)(tiles.BM * K));
    if (wt == NULL)
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for a %d x %lld tile", what, (int)tiles.BM,
                           (long long)K);
    for (int64_t t = 0; t < M / tiles.BM && st == BITNET_OK; t++) {
        if ((st = i2s_decode_blocks(src, M, K, t * tile_blocks, (t + 1) * tile_blocks, wt, err))) break;
        if (tl2) tl2_pack_tile(wt, &g, t, dst);
        else tl1_pack_tile(wt, M, K, tiles, t, dst);
    }
    bitnet_free(wt);
    if (st) return st;
    if (tl2) {
        const size_t used = g.two_off + (size_t)(g.two_k * M / 4);
        memset(dst + used, 0, g.padded - used);
        write_tail(dst, g.padded, s);
    } else {
        write_tail(dst, bitnet_ternary_scale_offset(BITNET_TYPE_TL1, M, K), s);
    }
    if (scale) *scale = s;
    return BITNET_OK;
}

/* Balanced-ternary digits of v = 9a + 3b + c, v in -13..13. */
static void group_decode(int v, int8_t *w3) {
    const int u = v + 13; /* = 9(a+1) + 3(b+1) + (c+1) */
    w3[0] = (int8_t)(u / 9 - 1);
    w3[1] = (int8_t)(u / 3 % 3 - 1);
    w3[2] = (int8_t)(u % 3 - 1);
}

bitnet_status bitnet_unpack_tl2(const uint8_t *src, int64_t M, int64_t K, bitnet_tiles tiles, int8_t *w,
                                float *scale, bitnet_error *err) {
    tl2_geom g;
    bitnet_status st = tl2_prepare("TL2 unpack", M, K, tiles, &g, err);
    if (st) return st;
    float s;
    memcpy(&s, src + g.padded, sizeof s);
    if ((st = check_scale("TL2 unpack", s, BITNET_ERR_FORMAT, err))) return st;
    const int64_t BM = g.BM, BK = g.BK;
    /* index stream: magnitudes first (the sign stream is applied below) */
    const uint8_t *in = src;
    for (int64_t t = 0; t < M / BM; t++) {
        for (int64_t kb = 0; kb < g.three_k / BK; kb++) {
            for (int64_t mt = 0; mt < BM / 32; mt++) {
                for (int64_t s2 = 0; s2 < BK / 6; s2++) {
                    const int64_t k0 = kb * BK + 6 * s2;
                    for (int64_t b = 0; b < 32; b++) {
                        const int64_t row = t * BM + mt * 32 + qrow(b);
                        const uint8_t byte = *in++;
                        for (int half = 0; half < 2; half++) {
                            const int nib = half == 0 ? byte >> 4 : byte & 15;
                            const int64_t k = k0 + 3 * half;
                            if (nib > 13) {
                                return bitnet_fail(err, BITNET_ERR_FORMAT,
                                                   "TL2: index nibble %d > 13 at byte %lld (row %lld, columns "
                                                   "%lld-%lld) of a %lld x %lld tensor",
                                                   nib, (long long)(in - 1 - src), (long long)row, (long long)k,
                                                   (long long)(k + 2), (long long)M, (long long)K);
                            }
                            if (w) group_decode(nib, w + row * K + k);
                        }
                    }
                }
            }
        }
    }
    /* sign stream: negate the groups whose bit is set (every bit pattern is valid: nothing to check) */
    in = src + g.sign_off;
    for (int64_t t = 0; t < M / BM && w; t++) {
        for (int64_t kb = 0; kb < g.three_k / BK; kb++) {
            for (int64_t mt = 0; mt < BM / 32; mt++) {
                for (int64_t u = 0; u < BK / 24; u++) {
                    for (int64_t c = 0; c < 16; c++) {
                        const unsigned word = (unsigned)in[0] | (unsigned)in[1] << 8;
                        in += 2;
                        for (int j = 0; j < 8; j++) {
                            const int64_t k = kb * BK + 24 * u + 3 * j;
                            for (int half = 0; half < 2; half++) {
                                if (word >> (15 - 2 * j - half) & 1u) {
                                    int8_t *w3 = w + (t * BM + mt * 32 + c + 16 * half) * K + k;
                                    for (int e = 0; e < 3; e++) w3[e] = (int8_t)-w3[e];
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    /* two-part stream */
    in = src + g.two_off;
    for (int64_t t = 0; t < M / BM; t++) {
        for (int64_t kb2 = 0; kb2 < g.two_k / 32; kb2++) {
            for (int64_t mt = 0; mt < BM / 32; mt++) {
                for (int64_t s2 = 0; s2 < 8; s2++) {
                    const int64_t k0 = g.three_k + kb2 * 32 + 4 * s2;
                    for (int64_t b = 0; b < 32; b++) {
                        const int64_t row = t * BM + mt * 32 + qrow(b);
                        const uint8_t byte = *in++;
                        for (int half = 0; half < 2; half++) {
                            const unsigned nib = half == 0 ? byte >> 4 : byte & 15u;
                            const int64_t k = k0 + 2 * half;
                            if (!pair_decode(nib, w ? w + row * K + k : NULL)) {
                                return bitnet_fail(err, BITNET_ERR_FORMAT,
                                                   "TL2: two-part nibble %u > 8 at byte %lld (row %lld, columns "
                                                   "%lld-%lld) of a %lld x %lld tensor",
                                                   nib, (long long)(in - 1 - src), (long long)row, (long long)k,
                                                   (long long)(k + 1), (long long)M, (long long)K);
                            }
                        }
                    }
                }
            }
        }
    }
    if (scale) *scale = s;
    return BITNET_OK;
}
