/* sampler.h — next-token choice from logits: greedy (temperature <= 0) or temperature sampling with
 * optional top-k / top-p, driven by a seeded 64-bit PRNG so a run is reproducible with --seed. */
#ifndef BITNET_SAMPLER_H
#define BITNET_SAMPLER_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_sampler {
    float temp;        /* <= 0: greedy */
    int32_t top_k;     /* <= 0: all tokens */
    float top_p;       /* >= 1: off */
    uint64_t state;    /* PRNG state */
    float *probs;      /* scratch, owned */
    int32_t *idx;      /* scratch, owned */
    int32_t n_vocab;
} bitnet_sampler;

bitnet_status bitnet_sampler_init(bitnet_sampler *s, int32_t n_vocab, float temp, int32_t top_k, float top_p,
                                  uint64_t seed, bitnet_error *err);
void bitnet_sampler_free(bitnet_sampler *s);

/* Greedy: the highest logit, lowest id on ties. Otherwise softmax(logits/temp) restricted by top-k
 * and top-p, sampled with the PRNG. logits: [n_vocab]; NaN logits are treated as -inf. */
int32_t bitnet_sampler_sample(bitnet_sampler *s, const float *logits);

/* Index of the largest value (lowest index on ties). */
int32_t bitnet_argmax(const float *x, int32_t n);

#ifdef __cplusplus
}
#endif

#endif
