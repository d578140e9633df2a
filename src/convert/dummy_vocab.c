/* dummy_vocab.c — the vocabularies of dummy models (dummy_model.h): the built-in SentencePiece-style
 * vocabulary (bitnet_dummy_vocab_builtin: byte tokens, word and subword lists, pseudo-words) and a copy
 * of another GGUF file's vocabulary (bitnet_dummy_vocab_from_gguf). The writer is dummy_model.c. */
#include "convert/dummy_model.h"

#include "base/gguf.h"
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Storage behind a library-made vocabulary. */
typedef struct vocab_store {
    char **tokens;
    float *scores;
    int32_t *types;
    char **merges;
    uint64_t n_merges;
    int32_t n, cap;
    char *model, *pre;
    /* open-addressing set of token indices (for the built-in builder) */
    int32_t *slots;
    size_t n_slots;
} vocab_store;

static void store_free(vocab_store *s) {
    if (!s) return;
    if (s->tokens)
        for (int32_t i = 0; i < s->n; i++) free(s->tokens[i]);
    if (s->merges)
        for (uint64_t i = 0; i < s->n_merges; i++) free(s->merges[i]);
    free(s->tokens);
    free(s->scores);
    free(s->types);
    free(s->merges);
    free(s->model);
    free(s->pre);
    free(s->slots);
    free(s);
}

void bitnet_dummy_vocab_free(bitnet_dummy_vocab *v) {
    if (!v) return;
    store_free((vocab_store *)v->owned_);
    free(v);
}


static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Slot of `s` in the set: where it is, or the empty slot where it would go. */
static size_t set_find(const vocab_store *st, const char *s, size_t n) {
    size_t mask = st->n_slots - 1, i = (size_t)fnv1a(s, n) & mask;
    for (;;) {
        int32_t id = st->slots[i];
        if (id < 0) return i;
        if (strlen(st->tokens[id]) == n && memcmp(st->tokens[id], s, n) == 0) return i;
        i = (i + 1) & mask;
    }
}

static bool set_has(const vocab_store *st, const char *s, size_t n) {
    return st->slots[set_find(st, s, n)] >= 0;
}

/* Append a token (copy of s[0..n)) unless present or the vocabulary is full. false only on OOM. */
static bool store_add(vocab_store *st, const char *s, size_t n, float score, int32_t type) {
    if (st->n >= st->cap) return true;
    size_t slot = set_find(st, s, n);
    if (st->slots[slot] >= 0) return true;
    char *d = bitnet_strndup(s, n);
    if (!d) return false;
    st->tokens[st->n] = d;
    st->scores[st->n] = score;
    st->types[st->n] = type;
    st->slots[slot] = st->n;
    st->n++;
    return true;
}

/* A NORMAL piece with the next descending score; its missing prefixes (2 characters and longer,
 * counted in UTF-8 characters) are added first, so the tokenizer can reach it by pair merges. */
static bool store_add_piece(vocab_store *st, const char *s, size_t n) {
    size_t cut = 0;
    int chars = 0;
    while (cut < n) {
        size_t next = cut + 1;
        while (next < n && ((unsigned char)s[next] & 0xC0) == 0x80) next++;
        chars++;
        if (chars >= 2 && next < n && !set_has(st, s, next)) {
            if (!store_add(st, s, next, -(float)(st->n - 258), BITNET_TOKEN_NORMAL)) return false;
        }
        cut = next;
    }
    return store_add(st, s, n, -(float)(st->n - 258), BITNET_TOKEN_NORMAL);
}

#define SPACE_MARK "\xe2\x96\x81" /* U+2581 "▁", SentencePiece's space marker */

/* Built-in lists (written for this project). Subwords first (pieces inside words), then words, which
 * get the space marker; order is roughly by usefulness, which sets the scores. */
static const char builtin_subwords[] =
    "er in on an re at en es or ed ing ion tion ly al ar le it is ou ent ic as st ro ers ve th nd "
    "ll se ri ra ad me ce de li ch ment ness able ful less est ity ous ive ize ism ist ure age ance "
    "ence ship ward ally ical ated ation ions ings ies ied ier ely ted ter ting ness ments ic al "
    "s es d y e a o i u t n r l";
