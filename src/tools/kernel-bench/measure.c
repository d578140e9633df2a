/* measure.c — what bitnet-kernel-bench measures and how: the repetition timer, the streaming-read
 * bandwidth passes, packed weight sets and their cache-busting copies, product calls through the
 * matmul host (in one pool task or one pool run per call), the LUT-constructor share and the
 * measurement of one weight set (GEMV and batched products at every thread count). Contract and
 * units: measure.h. */
#include "tools/kernel-bench/measure.h"

#include "base/quants.h"
#include "kernels/i2s/i2s.h"
#include "kernels/lut/pack.h"
#include "tools/common/bench_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

bool kb_quiet = false;

void kb_progress(const char *fmt, ...) {
    if (kb_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bitnet-kernel-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

size_t kb_round64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

void *kb_alloc(size_t n) {
    return aligned_alloc(64, kb_round64(n ? n : 1));
}

const char *kb_type_tag(int type) {
    switch (type) {
    case BITNET_TYPE_TL1: return "tl1";
    case BITNET_TYPE_TL2: return "tl2";
    case BITNET_TYPE_I2_S: return "i2_s";
    default: return "?";
    }
}


bool kb_isa(const char *name) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!strcmp(name, "avx2")) return __builtin_cpu_supports("avx2");
    if (!strcmp(name, "avx512f")) return __builtin_cpu_supports("avx512f");
    if (!strcmp(name, "avx512bw")) return __builtin_cpu_supports("avx512bw");
    if (!strcmp(name, "avx512vnni")) return __builtin_cpu_supports("avx512vnni");
#endif
    return bitnet_cpu_supports(name);
}


int kb_native_type(void) {
#if defined(__aarch64__)
    return BITNET_TYPE_TL1;
#else
    return BITNET_TYPE_TL2;
#endif
}


/* ---- timing ---------------------------------------------------------------------------------- */

static int kb_cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double kb_median_sorted(const double *v, int64_t n) {
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The repetition logic shared by both ways of calling (kb_measure, kb_measure_in_task): a warm-up
 * repetition, then up to o->reps repetitions of >= min_time each (>= 1 call each), stopping after
 * max_time once KB_MIN_REPS are done. Every call is timed on its own, so a repetition yields its
 * median call (robust against the stalls a busy machine adds) and its mean (elapsed / calls). */
typedef struct kb_timer {
    const kb_opts *o;
    int r;                 /* -1 = warm-up */
    double start, rep_t0;
    int64_t n;             /* calls timed in the current repetition */
    int64_t n_calls;       /* calls made in the current repetition (n < n_calls only on out of memory) */
    double *calls;         /* their durations */
    int64_t cap;
    double med[1000], mean[1000];
    kb_stats s;
} kb_timer;

static void kb_timer_init(kb_timer *t, const kb_opts *o) {
    memset(t, 0, sizeof *t);
    t->o = o;
    t->r = -1;
    t->start = t->rep_t0 = bitnet_tool_now_s();
}

/* Before each call: closes a repetition that has run long enough; false when the measurement is over. */
static bool kb_timer_more(kb_timer *t) {
    const double now = bitnet_tool_now_s();
    if (t->n_calls == 0 || now - t->rep_t0 < t->o->min_time) return true;
    if (t->r >= 0 && t->n > 0) {
        qsort(t->calls, (size_t)t->n, sizeof *t->calls, kb_cmp_double);
        t->med[t->s.reps] = kb_median_sorted(t->calls, t->n);
        t->mean[t->s.reps] = (now - t->rep_t0) / (double)t->n_calls;
        t->s.reps++;
        t->s.calls += t->n_calls;
    }
    t->r++;
    t->n = t->n_calls = 0;
    t->rep_t0 = now;
    if (t->r >= t->o->reps) return false;
    if (t->s.reps >= KB_MIN_REPS && now - t->start > t->o->max_time) return false;
    return true;
}

static void kb_timer_add(kb_timer *t, double dt) {
    t->n_calls++;
    if (t->n == t->cap) {
        const int64_t cap = t->cap ? 2 * t->cap : 4096;
        double *p = (double *)realloc(t->calls, (size_t)cap * sizeof *p);
        if (!p) return; /* counted for the mean, not kept for the median */
        t->calls = p;
        t->cap = cap;
    }
    t->calls[t->n++] = dt;
}

static kb_stats kb_timer_finish(kb_timer *t) {
    free(t->calls);
    t->calls = NULL;
    kb_stats s = t->s;
    if (s.reps == 0) return s;
    double avg;
    bitnet_tool_mean_sd(t->med, s.reps, &avg, &s.sd);
    qsort(t->med, (size_t)s.reps, sizeof t->med[0], kb_cmp_double);
    qsort(t->mean, (size_t)s.reps, sizeof t->mean[0], kb_cmp_double);
    s.min = t->med[0];
    s.max = t->med[s.reps - 1];
    s.median = kb_median_sorted(t->med, s.reps);
    s.mean = kb_median_sorted(t->mean, s.reps);
    s.valid = true;
    return s;
}

/* Time call(ctx, i) (i = running call index) on the calling thread. */
kb_stats kb_measure(kb_call_fn call, void *ctx, const kb_opts *o) {
    kb_timer t;
    kb_timer_init(&t, o);
    int64_t idx = 0;
    while (kb_timer_more(&t)) {
        const double c0 = bitnet_tool_now_s();
        call(ctx, idx++);
        kb_timer_add(&t, bitnet_tool_now_s() - c0);
    }
    return kb_timer_finish(&t);
}


/* ---- streaming-read bandwidth ---------------------------------------------------------------- */

static volatile uint64_t kb_sink;

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t kb_sum_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, a0);
    uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
    for (; i < n; ++i) s += p[i];
    return s;
}
#endif

