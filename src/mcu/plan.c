/* plan.c — the memory budget of one microcontroller node (contracts in plan.h): placement of the weights and
 * the arena on a board, the partition model and its greedy partition, the plan of a model opened through the
 * node API, and its JSON (fields: boards/README.md). The board files are read by plan_board.c. */
#include "mcu/plan.h"

#include <json-c/json.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gguf.h"
#include "base/types.h"
#include "runtime/lut_host.h"

static uint64_t round64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

/* Append printf text to a fixed buffer (truncating). */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static void cat(char *buf, size_t cap, const char *fmt, ...) {
    const size_t len = strlen(buf);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* ---- placement on one board -------------------------------------------------------------------------- */

/* The weights fit memory w and the arena memory a (the same one or not). */
static bool pair_fits(const bitnet_plan_board *b, int w, int a, uint64_t flash, uint64_t arena) {
    const bitnet_plan_memory *W = &b->memories[w], *A = &b->memories[a];
    if (!(W->roles & BITNET_PLAN_ROLE_WEIGHTS) || !(A->roles & BITNET_PLAN_ROLE_ARENA)) return false;
    if (w == a) return flash <= A->usable && arena <= A->usable - flash;
    return flash <= W->usable && arena <= A->usable;
}

bool bitnet_plan_place(const bitnet_plan_board *b, uint64_t flash, uint64_t arena, bitnet_plan_fit *out) {
    memset(out, 0, sizeof *out);
    out->flash_bytes = flash;
    out->arena_bytes = arena;
    out->weights_memory = out->arena_memory = -1;
    /* arena memories in preference order, each with the first weights memory that leaves it room */
    for (int a = 0; a < b->n_memories && !out->fits; a++) {
        for (int w = 0; w < b->n_memories && !out->fits; w++) {
            if (pair_fits(b, w, a, flash, arena)) {
                out->fits = true;
                out->weights_memory = w;
                out->arena_memory = a;
            }
        }
    }
    char *r = out->reason;
    const size_t cap = sizeof out->reason;
    if (out->fits) {
        const bitnet_plan_memory *W = &b->memories[out->weights_memory], *A = &b->memories[out->arena_memory];
        const uint64_t a_left = A->usable - arena - (out->weights_memory == out->arena_memory ? flash : 0);
        cat(r, cap, "the weights (%llu bytes) go to %s (%llu usable, %llu left) and the arena (%llu bytes) to %s",
            (unsigned long long)flash, W->name, (unsigned long long)W->usable,
            (unsigned long long)(W->usable - flash - (out->weights_memory == out->arena_memory ? arena : 0)),
            (unsigned long long)arena, A->name);
        if (out->weights_memory == out->arena_memory) cat(r, cap, " as well");
        else cat(r, cap, " (%llu usable, %llu left)", (unsigned long long)A->usable, (unsigned long long)a_left);
        for (int a = 0; a < out->arena_memory; a++) {
            if (b->memories[a].roles & BITNET_PLAN_ROLE_ARENA)
                cat(r, cap, "; the arena is too big for %s (%llu usable)", b->memories[a].name,
                    (unsigned long long)b->memories[a].usable);
        }
        return true;
    }
    /* why not: the weights fit no memory, or the arena fits none beside them */
    bool weights_fit = false, arena_alone_fits = false;
    for (int m = 0; m < b->n_memories; m++) {
        const bitnet_plan_memory *M = &b->memories[m];
        if ((M->roles & BITNET_PLAN_ROLE_WEIGHTS) && flash <= M->usable) weights_fit = true;
        if ((M->roles & BITNET_PLAN_ROLE_ARENA) && arena <= M->usable) arena_alone_fits = true;
    }
    if (!weights_fit) {
        cat(r, cap, "the weights (%llu bytes) exceed every memory that can hold them:", (unsigned long long)flash);
        const char *sep = " ";
        for (int w = 0; w < b->n_memories; w++) {
            if (!(b->memories[w].roles & BITNET_PLAN_ROLE_WEIGHTS)) continue;
            cat(r, cap, "%s%s %llu usable", sep, b->memories[w].name, (unsigned long long)b->memories[w].usable);
            sep = ", ";
        }
        if (arena_alone_fits) return false;
        cat(r, cap, "; the arena (%llu bytes) exceeds every memory that can hold it too:", (unsigned long long)arena);
    } else {
        cat(r, cap, "the arena (%llu bytes) exceeds every memory that can hold it beside the weights (%llu bytes):",
            (unsigned long long)arena, (unsigned long long)flash);
    }
    const char *sep = " ";
    for (int a = 0; a < b->n_memories; a++) {
        const bitnet_plan_memory *A = &b->memories[a];
        if (!(A->roles & BITNET_PLAN_ROLE_ARENA)) continue;
        bool elsewhere = false; /* the weights fit a memory other than this one */
        for (int w = 0; w < b->n_memories; w++) {
            if (w != a && (b->memories[w].roles & BITNET_PLAN_ROLE_WEIGHTS) && flash <= b->memories[w].usable) elsewhere = true;
        }
        if (weights_fit && (A->roles & BITNET_PLAN_ROLE_WEIGHTS) && !elsewhere)
            cat(r, cap, "%s%s %llu usable, %llu of them beside the weights", sep, A->name, (unsigned long long)A->usable,
                (unsigned long long)(A->usable - flash));
        else cat(r, cap, "%s%s %llu usable", sep, A->name, (unsigned long long)A->usable);
        sep = ", ";
    }
    return false;
}

/* ---- the partition ----------------------------------------------------------------------------------- */

void bitnet_plan_range(const bitnet_plan_pieces *pc, int32_t a, int32_t b, uint64_t *flash, uint64_t *arena) {
    const int32_t last = pc->n_layer + 1;
    uint64_t f = pc->node_flash, kv = 0;
    for (int32_t p = a; p < b; p++) {
        if (p == 0) f += pc->first_flash;
        else if (p == last) f += pc->last_flash;
        else {
            f += pc->layer_flash[p - 1];
            kv += pc->layer_kv[p - 1];
        }
    }
    if (a == 0 && b == last + 1) f -= pc->shared_flash;
    *flash = f;
    /* K and V: two buffers of half the bytes each, rounded up to 64 as the runtime allocates them */
    *arena = pc->node_arena + 2 * round64(kv / 2) + (b == last + 1 ? pc->last_arena : 0);
}

void bitnet_plan_partition_free(bitnet_plan_partition *p) {
    if (!p) return;
    free(p->nodes);
    memset(p, 0, sizeof *p);
}

/* "layer 3", or the name of an end piece. */
static void piece_name(const bitnet_plan_pieces *pc, int32_t p, char *out, size_t cap) {
    if (p == 0) snprintf(out, cap, "%s", pc->first_name ? pc->first_name : "the first piece");
    else if (p == pc->n_layer + 1) snprintf(out, cap, "%s", pc->last_name ? pc->last_name : "the last piece");
    else snprintf(out, cap, "layer %d", (int)(p - 1));
}

/* The pieces that fit no board alone, as "token_embd.weight, layers 0-29, ..." (runs of layers joined). */
static int32_t list_bad_pieces(const bitnet_plan_board *b, const bitnet_plan_pieces *pc, char *out, size_t cap) {
    const int32_t n_pieces = pc->n_layer + 2;
    int32_t n_bad = 0, run_start = -1;
    out[0] = '\0';
    for (int32_t p = 0; p <= n_pieces; p++) {
        bool bad = false;
        if (p < n_pieces) {
            uint64_t flash, arena;
            bitnet_plan_range(pc, p, p + 1, &flash, &arena);
            bitnet_plan_fit f;
            bad = !bitnet_plan_place(b, flash, arena, &f);
            n_bad += bad;
        }
        const bool layer = p >= 1 && p <= pc->n_layer;
        if (run_start >= 0 && !(bad && layer)) { /* close a run of layers */
            const int32_t first = run_start - 1, last = p - 2;
            if (first == last) cat(out, cap, "%slayer %d", out[0] ? ", " : "", (int)first);
            else cat(out, cap, "%slayers %d-%d", out[0] ? ", " : "", (int)first, (int)last);
            run_start = -1;
        }
        if (bad && layer && run_start < 0) run_start = p;
        if (bad && !layer) {
            char name[128];
            piece_name(pc, p, name, sizeof name);
            cat(out, cap, "%s%s", out[0] ? ", " : "", name);
        }
    }
    return n_bad;
}

/* The partition is impossible: piece a fits no empty board (it needs flash and arena; why: the placement's
 * reason). The reason also lists every other piece that fits no board alone. */
static void impossible(const bitnet_plan_board *b, const bitnet_plan_pieces *pc, int32_t a, uint64_t flash,
                       uint64_t arena, const char *why, bitnet_plan_partition *out) {
    char name[128], bad[384];
    piece_name(pc, a, name, sizeof name);
    out->possible = false;
    out->bad_piece = a;
    out->n_bad_pieces = list_bad_pieces(b, pc, bad, sizeof bad);
    snprintf(out->reason, sizeof out->reason,
             "no number of %s boards holds this model: %s alone needs %llu bytes of weights and an arena of %llu bytes "
             "on a board, and %s",
             b->name, name, (unsigned long long)flash, (unsigned long long)arena, why);
    if (out->n_bad_pieces > 1)
        cat(out->reason, sizeof out->reason, ". %d of the %d pieces fit no board alone: %s", (int)out->n_bad_pieces,
            (int)(pc->n_layer + 2), bad);
    cat(out->reason, sizeof out->reason, ". A partition into layer ranges cannot split a tensor");
    free(out->nodes);
    out->nodes = NULL;
    out->n_boards = 0;
}

bitnet_status bitnet_plan_partition_make(const bitnet_plan_board *b, const bitnet_plan_pieces *pc,
                                         bitnet_plan_partition *out, bitnet_error *err) {
    if (!b || !pc || !out || pc->n_layer < 0 || (pc->n_layer > 0 && (!pc->layer_flash || !pc->layer_kv)))
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_plan_partition_make: bad arguments");
    memset(out, 0, sizeof *out);
    out->bad_piece = -1;
    const int32_t n_pieces = pc->n_layer + 2;
    out->nodes = calloc((size_t)n_pieces, sizeof *out->nodes);
    if (!out->nodes) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a partition of %d pieces", (int)n_pieces);
    /* Greedy: every board takes the longest run of pieces that fits it (optimal: plan.h). */
    for (int32_t a = 0; a < n_pieces;) {
        bitnet_plan_node *nd = &out->nodes[out->n_boards];
        int32_t end = a;
        for (int32_t e = a + 1; e <= n_pieces; e++) {
            uint64_t flash, arena;
            bitnet_plan_range(pc, a, e, &flash, &arena);
            bitnet_plan_fit fit;
            if (!bitnet_plan_place(b, flash, arena, &fit)) {
                if (e == a + 1) {
                    impossible(b, pc, a, flash, arena, fit.reason, out);
                    return BITNET_OK;
                }
                break;
            }
            end = e;
            nd->fit = fit;
        }
        nd->first_piece = a;
        nd->end_piece = end;
        nd->has_first = a == 0;
        nd->has_last = end == n_pieces;
        const int32_t l0 = a > 0 ? a - 1 : 0, l1 = end < pc->n_layer + 1 ? end - 1 : pc->n_layer;
        nd->first_layer = l0;
        nd->n_layers = l1 > l0 ? l1 - l0 : 0;
        out->n_boards++;
        a = end;
    }
    out->possible = true;
    snprintf(out->reason, sizeof out->reason, "%d %s board%s with contiguous layer ranges", (int)out->n_boards, b->name,
             out->n_boards == 1 ? "" : "s");
    return BITNET_OK;
}

uint64_t bitnet_plan_seed_wsize(int scheme, int64_t ne10, int64_t ne11) {
    if (ne10 <= 0 || ne11 <= 0) return 0;
    const uint64_t k = (uint64_t)ne10, n = (uint64_t)ne11, f = sizeof(float);
    uint64_t w;
    if (scheme == BITNET_TYPE_TL1) w = k * n * 15 + 1 * n * 2 * f;
    else if (scheme == BITNET_TYPE_TL2) w = k * n * 11 + 2 * n * 2 * f;
    else return 0;
    return ((w - 1) / 64 + 1) * 64;
}

/* ---- the plan of a model ----------------------------------------------------------------------------- */

void bitnet_mcu_plan_free(bitnet_mcu_plan *p) {
    if (!p) return;
    free(p->tensors);
    free(p->layers);
    free(p->piece_arrays);
    bitnet_plan_partition_free(&p->partition);
    free(p);
}

/* The file at path into a 64-byte aligned heap buffer. */
static bitnet_status read_image(const char *path, uint8_t **image, size_t *size, bitnet_error *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open the model: %s", path, strerror(errno));
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot find the size of the model", path);
    }
    uint8_t *buf = aligned_alloc(64, round64((uint64_t)n ? (uint64_t)n : 64));
    if (!buf) {
        fclose(f);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for the image (%ld bytes)", path, n);
    }
    const size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    if (got != (size_t)n) {
        free(buf);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: read %llu of %ld bytes", path, (unsigned long long)got, n);
    }
    *image = buf;
    *size = (size_t)n;
    return BITNET_OK;
}

