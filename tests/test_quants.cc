// test_quants.cc — type facts and byte sizes (base/types.h), binary16 conversion (exhaustive over all
// halves, against an independent reference written here and, where the CPU has one, the hardware
// converter), dense row conversion (incl. Q6_K), the Q8_0 and Q6_K quantizers (Q6_K pinned to ggml's bytes) and the activation quantizer of
// docs/LAYOUTS.md §1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/quants.h"
#include "test_util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace {

using bitnet_test::q6k_code_scale;
using bitnet_test::q6k_value;

uint32_t bits_of(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float float_of(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// ---- Independent reference for binary16 -------------------------------------------------------
// Value of a half from its fields, in double (exact): (-1)^s * 2^(e-15) * (1 + m/1024), subnormals
// 2^-14 * m/1024.
double ref_half_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? std::ldexp((double)m, -24) : std::ldexp(1024.0 + m, e - 25);
    return s ? -v : v;
}

// Nearest half by search over the 31744 non-negative finite halves (sorted by bit pattern), ties to
// the even pattern; >= 65520 (the midpoint between 65504 and 2^16) goes to infinity.
uint16_t ref_float_to_half(float f) {
    const uint32_t u = bits_of(f);
    const uint16_t sign = (u >> 16) & 0x8000;
    if (std::isnan(f)) return sign | 0x7e00 | ((u >> 13) & 0x3ff);
    const double a = std::fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    uint16_t lo = 0, hi = 0x7bff;  // largest h with value(h) <= a
    while (lo < hi) {
        const uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (ref_half_value(mid) <= a) lo = mid; else hi = mid - 1;
    }
    if (lo == 0x7bff) return sign | lo;
    const double d0 = a - ref_half_value(lo), d1 = ref_half_value(lo + 1) - a;
    uint16_t r = lo;
    if (d1 < d0 || (d1 == d0 && (lo & 1))) r = lo + 1;
    return sign | r;
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hw_f2h(float f) { return (uint16_t)_cvtss_sh(f, 0); }
__attribute__((target("f16c"))) float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
bool have_hw() { return __builtin_cpu_supports("f16c"); }
#elif defined(__aarch64__)
uint16_t hw_f2h(float f) {
    __fp16 h = (__fp16)f;
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}
float hw_h2f(uint16_t u) {
    __fp16 h;
    std::memcpy(&h, &u, 2);
    return (float)h;
}
bool have_hw() { return true; }
#else
uint16_t hw_f2h(float) { return 0; }
float hw_h2f(uint16_t) { return 0; }
bool have_hw() { return false; }
#endif

}  // namespace

// ---- Type facts ----------------------------------------------------------------------------------

TEST(Quants, TypeNames) {
    EXPECT_STREQ(bitnet_type_name(BITNET_TYPE_F32), "F32");
    EXPECT_STREQ(bitnet_type_name(BITNET_TYPE_F16), "F16");
    EXPECT_STREQ(bitnet_type_name(BITNET_TYPE_Q8_0), "Q8_0");
    EXPECT_STREQ(bitnet_type_name(BITNET_TYPE_Q6_K), "Q6_K");
    EXPECT_STREQ(bitnet_type_name(BITNET_TYPE_I2_S), "I2_S");
    EXPECT_STREQ(bitnet_type_name(BITNET_TYPE_TL1), "TL1");
    EXPECT_STREQ(bitnet_type_name(BITNET_TYPE_TL2), "TL2");
    EXPECT_STREQ(bitnet_type_name(30), "BF16");
    EXPECT_STREQ(bitnet_type_name(4), "unknown");  // Q4_2, removed from ggml
    EXPECT_STREQ(bitnet_type_name(41), "unknown");
    EXPECT_STREQ(bitnet_type_name(-1), "unknown");
    EXPECT_TRUE(bitnet_type_is_ternary(BITNET_TYPE_I2_S));
    EXPECT_TRUE(bitnet_type_is_ternary(BITNET_TYPE_TL1));
    EXPECT_TRUE(bitnet_type_is_ternary(BITNET_TYPE_TL2));
    EXPECT_FALSE(bitnet_type_is_ternary(BITNET_TYPE_I8_S));
    EXPECT_FALSE(bitnet_type_is_ternary(BITNET_TYPE_F32));
}

namespace {
size_t nbytes_ok(int type, std::vector<int64_t> ne) {
    size_t out = 0;
    bitnet_error err{};
    bitnet_status st = bitnet_type_nbytes(type, (int)ne.size(), ne.data(), &out, &err);
    EXPECT_EQ(st, BITNET_OK) << err.msg;
    return out;
}
bitnet_status nbytes_err(int type, std::vector<int64_t> ne, std::string *msg) {
    size_t out = 12345;
    bitnet_error err{};
    bitnet_status st = bitnet_type_nbytes(type, (int)ne.size(), ne.data(), &out, &err);
    *msg = err.msg;
    EXPECT_EQ(out, 12345u);  // untouched on failure
    return st;
}
}  // namespace

TEST(Quants, DenseSizes) {
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_F32, {3, 2}), 24u);
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_F32, {7}), 28u);
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_F16, {256, 512}), 262144u);
    EXPECT_EQ(nbytes_ok(30, {4, 2, 3}), 48u);  // BF16
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_Q8_0, {64, 3}), 2u * 34u * 3u);
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_Q4_0, {32, 1, 1, 2}), 36u);
    EXPECT_EQ(nbytes_ok(3, {32}), 20u);   // Q4_1
    EXPECT_EQ(nbytes_ok(6, {32}), 22u);   // Q5_0
    EXPECT_EQ(nbytes_ok(7, {32}), 24u);   // Q5_1
    EXPECT_EQ(nbytes_ok(10, {256}), 84u);   // Q2_K
    EXPECT_EQ(nbytes_ok(11, {256}), 110u);  // Q3_K
    EXPECT_EQ(nbytes_ok(12, {256}), 144u);  // Q4_K
    EXPECT_EQ(nbytes_ok(13, {256}), 176u);  // Q5_K
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_Q6_K, {512, 2}), 4u * 210u);
    EXPECT_EQ(nbytes_ok(15, {256}), 292u);  // Q8_K
    EXPECT_EQ(nbytes_ok(24, {5}), 5u);      // I8
    EXPECT_EQ(nbytes_ok(25, {5}), 10u);     // I16
    EXPECT_EQ(nbytes_ok(26, {5}), 20u);     // I32
    EXPECT_EQ(nbytes_ok(27, {5}), 40u);     // I64
    EXPECT_EQ(nbytes_ok(28, {5}), 40u);     // F64
    EXPECT_EQ(nbytes_ok(34, {256}), 54u);   // TQ1_0
    EXPECT_EQ(nbytes_ok(35, {256}), 66u);   // TQ2_0
}

