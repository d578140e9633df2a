/* hf_tokenizer.c — Hugging Face tokenizer files → bitnet_hf_vocab → GGUF tokenizer.ggml.* keys:
 * tokenizer.json (byte-level and SentencePiece-style BPE), tokenizer_config.json and
 * special_tokens_map.json, the entry points. tokenizer.model (SentencePiece protobuf) is read by hf_spm.c.
 *
 * Facts this file relies on (restated; the code is our own):
 *  - tokenizer.json (Hugging Face `tokenizers` serialization): "model" {"type": "BPE", "vocab": {text: id},
 *    "merges": ["a b", ...] or [["a", "b"], ...], "byte_fallback", "ignore_merges", "unk_token"},
 *    "added_tokens" [{"id", "content", "special", ...}], "normalizer", "pre_tokenizer", "post_processor",
 *    "decoder" (objects with a "type", "Sequence" nesting their steps).
 *  - Byte-level BPE vocabularies (GPT-2 / Llama 3) store their tokens in GPT-2's printable byte alphabet;
 *    GGUF keeps those texts as they are (tokenizer.ggml.model "gpt2") with the merges in rank order, and
 *    llama.cpp's converter types added tokens CONTROL when "special" (or when they look like "<|...|>"),
 *    USER_DEFINED otherwise, and ids no file defines "[PAD<id>]" UNUSED.
 *  - SentencePiece-style vocabularies (Llama 2, Mistral) are GGUF model "llama": pieces with "▁" for spaces,
 *    "<0xXX>" byte tokens (type BYTE), scores that order the merges (higher first).
 *    From tokenizer.model the scores are the file's. A tokenizer.json of this kind (BPE with byte_fallback
 *    and the "▁" normalizer, made by converting the SentencePiece model) has no scores but merges in the
 *    order SentencePiece applies them; we give the token a merge produces the score -(rank of the first
 *    merge producing it), so merging by highest score merges in rank order. Multi-character tokens no
 *    merge produces get -(n_merges + id) (never preferred); single characters, byte and special tokens 0.
 *    (llama.cpp's own tokenizer.json path writes -1000 for every token, which loses the order.)
 *  - tokenizer_config.json: bos_token/eos_token/unk_token/pad_token (string or {"content": ...}),
 *    add_bos_token, add_eos_token, chat_template (string, or [{"name", "template"}] → "default"),
 *    added_tokens_decoder {"id": {"content", "special"}}. When add_bos_token is absent, a TemplateProcessing
 *    post_processor whose single template starts with the BOS token means add BOS (as llama.cpp's gguf-py
 *    SpecialVocab reads it).
 */
#include "convert/hf_tokenizer_internal.h"

#include "text/tokenizer.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------- */

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fclose(f);
    return true;
}

bitnet_status bitnet_hf_read_file(const char *path, char **data, size_t *size, bitnet_error *err) {
    *data = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = (char *)malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            char *nb = cap > ((size_t)1 << 40) ? NULL : (char *)realloc(buf, 2 * cap + 1);
            if (!nb) break;
            buf = nb;
            cap *= 2;
        }
        const size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    const bool bad = !buf || ferror(f);
    fclose(f);
    if (!buf) return oom(err);
    if (bad) {
        free(buf);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: read error", path);
    }
    buf[n] = 0;
    *data = buf;
    *size = n;
    return BITNET_OK;
}

/* Parse a JSON file; the message of a syntax error names the file, the byte offset, line and column. */
static bitnet_status parse_json(const char *path, json_object **out, bitnet_error *err) {
    *out = NULL;
    char *data;
    size_t size;
    bitnet_status st = bitnet_hf_read_file(path, &data, &size, err);
    if (st != BITNET_OK) return st;
    if (size > (size_t)INT32_MAX) {
        free(data);
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %zu bytes is too large for a JSON file", path, size);
    }
    json_tokener *tok = json_tokener_new_ex(64);
    if (!tok) {
        free(data);
        return oom(err);
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *root = json_tokener_parse_ex(tok, data, (int)size);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    if (!root || je != json_tokener_success) {
        if (je == json_tokener_continue) { /* everything read, the value is not complete */
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: malformed JSON: unexpected end of file at byte %zu (truncated?)",
                             path, size);
        } else {
            size_t line = 1, col = 1;
            for (size_t i = 0; i < end && i < size; i++) {
                if (data[i] == '\n') {
                    line++;
                    col = 1;
                } else {
                    col++;
                }
            }
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: malformed JSON at byte %zu (line %zu, column %zu): %s", path, end,
                             line, col, json_tokener_error_desc(je));
        }
        json_object_put(root);
        json_tokener_free(tok);
        free(data);
        return st;
    }
    for (size_t i = end; i < size; i++) { /* only white space may follow the value */
        const char c = data[i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: malformed JSON: unexpected data after the value at byte %zu", path,
                             i);
            json_object_put(root);
            json_tokener_free(tok);
            free(data);
            return st;
        }
    }
    json_tokener_free(tok);
    free(data);
    *out = root;
    return BITNET_OK;
}


static bool str_is(json_object *o, const char *key, const char *want) {
    const char *s = get_str(o, key);
    return s && strcmp(s, want) == 0;
}


/* Text of a special-token entry of tokenizer_config.json / special_tokens_map.json: a string or an
 * object with "content". NULL when absent or null. */
static const char *token_text(json_object *o, const char *key) {
    json_object *v = get(o, key);
    if (!v) return NULL;
    if (json_object_is_type(v, json_type_string)) return json_object_get_string(v);
    return get_str(v, "content");
}

/* Short JSON text of o for messages (json-c's buffer; valid until o is freed). */
static const char *json_brief(json_object *o) {
    return o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) : "null";
}

