/* llama-bench.c — the benchmark tool llama.cpp and bitnet.cpp users know: prompt-processing and
 * generation speed of BitNet GGUF models, as a table (markdown), CSV or JSON.
 *
 * Tests (the names llama.cpp's llama-bench uses):
 *   ppN      evaluate N prompt tokens from an empty KV cache (bitnet_decode splits them into batches of
 *            -b tokens); tokens/s = N / time.
 *   tgN      generate N tokens one at a time from an empty cache: N calls of bitnet_decode with one
 *            token at positions 0..N-1 (the cache grows); no sampling; tokens/s = N / time.
 *   ppN+tgM  (-pg N,M) both in one timed run; tokens/s = (N + M) / time.
 *   … @ dD   (-d D) any of them with D tokens already in the KV cache: the test's tokens start at
 *            position D (the attention reads D more positions); the D tokens are evaluated once per
 *            test, untimed, before the warm-up (every repetition rewrites the same positions after
 *            them, so they stay valid); tokens/s counts the test's own tokens only. llama.cpp's -d.
 * Token ids are drawn from the project's seeded PRNG (rng.h: xoshiro256**), the same ids in every
 * repetition and every run with the same --seed. Each test gets its own context (n_ctx = N + M,
 * n_batch, n_threads), an unmeasured warm-up run (the prompt, or one generated token), then -r timed
 * repetitions. t/s is the mean ± sample standard deviation over the repetitions of
 * tokens / seconds (as llama.cpp reports it); csv and json also carry every repetition's time.
 *
 * Every numeric flag takes a comma list and may be repeated; all combinations run, in the order
 * model → kernel → batch → threads → depth → (pp tests, tg tests, pg tests).
 *
 * stdout: the table / CSV / JSON only. stderr: per model its load time and kernel summary, the
 * machine's load average, errors. Exit status (tools/common/args.h): 0 on success; 1 a missing or bad
 * model file, or a failed evaluation; 2 a bad command line. */
#include "base/gguf.h"
#include "kernels/i2s/i2s.h"
#include "model/model.h"
#include "base/quants.h"
#include "base/rng.h"
#include "tilefile/tile_file.h"
#include "tools/common/args.h"
#include "tools/common/cluster_opt.h"
#include "tools/common/bench_util.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_TOKENS (1L << 24) /* bitnet_context_create's n_ctx limit */

/* ---- small growable lists ------------------------------------------------------------------ */

typedef struct long_list {
    long *v;
    size_t n;
    int given; /* the user gave the flag: its first occurrence replaces the default */
} long_list;

typedef struct str_list {
    char **v;
    size_t n;
} str_list;

typedef struct pg_pair {
    long n_prompt, n_gen;
} pg_pair;

typedef struct options {
    str_list models;
    long_list n_prompt, n_gen, depth, batch, threads, kernels, heads;
    pg_pair *pg;
    size_t n_pg;
    const char *lut_table;
    const char *lut_tiles; /* --lut-tiles FILE */
    int i2s_layout;        /* --i2s-layout: bitnet_model_params.i2s_layout */
    long reps;
    const char *format; /* "md", "csv", "json" */
    uint64_t seed;
    bool warmup;
    bool progress;
    const char *plan;  /* --plan FILE: one stage of a cluster plan under mpirun */
    bool link_emulate; /* --link-emulate */
} options;

#define fail(...) bitnet_tool_error("llama-bench", BITNET_EXIT_FAILURE, __VA_ARGS__)

static int push_long(long_list *l, long v) {
    long *nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv) return fail("out of memory");
    nv[l->n++] = v;
    l->v = nv;
    return 0;
}

static int push_str(str_list *l, const char *s, size_t len) {
    char **nv = realloc(l->v, (l->n + 1) * sizeof *nv);
    if (!nv) return fail("out of memory");
    l->v = nv;
    char *c = malloc(len + 1);
    if (!c) return fail("out of memory");
    memcpy(c, s, len);
    c[len] = '\0';
    l->v[l->n++] = c;
    return 0;
}

static void free_options(options *o) {
    for (size_t i = 0; i < o->models.n; i++) free(o->models.v[i]);
    free(o->models.v);
    free(o->n_prompt.v);
    free(o->n_gen.v);
    free(o->depth.v);
    free(o->batch.v);
    free(o->threads.v);
    free(o->kernels.v);
    free(o->heads.v);
    free(o->pg);
}

/* ---- the command line: LIST flags take comma lists and may be repeated ------------------------- */

/* One comma-list item of a LIST flag: the option's row, the spelling given, the list. */
typedef struct list_item {
    const bitnet_args *args;
    const bitnet_arg_opt *opt;
    const char *flag, *value;
} list_item;

/* The first use of a LIST flag drops the default. */
static long_list *list_of(const bitnet_arg_opt *opt) {
    long_list *l = opt->dst;
    if (!l->given) {
        l->n = 0;
        l->given = 1;
    }
    return l;
}

