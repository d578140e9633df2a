/* tokenizer.h — vocabulary and tokenizers read from GGUF metadata (tokenizer.ggml.*), and the
 * detokenizer (token → printed bytes), including a streaming form that never splits a UTF-8 character
 * across two writes.
 * Two tokenizer models (tokenizer.ggml.model):
 *   "llama"  SentencePiece-style: score-driven bigram merges over UTF-8 characters with a "▁" space
 *            marker and a leading space (none with tokenizer.ggml.add_space_prefix = false: Gemma 3), byte
 *            fallback to <0xXX> tokens (Llama 2, bitnet_b1_58-*, Gemma 3 / BitNet-embedding-270M).
 *   "gpt2"   byte-level BPE: a pre-tokenizer regex (PCRE2, Unicode classes) splits the text, each piece's
 *            bytes are mapped to GPT-2's printable alphabet and merged by rank (tokenizer.ggml.merges);
 *            pre-tokenizers by tokenizer.ggml.pre: "llama-bpe" (Llama 3, BitNet-b1.58-2B-4T), "falcon3"
 *            (Falcon3, Falcon-E), "qwen2" (Qwen2/2.5/3, BitNet-embedding-0.6B: Llama 3's regex with single
 *            digits, text put in Unicode NFC first), "default"/"gpt2" (GPT-2's regex). The algorithms and
 *            their sources are described at the top of tokenizer.c.
 * Special / control tokens (CONTROL, USER_DEFINED) are matched in the text before either model runs
 * (longest text first) and are never produced by merges. */
#ifndef BITNET_TOKENIZER_H
#define BITNET_TOKENIZER_H

#include "base/common.h"
#include "base/gguf.h"

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

/* Read the vocabulary (texts are copied: the vocabulary outlives g). Keys: tokenizer.ggml.model ("llama"
 * or "gpt2"), .tokens (required), .scores (float32, default 0), .token_type (int32 0..6, default NORMAL),
 * .merges ("gpt2": required, strings "left right", rank = index), .pre ("gpt2": default "default"),
 * .bos_token_id / .eos_token_id / .unknown_token_id (SentencePiece defaults 1 / 2 / 0 when absent; for
 * "gpt2" none), -1 = none, .padding_token_id, .eot_token_id, .eom_token_id (when absent, EOT/EOM are
 * found by their texts "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>" / "<|eom_id|>" as
 * llama.cpp does), .add_bos_token (default: true for "llama" and for the Llama-3-style pre-tokenizers
 * "llama-bpe"/"falcon3", false otherwise — llama.cpp's defaults), .add_eos_token (default false),
 * .add_space_prefix ("llama", default true); tokenizer.chat_template (optional string, copied).
 * Errors name the file and the missing or malformed key: BITNET_ERR_UNSUPPORTED for another
 * tokenizer.ggml.model or tokenizer.ggml.pre (named in the message, with the supported names);
 * BITNET_ERR_FORMAT for tokens/scores/token_type/merges length or type mismatch, a token type outside
 * 0..6, a BYTE token whose text is not <0xXX>, a merge without a space, an id out of range. */
bitnet_status bitnet_vocab_load(const bitnet_gguf *g, bitnet_vocab **out, bitnet_error *err);
void bitnet_vocab_free(bitnet_vocab *v);

