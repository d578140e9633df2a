/* llama-cli.c — the text-generation tool bitnet.cpp users know: load a BitNet GGUF, evaluate a
 * prompt, sample tokens and print them as they come.
 *
 * stdout: the prompt's text followed by the generated text (each token's bytes, flushed per token, through
 * tokenizer.h's UTF-8 stream: a character split over byte tokens is printed whole once complete, every byte
 * is printed — the same bytes as bitnet.cpp, never a broken sequence mid-stream), then "\n\n" as llama.cpp's
 * main does.
 * stderr: model and run information at the start, and a closing timing line:
 *   llama-cli: prompt <n> tokens in <ms> ms (<t/s> tokens/s) | generation <n> tokens in <ms> ms (<t/s> tokens/s)
 * Exit status: 0 on success; 1 on a bad flag, a missing or bad file, or a failed evaluation. */
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *k_usage =
    "usage: llama-cli -m MODEL [options]\n"
    "\n"
    "Generate text with a BitNet b1.58 model (GGUF, architecture 'bitnet').\n"
    "\n"
    "  -m, --model FILE         model file (required)\n"
    "  -p, --prompt TEXT        prompt (default: empty, generation starts from BOS)\n"
    "  -f, --file FILE          read the prompt from FILE (one trailing newline is dropped)\n"
    "  -n, --n-predict N        tokens to generate (default 128; -1 = until EOS or the context is full)\n"
    "  -t, --threads N          threads (default: the number of online CPUs)\n"
    "  -c, --ctx-size N         context size in tokens (default 0 = min(model context, 4096))\n"
    "  -b, --batch-size N       prompt tokens per forward pass (default 512)\n"
    "      --temp T             temperature (default 0.8; 0 = greedy)\n"
    "      --top-k N            keep the N most likely tokens (default 40; 0 = all)\n"
    "      --top-p P            nucleus sampling threshold (default 0.95; 1 = off)\n"
    "  -s, --seed N             sampling seed (default -1 = random, printed on stderr)\n"
    "      --kernel K           auto|i2_s|tl1|tl2 (default auto: tl2 on x86-64 with AVX2, tl1 on AArch64)\n"
    "      --lut-table T        default|pretuned: preferred tile table (default: the build's choice)\n"
    "      --ignore-eos         keep generating after the end-of-sequence token\n"
    "      --print-token-ids    print the prompt and generated token ids on stderr\n"
    "  -ngl, --n-gpu-layers N   accepted for compatibility and ignored (CPU only)\n"
    "  -cnv, --conversation     chat mode: not supported yet\n"
    "  -h, --help               this text\n";

typedef struct options {
    const char *model;
    const char *prompt;
    const char *prompt_file;
    long n_predict;
    long n_threads;
    long n_ctx;
    long n_batch;
    float temp;
    long top_k;
    float top_p;
    long long seed;
    bitnet_kernel_path kernel;
    const char *lut_table;
    int ignore_eos;
    int print_ids;
} options;

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llama-cli: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

/* a is the short or the long spelling of a flag (long may be NULL) */
static int is_flag(const char *a, const char *short_name, const char *long_name) {
    return strcmp(a, short_name) == 0 || (long_name && strcmp(a, long_name) == 0);
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "llama-cli: error: %s expects an integer in [%ld, %ld], got '%s'\n", flag, lo, hi, s);
        return 1;
    }
    *out = v;
    return 0;
}

static int parse_float(const char *flag, const char *s, float lo, float hi, float *out) {
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi)) {
        fprintf(stderr, "llama-cli: error: %s expects a number in [%g, %g], got '%s'\n", flag, (double)lo, (double)hi, s);
        return 1;
    }
    *out = v;
    return 0;
}