/* ---------------------------------------------------------------------------------------------
 * The vocabulary struct
 * ------------------------------------------------------------------------------------------- */

void bitnet_hf_vocab_free(bitnet_hf_vocab *v) {
    if (!v) return;
    if (v->tokens) {
        for (int32_t i = 0; i < v->n_tokens; i++) free(v->tokens[i]);
    }
    free(v->tokens);
    free(v->scores);
    free(v->token_types);
    if (v->merges) {
        for (int64_t i = 0; i < v->n_merges; i++) free(v->merges[i]);
    }
    free(v->merges);
    free(v->chat_template);
    free(v);
}

static bitnet_hf_vocab *vocab_new(void) {
    bitnet_hf_vocab *v = (bitnet_hf_vocab *)calloc(1, sizeof *v);
    if (!v) return NULL;
    v->bos_id = v->eos_id = v->unk_id = v->pad_id = v->eot_id = v->eom_id = -1;
    v->add_bos = v->add_eos = v->add_space_prefix = -1;
    return v;
}

bitnet_status bitnet_hf_vocab_alloc(bitnet_hf_vocab *v, int32_t n, bool with_scores, bitnet_error *err) {
    v->n_tokens = n;
    v->tokens = (char **)calloc((size_t)(n ? n : 1), sizeof *v->tokens);
    v->token_types = (int32_t *)calloc((size_t)(n ? n : 1), sizeof *v->token_types);
    if (with_scores) v->scores = (float *)calloc((size_t)(n ? n : 1), sizeof *v->scores);
    if (!v->tokens || !v->token_types || (with_scores && !v->scores)) return oom(err);
    return BITNET_OK;
}

/* Ids no file defines become "[PAD<id>]" UNUSED (llama.cpp's converters), score -1000 for "llama". */
static bitnet_status fill_holes(bitnet_hf_vocab *v, int32_t from, bitnet_error *err) {
    for (int32_t i = from; i < v->n_tokens; i++) {
        if (v->tokens[i]) continue;
        char name[32];
        snprintf(name, sizeof name, "[PAD%d]", (int)i);
        if (!(v->tokens[i] = bitnet_strndup(name, strlen(name)))) return oom(err);
        v->token_types[i] = BITNET_TOKEN_UNUSED;
        if (v->scores) v->scores[i] = -1000.0f;
    }
    return BITNET_OK;
}

static int32_t find_token(const bitnet_hf_vocab *v, const char *text) {
    if (!text) return -1;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (v->tokens[i] && strcmp(v->tokens[i], text) == 0) return i;
    }
    return -1;
}

bitnet_status bitnet_hf_vocab_pad(bitnet_hf_vocab *v, int64_t n_vocab, bitnet_error *err) {
    if (n_vocab == v->n_tokens) return BITNET_OK;
    if (n_vocab < v->n_tokens) {
        /* added tokens past the embedding (Gemma 3's <image_soft_token>) are dropped, as bitnet.cpp's
         * converters do (they write ids 0 .. vocab_size - 1); a model token past it is an error */
        for (int64_t i = n_vocab < 0 ? 0 : n_vocab; i < v->n_tokens; i++) {
            const int32_t t = v->token_types[i];
            if (n_vocab <= 0 || (t != BITNET_TOKEN_CONTROL && t != BITNET_TOKEN_USER_DEFINED && t != BITNET_TOKEN_UNUSED)) {
                return bitnet_fail(err, BITNET_ERR_FORMAT,
                                   "the tokenizer (%s) has %d tokens but the model's vocab_size is %lld: the embedding has "
                                   "no row for the last %lld tokens (token %lld \"%.40s\" is not an added token)",
                                   v->source, (int)v->n_tokens, (long long)n_vocab, (long long)(v->n_tokens - n_vocab),
                                   (long long)i, v->tokens[i] ? v->tokens[i] : "");
            }
        }
        const int32_t ids[6] = {v->bos_id, v->eos_id, v->unk_id, v->pad_id, v->eot_id, v->eom_id};
        static const char *const names[6] = {"BOS", "EOS", "unknown", "padding", "EOT", "EOM"};
        for (int k = 0; k < 6; k++) {
            if (ids[k] >= n_vocab) {
                return bitnet_fail(err, BITNET_ERR_FORMAT,
                                   "the tokenizer (%s) has %d tokens but the model's vocab_size is %lld: the %s token %d "
                                   "\"%.40s\" has no embedding row",
                                   v->source, (int)v->n_tokens, (long long)n_vocab, names[k], (int)ids[k],
                                   v->tokens[ids[k]]);
            }
        }
        for (int64_t i = n_vocab; i < v->n_tokens; i++) free(v->tokens[i]);
        v->n_tokens = (int32_t)n_vocab; /* the arrays keep their (larger) allocation */
        return BITNET_OK;
    }
    if (n_vocab > BITNET_HF_MAX_VOCAB) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "vocab_size %lld is too large (at most %lld)", (long long)n_vocab,
                           (long long)BITNET_HF_MAX_VOCAB);
    }
    const int32_t old = v->n_tokens, n = (int32_t)n_vocab;
    char **t = (char **)realloc(v->tokens, (size_t)n * sizeof *t);
    if (!t) return oom(err);
    v->tokens = t;
    memset(t + old, 0, (size_t)(n - old) * sizeof *t);
    int32_t *ty = (int32_t *)realloc(v->token_types, (size_t)n * sizeof *ty);
    if (!ty) return oom(err);
    v->token_types = ty;
    if (v->scores) {
        float *sc = (float *)realloc(v->scores, (size_t)n * sizeof *sc);
        if (!sc) return oom(err);
        v->scores = sc;
    }
    v->n_tokens = n; /* the new entries are NULL: fill_holes makes them [PAD<id>] */
    return fill_holes(v, old, err);
}

