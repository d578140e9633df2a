/* types.c — the tensor type traits table (types.h): names, block and byte sizes of the ggml types that
 * appear in GGUF files, the shape-level sizes of I2_S / TL1 / TL2, the dense row → float conversions
 * and the head's dense kernel type per type.
 *
 * Sources of the facts used here:
 *  - ggml type ids and block sizes: the public ggml GGUF spec (ggml/docs/gguf.md, "ggml_type") and the
 *    block structure definitions of the k-quants / i-quants in ggml (published layouts; sizes restated
 *    in the table below, each written as the sum of its fields).
 *  - I2_S / TL1 / TL2 sizes: ../shared/docs/formats.md "Byte size of one tensor".
 *  - Q8_0 and Q6_K values: the block layouts in quants.h (value = d·q, and d·scale·(q − 32)).
 */
#include "base/types.h"

#include <string.h>

#include "base/quants.h"

/* ---------------------------------------------------------------------------------------------
 * Ternary sizes (formats.md "Byte size of one tensor")
 * ------------------------------------------------------------------------------------------- */

/* I2_S and TL1: four weights per byte. */
static size_t quarter_bytes(int64_t M, int64_t K) { return (size_t)M * (size_t)K / 4; }

/* TL2: pad32((K-256)*M/3*5/8 + 256*M/2*4/8), integer arithmetic left to right: the K - 256 weights of
 * the three-weight part take 5 bits per three weights, the last 256 of each row 4 bits per two. 0 for
 * K < 256 or M <= 0, where the formula is undefined. */
static size_t tl2_data_bytes(int64_t M, int64_t K) {
    if (K < 256 || M <= 0) return 0;
    size_t a = (size_t)(K - 256) * (size_t)M / 3 * 5 / 8;
    size_t b = 256 * (size_t)M / 2 * 4 / 8;
    return (a + b + 31) / 32 * 32;
}

/* ---------------------------------------------------------------------------------------------
 * Rows to float
 * ------------------------------------------------------------------------------------------- */

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void f32_to_f32(const void *row, float *dst, int64_t n) { memcpy(dst, row, (size_t)n * sizeof(float)); }

static void f16_to_f32(const void *row, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)row;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = bitnet_fp16_to_fp32(h);
    }
}

/* BF16: the upper half of a binary32 */
static void bf16_to_f32(const void *row, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)row;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, 2);
        dst[i] = f32_from_bits((uint32_t)h << 16);
    }
}

static void q8_0_to_f32(const void *row, float *dst, int64_t n) {
    const uint8_t *p = (const uint8_t *)row;
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *blk = p + (size_t)b * sizeof(bitnet_block_q8_0);
        uint16_t dh;
        memcpy(&dh, blk, 2);
        const float d = bitnet_fp16_to_fp32(dh);
        const int8_t *qs = (const int8_t *)(blk + 2);
        for (int j = 0; j < 32; j++) dst[b * 32 + j] = (float)qs[j] * d;
    }
}

/* Q6_K (bitnet_block_q6_k in quants.h, 210 bytes per 256 weights) by the format's definition, block by block
 * (bitnet_q6_k_block_to_f32). Published BitNet-b1.58-2B-4T files may carry the token embedding as Q6_K
 * (formats.md). */
static void q6_k_to_f32(const void *src, float *y, int64_t n) {
    const uint8_t *row = (const uint8_t *)src;
    for (int64_t b = 0; b < n / 256; b++) bitnet_q6_k_block_to_f32(row + b * 210, y + b * 256);
}

/* ---------------------------------------------------------------------------------------------
 * The table
 * ------------------------------------------------------------------------------------------- */

#define QK_K 256
/* a block type without a row conversion or head kernel */
#define BLOCK(id, nm, blck, size) [id] = {nm, id, blck, size, BITNET_KIND_BLOCK, 0, 0, NULL, NULL, -1}
/* a dense type: conversion and the type of its head kernel */
#define DENSE(id, nm, blck, size, to, dot) [id] = {nm, id, blck, size, BITNET_KIND_BLOCK, 0, 0, NULL, to, dot}
#define TERNARY(id, nm, unit, min_k, bytes) [id] = {nm, id, 1, 0, BITNET_KIND_TERNARY, unit, min_k, bytes, NULL, -1}

