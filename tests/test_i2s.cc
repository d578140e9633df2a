// test_i2s.cc — every I2_S × int8 kernel version this CPU runs (src/kernels/i2s/: portable C, AVX2, AVX-512
// VNNI, NEON) against bitnet_ref_gemm_rows (the layout's readable definition, src/kernels/lut/lut_ref.c) and a
// plain product on unpacked ternary weights: int32 sums must be equal, for N = 1..33 columns (the AVX-512
// kernel reads packed bytes for N < 16 and decodes them once for N ≥ 16), partial row
// ranges, odd row counts (register-block tails), K % 64 == 32 (a half 64-byte step), K % 128 ≠ 0
// (rows straddling 128-weight blocks), K % 32 ≠ 0 (the portable version, also the SIMD versions' fallback),
// K bigger than one decoded slice, extremes ±127/−128 and zeros, byte-aligned buffers (portable).
// Also the ISA names, the BITNET_ISA cap and bitnet_cpu_supports("avx512").
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/i2s/i2s.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#include "test_util.h"

namespace {

using bitnet_test::random_ternary;

std::vector<uint8_t> pack(const std::vector<int8_t> &w, int64_t M, int64_t K) {
    std::vector<uint8_t> out(bitnet_i2s_nbytes(M, K));
    bitnet_error err;
    EXPECT_EQ(bitnet_pack_i2s(w.data(), M, K, 1.0f, out.data(), &err), BITNET_OK) << err.msg;
    return out;
}

// acc[n*M + m] = Σ_k w[m][k]·q[n][k] on the unpacked weights
std::vector<int32_t> plain(const std::vector<int8_t> &w, int64_t M, int64_t K, const std::vector<int8_t> &q,
                           int64_t N) {
    std::vector<int32_t> out((size_t)(M * N));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            int64_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += (int64_t)w[(size_t)(m * K + k)] * q[(size_t)(n * K + k)];
            out[(size_t)(n * M + m)] = (int32_t)s;
        }
    return out;
}

std::vector<std::string> versions() {
    std::vector<std::string> out;
    for (const char *isa : {"portable", "avx2", "avxvnni", "avx512", "neon"})
        if (bitnet_i2s_gemm_for_isa(isa) != nullptr) out.push_back(isa);
    return out;
}

// Every version on (M, K) with N columns (q row stride K + pad), rows [m0, m1), acc stride with a
// guard gap; with and without precomputed column sums.
void check_all(const std::vector<int8_t> &w, int64_t M, int64_t K, const std::vector<int8_t> &qdense, int64_t N,
               int64_t m0, int64_t m1, size_t qpad, const char *what) {
    const auto packed = pack(w, M, K);
    const auto want = plain(w, M, K, qdense, N);
    // the layout's own definition agrees with the plain product
    bitnet_lut_shape sh;
    std::memset(&sh, 0, sizeof sh);
    sh.M = M;
    sh.K = K;
    sh.two_k = K;
    std::vector<int32_t> ref((size_t)((m1 - m0) * N));
    bitnet_ref_gemm_rows(BITNET_TYPE_I2_S, packed.data(), &sh, qdense.data(), N, m0, m1, ref.data());
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = m0; m < m1; ++m)
            ASSERT_EQ(ref[(size_t)(n * (m1 - m0) + (m - m0))], want[(size_t)(n * M + m)]) << what;
    // (so every version below equals bitnet_ref_gemm_rows as well as the plain product)
    const size_t qs = (size_t)K + qpad;
    std::vector<int8_t> q(qs * (size_t)N, (int8_t)0x5a);
    std::vector<int32_t> qsum((size_t)N);
    for (int64_t n = 0; n < N; ++n) {
        std::memcpy(&q[(size_t)n * qs], &qdense[(size_t)(n * K)], (size_t)K);
        qsum[(size_t)n] = bitnet_i2s_qsum(&qdense[(size_t)(n * K)], K);
    }
    const size_t stride = (size_t)(m1 - m0) + 3;
    // the packed bytes at a 64-byte boundary and 32 bytes past one (GGUF aligns tensors to 32 only)
    std::vector<uint8_t> buf(packed.size() + 128);
    uint8_t *const base = buf.data() + (64 - (uintptr_t)buf.data() % 64) % 64;
    for (const auto &isa : versions()) {
        bitnet_i2s_gemm_fn fn = bitnet_i2s_gemm_for_isa(isa.c_str());
        for (int with_sums = 0; with_sums < 4; ++with_sums) {
            uint8_t *const wp = base + (with_sums >= 2 ? 32 : 0);
            std::memcpy(wp, packed.data(), packed.size());
            std::vector<int32_t> acc(stride * (size_t)N, 0x7eadbeef);
            fn(wp, M, K, q.data(), qs, with_sums % 2 ? qsum.data() : nullptr, N, m0, m1, acc.data(), stride);
            for (int64_t n = 0; n < N; ++n) {
                for (int64_t m = m0; m < m1; ++m)
                    ASSERT_EQ(acc[(size_t)n * stride + (size_t)(m - m0)], want[(size_t)(n * M + m)])
                        << what << ": " << isa << " M=" << M << " K=" << K << " N=" << N << " rows [" << m0 << ","
                        << m1 << ") n=" << n << " m=" << m << " sums=" << with_sums % 2 << " offset " << (wp - base);
                for (size_t i = (size_t)(m1 - m0); i < stride; ++i)
                    ASSERT_EQ(acc[(size_t)n * stride + i], 0x7eadbeef) << what << ": " << isa << " wrote past the rows";
            }
        }
    }
}

