/* forward.c — the forward pass of one batch of tokens (one thread-pool task, barriers between the
 * steps), llama2.c style: the math from top to bottom, each buffer with its shape. Token embeddings,
 * RMSNorm, the projections (LUT host or dense float), RoPE, the F16 KV cache and causal attention, the
 * FFN (SiLU or squared ReLU) and the output head.
 *
 * Determinism: every float reduction has a fixed order that does not depend on the thread count, the
 * batch split, the ISA or the C library (no FMA contraction: the build uses -ffp-contract=off; the F16
 * dots fuse only products of two binary16 values, which are exact in binary32 (kernels/dense); e^x is
 * bitnet_expf of base/detmath.h, the same bits on every platform; sqrtf is correctly rounded by
 * IEEE-754 everywhere). Every output element is written by exactly one thread. */
#include "model/model_internal.h"

#include <math.h>

#include "base/detmath.h"
#include "kernels/act/act.h"

/* RMSNorm (Zhang & Sennrich 2019), as ggml computes it: mean of squares summed in double (rms_scale:
 * eight partial sums in a fixed order), then float: y[i] = (x[i] · 1/sqrtf(mean + eps)) · w[i].
 * x, y, w: [n]; y may alias x. */
static float rms_scale(const float *x, int64_t n, float eps) {
    /* eight double partial sums (lane i % 8, in index order), folded ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)):
     * eight independent chains instead of one; the double sum differs from a single chain's by a few
     * units of 2^-52, which reaches the float mean only when it lies that close to a rounding boundary */
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int l = 0; l < 8; l++) s[l] += (double)(x[i + l] * x[i + l]);
    }
    for (; i < n; i++) s[i % 8] += (double)(x[i] * x[i]);
    const double sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    const float mean = (float)(sum / (double)n);
    return 1.0f / sqrtf(mean + eps);
}

