/* lut_host.c — the matmul host around the LUT kernels (design.md §3; contract in lut_host.h):
 * which products the ternary path takes, the workspace size, the table of per-tensor extras holding
 * repacked weights, and the threaded product dst = src0 · src1.
 *
 * Product (docs/LAYOUTS.md §1): every path computes the exact integer acc[n][m] = Σ_k w[m][k]·q[n][k]
 * with the activation quantization of LAYOUTS §1 and then y[n][m] = (float)acc / s[n] * scale
 * (two float32 operations in that order), so the I2_S, TL1 and TL2 paths give identical floats for
 * the same weights, and every thread count gives identical bytes (each output is computed by one
 * thread with the same operations).
 *
 * Workspace (one buffer, 64-byte aligned, written before the barrier (each column by one thread), read by all):
 *   [0, N·S)            column n at n·S: I2_S → K int8 activations q; TL1/TL2 → the qlut (§5)
 *                       S = round64(P), P = K (I2_S) or bitnet_qlut_bytes(type, shape)
 *   [off_s, off_s + R)  N float column scales s[n] (LAYOUTS §1), off_s = N·S, R = round64(4·N)
 *   [off_q, off_q + R)  I2_S only: N int32 column sums Σ_k q[n][k] (saves the AVX2 kernel a pass),
 *                       off_q = off_s + R
 * The per-tile int32 accumulators live on each thread's stack (BITNET_HOST_ACC_CAP entries), not in
 * the workspace. See bitnet_host_ws_layout for the proof that the size covers every byte written. */
#include "runtime/lut_host.h"

#include "base/mem.h"
#include "base/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/i2s/i2s.h"
#include "kernels/lut/pack.h"
#include "kernels/lut/tl2_i8.h"
#include "base/quants.h"

/* int32 accumulators per thread of the LUT and I2_S kernels (on the stack, 32 KiB; 2 KiB in the bare-metal build, whose task stacks
 * are small and which takes one column per pass anyway): one call covers BM rows × floor(cap/BM)
 * columns. Tiles with BM above the cap are refused by bitnet_lut_transform_tensor. */
#ifdef BITNET_BARE_METAL
#define BITNET_HOST_ACC_CAP 512
#else
#define BITNET_HOST_ACC_CAP 8192
#endif
/* Accumulators per call of the int8 kernel on TL2 bytes (bitnet_tl2_i8_gemm, x86-64 hosted builds only): that
 * kernel decodes each micro tile once per call, so a call takes more columns than the LUT kernel's to share
 * the decode (128 KiB on the stack of every product on those builds — the pool's threads have the default
 * 8 MiB stacks of glibc —: 128 columns of a 256-row tile). Elsewhere the LUT kernels' cap. */
#if defined(__x86_64__) && !defined(BITNET_BARE_METAL)
#define BITNET_HOST_I8_ACC_CAP 32768
#else
#define BITNET_HOST_I8_ACC_CAP BITNET_HOST_ACC_CAP
#endif
/* Rows per work unit of the I2_S path. */
#define BITNET_HOST_I2S_ROWS 32

static size_t bitnet_round64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

/* ---- type facts ------------------------------------------------------------------------------- */

int bitnet_get_type_bits(int type) {
    switch (type) {
    case BITNET_TYPE_TL1:
    case BITNET_TYPE_TL2:
    case BITNET_TYPE_I2_S: return 2;
    case BITNET_TYPE_Q4_0: return 4;
    default: return 0;
    }
}

static bool bitnet_host_is_lut_type(int type) {
    return type == BITNET_TYPE_I2_S || type == BITNET_TYPE_TL1 || type == BITNET_TYPE_TL2;
}

/* Dimensions 2 and 3 unused (1, or 0 past n_dims). */
static bool bitnet_host_is_2d(const bitnet_tensor *t) {
    for (int i = 2; i < 4; ++i)
        if (!(t->ne[i] == 1 || (i >= t->n_dims && t->ne[i] == 0))) return false;
    return t->n_dims >= 1 && t->n_dims <= 4;
}

/* Byte stride between rows of an F32 matrix with `cols` columns: nb[1] when set, else dense. */
static size_t bitnet_host_row_bytes(const bitnet_tensor *t, int64_t cols) {
    return t->nb[1] != 0 ? t->nb[1] : (size_t)cols * sizeof(float);
}

/* F32 matrix [rows][cols] with float elements (nb[0] unset or 4) and rows at least cols floats apart
 * (nb[1] unset or a multiple of 4 that is ≥ 4·cols). */
static bool bitnet_host_f32_rows_ok(const bitnet_tensor *t, int64_t cols) {
    if (t->nb[0] != 0 && t->nb[0] != sizeof(float)) return false;
    if (t->nb[1] != 0 && (t->nb[1] % sizeof(float) != 0 || t->nb[1] < (size_t)cols * sizeof(float))) return false;
    return true;
}

