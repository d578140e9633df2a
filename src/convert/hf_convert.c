/* hf_convert.c — HF checkpoint → BitNet GGUF (hf_convert.h): the tensor plan (HF names → GGUF names,
 * shapes, output types, tiles), ternary decoding of the four weight kinds, and the streaming write.
 * config.json is read by hf_config.c. */
#include "convert/hf_convert.h"

#include "base/arch.h"
#include "base/gguf.h"
#include "convert/hf_tokenizer.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#include "convert/safetensors.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define DEFAULT_CHUNK_BYTES ((size_t)8 << 20)

/* =============================================================================================
 * Ternary decoding
 * =========================================================================================== */

static double abs_sum(const float *W, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float a = fabsf(W[i]);
        if (a == a) sum += a; /* NaN counts as 0 */
    }
    return sum;
}

/* w = clamp(round_half_even(W·s), -1, 1); true when some w != 0. */
static bool round_codes(const float *W, int64_t n, float s, int8_t *w) {
    bool any = false;
    for (int64_t i = 0; i < n; i++) {
        const float r = rintf(W[i] * s);
        const int8_t v = r >= 1.0f ? 1 : r <= -1.0f ? -1 : 0; /* NaN compares false: 0 */
        w[i] = v;
        any |= v != 0;
    }
    return any;
}

static float absmean_scale(double sum, int64_t n) {
    const float mean = n > 0 ? (float)(sum / (double)n) : 0.0f;
    return mean > 1e-5f ? mean : 1e-5f;
}

void bitnet_hf_ternarize(const float *W, int64_t n, int8_t *w, float *scale) {
    const float d = absmean_scale(abs_sum(W, n), n);
    *scale = round_codes(W, n, 1.0f / d, w) ? d : 0.0f;
}

typedef struct exact_state {
    float c;          /* the one nonzero magnitude, 0 until seen */
    int64_t bad;      /* first offending index, -1 */
} exact_state;

static void exact_chunk(exact_state *es, const float *W, int64_t n, int64_t base, int8_t *w) {
    for (int64_t i = 0; i < n && es->bad < 0; i++) {
        const float v = W[i];
        if (v == 0.0f) {
            w[i] = 0;
            continue;
        }
        const float a = fabsf(v);
        if (!isfinite(a) || (es->c != 0.0f && a != es->c)) {
            es->bad = base + i;
            return;
        }
        es->c = a;
        w[i] = v > 0 ? 1 : -1;
    }
}

bool bitnet_hf_exact_ternary(const float *W, int64_t n, int8_t *w, float *scale, int64_t *bad_index) {
    exact_state es = {0.0f, -1};
    exact_chunk(&es, W, n, 0, w);
    if (bad_index) *bad_index = es.bad;
    *scale = es.bad < 0 ? es.c : 0.0f;
    return es.bad < 0;
}

bitnet_status bitnet_hf_unpack_2bit(const uint8_t *packed, int64_t M, int64_t K, int8_t *w, const char *what,
                                    bitnet_error *err) {
    if (M <= 0 || K <= 0 || M % 4 != 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: %lld rows: 2-bit packing needs a multiple of 4", what,
                           (long long)M);
    const int64_t R = M / 4;
    for (int64_t r = 0; r < R; r++) {
        const uint8_t *src = packed + r * K;
        for (int s = 0; s < 4; s++) {
            int8_t *dst = w + (s * R + r) * K;
            for (int64_t k = 0; k < K; k++) {
                const int code = src[k] >> (2 * s) & 3;
                if (code == 3)
                    return bitnet_fail(err, BITNET_ERR_FORMAT,
                                       "%s: packed byte at row %lld, column %lld holds code 3 in bits %d..%d: not a "
                                       "ternary value (codes 0, 1, 2 mean -1, 0, +1)",
                                       what, (long long)r, (long long)k, 2 * s, 2 * s + 1);
                dst[k] = (int8_t)(code - 1);
            }
        }
    }
    return BITNET_OK;
}

void bitnet_hf_rope_permute(const int8_t *src, int64_t M, int64_t K, int32_t n_head, int8_t *dst) {
    const int64_t d = M / n_head, half = d / 2;
    for (int64_t h = 0; h < n_head; h++)
        for (int64_t j = 0; j < 2; j++)
            for (int64_t i = 0; i < half; i++)
                memcpy(dst + (h * d + 2 * i + j) * K, src + (h * d + j * half + i) * K, (size_t)K);
}

/* =============================================================================================
 * The plan: every output tensor, where it comes from, its type and shape
 * =========================================================================================== */

/* K_RAW: a 2-D float tensor written as stored in F32/F16 (the f32/f16 projections of qwen3/gemma3) */
enum { K_EMBD, K_OUTPUT, K_NORM, K_PROJ, K_RAW };
enum { S_EMBD, S_FF, S_QDIM, S_HEAD };

typedef struct plan_tensor {
    char name[64];                  /* GGUF */
    int kind;
    int type;                       /* GGUF type id */
    int64_t M, K;                   /* rows (ne[1]) and columns (ne[0]); norms: M = 1 */
    int32_t rope_heads;             /* > 0: llama q/k row permutation with this head count */
    bitnet_tiles tiles;
    const bitnet_st_tensor *src;
    const bitnet_st_tensor *scale;  /* PACKED_*: the weight_scale tensor */
    bool plus_one;                  /* gemma3's own norms: w + 1 is written (hf_convert.h) */
    size_t nbytes;
} plan_tensor;

/* One tensor of a layer, in the order of the sorted HF names (bitnet_dummy_write's order). */
typedef struct layer_entry {
    const char *hf[2];   /* suffix after "model.layers.N."; a second spelling or NULL */
    const char *gguf;
    int kind;            /* K_NORM or K_PROJ */
    int size;            /* norms: S_*; projections: 0 */
    char proj;           /* 'q','k','v','o','g','u','d' */
} layer_entry;

static const layer_entry BITNET_LAYER[] = {
    {{"input_layernorm", NULL}, "attn_norm", K_NORM, S_EMBD, 0},
    {{"mlp.down_proj", NULL}, "ffn_down", K_PROJ, 0, 'd'},
    /* 1bitLLM names it ffn_layernorm, transformers' BitNet ffn_sub_norm (both sort here) */
    {{"mlp.ffn_sub_norm", "mlp.ffn_layernorm"}, "ffn_sub_norm", K_NORM, S_FF, 0},
    {{"mlp.gate_proj", NULL}, "ffn_gate", K_PROJ, 0, 'g'},
    {{"mlp.up_proj", NULL}, "ffn_up", K_PROJ, 0, 'u'},
    {{"post_attention_layernorm", NULL}, "ffn_norm", K_NORM, S_EMBD, 0},
    /* 1bitLLM: inner_attn_ln; transformers' BitNet: attn_sub_norm */
    {{"self_attn.attn_sub_norm", "self_attn.inner_attn_ln"}, "attn_sub_norm", K_NORM, S_QDIM, 0},
    {{"self_attn.k_proj", NULL}, "attn_k", K_PROJ, 0, 'k'},
    {{"self_attn.o_proj", NULL}, "attn_output", K_PROJ, 0, 'o'},
    {{"self_attn.q_proj", NULL}, "attn_q", K_PROJ, 0, 'q'},
    {{"self_attn.v_proj", NULL}, "attn_v", K_PROJ, 0, 'v'},
};
static const layer_entry LLAMA_LAYER[] = {
    {{"input_layernorm", NULL}, "attn_norm", K_NORM, S_EMBD, 0},
    {{"mlp.down_proj", NULL}, "ffn_down", K_PROJ, 0, 'd'},
    {{"mlp.gate_proj", NULL}, "ffn_gate", K_PROJ, 0, 'g'},
    {{"mlp.up_proj", NULL}, "ffn_up", K_PROJ, 0, 'u'},
    {{"post_attention_layernorm", NULL}, "ffn_norm", K_NORM, S_EMBD, 0},
    {{"self_attn.k_proj", NULL}, "attn_k", K_PROJ, 0, 'k'},
    {{"self_attn.o_proj", NULL}, "attn_output", K_PROJ, 0, 'o'},
    {{"self_attn.q_proj", NULL}, "attn_q", K_PROJ, 0, 'q'},
    {{"self_attn.v_proj", NULL}, "attn_v", K_PROJ, 0, 'v'},
};

