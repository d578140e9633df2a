// test_convert.cc — the safetensors reader (src/convert/safetensors.h) and the pieces of the HF → GGUF
// converter (src/convert/hf_convert.h): config.json mapping (also the embedding models' qwen3 / gemma3_text
// fields, Gemma 3's sliding-window period and sentence-transformers' pooling files), ternary decoding of
// each weight kind, the 2-bit unpacking and the llama Q/K row permutation. Whole conversions
// (make-hf-checkpoint.py → convert → run) are tested in tests/convert/test_convert.py and
// tests/convert/test_convert_embedding.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "convert/hf_convert.h"
#include "kernels/lut/pack.h"
#include "convert/safetensors.h"
#include "test_util.h"

namespace {

std::string g_dir;
::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_convert_", &g_dir));

struct StTensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
};

template <typename T> std::vector<uint8_t> bytes_of(const std::vector<T> &v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

// float -> bfloat16 bits by truncation (the test values are exact in bf16).
std::vector<uint8_t> bf16_bytes(const std::vector<float> &v) {
    std::vector<uint8_t> b;
    for (float f : v) {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        b.push_back((uint8_t)(u >> 16));
        b.push_back((uint8_t)(u >> 24));
    }
    return b;
}

// The JSON header of a safetensors file with the tensors laid out one after another.
std::string header_json(const std::vector<StTensor> &ts, const std::string &extra = "") {
    std::string h = "{";
    size_t off = 0;
    bool first = true;
    if (!extra.empty()) {
        h += extra;
        first = false;
    }
    for (const auto &t : ts) {
        if (!first) h += ",";
        first = false;
        h += "\"" + t.name + "\":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
        for (size_t i = 0; i < t.shape.size(); i++) h += (i ? "," : "") + std::to_string(t.shape[i]);
        h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + t.data.size()) + "]}";
        off += t.data.size();
    }
    return h + "}";
}

// Write header (padded with spaces to a multiple of 8, as the format recommends) + data.
void write_raw(const std::string &path, const std::string &header, const std::vector<uint8_t> &data) {
    std::string h = header;
    while ((h.size() + 8) % 8) h += ' ';
    std::ofstream f(path, std::ios::binary);
    uint64_t n = h.size();
    for (int i = 0; i < 8; i++) f.put((char)(n >> (8 * i)));
    f.write(h.data(), (std::streamsize)h.size());
    f.write((const char *)data.data(), (std::streamsize)data.size());
}

void write_st(const std::string &path, const std::vector<StTensor> &ts, const std::string &extra = "") {
    std::vector<uint8_t> data;
    for (const auto &t : ts) data.insert(data.end(), t.data.begin(), t.data.end());
    write_raw(path, header_json(ts, extra), data);
}

std::string new_dir(const std::string &name) {
    std::string d = g_dir + "/" + name;
    std::string cmd = "rm -rf '" + d + "' && mkdir -p '" + d + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
    return d;
}

void write_text(const std::string &path, const std::string &text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
}

// Open `path` expecting failure with `status`; returns the message.
std::string open_fails(const std::string &path, bitnet_status status) {
    bitnet_st_set *s = nullptr;
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_st_open(path.c_str(), &s, &err), status) << err.msg;
    EXPECT_EQ(s, nullptr);
    bitnet_st_close(s);
    return err.msg;
}

std::vector<StTensor> sample_tensors() {
    return {
        {"b.f32", "F32", {2, 3}, bytes_of(std::vector<float>{1.5f, -2.0f, 0.0f, 3.25f, -0.125f, 7.0f})},
        {"a.bf16", "BF16", {4}, bf16_bytes({1.0f, -0.5f, 3.0f, -1024.0f})},
        {"c.f16", "F16", {2}, bytes_of(std::vector<uint16_t>{0x3c00, 0xc500})}, // 1.0, -5.0
        {"d.f64", "F64", {1}, bytes_of(std::vector<double>{0.1})},
        {"e.u8", "U8", {2, 2}, {0, 1, 2, 255}},
    };
}

// ---------------------------------------------------------------------------------------------
// safetensors reader
// ---------------------------------------------------------------------------------------------

