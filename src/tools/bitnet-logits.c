/* bitnet-logits — evaluate a prompt with a BitNet GGUF model and write the logits of every position:
 * the full matrix to a file (for the reference-forward-pass tests and for comparisons with other
 * engines) and/or the top-k of each position to stdout.
 *
 *   bitnet-logits -m MODEL (-p TEXT | --tokens 1,2,3) [--out FILE] [--top-k K] [-t N] [-b N]
 *                 [--kernel auto|i2_s|tl1|tl2] [--lut-table default|pretuned] [--head-type stored|q8_0]
 *                 [--lut-tiles FILE] [--no-bos] [--embd]
 *
 * FILE: raw IEEE-754 binary32, little endian, row-major [n_tokens][n_vocab] (row t = the logits after
 * token t, i.e. the prediction of token t+1), nothing else. FILE.json: a header describing it —
 *   {"format": "bitnet-logits", "version": 1, "model": ..., "arch": ..., "n_vocab": V, "n_tokens": T,
 *    "tokens": [...], "prompt": TEXT or null, "add_bos": bool, "kernel_path": "I2_S"|"TL1"|"TL2",
 *    "kernel_summary": ..., "i2s_layout": "x86"|"arm64"|"rows4" (the layout its I2_S weights were read
 *    in; "auto" without I2_S weights), "threads": N, "batch": B, "dtype": "f32", "byte_order": "little",
 *    "shape": [T, V], "data_file": basename of FILE}.
 * With --embd the rows are the token embeddings instead ([n_tokens][n_embd], model.h
 * bitnet_get_embeddings_ith) and the header says "format": "bitnet-embd", "shape": [T, n_embd]; it also
 * carries "n_embd" in both formats.
 * Both are written to FILE.tmp / FILE.json.tmp first (base/outfile.h), flushed to disk, and renamed when
 * both are complete, so a failure (a full disk: "cannot write FILE: No space left on device") never
 * leaves a truncated file under the final names and removes the temporary ones; files already there keep
 * their bytes.
 * stdout (when --top-k is given, or when --out is not): one line per position,
 *   pos=<t> token=<id> top: <id>=<logit> <id>=<logit> ...   (logits with %.6f, best first, ties by id)
 * stderr: one line about the model and the kernels (and one on the I2_S layout); error messages.
 * Logits do not depend on -t or -b (model.h), so any thread count reproduces the same file.
 * Exit status (args.h): 0 success; 1 the model cannot be loaded or evaluated, or FILE cannot be written; 2 a bad
 * command line (the message names the flag and the value). */
#include "base/outfile.h"
#include "base/types.h"
#include "model/model.h"
#include "tilefile/tile_file.h"
#include "text/tokenizer.h"
#include "tools/common/args.h"
#include "tools/common/cluster_opt.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* "1,2,3" or "1 2 3" (any mix of commas and white space) → ids. false on anything else. */
static bool parse_ids(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return false;
    const char *p = s;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n')) {
            free(v);
            return false;
        }
        if (k == cap) {
            int32_t *nv = realloc(v, 2 * cap * sizeof *v);
            if (!nv) {
                free(v);
                return false;
            }
            v = nv;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n = k;
    return true;
}

