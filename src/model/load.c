/* load.c — loading a GGUF model: the tensors the hyperparameters name, checked against them (and every
 * tensor of the file checked to be one the graph uses), norms and dense weights to float, the token
 * embedding and the output head with its dense kernel (optionally requantized to Q8_0), then the
 * ternary weights handed on to load_lut.c; bitnet_model_load, bitnet_model_free and the model's
 * accessors (model.h). */
#include "model/model_internal.h"

#include <math.h>

#include "base/detmath.h"
#include "base/mem.h"
#include "kernels/lut/lut.h"

#ifndef BITNET_LUT_TABLE_DEFAULT
#define BITNET_LUT_TABLE_DEFAULT "default"
#endif

/* ne[0..n_dims-1] as "[a, b]" into buf. */
static void format_ne(char *buf, size_t size, const int64_t *ne, int n_dims) {
    int o = snprintf(buf, size, "[");
    for (int i = 0; i < n_dims && o > 0 && (size_t)o < size; i++) {
        o += snprintf(buf + o, size - (size_t)o, "%s%lld", i ? ", " : "", (long long)ne[i]);
    }
    if (o > 0 && (size_t)o < size) snprintf(buf + o, size - (size_t)o, "]");
}

/* Find a tensor and check its shape against the hparams: expected ne[0..n_dims-1], trailing dims 1. */
static bitnet_status find_tensor(loader *ld, const char *name, int n_dims, int64_t ne0, int64_t ne1, bool required,
                                 const bitnet_gguf_tensor_info **out) {
    *out = NULL;
    const bitnet_gguf_tensor_info *ti = bitnet_gguf_find_tensor(ld->g, name);
    if (!ti) {
        if (!required) return BITNET_OK;
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: missing required tensor '%s'", ld->path, name);
    }
    const int64_t want[4] = {ne0, n_dims > 1 ? ne1 : 1, 1, 1};
    bool ok = true;
    for (int i = 0; i < 4; i++) ok = ok && ti->ne[i] == want[i];
    if (!ok) {
        char got_s[96], want_s[64];
        format_ne(got_s, sizeof got_s, ti->ne, ti->n_dims);
        format_ne(want_s, sizeof want_s, want, n_dims);
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                           "%s: tensor '%s' has shape ne = %s, expected %s from the hyperparameters", ld->path, name,
                           got_s, want_s);
    }
    *out = ti;
    return BITNET_OK;
}

/* A norm weight (F32 or F16) [n] as floats: F32 data is used in place (GGUF data is 32-byte aligned),
 * F16 is converted into a copy listed in m->vec_owned. */
static bitnet_status load_vector_opt(loader *ld, bitnet_model *m, const char *name, int64_t n, bool required,
                                     const float **out) {
    const bitnet_gguf_tensor_info *ti = NULL;
    *out = NULL;
    bitnet_status st = find_tensor(ld, name, 1, n, 1, required, &ti);
    if (st != BITNET_OK || !ti) return st;
    if (ti->type != BITNET_TYPE_F32 && ti->type != BITNET_TYPE_F16) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (id %d); expected F32 or F16",
                           ld->path, name, bitnet_type_name(ti->type), ti->type);
    }
    if (ld->check_only) {
        *out = NULL;
        return BITNET_OK;
    }
    if (ti->type == BITNET_TYPE_F32 && (uintptr_t)ti->data % _Alignof(float) == 0) {
        *out = (const float *)ti->data;
        return BITNET_OK;
    }
    float *v = bitnet_malloc((size_t)n * sizeof(float));
    if (!v) return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory for tensor '%s'", ld->path, name);
    m->vec_owned[m->n_vec_owned++] = v;
    *out = v;
    return bitnet_row_to_f32(ti->type, ti->data, v, n, ld->err);
}

static bitnet_status load_vector(loader *ld, bitnet_model *m, const char *name, int64_t n, const float **out) {
    return load_vector_opt(ld, m, name, n, true, out);
}

/* A projection weight `name` with K inputs and M outputs (ne = [K, M]) and its optional
 * "<name without .weight>.scale" [1] tensor. Ternary types are only described here; they are
 * handed to the LUT host by prepare_lut_weights once all shapes are known. With ld->check_only only the
 * shapes and types are checked and *w stays zero (a layer of another pipeline stage). */
