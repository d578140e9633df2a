/* sampler.h — next-token choice from logits: greedy (temperature <= 0) or temperature sampling with
 * optional top-k / top-p, driven by a seeded 64-bit PRNG so a run is reproducible with --seed.
 *
 * PRNG: bitnet_rng (rng.h: xoshiro256** seeded by splitmix64). Same seed → same sequence on every
 * platform. */
#ifndef BITNET_SAMPLER_H
#define BITNET_SAMPLER_H

#include "base/common.h"
#include "base/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_sampler {
    float temp;        /* <= 0: greedy */
    int32_t top_k;     /* <= 0: all tokens */
    float top_p;       /* >= 1: off */
    bitnet_rng rng;    /* seeded by bitnet_sampler_init */
    float *probs;      /* scratch, owned */
    int32_t *idx;      /* scratch, owned */
    int32_t n_vocab;
} bitnet_sampler;

/* n_vocab >= 1; temp and top_p must not be NaN (BITNET_ERR_INVALID_ARG naming the value);
 * BITNET_ERR_NOMEM for the scratch buffers. top_p <= 0 keeps only the most likely token. */
bitnet_status bitnet_sampler_init(bitnet_sampler *s, int32_t n_vocab, float temp, int32_t top_k, float top_p,
                                  uint64_t seed, bitnet_error *err);
void bitnet_sampler_free(bitnet_sampler *s); /* safe twice, and on a zeroed struct */

/* Greedy (temp <= 0): the highest logit, lowest id on ties. Otherwise:
 *  1. candidates: tokens whose logit is not NaN or -inf (if none: token 0; if some logit is +inf: the
 *     lowest such id);
 *  2. top-k (0 < top_k < n_vocab): the k highest logits (ties: lower id first);
 *  3. p_i = exp((l_i - l_max) / temp) in float32 (softmax with max subtraction, unnormalised);
 *  4. top-p (top_p < 1): the shortest run of candidates in order of decreasing logit whose mass
 *     reaches top_p of the candidates' total (at least one);
 *  5. u = uniform [0,1) from the PRNG, the first candidate (in id order without top-k/top-p, else in
 *     order of decreasing logit) whose cumulative mass exceeds u · total.
 * logits: [n_vocab]. Cost O(n_vocab) plus O(m log n_vocab) for the m candidates kept by top-k/top-p. */
int32_t bitnet_sampler_sample(bitnet_sampler *s, const float *logits);

/* Index of the largest value (lowest index on ties). */
int32_t bitnet_argmax(const float *x, int32_t n);

#ifdef __cplusplus
}
#endif

#endif
