/* kchoice.h — which kernel runs a product of N activation columns on a TL1/TL2 weight that has an int8
 * path (bitnet_lut_has_int8: the int8 kernel on its TL2 bytes on x86-64 with AVX2, else its I2_S bytes
 * kept from an I2_S file): the LUT kernel or the int8 kernel. Both give the same int32 sums Σ w·q and the same
 * floats (lut_host.h), so the choice changes speed only, never a token.
 *
 * The choice is a crossover per weight shape, tiles and thread count: the int8 kernel runs products
 * of N >= i2s_min_cols columns (0: never). It is measured on this CPU, on the model's own weights,
 * with the context's thread pool (bitnet_kchoice_measure), and recorded in a cache file so that the
 * next run on the same CPU model, kernel names and ISA cap reads it instead (bitnet_kchoice_cache_*).
 * The key holds no build id: after changing a kernel, delete the file (or point BITNET_KERNEL_CACHE
 * elsewhere) to measure again. Measuring
 * GEMV (N = 1) on the model's own weights, rotating over every layer's copy of the shape, reads
 * them from DRAM as a generated token does; the batched columns are compute-bound either way.
 *
 * Not built for the bare-metal target (no clock, no files): there the transform-time threshold stays. */
#ifndef BITNET_KCHOICE_H
#define BITNET_KCHOICE_H

#include "base/common.h"
#include "runtime/lut_host.h"
#include "runtime/threadpool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Column counts measured: 1, 2, 4, ..., 128. Products of more columns take the choice of 128 (both
 * kernels are blocked over columns, so their speed per column changes little beyond). */
#define BITNET_KCHOICE_MAX_POINTS 8

typedef struct bitnet_kchoice_point {
    int64_t n_cols;
    double lut_us, i2s_us; /* median time of one product, microseconds */
} bitnet_kchoice_point;

/* The choice for one (weight layout, M, K, tiles, thread count). */
typedef struct bitnet_kchoice {
    int type;                 /* the LUT layout: BITNET_TYPE_TL1 or _TL2 */
    int64_t M, K;
    int64_t BM, BK, bm;       /* the LUT tiles */
    int n_threads;
    bool int8_on_tl2;         /* the int8 path is bitnet_tl2_i8_gemm on the TL2 bytes, not the I2_S kernel */
    int n_points;             /* 0 when read from the cache (only the crossover is stored) */
    bitnet_kchoice_point pts[BITNET_KCHOICE_MAX_POINTS];
    int64_t i2s_min_cols;     /* the crossover: I2_S for N >= this; 0 = the LUT kernel for every N */
    double seconds;           /* wall time of the measurement (0 when cached) */
} bitnet_kchoice;

/* The crossover of measured points (ascending n_cols): the threshold T (one of the measured N, or 0 =
 * never) with the least total slowdown Σ_p t_T(p) / min(lut_us, i2s_us)(p), where t_T(p) is the time of
 * the kernel T picks at N_p (I2_S when N_p >= T) and the largest N counts twice (it stands for every
 * larger N). A single noisy point thus moves the choice only when it matters more than the others
 * together; on a tie, 0 (never) and then the smaller T win. Points with a time <= 0 are
 * ignored; 0 when none is left. */
int64_t bitnet_kchoice_crossover(const bitnet_kchoice_point *pts, int n_points);

/* Measure the two kernels on `weights` (n_weights >= 1 tensors transformed by
 * bitnet_lut_transform_tensor to the same TL1/TL2 shape, tiles and int8 path (bitnet_lut_has_int8), e.g. every
 * layer's copy of one projection) with the pool tp (its thread count is recorded), at N = 1, 2, 4, ...,
 * 128 columns of random activations: per N and kernel, 3 rounds alternating between the kernels, each
 * round's time the median of products that rotate over the weights (at least 2 ms per round, and 3
 * products for N = 4 and 8, one for N >= 16, one per weight for N <= 2, so that GEMV reads them from DRAM when they
 * exceed the caches); fills out including the crossover. The products run on private copies of the
 * tensors and their extras: nothing of the weights changes, so contexts may decode meanwhile. With the environment variable BITNET_KERNEL_CHOICE_LOG=1 the times and the crossover are
 * printed on stderr. Errors: BITNET_ERR_INVALID_ARG (a weight without an int8 path or of another shape or path),
 * BITNET_ERR_NOMEM, BITNET_ERR_UNSUPPORTED when the host refuses a product (its output would be NaN). Takes
 * about 3 · 2 · Σ_N max(one round's products, 2 ms): ≈ 1 s per shape of a 3B model on one AVX2 core. */
bitnet_status bitnet_kchoice_measure(bitnet_tensor *const *weights, int n_weights, bitnet_threadpool *tp,
                                     bitnet_kchoice *out, bitnet_error *err);

/* The cache file: BITNET_KERNEL_CACHE when set (a path; "off" or "" = no cache), else
 * $XDG_CACHE_HOME/bitnet/kernel-choice.txt, else $HOME/.cache/bitnet/kernel-choice.txt. Writes into buf
 * (cap bytes) and returns it, or returns NULL when there is no cache. */
const char *bitnet_kchoice_cache_path(char *buf, size_t cap);

/* The key of a choice on this machine: CPU model name, the LUT kernel's name, the int8 kernel (the TL2 int8
 * kernel, or the I2_S kernel's ISA), M, K, tiles and threads, as one line of printable characters without
 * spaces (buf, cap bytes). */
const char *bitnet_kchoice_key(const bitnet_kchoice *c, const char *lut_kernel, char *buf, size_t cap);

/* Look up key in the cache file (the last line with that key wins; malformed lines are skipped).
 * true and *i2s_min_cols when found. A missing or unreadable file is "not found". */
bool bitnet_kchoice_cache_get(const char *path, const char *key, int64_t *i2s_min_cols);

/* Append "key i2s_min_cols" as one line (one write(2) with O_APPEND under an exclusive flock, so
 * concurrent writers do not interleave; preceded by a newline when the file does not end with one),
 * creating the directories and the file if needed. false when it cannot be written (the choice is then
 * measured again next time; nothing else changes): a write that fails or stops short (a full disk:
 * ENOSPC; RLIMIT_FSIZE: EFBIG) is cut off again (ftruncate to the old size) and a file this call
 * created is removed, so the cache is left as it was. */
bool bitnet_kchoice_cache_put(const char *path, const char *key, int64_t i2s_min_cols);

#ifdef __cplusplus
}
#endif

#endif
