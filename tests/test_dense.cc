// test_dense.cc — the dense dot products of kernels/dense/dense.h (the output head and the attention)
// against this file's own scalar versions of the orders dense.h defines, bit for bit: whichever
// version bitnet_dense_init chose (AVX-512 or AVX2/F16C on x86-64 — ctest test_dense_avx2 and test_dense_scalar
// cap the ISA —, NEON on AArch64 — under qemu in the cross build —, scalar with BITNET_ISA=scalar) must give
// exactly these floats, for lengths with and
// without a tail (n % 32 != 0) and for the head kernels of F32, F16 and Q8_0 rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
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

// 1..10 binary16 rows (n + 3 values apart) against one vector (the AVX2 version takes rows in fours and
// adds their tails together in double lanes): each output is the defined order's float for its row.
TEST_P(Dense, F16RowsAreEachTheSingleDot) {
    const int64_t n = GetParam();
    std::mt19937 rng(500 + (uint32_t)n);
    const size_t a_stride = (size_t)n + 3;
    for (int64_t rows = 1; rows <= 10; rows++) {
        const auto af = randoms(rng, (int64_t)a_stride * rows, 0.5f), bf = randoms(rng, n, 2.0f);
        std::vector<uint16_t> a(af.size());
        std::vector<float> b((size_t)n);
        for (size_t i = 0; i < a.size(); i++) a[i] = bitnet_fp32_to_fp16(af[i]);
        for (int64_t i = 0; i < n; i++) b[(size_t)i] = bitnet_dense_round_f16(bf[(size_t)i]);
        std::vector<float> out((size_t)rows + 1, -12345.0f);
        bitnet_dense_dot_f16_rows(a.data(), a_stride, b.data(), n, rows, out.data());
        for (int64_t r = 0; r < rows; r++) {
            const uint16_t *ar = a.data() + (size_t)r * a_stride;
            EXPECT_EQ(out[(size_t)r], ref_dot_f16(ar, b.data(), n)) << "n = " << n << ", row " << r << " of " << rows;
        }
        EXPECT_EQ(out[(size_t)rows], -12345.0f);
    }
}

// Finite binary16 codes with the edge cases of the fused products: a quarter subnormals, a tenth ±65504, the
// rest any finite non-zero code (infinities are placed by the test; no NaN inputs: NaN payloads are not part
// of the contract).
uint16_t edge_f16(std::mt19937 &rng) {
    const uint32_t k = rng() % 20, sign = (rng() & 1u) << 15;
    if (k < 5) return (uint16_t)(sign | (rng() % 0x3FFu + 1));  // subnormal
    if (k < 7) return (uint16_t)(sign | 0x7BFFu);                // ±65504
    return (uint16_t)(sign | (rng() % 0x7BFFu + 1));             // any finite non-zero code
}

// the same float, or both NaN (infinity × 0 and +∞ + -∞ make NaNs, whose payloads may differ)
bool same_float(float x, float y) {
    if (x != x || y != y) return x != x && y != y;
    uint32_t bx, by;
    memcpy(&bx, &x, 4);
    memcpy(&by, &y, 4);
    return bx == by;
}