static uint64_t kb_sum_portable(const uint8_t *p, size_t n) {
    size_t i = 0;
#if defined(__aarch64__)
    uint64x2_t a0 = vdupq_n_u64(0), a1 = a0, a2 = a0, a3 = a0;
    for (; i + 64 <= n; i += 64) {
        a0 = vaddq_u64(a0, vld1q_u64((const uint64_t *)(p + i)));
        a1 = vaddq_u64(a1, vld1q_u64((const uint64_t *)(p + i + 16)));
        a2 = vaddq_u64(a2, vld1q_u64((const uint64_t *)(p + i + 32)));
        a3 = vaddq_u64(a3, vld1q_u64((const uint64_t *)(p + i + 48)));
    }
    a0 = vaddq_u64(vaddq_u64(a0, a1), vaddq_u64(a2, a3));
    uint64_t s = vgetq_lane_u64(a0, 0) + vgetq_lane_u64(a0, 1);
#else
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, 32);
        s0 += w[0], s1 += w[1], s2 += w[2], s3 += w[3];
    }
    uint64_t s = s0 + s1 + s2 + s3;
#endif
    for (; i < n; ++i) s += p[i];
    return s;
}

const char *kb_bw_method(void) {
#if defined(__x86_64__)
    if (kb_isa("avx2")) return "AVX2 256-bit loads";
    return "64-bit integer loads";
#elif defined(__aarch64__)
    return "NEON 128-bit loads";
#else
    return "64-bit integer loads";
#endif
}

static void kb_bw_task(void *arg, int ith, int nth) {
    kb_bw_ctx *c = (kb_bw_ctx *)arg;
    const int64_t lines = (int64_t)(c->bytes / 4096);
    int64_t b, e;
    bitnet_split_range(lines, ith, nth, &b, &e);
    const uint8_t *p = c->buf + (size_t)b * 4096;
    const size_t n = (size_t)(e - b) * 4096;
#if defined(__x86_64__)
    c->sums[ith] = kb_isa("avx2") ? kb_sum_avx2(p, n) : kb_sum_portable(p, n);
#else
    c->sums[ith] = kb_sum_portable(p, n);
#endif
}

void kb_bw_call(void *arg, int64_t i) {
    (void)i;
    kb_bw_run *r = (kb_bw_run *)arg;
    bitnet_threadpool_run(r->tp, kb_bw_task, r->c);
    kb_sink += r->c->sums[0];
}


/* ---- weights --------------------------------------------------------------------------------- */

/* The copies of the weight being measured live in one buffer reused by every weight set (one set
 * uses it at a time), so its pages are faulted in once per run, not once per candidate. */
static uint8_t *kb_arena = NULL;
static size_t kb_arena_size = 0;
static bool kb_arena_busy = false;