bool bitnet_can_mul_mat(const bitnet_tensor *src0, const bitnet_tensor *src1, const bitnet_tensor *dst) {
    if (src0 == NULL || src1 == NULL || dst == NULL) return false;
    if (!bitnet_host_is_lut_type(src0->type)) return false;
    if (src1->type != BITNET_TYPE_F32 || dst->type != BITNET_TYPE_F32) return false;
    if (!bitnet_host_is_2d(src0) || !bitnet_host_is_2d(src1) || !bitnet_host_is_2d(dst)) return false;
    const int64_t K = src0->ne[0], M = src0->ne[1], N = src1->ne[1];
    if (K <= 0 || M <= 0 || N <= 0) return false;
    if (src1->ne[0] != K || dst->ne[0] != M || dst->ne[1] != N) return false;
    if (!bitnet_host_f32_rows_ok(src1, K) || !bitnet_host_f32_rows_ok(dst, M)) return false;
    if (src0->extra != NULL && (src0->extra->shape.M != M || src0->extra->shape.K != K)) return false;
    return true;
}

/* ---- workspace -------------------------------------------------------------------------------- */

typedef struct bitnet_host_ws {
    int type;            /* layout the product runs on (the extra's, else src0's type) */
    int64_t K, M, N;
    size_t col_bytes;    /* P: bytes column n writes at n·col_stride */
    size_t col_stride;   /* S = round64(P) */
    size_t off_scales;   /* N·S */
    size_t off_qsum;     /* I2_S: off_scales + round64(4N); else == total */
    size_t total;        /* multiple of 64 */
} bitnet_host_ws;

/* The workspace layout of one product; false when the product is not computable or the size does
 * not fit in size_t.
 *
 * Proof that `total` is ≥ one past the highest byte bitnet_mul_mat writes:
 *  - column n (0 ≤ n < N) writes bytes [n·S, n·S + P) with P ≤ S (S = round64(P)):
 *    I2_S: bitnet_quantize_act writes exactly K int8 = P;
 *    TL1/TL2: the constructor writes bitnet_qlut_bytes(type, shape) = P bytes (lut.h contract).
 *      Without an extra the TL2 split is unknown and P = 16·K is used, an upper bound of every split:
 *      32·(three_k/3) + 32·(two_k/2) ≤ (32/3)·three_k + 16·two_k ≤ 16·(three_k + two_k) = 16·K.
 *    Highest byte: (N−1)·S + P − 1 ≤ N·S − 1 < off_scales.
 *  - scales: 4 bytes at off_scales + 4n, highest off_scales + 4N − 1 < off_scales + round64(4N).
 *  - I2_S column sums: the same at off_qsum = off_scales + round64(4N), highest < off_qsum + round64(4N).
 *  - total = off_scales + round64(4N) (+ round64(4N) for I2_S): a sum of multiples of 64, so it is
 *    itself a multiple of 64, and it is above every byte listed. Nothing else is written in wdata
 *    (accumulators are on the stack, outputs go to dst). Tested with canary bytes and AddressSanitizer. */
static bool bitnet_host_ws_layout_as(const bitnet_tensor *src0, const bitnet_tensor *src1, const bitnet_tensor *dst,
                                     int type, bitnet_host_ws *L) {
    if (!bitnet_can_mul_mat(src0, src1, dst)) return false;
    memset(L, 0, sizeof(*L));
    L->K = src0->ne[0];
    L->M = src0->ne[1];
    L->N = src1->ne[1];
    const bitnet_tensor_extra *ex = src0->extra;
    L->type = type;
    const size_t K = (size_t)L->K, N = (size_t)L->N;
    if (K > SIZE_MAX / 32) return false;

    if (L->type == BITNET_TYPE_I2_S) {
        L->col_bytes = K;
    } else if (L->type == BITNET_TYPE_TL1 || L->type == BITNET_TYPE_TL2) {
        if (ex != NULL && ex->type == L->type) {
            L->col_bytes = bitnet_qlut_bytes(L->type, &ex->shape);
        } else {
            /* TL1: 16·K for any tiles; TL2: the all-pairs split (three_k = 0) is the upper bound */
            bitnet_lut_shape sh;
            memset(&sh, 0, sizeof(sh));
            sh.M = L->M;
            sh.K = L->K;
            sh.three_k = 0;
            sh.two_k = L->K;
            L->col_bytes = bitnet_qlut_bytes(BITNET_TYPE_TL1, &sh);
        }
    } else {
        return false;
    }
    if (L->col_bytes == 0 || L->col_bytes > SIZE_MAX - 64) return false;
    L->col_stride = bitnet_round64(L->col_bytes);
    if (N > (SIZE_MAX / 4 - 64) || L->col_stride > (SIZE_MAX / 2) / N) return false;
    const size_t r4 = bitnet_round64(N * 4);
    L->off_scales = N * L->col_stride;
    if (L->off_scales > SIZE_MAX / 2 - 2 * r4) return false;
    L->off_qsum = L->off_scales + r4;
    L->total = L->off_qsum + (L->type == BITNET_TYPE_I2_S ? r4 : 0);
    return true;
}

/* The layout the product with src1's column count runs on: the I2_S layout when the weight's I2_S
 * int8 path runs (bitnet_lut_uses_int8: the same int8 columns, scales and sums), else the extra's layout (src0's type without an extra). */