// Every F16 product of several rows, columns or channels on binary16 edge values (subnormals, the largest
// finite values in a and b, and a few infinities): the defined order's float, bit for bit (NaN where it is NaN). The
// fused multiply-adds of the AVX2 and NEON versions are exact only because such products are.
TEST_P(Dense, F16ProductsOfEdgeValuesAreTheDefinedOrder) {
    const int64_t n = GetParam();
    std::mt19937 rng(700 + (uint32_t)n);
    const int64_t rows = 11, cols = 13;
    std::vector<uint16_t> a((size_t)(rows * n)), bcode((size_t)(cols * n));
    for (auto &h : a) h = edge_f16(rng);
    for (auto &h : bcode) h = edge_f16(rng);
    a[(size_t)(n - 1)] = 0x7C00;       // row 0 ends with +infinity (in the tail when n % 32 != 0)
    a[(size_t)(2 * n - 1)] = 0xFC00;   // row 1 with -infinity
    if (n > 1) bcode[(size_t)(2 * n)] = 0x7C00;   // column 2 starts with +infinity
    std::vector<float> b(bcode.size());
    for (size_t i = 0; i < b.size(); i++) b[i] = bitnet_fp16_to_fp32(bcode[i]);
    std::vector<float> out((size_t)(rows * cols));
    bitnet_dense_mul_f16(a.data(), (size_t)n, rows, b.data(), (size_t)n, cols, n, out.data(), (size_t)rows);
    for (int64_t j = 0; j < cols; j++)
        for (int64_t r = 0; r < rows; r++) {
            const float want = ref_dot_f16(a.data() + r * n, b.data() + j * n, n);
            ASSERT_TRUE(same_float(out[(size_t)(j * rows + r)], want)) << "mul, n = " << n << ", row " << r << ", column " << j
                                                                        << ": " << out[(size_t)(j * rows + r)] << " vs " << want;
        }
    std::vector<float> rout((size_t)rows);
    bitnet_dense_dot_f16_rows(a.data(), (size_t)n, b.data(), n, rows, rout.data());
    for (int64_t r = 0; r < rows; r++) {
        const float want = ref_dot_f16(a.data() + r * n, b.data(), n);
        ASSERT_TRUE(same_float(rout[(size_t)r], want)) << "rows, n = " << n << ", row " << r;
    }
    // columns: n positions of 45 channels (32 + 8 + 5: every path of the AVX2 version)
    const int64_t ch = 45;
    std::vector<uint16_t> v((size_t)(n * ch)), column((size_t)n);
    for (auto &h : v) h = edge_f16(rng);
    v[0] = 0x7C00;                                 // channel 0 at position 0: +infinity
    v[(size_t)((n - 1) * ch + 33)] = 0xFC00;       // channel 33 at the last position: -infinity
    std::vector<float> cout((size_t)ch);
    bitnet_dense_dot_f16_columns(v.data(), (size_t)ch, b.data(), n, ch, cout.data());
    for (int64_t i = 0; i < ch; i++) {
        for (int64_t j = 0; j < n; j++) column[(size_t)j] = v[(size_t)(j * ch + i)];
        const float want = ref_dot_f16(column.data(), b.data(), n);
        ASSERT_TRUE(same_float(cout[(size_t)i], want)) << "columns, n = " << n << ", channel " << i;
    }
}

// Sums down columns (the attention's output: value rows of n positions, a_stride apart, weighted by b): for
// 1..133 channels (the AVX2 version takes 32, then 8, then single ones), each output is the defined order's
// float of its gathered column, and out[n_cols] is untouched.
TEST_P(Dense, F16ColumnSumsAreEachTheSingleDotOfTheColumn) {
    const int64_t n = GetParam();
    std::mt19937 rng(600 + (uint32_t)n);
    for (int64_t cols : {1, 7, 8, 9, 31, 32, 33, 64, 70, 133}) {
        const size_t a_stride = (size_t)cols + 11;
        const auto af = randoms(rng, (int64_t)a_stride * n, 0.5f), bf = randoms(rng, n, 0.3f);
        std::vector<uint16_t> a(af.size());
        std::vector<float> b((size_t)n);
        for (size_t i = 0; i < a.size(); i++) a[i] = bitnet_fp32_to_fp16(af[i]);
        for (int64_t j = 0; j < n; j++) b[(size_t)j] = bitnet_dense_round_f16(bf[(size_t)j]);
        std::vector<float> out((size_t)cols + 1, -12345.0f);
        bitnet_dense_dot_f16_columns(a.data(), a_stride, b.data(), n, cols, out.data());
        std::vector<uint16_t> column((size_t)n);
        for (int64_t i = 0; i < cols; i++) {
            for (int64_t j = 0; j < n; j++) column[(size_t)j] = a[(size_t)j * a_stride + (size_t)i];
            ASSERT_EQ(out[(size_t)i], ref_dot_f16(column.data(), b.data(), n)) << "n = " << n << ", column " << i << " of " << cols;
        }
        EXPECT_EQ(out[(size_t)cols], -12345.0f);
    }
}

