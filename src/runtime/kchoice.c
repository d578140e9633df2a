/* kchoice.c — measuring and caching the LUT / I2_S crossover (kchoice.h). */
#include "runtime/kchoice.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"
#include "base/types.h"
#include "kernels/i2s/i2s.h"
#include "kernels/lut/tl2_i8.h"

/* Cost of threshold T (0 = never): Σ over the points of (time of the kernel T picks) / (the faster
 * time), the largest N counted twice. */
static double kc_cost(const bitnet_kchoice_point *pts, int n, int last, int64_t T) {
    double c = 0.0;
    for (int i = 0; i < n; i++) {
        if (pts[i].lut_us <= 0.0 || pts[i].i2s_us <= 0.0) continue;
        const double best = pts[i].lut_us < pts[i].i2s_us ? pts[i].lut_us : pts[i].i2s_us;
        const double t = T > 0 && pts[i].n_cols >= T ? pts[i].i2s_us : pts[i].lut_us;
        c += (i == last ? 2.0 : 1.0) * t / best;
    }
    return c;
}

int64_t bitnet_kchoice_crossover(const bitnet_kchoice_point *pts, int n_points) {
    int last = -1;
    for (int i = 0; i < n_points; i++)
        if (pts[i].lut_us > 0.0 && pts[i].i2s_us > 0.0) last = i;
    if (last < 0) return 0;
    int64_t best_t = 0;
    double best_c = kc_cost(pts, n_points, last, 0);
    for (int i = 0; i < n_points; i++) {
        if (pts[i].lut_us <= 0.0 || pts[i].i2s_us <= 0.0) continue;
        const double c = kc_cost(pts, n_points, last, pts[i].n_cols);
        if (c < best_c) best_c = c, best_t = pts[i].n_cols;
    }
    return best_t;
}

/* ---- measuring ---------------------------------------------------------------------------------- */

static double kc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int kc_cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Products back to back inside one pool task, each between two barriers (as the forward pass runs
 * them); thread 0 records each product's time. */
typedef struct kc_loop {
    bitnet_tensor **w;
    int n_w;
    bitnet_tensor x, y;
    void *ws;
    size_t wsize;
    bitnet_threadpool *tp;
    double *t;        /* [cap] times of the products, seconds */
    int cap, n;       /* products recorded */
    double min_s;     /* keep going until this much time and at least min_n products */
    int min_n;
    int go;
} kc_loop;

static void kc_task(void *arg, int ith, int nth) {
    kc_loop *L = (kc_loop *)arg;
    double t0 = 0.0, start = 0.0;
    if (ith == 0) start = kc_now();
    for (int i = 0;; i++) {
        if (ith == 0) {
            L->go = i < L->cap && (i < L->min_n || kc_now() - start < L->min_s);
            t0 = kc_now();
        }
        if (nth > 1) bitnet_threadpool_barrier(L->tp);
        if (!L->go) break;
        bitnet_mul_mat(L->w[i % L->n_w], &L->x, &L->y, L->ws, L->wsize, ith, nth, L->tp);
        if (nth > 1) bitnet_threadpool_barrier(L->tp);
        if (ith == 0) L->t[L->n++] = kc_now() - t0;
    }
}

/* One round: the median product time in microseconds with every (private) extra set to i2s_min_cols = mode. */
static double kc_round(kc_loop *L, bitnet_tensor_extra *ec, int64_t mode) {
    for (int i = 0; i < L->n_w; i++) ec[i].i2s_min_cols = mode;
    L->n = 0;
    bitnet_threadpool_run(L->tp, kc_task, L);
    if (L->n == 0) return 0.0;
    qsort(L->t, (size_t)L->n, sizeof *L->t, kc_cmp);
    return 1e6 * (L->n % 2 ? L->t[L->n / 2] : 0.5 * (L->t[L->n / 2 - 1] + L->t[L->n / 2]));
}

