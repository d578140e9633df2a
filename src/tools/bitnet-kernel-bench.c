/* bitnet-kernel-bench — speed of the ternary matmul kernels against this machine's memory roofline
 * (issue #4, "kernel benchmark"; the autotuner `python3 -m codegen tune` drives it).
 *
 * For every (target, M×K shape, tiles) it measures, through the public matmul host (bitnet_mul_mat
 * on a bitnet_threadpool, calls back to back inside one pool task separated by the pool barrier):
 *   - GEMV (N = 1) time per call of the whole M×K product, with 1 and all threads, with the weights
 *     read from DRAM (cache-busting: the call rotates among enough identical copies of the packed
 *     weight that the copies together are ≥ 16× the last-level cache, so every call misses) and, when
 *     the weight fits the LLC, with one copy that stays cached;
 *   - effective weight bandwidth = bytes of the packed weight streams the kernel reads ÷ time;
 *   - this machine's streaming-read bandwidth, measured in the same run: every thread sums its
 *     contiguous share of a large buffer (default 1 GiB, ≫ LLC) with 256-bit loads (AVX2 on x86-64,
 *     two 128-bit NEON loads on AArch64, 64-bit integer loads elsewhere), 1 and all threads;
 *   - percent of roofline = weight GB/s ÷ read GB/s of the same thread count (medians of both);
 *   - batched products (N = 8, 128, 512 activation columns) in GOP/s = 2·M·K·N / time;
 *   - the LUT-construction share: the constructor alone for the same N columns on one thread (the
 *     host builds every column's LUT on thread 0 before the barrier) ÷ the whole call;
 *   - the I2_S reference path (int8 dot products, no LUT) on the same ternary weights.
 * Before timing, every product is checked: the LUT path's output must equal the I2_S path's output
 * bit for bit (both compute the exact integer Σ w·q and then (float)acc / s · scale, LAYOUTS.md §1),
 * or the scalar reference bitnet_ref_gemm when M·K is not a multiple of 128. A mismatch is exit 1.
 *
 * Timing: a warm-up repetition, then R repetitions; one repetition runs calls until at least
 * --min-time has passed, every call timed on its own, and yields its median call (robust against
 * the stalls of a busy machine) and its mean; reported are the median, min, max and standard
 * deviation over the repetitions of the medians (the mean is in the JSON). A measurement stops
 * adding repetitions after --max-time once it has 3. The thread pool's own costs (an empty task,
 * two barriers) are printed in the header. 1 GB = 1e9 bytes, 1 GOP = 1e9 operations. Output: a
 * text table (stdout), --json FILE.
 *
 * Exit status: 0 done; 1 a kernel's output differs from the reference, or memory/threads failed;
 * 2 bad command line (the message names the flag and value). */
#include "kernels/i2s/i2s.h"
#include "kernels/lut/lut.h"
#include "runtime/lut_host.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#include "base/rng.h"
#include "runtime/threadpool.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#define KB_MAX_LIST 32
#define KB_MAX_JOBS 4096
#define KB_MAX_TILES 256
#define KB_MAX_SHAPES 64
#define KB_MIN_REPS 3

/* ---- small utilities ------------------------------------------------------------------------- */