typedef struct conv {
    const bitnet_convert_params *p;
    bitnet_hf_config cfg;
    bitnet_st_set *st;
    bool *used;              /* per checkpoint tensor */
    plan_tensor *t;
    int64_t n, cap;
    bool tied;
    char tile_note[160];
    bitnet_error *err;
} conv;

static bool is_float_dtype(int dt) {
    return dt == BITNET_ST_BF16 || dt == BITNET_ST_F16 || dt == BITNET_ST_F32 || dt == BITNET_ST_F64;
}

static void mark_used(conv *c, const bitnet_st_tensor *t) {
    c->used[t - bitnet_st_tensor_at(c->st, 0)] = true;
}

static plan_tensor *plan_add(conv *c) {
    if (c->n == c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 64;
        plan_tensor *n = (plan_tensor *)realloc(c->t, (size_t)cap * sizeof *n);
        if (!n) return NULL;
        c->t = n;
        c->cap = cap;
    }
    plan_tensor *e = &c->t[c->n++];
    memset(e, 0, sizeof *e);
    return e;
}

/* Shape check of a float source tensor against [rows, cols] (cols = 0: 1-D of `rows`). */
static bitnet_status check_float_src(conv *c, const bitnet_st_tensor *t, const char *gguf, int64_t rows, int64_t cols) {
    if (!is_float_dtype(t->dtype))
        return bitnet_fail(c->err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s' (→ %s) has dtype %s; expected BF16, F16, F32 "
                           "or F64", t->path, t->name, gguf, bitnet_st_dtype_name(t->dtype));
    const bool ok = cols == 0 ? (t->n_dims == 1 && t->shape[0] == rows)
                              : (t->n_dims == 2 && t->shape[0] == rows && t->shape[1] == cols);
    if (!ok) {
        char have[128] = "";
        size_t len = 0;
        for (int i = 0; i < t->n_dims && len < sizeof have - 24; i++)
            len += (size_t)snprintf(have + len, sizeof have - len, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (cols == 0)
            return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: tensor '%s' (→ %s) has shape [%s]; config.json implies [%lld]",
                               t->path, t->name, gguf, have, (long long)rows);
        return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: tensor '%s' (→ %s) has shape [%s]; config.json implies [%lld, %lld]",
                           t->path, t->name, gguf, have, (long long)rows, (long long)cols);
    }
    return BITNET_OK;
}

static const bitnet_st_tensor *find_one(conv *c, const char *const *names, int n_names) {
    for (int i = 0; i < n_names; i++)
        if (names[i]) {
            const bitnet_st_tensor *t = bitnet_st_find(c->st, names[i]);
            if (t) return t;
        }
    return NULL;
}

static bitnet_status missing(conv *c, const char *hf, const char *hf2, const char *gguf) {
    return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: missing tensor '%s'%s%s%s (GGUF %s) in the checkpoint",
                       c->p->model_dir, hf, hf2 ? " (or '" : "", hf2 ? hf2 : "", hf2 ? "')" : "", gguf);
}

/* Output type of token_embd / output.weight (hf_convert.h). */
static int i2s_dense_type(const conv *c) { /* bitnet.cpp's llama-quantize for I2_S (formats.md) */
    return c->cfg.n_embd % 256 == 0 || c->cfg.n_embd % 32 != 0 ? BITNET_TYPE_F16 : BITNET_TYPE_Q8_0;
}

static int embd_type(const conv *c) {
    const bitnet_dummy_outtype o = c->p->outtype;
    if (o == BITNET_DUMMY_F32) return BITNET_TYPE_F32;
    if (c->p->embd_type) return c->p->embd_type;
    if (o == BITNET_DUMMY_I2_S) return i2s_dense_type(c);
    return BITNET_TYPE_F32;
}

/* Not changed by embd_type: llama-quantize's --token-embedding-type leaves output.weight to its own rule. */
static int output_type(const conv *c) {
    const bitnet_dummy_outtype o = c->p->outtype;
    if (o == BITNET_DUMMY_F32) return BITNET_TYPE_F32;
    if (o == BITNET_DUMMY_I2_S) return i2s_dense_type(c);
    return BITNET_TYPE_F16;
}

static bitnet_status plan_dense(conv *c, int kind, const char *gguf, const char *hf, const char *hf2, int type,
                                int64_t rows, int64_t cols) {
    const char *names[2] = {hf, hf2};
    const bitnet_st_tensor *t = find_one(c, names, 2);
    if (!t) return missing(c, hf, hf2, gguf);
    bitnet_status st = check_float_src(c, t, gguf, rows, cols);
    if (st != BITNET_OK) return st;
    mark_used(c, t);
    plan_tensor *e = plan_add(c);
    if (!e) return bitnet_fail(c->err, BITNET_ERR_NOMEM, "out of memory");
    snprintf(e->name, sizeof e->name, "%s", gguf);
    e->kind = kind;
    e->type = type;
    e->M = cols ? rows : 1;
    e->K = cols ? cols : rows;
    e->src = t;
    return BITNET_OK;
}

