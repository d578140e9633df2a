// test_util.h — helpers shared by the GoogleTest files (header-only, C++17): a per-process scratch
// directory that is removed after the last test, whole-file reads and existence checks, the
// dummy-model parameters of the bitnetcpp-tiny layout, a Q6_K decoder and an I2_S packer of the tests' own
// (with a GGUF copier that uses it). Everything is `inline` in namespace
// bitnet_test, so a test binary links only the libraries of the helpers it calls (tiny_layout_params
// needs bitnet_dummy).
#ifndef BITNET_TEST_UTIL_H
#define BITNET_TEST_UTIL_H

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "convert/dummy_model.h"
#include "base/gguf.h"
#include "base/quants.h"
#include "kernels/lut/pack.h"

namespace bitnet_test {

// GoogleTest environment owning a scratch directory: SetUp creates a fresh one,
// ::testing::TempDir() + prefix + 6 random characters (mkdtemp), and stores its path in *dir;
// TearDown removes it with everything in it (a failure to do so is reported on stderr). Register it
// once per test binary, at namespace scope:
//   std::string g_dir;
//   ::testing::Environment *const g_env =
//       ::testing::AddGlobalTestEnvironment(new bitnet_test::TempDirEnv("bitnet_x_", &g_dir));
class TempDirEnv : public ::testing::Environment {
  public:
    TempDirEnv(const char *prefix, std::string *dir) : prefix_(prefix), dir_(dir) {}
    void SetUp() override {
        std::string t = ::testing::TempDir() + prefix_ + "XXXXXX";
        std::vector<char> buf(t.begin(), t.end());
        buf.push_back(0);
        ASSERT_NE(mkdtemp(buf.data()), nullptr);
        *dir_ = buf.data();
    }
    void TearDown() override {
        std::string cmd = "rm -rf '" + *dir_ + "'";
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir_->c_str());
    }

  private:
    std::string prefix_;
    std::string *dir_;
};

// The bytes of the file at `path`; empty when it cannot be opened.
inline std::vector<uint8_t> read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Whether anything (file, directory, ...) exists at `path`.
inline bool file_exists(const std::string &path) {
    struct stat sb;
    return stat(path.c_str(), &sb) == 0;
}

// Dummy-model parameters of the layout of the bitnet.cpp-written case file tests/data/bitnetcpp-tiny
// (configs/bitnetcpp-tiny.yaml): hidden 256, FFN 768, 2 layers, 4 heads (4 KV heads), context 512,
// built-in vocabulary of 512 tokens; the other fields keep bitnet_dummy_params_init's defaults.
inline bitnet_dummy_params tiny_layout_params(bitnet_dummy_outtype outtype, uint64_t seed) {
    bitnet_dummy_params p;
    bitnet_dummy_params_init(&p);
    p.n_embd = 256;
    p.n_ff = 768;
    p.n_layer = 2;
    p.n_head = 4;
    p.n_head_kv = 4;
    p.n_ctx = 512;
    p.n_vocab = 512;
    p.outtype = outtype;
    p.seed = seed;
    return p;
}

// Code (0..63) and sub-scale of value i (0..255) of a Q6_K block, written from the layout in quants.h and
// independent of the runtime's decoder (src/base/types.c): group g = i / 16, half h = i / 128, quarter-row
// r = (i % 128) / 32, l = i % 32 → low 4 bits in ql[64h + l + 32·(r & 1)] (high nibble for r >= 2),
// high 2 bits in bits 2r..2r+1 of qh[32h + l].
inline void q6k_code_scale(const bitnet_block_q6_k &b, int i, int *q, int *sc) {
    const int h = i / 128, r = (i % 128) / 32, l = i % 32;
    const uint8_t lo = b.ql[64 * h + l + 32 * (r & 1)];
    const int low = r >= 2 ? lo >> 4 : lo & 15;
    const int high = (b.qh[32 * h + l] >> (2 * r)) & 3;
    *q = low | high << 4;
    *sc = b.scales[i / 16];
}
// Its value d · scales[g] · (q − 32), in that float order (the format's definition).
inline float q6k_value(const bitnet_block_q6_k &b, int i) {
    int q, sc;
    q6k_code_scale(b, i, &q, &sc);
    return bitnet_fp16_to_fp32(b.d) * (float)sc * (float)(q - 32);
}

