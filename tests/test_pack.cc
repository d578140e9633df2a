// test_pack.cc — ternarization, tile rules and the I2_S / TL1 / TL2 packers (src/kernels/lut/pack.c) against
// hand-computed bytes (docs/LAYOUTS.md §2-4, formats.md), the per-element reference decoder
// (bitnet_ref_weight in src/kernels/lut/lut_ref.c, an independent implementation of the same formulas), and the
// I2_S file written by bitnet.cpp itself (tests/data/bitnetcpp-tiny).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
}
#include "test_util.h"

namespace {

std::vector<int8_t> random_ternary(int64_t n, uint32_t seed, int zero_percent = 33) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(0, 99);
    std::vector<int8_t> w((size_t)n);
    for (auto &v : w) {
        const int r = d(rng);
        v = r < zero_percent ? 0 : (r % 2 ? 1 : -1);
    }
    return w;
}

float read_f32(const uint8_t *p) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
}

// The 28 bytes after the scale are zero, the scale is where formats.md puts it.
void expect_tail(const std::vector<uint8_t> &buf, size_t scale_off, float scale) {
    ASSERT_EQ(buf.size(), scale_off + 32);
    EXPECT_EQ(read_f32(buf.data() + scale_off), scale);
    for (size_t i = scale_off + 4; i < buf.size(); i++) EXPECT_EQ(buf[i], 0u) << "tail byte " << i;
}

// Every element of a packed tensor decoded by the reference decoder equals w.
void expect_ref_decodes(int type, const std::vector<uint8_t> &buf, int64_t M, int64_t K, bitnet_tiles tiles,
                        const std::vector<int8_t> &w) {
    const bitnet_lut_shape sh = bitnet_lut_shape_make(type, M, K, tiles);
    int64_t bad = 0;
    for (int64_t m = 0; m < M; m++) {
        for (int64_t k = 0; k < K; k++) {
            if (bitnet_ref_weight(type, buf.data(), &sh, m, k) != w[(size_t)(m * K + k)] && bad++ < 5) {
                ADD_FAILURE() << "ref decode differs at row " << m << ", column " << k;
            }
        }
    }
    EXPECT_EQ(bad, 0);
}

}  // namespace

// ---- sizes and shapes ----------------------------------------------------------------------------

TEST(PackSizes, FormatsMdFormulas) {
    EXPECT_EQ(bitnet_i2s_nbytes(1536, 4096), 1536u * 4096u / 4u + 32u);
    EXPECT_EQ(bitnet_tl1_nbytes(3200, 8640), 3200u * 8640u / 4u + 32u);
    // TL2 1536 x 4096: (3840*1536)/3*5/8 = 1228800, + 256*1536/2*4/8 = 98304 → 1327104 (already /32) + 32
    EXPECT_EQ(bitnet_tl2_nbytes(1536, 4096), 1327136u);
    EXPECT_EQ(bitnet_ternary_scale_offset(BITNET_TYPE_TL2, 1536, 4096), 1327104u);
    // TL2 32 x 288: 32*32/3 = 341, *5 = 1705, /8 = 213; + 2048 = 2261 → pad32 2272
    EXPECT_EQ(bitnet_ternary_scale_offset(BITNET_TYPE_TL2, 32, 288), 2272u);
    EXPECT_EQ(bitnet_tl2_nbytes(32, 288), 2304u);
    EXPECT_EQ(bitnet_ternary_scale_offset(BITNET_TYPE_I2_S, 2, 8640), 2u * 8640u / 4u);
    EXPECT_EQ(bitnet_ternary_scale_offset(BITNET_TYPE_TL1, 64, 256), 64u * 256u / 4u);
    EXPECT_EQ(bitnet_tl2_nbytes(32, 128), 0u);  // K < 256: no TL2 size exists
}

TEST(PackSizes, LutShape) {
    bitnet_lut_shape sh = bitnet_lut_shape_make(BITNET_TYPE_TL2, 3200, 8640, bitnet_tiles{160, 96, 32});
    EXPECT_EQ(sh.three_k, 8640);
    EXPECT_EQ(sh.two_k, 0);
    sh = bitnet_lut_shape_make(BITNET_TYPE_TL2, 1536, 4096, bitnet_tiles{256, 96, 32});
    EXPECT_EQ(sh.three_k, 4032);
    EXPECT_EQ(sh.two_k, 64);
    EXPECT_EQ(sh.BM, 256);
    EXPECT_EQ(sh.BK, 96);
    EXPECT_EQ(sh.bm, 32);
    sh = bitnet_lut_shape_make(BITNET_TYPE_TL1, 1536, 4096, bitnet_tiles{256, 128, 32});
    EXPECT_EQ(sh.three_k, 0);
    EXPECT_EQ(sh.two_k, 4096);
}

// ---- ternarization -------------------------------------------------------------------------------

TEST(Ternarize, ConverterRule) {
    // mean|W| = (0.4 + 1.0 + 0.1 + 2.5 + 0 + 0.6 + 0.2 + 3.2) / 8 = 1.0 → s = 1
    const float W[8] = {0.4f, -1.0f, 0.1f, 2.5f, 0.0f, -0.6f, 0.2f, -3.2f};
    int8_t w[8];
    const float scale = bitnet_ternarize(W, 8, w);
    EXPECT_FLOAT_EQ(scale, 1.0f);
    const int8_t want[8] = {0, -1, 0, 1, 0, -1, 0, -1};  // 0.4→0, 2.5→2 (half to even)→1, -0.6→-1
    for (int i = 0; i < 8; i++) EXPECT_EQ(w[i], want[i]) << i;

    // s = 1/mean = 2: 0.25*2 = 0.5 rounds to 0 (half to even), 0.75*2 = 1.5 → 2 → 1
    const float W2[4] = {0.25f, 0.75f, -0.5f, 0.5f};
    int8_t w2[4];
    EXPECT_FLOAT_EQ(bitnet_ternarize(W2, 4, w2), 0.5f);
    EXPECT_EQ(w2[0], 0);
    EXPECT_EQ(w2[1], 1);
    EXPECT_EQ(w2[2], -1);
    EXPECT_EQ(w2[3], 1);

    const float Z[4] = {0, 0, 0, 0};
    int8_t wz[4] = {5, 5, 5, 5};
    EXPECT_EQ(bitnet_ternarize(Z, 4, wz), 0.0f);
    for (int i = 0; i < 4; i++) EXPECT_EQ(wz[i], 0);
}

