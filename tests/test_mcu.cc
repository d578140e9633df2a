// test_mcu.cc — the microcontroller node (src/mcu/mcu.h) on a host: the arena sizing call is exact (the
// context takes every byte it said and one byte less is refused before anything is allocated), nothing is
// allocated after start-up, the logits equal the regular runtime's bit for bit on every stored layout
// (I2_S, TL1, TL2, F32; I2_S in bitnet.cpp's ARM and 4-row layouts rewritten in the arena), and bad input (truncated or misaligned image, short arena, full context, too many
// logit rows, a second heap model sharing the LUT host) gives errors that name the numbers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mcu/mcu.h"
#include "runtime/lut_host.h"
#include "test_util.h"
#include "text/sampler.h"

namespace {

std::string g_dir;
::testing::Environment *const g_env = ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_mcu_", &g_dir));

const std::string kTinyI2S = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny/ggml-model-i2_s.gguf";
const std::vector<int32_t> kTinyPrompt = {1, 450, 439, 293, 110, 289, 307, 122, 113, 285, 114, 123, 432, 398, 115, 118};
const std::vector<int32_t> kTinyIds = {489, 335, 171, 73, 83, 377, 138, 194, 177, 34, 446, 419, 465, 198, 436, 191};

// 64-byte aligned bytes (the image must be 32-byte aligned; +off misaligns on purpose).
struct Buffer {
    uint8_t *p = nullptr;
    size_t n = 0;
    explicit Buffer(size_t bytes) : p(static_cast<uint8_t *>(std::aligned_alloc(64, (bytes + 127) / 64 * 64))), n(bytes) {}
    ~Buffer() { std::free(p); }
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
};

std::unique_ptr<Buffer> image_of(const std::string &path, size_t off = 0) {
    const auto bytes = bitnet_test::read_file(path);
    EXPECT_FALSE(bytes.empty()) << path;
    auto b = std::make_unique<Buffer>(bytes.size() + off);
    std::memcpy(b->p + off, bytes.data(), bytes.size());
    b->n = bytes.size();
    return b;
}

std::string dummy(bitnet_dummy_outtype t) {
    const std::string path = g_dir + "/tiny-" + bitnet_dummy_outtype_name(t) + ".gguf";
    if (!bitnet_test::file_exists(path)) {
        const bitnet_dummy_params p = bitnet_test::tiny_layout_params(t, 1234);
        bitnet_error err;
        EXPECT_EQ(bitnet_dummy_write(&p, path.c_str(), &err), BITNET_OK) << err.msg;
    }
    return path;
}

// Greedy run of a node: prompt in one call (every position's logits kept), then n tokens one by one.
struct NodeRun {
    std::vector<int32_t> ids;
    std::vector<std::vector<float>> logits; // per position
};

NodeRun run_node(bitnet_mcu *rt, const std::vector<int32_t> &prompt, int n) {
    NodeRun r;
    const int32_t V = bitnet_model_hparams(rt->model)->n_vocab;
    bitnet_error err;
    EXPECT_EQ(bitnet_mcu_eval(rt, prompt.data(), (int32_t)prompt.size(), true, &err), BITNET_OK) << err.msg;
    for (size_t i = 0; i < prompt.size(); i++) {
        const float *l = bitnet_mcu_logits(rt, (int32_t)i);
        r.logits.emplace_back(l, l + V);
    }
    for (int t = 0; t < n; t++) {
        r.ids.push_back(bitnet_argmax(r.logits.back().data(), V));
        if (t + 1 == n) break;
        EXPECT_EQ(bitnet_mcu_eval(rt, &r.ids.back(), 1, false, &err), BITNET_OK) << err.msg;
        const float *l = bitnet_mcu_logits(rt, -1);
        r.logits.emplace_back(l, l + V);
    }
    return r;
}

// The same with the regular runtime (file mapping, heap, AUTO path: TL2 repacked on x86, TL1 on AArch64).
NodeRun run_regular(const std::string &path, const std::vector<int32_t> &prompt, int n) {
    NodeRun r;
    bitnet_model *m = nullptr;
    bitnet_context *c = nullptr;
    bitnet_error err;
    EXPECT_EQ(bitnet_model_load(path.c_str(), nullptr, &m, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_context_create(m, 64, 16, 2, &c, &err), BITNET_OK) << err.msg;
    const int32_t V = bitnet_model_hparams(m)->n_vocab;
    EXPECT_EQ(bitnet_decode(c, prompt.data(), (int32_t)prompt.size(), 0, true, &err), BITNET_OK) << err.msg;
    for (size_t i = 0; i < prompt.size(); i++) {
        const float *l = bitnet_get_logits_ith(c, (int32_t)i);
        r.logits.emplace_back(l, l + V);
    }
    for (int t = 0; t < n; t++) {
        r.ids.push_back(bitnet_argmax(r.logits.back().data(), V));
        if (t + 1 == n) break;
        EXPECT_EQ(bitnet_decode(c, &r.ids.back(), 1, (int32_t)(prompt.size() + t), false, &err), BITNET_OK) << err.msg;
        const float *l = bitnet_get_logits(c);
        r.logits.emplace_back(l, l + V);
    }
    bitnet_context_free(c);
    bitnet_model_free(m);
    return r;
}

// Every position's logits of two runs, byte for byte.
void expect_same_logits(const NodeRun &a, const NodeRun &b) {
    ASSERT_EQ(a.logits.size(), b.logits.size());
    for (size_t i = 0; i < a.logits.size(); i++)
        EXPECT_EQ(0, std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * 4)) << "position " << i;
}

TEST(McuNode, ArenaSizingIsExactAndNothingIsAllocatedAfterStart) {
    auto img = image_of(kTinyI2S);
    for (const bitnet_mcu_params p : {bitnet_mcu_params{32, 16, 16}, bitnet_mcu_params{512, 1, 1},
                                      bitnet_mcu_params{100, 7, 3}}) {
        SCOPED_TRACE("n_ctx " + std::to_string(p.n_ctx) + " n_batch " + std::to_string(p.n_batch));
        Buffer big(8 << 20);
        bitnet_mcu rt;
        bitnet_error err;
        ASSERT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", big.p, big.n, &err), BITNET_OK) << err.msg;
        bitnet_mcu_budget b;
        ASSERT_EQ(bitnet_mcu_arena_bytes(&rt, &p, &b, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(b.total, b.model + b.context.total);
        EXPECT_EQ(b.context.total, b.context.activations + b.context.kv_cache + b.context.rope_tables +
                                       b.context.attention + b.context.lut_workspace + b.context.logits +
                                       b.context.other);
        // KV cache: 2 (K and V) · n_layer 2 · n_ctx · kv_dim 256 · 2 bytes (F16), a multiple of 64 here
        EXPECT_EQ(b.context.kv_cache, (size_t)2 * 2 * p.n_ctx * 256 * 2);
        EXPECT_EQ(b.context.logits, ((size_t)p.n_logits * 512 * 4 + 63) / 64 * 64);
        ASSERT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(rt.arena.used, b.total) << "the context took other bytes than bitnet_mcu_arena_bytes said";
        EXPECT_TRUE(rt.arena.sealed);
        const size_t used = rt.arena.used;
        std::vector<int32_t> prompt(kTinyPrompt.begin(), kTinyPrompt.begin() + std::min<size_t>(kTinyPrompt.size(), p.n_batch * 2));
        ASSERT_EQ(bitnet_mcu_eval(&rt, prompt.data(), (int32_t)prompt.size(), false, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(rt.arena.used, used);
        EXPECT_EQ(rt.arena.n_refused, 0u);
        bitnet_mcu_close(&rt);

        // exactly b.total usable bytes: starts; one byte less: refused, naming both numbers
        for (size_t usable : {b.total, b.total - 1}) {
            Buffer exact(usable + 64);
            bitnet_arena probe;
            bitnet_arena_init(&probe, exact.p, exact.n);
            const size_t give = exact.n - (probe.size - usable); // so that the arena's usable size is `usable`
            ASSERT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", exact.p, give, &err), BITNET_OK) << err.msg;
            ASSERT_EQ(rt.arena.size, usable);
            const bitnet_status st = bitnet_mcu_start(&rt, &p, &err);
            if (usable == b.total) {
                EXPECT_EQ(st, BITNET_OK) << err.msg;
                EXPECT_EQ(rt.arena.used, rt.arena.size);
            } else {
                EXPECT_EQ(st, BITNET_ERR_NOMEM);
                EXPECT_NE(std::string(err.msg).find("arena of " + std::to_string(usable) + " usable bytes is too small"),
                          std::string::npos) << err.msg;
                EXPECT_NE(std::string(err.msg).find(std::to_string(b.total) + " in all"), std::string::npos) << err.msg;
                EXPECT_EQ(rt.arena.n_refused, 0u) << "refused after allocating instead of before";
            }
            bitnet_mcu_close(&rt);
        }
    }
}

TEST(McuNode, TinyCaseGivesBitnetCppIdsAndTheRegularRuntimesLogits) {
    auto img = image_of(kTinyI2S);
    Buffer arena(4 << 20);
    bitnet_mcu rt;
    bitnet_error err;
    ASSERT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", arena.p, arena.n, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_model_path(rt.model), BITNET_PATH_I2S);
    const bitnet_mcu_params p = {64, 16, 16};
    ASSERT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
    const NodeRun node = run_node(&rt, kTinyPrompt, 16);
    bitnet_mcu_close(&rt);
    EXPECT_EQ(node.ids, kTinyIds);
    expect_same_logits(node, run_regular(kTinyI2S, kTinyPrompt, 16));
}

// bitnet.cpp's tiny model in its ARM (arm64) and 4-row (rows4) I2_S layouts, repacked by the tests' own packer
// (test_util.h): the node rewrites the weights into x86 copies in its arena — the model part grows by their
// bytes (14 tensors, each 64-aligned, the first after up to 63 bytes of padding) and the sizing stays exact —
// and computes the x86 file's logits.
TEST(McuNode, OtherI2sLayoutsAreRewrittenInTheArenaAndGiveTheX86Logits) {
    auto x86 = image_of(kTinyI2S);
    Buffer a0(4 << 20);
    bitnet_mcu rt;
    bitnet_error err;
    ASSERT_EQ(bitnet_mcu_open(&rt, x86->p, x86->n, "tiny", a0.p, a0.n, &err), BITNET_OK) << err.msg;
    const size_t model_x86 = rt.arena.used;
    const bitnet_mcu_params p = {64, 16, 16};
    ASSERT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
    const NodeRun ref = run_node(&rt, kTinyPrompt, 16);
    bitnet_mcu_close(&rt);
    // the 14 weights: 2 layers x (4 of 256 x 256 + 3 of 768 x 256), M·K/4 + 32 bytes each, rounded to 64
    const size_t rewritten = 2 * (4 * ((256 * 256 / 4 + 32 + 63) / 64 * 64) + 3 * ((768 * 256 / 4 + 32 + 63) / 64 * 64));
    for (int layout : {BITNET_I2S_LAYOUT_ARM64, BITNET_I2S_LAYOUT_ROWS4}) {
        SCOPED_TRACE(bitnet_i2s_layout_name(layout));
        const std::string path = bitnet_test::write_i2s_layout_copy(
            kTinyI2S, g_dir + "/tiny-" + bitnet_i2s_layout_name(layout) + ".gguf", layout, "");
        auto img = image_of(path);
        Buffer arena(4 << 20);
        ASSERT_EQ(bitnet_mcu_open_layout(&rt, img->p, img->n, "tiny", layout, arena.p, arena.n, &err), BITNET_OK)
            << err.msg;
        // the copies' bytes, plus the padding that puts the first one on a 64-byte boundary
        EXPECT_GE(rt.arena.used, model_x86 + rewritten);
        EXPECT_LT(rt.arena.used, model_x86 + rewritten + 64);
        bitnet_mcu_budget b;
        ASSERT_EQ(bitnet_mcu_arena_bytes(&rt, &p, &b, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(b.model, rt.arena.used);
        ASSERT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(rt.arena.used, b.total);
        const NodeRun node = run_node(&rt, kTinyPrompt, 16);
        EXPECT_EQ(rt.arena.n_refused, 0u);
        bitnet_mcu_close(&rt);
        EXPECT_EQ(node.ids, kTinyIds);
        expect_same_logits(node, ref);
        // the same image opened as x86 (a wrong --i2s-layout) opens, and computes something else
        ASSERT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", arena.p, arena.n, &err), BITNET_OK) << err.msg;
        ASSERT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
        EXPECT_NE(run_node(&rt, kTinyPrompt, 16).ids, kTinyIds);
        bitnet_mcu_close(&rt);
    }
}

TEST(McuNode, EveryStoredLayoutRunsInPlaceWithTheRegularLogits) {
    const std::vector<int32_t> prompt = {1, 300, 301, 302, 400, 259, 450, 500, 511, 260};
    for (auto t : {BITNET_DUMMY_TL1, BITNET_DUMMY_TL2, BITNET_DUMMY_I2_S, BITNET_DUMMY_F32}) {
        const std::string path = dummy(t);
        SCOPED_TRACE(path);
        auto img = image_of(path);
        Buffer arena(8 << 20);
        bitnet_mcu rt;
        bitnet_error err;
        ASSERT_EQ(bitnet_mcu_open(&rt, img->p, img->n, path.c_str(), arena.p, arena.n, &err), BITNET_OK) << err.msg;
        // nothing repacked or converted: the node's arena after open holds less than the smallest weight of
        // the file (16416 bytes: a 256 x 256 I2_S, TL1 or TL2 tensor), so not one weight was copied
        EXPECT_LT(rt.arena.used, (size_t)16416) << "the node copied a weight into its arena";
        const bitnet_mcu_params p = {32, 4, 10};
        ASSERT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
        const NodeRun node = run_node(&rt, prompt, 6);
        bitnet_mcu_close(&rt);
        const NodeRun reg = run_regular(path, prompt, 6);
        EXPECT_EQ(node.ids, reg.ids);
        for (size_t i = 0; i < node.logits.size() && i < reg.logits.size(); i++)
            EXPECT_EQ(0, std::memcmp(node.logits[i].data(), reg.logits[i].data(), node.logits[i].size() * 4)) << "position " << i;
    }
}

TEST(McuNode, BadInputGivesErrorsThatNameTheNumbers) {
    auto img = image_of(kTinyI2S);
    Buffer arena(4 << 20);
    bitnet_mcu rt;
    bitnet_error err;
    // truncated image
    EXPECT_EQ(bitnet_mcu_open(&rt, img->p, 300000, "cut", arena.p, arena.n, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("runs past the end of the file"), std::string::npos) << err.msg;
    // not on a 32-byte boundary
    auto off = image_of(kTinyI2S, 16);
    EXPECT_EQ(bitnet_mcu_open(&rt, off->p + 16, off->n, "odd", arena.p, arena.n, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("not on a 32-byte boundary"), std::string::npos) << err.msg;
    // an arena too small to open the model
    EXPECT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", arena.p, 4096, &err), BITNET_ERR_NOMEM);
    EXPECT_NE(std::string(err.msg).find("too small to open the model"), std::string::npos) << err.msg;
    // context full, too many logit rows, not started
    ASSERT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", arena.p, arena.n, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_mcu_eval(&rt, kTinyPrompt.data(), 1, false, &err), BITNET_ERR_INVALID_ARG);
    const bitnet_mcu_params p = {8, 4, 2};
    ASSERT_EQ(bitnet_mcu_start(&rt, &p, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_mcu_eval(&rt, kTinyPrompt.data(), 3, true, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("logits of 3 positions asked, the node keeps 2 rows"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_mcu_eval(&rt, kTinyPrompt.data(), 8, false, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_mcu_eval(&rt, kTinyPrompt.data(), 1, false, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("exceeds the context size n_ctx (8)"), std::string::npos) << err.msg;
    EXPECT_EQ(rt.n_past, 8);
    bitnet_mcu_close(&rt);
    // F16 projection weights are not run by a node (weights in place): refused on the host too (as on the board)
    auto f16 = image_of(dummy(BITNET_DUMMY_F16));
    EXPECT_EQ(bitnet_mcu_open(&rt, f16->p, f16->n, "f16", arena.p, arena.n, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("are not run by a node that uses its weights in place"),
              std::string::npos) << err.msg;
}

// The LUT host's table of weight extras is process-wide: models from the heap and from a node's arena
// cannot share it, in either order, and freeing works in either order.
TEST(McuNode, HeapModelsAndNodesDoNotShareTheLutHost) {
    auto img = image_of(kTinyI2S);
    Buffer arena(4 << 20);
    bitnet_mcu rt;
    bitnet_error err;
    bitnet_model *m = nullptr;
    // a heap model first: the node is refused
    ASSERT_EQ(bitnet_model_load(kTinyI2S.c_str(), nullptr, &m, &err), BITNET_OK) << err.msg;
    ASSERT_GT(bitnet_lut_n_extras(), 0u);
    EXPECT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", arena.p, arena.n, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("memory comes from the heap; a model whose memory comes from an arena cannot "
                                        "be loaded beside them"),
              std::string::npos) << err.msg;
    bitnet_model_free(m);
    EXPECT_EQ(bitnet_lut_n_extras(), 0u);
    // a node first: the heap model is refused; after the node is closed it loads
    ASSERT_EQ(bitnet_mcu_open(&rt, img->p, img->n, "tiny", arena.p, arena.n, &err), BITNET_OK) << err.msg;
    m = nullptr;
    EXPECT_EQ(bitnet_model_load(kTinyI2S.c_str(), nullptr, &m, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("memory comes from an arena; a model whose memory comes from the heap"),
              std::string::npos) << err.msg;
    EXPECT_EQ(m, nullptr);
    bitnet_mcu_close(&rt);
    EXPECT_EQ(bitnet_lut_n_extras(), 0u);
    ASSERT_EQ(bitnet_model_load(kTinyI2S.c_str(), nullptr, &m, &err), BITNET_OK) << err.msg;
    bitnet_model_free(m);
}

} // namespace
