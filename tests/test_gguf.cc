// test_gguf.cc — GGUF reader and writer: round trip of every value type and several tensor types,
// the bitnet.cpp-written tiny model files, a corruption matrix on hand-built files (every truncation
// of the header, patched length/type/shape/offset fields: each error must name the right thing and
// the byte offset), and writer failures that must leave no file behind.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "base/gguf.h"
#include "base/quants.h"
#include "test_util.h"

namespace {

std::string g_dir;  // per-process scratch directory

std::string tmp_path(const std::string &name) { return g_dir + "/" + name; }

void write_file(const std::string &p, const std::vector<uint8_t> &b) {
    FILE *f = std::fopen(p.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    if (!b.empty()) {
        ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), f), b.size());
    }
    std::fclose(f);
}

using bitnet_test::file_exists;
using bitnet_test::read_file;

::testing::Environment *const g_env =
    ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_gguf_", &g_dir));

// Opens `path`; expects failure with `want` and returns the message.
std::string open_fails(const std::string &path, bitnet_status want) {
    bitnet_gguf *g = reinterpret_cast<bitnet_gguf *>(0x1);
    bitnet_error err{};
    bitnet_status st = bitnet_gguf_open(path.c_str(), &g, &err);
    EXPECT_EQ(st, want) << err.msg;
    EXPECT_EQ(g, nullptr);
    if (st == BITNET_OK) bitnet_gguf_close(g);
    return err.msg;
}

// ---- A byte builder for hand-made GGUF files (independent of the writer under test) ------------
struct Builder {
    std::vector<uint8_t> b;
    std::map<std::string, size_t> mark;  // named field offsets
    void at(const std::string &m) { mark[m] = b.size(); }
    void raw(const void *p, size_t n) {
        const uint8_t *q = static_cast<const uint8_t *>(p);
        b.insert(b.end(), q, q + n);
    }
    void u8(uint8_t v) { raw(&v, 1); }
    void u32(uint32_t v) { raw(&v, 4); }
    void u64(uint64_t v) { raw(&v, 8); }
    void str(const std::string &s) {
        u64(s.size());
        raw(s.data(), s.size());
    }
    void header(uint32_t n_tensors, uint32_t n_kv, uint32_t version = 3) {
        raw("GGUF", 4);
        at("version");
        u32(version);
        at("n_tensors");
        u64(n_tensors);
        at("n_kv");
        u64(n_kv);
    }
    void tensor(const std::string &name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset,
                const std::string &m = "") {
        if (!m.empty()) at(m + "_rec");
        str(name);
        if (!m.empty()) at(m + "_ndims");
        u32((uint32_t)ne.size());
        for (size_t i = 0; i < ne.size(); i++) {
            if (!m.empty() && i == 0) at(m + "_ne0");
            u64(ne[i]);
        }
        if (!m.empty()) at(m + "_type");
        u32(type);
        if (!m.empty()) at(m + "_off");
        u64(offset);
    }
    void pad(size_t a = 32) {
        while (b.size() % a) u8(0);
    }
    void patch32(const std::string &m, uint32_t v) { std::memcpy(&b[mark.at(m)], &v, 4); }
    void patch64(const std::string &m, uint64_t v) { std::memcpy(&b[mark.at(m)], &v, 8); }
};

// The base file of the corruption matrix: 4 keys (string, u32, string array, alignment) and two
// tensors (F32 [32, 4] = 512 bytes at 0, F16 [8] = 16 bytes at 512).
Builder base_file() {
    Builder B;
    B.header(2, 5);
    B.at("k0_rec");
    B.at("k0_len");
    B.str("general.architecture");
    B.u32(BITNET_GGUF_STRING);
    B.at("k0_val");
    B.str("bitnet");
    B.at("k1_rec");
    B.str("test.u32");
    B.at("k1_type");
    B.u32(BITNET_GGUF_UINT32);
    B.u32(7);
    B.at("k2_rec");
    B.str("tokenizer.ggml.tokens");
    B.u32(BITNET_GGUF_ARRAY);
    B.at("k2_elem_type");
    B.u32(BITNET_GGUF_STRING);
    B.at("k2_n");
    B.u64(3);
    B.str("a");
    B.at("k2_s1");
    B.str("bc");
    B.str("def");
    B.at("k3_rec");
    B.str("general.alignment");
    B.at("k3_type");
    B.u32(BITNET_GGUF_UINT32);
    B.at("k3_val");
    B.u32(32);
    B.at("k4_rec");
    B.str("test.flag");
    B.u32(BITNET_GGUF_BOOL);
    B.at("k4_val");
    B.u8(1);
    B.tensor("blk.0.attn_q.weight", {32, 4}, BITNET_TYPE_F32, 0, "t0");
    B.tensor("w2", {8}, BITNET_TYPE_F16, 512, "t1");
    B.at("header_end");
    B.pad();
    B.at("data");
    for (int i = 0; i < 512 + 16; i++) B.u8((uint8_t)(i * 7));
    return B;
}

// Writes the builder's bytes, opens, expects `want`; returns the message (which must name the file).
std::string open_bytes_fails(const Builder &B, bitnet_status want, const std::string &name = "bad.gguf") {
    const std::string p = tmp_path(name);
    write_file(p, B.b);
    std::string msg = open_fails(p, want);
    EXPECT_NE(msg.find(p), std::string::npos) << "message does not name the file: " << msg;
    return msg;
}

#define EXPECT_HAS(msg, sub) EXPECT_NE((msg).find(sub), std::string::npos) << "'" << (msg) << "' lacks '" << (sub) << "'"

std::string at_byte(size_t off) { return "at byte " + std::to_string(off) + ")"; }

}  // namespace

// ---- Hand-built file: the reader's view ------------------------------------------------------------