static bitnet_status plan_proj(conv *c, const bitnet_arch_info *ai, int layer, const layer_entry *le) {
    const bitnet_hf_config *g = &c->cfg;
    const int64_t qd = (int64_t)g->n_head * g->n_embd_head, kvd = (int64_t)g->n_head_kv * g->n_embd_head;
    int64_t M, K;
    switch (le->proj) {
    case 'q': M = qd; K = g->n_embd; break;
    case 'k': case 'v': M = kvd; K = g->n_embd; break;
    case 'o': M = g->n_embd; K = qd; break;
    case 'g': case 'u': M = g->n_ff; K = g->n_embd; break;
    default: M = g->n_embd; K = g->n_ff; break;
    }
    char hf[160], gguf[64], sname[176];
    snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", layer, le->hf[0]);
    snprintf(gguf, sizeof gguf, "blk.%d.%s.weight", layer, le->gguf);
    const bitnet_st_tensor *t = bitnet_st_find(c->st, hf);
    if (!t) return missing(c, hf, NULL, gguf);
    snprintf(sname, sizeof sname, "model.layers.%d.%s.weight_scale", layer, le->hf[0]);
    const bitnet_st_tensor *sc = NULL;
    const bool packed_kind = g->weights == BITNET_HF_PACKED_DIV || g->weights == BITNET_HF_PACKED_MUL;
    bitnet_status st;
    if (packed_kind) {
        sc = bitnet_st_find(c->st, sname);
        if (!sc)
            return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: missing tensor '%s': quantization_config (bitnet, offline) "
                               "needs one weight_scale per packed weight", c->p->model_dir, sname);
        if (sc->n_elements != 1 || !is_float_dtype(sc->dtype))
            return bitnet_fail(c->err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s' has %llu elements of dtype %s; expected one "
                               "float (a per-tensor scale)", sc->path, sc->name, (unsigned long long)sc->n_elements,
                               bitnet_st_dtype_name(sc->dtype));
        mark_used(c, sc);
        if (t->dtype == BITNET_ST_U8) {
            if (M % 4 != 0 || t->n_dims != 2 || t->shape[0] != M / 4 || t->shape[1] != K)
                return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: packed tensor '%s' (→ %s) has shape [%lld, %lld]; "
                                   "config.json implies [%lld, %lld] (rows / 4)", t->path, t->name, gguf,
                                   (long long)t->shape[0], (long long)(t->n_dims > 1 ? t->shape[1] : 1),
                                   (long long)(M / 4), (long long)K);
        } else if (g->weights == BITNET_HF_PACKED_MUL) {
            if ((st = check_float_src(c, t, gguf, M, K)) != BITNET_OK) return st;
        } else {
            return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: tensor '%s' has dtype %s; quantization_config (bitnet, "
                               "linear_class bitlinear) stores weights packed as U8", t->path, t->name,
                               bitnet_st_dtype_name(t->dtype));
        }
    } else {
        if (t->dtype == BITNET_ST_U8)
            return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: tensor '%s' is U8 (packed?) but config.json has no bitnet "
                               "quantization_config saying how to read it", t->path, t->name);
        if ((st = check_float_src(c, t, gguf, M, K)) != BITNET_OK) return st;
    }
    mark_used(c, t);
    plan_tensor *e = plan_add(c);
    if (!e) return bitnet_fail(c->err, BITNET_ERR_NOMEM, "out of memory");
    snprintf(e->name, sizeof e->name, "%s", gguf);
    e->kind = K_PROJ;
    e->type = bitnet_dummy_ternary_type(c->p->outtype);
    e->M = M;
    e->K = K;
    e->src = t;
    e->scale = sc;
    if (ai->permuted_qk && (le->proj == 'q' || le->proj == 'k'))
        e->rope_heads = le->proj == 'q' ? g->n_head : g->n_head_kv;
    return BITNET_OK;
}

static bitnet_status plan_tiles(conv *c) {
    const int type = bitnet_dummy_ternary_type(c->p->outtype);
    const bool tl = type == BITNET_TYPE_TL1 || type == BITNET_TYPE_TL2;
    /* Every listed tile entry must name a shape of the model. */
    for (size_t i = 0; i < c->p->n_tiles; i++) {
        const bitnet_dummy_shape_tiles *ts = &c->p->tiles[i];
        bool found = false;
        for (int64_t j = 0; j < c->n && !found; j++)
            found = c->t[j].kind == K_PROJ && c->t[j].M == ts->M && c->t[j].K == ts->K;
        if (!found)
            return bitnet_fail(c->err, BITNET_ERR_INVALID_ARG, "tiles given for shape %lldx%lld (MxK), which this model "
                               "does not have", (long long)ts->M, (long long)ts->K);
        if (!tl)
            return bitnet_fail(c->err, BITNET_ERR_INVALID_ARG, "tiles given for shape %lldx%lld, but --outtype %s has no "
                               "tiles (only tl1 and tl2)", (long long)ts->M, (long long)ts->K,
                               bitnet_dummy_outtype_name(c->p->outtype));
    }
    if (!tl) return BITNET_OK;
    int64_t (*shapes)[2] = (int64_t(*)[2])malloc((size_t)(c->n ? c->n : 1) * sizeof *shapes);
    if (!shapes) return bitnet_fail(c->err, BITNET_ERR_NOMEM, "out of memory");
    size_t ns = 0;
    for (int64_t j = 0; j < c->n; j++) {
        if (c->t[j].kind != K_PROJ) continue;
        bool dup = false;
        for (size_t k = 0; k < ns && !dup; k++) dup = shapes[k][0] == c->t[j].M && shapes[k][1] == c->t[j].K;
        if (!dup) {
            shapes[ns][0] = c->t[j].M;
            shapes[ns][1] = c->t[j].K;
            ns++;
        }
    }
    const char *pref = c->p->lut_table ? c->p->lut_table : "default";
    const bitnet_lut_table *table = bitnet_lut_find_table(type, (const int64_t(*)[2])shapes, ns, pref);
    free(shapes);
    bool given_any = false, default_rule = false;
    for (int64_t j = 0; j < c->n; j++) {
        plan_tensor *e = &c->t[j];
        if (e->kind != K_PROJ) continue;
        bool given = false;
        for (size_t i = 0; i < c->p->n_tiles && !given; i++)
            if (c->p->tiles[i].M == e->M && c->p->tiles[i].K == e->K) {
                e->tiles = c->p->tiles[i].tiles;
                given = true;
            }
        if (!given) {
            e->tiles = bitnet_lut_tiles_for(type, e->M, e->K, table, pref);
            default_rule |= table == NULL;
        }
        given_any |= given;
        bitnet_error terr;
        if (bitnet_tiles_check(type, e->M, e->K, e->tiles, &terr) != BITNET_OK)
            return bitnet_fail(c->err, given ? BITNET_ERR_INVALID_ARG : BITNET_ERR_UNSUPPORTED,
                               "tensor '%s' (%s, M = %lld, K = %lld): %s tiles BM %d BK %d bm %d: %s", e->name,
                               bitnet_type_name(type), (long long)e->M, (long long)e->K, given ? "the given" : "no legal",
                               (int)e->tiles.BM, (int)e->tiles.BK, (int)e->tiles.bm, terr.msg);
    }
    if (given_any)
        snprintf(c->tile_note, sizeof c->tile_note, "tiles as given%s", table ? " (others from the built-in table)" : "");
    else if (table)
        snprintf(c->tile_note, sizeof c->tile_note, "tiles of built-in table %s/%s", table->config, table->table);
    else if (default_rule)
        snprintf(c->tile_note, sizeof c->tile_note, "no built-in table covers these shapes: default-rule tiles");
    return BITNET_OK;
}

/* ---- qwen3 / gemma3 (hf_convert.h: the embedding models) ---------------------------------------- */

enum { E_ALL, E_QWEN3, E_GEMMA3 };
typedef struct emb_entry {
    const char *hf;     /* after "[model.]layers.N.", without ".weight" */
    const char *gguf;   /* after "blk.N." , without ".weight" */
    int kind;           /* K_NORM or K_PROJ */
    int size;           /* norms: S_* */
    char proj;          /* projections: 'q','k','v','o','g','u','d' */
    int only;           /* E_* */
    bool optional;      /* the <proj>_norm_in weights */
    bool gemma_norm;    /* a Gemma3RMSNorm weight (stored + 1 for gemma3) */
} emb_entry;

