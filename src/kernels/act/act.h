/* act.h — the element-wise activations of the forward pass that call e^x: SiLU times the up projection and
 * the exponentials of the softmax. e^x is base/detmath.h's bitnet_expf (the same bits on every platform);
 * besides the scalar loops there is an AVX2 version that performs exactly bitnet_expf's double operations
 * four lanes at a time (detmath.h writes them down), so every version gives the same floats
 * (tests/test_act.cc compares them bit for bit). The choice is made on the first call (the best version
 * bitnet_cpu_supports allows: BITNET_ISA=scalar keeps the scalar one). Implemented in act.c (scalar,
 * dispatch) and act_avx2.c. */
#ifndef BITNET_ACT_H
#define BITNET_ACT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* g[i] = silu(g[i]) · u[i] for i < n: silu(x) = x / (1 + e^-x) (Elfwing et al. 2018), in float:
 * e = bitnet_expf(-x), then x / (1.0f + e), then · u[i]. g and u: [n] floats (g may not alias u). */
void bitnet_act_silu_mul(float *g, const float *u, int64_t n);

/* x[i] = bitnet_expf(x[i] − m) for i < n (the float difference first; +0 where it is below −104, as
 * bitnet_expf gives): the unnormalized softmax of scores x with their maximum m. */
void bitnet_act_exp_sub(float *x, float m, int64_t n);

/* The versions: "scalar" or "avx2"; false when that version is not compiled in or the CPU does not run
 * it (bitnet_cpu_supports). For tests and benchmarks. */
typedef struct bitnet_act_fns {
    void (*silu_mul)(float *g, const float *u, int64_t n);
    void (*exp_sub)(float *x, float m, int64_t n);
} bitnet_act_fns;
bool bitnet_act_fns_for_isa(const char *isa, bitnet_act_fns *out);

/* "avx2" or "scalar": the version the two functions above use. */
const char *bitnet_act_isa(void);

#ifdef __cplusplus
}
#endif

#endif
