// test_lut_host.cc — the matmul host (src/runtime/lut_host.c) and the I2_S dot kernels (src/kernels/i2s/):
// products on every path and thread count against an independent integer product, bit-identity
// between I2_S / TL1 / TL2 and across thread counts, the quantization error bound, workspace size
// (exact formula, canary bytes, ASan poisoning), extras lifecycle, can_mul_mat / get_type_bits rules
// and the transform's errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unistd.h>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/i2s/i2s.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/tl2_i8.h"
#include "runtime/kchoice.h"
#include "runtime/lut_host.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#include "runtime/threadpool.h"

#if defined(__SANITIZE_ADDRESS__)
#define BITNET_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BITNET_TEST_ASAN 1
#endif
#endif
#ifdef BITNET_TEST_ASAN
#include <sanitizer/asan_interface.h>
#define TEST_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define TEST_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define TEST_POISON(p, n) ((void)(p), (void)(n))
#define TEST_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
#include "test_util.h"

namespace {

// ---- helpers -----------------------------------------------------------------------------------

struct FreeDeleter {
    void operator()(void *p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, FreeDeleter>;

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

AlignedBytes aligned_bytes(size_t n) {
    return AlignedBytes(static_cast<uint8_t *>(std::aligned_alloc(64, round64(std::max<size_t>(n, 1)))));
}

using bitnet_test::random_ternary;

// N columns of K floats; column `zero_col` (if >= 0) is all zeros; columns get different magnitudes.
std::vector<float> random_acts(int64_t K, int64_t N, uint32_t seed, int64_t zero_col = -1) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    std::vector<float> x((size_t)(K * N));
    for (int64_t n = 0; n < N; ++n) {
        const float mag = (n == zero_col) ? 0.0f : std::ldexp(1.0f, (int)(n % 7) - 3);
        for (int64_t k = 0; k < K; ++k) x[(size_t)(n * K + k)] = d(rng) * mag;
    }
    return x;
}

// The I2_S layout written here from formats.md, independently of src/kernels/lut/pack.c.
std::vector<uint8_t> local_pack_i2s(const int8_t *w, int64_t M, int64_t K, float scale) {
    const size_t n = (size_t)(M * K);
    std::vector<uint8_t> out(n / 4 + 32, 0);
    for (size_t j = 0; j < n; ++j) {
        const size_t r = j % 128;
        out[(j / 128) * 32 + r % 32] |= (uint8_t)((w[j] + 1) << (6 - 2 * (r / 32)));
    }
    std::memcpy(&out[n / 4], &scale, 4);
    return out;
}

// acc[n*M + m] = Σ_k w[m][k]·q[n][k], the plain definition.
std::vector<int32_t> naive_gemm(const int8_t *w, int64_t M, int64_t K, const int8_t *q, int64_t N) {
    std::vector<int32_t> acc((size_t)(M * N));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; ++k) s += (int32_t)w[m * K + k] * q[n * K + k];
            acc[(size_t)(n * M + m)] = s;
        }
    return acc;
}

size_t packed_nbytes(int type, int64_t M, int64_t K) {
    switch (type) {
    case BITNET_TYPE_I2_S: return bitnet_i2s_nbytes(M, K);
    case BITNET_TYPE_TL1: return bitnet_tl1_nbytes(M, K);
    default: return bitnet_tl2_nbytes(M, K);
    }
}

// A packed ternary weight tensor owning its (64-byte aligned + misalign) storage.
struct Weight {
    AlignedBytes mem;
    bitnet_tensor t;
    bitnet_tiles tiles{0, 0, 0};
};

std::unique_ptr<Weight> make_weight(int type, const std::vector<int8_t> &w, int64_t M, int64_t K, bitnet_tiles tiles,
                                    float scale, size_t misalign = 0, const char *name = "blk.0.test.weight") {
    auto W = std::make_unique<Weight>();
    const size_t nb = packed_nbytes(type, M, K);
    EXPECT_GT(nb, 0u);
    W->mem = aligned_bytes(nb + misalign + 64);
    uint8_t *data = W->mem.get() + misalign;
    bitnet_error err;
    err.msg[0] = '\0';
    bitnet_status st = BITNET_OK;
    if (type == BITNET_TYPE_I2_S) st = bitnet_pack_i2s(w.data(), M, K, scale, data, &err);
    else if (type == BITNET_TYPE_TL1) st = bitnet_pack_tl1(w.data(), M, K, tiles, scale, data, &err);
    else st = bitnet_pack_tl2(w.data(), M, K, tiles, scale, data, &err);
    EXPECT_EQ(st, BITNET_OK) << err.msg;
    std::memset(&W->t, 0, sizeof(W->t));
    std::snprintf(W->t.name, sizeof(W->t.name), "%s", name);
    W->t.type = type;
    W->t.n_dims = 2;
    W->t.ne[0] = K;
    W->t.ne[1] = M;
    W->t.ne[2] = W->t.ne[3] = 1;
    W->t.data = data;
    W->t.nbytes = nb;
    W->tiles = tiles;
    return W;
}

bitnet_tensor f32_tensor(float *data, int64_t cols, int64_t rows, size_t row_stride_floats = 0) {
    bitnet_tensor t;
    std::memset(&t, 0, sizeof(t));
    std::snprintf(t.name, sizeof(t.name), "f32");
    t.type = BITNET_TYPE_F32;
    t.n_dims = 2;
    t.ne[0] = cols;
    t.ne[1] = rows;
    t.ne[2] = t.ne[3] = 1;
    t.nb[0] = sizeof(float);
    t.nb[1] = (row_stride_floats ? row_stride_floats : (size_t)cols) * sizeof(float);
    t.data = data;
    t.nbytes = t.nb[1] * (size_t)rows;
    return t;
}

struct PoolDeleter {
    void operator()(bitnet_threadpool *tp) const { bitnet_threadpool_free(tp); }
};

bitnet_threadpool *pool(int n) {
    static std::unique_ptr<bitnet_threadpool, PoolDeleter> pools[9];
    if (!pools[n]) {
        bitnet_threadpool *tp = nullptr;
        bitnet_error err;
        EXPECT_EQ(bitnet_threadpool_create(n, &tp, &err), BITNET_OK) << err.msg;
        pools[n].reset(tp);
    }
    return pools[n].get();
}

struct MulArg {
    const bitnet_tensor *src0;
    const bitnet_tensor *src1;
    bitnet_tensor *dst;
    void *ws;
    size_t wsize;
    bitnet_threadpool *tp;
};

void mul_task(void *p, int ith, int nth) {
    auto *a = static_cast<MulArg *>(p);
    bitnet_mul_mat(a->src0, a->src1, a->dst, a->ws, a->wsize, ith, nth, a->tp);
}

constexpr size_t kCanary = 64;
constexpr uint8_t kCanaryByte = 0xA5;

// dst = src0 · x with nth threads; the workspace is exactly get_wsize bytes followed by 64 canary bytes
// (poisoned under ASan, checked afterwards), prefilled with garbage.
std::vector<float> product(const bitnet_tensor &src0, const std::vector<float> &x, int64_t N, int nth) {
    const int64_t K = src0.ne[0], M = src0.ne[1];
    std::vector<float> xs(x);
    bitnet_tensor src1 = f32_tensor(xs.data(), K, N);
    std::vector<float> y((size_t)(M * N), -12345.0f);
    bitnet_tensor dst = f32_tensor(y.data(), M, N);
    const size_t wsize = bitnet_mul_mat_get_wsize(&src0, &src1, &dst);
    EXPECT_GT(wsize, 0u);
    EXPECT_EQ(wsize % 64, 0u);
    AlignedBytes ws = aligned_bytes(wsize + kCanary);
    std::memset(ws.get(), 0xCD, wsize);
    std::memset(ws.get() + wsize, kCanaryByte, kCanary);
    TEST_POISON(ws.get() + wsize, kCanary);
    MulArg a{&src0, &src1, &dst, ws.get(), wsize, nth > 1 ? pool(nth) : nullptr};
    if (nth > 1) bitnet_threadpool_run(pool(nth), mul_task, &a);
    else mul_task(&a, 0, 1);
    TEST_UNPOISON(ws.get() + wsize, kCanary);
    for (size_t i = 0; i < kCanary; ++i) EXPECT_EQ(ws.get()[wsize + i], kCanaryByte) << "canary byte " << i;
    return y;
}

struct Expected {
    std::vector<float> y;      // (float)acc / s * scale with the exact integer acc
    std::vector<float> s;      // column scales
    std::vector<int8_t> q;     // quantized activations
};