int32_t bitnet_vocab_n_tokens(const bitnet_vocab *v);
int32_t bitnet_vocab_bos(const bitnet_vocab *v); /* -1 if none */
int32_t bitnet_vocab_eos(const bitnet_vocab *v); /* -1 if none */
int32_t bitnet_vocab_eot(const bitnet_vocab *v); /* end of turn (e.g. <|eot_id|>), -1 if none */
int32_t bitnet_vocab_eom(const bitnet_vocab *v); /* end of message (<|eom_id|>), -1 if none */
bool bitnet_vocab_is_eog(const bitnet_vocab *v, int32_t token); /* end of generation: EOS, EOT or EOM */
const char *bitnet_vocab_model(const bitnet_vocab *v); /* tokenizer.ggml.model: "llama" or "gpt2" */
const char *bitnet_vocab_pre(const bitnet_vocab *v);   /* tokenizer.ggml.pre as stored ("default" if absent) */
const char *bitnet_vocab_chat_template(const bitnet_vocab *v); /* tokenizer.chat_template, NULL if none */
const char *bitnet_vocab_text(const bitnet_vocab *v, int32_t token); /* raw token string */
int bitnet_vocab_type(const bitnet_vocab *v, int32_t token); /* -1 when out of range */
int32_t bitnet_vocab_unk(const bitnet_vocab *v);                 /* -1 if none */
bool bitnet_vocab_add_bos(const bitnet_vocab *v);  /* BOS exists and tokenizer.ggml.add_bos_token is not false */
bool bitnet_vocab_add_eos(const bitnet_vocab *v);  /* EOS exists and tokenizer.ggml.add_eos_token is true */
float bitnet_vocab_score(const bitnet_vocab *v, int32_t token);
int32_t bitnet_vocab_find(const bitnet_vocab *v, const char *text, size_t len); /* exact text → id, -1 if none */

/* Tokenize len bytes of UTF-8 text (llama.cpp's SPM and BPE behaviour; the algorithms are described at
 * the top of tokenizer.c). *tokens is malloc'ed (caller frees; non-NULL even for 0 tokens), *n_tokens its length.
 * add_special ("add special tokens", llama.cpp's add_special): add what the vocabulary asks for — BOS
 * first when bitnet_vocab_add_bos() (tokenizer.ggml.add_bos_token, default per model/pre, see
 * bitnet_vocab_load) and EOS last when bitnet_vocab_add_eos() (tokenizer.ggml.add_eos_token = true, e.g.
 * the Qwen3 embedding model's <|endoftext|>, which last-token pooling reads); false adds neither.
 * parse_special: texts of CONTROL/UNKNOWN tokens in the
 * input become those tokens; USER_DEFINED token texts are always matched. Invalid UTF-8 is accepted:
 * SPM: each bad byte is a one-byte character (byte fallback); BPE: bad bytes are never inside a regex
 * match, each run of them is a piece of its own (byte-level tokens). Errors: BITNET_ERR_NOMEM;
 * BITNET_ERR_UNSUPPORTED when a byte has no token and there is no unknown token; BITNET_ERR_FORMAT when
 * the regex engine fails (PCRE2 error text in the message). Thread-safe for one vocabulary. */
bitnet_status bitnet_tokenize(const bitnet_vocab *v, const char *text, size_t len, bool add_special,
                              bool parse_special, int32_t **tokens, size_t *n_tokens, bitnet_error *err);

/* The pre-tokenizer pieces of len bytes of raw text (no special-token partition, no NFC step: offsets are
 * those of the text as given): *ends (malloc'ed, caller
 * frees; non-NULL even for 0 pieces) receives the end offset of each piece, *n_pieces their count; piece i
 * is [ends[i-1], ends[i]). "gpt2": the regex of tokenizer.ggml.pre (see the top of this file); "llama":
 * the whole text is one piece. Errors: BITNET_ERR_NOMEM, BITNET_ERR_FORMAT (regex engine failure). */
bitnet_status bitnet_pretokenize(const bitnet_vocab *v, const char *text, size_t len, size_t **ends, size_t *n_pieces,
                                 bitnet_error *err);

/* Unicode Normalization Form C (UAX #15) of len bytes of UTF-8 text: *out (malloc'ed, caller frees;
 * non-NULL even when empty) receives *out_len bytes. Bytes that are not valid UTF-8 are copied as they
 * are. Tables: Unicode version bitnet_unicode_nfc_version (src/text/gen_unicode_nfc.py). This is the
 * normalizer the "qwen2" pre-tokenizer applies to each raw fragment. Errors: BITNET_ERR_NOMEM,
 * BITNET_ERR_INVALID_ARG (NULL text with len > 0). */
bitnet_status bitnet_utf8_nfc(const char *text, size_t len, char **out, size_t *out_len, bitnet_error *err);

