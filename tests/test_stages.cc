// test_stages.cc — a model split into pipeline stages in one process (model.h "Pipeline stages"): every
// split of a 5-layer dummy model into 1 to 4 contiguous ranges, on every kernel path and for the F32
// file, gives the logits of every position bit for bit as the whole model does, prompt in batches and
// generation token by token; a stage loads only its share (bitnet_model_stage_bytes); the stage API's
// refusals. The link between the stages is a queue in this file: stage 0 hands a batch to link.send,
// which runs it through the other stages' bitnet_decode_hidden at once, and link.recv takes it back.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kernels/lut/lut.h"
#include "model/model.h"
#include "test_util.h"

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_stages_", &g_dir));

struct ModelDel {
    void operator()(bitnet_model *m) const { bitnet_model_free(m); }
};
struct ContextDel {
    void operator()(bitnet_context *c) const { bitnet_context_free(c); }
};
using ModelPtr = std::unique_ptr<bitnet_model, ModelDel>;
using ContextPtr = std::unique_ptr<bitnet_context, ContextDel>;

constexpr int kLayers = 5, kVocab = 512, kEmbd = 256;

// The 5-layer dummy model in the bitnetcpp-tiny layout, one file per output type (TL files with the
// built-in table's tiles, as test_model.cc's Golden files).
std::string ModelFile(bitnet_dummy_outtype out) {
    static std::string paths[8];
    std::string &p = paths[out];
    if (!p.empty()) return p;
    bitnet_dummy_params dp = bitnet_test::tiny_layout_params(out, 77);
    dp.n_layer = kLayers;
    std::vector<bitnet_dummy_shape_tiles> tiles;
    if (out == BITNET_DUMMY_TL1 || out == BITNET_DUMMY_TL2) {
        const int type = out == BITNET_DUMMY_TL1 ? BITNET_TYPE_TL1 : BITNET_TYPE_TL2;
        const int64_t shapes[3][2] = {{256, 256}, {768, 256}, {256, 768}};
        const bitnet_lut_table *tab = bitnet_lut_find_table(type, shapes, 3, "default");
        if (tab) {
            for (size_t k = 0; k < tab->n_entries; k++)
                tiles.push_back({tab->entries[k].M, tab->entries[k].K, tab->entries[k].tiles});
        }
        dp.tiles = tiles.data();
        dp.n_tiles = tiles.size();
    }
    const std::string path = g_dir + "/stages-" + std::to_string((int)out) + ".gguf";
    bitnet_error err{};
    if (bitnet_dummy_write(&dp, path.c_str(), &err) != BITNET_OK) {
        ADD_FAILURE() << err.msg;
        return "";
    }
    p = path;
    return p;
}

ModelPtr Load(const std::string &path, bitnet_kernel_path kp, int first, int n, bool embd_head) {
    bitnet_model_params p = {kp, nullptr, 0, nullptr, false, first, n, !embd_head, 0};
    bitnet_model *m = nullptr;
    bitnet_error err{};
    EXPECT_EQ(bitnet_model_load(path.c_str(), &p, &m, &err), BITNET_OK) << err.msg;
    return ModelPtr(m);
}

ContextPtr NewContext(bitnet_model *m, int n_batch, int n_threads) {
    bitnet_context *c = nullptr;
    bitnet_error err{};
    const bitnet_context_params cp = {64, n_batch, n_threads, 64, 1, false};
    EXPECT_EQ(bitnet_context_create_params(m, &cp, &c, &err), BITNET_OK) << err.msg;
    return ContextPtr(c);
}

// Stages 1..N-1 behind stage 0's link: send runs a batch through them, recv hands it back in order.
struct Chain {
    std::vector<bitnet_context *> rest;
    std::deque<std::vector<float>> queue;
    int sends = 0;
    std::string failure;

    static bitnet_status Send(void *user, const float *x, int32_t n, int32_t pos0, bitnet_error *err) {
        Chain *ch = static_cast<Chain *>(user);
        std::vector<float> v(x, x + (size_t)n * kEmbd);
        for (bitnet_context *c : ch->rest) {
            bitnet_status st = bitnet_decode_hidden(c, v.data(), n, pos0, err);
            if (st != BITNET_OK) return st;
        }
        ch->queue.push_back(std::move(v));
        ch->sends++;
        return BITNET_OK;
    }
    static bitnet_status Recv(void *user, float *x, int32_t n, int32_t, bitnet_error *err) {
        Chain *ch = static_cast<Chain *>(user);
        if (ch->queue.empty() || ch->queue.front().size() != (size_t)n * kEmbd) {
            snprintf(err->msg, sizeof err->msg, "recv of %d tokens without a matching send", (int)n);
            return BITNET_ERR_INVALID_ARG;
        }
        std::copy(ch->queue.front().begin(), ch->queue.front().end(), x);
        ch->queue.pop_front();
        return BITNET_OK;
    }
};