Expected expected_product(const std::vector<int8_t> &w, int64_t M, int64_t K, float scale, const std::vector<float> &x,
                          int64_t N) {
    Expected e;
    e.q.resize((size_t)(K * N));
    e.s.resize((size_t)N);
    for (int64_t n = 0; n < N; ++n) e.s[(size_t)n] = bitnet_quantize_act(&x[(size_t)(n * K)], K, &e.q[(size_t)(n * K)]);
    std::vector<int32_t> acc = naive_gemm(w.data(), M, K, e.q.data(), N);
    e.y.resize((size_t)(M * N));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            float v = (float)acc[(size_t)(n * M + m)];
            v = v / e.s[(size_t)n];
            v = v * scale;
            e.y[(size_t)(n * M + m)] = v;
        }
    return e;
}

// |y − scale·Σ w·x| ≤ scale·Σ_k |x − q/s| (+ float rounding of the last two operations).
void expect_within_quant_bound(const Expected &e, const std::vector<int8_t> &w, int64_t M, int64_t K, float scale,
                               const std::vector<float> &x, int64_t N) {
    for (int64_t n = 0; n < N; ++n) {
        const double s = e.s[(size_t)n];
        double qerr = 0.0;
        for (int64_t k = 0; k < K; ++k)
            qerr += std::fabs((double)x[(size_t)(n * K + k)] - (double)e.q[(size_t)(n * K + k)] / s);
        const double bound = (double)scale * qerr;
        for (int64_t m = 0; m < M; ++m) {
            double exact = 0.0;
            for (int64_t k = 0; k < K; ++k) exact += (double)w[(size_t)(m * K + k)] * x[(size_t)(n * K + k)];
            exact *= scale;
            const double y = e.y[(size_t)(n * M + m)];
            ASSERT_LE(std::fabs(y - exact), bound * (1 + 1e-6) + 4e-7 * std::fabs(y) + 1e-30)
                << "n=" << n << " m=" << m << " M=" << M << " K=" << K;
        }
    }
}

bool same_bytes(const std::vector<float> &a, const std::vector<float> &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// First index where two float vectors differ bitwise, for messages.
std::string first_diff(const std::vector<float> &a, const std::vector<float> &b) {
    if (a.size() != b.size()) return "sizes differ";
    for (size_t i = 0; i < a.size(); ++i)
        if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0)
            return "index " + std::to_string(i) + ": " + std::to_string(a[i]) + " vs " + std::to_string(b[i]);
    return "none";
}

const char *tname(int type) { return bitnet_type_name(type); }

// bitnet_lut_transform_tensor on a test weight (stored tiles = the ones it was packed with).
bitnet_status transform_weight(Weight &W, int target, const bitnet_tiles *tiles, std::string *msg = nullptr) {
    bitnet_error err;
    err.msg[0] = '\0';
    const bitnet_tiles *stored = W.t.type == BITNET_TYPE_I2_S ? nullptr : &W.tiles;
    bitnet_status st = bitnet_lut_transform_tensor(&W.t, stored, target, tiles, &err);
    if (msg) *msg = err.msg;
    return st;
}

// Every test that transforms releases the extras table afterwards.
class LutHost : public ::testing::Test {
protected:
    void TearDown() override { bitnet_lut_free(); }

    static bitnet_status transform(Weight &W, int target, const bitnet_tiles *tiles, std::string *msg = nullptr) {
        return transform_weight(W, target, tiles, msg);
    }
};

// ---- I2_S kernels ------------------------------------------------------------------------------

std::vector<std::string> i2s_isas() {
    std::vector<std::string> out;
    for (const char *isa : {"portable", "avx2", "avx512", "neon"})
        if (bitnet_i2s_gemm_for_isa(isa) != nullptr) out.push_back(isa);
    return out;
}

TEST(I2sKernel, VersionsAndDispatch) {
    auto isas = i2s_isas();
    ASSERT_FALSE(isas.empty());
    EXPECT_EQ(isas[0], "portable");
    EXPECT_EQ(bitnet_i2s_gemm_for_isa("sse9"), nullptr);
    EXPECT_EQ(bitnet_i2s_gemm_for_isa(nullptr), nullptr);
    const std::string chosen = bitnet_i2s_isa();
    EXPECT_NE(bitnet_i2s_gemm_for_isa(chosen.c_str()), nullptr);
#if defined(__aarch64__)
    EXPECT_EQ(chosen, bitnet_cpu_supports("neon") ? "neon" : "portable");
#elif defined(__x86_64__)
    EXPECT_EQ(chosen, bitnet_cpu_supports("avx512")    ? "avx512"
                      : bitnet_cpu_supports("avxvnni") ? "avxvnni"
                      : bitnet_cpu_supports("avx2")    ? "avx2"
                                                       : "portable");
#endif
}

TEST(I2sKernel, MatchesPlainProductOnEveryVersion) {
    // (M, K): K % 128 != 0 makes rows straddle 128-weight blocks; K % 32 != 0 takes the portable path.
    const std::vector<std::pair<int64_t, int64_t>> shapes = {
        {4, 128}, {32, 96}, {32, 80}, {8, 160}, {3, 128}, {5, 384}, {16, 8640}, {64, 32}, {128, 1}, {32, 4}};
    uint32_t seed = 1;
    for (auto [M, K] : shapes) {
        ASSERT_EQ((M * K) % 128, 0);
        const auto w = random_ternary(M * K, seed++);
        const auto packed = local_pack_i2s(w.data(), M, K, 1.0f);
        for (int64_t N : {1, 3, 4, 6}) {
            std::mt19937 rng(seed++);
            std::uniform_int_distribution<int> dq(-128, 127);
            std::vector<int8_t> q((size_t)(K * N));
            for (auto &v : q) v = (int8_t)dq(rng);
            const auto want = naive_gemm(w.data(), M, K, q.data(), N);
            std::vector<int32_t> qsum((size_t)N);
            for (int64_t n = 0; n < N; ++n) qsum[(size_t)n] = bitnet_i2s_qsum(&q[(size_t)(n * K)], K);
            for (const auto &isa : i2s_isas()) {
                bitnet_i2s_gemm_fn fn = bitnet_i2s_gemm_for_isa(isa.c_str());
                // full range with and without precomputed sums, and a partial row range with a wider stride
                for (int variant = 0; variant < 3; ++variant) {
                    const int64_t m0 = variant == 2 ? M / 3 : 0, m1 = variant == 2 ? M - M / 4 : M;
                    const size_t stride = (size_t)(m1 - m0) + (variant == 2 ? 5 : 0);
                    std::vector<int32_t> acc(stride * (size_t)N, 0x7eadbeef);
                    fn(packed.data(), M, K, q.data(), (size_t)K, variant == 1 ? nullptr : qsum.data(), N, m0, m1,
                       acc.data(), stride);
                    for (int64_t n = 0; n < N; ++n)
                        for (int64_t m = m0; m < m1; ++m)
                            ASSERT_EQ(acc[(size_t)n * stride + (size_t)(m - m0)], want[(size_t)(n * M + m)])
                                << isa << " M=" << M << " K=" << K << " N=" << N << " n=" << n << " m=" << m
                                << " variant=" << variant;
                    if (variant == 2) {  // untouched padding between column strides
                        for (int64_t n = 0; n < N; ++n)
                            for (size_t i = (size_t)(m1 - m0); i < stride; ++i)
                                ASSERT_EQ(acc[(size_t)n * stride + i], 0x7eadbeef);
                    }
                }
            }
        }
    }
}

TEST(I2sKernel, ExtremesDoNotSaturate) {
    // all +1 with q = 127, all −1 with q = −128 (|acc| = 128·K), alternating signs
    const int64_t M = 32, K = 8640;
    for (int pattern = 0; pattern < 3; ++pattern) {
        std::vector<int8_t> w((size_t)(M * K)), q((size_t)K);
        for (int64_t j = 0; j < M * K; ++j) w[(size_t)j] = pattern == 0 ? 1 : pattern == 1 ? -1 : (j % 2 ? 1 : -1);
        for (int64_t k = 0; k < K; ++k) q[(size_t)k] = pattern == 0 ? 127 : pattern == 1 ? -128 : (k % 2 ? 127 : -128);
        const auto packed = local_pack_i2s(w.data(), M, K, 1.0f);
        const auto want = naive_gemm(w.data(), M, K, q.data(), 1);
        if (pattern == 0) {
            EXPECT_EQ(want[0], 127 * K);
        } else if (pattern == 1) {
            EXPECT_EQ(want[0], 128 * K);
        }
        for (const auto &isa : i2s_isas()) {
            std::vector<int32_t> acc((size_t)M);
            bitnet_i2s_gemm_for_isa(isa.c_str())(packed.data(), M, K, q.data(), (size_t)K, nullptr, 1, 0, M, acc.data(),
                                                 (size_t)M);
            for (int64_t m = 0; m < M; ++m) ASSERT_EQ(acc[(size_t)m], want[(size_t)m]) << isa << " pattern " << pattern;
        }
    }
}