static bool bitnet_host_ws_layout(const bitnet_tensor *src0, const bitnet_tensor *src1, const bitnet_tensor *dst,
                                  bitnet_host_ws *L) {
    if (src0 == NULL || src1 == NULL) return false;
    const bitnet_tensor_extra *ex = src0->extra;
    const int type = ex == NULL ? src0->type : bitnet_lut_uses_int8(ex, src1->ne[1]) ? BITNET_TYPE_I2_S : ex->type;
    return bitnet_host_ws_layout_as(src0, src1, dst, type, L);
}

/* The larger of the LUT and the I2_S layouts when the weight has an int8 path (each is non-decreasing
 * in N, so the maximum is too), so one workspace serves both paths whatever the threshold. */
size_t bitnet_mul_mat_get_wsize(const bitnet_tensor *src0, const bitnet_tensor *src1, const bitnet_tensor *dst) {
    bitnet_host_ws L;
    if (src0 == NULL) return 0;
    const bitnet_tensor_extra *ex = src0->extra;
    if (!bitnet_host_ws_layout_as(src0, src1, dst, ex != NULL ? ex->type : src0->type, &L)) return 0;
    size_t total = L.total;
    if (bitnet_lut_has_int8(ex)) {
        bitnet_host_ws L2;
        if (!bitnet_host_ws_layout_as(src0, src1, dst, BITNET_TYPE_I2_S, &L2)) return 0;
        if (L2.total > total) total = L2.total;
    }
    return total;
}

/* ---- extras table ----------------------------------------------------------------------------- */

/* The extras table and the threshold below are process-wide, guarded by one mutex (one thread in the
 * bare-metal build: no lock). The table and the extras come from base/mem.h: from the allocator in use on
 * the thread that made the table (the heap, or an arena: its `owner`). While the table holds extras, a
 * transform under another allocator is refused (its extra could not be freed with the others), and
 * bitnet_lut_free releases everything under the owner, whatever allocator the freeing thread uses. */
#ifdef BITNET_BARE_METAL
#define bitnet_host_lock() ((void)0)
#define bitnet_host_unlock() ((void)0)
#else
#include <pthread.h>
static pthread_mutex_t bitnet_host_mutex = PTHREAD_MUTEX_INITIALIZER;
#define bitnet_host_lock() pthread_mutex_lock(&bitnet_host_mutex)
#define bitnet_host_unlock() pthread_mutex_unlock(&bitnet_host_mutex)
#endif
static bool bitnet_host_initialized = false;
static bitnet_arena *bitnet_host_owner = NULL; /* the arena the table and extras come from; NULL: the heap */
static bitnet_tensor_extra **bitnet_host_extras = NULL;
static size_t bitnet_host_n_extras = 0, bitnet_host_cap_extras = 0;

/* ---- batch path threshold --------------------------------------------------------------------- */

/* -1: not read yet (the first transform reads BITNET_LUT_I2S_MIN_COLS); guarded by bitnet_host_mutex. */
static int64_t bitnet_host_i2s_min_cols = -1;
/* the threshold was given (environment or bitnet_lut_set_i2s_min_cols): no measured choice replaces it */
static bool bitnet_host_i2s_fixed = false;

/* Caller holds bitnet_host_mutex. */
static int64_t bitnet_host_i2s_min_cols_locked(void) {
    if (bitnet_host_i2s_min_cols < 0) {
        int64_t v = strcmp(bitnet_i2s_isa(), "avx512") == 0 ? BITNET_LUT_I2S_MIN_COLS_VNNI : 0;
        const char *env = getenv("BITNET_LUT_I2S_MIN_COLS");
        if (env != NULL && *env != '\0') {
            char *end = NULL;
            const long long n = strtoll(env, &end, 10);
            if (end != NULL && *end == '\0' && n >= 0) {
                v = (int64_t)n;
                bitnet_host_i2s_fixed = true;
            }
        }
        bitnet_host_i2s_min_cols = v;
    }
    return bitnet_host_i2s_min_cols;
}

/* The threshold the next transform copies into its extra (lut_host.h). */
int64_t bitnet_lut_i2s_min_cols(void) {
    bitnet_host_lock();
    const int64_t v = bitnet_host_i2s_min_cols_locked();
    bitnet_host_unlock();
    return v;
}

/* n >= 0: that threshold (0 = never); n < 0: back to the default / environment value. */
void bitnet_lut_set_i2s_min_cols(int64_t n) {
    bitnet_host_lock();
    bitnet_host_i2s_min_cols = -1;
    bitnet_host_i2s_fixed = false;
    if (n >= 0) {
        bitnet_host_i2s_min_cols = n;
        bitnet_host_i2s_fixed = true;
    }
    bitnet_host_unlock();
}

bool bitnet_lut_i2s_min_cols_fixed(void) {
    bitnet_host_lock();
    (void)bitnet_host_i2s_min_cols_locked();
    const bool f = bitnet_host_i2s_fixed;
    bitnet_host_unlock();
    return f;
}

bool bitnet_lut_has_int8(const bitnet_tensor_extra *ex) {
    return ex != NULL && ex->type != BITNET_TYPE_I2_S && (ex->i2s_codes != NULL || ex->int8_on_tl2);
}