static int long_item(void *user, const char *s, size_t len) {
    const list_item *it = user;
    int64_t v;
    if (bitnet_args_item_int64(it->args, it->flag, s, len, it->opt->lo, it->opt->hi, &v)) return BITNET_EXIT_USAGE;
    return push_long(it->opt->dst, (long)v) ? BITNET_EXIT_FAILURE : 0;
}

static int kernel_item(void *user, const char *s, size_t len) {
    static const char *const names[] = {"auto", "i2_s", "tl1", "tl2"}; /* index = bitnet_kernel_path */
    const list_item *it = user;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strlen(names[i]) == len && strncmp(s, names[i], len) == 0) return push_long(it->opt->dst, (long)i);
    }
    return bitnet_args_fail(it->args, "--kernel expects auto, i2_s, tl1 or tl2 (comma list), got '%.*s'", (int)len, s);
}

static int head_item(void *user, const char *s, size_t len) {
    const list_item *it = user;
    if (len == 6 && strncmp(s, "stored", 6) == 0) return push_long(it->opt->dst, 0);
    if (len == 4 && strncmp(s, "q8_0", 4) == 0) return push_long(it->opt->dst, BITNET_TYPE_Q8_0);
    return bitnet_args_fail(it->args, "--head-type expects stored or q8_0 (comma list), got '%.*s'", (int)len, s);
}

static int model_item(void *user, const char *s, size_t len) {
    const list_item *it = user;
    if (len == 0) return bitnet_args_fail(it->args, "%s: empty file name in '%s'", it->flag, it->value);
    return push_str(it->opt->dst, s, len);
}

static int on_list(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    list_item it = {args, opt, flag, v};
    if (!strcmp(opt->names, "-m, --model")) return bitnet_args_each_item(v, model_item, &it);
    list_of(opt);
    if (!strcmp(opt->names, "--kernel")) return bitnet_args_each_item(v, kernel_item, &it);
    if (!strcmp(opt->names, "--head-type")) return bitnet_args_each_item(v, head_item, &it);
    return bitnet_args_each_item(v, long_item, &it);
}

/* -ngl LIST: checked, then dropped */
static int on_ignored_list(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    long_list ignored = {0};
    bitnet_arg_opt row = *opt;
    row.dst = &ignored;
    list_item it = {args, &row, flag, v};
    const int rc = bitnet_args_each_item(v, long_item, &it);
    free(ignored.v);
    return rc;
}

/* -pg N,M (repeatable) */
static int on_pg(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    options *o = opt->dst;
    const char *c = strchr(v, ',');
    int64_t n_prompt, n_gen;
    if (!c || strchr(c + 1, ',')) return bitnet_args_fail(args, "-pg expects two integers N,M, got '%s'", v);
    if (bitnet_args_item_int64(args, flag, v, (size_t)(c - v), 1, MAX_TOKENS, &n_prompt) ||
        bitnet_args_item_int64(args, flag, c + 1, strlen(c + 1), 1, MAX_TOKENS, &n_gen)) {
        return BITNET_EXIT_USAGE;
    }
    pg_pair *np = realloc(o->pg, (o->n_pg + 1) * sizeof *np);
    if (!np) return fail("out of memory");
    o->pg = np;
    o->pg[o->n_pg++] = (pg_pair){(long)n_prompt, (long)n_gen};
    return 0;
}