static double kb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static bool kb_quiet = false;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static void kb_progress(const char *fmt, ...) {
    if (kb_quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bitnet-kernel-bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static size_t kb_round64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

static void *kb_alloc(size_t n) {
    return aligned_alloc(64, kb_round64(n ? n : 1));
}

static const char *kb_type_tag(int type) {
    switch (type) {
    case BITNET_TYPE_TL1: return "tl1";
    case BITNET_TYPE_TL2: return "tl2";
    case BITNET_TYPE_I2_S: return "i2_s";
    default: return "?";
    }
}

/* ---- command line ---------------------------------------------------------------------------- */

typedef struct kb_shape {
    int64_t M, K;
} kb_shape;

typedef struct kb_opts {
    int targets[2];
    int n_targets;
    kb_shape shapes[KB_MAX_SHAPES];
    int n_shapes;
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

static void kb_usage(FILE *f) {
    fprintf(f,
        "usage: bitnet-kernel-bench [options]\n"
        "\n"
        "Times the ternary matmul kernels through the matmul host (bitnet_mul_mat + thread pool) and\n"
        "compares them with this machine's streaming-read bandwidth measured in the same run.\n"
        "\n"
        "What is measured (default: every distinct shape+tiles of every registry table of the native\n"
        "target, i.e. configs/*.yaml as compiled into this build):\n"
        "  --target T           tl2, tl1, native (default: tl2 on x86-64, tl1 on AArch64) or all.\n"
        "                       TL1 on x86 and TL2 on ARM run the scalar LUT kernel (not representative).\n"
        "  --config NAME        only the tables of configs/NAME.yaml\n"
        "  --table NAME         only tables named NAME (default or pretuned)\n"
        "  --shape MxK[,MxK..]  these shapes instead of the registry (repeatable; M = output rows)\n"
        "  --tiles BM,BK,bm     tiles for every --shape (repeatable: each shape is measured with each);\n"
        "                       without it a shape gets the tiles the runtime would pick (registry\n"
        "                       table, else the default tile rule). The tiles must pass the kernel rules.\n"
        "  --generic            run the generic SIMD kernel even where a specialized one is compiled\n"
        "  --list               print what would be measured and exit\n"
        "\n"
        "How (defaults in brackets):\n"
        "  --threads LIST       thread counts, e.g. 1,2 [1,<online CPUs>]\n"
        "  --batch LIST|none    activation columns of the batched products [8,128,512]\n"
        "  --reps R             timed repetitions per measurement [7]\n"
        "  --min-time S         seconds of calls per repetition [0.05]\n"
        "  --max-time S         stop adding repetitions after S seconds (once there are 3) [2]\n"
        "  --budget S           wall-clock budget of the whole run; shapes left when it is spent are\n"
        "                       listed as skipped [none]\n"
        "  --quick              CI setting: --reps 3 --min-time 0.002 --max-time 0.2 --batch 8\n"
        "                       --bw-mib 32 (explicit flags after --quick override it)\n"
        "  --bw-mib N           buffer of the read-bandwidth measurement in MiB [1024]; 0 skips it\n"
        "  --no-bw              same as --bw-mib 0 (no roofline percentages)\n"
        "  --llc-mib N          last-level cache size [from /sys/devices/system/cpu/cpu0/cache]\n"
        "  --bust-factor F      rotate among copies totalling >= F x LLC [16; on the EPYC VM this was\n"
        "                       written on, 4x the LLC that sysfs reports still left ~10%% of the bytes\n"
        "                       in a cache, 16x and 48x measured the same]\n"
        "  --no-cache-bust      time one copy only (cached when it fits; the 'DRAM' columns say so)\n"
        "  --no-cache           skip the in-cache GEMV measurement\n"
        "  --no-i2s             do not time the I2_S reference path (it is still used for the check)\n"
        "  --no-lut             do not time the LUT constructor alone (no LUT%% column)\n"
        "  --pool-run           one bitnet_threadpool_run per product call (includes the pool's wake-up\n"
        "                       latency) instead of back-to-back calls inside one task\n"
        "  --seed N             seed of the random ternary weights and activations [1]\n"
        "  --json FILE          also write every number as JSON\n"
        "  -q, --quiet          no progress on stderr\n"
        "  -h, --help           this text\n"
        "\n"
        "Bandwidth: each thread sums its contiguous share of a buffer of --bw-mib MiB (touched first) with\n"
        "256-bit loads (AVX2; NEON/scalar elsewhere); GB/s = buffer bytes / wall time of the pass. It is\n"
        "measured before the kernels and again after them; the roofline is the larger median.\n"
        "Weight GB/s = bytes of the packed weight streams (TL2: index + sign + two-weight part; TL1 and\n"
        "I2_S: M*K/4) / time per GEMV. %%roof = weight GB/s / read GB/s at the same thread count.\n"
        "GOP/s = 2*M*K*N / time. LUT%% = time of the LUT constructor for the same N columns on one\n"
        "thread / time of the whole call (the host builds all LUTs on thread 0 before the barrier).\n"
        "Every product is checked bit for bit against the I2_S path (or bitnet_ref_gemm) first.\n"
        "\n"
        "Timing: product calls run back to back inside one thread-pool task, each followed by the\n"
        "pool barrier (as a graph executor runs consecutive products), unless --pool-run. Every call\n"
        "is timed; a repetition (>= --min-time of calls, after one warm-up repetition) yields its\n"
        "median call, and the table shows the median over repetitions with +-%% = their standard\n"
        "deviation (JSON also has min, max and the mean = throughput including stalls). The header\n"
        "prints the pool's own costs (an empty task, two barriers) to read small shapes against.\n"
        "Cache-busting: a weight smaller than --bust-factor x LLC is copied until the copies fill\n"
        "that much memory and successive calls rotate through them, so each call reads its weight\n"
        "from DRAM; 'in-cache' repeats one copy (shown only when it fits in half the LLC).\n"
        "1 GB = 1e9 bytes, 1 GOP = 1e9 operations.\n"
        "\n"
        "Exit status: 0 ok; 1 a kernel disagrees with the reference or an allocation failed; 2 bad usage.\n");
}

static int kb_bad(const char *flag, const char *value, const char *why) {
    fprintf(stderr, "bitnet-kernel-bench: %s %s: %s\n(run bitnet-kernel-bench --help for usage)\n", flag,
            value ? value : "(missing)", why);
    return 2;
}

static bool kb_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool kb_parse_f64(const char *s, double lo, double hi, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

/* "a,b,c" of integers in [lo, hi] → out (at most KB_MAX_LIST); false on any malformed item. */
static bool kb_parse_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int *n) {
    if (!s || !*s) return false;
    char buf[512];
    if (strlen(s) >= sizeof buf) return false;
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= KB_MAX_LIST || !kb_parse_i64(tok, lo, hi, &out[*n])) return false;
        ++*n;
    }
    return *n > 0;
}

static bool kb_parse_shape(const char *s, kb_shape *out) {
    const char *x = strpbrk(s, "xX*");
    if (!x) return false;
    char m[32];
    if ((size_t)(x - s) >= sizeof m) return false;
    memcpy(m, s, (size_t)(x - s));
    m[x - s] = '\0';
    return kb_parse_i64(m, 1, INT64_C(1) << 20, &out->M) && kb_parse_i64(x + 1, 1, INT64_C(1) << 20, &out->K);
}

static int kb_native_type(void) {
#if defined(__aarch64__)
    return BITNET_TYPE_TL1;
#else
    return BITNET_TYPE_TL2;
#endif
}

static int kb_parse_args(int argc, char **argv, kb_opts *o) {
    memset(o, 0, sizeof *o);
    o->reps = 7;
    o->min_time = 0.05;
    o->max_time = 2.0;
    o->bw_mib = 1024;
    o->bust_factor = 16.0;
    o->cache_bust = o->in_cache = o->i2s = o->lut_share = true;
    o->seed = 1;
    o->batch[0] = 8, o->batch[1] = 128, o->batch[2] = 512;
    o->n_batch = 3;
    const char *target = "native";
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define KB_NEED_VALUE()                                        \
    do {                                                       \
        if (!v) return kb_bad(a, NULL, "needs a value");       \
        ++i;                                                   \
    } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            kb_usage(stdout);
            exit(0);
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            kb_quiet = true;
        } else if (!strcmp(a, "--target")) {
            KB_NEED_VALUE();
            target = v;
        } else if (!strcmp(a, "--config")) {
            KB_NEED_VALUE();
            o->config = v;
        } else if (!strcmp(a, "--table")) {
            KB_NEED_VALUE();
            if (strcmp(v, "default") && strcmp(v, "pretuned")) return kb_bad(a, v, "must be default or pretuned");
            o->table = v;
        } else if (!strcmp(a, "--shape")) {
            KB_NEED_VALUE();
            char buf[512];
            if (strlen(v) >= sizeof buf) return kb_bad(a, v, "too long");
            strcpy(buf, v);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o->n_shapes >= KB_MAX_SHAPES) return kb_bad(a, v, "too many shapes");
                if (!kb_parse_shape(tok, &o->shapes[o->n_shapes]))
                    return kb_bad(a, tok, "expected MxK with positive integers up to 1048576, e.g. 2560x6912");
                o->n_shapes++;
            }
        } else if (!strcmp(a, "--tiles")) {
            KB_NEED_VALUE();
            int64_t t[KB_MAX_LIST];
            int n = 0;
            if (!kb_parse_list(v, 1, 8192, t, &n) || n != 3)
                return kb_bad(a, v, "expected BM,BK,bm (three positive integers, BM <= 8192)");
            if (o->n_tiles >= KB_MAX_TILES) return kb_bad(a, v, "too many --tiles");
            o->tiles[o->n_tiles++] = (bitnet_tiles){(int32_t)t[0], (int32_t)t[1], (int32_t)t[2]};
        } else if (!strcmp(a, "--generic")) {
            o->force_generic = true;
        } else if (!strcmp(a, "--list")) {
            o->list_only = true;
        } else if (!strcmp(a, "--threads")) {
            KB_NEED_VALUE();
            int64_t t[KB_MAX_LIST];
            int n = 0;
            if (!kb_parse_list(v, 1, 1024, t, &n)) return kb_bad(a, v, "expected a list of thread counts 1..1024");
            o->n_threads = 0;
            for (int j = 0; j < n; ++j) {
                bool dup = false;
                for (int q = 0; q < o->n_threads; ++q) dup |= o->threads[q] == t[j];
                if (!dup) o->threads[o->n_threads++] = (int)t[j];
            }
        } else if (!strcmp(a, "--batch")) {
            KB_NEED_VALUE();
            if (!strcmp(v, "none")) {
                o->n_batch = 0;
            } else if (!kb_parse_list(v, 1, 65536, o->batch, &o->n_batch)) {
                return kb_bad(a, v, "expected a list of column counts 1..65536, or none");
            }
        } else if (!strcmp(a, "--reps")) {
            KB_NEED_VALUE();
            int64_t r;
            if (!kb_parse_i64(v, 1, 1000, &r)) return kb_bad(a, v, "expected 1..1000");
            o->reps = (int)r;
        } else if (!strcmp(a, "--min-time")) {
            KB_NEED_VALUE();
            if (!kb_parse_f64(v, 0.0, 60.0, &o->min_time)) return kb_bad(a, v, "expected seconds in [0, 60]");
        } else if (!strcmp(a, "--max-time")) {
            KB_NEED_VALUE();
            if (!kb_parse_f64(v, 0.0, 3600.0, &o->max_time)) return kb_bad(a, v, "expected seconds in [0, 3600]");
        } else if (!strcmp(a, "--budget")) {
            KB_NEED_VALUE();
            if (!kb_parse_f64(v, 0.001, 1e7, &o->budget)) return kb_bad(a, v, "expected seconds > 0");
        } else if (!strcmp(a, "--quick")) {
            o->reps = 3;
            o->min_time = 0.002;
            o->max_time = 0.2;
            o->batch[0] = 8;
            o->n_batch = 1;
            o->bw_mib = 32;
        } else if (!strcmp(a, "--bw-mib")) {
            KB_NEED_VALUE();
            if (!kb_parse_i64(v, 0, INT64_C(1) << 20, &o->bw_mib)) return kb_bad(a, v, "expected MiB >= 0");
        } else if (!strcmp(a, "--no-bw")) {
            o->bw_mib = 0;
        } else if (!strcmp(a, "--llc-mib")) {
            KB_NEED_VALUE();
            if (!kb_parse_i64(v, 1, INT64_C(1) << 20, &o->llc_mib)) return kb_bad(a, v, "expected MiB >= 1");
        } else if (!strcmp(a, "--bust-factor")) {
            KB_NEED_VALUE();
            if (!kb_parse_f64(v, 1.0, 1000.0, &o->bust_factor)) return kb_bad(a, v, "expected 1..1000");
        } else if (!strcmp(a, "--no-cache-bust")) {
            o->cache_bust = false;
        } else if (!strcmp(a, "--no-cache")) {
            o->in_cache = false;
        } else if (!strcmp(a, "--no-i2s")) {
            o->i2s = false;
        } else if (!strcmp(a, "--pool-run")) {
            o->pool_run = true;
        } else if (!strcmp(a, "--no-lut")) {
            o->lut_share = false;
        } else if (!strcmp(a, "--seed")) {
            KB_NEED_VALUE();
            int64_t s;
            if (!kb_parse_i64(v, 0, INT64_MAX, &s)) return kb_bad(a, v, "expected a non-negative integer");
            o->seed = (uint64_t)s;
        } else if (!strcmp(a, "--json")) {
            KB_NEED_VALUE();
            o->json = v;
        } else {
            return kb_bad("argument", a, "unknown (see --help)");
        }
