/* hf_tokenizer.h — read a Hugging Face model folder's tokenizer files and write the GGUF
 * tokenizer.ggml.* keys (the tokenizer step of utils/convert-hf-to-gguf-bitnet.py and the
 * `bitnet-vocab` tool).
 *
 * Inputs (in MODEL_DIR):
 *   tokenizer.json          Hugging Face `tokenizers` file (https://huggingface.co/docs/tokenizers):
 *                           model.type "BPE" with a ByteLevel pre-tokenizer/decoder → GGUF model "gpt2"
 *                           (byte-level BPE, merges kept in rank order); model.type "BPE" with
 *                           byte_fallback and the SentencePiece "▁" normalizer (Llama 2 style) → GGUF
 *                           model "llama" (scores derived from the merge ranks, see hf_tokenizer.c).
 *   tokenizer.model         SentencePiece ModelProto (protobuf; field numbers from sentencepiece_model.proto)
 *                           → GGUF model "llama" with the file's pieces, scores and types. Used when the
 *                           folder has no byte-level tokenizer.json.
 *   tokenizer_config.json   optional: bos/eos/unk/pad token texts, add_bos_token, add_eos_token,
 *                           chat_template, added_tokens_decoder (special → CONTROL, else USER_DEFINED).
 *   special_tokens_map.json optional: bos/eos/unk/pad token texts when tokenizer_config.json lacks them.
 * JSON is parsed with json-c (Debian libjson-c-dev): it keeps string lengths (a token may not be a C
 * string), reports the byte offset of a syntax error and parses multi-megabyte files quickly.
 *
 * The pre-tokenizer name (tokenizer.ggml.pre) is identified from the text of tokenizer.json's
 * pre_tokenizer (its Split regex and step types), never from a hash of token ids:
 *   "llama-bpe"  Split with the Llama 3 regex + ByteLevel(use_regex=false) (Llama 3, BitNet-b1.58-2B-4T)
 *   "qwen2"      Split with the Qwen2 regex (Llama 3's with single digits) + ByteLevel(use_regex=false), with
 *                the NFC normalizer (Qwen2/2.5/3, BitNet-embedding-0.6B)
 *   "falcon3"    Punctuation/Digits(individual_digits) steps around ByteLevel (Falcon3, Falcon-E)
 *   "gpt2"       a lone ByteLevel(use_regex=true) (GPT-2's regex)
 *   "default"    SentencePiece-style vocabularies (what llama.cpp's converters write for model "llama")
 * Anything else is BITNET_ERR_UNSUPPORTED with the pre_tokenizer text in the message; so is a byte-level
 * file with a normalizer other than NFC-with-"qwen2" (the runtime would not apply it).
 * EOS: a TemplateProcessing post-processor whose single-sequence template ends with a special token appends
 * that token, so it becomes the EOS (add_eos) and tokenizer_config.json's eos_token, when different, the
 * end-of-turn token (as gguf-py's SpecialVocab reads such files).
 */
#ifndef BITNET_HF_TOKENIZER_H
#define BITNET_HF_TOKENIZER_H

#include "base/common.h"
#include "base/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything GGUF's tokenizer keys need. Arrays have n_tokens entries (merges: n_merges). */
typedef struct bitnet_hf_vocab {
    char model[8];          /* tokenizer.ggml.model: "gpt2" or "llama" */
    char pre[16];           /* tokenizer.ggml.pre: "llama-bpe", "qwen2", "falcon3", "gpt2" or "default" */
    int32_t n_tokens;
    char **tokens;          /* NUL-terminated UTF-8 texts as GGUF stores them (byte-level alphabet for
                             * "gpt2", "▁" for spaces and <0xXX> byte tokens for "llama") */
    float *scores;          /* "llama" only (NULL for "gpt2": no tokenizer.ggml.scores key) */
    int32_t *token_types;   /* enum bitnet_token_type (tokenizer.h): 1 normal .. 6 byte */
    int64_t n_merges;
    char **merges;          /* "gpt2" only: "left right" in rank order */
    int32_t bos_id, eos_id, unk_id, pad_id, eot_id, eom_id; /* -1 = none (key not written) */
    int add_bos, add_eos;   /* 1 / 0; -1 = not stated by the files (key not written) */
    int add_space_prefix;   /* "llama" only: 1 / 0; -1 = not stated */
    char *chat_template;    /* tokenizer.chat_template; NULL when the folder has none */
    char source[64];        /* which file the vocabulary came from ("tokenizer.json", "tokenizer.model") */
} bitnet_hf_vocab;

