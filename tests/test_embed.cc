// Embeddings of the qwen3 / gemma3 graphs (docs/EMBEDDINGS.md, model.h bitnet_embed): every kernel path,
// thread count, batch size and packing of texts gives the same bits; pooling and normalization follow
// their definitions exactly; golden hashes pin the vectors of seeded dummy models (their numerical
// agreement with the independent reference is tests/reference); bad calls and bad files are refused by
// name. The models are tiny dummies with the real models' peculiarities: head size != n_embd / n_head,
// GQA, per-projection norms, and for gemma3 local layers with their own RoPE base.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/gguf.h"
#include "convert/dummy_model.h"
#include "model/model.h"
#include "test_util.h"

namespace {

std::string TmpPath(const std::string &name) { return testing::TempDir() + "embed_" + name; }

// A tiny embedding model: n_embd 256, n_ff 512, 3 layers, 4 heads / 2 (qwen3) or 1 (gemma3) KV heads of size
// 128 (!= 256 / 4), vocabulary 600; gemma3 with a window of 4 positions on layers 0 and 2 (pattern 2) and
// RoPE base 10000 there, 1e6 elsewhere.
std::string WriteModel(bitnet_dummy_arch arch, bitnet_dummy_outtype out, bool norm_in, const std::string &name) {
    bitnet_dummy_params p;
    bitnet_dummy_params_init(&p);
    p.arch = arch;
    p.n_embd = 256;
    p.n_ff = 512;
    p.n_layer = 3;
    p.n_head = 4;
    p.n_head_kv = arch == BITNET_DUMMY_ARCH_GEMMA3 ? 1 : 2;
    p.n_embd_head = 128;
    p.n_vocab = 600;
    p.n_ctx = 64;
    p.rope_freq_base = 1e6f;
    p.rms_eps = 1e-6f;
    p.outtype = out;
    p.seed = arch == BITNET_DUMMY_ARCH_GEMMA3 ? 25 : 24;
    p.no_norm_in = !norm_in;
    if (arch == BITNET_DUMMY_ARCH_GEMMA3) {
        p.n_swa = 4;
        p.swa_pattern = 2;
        p.rope_freq_base_swa = 10000.0f;
    }
    const std::string path = TmpPath(name);
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_dummy_write(&p, path.c_str(), &err), BITNET_OK) << err.msg;
    return path;
}

// Four texts of 7, 1, 12 and 5 token ids (the last of each is the built-in vocabulary's EOS, 2).
const std::vector<std::vector<int32_t>> kTexts = {
    {1, 300, 301, 302, 260, 270, 2}, {2}, {1, 5, 17, 99, 310, 320, 330, 340, 350, 360, 370, 2}, {1, 400, 401, 402, 2}};

struct Embedder {
    bitnet_model *m = nullptr;
    bitnet_context *c = nullptr;
    ~Embedder() {
        bitnet_context_free(c);
        bitnet_model_free(m);
    }
};

void Open(Embedder *e, const std::string &path, bitnet_kernel_path kp, int32_t n_batch, int32_t n_threads,
          int32_t n_seq) {
    bitnet_error err = {{0}};
    const bitnet_model_params mp = {kp, nullptr, 0, nullptr, false, 0, 0, false, 0};
    ASSERT_EQ(bitnet_model_load(path.c_str(), &mp, &e->m, &err), BITNET_OK) << err.msg;
    const bitnet_context_params cp = {32, n_batch, n_threads, 1, n_seq, true};
    ASSERT_EQ(bitnet_context_create_params(e->m, &cp, &e->c, &err), BITNET_OK) << err.msg;
}

