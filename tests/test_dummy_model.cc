// Tests of the dummy-model writer (src/convert/dummy_model.h): the weight distribution (the PRNG's own
// known answers are in test_rng.cc), the file against the bitnet.cpp-written case file
// (tests/data/bitnetcpp-tiny: same keys in the same order with the same types, same tensor names,
// shapes, types and offsets), determinism, one model in every outtype, recorded TL1/TL2 tiles,
// chunking, the built-in and copied vocabularies, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

extern "C" {
#include "convert/dummy_model.h"
#include "base/gguf.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#include "text/tokenizer.h"
}
#include "test_util.h"

namespace {

const std::string kCaseDir = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny";

std::string tmp_path(const std::string &name) {
    return std::string(BITNET_BINARY_DIR) + "/test_dummy_model." + std::to_string(getpid()) + "." + name;
}

using bitnet_test::file_exists;
using bitnet_test::read_file;
using bitnet_test::tiny_layout_params;  // the layout of the case file

struct Written {
    std::string path;
    explicit Written(const std::string &name) : path(tmp_path(name)) {}
    ~Written() { std::remove(path.c_str()); }
};

void write_ok(const bitnet_dummy_params &p, const std::string &path) {
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_dummy_write(&p, path.c_str(), &err), BITNET_OK) << err.msg;
}

struct Gguf {
    bitnet_gguf *g = nullptr;
    explicit Gguf(const std::string &path) {
        bitnet_error err = {{0}};
        EXPECT_EQ(bitnet_gguf_open(path.c_str(), &g, &err), BITNET_OK) << path << ": " << err.msg;
    }
    ~Gguf() { bitnet_gguf_close(g); }
};

// bitnet.cpp's keys of an I2_S file, plus the I2_S layout record that our writer adds after them (a
// string: type 8; docs/LAYOUTS.md §7).
std::vector<std::string> with_layout_record(std::vector<std::string> keys) {
    keys.push_back(std::string(BITNET_I2S_LAYOUT_KEY) + ":8");
    return keys;
}

// key, value type, and for arrays the element type
std::vector<std::string> key_signature(const bitnet_gguf *g) {
    std::vector<std::string> out;
    for (int64_t i = 0; i < bitnet_gguf_n_kv(g); i++) {
        const char *key = bitnet_gguf_kv_key(g, i);
        std::string s = std::string(key) + ":" + std::to_string(bitnet_gguf_kv_type(g, i));
        if (bitnet_gguf_kv_type(g, i) == BITNET_GGUF_ARRAY) {
            bitnet_gguf_type et;
            uint64_t n;
            const void *d;
            bitnet_error err;
            EXPECT_EQ(bitnet_gguf_get_arr(g, key, &et, &n, &d, &err), BITNET_OK);
            s += "[" + std::to_string(et) + "]";
        }
        out.push_back(s);
    }
    return out;
}

std::vector<std::string> tensor_signature(const bitnet_gguf *g, bool with_offsets) {
    std::vector<std::string> out;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *t = bitnet_gguf_tensor(g, i);
        std::string s = std::string(t->name) + " n_dims " + std::to_string(t->n_dims) + " ne";
        for (int d = 0; d < t->n_dims; d++) s += " " + std::to_string(t->ne[d]);
        s += " type " + std::to_string(t->type);
        if (with_offsets) s += " offset " + std::to_string(t->offset);
        out.push_back(s);
    }
    return out;
}

uint32_t get_u32(const bitnet_gguf *g, const char *key) {
    uint32_t v = 0;
    bitnet_error err;
    EXPECT_EQ(bitnet_gguf_get_u32(g, key, &v, &err), BITNET_OK) << err.msg;
    return v;
}

std::string get_str(const bitnet_gguf *g, const char *key) {
    const char *p = nullptr;
    size_t n = 0;
    bitnet_error err;
    EXPECT_EQ(bitnet_gguf_get_str(g, key, &p, &n, &err), BITNET_OK) << err.msg;
    return p ? std::string(p, n) : std::string();
}