// Rows × columns (one column: AVX2 two rows per pass, AVX-512 four; several: AVX2 in blocks of 8 rows × 8
// columns × 256 values, three columns per pass, AVX-512 4 rows × 16 columns, eight per pass; NEON two columns
// per pass): for row counts 1, 3, 8, 9, 17 and column counts 1..10, 16, 17, 24 and 33, every output
// is the defined order's float for its own row and column at out[j · out_stride + r], the places in between
// untouched; rows n + 3 values apart and columns n + 5 floats apart (unaligned), lengths with and without a
// tail and across several 256-value chunks (1000, 2560).
TEST_P(Dense, F16RowsTimesColumnsAreEachTheSingleDot) {
    const int64_t n = GetParam();
    std::mt19937 rng(400 + (uint32_t)n);
    const size_t a_stride = (size_t)n + 3, b_stride = (size_t)n + 5;
    for (int64_t rows : {1, 3, 8, 9, 17}) {
        const auto af = randoms(rng, (int64_t)a_stride * rows, 0.5f);
        std::vector<uint16_t> a(af.size());
        for (size_t i = 0; i < a.size(); i++) a[i] = bitnet_fp32_to_fp16(af[i]);
        for (int64_t cols : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 16, 17, 24, 33}) {
            const auto bf = randoms(rng, (int64_t)b_stride * cols, 2.0f);
            std::vector<float> b(bf.size());
            for (size_t i = 0; i < b.size(); i++) b[i] = bitnet_dense_round_f16(bf[i]);
            const size_t out_stride = (size_t)rows + 2;
            const float sentinel = -12345.0f;
            std::vector<float> out(out_stride * (size_t)cols, sentinel);
            bitnet_dense_mul_f16(a.data(), a_stride, rows, b.data(), b_stride, cols, n, out.data(), out_stride);
            for (int64_t j = 0; j < cols; j++) {
                const float *bj = b.data() + (size_t)j * b_stride;
                for (int64_t r = 0; r < rows; r++) {
                    const uint16_t *ar = a.data() + (size_t)r * a_stride;
                    ASSERT_EQ(out[(size_t)j * out_stride + (size_t)r], ref_dot_f16(ar, bj, n))
                        << "n = " << n << ", row " << r << " of " << rows << ", column " << j << " of " << cols;
                }
                ASSERT_EQ(out[(size_t)j * out_stride + (size_t)rows], sentinel);
                ASSERT_EQ(out[(size_t)j * out_stride + (size_t)rows + 1], sentinel);
            }
        }
    }
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

// Q8_0 rows × columns (the AVX2 and AVX-512 VNNI versions: four rows per pass, then single rows): row counts 1, 3, 4, 5, 8, 9, 17
// with 1..3 columns, rows and columns a few blocks apart, every output the defined order's float and the
// places in between untouched.
TEST_P(Dense, Q8_0RowsTimesColumnsAreEachTheSingleDot) {
    const int64_t n = GetParam() / 32 * 32;
    if (n == 0) GTEST_SKIP() << "Q8_0 needs whole 32-blocks";
    std::mt19937 rng(500 + (uint32_t)n);
    const size_t nb = (size_t)n / 32, a_stride = nb + 2, b_stride = nb + 1;
    for (int64_t rows : {1, 3, 4, 5, 8, 9, 17}) {
        std::vector<bitnet_block_q8_0> a(a_stride * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) {
            const auto af = randoms(rng, n, 1.0f);
            bitnet_quantize_row_q8_0(af.data(), a.data() + (size_t)r * a_stride, n);
        }
        a[0].qs[0] = -128;  // a may hold -128 (dense.h)
        for (int64_t cols : {1, 2, 3}) {
            std::vector<bitnet_block_q8_0> b(b_stride * (size_t)cols);
            for (int64_t j = 0; j < cols; j++) {
                const auto bf = randoms(rng, n, 4.0f);
                bitnet_quantize_row_q8_0(bf.data(), b.data() + (size_t)j * b_stride, n);
            }
            const size_t out_stride = (size_t)rows + 1;
            std::vector<float> out(out_stride * (size_t)cols, -12345.0f);
            bitnet_dense_mul_q8_0(a.data(), a_stride, rows, b.data(), b_stride, cols, n, out.data(), out_stride);
            for (int64_t j = 0; j < cols; j++) {
                for (int64_t r = 0; r < rows; r++)
                    ASSERT_EQ(out[(size_t)j * out_stride + (size_t)r],
                              ref_dot_q8_0(a.data() + (size_t)r * a_stride, b.data() + (size_t)j * b_stride, n))
                        << "n = " << n << ", row " << r << " of " << rows << ", column " << j;
                ASSERT_EQ(out[(size_t)j * out_stride + (size_t)rows], -12345.0f);
            }
        }
    }
}

bool SameBits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