/* The command line into o; -1 to go on, else the exit status (help printed, or a bad command line). */
static int parse_args(int argc, char **argv, options *o) {
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE[,FILE]", "model files, LIST (required)", BITNET_ARG_CALL, &o->models,
                   .fn = on_list),
        BITNET_OPT("-p, --n-prompt", "N", "prompt tokens of a pp test, LIST (default 512; 0 = no pp test)",
                   BITNET_ARG_CALL, &o->n_prompt, .lo = 0, .hi = MAX_TOKENS, .fn = on_list),
        BITNET_OPT("-n, --n-gen", "N", "generated tokens of a tg test, LIST (default 128; 0 = no tg test)",
                   BITNET_ARG_CALL, &o->n_gen, .lo = 0, .hi = MAX_TOKENS, .fn = on_list),
        BITNET_OPT("-pg", "N,M", "also a test of N prompt then M generated tokens (repeatable)", BITNET_ARG_CALL, o,
                   .fn = on_pg),
        BITNET_OPT("-d, --n-depth", "N", "tokens already in the KV cache when each test starts, LIST (default 0;\n"
                   "filled once per test, untimed; the test is named \"... @ dN\")",
                   BITNET_ARG_CALL, &o->depth, .lo = 0, .hi = MAX_TOKENS, .fn = on_list),
        BITNET_OPT("-b, --batch-size", "N", "prompt tokens per forward pass, LIST (default 2048;\nwith --plan the plan's micro-batch)", BITNET_ARG_CALL,
                   &o->batch, .lo = 1, .hi = MAX_TOKENS, .fn = on_list),
        BITNET_OPT("-t, --threads", "N", "threads, LIST (default: the number of online CPUs)", BITNET_ARG_CALL,
                   &o->threads, .lo = 1, .hi = 1024, .fn = on_list),
        BITNET_OPT("--kernel", "K", "auto|i2_s|tl1|tl2, LIST (default auto: tl2 on x86-64, tl1 on AArch64)",
                   BITNET_ARG_CALL, &o->kernels, .fn = on_list),
        BITNET_OPT("--lut-table", "T", "default|pretuned: preferred tile table (default: the build's choice)",
                   BITNET_ARG_WORD, &o->lut_table, .choices = "default|pretuned"),
        BITNET_OPT_LUT_TILES(&o->lut_tiles),
        BITNET_OPT_I2S_LAYOUT(&o->i2s_layout),
        BITNET_OPT_PLAN(&o->plan, &o->link_emulate),
        BITNET_OPT("--head-type", "H",
                   "stored|q8_0, LIST: output head as stored (default) or requantized to\n"
                   "Q8_0 at load; q8_0 rows say so in the kernel column (\"+q8_0 head\")",
                   BITNET_ARG_CALL, &o->heads, .fn = on_list),
        BITNET_OPT("-r, --repetitions", "N", "timed repetitions per test (default 5)", BITNET_ARG_LONG, &o->reps,
                   .lo = 1, .hi = 1000000),
        BITNET_OPT("-o, --output", "FORMAT", "md|csv|json (default md)", BITNET_ARG_WORD, &o->format,
                   .choices = "md|csv|json"),
        BITNET_OPT("--seed", "N", "seed of the random prompt/generation token ids (default 42)", BITNET_ARG_UINT64,
                   &o->seed),
        BITNET_OPT("--no-warmup", NULL, "skip the unmeasured warm-up run of each test", BITNET_ARG_FLAG_OFF,
                   &o->warmup),
        BITNET_OPT("--progress", NULL, "print each repetition's time on stderr", BITNET_ARG_FLAG, &o->progress),
        BITNET_OPT("-ngl, --n-gpu-layers", "N", "accepted for compatibility and ignored (CPU only), LIST",
                   BITNET_ARG_CALL, NULL, .lo = -1, .hi = INT_MAX, .fn = on_ignored_list),
    };
    static const char *const k_desc =
        "Measure prompt processing (ppN) and generation (tgN) speed of BitNet b1.58 GGUF models.\n"
        "Flags marked LIST take comma-separated values and may be repeated; every combination runs.\n";
    static const char *const k_epi =
        "t/s = mean ± sample standard deviation over the repetitions of tokens / seconds.\n"
        BITNET_EXIT_STATUS_HELP;
    const bitnet_args args = BITNET_ARGS("llama-bench", "usage: llama-bench [options]", k_desc, k_epi, opts,
                                         .help_col = 29);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    if (o->models.n == 0) return bitnet_args_fail(&args, "no model given: use -m MODEL (see --help)");
    size_t n_tests = o->n_pg;
    for (size_t i = 0; i < o->n_prompt.n; i++) n_tests += o->n_prompt.v[i] > 0;
    for (size_t i = 0; i < o->n_gen.n; i++) n_tests += o->n_gen.v[i] > 0;
    if (n_tests == 0) return bitnet_args_fail(&args, "nothing to run: every -p and -n value is 0 and no -pg was given");
    return -1;
}

/* ---- facts about the machine and the model file ---------------------------------------------- */

/* "model name" of /proc/cpuinfo (x86), else "<machine>" from uname. */
static void cpu_info(char *out, size_t cap) {
    bitnet_tool_cpu_model(out, cap, false);
    if (out[0] == '\0') {
        struct utsname u;
        snprintf(out, cap, "%s", uname(&u) == 0 ? u.machine : "unknown");
    }
}

/* 1-minute load average from /proc/loadavg; -1 when unavailable. */
static double load_avg_1m(void) {
    double l[3];
    bitnet_tool_loadavg(l);
    return l[0];
}

typedef struct model_info {
    const char *path;
    const char *file; /* base name */
    char desc[96];    /* "<arch> <params> <type of the projection weights>", e.g. "bitnet 128M I2_S" */
} model_info;

/* Reads the GGUF header once before any test runs, so a missing or malformed file is reported before
 * the table starts and the column widths are known. */
static int describe_model(const char *path, model_info *mi) {
    bitnet_error err = {{0}};
    bitnet_gguf *g = NULL;
    if (bitnet_gguf_open(path, &g, &err) != BITNET_OK) return fail("cannot open model '%s': %s", path, err.msg);
    mi->path = path;
    const char *slash = strrchr(path, '/');
    mi->file = slash ? slash + 1 : path;
    const char *arch = NULL;
    size_t arch_len = 0;
    if (bitnet_gguf_get_str(g, "general.architecture", &arch, &arch_len, &err) != BITNET_OK) {
        arch = "unknown";
        arch_len = 7;
    }
    double n_params = 0.0;
    int type = -1;
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(g); i++) {
        const bitnet_gguf_tensor_info *t = bitnet_gguf_tensor(g, i);
        double e = 1.0;
        for (int d = 0; d < t->n_dims; d++) e *= (double)t->ne[d];
        n_params += e;
        if (strcmp(t->name, "blk.0.attn_q.weight") == 0) type = t->type;
    }
    char params[32];
    if (n_params >= 1e9) snprintf(params, sizeof params, "%.1fB", n_params / 1e9);
    else snprintf(params, sizeof params, "%.0fM", n_params / 1e6);
    snprintf(mi->desc, sizeof mi->desc, "%.*s %s %s", (int)(arch_len > 40 ? 40 : arch_len), arch, params,
             type >= 0 ? bitnet_type_name(type) : "?");
    bitnet_gguf_close(g);
    return 0;
}

