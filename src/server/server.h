/* server.h — llama-server's HTTP side: OpenAI-compatible endpoints on libmicrohttpd (one thread per
 * connection), requests parsed by request.h, generation by the continuous-batching engine (engine.h).
 *
 * Endpoints (OpenAI API reference; llama.cpp's tools/server/README.md for the last three):
 *   POST /v1/chat/completions   chat (the model's chat template, chat.h), stream or not
 *   POST /v1/completions        text completion, stream or not
 *   GET  /v1/models             the one model ({"object": "list", "data": [{"id": ...}]})
 *   GET  /health                {"status": "ok", "slots_processing": N, "requests_waiting": N} (no API key)
 *   POST /tokenize              {"content", "add_special"} -> {"tokens": [...]}
 *   POST /detokenize            {"tokens": [...]} -> {"content": "..."}
 *   POST /v1/embeddings         OpenAI's embeddings (request.h): one L2-normalized vector per input text,
 *                               pooled as config.pooling says, as floats or base64 float32 (little-endian)
 *   GET  /metrics               Prometheus text (metrics.h), when config.metrics; else 404
 * The paths without "/v1" are accepted too, as llama.cpp's server does, except /embeddings: llama.cpp's
 * /embedding and /embeddings answer in a format of their own, which this server does not have (404).
 *
 * Modes: an embedding server (config.embeddings: llama-server --embeddings, or a model whose GGUF has
 * <arch>.pooling_type) answers /v1/embeddings and refuses /v1/chat/completions and /v1/completions with
 * 400 ("this model serves embeddings only: ..."); a generation server refuses /v1/embeddings with 400
 * ("this server generates text; start it with --embeddings, or load an embedding model"). /v1/models,
 * /health, /tokenize and /detokenize answer in both. Pooling "none" (one vector per token) is refused on
 * /v1/embeddings with 400, as llama.cpp's server does for OpenAI's endpoint.
 * Bounds of one embeddings request: max_embd_inputs texts, max_embd_tokens tokens in all (after
 * tokenization: BOS/EOS included), each text at most n_ctx_slot tokens (code context_length_exceeded);
 * a text must not be empty (OpenAI refuses "" too). Beyond them: 400 naming "input".
 *
 * Streams are server-sent events (text/event-stream): one "data: {chunk}\n\n" per piece of text in
 * OpenAI's chunk format (the first carries the assistant role), one with finish_reason, then with
 * stream_options.include_usage one with "usage" and empty choices, then "data: [DONE]\n\n".
 * Errors are {"error": {"message", "type", "param", "code"}} with a 4xx/5xx status: 400 bad body or
 * field, 401 missing or wrong API key, 404 unknown path or model, 405 wrong method, 413 body larger than
 * the limit, 429 every slot busy and the queue full (with Retry-After), 503 shutting down.
 * A client that disconnects stops its generation (its slot is freed at the next step); so does one that
 * stops reading for config.timeout_s. Hostile clients (guard.h): at most max_connections_per_address
 * connections per client address (more are closed at accept, without blocking the accepting thread); a
 * request must arrive whole within request_timeout_s (else 408 and close); a kept-alive connection may
 * idle keepalive_timeout_s.
 * Log (config.log): "<id> <path>: prompt P tokens, G generated, finish F, T ms" per generation request,
 * F being stop, length, error or "client gone"; "<id> /v1/embeddings: N texts, P tokens, finish F, T ms" per
 * embeddings request. */
#ifndef BITNET_SERVER_SERVER_H
#define BITNET_SERVER_SERVER_H

#include <stdio.h>