static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    const float scale = rms_scale(x, n, eps);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* Squared ReLU (So et al. 2021, "Primer"; BitNet b1.58 2B4T's "relu2"), as ggml's relu then sqr:
 * r = x > 0 ? x : 0, then r · r (NaN → 0). */
static inline float relu2(float x) {
    const float r = x > 0.0f ? x : 0.0f;
    return r * r;
}

static inline void sync_threads(bitnet_context *c) { bitnet_threadpool_barrier(c->tp); }

/* y = W·x for n tokens: x (n, K) → y (n, M), then the optional output scale, using LUT workspace
 * c->wdata[ws]. With sync (or a dense weight, or an output scale) it ends with a barrier, so y is
 * complete on return. Without it, y is complete only after the next barrier; that is allowed when
 * the next step is another LUT product on the other workspace that neither reads y nor writes
 * x (see "Barriers" above forward_task). */
static void matmul(bitnet_context *c, const weight *w, float *x, float *y, int64_t n, int ith, int nth, int ws,
                   bool sync) {
    if (w->lut) {
        bitnet_tensor src1 = bitnet_act_tensor(x, w->K, n), dst = bitnet_act_tensor(y, w->M, n);
        bitnet_mul_mat(&w->t, &src1, &dst, c->wdata[ws], c->wsize, ith, nth, c->tp);
    } else if (w->dense_f16) {
        /* F16 rows as stored times the inputs rounded to binary16 (ggml's F16 product converts its float
         * operand to F16 first): each thread rounds its tokens, then multiplies its rows by every token
         * (kernels/dense bitnet_dense_mul_f16: each weight row read once per call) */
        int64_t t0, t1, r0, r1;
        bitnet_split_range(n, ith, nth, &t0, &t1);
        for (int64_t t = t0; t < t1; t++) bitnet_dense_round_f16_row(x + t * w->K, 1.0f, c->act16 + t * w->K, w->K);
        sync_threads(c);
        bitnet_split_range(w->M, ith, nth, &r0, &r1);
        bitnet_dense_mul_f16(w->dense_f16 + r0 * w->K, (size_t)w->K, r1 - r0, c->act16, (size_t)w->K, n, w->K,
                             y + r0, (size_t)w->M);
    } else {
        int64_t r0, r1;
        bitnet_split_range(w->M, ith, nth, &r0, &r1);
        for (int64_t t = 0; t < n; t++) {
            for (int64_t r = r0; r < r1; r++)
                y[t * w->M + r] = bitnet_dense_dot_f32(w->dense + r * w->K, x + t * w->K, w->K);
        }
    }
    if (sync || !w->lut || w->has_scale) sync_threads(c);
    if (w->has_scale) {
        int64_t t0, t1;
        bitnet_split_range(n, ith, nth, &t0, &t1);
        for (int64_t i = t0 * w->M; i < t1 * w->M; i++) y[i] *= w->out_scale;
        sync_threads(c);
    }
}

/* Rotate one head v (d) by the angles of its pairs (model.h "RoPE"): NEOX style pair i is
 * (i, i + d/2), NORM style pair i is (2i, 2i + 1); pair i turns by the angle in cos_p[i], sin_p[i]. */
static void rope_head(float *v, const float *cos_p, const float *sin_p, int32_t d, bitnet_rope_type type) {
    const int32_t half = d / 2;
    const int32_t stride = type == BITNET_ROPE_NORM ? 2 : 1; /* index of x0 = stride·i */
    const int32_t off = type == BITNET_ROPE_NORM ? 1 : half; /* x1 = x0 + off */
    for (int32_t i = 0; i < half; i++) {
        float *p0 = v + stride * i, *p1 = p0 + off;
        const float x0 = *p0, x1 = *p1;
        *p0 = x0 * cos_p[i] - x1 * sin_p[i];
        *p1 = x0 * sin_p[i] + x1 * cos_p[i];
    }
}

/* Token t's position and the cache row of position 0 of its sequence (fwd_job: pos0 + t and sequence 0
 * unless the job lists them per token). */
static inline int64_t tok_pos(const fwd_job *J, int64_t t) { return J->pos ? J->pos[t] : J->pos0 + t; }
static inline size_t tok_row0(const bitnet_context *c, const fwd_job *J, int64_t t) {
    return J->seq ? (size_t)J->seq[t] * (size_t)c->n_ctx : 0;
}

/* Positions of keys that every query head of a group multiplies while they are in L1 (128 × a 128-value head:
 * 32 KiB), and channels of values per pass (32 channels of every position: 64 bytes a row). */
enum { ATT_KEY_BLOCK = 128, ATT_VALUE_SLICE = 32 };

/* Causal attention of the gn query heads h0 .. h0 + gn - 1, which share one kv head (GQA: gn <= n_head /
 * n_head_kv), for the token at position pos of the sequence whose position 0 is cache row row0, in layer l:
 * for each head, out (d) = Σ_j softmax_j(q·k_j / √d) · v_j over j = 0..pos, rounding like ggml's CPU path:
 * q to F16 before q·k_j, the probabilities to F16 before the product with V. q and out: head h0's d values,
 * the next heads' at + d each. Every head's floats are those of attending it alone: a score is one row's dot
 * (bitnet_dense_dot_f16_rows gives each row its single dot), an output channel one column's dot
 * (bitnet_dense_dot_f16_columns, channels independent); the heads only take turns over blocks of keys and
 * slices of value channels, so the shared cache rows come from memory once per group rather than once per
 * head (at a depth of thousands of positions a kv head's keys and values outgrow L2). */
static void attend(bitnet_context *c, int32_t l, size_t row0, int32_t pos, int32_t h0, int32_t gn, const float *q,
                   float *out, int ith) {
    const bitnet_model *m = c->m;
    const int32_t d = m->hp.n_embd_head;
    const int32_t group = m->hp.n_head / m->hp.n_head_kv;
    const int32_t kvh = h0 / group;                           /* GQA: heads share kv head h / group */
    const float kq_scale = m->hp.kq_scale;                    /* 1/sqrt(d), or 1 when q carries it (Gemma3) */
    /* a sliding-window layer sees positions pos - n_swa + 1 .. pos (llama.cpp's standard SWA mask) */
    const int32_t j0 = bitnet_layer_is_swa(&m->hp, l) && pos >= m->hp.n_swa ? pos - m->hp.n_swa + 1 : 0;
    const int64_t nj = (int64_t)pos + 1 - j0;
    /* head i's scratch: scores and probabilities (nj), its query rounded to F16 (d) */
    float *const score = c->att_scores + (size_t)ith * (size_t)group * c->n_ctx;
    float *const p16 = c->att_p + (size_t)ith * (size_t)group * c->n_ctx;
    float *const q16 = c->att_q + (size_t)ith * (size_t)group * (size_t)d;
    const size_t lc = (size_t)(l - m->l_begin); /* the cache holds this stage's layers */
    const size_t at = ((lc * (size_t)m->hp.n_head_kv + (size_t)kvh) * c->kv_rows + row0 + (size_t)j0) * (size_t)d;
    const uint16_t *kc = c->kcache + at, *vc = c->vcache + at; /* position j0 + j at j·d */

    for (int32_t i = 0; i < gn; i++) /* ggml: q scaled in float, rounded to F16 for K·q */
        bitnet_dense_round_f16_row(q + (size_t)i * d, m->hp.q_scale, q16 + (size_t)i * d, d);
    for (int64_t b0 = 0; b0 < nj; b0 += ATT_KEY_BLOCK) {
        const int64_t nb = nj - b0 < ATT_KEY_BLOCK ? nj - b0 : ATT_KEY_BLOCK;
        for (int32_t i = 0; i < gn; i++)
            bitnet_dense_dot_f16_rows(kc + (size_t)b0 * d, (size_t)d, q16 + (size_t)i * d, d, nb,
                                      score + (size_t)i * c->n_ctx + b0);
    }
    for (int32_t i = 0; i < gn; i++) {
        float *si = score + (size_t)i * c->n_ctx;
        float max = -INFINITY;
        for (int64_t j = 0; j < nj; j++) {
            si[j] *= kq_scale;
            if (si[j] > max) max = si[j];
        }
        bitnet_act_exp_sub(si, max, nj); /* e^(score - max), the same floats on every ISA */
        double sum = 0.0;
        for (int64_t j = 0; j < nj; j++) sum += (double)si[j];
        const float inv = (float)(1.0 / sum);
        bitnet_dense_round_f16_row(si, inv, p16 + (size_t)i * c->n_ctx, nj);
    }
    for (int32_t c0 = 0; c0 < d; c0 += ATT_VALUE_SLICE) {
        const int32_t nc = d - c0 < ATT_VALUE_SLICE ? d - c0 : ATT_VALUE_SLICE;
        for (int32_t i = 0; i < gn; i++)
            bitnet_dense_dot_f16_columns(vc + c0, (size_t)d, p16 + (size_t)i * c->n_ctx, nj, nc,
                                         out + (size_t)i * d + c0);
    }
}

/* The RoPE tables of layer l: the local layers' base for a sliding-window layer (gemma3), else the model's. */
static inline const float *rope_cos_l(const bitnet_context *c, int32_t l) {
    return bitnet_layer_is_swa(&c->m->hp, l) ? c->rope_cos_swa : c->rope_cos;
}
static inline const float *rope_sin_l(const bitnet_context *c, int32_t l) {
    return bitnet_layer_is_swa(&c->m->hp, l) ? c->rope_sin_swa : c->rope_sin;
}

/* Per-head RMSNorm of q or k before RoPE (qwen3, gemma3: attn_q_norm / attn_k_norm over the head size). */
static inline void head_norm(const bitnet_context *c, float *v, const float *w) {
    if (w) rmsnorm(v, v, w, c->m->hp.n_embd_head, c->m->hp.rms_eps);
}

/* The inputs of projections p0 .. p0+n-1 (layer_proj order) for token t: xn[i] = rmsnorm(src[t]) · norm_in
 * of projection p0 + i, for those that have one (docs/EMBEDDINGS.md §2); the others read src itself. */
static void proj_inputs(bitnet_context *c, const layer *L, int p0, int n, const float *src, int64_t t) {
    const int64_t D = c->m->hp.n_embd;
    const float *x = src + t * D;
    float scale = 0.0f; /* the same input: one RMS for all of them (the floats rmsnorm gives each) */
    bool have = false;
    for (int i = 0; i < n; i++) {
        const float *w = L->norm_in[p0 + i];
        if (!w) continue;
        if (!have) scale = rms_scale(x, D, c->m->hp.rms_eps), have = true;
        float *y = c->xn[i] + t * D;
        for (int64_t k = 0; k < D; k++) y[k] = (x[k] * scale) * w[k];
    }
}

/* What projection p of layer L reads: its normed copy xn[slot] when it has a norm_in, else src. */
static inline float *proj_src(const bitnet_context *c, const layer *L, int p, int slot, float *src) {
    return L->norm_in[p] ? c->xn[slot] : src;
}

/* GELU with ggml's CPU rounding (its GGML_GELU_FP16 table): x <= -10 → 0, x >= 10 → x, else the F16
 * rounding of gelu(x rounded to F16) (model m's table, filled at load), x16 being x's binary16 code. */
static inline float gelu_ggml(const bitnet_model *m, float x, uint16_t x16) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return m->gelu_f16[x16]; /* x16: bitnet_fp32_to_fp16(x) */
}

