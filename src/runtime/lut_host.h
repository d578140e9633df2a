/* lut_host.h — the matmul host around the kernels (design.md §3): which products the ternary path
 * takes, how big the workspace is, per-tensor extras holding repacked weights, and the threaded
 * product dst = src0 · src1 for ternary src0 (I2_S, TL1, TL2) and F32 activations.
 *
 * Threading contract of bitnet_mul_mat (called by every thread of a bitnet_threadpool task):
 * each thread quantizes the activations / builds the LUTs of a contiguous range of columns into the
 * workspace (one column: thread 0), a barrier follows only when nth > 1, then each thread computes a
 * contiguous range of BM tiles (I2_S: 32-row blocks) — for several columns and a tile count that
 * does not divide evenly, of (tile, column chunk) units. Every workspace byte and every output
 * element is computed by one thread with the same operations, so results are identical for any
 * thread count. */
#ifndef BITNET_LUT_HOST_H
#define BITNET_LUT_HOST_H

#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "kernels/lut/lut.h"
#include "runtime/threadpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Stored ternary data already in the target layout is used in place when its start is a multiple of
 * this (the GGUF alignment; see bitnet_lut_transform_tensor). */
#define BITNET_WEIGHT_ALIGN 32

/* Repacked ternary weight attached to a tensor by bitnet_lut_transform_tensor. */
typedef struct bitnet_tensor_extra {
    int type;                /* layout of qweights: BITNET_TYPE_I2_S, _TL1 or _TL2 */
    bitnet_lut_shape shape;  /* M, K, tiles (tiles unused for I2_S) */
    const uint8_t *qweights; /* packed weights: the tensor's data (BITNET_WEIGHT_ALIGN-aligned), or an owned
                                64-byte aligned buffer */
    float scale;             /* per-tensor weight scale */
    bitnet_lut_impl impl;    /* TL1/TL2: constructor and kernel */
    void *owned;             /* buffer to free, or NULL when qweights aliases the file mapping */
    /* TL1/TL2 weights transformed from an I2_S tensor (TL2 ones only where int8_on_tl2 is false): the
     * tensor's I2_S bytes (t->data at transform time, e.g. the model's file mapping, which must outlive the
     * extra), else NULL. With them a product of i2s_min_cols or more columns runs the I2_S int8 kernel
     * instead of the LUT kernel (see bitnet_lut_uses_int8). */
    const uint8_t *i2s_codes;
    /* TL2 weight on a CPU with bitnet_tl2_i8_available() (x86-64 with AVX2): products of i2s_min_cols or more
     * columns run the int8 kernel on the TL2 bytes themselves (bitnet_tl2_i8_gemm), so no I2_S bytes are kept
     * (i2s_codes is NULL) and the weight has one copy. Set at transform for every TL2 target (from I2_S, TL1 or
     * TL2 bytes). */
    bool int8_on_tl2;
    int64_t i2s_min_cols;    /* from bitnet_lut_i2s_min_cols() at transform, replaced by the measured crossover
                                when a model's context is created (bitnet_model_choose_kernels); 0 = never */
    const bitnet_tensor *owner; /* the tensor it was attached to (bitnet_lut_release_tensor matches on it) */
} bitnet_tensor_extra;

/* Batch path of TL1/TL2 weights (prompt processing). A product with N >= i2s_min_cols activation columns
 * runs an int8 kernel on the int8 activations of the I2_S path (LAYOUTS.md §1) instead of building N LUTs:
 * - on a CPU with bitnet_tl2_i8_available() (x86-64 with AVX2; its AVX-VNNI or AVX-512 VNNI version where the
 *   CPU has it), every TL2 weight (from an I2_S or a TL2 file): bitnet_tl2_i8_gemm on the TL2 bytes
 *   (int8_on_tl2), so the weight has one copy;
 * - otherwise a TL1/TL2 weight transformed from an I2_S tensor keeps a pointer to those I2_S bytes (no extra
 *   memory beyond the file mapping) and runs the I2_S kernel (bitnet_i2s_gemm) on them; weights stored as
 *   TL1/TL2 then always run the LUT path.
 * The int32 sums Σ w·q are the same exact integers on every path and the floats are formed by the same two
 * operations (LAYOUTS.md §1), so the outputs are bit-identical to the LUT path (tests/test_lut_host.cc,
 * N = 1..40, 1..4 threads).
 * The threshold is read by bitnet_lut_transform_tensor (later changes affect only weights
 * transformed afterwards). Default: BITNET_LUT_I2S_MIN_COLS_VNNI (16) when bitnet_i2s_isa() is
 * "avx512" (the AVX-512 VNNI I2_S kernel: llama-bench pp128 --kernel tl2 on the dummy I2_S files, x86
 * EPYC: 1B +16% at 1 thread, +23% at 2; 125M +4% at 1 thread), else 0 (the AVX2 I2_S kernel was slower
 * than the LUT kernel at every N on the first EPYC measured; ARM is unmeasured, qemu only). A weight with
 * int8_on_tl2 starts from BITNET_LUT_TL2_I8_MIN_COLS (16) instead unless the threshold was fixed (below):
 * the AVX2 version against the AVX2 LUT kernel, bitnet-kernel-bench on the 2B-4T and 3B shapes, AMD EPYC
 * Zen 5, 1 thread: 0.71–0.83x at N = 8, 1.05–1.17x at N = 16.
 * Overridden by the environment variable BITNET_LUT_I2S_MIN_COLS (a decimal integer; 0 = never;
 * read once, by the first transform) or by bitnet_lut_set_i2s_min_cols (n < 0 restores the
 * default / environment value; not thread-safe against a concurrent transform).
 * Unless one of those two fixed it, this transform-time value is only a start: a context measures
 * the crossover per weight shape on the CPU it runs on and replaces it (runtime/kchoice.h,
 * bitnet_context_create_params). */