/* The "kernel" column: the path the model uses and the ISA of its kernels, e.g. "TL2/avx2",
 * "I2_S/avx2", or "dense" for F32/F16 projection weights (no LUT, no activation quantization). The
 * ISA of a LUT path is read from the summary's "<TYPE> (<isa>)" prefix (several ISAs: the first). */
static void kernel_label(const bitnet_model *m, char *out, size_t cap) {
    const char *summary = bitnet_model_kernel_summary(m);
    const char *path = bitnet_kernel_path_name(bitnet_model_path(m));
    if (strncmp(summary, "dense", 5) == 0) {
        snprintf(out, cap, "dense");
    } else if (bitnet_model_path(m) == BITNET_PATH_I2S) {
        snprintf(out, cap, "%s/%s", path, bitnet_i2s_isa());
    } else {
        const char *open = strchr(summary, '('), *close = open ? strchr(open, ')') : NULL;
        const char *colon = strchr(summary, ':');
        if (open && close && (!colon || close < colon) && close - open < 24) {
            snprintf(out, cap, "%s/%.*s", path, (int)(close - open - 1), open + 1);
        } else {
            snprintf(out, cap, "%s", path);
        }
    }
}

/* ---- one test's result and the three output formats ------------------------------------------- */

typedef struct result {
    const model_info *mi;
    uint64_t size, n_params;
    const char *kernel;  /* kernel_label */
    const char *summary; /* bitnet_model_kernel_summary */
    const char *cpu;
    long n_batch, n_threads, n_prompt, n_gen, n_depth;
    char test[64];
    char time[32]; /* ISO 8601 UTC start of the test */
    double load1;  /* 1-minute load average at the start of the test; -1 unknown */
    long reps;
    const uint64_t *ns;
    const double *ts;
    double avg_ns, sd_ns, avg_ts, sd_ts;
} result;

static void test_name(long n_prompt, long n_gen, long n_depth, char *out, size_t cap) {
    if (n_prompt > 0 && n_gen > 0) snprintf(out, cap, "pp%ld+tg%ld", n_prompt, n_gen);
    else if (n_prompt > 0) snprintf(out, cap, "pp%ld", n_prompt);
    else snprintf(out, cap, "tg%ld", n_gen);
    const size_t len = strlen(out);
    if (n_depth > 0) snprintf(out + len, cap - len, " @ d%ld", n_depth);
}

typedef struct table_layout {
    int w_model, w_file, w_kernel, w_test;
    int show_file, show_batch;
} table_layout;

static void md_header(const table_layout *L) {
    printf("| %-*s |", L->w_model, "model");
    if (L->show_file) printf(" %-*s |", L->w_file, "file");
    printf(" %10s | %10s | %-*s | %7s |", "size", "params", L->w_kernel, "kernel", "threads");
    if (L->show_batch) printf(" %7s |", "n_batch");
    printf(" %*s | %20s |\n", L->w_test, "test", "t/s");
    char dashes[256];
    memset(dashes, '-', sizeof dashes - 1);
    dashes[sizeof dashes - 1] = '\0';
#define DASH(w) ((w) > 255 ? 255 : (w)), dashes
    printf("| %.*s |", DASH(L->w_model));
    if (L->show_file) printf(" %.*s |", DASH(L->w_file));
    printf(" %.*s: | %.*s: | %.*s | %.*s: |", DASH(9), DASH(9), DASH(L->w_kernel), DASH(6));
    if (L->show_batch) printf(" %.*s: |", DASH(6));
    printf(" %.*s: | %.*s: |\n", DASH(L->w_test - 1), DASH(19));
#undef DASH
}

static void md_row(const table_layout *L, const result *r) {
    char size[32], params[32], ts[48];
    const double gib = 1024.0 * 1024.0 * 1024.0;
    if ((double)r->size >= gib) snprintf(size, sizeof size, "%.2f GiB", (double)r->size / gib);
    else snprintf(size, sizeof size, "%.2f MiB", (double)r->size / (1024.0 * 1024.0));
    if ((double)r->n_params >= 1e9) snprintf(params, sizeof params, "%.2f B", (double)r->n_params / 1e9);
    else snprintf(params, sizeof params, "%.2f M", (double)r->n_params / 1e6);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->avg_ts, r->sd_ts);
    printf("| %-*s |", L->w_model, r->mi->desc);
    if (L->show_file) printf(" %-*s |", L->w_file, r->mi->file);
    printf(" %10s | %10s | %-*s | %7ld |", size, params, L->w_kernel, r->kernel, r->n_threads);
    if (L->show_batch) printf(" %7ld |", r->n_batch);
    /* "±" is two bytes in UTF-8 and one column: widen the field by one byte */
    printf(" %*s | %21s |\n", L->w_test, r->test, ts);
}