bool bitnet_lut_uses_int8(const bitnet_tensor_extra *ex, int64_t n_cols) {
    return bitnet_lut_has_int8(ex) && ex->i2s_min_cols > 0 && n_cols >= ex->i2s_min_cols;
}

static void bitnet_host_free_locked(void);

/* Caller holds the mutex. An empty table made under another allocator is made again under this one. */
static void bitnet_host_init_locked(void) {
    if (bitnet_host_initialized && bitnet_host_n_extras == 0 && bitnet_host_owner != bitnet_arena_current())
        bitnet_host_free_locked();
    if (bitnet_host_initialized) return;
    bitnet_host_owner = bitnet_arena_current();
    const size_t cap = 64;
    bitnet_host_extras = (bitnet_tensor_extra **)bitnet_calloc(cap, sizeof(*bitnet_host_extras));
    if (bitnet_host_extras == NULL) return; /* stays uninitialized; transform reports NOMEM */
    bitnet_host_cap_extras = cap;
    bitnet_host_n_extras = 0;
    bitnet_host_initialized = true;
}

/* Allocate the extras table (64 entries, doubled when full). Idempotent and thread-safe. */
void bitnet_lut_init(void) {
    bitnet_host_lock();
    bitnet_host_init_locked();
    bitnet_host_unlock();
}

static void bitnet_host_extra_release(bitnet_tensor_extra *ex) {
    if (ex == NULL) return;
    bitnet_free(ex->owned);
    bitnet_free(ex);
}

/* Release every extra and its repacked buffer, and the table. Tensors that still point at an extra
 * must not be used for a product afterwards (their `extra` pointers dangle; clear them or transform
 * again). Safe to call twice or without bitnet_lut_init. */
void bitnet_lut_free(void) {
    bitnet_host_lock();
    bitnet_host_free_locked();
    bitnet_host_unlock();
}

/* Caller holds the mutex: every extra and the table released under their owner's allocator. */
static void bitnet_host_free_locked(void) {
    bitnet_arena *prev = bitnet_arena_use(bitnet_host_owner);
    for (size_t i = 0; i < bitnet_host_n_extras; ++i) bitnet_host_extra_release(bitnet_host_extras[i]);
    bitnet_free(bitnet_host_extras);
    bitnet_arena_use(prev);
    bitnet_host_extras = NULL;
    bitnet_host_n_extras = bitnet_host_cap_extras = 0;
    bitnet_host_initialized = false;
    bitnet_host_owner = NULL;
}

/* "the heap" or "an arena" (messages). */
static const char *bitnet_host_allocator_name(const bitnet_arena *a) { return a ? "an arena" : "the heap"; }

size_t bitnet_lut_n_extras(void) {
    bitnet_host_lock();
    const size_t n = bitnet_host_n_extras;
    bitnet_host_unlock();
    return n;
}

void bitnet_lut_release_tensor(bitnet_tensor *t) {
    if (t == NULL) return;
    bitnet_host_lock();
    bool released = false;
    size_t kept = 0;
    bitnet_arena *prev = bitnet_arena_use(bitnet_host_owner);
    for (size_t i = 0; i < bitnet_host_n_extras; i++) { /* compacts the table in place, order kept */
        bitnet_tensor_extra *ex = bitnet_host_extras[i];
        if (ex->owner == t) {
            bitnet_host_extra_release(ex);
            released = true;
        } else {
            bitnet_host_extras[kept++] = ex;
        }
    }
    bitnet_arena_use(prev);
    bitnet_host_n_extras = kept;
    if (released) {
        t->extra = NULL;
        if (kept == 0) bitnet_host_free_locked(); /* the last model's last weight: the table goes too */
    }
    bitnet_host_unlock();
}

/* Add `ex` to the table (doubling it when full). Caller holds the mutex. false on out of memory. */
static bool bitnet_host_register_locked(bitnet_tensor_extra *ex) {
    if (bitnet_host_n_extras == bitnet_host_cap_extras) {
        if (bitnet_host_cap_extras > SIZE_MAX / 2 / sizeof(*bitnet_host_extras)) return false;
        const size_t cap = bitnet_host_cap_extras * 2;
        bitnet_tensor_extra **p =
            (bitnet_tensor_extra **)bitnet_realloc(bitnet_host_extras, cap * sizeof(*bitnet_host_extras));
        if (p == NULL) return false;
        bitnet_host_extras = p;
        bitnet_host_cap_extras = cap;
    }
    bitnet_host_extras[bitnet_host_n_extras++] = ex;
    return true;
}

/* ---- transform -------------------------------------------------------------------------------- */

static const char *bitnet_host_i2s_impl_name(void) {
    const char *isa = bitnet_i2s_isa();
    if (strcmp(isa, "avx512") == 0) return "i2s_gemm__avx512";
    if (strcmp(isa, "avxvnni") == 0) return "i2s_gemm__avxvnni";
    if (strcmp(isa, "avx2") == 0) return "i2s_gemm__avx2";
    if (strcmp(isa, "neon") == 0) return "i2s_gemm__neon";
    return "i2s_gemm__portable";
}