// BF16 rows × columns: every output the F32 dot of the row widened exactly (the upper half of a binary32), bit
// for bit, whatever n % 8 (the tail lanes) and the row count left after the four-row passes, with 1..5
// columns; the places in between untouched. Values: random bit patterns without Inf/NaN (±0 and subnormals included).
TEST_P(Dense, Bf16RowsTimesColumnsAreTheF32DotOfTheWidenedRow) {
    const int64_t n = GetParam();
    std::mt19937 rng(900 + (uint32_t)n);
    const size_t a_stride = (size_t)n + 5, b_stride = (size_t)n + 3;
    for (int64_t rows : {1, 3, 4, 5, 8, 9, 17}) {
        std::vector<uint16_t> a(a_stride * (size_t)rows);
        std::vector<float> wide(a.size());
        for (size_t i = 0; i < a.size(); i++) {
            uint16_t h = (uint16_t)(rng() >> 16);
            if ((h & 0x7f80) == 0x7f80) h &= 0xbfff;  // no Inf/NaN: keep the sums finite
            a[i] = h;
            const uint32_t u = (uint32_t)h << 16;
            std::memcpy(&wide[i], &u, 4);
        }
        for (int64_t cols : {1, 2, 5}) {
            const auto bv = randoms(rng, (int64_t)b_stride * cols, 2.0f);
            const size_t out_stride = (size_t)rows + 1;
            std::vector<float> out(out_stride * (size_t)cols, -12345.0f);
            bitnet_dense_mul_bf16(a.data(), a_stride, rows, bv.data(), b_stride, cols, n, out.data(), out_stride);
            for (int64_t j = 0; j < cols; j++) {
                for (int64_t r = 0; r < rows; r++) {
                    const float want = bitnet_dense_dot_f32(wide.data() + (size_t)r * a_stride, bv.data() + (size_t)j * b_stride, n);
                    ASSERT_TRUE(SameBits(out[(size_t)j * out_stride + (size_t)r], want))
                        << "n = " << n << ", row " << r << " of " << rows << ", column " << j << " of " << cols;
                    ASSERT_TRUE(SameBits(bitnet_dense_dot_bf16(a.data() + (size_t)r * a_stride, bv.data() + (size_t)j * b_stride, n), want));
                }
                ASSERT_EQ(out[(size_t)j * out_stride + (size_t)rows], -12345.0f);
            }
        }
    }
}