#undef KB_NEED_VALUE
    }
    if (!strcmp(target, "native")) {
        o->targets[0] = kb_native_type();
        o->n_targets = 1;
    } else if (!strcmp(target, "tl2")) {
        o->targets[0] = BITNET_TYPE_TL2;
        o->n_targets = 1;
    } else if (!strcmp(target, "tl1")) {
        o->targets[0] = BITNET_TYPE_TL1;
        o->n_targets = 1;
    } else if (!strcmp(target, "all")) {
        o->targets[0] = BITNET_TYPE_TL2;
        o->targets[1] = BITNET_TYPE_TL1;
        o->n_targets = 2;
    } else {
        return kb_bad("--target", target, "must be tl1, tl2, native or all");
    }
    if (o->n_tiles && !o->n_shapes) return kb_bad("--tiles", NULL, "needs --shape (tiles belong to a shape)");
    if (o->n_shapes && (o->config || o->table))
        return kb_bad("--shape", NULL, "cannot be combined with --config/--table (those select registry tables)");
    if (o->n_threads == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        if (nc < 1) nc = 1;
        if (nc > 1024) nc = 1024;
        o->threads[o->n_threads++] = 1;
        if (nc > 1) o->threads[o->n_threads++] = (int)nc;
    }
    return 0;
}

/* ---- machine facts --------------------------------------------------------------------------- */

/* "model name" (x86) or a description of the AArch64 core from /proc/cpuinfo; "unknown" otherwise. */
static void kb_cpu_model(char *out, size_t n) {
    snprintf(out, n, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512], impl[64] = "", part[64] = "";
    while (fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (!c) continue;
        char *val = c + 1;
        while (*val == ' ' || *val == '\t') ++val;
        val[strcspn(val, "\n")] = '\0';
        if (!strncmp(line, "model name", 10)) {
            snprintf(out, n, "%s", val);
            break;
        }
        if (!strncmp(line, "CPU implementer", 15) && !impl[0]) snprintf(impl, sizeof impl, "%s", val);
        if (!strncmp(line, "CPU part", 8) && !part[0]) snprintf(part, sizeof part, "%s", val);
    }
    fclose(f);
    if (!strcmp(out, "unknown") && impl[0]) snprintf(out, n, "ARM implementer %s part %s", impl, part);
}

/* Bytes of the largest data/unified cache of cpu0 (sysfs), 0 when unknown. */
static int64_t kb_llc_bytes(int *level_out) {
    int64_t best = 0;
    for (int idx = 0; idx < 16; ++idx) {
        char path[128], buf[64];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", idx);
        FILE *f = fopen(path, "r");
        if (!f) break;
        bool ok = fgets(buf, sizeof buf, f) && strncmp(buf, "Instruction", 11) != 0;
        fclose(f);
        if (!ok) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", idx);
        f = fopen(path, "r");
        if (!f) continue;
        int64_t size = 0;
        if (fgets(buf, sizeof buf, f)) {
            char *end;
            long long v = strtoll(buf, &end, 10);
            if (v > 0) size = v * (*end == 'M' ? 1048576 : *end == 'K' ? 1024 : 1);
        }
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", idx);
        f = fopen(path, "r");
        int level = 0;
        if (f) {
            if (fgets(buf, sizeof buf, f)) level = atoi(buf);
            fclose(f);
        }
        if (size > best) {
            best = size;
            if (level_out) *level_out = level;
        }
    }
    return best;
}

static void kb_loadavg(double out[3]) {
    out[0] = out[1] = out[2] = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3) out[0] = out[1] = out[2] = -1.0;
    fclose(f);
}

static bool kb_isa(const char *name) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!strcmp(name, "avx2")) return __builtin_cpu_supports("avx2");
    if (!strcmp(name, "avx512f")) return __builtin_cpu_supports("avx512f");
    if (!strcmp(name, "avx512bw")) return __builtin_cpu_supports("avx512bw");
    if (!strcmp(name, "avx512vnni")) return __builtin_cpu_supports("avx512vnni");
#endif
    return bitnet_cpu_supports(name);
}

/* ---- timing ---------------------------------------------------------------------------------- */

typedef struct kb_stats {
    double median, min, max, sd; /* seconds per call: over repetitions, of each repetition's median call */
    double mean;                 /* median over repetitions of (repetition time / calls): throughput */
    int reps;
    int64_t calls;
    bool valid;
} kb_stats;

typedef void (*kb_call_fn)(void *ctx, int64_t i);

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
    t->start = t->rep_t0 = kb_now();
}

/* Before each call: closes a repetition that has run long enough; false when the measurement is over. */
static bool kb_timer_more(kb_timer *t) {
    const double now = kb_now();
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
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < s.reps; ++i) sum += t->med[i];
    const double avg = sum / s.reps;
    for (int i = 0; i < s.reps; ++i) sq += (t->med[i] - avg) * (t->med[i] - avg);
    s.sd = s.reps > 1 ? sqrt(sq / (s.reps - 1)) : 0.0;
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
static kb_stats kb_measure(kb_call_fn call, void *ctx, const kb_opts *o) {
    kb_timer t;
    kb_timer_init(&t, o);
    int64_t idx = 0;
    while (kb_timer_more(&t)) {
        const double c0 = kb_now();
        call(ctx, idx++);
        kb_timer_add(&t, kb_now() - c0);
    }
    return kb_timer_finish(&t);
}

/* ---- streaming-read bandwidth ---------------------------------------------------------------- */

typedef struct kb_bw_ctx {
    const uint8_t *buf;
    size_t bytes;
    uint64_t sums[1024];
} kb_bw_ctx;

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

static const char *kb_bw_method(void) {
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

typedef struct kb_bw_run {
    kb_bw_ctx *c;
    bitnet_threadpool *tp;
} kb_bw_run;

static void kb_bw_call(void *arg, int64_t i) {
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

static void kb_arena_release(void) {
    free(kb_arena);
    kb_arena = NULL;
    kb_arena_size = 0;
    kb_arena_busy = false;
}

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

static void kb_wset_free(kb_wset *w) {
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
static bitnet_status kb_wset_make(kb_wset *ws, int type, bitnet_tiles tiles, const int8_t *w8, int64_t M, int64_t K,
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
    return BITNET_OK;
}

/* ---- products -------------------------------------------------------------------------------- */

typedef struct kb_mm {
    kb_wset *w;
    int n_rot;            /* copies used: 1 (cached) or w->n_copies */
    int cur;
    bitnet_tensor x, y;
    void *ws;
    size_t wsize;
    bitnet_threadpool *tp;
} kb_mm;

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
            c0 = kb_now();
        }
        if (nth > 1) bitnet_threadpool_barrier(L->tp);
        if (!L->go) break;
        if (L->mm) bitnet_mul_mat(&L->mm->w->copies[L->mm->cur], &L->mm->x, &L->mm->y, L->mm->ws, L->mm->wsize, ith, nth, L->tp);
        if (nth > 1) bitnet_threadpool_barrier(L->tp);
        if (ith == 0) kb_timer_add(L->t, kb_now() - c0);
    }
}

