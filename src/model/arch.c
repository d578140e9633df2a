/* arch.c — the architecture of a GGUF file (general.architecture, looked up in the table of base/arch.c;
 * the graphs and their sources: model.h) and the hyperparameters read from its <arch>.* keys with their
 * ranges and defaults (bitnet_model_load_hparams). */
#include "model/model_internal.h"

#include <math.h>

static bitnet_status key_present(loader *ld, const char *key) {
    if (bitnet_gguf_find_kv(ld->g, key) < 0) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: missing required key '%s'", ld->path, key);
    }
    return BITNET_OK;
}

bitnet_status bitnet_model_int_key(loader *ld, const char *suffix, bool required, int64_t dflt, int64_t lo,
                                   int64_t hi, int32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    int64_t v = dflt;
    if (bitnet_gguf_find_kv(ld->g, key) >= 0) {
        bitnet_status st = bitnet_gguf_get_i64(ld->g, key, &v, ld->err);
        if (st != BITNET_OK) return st;
    } else if (required) {
        return key_present(ld, key);
    }
    if (v < lo || v > hi) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = %lld is outside [%lld, %lld]", ld->path,
                           key, (long long)v, (long long)lo, (long long)hi);
    }
    *out = (int32_t)v;
    return BITNET_OK;
}

/* Read <arch>.<suffix> as a finite float > 0. */
static bitnet_status get_pos_float_key(loader *ld, const char *suffix, bool required, float dflt, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    float v = dflt;
    if (bitnet_gguf_find_kv(ld->g, key) >= 0) {
        bitnet_status st = bitnet_gguf_get_f32(ld->g, key, &v, ld->err);
        if (st != BITNET_OK) return st;
    } else if (required) {
        return key_present(ld, key);
    }
    if (!(v > 0.0f) || isinf(v)) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = %g must be a finite number > 0", ld->path,
                           key, (double)v);
    }
    *out = v;
    return BITNET_OK;
}

