/* args.h — the command-line module of every tool in src/tools: one table of options drives both the
 * parser and the --help text, and one error path reports a bad command line.
 *
 * Exit-code contract of every tool (stated in README.md and in every tool's help epilogue):
 *   0 success, 1 runtime/model/file error, 2 bad command line.
 * (llama-cli -cnv adds 3 "context full" and 130 "Ctrl-C at the prompt".)
 *
 * Parsing, llama.cpp-style: `--model FILE`, `--model=FILE`, `-m FILE`; short names may have several
 * letters (`-ngl`, `-cnv`, `-pg`); an option may be given again (the last value wins, or a callback
 * collects every occurrence); words that are not options are positional arguments when the table
 * names one (bitnet-convert, bitnet-vocab MODEL_DIR); `-h`/`--help` is always known. Options are
 * processed in command-line order, so a preset (--quick) is overridden by the flags after it.
 * Errors print "<tool>: error: <message>" on stderr and make the parser return BITNET_EXIT_USAGE. */
#ifndef BITNET_TOOL_ARGS_H
#define BITNET_TOOL_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { BITNET_EXIT_OK = 0, BITNET_EXIT_FAILURE = 1, BITNET_EXIT_USAGE = 2 };

/* The sentence every tool's --help ends with. */
#define BITNET_EXIT_STATUS_HELP "Exit status: 0 success, 1 runtime/model/file error, 2 bad command line.\n"

typedef enum bitnet_arg_kind {
    BITNET_ARG_SECTION, /* no option: `help` is a heading line of the --help text */
    BITNET_ARG_FLAG,    /* no value: *(bool *)dst = true */
    BITNET_ARG_FLAG_OFF,/* no value: *(bool *)dst = false */
    BITNET_ARG_ACTION,  /* no value: fn(args, opt, flag, NULL) */
    BITNET_ARG_INT,     /* int in [lo, hi] */
    BITNET_ARG_INT32,   /* int32_t in [lo, hi] */
    BITNET_ARG_LONG,    /* long in [lo, hi] */
    BITNET_ARG_INT64,   /* int64_t in [lo, hi] */
    BITNET_ARG_UINT64,  /* uint64_t, any; decimal (base 0: 0x.. too when `lo` is 1) */
    BITNET_ARG_FLOAT,   /* float in [flo, fhi] */
    BITNET_ARG_DOUBLE,  /* double in [flo, fhi] */
    BITNET_ARG_STRING,  /* const char *: the argv word itself */
    BITNET_ARG_CHOICE,  /* one of `choices` ("a|b|c"): *(int *)dst = its index */
    BITNET_ARG_WORD,    /* one of `choices` ("a|b|c"): *(const char **)dst = the argv word */
    BITNET_ARG_CALL,    /* a value: fn(args, opt, flag, value); value NULL when optional and absent */
} bitnet_arg_kind;

typedef struct bitnet_args bitnet_args;
typedef struct bitnet_arg_opt bitnet_arg_opt;

/* ACTION/CALL: the option's row (its dst, range), the spelling given and the value (NULL: none).
 * Returns 0, or the return of bitnet_args_fail (BITNET_EXIT_USAGE). */
typedef int (*bitnet_arg_fn)(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *value);

struct bitnet_arg_opt {
    const char *names;   /* spellings, ", "-separated as --help shows them: "-m, --model" */
    const char *metavar; /* "FILE", "[T]" (optional value); NULL for options without a value */
    const char *help;    /* the help text; '\n' starts a continuation line */
    bitnet_arg_kind kind;
    void *dst;
    int64_t lo, hi;      /* integer kinds: the accepted range */
    double flo, fhi;     /* FLOAT/DOUBLE: the accepted range */
    const char *choices; /* CHOICE: "auto|i2_s|tl1|tl2" */
    bitnet_arg_fn fn;    /* ACTION/CALL: the callback */
    /* CALL with an optional value: whether the next argv word is the value (NULL: never). The
     * `--flag=value` spelling always is. */
    bool (*takes_next)(const char *next);
    bool optional;       /* CALL: the value may be absent */
    bool *given;         /* set to true when the option appears (may be NULL) */
};

/* One table row: names, metavar, help, kind, dst, then designated extras (.lo = 1, .hi = 9, .fn = f, ...). */
#define BITNET_OPT(names_, metavar_, help_, kind_, dst_, ...) \
    { .names = (names_), .metavar = (metavar_), .help = (help_), .kind = (kind_), .dst = (dst_), __VA_ARGS__ }