bitnet_status bitnet_kchoice_measure(bitnet_tensor *const *weights, int n_weights, bitnet_threadpool *tp,
                                     bitnet_kchoice *out, bitnet_error *err) {
    if (!weights || n_weights < 1 || !tp || !out)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_kchoice_measure: no weights, pool or result");
    const bitnet_tensor_extra *e0 = weights[0]->extra;
    for (int i = 0; i < n_weights; i++) {
        const bitnet_tensor_extra *e = weights[i]->extra;
        if (!bitnet_lut_has_int8(e) || e->type != e0->type || e->int8_on_tl2 != e0->int8_on_tl2 ||
            e->shape.M != e0->shape.M || e->shape.K != e0->shape.K || e->shape.BM != e0->shape.BM ||
            e->shape.BK != e0->shape.BK || e->shape.bm != e0->shape.bm)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "bitnet_kchoice_measure: weight %s is not a TL1/TL2 weight with an int8 path of the "
                               "shape of %s", weights[i]->name, weights[0]->name);
    }
    memset(out, 0, sizeof *out);
    out->type = e0->type;
    out->M = e0->shape.M, out->K = e0->shape.K;
    out->BM = e0->shape.BM, out->BK = e0->shape.BK, out->bm = e0->shape.bm;
    out->n_threads = bitnet_threadpool_n_threads(tp);

    const int64_t M = out->M, K = out->K, n_max = (int64_t)1 << (BITNET_KCHOICE_MAX_POINTS - 1);
    kc_loop L;
    memset(&L, 0, sizeof L);
    L.n_w = n_weights, L.tp = tp;
    L.cap = 4096;
    L.min_s = 0.002;
    /* private copies of the tensors and their extras: the thresholds switched below are the copies',
     * so products of the model's own contexts never see them change */
    bitnet_tensor *tc = bitnet_malloc((size_t)n_weights * sizeof *tc);
    bitnet_tensor_extra *ec = bitnet_malloc((size_t)n_weights * sizeof *ec);
    bitnet_tensor **tp_list = bitnet_malloc((size_t)n_weights * sizeof *tp_list);
    float *x = bitnet_aligned_alloc(64, (size_t)(n_max * K) * sizeof(float));
    float *y = bitnet_aligned_alloc(64, (size_t)(n_max * M) * sizeof(float));
    L.t = bitnet_malloc((size_t)L.cap * sizeof *L.t);
    bitnet_status st = BITNET_OK;
    if (!tc || !ec || !tp_list || !x || !y || !L.t) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory measuring the kernels of %s", weights[0]->name);
        goto done;
    }
    for (int i = 0; i < n_weights; i++) {
        tc[i] = *weights[i];
        ec[i] = *weights[i]->extra;
        tc[i].extra = &ec[i];
        tp_list[i] = &tc[i];
    }
    L.w = tp_list;
    uint32_t r = 0x9e3779b9u; /* activations uniform in [-1, 1): any values do, the work does not depend on them */
    for (int64_t i = 0; i < n_max * K; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)(int32_t)r * (1.0f / 2147483648.0f);
    }
    L.x = bitnet_act_tensor(x, K, n_max);
    L.y = bitnet_act_tensor(y, M, n_max);
    L.wsize = bitnet_mul_mat_get_wsize(&tc[0], &L.x, &L.y);
    if (L.wsize == 0) {
        st = bitnet_fail(err, BITNET_ERR_INVALID_ARG, "measuring the kernels of %s: the host refuses its product",
                         weights[0]->name);
        goto done;
    }
    L.ws = bitnet_aligned_alloc(64, L.wsize);
    if (!L.ws) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a %zu-byte workspace measuring %s", L.wsize,
                         weights[0]->name);
        goto done;
    }
    const double t_start = kc_now();
    for (int p = 0; p < BITNET_KCHOICE_MAX_POINTS; p++) {
        const int64_t N = (int64_t)1 << p;
        L.x.ne[1] = L.y.ne[1] = N;
        /* GEMV-like N: every layer's copy once (DRAM); large N: one product is long enough */
        L.min_n = N <= 2 && n_weights > 3 ? n_weights : N >= 16 ? 1 : 3;
        if (L.min_n > L.cap) L.min_n = L.cap;
        double lut[3], i2s[3];
        for (int round = 0; round < 3; round++) { /* alternate so that drift hits both kernels */
            lut[round] = kc_round(&L, ec, 0);
            i2s[round] = kc_round(&L, ec, 1);
            /* a refused product fills y with NaN (lut_host.h) and would be timed as a fast one */
            if (y[0] != y[0] || y[(size_t)(N * M) - 1] != y[(size_t)(N * M) - 1]) {
                st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                                 "measuring the kernels of %s: the host refused a product of %lld columns",
                                 weights[0]->name, (long long)N);
                goto done;
            }
        }
        qsort(lut, 3, sizeof *lut, kc_cmp);
        qsort(i2s, 3, sizeof *i2s, kc_cmp);
        out->pts[p] = (bitnet_kchoice_point){N, lut[1], i2s[1]};
        out->n_points = p + 1;
    }
    out->seconds = kc_now() - t_start;
    out->i2s_min_cols = bitnet_kchoice_crossover(out->pts, out->n_points);
    const char *log = getenv("BITNET_KERNEL_CHOICE_LOG");
    if (log && *log && strcmp(log, "0") != 0) {
        fprintf(stderr, "kernel choice %s %lldx%lld tiles %lld/%lld/%lld, %d threads, %d weights: crossover %lld;",
                bitnet_type_name(out->type), (long long)M, (long long)K, (long long)out->BM, (long long)out->BK,
                (long long)out->bm, out->n_threads, n_weights, (long long)out->i2s_min_cols);
        for (int p = 0; p < out->n_points; p++)
            fprintf(stderr, " N=%lld %.1f/%.1f us", (long long)out->pts[p].n_cols, out->pts[p].lut_us, out->pts[p].i2s_us);
        fprintf(stderr, " (LUT/%s)\n", out->int8_on_tl2 ? "int8 on TL2" : "I2_S");
    }
done:
    bitnet_free(tc);
    bitnet_free(ec);
    bitnet_free(tp_list);
    bitnet_free(x);
    bitnet_free(y);
    bitnet_free(L.ws);
    bitnet_free(L.t);
    return st;
}

/* ---- the cache file ------------------------------------------------------------------------------ */

