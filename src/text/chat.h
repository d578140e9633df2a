/* chat.h — chat templates of the model families this runtime knows, rendered in C (no Jinja engine):
 * recognising a family from the GGUF key tokenizer.chat_template, rendering a conversation, and
 * rendering only "the increment" a multi-turn chat must evaluate after what its KV cache already holds.
 *
 * Families (the exact strings each renders are in chat.c's comment, with their sources):
 *   bitnet   BitNet-b1.58-2B-4T: "System: …<|eot_id|>User: …<|eot_id|>Assistant: "
 *   llama3   Llama 3 (Llama3-8B-1.58-100B-tokens and other Llama-3-vocabulary models):
 *            "<|start_header_id|>user<|end_header_id|>\n\n…<|eot_id|>"
 *   falcon3  Falcon3 Instruct (incl. the 1.58-bit ones): "<|system|>\n…\n<|user|>\n…\n<|assistant|>\n"
 *
 * BOS is never part of the rendered text: tokenize the first text of a conversation with
 * add_bos = true (the tokenizer adds BOS when the vocabulary asks for it), later increments with
 * add_bos = false, and always with parse_special = true so the markers become their control tokens.
 * As in llama.cpp and bitnet.cpp, special-token text inside a message is then parsed as that token. */
#ifndef BITNET_CHAT_H
#define BITNET_CHAT_H

#include "base/common.h"
#include "base/gguf.h"
#include "text/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_chat_family {
    BITNET_CHAT_UNKNOWN = 0,
    BITNET_CHAT_BITNET = 1,
    BITNET_CHAT_LLAMA3 = 2,
    BITNET_CHAT_FALCON3 = 3,
} bitnet_chat_family;

/* One message. role is "system", "user" or "assistant" (anything else is refused by the renderers);
 * content is NUL-terminated UTF-8. */
typedef struct bitnet_chat_message {
    const char *role;
    const char *content;
} bitnet_chat_message;

/* What the renderers need: the family and the text of the vocabulary's EOS token (Falcon3's template
 * writes eos_token after each assistant message; NULL or "" renders nothing, as Jinja renders an
 * undefined variable). The string is not copied: it must outlive the template. */
typedef struct bitnet_chat_template {
    bitnet_chat_family family;
    const char *eos_text;
} bitnet_chat_template;

/* "bitnet", "llama3", "falcon3"; "unknown" for anything else. */
const char *bitnet_chat_family_name(bitnet_chat_family f);
/* The family of an exact name above (what --chat-template takes); BITNET_CHAT_UNKNOWN otherwise. */
bitnet_chat_family bitnet_chat_family_parse(const char *name);
/* "bitnet, llama3, falcon3": the names for messages. */
const char *bitnet_chat_known_names(void);

/* The family of a tokenizer.chat_template text (len bytes, need not be NUL-terminated), recognised by
 * distinctive substrings (chat.c lists them and where they come from); BITNET_CHAT_UNKNOWN when none
 * matches. O(len). */
bitnet_chat_family bitnet_chat_detect(const char *tmpl, size_t len);

/* The family of a tokenizer.chat_template text, with errors for the user: tmpl NULL means the file has
 * no such key. `where` names the file in messages. BITNET_ERR_UNSUPPORTED when the key is absent or the
 * text is none of the known families (the message names the file and the key, quotes the start of the
 * text and lists the known names); *out is then BITNET_CHAT_UNKNOWN. */
bitnet_status bitnet_chat_family_of(const char *tmpl, size_t len, const char *where, bitnet_chat_family *out,
                                    bitnet_error *err);

/* Reads tokenizer.chat_template (GGUF string) of g and detects its family (bitnet_chat_family_of).
 * Errors: those of bitnet_chat_family_of; BITNET_ERR_FORMAT when the key is not a string. */
bitnet_status bitnet_chat_family_from_gguf(const bitnet_gguf *g, bitnet_chat_family *out, bitnet_error *err);

/* t = {f, text of v's EOS token (NULL when v is NULL or has no EOS)}. */
void bitnet_chat_template_init(bitnet_chat_template *t, bitnet_chat_family f, const bitnet_vocab *v);

/* Render msgs[0..n) as the family's template does (whole conversation); with add_generation_prompt
 * the assistant header the model continues from is appended. *out is malloc'ed, NUL-terminated
 * (caller frees), *out_len its length (out_len may be NULL).
 * Errors: BITNET_ERR_INVALID_ARG for an unknown family, a NULL role/content or a role other than
 * system/user/assistant (the message names the role and the message index); BITNET_ERR_NOMEM. */
bitnet_status bitnet_chat_format(const bitnet_chat_template *t, const bitnet_chat_message *msgs, size_t n,
                                 bool add_generation_prompt, char **out, size_t *out_len, bitnet_error *err);

/* The text a chat evaluates when messages n_past..n-1 arrive, its cache holding the first n_past:
 *   format(msgs, n_past, false) + increment == format(msgs, n, add_generation_prompt).
 * reply_open: msgs[n_past-1] is an assistant reply the model generated after the generation prompt,
 * so its header and content (as generated, untrimmed) are in the cache but its closing text is not;
 * the increment then starts with that closing text (e.g. "<|eot_id|>", or Falcon3's EOS). n_past may
 * be 0 (the increment is then the whole conversation). Output as bitnet_chat_format.
 * Errors: those of bitnet_chat_format; BITNET_ERR_INVALID_ARG when n_past > n, or reply_open and
 * msgs[n_past-1] is not an assistant message (or n_past is 0). */
bitnet_status bitnet_chat_format_increment(const bitnet_chat_template *t, const bitnet_chat_message *msgs,
                                           size_t n_past, size_t n, bool add_generation_prompt, bool reply_open,
                                           char **out, size_t *out_len, bitnet_error *err);

/* The first marker of the family's template that is not a single token of v (the markers would then
 * be tokenized as plain text, which a model of that family was not trained on), or NULL when every
 * marker is a token. Markers: bitnet "<|eot_id|>"; llama3 "<|start_header_id|>", "<|end_header_id|>",
 * "<|eot_id|>"; falcon3 none (its role tags are plain text in some vocabularies). */
const char *bitnet_chat_missing_marker(const bitnet_chat_template *t, const bitnet_vocab *v);

#ifdef __cplusplus
}
#endif

#endif
