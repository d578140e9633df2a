// test_perplexity.cc — the pieces of llama.cpp's perplexity method in src/eval/perplexity.h: the chunk plan
// (n_chunk = n_tokens / n_ctx capped by --chunks, first = n_ctx / 2, n_ctx - 1 - first scored tokens per
// chunk, the 2 · n_ctx minimum and the other refusals with their numbers), the NLL of one token against
// closed forms, and the estimate and its uncertainty against hand-computed values. The whole method
// over a model, against numpy, is tests/perplexity/test_perplexity_tool.py.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "convert/dummy_model.h"
#include "model/model.h"
#include "eval/perplexity.h"
#include "test_util.h"

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_perplexity_", &g_dir));

bitnet_ppl_plan plan(size_t n_tokens, int32_t n_ctx, int32_t max_chunks) {
    bitnet_ppl_plan p{};
    bitnet_error err{};
    EXPECT_EQ(bitnet_ppl_plan_make(n_tokens, n_ctx, max_chunks, &p, &err), BITNET_OK) << err.msg;
    return p;
}

std::string plan_error(size_t n_tokens, int32_t n_ctx, int32_t max_chunks) {
    bitnet_ppl_plan p{};
    bitnet_error err{};
    EXPECT_EQ(bitnet_ppl_plan_make(n_tokens, n_ctx, max_chunks, &p, &err), BITNET_ERR_INVALID_ARG)
        << n_tokens << " " << n_ctx << " " << max_chunks;
    return err.msg;
}

double nll(const std::vector<float> &l, int32_t tok) { return bitnet_token_nll(l.data(), (int32_t)l.size(), tok); }

bitnet_ppl_sums sums_of(const std::vector<double> &v) {
    bitnet_ppl_sums s{};
    for (double x : v) {
        s.nll += x;
        s.nll2 += x * x;
        s.count++;
    }
    return s;
}

TEST(PerplexityPlan, ChunksFirstAndScored) {
    bitnet_ppl_plan p = plan(100, 10, -1);
    EXPECT_EQ(p.n_ctx, 10);
    EXPECT_EQ(p.n_chunk, 10);
    EXPECT_EQ(p.n_chunk_max, 10);
    EXPECT_EQ(p.first, 5);
    EXPECT_EQ(p.n_scored, 4);  // logits at 5..8 score tokens 6..9
    p = plan(109, 10, -1);     // the tail that does not fill a chunk is not used
    EXPECT_EQ(p.n_chunk, 10);
    p = plan(100, 10, 3);
    EXPECT_EQ(p.n_chunk, 3);
    EXPECT_EQ(p.n_chunk_max, 10);
    EXPECT_EQ(plan(100, 10, 50).n_chunk, 10);
    p = plan(2048, 512, -1);  // llama.cpp's default context
    EXPECT_EQ(p.first, 256);
    EXPECT_EQ(p.n_scored, 255);
    p = plan(66, 33, -1);  // odd n_ctx
    EXPECT_EQ(p.first, 16);
    EXPECT_EQ(p.n_scored, 16);
    p = plan(6, 3, -1);  // the smallest: 2 chunks of 3, one token each
    EXPECT_EQ(p.first, 1);
    EXPECT_EQ(p.n_scored, 1);
    EXPECT_EQ(p.n_chunk, 2);
}

TEST(PerplexityPlan, Refusals) {
    EXPECT_EQ(plan_error(100, 2, -1),
              "n_ctx 2 is too small for perplexity: a chunk scores the tokens after positions n_ctx/2 .. n_ctx-2, "
              "which needs n_ctx >= 3");
    EXPECT_NE(plan_error(100, -5, -1).find("n_ctx -5 is too small"), std::string::npos);
    EXPECT_EQ(plan_error(19, 10, -1),
              "the text has 19 tokens, too few for n_ctx 10: one chunk is 10 tokens and the method needs at least "
              "2 * n_ctx = 20 tokens");
    EXPECT_EQ(plan(20, 10, -1).n_chunk, 2);  // exactly 2 · n_ctx is enough
    EXPECT_NE(plan_error(0, 10, -1).find("the text has 0 tokens"), std::string::npos);
    EXPECT_EQ(plan_error(100, 10, 0), "max_chunks 0: expected -1 (all) or >= 1");
    EXPECT_EQ(plan_error(100, 10, -2), "max_chunks -2: expected -1 (all) or >= 1");
    EXPECT_EQ(plan_error(6, 3, 1), "n_ctx 3 with 1 chunk(s) scores only 1 token(s); the uncertainty needs at least 2");
}