/* 0: parsed; 1: error (message printed); 2: help printed. */
static int parse_args(int argc, char **argv, options *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
#define IS(s1, s2) is_flag(a, s1, s2)
        if (IS("-h", "--help")) {
            fputs(k_usage, stdout);
            return 2;
        }
        if (IS("-cnv", "--conversation")) {
            fprintf(stderr, "llama-cli: error: %s (chat mode) is not supported yet\n", a);
            return 1;
        }
        if (IS("--ignore-eos", NULL)) {
            o->ignore_eos = 1;
            continue;
        }
        if (IS("--print-token-ids", NULL)) {
            o->print_ids = 1;
            continue;
        }
        /* every other flag takes a value */
        const char *known[] = {"-m", "--model", "-p", "--prompt", "-f", "--file", "-n", "--n-predict", "-t",
                               "--threads", "-c", "--ctx-size", "-b", "--batch-size", "--temp", "--top-k", "--top-p",
                               "-s", "--seed", "--kernel", "--lut-table", "-ngl", "--n-gpu-layers"};
        int is_known = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) is_known |= strcmp(a, known[k]) == 0;
        if (!is_known) {
            fprintf(stderr, "llama-cli: error: unknown argument '%s' (see --help)\n", a);
            return 1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "llama-cli: error: %s needs a value (see --help)\n", a);
            return 1;
        }
        const char *v = argv[++i];
        long l;
        if (IS("-m", "--model")) {
            o->model = v;
        } else if (IS("-p", "--prompt")) {
            o->prompt = v;
        } else if (IS("-f", "--file")) {
            o->prompt_file = v;
        } else if (IS("-n", "--n-predict")) {
            if (parse_long(a, v, -1, INT_MAX, &o->n_predict)) return 1;
        } else if (IS("-t", "--threads")) {
            if (parse_long(a, v, 1, 1024, &o->n_threads)) return 1;
        } else if (IS("-c", "--ctx-size")) {
            if (parse_long(a, v, 0, 1 << 24, &o->n_ctx)) return 1;
        } else if (IS("-b", "--batch-size")) {
            if (parse_long(a, v, 1, 1 << 24, &o->n_batch)) return 1;
        } else if (IS("--temp", NULL)) {
            if (parse_float(a, v, 0.0f, 1e6f, &o->temp)) return 1;
        } else if (IS("--top-k", NULL)) {
            if (parse_long(a, v, 0, INT_MAX, &o->top_k)) return 1;
        } else if (IS("--top-p", NULL)) {
            if (parse_float(a, v, 0.0f, 1.0f, &o->top_p)) return 1;
        } else if (IS("-s", "--seed")) {
            if (parse_long(a, v, -1, LONG_MAX, &l)) return 1;
            o->seed = l;
        } else if (IS("--kernel", NULL)) {
            if (strcmp(v, "auto") == 0) o->kernel = BITNET_PATH_AUTO;
            else if (strcmp(v, "i2_s") == 0) o->kernel = BITNET_PATH_I2S;
            else if (strcmp(v, "tl1") == 0) o->kernel = BITNET_PATH_TL1;
            else if (strcmp(v, "tl2") == 0) o->kernel = BITNET_PATH_TL2;
            else return fail("--kernel expects auto, i2_s, tl1 or tl2, got '%s'", v);
        } else if (IS("--lut-table", NULL)) {
            if (strcmp(v, "default") != 0 && strcmp(v, "pretuned") != 0) {
                return fail("--lut-table expects default or pretuned, got '%s'", v);
            }
            o->lut_table = v;
        } else if (IS("-ngl", "--n-gpu-layers")) {
            if (parse_long(a, v, -1, INT_MAX, &l)) return 1;
        }
#undef IS
    }
    return 0;
}

/* Whole file as a NUL-terminated string; NULL on error (message printed). */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "llama-cli: error: cannot open prompt file '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (r == 0) break;
    }
    const int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "llama-cli: error: cannot read prompt file '%s'\n", path);
        free(buf);
        return NULL;
    }
    if (n > 0 && buf[n - 1] == '\n') n--;
    buf[n] = '\0';
    *len = n;
    return buf;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static bitnet_utf8_stream g_stdout_utf8; /* zero = empty stream (bitnet_utf8_stream_init) */