/* Indexed by ggml type id. Comments give each block's fields (bytes). */
static const bitnet_type_traits k_types[] = {
    DENSE(0, "F32", 1, 4, f32_to_f32, BITNET_TYPE_F32),
    DENSE(1, "F16", 1, 2, f16_to_f32, BITNET_TYPE_F16),
    BLOCK(2, "Q4_0", 32, 2 + 16),                          /* d, 32 nibbles */
    BLOCK(3, "Q4_1", 32, 2 + 2 + 16),                      /* d, m, 32 nibbles */
    /* 4, 5: Q4_2 / Q4_3, removed from ggml; rejected as unknown */
    BLOCK(6, "Q5_0", 32, 2 + 4 + 16),                      /* d, qh, nibbles */
    BLOCK(7, "Q5_1", 32, 2 + 2 + 4 + 16),                  /* d, m, qh, nibbles */
    DENSE(8, "Q8_0", 32, 2 + 32, q8_0_to_f32, BITNET_TYPE_Q8_0), /* d, 32 int8 */
    BLOCK(9, "Q8_1", 32, 2 + 2 + 32),                      /* d, s, 32 int8 */
    BLOCK(10, "Q2_K", QK_K, 16 + 64 + 2 + 2),              /* scales, qs, d, dmin */
    BLOCK(11, "Q3_K", QK_K, 32 + 64 + 12 + 2),             /* hmask, qs, scales, d */
    BLOCK(12, "Q4_K", QK_K, 2 + 2 + 12 + 128),             /* d, dmin, scales, qs */
    BLOCK(13, "Q5_K", QK_K, 2 + 2 + 12 + 32 + 128),        /* d, dmin, scales, qh, qs */
    DENSE(14, "Q6_K", QK_K, 128 + 64 + 16 + 2, q6_k_to_f32, BITNET_TYPE_Q6_K), /* ql, qh, scales, d */
    BLOCK(15, "Q8_K", QK_K, 4 + 256 + 32),                 /* float d, qs, int16 bsums[16] */
    BLOCK(16, "IQ2_XXS", QK_K, 2 + 64),                    /* d, qs[32] u16 */
    BLOCK(17, "IQ2_XS", QK_K, 2 + 64 + 8),                 /* d, qs, scales */
    BLOCK(18, "IQ3_XXS", QK_K, 2 + 96),                    /* d, qs[3*QK_K/8] */
    BLOCK(19, "IQ1_S", QK_K, 2 + 32 + 16),                 /* d, qs, qh[u16 8] */
    BLOCK(20, "IQ4_NL", 32, 2 + 16),                       /* d, nibbles */
    BLOCK(21, "IQ3_S", QK_K, 2 + 64 + 8 + 32 + 4),         /* d, qs, qh, signs, scales */
    BLOCK(22, "IQ2_S", QK_K, 2 + 64 + 8 + 8),              /* d, qs, qh, scales */
    BLOCK(23, "IQ4_XS", QK_K, 2 + 2 + 4 + 128),            /* d, scales_h, scales_l, qs */
    BLOCK(24, "I8", 1, 1),
    BLOCK(25, "I16", 1, 2),
    BLOCK(26, "I32", 1, 4),
    BLOCK(27, "I64", 1, 8),
    BLOCK(28, "F64", 1, 8),
    BLOCK(29, "IQ1_M", QK_K, 32 + 16 + 8),                 /* qs, qh, scales (d inside scales) */
    DENSE(30, "BF16", 1, 2, bf16_to_f32, BITNET_TYPE_BF16), /* its own kernel: the F32 kernel's floats */
    BLOCK(31, "Q4_0_4_4", 32, 2 + 16),                     /* interleaved Q4_0 (bitnet.cpp's ggml) */
    BLOCK(32, "Q4_0_4_8", 32, 2 + 16),
    BLOCK(33, "Q4_0_8_8", 32, 2 + 16),
    BLOCK(34, "TQ1_0", QK_K, (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + 2), /* qs, qh, d */
    BLOCK(35, "TQ2_0", QK_K, QK_K / 4 + 2),                /* qs, d */
    /* I2_S: whole 128-weight blocks (LAYOUTS.md §2); TL1: 4 weights per byte (pairs of pairs) */
    TERNARY(36, "I2_S", 128, 1, quarter_bytes),
    [37] = {"I8_S", 37, 1, 1, BITNET_KIND_ACT_ONLY, 0, 0, NULL, NULL, -1},
    TERNARY(38, "TL1", 4, 1, quarter_bytes),
    TERNARY(39, "TL2", 0, 256, tl2_data_bytes),
};

#define N_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

const bitnet_type_traits *bitnet_type_traits_of(int type) {
    if (type < 0 || type >= N_TYPES || k_types[type].name == NULL) return NULL;
    return &k_types[type];
}

const char *bitnet_i2s_layout_name(int layout) {
    switch (layout) {
    case BITNET_I2S_LAYOUT_AUTO: return "auto";
    case BITNET_I2S_LAYOUT_X86: return "x86";
    case BITNET_I2S_LAYOUT_ARM64: return "arm64";
    case BITNET_I2S_LAYOUT_ROWS4: return "rows4";
    default: return NULL;
    }
}

int bitnet_i2s_layout_parse(const char *s, size_t n) {
    for (int l = BITNET_I2S_LAYOUT_X86; l <= BITNET_I2S_LAYOUT_ROWS4; l++) {
        const char *name = bitnet_i2s_layout_name(l);
        if (s && strlen(name) == n && memcmp(s, name, n) == 0) return l;
    }
    return -1;
}

const char *bitnet_type_name(int type) {
    const bitnet_type_traits *t = bitnet_type_traits_of(type);
    return t ? t->name : "unknown";
}

bool bitnet_type_is_ternary(int type) {
    const bitnet_type_traits *t = bitnet_type_traits_of(type);
    return t && t->kind == BITNET_KIND_TERNARY;
}

size_t bitnet_ternary_data_bytes(int type, int64_t M, int64_t K) {
    const bitnet_type_traits *t = bitnet_type_traits_of(type);
    return t && t->kind == BITNET_KIND_TERNARY ? t->ternary_data_bytes(M, K) : 0;
}

size_t bitnet_ternary_nbytes(int type, int64_t M, int64_t K) {
    const bitnet_type_traits *t = bitnet_type_traits_of(type);
    if (!t || t->kind != BITNET_KIND_TERNARY || K < t->ternary_min_k) return 0;
    return t->ternary_data_bytes(M, K) + 32;
}

/* a*b into *out; false on size_t overflow. */
static bool mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}

