/* tl2_i8.h — the int8 product read straight from TL2 bytes (docs/LAYOUTS.md §4, §4a): the batch kernel of a TL2
 * weight, so that a model repacked from I2_S to TL2 needs no I2_S copy for its prompt batches (one copy of
 * its ternary weights when the file's I2_S layout is x86, the official files' one; an arm64/rows4 file's
 * rewritten x86 copy is still kept by the loader). The LUT
 * kernels (lut.h) build one qlut per activation column, which pays for one or a few columns; for many
 * columns this kernel decodes each 32-row micro tile's weights once into registers-ready codes and
 * multiplies them by every column's int8 activations, rows in lanes: AVX-512 VNNI vpdpbusd, AVX-VNNI
 * (256-bit vpdpbusd) or AVX2 vpmaddubsw. */
#ifndef BITNET_TL2_I8_H
#define BITNET_TL2_I8_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One version of the kernel (the contract of bitnet_tl2_i8_gemm below). */
typedef bool (*bitnet_tl2_i8_fn)(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile, const int8_t *q,
                                 size_t q_stride, const int32_t *qsum, int64_t n_cols, int32_t *acc,
                                 size_t acc_stride);

/* The version bitnet_tl2_i8_gemm runs: the best of "avx512" (AVX-512 F/BW/VL/VNNI), "avxvnni", "avx2" that
 * bitnet_cpu_supports accepts at the first call (so BITNET_ISA caps it; set it before), or NULL (not an
 * x86-64 build, no AVX2, or BITNET_ISA=scalar/portable then). Chosen once per process, like bitnet_i2s_isa. */
const char *bitnet_tl2_i8_isa(void);

/* The version named isa ("avx512", "avxvnni", "avx2") when bitnet_cpu_supports(isa) says yes now, else NULL
 * (unknown name, another architecture, a CPU without it or a BITNET_ISA cap below it). For tests and
 * benchmarks of each version; it has bitnet_tl2_i8_gemm's contract. */
bitnet_tl2_i8_fn bitnet_tl2_i8_for_isa(const char *isa);

/* true when bitnet_tl2_i8_gemm runs here (bitnet_tl2_i8_isa() != NULL). */
bool bitnet_tl2_i8_available(void);

/* true when bitnet_tl2_i8_gemm takes this TL2 shape here: bitnet_tl2_i8_available() and tiles of the TL2 rules
 * (bm = 32, BM % 32 == 0, BK % 24 == 0, two_k % 32 == 0). */
bool bitnet_tl2_i8_supports(const bitnet_lut_shape *sh);

/* One BM-row tile of a TL2 weight (tiles sh->BM/BK/bm, bm = 32) times n_cols int8 columns:
 *   acc[n·acc_stride + i] = Σ_k w[tile·BM + i][k] · q[n·q_stride + k]   (i < BM, n < n_cols; written)
 * w: the packed tensor base (LAYOUTS.md §4); q: per column K int8 values (LAYOUTS.md §1, the I2_S path's
 * activations), any alignment; qsum[n] = Σ_k q[n·q_stride + k] (the kernel multiplies codes w + 1 and
 * subtracts it). acc_stride ≥ BM. The sums are the exact integers bitnet_ref_gemm gives (|Σ| ≤ 127·K).
 * Runs the version bitnet_tl2_i8_isa() chose (it does not ask the CPU per call, so a BITNET_ISA set later does
 * not change a loaded model's path; every version gives the same sums). Tiles it does not take, a NULL
 * pointer, n_cols < 1, acc_stride < BM or no version here: it writes nothing and returns false. */
bool bitnet_tl2_i8_gemm(const bitnet_lut_shape *sh, const uint8_t *w, int64_t tile, const int8_t *q,
                        size_t q_stride, const int32_t *qsum, int64_t n_cols, int32_t *acc, size_t acc_stride);

#ifdef __cplusplus
}
#endif

#endif
