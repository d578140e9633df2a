/* tokenizer.c — bitnet_tokenize: the special-token partition, then the tokenizer of the vocabulary's
 * kind on each raw fragment. This comment describes both tokenizers; the code lives in
 *   vocab.c   the vocabulary from GGUF metadata (tokenizer.ggml.*) and its accessors,
 *   spm.c     the SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"),
 *   bpe.c     the byte-level BPE tokenizer ("gpt2"): its loading, PCRE2 pre-tokenizers, merges,
 *   heap.c    the binary heap both merge with,
 *   detok.c   the detokenizer (token → printed bytes) and the UTF-8-safe streaming output,
 *   nfc.c     Unicode NFC (the "qwen2" normalizer; tables in unicode_nfc_data.c, gen_unicode_nfc.py),
 * sharing tokenizer_internal.h.
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
 *       Qwen2 ("qwen2"; the Split pattern of Qwen2/2.5/3's tokenizer.json, as llama.cpp's "qwen2"): Llama 3's
 *         with \p{N} in place of \p{N}{1,3} (each digit is a piece). These tokenizer.json files also
 *         have an NFC normalizer: each raw fragment (after the special-token partition, whose added tokens
 *         are not normalized) is put in Unicode NFC (nfc.c) before the regex runs — Hugging Face's order;
 *         llama.cpp skips this step, so it differs on text that is not NFC (e.g. "e" + U+0301);
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
#include "text/tokenizer_internal.h"

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
    const char *end = h + (hn - nn) + 1; /* the last possible start + 1 */
    for (const char *p = h; p < end;) {
        p = (const char *)memchr(p, nd[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, nd, nn) == 0) return p;
        p++;
    }
    return NULL;
}

/* Which byte pairs (and single bytes) occur in the text: bit b0 << 8 | b1 of pairs, bit b of singles. A
 * special token whose first one or two bytes do not occur cannot be in the text; this skips most of the
 * thousands of added tokens of vocabularies like Gemma 3's (<unused0>... <unused6241>) at once. */
typedef struct text_bytes {
    uint64_t pair[65536 / 64];
    uint64_t single[256 / 64];
} text_bytes;

static void text_bytes_init(text_bytes *tb, const char *text, size_t len) {
    memset(tb, 0, sizeof *tb);
    for (size_t i = 0; i < len; i++) {
        const unsigned b = (unsigned char)text[i];
        tb->single[b >> 6] |= 1ull << (b & 63);
        if (i + 1 < len) {
            const unsigned p = b << 8 | (unsigned char)text[i + 1];
            tb->pair[p >> 6] |= 1ull << (p & 63);
        }
    }
}

static bool text_may_contain(const text_bytes *tb, const char *s, size_t n) {
    const unsigned b = (unsigned char)s[0];
    if (!(tb->single[b >> 6] >> (b & 63) & 1)) return false;
    if (n < 2) return true;
    const unsigned p = b << 8 | (unsigned char)s[1];
    return tb->pair[p >> 6] >> (p & 63) & 1;
}

static bool partition(const bitnet_vocab *v, const char *text, size_t len, bool parse_special, frags *f) {
    f->n = 0;
    if (len > 0 && !frags_insert(f, 0, (frag){0, len, -1})) return false;
    if (len == 0 || v->n_special == 0) return true;
    text_bytes *tb = (text_bytes *)malloc(sizeof *tb);
    if (!tb) return false;
    text_bytes_init(tb, text, len);
    for (int32_t k = 0; k < v->n_special; k++) {
        const int32_t id = v->special[k];
        if (!parse_special && v->type[id] != BITNET_TOKEN_USER_DEFINED) continue;
        const char *st = tok_text(v, id);
        const size_t sl = v->len[id];
        if (sl > len || !text_may_contain(tb, st, sl)) continue;
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
                if (!frags_insert(f, at, (frag){0, 0, id})) goto oom;
            } else {
                f->a[at] = (frag){0, 0, id};
            }
            if (post > 0 && !frags_insert(f, at + 1, (frag){r.off + pre + sl, post, -1})) goto oom;
            i = at; /* the loop's i++ moves to the post fragment */
        }
    }
    free(tb);
    return true;
oom:
    free(tb);
    return false;
}

bitnet_status bitnet_tokenize(const bitnet_vocab *v, const char *text, size_t len, bool add_special, bool parse_special,
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
    if (add_special && v->add_bos && v->bos >= 0) ids_push(&out, v->bos);
    switch (v->kind) {
    case VOCAB_SPM: {
        bool prev_special = true; /* the first fragment gets the space prefix */
        for (size_t i = 0; i < f.n && st == BITNET_OK; i++) {
            if (f.a[i].token >= 0) {
                ids_push(&out, f.a[i].token);
                prev_special = true;
            } else {
                st = bitnet_spm_raw(v, text + f.a[i].off, f.a[i].len, v->add_space_prefix && prev_special, &out, err);
                prev_special = false;
            }
        }
        break;
    }
    case VOCAB_BPE: {
        bpe_scratch sc = {0};
        for (size_t i = 0; i < f.n && st == BITNET_OK; i++) {
            if (f.a[i].token >= 0) ids_push(&out, f.a[i].token);
            else st = bitnet_bpe_raw(v, text + f.a[i].off, f.a[i].len, &sc, &out, err);
        }
        free(sc.word);
        free(sc.sym);
        free(sc.heap.a);
        break;
    }
    }
    if (st == BITNET_OK && add_special && v->add_eos && v->eos >= 0) ids_push(&out, v->eos);
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