/* The refusal of an image in I2_S layout `layout` (ARM64 or ROWS4; `how`: "" when asked for, " records"
 * when recorded): a board runs its image in place, and its kernels read x86. */
static bitnet_status not_in_place(const char *path, const char *how, int layout, bitnet_error *err) {
    const char *l = bitnet_i2s_layout_name(layout);
    return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                       "%s:%s I2_S layout %s: a board runs its image in place, in the x86 layout; rewrite it once "
                       "(bitnet-convert --relayout %s %s -o OUT.gguf) and plan OUT.gguf",
                       path, how, l, l, path);
}

/* BITNET_OK unless the image records an I2_S layout other than x86 (refused before a node would rewrite its
 * weights), or its record is malformed. */
static bitnet_status recorded_in_place(const uint8_t *image, size_t size, const char *path, bitnet_error *err) {
    bitnet_gguf *g = NULL;
    bitnet_status st = bitnet_gguf_open_memory(image, size, path, BITNET_GGUF_NO_STRING_INDEX, &g, err);
    int recorded = -1;
    if (st == BITNET_OK) st = bitnet_gguf_i2s_layout(g, &recorded, NULL, err);
    bitnet_gguf_close(g);
    if (st == BITNET_OK && recorded > 0 && recorded != BITNET_I2S_LAYOUT_X86)
        return not_in_place(path, " records", recorded, err);
    return st;
}

