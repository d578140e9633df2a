/* llama-perplexity.c — the perplexity tool llama.cpp and bitnet.cpp users know: the perplexity of a
 * BitNet GGUF model over a text file, by llama.cpp's method (chunking, scored half, uncertainty and
 * every rule's source: src/eval/perplexity.h).
 *
 *   llama-perplexity -m MODEL -f TEXT_FILE [-c N_CTX] [-b N_BATCH] [-t N] [--chunks N]
 *                    [--kernel auto|i2_s|tl1|tl2] [--lut-table default|pretuned] [--head-type stored|q8_0]
 *                    [--lut-tiles FILE] [--print-token-ids] [-ngl N (ignored)]
 *
 * Input, as llama.cpp reads it: -f's file whole, one trailing "\n" dropped (common/arg.cpp, -f), then
 * tokenized once with BOS when the vocabulary adds one and special-token texts NOT parsed (the text is
 * data: common_tokenize(ctx, prompt, true) with parse_special false). A vocabulary that appends EOS
 * (tokenizer.ggml.add_eos_token) is refused, as llama.cpp refuses it (GGML_ASSERT(!add_eos)).
 * -c: tokens per chunk, default 512 as llama.cpp's perplexity (or the model's context when that is
 * smaller); at most the model's <arch>.context_length (llama.cpp only warns), at least 3. -b: tokens
 * per forward pass, clamped to -c (llama.cpp packs several chunks into one batch when -b > -c; the
 * chunks are independent, so that changes no number). --chunks: at most N chunks (default -1 = all).
 *
 * stdout, as llama.cpp's perplexity prints it:
 *   [1]12.3456,[2]12.0123,...      the running estimate exp(mean NLL) after every chunk (%.4f, flushed)
 *   Final estimate: PPL = 12.0123 +/- 0.45678
 * stderr: the model and kernel line; the file, token and chunk counts; the time of the first chunk with
 * an estimate for all; the token ids with --print-token-ids ("token ids: 1 450 ..."); and a closing line
 *   llama-perplexity: mean NLL <%.17g> over <count> tokens, PPL <%.17g> +/- <%.17g>
 *   llama-perplexity: <n> chunks of <n_ctx> tokens in <s> s (<t/s> tokens/s)
 * (full precision for scripts and tests; utils/test_perplexity.py reads them).
 * The result does not depend on -t or -b, and is the same on every kernel path (i2_s, tl1, tl2) of a
 * ternary file: every path computes the same int32 sums and the same float steps after them (model.h),
 * so the logits are bit-identical; --head-type q8_0 changes the head and so the PPL.
 * Exit status, the contract of every tool (tools/common/args.h): 0 success; 1 a file that cannot be
 * read, is empty or is too short for -c (the message gives its token count and the count -c needs), -c
 * beyond the model's context, a model that cannot be loaded, a failed evaluation; 2 a bad or missing
 * flag or value. (llama.cpp's perplexity returns 1 for both, and 0 after "you need at least ... tokens",
 * which is not followed here.) */
#include "model/model.h"
#include "tilefile/tile_file.h"
#include "eval/perplexity.h"
#include "text/tokenizer.h"
#include "tools/common/args.h"
#include "tools/common/bench_util.h"
#include "tools/common/text_file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct options {
    const char *model, *file, *lut_table, *lut_tiles;
    long n_ctx; /* 0 = default */
    long n_batch, n_threads, chunks;
    int kernel;    /* bitnet_kernel_path: the index in "auto|i2_s|tl1|tl2" is the enum's value */
    int head_type; /* bitnet_model_params.head_type */
    int i2s_layout; /* bitnet_model_params.i2s_layout (--i2s-layout) */
    bool print_ids;
} options;

#define fail(...) bitnet_tool_error("llama-perplexity", BITNET_EXIT_FAILURE, __VA_ARGS__)

/* -c: its own message (why 3 is the least) */
static int on_ctx(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    int64_t x;
    if (!bitnet_args_to_int64(v, 3, 1 << 24, &x))
        return bitnet_args_fail(args,
                                "%s expects an integer in [3, %d] (a chunk scores the tokens after positions n_ctx/2 .. "
                                "n_ctx-2: -c 2 would score none), got '%s'",
                                flag, 1 << 24, v);
    *(long *)opt->dst = (long)x;
    return 0;
}

static int on_chunks(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *v) {
    int64_t x;
    if (!bitnet_args_to_int64(v, -1, INT32_MAX, &x))
        return bitnet_args_fail(args, "%s expects an integer in [-1, %d], got '%s'", flag, INT32_MAX, v);
    if (x == 0) return bitnet_args_fail(args, "--chunks expects -1 (all) or a number of chunks >= 1, got '%s'", v);
    *(long *)opt->dst = (long)x;
    return 0;
}