static kb_stats kb_measure_in_task(kb_mm *mm, bitnet_threadpool *tp, const kb_opts *o) {
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

static void kb_empty_call(void *arg, int64_t i) {
    (void)i;
    bitnet_threadpool_run((bitnet_threadpool *)arg, kb_empty_task, NULL);
}

static void kb_f32_tensor(bitnet_tensor *t, const char *name, float *data, int64_t cols, int64_t rows) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = BITNET_TYPE_F32;
    t->n_dims = 2;
    t->ne[0] = cols, t->ne[1] = rows, t->ne[2] = t->ne[3] = 1;
    t->nb[0] = sizeof(float);
    t->nb[1] = (size_t)cols * sizeof(float);
    t->data = data;
    t->nbytes = (size_t)(cols * rows) * sizeof(float);
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

/* ---- jobs ------------------------------------------------------------------------------------ */

typedef struct kb_job {
    int type;
    int64_t M, K;
    bitnet_tiles tiles;
    char origins[1024];
} kb_job;

static int kb_job_cmp(const void *a, const void *b) {
    const kb_job *x = (const kb_job *)a, *y = (const kb_job *)b;
    if (x->type != y->type) return x->type > y->type ? -1 : 1; /* TL2 first */
    if (x->M * x->K != y->M * y->K) return x->M * x->K < y->M * y->K ? -1 : 1;
    if (x->M != y->M) return x->M < y->M ? -1 : 1;
    if (x->K != y->K) return x->K < y->K ? -1 : 1;
    if (x->tiles.BM != y->tiles.BM) return x->tiles.BM < y->tiles.BM ? -1 : 1;
    if (x->tiles.BK != y->tiles.BK) return x->tiles.BK < y->tiles.BK ? -1 : 1;
    return (x->tiles.bm > y->tiles.bm) - (x->tiles.bm < y->tiles.bm);
}

static void kb_append_origin(kb_job *j, const char *origin) {
    size_t len = strlen(j->origins);
    if (len + strlen(origin) + 3 >= sizeof j->origins) return;
    snprintf(j->origins + len, sizeof j->origins - len, "%s%s", len ? ", " : "", origin);
}

/* Add (type, M, K, tiles) unless present; then append `origin`. */
static int kb_add_job(kb_job *jobs, int n, int type, int64_t M, int64_t K, bitnet_tiles t, const char *origin) {
    for (int i = 0; i < n; ++i) {
        if (jobs[i].type == type && jobs[i].M == M && jobs[i].K == K && jobs[i].tiles.BM == t.BM &&
            jobs[i].tiles.BK == t.BK && jobs[i].tiles.bm == t.bm) {
            kb_append_origin(&jobs[i], origin);
            return n;
        }
    }
    if (n >= KB_MAX_JOBS) return n;
    memset(&jobs[n], 0, sizeof jobs[n]);
    jobs[n].type = type;
    jobs[n].M = M;
    jobs[n].K = K;
    jobs[n].tiles = t;
    kb_append_origin(&jobs[n], origin);
    return n + 1;
}

/* ---- results --------------------------------------------------------------------------------- */

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

static double kb_gbps(size_t bytes, const kb_stats *s) {
    return s->valid && s->median > 0 ? (double)bytes / s->median * 1e-9 : NAN;
}

static double kb_bw_for(const kb_bw *bw, int n_bw, int threads) {
    for (int i = 0; i < n_bw; ++i)
        if (bw[i].threads == threads) return bw[i].gbps_median;
    return NAN;
}

/* ---- measuring one weight set ---------------------------------------------------------------- */

typedef struct kb_env {
    const kb_opts *o;
    bitnet_threadpool **pools; /* one per o->threads[i] */
    int64_t llc;
} kb_env;

static int kb_copies_for(const kb_env *e, size_t packed) {
    if (!e->o->cache_bust) return 1;
    const double want = e->o->bust_factor * (double)e->llc;
    const double stride = (double)kb_round64(packed);
    double n = ceil(want / stride);
    if (n < 1) n = 1;
    if (n > 1e6) n = 1e6;
    return (int)n;
}

/* Measure GEMV and batched products of one weight set; fills r. x: [max N][K] floats, y: [max N][M]. */
static bitnet_status kb_measure_wset(const kb_env *e, kb_wset *w, float *x, float *y, kb_result *r,
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
static bitnet_status kb_product(const kb_env *e, kb_wset *w, float *x, float *y, int64_t N, bitnet_error *err) {
    kb_mm mm;
    bitnet_status st = kb_mm_setup(&mm, w, x, y, N, e->pools[e->o->n_threads - 1], err);
    if (st) return st;
    kb_mm_call(&mm, 0);
    free(mm.ws);
    return BITNET_OK;
}

/* The reference output by bitnet_ref_gemm (exact integers) and LAYOUTS.md §1's two float operations. */
static void kb_ref_product(const kb_wset *w, const float *x, float *y, int64_t N) {
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

/* ---- JSON ------------------------------------------------------------------------------------ */

static void kb_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; ++s) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void kb_json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fprintf(f, "null");
}

/* {"median_us":..,"min_us":..,"max_us":..,"sd_us":..,"reps":..,"calls":..} or null */
static void kb_json_stats(FILE *f, const kb_stats *s) {
    if (!s->valid) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"median_us\": ");
    kb_json_num(f, s->median * 1e6);
    fprintf(f, ", \"min_us\": ");
    kb_json_num(f, s->min * 1e6);
    fprintf(f, ", \"max_us\": ");
    kb_json_num(f, s->max * 1e6);
    fprintf(f, ", \"sd_us\": ");
    kb_json_num(f, s->sd * 1e6);
    fprintf(f, ", \"mean_us\": ");
    kb_json_num(f, s->mean * 1e6);
    fprintf(f, ", \"reps\": %d, \"calls\": %lld}", s->reps, (long long)s->calls);
}

static double kb_share(const kb_stats *ctor, const kb_stats *call) {
    return ctor->valid && call->valid && call->median > 0 ? ctor->median / call->median : NAN;
}

static void kb_json_result(FILE *f, const kb_opts *o, const kb_result *r, const kb_bw *bw, int n_bw,
                           int64_t M, int64_t K) {
    fprintf(f, "{\"kernel\": ");
    kb_json_str(f, r->kernel ? r->kernel : "?");
    fprintf(f, ", \"specialized\": %s, \"packed_bytes\": %zu, \"read_bytes\": %zu, \"cache_bust_copies\": %d,\n",
            r->specialized ? "true" : "false", r->packed_bytes, r->read_bytes, r->n_copies);
    fprintf(f, "       \"lut_ctor_1col\": ");
    kb_json_stats(f, &r->ctor1);
    fprintf(f, ",\n       \"gemv\": [");
    for (int ti = 0; ti < o->n_threads; ++ti) {
        const kb_gemv *g = &r->gemv[ti];
        const double gb = kb_gbps(r->read_bytes, &g->dram), rb = kb_bw_for(bw, n_bw, g->threads);
        fprintf(f, "%s\n         {\"threads\": %d, \"dram\": ", ti ? "," : "", g->threads);
        kb_json_stats(f, &g->dram);
        fprintf(f, ", \"gbps\": ");
        kb_json_num(f, gb);
        fprintf(f, ", \"roofline_pct\": ");
        kb_json_num(f, 100.0 * gb / rb);
        fprintf(f, ", \"lut_share\": ");
        kb_json_num(f, kb_share(&r->ctor1, &g->dram));
        fprintf(f, ", \"cache\": ");
        kb_json_stats(f, &g->cache);
        fprintf(f, ", \"cache_gbps\": ");
        kb_json_num(f, kb_gbps(r->read_bytes, &g->cache));
        fprintf(f, "}");
    }
    fprintf(f, "],\n       \"batch\": [");
    for (int i = 0; i < r->n_batch; ++i) {
        const kb_batch *b = &r->batch[i];
        int bi = 0;
        while (bi < o->n_batch && o->batch[bi] != b->N) ++bi;
        fprintf(f, "%s\n         {\"n\": %lld, \"threads\": %d, \"time\": ", i ? "," : "", (long long)b->N, b->threads);
        kb_json_stats(f, &b->t);
        fprintf(f, ", \"gops\": ");
        kb_json_num(f, b->t.valid ? 2.0 * (double)M * (double)K * (double)b->N / b->t.median * 1e-9 : NAN);
        fprintf(f, ", \"lut_share\": ");
        kb_json_num(f, bi < o->n_batch ? kb_share(&r->ctorN[bi], &b->t) : NAN);
        fprintf(f, "}");
    }
    fprintf(f, "]}");
}