/* Open the image as a node (bitnet_mcu_open) over a heap arena, doubled until the model fits in it; the
 * arena's offset after the open is the node's own (it does not depend on the arena's size). */
static bitnet_status open_node(bitnet_mcu *rt, const uint8_t *image, size_t size, const char *name, int i2s_layout,
                               void **arena, bitnet_error *err) {
    for (size_t bytes = (size_t)1 << 20;; bytes *= 2) {
        void *buf = aligned_alloc(64, bytes);
        if (!buf) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for a node arena of %llu bytes", name, (unsigned long long)bytes);
        bitnet_error sub;
        const bitnet_status st = bitnet_mcu_open_layout(rt, image, size, name, i2s_layout, buf, bytes, &sub);
        if (st == BITNET_OK) {
            *arena = buf;
            return BITNET_OK;
        }
        free(buf);
        if (st != BITNET_ERR_NOMEM || bytes > SIZE_MAX / 4) return bitnet_fail(err, st, "%s", sub.msg);
    }
}

/* <l> of "blk.<l>.<rest>", else -1. */
static int32_t layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    const char *p = name + 4;
    int64_t l = 0;
    if (*p < '0' || *p > '9') return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        l = l * 10 + (*p - '0');
        if (l > INT32_MAX) return -1;
    }
    return *p == '.' ? (int32_t)l : -1;
}

