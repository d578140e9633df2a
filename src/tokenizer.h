/* tokenizer.h — vocabulary and tokenizer read from GGUF metadata (tokenizer.ggml.*).
 * Issue #2 scope: the SentencePiece-style model (tokenizer.ggml.model = "llama"): score-driven
 * bigram merges over UTF-8 characters with a "▁" space marker and a leading space, byte fallback to
 * <0xXX> tokens, control tokens (BOS/EOS) recognised in text only when parse_special is set. */
#ifndef BITNET_TOKENIZER_H
#define BITNET_TOKENIZER_H

#include "common.h"
#include "gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_vocab bitnet_vocab;

/* GGUF token types (tokenizer.ggml.token_type). */
enum bitnet_token_type {
    BITNET_TOKEN_NORMAL = 1,
    BITNET_TOKEN_UNKNOWN = 2,
    BITNET_TOKEN_CONTROL = 3,
    BITNET_TOKEN_USER_DEFINED = 4,
    BITNET_TOKEN_UNUSED = 5,
    BITNET_TOKEN_BYTE = 6,
};

/* Read the vocabulary; errors name the missing or malformed key (tokens/scores/token_type length
 * mismatch, unsupported tokenizer.ggml.model, bos/eos id out of range). */
bitnet_status bitnet_vocab_load(const bitnet_gguf *g, bitnet_vocab **out, bitnet_error *err);
void bitnet_vocab_free(bitnet_vocab *v);

int32_t bitnet_vocab_n_tokens(const bitnet_vocab *v);
int32_t bitnet_vocab_bos(const bitnet_vocab *v); /* -1 if none */
int32_t bitnet_vocab_eos(const bitnet_vocab *v); /* -1 if none */
bool bitnet_vocab_is_eog(const bitnet_vocab *v, int32_t token); /* end of generation (EOS, EOT) */
const char *bitnet_vocab_text(const bitnet_vocab *v, int32_t token); /* raw token string */
int bitnet_vocab_type(const bitnet_vocab *v, int32_t token);

/* Tokenize len bytes of UTF-8 text. *tokens is malloc'ed (caller frees), *n_tokens its length.
 * add_bos prepends BOS when the vocabulary has one. */
bitnet_status bitnet_tokenize(const bitnet_vocab *v, const char *text, size_t len, bool add_bos,
                              bool parse_special, int32_t **tokens, size_t *n_tokens, bitnet_error *err);

/* Bytes of one token as printed text ("▁" → space, <0xXX> → that byte, control tokens → nothing
 * unless `special`). Writes up to buf_size bytes and returns the full length (may be > buf_size). */
size_t bitnet_token_to_piece(const bitnet_vocab *v, int32_t token, bool special, char *buf, size_t buf_size);

#ifdef __cplusplus
}
#endif

#endif
