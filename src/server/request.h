/* request.h — the JSON request bodies of llama-server (OpenAI's chat and completions API, llama.cpp's
 * /tokenize and /detokenize), parsed and checked before anything is queued.
 *
 * Bodies (OpenAI API reference, "Create chat completion" / "Create completion"; llama.cpp's
 * tools/server/README.md for /tokenize and /detokenize):
 *   chat:        {"messages": [{"role": "system"|"developer"|"user"|"assistant", "content": STRING or
 *                 [{"type": "text", "text": STRING}, ...]}, ...], "model", "max_tokens" (or
 *                 "max_completion_tokens"), "temperature", "top_p", "top_k", "seed", "stop", "stream",
 *                 "stream_options": {"include_usage"}, "n", and llama.cpp's "ignore_eos"}
 *   completion:  {"prompt": STRING, [STRING] or [token ids], and the same sampling fields}
 *   tokenize:    {"content": STRING, "add_special": BOOL (default false)}
 *   detokenize:  {"tokens": [ids]}
 *   embeddings:  {"input": STRING, [STRING], [token ids] (one text) or [[token ids], ...], "model",
 *                 "encoding_format": "float" (default) | "base64", "dimensions" (must be the model's n_embd),
 *                 "user" (ignored)} (OpenAI API reference, "Create embeddings")
 * Fields a client library sends that do not change the output (user, logit_bias {}, presence_penalty 0,
 * ...) are ignored. Requests that ask for what this server does not do (n > 1, logprobs, tools,
 * audio) are refused rather than answered differently.
 *
 * Every refusal is an OpenAI error object's parts: an HTTP status (400, or 404 for an unknown model),
 * a type ("invalid_request_error"), the offending parameter and a message naming the field, its value
 * and the accepted range. The parser never keeps a pointer into the body. */
#ifndef BITNET_SERVER_REQUEST_H
#define BITNET_SERVER_REQUEST_H

#include <stdarg.h>

#include "base/common.h"
#include "text/chat.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_srv_kind {
    BITNET_SRV_CHAT = 0,       /* POST /v1/chat/completions */
    BITNET_SRV_COMPLETION = 1, /* POST /v1/completions */
    BITNET_SRV_TOKENIZE = 2,   /* POST /tokenize */
    BITNET_SRV_DETOKENIZE = 3, /* POST /detokenize */
    BITNET_SRV_EMBEDDINGS = 4, /* POST /v1/embeddings */
} bitnet_srv_kind;

/* What the parser checks values against. */
typedef struct bitnet_srv_limits {
    const char *model_id;   /* the one model this server serves: "model" must be absent or equal it */
    int32_t n_vocab;        /* token ids in [0, n_vocab) */
    int32_t max_tokens_cap; /* largest "max_tokens" accepted (>= 1) */
    int32_t max_stop;       /* most stop strings (>= 1) */
    int32_t max_stop_len;   /* bytes of one stop string (>= 1) */
} bitnet_srv_limits;

/* What an embeddings body is checked against besides bitnet_srv_limits (model_id, n_vocab). */
typedef struct bitnet_srv_embd_limits {
    int32_t n_embd;     /* "dimensions", when given, must equal it */
    int32_t max_inputs; /* the most texts "input" may hold (< 1: 1) */
} bitnet_srv_embd_limits;

/* A parsed request; strings are NUL-terminated copies (may contain no NUL: one inside a JSON string is
 * refused). Fields a kind does not use are zero. */