// Q6_K rows × columns: every output the F32 dot of the row decoded by bitnet_q6_k_block_to_f32, bit for bit,
// with 1..5 columns, for blocks from the quantizer and blocks of random bytes (negative scales, every code),
// rows at an odd byte stride (the blocks are read at any alignment); the places in between untouched.
TEST_P(Dense, Q6KRowsTimesColumnsAreTheF32DotOfTheDecodedRow) {
    const int64_t n = GetParam() / 256 * 256;
    if (n == 0) GTEST_SKIP() << "Q6_K needs whole 256-blocks";
    std::mt19937 rng(1300 + (uint32_t)n);
    const size_t a_stride = (size_t)n / 256 * 210 + 3, b_stride = (size_t)n + 3;
    for (int64_t rows : {1, 3, 4, 5}) {
        std::vector<uint8_t> a(a_stride * (size_t)rows);
        std::vector<float> dec((size_t)(n * rows));
        for (int64_t r = 0; r < rows; r++) {
            uint8_t *row = a.data() + (size_t)r * a_stride;
            if (r % 2 == 0) {
                const auto x = randoms(rng, n, 1.0f);
                std::vector<bitnet_block_q6_k> q((size_t)n / 256);
                bitnet_error err{};
                ASSERT_EQ(bitnet_quantize_row_q6_k(x.data(), q.data(), n, &err), BITNET_OK) << err.msg;
                std::memcpy(row, q.data(), q.size() * 210);
            } else {
                for (size_t i = 0; i < (size_t)n / 256 * 210; i++) row[i] = (uint8_t)(rng() >> 24);
                for (int64_t k = 0; k < n / 256; k++) {  // a finite fp16 d
                    const uint16_t dh = bitnet_fp32_to_fp16((float)((int)(rng() % 2000) - 1000) * 1e-4f);
                    std::memcpy(row + (size_t)k * 210 + 208, &dh, 2);
                }
            }
            for (int64_t k = 0; k < n / 256; k++)
                bitnet_q6_k_block_to_f32(row + (size_t)k * 210, dec.data() + (size_t)(r * n + 256 * k));
        }
        for (int64_t cols : {1, 2, 5}) {
            const auto bv = randoms(rng, (int64_t)b_stride * cols, 2.0f);
            const size_t out_stride = (size_t)rows + 1;
            std::vector<float> out(out_stride * (size_t)cols, -12345.0f);
            bitnet_dense_mul_q6_k(a.data(), a_stride, rows, bv.data(), b_stride, cols, n, out.data(), out_stride);
            for (int64_t j = 0; j < cols; j++) {
                for (int64_t r = 0; r < rows; r++) {
                    const float want = bitnet_dense_dot_f32(dec.data() + (size_t)(r * n), bv.data() + (size_t)j * b_stride, n);
                    ASSERT_TRUE(SameBits(out[(size_t)j * out_stride + (size_t)r], want))
                        << "n = " << n << ", row " << r << " of " << rows << ", column " << j << " of " << cols;
                    ASSERT_TRUE(SameBits(bitnet_dense_dot_q6_k(a.data() + (size_t)r * a_stride, bv.data() + (size_t)j * b_stride, n), want));
                }
                ASSERT_EQ(out[(size_t)j * out_stride + (size_t)rows], -12345.0f);
            }
        }
    }
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
    // mul of every kernel: three rows (their size apart) times seven prepared activations (act_bytes apart)
    // give dot's floats one by one at out[j · 4 + r]
    for (int type : {BITNET_TYPE_F32, BITNET_TYPE_F16, BITNET_TYPE_Q8_0}) {
        k = bitnet_dense_kernel_for(type);
        const int64_t cols = 7, rows = 3;
        const size_t ab = k->act_bytes(n);
        std::vector<uint8_t> acts(ab * cols);
        for (int64_t j = 0; j < cols; j++) {
            const auto xj = randoms(rng, n, 1.0f + (float)j);
            k->prepare(xj.data(), acts.data() + (size_t)j * ab, n);
        }
        const size_t row_bytes = type == BITNET_TYPE_F32 ? (size_t)n * 4
                                 : type == BITNET_TYPE_F16 ? (size_t)n * 2 : (size_t)n / 32 * sizeof(bitnet_block_q8_0);
        std::vector<uint8_t> wrows(row_bytes * rows);
        for (int64_t r = 0; r < rows; r++) {
            const auto wr = randoms(rng, n, 0.1f);
            uint8_t *dst = wrows.data() + (size_t)r * row_bytes;
            if (type == BITNET_TYPE_F32) {
                memcpy(dst, wr.data(), row_bytes);
            } else if (type == BITNET_TYPE_F16) {
                for (int64_t i = 0; i < n; i++) {
                    const uint16_t h = bitnet_fp32_to_fp16(wr[(size_t)i]);
                    memcpy(dst + 2 * i, &h, 2);
                }
            } else {
                bitnet_quantize_row_q8_0(wr.data(), (bitnet_block_q8_0 *)dst, n);
            }
        }
        std::vector<float> out((size_t)cols * 4, -1.0f);
        k->mul(wrows.data(), row_bytes, rows, acts.data(), ab, cols, n, out.data(), 4);
        for (int64_t j = 0; j < cols; j++) {
            for (int64_t r = 0; r < rows; r++) {
                EXPECT_EQ(out[(size_t)j * 4 + (size_t)r], k->dot(wrows.data() + (size_t)r * row_bytes, acts.data() + (size_t)j * ab, n))
                    << "type " << type << ", row " << r << ", column " << j;
            }
            EXPECT_EQ(out[(size_t)j * 4 + 3], -1.0f);
        }
    }
    // BF16 and Q6_K rows take the activation as it is; other types have no kernel of their own
    for (int type : {(int)BITNET_TYPE_BF16, (int)BITNET_TYPE_Q6_K}) {
        k = bitnet_dense_kernel_for(type);
        ASSERT_NE(k, nullptr) << type;
        EXPECT_EQ(k->act_bytes(n), (size_t)n * sizeof(float));
        std::vector<float> a2((size_t)n, -1.0f);
        k->prepare(x.data(), a2.data(), n);
        EXPECT_EQ(0, std::memcmp(a2.data(), x.data(), (size_t)n * sizeof(float)));
    }
    EXPECT_EQ(bitnet_dense_kernel_for(BITNET_TYPE_TL2), nullptr);
    EXPECT_EQ(bitnet_dense_kernel_for(12), nullptr);  // Q4_K
}

