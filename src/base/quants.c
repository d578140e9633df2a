/* quants.c — IEEE binary16 conversion, the Q8_0 and Q6_K quantizers and the activation quantizer
 * shared by every ternary path (docs/LAYOUTS.md §1). The per-type facts (sizes, row → float) are in
 * types.c.
 *
 * Sources of the facts used here:
 *  - binary16: IEEE 754-2008 §3.6; NaN handling as x86 F16C vcvtps2ph (quiet bit set, payload kept).
 *  - Q8_0 and Q6_K quantization: the rules of ggml's reference quantizers (quantize_row_q8_0_ref,
 *    quantize_row_q6_K_ref with make_qx_quants and nearest_int in ggml-quants.c), restated in quants.h
 *    and written here from that description; the Q6_K output is compared byte for byte with ggml's in
 *    tests/test_quants.cc.
 */
#include "base/quants.h"

#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * binary16 (IEEE 754: 1 sign, 5 exponent bits with bias 15, 10 fraction bits)
 * ------------------------------------------------------------------------------------------- */

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float bitnet_fp16_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) {
        /* inf; NaN keeps sign and payload and becomes quiet (as F16C vcvtph2ps and AArch64 fcvt) */
        return f32_from_bits(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    }
    if (e != 0) return f32_from_bits(sign | ((e + 127 - 15) << 23) | (m << 13));
    if (m == 0) return f32_from_bits(sign); /* ±0 */
    /* subnormal: m * 2^-24. Normalise: shift until the implicit bit (bit 10) is set. */
    uint32_t exp = 127 - 15 + 1; /* exponent of 2^-14 */
    while ((m & 0x400u) == 0) {
        m <<= 1;
        exp--;
    }
    return f32_from_bits(sign | (exp << 23) | ((m & 0x3ffu) << 13));
}

