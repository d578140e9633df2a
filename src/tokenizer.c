/* tokenizer.c — vocabulary from GGUF metadata (tokenizer.ggml.*), the SentencePiece-style tokenizer
 * (tokenizer.ggml.model = "llama") and the detokenizer (token → printed bytes).
 *
 * Behaviour follows llama.cpp's SPM tokenizer, which is what bitnet.cpp runs (a fact about the format,
 * restated here; the code is our own):
 *  1. Special-token partition: texts of special tokens found in the input become those ids and split
 *     the text into fragments. Candidates are CONTROL, USER_DEFINED and UNKNOWN tokens, longest text
 *     first (ties: lower id first); each is searched left to right in the fragments still raw.
 *     Without parse_special only USER_DEFINED tokens are matched (they are plain-text atoms).
 *  2. Each raw fragment: a space is prepended when add_space_prefix is on and the fragment is the first
 *     thing or follows a special token; every ' ' becomes "▁" (U+2581).
 *  3. The fragment is split into UTF-8 characters (a byte that does not start a valid sequence is a
 *     one-byte character), then the adjacent pair whose concatenation is a token with the highest
 *     score is merged repeatedly (ties: leftmost pair first) until no pair merges.
 *  4. Each final piece emits its token id; a piece that is not a token (always a single character)
 *     emits one <0xXX> byte token per byte, falling back to a token whose text is that single byte,
 *     then to the unknown token.
 * The tokenizer kind is a switch on tokenizer.ggml.model so that BPE ("gpt2", issue #3) can be added
 * beside SPM without touching the callers.
 */
#include "tokenizer.h"

#include <stdlib.h>
#include <string.h>

typedef enum vocab_kind {
    VOCAB_SPM = 1, /* "llama" */
} vocab_kind;

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

bitnet_status bitnet_vocab_load(const bitnet_gguf *g, bitnet_vocab **out, bitnet_error *err) {
    *out = NULL;
    const char *path = bitnet_gguf_path(g);
    const char *model;
    size_t model_len;
    bitnet_status st = bitnet_gguf_get_str(g, "tokenizer.ggml.model", &model, &model_len, err);
    if (st != BITNET_OK) return st;
    if (!(model_len == 5 && memcmp(model, "llama", 5) == 0)) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: tokenizer.ggml.model = \"%.*s\" is not supported (supported: \"llama\", "
                           "SentencePiece-style)",
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
    v->kind = VOCAB_SPM;
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

    /* special ids; SentencePiece defaults when a key is absent: unk 0, bos 1, eos 2 */
    if ((st = read_id(g, "tokenizer.ggml.bos_token_id", n, 1, &v->bos, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.eos_token_id", n, 2, &v->eos, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.unknown_token_id", n, 0, &v->unk, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.padding_token_id", n, -1, &v->pad, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.eot_token_id", n, -1, &v->eot, err)) != BITNET_OK ||
        (st = read_id(g, "tokenizer.ggml.eom_token_id", n, -1, &v->eom, err)) != BITNET_OK ||
        (st = read_flag(g, "tokenizer.ggml.add_bos_token", true, &v->add_bos, err)) != BITNET_OK ||
        (st = read_flag(g, "tokenizer.ggml.add_eos_token", false, &v->add_eos, err)) != BITNET_OK ||
        (st = read_flag(g, "tokenizer.ggml.add_space_prefix", true, &v->add_space_prefix, err)) != BITNET_OK) {
        goto fail;
    }

    /* lookup table, byte tokens, special tokens */
    for (int b = 0; b < 256; b++) v->byte_id[b] = -1;
    int32_t n_special = 0;
    for (int32_t i = 0; i < n; i++) {
        vocab_insert(v, i);
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
    const int32_t id = vocab_find(v, s[left].text, n);
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
        const int32_t id = vocab_find(v, s[i].text, s[i].n);
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

size_t bitnet_token_to_piece(const bitnet_vocab *v, int32_t token, bool special, char *buf, size_t buf_size) {
    if (!v || token < 0 || token >= v->n) return 0;
    const char *s = tok_text(v, token);
    const size_t n = v->len[token];
    switch (v->type[token]) {
    case BITNET_TOKEN_NORMAL: {
        size_t o = 0;
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
