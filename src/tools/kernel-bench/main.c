/* main.c (bitnet-kernel-bench) — speed of the ternary matmul kernels against this machine's memory roofline
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
 * Exit status (tools/common/args.h): 0 done; 1 a kernel's output differs from the reference, or
 * memory/threads failed; 2 bad command line (the message names the flag and value).
 *
 * This file: the command line (an args.h table) and main. measure.c times and measures, run.c runs
 * the jobs of one session, report.c prints the tables and writes the JSON. */
#include "kernels/lut/pack.h"
#include "tools/common/args.h"
#include "tools/common/bench_util.h"
#include "tools/kernel-bench/head.h"
#include "tools/kernel-bench/report.h"
#include "tools/kernel-bench/run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- command line ---------------------------------------------------------------------------- */

static const char *k_epilogue =
    "Bandwidth: each thread sums its contiguous share of a buffer of --bw-mib MiB (touched first) with\n"
    "256-bit loads (AVX2; NEON/scalar elsewhere); GB/s = buffer bytes / wall time of the pass. It is\n"
    "measured before the kernels and again after them; the roofline is the larger median.\n"
    "Weight GB/s = bytes of the packed weight streams (TL2: index + sign + two-weight part; TL1 and\n"
    "I2_S: M*K/4) / time per GEMV. %roof = weight GB/s / read GB/s at the same thread count.\n"
    "GOP/s = 2*M*K*N / time. LUT% = time of the LUT constructor for the same N columns on one\n"
    "thread / time of the whole call (the host builds all LUTs on thread 0 before the barrier).\n"
    "Every product is checked bit for bit against the I2_S path (or bitnet_ref_gemm) first.\n"
    "\n"
    "Timing: product calls run back to back inside one thread-pool task, each followed by the\n"
    "pool barrier (as a graph executor runs consecutive products), unless --pool-run. Every call\n"
    "is timed; a repetition (>= --min-time of calls, after one warm-up repetition) yields its\n"
    "median call, and the table shows the median over repetitions with +-% = their standard\n"
    "deviation (JSON also has min, max and the mean = throughput including stalls). The header\n"
    "prints the pool's own costs (an empty task, two barriers) to read small shapes against.\n"
    "Cache-busting: a weight smaller than --bust-factor x LLC is copied until the copies fill\n"
    "that much memory and successive calls rotate through them, so each call reads its weight\n"
    "from DRAM; 'in-cache' repeats one copy (shown only when it fits in half the LLC).\n"
    "1 GB = 1e9 bytes, 1 GOP = 1e9 operations.\n"
    "\n" BITNET_EXIT_STATUS_HELP
    "(1 here: a kernel disagrees with the reference, or an allocation or thread failed.)\n";

/* "<flag> <value>: <why>" as a bad command line */
static int kb_bad(const bitnet_args *args, const char *flag, const char *value, const char *why) {
    return bitnet_args_fail(args, "%s %s: %s", flag, value ? value : "(missing)", why);
}

/* Appends the comma-separated MxK list v to list (at most KB_MAX_SHAPES); 0, or the usage exit after a message. */
static int parse_shapes(const bitnet_args *args, const char *flag, const char *v, kb_shape *list, int *n) {
    char buf[512];
    if (strlen(v) >= sizeof buf) return kb_bad(args, flag, v, "too long");
    strcpy(buf, v);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= KB_MAX_SHAPES) return kb_bad(args, flag, v, "too many shapes");
        kb_shape *sh = &list[*n];
        const char *x = strpbrk(tok, "xX*");
        char m[32];
        const bool ok = x && (size_t)(x - tok) < sizeof m &&
                        (memcpy(m, tok, (size_t)(x - tok)), m[x - tok] = '\0',
                         bitnet_args_to_int64(m, 1, INT64_C(1) << 20, &sh->M) &&
                             bitnet_args_to_int64(x + 1, 1, INT64_C(1) << 20, &sh->K));
        if (!ok) return kb_bad(args, flag, tok, "expected MxK with positive integers up to 1048576, e.g. 2560x6912");
        (*n)++;
    }
    return 0;
}

static int on_shape(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    kb_opts *o = opt->dst;
    return parse_shapes(args, flag, v, o->shapes, &o->n_shapes);
}

static int on_head(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    kb_opts *o = opt->dst;
    return parse_shapes(args, flag, v, o->heads, &o->n_heads);
}