/* RoPE and the F16 cache store of kv head g for tokens t0..t1-1 of the batch: k head g rotated in
 * place and stored with v head g at each token's position of its sequence in layer l. */
static void rope_store_kv(bitnet_context *c, const fwd_job *J, int32_t l, int64_t g, int64_t t0, int64_t t1) {
    const bitnet_model *m = c->m;
    const int64_t KV = m->kv_dim, hd = m->hp.n_embd_head, half = hd / 2;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t pos = tok_pos(J, t);
        const size_t row = tok_row0(c, J, t) + (size_t)pos;
        float *k = c->k + t * KV + g * hd;
        const float *v = c->v + t * KV + g * hd;
        head_norm(c, k, m->layers[l].attn_k_norm);
        rope_head(k, rope_cos_l(c, l) + pos * half, rope_sin_l(c, l) + pos * half, (int32_t)hd, m->hp.rope_type);
        const size_t lc = (size_t)(l - m->l_begin); /* the cache holds this stage's layers */
        const size_t at = ((lc * (size_t)m->hp.n_head_kv + (size_t)g) * c->kv_rows + row) * (size_t)hd;
        uint16_t *kc = c->kcache + at, *vc = c->vcache + at; /* (hd) */
        bitnet_dense_to_f16(k, 1.0f, kc, 1, hd);
        bitnet_dense_to_f16(v, 1.0f, vc, 1, hd);
    }
}