// The row conversions to binary16 (the attention's query, probabilities and KV stores) give the codes of
// bitnet_fp32_to_fp16(x · scale) for every float class: the 13 dropped bits at and around the rounding
// tie for every sign, exponent and top-10 fraction (3.1 M floats: normals, overflow to infinity,
// infinities, NaNs with payloads), the ties of results in the subnormal range at their own bit position
// (0.3 M), plus random floats, three scales, every length 0..40 and a strided destination.
TEST(DenseF16Rows, ConvertLikeTheScalarRounding) {
    bitnet_dense_init();
    const uint32_t lows[6] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff};
    std::vector<float> x;
    x.reserve((size_t)6 << 19);
    for (uint32_t hi = 0; hi < (1u << 19); hi++)
        for (uint32_t lo : lows) {
            const uint32_t bits = hi << 13 | lo;
            float f;
            std::memcpy(&f, &bits, sizeof f);
            x.push_back(f);
        }
    std::mt19937 rng(11);
    // results in the binary16 subnormal range round at bit 126 - E of the mantissa (E = 102..112): the tie
    // there and its neighbours, for random upper mantissa bits, both signs
    for (uint32_t E = 100; E <= 113; E++) {
        const uint32_t shift = E <= 112 ? 126 - E : 13;
        for (int i = 0; i < 4096; i++) {
            const uint32_t hi = (rng() & 0x7fffffu) >> shift << shift, half = 1u << (shift - 1);
            for (uint32_t lo : {half - 1, half, half + 1, 0u, (1u << shift) - 1}) {
                const uint32_t bits = (rng() & 0x80000000u) | E << 23 | ((hi | lo) & 0x7fffffu);
                float f;
                std::memcpy(&f, &bits, sizeof f);
                x.push_back(f);
            }
        }
    }
    for (int i = 0; i < 200000; i++) {
        const uint32_t bits = rng();
        float f;
        std::memcpy(&f, &bits, sizeof f);
        x.push_back(f);
    }
    const int64_t n = (int64_t)x.size();
    for (float scale : {1.0f, 0.0371f, -3.5f}) {
        std::vector<uint16_t> h((size_t)n, 0xdead), want((size_t)n);
        std::vector<float> y((size_t)n);
        for (int64_t i = 0; i < n; i++) want[(size_t)i] = bitnet_fp32_to_fp16(x[(size_t)i] * scale);
        bitnet_dense_to_f16(x.data(), scale, h.data(), 1, n);
        bitnet_dense_round_f16_row(x.data(), scale, y.data(), n);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const float wf = bitnet_fp16_to_fp32(want[(size_t)i]);
            if (h[(size_t)i] != want[(size_t)i] || std::memcmp(&y[(size_t)i], &wf, sizeof wf) != 0) {
                if (bad++ < 5)
                    ADD_FAILURE() << "scale " << scale << " x bits " << std::hex
                                  << *reinterpret_cast<const uint32_t *>(&x[(size_t)i]) << ": code " << h[(size_t)i]
                                  << " want " << want[(size_t)i];
            }
        }
        EXPECT_EQ(bad, 0) << "scale " << scale;
    }
    // lengths with and without a tail, in place, and a strided destination whose gaps stay untouched
    for (int64_t len = 0; len <= 40; len++) {
        std::vector<float> v(x.begin() + 1000, x.begin() + 1000 + len), w = v;
        bitnet_dense_round_f16_row(w.data(), 0.5f, w.data(), len);
        std::vector<uint16_t> hs((size_t)(3 * len + 1), 0x7777);
        bitnet_dense_to_f16(v.data(), 0.5f, hs.data(), 3, len);
        for (int64_t i = 0; i < len; i++) {
            const uint16_t c = bitnet_fp32_to_fp16(v[(size_t)i] * 0.5f);
            const float f = bitnet_fp16_to_fp32(c);
            EXPECT_EQ(0, std::memcmp(&w[(size_t)i], &f, sizeof f)) << len << " " << i;
            EXPECT_EQ(hs[(size_t)(3 * i)], c) << len << " " << i;
            if (i + 1 < len) {
                EXPECT_EQ(hs[(size_t)(3 * i + 1)], 0x7777);
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Lengths, Dense, testing::Values<int64_t>(1, 7, 31, 32, 33, 64, 95, 256, 1000, 2560));

}  // namespace