struct bitnet_args {
    const char *tool;        /* program name of the messages: "llama-cli" */
    const char *usage;       /* "usage: llama-cli -m MODEL [options]" (without "\n") */
    const char *description; /* the paragraph(s) after the usage line (may be NULL) */
    const char *epilogue;    /* the text after the options (may be NULL); ends with the exit status */
    const bitnet_arg_opt *opts;
    int n_opts;
    const char *positional;  /* name of the one positional argument ("MODEL_DIR"), or NULL */
    const char **pos_dst;    /* where it goes */
    int help_col;            /* column of the help texts (0: from the widest option) */
    bool flat;               /* --help: long-only options start where "-x, --long" ones do (no indent) */
};

/* The --lut-tiles row of the tools that load a model (llama-cli, llama-bench, llama-perplexity). */
#define BITNET_OPT_LUT_TILES(dst_)                                                                  \
    BITNET_OPT("--lut-tiles", "FILE",                                                               \
               "the tiles a TL1/TL2 file without a tile record (bitnet.cpp's) was\n"                  \
               "packed with: bitnet.cpp's include/kernel_config.ini or a configs/ YAML",            \
               BITNET_ARG_STRING, (dst_))

/* The --i2s-layout row of the tools that load a model: an int that takes bitnet_i2s_layout's values
 * (base/common.h; the choices are in its order, AUTO first), passed as bitnet_model_params.i2s_layout. */
#define BITNET_OPT_I2S_LAYOUT(dst_)                                                                 \
    BITNET_OPT("--i2s-layout", "L",                                                                 \
               "how the I2_S weights of a file that does not record it were\n"                        \
               "packed by bitnet.cpp: x86 (its x86 build, the official files),\n"                     \
               "arm64 (its ARM builds), rows4 (x86 without ACT_PARALLEL); auto\n"                     \
               "(default): the file's record, else x86",                                           \
               BITNET_ARG_CHOICE, (dst_), .choices = "auto|x86|arm64|rows4")

/* A bitnet_args of a static opts[] array, then designated extras (.positional = ..., .help_col = 26). */
#define BITNET_ARGS(tool_, usage_, description_, epilogue_, opts_, ...)                                      \
    { .tool = (tool_), .usage = (usage_), .description = (description_), .epilogue = (epilogue_), .opts = (opts_), \
      .n_opts = (int)(sizeof(opts_) / sizeof((opts_)[0])), __VA_ARGS__ }

/* Parses argv[1..argc) by the table. Returns -1 when the tool goes on; otherwise the exit status the
 * tool returns at once: 0 after --help was printed on stdout, BITNET_EXIT_USAGE after an error
 * message. */
int bitnet_args_parse(const bitnet_args *args, int argc, char **argv);

/* The --help text on stdout: usage, description, one line per option (help text), epilogue. */
void bitnet_args_print_help(const bitnet_args *args);

/* "<tool>: error: <message>\n" on stderr; returns BITNET_EXIT_USAGE (for a bad command line, also for
 * cross-flag checks in the tool after bitnet_args_parse). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int bitnet_args_fail(const bitnet_args *args, const char *fmt, ...);

/* "<tool>: error: <message>\n" on stderr; returns `status` (a tool's runtime errors: BITNET_EXIT_FAILURE). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int bitnet_tool_error(const char *tool, int status, const char *fmt, ...);

/* The number parsers (whole string, base 10, no message): true and *out when s is a number in range. */
bool bitnet_args_to_int64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool bitnet_args_to_uint64(const char *s, int base, uint64_t *out); /* no sign; base 10 or 0 */
bool bitnet_args_to_double(const char *s, double lo, double hi, double *out);

/* Up to cap integers in [lo, hi] of a comma list ("1,2,3"; empty items are skipped, as strtok skips
 * them) → out[0..*n). false on a malformed or out-of-range item, more than cap items, no item, or a
 * list of 512 or more characters. */
bool bitnet_args_to_int64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int cap, int *n);

/* Calls item(user, text, len) for every comma-separated item of value ("a,b,c"; an empty item is
 * passed too). Stops at and returns the first non-zero return of item. */
int bitnet_args_each_item(const char *value, int (*item)(void *user, const char *text, size_t len), void *user);

/* An item of a comma list as an integer in [lo, hi]; on a bad item prints
 * "<flag> expects integers in [lo, hi], got '<item>'" and returns BITNET_EXIT_USAGE. */
int bitnet_args_item_int64(const bitnet_args *args, const char *flag, const char *text, size_t len, int64_t lo,
                           int64_t hi, int64_t *out);

#endif