TEST(I2sKernel, AgreesWithPackerAndReference) {
    // src/kernels/lut/pack.c writes the bytes this test packs itself, and bitnet_ref_gemm gives the same sums.
    for (auto [M, K] : std::vector<std::pair<int64_t, int64_t>>{{32, 96}, {32, 80}, {32, 8640}, {64, 256}}) {
        const auto w = random_ternary(M * K, 77);
        const float scale = 0.75f;
        const auto mine = local_pack_i2s(w.data(), M, K, scale);
        std::vector<uint8_t> theirs(bitnet_i2s_nbytes(M, K));
        bitnet_error err;
        ASSERT_EQ(bitnet_pack_i2s(w.data(), M, K, scale, theirs.data(), &err), BITNET_OK) << err.msg;
        ASSERT_EQ(0, std::memcmp(mine.data(), theirs.data(), (size_t)(M * K / 4 + 4)));
        std::vector<int8_t> q((size_t)(2 * K));
        std::mt19937 rng(5);
        for (auto &v : q) v = (int8_t)std::uniform_int_distribution<int>(-127, 127)(rng);
        bitnet_lut_shape sh;
        std::memset(&sh, 0, sizeof(sh));
        sh.M = M;
        sh.K = K;
        sh.two_k = K;
        std::vector<int32_t> ref((size_t)(2 * M)), got((size_t)(2 * M));
        bitnet_ref_gemm(BITNET_TYPE_I2_S, theirs.data(), &sh, q.data(), 2, ref.data());
        bitnet_i2s_gemm(theirs.data(), M, K, q.data(), (size_t)K, nullptr, 2, 0, M, got.data(), (size_t)M);
        EXPECT_EQ(ref, got) << "M=" << M << " K=" << K;
        for (const auto &isa : i2s_isas()) {
            std::fill(got.begin(), got.end(), 0);
            bitnet_i2s_gemm_for_isa(isa.c_str())(theirs.data(), M, K, q.data(), (size_t)K, nullptr, 2, 0, M, got.data(),
                                                 (size_t)M);
            EXPECT_EQ(ref, got) << isa << " M=" << M << " K=" << K;
        }
    }
}

// ---- type rules --------------------------------------------------------------------------------

TEST(LutHostRules, TypeBits) {
    EXPECT_EQ(bitnet_get_type_bits(BITNET_TYPE_TL1), 2);
    EXPECT_EQ(bitnet_get_type_bits(BITNET_TYPE_TL2), 2);
    EXPECT_EQ(bitnet_get_type_bits(BITNET_TYPE_I2_S), 2);
    EXPECT_EQ(bitnet_get_type_bits(BITNET_TYPE_Q4_0), 4);
    for (int t : {(int)BITNET_TYPE_F32, (int)BITNET_TYPE_F16, (int)BITNET_TYPE_Q8_0, (int)BITNET_TYPE_Q6_K,
                  (int)BITNET_TYPE_I8_S, 3, 34, 35, 40, 999, -1})
        EXPECT_EQ(bitnet_get_type_bits(t), 0) << t;
}

TEST(LutHostRules, CanMulMat) {
    const int64_t M = 64, K = 128, N = 3;
    std::vector<float> x((size_t)(K * N)), y((size_t)(M * N));
    bitnet_tensor w;
    std::memset(&w, 0, sizeof(w));
    w.n_dims = 2;
    w.ne[0] = K;
    w.ne[1] = M;
    w.ne[2] = w.ne[3] = 1;
    bitnet_tensor a = f32_tensor(x.data(), K, N), d = f32_tensor(y.data(), M, N);
    for (int t : {(int)BITNET_TYPE_I2_S, (int)BITNET_TYPE_TL1, (int)BITNET_TYPE_TL2}) {
        w.type = t;
        EXPECT_TRUE(bitnet_can_mul_mat(&w, &a, &d)) << tname(t);
    }
    w.type = BITNET_TYPE_TL1;
    for (int64_t n : {1, 2, 7, 512}) {  // any number of columns, on TL1 too
        bitnet_tensor a2 = a, d2 = d;
        a2.ne[1] = d2.ne[1] = n;
        EXPECT_TRUE(bitnet_can_mul_mat(&w, &a2, &d2)) << n;
    }
    for (int t : {(int)BITNET_TYPE_F32, (int)BITNET_TYPE_F16, (int)BITNET_TYPE_Q4_0, (int)BITNET_TYPE_Q8_0,
                  (int)BITNET_TYPE_I8_S, 99}) {
        w.type = t;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a, &d)) << "src0 type " << t;
    }
    w.type = BITNET_TYPE_I2_S;
    {
        bitnet_tensor a2 = a;
        a2.type = BITNET_TYPE_F16;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a2, &d)) << "src1 F16";
        bitnet_tensor d2 = d;
        d2.type = BITNET_TYPE_F16;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a, &d2)) << "dst F16";
    }
    {
        bitnet_tensor a2 = a;
        a2.ne[0] = K + 1;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a2, &d)) << "ne10 != K";
        bitnet_tensor d2 = d;
        d2.ne[0] = M - 1;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a, &d2)) << "ne0 != M";
        d2 = d;
        d2.ne[1] = N + 1;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a, &d2)) << "ne1 != N";
        a2 = a;
        a2.ne[2] = 2;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a2, &d)) << "3-D activations";
        a2 = a;
        a2.nb[1] = (size_t)(K - 1) * 4;
        EXPECT_FALSE(bitnet_can_mul_mat(&w, &a2, &d)) << "overlapping rows";
        bitnet_tensor w2 = w;
        w2.ne[2] = 2;
        EXPECT_FALSE(bitnet_can_mul_mat(&w2, &a, &d)) << "3-D weight";
    }
    EXPECT_FALSE(bitnet_can_mul_mat(nullptr, &a, &d));
    EXPECT_FALSE(bitnet_can_mul_mat(&w, nullptr, &d));
    EXPECT_FALSE(bitnet_can_mul_mat(&w, &a, nullptr));
    EXPECT_EQ(bitnet_mul_mat_get_wsize(&w, &a, nullptr), 0u);
}

// ---- lifecycle ---------------------------------------------------------------------------------

TEST_F(LutHost, InitFreeLifecycle) {
    bitnet_lut_free();  // without init
    bitnet_lut_free();
    bitnet_lut_init();
    bitnet_lut_init();  // idempotent
    const int64_t M = 32, K = 128;
    const auto w = random_ternary(M * K, 3);
    auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 0.5f, 16);  // misaligned: owns a copy
    ASSERT_EQ(transform(*W, BITNET_TYPE_I2_S, nullptr), BITNET_OK);
    ASSERT_NE(W->t.extra, nullptr);
    EXPECT_NE(W->t.extra->owned, nullptr);
    bitnet_lut_free();  // releases the extra and its buffer (ASan/LSan would see a leak or double free)
    bitnet_lut_free();
    W->t.extra = nullptr;
    // transform initializes on its own after free, and many tensors grow the table past its first size
    std::vector<std::unique_ptr<Weight>> many;
    for (int i = 0; i < 150; ++i) {
        many.push_back(make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 0.5f, i % 2 ? 16 : 0));
        ASSERT_EQ(transform(*many.back(), BITNET_TYPE_I2_S, nullptr), BITNET_OK) << i;
    }
    const auto x = random_acts(K, 2, 9);
    const auto e = expected_product(w, M, K, 0.5f, x, 2);
    for (int i : {0, 1, 149}) EXPECT_TRUE(same_bytes(product(many[(size_t)i]->t, x, 2, 1), e.y)) << i;
    bitnet_lut_free();
}

// ---- transform ---------------------------------------------------------------------------------

