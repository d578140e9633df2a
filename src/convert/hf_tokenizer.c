/* hf_tokenizer.c — Hugging Face tokenizer files → bitnet_hf_vocab → GGUF tokenizer.ggml.* keys.
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
 *  - tokenizer.model is a protobuf ModelProto (sentencepiece_model.proto): field 1 repeated SentencePiece
 *    {1 piece: string, 2 score: float, 3 type: enum NORMAL=1 UNKNOWN=2 CONTROL=3 USER_DEFINED=4 UNUSED=5
 *    BYTE=6}, field 2 TrainerSpec {3 model_type: UNIGRAM=1 BPE=2 WORD=3 CHAR=4, 40 unk_id, 41 bos_id,
 *    42 eos_id, 43 pad_id}, field 3 NormalizerSpec {3 add_dummy_prefix (default true)}. Wire format
 *    (https://protobuf.dev/programming-guides/encoding/): key = varint (field << 3 | wire type), wire types
 *    0 varint, 1 fixed64, 2 length-delimited, 5 fixed32; int32 -1 is a 10-byte varint.
 *  - tokenizer_config.json: bos_token/eos_token/unk_token/pad_token (string or {"content": ...}),
 *    add_bos_token, add_eos_token, chat_template (string, or [{"name", "template"}] → "default"),
 *    added_tokens_decoder {"id": {"content", "special"}}. When add_bos_token is absent, a TemplateProcessing
 *    post_processor whose single template starts with the BOS token means add BOS (as llama.cpp's gguf-py
 *    SpecialVocab reads it).
 */
#include "convert/hf_tokenizer.h"

#include "text/tokenizer.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Small helpers
 * ------------------------------------------------------------------------------------------- */

static bitnet_status oom(bitnet_error *err) { return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory reading the tokenizer"); }

static char *xstrndup(const char *s, size_t n) {
    char *d = (char *)malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static bool file_exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    fclose(f);
    return true;
}

/* Whole file into a NUL-terminated buffer. */
static bitnet_status read_file(const char *path, char **data, size_t *size, bitnet_error *err) {
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
    bitnet_status st = read_file(path, &data, &size, err);
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

static json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    if (o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v)) return v;
    return NULL;
}

static const char *get_str(json_object *o, const char *key) {
    json_object *v = get(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static bool str_is(json_object *o, const char *key, const char *want) {
    const char *s = get_str(o, key);
    return s && strcmp(s, want) == 0;
}

/* Boolean field: 1 / 0, or -1 when absent or not a boolean. */
static int get_bool(json_object *o, const char *key) {
    json_object *v = get(o, key);
    if (!v || !json_object_is_type(v, json_type_boolean)) return -1;
    return json_object_get_boolean(v) ? 1 : 0;
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

/* Allocate n_tokens entries (texts NULL, types 0, scores 0 when with_scores). */
static bitnet_status vocab_alloc(bitnet_hf_vocab *v, int32_t n, bool with_scores, bitnet_error *err) {
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
        if (!(v->tokens[i] = xstrndup(name, strlen(name)))) return oom(err);
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
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "the tokenizer (%s) has %d tokens but the model's vocab_size is %lld: the embedding has no "
                           "row for the last %lld tokens",
                           v->source, (int)v->n_tokens, (long long)n_vocab, (long long)(v->n_tokens - n_vocab));
    }
    if (n_vocab > (int64_t)INT32_MAX - 1) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "vocab_size %lld is too large", (long long)n_vocab);
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
    if (tmpl && !(v->chat_template = xstrndup(tmpl, strlen(tmpl)))) return oom(err);
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

/* tokenizer.ggml.pre of a byte-level pre_tokenizer (see hf_tokenizer.h), or NULL. */
static const char *identify_pre(json_object *pre, bitnet_status *st, const char *path, bitnet_error *err) {
    json_object **steps;
    const size_t n = steps_of(pre, "pretokenizers", &steps);
    size_t n_bytelevel = 0, n_split_llama3 = 0, n_punct = 0, n_digits_single = 0, n_other = 0;
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
            if (re && strcmp(re, k_llama3_split) == 0 && str_is(s, "behavior", "Isolated") && get_bool(s, "invert") != 1) {
                n_split_llama3++;
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
        if (n_split_llama3 == 1 && bl_use_regex == 0 && n_punct == 0 && n_digits_single == 0) name = "llama-bpe";
        else if (n_split_llama3 == 0 && n_punct == 1 && n_digits_single == 1) name = "falcon3";
        else if (n == 1 && bl_use_regex == 1) name = "gpt2";
    }
    if (!name) {
        *st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                          "%s: unsupported pre_tokenizer (known: the Llama 3 Split regex + ByteLevel, Falcon3's "
                          "Punctuation/Digits + ByteLevel, GPT-2's ByteLevel): %.600s",
                          path, json_brief(pre));
    }
    return name;
}

