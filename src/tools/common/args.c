/* args.c — the table-driven command-line parser, the generated --help text, the one error path of a
 * bad command line and the number parsers of every tool (contract in args.h). */
#include "tools/common/args.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void vreport(const char *tool, const char *fmt, va_list ap) {
    fprintf(stderr, "%s: error: ", tool);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
}

int bitnet_args_fail(const bitnet_args *args, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(args->tool, fmt, ap);
    va_end(ap);
    return BITNET_EXIT_USAGE;
}

int bitnet_tool_error(const char *tool, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vreport(tool, fmt, ap);
    va_end(ap);
    return status;
}

/* ---- number parsers ------------------------------------------------------------------------ */

bool bitnet_args_to_int64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool bitnet_args_to_uint64(const char *s, int base, uint64_t *out) {
    if (!s || !*s || *s == '-') return false;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, base);
    if (errno || *end) return false;
    *out = v;
    return true;
}

/* strtof (single) or strtod of the whole string, in [lo, hi] (NaN refused). */
static bool to_real(const char *s, bool single, double lo, double hi, double *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    const double v = single ? (double)strtof(s, &end) : strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}

bool bitnet_args_to_double(const char *s, double lo, double hi, double *out) {
    return to_real(s, false, lo, hi, out);
}

bool bitnet_args_to_int64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap, int *n) {
    if (!s || !*s) return false;
    char buf[512];
    if (strlen(s) >= sizeof buf) return false;
    strcpy(buf, s);
    *n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*n >= cap || !bitnet_args_to_int64(tok, lo, hi, &out[*n])) return false;
        ++*n;
    }
    return *n > 0;
}

int bitnet_args_each_item(const char *value, int (*item)(void *user, const char *text, size_t len), void *user) {
    for (const char *p = value;;) {
        const char *c = strchr(p, ',');
        const size_t len = c ? (size_t)(c - p) : strlen(p);
        const int rc = item(user, p, len);
        if (rc || !c) return rc;
        p = c + 1;
    }
}

int bitnet_args_item_int64(const bitnet_args *args, const char *flag, const char *text, size_t len, int64_t lo,
                           int64_t hi, int64_t *out) {
    char buf[64];
    if (len == 0 || len >= sizeof buf) {
        return bitnet_args_fail(args, "%s expects integers in [%lld, %lld], got '%.*s'", flag, (long long)lo,
                                (long long)hi, (int)(len > 60 ? 60 : len), text);
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    if (!bitnet_args_to_int64(buf, lo, hi, out)) {
        return bitnet_args_fail(args, "%s expects integers in [%lld, %lld], got '%s'", flag, (long long)lo,
                                (long long)hi, buf);
    }
    return 0;
}

/* ---- the table --------------------------------------------------------------------------------- */

static bool takes_value(const bitnet_arg_opt *o) {
    return o->kind != BITNET_ARG_FLAG && o->kind != BITNET_ARG_FLAG_OFF && o->kind != BITNET_ARG_ACTION &&
           o->kind != BITNET_ARG_SECTION;
}

/* Whether `names` ("-m, --model") holds the spelling word[0..len). */
static bool has_name(const char *names, const char *word, size_t len) {
    for (const char *p = names; p && *p;) {
        const char *c = strchr(p, ',');
        const size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == len && strncmp(p, word, len) == 0) return true;
        if (!c) break;
        p = c + 1;
        while (*p == ' ') p++;
    }
    return false;
}

static const bitnet_arg_opt *find_opt(const bitnet_args *args, const char *word, size_t len) {
    for (int i = 0; i < args->n_opts; i++) {
        if (args->opts[i].kind != BITNET_ARG_SECTION && has_name(args->opts[i].names, word, len)) return &args->opts[i];
    }
    return NULL;
}

