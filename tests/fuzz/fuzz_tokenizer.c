/* fuzz_tokenizer.c — libFuzzer target: both tokenizers of text/tokenizer.h on arbitrary bytes, with
 * small vocabularies built once:
 *   0  SentencePiece-style ("llama"): the vocabulary of tests/data/bitnetcpp-tiny (bitnet.cpp's dummy
 *      vocabulary: <unk> <s> </s>, 256 byte tokens, merges by score);
 *   1-3 byte-level BPE ("gpt2") with pre-tokenizer llama-bpe, gpt2 or falcon3: 256 byte tokens, a few
 *      merges, CONTROL and USER_DEFINED tokens, written by this file with the GGUF writer.
 * Input: one mode byte, then the text (encode) or little-endian int32 ids (decode).
 *   mode bits 0-1 vocabulary, bit 2 add_bos, bit 3 parse_special, bit 4 decode instead of encode,
 *   bit 5 (decode) ids taken as they are (negative, huge) instead of folded into [-2, 598).
 * Checked properties:
 *   - encode: every id is in range; detokenize accepts them; for BPE without special-text parsing the
 *     pieces (special = true) spell the input bytes exactly (byte-level BPE covers every byte);
 *   - decode: the streaming detokenizer (bitnet_detok) releases exactly the concatenation of
 *     bitnet_token_to_piece's pieces; bitnet_detokenize reports the same length with any buffer size and
 *     writes, into a buffer of exactly that size, a prefix of its full text. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/gguf.h"
#include "fuzz_util.h"
#include "text/tokenizer.h"

#ifndef FUZZ_DATA_DIR
#error "FUZZ_DATA_DIR (tests/data) must be defined"
#endif

static bitnet_gguf *g_gguf[4];
static bitnet_vocab *g_vocab[4];

/* GPT-2's byte → character map (bytes_to_unicode of its encoder.py): printable bytes keep their code
 * point, the others get 256, 257, ... in byte order. Writes the UTF-8 of byte b's character. */
static void byte_char(unsigned b, char *out) {
    unsigned n = 0, cp = 0;
    for (unsigned c = 0; c <= b; c++) {
        const bool kept = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        cp = kept ? c : 256 + n;
        if (!kept) n++;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static void die(const char *what, const bitnet_error *err) {
    fprintf(stderr, "fuzz_tokenizer: %s: %s\n", what, err ? err->msg : "");
    abort();
}

/* A byte-level BPE vocabulary with pre-tokenizer `pre`, written to the scratch directory and loaded. */
static void make_bpe(int slot, const char *pre) {
    static const char *const extra[] = {"he", "ll", "hell", "hello", "\xC4\xA0w", "or", "\xC4\xA0wor", "ld",
                                        "\xC4\xA0world", "12", "123", "<|eot_id|>", "<|begin_of_text|>", "<u>"};
    static const int32_t extra_type[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 4};
    static const char *const merges[] = {"h e", "l l", "he ll", "hell o", "\xC4\xA0 w", "o r", "\xC4\xA0w or", "l d",
                                         "\xC4\xA0wor ld", "1 2", "12 3"};
    enum { N_EXTRA = sizeof extra / sizeof extra[0], N = 256 + N_EXTRA };
    static char chars[256][4];
    const char *tokens[N];
    int32_t types[N];
    for (unsigned b = 0; b < 256; b++) {
        byte_char(b, chars[b]);
        tokens[b] = chars[b];
        types[b] = 1;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        tokens[256 + i] = extra[i];
        types[256 + i] = extra_type[i];
    }
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    if (!w) die("out of memory", NULL);
    bitnet_gguf_set_str(w, "general.architecture", "llama");
    bitnet_gguf_set_str(w, "tokenizer.ggml.model", "gpt2");
    bitnet_gguf_set_str(w, "tokenizer.ggml.pre", pre);
    bitnet_gguf_set_arr_str(w, "tokenizer.ggml.tokens", tokens, N);
    bitnet_gguf_set_arr(w, "tokenizer.ggml.token_type", BITNET_GGUF_INT32, types, N);
    bitnet_gguf_set_arr_str(w, "tokenizer.ggml.merges", merges, sizeof merges / sizeof merges[0]);
    bitnet_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 256 + 12);
    bitnet_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 256 + 11);
    char path[512], name[32];
    snprintf(name, sizeof name, "bpe-%s.gguf", pre);
    fuzz_path(name, path, sizeof path);
    bitnet_error err = {{0}};
    if (bitnet_gguf_write_begin(w, path, &err) != BITNET_OK || bitnet_gguf_write_end(w, &err) != BITNET_OK) {
        die(path, &err);
    }
    bitnet_gguf_writer_free(w);
    if (bitnet_gguf_open(path, &g_gguf[slot], &err) != BITNET_OK) die(path, &err);
    if (bitnet_vocab_load(g_gguf[slot], &g_vocab[slot], &err) != BITNET_OK) die(path, &err);
}

