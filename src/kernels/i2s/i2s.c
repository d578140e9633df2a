/* i2s.c — the I2_S × int8 product's dispatch (bitnet_i2s_gemm: the best version the CPU runs, capped
 * by BITNET_ISA through bitnet_cpu_supports), Σ q (bitnet_i2s_qsum) and the activation quantizer with
 * its Σ q (bitnet_i2s_quantize_act); contract in i2s.h. The versions live one file per ISA:
 * i2s_portable.c, i2s_avx2.c, i2s_avx512.c, i2s_neon.c (declared in i2s_internal.h). */
#include "kernels/i2s/i2s.h"

#include <stdatomic.h>
#include <string.h>

#include "base/quants.h"
#include "kernels/i2s/i2s_internal.h"
#include "kernels/isa.h"

int32_t bitnet_i2s_qsum(const int8_t *q, int64_t K) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += q[k];
    return s;
}

/* ---- dispatch -------------------------------------------------------------------------------- */

typedef struct bitnet_i2s_version {
    const char *isa;
    bitnet_i2s_gemm_fn fn;
} bitnet_i2s_version;

/* Best first; "portable" (plain C) is last and always runs. */
static const bitnet_i2s_version bitnet_i2s_versions[] = {
#ifdef BITNET_I2S_HAVE_AVX2
    {"avx512", bitnet_i2s_gemm__avx512},
    {"avxvnni", bitnet_i2s_gemm__avxvnni},
    {"avx2", bitnet_i2s_gemm__avx2},
#endif
#ifdef BITNET_I2S_HAVE_NEON
    {"neon", bitnet_i2s_gemm__neon},
#endif
    {"portable", bitnet_i2s_gemm__portable},
};
#define BITNET_I2S_N_VERSIONS (sizeof(bitnet_i2s_versions) / sizeof(bitnet_i2s_versions[0]))

bitnet_i2s_gemm_fn bitnet_i2s_gemm_for_isa(const char *isa) {
    if (isa == NULL) return NULL;
    for (size_t i = 0; i < BITNET_I2S_N_VERSIONS; ++i)
        if (strcmp(isa, bitnet_i2s_versions[i].isa) == 0)
            return (i + 1 == BITNET_I2S_N_VERSIONS || bitnet_cpu_supports(isa)) ? bitnet_i2s_versions[i].fn : NULL;
    return NULL;
}

/* 0 = not chosen yet, else index + 1 into bitnet_i2s_versions. Racing first calls choose the same. */
static atomic_int bitnet_i2s_choice = 0;

static const bitnet_i2s_version *bitnet_i2s_chosen(void) {
    int c = atomic_load_explicit(&bitnet_i2s_choice, memory_order_relaxed);
    if (c == 0) {
        size_t i = 0;
        while (i + 1 < BITNET_I2S_N_VERSIONS && !bitnet_cpu_supports(bitnet_i2s_versions[i].isa)) ++i;
        c = (int)i + 1;
        atomic_store_explicit(&bitnet_i2s_choice, c, memory_order_relaxed);
    }
    return &bitnet_i2s_versions[c - 1];
}

const char *bitnet_i2s_isa(void) {
    return bitnet_i2s_chosen()->isa;
}

void bitnet_i2s_gemm(const uint8_t *w, int64_t M, int64_t K, const int8_t *q, size_t q_stride,
                     const int32_t *qsum, int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc, size_t acc_stride) {
    bitnet_i2s_chosen()->fn(w, M, K, q, q_stride, qsum, n_cols, m0, m1, acc, acc_stride);
}

/* ---- activation quantization (LAYOUTS.md §1) ----------------------------------------------------- */

float bitnet_i2s_quantize_act(const float *x, int64_t K, int8_t *q, int32_t *qsum) {
#ifdef BITNET_I2S_HAVE_AVX2
    const char *isa = bitnet_i2s_isa();
    if (strcmp(isa, "avx2") == 0 || strcmp(isa, "avxvnni") == 0 || strcmp(isa, "avx512") == 0) return bitnet_i2s_quantize_act__avx2(x, K, q, qsum);
#endif
    const float s = bitnet_quantize_act(x, K, q);
    *qsum = bitnet_i2s_qsum(q, K);
    return s;
}