TEST_F(LutHost, TransformAliasesOrRepacks) {
    const int64_t M = 64, K = 256;
    const auto w = random_ternary(M * K, 11);
    const float scale = 0.31f;
    bitnet_tiles t1, t1b{32, 128, 32}, t2;
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL1, M, K, &t1));
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, M, K, &t2));
    ASSERT_EQ(bitnet_tiles_check(BITNET_TYPE_TL1, M, K, t1b, nullptr), BITNET_OK);
    ASSERT_FALSE(t1.BM == t1b.BM && t1.BK == t1b.BK && t1.bm == t1b.bm);

    // same layout, aligned to BITNET_WEIGHT_ALIGN (32, the GGUF alignment): used in place
    auto I = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, scale);
    ASSERT_EQ(transform(*I, BITNET_TYPE_I2_S, nullptr), BITNET_OK);
    EXPECT_EQ(I->t.extra->qweights, I->t.data);
    EXPECT_EQ(I->t.extra->owned, nullptr);
    auto I32 = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, scale, BITNET_WEIGHT_ALIGN);
    ASSERT_EQ(transform(*I32, BITNET_TYPE_I2_S, nullptr), BITNET_OK);
    EXPECT_EQ(I32->t.extra->qweights, I32->t.data);
    EXPECT_EQ(I32->t.extra->owned, nullptr);
    EXPECT_EQ(I->t.extra->scale, scale);
    EXPECT_EQ(I->t.extra->type, BITNET_TYPE_I2_S);
    EXPECT_NE(I->t.extra->impl.name, nullptr);

    // same layout, misaligned: an aligned copy
    auto Im = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, scale, 16);
    ASSERT_EQ(transform(*Im, BITNET_TYPE_I2_S, nullptr), BITNET_OK);
    EXPECT_NE(Im->t.extra->owned, nullptr);
    EXPECT_EQ((uintptr_t)Im->t.extra->qweights % 64, 0u);
    EXPECT_EQ(0, std::memcmp(Im->t.extra->qweights, Im->t.data, (size_t)(M * K / 4)));

    // TL1 with the same tiles aliases, with other tiles repacks to exactly what the packer writes
    auto T = make_weight(BITNET_TYPE_TL1, w, M, K, t1, scale);
    ASSERT_EQ(transform(*T, BITNET_TYPE_TL1, &t1), BITNET_OK);
    EXPECT_EQ(T->t.extra->qweights, T->t.data);
    EXPECT_NE(T->t.extra->impl.ctor, nullptr);
    EXPECT_NE(T->t.extra->impl.qgemm, nullptr);
    EXPECT_EQ(T->t.extra->shape.BM, t1.BM);
    auto Tb = make_weight(BITNET_TYPE_TL1, w, M, K, t1, scale);
    ASSERT_EQ(transform(*Tb, BITNET_TYPE_TL1, &t1b), BITNET_OK);
    EXPECT_NE(Tb->t.extra->owned, nullptr);
    auto ref_b = make_weight(BITNET_TYPE_TL1, w, M, K, t1b, scale);
    EXPECT_EQ(0, std::memcmp(Tb->t.extra->qweights, ref_b->t.data, (size_t)(M * K / 4)));
    EXPECT_EQ(Tb->t.extra->shape.BK, t1b.BK);

    // I2_S → TL2 and TL2 → I2_S
    auto I2 = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, scale);
    ASSERT_EQ(transform(*I2, BITNET_TYPE_TL2, &t2), BITNET_OK);
    auto ref2 = make_weight(BITNET_TYPE_TL2, w, M, K, t2, scale);
    EXPECT_EQ(0, std::memcmp(I2->t.extra->qweights, ref2->t.data, bitnet_ternary_scale_offset(BITNET_TYPE_TL2, M, K)));
    EXPECT_EQ(I2->t.extra->scale, scale);
    EXPECT_EQ(I2->t.extra->shape.three_k + I2->t.extra->shape.two_k, K);
    auto T2 = make_weight(BITNET_TYPE_TL2, w, M, K, t2, scale);
    ASSERT_EQ(transform(*T2, BITNET_TYPE_I2_S, nullptr), BITNET_OK);
    EXPECT_EQ(0, std::memcmp(T2->t.extra->qweights, I->t.data, (size_t)(M * K / 4)));
}

TEST_F(LutHost, TransformErrorsNameTheTensor) {
    const int64_t M = 64, K = 256;
    const auto w = random_ternary(M * K, 12);
    std::string msg;
    bitnet_error err;

    EXPECT_EQ(bitnet_lut_transform_tensor(nullptr, nullptr, BITNET_TYPE_I2_S, nullptr, &err), BITNET_ERR_INVALID_ARG);

    {  // not a ternary type
        auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f, 0, "blk.3.ffn_up.weight");
        W->t.type = BITNET_TYPE_F16;
        EXPECT_EQ(transform(*W, BITNET_TYPE_I2_S, nullptr, &msg), BITNET_ERR_UNSUPPORTED);
        EXPECT_NE(msg.find("blk.3.ffn_up.weight"), std::string::npos) << msg;
        EXPECT_EQ(W->t.extra, nullptr);
    }
    {  // tiles that break a rule (M % BM != 0): message names tensor, M, K and the tiles
        auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f, 0, "blk.1.attn_q.weight");
        bitnet_tiles bad{48, 64, 32};
        EXPECT_EQ(transform(*W, BITNET_TYPE_TL1, &bad, &msg), BITNET_ERR_INVALID_ARG);
        for (const char *s : {"blk.1.attn_q.weight", "M = 64", "K = 256", "BM = 48"})
            EXPECT_NE(msg.find(s), std::string::npos) << s << " in: " << msg;
        EXPECT_EQ(W->t.extra, nullptr);
        EXPECT_EQ(transform(*W, BITNET_TYPE_TL2, nullptr, &msg), BITNET_ERR_INVALID_ARG);  // tiles missing
        EXPECT_EQ(transform(*W, BITNET_TYPE_F32, nullptr, &msg), BITNET_ERR_INVALID_ARG);  // bad target
    }
    {  // too few bytes
        auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f, 0, "short.weight");
        W->t.nbytes = (size_t)(M * K / 4);  // the 32-byte tail with the scale is missing
        EXPECT_EQ(transform(*W, BITNET_TYPE_I2_S, nullptr, &msg), BITNET_ERR_FORMAT);
        EXPECT_NE(msg.find("short.weight"), std::string::npos) << msg;
    }
    {  // code 3 in an I2_S file
        auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f, 0, "code3.weight");
        static_cast<uint8_t *>(W->t.data)[100] |= 0xC0;
        EXPECT_EQ(transform(*W, BITNET_TYPE_I2_S, nullptr, &msg), BITNET_ERR_FORMAT);
        EXPECT_NE(msg.find("code3.weight"), std::string::npos) << msg;
        EXPECT_EQ(W->t.extra, nullptr);
    }
    {  // non-finite scale
        auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f, 0, "nan.weight");
        const float nan = NAN;
        std::memcpy(static_cast<uint8_t *>(W->t.data) + M * K / 4, &nan, 4);
        EXPECT_EQ(transform(*W, BITNET_TYPE_I2_S, nullptr, &msg), BITNET_ERR_FORMAT);
        EXPECT_NE(msg.find("nan.weight"), std::string::npos) << msg;
    }
    for (int target : {BITNET_TYPE_TL1, BITNET_TYPE_TL2}) {  // the same two, repacked tile by tile to TL1/TL2
        bitnet_tiles tt;
        ASSERT_TRUE(bitnet_lut_default_tiles(target, M, K, &tt));
        auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f, 0, "code3.weight");
        const int64_t j = 50 * K + 77;  // row 50, column 77 (x86 layout: block j / 128, byte j % 32, run (j % 128) / 32)
        static_cast<uint8_t *>(W->t.data)[32 * (j / 128) + j % 32] |= (uint8_t)(3 << (6 - 2 * ((j % 128) / 32)));
        EXPECT_EQ(transform(*W, target, &tt, &msg), BITNET_ERR_FORMAT);
        for (const char *s : {"code3.weight", "row 50, column 77"})
            EXPECT_NE(msg.find(s), std::string::npos) << s << " in: " << msg;
        EXPECT_EQ(W->t.extra, nullptr);
        auto N = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f, 0, "nan.weight");
        const float nan = NAN;
        std::memcpy(static_cast<uint8_t *>(N->t.data) + M * K / 4, &nan, 4);
        EXPECT_EQ(transform(*N, target, &tt, &msg), BITNET_ERR_FORMAT);
        EXPECT_NE(msg.find("nan.weight"), std::string::npos) << msg;
        EXPECT_EQ(N->t.extra, nullptr);
    }
    {  // TL1 stored without its tiles, and with wrong stored tiles
        bitnet_tiles t1;
        ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL1, M, K, &t1));
        auto W = make_weight(BITNET_TYPE_TL1, w, M, K, t1, 1.0f, 0, "tl1.weight");
        EXPECT_EQ(bitnet_lut_transform_tensor(&W->t, nullptr, BITNET_TYPE_TL1, &t1, &err), BITNET_ERR_INVALID_ARG);
        EXPECT_NE(std::string(err.msg).find("tl1.weight"), std::string::npos) << err.msg;
        bitnet_tiles wrong{48, 64, 32};
        EXPECT_NE(bitnet_lut_transform_tensor(&W->t, &wrong, BITNET_TYPE_TL1, &t1, &err), BITNET_OK);
        EXPECT_NE(std::string(err.msg).find("tl1.weight"), std::string::npos) << err.msg;
        EXPECT_EQ(W->t.extra, nullptr);
    }
    {  // M·K % 128 != 0 cannot be I2_S
        const int64_t m = 1, k = 64;
        bitnet_tensor t;
        std::memset(&t, 0, sizeof(t));
        std::snprintf(t.name, sizeof(t.name), "odd.weight");
        std::vector<uint8_t> data(64);
        t.type = BITNET_TYPE_I2_S;
        t.n_dims = 2;
        t.ne[0] = k;
        t.ne[1] = m;
        t.ne[2] = t.ne[3] = 1;
        t.data = data.data();
        t.nbytes = data.size();
        EXPECT_EQ(bitnet_lut_transform_tensor(&t, nullptr, BITNET_TYPE_I2_S, nullptr, &err), BITNET_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(err.msg).find("odd.weight"), std::string::npos) << err.msg;
    }
    {  // BM above the host's stack accumulator
        const int64_t m = 16384, k = 16;
        const auto wb = random_ternary(m * k, 13);
        auto W = make_weight(BITNET_TYPE_I2_S, wb, m, k, {0, 0, 0}, 1.0f, 0, "wide.weight");
        bitnet_tiles huge{16384, 16, 32};
        EXPECT_EQ(transform(*W, BITNET_TYPE_TL1, &huge, &msg), BITNET_ERR_INVALID_ARG);
        EXPECT_NE(msg.find("wide.weight"), std::string::npos) << msg;
    }
}

