// test_lut_kernels.cc — every LUT kernel against the scalar reference (src/kernels/lut/lut_ref.c):
//  - one parameterized suite over the distinct (type, shape, tiles) of bitnet_lut_kernels: every
//    specialized kernel this build compiled and this CPU runs (SIMD and portable C), all kernels of a
//    shape on one weight and one reference (adding a shape to a config adds its test),
//  - one over the distinct (type, shape, tiles) of every registry table, for the generic kernel of every
//    ISA row this CPU runs (SIMD, portable) and the scalar LUT kernel (both layouts are testable on every
//    architecture),
//  - the SIMD and portable LUT constructors against the scalar constructor (bytes and lut_scale),
//  - the portable kernels on buffers that are only byte-aligned (they promise byte loads),
//  - dispatch: tile rule vs the derived tables, kernel selection, table choice,
//  - the AVX-512 TL2 kernels on both of their table-widening paths (VBMI and AVX-512BW) and their place
//    in the selection (skipped, with a message, on CPUs without AVX-512).
// int32 accumulators must equal bitnet_ref_gemm exactly; the float output y = acc / s * scale is
// checked against the float product Σ w·x·scale within the quantization bound of LAYOUTS.md §1.
// Big shapes test the first, a middle and the last tile with fewer column counts, packing only those
// tiles (bitnet_pack_tl*_tile) into a lazily zeroed buffer, so the binary runs in seconds natively.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

extern "C" {
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#if defined(__x86_64__)
#include "kernels/lut/tl2_avx512.h"
#endif
#include "kernels/lut/tl2_i8.h"
}

namespace {

// Shapes up to this many weights are packed whole (every tile tested, all column counts).
constexpr int64_t kSmallWeights = int64_t(1) << 20;

// 64-byte aligned, zero-filled (calloc: untouched pages of a big tensor cost nothing).
class AlignedBuf {
   public:
    explicit AlignedBuf(size_t n) : raw_(std::calloc(n + 64, 1)), n_(n) {
        if (!raw_) throw std::bad_alloc();
        p_ = reinterpret_cast<uint8_t *>((reinterpret_cast<uintptr_t>(raw_) + 63) & ~uintptr_t(63));
    }
    ~AlignedBuf() { std::free(raw_); }
    AlignedBuf(const AlignedBuf &) = delete;
    AlignedBuf &operator=(const AlignedBuf &) = delete;
    uint8_t *data() { return p_; }
    const uint8_t *data() const { return p_; }
    size_t size() const { return n_; }

   private:
    void *raw_;
    uint8_t *p_;
    size_t n_;
};

const char *type_tag(int type) { return type == BITNET_TYPE_TL1 ? "tl1" : "tl2"; }

struct Shape {
    int type;
    int64_t M, K;
    bitnet_tiles tiles;
    bitnet_lut_shape sh() const { return bitnet_lut_shape_make(type, M, K, tiles); }
    int64_t n_tiles() const { return M / tiles.BM; }
    bool small() const { return M * K <= kSmallWeights; }
    std::string label() const {
        return std::string(type_tag(type)) + "_m" + std::to_string(M) + "_k" + std::to_string(K) + "_bm" +
               std::to_string(tiles.BM) + "_bk" + std::to_string(tiles.BK) + "_sm" + std::to_string(tiles.bm);
    }
};

void PrintTo(const Shape &s, std::ostream *os) { *os << s.label(); }

// Tiles to test: all of a small shape with few tiles, else first, middle, last.
std::vector<int64_t> sample_tiles(const Shape &s) {
    const int64_t n = s.n_tiles();
    if (s.small() && n <= 4) {
        std::vector<int64_t> all;
        for (int64_t t = 0; t < n; t++) all.push_back(t);
        return all;
    }
    std::set<int64_t> t = {0, n / 2, n - 1};
    return std::vector<int64_t>(t.begin(), t.end());
}

enum class Fill { Random, Zero, PlusOne, MinusOne };

// A packed ternary weight with the int8 rows of the tiles under test.
struct Weight {
    Shape s;
    std::unique_ptr<AlignedBuf> packed;
    std::map<int64_t, std::vector<int8_t>> rows;  // tile → [BM][K]
};

// Small fast generator (xorshift64*): big tiles have millions of weights.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
    uint32_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return (uint32_t)((s * 0x2545F4914F6CDD1Dull) >> 32);
    }
};

// Weight values of a fill; Random takes 20 base-3 digits from each generator word (3^20 < 2^32; the
// top digit's bias does not matter here) — big tiles have tens of millions of weights.
class Filler {
   public:
    Filler(Fill f, uint32_t seed) : f_(f), rng_(seed) {}
    int8_t next() {
        switch (f_) {
        case Fill::Zero: return 0;
        case Fill::PlusOne: return 1;
        case Fill::MinusOne: return -1;
        case Fill::Random: break;
        }
        if (left_ == 0) {
            r_ = rng_.next();
            left_ = 20;
        }
        const int v = (int)(r_ % 3) - 1;
        r_ /= 3;
        left_--;
        return (int8_t)v;
    }

   private:
    Fill f_;
    Rng rng_;
    uint32_t r_ = 0;
    int left_ = 0;
};

Weight make_weight(const Shape &s, const std::vector<int64_t> &tiles, Fill fill, uint32_t seed) {
    Weight w{s, nullptr, {}};
    const size_t nbytes = s.type == BITNET_TYPE_TL1 ? bitnet_tl1_nbytes(s.M, s.K) : bitnet_tl2_nbytes(s.M, s.K);
    w.packed = std::make_unique<AlignedBuf>(nbytes);
    Filler rng(fill, seed);
    bitnet_error err{};
    const int64_t BM = s.tiles.BM, K = s.K;
    if (s.small()) {
        std::vector<int8_t> all((size_t)(s.M * K));
        for (auto &v : all) v = rng.next();
        const bitnet_status st = s.type == BITNET_TYPE_TL1
                                     ? bitnet_pack_tl1(all.data(), s.M, K, s.tiles, 0.5f, w.packed->data(), &err)
                                     : bitnet_pack_tl2(all.data(), s.M, K, s.tiles, 0.5f, w.packed->data(), &err);
        EXPECT_EQ(st, BITNET_OK) << err.msg;
        for (int64_t t : tiles) w.rows[t].assign(all.begin() + t * BM * K, all.begin() + (t + 1) * BM * K);
    } else {
        for (int64_t t : tiles) {
            auto &r = w.rows[t];
            r.resize((size_t)(BM * K));
            for (auto &v : r) v = rng.next();
            const bitnet_status st =
                s.type == BITNET_TYPE_TL1
                    ? bitnet_pack_tl1_tile(r.data(), s.M, K, s.tiles, t, w.packed->data(), &err)
                    : bitnet_pack_tl2_tile(r.data(), s.M, K, s.tiles, t, w.packed->data(), &err);
            EXPECT_EQ(st, BITNET_OK) << err.msg;
        }
    }
    return w;
}

// n_cols activation columns of K floats. Column magnitudes differ; `zero_col` is all zeros.
std::vector<float> make_acts(int64_t K, int64_t n_cols, uint32_t seed, int64_t zero_col = -1) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x((size_t)(K * n_cols));
    for (int64_t n = 0; n < n_cols; n++) {
        const float mag = std::ldexp(1.0f, (int)(n % 7) - 3);
        for (int64_t k = 0; k < K; k++) x[(size_t)(n * K + k)] = n == zero_col ? 0.0f : nd(rng) * mag;
    }
    return x;
}

// Activations with their q and s of LAYOUTS.md §1 (bitnet_quantize_act), column-major [n][K].
struct Acts {
    int64_t K = 0, n_cols = 0;
    std::vector<float> x;
    std::vector<int8_t> q;
    std::vector<float> s;
};

Acts quantize(const std::vector<float> &x, int64_t K) {
    Acts a;
    a.K = K;
    a.n_cols = (int64_t)x.size() / K;
    a.x = x;
    a.q.resize(x.size());
    a.s.resize((size_t)a.n_cols);
    for (int64_t n = 0; n < a.n_cols; n++) a.s[(size_t)n] = bitnet_quantize_act(&x[(size_t)(n * K)], K, &a.q[(size_t)(n * K)]);
    return a;
}

// The LUTs of every column built by one constructor; guard bytes after each column's qlut.
struct Luts {
    std::unique_ptr<AlignedBuf> buf;
    size_t stride = 0;
    std::vector<float> scales;
    const int8_t *col(int64_t n) const { return reinterpret_cast<const int8_t *>(buf->data() + n * stride); }
};

constexpr uint8_t kLutGuard = 0xA5;