/* Decode t's stored layout, check it, repack (or alias) into `target`, choose the kernel and attach
 * the extra. See lut_host.h. Errors: BITNET_ERR_INVALID_ARG (NULL tensor/data/tiles, target not
 * ternary, tiles that break a kernel rule or exceed BM 8192), BITNET_ERR_UNSUPPORTED (stored type not
 * ternary, not 2-D, M·K not a multiple of 128), BITNET_ERR_FORMAT (too few bytes, code 3 or invalid
 * nibbles, non-finite scale), BITNET_ERR_NOMEM. Every message names the tensor, M and K, and the tiles
 * where they matter. On error the tensor is unchanged. Transforming a tensor again attaches a new
 * extra; the previous one (its pointer may already dangle after bitnet_lut_free, so it is never
 * dereferenced here) stays in the table until bitnet_lut_release_tensor(t) or bitnet_lut_free. */
bitnet_status bitnet_lut_transform_tensor(bitnet_tensor *t, const bitnet_tiles *stored_tiles, int target,
                                          const bitnet_tiles *tiles, bitnet_error *err) {
    if (t == NULL) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "lut_transform: tensor is NULL");
    const char *name = t->name;
    const int stored = t->type;
    if (!bitnet_host_is_lut_type(stored))
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "tensor '%s': type %s (id %d) is not a ternary type (I2_S, TL1, TL2)",
                           name, bitnet_type_name(stored), stored);
    if (!bitnet_host_is_lut_type(target))
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tensor '%s': target type %s (id %d) is not I2_S, TL1 or TL2",
                           name, bitnet_type_name(target), target);
    if (!bitnet_host_is_2d(t) || t->ne[0] <= 0 || t->ne[1] <= 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "tensor '%s': ternary weights must be 2-D with positive sizes, got ne = [%lld, %lld, %lld, %lld]",
                           name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3]);
    const int64_t K = t->ne[0], M = t->ne[1];
    if (M > INT64_MAX / K || (uint64_t)(M * K) > (uint64_t)SIZE_MAX / 2)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "tensor '%s': M = %lld, K = %lld is too large", name,
                           (long long)M, (long long)K);
    if (t->data == NULL)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tensor '%s' (M = %lld, K = %lld): no data", name,
                           (long long)M, (long long)K);
    if ((stored == BITNET_TYPE_I2_S || target == BITNET_TYPE_I2_S) && (M * K) % 128 != 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "tensor '%s': I2_S needs M*K %% 128 == 0, got M = %lld, K = %lld", name, (long long)M,
                           (long long)K);
    if (stored != BITNET_TYPE_I2_S && stored_tiles == NULL)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tensor '%s' (%s, M = %lld, K = %lld): stored tiles are required",
                           name, bitnet_type_name(stored), (long long)M, (long long)K);
    if (target != BITNET_TYPE_I2_S && tiles == NULL)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tensor '%s' (M = %lld, K = %lld): tiles for target %s are required",
                           name, (long long)M, (long long)K, bitnet_type_name(target));

    const size_t need = bitnet_ternary_nbytes(stored, M, K);
    if (need == 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "tensor '%s': %s cannot hold M = %lld, K = %lld", name,
                           bitnet_type_name(stored), (long long)M, (long long)K);
    if (t->nbytes < need)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "tensor '%s': %llu bytes, but %s with M = %lld, K = %lld needs %llu",
                           name, (unsigned long long)t->nbytes, bitnet_type_name(stored), (long long)M, (long long)K, (unsigned long long)need);

    /* The extras of one table share an allocator (see the table's comment). */
    bitnet_host_lock();
    const bool other_owner =
        bitnet_host_initialized && bitnet_host_n_extras > 0 && bitnet_host_owner != bitnet_arena_current();
    const char *owner_name = bitnet_host_allocator_name(bitnet_host_owner);
    bitnet_host_unlock();
    if (other_owner)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "tensor '%s': the LUT host holds the weights of models whose memory comes from %s; a model "
                           "whose memory comes from %s cannot be loaded beside them (free them first)",
                           name, owner_name, bitnet_host_allocator_name(bitnet_arena_current()));

    /* Kernel and tiles first (cheap, and nothing is allocated yet). */
    bitnet_tensor_extra ex;
    memset(&ex, 0, sizeof(ex));
    ex.type = target;
    bitnet_error sub;
    sub.msg[0] = '\0';
    if (target == BITNET_TYPE_I2_S) {
        ex.shape.M = M;
        ex.shape.K = K;
        ex.shape.two_k = K;
        ex.impl.name = bitnet_host_i2s_impl_name();
    } else {
        if (tiles->BM > BITNET_HOST_ACC_CAP)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "tensor '%s' (%s, M = %lld, K = %lld): BM = %d is above the host's limit of %d rows per tile",
                               name, bitnet_type_name(target), (long long)M, (long long)K, (int)tiles->BM, BITNET_HOST_ACC_CAP);
        bitnet_status st = bitnet_tiles_check(target, M, K, *tiles, &sub);
        if (st == BITNET_OK) {
            ex.shape = bitnet_lut_shape_make(target, M, K, *tiles);
            st = bitnet_lut_select(target, &ex.shape, &ex.impl, &sub);
        }
        if (st == BITNET_OK && (ex.impl.ctor == NULL || ex.impl.qgemm == NULL)) {
            st = BITNET_ERR_UNSUPPORTED;
            snprintf(sub.msg, sizeof(sub.msg), "no kernel selected");
        }
        if (st != BITNET_OK)
            return bitnet_fail(err, st, "tensor '%s' (%s, M = %lld, K = %lld, tiles BM = %d, BK = %d, bm = %d): %s", name,
                               bitnet_type_name(target), (long long)M, (long long)K, (int)tiles->BM, (int)tiles->BK, (int)tiles->bm,
                               sub.msg);
    }

    /* The stored data used in place when it already is the target layout and its start is aligned to the
     * GGUF alignment (32: the kernels use unaligned loads; 32 keeps a 32-byte load inside one cache line,
     * and every tensor of a mapped file or of a model image placed on a 32-byte boundary has it). Then
     * the data is only checked, with no decoded copy (the bare-metal build has no memory for one);
     * otherwise it is decoded, which checks it the same way, and repacked. */
    const bool same_layout =
        stored == target &&
        (target == BITNET_TYPE_I2_S || (stored_tiles->BM == tiles->BM && stored_tiles->BK == tiles->BK &&
                                        stored_tiles->bm == tiles->bm));
    const bool in_place = same_layout && ((uintptr_t)t->data % BITNET_WEIGHT_ALIGN) == 0;
    /* I2_S to TL1/TL2 streams tile by tile (bitnet_repack_i2s) below: here it is only checked */
    const bool stream = stored == BITNET_TYPE_I2_S && target != BITNET_TYPE_I2_S;
    int8_t *w = NULL;
    if (!in_place && !stream && (w = (int8_t *)bitnet_malloc((size_t)(M * K))) == NULL)
        return bitnet_fail(err, BITNET_ERR_NOMEM, "tensor '%s' (M = %lld, K = %lld): out of memory decoding", name,
                           (long long)M, (long long)K);
    float scale = 0.0f;
    bitnet_status st;
    switch (stored) {
    case BITNET_TYPE_I2_S:
        if (stream) { /* the scale only: the codes are checked while they are repacked */
            memcpy(&scale, (const uint8_t *)t->data + M * K / 4, sizeof scale);
            st = BITNET_OK;
        } else {
            st = bitnet_unpack_i2s((const uint8_t *)t->data, M, K, w, &scale, &sub);
        }
        break;
    case BITNET_TYPE_TL1: st = bitnet_unpack_tl1((const uint8_t *)t->data, M, K, *stored_tiles, w, &scale, &sub); break;
    default: st = bitnet_unpack_tl2((const uint8_t *)t->data, M, K, *stored_tiles, w, &scale, &sub); break;
    }
    if (st != BITNET_OK) {
        bitnet_free(w);
        if (stored == BITNET_TYPE_I2_S)
            return bitnet_fail(err, st, "tensor '%s' (I2_S, M = %lld, K = %lld): %s", name, (long long)M, (long long)K,
                               sub.msg);
        return bitnet_fail(err, st, "tensor '%s' (%s, M = %lld, K = %lld, stored tiles BM = %d, BK = %d, bm = %d): %s",
                           name, bitnet_type_name(stored), (long long)M, (long long)K, (int)stored_tiles->BM,
                           (int)stored_tiles->BK, (int)stored_tiles->bm, sub.msg);
    }
    if (!isfinite(scale)) {
        bitnet_free(w);
        return bitnet_fail(err, BITNET_ERR_FORMAT, "tensor '%s' (%s, M = %lld, K = %lld): weight scale is %g", name,
                           bitnet_type_name(stored), (long long)M, (long long)K, (double)scale);
    }
    ex.scale = scale;

    const size_t packed = bitnet_ternary_nbytes(target, M, K); /* > 0: the tiles check passed */
    if (in_place) {
        ex.qweights = (const uint8_t *)t->data; /* alias the file data */
    } else {
        uint8_t *buf = (uint8_t *)bitnet_aligned_alloc(64, bitnet_round64(packed));
        if (buf == NULL) {
            bitnet_free(w);
            return bitnet_fail(err, BITNET_ERR_NOMEM, "tensor '%s' (M = %lld, K = %lld): out of memory for %llu bytes",
                               name, (long long)M, (long long)K, (unsigned long long)packed);
        }
        if (same_layout) {
            memcpy(buf, t->data, packed);
            st = BITNET_OK;
        } else if (stream) {
            st = bitnet_repack_i2s((const uint8_t *)t->data, M, K, target, *tiles, buf, NULL, &sub);
            if (st != BITNET_OK) {
                bitnet_free(buf);
                return bitnet_fail(err, st, "tensor '%s' (I2_S, M = %lld, K = %lld): %s", name, (long long)M,
                                   (long long)K, sub.msg);
            }
        } else if (target == BITNET_TYPE_I2_S) {
            st = bitnet_pack_i2s(w, M, K, scale, buf, &sub);
        } else if (target == BITNET_TYPE_TL1) {
            st = bitnet_pack_tl1(w, M, K, *tiles, scale, buf, &sub);
        } else {
            st = bitnet_pack_tl2(w, M, K, *tiles, scale, buf, &sub);
        }
        if (st != BITNET_OK) {
            bitnet_free(buf);
            bitnet_free(w);
            return bitnet_fail(err, st, "tensor '%s' (M = %lld, K = %lld): repacking to %s failed: %s", name,
                               (long long)M, (long long)K, bitnet_type_name(target), sub.msg);
        }
        ex.qweights = buf;
        ex.owned = buf;
    }
    bitnet_free(w); /* the decoded int8 matrix (if any) is not kept */
    ex.int8_on_tl2 = target == BITNET_TYPE_TL2 && bitnet_tl2_i8_supports(&ex.shape);
    if (ex.int8_on_tl2 || (stored == BITNET_TYPE_I2_S && target != BITNET_TYPE_I2_S)) {
        if (!ex.int8_on_tl2) ex.i2s_codes = (const uint8_t *)t->data; /* validated above: codes 0..2, M·K % 128 == 0 */
        bitnet_host_lock();
        ex.i2s_min_cols = bitnet_host_i2s_min_cols_locked();
        if (ex.int8_on_tl2 && !bitnet_host_i2s_fixed) ex.i2s_min_cols = BITNET_LUT_TL2_I8_MIN_COLS;
        bitnet_host_unlock();
    }

    bitnet_tensor_extra *heap = (bitnet_tensor_extra *)bitnet_malloc(sizeof(*heap));
    if (heap == NULL) {
        bitnet_free(ex.owned);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "tensor '%s': out of memory for its extra", name);
    }
    *heap = ex;
    heap->owner = t;
    bitnet_host_lock();
    bitnet_host_init_locked();
    const bool ok = bitnet_host_initialized && bitnet_host_register_locked(heap);
    bitnet_host_unlock();
    if (!ok) {
        bitnet_host_extra_release(heap);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "tensor '%s': out of memory growing the extras table", name);
    }
    t->extra = heap;
    return BITNET_OK;
}