static const char builtin_words[] =
    "the of and to in a is that for it as was with be by on not he I this are or his from at which "
    "but have an they you were her she there been one all we their has would when if so no will "
    "more can out said what up its about into them than some could time only other new these two "
    "may do first any my now such like our over man me even most made after also did many before "
    "must well back through years much where your way down should because each just those people "
    "how too little state good very make world still own see men work long get here between both "
    "life being under never day same another know while last might us great old year off come "
    "since against go came right used take three The A In It This He We You They But And If What "
    "There When As On For So house water small hand place part high number name city point left end "
    "home large school thought word every country group night fact head run set put look read write "
    "follow study learn begin open show keep turn start grow seem leave call find give tell ask need "
    "feel try become bring hold stand talk play move live believe happen provide sit lose pay meet "
    "include continue change lead understand watch speak spend create reach allow add remember love "
    "consider appear buy wait serve die send expect build stay fall cut remain suggest raise pass "
    "sell require report decide pull big high different early young important few public bad able "
    "free sure better best clear full true whole real black white red blue green simple strong human "
    "local late hard major possible general social special certain political economic national "
    "family system program question government company problem service area money story issue side "
    "kind power hour game line member law car market form office door health person art war history "
    "party result morning reason research girl guy moment air teacher force education foot boy age "
    "policy process music idea body information mother father friend child children woman women "
    "book light river tree sun moon star sky rain wind fire stone road street town village field "
    "garden food bread milk tea coffee table chair window room bed paper letter picture color "
    "voice sound language news today tomorrow yesterday always often sometimes again once later "
    "soon already almost enough quite rather really perhaps maybe together around without within "
    "during toward across behind above below near far inside outside upon among until though "
    "although however therefore yes please thank hello model data value test code file time "
    "quick brown fox jumps lazy dog cat bird fish horse animal king queen ship sea island mountain "
    "north south east west one two three four five six seven eight nine ten hundred thousand "
    "million first second third next last";
static const char builtin_chars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:!?'\"()[]{}-_/\\@#$%&*+=<>|~`^";

static const char pseudo_cons[] = "bdfgklmnprstvz"; /* 14 */
static const char pseudo_vow[] = "aeiou";           /* 5 → 70 syllables */

/* Pseudo-word number i: the base-70 digits of i + 70 (at least two syllables), most significant first. */
static size_t pseudo_word(uint64_t i, char *buf) {
    char tmp[32];
    size_t n = 0;
    uint64_t v = i + 70;
    while (v > 0) {
        unsigned d = (unsigned)(v % 70);
        tmp[n++] = pseudo_vow[d % 5];
        tmp[n++] = pseudo_cons[d / 5];
        v /= 70;
    }
    for (size_t k = 0; k < n; k++) buf[k] = tmp[n - 1 - k];
    buf[n] = '\0';
    return n;
}

static vocab_store *store_new(int32_t cap) {
    vocab_store *st = (vocab_store *)calloc(1, sizeof *st);
    if (!st) return NULL;
    st->cap = cap;
    st->tokens = (char **)calloc((size_t)cap, sizeof(char *));
    st->scores = (float *)calloc((size_t)cap, sizeof(float));
    st->types = (int32_t *)calloc((size_t)cap, sizeof(int32_t));
    st->n_slots = 16;
    while (st->n_slots < (size_t)cap * 2) st->n_slots *= 2;
    st->slots = (int32_t *)malloc(st->n_slots * sizeof(int32_t));
    if (!st->tokens || !st->scores || !st->types || !st->slots) {
        store_free(st);
        return NULL;
    }
    for (size_t i = 0; i < st->n_slots; i++) st->slots[i] = -1;
    return st;
}

