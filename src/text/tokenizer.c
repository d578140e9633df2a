/* tokenizer.c — vocabulary from GGUF metadata (tokenizer.ggml.*), the SentencePiece-style tokenizer
 * (tokenizer.ggml.model = "llama"), the byte-level BPE tokenizer ("gpt2"), the detokenizer (token →
 * printed bytes) and the UTF-8-safe streaming output.
 *
 * Both tokenizers follow llama.cpp, which is what bitnet.cpp runs (facts about the format and the
 * algorithms, restated here; the code is our own).
 *
 * Common first step — special-token partition: texts of special tokens found in the input become those
 * ids and split the text into fragments. Candidates are CONTROL, USER_DEFINED and UNKNOWN tokens, longest
 * text first (ties: lower id first); each is searched left to right in the fragments still raw. Without
 * parse_special only USER_DEFINED tokens are matched (they are plain-text atoms). Special tokens are
 * therefore never the result of merges on ordinary text.
 *
 * SPM ("llama"), per raw fragment:
 *  1. a space is prepended when add_space_prefix is on and the fragment is the first thing or follows a
 *     special token; every ' ' becomes "▁" (U+2581);
 *  2. the fragment is split into UTF-8 characters (a byte that does not start a valid sequence is a
 *     one-byte character), then the adjacent pair whose concatenation is a token with the highest
 *     score is merged repeatedly (ties: leftmost pair first) until no pair merges;
 *  3. each final piece emits its token id; a piece that is not a token (always a single character)
 *     emits one <0xXX> byte token per byte, falling back to a token whose text is that single byte,
 *     then to the unknown token.
 *
 * BPE ("gpt2"), per raw fragment:
 *  1. pre-tokenizer: the fragment is cut into pieces by a regex, matched left to right (each match is a
 *     piece, text between matches too). The regexes are those of the Hugging Face tokenizer.json files
 *     the vocabularies come from, which llama.cpp uses for the same tokenizer.ggml.pre names:
 *       GPT-2 ("default", "gpt2"; GPT-2's encoder.py and tokenizers' ByteLevel(use_regex=true)):
 *         's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *       Llama 3 ("llama-bpe", "llama3", "llama-v3"; Meta-Llama-3 tokenizer.json Split pattern;
 *         llama.cpp also runs "falcon3" and bitnet.cpp "falcon_e" with it):
 *         (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *         \s*[\r\n]+|\s+(?!\S)|\s+
 *     PCRE2 runs them in UTF mode with Unicode properties (PCRE2_UCP: \s, \p{L}, \p{N} are Unicode
 *     classes, as in the Rust regex crate tokenizers uses) and PCRE2_MATCH_INVALID_UTF (invalid bytes are
 *     never inside a match, so they end up in pieces of their own);
 *  2. each piece's bytes are mapped to GPT-2's printable alphabet (bytes_to_unicode of GPT-2's
 *     encoder.py: '!'..'~', 0xA1..0xAC, 0xAE..0xFF map to themselves, the other 68 bytes in increasing
 *     order to U+0100..U+0143);
 *  3. with the Llama-3-style pre-tokenizers a piece that is itself a token is emitted whole
 *     (tokenizer.json "ignore_merges": true; llama.cpp's ignore_merges);
 *  4. otherwise the piece starts as one symbol per mapped character and the adjacent pair with the
 *     lowest merge rank (index in tokenizer.ggml.merges) is merged repeatedly (ties: leftmost) until no
 *     pair has a rank (GPT-2 / Hugging Face BPE);
 *  5. each symbol emits its token; a symbol that is not a token emits its characters' tokens, then the
 *     unknown token.
 * The tokenizer kind is a switch on tokenizer.ggml.model.
 */
#include "text/tokenizer.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum vocab_kind {
    VOCAB_SPM = 1, /* "llama" */
    VOCAB_BPE = 2, /* "gpt2" */
} vocab_kind;

/* Pre-tokenizer regexes (see the top of this file for their sources). */
static const char k_re_gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char k_re_llama3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
                                  " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* tokenizer.ggml.pre names → regex; llama3-style ones also use ignore_merges and add BOS by default. */
typedef struct pre_kind {
    const char *name;
    const char *regex;
    bool llama3_style;
} pre_kind;

static const pre_kind k_pre_kinds[] = {
    {"default", k_re_gpt2, false},  {"gpt2", k_re_gpt2, false},       {"llama-bpe", k_re_llama3, true},
    {"llama3", k_re_llama3, true},  {"llama-v3", k_re_llama3, true},  {"falcon3", k_re_llama3, true},
    {"falcon_e", k_re_llama3, true},
};

/* One merge rule: (left id, right id) → rank and the id of the concatenation (-1 if not a token). */
typedef struct merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t result;
} merge_slot;

struct bitnet_vocab {
    vocab_kind kind;
    int32_t n;
    char *arena;       /* all token texts, each NUL-terminated */
    size_t *off;       /* [n] offset of token i's text in arena */
    uint32_t *len;     /* [n] text length in bytes */
    float *score;      /* [n] */
    int32_t *type;     /* [n] enum bitnet_token_type (0 = undefined) */
    int32_t bos, eos, unk, pad, eot, eom; /* -1 when absent */
    bool add_bos, add_eos, add_space_prefix;
    int32_t byte_id[256]; /* <0xXX> BYTE token of each byte, or -1 */
    /* text -> id hash (open addressing, id+1; 0 = empty) */
    int32_t *slots;
    size_t cap;
    /* special tokens for the partition, sorted by length desc, id asc */
    int32_t *special;
    int32_t n_special;
    char model_name[8];
    char *pre_name;       /* tokenizer.ggml.pre as stored ("default" when absent) */
    char *chat_template;  /* tokenizer.chat_template or NULL */
    /* BPE only */
    pcre2_code *re;       /* pre-tokenizer */
    bool ignore_merges;
    merge_slot *merges;   /* open addressing, merge_cap slots */
    size_t merge_cap;
};