/* Is this a SentencePiece-style tokenizer.json: "▁" normalizer or Metaspace pre-tokenizer? Sets
 * *prefix (1/0/-1 unknown) and fails on normalizer steps we do not reproduce. */
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
    free(steps);
    if ((replace_space || metaspace) && *prefix < 0) *prefix = 0;
    return replace_space || metaspace;
}

/* "left right" text of one merge entry (string, or a two-string array in newer files). */
static char *merge_text(json_object *m) {
    if (json_object_is_type(m, json_type_string)) {
        return xstrndup(json_object_get_string(m), (size_t)json_object_get_string_len(m));
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

static bitnet_status load_tokenizer_json(const char *dir, const char *path, bool have_model_file, bitnet_hf_vocab *v,
                                         bool *use_model_file, bitnet_error *err) {
    *use_model_file = false;
    json_object *root = NULL;
    bitnet_status st = parse_json(path, &root, err);
    if (st != BITNET_OK) return st;
    json_object *model = get(root, "model");
    json_object *vocab = get(model, "vocab");
    json_object *merges = get(model, "merges");
    json_object *added = get(root, "added_tokens");
    const char *type = get_str(model, "type");
    char **merge_texts = NULL;
    int64_t nm = 0;
    if (!json_object_is_type(root, json_type_object)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: the top level is not an object", path);
        goto done;
    }
    if (!model || !json_object_is_type(model, json_type_object)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: no \"model\" object", path);
        goto done;
    }
    if (!type) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"model\" has no \"type\" string", path);
        goto done;
    }
    if (strcmp(type, "BPE") != 0) {
        st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                         "%s: tokenizer model type \"%.40s\" is not supported (supported: \"BPE\", byte-level or "
                         "SentencePiece-style)",
                         path, type);
        goto done;
    }
    if (!vocab || !json_object_is_type(vocab, json_type_object)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"model.vocab\" is missing or not an object", path);
        goto done;
    }
    if (!merges || !json_object_is_type(merges, json_type_array)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"model.merges\" is missing or not an array", path);
        goto done;
    }
    if (added && !json_object_is_type(added, json_type_array)) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"added_tokens\" is not an array", path);
        goto done;
    }

    /* kind */
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
        if (!name) goto done;
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
            goto done;
        }
        if (have_model_file) { /* the SentencePiece file has the real scores */
            *use_model_file = true;
            goto done;
        }
        strcpy(v->model, "llama");
        strcpy(v->pre, "default");
        v->add_space_prefix = prefix;
    }
    snprintf(v->source, sizeof v->source, "tokenizer.json");

    /* ids: model.vocab and added_tokens */
    int64_t max_id = -1;
    json_object_object_foreach(vocab, key, val) {
        if (!json_object_is_type(val, json_type_int)) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.vocab[\"%.40s\"] is not an integer id", path, key);
            goto done;
        }
        const int64_t id = json_object_get_int64(val);
        if (id < 0 || id >= INT32_MAX - 1) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.vocab[\"%.40s\"] = %lld is not a valid id", path, key,
                             (long long)id);
            goto done;
        }
        if (id > max_id) max_id = id;
    }
    const size_t n_added = added ? json_object_array_length(added) : 0;
    for (size_t i = 0; i < n_added; i++) {
        json_object *a = json_object_array_get_idx(added, i);
        json_object *idv = get(a, "id");
        if (!idv || !json_object_is_type(idv, json_type_int) || !get_str(a, "content")) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: added_tokens[%zu] has no integer \"id\" and string \"content\"",
                             path, i);
            goto done;
        }
        const int64_t id = json_object_get_int64(idv);
        if (id < 0 || id >= INT32_MAX - 1) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: added_tokens[%zu].id = %lld is not a valid id", path, i,
                             (long long)id);
            goto done;
        }
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.vocab is empty", path);
        goto done;
    }
    const bool spm = strcmp(v->model, "llama") == 0;
    if ((st = vocab_alloc(v, (int32_t)(max_id + 1), spm, err)) != BITNET_OK) goto done;
    {
        json_object_object_foreach(vocab, key, val) {
            const int32_t id = (int32_t)json_object_get_int64(val);
            const size_t kl = strlen(key);
            if (v->tokens[id]) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: model.vocab has two tokens with id %d: \"%.40s\" and \"%.40s\"",
                                 path, (int)id, v->tokens[id], key);
                goto done;
            }
            if (!(v->tokens[id] = xstrndup(key, kl))) {
                st = oom(err);
                goto done;
            }
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
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: added_tokens[%zu] (id %d) is empty or contains a NUL byte", path, i,
                             (int)id);
            goto done;
        }
        if (!v->tokens[id] || strcmp(v->tokens[id], content) != 0) { /* the added text wins, as in tokenizers */
            free(v->tokens[id]);
            if (!(v->tokens[id] = xstrndup(content, cl))) {
                st = oom(err);
                goto done;
            }
        }
        const bool special = get_bool(a, "special") == 1;
        v->token_types[id] = special || looks_special(content) ? BITNET_TOKEN_CONTROL : BITNET_TOKEN_USER_DEFINED;
    }
    if ((st = fill_holes(v, 0, err)) != BITNET_OK) goto done;
    if (spm) {
        const char *unk = get_str(model, "unk_token");
        const int32_t u = find_token(v, unk);
        if (u >= 0) {
            v->unk_id = u;
            v->token_types[u] = BITNET_TOKEN_UNKNOWN;
        }
    }

    /* merges */
    nm = (int64_t)json_object_array_length(merges);
    merge_texts = (char **)calloc((size_t)(nm ? nm : 1), sizeof *merge_texts);
    if (!merge_texts) {
        st = oom(err);
        goto done;
    }
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

    /* add_bos from the post-processor (tokenizer_config.json's add_bos_token overrides it later) */
    {
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
        }
        free(steps);
    }
    (void)dir;