TEST(Safetensors, ReadsEveryFloatDtypeAndSortsNames) {
    std::string d = new_dir("ok");
    write_st(d + "/model.safetensors", sample_tensors(), "\"__metadata__\":{\"format\":\"pt\"}");
    bitnet_st_set *s = nullptr;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_st_open(d.c_str(), &s, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_st_n_tensors(s), 5);
    EXPECT_EQ(bitnet_st_n_files(s), 1);
    const char *order[] = {"a.bf16", "b.f32", "c.f16", "d.f64", "e.u8"};
    for (int i = 0; i < 5; i++) EXPECT_STREQ(bitnet_st_tensor_at(s, i)->name, order[i]);
    const bitnet_st_tensor *t = bitnet_st_find(s, "b.f32");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, BITNET_ST_F32);
    EXPECT_EQ(t->n_dims, 2);
    EXPECT_EQ(t->shape[0], 2);
    EXPECT_EQ(t->shape[1], 3);
    EXPECT_EQ(t->n_elements, 6u);
    float f[6];
    ASSERT_EQ(bitnet_st_read_f32(t, 1, 4, f, &err), BITNET_OK);
    EXPECT_EQ(f[0], -2.0f);
    EXPECT_EQ(f[3], -0.125f);
    ASSERT_EQ(bitnet_st_read_f32(bitnet_st_find(s, "a.bf16"), 0, 4, f, &err), BITNET_OK);
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_EQ(f[1], -0.5f);
    EXPECT_EQ(f[3], -1024.0f);
    ASSERT_EQ(bitnet_st_read_f32(bitnet_st_find(s, "c.f16"), 0, 2, f, &err), BITNET_OK);
    EXPECT_EQ(f[0], 1.0f);
    EXPECT_EQ(f[1], -5.0f);
    ASSERT_EQ(bitnet_st_read_f32(bitnet_st_find(s, "d.f64"), 0, 1, f, &err), BITNET_OK);
    EXPECT_EQ(f[0], 0.1f);
    const bitnet_st_tensor *u = bitnet_st_find(s, "e.u8");
    EXPECT_EQ(u->data[3], 255);
    EXPECT_EQ(bitnet_st_read_f32(u, 0, 1, f, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("e.u8"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("U8"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_st_read_f32(t, 5, 2, f, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(bitnet_st_find(s, "zzz"), nullptr);
    bitnet_st_release(t);
    ASSERT_EQ(bitnet_st_read_f32(t, 0, 1, f, &err), BITNET_OK); // still readable after release
    EXPECT_EQ(f[0], 1.5f);
    bitnet_st_close(s);
}

TEST(Safetensors, TruncatedFilesAreNamed) {
    std::string d = new_dir("trunc");
    std::string full = d + "/full.safetensors";
    write_st(full, sample_tensors());
    std::vector<uint8_t> bytes = bitnet_test::read_file(full);
    auto cut = [&](size_t n, const std::string &name) {
        std::string p = d + "/" + name;
        std::ofstream(p, std::ios::binary).write((const char *)bytes.data(), (std::streamsize)n);
        return p;
    };
    std::string m = open_fails(cut(5, "size.safetensors"), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
    m = open_fails(cut(40, "header.safetensors"), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
    EXPECT_NE(m.find("header"), std::string::npos) << m;
    m = open_fails(cut(bytes.size() - 3, "data.safetensors"), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
    EXPECT_NE(m.find("e.u8"), std::string::npos) << m; // the last tensor is the one cut
    m = open_fails(d + "/none.safetensors", BITNET_ERR_IO);
    EXPECT_NE(m.find("none.safetensors"), std::string::npos) << m;
}

TEST(Safetensors, MalformedHeadersAreRefused) {
    std::string d = new_dir("bad");
    std::vector<uint8_t> four(4, 0);
    struct Case {
        const char *name;
        std::string header;
        std::vector<uint8_t> data;
        bitnet_status status;
        const char *needle;
    } cases[] = {
        {"dtype", R"({"w":{"dtype":"Q4","shape":[4],"data_offsets":[0,4]}})", four, BITNET_ERR_UNSUPPORTED, "\"Q4\""},
        {"json", R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},})", four, BITNET_ERR_FORMAT, "byte"},
        {"count", R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four, BITNET_ERR_FORMAT, "need 8"},
        {"overlap",
         R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
         four, BITNET_ERR_FORMAT, "overlap"},
        {"hole",
         R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
         four, BITNET_ERR_FORMAT, "hole"},
        {"trailing", R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", four, BITNET_ERR_FORMAT, "after the last"},
        {"negative", R"({"a":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", four, BITNET_ERR_FORMAT, "shape[0]"},
        {"array", R"([1,2,3])", four, BITNET_ERR_FORMAT, "'{'"},
        {"entry", R"({"a":[0,4]})", four, BITNET_ERR_FORMAT, "'a'"},
    };
    for (const auto &c : cases) {
        std::string p = d + "/" + c.name + ".safetensors";
        write_raw(p, c.header, c.data);
        std::string m = open_fails(p, c.status);
        EXPECT_NE(m.find(c.needle), std::string::npos) << c.name << ": " << m;
        EXPECT_NE(m.find(p), std::string::npos) << c.name << ": " << m;
    }
    // a size field far beyond the file
    std::string p = d + "/huge.safetensors";
    std::vector<uint8_t> b = {0, 0, 0, 0, 1, 0, 0, 0, '{', '}'};
    std::ofstream(p, std::ios::binary).write((const char *)b.data(), (std::streamsize)b.size());
    std::string m = open_fails(p, BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("100 MB"), std::string::npos) << m;
}

TEST(Safetensors, ShardedThroughTheIndex) {
    std::string d = new_dir("sharded");
    auto ts = sample_tensors();
    write_st(d + "/model-00001-of-00002.safetensors", {ts[0], ts[1]});
    write_st(d + "/model-00002-of-00002.safetensors", {ts[2], ts[3], ts[4]});
    const std::string index = R"({"metadata":{"total_size":60},"weight_map":{
        "b.f32":"model-00001-of-00002.safetensors","a.bf16":"model-00001-of-00002.safetensors",
        "c.f16":"model-00002-of-00002.safetensors","d.f64":"model-00002-of-00002.safetensors",
        "e.u8":"model-00002-of-00002.safetensors"}})";
    write_text(d + "/model.safetensors.index.json", index);
    bitnet_st_set *s = nullptr;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_st_open(d.c_str(), &s, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_st_n_files(s), 2);
    EXPECT_EQ(bitnet_st_n_tensors(s), 5);
    float f[2];
    ASSERT_EQ(bitnet_st_read_f32(bitnet_st_find(s, "c.f16"), 0, 2, f, &err), BITNET_OK);
    EXPECT_EQ(f[1], -5.0f);
    EXPECT_NE(std::string(bitnet_st_find(s, "c.f16")->path).find("00002-of"), std::string::npos);
    bitnet_st_close(s);

    // the index names the wrong shard for a tensor
    std::string wrong = index;
    wrong.replace(wrong.find("\"c.f16\":\"model-00002"), 20, "\"c.f16\":\"model-00001");
    write_text(d + "/model.safetensors.index.json", wrong);
    std::string m = open_fails(d, BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("'c.f16'"), std::string::npos) << m;
    // a shard that is missing
    write_text(d + "/model.safetensors.index.json",
               R"({"weight_map":{"x":"model-00003-of-00003.safetensors"}})");
    m = open_fails(d, BITNET_ERR_IO);
    EXPECT_NE(m.find("model-00003-of-00003.safetensors"), std::string::npos) << m;
    // a shard name that leaves the folder
    write_text(d + "/model.safetensors.index.json", R"({"weight_map":{"x":"../evil.safetensors"}})");
    m = open_fails(d, BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("same folder"), std::string::npos) << m;
    // one tensor in two shards
    write_st(d + "/model-00002-of-00002.safetensors", {ts[1], ts[2], ts[3], ts[4]});
    write_text(d + "/model.safetensors.index.json", index);
    m = open_fails(d, BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("'a.bf16'"), std::string::npos) << m;
    EXPECT_NE(m.find("twice"), std::string::npos) << m;
}

TEST(Safetensors, DirectoryWithoutCheckpoint) {
    std::string d = new_dir("empty");
    std::string m = open_fails(d, BITNET_ERR_IO);
    EXPECT_NE(m.find("model.safetensors.index.json"), std::string::npos) << m;
    EXPECT_NE(m.find("*.safetensors"), std::string::npos) << m;
}

// ---------------------------------------------------------------------------------------------
// Ternary decoding
// ---------------------------------------------------------------------------------------------

TEST(HfTernary, AbsmeanMatchesTheFormula) {
    const float W[] = {0.5f, -1.5f, 0.1f, 2.0f, -0.6f, 0.0f};
    int8_t w[6];
    float scale = 0;
    bitnet_hf_ternarize(W, 6, w, &scale);
    // mean|W| = 4.7 / 6; W * 6/4.7: 0.638 -> 1, -1.91 -> -1 (clamped from -2), 0.128 -> 0, 2.55 -> 1, -0.77 -> -1, 0
    const int8_t want[] = {1, -1, 0, 1, -1, 0};
    for (int i = 0; i < 6; i++) EXPECT_EQ(w[i], want[i]) << i;
    EXPECT_EQ(scale, (float)(4.7 / 6.0));
    // all zero: scale 0; tiny weights use the 1e-5 floor
    const float Z[] = {0, 0, 0, 0};
    bitnet_hf_ternarize(Z, 4, w, &scale);
    EXPECT_EQ(scale, 0.0f);
    const float T[] = {2e-6f, -2e-6f, 0, 0};
    bitnet_hf_ternarize(T, 4, w, &scale);
    EXPECT_EQ(w[0], 0);
    EXPECT_EQ(scale, 0.0f);
}

TEST(HfTernary, SameCodesAsPackTernarizeAndTheScaleIsTheMean) {
    // Random latent weights: the codes are bitnet_ternarize's (formats.md), the scale is mean|W| rounded
    // once, at most one ulp from bitnet_ternarize's 1/(1/mean).
    uint64_t x = 88172645463325252ull;
    std::vector<float> W(4096);
    for (auto &v : W) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v = (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0) * 0.03f;
    }
    std::vector<int8_t> a(W.size()), b(W.size());
    float sa, sb;
    bitnet_hf_ternarize(W.data(), (int64_t)W.size(), a.data(), &sa);
    sb = bitnet_ternarize(W.data(), (int64_t)W.size(), b.data());
    EXPECT_EQ(a, b);
    EXPECT_LE(std::fabs(sa - sb), std::nextafter(sb, 1.0f) - sb);
    double sum = 0;
    for (float v : W) sum += std::fabs(v);
    EXPECT_EQ(sa, (float)(sum / (double)W.size()));
}

TEST(HfTernary, ExactTernaryAcceptsOnlyOneMagnitude) {
    int8_t w[5];
    float scale;
    int64_t bad;
    const float ok[] = {0.0f, 0.8125f, -0.8125f, -0.0f, 0.8125f};
    ASSERT_TRUE(bitnet_hf_exact_ternary(ok, 5, w, &scale, &bad));
    EXPECT_EQ(scale, 0.8125f);
    const int8_t want[] = {0, 1, -1, 0, 1};
    for (int i = 0; i < 5; i++) EXPECT_EQ(w[i], want[i]);
    const float two[] = {0.5f, -0.5f, 0.25f};
    EXPECT_FALSE(bitnet_hf_exact_ternary(two, 3, w, &scale, &bad));
    EXPECT_EQ(bad, 2);
    const float nan[] = {0.0f, NAN};
    EXPECT_FALSE(bitnet_hf_exact_ternary(nan, 2, w, &scale, &bad));
    EXPECT_EQ(bad, 1);
    const float zero[] = {0.0f, 0.0f};
    ASSERT_TRUE(bitnet_hf_exact_ternary(zero, 2, w, &scale, &bad));
    EXPECT_EQ(scale, 0.0f);
}

TEST(HfTernary, Unpack2BitFollowsTransformersLayout) {
    // M = 8 rows, K = 3: row r is packed row r % 2, bits 2*(r / 2). Build the bytes from a known matrix.
    const int M = 8, K = 3, R = M / 4;
    int8_t want[M * K];
    for (int i = 0; i < M * K; i++) want[i] = (int8_t)((i * 7 + 3) % 3 - 1);
    std::vector<uint8_t> packed(R * K, 0);
    for (int r = 0; r < M; r++)
        for (int k = 0; k < K; k++) packed[(r % R) * K + k] |= (uint8_t)((want[r * K + k] + 1) << (2 * (r / R)));
    int8_t got[M * K];
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_hf_unpack_2bit(packed.data(), M, K, got, "t", &err), BITNET_OK) << err.msg;
    for (int i = 0; i < M * K; i++) EXPECT_EQ(got[i], want[i]) << i;
    // transformers' docstring example: 0b10100001 in column 0 unpacks to rows 0, 2, 4, 6 = 0, -1, 1, 1
    const uint8_t ex[2] = {0xA1, 0x90}; // [2, 1]: K = 1
    int8_t e8[8];
    ASSERT_EQ(bitnet_hf_unpack_2bit(ex, 8, 1, e8, "ex", &err), BITNET_OK);
    EXPECT_EQ(e8[0], 0);
    EXPECT_EQ(e8[2], -1);
    EXPECT_EQ(e8[4], 1);
    EXPECT_EQ(e8[6], 1);
    packed[4] |= 0xC0; // code 3 in the top bits of packed row 1, column 1
    EXPECT_EQ(bitnet_hf_unpack_2bit(packed.data(), M, K, got, "blk.q", &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("blk.q"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("row 1, column 1"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_hf_unpack_2bit(packed.data(), 6, K, got, "t", &err), BITNET_ERR_INVALID_ARG);
}

TEST(HfTernary, RopePermutationInterleavesHalves) {
    // 2 heads of d = 4 rows, K = 2: GGUF row h*4 + 2i + j = HF row h*4 + j*2 + i.
    const int M = 8, K = 2;
    int8_t src[M * K], dst[M * K];
    for (int r = 0; r < M; r++)
        for (int k = 0; k < K; k++) src[r * K + k] = (int8_t)(r * 10 + k);
    bitnet_hf_rope_permute(src, M, K, 2, dst);
    const int order[M] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int r = 0; r < M; r++)
        for (int k = 0; k < K; k++) EXPECT_EQ(dst[r * K + k], order[r] * 10 + k) << r;
    // one head of d = 8: pairs (i, i + 4) become adjacent
    bitnet_hf_rope_permute(src, M, K, 1, dst);
    const int order1[M] = {0, 4, 1, 5, 2, 6, 3, 7};
    for (int r = 0; r < M; r++) EXPECT_EQ(dst[r * K], order1[r] * 10) << r;
}

// ---------------------------------------------------------------------------------------------
// config.json
// ---------------------------------------------------------------------------------------------

const char *BASE_CFG = R"("hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
    "num_attention_heads":4,"vocab_size":1000)";

bitnet_status load_cfg(const std::string &name, const std::string &fields, bitnet_hf_config *c, std::string *msg) {
    std::string d = new_dir("cfg_" + name);
    write_text(d + "/config.json", "{" + fields + "}");
    bitnet_error err = {{0}};
    bitnet_status st = bitnet_hf_config_load(d.c_str(), c, &err);
    *msg = err.msg;
    return st;
}

TEST(HfConfig, ArchitectureNamesIgnoreCase) {
    bitnet_hf_config c;
    std::string m;
    for (const char *a : {"BitnetForCausalLM", "BitNetForCausalLM", "BITNETFORCAUSALLM"}) {
        ASSERT_EQ(load_cfg("bn", std::string("\"architectures\":[\"") + a + "\"]," + BASE_CFG, &c, &m), BITNET_OK) << m;
        EXPECT_STREQ(c.arch, "bitnet") << a;
        EXPECT_EQ(c.weights, BITNET_HF_LATENT);
        EXPECT_STREQ(c.hf_arch, a);
    }
    ASSERT_EQ(load_cfg("b158", std::string(R"("architectures":["BitNetForCausalLM"],"hidden_act":"relu2",
        "num_key_value_heads":2,"rope_theta":500000.0,"tie_word_embeddings":true,"rms_norm_eps":1e-5,)") + BASE_CFG,
                       &c, &m), BITNET_OK) << m;
    EXPECT_STREQ(c.arch, "bitnet-b1.58");
    EXPECT_EQ(c.n_head_kv, 2);
    EXPECT_EQ(c.n_embd_head, 64);
    EXPECT_EQ(c.rope_theta, 500000.0f);
    EXPECT_EQ(c.rms_eps, 1e-5f);
    EXPECT_EQ(c.tie_embeddings, 1);
    EXPECT_EQ(c.n_ctx, 2048); // max_position_embeddings absent: LlamaConfig's default
    ASSERT_EQ(load_cfg("llama", std::string(R"("architectures":["LlamaForCausalLM"],"head_dim":128,)") + BASE_CFG, &c,
                       &m), BITNET_OK) << m;
    EXPECT_STREQ(c.arch, "llama");
    EXPECT_EQ(c.weights, BITNET_HF_AS_STORED);
    EXPECT_EQ(c.n_embd_head, 128);
    EXPECT_EQ(c.rope_theta, 10000.0f);
    EXPECT_EQ(c.rms_eps, 1e-6f);
    EXPECT_EQ(c.tie_embeddings, -1);
}

TEST(HfConfig, QuantizationConfigSelectsTheWeightKind) {
    struct {
        const char *q;
        bitnet_hf_weights want;
    } ok[] = {
        {R"({"quant_method":"bitnet"})", BITNET_HF_PACKED_DIV},
        {R"({"quant_method":"bitnet","linear_class":"bitlinear","quantization_mode":"offline"})", BITNET_HF_PACKED_DIV},
        {R"({"quant_method":"bitnet","linear_class":"autobitlinear","quantization_mode":"offline"})",
         BITNET_HF_PACKED_MUL},
        {R"({"quant_method":"bitnet","linear_class":"autobitlinear","quantization_mode":"online"})", BITNET_HF_LATENT},
        {R"({"quant_method":"bitnet","use_rms_norm":false})", BITNET_HF_PACKED_DIV},
    };
    bitnet_hf_config c;
    std::string m;
    for (const auto &k : ok) {
        ASSERT_EQ(load_cfg("q", std::string(R"("architectures":["LlamaForCausalLM"],"quantization_config":)") + k.q +
                                    "," + BASE_CFG, &c, &m), BITNET_OK) << k.q << ": " << m;
        EXPECT_EQ(c.weights, k.want) << k.q;
    }
    struct {
        const char *q, *needle;
    } bad[] = {
        {R"({"quant_method":"gptq"})", "\"gptq\""},
        {R"({"quant_method":"bitnet","use_rms_norm":true})", "use_rms_norm"},
        {R"({"quant_method":"bitnet","quantization_mode":"online"})", "autobitlinear"},
        {R"({"quant_method":"bitnet","linear_class":"fancy"})", "\"fancy\""},
    };
    for (const auto &k : bad) {
        EXPECT_EQ(load_cfg("qb", std::string(R"("architectures":["LlamaForCausalLM"],"quantization_config":)") + k.q +
                                     "," + BASE_CFG, &c, &m), BITNET_ERR_UNSUPPORTED) << k.q;
        EXPECT_NE(m.find(k.needle), std::string::npos) << m;
    }
}

TEST(HfConfig, ErrorsNameTheField) {
    bitnet_hf_config c;
    std::string m;
    EXPECT_EQ(load_cfg("unk", std::string(R"("architectures":["MambaForCausalLM"],)") + BASE_CFG, &c, &m),
              BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(m.find("MambaForCausalLM"), std::string::npos) << m;
    EXPECT_NE(m.find("LlamaForCausalLM"), std::string::npos) << m; // lists the known ones
    EXPECT_EQ(load_cfg("act", std::string(R"("architectures":["BitNetForCausalLM"],"hidden_act":"gelu",)") + BASE_CFG,
                       &c, &m), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(m.find("gelu"), std::string::npos) << m;
    EXPECT_EQ(load_cfg("gqa", std::string(R"("architectures":["LlamaForCausalLM"],"num_key_value_heads":3,)") + BASE_CFG,
                       &c, &m), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("num_key_value_heads 3"), std::string::npos) << m;
    EXPECT_EQ(load_cfg("miss", R"("architectures":["LlamaForCausalLM"],"hidden_size":256)", &c, &m), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("intermediate_size"), std::string::npos) << m;
    EXPECT_EQ(load_cfg("type", std::string(R"("architectures":["LlamaForCausalLM"],"rope_theta":"big",)") + BASE_CFG, &c,
                       &m), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("rope_theta"), std::string::npos) << m;
    EXPECT_EQ(load_cfg("rope", std::string(R"("architectures":["LlamaForCausalLM"],"rope_scaling":{"rope_type":"llama3",
        "factor":8.0},)") + BASE_CFG, &c, &m), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(m.find("llama3"), std::string::npos) << m;
    ASSERT_EQ(load_cfg("lin", std::string(R"("architectures":["LlamaForCausalLM"],"rope_scaling":{"type":"linear",
        "factor":2.0},)") + BASE_CFG, &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.rope_scale, 2.0f);
    EXPECT_EQ(load_cfg("json", R"("architectures":["LlamaForCausalLM"],,)", &c, &m), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("byte"), std::string::npos) << m;
    bitnet_error err = {{0}};
    std::string d = new_dir("nocfg");
    EXPECT_EQ(bitnet_hf_config_load(d.c_str(), &c, &err), BITNET_ERR_IO);
    EXPECT_NE(std::string(err.msg).find("config.json"), std::string::npos) << err.msg;
}

// ---------------------------------------------------------------------------------------------
// The embedding models: model_type qwen3 / gemma3_text, pooling, Gemma 3's sliding-window fields
// ---------------------------------------------------------------------------------------------

// BitNet-embedding-0.6B's config.json fields (docs/EMBEDDINGS.md: head_dim 128 != 1024 / 16)
const char *QWEN3_CFG = R"("model_type":"qwen3","architectures":["Qwen3Model"],"hidden_size":1024,
    "intermediate_size":3072,"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,
    "vocab_size":151936,"hidden_act":"silu","rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":true,
    "attention_bias":false,"use_sliding_window":false,"sliding_window":null)";
// BitNet-embedding-270M's (Gemma 3 270M: 18 layers, every 6th global, window 512, local base 1e4)
const char *GEMMA3_CFG = R"("model_type":"gemma3_text","hidden_size":640,"intermediate_size":2048,
    "num_hidden_layers":18,"num_attention_heads":4,"num_key_value_heads":1,"head_dim":256,"vocab_size":262144,
    "hidden_activation":"gelu_pytorch_tanh","query_pre_attn_scalar":256,"rope_theta":1000000.0,
    "rope_local_base_freq":10000.0,"sliding_window":512,"max_position_embeddings":32768,"layer_types":[
    "sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
    "sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention",
    "sliding_attention","sliding_attention","sliding_attention","sliding_attention","sliding_attention","full_attention"])";

TEST(HfConfig, EmbeddingModelsByModelType) {
    bitnet_hf_config c;
    std::string m;
    ASSERT_EQ(load_cfg("qwen3", QWEN3_CFG, &c, &m), BITNET_OK) << m;
    EXPECT_STREQ(c.arch, "qwen3");
    EXPECT_STREQ(c.hf_arch, "Qwen3Model");
    EXPECT_TRUE(c.embedding);
    EXPECT_EQ(c.weights, BITNET_HF_LATENT); // absmean for i2_s; f32/f16 keep the weights as stored
    EXPECT_EQ(c.n_embd, 1024);
    EXPECT_EQ(c.n_ff, 3072);
    EXPECT_EQ(c.n_layer, 28);
    EXPECT_EQ(c.n_head, 16);
    EXPECT_EQ(c.n_head_kv, 8);
    EXPECT_EQ(c.n_embd_head, 128);
    EXPECT_EQ(c.n_vocab, 151936);
    EXPECT_EQ(c.n_ctx, 32768); // max_position_embeddings absent: bitnet.cpp's 32768
    EXPECT_EQ(c.rope_theta, 1e6f);
    EXPECT_EQ(c.rms_eps, 1e-6f);
    EXPECT_EQ(c.pooling_type, 1); // no modules.json: mean, as bitnet.cpp
    EXPECT_EQ(c.n_swa, 0);

    ASSERT_EQ(load_cfg("gemma3", GEMMA3_CFG, &c, &m), BITNET_OK) << m;
    EXPECT_STREQ(c.arch, "gemma3");
    EXPECT_STREQ(c.hf_arch, "gemma3_text"); // no architectures: the model_type names it
    EXPECT_EQ(c.n_embd_head, 256);
    EXPECT_EQ(c.n_head_kv, 1);
    EXPECT_EQ(c.n_swa, 512);
    EXPECT_EQ(c.swa_pattern, 6);
    EXPECT_EQ(c.rope_freq_base_swa, 10000.0f);
    EXPECT_EQ(c.rope_theta, 1e6f);

    // defaults: rope_theta of Gemma3TextConfig (1e6) / Qwen3Config (1e4), head_dim = hidden / heads
    ASSERT_EQ(load_cfg("g3min", R"("model_type":"gemma3_text",)" + std::string(BASE_CFG), &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.rope_theta, 1e6f);
    EXPECT_EQ(c.n_embd_head, 64);
    EXPECT_EQ(c.swa_pattern, 6); // Gemma3TextConfig's default
    EXPECT_EQ(c.rope_freq_base_swa, 10000.0f);
    ASSERT_EQ(load_cfg("q3min", R"("model_type":"qwen3",)" + std::string(BASE_CFG), &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.rope_theta, 1e4f);
    EXPECT_EQ(c.n_head_kv, 4);
}

TEST(HfConfig, Gemma3SlidingWindowPeriod) {
    bitnet_hf_config c;
    std::string m;
    const std::string base = R"("model_type":"gemma3_text","hidden_size":256,"intermediate_size":512,
        "num_attention_heads":4,"vocab_size":1000,"sliding_window":4,)";
    // an explicit sliding_window_pattern wins when layer_types agrees (2 local layers: 6 and 3 both fit)
    ASSERT_EQ(load_cfg("p1", base + R"("num_hidden_layers":2,"sliding_window_pattern":6,
        "layer_types":["sliding_attention","sliding_attention"])", &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.swa_pattern, 6);
    ASSERT_EQ(load_cfg("p2", base + R"("num_hidden_layers":4,"_sliding_window_pattern":2)", &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.swa_pattern, 2);
    ASSERT_EQ(load_cfg("p3", base + R"("num_hidden_layers":4,"layer_types":["sliding_attention","sliding_attention",
        "full_attention","sliding_attention"])", &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.swa_pattern, 3);
    ASSERT_EQ(load_cfg("p4", base + R"("num_hidden_layers":3,"layer_types":["full_attention","full_attention",
        "full_attention"])", &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.swa_pattern, 1);
    // no period p has exactly the layers l % p == p - 1 global: -1 (refused only when --gemma3-swa asks)
    ASSERT_EQ(load_cfg("p5", base + R"("num_hidden_layers":4,"layer_types":["full_attention","sliding_attention",
        "sliding_attention","full_attention"])", &c, &m), BITNET_OK) << m;
    EXPECT_EQ(c.swa_pattern, -1);
    EXPECT_EQ(load_cfg("p6", base + R"("num_hidden_layers":2,"layer_types":["sliding_attention"])", &c, &m),
              BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("layer_types"), std::string::npos) << m;
    EXPECT_EQ(load_cfg("p7", base + R"("num_hidden_layers":2,"layer_types":["sliding_attention","chunked"])", &c, &m),
              BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("layer_types[1]"), std::string::npos) << m;
}

TEST(HfConfig, EmbeddingModelRefusalsNameTheField) {
    bitnet_hf_config c;
    std::string m;
    struct {
        const char *fields, *needle;
        bitnet_status st;
    } bad[] = {
        {R"("model_type":"gemma3",)", "gemma3_text", BITNET_ERR_UNSUPPORTED}, // the multimodal model
        {R"("model_type":"qwen3_moe","architectures":["Qwen3MoeForCausalLM"],)", "qwen3_moe", BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"gemma2",)", "\"gemma2\"", BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"qwen3","hidden_act":"gelu",)", "hidden_act", BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"gemma3_text","hidden_activation":"gelu",)", "hidden_activation", BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"qwen3","rope_scaling":{"rope_type":"yarn","factor":4.0},)", "rope_scaling",
         BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"qwen3","attention_bias":true,)", "attention_bias", BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"qwen3","use_sliding_window":true,)", "use_sliding_window", BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"gemma3_text","query_pre_attn_scalar":128,"head_dim":256,)", "query_pre_attn_scalar",
         BITNET_ERR_UNSUPPORTED},
        {R"("model_type":"qwen3","num_key_value_heads":3,)", "num_key_value_heads 3", BITNET_ERR_FORMAT},
        {R"("model_type":"qwen3","head_dim":33,)", "odd", BITNET_ERR_FORMAT},
    };
    for (const auto &b : bad) {
        EXPECT_EQ(load_cfg("eb", std::string(b.fields) + BASE_CFG, &c, &m), b.st) << b.fields;
        EXPECT_NE(m.find(b.needle), std::string::npos) << b.fields << ": " << m;
        EXPECT_NE(m.find("config.json"), std::string::npos) << m;
    }
    // no head_dim and a hidden size the heads do not divide
    EXPECT_EQ(load_cfg("hd", R"("model_type":"qwen3","hidden_size":250,"intermediate_size":512,
        "num_hidden_layers":2,"num_attention_heads":4,"vocab_size":1000)", &c, &m), BITNET_ERR_FORMAT);
    EXPECT_NE(m.find("no head_dim"), std::string::npos) << m;
    // an unknown model_type without known architectures is the architecture error, which names both routes
    EXPECT_EQ(load_cfg("mt", R"("model_type":"mistral","architectures":["MistralForCausalLM"],)" + std::string(BASE_CFG),
                       &c, &m), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(m.find("MistralForCausalLM"), std::string::npos) << m;
    EXPECT_NE(m.find("gemma3_text"), std::string::npos) << m;
}

// modules.json + <path>/config.json as sentence-transformers writes them
int32_t pooling_of(const std::string &name, const char *modules, const char *pooling, bitnet_status want,
                   std::string *msg = nullptr) {
    std::string d = new_dir("pool_" + name);
    if (modules) write_text(d + "/modules.json", modules);
    if (pooling) {
        EXPECT_EQ(std::system(("mkdir -p '" + d + "/1_Pooling'").c_str()), 0);
        write_text(d + "/1_Pooling/config.json", pooling);
    }
    int32_t t = -7;
    bitnet_error err = {{0}};
    EXPECT_EQ(bitnet_hf_pooling_load(d.c_str(), &t, &err), want) << name << ": " << err.msg;
    if (msg) *msg = err.msg;
    return t;
}

TEST(HfConfig, PoolingFromSentenceTransformersFiles) {
    const char *mods = R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
        {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
        {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}])";
    EXPECT_EQ(pooling_of("last", mods, R"({"pooling_mode_cls_token":false,"pooling_mode_mean_tokens":false,
        "pooling_mode_max_tokens":false,"pooling_mode_lasttoken":true})", BITNET_OK), 3);
    EXPECT_EQ(pooling_of("cls", mods, R"({"pooling_mode_cls_token":true})", BITNET_OK), 2);
    EXPECT_EQ(pooling_of("mean", mods, R"({"pooling_mode_mean_tokens":true,"pooling_mode_lasttoken":false})",
                         BITNET_OK), 1);
    // bitnet.cpp's default, mean: no modules.json, no Pooling module, no pooling config, no mode set
    EXPECT_EQ(pooling_of("nomods", nullptr, nullptr, BITNET_OK), 1);
    EXPECT_EQ(pooling_of("nopool", R"([{"type":"sentence_transformers.models.Transformer","path":""}])", nullptr,
                         BITNET_OK), 1);
    EXPECT_EQ(pooling_of("nocfg", mods, nullptr, BITNET_OK), 1);
    EXPECT_EQ(pooling_of("none", mods, R"({"include_prompt":true})", BITNET_OK), 1);
    std::string m;
    pooling_of("max", mods, R"({"pooling_mode_max_tokens":true})", BITNET_ERR_UNSUPPORTED, &m);
    EXPECT_NE(m.find("pooling_mode_max_tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("1_Pooling/config.json"), std::string::npos) << m;
    pooling_of("two", mods, R"({"pooling_mode_cls_token":true,"pooling_mode_lasttoken":true})", BITNET_ERR_UNSUPPORTED,
               &m);
    EXPECT_NE(m.find("concatenate"), std::string::npos) << m;
    pooling_of("type", mods, R"({"pooling_mode_lasttoken":"yes"})", BITNET_ERR_FORMAT, &m);
    EXPECT_NE(m.find("pooling_mode_lasttoken"), std::string::npos) << m;
    pooling_of("json", "[{", nullptr, BITNET_ERR_FORMAT, &m);
    EXPECT_NE(m.find("modules.json"), std::string::npos) << m;
    pooling_of("entry", R"([{"path":"1_Pooling"}])", nullptr, BITNET_ERR_FORMAT, &m);
    EXPECT_NE(m.find("\"type\""), std::string::npos) << m;
    pooling_of("escape", R"([{"type":"Pooling","path":"../x"}])", nullptr, BITNET_ERR_FORMAT, &m);
    EXPECT_NE(m.find("../x"), std::string::npos) << m;
    // bitnet_hf_config_load reads it for the embedding models
    std::string d = new_dir("cfg_pool");
    write_text(d + "/config.json", std::string("{") + QWEN3_CFG + "}");
    write_text(d + "/modules.json", mods);
    EXPECT_EQ(std::system(("mkdir -p '" + d + "/1_Pooling'").c_str()), 0);
    write_text(d + "/1_Pooling/config.json", R"({"pooling_mode_lasttoken":true})");
    bitnet_hf_config c;
    bitnet_error err = {{0}};
    ASSERT_EQ(bitnet_hf_config_load(d.c_str(), &c, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(c.pooling_type, 3);
}

} // namespace