// ---- workspace ---------------------------------------------------------------------------------

TEST_F(LutHost, WorkspaceFormula) {
    const int64_t M = 64, K = 256;
    const auto w = random_ternary(M * K, 21);
    bitnet_tiles t1, t2;
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL1, M, K, &t1));
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, M, K, &t2));
    for (int64_t N : {1, 2, 3, 17, 33}) {
        std::vector<float> x((size_t)(K * N)), y((size_t)(M * N));
        bitnet_tensor a = f32_tensor(x.data(), K, N), d = f32_tensor(y.data(), M, N);
        const size_t r4 = round64(4 * (size_t)N);
        // without an extra: from the stored type (TL2: upper bound 16·K per column)
        auto I = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f);
        EXPECT_EQ(bitnet_mul_mat_get_wsize(&I->t, &a, &d), (size_t)N * round64(K) + 2 * r4);
        auto T1 = make_weight(BITNET_TYPE_TL1, w, M, K, t1, 1.0f);
        EXPECT_EQ(bitnet_mul_mat_get_wsize(&T1->t, &a, &d), (size_t)N * round64(16 * K) + r4);
        auto T2 = make_weight(BITNET_TYPE_TL2, w, M, K, t2, 1.0f);
        const size_t tl2_bound = bitnet_mul_mat_get_wsize(&T2->t, &a, &d);
        EXPECT_EQ(tl2_bound, (size_t)N * round64(16 * K) + r4);
        // with the extra: from the layout it runs on
        ASSERT_EQ(transform(*T2, BITNET_TYPE_TL2, &t2), BITNET_OK);
        const bitnet_lut_shape &sh = T2->t.extra->shape;
        const size_t qlut = 32 * (size_t)(sh.three_k / 3 + sh.two_k / 2);
        EXPECT_EQ(bitnet_qlut_bytes(BITNET_TYPE_TL2, &sh), qlut);
        EXPECT_EQ(bitnet_mul_mat_get_wsize(&T2->t, &a, &d), (size_t)N * round64(qlut) + r4);
        EXPECT_LE(bitnet_mul_mat_get_wsize(&T2->t, &a, &d), tl2_bound);
        ASSERT_EQ(transform(*I, BITNET_TYPE_TL1, &t1), BITNET_OK);  // I2_S stored, runs on TL1
        EXPECT_EQ(bitnet_mul_mat_get_wsize(&I->t, &a, &d), (size_t)N * round64(16 * K) + r4);
    }
}

TEST_F(LutHost, TooSmallWorkspaceOrBadCallGivesNaNAndTouchesNothing) {
    const int64_t M = 64, K = 256, N = 2;
    const auto w = random_ternary(M * K, 22);
    auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 1.0f);
    auto x = random_acts(K, N, 23);
    std::vector<float> y((size_t)(M * N), 1.0f);
    bitnet_tensor a = f32_tensor(x.data(), K, N), d = f32_tensor(y.data(), M, N);
    // no extra yet
    size_t wsize = bitnet_mul_mat_get_wsize(&W->t, &a, &d);
    AlignedBytes ws = aligned_bytes(wsize);
    std::memset(ws.get(), 0x5A, wsize);
    bitnet_mul_mat(&W->t, &a, &d, ws.get(), wsize, 0, 1, nullptr);
    for (float v : y) ASSERT_TRUE(std::isnan(v));
    ASSERT_EQ(transform(*W, BITNET_TYPE_I2_S, nullptr), BITNET_OK);
    // workspace 64 bytes short
    std::fill(y.begin(), y.end(), 1.0f);
    bitnet_mul_mat(&W->t, &a, &d, ws.get(), wsize - 64, 0, 1, nullptr);
    for (float v : y) ASSERT_TRUE(std::isnan(v));
    for (size_t i = 0; i < wsize; ++i) ASSERT_EQ(ws.get()[i], 0x5A) << i;
    // nth > 1 without a pool, and nth not matching the pool: every thread returns, no deadlock
    std::fill(y.begin(), y.end(), 1.0f);
    bitnet_mul_mat(&W->t, &a, &d, ws.get(), wsize, 0, 2, nullptr);
    for (float v : y) ASSERT_TRUE(std::isnan(v));
    std::fill(y.begin(), y.end(), 1.0f);
    MulArg arg{&W->t, &a, &d, ws.get(), wsize, pool(3)};
    bitnet_threadpool_run(pool(2), mul_task, &arg);
    for (float v : y) ASSERT_TRUE(std::isnan(v));
    // and a proper call works with the same buffers
    bitnet_mul_mat(&W->t, &a, &d, ws.get(), wsize, 0, 1, nullptr);
    EXPECT_TRUE(same_bytes(y, expected_product(w, M, K, 1.0f, x, N).y));
}

// ---- products ----------------------------------------------------------------------------------

struct Case {
    std::string label;
    int64_t M, K;
    // tiles per type; BM == 0: the default tile rule's tiles, and the type is skipped when it has none
    bitnet_tiles tl1{0, 0, 0}, tl2{0, 0, 0};
};

void add_default_tiles(Case &c) {
    if (c.tl1.BM == 0 && !bitnet_lut_default_tiles(BITNET_TYPE_TL1, c.M, c.K, &c.tl1)) c.tl1 = {0, 0, 0};
    if (c.tl2.BM == 0 && !bitnet_lut_default_tiles(BITNET_TYPE_TL2, c.M, c.K, &c.tl2)) c.tl2 = {0, 0, 0};
}

std::vector<Case> hand_cases() {
    std::vector<Case> cs = {
        {"straddle K=96", 32, 96},    {"K%32!=0 K=80", 32, 80}, {"small", 64, 256},
        {"straddle K=8640", 32, 8640}, {"many units", 320, 384}, {"M=96", 96, 512},
        // explicit small BM: 5 tiles, split unevenly over 2..4 threads; TL1 with bm = 64
        {"5 tiles", 160, 288, {32, 96, 32}, {32, 96, 32}},
        {"tl1 bm=64", 192, 256, {64, 128, 64}, {0, 0, 0}},
    };
    for (auto &c : cs) add_default_tiles(c);
    return cs;
}