/* ---- the product ------------------------------------------------------------------------------ */

/* Every thread evaluates the same checks on the same arguments, so either all threads compute (and
 * meet at the barrier) or all return early: a bad call cannot deadlock the pool. */
static bool bitnet_host_call_ok(const bitnet_tensor *src0, const bitnet_tensor *src1, const bitnet_tensor *dst,
                                const void *wdata, size_t wsize, int ith, int nth, bitnet_threadpool *tp,
                                bitnet_host_ws *L) {
    if (src0 == NULL || src0->extra == NULL || src1 == NULL || dst == NULL) return false;
    if (src1->data == NULL || dst->data == NULL || wdata == NULL || ((uintptr_t)wdata % 64) != 0) return false;
    if (nth < 1 || ith < 0 || ith >= nth) return false;
    if (nth > 1 && (tp == NULL || bitnet_threadpool_n_threads(tp) != nth)) return false;
    if (!bitnet_host_ws_layout(src0, src1, dst, L) || wsize < L->total) return false;
    const bitnet_tensor_extra *ex = src0->extra;
    if (ex->qweights == NULL) return false;
    if (L->type == BITNET_TYPE_I2_S) return true; /* I2_S weight, or the int8 path of a TL1/TL2 weight */
    if (ex->type != BITNET_TYPE_I2_S) {
        if (ex->impl.ctor == NULL || ex->impl.qgemm == NULL) return false;
        if (ex->shape.BM <= 0 || ex->shape.BM > BITNET_HOST_ACC_CAP || ex->shape.M % ex->shape.BM != 0) return false;
    }
    return true;
}