/* ---------------------------------------------------------------------------------------------
 * Hash of token texts
 * ------------------------------------------------------------------------------------------- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static const char *tok_text(const bitnet_vocab *v, int32_t id) { return v->arena + v->off[id]; }

/* Token id of exactly these bytes, or -1. */
static int32_t vocab_find(const bitnet_vocab *v, const char *s, size_t n) {
    size_t i = (size_t)hash_bytes(s, n) & (v->cap - 1);
    for (;;) {
        const int32_t e = v->slots[i];
        if (e == 0) return -1;
        const int32_t id = e - 1;
        if (v->len[id] == n && memcmp(tok_text(v, id), s, n) == 0) return id;
        i = (i + 1) & (v->cap - 1);
    }
}

/* Token id of exactly these bytes when ordinary text may produce it (NORMAL, USER_DEFINED or an undefined
 * type), else -1: CONTROL, UNKNOWN, BYTE and UNUSED tokens are never the result of merging text (as in
 * SentencePiece and Hugging Face BPE, whose control/added tokens are not part of the merge vocabulary). */
static int32_t text_token(const bitnet_vocab *v, const char *s, size_t n) {
    const int32_t id = vocab_find(v, s, n);
    if (id < 0) return -1;
    const int t = v->type[id];
    return t == BITNET_TOKEN_NORMAL || t == BITNET_TOKEN_USER_DEFINED || t == 0 ? id : -1;
}

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

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Byte of a "<0xXX>" text, or -1. */
static int byte_of_text(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    const int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
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

/* Copy of a GGUF string value (NUL-terminated), or NULL on out of memory. */
static char *dup_str(const char *s, size_t n) {
    char *d = (char *)malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static uint64_t merge_key(int32_t l, int32_t r) { return (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1; }

static size_t merge_hash(uint64_t key) {
    key ^= key >> 31;
    key *= 0x9E3779B97F4A7C15ull;
    key ^= key >> 29;
    return (size_t)key;
}

static const merge_slot *merge_find(const bitnet_vocab *v, int32_t l, int32_t r) {
    const uint64_t key = merge_key(l, r);
    size_t i = merge_hash(key) & (v->merge_cap - 1);
    for (;;) {
        const merge_slot *m = &v->merges[i];
        if (m->key == 0) return NULL;
        if (m->key == key) return m;
        i = (i + 1) & (v->merge_cap - 1);
    }
}

/* BPE part of loading: tokenizer.ggml.pre → regex, tokenizer.ggml.merges → rank table. */
static bitnet_status load_bpe(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err) {
    const char *path = bitnet_gguf_path(g);
    bitnet_status st;
    /* pre-tokenizer */
    const char *pre = "default";
    size_t pre_len = 7;
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.pre") >= 0 &&
        (st = bitnet_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len, err)) != BITNET_OK) {
        return st;
    }
    const pre_kind *pk = NULL;
    for (size_t i = 0; i < sizeof k_pre_kinds / sizeof k_pre_kinds[0]; i++) {
        if (strlen(k_pre_kinds[i].name) == pre_len && memcmp(k_pre_kinds[i].name, pre, pre_len) == 0) pk = &k_pre_kinds[i];
    }
    if (!pk) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: tokenizer.ggml.pre = \"%.*s\" is not a supported pre-tokenizer (supported: default, "
                           "gpt2, llama-bpe, llama3, llama-v3, falcon3, falcon_e)",
                           path, (int)(pre_len > 64 ? 64 : pre_len), pre);
    }
    if (!(v->pre_name = dup_str(pk->name, strlen(pk->name)))) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
    v->ignore_merges = pk->llama3_style;
    int ecode;
    PCRE2_SIZE eoff;
    v->re = pcre2_compile((PCRE2_SPTR)pk->regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                          &ecode, &eoff, NULL);
    if (!v->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ecode, msg, sizeof msg);
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: the %s pre-tokenizer regex does not compile at offset %zu: %s",
                           path, pk->name, (size_t)eoff, (const char *)msg);
    }
    (void)pcre2_jit_compile(v->re, PCRE2_JIT_COMPLETE); /* optional speed-up; the interpreter is the fallback */

    /* merges: required for BPE (rank = index) */
    bitnet_gguf_type et;
    uint64_t nm;
    const void *data;
    if ((st = bitnet_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &nm, &data, err)) != BITNET_OK) return st;
    if (et != BITNET_GGUF_STRING) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.merges is an array of %s, expected strings", path,
                           bitnet_gguf_type_name(et));
    }
    if (nm > (uint64_t)INT32_MAX) {
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.merges has %llu entries", path, (unsigned long long)nm);
    }
    v->merge_cap = 16;
    while (v->merge_cap < nm + nm / 2 + 1) v->merge_cap *= 2;
    v->merges = (merge_slot *)calloc(v->merge_cap, sizeof *v->merges);
    if (!v->merges) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for %llu merges", path, (unsigned long long)nm);
    const int64_t km = bitnet_gguf_find_kv(g, "tokenizer.ggml.merges");
    char *cat = NULL;
    size_t cat_cap = 0;
    for (uint64_t i = 0; i < nm; i++) {
        size_t l;
        const char *m = bitnet_gguf_kv_arr_str(g, km, i, &l);
        const char *sp = l > 1 ? (const char *)memchr(m + 1, ' ', l - 1) : NULL; /* the left part is never empty */
        if (!sp || sp + 1 == m + l) {
            free(cat);
            return bitnet_fail(err, BITNET_ERR_FORMAT,
                               "%s: tokenizer.ggml.merges[%llu] = \"%.*s\" is not two tokens separated by a space", path,
                               (unsigned long long)i, (int)(l > 64 ? 64 : l), m);
        }
        const size_t ll = (size_t)(sp - m), rl = l - ll - 1;
        const int32_t left = vocab_find(v, m, ll), right = vocab_find(v, sp + 1, rl);
        if (left < 0 || right < 0) continue; /* can never apply: symbols are always tokens */
        if (ll + rl > cat_cap) {
            cat_cap = 2 * (ll + rl);
            char *nc = (char *)realloc(cat, cat_cap);
            if (!nc) {
                free(cat);
                return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
            }
            cat = nc;
        }
        memcpy(cat, m, ll);
        memcpy(cat + ll, sp + 1, rl);
        const uint64_t key = merge_key(left, right);
        size_t k = merge_hash(key) & (v->merge_cap - 1);
        while (v->merges[k].key != 0 && v->merges[k].key != key) k = (k + 1) & (v->merge_cap - 1);
        if (v->merges[k].key == key) continue; /* a repeated rule keeps its first (lowest) rank */
        v->merges[k] = (merge_slot){key, (int32_t)i, text_token(v, cat, ll + rl)};
    }
    free(cat);
    return BITNET_OK;
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