bool is_ternary_name(const std::string &n) {
    for (const char *p : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
        if (n.find(std::string(".") + p + ".weight") != std::string::npos) return true;
    return false;
}

// The ternary values and scale of one tensor, whatever its type (F32/F16 → value / scale).
void decode_ternary(const bitnet_gguf *g, const bitnet_gguf_tensor_info *t, std::vector<int8_t> &w, float &scale) {
    const int64_t K = t->ne[0], M = t->ne[1];
    w.assign((size_t)(M * K), 0);
    bitnet_error err = {{0}};
    if (t->type == BITNET_TYPE_F32 || t->type == BITNET_TYPE_F16) {
        std::vector<float> f((size_t)(M * K));
        ASSERT_EQ(bitnet_row_to_f32(t->type, t->data, f.data(), M * K, &err), BITNET_OK) << err.msg;
        scale = 0.0f;
        for (float v : f) scale = std::max(scale, std::fabs(v));
        for (size_t i = 0; i < f.size(); i++) {
            ASSERT_TRUE(f[i] == 0.0f || f[i] == scale || f[i] == -scale) << t->name << " element " << i << " = " << f[i];
            w[i] = (int8_t)(f[i] > 0 ? 1 : f[i] < 0 ? -1 : 0);
        }
        return;
    }
    if (t->type == BITNET_TYPE_I2_S) {
        ASSERT_EQ(bitnet_unpack_i2s((const uint8_t *)t->data, M, K, w.data(), &scale, &err), BITNET_OK) << err.msg;
        return;
    }
    std::string key = std::string("bitnet.lut.") + t->name + ".tiles";
    bitnet_gguf_type et;
    uint64_t n = 0;
    const void *d = nullptr;
    ASSERT_EQ(bitnet_gguf_get_arr(g, key.c_str(), &et, &n, &d, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(et, BITNET_GGUF_UINT32);
    ASSERT_EQ(n, 3u);
    uint32_t tv[3];
    std::memcpy(tv, d, sizeof tv);
    bitnet_tiles tiles = {(int32_t)tv[0], (int32_t)tv[1], (int32_t)tv[2]};
    if (t->type == BITNET_TYPE_TL1)
        ASSERT_EQ(bitnet_unpack_tl1((const uint8_t *)t->data, M, K, tiles, w.data(), &scale, &err), BITNET_OK) << err.msg;
    else
        ASSERT_EQ(bitnet_unpack_tl2((const uint8_t *)t->data, M, K, tiles, w.data(), &scale, &err), BITNET_OK) << err.msg;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Weight values
// ---------------------------------------------------------------------------------------------

TEST(DummyValues, TernaryDistributionAndScale) {
    const int64_t M = 256, K = 768, n = M * K;
    std::vector<int8_t> w((size_t)n);
    float scale = 0.0f;
    bitnet_dummy_ternary_values(42, "blk.0.ffn_up.weight", M, K, w.data(), &scale);
    int64_t count[3] = {0, 0, 0};
    for (int8_t v : w) {
        ASSERT_GE(v, -1);
        ASSERT_LE(v, 1);
        count[v + 1]++;
    }
    // Each value has probability 1/3: within 5 standard deviations (sqrt(n * 1/3 * 2/3) ~ 209).
    const double sd = std::sqrt(n * (1.0 / 3) * (2.0 / 3));
    for (int i = 0; i < 3; i++) EXPECT_NEAR((double)count[i], n / 3.0, 5 * sd) << "value " << i - 1;
    // Scale: (768 + r) / 1024 with r in 0..127, so exact in F16.
    EXPECT_GE(scale, 0.75f);
    EXPECT_LT(scale, 0.875f);
    EXPECT_EQ(scale * 1024.0f, std::floor(scale * 1024.0f));
    EXPECT_EQ(bitnet_fp16_to_fp32(bitnet_fp32_to_fp16(scale)), scale);

    // Another tensor name or seed gives other values; the same ones give the same values.
    std::vector<int8_t> w2((size_t)n), w3((size_t)n);
    float s2, s3;
    bitnet_dummy_ternary_values(42, "blk.0.ffn_gate.weight", M, K, w2.data(), &s2);
    bitnet_dummy_ternary_values(43, "blk.0.ffn_up.weight", M, K, w3.data(), &s3);
    EXPECT_NE(w, w2);
    EXPECT_NE(w, w3);
    bitnet_dummy_ternary_values(42, "blk.0.ffn_up.weight", M, K, w2.data(), &s2);
    EXPECT_EQ(w, w2);
    EXPECT_EQ(scale, s2);
}

// ---------------------------------------------------------------------------------------------
// Files against the bitnet.cpp case
// ---------------------------------------------------------------------------------------------

TEST(DummyFile, I2SMatchesBitnetCppKeysAndTensors) {
    Written out("i2s.gguf");
    write_ok(tiny_layout_params(BITNET_DUMMY_I2_S, 7), out.path);
    Gguf ours(out.path), ref(kCaseDir + "/ggml-model-i2_s.gguf");
    ASSERT_TRUE(ours.g && ref.g);
    EXPECT_EQ(key_signature(ours.g), with_layout_record(key_signature(ref.g)));
    {  // without our record: bitnet.cpp's keys exactly
        Written bare("i2s-norecord.gguf");
        bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
        p.no_layout_record = true;
        write_ok(p, bare.path);
        Gguf g(bare.path);
        ASSERT_TRUE(g.g);
        EXPECT_EQ(key_signature(g.g), key_signature(ref.g));
    }
    // Same names, shapes, types and even data offsets (same sizes in the same order).
    EXPECT_EQ(tensor_signature(ours.g, true), tensor_signature(ref.g, true));
    EXPECT_EQ(get_u32(ours.g, "general.file_type"), 40u);
    EXPECT_EQ(get_u32(ours.g, "general.quantization_version"), 2u);
    EXPECT_EQ(get_u32(ours.g, "bitnet.context_length"), 512u);
    EXPECT_EQ(get_u32(ours.g, "bitnet.vocab_size"), 512u);
    EXPECT_EQ(get_str(ours.g, "general.architecture"), "bitnet");
    EXPECT_EQ(get_str(ours.g, "bitnet.rope.scaling.type"), "linear");
    EXPECT_EQ(get_str(ours.g, "tokenizer.ggml.model"), "llama");
    float eps = 0, base = 0, factor = 0;
    bitnet_error err;
    ASSERT_EQ(bitnet_gguf_get_f32(ours.g, "bitnet.attention.layer_norm_rms_epsilon", &eps, &err), BITNET_OK);
    ASSERT_EQ(bitnet_gguf_get_f32(ours.g, "bitnet.rope.freq_base", &base, &err), BITNET_OK);
    ASSERT_EQ(bitnet_gguf_get_f32(ours.g, "bitnet.rope.scaling.factor", &factor, &err), BITNET_OK);
    EXPECT_EQ((double)eps, 9.999999747378752e-06);
    EXPECT_EQ(base, 10000.0f);
    EXPECT_EQ(factor, 1.0f);
    EXPECT_EQ(bitnet_gguf_alignment(ours.g), 32u);
    EXPECT_EQ(bitnet_gguf_version(ours.g), 3u);
}

TEST(DummyFile, F32MatchesBitnetCppKeysAndTensors) {
    Written out("f32.gguf");
    write_ok(tiny_layout_params(BITNET_DUMMY_F32, 7), out.path);
    Gguf ours(out.path), ref(kCaseDir + "/ggml-model-f32.gguf");
    ASSERT_TRUE(ours.g && ref.g);
    EXPECT_EQ(key_signature(ours.g), key_signature(ref.g));
    EXPECT_EQ(tensor_signature(ours.g, true), tensor_signature(ref.g, true));
    EXPECT_EQ(get_u32(ours.g, "general.file_type"), 0u);
}

TEST(DummyFile, ContextDefaultAndEmbeddingTypes) {
    // n_embd % 256 != 0 → Q8_0 token_embd for quantized outtypes, F32 for f32.
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_embd = 96;
    p.n_head = 3;
    p.n_head_kv = 3;
    p.n_ff = 256;
    p.n_layer = 1;
    p.n_ctx = 0;
    p.n_vocab = 300;
    Written a("q8.gguf"), b("f32emb.gguf"), c("f16.gguf");
    write_ok(p, a.path);
    p.outtype = BITNET_DUMMY_F32;
    write_ok(p, b.path);
    p.outtype = BITNET_DUMMY_F16;
    p.n_embd = 256;
    p.n_head = 4;
    p.n_head_kv = 2;
    write_ok(p, c.path);
    Gguf ga(a.path), gb(b.path), gc(c.path);
    ASSERT_TRUE(ga.g && gb.g && gc.g);
    EXPECT_EQ(bitnet_gguf_find_tensor(ga.g, "token_embd.weight")->type, BITNET_TYPE_Q8_0);
    EXPECT_EQ(bitnet_gguf_find_tensor(gb.g, "token_embd.weight")->type, BITNET_TYPE_F32);
    EXPECT_EQ(bitnet_gguf_find_tensor(gc.g, "token_embd.weight")->type, BITNET_TYPE_F16);
    EXPECT_EQ(get_u32(ga.g, "bitnet.context_length"), 2048u);
    EXPECT_EQ(get_u32(gc.g, "general.file_type"), 1u);
    EXPECT_LT(bitnet_gguf_find_kv(gc.g, "general.quantization_version"), 0);  // as bitnet.cpp's converter
    // GQA: attn_k is [n_embd, n_embd / n_head * n_head_kv]
    const bitnet_gguf_tensor_info *k = bitnet_gguf_find_tensor(gc.g, "blk.0.attn_k.weight");
    ASSERT_TRUE(k);
    EXPECT_EQ(k->ne[0], 256);
    EXPECT_EQ(k->ne[1], 128);
    EXPECT_EQ(k->type, BITNET_TYPE_F16);
    // Norms: 1 + 0.1 z, so within (0.4, 1.6) and not all equal.
    const bitnet_gguf_tensor_info *nrm = bitnet_gguf_find_tensor(gc.g, "blk.0.ffn_sub_norm.weight");
    ASSERT_TRUE(nrm);
    EXPECT_EQ(nrm->ne[0], 256);
    EXPECT_EQ(nrm->type, BITNET_TYPE_F32);
    std::vector<float> v(256);
    std::memcpy(v.data(), nrm->data, 256 * sizeof(float));
    double mean = 0;
    for (float x : v) {
        EXPECT_GT(x, 0.4f);
        EXPECT_LT(x, 1.6f);
        mean += x / 256.0;
    }
    EXPECT_NEAR(mean, 1.0, 0.05);
}

TEST(DummyFile, EmbeddingTypeIsTheQuantizersOfTheSameValues) {
    // embd_type F16 / Q8_0 / Q6_K: token_embd holds the rows of the F32 file of the same seed, encoded
    // by the quantizers of quants.h (ggml's rules), the rest of the file unchanged; output.weight keeps
    // the default type (F16 here), as llama-quantize's --token-embedding-type leaves it.
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_F32, 11);
    p.n_layer = 1;
    p.output_separate = true;
    Written f32("embd-f32.gguf");
    write_ok(p, f32.path);
    Gguf gf(f32.path);
    ASSERT_TRUE(gf.g);
    const bitnet_gguf_tensor_info *src = bitnet_gguf_find_tensor(gf.g, "token_embd.weight");
    ASSERT_TRUE(src && src->type == BITNET_TYPE_F32);
    const int64_t D = src->ne[0], V = src->ne[1];
    const float *x = (const float *)src->data;
    p.outtype = BITNET_DUMMY_I2_S;
    Written plain("embd-default.gguf");
    write_ok(p, plain.path);
    Gguf gp(plain.path);
    for (int type : {(int)BITNET_TYPE_F16, (int)BITNET_TYPE_Q8_0, (int)BITNET_TYPE_Q6_K}) {
        p.embd_type = type;
        Written w(std::string("embd-") + bitnet_type_name(type) + ".gguf");
        write_ok(p, w.path);
        Gguf g(w.path);
        ASSERT_TRUE(g.g && gp.g);
        const bitnet_gguf_tensor_info *t = bitnet_gguf_find_tensor(g.g, "token_embd.weight");
        ASSERT_TRUE(t);
        EXPECT_EQ(t->type, type);
        std::vector<uint8_t> want;
        bitnet_error err{};
        if (type == BITNET_TYPE_F16) {
            want.resize((size_t)(V * D) * 2);
            for (int64_t i = 0; i < V * D; i++) {
                const uint16_t h = bitnet_fp32_to_fp16(x[i]);
                std::memcpy(want.data() + 2 * i, &h, 2);
            }
        } else if (type == BITNET_TYPE_Q8_0) {
            want.resize((size_t)(V * D / 32) * sizeof(bitnet_block_q8_0));
            for (int64_t r = 0; r < V; r++)
                bitnet_quantize_row_q8_0(x + r * D, (bitnet_block_q8_0 *)want.data() + r * (D / 32), D);
        } else {
            want.resize((size_t)(V * D / 256) * sizeof(bitnet_block_q6_k));
            for (int64_t r = 0; r < V; r++)
                ASSERT_EQ(bitnet_quantize_row_q6_k(x + r * D, (bitnet_block_q6_k *)want.data() + r * (D / 256), D, &err),
                          BITNET_OK);
        }
        ASSERT_EQ(t->nbytes, want.size()) << bitnet_type_name(type);
        EXPECT_EQ(std::memcmp(t->data, want.data(), want.size()), 0) << bitnet_type_name(type);
        // every other tensor is the default file's, byte for byte
        for (int64_t i = 0; i < bitnet_gguf_n_tensors(gp.g); i++) {
            const bitnet_gguf_tensor_info *a = bitnet_gguf_tensor(gp.g, i);
            if (std::strcmp(a->name, "token_embd.weight") == 0) continue;
            const bitnet_gguf_tensor_info *b = bitnet_gguf_find_tensor(g.g, a->name);
            ASSERT_TRUE(b) << a->name;
            EXPECT_EQ(a->type, b->type) << a->name;
            ASSERT_EQ(a->nbytes, b->nbytes) << a->name;
            EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0) << a->name;
        }
        EXPECT_EQ(bitnet_gguf_find_tensor(g.g, "output.weight")->type, BITNET_TYPE_F16);
    }
}

TEST(DummyFile, SameSeedSameBytesOtherSeedOtherBytes) {
    Written a("seed-a.gguf"), b("seed-b.gguf"), c("seed-c.gguf");
    write_ok(tiny_layout_params(BITNET_DUMMY_I2_S, 5), a.path);
    write_ok(tiny_layout_params(BITNET_DUMMY_I2_S, 5), b.path);
    write_ok(tiny_layout_params(BITNET_DUMMY_I2_S, 6), c.path);
    std::vector<uint8_t> fa = read_file(a.path), fb = read_file(b.path), fc = read_file(c.path);
    ASSERT_GT(fa.size(), 700000u);
    EXPECT_TRUE(fa == fb);
    ASSERT_EQ(fa.size(), fc.size());
    EXPECT_FALSE(fa == fc);
}

TEST(DummyFile, GoldenBytesOnEveryIsa) {
    // FNV-1a 64 of whole files, pinned when the generator was written (x86-64) and checked by the
    // aarch64 build under qemu too: the files are byte-identical on every ISA (no libm, no FMA, exact
    // integer PRNG). A change here changes every dummy model, including the ones golden tests use. The I2_S
    // files' values are those with the I2_S layout record (BITNET_I2S_LAYOUT_KEY), 32 bytes of header more.
    auto fnv = [](const std::vector<unsigned char> &b) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (unsigned char c : b) h = (h ^ c) * 0x100000001b3ull;
        return h;
    };
    bitnet_dummy_shape_tiles tl1[4] = {{256, 256, {128, 64, 32}}, {128, 256, {128, 128, 64}},
                                       {768, 256, {256, 128, 32}}, {256, 768, {128, 64, 64}}};
    bitnet_dummy_shape_tiles tl2[4] = {{256, 256, {128, 96, 32}}, {128, 256, {128, 96, 32}},
                                       {768, 256, {256, 96, 32}}, {256, 768, {128, 96, 32}}};
    struct Case {
        bitnet_dummy_outtype t;
        int32_t n_embd, n_ff, n_head, n_head_kv;
        const bitnet_dummy_shape_tiles *tiles;
        size_t size;
        uint64_t hash;
    } cases[] = {
        {BITNET_DUMMY_F32, 256, 768, 4, 2, nullptr, 3781792, 0x658f517396a54341ull},
        {BITNET_DUMMY_I2_S, 256, 768, 4, 2, nullptr, 525792, 0x39a43ffe39384de0ull},
        {BITNET_DUMMY_TL1, 256, 768, 4, 2, tl1, 526272, 0x667d4fe6fb5b8a8dull},
        {BITNET_DUMMY_TL2, 256, 768, 4, 2, tl2, 520832, 0x47b28a7a32e71f47ull},
        {BITNET_DUMMY_I2_S, 96, 256, 3, 3, nullptr, 106240, 0x0961ab5e5438c70bull},  // Q8_0 token_embd
    };
    for (const Case &c : cases) {
        bitnet_dummy_params p;
        bitnet_dummy_params_init(&p);
        p.n_embd = c.n_embd;
        p.n_ff = c.n_ff;
        p.n_layer = 1;
        p.n_head = c.n_head;
        p.n_head_kv = c.n_head_kv;
        p.n_vocab = 600;
        p.outtype = c.t;
        p.seed = 1234;
        p.tiles = c.tiles;
        p.n_tiles = c.tiles ? 4 : 0;
        Written out(std::string("golden-") + bitnet_dummy_outtype_name(c.t) + std::to_string(c.n_embd));
        write_ok(p, out.path);
        std::vector<uint8_t> bytes = read_file(out.path);
        EXPECT_EQ(bytes.size(), c.size) << bitnet_dummy_outtype_name(c.t) << " n_embd " << c.n_embd;
        EXPECT_EQ(fnv(bytes), c.hash) << bitnet_dummy_outtype_name(c.t) << " n_embd " << c.n_embd;
    }
}

TEST(DummyFile, EveryOuttypeHoldsTheSameTernaryWeights) {
    const bitnet_dummy_outtype types[] = {BITNET_DUMMY_F32, BITNET_DUMMY_F16, BITNET_DUMMY_I2_S, BITNET_DUMMY_TL1,
                                          BITNET_DUMMY_TL2};
    std::vector<std::unique_ptr<Written>> files;
    for (bitnet_dummy_outtype t : types) {
        files.emplace_back(new Written(std::string("same-") + bitnet_dummy_outtype_name(t) + ".gguf"));
        write_ok(tiny_layout_params(t, 11), files.back()->path);
    }
    Gguf base(files[0]->path);
    ASSERT_TRUE(base.g);
    int checked = 0;
    for (size_t f = 1; f < files.size(); f++) {
        Gguf other(files[f]->path);
        ASSERT_TRUE(other.g);
        EXPECT_EQ(get_u32(other.g, "general.file_type"),
                  (uint32_t)bitnet_dummy_file_type(types[f]));
        for (int64_t i = 0; i < bitnet_gguf_n_tensors(base.g); i++) {
            const bitnet_gguf_tensor_info *t0 = bitnet_gguf_tensor(base.g, i);
            if (!is_ternary_name(t0->name)) continue;
            const bitnet_gguf_tensor_info *t1 = bitnet_gguf_find_tensor(other.g, t0->name);
            ASSERT_TRUE(t1) << t0->name;
            EXPECT_EQ(t1->type, bitnet_dummy_ternary_type(types[f])) << t0->name;
            std::vector<int8_t> w0, w1;
            float s0 = 0, s1 = 0;
            decode_ternary(base.g, t0, w0, s0);
            decode_ternary(other.g, t1, w1, s1);
            EXPECT_EQ(s0, s1) << t0->name << " in " << bitnet_dummy_outtype_name(types[f]);
            EXPECT_TRUE(w0 == w1) << t0->name << " in " << bitnet_dummy_outtype_name(types[f]);
            // ...and they are the documented reference values.
            std::vector<int8_t> ref(w0.size());
            float sref;
            bitnet_dummy_ternary_values(11, t0->name, t0->ne[1], t0->ne[0], ref.data(), &sref);
            EXPECT_TRUE(ref == w0) << t0->name;
            EXPECT_EQ(sref, s0);
            checked++;
        }
        // Non-ternary tensors: norms are F32 in every outtype and identical.
        const bitnet_gguf_tensor_info *n0 = bitnet_gguf_find_tensor(base.g, "output_norm.weight");
        const bitnet_gguf_tensor_info *n1 = bitnet_gguf_find_tensor(other.g, "output_norm.weight");
        ASSERT_TRUE(n0 && n1);
        EXPECT_EQ(std::memcmp(n0->data, n1->data, n0->nbytes), 0);
    }
    EXPECT_EQ(checked, 4 * 2 * 7);
}

TEST(DummyFile, TlFilesRecordTiles) {
    // Given tiles for two shapes; the third (768x256... here 256x768, MxK) takes the default rule.
    bitnet_dummy_shape_tiles tiles[2] = {{256, 256, {128, 96, 32}}, {768, 256, {256, 96, 32}}};
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_TL2, 7);
    p.tiles = tiles;
    p.n_tiles = 2;
    Written out("tl2.gguf");
    write_ok(p, out.path);
    Gguf g(out.path);
    ASSERT_TRUE(g.g);
    EXPECT_EQ(get_u32(g.g, "general.file_type"), 39u);
    auto tiles_of = [&](const char *tensor) {
        std::string key = std::string("bitnet.lut.") + tensor + ".tiles";
        bitnet_gguf_type et;
        uint64_t n = 0;
        const void *d = nullptr;
        bitnet_error err;
        EXPECT_EQ(bitnet_gguf_get_arr(g.g, key.c_str(), &et, &n, &d, &err), BITNET_OK) << key;
        EXPECT_EQ(et, BITNET_GGUF_UINT32);
        std::vector<uint32_t> v(3, 0);
        if (n == 3 && d) std::memcpy(v.data(), d, 12);
        return v;
    };
    for (int l = 0; l < 2; l++) {
        std::string b = "blk." + std::to_string(l) + ".";
        EXPECT_EQ(tiles_of((b + "attn_q.weight").c_str()), (std::vector<uint32_t>{128, 96, 32}));
        EXPECT_EQ(tiles_of((b + "attn_v.weight").c_str()), (std::vector<uint32_t>{128, 96, 32}));
        EXPECT_EQ(tiles_of((b + "ffn_up.weight").c_str()), (std::vector<uint32_t>{256, 96, 32}));
        bitnet_tiles dflt;
        ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, 256, 768, &dflt));
        EXPECT_EQ(tiles_of((b + "ffn_down.weight").c_str()),
                  (std::vector<uint32_t>{(uint32_t)dflt.BM, (uint32_t)dflt.BK, (uint32_t)dflt.bm}));
    }
    // 14 ternary tensors → 14 tiles keys, after general.quantization_version.
    int n_tiles = 0;
    for (int64_t i = 0; i < bitnet_gguf_n_kv(g.g); i++)
        n_tiles += std::strncmp(bitnet_gguf_kv_key(g.g, i), "bitnet.lut.", 11) == 0;
    EXPECT_EQ(n_tiles, 14);
}

