/* context.c — the context of a model (model.h): activation buffers of one batch, the F16 KV cache,
 * the RoPE tables, per-thread scratch, the two LUT workspaces and the thread pool; and the decode API
 * (bitnet_decode splits the tokens into batches for the forward pass of forward.c, bitnet_get_logits). */
#include "model/model_internal.h"

#include <math.h>

#include "base/detmath.h"
#include "base/mem.h"

/* RoPE angles as ggml computes them (so they equal bitnet.cpp's): theta_scale =
 * base^(-2/d) rounded to float; for position p the angle of pair i is freq_scale · θ_i with
 * θ_0 = p and θ_{i+1} = θ_i · theta_scale in float (Su et al. 2021, RoFormer, eq. 15). pow, cos and sin
 * are base/detmath.h's double functions rounded to float, so the tables are the same bits with every C
 * library and ISA (for bases 10^4, 5·10^5, 10^6, head sizes 64 and 128 and 32768 positions they equal
 * glibc's cos/sin rounded to float: tests/test_detmath.cc). */
static void rope_tables(const bitnet_hparams *hp, float base, int32_t n_ctx, float *cos_t, float *sin_t) {
    const int32_t half = hp->n_embd_head / 2;
    const float theta_scale = (float)bitnet_pow_d((double)base, (double)(-2.0f / (float)hp->n_embd_head));
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

/* The buffers of a context, in allocation order. Each is allocated 64-byte aligned with its size rounded
 * up to 64 (bitnet_context_arena_bytes counts exactly that). */
enum {
    CB_X, CB_XB, CB_Q, CB_K, CB_V, CB_ATT, CB_PROJ, CB_HB, CB_HB2, CB_KCACHE, CB_VCACHE, CB_ROPE_COS,
    CB_ROPE_SIN, CB_ATT_SCORES, CB_ATT_P, CB_ATT_Q, CB_HEAD_ACT, CB_HEAD_ROW, CB_LOGITS, CB_WDATA0, CB_WDATA1,
    /* only for the models that need them (0 bytes, not allocated, otherwise) */
    CB_XN0, CB_XN1, CB_XN2, CB_ROPE_COS_SWA, CB_ROPE_SIN_SWA, CB_ACT16,
    CB_COUNT
};

/* Whether the local layers need RoPE tables of their own (another base than the global layers'). */
static bool swa_tables(const bitnet_hparams *hp) {
    return hp->n_swa > 0 && hp->rope_freq_base_swa != hp->rope_freq_base;
}

static size_t round64(size_t n) { return (n + 63) & ~(size_t)63; }

/* a · b · c with overflow check; false on overflow. */
static bool mul3(size_t a, size_t b, size_t c, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    const size_t ab = a * b;
    if (ab != 0 && c > SIZE_MAX / ab) return false;
    *out = ab * c;
    return true;
}

static bitnet_status check_params(const bitnet_context_params *p, bitnet_error *err) {
    if (p->n_ctx < 1 || p->n_ctx > MAX_CTX) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_ctx = %d must be in [1, %d]", (int)p->n_ctx, MAX_CTX);
    }
    if (p->n_batch < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_batch = %d must be >= 1", (int)p->n_batch);
    if (p->n_threads < 1 || p->n_threads > 1024) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_threads = %d must be in [1, 1024]", (int)p->n_threads);
    }
    if (p->n_logits < 1 || p->n_logits > p->n_ctx) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_logits = %d must be in [1, n_ctx = %d]", (int)p->n_logits,
                           (int)p->n_ctx);
    }
    if (p->n_seq < 0 || p->n_seq > 1024 || (int64_t)(p->n_seq ? p->n_seq : 1) * p->n_ctx > MAX_CTX) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_seq = %d must be in [1, 1024] with n_seq x n_ctx (%d) <= %d",
                           (int)p->n_seq, (int)p->n_ctx, MAX_CTX);
    }
    return BITNET_OK;
}

/* Bytes of every buffer (bytes[CB_*], unrounded) and the LUT workspace size *wsize for model m and the
 * checked params p (n_batch already clamped to n_ctx). Errors: sizes that overflow (BITNET_ERR_NOMEM),
 * a weight the LUT host refuses (BITNET_ERR_UNSUPPORTED). */