bitnet_status bitnet_vocab_load(const bitnet_gguf *g, bitnet_vocab **out, bitnet_error *err) {
    *out = NULL;
    const char *path = bitnet_gguf_path(g);
    const char *model;
    size_t model_len;
    bitnet_status st = bitnet_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len, err);
    if (st != BITNET_OK) return st;
    vocab_kind kind;
    if (model_len == 5 && memcmp(model, "llama", 5) == 0) kind = VOCAB_SPM;
    else if (model_len == 4 && memcmp(model, "gpt2", 4) == 0) kind = VOCAB_BPE;
    else {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: tokenizer.ggml.model = \"%.*s\" is not supported (supported: \"llama\", "
                           "SentencePiece-style; \"gpt2\", byte-level BPE)",
                           path, (int)(model_len > 64 ? 64 : model_len), model);
    }
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
    if (!v->off || !v->len || !v->score || !v->type || !v->slots) goto nomem;

    /* texts */
    const int64_t kt = bitnet_gguf_find_kv(g, "tokenizer.ggml.tokens");
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t l;
        bitnet_gguf_kv_arr_str(g, kt, (uint64_t)i, &l);
        if (l > UINT32_MAX) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%d] is %zu bytes long", path, i, l);
            goto fail;
        }
        v->off[i] = total;
        v->len[i] = (uint32_t)l;
        total += l + 1;
    }
    v->arena = (char *)malloc(total ? total : 1);
    if (!v->arena) goto nomem;
    for (int32_t i = 0; i < n; i++) {
        size_t l;
        const char *s = bitnet_gguf_kv_arr_str(g, kt, (uint64_t)i, &l);
        memcpy(v->arena + v->off[i], s, l);
        v->arena[v->off[i] + l] = 0;
    }

    /* scores (optional, float32) */
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.scores") >= 0) {
        uint64_t m;
        if ((st = bitnet_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m, &data, err)) != BITNET_OK) goto fail;
        if (et != BITNET_GGUF_FLOAT32 || m != n64) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT,
                             "%s: tokenizer.ggml.scores is %llu × %s, expected %d × float32 (one per token)", path,
                             (unsigned long long)m, bitnet_gguf_type_name(et), n);
            goto fail;
        }
        memcpy(v->score, data, (size_t)n * sizeof(float));
    }
    /* token types (optional, int32 0..6; absent: all NORMAL) */
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.token_type") >= 0) {
        uint64_t m;
        if ((st = bitnet_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m, &data, err)) != BITNET_OK) goto fail;
        if (et != BITNET_GGUF_INT32 || m != n64) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT,
                             "%s: tokenizer.ggml.token_type is %llu × %s, expected %d × int32 (one per token)", path,
                             (unsigned long long)m, bitnet_gguf_type_name(et), n);
            goto fail;
        }
        memcpy(v->type, data, (size_t)n * sizeof(int32_t));
        for (int32_t i = 0; i < n; i++) {
            if (v->type[i] < 0 || v->type[i] > BITNET_TOKEN_BYTE) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%d] = %d is not a token type (0..6)",
                                 path, i, v->type[i]);
                goto fail;
            }
        }
    } else {
        for (int32_t i = 0; i < n; i++) v->type[i] = BITNET_TOKEN_NORMAL;
    }

    /* lookup table first: the BPE merges and the EOT search use it */
    for (int32_t i = 0; i < n; i++) vocab_insert(v, i);
    if (kind == VOCAB_BPE) {
        if ((st = load_bpe(g, v, err)) != BITNET_OK) goto fail;
    } else {
        const char *pre = "default";
        size_t pre_len = 7;
        if (bitnet_gguf_find_kv(g, "tokenizer.ggml.pre") >= 0 &&
            (st = bitnet_gguf_get_str(g, "tokenizer.ggml.pre", &pre, &pre_len, err)) != BITNET_OK) {
            goto fail;
        }
        if (!(v->pre_name = dup_str(pre, pre_len))) goto nomem;
    }
    if (bitnet_gguf_find_kv(g, "tokenizer.chat_template") >= 0) {
        const char *t;
        size_t tl;
        if ((st = bitnet_gguf_get_str(g, "tokenizer.chat_template", &t, &tl, err)) != BITNET_OK) goto fail;
        if (!(v->chat_template = dup_str(t, tl))) goto nomem;
    }

    /* special ids; SentencePiece defaults when a key is absent: unk 0, bos 1, eos 2 (BPE: none) */
    const bool spm = kind == VOCAB_SPM;
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
        goto fail;
    }
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.eot_token_id") < 0) {
        static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>"};
        v->eot = find_by_text(v, eot_names, sizeof eot_names / sizeof eot_names[0]);
    }
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.eom_token_id") < 0) {
        static const char *const eom_names[] = {"<|eom_id|>"};
        v->eom = find_by_text(v, eom_names, 1);
    }

    /* byte tokens, special tokens */
    for (int b = 0; b < 256; b++) v->byte_id[b] = -1;
    int32_t n_special = 0;
    for (int32_t i = 0; i < n; i++) {
        const int t = v->type[i];
        if (t == BITNET_TOKEN_BYTE) {
            const int b = byte_of_text(tok_text(v, i), v->len[i]);
            if (b < 0) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: token %d \"%.40s\" has type BYTE but is not <0xXX>", path, i,
                                 tok_text(v, i));
                goto fail;
            }
            if (v->byte_id[b] < 0) v->byte_id[b] = i;
        }
        if ((t == BITNET_TOKEN_CONTROL || t == BITNET_TOKEN_USER_DEFINED || t == BITNET_TOKEN_UNKNOWN) && v->len[i] > 0) {
            n_special++;
        }
    }
    v->special = (int32_t *)malloc((size_t)(n_special ? n_special : 1) * sizeof(int32_t));
    if (!v->special) goto nomem;
    for (int32_t i = 0; i < n; i++) {
        const int t = v->type[i];
        if ((t == BITNET_TOKEN_CONTROL || t == BITNET_TOKEN_USER_DEFINED || t == BITNET_TOKEN_UNKNOWN) && v->len[i] > 0) {
            v->special[v->n_special++] = i;
        }
    }
    sort_special(v);
    *out = v;
    return BITNET_OK;

