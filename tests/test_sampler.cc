// test_sampler.cc — greedy ties and NaN, reproducibility by seed, sampled frequencies against the
// softmax probabilities (fixed seed: deterministic), top-k and top-p. The PRNG's known answers are
// in test_rng.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "text/sampler.h"

namespace {

struct Sampler {
    bitnet_sampler s{};
    Sampler(int32_t n, float temp, int32_t top_k, float top_p, uint64_t seed) {
        bitnet_error err{};
        EXPECT_EQ(bitnet_sampler_init(&s, n, temp, top_k, top_p, seed, &err), BITNET_OK) << err.msg;
    }
    ~Sampler() { bitnet_sampler_free(&s); }
    int32_t operator()(const std::vector<float> &l) { return bitnet_sampler_sample(&s, l.data()); }
};

// Frequencies over `draws` samples.
std::vector<double> freqs(Sampler &S, const std::vector<float> &l, int draws) {
    std::vector<double> f(l.size(), 0.0);
    for (int i = 0; i < draws; i++) f[S(l)] += 1.0;
    for (double &x : f) x /= draws;
    return f;
}

// softmax(l / temp) in double, restricted to `keep` (renormalised).
std::vector<double> softmax(const std::vector<float> &l, double temp, const std::vector<bool> &keep) {
    double mx = -INFINITY;
    for (size_t i = 0; i < l.size(); i++) if (keep[i]) mx = std::max(mx, (double)l[i]);
    std::vector<double> p(l.size(), 0.0);
    double t = 0;
    for (size_t i = 0; i < l.size(); i++) {
        if (!keep[i]) continue;
        p[i] = std::exp(((double)l[i] - mx) / temp);
        t += p[i];
    }
    for (double &x : p) x /= t;
    return p;
}

// Each frequency within 5 binomial standard deviations of p (plus a hair for float rounding).
void expect_close(const std::vector<double> &f, const std::vector<double> &p, int draws) {
    for (size_t i = 0; i < p.size(); i++) {
        const double sigma = std::sqrt(p[i] * (1 - p[i]) / draws);
        EXPECT_NEAR(f[i], p[i], 5 * sigma + 1e-6) << "token " << i;
    }
}

}  // namespace

TEST(Sampler, ArgmaxTiesNaNAndInf) {
    EXPECT_EQ(bitnet_argmax(std::vector<float>{1, 3, 3, 2}.data(), 4), 1);
    EXPECT_EQ(bitnet_argmax(std::vector<float>{NAN, 1, NAN, 1}.data(), 4), 1);
    EXPECT_EQ(bitnet_argmax(std::vector<float>{NAN, NAN}.data(), 2), 0);
    EXPECT_EQ(bitnet_argmax(std::vector<float>{-INFINITY, -INFINITY, -5}.data(), 3), 2);
    EXPECT_EQ(bitnet_argmax(std::vector<float>{-INFINITY, -INFINITY}.data(), 2), 0);
    EXPECT_EQ(bitnet_argmax(std::vector<float>{0, INFINITY, INFINITY}.data(), 3), 1);
    EXPECT_EQ(bitnet_argmax(std::vector<float>{-0.0f, 0.0f}.data(), 2), 0);  // -0 == 0: a tie
    EXPECT_EQ(bitnet_argmax(std::vector<float>{NAN, -1e30f}.data(), 2), 1);
}

TEST(Sampler, GreedyIsArgmax) {
    for (float temp : {0.0f, -1.0f}) {
        Sampler S(5, temp, 40, 0.9f, 7);
        EXPECT_EQ(S({0.5f, 2.0f, NAN, 2.0f, 1.0f}), 1);
        EXPECT_EQ(S({NAN, NAN, NAN, NAN, -3.0f}), 4);
        EXPECT_EQ(S({1, 1, 1, 1, 1}), 0);
    }
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
    const std::vector<float> flat(64, 0.0f);
    auto run = [&](uint64_t seed) {
        Sampler S(64, 1.0f, 0, 1.0f, seed);
        std::vector<int32_t> r;
        for (int i = 0; i < 50; i++) r.push_back(S(flat));
        return r;
    };
    EXPECT_EQ(run(1234), run(1234));
    EXPECT_NE(run(1234), run(1235));
    EXPECT_NE(run(0), run(1));
    // and a sequence is not constant
    std::vector<int32_t> r = run(99);
    int distinct = 0;
    std::vector<bool> seen(64, false);
    for (int32_t x : r) distinct += !seen[x], seen[x] = true;
    EXPECT_GT(distinct, 20);
}

TEST(Sampler, FrequenciesMatchSoftmax) {
    const std::vector<float> l = {1.0f, 2.0f, 0.5f, -1.0f};
    const int draws = 200000;
    for (float temp : {1.0f, 0.7f, 2.5f}) {
        Sampler S(4, temp, 0, 1.0f, 2024);
        expect_close(freqs(S, l, draws), softmax(l, temp, {true, true, true, true}), draws);
    }
}