static bitnet_status load_weight(loader *ld, const char *name, int64_t K, int64_t M, weight *w) {
    const bitnet_gguf_tensor_info *ti;
    bitnet_status st = find_tensor(ld, name, 2, K, M, true, &ti);
    if (st != BITNET_OK) return st;
    memset(w, 0, sizeof *w);
    snprintf(w->t.name, sizeof w->t.name, "%s", name);
    w->t.type = ti->type;
    w->t.n_dims = 2;
    w->t.ne[0] = K;
    w->t.ne[1] = M;
    w->t.ne[2] = w->t.ne[3] = 1;
    w->t.data = (void *)ti->data; /* read-only mapping: the LUT host reads it, never writes */
    w->t.nbytes = ti->nbytes;
    w->M = M;
    w->K = K;
    w->out_scale = 1.0f;

    switch (ti->type) {
    case BITNET_TYPE_I2_S:
    case BITNET_TYPE_TL1:
    case BITNET_TYPE_TL2:
        w->lut = true;
        w->t.nb[0] = 1;
        w->t.nb[1] = (size_t)K / 4;
        break;
    case BITNET_TYPE_F32:
        w->dense = (const float *)ti->data;
        w->t.nb[0] = 4;
        w->t.nb[1] = (size_t)K * 4;
        break;
    case BITNET_TYPE_F16: {
        if (ld->check_only) break;
        if (ld->in_place) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                               "%s: tensor '%s' is F16: F16 projection weights (%lld x %lld) are not run by a node that "
                               "uses its weights in place (a microcontroller, the bare-metal build); use the model's "
                               "F32, I2_S, TL1 or TL2 file",
                               ld->path, name, (long long)M, (long long)K);
        }
        if ((uintptr_t)ti->data % _Alignof(uint16_t) != 0) { /* GGUF aligns data to 32 bytes; a file can say less */
            w->dense_owned = bitnet_malloc((size_t)M * (size_t)K * sizeof(float));
            if (!w->dense_owned)
                return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory for '%s'", ld->path, name);
            st = bitnet_row_to_f32(BITNET_TYPE_F16, ti->data, w->dense_owned, M * K, ld->err);
            if (st != BITNET_OK) return st;
            w->dense = w->dense_owned;
        } else {
            w->dense_f16 = (const uint16_t *)ti->data; /* multiplied as stored (forward.c matmul) */
        }
        w->t.nb[0] = 2;
        w->t.nb[1] = (size_t)K * 2;
        break;
    }
    default:
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' has type %s (id %d); projection weights must be I2_S, TL1, TL2, F32 or F16",
                           ld->path, name, bitnet_type_name(ti->type), ti->type);
    }
    w->t.nb[2] = w->t.nb[3] = w->t.nb[1] * (size_t)M;

    /* optional per-projection output scale, e.g. blk.0.attn_q.scale */
    char sname[128];
    size_t base = strlen(name);
    if (base > 7 && strcmp(name + base - 7, ".weight") == 0) base -= 7;
    snprintf(sname, sizeof sname, "%.*s.scale", (int)base, name);
    const bitnet_gguf_tensor_info *si;
    if ((st = find_tensor(ld, sname, 1, 1, 1, false, &si)) != BITNET_OK) return st;
    if (si && si->type != BITNET_TYPE_F32 && si->type != BITNET_TYPE_F16) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (id %d); expected F32 or F16",
                           ld->path, sname, bitnet_type_name(si->type), si->type);
    }
    if (ld->check_only) { /* another stage's weight: checked, not used */
        memset(w, 0, sizeof *w);
        return BITNET_OK;
    }
    if (si) {
        if ((st = bitnet_row_to_f32(si->type, si->data, &w->out_scale, 1, ld->err)) != BITNET_OK) return st;
        if (!isfinite(w->out_scale)) {
            return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: tensor '%s' holds %g, not a finite scale", ld->path,
                               sname, (double)w->out_scale);
        }
        w->has_scale = true;
    }
    return BITNET_OK;
}

/* AUTO: TL2 on x86-64 with AVX2, TL1 on AArch64, the I2_S reference path elsewhere. STORED: the
 * stored type of the first ternary projection weight (any path when there is none). */
static bitnet_kernel_path resolve_path(bitnet_kernel_path p, const bitnet_model *m) {
    if (p == BITNET_PATH_STORED) {
        for (int32_t l = m->l_begin; l < m->l_end; l++) {
            for (int i = 0; i < N_PROJ; i++) {
                const weight *w = layer_proj(&m->layers[l], i);
                if (!w->lut) continue;
                return w->t.type == BITNET_TYPE_TL1 ? BITNET_PATH_TL1
                       : w->t.type == BITNET_TYPE_TL2 ? BITNET_PATH_TL2
                                                      : BITNET_PATH_I2S;
            }
        }
        return BITNET_PATH_I2S;
    }
    if (p != BITNET_PATH_AUTO) return p;
#if defined(__x86_64__) || defined(_M_X64)
    return bitnet_cpu_supports("avx2") ? BITNET_PATH_TL2 : BITNET_PATH_I2S;
#elif defined(__aarch64__)
    return BITNET_PATH_TL1;
#else
    return BITNET_PATH_I2S;
#endif
}

