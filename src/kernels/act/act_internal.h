/* act_internal.h — private to src/kernels/act/: the versions act.c chooses from (contracts in act.h). */
#ifndef BITNET_ACT_INTERNAL_H
#define BITNET_ACT_INTERNAL_H

#include <stdbool.h>

#include "kernels/act/act.h"

void bitnet_act_silu_mul__scalar(float *g, const float *u, int64_t n);
void bitnet_act_exp_sub__scalar(float *x, float m, int64_t n);

#if defined(__x86_64__)
#define BITNET_ACT_HAVE_AVX2 1
/* AVX2 (function target attributes; call only after bitnet_cpu_supports("avx2")). */
void bitnet_act_silu_mul__avx2(float *g, const float *u, int64_t n);
void bitnet_act_exp_sub__avx2(float *x, float m, int64_t n);
#endif

#endif
