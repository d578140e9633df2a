/* hf_config.c — config.json of a Hugging Face checkpoint → bitnet_hf_config (hf_convert.h): the
 * architecture, sizes, rope and norm parameters, and the quantization_config that says which of the four
 * weight kinds the checkpoint stores; for the embedding models (qwen3, gemma3_text) also the
 * sentence-transformers pooling (modules.json) and Gemma 3's sliding-window fields. The tensors and the
 * writing are hf_convert.c. */
#include "convert/hf_convert.h"

#include "convert/safetensors.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

const char *bitnet_hf_weights_name(bitnet_hf_weights k) {
    switch (k) {
    case BITNET_HF_LATENT: return "latent (absmean-ternarized)";
    case BITNET_HF_AS_STORED: return "as stored (already ternary)";
    case BITNET_HF_PACKED_DIV: return "packed 2-bit, y = w.x / weight_scale (BitLinear)";
    case BITNET_HF_PACKED_MUL: return "packed 2-bit, y = w.x * weight_scale (AutoBitLinear offline)";
    }
    return "invalid";
}

/* =============================================================================================
 * config.json
 * =========================================================================================== */

/* Integer field in [lo, hi]. Absent or null: *out = dflt, or an error when required. */
static bitnet_status cfg_int(json_object *root, const char *path, const char *key, bool required, int32_t dflt,
                             int64_t lo, int64_t hi, int32_t *out, bitnet_error *err) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(root, key, &v) || v == NULL) {
        if (required) return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: missing field \"%s\"", path, key);
        *out = dflt;
        return BITNET_OK;
    }
    if (!json_object_is_type(v, json_type_int))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: field \"%s\" = %s: expected an integer", path, key,
                           json_object_to_json_string(v));
    errno = 0;
    int64_t x = json_object_get_int64(v);
    if (errno || x < lo || x > hi)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: field \"%s\" = %s: expected %lld .. %lld", path, key,
                           json_object_to_json_string(v), (long long)lo, (long long)hi);
    *out = (int32_t)x;
    return BITNET_OK;
}

/* Positive finite number (integer or real). */
static bitnet_status cfg_pos_float(json_object *root, const char *path, const char *key, float dflt, float *out,
                                   bitnet_error *err) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(root, key, &v) || v == NULL) {
        *out = dflt;
        return BITNET_OK;
    }
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: field \"%s\" = %s: expected a number", path, key,
                           json_object_to_json_string(v));
    double d = json_object_get_double(v);
    if (!(d > 0) || !isfinite(d) || d > 3.0e38)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: field \"%s\" = %s: expected a positive finite number", path,
                           key, json_object_to_json_string(v));
    *out = (float)d;
    return BITNET_OK;
}

/* String field; *out NULL when absent or null. */
static bitnet_status cfg_str(json_object *root, const char *path, const char *key, const char **out,
                             bitnet_error *err) {
    json_object *v = NULL;
    *out = NULL;
    if (!json_object_object_get_ex(root, key, &v) || v == NULL) return BITNET_OK;
    if (!json_object_is_type(v, json_type_string))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: field \"%s\" = %s: expected a string", path, key,
                           json_object_to_json_string(v));
    *out = json_object_get_string(v);
    return BITNET_OK;
}

static bitnet_status cfg_bool(json_object *root, const char *path, const char *key, int *out, bitnet_error *err) {
    json_object *v = NULL;
    *out = -1;
    if (!json_object_object_get_ex(root, key, &v) || v == NULL) return BITNET_OK;
    if (!json_object_is_type(v, json_type_boolean))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: field \"%s\" = %s: expected true or false", path, key,
                           json_object_to_json_string(v));
    *out = json_object_get_boolean(v) ? 1 : 0;
    return BITNET_OK;
}

