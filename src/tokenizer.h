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

/* Read the vocabulary (texts are copied: the vocabulary outlives g). Keys: tokenizer.ggml.model (must be
 * "llama"), .tokens (required), .scores (float32, default 0), .token_type (int32 0..6, default NORMAL),
 * .bos_token_id / .eos_token_id / .unknown_token_id (SentencePiece defaults 1 / 2 / 0 when absent,
 * -1 = none), .padding_token_id, .eot_token_id, .eom_token_id, .add_bos_token (default true),
 * .add_eos_token (default false), .add_space_prefix (default true).
 * Errors name the file and the missing or malformed key: BITNET_ERR_UNSUPPORTED for another
 * tokenizer.ggml.model (named in the message); BITNET_ERR_FORMAT for tokens/scores/token_type length or
 * type mismatch, a token type outside 0..6, a BYTE token whose text is not <0xXX>, an id out of range. */
bitnet_status bitnet_vocab_load(const bitnet_gguf *g, bitnet_vocab **out, bitnet_error *err);
void bitnet_vocab_free(bitnet_vocab *v);

int32_t bitnet_vocab_n_tokens(const bitnet_vocab *v);
int32_t bitnet_vocab_bos(const bitnet_vocab *v); /* -1 if none */
int32_t bitnet_vocab_eos(const bitnet_vocab *v); /* -1 if none */
bool bitnet_vocab_is_eog(const bitnet_vocab *v, int32_t token); /* end of generation (EOS, EOT) */
const char *bitnet_vocab_text(const bitnet_vocab *v, int32_t token); /* raw token string */
int bitnet_vocab_type(const bitnet_vocab *v, int32_t token); /* -1 when out of range */
int32_t bitnet_vocab_unk(const bitnet_vocab *v);                 /* -1 if none */
bool bitnet_vocab_add_bos(const bitnet_vocab *v);  /* BOS exists and tokenizer.ggml.add_bos_token is not false */
float bitnet_vocab_score(const bitnet_vocab *v, int32_t token);
int32_t bitnet_vocab_find(const bitnet_vocab *v, const char *text, size_t len); /* exact text → id, -1 if none */

/* Tokenize len bytes of UTF-8 text (llama.cpp's SPM behaviour; the algorithm is described at the top
 * of tokenizer.c). *tokens is malloc'ed (caller frees; non-NULL even for 0 tokens), *n_tokens its length.
 * add_bos ("add special tokens") prepends BOS when bitnet_vocab_add_bos() and appends EOS when the
 * vocabulary sets tokenizer.ggml.add_eos_token. parse_special: texts of CONTROL/UNKNOWN tokens in the
 * input become those tokens; USER_DEFINED token texts are always matched. Invalid UTF-8 is accepted:
 * each bad byte is a one-byte character (byte fallback). Errors: BITNET_ERR_NOMEM; BITNET_ERR_UNSUPPORTED
 * when a byte has no byte token and there is no unknown token. */
bitnet_status bitnet_tokenize(const bitnet_vocab *v, const char *text, size_t len, bool add_bos,
                              bool parse_special, int32_t **tokens, size_t *n_tokens, bitnet_error *err);

/* Bytes of one token as printed text, as llama.cpp prints SPM tokens: NORMAL → its text with "▁" →
 * space; BYTE (<0xXX>) → that byte; USER_DEFINED → its text; CONTROL and UNKNOWN → nothing unless
 * `special` (then the raw text, e.g. "<unk>"); UNUSED/undefined or an id out of range → nothing.
 * Byte tokens print their raw byte even when three of them spell "▁" (a vocabulary without a "▁"
 * token); callers that stream output must cope with pieces that are partial UTF-8 sequences.
 * Writes up to buf_size bytes (buf may be NULL when buf_size is 0) and returns the full length
 * (may be > buf_size: call again with a bigger buffer). */
size_t bitnet_token_to_piece(const bitnet_vocab *v, int32_t token, bool special, char *buf, size_t buf_size);

#ifdef __cplusplus
}
#endif

#endif