static uint8_t *kb_arena_get(size_t n) {
    if (kb_arena_busy) return NULL;
    if (n > kb_arena_size) {
        free(kb_arena);
        kb_arena_size = 0;
        kb_arena = (uint8_t *)kb_alloc(n);
        if (!kb_arena) return NULL;
        kb_arena_size = n;
    }
    kb_arena_busy = true;
    return kb_arena;
}

static void kb_arena_put(uint8_t *p) {
    if (p && p == kb_arena) kb_arena_busy = false;
}

void kb_arena_release(void) {
    free(kb_arena);
    kb_arena = NULL;
    kb_arena_size = 0;
    kb_arena_busy = false;
}

void kb_wset_free(kb_wset *w) {
    free(w->packed);
    kb_arena_put(w->copy_buf);
    free(w->copies);
    free(w->extras);
    memset(w, 0, sizeof *w);
}

/* Bytes of the weight streams (LAYOUTS.md §2-4): TL2 index + sign + two-weight part; else M*K/4. */
static size_t kb_read_bytes(int type, const bitnet_lut_shape *sh) {
    if (type == BITNET_TYPE_TL2)
        return (size_t)(sh->three_k * sh->M / 6 + sh->three_k * sh->M / 24 + sh->two_k * sh->M / 4);
    return (size_t)(sh->M * sh->K / 4);
}

/* Pack w8 [M*K] into `type` with `tiles`, transform (kernel choice), and make n_copies copies.
 * n_copies: the number of calls' rotation set (1 = no cache busting). */
bitnet_status kb_wset_make(kb_wset *ws, int type, bitnet_tiles tiles, const int8_t *w8, int64_t M, int64_t K,
                                  int n_copies, bool force_generic, bitnet_error *err) {
    memset(ws, 0, sizeof *ws);
    ws->type = type;
    ws->tiles = tiles;
    const float scale = 0.0123f;
    size_t nbytes = type == BITNET_TYPE_I2_S ? bitnet_i2s_nbytes(M, K)
                    : type == BITNET_TYPE_TL1 ? bitnet_tl1_nbytes(M, K)
                                              : bitnet_tl2_nbytes(M, K);
    ws->packed_bytes = nbytes;
    ws->packed = (uint8_t *)kb_alloc(nbytes);
    if (!ws->packed) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for %zu packed bytes", nbytes);
    memset(ws->packed, 0, kb_round64(nbytes));
    bitnet_status st;
    if (type == BITNET_TYPE_I2_S) st = bitnet_pack_i2s(w8, M, K, scale, ws->packed, err);
    else if (type == BITNET_TYPE_TL1) st = bitnet_pack_tl1(w8, M, K, tiles, scale, ws->packed, err);
    else st = bitnet_pack_tl2(w8, M, K, tiles, scale, ws->packed, err);
    if (st) {
        kb_wset_free(ws);
        return st;
    }
    bitnet_tensor *t = &ws->base;
    snprintf(t->name, sizeof t->name, "bench.%s.%lldx%lld", kb_type_tag(type), (long long)M, (long long)K);
    t->type = type;
    t->n_dims = 2;
    t->ne[0] = K, t->ne[1] = M, t->ne[2] = t->ne[3] = 1;
    t->data = ws->packed;
    t->nbytes = nbytes;
    st = bitnet_lut_transform_tensor(t, type == BITNET_TYPE_I2_S ? NULL : &tiles, type,
                                     type == BITNET_TYPE_I2_S ? NULL : &tiles, err);
    if (st) {
        kb_wset_free(ws);
        return st;
    }
    if (force_generic && type != BITNET_TYPE_I2_S && t->extra->impl.specialized) {
        for (size_t i = 0; i < bitnet_lut_n_isa_impls; ++i) {
            const bitnet_lut_isa_impl *c = &bitnet_lut_isa_impls[i];
            if (c->type == type && c->generic && c->ctor == t->extra->impl.ctor) {
                t->extra->impl.qgemm = c->generic;
                t->extra->impl.specialized = false;
                t->extra->impl.name = type == BITNET_TYPE_TL1 ? "bitnet_tl1_qgemm_generic (forced)"
                                                              : "bitnet_tl2_qgemm_generic (forced)";
                break;
            }
        }
    }
    ws->read_bytes = kb_read_bytes(type, &t->extra->shape);
    ws->n_copies = n_copies < 1 ? 1 : n_copies;
    ws->stride = kb_round64(nbytes);
    ws->copies = (bitnet_tensor *)calloc((size_t)ws->n_copies, sizeof *ws->copies);
    ws->extras = (bitnet_tensor_extra *)calloc((size_t)ws->n_copies, sizeof *ws->extras);
    if (ws->n_copies > 1) ws->copy_buf = kb_arena_get(ws->stride * (size_t)(ws->n_copies - 1));
    if (!ws->copies || !ws->extras || (ws->n_copies > 1 && !ws->copy_buf)) {
        const int n = ws->n_copies;
        kb_wset_free(ws);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for %d copies of %zu bytes", n, nbytes);
    }
    ws->copies[0] = *t;
    for (int i = 1; i < ws->n_copies; ++i) {
        uint8_t *dst = ws->copy_buf + (size_t)(i - 1) * ws->stride;
        memcpy(dst, ws->packed, nbytes);
        /* Copies 1.. only serve the timing (the check reads copy 0, and these kernels' time does not
         * depend on the weight values): make every 4 KiB page differ from the other copies' so a
         * hypervisor's same-page merging cannot fold the copies into one cached page (measured: no
         * difference on the VM this was written on, against random copies or identical ones). */
        for (size_t b = 0; b + 8 <= nbytes; b += 4096) {
            const uint64_t tag = 0x9e3779b97f4a7c15ULL * (uint64_t)i ^ (uint64_t)b;
            memcpy(dst + b, &tag, 8);
        }
        ws->extras[i] = *t->extra;
        ws->extras[i].qweights = dst;
        ws->extras[i].owned = NULL;
        ws->copies[i] = *t;
        ws->copies[i].data = dst;
        ws->copies[i].extra = &ws->extras[i];
    }
    kb_wset_set_int8_min_cols(ws, 0); /* a TL1/TL2 set times its LUT kernel; the int8 path is asked for apart */
    return BITNET_OK;
}