bitnet_status bitnet_model_load_hparams(loader *ld, bitnet_hparams *hp) {
    bitnet_status st;
    memset(hp, 0, sizeof *hp);

    const char *s;
    size_t len;
    if ((st = key_present(ld, "general.architecture")) != BITNET_OK) return st;
    if ((st = bitnet_gguf_get_str(ld->g, "general.architecture", &s, &len, ld->err)) != BITNET_OK) return st;
    const bitnet_arch_info *ai = bitnet_arch_find(s, len);
    if (!ai) {
        char names[256];
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: unsupported architecture '%.*s' (general.architecture); this build runs %s",
                           ld->path, (int)(len > 64 ? 64 : len), s,
                           bitnet_arch_list(names, sizeof names, "'", ", ", " and "));
    }
    memcpy(ld->arch, s, len);
    ld->arch[len] = '\0';
    memcpy(hp->arch, s, len);
    hp->arch[len] = '\0';
    hp->arch_id = ai->graph;
    hp->ffn_act = ai->ffn_act;
    hp->rope_type = ai->rope;
    hp->sub_norms = ai->sub_norms;
    hp->qk_norm = ai->qk_norm;
    hp->post_norms = ai->post_norms;
    hp->embd_scale = ai->embd_scale;

    if ((st = bitnet_model_int_key(ld, "block_count", true, 0, 1, MAX_LAYERS, &hp->n_layer)) != BITNET_OK) return st;
    if ((st = bitnet_model_int_key(ld, "context_length", true, 0, 1, MAX_CTX, &hp->n_ctx_train)) != BITNET_OK)
        return st;
    if ((st = bitnet_model_int_key(ld, "embedding_length", true, 0, 1, MAX_DIM, &hp->n_embd)) != BITNET_OK) return st;
    if ((st = bitnet_model_int_key(ld, "feed_forward_length", true, 0, 1, MAX_DIM, &hp->n_ff)) != BITNET_OK) return st;
    if ((st = bitnet_model_int_key(ld, "attention.head_count", true, 0, 1, MAX_DIM, &hp->n_head)) != BITNET_OK)
        return st;
    /* head_count_kv defaults to head_count (no GQA), as in llama.cpp */
    if ((st = bitnet_model_int_key(ld, "attention.head_count_kv", false, hp->n_head, 1, MAX_DIM, &hp->n_head_kv)) !=
        BITNET_OK)
        return st;
    if ((st = get_pos_float_key(ld, "attention.layer_norm_rms_epsilon", true, 0.0f, &hp->rms_eps)) != BITNET_OK)
        return st;
    /* llama.cpp's default RoPE base when the key is absent */
    if ((st = get_pos_float_key(ld, "rope.freq_base", false, 10000.0f, &hp->rope_freq_base)) != BITNET_OK)
        return st;

    /* RoPE scaling: "linear" (or "none") only; frequency scale = 1 / factor. */
    char key[128];
    hp->rope_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->arch);
    bool linear = true;
    if (bitnet_gguf_find_kv(ld->g, key) >= 0) {
        if ((st = bitnet_gguf_get_str(ld->g, key, &s, &len, ld->err)) != BITNET_OK) return st;
        if (len == 4 && memcmp(s, "none", 4) == 0) {
            linear = false;
        } else if (!(len == 6 && memcmp(s, "linear", 6) == 0)) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                               "%s: key '%s' = '%.*s' is not supported (only 'linear' and 'none')", ld->path, key,
                               (int)(len > 64 ? 64 : len), s);
        }
    }
    snprintf(key, sizeof key, "%s.rope.scaling.factor", ld->arch);
    if (linear && bitnet_gguf_find_kv(ld->g, key) >= 0) {
        float factor = 1.0f;
        if ((st = bitnet_gguf_get_f32(ld->g, key, &factor, ld->err)) != BITNET_OK) return st;
        if (factor != 0.0f) { /* 0 means "not set" in llama.cpp's writer */
            if (!(factor > 0.0f) || isinf(factor)) {
                return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = %g must be a finite number > 0",
                                   ld->path, key, (double)factor);
            }
            hp->rope_scale = 1.0f / factor;
        }
    }

    /* head size: attention.key_length (llama.cpp's n_embd_head_k), default n_embd / n_head;
     * attention.value_length must be the same (one head size for Q, K and V) */
    bool have_kl = false;
    {
        char kl_key[128];
        snprintf(kl_key, sizeof kl_key, "%s.attention.key_length", ld->arch);
        have_kl = bitnet_gguf_find_kv(ld->g, kl_key) >= 0;
    }
    if (have_kl) {
        if ((st = bitnet_model_int_key(ld, "attention.key_length", true, 0, 2, MAX_DIM, &hp->n_embd_head)) != BITNET_OK)
            return st;
    } else {
        if (hp->n_embd % hp->n_head != 0) {
            return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                               "%s: %s.embedding_length = %d is not a multiple of %s.attention.head_count = %d",
                               ld->path, ld->arch, (int)hp->n_embd, ld->arch, (int)hp->n_head);
        }
        hp->n_embd_head = hp->n_embd / hp->n_head;
    }
    if (hp->n_embd_head % 2 != 0) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: head dimension %s = %d must be even (RoPE pairs)",
                           ld->path, have_kl ? "attention.key_length" : "n_embd / n_head", (int)hp->n_embd_head);
    }
    int32_t vlen = hp->n_embd_head;
    if ((st = bitnet_model_int_key(ld, "attention.value_length", false,
                                   hp->n_embd_head, 1, MAX_DIM, &vlen)) != BITNET_OK)
        return st;
    if (vlen != hp->n_embd_head) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: %s.attention.value_length = %d differs from the key head size %d (not supported)",
                           ld->path, ld->arch, (int)vlen, (int)hp->n_embd_head);
    }
    if ((int64_t)hp->n_head * hp->n_embd_head > MAX_DIM) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: %s.attention.head_count · head size = %d · %d is too large",
                           ld->path, ld->arch, (int)hp->n_head, (int)hp->n_embd_head);
    }
    if (hp->n_head_kv > hp->n_head || hp->n_head % hp->n_head_kv != 0) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                           "%s: %s.attention.head_count = %d is not a multiple of %s.attention.head_count_kv = %d",
                           ld->path, ld->arch, (int)hp->n_head, ld->arch, (int)hp->n_head_kv);
    }
    /* attention scale (docs/EMBEDDINGS.md §2): 1/sqrt(d) on the scores; Gemma3 multiplies q by it instead
     * (llama.cpp's f_attention_scale; query_pre_attn_scalar = d for BitNet-embedding-270M) */
    const float inv_sqrt_d = 1.0f / sqrtf((float)hp->n_embd_head);
    hp->q_scale = hp->arch_id == BITNET_ARCH_GEMMA3 ? inv_sqrt_d : 1.0f;
    hp->kq_scale = hp->arch_id == BITNET_ARCH_GEMMA3 ? 1.0f : inv_sqrt_d;
    /* Gemma3's local layers: only when the file gives a window (bitnet.cpp's converter writes none) */
    hp->swa_period = 1;
    hp->rope_freq_base_swa = hp->rope_freq_base;
    if (hp->arch_id == BITNET_ARCH_GEMMA3) {
        if ((st = bitnet_model_int_key(ld, "attention.sliding_window", false, 0, 0, MAX_CTX, &hp->n_swa)) != BITNET_OK)
            return st;
        if ((st = bitnet_model_int_key(ld, "attention.sliding_window_pattern", false, 6, 1, MAX_LAYERS,
                                       &hp->swa_period)) != BITNET_OK)
            return st;
        if ((st = get_pos_float_key(ld, "rope.freq_base_swa", false, 10000.0f, &hp->rope_freq_base_swa)) != BITNET_OK)
            return st;
        char key[128];
        snprintf(key, sizeof key, "%s.final_logit_softcapping", ld->arch);
        if (bitnet_gguf_find_kv(ld->g, key) >= 0 && (st = bitnet_gguf_get_f32(ld->g, key, &hp->logit_softcap, ld->err)) != BITNET_OK)
            return st;
        if (!(hp->logit_softcap >= 0.0f) || isinf(hp->logit_softcap)) {
            return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = %g must be a finite number >= 0 (0: none)",
                               ld->path, key, (double)hp->logit_softcap);
        }
    }
    /* pooling of embeddings: llama.cpp's LLAMA_POOLING_TYPE values 0 none .. 4 rank */
    if ((st = bitnet_model_int_key(ld, "pooling_type", false, BITNET_POOLING_UNSPECIFIED, BITNET_POOLING_UNSPECIFIED, 4,
                                   &hp->pooling)) != BITNET_OK)
        return st;

    int32_t n_rot = hp->n_embd_head;
    if ((st = bitnet_model_int_key(ld, "rope.dimension_count", false,
                                   hp->n_embd_head, 0, MAX_DIM, &n_rot)) != BITNET_OK)
        return st;
    if (n_rot != hp->n_embd_head) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: %s.rope.dimension_count = %d differs from the head dimension %d (partial RoPE is "
                           "not supported)",
                           ld->path, ld->arch, (int)n_rot, (int)hp->n_embd_head);
    }
    return BITNET_OK;
}