done:
    if (merge_texts) {
        for (int64_t i = 0; i < nm; i++) free(merge_texts[i]);
        free(merge_texts);
    }
    json_object_put(root);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * tokenizer.model (SentencePiece protobuf)
 * ------------------------------------------------------------------------------------------- */

typedef struct pb {
    const unsigned char *p, *end, *base;
    const char *path;
    bitnet_error *err;
    bool bad;
} pb;

static bool pb_fail(pb *r, const char *what) {
    if (!r->bad) {
        bitnet_fail(r->err, BITNET_ERR_FORMAT, "%s: malformed protobuf at byte %zu: %s", r->path, (size_t)(r->p - r->base),
                    what);
    }
    r->bad = true;
    return false;
}

static bool pb_varint(pb *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return pb_fail(r, "varint runs past the end");
        const unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return pb_fail(r, "varint longer than 10 bytes");
}

/* Read a field key; false at the end of the message or on error. */
static bool pb_key(pb *r, uint32_t *field, uint32_t *wire) {
    if (r->bad || r->p >= r->end) return false;
    uint64_t k;
    if (!pb_varint(r, &k)) return false;
    *field = (uint32_t)(k >> 3);
    *wire = (uint32_t)(k & 7);
    if (*field == 0) return pb_fail(r, "field number 0");
    return true;
}

static bool pb_bytes(pb *r, const unsigned char **data, size_t *len) {
    uint64_t n;
    if (!pb_varint(r, &n)) return false;
    if (n > (uint64_t)(r->end - r->p)) return pb_fail(r, "length-delimited field runs past the end");
    *data = r->p;
    *len = (size_t)n;
    r->p += n;
    return true;
}

static bool pb_skip(pb *r, uint32_t wire) {
    uint64_t v;
    const unsigned char *d;
    size_t n;
    switch (wire) {
    case 0: return pb_varint(r, &v);
    case 1:
        if (r->end - r->p < 8) return pb_fail(r, "fixed64 runs past the end");
        r->p += 8;
        return true;
    case 2: return pb_bytes(r, &d, &n);
    case 5:
        if (r->end - r->p < 4) return pb_fail(r, "fixed32 runs past the end");
        r->p += 4;
        return true;
    default: return pb_fail(r, "unknown wire type (groups are not used by sentencepiece_model.proto)");
    }
}