// Every (type, M, K, tiles) of the generated tables. Small shapes (M·K ≤ 2^18, e.g. the bitnetcpp-tiny
// config) run as they are, so their specialized kernels run through the host; bigger ones are sampled:
// M reduced to at most 3 BM tiles and K to fewer BK blocks with the same K % BK (TL2's two-weight tail
// stays), so the suite stays fast under qemu and ASan. Entries that reduce to the same
// (type, M, K, tiles) run once. The exact big shapes are the kernel tests' job.
std::vector<Case> table_cases() {
    std::set<std::tuple<int, int64_t, int64_t, int, int, int>> seen;
    std::vector<Case> cs;
    for (size_t ti = 0; ti < bitnet_lut_n_tables; ++ti) {
        const bitnet_lut_table &tab = bitnet_lut_tables[ti];
        for (size_t ei = 0; ei < tab.n_entries; ++ei) {
            const bitnet_lut_table_entry &e = tab.entries[ei];
            Case c;
            const int64_t BM = e.tiles.BM, BK = e.tiles.BK;
            if (e.M * e.K <= (int64_t{1} << 18)) {
                c.M = e.M;
                c.K = e.K;
            } else {
                c.M = BM * std::min<int64_t>(e.M / BM, 3);
                const int64_t rem = e.K % BK;
                int64_t blocks = std::min<int64_t>(e.K / BK, std::max<int64_t>(1, (384 + BK - 1) / BK));
                while (tab.type == BITNET_TYPE_TL2 && rem + blocks * BK < 256 && blocks < e.K / BK) ++blocks;
                c.K = rem + blocks * BK;
            }
            if (!seen.insert({tab.type, c.M, c.K, e.tiles.BM, e.tiles.BK, e.tiles.bm}).second) continue;
            c.label = std::string(tab.config) + "/" + tab.table + "/" + tname(tab.type) + " " + std::to_string(e.M) +
                      "x" + std::to_string(e.K) + (c.M == e.M && c.K == e.K ? "" : " (sampled)");
            if (tab.type == BITNET_TYPE_TL1) c.tl1 = e.tiles;
            else c.tl2 = e.tiles;
            add_default_tiles(c);
            cs.push_back(c);
        }
    }
    return cs;
}

// One case: every available path (I2_S always; TL1/TL2 when tiles exist), threads 1..4, against the
// exact expected floats; plus stored-I2_S → TL target, the zero column and the quantization bound.
void run_case(const Case &c, uint32_t seed) {
    SCOPED_TRACE(c.label + " M=" + std::to_string(c.M) + " K=" + std::to_string(c.K));
    const int64_t M = c.M, K = c.K, N = 3, zero_col = 1;
    ASSERT_EQ((M * K) % 128, 0);
    const auto w = random_ternary(M * K, seed);
    const float scale = 0.0421f + (float)(seed % 5) * 0.01f;
    const auto x = random_acts(K, N, seed + 1, zero_col);
    const Expected e = expected_product(w, M, K, scale, x, N);
    expect_within_quant_bound(e, w, M, K, scale, x, N);
    for (int64_t m = 0; m < M; ++m) {
        ASSERT_EQ(e.y[(size_t)(zero_col * M + m)], 0.0f);
        ASSERT_FALSE(std::signbit(e.y[(size_t)(zero_col * M + m)]));
    }

    struct Path { int type; bitnet_tiles tiles; };
    std::vector<Path> paths = {{BITNET_TYPE_I2_S, {0, 0, 0}}};
    if (c.tl1.BM) paths.push_back({BITNET_TYPE_TL1, c.tl1});
    if (c.tl2.BM) paths.push_back({BITNET_TYPE_TL2, c.tl2});
    for (const Path &p : paths) {
        SCOPED_TRACE(std::string("path ") + tname(p.type) + " BM=" + std::to_string(p.tiles.BM) +
                     " BK=" + std::to_string(p.tiles.BK) + " bm=" + std::to_string(p.tiles.bm));
        auto W = make_weight(p.type, w, M, K, p.tiles, scale);
        std::string msg;
        ASSERT_EQ(transform_weight(*W, p.type, p.type == BITNET_TYPE_I2_S ? nullptr : &p.tiles, &msg), BITNET_OK) << msg;
        for (int nth = 1; nth <= 4; ++nth) {
            const auto y = product(W->t, x, N, nth);
            ASSERT_TRUE(same_bytes(y, e.y)) << "nth=" << nth << " impl " << W->t.extra->impl.name << ": "
                                            << first_diff(y, e.y);
        }
        if (p.type != BITNET_TYPE_I2_S) {  // the same weight stored as I2_S, run on this layout
            auto S = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, scale);
            ASSERT_EQ(transform_weight(*S, p.type, &p.tiles, &msg), BITNET_OK) << msg;
            const auto y = product(S->t, x, N, 2);
            ASSERT_TRUE(same_bytes(y, e.y)) << "from I2_S: " << first_diff(y, e.y);
        }
    }
}

TEST_F(LutHost, ProductsHandShapes) {
    uint32_t seed = 100;
    for (const Case &c : hand_cases()) {
        run_case(c, seed += 10);
        if (HasFatalFailure()) return;
    }
}

TEST_F(LutHost, ProductsEveryTableEntrySampled) {
    const auto cs = table_cases();
    if (bitnet_lut_n_tables > 0) {
        EXPECT_FALSE(cs.empty());
    }
    uint32_t seed = 1000;
    for (const Case &c : cs) {
        run_case(c, seed += 10);
        if (HasFatalFailure()) return;
    }
}

TEST_F(LutHost, NColumnsEqualNSingleColumnCalls) {
    const int64_t M = 64, K = 256;
    Case c{"ncols", M, K};
    add_default_tiles(c);
    const auto w = random_ternary(M * K, 31);
    const float scale = 0.05f;
    std::vector<std::pair<int, bitnet_tiles>> paths = {{BITNET_TYPE_I2_S, {0, 0, 0}}};
    if (c.tl1.BM) paths.push_back({BITNET_TYPE_TL1, c.tl1});
    if (c.tl2.BM) paths.push_back({BITNET_TYPE_TL2, c.tl2});
    ASSERT_EQ(paths.size(), 3u);
    // each TL layout with the LUT kernel at every N (threshold 0) and with its int8 batch path from N = 16
    // (on x86-64 with AVX2 the int8 kernel on the TL2 bytes; 1100 columns take several of its calls per tile)
    for (int64_t threshold : {int64_t(0), int64_t(16)}) {
    for (auto &[type, tiles] : paths) {
        SCOPED_TRACE("threshold " + std::to_string(threshold));
        bitnet_lut_set_i2s_min_cols(threshold);
        auto W = make_weight(type, w, M, K, tiles, scale);
        ASSERT_EQ(transform_weight(*W, type, type == BITNET_TYPE_I2_S ? nullptr : &tiles, nullptr), BITNET_OK);
        bitnet_lut_set_i2s_min_cols(-1);
        if (type == BITNET_TYPE_TL2) {
            EXPECT_EQ(bitnet_lut_uses_int8(W->t.extra, 1100), threshold > 0 && W->t.extra->int8_on_tl2);
        }
        for (int64_t N : {1, 2, 3, 8, 33, 1100}) {
            const auto x = random_acts(K, N, (uint32_t)(40 + N), N > 2 ? 2 : -1);
            const auto all = product(W->t, x, N, 3);
            for (int64_t n = 0; n < N; ++n) {
                std::vector<float> xn(x.begin() + n * K, x.begin() + (n + 1) * K);
                const auto one = product(W->t, xn, 1, 1);
                ASSERT_EQ(0, std::memcmp(one.data(), &all[(size_t)(n * M)], (size_t)M * sizeof(float)))
                    << tname(type) << " N=" << N << " column " << n;
            }
        }
    }
    }
}