std::vector<int8_t> random_q(int64_t n, uint32_t seed, int lo = -128, int hi = 127) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int8_t> q((size_t)n);
    for (auto &v : q) v = (int8_t)d(rng);
    return q;
}

}  // namespace

TEST(I2s, VersionNamesAndChoice) {
    const auto v = versions();
    ASSERT_FALSE(v.empty());
    std::string names;
    for (const auto &s : v) names += " " + s;
    std::printf("I2_S versions run here:%s\n", names.c_str());
    EXPECT_EQ(v[0], "portable");
    EXPECT_EQ(bitnet_i2s_gemm_for_isa("avx1024"), nullptr);
    EXPECT_EQ(bitnet_i2s_gemm_for_isa("scalar"), nullptr);  // the plain C version is named "portable"
    const std::string chosen = bitnet_i2s_isa();
#if defined(__aarch64__)
    EXPECT_EQ(chosen, bitnet_cpu_supports("neon") ? "neon" : "portable");
    EXPECT_FALSE(bitnet_cpu_supports("avx512"));
#elif defined(__x86_64__)
    EXPECT_EQ(chosen, bitnet_cpu_supports("avx512")    ? "avx512"
                      : bitnet_cpu_supports("avxvnni") ? "avxvnni"
                      : bitnet_cpu_supports("avx2")    ? "avx2"
                                                       : "portable");
    __builtin_cpu_init();
    const bool hw512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
                       __builtin_cpu_supports("avx2");
    if (std::getenv("BITNET_ISA") == nullptr) {
        EXPECT_EQ(bitnet_cpu_supports("avx512"), hw512);
        // AVX-VNNI: CPUID.(EAX=7, ECX=1):EAX bit 4, as /proc/cpuinfo's "avx_vnni" flag says
        bool flag = false;
        if (FILE *f = std::fopen("/proc/cpuinfo", "r")) {
            char line[8192];
            while (!flag && std::fgets(line, sizeof line, f))
                if (std::strncmp(line, "flags", 5) == 0) flag = std::strstr(line, " avx_vnni") != nullptr;
            std::fclose(f);
            EXPECT_EQ(bitnet_cpu_supports("avxvnni"), flag && __builtin_cpu_supports("avx2"));
        }
    }
#endif
}