/* The tensors of the image in file order, their spans, and what they belong to. */
static bitnet_status read_tensors(bitnet_mcu_plan *p, const uint8_t *image, size_t size, bitnet_error *err) {
    bitnet_gguf *g = NULL;
    bitnet_status st = bitnet_gguf_open_memory(image, size, p->model_path, BITNET_GGUF_NO_STRING_INDEX, &g, err);
    if (st != BITNET_OK) return st;
    const int64_t n = bitnet_gguf_n_tensors(g);
    p->n_tensors = (int32_t)n;
    p->tensors = calloc(n > 0 ? (size_t)n : 1, sizeof *p->tensors);
    int64_t *order = calloc(n > 0 ? (size_t)n : 1, sizeof *order);
    if (!p->tensors || !order) {
        free(order);
        bitnet_gguf_close(g);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for %lld tensors", (long long)n);
    }
    p->header_bytes = bitnet_gguf_data_offset(g);
    p->alignment = bitnet_gguf_alignment(g);
    const uint64_t data_bytes = size - p->header_bytes;
    for (int64_t i = 0; i < n; i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        bitnet_plan_tensor *t = &p->tensors[i];
        if (strlen(ti->name) >= sizeof t->name) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor name '%.60s...' is longer than %d bytes", p->model_path,
                             ti->name, (int)sizeof t->name - 1);
            break;
        }
        strcpy(t->name, ti->name);
        t->type = ti->type;
        t->n_dims = ti->n_dims;
        memcpy(t->ne, ti->ne, sizeof t->ne);
        t->bytes = ti->nbytes;
        t->layer = layer_of(t->name);
        order[i] = i;
    }
    /* spans: from each tensor's offset to the next one's (the last one's to the end of the file) */
    for (int64_t i = 1; st == BITNET_OK && i < n; i++) { /* insertion sort by offset; the table is nearly sorted */
        const int64_t v = order[i];
        const uint64_t off = bitnet_gguf_tensor(g, v)->offset;
        int64_t j = i;
        for (; j > 0 && bitnet_gguf_tensor(g, order[j - 1])->offset > off; j--) order[j] = order[j - 1];
        order[j] = v;
    }
    for (int64_t i = 0; st == BITNET_OK && i < n; i++) {
        const uint64_t off = bitnet_gguf_tensor(g, order[i])->offset;
        const uint64_t next = i + 1 < n ? bitnet_gguf_tensor(g, order[i + 1])->offset : data_bytes;
        p->tensors[order[i]].flash_bytes = next - off;
    }
    free(order);
    bitnet_gguf_close(g);
    return st;
}

/* The largest LUT workspace of the ternary weights (the runtime's bitnet_mul_mat_get_wsize for n_batch columns;
 * TL1/TL2 weights are sized here without their extra, an upper bound, so the name may be approximate for them,
 * never the bytes: those are the context budget's). */
static void lut_product(bitnet_mcu_plan *p) {
    uint64_t best = 0;
    p->lut_tensor = -1;
    for (int32_t i = 0; i < p->n_tensors; i++) {
        const bitnet_plan_tensor *t = &p->tensors[i];
        if (!bitnet_type_is_ternary(t->type) || t->n_dims != 2) continue;
        bitnet_tensor w, x, y;
        memset(&w, 0, sizeof w);
        memset(&x, 0, sizeof x);
        memset(&y, 0, sizeof y);
        w.type = t->type;
        w.n_dims = 2;
        w.ne[0] = t->ne[0];
        w.ne[1] = t->ne[1];
        w.ne[2] = w.ne[3] = 1;
        x.type = y.type = BITNET_TYPE_F32;
        x.n_dims = y.n_dims = 2;
        x.ne[0] = t->ne[0];
        y.ne[0] = t->ne[1];
        x.ne[1] = y.ne[1] = p->params.n_batch;
        x.ne[2] = x.ne[3] = y.ne[2] = y.ne[3] = 1;
        const uint64_t ws = bitnet_mul_mat_get_wsize(&w, &x, &y);
        if (ws > best) {
            best = ws;
            p->lut_tensor = i;
        }
    }
    p->lut_buffer_bytes = p->budget.context.lut_workspace / 2;
    if (p->lut_tensor >= 0) {
        const int64_t K = p->tensors[p->lut_tensor].ne[0];
        p->seed_tl1_bytes = bitnet_plan_seed_wsize(BITNET_TYPE_TL1, K, p->params.n_batch);
        p->seed_tl2_bytes = bitnet_plan_seed_wsize(BITNET_TYPE_TL2, K, p->params.n_batch);
    }
}