static pb pb_sub(const pb *parent, const unsigned char *d, size_t n) {
    pb s = *parent;
    s.p = d;
    s.end = d + n;
    return s;
}

static bitnet_status load_tokenizer_model(const char *path, bitnet_hf_vocab *v, bitnet_error *err) {
    char *data;
    size_t size;
    bitnet_status st = read_file(path, &data, &size, err);
    if (st != BITNET_OK) return st;
    pb r = {(const unsigned char *)data, (const unsigned char *)data + size, (const unsigned char *)data, path, err, false};
    /* pass 1: count pieces, read trainer and normalizer specs */
    int64_t n_pieces = 0;
    int64_t model_type = 1, unk = 0, bos = 1, eos = 2, pad = -1; /* proto defaults */
    int add_dummy_prefix = 1;
    uint32_t f, w;
    while (pb_key(&r, &f, &w)) {
        const unsigned char *d;
        size_t n;
        if (f == 1 && w == 2) {
            if (!pb_bytes(&r, &d, &n)) break;
            n_pieces++;
        } else if ((f == 2 || f == 3) && w == 2) {
            if (!pb_bytes(&r, &d, &n)) break;
            pb s = pb_sub(&r, d, n);
            uint32_t sf, sw;
            while (pb_key(&s, &sf, &sw)) {
                uint64_t x;
                if (sw != 0) {
                    if (!pb_skip(&s, sw)) break;
                    continue;
                }
                if (!pb_varint(&s, &x)) break;
                const int64_t sx = (int64_t)(int32_t)(uint32_t)x; /* int32 fields: -1 is sign-extended */
                if (f == 2 && sf == 3) model_type = sx;
                else if (f == 2 && sf == 40) unk = sx;
                else if (f == 2 && sf == 41) bos = sx;
                else if (f == 2 && sf == 42) eos = sx;
                else if (f == 2 && sf == 43) pad = sx;
                else if (f == 3 && sf == 3) add_dummy_prefix = x != 0;
            }
            if (s.bad) r.bad = true;
        } else if (!pb_skip(&r, w)) {
            break;
        }
    }
    if (r.bad) {
        free(data);
        return BITNET_ERR_FORMAT;
    }
    if (n_pieces == 0 || n_pieces > INT32_MAX - 2) {
        free(data);
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %lld pieces (not a SentencePiece model?)", path, (long long)n_pieces);
    }
    if (model_type != 2) {
        free(data);
        static const char *const names[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: SentencePiece model_type %s (%lld) is not supported (supported: BPE, as Llama's)", path,
                           model_type >= 0 && model_type <= 4 ? names[model_type] : "?", (long long)model_type);
    }
    if ((st = vocab_alloc(v, (int32_t)n_pieces, true, err)) != BITNET_OK) {
        free(data);
        return st;
    }
    /* pass 2: the pieces */
    r.p = r.base;
    int32_t i = 0;
    while (pb_key(&r, &f, &w)) {
        const unsigned char *d;
        size_t n;
        if (!(f == 1 && w == 2)) {
            if (!pb_skip(&r, w)) break;
            continue;
        }
        if (!pb_bytes(&r, &d, &n)) break;
        pb s = pb_sub(&r, d, n);
        const unsigned char *text = NULL;
        size_t tl = 0;
        float score = 0.0f;
        uint64_t type = 1;
        uint32_t sf, sw;
        while (pb_key(&s, &sf, &sw)) {
            if (sf == 1 && sw == 2) {
                if (!pb_bytes(&s, &text, &tl)) break;
            } else if (sf == 2 && sw == 5) {
                if (s.end - s.p < 4) {
                    pb_fail(&s, "fixed32 runs past the end");
                    break;
                }
                uint32_t bits = (uint32_t)s.p[0] | (uint32_t)s.p[1] << 8 | (uint32_t)s.p[2] << 16 | (uint32_t)s.p[3] << 24;
                memcpy(&score, &bits, 4);
                s.p += 4;
            } else if (sf == 3 && sw == 0) {
                if (!pb_varint(&s, &type)) break;
            } else if (!pb_skip(&s, sw)) {
                break;
            }
        }
        if (s.bad) {
            r.bad = true;
            break;
        }
        if (!text || tl == 0 || memchr(text, 0, tl)) {
            free(data);
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: piece %d has no text, an empty text or a NUL byte", path, (int)i);
        }
        if (type < 1 || type > 6) {
            free(data);
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: piece %d \"%.40s\" has type %llu (expected 1..6)", path, (int)i,
                               (const char *)text, (unsigned long long)type);
        }
        if (!(v->tokens[i] = xstrndup((const char *)text, tl))) {
            free(data);
            return oom(err);
        }
        v->scores[i] = score;
        v->token_types[i] = (int32_t)type; /* SentencePiece's enum values are GGUF's token types */
        i++;
    }
    free(data);
    if (r.bad) return BITNET_ERR_FORMAT;
    strcpy(v->model, "llama");
    strcpy(v->pre, "default");
    snprintf(v->source, sizeof v->source, "tokenizer.model");
    v->add_space_prefix = add_dummy_prefix;
    const int64_t ids[4] = {unk, bos, eos, pad};
    int32_t *dst[4] = {&v->unk_id, &v->bos_id, &v->eos_id, &v->pad_id};
    static const char *const names[4] = {"unk_id", "bos_id", "eos_id", "pad_id"};
    for (int k = 0; k < 4; k++) {
        if (ids[k] < -1 || ids[k] >= v->n_tokens) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: trainer_spec.%s = %lld is not a piece id (%d pieces)", path,
                               names[k], (long long)ids[k], (int)v->n_tokens);
        }
        *dst[k] = (int32_t)ids[k];
    }
    return BITNET_OK;
}

