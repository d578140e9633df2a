/* rng.h — the one seeded pseudo-random generator of the project, used by the sampler (--seed) and by
 * the dummy-model writer (weights reproducible from a seed). Same seed → same sequence on every
 * platform: integer arithmetic only, no libm, no global state.
 *
 * Generator: xoshiro256** (D. Blackman, S. Vigna, "Scrambled linear pseudorandom number generators",
 * ACM TOMS 2021; https://prng.di.unimi.it/). Its 256-bit state is filled from a 64-bit seed with four
 * consecutive outputs of splitmix64 (G. Steele, D. Lea, C. Flood, "Fast splittable pseudorandom
 * number generators", OOPSLA 2014), the seeding the xoshiro authors recommend. Both are written from
 * those published descriptions. */
#ifndef BITNET_RNG_H
#define BITNET_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* splitmix64: *state += 0x9e3779b97f4a7c15, then the published output mix of the new state.
 * From *state == 0 the first outputs are 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, ... */
uint64_t bitnet_splitmix64(uint64_t *state);

/* xoshiro256** state. Any value but all zeros is valid; bitnet_rng_seed never yields all zeros. */
typedef struct bitnet_rng {
    uint64_t s[4];
} bitnet_rng;

/* s[0..3] = four consecutive splitmix64 outputs starting from state `seed`. */
void bitnet_rng_seed(bitnet_rng *r, uint64_t seed);

/* The next 64-bit output of xoshiro256** (advances the state). */
uint64_t bitnet_rng_next(bitnet_rng *r);

/* Uniform double in [0, 1): the top 53 bits of the next output divided by 2^53 (exact). */
double bitnet_rng_uniform(bitnet_rng *r);

#ifdef __cplusplus
}
#endif

#endif