/* Bytes of one row of n elements of a dense type (bitnet_type_nbytes); 0 when n does not fit its blocks. */
static size_t dense_row_bytes(int type, int64_t n) {
    size_t b = 0;
    bitnet_error e;
    if (bitnet_type_nbytes(type, 1, &n, &b, &e) != BITNET_OK) return 0;
    return b;
}

/* Every tensor of the file must be one the graph uses: an ignored tensor (a bias, an extra norm, a
 * frequency-factor table) would silently change the model's meaning, so it is refused by name, as
 * llama.cpp refuses files with tensors its architecture does not create. Known names: token_embd,
 * output, output_norm, blk.N.{attn_norm, ffn_norm, the 7 projections, their optional .scale} and, with
 * sub-norms, blk.N.{attn_sub_norm, ffn_sub_norm}; N < block_count. Also accepted: blk.N.<proj>.weight_scale,
 * the per-tensor scale bitnet.cpp's Python writers add after a TL1/TL2 weight ("<name>_scale"). formats.md
 * measured files where it is not listed in the tensor table; where a writer does list it, it holds the same
 * float as the weight's own 32-byte tail, which is what the loader reads, so it changes nothing. */
static bool tensor_known(const char *name, const bitnet_hparams *hp) {
    static const char *const global[] = {"token_embd.weight", "output.weight", "output_norm.weight"};
    static const char *const proj[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (size_t i = 0; i < sizeof global / sizeof global[0]; i++) {
        if (strcmp(name, global[i]) == 0) return true;
    }
    if (strncmp(name, "blk.", 4) != 0) return false;
    const char *p = name + 4;
    long l = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 8) {
        l = l * 10 + (*p++ - '0');
        digits++;
    }
    if (digits == 0 || (digits > 1 && name[4] == '0') || *p != '.' || l >= hp->n_layer) return false;
    p++;
    const char *rest = p;
    if (strcmp(rest, "attn_norm.weight") == 0 || strcmp(rest, "ffn_norm.weight") == 0) return true;
    if (hp->qk_norm && (strcmp(rest, "attn_q_norm.weight") == 0 || strcmp(rest, "attn_k_norm.weight") == 0))
        return true;
    if (hp->post_norms && (strcmp(rest, "post_attention_norm.weight") == 0 || strcmp(rest, "post_ffw_norm.weight") == 0))
        return true;
    if (bitnet_arch_find(hp->arch, strlen(hp->arch))->norm_in) {
        for (size_t i = 0; i < sizeof proj / sizeof proj[0]; i++) {
            const size_t n = strlen(proj[i]);
            if (strncmp(rest, proj[i], n) == 0 && strcmp(rest + n, "_norm_in.weight") == 0) return true;
        }
    }
    if (hp->sub_norms && (strcmp(rest, "attn_sub_norm.weight") == 0 || strcmp(rest, "ffn_sub_norm.weight") == 0))
        return true;
    for (size_t i = 0; i < sizeof proj / sizeof proj[0]; i++) {
        const size_t n = strlen(proj[i]);
        if (strncmp(rest, proj[i], n) == 0 && (strcmp(rest + n, ".weight") == 0 || strcmp(rest + n, ".scale") == 0 ||
                                            strcmp(rest + n, ".weight_scale") == 0))
            return true;
    }
    return false;
}

/* The N of a "blk.N." tensor name, -1 for a name without one (token_embd, output, output_norm). */
static int32_t tensor_layer(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    long l = 0;
    for (const char *p = name + 4; *p >= '0' && *p <= '9' && l < MAX_LAYERS; p++) l = l * 10 + (*p - '0');
    return (int32_t)l;
}