// Batch path: for N >= the threshold a TL2 weight runs the int8 kernel on its TL2 bytes on x86-64 with AVX2
// (from I2_S or stored as TL2); otherwise a TL1/TL2 weight transformed from I2_S keeps the I2_S bytes
// and runs the I2_S kernel, and the same weight stored as TL1/TL2 always runs the LUT kernel. All must give
// the same bytes as the exact expected product for every N and thread count, with a workspace of
// exactly get_wsize bytes (canary + ASan poison behind it).
TEST_F(LutHost, I2sBatchPathGivesTheLutPathBytes) {
    struct Shape { int64_t M, K; bitnet_tiles tl1, tl2; };
    std::vector<Shape> shapes = {{64, 256, {0, 0, 0}, {0, 0, 0}}, {160, 288, {32, 96, 32}, {32, 96, 32}}};
    // the default: 16 with the AVX-512 VNNI I2_S kernel, else 0; a weight with the int8 kernel on its TL2
    // bytes starts from 16 whatever the I2_S kernel (lut_host.h)
    ASSERT_EQ(unsetenv("BITNET_LUT_I2S_MIN_COLS"), 0);
    bitnet_lut_set_i2s_min_cols(-1);
    const int64_t default_min = bitnet_lut_i2s_min_cols();
    EXPECT_EQ(default_min, std::string(bitnet_i2s_isa()) == "avx512" ? BITNET_LUT_I2S_MIN_COLS_VNNI : 0);
    const int64_t threshold = 5;
    bitnet_lut_set_i2s_min_cols(threshold);
    uint32_t seed = 700;
    for (Shape &sh : shapes) {
        Case c{"batch path", sh.M, sh.K, sh.tl1, sh.tl2};
        add_default_tiles(c);
        const auto w = random_ternary(sh.M * sh.K, seed++);
        const float scale = 0.037f;
        const auto x = random_acts(sh.K, 40, seed++, 3);
        for (auto [type, tiles] : std::vector<std::pair<int, bitnet_tiles>>{{BITNET_TYPE_TL1, c.tl1},
                                                                            {BITNET_TYPE_TL2, c.tl2}}) {
            SCOPED_TRACE(std::string(tname(type)) + " M=" + std::to_string(sh.M) + " K=" + std::to_string(sh.K));
            ASSERT_GT(tiles.BM, 0);
            auto S = make_weight(BITNET_TYPE_I2_S, w, sh.M, sh.K, {0, 0, 0}, scale, 32);  // file-like offset
            auto T = make_weight(type, w, sh.M, sh.K, tiles, scale);
            std::string msg;
            ASSERT_EQ(transform_weight(*S, type, &tiles, &msg), BITNET_OK) << msg;
            ASSERT_EQ(transform_weight(*T, type, &tiles, &msg), BITNET_OK) << msg;
            // TL2 with the AVX-512 int8 kernel on its bytes: both weights take it and no I2_S bytes are kept;
            // otherwise the weight from I2_S keeps its bytes and the stored one runs the LUT path only
            const bool on_tl2 = type == BITNET_TYPE_TL2 && bitnet_tl2_i8_supports(&S->t.extra->shape);
            ASSERT_EQ(S->t.extra->int8_on_tl2, on_tl2);
            ASSERT_EQ(T->t.extra->int8_on_tl2, on_tl2);
            ASSERT_EQ(S->t.extra->i2s_codes, on_tl2 ? nullptr : (const uint8_t *)S->t.data);
            ASSERT_EQ(S->t.extra->i2s_min_cols, threshold);
            ASSERT_EQ(T->t.extra->i2s_codes, nullptr);
            EXPECT_FALSE(bitnet_lut_uses_int8(S->t.extra, threshold - 1));
            EXPECT_TRUE(bitnet_lut_uses_int8(S->t.extra, threshold));
            EXPECT_EQ(bitnet_lut_uses_int8(T->t.extra, 40), on_tl2);
            if (on_tl2) {
                EXPECT_FALSE(bitnet_lut_uses_int8(T->t.extra, threshold - 1));
            }
            for (int64_t N = 1; N <= 40; ++N) {
                const std::vector<float> xn(x.begin(), x.begin() + N * sh.K);
                const Expected e = expected_product(w, sh.M, sh.K, scale, xn, N);
                for (int nth = 1; nth <= 4; ++nth) {
                    const auto ys = product(S->t, xn, N, nth);
                    const auto yt = product(T->t, xn, N, nth);
                    ASSERT_TRUE(same_bytes(ys, e.y)) << "I2_S-backed N=" << N << " nth=" << nth << ": " << first_diff(ys, e.y);
                    ASSERT_TRUE(same_bytes(yt, e.y)) << "LUT N=" << N << " nth=" << nth << ": " << first_diff(yt, e.y);
                }
            }
        }
    }
    // 0 = never: a transform after this keeps the bytes but never uses them
    bitnet_lut_set_i2s_min_cols(0);
    {
        Case c{"never", 64, 256};
        add_default_tiles(c);
        auto S = make_weight(BITNET_TYPE_I2_S, random_ternary(64 * 256, 9), 64, 256, {0, 0, 0}, 0.5f);
        ASSERT_EQ(transform_weight(*S, BITNET_TYPE_TL2, &c.tl2, nullptr), BITNET_OK);
        EXPECT_EQ(S->t.extra->i2s_codes != nullptr, !S->t.extra->int8_on_tl2);
        EXPECT_TRUE(bitnet_lut_has_int8(S->t.extra));
        EXPECT_FALSE(bitnet_lut_uses_int8(S->t.extra, 1 << 20));
    }
    // the environment variable is read when the threshold goes back to its default; bad values are ignored
    ASSERT_EQ(setenv("BITNET_LUT_I2S_MIN_COLS", "7", 1), 0);
    bitnet_lut_set_i2s_min_cols(-1);
    EXPECT_EQ(bitnet_lut_i2s_min_cols(), 7);
    ASSERT_EQ(setenv("BITNET_LUT_I2S_MIN_COLS", "7x", 1), 0);
    bitnet_lut_set_i2s_min_cols(-1);
    EXPECT_EQ(bitnet_lut_i2s_min_cols(), default_min);
    ASSERT_EQ(unsetenv("BITNET_LUT_I2S_MIN_COLS"), 0);
    bitnet_lut_set_i2s_min_cols(-1);
    EXPECT_EQ(bitnet_lut_i2s_min_cols(), default_min);
}

TEST_F(LutHost, AllZeroActivationGivesExactZero) {
    const int64_t M = 64, K = 256, N = 2;
    Case c{"zeros", M, K};
    add_default_tiles(c);
    const auto w = random_ternary(M * K, 51);
    std::vector<float> x((size_t)(K * N), 0.0f);
    for (auto [type, tiles] : std::vector<std::pair<int, bitnet_tiles>>{
             {BITNET_TYPE_I2_S, {0, 0, 0}}, {BITNET_TYPE_TL1, c.tl1}, {BITNET_TYPE_TL2, c.tl2}}) {
        auto W = make_weight(type, w, M, K, tiles, 0.9f);
        ASSERT_EQ(transform_weight(*W, type, type == BITNET_TYPE_I2_S ? nullptr : &tiles, nullptr), BITNET_OK);
        for (int nth : {1, 4}) {
            const auto y = product(W->t, x, N, nth);
            for (float v : y) {
                ASSERT_FALSE(std::isnan(v)) << tname(type);
                ASSERT_EQ(v, 0.0f) << tname(type);
            }
        }
    }
}

TEST_F(LutHost, StridedActivationsAndOutputs) {
    const int64_t M = 64, K = 256, N = 3;
    const auto w = random_ternary(M * K, 61);
    auto W = make_weight(BITNET_TYPE_I2_S, w, M, K, {0, 0, 0}, 0.2f);
    ASSERT_EQ(transform_weight(*W, BITNET_TYPE_I2_S, nullptr, nullptr), BITNET_OK);
    const auto x = random_acts(K, N, 62);
    const auto dense = product(W->t, x, N, 2);
    const size_t xs = (size_t)K + 16, ys = (size_t)M + 8;
    std::vector<float> xp(xs * N, 777.0f), yp(ys * N, -1.0f);
    for (int64_t n = 0; n < N; ++n) std::copy(x.begin() + n * K, x.begin() + (n + 1) * K, xp.begin() + n * xs);
    bitnet_tensor a = f32_tensor(xp.data(), K, N, xs), d = f32_tensor(yp.data(), M, N, ys);
    const size_t wsize = bitnet_mul_mat_get_wsize(&W->t, &a, &d);
    AlignedBytes ws = aligned_bytes(wsize);
    MulArg arg{&W->t, &a, &d, ws.get(), wsize, pool(2)};
    bitnet_threadpool_run(pool(2), mul_task, &arg);
    for (int64_t n = 0; n < N; ++n) {
        ASSERT_EQ(0, std::memcmp(&yp[n * ys], &dense[(size_t)(n * M)], (size_t)M * sizeof(float))) << n;
        for (size_t i = (size_t)M; i < ys; ++i) ASSERT_EQ(yp[n * ys + i], -1.0f);  // gaps untouched
    }
}

// ---- kernel choice per batch size (runtime/kchoice.h) ----------------------------------------------