static bitnet_dummy_vocab *vocab_wrap(vocab_store *st, int32_t bos, int32_t eos, int32_t pad) {
    bitnet_dummy_vocab *v = (bitnet_dummy_vocab *)calloc(1, sizeof *v);
    if (!v) return NULL;
    v->model = st->model;
    v->pre = st->pre;
    v->n_tokens = st->n;
    v->tokens = (const char *const *)st->tokens;
    v->scores = st->scores;
    v->types = st->types;
    v->n_merges = st->n_merges;
    v->merges = (const char *const *)st->merges;
    v->bos_id = bos;
    v->eos_id = eos;
    v->pad_id = pad;
    v->owned_ = st;
    return v;
}

/* Add every space-separated item of `list`, optionally with the space marker in front. */
static bool add_list(vocab_store *st, const char *list, bool marker) {
    char piece[64];
    const char *p = list;
    while (*p && st->n < st->cap) {
        while (*p == ' ') p++;
        const char *q = p;
        while (*q && *q != ' ') q++;
        size_t n = (size_t)(q - p), off = 0;
        if (n == 0) break;
        if (marker) {
            memcpy(piece, SPACE_MARK, 3);
            off = 3;
        }
        memcpy(piece + off, p, n);
        if (!store_add_piece(st, piece, off + n)) return false;
        p = q;
    }
    return true;
}

bitnet_status bitnet_dummy_vocab_builtin(int32_t n_tokens, bitnet_dummy_vocab **out, bitnet_error *err) {
    *out = NULL;
    if (n_tokens < 259)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "vocabulary size %d is too small: the built-in vocabulary needs at least 259 tokens "
                           "(<unk>, <s>, </s> and the 256 byte tokens)", (int)n_tokens);
    vocab_store *st = store_new(n_tokens);
    if (!st) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory building a %d-token vocabulary", (int)n_tokens);
    bool ok = store_add(st, "<unk>", 5, 0.0f, BITNET_TOKEN_UNKNOWN) && store_add(st, "<s>", 3, 0.0f, BITNET_TOKEN_CONTROL) &&
              store_add(st, "</s>", 4, 0.0f, BITNET_TOKEN_CONTROL);
    for (int b = 0; ok && b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        ok = store_add(st, name, 6, 0.0f, BITNET_TOKEN_BYTE);
    }
    /* A run of spaces is common in code and text: "▁▁" and "▁▁▁▁" first, as SentencePiece models have. */
    if (ok) ok = store_add_piece(st, SPACE_MARK SPACE_MARK, 6) && store_add_piece(st, SPACE_MARK SPACE_MARK SPACE_MARK SPACE_MARK, 12);
    if (ok) ok = add_list(st, builtin_subwords, false) && add_list(st, builtin_words, true);
    if (ok) ok = store_add_piece(st, SPACE_MARK, 3);
    for (const char *c = builtin_chars; ok && *c; c++) ok = store_add_piece(st, c, 1);
    char buf[40];
    for (uint64_t i = 0; ok && st->n < st->cap; i++) {
        memcpy(buf, SPACE_MARK, 3);
        size_t n = pseudo_word(i, buf + 3);
        ok = store_add(st, buf, n + 3, -(float)(st->n - 258), BITNET_TOKEN_NORMAL) &&
             store_add(st, buf + 3, n, -(float)(st->n - 258), BITNET_TOKEN_NORMAL);
    }
    if (ok) {
        st->model = bitnet_strndup("llama", 5);
        st->pre = bitnet_strndup("default", 7);
        ok = st->model && st->pre;
    }
    bitnet_dummy_vocab *v = ok ? vocab_wrap(st, 1, 2, -1) : NULL;
    if (!v) {
        store_free(st);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory building a %d-token vocabulary", (int)n_tokens);
    }
    *out = v;
    return BITNET_OK;
}

/* Optional integer key: *out = value, or -1 when the key is absent. */
static bitnet_status opt_id(const bitnet_gguf *g, const char *key, int32_t *out, bitnet_error *err) {
    *out = -1;
    if (bitnet_gguf_find_kv(g, key) < 0) return BITNET_OK;
    int64_t v;
    bitnet_status s = bitnet_gguf_get_i64(g, key, &v, err);
    if (s != BITNET_OK) return s;
    if (v < 0 || v > INT32_MAX)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s = %lld is not a token id", bitnet_gguf_path(g), key,
                           (long long)v);
    *out = (int32_t)v;
    return BITNET_OK;
}

