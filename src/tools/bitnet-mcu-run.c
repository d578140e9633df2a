/* bitnet-mcu-run — run a BitNet GGUF the way a microcontroller node does (src/mcu: one thread, one arena,
 * the weights used in place from the image) and print what the node computed: the prompt ids, the
 * greedy ids, a hash of the logits of every position, the arena by purpose and, on a board that counts
 * them, the instructions per token. The same source is a host tool (build/bin) and the firmware of the
 * bare-metal build (mps2-an386 under qemu-system-arm, reading the model once through semihosting), so the
 * two outputs can be compared line for line: equal ids and hashes mean bit-identical logits.
 *
 * Hash: FNV-1a 64 over the bytes of the n_vocab float logits of a position (little-endian on both). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcu/board.h"
#include "mcu/mcu.h"
#include "text/sampler.h"
#include "tools/common/args.h"

#define TOOL "bitnet-mcu-run"
#define MAX_TOKENS 4096

typedef struct options {
    const char *model;
    const char *tokens;
    int32_t n_predict;
    int32_t n_ctx;
    int32_t n_batch;
    uint64_t arena;
    bool hashes;
    int i2s_layout; /* --i2s-layout: bitnet_model_params.i2s_layout */
} options;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const uint8_t *p = (const uint8_t *)data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

#define FNV_START 1469598103934665603ull

/* Read the whole file into board memory; exit status and message on failure. */
static int read_image(const char *path, uint8_t **image, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "cannot open model '%s'", path);
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "cannot find the size of '%s'", path);
    }
    char why[160] = "";
    uint8_t *buf = (uint8_t *)bitnet_board_image_buffer((size_t)n, why, sizeof why);
    if (!buf) {
        fclose(f);
        return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "no room on board %s for '%s' (%ld bytes): %s",
                                 bitnet_board_name(), path, n, why);
    }
    const size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        bitnet_board_release(buf);
        return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "read %llu of %ld bytes of '%s'", (unsigned long long)got, n, path);
    }
    *image = buf;
    *size = (size_t)n;
    return BITNET_EXIT_OK;
}

static void print_ids(const char *what, const int32_t *ids, int32_t n) {
    printf("%s:", what);
    for (int32_t i = 0; i < n; i++) printf(" %d", (int)ids[i]);
    printf("\n");
}

/* Evaluate tokens [0, n) at the node's position, in chunks of the node's n_batch keeping every position's logits;
 * hash each position into *all (and print it with --logit-hashes); the last position's argmax in *next. */
static int eval_hashed(bitnet_mcu *rt, const options *o, const int32_t *tokens, int32_t n, int32_t pos0,
                       uint64_t *all, int32_t *next) {
    const int32_t n_vocab = bitnet_model_hparams(rt->model)->n_vocab;
    const int32_t nb = rt->params.n_batch;
    for (int32_t start = 0; start < n; start += nb) {
        const int32_t c = n - start < nb ? n - start : nb;
        bitnet_error err;
        if (bitnet_mcu_eval(rt, tokens + start, c, true, &err) != BITNET_OK)
            return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "%s", err.msg);
        for (int32_t i = 0; i < c; i++) {
            const float *l = bitnet_mcu_logits(rt, i);
            const size_t bytes = (size_t)n_vocab * sizeof(float);
            *all = fnv1a(*all, l, bytes);
            if (o->hashes)
                printf("logits hash: pos %d %016llx\n", (int)(pos0 + start + i),
                       (unsigned long long)fnv1a(FNV_START, l, bytes));
            if (start + i == n - 1) *next = bitnet_argmax(l, n_vocab);
        }
    }
    return BITNET_EXIT_OK;
}

