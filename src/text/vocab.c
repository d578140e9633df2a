/* vocab.c — the vocabulary read from GGUF metadata (tokenizer.ggml.*, see bitnet_vocab_load in
 * tokenizer.h): texts, scores, token types, special ids and flags, the byte and special-token tables, the
 * text -> id hash; the BPE part of loading is bitnet_bpe_load (bpe.c). Also the vocabulary accessors. */
#include "text/tokenizer_internal.h"

/* ---------------------------------------------------------------------------------------------
 * Text -> id hash: insertion (the lookup, vocab_find, is in tokenizer_internal.h)
 * ------------------------------------------------------------------------------------------- */

/* Insert id; a later token with the same text replaces an earlier one (as llama.cpp's map does). */
static void vocab_insert(bitnet_vocab *v, int32_t id) {
    const char *s = tok_text(v, id);
    const size_t n = v->len[id];
    size_t i = (size_t)hash_bytes(s, n) & (v->cap - 1);
    for (;;) {
        const int32_t e = v->slots[i];
        if (e == 0 || (v->len[e - 1] == n && memcmp(tok_text(v, e - 1), s, n) == 0)) {
            v->slots[i] = id + 1;
            return;
        }
        i = (i + 1) & (v->cap - 1);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Loading
 * ------------------------------------------------------------------------------------------- */

void bitnet_vocab_free(bitnet_vocab *v) {
    if (!v) return;
    free(v->arena);
    free(v->off);
    free(v->len);
    free(v->score);
    free(v->type);
    free(v->slots);
    free(v->special);
    free(v->pre_name);
    free(v->chat_template);
    free(v->merges);
    pcre2_code_free(v->re);
    free(v);
}

/* Optional token-id key: absent → dflt (if < n, else -1); -1 stored → none; else must be in [0, n). */
static bitnet_status read_id(const bitnet_gguf *g, const char *key, int32_t n, int32_t dflt, int32_t *out,
                             bitnet_error *err) {
    if (bitnet_gguf_find_kv(g, key) < 0) {
        *out = dflt < n ? dflt : -1;
        return BITNET_OK;
    }
    int64_t id;
    bitnet_status st = bitnet_gguf_get_i64(g, key, &id, err);
    if (st != BITNET_OK) return st;
    if (id == -1 || id == (int64_t)UINT32_MAX) { /* "none", as int32 -1 or its uint32 pattern */
        *out = -1;
        return BITNET_OK;
    }
    if (id < 0 || id >= n) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s = %lld is not a token id (vocabulary of %d tokens)",
                           bitnet_gguf_path(g), key, (long long)id, n);
    }
    *out = (int32_t)id;
    return BITNET_OK;
}

static bitnet_status read_flag(const bitnet_gguf *g, const char *key, bool dflt, bool *out, bitnet_error *err) {
    if (bitnet_gguf_find_kv(g, key) < 0) {
        *out = dflt;
        return BITNET_OK;
    }
    return bitnet_gguf_get_bool(g, key, out, err);
}
static int special_cmp_ctx(const bitnet_vocab *v, int32_t a, int32_t b) {
    if (v->len[a] != v->len[b]) return v->len[a] > v->len[b] ? -1 : 1;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* Insertion sort of the special ids (few of them; no qsort context needed). */
static void sort_special(bitnet_vocab *v) {
    for (int32_t i = 1; i < v->n_special; i++) {
        const int32_t x = v->special[i];
        int32_t j = i - 1;
        while (j >= 0 && special_cmp_ctx(v, v->special[j], x) > 0) {
            v->special[j + 1] = v->special[j];
            j--;
        }
        v->special[j + 1] = x;
    }
}

/* Id of the first CONTROL/USER_DEFINED token whose text is one of names, or -1 (llama.cpp finds EOT/EOM
 * this way when the GGUF has no eot/eom key). */
static int32_t find_by_text(const bitnet_vocab *v, const char *const *names, size_t n_names) {
    for (size_t i = 0; i < n_names; i++) {
        const int32_t id = vocab_find(v, names[i], strlen(names[i]));
        if (id >= 0 && (v->type[id] == BITNET_TOKEN_CONTROL || v->type[id] == BITNET_TOKEN_USER_DEFINED)) return id;
    }
    return -1;
}

/* The kind named by tokenizer.ggml.model ("llama" or "gpt2"). */
static bitnet_status read_kind(const bitnet_gguf *g, vocab_kind *kind, bitnet_error *err) {
    const char *path = bitnet_gguf_path(g);
    const char *model;
    size_t model_len;
    bitnet_status st = bitnet_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len, err);
    if (st != BITNET_OK) return st;
    if (model_len == 5 && memcmp(model, "llama", 5) == 0) *kind = VOCAB_SPM;
    else if (model_len == 4 && memcmp(model, "gpt2", 4) == 0) *kind = VOCAB_BPE;
    else {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: tokenizer.ggml.model = \"%.*s\" is not supported (supported: \"llama\", "
                           "SentencePiece-style; \"gpt2\", byte-level BPE)",
                           path, (int)(model_len > 64 ? 64 : model_len), model);
    }
    return BITNET_OK;
}

