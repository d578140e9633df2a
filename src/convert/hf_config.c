/* hf_config.c — config.json of a Hugging Face checkpoint → bitnet_hf_config (hf_convert.h): the
 * architecture, sizes, rope and norm parameters, and the quantization_config that says which of the four
 * weight kinds the checkpoint stores. The tensors and the writing are hf_convert.c. */
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
                         "(GGUF \"llama\")", path, c->hf_arch);
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