/* logits = head · xb for the batch's output tokens: vocabulary rows split among threads, each thread's
 * rows multiplied by every token's prepared head input in one call of the head's dense kernel
 * (bitnet_dense_kernel.mul: each row read from memory once for all tokens, each logit the float the
 * single-token dot gives); when m->head_decode, row by row after converting it to float.
 *                                                                         logits (n_out, n_vocab) */
static void head_logits(bitnet_context *c, const fwd_job *J, int ith, int nth) {
    const bitnet_model *m = c->m;
    const bitnet_hparams *hp = &m->hp;
    const int64_t D = hp->n_embd;
    int64_t r0, r1;
    bitnet_split_range(hp->n_vocab, ith, nth, &r0, &r1);
    if (!m->head_decode) {
        m->head_kernel->mul(m->head_data + (size_t)r0 * m->head_row_bytes, m->head_row_bytes, r1 - r0, c->head_act,
                            c->head_act_bytes, J->n_out, D, J->logits + r0, (size_t)hp->n_vocab);
    } else {
        float *row_f32 = c->head_row + (size_t)ith * D; /* the row as float */
        for (int64_t r = r0; r < r1; r++) {
            bitnet_row_to_f32(m->head_type, m->head_data + (size_t)r * m->head_row_bytes, row_f32, D, NULL);
            m->head_kernel->mul(row_f32, 0, 1, c->head_act, c->head_act_bytes, J->n_out, D, J->logits + r,
                                (size_t)hp->n_vocab);
        }
    }
    /* Gemma's final logit soft-capping: l = c · tanh(l / c), tanh in double through detmath's exp */
    if (hp->logit_softcap > 0.0f) {
        const double cap = (double)hp->logit_softcap;
        for (int64_t j = 0; j < J->n_out; j++) {
            float *l = J->logits + (size_t)j * (size_t)hp->n_vocab;
            for (int64_t r = r0; r < r1; r++) {
                const double y = (double)l[r] / cap, e = bitnet_exp_d(2.0 * fabs(y));
                const double th = isinf(e) ? 1.0 : 1.0 - 2.0 / (e + 1.0);
                l[r] = (float)(cap * (y < 0 ? -th : th));
            }
        }
    }
}