/* bitnet.cpp's build_tensor_name_map, in the order of the sorted HF names (bitnet_dummy_write's order). */
static const emb_entry EMB_LAYER[] = {
    {"input_layernorm", "attn_norm", K_NORM, S_EMBD, 0, E_ALL, false, true},
    {"mlp.down_proj.norm", "ffn_down_norm_in", K_NORM, S_FF, 0, E_ALL, true, false},
    {"mlp.down_proj", "ffn_down", K_PROJ, 0, 'd', E_ALL, false, false},
    {"mlp.gate_proj.norm", "ffn_gate_norm_in", K_NORM, S_EMBD, 0, E_ALL, true, false},
    {"mlp.gate_proj", "ffn_gate", K_PROJ, 0, 'g', E_ALL, false, false},
    {"mlp.up_proj.norm", "ffn_up_norm_in", K_NORM, S_EMBD, 0, E_ALL, true, false},
    {"mlp.up_proj", "ffn_up", K_PROJ, 0, 'u', E_ALL, false, false},
    {"post_attention_layernorm", "post_attention_norm", K_NORM, S_EMBD, 0, E_GEMMA3, false, true},
    {"post_feedforward_layernorm", "post_ffw_norm", K_NORM, S_EMBD, 0, E_GEMMA3, false, true},
    {"post_attention_layernorm", "ffn_norm", K_NORM, S_EMBD, 0, E_QWEN3, false, false},
    {"pre_feedforward_layernorm", "ffn_norm", K_NORM, S_EMBD, 0, E_GEMMA3, false, true},
    {"self_attn.k_norm", "attn_k_norm", K_NORM, S_HEAD, 0, E_ALL, false, true},
    {"self_attn.k_proj.norm", "attn_k_norm_in", K_NORM, S_EMBD, 0, E_ALL, true, false},
    {"self_attn.k_proj", "attn_k", K_PROJ, 0, 'k', E_ALL, false, false},
    {"self_attn.o_proj.norm", "attn_output_norm_in", K_NORM, S_QDIM, 0, E_ALL, true, false},
    {"self_attn.o_proj", "attn_output", K_PROJ, 0, 'o', E_ALL, false, false},
    {"self_attn.q_norm", "attn_q_norm", K_NORM, S_HEAD, 0, E_ALL, false, true},
    {"self_attn.q_proj.norm", "attn_q_norm_in", K_NORM, S_EMBD, 0, E_ALL, true, false},
    {"self_attn.q_proj", "attn_q", K_PROJ, 0, 'q', E_ALL, false, false},
    {"self_attn.v_proj.norm", "attn_v_norm_in", K_NORM, S_EMBD, 0, E_ALL, true, false},
    {"self_attn.v_proj", "attn_v", K_PROJ, 0, 'v', E_ALL, false, false},
};

static void proj_shape(const bitnet_hf_config *g, char proj, int64_t *M, int64_t *K) {
    const int64_t qd = (int64_t)g->n_head * g->n_embd_head, kvd = (int64_t)g->n_head_kv * g->n_embd_head;
    switch (proj) {
    case 'q': *M = qd; *K = g->n_embd; break;
    case 'k': case 'v': *M = kvd; *K = g->n_embd; break;
    case 'o': *M = g->n_embd; *K = qd; break;
    case 'g': case 'u': *M = g->n_ff; *K = g->n_embd; break;
    default: *M = g->n_embd; *K = g->n_ff; break;
    }
}

/* Norms and token_embd of the embedding archs: F32 in f32 files, else F16 (bitnet.cpp's converter). */
static int emb_float_type(const conv *c) {
    return c->p->outtype == BITNET_DUMMY_F32 ? BITNET_TYPE_F32 : BITNET_TYPE_F16;
}

static bitnet_status build_plan_embedding(conv *c) {
    const bitnet_hf_config *g = &c->cfg;
    const bool gemma = strcmp(g->arch, "gemma3") == 0;
    const int ttype = bitnet_dummy_ternary_type(c->p->outtype);
    const bool ternary = bitnet_type_is_ternary(ttype);
    const int ftype = emb_float_type(c);
    bitnet_status st;
    c->tied = true;
    const bitnet_st_tensor *lm = bitnet_st_find(c->st, "lm_head.weight");
    if (lm) mark_used(c, lm); /* no output.weight: these files do not generate (bitnet.cpp skips it too) */
    const bitnet_st_tensor *emb = bitnet_st_find(c->st, "model.embed_tokens.weight");
    if (!emb) emb = bitnet_st_find(c->st, "embed_tokens.weight");
    if (!emb) return missing(c, "model.embed_tokens.weight", "embed_tokens.weight", "token_embd.weight");
    if (emb->n_dims == 2 && emb->shape[0] != g->n_vocab)
        return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: %s has %lld rows but config.json vocab_size is %d", emb->path,
                           emb->name, (long long)emb->shape[0], (int)g->n_vocab);
    if ((st = bitnet_dummy_embd_type_check(c->p->outtype, c->p->embd_type, g->n_embd, c->err)) != BITNET_OK) {
        char msg[sizeof c->err->msg];
        snprintf(msg, sizeof msg, "%s", c->err->msg);
        return bitnet_fail(c->err, st, "%s: %s", c->p->model_dir, msg);
    }
    const int etype = c->p->outtype == BITNET_DUMMY_F32 ? BITNET_TYPE_F32 : c->p->embd_type ? c->p->embd_type : ftype;
    if ((st = plan_dense(c, K_EMBD, "token_embd.weight", "model.embed_tokens.weight", "embed_tokens.weight", etype,
                         g->n_vocab, g->n_embd)) != BITNET_OK)
        return st;
    const int64_t qd = (int64_t)g->n_head * g->n_embd_head;
    int64_t n_norm_in = 0;
    for (int l = 0; l < g->n_layer; l++) {
        for (size_t j = 0; j < sizeof EMB_LAYER / sizeof EMB_LAYER[0]; j++) {
            const emb_entry *e = &EMB_LAYER[j];
            if ((e->only == E_QWEN3 && gemma) || (e->only == E_GEMMA3 && !gemma)) continue;
            char hf[160], hf2[160], gguf[64];
            snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, e->hf);
            snprintf(hf2, sizeof hf2, "layers.%d.%s.weight", l, e->hf);
            snprintf(gguf, sizeof gguf, "blk.%d.%s.weight", l, e->gguf);
            if (e->optional) {
                const char *names[2] = {hf, hf2};
                if (!find_one(c, names, 2)) continue;
                n_norm_in++;
            }
            if (e->kind == K_NORM) {
                const int64_t n = e->size == S_FF ? g->n_ff : e->size == S_QDIM ? qd
                                  : e->size == S_HEAD ? g->n_embd_head : g->n_embd;
                if ((st = plan_dense(c, K_NORM, gguf, hf, hf2, ftype, n, 0)) != BITNET_OK) return st;
                c->t[c->n - 1].plus_one = gemma && e->gemma_norm;
                continue;
            }
            int64_t M, K;
            proj_shape(g, e->proj, &M, &K);
            if ((st = plan_dense(c, ternary ? K_PROJ : K_RAW, gguf, hf, hf2, ternary ? ttype : ftype, M, K)) != BITNET_OK)
                return st;
        }
    }
    if ((st = plan_dense(c, K_NORM, "output_norm.weight", "model.norm.weight", "norm.weight", ftype, g->n_embd, 0)) !=
        BITNET_OK)
        return st;
    c->t[c->n - 1].plus_one = gemma;
    if (ternary && n_norm_in == 0 && !c->p->force)
        return bitnet_fail(c->err, BITNET_ERR_FORMAT,
                           "%s: no <proj>.norm weight (e.g. layers.0.self_attn.q_proj.norm.weight) in the checkpoint: "
                           "this is a plain %s model, not a BitNet one, and --outtype %s would ternarize its "
                           "full-precision weights (a different model). Convert it to f32 or f16, or pass --force",
                           c->p->model_dir, g->arch, bitnet_dummy_outtype_name(c->p->outtype));
    return BITNET_OK;
}