// n ternary values (-1, 0, +1), uniform, from std::mt19937(seed): the same bytes on every platform.
inline std::vector<int8_t> random_ternary(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(-1, 1);
    std::vector<int8_t> w((size_t)n);
    for (auto &v : w) v = (int8_t)d(rng);
    return w;
}

// The I2_S bytes of the ternary matrix w [M][K] (values -1, 0, +1) in one of the byte layouts bitnet.cpp's
// quantize_i2_s writes, from the sentences of formats.md "I2_S" alone (the tests' own packer, independent of
// src/kernels/lut/pack.c): code w + 1; flat index j = m·K + k;
//   BITNET_I2S_LAYOUT_X86:   blocks of 128 weights = 32 bytes, weight j of a block → byte j % 32, bits 7-2(j/32)..
//   BITNET_I2S_LAYOUT_ARM64: blocks of 64 weights = 16 bytes, weight j of a block → byte j % 16, bits 7-2(j/16)..
//   BITNET_I2S_LAYOUT_ROWS4: byte (g, k) of the 4-row group g = w[4g][k]<<6 | w[4g+1][k]<<4 | w[4g+2][k]<<2 | w[4g+3][k];
// then the float32 scale at byte M·K/4 and 28 zero bytes. M·K must be a multiple of the block (ROWS4: M of 4).
inline std::vector<uint8_t> i2s_pack_by_formula(const std::vector<int8_t> &w, int64_t M, int64_t K, int layout,
                                                float scale) {
    const int64_t n = M * K;
    std::vector<uint8_t> out((size_t)(n / 4 + 32), 0);
    if (layout == BITNET_I2S_LAYOUT_ROWS4) {
        for (int64_t g = 0; g < M / 4; g++)
            for (int64_t k = 0; k < K; k++)
                out[(size_t)(g * K + k)] = (uint8_t)((w[(size_t)((4 * g) * K + k)] + 1) << 6 |
                                                     (w[(size_t)((4 * g + 1) * K + k)] + 1) << 4 |
                                                     (w[(size_t)((4 * g + 2) * K + k)] + 1) << 2 |
                                                     (w[(size_t)((4 * g + 3) * K + k)] + 1));
    } else {
        const int64_t block = layout == BITNET_I2S_LAYOUT_ARM64 ? 64 : 128, bytes = block / 4;
        for (int64_t i = 0; i < n / block; i++)
            for (int64_t j = 0; j < block; j++)
                out[(size_t)(i * bytes + j % bytes)] |= (uint8_t)((w[(size_t)(i * block + j)] + 1) << (6 - 2 * (j / bytes)));
    }
    std::memcpy(out.data() + n / 4, &scale, 4);
    return out;
}