Luts build_luts(bitnet_lut_ctor_fn ctor, const Shape &s, const Acts &a) {
    const bitnet_lut_shape sh = s.sh();
    const size_t bytes = bitnet_qlut_bytes(s.type, &sh);
    Luts l;
    l.stride = (bytes + 64 + 63) / 64 * 64;  // >= 64 guard bytes after every column
    l.buf = std::make_unique<AlignedBuf>(l.stride * (size_t)a.n_cols);
    std::memset(l.buf->data(), kLutGuard, l.buf->size());
    l.scales.resize((size_t)a.n_cols);
    for (int64_t n = 0; n < a.n_cols; n++) {
        int8_t *qlut = reinterpret_cast<int8_t *>(l.buf->data() + n * l.stride);
        ctor(&a.x[(size_t)(n * s.K)], s.K, sh.three_k, qlut, &l.scales[(size_t)n]);
        for (size_t i = bytes; i < l.stride; i++) {
            if ((uint8_t)qlut[i] != kLutGuard) {
                ADD_FAILURE() << "constructor wrote byte " << i << " past its " << bytes << " qlut bytes";
                break;
            }
        }
        EXPECT_EQ(l.scales[(size_t)n], a.s[(size_t)n]) << "lut_scale of column " << n;
    }
    return l;
}

// Run one tile through a kernel with guard words around acc (32-byte aligned, pre-filled with junk:
// the kernel must write, not accumulate).
constexpr int32_t kAccGuard = 0x5A5A5A5A;
constexpr size_t kGuardWords = 16;

std::vector<int32_t> run_tile(bitnet_qgemm_fn fn, const Shape &s, const Weight &w, const int8_t *qlut, size_t stride,
                              int64_t tile, int64_t n_cols) {
    const bitnet_lut_shape sh = s.sh();
    const size_t n = (size_t)(n_cols * s.tiles.BM);
    AlignedBuf buf((n + 2 * kGuardWords) * sizeof(int32_t));
    int32_t *all = reinterpret_cast<int32_t *>(buf.data());
    for (size_t i = 0; i < n + 2 * kGuardWords; i++) all[i] = kAccGuard;
    int32_t *acc = all + kGuardWords;
    for (size_t i = 0; i < n; i++) acc[i] = 0x1234567;
    fn(&sh, acc, w.packed->data(), qlut, stride, tile, n_cols);
    for (size_t i = 0; i < kGuardWords; i++) {
        EXPECT_EQ(all[i], kAccGuard) << "write before acc (guard word " << i << ")";
        EXPECT_EQ(acc[n + i], kAccGuard) << "write after acc (guard word " << i << ")";
    }
    return std::vector<int32_t>(acc, acc + n);
}

// Expected accumulators of one tile, [n_cols][BM]: the plain sum over the int8 rows the test packed;
// bitnet_ref_gemm (the reference decoder) over the rows `decoded` of the tile must agree with it (the
// decoder and the packer are independent implementations).
std::vector<int32_t> reference_tile(const Shape &s, const Weight &w, const Acts &a, int64_t tile,
                                    const std::vector<std::pair<int64_t, int64_t>> &decoded) {
    const bitnet_lut_shape sh = s.sh();
    const int64_t BM = s.tiles.BM, K = s.K, N = a.n_cols;
    const auto &rows = w.rows.at(tile);
    std::vector<int32_t> want((size_t)(N * BM));
    for (int64_t n = 0; n < N; n++) {
        const int8_t *q = &a.q[(size_t)(n * K)];
        for (int64_t i = 0; i < BM; i++) {
            const int8_t *r = &rows[(size_t)(i * K)];
            int32_t sum = 0;
            for (int64_t k = 0; k < K; k++) sum += r[k] * q[k];
            want[(size_t)(n * BM + i)] = sum;
        }
    }
    int64_t bad = 0;
    for (const auto &rg : decoded) {
        const int64_t len = rg.second - rg.first;
        std::vector<int32_t> ref((size_t)(N * len));
        bitnet_ref_gemm_rows(s.type, w.packed->data(), &sh, a.q.data(), N, tile * BM + rg.first, tile * BM + rg.second,
                             ref.data());
        for (int64_t n = 0; n < N; n++) {
            for (int64_t i = 0; i < len; i++) {
                const int32_t r = ref[(size_t)(n * len + i)], d = want[(size_t)(n * BM + rg.first + i)];
                if (r != d && bad++ < 3) {
                    ADD_FAILURE() << "bitnet_ref_gemm " << r << " != direct sum " << d << " at column " << n << ", row "
                                  << tile * BM + rg.first + i;
                }
            }
        }
    }
    EXPECT_EQ(bad, 0);
    return want;
}

// Exact comparison of the first n_cols columns with a readable first mismatch.
void expect_acc_eq(const std::vector<int32_t> &got, const std::vector<int32_t> &want, int64_t BM, int64_t tile,
                   const char *what) {
    ASSERT_LE(got.size(), want.size());
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        if (got[i] != want[i] && bad++ < 5) {
            ADD_FAILURE() << what << ": acc " << got[i] << " != reference " << want[i] << " at column "
                          << (int64_t)i / BM << ", row " << tile * BM + (int64_t)i % BM;
        }
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " mismatching accumulators in tile " << tile;
}

// y = (float)acc / s * scale against Σ w·x·scale: |error| <= scale · Σ_k |x_k − q_k/s| (+ float rounding),
// and that sum is <= scale · K · 0.5/s (LAYOUTS.md §1).
void expect_float_output(const Shape &s, const Weight &w, const Acts &a, const std::vector<int32_t> &acc,
                         int64_t tile, int64_t n_cols) {
    const float scale = 0.75f;
    const int64_t BM = s.tiles.BM, K = s.K;
    const auto &rows = w.rows.at(tile);
    for (int64_t n = 0; n < n_cols; n++) {
        const float sc = a.s[(size_t)n];
        double qerr = 0;
        for (int64_t k = 0; k < K; k++) {
            qerr += std::fabs((double)a.x[(size_t)(n * K + k)] - (double)a.q[(size_t)(n * K + k)] / sc);
        }
        EXPECT_LE(qerr, K * 0.5 / sc * (1 + 1e-6) + 1e-30);
        for (int64_t i = 0; i < BM; i += 7) {
            const float y = (float)acc[(size_t)(n * BM + i)] / sc * scale;
            EXPECT_TRUE(std::isfinite(y));
            double exact = 0;
            for (int64_t k = 0; k < K; k++) exact += rows[(size_t)(i * K + k)] * (double)a.x[(size_t)(n * K + k)];
            exact *= scale;
            const double tol = scale * qerr + std::fabs((double)y) * 4.0 * FLT_EPSILON + 1e-30;
            EXPECT_LE(std::fabs((double)y - exact), tol) << "column " << n << ", row " << tile * BM + i;
        }
    }
}

const bitnet_lut_isa_impl *isa_impl(int type, const char *isa) {
    for (size_t i = 0; i < bitnet_lut_n_isa_impls; i++) {
        const bitnet_lut_isa_impl *p = &bitnet_lut_isa_impls[i];
        if (p->type == type && (!isa || std::strcmp(p->isa, isa) == 0)) return p;
    }
    return nullptr;
}

bitnet_lut_ctor_fn scalar_ctor(int type) {
    return type == BITNET_TYPE_TL1 ? bitnet_tl1_lut_ctor__scalar : bitnet_tl2_lut_ctor__scalar;
}

bitnet_qgemm_fn scalar_kernel(int type) {
    return type == BITNET_TYPE_TL1 ? bitnet_tl1_qgemm_generic__scalar : bitnet_tl2_qgemm_generic__scalar;
}

// A kernel with the constructor whose LUTs it reads.
struct Impl {
    std::string what;
    bitnet_qgemm_fn fn;
    bitnet_lut_ctor_fn ctor;
};

// The registry's (type, ISA) row that bitnet_lut_select uses: the first one this CPU runs (rows are
// listed best first), or nullptr.
const bitnet_lut_isa_impl *best_isa_impl(int type) {
    for (size_t i = 0; i < bitnet_lut_n_isa_impls; i++) {
        const bitnet_lut_isa_impl *p = &bitnet_lut_isa_impls[i];
        if (p->type == type && bitnet_cpu_supports(p->isa)) return p;
    }
    return nullptr;
}

// Generic kernels for one type: that of every registry ISA row this CPU runs (best first: SIMD, then
// portable), then the scalar LUT kernel (always last).
std::vector<Impl> generic_impls(int type) {
    std::vector<Impl> v;
    for (size_t i = 0; i < bitnet_lut_n_isa_impls; i++) {
        const bitnet_lut_isa_impl *p = &bitnet_lut_isa_impls[i];
        if (p->type == type && bitnet_cpu_supports(p->isa)) {
            v.push_back({std::string(type_tag(type)) + " generic " + p->isa, p->generic, p->ctor});
        }
    }
    v.push_back({std::string(type_tag(type)) + " generic scalar", scalar_kernel(type), scalar_ctor(type)});
    return v;
}

// check_ctor on the constructor of every impl except the scalar one (the last of generic_impls).
void check_ctors(const std::vector<Impl> &impls, const Shape &s, uint32_t seed);

// A kernel with the tiles and column counts it is run on.
struct KernelRun {
    Impl impl;
    std::vector<int64_t> tiles;
    std::vector<int64_t> cols;
};