static bitnet_status build_plan(conv *c) {
    const bitnet_hf_config *g = &c->cfg;
    bitnet_status st;
    if (g->embedding) {
        if ((st = build_plan_embedding(c)) != BITNET_OK) return st;
        goto checks;
    }
    /* The head: tied unless config.json says otherwise or (not saying) the checkpoint has lm_head. */
    const bitnet_st_tensor *lm = bitnet_st_find(c->st, "lm_head.weight");
    c->tied = g->tie_embeddings == 1 || (g->tie_embeddings == -1 && lm == NULL);
    if (!c->tied && !lm)
        return missing(c, "lm_head.weight", NULL, "output.weight (config.json: tie_word_embeddings false)");
    if (lm && c->tied) mark_used(c, lm); /* HF ties it to the embedding: the stored copy is not used */

    const bitnet_st_tensor *emb = bitnet_st_find(c->st, "model.embed_tokens.weight");
    if (!emb) return missing(c, "model.embed_tokens.weight", NULL, "token_embd.weight");
    if (emb->n_dims == 2 && emb->shape[0] != g->n_vocab)
        return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: model.embed_tokens.weight has %lld rows but config.json "
                           "vocab_size is %d", emb->path, (long long)emb->shape[0], (int)g->n_vocab);
    if (!c->tied &&
        (st = plan_dense(c, K_OUTPUT, "output.weight", "lm_head.weight", NULL, output_type(c), g->n_vocab, g->n_embd)) !=
            BITNET_OK)
        return st;
    if ((st = bitnet_dummy_embd_type_check(c->p->outtype, c->p->embd_type, g->n_embd, c->err)) != BITNET_OK) {
        char msg[sizeof c->err->msg];
        snprintf(msg, sizeof msg, "%s", c->err->msg);
        return bitnet_fail(c->err, st, "%s: %s", c->p->model_dir, msg);
    }
    if ((st = plan_dense(c, K_EMBD, "token_embd.weight", "model.embed_tokens.weight", NULL, embd_type(c), g->n_vocab,
                         g->n_embd)) != BITNET_OK)
        return st;
    /* the tensor set and the Q/K permutation follow the architecture's row (base/arch.c) */
    const bitnet_arch_info *ai = bitnet_arch_find(g->arch, strlen(g->arch));
    if (!ai)
        return bitnet_fail(c->err, BITNET_ERR_UNSUPPORTED, "%s: GGUF architecture '%s' has no row in base/arch.c",
                           c->p->model_dir, g->arch);
    const bool llama = !ai->sub_norms; /* the llama tensor set: no sub-norms */
    const layer_entry *le = llama ? LLAMA_LAYER : BITNET_LAYER;
    const int n_le = llama ? (int)(sizeof LLAMA_LAYER / sizeof LLAMA_LAYER[0])
                           : (int)(sizeof BITNET_LAYER / sizeof BITNET_LAYER[0]);
    const int64_t qd = (int64_t)g->n_head * g->n_embd_head;
    for (int l = 0; l < g->n_layer; l++) {
        for (int j = 0; j < n_le; j++) {
            if (le[j].kind == K_PROJ) {
                if ((st = plan_proj(c, ai, l, &le[j])) != BITNET_OK) return st;
                continue;
            }
            char hf[160], hf2[160], gguf[64];
            snprintf(hf, sizeof hf, "model.layers.%d.%s.weight", l, le[j].hf[0]);
            if (le[j].hf[1]) snprintf(hf2, sizeof hf2, "model.layers.%d.%s.weight", l, le[j].hf[1]);
            snprintf(gguf, sizeof gguf, "blk.%d.%s.weight", l, le[j].gguf);
            const int64_t n = le[j].size == S_FF ? g->n_ff : le[j].size == S_QDIM ? qd : g->n_embd;
            if ((st = plan_dense(c, K_NORM, gguf, hf, le[j].hf[1] ? hf2 : NULL, BITNET_TYPE_F32, n, 0)) != BITNET_OK)
                return st;
        }
    }
    if ((st = plan_dense(c, K_NORM, "output_norm.weight", "model.norm.weight", NULL, BITNET_TYPE_F32, g->n_embd, 0)) !=
        BITNET_OK)
        return st;

checks:
    /* Everything in the checkpoint must have found its place (rotary inv_freq buffers are derived data). */
    for (int64_t i = 0; i < bitnet_st_n_tensors(c->st); i++) {
        const bitnet_st_tensor *t = bitnet_st_tensor_at(c->st, i);
        const size_t len = strlen(t->name);
        if (c->used[i] || (len >= 9 && strcmp(t->name + len - 9, ".inv_freq") == 0)) continue;
        return bitnet_fail(c->err, BITNET_ERR_FORMAT,
                           "%s: tensor '%s' has no place in the GGUF \"%s\" graph of %d layers (a bias, an extra "
                           "layer, or a weight of another architecture)", t->path, t->name, g->arch, (int)g->n_layer);
    }

    const int ttype = bitnet_dummy_ternary_type(c->p->outtype);
    for (int64_t j = 0; j < c->n; j++) {
        plan_tensor *e = &c->t[j];
        if (e->kind == K_PROJ && ttype == BITNET_TYPE_I2_S && (e->M * e->K) % 128 != 0)
            return bitnet_fail(c->err, BITNET_ERR_UNSUPPORTED, "tensor '%s' (M = %lld, K = %lld): I2_S needs M*K to be a "
                               "multiple of 128", e->name, (long long)e->M, (long long)e->K);
    }
    if ((st = plan_tiles(c)) != BITNET_OK) return st;
    for (int64_t j = 0; j < c->n; j++) {
        plan_tensor *e = &c->t[j];
        int64_t ne[2] = {e->K, e->M};
        if ((st = bitnet_type_nbytes(e->type, e->kind == K_NORM ? 1 : 2, ne, &e->nbytes, c->err)) != BITNET_OK)
            return st;
    }
    return BITNET_OK;
}

/* =============================================================================================
 * Writing
 * =========================================================================================== */

typedef struct writer {
    conv *c;
    bitnet_gguf_writer *w;
    int64_t index;
    uint64_t done, total;
    float *fbuf;          /* chunk of floats */
    void *obuf;           /* chunk of output bytes */
    size_t chunk_elems;
} writer;

static bitnet_status emit(writer *wr, const plan_tensor *e, const void *data, size_t n) {
    bitnet_status st = bitnet_gguf_write_data(wr->w, data, n, wr->c->err);
    if (st != BITNET_OK) return st;
    wr->done += n;
    if (wr->c->p->progress)
        wr->c->p->progress(wr->c->p->progress_user, wr->index, wr->c->n, e->name, wr->done, wr->total);
    return BITNET_OK;
}

/* Encode `rows` rows of K floats into the tensor's dense type and write them. */
static bitnet_status emit_rows(writer *wr, const plan_tensor *e, const float *x, int64_t rows) {
    const int64_t n = rows * e->K;
    size_t bytes;
    switch (e->type) {
    case BITNET_TYPE_F32:
        return emit(wr, e, x, (size_t)n * 4);
    case BITNET_TYPE_F16: {
        uint16_t *h = (uint16_t *)wr->obuf;
        for (int64_t i = 0; i < n; i++) h[i] = bitnet_fp32_to_fp16(x[i]);
        bytes = (size_t)n * 2;
        break;
    }
    case BITNET_TYPE_Q8_0: {
        bitnet_block_q8_0 *b = (bitnet_block_q8_0 *)wr->obuf;
        for (int64_t r = 0; r < rows; r++) bitnet_quantize_row_q8_0(x + r * e->K, b + r * (e->K / 32), e->K);
        bytes = (size_t)(n / 32) * sizeof(bitnet_block_q8_0);
        break;
    }
    case BITNET_TYPE_Q6_K: { /* K % 256 == 0 was checked at planning (bitnet_dummy_embd_type_check) */
        bitnet_block_q6_k *b = (bitnet_block_q6_k *)wr->obuf;
        for (int64_t r = 0; r < rows; r++) {
            bitnet_status st = bitnet_quantize_row_q6_k(x + r * e->K, b + r * (e->K / 256), e->K, wr->c->err);
            if (st != BITNET_OK) return st;
        }
        bytes = (size_t)(n / 256) * sizeof(bitnet_block_q6_k);
        break;
    }
    default:
        return bitnet_fail(wr->c->err, BITNET_ERR_UNSUPPORTED, "tensor '%s': no dense encoder for type %s", e->name,
                           bitnet_type_name(e->type));
    }
    return emit(wr, e, wr->obuf, bytes);
}