/* s as a JSON string (quotes included): ", \ and control characters escaped; valid UTF-8 sequences
 * kept; a byte that does not start a valid sequence becomes U+FFFD, so the header is valid JSON. */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const unsigned char c = *p;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            p++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            fputc(c, f);
            p++;
        } else {
            int len = (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
            bool ok = len > 0;
            for (int i = 1; ok && i < len; i++) ok = (p[i] & 0xC0) == 0x80;
            /* no overlong 3/4-byte forms, no surrogates, nothing above U+10FFFF */
            if (ok && len == 3) ok = !(c == 0xE0 && p[1] < 0xA0) && !(c == 0xED && p[1] >= 0xA0);
            if (ok && len == 4) ok = !(c == 0xF0 && p[1] < 0x90) && !(c == 0xF4 && p[1] >= 0x90);
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

/* The k best (logit, id) of one row, best first; equal logits by ascending id. */
static void top_k(const float *l, int32_t n, int32_t k, int32_t *ids) {
    int32_t m = 0; /* ids[0..m) sorted */
    for (int32_t i = 0; i < n; i++) {
        if (m == k && !(l[i] > l[ids[m - 1]])) continue;
        int32_t j = m < k ? m++ : k - 1;
        while (j > 0 && l[i] > l[ids[j - 1]]) {
            ids[j] = ids[j - 1];
            j--;
        }
        ids[j] = i;
    }
}

typedef struct options {
    const char *model, *prompt, *tokens, *out, *lut_table, *lut_tiles;
    long top_k, n_threads, n_batch;
    const char *plan;  /* --plan FILE: one stage of a cluster plan under mpirun */
    bool link_emulate; /* --link-emulate */
    bool have_top_k, no_bos;
    bool embd;     /* --embd: token embeddings instead of logits */
    int kernel;    /* bitnet_kernel_path: the index in "auto|i2_s|tl1|tl2" is the enum's value */
    int head_type; /* bitnet_model_params.head_type */
    int i2s_layout; /* bitnet_model_params.i2s_layout (--i2s-layout) */
} options;

static int on_out(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    (void)flag;
    if (!*v) return bitnet_args_fail(args, "--out needs a file name");
    *(const char **)opt->dst = v;
    return 0;
}

/* The command line into o; -1 to go on, else the exit status (help printed, or a bad command line). */
static int parse_args(int argc, char **argv, options *o) {
    int head = 0;
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE", "model (GGUF)", BITNET_ARG_STRING, &o->model),
        BITNET_OPT("-p, --prompt", "TEXT",
         "prompt text, tokenized with the model's vocabulary (BOS added as the\n"
         "vocabulary asks, special-token texts parsed)",
         BITNET_ARG_STRING, &o->prompt),
        BITNET_OPT("--tokens", "IDS", "token ids instead of text, separated by commas or spaces (e.g. 1,450,439)",
         BITNET_ARG_STRING, &o->tokens),
        BITNET_OPT("--no-bos", NULL, "with -p: do not add BOS", BITNET_ARG_FLAG, &o->no_bos),
        BITNET_OPT("--embd", NULL,
         "write every position's embedding instead of its logits (with --out: FILE\n"
         "[n_tokens][n_embd], format \"bitnet-embd\"): RMSNorm(x) * output_norm\n"
         "after the last layer, before any head (docs/EMBEDDINGS.md)",
         BITNET_ARG_FLAG, &o->embd),
        BITNET_OPT("--out", "FILE", "write all logits: FILE (f32 little endian [n_tokens][n_vocab]) + FILE.json",
         BITNET_ARG_CALL, &o->out, .fn = on_out),
        BITNET_OPT("--top-k", "K", "print the K best tokens of every position on stdout (default 5 without --out)",
         BITNET_ARG_LONG, &o->top_k, .lo = 1, .hi = 1 << 24, .given = &o->have_top_k),
        BITNET_OPT("-t, --threads", "N", "threads (default: the number of online CPUs)", BITNET_ARG_LONG, &o->n_threads, .lo = 1, .hi = 1024),
        BITNET_OPT("-b, --batch-size", "N", "tokens per forward pass (default 512)", BITNET_ARG_LONG, &o->n_batch, .lo = 1, .hi = 1 << 24),
        BITNET_OPT_PLAN(&o->plan, &o->link_emulate),
        BITNET_OPT("--kernel", "K", "auto|i2_s|tl1|tl2 (default auto)", BITNET_ARG_CHOICE, &o->kernel, .choices = "auto|i2_s|tl1|tl2"),
        BITNET_OPT("--lut-table", "T", "default|pretuned: preferred tile table", BITNET_ARG_WORD, &o->lut_table, .choices = "default|pretuned"),
        BITNET_OPT("--lut-tiles", "FILE",
         "the tiles a TL1/TL2 file without a tile record (bitnet.cpp's) was packed\n"
         "with: bitnet.cpp's include/kernel_config.ini or a configs/-style YAML",
         BITNET_ARG_STRING, &o->lut_tiles),
        BITNET_OPT_I2S_LAYOUT(&o->i2s_layout),
        BITNET_OPT("--head-type", "H",
         "stored|q8_0: output head as stored (default) or requantized to Q8_0 at load\n"
         "(the kernel_summary in FILE.json then ends with \"head: Q8_0 ...\")",
         BITNET_ARG_CHOICE, &head, .choices = "stored|q8_0"),
    };
    static const char *const k_desc = "Evaluates a prompt and writes the logits of every position.\n";
    const bitnet_args args = BITNET_ARGS("bitnet-logits",
                                         "usage: bitnet-logits -m MODEL (-p TEXT | --tokens IDS) [options]", k_desc,
                                         BITNET_EXIT_STATUS_HELP, opts, .help_col = 25);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    o->head_type = head ? BITNET_TYPE_Q8_0 : 0;
    if (!o->model) return bitnet_args_fail(&args, "no model given (-m FILE)");
    if (!o->prompt == !o->tokens) return bitnet_args_fail(&args, "give exactly one of -p TEXT and --tokens IDS");
    if (o->no_bos && !o->prompt) return bitnet_args_fail(&args, "--no-bos only applies to -p");
    if (o->embd && (!o->out || o->have_top_k))
        return bitnet_args_fail(&args, "--embd writes embeddings to --out FILE (needed) and has no --top-k");
    if (o->embd && o->plan) return bitnet_args_fail(&args, "--embd does not run under --plan");
    return -1;
}

/* Write the JSON header of the logits file to f (its stdio errors are reported when f is finished). */
static void write_header(FILE *f, const options *o, const bitnet_model *m, const int32_t *ids, size_t n,
                         bool add_bos, long n_threads, long n_batch) {
    const bitnet_hparams *hp = bitnet_model_hparams(m);
    const char *base = strrchr(o->out, '/');
    base = base ? base + 1 : o->out;
    const int32_t width = o->embd ? hp->n_embd : hp->n_vocab;
    fprintf(f, "{\n  \"format\": \"%s\",\n  \"version\": 1,\n  \"model\": ", o->embd ? "bitnet-embd" : "bitnet-logits");
    json_string(f, o->model);
    fprintf(f, ",\n  \"arch\": ");
    json_string(f, hp->arch);
    fprintf(f, ",\n  \"n_vocab\": %d,\n  \"n_embd\": %d,\n  \"n_tokens\": %zu,\n  \"tokens\": [", hp->n_vocab,
            hp->n_embd, n);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", ids[i]);
    fprintf(f, "],\n  \"prompt\": ");
    if (o->prompt) json_string(f, o->prompt);
    else fputs("null", f);
    fprintf(f, ",\n  \"add_bos\": %s,\n  \"kernel_path\": ", add_bos ? "true" : "false");
    json_string(f, bitnet_kernel_path_name(bitnet_model_path(m)));
    fprintf(f, ",\n  \"kernel_summary\": ");
    json_string(f, bitnet_model_kernel_summary(m));
    fprintf(f, ",\n  \"i2s_layout\": ");
    json_string(f, bitnet_i2s_layout_name(bitnet_model_i2s_layout(m)));
    fprintf(f, ",\n  \"threads\": %ld,\n  \"batch\": %ld,\n  \"dtype\": \"f32\",\n  \"byte_order\": \"little\",\n"
               "  \"shape\": [%zu, %d],\n  \"data_file\": ",
            n_threads, n_batch, n, width);
    json_string(f, base);
    fprintf(f, "\n}\n");
}

/* Evaluates ids in chunks of n_batch tokens, keeping every position's logits: each chunk's rows go to
 * `out` (when not NULL) before the next, so memory stays at n_batch rows; the kk best of every row are
 * printed when kk > 0 (top: kk ids). false after a message (a failed write has aborted out). */
static bool evaluate(bitnet_context *c, const int32_t *ids, size_t n, int32_t n_batch, int32_t n_vocab, bool embd,
                     bitnet_outfile *out, int32_t kk, int32_t *top) {
    bitnet_error err = {{0}};
    for (size_t start = 0; start < n; start += (size_t)n_batch) {
        const int32_t cnt = (int32_t)(n - start < (size_t)n_batch ? n - start : (size_t)n_batch);
        if (bitnet_decode(c, ids + start, cnt, (int32_t)start, true, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-logits: evaluating tokens %zu..%zu: %s\n", start, start + (size_t)cnt - 1, err.msg);
            return false;
        }
        for (int32_t j = 0; j < cnt; j++) {
            const float *l = embd ? bitnet_get_embeddings_ith(c, j) : bitnet_get_logits_ith(c, j);
            if (!l) {
                fprintf(stderr, "bitnet-logits: no output row for position %zu\n", start + (size_t)j);
                return false;
            }
            if (out && bitnet_outfile_write(out, l, sizeof(float) * (size_t)n_vocab, &err) != BITNET_OK) {
                fprintf(stderr, "bitnet-logits: %s\n", err.msg);
                return false;
            }
            if (kk > 0) {
                top_k(l, n_vocab, kk, top);
                printf("pos=%zu token=%d top:", start + (size_t)j, ids[start + (size_t)j]);
                for (int32_t r = 0; r < kk; r++) printf(" %d=%.6f", top[r], (double)l[top[r]]);
                printf("\n");
            }
        }
    }
    return true;
}

int main(int argc, char **argv) {
    options o = {0};
    o.kernel = BITNET_PATH_AUTO;
    o.n_batch = 512;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.n_threads = ncpu > 0 ? (ncpu > 1024 ? 1024 : ncpu) : 1;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    {
        const uint16_t one = 1;
        uint8_t lo;
        memcpy(&lo, &one, 1);
        if (lo != 1) {
            fprintf(stderr, "bitnet-logits: big-endian hosts are not supported (GGUF and the output are little endian)\n");
            return 1;
        }
    }

    int32_t *ids = NULL;
    size_t n = 0;
    if (o.tokens && (!parse_ids(o.tokens, &ids, &n) || n == 0)) {
        free(ids);
        return bitnet_tool_error("bitnet-logits", BITNET_EXIT_USAGE,
                                 "--tokens expects non-negative integers separated by commas or spaces, got '%s'",
                                 o.tokens);
    }

    bitnet_error err = {{0}};
    bitnet_model *m = NULL;
    bitnet_context *c = NULL;
    char *json_path = NULL;
    bitnet_outfile data = {0}, json = {0}; /* --out FILE and FILE.json */
    int32_t *top = NULL;
    bitnet_tool_cluster *cluster = NULL; /* --plan */
    rc = 1;

    bitnet_tile_file *tiles = NULL; /* --lut-tiles; a YAML with several tables needs --lut-table */
    if (o.lut_tiles && bitnet_tile_file_load(o.lut_tiles, o.lut_table, &tiles, &err) != BITNET_OK) {
        fprintf(stderr, "bitnet-logits: --lut-tiles: %s\n", err.msg);
        goto done;
    }
    bitnet_model_params mp = {(bitnet_kernel_path)o.kernel, o.lut_table, o.head_type, tiles, false, 0, 0, false, o.i2s_layout};
    if ((rc = bitnet_tool_cluster_begin("bitnet-logits", o.plan, o.link_emulate, o.model, &argc, &argv, &mp, &cluster)) >=
        0) {
        bitnet_tile_file_free(tiles);
        goto done;
    }
    rc = 1;
    const bitnet_status load_st = bitnet_model_load(o.model, &mp, &m, &err);
    bitnet_tile_file_free(tiles);
    if (load_st != BITNET_OK) {
        if (!cluster) {
            fprintf(stderr, "bitnet-logits: %s\n", err.msg);
        } else { /* every rank learns of it */
            const bitnet_context_params none = {1, 1, 1, 1, 1, false};
            rc = bitnet_tool_cluster_loaded(cluster, load_st, &err, &m, &none);
            cluster = NULL;
        }
        goto done;
    }
    const bitnet_hparams *hp = bitnet_model_hparams(m);
    bool add_bos = false;
    if (o.prompt) {
        add_bos = !o.no_bos && bitnet_vocab_add_bos(bitnet_model_vocab(m));
        if (bitnet_tokenize(bitnet_model_vocab(m), o.prompt, strlen(o.prompt), !o.no_bos, true, &ids, &n, &err) !=
            BITNET_OK) {
            fprintf(stderr, "bitnet-logits: tokenizing the prompt: %s\n", err.msg);
            goto done;
        }
        if (n == 0) {
            fprintf(stderr, "bitnet-logits: the prompt gives no tokens (empty text and no BOS)\n");
            goto done;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= hp->n_vocab) {
            fprintf(stderr, "bitnet-logits: token id %d at index %zu is out of range [0, %d) for %s\n", ids[i], i,
                    hp->n_vocab, o.model);
            goto done;
        }
    }
    if (n > (size_t)INT32_MAX / 2) {
        fprintf(stderr, "bitnet-logits: %zu tokens is too many\n", n);
        goto done;
    }
    const int32_t n_batch = (int32_t)(o.n_batch < (long)n ? o.n_batch : (long)n);
    const bitnet_context_params cp = {(int32_t)n, n_batch, (int32_t)o.n_threads, 1, 1, o.embd};
    if ((rc = bitnet_tool_cluster_loaded(cluster, BITNET_OK, &err, &m, &cp)) >= 0) {
        cluster = NULL; /* a serving rank is done, or the plan was refused */
        goto done;
    }
    rc = 1;
    fprintf(stderr, "bitnet-logits: %s: arch %s, n_vocab %d, %zu tokens; %s path: %s\n", o.model, hp->arch,
            hp->n_vocab, n, bitnet_kernel_path_name(bitnet_model_path(m)), bitnet_model_kernel_summary(m));
    if (bitnet_model_i2s_note(m)[0]) fprintf(stderr, "bitnet-logits: %s\n", bitnet_model_i2s_note(m));

    if (bitnet_tool_cluster_context(cluster, m, &cp, &c, &err) != BITNET_OK) {
        fprintf(stderr, "bitnet-logits: %s\n", err.msg);
        goto done;
    }

    if (o.out) {
        const size_t len = strlen(o.out);
        json_path = malloc(len + 6);
        if (!json_path) {
            fprintf(stderr, "bitnet-logits: out of memory\n");
            goto done;
        }
        snprintf(json_path, len + 6, "%s.json", o.out);
        if (bitnet_outfile_open(&data, o.out, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-logits: %s\n", err.msg);
            goto done;
        }
        bitnet_tool_cluster_output(cluster, data.tmp); /* removed if a rank is lost mid-way */
    }
    const long k = o.have_top_k ? o.top_k : (o.out ? 0 : 5);
    const int32_t kk = o.embd ? 0 : (int32_t)(k < hp->n_vocab ? k : hp->n_vocab);
    if (kk > 0) {
        top = malloc((size_t)kk * sizeof *top);
        if (!top) {
            fprintf(stderr, "bitnet-logits: out of memory\n");
            goto done;
        }
    }

    const int32_t width = o.embd ? hp->n_embd : hp->n_vocab;
    if (!evaluate(c, ids, n, n_batch, width, o.embd, o.out ? &data : NULL, kk, top)) goto done;
    if (fflush(stdout) != 0) {
        fprintf(stderr, "bitnet-logits: writing stdout: %s\n", strerror(errno));
        goto done;
    }
    if (o.out) {
        /* both files complete on disk before either is renamed: a full disk fails here, with the
         * old FILE and FILE.json (if any) untouched */
        if (bitnet_outfile_finish(&data, &err) != BITNET_OK ||
            bitnet_outfile_open(&json, json_path, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-logits: %s\n", err.msg);
            goto done;
        }
        write_header(json.f, &o, m, ids, n, add_bos, o.n_threads, n_batch);
        if (bitnet_outfile_finish(&json, &err) != BITNET_OK || bitnet_outfile_commit(&data, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-logits: %s\n", err.msg);
            goto done;
        }
        if (bitnet_outfile_commit(&json, &err) != BITNET_OK) {
            /* FILE was renamed already: without its header it would be read as another run's */
            fprintf(stderr, "bitnet-logits: %s (removing %s)\n", err.msg, o.out);
            remove(o.out);
            goto done;
        }
        fprintf(stderr, "bitnet-logits: wrote %s (%zu x %d f32) and %s\n", o.out, n, width, json_path);
    }
    rc = 0;

done:
    bitnet_outfile_abort(&data); /* removes FILE.tmp / FILE.json.tmp unless renamed */
    bitnet_outfile_abort(&json);
    free(top);
    free(json_path);
    free(ids);
    bitnet_context_free(c);
    rc = bitnet_tool_cluster_end(cluster, m, rc);
    bitnet_model_free(m);
    return rc;
}