TEST(DummyFile, ChunkSizeDoesNotChangeBytes) {
    for (bitnet_dummy_outtype t : {BITNET_DUMMY_F32, BITNET_DUMMY_I2_S, BITNET_DUMMY_TL1, BITNET_DUMMY_TL2}) {
        bitnet_dummy_params p = tiny_layout_params(t, 3);
        p.n_layer = 1;
        p.n_vocab = 300;
        Written a(std::string("chunk-big-") + bitnet_dummy_outtype_name(t)), b(std::string("chunk-small-") + bitnet_dummy_outtype_name(t));
        write_ok(p, a.path);
        p.chunk_bytes = 1;  // one minimal row group per chunk
        write_ok(p, b.path);
        EXPECT_TRUE(read_file(a.path) == read_file(b.path)) << bitnet_dummy_outtype_name(t);
    }
}

TEST(DummyFile, ProgressReachesTotal) {
    struct Log {
        int calls = 0;
        int64_t last_index = -1;
        uint64_t last_done = 0, total = 0;
        bool monotonic = true;
    } log;
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.progress = [](void *u, int64_t ti, int64_t nt, const char *name, uint64_t done, uint64_t total) {
        Log *l = (Log *)u;
        l->calls++;
        l->monotonic = l->monotonic && ti >= l->last_index && done >= l->last_done && nt == 24 && name && *name;
        l->last_index = ti;
        l->last_done = done;
        l->total = total;
    };
    p.progress_user = &log;
    Written out("progress.gguf");
    write_ok(p, out.path);
    EXPECT_GE(log.calls, 24);
    EXPECT_TRUE(log.monotonic);
    EXPECT_EQ(log.last_index, 23);
    EXPECT_EQ(log.last_done, log.total);
    // total = the tensor data of the case layout: the data section ends at output_norm's offset + 1024
    EXPECT_EQ(log.total, 700864u + 1024u);
}