/* The out-of-memory error of every loading step after the vocabulary struct exists. */
static bitnet_status vocab_nomem(const bitnet_gguf *g, int32_t n, bitnet_error *err) {
    return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory loading a vocabulary of %d tokens",
                       bitnet_gguf_path(g), n);
}

/* Token texts (tokenizer.ggml.tokens, key index kt) into the arena, with their offsets and lengths. */
static bitnet_status load_texts(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err) {
    const char *path = bitnet_gguf_path(g);
    const int32_t n = v->n;
    const int64_t kt = bitnet_gguf_find_kv(g, "tokenizer.ggml.tokens");
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t l;
        bitnet_gguf_kv_arr_str(g, kt, (uint64_t)i, &l);
        if (l > UINT32_MAX) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d] is %zu bytes long", path, i, l);
        }
        v->off[i] = total;
        v->len[i] = (uint32_t)l;
        total += l + 1;
    }
    v->arena = (char *)malloc(total ? total : 1);
    if (!v->arena) return vocab_nomem(g, n, err);
    for (int32_t i = 0; i < n; i++) {
        size_t l;
        const char *s = bitnet_gguf_kv_arr_str(g, kt, (uint64_t)i, &l);
        memcpy(v->arena + v->off[i], s, l);
        v->arena[v->off[i] + l] = 0;
    }
    return BITNET_OK;
}

/* Scores (optional, float32; absent: all 0) and token types (optional, int32 0..6; absent: all NORMAL). */
static bitnet_status load_scores_and_types(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err) {
    const char *path = bitnet_gguf_path(g);
    const int32_t n = v->n;
    const uint64_t n64 = (uint64_t)n;
    bitnet_gguf_type et;
    const void *data;
    bitnet_status st;
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.scores") >= 0) {
        uint64_t m;
        if ((st = bitnet_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m, &data, err)) != BITNET_OK) return st;
        if (et != BITNET_GGUF_FLOAT32 || m != n64) {
            return bitnet_fail(err, BITNET_ERR_FORMAT,
                               "%s: tokenizer.ggml.scores is %llu × %s, expected %d × float32 (one per token)", path,
                               (unsigned long long)m, bitnet_gguf_type_name(et), n);
        }
        memcpy(v->score, data, (size_t)n * sizeof(float));
    }
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.token_type") >= 0) {
        uint64_t m;
        if ((st = bitnet_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m, &data, err)) != BITNET_OK) return st;
        if (et != BITNET_GGUF_INT32 || m != n64) {
            return bitnet_fail(err, BITNET_ERR_FORMAT,
                               "%s: tokenizer.ggml.token_type is %llu × %s, expected %d × int32 (one per token)", path,
                               (unsigned long long)m, bitnet_gguf_type_name(et), n);
        }
        memcpy(v->type, data, (size_t)n * sizeof(int32_t));
        for (int32_t i = 0; i < n; i++) {
            if (v->type[i] < 0 || v->type[i] > BITNET_TOKEN_BYTE) {
                return bitnet_fail(err, BITNET_ERR_FORMAT,
                                   "%s: tokenizer.ggml.token_type[%d] = %d is not a token type (0..6)", path, i,
                                   v->type[i]);
            }
        }
    } else {
        for (int32_t i = 0; i < n; i++) v->type[i] = BITNET_TOKEN_NORMAL;
    }
    return BITNET_OK;
}

/* The pre-tokenizer name (SPM: stored as it is; BPE: bitnet_bpe_load, with the regex and the merges) and
 * tokenizer.chat_template. Needs the text -> id hash (the merges use it). */