TEST(I2s, IsaCapFromEnvironment) {
    const char *old = std::getenv("BITNET_ISA");
    const std::string saved = old ? old : "";
    const bool had512 = [] { unsetenv("BITNET_ISA"); return bitnet_cpu_supports("avx512"); }();
    const bool had2 = bitnet_cpu_supports("avx2");
    const bool had_vnni = bitnet_cpu_supports("avxvnni");
    setenv("BITNET_ISA", "avxvnni", 1);  // AVX-VNNI without AVX-512 (Alder Lake): the AVX-512 kernels are capped
    EXPECT_FALSE(bitnet_cpu_supports("avx512"));
    EXPECT_EQ(bitnet_cpu_supports("avxvnni"), had_vnni);
    EXPECT_EQ(bitnet_cpu_supports("avx2"), had2);
    setenv("BITNET_ISA", "avx2", 1);
    EXPECT_FALSE(bitnet_cpu_supports("avx512"));
    EXPECT_FALSE(bitnet_cpu_supports("avxvnni"));
    EXPECT_EQ(bitnet_i2s_gemm_for_isa("avxvnni"), nullptr);
    EXPECT_EQ(bitnet_cpu_supports("avx2"), had2);
    EXPECT_EQ(bitnet_i2s_gemm_for_isa("avx512"), nullptr);
    setenv("BITNET_ISA", "scalar", 1);
    EXPECT_FALSE(bitnet_cpu_supports("avx2"));
    EXPECT_FALSE(bitnet_cpu_supports("neon"));
    EXPECT_TRUE(bitnet_cpu_supports("scalar"));
    EXPECT_TRUE(bitnet_cpu_supports("portable"));
    EXPECT_NE(bitnet_i2s_gemm_for_isa("portable"), nullptr);
    EXPECT_EQ(bitnet_i2s_gemm_for_isa("neon"), nullptr);
    setenv("BITNET_ISA", "portable", 1);  // the same level as scalar
    EXPECT_FALSE(bitnet_cpu_supports("avx2"));
    EXPECT_NE(bitnet_i2s_gemm_for_isa("portable"), nullptr);
    setenv("BITNET_ISA", "avx512", 1);
    EXPECT_EQ(bitnet_cpu_supports("avx512"), had512);
    setenv("BITNET_ISA", "bogus", 1);  // ignored
    EXPECT_EQ(bitnet_cpu_supports("avx512"), had512);
    EXPECT_FALSE(bitnet_cpu_supports("sse9"));
    if (old) {
        setenv("BITNET_ISA", saved.c_str(), 1);
    } else {
        unsetenv("BITNET_ISA");
    }
}

TEST(I2s, RandomEveryColumnCount) {
    // K = 2560 (whole blocks), 8640 (K % 128 = 64: odd rows start mid-block), 96 / 160 (K % 64 = 32, rows
    // straddling blocks), 224
    uint32_t seed = 11;
    for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{{8, 2560}, {8, 8640}, {16, 96}, {12, 160}, {4, 224}}) {
        const auto w = random_ternary(M * K, seed++);
        for (int64_t N : {1, 2, 3, 4, 5, 8, 15, 16, 17, 33}) {
            const auto q = random_q(K * N, seed++);
            check_all(w, M, K, q, N, 0, M, 0, "random");
        }
    }
}

TEST(I2s, RowTailsAndRanges) {
    // row ranges that leave 1..3 rows in the last register block and start at odd rows
    const int64_t M = 40, K = 416;  // K % 128 = 32
    const auto w = random_ternary(M * K, 5);
    const auto q = random_q(K * 18, 6);
    for (auto [m0, m1] : std::vector<std::pair<int64_t, int64_t>>{{0, 40}, {1, 2}, {3, 10}, {5, 39}, {38, 40}, {7, 14}})
        for (int64_t N : {7, 18}) check_all(w, M, K, q, N, m0, m1, 64 - 32, "rows");
}

TEST(I2s, LongRowsCrossDecodedSlices) {
    // K = 20480 is more than one 16384-weight decode slice of the AVX-512 kernel (N ≥ 16); 16416 = 16384
    // + 32; 65568 > 65536 sends N < 16 to the AVX2 kernel (lane-sum bound of the direct path)
    for (int64_t K : {20480, 16416, 65568}) {
        const int64_t M = 4;
        const auto w = random_ternary(M * K, (uint32_t)K);
        const auto q = random_q(K * 17, 9);
        for (int64_t N : {1, 3, 5, 17}) check_all(w, M, K, q, N, 0, M, 0, "long rows");
    }
}