static bitnet_status ternary_nbytes(const bitnet_type_traits *t, int n_dims, const int64_t *ne, size_t *out,
                                    bitnet_error *err) {
    if (n_dims != 2) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s tensor must be 2-D [K, M], got n_dims = %d", t->name,
                           n_dims);
    }
    const int64_t K = ne[0], M = ne[1];
    size_t n;
    if (!mul_size((size_t)K, (size_t)M, &n) || n > (SIZE_MAX >> 3)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s tensor [%lld, %lld]: element count overflows", t->name,
                           (long long)K, (long long)M);
    }
    if (t->ternary_unit > 0 && n % (size_t)t->ternary_unit != 0) {
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s tensor [%lld, %lld]: M*K = %llu is not a multiple of %llu (dimension ne[0]=K)",
                           t->name, (long long)K, (long long)M, (unsigned long long)n, (unsigned long long)((size_t)t->ternary_unit));
    }
    if (K < t->ternary_min_k) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s tensor [%lld, %lld]: ne[0]=K = %lld must be >= %d", t->name,
                           (long long)K, (long long)M, (long long)K, (int)t->ternary_min_k);
    }
    /* n < SIZE_MAX/8 keeps every step of the formulas (at most n·5/3) inside size_t */
    *out = t->ternary_data_bytes(M, K) + 32;
    return BITNET_OK;
}

bitnet_status bitnet_type_nbytes(int type, int n_dims, const int64_t *ne, size_t *out, bitnet_error *err) {
    const bitnet_type_traits *t = bitnet_type_traits_of(type);
    if (!t) return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "unknown tensor type id %d", type);
    if (t->kind == BITNET_KIND_ACT_ONLY) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "tensor type %s (id %d) is an activation-only type and is never stored", t->name, type);
    }
    if (n_dims < 1 || n_dims > 4) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s tensor: n_dims = %d, must be 1..4", t->name, n_dims);
    }
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 1) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s tensor: ne[%d] = %lld, must be >= 1", t->name, i,
                               (long long)ne[i]);
        }
    }
    if (t->kind == BITNET_KIND_TERNARY) return ternary_nbytes(t, n_dims, ne, out, err);

    if (ne[0] % t->blck_size != 0) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s tensor: ne[0] = %lld is not a multiple of the block size %d",
                           t->name, (long long)ne[0], (int)t->blck_size);
    }
    size_t bytes = (size_t)(ne[0] / t->blck_size);
    bool ok = mul_size(bytes, (size_t)t->type_size, &bytes);
    for (int i = 1; i < n_dims && ok; i++) ok = mul_size(bytes, (size_t)ne[i], &bytes);
    /* Keep sizes well inside off_t / ptrdiff_t range. */
    if (!ok || bytes > (SIZE_MAX >> 2)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s tensor [%lld, %lld, %lld, %lld]: byte size overflows",
                           t->name, (long long)ne[0], (long long)(n_dims > 1 ? ne[1] : 1),
                           (long long)(n_dims > 2 ? ne[2] : 1), (long long)(n_dims > 3 ? ne[3] : 1));
    }
    *out = bytes;
    return BITNET_OK;
}

bitnet_status bitnet_row_to_f32(int type, const void *row, float *dst, int64_t n, bitnet_error *err) {
    if (n < 0) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "row_to_f32: negative element count %lld", (long long)n);
    const bitnet_type_traits *t = bitnet_type_traits_of(type);
    if (!t || !t->to_f32) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "row_to_f32: type %s (id %d) is not a dense type",
                           bitnet_type_name(type), type);
    }
    if (n % t->blck_size != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s row of %lld elements: not a multiple of %d", t->name,
                           (long long)n, (int)t->blck_size);
    }
    t->to_f32(row, dst, n);
    return BITNET_OK;
}