static bitnet_status load_pre_and_template(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err) {
    bitnet_status st;
    if (v->kind == VOCAB_BPE) {
        if ((st = bitnet_bpe_load(g, v, err)) != BITNET_OK) return st;
    } else {
        const char *pre = "default";
        size_t pre_len = 7;
        if (bitnet_gguf_find_kv(g, "tokenizer.ggml.pre") >= 0 &&
            (st = bitnet_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len, err)) != BITNET_OK) {
            return st;
        }
        if (!(v->pre_name = bitnet_strndup(pre, pre_len))) return vocab_nomem(g, v->n, err);
    }
    if (bitnet_gguf_find_kv(g, "tokenizer.chat_template") >= 0) {
        const char *t;
        size_t tl;
        if ((st = bitnet_gguf_get_str(g, "tokenizer.chat_template", &t, &tl, err)) != BITNET_OK) return st;
        if (!(v->chat_template = bitnet_strndup(t, tl))) return vocab_nomem(g, v->n, err);
    }
    return BITNET_OK;
}

/* Special ids and flags; SentencePiece defaults when a key is absent: unk 0, bos 1, eos 2 (BPE: none).
 * EOT/EOM without a key are found by their texts (find_by_text). */
static bitnet_status load_special_ids(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err) {
    const int32_t n = v->n;
    bitnet_status st;
    const bool spm = v->kind == VOCAB_SPM;
    const bool add_bos_default = spm || v->ignore_merges; /* llama.cpp: llama3-style pre-tokenizers add BOS */
    if ((st = read_id(g, "tokenizer.ggml.bos_token_id", n, spm ? 1 : -1, &v->bos, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.eos_token_id", n, spm ? 2 : -1, &v->eos, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.unknown_token_id", n, spm ? 0 : -1, &v->unk, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.padding_token_id", n, -1, &v->pad, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.eot_token_id", n, -1, &v->eot, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.eom_token_id", n, -1, &v->eom, err)) != BITNET_OK ||
        (st = read_flag(g, "tokenizer.ggml.add_bos_token", add_bos_default, &v->add_bos, err)) != BITNET_OK ||
        (st = read_flag(g, "tokenizer.ggml.add_eos_token", false, &v->add_eos, err)) != BITNET_OK ||
        (st = read_flag(g, "tokenizer.ggml.add_space_prefix", spm, &v->add_space_prefix, err)) != BITNET_OK) {
        return st;
    }
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.eot_token_id") < 0) {
        static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"};
        v->eot = find_by_text(v, eot_names, sizeof eot_names / sizeof eot_names[0]);
    }
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.eom_token_id") < 0) {
        static const char *const eom_names[] = {"<|eom_id|>"};
        v->eom = find_by_text(v, eom_names, 1);
    }
    return BITNET_OK;
}

/* The <0xXX> token of each byte and the special tokens of the partition (CONTROL, USER_DEFINED and
 * UNKNOWN with a non-empty text), sorted longest first. */
static bitnet_status index_bytes_and_specials(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err) {
    const int32_t n = v->n;
    for (int b = 0; b < 256; b++) v->byte_id[b] = -1;
    int32_t n_special = 0;
    for (int32_t i = 0; i < n; i++) {
        const int t = v->type[i];
        if (t == BITNET_TOKEN_BYTE) {
            const int b = byte_of_text(tok_text(v, i), v->len[i]);
            if (b < 0) {
                return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: token %d \"%.40s\" has type BYTE but is not <0xXX>",
                                   bitnet_gguf_path(g), i, tok_text(v, i));
            }
            if (v->byte_id[b] < 0) v->byte_id[b] = i;
        }
        if ((t == BITNET_TOKEN_CONTROL || t == BITNET_TOKEN_USER_DEFINED || t == BITNET_TOKEN_UNKNOWN) && v->len[i] > 0) {
            n_special++;
        }
    }
    v->special = (int32_t *)malloc((size_t)(n_special ? n_special : 1) * sizeof(int32_t));
    if (!v->special) return vocab_nomem(g, n, err);
    for (int32_t i = 0; i < n; i++) {
        const int t = v->type[i];
        if ((t == BITNET_TOKEN_CONTROL || t == BITNET_TOKEN_USER_DEFINED || t == BITNET_TOKEN_UNKNOWN) && v->len[i] > 0) {
            v->special[v->n_special++] = i;
        }
    }
    sort_special(v);
    return BITNET_OK;
}