static void cleanup(void) {
    for (int i = 0; i < 4; i++) {
        bitnet_vocab_free(g_vocab[i]);
        bitnet_gguf_close(g_gguf[i]);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    bitnet_error err = {{0}};
    const char *spm = FUZZ_DATA_DIR "/bitnetcpp-tiny/ggml-model-i2_s.gguf";
    if (bitnet_gguf_open(spm, &g_gguf[0], &err) != BITNET_OK) die(spm, &err);
    if (bitnet_vocab_load(g_gguf[0], &g_vocab[0], &err) != BITNET_OK) die(spm, &err);
    make_bpe(1, "llama-bpe");
    make_bpe(2, "gpt2");
    make_bpe(3, "falcon3");
    atexit(cleanup);
    return 0;
}

/* The concatenated pieces of ids (special as given), malloc'ed; *n its length. */
static char *pieces(const bitnet_vocab *v, const int32_t *ids, size_t n_ids, bool special, size_t *n) {
    size_t cap = 64, len = 0;
    char *s = (char *)malloc(cap);
    for (size_t i = 0; i < n_ids; i++) {
        const size_t np = bitnet_token_to_piece(v, ids[i], special, NULL, 0);
        while (len + np > cap) s = (char *)realloc(s, cap *= 2);
        if (bitnet_token_to_piece(v, ids[i], special, s + len, np) != np) abort();
        len += np;
    }
    *n = len;
    return s;
}

static void decode(const bitnet_vocab *v, const int32_t *ids, size_t n_ids, bool special) {
    size_t n_ref;
    char *ref = pieces(v, ids, n_ids, special, &n_ref);
    bitnet_detok *d = bitnet_detok_new(v, special);
    char *got = (char *)malloc(n_ref + 8);
    size_t n_got = 0, len;
    for (size_t i = 0; i < n_ids; i++) {
        const char *p = bitnet_detok_push(d, ids[i], &len);
        if (n_got + len > n_ref) abort(); /* releases more than the pieces hold */
        memcpy(got + n_got, p, len);
        n_got += len;
    }
    const char *p = bitnet_detok_flush(d, &len);
    if (n_got + len != n_ref) abort();
    memcpy(got + n_got, p, len);
    if (memcmp(got, ref, n_ref) != 0) abort();
    bitnet_detok_free(d);
    /* bitnet_detokenize: the same full length whatever the buffer; buffers of exactly the capacity given
     * (ASan sees a write past it), the cut text a prefix of the whole */
    const size_t full = bitnet_detokenize(v, ids, n_ids, special, NULL, 0);
    char *whole = (char *)malloc(full ? full : 1);
    if (bitnet_detokenize(v, ids, n_ids, special, whole, full) != full) abort();
    if (full > 1) {
        const size_t cap = full / 2;
        char *cut = (char *)malloc(cap);
        if (bitnet_detokenize(v, ids, n_ids, special, cut, cap) != full) abort();
        if (memcmp(cut, whole, cap) != 0) abort();
        free(cut);
    }
    free(whole);
    free(got);
    free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const unsigned mode = data[0];
    const bitnet_vocab *v = g_vocab[mode & 3];
    const bool add_bos = mode & 4, special = mode & 8;
    data++;
    size--;
    if (mode & 16) {
        const size_t n_ids = size / 4;
        int32_t *ids = (int32_t *)malloc((n_ids ? n_ids : 1) * sizeof *ids);
        for (size_t i = 0; i < n_ids; i++) {
            uint32_t u = (uint32_t)data[4 * i] | (uint32_t)data[4 * i + 1] << 8 | (uint32_t)data[4 * i + 2] << 16 |
                         (uint32_t)data[4 * i + 3] << 24;
            /* mostly ids near the vocabulary, sometimes anything (negative, huge) */
            ids[i] = (mode & 32) ? (int32_t)u : (int32_t)(u % 600u) - 2;
        }
        decode(v, ids, n_ids, special);
        free(ids);
        return 0;
    }
    bitnet_error err = {{0}};
    int32_t *ids = NULL;
    size_t n = 0;
    if (bitnet_tokenize(v, (const char *)data, size, add_bos, special, &ids, &n, &err) != BITNET_OK) return 0;
    const int32_t n_tokens = bitnet_vocab_n_tokens(v);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_tokens) abort();
    }
    if ((mode & 3) != 0 && !add_bos && !special) {
        size_t n_text;
        char *text = pieces(v, ids, n, true, &n_text);
        if (n_text != size || memcmp(text, data, size) != 0) abort(); /* byte-level BPE loses no byte */
        free(text);
    }
    decode(v, ids, n, special);
    free(ids);
    size_t *ends = NULL, n_pieces = 0;
    if (bitnet_pretokenize(v, (const char *)data, size, &ends, &n_pieces, &err) == BITNET_OK) {
        size_t prev = 0;
        for (size_t i = 0; i < n_pieces; i++) {
            if (ends[i] < prev || ends[i] > size) abort(); /* pieces are ordered inside the text */
            prev = ends[i];
        }
        if (n_pieces > 0 && prev != size) abort(); /* and cover it */
        free(ends);
    }
    return 0;
}