static bitnet_status context_plan(const bitnet_model *m, const bitnet_context_params *p, size_t bytes[CB_COUNT],
                                  size_t *wsize, bitnet_error *err) {
    const bitnet_hparams *hp = &m->hp;
    const size_t B = (size_t)p->n_batch, D = (size_t)hp->n_embd, F = (size_t)hp->n_ff, KV = (size_t)m->kv_dim;
    const size_t QD = (size_t)m->q_dim, hd = (size_t)hp->n_embd_head, T = (size_t)p->n_threads, C = (size_t)p->n_ctx;
    /* the largest RoPE angle, rope_scale · (n_ctx - 1) for the first pair, must be one bitnet_sincos_d takes */
    if ((double)hp->rope_scale * (double)(p->n_ctx - 1) >= 0x1p30) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "RoPE angles up to %g (position %d times the linear scale %g, 1 / rope.scaling.factor) are "
                           "beyond the 2^30 the RoPE tables take: a smaller n_ctx or a larger factor",
                           (double)hp->rope_scale * (double)(p->n_ctx - 1), (int)(p->n_ctx - 1), (double)hp->rope_scale);
    }
    const size_t f = sizeof(float), h = sizeof(uint16_t);
    /* the query heads that share a kv head: the attention's scratch holds all of them (forward.c attend) */
    const size_t G = (size_t)(hp->n_head / hp->n_head_kv);
    const size_t CG = C <= SIZE_MAX / G ? C * G : SIZE_MAX, hdG = hd * G; /* SIZE_MAX: refused below */
    /* every size as a product of three factors, checked: a 32-bit core's size_t is reached early */
    const struct {
        int buf;
        size_t a, b, c;
    } dims[] = {
        {CB_X, B, D, f},           {CB_XB, B, D, f},          {CB_Q, B, QD, f},
        {CB_K, B, KV, f},          {CB_V, B, KV, f},          {CB_ATT, B, QD, f},
        {CB_PROJ, B, D, f},        {CB_HB, B, F, f},          {CB_HB2, B, F, f},
        {CB_ROPE_COS, C, hd / 2, f}, {CB_ROPE_SIN, C, hd / 2, f}, {CB_ATT_SCORES, T, CG, f},
        {CB_ATT_P, T, CG, f},      {CB_ATT_Q, T, hdG, f},      {CB_HEAD_ACT, B, m->head_kernel->act_bytes(hp->n_embd), 1},
        {CB_HEAD_ROW, T, D, f},    {CB_LOGITS, (size_t)p->n_logits, p->embeddings ? D : (size_t)hp->n_vocab, f},
        {CB_XN0, m->has_norm_in ? B : 0, D, f}, {CB_XN1, m->has_norm_in ? B : 0, D, f},
        {CB_XN2, m->has_norm_in ? B : 0, D, f}, {CB_ROPE_COS_SWA, swa_tables(hp) ? C : 0, hd / 2, f},
        {CB_ROPE_SIN_SWA, swa_tables(hp) ? C : 0, hd / 2, f},
        {CB_ACT16, m->has_dense_f16 ? B : 0, (size_t)m->max_k, f},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (!mul3(dims[i].a, dims[i].b, dims[i].c, &bytes[dims[i].buf]) || bytes[dims[i].buf] > SIZE_MAX / 2) {
            return bitnet_fail(err, BITNET_ERR_NOMEM,
                               "a context of n_ctx %d, n_batch %d, n_threads %d, %d rows of logits: buffer %d of %d "
                               "overflows the size type (%llu x %llu x %llu)",
                               (int)p->n_ctx, (int)p->n_batch, (int)p->n_threads, (int)p->n_logits, dims[i].buf + 1,
                               (int)CB_COUNT, (unsigned long long)dims[i].a, (unsigned long long)dims[i].b,
                               (unsigned long long)dims[i].c);
        }
    }
    size_t cache_elems;
    if (!mul3((size_t)(m->l_end - m->l_begin), C * (size_t)p->n_seq, KV, &cache_elems) || cache_elems > SIZE_MAX / 4) {
        return bitnet_fail(err, BITNET_ERR_NOMEM, "KV cache of %d layers x %d sequences x %d positions x %llu overflows",
                           (int)(m->l_end - m->l_begin), (int)p->n_seq, (int)p->n_ctx, (unsigned long long)KV);
    }
    bytes[CB_KCACHE] = cache_elems * h;
    bytes[CB_VCACHE] = cache_elems * h;

    /* LUT workspace: the largest any weight needs for n_batch columns */
    *wsize = 0;
    for (int32_t l = m->l_begin; l < m->l_end; l++) {
        for (int pi = 0; pi < N_PROJ; pi++) {
            const weight *w = layer_proj(&m->layers[l], pi);
            if (!w->lut) continue;
            bitnet_tensor src1 = bitnet_act_tensor(NULL, w->K, p->n_batch);
            bitnet_tensor dst = bitnet_act_tensor(NULL, w->M, p->n_batch);
            if (!bitnet_can_mul_mat(&w->t, &src1, &dst)) {
                return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                                   "tensor '%s' (M = %lld, K = %lld): the LUT host refuses this product", w->t.name,
                                   (long long)w->M, (long long)w->K);
            }
            const size_t ws = bitnet_mul_mat_get_wsize(&w->t, &src1, &dst);
            if (ws == 0) {
                return bitnet_fail(err, BITNET_ERR_NOMEM,
                                   "tensor '%s' (M = %lld, K = %lld): the LUT workspace of %d columns overflows the size "
                                   "type",
                                   w->t.name, (long long)w->M, (long long)w->K, (int)p->n_batch);
            }
            if (ws > *wsize) *wsize = ws;
        }
    }
    bytes[CB_WDATA0] = *wsize;
    bytes[CB_WDATA1] = *wsize;
    return BITNET_OK;
}