uint16_t bitnet_fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) {
        /* NaN: keep the top 10 payload bits, force the quiet bit (as F16C vcvtps2ph). */
        return (uint16_t)(sign | 0x7c00u | 0x200u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (incl. inf) rounds to inf */
    if (ax >= 0x38800000u) {
        /* normal half: exponent rebias, 13 fraction bits dropped with round to nearest even;
         * a carry out of the fraction correctly bumps the exponent. */
        uint32_t h = ((ax >> 23) - 127 + 15) << 10 | ((ax >> 13) & 0x3ffu);
        const uint32_t rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    if (ax <= 0x33000000u) return sign; /* <= 2^-25: rounds to zero (2^-25 is a tie, goes to even 0) */
    /* subnormal half: value / 2^-24 rounded to nearest even. value = mant * 2^(E-150). */
    const uint32_t E = ax >> 23;              /* 102..112 here */
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - E;           /* 14..24 */
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

void bitnet_quantize_row_q8_0(const float *x, bitnet_block_q8_0 *dst, int64_t n) {
    /* ggml's reference Q8_0 quantizer (a fact about the format, so our files match llama-quantize):
     * amax = max|x|, d = amax/127, id = 1/d (0 when d == 0), q = round-half-away(x*id), d stored fp16. */
    for (int64_t b = 0; b < n / 32; b++) {
        const float *xb = x + b * 32;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(xb[j]);
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[b].d = bitnet_fp32_to_fp16(d);
        for (int j = 0; j < 32; j++) {
            float v = roundf(xb[j] * id);
            if (!(v == v)) v = 0.0f; /* NaN input: store 0 rather than an undefined conversion */
            if (v > 127.0f) v = 127.0f;
            if (v < -127.0f) v = -127.0f;
            dst[b].qs[j] = (int8_t)v;
        }
    }
}

/* ggml's nearest_int: adding 1.5·2^23 puts the rounded integer (round half to even, as the float add
 * rounds) into the low 23 mantissa bits; the result is defined for every input (a value beyond 2^22 or a
 * NaN gives the same garbage ggml computes, which the clamps after it then bound). */
static inline int q6k_round(float v) {
    const float t = v + 12582912.0f;
    uint32_t u;
    memcpy(&u, &t, sizeof u);
    return (int)(u & 0x007fffffu) - 0x00400000;
}

static inline int clamp_code(int l) { return l < -32 ? -32 : l > 31 ? 31 : l; }

/* Step 1 of bitnet_quantize_row_q6_k (quants.h): ggml's make_qx_quants for 16 values, nmax = 32,
 * weights x² (rmse_type 1), no importance matrix. Writes the codes l + 32 of the chosen scale to L[16]
 * and returns the scale. Each float expression keeps ggml's operand order. */
static float q6k_group_scale(const float *x, int8_t *L) {
    enum { N = 16, NMAX = 32 };
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < N; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) { /* ggml's GROUP_MAX_EPS */
        memset(L, 0, N);
        return 0.0f;
    }
    float iscale = (float)-NMAX / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < N; i++) {
        const int l = clamp_code(q6k_round(iscale * x[i]));
        L[i] = (int8_t)(l + NMAX);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -((float)NMAX + 0.1f * (float)is) / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < N; i++) {
            const int l = clamp_code(q6k_round(iscale * x[i]));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < N; i++) L[i] = (int8_t)(NMAX + clamp_code(q6k_round(iscale * x[i])));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

void bitnet_q6_k_block_to_f32(const uint8_t *blk, float *y) {
    const uint8_t *ql = blk, *qh = blk + 128;
    const int8_t *sc = (const int8_t *)(blk + 192);
    uint16_t dh;
    memcpy(&dh, blk + 208, 2);
    const float d = bitnet_fp16_to_fp32(dh);
    for (int half = 0; half < 2; half++) {
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
            const int q2 = (int)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

bitnet_status bitnet_quantize_row_q6_k(const float *x, bitnet_block_q6_k *dst, int64_t n, bitnet_error *err) {
    if (n < 0 || n % 256 != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "Q6_K row of %lld values: not a multiple of the 256-value super-block", (long long)n);
    }
    for (int64_t b = 0; b < n / 256; b++) {
        const float *xb = x + b * 256;
        bitnet_block_q6_k *y = &dst[b];
        int8_t L[256];
        float scales[16];
        float max_scale = 0.0f, max_abs_scale = 0.0f;
        for (int g = 0; g < 16; g++) {
            const float s = q6k_group_scale(xb + 16 * g, L + 16 * g);
            scales[g] = s;
            if (fabsf(s) > max_abs_scale) {
                max_abs_scale = fabsf(s);
                max_scale = s;
            }
        }
        if (max_abs_scale < 1e-15f) {
            memset(y, 0, sizeof *y); /* d = fp16(0) = 0 */
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y->d = bitnet_fp32_to_fp16(1.0f / iscale); /* never NaN: max_scale is finite and nonzero or ±inf */
        for (int g = 0; g < 16; g++) {
            /* |iscale·s| <= 128 (|s| <= |max_scale|), so the rounded value is >= -128 and fits int8 */
            const int v = q6k_round(iscale * scales[g]);
            y->scales[g] = (int8_t)(v < 127 ? v : 127);
        }
        const float dh = bitnet_fp16_to_fp32(y->d);
        for (int g = 0; g < 16; g++) {
            const float d = dh * (float)y->scales[g];
            if (d == 0.0f) continue; /* the group decodes to 0 whatever its codes; step 1's stay */
            for (int i = 0; i < 16; i++) L[16 * g + i] = (int8_t)(clamp_code(q6k_round(xb[16 * g + i] / d)) + 32);
        }
        /* pack the codes 0..63: per 128-value half, four quarter-rows of 32 share ql/qh bytes (quants.h) */
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = y->ql + 64 * h, *qh = y->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                const uint8_t c0 = (uint8_t)Lh[l], c1 = (uint8_t)Lh[l + 32], c2 = (uint8_t)Lh[l + 64],
                              c3 = (uint8_t)Lh[l + 96];
                ql[l] = (uint8_t)((c0 & 0xF) | (c2 & 0xF) << 4);
                ql[l + 32] = (uint8_t)((c1 & 0xF) | (c3 & 0xF) << 4);
                qh[l] = (uint8_t)((c0 >> 4) | (c1 >> 4) << 2 | (c2 >> 4) << 4 | (c3 >> 4) << 6);
            }
        }
    }
    return BITNET_OK;
}

float bitnet_quantize_act(const float *x, int64_t K, int8_t *q) {
    /* LAYOUTS.md §1. max over |x| ignores NaN (comparisons with NaN are false). */
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++) {
        const float a = fabsf(x[k]);
        if (a > amax) amax = a;
    }
    const float s = 127.0f / (amax > 1e-5f ? amax : 1e-5f);
    for (int64_t k = 0; k < K; k++) {
        const float p = x[k] * s;
        float r = nearbyintf(p); /* default rounding mode: round half to even */
        /* clamp; a NaN product (NaN input, or inf * 0 when max|x| is inf) maps to 0 */
        if (r > 127.0f) r = 127.0f;
        else if (r < -127.0f) r = -127.0f;
        else if (!(r == r)) r = 0.0f;
        q[k] = (int8_t)r;
    }
    return s;
}