/* ---- text output ----------------------------------------------------------------------------- */

static void kb_fmt_us(char *out, size_t n, const kb_stats *s) {
    if (!s->valid) {
        snprintf(out, n, "-");
        return;
    }
    const double us = s->median * 1e6;
    const double pct = s->median > 0 ? 100.0 * s->sd / s->median : 0.0;
    if (us >= 10000) snprintf(out, n, "%.0f±%.0f%%", us, pct);
    else if (us >= 100) snprintf(out, n, "%.1f±%.0f%%", us, pct);
    else snprintf(out, n, "%.2f±%.0f%%", us, pct);
}

static void kb_fmt_num(char *out, size_t n, double v, int prec) {
    if (isfinite(v)) snprintf(out, n, "%.*f", prec, v);
    else snprintf(out, n, "-");
}

/* ---- main ------------------------------------------------------------------------------------ */

typedef struct kb_done {
    kb_job job;
    kb_result lut, i2s;
    bool have_i2s;
    char check[192];
} kb_done;

static int kb_build_jobs(const kb_opts *o, kb_job *jobs) {
    int n = 0;
    char origin[300];
    if (o->n_shapes) {
        for (int ti = 0; ti < o->n_targets; ++ti) {
            const int type = o->targets[ti];
            for (int s = 0; s < o->n_shapes; ++s) {
                const int64_t M = o->shapes[s].M, K = o->shapes[s].K;
                if (o->n_tiles) {
                    for (int t = 0; t < o->n_tiles; ++t) n = kb_add_job(jobs, n, type, M, K, o->tiles[t], "--tiles");
                } else {
                    bitnet_tiles t = bitnet_lut_tiles_for(type, M, K, NULL, "default");
                    n = kb_add_job(jobs, n, type, M, K, t, "runtime choice (registry table or default rule)");
                }
            }
        }
        return n;
    }
    for (size_t i = 0; i < bitnet_lut_n_tables; ++i) {
        const bitnet_lut_table *t = &bitnet_lut_tables[i];
        bool want_type = false;
        for (int ti = 0; ti < o->n_targets; ++ti) want_type |= t->type == o->targets[ti];
        if (!want_type) continue;
        if (o->config && strcmp(o->config, t->config)) continue;
        if (o->table && strcmp(o->table, t->table)) continue;
        snprintf(origin, sizeof origin, "%s/%s", t->config, t->table);
        for (size_t e = 0; e < t->n_entries; ++e)
            n = kb_add_job(jobs, n, t->type, t->entries[e].M, t->entries[e].K, t->entries[e].tiles, origin);
    }
    qsort(jobs, (size_t)n, sizeof *jobs, kb_job_cmp);
    return n;
}

static void kb_random_weights(int8_t *w, int64_t n, uint64_t seed) {
    bitnet_rng r;
    bitnet_rng_seed(&r, seed);
    int64_t i = 0;
    while (i < n) {
        uint64_t v = bitnet_rng_next(&r);
        for (int b = 0; b < 8 && i < n; ++b, ++i, v >>= 8) w[i] = (int8_t)((int)((v & 0xff) % 3) - 1);
    }
}

static void kb_random_acts(float *x, int64_t n, uint64_t seed) {
    bitnet_rng r;
    bitnet_rng_seed(&r, seed ^ 0x5eed5eedULL);
    for (int64_t i = 0; i < n; ++i) x[i] = (float)(2.0 * bitnet_rng_uniform(&r) - 1.0);
}