/* Read the tokenizer of the HF model folder `dir` (see the top of this file for the files and the
 * order they are looked for). *out is NULL on failure. Errors (the message names the file):
 *   BITNET_ERR_IO           no tokenizer.json and no tokenizer.model (the message lists the paths looked
 *                           for), or a file cannot be read;
 *   BITNET_ERR_FORMAT       malformed JSON (file and byte offset), a missing or ill-typed section
 *                           (e.g. "model", "model.vocab"), duplicate or out-of-range ids, a token
 *                           containing a NUL byte, a malformed protobuf (file and byte offset);
 *   BITNET_ERR_UNSUPPORTED  another tokenizer type (model.type "Unigram", "WordPiece", a SentencePiece
 *                           model_type other than BPE/unigram, ...) or an unknown pre-tokenizer — named;
 *   BITNET_ERR_NOMEM. */
bitnet_status bitnet_hf_vocab_load(const char *dir, bitnet_hf_vocab **out, bitnet_error *err);

/* Fit the vocabulary to n_vocab entries (config.json's vocab_size, the row count of the embedding) the way
 * llama.cpp's and bitnet.cpp's converters do: ids the tokenizer does not define become "[PAD<id>]" tokens
 * of type UNUSED (score -1000 for "llama"); when n_vocab < n_tokens the tokens from n_vocab on are dropped
 * if all of them are added tokens (CONTROL, USER_DEFINED or UNUSED: Gemma 3's tokenizer.json defines
 * <image_soft_token> = 262144 for an embedding of 262144 rows). n_vocab == n_tokens is a no-op.
 * BITNET_ERR_FORMAT (both numbers named) when a token to drop is a model token (NORMAL, BYTE, UNKNOWN) or a
 * BOS/EOS/unknown/padding/EOT/EOM id, or n_vocab <= 0. */
bitnet_status bitnet_hf_vocab_pad(bitnet_hf_vocab *v, int64_t n_vocab, bitnet_error *err);

/* The tokenizer adjustments bitnet.cpp's converter for the BitNet embedding models
 * (utils/convert-bitnet-embedding-to-gguf.py) makes for an architecture (general.architecture), to call
 * after bitnet_hf_vocab_load:
 *   "qwen3" (byte-level): EOS = <|endoftext|> (151643 in Qwen's vocabulary: the token the PyTorch
 *            tokenizer appends as the sentence end, not tokenizer_config.json's <|im_end|>, which becomes
 *            the end-of-turn token when none is set) and add_eos = 1, so that bitnet_tokenize with
 *            add_special appends it and last-token pooling reads it;
 *   "gemma3" (SentencePiece-style): add_space_prefix = 0 and the score -1000 for added tokens (CONTROL,
 *            USER_DEFINED, UNKNOWN), so that with the scores of the merge ranks (see hf_tokenizer.c: -(rank
 *            of the first merge producing the token), 0 for single characters and bytes) tokenizer.ggml.scores
 *            is what bitnet.cpp writes. (One deliberate difference: a multi-character token no merge
 *            produces gets -(n_merges + id), never preferred, where bitnet.cpp writes 0, the most preferred;
 *            Gemma 3's vocabulary has no such token. Token types also keep this importer's rule: an added
 *            token is CONTROL when special, USER_DEFINED otherwise — matched in any text, as Hugging Face
 *            matches added tokens — where bitnet.cpp types "<...>" / "[...]" texts CONTROL.)
 * Other architectures and NULL: no change. Errors: BITNET_ERR_FORMAT when a qwen3 vocabulary has no
 * <|endoftext|>. */
bitnet_status bitnet_hf_vocab_apply_arch(bitnet_hf_vocab *v, const char *arch, bitnet_error *err);

/* Set the tokenizer keys on a GGUF writer (before bitnet_gguf_write_begin), named as llama.cpp's and
 * bitnet.cpp's converters name them: tokenizer.ggml.model, .pre, .tokens, .scores ("llama"),
 * .token_type, .merges ("gpt2"), .bos_token_id / .eos_token_id / .unknown_token_id / .padding_token_id /
 * .eot_token_id / .eom_token_id (uint32, only when >= 0), .add_bos_token / .add_eos_token (bool, only when
 * stated), .add_space_prefix ("llama", when stated), tokenizer.chat_template (when present).
 * Errors: BITNET_ERR_INVALID_ARG for an inconsistent struct (named field), BITNET_ERR_NOMEM. */
bitnet_status bitnet_hf_vocab_write_gguf(const bitnet_hf_vocab *v, bitnet_gguf_writer *w, bitnet_error *err);

/* A vocabulary-only GGUF at `path` (through path.tmp): general.architecture = arch, general.name =
 * name (may be NULL), the tokenizer keys above, no tensors. For tests and tools (bitnet-vocab). */
bitnet_status bitnet_hf_vocab_write_vocab_only(const bitnet_hf_vocab *v, const char *arch, const char *name,
                                               const char *path, bitnet_error *err);

void bitnet_hf_vocab_free(bitnet_hf_vocab *v); /* NULL is fine */

#ifdef __cplusplus
}
#endif

#endif