// ---------------------------------------------------------------------------------------------
// Vocabularies
// ---------------------------------------------------------------------------------------------

TEST(DummyVocab, BuiltinIsAValidSentencePieceVocabulary) {
    bitnet_dummy_vocab *v = nullptr;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_dummy_vocab_builtin(32002, &v, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(v->n_tokens, 32002);
    EXPECT_STREQ(v->tokens[0], "<unk>");
    EXPECT_STREQ(v->tokens[1], "<s>");
    EXPECT_STREQ(v->tokens[2], "</s>");
    EXPECT_EQ(v->types[0], BITNET_TOKEN_UNKNOWN);
    EXPECT_EQ(v->types[1], BITNET_TOKEN_CONTROL);
    EXPECT_EQ(v->bos_id, 1);
    EXPECT_EQ(v->eos_id, 2);
    EXPECT_EQ(v->pad_id, -1);
    for (int b = 0; b < 256; b++) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        EXPECT_STREQ(v->tokens[3 + b], name);
        EXPECT_EQ(v->types[3 + b], BITNET_TOKEN_BYTE);
    }
    std::set<std::string> all;
    for (int i = 0; i < v->n_tokens; i++) all.insert(v->tokens[i]);
    EXPECT_EQ(all.size(), 32002u);  // distinct
    EXPECT_TRUE(all.count("\xe2\x96\x81the"));
    EXPECT_TRUE(all.count("ing"));
    for (int i = 260; i < v->n_tokens; i++) {
        ASSERT_EQ(v->types[i], BITNET_TOKEN_NORMAL) << i;
        ASSERT_LT(v->scores[i], v->scores[i - 1]) << "scores must descend at " << i;
    }
    // Every built-in (non-padding) piece of two or more characters splits into two tokens, so the
    // tokenizer's pair merges can reach it.
    int reachable = 0;
    for (int i = 259; i < 1000; i++) {
        std::string s = v->tokens[i];
        std::vector<size_t> cuts;
        for (size_t k = 1; k < s.size(); k++)
            if (((unsigned char)s[k] & 0xC0) != 0x80) cuts.push_back(k);
        if (cuts.empty()) continue;
        bool ok = false;
        for (size_t c : cuts) ok = ok || (all.count(s.substr(0, c)) && all.count(s.substr(c)));
        bool single_char_tail = all.count(s.substr(0, cuts.back())) > 0;
        EXPECT_TRUE(ok || single_char_tail) << "piece " << i << " '" << s << "'";
        reachable += ok;
    }
    EXPECT_GT(reachable, 300);
    bitnet_dummy_vocab_free(v);

    // A smaller vocabulary is a prefix of the bigger one; fewer than 259 tokens is an error.
    bitnet_dummy_vocab *small = nullptr, *big = nullptr;
    ASSERT_EQ(bitnet_dummy_vocab_builtin(600, &small, &err), BITNET_OK);
    ASSERT_EQ(bitnet_dummy_vocab_builtin(5000, &big, &err), BITNET_OK);
    for (int i = 0; i < 600; i++) EXPECT_STREQ(small->tokens[i], big->tokens[i]);
    bitnet_dummy_vocab_free(small);
    bitnet_dummy_vocab_free(big);
    EXPECT_EQ(bitnet_dummy_vocab_builtin(258, &small, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("258"), std::string::npos) << err.msg;
}

TEST(DummyVocab, BuiltinVocabularyLoadsAndTokenizes) {
    Written out("tok.gguf");
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_vocab = 4000;  // room for the whole built-in word list
    write_ok(p, out.path);
    Gguf g(out.path);
    ASSERT_TRUE(g.g);
    bitnet_vocab *v = nullptr;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_vocab_load(g.g, &v, &err), BITNET_OK) << err.msg;
    const char *text = "The quick brown fox jumps";
    int32_t *ids = nullptr;
    size_t n = 0;
    ASSERT_EQ(bitnet_tokenize(v, text, std::strlen(text), true, false, &ids, &n, &err), BITNET_OK) << err.msg;
    ASSERT_GE(n, 2u);
    EXPECT_EQ(ids[0], 1);
    // "▁quick", "▁brown", "▁fox", "▁jumps" are built-in words: few tokens, no byte fallback.
    EXPECT_LE(n, 6u);
    std::string back;
    for (size_t i = 1; i < n; i++) {
        EXPECT_GE(ids[i], 259) << "byte fallback for token " << i;
        char buf[64];
        size_t len = bitnet_token_to_piece(v, ids[i], false, buf, sizeof buf);
        back.append(buf, len < sizeof buf ? len : sizeof buf);
    }
    EXPECT_EQ(back, std::string(" ") + text);
    std::free(ids);
    bitnet_vocab_free(v);
}

TEST(DummyVocab, CopiedFromBitnetCppFile) {
    bitnet_dummy_vocab *v = nullptr;
    bitnet_error err = {{0}};
    const std::string src = kCaseDir + "/ggml-model-i2_s.gguf";
    ASSERT_EQ(bitnet_dummy_vocab_from_gguf(src.c_str(), &v, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(v->n_tokens, 512);
    EXPECT_STREQ(v->tokens[450], "\xe2\x96\x81The");
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.vocab = v;
    p.n_vocab = 0;
    Written out("copied.gguf");
    write_ok(p, out.path);
    bitnet_dummy_vocab_free(v);
    Gguf ours(out.path), ref(src);
    ASSERT_TRUE(ours.g && ref.g);
    EXPECT_EQ(key_signature(ours.g), with_layout_record(key_signature(ref.g)));
    for (const char *key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
        bitnet_gguf_type e1, e2;
        uint64_t n1, n2;
        const void *d1, *d2;
        ASSERT_EQ(bitnet_gguf_get_arr(ours.g, key, &e1, &n1, &d1, &err), BITNET_OK);
        ASSERT_EQ(bitnet_gguf_get_arr(ref.g, key, &e2, &n2, &d2, &err), BITNET_OK);
        EXPECT_EQ(e1, e2);
        ASSERT_EQ(n1, n2);
        if (e1 == BITNET_GGUF_STRING) {
            for (uint64_t i = 0; i < n1; i++) {
                const char *a, *b;
                size_t la, lb;
                ASSERT_EQ(bitnet_gguf_get_arr_str(ours.g, key, i, &a, &la, &err), BITNET_OK);
                ASSERT_EQ(bitnet_gguf_get_arr_str(ref.g, key, i, &b, &lb, &err), BITNET_OK);
                ASSERT_EQ(std::string(a, la), std::string(b, lb)) << key << "[" << i << "]";
            }
        } else {
            EXPECT_EQ(std::memcmp(d1, d2, (size_t)n1 * 4), 0) << key;
        }
    }
    EXPECT_EQ(get_str(ours.g, "tokenizer.ggml.pre"), "default");

    // Not a GGUF / no vocabulary: errors naming the file.
    EXPECT_NE(bitnet_dummy_vocab_from_gguf((kCaseDir + "/README.md").c_str(), &v, &err), BITNET_OK);
    EXPECT_NE(std::string(err.msg).find("README.md"), std::string::npos) << err.msg;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

namespace {
std::string fail_msg(const bitnet_dummy_params &p, bitnet_status expect, const std::string &path) {
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_dummy_write(&p, path.c_str(), &err), expect) << err.msg;
    EXPECT_FALSE(file_exists(path)) << "a failed write left " << path;
    EXPECT_FALSE(file_exists(path + ".tmp")) << "a failed write left " << path << ".tmp";
    return err.msg;
}
}  // namespace

TEST(DummyErrors, BadDimensionsAreNamed) {
    const std::string path = tmp_path("bad.gguf");
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_head = 3;
    p.n_head_kv = 3;
    EXPECT_NE(fail_msg(p, BITNET_ERR_INVALID_ARG, path).find("n_head = 3"), std::string::npos);
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_head_kv = 3;
    EXPECT_NE(fail_msg(p, BITNET_ERR_INVALID_ARG, path).find("n_head_kv = 3"), std::string::npos);
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_head = 256;  // head size 256 / 256 = 1 is odd
    p.n_head_kv = 256;
    EXPECT_NE(fail_msg(p, BITNET_ERR_INVALID_ARG, path).find("odd"), std::string::npos);
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_layer = -1;
    EXPECT_NE(fail_msg(p, BITNET_ERR_INVALID_ARG, path).find("n_layer"), std::string::npos);
    // I2_S needs M*K % 128 == 0: ffn_gate 34x32 has 1088 weights.
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_embd = 32;
    p.n_head = 2;
    p.n_head_kv = 2;
    p.n_ff = 34;
    std::string m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("34x32"), std::string::npos) << m;
    // Q8_0 token_embd needs n_embd % 32 == 0.
    p = tiny_layout_params(BITNET_DUMMY_F16, 7);
    p.n_embd = 40;
    p.n_head = 4;
    p.n_head_kv = 4;
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("n_embd = 40"), std::string::npos) << m;
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_vocab = 100;
    EXPECT_NE(fail_msg(p, BITNET_ERR_INVALID_ARG, path).find("100"), std::string::npos);
    // an embedding type whose block does not divide n_embd is refused, naming tensor, n_embd and block
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.n_embd = 96;
    p.n_head = 3;
    p.n_head_kv = 3;
    p.n_ff = 256;
    p.embd_type = BITNET_TYPE_Q6_K;
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    for (const char *s : {"token_embd.weight", "Q6_K", "n_embd = 96", "256"}) EXPECT_NE(m.find(s), std::string::npos) << m;
    p.embd_type = BITNET_TYPE_Q8_0;  // 96 = 3 · 32 fits
    Written ok("embd-q8-96.gguf");
    write_ok(p, ok.path);
    p = tiny_layout_params(BITNET_DUMMY_TL2, 7);
    p.n_embd = 80;
    p.n_head = 4;
    p.n_head_kv = 4;
    p.embd_type = BITNET_TYPE_Q8_0;
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    for (const char *s : {"token_embd.weight", "Q8_0", "n_embd = 80", "32"}) EXPECT_NE(m.find(s), std::string::npos) << m;
    p = tiny_layout_params(BITNET_DUMMY_F32, 7);
    p.embd_type = BITNET_TYPE_Q6_K;
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("f32"), std::string::npos) << m;
    p.embd_type = BITNET_TYPE_Q4_0;
    p.outtype = BITNET_DUMMY_I2_S;
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("Q4_0"), std::string::npos) << m;
}