// The crossover is the threshold with the least total slowdown over the measured N (the largest N
// counted twice); values worked out by hand from the rule in kchoice.h.
TEST(KernelChoice, CrossoverRule) {
    using P = bitnet_kchoice_point;
    const std::vector<P> lut_wins = {{1, 10, 12}, {2, 20, 21}, {4, 40, 41}};
    EXPECT_EQ(bitnet_kchoice_crossover(lut_wins.data(), 3), 0);
    // T=1: 1.2+1+1.025+1+2 = 6.225, T=2: 6.025, T=4: 6.078, T=8: 6.053, never: 1+1.053+1+1.143+2.667 = 6.862
    const std::vector<P> from2 = {{1, 10, 12}, {2, 20, 19}, {4, 40, 41}, {8, 80, 70}, {16, 160, 120}};
    EXPECT_EQ(bitnet_kchoice_crossover(from2.data(), 5), 2);
    // a 1 % slower point among faster ones does not stop the int8 kernel (the old "every larger N" rule would
    // have given 8 here)
    const std::vector<P> noisy = {{1, 10, 10.5}, {2, 20, 15}, {4, 40, 40.4}, {8, 80, 60}, {16, 160, 110}};
    EXPECT_EQ(bitnet_kchoice_crossover(noisy.data(), 5), 2);
    const std::vector<P> always = {{1, 10, 9}, {2, 20, 20}, {4, 40, 30}};
    EXPECT_EQ(bitnet_kchoice_crossover(always.data(), 3), 1);
    // the largest N counts twice: T=1: 1+1+2*1.25 = 4.5 < never: 1.111+2+2 = 5.111
    const std::vector<P> last_lost = {{1, 10, 9}, {2, 20, 10}, {4, 40, 50}};
    EXPECT_EQ(bitnet_kchoice_crossover(last_lost.data(), 3), 1);
    // ...but a clear loss there wins: T=1: 1+1+2*2 = 6 > never: 1.25+1.25+2 = 4.5
    const std::vector<P> last_clear = {{1, 10, 8}, {2, 20, 16}, {4, 40, 80}};
    EXPECT_EQ(bitnet_kchoice_crossover(last_clear.data(), 3), 0);
    const std::vector<P> equal = {{1, 10, 10}, {2, 20, 20}};
    EXPECT_EQ(bitnet_kchoice_crossover(equal.data(), 2), 0);  // a tie keeps the LUT kernel
    const std::vector<P> missing = {{1, 10, 9}, {2, 0, 10}, {4, 40, 30}};
    EXPECT_EQ(bitnet_kchoice_crossover(missing.data(), 3), 1);  // a point without a time is skipped
    EXPECT_EQ(bitnet_kchoice_crossover(nullptr, 0), 0);
}

// The cache file: the last line of a key wins; malformed, foreign and over-long lines are skipped;
// a missing file is "not found"; BITNET_KERNEL_CACHE chooses the file or turns it off.
TEST(KernelChoice, CacheFile) {
    const std::string path = ::testing::TempDir() + "kchoice_" + std::to_string(getpid()) + ".txt";
    std::remove(path.c_str());
    int64_t v = -1;
    EXPECT_FALSE(bitnet_kchoice_cache_get(path.c_str(), "k1", &v));
    ASSERT_TRUE(bitnet_kchoice_cache_put(path.c_str(), "k1", 8));
    ASSERT_TRUE(bitnet_kchoice_cache_put(path.c_str(), "k2", 0));
    EXPECT_TRUE(bitnet_kchoice_cache_get(path.c_str(), "k1", &v));
    EXPECT_EQ(v, 8);
    EXPECT_TRUE(bitnet_kchoice_cache_get(path.c_str(), "k2", &v));
    EXPECT_EQ(v, 0);
    {
        std::ofstream f(path, std::ios::app);
        f << "k1 x\nk1 -3\nk1 9999999999\nk1\nk10 5\n" << std::string(3000, 'k') << " 4\nk1 2";  // no newline last
    }
    EXPECT_TRUE(bitnet_kchoice_cache_get(path.c_str(), "k1", &v));
    EXPECT_EQ(v, 8);  // none of the bad lines replaced it
    ASSERT_TRUE(bitnet_kchoice_cache_put(path.c_str(), "k1", 4));
    EXPECT_TRUE(bitnet_kchoice_cache_get(path.c_str(), "k1", &v));
    EXPECT_EQ(v, 4);  // the put ended the unterminated "k1 2" line first, then its own record is the last
    {
        std::ofstream f(path, std::ios::app);
        f << std::string("k1 7\0 junk\n", 11) << "k1 5 \n";  // a NUL inside, trailing garbage: both skipped
    }
    EXPECT_TRUE(bitnet_kchoice_cache_get(path.c_str(), "k1", &v));
    EXPECT_EQ(v, 4);
    ASSERT_TRUE(bitnet_kchoice_cache_put(path.c_str(), "k1", 16));
    EXPECT_TRUE(bitnet_kchoice_cache_get(path.c_str(), "k1", &v));
    EXPECT_EQ(v, 16);
    EXPECT_FALSE(bitnet_kchoice_cache_put("/proc/no-such-dir/a/b.txt", "k", 1));
    // missing parent directories are made (as for a first ~/.cache/bitnet/kernel-choice.txt)
    const std::string deep = ::testing::TempDir() + "kchoice_dir_" + std::to_string(getpid()) + "/x/y/k.txt";
    ASSERT_TRUE(bitnet_kchoice_cache_put(deep.c_str(), "k9", 2));
    EXPECT_TRUE(bitnet_kchoice_cache_get(deep.c_str(), "k9", &v));
    EXPECT_EQ(v, 2);
    std::remove(deep.c_str());
    char buf[256];
    ASSERT_EQ(setenv("BITNET_KERNEL_CACHE", "off", 1), 0);
    EXPECT_EQ(bitnet_kchoice_cache_path(buf, sizeof buf), nullptr);
    ASSERT_EQ(setenv("BITNET_KERNEL_CACHE", path.c_str(), 1), 0);
    ASSERT_NE(bitnet_kchoice_cache_path(buf, sizeof buf), nullptr);
    EXPECT_EQ(std::string(buf), path);
    ASSERT_EQ(unsetenv("BITNET_KERNEL_CACHE"), 0);
    std::remove(path.c_str());
}

// Measuring: every point timed for both kernels, the crossover follows the rule, the extras get their
// thresholds back, and the products measured are the real ones (a weight without I2_S bytes or of
// another shape is refused by name).
TEST_F(LutHost, KernelChoiceMeasuresBothKernels) {
    bitnet_lut_set_i2s_min_cols(3);
    EXPECT_TRUE(bitnet_lut_i2s_min_cols_fixed());
    const int64_t M = 160, K = 288;
    Case c{"kchoice", M, K, {32, 96, 32}, {32, 96, 32}};
    std::vector<std::unique_ptr<Weight>> ws;
    std::vector<bitnet_tensor *> ts;
    for (int i = 0; i < 3; ++i) {
        ws.push_back(make_weight(BITNET_TYPE_I2_S, random_ternary(M * K, 40 + i), M, K, {0, 0, 0}, 0.25f, 32));
        std::string msg;
        ASSERT_EQ(transform_weight(*ws.back(), BITNET_TYPE_TL2, &c.tl2, &msg), BITNET_OK) << msg;
        ts.push_back(&ws.back()->t);
    }
    for (int nth : {1, 2}) {
        bitnet_kchoice kc;
        bitnet_error err{};
        ASSERT_EQ(bitnet_kchoice_measure(ts.data(), (int)ts.size(), pool(nth), &kc, &err), BITNET_OK) << err.msg;
        EXPECT_EQ(kc.type, BITNET_TYPE_TL2);
        EXPECT_EQ(kc.M, M);
        EXPECT_EQ(kc.K, K);
        EXPECT_EQ(kc.BM, 32);
        EXPECT_EQ(kc.n_threads, nth);
        ASSERT_EQ(kc.n_points, BITNET_KCHOICE_MAX_POINTS);
        for (int p = 0; p < kc.n_points; ++p) {
            EXPECT_EQ(kc.pts[p].n_cols, int64_t(1) << p);
            EXPECT_GT(kc.pts[p].lut_us, 0.0);
            EXPECT_GT(kc.pts[p].i2s_us, 0.0);
        }
        EXPECT_EQ(kc.i2s_min_cols, bitnet_kchoice_crossover(kc.pts, kc.n_points));
        EXPECT_GT(kc.seconds, 0.0);
        for (auto *t : ts) EXPECT_EQ(t->extra->i2s_min_cols, 3);
    }
    // refused: a weight stored as TL1 (no int8 path)
    auto T = make_weight(BITNET_TYPE_TL1, random_ternary(M * K, 50), M, K, c.tl1, 0.25f);
    ASSERT_EQ(transform_weight(*T, BITNET_TYPE_TL1, &c.tl1, nullptr), BITNET_OK);
    ASSERT_FALSE(bitnet_lut_has_int8(T->t.extra));
    std::snprintf(T->t.name, sizeof T->t.name, "stored-tl1");
    bitnet_tensor *bad[2] = {ts[0], &T->t};
    bitnet_kchoice kc;
    bitnet_error err{};
    EXPECT_EQ(bitnet_kchoice_measure(bad, 2, pool(1), &kc, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("stored-tl1"), std::string::npos) << err.msg;
    bitnet_lut_set_i2s_min_cols(-1);
    if (!getenv("BITNET_LUT_I2S_MIN_COLS")) {
        EXPECT_FALSE(bitnet_lut_i2s_min_cols_fixed());
    }
}

}  // namespace