TEST(GgufRead, HandBuiltBaseFile) {
    Builder B = base_file();
    const std::string p = tmp_path("base.gguf");
    write_file(p, B.b);
    bitnet_gguf *g = nullptr;
    bitnet_error err{};
    ASSERT_EQ(bitnet_gguf_open(p.c_str(), &g, &err), BITNET_OK) << err.msg;
    EXPECT_STREQ(bitnet_gguf_path(g), p.c_str());
    EXPECT_EQ(bitnet_gguf_version(g), 3u);
    EXPECT_EQ(bitnet_gguf_alignment(g), 32u);
    EXPECT_EQ(bitnet_gguf_file_size(g), B.b.size());
    EXPECT_EQ(bitnet_gguf_data_offset(g), B.mark["data"]);
    ASSERT_EQ(bitnet_gguf_n_kv(g), 5);
    EXPECT_STREQ(bitnet_gguf_kv_key(g, 0), "general.architecture");
    EXPECT_STREQ(bitnet_gguf_kv_key(g, 2), "tokenizer.ggml.tokens");
    EXPECT_EQ(bitnet_gguf_kv_key(g, 5), nullptr);
    EXPECT_EQ(bitnet_gguf_kv_type(g, 1), BITNET_GGUF_UINT32);
    EXPECT_EQ(bitnet_gguf_find_kv(g, "test.u32"), 1);
    EXPECT_EQ(bitnet_gguf_find_kv(g, "test.u3"), -1);
    const char *s;
    size_t n;
    ASSERT_EQ(bitnet_gguf_get_str(g, "general.architecture", &s, &n, &err), BITNET_OK);
    EXPECT_EQ(std::string(s, n), "bitnet");
    const int64_t kt = bitnet_gguf_find_kv(g, "tokenizer.ggml.tokens");
    const char *want[] = {"a", "bc", "def"};
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ(bitnet_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &s, &n, &err), BITNET_OK);
        EXPECT_EQ(std::string(s, n), want[i]);
        s = bitnet_gguf_kv_arr_str(g, kt, i, &n);
        ASSERT_NE(s, nullptr);
        EXPECT_EQ(std::string(s, n), want[i]);
    }
    EXPECT_EQ(bitnet_gguf_kv_arr_str(g, kt, 3, &n), nullptr);
    EXPECT_EQ(bitnet_gguf_kv_arr_str(g, 1, 0, &n), nullptr);  // not an array
    EXPECT_EQ(bitnet_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 3, &s, &n, &err), BITNET_ERR_INVALID_ARG);
    bool flag = false;
    ASSERT_EQ(bitnet_gguf_get_bool(g, "test.flag", &flag, &err), BITNET_OK);
    EXPECT_TRUE(flag);
    ASSERT_EQ(bitnet_gguf_n_tensors(g), 2);
    const bitnet_gguf_tensor_info *t = bitnet_gguf_find_tensor(g, "w2");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->n_dims, 1);
    EXPECT_EQ(t->ne[0], 8);
    EXPECT_EQ(t->ne[1], 1);
    EXPECT_EQ(t->ne[3], 1);
    EXPECT_EQ(t->type, BITNET_TYPE_F16);
    EXPECT_EQ(t->offset, 512u);
    EXPECT_EQ(t->nbytes, 16u);
    EXPECT_EQ(std::memcmp(t->data, &B.b[B.mark["data"] + 512], 16), 0);
    EXPECT_EQ(bitnet_gguf_tensor(g, 0)->nbytes, 512u);
    EXPECT_EQ(bitnet_gguf_tensor(g, 2), nullptr);
    EXPECT_EQ(bitnet_gguf_find_tensor(g, "w3"), nullptr);
    bitnet_gguf_close(g);
    bitnet_gguf_close(nullptr);

    // version 2 has the same layout and is accepted
    B.patch32("version", 2);
    write_file(p, B.b);
    ASSERT_EQ(bitnet_gguf_open(p.c_str(), &g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_version(g), 2u);
    bitnet_gguf_close(g);
}

// ---- Corruption matrix -----------------------------------------------------------------------------

TEST(GgufCorrupt, EveryTruncationFailsCleanly) {
    Builder B = base_file();
    const size_t data_end = B.b.size();  // the last tensor ends at EOF
    const std::string p = tmp_path("trunc.gguf");
    // every byte of the header region, plus a few inside the data
    std::vector<size_t> cuts;
    for (size_t i = 0; i <= B.mark["data"] + 40; i++) cuts.push_back(i);
    for (size_t i : {data_end - 300, data_end - 17, data_end - 1}) cuts.push_back(i);
    for (size_t cut : cuts) {
        std::vector<uint8_t> t(B.b.begin(), B.b.begin() + cut);
        write_file(p, t);
        bitnet_gguf *g = nullptr;
        bitnet_error err{};
        bitnet_status st = bitnet_gguf_open(p.c_str(), &g, &err);
        ASSERT_EQ(st, BITNET_ERR_FORMAT) << "cut at " << cut << ": " << err.msg;
        ASSERT_EQ(g, nullptr);
        ASSERT_NE(std::string(err.msg).find(p), std::string::npos) << err.msg;
    }
}

TEST(GgufCorrupt, RandomByteFlipsNeverCrash) {
    // Flip single bytes all over the header (deterministic); any outcome but a crash is fine, and a
    // success must still describe tensors that lie inside the file.
    Builder B = base_file();
    const std::string p = tmp_path("flip.gguf");
    uint64_t st = 88172645463325252ull;
    for (int rep = 0; rep < 600; rep++) {
        std::vector<uint8_t> t = B.b;
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        const size_t pos = (size_t)(st % B.mark["data"]);
        t[pos] ^= (uint8_t)(1u << (st >> 60 & 7));
        write_file(p, t);
        bitnet_gguf *g = nullptr;
        bitnet_error err{};
        const bitnet_status s = bitnet_gguf_open(p.c_str(), &g, &err);
        if (s == BITNET_OK) {
            for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
                const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
                const uint8_t *d = static_cast<const uint8_t *>(ti->data);
                volatile uint8_t sink = d[0] ^ d[ti->nbytes - 1];  // ASan checks these are mapped
                (void)sink;
            }
            bitnet_gguf_close(g);
        } else {
            ASSERT_TRUE(s == BITNET_ERR_FORMAT || s == BITNET_ERR_UNSUPPORTED) << s << " " << err.msg;
            ASSERT_GT(std::strlen(err.msg), 0u);
        }
    }
}

TEST(GgufCorrupt, HeaderFields) {
    {
        Builder B = base_file();
        B.b[0] = 'X';
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "bad magic");
        EXPECT_HAS(m, at_byte(0));
    }
    {
        Builder B = base_file();
        B.patch32("version", 4);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "version 4");
        B.patch32("version", 1);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_UNSUPPORTED), "version 1");
        B.patch32("version", 0x03000000u);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "big-endian");
    }
    {
        Builder B = base_file();
        B.patch64("n_tensors", 1ull << 40);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "n_tensors = 1099511627776");
        EXPECT_HAS(m, at_byte(8));
        B = base_file();
        B.patch64("n_kv", ~0ull);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "n_kv = 18446744073709551615");
        // more kvs than there are: the reader runs into the tensor infos and fails on something
        B = base_file();
        B.patch64("n_kv", 6);
        open_bytes_fails(B, BITNET_ERR_FORMAT);
    }
    {
        std::vector<uint8_t> empty;
        write_file(tmp_path("empty.gguf"), empty);
        EXPECT_HAS(open_fails(tmp_path("empty.gguf"), BITNET_ERR_FORMAT), "too small");
        EXPECT_HAS(open_fails(tmp_path("does-not-exist.gguf"), BITNET_ERR_IO), "does-not-exist.gguf");
        EXPECT_HAS(open_fails(g_dir, BITNET_ERR_IO), "not a regular file");
    }
}