TEST(I2s, KNotMultipleOf32) {
    // K % 32 != 0: every version runs the portable walk (the SIMD ones fall back to it); rows start at any
    // offset of a 32-weight run and of a 128-weight block, some rows hold a whole block, some none.
    // (M, K) with M·K % 128 == 0; row ranges: all, the first, one odd row, a middle range, the tail.
    uint32_t seed = 31;
    for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{
             {128, 1}, {32, 4}, {16, 200}, {8, 176}, {64, 1002}, {128, 999}, {32, 300}, {16, 40}}) {
        ASSERT_EQ(M * K % 128, 0);
        const auto w = random_ternary(M * K, seed++);
        const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, M}, {0, 1}, {M / 2 + 1, M / 2 + 2}, {M / 4, M - M / 4}, {M - 3, M}};
        for (int64_t N : {1, 2, 3, 5, 8}) {
            const auto q = random_q(K * N, seed++);
            for (auto [m0, m1] : ranges) check_all(w, M, K, q, N, m0, m1, (size_t)(N % 3), "K % 32 != 0");
        }
    }
}

TEST(I2s, PortableReadsByteAlignedBuffers) {
    // byte loads only: weights and activations at odd addresses give the same sums (UBSan's alignment check
    // in the ASan build would flag a wider load)
    bitnet_i2s_gemm_fn fn = bitnet_i2s_gemm_for_isa("portable");
    ASSERT_NE(fn, nullptr);
    for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{{8, 2560}, {16, 200}, {8, 8640}}) {
        const auto w = random_ternary(M * K, (uint32_t)K);
        const auto packed = pack(w, M, K);
        const int64_t N = 3;
        const auto q = random_q(K * N, 17);
        const auto want = plain(w, M, K, q, N);
        std::vector<uint8_t> wbuf(packed.size() + 8);
        std::vector<int8_t> qbuf(q.size() + 8);
        for (size_t off : {1, 3}) {
            std::memcpy(wbuf.data() + off, packed.data(), packed.size());
            std::memcpy(qbuf.data() + off + 2, q.data(), q.size());
            std::vector<int32_t> acc((size_t)(M * N), 0x7eadbeef);
            fn(wbuf.data() + off, M, K, qbuf.data() + off + 2, (size_t)K, nullptr, N, 0, M, acc.data(), (size_t)M);
            EXPECT_EQ(acc, want) << "M=" << M << " K=" << K << " offset " << off;
        }
    }
}

TEST(I2s, OneColumnFourRowBlocksRangesAndExtremes) {
    // one column with K % 128 == 0 (the AVX-512 kernel's four-row GEMV): row ranges that leave 1..3 rows
    // after the four-row blocks and start at odd rows, then the longest rows it takes (K = 65536, every weight
    // +1 or -1 against 127 or -128: the largest sums of the per-mask lanes at that K, about 5e7)
    // K = 128 and 3200 have an odd number of 128-weight blocks (the last one alone in the low half of a zmm)
    const int64_t M = 23;
    for (int64_t K : {int64_t(128), int64_t(2560), int64_t(3200)}) {
        const auto w = random_ternary(M * K, 21);
        const auto q = random_q(K, 22);
        for (auto [m0, m1] : std::vector<std::pair<int64_t, int64_t>>{{0, 23}, {1, 2}, {3, 10}, {5, 22}, {21, 23}, {7, 14}, {0, 4}})
            check_all(w, M, K, q, 1, m0, m1, 0, "one column, rows");
    }
    const int64_t M2 = 5, K2 = 65536;
    for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<int8_t> w2((size_t)(M2 * K2)), q2((size_t)K2);
        for (int64_t j = 0; j < M2 * K2; ++j) w2[(size_t)j] = pattern == 1 ? -1 : 1;
        for (int64_t k = 0; k < K2; ++k) q2[(size_t)k] = pattern == 0 ? 127 : pattern == 1 ? -128 : (k % 2 ? 127 : -128);
        check_all(w2, M2, K2, q2, 1, 0, M2, 0, "one column, extremes");
    }
}