TEST(DummyErrors, BadTilesAreNamed) {
    const std::string path = tmp_path("badtiles.gguf");
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_TL1, 7);
    bitnet_dummy_shape_tiles t = {100, 256, {32, 64, 32}};  // no such shape
    p.tiles = &t;
    p.n_tiles = 1;
    std::string m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("100x256"), std::string::npos) << m;
    t = {256, 256, {96, 64, 32}};  // 256 % 96 != 0
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("256"), std::string::npos) << m;
    bitnet_dummy_shape_tiles twice[2] = {{256, 256, {128, 64, 32}}, {256, 256, {128, 64, 32}}};
    p.tiles = twice;
    p.n_tiles = 2;
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("twice"), std::string::npos) << m;
    // TL2 cannot hold K < 256 weights (no default tiles either): 256x128... use n_embd 128.
    p = tiny_layout_params(BITNET_DUMMY_TL2, 7);
    p.n_embd = 128;
    p.n_head = 2;
    p.n_head_kv = 2;
    m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("128"), std::string::npos) << m;
}

TEST(DummyErrors, BadVocabularyAndPath) {
    const std::string path = tmp_path("badvocab.gguf");
    const char *toks[3] = {"<unk>", "<s>", "</s>"};
    int32_t types[3] = {2, 3, 3};
    bitnet_dummy_vocab v = {};
    v.n_tokens = 3;
    v.tokens = toks;
    v.types = types;
    v.bos_id = 1;
    v.eos_id = 7;
    v.pad_id = -1;
    bitnet_dummy_params p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    p.vocab = &v;
    std::string m = fail_msg(p, BITNET_ERR_INVALID_ARG, path);
    EXPECT_NE(m.find("eos_id = 7"), std::string::npos) << m;

    p = tiny_layout_params(BITNET_DUMMY_I2_S, 7);
    const std::string bad = "/nonexistent-dir-for-test/x.gguf";
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_dummy_write(&p, bad.c_str(), &err), BITNET_ERR_IO);
    EXPECT_NE(std::string(err.msg).find("/nonexistent-dir-for-test"), std::string::npos) << err.msg;

    bitnet_dummy_outtype t;
    EXPECT_TRUE(bitnet_dummy_outtype_parse("I2_S", &t));
    EXPECT_EQ(t, BITNET_DUMMY_I2_S);
    EXPECT_TRUE(bitnet_dummy_outtype_parse("tl2", &t));
    EXPECT_EQ(t, BITNET_DUMMY_TL2);
    EXPECT_FALSE(bitnet_dummy_outtype_parse("q4_0", &t));
    EXPECT_FALSE(bitnet_dummy_outtype_parse("i2_", &t));
}

// ---------------------------------------------------------------------------------------------
// The embedding models' layouts: "qwen3" and "gemma3" (docs/EMBEDDINGS.md §1)
// ---------------------------------------------------------------------------------------------

namespace {

// A small Qwen3-like layout: head_dim 128 != n_embd / n_head (q = 512, kv = 256), GQA 4/2.
bitnet_dummy_params qwen3_params(bitnet_dummy_outtype t, uint64_t seed) {
    bitnet_dummy_params p;
    bitnet_dummy_params_init(&p);
    p.arch = BITNET_DUMMY_ARCH_QWEN3;
    p.n_embd = 256;
    p.n_ff = 768;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_embd_head = 128;
    p.n_ctx = 4096;
    p.n_vocab = 300;
    p.rope_freq_base = 1000000.0f;
    p.rms_eps = 1e-6f;
    p.outtype = t;
    p.seed = seed;
    return p;
}

// A small Gemma3-like layout: n_embd 160 (not a multiple of 256 or 128: token_embd stays F16), head_dim
// 64 (q = 256), one KV head.
bitnet_dummy_params gemma3_params(bitnet_dummy_outtype t, uint64_t seed) {
    bitnet_dummy_params p;
    bitnet_dummy_params_init(&p);
    p.arch = BITNET_DUMMY_ARCH_GEMMA3;
    p.n_embd = 160;
    p.n_ff = 384;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 1;
    p.n_embd_head = 64;
    p.n_vocab = 300;
    p.rms_eps = 1e-6f;
    p.outtype = t;
    p.seed = seed;
    return p;
}

std::string sig(const std::string &key, bitnet_gguf_type t, int elem = -1) {
    std::string s = key + ":" + std::to_string((int)t);
    if (elem >= 0) s += "[" + std::to_string(elem) + "]";
    return s;
}

// The keys of bitnet.cpp's convert-bitnet-embedding-to-gguf.py in its order (arch keys, file type,
// pooling), then extra (the Gemma3 SWA keys), then the built-in vocabulary's keys and add_eos_token.
std::vector<std::string> embedding_keys(const std::string &a, const std::vector<std::string> &extra) {
    const bitnet_gguf_type U = BITNET_GGUF_UINT32, F = BITNET_GGUF_FLOAT32, S = BITNET_GGUF_STRING;
    std::vector<std::string> k = {
        sig("general.architecture", S), sig("general.name", S), sig(a + ".block_count", U),
        sig(a + ".context_length", U), sig(a + ".embedding_length", U), sig(a + ".feed_forward_length", U),
        sig(a + ".attention.head_count", U), sig(a + ".attention.head_count_kv", U), sig(a + ".vocab_size", U),
        sig(a + ".rope.dimension_count", U), sig(a + ".attention.key_length", U),
        sig(a + ".attention.value_length", U), sig(a + ".rope.freq_base", F),
        sig(a + ".attention.layer_norm_rms_epsilon", F), sig("general.file_type", U), sig(a + ".pooling_type", U)};
    k.insert(k.end(), extra.begin(), extra.end());
    for (const std::string &s :
         {sig("tokenizer.ggml.model", S), sig("tokenizer.ggml.pre", S),
          sig("tokenizer.ggml.tokens", BITNET_GGUF_ARRAY, BITNET_GGUF_STRING),
          sig("tokenizer.ggml.scores", BITNET_GGUF_ARRAY, BITNET_GGUF_FLOAT32),
          sig("tokenizer.ggml.token_type", BITNET_GGUF_ARRAY, BITNET_GGUF_INT32),
          sig("tokenizer.ggml.bos_token_id", U), sig("tokenizer.ggml.eos_token_id", U),
          sig("tokenizer.ggml.add_eos_token", BITNET_GGUF_BOOL)})
        k.push_back(s);
    return k;
}

float get_f32(const bitnet_gguf *g, const char *key) {
    float v = 0;
    bitnet_error err;
    EXPECT_EQ(bitnet_gguf_get_f32(g, key, &v, &err), BITNET_OK) << err.msg;
    return v;
}

// Expected tensors of an embedding-layout file, in file order: name, ne, type.
struct TensorWant {
    std::string name;
    std::vector<int64_t> ne;
    int type;
};

std::vector<TensorWant> embedding_tensors(const bitnet_dummy_params &p, bool gemma3, bool norm_in) {
    const int64_t D = p.n_embd, F = p.n_ff, d = p.n_embd_head, Q = p.n_head * d, KV = p.n_head_kv * d;
    const int tern = bitnet_dummy_ternary_type(p.outtype);
    const int dense = p.outtype == BITNET_DUMMY_F32 ? BITNET_TYPE_F32 : BITNET_TYPE_F16;
    std::vector<TensorWant> t = {{"token_embd.weight", {D, p.n_vocab}, dense}};
    for (int l = 0; l < p.n_layer; l++) {
        const std::string b = "blk." + std::to_string(l) + ".";
        auto norm = [&](const char *n, int64_t size) { t.push_back({b + n + ".weight", {size}, dense}); };
        auto proj = [&](const char *n, int64_t K, int64_t M) { t.push_back({b + n + ".weight", {K, M}, tern}); };
        norm("attn_norm", D);
        if (norm_in) norm("ffn_down_norm_in", F);
        proj("ffn_down", F, D);
        if (norm_in) norm("ffn_gate_norm_in", D);
        proj("ffn_gate", D, F);
        if (norm_in) norm("ffn_up_norm_in", D);
        proj("ffn_up", D, F);
        if (gemma3) {
            norm("post_attention_norm", D);
            norm("post_ffw_norm", D);
        }
        norm("ffn_norm", D);
        norm("attn_k_norm", d);
        if (norm_in) norm("attn_k_norm_in", D);
        proj("attn_k", D, KV);
        if (norm_in) norm("attn_output_norm_in", Q);
        proj("attn_output", Q, D);
        norm("attn_q_norm", d);
        if (norm_in) norm("attn_q_norm_in", D);
        proj("attn_q", D, Q);
        if (norm_in) norm("attn_v_norm_in", D);
        proj("attn_v", D, KV);
    }
    t.push_back({"output_norm.weight", {D}, dense});
    return t;
}

std::vector<std::string> tensor_list(const bitnet_gguf *g) {
    std::vector<std::string> out;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *t = bitnet_gguf_tensor(g, i);
        std::string s = std::string(t->name) + " ne";
        for (int d = 0; d < t->n_dims; d++) s += " " + std::to_string(t->ne[d]);
        out.push_back(s + " type " + std::to_string(t->type));
    }
    return out;
}

