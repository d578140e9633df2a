/* bpe.c — the byte-level BPE tokenizer (tokenizer.ggml.model = "gpt2"): its part of loading
 * (tokenizer.ggml.pre -> PCRE2 pre-tokenizer regex, tokenizer.ggml.merges -> rank table), the
 * pre-tokenizer (also bitnet_pretokenize), the mapping to GPT-2's byte alphabet and the rank-driven
 * merges (steps 1-5 of "BPE" at the top of tokenizer.c). */
#include "text/tokenizer_internal.h"

/* Pre-tokenizer regexes (see the top of this file for their sources). */
static const char k_re_gpt2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char k_re_llama3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
                                  " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
/* Qwen2 / Qwen2.5 / Qwen3: Llama 3's regex with single digits (\p{N} instead of \p{N}{1,3}). */
static const char k_re_qwen2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                                 " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* tokenizer.ggml.pre names → regex; llama3-style ones also use ignore_merges and add BOS by default; nfc:
 * the tokenizer.json files of the name normalize to NFC ("normalizer": {"type": "NFC"}), so raw text is put
 * in NFC before the regex. */
typedef struct pre_kind {
    const char *name;
    const char *regex;
    bool llama3_style;
    bool nfc;
} pre_kind;

static const pre_kind k_pre_kinds[] = {
    {"default", k_re_gpt2, false, false},   {"gpt2", k_re_gpt2, false, false},
    {"llama-bpe", k_re_llama3, true, false}, {"llama3", k_re_llama3, true, false},
    {"llama-v3", k_re_llama3, true, false},  {"falcon3", k_re_llama3, true, false},
    {"falcon_e", k_re_llama3, true, false},  {"qwen2", k_re_qwen2, false, true},
};


/* ---------------------------------------------------------------------------------------------
 * Loading: pre-tokenizer and merges
 * ------------------------------------------------------------------------------------------- */

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
bitnet_status bitnet_bpe_load(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err) {
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
                           "gpt2, llama-bpe, llama3, llama-v3, falcon3, falcon_e, qwen2)",
                           path, (int)(pre_len > 64 ? 64 : pre_len), pre);
    }
    if (!(v->pre_name = bitnet_strndup(pk->name, strlen(pk->name)))) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
    v->ignore_merges = pk->llama3_style;
    v->nfc = pk->nfc;
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

/* ---------------------------------------------------------------------------------------------
 * Merges
 * ------------------------------------------------------------------------------------------- */

typedef struct bpe_sym {
    int32_t prev, next;
    uint32_t off, n; /* span in the mapped word; n = 0: merged away */
    int32_t id;      /* token of the span, -1 if none */
} bpe_sym;

typedef struct bpe_pair {
    int32_t rank, left, right;
    uint32_t size;
} bpe_pair;

/* min-heap order: lower rank first, then the leftmost pair */
static bool pair_before(const void *pa, const void *pb) {
    const bpe_pair *a = (const bpe_pair *)pa, *b = (const bpe_pair *)pb;
    if (a->rank != b->rank) return a->rank < b->rank;
    return a->left < b->left;
}

static void try_pair(const bitnet_vocab *v, const bpe_sym *s, bitnet_heap *h, int32_t left, int32_t right) {
    if (left < 0 || right < 0 || s[left].id < 0 || s[right].id < 0) return;
    const merge_slot *m = merge_find(v, s[left].id, s[right].id);
    if (m) bitnet_heap_push(h, &(bpe_pair){m->rank, left, right, s[left].n + s[right].n});
}

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
    bitnet_heap *h = &sc->heap;
    h->n = 0;
    h->elem_size = sizeof(bpe_pair);
    h->before = pair_before;
    for (int32_t i = 1; i < ns; i++) try_pair(v, s, h, i - 1, i);
    while (h->n > 0 && !h->oom) {
        bpe_pair p;
        bitnet_heap_pop(h, &p);
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

/* Pre-tokenize one raw fragment (in NFC first when v->nfc) and tokenize each piece. */
bitnet_status bitnet_bpe_raw(const bitnet_vocab *v, const char *text, size_t len, bpe_scratch *sc, ids *out,
                             bitnet_error *err) {
    bpe_ctx c = {v, sc, out};
    if (!v->nfc || bitnet_utf8_is_nfc_fast(text, len)) return pretokenize(v, text, len, bpe_piece_cb, &c, err);
    char *norm;
    size_t norm_len;
    bitnet_status st = bitnet_utf8_nfc(text, len, &norm, &norm_len, err);
    if (st != BITNET_OK) return st;
    st = pretokenize(v, norm, norm_len, bpe_piece_cb, &c, err);
    free(norm);
    return st;
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