/* The partition model of the plan (plan.h) and the check that a board with every piece is the whole node. */
static bitnet_status make_pieces(bitnet_mcu_plan *p, bitnet_error *err) {
    const int32_t L = p->hp.n_layer;
    p->piece_arrays = calloc(2 * (size_t)(L > 0 ? L : 1), sizeof *p->piece_arrays);
    if (!p->piece_arrays) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
    uint64_t *lf = p->piece_arrays, *lk = p->piece_arrays + L;
    for (int32_t l = 0; l < L; l++) {
        lf[l] = p->layers[l].flash_bytes;
        lk[l] = p->kv_bytes_per_layer;
    }
    const uint64_t embd = p->token_embd >= 0 ? p->tensors[p->token_embd].flash_bytes : 0;
    const uint64_t norm = p->output_norm >= 0 ? p->tensors[p->output_norm].flash_bytes : 0;
    const uint64_t head = p->output >= 0 ? p->tensors[p->output].flash_bytes : embd;
    const bitnet_context_budget *c = &p->budget.context;
    bitnet_plan_pieces *pc = &p->pieces;
    pc->n_layer = L;
    pc->layer_flash = lf;
    pc->layer_kv = lk;
    pc->node_flash = p->header_bytes + p->other_flash;
    pc->node_arena = p->budget.model + c->total - c->kv_cache - c->logits;
    pc->first_flash = embd;
    pc->last_flash = norm + head;
    pc->shared_flash = p->output >= 0 ? 0 : embd;
    pc->last_arena = c->logits;
    pc->first_name = "token_embd.weight";
    pc->last_name = p->output >= 0 ? "output_norm.weight + output.weight" : "output_norm.weight + the head (token_embd.weight, tied)";
    uint64_t flash, arena;
    bitnet_plan_range(pc, 0, L + 2, &flash, &arena);
    if (flash != p->image_bytes || arena != p->budget.total)
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: the pieces of the partition add up to %llu bytes of image and %llu of arena, the node has "
                           "%llu and %llu (a tensor outside the data section, or a context buffer this plan does not know)",
                           p->model_path, (unsigned long long)flash, (unsigned long long)arena,
                           (unsigned long long)p->image_bytes, (unsigned long long)p->budget.total);
    return BITNET_OK;
}

/* Everything after the node is open: sizes, tensors, pieces, placement, partition. */
static bitnet_status plan_node(bitnet_mcu_plan *p, bitnet_mcu *rt, const uint8_t *image, size_t size,
                               const bitnet_plan_board *b, const bitnet_mcu_plan_params *pp, bitnet_error *err) {
    p->hp = *bitnet_model_hparams(rt->model);
    snprintf(p->kernel_path, sizeof p->kernel_path, "%s", bitnet_kernel_path_name(bitnet_model_path(rt->model)));
    snprintf(p->kernels, sizeof p->kernels, "%s", bitnet_model_kernel_summary(rt->model));
    snprintf(p->i2s_note, sizeof p->i2s_note, "%s", bitnet_model_i2s_note(rt->model));
    if (pp->n_ctx < 1 || pp->n_ctx > (1 << 24))
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_ctx = %d must be in [1, %d]", (int)pp->n_ctx, 1 << 24);
    if (pp->n_batch < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_batch = %d must be >= 1", (int)pp->n_batch);
    const int32_t n_batch = pp->n_batch > pp->n_ctx ? pp->n_ctx : pp->n_batch; /* as the context clamps it */
    p->params.n_ctx = pp->n_ctx;
    p->params.n_batch = n_batch;
    p->params.n_logits = n_batch;
    bitnet_status st = bitnet_mcu_arena_bytes(rt, &p->params, &p->budget, err);
    if (st != BITNET_OK) return st;
    p->image_bytes = size;
    if ((st = read_tensors(p, image, size, err)) != BITNET_OK) return st;

    const int32_t L = p->hp.n_layer;
    p->layers = calloc(L > 0 ? (size_t)L : 1, sizeof *p->layers);
    if (!p->layers) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
    p->token_embd = p->output = p->output_norm = -1;
    for (int32_t i = 0; i < p->n_tensors; i++) {
        const bitnet_plan_tensor *t = &p->tensors[i];
        if (t->layer >= 0 && t->layer < L) {
            p->layers[t->layer].tensor_bytes += t->bytes;
            p->layers[t->layer].flash_bytes += t->flash_bytes;
            p->layers[t->layer].n_tensors++;
        } else if (strcmp(t->name, "token_embd.weight") == 0) p->token_embd = i;
        else if (strcmp(t->name, "output.weight") == 0) p->output = i;
        else if (strcmp(t->name, "output_norm.weight") == 0) p->output_norm = i;
        else p->other_flash += t->flash_bytes;
    }
    /* the K and V cache of one layer: n_ctx positions of kv_dim F16 values each (model.h) */
    const uint64_t kv_dim = (uint64_t)p->hp.n_head_kv * (uint64_t)p->hp.n_embd_head;
    p->kv_bytes_per_layer = 2 * (uint64_t)p->params.n_ctx * kv_dim * 2;
    for (int32_t l = 0; l < L; l++) p->layers[l].kv_cache_bytes = p->kv_bytes_per_layer;
    lut_product(p);
    /* per generated token (plan.h) */
    for (int32_t l = 0; l < L; l++) p->token_layer_bytes += p->layers[l].tensor_bytes;
    const bitnet_plan_tensor *embd = p->token_embd >= 0 ? &p->tensors[p->token_embd] : NULL;
    p->token_embd_row_bytes = embd && p->hp.n_vocab > 0 ? embd->bytes / (uint64_t)p->hp.n_vocab : 0;
    p->token_head_bytes = p->output >= 0 ? p->tensors[p->output].bytes : embd ? embd->bytes : 0;
    p->token_flash_bytes = p->token_layer_bytes + p->token_head_bytes + p->token_embd_row_bytes +
                           (p->output_norm >= 0 ? p->tensors[p->output_norm].bytes : 0);
    const uint64_t kv_pos = 2 * (uint64_t)L * kv_dim * 2; /* K and V of one position in every layer (F16) */
    p->token_kv_mid_bytes = kv_pos * ((uint64_t)p->params.n_ctx / 2 + 1);
    p->token_kv_full_bytes = kv_pos * (uint64_t)p->params.n_ctx;
    p->token_kv_write_bytes = kv_pos;
    if ((st = make_pieces(p, err)) != BITNET_OK) return st;
    bitnet_plan_place(b, p->image_bytes, p->budget.total, &p->one);
    return bitnet_plan_partition_make(b, &p->pieces, &p->partition, err);
}

bitnet_status bitnet_mcu_plan_make(const char *model_path, const bitnet_plan_board *b,
                                   const bitnet_mcu_plan_params *pp, bitnet_mcu_plan **out, bitnet_error *err) {
    if (!model_path || !b || !pp || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_mcu_plan_make: NULL argument");
    *out = NULL;
    if (pp->i2s_layout == BITNET_I2S_LAYOUT_ARM64 || pp->i2s_layout == BITNET_I2S_LAYOUT_ROWS4)
        return not_in_place(model_path, "", pp->i2s_layout, err);
    bitnet_mcu_plan *p = calloc(1, sizeof *p);
    if (!p) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
    if (strlen(model_path) >= sizeof p->model_path) {
        free(p);
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "model path longer than %d bytes", (int)sizeof p->model_path - 1);
    }
    strcpy(p->model_path, model_path);
    uint8_t *image = NULL;
    size_t size = 0;
    bitnet_status st = read_image(model_path, &image, &size, err);
    if (st != BITNET_OK) {
        free(p);
        return st;
    }
    bitnet_mcu rt;
    void *arena = NULL;
    st = recorded_in_place(image, size, model_path, err);
    if (st == BITNET_OK) st = open_node(&rt, image, size, model_path, pp->i2s_layout, &arena, err);
    if (st == BITNET_OK) {
        st = plan_node(p, &rt, image, size, b, pp, err);
        bitnet_mcu_close(&rt);
        free(arena);
    }
    free(image);
    if (st != BITNET_OK) {
        bitnet_mcu_plan_free(p);
        return st;
    }
    *out = p;
    return BITNET_OK;
}

/* ---- JSON -------------------------------------------------------------------------------------------- */

static json_object *jstr(const char *s) { return s ? json_object_new_string(s) : NULL; }
static json_object *ju64(uint64_t v) { return json_object_new_int64((int64_t)v); }

static json_object *jtensor(const bitnet_plan_tensor *t) {
    json_object *o = json_object_new_object(), *ne = json_object_new_array();
    json_object_object_add(o, "name", jstr(t->name));
    json_object_object_add(o, "type", jstr(bitnet_type_name(t->type)));
    for (int d = 0; d < t->n_dims; d++) json_object_array_add(ne, json_object_new_int64(t->ne[d]));
    json_object_object_add(o, "ne", ne);
    json_object_object_add(o, "bytes", ju64(t->bytes));
    json_object_object_add(o, "flash_bytes", ju64(t->flash_bytes));
    return o;
}

static json_object *jmemname(const bitnet_plan_board *b, int m) { return m >= 0 ? jstr(b->memories[m].name) : NULL; }

static json_object *jfit(const bitnet_plan_board *b, const bitnet_plan_fit *f) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "fits", json_object_new_boolean(f->fits));
    json_object_object_add(o, "flash_bytes", ju64(f->flash_bytes));
    json_object_object_add(o, "arena_bytes", ju64(f->arena_bytes));
    json_object_object_add(o, "weights_memory", jmemname(b, f->weights_memory));
    json_object_object_add(o, "arena_memory", jmemname(b, f->arena_memory));
    json_object_object_add(o, "reason", jstr(f->reason));
    return o;
}