bitnet_status bitnet_vocab_load(const bitnet_gguf *g, bitnet_vocab **out, bitnet_error *err) {
    *out = NULL;
    const char *path = bitnet_gguf_path(g);
    vocab_kind kind = VOCAB_SPM;
    bitnet_status st = read_kind(g, &kind, err);
    if (st != BITNET_OK) return st;
    bitnet_gguf_type et;
    uint64_t n64;
    const void *data;
    if ((st = bitnet_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n64, &data, err)) != BITNET_OK) return st;
    if (et != BITNET_GGUF_STRING) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.tokens is an array of %s, expected strings",
                           path, bitnet_gguf_type_name(et));
    }
    if (n64 == 0 || n64 > (uint64_t)INT32_MAX - 1) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (must be 1..2^31-2)",
                           path, (unsigned long long)n64);
    }
    const int32_t n = (int32_t)n64;

    bitnet_vocab *v = (bitnet_vocab *)calloc(1, sizeof *v);
    if (!v) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory loading the vocabulary", path);
    v->kind = kind;
    memcpy(v->model_name, kind == VOCAB_SPM ? "llama" : "gpt2", kind == VOCAB_SPM ? 6 : 5);
    v->n = n;
    v->off = (size_t *)malloc((size_t)n * sizeof *v->off);
    v->len = (uint32_t *)malloc((size_t)n * sizeof *v->len);
    v->score = (float *)calloc((size_t)n, sizeof *v->score);
    v->type = (int32_t *)malloc((size_t)n * sizeof *v->type);
    v->cap = 16;
    while (v->cap < (size_t)n * 2) v->cap *= 2;
    v->slots = (int32_t *)calloc(v->cap, sizeof *v->slots);
    if (!v->off || !v->len || !v->score || !v->type || !v->slots) {
        st = vocab_nomem(g, n, err);
        goto fail;
    }
    if ((st = load_texts(g, v, err)) != BITNET_OK || (st = load_scores_and_types(g, v, err)) != BITNET_OK) goto fail;
    /* lookup table first: the BPE merges and the EOT search use it */
    for (int32_t i = 0; i < n; i++) vocab_insert(v, i);
    if ((st = load_pre_and_template(g, v, err)) != BITNET_OK || (st = load_special_ids(g, v, err)) != BITNET_OK ||
        (st = index_bytes_and_specials(g, v, err)) != BITNET_OK) {
        goto fail;
    }
    *out = v;
    return BITNET_OK;

fail:
    bitnet_vocab_free(v);
    return st;
}

int32_t bitnet_vocab_n_tokens(const bitnet_vocab *v) { return v->n; }
int32_t bitnet_vocab_bos(const bitnet_vocab *v) { return v->bos; }
int32_t bitnet_vocab_eos(const bitnet_vocab *v) { return v->eos; }
int32_t bitnet_vocab_unk(const bitnet_vocab *v) { return v->unk; }
bool bitnet_vocab_add_bos(const bitnet_vocab *v) { return v->add_bos && v->bos >= 0; }
bool bitnet_vocab_add_eos(const bitnet_vocab *v) { return v->add_eos && v->eos >= 0; }

int32_t bitnet_vocab_eot(const bitnet_vocab *v) { return v->eot; }
int32_t bitnet_vocab_eom(const bitnet_vocab *v) { return v->eom; }
const char *bitnet_vocab_model(const bitnet_vocab *v) { return v->model_name; }
const char *bitnet_vocab_pre(const bitnet_vocab *v) { return v->pre_name; }
const char *bitnet_vocab_chat_template(const bitnet_vocab *v) { return v->chat_template; }

bool bitnet_vocab_is_eog(const bitnet_vocab *v, int32_t token) {
    return token >= 0 && (token == v->eos || token == v->eot || token == v->eom);
}

const char *bitnet_vocab_text(const bitnet_vocab *v, int32_t token) {
    return token >= 0 && token < v->n ? tok_text(v, token) : NULL;
}

int bitnet_vocab_type(const bitnet_vocab *v, int32_t token) {
    return token >= 0 && token < v->n ? v->type[token] : -1;
}

float bitnet_vocab_score(const bitnet_vocab *v, int32_t token) {
    return token >= 0 && token < v->n ? v->score[token] : 0.0f;
}

int32_t bitnet_vocab_find(const bitnet_vocab *v, const char *text, size_t len) { return vocab_find(v, text, len); }