/* The command line into o; -1 to go on, else the exit status (help printed, or a bad command line). */
static int parse_args(int argc, char **argv, options *o) {
    long ignored;
    int head = 0;
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE", "model file (GGUF)", BITNET_ARG_STRING, &o->model),
        BITNET_OPT("-f, --file", "FILE", "the text (one trailing newline is dropped)", BITNET_ARG_STRING, &o->file),
        BITNET_OPT("-c, --ctx-size", "N", "tokens per chunk (default 512, at most the model's context; >= 3)", BITNET_ARG_CALL,
         &o->n_ctx, .fn = on_ctx),
        BITNET_OPT("-b, --batch-size", "N", "tokens per forward pass (default 512, at most -c)", BITNET_ARG_LONG, &o->n_batch, .lo = 1, .hi = 1 << 24),
        BITNET_OPT("-t, --threads", "N", "threads (default: the number of online CPUs)", BITNET_ARG_LONG, &o->n_threads, .lo = 1, .hi = 1024),
        BITNET_OPT("--chunks", "N", "evaluate at most N chunks (default -1 = all)", BITNET_ARG_CALL, &o->chunks, .fn = on_chunks),
        BITNET_OPT("--kernel", "K", "auto|i2_s|tl1|tl2 (default auto: tl2 on x86-64, tl1 on AArch64)", BITNET_ARG_CHOICE,
         &o->kernel, .choices = "auto|i2_s|tl1|tl2"),
        BITNET_OPT("--lut-table", "T", "default|pretuned: preferred tile table (default: the build's choice)", BITNET_ARG_WORD,
         &o->lut_table, .choices = "default|pretuned"),
        BITNET_OPT_LUT_TILES(&o->lut_tiles),
        BITNET_OPT_I2S_LAYOUT(&o->i2s_layout),
        BITNET_OPT("--head-type", "H", "stored|q8_0: output head as stored (default) or requantized to Q8_0 at load",
         BITNET_ARG_CHOICE, &head, .choices = "stored|q8_0"),
        BITNET_OPT("--print-token-ids", NULL, "print the token ids of the whole text on stderr", BITNET_ARG_FLAG, &o->print_ids),
        BITNET_OPT("-ngl, --n-gpu-layers", "N", "accepted for compatibility and ignored (CPU only)", BITNET_ARG_LONG, &ignored, .lo = -1, .hi = INT_MAX),
    };
    static const char *const k_desc =
        "Perplexity of a ternary (BitNet b1.58) model over a text, by llama.cpp's method: the text is cut into\n"
        "chunks of -c tokens, each evaluated from an empty cache with BOS first, the second half of each scored.\n";
    static const char *const k_epi =
        "stdout: [1]PPL,[2]PPL,... after every chunk, then \"Final estimate: PPL = X +/- Y\".\n" BITNET_EXIT_STATUS_HELP;
    const bitnet_args args = BITNET_ARGS("llama-perplexity", "usage: llama-perplexity -m MODEL -f TEXT_FILE [options]",
                                         k_desc, k_epi, opts, .help_col = 27);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    o->head_type = head ? BITNET_TYPE_Q8_0 : 0;
    if (!o->model) return bitnet_args_fail(&args, "no model given: use -m MODEL (see --help)");
    if (!o->file) return bitnet_args_fail(&args, "no text given: use -f TEXT_FILE (see --help)");
    return -1;
}

