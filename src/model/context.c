/* context.c — the context of a model (model.h): activation buffers of one batch, the F16 KV cache,
 * the RoPE tables, per-thread scratch, the two LUT workspaces and the thread pool; and the decode API
 * (bitnet_decode splits the tokens into batches for the forward pass of forward.c, bitnet_get_logits). */
#include "model/model_internal.h"

#include <math.h>
#include <stdlib.h>

#include "base/detmath.h"

/* 64-byte aligned allocation of at least bytes (rounded up to 64; 0 → 64); NULL on failure. */
static void *alloc64(size_t bytes) {
    if (bytes == 0) bytes = 64;
    if (bytes > SIZE_MAX - 63) return NULL;
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

/* a * b * c with overflow check; false on overflow. */
static bool mul3(size_t a, size_t b, size_t c, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    const size_t ab = a * b;
    if (ab != 0 && c > SIZE_MAX / ab) return false;
    *out = ab * c;
    return true;
}

/* RoPE angles as ggml computes them (so they equal bitnet.cpp's): theta_scale =
 * base^(-2/d) rounded to float; for position p the angle of pair i is freq_scale · θ_i with
 * θ_0 = p and θ_{i+1} = θ_i · theta_scale in float (Su et al. 2021, RoFormer, eq. 15). pow, cos and sin
 * are base/detmath.h's double functions rounded to float, so the tables are the same bits with every C
 * library and ISA (for bases 10^4, 5·10^5, 10^6, head sizes 64 and 128 and 32768 positions they equal
 * glibc's cos/sin rounded to float: tests/test_detmath.cc). */
static void rope_tables(const bitnet_hparams *hp, int32_t n_ctx, float *cos_t, float *sin_t) {
    const int32_t half = hp->n_embd_head / 2;
    const float theta_scale = (float)bitnet_pow_d((double)hp->rope_freq_base, (double)(-2.0f / (float)hp->n_embd_head));
    for (int32_t p = 0; p < n_ctx; p++) {
        float theta = (float)p;
        for (int32_t i = 0; i < half; i++) {
            const float angle = hp->rope_scale * theta;
            double s, c;
            bitnet_sincos_d((double)angle, &s, &c);
            cos_t[(size_t)p * half + i] = (float)c;
            sin_t[(size_t)p * half + i] = (float)s;
            theta *= theta_scale;
        }
    }
}

bitnet_status bitnet_context_create(bitnet_model *m, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                    bitnet_context **out, bitnet_error *err) {
    if (!m || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_context_create: NULL model or out");
    *out = NULL;
    if (n_ctx < 1 || n_ctx > MAX_CTX) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_ctx = %d must be in [1, %d]", n_ctx, MAX_CTX);
    }
    if (n_batch < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_batch = %d must be >= 1", n_batch);
    if (n_threads < 1 || n_threads > 1024) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_threads = %d must be in [1, 1024]", n_threads);
    }
    if (n_batch > n_ctx) n_batch = n_ctx;
    const bitnet_hparams *hp = &m->hp;
    bitnet_context *c = calloc(1, sizeof *c);
    if (!c) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the context");
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->n_threads = n_threads;

    bitnet_status st = bitnet_threadpool_create(n_threads, &c->tp, err);
    if (st != BITNET_OK) goto fail;

    const size_t B = (size_t)n_batch, D = (size_t)hp->n_embd, F = (size_t)hp->n_ff, KV = (size_t)m->kv_dim;
    const size_t QD = (size_t)m->q_dim;
    const size_t hd = (size_t)hp->n_embd_head, T = (size_t)n_threads, C = (size_t)n_ctx;
    size_t cache_elems;
    if (!mul3((size_t)hp->n_layer, C, KV, &cache_elems) || cache_elems > SIZE_MAX / 2) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "KV cache of %d layers × %d positions × %zu overflows",
                         hp->n_layer, n_ctx, KV);
        goto fail;
    }
    c->x = malloc(B * D * sizeof(float));
    c->xb = malloc(B * D * sizeof(float));
    c->q = malloc(B * QD * sizeof(float));
    c->k = malloc(B * KV * sizeof(float));
    c->v = malloc(B * KV * sizeof(float));
    c->att = malloc(B * QD * sizeof(float));
    c->proj = malloc(B * D * sizeof(float));
    c->hb = malloc(B * F * sizeof(float));
    c->hb2 = malloc(B * F * sizeof(float));
    c->kcache = calloc(cache_elems, sizeof(uint16_t));
    c->vcache = calloc(cache_elems, sizeof(uint16_t));
    c->rope_cos = malloc(C * (hd / 2) * sizeof(float));
    c->rope_sin = malloc(C * (hd / 2) * sizeof(float));
    c->att_scores = malloc(T * C * sizeof(float));
    c->att_p = malloc(T * C * sizeof(float));
    c->att_q = malloc(T * hd * sizeof(float));
    c->head_act_bytes = m->head_kernel->act_bytes(hp->n_embd);
    c->head_act = malloc(B * c->head_act_bytes);
    c->head_row = malloc(T * D * sizeof(float));
    c->logits_cap = 1;
    c->logits = malloc((size_t)hp->n_vocab * sizeof(float));
    if (!c->x || !c->xb || !c->q || !c->k || !c->v || !c->att || !c->proj || !c->hb || !c->hb2 || !c->kcache ||
        !c->vcache || !c->rope_cos || !c->rope_sin || !c->att_scores || !c->att_p || !c->att_q ||
        !c->head_act || !c->head_row || !c->logits) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a context of %d positions, batch %d", n_ctx,
                         n_batch);
        goto fail;
    }
    memset(c->logits, 0, (size_t)hp->n_vocab * sizeof(float));
    rope_tables(hp, n_ctx, c->rope_cos, c->rope_sin);

    /* LUT workspace: the largest any weight needs for n_batch columns */
    for (int32_t l = 0; l < hp->n_layer; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) continue;
            bitnet_tensor src1 = act_tensor(c->xb, w->K, n_batch), dst = act_tensor(c->q, w->M, n_batch);
            if (!bitnet_can_mul_mat(&w->t, &src1, &dst)) {
                st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "tensor '%s' (M = %lld, K = %lld): the LUT host refuses "
                                 "this product", w->t.name, (long long)w->M, (long long)w->K);
                goto fail;
            }
            const size_t ws = bitnet_mul_mat_get_wsize(&w->t, &src1, &dst);
            if (ws > c->wsize) c->wsize = ws;
        }
    }
    if (c->wsize) {
        c->wdata[0] = alloc64(c->wsize);
        c->wdata[1] = alloc64(c->wsize);
        if (!c->wdata[0] || !c->wdata[1]) {
            st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for two LUT workspaces of %zu bytes", c->wsize);
            goto fail;
        }
    }
    *out = c;
    return BITNET_OK;