static int run(const options *o, const int32_t *prompt, int32_t n_prompt) {
    uint8_t *image = NULL;
    size_t image_size = 0;
    int rc = read_image(o->model, &image, &image_size);
    if (rc != BITNET_EXIT_OK) return rc;
    size_t arena_size = 0;
    char why[160] = "";
    void *arena = bitnet_board_arena((size_t)o->arena, &arena_size, why, sizeof why);
    if (!arena) {
        bitnet_board_release(image);
        return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "no arena of %llu bytes on board %s: %s",
                                 (unsigned long long)o->arena,
                                 bitnet_board_name(), why);
    }
    printf("board: %s; model %s (%llu bytes)\n", bitnet_board_name(), o->model, (unsigned long long)image_size);

    bitnet_mcu rt;
    bitnet_error err;
    if (bitnet_mcu_open_layout(&rt, image, image_size, o->model, o->i2s_layout, arena, arena_size, &err) != BITNET_OK) {
        rc = bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "%s", err.msg);
        goto done_buffers;
    }
    const bitnet_hparams *hp = bitnet_model_hparams(rt.model);
    printf("model: arch %s, n_embd %d, n_ff %d, n_layer %d, n_head %d/%d, n_vocab %d; %s path: %s\n", hp->arch,
           (int)hp->n_embd, (int)hp->n_ff, (int)hp->n_layer, (int)hp->n_head, (int)hp->n_head_kv, (int)hp->n_vocab,
           bitnet_kernel_path_name(bitnet_model_path(rt.model)), bitnet_model_kernel_summary(rt.model));
    if (bitnet_model_i2s_note(rt.model)[0]) printf("%s\n", bitnet_model_i2s_note(rt.model));
    const int32_t n_ctx = o->n_ctx ? o->n_ctx : n_prompt + o->n_predict;
    /* the context clamps n_batch to n_ctx; the rows of logits (one per position of a batch) must be clamped
     * too, or a short run (-n 2 after 3 prompt ids: n_ctx 5) with the default n_batch 16 is refused */
    const int32_t n_batch = o->n_batch < n_ctx ? o->n_batch : n_ctx;
    const bitnet_mcu_params p = {n_ctx, n_batch, n_batch};
    bitnet_mcu_budget b;
    if (bitnet_mcu_arena_bytes(&rt, &p, &b, &err) != BITNET_OK) {
        rc = bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "%s", err.msg);
        goto done_node;
    }
    printf("arena: model %llu + context %llu (KV cache %llu, activations %llu, LUT workspaces %llu, RoPE tables %llu, "
           "attention %llu, logits %llu, other %llu) = %llu bytes of %llu usable; n_ctx %d, n_batch %d\n",
           (unsigned long long)b.model, (unsigned long long)b.context.total, (unsigned long long)b.context.kv_cache, (unsigned long long)b.context.activations, (unsigned long long)b.context.lut_workspace,
           (unsigned long long)b.context.rope_tables, (unsigned long long)b.context.attention, (unsigned long long)b.context.logits, (unsigned long long)b.context.other, (unsigned long long)b.total, (unsigned long long)rt.arena.size,
           (int)n_ctx, (int)n_batch);
    if (bitnet_mcu_start(&rt, &p, &err) != BITNET_OK) {
        rc = bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "%s", err.msg);
        goto done_node;
    }

    static int32_t gen[MAX_TOKENS];
    uint64_t hash = FNV_START, i0 = 0, i1 = 0, i2 = 0;
    const bool counted = bitnet_board_instructions(&i0);
    int32_t next = 0;
    if ((rc = eval_hashed(&rt, o, prompt, n_prompt, 0, &hash, &next)) != BITNET_EXIT_OK) goto done_node;
    bitnet_board_instructions(&i1);
    int32_t n_gen = 0;
    while (n_gen < o->n_predict) {
        gen[n_gen++] = next;
        if (n_gen == o->n_predict) break;
        if ((rc = eval_hashed(&rt, o, &gen[n_gen - 1], 1, n_prompt + n_gen - 1, &hash, &next)) != BITNET_EXIT_OK)
            goto done_node;
    }
    bitnet_board_instructions(&i2);
    print_ids("prompt ids", prompt, n_prompt);
    print_ids("generated ids", gen, n_gen);
    printf("logits hash of all positions: %016llx (%d positions)\n", (unsigned long long)hash,
           (int)(n_prompt + (n_gen > 0 ? n_gen - 1 : 0)));
    if (rt.arena.n_refused != 0 || rt.arena.used != b.total) {
        rc = bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE,
                               "the arena holds %llu bytes, the plan said %llu; %llu requests refused after start-up",
                               (unsigned long long)rt.arena.used, (unsigned long long)b.total,
                               (unsigned long long)rt.arena.n_refused);
        goto done_node;
    }
    if (counted) {
        const int32_t n_gen_evals = n_gen > 0 ? n_gen - 1 : 0;
        printf("instructions: prompt %llu (%llu per token, %d tokens, n_batch %d), generation %llu (%llu per token, "
               "%d tokens)\n",
               (unsigned long long)(i1 - i0), (unsigned long long)((i1 - i0) / (uint64_t)n_prompt), (int)n_prompt,
               (int)rt.params.n_batch, (unsigned long long)(i2 - i1),
               (unsigned long long)(n_gen_evals ? (i2 - i1) / (uint64_t)n_gen_evals : 0), (int)n_gen_evals);
    }
    size_t stack = 0;
    if (bitnet_board_stack_peak(&stack)) printf("stack: %llu bytes at most\n", (unsigned long long)stack);