// The full check of kernels on one shape: random weights on the union of the runs' tiles, activations
// of the largest column count (column 2 all zero), one reference per tile; each run's kernel runs the
// first n columns for every n of its column counts on each of its tiles and must equal the reference
// exactly; at its largest count the columns one at a time equal the multi-column call (on every tile of
// a small shape, the first of a big one), and on its first tile the float output is within the
// quantization bound.
void check_runs(const std::vector<KernelRun> &runs, const Shape &s, uint32_t seed) {
    std::set<int64_t> tile_set;
    int64_t max_cols = 1;
    for (const KernelRun &r : runs) {
        tile_set.insert(r.tiles.begin(), r.tiles.end());
        max_cols = std::max(max_cols, *std::max_element(r.cols.begin(), r.cols.end()));
    }
    const std::vector<int64_t> tiles(tile_set.begin(), tile_set.end());
    const Weight w = make_weight(s, tiles, Fill::Random, seed);
    const Acts a = quantize(make_acts(s.K, max_cols, seed + 1, max_cols > 2 ? 2 : -1), s.K);
    // the decoder decodes every row of a small shape; of a big one (slow per weight) the first 32 rows
    // of the first tile and the last 32 of the last, so both ends of the tensor's byte range
    std::map<int64_t, std::vector<int32_t>> want;
    const int64_t BM = s.tiles.BM;
    for (int64_t t : tiles) {
        std::vector<std::pair<int64_t, int64_t>> decoded;
        if (s.small()) decoded.push_back({0, BM});
        if (!s.small() && t == tiles.front()) decoded.push_back({0, 32});
        if (!s.small() && t == tiles.back()) decoded.push_back({BM - 32, BM});
        want[t] = reference_tile(s, w, a, t, decoded);
    }
    for (const KernelRun &r : runs) {
        const Impl &im = r.impl;
        SCOPED_TRACE(im.what);
        const int64_t run_max = *std::max_element(r.cols.begin(), r.cols.end());
        const Luts l = build_luts(im.ctor, s, a);
        for (int64_t t : r.tiles) {
            for (int64_t n_cols : r.cols) {
                SCOPED_TRACE(testing::Message() << "n_cols = " << n_cols);
                const auto acc = run_tile(im.fn, s, w, l.col(0), l.stride, t, n_cols);
                expect_acc_eq(acc, want[t], s.tiles.BM, t, im.what.c_str());
                if (n_cols == run_max && n_cols > 1 && (s.small() || t == r.tiles.front())) {
                    for (int64_t n = 0; n < n_cols; n++) {
                        const auto one = run_tile(im.fn, s, w, l.col(n), l.stride, t, 1);
                        const std::vector<int32_t> part(acc.begin() + n * s.tiles.BM, acc.begin() + (n + 1) * s.tiles.BM);
                        EXPECT_EQ(one, part) << "column " << n << " of " << n_cols << " differs from a single-column call";
                    }
                }
                if (t == r.tiles.front() && n_cols == run_max) expect_float_output(s, w, a, acc, t, n_cols);
            }
        }
    }
}

// check_runs with the same tiles and column counts for every kernel.
void check_random(const std::vector<Impl> &impls, const Shape &s, const std::vector<int64_t> &tiles,
                  const std::vector<int64_t> &col_counts, uint32_t seed) {
    std::vector<KernelRun> runs;
    for (const Impl &im : impls) runs.push_back({im, tiles, col_counts});
    check_runs(runs, s, seed);
}

// Worst int16 case (all weights equal, every q = 127), all-zero weights (small shapes: on a big one they
// add nothing the random weights and the zero column do not check), and an all-zero activation column:
// exact values known without the reference.
void check_extremes(const std::vector<Impl> &impls, const Shape &s, int64_t tile) {
    // column 0: x = 0.75 everywhere → s = 127/0.75, q = 127; column 1: all zero → s = 127/1e-5, q = 0
    std::vector<float> x((size_t)(2 * s.K), 0.0f);
    std::fill(x.begin(), x.begin() + s.K, 0.75f);
    const Acts a = quantize(x, s.K);
    EXPECT_EQ(a.s[1], 127.0f / 1e-5f);
    for (int64_t k = 0; k < s.K; k++) ASSERT_EQ(a.q[(size_t)k], 127);
    const int64_t BM = s.tiles.BM;
    std::vector<Luts> luts;  // the activations are the same for every fill
    for (const Impl &im : impls) luts.push_back(build_luts(im.ctor, s, a));
    std::vector<Fill> fills = {Fill::PlusOne, Fill::MinusOne};
    if (s.small()) fills.push_back(Fill::Zero);
    for (Fill f : fills) {
        const int32_t want = f == Fill::PlusOne ? (int32_t)(127 * s.K) : f == Fill::MinusOne ? -(int32_t)(127 * s.K) : 0;
        const Weight w = make_weight(s, {tile}, f, 7);
        for (size_t j = 0; j < impls.size(); j++) {
            const Impl &im = impls[j];
            SCOPED_TRACE(testing::Message() << im.what << ", all weights " << (f == Fill::Zero ? 0 : want > 0 ? 1 : -1));
            const Luts &l = luts[j];
            const auto acc = run_tile(im.fn, s, w, l.col(0), l.stride, tile, 2);
            int64_t bad = 0;
            for (int64_t i = 0; i < BM; i++) {
                if (acc[(size_t)i] != want && bad++ < 3) ADD_FAILURE() << "row " << i << ": " << acc[(size_t)i] << " != " << want;
                if (acc[(size_t)(BM + i)] != 0 && bad++ < 3) ADD_FAILURE() << "zero column, row " << i << ": " << acc[(size_t)(BM + i)];
            }
            EXPECT_EQ(bad, 0);
            EXPECT_EQ((float)acc[(size_t)BM] / l.scales[1] * 0.75f, 0.0f);
        }
    }
}

// SIMD/portable constructor bytes == scalar constructor bytes, including rounding ties and NaN/huge inputs.
void check_ctor(bitnet_lut_ctor_fn simd, const Shape &s, uint32_t seed) {
    const bitnet_lut_shape sh = s.sh();
    const size_t bytes = bitnet_qlut_bytes(s.type, &sh);
    auto x = make_acts(s.K, 4, seed);
    // column 1: max|x| = 127 → s = 1 exactly, so x.5 values are exact rounding ties (half to even)
    for (int64_t k = 0; k < s.K; k++) x[(size_t)(s.K + k)] = (float)((k % 11) - 5) + 0.5f;
    x[(size_t)s.K] = 127.0f;
    // column 2: a NaN (ignored by max, quantized to 0) and a negative maximum
    x[(size_t)(2 * s.K + 3)] = std::nanf("");
    x[(size_t)(2 * s.K + 5)] = -40.0f;
    // column 3: all zero
    std::fill(x.begin() + 3 * s.K, x.end(), 0.0f);
    AlignedBuf a(bytes), b(bytes);
    for (int64_t n = 0; n < 4; n++) {
        float sa = -1, sb = -2;
        scalar_ctor(s.type)(x.data() + n * s.K, s.K, sh.three_k, reinterpret_cast<int8_t *>(a.data()), &sa);
        simd(x.data() + n * s.K, s.K, sh.three_k, reinterpret_cast<int8_t *>(b.data()), &sb);
        EXPECT_EQ(sa, sb) << "lut_scale of column " << n;
        size_t first = bytes;
        for (size_t i = 0; i < bytes && first == bytes; i++) {
            if (a.data()[i] != b.data()[i]) first = i;
        }
        EXPECT_EQ(first, bytes) << "column " << n << ": qlut differs from the scalar one at byte " << first
                                << " (table " << first / 32 << ")";
    }
}

void check_ctors(const std::vector<Impl> &impls, const Shape &s, uint32_t seed) {
    for (size_t i = 0; i + 1 < impls.size(); i++) {
        SCOPED_TRACE(impls[i].what);
        check_ctor(impls[i].ctor, s, seed);
    }
}

// ---- parameter lists -----------------------------------------------------------------------------

// The distinct (type, M, K, tiles) of bitnet_lut_kernels, in registry order.
std::vector<Shape> kernel_shapes() {
    std::set<std::tuple<int, int64_t, int64_t, int, int, int>> seen;
    std::vector<Shape> v;
    for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
        const bitnet_lut_kernel &k = bitnet_lut_kernels[i];
        if (seen.insert({k.type, k.M, k.K, k.tiles.BM, k.tiles.BK, k.tiles.bm}).second) {
            v.push_back(Shape{k.type, k.M, k.K, k.tiles});
        }
    }
    return v;
}

// The distinct (type, M, K, tiles) of every registry table that no specialized kernel this CPU runs has
// (the others are tested together with their kernels, SpecializedKernel; with the portable kernels of
// every configured shape that is all of them, but a build from other configs may differ).
std::vector<Shape> table_shapes() {
    std::set<std::tuple<int, int64_t, int64_t, int, int, int>> seen;
    for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
        const bitnet_lut_kernel &k = bitnet_lut_kernels[i];
        if (bitnet_cpu_supports(k.isa)) seen.insert({k.type, k.M, k.K, k.tiles.BM, k.tiles.BK, k.tiles.bm});
    }
    std::vector<Shape> v;
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table &t = bitnet_lut_tables[i];
        for (size_t j = 0; j < t.n_entries; j++) {
            const auto &e = t.entries[j];
            if (seen.insert({t.type, e.M, e.K, e.tiles.BM, e.tiles.BK, e.tiles.bm}).second) {
                v.push_back(Shape{t.type, e.M, e.K, e.tiles});
            }
        }
    }
    return v;
}

}  // namespace

