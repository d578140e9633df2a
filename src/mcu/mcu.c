/* mcu.c — one microcontroller node over an arena (life cycle and contracts in mcu.h): the model is opened
 * with every allocation routed into the arena (base/mem.h), the context sized by the model's own plan
 * (bitnet_context_arena_bytes), then the arena is sealed. */
#include "mcu/mcu.h"

#include <stdio.h>
#include <string.h>

#include "runtime/lut_host.h"

/* The arena is the current one only inside the calls of this file; the caller's allocator is restored. */
typedef struct arena_scope {
    bitnet_arena *prev;
} arena_scope;

static arena_scope enter(bitnet_mcu *rt) { return (arena_scope){bitnet_arena_use(&rt->arena)}; }
static void leave(arena_scope s) { bitnet_arena_use(s.prev); }

bitnet_status bitnet_mcu_open(bitnet_mcu *rt, const void *image, size_t image_bytes, const char *name, void *arena,
                              size_t arena_bytes, bitnet_error *err) {
    return bitnet_mcu_open_layout(rt, image, image_bytes, name, BITNET_I2S_LAYOUT_AUTO, arena, arena_bytes, err);
}

bitnet_status bitnet_mcu_open_layout(bitnet_mcu *rt, const void *image, size_t image_bytes, const char *name,
                                     int i2s_layout, void *arena, size_t arena_bytes, bitnet_error *err) {
    if (!rt) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_mcu_open: NULL node");
    memset(rt, 0, sizeof *rt);
    if (!name) name = "(model image)";
    if (!image || !arena) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: NULL image or arena", name);
    if ((uintptr_t)image % BITNET_WEIGHT_ALIGN != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s: the image starts at %p, not on a %d-byte boundary: its tensors are used in place",
                           name, image, BITNET_WEIGHT_ALIGN);
    }
    snprintf(rt->name, sizeof rt->name, "%s", name);
    bitnet_arena_init(&rt->arena, arena, arena_bytes);
    const bitnet_model_params mp = {BITNET_PATH_STORED, NULL, 0, NULL, true, 0, 0, false, i2s_layout};
    bitnet_error sub;
    sub.msg[0] = '\0';
    const arena_scope s = enter(rt);
    const bitnet_status st = bitnet_model_load_memory(image, image_bytes, name, &mp, &rt->model, &sub);
    leave(s);
    if (st == BITNET_OK) return BITNET_OK;
    rt->model = NULL;
    if (rt->arena.n_refused > 0) {
        return bitnet_fail(err, BITNET_ERR_NOMEM,
                           "%s: an arena of %llu usable bytes is too small to open the model: a request of %llu bytes "
                           "was refused with %llu in use (%s)",
                           name, (unsigned long long)rt->arena.size, (unsigned long long)rt->arena.refused_bytes,
                           (unsigned long long)rt->arena.refused_used, sub.msg);
    }
    return bitnet_fail(err, st, "%s", sub.msg);
}

bitnet_status bitnet_mcu_arena_bytes(const bitnet_mcu *rt, const bitnet_mcu_params *p, bitnet_mcu_budget *out,
                                     bitnet_error *err) {
    if (!rt || !rt->model || !p || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_mcu_arena_bytes: no open node");
    memset(out, 0, sizeof *out);
    out->model = rt->arena.used;
    const bitnet_context_params cp = {p->n_ctx, p->n_batch, 1, p->n_logits, 1, false};
    bitnet_status st = bitnet_context_arena_bytes(rt->model, &cp, rt->arena.used, &out->context, err);
    if (st != BITNET_OK) return st;
    out->total = out->model + out->context.total;
    return BITNET_OK;
}

bitnet_status bitnet_mcu_start(bitnet_mcu *rt, const bitnet_mcu_params *p, bitnet_error *err) {
    if (!rt || !rt->model || !p) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_mcu_start: no open node");
    if (rt->ctx) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_mcu_start: the node is already started");
    bitnet_mcu_budget b;
    bitnet_status st = bitnet_mcu_arena_bytes(rt, p, &b, err);
    if (st != BITNET_OK) return st;
    if (b.total > rt->arena.size) {
        return bitnet_fail(err, BITNET_ERR_NOMEM,
                           "%s: arena of %llu usable bytes is too small: the model takes %llu and a context of n_ctx %d, "
                           "n_batch %d, %d rows of logits needs %llu more (KV cache %llu, LUT workspaces %llu): %llu in all",
                           rt->name, (unsigned long long)rt->arena.size, (unsigned long long)b.model, (int)p->n_ctx,
                           (int)p->n_batch, (int)p->n_logits, (unsigned long long)b.context.total,
                           (unsigned long long)b.context.kv_cache, (unsigned long long)b.context.lut_workspace,
                           (unsigned long long)b.total);
    }
    const bitnet_context_params cp = {p->n_ctx, p->n_batch, 1, p->n_logits, 1, false};
    const arena_scope s = enter(rt);
    st = bitnet_context_create_params(rt->model, &cp, &rt->ctx, err);
    leave(s);
    if (st != BITNET_OK) return st;
    bitnet_arena_seal(&rt->arena);
    rt->params = *p;
    rt->n_past = 0;
    return BITNET_OK;
}

bitnet_status bitnet_mcu_eval(bitnet_mcu *rt, const int32_t *tokens, int32_t n, bool all_logits, bitnet_error *err) {
    if (!rt || !rt->ctx) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_mcu_eval: the node is not started");
    if (all_logits && n > rt->params.n_logits) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "bitnet_mcu_eval: logits of %d positions asked, the node keeps %d rows (n_logits)", (int)n,
                           (int)rt->params.n_logits);
    }
    const arena_scope s = enter(rt); /* sealed: any allocation in decode fails instead of reaching a heap */
    const bitnet_status st = bitnet_decode(rt->ctx, tokens, n, rt->n_past, all_logits, err);
    leave(s);
    if (st != BITNET_OK) return st;
    rt->n_past += n;
    rt->n_last = n;
    rt->last_all = all_logits;
    return BITNET_OK;
}

const float *bitnet_mcu_logits(const bitnet_mcu *rt, int32_t i) {
    if (!rt || !rt->ctx || rt->n_last == 0) return NULL;
    if (i < 0) i += rt->n_last;
    if (i < 0 || i >= rt->n_last) return NULL;
    if (!rt->last_all) return i == rt->n_last - 1 ? bitnet_get_logits(rt->ctx) : NULL;
    return bitnet_get_logits_ith(rt->ctx, i);
}

void bitnet_mcu_close(bitnet_mcu *rt) {
    if (!rt) return;
    const arena_scope s = enter(rt);
    bitnet_context_free(rt->ctx);
    bitnet_model_free(rt->model);
    leave(s);
    rt->ctx = NULL;
    rt->model = NULL;
}