int main(int argc, char **argv) {
    options o = {0};
    o.kernel = BITNET_PATH_AUTO;
    o.n_batch = 512;
    o.chunks = -1;
    {
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        o.n_threads = ncpu > 0 ? (ncpu > 1024 ? 1024 : ncpu) : 1;
    }
    const int pr = parse_args(argc, argv, &o);
    if (pr >= 0) return pr;

    size_t text_len = 0;
    char *text = bitnet_tool_read_text("llama-perplexity", "text file", o.file, &text_len);
    if (!text) return 1;
    if (text_len == 0) {
        free(text);
        return fail("text file '%s' is empty: nothing to evaluate", o.file);
    }

    int rc = 1;
    bitnet_error err = {{0}};
    bitnet_model *m = NULL;
    bitnet_context *c = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;

    bitnet_tile_file *tiles = NULL; /* --lut-tiles; a YAML with several tables needs --lut-table */
    if (o.lut_tiles && bitnet_tile_file_load(o.lut_tiles, o.lut_table, &tiles, &err) != BITNET_OK) {
        fail("--lut-tiles: %s", err.msg);
        goto done;
    }
    const bitnet_model_params mp = {(bitnet_kernel_path)o.kernel, o.lut_table, o.head_type, tiles, false, 0, 0, false, o.i2s_layout};
    const bitnet_status load_st = bitnet_model_load(o.model, &mp, &m, &err);
    bitnet_tile_file_free(tiles);
    if (load_st != BITNET_OK) {
        fail("cannot load model: %s", err.msg);
        goto done;
    }
    const bitnet_hparams *hp = bitnet_model_hparams(m);
    const bitnet_vocab *vocab = bitnet_model_vocab(m);
    const bool dense_only = strncmp(bitnet_model_kernel_summary(m), "dense float", 11) == 0;
    fprintf(stderr, "llama-perplexity: model %s: arch %s, n_vocab %d, n_ctx_train %d; path %s: %s\n", o.model,
            hp->arch, hp->n_vocab, hp->n_ctx_train,
            dense_only ? "dense float" : bitnet_kernel_path_name(bitnet_model_path(m)), bitnet_model_kernel_summary(m));
    if (bitnet_model_i2s_note(m)[0]) fprintf(stderr, "llama-perplexity: %s\n", bitnet_model_i2s_note(m));

    const bool n_ctx_given = o.n_ctx != 0;
    if (!n_ctx_given) o.n_ctx = hp->n_ctx_train < 512 ? hp->n_ctx_train : 512;
    if (o.n_ctx > hp->n_ctx_train) {
        fail("-c %ld is larger than the model's context: %s has %s.context_length %d", o.n_ctx, o.model, hp->arch,
             hp->n_ctx_train);
        goto done;
    }
    if (o.n_ctx < 3) { /* only when the model's own context is below 3 */
        fail("the model's context (%d) is too small for perplexity: a chunk needs at least 3 tokens", hp->n_ctx_train);
        goto done;
    }
    if (bitnet_vocab_add_eos(vocab)) {
        fail("the vocabulary of %s appends EOS to every text (tokenizer.ggml.add_eos_token): llama.cpp's perplexity "
             "method is defined without it and refuses such models",
             o.model);
        goto done;
    }
    const bool add_bos = bitnet_vocab_add_bos(vocab);
    if (bitnet_tokenize(vocab, text, text_len, true, false, &ids, &n_ids, &err) != BITNET_OK) {
        fail("cannot tokenize '%s': %s", o.file, err.msg);
        goto done;
    }
    if (o.print_ids) {
        fprintf(stderr, "token ids:");
        for (size_t i = 0; i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    bitnet_ppl_plan plan;
    if (bitnet_ppl_plan_make(n_ids, (int32_t)o.n_ctx, (int32_t)o.chunks, &plan, &err) != BITNET_OK) {
        if (n_ids < 2 * (size_t)o.n_ctx && n_ids >= 6) /* the largest -c this text can take */
            fail("%s: %s (-c %zu or less fits this text)", o.file, err.msg, n_ids / 2);
        else
            fail("%s: %s", o.file, err.msg);
        goto done;
    }
    const int32_t n_batch = (int32_t)(o.n_batch < o.n_ctx ? o.n_batch : o.n_ctx);
    fprintf(stderr,
            "llama-perplexity: %s: %zu bytes, %zu tokens (%s); n_ctx %d%s, %d of %d chunks, batch %d, threads %ld; "
            "scoring positions %d..%d of each chunk (%d tokens)\n",
            o.file, text_len, n_ids, add_bos ? "BOS added" : "no BOS", plan.n_ctx, n_ctx_given ? "" : " (default)",
            plan.n_chunk, plan.n_chunk_max, n_batch, o.n_threads, plan.first + 1, plan.n_ctx - 1, plan.n_scored);

    if (bitnet_context_create(m, plan.n_ctx, n_batch, (int32_t)o.n_threads, &c, &err) != BITNET_OK) {
        fail("cannot create the context: %s", err.msg);
        goto done;
    }
    const int32_t bos = add_bos ? bitnet_vocab_bos(vocab) : -1;
    bitnet_ppl_sums sums = {0};
    const double t0 = bitnet_tool_now_s();
    for (int32_t i = 0; i < plan.n_chunk; i++) {
        if (bitnet_ppl_eval_chunk(c, m, ids, &plan, i, n_batch, bos, &sums, &err) != BITNET_OK) {
            printf("\n");
            fflush(stdout);
            fail("evaluating chunk %d (tokens %lld..%lld): %s", i + 1, (long long)i * plan.n_ctx,
                 (long long)(i + 1) * plan.n_ctx - 1, err.msg);
            goto done;
        }
        if (i == 0) {
            const double t1 = bitnet_tool_now_s() - t0;
            fprintf(stderr, "llama-perplexity: %.2f s for the first chunk, about %.1f s for all %d\n", t1,
                    t1 * plan.n_chunk, plan.n_chunk);
        }
        printf("[%d]%.4f,", i + 1, bitnet_ppl_value(&sums));
        fflush(stdout);
    }
    const double secs = bitnet_tool_now_s() - t0;
    const double ppl = bitnet_ppl_value(&sums), unc = bitnet_ppl_uncertainty(&sums);
    printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, unc);
    if (fflush(stdout) != 0) {
        fail("writing stdout: %s", strerror(errno));
        goto done;
    }
    fprintf(stderr, "llama-perplexity: mean NLL %.17g over %lld tokens, PPL %.17g +/- %.17g\n",
            sums.nll / (double)sums.count, (long long)sums.count, ppl, unc);
    const double n_eval = (double)plan.n_chunk * plan.n_ctx;
    fprintf(stderr, "llama-perplexity: %d chunks of %d tokens in %.3f s (%.2f tokens/s)\n", plan.n_chunk, plan.n_ctx,
            secs, secs > 0 ? n_eval / secs : 0.0);
    rc = 0;

done:
    free(ids);
    free(text);
    bitnet_context_free(c);
    bitnet_model_free(m);
    return rc;
}