nomem:
    st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory loading a vocabulary of %d tokens", path, n);
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

/* ---------------------------------------------------------------------------------------------
 * Output buffer
 * ------------------------------------------------------------------------------------------- */

typedef struct ids {
    int32_t *p;
    size_t n, cap;
    bool oom;
} ids;

static void ids_push(ids *o, int32_t id) {
    if (o->oom) return;
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 64;
        int32_t *np = (int32_t *)realloc(o->p, nc * sizeof *np);
        if (!np) {
            o->oom = true;
            return;
        }
        o->p = np;
        o->cap = nc;
    }
    o->p[o->n++] = id;
}

/* ---------------------------------------------------------------------------------------------
 * SentencePiece-style merges
 * ------------------------------------------------------------------------------------------- */

/* Length of the UTF-8 character at s (n > 0 bytes available); 1 for a byte that does not start a
 * valid, complete, shortest-form sequence (RFC 3629). */
static size_t utf8_char_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 1;
    if (n < len || s[1] < lo || s[1] > hi) return 1;
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF) return 1;
    }
    return len;
}

typedef struct sym {
    int32_t prev, next;
    const char *text;
    size_t n;
} sym;

typedef struct bigram {
    float score;
    int32_t left, right;
    size_t size;
} bigram;

/* max-heap order: higher score first, then the leftmost pair */
static bool bigram_before(const bigram *a, const bigram *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

typedef struct heap {
    bigram *a;
    size_t n, cap;
    bool oom;
} heap;

static void heap_push(heap *h, bigram b) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        bigram *na = (bigram *)realloc(h->a, nc * sizeof *na);
        if (!na) {
            h->oom = true;
            return;
        }
        h->a = na;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!bigram_before(&b, &h->a[p])) break;
        h->a[i] = h->a[p];
        i = p;
    }
    h->a[i] = b;
}

static bigram heap_pop(heap *h) {
    bigram top = h->a[0];
    bigram last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && bigram_before(&h->a[c + 1], &h->a[c])) c++;
        if (!bigram_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0) h->a[i] = last;
    return top;
}

static void try_bigram(const bitnet_vocab *v, const sym *s, heap *h, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t n = s[left].n + s[right].n; /* adjacent in the buffer: s[left].text .. + n */
    const int32_t id = text_token(v, s[left].text, n);
    if (id < 0) return;
    heap_push(h, (bigram){v->score[id], left, right, n});
}

/* Bytes of a piece that is not a token: <0xXX> tokens, else a one-byte token, else unk. */
static bitnet_status emit_bytes(const bitnet_vocab *v, const char *s, size_t n, ids *out, bitnet_error *err) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char b = (unsigned char)s[i];
        int32_t id = v->byte_id[b];
        if (id < 0) id = vocab_find(v, s + i, 1);
        if (id < 0) id = v->unk;
        if (id < 0) {
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                               "tokenize: byte 0x%02X has no <0x%02X> token, no one-byte token and the vocabulary has "
                               "no unknown token",
                               b, b);
        }
        ids_push(out, id);
    }
    return BITNET_OK;
}

/* Tokenize one escaped fragment (spaces already "▁"). */
static bitnet_status spm_fragment(const bitnet_vocab *v, const char *text, size_t len, ids *out, bitnet_error *err) {
    if (len == 0) return BITNET_OK;
    sym *s = (sym *)malloc(len * sizeof *s);
    heap h = {0};
    if (!s) return bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory for %zu bytes of text", len);
    int32_t ns = 0;
    for (size_t o = 0; o < len;) {
        const size_t cl = utf8_char_len((const unsigned char *)text + o, len - o);
        s[ns] = (sym){ns - 1, -1, text + o, cl};
        if (ns > 0) s[ns - 1].next = ns;
        ns++;
        o += cl;
    }
    for (int32_t i = 1; i < ns; i++) try_bigram(v, s, &h, i - 1, i);
    while (h.n > 0 && !h.oom) {
        const bigram b = heap_pop(&h);
        sym *l = &s[b.left], *r = &s[b.right];
        /* stale entry: one side already merged into something else */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size || l->next != b.right) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = b.left;
        try_bigram(v, s, &h, l->prev, b.left);
        try_bigram(v, s, &h, b.left, l->next);
    }
    bitnet_status st = BITNET_OK;
    if (h.oom) st = bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
    for (int32_t i = 0; i >= 0 && st == BITNET_OK; i = s[i].next) {
        const int32_t id = text_token(v, s[i].text, s[i].n);
        if (id >= 0) ids_push(out, id);
        else st = emit_bytes(v, s[i].text, s[i].n, out, err);
    }
    free(h.a);
    free(s);
    return st;
}