static void csv_field(const char *s, int last) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
    putchar(last ? '\n' : ',');
}

static void json_str(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static const char *const k_fields[] = {
    "cpu_info", "model_filename", "model_type", "model_size", "model_n_params", "kernel", "kernel_summary",
    "n_batch", "n_threads", "n_prompt", "n_gen", "n_depth", "test", "test_time", "load_avg_1m", "repetitions",
    "avg_ns", "stddev_ns", "avg_ts", "stddev_ts", "samples_ns", "samples_ts"};
enum { N_FIELDS = sizeof k_fields / sizeof k_fields[0] };

/* Field i of r as text (numbers formatted for csv/json); *is_str: quote it in JSON. samples_* are
 * written by the callers. */
static void field_text(const result *r, int i, char *buf, size_t cap, int *is_str) {
    *is_str = 0;
    switch (i) {
    case 0: snprintf(buf, cap, "%s", r->cpu); *is_str = 1; break;
    case 1: snprintf(buf, cap, "%s", r->mi->path); *is_str = 1; break;
    case 2: snprintf(buf, cap, "%s", r->mi->desc); *is_str = 1; break;
    case 3: snprintf(buf, cap, "%llu", (unsigned long long)r->size); break;
    case 4: snprintf(buf, cap, "%llu", (unsigned long long)r->n_params); break;
    case 5: snprintf(buf, cap, "%s", r->kernel); *is_str = 1; break;
    case 6: snprintf(buf, cap, "%s", r->summary); *is_str = 1; break;
    case 7: snprintf(buf, cap, "%ld", r->n_batch); break;
    case 8: snprintf(buf, cap, "%ld", r->n_threads); break;
    case 9: snprintf(buf, cap, "%ld", r->n_prompt); break;
    case 10: snprintf(buf, cap, "%ld", r->n_gen); break;
    case 11: snprintf(buf, cap, "%ld", r->n_depth); break;
    case 12: snprintf(buf, cap, "%s", r->test); *is_str = 1; break;
    case 13: snprintf(buf, cap, "%s", r->time); *is_str = 1; break;
    case 14:
        if (r->load1 >= 0) snprintf(buf, cap, "%.2f", r->load1);
        else snprintf(buf, cap, "null");
        break;
    case 15: snprintf(buf, cap, "%ld", r->reps); break;
    case 16: snprintf(buf, cap, "%.0f", r->avg_ns); break;
    case 17: snprintf(buf, cap, "%.0f", r->sd_ns); break;
    case 18: snprintf(buf, cap, "%.6f", r->avg_ts); break;
    case 19: snprintf(buf, cap, "%.6f", r->sd_ts); break;
    default: buf[0] = '\0'; break;
    }
}

static void csv_header(void) {
    for (int i = 0; i < N_FIELDS; i++) csv_field(k_fields[i], i == N_FIELDS - 1);
}

static void csv_row(const result *r) {
    char buf[1200];
    int is_str;
    for (int i = 0; i < N_FIELDS - 2; i++) {
        field_text(r, i, buf, sizeof buf, &is_str);
        csv_field(strcmp(buf, "null") == 0 && !is_str ? "" : buf, 0);
    }
    /* samples as one field each, space-separated (as llama.cpp's json lists them) */
    printf("\"");
    for (long k = 0; k < r->reps; k++) printf("%s%llu", k ? " " : "", (unsigned long long)r->ns[k]);
    printf("\",\"");
    for (long k = 0; k < r->reps; k++) printf("%s%.6f", k ? " " : "", r->ts[k]);
    printf("\"\n");
}

static void json_row(const result *r, int first) {
    char buf[1200];
    int is_str;
    printf("%s  {\n", first ? "" : ",\n");
    for (int i = 0; i < N_FIELDS - 2; i++) {
        field_text(r, i, buf, sizeof buf, &is_str);
        printf("    \"%s\": ", k_fields[i]);
        if (is_str) json_str(buf);
        else fputs(buf, stdout);
        printf(",\n");
    }
    printf("    \"samples_ns\": [");
    for (long k = 0; k < r->reps; k++) printf("%s%llu", k ? ", " : "", (unsigned long long)r->ns[k]);
    printf("],\n    \"samples_ts\": [");
    for (long k = 0; k < r->reps; k++) printf("%s%.6f", k ? ", " : "", r->ts[k]);
    printf("]\n  }");
}

/* ---- running one test -------------------------------------------------------------------------- */

/* One timed (or warm-up) run after the n_depth tokens already in the cache: the prompt in one bitnet_decode
 * call at position n_depth (split into n_batch chunks by the context), then n_gen single-token calls. tokens
 * holds the n_prompt + n_gen ids of the run. */
static int run_once(bitnet_context *ctx, const int32_t *tokens, long n_depth, long n_prompt, long n_gen,
                    bitnet_error *err) {
    if (n_prompt > 0 && bitnet_decode(ctx, tokens, (int32_t)n_prompt, (int32_t)n_depth, false, err) != BITNET_OK)
        return 1;
    for (long i = 0; i < n_gen; i++) {
        if (bitnet_decode(ctx, &tokens[n_prompt + i], 1, (int32_t)(n_depth + n_prompt + i), false, err) != BITNET_OK)
            return 1;
    }
    return 0;
}

typedef struct bench_env {
    const options *o;
    bitnet_tool_cluster *cluster; /* --plan: contexts on every rank */
    const table_layout *layout;
    const char *cpu;
    int n_rows;
} bench_env;

static int run_test(bench_env *env, bitnet_model *model, const model_info *mi, const char *kernel, long n_batch,
                    long n_threads, long n_prompt, long n_gen, long n_depth) {
    const options *o = env->o;
    const bitnet_hparams *hp = bitnet_model_hparams(model);
    const long n_ctx = n_depth + n_prompt + n_gen;
    result r = {0};
    r.mi = mi;
    r.size = bitnet_model_size_bytes(model);
    r.n_params = bitnet_model_n_params(model);
    r.kernel = kernel;
    r.summary = bitnet_model_kernel_summary(model);
    r.cpu = env->cpu;
    r.n_batch = n_batch;
    r.n_threads = n_threads;
    r.n_prompt = n_prompt;
    r.n_gen = n_gen;
    r.n_depth = n_depth;
    r.reps = o->reps;
    test_name(n_prompt, n_gen, n_depth, r.test, sizeof r.test);
    if (n_ctx > MAX_TOKENS) {
        return fail("test %s: %ld tokens exceed the context limit of %ld", r.test, n_ctx, MAX_TOKENS);
    }

    int rc = 1;
    bitnet_error err = {{0}};
    bitnet_context *ctx = NULL;
    int32_t *tokens = malloc((size_t)n_ctx * sizeof *tokens);
    uint64_t *ns = malloc((size_t)o->reps * sizeof *ns);
    double *ts = malloc((size_t)o->reps * sizeof *ts);
    double *nsd = malloc((size_t)o->reps * sizeof *nsd);
    if (!tokens || !ns || !ts || !nsd) {
        fail("out of memory");
        goto done;
    }
    if (hp->n_vocab < 1) {
        fail("test %s: the model has no vocabulary (n_vocab %d)", r.test, (int)hp->n_vocab);
        goto done;
    }
    bitnet_rng rng;
    bitnet_rng_seed(&rng, (uint64_t)o->seed);
    for (long i = 0; i < n_ctx; i++) tokens[i] = (int32_t)(bitnet_rng_next(&rng) % (uint64_t)hp->n_vocab);

    const bitnet_context_params cp = {(int32_t)n_ctx, (int32_t)(n_batch < n_ctx ? n_batch : n_ctx), (int32_t)n_threads, 1, 1, false};
    if (bitnet_tool_cluster_context(env->cluster, model, &cp, &ctx, &err) != BITNET_OK) {
        fail("test %s: cannot create the context (n_ctx %ld, n_batch %ld, threads %ld): %s", r.test, n_ctx, n_batch,
             n_threads, err.msg);
        goto done;
    }
    if (*bitnet_context_kernel_choice(ctx))
        fprintf(stderr, "llama-bench: %s\nllama-bench: kernels: %s\n", bitnet_context_kernel_choice(ctx),
                bitnet_model_kernel_summary(model));
    /* the depth: positions 0..n_depth-1, once (the runs below write only the positions after them) */
    const int32_t *run_tokens = tokens + n_depth;
    if (n_depth > 0 && bitnet_decode(ctx, tokens, (int32_t)n_depth, 0, false, &err) != BITNET_OK) {
        fail("test %s: filling the KV cache to depth %ld failed: %s", r.test, n_depth, err.msg);
        goto done;
    }
    r.load1 = load_avg_1m();
    const time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv)) strftime(r.time, sizeof r.time, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    if (o->warmup) {
        /* the same work llama.cpp's warm-up does: the whole prompt, or one generated token */
        if (run_once(ctx, run_tokens, n_depth, n_prompt, n_prompt > 0 ? 0 : 1, &err)) {
            fail("test %s: warm-up evaluation failed: %s", r.test, err.msg);
            goto done;
        }
    }
    for (long k = 0; k < o->reps; k++) {
        const uint64_t t0 = bitnet_tool_now_ns();
        if (run_once(ctx, run_tokens, n_depth, n_prompt, n_gen, &err)) {
            fail("test %s: evaluation failed: %s", r.test, err.msg);
            goto done;
        }
        ns[k] = bitnet_tool_now_ns() - t0;
        if (ns[k] == 0) ns[k] = 1;
        nsd[k] = (double)ns[k];
        ts[k] = (double)(n_prompt + n_gen) * 1e9 / (double)ns[k];
        if (o->progress) {
            fprintf(stderr, "llama-bench: %s %s t=%ld b=%ld rep %ld/%ld: %.3f ms (%.2f t/s)\n", mi->file, r.test,
                    n_threads, n_batch, k + 1, o->reps, (double)ns[k] / 1e6, ts[k]);
        }
    }
    bitnet_tool_mean_sd(nsd, o->reps, &r.avg_ns, &r.sd_ns);
    bitnet_tool_mean_sd(ts, o->reps, &r.avg_ts, &r.sd_ts);
    r.ns = ns;
    r.ts = ts;
    if (strcmp(o->format, "md") == 0) md_row(env->layout, &r);
    else if (strcmp(o->format, "csv") == 0) csv_row(&r);
    else json_row(&r, env->n_rows == 0);
    fflush(stdout);
    env->n_rows++;
    rc = 0;

done:
    bitnet_context_free(ctx);
    free(tokens);
    free(ns);
    free(ts);
    free(nsd);
    return rc;
}