#define BITNET_LUT_I2S_MIN_COLS_VNNI 16
#define BITNET_LUT_TL2_I8_MIN_COLS 16
/* The current threshold (columns) as described above; 0 = the LUT path for every column count. */
int64_t bitnet_lut_i2s_min_cols(void);
void bitnet_lut_set_i2s_min_cols(int64_t n);
/* true when the threshold was fixed by BITNET_LUT_I2S_MIN_COLS or bitnet_lut_set_i2s_min_cols(n >= 0):
 * contexts then keep it instead of measuring the crossover. */
bool bitnet_lut_i2s_min_cols_fixed(void);

/* true when a TL1/TL2 weight has an int8 batch path: its I2_S bytes (i2s_codes) or the int8 kernel on its TL2
 * bytes (int8_on_tl2). */
bool bitnet_lut_has_int8(const bitnet_tensor_extra *ex);
/* true when bitnet_mul_mat on this weight with n_cols activation columns runs that int8 path instead of the
 * LUT kernel (bitnet_lut_has_int8, i2s_min_cols > 0 and n_cols >= i2s_min_cols). */
bool bitnet_lut_uses_int8(const bitnet_tensor_extra *ex, int64_t n_cols);

/* An F32 activation matrix (ne0 values per row, ne1 rows, dense) as a tensor for bitnet_mul_mat's src1 or
 * dst, named "activations". */
static inline bitnet_tensor bitnet_act_tensor(float *data, int64_t ne0, int64_t ne1) {
    bitnet_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "activations");
    t.type = BITNET_TYPE_F32;
    t.n_dims = 2;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = t.ne[3] = 1;
    t.nb[0] = sizeof(float);
    t.nb[1] = (size_t)ne0 * sizeof(float);
    t.nb[2] = t.nb[3] = t.nb[1] * (size_t)ne1;
    t.data = data;
    t.nbytes = t.nb[2];
    return t;
}

/* Bits per weight of the LUT types: TL1, TL2, I2_S → 2; Q4_0 → 4; anything else 0. */
int bitnet_get_type_bits(int type);

/* true when the ternary path computes dst = src0 · src1: src0 is I2_S, TL1 or TL2 (2-D, ne00 = K,
 * ne01 = M), src1 and dst are F32, src1->ne[0] == K, dst->ne[0] == M, dst->ne[1] == src1->ne[1].
 * Any number of activation columns (src1->ne[1] >= 1) on every type. */
bool bitnet_can_mul_mat(const bitnet_tensor *src0, const bitnet_tensor *src1, const bitnet_tensor *dst);

/* Workspace bytes bitnet_mul_mat needs for this product (ne10, ne11 from src1; ne01 and the layout
 * from src0's extra, or src0's type when it has none): per column the int8 activations or the qlut
 * (stride rounded up to 64), plus the column scales (and for I2_S the column sums Σq), each region
 * rounded up to 64, so the total is a multiple of 64. Proven ≥ the highest byte written (proof in
 * lut_host.c; tests run every configured shape under AddressSanitizer). Call it after
 * bitnet_lut_transform_tensor: the layout the product runs on decides the size (without an extra, a
 * TL2 weight gets the upper bound 16·K per column). Non-decreasing in ne11, so the size for the
 * largest batch covers smaller ones. A TL1/TL2 weight with an int8 path (bitnet_lut_has_int8) gets the
 * larger of its LUT layout and the I2_S layout, so the size never depends on the threshold.
 * 0 when !bitnet_can_mul_mat. */
