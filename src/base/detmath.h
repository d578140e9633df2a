/* detmath.h — the transcendental functions of the forward pass, written once for every platform: exp in
 * float and double, log, pow and sin/cos in double, built only from IEEE-754 +, -, ×, / and integer
 * bit operations (no libm, no FMA: the build uses -ffp-contract=off). The same inputs give the same
 * bits on x86-64 (glibc), AArch64 and a Cortex-M4F with newlib, whose libm functions differ from glibc's
 * in the last bit of about 1 % of expf results (measured over [-104, 0]); with libm the logits of one
 * model would depend on the C library. Doubles on a core without a double-precision FPU are computed
 * by the compiler's soft-float routines, which are IEEE-exact too.
 *
 * Accuracy (tests/test_detmath.cc checks it against the host libm): the double functions are within a
 * few units in the last place (relative error < 4e-16) on the ranges stated; bitnet_expf is the float
 * rounding of bitnet_exp_d, i.e. correctly rounded except where exp(x) lies within ~1e-16 (relative) of
 * the midpoint between two floats. Methods: exp by the table 2^(j/32) and a degree-6 Taylor polynomial
 * on |r| ≤ ln2/64 (Tang, "Table-driven implementation of the exponential function in IEEE floating-point
 * arithmetic", ACM TOMS 15(2), 1989); log by the atanh series of (m-1)/(m+1); sin/cos by a three-part
 * Cody–Waite reduction by π/2 and their Taylor series on |r| ≤ π/4. */
#ifndef BITNET_DETMATH_H
#define BITNET_DETMATH_H

#ifdef __cplusplus
extern "C" {
#endif

/* e^x. NaN → NaN; x > 709.78 → +inf; x < -745.14 → +0; results below 2^-1022 are subnormal. */
double bitnet_exp_d(double x);

/* Natural logarithm for x > 0 (subnormals included); x == 0 → -inf; x < 0 or NaN → NaN; +inf → +inf. */
double bitnet_log_d(double x);

/* x^y = e^(y·ln x) for x > 0 (the only use: RoPE's base^(-2/d)); x <= 0 or NaN → NaN. The relative
 * error grows with |y·ln x| (about |y·ln x| · 2^-53 beyond the exp and log errors). */
double bitnet_pow_d(double x, double y);

/* sin x and cos x. Accurate as stated for |x| < 2^26 (the reduction by π/2 is exact there); up to 2^30
 * the same bits everywhere with less accuracy; beyond 2^30, NaN or ±inf → NaN (callers refuse such angles:
 * the RoPE tables, model/context.c). */
void bitnet_sincos_d(double x, double *s, double *c);

/* e^x in float: (float)bitnet_exp_d(x). NaN → NaN, x > 88.7228 → +inf, x < -103.98 → +0. */
float bitnet_expf(float x);

/* The data of the exp definition, for SIMD versions that must give the same bits (kernels/act/): for
 * -104 <= x <= 89, bitnet_expf(x) is, in IEEE double arithmetic without contraction,
 *   t = x·BITNET_EXP_INV_C + BITNET_EXP_SHIFT;  n = the low 32 bits of t (two's complement);
 *   nd = t − BITNET_EXP_SHIFT;  r = (x − nd·BITNET_EXP_C_HI) − nd·BITNET_EXP_C_LO;  j = n & 31;  m = (n − j) / 32;
 *   r2 = r·r;  p = (r + r2·(F2 + r·F3)) + (r2·r2)·((F4 + r·F5) + r2·F6)   (Fk = BITNET_EXP_INV_Fk = 1/k!);
 *   y = bitnet_exp_tab[j] + bitnet_exp_tab[j]·p;  result = (float)(y with m added to its exponent field). */
extern const double bitnet_exp_tab[32]; /* 2^(j/32), correctly rounded */
#define BITNET_EXP_INV_C 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define BITNET_EXP_SHIFT 0x1.8p52             /* t + 1.5·2^52 rounds t to an integer in the low bits */
#define BITNET_EXP_C_HI 0x1.62e42fee00000p-6  /* ln 2 / 32, its leading 32 bits */
#define BITNET_EXP_C_LO 0x1.a39ef35793c76p-38 /* ln 2 / 32 − BITNET_EXP_C_HI */
#define BITNET_EXP_INV_F2 0x1.0000000000000p-1
#define BITNET_EXP_INV_F3 0x1.5555555555555p-3
#define BITNET_EXP_INV_F4 0x1.5555555555555p-5
#define BITNET_EXP_INV_F5 0x1.1111111111111p-7
#define BITNET_EXP_INV_F6 0x1.6c16c16c16c17p-10

#ifdef __cplusplus
}
#endif

#endif