static void print_piece(const bitnet_vocab *v, int32_t id) {
    char buf[256], out[256 + 3];
    size_t n = bitnet_token_to_piece(v, id, false, buf, sizeof buf);
    if (n > sizeof buf) {
        char *big = malloc(2 * n + 3); /* the piece, then room for what the stream releases */
        if (big) {
            bitnet_token_to_piece(v, id, false, big, n);
            fwrite(big + n, 1, bitnet_utf8_stream_push(&g_stdout_utf8, big, n, big + n), stdout);
            free(big);
        }
    } else {
        fwrite(out, 1, bitnet_utf8_stream_push(&g_stdout_utf8, buf, n, out), stdout);
    }
    fflush(stdout);
}

/* The bytes print_piece still holds (an incomplete UTF-8 sequence at the end), as they are. */
static void print_pieces_end(void) {
    char rest[4];
    fwrite(rest, 1, bitnet_utf8_stream_flush(&g_stdout_utf8, rest), stdout);
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "%s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

int main(int argc, char **argv) {
    options o = {
        .n_predict = 128,
        .n_threads = 0,
        .n_ctx = 0,
        .n_batch = 512,
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .seed = -1,
        .kernel = BITNET_PATH_AUTO,
    };
    int pr = parse_args(argc, argv, &o);
    if (pr) return pr == 2 ? 0 : 1;
    if (!o.model) return fail("no model given: use -m MODEL (see --help)");
    if (o.prompt && o.prompt_file) return fail("give the prompt with -p or -f, not both");
    if (o.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.n_threads = n >= 1 ? (n > 1024 ? 1024 : n) : 1;
    }
    if (o.seed < 0) o.seed = (long long)((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16));

    char *file_prompt = NULL;
    size_t prompt_len = 0;
    const char *prompt = o.prompt ? o.prompt : "";
    if (o.prompt_file) {
        file_prompt = read_file(o.prompt_file, &prompt_len);
        if (!file_prompt) return 1;
        prompt = file_prompt;
    } else {
        prompt_len = strlen(prompt);
    }

    int rc = 1;
    bitnet_error err = {{0}};
    bitnet_model *model = NULL;
    bitnet_context *ctx = NULL;
    bitnet_sampler smp;
    int smp_ok = 0;
    int32_t *prompt_ids = NULL, *gen = NULL;
    size_t n_prompt = 0, n_gen = 0;

    const bitnet_model_params mp = {o.kernel, o.lut_table};
    if (bitnet_model_load(o.model, &mp, &model, &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: cannot load model: %s\n", err.msg);
        goto done;
    }
    const bitnet_hparams *hp = bitnet_model_hparams(model);
    const bitnet_vocab *vocab = bitnet_model_vocab(model);
    if (o.n_ctx == 0) o.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (o.n_batch > o.n_ctx) o.n_batch = o.n_ctx;

    fprintf(stderr, "llama-cli: model %s: arch %s, %.2fM params, %.2f MiB, n_vocab %d, n_embd %d, n_layer %d, "
                    "n_head %d/%d, n_ctx_train %d\n",
            o.model, hp->arch, (double)bitnet_model_n_params(model) / 1e6,
            (double)bitnet_model_size_bytes(model) / (1024.0 * 1024.0), hp->n_vocab, hp->n_embd, hp->n_layer,
            hp->n_head, hp->n_head_kv, hp->n_ctx_train);
    fprintf(stderr, "llama-cli: kernels: %s\n", bitnet_model_kernel_summary(model));
    fprintf(stderr, "llama-cli: path %s, threads %ld, ctx %ld, batch %ld, temp %.2f, top_k %ld, top_p %.2f, seed %lld\n",
            bitnet_kernel_path_name(bitnet_model_path(model)), o.n_threads, o.n_ctx, o.n_batch, (double)o.temp,
            o.top_k, (double)o.top_p, o.seed);

    if (bitnet_context_create(model, (int32_t)o.n_ctx, (int32_t)o.n_batch, (int32_t)o.n_threads, &ctx, &err) !=
        BITNET_OK) {
        fprintf(stderr, "llama-cli: error: cannot create the context: %s\n", err.msg);
        goto done;
    }
    if (bitnet_sampler_init(&smp, hp->n_vocab, o.temp, (int32_t)o.top_k, o.top_p, (uint64_t)o.seed, &err) !=
        BITNET_OK) {
        fprintf(stderr, "llama-cli: error: sampler: %s\n", err.msg);
        goto done;
    }
    smp_ok = 1;
    if (bitnet_tokenize(vocab, prompt, prompt_len, true, true, &prompt_ids, &n_prompt, &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: cannot tokenize the prompt: %s\n", err.msg);
        goto done;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "llama-cli: error: the prompt is empty and the vocabulary has no BOS token\n");
        goto done;
    }
    if (n_prompt >= (size_t)o.n_ctx) {
        fprintf(stderr, "llama-cli: error: the prompt has %zu tokens, the context only %ld (use -c)\n", n_prompt,
                o.n_ctx);
        goto done;
    }
    gen = malloc((size_t)o.n_ctx * sizeof *gen);
    if (!gen) {
        fprintf(stderr, "llama-cli: error: out of memory\n");
        goto done;
    }

    /* the prompt */
    const double t0 = now_ms();
    if (bitnet_decode(ctx, prompt_ids, (int32_t)n_prompt, 0, false, &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: prompt evaluation failed: %s\n", err.msg);
        goto done;
    }
    const double t_prompt = now_ms() - t0;
    for (size_t i = 0; i < n_prompt; i++) print_piece(vocab, prompt_ids[i]);

    /* generation: sample, print, evaluate the token for the next step */
    const double t1 = now_ms();
    int32_t n_past = (int32_t)n_prompt;
    int gen_failed = 0;
    while (o.n_predict < 0 || n_gen < (size_t)o.n_predict) {
        const int32_t id = bitnet_sampler_sample(&smp, bitnet_get_logits(ctx));
        if (bitnet_vocab_is_eog(vocab, id) && !o.ignore_eos) break;
        gen[n_gen++] = id;
        print_piece(vocab, id);
        if (o.n_predict >= 0 && n_gen == (size_t)o.n_predict) break;
        if (n_past >= o.n_ctx) {
            fprintf(stderr, "\nllama-cli: the context is full (%ld tokens); stopping\n", o.n_ctx);
            break;
        }
        if (bitnet_decode(ctx, &id, 1, n_past, false, &err) != BITNET_OK) {
            fprintf(stderr, "\nllama-cli: error: evaluation failed: %s\n", err.msg);
            gen_failed = 1;
            break;
        }
        n_past++;
    }
    const double t_gen = now_ms() - t1;
    print_pieces_end();
    fputs("\n\n", stdout);
    fflush(stdout);

    if (o.print_ids) {
        print_ids("prompt ids", prompt_ids, n_prompt);
        print_ids("generated ids", gen, n_gen);
    }
    fprintf(stderr,
            "llama-cli: prompt %zu tokens in %.2f ms (%.2f tokens/s) | generation %zu tokens in %.2f ms (%.2f "
            "tokens/s)\n",
            n_prompt, t_prompt, t_prompt > 0 ? (double)n_prompt * 1e3 / t_prompt : 0.0, n_gen, t_gen,
            t_gen > 0 ? (double)n_gen * 1e3 / t_gen : 0.0);
    rc = gen_failed;

done:
    free(gen);
    free(prompt_ids);
    if (smp_ok) bitnet_sampler_free(&smp);
    bitnet_context_free(ctx);
    bitnet_model_free(model);
    free(file_prompt);
    return rc;
}