/* ---------------------------------------------------------------------------------------------
 * tokenizer_config.json / special_tokens_map.json
 * ------------------------------------------------------------------------------------------- */

static bitnet_status read_config(const char *dir, json_object **config, json_object **special_map, bitnet_error *err) {
    *config = *special_map = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    bitnet_status st;
    if (file_exists(path) && (st = parse_json(path, config, err)) != BITNET_OK) return st;
    if (*config && !json_object_is_type(*config, json_type_object)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: the top level is not an object", path);
    }
    snprintf(path, sizeof path, "%s/special_tokens_map.json", dir);
    if (file_exists(path) && (st = parse_json(path, special_map, err)) != BITNET_OK) return st;
    if (*special_map && !json_object_is_type(*special_map, json_type_object)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: the top level is not an object", path);
    }
    return BITNET_OK;
}

/* Special ids, add_bos/add_eos and the chat template from the config files (after the tokens are known). */
static bitnet_status apply_config(bitnet_hf_vocab *v, const char *dir, json_object *config, json_object *special_map,
                                  bitnet_error *err) {
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
    int32_t *ids[] = {&v->bos_id, &v->eos_id, &v->unk_id, &v->pad_id};
    for (int k = 0; k < 4; k++) {
        const char *text = token_text(config, keys[k]);
        const char *from = "tokenizer_config.json";
        if (!text) {
            text = token_text(special_map, keys[k]);
            from = "special_tokens_map.json";
        }
        if (!text) continue;
        const int32_t id = find_token(v, text);
        if (id < 0) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s/%s: %s \"%.64s\" is not a token of %s", dir, from, keys[k], text,
                               v->source);
        }
        *ids[k] = id;
    }
    const int ab = get_bool(config, "add_bos_token"), ae = get_bool(config, "add_eos_token");
    if (ab >= 0) v->add_bos = ab;
    if (ae >= 0) v->add_eos = ae;
    json_object *ct = get(config, "chat_template");
    const char *tmpl = NULL;
    if (ct && json_object_is_type(ct, json_type_string)) tmpl = json_object_get_string(ct);
    else if (ct && json_object_is_type(ct, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(ct); i++) {
            json_object *e = json_object_array_get_idx(ct, i);
            if (str_is(e, "name", "default")) tmpl = get_str(e, "template");
        }
    }
    if (tmpl && !(v->chat_template = bitnet_strndup(tmpl, strlen(tmpl)))) return oom(err);
    return BITNET_OK;
}

/* ---------------------------------------------------------------------------------------------
 * tokenizer.json
 * ------------------------------------------------------------------------------------------- */

/* Steps of a normalizer / pre-tokenizer / decoder: a Sequence's list or the single object. */
static size_t steps_of(json_object *o, const char *list_key, json_object ***out) {
    *out = NULL;
    if (!o || !json_object_is_type(o, json_type_object)) return 0;
    if (str_is(o, "type", "Sequence")) {
        json_object *l = get(o, list_key);
        if (!l || !json_object_is_type(l, json_type_array)) return 0;
        size_t n = json_object_array_length(l);
        json_object **a = (json_object **)malloc((n ? n : 1) * sizeof *a);
        if (!a) return 0;
        for (size_t i = 0; i < n; i++) a[i] = json_object_array_get_idx(l, i);
        *out = a;
        return n;
    }
    json_object **a = (json_object **)malloc(sizeof *a);
    if (!a) return 0;
    a[0] = o;
    *out = a;
    return 1;
}

/* The Llama 3 Split regex as it appears in Meta-Llama-3's tokenizer.json (also BitNet-b1.58-2B-4T's). */
static const char k_llama3_split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

/* The Qwen2 / Qwen2.5 / Qwen3 Split regex (Llama 3's with single digits), as in their tokenizer.json. */
static const char k_qwen2_split[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

/* tokenizer.ggml.pre of a byte-level pre_tokenizer (see hf_tokenizer.h), or NULL. */
static const char *identify_pre(json_object *pre, bitnet_status *st, const char *path, bitnet_error *err) {
    json_object **steps;
    const size_t n = steps_of(pre, "pretokenizers", &steps);
    size_t n_bytelevel = 0, n_split_llama3 = 0, n_split_qwen2 = 0, n_punct = 0, n_digits_single = 0, n_other = 0;
    int bl_use_regex = -1, bl_prefix = -1;
    for (size_t i = 0; i < n; i++) {
        json_object *s = steps[i];
        const char *type = get_str(s, "type");
        if (!type) n_other++;
        else if (strcmp(type, "ByteLevel") == 0) {
            n_bytelevel++;
            bl_use_regex = get_bool(s, "use_regex");
            if (bl_use_regex < 0) bl_use_regex = 1; /* tokenizers' default */
            bl_prefix = get_bool(s, "add_prefix_space");
        } else if (strcmp(type, "Split") == 0) {
            const char *re = get_str(get(s, "pattern"), "Regex");
            const bool isolated = str_is(s, "behavior", "Isolated") && get_bool(s, "invert") != 1;
            if (re && isolated && strcmp(re, k_llama3_split) == 0) {
                n_split_llama3++;
            } else if (re && isolated && strcmp(re, k_qwen2_split) == 0) {
                n_split_qwen2++;
            } else {
                n_other++;
            }
        } else if (strcmp(type, "Punctuation") == 0) {
            n_punct++;
        } else if (strcmp(type, "Digits") == 0 && get_bool(s, "individual_digits") == 1) {
            n_digits_single++;
        } else {
            n_other++;
        }
    }
    free(steps);
    const char *name = NULL;
    if (n_bytelevel == 1 && bl_prefix != 1 && n_other == 0) {
        const size_t n_split = n_split_llama3 + n_split_qwen2;
        if (n_split_llama3 == 1 && n_split == 1 && bl_use_regex == 0 && n_punct == 0 && n_digits_single == 0) {
            name = "llama-bpe";
        } else if (n_split_qwen2 == 1 && n_split == 1 && bl_use_regex == 0 && n_punct == 0 && n_digits_single == 0) {
            name = "qwen2";
        } else if (n_split == 0 && n_punct == 1 && n_digits_single == 1) {
            name = "falcon3";
        }
        else if (n == 1 && bl_use_regex == 1) name = "gpt2";
    }
    if (!name) {
        *st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                          "%s: unsupported pre_tokenizer (known: the Llama 3 or Qwen2 Split regex + ByteLevel, "
                          "Falcon3's Punctuation/Digits + ByteLevel, GPT-2's ByteLevel): %.600s",
                          path, json_brief(pre));
    }
    return name;
}