/* "a|b|c" as "a, b or c" */
static void choice_list(const char *choices, char *out, size_t cap) {
    size_t n = 0, bars = 0;
    for (const char *p = choices; *p; p++) bars += *p == '|';
    out[0] = '\0';
    for (const char *p = choices; *p && n + 8 < cap; p++) {
        if (*p == '|') {
            const char *sep = --bars == 0 ? " or " : ", ";
            n += (size_t)snprintf(out + n, cap - n, "%s", sep);
        } else {
            out[n++] = *p;
            out[n] = '\0';
        }
    }
}

static int choice_index(const char *choices, const char *v) {
    const size_t len = strlen(v);
    int idx = 0;
    for (const char *p = choices;; idx++) {
        const char *c = strchr(p, '|');
        const size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == len && strncmp(p, v, n) == 0) return idx;
        if (!c) return -1;
        p = c + 1;
    }
}

/* Stores value (already taken from argv) as o's kind says. 0, or BITNET_EXIT_USAGE (message printed). */
static int store(const bitnet_args *args, const bitnet_arg_opt *o, const char *flag, const char *v) {
    int64_t i64 = 0;
    switch (o->kind) {
    case BITNET_ARG_FLAG: *(bool *)o->dst = true; return 0;
    case BITNET_ARG_FLAG_OFF: *(bool *)o->dst = false; return 0;
    case BITNET_ARG_ACTION:
    case BITNET_ARG_CALL: return o->fn(args, o, flag, v);
    case BITNET_ARG_INT:
    case BITNET_ARG_INT32:
    case BITNET_ARG_LONG:
    case BITNET_ARG_INT64:
        if (!bitnet_args_to_int64(v, o->lo, o->hi, &i64)) {
            return bitnet_args_fail(args, "%s expects an integer in [%lld, %lld], got '%s'", flag, (long long)o->lo,
                                    (long long)o->hi, v);
        }
        if (o->kind == BITNET_ARG_INT) *(int *)o->dst = (int)i64;
        else if (o->kind == BITNET_ARG_INT32) *(int32_t *)o->dst = (int32_t)i64;
        else if (o->kind == BITNET_ARG_LONG) *(long *)o->dst = (long)i64;
        else *(int64_t *)o->dst = i64;
        return 0;
    case BITNET_ARG_UINT64:
        if (!bitnet_args_to_uint64(v, o->lo == 1 ? 0 : 10, (uint64_t *)o->dst)) {
            return bitnet_args_fail(args, "%s expects an integer in [0, 2^64-1], got '%s'", flag, v);
        }
        return 0;
    case BITNET_ARG_FLOAT:
    case BITNET_ARG_DOUBLE: {
        /* a float's range is compared in float, as the value is */
        const bool single = o->kind == BITNET_ARG_FLOAT;
        const double lo = single ? (double)(float)o->flo : o->flo, hi = single ? (double)(float)o->fhi : o->fhi;
        double x;
        if (!to_real(v, single, lo, hi, &x)) {
            return bitnet_args_fail(args, "%s expects a number in [%g, %g], got '%s'", flag, o->flo, o->fhi, v);
        }
        if (single) *(float *)o->dst = (float)x;
        else *(double *)o->dst = x;
        return 0;
    }
    case BITNET_ARG_STRING: *(const char **)o->dst = v; return 0;
    case BITNET_ARG_WORD:
    case BITNET_ARG_CHOICE: {
        const int idx = choice_index(o->choices, v);
        if (idx < 0) {
            char list[256];
            choice_list(o->choices, list, sizeof list);
            return bitnet_args_fail(args, "%s expects %s, got '%s'", flag, list, v);
        }
        if (o->kind == BITNET_ARG_WORD) *(const char **)o->dst = v;
        else *(int *)o->dst = idx;
        return 0;
    }
    case BITNET_ARG_SECTION: break;
    }
    return 0;
}