fail:
    bitnet_context_free(c);
    return st;
}

void bitnet_context_free(bitnet_context *c) {
    if (!c) return;
    bitnet_threadpool_free(c->tp);
    free(c->x);
    free(c->xb);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->proj);
    free(c->hb);
    free(c->hb2);
    free(c->kcache);
    free(c->vcache);
    free(c->rope_cos);
    free(c->rope_sin);
    free(c->att_scores);
    free(c->att_p);
    free(c->att_q);
    free(c->head_act);
    free(c->head_row);
    free(c->wdata[0]);
    free(c->wdata[1]);
    free(c->logits);
    free(c);
}

int32_t bitnet_context_n_ctx(const bitnet_context *c) { return c->n_ctx; }
int32_t bitnet_context_n_threads(const bitnet_context *c) { return c->n_threads; }

bitnet_status bitnet_decode(bitnet_context *c, const int32_t *tokens, int32_t n_tokens, int32_t n_past,
                            bool all_logits, bitnet_error *err) {
    if (!c) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_decode: NULL context");
    if (n_tokens < 1 || !tokens) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_decode: n_tokens = %d, need at least one token",
                           n_tokens);
    }
    if (n_past < 0 || (int64_t)n_past + n_tokens > c->n_ctx) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "bitnet_decode: n_past (%d) + n_tokens (%d) = %lld exceeds the context size n_ctx (%d)",
                           n_past, n_tokens, (long long)n_past + n_tokens, c->n_ctx);
    }
    const int32_t n_vocab = c->m->hp.n_vocab;
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "bitnet_decode: token id %d at index %d is out of range [0, %d)", tokens[i], i, n_vocab);
        }
    }
    const int32_t rows = all_logits ? n_tokens : 1;
    if (rows > c->logits_cap) {
        float *nl = realloc(c->logits, (size_t)rows * (size_t)n_vocab * sizeof(float));
        if (!nl) {
            return bitnet_fail(err, BITNET_ERR_NOMEM, "bitnet_decode: out of memory for %d × %d logits", rows, n_vocab);
        }
        c->logits = nl;
        c->logits_cap = rows;
    }
    for (int32_t start = 0; start < n_tokens; start += c->n_batch) {
        const int32_t n = n_tokens - start < c->n_batch ? n_tokens - start : c->n_batch;
        const bool last = start + n == n_tokens;
        fwd_job job = {
            .c = c,
            .tokens = tokens + start,
            .n = n,
            .pos0 = n_past + start,
            .out_first = all_logits ? 0 : n - 1,
            .n_out = all_logits ? n : (last ? 1 : 0),
            .logits = c->logits + (all_logits ? (size_t)start * n_vocab : 0),
        };
        bitnet_threadpool_run(c->tp, bitnet_model_forward_task, &job);
    }
    c->n_last = n_tokens;
    c->all_last = all_logits;
    return BITNET_OK;
}

const float *bitnet_get_logits(const bitnet_context *c) {
    if (!c || c->n_last == 0) return NULL;
    return c->logits + (c->all_last ? (size_t)(c->n_last - 1) * c->m->hp.n_vocab : 0);
}

const float *bitnet_get_logits_ith(const bitnet_context *c, int32_t i) {
    if (!c || c->n_last == 0) return NULL;
    if (i < 0) i += c->n_last;
    if (i < 0 || i >= c->n_last) return NULL;
    if (c->all_last) return c->logits + (size_t)i * c->m->hp.n_vocab;
    return i == c->n_last - 1 ? c->logits : NULL;
}