// ---- every specialized kernel --------------------------------------------------------------------

// One registry shape: its specialized kernels this CPU runs (one per ISA: SIMD and portable), each with
// the constructor of its ISA row, and on the same weight and reference (which dominate the run time)
// the generic kernels of every ISA row this CPU runs and the scalar LUT kernel.
class SpecializedKernel : public testing::TestWithParam<Shape> {
   protected:
    void SetUp() override {
        s_ = GetParam();
        bitnet_error err{};
        ASSERT_EQ(bitnet_tiles_check(s_.type, s_.M, s_.K, s_.tiles, &err), BITNET_OK) << err.msg;
        std::string lacking;
        for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
            const bitnet_lut_kernel *k = &bitnet_lut_kernels[i];
            if (k->type != s_.type || k->M != s_.M || k->K != s_.K || k->tiles.BM != s_.tiles.BM ||
                k->tiles.BK != s_.tiles.BK || k->tiles.bm != s_.tiles.bm) {
                continue;
            }
            if (!bitnet_cpu_supports(k->isa)) {
                lacking += std::string(" ") + k->name;
                continue;
            }
            const bitnet_lut_isa_impl *impl = isa_impl(k->type, k->isa);
            ASSERT_NE(impl, nullptr) << "no constructor registered for " << k->isa;
            kernels_.push_back(k);
            impls_.push_back({k->name, k->qgemm, impl->ctor});
        }
        if (impls_.empty()) GTEST_SKIP() << "this CPU runs none of" << lacking;
    }
    Shape s_{};
    std::vector<const bitnet_lut_kernel *> kernels_;
    std::vector<Impl> impls_;
};

TEST_P(SpecializedKernel, MatchesReferenceWithGenericAndScalar) {
    const std::vector<int64_t> tiles = sample_tiles(s_);
    const std::vector<int64_t> cols = s_.small() ? std::vector<int64_t>{1, 2, 3, 8, 33} : std::vector<int64_t>{1, 3};
    std::vector<KernelRun> runs;
    for (const Impl &im : impls_) runs.push_back({im, tiles, cols});
    // generic kernels: big shapes on one tile (alternating by shape) and two column counts keep qemu fast
    const std::vector<int64_t> gtiles = s_.small() ? tiles : std::vector<int64_t>{tiles[(size_t)(s_.M / 32 + s_.K / 32) % tiles.size()]};
    const std::vector<int64_t> gcols = s_.small() ? std::vector<int64_t>{1, 2, 5} : std::vector<int64_t>{1, 2};
    std::vector<Impl> generic = generic_impls(s_.type);
    // the scalar LUT kernel (last) runs only where no registry row runs: small shapes and odd shapes
    // (GenericKernels) test it; on big ones it would only cost time
    if (!s_.small()) generic.pop_back();
    for (const Impl &im : generic) runs.push_back({im, gtiles, gcols});
    check_runs(runs, s_, 1000 + (uint32_t)(s_.M * 7 + s_.K));
}

TEST_P(SpecializedKernel, Int16WorstCaseZerosAndZeroColumn) {
    std::vector<Impl> impls = impls_;
    if (s_.small()) {
        for (const Impl &im : generic_impls(s_.type)) impls.push_back(im);
    }
    check_extremes(impls, s_, sample_tiles(s_).back());
}

TEST_P(SpecializedKernel, ConstructorMatchesScalar) {
    for (const Impl &im : impls_) {
        SCOPED_TRACE(im.what);
        check_ctor(im.ctor, s_, 77 + (uint32_t)(s_.M + s_.K));
    }
}

TEST_P(SpecializedKernel, IsWhatSelectPicks) {
    const bitnet_lut_shape sh = s_.sh();
    bitnet_lut_impl sel{};
    bitnet_error err{};
    ASSERT_EQ(bitnet_lut_select(s_.type, &sh, &sel, &err), BITNET_OK) << err.msg;
    // The registry lists a scheme's ISAs best first; select uses the first one this CPU runs, and that
    // ISA's specialized kernel for this shape.
    const bitnet_lut_isa_impl *best = best_isa_impl(s_.type);
    ASSERT_NE(best, nullptr);
    EXPECT_EQ(sel.ctor, best->ctor);
    const bitnet_lut_kernel *mine = nullptr;
    for (const bitnet_lut_kernel *k : kernels_) {
        if (std::strcmp(k->isa, best->isa) == 0) mine = k;
    }
    ASSERT_NE(mine, nullptr) << "the registry has no " << best->isa << " kernel for " << s_.label();
    EXPECT_TRUE(sel.specialized);
    EXPECT_EQ(sel.qgemm, mine->qgemm);
    EXPECT_STREQ(sel.name, mine->name);
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SpecializedKernel);
INSTANTIATE_TEST_SUITE_P(Registry, SpecializedKernel, testing::ValuesIn(kernel_shapes()),
                         [](const testing::TestParamInfo<Shape> &info) { return info.param.label(); });

// ---- generic SIMD, portable and scalar kernels on table shapes without a specialized kernel --------

class TableShape : public testing::TestWithParam<Shape> {};

TEST_P(TableShape, GenericAndScalarKernelsMatchReference) {
    const Shape s = GetParam();
    bitnet_error err{};
    ASSERT_EQ(bitnet_tiles_check(s.type, s.M, s.K, s.tiles, &err), BITNET_OK) << err.msg;
    // big shapes: one tile (alternating middle/last by shape) and two column counts keep qemu fast
    std::vector<int64_t> tiles = sample_tiles(s);
    if (!s.small()) tiles = {tiles[(size_t)(s.M / 32 + s.K / 32) % tiles.size()]};
    const std::vector<int64_t> cols = s.small() ? std::vector<int64_t>{1, 2, 5} : std::vector<int64_t>{1, 2};
    const uint32_t seed = (uint32_t)(s.M * 31 + s.K);
    const std::vector<Impl> impls = generic_impls(s.type);
    check_random(impls, s, tiles, cols, seed);
    check_ctors(impls, s, seed);
    if (s.small()) check_extremes(impls, s, tiles.back());
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TableShape);
INSTANTIATE_TEST_SUITE_P(Registry, TableShape, testing::ValuesIn(table_shapes()),
                         [](const testing::TestParamInfo<Shape> &info) { return info.param.label(); });

// ---- odd shapes no config has (generic SIMD, portable and scalar paths, both layouts) -------------

TEST(GenericKernels, OddShapesAndTiles) {
    const Shape shapes[] = {
        {BITNET_TYPE_TL1, 32, 8, {32, 8, 32}},      {BITNET_TYPE_TL1, 64, 4, {64, 4, 64}},
        {BITNET_TYPE_TL1, 96, 512, {32, 8, 32}},    {BITNET_TYPE_TL1, 192, 48, {96, 24, 32}},
        {BITNET_TYPE_TL1, 128, 96, {128, 32, 64}},  {BITNET_TYPE_TL2, 32, 256, {32, 96, 32}},
        {BITNET_TYPE_TL2, 64, 352, {64, 96, 32}},   {BITNET_TYPE_TL2, 96, 288, {32, 24, 32}},
        {BITNET_TYPE_TL2, 32, 480, {32, 240, 32}},  {BITNET_TYPE_TL2, 64, 272, {64, 240, 32}},
        {BITNET_TYPE_TL2, 32, 264, {32, 168, 32}},  {BITNET_TYPE_TL2, 64, 4096, {64, 168, 32}},
        {BITNET_TYPE_TL2, 32, 464, {32, 240, 32}},  // two_k = 224: the largest two-weight part
    };
    uint32_t seed = 5000;
    for (const Shape &s : shapes) {
        SCOPED_TRACE(s.label());
        const std::vector<Impl> impls = generic_impls(s.type);
        check_random(impls, s, sample_tiles(s), {1, 2, 3, 8}, seed);
        check_extremes(impls, s, s.n_tiles() - 1);
        check_ctors(impls, s, seed);
        seed += 10;
    }
}