static int on_tiles(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    kb_opts *o = opt->dst;
    int64_t t[KB_MAX_LIST];
    int n = 0;
    if (!bitnet_args_to_int64_list(v, 1, 8192, t, KB_MAX_LIST, &n) || n != 3)
        return kb_bad(args, flag, v, "expected BM,BK,bm (three positive integers, BM <= 8192)");
    if (o->n_tiles >= KB_MAX_TILES) return kb_bad(args, flag, v, "too many --tiles");
    o->tiles[o->n_tiles++] = (bitnet_tiles){(int32_t)t[0], (int32_t)t[1], (int32_t)t[2]};
    return 0;
}

static int on_threads(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    kb_opts *o = opt->dst;
    int64_t t[KB_MAX_LIST];
    int n = 0;
    if (!bitnet_args_to_int64_list(v, 1, 1024, t, KB_MAX_LIST, &n))
        return kb_bad(args, flag, v, "expected a list of thread counts 1..1024");
    o->n_threads = 0;
    for (int j = 0; j < n; ++j) {
        bool dup = false;
        for (int q = 0; q < o->n_threads; ++q) dup |= o->threads[q] == t[j];
        if (!dup) o->threads[o->n_threads++] = (int)t[j];
    }
    return 0;
}

static int on_batch(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    kb_opts *o = opt->dst;
    if (!strcmp(v, "none")) o->n_batch = 0;
    else if (!bitnet_args_to_int64_list(v, 1, 65536, o->batch, KB_MAX_LIST, &o->n_batch))
        return kb_bad(args, flag, v, "expected a list of column counts 1..65536, or none");
    return 0;
}

/* --quick: the CI setting (flags after it override it) */
static int on_quick(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    kb_opts *o = opt->dst;
    (void)args, (void)flag, (void)v;
    o->reps = 3;
    o->min_time = 0.002;
    o->max_time = 0.2;
    o->batch[0] = 8;
    o->n_batch = 1;
    o->bw_mib = 32;
    return 0;
}

static int on_no_bw(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    (void)args, (void)flag, (void)v;
    ((kb_opts *)opt->dst)->bw_mib = 0;
    return 0;
}

static void kb_defaults(kb_opts *o) {
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
}