TEST(Sampler, NaNAndMinusInfAreNeverSampled) {
    const std::vector<float> l = {NAN, 0.0f, -INFINITY, 0.0f, NAN};
    Sampler S(5, 1.0f, 0, 1.0f, 5);
    const std::vector<double> f = freqs(S, l, 20000);
    EXPECT_EQ(f[0], 0.0);
    EXPECT_EQ(f[2], 0.0);
    EXPECT_EQ(f[4], 0.0);
    expect_close(f, {0, 0.5, 0, 0.5, 0}, 20000);
    // all excluded: token 0; +inf present: the lowest +inf id
    EXPECT_EQ(S({NAN, -INFINITY, NAN, NAN, NAN}), 0);
    EXPECT_EQ(S({1.0f, INFINITY, 2.0f, INFINITY, NAN}), 1);
}

TEST(Sampler, TopKOneIsGreedy) {
    bitnet_rng st;
    bitnet_rng_seed(&st, 77);
    for (int rep = 0; rep < 300; rep++) {
        std::vector<float> l(37);
        for (float &x : l) x = (float)(bitnet_rng_next(&st) % 7) - 3.0f;  // many ties
        if (rep % 5 == 0) l[rep % 37] = NAN;
        Sampler S(37, 0.8f + (float)(rep % 3), 1, rep % 2 ? 1.0f : 0.5f, (uint64_t)rep);
        ASSERT_EQ(S(l), bitnet_argmax(l.data(), 37)) << rep;
    }
}

TEST(Sampler, TopKRestrictsAndRenormalises) {
    const std::vector<float> l = {1.0f, 2.0f, 0.5f, 1.9f, -1.0f, 2.0f};
    const int draws = 100000;
    Sampler S(6, 1.0f, 3, 1.0f, 11);  // top 3 by logit: ids 1, 5 (tie 2.0), 3 (1.9)
    expect_close(freqs(S, l, draws), softmax(l, 1.0, {false, true, false, true, false, true}), draws);
    Sampler T(6, 1.0f, 2, 1.0f, 11);  // ties go to the lower id: 1 and 5 (both 2.0)
    expect_close(freqs(T, l, draws), softmax(l, 1.0, {false, true, false, false, false, true}), draws);
    Sampler U(6, 1.0f, 100, 1.0f, 11);  // k >= n: all
    expect_close(freqs(U, l, draws), softmax(l, 1.0, std::vector<bool>(6, true)), draws);
}

TEST(Sampler, TopPKeepsTheShortestHeadReachingP) {
    // probabilities 0.5, 0.3, 0.15, 0.05 (logits = ln p, temp 1)
    const std::vector<float> l = {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
    const int draws = 100000;
    {
        Sampler S(4, 1.0f, 0, 0.7f, 3);  // 0.5 < 0.7 <= 0.8: keep ids 1, 3
        expect_close(freqs(S, l, draws), softmax(l, 1.0, {false, true, false, true}), draws);
    }
    {
        Sampler S(4, 1.0f, 0, 0.9f, 3);  // 0.8 < 0.9 <= 0.95: keep 1, 3, 0
        expect_close(freqs(S, l, draws), softmax(l, 1.0, {true, true, false, true}), draws);
    }
    {
        Sampler S(4, 1.0f, 0, 0.3f, 3);  // the first token alone reaches 0.3
        expect_close(freqs(S, l, draws), {0, 1, 0, 0}, draws);
        Sampler Z(4, 1.0f, 0, 0.0f, 3);  // top_p <= 0: the most likely token
        expect_close(freqs(Z, l, draws), {0, 1, 0, 0}, draws);
    }
    {
        // top-k 3 first (ids 1, 3, 0: mass 0.95), then top-p 0.8 of that: 0.5/0.95 < 0.8 <= 0.8/0.95
        Sampler S(4, 1.0f, 3, 0.8f, 3);
        expect_close(freqs(S, l, draws), softmax(l, 1.0, {false, true, false, true}), draws);
    }
}

TEST(Sampler, InitErrorsAndFree) {
    bitnet_sampler s{};
    bitnet_error err{};
    EXPECT_EQ(bitnet_sampler_init(&s, 0, 1.0f, 0, 1.0f, 1, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("n_vocab = 0"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_sampler_init(&s, 4, NAN, 0, 1.0f, 1, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("temperature"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_sampler_init(&s, 4, 1.0f, 0, NAN, 1, &err), BITNET_ERR_INVALID_ARG);
    bitnet_sampler_free(&s);
    ASSERT_EQ(bitnet_sampler_init(&s, 4, 1.0f, 0, 1.0f, 1, &err), BITNET_OK);
    bitnet_sampler_free(&s);
    bitnet_sampler_free(&s);  // twice is fine
}