/* Is this a SentencePiece-style tokenizer.json: "▁" normalizer or Metaspace pre-tokenizer? Sets
 * *prefix (1/0/-1 unknown) and fails on normalizer and pre-tokenizer steps we do not reproduce. */
static bool spm_style(json_object *root, int *prefix, bitnet_status *st, const char *path, bitnet_error *err) {
    *prefix = -1;
    bool replace_space = false, metaspace = false;
    json_object **steps;
    size_t n = steps_of(get(root, "normalizer"), "normalizers", &steps);
    for (size_t i = 0; i < n; i++) {
        const char *type = get_str(steps[i], "type");
        if (type && strcmp(type, "Prepend") == 0 && str_is(steps[i], "prepend", "\xE2\x96\x81")) *prefix = 1;
        else if (type && strcmp(type, "Replace") == 0 && str_is(get(steps[i], "pattern"), "String", " ") &&
                 str_is(steps[i], "content", "\xE2\x96\x81")) {
            replace_space = true;
        } else {
            *st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                              "%s: normalizer step %s is not supported (SentencePiece-style files may only prepend and "
                              "replace \" \" by \"\xE2\x96\x81\")",
                              path, json_brief(steps[i]));
            free(steps);
            return false;
        }
    }
    free(steps);
    n = steps_of(get(root, "pre_tokenizer"), "pretokenizers", &steps);
    for (size_t i = 0; i < n; i++) {
        if (str_is(steps[i], "type", "Metaspace")) {
            metaspace = true;
            const char *scheme = get_str(steps[i], "prepend_scheme");
            const int aps = get_bool(steps[i], "add_prefix_space");
            *prefix = (scheme && strcmp(scheme, "never") == 0) || aps == 0 ? 0 : 1;
        }
    }
    for (size_t i = 0; i < n && (replace_space || metaspace); i++) {
        if (str_is(steps[i], "type", "Metaspace")) continue;
        if (replace_space && str_is(steps[i], "type", "Split") && str_is(get(steps[i], "pattern"), "String", " ")) {
            continue; /* Gemma's Split on " ": the normalizer already replaced every space, so it never splits */
        }
        *st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                          "%s: pre_tokenizer step %s is not supported in a SentencePiece-style file (supported: "
                          "Metaspace; Split on \" \" after the normalizer replaced the spaces)",
                          path, json_brief(steps[i]));
        free(steps);
        return false;
    }
    free(steps);
    if ((replace_space || metaspace) && *prefix < 0) *prefix = 0;
    return replace_space || metaspace;
}

/* "left right" text of one merge entry (string, or a two-string array in newer files). */
static char *merge_text(json_object *m) {
    if (json_object_is_type(m, json_type_string)) {
        return bitnet_strndup(json_object_get_string(m), (size_t)json_object_get_string_len(m));
    }
    if (json_object_is_type(m, json_type_array) && json_object_array_length(m) == 2) {
        json_object *a = json_object_array_get_idx(m, 0), *b = json_object_array_get_idx(m, 1);
        if (!json_object_is_type(a, json_type_string) || !json_object_is_type(b, json_type_string)) return NULL;
        const size_t la = (size_t)json_object_get_string_len(a), lb = (size_t)json_object_get_string_len(b);
        if (memchr(json_object_get_string(a), ' ', la) || memchr(json_object_get_string(b), ' ', lb)) return NULL;
        char *s = (char *)malloc(la + lb + 2);
        if (!s) return NULL;
        memcpy(s, json_object_get_string(a), la);
        s[la] = ' ';
        memcpy(s + la + 1, json_object_get_string(b), lb);
        s[la + lb + 1] = 0;
        return s;
    }
    return NULL;
}

/* Does an added token's text look like a control token although not marked special (llama.cpp's rule)? */
static bool looks_special(const char *t) {
    const size_t n = strlen(t);
    if (n >= 4 && strncmp(t, "<|", 2) == 0 && strcmp(t + n - 2, "|>") == 0) return true;
    return strcmp(t, "<pad>") == 0 || strcmp(t, "<mask>") == 0;
}