static bitnet_status opt_str(const bitnet_gguf *g, const char *key, const char *dflt, char **out, bitnet_error *err) {
    const char *p = dflt;
    size_t n = dflt ? strlen(dflt) : 0;
    if (bitnet_gguf_find_kv(g, key) >= 0) {
        bitnet_status s = bitnet_gguf_get_str(g, key, &p, &n, err);
        if (s != BITNET_OK) return s;
    }
    *out = bitnet_strndup(p ? p : "", n);
    return *out ? BITNET_OK : bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory copying %s", key);
}


/* The n token texts of g (tokenizer.ggml.tokens) into st, all typed NORMAL until token_type says otherwise. */
static bitnet_status copy_tokens(const bitnet_gguf *g, const char *path, uint64_t n, vocab_store *st,
                                 bitnet_error *err) {
    for (uint64_t i = 0; i < n; i++) {
        const char *p;
        size_t len;
        bitnet_status s = bitnet_gguf_get_arr_str(g, "tokenizer.ggml.tokens", i, &p, &len, err);
        if (s != BITNET_OK) return s;
        if (memchr(p, '\0', len)) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%llu] contains a NUL byte", path,
                               (unsigned long long)i);
        }
        st->tokens[i] = bitnet_strndup(p, len);
        if (!st->tokens[i]) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory copying tokens");
        st->n = (int32_t)(i + 1);
        st->types[i] = BITNET_TOKEN_NORMAL;
    }
    return BITNET_OK;
}

/* tokenizer.ggml.scores (n float32) into st, or no scores when the key is absent. */
static bitnet_status copy_scores(const bitnet_gguf *g, const char *path, uint64_t n, vocab_store *st,
                                 bitnet_error *err) {
    bitnet_gguf_type et;
    const void *data = NULL;
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.scores") >= 0) {
        uint64_t m;
        bitnet_status s = bitnet_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m, &data, err);
        if (s != BITNET_OK) return s;
        if (et != BITNET_GGUF_FLOAT32 || m != n) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.scores must be %llu float32 values "
                               "(element type %d, %llu elements)", path, (unsigned long long)n, (int)et, (unsigned long long)m);
        }
        memcpy(st->scores, data, (size_t)n * sizeof(float));
    } else {
        free(st->scores);
        st->scores = NULL;
    }
    return BITNET_OK;
}

/* tokenizer.ggml.token_type (n int32 or uint32) into st when present (*have_types). */
static bitnet_status copy_types(const bitnet_gguf *g, const char *path, uint64_t n, vocab_store *st,
                                bool *have_types, bitnet_error *err) {
    bitnet_gguf_type et;
    const void *data = NULL;
    *have_types = bitnet_gguf_find_kv(g, "tokenizer.ggml.token_type") >= 0;
    if (*have_types) {
        uint64_t m;
        bitnet_status s = bitnet_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m, &data, err);
        if (s != BITNET_OK) return s;
        if ((et != BITNET_GGUF_INT32 && et != BITNET_GGUF_UINT32) || m != n) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.token_type must be %llu int32 values "
                               "(element type %d, %llu elements)", path, (unsigned long long)n, (int)et, (unsigned long long)m);
        }
        memcpy(st->types, data, (size_t)n * sizeof(int32_t));
    }
    return BITNET_OK;
}