void kb_wset_set_int8_min_cols(kb_wset *w, int64_t n) {
    if (w->base.extra == NULL || w->base.extra->type == BITNET_TYPE_I2_S) return;
    w->base.extra->i2s_min_cols = n;
    for (int i = 1; i < w->n_copies && w->extras; ++i) w->extras[i].i2s_min_cols = n;
}


/* ---- products -------------------------------------------------------------------------------- */

struct kb_mm {
    kb_wset *w;
    int n_rot;            /* copies used: 1 (cached) or w->n_copies */
    int cur;
    bitnet_tensor x, y;
    void *ws;
    size_t wsize;
    bitnet_threadpool *tp;
};

static void kb_mm_task(void *arg, int ith, int nth) {
    kb_mm *c = (kb_mm *)arg;
    bitnet_mul_mat(&c->w->copies[c->cur], &c->x, &c->y, c->ws, c->wsize, ith, nth, c->tp);
}

static void kb_mm_call(void *arg, int64_t i) {
    kb_mm *c = (kb_mm *)arg;
    c->cur = (int)(i % c->n_rot);
    bitnet_threadpool_run(c->tp, kb_mm_task, c);
}

/* Calls back to back inside ONE pool task, separated by the pool's barrier, as a graph executor runs
 * consecutive products: thread 0 times each call from before a barrier to after the barrier that
 * follows the product (bitnet_mul_mat has none at its end). So a call is the product plus two
 * barrier crossings, without the pool's wake-up latency (a worker that slept between tasks; that
 * latency is measured on its own, kb_pool_overhead). mm == NULL runs empty calls (the barriers). */
typedef struct kb_loop {
    kb_mm *mm;
    bitnet_threadpool *tp;
    kb_timer *t;
    int go;        /* written by thread 0 before the first barrier of a call, read after it */
    int64_t idx;
} kb_loop;

static void kb_loop_task(void *arg, int ith, int nth) {
    kb_loop *L = (kb_loop *)arg;
    double c0 = 0.0;
    for (;;) {
        if (ith == 0) {
            L->go = kb_timer_more(L->t);
            if (L->mm) L->mm->cur = (int)(L->idx++ % L->mm->n_rot);
            c0 = bitnet_tool_now_s();
        }
        if (nth > 1) bitnet_threadpool_barrier(L->tp);
        if (!L->go) break;
        if (L->mm) bitnet_mul_mat(&L->mm->w->copies[L->mm->cur], &L->mm->x, &L->mm->y, L->mm->ws, L->mm->wsize, ith, nth, L->tp);
        if (nth > 1) bitnet_threadpool_barrier(L->tp);
        if (ith == 0) kb_timer_add(L->t, bitnet_tool_now_s() - c0);
    }
}

