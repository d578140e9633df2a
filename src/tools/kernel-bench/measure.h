/* measure.h — the measurement half of bitnet-kernel-bench: options it runs with, the timer's
 * statistics, the streaming-read bandwidth passes, packed weight sets with their cache-busting copies,
 * and the measurement of one weight set through the matmul host (bitnet_mul_mat on a thread pool).
 *
 * Units: kb_stats times are seconds per call; 1 GB = 1e9 bytes; GB/s = bytes / median call.
 * Symbols here are internal to the bitnet-kernel-bench executable (prefix kb_), not a library API. */
#ifndef BITNET_KERNEL_BENCH_MEASURE_H
#define BITNET_KERNEL_BENCH_MEASURE_H

#include "base/common.h"
#include "kernels/lut/lut.h"
#include "runtime/lut_host.h"
#include "runtime/threadpool.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KB_MAX_LIST 32
#define KB_MAX_JOBS 4096
#define KB_MAX_TILES 256
#define KB_MAX_SHAPES 64
#define KB_MIN_REPS 3

typedef struct kb_shape {
    int64_t M, K;
} kb_shape;

/* The command line (main.c fills it; defaults there). */
typedef struct kb_opts {
    int targets[2];
    int n_targets;
    kb_shape shapes[KB_MAX_SHAPES];
    int n_shapes;
    kb_shape heads[KB_MAX_SHAPES]; /* --head VxD: M = V rows (vocabulary), K = D (n_embd) */
    int n_heads;
    bitnet_tiles tiles[KB_MAX_TILES];
    int n_tiles;
    const char *config;   /* registry mode filter */
    const char *table;    /* registry mode filter */
    int threads[KB_MAX_LIST];
    int n_threads;
    int64_t batch[KB_MAX_LIST];
    int n_batch;
    int reps;
    double min_time, max_time, budget;
    int64_t bw_mib;       /* 0: no bandwidth measurement */
    int64_t llc_mib;      /* 0: detect */
    double bust_factor;
    bool cache_bust, in_cache, i2s, lut_share, force_generic, list_only, pool_run;
    uint64_t seed;
    const char *json;
} kb_opts;

/* ---- small utilities ------------------------------------------------------------------------- */

extern bool kb_quiet; /* -q: no progress lines */

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void kb_progress(const char *fmt, ...); /* "bitnet-kernel-bench: <message>" on stderr unless kb_quiet */

size_t kb_round64(size_t n);            /* n rounded up to a multiple of 64 */
void *kb_alloc(size_t n);               /* 64-byte aligned, at least 64 bytes; free() it */
const char *kb_type_tag(int type);      /* "tl1", "tl2", "i2_s" or "?" */
bool kb_isa(const char *name);          /* CPU feature (avx2, avx512f, ... or bitnet_cpu_supports) */
int kb_native_type(void);               /* TL1 on AArch64, else TL2 */

/* ---- timing ---------------------------------------------------------------------------------- */

typedef struct kb_stats {
    double median, min, max, sd; /* seconds per call: over repetitions, of each repetition's median call */
    double mean;                 /* median over repetitions of (repetition time / calls): throughput */
    int reps;
    int64_t calls;
    bool valid;
} kb_stats;

typedef void (*kb_call_fn)(void *ctx, int64_t i);

/* Time call(ctx, i) (i = running call index) on the calling thread: a warm-up repetition, then up to
 * o->reps repetitions of >= o->min_time each, stopping after o->max_time once KB_MIN_REPS are done. */
kb_stats kb_measure(kb_call_fn call, void *ctx, const kb_opts *o);

/* ---- streaming-read bandwidth ---------------------------------------------------------------- */

typedef struct kb_bw_ctx {
    const uint8_t *buf;
    size_t bytes;
    uint64_t sums[1024];
} kb_bw_ctx;

typedef struct kb_bw_run {
    kb_bw_ctx *c;
    bitnet_threadpool *tp;
} kb_bw_run;

/* One pass (arg: kb_bw_run): every pool thread sums its contiguous share of the buffer. */
void kb_bw_call(void *arg, int64_t i);
/* The loads the pass uses on this machine ("AVX2 256-bit loads", ...). */
const char *kb_bw_method(void);

/* ---- weights and products -------------------------------------------------------------------- */

