// test_dense.cc — the dense dot products of kernels/dense/dense.h (the output head and the attention)
// against this file's own scalar versions of the orders dense.h defines, bit for bit: whichever
// version bitnet_dense_init chose (AVX2/F16C on x86-64, NEON on AArch64 — under qemu in the cross
// build —, scalar with BITNET_ISA=scalar) must give exactly these floats, for lengths with and
// without a tail (n % 32 != 0) and for the head kernels of F32, F16 and Q8_0 rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "base/quants.h"
#include "kernels/dense/dense.h"

namespace {

// dense.h's F32 order: eight lane sums s[i % 8] in index order, then ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)).
float ref_dot_f32(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    for (int64_t i = 0; i < n; i++) s[i % 8] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// dense.h's F16 order: 32 lane sums over the whole 32-blocks, folds (l, l+16), (l, l+8), (l, l+4),
// then (s0+s1)+(s2+s3), and the n % 32 tail added in double.
float ref_dot_f16(const uint16_t *a, const float *b, int64_t n) {
    const int64_t n32 = n / 32 * 32;
    float s[32] = {0};
    for (int64_t i = 0; i < n32; i++) s[i % 32] += bitnet_fp16_to_fp32(a[i]) * b[i];
    for (int l = 0; l < 16; l++) s[l] += s[l + 16];
    for (int l = 0; l < 8; l++) s[l] += s[l + 8];
    for (int l = 0; l < 4; l++) s[l] += s[l + 4];
    double sum = (double)((s[0] + s[1]) + (s[2] + s[3]));
    for (int64_t i = n32; i < n; i++) sum += (double)(bitnet_fp16_to_fp32(a[i]) * b[i]);
    return (float)sum;
}

// ggml's Q8_0 vec_dot: per block (float)(Σ qa·qb) · (da·db), summed in block order.
float ref_dot_q8_0(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t k = 0; k < n / 32; k++) {
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += (int32_t)a[k].qs[j] * (int32_t)b[k].qs[j];
        sum += (float)isum * (bitnet_fp16_to_fp32(a[k].d) * bitnet_fp16_to_fp32(b[k].d));
    }
    return sum;
}

std::vector<float> randoms(std::mt19937 &rng, int64_t n, float scale) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v((size_t)n);
    for (auto &x : v) x = d(rng);
    return v;
}

class Dense : public testing::TestWithParam<int64_t> {
  protected:
    void SetUp() override { bitnet_dense_init(); }
};

TEST_P(Dense, F32DotIsTheDefinedOrder) {
    const int64_t n = GetParam();
    std::mt19937 rng((uint32_t)n);
    const auto a = randoms(rng, n, 1.0f), b = randoms(rng, n, 3.0f);
    EXPECT_EQ(bitnet_dense_dot_f32(a.data(), b.data(), n), ref_dot_f32(a.data(), b.data(), n)) << "n = " << n;
}

TEST_P(Dense, F16DotIsTheDefinedOrderOnEveryIsa) {
    const int64_t n = GetParam();
    std::mt19937 rng(100 + (uint32_t)n);
    const auto af = randoms(rng, n, 0.5f), bf = randoms(rng, n, 2.0f);
    std::vector<uint16_t> a((size_t)n);
    std::vector<float> b((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        a[(size_t)i] = bitnet_fp32_to_fp16(af[(size_t)i]);
        b[(size_t)i] = bitnet_dense_round_f16(bf[(size_t)i]);   // the contract: b holds binary16 values
        ASSERT_EQ(bitnet_dense_f16(a[(size_t)i]), bitnet_fp16_to_fp32(a[(size_t)i]));
    }
    EXPECT_EQ(bitnet_dense_dot_f16(a.data(), b.data(), n), ref_dot_f16(a.data(), b.data(), n)) << "n = " << n;
}

TEST_P(Dense, Q8_0DotIsGgmlsDefinitionOnEveryIsa) {
    const int64_t n = GetParam() / 32 * 32;
    if (n == 0) GTEST_SKIP() << "Q8_0 needs whole 32-blocks";
    std::mt19937 rng(200 + (uint32_t)n);
    const auto af = randoms(rng, n, 1.0f), bf = randoms(rng, n, 4.0f);
    std::vector<bitnet_block_q8_0> a((size_t)n / 32), b((size_t)n / 32);
    bitnet_quantize_row_q8_0(af.data(), a.data(), n);
    bitnet_quantize_row_q8_0(bf.data(), b.data(), n);
    a[0].qs[0] = -128;   // a may hold -128 (dense.h)
    EXPECT_EQ(bitnet_dense_dot_q8_0(a.data(), b.data(), n), ref_dot_q8_0(a.data(), b.data(), n)) << "n = " << n;
}

TEST_P(Dense, HeadKernelsPrepareAndMultiplyAsTheirTypeSays) {
    const int64_t n = GetParam() / 32 * 32;
    if (n == 0) GTEST_SKIP() << "the head kernels take whole 32-blocks here";
    std::mt19937 rng(300 + (uint32_t)n);
    const auto x = randoms(rng, n, 1.0f), w = randoms(rng, n, 0.1f);
    // F32 rows: the activation is copied
    const bitnet_dense_kernel *k = bitnet_dense_kernel_for(BITNET_TYPE_F32);
    ASSERT_NE(k, nullptr);
    std::vector<uint8_t> act(k->act_bytes(n));
    k->prepare(x.data(), act.data(), n);
    EXPECT_EQ(k->dot(w.data(), act.data(), n), ref_dot_f32(w.data(), x.data(), n));
    // F16 rows: the activation is rounded to binary16 values
    k = bitnet_dense_kernel_for(BITNET_TYPE_F16);
    ASSERT_NE(k, nullptr);
    std::vector<uint16_t> w16((size_t)n);
    std::vector<float> x16((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        w16[(size_t)i] = bitnet_fp32_to_fp16(w[(size_t)i]);
        x16[(size_t)i] = bitnet_dense_round_f16(x[(size_t)i]);
    }
    act.assign(k->act_bytes(n), 0);
    k->prepare(x.data(), act.data(), n);
    EXPECT_EQ(k->dot(w16.data(), act.data(), n), ref_dot_f16(w16.data(), x16.data(), n));
    // Q8_0 rows: the activation is quantized to Q8_0
    k = bitnet_dense_kernel_for(BITNET_TYPE_Q8_0);
    ASSERT_NE(k, nullptr);
    std::vector<bitnet_block_q8_0> wq((size_t)n / 32), xq((size_t)n / 32);
    bitnet_quantize_row_q8_0(w.data(), wq.data(), n);
    bitnet_quantize_row_q8_0(x.data(), xq.data(), n);
    act.assign(k->act_bytes(n), 0);
    k->prepare(x.data(), act.data(), n);
    EXPECT_EQ(k->dot(wq.data(), act.data(), n), ref_dot_q8_0(wq.data(), xq.data(), n));
    // other types have no kernel of their own (their rows are converted to float first)
    EXPECT_EQ(bitnet_dense_kernel_for(BITNET_TYPE_Q6_K), nullptr);
    EXPECT_EQ(bitnet_dense_kernel_for(BITNET_TYPE_TL2), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Lengths, Dense, testing::Values<int64_t>(1, 7, 31, 32, 33, 64, 95, 256, 1000, 2560));

}  // namespace