kb_stats kb_measure_in_task(kb_mm *mm, bitnet_threadpool *tp, const kb_opts *o) {
    kb_timer t;
    kb_timer_init(&t, o);
    kb_loop L = {mm, tp, &t, 1, 0};
    bitnet_threadpool_run(tp, kb_loop_task, &L);
    return kb_timer_finish(&t);
}

/* A product call the way o asks: in one task (default) or one bitnet_threadpool_run per call. */
static kb_stats kb_measure_mm(kb_mm *mm, const kb_opts *o) {
    return o->pool_run ? kb_measure(kb_mm_call, mm, o) : kb_measure_in_task(mm, mm->tp, o);
}

static void kb_empty_task(void *arg, int ith, int nth) {
    (void)arg, (void)ith, (void)nth;
}

void kb_empty_call(void *arg, int64_t i) {
    (void)i;
    bitnet_threadpool_run((bitnet_threadpool *)arg, kb_empty_task, NULL);
}

static void kb_f32_tensor(bitnet_tensor *t, const char *name, float *data, int64_t cols, int64_t rows) {
    *t = bitnet_act_tensor(data, cols, rows);
    snprintf(t->name, sizeof t->name, "%s", name);
}

/* Set up c for N columns of x (x: [N][K], y: [N][M] owned by the caller). */
static bitnet_status kb_mm_setup(kb_mm *c, kb_wset *w, float *x, float *y, int64_t N, bitnet_threadpool *tp,
                                 bitnet_error *err) {
    memset(c, 0, sizeof *c);
    c->w = w;
    c->n_rot = 1;
    c->tp = tp;
    const int64_t K = w->base.ne[0], M = w->base.ne[1];
    kb_f32_tensor(&c->x, "x", x, K, N);
    kb_f32_tensor(&c->y, "y", y, M, N);
    c->wsize = bitnet_mul_mat_get_wsize(&w->base, &c->x, &c->y);
    if (c->wsize == 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s M=%lld K=%lld N=%lld: the host refuses the product",
                           kb_type_tag(w->type), (long long)M, (long long)K, (long long)N);
    c->ws = kb_alloc(c->wsize);
    if (!c->ws) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a %zu-byte workspace", c->wsize);
    return BITNET_OK;
}

/* LUT constructors (or, for I2_S, the activation quantizer) of N columns on the calling thread: what
 * thread 0 of bitnet_mul_mat does before the barrier. */
typedef struct kb_ctor {
    const kb_mm *mm;
    int64_t N;
} kb_ctor;

static void kb_ctor_call(void *arg, int64_t i) {
    (void)i;
    kb_ctor *c = (kb_ctor *)arg;
    const bitnet_tensor_extra *ex = c->mm->w->base.extra;
    const int64_t K = c->mm->x.ne[0];
    const size_t stride = kb_round64(ex->type == BITNET_TYPE_I2_S ? (size_t)K : bitnet_qlut_bytes(ex->type, &ex->shape));
    float s;
    for (int64_t n = 0; n < c->N; ++n) {
        const float *x = (const float *)c->mm->x.data + n * K;
        int8_t *col = (int8_t *)c->mm->ws + (size_t)n * stride;
        if (ex->type == BITNET_TYPE_I2_S) {
            s = bitnet_quantize_act(x, K, col);
            kb_sink += (uint64_t)bitnet_i2s_qsum(col, K);
        } else {
            ex->impl.ctor(x, K, ex->shape.three_k, col, &s);
        }
        kb_sink += (uint64_t)(s > 0.0f);
    }
}


double kb_gbps(size_t bytes, const kb_stats *s) {
    return s->valid && s->median > 0 ? (double)bytes / s->median * 1e-9 : NAN;
}

double kb_share(const kb_stats *ctor, const kb_stats *call) {
    return ctor->valid && call->valid && call->median > 0 ? ctor->median / call->median : NAN;
}

double kb_bw_for(const kb_bw *bw, int n_bw, int threads) {
    for (int i = 0; i < n_bw; ++i)
        if (bw[i].threads == threads) return bw[i].gbps_median;
    return NAN;
}