int main(int argc, char **argv) {
    options o = {.reps = 5, .format = "md", .seed = 42, .warmup = 1};
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    online = online >= 1 ? (online > 1024 ? 1024 : online) : 1;
    int rc = 1;
    model_info *mis = NULL;
    bitnet_tile_file *tiles = NULL; /* --lut-tiles, read once for every load */
    bitnet_tool_cluster *cluster = NULL; /* --plan */
    bitnet_model *staged = NULL;         /* --plan: this rank's stage of the one model */
    if (push_long(&o.n_prompt, 512) || push_long(&o.n_gen, 128) || push_long(&o.depth, 0) || push_long(&o.batch, 2048) ||
        push_long(&o.threads, online) || push_long(&o.kernels, BITNET_PATH_AUTO) ||
        push_long(&o.heads, 0)) {
        goto out;
    }
    const int pr = parse_args(argc, argv, &o);
    if (pr >= 0) {
        rc = pr;
        goto out;
    }

    if (o.lut_tiles) {
        bitnet_error err = {{0}};
        if (bitnet_tile_file_load(o.lut_tiles, o.lut_table, &tiles, &err) != BITNET_OK) {
            fail("--lut-tiles: %s", err.msg);
            goto out;
        }
    }
    if (o.plan) { /* one stage of a pipeline: one model loaded once, with this rank's layers */
        if (o.models.n != 1 || o.kernels.n != 1 || o.heads.n != 1) {
            rc = bitnet_tool_error("llama-bench", BITNET_EXIT_USAGE,
                                   "--plan runs one model with one kernel and one head type (got %zu, %zu, %zu)",
                                   o.models.n, o.kernels.n, o.heads.n);
            goto out;
        }
        bitnet_model_params mp = {(bitnet_kernel_path)o.kernels.v[0], o.lut_table, (int)o.heads.v[0], tiles, false, 0, 0,
                                  false, o.i2s_layout};
        if ((rc = bitnet_tool_cluster_begin("llama-bench", o.plan, o.link_emulate, o.models.v[0], &argc, &argv, &mp,
                                            &cluster)) >= 0)
            goto out;
        const int32_t plan_batch = bitnet_tool_cluster_n_batch(cluster);
        if (!o.batch.given && plan_batch > 0) {
            o.batch.v[0] = plan_batch; /* the prompt flows through the stages in the plan's micro-batches */
            o.batch.given = 1;        /* and the table shows it */
        }
        bitnet_error err = {{0}};
        const bitnet_status st = bitnet_model_load(o.models.v[0], &mp, &staged, &err);
        long most = 1, batch = 1, threads = 1; /* the largest context of any test, checked against the plan */
        for (size_t i = 0; i < o.n_prompt.n; i++) most = o.n_prompt.v[i] > most ? o.n_prompt.v[i] : most;
        for (size_t i = 0; i < o.n_gen.n; i++) most = o.n_gen.v[i] > most ? o.n_gen.v[i] : most;
        for (size_t i = 0; i < o.n_pg; i++) most = o.pg[i].n_prompt + o.pg[i].n_gen > most ? o.pg[i].n_prompt + o.pg[i].n_gen : most;
        long deepest = 0;
        for (size_t i = 0; i < o.depth.n; i++) deepest = o.depth.v[i] > deepest ? o.depth.v[i] : deepest;
        most += deepest;
        for (size_t i = 0; i < o.batch.n; i++) batch = o.batch.v[i] > batch ? o.batch.v[i] : batch;
        for (size_t i = 0; i < o.threads.n; i++) threads = o.threads.v[i] > threads ? o.threads.v[i] : threads;
        const bitnet_context_params cp = {(int32_t)(most < MAX_TOKENS ? most : MAX_TOKENS),
                                          (int32_t)(batch < most ? batch : most), (int32_t)threads, 1, 1, false};
        if ((rc = bitnet_tool_cluster_loaded(cluster, st, &err, &staged, &cp)) >= 0) {
            cluster = NULL;
            goto out;
        }
        rc = 1;
    }
    mis = calloc(o.models.n, sizeof *mis);
    if (!mis) {
        fail("out of memory");
        goto out;
    }
    table_layout L = {.w_model = 5, .w_file = 4, .w_kernel = 11, .w_test = 4}; /* "I2_S/avx512" */
    L.show_file = o.models.n > 1;
    L.show_batch = o.batch.given;
    for (size_t i = 0; i < o.heads.n; i++) {
        if (o.heads.v[i] != 0) L.w_kernel = 21; /* room for "I2_S/avx512+q8_0 head" */
    }
    for (size_t i = 0; i < o.models.n; i++) {
        if (describe_model(o.models.v[i], &mis[i])) goto out;
        const int lm = (int)strlen(mis[i].desc), lf = (int)strlen(mis[i].file);
        if (lm > L.w_model) L.w_model = lm;
        if (lf > L.w_file) L.w_file = lf;
    }
    char name[64];
    for (size_t i = 0; i < o.n_prompt.n + o.n_gen.n + o.n_pg; i++) {
        for (size_t di = 0; di < o.depth.n; di++) {
            const long d = o.depth.v[di];
            if (i < o.n_prompt.n) test_name(o.n_prompt.v[i], 0, d, name, sizeof name);
            else if (i < o.n_prompt.n + o.n_gen.n) test_name(0, o.n_gen.v[i - o.n_prompt.n], d, name, sizeof name);
            else test_name(o.pg[i - o.n_prompt.n - o.n_gen.n].n_prompt, o.pg[i - o.n_prompt.n - o.n_gen.n].n_gen, d,
                           name, sizeof name);
            if ((int)strlen(name) > L.w_test) L.w_test = (int)strlen(name);
        }
    }
    char cpu[256];
    cpu_info(cpu, sizeof cpu);
    fprintf(stderr, "llama-bench: cpu: %s, %ld online CPUs, load average %.2f\n", cpu, online, load_avg_1m());

    bench_env env = {.o = &o, .cluster = cluster, .layout = &L, .cpu = cpu};
    if (strcmp(o.format, "md") == 0) md_header(&L);
    else if (strcmp(o.format, "csv") == 0) csv_header();
    else printf("[\n");
    fflush(stdout);

    for (size_t mi = 0; mi < o.models.n; mi++) {
        for (size_t kh = 0; kh < o.kernels.n * o.heads.n; kh++) {
            const size_t ki = kh / o.heads.n, hi = kh % o.heads.n;
            bitnet_error err = {{0}};
            bitnet_model *model = NULL;
            const bitnet_model_params mp = {(bitnet_kernel_path)o.kernels.v[ki], o.lut_table, (int)o.heads.v[hi],
                                            tiles, false, 0, 0, false, o.i2s_layout};
            const uint64_t t0 = bitnet_tool_now_ns();
            if (staged) {
                model = staged; /* --plan: loaded above */
            } else if (bitnet_model_load(o.models.v[mi], &mp, &model, &err) != BITNET_OK) {
                fail("cannot load model '%s' (kernel %s): %s", o.models.v[mi],
                     bitnet_kernel_path_name((bitnet_kernel_path)o.kernels.v[ki]), err.msg);
                goto out;
            }
            fprintf(stderr, "llama-bench: loaded %s in %.0f ms; kernels: %s\n", o.models.v[mi],
                    (double)(bitnet_tool_now_ns() - t0) / 1e6, bitnet_model_kernel_summary(model));
            if (bitnet_model_i2s_note(model)[0]) fprintf(stderr, "llama-bench: %s\n", bitnet_model_i2s_note(model));
            char kernel[64];
            kernel_label(model, kernel, sizeof kernel);
            if (bitnet_model_head_requantized(model)) {
                const size_t kl = strlen(kernel);
                snprintf(kernel + kl, sizeof kernel - kl, "+q8_0 head");
            }
            int bad = 0;
            for (size_t bi = 0; bi < o.batch.n && !bad; bi++) {
                for (size_t ti = 0; ti < o.threads.n && !bad; ti++) {
                    for (size_t di = 0; di < o.depth.n && !bad; di++) {
                        const long b = o.batch.v[bi], t = o.threads.v[ti], d = o.depth.v[di];
                        for (size_t i = 0; i < o.n_prompt.n && !bad; i++) {
                            if (o.n_prompt.v[i] > 0)
                                bad = run_test(&env, model, &mis[mi], kernel, b, t, o.n_prompt.v[i], 0, d);
                        }
                        for (size_t i = 0; i < o.n_gen.n && !bad; i++) {
                            if (o.n_gen.v[i] > 0)
                                bad = run_test(&env, model, &mis[mi], kernel, b, t, 0, o.n_gen.v[i], d);
                        }
                        for (size_t i = 0; i < o.n_pg && !bad; i++) {
                            bad = run_test(&env, model, &mis[mi], kernel, b, t, o.pg[i].n_prompt, o.pg[i].n_gen, d);
                        }
                    }
                }
            }
            if (!staged) bitnet_model_free(model);
            if (bad) goto out;
        }
    }
    if (strcmp(o.format, "json") == 0) printf("%s]\n", env.n_rows ? "\n" : "");
    fflush(stdout);
    fprintf(stderr, "llama-bench: load average at the end %.2f\n", load_avg_1m());
    rc = 0;

out:
    rc = bitnet_tool_cluster_end(cluster, staged, rc);
    bitnet_model_free(staged);
    bitnet_tile_file_free(tiles);
    free(mis);
    free_options(&o);
    return rc;
}