TEST(Quants, TernarySizes) {
    // formats.md: I2_S and TL1 M*K/4 + 32 (the tiny model's blk.0.ffn_down: K = 768, M = 256).
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_I2_S, {768, 256}), 768u * 256u / 4u + 32u);
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_TL1, {1536, 4096}), 1536u * 4096u / 4u + 32u);
    // TL2: pad32((K-256)*M/3*5/8 + 256*M/2*4/8) + 32, computed by hand:
    // K=256, M=32: 0 + 256*32/2*4/8 = 2048 → 2048 + 32.
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_TL2, {256, 32}), 2080u);
    // K=1536, M=1536: 1280*1536 = 1966080, /3 = 655360, *5 = 3276800, /8 = 409600; + 98304 = 507904.
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_TL2, {1536, 1536}), 507936u);
    // K=288, M=32: 32*32 = 1024, /3 = 341, *5 = 1705, /8 = 213; + 2048 = 2261 → pad32 2272, + 32.
    EXPECT_EQ(nbytes_ok(BITNET_TYPE_TL2, {288, 32}), 2304u);
}

// the traits table: one entry per known id, its name and id agree, and the ternary shape sizes of
// bitnet_ternary_nbytes are the ones bitnet_type_nbytes gives for ne = [K, M]
TEST(Quants, TraitsTable) {
    for (int t = 0; t < 64; t++) {
        const bitnet_type_traits *tr = bitnet_type_traits_of(t);
        if (!tr) {
            EXPECT_STREQ(bitnet_type_name(t), "unknown") << t;
            continue;
        }
        EXPECT_EQ(tr->type, t);
        EXPECT_STREQ(bitnet_type_name(t), tr->name);
        EXPECT_EQ(bitnet_type_is_ternary(t), tr->kind == BITNET_KIND_TERNARY) << tr->name;
    }
    EXPECT_EQ(bitnet_type_traits_of(4), nullptr);
    EXPECT_EQ(bitnet_type_traits_of(-1), nullptr);
    EXPECT_EQ(bitnet_type_traits_of(BITNET_TYPE_Q6_K)->dense_dot_type, BITNET_TYPE_Q6_K);
    EXPECT_EQ(bitnet_type_traits_of(BITNET_TYPE_Q8_0)->dense_dot_type, BITNET_TYPE_Q8_0);
    EXPECT_EQ(bitnet_type_traits_of(BITNET_TYPE_BF16)->dense_dot_type, BITNET_TYPE_BF16);
    const int64_t shapes[][2] = {{256, 256}, {2560, 2560}, {6912, 2560}, {2560, 6912}, {32, 8640}, {3, 300}};
    for (int type : {BITNET_TYPE_I2_S, BITNET_TYPE_TL1, BITNET_TYPE_TL2}) {
        for (const auto &mk : shapes) {
            const int64_t ne[2] = {mk[1], mk[0]};
            size_t n = 0;
            bitnet_error err{};
            if (bitnet_type_nbytes(type, 2, ne, &n, &err) != BITNET_OK) continue;
            EXPECT_EQ(bitnet_ternary_nbytes(type, mk[0], mk[1]), n) << bitnet_type_name(type) << " " << mk[0];
            EXPECT_EQ(bitnet_ternary_data_bytes(type, mk[0], mk[1]) + 32, n);
        }
    }
    EXPECT_EQ(bitnet_ternary_nbytes(BITNET_TYPE_TL2, 32, 200), 0u);
    EXPECT_EQ(bitnet_ternary_nbytes(BITNET_TYPE_F16, 32, 256), 0u);
}

