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
 * The paths without "/v1" are accepted too, as llama.cpp's server does.
 *
 * Streams are server-sent events (text/event-stream): one "data: {chunk}\n\n" per piece of text in
 * OpenAI's chunk format (the first carries the assistant role), one with finish_reason, then with
 * stream_options.include_usage one with "usage" and empty choices, then "data: [DONE]\n\n".
 * Errors are {"error": {"message", "type", "param", "code"}} with a 4xx/5xx status: 400 bad body or
 * field, 401 missing or wrong API key, 404 unknown path or model, 405 wrong method, 413 body larger than
 * the limit, 429 every slot busy and the queue full (with Retry-After), 503 shutting down.
 * A client that disconnects stops its generation (its slot is freed at the next step).
 * Log (config.log): "<id> <path>: prompt P tokens, G generated, finish F, T ms" per generation request,
 * F being stop, length, error or "client gone". */
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
} bitnet_server_config;

typedef struct bitnet_server bitnet_server;

/* Starts listening (the engine and the model must outlive the server). Errors: the address cannot be
 * resolved or bound (BITNET_ERR_IO, naming host and port), BITNET_ERR_NOMEM. */
bitnet_status bitnet_server_start(bitnet_model *m, bitnet_engine *e, const bitnet_server_config *cfg,
                                  bitnet_server **out, bitnet_error *err);

/* The port the server listens on. */
int bitnet_server_port(const bitnet_server *s);

/* Graceful stop: generation requests received from now on are answered 503 (the others still served);
 * those already received run to their end and are answered; waits until every response is sent, at most
 * grace_ms after the engine has drained; then closes everything and frees the server. */
void bitnet_server_stop(bitnet_server *s, int grace_ms);

#ifdef __cplusplus
}
#endif

#endif