TEST(I2s, ExtremesAndZeros) {
    const int64_t M = 8, K = 8640;
    for (int pattern = 0; pattern < 5; ++pattern) {
        std::vector<int8_t> w((size_t)(M * K)), q((size_t)(K * 16));
        for (int64_t j = 0; j < M * K; ++j)
            w[(size_t)j] = pattern == 0 ? 1 : pattern == 1 ? -1 : pattern == 2 ? (j % 2 ? 1 : -1) : pattern == 3 ? 0 : 1;
        for (int64_t k = 0; k < K * 16; ++k)
            q[(size_t)k] = pattern == 0 ? 127 : pattern == 1 ? -128 : pattern == 2 ? (k % 2 ? 127 : -128) : pattern == 3 ? 77 : 0;
        if (pattern == 0) {
            EXPECT_EQ(plain(w, M, K, q, 1)[0], 127 * K);
        } else if (pattern == 1) {
            EXPECT_EQ(plain(w, M, K, q, 1)[0], 128 * K);
        }
        check_all(w, M, K, q, 4, 0, M, 0, "extremes");
        check_all(w, M, K, q, 16, 0, M, 0, "extremes N=16");
        check_all(w, M, K, q, 1, 0, M, 0, "extremes N=1");
    }
}

// bitnet_i2s_quantize_act (AVX2 on x86, else the scalar functions) against bitnet_quantize_act +
// bitnet_i2s_qsum: the same s bits, q bytes and Σq for every length around the 8- and 32-wide steps,
// random values, exact .5 ties after scaling, NaN, ±inf, -0, denormals, all zeros and ±127 extremes.
TEST(I2s, QuantizeActMatchesScalar) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const int64_t lengths[] = {0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 95, 256, 2560, 2563};
    int checked = 0;
    for (int64_t K : lengths) {
        for (int variant = 0; variant < 7; ++variant) {
            std::vector<float> x((size_t)K);
            for (auto &v : x) v = nd(rng);
            if (variant == 1) { // ties: max 127 → s = 1, halves round to even
                for (int64_t k = 0; k < K; ++k) x[(size_t)k] = (float)((k % 255) - 127) + ((k % 2) ? 0.5f : -0.5f);
                if (K) x[0] = 127.0f;
            }
            if (variant == 2 && K) x[(size_t)(K / 2)] = nan;
            if (variant == 3 && K) x[(size_t)(K - 1)] = (K % 2) ? inf : -inf;
            if (variant == 4) for (auto &v : x) v = (v > 0 ? 1e-40f : -0.0f); // denormals and -0: s from 1e-5
            if (variant == 5) std::fill(x.begin(), x.end(), 0.0f);
            if (variant == 6) for (int64_t k = 0; k < K; ++k) x[(size_t)k] = (k % 3 == 0) ? 1e30f : -1e30f;
            std::vector<int8_t> qa((size_t)K + 1, 0x55), qb((size_t)K + 1, 0x55);
            int32_t sa = -1;
            const float fa = bitnet_i2s_quantize_act(x.data(), K, qa.data(), &sa);
            const float fb = bitnet_quantize_act(x.data(), K, qb.data());
            const int32_t sb = bitnet_i2s_qsum(qb.data(), K);
            uint32_t ua, ub;
            std::memcpy(&ua, &fa, 4);
            std::memcpy(&ub, &fb, 4);
            ASSERT_EQ(ua, ub) << "K " << K << " variant " << variant;
            ASSERT_EQ(qa, qb) << "K " << K << " variant " << variant; // includes the untouched guard byte
            ASSERT_EQ(sa, sb) << "K " << K << " variant " << variant;
            ++checked;
        }
    }
    EXPECT_EQ(checked, 14 * 7);
    // a known column: max 2 → s = 63.5; 0.5·63.5 = 31.75 → 32, -1·63.5 = -63.5 → -64 (half to even)
    const float x[3] = {0.5f, -1.0f, 2.0f};
    int8_t q[3];
    int32_t qs = 0;
    EXPECT_EQ(bitnet_i2s_quantize_act(x, 3, q, &qs), 63.5f);
    EXPECT_EQ(q[0], 32);
    EXPECT_EQ(q[1], -64);
    EXPECT_EQ(q[2], 127);
    EXPECT_EQ(qs, 32 - 64 + 127);
}