/* Escape and tokenize one raw fragment. */
static bitnet_status spm_raw(const bitnet_vocab *v, const char *text, size_t len, bool space_prefix, ids *out,
                             bitnet_error *err) {
    size_t spaces = 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    const size_t elen = (space_prefix ? 3 : 0) + len + 2 * spaces; /* ' ' (1 byte) → U+2581 (3 bytes) */
    char *e = (char *)malloc(elen ? elen : 1);
    if (!e) return bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory for %zu bytes of text", len);
    size_t o = 0;
    if (space_prefix) {
        memcpy(e, "\xE2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(e + o, "\xE2\x96\x81", 3);
            o += 3;
        } else {
            e[o++] = text[i];
        }
    }
    bitnet_status st = spm_fragment(v, e, o, out, err);
    free(e);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Byte-level BPE
 * ------------------------------------------------------------------------------------------- */

/* GPT-2's bytes_to_unicode: the printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF keep their code point;
 * the other 68 bytes, in increasing order, get U+0100..U+0143: 0x00..0x20 → U+0100..U+0120,
 * 0x7F..0xA0 → U+0121..U+0142, 0xAD → U+0143. */
static uint32_t byte_to_cp(unsigned b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x121 + (b - 0x7F);
    if (b == 0xAD) return 0x143;
    return b;
}

/* Inverse of byte_to_cp: the byte of code point cp, or -1 when cp is not in GPT-2's alphabet. */
static int cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(0x7F + (cp - 0x121));
    if (cp == 0x143) return 0xAD;
    return -1;
}

typedef struct bpe_sym {
    int32_t prev, next;
    uint32_t off, n; /* span in the mapped word; n = 0: merged away */
    int32_t id;      /* token of the span, -1 if none */
} bpe_sym;

typedef struct bpe_pair {
    int32_t rank, left, right;
    uint32_t size;
} bpe_pair;

static bool pair_before(const bpe_pair *a, const bpe_pair *b) {
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->left < b->left;
}

typedef struct pair_heap {
    bpe_pair *a;
    size_t n, cap;
    bool oom;
} pair_heap;

static void pheap_push(pair_heap *h, bpe_pair p) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        bpe_pair *na = (bpe_pair *)realloc(h->a, nc * sizeof *na);
        if (!na) {
            h->oom = true;
            return;
        }
        h->a = na;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t q = (i - 1) / 2;
        if (!pair_before(&p, &h->a[q])) break;
        h->a[i] = h->a[q];
        i = q;
    }
    h->a[i] = p;
}

static bpe_pair pheap_pop(pair_heap *h) {
    bpe_pair top = h->a[0];
    bpe_pair last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && pair_before(&h->a[c + 1], &h->a[c])) c++;
        if (!pair_before(&h->a[c], &last)) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n > 0) h->a[i] = last;
    return top;
}

static void try_pair(const bitnet_vocab *v, const bpe_sym *s, pair_heap *h, int32_t left, int32_t right) {
    if (left < 0 || right < 0 || s[left].id < 0 || s[right].id < 0) return;
    const merge_slot *m = merge_find(v, s[left].id, s[right].id);
    if (m) pheap_push(h, (bpe_pair){m->rank, left, right, s[left].n + s[right].n});
}

/* Scratch buffers reused across the pieces of one bitnet_tokenize call. */
typedef struct bpe_scratch {
    char *word;
    size_t word_cap;
    bpe_sym *sym;
    size_t sym_cap;
    pair_heap heap;
} bpe_scratch;

/* Emit the tokens of one symbol that is not a token: its UTF-8 characters' tokens, else unk. */
static bitnet_status emit_chars(const bitnet_vocab *v, const char *s, size_t n, ids *out, bitnet_error *err) {
    for (size_t o = 0; o < n;) {
        const size_t cl = utf8_char_len((const unsigned char *)s + o, n - o);
        int32_t id = text_token(v, s + o, cl);
        if (id < 0) id = v->unk;
        if (id < 0) {
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                               "tokenize: the byte-level character \"%.*s\" is not a token and the vocabulary has no "
                               "unknown token",
                               (int)cl, s + o);
        }
        ids_push(out, id);
        o += cl;
    }
    return BITNET_OK;
}

/* One pre-tokenizer piece: map its bytes to GPT-2's alphabet, then whole-word lookup or BPE merges. */
static bitnet_status bpe_piece(const bitnet_vocab *v, const char *text, size_t len, bpe_scratch *sc, ids *out,
                               bitnet_error *err) {
    if (len == 0) return BITNET_OK;
    if (len > UINT32_MAX / 4) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tokenize: a piece of %zu bytes is too long", len);
    if (sc->word_cap < 2 * len) {
        char *nw = (char *)realloc(sc->word, 2 * len);
        if (!nw) return bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
        sc->word = nw;
        sc->word_cap = 2 * len;
    }
    if (sc->sym_cap < len) {
        bpe_sym *ns = (bpe_sym *)realloc(sc->sym, len * sizeof *ns);
        if (!ns) return bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
        sc->sym = ns;
        sc->sym_cap = len;
    }
    char *w = sc->word;
    bpe_sym *s = sc->sym;
    uint32_t wn = 0;
    int32_t ns = 0;
    for (size_t i = 0; i < len; i++) {
        const uint32_t cp = byte_to_cp((unsigned char)text[i]);
        const uint32_t start = wn;
        if (cp < 0x80) w[wn++] = (char)cp;
        else {
            w[wn++] = (char)(0xC0 | (cp >> 6));
            w[wn++] = (char)(0x80 | (cp & 0x3F));
        }
        s[ns] = (bpe_sym){ns - 1, ns + 1, start, wn - start, text_token(v, w + start, wn - start)};
        ns++;
    }
    s[ns - 1].next = -1;
    if (v->ignore_merges) {
        const int32_t id = text_token(v, w, wn);
        if (id >= 0) {
            ids_push(out, id);
            return BITNET_OK;
        }
    }
    pair_heap *h = &sc->heap;
    h->n = 0;
    for (int32_t i = 1; i < ns; i++) try_pair(v, s, h, i - 1, i);
    while (h->n > 0 && !h->oom) {
        const bpe_pair p = pheap_pop(h);
        bpe_sym *l = &s[p.left], *r = &s[p.right];
        if (l->n == 0 || r->n == 0 || l->next != p.right || l->n + r->n != p.size) continue; /* stale */
        const merge_slot *m = merge_find(v, l->id, r->id);
        l->n += r->n;
        l->id = m->result;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s[r->next].prev = p.left;
        try_pair(v, s, h, l->prev, p.left);
        try_pair(v, s, h, p.left, l->next);
    }
    if (h->oom) return bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
    for (int32_t i = 0; i >= 0; i = s[i].next) {
        if (s[i].id >= 0) ids_push(out, s[i].id);
        else {
            bitnet_status st = emit_chars(v, w + s[i].off, s[i].n, out, err);
            if (st != BITNET_OK) return st;
        }
    }
    return BITNET_OK;
}