/* The params with n_batch clamped to n_ctx · n_seq and n_seq 0 as 1. */
static bitnet_context_params clamped(const bitnet_context_params *p) {
    bitnet_context_params q = *p;
    if (q.n_seq == 0) q.n_seq = 1;
    if ((int64_t)q.n_batch > (int64_t)q.n_ctx * q.n_seq) q.n_batch = q.n_ctx * q.n_seq;
    return q;
}

bitnet_status bitnet_context_arena_bytes(const bitnet_model *m, const bitnet_context_params *params, size_t used,
                                         bitnet_context_budget *out, bitnet_error *err) {
    if (!m || !params || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_context_arena_bytes: NULL argument");
    bitnet_status st = check_params(params, err);
    if (st != BITNET_OK) return st;
    const bitnet_context_params p = clamped(params);
    size_t b[CB_COUNT], wsize;
    if ((st = context_plan(m, &p, b, &wsize, err)) != BITNET_OK) return st;
    memset(out, 0, sizeof *out);
    size_t *group[CB_COUNT] = {
        [CB_X] = &out->activations,     [CB_XB] = &out->activations,      [CB_Q] = &out->activations,
        [CB_K] = &out->activations,     [CB_V] = &out->activations,       [CB_ATT] = &out->activations,
        [CB_PROJ] = &out->activations,  [CB_HB] = &out->activations,      [CB_HB2] = &out->activations,
        [CB_KCACHE] = &out->kv_cache,   [CB_VCACHE] = &out->kv_cache,     [CB_ROPE_COS] = &out->rope_tables,
        [CB_ROPE_SIN] = &out->rope_tables, [CB_ATT_SCORES] = &out->attention, [CB_ATT_P] = &out->attention,
        [CB_ATT_Q] = &out->attention,   [CB_HEAD_ACT] = &out->activations, [CB_HEAD_ROW] = &out->attention,
        [CB_LOGITS] = &out->logits,     [CB_WDATA0] = &out->lut_workspace, [CB_WDATA1] = &out->lut_workspace,
        [CB_XN0] = &out->activations,   [CB_XN1] = &out->activations,     [CB_XN2] = &out->activations,
        [CB_ROPE_COS_SWA] = &out->rope_tables, [CB_ROPE_SIN_SWA] = &out->rope_tables,
        [CB_ACT16] = &out->activations,
    };
    size_t at = used + bitnet_arena_cost(used, sizeof(bitnet_context), 8);
    out->other = at - used;
    for (int i = 0; i < CB_COUNT; i++) {
        if (b[i] == 0) continue; /* a buffer this model does not need */
        const size_t n = round64(b[i]);
        if (n < b[i] || at > SIZE_MAX - 64 - n) return bitnet_fail(err, BITNET_ERR_NOMEM, "context size overflows");
        const size_t cost = bitnet_arena_cost(at, n, 64);
        *group[i] += n;
        out->other += cost - n; /* alignment padding */
        at += cost;
    }
    out->total = at - used;
    return BITNET_OK;
}

bitnet_status bitnet_context_create(bitnet_model *m, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                    bitnet_context **out, bitnet_error *err) {
    const bitnet_context_params p = {n_ctx, n_batch, n_threads, 1, 1, false};
    return bitnet_context_create_params(m, &p, out, err);
}

bitnet_status bitnet_context_create_params(bitnet_model *m, const bitnet_context_params *params, bitnet_context **out,
                                           bitnet_error *err) {
    if (!m || !out || !params) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_context_create: NULL model, params or out");
    *out = NULL;
    bitnet_status st = check_params(params, err);
    if (st != BITNET_OK) return st;
    const bitnet_context_params p = clamped(params);
    size_t b[CB_COUNT], wsize;
    if ((st = context_plan(m, &p, b, &wsize, err)) != BITNET_OK) return st;

    bitnet_context *c = bitnet_calloc(1, sizeof *c);
    if (!c) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the context");
    c->m = m;
    c->n_ctx = p.n_ctx;
    c->n_batch = p.n_batch;
    c->n_threads = p.n_threads;
    c->n_seq = p.n_seq;
    c->kv_rows = (size_t)p.n_seq * (size_t)p.n_ctx;
    c->wsize = wsize;
    c->head_act_bytes = m->head_kernel->act_bytes(m->hp.n_embd);
    c->logits_cap = p.n_logits;
    c->embeddings = p.embeddings;
    c->out_width = p.embeddings ? m->hp.n_embd : m->hp.n_vocab;
    void **ptrs[CB_COUNT] = {
        (void **)&c->x, (void **)&c->xb, (void **)&c->q, (void **)&c->k, (void **)&c->v, (void **)&c->att,
        (void **)&c->proj, (void **)&c->hb, (void **)&c->hb2, (void **)&c->kcache, (void **)&c->vcache,
        (void **)&c->rope_cos, (void **)&c->rope_sin, (void **)&c->att_scores, (void **)&c->att_p,
        (void **)&c->att_q, (void **)&c->head_act, (void **)&c->head_row, (void **)&c->logits, &c->wdata[0],
        &c->wdata[1], (void **)&c->xn[0], (void **)&c->xn[1], (void **)&c->xn[2], (void **)&c->rope_cos_swa,
        (void **)&c->rope_sin_swa, (void **)&c->act16,
    };
    /* the KV cache: zeros that cost nothing until a position is written (base/mem.h bitnet_zeroed_alloc) */
    c->kv_bytes = round64(b[CB_KCACHE]);
    for (int i = 0; i < CB_COUNT; i++) {
        if (b[i] == 0) continue; /* not needed by this model: stays NULL */
        if (i == CB_KCACHE || i == CB_VCACHE)
            *ptrs[i] = bitnet_zeroed_alloc(round64(b[i]), &c->kv_mapped[i == CB_VCACHE]);
        else
            *ptrs[i] = bitnet_aligned_alloc(64, round64(b[i]));
        if (!*ptrs[i]) {
            bitnet_context_free(c);
            return bitnet_fail(err, BITNET_ERR_NOMEM,
                               "out of memory for a context of %d positions, batch %d (buffer %d of %d, %llu bytes)",
                               (int)p.n_ctx, (int)p.n_batch, i + 1, (int)CB_COUNT, (unsigned long long)b[i]);
        }
    }
    memset(c->logits, 0, b[CB_LOGITS]);
    rope_tables(&m->hp, m->hp.rope_freq_base, p.n_ctx, c->rope_cos, c->rope_sin);
    if (swa_tables(&m->hp)) {
        rope_tables(&m->hp, m->hp.rope_freq_base_swa, p.n_ctx, c->rope_cos_swa, c->rope_sin_swa);
    } else {
        c->rope_cos_swa = c->rope_cos;
        c->rope_sin_swa = c->rope_sin;
    }

    /* the thread pool last: a platform object outside base/mem.h (runtime/threadpool.h) */
    if ((st = bitnet_threadpool_create(p.n_threads, &c->tp, err)) != BITNET_OK) {
        bitnet_context_free(c);
        return st;
    }
    /* which kernel runs a product of N columns, measured with this pool (runtime/kchoice.h) */
    const bool alone = atomic_fetch_add(&m->n_contexts, 1) == 0;
    c->counted = true;
    if ((st = bitnet_model_choose_kernels(m, c->tp, alone, c->kchoice_note, sizeof c->kchoice_note, err)) != BITNET_OK) {
        bitnet_context_free(c);
        return st;
    }
    *out = c;
    return BITNET_OK;
}

void bitnet_context_free(bitnet_context *c) {
    if (!c) return;
    if (c->counted) atomic_fetch_sub(&c->m->n_contexts, 1);
    bitnet_threadpool_free(c->tp);
    /* in an arena only the most recent block is given back; bitnet_mcu_open starts a node's arena afresh */
    const bool own_swa = c->rope_cos_swa != c->rope_cos;
    void *bufs[CB_COUNT] = {c->x,     c->xb,       c->q,     c->k,     c->v,        c->att,      c->proj,
                            c->hb,    c->hb2,      c->kcache, c->vcache, c->rope_cos, c->rope_sin, c->att_scores,
                            c->att_p, c->att_q,    c->head_act, c->head_row, c->logits, c->wdata[0], c->wdata[1],
                            c->xn[0], c->xn[1],    c->xn[2], own_swa ? c->rope_cos_swa : NULL,
                            own_swa ? c->rope_sin_swa : NULL, c->act16};
    bitnet_free(c->out_row);
    bitnet_free(c->seq_len);
    for (int i = CB_COUNT; i-- > 0;) {
        if (i == CB_KCACHE || i == CB_VCACHE)
            bitnet_zeroed_free(bufs[i], c->kv_bytes, c->kv_mapped[i == CB_VCACHE]);
        else
            bitnet_free(bufs[i]);
    }
    bitnet_free(c);
}

int32_t bitnet_context_n_ctx(const bitnet_context *c) { return c->n_ctx; }
int32_t bitnet_context_n_threads(const bitnet_context *c) { return c->n_threads; }
int32_t bitnet_context_n_seq(const bitnet_context *c) { return c->n_seq; }
const char *bitnet_context_kernel_choice(const bitnet_context *c) { return c->kchoice_note; }

/* The checks every decode call shares: n_tokens, n_past within the context. */
static bitnet_status check_span(const bitnet_context *c, const char *fn, int32_t n_tokens, int32_t n_past,
                                bitnet_error *err) {
    if (n_tokens < 1) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: n_tokens = %d, need at least one token", fn, (int)n_tokens);
    }
    if (n_past < 0 || (int64_t)n_past + n_tokens > c->n_ctx) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s: n_past (%d) + n_tokens (%d) = %lld exceeds the context size n_ctx (%d)", fn, (int)n_past,
                           (int)n_tokens, (long long)n_past + n_tokens, (int)c->n_ctx);
    }
    return BITNET_OK;
}