static int64_t rows_per_chunk(const writer *wr, int64_t K) {
    int64_t r = (int64_t)(wr->chunk_elems / (size_t)K);
    return r > 0 ? r : 1;
}

static bitnet_status write_dense(writer *wr, const plan_tensor *e) {
    bitnet_status st = BITNET_OK;
    const int64_t step = rows_per_chunk(wr, e->K);
    for (int64_t r = 0; r < e->M && st == BITNET_OK; r += step) {
        const int64_t rows = e->M - r < step ? e->M - r : step;
        st = bitnet_st_read_f32(e->src, (uint64_t)(r * e->K), (uint64_t)(rows * e->K), wr->fbuf, wr->c->err);
        if (st == BITNET_OK && e->plus_one)
            for (int64_t i = 0; i < rows * e->K; i++) wr->fbuf[i] += 1.0f; /* in float32, before any F16 rounding */
        if (st == BITNET_OK) st = emit_rows(wr, e, wr->fbuf, rows);
    }
    bitnet_st_release(e->src);
    return st;
}

/* Read a float source projection chunk by chunk: LATENT (two passes), AS_STORED (one, with a LATENT
 * retry under force) or PACKED_MUL float storage (values must be -1, 0, +1). */
static bitnet_status decode_float(writer *wr, const plan_tensor *e, int8_t *w, float *scale) {
    conv *c = wr->c;
    const bitnet_st_tensor *t = e->src;
    const uint64_t n = t->n_elements, step = wr->chunk_elems;
    bitnet_status st = BITNET_OK;
    bitnet_hf_weights kind = c->cfg.weights;
    if (kind == BITNET_HF_AS_STORED) {
        exact_state es = {0.0f, -1};
        for (uint64_t i = 0; i < n && es.bad < 0; i += step) {
            const uint64_t m = n - i < step ? n - i : step;
            if ((st = bitnet_st_read_f32(t, i, m, wr->fbuf, c->err)) != BITNET_OK) return st;
            exact_chunk(&es, wr->fbuf, (int64_t)m, (int64_t)i, w + i);
        }
        if (es.bad < 0) {
            *scale = es.c;
            return BITNET_OK;
        }
        float bad;
        if ((st = bitnet_st_read_f32(t, (uint64_t)es.bad, 1, &bad, c->err)) != BITNET_OK) return st;
        if (!c->p->force)
            return bitnet_fail(c->err, BITNET_ERR_FORMAT,
                               "%s: tensor '%s' is not ternary: element %lld = %g, but an earlier nonzero element has "
                               "magnitude %g (a ternary tensor holds only -c, 0, +c). This looks like a full-precision "
                               "model, not a BitNet one; --force ternarizes it anyway (absmean, formats.md), which "
                               "changes what the model computes",
                               t->path, t->name, (long long)es.bad, (double)bad, (double)es.c);
        kind = BITNET_HF_LATENT;
    }
    if (kind == BITNET_HF_PACKED_MUL) { /* unpacked offline weights: the values -1, 0, +1 themselves */
        for (uint64_t i = 0; i < n; i += step) {
            const uint64_t m = n - i < step ? n - i : step;
            if ((st = bitnet_st_read_f32(t, i, m, wr->fbuf, c->err)) != BITNET_OK) return st;
            for (uint64_t j = 0; j < m; j++) {
                const float v = wr->fbuf[j];
                if (v != 0.0f && v != 1.0f && v != -1.0f)
                    return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: tensor '%s': element %llu = %g; offline bitnet "
                                       "weights stored as floats must be -1, 0 or +1", t->path, t->name,
                                       (unsigned long long)(i + j), (double)v);
                w[i + j] = (int8_t)v;
            }
        }
        *scale = 1.0f; /* times weight_scale, applied by the caller */
        return BITNET_OK;
    }
    /* LATENT: pass 1 the mean of |W|, pass 2 the codes (bitnet_hf_ternarize, chunk by chunk). */
    double sum = 0.0;
    for (uint64_t i = 0; i < n; i += step) {
        const uint64_t m = n - i < step ? n - i : step;
        if ((st = bitnet_st_read_f32(t, i, m, wr->fbuf, c->err)) != BITNET_OK) return st;
        sum += abs_sum(wr->fbuf, (int64_t)m);
    }
    const float d = absmean_scale(sum, (int64_t)n), s = 1.0f / d;
    bool any = false;
    for (uint64_t i = 0; i < n; i += step) {
        const uint64_t m = n - i < step ? n - i : step;
        if ((st = bitnet_st_read_f32(t, i, m, wr->fbuf, c->err)) != BITNET_OK) return st;
        any |= round_codes(wr->fbuf, (int64_t)m, s, w + i);
    }
    *scale = any ? d : 0.0f;
    return BITNET_OK;
}

/* The ternary values (row-major [M, K], GGUF row order) and scale of a projection. */
static bitnet_status decode_proj(writer *wr, const plan_tensor *e, int8_t *w, int8_t *tmp, float *scale) {
    conv *c = wr->c;
    int8_t *dst = e->rope_heads ? tmp : w;
    bitnet_status st;
    if (e->src->dtype == BITNET_ST_U8) {
        st = bitnet_hf_unpack_2bit(e->src->data, e->M, e->K, dst, e->src->name, c->err);
        if (st != BITNET_OK) {
            char msg[sizeof c->err->msg];
            snprintf(msg, sizeof msg, "%s", c->err->msg);
            return bitnet_fail(c->err, st, "%s: %s", e->src->path, msg);
        }
        *scale = 1.0f;
    } else if ((st = decode_float(wr, e, dst, scale)) != BITNET_OK) {
        return st;
    }
    bitnet_st_release(e->src);
    if (e->scale) {
        float ws;
        if ((st = bitnet_st_read_f32(e->scale, 0, 1, &ws, c->err)) != BITNET_OK) return st;
        if (!(ws > 0.0f) || !isfinite(ws))
            return bitnet_fail(c->err, BITNET_ERR_FORMAT, "%s: tensor '%s' = %g: a weight scale must be a positive finite "
                               "number", e->scale->path, e->scale->name, (double)ws);
        /* BitLinear divides the product by weight_scale, AutoBitLinear multiplies (hf_convert.h). */
        *scale = c->cfg.weights == BITNET_HF_PACKED_DIV ? 1.0f / ws : ws;
        bool any = false;
        for (int64_t i = 0; i < e->M * e->K && !any; i++) any = dst[i] != 0;
        if (!any) *scale = 0.0f;
    }
    if (e->rope_heads) bitnet_hf_rope_permute(tmp, e->M, e->K, e->rope_heads, w);
    return BITNET_OK;
}