/* Called for each pre-tokenizer piece [off, off + n) of a fragment. */
typedef bitnet_status (*piece_fn)(void *ctx, const char *text, size_t off, size_t n, bitnet_error *err);

/* Cut one raw fragment into pieces with the regex: each match is a piece, and so is the text between
 * matches (only invalid UTF-8 can be left unmatched by the supported regexes). */
static bitnet_status pretokenize(const bitnet_vocab *v, const char *text, size_t len, piece_fn fn, void *ctx,
                                 bitnet_error *err) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(v->re, NULL);
    if (!md) return bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
    bitnet_status st = BITNET_OK;
    size_t pos = 0, done = 0; /* pos: where the next search starts; done: bytes already tokenized */
    uint32_t opts = 0;
    while (pos < len && st == BITNET_OK) {
        int rc = pcre2_match(v->re, (PCRE2_SPTR)text, len, pos, opts, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) { /* very long match: the interpreter has no such limit */
            opts = PCRE2_NO_JIT;
            continue;
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "tokenize: pre-tokenizer regex (%s) failed at byte %zu: %s",
                             v->pre_name, pos, (const char *)msg);
            break;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        const size_t ms = ov[0], me = ov[1];
        if (ms > done) st = fn(ctx, text, done, ms - done, err); /* unmatched bytes */
        if (st == BITNET_OK && me > ms) st = fn(ctx, text, ms, me - ms, err);
        if (me > done) done = me;
        pos = me > ms ? me : ms + 1; /* the regexes never match empty; guard anyway */
    }
    if (st == BITNET_OK && done < len) st = fn(ctx, text, done, len - done, err);
    pcre2_match_data_free(md);
    return st;
}

typedef struct bpe_ctx {
    const bitnet_vocab *v;
    bpe_scratch *sc;
    ids *out;
} bpe_ctx;

static bitnet_status bpe_piece_cb(void *ctx, const char *text, size_t off, size_t n, bitnet_error *err) {
    bpe_ctx *c = (bpe_ctx *)ctx;
    return bpe_piece(c->v, text + off, n, c->sc, c->out, err);
}

/* Pre-tokenize one raw fragment and tokenize each piece. */
static bitnet_status bpe_raw(const bitnet_vocab *v, const char *text, size_t len, bpe_scratch *sc, ids *out,
                             bitnet_error *err) {
    bpe_ctx c = {v, sc, out};
    return pretokenize(v, text, len, bpe_piece_cb, &c, err);
}

typedef struct ends_ctx {
    size_t *a, n, cap;
} ends_ctx;

static bitnet_status push_end(void *ctx, const char *text, size_t off, size_t n, bitnet_error *err) {
    (void)text;
    ends_ctx *e = (ends_ctx *)ctx;
    if (e->n == e->cap) {
        size_t nc = e->cap ? e->cap * 2 : 16;
        size_t *na = (size_t *)realloc(e->a, nc * sizeof *na);
        if (!na) return bitnet_fail(err, BITNET_ERR_NOMEM, "pretokenize: out of memory");
        e->a = na;
        e->cap = nc;
    }
    e->a[e->n++] = off + n;
    return BITNET_OK;
}

bitnet_status bitnet_pretokenize(const bitnet_vocab *v, const char *text, size_t len, size_t **ends, size_t *n_pieces,
                                 bitnet_error *err) {
    *ends = NULL;
    *n_pieces = 0;
    if (!text && len > 0) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "pretokenize: NULL text of length %zu", len);
    ends_ctx e = {NULL, 0, 0};
    bitnet_status st = BITNET_OK;
    if (v->kind == VOCAB_BPE) st = pretokenize(v, text, len, push_end, &e, err);
    else if (len > 0) st = push_end(&e, text, 0, len, err);
    if (st == BITNET_OK && !e.a && !(e.a = (size_t *)malloc(sizeof(size_t)))) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "pretokenize: out of memory");
    }
    if (st != BITNET_OK) {
        free(e.a);
        return st;
    }
    *ends = e.a;
    *n_pieces = e.n;
    return BITNET_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Special-token partition
 * ------------------------------------------------------------------------------------------- */

typedef struct frag {
    size_t off, len; /* raw text span (token < 0) */
    int32_t token;   /* >= 0: a special token */
} frag;

typedef struct frags {
    frag *a;
    size_t n, cap;
} frags;

static bool frags_insert(frags *f, size_t at, frag x) {
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 16;
        frag *na = (frag *)realloc(f->a, nc * sizeof *na);
        if (!na) return false;
        f->a = na;
        f->cap = nc;
    }
    memmove(&f->a[at + 1], &f->a[at], (f->n - at) * sizeof *f->a);
    f->a[at] = x;
    f->n++;
    return true;
}

static const char *find_bytes(const char *h, size_t hn, const char *nd, size_t nn) {
    if (nn == 0 || nn > hn) return NULL;
    const char first = nd[0];
    for (size_t i = 0; i + nn <= hn; i++) {
        if (h[i] == first && memcmp(h + i, nd, nn) == 0) return h + i;
    }
    return NULL;
}