// Logits of every position: a 9-token prompt in batches of n_batch with all logits, then 4 tokens one by
// one (each the argmax of the previous logits), on a model cut at `cuts` (layer counts per stage; one
// entry = the whole model, loaded without stage params).
std::vector<std::vector<float>> RunStages(const std::string &path, bitnet_kernel_path kp, const std::vector<int> &cuts,
                                    int n_batch, int n_threads) {
    std::vector<std::vector<float>> out;
    std::vector<ModelPtr> models;
    std::vector<ContextPtr> ctxs;
    int first = 0;
    for (size_t s = 0; s < cuts.size(); s++) {
        if (cuts.size() == 1) models.push_back(Load(path, kp, 0, 0, true));
        else models.push_back(Load(path, kp, first, cuts[s], s == 0));
        if (!models.back()) return out;
        ctxs.push_back(NewContext(models.back().get(), n_batch, n_threads));
        if (!ctxs.back()) return out;
        first += cuts[s];
    }
    Chain chain;
    for (size_t s = 1; s < ctxs.size(); s++) chain.rest.push_back(ctxs[s].get());
    const bitnet_stage_link link = {&chain, Chain::Send, Chain::Recv};
    if (cuts.size() > 1) bitnet_context_set_link(ctxs[0].get(), &link);
    bitnet_context *c0 = ctxs[0].get();

    std::vector<int32_t> prompt = {1, 17, 300, 5, 99, 42, 511, 256, 7};
    bitnet_error err{};
    EXPECT_EQ(bitnet_decode(c0, prompt.data(), (int32_t)prompt.size(), 0, true, &err), BITNET_OK) << err.msg;
    for (int t = 0; t < (int)prompt.size(); t++) {
        const float *l = bitnet_get_logits_ith(c0, t);
        if (!l) {
            ADD_FAILURE() << "no logits at " << t;
            return out;
        }
        out.emplace_back(l, l + kVocab);
    }
    int32_t pos = (int32_t)prompt.size();
    for (int step = 0; step < 4; step++, pos++) {
        const std::vector<float> &last = out.back();
        int32_t id = (int32_t)(std::max_element(last.begin(), last.end()) - last.begin());
        EXPECT_EQ(bitnet_decode(c0, &id, 1, pos, false, &err), BITNET_OK) << err.msg;
        const float *l = bitnet_get_logits(c0);
        if (!l) return out;
        out.emplace_back(l, l + kVocab);
    }
    EXPECT_TRUE(chain.queue.empty());
    return out;
}