/* Scores of an SPM-style tokenizer.json (see the top of the file). */
static void derive_scores(bitnet_hf_vocab *v, json_object *merges, const char *const *merge_texts) {
    const int64_t nm = (int64_t)json_object_array_length(merges);
    bool *set = (bool *)calloc((size_t)(v->n_tokens ? v->n_tokens : 1), sizeof(bool));
    /* text → id: a simple open-addressing table over the tokens */
    size_t cap = 16;
    while (cap < (size_t)v->n_tokens * 2) cap *= 2;
    int32_t *slot = (int32_t *)calloc(cap, sizeof *slot);
    char *cat = NULL;
    size_t cat_cap = 0;
    if (set && slot) {
        for (int32_t i = 0; i < v->n_tokens; i++) {
            uint64_t h = 1469598103934665603ull;
            for (const char *p = v->tokens[i]; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
            size_t k = (size_t)h & (cap - 1);
            while (slot[k]) k = (k + 1) & (cap - 1);
            slot[k] = i + 1;
        }
        for (int64_t r = 0; r < nm; r++) {
            const char *m = merge_texts[r];
            const char *sp = strchr(m + (m[0] ? 1 : 0), ' ');
            if (!sp) continue;
            const size_t n = strlen(m) - 1;
            if (n + 1 > cat_cap) {
                cat_cap = 2 * (n + 1);
                char *nc = (char *)realloc(cat, cat_cap);
                if (!nc) break;
                cat = nc;
            }
            memcpy(cat, m, (size_t)(sp - m));
            strcpy(cat + (sp - m), sp + 1);
            uint64_t h = 1469598103934665603ull;
            for (const char *p = cat; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
            for (size_t k = (size_t)h & (cap - 1); slot[k]; k = (k + 1) & (cap - 1)) {
                const int32_t id = slot[k] - 1;
                if (strcmp(v->tokens[id], cat) == 0) {
                    if (!set[id]) {
                        set[id] = true;
                        v->scores[id] = -(float)r;
                    }
                    break;
                }
            }
        }
    }
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (set && set[i]) continue;
        const char *t = v->tokens[i];
        const size_t n = strlen(t);
        const unsigned c = (unsigned char)t[0];
        const size_t first = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2; /* one character? */
        const bool normal = v->token_types[i] == BITNET_TOKEN_NORMAL;
        v->scores[i] = normal && n > first ? -(float)(nm + i) : 0.0f;
    }
    free(cat);
    free(slot);
    free(set);
}

/* The shape tokenizer.json must have: an object with a "model" of type "BPE", "model.vocab" an object,
 * "model.merges" an array, "added_tokens" (optional) an array. */
static bitnet_status check_shape(json_object *root, json_object *model, const char *type, json_object *vocab,
                                 json_object *merges, json_object *added, const char *path, bitnet_error *err) {
    if (!json_object_is_type(root, json_type_object)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: the top level is not an object", path);
    }
    if (!model || !json_object_is_type(model, json_type_object)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: no \"model\" object", path);
    }
    if (!type) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"model\" has no \"type\" string", path);
    }
    if (strcmp(type, "BPE") != 0) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: tokenizer model type \"%.40s\" is not supported (supported: \"BPE\", byte-level or "
                           "SentencePiece-style)",
                           path, type);
    }
    if (!vocab || !json_object_is_type(vocab, json_type_object)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"model.vocab\" is missing or not an object", path);
    }
    if (!merges || !json_object_is_type(merges, json_type_array)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"model.merges\" is missing or not an array", path);
    }
    if (added && !json_object_is_type(added, json_type_array)) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"added_tokens\" is not an array", path);
    }
    return BITNET_OK;
}

/* The kind of vocabulary: byte-level (a ByteLevel pre-tokenizer or decoder step: model "gpt2", the
 * pre-tokenizer identified) or SentencePiece-style (model "llama", pre "default"; *use_model_file when
 * have_model_file, whose scores are the real ones). Anything else is BITNET_ERR_UNSUPPORTED. */
static bitnet_status detect_kind(json_object *root, bool have_model_file, bitnet_hf_vocab *v, bool *use_model_file,
                                 const char *path, bitnet_error *err) {
    bitnet_status st = BITNET_OK;
    json_object *pre = get(root, "pre_tokenizer");
    bool byte_level = false;
    {
        json_object **steps;
        size_t n = steps_of(pre, "pretokenizers", &steps);
        for (size_t i = 0; i < n; i++) byte_level |= str_is(steps[i], "type", "ByteLevel");
        free(steps);
        n = steps_of(get(root, "decoder"), "decoders", &steps);
        for (size_t i = 0; i < n; i++) byte_level |= str_is(steps[i], "type", "ByteLevel");
        free(steps);
    }
    int prefix = -1;
    if (byte_level) {
        const char *name = identify_pre(pre, &st, path, err);
        if (!name) return st;
        /* the runtime normalizes only for "qwen2" (NFC, as Qwen's files ask); any other normalizer of a
         * byte-level file would be silently skipped, so it is refused */
        json_object *norm = get(root, "normalizer");
        const bool nfc = norm && str_is(norm, "type", "NFC");
        if (norm && !json_object_is_type(norm, json_type_null) && !(nfc && strcmp(name, "qwen2") == 0)) {
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                               "%s: normalizer %.200s is not supported with the %s pre-tokenizer (supported: none; NFC "
                               "with the Qwen2 Split regex)",
                               path, json_brief(norm), name);
        }
        if (!nfc && strcmp(name, "qwen2") == 0) {
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                               "%s: the Qwen2 Split regex without the NFC normalizer is not supported (the runtime's "
                               "\"qwen2\" always normalizes to NFC): normalizer %.200s",
                               path, json_brief(norm));
        }
        strcpy(v->model, "gpt2");
        snprintf(v->pre, sizeof v->pre, "%s", name);
    } else {
        st = BITNET_OK;
        if (!spm_style(root, &prefix, &st, path, err)) {
            if (st == BITNET_OK) {
                st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                                 "%s: a BPE tokenizer that is neither byte-level (ByteLevel pre-tokenizer/decoder) nor "
                                 "SentencePiece-style (\"\xE2\x96\x81\" normalizer or Metaspace): normalizer %.200s, "
                                 "pre_tokenizer %.200s",
                                 path, json_brief(get(root, "normalizer")), json_brief(pre));
            }
            return st;
        }
        if (have_model_file) { /* the SentencePiece file has the real scores */
            *use_model_file = true;
            return st;
        }
        strcpy(v->model, "llama");
        strcpy(v->pre, "default");
        v->add_space_prefix = prefix;
    }
    return BITNET_OK;
}