/* Bytes of one token as printed text, as llama.cpp prints tokens: NORMAL → its text with "▁" → space
 * ("llama") or its byte-level characters mapped back to bytes ("gpt2"; a character outside GPT-2's
 * alphabet is printed as its UTF-8); BYTE (<0xXX>) → that byte; USER_DEFINED → its text ("llama": with
 * "▁" → space, as Hugging Face's decoders print Gemma's added "▁▁"... tokens; llama.cpp keeps the "▁");
 * CONTROL and
 * UNKNOWN → nothing unless `special` (then the raw text, e.g. "<unk>"); UNUSED/undefined or an id out of
 * range → nothing.
 * Byte tokens print their raw byte even when three of them spell "▁" (a vocabulary without a "▁"
 * token); callers that stream output must cope with pieces that are partial UTF-8 sequences.
 * Writes up to buf_size bytes (buf may be NULL when buf_size is 0) and returns the full length
 * (may be > buf_size: call again with a bigger buffer). */
size_t bitnet_token_to_piece(const bitnet_vocab *v, int32_t token, bool special, char *buf, size_t buf_size);

/* Text of a whole token sequence: the pieces of bitnet_token_to_piece concatenated, except that for a
 * "llama" vocabulary "▁" spelled by byte tokens (a vocabulary without a "▁" token) prints as a space like
 * "▁" inside NORMAL tokens, and with add_space_prefix the one space the tokenizer puts in front of each
 * raw-text fragment (at the start and after a CONTROL, USER_DEFINED or UNKNOWN token — the partition's
 * tokens) is removed again, so that
 * detokenize(tokenize(s, add_bos = false, parse_special = true)) == s for valid UTF-8 s whose special
 * texts are tokens. Same buffer contract as bitnet_token_to_piece (returns the full length). */
size_t bitnet_detokenize(const bitnet_vocab *v, const int32_t *tokens, size_t n_tokens, bool special, char *buf,
                         size_t buf_size);

/* ---------------------------------------------------------------------------------------------
 * Streaming output that never splits a UTF-8 character (RFC 3629) across two writes.
 * Pieces of byte-level and byte-fallback tokens may be parts of a character (an emoji is often 2-4
 * tokens). The stream holds back the bytes of an incomplete but so far valid sequence (at most 3) and
 * releases them when the character completes. Bytes that cannot be part of a valid sequence (a stray
 * continuation byte, an overlong or surrogate lead, a sequence cut short by the next piece) are released
 * at once, as they are: the concatenation of everything released equals the concatenation of
 * everything pushed — only the moment of release changes. Flush releases what is held, as it is.
 * ------------------------------------------------------------------------------------------- */
typedef struct bitnet_utf8_stream {
    unsigned char held[4];
    uint32_t n_held; /* 0..3 */
} bitnet_utf8_stream;

void bitnet_utf8_stream_init(bitnet_utf8_stream *s);
/* Push n bytes; writes the releasable bytes to out (capacity >= n + 3) and returns their count. */
size_t bitnet_utf8_stream_push(bitnet_utf8_stream *s, const char *in, size_t n, char *out);
/* Release the held bytes (out capacity >= 3); returns their count; the stream is empty afterwards. */
size_t bitnet_utf8_stream_flush(bitnet_utf8_stream *s, char *out);

/* Token-level streaming detokenizer: bitnet_token_to_piece + bitnet_utf8_stream with its own buffer.
 * `special` as in bitnet_token_to_piece. */
typedef struct bitnet_detok bitnet_detok;
bitnet_detok *bitnet_detok_new(const bitnet_vocab *v, bool special); /* NULL on out of memory */
/* Bytes ready to print after `token` (possibly none): *len is set, the pointer stays valid until the next
 * call on d. NULL (with *len = 0) only on out of memory. */
const char *bitnet_detok_push(bitnet_detok *d, int32_t token, size_t *len);
const char *bitnet_detok_flush(bitnet_detok *d, size_t *len); /* the held rest, as it is */
void bitnet_detok_free(bitnet_detok *d); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