static json_object *jboard(const bitnet_plan_board *b) {
    json_object *o = json_object_new_object(), *mems = json_object_new_array();
    json_object_object_add(o, "name", jstr(b->name));
    json_object_object_add(o, "file", jstr(b->path));
    for (int m = 0; m < b->n_memories; m++) {
        const bitnet_plan_memory *M = &b->memories[m];
        json_object *mo = json_object_new_object(), *roles = json_object_new_array();
        json_object_object_add(mo, "name", jstr(M->name));
        json_object_object_add(mo, "kind", jstr(M->kind == BITNET_PLAN_FLASH ? "flash" : "ram"));
        json_object_object_add(mo, "bytes", ju64(M->bytes));
        json_object_object_add(mo, "reserved_bytes", ju64(M->reserved));
        json_object_object_add(mo, "usable_bytes", ju64(M->usable));
        if (M->roles & BITNET_PLAN_ROLE_WEIGHTS) json_object_array_add(roles, jstr("weights"));
        if (M->roles & BITNET_PLAN_ROLE_ARENA) json_object_array_add(roles, jstr("arena"));
        json_object_object_add(mo, "roles", roles);
        json_object_object_add(mo, "stream_mb_s", json_object_new_double(M->stream_mb_s));
        json_object_array_add(mems, mo);
    }
    json_object_object_add(o, "memories", mems);
    return o;
}

