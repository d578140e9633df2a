/* llama-embedding — text embeddings with an embedding GGUF model (BitNet-embedding 0.6B / 270M, plain
 * Qwen3 / Gemma3 files, or any model this runtime loads), with llama.cpp's llama-embedding flags:
 *
 *   llama-embedding -m MODEL (-p TEXTS | -f FILE) [--embd-separator SEP] [--pooling none|mean|cls|last]
 *                   [--embd-normalize N] [--embd-output-format ""|array|json|json+] [-b N] [-c N] [-t N]
 *                   [--kernel auto|i2_s|tl1|tl2] [--i2s-layout L] [--lut-table T] [--lut-tiles FILE]
 *                   [--verbose-prompt]
 *
 * The texts (split at the separator, default "\n"; an empty last piece is dropped) are tokenized with the
 * model's vocabulary (BOS / EOS added as it says: Qwen3's files append EOS for last-token pooling) and
 * evaluated as independent sequences packed into forward passes of up to -b tokens (model.h
 * bitnet_embed: a text's vector does not depend on the others, -b or -t). Pooling and normalization:
 * docs/EMBEDDINGS.md §3 (default pooling: the file's <arch>.pooling_type, else none; --embd-normalize 2).
 *
 * stdout:
 *   "" (default)  one line per vector, "embedding I: " and its first and last three values, then with
 *                 several vectors the cosine-similarity matrix;
 *   array         [[v, ...], ...] (%.7f);
 *   json          {"object": "list", "data": [{"object": "embedding", "index": I, "embedding": [...]}, ...]};
 *   json+         json with "cosineSimilarity": [[...], ...] (vectors i, j: a·b / (|a| |b|)).
 * stderr: the model line, the I2_S layout line, with --verbose-prompt every text's token ids, and the timing
 *   "llama-embedding: N texts, T tokens in X ms (Y tokens/s, Z texts/s)".
 * Exit status (args.h): 0 success; 1 the model cannot be loaded or evaluated; 2 a bad command line. */
#include "base/types.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "tilefile/tile_file.h"
#include "tools/common/args.h"
#include "tools/common/bench_util.h"
#include "tools/common/text_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct options {
    const char *model, *prompt, *file, *separator, *lut_table, *lut_tiles, *format;
    long n_threads, n_batch, n_ctx;
    int kernel, i2s_layout, pooling; /* pooling: bitnet_pooling + 1 (--pooling), 0: the model's */
    int normalize;
    bool verbose_prompt;
} options;

static const char k_tool[] = "llama-embedding";

/* --pooling none|mean|cls|last → the bitnet_pooling value + 1 in *(int *)dst (0: not given: the model's). */
static int on_pooling(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    bitnet_pooling p;
    if (!bitnet_pooling_parse(v, &p)) return bitnet_args_fail(args, "%s expects none, mean, cls or last, got '%s'", flag, v);
    *(int *)opt->dst = (int)p + 1;
    return 0;
}

static int parse_args(int argc, char **argv, options *o) {
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE", "model (GGUF)", BITNET_ARG_STRING, &o->model),
        BITNET_OPT("-p, --prompt", "TEXTS", "the texts, separated by --embd-separator (default: newline)",
         BITNET_ARG_STRING, &o->prompt),
        BITNET_OPT("-f, --file", "FILE", "read the texts from FILE (one trailing newline dropped)", BITNET_ARG_STRING,
         &o->file),
        BITNET_OPT("--embd-separator", "SEP", "separator of the texts (default \"\\n\")", BITNET_ARG_STRING,
         &o->separator),
        BITNET_OPT("--pooling", "P",
         "none|mean|cls|last: how a text's token embeddings become one vector\n"
         "(default: the model's pooling_type, else none)",
         BITNET_ARG_CALL, &o->pooling, .fn = on_pooling),
        BITNET_OPT("--embd-normalize", "N",
         "-1 none, 0 max-abs to the int16 range, 2 Euclidean (default), p > 0 p-norm",
         BITNET_ARG_INT, &o->normalize, .lo = -1, .hi = 1000),
        BITNET_OPT("--embd-output-format", "F", "\"\" (default: text), array, json or json+ (with cosine similarities)",
         BITNET_ARG_WORD, &o->format, .choices = "|array|json|json+"),
        BITNET_OPT("-b, --batch-size", "N", "tokens per forward pass (default 2048)", BITNET_ARG_LONG, &o->n_batch,
         .lo = 1, .hi = 1 << 20),
        BITNET_OPT("-c, --ctx-size", "N", "positions per text (default: the longest text)", BITNET_ARG_LONG, &o->n_ctx,
         .lo = 1, .hi = 1 << 24),
        BITNET_OPT("-t, --threads", "N", "threads (default: the number of online CPUs)", BITNET_ARG_LONG, &o->n_threads,
         .lo = 1, .hi = 1024),
        BITNET_OPT("--kernel", "K", "auto|i2_s|tl1|tl2 (default auto)", BITNET_ARG_CHOICE, &o->kernel,
         .choices = "auto|i2_s|tl1|tl2"),
        BITNET_OPT("--lut-table", "T", "default|pretuned: preferred tile table", BITNET_ARG_WORD, &o->lut_table,
         .choices = "default|pretuned"),
        BITNET_OPT_LUT_TILES(&o->lut_tiles),
        BITNET_OPT_I2S_LAYOUT(&o->i2s_layout),
        BITNET_OPT("--verbose-prompt", NULL, "print every text's token ids on stderr", BITNET_ARG_FLAG,
         &o->verbose_prompt),
    };
    static const char *const k_desc = "Computes the embedding of every text (docs/EMBEDDINGS.md).\n";
    const bitnet_args args = BITNET_ARGS(k_tool, "usage: llama-embedding -m MODEL (-p TEXTS | -f FILE) [options]",
                                         k_desc, BITNET_EXIT_STATUS_HELP, opts, .help_col = 26);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    if (!o->model) return bitnet_args_fail(&args, "no model given (-m FILE)");
    if (!o->prompt == !o->file) return bitnet_args_fail(&args, "give exactly one of -p TEXTS and -f FILE");
    if (o->separator && !*o->separator) return bitnet_args_fail(&args, "--embd-separator must not be empty");
    return -1;
}