/* After the last layer: token t's final norm, xb[j] = rmsnorm(x[t]) · output_norm for output row j
 * (J->out_row[t], or t - out_first; tokens without one are skipped), in the head's input format (F16
 * head: rounded to F16; Q8_0 head: Q8_0 blocks). */
static void final_norm(bitnet_context *c, const fwd_job *J, int64_t t) {
    const bitnet_model *m = c->m;
    const int64_t D = m->hp.n_embd;
    const int64_t j = J->out_row ? J->out_row[t] : t - J->out_first;
    if (j < 0 || j >= J->n_out) return;
    if (c->embeddings) { /* the embedding itself is the output row */
        rmsnorm(J->logits + j * D, c->x + t * D, m->output_norm, D, m->hp.rms_eps);
        return;
    }
    float *xo = c->xb + j * D;
    rmsnorm(xo, c->x + t * D, m->output_norm, D, m->hp.rms_eps);
    m->head_kernel->prepare(xo, c->head_act + (size_t)j * c->head_act_bytes, D);
}

/* Barriers. Every step reads only what earlier steps finished before a barrier, and every output
 * element is written by one thread with the arithmetic it always had, so removing a barrier never
 * changes a float. Per layer (the bitnet graphs; 16 barriers, 21 before issue #4):
 *  - the attention norm of layer l + 1 is computed right after layer l's residual by the thread
 *    that owns that token (same for the final norm after the last layer), so it needs no barrier
 *    of its own;
 *  - q, k, v (and gate, up) read the same input and write different outputs, so they run back to
 *    back without a barrier in between, alternating the two LUT workspaces: bitnet_mul_mat's own
 *    barrier (between building a product's LUTs and using them) guarantees that every thread has
 *    finished the product before last, whose workspace thread 0 overwrites next;
 *  - RoPE, the cache store and attention run per kv head: the thread that owns kv head g rotates
 *    and stores its keys and values for the batch, then attends with every query head of its group
 *    (it only reads cache rows of head g: earlier calls' rows or the ones it just wrote).
 * The remaining barriers separate a product from the step that reads its output. */