const char *bitnet_kchoice_cache_path(char *buf, size_t cap) {
    const char *env = getenv("BITNET_KERNEL_CACHE");
    int n;
    if (env) {
        if (*env == '\0' || strcmp(env, "off") == 0) return NULL;
        n = snprintf(buf, cap, "%s", env);
    } else {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg == '/') n = snprintf(buf, cap, "%s/bitnet/kernel-choice.txt", xdg);
        else if (home && *home == '/') n = snprintf(buf, cap, "%s/.cache/bitnet/kernel-choice.txt", home);
        else return NULL;
    }
    return n > 0 && (size_t)n < cap ? buf : NULL;
}

/* The CPU's model name from /proc/cpuinfo ("unknown-cpu" elsewhere), spaces and odd characters → '_'. */
static void kc_cpu_name(char *buf, size_t cap) {
    snprintf(buf, cap, "unknown-cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        const char *c = strchr(line, ':');
        if (c && (strncmp(line, "model name", 10) == 0 || strncmp(line, "CPU part", 8) == 0)) {
            c++;
            while (*c == ' ' || *c == '\t') c++;
            snprintf(buf, cap, "%s", c);
            break;
        }
    }
    fclose(f);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
    for (char *p = buf; *p; p++)
        if (*p <= ' ' || *p > '~' || *p == '|') *p = '_';
    if (!*buf) snprintf(buf, cap, "unknown-cpu");
}

const char *bitnet_kchoice_key(const bitnet_kchoice *c, const char *lut_kernel, char *buf, size_t cap) {
    char cpu[128];
    kc_cpu_name(cpu, sizeof cpu);
    snprintf(buf, cap, "v2|%s|%s|%s-%s|%s|%lldx%lld|%lld,%lld,%lld|t%d", cpu, lut_kernel ? lut_kernel : "?",
             c->int8_on_tl2 ? "tl2i8" : "i2s", c->int8_on_tl2 ? bitnet_tl2_i8_isa() : bitnet_i2s_isa(),
             bitnet_type_name(c->type), (long long)c->M, (long long)c->K, (long long)c->BM, (long long)c->BK,
             (long long)c->bm, c->n_threads);
    for (char *p = buf; *p; p++)
        if (*p <= ' ' || *p > '~') *p = '_';
    return buf;
}

bool bitnet_kchoice_cache_get(const char *path, const char *key, int64_t *i2s_min_cols) {
    if (!path || !key) return false;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    const size_t kl = strlen(key);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    bool found = false;
    while ((n = getline(&line, &cap, f)) >= 0) {
        /* a record is "key value\n": no NUL inside, terminated, the key then one space */
        if (n < 2 || line[n - 1] != '\n' || strlen(line) != (size_t)n) continue;
        if ((size_t)n < kl + 3 || strncmp(line, key, kl) != 0 || line[kl] != ' ') continue;
        char *end = NULL;
        errno = 0;
        const long long v = strtoll(line + kl + 1, &end, 10);
        if (errno || end == line + kl + 1 || *end != '\n' || v < 0 || v > (1 << 20)) continue;
        *i2s_min_cols = (int64_t)v;
        found = true;
    }
    free(line);
    fclose(f);
    return found;
}

/* mkdir -p of the directories above path (0755); false when one cannot be made. */
static bool kc_make_parents(const char *path) {
    char dir[1024];
    const int dn = snprintf(dir, sizeof dir, "%s", path);
    if (dn <= 0 || (size_t)dn >= sizeof dir) return false;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return true;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return false;
        *p = '/';
    }
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

bool bitnet_kchoice_cache_put(const char *path, const char *key, int64_t i2s_min_cols) {
    if (!path || !key || !kc_make_parents(path)) return false;
    char line[1100];
    const int n0 = snprintf(line + 1, sizeof line - 1, "%s %lld\n", key, (long long)i2s_min_cols);
    if (n0 <= 0 || (size_t)n0 >= sizeof line - 1) return false;
    bool created = true; /* by this call: removed again when it stays empty */
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) {
        created = false;
        fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
    }
    if (fd < 0) return false;
    /* one writer at a time (where flock works), so that a failed append is cut off again without
     * cutting another process's record */
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) continue;
    /* a file whose last byte is not a newline (an edit, a cut write) gets one first, so that this
     * record starts a line of its own */
    char last = '\n';
    const off_t size = lseek(fd, 0, SEEK_END);
    if (size > 0 && pread(fd, &last, 1, size - 1) != 1) last = '\n';
    const char *rec = last == '\n' ? line + 1 : line;
    const size_t n = (size_t)n0 + (last == '\n' ? 0 : 1);
    line[0] = '\n';
    bool ok = size >= 0 && write(fd, rec, n) == (ssize_t)n;
    if (!ok && size >= 0) {
        /* a full disk (ENOSPC), RLIMIT_FSIZE (EFBIG), ...: no partial line stays, nor an empty file of ours */
        const bool cut = ftruncate(fd, size) == 0;
        if (created && (size == 0 || !cut)) unlink(path);
    }
    if (close(fd) != 0) ok = false;
    return ok;
}