/* The texts of s (len bytes) split at sep, an empty last piece dropped: n pieces into (*starts, *lens). */
static bool split_texts(const char *s, size_t len, const char *sep, const char ***starts, size_t **lens, int32_t *n) {
    const size_t sl = strlen(sep);
    size_t cap = 16, k = 0;
    const char **st = malloc(cap * sizeof *st);
    size_t *ln = malloc(cap * sizeof *ln);
    if (!st || !ln) goto oom;
    size_t at = 0;
    for (;;) {
        size_t e = at;
        while (e < len && !(e + sl <= len && memcmp(s + e, sep, sl) == 0)) e++;
        const bool last = e >= len;
        if (!(last && e == at && k > 0)) { /* an empty piece after the last separator is dropped */
            if (k == cap) {
                cap *= 2;
                const char **ns = realloc(st, cap * sizeof *st);
                if (!ns) goto oom;
                st = ns;
                size_t *nl = realloc(ln, cap * sizeof *ln);
                if (!nl) goto oom;
                ln = nl;
            }
            st[k] = s + at;
            ln[k] = e - at;
            k++;
        }
        if (last || k > INT32_MAX / 2) break;
        at = e + sl;
    }
    *starts = st;
    *lens = ln;
    *n = (int32_t)k;
    return true;
oom:
    free(st);
    free(ln);
    return false;
}