// ---- tile rules ----------------------------------------------------------------------------------

TEST(TilesCheck, AcceptsTheReferenceTables) {
    bitnet_error err{};
    // design.md §2: bitnet_b1_58-large and -3B tables
    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, 1536, 4096, {256, 128, 32}, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, 1536, 1536, {128, 64, 64}, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, 3200, 8640, {160, 64, 32}, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL2, 1536, 1536, {128, 192, 32}, &err), BITNET_OK) << err.msg;
    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL2, 8640, 3200, {320, 96, 32}, &err), BITNET_OK) << err.msg;
}

TEST(TilesCheck, RejectsWithTheCodegenWording) {
    bitnet_error err{};
    // the large model's TL2 preset with bm 64 (design.md §2: must be rejected)
    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL2, 4096, 1536, {256, 96, 64}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("simd_m = 64: TL2 kernels compute 32 rows per SIMD step"), std::string::npos)
        << err.msg;
    EXPECT_NE(std::string(err.msg).find("M=4096, K=1536"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL2, 1536, 4096, {256, 66, 32}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("block_k must be a multiple of 24"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL2, 1536, 4096, {256, 120, 32}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("(k % block_k) % 32 must be 0"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("k % block_k = 16"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL2, 64, 192, {64, 96, 32}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("k = 192: k >= 256"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL2, 1536, 4096, {256, 264, 32}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("block_k <= 255: the int16 accumulator of one block could overflow"),
              std::string::npos)
        << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, 1536, 4096, {100, 128, 32}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("m % block_m must be 0 (m = 1536, remainder 36)"), std::string::npos)
        << err.msg;
    EXPECT_NE(std::string(err.msg).find("block_m % simd_m must be 0 (simd_m = 32)"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, 1536, 4096, {256, 100, 32}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("k % block_k must be 0 for TL1 (k = 4096, remainder 96)"), std::string::npos)
        << err.msg;
    EXPECT_NE(std::string(err.msg).find("block_k must be a multiple of 8 (the weights one TL1 step consumes with "
                                        "simd_m = 32)"),
              std::string::npos)
        << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, 1536, 4096, {256, 128, 16}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("TL1 kernels compute 32 or 64 rows per SIMD step"), std::string::npos)
        << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, 1536, 4096, {0, 128, 32}, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("block_m = 0: must be a positive integer"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_tiles_check(BITNET_TYPE_I2_S, 1536, 4096, {256, 128, 32}, &err), BITNET_ERR_INVALID_ARG);
}

// ---- I2_S ----------------------------------------------------------------------------------------

TEST(I2S, KnownBytes) {
    // One 128-weight block: weight j → byte j%32, bits 7-2*(j/32)..6-2*(j/32); code = w + 1 (zero → 01).
    std::vector<int8_t> w(128, 0);
    w[0] = 1;    // byte 0 bits 7:6 = 10   → 10 01 01 01 = 0x95
    w[33] = -1;  // byte 1 bits 5:4 = 00   → 01 00 01 01 = 0x45
    w[127] = 1;  // byte 31 bits 1:0 = 10  → 01 01 01 10 = 0x56
    std::vector<uint8_t> buf(bitnet_i2s_nbytes(1, 128), 0xEE);
    bitnet_error err{};
    ASSERT_EQ(bitnet_pack_i2s(w.data(), 1, 128, 0.75f, buf.data(), &err), BITNET_OK) << err.msg;
    for (int p = 0; p < 32; p++) {
        const uint8_t want = p == 0 ? 0x95 : p == 1 ? 0x45 : p == 31 ? 0x56 : 0x55;
        EXPECT_EQ(buf[p], want) << "byte " << p;
    }
    expect_tail(buf, 32, 0.75f);

    // Rows straddle blocks when K % 128 != 0: M = 2, K = 64 is one block; w[1][0] is flat index 64 →
    // byte 0, bits 3:2.
    std::vector<int8_t> w2(128, 0);
    w2[64] = -1;
    ASSERT_EQ(bitnet_pack_i2s(w2.data(), 2, 64, 1.0f, buf.data(), &err), BITNET_OK) << err.msg;
    EXPECT_EQ(buf[0], 0x51);  // 01 01 00 01
    for (int p = 1; p < 32; p++) EXPECT_EQ(buf[p], 0x55);
}

TEST(I2S, RoundTripIncludingStraddlingRows) {
    // (M, K) with K % 128 != 0 like bitnet_b1_58-3B's ffn_down (K = 8640) on a small M.
    const int64_t shapes[][2] = {{2, 8640}, {4, 8640}, {16, 200}, {1, 256}, {32, 96}, {3, 384}};
    uint32_t seed = 1;
    for (const auto &s : shapes) {
        const int64_t M = s[0], K = s[1];
        SCOPED_TRACE(testing::Message() << "M=" << M << " K=" << K);
        const auto w = random_ternary(M * K, seed++);
        std::vector<uint8_t> buf(bitnet_i2s_nbytes(M, K), 0xEE);
        bitnet_error err{};
        ASSERT_EQ(bitnet_pack_i2s(w.data(), M, K, 0.03125f, buf.data(), &err), BITNET_OK) << err.msg;
        expect_tail(buf, (size_t)(M * K / 4), 0.03125f);
        std::vector<int8_t> back((size_t)(M * K), 7);
        float scale = 0;
        ASSERT_EQ(bitnet_unpack_i2s(buf.data(), M, K, back.data(), &scale, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(back, w);
        EXPECT_EQ(scale, 0.03125f);
        expect_ref_decodes(BITNET_TYPE_I2_S, buf, M, K, bitnet_tiles{0, 0, 0}, w);
        // the flat-index rule by hand for the last element of the tensor and the first of row 1
        for (int64_t j : {M * K - 1, K < M * K ? K : 0}) {
            const int code = buf[(size_t)(j / 128 * 32 + j % 128 % 32)] >> (6 - 2 * (j % 128 / 32)) & 3;
            EXPECT_EQ(code - 1, w[(size_t)j]) << "flat index " << j;
        }
    }
}

TEST(I2S, Errors) {
    std::vector<int8_t> w(128, 0);
    std::vector<uint8_t> buf(bitnet_i2s_nbytes(2, 64), 0);
    bitnet_error err{};
    ASSERT_EQ(bitnet_pack_i2s(w.data(), 2, 64, 1.0f, buf.data(), &err), BITNET_OK);
    // code 3 at flat index 70 = row 1, column 6: byte 70%32 = 6, bits 3:2 (70/32 = 2)
    buf[6] |= 0x0C;
    std::vector<int8_t> back(128);
    float scale;
    EXPECT_EQ(bitnet_unpack_i2s(buf.data(), 2, 64, back.data(), &scale, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("code 3"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("flat index 70 (row 1, column 6)"), std::string::npos) << err.msg;

    ASSERT_EQ(bitnet_pack_i2s(w.data(), 2, 64, 1.0f, buf.data(), &err), BITNET_OK);
    const float nan = std::nanf("");
    std::memcpy(buf.data() + 32, &nan, 4);
    EXPECT_EQ(bitnet_unpack_i2s(buf.data(), 2, 64, back.data(), &scale, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("scale is not finite"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_pack_i2s(w.data(), 1, 96, 1.0f, buf.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("not a multiple of 128"), std::string::npos) << err.msg;

    w[77] = 2;
    EXPECT_EQ(bitnet_pack_i2s(w.data(), 2, 64, 1.0f, buf.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("row 1, column 13 is 2"), std::string::npos) << err.msg;
    w[77] = 0;
    EXPECT_EQ(bitnet_pack_i2s(w.data(), 2, 64, INFINITY, buf.data(), &err), BITNET_ERR_INVALID_ARG);
}

// ---- I2_S in bitnet.cpp's three layouts (x86, arm64, rows4) ----------------------------------------

TEST(I2SLayouts, NamesAndTheLocateFormulas) {
    EXPECT_EQ(bitnet_i2s_layout_parse("x86", 3), BITNET_I2S_LAYOUT_X86);
    EXPECT_EQ(bitnet_i2s_layout_parse("arm64", 5), BITNET_I2S_LAYOUT_ARM64);
    EXPECT_EQ(bitnet_i2s_layout_parse("rows4", 5), BITNET_I2S_LAYOUT_ROWS4);
    EXPECT_EQ(bitnet_i2s_layout_parse("auto", 4), -1);  // a request, not a layout a file can hold
    EXPECT_EQ(bitnet_i2s_layout_parse("arm6", 4), -1);
    EXPECT_EQ(bitnet_i2s_layout_parse("arm64x", 6), -1);
    EXPECT_STREQ(bitnet_i2s_layout_name(BITNET_I2S_LAYOUT_AUTO), "auto");
    EXPECT_EQ(bitnet_i2s_layout_name(7), nullptr);
    // bitnet_i2s_locate by hand, M = 8, K = 96 (rows straddle the 128- and 64-weight blocks)
    struct Case {
        int layout;
        int64_t m, k;
        size_t byte;
        int shift;
    } cases[] = {
        {BITNET_I2S_LAYOUT_X86, 0, 0, 0, 6},     {BITNET_I2S_LAYOUT_X86, 0, 33, 1, 4},
        {BITNET_I2S_LAYOUT_X86, 1, 40, 40, 6},   // j = 136: block 1, in-block 8
        {BITNET_I2S_LAYOUT_ARM64, 0, 16, 0, 4},  {BITNET_I2S_LAYOUT_ARM64, 0, 63, 15, 0},
        {BITNET_I2S_LAYOUT_ARM64, 1, 0, 16, 2},  // j = 96: block 1, in-block 32
        {BITNET_I2S_LAYOUT_ROWS4, 0, 5, 5, 6},   {BITNET_I2S_LAYOUT_ROWS4, 3, 5, 5, 0},
        {BITNET_I2S_LAYOUT_ROWS4, 6, 95, 191, 2},
    };
    for (const Case &c : cases) {
        size_t byte = 0;
        int shift = -1;
        bitnet_i2s_locate(c.layout, 8, 96, c.m, c.k, &byte, &shift);
        EXPECT_EQ(byte, c.byte) << bitnet_i2s_layout_name(c.layout) << " (" << c.m << ", " << c.k << ")";
        EXPECT_EQ(shift, c.shift) << bitnet_i2s_layout_name(c.layout) << " (" << c.m << ", " << c.k << ")";
    }
}

// Every layout, packed by the tests' own packer (test_util.h, from formats.md's sentences), is rewritten
// into exactly the bytes bitnet_pack_i2s writes for the same weights, and bitnet_i2s_locate finds every code.
TEST(I2SLayouts, RelayoutGivesTheX86BytesOfTheSameWeights) {
    // K % 32 != 0 (16 x 200, 32 x 72): runs of 32 weights across rows, as well as whole rows
    const int64_t shapes[][2] = {{4, 8640}, {8, 96}, {4, 256}, {12, 32}, {64, 64}, {4, 4096}, {16, 200}, {32, 72}};
    uint32_t seed = 11;
    for (const auto &sh : shapes) {
        const int64_t M = sh[0], K = sh[1];
        const auto w = random_ternary(M * K, seed++);
        std::vector<uint8_t> x86(bitnet_i2s_nbytes(M, K));
        bitnet_error err{};
        ASSERT_EQ(bitnet_pack_i2s(w.data(), M, K, 0.5f, x86.data(), &err), BITNET_OK) << err.msg;
        for (int layout : {BITNET_I2S_LAYOUT_X86, BITNET_I2S_LAYOUT_ARM64, BITNET_I2S_LAYOUT_ROWS4}) {
            SCOPED_TRACE(testing::Message() << bitnet_i2s_layout_name(layout) << " M=" << M << " K=" << K);
            const std::vector<uint8_t> src = bitnet_test::i2s_pack_by_formula(w, M, K, layout, 0.5f);
            for (int64_t m = 0; m < M; m++)
                for (int64_t k = 0; k < K; k++) {
                    size_t byte;
                    int shift;
                    bitnet_i2s_locate(layout, M, K, m, k, &byte, &shift);
                    ASSERT_EQ((src[byte] >> shift & 3) - 1, w[(size_t)(m * K + k)]) << "(" << m << ", " << k << ")";
                }
            std::vector<uint8_t> out(bitnet_i2s_nbytes(M, K), 0xEE);
            ASSERT_EQ(bitnet_i2s_relayout(layout, src.data(), M, K, out.data(), &err), BITNET_OK) << err.msg;
            EXPECT_EQ(out, x86);
        }
        if (M * K >= 1024) {  // the layouts really differ (so the test above could fail)
            EXPECT_NE(bitnet_test::i2s_pack_by_formula(w, M, K, BITNET_I2S_LAYOUT_ARM64, 0.5f), x86);
            EXPECT_NE(bitnet_test::i2s_pack_by_formula(w, M, K, BITNET_I2S_LAYOUT_ROWS4, 0.5f), x86);
        }
    }
}

TEST(I2SLayouts, RelayoutErrorsNameTheWeightAndTheRule) {
    bitnet_error err{};
    std::vector<int8_t> w(128, 0);
    std::vector<uint8_t> out(bitnet_i2s_nbytes(2, 64));
    // arm64, M = 2, K = 64: weight (1, 6) is flat 70 = block 1, in-block 6 → byte 16 + 6, bits 7:6
    auto src = bitnet_test::i2s_pack_by_formula(w, 2, 64, BITNET_I2S_LAYOUT_ARM64, 1.0f);
    src[22] |= 0xC0;
    EXPECT_EQ(bitnet_i2s_relayout(BITNET_I2S_LAYOUT_ARM64, src.data(), 2, 64, out.data(), &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("arm64 layout): code 3 (no ternary value) at row 1, column 6"),
              std::string::npos) << err.msg;
    // rows4, M = 4, K = 32: weight (2, 5) → byte 5, bits 3:2
    src = bitnet_test::i2s_pack_by_formula(w, 4, 32, BITNET_I2S_LAYOUT_ROWS4, 1.0f);
    src[5] |= 0x0C;
    EXPECT_EQ(bitnet_i2s_relayout(BITNET_I2S_LAYOUT_ROWS4, src.data(), 4, 32, out.data(), &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("row 2, column 5"), std::string::npos) << err.msg;
    // a scale that is not finite
    src = bitnet_test::i2s_pack_by_formula(w, 4, 32, BITNET_I2S_LAYOUT_ROWS4, INFINITY);
    EXPECT_EQ(bitnet_i2s_relayout(BITNET_I2S_LAYOUT_ROWS4, src.data(), 4, 32, out.data(), &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("scale is not finite"), std::string::npos) << err.msg;
    // shapes a layout cannot hold
    std::vector<int8_t> w6(6 * 64, 0);
    src = bitnet_test::i2s_pack_by_formula(w6, 6, 64, BITNET_I2S_LAYOUT_X86, 1.0f);
    out.resize(bitnet_i2s_nbytes(6, 64));
    EXPECT_EQ(bitnet_i2s_relayout(BITNET_I2S_LAYOUT_ROWS4, src.data(), 6, 64, out.data(), &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("M = 6 rows are not a whole number of 4-row groups"), std::string::npos)
        << err.msg;
    EXPECT_EQ(bitnet_i2s_layout_check(BITNET_I2S_LAYOUT_ARM64, 1, 64, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("1 x 64 = 64 is not a multiple of 128"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_i2s_layout_check(9, 4, 32, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(bitnet_i2s_layout_check(BITNET_I2S_LAYOUT_ROWS4, 4, 32, &err), BITNET_OK);
}

// ---- TL1 -----------------------------------------------------------------------------------------

TEST(TL1, KnownBytes) {
    bitnet_error err{};
    {
        // bm = 32 → by = 8: one 64-byte chunk = [h0 q0 | h0 q1 | h1 q0 | h1 q1], 16 rows each; a byte is
        // idx(pair 2q) << 4 | idx(pair 2q+1), idx = 3*w0 + w1 + 4 (zero pair → 4, byte 0x44).
        std::vector<int8_t> w(32 * 8, 0);
        w[17 * 8 + 5] = 1;  // row 17 → h 1, i 1; k 5 → pair 2 (w1) → q 1, high nibble, idx 5
        w[0 * 8 + 0] = -1;  // row 0, pair 0 (w0) → idx 1, byte 0 high nibble
        std::vector<uint8_t> buf(bitnet_tl1_nbytes(32, 8), 0xEE);
        ASSERT_EQ(bitnet_pack_tl1(w.data(), 32, 8, {32, 8, 32}, 2.0f, buf.data(), &err), BITNET_OK) << err.msg;
        for (int i = 0; i < 64; i++) {
            const uint8_t want = i == 0 ? 0x14 : i == 3 * 16 + 1 ? 0x54 : 0x44;
            EXPECT_EQ(buf[i], want) << "byte " << i;
        }
        expect_tail(buf, 64, 2.0f);
    }
    {
        // bm = 64 → by = 4: chunk = [h0 | h1 | h2 | h3]; row 50 → h 3, i 2; k 3 → pair 1 (w1): low nibble,
        // idx = 0 - 1 + 4 = 3.
        std::vector<int8_t> w(64 * 4, 0);
        w[50 * 4 + 3] = -1;
        std::vector<uint8_t> buf(bitnet_tl1_nbytes(64, 4), 0xEE);
        ASSERT_EQ(bitnet_pack_tl1(w.data(), 64, 4, {64, 4, 64}, 1.0f, buf.data(), &err), BITNET_OK) << err.msg;
        for (int i = 0; i < 64; i++) EXPECT_EQ(buf[i], i == 50 ? 0x43 : 0x44) << "byte " << i;
    }
    {
        // Order of tiles and blocks: M = 64, K = 16, BM = 32, BK = 8, bm = 32: chunks (t, kb) are
        // (0,0) (0,1) (1,0) (1,1), 64 bytes each. w[40][9] = +1 → t 1, kb 1, row 8 of the tile → h 0,
        // i 8; k 9 % 8 = 1 → pair 0 (w1) → q 0, high nibble, idx 5 → byte 3*64 + 8.
        std::vector<int8_t> w(64 * 16, 0);
        w[40 * 16 + 9] = 1;
        std::vector<uint8_t> buf(bitnet_tl1_nbytes(64, 16), 0xEE);
        ASSERT_EQ(bitnet_pack_tl1(w.data(), 64, 16, {32, 8, 32}, 1.0f, buf.data(), &err), BITNET_OK) << err.msg;
        for (int i = 0; i < 256; i++) EXPECT_EQ(buf[i], i == 3 * 64 + 8 ? 0x54 : 0x44) << "byte " << i;
    }
}

TEST(TL1, RoundTrip) {
    struct Case {
        int64_t M, K;
        bitnet_tiles t;
    } cases[] = {
        {32, 8, {32, 8, 32}},     {64, 64, {64, 64, 64}},  {96, 512, {32, 8, 32}}, {64, 256, {64, 64, 64}},
        {256, 256, {128, 256, 32}}, {128, 96, {64, 32, 64}}, {192, 48, {96, 24, 32}},
    };
    uint32_t seed = 100;
    for (const auto &c : cases) {
        SCOPED_TRACE(testing::Message() << "M=" << c.M << " K=" << c.K << " tiles " << c.t.BM << "/" << c.t.BK << "/"
                                        << c.t.bm);
        const auto w = random_ternary(c.M * c.K, seed++);
        std::vector<uint8_t> buf(bitnet_tl1_nbytes(c.M, c.K), 0xEE);
        bitnet_error err{};
        ASSERT_EQ(bitnet_pack_tl1(w.data(), c.M, c.K, c.t, 0.5f, buf.data(), &err), BITNET_OK) << err.msg;
        expect_tail(buf, (size_t)(c.M * c.K / 4), 0.5f);
        std::vector<int8_t> back((size_t)(c.M * c.K), 7);
        float scale = 0;
        ASSERT_EQ(bitnet_unpack_tl1(buf.data(), c.M, c.K, c.t, back.data(), &scale, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(back, w);
        EXPECT_EQ(scale, 0.5f);
        expect_ref_decodes(BITNET_TYPE_TL1, buf, c.M, c.K, c.t, w);
        // pack(unpack(x)) == x byte for byte
        std::vector<uint8_t> again(buf.size(), 0xEE);
        ASSERT_EQ(bitnet_pack_tl1(back.data(), c.M, c.K, c.t, scale, again.data(), &err), BITNET_OK);
        EXPECT_EQ(again, buf);
        // per-tile packing writes exactly the tile's bytes
        std::vector<uint8_t> tiled(buf.size(), 0);
        for (int64_t t = 0; t < c.M / c.t.BM; t++) {
            ASSERT_EQ(bitnet_pack_tl1_tile(w.data() + t * c.t.BM * c.K, c.M, c.K, c.t, t, tiled.data(), &err),
                      BITNET_OK)
                << err.msg;
        }
        EXPECT_TRUE(std::equal(tiled.begin(), tiled.end() - 32, buf.begin()));
    }
}

TEST(TL1, Errors) {
    std::vector<int8_t> w(32 * 8, 0);
    std::vector<uint8_t> buf(bitnet_tl1_nbytes(32, 8));
    bitnet_error err{};
    ASSERT_EQ(bitnet_pack_tl1(w.data(), 32, 8, {32, 8, 32}, 1.0f, buf.data(), &err), BITNET_OK);
    buf[3 * 16 + 5] = 0x49;  // h 1, q 1, i 5 → row 21; low nibble 9 is pair 3 → columns 6-7
    std::vector<int8_t> back(w.size());
    float scale;
    EXPECT_EQ(bitnet_unpack_tl1(buf.data(), 32, 8, {32, 8, 32}, back.data(), &scale, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("nibble 9 > 8"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("row 21, columns 6-7"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_pack_tl1(w.data(), 32, 8, {32, 6, 32}, 1.0f, buf.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("block_k must be a multiple of 8"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_unpack_tl1(buf.data(), 32, 8, {32, 8, 48}, back.data(), &scale, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(bitnet_pack_tl1_tile(w.data(), 32, 8, {32, 8, 32}, 1, buf.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("tile 1 out of range"), std::string::npos) << err.msg;
    w[5 * 8 + 2] = -3;
    EXPECT_EQ(bitnet_pack_tl1(w.data(), 32, 8, {32, 8, 32}, 1.0f, buf.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("row 5, column 2 is -3"), std::string::npos) << err.msg;
}

// The unpackers with w == NULL (how weights used in place are checked, runtime/lut_host.c) give the same
// verdict, message and scale as decoding, on random one-byte corruptions of every layout.
TEST(Unpack, CheckOnlyAgreesWithDecoding) {
    const int64_t M = 64, K = 256;
    const auto w = random_ternary(M * K, 91);
    std::vector<int8_t> back((size_t)(M * K));
    std::mt19937 rng(5);
    struct Case { int type; bitnet_tiles tiles; };
    for (const Case c : {Case{BITNET_TYPE_I2_S, {0, 0, 0}}, Case{BITNET_TYPE_TL1, {64, 128, 32}},
                         Case{BITNET_TYPE_TL2, {64, 96, 32}}}) {
        const size_t nb = c.type == BITNET_TYPE_I2_S ? bitnet_i2s_nbytes(M, K)
                          : c.type == BITNET_TYPE_TL1 ? bitnet_tl1_nbytes(M, K) : bitnet_tl2_nbytes(M, K);
        std::vector<uint8_t> clean(nb);
        bitnet_error err{};
        const bitnet_status pst = c.type == BITNET_TYPE_I2_S ? bitnet_pack_i2s(w.data(), M, K, 0.5f, clean.data(), &err)
                                  : c.type == BITNET_TYPE_TL1 ? bitnet_pack_tl1(w.data(), M, K, c.tiles, 0.5f, clean.data(), &err)
                                                              : bitnet_pack_tl2(w.data(), M, K, c.tiles, 0.5f, clean.data(), &err);
        ASSERT_EQ(pst, BITNET_OK) << err.msg;
        const size_t data_bytes = bitnet_ternary_scale_offset(c.type, M, K) + 4;
        auto unpack = [&](const std::vector<uint8_t> &b, int8_t *out, float *scale, bitnet_error *e) {
            if (c.type == BITNET_TYPE_I2_S) return bitnet_unpack_i2s(b.data(), M, K, out, scale, e);
            if (c.type == BITNET_TYPE_TL1) return bitnet_unpack_tl1(b.data(), M, K, c.tiles, out, scale, e);
            return bitnet_unpack_tl2(b.data(), M, K, c.tiles, out, scale, e);
        };
        int n_bad = 0;
        for (int trial = 0; trial < 400; trial++) {
            std::vector<uint8_t> b = clean;
            if (trial > 0) b[rng() % data_bytes] = (uint8_t)rng();
            bitnet_error e1{}, e2{};
            float s1 = 0, s2 = 0;
            const bitnet_status st1 = unpack(b, back.data(), &s1, &e1), st2 = unpack(b, nullptr, &s2, &e2);
            ASSERT_EQ(st1, st2) << "type " << c.type << " trial " << trial << ": " << e1.msg;
            EXPECT_STREQ(e1.msg, e2.msg);
            if (st1 == BITNET_OK) {
                EXPECT_EQ(std::memcmp(&s1, &s2, 4), 0);
            }
            n_bad += st1 != BITNET_OK;
        }
        EXPECT_GT(n_bad, 0) << "type " << c.type << ": no corruption was refused, the test checks nothing";
    }
}

// ---- TL2 -----------------------------------------------------------------------------------------

TEST(TL2, KnownBytesOneWeight) {
    // M = 32, K = 288, tiles 32/24/32: three_k = 288 (12 blocks of 24), two_k = 0.
    // w[9][26] = -1: block kb 1, group 8 of the tensor = group 0 of the block, weight w2 → v = -1:
    // index nibble 1, sign 1. Row 9 → quarter 1 → stored quarter position 2 → byte 2*8 + 1 = 17.
    // Index stream: (kb, mt) chunks of BK/6 * 32 = 128 bytes; group 0 is the high nibble of step 0:
    //   byte 128 + 17 = 0x10.
    // Sign stream at three_k*M/6 = 1536, 32 bytes per (kb, mt, 24-weight step): word c = 9 of block 1,
    //   bit 15 - 2*0 (row < 16) → bytes 1536 + 32 + 18 = 0x00, + 19 = 0x80.
    const int64_t M = 32, K = 288;
    std::vector<int8_t> w((size_t)(M * K), 0);
    w[9 * K + 26] = -1;
    std::vector<uint8_t> buf(bitnet_tl2_nbytes(M, K), 0xEE);
    bitnet_error err{};
    ASSERT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 24, 32}, 1.5f, buf.data(), &err), BITNET_OK) << err.msg;
    ASSERT_EQ(buf.size(), 2304u);
    for (size_t i = 0; i < 2272; i++) {
        const uint8_t want = i == 128 + 17 ? 0x10 : i == 1536 + 32 + 19 ? 0x80 : 0x00;
        EXPECT_EQ(buf[i], want) << "byte " << i;
    }
    expect_tail(buf, 2272, 1.5f);

    // Same weight +1 and its neighbours making v = 9*1 + 3*(-1) + 1 = 7 for row 30, group 1 of block 0
    // (k 3..5, low nibble of step 0): row 30 → quarter 3 → byte 3*8 + 6 = 30; no sign.
    std::fill(w.begin(), w.end(), 0);
    w[30 * K + 3] = 1;
    w[30 * K + 4] = -1;
    w[30 * K + 5] = 1;
    ASSERT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 24, 32}, 1.5f, buf.data(), &err), BITNET_OK) << err.msg;
    for (size_t i = 0; i < 2272; i++) EXPECT_EQ(buf[i], i == 30 ? 0x07 : 0x00) << "byte " << i;
    // negated: v = -7 → nibble 7, sign of group 1 for row 30 = c 14, rows 16..31 → bit 14 - 2*1 = 12 →
    // word 14 = 0x1000 → byte 1536 + 28 = 0x00, + 29 = 0x10.
    for (int e = 3; e < 6; e++) w[30 * K + e] = (int8_t)-w[30 * K + e];
    ASSERT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 24, 32}, 1.5f, buf.data(), &err), BITNET_OK) << err.msg;
    for (size_t i = 0; i < 2272; i++) EXPECT_EQ(buf[i], i == 30 ? 0x07 : i == 1536 + 29 ? 0x10 : 0x00) << "byte " << i;
}

TEST(TL2, KnownBytesTwoPart) {
    // M = 32, K = 256, tiles 32/96/32: three_k = 192, two_k = 64. Streams: index 1024 bytes, sign 256,
    // two-part 512 at 1280. w[20][200] = +1 → pair P = 4 (k 200, 201; w0) → block kb2 0, step 2, high
    // nibble, idx 3 + 0 + 4 = 7; row 20 → quarter 2 → position 1*8 + 4 = 12 → byte 1280 + 64 + 12 = 0x74.
    // Every other two-part byte is a pair of zero pairs (0x44); index and sign bytes are 0.
    const int64_t M = 32, K = 256;
    std::vector<int8_t> w((size_t)(M * K), 0);
    w[20 * K + 200] = 1;
    std::vector<uint8_t> buf(bitnet_tl2_nbytes(M, K), 0xEE);
    bitnet_error err{};
    ASSERT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 96, 32}, 0.25f, buf.data(), &err), BITNET_OK) << err.msg;
    // formula: 0 + 256*32/2*4/8 = 2048 → pad32 2048
    ASSERT_EQ(buf.size(), 2048u + 32u);
    for (size_t i = 0; i < 2048; i++) {
        uint8_t want = 0;
        if (i >= 1280 && i < 1792) want = i == 1280 + 64 + 12 ? 0x74 : 0x44;
        EXPECT_EQ(buf[i], want) << "byte " << i;
    }
    expect_tail(buf, 2048, 0.25f);
}

TEST(TL2, RoundTrip) {
    struct Case {
        int64_t M, K;
        bitnet_tiles t;
    } cases[] = {
        {32, 256, {32, 96, 32}},  {64, 352, {64, 96, 32}},   {96, 288, {32, 24, 32}}, {32, 480, {32, 240, 32}},
        {64, 320, {32, 96, 32}},  {128, 256, {128, 96, 32}}, {64, 272, {64, 240, 32}}, {32, 264, {32, 168, 32}},
    };
    uint32_t seed = 200;
    for (const auto &c : cases) {
        SCOPED_TRACE(testing::Message() << "M=" << c.M << " K=" << c.K << " tiles " << c.t.BM << "/" << c.t.BK << "/"
                                        << c.t.bm);
        const auto w = random_ternary(c.M * c.K, seed++);
        std::vector<uint8_t> buf(bitnet_tl2_nbytes(c.M, c.K), 0xEE);
        bitnet_error err{};
        ASSERT_EQ(bitnet_pack_tl2(w.data(), c.M, c.K, c.t, 0.5f, buf.data(), &err), BITNET_OK) << err.msg;
        const size_t so = bitnet_ternary_scale_offset(BITNET_TYPE_TL2, c.M, c.K);
        expect_tail(buf, so, 0.5f);
        // zero padding between the streams and the scale
        const bitnet_lut_shape sh = bitnet_lut_shape_make(BITNET_TYPE_TL2, c.M, c.K, c.t);
        const size_t used = (size_t)(sh.three_k * c.M / 6 + sh.three_k * c.M / 24 + sh.two_k * c.M / 4);
        for (size_t i = used; i < so; i++) EXPECT_EQ(buf[i], 0u) << "padding byte " << i;
        std::vector<int8_t> back((size_t)(c.M * c.K), 7);
        float scale = 0;
        ASSERT_EQ(bitnet_unpack_tl2(buf.data(), c.M, c.K, c.t, back.data(), &scale, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(back, w);
        EXPECT_EQ(scale, 0.5f);
        expect_ref_decodes(BITNET_TYPE_TL2, buf, c.M, c.K, c.t, w);
        std::vector<uint8_t> again(buf.size(), 0xEE);
        ASSERT_EQ(bitnet_pack_tl2(back.data(), c.M, c.K, c.t, scale, again.data(), &err), BITNET_OK);
        EXPECT_EQ(again, buf);
        std::vector<uint8_t> tiled(buf.size(), 0);
        for (int64_t t = 0; t < c.M / c.t.BM; t++) {
            ASSERT_EQ(bitnet_pack_tl2_tile(w.data() + t * c.t.BM * c.K, c.M, c.K, c.t, t, tiled.data(), &err),
                      BITNET_OK)
                << err.msg;
        }
        EXPECT_TRUE(std::equal(tiled.begin(), tiled.begin() + (long)used, buf.begin()));
    }
}

// bitnet_repack_i2s (I2_S straight to TL1/TL2, one tile in flight) writes exactly the bytes of unpack + pack,
// for several tiles per tensor, a two-part (K % BK != 0) and the 2B-4T ffn_up shape; a code 3 is refused with
// the row and column, a non-finite scale and a target that is not TL1/TL2 too.
TEST(RepackI2s, SameBytesAsUnpackThenPack) {
    struct Case {
        int type;
        int64_t M, K;
        bitnet_tiles t;
    } cases[] = {
        {BITNET_TYPE_TL2, 64, 352, {32, 96, 32}},     {BITNET_TYPE_TL2, 96, 288, {32, 24, 32}},
        {BITNET_TYPE_TL2, 128, 256, {64, 96, 32}},    {BITNET_TYPE_TL2, 512, 2560, {256, 96, 32}},
        {BITNET_TYPE_TL1, 64, 256, {32, 128, 32}},    {BITNET_TYPE_TL1, 128, 512, {64, 64, 32}},
    };
    uint32_t seed = 900;
    for (const auto &c : cases) {
        SCOPED_TRACE(testing::Message() << bitnet_type_name(c.type) << " M=" << c.M << " K=" << c.K << " tiles "
                                        << c.t.BM << "/" << c.t.BK << "/" << c.t.bm);
        const auto w = random_ternary(c.M * c.K, seed++);
        std::vector<uint8_t> i2s(bitnet_i2s_nbytes(c.M, c.K));
        bitnet_error err{};
        ASSERT_EQ(bitnet_pack_i2s(w.data(), c.M, c.K, 0.25f, i2s.data(), &err), BITNET_OK) << err.msg;
        const size_t n = bitnet_ternary_nbytes(c.type, c.M, c.K);
        std::vector<uint8_t> want(n, 0xEE), got(n, 0xEE);
        ASSERT_EQ(c.type == BITNET_TYPE_TL2 ? bitnet_pack_tl2(w.data(), c.M, c.K, c.t, 0.25f, want.data(), &err)
                                            : bitnet_pack_tl1(w.data(), c.M, c.K, c.t, 0.25f, want.data(), &err),
                  BITNET_OK)
            << err.msg;
        float scale = 0;
        ASSERT_EQ(bitnet_repack_i2s(i2s.data(), c.M, c.K, c.type, c.t, got.data(), &scale, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(got, want);
        EXPECT_EQ(scale, 0.25f);
    }
    // errors
    const int64_t M = 64, K = 256;
    const bitnet_tiles t{32, 96, 32};
    const auto w = random_ternary(M * K, 7);
    std::vector<uint8_t> i2s(bitnet_i2s_nbytes(M, K)), out(bitnet_tl2_nbytes(M, K));
    bitnet_error err{};
    ASSERT_EQ(bitnet_pack_i2s(w.data(), M, K, 1.0f, i2s.data(), &err), BITNET_OK);
    auto bad = i2s;
    const int64_t j = 40 * K + 77;  // row 40, column 77: block j / 128, byte j % 32, run (j % 128) / 32
    bad[(size_t)(32 * (j / 128) + j % 32)] |= (uint8_t)(3 << (6 - 2 * ((j % 128) / 32)));
    EXPECT_EQ(bitnet_repack_i2s(bad.data(), M, K, BITNET_TYPE_TL2, t, out.data(), nullptr, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("row 40, column 77"), std::string::npos) << err.msg;
    bad = i2s;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bad.data() + M * K / 4, &nan, 4);
    EXPECT_EQ(bitnet_repack_i2s(bad.data(), M, K, BITNET_TYPE_TL2, t, out.data(), nullptr, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("not finite"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_repack_i2s(i2s.data(), M, K, BITNET_TYPE_I2_S, t, out.data(), nullptr, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("not TL1 or TL2"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_repack_i2s(i2s.data(), M, K, BITNET_TYPE_TL2, bitnet_tiles{32, 100, 32}, out.data(), nullptr, &err),
              BITNET_ERR_INVALID_ARG);
}

TEST(TL2, Errors) {
    const int64_t M = 32, K = 256;
    std::vector<int8_t> w((size_t)(M * K), 0);
    std::vector<uint8_t> buf(bitnet_tl2_nbytes(M, K));
    bitnet_error err{};
    std::vector<int8_t> back(w.size());
    float scale;
    ASSERT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 96, 32}, 1.0f, buf.data(), &err), BITNET_OK);
    // index byte 40 = step 1 of block 0, position 8 → row 16; high nibble 14 = group 2 → columns 6-8
    buf[40] = 0xE0;
    EXPECT_EQ(bitnet_unpack_tl2(buf.data(), M, K, {32, 96, 32}, back.data(), &scale, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("index nibble 14 > 13"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("row 16, columns 6-8"), std::string::npos) << err.msg;

    ASSERT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 96, 32}, 1.0f, buf.data(), &err), BITNET_OK);
    buf[1280 + 33] = 0x4F;  // two-part step 1, position 1 → row 1; low nibble 15 → pair 3 → columns 198-199
    EXPECT_EQ(bitnet_unpack_tl2(buf.data(), M, K, {32, 96, 32}, back.data(), &scale, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("two-part nibble 15 > 8"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("row 1, columns 198-199"), std::string::npos) << err.msg;

    ASSERT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 96, 32}, 1.0f, buf.data(), &err), BITNET_OK);
    const float inf = INFINITY;
    std::memcpy(buf.data() + 2048, &inf, 4);
    EXPECT_EQ(bitnet_unpack_tl2(buf.data(), M, K, {32, 96, 32}, back.data(), &scale, &err), BITNET_ERR_FORMAT);
    EXPECT_NE(std::string(err.msg).find("scale is not finite"), std::string::npos) << err.msg;

    EXPECT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 6, 32}, 1.0f, buf.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("block_k must be a multiple of 24"), std::string::npos) << err.msg;
    EXPECT_EQ(bitnet_pack_tl2(w.data(), M, K, {32, 96, 64}, 1.0f, buf.data(), &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("TL2 kernels compute 32 rows per SIMD step"), std::string::npos) << err.msg;
}

// ---- bitnet.cpp's own I2_S file ------------------------------------------------------------------

namespace {

// Minimal GGUF v2/v3 reader for the test (tensor table only), independent of src/base/gguf_read.c.
struct MiniGguf {
    struct Tensor {
        std::vector<int64_t> ne;
        uint32_t type = 0;
        uint64_t offset = 0;
    };
    std::vector<uint8_t> bytes;
    std::map<std::string, Tensor> tensors;
    size_t data_start = 0;
    std::string error;

    bool load(const std::string &path) {
        std::ifstream f(path, std::ios::binary);
        if (!f) return fail("cannot open " + path);
        bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        size_t o = 0;
        auto need = [&](size_t n) { return o + n <= bytes.size(); };
        auto u32 = [&](uint32_t &v) { if (!need(4)) return false; std::memcpy(&v, &bytes[o], 4); o += 4; return true; };
        auto u64 = [&](uint64_t &v) { if (!need(8)) return false; std::memcpy(&v, &bytes[o], 8); o += 8; return true; };
        auto str = [&](std::string &s) {
            uint64_t n;
            if (!u64(n) || !need(n)) return false;
            s.assign((const char *)&bytes[o], n);
            o += n;
            return true;
        };
        uint32_t alignment = 32;
        std::function<bool(uint32_t, const std::string &)> skip = [&](uint32_t t, const std::string &key) -> bool {
            static const size_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
            if (t == 8) {
                std::string s;
                return str(s);
            }
            if (t == 9) {
                uint32_t et;
                uint64_t n;
                if (!u32(et) || !u64(n)) return false;
                for (uint64_t i = 0; i < n; i++)
                    if (!skip(et, "")) return false;
                return true;
            }
            if (t > 12) return false;
            if (key == "general.alignment" && t == 4) return u32(alignment);
            if (!need(sizes[t])) return false;
            o += sizes[t];
            return true;
        };
        if (!need(4) || std::memcmp(bytes.data(), "GGUF", 4) != 0) return fail("not GGUF");
        o = 4;
        uint32_t version;
        uint64_t n_tensors, n_kv;
        if (!u32(version) || !u64(n_tensors) || !u64(n_kv)) return fail("short header");
        for (uint64_t i = 0; i < n_kv; i++) {
            std::string key;
            uint32_t t;
            if (!str(key) || !u32(t) || !skip(t, key)) return fail("bad kv " + key);
        }
        for (uint64_t i = 0; i < n_tensors; i++) {
            std::string name;
            uint32_t nd;
            Tensor t;
            if (!str(name) || !u32(nd) || nd > 4) return fail("bad tensor info");
            for (uint32_t d = 0; d < nd; d++) {
                uint64_t v;
                if (!u64(v)) return fail("bad ne");
                t.ne.push_back((int64_t)v);
            }
            if (!u32(t.type) || !u64(t.offset)) return fail("bad tensor info");
            tensors[name] = t;
        }
        data_start = (o + alignment - 1) / alignment * alignment;
        return true;
    }
    bool fail(const std::string &e) {
        error = e;
        return false;
    }
    const uint8_t *data(const Tensor &t) const { return bytes.data() + data_start + t.offset; }
};

}  // namespace

TEST(I2S, BitnetCppTinyFileDecodesToTheF32Weights) {
    const std::string dir = BITNET_TEST_DATA_DIR "/bitnetcpp-tiny/";
    MiniGguf q, f;
    ASSERT_TRUE(q.load(dir + "ggml-model-i2_s.gguf")) << q.error;
    ASSERT_TRUE(f.load(dir + "ggml-model-f32.gguf")) << f.error;
    int n_checked = 0;
    for (const auto &kv : q.tensors) {
        if (kv.second.type != BITNET_TYPE_I2_S) continue;
        SCOPED_TRACE(kv.first);
        const auto &tq = kv.second;
        ASSERT_EQ(tq.ne.size(), 2u);
        const int64_t K = tq.ne[0], M = tq.ne[1];
        auto it = f.tensors.find(kv.first);
        ASSERT_NE(it, f.tensors.end());
        const auto &tf = it->second;
        ASSERT_EQ(tf.type, 0u);
        ASSERT_EQ(tf.ne, tq.ne);
        ASSERT_LE(q.data_start + tq.offset + bitnet_i2s_nbytes(M, K), q.bytes.size());
        ASSERT_LE(f.data_start + tf.offset + (size_t)(M * K) * 4, f.bytes.size());

        std::vector<int8_t> w((size_t)(M * K));
        float scale = 0;
        bitnet_error err{};
        ASSERT_EQ(bitnet_unpack_i2s(q.data(tq), M, K, w.data(), &scale, &err), BITNET_OK) << err.msg;
        std::vector<float> W((size_t)(M * K));
        std::memcpy(W.data(), f.data(tf), W.size() * 4);
        float wmax = 0;
        int64_t mismatches = 0;
        for (size_t i = 0; i < W.size(); i++) {
            wmax = std::max(wmax, std::fabs(W[i]));
            const int sign = W[i] > 0 ? 1 : W[i] < 0 ? -1 : 0;
            if (sign != w[i]) mismatches++;
        }
        EXPECT_EQ(mismatches, 0);
        EXPECT_EQ(scale, wmax);
        EXPECT_GT(wmax, 0.0f);
        // our packer writes the same weight bytes (the 28 tail bytes are garbage in bitnet.cpp's file)
        std::vector<uint8_t> repacked(bitnet_i2s_nbytes(M, K));
        ASSERT_EQ(bitnet_pack_i2s(w.data(), M, K, scale, repacked.data(), &err), BITNET_OK) << err.msg;
        EXPECT_EQ(std::memcmp(repacked.data(), q.data(tq), (size_t)(M * K / 4) + 4), 0);
        n_checked++;
    }
    EXPECT_EQ(n_checked, 14);  // 7 projections x 2 layers
}