size_t bitnet_mul_mat_get_wsize(const bitnet_tensor *src0, const bitnet_tensor *src1, const bitnet_tensor *dst);

/* Lifecycle of the extras table. init is idempotent; free releases every extra and its buffers (under the
 * allocator they came from: base/mem.h) and is safe to call twice or without init. The extras of the table
 * share one allocator: while it holds any, bitnet_lut_transform_tensor under another allocator (a model in
 * an arena beside models on the heap, or the reverse) is refused with BITNET_ERR_INVALID_ARG. */
void bitnet_lut_init(void);
void bitnet_lut_free(void);
/* Extras in the table now (0 after bitnet_lut_free, or when the last one was released). */
size_t bitnet_lut_n_extras(void);
/* Release every extra in the table that was attached to t (bitnet_lut_transform_tensor records the
 * tensor; a tensor transformed twice has two) — repacked buffer and entry, under the table's allocator —
 * and clear t->extra, so that one model can be freed while others keep theirs. The table itself is
 * released with its last entry. t->extra is not dereferenced: a tensor whose extra went with
 * bitnet_lut_free matches nothing, and its t->extra is left as it is. NULL is fine. Thread-safe. */
void bitnet_lut_release_tensor(bitnet_tensor *t);

/* Prepare a ternary weight for the product on layout `target` (I2_S, TL1 or TL2): decode the tensor's
 * stored layout (I2_S, TL1 or TL2 with `stored_tiles`), repack into `target` with `tiles` (ignored for
 * I2_S) unless the stored layout already is the target with the same tiles, pick the kernel, and
 * attach the extra. Errors name the tensor, M, K and the tiles. Calls bitnet_lut_init if needed.
 * The stored data is always checked (I2_S code 3 and impossible TL1/TL2 nibbles are refused). When it
 * already is the target layout and BITNET_WEIGHT_ALIGN-aligned it is used in place and only checked (no
 * memory beyond the extra: what the bare-metal build relies on); otherwise it is decoded into an M·K
 * int8 matrix (freed before returning) and copied/repacked into an owned 64-byte aligned buffer. Memory
 * comes from base/mem.h. I2_S rows that straddle 128-weight blocks are used as stored
 * (src/kernels/i2s/i2s.h). TL1/TL2 tiles with BM > 8192 (512 in the bare-metal build) are refused (the
 * per-thread accumulators live on the stack). On error the tensor is unchanged; transforming a
 * tensor again attaches a new extra (the old one is released by bitnet_lut_release_tensor or
 * bitnet_lut_free). */
bitnet_status bitnet_lut_transform_tensor(bitnet_tensor *t, const bitnet_tiles *stored_tiles, int target,
                                          const bitnet_tiles *tiles, bitnet_error *err);

/* dst[n][m] = Σ_k W[m][k] · src1[n][k] with W = src0 (after bitnet_lut_transform_tensor).
 * src1: F32 [ne11][ne10] rows contiguous; dst: F32 [ne11][ne01]. wdata: 64-byte aligned, wsize >=
 * bitnet_mul_mat_get_wsize. Call from every thread of a pool task with its ith/nth; tp is used for the
 * barrier (may be NULL when nth == 1; else nth must equal the pool's thread count). Row strides: nb[1]
 * when set, else dense.
 * y[n][m] = (float)acc[n][m] / s[n] * scale (LAYOUTS.md §1). Each kernel call covers one BM tile (I2_S:
 * 32 rows) and up to floor(8192 / BM) columns (all of them for ≤ 32 columns at BM 256; 512 / BM in the
 * bare-metal build; floor(32768 / BM) for the int8 kernel on TL2 bytes, which decodes its tile once per call);
 * the integer sums do not depend on that split, so results are the same for any batch
 * and thread count.
 * A call that cannot be computed (no extra, mismatched shapes, wsize too small, misaligned wdata,
 * nth inconsistent with tp) returns on every thread without the barrier and thread 0 fills dst with
 * NaN. There is no barrier at the end: reuse of wdata inside the same task needs one first. */
void bitnet_mul_mat(const bitnet_tensor *src0, const bitnet_tensor *src1, bitnet_tensor *dst,
                    void *wdata, size_t wsize, int ith, int nth, bitnet_threadpool *tp);

#ifdef __cplusplus
}
#endif

#endif
