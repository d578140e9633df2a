/* bitnet-mcu-plan — the memory budget of one microcontroller node: the model opened as a node opens it
 * (src/mcu), a board from boards/<name>.yaml, and the plan of src/mcu/plan.h printed as a table — per layer, the
 * layer-independent parts, totals, where the weights and the arena go, whether the model fits one board and
 * otherwise the fewest boards of this kind in contiguous layer ranges — and with --json FILE the same data as
 * JSON for the cluster planner (fields: boards/README.md). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/types.h"
#include "mcu/plan.h"
#include "tools/common/args.h"

#define TOOL "bitnet-mcu-plan"

#ifndef BITNET_BOARDS_DIR
#define BITNET_BOARDS_DIR "boards"
#endif

typedef struct options {
    const char *model;
    const char *board;
    const char *json;
    int32_t n_ctx;
    int32_t n_batch;
    int i2s_layout; /* --i2s-layout: auto or x86 (a board runs x86 images; the others are refused) */
} options;

/* "12.3 MiB" style (binary units) for the eye; the tables give exact bytes. */
static const char *human(uint64_t n, char *buf, size_t cap) {
    if (n < 1024) snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else if (n < ((uint64_t)1 << 20)) snprintf(buf, cap, "%.1f KiB", (double)n / 1024.0);
    else if (n < ((uint64_t)1 << 30)) snprintf(buf, cap, "%.2f MiB", (double)n / (1024.0 * 1024.0));
    else snprintf(buf, cap, "%.2f GiB", (double)n / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

/* "F16 768x32002" */
static const char *shape(const bitnet_plan_tensor *t, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", bitnet_type_name(t->type));
    for (int d = 0; d < t->n_dims; d++) {
        const size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%lld", d ? "x" : " ", (long long)t->ne[d]);
    }
    return buf;
}

static void row(const char *what, uint64_t bytes, const char *where) {
    char h[32];
    printf("  %-52s %12llu  %-10s %s\n", what, (unsigned long long)bytes, human(bytes, h, sizeof h), where);
}

static void print_layers(const bitnet_mcu_plan *p) {
    printf("\nper layer (the tensors blk.<l>.* as stored, shapes in GGUF order ne0 x ne1; the layer's K and V cache)\n");
    printf("  %-8s %16s %16s %8s\n", "layer", "weights (flash)", "KV cache (arena)", "tensors");
    uint64_t w = 0, kv = 0;
    for (int32_t l = 0; l < p->hp.n_layer; l++) {
        const bitnet_plan_layer *L = &p->layers[l];
        printf("  %-8d %16llu %16llu %8d\n", (int)l, (unsigned long long)L->flash_bytes,
               (unsigned long long)L->kv_cache_bytes, (int)L->n_tensors);
        w += L->flash_bytes;
        kv += L->kv_cache_bytes;
    }
    printf("  %-8s %16llu %16llu\n", "all", (unsigned long long)w, (unsigned long long)kv);
    /* what a layer holds, for the first one (the layers of these architectures have the same tensors) */
    if (p->hp.n_layer > 0) {
        printf("  layer 0:");
        int col = 10;
        for (int32_t i = 0; i < p->n_tensors; i++) {
            const bitnet_plan_tensor *t = &p->tensors[i];
            if (t->layer != 0) continue;
            char item[160], sh[64];
            snprintf(item, sizeof item, " %s (%s) %llu;", t->name + 6 /* past "blk.0." */, shape(t, sh, sizeof sh),
                     (unsigned long long)t->bytes);
            if (col + (int)strlen(item) > 110) {
                printf("\n          ");
                col = 10;
            }
            printf("%s", item);
            col += (int)strlen(item);
        }
        printf("\n");
    }
    printf("  (weights include the alignment padding after each tensor in the image; the node metadata is not split\n"
           "  by layer: it is counted once, below)\n");
}

static void print_fixed(const bitnet_mcu_plan *p) {
    const bitnet_context_budget *c = &p->budget.context;
    char what[128], sh[64];
    printf("\nlayer-independent parts                                     bytes\n");
    row("GGUF header (keys and tensor table)", p->header_bytes, "flash");
    if (p->token_embd >= 0) {
        snprintf(what, sizeof what, "token_embd.weight (%s)", shape(&p->tensors[p->token_embd], sh, sizeof sh));
        row(what, p->tensors[p->token_embd].flash_bytes, "flash");
    }
    if (p->output >= 0) {
        snprintf(what, sizeof what, "output.weight (%s)", shape(&p->tensors[p->output], sh, sizeof sh));
        row(what, p->tensors[p->output].flash_bytes, "flash");
    } else {
        printf("  %-52s %12s  %-10s %s\n", "head: tied (the head is token_embd.weight)", "-", "", "");
    }
    if (p->output_norm >= 0) {
        snprintf(what, sizeof what, "output_norm.weight (%s)", shape(&p->tensors[p->output_norm], sh, sizeof sh));
        row(what, p->tensors[p->output_norm].flash_bytes, "flash");
    }
    if (p->other_flash) row("other tensors", p->other_flash, "flash");
    row("node metadata (GGUF index, model and layer structs)", p->budget.model, "arena (counted once)");
    snprintf(what, sizeof what, "activations (%d row%s)", (int)p->params.n_batch, p->params.n_batch == 1 ? "" : "s");
    row(what, c->activations, "arena");
    snprintf(what, sizeof what, "LUT workspaces (2 x %llu)", (unsigned long long)p->lut_buffer_bytes);
    row(what, c->lut_workspace, "arena");
    row("RoPE tables", c->rope_tables, "arena");
    row("attention scratch", c->attention, "arena");
    snprintf(what, sizeof what, "logits (%d x %d floats)", (int)p->params.n_logits, (int)p->hp.n_vocab);
    row(what, c->logits, "arena");
    row("other (context struct, alignment)", c->other, "arena");
    if (p->lut_tensor >= 0) {
        const bitnet_plan_tensor *t = &p->tensors[p->lut_tensor];
        const int N = (int)p->params.n_batch;
        printf("  LUT workspace: the runtime's bitnet_mul_mat_get_wsize of the largest product, %s (%s, M %lld,\n"
               "  K %lld), for %d column%s (n_batch), rounded up to 64 per buffer, two buffers: %llu bytes each.\n",
               t->name, bitnet_type_name(t->type), (long long)t->ne[1], (long long)t->ne[0], N, N == 1 ? "" : "s",
               (unsigned long long)p->lut_buffer_bytes);
        printf("  For comparison, bitnet.cpp's rule (the seed article; bitnet_float_type = float, so no F16 term; rounded\n"
               "  up to 64) over the same K and N: TL1 K*N*15 + N*2*4 = %llu bytes, TL2 K*N*11 + 2*N*2*4 = %llu bytes.\n",
               (unsigned long long)p->seed_tl1_bytes, (unsigned long long)p->seed_tl2_bytes);
        if (t->type == BITNET_TYPE_I2_S)
            printf("  (It sizes LUT tables; this node's I2_S product keeps only the int8 activations, K bytes per column,\n"
                   "  and the column scales and sums, each region rounded up to 64.)\n");
        else if (t->type == BITNET_TYPE_TL1)
            printf("  (Its TL1 term allots 15 bytes per activation where its kernel writes 16: design.md section 3; the\n"
                   "  runtime's size covers every byte its kernels write.)\n");
        else
            printf("  (The runtime sizes the TL2 tables from the tiles the file records, the three_k/two_k split of\n"
                   "  LAYOUTS.md, covering every byte its kernels write: design.md section 3.)\n");
    } else {
        printf("  LUT workspace: none (no ternary weight runs through the LUT host: dense float weights)\n");
    }
}

/* What one generated token reads from each memory, and the time that takes at the board's streaming
 * bandwidths (a lower bound: it assumes the core never waits for anything else). */
static void print_traffic(const bitnet_mcu_plan *p, const bitnet_plan_board *b) {
    printf("\nper generated token (reads; activations, LUT tables and scratch stay in SRAM or the cache)\n");
    printf("  weights memory: %llu bytes = layer tensors %llu + head %llu%s + token_embd row %llu + output_norm\n",
           (unsigned long long)p->token_flash_bytes, (unsigned long long)p->token_layer_bytes,
           (unsigned long long)p->token_head_bytes, p->output >= 0 ? "" : " (token_embd, tied: every row)",
           (unsigned long long)p->token_embd_row_bytes);
    printf("  arena memory:   KV cache %llu bytes at position n_ctx/2, %llu at the last position; %llu written\n",
           (unsigned long long)p->token_kv_mid_bytes, (unsigned long long)p->token_kv_full_bytes,
           (unsigned long long)p->token_kv_write_bytes);
    if (!p->one.fits) return;
    const bitnet_plan_memory *w = &b->memories[p->one.weights_memory], *a = &b->memories[p->one.arena_memory];
    const double tw = (double)p->token_flash_bytes / (w->stream_mb_s * 1e6);
    const double ta = (double)p->token_kv_mid_bytes / (a->stream_mb_s * 1e6);
    printf("  at the board's streaming bandwidths (%s %.0f MB/s, %s %.0f MB/s): %.2f ms + %.2f ms per token at\n"
           "  mid context, at most %.1f tokens/s from memory alone (compute comes on top: docs/MCU.md)\n",
           w->name, w->stream_mb_s, a->name, a->stream_mb_s, 1e3 * tw, 1e3 * ta, 1.0 / (tw + ta));
}

static void print_placement(const bitnet_mcu_plan *p, const bitnet_plan_board *b) {
    char h1[32], h2[32];
    printf("\ntotals\n");
    printf("  flash: %llu bytes (%s): the whole image; it stays in flash and the weights are used in place\n",
           (unsigned long long)p->image_bytes, human(p->image_bytes, h1, sizeof h1));
    printf("  arena: %llu bytes (%s) = node metadata %llu + context %llu (bitnet_mcu_arena_bytes, exact for this\n"
           "         host's %d-bit struct sizes; a 32-bit board's metadata is a little smaller, so an upper bound there)\n",
           (unsigned long long)p->budget.total, human(p->budget.total, h2, sizeof h2), (unsigned long long)p->budget.model,
           (unsigned long long)p->budget.context.total, (int)(8 * sizeof(void *)));

    printf("\nboard %s (%s): memory, kind, roles\n", b->name, b->path);
    for (int m = 0; m < b->n_memories; m++) {
        const bitnet_plan_memory *M = &b->memories[m];
        char roles[32] = "";
        if (M->roles & BITNET_PLAN_ROLE_WEIGHTS) strcat(roles, "weights");
        if (M->roles & BITNET_PLAN_ROLE_ARENA) strcat(roles, roles[0] ? "+arena" : "arena");
        if (!roles[0]) strcat(roles, "none");
        printf("  %-8s %-5s %-13s %12llu bytes, %10llu reserved, %12llu usable", M->name,
               M->kind == BITNET_PLAN_FLASH ? "flash" : "ram", roles, (unsigned long long)M->bytes,
               (unsigned long long)M->reserved, (unsigned long long)M->usable);
        if (p->one.fits && p->one.weights_memory == m) printf("  <- weights %llu", (unsigned long long)p->image_bytes);
        if (p->one.fits && p->one.arena_memory == m) printf("  <- arena %llu", (unsigned long long)p->budget.total);
        printf("\n");
    }
    printf("\nverdict: %s one %s: %s\n", p->one.fits ? "fits" : "does not fit", b->name, p->one.reason);
}

static void print_partition(const bitnet_mcu_plan *p, const bitnet_plan_board *b) {
    const bitnet_plan_partition *pt = &p->partition;
    if (!pt->possible) {
        printf("boards needed: none is enough: %s\n", pt->reason);
        return;
    }
    if (pt->n_boards == 1) {
        printf("boards needed: 1\n");
        return;
    }
    printf("boards needed: %d (%s)\n", (int)pt->n_boards, pt->reason);
    printf("  %-5s %-9s %-44s %12s %12s  %s\n", "board", "layers", "parts", "flash", "arena", "placement");
    for (int32_t i = 0; i < pt->n_boards; i++) {
        const bitnet_plan_node *nd = &pt->nodes[i];
        char layers[32], parts[96];
        if (nd->n_layers > 0) snprintf(layers, sizeof layers, "%d-%d", (int)nd->first_layer, (int)(nd->first_layer + nd->n_layers - 1));
        else snprintf(layers, sizeof layers, "-");
        snprintf(parts, sizeof parts, "%s%d layer%s%s", nd->has_first ? "token_embd + " : "", (int)nd->n_layers,
                 nd->n_layers == 1 ? "" : "s", nd->has_last ? (p->output >= 0 ? " + output_norm + output" : " + output_norm + head (token_embd)") : "");
        printf("  %-5d %-9s %-44s %12llu %12llu  weights in %s, arena in %s\n", (int)(i + 1), layers, parts,
               (unsigned long long)nd->fit.flash_bytes, (unsigned long long)nd->fit.arena_bytes,
               b->memories[nd->fit.weights_memory].name, b->memories[nd->fit.arena_memory].name);
    }
    printf("  model of a board: its image holds the GGUF header (%llu bytes) and its tensors; its arena the node metadata\n"
           "  and the context without the KV cache (%llu bytes), the KV cache of its layers, and the logits on the last\n"
           "  board; a tied head (token_embd) is stored on the first and on the last board. Found greedily (each board\n"
           "  takes as many layers as fit), which is minimal for contiguous ranges.\n",
           (unsigned long long)p->pieces.node_flash, (unsigned long long)p->pieces.node_arena);
}

/* A board name (boards/<name>.yaml of this source tree) or a path; true for a name. */
static bool board_path(const char *arg, char *out, size_t cap) {
    const size_t n = strlen(arg);
    const bool is_file = strchr(arg, '/') != NULL || (n > 5 && strcmp(arg + n - 5, ".yaml") == 0) ||
                         (n > 4 && strcmp(arg + n - 4, ".yml") == 0);
    if (is_file) snprintf(out, cap, "%s", arg);
    else snprintf(out, cap, "%s/%s.yaml", BITNET_BOARDS_DIR, arg);
    return !is_file;
}

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

/* The board names of BITNET_BOARDS_DIR ("cortex-m4f, esp32s3"), sorted. */
static void board_names(char *out, size_t cap) {
    char names[32][64];
    int n = 0;
    DIR *d = opendir(BITNET_BOARDS_DIR);
    for (struct dirent *e = d ? readdir(d) : NULL; e && n < 32; e = readdir(d)) {
        const size_t len = strlen(e->d_name);
        if (len > 5 && len < 64 + 5 && strcmp(e->d_name + len - 5, ".yaml") == 0)
            snprintf(names[n++], sizeof names[0], "%.*s", (int)(len - 5), e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strlen(out) + strlen(names[i]) + 3 > cap) break;
        if (i) strcat(out, ", ");
        strcat(out, names[i]);
    }
}

int main(int argc, char **argv) {
    options o = {NULL, NULL, NULL, 512, 1, BITNET_I2S_LAYOUT_AUTO};
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE", "BitNet GGUF (what bitnet-mcu-run runs: I2_S, TL1/TL2 with a tile record, F32)",
                   BITNET_ARG_STRING, &o.model),
        BITNET_OPT("--board", "NAME|FILE", "esp32s3, cortex-m4f (boards/<NAME>.yaml) or a board file (.yaml)",
                   BITNET_ARG_STRING, &o.board),
        BITNET_OPT("-c, --ctx, --ctx-size", "N", "KV cache positions (default 512)", BITNET_ARG_INT32, &o.n_ctx, .lo = 1,
                   .hi = 1 << 24),
        BITNET_OPT("-b, --batch, --batch-size", "N",
                   "tokens per forward pass (default 1); the node keeps n_batch rows of\nlogits, as bitnet-mcu-run does",
                   BITNET_ARG_INT32, &o.n_batch, .lo = 1, .hi = 1 << 24),
        BITNET_OPT("--json", "FILE", "also write the plan as JSON (fields: boards/README.md)", BITNET_ARG_STRING, &o.json),
        BITNET_OPT_I2S_LAYOUT(&o.i2s_layout),
    };
    const bitnet_args args = BITNET_ARGS(
        TOOL, "usage: " TOOL " -m MODEL --board esp32s3|cortex-m4f|FILE.yaml [--ctx N] [--batch N] [--json FILE]",
        "Prints the memory budget of one microcontroller node: per layer and in total the weight bytes\n"
        "(in flash, used in place), the KV cache, activations, LUT workspaces and the arena (in SRAM or\n"
        "PSRAM), where they go on the board, whether the model fits one board and otherwise the fewest\n"
        "boards of this kind that hold it in contiguous layer ranges. The arena is the node runtime's own\n"
        "figure (bitnet_mcu_arena_bytes, as bitnet-mcu-run reports it).",
        BITNET_EXIT_STATUS_HELP, opts);
    int rc = bitnet_args_parse(&args, argc, argv);
    if (rc >= 0) return rc;
    if (!o.model) return bitnet_args_fail(&args, "-m MODEL is required");
    if (!o.board) return bitnet_args_fail(&args, "--board NAME|FILE is required (esp32s3, cortex-m4f or a .yaml file)");

    char path[1024];
    const bool by_name = board_path(o.board, path, sizeof path);
    bitnet_error err;
    bitnet_plan_board *b = NULL;
    const bitnet_status st = bitnet_plan_board_load(path, &b, &err);
    if (st == BITNET_ERR_IO && by_name) {
        char names[512];
        board_names(names, sizeof names);
        return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "no board named '%s' (%s); the boards are %s, or give a board file",
                                 o.board, err.msg, names[0] ? names : "(none found)");
    }
    if (st != BITNET_OK) return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "%s", err.msg);
    bitnet_mcu_plan *p = NULL;
    const bitnet_mcu_plan_params pp = {o.n_ctx, o.n_batch, o.i2s_layout};
    if (bitnet_mcu_plan_make(o.model, b, &pp, &p, &err) != BITNET_OK) {
        bitnet_plan_board_free(b);
        return bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "%s", err.msg);
    }

    const bitnet_hparams *hp = &p->hp;
    char h[32];
    printf("model: %s (%llu bytes, %s)\n", p->model_path, (unsigned long long)p->image_bytes, human(p->image_bytes, h, sizeof h));
    printf("  arch %s, n_embd %d, n_ff %d, n_layer %d, n_head %d/%d, n_vocab %d; %s path: %s\n", hp->arch, (int)hp->n_embd,
           (int)hp->n_ff, (int)hp->n_layer, (int)hp->n_head, (int)hp->n_head_kv, (int)hp->n_vocab, p->kernel_path, p->kernels);
    if (p->i2s_note[0]) printf("  %s\n", p->i2s_note);
    printf("context: n_ctx %d, n_batch %d, %d row%s of logits\n", (int)p->params.n_ctx, (int)p->params.n_batch,
           (int)p->params.n_logits, p->params.n_logits == 1 ? "" : "s");
    print_layers(p);
    print_fixed(p);
    print_placement(p, b);
    print_traffic(p, b);
    print_partition(p, b);

    rc = BITNET_EXIT_OK;
    if (o.json) {
        if (bitnet_mcu_plan_write_json(p, b, o.json, &err) != BITNET_OK) rc = bitnet_tool_error(TOOL, BITNET_EXIT_FAILURE, "%s", err.msg);
        else printf("\nwrote %s\n", o.json);
    }
    bitnet_mcu_plan_free(p);
    bitnet_plan_board_free(b);
    return rc;
}