static bitnet_status check_all_tensors_known(loader *ld, const bitnet_hparams *hp) {
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(ld->g); i++) {
        const char *name = bitnet_gguf_tensor(ld->g, i)->name;
        if (tensor_known(name, hp)) continue;
        if (strcmp(name, "rope_freqs.weight") == 0) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                               "%s: tensor 'rope_freqs.weight' (RoPE frequency factors, Llama 3.1 style scaling) is "
                               "not supported",
                               ld->path);
        }
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' is not part of architecture '%s'%s (an ignored tensor would change the "
                           "model's meaning)",
                           ld->path, name, hp->arch,
                           !hp->sub_norms && strstr(name, "sub_norm") ? " (this graph has no sub-norms)" : "");
    }
    return BITNET_OK;
}

/* The head (m->head: output.weight or the tied token_embd) requantized to Q8_0 rows into
 * m->head_owned (bitnet_model_params.head_type): each row decoded to float by its stored type's
 * definition, then ggml's Q8_0 reference quantizer per 32-value block (bitnet_quantize_row_q8_0:
 * d = max|x|/127 as binary16, q = round(x · 1/d)). One thread, rows in order: the result depends only on
 * the file. Sets head_type, head_data and head_row_bytes. */
static bitnet_status requantize_head_q8_0(loader *ld, bitnet_model *m) {
    const int64_t D = m->hp.n_embd, V = m->hp.n_vocab;
    if (D % 32 != 0) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: head '%s' cannot be requantized to Q8_0: rows of n_embd = %lld values are not a "
                           "multiple of the 32-value block",
                           ld->path, m->head->name, (long long)D);
    }
    const size_t nb = (size_t)(D / 32);
    m->head_owned = bitnet_malloc((size_t)V * nb * sizeof(bitnet_block_q8_0));
    float *row = bitnet_malloc((size_t)D * sizeof(float));
    if (!row || !m->head_owned) {
        bitnet_free(row);
        return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory for the Q8_0 head (%lld × %lld)", ld->path,
                           (long long)V, (long long)D);
    }
    const uint8_t *src = (const uint8_t *)m->head->data;
    for (int64_t r = 0; r < V; r++) {
        bitnet_row_to_f32(m->head->type, src + (size_t)r * m->head_row_bytes, row, D, NULL);
        bitnet_quantize_row_q8_0(row, m->head_owned + (size_t)r * nb, D);
    }
    bitnet_free(row);
    m->head_type = BITNET_TYPE_Q8_0;
    m->head_data = (const uint8_t *)m->head_owned;
    m->head_row_bytes = nb * sizeof(bitnet_block_q8_0);
    return BITNET_OK;
}

/* The head's dense kernel: the one of its type's dense_dot_type (types.h: F32, F16 and Q8_0 rows are
 * multiplied as stored (BF16 by a kernel that gives the F32 kernel's floats), Q6_K rows are converted to float and
 * use the F32 kernel). The type was checked
 * against the traits before. */
static void choose_head_kernel(bitnet_model *m) {
    m->head_kernel = bitnet_dense_kernel_for(bitnet_type_traits_of(m->head_type)->dense_dot_type);
    m->head_decode = m->head_kernel->type != m->head_type;
}

/* n_vocab without a loaded vocabulary: the length of tokenizer.ggml.tokens into *n, -1 when the file has
 * no such key. Errors (naming the file and the key): not an array of strings, or more than MAX_VOCAB. */
static bitnet_status token_count(loader *ld, int64_t *n) {
    *n = -1;
    static const char key[] = "tokenizer.ggml.tokens";
    if (bitnet_gguf_find_kv(ld->g, key) < 0) return BITNET_OK;
    bitnet_gguf_type et;
    uint64_t len = 0;
    bitnet_status st = bitnet_gguf_get_arr(ld->g, key, &et, &len, NULL, ld->err);
    if (st != BITNET_OK) return st;
    if (et != BITNET_GGUF_STRING || len == 0 || len > (uint64_t)MAX_VOCAB) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' must be an array of 1 to %d strings, got %llu %s",
                           ld->path, key, MAX_VOCAB, (unsigned long long)len, bitnet_gguf_type_name(et));
    }
    *n = (int64_t)len;
    return BITNET_OK;
}

/* GELU, tanh approximation (Hendrycks & Gimpel 2016): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), in double
 * (tanh through base/detmath.h's exp, so the same bits everywhere), for every binary16 code x, rounded to
 * float and then to binary16: a table of the structure ggml's CPU GELU reads (GGML_GELU_FP16; ggml fills it
 * with float tanhf, so a code whose GELU lies near a binary16 rounding boundary can differ by one ulp), so
 * the FFN of a GELU model rounds as llama.cpp's does. Errors: BITNET_ERR_NOMEM. */