// bitnet_embed of texts (indices into kTexts) with pooling p; out sized by the pooling.
std::vector<float> Embed(Embedder *e, const std::vector<int> &which, bitnet_pooling p) {
    std::vector<const int32_t *> toks;
    std::vector<int32_t> lens;
    size_t rows = 0;
    for (int i : which) {
        toks.push_back(kTexts[i].data());
        lens.push_back((int32_t)kTexts[i].size());
        rows += kTexts[i].size();
    }
    const int32_t D = bitnet_model_hparams(e->m)->n_embd;
    std::vector<float> out((p == BITNET_POOLING_NONE ? rows : which.size()) * D, NAN);
    bitnet_error err = {{0}};
    bitnet_pooling used = BITNET_POOLING_UNSPECIFIED;
    EXPECT_EQ(bitnet_embed(e->c, toks.data(), lens.data(), (int32_t)which.size(), p, out.data(), &used, &err),
              BITNET_OK)
        << err.msg;
    EXPECT_EQ(used, p);
    return out;
}

uint64_t Fnv(const std::vector<float> &v) {
    uint64_t h = 1469598103934665603ull;
    const uint8_t *b = reinterpret_cast<const uint8_t *>(v.data());
    for (size_t i = 0; i < v.size() * sizeof(float); i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

struct ArchCase {
    bitnet_dummy_arch arch;
    const char *name;
    uint64_t golden; // FNV-1a of the NONE-pooled embeddings of all four texts (I2_S file, every path)
};

class EmbedArch : public testing::TestWithParam<ArchCase> {};

// Every ternary path (I2_S, TL1 and TL2 repacked from the I2_S file), 1 and 2 threads, batches of 1, 5 and
// 64 tokens and 1 or 3 sequences give the same bits, equal to the golden hash; pooling from those rows.
TEST_P(EmbedArch, AllPathsThreadsAndBatchesGiveTheGoldenVectors) {
    const ArchCase &ac = GetParam();
    const std::string path = WriteModel(ac.arch, BITNET_DUMMY_I2_S, true, std::string(ac.name) + ".i2_s.gguf");
    std::vector<float> first;
    for (bitnet_kernel_path kp : {BITNET_PATH_I2S, BITNET_PATH_TL1, BITNET_PATH_TL2}) {
        for (int32_t nt : {1, 2}) {
            for (int32_t nb : {1, 5, 64}) {
                for (int32_t ns : {1, 3}) {
                    Embedder e;
                    Open(&e, path, kp, nb, nt, ns);
                    if (HasFatalFailure()) return;
                    const std::vector<float> v = Embed(&e, {0, 1, 2, 3}, BITNET_POOLING_NONE);
                    if (first.empty()) {
                        first = v;
                        for (float x : v) ASSERT_TRUE(std::isfinite(x));
                    }
                    ASSERT_EQ(0, memcmp(v.data(), first.data(), v.size() * sizeof(float)))
                        << ac.name << " path " << bitnet_kernel_path_name(kp) << " threads " << nt << " batch " << nb
                        << " sequences " << ns;
                }
            }
        }
    }
    EXPECT_EQ(Fnv(first), ac.golden) << ac.name << ": vectors changed (hash 0x" << std::hex << Fnv(first) << ")";
}

// MEAN is the mean of the NONE rows (double sums, rounded to float), CLS the first row, LAST the last row; a
// text embedded alone equals the same text among others.
TEST_P(EmbedArch, PoolingFollowsItsDefinitionAndTextsAreIndependent) {
    const ArchCase &ac = GetParam();
    const std::string path = WriteModel(ac.arch, BITNET_DUMMY_I2_S, true, std::string(ac.name) + ".pool.gguf");
    Embedder e;
    Open(&e, path, BITNET_PATH_AUTO, 8, 2, 2);
    if (HasFatalFailure()) return;
    const int32_t D = bitnet_model_hparams(e.m)->n_embd;
    EXPECT_EQ(bitnet_model_hparams(e.m)->pooling, BITNET_POOLING_LAST); // the dummy writer's default
    const std::vector<float> none = Embed(&e, {0, 1, 2, 3}, BITNET_POOLING_NONE);
    const std::vector<float> mean = Embed(&e, {0, 1, 2, 3}, BITNET_POOLING_MEAN);
    const std::vector<float> cls = Embed(&e, {0, 1, 2, 3}, BITNET_POOLING_CLS);
    const std::vector<float> last = Embed(&e, {0, 1, 2, 3}, BITNET_POOLING_LAST);
    size_t row = 0;
    for (int t = 0; t < 4; t++) {
        const size_t n = kTexts[t].size();
        for (int32_t i = 0; i < D; i++) {
            double s = 0.0;
            for (size_t k = 0; k < n; k++) s += none[(row + k) * D + i];
            ASSERT_EQ(mean[(size_t)t * D + i], (float)(s / (double)n)) << "text " << t << " dim " << i;
            ASSERT_EQ(cls[(size_t)t * D + i], none[row * D + i]);
            ASSERT_EQ(last[(size_t)t * D + i], none[(row + n - 1) * D + i]);
        }
        row += n;
    }
    for (int t = 0; t < 4; t++) {
        const std::vector<float> alone = Embed(&e, {t}, BITNET_POOLING_LAST);
        EXPECT_EQ(0, memcmp(alone.data(), last.data() + (size_t)t * D, (size_t)D * sizeof(float))) << "text " << t;
    }
    // the model's own pooling (UNSPECIFIED) is its pooling_type: last
    std::vector<const int32_t *> toks = {kTexts[0].data()};
    std::vector<int32_t> lens = {(int32_t)kTexts[0].size()};
    std::vector<float> out(D);
    bitnet_pooling used = BITNET_POOLING_NONE;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_embed(e.c, toks.data(), lens.data(), 1, BITNET_POOLING_UNSPECIFIED, out.data(), &used, &err),
              BITNET_OK)
        << err.msg;
    EXPECT_EQ(used, BITNET_POOLING_LAST);
    EXPECT_EQ(0, memcmp(out.data(), last.data(), (size_t)D * sizeof(float)));
}

// The F16 file (dense float projections, no activation quantization) and the F32 file hold the same model
// (the dummy's weights and norms are F16-exact, its token embeddings rounded to F16): their vectors agree to
// float rounding; the I2_S file differs by the int8 activation quantization only (cosine > 0.99).
TEST_P(EmbedArch, FloatFilesAgreeAndI2sIsWithinTheQuantizationStep) {
    const ArchCase &ac = GetParam();
    std::vector<float> v[3];
    const bitnet_dummy_outtype outs[3] = {BITNET_DUMMY_F32, BITNET_DUMMY_F16, BITNET_DUMMY_I2_S};
    for (int i = 0; i < 3; i++) {
        const std::string path =
            WriteModel(ac.arch, outs[i], true, std::string(ac.name) + ".cmp" + std::to_string(i) + ".gguf");
        Embedder e;
        Open(&e, path, BITNET_PATH_AUTO, 64, 2, 4);
        if (HasFatalFailure()) return;
        v[i] = Embed(&e, {0, 1, 2, 3}, BITNET_POOLING_LAST);
        for (size_t t = 0; t < 4; t++) bitnet_embd_normalize(&v[i][t * 256], &v[i][t * 256], 256, 2);
    }
    for (size_t t = 0; t < 4; t++) {
        double c16 = 0.0, c2 = 0.0;
        for (size_t i = 0; i < 256; i++) {
            c16 += (double)v[0][t * 256 + i] * v[1][t * 256 + i];
            c2 += (double)v[0][t * 256 + i] * v[2][t * 256 + i];
        }
        EXPECT_GT(c16, 0.999) << ac.name << " text " << t << ": F16 vs F32";
        EXPECT_GT(c2, 0.99) << ac.name << " text " << t << ": I2_S vs F32";
        EXPECT_LT(c2, 1.0 - 1e-9) << ac.name << " text " << t << ": I2_S should differ by the int8 step";
    }
}

// The plain (teacher) layout without *_norm_in loads and runs on the dense path, and gives other vectors
// than the BitNet layout of the same seed (the norms are not ignored).
TEST_P(EmbedArch, PlainLayoutWithoutNormInRunsAndDiffers) {
    const ArchCase &ac = GetParam();
    const std::string with = WriteModel(ac.arch, BITNET_DUMMY_F32, true, std::string(ac.name) + ".with.gguf");
    const std::string plain = WriteModel(ac.arch, BITNET_DUMMY_F32, false, std::string(ac.name) + ".plain.gguf");
    Embedder a, b;
    Open(&a, with, BITNET_PATH_AUTO, 64, 1, 4);
    Open(&b, plain, BITNET_PATH_AUTO, 64, 1, 4);
    if (HasFatalFailure()) return;
    const std::vector<float> va = Embed(&a, {0, 2}, BITNET_POOLING_LAST), vb = Embed(&b, {0, 2}, BITNET_POOLING_LAST);
    for (float x : vb) ASSERT_TRUE(std::isfinite(x));
    EXPECT_NE(0, memcmp(va.data(), vb.data(), va.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Archs, EmbedArch,
                         testing::Values(ArchCase{BITNET_DUMMY_ARCH_QWEN3, "qwen3", 0x57cef9c86a3dc897ull},
                                         ArchCase{BITNET_DUMMY_ARCH_GEMMA3, "gemma3", 0x2bb5389c5f1e5f5full}),
                         [](const testing::TestParamInfo<ArchCase> &i) { return std::string(i.param.name); });

// A copy of src without tensor `drop` (none when empty), with an extra F32 key (none when key is empty).
std::string EditedCopy(const std::string &src, const std::string &dst, const std::string &drop, const std::string &key,
                       float value) {
    bitnet_error err{};
    bitnet_gguf *g = nullptr;
    EXPECT_EQ(bitnet_gguf_open(src.c_str(), &g, &err), BITNET_OK) << err.msg;
    if (!g) return dst;
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    for (int64_t i = 0; i < bitnet_gguf_n_kv(g); i++) {
        if (std::string(bitnet_gguf_kv_key(g, i)) != "general.alignment") bitnet_gguf_copy_kv(w, g, i);
    }
    if (!key.empty()) bitnet_gguf_set_f32(w, key.c_str(), value);
    std::vector<const bitnet_gguf_tensor_info *> kept;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        if (drop == ti->name) continue;
        kept.push_back(ti);
        EXPECT_EQ(bitnet_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, &err), BITNET_OK) << err.msg;
    }
    EXPECT_EQ(bitnet_gguf_write_begin(w, dst.c_str(), &err), BITNET_OK) << err.msg;
    for (const bitnet_gguf_tensor_info *ti : kept)
        EXPECT_EQ(bitnet_gguf_write_data(w, ti->data, ti->nbytes, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    bitnet_gguf_close(g);
    return dst;
}

// gemma3.final_logit_softcapping c turns every logit l of the tied head into c · tanh(l / c).
TEST(EmbedGemma3, LogitSoftCappingAppliesToTheHead) {
    const std::string plain = WriteModel(BITNET_DUMMY_ARCH_GEMMA3, BITNET_DUMMY_F32, true, "cap0.gguf");
    const std::string capped = EditedCopy(plain, TmpPath("cap1.gguf"), "", "gemma3.final_logit_softcapping", 3.0f);
    std::vector<float> l[2];
    const std::string paths[2] = {plain, capped};
    for (int i = 0; i < 2; i++) {
        bitnet_error err{};
        bitnet_model *m = nullptr;
        bitnet_context *c = nullptr;
        ASSERT_EQ(bitnet_model_load(paths[i].c_str(), nullptr, &m, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(bitnet_model_hparams(m)->logit_softcap, i ? 3.0f : 0.0f);
        ASSERT_EQ(bitnet_context_create(m, 16, 16, 2, &c, &err), BITNET_OK) << err.msg;
        ASSERT_EQ(bitnet_decode(c, kTexts[0].data(), (int32_t)kTexts[0].size(), 0, false, &err), BITNET_OK) << err.msg;
        l[i].assign(bitnet_get_logits(c), bitnet_get_logits(c) + 600);
        bitnet_context_free(c);
        bitnet_model_free(m);
    }
    double amax = 0;
    for (int r = 0; r < 600; r++) {
        amax = std::max(amax, (double)std::fabs(l[0][r]));
        EXPECT_NEAR(l[1][r], 3.0 * std::tanh(l[0][r] / 3.0), 1e-6) << "row " << r;
        EXPECT_LE(std::fabs(l[1][r]), 3.0f);
    }
    EXPECT_GT(amax, 3.0); // the cap changes something
}

// A required tensor of the graph missing, or one of another graph present, is refused by name.
TEST(EmbedErrors, MissingAndForeignTensorsAreNamed) {
    const std::string q = WriteModel(BITNET_DUMMY_ARCH_QWEN3, BITNET_DUMMY_F32, true, "names.gguf");
    const std::string g = WriteModel(BITNET_DUMMY_ARCH_GEMMA3, BITNET_DUMMY_F32, true, "names-g.gguf");
    struct Case {
        std::string src, drop, want;
    } cases[] = {
        {q, "blk.1.attn_k_norm.weight", "missing required tensor 'blk.1.attn_k_norm.weight'"},
        {g, "blk.2.post_ffw_norm.weight", "missing required tensor 'blk.2.post_ffw_norm.weight'"},
        {q, "blk.1.ffn_gate_norm_in.weight",
         "layer 1 has 6 of the 7 per-projection norms (missing 'blk.1.ffn_gate_norm_in.weight')"},
    };
    int k = 0;
    for (const Case &c : cases) {
        const std::string path = EditedCopy(c.src, TmpPath("drop" + std::to_string(k++) + ".gguf"), c.drop, "", 0);
        bitnet_error err{};
        bitnet_model *m = nullptr;
        EXPECT_EQ(bitnet_model_load(path.c_str(), nullptr, &m, &err), BITNET_ERR_FORMAT);
        EXPECT_NE(std::string(err.msg).find(c.want), std::string::npos) << err.msg;
        bitnet_model_free(m);
    }
    // a gemma3 post-norm in a qwen3 file: not part of the graph
    bitnet_error err{};
    bitnet_gguf *qg = nullptr, *gg = nullptr;
    ASSERT_EQ(bitnet_gguf_open(q.c_str(), &qg, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_gguf_open(g.c_str(), &gg, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    for (int64_t i = 0; i < bitnet_gguf_n_kv(qg); i++) {
        if (std::string(bitnet_gguf_kv_key(qg, i)) != "general.alignment") bitnet_gguf_copy_kv(w, qg, i);
    }
    std::vector<const bitnet_gguf_tensor_info *> all;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(qg); i++) all.push_back(bitnet_gguf_tensor(qg, i));
    all.push_back(bitnet_gguf_find_tensor(gg, "blk.0.post_attention_norm.weight"));
    ASSERT_NE(all.back(), nullptr);
    for (const bitnet_gguf_tensor_info *ti : all)
        ASSERT_EQ(bitnet_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, &err), BITNET_OK) << err.msg;
    const std::string mixed = TmpPath("mixed.gguf");
    ASSERT_EQ(bitnet_gguf_write_begin(w, mixed.c_str(), &err), BITNET_OK) << err.msg;
    for (const bitnet_gguf_tensor_info *ti : all)
        ASSERT_EQ(bitnet_gguf_write_data(w, ti->data, ti->nbytes, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    bitnet_gguf_close(gg);
    bitnet_gguf_close(qg);
    bitnet_model *m = nullptr;
    EXPECT_EQ(bitnet_model_load(mixed.c_str(), nullptr, &m, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("post_attention_norm.weight' is not part of architecture 'qwen3'"),
              std::string::npos)
        << err.msg;
    bitnet_model_free(m);
}

TEST(EmbedNormalize, FollowsLlamaCppsDefinitions) {
    const float in[4] = {3.0f, -4.0f, 0.0f, 1.0f};
    float out[4];
    ASSERT_TRUE(bitnet_embd_normalize(in, out, 4, 2));
    const double l2 = std::sqrt(26.0);
    for (int i = 0; i < 4; i++) EXPECT_FLOAT_EQ(out[i], (float)(in[i] / l2));
    ASSERT_TRUE(bitnet_embd_normalize(in, out, 4, 0)); // max |x| = 4 → 32760
    EXPECT_FLOAT_EQ(out[1], -32760.0f);
    EXPECT_FLOAT_EQ(out[0], 3.0f * 32760.0f / 4.0f);
    ASSERT_TRUE(bitnet_embd_normalize(in, out, 4, -1));
    EXPECT_EQ(0, memcmp(in, out, sizeof in));
    ASSERT_TRUE(bitnet_embd_normalize(in, out, 4, 1)); // Σ|x| = 8
    EXPECT_FLOAT_EQ(out[3], 1.0f / 8.0f);
    ASSERT_TRUE(bitnet_embd_normalize(in, out, 4, 3));
    EXPECT_FLOAT_EQ(out[0], (float)(3.0 / std::cbrt(27.0 + 64.0 + 1.0)));
    const float zero[3] = {0, 0, 0};
    float z[3] = {1, 1, 1};
    ASSERT_TRUE(bitnet_embd_normalize(zero, z, 3, 2));
    EXPECT_EQ(z[0], 0.0f);
    EXPECT_FALSE(bitnet_embd_normalize(in, out, 4, -2));
}

TEST(EmbedPooling, NamesParse) {
    bitnet_pooling p = BITNET_POOLING_UNSPECIFIED;
    ASSERT_TRUE(bitnet_pooling_parse("mean", &p));
    EXPECT_EQ(p, BITNET_POOLING_MEAN);
    EXPECT_FALSE(bitnet_pooling_parse("rank", &p));
    EXPECT_STREQ(bitnet_pooling_name(BITNET_POOLING_LAST), "last");
}

TEST(EmbedErrors, BadCallsAreRefusedByName) {
    const std::string path = WriteModel(BITNET_DUMMY_ARCH_QWEN3, BITNET_DUMMY_I2_S, true, "errors.gguf");
    bitnet_error err = {{0}};
    bitnet_model *m = nullptr;
    ASSERT_EQ(bitnet_model_load(path.c_str(), nullptr, &m, &err), BITNET_OK) << err.msg;
    bitnet_context *logits_ctx = nullptr, *c = nullptr;
    const bitnet_context_params lp = {16, 8, 1, 1, 1, false}, ep = {16, 8, 1, 1, 2, true};
    ASSERT_EQ(bitnet_context_create_params(m, &lp, &logits_ctx, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_context_create_params(m, &ep, &c, &err), BITNET_OK) << err.msg;
    std::vector<float> out(256 * 40);
    const int32_t ok[3] = {1, 300, 2}, bad_id[2] = {1, 600};
    std::vector<int32_t> too_long(17, 5);
    const int32_t *t1[1] = {ok};
    int32_t n1[1] = {3};
    EXPECT_EQ(bitnet_embed(logits_ctx, t1, n1, 1, BITNET_POOLING_LAST, out.data(), nullptr, &err),
              BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("embeddings"), std::string::npos) << err.msg;
    n1[0] = 0;
    EXPECT_EQ(bitnet_embed(c, t1, n1, 1, BITNET_POOLING_LAST, out.data(), nullptr, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("text 0 has 0 tokens"), std::string::npos) << err.msg;
    const int32_t *t2[2] = {ok, too_long.data()};
    int32_t n2[2] = {3, 17};
    EXPECT_EQ(bitnet_embed(c, t2, n2, 2, BITNET_POOLING_LAST, out.data(), nullptr, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("text 1 has 17 tokens"), std::string::npos) << err.msg;
    const int32_t *t3[1] = {bad_id};
    int32_t n3[1] = {2};
    EXPECT_EQ(bitnet_embed(c, t3, n3, 1, BITNET_POOLING_LAST, out.data(), nullptr, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("text 0, token 1: id 600"), std::string::npos) << err.msg;
    n1[0] = 3;
    EXPECT_EQ(bitnet_embed(c, t1, n1, 1, (bitnet_pooling)4, out.data(), nullptr, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("pooling 4"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_get_embeddings_ith(logits_ctx, 0), nullptr);
    bitnet_context_free(logits_ctx);
    bitnet_context_free(c);
    bitnet_model_free(m);
}

} // namespace