typedef struct bitnet_srv_request {
    bitnet_srv_kind kind;
    bitnet_chat_message *messages; /* chat: n_messages >= 1, roles "system", "user" or "assistant" */
    size_t n_messages;
    char *prompt;                  /* completion (text prompt) and tokenize: the text */
    size_t prompt_len;
    int32_t *tokens;               /* detokenize, and completion given token ids: the ids */
    size_t n_tokens;
    int32_t max_tokens;            /* -1: not given */
    bool has_temperature, has_top_p, has_top_k, has_seed;
    float temperature;             /* [0, 2] */
    float top_p;                   /* [0, 1] */
    int32_t top_k;                 /* >= 0 */
    uint64_t seed;                 /* any integer, taken modulo 2^64 */
    char **stop;                   /* n_stop non-empty strings */
    size_t n_stop;
    bool stream;
    bool include_usage;            /* stream_options.include_usage */
    bool add_special;              /* tokenize */
    bool ignore_eos;               /* llama.cpp's "ignore_eos": generate through end-of-generation tokens */
    /* embeddings: n_inputs >= 1 texts, either all strings (inputs[i]: input_lens[i] bytes, not empty) or
     * all token ids (input_ids[i]: input_n_ids[i] >= 1 ids in [0, n_vocab)); the other pair is NULL */
    char **inputs;
    size_t *input_lens;
    int32_t **input_ids;
    size_t *input_n_ids;
    size_t n_inputs;
    bool base64;                   /* "encoding_format": "base64" */
} bitnet_srv_request;

/* An OpenAI-style error: {"error": {"message", "type", "param", "code"}} with HTTP status http_status. */
typedef struct bitnet_srv_error {
    int http_status;
    char type[40];     /* "invalid_request_error", ... */
    char param[48];    /* the field, "" for the body as a whole */
    char code[40];     /* "", "model_not_found", "invalid_api_key", "context_length_exceeded", ... */
    char message[640];
} bitnet_srv_error;

/* Sets e to an error (printf-style message) and returns BITNET_ERR_INVALID_ARG. */
#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
bitnet_status bitnet_srv_fail(bitnet_srv_error *e, int http_status, const char *type, const char *param,
                              const char *code, const char *fmt, ...);

/* bitnet_srv_fail with a va_list. */
bitnet_status bitnet_srv_vfail(bitnet_srv_error *e, int http_status, const char *type, const char *param,
                               const char *code, const char *fmt, va_list ap);

/* Parse and check a request body of len bytes (not NUL-terminated) of kind `kind` against lim.
 * *out is zeroed first and owns its strings (bitnet_srv_request_free, also after a failure).
 * Errors (BITNET_ERR_INVALID_ARG, e set): a body that is not one JSON object or not valid UTF-8 (400,
 * param ""), a field of the wrong type or out of range (400, param = the field, message with the value
 * and the range), an unknown model (404, code "model_not_found"), a feature this server does not
 * have (400). BITNET_ERR_NOMEM (e set, 500). */
bitnet_status bitnet_srv_parse(bitnet_srv_kind kind, const char *body, size_t len, const bitnet_srv_limits *lim,
                               bitnet_srv_request *out, bitnet_srv_error *e);

/* bitnet_srv_parse of an embeddings body (kind BITNET_SRV_EMBEDDINGS, which bitnet_srv_parse refuses with
 * 500: it lacks these limits), also checked against el: more than max_inputs texts and "dimensions" other
 * than n_embd are refused (400). */
bitnet_status bitnet_srv_parse_embeddings(const char *body, size_t len, const bitnet_srv_limits *lim,
                                          const bitnet_srv_embd_limits *el, bitnet_srv_request *out,
                                          bitnet_srv_error *e);

/* Frees what a request owns and zeroes it; NULL and a zeroed request are fine. */
void bitnet_srv_request_free(bitnet_srv_request *r);

/* Whether n bytes at s are valid UTF-8 (RFC 3629: no overlong forms, no surrogates, <= U+10FFFF). */
bool bitnet_srv_utf8_valid(const char *s, size_t n);

/* n bytes of text as valid UTF-8 (for JSON responses): every byte that does not belong to a well-formed
 * character (RFC 3629) becomes U+FFFD. malloc'ed, NUL-terminated, length in *out_len (may be NULL);
 * NULL on out of memory. */
char *bitnet_srv_utf8_clean(const char *s, size_t n, size_t *out_len);

#ifdef __cplusplus
}
#endif

#endif
