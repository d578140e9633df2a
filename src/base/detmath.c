/* detmath.c — exp, log, pow, sin/cos from IEEE-754 basic operations only (contracts and sources in
 * detmath.h). Every constant is written as a hexadecimal float literal, the correctly rounded double of
 * the stated real number, so no compiler or library takes part in forming it. */
#include "base/detmath.h"

#include <stdint.h>
#include <string.h>

static double from_bits(uint64_t u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static uint64_t to_bits(double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

#define D_INF from_bits(0x7ff0000000000000ull)
#define D_NAN from_bits(0x7ff8000000000000ull)

/* y · 2^m for a y in [0.5, 4) and any integer m: one rounding at most (only when the result is subnormal). */
static double scale2(double y, int32_t m) {
    if (m > 1023) return y * from_bits((uint64_t)(1023 + 1023) << 52) * from_bits((uint64_t)(m - 1023 + 1023) << 52);
    if (m >= -1022) return y * from_bits((uint64_t)(m + 1023) << 52);
    /* subnormal range: y·2^(m+1000) is exact (normal), the multiplication by 2^-1000 rounds once */
    if (m < -1100) return 0.0;
    return (y * from_bits((uint64_t)(m + 1000 + 1023) << 52)) * from_bits((uint64_t)(-1000 + 1023) << 52);
}

/* ---- exp ------------------------------------------------------------------------------------------ */

/* 2^(j/32), j = 0..31, correctly rounded (declared in detmath.h for the SIMD versions). */
const double bitnet_exp_tab[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};

/* The common part of both exps for |x| <= 746: e^x = (bitnet_exp_tab[j]·(1 + p)) · 2^m with x = (32m + j)·ln2/32 + r.
 * Returns bitnet_exp_tab[j]·(1 + p), in [0.98, 2.03], and sets *m. */
static inline double exp_core(double x, int32_t *m) {
    const double t = x * BITNET_EXP_INV_C + BITNET_EXP_SHIFT;
    const int32_t n = (int32_t)(uint32_t)to_bits(t); /* round(x·32/ln2): the low bits of t, two's complement */
    const double nd = t - BITNET_EXP_SHIFT;
    const double r = (x - nd * BITNET_EXP_C_HI) - nd * BITNET_EXP_C_LO; /* |r| <= ln2/64 (+ rounding) */
    const int32_t j = (int32_t)((uint32_t)n & 31u);
    *m = (n - j) / 32;
    /* e^r − 1 by Taylor to r^6/6! (the next term is below 4e-18 relative on |r| <= 0.0109), as
     * r + r^2·(1/2 + r/6) + r^4·((1/24 + r/120) + r^2/720) */
    const double r2 = r * r;
    const double p = r + r2 * (BITNET_EXP_INV_F2 + r * BITNET_EXP_INV_F3) +
                     (r2 * r2) * ((BITNET_EXP_INV_F4 + r * BITNET_EXP_INV_F5) + r2 * BITNET_EXP_INV_F6);
    return bitnet_exp_tab[j] + bitnet_exp_tab[j] * p;
}

double bitnet_exp_d(double x) {
    if (x != x) return x;
    if (x > 0x1.62e42fefa39efp+9) return D_INF; /* ln(DBL_MAX) = 709.7827... */
    if (x < -0x1.74910d52d3052p+9) return 0.0; /* ln(2^-1075) = -745.1332...: rounds to +0 */
    int32_t m;
    const double y = exp_core(x, &m);
    return scale2(y, m);
}

float bitnet_expf(float x) {
    if (!(x >= -104.0f)) return x != x ? x : 0.0f; /* e^-104 = 6.8e-46 is below half the smallest subnormal */
    if (x > 89.0f) return (float)D_INF;
    int32_t m;
    const double y = exp_core((double)x, &m);
    /* m in [-151, 129]: y·2^m is a normal double, so adding m to the exponent field is the exact product
     * that scale2 forms; the conversion to float is the one rounding */
    return (float)from_bits(to_bits(y) + ((uint64_t)(int64_t)m << 52));
}

/* ---- log, pow ------------------------------------------------------------------------------------- */

#define LN2_HI 0x1.62e42fee00000p-1 /* ln 2, leading 32 bits */
#define LN2_LO 0x1.a39ef35793c76p-33
#define SQRT2 0x1.6a09e667f3bcdp+0

double bitnet_log_d(double x) {
    if (x != x || x < 0.0) return D_NAN;
    if (x == 0.0) return -D_INF;
    if (x == D_INF) return x;
    uint64_t u = to_bits(x);
    int32_t e = (int32_t)(u >> 52) - 1023;
    if ((u >> 52) == 0) { /* subnormal: scale into the normal range first */
        u = to_bits(x * 0x1p54);
        e = (int32_t)(u >> 52) - 1023 - 54;
    }
    double mant = from_bits((u & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
    if (mant > SQRT2) {
        mant *= 0.5;
        e += 1;
    }
    /* ln m = 2·atanh(s) = 2(s + s^3/3 + s^5/5 + ...), s = (m−1)/(m+1), |s| <= 0.1716 */
    const double s = (mant - 1.0) / (mant + 1.0), z = s * s;
    const double poly =
        z * (0x1.5555555555555p-2 +
             z * (0x1.999999999999ap-3 +
                  z * (0x1.2492492492492p-3 +
                       z * (0x1.c71c71c71c71cp-4 +
                            z * (0x1.745d1745d1746p-4 +
                                 z * (0x1.3b13b13b13b14p-4 +
                                      z * (0x1.1111111111111p-4 +
                                           z * (0x1.e1e1e1e1e1e1ep-5 +
                                                z * (0x1.af286bca1af28p-5 +
                                                     z * (0x1.8618618618618p-5 + z * 0x1.642c8590b2164p-5))))))))));
    const double ln_m = 2.0 * s + 2.0 * s * poly;
    return (double)e * LN2_HI + ((double)e * LN2_LO + ln_m);
}

double bitnet_pow_d(double x, double y) {
    if (!(x > 0.0)) return D_NAN;
    return bitnet_exp_d(y * bitnet_log_d(x));
}

/* ---- sin, cos ------------------------------------------------------------------------------------- */

#define TWO_OVER_PI 0x1.45f306dc9c883p-1
#define PIO2_1 0x1.921fb54000000p+0 /* π/2 in three parts of 28, 28 and 53 bits: k·PIO2_1 and k·PIO2_2 */
#define PIO2_2 0x1.10b4610000000p-30 /* are exact for |k| < 2^25 */
#define PIO2_3 0x1.a62633145c06ep-58

/* sin r and cos r for |r| <= π/4 (+ rounding) by Taylor series to r^17/17! and r^18/18!. */
static void sincos_kernel(double r, double *s, double *c) {
    const double z = r * r;
    *s = r + r * z *
                 (-0x1.5555555555555p-3 +
                  z * (0x1.1111111111111p-7 +
                       z * (-0x1.a01a01a01a01ap-13 +
                            z * (0x1.71de3a556c734p-19 +
                                 z * (-0x1.ae64567f544e4p-26 +
                                      z * (0x1.6124613a86d09p-33 +
                                           z * (-0x1.ae7f3e733b81fp-41 + z * 0x1.952c77030ad4ap-49)))))));
    *c = 1.0 - z * (0x1.0000000000000p-1 -
                    z * (0x1.5555555555555p-5 -
                         z * (0x1.6c16c16c16c17p-10 -
                              z * (0x1.a01a01a01a01ap-16 -
                                   z * (0x1.27e4fb7789f5cp-22 -
                                        z * (0x1.1eed8eff8d898p-29 -
                                             z * (0x1.93974a8c07c9dp-37 -
                                                  z * (0x1.ae7f3e733b81fp-45 - z * 0x1.6827863b97d97p-53))))))));
}

void bitnet_sincos_d(double x, double *s, double *c) {
    if (!(x - x == 0.0) || x > 0x1p30 || x < -0x1p30) { /* NaN, ±inf, or beyond the supported range */
        *s = *c = D_NAN;
        return;
    }
    const double kd = x * TWO_OVER_PI;
    const int32_t k = (int32_t)(kd < 0 ? kd - 0.5 : kd + 0.5);
    const double r = ((x - (double)k * PIO2_1) - (double)k * PIO2_2) - (double)k * PIO2_3;
    double sr, cr;
    sincos_kernel(r, &sr, &cr);
    switch ((uint32_t)k & 3u) {
    case 0: *s = sr; *c = cr; break;
    case 1: *s = cr; *c = -sr; break;
    case 2: *s = -sr; *c = -cr; break;
    default: *s = -cr; *c = sr; break;
    }
}