static bitnet_status gelu_table(loader *ld, bitnet_model *m) {
    m->gelu_f16 = bitnet_malloc(65536 * sizeof(float));
    if (!m->gelu_f16) return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory for the GELU table", ld->path);
    for (uint32_t h = 0; h < 65536; h++) {
        const double x = (double)bitnet_fp16_to_fp32((uint16_t)h);
        const double y = 0.7978845608028654 * (x + 0.044715 * x * x * x); /* √(2/π) */
        const double e = bitnet_exp_d(2.0 * fabs(y));
        const double th = isinf(e) ? 1.0 : 1.0 - 2.0 / (e + 1.0);
        const double g = 0.5 * x * (1.0 + (y < 0 ? -th : th));
        m->gelu_f16[h] = bitnet_fp16_to_fp32(bitnet_fp32_to_fp16((float)g));
    }
    return BITNET_OK;
}

/* The params (NULL: defaults) checked, with the table name resolved; before any file is opened. */
static bitnet_status check_params(const bitnet_model_params **params, const char **table_name, bitnet_error *err) {
    static const bitnet_model_params defaults = {BITNET_PATH_AUTO, NULL, 0, NULL, false, 0, 0, false, 0};
    if (!*params) *params = &defaults;
    const bitnet_model_params *p = *params;
    *table_name = p->lut_table ? p->lut_table : BITNET_LUT_TABLE_DEFAULT;
    if (strcmp(*table_name, "default") != 0 && strcmp(*table_name, "pretuned") != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "lut table '%s' is neither 'default' nor 'pretuned'",
                           *table_name);
    }
    switch (p->path) {
    case BITNET_PATH_AUTO:
    case BITNET_PATH_I2S:
    case BITNET_PATH_TL1:
    case BITNET_PATH_TL2:
    case BITNET_PATH_STORED: break;
    default: return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "unknown kernel path %d", (int)p->path);
    }
    if (p->head_type != 0 && p->head_type != BITNET_TYPE_Q8_0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "head_type %d is neither 0 (as stored) nor %d (Q8_0)",
                           p->head_type, BITNET_TYPE_Q8_0);
    }
    if (p->first_layer < 0 || p->n_layers < 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "stage layers: first_layer %d and n_layers %d must be >= 0",
                           (int)p->first_layer, (int)p->n_layers);
    }
    if (!p->skip_embd_head && p->first_layer > 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "stage layers: the stage with the embedding and the head starts at layer 0, not %d",
                           (int)p->first_layer);
    }
    if (p->i2s_layout < BITNET_I2S_LAYOUT_AUTO || p->i2s_layout > BITNET_I2S_LAYOUT_ROWS4) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "i2s_layout %d is not auto (0), x86 (1), arm64 (2) or rows4 (3)",
                           p->i2s_layout);
    }
    if (p->head_type != 0 && p->weights_in_place) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "head_type Q8_0 makes a requantized copy of the head, which weights_in_place excludes");
    }
    return BITNET_OK;
}

/* The model of the opened file g (owned from here on: closed with the model, or on failure) with params
 * checked by check_params. path names it in messages; with_vocab loads the tokenizer vocabulary (text/),
 * else n_vocab comes from the keys. */