int main(int argc, char **argv) {
    kb_opts o;
    int rc = kb_parse_args(argc, argv, &o);
    if (rc) return rc;

    kb_job *jobs = (kb_job *)calloc(KB_MAX_JOBS, sizeof *jobs);
    if (!jobs) {
        fprintf(stderr, "bitnet-kernel-bench: out of memory\n");
        return 1;
    }
    const int n_jobs = kb_build_jobs(&o, jobs);
    if (n_jobs == 0) {
        fprintf(stderr, "bitnet-kernel-bench: nothing to measure (no registry table of the target%s%s%s)\n",
                o.config ? " in config " : "", o.config ? o.config : "", o.table ? " with that table name" : "");
        free(jobs);
        return 2;
    }
    for (int j = 0; j < n_jobs; ++j) {
        bitnet_error err;
        if (jobs[j].tiles.BM == 0) {
            fprintf(stderr, "bitnet-kernel-bench: %s %lldx%lld: no legal tiles (no table has the shape and the default "
                            "tile rule finds none); give --tiles\n",
                    kb_type_tag(jobs[j].type), (long long)jobs[j].M, (long long)jobs[j].K);
            free(jobs);
            return 2;
        }
        if (bitnet_tiles_check(jobs[j].type, jobs[j].M, jobs[j].K, jobs[j].tiles, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-kernel-bench: --tiles %d,%d,%d: %s\n", jobs[j].tiles.BM, jobs[j].tiles.BK,
                    jobs[j].tiles.bm, err.msg);
            free(jobs);
            return 2;
        }
    }
    if (o.list_only) {
        for (int j = 0; j < n_jobs; ++j)
            printf("%s %lldx%lld tiles %d/%d/%d  (%s)\n", kb_type_tag(jobs[j].type), (long long)jobs[j].M,
                   (long long)jobs[j].K, jobs[j].tiles.BM, jobs[j].tiles.BK, jobs[j].tiles.bm, jobs[j].origins);
        free(jobs);
        return 0;
    }

    const double t_start = kb_now();
    kb_env env;
    memset(&env, 0, sizeof env);
    env.o = &o;
    int llc_level = 0;
    env.llc = o.llc_mib ? o.llc_mib * 1048576 : kb_llc_bytes(&llc_level);
    if (env.llc <= 0) env.llc = 32 * 1048576;
    char cpu[256];
    kb_cpu_model(cpu, sizeof cpu);
    double load0[3];
    kb_loadavg(load0);
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    bitnet_threadpool *pools[KB_MAX_LIST] = {0};
    for (int i = 0; i < o.n_threads; ++i) {
        bitnet_error err;
        if (bitnet_threadpool_create(o.threads[i], &pools[i], &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-kernel-bench: thread pool of %d: %s\n", o.threads[i], err.msg);
            for (int q = 0; q < i; ++q) bitnet_threadpool_free(pools[q]);
            free(jobs);
            return 1;
        }
    }
    env.pools = pools;

    printf("# bitnet-kernel-bench  %s\n", date);
    printf("# cpu: %s; %ld online CPUs; LLC %lld MiB%s; AVX2 %s, AVX-512F %s; load average %.2f %.2f %.2f\n", cpu, ncpu,
           (long long)(env.llc / 1048576), o.llc_mib ? " (--llc-mib)" : llc_level ? "" : " (assumed)",
           kb_isa("avx2") ? "yes" : "no", kb_isa("avx512f") ? "yes" : "no", load0[0], load0[1], load0[2]);
    printf("# timing: median of up to %d repetitions of >= %g s (after a warm-up), stop after %g s; ±%% = stddev\n",
           o.reps, o.min_time, o.max_time);
    printf("#         each repetition's time is its median call; the JSON adds the mean (throughput with stalls)\n");

    /* Bandwidth: measured before the kernels and again after them (the load of a shared machine
     * changes during a long run); the roofline uses the larger of the two medians per thread count. */
    kb_bw bw[KB_MAX_LIST];
    int n_bw = 0;
    uint8_t *bw_buf = NULL;
    kb_bw_ctx *bw_ctx = NULL;
    const size_t bw_bytes = (size_t)o.bw_mib * 1048576;
    if (o.bw_mib > 0) {
        bw_buf = (uint8_t *)kb_alloc(bw_bytes);
        bw_ctx = (kb_bw_ctx *)calloc(1, sizeof *bw_ctx);
        if (!bw_buf || !bw_ctx) {
            fprintf(stderr, "bitnet-kernel-bench: out of memory for the %lld MiB bandwidth buffer (use --bw-mib)\n",
                    (long long)o.bw_mib);
            free(bw_buf);
            free(bw_ctx);
            bw_buf = NULL;
            bw_ctx = NULL;
        } else {
            for (size_t i = 0; i < bw_bytes; i += 8) {
                const uint64_t v = i * 0x9e3779b97f4a7c15ULL;
                memcpy(bw_buf + i, &v, 8);
            }
            bw_ctx->buf = bw_buf;
            bw_ctx->bytes = bw_bytes;
            for (int ti = 0; ti < o.n_threads; ++ti) {
                kb_bw_run run = {bw_ctx, pools[ti]};
                kb_progress("read bandwidth, %d thread(s), %lld MiB", o.threads[ti], (long long)o.bw_mib);
                kb_bw *b = &bw[n_bw++];
                memset(b, 0, sizeof *b);
                b->threads = o.threads[ti];
                b->s = kb_measure(kb_bw_call, &run, &o);
                b->gbps_start = (double)(bw_bytes / 4096 * 4096) / b->s.median * 1e-9;
                b->gbps_max = (double)(bw_bytes / 4096 * 4096) / b->s.min * 1e-9;
                b->gbps_median = b->gbps_start;
            }
            printf("# read bandwidth at the start (%s, each thread sums its share of a %lld MiB buffer%s):",
                   kb_bw_method(), (long long)o.bw_mib,
                   (double)bw_bytes < 4.0 * (double)env.llc ? "; SMALLER than 4x LLC, not a DRAM number" : "");
            for (int i = 0; i < n_bw; ++i)
                printf("%s %d thread%s %.2f GB/s (max %.2f)", i ? "," : "", bw[i].threads, bw[i].threads > 1 ? "s" : "",
                       bw[i].gbps_start, bw[i].gbps_max);
            printf("\n");
        }
    } else {
        printf("# read bandwidth: not measured (--no-bw); no roofline percentages\n");
    }
    /* Thread-pool costs, to read the product times against. */
    kb_stats pool_rt[KB_MAX_LIST], pool_bar[KB_MAX_LIST];
    {
        kb_opts po = o;
        po.min_time = o.min_time < 0.01 ? o.min_time : 0.01;
        printf("# thread pool per call: empty task (bitnet_threadpool_run)");
        for (int ti = 0; ti < o.n_threads; ++ti) {
            pool_rt[ti] = kb_measure(kb_empty_call, pools[ti], &po);
            printf("%s %d thr %.2f us", ti ? "," : "", o.threads[ti], pool_rt[ti].median * 1e6);
        }
        printf("; two barriers inside a task");
        for (int ti = 0; ti < o.n_threads; ++ti) {
            pool_bar[ti] = kb_measure_in_task(NULL, pools[ti], &po);
            printf("%s %d thr %.2f us", ti ? "," : "", o.threads[ti], pool_bar[ti].median * 1e6);
        }
        printf("\n# product calls run %s\n",
               o.pool_run ? "one bitnet_threadpool_run each (--pool-run: the round trip above is included)"
                          : "back to back inside one pool task, each followed by a barrier (the barrier pair above is "
                            "included, the round trip is not; --pool-run changes that)");
    }
    printf("# GEMV weights from DRAM: calls rotate among copies totalling >= %gx LLC (%s)\n", o.bust_factor,
           o.cache_bust ? "cache-busting" : "DISABLED by --no-cache-bust: one copy, cached when it fits");
    fflush(stdout);

    kb_done *done = (kb_done *)calloc((size_t)n_jobs, sizeof *done);
    int n_done = 0, n_mismatch = 0;
    int64_t maxN = 1;
    for (int b = 0; b < o.n_batch; ++b) maxN = o.batch[b] > maxN ? o.batch[b] : maxN;

    int8_t *w8 = NULL;
    int64_t w8_M = 0, w8_K = 0;
    float *x = NULL, *y = NULL, *yref1 = NULL, *yrefN = NULL;
    const int64_t Ncheck = o.n_batch ? o.batch[0] : 1;
    kb_result i2s_res;
    bool have_i2s = false, ref_is_i2s = false;
    bool failed = false;
    int skipped_from = -1;
    for (int j = 0; j < n_jobs && done; ++j) {
        const kb_job *jb = &jobs[j];
        if (o.budget > 0 && kb_now() - t_start > o.budget) {
            skipped_from = j;
            break;
        }
        const int64_t M = jb->M, K = jb->K;
        bitnet_error err;
        err.msg[0] = '\0';
        kb_progress("%s %lldx%lld tiles %d/%d/%d (%d of %d)", kb_type_tag(jb->type), (long long)M, (long long)K,
                    jb->tiles.BM, jb->tiles.BK, jb->tiles.bm, j + 1, n_jobs);
        if (!w8 || w8_M != M || w8_K != K) {
            /* A new shape: random weights and activations, the reference outputs for the check (I2_S
             * through the host, or bitnet_ref_gemm when I2_S cannot hold the shape) and, unless
             * --no-i2s, the I2_S timings (shared by every tiles of the shape). */
            free(w8);
            free(x);
            free(y);
            free(yref1);
            free(yrefN);
            w8 = (int8_t *)malloc((size_t)(M * K));
            x = (float *)kb_alloc((size_t)(maxN * K) * sizeof(float));
            y = (float *)kb_alloc((size_t)(maxN * M) * sizeof(float));
            yref1 = (float *)kb_alloc((size_t)M * sizeof(float));
            yrefN = (float *)kb_alloc((size_t)(Ncheck * M) * sizeof(float));
            if (!w8 || !x || !y || !yref1 || !yrefN) {
                fprintf(stderr, "bitnet-kernel-bench: out of memory for %lldx%lld\n", (long long)M, (long long)K);
                failed = true;
                break;
            }
            kb_random_weights(w8, M * K, o.seed + (uint64_t)(M * 1000003 + K));
            kb_random_acts(x, maxN * K, o.seed + (uint64_t)K);
            w8_M = M, w8_K = K;
            have_i2s = false;
            ref_is_i2s = (M * K) % 128 == 0;
            if (ref_is_i2s) {
                kb_wset wi;
                const int copies = o.i2s ? kb_copies_for(&env, bitnet_i2s_nbytes(M, K)) : 1;
                if (kb_wset_make(&wi, BITNET_TYPE_I2_S, (bitnet_tiles){0, 0, 0}, w8, M, K, copies, false, &err)) {
                    fprintf(stderr, "bitnet-kernel-bench: I2_S %lldx%lld: %s\n", (long long)M, (long long)K, err.msg);
                    failed = true;
                    break;
                }
                bitnet_status st = kb_product(&env, &wi, x, yref1, 1, &err);
                if (!st) st = kb_product(&env, &wi, x, yrefN, Ncheck, &err);
                if (!st && o.i2s) {
                    kb_progress("  I2_S reference path %lldx%lld", (long long)M, (long long)K);
                    st = kb_measure_wset(&env, &wi, x, y, &i2s_res, &err);
                    have_i2s = st == BITNET_OK;
                }
                kb_wset_free(&wi);
                bitnet_lut_free();
                if (st) {
                    fprintf(stderr, "bitnet-kernel-bench: I2_S %lldx%lld: %s\n", (long long)M, (long long)K, err.msg);
                    failed = true;
                    break;
                }
            }
        }
        kb_done *d = &done[n_done];
        d->job = *jb;

        kb_wset wl;
        if (kb_wset_make(&wl, jb->type, jb->tiles, w8, M, K, kb_copies_for(&env, jb->type == BITNET_TYPE_TL1
                                                                                    ? bitnet_tl1_nbytes(M, K)
                                                                                    : bitnet_tl2_nbytes(M, K)),
                         o.force_generic, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-kernel-bench: %s %lldx%lld tiles %d/%d/%d: %s\n", kb_type_tag(jb->type),
                    (long long)M, (long long)K, jb->tiles.BM, jb->tiles.BK, jb->tiles.bm, err.msg);
            failed = true;
            break;
        }
        if (!ref_is_i2s) {
            kb_ref_product(&wl, x, yref1, 1);
            kb_ref_product(&wl, x, yrefN, Ncheck);
        }

        /* correctness first: N = 1 and N = Ncheck with all threads, bit for bit */
        snprintf(d->check, sizeof d->check, "bit-exact with %s (N = 1, %lld)",
                 ref_is_i2s ? "I2_S" : "bitnet_ref_gemm", (long long)Ncheck);
        const int64_t checks[2] = {1, Ncheck};
        for (int c = 0; c < (Ncheck > 1 ? 2 : 1); ++c) {
            const int64_t N = checks[c];
            const float *yref = c ? yrefN : yref1;
            if (kb_product(&env, &wl, x, y, N, &err) != BITNET_OK) {
                fprintf(stderr, "bitnet-kernel-bench: %s\n", err.msg);
                failed = true;
                break;
            }
            if (memcmp(y, yref, (size_t)(N * M) * sizeof(float)) != 0) {
                int64_t bad = 0;
                while (bad < N * M && !memcmp(&y[bad], &yref[bad], sizeof(float))) ++bad;
                snprintf(d->check, sizeof d->check, "MISMATCH at N = %lld, column %lld row %lld: %.9g vs %.9g",
                         (long long)N, (long long)(bad / M), (long long)(bad % M), (double)y[bad], (double)yref[bad]);
                fprintf(stderr, "bitnet-kernel-bench: %s %lldx%lld tiles %d/%d/%d (%s): %s\n", kb_type_tag(jb->type),
                        (long long)M, (long long)K, jb->tiles.BM, jb->tiles.BK, jb->tiles.bm,
                        wl.base.extra->impl.name, d->check);
                ++n_mismatch;
                break;
            }
        }
        if (!failed && kb_measure_wset(&env, &wl, x, y, &d->lut, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-kernel-bench: %s\n", err.msg);
            failed = true;
        }
        d->i2s = i2s_res;
        d->have_i2s = have_i2s;
        kb_wset_free(&wl);
        bitnet_lut_free(); /* the transformed tensor's extra */
        if (failed) break;
        ++n_done;
    }
    free(w8);
    free(x);
    free(y);
    free(yref1);
    free(yrefN);
    kb_arena_release();

    if (bw_ctx && n_done > 0) {
        for (int i = 0; i < n_bw; ++i) {
            kb_bw_run run = {bw_ctx, pools[i]};
            kb_progress("read bandwidth again, %d thread(s)", bw[i].threads);
            bw[i].s_end = kb_measure(kb_bw_call, &run, &o);
            bw[i].gbps_end = (double)(bw_bytes / 4096 * 4096) / bw[i].s_end.median * 1e-9;
            const double mx = (double)(bw_bytes / 4096 * 4096) / bw[i].s_end.min * 1e-9;
            if (mx > bw[i].gbps_max) bw[i].gbps_max = mx;
            if (bw[i].gbps_end > bw[i].gbps_median) bw[i].gbps_median = bw[i].gbps_end;
        }
    }
    free(bw_buf);
    free(bw_ctx);

    /* ---- table ---- */
    double load1[3];
    kb_loadavg(load1);
    if (n_bw > 0 && n_done > 0) {
        printf("# read bandwidth at the end:");
        for (int i = 0; i < n_bw; ++i)
            printf("%s %d thread%s %.2f GB/s", i ? "," : "", bw[i].threads, bw[i].threads > 1 ? "s" : "", bw[i].gbps_end);
        printf("; %%roof below uses the larger median:");
        for (int i = 0; i < n_bw; ++i)
            printf("%s %d thread%s %.2f GB/s", i ? "," : "", bw[i].threads, bw[i].threads > 1 ? "s" : "",
                   bw[i].gbps_median);
        printf("\n");
    }
    printf("\n");
    printf("%-4s %-11s %-11s %-4s %7s %3s | %13s %6s %5s %5s | %13s %6s | %13s %6s %5s\n", "tgt", "shape", "tiles",
           "kern", "MiB", "thr", "GEMV us", "GB/s", "%roof", "LUT%", "in-cache us", "GB/s", "I2_S us", "GB/s",
           "%roof");
    for (int i = 0; i < n_done; ++i) {
        const kb_done *d = &done[i];
        const kb_result *r = &d->lut;
        char shape[32], tiles[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)d->job.M, (long long)d->job.K);
        snprintf(tiles, sizeof tiles, "%d/%d/%d", d->job.tiles.BM, d->job.tiles.BK, d->job.tiles.bm);
        const char *kind = r->specialized ? "spec" : (r->kernel && strstr(r->kernel, "scalar")) ? "scal" : "gen";
        for (int ti = 0; ti < o.n_threads; ++ti) {
            const kb_gemv *g = &r->gemv[ti];
            const double rb = kb_bw_for(bw, n_bw, g->threads);
            char a[32], b[16], c[16], dd[16], e[32], f[16], gi[32], h[16], k[16];
            kb_fmt_us(a, sizeof a, &g->dram);
            kb_fmt_num(b, sizeof b, kb_gbps(r->read_bytes, &g->dram), 2);
            kb_fmt_num(c, sizeof c, 100.0 * kb_gbps(r->read_bytes, &g->dram) / rb, 1);
            kb_fmt_num(dd, sizeof dd, 100.0 * kb_share(&r->ctor1, &g->dram), 1);
            kb_fmt_us(e, sizeof e, &g->cache);
            kb_fmt_num(f, sizeof f, kb_gbps(r->read_bytes, &g->cache), 2);
            if (d->have_i2s) {
                kb_fmt_us(gi, sizeof gi, &d->i2s.gemv[ti].dram);
                kb_fmt_num(h, sizeof h, kb_gbps(d->i2s.read_bytes, &d->i2s.gemv[ti].dram), 2);
                kb_fmt_num(k, sizeof k, 100.0 * kb_gbps(d->i2s.read_bytes, &d->i2s.gemv[ti].dram) / rb, 1);
            } else {
                snprintf(gi, sizeof gi, "-");
                snprintf(h, sizeof h, "-");
                snprintf(k, sizeof k, "-");
            }
            printf("%-4s %-11s %-11s %-4s %7.2f %3d | %13s %6s %5s %5s | %13s %6s | %13s %6s %5s\n",
                   ti ? "" : kb_type_tag(d->job.type), ti ? "" : shape, ti ? "" : tiles, ti ? "" : kind,
                   (double)r->read_bytes / 1048576.0, g->threads, a, b, c, dd, e, f, gi, h, k);
        }
    }
    if (o.n_batch && n_done) {
        printf("\nbatched products, GOP/s = 2*M*K*N / time (weights from DRAM as above); LUT%% = constructor share\n");
        printf("%-4s %-11s %-11s %3s", "tgt", "shape", "tiles", "thr");
        for (int b = 0; b < o.n_batch; ++b) printf(" | N=%-5lld GOP/s  LUT%%", (long long)o.batch[b]);
        if (o.i2s) {
            printf(" | I2_S GOP/s:");
            for (int b = 0; b < o.n_batch; ++b) printf(" N=%-5lld", (long long)o.batch[b]);
        }
        printf("\n");
        for (int i = 0; i < n_done; ++i) {
            const kb_done *d = &done[i];
            char shape[32], tiles[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)d->job.M, (long long)d->job.K);
            snprintf(tiles, sizeof tiles, "%d/%d/%d", d->job.tiles.BM, d->job.tiles.BK, d->job.tiles.bm);
            const double ops1 = 2.0 * (double)d->job.M * (double)d->job.K;
            for (int ti = 0; ti < o.n_threads; ++ti) {
                printf("%-4s %-11s %-11s %3d", ti ? "" : kb_type_tag(d->job.type), ti ? "" : shape, ti ? "" : tiles,
                       o.threads[ti]);
                for (int b = 0; b < o.n_batch; ++b) {
                    const kb_batch *bb = &d->lut.batch[b * o.n_threads + ti];
                    char g[16], s[16];
                    kb_fmt_num(g, sizeof g, bb->t.valid ? ops1 * (double)bb->N / bb->t.median * 1e-9 : NAN, 1);
                    kb_fmt_num(s, sizeof s, 100.0 * kb_share(&d->lut.ctorN[b], &bb->t), 1);
                    printf(" | %14s %5s", g, s);
                }
                if (o.i2s) {
                    printf(" |           ");
                    for (int b = 0; b < o.n_batch; ++b) {
                        char g[16] = "-";
                        if (d->have_i2s) {
                            const kb_batch *bb = &d->i2s.batch[b * o.n_threads + ti];
                            kb_fmt_num(g, sizeof g, bb->t.valid ? ops1 * (double)bb->N / bb->t.median * 1e-9 : NAN, 1);
                        }
                        printf(" %7s", g);
                    }
                }
                printf("\n");
            }
        }
    }
    printf("\n# columns: kern = spec (specialized generated kernel), gen (generic SIMD kernel, runtime tiles), scal\n"
           "# (scalar LUT kernel); MiB = weight bytes read per call; in-cache = one copy (only when it fits in\n"
           "# half the LLC); %%roof = weight GB/s / read GB/s at the same thread count.\n");
    int n_cache_bust = 0;
    for (int i = 0; i < n_done; ++i) n_cache_bust += done[i].lut.n_copies > 1;
    printf("# %d of %d measured weights were smaller than %gx LLC and rotated among copies (cache-busting).\n",
           n_cache_bust, n_done, o.bust_factor);
    for (int i = 0; i < n_done; ++i)
        if (strncmp(done[i].check, "bit-exact", 9) != 0)
            printf("# CHECK FAILED: %s %lldx%lld tiles %d/%d/%d: %s\n", kb_type_tag(done[i].job.type),
                   (long long)done[i].job.M, (long long)done[i].job.K, done[i].job.tiles.BM, done[i].job.tiles.BK,
                   done[i].job.tiles.bm, done[i].check);
    printf("# every product above was checked bit for bit against the I2_S path (or bitnet_ref_gemm): %s\n",
           n_mismatch ? "MISMATCHES (see CHECK FAILED)" : "all equal");
    if (skipped_from >= 0)
        printf("# budget of %g s spent: %d shape(s) skipped, from %s %lldx%lld on\n", o.budget, n_jobs - skipped_from,
               kb_type_tag(jobs[skipped_from].type), (long long)jobs[skipped_from].M, (long long)jobs[skipped_from].K);
    printf("# load average at the end: %.2f %.2f %.2f; wall time %.1f s\n", load1[0], load1[1], load1[2],
           kb_now() - t_start);
    fflush(stdout);

    /* ---- JSON ---- */
    if (o.json) {
        FILE *f = fopen(o.json, "w");
        if (!f) {
            fprintf(stderr, "bitnet-kernel-bench: --json %s: %s\n", o.json, strerror(errno));
            failed = true;
        } else {
            fprintf(f, "{\"tool\": \"bitnet-kernel-bench\", \"format\": 1, \"date\": ");
            kb_json_str(f, date);
            fprintf(f, ",\n \"machine\": {\"cpu\": ");
            kb_json_str(f, cpu);
            fprintf(f, ", \"online_cpus\": %ld, \"llc_bytes\": %lld, \"avx2\": %s, \"avx512f\": %s, \"loadavg_start\": [%.2f, %.2f, %.2f], \"loadavg_end\": [%.2f, %.2f, %.2f]},\n",
                    ncpu, (long long)env.llc, kb_isa("avx2") ? "true" : "false", kb_isa("avx512f") ? "true" : "false",
                    load0[0], load0[1], load0[2], load1[0], load1[1], load1[2]);
            fprintf(f, " \"settings\": {\"reps\": %d, \"min_time_s\": %g, \"max_time_s\": %g, \"budget_s\": %g, \"bust_factor\": %g, \"cache_bust\": %s, \"seed\": %llu, \"threads\": [",
                    o.reps, o.min_time, o.max_time, o.budget, o.bust_factor, o.cache_bust ? "true" : "false",
                    (unsigned long long)o.seed);
            for (int i = 0; i < o.n_threads; ++i) fprintf(f, "%s%d", i ? ", " : "", o.threads[i]);
            fprintf(f, "], \"batch\": [");
            for (int i = 0; i < o.n_batch; ++i) fprintf(f, "%s%lld", i ? ", " : "", (long long)o.batch[i]);
            fprintf(f, "], \"generic\": %s},\n \"bandwidth\": {\"method\": ", o.force_generic ? "true" : "false");
            kb_json_str(f, kb_bw_method());
            fprintf(f, ", \"buffer_bytes\": %lld, \"results\": [", (long long)o.bw_mib * 1048576);
            for (int i = 0; i < n_bw; ++i) {
                fprintf(f, "%s{\"threads\": %d, \"gbps\": ", i ? ", " : "", bw[i].threads);
                kb_json_num(f, bw[i].gbps_median);
                fprintf(f, ", \"gbps_start\": ");
                kb_json_num(f, bw[i].gbps_start);
                fprintf(f, ", \"gbps_end\": ");
                kb_json_num(f, bw[i].s_end.valid ? bw[i].gbps_end : NAN);
                fprintf(f, ", \"gbps_max\": ");
                kb_json_num(f, bw[i].gbps_max);
                fprintf(f, ", \"pass\": ");
                kb_json_stats(f, &bw[i].s);
                fprintf(f, ", \"pass_end\": ");
                kb_json_stats(f, &bw[i].s_end);
                fprintf(f, "}");
            }
            fprintf(f, "]},\n \"pool\": {\"calls_in_one_task\": %s, \"results\": [", o.pool_run ? "false" : "true");
            for (int i = 0; i < o.n_threads; ++i) {
                fprintf(f, "%s{\"threads\": %d, \"empty_run\": ", i ? ", " : "", o.threads[i]);
                kb_json_stats(f, &pool_rt[i]);
                fprintf(f, ", \"barrier_pair\": ");
                kb_json_stats(f, &pool_bar[i]);
                fprintf(f, "}");
            }
            fprintf(f, "]},\n \"kernels\": [");
            for (int i = 0; i < n_done; ++i) {
                const kb_done *d = &done[i];
                fprintf(f, "%s\n  {\"target\": \"%s\", \"M\": %lld, \"K\": %lld, \"tiles\": [%d, %d, %d], \"origins\": ",
                        i ? "," : "", kb_type_tag(d->job.type), (long long)d->job.M, (long long)d->job.K,
                        d->job.tiles.BM, d->job.tiles.BK, d->job.tiles.bm);
                kb_json_str(f, d->job.origins);
                fprintf(f, ", \"check\": ");
                kb_json_str(f, d->check);
                fprintf(f, ",\n   \"lut\": ");
                kb_json_result(f, &o, &d->lut, bw, n_bw, d->job.M, d->job.K);
                fprintf(f, ",\n   \"i2s\": ");
                if (d->have_i2s) kb_json_result(f, &o, &d->i2s, bw, n_bw, d->job.M, d->job.K);
                else fprintf(f, "null");
                fprintf(f, "}");
            }
            fprintf(f, "],\n \"skipped\": [");
            for (int j = skipped_from; skipped_from >= 0 && j < n_jobs; ++j)
                fprintf(f, "%s{\"target\": \"%s\", \"M\": %lld, \"K\": %lld, \"tiles\": [%d, %d, %d]}",
                        j > skipped_from ? ", " : "", kb_type_tag(jobs[j].type), (long long)jobs[j].M,
                        (long long)jobs[j].K, jobs[j].tiles.BM, jobs[j].tiles.BK, jobs[j].tiles.bm);
            fprintf(f, "],\n \"mismatches\": %d, \"wall_s\": %.3f}\n", n_mismatch, kb_now() - t_start);
            if (fclose(f) != 0) {
                fprintf(stderr, "bitnet-kernel-bench: --json %s: write failed\n", o.json);
                failed = true;
            }
        }
    }

    for (int i = 0; i < o.n_threads; ++i) bitnet_threadpool_free(pools[i]);
    free(done);
    free(jobs);
    return (failed || n_mismatch) ? 1 : 0;
}
