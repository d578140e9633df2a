/* rng.c — splitmix64 and xoshiro256** (rng.h), written from their published descriptions
 * (Steele, Lea & Flood, OOPSLA 2014; Blackman & Vigna, https://prng.di.unimi.it/). */
#include "base/rng.h"

uint64_t bitnet_splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void bitnet_rng_seed(bitnet_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = bitnet_splitmix64(&x);
    /* splitmix64 is a bijection of a counter, so four consecutive outputs are never all zero */
}

uint64_t bitnet_rng_next(bitnet_rng *r) {
    uint64_t *s = r->s;
    const uint64_t result = rotl64(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl64(s[3], 45);
    return result;
}

double bitnet_rng_uniform(bitnet_rng *r) {
    return (double)(bitnet_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); /* k / 2^53 */
}