/* quantization_config → weights kind (hf_convert.h). */
static bitnet_status cfg_quant(json_object *root, const char *path, bitnet_hf_config *c, bitnet_error *err) {
    json_object *q = NULL;
    if (!json_object_object_get_ex(root, "quantization_config", &q) || q == NULL) {
        c->weights = strcmp(c->arch, "llama") == 0 ? BITNET_HF_AS_STORED : BITNET_HF_LATENT;
        return BITNET_OK;
    }
    if (!json_object_is_type(q, json_type_object))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"quantization_config\" is not a JSON object", path);
    const char *method = NULL, *cls = NULL, *mode = NULL;
    int rms = -1;
    bitnet_status st;
    if ((st = cfg_str(q, path, "quant_method", &method, err)) != BITNET_OK) return st;
    if ((st = cfg_str(q, path, "linear_class", &cls, err)) != BITNET_OK) return st;
    if ((st = cfg_str(q, path, "quantization_mode", &mode, err)) != BITNET_OK) return st;
    if ((st = cfg_bool(q, path, "use_rms_norm", &rms, err)) != BITNET_OK) return st;
    if (!method || strcmp(method, "bitnet") != 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: quantization_config.quant_method = \"%s\" is not supported (only \"bitnet\": ternary "
                           "weights)", path, method ? method : "(missing)");
    if (rms == 1)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: quantization_config.use_rms_norm = true: an RMSNorm inside every BitLinear layer is not "
                           "part of the GGUF graphs (no key expresses it)", path);
    if (!cls) cls = "bitlinear";   /* BitNetQuantConfig defaults */
    if (!mode) mode = "offline";
    const bool auto_cls = strcmp(cls, "autobitlinear") == 0;
    if (!auto_cls && strcmp(cls, "bitlinear") != 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: quantization_config.linear_class = \"%s\" is not supported (bitlinear, autobitlinear)",
                           path, cls);
    if (strcmp(mode, "offline") == 0) {
        c->weights = auto_cls ? BITNET_HF_PACKED_MUL : BITNET_HF_PACKED_DIV;
    } else if (strcmp(mode, "online") == 0) {
        if (!auto_cls)
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                               "%s: quantization_config: quantization_mode \"online\" needs linear_class "
                               "\"autobitlinear\" (got \"%s\")", path, cls);
        c->weights = BITNET_HF_LATENT;
    } else {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: quantization_config.quantization_mode = \"%s\" is not supported (offline, online)", path,
                           mode);
    }
    return BITNET_OK;
}

static bitnet_status cfg_rope_scaling(json_object *root, const char *path, bitnet_hf_config *c, bitnet_error *err) {
    json_object *rs = NULL;
    c->rope_scale = 1.0f;
    if (!json_object_object_get_ex(root, "rope_scaling", &rs) || rs == NULL) return BITNET_OK;
    if (!json_object_is_type(rs, json_type_object))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"rope_scaling\" is not a JSON object or null", path);
    const char *type = NULL;
    bitnet_status st = cfg_str(rs, path, "rope_type", &type, err);
    if (st == BITNET_OK && !type) st = cfg_str(rs, path, "type", &type, err);
    if (st != BITNET_OK) return st;
    if (!type || strcmp(type, "linear") != 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: rope_scaling type \"%s\" is not supported (only \"linear\"; Llama 3.1-style \"llama3\" "
                           "scaling needs a rope_freqs tensor this runtime does not read)", path, type ? type : "(missing)");
    return cfg_pos_float(rs, path, "factor", 1.0f, &c->rope_scale, err);
}

/* =============================================================================================
 * The embedding models: sentence-transformers pooling and the qwen3 / gemma3_text fields
 * =========================================================================================== */

/* One JSON file into *root; *present = false (and BITNET_OK) when the file does not exist. */
static bitnet_status read_optional_json(const char *path, json_object **root, bool *present, bitnet_error *err) {
    struct stat sb;
    *root = NULL;
    *present = stat(path, &sb) == 0;
    if (!*present) return BITNET_OK;
    return bitnet_json_read_file(path, root, err);
}

/* 1_Pooling/config.json (or the folder modules.json names) → pooling type. */
static bitnet_status pooling_config(const char *path, int32_t *out, bitnet_error *err) {
    json_object *root = NULL;
    bool present = false;
    bitnet_status st = read_optional_json(path, &root, &present, err);
    if (st != BITNET_OK || !present) return st; /* absent: mean (the caller's default) */
    static const struct { const char *key; int32_t type; } known[] = {
        {"pooling_mode_mean_tokens", 1}, {"pooling_mode_cls_token", 2}, {"pooling_mode_lasttoken", 3}};
    static const char *const other[] = {"pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                                        "pooling_mode_weightedmean_tokens"};
    const char *first = NULL;
    if (!json_object_is_type(root, json_type_object)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: not a JSON object", path);
        goto done;
    }
    for (size_t i = 0; i < sizeof known / sizeof known[0] + sizeof other / sizeof other[0]; i++) {
        const bool is_known = i < sizeof known / sizeof known[0];
        const char *key = is_known ? known[i].key : other[i - sizeof known / sizeof known[0]];
        int on = -1;
        if ((st = cfg_bool(root, path, key, &on, err)) != BITNET_OK) goto done;
        if (on != 1) continue;
        if (!is_known) {
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: %s = true: the runtime pools by mean, cls or last token "
                             "only (pooling_mode_mean_tokens, pooling_mode_cls_token, pooling_mode_lasttoken)", path, key);
            goto done;
        }
        if (first) {
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: both %s and %s are true: sentence-transformers would "
                             "concatenate the two vectors, which a GGUF pooling_type cannot say", path, first, key);
            goto done;
        }
        first = key;
        *out = known[i].type;
    }