/* tokenizer_config.json's added_tokens_decoder for a tokenizer.model vocabulary: type (and, for ids
 * beyond the pieces, the text) of each added token. */
static bitnet_status apply_added_decoder(bitnet_hf_vocab *v, const char *dir, json_object *config, bitnet_error *err) {
    json_object *dec = get(config, "added_tokens_decoder");
    if (!dec || !json_object_is_type(dec, json_type_object)) return BITNET_OK;
    int64_t max_id = v->n_tokens - 1;
    json_object_object_foreach(dec, key, val) {
        char *end;
        errno = 0;
        const long long id = strtoll(key, &end, 10);
        if (errno || *end || id < 0 || id >= INT32_MAX - 1 || !get_str(val, "content")) {
            return bitnet_fail(err, BITNET_ERR_FORMAT,
                               "%s/tokenizer_config.json: added_tokens_decoder entry \"%.20s\" is not an id with a content",
                               dir, key);
        }
        if (id > max_id) max_id = id;
    }
    if (max_id >= v->n_tokens) {
        bitnet_status st = bitnet_hf_vocab_pad(v, max_id + 1, err);
        if (st != BITNET_OK) return st;
    }
    json_object_object_foreach(dec, key2, val2) {
        const int32_t id = (int32_t)strtoll(key2, NULL, 10);
        const char *content = get_str(val2, "content");
        if (strcmp(v->tokens[id], content) != 0) {
            char *t = xstrndup(content, strlen(content));
            if (!t) return oom(err);
            free(v->tokens[id]);
            v->tokens[id] = t;
        }
        if (v->token_types[id] == BITNET_TOKEN_BYTE || v->token_types[id] == BITNET_TOKEN_UNKNOWN) continue;
        v->token_types[id] = get_bool(val2, "special") == 1 ? BITNET_TOKEN_CONTROL : BITNET_TOKEN_USER_DEFINED;
    }
    return BITNET_OK;
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
    if (have_json) st = load_tokenizer_json(dir, json_path, have_model, v, &use_model, err);
    if (st == BITNET_OK && use_model) {
        bitnet_hf_vocab_free(v);
        if (!(v = vocab_new())) return oom(err);
        st = load_tokenizer_model(model_path, v, err);
    }
    if (st == BITNET_OK) st = read_config(dir, &config, &special_map, err);
    if (st == BITNET_OK && use_model) st = apply_added_decoder(v, dir, config, err);
    if (st == BITNET_OK) st = apply_config(v, dir, config, special_map, err);
    json_object_put(config);
    json_object_put(special_map);
    if (st != BITNET_OK) {
        bitnet_hf_vocab_free(v);
        return st;
    }
    *out = v;
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
