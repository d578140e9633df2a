/* spm.c — the SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"): spaces become "▁", then
 * the adjacent pair of UTF-8 characters whose concatenation is the best-scored token is merged until none
 * merges, and pieces that are not tokens fall back to <0xXX> byte tokens (steps 1-3 of "SPM" at the top
 * of tokenizer.c). */
#include "text/tokenizer_internal.h"

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
static bool bigram_before(const void *pa, const void *pb) {
    const bigram *a = (const bigram *)pa, *b = (const bigram *)pb;
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

static void try_bigram(const bitnet_vocab *v, const sym *s, bitnet_heap *h, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t n = s[left].n + s[right].n; /* adjacent in the buffer: s[left].text .. + n */
    const int32_t id = text_token(v, s[left].text, n);
    if (id < 0) return;
    bitnet_heap_push(h, &(bigram){v->score[id], left, right, n});
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
    bitnet_heap h = {NULL, 0, 0, sizeof(bigram), bigram_before, false};
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
        bigram b;
        bitnet_heap_pop(&h, &b);
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
bitnet_status bitnet_spm_raw(const bitnet_vocab *v, const char *text, size_t len, bool space_prefix, ids *out,
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