TEST(PerplexityNll, ClosedForms) {
    // uniform logits: NLL = log V for every token
    for (int32_t v : {1, 2, 7, 512, 128256}) {
        std::vector<float> l((size_t)v, 0.25f);
        EXPECT_NEAR(nll(l, v - 1), std::log((double)v), 1e-12 * std::log((double)v + 1)) << v;
    }
    // softmax(0, 1): p(1) = e / (1 + e), p(0) = 1 / (1 + e)
    const double e = std::exp(1.0);
    EXPECT_NEAR(nll({0.0f, 1.0f}, 1), std::log((1 + e) / e), 1e-15);
    EXPECT_NEAR(nll({0.0f, 1.0f}, 0), std::log(1 + e), 1e-15);
    // shift invariance with large offsets (exactly representable): the max is subtracted first
    EXPECT_NEAR(nll({30000.0f, 30001.0f}, 0), std::log(1 + e), 1e-12);
    EXPECT_NEAR(nll({-30000.0f, -29999.0f}, 0), std::log(1 + e), 1e-12);
    // a token far below the rest: NLL is the gap plus log of the rest's mass, no underflow to inf
    EXPECT_NEAR(nll({0.0f, -2000.0f}, 1), 2000.0, 1e-9);
    // the float logits are used as they are (no rounding of the difference to float)
    EXPECT_NEAR(nll({0.1f, 0.0f}, 1), std::log(1 + std::exp((double)0.1f)), 1e-15);
    // not finite in, not finite out
    EXPECT_FALSE(std::isfinite(nll({0.0f, NAN, 1.0f}, 0)));
    EXPECT_FALSE(std::isfinite(nll({NAN, 0.0f}, 1)));
    EXPECT_FALSE(std::isfinite(nll({0.0f, INFINITY}, 0)));
}

TEST(PerplexityEstimate, ValueAndUncertainty) {
    const bitnet_ppl_sums s = sums_of({1, 2, 3, 4});
    // mean 2.5, mean of squares 7.5, variance 1.25, standard error sqrt(1.25 / 3)
    EXPECT_NEAR(bitnet_ppl_value(&s), std::exp(2.5), 1e-12);
    EXPECT_NEAR(bitnet_ppl_uncertainty(&s), std::exp(2.5) * std::sqrt(1.25 / 3), 1e-12);
    // a constant NLL: no spread, uncertainty 0 (llama.cpp would print no estimate)
    const bitnet_ppl_sums c = sums_of({0.1, 0.1, 0.1});
    EXPECT_NEAR(bitnet_ppl_value(&c), std::exp(0.1), 1e-15);
    EXPECT_EQ(bitnet_ppl_uncertainty(&c), 0.0);
    // too few tokens for either
    const bitnet_ppl_sums one = sums_of({2.0});
    EXPECT_EQ(bitnet_ppl_value(&one), std::exp(2.0));
    EXPECT_TRUE(std::isnan(bitnet_ppl_uncertainty(&one)));
    const bitnet_ppl_sums none{};
    EXPECT_TRUE(std::isnan(bitnet_ppl_value(&none)));
}

// bitnet_ppl_eval_chunk's refusals come before anything is evaluated: a bad id anywhere in the chunk —
// also in a batch later than the one being scored — is named, and the sums stay as they were.
TEST(PerplexityChunk, ArgumentsAreCheckedBeforeEvaluation) {
    bitnet_dummy_params dp = bitnet_test::tiny_layout_params(BITNET_DUMMY_I2_S, 1234);
    const std::string path = g_dir + "/tiny-i2_s.gguf";
    bitnet_error err{};
    ASSERT_EQ(bitnet_dummy_write(&dp, path.c_str(), &err), BITNET_OK) << err.msg;
    bitnet_model *m = nullptr;
    ASSERT_EQ(bitnet_model_load(path.c_str(), nullptr, &m, &err), BITNET_OK) << err.msg;
    bitnet_context *c = nullptr;
    ASSERT_EQ(bitnet_context_create(m, 64, 8, 1, &c, &err), BITNET_OK) << err.msg;
    std::vector<int32_t> toks(128);
    for (size_t i = 0; i < toks.size(); i++) toks[i] = 3 + (int32_t)(i * 7 % 500);
    const bitnet_ppl_plan p = plan(toks.size(), 64, -1);
    bitnet_ppl_sums s{};
    ASSERT_EQ(bitnet_ppl_eval_chunk(c, m, toks.data(), &p, 0, 8, 1, &s, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(s.count, 64 - 1 - 32);
    EXPECT_TRUE(std::isfinite(s.nll) && s.nll > 0);
    const bitnet_ppl_sums before = s;
    toks[64 + 40] = 2000000000;  // chunk 1, a scored target in the 6th batch of 8
    EXPECT_EQ(bitnet_ppl_eval_chunk(c, m, toks.data(), &p, 1, 8, 1, &s, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_STREQ(err.msg, "chunk 1: token id 2000000000 at position 40 is out of range [0, 512)");
    toks[64 + 40] = -3;
    EXPECT_EQ(bitnet_ppl_eval_chunk(c, m, toks.data(), &p, 1, 8, 1, &s, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_STREQ(err.msg, "chunk 1: token id -3 at position 40 is out of range [0, 512)");
    EXPECT_EQ(bitnet_ppl_eval_chunk(c, m, toks.data(), &p, 2, 8, 1, &s, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_STREQ(err.msg, "chunk 2 is outside [0, 2)");
    EXPECT_EQ(bitnet_ppl_eval_chunk(c, m, toks.data(), &p, 0, 0, 1, &s, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_STREQ(err.msg, "n_batch 0: expected >= 1");
    EXPECT_EQ(bitnet_ppl_eval_chunk(c, m, toks.data(), &p, 0, 8, 512, &s, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_STREQ(err.msg, "BOS id 512 is out of range [0, 512)");
    EXPECT_EQ(s.count, before.count);
    EXPECT_EQ(s.nll, before.nll);
    bitnet_context_free(c);
    bitnet_model_free(m);
}

}  // namespace