// The portable kernels promise byte loads only (a microcontroller's buffers may be 4-byte aligned): the
// constructor writing to, and the generic kernel reading weights and LUTs from, odd addresses give the
// same bytes and sums (UBSan's alignment check in the ASan build would flag a wider typed access).
TEST(GenericKernels, PortableReadsByteAlignedBuffers) {
    const Shape shapes[] = {{BITNET_TYPE_TL1, 64, 96, {64, 32, 32}}, {BITNET_TYPE_TL1, 64, 128, {64, 64, 64}},
                            {BITNET_TYPE_TL2, 64, 352, {64, 96, 32}}};
    for (const Shape &s : shapes) {
        SCOPED_TRACE(s.label());
        const bitnet_lut_isa_impl *impl = isa_impl(s.type, "portable");
        ASSERT_NE(impl, nullptr);
        const int64_t N = 3;
        const Weight w = make_weight(s, {0}, Fill::Random, 99);
        const Acts a = quantize(make_acts(s.K, N, 98), s.K);
        const std::vector<int32_t> want = reference_tile(s, w, a, 0, {{0, s.tiles.BM}});
        const Luts l = build_luts(impl->ctor, s, a);
        const bitnet_lut_shape sh = s.sh();
        const size_t wbytes = s.type == BITNET_TYPE_TL1 ? bitnet_tl1_nbytes(s.M, s.K) : bitnet_tl2_nbytes(s.M, s.K);
        const size_t qbytes = bitnet_qlut_bytes(s.type, &sh);
        for (size_t off : {1, 3}) {
            AlignedBuf wb(wbytes + 8), qb(l.stride * N + 8);
            std::memcpy(wb.data() + off, w.packed->data(), wbytes);
            // the constructor at an odd address writes what it wrote at an aligned one
            for (int64_t n = 0; n < N; n++) {
                int8_t *dst = reinterpret_cast<int8_t *>(qb.data() + off + n * l.stride);
                float sc = 0;
                impl->ctor(&a.x[(size_t)(n * s.K)], s.K, sh.three_k, dst, &sc);
                EXPECT_EQ(sc, l.scales[(size_t)n]);
                EXPECT_EQ(std::memcmp(dst, l.col(n), qbytes), 0) << "column " << n << ", offset " << off;
            }
            std::vector<int32_t> acc((size_t)(N * s.tiles.BM), 0x1234567);
            impl->generic(&sh, acc.data(), wb.data() + off, reinterpret_cast<const int8_t *>(qb.data() + off), l.stride,
                          0, N);
            expect_acc_eq(acc, want, s.tiles.BM, 0, "portable generic, byte-aligned buffers");
        }
    }
}

TEST(ScalarKernels, HandComputedTL1AndTL2) {
    // One nonzero weight per row, q known: acc is a single product, computed here by hand.
    for (int type : {BITNET_TYPE_TL1, BITNET_TYPE_TL2}) {
        const Shape s = type == BITNET_TYPE_TL1 ? Shape{type, 32, 16, {32, 16, 32}} : Shape{type, 32, 256, {32, 96, 32}};
        SCOPED_TRACE(s.label());
        std::vector<int8_t> w((size_t)(s.M * s.K), 0);
        for (int64_t m = 0; m < s.M; m++) w[(size_t)(m * s.K + (m * 5) % s.K)] = m % 2 ? 1 : -1;
        AlignedBuf packed(type == BITNET_TYPE_TL1 ? bitnet_tl1_nbytes(s.M, s.K) : bitnet_tl2_nbytes(s.M, s.K));
        bitnet_error err{};
        ASSERT_EQ(type == BITNET_TYPE_TL1 ? bitnet_pack_tl1(w.data(), s.M, s.K, s.tiles, 1.0f, packed.data(), &err)
                                          : bitnet_pack_tl2(w.data(), s.M, s.K, s.tiles, 1.0f, packed.data(), &err),
                  BITNET_OK)
            << err.msg;
        // x[k] = k - K/2 scaled so that max|x| = 127 → s = 1, q = x
        std::vector<float> x((size_t)s.K);
        for (int64_t k = 0; k < s.K; k++) x[(size_t)k] = (float)((k * 37) % 255 - 127);
        const bitnet_lut_shape sh = s.sh();
        AlignedBuf qlut(bitnet_qlut_bytes(type, &sh));
        float sc = 0;
        scalar_ctor(type)(x.data(), s.K, sh.three_k, reinterpret_cast<int8_t *>(qlut.data()), &sc);
        ASSERT_EQ(sc, 1.0f);
        std::vector<int32_t> acc((size_t)s.M);
        scalar_kernel(type)(&sh, acc.data(), packed.data(), reinterpret_cast<int8_t *>(qlut.data()), qlut.size(), 0, 1);
        for (int64_t m = 0; m < s.M; m++) {
            const int64_t k = (m * 5) % s.K;
            EXPECT_EQ(acc[(size_t)m], (m % 2 ? 1 : -1) * ((k * 37) % 255 - 127)) << "row " << m;
        }
    }
}

// ---- constructors --------------------------------------------------------------------------------

TEST(Constructors, ScalarTablesByHand) {
    // TL1: pair (q0, q1) = (127, -3) (x = q since max|x| = 127): entry 3a + b + 4 = a*127 - 3b.
    float x[4] = {127.0f, -3.0f, 0.0f, 5.0f};
    AlignedBuf q(16 * 4);
    float sc = 0;
    bitnet_tl1_lut_ctor__scalar(x, 4, 0, reinterpret_cast<int8_t *>(q.data()), &sc);
    EXPECT_EQ(sc, 1.0f);
    auto entry = [&](size_t table, int e) {
        const uint8_t *t = q.data() + 32 * table;
        return (int)(int16_t)(uint16_t)(t[e] | t[16 + e] << 8);
    };
    for (int e = 0; e < 16; e++) {
        const int a = e / 3 - 1, b = e % 3 - 1;
        EXPECT_EQ(entry(0, e), e <= 8 ? a * 127 + b * -3 : 0) << "entry " << e;
        EXPECT_EQ(entry(1, e), e <= 8 ? b * 5 : 0) << "entry " << e;
    }
    EXPECT_EQ(entry(0, 8), 124);   // (1, 1)
    EXPECT_EQ(entry(0, 0), -124);  // (-1, -1): low byte 0x84, high byte 0xFF
    EXPECT_EQ(q.data()[0], 0x84);
    EXPECT_EQ(q.data()[16], 0xFF);

    // TL2: K = 256, three_k = 192 (BK 96): group 0 = (127, 100, -50); entry 13 = (1,1,1) → 177,
    // entry 5 = (1,-1,-1) → 77, entry 2 = (0, 1, -1) → 150; pair tables after 64 groups.
    std::vector<float> x2(256, 0.0f);
    x2[0] = 127.0f;
    x2[1] = 100.0f;
    x2[2] = -50.0f;
    x2[192] = -127.0f;
    x2[193] = 1.0f;
    AlignedBuf q2(32 * (64 + 32));
    bitnet_tl2_lut_ctor__scalar(x2.data(), 256, 192, reinterpret_cast<int8_t *>(q2.data()), &sc);
    EXPECT_EQ(sc, 1.0f);
    auto entry2 = [&](size_t table, int e) {
        const uint8_t *t = q2.data() + 32 * table;
        return (int)(int16_t)(uint16_t)(t[e] | t[16 + e] << 8);
    };
    EXPECT_EQ(entry2(0, 13), 177);
    EXPECT_EQ(entry2(0, 5), 77);
    EXPECT_EQ(entry2(0, 2), 150);
    EXPECT_EQ(entry2(0, 0), 0);
    EXPECT_EQ(entry2(0, 14), 0);
    EXPECT_EQ(entry2(0, 15), 0);
    EXPECT_EQ(entry2(64, 0), 127 - 1);   // pair (-127, 1), entry (-1, -1)
    EXPECT_EQ(entry2(64, 8), -127 + 1);  // (1, 1)
    EXPECT_EQ(entry2(64, 9), 0);
}

// ---- dispatch ------------------------------------------------------------------------------------

TEST(Dispatch, QlutBytes) {
    const bitnet_lut_shape a = bitnet_lut_shape_make(BITNET_TYPE_TL1, 1536, 4096, {256, 128, 32});
    EXPECT_EQ(bitnet_qlut_bytes(BITNET_TYPE_TL1, &a), 16u * 4096u);
    const bitnet_lut_shape b = bitnet_lut_shape_make(BITNET_TYPE_TL2, 1536, 4096, {256, 96, 32});
    EXPECT_EQ(bitnet_qlut_bytes(BITNET_TYPE_TL2, &b), 32u * (4032u / 3u + 64u / 2u));
    EXPECT_EQ(bitnet_qlut_bytes(BITNET_TYPE_I2_S, &b), 0u);
}

