// test_rng.cc — the project's one PRNG (src/base/rng.h) against known answers: splitmix64's published
// outputs, xoshiro256**'s reference outputs, the seeding (four consecutive splitmix64 outputs) and
// the range and mean of the uniform doubles. The sampler and the dummy-model weights both draw from
// it, so these pin --seed runs and every dummy model.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "base/rng.h"

TEST(Rng, SplitMix64MatchesPublishedOutputs) {
    // splitmix64 from state 0: the first outputs listed with the reference implementation
    // (prng.di.unimi.it/splitmix64.c), widely used as a test vector.
    uint64_t st = 0;
    EXPECT_EQ(bitnet_splitmix64(&st), 0xe220a8397b1dcdafull);
    EXPECT_EQ(bitnet_splitmix64(&st), 0x6e789e6aa1b965f4ull);
    EXPECT_EQ(bitnet_splitmix64(&st), 0x06c45d188009454full);
}

TEST(Rng, Xoshiro256StarStarMatchesReference) {
    // State {1, 2, 3, 4}: outputs of the reference xoshiro256starstar.c (also the test vector of
    // Rust's rand_xoshiro). The first two follow from the definition by hand:
    // rotl(s1 * 5, 7) * 9 = rotl(10, 7) * 9 = 11520, then s1 = 0 → 0.
    bitnet_rng r = {{1, 2, 3, 4}};
    const uint64_t expect[6] = {11520ull, 0ull, 1509978240ull, 1215971899390074240ull, 1216172134540287360ull,
                                607988272756665600ull};
    for (uint64_t e : expect) EXPECT_EQ(bitnet_rng_next(&r), e);
}

TEST(Rng, SeedIsFourConsecutiveSplitMix64Outputs) {
    // From seed 0 the state starts with the published splitmix64 outputs above.
    bitnet_rng r;
    bitnet_rng_seed(&r, 0);
    EXPECT_EQ(r.s[0], 0xe220a8397b1dcdafull);
    EXPECT_EQ(r.s[1], 0x6e789e6aa1b965f4ull);
    EXPECT_EQ(r.s[2], 0x06c45d188009454full);
    // Any seed: s[0..3] are the first four outputs of splitmix64 started at the seed.
    for (uint64_t seed : {0ull, 1ull, 42ull, 0xffffffffffffffffull}) {
        bitnet_rng_seed(&r, seed);
        uint64_t st = seed;
        for (int i = 0; i < 4; i++) EXPECT_EQ(r.s[i], bitnet_splitmix64(&st)) << "seed " << seed << " word " << i;
    }
}

TEST(Rng, UniformIsInUnitIntervalWithMeanHalf) {
    // uniform doubles are in [0, 1) and have mean ≈ 1/2
    bitnet_rng t;
    bitnet_rng_seed(&t, 42);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        const double u = bitnet_rng_uniform(&t);
        ASSERT_GE(u, 0.0);
        ASSERT_LT(u, 1.0);
        sum += u;
    }
    EXPECT_NEAR(sum / 100000, 0.5, 5 * std::sqrt(1.0 / 12 / 100000));
}