TEST(Quants, SizeErrors) {
    std::string msg;
    EXPECT_EQ(nbytes_err(41, {32}, &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(msg.find("41"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(4, {32}, &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_EQ(nbytes_err(-3, {32}, &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_EQ(nbytes_err(BITNET_TYPE_I8_S, {32}, &msg), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(msg.find("I8_S"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(BITNET_TYPE_Q8_0, {48}, &msg), BITNET_ERR_FORMAT);
    EXPECT_NE(msg.find("ne[0] = 48"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(BITNET_TYPE_F32, {4, 0}, &msg), BITNET_ERR_FORMAT);
    EXPECT_NE(msg.find("ne[1] = 0"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(BITNET_TYPE_F32, {-4}, &msg), BITNET_ERR_FORMAT);
    EXPECT_EQ(nbytes_err(BITNET_TYPE_F32, {1, 1, 1, 1, 1}, &msg), BITNET_ERR_FORMAT);
    EXPECT_NE(msg.find("n_dims = 5"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(BITNET_TYPE_F32, {}, &msg), BITNET_ERR_FORMAT);
    EXPECT_EQ(nbytes_err(BITNET_TYPE_F32, {INT64_MAX / 2, 4}, &msg), BITNET_ERR_FORMAT);
    EXPECT_NE(msg.find("overflow"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(BITNET_TYPE_F16, {1 << 20, 1 << 20, 1 << 20, 1 << 20}, &msg), BITNET_ERR_FORMAT);
    EXPECT_EQ(nbytes_err(BITNET_TYPE_I2_S, {768}, &msg), BITNET_ERR_FORMAT);
    EXPECT_NE(msg.find("2-D"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(BITNET_TYPE_I2_S, {100, 3}, &msg), BITNET_ERR_FORMAT);  // 300 % 128 != 0
    EXPECT_EQ(nbytes_err(BITNET_TYPE_TL1, {3, 3}, &msg), BITNET_ERR_FORMAT);
    EXPECT_EQ(nbytes_err(BITNET_TYPE_TL2, {128, 32}, &msg), BITNET_ERR_FORMAT);
    EXPECT_NE(msg.find("256"), std::string::npos) << msg;
    EXPECT_EQ(nbytes_err(BITNET_TYPE_I2_S, {INT64_MAX / 4, INT64_MAX / 4}, &msg), BITNET_ERR_FORMAT);
    EXPECT_EQ(nbytes_err(BITNET_TYPE_TL2, {INT64_MAX / 4, 1 << 20}, &msg), BITNET_ERR_FORMAT);
}

// ---- binary16 ------------------------------------------------------------------------------------

TEST(Fp16, AllHalvesToFloatExact) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = bitnet_fp16_to_fp32((uint16_t)h);
        const int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31 && m != 0) {
            ASSERT_TRUE(std::isnan(f)) << h;
            // sign and payload are kept (the 10 fraction bits become the top of the float's fraction)
            // and the NaN is quiet, as the hardware converters do
            ASSERT_EQ(bits_of(f), ((h & 0x8000u) << 16) | 0x7fc00000u | ((uint32_t)m << 13)) << h;
        } else {
            const double ref = ref_half_value((uint16_t)h);
            ASSERT_EQ((double)f, e == 31 ? ((h & 0x8000) ? -INFINITY : INFINITY) : ref) << h;
            ASSERT_EQ(std::signbit(f), (h & 0x8000) != 0) << h;  // includes -0
        }
        // every half survives the round trip bit for bit (NaNs: the quiet bit gets set)
        const uint16_t back = bitnet_fp32_to_fp16(f);
        if (e == 31 && m != 0) {
            ASSERT_EQ(back, h | 0x200u) << h;
        } else {
            ASSERT_EQ(back, h) << h;
        }
    }
}

TEST(Fp16, FloatToHalfRoundsToNearestEven) {
    // For every pair of adjacent non-negative halves (incl. subnormals and 65504 → inf), the exact
    // midpoint and its float neighbours; then both signs.
    size_t checked = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        const double lo = ref_half_value((uint16_t)h);
        const double hi = h == 0x7bff ? 65536.0 : ref_half_value((uint16_t)(h + 1));
        const float mid = (float)((lo + hi) / 2);  // exact: needs at most 12 significant bits
        ASSERT_EQ((double)mid, (lo + hi) / 2);
        const float cand[] = {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY), (float)lo,
                              std::nextafter((float)lo, INFINITY)};
        for (float c : cand) {
            for (float v : {c, -c}) {
                ASSERT_EQ(bitnet_fp32_to_fp16(v), ref_float_to_half(v)) << "float bits " << std::hex << bits_of(v);
                checked++;
            }
        }
    }
    // midpoint ties by hand: 1 + 2^-11 is halfway between 1 and 1+2^-10 → even (1.0 = 0x3c00);
    // 1 + 3*2^-11 → 0x3c02; 65520 → inf; 2^-25 → 0; 3*2^-26 → smallest subnormal 0x0001.
    EXPECT_EQ(bitnet_fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
    EXPECT_EQ(bitnet_fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
    EXPECT_EQ(bitnet_fp32_to_fp16(65520.0f), 0x7c00);
    EXPECT_EQ(bitnet_fp32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
    EXPECT_EQ(bitnet_fp32_to_fp16(-65520.0f), 0xfc00);
    EXPECT_EQ(bitnet_fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);
    EXPECT_EQ(bitnet_fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ(bitnet_fp32_to_fp16(3 * std::ldexp(1.0f, -26)), 0x0001);
    EXPECT_EQ(bitnet_fp32_to_fp16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);  // rounds up to normal
    EXPECT_EQ(bitnet_fp32_to_fp16(INFINITY), 0x7c00);
    EXPECT_EQ(bitnet_fp32_to_fp16(-INFINITY), 0xfc00);
    EXPECT_EQ(bitnet_fp32_to_fp16(-0.0f), 0x8000);
    EXPECT_EQ(bitnet_fp32_to_fp16(float_of(0x00000001u)), 0x0000);  // float subnormal
    EXPECT_EQ(bitnet_fp32_to_fp16(float_of(0x7fc00000u)), 0x7e00);  // quiet NaN
    EXPECT_EQ(bitnet_fp32_to_fp16(float_of(0xff800001u)), 0xfe00);  // signalling NaN, low payload
    EXPECT_EQ(bitnet_fp32_to_fp16(float_of(0x7fa02000u)), 0x7f01);  // payload kept, quiet bit set
    EXPECT_GT(checked, 300000u);
}

TEST(Fp16, FloatToHalfSampledSweep) {
    // A strided sweep over all 2^32 float patterns (every exponent, many fractions).
    for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
        const float f = float_of((uint32_t)u);
        ASSERT_EQ(bitnet_fp32_to_fp16(f), ref_float_to_half(f)) << "float bits " << std::hex << u;
    }
}

TEST(Fp16, MatchesHardwareConverter) {
    if (!have_hw()) GTEST_SKIP() << "no hardware half converter on this CPU";
    for (uint32_t h = 0; h < 65536; h++) {
        const float a = bitnet_fp16_to_fp32((uint16_t)h), b = hw_h2f((uint16_t)h);
        ASSERT_EQ(bits_of(a), bits_of(b)) << h;
    }
    for (uint64_t u = 0; u < (1ull << 32); u += 65521) {
        const float f = float_of((uint32_t)u);
        ASSERT_EQ(bitnet_fp32_to_fp16(f), hw_f2h(f)) << "float bits " << std::hex << u;
    }
}

// ---- rows ----------------------------------------------------------------------------------------

TEST(Quants, RowToF32) {
    bitnet_error err{};
    const uint16_t h[4] = {0x3c00, 0xc000, 0x3555, 0x0001};  // 1, -2, 0.333251953125, 2^-24
    float out[4];
    ASSERT_EQ(bitnet_row_to_f32(BITNET_TYPE_F16, h, out, 4, &err), BITNET_OK);
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], -2.0f);
    EXPECT_EQ(out[2], 0.333251953125f);
    EXPECT_EQ(out[3], std::ldexp(1.0f, -24));

    const float f[3] = {1.5f, -0.25f, 3e38f};
    float g[3];
    ASSERT_EQ(bitnet_row_to_f32(BITNET_TYPE_F32, f, g, 3, &err), BITNET_OK);
    EXPECT_EQ(std::memcmp(f, g, sizeof f), 0);

    const uint16_t bf[2] = {0x3fc0, 0xc120};  // 1.5, -10
    ASSERT_EQ(bitnet_row_to_f32(30, bf, g, 2, &err), BITNET_OK);
    EXPECT_EQ(g[0], 1.5f);
    EXPECT_EQ(g[1], -10.0f);

    // Q8_0, two blocks, read from an odd (unaligned) address
    std::vector<uint8_t> buf(1 + 2 * 34);
    uint8_t *p = buf.data() + 1;
    const uint16_t d0 = 0x3800, d1 = 0xb400;  // 0.5, -0.25
    std::memcpy(p, &d0, 2);
    std::memcpy(p + 34, &d1, 2);
    for (int j = 0; j < 32; j++) {
        p[2 + j] = (uint8_t)(int8_t)(j - 16);
        p[36 + j] = (uint8_t)(int8_t)(j * 4 - 127 + (j == 31 ? 130 : 0));
    }
    std::vector<float> q(64);
    ASSERT_EQ(bitnet_row_to_f32(BITNET_TYPE_Q8_0, p, q.data(), 64, &err), BITNET_OK);
    for (int j = 0; j < 32; j++) {
        EXPECT_EQ(q[j], 0.5f * (float)(j - 16)) << j;
        EXPECT_EQ(q[32 + j], -0.25f * (float)(int8_t)(j * 4 - 127 + (j == 31 ? 130 : 0))) << j;
    }

    EXPECT_EQ(bitnet_row_to_f32(BITNET_TYPE_Q8_0, p, q.data(), 40, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(bitnet_row_to_f32(BITNET_TYPE_I2_S, p, q.data(), 32, &err), BITNET_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(err.msg).find("I2_S"), std::string::npos) << err.msg;
}

// Q6_K rows convert by the layout of quants.h: code c of weight i, value d * scales[i / 16] * (c - 32)
TEST(Quants, RowToF32Q6K) {
    std::vector<uint8_t> buf(1 + 2 * sizeof(bitnet_block_q6_k), 0);
    uint8_t *p = buf.data() + 1;  // unaligned
    auto code = [](int b, int i) { return (i * 7 + b * 13) % 64; };
    for (int b = 0; b < 2; b++) {
        bitnet_block_q6_k blk;
        std::memset(&blk, 0, sizeof blk);
        for (int i = 0; i < 256; i++) {
            const int h = i / 128, r = i % 128, l = r % 32, quarter = r / 32, c = code(b, i);
            uint8_t *ql = blk.ql + 64 * h + l + (quarter & 1) * 32;
            *ql |= (uint8_t)((c & 15) << (quarter >= 2 ? 4 : 0));
            blk.qh[32 * h + l] |= (uint8_t)((c >> 4) << (2 * quarter));
        }
        for (int g = 0; g < 16; g++) blk.scales[g] = (int8_t)(g - 8 + b);
        blk.d = b == 0 ? 0x3800 : 0xc000;  // 0.5, -2
        std::memcpy(p + b * sizeof blk, &blk, sizeof blk);
    }
    std::vector<float> y(512);
    bitnet_error err{};
    ASSERT_EQ(bitnet_row_to_f32(BITNET_TYPE_Q6_K, p, y.data(), 512, &err), BITNET_OK) << err.msg;
    for (int b = 0; b < 2; b++) {
        const float d = b == 0 ? 0.5f : -2.0f;
        for (int i = 0; i < 256; i++) {
            EXPECT_EQ(y[b * 256 + i], d * (float)(i / 16 - 8 + b) * (float)(code(b, i) - 32)) << b << " " << i;
        }
    }
    EXPECT_EQ(bitnet_row_to_f32(BITNET_TYPE_Q6_K, p, y.data(), 300, &err), BITNET_ERR_INVALID_ARG);

    // the quantizer's blocks decode within |d * scale| / 2 of the input
    std::vector<float> x(256);
    for (int i = 0; i < 256; i++) x[i] = std::sin(0.37f * (float)i) * (1.0f + (float)(i % 16));
    bitnet_block_q6_k q6;
    ASSERT_EQ(bitnet_quantize_row_q6_k(x.data(), &q6, 256, &err), BITNET_OK);
    ASSERT_EQ(bitnet_row_to_f32(BITNET_TYPE_Q6_K, &q6, y.data(), 256, &err), BITNET_OK);
    const float dq = bitnet_fp16_to_fp32(q6.d);
    for (int i = 0; i < 256; i++) {
        const float ds = dq * (float)q6.scales[i / 16], r = x[i] / ds;
        if (r >= -32.5f && r <= 31.5f) {
            EXPECT_LE(std::fabs(y[i] - x[i]), std::fabs(ds) / 2 * 1.0001f) << i;
        }
    }
}

TEST(Quants, QuantizeQ8_0) {
    // block 0: max|x| = 12.7 → d = 0.1, q = round-half-away(x / d) (ggml's reference quantizer)
    std::vector<float> x(64, 0.0f);
    x[0] = 12.7f;
    x[1] = -12.7f;
    x[2] = 1.0f;  // 1.0 / 0.1 → 10
    x[3] = 0.25f;
    x[4] = -0.35f;
    // block 1: all zero → d = 0, q = 0
    std::vector<bitnet_block_q8_0> b(2);
    bitnet_quantize_row_q8_0(x.data(), b.data(), 64);
    const float d = 12.7f / 127.0f;
    EXPECT_EQ(b[0].d, bitnet_fp32_to_fp16(d));
    const float id = 1.0f / d;
    for (int j = 0; j < 32; j++) EXPECT_EQ(b[0].qs[j], (int8_t)std::round(x[j] * id)) << j;
    EXPECT_EQ(b[0].qs[0], 127);
    EXPECT_EQ(b[0].qs[1], -127);
    EXPECT_EQ(b[0].qs[2], 10);
    EXPECT_EQ(b[1].d, 0);
    for (int j = 0; j < 32; j++) EXPECT_EQ(b[1].qs[j], 0);
    // round trip through row_to_f32 is within d/2 per element
    std::vector<float> y(64);
    bitnet_error err{};
    ASSERT_EQ(bitnet_row_to_f32(BITNET_TYPE_Q8_0, b.data(), y.data(), 64, &err), BITNET_OK);
    for (int j = 0; j < 64; j++) EXPECT_NEAR(y[j], x[j], 0.0501) << j;
}

// ---- Q6_K quantizer (ggml's quantize_row_q6_K_ref) -------------------------------------------------

// Test inputs from integer arithmetic only (no libm), so they are the same floats on every ISA.
struct Lcg {
    uint32_t s;
    uint32_t next() { return s = s * 1664525u + 1013904223u; }
    // uniform in [-1, 1): a 24-bit integer times 2^-23 (exact)
    float unif() { return (float)((int32_t)(next() >> 8) - 8388608) * (1.0f / 8388608.0f); }
    // roughly normal: four uniforms summed in this order
    float gauss() {
        float a = unif();
        a += unif();
        a += unif();
        a += unif();
        return a;
    }
};

// Block b (256 floats) of the pinned input: each block one case the quantizer must get right.
void q6k_pinned_block(int b, float *x) {
    Lcg g{0x9e3779b9u + (uint32_t)b * 2654435761u};
    for (int i = 0; i < 256; i++) x[i] = 0.0f;
    switch (b) {
    case 0: break;                                                            // all zero
    case 1: for (int i = 0; i < 256; i++) x[i] = 1.0f; break;                 // constant
    case 2: for (int i = 0; i < 256; i++) x[i] = -3.75f; break;               // negative constant
    case 3: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 4e-15f; break;   // group scales near the 1e-15 eps
    case 4: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 1e-20f; break;   // below eps: a zero block
    case 5: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 1e-6f; break;    // d rounds to fp16 -0
    case 6: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 1e-9f; break;    // d underflows fp16
    case 7: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 3e4f; break;     // large
    case 8: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 1e9f; break;     // d overflows fp16 to inf
    case 9: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 1e30f; break;    // x^2 overflows float
    case 10: for (int i = 0; i < 256; i++) x[i] = g.gauss(); break;           // mixed signs
    case 11:                                                                  // one outlier per group
        for (int i = 0; i < 256; i++) x[i] = g.gauss() * 0.01f;
        for (int k = 0; k < 16; k++) x[16 * k + (k * 7) % 16] = (k & 1 ? -5.0f : 5.0f) * (1.0f + 0.05f * (float)k);
        break;
    case 12:  // ties: max -32 gives iscale = 1, the other values are half-integers
        for (int k = 0; k < 16; k++)
            for (int i = 0; i < 16; i++)
                x[16 * k + i] = i == k ? -32.0f : (float)((int)(g.next() >> 26) - 32) + 0.5f;
        break;
    case 13: for (int i = 0; i < 256; i++) x[i] = (float)((int)(g.next() >> 26) - 32); break;  // integer grid
    case 14:  // groups 2^-g apart: small groups' scales round to 0 (their step-1 codes stay)
        for (int i = 0; i < 256; i++) x[i] = g.gauss() * (float)(1.0 / (double)(1u << (i / 16)));
        break;
    case 15: for (int i = 0; i < 256; i++) x[i] = (g.unif() + 1.0f) * 0.5f; break;   // positive only
    case 16: for (int i = 0; i < 256; i++) x[i] = -(g.unif() + 1.0f) * 2.0f; break;  // negative only
    case 17: for (int i = 0; i < 256; i += 37) x[i] = g.gauss(); break;              // sparse
    case 18: for (int i = 0; i < 256; i++) x[i] = (i / 16) % 2 ? g.gauss() * 0.1f : 0.0f; break;  // zero groups
    case 19: for (int i = 0; i < 256; i++) x[i] = i == 200 ? 100.0f : g.gauss() * 0.01f; break;  // block outlier
    case 20: for (int i = 0; i < 256; i++) x[i] = g.gauss() * (i % 2 ? 1.0f : -1.0f) * 0.02f; break;
    case 21: for (int i = 0; i < 256; i++) x[i] = (float)(i % 16) - 7.5f; break;    // ramp: ties in every group
    case 22: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 65504.0f; break;      // fp16-max magnitudes
    default: for (int i = 0; i < 256; i++) x[i] = g.gauss() * 0.05f; break;        // embedding-like
    }
}
constexpr int kQ6kPinnedBlocks = 24;

// 2^e for -126 <= e <= 127, from the bits
float pow2f(int e) { return float_of((uint32_t)(e + 127) << 23); }

// Block b of the pinned random sweep: a distribution ("kind") and an exponent drawn from g, 256 values.
void q6k_sweep_block(Lcg &g, int b, float *xb) {
    const int kind = (int)(g.next() >> 28);
    const float sc = pow2f((int)(g.next() >> 25) - 64);  // 2^-64 .. 2^63
    for (int i = 0; i < 256; i++) {
        float v;
        switch (kind) {
        case 0: v = g.gauss() * sc; break;
        case 1: v = g.unif() * sc; break;
        case 2: v = (g.next() >> 29) == 0 ? g.gauss() * sc : 0.0f; break;                 // sparse
        case 3: v = (float)((int)(g.next() >> 26) - 32) * (i % 3 ? 1.0f : 0.5f); break;  // grid
        case 4: v = (float)((int)(g.next() >> 26) - 32) + 0.5f; break;                   // ties
        case 5: v = g.gauss() * pow2f((int)(g.next() >> 27) - 16); break;                // per-value scale
        case 6: v = (i % 16 == (b % 16)) ? sc : g.gauss() * sc * 0.001f; break;          // outliers
        case 7: v = ((i / 16) % 3 == 0) ? 0.0f : g.gauss() * sc; break;                  // zero groups
        case 8: v = g.gauss() * 0.02f; break;                                            // embedding-like
        case 9: v = (float)(i % 16) * sc - 7.5f * sc; break;                             // ramps
        case 10: v = g.gauss() * pow2f(-(i / 16) * 2); break;                            // fading groups
        case 11: v = float_of(g.next()); if (v != v) v = 0.0f; break;                    // any bits but NaN
        case 12: v = i == 5 ? INFINITY : g.gauss(); break;
        case 13: v = i == 9 ? NAN : g.gauss(); break;
        case 14: v = (g.next() & 1) ? 3.0e38f : -3.0e38f; break;
        default: v = g.gauss() * 1e-15f * (float)(1 + i % 7); break;                    // near eps
        }
        xb[i] = v;
    }
}
constexpr int kQ6kSweepBlocks = 8192;

uint64_t fnv1a64(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

TEST(QuantizeQ6K, PinnedBlocksAreGgmls) {
    // FNV-1a-64 of the blocks ggml's quantize_row_q6_K_ref wrote for these inputs (the 24 case blocks,
    // 5040 bytes; the 8192-block sweep, 1.7 MB): checked byte for byte against ggml-org/ggml at commit
    // d99724f2b141fed9e1a9f402213506c081433465 (2026-08-21; libggml-base built by its own CMake, Release,
    // x86-64 without FMA) on 2026-12-01, with 262144 further random blocks of the same generator: all
    // identical. Built with FMA contraction (-march=native -ffp-contract=fast) 2.5 % of those blocks
    // differ; with a one-ulp change of iscale = -128/s_max, 3 % (251 of the sweep's). bitnet.cpp's
    // llama.cpp (Eddie-Wang1120/llama.cpp merge-dev) has the same make_qx_quants / quantize_row_q6_K_ref.
    // The aarch64 build checks the same hashes under qemu.
    std::vector<float> x(256 * kQ6kPinnedBlocks);
    for (int b = 0; b < kQ6kPinnedBlocks; b++) q6k_pinned_block(b, x.data() + 256 * b);
    std::vector<bitnet_block_q6_k> y(kQ6kPinnedBlocks);
    bitnet_error err{};
    ASSERT_EQ(bitnet_quantize_row_q6_k(x.data(), y.data(), (int64_t)x.size(), &err), BITNET_OK) << err.msg;
    EXPECT_EQ(fnv1a64(y.data(), y.size() * sizeof y[0]), 0x396b11b842c8df15ull);
    // a few fields of those blocks, readable: constant 1.0 → d = 2^-12 (fp16 0x0c00), every scale -128,
    // every code 0 (value d·(-128)·(0-32) = 1)
    EXPECT_EQ(y[1].d, 0x0c00);
    for (int g = 0; g < 16; g++) EXPECT_EQ(y[1].scales[g], -128) << g;
    for (int i = 0; i < 256; i++) EXPECT_EQ(q6k_value(y[1], i), 1.0f) << i;
    EXPECT_EQ(y[8].d, 0xfc00);  // -inf: 1e9-sized values need a scale beyond fp16 (ggml stores it so)
    EXPECT_EQ(y[5].d, 0x8000);  // -0: d underflows, and the block decodes to zeros
    EXPECT_EQ(fnv1a64(&y[0], sizeof y[0]), fnv1a64(&y[4], sizeof y[4]));  // zeros and sub-eps: same block

    std::vector<float> xs((size_t)256 * kQ6kSweepBlocks);
    Lcg g{2026};
    for (int b = 0; b < kQ6kSweepBlocks; b++) q6k_sweep_block(g, b, xs.data() + 256 * b);
    std::vector<bitnet_block_q6_k> ys(kQ6kSweepBlocks);
    ASSERT_EQ(bitnet_quantize_row_q6_k(xs.data(), ys.data(), (int64_t)xs.size(), &err), BITNET_OK) << err.msg;
    EXPECT_EQ(fnv1a64(ys.data(), ys.size() * sizeof ys[0]), 0x990e2526595627cdull);
}

TEST(QuantizeQ6K, ZeroAndSubEpsilonBlocksAreAllZero) {
    std::vector<float> x(512, 0.0f);
    for (int i = 256; i < 512; i++) x[i] = (i % 2 ? 1e-16f : -3e-17f);  // every group scale < 1e-15
    std::vector<bitnet_block_q6_k> y(2);
    std::memset(y.data(), 0xA5, y.size() * sizeof y[0]);
    bitnet_error err{};
    ASSERT_EQ(bitnet_quantize_row_q6_k(x.data(), y.data(), 512, &err), BITNET_OK);
    for (const bitnet_block_q6_k &b : y) {
        EXPECT_EQ(b.d, 0);
        const unsigned char *p = (const unsigned char *)&b;
        for (size_t i = 0; i < sizeof b; i++) ASSERT_EQ(p[i], 0) << i;
    }
}

TEST(QuantizeQ6K, ConstantRowsKeepFp16Precision) {
    // x = c everywhere: the exact fit is scale -c/32 (every code -32), sub-scale -128 and d = fp16(c/4096),
    // so each value decodes as 4096 · fp16(c/4096): c within fp16's rounding of c/4096 — relative 2^-11
    // while c/4096 is a normal half (|c| >= 0.25), absolute 4096 · 2^-25 = 2^-13 below (a subnormal d).
    for (float c : {1.0f, -3.75f, 0.25f, 1234.5f, 0.1f, 7e-3f, -2e-2f}) {
        std::vector<float> x(256, c);
        bitnet_block_q6_k b;
        bitnet_error err{};
        ASSERT_EQ(bitnet_quantize_row_q6_k(x.data(), &b, 256, &err), BITNET_OK);
        const double bound = std::max(std::fabs(c) * std::ldexp(1.0, -11), std::ldexp(1.0, -13)) * (1 + 1e-6);
        for (int i = 0; i < 256; i++) {
            int q, sc;
            q6k_code_scale(b, i, &q, &sc);
            ASSERT_EQ(sc, -128) << c;
            ASSERT_EQ(q, 0) << c;
            ASSERT_LE(std::fabs((double)q6k_value(b, i) - c), bound) << c;
        }
    }
}

TEST(QuantizeQ6K, DecodedErrorWithinTheScaleBound) {
    // Gaussian rows at scales 2^-24..2^11 and rows with outliers. Value i of group g decodes as
    // d_g·(q - 32) with d_g = fp16(d)·scales[g]. A code inside 1..62 is round(x/d_g) + 32, so
    // |x - x̂| <= |d_g|/2 (+ float rounding of x/d_g and of the product: 2^-20 relative); an end code
    // (0 or 63) is the clamp of x/d_g <= -32.5 or >= 31.5, or within |d_g|/2 of the end itself.
    // d = fp16(s_max/128) with s_max ≈ max|x|/32: a block whose max|x| is below about 4096·2^-25
    // (1.2e-4) gets d = 0 and decodes to zeros, so its error is |x| itself, below 34·128·2^-25.
    // Where d is a normal half (max|x| >= ~0.25) every d_g tracks the group's least-squares scale s_g,
    // and the relative L2 error of a gaussian row is that of a 64-level grid over the group: below 3 %.
    Lcg g{77};
    double err2 = 0.0, ref2 = 0.0;
    int zero_blocks = 0;
    for (int rep = 0; rep < 500; rep++) {
        const int e = (int)(g.next() >> 27) - 24;  // 2^-24 .. 2^7
        const float scale = std::ldexp(1.0f, e);
        const bool outliers = rep % 4 == 3;
        std::vector<float> x(1024);
        for (size_t i = 0; i < x.size(); i++)
            x[i] = g.gauss() * scale * (outliers && i % 61 == 0 ? 20.0f : 1.0f);
        std::vector<bitnet_block_q6_k> y(4);
        bitnet_error err{};
        ASSERT_EQ(bitnet_quantize_row_q6_k(x.data(), y.data(), 1024, &err), BITNET_OK);
        for (int b = 0; b < 4; b++) {
            const float d = bitnet_fp16_to_fp32(y[b].d);
            zero_blocks += d == 0.0f;
            for (int i = 0; i < 256; i++) {
                const float v = x[256 * b + i];
                int q, sc;
                q6k_code_scale(y[b], i, &q, &sc);
                const float dg = d * (float)sc;
                const float xh = q6k_value(y[b], i);
                const double err_i = std::fabs((double)v - xh), half = 0.5 * std::fabs((double)dg) * (1.0 + 1e-6);
                if (!outliers && e >= -2) {
                    err2 += err_i * err_i;
                    ref2 += (double)v * v;
                }
                if (d == 0.0f) {
                    ASSERT_EQ(xh, 0.0f);
                    ASSERT_LE(std::fabs(v), 34 * 128 * std::ldexp(1.0f, -25)) << rep << " " << i;
                    continue;
                }
                if (dg == 0.0f) {
                    // scales[g] rounded to 0: |s_g| < |s_max|/256 ≈ |d|/2, and a group's values stay
                    // within about 34·|s_g| (its largest maps to code 0 or 1), so |x| < 17·|d|
                    ASSERT_LE(std::fabs(v), std::fabs(d) * 18.0f) << rep << " " << i;
                    continue;
                }
                const double t = (double)v / dg;
                if (q > 0 && q < 63) {
                    ASSERT_LE(err_i, half) << "rep " << rep << " value " << 256 * b + i << " code " << q;
                } else {
                    ASSERT_TRUE(err_i <= half || (q == 0 && t <= -32.5) || (q == 63 && t >= 31.5))
                        << "rep " << rep << " value " << 256 * b + i << " code " << q << " x/d " << t;
                }
            }
        }
    }
    EXPECT_GT(zero_blocks, 0);  // the sweep reaches the d = 0 range
    const double rel = std::sqrt(err2 / ref2);
    EXPECT_LT(rel, 0.03);
    EXPECT_GT(rel, 0.001);  // and it does quantize
}

TEST(QuantizeQ6K, RowLengthMustBeWholeBlocks) {
    std::vector<float> x(300, 1.0f);
    bitnet_block_q6_k b[2];
    std::memset(b, 0x5A, sizeof b);
    bitnet_error err{};
    EXPECT_EQ(bitnet_quantize_row_q6_k(x.data(), b, 300, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("300"), std::string::npos) << err.msg;
    EXPECT_NE(std::string(err.msg).find("256"), std::string::npos) << err.msg;
    EXPECT_EQ(((unsigned char *)b)[0], 0x5A);  // nothing written
    EXPECT_EQ(bitnet_quantize_row_q6_k(x.data(), b, -256, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(bitnet_quantize_row_q6_k(x.data(), b, 0, &err), BITNET_OK);
    EXPECT_EQ(sizeof(bitnet_block_q6_k), 210u);
}

// ---- activation quantizer (LAYOUTS.md §1) ----------------------------------------------------------

TEST(QuantizeAct, HalfEvenAndScale) {
    // max|x| = 127 → s = 1 exactly; x*s = x, so the rounding of ties is visible.
    const float x[] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -2.5f, -3.5f, 3.49f, -127.0f, 126.5f, 0.0f, -0.0f};
    const int8_t want[] = {127, 0, 2, 2, 0, -2, -4, 3, -127, 126, 0, 0};
    const int64_t K = sizeof x / sizeof x[0];
    std::vector<int8_t> q(K, 99);
    const float s = bitnet_quantize_act(x, K, q.data());
    EXPECT_EQ(s, 1.0f);
    for (int64_t k = 0; k < K; k++) EXPECT_EQ(q[k], want[k]) << k;
}

TEST(QuantizeAct, GeneralScaleIsFloat32Division) {
    std::vector<float> x = {0.3f, -1.7f, 0.01f, 1.69f, -0.85f, 0.0f, 1e-7f, -1.7f};
    std::vector<int8_t> q(x.size());
    const float s = bitnet_quantize_act(x.data(), (int64_t)x.size(), q.data());
    const float want_s = 127.0f / 1.7f;
    EXPECT_EQ(bits_of(s), bits_of(want_s));
    for (size_t k = 0; k < x.size(); k++) {
        const float p = x[k] * want_s;  // one float multiply
        const float r = std::nearbyint(p);
        EXPECT_EQ(q[k], (int8_t)r) << k;
    }
    EXPECT_EQ(q[1], -127);
    EXPECT_EQ(q[7], -127);
    EXPECT_EQ(q[0], 22);  // 0.3 * 74.70588 = 22.41
    EXPECT_EQ(q[5], 0);
}

TEST(QuantizeAct, ZeroColumnAndTinyValues) {
    std::vector<float> x(64, 0.0f);
    std::vector<int8_t> q(64, 5);
    float s = bitnet_quantize_act(x.data(), 64, q.data());
    EXPECT_EQ(s, 127.0f / 1e-5f);
    EXPECT_TRUE(std::isfinite(s));
    for (int8_t v : q) EXPECT_EQ(v, 0);
    // below the 1e-5 floor the scale stays at 1.27e7: 5e-6 → 63.5 → 64 (even)
    x[3] = 5e-6f;
    s = bitnet_quantize_act(x.data(), 64, q.data());
    EXPECT_EQ(s, 127.0f / 1e-5f);
    EXPECT_EQ(q[3], (int8_t)std::nearbyint(5e-6f * s));
    // empty column
    EXPECT_EQ(bitnet_quantize_act(x.data(), 0, q.data()), 127.0f / 1e-5f);
}

TEST(QuantizeAct, NeverMinus128AndNonFinite) {
    // values whose product with s would round past ±127 cannot exist (|x·s| ≤ 127(1+2^-23)), but the
    // clamp still holds for a random sweep; NaN maps to 0; an inf column gives s = 0 and q = 0 except
    // the (NaN-producing) inf entries, which also map to 0.
    uint64_t st = 12345;
    for (int rep = 0; rep < 200; rep++) {
        std::vector<float> x(96);
        for (float &v : x) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            v = (float)((int64_t)(st >> 11) % 2000001 - 1000000) * 1e-3f;
        }
        std::vector<int8_t> q(96);
        const float s = bitnet_quantize_act(x.data(), 96, q.data());
        int maxabs = 0;
        for (size_t k = 0; k < 96; k++) {
            ASSERT_GE(q[k], -127);
            ASSERT_EQ(q[k], (int8_t)std::nearbyint(x[k] * s));
            maxabs = std::max(maxabs, std::abs((int)q[k]));
        }
        ASSERT_EQ(maxabs, 127);
    }
    const float y[] = {NAN, 2.0f, -1.0f};
    int8_t q[3];
    const float s = bitnet_quantize_act(y, 3, q);
    EXPECT_EQ(s, 63.5f);
    EXPECT_EQ(q[0], 0);
    EXPECT_EQ(q[1], 127);
    EXPECT_EQ(q[2], -64);  // -63.5 → -64 (even)
    const float z[] = {INFINITY, 1.0f};
    const float s2 = bitnet_quantize_act(z, 2, q);
    EXPECT_EQ(s2, 0.0f);
    EXPECT_EQ(q[0], 0);
    EXPECT_EQ(q[1], 0);
}