TEST(Dispatch, CpuSupports) {
    EXPECT_TRUE(bitnet_cpu_supports("scalar"));
    EXPECT_TRUE(bitnet_cpu_supports("portable"));
    EXPECT_FALSE(bitnet_cpu_supports("no-such-isa"));
    EXPECT_FALSE(bitnet_cpu_supports(nullptr));
    // BITNET_ISA=scalar (or portable, the same level) refuses every SIMD ISA
    const char *cap = std::getenv("BITNET_ISA");
    const bool plain_c_only = cap && (std::strcmp(cap, "scalar") == 0 || std::strcmp(cap, "portable") == 0);
#if defined(__aarch64__)
    EXPECT_EQ(bitnet_cpu_supports("neon"), !plain_c_only);
    EXPECT_FALSE(bitnet_cpu_supports("avx2"));
#elif defined(__x86_64__)
    EXPECT_FALSE(bitnet_cpu_supports("neon"));
    __builtin_cpu_init();
    EXPECT_EQ(bitnet_cpu_supports("avx2"), !plain_c_only && __builtin_cpu_supports("avx2") &&
                                               __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"));
#else
    (void)plain_c_only;
#endif
}

TEST(Dispatch, DefaultTilesByHand) {
    bitnet_tiles t{};
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL1, 3200, 8640, &t));
    EXPECT_EQ(t.BM, 160);  // 3200 = 32 * 100: 256, 224, 192 do not divide it
    EXPECT_EQ(t.BK, 240);  // 8640 = 2^6 * 3^3 * 5: 256, 248 do not divide it
    EXPECT_EQ(t.bm, 32);
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL1, 2560, 6912, &t));
    EXPECT_EQ(t.BM, 256);
    EXPECT_EQ(t.BK, 256);
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, 640, 2560, &t));
    EXPECT_EQ(t.BM, 160);
    EXPECT_EQ(t.BK, 96);  // 2560 % 96 = 64, a multiple of 32
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, 32, 272, &t));
    EXPECT_EQ(t.BK, 240);  // 272 % 96 = 80 → no; 272 % 240 = 32
    ASSERT_TRUE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, 32, 264, &t));
    EXPECT_EQ(t.BK, 168);  // 264 % 240 = 24, % 216 = 48, % 192 = 72, % 168 = 96
    EXPECT_FALSE(bitnet_lut_default_tiles(BITNET_TYPE_TL1, 100, 256, &t));  // M % 32
    EXPECT_FALSE(bitnet_lut_default_tiles(BITNET_TYPE_TL1, 64, 260, &t));   // K % 8
    EXPECT_FALSE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, 64, 224, &t));   // K < 256
    EXPECT_FALSE(bitnet_lut_default_tiles(BITNET_TYPE_TL2, 64, 257, &t));   // no block_k qualifies
    EXPECT_FALSE(bitnet_lut_default_tiles(BITNET_TYPE_I2_S, 64, 256, &t));
}

// The dummy-* and bitnetcpp-tiny configs were derived by codegen/derive.py with the same rule.
TEST(Dispatch, DefaultTilesEqualTheDerivedTables) {
    int checked = 0;
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table &tb = bitnet_lut_tables[i];
        const std::string cfg = tb.config;
        if (cfg.rfind("dummy-", 0) != 0 && cfg != "bitnetcpp-tiny") continue;
        for (size_t j = 0; j < tb.n_entries; j++) {
            const auto &e = tb.entries[j];
            bitnet_tiles t{};
            ASSERT_TRUE(bitnet_lut_default_tiles(tb.type, e.M, e.K, &t)) << cfg << " " << e.M << "x" << e.K;
            EXPECT_EQ(t.BM, e.tiles.BM) << cfg << " " << type_tag(tb.type) << " " << e.M << "x" << e.K;
            EXPECT_EQ(t.BK, e.tiles.BK) << cfg << " " << type_tag(tb.type) << " " << e.M << "x" << e.K;
            EXPECT_EQ(t.bm, e.tiles.bm) << cfg << " " << type_tag(tb.type) << " " << e.M << "x" << e.K;
            checked++;
        }
    }
    if (checked == 0) GTEST_SKIP() << "no dummy-* or bitnetcpp-tiny table in this build's registry";
}

TEST(Dispatch, SelectOrderAndErrors) {
    bitnet_error err{};
    bitnet_lut_impl sel{};
    // a legal shape no config has: the generic kernel of the first ISA row this CPU runs (SIMD, else
    // portable C); the scalar LUT kernel only for a registry without such a row
    for (int type : {BITNET_TYPE_TL1, BITNET_TYPE_TL2}) {
        const bitnet_lut_shape sh = type == BITNET_TYPE_TL1
                                        ? bitnet_lut_shape_make(type, 96, 512, {32, 8, 32})
                                        : bitnet_lut_shape_make(type, 64, 352, {64, 96, 32});
        ASSERT_EQ(bitnet_lut_select(type, &sh, &sel, &err), BITNET_OK) << err.msg;
        EXPECT_FALSE(sel.specialized);
        const bitnet_lut_isa_impl *impl = best_isa_impl(type);
        if (impl) {
            EXPECT_EQ(sel.qgemm, impl->generic);
            EXPECT_EQ(sel.ctor, impl->ctor);
            EXPECT_EQ(std::string(sel.name), std::string("bitnet_") + type_tag(type) + "_qgemm_generic__" + impl->isa);
        } else {
            EXPECT_EQ(sel.qgemm, scalar_kernel(type));
            EXPECT_EQ(sel.ctor, scalar_ctor(type));
            EXPECT_EQ(std::string(sel.name), std::string("bitnet_") + type_tag(type) + "_qgemm_generic__scalar");
        }
    }
    // a registry kernel's shape with other tiles is not that kernel
    for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
        const bitnet_lut_kernel &k = bitnet_lut_kernels[i];
        if (k.type != BITNET_TYPE_TL2 || !bitnet_cpu_supports(k.isa) || k.tiles.BM == 32) continue;
        const bitnet_lut_shape sh = bitnet_lut_shape_make(k.type, k.M, k.K, {32, k.tiles.BK, 32});
        ASSERT_EQ(bitnet_lut_select(k.type, &sh, &sel, &err), BITNET_OK) << err.msg;
        EXPECT_NE(sel.qgemm, k.qgemm);
        break;
    }
    // broken tiles: the tile rule's message
    const bitnet_lut_shape bad = bitnet_lut_shape_make(BITNET_TYPE_TL2, 4096, 1536, {256, 96, 64});
    EXPECT_EQ(bitnet_lut_select(BITNET_TYPE_TL2, &bad, &sel, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("TL2 kernels compute 32 rows per SIMD step"), std::string::npos) << err.msg;
    // inconsistent three_k
    bitnet_lut_shape odd = bitnet_lut_shape_make(BITNET_TYPE_TL2, 64, 352, {64, 96, 32});
    odd.three_k = 352;
    odd.two_k = 0;
    EXPECT_EQ(bitnet_lut_select(BITNET_TYPE_TL2, &odd, &sel, &err), BITNET_ERR_INVALID_ARG);
    EXPECT_NE(std::string(err.msg).find("three_k/two_k = 352/0, expected 288/64"), std::string::npos) << err.msg;
}

// Every scheme has a portable C row, listed after its SIMD rows (the registry lists ISAs best first), so
// a CPU without the SIMD ISA, or BITNET_ISA=scalar, runs the portable kernels: generic for a shape no
// config has, specialized for a registry shape.
TEST(Dispatch, PortableRowLastAndPickedWithoutSimd) {
    for (int type : {BITNET_TYPE_TL1, BITNET_TYPE_TL2}) {
        const bitnet_lut_isa_impl *last = nullptr;
        for (size_t i = 0; i < bitnet_lut_n_isa_impls; i++) {
            if (bitnet_lut_isa_impls[i].type == type) last = &bitnet_lut_isa_impls[i];
        }
        ASSERT_NE(last, nullptr) << type_tag(type);
        EXPECT_STREQ(last->isa, "portable") << type_tag(type);
    }
    const char *old = std::getenv("BITNET_ISA");
    const std::string saved = old ? old : "";
    setenv("BITNET_ISA", "scalar", 1);
    bitnet_error err{};
    bitnet_lut_impl sel{};
    for (int type : {BITNET_TYPE_TL1, BITNET_TYPE_TL2}) {
        const bitnet_lut_shape sh = type == BITNET_TYPE_TL1 ? bitnet_lut_shape_make(type, 96, 512, {32, 8, 32})
                                                            : bitnet_lut_shape_make(type, 64, 352, {64, 96, 32});
        ASSERT_EQ(bitnet_lut_select(type, &sh, &sel, &err), BITNET_OK) << err.msg;
        EXPECT_FALSE(sel.specialized);
        EXPECT_EQ(std::string(sel.name), std::string("bitnet_") + type_tag(type) + "_qgemm_generic__portable");
        EXPECT_EQ(sel.ctor, isa_impl(type, "portable")->ctor);
    }
    for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
        const bitnet_lut_kernel &k = bitnet_lut_kernels[i];
        const bitnet_lut_shape sh = bitnet_lut_shape_make(k.type, k.M, k.K, k.tiles);
        ASSERT_EQ(bitnet_lut_select(k.type, &sh, &sel, &err), BITNET_OK) << err.msg;
        EXPECT_TRUE(sel.specialized) << k.name;
        EXPECT_NE(std::strstr(sel.name, "__portable"), nullptr) << sel.name;
    }
    if (old) {
        setenv("BITNET_ISA", saved.c_str(), 1);
    } else {
        unsetenv("BITNET_ISA");
    }
}