std::vector<std::string> tensor_list(const std::vector<TensorWant> &w) {
    std::vector<std::string> out;
    for (const TensorWant &t : w) {
        std::string s = t.name + " ne";
        for (int64_t n : t.ne) s += " " + std::to_string(n);
        out.push_back(s + " type " + std::to_string(t.type));
    }
    return out;
}

// A norm tensor's values as float (F32 or F16).
std::vector<float> norm_values(const bitnet_gguf_tensor_info *t) {
    std::vector<float> v((size_t)t->ne[0]);
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_row_to_f32(t->type, t->data, v.data(), t->ne[0], &err), BITNET_OK) << err.msg;
    return v;
}

}  // namespace

TEST(DummyEmbedding, KeysAreTheEmbeddingConvertersInItsOrder) {
    struct Case {
        bitnet_dummy_params p;
        const char *arch;
    } cases[] = {{qwen3_params(BITNET_DUMMY_I2_S, 1), "qwen3"}, {gemma3_params(BITNET_DUMMY_I2_S, 1), "gemma3"}};
    for (Case &c : cases) {
        Written out(std::string("emb-keys-") + c.arch + ".gguf");
        write_ok(c.p, out.path);
        Gguf g(out.path);
        ASSERT_TRUE(g.g);
        // I2_S: this project's layout record after the converter's keys; no general.quantization_version
        // (the embedding converter writes none).
        EXPECT_EQ(key_signature(g.g), with_layout_record(embedding_keys(c.arch, {}))) << c.arch;
        const std::string a = c.arch;
        EXPECT_EQ(get_str(g.g, "general.architecture"), a);
        EXPECT_EQ(get_str(g.g, "general.name"), "bitnet-dummy");
        EXPECT_EQ(get_u32(g.g, (a + ".block_count").c_str()), 2u);
        EXPECT_EQ(get_u32(g.g, (a + ".embedding_length").c_str()), (uint32_t)c.p.n_embd);
        EXPECT_EQ(get_u32(g.g, (a + ".feed_forward_length").c_str()), (uint32_t)c.p.n_ff);
        EXPECT_EQ(get_u32(g.g, (a + ".attention.head_count").c_str()), 4u);
        EXPECT_EQ(get_u32(g.g, (a + ".attention.head_count_kv").c_str()), (uint32_t)c.p.n_head_kv);
        EXPECT_EQ(get_u32(g.g, (a + ".vocab_size").c_str()), 300u);
        for (const char *k : {".rope.dimension_count", ".attention.key_length", ".attention.value_length"})
            EXPECT_EQ(get_u32(g.g, (a + k).c_str()), (uint32_t)c.p.n_embd_head) << a << k;
        EXPECT_EQ(get_f32(g.g, (a + ".attention.layer_norm_rms_epsilon").c_str()), 1e-6f);
        EXPECT_EQ(get_f32(g.g, (a + ".rope.freq_base").c_str()), a == "qwen3" ? 1000000.0f : 10000.0f);
        EXPECT_EQ(get_u32(g.g, (a + ".context_length").c_str()), a == "qwen3" ? 4096u : 2048u);
        EXPECT_EQ(get_u32(g.g, "general.file_type"), 40u);
        EXPECT_EQ(get_u32(g.g, (a + ".pooling_type").c_str()), 3u);  // last
        bool add_eos = false;
        bitnet_error err;
        ASSERT_EQ(bitnet_gguf_get_bool(g.g, "tokenizer.ggml.add_eos_token", &add_eos, &err), BITNET_OK) << err.msg;
        EXPECT_TRUE(add_eos);
        EXPECT_EQ(get_str(g.g, BITNET_I2S_LAYOUT_KEY), "x86");
        EXPECT_LT(bitnet_gguf_find_kv(g.g, "general.quantization_version"), 0);
        EXPECT_EQ(bitnet_gguf_find_tensor(g.g, "output.weight"), nullptr);
    }
    // F32/F16 files: the same keys without the layout record; without the record also for I2_S.
    for (bitnet_dummy_outtype t : {BITNET_DUMMY_F32, BITNET_DUMMY_F16, BITNET_DUMMY_I2_S}) {
        bitnet_dummy_params p = gemma3_params(t, 1);
        p.no_layout_record = true;
        Written out(std::string("emb-keys-g-") + bitnet_dummy_outtype_name(t) + ".gguf");
        write_ok(p, out.path);
        Gguf g(out.path);
        ASSERT_TRUE(g.g);
        EXPECT_EQ(key_signature(g.g), embedding_keys("gemma3", {})) << bitnet_dummy_outtype_name(t);
        EXPECT_EQ(get_u32(g.g, "general.file_type"), (uint32_t)bitnet_dummy_file_type(t));
        EXPECT_EQ(get_u32(g.g, "gemma3.context_length"), 2048u);  // the default
        EXPECT_EQ(get_f32(g.g, "gemma3.rope.freq_base"), 10000.0f);
    }
}

TEST(DummyEmbedding, TensorsShapesAndTypesPerOuttypeWithAndWithoutNormIn) {
    // f32 → all F32; f16 → all F16; i2_s → projections I2_S, the rest F16 (bitnet.cpp's embedding converter).
    for (bool gemma3 : {false, true}) {
        for (bool norm_in : {true, false}) {
            for (bitnet_dummy_outtype t : {BITNET_DUMMY_F32, BITNET_DUMMY_F16, BITNET_DUMMY_I2_S}) {
                bitnet_dummy_params p = gemma3 ? gemma3_params(t, 2) : qwen3_params(t, 2);
                p.no_norm_in = !norm_in;
                const std::string what = std::string(gemma3 ? "gemma3" : "qwen3") + (norm_in ? "" : " no_norm_in") +
                                         " " + bitnet_dummy_outtype_name(t);
                Written out("emb-tensors.gguf");
                write_ok(p, out.path);
                Gguf g(out.path);
                ASSERT_TRUE(g.g) << what;
                const std::vector<TensorWant> want = embedding_tensors(p, gemma3, norm_in);
                EXPECT_EQ(tensor_list(g.g), tensor_list(want)) << what;
                // per layer: 18 / 20 tensors with the norms, 11 / 13 without
                EXPECT_EQ(bitnet_gguf_n_tensors(g.g), 2 + 2 * ((gemma3 ? 13 : 11) + (norm_in ? 7 : 0))) << what;
            }
        }
    }
}