static bool partition(const bitnet_vocab *v, const char *text, size_t len, bool parse_special, frags *f) {
    f->n = 0;
    if (len > 0 && !frags_insert(f, 0, (frag){0, len, -1})) return false;
    for (int32_t k = 0; k < v->n_special; k++) {
        const int32_t id = v->special[k];
        if (!parse_special && v->type[id] != BITNET_TOKEN_USER_DEFINED) continue;
        const char *st = tok_text(v, id);
        const size_t sl = v->len[id];
        for (size_t i = 0; i < f->n; i++) {
            if (f->a[i].token >= 0) continue;
            const frag r = f->a[i];
            const char *hit = find_bytes(text + r.off, r.len, st, sl);
            if (!hit) continue;
            const size_t pre = (size_t)(hit - (text + r.off));
            const size_t post = r.len - pre - sl;
            /* replace r by [pre][token][post]; continue scanning in post (it is the next raw fragment) */
            size_t at = i;
            if (pre > 0) {
                f->a[at] = (frag){r.off, pre, -1};
                at++;
                if (!frags_insert(f, at, (frag){0, 0, id})) return false;
            } else {
                f->a[at] = (frag){0, 0, id};
            }
            if (post > 0 && !frags_insert(f, at + 1, (frag){r.off + pre + sl, post, -1})) return false;
            i = at; /* the loop's i++ moves to the post fragment */
        }
    }
    return true;
}

bitnet_status bitnet_tokenize(const bitnet_vocab *v, const char *text, size_t len, bool add_bos, bool parse_special,
                              int32_t **tokens, size_t *n_tokens, bitnet_error *err) {
    *tokens = NULL;
    *n_tokens = 0;
    if (!text && len > 0) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tokenize: NULL text of length %zu", len);
    ids out = {0};
    frags f = {0};
    bitnet_status st = BITNET_OK;
    if (!partition(v, text, len, parse_special, &f)) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
        goto done;
    }
    if (add_bos && v->add_bos && v->bos >= 0) ids_push(&out, v->bos);
    switch (v->kind) {
    case VOCAB_SPM: {
        bool prev_special = true; /* the first fragment gets the space prefix */
        for (size_t i = 0; i < f.n && st == BITNET_OK; i++) {
            if (f.a[i].token >= 0) {
                ids_push(&out, f.a[i].token);
                prev_special = true;
            } else {
                st = spm_raw(v, text + f.a[i].off, f.a[i].len, v->add_space_prefix && prev_special, &out, err);
                prev_special = false;
            }
        }
        break;
    }
    case VOCAB_BPE: {
        bpe_scratch sc = {0};
        for (size_t i = 0; i < f.n && st == BITNET_OK; i++) {
            if (f.a[i].token >= 0) ids_push(&out, f.a[i].token);
            else st = bpe_raw(v, text + f.a[i].off, f.a[i].len, &sc, &out, err);
        }
        free(sc.word);
        free(sc.sym);
        free(sc.heap.a);
        break;
    }
    }
    if (st == BITNET_OK && add_bos && v->add_eos && v->eos >= 0) ids_push(&out, v->eos);
    if (st == BITNET_OK && out.oom) st = bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
done:
    free(f.a);
    if (st != BITNET_OK) {
        free(out.p);
        return st;
    }
    if (!out.p) out.p = (int32_t *)malloc(sizeof(int32_t)); /* non-NULL even when empty */
    if (!out.p) return bitnet_fail(err, BITNET_ERR_NOMEM, "tokenize: out of memory");
    *tokens = out.p;
    *n_tokens = out.n;
    return BITNET_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Detokenizer
 * ------------------------------------------------------------------------------------------- */

static size_t put(char *buf, size_t buf_size, size_t at, const char *s, size_t n) {
    if (at < buf_size) memcpy(buf + at, s, at + n <= buf_size ? n : buf_size - at);
    return at + n;
}

/* Code point of the valid UTF-8 sequence of length cl at s (cl from utf8_char_len). */
static uint32_t utf8_cp(const unsigned char *s, size_t cl) {
    if (cl == 1) return s[0];
    uint32_t cp = s[0] & (0x7Fu >> cl);
    for (size_t i = 1; i < cl; i++) cp = (cp << 6) | (s[i] & 0x3Fu);
    return cp;
}

size_t bitnet_token_to_piece(const bitnet_vocab *v, int32_t token, bool special, char *buf, size_t buf_size) {
    if (!v || token < 0 || token >= v->n) return 0;
    const char *s = tok_text(v, token);
    const size_t n = v->len[token];
    switch (v->type[token]) {
    case BITNET_TOKEN_NORMAL: {
        size_t o = 0;
        if (v->kind == VOCAB_BPE) { /* byte-level characters back to bytes */
            for (size_t i = 0; i < n;) {
                const size_t cl = utf8_char_len((const unsigned char *)s + i, n - i);
                const int b = cl > 1 || (unsigned char)s[i] < 0x80 ? cp_to_byte(utf8_cp((const unsigned char *)s + i, cl))
                                                                   : -1;
                if (b >= 0) {
                    const char c = (char)b;
                    o = put(buf, buf_size, o, &c, 1);
                } else {
                    o = put(buf, buf_size, o, s + i, cl); /* not in GPT-2's alphabet: as it is */
                }
                i += cl;
            }
            return o;
        }
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                o = put(buf, buf_size, o, " ", 1);
                i += 3;
            } else {
                o = put(buf, buf_size, o, s + i, 1);
                i++;
            }
        }
        return o;
    }
    case BITNET_TOKEN_BYTE: {
        const char b = (char)byte_of_text(s, n); /* validated at load */
        return put(buf, buf_size, 0, &b, 1);
    }
    case BITNET_TOKEN_USER_DEFINED:
        return put(buf, buf_size, 0, s, n);
    case BITNET_TOKEN_CONTROL:
    case BITNET_TOKEN_UNKNOWN:
        return special ? put(buf, buf_size, 0, s, n) : 0;
    default: /* UNUSED, undefined */
        return 0;
    }
}

/* Appends one raw-text fragment of an SPM vocabulary to buf: "▁" left by byte tokens becomes a space (as
 * NORMAL tokens print it), then the space the tokenizer prepended is dropped. */
static size_t put_fragment(char *buf, size_t buf_size, size_t o, char *frag, size_t n, bool unprefix) {
    if (n == 0) return o;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        if (i + 3 <= n && memcmp(frag + i, "\xE2\x96\x81", 3) == 0) {
            frag[w++] = ' ';
            i += 3;
        } else {
            frag[w++] = frag[i++];
        }
    }
    const size_t skip = unprefix && w > 0 && frag[0] == ' ' ? 1 : 0;
    return put(buf, buf_size, o, frag + skip, w - skip);
}