static json_object *jplan(const bitnet_mcu_plan *p, const bitnet_plan_board *b) {
    json_object *root = json_object_new_object();
    json_object_object_add(root, "format", jstr("bitnet-mcu-plan"));
    json_object_object_add(root, "version", json_object_new_int(1));

    const bitnet_hparams *hp = &p->hp;
    json_object *model = json_object_new_object();
    json_object_object_add(model, "file", jstr(p->model_path));
    json_object_object_add(model, "arch", jstr(hp->arch));
    json_object_object_add(model, "n_vocab", json_object_new_int(hp->n_vocab));
    json_object_object_add(model, "n_embd", json_object_new_int(hp->n_embd));
    json_object_object_add(model, "n_ff", json_object_new_int(hp->n_ff));
    json_object_object_add(model, "n_layer", json_object_new_int(hp->n_layer));
    json_object_object_add(model, "n_head", json_object_new_int(hp->n_head));
    json_object_object_add(model, "n_head_kv", json_object_new_int(hp->n_head_kv));
    json_object_object_add(model, "n_embd_head", json_object_new_int(hp->n_embd_head));
    json_object_object_add(model, "n_ctx_train", json_object_new_int(hp->n_ctx_train));
    json_object_object_add(model, "tied_output", json_object_new_boolean(p->output < 0));
    json_object_object_add(model, "kernel_path", jstr(p->kernel_path));
    json_object_object_add(model, "kernels", jstr(p->kernels));
    json_object_object_add(model, "i2s_layout", jstr(p->i2s_note));
    json_object_object_add(model, "image_bytes", ju64(p->image_bytes));
    json_object_object_add(model, "header_bytes", ju64(p->header_bytes));
    json_object_object_add(model, "alignment", json_object_new_int((int32_t)p->alignment));
    json_object_object_add(model, "hidden_state_bytes_per_token", ju64((uint64_t)hp->n_embd * sizeof(float)));
    json_object_object_add(root, "model", model);

    json_object *params = json_object_new_object();
    json_object_object_add(params, "n_ctx", json_object_new_int(p->params.n_ctx));
    json_object_object_add(params, "n_batch", json_object_new_int(p->params.n_batch));
    json_object_object_add(params, "n_logits", json_object_new_int(p->params.n_logits));
    json_object_object_add(root, "params", params);
    json_object_object_add(root, "board", jboard(b));

    json_object *layers = json_object_new_array();
    for (int32_t l = 0; l < hp->n_layer; l++) {
        json_object *lo = json_object_new_object(), *ts = json_object_new_array();
        json_object_object_add(lo, "index", json_object_new_int(l));
        json_object_object_add(lo, "tensor_bytes", ju64(p->layers[l].tensor_bytes));
        json_object_object_add(lo, "flash_bytes", ju64(p->layers[l].flash_bytes));
        json_object_object_add(lo, "kv_cache_bytes", ju64(p->layers[l].kv_cache_bytes));
        for (int32_t i = 0; i < p->n_tensors; i++) {
            if (p->tensors[i].layer == l) json_object_array_add(ts, jtensor(&p->tensors[i]));
        }
        json_object_object_add(lo, "tensors", ts);
        json_object_array_add(layers, lo);
    }
    json_object_object_add(root, "layers", layers);

    json_object *fixed = json_object_new_object(), *other = json_object_new_array();
    json_object_object_add(fixed, "header_bytes", ju64(p->header_bytes));
    json_object_object_add(fixed, "token_embd", p->token_embd >= 0 ? jtensor(&p->tensors[p->token_embd]) : NULL);
    json_object_object_add(fixed, "output", p->output >= 0 ? jtensor(&p->tensors[p->output]) : NULL);
    json_object_object_add(fixed, "head", jstr(p->output >= 0 ? "output.weight" : "token_embd.weight"));
    json_object_object_add(fixed, "output_norm", p->output_norm >= 0 ? jtensor(&p->tensors[p->output_norm]) : NULL);
    for (int32_t i = 0; i < p->n_tensors; i++) {
        const bitnet_plan_tensor *t = &p->tensors[i];
        if ((t->layer < 0 || t->layer >= hp->n_layer) && i != p->token_embd && i != p->output && i != p->output_norm)
            json_object_array_add(other, jtensor(t));
    }
    json_object_object_add(fixed, "other_tensors", other);
    json_object_object_add(root, "fixed", fixed);

    const bitnet_context_budget *c = &p->budget.context;
    json_object *arena = json_object_new_object(), *ctx = json_object_new_object();
    json_object_object_add(arena, "total_bytes", ju64(p->budget.total));
    json_object_object_add(arena, "model_bytes", ju64(p->budget.model));
    json_object_object_add(ctx, "activations", ju64(c->activations));
    json_object_object_add(ctx, "kv_cache", ju64(c->kv_cache));
    json_object_object_add(ctx, "rope_tables", ju64(c->rope_tables));
    json_object_object_add(ctx, "attention", ju64(c->attention));
    json_object_object_add(ctx, "lut_workspace", ju64(c->lut_workspace));
    json_object_object_add(ctx, "logits", ju64(c->logits));
    json_object_object_add(ctx, "other", ju64(c->other));
    json_object_object_add(ctx, "total", ju64(c->total));
    json_object_object_add(arena, "context", ctx);
    json_object_object_add(arena, "kv_cache_bytes_per_layer", ju64(p->kv_bytes_per_layer));
    json_object *tok = json_object_new_object();
    json_object_object_add(tok, "layer_tensor_bytes", ju64(p->token_layer_bytes));
    json_object_object_add(tok, "head_bytes", ju64(p->token_head_bytes));
    json_object_object_add(tok, "token_embd_row_bytes", ju64(p->token_embd_row_bytes));
    json_object_object_add(tok, "weights_memory_bytes", ju64(p->token_flash_bytes));
    json_object_object_add(tok, "kv_read_bytes_mid_context", ju64(p->token_kv_mid_bytes));
    json_object_object_add(tok, "kv_read_bytes_full_context", ju64(p->token_kv_full_bytes));
    json_object_object_add(tok, "kv_write_bytes", ju64(p->token_kv_write_bytes));
    json_object_object_add(root, "token_traffic", tok);
    json_object_object_add(arena, "exact_for",
                           jstr(sizeof(void *) == 8 ? "64-bit struct sizes (this host); an upper bound for a 32-bit board"
                                                    : "32-bit struct sizes (this host)"));
    json_object_object_add(root, "arena", arena);

    json_object *lut = json_object_new_object();
    json_object_object_add(lut, "buffers", json_object_new_int(2));
    json_object_object_add(lut, "bytes_per_buffer", ju64(p->lut_buffer_bytes));
    if (p->lut_tensor >= 0) {
        const bitnet_plan_tensor *t = &p->tensors[p->lut_tensor];
        json_object *prod = json_object_new_object(), *seed = json_object_new_object();
        json_object_object_add(prod, "tensor", jstr(t->name));
        json_object_object_add(prod, "type", jstr(bitnet_type_name(t->type)));
        json_object_object_add(prod, "M", json_object_new_int64(t->ne[1]));
        json_object_object_add(prod, "K", json_object_new_int64(t->ne[0]));
        json_object_object_add(prod, "columns", json_object_new_int(p->params.n_batch));
        json_object_object_add(lut, "largest_product", prod);
        json_object_object_add(seed, "tl1_bytes", ju64(p->seed_tl1_bytes));
        json_object_object_add(seed, "tl2_bytes", ju64(p->seed_tl2_bytes));
        json_object_object_add(lut, "bitnetcpp_seed_rule", seed);
    } else {
        json_object_object_add(lut, "largest_product", NULL);
        json_object_object_add(lut, "bitnetcpp_seed_rule", NULL);
    }
    json_object_object_add(root, "lut_workspace", lut);

    json_object *totals = json_object_new_object();
    json_object_object_add(totals, "flash_bytes", ju64(p->image_bytes));
    json_object_object_add(totals, "arena_bytes", ju64(p->budget.total));
    json_object_object_add(root, "totals", totals);
    json_object_object_add(root, "one_board", jfit(b, &p->one));

    const bitnet_plan_pieces *pc = &p->pieces;
    json_object *pm = json_object_new_object(), *lf = json_object_new_array(), *lk = json_object_new_array();
    json_object_object_add(pm, "node_flash_bytes", ju64(pc->node_flash));
    json_object_object_add(pm, "node_arena_bytes", ju64(pc->node_arena));
    json_object_object_add(pm, "first_flash_bytes", ju64(pc->first_flash));
    json_object_object_add(pm, "last_flash_bytes", ju64(pc->last_flash));
    json_object_object_add(pm, "shared_flash_bytes", ju64(pc->shared_flash));
    json_object_object_add(pm, "last_arena_bytes", ju64(pc->last_arena));
    for (int32_t l = 0; l < pc->n_layer; l++) {
        json_object_array_add(lf, ju64(pc->layer_flash[l]));
        json_object_array_add(lk, ju64(pc->layer_kv[l]));
    }
    json_object_object_add(pm, "layer_flash_bytes", lf);
    json_object_object_add(pm, "layer_kv_bytes", lk);
    json_object_object_add(root, "partition_model", pm);

    const bitnet_plan_partition *pt = &p->partition;
    json_object *part = json_object_new_object(), *nodes = json_object_new_array();
    json_object_object_add(part, "possible", json_object_new_boolean(pt->possible));
    json_object_object_add(part, "boards", pt->possible ? json_object_new_int(pt->n_boards) : NULL);
    json_object_object_add(part, "reason", jstr(pt->reason));
    json_object_object_add(part, "pieces_too_big", json_object_new_int(pt->possible ? 0 : pt->n_bad_pieces));
    for (int32_t i = 0; i < pt->n_boards; i++) {
        const bitnet_plan_node *nd = &pt->nodes[i];
        json_object *no = json_object_new_object();
        json_object_object_add(no, "board", json_object_new_int(i));
        json_object_object_add(no, "first_layer", json_object_new_int(nd->first_layer));
        json_object_object_add(no, "n_layers", json_object_new_int(nd->n_layers));
        json_object_object_add(no, "token_embd", json_object_new_boolean(nd->has_first));
        json_object_object_add(no, "head", json_object_new_boolean(nd->has_last));
        json_object_object_add(no, "flash_bytes", ju64(nd->fit.flash_bytes));
        json_object_object_add(no, "arena_bytes", ju64(nd->fit.arena_bytes));
        json_object_object_add(no, "weights_memory", jmemname(b, nd->fit.weights_memory));
        json_object_object_add(no, "arena_memory", jmemname(b, nd->fit.arena_memory));
        json_object_array_add(nodes, no);
    }
    json_object_object_add(part, "nodes", nodes);
    json_object_object_add(root, "partition", part);
    return root;
}

bitnet_status bitnet_mcu_plan_write_json(const bitnet_mcu_plan *p, const bitnet_plan_board *b, const char *path,
                                         bitnet_error *err) {
    if (!p || !b || !path) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_mcu_plan_write_json: NULL argument");
    json_object *root = jplan(p, b);
    if (!root) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the JSON of the plan");
    errno = 0;
    const int rc = json_object_to_file_ext(path, root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
    const int e = errno;
    json_object_put(root);
    if (rc != 0) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot write the JSON plan: %s", path, e ? strerror(e) : "write error");
    return BITNET_OK;
}