TEST(DummyEmbedding, EveryOuttypeHoldsTheSameWeightsAndNorms) {
    // The ternary projections are the reference values of each tensor's stream in every outtype; the
    // norms are F16-exact values of 1 + 0.1·z, identical in the F32, F16 and I2_S files of one seed.
    for (bool gemma3 : {false, true}) {
        const bitnet_dummy_outtype types[] = {BITNET_DUMMY_F32, BITNET_DUMMY_F16, BITNET_DUMMY_I2_S};
        std::vector<std::unique_ptr<Written>> files;
        for (bitnet_dummy_outtype t : types) {
            files.emplace_back(new Written(std::string("emb-same-") + bitnet_dummy_outtype_name(t) + ".gguf"));
            write_ok(gemma3 ? gemma3_params(t, 9) : qwen3_params(t, 9), files.back()->path);
        }
        Gguf base(files[0]->path);
        ASSERT_TRUE(base.g);
        int ternary = 0, norms = 0;
        for (size_t f = 1; f < files.size(); f++) {
            Gguf other(files[f]->path);
            ASSERT_TRUE(other.g);
            for (int64_t i = 0; i < bitnet_gguf_n_tensors(base.g); i++) {
                const bitnet_gguf_tensor_info *t0 = bitnet_gguf_tensor(base.g, i);
                const bitnet_gguf_tensor_info *t1 = bitnet_gguf_find_tensor(other.g, t0->name);
                ASSERT_TRUE(t1) << t0->name;
                if (is_ternary_name(t0->name)) {
                    std::vector<int8_t> w0, w1, ref((size_t)(t0->ne[0] * t0->ne[1]));
                    float s0 = 0, s1 = 0, sref = 0;
                    decode_ternary(base.g, t0, w0, s0);
                    decode_ternary(other.g, t1, w1, s1);
                    bitnet_dummy_ternary_values(9, t0->name, t0->ne[1], t0->ne[0], ref.data(), &sref);
                    EXPECT_TRUE(w0 == ref && w1 == ref) << t0->name;
                    EXPECT_EQ(s0, sref) << t0->name;
                    EXPECT_EQ(s1, sref) << t0->name;
                    ternary++;
                } else if (t0->n_dims == 1) {
                    const std::vector<float> v0 = norm_values(t0), v1 = norm_values(t1);
                    EXPECT_TRUE(v0 == v1) << t0->name << " in " << bitnet_dummy_outtype_name(types[f]);
                    double mean = 0;
                    for (float x : v0) {
                        EXPECT_EQ(bitnet_fp16_to_fp32(bitnet_fp32_to_fp16(x)), x) << t0->name;  // F16-exact
                        EXPECT_GT(x, 0.4f);
                        EXPECT_LT(x, 1.6f);
                        mean += x / (double)v0.size();
                    }
                    EXPECT_NEAR(mean, 1.0, 0.06) << t0->name;
                    norms++;
                } else {  // token_embd: F32 z, and its F16 rounding in the other files
                    ASSERT_STREQ(t0->name, "token_embd.weight");
                    ASSERT_EQ(t1->type, BITNET_TYPE_F16);
                    const int64_t n = t0->ne[0] * t0->ne[1];
                    std::vector<float> e0((size_t)n), e1((size_t)n);
                    bitnet_error err = {{0}};
                    ASSERT_EQ(bitnet_row_to_f32(t0->type, t0->data, e0.data(), n, &err), BITNET_OK);
                    ASSERT_EQ(bitnet_row_to_f32(t1->type, t1->data, e1.data(), n, &err), BITNET_OK);
                    for (int64_t k = 0; k < n; k++)
                        ASSERT_EQ(e1[k], bitnet_fp16_to_fp32(bitnet_fp32_to_fp16(e0[k]))) << "token_embd " << k;
                }
            }
        }
        EXPECT_EQ(ternary, 2 * 2 * 7) << gemma3;
        EXPECT_EQ(norms, 2 * (1 + 2 * ((gemma3 ? 6 : 4) + 7))) << gemma3;
        // The per-projection norms of the plain layout's absence leave every other tensor as it was.
        bitnet_dummy_params p = gemma3 ? gemma3_params(BITNET_DUMMY_I2_S, 9) : qwen3_params(BITNET_DUMMY_I2_S, 9);
        p.no_norm_in = true;
        Written plain("emb-same-plain.gguf");
        write_ok(p, plain.path);
        Gguf gp(plain.path), gi(files[2]->path);
        ASSERT_TRUE(gp.g && gi.g);
        for (int64_t i = 0; i < bitnet_gguf_n_tensors(gp.g); i++) {
            const bitnet_gguf_tensor_info *a = bitnet_gguf_tensor(gp.g, i);
            const bitnet_gguf_tensor_info *b = bitnet_gguf_find_tensor(gi.g, a->name);
            ASSERT_TRUE(b) << a->name;
            ASSERT_EQ(a->nbytes, b->nbytes) << a->name;
            EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0) << a->name;
        }
    }
}

TEST(DummyEmbedding, PoolingAndGemma3SlidingWindowKeys) {
    const struct {
        int32_t param;
        uint32_t written;
    } pools[] = {{BITNET_DUMMY_POOLING_DEFAULT, 3}, {BITNET_DUMMY_POOLING_NONE, 0}, {BITNET_DUMMY_POOLING_MEAN, 1},
                 {BITNET_DUMMY_POOLING_CLS, 2},     {BITNET_DUMMY_POOLING_LAST, 3}};
    for (const auto &pl : pools) {
        bitnet_dummy_params p = qwen3_params(BITNET_DUMMY_F16, 1);
        p.pooling_type = pl.param;
        Written out("emb-pool.gguf");
        write_ok(p, out.path);
        Gguf g(out.path);
        ASSERT_TRUE(g.g);
        EXPECT_EQ(get_u32(g.g, "qwen3.pooling_type"), pl.written) << pl.param;
    }
    int32_t v = -1;
    EXPECT_TRUE(bitnet_dummy_pooling_parse("none", &v));
    EXPECT_EQ(v, BITNET_DUMMY_POOLING_NONE);
    EXPECT_TRUE(bitnet_dummy_pooling_parse("last", &v));
    EXPECT_EQ(v, BITNET_DUMMY_POOLING_LAST);
    EXPECT_TRUE(bitnet_dummy_pooling_parse("cls", &v));
    EXPECT_EQ(v, BITNET_DUMMY_POOLING_CLS);
    EXPECT_FALSE(bitnet_dummy_pooling_parse("Mean", &v));
    EXPECT_FALSE(bitnet_dummy_pooling_parse("rank", &v));

    // Gemma3's optional SWA keys, after pooling_type, each only when asked for.
    const bitnet_gguf_type U = BITNET_GGUF_UINT32, F = BITNET_GGUF_FLOAT32;
    bitnet_dummy_params p = gemma3_params(BITNET_DUMMY_F32, 1);
    p.n_swa = 512;
    p.swa_pattern = 6;
    p.rope_freq_base_swa = 10000.0f;
    p.rope_freq_base = 1000000.0f;
    p.pooling_type = BITNET_DUMMY_POOLING_MEAN;
    Written all("emb-swa.gguf"), one("emb-swa1.gguf");
    write_ok(p, all.path);
    Gguf g(all.path);
    ASSERT_TRUE(g.g);
    EXPECT_EQ(key_signature(g.g),
              embedding_keys("gemma3", {sig("gemma3.attention.sliding_window", U),
                                        sig("gemma3.attention.sliding_window_pattern", U),
                                        sig("gemma3.rope.freq_base_swa", F)}));
    EXPECT_EQ(get_u32(g.g, "gemma3.attention.sliding_window"), 512u);
    EXPECT_EQ(get_u32(g.g, "gemma3.attention.sliding_window_pattern"), 6u);
    EXPECT_EQ(get_f32(g.g, "gemma3.rope.freq_base_swa"), 10000.0f);
    EXPECT_EQ(get_f32(g.g, "gemma3.rope.freq_base"), 1000000.0f);
    EXPECT_EQ(get_u32(g.g, "gemma3.pooling_type"), 1u);
    p.swa_pattern = 0;
    p.rope_freq_base_swa = 0.0f;
    write_ok(p, one.path);
    Gguf g1(one.path);
    ASSERT_TRUE(g1.g);
    EXPECT_EQ(key_signature(g1.g), embedding_keys("gemma3", {sig("gemma3.attention.sliding_window", U)}));
}

TEST(DummyEmbedding, TokenizerAppendsEosAndGemmaCallerVocabularyHasNoSpacePrefix) {
    // add_eos_token = true: the runtime's tokenizer appends EOS (2 in the built-in vocabulary), which
    // last-token pooling then reads.
    for (bool gemma3 : {false, true}) {
        bitnet_dummy_params p = gemma3 ? gemma3_params(BITNET_DUMMY_I2_S, 1) : qwen3_params(BITNET_DUMMY_I2_S, 1);
        p.n_vocab = 4000;
        Written out("emb-tok.gguf");
        write_ok(p, out.path);
        Gguf g(out.path);
        ASSERT_TRUE(g.g);
        EXPECT_LT(bitnet_gguf_find_kv(g.g, "tokenizer.ggml.add_space_prefix"), 0);  // built-in vocabulary
        bitnet_vocab *v = nullptr;
        bitnet_error err = {{0}};
        ASSERT_EQ(bitnet_vocab_load(g.g, &v, &err), BITNET_OK) << err.msg;
        EXPECT_TRUE(bitnet_vocab_add_eos(v));
        const char *text = "the quick fox";
        int32_t *ids = nullptr;
        size_t n = 0;
        ASSERT_EQ(bitnet_tokenize(v, text, std::strlen(text), true, false, &ids, &n, &err), BITNET_OK) << err.msg;
        ASSERT_GE(n, 3u);
        EXPECT_EQ(ids[0], 1);      // BOS
        EXPECT_EQ(ids[n - 1], 2);  // EOS appended
        std::free(ids);
        bitnet_vocab_free(v);
    }
    // A caller's vocabulary: gemma3 files say add_space_prefix = false (Gemma's tokenizer); qwen3 do not.
    bitnet_dummy_vocab *cv = nullptr;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_dummy_vocab_from_gguf((kCaseDir + "/ggml-model-i2_s.gguf").c_str(), &cv, &err), BITNET_OK)
        << err.msg;
    for (bool gemma3 : {false, true}) {
        bitnet_dummy_params p = gemma3 ? gemma3_params(BITNET_DUMMY_F16, 1) : qwen3_params(BITNET_DUMMY_F16, 1);
        p.vocab = cv;
        Written out("emb-cv.gguf");
        write_ok(p, out.path);
        Gguf g(out.path);
        ASSERT_TRUE(g.g);
        std::vector<std::string> keys = key_signature(g.g);
        ASSERT_GE(keys.size(), 2u);
        EXPECT_EQ(keys.back(), sig("tokenizer.ggml.add_eos_token", BITNET_GGUF_BOOL));
        if (gemma3) {
            EXPECT_EQ(keys[keys.size() - 2], sig("tokenizer.ggml.add_space_prefix", BITNET_GGUF_BOOL));
            bool asp = true;
            ASSERT_EQ(bitnet_gguf_get_bool(g.g, "tokenizer.ggml.add_space_prefix", &asp, &err), BITNET_OK);
            EXPECT_FALSE(asp);
        } else {
            EXPECT_LT(bitnet_gguf_find_kv(g.g, "tokenizer.ggml.add_space_prefix"), 0);
        }
        EXPECT_EQ(get_u32(g.g, gemma3 ? "gemma3.vocab_size" : "qwen3.vocab_size"), 512u);
    }
    bitnet_dummy_vocab_free(cv);
}