/* One option word at argv[*i] (its value may be argv[*i + 1]). 0 or BITNET_EXIT_USAGE. */
static int parse_option(const bitnet_args *args, int argc, char **argv, int *i) {
    const char *word = argv[*i];
    const char *eq = strncmp(word, "--", 2) == 0 ? strchr(word, '=') : NULL;
    const size_t len = eq ? (size_t)(eq - word) : strlen(word);
    const bitnet_arg_opt *o = find_opt(args, word, len);
    if (!o) return bitnet_args_fail(args, "unknown argument '%s' (see --help)", word);
    char flag[64];
    snprintf(flag, sizeof flag, "%.*s", (int)(len < 60 ? len : 60), word);
    const char *value = eq ? eq + 1 : NULL;
    if (!takes_value(o)) {
        if (value) return bitnet_args_fail(args, "%s takes no value, got '%s'", flag, value);
    } else if (!value) {
        const char *next = *i + 1 < argc ? argv[*i + 1] : NULL;
        if (o->optional) {
            if (next && o->takes_next && o->takes_next(next)) value = argv[++*i];
        } else {
            if (!next) return bitnet_args_fail(args, "%s needs a value (see --help)", flag);
            value = argv[++*i];
        }
    }
    if (o->given) *o->given = true;
    return store(args, o, flag, value);
}

int bitnet_args_parse(const bitnet_args *args, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            bitnet_args_print_help(args);
            return BITNET_EXIT_OK;
        }
        if (a[0] == '-' && a[1] != '\0') {
            if (parse_option(args, argc, argv, &i)) return BITNET_EXIT_USAGE;
        } else if (!args->positional) {
            return bitnet_args_fail(args, "unknown argument '%s' (see --help)", a);
        } else if (*args->pos_dst) {
            return bitnet_args_fail(args, "more than one %s ('%s', '%s')", args->positional, *args->pos_dst, a);
        } else {
            *args->pos_dst = a;
        }
    }
    return -1;
}

/* ---- --help -------------------------------------------------------------------------------------- */

/* The left column of o: "-m, --model FILE"; long-only options are indented under the long names of
 * the options with a short one when the table has any. */
static int left_column(const bitnet_args *args, const bitnet_arg_opt *o, char *out, size_t cap) {
    bool any_short = false;
    for (int i = 0; i < args->n_opts; i++) {
        const char *n = args->opts[i].names;
        any_short = any_short || (args->opts[i].kind != BITNET_ARG_SECTION && n[0] == '-' && n[1] != '-');
    }
    const bool indent = !args->flat && any_short && strncmp(o->names, "--", 2) == 0;
    return snprintf(out, cap, "%s%s%s%s", indent ? "    " : "", o->names, o->metavar ? " " : "",
                    o->metavar ? o->metavar : "");
}

static void print_option(const char *left, const char *help, int col) {
    const int pad = col - 2 - (int)strlen(left);
    printf("  %s%*s", left, pad > 1 ? pad : 1, "");
    for (const char *p = help; *p; p++) {
        putchar(*p);
        if (*p == '\n' && p[1]) printf("%*s", col, "");
    }
    putchar('\n');
}

void bitnet_args_print_help(const bitnet_args *args) {
    char left[128];
    int col = args->help_col;
    if (col == 0) {
        for (int i = 0; i < args->n_opts; i++) {
            if (args->opts[i].kind == BITNET_ARG_SECTION) continue;
            const int w = left_column(args, &args->opts[i], left, sizeof left);
            if (w + 4 > col && w <= 28) col = w + 4;
        }
    }
    printf("%s\n\n", args->usage);
    if (args->description) printf("%s\n", args->description);
    for (int i = 0; i < args->n_opts; i++) {
        const bitnet_arg_opt *o = &args->opts[i];
        if (o->kind == BITNET_ARG_SECTION) {
            printf("%s\n", o->help);
            continue;
        }
        left_column(args, o, left, sizeof left);
        print_option(left, o->help, col);
    }
    print_option("-h, --help", "this text", col);
    if (args->epilogue) printf("\n%s", args->epilogue);
}