static bitnet_status load_from_gguf(bitnet_gguf *g, const char *path, const bitnet_model_params *params,
                                    const char *table_name, bool with_vocab, bitnet_model **out, bitnet_error *err) {
    bitnet_dense_init();

    bitnet_model *m = bitnet_calloc(1, sizeof *m);
    if (!m) {
        bitnet_gguf_close(g);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    m->gguf = g;
    loader ld = {.path = path, .g = g, .err = err, .in_place = params->weights_in_place};
#ifdef BITNET_BARE_METAL
    ld.in_place = true; /* nothing else fits a microcontroller */
#endif
    bitnet_status st;
    if ((st = bitnet_model_load_hparams(&ld, &m->hp)) != BITNET_OK) goto fail;
    bitnet_hparams *hp = &m->hp;
    if (hp->ffn_act == BITNET_ACT_GELU && (st = gelu_table(&ld, m)) != BITNET_OK) goto fail;
    m->q_dim = hp->n_head * hp->n_embd_head;
    m->kv_dim = hp->n_head_kv * hp->n_embd_head;
    m->l_begin = params->first_layer;
    m->l_end = params->n_layers ? params->first_layer + params->n_layers : hp->n_layer;
    m->io = !params->skip_embd_head;
    if (m->l_begin >= hp->n_layer || m->l_end > hp->n_layer || m->l_end <= m->l_begin) {
        st = bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: stage layers %d .. %d are not within the model's %d layers",
                         path, (int)m->l_begin, (int)m->l_end - 1, (int)hp->n_layer);
        goto fail;
    }

    int64_t n_tok = -1;
#ifdef BITNET_BARE_METAL
    (void)with_vocab; /* no text/ vocabulary in this build */
#else
    if (with_vocab) {
        if ((st = bitnet_vocab_load(m->gguf, &m->vocab, err)) != BITNET_OK) goto fail;
        n_tok = bitnet_vocab_n_tokens(m->vocab);
    }
#endif
    if (!m->vocab && (st = token_count(&ld, &n_tok)) != BITNET_OK) goto fail;
    if ((st = bitnet_model_int_key(&ld, "vocab_size", n_tok < 0, n_tok < 0 ? 0 : n_tok, 1, MAX_VOCAB,
                                   &hp->n_vocab)) != BITNET_OK)
        goto fail;
    if (n_tok >= 0 && hp->n_vocab != n_tok) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s.vocab_size = %d but tokenizer.ggml.tokens has %lld entries",
                         path, ld.arch, (int)hp->n_vocab, (long long)n_tok);
        goto fail;
    }

    /* token embeddings (also the output head unless output.weight exists) */
    if ((st = find_tensor(&ld, "token_embd.weight", 2, hp->n_embd, hp->n_vocab, true, &m->embd)) != BITNET_OK)
        goto fail;
    if ((st = find_tensor(&ld, "output.weight", 2, hp->n_embd, hp->n_vocab, false, &m->head)) != BITNET_OK) goto fail;
    hp->tied_output = m->head == NULL;
    if (!m->head) m->head = m->embd;
    const bitnet_gguf_tensor_info *dense2[2] = {m->embd, m->head};
    for (int i = 0; i < 2; i++) {
        const int t = dense2[i]->type;
        const bitnet_type_traits *tt = bitnet_type_traits_of(t);
        if (!tt || tt->dense_dot_type < 0) { /* F32, F16, BF16, Q8_0 and Q6_K have a head kernel */
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has type %s (id %d); expected F32, F16, BF16, Q8_0 or Q6_K", path,
                             dense2[i]->name, bitnet_type_name(t), t);
            goto fail;
        }
    }
    m->embd_row_bytes = dense_row_bytes(m->embd->type, hp->n_embd);
    m->head_row_bytes = dense_row_bytes(m->head->type, hp->n_embd);
    if (m->embd_row_bytes == 0 || m->head_row_bytes == 0) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: rows of %d elements do not fit the embedding type", path,
                         (int)hp->n_embd);
        goto fail;
    }
    m->head_type = m->head->type;
    m->head_data = (const uint8_t *)m->head->data;
    if (m->io && params->head_type == BITNET_TYPE_Q8_0 && m->head->type != BITNET_TYPE_Q8_0 &&
        (st = requantize_head_q8_0(&ld, m)) != BITNET_OK)
        goto fail;
    choose_head_kernel(m);
    m->layers = bitnet_calloc((size_t)hp->n_layer, sizeof *m->layers);
    m->vec_owned = bitnet_calloc((size_t)hp->n_layer * VEC_PER_LAYER + 1, sizeof *m->vec_owned);
    if (!m->layers || !m->vec_owned) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for %d layers", path, (int)hp->n_layer);
        goto fail;
    }
    ld.check_only = !m->io;
    if ((st = load_vector(&ld, m, "output_norm.weight", hp->n_embd, &m->output_norm)) != BITNET_OK) goto fail;
    for (int32_t l = 0; l < hp->n_layer; l++) {
        layer *L = &m->layers[l];
        ld.check_only = l < m->l_begin || l >= m->l_end;
        char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, (int)l), name)
        if ((st = load_vector(&ld, m, NAME("attn_norm.weight"), hp->n_embd, &L->attn_norm)) != BITNET_OK) goto fail;
        if (hp->sub_norms &&
            (st = load_vector(&ld, m, NAME("attn_sub_norm.weight"), m->q_dim, &L->attn_sub_norm)) != BITNET_OK)
            goto fail;
        if ((st = load_vector(&ld, m, NAME("ffn_norm.weight"), hp->n_embd, &L->ffn_norm)) != BITNET_OK) goto fail;
        if (hp->sub_norms &&
            (st = load_vector(&ld, m, NAME("ffn_sub_norm.weight"), hp->n_ff, &L->ffn_sub_norm)) != BITNET_OK)
            goto fail;
        if ((st = load_weight(&ld, NAME("attn_q.weight"), hp->n_embd, m->q_dim, &L->wq)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("attn_k.weight"), hp->n_embd, m->kv_dim, &L->wk)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("attn_v.weight"), hp->n_embd, m->kv_dim, &L->wv)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("attn_output.weight"), m->q_dim, hp->n_embd, &L->wo)) != BITNET_OK)
            goto fail;
        if ((st = load_weight(&ld, NAME("ffn_gate.weight"), hp->n_embd, hp->n_ff, &L->w_gate)) != BITNET_OK)
            goto fail;
        if ((st = load_weight(&ld, NAME("ffn_up.weight"), hp->n_embd, hp->n_ff, &L->w_up)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd, &L->w_down)) != BITNET_OK)
            goto fail;
        for (int i = 0; i < N_PROJ; i++) {
            const weight *w = layer_proj(L, i);
            if (w->dense_f16) m->has_dense_f16 = true;
            if (w->K > m->max_k) m->max_k = w->K;
        }
        /* qwen3 / gemma3 (docs/EMBEDDINGS.md §1): QK head norms, post-norms, optional per-projection norms */
        if (hp->qk_norm &&
            ((st = load_vector(&ld, m, NAME("attn_q_norm.weight"), hp->n_embd_head, &L->attn_q_norm)) != BITNET_OK ||
             (st = load_vector(&ld, m, NAME("attn_k_norm.weight"), hp->n_embd_head, &L->attn_k_norm)) != BITNET_OK))
            goto fail;
        if (hp->post_norms &&
            ((st = load_vector(&ld, m, NAME("post_attention_norm.weight"), hp->n_embd, &L->post_attn_norm)) !=
                 BITNET_OK ||
             (st = load_vector(&ld, m, NAME("post_ffw_norm.weight"), hp->n_embd, &L->post_ffw_norm)) != BITNET_OK))
            goto fail;
        if (bitnet_arch_find(hp->arch, strlen(hp->arch))->norm_in) {
            static const char *const pn[N_PROJ] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                   "ffn_gate", "ffn_up", "ffn_down"};
            /* all seven or none: bitnet.cpp's graphs treat a partial set differently from each other (its
             * qwen3 graph skips the FFN ones without ffn_gate_norm_in), so a partial set is refused */
            int have = 0, missing = -1;
            for (int i = 0; i < N_PROJ; i++) {
                snprintf(name, sizeof name, "blk.%d.%s_norm_in.weight", (int)l, pn[i]);
                if (bitnet_gguf_find_tensor(g, name)) have++;
                else if (missing < 0) missing = i;
            }
            if (have != 0 && have != N_PROJ) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT,
                                 "%s: layer %d has %d of the 7 per-projection norms (missing "
                                 "'blk.%d.%s_norm_in.weight'): a partial set is refused",
                                 path, (int)l, have, (int)l, pn[missing]);
                goto fail;
            }
            for (int i = 0; i < N_PROJ && have; i++) {
                snprintf(name, sizeof name, "blk.%d.%s_norm_in.weight", (int)l, pn[i]);
                const int64_t K = i == 3 ? m->q_dim : i == 6 ? hp->n_ff : hp->n_embd; /* the projection's input */
                if ((st = load_vector_opt(&ld, m, name, K, true, &L->norm_in[i])) != BITNET_OK) goto fail;
                if (L->norm_in[i]) m->has_norm_in = true;
            }
        }
