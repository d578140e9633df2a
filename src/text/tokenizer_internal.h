/* tokenizer_internal.h — what the files of the tokenizer share, private to src/text: the vocabulary
 * struct (struct bitnet_vocab), the text -> id lookup, the growing id buffer, UTF-8 character lengths,
 * GPT-2's byte alphabet, and the entry points each tokenizer file offers bitnet_tokenize (tokenizer.c).
 * Who does what: vocab.c loads the vocabulary, spm.c is the SentencePiece-style tokenizer, bpe.c the
 * byte-level BPE one with its PCRE2 pre-tokenizers, detok.c turns tokens back into bytes, heap.c is the
 * binary heap both tokenizers merge with, nfc.c the Unicode NFC normalizer (tables in unicode_nfc_data.c). The algorithms are described at the top of tokenizer.c. */
#ifndef BITNET_TOKENIZER_INTERNAL_H
#define BITNET_TOKENIZER_INTERNAL_H

#include "text/heap.h"
#include "text/tokenizer.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

typedef enum vocab_kind {
    VOCAB_SPM = 1, /* "llama" */
    VOCAB_BPE = 2, /* "gpt2" */
} vocab_kind;

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
    bool nfc;             /* raw fragments are put in Unicode NFC first ("qwen2") */
    merge_slot *merges;   /* open addressing, merge_cap slots */
    size_t merge_cap;
};

/* ---------------------------------------------------------------------------------------------
 * Hash of token texts
 * ------------------------------------------------------------------------------------------- */

static inline uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a 64 */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static inline const char *tok_text(const bitnet_vocab *v, int32_t id) { return v->arena + v->off[id]; }

/* Token id of exactly these bytes, or -1. */
static inline int32_t vocab_find(const bitnet_vocab *v, const char *s, size_t n) {
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
static inline int32_t text_token(const bitnet_vocab *v, const char *s, size_t n) {
    const int32_t id = vocab_find(v, s, n);
    if (id < 0) return -1;
    const int t = v->type[id];
    return t == BITNET_TOKEN_NORMAL || t == BITNET_TOKEN_USER_DEFINED || t == 0 ? id : -1;
}


static inline int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Byte of a "<0xXX>" text, or -1. */
static inline int byte_of_text(const char *s, size_t n) {
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    const int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* ---------------------------------------------------------------------------------------------
 * Output buffer
 * ------------------------------------------------------------------------------------------- */

typedef struct ids {
    int32_t *p;
    size_t n, cap;
    bool oom;
} ids;

static inline void ids_push(ids *o, int32_t id) {
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
 * UTF-8 characters, GPT-2's byte alphabet
 * ------------------------------------------------------------------------------------------- */

/* Length of the UTF-8 character at s (n > 0 bytes available); 1 for a byte that does not start a
 * valid, complete, shortest-form sequence (RFC 3629). */
static inline size_t utf8_char_len(const unsigned char *s, size_t n) {
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

/* GPT-2's bytes_to_unicode: the printable bytes '!'..'~', 0xA1..0xAC, 0xAE..0xFF keep their code point;
 * the other 68 bytes, in increasing order, get U+0100..U+0143: 0x00..0x20 → U+0100..U+0120,
 * 0x7F..0xA0 → U+0121..U+0142, 0xAD → U+0143. */
static inline uint32_t byte_to_cp(unsigned b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x121 + (b - 0x7F);
    if (b == 0xAD) return 0x143;
    return b;
}

/* Inverse of byte_to_cp: the byte of code point cp, or -1 when cp is not in GPT-2's alphabet. */
static inline int cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) return (int)cp;
    if (cp >= 0x100 && cp <= 0x120) return (int)(cp - 0x100);
    if (cp >= 0x121 && cp <= 0x142) return (int)(0x7F + (cp - 0x121));
    if (cp == 0x143) return 0xAD;
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Entry points of spm.c and bpe.c
 * ------------------------------------------------------------------------------------------- */

/* SentencePiece-style tokens of one raw fragment (no special token in it), appended to out (spm.c):
 * spaces become "▁", one more "▁" is prepended when space_prefix. */
bitnet_status bitnet_spm_raw(const bitnet_vocab *v, const char *text, size_t len, bool space_prefix, ids *out,
                             bitnet_error *err);

/* BPE part of loading (bpe.c): tokenizer.ggml.pre -> regex, tokenizer.ggml.merges -> rank table. */
bitnet_status bitnet_bpe_load(const bitnet_gguf *g, bitnet_vocab *v, bitnet_error *err);

/* Scratch buffers reused across the pieces of one bitnet_tokenize call. */
typedef struct bpe_scratch {
    char *word;
    size_t word_cap;
    struct bpe_sym *sym;
    size_t sym_cap;
    bitnet_heap heap; /* of bpe_pair (bpe.c) */
} bpe_scratch;

/* True when text is NFC because no code point in it is >= U+0300 (nfc.c's fast path). */
bool bitnet_utf8_is_nfc_fast(const char *text, size_t len);

/* Pre-tokenize one raw fragment and tokenize each piece, appending to out (bpe.c); the fragment is put in
 * NFC first when v->nfc. */
bitnet_status bitnet_bpe_raw(const bitnet_vocab *v, const char *text, size_t len, bpe_scratch *sc, ids *out,
                             bitnet_error *err);

#endif