done:
    json_object_put(root);
    return st;
}

bitnet_status bitnet_hf_pooling_load(const char *dir, int32_t *pooling_type, bitnet_error *err) {
    char path[4096], sub[4096];
    *pooling_type = 1; /* mean, bitnet.cpp's default */
    if (snprintf(path, sizeof path, "%s/modules.json", dir) >= (int)sizeof path)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: path too long", dir);
    json_object *root = NULL;
    bool present = false;
    bitnet_status st = read_optional_json(path, &root, &present, err);
    if (st != BITNET_OK || !present) return st;
    if (!json_object_is_type(root, json_type_array)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: not a JSON array of modules", path);
        goto done;
    }
    for (size_t i = 0; i < json_object_array_length(root); i++) {
        json_object *m = json_object_array_get_idx(root, i), *type = NULL, *mpath = NULL;
        if (!json_object_is_type(m, json_type_object) || !json_object_object_get_ex(m, "type", &type) ||
            !json_object_is_type(type, json_type_string)) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: module %zu has no string \"type\"", path, i);
            goto done;
        }
        const char *t = json_object_get_string(type);
        const size_t tl = strlen(t);
        if (tl < 7 || strcmp(t + tl - 7, "Pooling") != 0) continue;
        if (!json_object_object_get_ex(m, "path", &mpath) || !json_object_is_type(mpath, json_type_string)) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: module %zu (%s) has no string \"path\"", path, i, t);
            goto done;
        }
        const char *mp = json_object_get_string(mpath);
        if (strstr(mp, "..")) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: module %zu path \"%s\" leaves the model folder", path, i, mp);
            goto done;
        }
        if (snprintf(sub, sizeof sub, "%s/%s%sconfig.json", dir, mp, mp[0] && mp[strlen(mp) - 1] != '/' ? "/" : "") >=
            (int)sizeof sub) {
            st = bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: module path \"%s\" too long", path, mp);
            goto done;
        }
        st = pooling_config(sub, pooling_type, err);
        break; /* the first Pooling module decides (bitnet.cpp) */
    }
done:
    json_object_put(root);
    return st;
}

/* Whether layer_types (an array of n_layer strings, checked) has exactly the layers l % p == p - 1 global. */
static bool layer_types_period(json_object *lt, int32_t n_layer, int32_t p) {
    for (int32_t l = 0; l < n_layer; l++) {
        const char *s = json_object_get_string(json_object_array_get_idx(lt, (size_t)l));
        if ((strcmp(s, "full_attention") == 0) != (l % p == p - 1)) return false;
    }
    return true;
}

/* Gemma 3's local/global layers → the period p of the runtime's rule (layer l global iff l % p == p - 1,
 * docs/EMBEDDINGS.md §1): sliding_window_pattern (or transformers' later _sliding_window_pattern) when
 * given, else 6 (Gemma3TextConfig's default); with layer_types (transformers >= 4.53) the first of that
 * value, the first global layer + 1, 6 and n_layer + 1 (no global layer) that layer_types follows, or -1
 * when it follows none. */