/* One packed ternary weight (a layout with its tiles) and the copies the calls rotate among. */
typedef struct kb_wset {
    int type;
    bitnet_tiles tiles;
    bitnet_tensor base;          /* transformed (extra aliases `packed`) */
    uint8_t *packed;
    size_t packed_bytes;         /* bitnet_*_nbytes */
    size_t read_bytes;           /* bytes of the weight streams a product reads */
    int n_copies;                /* >= 1; copies[0] is the base */
    uint8_t *copy_buf;           /* copies 1.. at copy_buf + (i-1)*stride (the arena) */
    size_t stride;
    bitnet_tensor *copies;
    bitnet_tensor_extra *extras;
} kb_wset;

/* Pack w8 [M*K] into `type` with `tiles`, transform (kernel choice), and make n_copies copies
 * (the calls' rotation set; 1 = no cache busting). force_generic: the generic SIMD kernel. */
bitnet_status kb_wset_make(kb_wset *ws, int type, bitnet_tiles tiles, const int8_t *w8, int64_t M, int64_t K,
                           int n_copies, bool force_generic, bitnet_error *err);
/* Frees the packed weights and transformed copies of one weight set (a zeroed set is a no-op). */
void kb_wset_free(kb_wset *w);

/* Set the int8 batch threshold (bitnet_tensor_extra.i2s_min_cols) of every copy: 0 = the LUT kernel for every
 * N (what kb_wset_make leaves), 1 = the weight's int8 path (int8_on_tl2 or I2_S bytes) for every N. */
void kb_wset_set_int8_min_cols(kb_wset *w, int64_t n);
/* Frees the buffer every weight set's copies share. */
void kb_arena_release(void);

typedef struct kb_mm kb_mm; /* one product's tensors, workspace and pool */

/* Product calls back to back inside one pool task (mm NULL: empty calls, i.e. two barriers). */
kb_stats kb_measure_in_task(kb_mm *mm, bitnet_threadpool *tp, const kb_opts *o);
/* One empty bitnet_threadpool_run (arg: the pool). */
void kb_empty_call(void *arg, int64_t i);

/* ---- results of one weight set --------------------------------------------------------------- */

typedef struct kb_gemv {
    int threads;
    kb_stats dram, cache;
} kb_gemv;

typedef struct kb_batch {
    int threads;
    int64_t N;
    kb_stats t;
} kb_batch;

typedef struct kb_result {
    kb_gemv gemv[KB_MAX_LIST];
    kb_batch batch[KB_MAX_LIST * KB_MAX_LIST];
    int n_batch;
    kb_stats ctor1;                 /* constructor, 1 column */
    kb_stats ctorN[KB_MAX_LIST];    /* constructor, batch[i] columns */
    size_t read_bytes, packed_bytes;
    int n_copies;
    const char *kernel;
    bool specialized;
} kb_result;

typedef struct kb_bw {
    int threads;
    kb_stats s, s_end;  /* seconds per pass, before and after the kernels */
    double gbps_start, gbps_end, gbps_max;
    double gbps_median; /* the roofline: the larger of the start and end medians */
} kb_bw;

/* bytes / median call in GB/s; NAN when s is not valid. */
double kb_gbps(size_t bytes, const kb_stats *s);
/* The roofline GB/s of `threads` threads; NAN when not measured. */
double kb_bw_for(const kb_bw *bw, int n_bw, int threads);
/* ctor median / call median (the LUT-constructor share); NAN when either is missing. */
double kb_share(const kb_stats *ctor, const kb_stats *call);

/* What every weight-set measurement shares: the options, one pool per o->threads[i], the LLC bytes. */
typedef struct kb_env {
    const kb_opts *o;
    bitnet_threadpool **pools; /* one per o->threads[i] */
    int64_t llc;
} kb_env;

/* Copies of a `packed`-byte weight that together are >= bust_factor x LLC (1 without cache busting). */
int kb_copies_for(const kb_env *e, size_t packed);
/* Measure GEMV and batched products of one weight set; fills r. x: [max N][K] floats, y: [max N][M]. */
bitnet_status kb_measure_wset(const kb_env *e, kb_wset *w, float *x, float *y, kb_result *r, bitnet_error *err);
/* y = w · x for N columns with the largest pool (one call, copy 0). */
bitnet_status kb_product(const kb_env *e, kb_wset *w, float *x, float *y, int64_t N, bitnet_error *err);
/* The reference output by bitnet_ref_gemm (exact integers) and LAYOUTS.md §1's two float operations. */
void kb_ref_product(const kb_wset *w, const float *x, float *y, int64_t N);

#endif