/* dst = src0 · src1 (see lut_host.h). A call that cannot be computed (no extra, shape mismatch,
 * workspace too small or misaligned, nth inconsistent with tp) writes NaN into every element of dst
 * that exists (thread 0) instead of leaving it unwritten, and returns on every thread without
 * touching the barrier. There is no barrier at the end: a caller that reuses wdata for another
 * product inside the same task must call bitnet_threadpool_barrier first. */
void bitnet_mul_mat(const bitnet_tensor *src0, const bitnet_tensor *src1, bitnet_tensor *dst, void *wdata,
                    size_t wsize, int ith, int nth, bitnet_threadpool *tp) {
    bitnet_host_ws L;
    if (!bitnet_host_call_ok(src0, src1, dst, wdata, wsize, ith, nth, tp, &L)) {
        if (ith == 0 && dst != NULL && dst->data != NULL && dst->type == BITNET_TYPE_F32 && dst->ne[0] > 0 &&
            dst->ne[1] > 0 && bitnet_host_f32_rows_ok(dst, dst->ne[0])) {
            const size_t rb = bitnet_host_row_bytes(dst, dst->ne[0]);
            for (int64_t n = 0; n < dst->ne[1]; ++n) {
                float *y = (float *)((char *)dst->data + (size_t)n * rb);
                for (int64_t m = 0; m < dst->ne[0]; ++m) y[m] = NAN;
            }
        }
        return;
    }

    const bitnet_tensor_extra *ex = src0->extra;
    const int64_t K = L.K, M = L.M, N = L.N;
    uint8_t *ws = (uint8_t *)wdata;
    float *col_scale = (float *)(ws + L.off_scales);
    int32_t *col_qsum = (int32_t *)(ws + L.off_qsum);
    const size_t x_rb = bitnet_host_row_bytes(src1, K);
    const size_t y_rb = bitnet_host_row_bytes(dst, M);
    /* int8 activations: an I2_S weight, or the int8 batch path of a TL1/TL2 weight (bitnet_lut_uses_int8) on
     * its I2_S bytes or (int8_on_tl2) on its TL2 bytes */
    const bool i2s = L.type == BITNET_TYPE_I2_S;
    const bool on_tl2 = i2s && ex->type == BITNET_TYPE_TL2 && ex->int8_on_tl2;
    const uint8_t *i2s_w = ex->type == BITNET_TYPE_I2_S ? ex->qweights : ex->i2s_codes;

    /* Phase 1: quantize the columns / build their LUTs, a contiguous range of columns per thread
     * (one column: thread 0 alone). Each column is written by one thread with the same operations,
     * so the workspace bytes do not depend on the thread count. */
    {
        int64_t c0, c1;
        bitnet_split_range(N, ith, nth, &c0, &c1);
        for (int64_t n = c0; n < c1; ++n) {
            const float *x = (const float *)((const char *)src1->data + (size_t)n * x_rb);
            int8_t *col = (int8_t *)(ws + (size_t)n * L.col_stride);
            if (i2s) {
                col_scale[n] = bitnet_i2s_quantize_act(x, K, col, &col_qsum[n]);
            } else {
                ex->impl.ctor(x, K, ex->shape.three_k, col, &col_scale[n]);
            }
        }
    }
    if (nth > 1) bitnet_threadpool_barrier(tp);

    /* Phase 2: work units (row unit u, column chunk j), a contiguous range of them per thread;
     * y = (float)acc / s * scale. One column chunk (all N columns) unless the row units do not
     * split evenly over the threads and there are several columns: then nth chunks (of groups of 4
     * columns when N >= 4·nth, the TL2 kernel's columns per pass), so n_units·nth units split evenly
     * (e.g. 3 tiles of M = 768 on 2 threads: 3 + 3 half tiles instead of 2 + 1 tiles). Every output
     * is still computed by one thread with the same integer sum and the same two float operations. */
    _Alignas(64) int32_t acc[BITNET_HOST_I8_ACC_CAP];
    const float scale = ex->scale;
    const int64_t rows_per_unit = i2s && !on_tl2 ? BITNET_HOST_I2S_ROWS : ex->shape.BM;
    const int64_t n_units = (M + rows_per_unit - 1) / rows_per_unit;
    const int64_t cols_per_call = (on_tl2 ? BITNET_HOST_I8_ACC_CAP : BITNET_HOST_ACC_CAP) / rows_per_unit; /* ≥ 1: BM ≤ cap */
    int64_t n_chunks = 1, group = 1;
    if (nth > 1 && N > 1 && n_units % nth != 0) {
        n_chunks = nth;
        group = N >= 4 * (int64_t)nth ? 4 : 1;
    }
    const int64_t n_groups = (N + group - 1) / group;
    int64_t w0, w1;
    bitnet_split_range(n_units * n_chunks, ith, nth, &w0, &w1);

    for (int64_t wu = w0; wu < w1; ++wu) {
        const int64_t u = wu / n_chunks;
        int64_t g0, g1;
        bitnet_split_range(n_groups, (int)(wu % n_chunks), (int)n_chunks, &g0, &g1);
        const int64_t c_begin = g0 * group, c_end = g1 * group < N ? g1 * group : N;
        const int64_t r0 = u * rows_per_unit;
        const int64_t rows = (M - r0 < rows_per_unit) ? M - r0 : rows_per_unit;
        for (int64_t n0 = c_begin; n0 < c_end; n0 += cols_per_call) {
            const int64_t nc = (c_end - n0 < cols_per_call) ? c_end - n0 : cols_per_call;
            const int8_t *cols = (const int8_t *)(ws + (size_t)n0 * L.col_stride);
            bool computed = true;
            if (on_tl2) {
                computed = bitnet_tl2_i8_gemm(&ex->shape, ex->qweights, u, cols, L.col_stride, col_qsum + n0, nc,
                                              acc, (size_t)rows_per_unit);
            } else if (i2s) {
                bitnet_i2s_gemm(i2s_w, M, K, cols, L.col_stride, col_qsum + n0, nc, r0, r0 + rows, acc,
                                (size_t)rows_per_unit);
            } else {
                ex->impl.qgemm(&ex->shape, acc, ex->qweights, cols, L.col_stride, u, nc);
            }
            for (int64_t c = 0; c < nc; ++c) {
                const float s = col_scale[n0 + c];
                const int32_t *a = acc + c * rows_per_unit;
                float *y = (float *)((char *)dst->data + (size_t)(n0 + c) * y_rb) + r0;
                for (int64_t i = 0; i < rows; ++i) {
                    float v = (float)a[i];
                    v = v / s;
                    v = v * scale;
                    y[i] = computed ? v : NAN; /* a kernel that refused its tiles leaves no stale sums behind */
                }
            }
        }
    }
}