static bitnet_status write_proj(writer *wr, const plan_tensor *e) {
    conv *c = wr->c;
    const size_t n = (size_t)(e->M * e->K);
    int8_t *w = (int8_t *)malloc(n);
    int8_t *tmp = e->rope_heads ? (int8_t *)malloc(n) : NULL;
    uint8_t *packed = NULL;
    bitnet_status st = BITNET_OK;
    float scale = 0.0f;
    if (!w || (e->rope_heads && !tmp)) {
        st = bitnet_fail(c->err, BITNET_ERR_NOMEM, "tensor '%s': out of memory (%zu bytes)", e->name, n);
        goto done;
    }
    if ((st = decode_proj(wr, e, w, tmp, &scale)) != BITNET_OK) goto done;
    free(tmp);
    tmp = NULL;
    if (e->type == BITNET_TYPE_F32 || e->type == BITNET_TYPE_F16) {
        const int64_t step = rows_per_chunk(wr, e->K);
        for (int64_t r = 0; r < e->M && st == BITNET_OK; r += step) {
            const int64_t rows = e->M - r < step ? e->M - r : step;
            for (int64_t i = 0; i < rows * e->K; i++) wr->fbuf[i] = (float)w[r * e->K + i] * scale;
            st = emit_rows(wr, e, wr->fbuf, rows);
        }
        goto done;
    }
    packed = (uint8_t *)calloc(1, e->nbytes);
    if (!packed) {
        st = bitnet_fail(c->err, BITNET_ERR_NOMEM, "tensor '%s': out of memory (%zu bytes)", e->name, e->nbytes);
        goto done;
    }
    if (e->type == BITNET_TYPE_I2_S) st = bitnet_pack_i2s(w, e->M, e->K, scale, packed, c->err);
    else if (e->type == BITNET_TYPE_TL1) st = bitnet_pack_tl1(w, e->M, e->K, e->tiles, scale, packed, c->err);
    else st = bitnet_pack_tl2(w, e->M, e->K, e->tiles, scale, packed, c->err);
    if (st == BITNET_OK) {
        /* in pieces, so the progress bar moves on big tensors too */
        const size_t piece = wr->chunk_elems;
        for (size_t off = 0; off < e->nbytes && st == BITNET_OK; off += piece)
            st = emit(wr, e, packed + off, e->nbytes - off < piece ? e->nbytes - off : piece);
    }
done:
    free(w);
    free(tmp);
    free(packed);
    return st;
}

#define TRY(call, what)                                                                                              \
    do {                                                                                                             \
        if ((st = (call)) != BITNET_OK) return bitnet_fail(c->err, st, "cannot set key %s", (what));                 \
    } while (0)

/* general.name: the parameter, else the folder's base name. */
static void file_name(const conv *c, char *name, size_t n) {
    if (c->p->name) {
        snprintf(name, n, "%s", c->p->name);
        return;
    }
    const char *d = c->p->model_dir;
    size_t len = strlen(d);
    while (len > 1 && d[len - 1] == '/') len--;
    size_t b = len;
    while (b > 0 && d[b - 1] != '/') b--;
    snprintf(name, n, "%.*s", (int)(len - b), d + b);
}

/* The I2_S layout record and TL1/TL2 tiles of the file (every arch). */
static bitnet_status write_layout_keys(conv *c, bitnet_gguf_writer *w) {
    const int ttype = bitnet_dummy_ternary_type(c->p->outtype);
    char key[128];
    bitnet_status st = BITNET_OK;
    if (ttype == BITNET_TYPE_I2_S) TRY(bitnet_gguf_set_str(w, BITNET_I2S_LAYOUT_KEY, "x86"), BITNET_I2S_LAYOUT_KEY);
    if (ttype == BITNET_TYPE_TL1 || ttype == BITNET_TYPE_TL2) {
        for (int64_t j = 0; j < c->n; j++) {
            const plan_tensor *e = &c->t[j];
            if (e->kind != K_PROJ) continue;
            uint32_t v3[3] = {(uint32_t)e->tiles.BM, (uint32_t)e->tiles.BK, (uint32_t)e->tiles.bm};
            snprintf(key, sizeof key, "bitnet.lut.%s.tiles", e->name);
            TRY(bitnet_gguf_set_arr(w, key, BITNET_GGUF_UINT32, v3, 3), key);
        }
    }
    return BITNET_OK;
}

/* qwen3 / gemma3: bitnet.cpp's embedding converter's keys in its order (hf_convert.h). */
static bitnet_status write_keys_embedding(conv *c, bitnet_gguf_writer *w, const bitnet_hf_vocab *v) {
    const bitnet_hf_config *g = &c->cfg;
    char name[256];
    file_name(c, name, sizeof name);
    const bool swa = c->p->gemma3_swa; /* checked by bitnet_convert_hf: gemma3 with a sliding_window and a period */
    const bitnet_embd_keys k = {
        .arch = g->arch, .name = name, .n_layer = g->n_layer, .n_ctx = g->n_ctx, .n_embd = g->n_embd,
        .n_ff = g->n_ff, .n_head = g->n_head, .n_head_kv = g->n_head_kv, .n_vocab = g->n_vocab,
        .head_dim = g->n_embd_head, .rope_freq_base = g->rope_theta, .rms_eps = g->rms_eps,
        .file_type = bitnet_dummy_file_type(c->p->outtype), .pooling_type = g->pooling_type,
        .n_swa = swa ? g->n_swa : 0, .swa_pattern = swa ? g->swa_pattern : 0,
        .rope_freq_base_swa = swa ? g->rope_freq_base_swa : 0.0f,
    };
    bitnet_status st;
    if ((st = bitnet_dummy_set_embedding_keys(w, &k, c->err)) != BITNET_OK) return st;
    if ((st = bitnet_hf_vocab_write_gguf(v, w, c->err)) != BITNET_OK) return st;
    return write_layout_keys(c, w);
}

/* Keys in bitnet_dummy_write's order for the architecture (dummy_model.h). */
static bitnet_status write_keys(conv *c, bitnet_gguf_writer *w, const bitnet_hf_vocab *v) {
    if (c->cfg.embedding) return write_keys_embedding(c, w, v);
    const bitnet_hf_config *g = &c->cfg;
    const char *A = g->arch;
    const bool bitnet = strcmp(A, "bitnet") == 0;
    char key[128];
    bitnet_status st = BITNET_OK;
#define AK(s) (snprintf(key, sizeof key, "%s.%s", A, (s)), key)
    char name[256];
    file_name(c, name, sizeof name);
    TRY(bitnet_gguf_set_str(w, "general.architecture", A), "general.architecture");
    TRY(bitnet_gguf_set_str(w, "general.name", name), "general.name");
    TRY(bitnet_gguf_set_u32(w, AK("block_count"), (uint32_t)g->n_layer), key);
    TRY(bitnet_gguf_set_u32(w, AK("context_length"), (uint32_t)g->n_ctx), key);
    TRY(bitnet_gguf_set_u32(w, AK("embedding_length"), (uint32_t)g->n_embd), key);
    TRY(bitnet_gguf_set_u32(w, AK("feed_forward_length"), (uint32_t)g->n_ff), key);
    TRY(bitnet_gguf_set_u32(w, AK("attention.head_count"), (uint32_t)g->n_head), key);
    TRY(bitnet_gguf_set_u32(w, AK("attention.head_count_kv"), (uint32_t)g->n_head_kv), key);
    TRY(bitnet_gguf_set_f32(w, AK("rope.freq_base"), g->rope_theta), key);
    TRY(bitnet_gguf_set_f32(w, AK("attention.layer_norm_rms_epsilon"), g->rms_eps), key);
    TRY(bitnet_gguf_set_u32(w, "general.file_type", (uint32_t)bitnet_dummy_file_type(c->p->outtype)),
        "general.file_type");
    TRY(bitnet_gguf_set_u32(w, AK("vocab_size"), (uint32_t)g->n_vocab), key);
    if (bitnet) {
        TRY(bitnet_gguf_set_str(w, AK("rope.scaling.type"), "linear"), key);
        TRY(bitnet_gguf_set_f32(w, AK("rope.scaling.factor"), g->rope_scale), key);
    } else {
        TRY(bitnet_gguf_set_u32(w, AK("rope.dimension_count"), (uint32_t)g->n_embd_head), key);
        if ((int64_t)g->n_embd_head * g->n_head != g->n_embd) {
            TRY(bitnet_gguf_set_u32(w, AK("attention.key_length"), (uint32_t)g->n_embd_head), key);
            TRY(bitnet_gguf_set_u32(w, AK("attention.value_length"), (uint32_t)g->n_embd_head), key);
        }
        if (g->rope_scale != 1.0f) {
            TRY(bitnet_gguf_set_str(w, AK("rope.scaling.type"), "linear"), key);
            TRY(bitnet_gguf_set_f32(w, AK("rope.scaling.factor"), g->rope_scale), key);
        }
    }
    if ((st = bitnet_hf_vocab_write_gguf(v, w, c->err)) != BITNET_OK) return st;
    const int ttype = bitnet_dummy_ternary_type(c->p->outtype);
    if (bitnet_type_is_ternary(ttype)) TRY(bitnet_gguf_set_u32(w, "general.quantization_version", 2), "general.quantization_version");
#undef AK
    return write_layout_keys(c, w);
}
#undef TRY