void bitnet_context_set_link(bitnet_context *c, const bitnet_stage_link *link) {
    if (c) c->link = link;
}

/* Grows the logits to `rows` rows (kept contents are not needed). */
static bitnet_status reserve_logits(bitnet_context *c, int32_t rows, const char *fn, bitnet_error *err) {
    if (rows <= c->logits_cap) return BITNET_OK;
    const int32_t n_vocab = c->out_width;
    float *nl = bitnet_realloc(c->logits, (size_t)rows * (size_t)n_vocab * sizeof(float));
    if (!nl) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for %d × %d logits", fn, (int)rows, (int)n_vocab);
    c->logits = nl;
    c->logits_cap = rows;
    return BITNET_OK;
}

bitnet_status bitnet_decode(bitnet_context *c, const int32_t *tokens, int32_t n_tokens, int32_t n_past,
                            bool all_logits, bitnet_error *err) {
    if (!c) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_decode: NULL context");
    bitnet_status st = check_span(c, "bitnet_decode", tokens ? n_tokens : 0, n_past, err);
    if (st != BITNET_OK) return st;
    const bitnet_model *m = c->m;
    const bool whole = m->l_begin == 0 && m->l_end == m->hp.n_layer;
    if (!m->io || (!whole && !c->link)) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "bitnet_decode: this model is a pipeline stage (layers %d .. %d of %d%s): %s", (int)m->l_begin,
                           (int)m->l_end - 1, (int)m->hp.n_layer, m->io ? ", the embedding and the head" : "",
                           m->io ? "it needs the link to the other stages (bitnet_context_set_link)"
                                 : "its hidden states go through bitnet_decode_hidden");
    }
    const int32_t n_vocab = m->hp.n_vocab;
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "bitnet_decode: token id %d at index %d is out of range [0, %d)", (int)tokens[i], (int)i, (int)n_vocab);
        }
    }
    if ((st = reserve_logits(c, all_logits ? n_tokens : 1, "bitnet_decode", err)) != BITNET_OK) return st;
    c->n_last = 0; /* no logits until the call succeeds */
    c->batch_last = false;
    const bool piped = c->link != NULL;
    /* with a link: every batch embedded, through this stage's layers and sent on (pass 0), then each
     * received back after the last stage and through the head (pass 1); without: one pass does all */
    for (int pass = 0; pass < (piped ? 2 : 1); pass++) {
        for (int32_t start = 0; start < n_tokens; start += c->n_batch) {
            const int32_t n = n_tokens - start < c->n_batch ? n_tokens - start : c->n_batch;
            const bool last = start + n == n_tokens;
            const bool head = !piped || pass == 1;
            fwd_job job = {
                .c = c,
                .tokens = pass == 0 ? tokens + start : NULL,
                .n = n,
                .pos0 = n_past + start,
                .out_first = all_logits ? 0 : n - 1,
                .n_out = !head ? 0 : all_logits ? n : (last ? 1 : 0),
                .logits = c->logits + (all_logits ? (size_t)start * c->out_width : 0),
                .layers = pass == 0,
                .head = head,
            };
            if (pass == 1) {
                if ((st = c->link->recv(c->link->user, c->x, n, n_past + start, err)) != BITNET_OK) return st;
                if (job.n_out == 0) continue; /* a batch without wanted logits: nothing left to compute */
            }
            bitnet_threadpool_run(c->tp, bitnet_model_forward_task, &job);
            if (piped && pass == 0 && (st = c->link->send(c->link->user, c->x, n, n_past + start, err)) != BITNET_OK)
                return st;
        }
    }
    c->n_last = n_tokens;
    c->all_last = all_logits;
    if (c->seq_len) c->seq_len[0] = n_past + n_tokens;
    return BITNET_OK;
}