/* The largest id of model.vocab and added_tokens (each checked to be an integer in [0, INT32_MAX - 1)). */
static bitnet_status max_token_id(json_object *vocab, json_object *added, size_t n_added, int64_t *out,
                                  const char *path, bitnet_error *err) {
    int64_t max_id = -1;
    json_object_object_foreach(vocab, key, val) {
        if (!json_object_is_type(val, json_type_int)) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.vocab[\"%.40s\"] is not an integer id", path, key);
        }
        const int64_t id = json_object_get_int64(val);
        if (id < 0 || id >= BITNET_HF_MAX_VOCAB) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.vocab[\"%.40s\"] = %lld is not a valid id (0 to %lld)",
                               path, key, (long long)id, (long long)BITNET_HF_MAX_VOCAB - 1);
        }
        if (id > max_id) max_id = id;
    }
    for (size_t i = 0; i < n_added; i++) {
        json_object *a = json_object_array_get_idx(added, i);
        json_object *idv = get(a, "id");
        if (!idv || !json_object_is_type(idv, json_type_int) || !get_str(a, "content")) {
            return bitnet_fail(err, BITNET_ERR_FORMAT,
                               "%s: added_tokens[%zu] has no integer \"id\" and string \"content\"", path, i);
        }
        const int64_t id = json_object_get_int64(idv);
        if (id < 0 || id >= BITNET_HF_MAX_VOCAB) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: added_tokens[%zu].id = %lld is not a valid id (0 to %lld)",
                               path, i, (long long)id, (long long)BITNET_HF_MAX_VOCAB - 1);
        }
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.vocab is empty", path);
    }
    *out = max_id;
    return BITNET_OK;
}

/* The token texts and types of model.vocab, then added_tokens (their text wins; CONTROL when "special" or
 * looking like "<|...|>", else USER_DEFINED), holes filled, and for "llama" the unknown token. */
static bitnet_status fill_tokens(bitnet_hf_vocab *v, json_object *model, json_object *vocab, json_object *added,
                                 size_t n_added, bool spm, const char *path, bitnet_error *err) {
    bitnet_status st;
    {
        json_object_object_foreach(vocab, key, val) {
            const int32_t id = (int32_t)json_object_get_int64(val);
            const size_t kl = strlen(key);
            if (v->tokens[id]) {
                return bitnet_fail(err, BITNET_ERR_FORMAT,
                                   "%s: model.vocab has two tokens with id %d: \"%.40s\" and \"%.40s\"", path, (int)id,
                                   v->tokens[id], key);
            }
            if (!(v->tokens[id] = bitnet_strndup(key, kl))) return oom(err);
            v->token_types[id] = BITNET_TOKEN_NORMAL;
            if (spm && kl == 6 && strncmp(key, "<0x", 3) == 0 && key[5] == '>') v->token_types[id] = BITNET_TOKEN_BYTE;
        }
    }
    /* json-c object keys are C strings: a key with an embedded NUL would be cut; the lengths of the
     * string values elsewhere are checked below. */
    for (size_t i = 0; i < n_added; i++) {
        json_object *a = json_object_array_get_idx(added, i);
        const int32_t id = (int32_t)json_object_get_int64(get(a, "id"));
        json_object *cs = get(a, "content");
        const char *content = json_object_get_string(cs);
        const size_t cl = (size_t)json_object_get_string_len(cs);
        if (memchr(content, 0, cl) || cl == 0) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: added_tokens[%zu] (id %d) is empty or contains a NUL byte",
                               path, i, (int)id);
        }
        if (!v->tokens[id] || strcmp(v->tokens[id], content) != 0) { /* the added text wins, as in tokenizers */
            free(v->tokens[id]);
            if (!(v->tokens[id] = bitnet_strndup(content, cl))) return oom(err);
        }
        const bool special = get_bool(a, "special") == 1;
        v->token_types[id] = special || looks_special(content) ? BITNET_TOKEN_CONTROL : BITNET_TOKEN_USER_DEFINED;
    }
    if ((st = fill_holes(v, 0, err)) != BITNET_OK) return st;
    if (spm) {
        const char *unk = get_str(model, "unk_token");
        const int32_t u = find_token(v, unk);
        if (u >= 0) {
            v->unk_id = u;
            v->token_types[u] = BITNET_TOKEN_UNKNOWN;
        }
    }
    return BITNET_OK;
}

/* model.merges ("a b" or ["a", "b"]): kept in rank order for byte-level vocabularies, turned into scores
 * (derive_scores) for SentencePiece-style ones. */
static bitnet_status read_merges(bitnet_hf_vocab *v, json_object *merges, bool spm, const char *path,
                                 bitnet_error *err) {
    bitnet_status st = BITNET_OK;
    const int64_t nm = (int64_t)json_object_array_length(merges);
    char **merge_texts = (char **)calloc((size_t)(nm ? nm : 1), sizeof *merge_texts);
    if (!merge_texts) return oom(err);
    for (int64_t i = 0; i < nm; i++) {
        json_object *m = json_object_array_get_idx(merges, (size_t)i);
        merge_texts[i] = merge_text(m);
        const char *sp = merge_texts[i] ? strchr(merge_texts[i] + (merge_texts[i][0] ? 1 : 0), ' ') : NULL;
        if (!merge_texts[i] || !sp || sp[1] == 0 ||
            (json_object_is_type(m, json_type_string) && strchr(sp + 1, ' '))) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.merges[%lld] = %.100s is not two tokens separated by a space",
                             path, (long long)i, json_brief(m));
            goto done;
        }
    }
    if (spm) {
        derive_scores(v, merges, (const char *const *)merge_texts);
    } else {
        v->merges = merge_texts;
        v->n_merges = nm;
        merge_texts = NULL;
    }