void bitnet_model_forward_task(void *arg, int ith, int nth) {
    const fwd_job *J = arg;
    bitnet_context *c = J->c;
    const bitnet_model *m = c->m;
    const bitnet_hparams *hp = &m->hp;
    const int64_t n = J->n, D = hp->n_embd, F = hp->n_ff, QD = m->q_dim, hd = hp->n_embd_head;
    const int64_t half = hd / 2, group = hp->n_head / hp->n_head_kv;
    int64_t t0, t1; /* this thread's tokens for per-token steps */
    bitnet_split_range(n, ith, nth, &t0, &t1);
    /* attention split by kv head (no RoPE barrier) unless that leaves threads idle */
    const bool attn_by_kv_head = hp->n_head_kv % nth == 0 || hp->n_head_kv >= 4 * nth;

    /* token embeddings: x[t] = token_embd row tokens[t] (or x as a pipeline stage received it); the
     * attention norm of the stage's first layer, or with no layers to run the final norm   x, xb (n, D) */
    const int32_t l_first = J->layers ? m->l_begin : 0, l_end = J->layers ? m->l_end : 0;
    for (int64_t t = t0; t < t1; t++) {
        if (J->tokens) {
            const uint8_t *row = (const uint8_t *)m->embd->data + (size_t)J->tokens[t] * m->embd_row_bytes;
            bitnet_row_to_f32(m->embd->type, row, c->x + t * D, D, NULL); /* type checked at load */
            if (hp->embd_scale) { /* Gemma: x · sqrt(n_embd), as ggml_scale by sqrtf(n_embd) */
                const float sc = sqrtf((float)D);
                for (int64_t i = 0; i < D; i++) c->x[t * D + i] *= sc;
            }
        }
        if (l_end > l_first) {
            rmsnorm(c->xb + t * D, c->x + t * D, m->layers[l_first].attn_norm, D, hp->rms_eps);
            if (m->has_norm_in) proj_inputs(c, &m->layers[l_first], 0, 3, c->xb, t);
        } else if (J->head) {
            final_norm(c, J, t);
        }
    }
    sync_threads(c);

    for (int32_t l = l_first; l < l_end; l++) {
        const layer *L = &m->layers[l];

        /* projections of xb = rmsnorm(x) · attn_norm: q = Wq·xb (n, QD), k = Wk·xb (n, KV), v = Wv·xb (n, KV) */
        matmul(c, &L->wq, proj_src(c, L, 0, 0, c->xb), c->q, n, ith, nth, 0, false);
        matmul(c, &L->wk, proj_src(c, L, 1, 1, c->xb), c->k, n, ith, nth, 1, false);
        matmul(c, &L->wv, proj_src(c, L, 2, 2, c->xb), c->v, n, ith, nth, 0, true);
        const float *rcos = rope_cos_l(c, l), *rsin = rope_sin_l(c, l);

        /* RoPE on every head of q and k; k and v into the F16 cache of the token's sequence at its
         * position p; attention per (token, head) over that sequence's positions 0..p       att (n, QD) */
        if (attn_by_kv_head) {
            int64_t g0, g1;
            bitnet_split_range(hp->n_head_kv, ith, nth, &g0, &g1);
            for (int64_t g = g0; g < g1; g++) {
                rope_store_kv(c, J, l, g, 0, n);
                for (int64_t t = 0; t < n; t++) {
                    const int64_t pos = tok_pos(J, t);
                    for (int64_t h = g * group; h < (g + 1) * group; h++) {
                        float *q = c->q + t * QD + h * hd;
                        head_norm(c, q, L->attn_q_norm);
                        rope_head(q, rcos + pos * half, rsin + pos * half, (int32_t)hd, hp->rope_type);
                    }
                    attend(c, l, tok_row0(c, J, t), (int32_t)pos, (int32_t)(g * group), (int32_t)group,
                           c->q + t * QD + g * group * hd, c->att + t * QD + g * group * hd, ith);
                }
            }
        } else {
            for (int64_t t = t0; t < t1; t++) {
                const int64_t pos = tok_pos(J, t);
                const float *cs = rcos + pos * half, *sn = rsin + pos * half;
                for (int32_t h = 0; h < hp->n_head; h++) {
                    head_norm(c, c->q + t * QD + h * hd, L->attn_q_norm);
                    rope_head(c->q + t * QD + h * hd, cs, sn, (int32_t)hd, hp->rope_type);
                }
                for (int32_t g = 0; g < hp->n_head_kv; g++) rope_store_kv(c, J, l, g, t, t + 1);
            }
            sync_threads(c);
            /* units of (token, kv head, part of its query heads), the heads of a part attended together
             * (attend): the fewest parts (a divisor of the group) that give every thread 4 units or more */
            int64_t parts = 1;
            while (parts < group && (group % parts != 0 || n * hp->n_head_kv * parts < 4 * nth)) parts++;
            const int64_t per_part = group / parts, units_t = hp->n_head_kv * parts;
            int64_t a0, a1;
            bitnet_split_range(n * units_t, ith, nth, &a0, &a1);
            for (int64_t a = a0; a < a1; a++) {
                const int64_t t = a / units_t, h = a % units_t * per_part;
                attend(c, l, tok_row0(c, J, t), (int32_t)tok_pos(J, t), (int32_t)h, (int32_t)per_part,
                       c->q + t * QD + h * hd, c->att + t * QD + h * hd, ith);
            }
        }
        sync_threads(c);

        /* bitnet graphs: att = rmsnorm(att) · attn_sub_norm; output projection proj = Wo·att     proj (n, D) */
        /* embedding models: att = rmsnorm(att) · attn_output_norm_in (the same place as a sub-norm) */
        const float *att_norm = hp->sub_norms ? L->attn_sub_norm : L->norm_in[3];
        if (att_norm) {
            for (int64_t t = t0; t < t1; t++) rmsnorm(c->att + t * QD, c->att + t * QD, att_norm, QD, hp->rms_eps);
            sync_threads(c);
        }
        matmul(c, &L->wo, c->att, c->proj, n, ith, nth, 1, true);

        /* residual, FFN norm: (gemma3: proj = rmsnorm(proj) · post_attention_norm) x += proj;
         * xb = rmsnorm(x) · ffn_norm, and the gate/up inputs of their norm_in      xb (n, D) */
        for (int64_t t = t0; t < t1; t++) {
            if (L->post_attn_norm) rmsnorm(c->proj + t * D, c->proj + t * D, L->post_attn_norm, D, hp->rms_eps);
            for (int64_t i = 0; i < D; i++) c->x[t * D + i] += c->proj[t * D + i];
            rmsnorm(c->xb + t * D, c->x + t * D, L->ffn_norm, D, hp->rms_eps);
            if (m->has_norm_in) proj_inputs(c, L, 4, 2, c->xb, t);
        }
        sync_threads(c);

        /* FFN: hb = Wgate·xb, hb2 = Wup·xb                                 hb, hb2 (n, F) */
        matmul(c, &L->w_gate, proj_src(c, L, 4, 0, c->xb), c->hb, n, ith, nth, 0, false);
        matmul(c, &L->w_up, proj_src(c, L, 5, 1, c->xb), c->hb2, n, ith, nth, 1, true);

        /* hb = act(hb) ⊙ hb2 (act: silu, or relu² for bitnet-b1.58); bitnet graphs then
         * hb = rmsnorm(hb) · ffn_sub_norm                                          hb (n, F) */
        for (int64_t t = t0; t < t1; t++) {
            float *g = c->hb + t * F;
            const float *u = c->hb2 + t * F;
            if (hp->ffn_act == BITNET_ACT_RELU2) {
                for (int64_t i = 0; i < F; i++) g[i] = relu2(g[i]) * u[i];
            } else if (hp->ffn_act == BITNET_ACT_GELU) {
                uint16_t h[64]; /* the binary16 codes of 64 gate values at a time (F16C on x86) */
                for (int64_t i0 = 0; i0 < F; i0 += 64) {
                    const int64_t len = F - i0 < 64 ? F - i0 : 64;
                    bitnet_dense_to_f16(g + i0, 1.0f, h, 1, len);
                    for (int64_t i = 0; i < len; i++) g[i0 + i] = gelu_ggml(m, g[i0 + i], h[i]) * u[i0 + i];
                }
            } else {
                bitnet_act_silu_mul(g, u, F); /* silu(g) ⊙ u (kernels/act: SiLU, Elfwing et al. 2018) */
            }
            const float *down_norm = hp->sub_norms ? L->ffn_sub_norm : L->norm_in[6];
            if (down_norm) rmsnorm(g, g, down_norm, F, hp->rms_eps);
        }
        sync_threads(c);

        /* down projection and residual: x += Wdown·hb                             x (n, D)
         * then the next layer's attention norm xb = rmsnorm(x) · attn_norm, or after the last layer
         * the final norm of the tokens whose logits are wanted, xb[j] = rmsnorm(x[out_first+j]) ·
         * output_norm, in the head's input format (F16 head: rounded to F16; Q8_0 head: Q8_0) */
        matmul(c, &L->w_down, c->hb, c->proj, n, ith, nth, 0, true);
        const bool last = l + 1 == l_end;
        for (int64_t t = t0; t < t1; t++) {
            if (L->post_ffw_norm) rmsnorm(c->proj + t * D, c->proj + t * D, L->post_ffw_norm, D, hp->rms_eps);
            for (int64_t i = 0; i < D; i++) c->x[t * D + i] += c->proj[t * D + i];
            if (!last) {
                rmsnorm(c->xb + t * D, c->x + t * D, m->layers[l + 1].attn_norm, D, hp->rms_eps);
                if (m->has_norm_in) proj_inputs(c, &m->layers[l + 1], 0, 3, c->xb, t);
            } else if (J->head) {
                final_norm(c, J, t);
            }
        }
        sync_threads(c);
    }

    if (J->head && !c->embeddings) head_logits(c, J, ith, nth);
}