TEST(DummyEmbedding, TlOuttypesKeepF16NormsAndRecordTiles) {
    // TL1/TL2 (not written by bitnet.cpp's embedding converter): projections TL1/TL2 with their tiles
    // records, everything else F16 as in the i2_s files.
    for (bitnet_dummy_outtype t : {BITNET_DUMMY_TL1, BITNET_DUMMY_TL2}) {
        bitnet_dummy_params p = qwen3_params(t, 4);
        Written out("emb-tl.gguf");
        write_ok(p, out.path);
        Gguf g(out.path);
        ASSERT_TRUE(g.g);
        EXPECT_EQ(tensor_list(g.g), tensor_list(embedding_tensors(p, false, true))) << bitnet_dummy_outtype_name(t);
        std::vector<int8_t> w, ref;
        float s = 0, sref = 0;
        const bitnet_gguf_tensor_info *q = bitnet_gguf_find_tensor(g.g, "blk.1.attn_q.weight");
        ASSERT_TRUE(q);
        decode_ternary(g.g, q, w, s);
        ref.resize(w.size());
        bitnet_dummy_ternary_values(4, "blk.1.attn_q.weight", q->ne[1], q->ne[0], ref.data(), &sref);
        EXPECT_TRUE(w == ref);
        EXPECT_EQ(s, sref);
        EXPECT_LT(bitnet_gguf_find_kv(g.g, "general.quantization_version"), 0);
    }
}

TEST(DummyEmbedding, GoldenBytes) {
    // FNV-1a 64 of whole files, pinned when the embedding layouts were added (x86-64); like
    // DummyFile.GoldenBytesOnEveryIsa, a change here changes every dummy embedding model.
    auto fnv = [](const std::vector<unsigned char> &b) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (unsigned char c : b) h = (h ^ c) * 0x100000001b3ull;
        return h;
    };
    struct Case {
        bool gemma3;
        bitnet_dummy_outtype t;
        bool no_norm_in;
        size_t size;
        uint64_t hash;
    } cases[] = {
        {false, BITNET_DUMMY_I2_S, false, 415456, 0x36385b65ad843225ull},
        {false, BITNET_DUMMY_F32, true, 4251712, 0xca44e72865fb7145ull},
        {true, BITNET_DUMMY_F16, false, 682976, 0xaca3442a6b9a8e71ull},
        {true, BITNET_DUMMY_I2_S, true, 178176, 0x502be4c957abd515ull},
    };
    for (const Case &c : cases) {
        bitnet_dummy_params p = c.gemma3 ? gemma3_params(c.t, 1234) : qwen3_params(c.t, 1234);
        p.n_layer = 1;
        p.no_norm_in = c.no_norm_in;
        Written out("emb-golden.gguf");
        write_ok(p, out.path);
        std::vector<uint8_t> bytes = read_file(out.path);
        EXPECT_EQ(bytes.size(), c.size) << (c.gemma3 ? "gemma3 " : "qwen3 ") << bitnet_dummy_outtype_name(c.t);
        EXPECT_EQ(fnv(bytes), c.hash) << (c.gemma3 ? "gemma3 " : "qwen3 ") << bitnet_dummy_outtype_name(c.t);
    }
}

TEST(DummyEmbedding, RefusalsNameTheParameter) {
    const std::string path = tmp_path("emb-bad.gguf");
    struct Case {
        bitnet_dummy_params p;
        std::vector<std::string> words;
    };
    std::vector<Case> cases;
    auto add = [&](bitnet_dummy_params p, std::vector<std::string> words) { cases.push_back({p, words}); };
    bitnet_dummy_params p = qwen3_params(BITNET_DUMMY_I2_S, 1);
    p.output_separate = true;
    add(p, {"output_separate", "qwen3", "output.weight"});
    p = gemma3_params(BITNET_DUMMY_F16, 1);
    p.output_separate = true;
    add(p, {"output_separate", "gemma3"});
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 1);
    p.no_norm_in = true;
    add(p, {"no_norm_in", "\"bitnet\""});
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 1);
    p.arch = BITNET_DUMMY_ARCH_LLAMA;
    p.pooling_type = BITNET_DUMMY_POOLING_MEAN;
    add(p, {"pooling_type = 2", "\"llama\""});
    p = qwen3_params(BITNET_DUMMY_I2_S, 1);
    p.pooling_type = 5;
    add(p, {"pooling_type = 5"});
    p.pooling_type = -1;
    add(p, {"pooling_type = -1"});
    p = qwen3_params(BITNET_DUMMY_I2_S, 1);
    p.n_swa = 128;
    add(p, {"n_swa = 128", "gemma3", "\"qwen3\""});
    p = qwen3_params(BITNET_DUMMY_I2_S, 1);
    p.swa_pattern = 6;
    add(p, {"swa_pattern = 6", "\"qwen3\""});
    p = tiny_layout_params(BITNET_DUMMY_I2_S, 1);
    p.rope_freq_base_swa = 10000.0f;
    add(p, {"rope_freq_base_swa = 10000", "\"bitnet\""});
    p = gemma3_params(BITNET_DUMMY_I2_S, 1);
    p.n_swa = -4;
    add(p, {"n_swa = -4"});
    p = gemma3_params(BITNET_DUMMY_I2_S, 1);
    p.rope_freq_base_swa = std::nanf("");
    add(p, {"rope_freq_base_swa = nan"});
    for (const Case &c : cases) {
        const std::string m = fail_msg(c.p, BITNET_ERR_INVALID_ARG, path);
        for (const std::string &w : c.words) EXPECT_NE(m.find(w), std::string::npos) << "'" << w << "' not in: " << m;
    }
    bitnet_dummy_arch a;
    ASSERT_TRUE(bitnet_dummy_arch_parse("qwen3", &a));
    EXPECT_EQ(a, BITNET_DUMMY_ARCH_QWEN3);
    ASSERT_TRUE(bitnet_dummy_arch_parse("gemma3", &a));
    EXPECT_EQ(a, BITNET_DUMMY_ARCH_GEMMA3);
    EXPECT_STREQ(bitnet_dummy_arch_name(BITNET_DUMMY_ARCH_GEMMA3), "gemma3");
}

#ifndef BITNET_CLI_EMULATOR
#define BITNET_CLI_EMULATOR "" /* the emulator of a cross build (tests/CMakeLists.txt), else none */
#endif

TEST(DummyEmbedding, CommandLine) {
    // bitnet-dummy's flags for the embedding layouts, and their refusals on archs they mean nothing for
    // (exit 2, naming the flag). Needs build/bin/bitnet-dummy (built with the tools).
    const std::string exe = std::string(BITNET_BINARY_DIR) + "/bin/bitnet-dummy";
    ASSERT_TRUE(file_exists(exe)) << exe << " is not built";
    const std::string out = tmp_path("emb-cli.gguf"), base = tmp_path("emb-cli-run");
    const std::string dims = "-q -o '" + out + "' --n-embd 160 --n-ff 384 --n-layer 1 --n-head 4 --n-head-kv 1 "
                             "--n-embd-head 64 --vocab-size 300 ";
    bitnet_test::RunResult r = bitnet_test::run_program(
        BITNET_CLI_EMULATOR, exe,
        dims + "--arch gemma3 --outtype f16 --no-norm-in --pooling cls --swa 512 --swa-pattern 6 "
               "--rope-freq-base-swa 10000 --rms-eps 1e-6 --rope-theta 1e6",
        "", base);
    ASSERT_EQ(r.rc, 0) << r.err;
    {
        Gguf g(out);
        ASSERT_TRUE(g.g);
        bitnet_dummy_params p = gemma3_params(BITNET_DUMMY_F16, 0);
        p.n_layer = 1;
        EXPECT_EQ(tensor_list(g.g), tensor_list(embedding_tensors(p, true, false)));
        EXPECT_EQ(get_u32(g.g, "gemma3.pooling_type"), 2u);
        EXPECT_EQ(get_u32(g.g, "gemma3.attention.sliding_window"), 512u);
        EXPECT_EQ(get_u32(g.g, "gemma3.attention.sliding_window_pattern"), 6u);
        EXPECT_EQ(get_f32(g.g, "gemma3.rope.freq_base_swa"), 10000.0f);
        EXPECT_EQ(get_f32(g.g, "gemma3.rope.freq_base"), 1000000.0f);
        EXPECT_EQ(get_f32(g.g, "gemma3.attention.layer_norm_rms_epsilon"), 1e-6f);
    }
    std::remove(out.c_str());
    const struct {
        std::string args, want;
    } bad[] = {
        {"--arch llama --no-norm-in", "--no-norm-in: architecture llama"},
        {"--arch llama --pooling mean", "--pooling: architecture llama"},
        {"--arch qwen3 --pooling max", "--pooling: 'max'"},
        {"--arch qwen3 --swa 4", "--swa: architecture qwen3"},
        {"--arch qwen3 --swa-pattern 6", "--swa-pattern: architecture qwen3"},
        {"--arch bitnet-b1.58 --rope-freq-base-swa 1e4", "--rope-freq-base-swa: architecture bitnet-b1.58"},
        {"--arch gemma3 --output-weight", "--output-weight: architecture gemma3"},
        {"--arch gemma3 --swa 0", "--swa"},
        {"--arch gemma3 --rms-eps 0", "--rms-eps: '0'"},
    };
    for (const auto &b : bad) {
        r = bitnet_test::run_program(BITNET_CLI_EMULATOR, exe, dims + b.args, "", base);
        EXPECT_EQ(r.rc, 2) << b.args << ": " << r.err;
        EXPECT_NE(r.err.find(b.want), std::string::npos) << b.args << ": " << r.err;
        EXPECT_FALSE(file_exists(out)) << b.args;
    }
    for (const char *ext : {".in", ".out", ".err"}) std::remove((base + ext).c_str());
}