#undef NAME
    }

    ld.check_only = false;
    if ((st = check_all_tensors_known(&ld, hp)) != BITNET_OK) goto fail;
    m->path = resolve_path(params->path, m);
    if ((st = bitnet_model_read_i2s_layout(&ld, m, params->i2s_layout)) != BITNET_OK) goto fail;
    if ((st = bitnet_model_prepare_lut_weights(&ld, m, table_name, params->lut_tiles)) != BITNET_OK) goto fail;
    if (m->head_owned) { /* after the summary's dense part (model_internal.h) */
        const size_t len = strlen(m->summary_tail);
        snprintf(m->summary_tail + len, sizeof m->summary_tail - len, "%shead: Q8_0 (requantized from %s at load)",
                 strlen(m->summary) ? "; " : "", bitnet_type_name(m->head->type));
        bitnet_model_summary_batch(m);
    }

    for (int64_t i = 0; i < bitnet_gguf_n_tensors(m->gguf); i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(m->gguf, i);
        m->n_params += (uint64_t)(ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3]);
        m->size_bytes += ti->nbytes;
        const int32_t tl = tensor_layer(ti->name);
        if (tl < 0 ? m->io : tl >= m->l_begin && tl < m->l_end) m->stage_bytes += ti->nbytes;
    }
    *out = m;
    return BITNET_OK;