static bitnet_status cfg_swa_pattern(json_object *root, const char *path, int32_t n_layer, int32_t *pattern,
                                     bitnet_error *err) {
    json_object *pv = NULL, *lt = NULL;
    const char *pk = json_object_object_get_ex(root, "sliding_window_pattern", &pv) && pv != NULL
                         ? "sliding_window_pattern" : "_sliding_window_pattern";
    int32_t given = 0;
    bitnet_status st = cfg_int(root, path, pk, false, 0, 1, 1 << 20, &given, err);
    if (st != BITNET_OK) return st;
    *pattern = given ? given : 6;
    if (!json_object_object_get_ex(root, "layer_types", &lt) || lt == NULL) return BITNET_OK;
    if (!json_object_is_type(lt, json_type_array) || (int64_t)json_object_array_length(lt) != n_layer)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"layer_types\" must be an array of num_hidden_layers = %d "
                           "strings", path, (int)n_layer);
    int32_t first_global = 0;
    for (int32_t l = 0; l < n_layer; l++) {
        json_object *v = json_object_array_get_idx(lt, (size_t)l);
        const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
        const bool global = strcmp(s, "full_attention") == 0;
        if (!global && strcmp(s, "sliding_attention") != 0)
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: layer_types[%d] = %s: expected \"sliding_attention\" or "
                               "\"full_attention\"", path, (int)l, json_object_to_json_string(v));
        if (global && first_global == 0) first_global = l + 1;
    }
    const int32_t cand[4] = {given, first_global, 6, n_layer + 1};
    for (int i = 0; i < 4; i++) {
        if (cand[i] > 0 && layer_types_period(lt, n_layer, cand[i])) {
            *pattern = cand[i];
            return BITNET_OK;
        }
    }
    *pattern = -1;
    return BITNET_OK;
}

/* The fields of model_type "qwen3" / "gemma3_text" (bitnet_hf_config_load's comment). */
static bitnet_status cfg_embedding(json_object *root, const char *path, const char *dir, const char *model_type,
                                   bitnet_hf_config *c, bitnet_error *err) {
    const bool gemma = strcmp(model_type, "gemma3_text") == 0;
    json_object *archs = NULL, *v = NULL;
    bitnet_status st;
    c->embedding = true;
    c->weights = BITNET_HF_LATENT;
    snprintf(c->arch, sizeof c->arch, "%s", gemma ? "gemma3" : "qwen3");
    if (json_object_object_get_ex(root, "architectures", &archs) && json_object_is_type(archs, json_type_array) &&
        json_object_array_length(archs) >= 1 && json_object_is_type(json_object_array_get_idx(archs, 0), json_type_string))
        snprintf(c->hf_arch, sizeof c->hf_arch, "%s", json_object_get_string(json_object_array_get_idx(archs, 0)));
    else
        snprintf(c->hf_arch, sizeof c->hf_arch, "%s", model_type);
    const char *act = NULL;
    const char *act_key = gemma ? "hidden_activation" : "hidden_act", *act_want = gemma ? "gelu_pytorch_tanh" : "silu";
    if ((st = cfg_str(root, path, act_key, &act, err)) != BITNET_OK) return st;
    if (act && strcmp(act, act_want) != 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: %s = \"%s\": the %s graph has %s only", path, act_key, act,
                           c->arch, act_want);
    const int64_t BIG = (int64_t)1 << 30;
    if ((st = cfg_int(root, path, "hidden_size", true, 0, 1, BIG, &c->n_embd, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "intermediate_size", true, 0, 1, BIG, &c->n_ff, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "num_hidden_layers", true, 0, 1, 100000, &c->n_layer, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "num_attention_heads", true, 0, 1, 1 << 16, &c->n_head, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "num_key_value_heads", false, c->n_head, 1, 1 << 16, &c->n_head_kv, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "head_dim", false, 0, 2, 1 << 16, &c->n_embd_head, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "max_position_embeddings", false, 32768, 1, 1 << 24, &c->n_ctx, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "vocab_size", true, 0, 1, BIG, &c->n_vocab, err)) != BITNET_OK ||
        (st = cfg_pos_float(root, path, "rope_theta", gemma ? 1000000.0f : 10000.0f, &c->rope_theta, err)) != BITNET_OK ||
        (st = cfg_pos_float(root, path, "rms_norm_eps", 1e-6f, &c->rms_eps, err)) != BITNET_OK ||
        (st = cfg_bool(root, path, "tie_word_embeddings", &c->tie_embeddings, err)) != BITNET_OK)
        return st;
    c->rope_scale = 1.0f;
    if (json_object_object_get_ex(root, "rope_scaling", &v) && v != NULL)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: rope_scaling = %s: the %s files carry no RoPE scaling "
                           "(bitnet.cpp's embedding converter writes none)", path, json_object_to_json_string(v), c->arch);
    int flag = -1;
    if ((st = cfg_bool(root, path, "attention_bias", &flag, err)) != BITNET_OK) return st;
    if (flag == 1)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: attention_bias = true: the %s graph has no q/k/v/o biases",
                           path, c->arch);
    if (!gemma) {
        if ((st = cfg_bool(root, path, "use_sliding_window", &flag, err)) != BITNET_OK) return st;
        if (flag == 1)
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: use_sliding_window = true: the qwen3 graph attends to "
                               "every earlier position (only gemma3 has sliding-window layers)", path);
    }
    if (c->n_embd_head == 0) {
        if (c->n_embd % c->n_head != 0)
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: no head_dim, and hidden_size %d is not a multiple of "
                               "num_attention_heads %d", path, (int)c->n_embd, (int)c->n_head);
        c->n_embd_head = c->n_embd / c->n_head;
    }
    if (c->n_embd_head % 2 != 0)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: head size %d is odd: RoPE rotates pairs of dimensions", path,
                           (int)c->n_embd_head);
    if (c->n_head % c->n_head_kv != 0)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                           path, (int)c->n_head, (int)c->n_head_kv);
    if (gemma) {
        float qpas = 0.0f;
        if ((st = cfg_pos_float(root, path, "query_pre_attn_scalar", (float)c->n_embd_head, &qpas, err)) != BITNET_OK)
            return st;
        if (qpas != (float)c->n_embd_head)
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: query_pre_attn_scalar = %g differs from head_dim %d: "
                               "the runtime scales q by 1/sqrt(head_dim) (llama.cpp's Gemma 3 rule, no GGUF key says "
                               "otherwise)", path, (double)qpas, (int)c->n_embd_head);
        json_object *sw = NULL;
        if (json_object_object_get_ex(root, "sliding_window", &sw) && sw != NULL &&
            (st = cfg_int(root, path, "sliding_window", false, 0, 0, INT32_MAX, &c->n_swa, err)) != BITNET_OK)
            return st;
        if ((st = cfg_swa_pattern(root, path, c->n_layer, &c->swa_pattern, err)) != BITNET_OK) return st;
        if ((st = cfg_pos_float(root, path, "rope_local_base_freq", 10000.0f, &c->rope_freq_base_swa, err)) != BITNET_OK)
            return st;
    }
    return bitnet_hf_pooling_load(dir, &c->pooling_type, err);
}