TEST(GgufCorrupt, KeyAndValueFields) {
    {
        Builder B = base_file();
        B.patch64("k0_len", 1ull << 62);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "key #0: string length 4611686018427387904 runs past the end of the file");
        EXPECT_HAS(m, at_byte(B.mark["k0_len"]));
    }
    {
        Builder B = base_file();
        B.patch64("k0_len", 0);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "key #0: length 0");
    }
    {
        Builder B = base_file();
        B.patch64("k0_val", 1000000);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "general.architecture: string length 1000000 runs past the end");
        EXPECT_HAS(m, at_byte(B.mark["k0_val"]));
    }
    {
        Builder B = base_file();
        B.patch32("k1_type", 13);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "key 'test.u32': unknown value type 13");
        EXPECT_HAS(m, at_byte(B.mark["k1_type"]));
    }
    {
        Builder B = base_file();
        B.patch32("k2_elem_type", BITNET_GGUF_ARRAY);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_UNSUPPORTED), "key 'tokenizer.ggml.tokens': arrays of arrays");
        B.patch32("k2_elem_type", 77);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "unknown array element type 77");
    }
    {
        Builder B = base_file();
        B.patch64("k2_n", 1ull << 61);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "key 'tokenizer.ggml.tokens': array of 2305843009213693952 strings cannot fit");
        EXPECT_HAS(m, at_byte(B.mark["k2_n"]));
        B = base_file();
        B.patch32("k2_elem_type", BITNET_GGUF_UINT64);
        B.patch64("k2_n", 1ull << 61);  // 2^64 bytes: must not overflow
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "runs past the end of the file");
    }
    {
        Builder B = base_file();
        B.patch64("k2_s1", ~0ull - 3);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "key 'tokenizer.ggml.tokens': string element 1: length 18446744073709551612 runs past");
        EXPECT_HAS(m, at_byte(B.mark["k2_s1"]));
    }
    {
        Builder B = base_file();
        B.patch32("k3_val", 24);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "'general.alignment' = 24 is not a power of two");
        EXPECT_HAS(m, at_byte(B.mark["k3_val"]));
        B.patch32("k3_val", 0);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "'general.alignment' = 0");
        B.patch32("k3_val", 32);
        B.patch32("k3_type", BITNET_GGUF_FLOAT32);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "'general.alignment' must be a non-negative integer");
    }
    {
        Builder B = base_file();
        B.b[B.mark["k4_val"]] = 2;
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "key 'test.flag': bool value 2");
    }
    {
        Builder B = base_file();
        B.b[B.mark["k1_rec"] + 8 + 2] = 0;  // "te\0t.u32"
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "key #1 contains a NUL byte");
    }
    {
        // duplicate key: rename "test.u32" to "test.flag"-length... build one directly
        Builder B;
        B.header(0, 2);
        B.str("a.b");
        B.u32(BITNET_GGUF_UINT8);
        B.u8(1);
        B.at("dup");
        B.str("a.b");
        B.u32(BITNET_GGUF_UINT8);
        B.u8(2);
        B.u64(0);  // room so the kv counts are plausible
        B.u64(0);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "duplicate key 'a.b'");
        EXPECT_HAS(m, at_byte(B.mark["dup"]));
    }
}

TEST(GgufCorrupt, TensorInfoFields) {
    const std::string t0 = "tensor blk.0.attn_q.weight: ";
    {
        Builder B = base_file();
        B.patch32("t0_ndims", 5);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, t0 + "n_dims = 5 (must be 1..4)");
        EXPECT_HAS(m, at_byte(B.mark["t0_ndims"]));
        B.patch32("t0_ndims", 0);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), t0 + "n_dims = 0");
    }
    {
        Builder B = base_file();
        B.patch64("t0_ne0", 0);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, t0 + "ne[0] = 0");
        EXPECT_HAS(m, at_byte(B.mark["t0_ne0"]));
        B.patch64("t0_ne0", ~0ull);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), t0 + "ne[0] = -1");
    }
    {
        Builder B = base_file();
        B.patch64("t0_ne0", 1ull << 40);
        std::memcpy(&B.b[B.mark["t0_ne0"] + 8], "\0\0\0\0\0\1\0\0", 8);  // ne[1] = 2^40
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, t0 + "element count overflows at ne[1]");
        // 2^30 * 2^29 floats do not overflow, but their 2^61 bytes are far past the end of the file
        B.patch64("t0_ne0", 1ull << 30);
        std::memcpy(&B.b[B.mark["t0_ne0"] + 8], "\0\0\0\x20\0\0\0\0", 8);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "runs past the end of the file");
    }
    {
        Builder B = base_file();
        B.patch32("t0_type", 41);
        std::string m = open_bytes_fails(B, BITNET_ERR_UNSUPPORTED);
        EXPECT_HAS(m, "blk.0.attn_q.weight: unknown tensor type id 41");
        EXPECT_HAS(m, at_byte(B.mark["t0_type"]));
        B.patch32("t0_type", 0xffffffffu);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_UNSUPPORTED), "unknown tensor type id 4294967295");
        B.patch32("t0_type", BITNET_TYPE_I8_S);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_UNSUPPORTED), "I8_S");
        B.patch32("t0_type", BITNET_TYPE_Q8_0);  // ne[0] = 32 is fine for Q8_0: 4 blocks of 34 bytes
        bitnet_gguf *g = nullptr;
        bitnet_error err{};
        write_file(tmp_path("q8.gguf"), B.b);
        ASSERT_EQ(bitnet_gguf_open(tmp_path("q8.gguf").c_str(), &g, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(bitnet_gguf_tensor(g, 0)->nbytes, 4u * 34u);
        bitnet_gguf_close(g);
        B.patch64("t0_ne0", 48);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), t0 + "Q8_0 tensor: ne[0] = 48 is not a multiple");
    }
    {
        Builder B = base_file();
        B.patch64("t1_off", 520);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "tensor w2: offset 520 is not a multiple of the alignment 32");
        EXPECT_HAS(m, at_byte(B.mark["t1_rec"]));
    }
    {
        Builder B = base_file();
        B.patch64("t1_off", 4096);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "tensor w2: data at offset 4096 + 16 bytes");
        B.patch64("t1_off", ~0ull - 31);  // aligned, huge: no overflow in the end computation
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "runs past the end of the file");
    }
    {
        Builder B = base_file();
        B.patch64("t1_off", 480);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "tensor blk.0.attn_q.weight (offset 0, 512 bytes) overlaps tensor w2 (offset 480)");
        B.patch64("t1_off", 0);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "overlaps");
    }
    {
        Builder B;  // duplicate tensor names
        B.header(2, 0);
        B.tensor("x", {8}, BITNET_TYPE_F32, 0);
        B.at("dup");
        B.tensor("x", {8}, BITNET_TYPE_F32, 32);
        B.pad();
        for (int i = 0; i < 64; i++) B.u8(0);
        std::string m = open_bytes_fails(B, BITNET_ERR_FORMAT);
        EXPECT_HAS(m, "duplicate tensor name 'x'");
        EXPECT_HAS(m, at_byte(B.mark["dup"]));
    }
    {
        Builder B;  // name of 64 bytes (spec limit 63)
        B.header(1, 0);
        B.tensor(std::string(64, 'n'), {8}, BITNET_TYPE_F32, 0);
        B.pad();
        for (int i = 0; i < 64; i++) B.u8(0);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "name of 64 bytes");
    }
    {
        // alignment 64 is honoured: data starts at the next multiple of 64, offsets must be multiples of 64
        Builder B;
        B.header(2, 1);
        B.str("general.alignment");
        B.u32(BITNET_GGUF_UINT32);
        B.u32(64);
        B.tensor("a", {8}, BITNET_TYPE_F32, 0);
        B.at("t1_off_pos");
        B.tensor("b", {8}, BITNET_TYPE_F32, 64, "b");
        B.pad(64);
        const size_t data = B.b.size();
        for (int i = 0; i < 128; i++) B.u8((uint8_t)i);
        bitnet_gguf *g = nullptr;
        bitnet_error err{};
        write_file(tmp_path("a64.gguf"), B.b);
        ASSERT_EQ(bitnet_gguf_open(tmp_path("a64.gguf").c_str(), &g, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(bitnet_gguf_alignment(g), 64u);
        EXPECT_EQ(bitnet_gguf_data_offset(g), data);
        EXPECT_EQ(static_cast<const uint8_t *>(bitnet_gguf_find_tensor(g, "b")->data)[0], 64);
        bitnet_gguf_close(g);
        B.patch64("b_off", 32);
        EXPECT_HAS(open_bytes_fails(B, BITNET_ERR_FORMAT), "offset 32 is not a multiple of the alignment 64");
    }
}

// ---- Writer round trip ------------------------------------------------------------------------------

namespace {
std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        v[i] = (uint8_t)(seed >> 16);
    }
    return v;
}
}  // namespace