/* The command line into o; -1 to go on, else the exit status (help printed, or a bad command line). */
static int kb_parse_args(int argc, char **argv, kb_opts *o) {
    kb_defaults(o);
    const char *target = "native";
    int64_t seed = 1;
    const bitnet_arg_opt opts[] = {
        BITNET_OPT(NULL, NULL,
                   "What is measured (default: every distinct shape+tiles of every registry table of the native\n"
                   "target, i.e. configs/*.yaml as compiled into this build):",
                   BITNET_ARG_SECTION, NULL),
        BITNET_OPT("--target", "T",
                   "tl2, tl1, native (default: tl2 on x86-64, tl1 on AArch64) or all.\n"
                   "TL1 on x86 and TL2 on ARM run the portable C kernels (not representative).",
                   BITNET_ARG_WORD, &target, .choices = "tl2|tl1|native|all"),
        BITNET_OPT("--config", "NAME", "only the tables of configs/NAME.yaml", BITNET_ARG_STRING, &o->config),
        BITNET_OPT("--table", "NAME", "only tables named NAME (default or pretuned)", BITNET_ARG_WORD, &o->table,
                   .choices = "default|pretuned"),
        BITNET_OPT("--shape", "MxK[,MxK..]", "these shapes instead of the registry (repeatable; M = output rows)",
                   BITNET_ARG_CALL, o, .fn = on_shape),
        BITNET_OPT("--tiles", "BM,BK,bm",
                   "tiles for every --shape (repeatable: each shape is measured with each);\n"
                   "without it a shape gets the tiles the runtime would pick (registry\n"
                   "table, else the default tile rule). The tiles must pass the kernel rules.",
                   BITNET_ARG_CALL, o, .fn = on_tiles),
        BITNET_OPT("--head", "VxD[,VxD..]",
                   "also the output head: V rows (vocabulary) x D (n_embd) in F16 and Q8_0, one\n"
                   "column (repeatable); with no --shape/--config/--table only the head,\n"
                   "e.g. --head 128256x2560 (BitNet-b1.58-2B-4T's tied F16 head)",
                   BITNET_ARG_CALL, o, .fn = on_head),
        BITNET_OPT("--generic", NULL, "run the generic SIMD kernel even where a specialized one is compiled",
                   BITNET_ARG_FLAG, &o->force_generic),
        BITNET_OPT("--list", NULL, "print what would be measured and exit", BITNET_ARG_FLAG, &o->list_only),
        BITNET_OPT(NULL, NULL, "\nHow (defaults in brackets):", BITNET_ARG_SECTION, NULL),
        BITNET_OPT("--threads", "LIST", "thread counts, e.g. 1,2 [1,<online CPUs>]", BITNET_ARG_CALL, o,
                   .fn = on_threads),
        BITNET_OPT("--batch", "LIST|none", "activation columns of the batched products [8,128,512]",
                   BITNET_ARG_CALL, o, .fn = on_batch),
        BITNET_OPT("--reps", "R", "timed repetitions per measurement [7]", BITNET_ARG_INT, &o->reps, .lo = 1,
                   .hi = 1000),
        BITNET_OPT("--min-time", "S", "seconds of calls per repetition [0.05]", BITNET_ARG_DOUBLE, &o->min_time,
                   .flo = 0.0, .fhi = 60.0),
        BITNET_OPT("--max-time", "S", "stop adding repetitions after S seconds (once there are 3) [2]",
                   BITNET_ARG_DOUBLE, &o->max_time, .flo = 0.0, .fhi = 3600.0),
        BITNET_OPT("--budget", "S",
                   "wall-clock budget of the whole run; shapes left when it is spent are\n"
                   "listed as skipped [none]",
                   BITNET_ARG_DOUBLE, &o->budget, .flo = 0.001, .fhi = 1e7),
        BITNET_OPT("--quick", NULL,
                   "CI setting: --reps 3 --min-time 0.002 --max-time 0.2 --batch 8\n"
                   "--bw-mib 32 (explicit flags after --quick override it)",
                   BITNET_ARG_ACTION, o, .fn = on_quick),
        BITNET_OPT("--bw-mib", "N", "buffer of the read-bandwidth measurement in MiB [1024]; 0 skips it",
                   BITNET_ARG_INT64, &o->bw_mib, .lo = 0, .hi = INT64_C(1) << 20),
        BITNET_OPT("--no-bw", NULL, "same as --bw-mib 0 (no roofline percentages)", BITNET_ARG_ACTION, o,
                   .fn = on_no_bw),
        BITNET_OPT("--llc-mib", "N", "last-level cache size [from /sys/devices/system/cpu/cpu0/cache]",
                   BITNET_ARG_INT64, &o->llc_mib, .lo = 1, .hi = INT64_C(1) << 20),
        BITNET_OPT("--bust-factor", "F",
                   "rotate among copies totalling >= F x LLC [16; on the EPYC VM this was\n"
                   "written on, 4x the LLC that sysfs reports still left ~10% of the bytes\n"
                   "in a cache, 16x and 48x measured the same]",
                   BITNET_ARG_DOUBLE, &o->bust_factor, .flo = 1.0, .fhi = 1000.0),
        BITNET_OPT("--no-cache-bust", NULL, "time one copy only (cached when it fits; the 'DRAM' columns say so)",
                   BITNET_ARG_FLAG_OFF, &o->cache_bust),
        BITNET_OPT("--no-cache", NULL, "skip the in-cache GEMV measurement", BITNET_ARG_FLAG_OFF, &o->in_cache),
        BITNET_OPT("--no-i2s", NULL, "do not time the I2_S reference path (it is still used for the check)",
                   BITNET_ARG_FLAG_OFF, &o->i2s),
        BITNET_OPT("--no-lut", NULL, "do not time the LUT constructor alone (no LUT% column)", BITNET_ARG_FLAG_OFF,
                   &o->lut_share),
        BITNET_OPT("--pool-run", NULL,
                   "one bitnet_threadpool_run per product call (includes the pool's wake-up\n"
                   "latency) instead of back-to-back calls inside one task",
                   BITNET_ARG_FLAG, &o->pool_run),
        BITNET_OPT("--seed", "N", "seed of the random ternary weights and activations [1]", BITNET_ARG_INT64, &seed,
                   .lo = 0, .hi = INT64_MAX),
        BITNET_OPT("--json", "FILE", "also write every number as JSON", BITNET_ARG_STRING, &o->json),
        BITNET_OPT("-q, --quiet", NULL, "no progress on stderr", BITNET_ARG_FLAG, &kb_quiet),
    };
    static const char *const k_desc =
        "Times the ternary matmul kernels through the matmul host (bitnet_mul_mat + thread pool) and\n"
        "compares them with this machine's streaming-read bandwidth measured in the same run.\n";
    const bitnet_args args = BITNET_ARGS("bitnet-kernel-bench", "usage: bitnet-kernel-bench [options]", k_desc,
                                         k_epilogue, opts, .help_col = 23, .flat = true);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    o->seed = (uint64_t)seed;
    if (!strcmp(target, "native")) {
        o->targets[0] = kb_native_type();
        o->n_targets = 1;
    } else if (!strcmp(target, "tl2") || !strcmp(target, "tl1")) {
        o->targets[0] = !strcmp(target, "tl2") ? BITNET_TYPE_TL2 : BITNET_TYPE_TL1;
        o->n_targets = 1;
    } else { /* all */
        o->targets[0] = BITNET_TYPE_TL2;
        o->targets[1] = BITNET_TYPE_TL1;
        o->n_targets = 2;
    }
    if (o->n_tiles && !o->n_shapes) return kb_bad(&args, "--tiles", NULL, "needs --shape (tiles belong to a shape)");
    if (o->n_shapes && (o->config || o->table))
        return kb_bad(&args, "--shape", NULL, "cannot be combined with --config/--table (those select registry tables)");
    if (o->n_threads == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        if (nc < 1) nc = 1;
        if (nc > 1024) nc = 1024;
        o->threads[o->n_threads++] = 1;
        if (nc > 1) o->threads[o->n_threads++] = (int)nc;
    }
    return -1;
}