bitnet_status bitnet_hf_config_load(const char *dir, bitnet_hf_config *out, bitnet_error *err) {
    memset(out, 0, sizeof *out);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: path too long", dir);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return bitnet_fail(err, BITNET_ERR_IO, "%s: not a directory (expected a Hugging Face model folder)", dir);
    if (stat(path, &sb) != 0)
        return bitnet_fail(err, BITNET_ERR_IO, "%s: missing: %s is not a Hugging Face model folder (it needs "
                           "config.json, *.safetensors and tokenizer files)", path, dir);
    json_object *root = NULL;
    bitnet_status st = bitnet_json_read_file(path, &root, err);
    if (st != BITNET_OK) return st;
    bitnet_hf_config *c = out;
    json_object *archs = NULL;
    if (!json_object_is_type(root, json_type_object)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: not a JSON object", path);
        goto done;
    }
    const char *model_type = NULL;
    if ((st = cfg_str(root, path, "model_type", &model_type, err)) != BITNET_OK) goto done;
    if (model_type && (strcmp(model_type, "qwen3") == 0 || strcmp(model_type, "gemma3_text") == 0)) {
        st = cfg_embedding(root, path, dir, model_type, c, err);
        goto done;
    }
    if (model_type && (strncmp(model_type, "qwen3", 5) == 0 || strncmp(model_type, "gemma", 5) == 0)) {
        st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                         "%s: model_type \"%s\" is not supported; of the Qwen 3 and Gemma families only \"qwen3\" "
                         "(GGUF \"qwen3\", BitNet-embedding-0.6B) and \"gemma3_text\" (GGUF \"gemma3\", "
                         "BitNet-embedding-270M) are%s", path, model_type,
                         strcmp(model_type, "gemma3") == 0 ? " (\"gemma3\" is the multimodal model; its text_config "
                                                             "is a gemma3_text model)" : "");
        goto done;
    }
    if (!json_object_object_get_ex(root, "architectures", &archs) || !json_object_is_type(archs, json_type_array) ||
        json_object_array_length(archs) < 1 ||
        !json_object_is_type(json_object_array_get_idx(archs, 0), json_type_string)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"architectures\" must be a non-empty array of strings", path);
        goto done;
    }
    snprintf(c->hf_arch, sizeof c->hf_arch, "%s", json_object_get_string(json_object_array_get_idx(archs, 0)));
    const char *act = NULL;
    if ((st = cfg_str(root, path, "hidden_act", &act, err)) != BITNET_OK) goto done;
    if (strcasecmp(c->hf_arch, "BitnetForCausalLM") == 0) {
        if (act && strcmp(act, "relu2") == 0) {
            snprintf(c->arch, sizeof c->arch, "bitnet-b1.58");
        } else if (!act || strcmp(act, "silu") == 0) {
            snprintf(c->arch, sizeof c->arch, "bitnet");
        } else {
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                             "%s: %s with hidden_act \"%s\" is not supported (\"relu2\": BitNet-b1.58-2B-4T's graph, "
                             "\"silu\": 1bitLLM's)", path, c->hf_arch, act);
            goto done;
        }
    } else if (strcasecmp(c->hf_arch, "LlamaForCausalLM") == 0) {
        if (act && strcmp(act, "silu") != 0) {
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: LlamaForCausalLM with hidden_act \"%s\" is not supported "
                             "(only \"silu\")", path, act);
            goto done;
        }
        snprintf(c->arch, sizeof c->arch, "llama");
    } else {
        st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                         "%s: architectures[0] = \"%s\" is not supported; known (any letter case): BitnetForCausalLM / "
                         "BitNetForCausalLM (GGUF \"bitnet\" or \"bitnet-b1.58\" by hidden_act), LlamaForCausalLM "
                         "(GGUF \"llama\"); and by model_type: qwen3, gemma3_text (GGUF \"qwen3\", \"gemma3\")",
                         path, c->hf_arch);
        goto done;
    }
    const int64_t BIG = (int64_t)1 << 30;
    if ((st = cfg_int(root, path, "hidden_size", true, 0, 1, BIG, &c->n_embd, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "intermediate_size", true, 0, 1, BIG, &c->n_ff, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "num_hidden_layers", true, 0, 1, 100000, &c->n_layer, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "num_attention_heads", true, 0, 1, 1 << 16, &c->n_head, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "num_key_value_heads", false, c->n_head, 1, 1 << 16, &c->n_head_kv, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "head_dim", false, 0, 2, 1 << 16, &c->n_embd_head, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "max_position_embeddings", false, 2048, 1, 1 << 24, &c->n_ctx, err)) != BITNET_OK ||
        (st = cfg_int(root, path, "vocab_size", true, 0, 1, BIG, &c->n_vocab, err)) != BITNET_OK ||
        (st = cfg_pos_float(root, path, "rope_theta", 10000.0f, &c->rope_theta, err)) != BITNET_OK ||
        (st = cfg_pos_float(root, path, "rms_norm_eps", 1e-6f, &c->rms_eps, err)) != BITNET_OK ||
        (st = cfg_bool(root, path, "tie_word_embeddings", &c->tie_embeddings, err)) != BITNET_OK ||
        (st = cfg_rope_scaling(root, path, c, err)) != BITNET_OK || (st = cfg_quant(root, path, c, err)) != BITNET_OK)
        goto done;
    if (c->n_embd_head == 0) {
        if (c->n_embd % c->n_head != 0) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: hidden_size %d is not a multiple of num_attention_heads %d "
                             "(and no head_dim is given)", path, (int)c->n_embd, (int)c->n_head);
            goto done;
        }
        c->n_embd_head = c->n_embd / c->n_head;
    }
    if (c->n_embd_head % 2 != 0) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: head size %d is odd: RoPE rotates pairs of dimensions", path,
                         (int)c->n_embd_head);
        goto done;
    }
    if (c->n_head % c->n_head_kv != 0) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                         path, (int)c->n_head, (int)c->n_head_kv);
        goto done;
    }
    if (strcmp(c->arch, "bitnet") == 0 && (int64_t)c->n_embd_head * c->n_head != c->n_embd) {
        st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: head_dim %d x %d heads != hidden_size %d: GGUF architecture "
                         "\"bitnet\" has no attention.key_length key", path, (int)c->n_embd_head, (int)c->n_head,
                         (int)c->n_embd);
        goto done;
    }
done:
    json_object_put(root);
    return st;
}