done:
    if (merge_texts) {
        for (int64_t i = 0; i < nm; i++) free(merge_texts[i]);
        free(merge_texts);
    }
    return st;
}

/* add_bos / add_eos (and the BOS id when none is known) from a TemplateProcessing post-processor
 * (tokenizer_config.json's add_bos_token / add_eos_token override them later). *appended: the id of the
 * special token a single-sequence template of more than one item ends with (what "add EOS" must append;
 * bitnet_hf_vocab_load makes it the EOS), else -1. */
static void bos_from_post_processor(json_object *root, bitnet_hf_vocab *v, int32_t *appended) {
    *appended = -1;
    json_object **steps;
    const size_t n = steps_of(get(root, "post_processor"), "processors", &steps);
    for (size_t i = 0; i < n; i++) {
        if (!str_is(steps[i], "type", "TemplateProcessing")) continue;
        json_object *single = get(steps[i], "single");
        if (!single || !json_object_is_type(single, json_type_array) || json_object_array_length(single) == 0) continue;
        json_object *first = json_object_array_get_idx(single, 0);
        json_object *last = json_object_array_get_idx(single, json_object_array_length(single) - 1);
        const char *ft = get_str(get(first, "SpecialToken"), "id");
        const char *lt = get_str(get(last, "SpecialToken"), "id");
        v->add_bos = ft != NULL;
        v->add_eos = lt != NULL && json_object_array_length(single) > 1;
        if (ft && v->bos_id < 0) v->bos_id = find_token(v, ft);
        if (v->add_eos) *appended = find_token(v, lt);
    }
    free(steps);
}

static bitnet_status load_tokenizer_json(const char *dir, const char *path, bool have_model_file, bitnet_hf_vocab *v,
                                         bool *use_model_file, int32_t *appended, bitnet_error *err) {
    *use_model_file = false;
    *appended = -1;
    json_object *root = NULL;
    bitnet_status st = parse_json(path, &root, err);
    if (st != BITNET_OK) return st;
    json_object *model = get(root, "model");
    json_object *vocab = get(model, "vocab");
    json_object *merges = get(model, "merges");
    json_object *added = get(root, "added_tokens");
    const char *type = get_str(model, "type");
    if ((st = check_shape(root, model, type, vocab, merges, added, path, err)) != BITNET_OK) goto done;
    if ((st = detect_kind(root, have_model_file, v, use_model_file, path, err)) != BITNET_OK || *use_model_file) {
        goto done;
    }
    snprintf(v->source, sizeof v->source, "tokenizer.json");

    /* ids: model.vocab and added_tokens */
    const size_t n_added = added ? json_object_array_length(added) : 0;
    int64_t max_id = -1;
    if ((st = max_token_id(vocab, added, n_added, &max_id, path, err)) != BITNET_OK) goto done;
    const bool spm = strcmp(v->model, "llama") == 0;
    if ((st = bitnet_hf_vocab_alloc(v, (int32_t)(max_id + 1), spm, err)) != BITNET_OK) goto done;
    if ((st = fill_tokens(v, model, vocab, added, n_added, spm, path, err)) != BITNET_OK) goto done;
    if ((st = read_merges(v, merges, spm, path, err)) != BITNET_OK) goto done;
    bos_from_post_processor(root, v, appended);
    (void)dir;

done:
    json_object_put(root);
    return st;
}


/* ---------------------------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------------------------- */

bitnet_status bitnet_hf_vocab_load(const char *dir, bitnet_hf_vocab **out, bitnet_error *err) {
    *out = NULL;
    char json_path[4096], model_path[4096];
    if (snprintf(json_path, sizeof json_path, "%s/tokenizer.json", dir) >= (int)sizeof json_path ||
        snprintf(model_path, sizeof model_path, "%s/tokenizer.model", dir) >= (int)sizeof model_path) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "model folder path is too long: %.200s...", dir);
    }
    const bool have_json = file_exists(json_path), have_model = file_exists(model_path);
    if (!have_json && !have_model) {
        return bitnet_fail(err, BITNET_ERR_IO, "no tokenizer in %s: looked for %s and %s", dir, json_path, model_path);
    }
    bitnet_hf_vocab *v = vocab_new();
    if (!v) return oom(err);
    json_object *config = NULL, *special_map = NULL;
    bitnet_status st = BITNET_OK;
    bool use_model = !have_json;
    int32_t appended = -1;
    if (have_json) st = load_tokenizer_json(dir, json_path, have_model, v, &use_model, &appended, err);
    if (st == BITNET_OK && use_model) {
        bitnet_hf_vocab_free(v);
        if (!(v = vocab_new())) return oom(err);
        st = bitnet_hf_load_tokenizer_model(model_path, v, err);
    }
    if (st == BITNET_OK) st = read_config(dir, &config, &special_map, err);
    if (st == BITNET_OK && use_model) st = bitnet_hf_apply_added_decoder(v, dir, config, err);
    if (st == BITNET_OK) st = apply_config(v, dir, config, special_map, err);
    if (st == BITNET_OK && !use_model && appended >= 0 && appended != v->eos_id) {
        /* the post-processor appends another token than tokenizer_config.json's eos_token: that token is
         * the EOS (what add_eos_token appends), the config's becomes the end of turn (gguf-py's
         * SpecialVocab does the same) */
        if (v->eot_id < 0) v->eot_id = v->eos_id;
        v->eos_id = appended;
    }
    json_object_put(config);
    json_object_put(special_map);
    if (st != BITNET_OK) {
        bitnet_hf_vocab_free(v);
        return st;
    }
    *out = v;
    return BITNET_OK;
}