TEST(Dispatch, FindTableAndTilesFor) {
    if (bitnet_lut_n_tables == 0) GTEST_SKIP() << "registry has no tables";
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table &tb = bitnet_lut_tables[i];
        SCOPED_TRACE(testing::Message() << tb.config << "/" << tb.table << " " << type_tag(tb.type));
        std::vector<std::array<int64_t, 2>> shapes;
        for (size_t j = 0; j < tb.n_entries; j++) shapes.push_back({tb.entries[j].M, tb.entries[j].K});
        const auto *found = bitnet_lut_find_table(tb.type, reinterpret_cast<const int64_t(*)[2]>(shapes.data()),
                                                  shapes.size(), tb.table);
        ASSERT_NE(found, nullptr);
        EXPECT_EQ(found->type, tb.type);
        EXPECT_STREQ(found->table, tb.table);  // the preferred name wins when a covering table has it
        // the table found covers every shape, and tiles_for returns its entries
        for (const auto &sh : shapes) {
            bool has = false;
            for (size_t j = 0; j < found->n_entries; j++) has |= found->entries[j].M == sh[0] && found->entries[j].K == sh[1];
            EXPECT_TRUE(has) << sh[0] << "x" << sh[1];
        }
        // found precedes every other covering table with the same name in config order
        EXPECT_LE(std::strcmp(found->config, tb.config), 0);
        for (size_t j = 0; j < tb.n_entries; j++) {
            const bitnet_tiles t = bitnet_lut_tiles_for(tb.type, tb.entries[j].M, tb.entries[j].K, &tb, tb.table);
            EXPECT_EQ(t.BM, tb.entries[j].tiles.BM);
            EXPECT_EQ(t.BK, tb.entries[j].tiles.BK);
            EXPECT_EQ(t.bm, tb.entries[j].tiles.bm);
        }
    }
    // no table covers a made-up shape; tiles_for falls back to the rule
    const int64_t none[1][2] = {{96, 520}};
    EXPECT_EQ(bitnet_lut_find_table(BITNET_TYPE_TL1, none, 1, "default"), nullptr);
    EXPECT_EQ(bitnet_lut_find_table(BITNET_TYPE_TL1, none, 0, "default"), nullptr);
    const bitnet_tiles t = bitnet_lut_tiles_for(BITNET_TYPE_TL1, 96, 520, nullptr, "default");
    EXPECT_EQ(t.BM, 96);
    EXPECT_EQ(t.BK, 104);  // largest multiple of 8 dividing 520, ≤ 256
    EXPECT_EQ(t.bm, 32);
    const bitnet_tiles z = bitnet_lut_tiles_for(BITNET_TYPE_TL2, 100, 520, nullptr, "default");
    EXPECT_EQ(z.BM, 0);
}

// ---- AVX-512 TL2: both widening paths, and the run-time choice ------------------------------------

#if defined(__x86_64__)
namespace {

// Skip message for CPUs (or BITNET_ISA caps) without the avx512 level.
const char *kNoAvx512 = "this CPU lacks AVX-512 F/BW/VL/VNNI (or BITNET_ISA caps it): the avx512 TL2 kernels are not run";

// Restores the default VBMI choice however the test ends.
struct VbmiDefault {
    ~VbmiDefault() { bitnet_tl2_avx512_allow_vbmi(true); }
};

}  // namespace

// SpecializedKernel and TableShape run the avx512 kernels with the default widening (VBMI where the CPU has
// it); this runs every avx512 TL2 kernel (specialized: sampled tiles, 1 and 3 columns; generic: the odd
// shapes) with VBMI forbidden, so the AVX-512BW path is tested on a VBMI CPU too. The constructor has one path.
TEST(Avx512Tl2, AllKernelsWithoutVbmi) {
    if (!bitnet_cpu_supports("avx512")) GTEST_SKIP() << kNoAvx512;
    VbmiDefault restore;
    __builtin_cpu_init();
    const bool has_vbmi = __builtin_cpu_supports("avx512vbmi");
    EXPECT_EQ(bitnet_tl2_avx512_allow_vbmi(true), has_vbmi);
    if (!has_vbmi) std::printf("note: no AVX-512 VBMI here; the default path is already the AVX-512BW one\n");
    ASSERT_FALSE(bitnet_tl2_avx512_allow_vbmi(false));
    const bitnet_lut_isa_impl *impl = isa_impl(BITNET_TYPE_TL2, "avx512");
    ASSERT_NE(impl, nullptr);
    int n = 0;
    for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
        const bitnet_lut_kernel &k = bitnet_lut_kernels[i];
        if (k.type != BITNET_TYPE_TL2 || std::strcmp(k.isa, "avx512") != 0) continue;
        const Shape s{k.type, k.M, k.K, k.tiles};
        SCOPED_TRACE(s.label());
        const std::vector<int64_t> cols = s.small() ? std::vector<int64_t>{1, 2, 3, 5} : std::vector<int64_t>{1, 3};
        check_random({{std::string(k.name) + " (AVX-512BW widening)", k.qgemm, impl->ctor}}, s, sample_tiles(s), cols,
                     3000 + (uint32_t)i);
        n++;
    }
    EXPECT_GT(n, 0) << "no avx512 TL2 kernel in the registry";
    const Shape odd[] = {{BITNET_TYPE_TL2, 32, 256, {32, 96, 32}},  {BITNET_TYPE_TL2, 96, 288, {32, 24, 32}},
                         {BITNET_TYPE_TL2, 64, 272, {64, 240, 32}}, {BITNET_TYPE_TL2, 32, 464, {32, 240, 32}},
                         {BITNET_TYPE_TL2, 160, 4096, {160, 168, 32}}};
    for (const Shape &s : odd) {
        SCOPED_TRACE(s.label());
        const std::vector<Impl> impls = {{"generic avx512 (AVX-512BW widening)", impl->generic, impl->ctor}};
        check_random(impls, s, sample_tiles(s), {1, 2, 3, 4, 5, 8, 9}, 4000);
        check_extremes(impls, s, s.n_tiles() - 1);
    }
}

// On an AVX-512 CPU the avx512 TL2 row is the one selected (specialized for a registry shape, generic
// otherwise); BITNET_ISA=avx2 selects the avx2 kernels, BITNET_ISA=avx512 changes nothing.
TEST(Avx512Tl2, SelectedByDefaultAndCappedByBitnetIsa) {
    if (!bitnet_cpu_supports("avx512")) GTEST_SKIP() << kNoAvx512;
    const char *old = std::getenv("BITNET_ISA");
    const std::string saved = old ? old : "";
    const bitnet_lut_kernel *reg = nullptr;
    for (size_t i = 0; i < bitnet_lut_n_kernels && !reg; i++) {
        if (bitnet_lut_kernels[i].type == BITNET_TYPE_TL2 && std::strcmp(bitnet_lut_kernels[i].isa, "avx512") == 0) {
            reg = &bitnet_lut_kernels[i];
        }
    }
    ASSERT_NE(reg, nullptr);
    const bitnet_lut_shape shapes[2] = {bitnet_lut_shape_make(BITNET_TYPE_TL2, reg->M, reg->K, reg->tiles),
                                        bitnet_lut_shape_make(BITNET_TYPE_TL2, 64, 352, {64, 96, 32})};
    for (const char *cap : {"", "avx512", "avx2"}) {
        if (*cap) {
            setenv("BITNET_ISA", cap, 1);
        } else {
            unsetenv("BITNET_ISA");
        }
        const std::string isa = std::strcmp(cap, "avx2") == 0 ? "avx2" : "avx512";
        for (const bitnet_lut_shape &sh : shapes) {
            bitnet_lut_impl sel{};
            bitnet_error err{};
            ASSERT_EQ(bitnet_lut_select(BITNET_TYPE_TL2, &sh, &sel, &err), BITNET_OK) << err.msg;
            EXPECT_EQ(sel.ctor, isa_impl(BITNET_TYPE_TL2, isa.c_str())->ctor) << "BITNET_ISA=" << cap;
            const std::string name = sel.name;
            EXPECT_EQ(name.substr(name.size() - isa.size() - 2), "__" + isa) << "BITNET_ISA=" << cap << ": " << name;
            EXPECT_EQ(sel.specialized, &sh == &shapes[0]) << name;
        }
    }
    if (old) {
        setenv("BITNET_ISA", saved.c_str(), 1);
    } else {
        unsetenv("BITNET_ISA");
    }
}
#else
TEST(Avx512Tl2, AllKernelsWithoutVbmi) { GTEST_SKIP() << "not an x86-64 build: no avx512 TL2 kernels"; }
#endif

// ---- the int8 batch kernel on TL2 bytes (tl2_i8.h) -------------------------------------------------