void bitnet_convert_params_init(bitnet_convert_params *p) {
    memset(p, 0, sizeof *p);
    p->outtype = BITNET_DUMMY_I2_S;
}

bitnet_status bitnet_convert_hf(const bitnet_convert_params *p, char **summary, bitnet_error *err) {
    if (summary) *summary = NULL;
    if (!p || !p->model_dir || !p->outfile)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "convert: model_dir and outfile are required");
    if (bitnet_dummy_ternary_type(p->outtype) < 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "convert: invalid outtype %d", (int)p->outtype);
    if (p->lut_table && strcmp(p->lut_table, "default") != 0 && strcmp(p->lut_table, "pretuned") != 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "convert: lut_table '%s' is neither default nor pretuned",
                           p->lut_table);
    conv c;
    memset(&c, 0, sizeof c);
    c.p = p;
    c.err = err;
    bitnet_hf_vocab *vocab = NULL;
    bitnet_gguf_writer *gw = NULL;
    writer wr;
    memset(&wr, 0, sizeof wr);
    bitnet_status st = bitnet_hf_config_load(p->model_dir, &c.cfg, err);
    if (st != BITNET_OK) goto done;
    if (p->gemma3_swa) {
        if (strcmp(c.cfg.arch, "gemma3") != 0) {
            st = bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: gemma3_swa (--gemma3-swa): architecture \"%s\" has no "
                             "sliding-window layers (only gemma3)", p->model_dir, c.cfg.arch);
            goto done;
        }
        if (c.cfg.n_swa <= 0) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s/config.json: gemma3_swa (--gemma3-swa) needs \"sliding_window\" "
                             "(the window of the local layers, in positions); the file has none", p->model_dir);
            goto done;
        }
        if (c.cfg.swa_pattern < 0) {
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s/config.json: gemma3_swa (--gemma3-swa): \"layer_types\" has "
                             "no period p with exactly the layers l %% p == p - 1 global, which is all "
                             "gemma3.attention.sliding_window_pattern can say", p->model_dir);
            goto done;
        }
    }
    if ((st = bitnet_st_open(p->model_dir, &c.st, err)) != BITNET_OK) goto done;
    c.used = (bool *)calloc((size_t)(bitnet_st_n_tensors(c.st) + 1), sizeof *c.used);
    if (!c.used) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = build_plan(&c)) != BITNET_OK) goto done;
    if ((st = bitnet_hf_vocab_load(p->model_dir, &vocab, err)) != BITNET_OK) goto done;
    if ((st = bitnet_hf_vocab_apply_arch(vocab, c.cfg.arch, err)) != BITNET_OK) goto done;
    if ((st = bitnet_hf_vocab_pad(vocab, c.cfg.n_vocab, err)) != BITNET_OK) goto done;

    gw = bitnet_gguf_writer_new();
    if (!gw) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = write_keys(&c, gw, vocab)) != BITNET_OK) goto done;
    for (int64_t j = 0; j < c.n; j++) {
        const plan_tensor *e = &c.t[j];
        int64_t ne[2] = {e->K, e->M};
        if ((st = bitnet_gguf_add_tensor(gw, e->name, e->type, e->kind == K_NORM ? 1 : 2, ne, err)) != BITNET_OK)
            goto done;
        wr.total += e->nbytes;
    }
    wr.c = &c;
    wr.w = gw;
    wr.chunk_elems = (p->chunk_bytes ? p->chunk_bytes : DEFAULT_CHUNK_BYTES) / 4;
    for (int64_t j = 0; j < c.n; j++)
        if ((size_t)c.t[j].K > wr.chunk_elems) wr.chunk_elems = (size_t)c.t[j].K; /* at least one row */
    wr.fbuf = (float *)malloc(wr.chunk_elems * sizeof(float));
    wr.obuf = malloc(wr.chunk_elems * sizeof(float));
    if (!wr.fbuf || !wr.obuf) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = bitnet_gguf_write_begin(gw, p->outfile, err)) != BITNET_OK) goto done;
    for (int64_t j = 0; j < c.n && st == BITNET_OK; j++) {
        wr.index = j;
        st = c.t[j].kind == K_PROJ ? write_proj(&wr, &c.t[j]) : write_dense(&wr, &c.t[j]);
    }
    if (st == BITNET_OK) st = bitnet_gguf_write_end(gw, err);
    if (st == BITNET_OK && summary && c.cfg.embedding) {
        static const char *const pool[4] = {"none", "mean", "cls", "last"};
        char buf[640];
        snprintf(buf, sizeof buf,
                 "%s (%s) -> GGUF \"%s\", %d layers, %lld tensors, projections %s%s, token_embd %s, pooling %s, "
                 "%s", c.cfg.hf_arch, p->model_dir, c.cfg.arch, (int)c.cfg.n_layer, (long long)c.n,
                 bitnet_type_name(bitnet_dummy_ternary_type(p->outtype)),
                 bitnet_type_is_ternary(bitnet_dummy_ternary_type(p->outtype)) ? " (absmean-ternarized)" : " (as stored)",
                 bitnet_type_name(c.t[0].type), pool[c.cfg.pooling_type & 3],
                 strcmp(c.cfg.arch, "gemma3") != 0 ? "global attention"
                 : p->gemma3_swa ? "sliding-window layers as config.json says"
                                 : "global attention in every layer (as bitnet.cpp's files; --gemma3-swa for the local layers)");
        if (c.tile_note[0]) snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "; %s", c.tile_note);
        *summary = strdup(buf);
    } else if (st == BITNET_OK && summary) {
        char buf[640];
        snprintf(buf, sizeof buf,
                 "%s (%s) -> GGUF \"%s\", %d layers, %lld tensors, projections %s from %s weights, token_embd %s%s%s%s",
                 c.cfg.hf_arch, p->model_dir, c.cfg.arch, (int)c.cfg.n_layer, (long long)c.n,
                 bitnet_type_name(bitnet_dummy_ternary_type(p->outtype)), bitnet_hf_weights_name(c.cfg.weights),
                 bitnet_type_name(embd_type(&c)), c.tied ? "" : ", output.weight ",
                 c.tied ? "" : bitnet_type_name(output_type(&c)), c.tile_note[0] ? "; " : "");
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s", c.tile_note);
        *summary = strdup(buf);
    }
done:
    bitnet_gguf_writer_free(gw); /* aborts (removes the temporary file) unless write_end succeeded */
    free(wr.fbuf);
    free(wr.obuf);
    bitnet_hf_vocab_free(vocab);
    free(c.t);
    free(c.used);
    bitnet_st_close(c.st);
    return st;
}