TEST(GgufWrite, RoundTripAllValueTypesAndTensors) {
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    ASSERT_NE(w, nullptr);
    const uint8_t u8 = 250;
    const int8_t i8 = -100;
    const uint16_t u16 = 65000;
    const int16_t i16 = -32000;
    const uint64_t u64 = 0xfedcba9876543210ull;
    const int64_t i64 = INT64_MIN;
    const double f64 = 3.141592653589793;
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.u8", BITNET_GGUF_UINT8, &u8), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.i8", BITNET_GGUF_INT8, &i8), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.u16", BITNET_GGUF_UINT16, &u16), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.i16", BITNET_GGUF_INT16, &i16), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_u32(w, "v.u32", 4000000000u), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_i32(w, "v.i32", -2000000000), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_f32(w, "v.f32", 1e-5f), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_bool(w, "v.bool", true), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_str(w, "v.str", "héllo ▁world"), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_str(w, "v.empty", ""), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.u64", BITNET_GGUF_UINT64, &u64), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.i64", BITNET_GGUF_INT64, &i64), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.f64", BITNET_GGUF_FLOAT64, &f64), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_u32(w, "v.replaced", 1), BITNET_OK);
    const float fa[3] = {0.5f, -1.0f, 1e30f};
    const int32_t ia[4] = {1, -2, 3, -4};
    const uint8_t ba[3] = {1, 0, 1};
    const uint16_t ha[2] = {7, 65535};
    const double da[2] = {-0.0, 1e300};
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.f32", BITNET_GGUF_FLOAT32, fa, 3), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.i32", BITNET_GGUF_INT32, ia, 4), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.bool", BITNET_GGUF_BOOL, ba, 3), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.u16", BITNET_GGUF_UINT16, ha, 2), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.f64", BITNET_GGUF_FLOAT64, da, 2), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.empty", BITNET_GGUF_INT8, nullptr, 0), BITNET_OK);
    const char *strs[] = {"<unk>", "", "▁the", "\xff\xfe raw bytes"};
    EXPECT_EQ(bitnet_gguf_set_arr_str(w, "a.str", strs, 4), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_str(w, "v.replaced", "now a string"), BITNET_OK);  // replaces, keeps position

    struct T {
        const char *name;
        int type;
        std::vector<int64_t> ne;
        size_t nbytes;
    };
    const std::vector<T> ts = {
        {"f32", BITNET_TYPE_F32, {5, 3}, 60},
        {"f16", BITNET_TYPE_F16, {32, 2, 1}, 128},
        {"q8", BITNET_TYPE_Q8_0, {64, 2}, 136},
        {"i2s", BITNET_TYPE_I2_S, {128, 4}, 160},
        {"tl2", BITNET_TYPE_TL2, {288, 32}, 2304},
        {"tl1", BITNET_TYPE_TL1, {64, 32}, 544},
        {"last.f32", BITNET_TYPE_F32, {7}, 28},
    };
    bitnet_error err{};
    for (const T &t : ts) {
        ASSERT_EQ(bitnet_gguf_add_tensor(w, t.name, t.type, (int)t.ne.size(), t.ne.data(), &err), BITNET_OK) << err.msg;
    }
    EXPECT_EQ(bitnet_gguf_add_tensor(w, "f16", BITNET_TYPE_F32, 1, ts[0].ne.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_HAS(std::string(err.msg), "duplicate tensor name 'f16'");
    const int64_t bad_ne[1] = {33};
    EXPECT_EQ(bitnet_gguf_add_tensor(w, "bad", BITNET_TYPE_Q8_0, 1, bad_ne, &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), "tensor bad: Q8_0 tensor: ne[0] = 33");
    EXPECT_EQ(bitnet_gguf_add_tensor(w, "bad", 41, 1, bad_ne, &err), BITNET_ERR_UNSUPPORTED);

    const std::string p = tmp_path("rt.gguf");
    ASSERT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_OK) << err.msg;
    EXPECT_TRUE(file_exists(p + ".tmp"));
    EXPECT_FALSE(file_exists(p));
    EXPECT_EQ(bitnet_gguf_set_u32(w, "late", 1), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(bitnet_gguf_add_tensor(w, "late", BITNET_TYPE_F32, 1, bad_ne, &err), BITNET_ERR_INVALID_ARG);
    std::vector<std::vector<uint8_t>> data;
    for (size_t i = 0; i < ts.size(); i++) {
        data.push_back(pattern(ts[i].nbytes, (uint32_t)i + 1));
        // stream in uneven chunks
        size_t o = 0, step = 1;
        while (o < data[i].size()) {
            size_t k = std::min(step, data[i].size() - o);
            ASSERT_EQ(bitnet_gguf_write_data(w, data[i].data() + o, k, &err), BITNET_OK) << err.msg;
            o += k;
            step = step * 3 + 1;
        }
    }
    ASSERT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    EXPECT_FALSE(file_exists(p + ".tmp"));
    EXPECT_EQ(bitnet_gguf_write_data(w, "x", 1, &err), BITNET_ERR_INVALID_ARG);
    bitnet_gguf_writer_free(w);

    bitnet_gguf *g = nullptr;
    ASSERT_EQ(bitnet_gguf_open(p.c_str(), &g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_version(g), 3u);
    EXPECT_EQ(bitnet_gguf_file_size(g) % 32, 0u);
    ASSERT_EQ(bitnet_gguf_n_kv(g), 21);
    EXPECT_STREQ(bitnet_gguf_kv_key(g, 0), "v.u8");
    EXPECT_STREQ(bitnet_gguf_kv_key(g, 13), "v.replaced");
    EXPECT_EQ(bitnet_gguf_kv_type(g, 13), BITNET_GGUF_STRING);
    EXPECT_EQ(bitnet_gguf_kv_type(g, 2), BITNET_GGUF_UINT16);
    int64_t iv;
    uint64_t uv;
    uint32_t u32v;
    float fv;
    double dv;
    bool bv;
    ASSERT_EQ(bitnet_gguf_get_i64(g, "v.u8", &iv, &err), BITNET_OK);
    EXPECT_EQ(iv, 250);
    ASSERT_EQ(bitnet_gguf_get_i64(g, "v.i8", &iv, &err), BITNET_OK);
    EXPECT_EQ(iv, -100);
    ASSERT_EQ(bitnet_gguf_get_u32(g, "v.u16", &u32v, &err), BITNET_OK);
    EXPECT_EQ(u32v, 65000u);
    ASSERT_EQ(bitnet_gguf_get_i64(g, "v.i16", &iv, &err), BITNET_OK);
    EXPECT_EQ(iv, -32000);
    ASSERT_EQ(bitnet_gguf_get_u32(g, "v.u32", &u32v, &err), BITNET_OK);
    EXPECT_EQ(u32v, 4000000000u);
    ASSERT_EQ(bitnet_gguf_get_i64(g, "v.i32", &iv, &err), BITNET_OK);
    EXPECT_EQ(iv, -2000000000);
    ASSERT_EQ(bitnet_gguf_get_f32(g, "v.f32", &fv, &err), BITNET_OK);
    EXPECT_EQ(fv, 1e-5f);
    ASSERT_EQ(bitnet_gguf_get_bool(g, "v.bool", &bv, &err), BITNET_OK);
    EXPECT_TRUE(bv);
    const char *s;
    size_t n;
    ASSERT_EQ(bitnet_gguf_get_str(g, "v.str", &s, &n, &err), BITNET_OK);
    EXPECT_EQ(std::string(s, n), "héllo ▁world");
    ASSERT_EQ(bitnet_gguf_get_str(g, "v.empty", &s, &n, &err), BITNET_OK);
    EXPECT_EQ(n, 0u);
    ASSERT_EQ(bitnet_gguf_get_u64(g, "v.u64", &uv, &err), BITNET_OK);
    EXPECT_EQ(uv, u64);
    ASSERT_EQ(bitnet_gguf_get_i64(g, "v.i64", &iv, &err), BITNET_OK);
    EXPECT_EQ(iv, INT64_MIN);
    ASSERT_EQ(bitnet_gguf_get_f64(g, "v.f64", &dv, &err), BITNET_OK);
    EXPECT_EQ(dv, f64);
    ASSERT_EQ(bitnet_gguf_get_f32(g, "v.f64", &fv, &err), BITNET_OK);
    EXPECT_EQ(fv, (float)f64);
    ASSERT_EQ(bitnet_gguf_get_str(g, "v.replaced", &s, &n, &err), BITNET_OK);
    EXPECT_EQ(std::string(s, n), "now a string");

    // getter errors name the file, the key and both types
    EXPECT_EQ(bitnet_gguf_get_u32(g, "v.i32", &u32v, &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), "key 'v.i32' = -2000000000 does not fit uint32");
    EXPECT_EQ(bitnet_gguf_get_u32(g, "v.u64", &u32v, &err), BITNET_ERR_FORMAT);
    EXPECT_EQ(bitnet_gguf_get_i64(g, "v.u64", &iv, &err), BITNET_ERR_FORMAT);
    EXPECT_EQ(bitnet_gguf_get_u64(g, "v.i8", &uv, &err), BITNET_ERR_FORMAT);
    EXPECT_EQ(bitnet_gguf_get_u32(g, "v.str", &u32v, &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), p + ": key 'v.str' has type string, expected uint32");
    EXPECT_EQ(bitnet_gguf_get_str(g, "a.str", &s, &n, &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), "key 'a.str' has type array, expected string");
    EXPECT_EQ(bitnet_gguf_get_f32(g, "v.u32", &fv, &err), BITNET_ERR_FORMAT);
    EXPECT_EQ(bitnet_gguf_get_bool(g, "v.u8", &bv, &err), BITNET_ERR_FORMAT);
    EXPECT_EQ(bitnet_gguf_get_u32(g, "no.such.key", &u32v, &err), BITNET_ERR_FORMAT);
    EXPECT_HAS(std::string(err.msg), p + ": missing key 'no.such.key'");
    EXPECT_EQ(bitnet_gguf_get_arr_str(g, "a.f32", 0, &s, &n, &err), BITNET_ERR_FORMAT);

    bitnet_gguf_type et;
    uint64_t cnt;
    const void *d;
    ASSERT_EQ(bitnet_gguf_get_arr(g, "a.f32", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_FLOAT32);
    ASSERT_EQ(cnt, 3u);
    EXPECT_EQ(std::memcmp(d, fa, sizeof fa), 0);
    ASSERT_EQ(bitnet_gguf_get_arr(g, "a.i32", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_INT32);
    EXPECT_EQ(std::memcmp(d, ia, sizeof ia), 0);
    ASSERT_EQ(bitnet_gguf_get_arr(g, "a.bool", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_BOOL);
    EXPECT_EQ(std::memcmp(d, ba, 3), 0);
    ASSERT_EQ(bitnet_gguf_get_arr(g, "a.u16", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(std::memcmp(d, ha, sizeof ha), 0);
    ASSERT_EQ(bitnet_gguf_get_arr(g, "a.f64", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(std::memcmp(d, da, sizeof da), 0);
    ASSERT_EQ(bitnet_gguf_get_arr(g, "a.empty", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_INT8);
    EXPECT_EQ(cnt, 0u);
    ASSERT_EQ(bitnet_gguf_get_arr(g, "a.str", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_STRING);
    ASSERT_EQ(cnt, 4u);
    for (int i = 0; i < 4; i++) {
        ASSERT_EQ(bitnet_gguf_get_arr_str(g, "a.str", i, &s, &n, &err), BITNET_OK);
        EXPECT_EQ(std::string(s, n), strs[i]);
    }

    ASSERT_EQ(bitnet_gguf_n_tensors(g), (int64_t)ts.size());
    uint64_t expect_off = 0;
    for (size_t i = 0; i < ts.size(); i++) {
        const bitnet_gguf_tensor_info *t = bitnet_gguf_tensor(g, (int64_t)i);
        EXPECT_STREQ(t->name, ts[i].name);
        EXPECT_EQ(t->type, ts[i].type);
        EXPECT_EQ(t->n_dims, (int)ts[i].ne.size());
        for (int dd = 0; dd < 4; dd++) EXPECT_EQ(t->ne[dd], dd < (int)ts[i].ne.size() ? ts[i].ne[dd] : 1);
        EXPECT_EQ(t->nbytes, ts[i].nbytes);
        EXPECT_EQ(t->offset, expect_off);
        EXPECT_EQ(t->offset % 32, 0u);
        EXPECT_EQ(std::memcmp(t->data, data[i].data(), t->nbytes), 0) << t->name;
        EXPECT_EQ(bitnet_gguf_find_tensor(g, ts[i].name), t);
        expect_off += (ts[i].nbytes + 31) / 32 * 32;
    }
    EXPECT_EQ(bitnet_gguf_file_size(g), bitnet_gguf_data_offset(g) + expect_off);
    bitnet_gguf_close(g);
}

// bitnet_gguf_copy_kv (how bitnet-convert --relayout keeps every key): a file of every value type — scalars,
// strings, numeric, bool and string arrays, empty ones — copied key by key into a new writer is the same file
// byte for byte, whether the source indexed its string arrays (bitnet_gguf_open) or walks them (memory image
// without the index).
TEST(GgufWrite, CopyKvRewritesEveryValueTypeByteForByte) {
    const std::string a_path = tmp_path("copy-kv-a.gguf");
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    ASSERT_NE(w, nullptr);
    const uint8_t u8 = 7;
    const int16_t i16 = -3;
    const int64_t i64 = INT64_MIN;
    const double f64 = -2.5;
    const int64_t ia[3] = {1, -1, INT64_MAX};
    const uint8_t ba[2] = {1, 0};
    const double da[2] = {0.25, -1e300};
    const char *strs[] = {"", "▁a", "\xff"};
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.u8", BITNET_GGUF_UINT8, &u8), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.i16", BITNET_GGUF_INT16, &i16), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_u32(w, "v.u32", 123456u), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_f32(w, "v.f32", 0.5f), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_bool(w, "v.bool", false), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.i64", BITNET_GGUF_INT64, &i64), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_scalar(w, "v.f64", BITNET_GGUF_FLOAT64, &f64), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_str(w, "v.str", "x86"), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_str(w, "v.empty", ""), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.i64", BITNET_GGUF_INT64, ia, 3), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.bool", BITNET_GGUF_BOOL, ba, 2), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.f64", BITNET_GGUF_FLOAT64, da, 2), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr(w, "a.empty", BITNET_GGUF_UINT32, nullptr, 0), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr_str(w, "a.str", strs, 3), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_arr_str(w, "a.nostr", strs, 0), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_set_str(w, "v.last", "end"), BITNET_OK);
    const int64_t ne[1] = {4};
    bitnet_error err{};
    ASSERT_EQ(bitnet_gguf_add_tensor(w, "t", BITNET_TYPE_F32, 1, ne, &err), BITNET_OK) << err.msg;
    const float t[4] = {1, 2, 3, 4};
    ASSERT_EQ(bitnet_gguf_write_begin(w, a_path.c_str(), &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_gguf_write_data(w, t, sizeof t, &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    const std::vector<uint8_t> a = read_file(a_path);
    ASSERT_FALSE(a.empty());

    for (int indexed = 1; indexed >= 0; indexed--) {
        SCOPED_TRACE(indexed ? "string arrays indexed" : "string arrays walked");
        bitnet_gguf *g = nullptr;
        if (indexed) ASSERT_EQ(bitnet_gguf_open(a_path.c_str(), &g, &err), BITNET_OK) << err.msg;
        else ASSERT_EQ(bitnet_gguf_open_memory(a.data(), a.size(), "a", BITNET_GGUF_NO_STRING_INDEX, &g, &err), BITNET_OK);
        w = bitnet_gguf_writer_new();
        for (int64_t i = 0; i < bitnet_gguf_n_kv(g); i++) EXPECT_EQ(bitnet_gguf_copy_kv(w, g, i), BITNET_OK);
        EXPECT_EQ(bitnet_gguf_copy_kv(w, g, bitnet_gguf_n_kv(g)), BITNET_ERR_INVALID_ARG);  // no such key
        const std::string b_path = tmp_path(indexed ? "copy-kv-b1.gguf" : "copy-kv-b0.gguf");
        ASSERT_EQ(bitnet_gguf_add_tensor(w, "t", BITNET_TYPE_F32, 1, ne, &err), BITNET_OK) << err.msg;
        // the out-of-range copy above left a sticky error: write_begin reports it, naming the call
        EXPECT_EQ(bitnet_gguf_write_begin(w, b_path.c_str(), &err), BITNET_ERR_INVALID_ARG);
        EXPECT_HAS(std::string(err.msg), "no such key in the source file");
        bitnet_gguf_writer_free(w);
        w = bitnet_gguf_writer_new();
        for (int64_t i = 0; i < bitnet_gguf_n_kv(g); i++) EXPECT_EQ(bitnet_gguf_copy_kv(w, g, i), BITNET_OK);
        ASSERT_EQ(bitnet_gguf_add_tensor(w, "t", BITNET_TYPE_F32, 1, ne, &err), BITNET_OK) << err.msg;
        ASSERT_EQ(bitnet_gguf_write_begin(w, b_path.c_str(), &err), BITNET_OK) << err.msg;
        ASSERT_EQ(bitnet_gguf_write_data(w, t, sizeof t, &err), BITNET_OK) << err.msg;
        ASSERT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
        bitnet_gguf_writer_free(w);
        bitnet_gguf_close(g);
        EXPECT_TRUE(read_file(b_path) == a);
    }
}

// bitnet_gguf_release drops mapped pages only: the data read afterwards is still the file's (read again from
// it), and ranges outside the mapping or of an image in memory are ignored.
TEST(GgufRead, ReleasedPagesReadBackTheFile) {
    const std::string path = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny/ggml-model-i2_s.gguf";
    const std::vector<uint8_t> bytes = read_file(path);
    bitnet_error err{};
    bitnet_gguf *g = nullptr;
    ASSERT_EQ(bitnet_gguf_open(path.c_str(), &g, &err), BITNET_OK) << err.msg;
    const bitnet_gguf_tensor_info *ti = bitnet_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    ASSERT_NE(ti, nullptr);
    bitnet_gguf_release(g, ti->data, ti->nbytes);
    bitnet_gguf_release(g, bytes.data(), bytes.size());  // not g's mapping: nothing happens
    bitnet_gguf_release(g, ti->data, 0);
    const size_t off = bitnet_gguf_data_offset(g) + ti->offset;
    EXPECT_EQ(std::memcmp(ti->data, bytes.data() + off, ti->nbytes), 0);
    bitnet_gguf_close(g);
    ASSERT_EQ(bitnet_gguf_open_memory(bytes.data(), bytes.size(), "mem", 0, &g, &err), BITNET_OK) << err.msg;
    ti = bitnet_gguf_find_tensor(g, "blk.1.ffn_down.weight");
    bitnet_gguf_release(g, ti->data, ti->nbytes);  // an image in memory is never dropped
    EXPECT_EQ(std::memcmp(ti->data, bytes.data() + off, ti->nbytes), 0);
    bitnet_gguf_close(g);
}

TEST(GgufWrite, BigVocabularyIsFast) {
    // a 2B-4T sized vocabulary (128256 strings) written and read back; find and index are O(1)
    const int N = 128256;
    std::vector<std::string> toks(N);
    std::vector<const char *> ptrs(N);
    for (int i = 0; i < N; i++) {
        toks[i] = "tok" + std::to_string(i * 7919 % 100003);
        ptrs[i] = toks[i].c_str();
    }
    std::vector<float> scores(N);
    for (int i = 0; i < N; i++) scores[i] = -(float)i;
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    ASSERT_EQ(bitnet_gguf_set_arr_str(w, "tokenizer.ggml.tokens", ptrs.data(), N), BITNET_OK);
    ASSERT_EQ(bitnet_gguf_set_arr(w, "tokenizer.ggml.scores", BITNET_GGUF_FLOAT32, scores.data(), N), BITNET_OK);
    bitnet_error err{};
    const std::string p = tmp_path("vocab.gguf");
    ASSERT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_OK) << err.msg;
    ASSERT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    bitnet_gguf *g = nullptr;
    ASSERT_EQ(bitnet_gguf_open(p.c_str(), &g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_n_tensors(g), 0);
    const int64_t k = bitnet_gguf_find_kv(g, "tokenizer.ggml.tokens");
    ASSERT_GE(k, 0);
    for (int i = 0; i < N; i++) {
        size_t n;
        const char *s = bitnet_gguf_kv_arr_str(g, k, (uint64_t)i, &n);
        ASSERT_NE(s, nullptr);
        ASSERT_EQ(std::string(s, n), toks[i]) << i;
    }
    bitnet_gguf_close(g);
}

// ---- Writer failures leave nothing behind --------------------------------------------------------

namespace {
bitnet_gguf_writer *two_tensor_writer() {
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    bitnet_error err{};
    const int64_t ne[1] = {8};
    bitnet_gguf_set_str(w, "general.architecture", "bitnet");
    EXPECT_EQ(bitnet_gguf_add_tensor(w, "a", BITNET_TYPE_F32, 1, ne, &err), BITNET_OK);
    EXPECT_EQ(bitnet_gguf_add_tensor(w, "b", BITNET_TYPE_F32, 1, ne, &err), BITNET_OK);
    return w;
}
}  // namespace

TEST(GgufWrite, FailuresLeaveNoFile) {
    bitnet_error err{};
    const float x[16] = {0};
    {
        // unwritable location (the parent is a regular file): works as root too
        const std::string parent = tmp_path("plainfile");
        write_file(parent, {1, 2, 3});
        const std::string p = parent + "/out.gguf";
        bitnet_gguf_writer *w = two_tensor_writer();
        EXPECT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_ERR_IO);
        EXPECT_HAS(std::string(err.msg), p + ".tmp: cannot create");
        EXPECT_EQ(bitnet_gguf_write_data(w, x, 32, &err), BITNET_ERR_INVALID_ARG);
        bitnet_gguf_writer_free(w);
        const std::string q = tmp_path("no/such/dir/out.gguf");
        w = two_tensor_writer();
        EXPECT_EQ(bitnet_gguf_write_begin(w, q.c_str(), &err), BITNET_ERR_IO);
        bitnet_gguf_writer_free(w);
        EXPECT_FALSE(file_exists(q));
        EXPECT_FALSE(file_exists(q + ".tmp"));
    }
    {
        // too many bytes for a tensor
        const std::string p = tmp_path("over.gguf");
        bitnet_gguf_writer *w = two_tensor_writer();
        ASSERT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_OK);
        ASSERT_EQ(bitnet_gguf_write_data(w, x, 20, &err), BITNET_OK);
        EXPECT_EQ(bitnet_gguf_write_data(w, x, 16, &err), BITNET_ERR_INVALID_ARG);
        EXPECT_HAS(std::string(err.msg), "tensor a: 16 bytes written at byte 20 of a 32-byte tensor");
        EXPECT_FALSE(file_exists(p + ".tmp"));
        EXPECT_EQ(bitnet_gguf_write_end(w, &err), BITNET_ERR_INVALID_ARG);
        bitnet_gguf_writer_free(w);
        EXPECT_FALSE(file_exists(p));
    }
    {
        // bytes after the last tensor
        const std::string p = tmp_path("after.gguf");
        bitnet_gguf_writer *w = two_tensor_writer();
        ASSERT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_OK);
        ASSERT_EQ(bitnet_gguf_write_data(w, x, 32, &err), BITNET_OK);
        ASSERT_EQ(bitnet_gguf_write_data(w, x, 32, &err), BITNET_OK);
        EXPECT_EQ(bitnet_gguf_write_data(w, x, 1, &err), BITNET_ERR_INVALID_ARG);
        EXPECT_HAS(std::string(err.msg), "after the last tensor");
        bitnet_gguf_writer_free(w);
        EXPECT_FALSE(file_exists(p));
        EXPECT_FALSE(file_exists(p + ".tmp"));
    }
    {
        // missing bytes at write_end; an existing file at the path survives untouched
        const std::string p = tmp_path("short.gguf");
        write_file(p, {9, 9, 9});
        bitnet_gguf_writer *w = two_tensor_writer();
        ASSERT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_OK);
        ASSERT_EQ(bitnet_gguf_write_data(w, x, 32, &err), BITNET_OK);
        EXPECT_EQ(bitnet_gguf_write_end(w, &err), BITNET_ERR_INVALID_ARG);
        EXPECT_HAS(std::string(err.msg), "tensor b has 0 of 32 bytes (tensor 2 of 2)");
        bitnet_gguf_writer_free(w);
        EXPECT_FALSE(file_exists(p + ".tmp"));
        EXPECT_EQ(read_file(p), (std::vector<uint8_t>{9, 9, 9}));
    }
    {
        // abort and free in the middle of a write
        const std::string p = tmp_path("abort.gguf");
        bitnet_gguf_writer *w = two_tensor_writer();
        ASSERT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_OK);
        ASSERT_EQ(bitnet_gguf_write_data(w, x, 8, &err), BITNET_OK);
        bitnet_gguf_write_abort(w);
        EXPECT_FALSE(file_exists(p + ".tmp"));
        bitnet_gguf_writer_free(w);
        w = two_tensor_writer();
        ASSERT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_OK);
        EXPECT_TRUE(file_exists(p + ".tmp"));
        bitnet_gguf_writer_free(w);
        EXPECT_FALSE(file_exists(p + ".tmp"));
        EXPECT_FALSE(file_exists(p));
    }
    {
        // a bad set_* call is reported by write_begin, which creates nothing
        const std::string p = tmp_path("sticky.gguf");
        bitnet_gguf_writer *w = two_tensor_writer();
        EXPECT_EQ(bitnet_gguf_set_str(w, "", "x"), BITNET_ERR_INVALID_ARG);
        EXPECT_EQ(bitnet_gguf_set_arr(w, "a.bad", BITNET_GGUF_STRING, "x", 1), BITNET_ERR_INVALID_ARG);
        EXPECT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_ERR_INVALID_ARG);
        EXPECT_HAS(std::string(err.msg), "key '': key must be 1..65535 bytes");  // the first failure
        bitnet_gguf_writer_free(w);
        w = two_tensor_writer();
        EXPECT_EQ(bitnet_gguf_set_arr(w, "a.bad", BITNET_GGUF_STRING, "x", 1), BITNET_ERR_INVALID_ARG);
        EXPECT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_ERR_INVALID_ARG);
        EXPECT_HAS(std::string(err.msg), "key 'a.bad': set_arr: element type must be numeric or bool");
        bitnet_gguf_writer_free(w);
        EXPECT_FALSE(file_exists(p));
        EXPECT_FALSE(file_exists(p + ".tmp"));
    }
    {
        // the writer's alignment is fixed at 32
        const std::string p = tmp_path("align.gguf");
        bitnet_gguf_writer *w = two_tensor_writer();
        EXPECT_EQ(bitnet_gguf_set_u32(w, "general.alignment", 64), BITNET_OK);
        EXPECT_EQ(bitnet_gguf_write_begin(w, p.c_str(), &err), BITNET_ERR_INVALID_ARG);
        EXPECT_HAS(std::string(err.msg), "general.alignment");
        bitnet_gguf_writer_free(w);
        EXPECT_FALSE(file_exists(p + ".tmp"));
    }
}

// ---- Files written by bitnet.cpp --------------------------------------------------------------------

TEST(GgufBitnetCpp, TinyI2S) {
    const std::string p = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny/ggml-model-i2_s.gguf";
    bitnet_gguf *g = nullptr;
    bitnet_error err{};
    ASSERT_EQ(bitnet_gguf_open(p.c_str(), &g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_version(g), 3u);
    EXPECT_EQ(bitnet_gguf_alignment(g), 32u);
    EXPECT_EQ(bitnet_gguf_file_size(g), 714944u);
    EXPECT_EQ(bitnet_gguf_data_offset(g), 13056u);
    EXPECT_EQ(bitnet_gguf_n_kv(g), 22);
    EXPECT_EQ(bitnet_gguf_n_tensors(g), 24);
    const char *s;
    size_t n;
    ASSERT_EQ(bitnet_gguf_get_str(g, "general.architecture", &s, &n, &err), BITNET_OK);
    EXPECT_EQ(std::string(s, n), "bitnet");
    ASSERT_EQ(bitnet_gguf_get_str(g, "tokenizer.ggml.model", &s, &n, &err), BITNET_OK);
    EXPECT_EQ(std::string(s, n), "llama");
    uint32_t u;
    ASSERT_EQ(bitnet_gguf_get_u32(g, "general.file_type", &u, &err), BITNET_OK);
    EXPECT_EQ(u, 40u);
    ASSERT_EQ(bitnet_gguf_get_u32(g, "bitnet.embedding_length", &u, &err), BITNET_OK);
    EXPECT_EQ(u, 256u);
    ASSERT_EQ(bitnet_gguf_get_u32(g, "bitnet.block_count", &u, &err), BITNET_OK);
    EXPECT_EQ(u, 2u);
    float f;
    ASSERT_EQ(bitnet_gguf_get_f32(g, "bitnet.attention.layer_norm_rms_epsilon", &f, &err), BITNET_OK);
    EXPECT_EQ(f, 1e-5f);
    ASSERT_EQ(bitnet_gguf_get_f32(g, "bitnet.rope.freq_base", &f, &err), BITNET_OK);
    EXPECT_EQ(f, 10000.0f);
    bitnet_gguf_type et;
    uint64_t cnt;
    const void *d;
    ASSERT_EQ(bitnet_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_STRING);
    EXPECT_EQ(cnt, 512u);
    ASSERT_EQ(bitnet_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 1, &s, &n, &err), BITNET_OK);
    EXPECT_EQ(std::string(s, n), "<s>");
    ASSERT_EQ(bitnet_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 3, &s, &n, &err), BITNET_OK);
    EXPECT_EQ(std::string(s, n), "<0x00>");
    ASSERT_EQ(bitnet_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &cnt, &d, &err), BITNET_OK);
    EXPECT_EQ(et, BITNET_GGUF_INT32);
    int32_t tt[3];
    std::memcpy(tt, d, sizeof tt);
    EXPECT_EQ(tt[0], 2);
    EXPECT_EQ(tt[1], 3);
    EXPECT_EQ(tt[2], 3);

    const bitnet_gguf_tensor_info *t = bitnet_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->n_dims, 2);
    EXPECT_EQ(t->ne[0], 768);
    EXPECT_EQ(t->ne[1], 256);
    EXPECT_EQ(t->type, 36);
    EXPECT_EQ(t->offset, 263168u);
    EXPECT_EQ(t->nbytes, 768u * 256u / 4u + 32u);
    t = bitnet_gguf_find_tensor(g, "token_embd.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, BITNET_TYPE_F16);
    EXPECT_EQ(t->ne[0], 256);
    EXPECT_EQ(t->ne[1], 512);
    EXPECT_EQ(t->offset, 0u);
    t = bitnet_gguf_find_tensor(g, "output_norm.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, BITNET_TYPE_F32);
    EXPECT_EQ(t->offset, 700864u);
    // the last tensor ends exactly at the end of the file
    EXPECT_EQ(static_cast<const uint8_t *>(t->data) + t->nbytes,
              static_cast<const uint8_t *>(bitnet_gguf_tensor(g, 0)->data) + 714944 - 13056);
    int n_i2s = 0;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) n_i2s += bitnet_gguf_tensor(g, i)->type == 36;
    EXPECT_EQ(n_i2s, 14);
    bitnet_gguf_close(g);
}