bitnet_status bitnet_decode_batch(bitnet_context *c, const bitnet_batch *b, bitnet_error *err) {
    static const char fn[] = "bitnet_decode_batch";
    if (!c || !b || !b->token || !b->pos || !b->seq) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: NULL context, batch, token, pos or seq", fn);
    }
    const bitnet_model *m = c->m;
    if (!m->io || m->l_begin != 0 || m->l_end != m->hp.n_layer || c->link) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: needs a whole model without a pipeline link", fn);
    }
    const int32_t n = b->n_tokens;
    if (n < 1 || n > c->n_batch) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: n_tokens = %d must be in [1, n_batch = %d]", fn, (int)n,
                           (int)c->n_batch);
    }
    if (n > c->out_cap) {
        int32_t *nr = bitnet_realloc(c->out_row, (size_t)c->n_batch * sizeof *nr);
        if (!nr) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for the logits map", fn);
        c->out_row = nr;
        c->out_cap = c->n_batch;
    }
    if (!c->seq_len && !(c->seq_len = bitnet_calloc((size_t)c->n_seq, sizeof *c->seq_len))) {
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for the sequence lengths", fn);
    }
    /* checks first (nothing is run on a bad batch); out_row doubles as each sequence's last position */
    const int32_t n_vocab = m->hp.n_vocab;
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        if (b->token[i] < 0 || b->token[i] >= n_vocab) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: token id %d at index %d is out of range [0, %d)", fn,
                               (int)b->token[i], (int)i, (int)n_vocab);
        }
        if (b->pos[i] < 0 || b->pos[i] >= c->n_ctx) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: position %d at index %d is out of range [0, n_ctx = %d)",
                               fn, (int)b->pos[i], (int)i, (int)c->n_ctx);
        }
        if (b->seq[i] < 0 || b->seq[i] >= c->n_seq) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: sequence %d at index %d is out of range [0, n_seq = %d)",
                               fn, (int)b->seq[i], (int)i, (int)c->n_seq);
        }
        int32_t j = i - 1; /* the same sequence's previous token in the batch */
        while (j >= 0 && b->seq[j] != b->seq[i]) j--;
        if (j >= 0 && b->pos[i] != b->pos[j] + 1) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "%s: sequence %d has position %d at index %d after position %d at index %d: a sequence's "
                               "positions in a batch must follow one another",
                               fn, (int)b->seq[i], (int)b->pos[i], (int)i, (int)b->pos[j], (int)j);
        }
        if (j < 0 && b->pos[i] > c->seq_len[b->seq[i]]) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "%s: sequence %d continues at position %d (index %d) but holds positions [0, %d): it would "
                               "attend to positions never evaluated",
                               fn, (int)b->seq[i], (int)b->pos[i], (int)i, (int)c->seq_len[b->seq[i]]);
        }
        if (b->logits ? b->logits[i] : i == n - 1) n_out++;
    }
    bitnet_status st = reserve_logits(c, n_out, fn, err);
    if (st != BITNET_OK) return st;
    int32_t row = 0;
    for (int32_t i = 0; i < n; i++) c->out_row[i] = (b->logits ? b->logits[i] : i == n - 1) ? row++ : -1;
    c->n_last = 0;
    fwd_job job = {
        .c = c,
        .tokens = b->token,
        .n = n,
        .pos = b->pos,
        .seq = b->seq,
        .out_row = c->out_row,
        .n_out = n_out,
        .logits = c->logits,
        .layers = true,
        .head = n_out > 0,
    };
    bitnet_threadpool_run(c->tp, bitnet_model_forward_task, &job);
    for (int32_t i = 0; i < n; i++) c->seq_len[b->seq[i]] = b->pos[i] + 1; /* a sequence's last token comes last */
    c->n_last = n;
    c->all_last = false;
    c->batch_last = true;
    return BITNET_OK;
}

