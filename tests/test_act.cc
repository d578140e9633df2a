// test_act.cc — kernels/act/act.h: every version of the activations (scalar, AVX2 where the CPU has it)
// gives the same floats, bit for bit, as the definition (a loop over bitnet_expf), on random inputs of every
// length 0..40 and 1000 and on the edges of bitnet_expf's range (−104, 89, ±inf, NaN, subnormal results).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/detmath.h"
#include "kernels/act/act.h"

namespace {

std::vector<float> inputs(size_t n, uint32_t seed, float lo, float hi) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto &x : v) x = d(rng);
    return v;
}

std::vector<float> edges() {
    const float nan = std::nanf("");
    return {-104.0f, -103.99f, -104.01f, -87.4f, -87.3f, -100.0f, 88.7f, 88.73f, 89.0f, 89.001f, 0.0f, -0.0f,
            1e-30f, -1e-30f, 1.0f, -1.0f, INFINITY, -INFINITY, nan, 50.0f, -50.0f, 3.5e-5f, -7.25f, 12.0f};
}

bool same_bits(const std::vector<float> &a, const std::vector<float> &b, size_t *at) {
    for (size_t i = 0; i < a.size(); i++) {
        if (std::memcmp(&a[i], &b[i], 4) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) {
            *at = i;
            return false;
        }
    }
    return true;
}

TEST(Act, EveryVersionGivesTheDefinitionsFloats) {
    std::vector<std::string> isas = {"scalar", "avx2"};
    int ran = 0;
    for (const std::string &isa : isas) {
        bitnet_act_fns f;
        if (!bitnet_act_fns_for_isa(isa.c_str(), &f)) continue;
        ran++;
        SCOPED_TRACE(isa);
        std::vector<size_t> lens;
        for (size_t n = 0; n <= 40; n++) lens.push_back(n);
        lens.push_back(1000);
        for (size_t n : lens) {
            for (int kind = 0; kind < 3; kind++) {
                std::vector<float> x = kind == 0 ? inputs(n, 7 + (uint32_t)n, -20.0f, 20.0f)
                                      : kind == 1 ? inputs(n, 11 + (uint32_t)n, -120.0f, 100.0f)
                                                  : std::vector<float>();
                if (kind == 2) {
                    const std::vector<float> e = edges();
                    for (size_t i = 0; i < n; i++) x.push_back(e[i % e.size()]);
                }
                const std::vector<float> u = inputs(n, 3 + (uint32_t)n, -2.0f, 2.0f);
                // SiLU times up: the definition, then the version
                std::vector<float> want(n), got = x;
                for (size_t i = 0; i < n; i++) want[i] = (x[i] / (1.0f + bitnet_expf(-x[i]))) * u[i];
                f.silu_mul(got.data(), u.data(), (int64_t)n);
                size_t at = 0;
                EXPECT_TRUE(same_bits(want, got, &at)) << "silu_mul n=" << n << " kind " << kind << " at " << at
                                                       << ": x " << x[at] << " want " << want[at] << " got " << got[at];
                // e^(x - m)
                const float m = n ? x[0] * 0.5f : 0.0f;
                std::vector<float> want2(n), got2 = x;
                for (size_t i = 0; i < n; i++) want2[i] = bitnet_expf(x[i] - m);
                f.exp_sub(got2.data(), m, (int64_t)n);
                EXPECT_TRUE(same_bits(want2, got2, &at)) << "exp_sub n=" << n << " kind " << kind << " at " << at
                                                         << ": x " << x[at] << " m " << m;
            }
        }
    }
    EXPECT_GE(ran, 1);
    // the dispatcher uses one of them
    const std::string chosen = bitnet_act_isa();
    EXPECT_TRUE(chosen == "scalar" || chosen == "avx2") << chosen;
}

// Every float of [-104, 89] in steps of 97 (about 23 million): the AVX2 exp8 equals bitnet_expf.
TEST(Act, ExpSubEqualsBitnetExpfOverItsRange) {
    bitnet_act_fns f;
    if (!bitnet_act_fns_for_isa("avx2", &f)) GTEST_SKIP() << "no AVX2 on this CPU";
    std::vector<float> x;
    for (int sign = 0; sign < 2; sign++) {
        for (uint32_t b = 0; b < 0x42b20000u; b += 97) {
            const uint32_t u = b | (sign ? 0x80000000u : 0u);
            float v;
            std::memcpy(&v, &u, 4);
            if (v < -104.0f) break;
            x.push_back(v);
        }
    }
    std::vector<float> got = x;
    f.exp_sub(got.data(), 0.0f, (int64_t)got.size());
    for (size_t i = 0; i < x.size(); i++) {
        const float want = bitnet_expf(x[i]);
        ASSERT_EQ(std::memcmp(&want, &got[i], 4), 0) << "x = " << x[i] << ": " << want << " vs " << got[i];
    }
}

} // namespace