TEST(GgufBitnetCpp, TinyF32) {
    const std::string p = std::string(BITNET_TEST_DATA_DIR) + "/bitnetcpp-tiny/ggml-model-f32.gguf";
    bitnet_gguf *g = nullptr;
    bitnet_error err{};
    ASSERT_EQ(bitnet_gguf_open(p.c_str(), &g, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_gguf_n_kv(g), 21);
    EXPECT_EQ(bitnet_gguf_n_tensors(g), 24);
    uint32_t u;
    ASSERT_EQ(bitnet_gguf_get_u32(g, "general.file_type", &u, &err), BITNET_OK);
    EXPECT_EQ(u, 0u);
    EXPECT_EQ(bitnet_gguf_find_kv(g, "general.quantization_version"), -1);
    const bitnet_gguf_tensor_info *t = bitnet_gguf_find_tensor(g, "blk.0.ffn_down.weight");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, BITNET_TYPE_F32);
    EXPECT_EQ(t->offset, 525312u);
    EXPECT_EQ(t->nbytes, 768u * 256u * 4u);
    // ternary-valued weights: every value is 0 or ±(one scale)
    const float *w = static_cast<const float *>(t->data);
    float scale = 0;
    for (int64_t i = 0; i < 768 * 256; i++) {
        const float a = std::fabs(w[i]);
        if (a != 0 && scale == 0) scale = a;
        ASSERT_TRUE(a == 0 || a == scale) << i;
    }
    EXPECT_GT(scale, 0.0f);
    bitnet_gguf_close(g);
}