bitnet_status bitnet_hf_vocab_apply_arch(bitnet_hf_vocab *v, const char *arch, bitnet_error *err) {
    if (!arch) return BITNET_OK;
    if (strcmp(arch, "qwen3") == 0 && strcmp(v->model, "gpt2") == 0) {
        const int32_t id = find_token(v, "<|endoftext|>");
        if (id < 0) {
            return bitnet_fail(err, BITNET_ERR_FORMAT,
                               "%s: a qwen3 tokenizer without the token <|endoftext|> (its EOS for last-token pooling)",
                               v->source);
        }
        if (v->eos_id != id && v->eot_id < 0) v->eot_id = v->eos_id; /* <|im_end|> stays the end of turn */
        v->eos_id = id;
        v->add_eos = 1;
    } else if (strcmp(arch, "gemma3") == 0 && strcmp(v->model, "llama") == 0) {
        v->add_space_prefix = 0;
        for (int32_t i = 0; i < v->n_tokens && v->scores; i++) {
            const int32_t t = v->token_types[i];
            if (t == BITNET_TOKEN_CONTROL || t == BITNET_TOKEN_USER_DEFINED || t == BITNET_TOKEN_UNKNOWN) v->scores[i] = -1000.0f;
        }
    }
    return BITNET_OK;
}

bitnet_status bitnet_hf_vocab_write_gguf(const bitnet_hf_vocab *v, bitnet_gguf_writer *w, bitnet_error *err) {
    const bool spm = strcmp(v->model, "llama") == 0;
    if (!spm && strcmp(v->model, "gpt2") != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "hf vocab: model \"%.8s\" is neither \"llama\" nor \"gpt2\"", v->model);
    }
    if (v->n_tokens <= 0 || !v->tokens || !v->token_types || (spm && !v->scores) || (!spm && v->n_merges > 0 && !v->merges)) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "hf vocab: tokens, token types, scores or merges are missing");
    }
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (!v->tokens[i]) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "hf vocab: token %d has no text", (int)i);
    }
    const int32_t ids[6] = {v->bos_id, v->eos_id, v->unk_id, v->pad_id, v->eot_id, v->eom_id};
    static const char *const keys[6] = {"tokenizer.ggml.bos_token_id",     "tokenizer.ggml.eos_token_id",
                                        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                                        "tokenizer.ggml.eot_token_id",     "tokenizer.ggml.eom_token_id"};
    for (int k = 0; k < 6; k++) {
        if (ids[k] >= v->n_tokens) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "hf vocab: %s = %d is not a token id (%d tokens)", keys[k],
                               (int)ids[k], (int)v->n_tokens);
        }
    }
    bitnet_status st;
#define SET(call)                                                                                                        \
    do {                                                                                                                 \
        if ((st = (call)) != BITNET_OK) return bitnet_fail(err, st, "cannot set the tokenizer keys (%s)", bitnet_status_name(st)); \
    } while (0)
    SET(bitnet_gguf_set_str(w, "tokenizer.ggml.model", v->model));
    SET(bitnet_gguf_set_str(w, "tokenizer.ggml.pre", v->pre[0] ? v->pre : "default"));
    SET(bitnet_gguf_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, (uint64_t)v->n_tokens));
    if (spm) SET(bitnet_gguf_set_arr(w, "tokenizer.ggml.scores", BITNET_GGUF_FLOAT32, v->scores, (uint64_t)v->n_tokens));
    SET(bitnet_gguf_set_arr(w, "tokenizer.ggml.token_type", BITNET_GGUF_INT32, v->token_types, (uint64_t)v->n_tokens));
    if (!spm) {
        SET(bitnet_gguf_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, (uint64_t)v->n_merges));
    }
    for (int k = 0; k < 6; k++) {
        if (ids[k] >= 0) SET(bitnet_gguf_set_u32(w, keys[k], (uint32_t)ids[k]));
    }
    if (v->add_bos >= 0) SET(bitnet_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", v->add_bos != 0));
    if (v->add_eos >= 0) SET(bitnet_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", v->add_eos != 0));
    if (spm && v->add_space_prefix >= 0) {
        SET(bitnet_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", v->add_space_prefix != 0));
    }
    if (v->chat_template) SET(bitnet_gguf_set_str(w, "tokenizer.chat_template", v->chat_template));
#undef SET
    return BITNET_OK;
}

bitnet_status bitnet_hf_vocab_write_vocab_only(const bitnet_hf_vocab *v, const char *arch, const char *name,
                                               const char *path, bitnet_error *err) {
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    if (!w) return oom(err);
    bitnet_status st = bitnet_gguf_set_str(w, "general.architecture", arch);
    if (st == BITNET_OK && name) st = bitnet_gguf_set_str(w, "general.name", name);
    if (st != BITNET_OK) st = bitnet_fail(err, st, "cannot set the general keys (%s)", bitnet_status_name(st));
    if (st == BITNET_OK) st = bitnet_hf_vocab_write_gguf(v, w, err);
    if (st == BITNET_OK) st = bitnet_gguf_write_begin(w, path, err);
    if (st == BITNET_OK) st = bitnet_gguf_write_end(w, err);
    bitnet_gguf_writer_free(w);
    return st;
}