// A copy of the GGUF file `src`, whose I2_S tensors are in the X86 layout, with those tensors packed in `layout`
// by i2s_pack_by_formula (their codes decoded by bitnet_unpack_i2s) and every other key and tensor copied; the
// key BITNET_I2S_LAYOUT_KEY set to `record`, or left out when it is "" (as bitnet.cpp writes its files).
// Needs bitnet_kernels (and base). Returns dst; a failure is a test failure.
inline std::string write_i2s_layout_copy(const std::string &src, const std::string &dst, int layout,
                                         const std::string &record) {
    bitnet_error err{};
    bitnet_gguf *g = nullptr;
    EXPECT_EQ(bitnet_gguf_open(src.c_str(), &g, &err), BITNET_OK) << err.msg;
    if (!g) return dst;
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    for (int64_t i = 0; i < bitnet_gguf_n_kv(g); i++) {
        const std::string key = bitnet_gguf_kv_key(g, i);
        if (key != "general.alignment" && key != BITNET_I2S_LAYOUT_KEY) bitnet_gguf_copy_kv(w, g, i);
    }
    if (!record.empty()) bitnet_gguf_set_str(w, BITNET_I2S_LAYOUT_KEY, record.c_str());
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        EXPECT_EQ(bitnet_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, &err), BITNET_OK) << err.msg;
    }
    EXPECT_EQ(bitnet_gguf_write_begin(w, dst.c_str(), &err), BITNET_OK) << err.msg;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        std::vector<uint8_t> bytes((const uint8_t *)ti->data, (const uint8_t *)ti->data + ti->nbytes);
        if (ti->type == BITNET_TYPE_I2_S) {
            const int64_t K = ti->ne[0], M = ti->ne[1];
            std::vector<int8_t> wt((size_t)(M * K));
            float scale = 0;
            EXPECT_EQ(bitnet_unpack_i2s(bytes.data(), M, K, wt.data(), &scale, &err), BITNET_OK) << err.msg;
            bytes = i2s_pack_by_formula(wt, M, K, layout, scale);
        }
        EXPECT_EQ(bitnet_gguf_write_data(w, bytes.data(), bytes.size(), &err), BITNET_OK) << err.msg;
    }
    EXPECT_EQ(bitnet_gguf_write_end(w, &err), BITNET_OK) << err.msg;
    bitnet_gguf_writer_free(w);
    bitnet_gguf_close(g);
    return dst;
}

// Protocol Buffers wire format (protobuf.dev/programming-guides/encoding), enough to write a
// SentencePiece tokenizer.model: base-128 varints, keys (field << 3 | wire type), length-delimited
// bytes (type 2) and little-endian 32-bit floats (type 5).
inline std::string varint(uint64_t v) {
    std::string s;
    do {
        unsigned char b = v & 0x7F;
        v >>= 7;
        if (v) b |= 0x80;
        s += (char)b;
    } while (v);
    return s;
}
inline std::string field_varint(uint32_t f, int64_t v) { return varint((uint64_t)f << 3) + varint((uint64_t)v); }
inline std::string field_bytes(uint32_t f, const std::string &b) {
    return varint((uint64_t)f << 3 | 2) + varint(b.size()) + b;
}
inline std::string field_float(uint32_t f, float x) {
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    std::string s = varint((uint64_t)f << 3 | 5);
    for (int i = 0; i < 4; i++) s += (char)((bits >> (8 * i)) & 0xFF);
    return s;
}

// A program run through the shell: exit status (-1 when it did not exit normally), stdout, stderr.
struct RunResult {
    int rc = -1;
    std::string out, err;
};

// Runs `prefix` (an emulator, or "") then the program at `exe` with `args` (shell words, quoted by the
// caller) and `input` on stdin. The streams go through files <base>.in/.out/.err, base a path prefix the
// caller keeps unique (its scratch directory and a counter).
inline RunResult run_program(const std::string &prefix, const std::string &exe, const std::string &args,
                             const std::string &input, const std::string &base) {
    {
        std::ofstream in(base + ".in", std::ios::binary);
        in << input;
    }
    const std::string cmd = (prefix.empty() ? "" : prefix + " ") + "'" + exe + "' " + args + " <'" + base +
                            ".in' >'" + base + ".out' 2>'" + base + ".err'";
    RunResult r;
    const int st = std::system(cmd.c_str());
    r.rc = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
    const std::vector<uint8_t> o = read_file(base + ".out"), e = read_file(base + ".err");
    r.out.assign(o.begin(), o.end());
    r.err.assign(e.begin(), e.end());
    return r;
}

}  // namespace bitnet_test

#endif