done_node:
    bitnet_mcu_close(&rt);
done_buffers:
    bitnet_board_release(arena);
    bitnet_board_release(image);
    return rc;
}

/* --tokens: comma-separated ids in [0, 2^31), at most MAX_TOKENS (bitnet_args_each_item's callback). */
typedef struct token_list {
    const bitnet_args *args;
    int32_t n;
    int32_t ids[MAX_TOKENS];
} token_list;

static int token_item(void *user, const char *text, size_t len) {
    token_list *tl = (token_list *)user;
    if (tl->n == MAX_TOKENS) return bitnet_args_fail(tl->args, "--tokens takes at most %d ids", MAX_TOKENS);
    int64_t v = 0;
    const int rc = bitnet_args_item_int64(tl->args, "--tokens", text, len, 0, INT32_MAX, &v);
    if (rc == 0) tl->ids[tl->n++] = (int32_t)v;
    return rc;
}

int main(int argc, char **argv) {
    options o = {NULL, "1", 16, 0, 16, 0, false, BITNET_I2S_LAYOUT_AUTO};
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE", "BitNet GGUF (I2_S, TL1 or TL2 with its tile record, or F32)", BITNET_ARG_STRING,
                   &o.model),
        BITNET_OPT("--tokens", "IDS", "prompt token ids, comma-separated (default 1: BOS)", BITNET_ARG_STRING, &o.tokens),
        BITNET_OPT("-n, --n-predict", "N", "tokens to generate greedily (default 16; no stop at EOS)", BITNET_ARG_INT32,
                   &o.n_predict, .lo = 0, .hi = MAX_TOKENS),
        BITNET_OPT("-c, --ctx-size", "N", "KV cache positions (default: prompt + n-predict)", BITNET_ARG_INT32, &o.n_ctx,
                   .lo = 0, .hi = 1 << 24),
        BITNET_OPT("-b, --batch-size", "N", "tokens per forward pass of the prompt (default 16)", BITNET_ARG_INT32,
                   &o.n_batch, .lo = 1, .hi = MAX_TOKENS),
        BITNET_OPT("--arena", "BYTES", "arena size (default: all the board has; 256 MiB on a host)", BITNET_ARG_UINT64,
                   &o.arena),
        BITNET_OPT_I2S_LAYOUT(&o.i2s_layout),
        BITNET_OPT("--logit-hashes", NULL, "print the hash of every position's logits", BITNET_ARG_FLAG, &o.hashes),
    };
    const bitnet_args args = BITNET_ARGS(
        TOOL, "usage: " TOOL " -m MODEL [--tokens IDS] [-n N] [options]",
        "Runs a model as a microcontroller node does (one thread, one arena, weights in place) and prints\n"
        "the prompt and greedy ids, a hash of every position's logits, the arena by purpose and, where the\n"
        "board counts them, instructions per token. Host and board outputs compare line for line.",
        BITNET_EXIT_STATUS_HELP, opts);
    int rc = bitnet_args_parse(&args, argc, argv);
    if (rc >= 0) return rc;
    if (!o.model) return bitnet_args_fail(&args, "-m MODEL is required");
    if ((uint64_t)(size_t)o.arena != o.arena)
        return bitnet_args_fail(&args, "--arena %llu is more than this machine can address", (unsigned long long)o.arena);
    static token_list tl; /* MAX_TOKENS ids: not on the stack of a microcontroller */
    tl.args = &args;
    tl.n = 0;
    if ((rc = bitnet_args_each_item(o.tokens, token_item, &tl)) != 0) return rc;
    return run(&o, tl.ids, tl.n);
}