/* ---- measuring one weight set ---------------------------------------------------------------- */

int kb_copies_for(const kb_env *e, size_t packed) {
    if (!e->o->cache_bust) return 1;
    const double want = e->o->bust_factor * (double)e->llc;
    const double stride = (double)kb_round64(packed);
    double n = ceil(want / stride);
    if (n < 1) n = 1;
    if (n > 1e6) n = 1e6;
    return (int)n;
}

/* Measure GEMV and batched products of one weight set; fills r. x: [max N][K] floats, y: [max N][M]. */
bitnet_status kb_measure_wset(const kb_env *e, kb_wset *w, float *x, float *y, kb_result *r,
                                     bitnet_error *err) {
    const kb_opts *o = e->o;
    memset(r, 0, sizeof *r);
    r->read_bytes = w->read_bytes;
    r->packed_bytes = w->packed_bytes;
    r->n_copies = w->n_copies;
    r->kernel = w->base.extra->impl.name;
    r->specialized = w->base.extra->impl.specialized;
    const bool fits = w->packed_bytes * 2 <= (size_t)e->llc;

    kb_mm mm;
    bitnet_status st = kb_mm_setup(&mm, w, x, y, 1, e->pools[0], err);
    if (st) return st;
    kb_ctor ctor = {&mm, 1};
    if (o->lut_share) r->ctor1 = kb_measure(kb_ctor_call, &ctor, o);
    for (int ti = 0; ti < o->n_threads; ++ti) {
        mm.tp = e->pools[ti];
        r->gemv[ti].threads = o->threads[ti];
        mm.n_rot = w->n_copies;
        r->gemv[ti].dram = kb_measure_mm(&mm, o);
        if (o->in_cache && fits) {
            mm.n_rot = 1;
            r->gemv[ti].cache = kb_measure_mm(&mm, o);
        }
    }
    free(mm.ws);

    for (int bi = 0; bi < o->n_batch; ++bi) {
        const int64_t N = o->batch[bi];
        st = kb_mm_setup(&mm, w, x, y, N, e->pools[0], err);
        if (st) return st;
        kb_ctor cn = {&mm, N};
        if (o->lut_share) r->ctorN[bi] = kb_measure(kb_ctor_call, &cn, o);
        for (int ti = 0; ti < o->n_threads; ++ti) {
            mm.tp = e->pools[ti];
            mm.n_rot = w->n_copies;
            kb_batch *b = &r->batch[r->n_batch++];
            b->threads = o->threads[ti];
            b->N = N;
            b->t = kb_measure_mm(&mm, o);
        }
        free(mm.ws);
    }
    return BITNET_OK;
}

/* y = w · x for N columns with the pool's threads (one call, copy 0). */
bitnet_status kb_product(const kb_env *e, kb_wset *w, float *x, float *y, int64_t N, bitnet_error *err) {
    kb_mm mm;
    bitnet_status st = kb_mm_setup(&mm, w, x, y, N, e->pools[e->o->n_threads - 1], err);
    if (st) return st;
    kb_mm_call(&mm, 0);
    free(mm.ws);
    return BITNET_OK;
}

/* The reference output by bitnet_ref_gemm (exact integers) and LAYOUTS.md §1's two float operations. */
void kb_ref_product(const kb_wset *w, const float *x, float *y, int64_t N) {
    const bitnet_tensor_extra *ex = w->base.extra;
    const int64_t K = ex->shape.K, M = ex->shape.M;
    int8_t *q = (int8_t *)calloc((size_t)(N * K), 1);
    int32_t *acc = (int32_t *)malloc((size_t)(N * M) * sizeof(int32_t));
    float *s = (float *)malloc((size_t)N * sizeof(float));
    if (!q || !acc || !s) {
        for (int64_t i = 0; i < N * M; ++i) y[i] = NAN;
    } else {
        for (int64_t n = 0; n < N; ++n) s[n] = bitnet_quantize_act(x + n * K, K, q + n * K);
        bitnet_ref_gemm(ex->type, ex->qweights, &ex->shape, q, N, acc);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t m = 0; m < M; ++m) {
                float v = (float)acc[n * M + m];
                v = v / s[n];
                v = v * ex->scale;
                y[n * M + m] = v;
            }
    }
    free(q);
    free(acc);
    free(s);
}