// Every TL2 shape of the registry (kernels and tables) and the odd TL2 shapes above, against
// bitnet_ref_gemm_rows on sampled tiles: random weights and activations at column counts that leave every
// register-block remainder (1..8 columns per block) and span K slices; then all +1 / all −1 weights against
// columns of +127 and −128 (the largest sums), and padding between the columns' accumulators untouched.
std::vector<Shape> tl2_shapes_all() {
    std::set<std::tuple<int64_t, int64_t, int, int, int>> seen;
    std::vector<Shape> v;
    auto add = [&](const Shape &s) {
        if (s.type == BITNET_TYPE_TL2 && seen.insert({s.M, s.K, s.tiles.BM, s.tiles.BK, s.tiles.bm}).second)
            v.push_back(s);
    };
    for (const Shape &s : kernel_shapes()) add(s);
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table &t = bitnet_lut_tables[i];
        for (size_t j = 0; j < t.n_entries; j++) add(Shape{t.type, t.entries[j].M, t.entries[j].K, t.entries[j].tiles});
    }
    const Shape odd[] = {{BITNET_TYPE_TL2, 32, 256, {32, 96, 32}},  {BITNET_TYPE_TL2, 64, 352, {64, 96, 32}},
                         {BITNET_TYPE_TL2, 96, 288, {32, 24, 32}},  {BITNET_TYPE_TL2, 32, 480, {32, 240, 32}},
                         {BITNET_TYPE_TL2, 64, 272, {64, 240, 32}}, {BITNET_TYPE_TL2, 32, 264, {32, 168, 32}},
                         {BITNET_TYPE_TL2, 64, 4096, {64, 168, 32}}, {BITNET_TYPE_TL2, 32, 464, {32, 240, 32}},
                         {BITNET_TYPE_TL2, 32, 9216, {32, 192, 32}}};
    for (const Shape &s : odd) add(s);
    return v;
}

void check_tl2_i8(bitnet_tl2_i8_fn fn, const Shape &s, const Weight &w, int64_t tile, const Acts &a) {
    const int64_t BM = s.tiles.BM, K = s.K, N = a.n_cols;
    const bitnet_lut_shape sh = s.sh();
    std::vector<int32_t> qsum((size_t)N, 0);
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) qsum[(size_t)n] += a.q[(size_t)(n * K + k)];
    const size_t stride = (size_t)BM + 16;
    const int32_t guard = 0x5A5A5A5A;
    std::vector<int32_t> acc(stride * (size_t)N, guard), ref((size_t)(N * BM));
    ASSERT_TRUE(fn(&sh, w.packed->data(), tile, a.q.data(), (size_t)K, qsum.data(), N, acc.data(), stride));
    bitnet_ref_gemm_rows(BITNET_TYPE_TL2, w.packed->data(), &sh, a.q.data(), N, tile * BM, (tile + 1) * BM,
                         ref.data());
    int64_t bad = 0;
    for (int64_t n = 0; n < N; n++) {
        for (int64_t i = 0; i < BM; i++) {
            const int32_t got = acc[(size_t)n * stride + (size_t)i], want = ref[(size_t)(n * BM + i)];
            if (got != want && bad++ < 5)
                ADD_FAILURE() << "tile " << tile << " column " << n << " row " << i << ": " << got << " != " << want;
        }
        for (size_t i = (size_t)BM; i < stride; i++)
            if (acc[(size_t)n * stride + i] != guard && bad++ < 5) ADD_FAILURE() << "padding written, column " << n;
    }
    EXPECT_EQ(bad, 0) << s.label() << " tile " << tile << " N " << N;
}

// The versions this CPU runs (AVX-512 VNNI, AVX-VNNI, AVX2), each checked on its own.
std::vector<std::pair<std::string, bitnet_tl2_i8_fn>> tl2_i8_versions() {
    std::vector<std::pair<std::string, bitnet_tl2_i8_fn>> v;
    for (const char *isa : {"avx512", "avxvnni", "avx2"})
        if (bitnet_tl2_i8_fn fn = bitnet_tl2_i8_for_isa(isa)) v.push_back({isa, fn});
    return v;
}

void check_tl2_i8_every_shape(const std::string &isa, bitnet_tl2_i8_fn fn) {
    SCOPED_TRACE(isa);
    std::printf("[ info ] int8 kernel on TL2 bytes, version %s\n", isa.c_str());
    uint32_t seed = 7100;
    for (const Shape &s : tl2_shapes_all()) {
        SCOPED_TRACE(s.label());
        std::vector<int64_t> tiles = sample_tiles(s);
        if (!s.small()) tiles = {tiles.front(), tiles.back()};
        const Weight w = make_weight(s, tiles, Fill::Random, seed);
        const std::vector<int64_t> cols = s.small() ? std::vector<int64_t>{1, 3, 8, 9, 17, 40}
                                                    : std::vector<int64_t>{5, 16};
        for (int64_t t : tiles)
            for (int64_t N : cols)
                check_tl2_i8(fn, s, w, t, quantize(make_acts(s.K, N, seed + (uint32_t)N, N / 2), s.K));
        seed += 10;
    }
}

TEST(Tl2Int8, MatchesReferenceOnEveryTl2Shape) {
    const auto versions = tl2_i8_versions();
    if (versions.empty()) GTEST_SKIP() << "no AVX2 here (or BITNET_ISA caps it)";
    for (const auto &[isa, fn] : versions) check_tl2_i8_every_shape(isa, fn);
}

TEST(Tl2Int8, ExtremeWeightsAndActivations) {
    const auto versions = tl2_i8_versions();
    if (versions.empty()) GTEST_SKIP() << "no AVX2 here (or BITNET_ISA caps it)";
    const Shape shapes[] = {{BITNET_TYPE_TL2, 64, 4096, {64, 168, 32}}, {BITNET_TYPE_TL2, 32, 464, {32, 240, 32}}};
    for (const Shape &s : shapes)
        for (Fill f : {Fill::PlusOne, Fill::MinusOne, Fill::Zero}) {
            const Weight w = make_weight(s, {s.n_tiles() - 1}, f, 1);
            Acts a;
            a.K = s.K;
            a.n_cols = 3;
            a.q.resize((size_t)(3 * s.K));
            for (int64_t k = 0; k < s.K; k++) {
                a.q[(size_t)k] = 127;
                a.q[(size_t)(s.K + k)] = -128;
                a.q[(size_t)(2 * s.K + k)] = (int8_t)(k % 2 ? 127 : -128);
            }
            for (const auto &[isa, fn] : versions) {
                SCOPED_TRACE(isa);
                check_tl2_i8(fn, s, w, s.n_tiles() - 1, a);
            }
        }
}

TEST(Tl2Int8, RefusesWhatItDoesNotTake) {
    const Shape s{BITNET_TYPE_TL2, 32, 256, {32, 96, 32}};
    bitnet_lut_shape sh = s.sh();
    std::vector<uint8_t> w(bitnet_tl2_nbytes(s.M, s.K));
    std::vector<int8_t> q((size_t)s.K);
    int32_t qsum = 0, acc[32];
    sh.bm = 64;
    EXPECT_FALSE(bitnet_tl2_i8_gemm(&sh, w.data(), 0, q.data(), (size_t)s.K, &qsum, 1, acc, 32));
    sh = s.sh();
    EXPECT_FALSE(bitnet_tl2_i8_gemm(&sh, w.data(), 0, q.data(), (size_t)s.K, &qsum, 1, acc, 16));
    EXPECT_FALSE(bitnet_tl2_i8_gemm(&sh, w.data(), 0, q.data(), (size_t)s.K, &qsum, 0, acc, 32));
    for (const auto &[isa, fn] : tl2_i8_versions()) {
        SCOPED_TRACE(isa);
        sh.bm = 64;
        EXPECT_FALSE(fn(&sh, w.data(), 0, q.data(), (size_t)s.K, &qsum, 1, acc, 32));
        sh = s.sh();
        EXPECT_FALSE(fn(&sh, w.data(), 0, q.data(), (size_t)s.K, &qsum, 1, acc, 16));
        EXPECT_FALSE(fn(&sh, w.data(), 0, q.data(), (size_t)s.K, &qsum, 0, acc, 32));
        EXPECT_FALSE(fn(&sh, nullptr, 0, q.data(), (size_t)s.K, &qsum, 1, acc, 32));
    }
    EXPECT_EQ(bitnet_tl2_i8_supports(&sh), bitnet_tl2_i8_available());
    EXPECT_EQ(bitnet_tl2_i8_for_isa("neon"), nullptr);
    EXPECT_EQ(bitnet_tl2_i8_for_isa("avx"), nullptr);
    EXPECT_EQ(bitnet_tl2_i8_for_isa(nullptr), nullptr);
    const char *was = getenv("BITNET_ISA");
    const std::string saved = was ? was : "";
    // each version follows the cap as it is now (the process's choice, bitnet_tl2_i8_isa, was made once)
    setenv("BITNET_ISA", "avx2", 1);
    EXPECT_EQ(bitnet_tl2_i8_for_isa("avx512"), nullptr);
    EXPECT_EQ(bitnet_tl2_i8_for_isa("avxvnni"), nullptr);
    EXPECT_EQ(bitnet_tl2_i8_for_isa("avx2") != nullptr, bitnet_cpu_supports("avx2"));
    setenv("BITNET_ISA", "scalar", 1);
    EXPECT_EQ(bitnet_tl2_i8_for_isa("avx2"), nullptr);
    if (was)
        setenv("BITNET_ISA", saved.c_str(), 1);
    else
        unsetenv("BITNET_ISA");
}