bool SameBits(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every composition of kLayers into 1..4 positive parts.
std::vector<std::vector<int>> Splits() {
    std::vector<std::vector<int>> all;
    for (int mask = 0; mask < (1 << (kLayers - 1)); mask++) {
        std::vector<int> parts = {1};
        for (int b = 0; b < kLayers - 1; b++) {
            if (mask & (1 << b)) parts.push_back(1);
            else parts.back()++;
        }
        if (parts.size() <= 4) all.push_back(parts);
    }
    return all;
}

std::string Name(const std::vector<int> &cuts) {
    std::string s;
    for (int c : cuts) s += (s.empty() ? "" : ",") + std::to_string(c);
    return s;
}

TEST(Stages, EverySplitGivesTheWholeModelsLogitsOnEveryPath) {
    struct Case {
        bitnet_dummy_outtype out;
        bitnet_kernel_path kp;
    } cases[] = {{BITNET_DUMMY_I2_S, BITNET_PATH_I2S}, {BITNET_DUMMY_I2_S, BITNET_PATH_AUTO},
                 {BITNET_DUMMY_TL1, BITNET_PATH_TL1},  {BITNET_DUMMY_TL2, BITNET_PATH_TL2},
                 {BITNET_DUMMY_F32, BITNET_PATH_AUTO}};
    const std::vector<std::vector<int>> splits = Splits();
    ASSERT_EQ(splits.size(), 15u); // 1 + 4 + 6 + 4 compositions of 5 into at most 4 parts
    for (const Case &cs : cases) {
        const std::string path = ModelFile(cs.out);
        ASSERT_FALSE(path.empty());
        const auto whole = RunStages(path, cs.kp, {kLayers}, 4, 2);
        ASSERT_EQ(whole.size(), 13u);
        for (const auto &cuts : splits) {
            if (cuts.size() == 1) continue;
            for (int nb : {4, 1}) {
                const auto got = RunStages(path, cs.kp, cuts, nb, nb == 1 ? 1 : 2);
                ASSERT_EQ(got.size(), whole.size()) << Name(cuts);
                for (size_t i = 0; i < got.size(); i++) {
                    EXPECT_TRUE(SameBits(got[i], whole[i]))
                        << "type " << (int)cs.out << ", path " << bitnet_kernel_path_name(cs.kp) << ", split "
                        << Name(cuts) << ", n_batch " << nb << ", position " << i;
                }
            }
        }
    }
}

TEST(Stages, AStageUsesItsShareOfTheFile) {
    const std::string path = ModelFile(BITNET_DUMMY_I2_S);
    ModelPtr whole = Load(path, BITNET_PATH_I2S, 0, 0, true);
    ASSERT_TRUE(whole);
    const uint64_t all = bitnet_model_stage_bytes(whole.get());
    EXPECT_EQ(all, bitnet_model_size_bytes(whole.get()));
    ModelPtr s0 = Load(path, BITNET_PATH_I2S, 0, 2, true), s1 = Load(path, BITNET_PATH_I2S, 2, 2, false),
             s2 = Load(path, BITNET_PATH_I2S, 4, 1, false);
    ASSERT_TRUE(s0 && s1 && s2);
    const uint64_t b0 = bitnet_model_stage_bytes(s0.get()), b1 = bitnet_model_stage_bytes(s1.get()),
                   b2 = bitnet_model_stage_bytes(s2.get());
    EXPECT_EQ(b0 + b1 + b2, all); // the stages' shares tile the file's tensors
    EXPECT_EQ(b1, 2 * b2);        // equal layers
    EXPECT_GT(b0, b1);            // stage 0 also holds token_embd (the tied head) and output_norm
    int32_t f, e;
    bool io;
    bitnet_model_stage(s1.get(), &f, &e, &io);
    EXPECT_EQ(f, 2);
    EXPECT_EQ(e, 4);
    EXPECT_FALSE(io);
    // the KV cache holds the stage's layers only
    bitnet_context_budget bw{}, b1c{};
    bitnet_error err{};
    const bitnet_context_params cp = {64, 4, 1, 1, 1, false};
    ASSERT_EQ(bitnet_context_arena_bytes(whole.get(), &cp, 0, &bw, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_context_arena_bytes(s1.get(), &cp, 0, &b1c, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bw.kv_cache, 5 * b1c.kv_cache / 2);
}

TEST(Stages, RefusalsNameTheRule) {
    const std::string path = ModelFile(BITNET_DUMMY_I2_S);
    bitnet_model *m = nullptr;
    bitnet_error err{};
    struct Bad {
        int first, n;
        bool skip;
        const char *want;
    } bad[] = {{3, 3, true, "not within the model's 5 layers"},
               {5, 1, true, "not within the model's 5 layers"},
               {2, 1, false, "starts at layer 0, not 2"},
               {-1, 1, true, "must be >= 0"}};
    for (const Bad &b : bad) {
        bitnet_model_params p = {BITNET_PATH_I2S, nullptr, 0, nullptr, false, b.first, b.n, b.skip, 0};
        err = bitnet_error{};
        EXPECT_EQ(bitnet_model_load(path.c_str(), &p, &m, &err), BITNET_ERR_INVALID_ARG) << b.first << "+" << b.n;
        EXPECT_NE(std::string(err.msg).find(b.want), std::string::npos) << err.msg;
        EXPECT_EQ(m, nullptr);
    }
    // stage 0 without a link, a later stage through bitnet_decode, stage 0 through bitnet_decode_hidden
    ModelPtr s0 = Load(path, BITNET_PATH_I2S, 0, 2, true), s1 = Load(path, BITNET_PATH_I2S, 2, 3, false);
    ASSERT_TRUE(s0 && s1);
    ContextPtr c0 = NewContext(s0.get(), 4, 1), c1 = NewContext(s1.get(), 4, 1);
    ASSERT_TRUE(c0 && c1);
    int32_t tok = 1;
    err = bitnet_error{};
    EXPECT_EQ(bitnet_decode(c0.get(), &tok, 1, 0, false, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("bitnet_context_set_link"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_get_logits(c0.get()), nullptr);
    err = bitnet_error{};
    EXPECT_EQ(bitnet_decode(c1.get(), &tok, 1, 0, false, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("bitnet_decode_hidden"), std::string::npos) << err.msg;
    std::vector<float> x(kEmbd, 0.5f);
    err = bitnet_error{};
    EXPECT_EQ(bitnet_decode_hidden(c0.get(), x.data(), 1, 0, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("use bitnet_decode"), std::string::npos) << err.msg;
    err = bitnet_error{};
    EXPECT_EQ(bitnet_decode_hidden(c1.get(), x.data(), 1, 64, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("exceeds the context size"), std::string::npos) << err.msg;
    // a hidden-state stage gives the same floats whatever the batch split
    std::vector<float> a(3 * kEmbd), b;
    for (size_t i = 0; i < a.size(); i++) a[i] = (float)((int)(i * 7919 % 200) - 100) / 64.0f;
    b = a;
    ContextPtr c1b = NewContext(s1.get(), 1, 2);
    ASSERT_TRUE(c1b);
    ASSERT_EQ(bitnet_decode_hidden(c1.get(), a.data(), 3, 0, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_decode_hidden(c1b.get(), b.data(), 3, 0, &err), BITNET_OK) << err.msg;
    EXPECT_TRUE(SameBits(a, b));
}

} // namespace