size_t bitnet_detokenize(const bitnet_vocab *v, const int32_t *tokens, size_t n_tokens, bool special, char *buf,
                         size_t buf_size) {
    size_t o = 0;
    if (v->kind != VOCAB_SPM) {
        for (size_t i = 0; i < n_tokens; i++) {
            const size_t pn = bitnet_token_to_piece(v, tokens[i], special, NULL, 0);
            if (o < buf_size) bitnet_token_to_piece(v, tokens[i], special, buf + o, buf_size - o);
            o += pn;
        }
        return o;
    }
    /* SPM: raw-text fragments are collected, then mapped back (put_fragment) */
    char *frag = NULL;
    size_t fn = 0, fcap = 0;
    bool oom = false;
    for (size_t i = 0; i <= n_tokens && !oom; i++) {
        const int32_t t = i < n_tokens ? tokens[i] : -1;
        const int ty = t >= 0 && t < v->n ? v->type[t] : 0;
        const bool sep = i == n_tokens || ty == BITNET_TOKEN_CONTROL || ty == BITNET_TOKEN_USER_DEFINED ||
                         ty == BITNET_TOKEN_UNKNOWN;
        if (sep) {
            o = put_fragment(buf, buf_size, o, frag, fn, v->add_space_prefix);
            fn = 0;
            if (i < n_tokens) {
                const size_t pn = bitnet_token_to_piece(v, t, special, NULL, 0);
                if (o < buf_size) bitnet_token_to_piece(v, t, special, buf + o, buf_size - o);
                o += pn;
            }
            continue;
        }
        const size_t pn = bitnet_token_to_piece(v, t, special, NULL, 0);
        if (fn + pn > fcap) {
            const size_t nc = 2 * (fn + pn) + 64;
            char *nf = (char *)realloc(frag, nc);
            if (!nf) {
                oom = true; /* out of memory: the length so far */
                break;
            }
            frag = nf;
            fcap = nc;
        }
        bitnet_token_to_piece(v, t, special, frag + fn, pn);
        fn += pn;
    }
    free(frag);
    return o;
}

/* ---------------------------------------------------------------------------------------------
 * UTF-8-safe streaming
 * ------------------------------------------------------------------------------------------- */

void bitnet_utf8_stream_init(bitnet_utf8_stream *s) { s->n_held = 0; }

/* Length of the sequence a lead byte starts (2..4), 1 for ASCII, 0 for a byte that cannot start one. */
static unsigned lead_len(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

/* Whether byte c may follow the held prefix h[0..k) (k >= 1) in a valid sequence (RFC 3629 table). */
static bool continues(const unsigned char *h, unsigned k, unsigned char c) {
    unsigned lo = 0x80, hi = 0xBF;
    if (k == 1) {
        if (h[0] == 0xE0) lo = 0xA0;
        else if (h[0] == 0xED) hi = 0x9F;
        else if (h[0] == 0xF0) lo = 0x90;
        else if (h[0] == 0xF4) hi = 0x8F;
    }
    return c >= lo && c <= hi;
}

size_t bitnet_utf8_stream_push(bitnet_utf8_stream *s, const char *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)in[i];
        if (s->n_held > 0) {
            if (continues(s->held, s->n_held, c)) {
                s->held[s->n_held++] = c;
                if (s->n_held == lead_len(s->held[0])) { /* complete character */
                    memcpy(out + o, s->held, s->n_held);
                    o += s->n_held;
                    s->n_held = 0;
                }
                continue;
            }
            memcpy(out + o, s->held, s->n_held); /* cut short: release as it is */
            o += s->n_held;
            s->n_held = 0;
        }
        const unsigned l = lead_len(c);
        if (l >= 2) s->held[s->n_held++] = c;
        else out[o++] = (char)c; /* ASCII, or a byte that can never be valid here */
    }
    return o;
}

size_t bitnet_utf8_stream_flush(bitnet_utf8_stream *s, char *out) {
    const size_t n = s->n_held;
    memcpy(out, s->held, n);
    s->n_held = 0;
    return n;
}

struct bitnet_detok {
    const bitnet_vocab *v;
    bool special;
    bitnet_utf8_stream stream;
    char *piece, *out;
    size_t piece_cap, out_cap;
};

bitnet_detok *bitnet_detok_new(const bitnet_vocab *v, bool special) {
    bitnet_detok *d = (bitnet_detok *)calloc(1, sizeof *d);
    if (!d) return NULL;
    d->v = v;
    d->special = special;
    d->piece_cap = 64;
    d->out_cap = d->piece_cap + 4;
    d->piece = (char *)malloc(d->piece_cap);
    d->out = (char *)malloc(d->out_cap);
    if (!d->piece || !d->out) {
        bitnet_detok_free(d);
        return NULL;
    }
    return d;
}

const char *bitnet_detok_push(bitnet_detok *d, int32_t token, size_t *len) {
    *len = 0;
    size_t n = bitnet_token_to_piece(d->v, token, d->special, d->piece, d->piece_cap);
    if (n > d->piece_cap) {
        char *np = (char *)realloc(d->piece, n);
        char *no = np ? (char *)realloc(d->out, n + 4) : NULL;
        if (np) d->piece = np;
        if (!np || !no) return NULL;
        d->out = no;
        d->piece_cap = n;
        d->out_cap = n + 4;
        bitnet_token_to_piece(d->v, token, d->special, d->piece, d->piece_cap);
    }
    *len = bitnet_utf8_stream_push(&d->stream, d->piece, n, d->out);
    return d->out;
}

const char *bitnet_detok_flush(bitnet_detok *d, size_t *len) {
    *len = bitnet_utf8_stream_flush(&d->stream, d->out);
    return d->out;
}

void bitnet_detok_free(bitnet_detok *d) {
    if (!d) return;
    free(d->piece);
    free(d->out);
    free(d);
}