/* ---- main ------------------------------------------------------------------------------------ */

/* Every job has legal tiles; -1, or the exit status after a message (a bad command line). */
static int kb_check_jobs(const kb_opts *o, const kb_job *jobs, int n_jobs) {
    if (n_jobs == 0 && o->n_heads > 0) return -1;
    if (n_jobs == 0) {
        return bitnet_tool_error("bitnet-kernel-bench", BITNET_EXIT_USAGE,
                                 "nothing to measure (no registry table of the target%s%s%s)",
                                 o->config ? " in config " : "", o->config ? o->config : "",
                                 o->table ? " with that table name" : "");
    }
    for (int j = 0; j < n_jobs; ++j) {
        bitnet_error err;
        if (jobs[j].tiles.BM == 0) {
            return bitnet_tool_error("bitnet-kernel-bench", BITNET_EXIT_USAGE,
                                     "%s %lldx%lld: no legal tiles (no table has the shape and the default "
                                     "tile rule finds none); give --tiles",
                                     kb_type_tag(jobs[j].type), (long long)jobs[j].M, (long long)jobs[j].K);
        }
        if (bitnet_tiles_check(jobs[j].type, jobs[j].M, jobs[j].K, jobs[j].tiles, &err) != BITNET_OK) {
            return bitnet_tool_error("bitnet-kernel-bench", BITNET_EXIT_USAGE, "--tiles %d,%d,%d: %s",
                                     jobs[j].tiles.BM, jobs[j].tiles.BK, jobs[j].tiles.bm, err.msg);
        }
    }
    return -1;
}

/* Measures the jobs and prints (and writes) the report; the exit status. */
static int kb_run(const kb_opts *o, const kb_job *jobs, int n_jobs) {
    kb_session s;
    if (kb_session_start(&s, o, jobs, n_jobs)) {
        kb_session_free(&s);
        return BITNET_EXIT_FAILURE;
    }
    kb_report_header(&s);
    kb_bandwidth_start(&s);
    kb_report_bandwidth_start(&s);
    kb_pool_costs(&s);
    kb_report_pool(&s);
    kb_run_jobs(&s);
    kb_run_heads(&s);
    kb_bandwidth_end(&s);
    bitnet_tool_loadavg(s.load1);
    kb_report_tables(&s);
    fflush(stdout);
    bool failed = s.failed;
    if (o->json && !kb_write_json(&s, o->json)) failed = true;
    const int rc = (failed || s.n_mismatch) ? BITNET_EXIT_FAILURE : BITNET_EXIT_OK;
    kb_session_free(&s);
    return rc;
}

int main(int argc, char **argv) {
    kb_opts o;
    int rc = kb_parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    kb_job *jobs = (kb_job *)calloc(KB_MAX_JOBS, sizeof *jobs);
    if (!jobs) return bitnet_tool_error("bitnet-kernel-bench", BITNET_EXIT_FAILURE, "out of memory");
    const bool head_only = o.n_heads > 0 && !o.n_shapes && !o.config && !o.table;
    const int n_jobs = head_only ? 0 : kb_build_jobs(&o, jobs);
    rc = kb_check_jobs(&o, jobs, n_jobs);
    if (rc < 0 && o.list_only) {
        for (int j = 0; j < n_jobs; ++j)
            printf("%s %lldx%lld tiles %d/%d/%d  (%s)\n", kb_type_tag(jobs[j].type), (long long)jobs[j].M,
                   (long long)jobs[j].K, jobs[j].tiles.BM, jobs[j].tiles.BK, jobs[j].tiles.bm, jobs[j].origins);
        rc = BITNET_EXIT_OK;
    }
    if (rc < 0) rc = kb_run(&o, jobs, n_jobs);
    free(jobs);
    return rc;
}
