/* detok.c — the way back from tokens to text: bitnet_token_to_piece (one token's printed bytes),
 * bitnet_detokenize (a token sequence, with SentencePiece's "▁" and prefix-space rules), the UTF-8-safe
 * stream (bitnet_utf8_stream_*: never splits a character across two writes) and the streaming
 * detokenizer built on it (bitnet_detok_*). */
#include "text/tokenizer_internal.h"

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

/* The n bytes at s with each "▁" (U+2581) printed as a space; returns the full length. */
static size_t put_unescaped(char *buf, size_t buf_size, const char *s, size_t n) {
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
        return put_unescaped(buf, buf_size, s, n);
    }
    case BITNET_TOKEN_BYTE: {
        const char b = (char)byte_of_text(s, n); /* validated at load */
        return put(buf, buf_size, 0, &b, 1);
    }
    case BITNET_TOKEN_USER_DEFINED:
        /* "llama": "▁" is a space here too (Gemma's added "▁▁"... tokens; Hugging Face's decoder replaces
         * it in every token) */
        return v->kind == VOCAB_SPM ? put_unescaped(buf, buf_size, s, n) : put(buf, buf_size, 0, s, n);
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
        if (pn == 0) continue; /* prints nothing (and frag may still be NULL: no NULL + 0) */
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