static double cosine(const float *a, const float *b, int32_t n) {
    double ab = 0.0, aa = 0.0, bb = 0.0;
    for (int32_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0.0 && bb > 0.0 ? ab / (sqrt(aa) * sqrt(bb)) : 0.0;
}

static void print_vector(const float *v, int32_t n) {
    putchar('[');
    for (int32_t i = 0; i < n; i++) printf("%s%.7f", i ? ", " : "", (double)v[i]);
    putchar(']');
}

static void print_output(const options *o, bitnet_pooling pooling, const float *e, int32_t n_vec, int32_t D) {
    const char *fmt = o->format ? o->format : "";
    if (strcmp(fmt, "array") == 0) {
        putchar('[');
        for (int32_t j = 0; j < n_vec; j++) {
            if (j) putchar(',');
            print_vector(e + (size_t)j * D, D);
        }
        printf("]\n");
        return;
    }
    if (strcmp(fmt, "json") == 0 || strcmp(fmt, "json+") == 0) {
        printf("{\n  \"object\": \"list\",\n  \"data\": [\n");
        for (int32_t j = 0; j < n_vec; j++) {
            printf("    {\"object\": \"embedding\", \"index\": %d, \"embedding\": ", (int)j);
            print_vector(e + (size_t)j * D, D);
            printf("}%s\n", j + 1 < n_vec ? "," : "");
        }
        printf("  ]");
        if (strcmp(fmt, "json+") == 0) {
            printf(",\n  \"cosineSimilarity\": [\n");
            for (int32_t i = 0; i < n_vec; i++) {
                printf("    [");
                for (int32_t j = 0; j < n_vec; j++)
                    printf("%s%.6f", j ? ", " : "", cosine(e + (size_t)i * D, e + (size_t)j * D, D));
                printf("]%s\n", i + 1 < n_vec ? "," : "");
            }
            printf("  ]");
        }
        printf("\n}\n");
        return;
    }
    const char *vf = o->normalize == 0 ? "%6.0f " : "%9.6f ";
    for (int32_t j = 0; j < n_vec; j++) {
        const float *v = e + (size_t)j * D;
        printf("embedding %d: ", (int)j);
        if (D <= 6) {
            for (int32_t i = 0; i < D; i++) printf(vf, (double)v[i]);
        } else {
            for (int32_t i = 0; i < 3; i++) printf(vf, (double)v[i]);
            printf(" ... ");
            for (int32_t i = D - 3; i < D; i++) printf(vf, (double)v[i]);
        }
        printf("\n");
    }
    if (n_vec > 1 && pooling != BITNET_POOLING_NONE) { /* per-token rows: no matrix, as llama.cpp */
        printf("\ncosine similarity matrix:\n\n");
        for (int32_t i = 0; i < n_vec; i++) {
            for (int32_t j = 0; j < n_vec; j++) printf("%6.2f ", cosine(e + (size_t)i * D, e + (size_t)j * D, D));
            printf("\n");
        }
    }
}

int main(int argc, char **argv) {
    options o = {0};
    o.n_batch = 2048;
    o.normalize = 2;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.n_threads = ncpu > 0 ? (ncpu > 1024 ? 1024 : ncpu) : 1;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;
    rc = 1;

    bitnet_error err = {{0}};
    bitnet_model *m = NULL;
    bitnet_context *c = NULL;
    char *text = NULL;
    const char **starts = NULL;
    size_t *lens = NULL;
    int32_t n_texts = 0;
    int32_t **ids = NULL;
    int32_t *n_ids = NULL;
    float *out = NULL;

    size_t len = 0;
    if (o.file) {
        if (!(text = bitnet_tool_read_text(k_tool, "text file", o.file, &len))) goto done;
    } else {
        len = strlen(o.prompt);
    }
    const char *all = text ? text : o.prompt;
    if (!split_texts(all, len, o.separator ? o.separator : "\n", &starts, &lens, &n_texts)) {
        bitnet_tool_error(k_tool, 1, "out of memory splitting the texts");
        goto done;
    }

    bitnet_tile_file *tiles = NULL;
    if (o.lut_tiles && bitnet_tile_file_load(o.lut_tiles, o.lut_table, &tiles, &err) != BITNET_OK) {
        bitnet_tool_error(k_tool, 1, "--lut-tiles: %s", err.msg);
        goto done;
    }
    const bitnet_model_params mp = {(bitnet_kernel_path)o.kernel, o.lut_table, 0, tiles, false, 0, 0, false,
                                    o.i2s_layout};
    const bitnet_status load_st = bitnet_model_load(o.model, &mp, &m, &err);
    bitnet_tile_file_free(tiles);
    if (load_st != BITNET_OK) {
        bitnet_tool_error(k_tool, 1, "%s", err.msg);
        goto done;
    }
    const bitnet_hparams *hp = bitnet_model_hparams(m);
    const bitnet_vocab *vocab = bitnet_model_vocab(m);

    ids = calloc((size_t)n_texts, sizeof *ids);
    n_ids = calloc((size_t)n_texts, sizeof *n_ids);
    if (!ids || !n_ids) {
        bitnet_tool_error(k_tool, 1, "out of memory");
        goto done;
    }
    int32_t longest = 0;
    int64_t total = 0;
    for (int32_t i = 0; i < n_texts; i++) {
        size_t n = 0;
        if (bitnet_tokenize(vocab, starts[i], lens[i], true, true, &ids[i], &n, &err) != BITNET_OK) {
            bitnet_tool_error(k_tool, 1, "tokenizing text %d: %s", (int)i, err.msg);
            goto done;
        }
        if (n == 0 || n > (size_t)(1 << 24)) {
            bitnet_tool_error(k_tool, 1, "text %d gives %zu tokens (empty text and a vocabulary without BOS/EOS, or "
                              "too long)", (int)i, n);
            goto done;
        }
        n_ids[i] = (int32_t)n;
        longest = n_ids[i] > longest ? n_ids[i] : longest;
        total += n_ids[i];
        if (o.verbose_prompt) {
            fprintf(stderr, "%s: text %d: %d tokens:", k_tool, (int)i, (int)n_ids[i]);
            for (int32_t k = 0; k < n_ids[i]; k++) fprintf(stderr, " %d", ids[i][k]);
            fprintf(stderr, "\n");
        }
    }
    const int32_t n_ctx = o.n_ctx ? (int32_t)o.n_ctx : longest;
    if (longest > n_ctx) {
        bitnet_tool_error(k_tool, 1, "a text has %d tokens, more than -c %d", (int)longest, (int)n_ctx);
        goto done;
    }
    bitnet_pooling pooling = o.pooling == 0 ? BITNET_POOLING_UNSPECIFIED : (bitnet_pooling)(o.pooling - 1);
    if (pooling == BITNET_POOLING_UNSPECIFIED)
        pooling = hp->pooling >= 0 ? (bitnet_pooling)hp->pooling : BITNET_POOLING_NONE;
    const int32_t eos = bitnet_vocab_eos(vocab);
    if (pooling == BITNET_POOLING_LAST && eos >= 0) {
        for (int32_t i = 0; i < n_texts; i++) {
            if (ids[i][n_ids[i] - 1] != eos) {
                fprintf(stderr, "%s: warning: text %d does not end with EOS (%d): last-token pooling reads another token "
                        "(the vocabulary does not set tokenizer.ggml.add_eos_token)\n", k_tool, (int)i, (int)eos);
                break;
            }
        }
    }
    /* sequences: as many texts of the mean length as fill a batch, each with n_ctx positions of KV cache,
     * the cache at most 4 batches (or one longest text) of positions */
    const int64_t mean = (total + n_texts - 1) / n_texts;
    int64_t n_seq = o.n_batch / mean;
    const int64_t kv_cap = 4 * (o.n_batch > n_ctx ? o.n_batch : n_ctx);
    if (n_seq * n_ctx > kv_cap) n_seq = kv_cap / n_ctx;
    n_seq = n_seq < 1 ? 1 : n_seq > n_texts ? n_texts : n_seq;
    n_seq = n_seq > 1024 ? 1024 : n_seq;
    while (n_seq > 1 && n_seq * n_ctx > (1 << 24)) n_seq--;
    const int32_t n_batch = (int32_t)(o.n_batch < n_seq * n_ctx ? o.n_batch : n_seq * n_ctx);
    const bitnet_context_params cp = {n_ctx, n_batch, (int32_t)o.n_threads, 1, (int32_t)n_seq, true};
    if (bitnet_context_create_params(m, &cp, &c, &err) != BITNET_OK) {
        bitnet_tool_error(k_tool, 1, "%s", err.msg);
        goto done;
    }
    fprintf(stderr, "%s: %s: arch %s, n_embd %d, pooling %s%s, %d texts, %lld tokens; %s path: %s\n", k_tool, o.model,
            hp->arch, (int)hp->n_embd, bitnet_pooling_name(pooling), o.pooling == 0 ? " (the model's)" : "",
            (int)n_texts, (long long)total, bitnet_kernel_path_name(bitnet_model_path(m)),
            bitnet_model_kernel_summary(m));
    if (bitnet_model_i2s_note(m)[0]) fprintf(stderr, "%s: %s\n", k_tool, bitnet_model_i2s_note(m));

    const int32_t D = hp->n_embd;
    const int64_t n_vec = pooling == BITNET_POOLING_NONE ? total : n_texts;
    out = malloc((size_t)n_vec * (size_t)D * sizeof(float));
    if (!out) {
        bitnet_tool_error(k_tool, 1, "out of memory for %lld embeddings", (long long)n_vec);
        goto done;
    }
    const double t0 = bitnet_tool_now_s();
    if (bitnet_embed(c, (const int32_t *const *)ids, n_ids, n_texts, pooling, out, NULL, &err) != BITNET_OK) {
        bitnet_tool_error(k_tool, 1, "%s", err.msg);
        goto done;
    }
    const double dt = bitnet_tool_now_s() - t0;
    for (size_t i = 0; i < (size_t)n_vec * (size_t)D; i++) {
        if (!isfinite(out[i])) {
            bitnet_tool_error(k_tool, 1, "embedding %lld has a value that is not finite (%g at %lld): the model "
                              "file's weights overflow", (long long)(i / (size_t)D), (double)out[i],
                              (long long)(i % (size_t)D));
            goto done;
        }
    }
    for (int64_t j = 0; j < n_vec; j++) bitnet_embd_normalize(out + (size_t)j * D, out + (size_t)j * D, D, o.normalize);
    print_output(&o, pooling, out, (int32_t)n_vec, D);
    fprintf(stderr, "%s: %d texts, %lld tokens in %.2f ms (%.2f tokens/s, %.2f texts/s), %ld threads, batch %d\n",
            k_tool, (int)n_texts, (long long)total, dt * 1e3, dt > 0 ? (double)total / dt : 0.0,
            dt > 0 ? (double)n_texts / dt : 0.0, o.n_threads, (int)n_batch);
    if (fflush(stdout) != 0) {
        bitnet_tool_error(k_tool, 1, "writing stdout failed");
        goto done;
    }
    rc = 0;

done:
    if (ids) {
        for (int32_t i = 0; i < n_texts; i++) free(ids[i]);
    }
    free(ids);
    free(n_ids);
    free(out);
    free(starts);
    free(lens);
    free(text);
    bitnet_context_free(c);
    bitnet_model_free(m);
    return rc;
}