#include "base/common.h"
#include "model/model.h"
#include "server/engine.h"
#include "text/chat.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_server_config {
    const char *host;         /* address to bind: a numeric IPv4/IPv6 address or a name (getaddrinfo) */
    int port;                 /* 0: any free port (bitnet_server_port tells which) */
    const char *api_key;      /* NULL: no key; else every endpoint but /health needs "Bearer <key>" */
    const char *model_id;     /* the id /v1/models reports and requests may name */
    size_t max_body;          /* request body limit in bytes */
    int32_t n_ctx_slot;       /* positions per slot (the longest prompt plus its reply) */
    int32_t max_tokens_cap;   /* the largest max_tokens a request may ask for */
    int32_t n_predict;        /* max_tokens when a request gives none; -1: until the slot's context is full */
    float temp, top_p;        /* sampling defaults when a request gives none */
    int32_t top_k;
    int64_t seed;             /* seed when a request gives none; -1: a new one per request */
    bitnet_chat_template tmpl;/* family BITNET_CHAT_UNKNOWN: chat requests are refused (400) with a message */
    const char *system_prompt;/* NULL, or the system message of chat requests that do not start with one */
    unsigned max_connections; /* simultaneous connections */
    FILE *log;                /* one line per generation request when it ends (NULL: none) */
    bool embeddings;          /* an embedding server (the engine too must be one: engine.h) */
    bitnet_pooling pooling;   /* embedding server: MEAN, CLS or LAST; NONE: /v1/embeddings answers 400 */
    int32_t max_embd_inputs;  /* texts in one embeddings request (< 1: 1) */
    int32_t max_embd_tokens;  /* tokens of all texts of one embeddings request (< 1: 1) */
    /* hostile clients (guard.h); 0 takes the default named (shutdown_timeout_s: < 0) */
    double request_timeout_s;   /* a whole request (line, headers, body) must arrive within this, else 408
                                   and close (BITNET_SERVER_REQUEST_TIMEOUT_S) */
    double keepalive_timeout_s; /* an idle kept-alive connection is closed after this
                                   (BITNET_SERVER_KEEPALIVE_TIMEOUT_S) */
    double timeout_s;           /* write timeout: a stream whose client acknowledges no byte for this, or
                                   an answer that moves no byte for it, is ended (a stream's generation is
                                   cancelled and its slot freed); a stream waiting this / 2 for text sends
                                   the SSE comment ": keep-alive" so that a healthy one is not; whole
                                   seconds, at least 1 (BITNET_SERVER_TIMEOUT_S) */
    unsigned max_connections_per_address; /* connections open at once from one client address; more are
                                   closed at accept (0: max_connections / 4, at least 1) */
    double shutdown_timeout_s;  /* bitnet_server_stop: requests still running this long after the stop
                                   began end with a 503 error (< 0: BITNET_SERVER_SHUTDOWN_TIMEOUT_S; 0: at
                                   once) */
    bool metrics;               /* GET /metrics answers (Prometheus text, metrics.h); else 404 */
} bitnet_server_config;

enum {
    BITNET_SERVER_REQUEST_TIMEOUT_S = 30,
    BITNET_SERVER_KEEPALIVE_TIMEOUT_S = 15,
    BITNET_SERVER_TIMEOUT_S = 30,
    BITNET_SERVER_SHUTDOWN_TIMEOUT_S = 20,
};

typedef struct bitnet_server bitnet_server;

/* Starts listening (the engine and the model must outlive the server). Errors: the address cannot be
 * resolved or bound (BITNET_ERR_IO, naming host and port), BITNET_ERR_NOMEM. */
bitnet_status bitnet_server_start(bitnet_model *m, bitnet_engine *e, const bitnet_server_config *cfg,
                                  bitnet_server **out, bitnet_error *err);

/* The port the server listens on. */
int bitnet_server_port(const bitnet_server *s);

/* Graceful stop: generation requests received from now on are answered 503 (the others still served);
 * those already received run to their end and are answered, for at most cfg.shutdown_timeout_s: the ones
 * still running or waiting then end with a 503 error (a stream: an error event, then "data: [DONE]").
 * Waits until every response is sent, at most grace_ms more; then closes every connection and frees the
 * server. */
void bitnet_server_stop(bitnet_server *s, int grace_ms);

#ifdef __cplusplus
}
#endif

#endif