bitnet_status bitnet_decode_hidden(bitnet_context *c, float *x, int32_t n_tokens, int32_t n_past, bitnet_error *err) {
    if (!c || !x) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_decode_hidden: NULL context or x");
    bitnet_status st = check_span(c, "bitnet_decode_hidden", n_tokens, n_past, err);
    if (st != BITNET_OK) return st;
    if (c->m->io) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "bitnet_decode_hidden: this model holds the embedding (stage 0): use bitnet_decode");
    }
    const size_t D = (size_t)c->m->hp.n_embd;
    for (int32_t start = 0; start < n_tokens; start += c->n_batch) {
        const int32_t n = n_tokens - start < c->n_batch ? n_tokens - start : c->n_batch;
        memcpy(c->x, x + (size_t)start * D, (size_t)n * D * sizeof(float));
        fwd_job job = {.c = c, .tokens = NULL, .n = n, .pos0 = n_past + start, .layers = true, .head = false};
        bitnet_threadpool_run(c->tp, bitnet_model_forward_task, &job);
        memcpy(x + (size_t)start * D, c->x, (size_t)n * D * sizeof(float));
    }
    return BITNET_OK;
}

const float *bitnet_get_logits(const bitnet_context *c) {
    if (!c || c->n_last == 0 || c->embeddings) return NULL;
    if (c->batch_last) return bitnet_get_logits_ith(c, -1);
    return c->logits + (c->all_last ? (size_t)(c->n_last - 1) * c->m->hp.n_vocab : 0);
}

/* Row i of the last call's output rows (logits or embeddings, c->out_width floats each), or NULL. */
static const float *out_row_ith(const bitnet_context *c, int32_t i) {
    if (!c || c->n_last == 0) return NULL;
    if (i < 0) i += c->n_last;
    if (i < 0 || i >= c->n_last) return NULL;
    if (c->batch_last) return c->out_row[i] < 0 ? NULL : c->logits + (size_t)c->out_row[i] * c->out_width;
    if (c->all_last) return c->logits + (size_t)i * c->out_width;
    return i == c->n_last - 1 ? c->logits : NULL;
}

const float *bitnet_get_logits_ith(const bitnet_context *c, int32_t i) {
    return c && !c->embeddings ? out_row_ith(c, i) : NULL;
}

const float *bitnet_get_embeddings_ith(const bitnet_context *c, int32_t i) {
    return c && c->embeddings ? out_row_ith(c, i) : NULL;
}
