/* act.c — the scalar activations and the choice of version (contracts in act.h; AVX2 in act_avx2.c). */
#include "kernels/act/act_internal.h"

#include <stdatomic.h>
#include <string.h>

#include "base/detmath.h"
#include "kernels/isa.h"

void bitnet_act_silu_mul__scalar(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = (x / (1.0f + bitnet_expf(-x))) * u[i];
    }
}

void bitnet_act_exp_sub__scalar(float *x, float m, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = bitnet_expf(x[i] - m);
}

static const struct {
    const char *isa;
    bitnet_act_fns fns;
} versions[] = {
#ifdef BITNET_ACT_HAVE_AVX2
    {"avx2", {bitnet_act_silu_mul__avx2, bitnet_act_exp_sub__avx2}},
#endif
    {"scalar", {bitnet_act_silu_mul__scalar, bitnet_act_exp_sub__scalar}}, /* last: always runs */
};
#define N_VERSIONS (sizeof versions / sizeof versions[0])

bool bitnet_act_fns_for_isa(const char *isa, bitnet_act_fns *out) {
    for (size_t i = 0; isa && i < N_VERSIONS; i++) {
        if (strcmp(versions[i].isa, isa) == 0 && (i + 1 == N_VERSIONS || bitnet_cpu_supports(isa))) {
            *out = versions[i].fns;
            return true;
        }
    }
    return false;
}

/* 0: not chosen yet, else index + 1. Racing first calls choose the same. */
static atomic_int g_choice;

static size_t chosen(void) {
    int c = atomic_load_explicit(&g_choice, memory_order_relaxed);
    if (c == 0) {
        size_t i = 0;
        while (i + 1 < N_VERSIONS && !bitnet_cpu_supports(versions[i].isa)) i++;
        c = (int)i + 1;
        atomic_store_explicit(&g_choice, c, memory_order_relaxed);
    }
    return (size_t)c - 1;
}

const char *bitnet_act_isa(void) { return versions[chosen()].isa; }

void bitnet_act_silu_mul(float *g, const float *u, int64_t n) { versions[chosen()].fns.silu_mul(g, u, n); }

void bitnet_act_exp_sub(float *x, float m, int64_t n) { versions[chosen()].fns.exp_sub(x, m, n); }