/* tokenizer.ggml.merges (strings) into st when present. */
static bitnet_status copy_merges(const bitnet_gguf *g, const char *path, vocab_store *st, bitnet_error *err) {
    bitnet_gguf_type et;
    const void *data = NULL;
    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.merges") >= 0) {
        uint64_t m;
        bitnet_status s = bitnet_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &m, &data, err);
        if (s != BITNET_OK) return s;
        if (et != BITNET_GGUF_STRING) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.merges must be a string array", path);
        }
        st->merges = (char **)calloc(m ? (size_t)m : 1, sizeof(char *));
        if (!st->merges) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory copying merges");
        for (uint64_t i = 0; i < m; i++) {
            const char *p;
            size_t len;
            s = bitnet_gguf_get_arr_str(g, "tokenizer.ggml.merges", i, &p, &len, err);
            if (s != BITNET_OK) return s;
            st->merges[i] = bitnet_strndup(p, len);
            if (!st->merges[i]) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory copying merges");
            st->n_merges = i + 1;
        }
    }
    return BITNET_OK;
}

/* The bos, eos and padding ids of g (-1 when absent), each checked against the n tokens. */
static bitnet_status read_special_ids(const bitnet_gguf *g, const char *path, uint64_t n, int32_t *bos,
                                      int32_t *eos, int32_t *pad, bitnet_error *err) {
    bitnet_status s;
    if ((s = opt_id(g, "tokenizer.ggml.bos_token_id", bos, err)) != BITNET_OK) return s;
    if ((s = opt_id(g, "tokenizer.ggml.eos_token_id", eos, err)) != BITNET_OK) return s;
    if ((s = opt_id(g, "tokenizer.ggml.padding_token_id", pad, err)) != BITNET_OK) return s;
    const int32_t ids[3] = {*bos, *eos, *pad};
    const char *keys[3] = {"bos_token_id", "eos_token_id", "padding_token_id"};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= (int64_t)n) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.%s = %d is out of range (%llu tokens)",
                               path, keys[i], (int)ids[i], (unsigned long long)n);
        }
    return BITNET_OK;
}

bitnet_status bitnet_dummy_vocab_from_gguf(const char *path, bitnet_dummy_vocab **out, bitnet_error *err) {
    *out = NULL;
    bitnet_gguf *g = NULL;
    bitnet_status s = bitnet_gguf_open(path, &g, err);
    if (s != BITNET_OK) return s;
    vocab_store *st = NULL;
    bitnet_gguf_type et;
    uint64_t n = 0;
    const void *data = NULL;
    int32_t bos = -1, eos = -1, pad = -1;
    bool have_types = false;

    if (bitnet_gguf_find_kv(g, "tokenizer.ggml.tokens") < 0) {
        s = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: no vocabulary (key tokenizer.ggml.tokens missing)", path);
        goto done;
    }
    s = bitnet_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data, err);
    if (s != BITNET_OK) goto done;
    if (et != BITNET_GGUF_STRING || n == 0 || n > INT32_MAX) {
        s = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be a non-empty string array "
                        "(element type %d, %llu elements)", path, (int)et, (unsigned long long)n);
        goto done;
    }
    st = store_new((int32_t)n);
    if (!st) {
        s = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory copying %llu tokens", (unsigned long long)n);
        goto done;
    }
    if ((s = copy_tokens(g, path, n, st, err)) != BITNET_OK) goto done;
    free(st->slots); /* not needed for a copied vocabulary */
    st->slots = NULL;

    if ((s = copy_scores(g, path, n, st, err)) != BITNET_OK) goto done;
    if ((s = copy_types(g, path, n, st, &have_types, err)) != BITNET_OK) goto done;
    if ((s = copy_merges(g, path, st, err)) != BITNET_OK) goto done;
    if ((s = opt_str(g, "tokenizer.ggml.model", "llama", &st->model, err)) != BITNET_OK) goto done;
    if ((s = opt_str(g, "tokenizer.ggml.pre", "", &st->pre, err)) != BITNET_OK) goto done;
    if ((s = read_special_ids(g, path, n, &bos, &eos, &pad, err)) != BITNET_OK) goto done;
    {
        bitnet_dummy_vocab *v = vocab_wrap(st, bos, eos, pad);
        if (!v) {
            s = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (!have_types) v->types = NULL;
        *out = v;
        st = NULL;
    }
    s = BITNET_OK;
done:
    store_free(st);
    bitnet_gguf_close(g);
    return s;
}