fail:
    bitnet_model_free(m);
    return st;
}

#ifndef BITNET_BARE_METAL
bitnet_status bitnet_model_load(const char *path, const bitnet_model_params *params, bitnet_model **out,
                                bitnet_error *err) {
    if (!path || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_model_load: NULL path or out");
    *out = NULL;
    const char *table_name;
    bitnet_status st = check_params(&params, &table_name, err);
    if (st != BITNET_OK) return st;
    bitnet_gguf *g = NULL;
    if ((st = bitnet_gguf_open(path, &g, err)) != BITNET_OK) return st;
    return load_from_gguf(g, path, params, table_name, true, out, err);
}
#endif

bitnet_status bitnet_model_load_memory(const void *image, size_t size, const char *name,
                                       const bitnet_model_params *params, bitnet_model **out, bitnet_error *err) {
    if (!out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_model_load_memory: NULL out");
    *out = NULL;
    if (!name) name = "(model image)";
    const char *table_name;
    bitnet_status st = check_params(&params, &table_name, err);
    if (st != BITNET_OK) return st;
    bitnet_gguf *g = NULL;
    if ((st = bitnet_gguf_open_memory(image, size, name, BITNET_GGUF_NO_STRING_INDEX, &g, err)) != BITNET_OK) return st;
    return load_from_gguf(g, name, params, table_name, false, out, err);
}

void bitnet_model_free(bitnet_model *m) {
    if (!m) return;
    /* the model's repacked weights are entries of the LUT host's table: released here (other models keep
     * theirs; the table goes with its last entry) */
    if (m->lut_used && m->layers) {
        for (int32_t l = m->l_begin; l < m->l_end; l++) {
            for (int p = 0; p < N_PROJ; p++) bitnet_lut_release_tensor(&layer_proj(&m->layers[l], p)->t);
        }
    }
    if (m->layers) {
        for (int32_t l = m->hp.n_layer; l-- > 0;) {
            for (int p = N_PROJ; p-- > 0;) {
                bitnet_free(layer_proj(&m->layers[l], p)->i2s_owned);
                bitnet_free(layer_proj(&m->layers[l], p)->dense_owned);
            }
        }
    }
    for (int32_t i = m->n_vec_owned; i-- > 0;) bitnet_free(m->vec_owned[i]);
    bitnet_free(m->vec_owned);
    bitnet_free(m->layers);
    bitnet_free(m->head_owned);
    bitnet_free(m->gelu_f16);
#ifndef BITNET_BARE_METAL
    bitnet_vocab_free(m->vocab);
#endif
    bitnet_gguf_close(m->gguf);
    bitnet_free(m);
}

const bitnet_hparams *bitnet_model_hparams(const bitnet_model *m) { return &m->hp; }
const bitnet_vocab *bitnet_model_vocab(const bitnet_model *m) { return m->vocab; }
bitnet_kernel_path bitnet_model_path(const bitnet_model *m) { return m->path; }
uint64_t bitnet_model_n_params(const bitnet_model *m) { return m->n_params; }
uint64_t bitnet_model_size_bytes(const bitnet_model *m) { return m->size_bytes; }
const char *bitnet_model_kernel_summary(const bitnet_model *m) { return m->summary; }
int bitnet_model_i2s_layout(const bitnet_model *m) { return m->i2s_layout; }
const char *bitnet_model_i2s_note(const bitnet_model *m) { return m->i2s_note; }
uint64_t bitnet_model_stage_bytes(const bitnet_model *m) { return m->stage_bytes; }
void bitnet_model_stage(const bitnet_model *m, int32_t *first, int32_t *end, bool *embd_head) {
    if (first) *first = m->l_begin;
    if (end) *end = m->l_end;
    if (embd_head) *embd_head = m->io;
}
int bitnet_model_head_type(const bitnet_model *m) { return m->head_type; }
bool bitnet_model_head_requantized(const bitnet_model *m) { return m->head_owned != NULL; }
const char *bitnet_kernel_path_name(bitnet_kernel_path p) {
    switch (p) {
    case BITNET_PATH_I2S: return "I2_S";
    case BITNET_PATH_TL1: return "TL1";
    case BITNET_PATH_TL2: return "TL2";
    case BITNET_PATH_STORED: return "stored";
    default: return "auto";
    }
}
