/* http.c — llama-server's endpoints on libmicrohttpd (server.h): routing, the API key, the body limit,
 * JSON responses with json-c, server-sent event streams, and noticing clients that went away.
 *
 * Threads: libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION), so a handler
 * may block: a non-streamed request waits for its job in the access handler, a stream waits in its
 * content reader. Both wake at least every POLL_MS to check whether the client closed its socket. */
#include "server/server.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/guard.h"
#include "server/metrics.h"
#include "server/request.h"
#include "text/tokenizer.h"

enum { POLL_MS = 100 };

struct bitnet_server {
    bitnet_model *m;
    const bitnet_vocab *v;
    bitnet_engine *e;
    bitnet_server_config cfg;
    char *model_id, *api_key, *system_prompt;
    struct MHD_Daemon *d;
    int port;
    atomic_int active;       /* requests between their first byte and their completion */
    atomic_bool stopping;
    atomic_uint_fast64_t next_id;   /* response ids */
    atomic_uint_fast64_t seed_count; /* requests given a fresh seed */
    time_t started;
    bitnet_guard *guard;     /* per-address limit, request and keep-alive deadlines (guard.h) */
    bitnet_metrics *metrics; /* GET /metrics (metrics.h); kept whether or not the endpoint is on */
};

typedef enum route {
    R_NONE = 0, R_CHAT, R_COMPLETION, R_MODELS, R_HEALTH, R_TOKENIZE, R_DETOKENIZE, R_EMBEDDINGS, R_METRICS
} route;

/* One request: its body as it arrives, and what /metrics learns of it. */
typedef struct req_state {
    route r;
    char *body;
    size_t len, cap;
    bool too_large; /* the body passed the limit: what follows is dropped */
    size_t dropped;
    bool answered;  /* the request has been handled (a response queued, or none will be) */
    int status;     /* the status of the response queued (0: none) */
    bool queued;    /* a response was queued: a timeout from here on is a write timeout */
    bool first_text;/* a generation request has had its first text (its time to first token taken) */
    struct timespec t0; /* the headers arrived */
} req_state;

/* The request whose handler runs on this thread: libmicrohttpd calls a connection's handlers on the
 * connection's own thread (MHD_USE_THREAD_PER_CONNECTION), so responses queued here are its. */
static _Thread_local req_state *tl_rs;

static bitnet_endpoint endpoint_of(route r) {
    switch (r) {
    case R_CHAT: return BITNET_EP_CHAT;
    case R_COMPLETION: return BITNET_EP_COMPLETION;
    case R_EMBEDDINGS: return BITNET_EP_EMBEDDINGS;
    case R_MODELS: return BITNET_EP_MODELS;
    case R_HEALTH: return BITNET_EP_HEALTH;
    case R_TOKENIZE: return BITNET_EP_TOKENIZE;
    case R_DETOKENIZE: return BITNET_EP_DETOKENIZE;
    case R_METRICS: return BITNET_EP_METRICS;
    default: return BITNET_EP_OTHER;
    }
}

/* Notes on this thread's request that a response with `status` was queued. */
static void note_queued(int status) {
    if (!tl_rs) return;
    tl_rs->status = status;
    tl_rs->queued = true;
}

/* A streamed response: the job and the bytes of events not yet handed to libmicrohttpd. */
typedef struct stream_state {
    bitnet_server *s;
    bitnet_job *job;
    bitnet_srv_kind kind;
    int fd;
    char id[48];
    time_t created;
    bool include_usage;
    struct timespec t0;
    bool role_sent, ended, done;
    bool first_text;         /* the first text has been sent (its time to first token taken) */
    uint64_t acked;          /* bytes the client had acknowledged at the last progress */
    struct timespec last_out;/* bytes were last handed to libmicrohttpd */
    struct timespec progress;/* the client last took bytes (or had none waiting) */
    struct timespec t_head;  /* the request's headers arrived */
    size_t have; /* bytes of the job's text already sent */
    char *buf;
    size_t len, off;
} stream_state;

/* ---- small helpers -------------------------------------------------------------------------- */

/* A JSON string of n bytes of generated text (cleaned to valid UTF-8). */
static json_object *text_json(const char *s, size_t n) {
    size_t len;
    char *c = bitnet_srv_utf8_clean(s ? s : "", s ? n : 0, &len);
    if (!c) return NULL;
    json_object *o = json_object_new_string_len(c, (int)len);
    free(c);
    return o;
}

static int client_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Whether the peer has closed the connection (a 0-byte read) or it failed. */
static bool client_gone(int fd) {
    if (fd < 0) return false;
    char ch;
    const ssize_t r = recv(fd, &ch, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_object *o) {
    const char *txt = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                        : "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(txt), (void *)txt, MHD_RESPMEM_MUST_COPY);
    json_object_put(o);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (status == 429) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    const enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    if (ret == MHD_YES) note_queued((int)status);
    return ret;
}

static json_object *error_json(const bitnet_srv_error *e) {
    json_object *o = json_object_new_object(), *in = json_object_new_object();
    json_object_object_add(in, "message", text_json(e->message, strlen(e->message)));
    json_object_object_add(in, "type", json_object_new_string(e->type));
    json_object_object_add(in, "param", e->param[0] ? json_object_new_string(e->param) : NULL);
    json_object_object_add(in, "code", e->code[0] ? json_object_new_string(e->code) : NULL);
    json_object_object_add(o, "error", in);
    return o;
}

static enum MHD_Result send_error(struct MHD_Connection *c, const bitnet_srv_error *e) {
    return send_json(c, (unsigned)e->http_status, error_json(e));
}

#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static enum MHD_Result fail(struct MHD_Connection *c, int status, const char *type, const char *param, const char *code,
                            const char *fmt, ...) {
    bitnet_srv_error e;
    va_list ap;
    va_start(ap, fmt);
    bitnet_srv_vfail(&e, status, type, param, code, fmt, ap);
    va_end(ap);
    return send_error(c, &e);
}

/* Constant-time comparison of the Authorization header with "Bearer <key>". */
static bool key_ok(const bitnet_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    const size_t n = strlen(h), k = strlen(s->api_key);
    unsigned char diff = (unsigned char)(n != k);
    for (size_t i = 0; i < k; i++) diff |= (unsigned char)(s->api_key[i] ^ (i < n ? h[i] : 0));
    return diff == 0;
}

static route route_of(const char *url, const char *method, bool *wrong_method) {
    static const struct {
        const char *path;
        route r;
        bool post;
    } k[] = {
        {"/v1/chat/completions", R_CHAT, true}, {"/chat/completions", R_CHAT, true},
        {"/v1/completions", R_COMPLETION, true}, {"/completions", R_COMPLETION, true},
        {"/v1/models", R_MODELS, false},         {"/models", R_MODELS, false},
        {"/health", R_HEALTH, false},            {"/v1/health", R_HEALTH, false},
        {"/tokenize", R_TOKENIZE, true},         {"/detokenize", R_DETOKENIZE, true},
        {"/v1/embeddings", R_EMBEDDINGS, true},  {"/metrics", R_METRICS, false},
    };
    *wrong_method = false;
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (strcmp(url, k[i].path) != 0) continue;
        const bool is_post = strcmp(method, "POST") == 0;
        const bool is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
        if ((k[i].post && !is_post) || (!k[i].post && !is_get)) {
            *wrong_method = true;
            return R_NONE;
        }
        return k[i].r;
    }
    return R_NONE;
}

static double ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* The log line of a generation request that ended (client_gone: it ended because the client left). */
static void log_end(const bitnet_server *s, const char *id, bitnet_srv_kind kind, const bitnet_job_update *u,
                    bool client_left, const struct timespec *t0) {
    if (!s->cfg.log) return;
    fprintf(s->cfg.log, "llama-server: %s %s: prompt %d tokens, %d generated, finish %s, %.0f ms\n", id,
            kind == BITNET_SRV_CHAT ? "/v1/chat/completions" : "/v1/completions", (int)u->n_prompt, (int)u->n_gen,
            client_left ? "client gone" : bitnet_finish_name(u->finish) ? bitnet_finish_name(u->finish) : "?",
            ms_since(t0));
    fflush(s->cfg.log);
}

/* ---- responses ------------------------------------------------------------------------------ */

static json_object *usage_json(int32_t n_prompt, int32_t n_gen) {
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int(n_prompt));
    json_object_object_add(u, "completion_tokens", json_object_new_int(n_gen));
    json_object_object_add(u, "total_tokens", json_object_new_int(n_prompt + n_gen));
    return u;
}

/* The envelope every completion object has: id, object, created, model, choices. */
static json_object *envelope(const bitnet_server *s, const char *id, const char *object, time_t created,
                             json_object **choices) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(id));
    json_object_object_add(o, "object", json_object_new_string(object));
    json_object_object_add(o, "created", json_object_new_int64((int64_t)created));
    json_object_object_add(o, "model", json_object_new_string(s->model_id));
    json_object_object_add(o, "system_fingerprint", json_object_new_string("bitnet-c11"));
    *choices = json_object_new_array();
    json_object_object_add(o, "choices", *choices);
    return o;
}

/* One streamed chunk: text (may be NULL), finish (NULL: still running), or the usage chunk. */
static json_object *chunk_json(const stream_state *st, const char *text, size_t n, const char *finish, bool role,
                               const bitnet_job_update *usage) {
    json_object *choices;
    const bool chat = st->kind == BITNET_SRV_CHAT;
    json_object *o = envelope(st->s, st->id, chat ? "chat.completion.chunk" : "text_completion", st->created, &choices);
    if (usage) {
        json_object_object_add(o, "usage", usage_json(usage->n_prompt, usage->n_gen));
        return o;
    }
    json_object *ch = json_object_new_object();
    json_object_object_add(ch, "index", json_object_new_int(0));
    if (chat) {
        json_object *delta = json_object_new_object();
        if (role) json_object_object_add(delta, "role", json_object_new_string("assistant"));
        if (text || role) json_object_object_add(delta, "content", text_json(text, n));
        json_object_object_add(ch, "delta", delta);
    } else {
        json_object_object_add(ch, "text", text_json(text, n));
        json_object_object_add(ch, "logprobs", NULL);
    }
    json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
    json_object_array_add(choices, ch);
    return o;
}

/* The whole answer of a non-streamed request. */
static json_object *final_json(const bitnet_server *s, bitnet_srv_kind kind, const char *id, time_t created,
                               const char *text, size_t n, const bitnet_job_update *u) {
    json_object *choices;
    const bool chat = kind == BITNET_SRV_CHAT;
    json_object *o = envelope(s, id, chat ? "chat.completion" : "text_completion", created, &choices);
    json_object *ch = json_object_new_object();
    json_object_object_add(ch, "index", json_object_new_int(0));
    if (chat) {
        json_object *msg = json_object_new_object();
        json_object_object_add(msg, "role", json_object_new_string("assistant"));
        json_object_object_add(msg, "content", text_json(text, n));
        json_object_object_add(ch, "message", msg);
    } else {
        json_object_object_add(ch, "text", text_json(text, n));
    }
    json_object_object_add(ch, "logprobs", NULL);
    json_object_object_add(ch, "finish_reason", json_object_new_string(bitnet_finish_name(u->finish)));
    json_object_array_add(choices, ch);
    json_object_object_add(o, "usage", usage_json(u->n_prompt, u->n_gen));
    return o;
}

/* ---- streams -------------------------------------------------------------------------------- */

static bool stream_add(stream_state *st, const char *event, size_t n) {
    if (st->off == st->len) st->off = st->len = 0;
    char *b = realloc(st->buf, st->len + n);
    if (!b) return false;
    st->buf = b;
    memcpy(st->buf + st->len, event, n);
    st->len += n;
    return true;
}

static bool stream_event(stream_state *st, json_object *o) {
    if (!o) return false;
    const char *txt = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    const bool ok = stream_add(st, "data: ", 6) && stream_add(st, txt, strlen(txt)) && stream_add(st, "\n\n", 2);
    json_object_put(o);
    return ok;
}

/* Whether the client of a stream has taken no byte for timeout_s while bytes wait for it: the write
 * timeout. The kernel's send buffer (megabytes on loopback) takes the events long after the client has
 * stopped reading, so progress is what the client acknowledges (guard.h bitnet_guard_peer_progress); when
 * the buffer is full, libmicrohttpd's own idle timeout closes the connection after the same time. */
static bool stream_stalled(stream_state *st) {
    uint64_t acked;
    uint32_t pending;
    if (!bitnet_guard_peer_progress(st->fd, &acked, &pending)) return false;
    if (pending == 0 || acked != st->acked) {
        st->acked = acked;
        clock_gettime(CLOCK_MONOTONIC, &st->progress);
        return false;
    }
    return ms_since(&st->progress) > st->s->cfg.timeout_s * 1e3;
}

/* libmicrohttpd's content reader: the next events, waiting for the job when none are ready. */
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    stream_state *st = cls;
    if (!st->done && stream_stalled(st)) {
        bitnet_metrics_timeout(st->s->metrics, BITNET_TIMEOUT_WRITE);
        bitnet_job_cancel(st->job);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    while (st->off == st->len) {
        if (st->done) return MHD_CONTENT_READER_END_OF_STREAM;
        if (st->ended) {
            stream_add(st, "data: [DONE]\n\n", 14);
            st->done = true;
            break;
        }
        if (!st->role_sent && st->kind == BITNET_SRV_CHAT) {
            st->role_sent = true;
            if (!stream_event(st, chunk_json(st, "", 0, NULL, true, NULL))) return MHD_CONTENT_READER_END_WITH_ERROR;
            break;
        }
        char *text = NULL;
        bitnet_job_update u;
        if (!bitnet_job_poll(st->job, st->have, POLL_MS, &text, &u)) return MHD_CONTENT_READER_END_WITH_ERROR;
        bool ok = true;
        if (u.text_len > st->have) {
            ok = stream_event(st, chunk_json(st, text, u.text_len - st->have, NULL, false, NULL));
            st->have = u.text_len;
            if (!st->first_text) {
                st->first_text = true;
                bitnet_metrics_ttft(st->s->metrics, ms_since(&st->t_head) / 1e3);
            }
        }
        free(text);
        if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (u.finish == BITNET_FINISH_ERROR) {
            bitnet_srv_error e;
            if (atomic_load(&st->s->stopping)) bitnet_srv_fail(&e, 503, "server_error", "", "", "%s", u.error);
            else bitnet_srv_fail(&e, 500, "server_error", "", "", "generation failed: %s", u.error);
            stream_event(st, error_json(&e));
            st->ended = true;
        } else if (u.finish == BITNET_FINISH_CANCELLED) {
            return MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (u.finish != BITNET_FINISH_NONE) {
            ok = stream_event(st, chunk_json(st, NULL, 0, bitnet_finish_name(u.finish), false, NULL));
            if (ok && st->include_usage) ok = stream_event(st, chunk_json(st, NULL, 0, NULL, false, &u));
            if (!ok) return MHD_CONTENT_READER_END_WITH_ERROR;
            st->ended = true;
        } else if (st->off == st->len && client_gone(st->fd)) {
            bitnet_job_cancel(st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (st->off == st->len && stream_stalled(st)) {
            bitnet_metrics_timeout(st->s->metrics, BITNET_TIMEOUT_WRITE);
            bitnet_job_cancel(st->job);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        } else if (st->off == st->len && ms_since(&st->last_out) > st->s->cfg.timeout_s * 500.0) {
            /* waiting for text (a queue, a long prompt) for half the idle timeout: an SSE comment, which
             * clients ignore, so that the connection is not closed as idle while the client is fine */
            if (!stream_add(st, ": keep-alive\n\n", 14)) return MHD_CONTENT_READER_END_WITH_ERROR;
            break;
        }
    }
    const size_t n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(out, st->buf + st->off, n);
    st->off += n;
    clock_gettime(CLOCK_MONOTONIC, &st->last_out);
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream_state *st = cls;
    char *text = NULL;
    bitnet_job_update u;
    if (bitnet_job_poll(st->job, st->have, 0, &text, &u)) log_end(st->s, st->id, st->kind, &u, !st->done, &st->t0);
    free(text);
    bitnet_job_release(st->job); /* cancels it when the client left early */
    free(st->buf);
    free(st);
}

/* ---- generation requests -------------------------------------------------------------------- */

static uint64_t fresh_seed(bitnet_server *s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (atomic_fetch_add(&s->seed_count, 1) * 0x9E3779B97F4A7C15ULL);
    x ^= x >> 31;
    return x * 0xBF58476D1CE4E5B9ULL;
}

/* The prompt's token ids of a chat or completion request; on failure the error is sent. */
static bool prompt_tokens(bitnet_server *s, struct MHD_Connection *c, const bitnet_srv_request *q, int32_t **ids,
                          size_t *n, enum MHD_Result *ret) {
    bitnet_error err = {{0}};
    if (q->tokens) {
        *ids = malloc((q->n_tokens ? q->n_tokens : 1) * sizeof **ids);
        if (!*ids) return *ret = fail(c, 500, "server_error", "", "", "out of memory"), false;
        memcpy(*ids, q->tokens, q->n_tokens * sizeof **ids);
        *n = q->n_tokens;
        return true;
    }
    char *text = q->prompt;
    size_t len = q->prompt_len;
    char *chat = NULL;
    if (q->kind == BITNET_SRV_CHAT) {
        if (s->cfg.tmpl.family == BITNET_CHAT_UNKNOWN) {
            *ret = fail(c, 400, "invalid_request_error", "messages", "",
                        "this model has no chat template this server knows (tokenizer.chat_template is missing or "
                        "not one of %s): start llama-server with --chat-template NAME, or use /v1/completions",
                        bitnet_chat_known_names());
            return false;
        }
        const bitnet_chat_message *msgs = q->messages;
        size_t n_msgs = q->n_messages;
        bitnet_chat_message *with_system = NULL;
        if (s->system_prompt && strcmp(msgs[0].role, "system") != 0) { /* --system-prompt */
            with_system = malloc((n_msgs + 1) * sizeof *with_system);
            if (!with_system) return *ret = fail(c, 500, "server_error", "", "", "out of memory"), false;
            with_system[0].role = "system";
            with_system[0].content = s->system_prompt;
            memcpy(with_system + 1, msgs, n_msgs * sizeof *msgs);
            msgs = with_system;
            n_msgs++;
        }
        const bitnet_status fst = bitnet_chat_format(&s->cfg.tmpl, msgs, n_msgs, true, &chat, &len, &err);
        free(with_system);
        if (fst != BITNET_OK) {
            *ret = fail(c, 400, "invalid_request_error", "messages", "", "%s", err.msg);
            return false;
        }
        text = chat;
    }
    const bitnet_status st = bitnet_tokenize(s->v, text ? text : "", len, true, true, ids, n, &err);
    free(chat);
    if (st != BITNET_OK) {
        *ret = fail(c, 400, "invalid_request_error", q->kind == BITNET_SRV_CHAT ? "messages" : "prompt", "",
                    "cannot tokenize the prompt: %s", err.msg);
        return false;
    }
    return true;
}

static enum MHD_Result generate(bitnet_server *s, struct MHD_Connection *c, const bitnet_srv_request *q) {
    enum MHD_Result ret = MHD_NO;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!prompt_tokens(s, c, q, &ids, &n_ids, &ret)) return ret;
    const int32_t slot_ctx = s->cfg.n_ctx_slot;
    if (n_ids == 0) {
        free(ids);
        return fail(c, 400, "invalid_request_error", q->kind == BITNET_SRV_CHAT ? "messages" : "prompt", "",
                    "the prompt is empty (no tokens, and the vocabulary adds no BOS)");
    }
    if (n_ids > (size_t)slot_ctx) {
        free(ids);
        return fail(c, 400, "invalid_request_error", q->kind == BITNET_SRV_CHAT ? "messages" : "prompt",
                    "context_length_exceeded",
                    "the prompt has %zu tokens, more than the %d tokens of a slot's context (llama-server -c N_CTX -np "
                    "N_SLOTS gives each slot N_CTX / N_SLOTS)",
                    n_ids, (int)slot_ctx);
    }
    int32_t max_tokens = q->max_tokens;
    if (max_tokens < 0) max_tokens = s->cfg.n_predict > 0 ? s->cfg.n_predict : slot_ctx;
    bitnet_gen_params gp = {
        .prompt = ids,
        .n_prompt = n_ids,
        .max_tokens = max_tokens,
        .temperature = q->has_temperature ? q->temperature : s->cfg.temp,
        .top_k = q->has_top_k ? q->top_k : s->cfg.top_k,
        .top_p = q->has_top_p ? q->top_p : s->cfg.top_p,
        .seed = q->has_seed ? q->seed : s->cfg.seed >= 0 ? (uint64_t)s->cfg.seed : fresh_seed(s),
        .stop = q->stop,
        .n_stop = q->n_stop,
        .ignore_eos = q->ignore_eos,
    };
    bitnet_job *job = NULL;
    bool busy = false;
    bitnet_error err = {{0}};
    const bitnet_status st = bitnet_engine_submit(s->e, &gp, &job, &busy, &err);
    free(ids);
    if (st != BITNET_OK) {
        if (busy) return fail(c, 429, "rate_limit_error", "", "rate_limit_exceeded", "the server is busy: %s", err.msg);
        if (st == BITNET_ERR_UNSUPPORTED) return fail(c, 503, "server_error", "", "", "%s", err.msg);
        return fail(c, st == BITNET_ERR_NOMEM ? 500 : 400, st == BITNET_ERR_NOMEM ? "server_error" : "invalid_request_error",
                    "", "", "%s", err.msg);
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", q->kind == BITNET_SRV_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    const time_t created = time(NULL);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    if (q->stream) {
        stream_state *ss = calloc(1, sizeof *ss);
        if (!ss) {
            bitnet_job_release(job);
            return fail(c, 500, "server_error", "", "", "out of memory");
        }
        ss->s = s;
        ss->job = job;
        ss->kind = q->kind;
        ss->fd = client_fd(c);
        snprintf(ss->id, sizeof ss->id, "%s", id);
        ss->created = created;
        ss->include_usage = q->include_usage;
        ss->t0 = t0;
        ss->t_head = tl_rs ? tl_rs->t0 : t0;
        clock_gettime(CLOCK_MONOTONIC, &ss->progress);
        ss->last_out = ss->progress;
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, ss, stream_free);
        if (!r) {
            stream_free(ss);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        if (ret == MHD_YES) note_queued(MHD_HTTP_OK);
        return ret;
    }

    /* not streamed: wait for the end, watching the client; the text is collected as it is released, so
     * each poll waits for bytes beyond those already taken */
    const int fd = client_fd(c);
    bitnet_job_update u;
    char *text = NULL;
    size_t have = 0;
    for (;;) {
        char *more = NULL;
        bool ok = bitnet_job_poll(job, have, POLL_MS, &more, &u);
        if (ok && u.text_len > 0 && tl_rs && !tl_rs->first_text) {
            tl_rs->first_text = true;
            bitnet_metrics_ttft(s->metrics, ms_since(&tl_rs->t0) / 1e3);
        }
        if (ok && u.text_len > have) {
            char *grown = realloc(text, u.text_len);
            if ((ok = grown != NULL)) {
                text = grown;
                memcpy(text + have, more, u.text_len - have);
                have = u.text_len;
            }
        }
        free(more);
        if (!ok) {
            free(text);
            bitnet_job_release(job);
            return fail(c, 500, "server_error", "", "", "out of memory");
        }
        if (u.finish != BITNET_FINISH_NONE) break;
        if (client_gone(fd)) {
            log_end(s, id, q->kind, &u, true, &t0);
            free(text);
            bitnet_job_release(job);
            return MHD_NO; /* nobody to answer */
        }
    }
    log_end(s, id, q->kind, &u, false, &t0);
    bitnet_job_release(job);
    if (u.finish == BITNET_FINISH_ERROR) {
        free(text);
        if (atomic_load(&s->stopping)) return fail(c, 503, "server_error", "", "", "%s", u.error);
        return fail(c, 500, "server_error", "", "", "generation failed: %s", u.error);
    }
    if (u.finish == BITNET_FINISH_CANCELLED) {
        free(text);
        return fail(c, 503, "server_error", "", "", "the request was cancelled (the server is stopping)");
    }
    ret = send_json(c, MHD_HTTP_OK, final_json(s, q->kind, id, created, text, u.text_len, &u));
    free(text);
    return ret;
}

/* ---- embeddings ----------------------------------------------------------------------------- */

/* n floats as base64 (RFC 4648, with padding) of their little-endian IEEE-754 binary32 bytes, as OpenAI's
 * encoding_format "base64" gives them. malloc'ed, NUL-terminated; NULL on out of memory. */
static char *base64_floats(const float *v, size_t n) {
    static const char k[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t nb = 4 * n;
    char *out = malloc(4 * ((nb + 2) / 3) + 1);
    if (!out) return NULL;
    size_t o = 0;
    uint8_t b[3];
    int have = 0;
    for (size_t i = 0; i < nb; i++) {
        uint32_t u;
        memcpy(&u, &v[i / 4], 4);
        b[have++] = (uint8_t)(u >> (8 * (i % 4))); /* byte i % 4 of the value, least significant first */
        if (have == 3 || i + 1 == nb) {
            const uint32_t w = (uint32_t)b[0] << 16 | (have > 1 ? (uint32_t)b[1] << 8 : 0) | (have > 2 ? b[2] : 0);
            out[o++] = k[w >> 18 & 63];
            out[o++] = k[w >> 12 & 63];
            out[o++] = have > 1 ? k[w >> 6 & 63] : '=';
            out[o++] = have > 2 ? k[w & 63] : '=';
            have = 0;
        }
    }
    out[o] = 0;
    return out;
}

static void free_ids(int32_t **ids, size_t n) {
    for (size_t i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
}

/* POST /v1/embeddings: the texts tokenized (BOS/EOS as the vocabulary says, special tokens parsed, as
 * llama-embedding does) or taken as given ids, checked against the bounds, run as one engine job, each
 * vector L2-normalized. */
static enum MHD_Result embeddings(bitnet_server *s, struct MHD_Connection *c, const bitnet_srv_request *q) {
    const size_t n = q->n_inputs;
    int32_t **ids = calloc(n, sizeof *ids);
    int32_t *n_ids = calloc(n, sizeof *n_ids);
    if (!ids || !n_ids) {
        free(ids);
        free(n_ids);
        return fail(c, 500, "server_error", "", "", "out of memory");
    }
    const int32_t slot_ctx = s->cfg.n_ctx_slot;
    const int64_t max_tokens = s->cfg.max_embd_tokens >= 1 ? s->cfg.max_embd_tokens : 1;
    int64_t total = 0;
    enum MHD_Result ret = MHD_NO;
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        if (q->input_ids) {
            len = q->input_n_ids[i];
            ids[i] = malloc(len * sizeof **ids);
            if (!ids[i]) {
                ret = fail(c, 500, "server_error", "", "", "out of memory");
                goto done;
            }
            memcpy(ids[i], q->input_ids[i], len * sizeof **ids);
        } else {
            bitnet_error err = {{0}};
            size_t got = 0;
            if (bitnet_tokenize(s->v, q->inputs[i], q->input_lens[i], true, true, &ids[i], &got, &err) != BITNET_OK) {
                ret = fail(c, 400, "invalid_request_error", "input", "", "cannot tokenize 'input'[%zu]: %s", i, err.msg);
                goto done;
            }
            len = got;
        }
        if (len == 0) {
            ret = fail(c, 400, "invalid_request_error", "input", "", "'input'[%zu] has no tokens", i);
            goto done;
        }
        if (len > (size_t)slot_ctx) {
            ret = fail(c, 400, "invalid_request_error", "input", "context_length_exceeded",
                       "'input'[%zu] has %zu tokens, more than the %d tokens of a slot's context (llama-server -c "
                       "N_CTX -np N_SLOTS gives each slot N_CTX / N_SLOTS)",
                       i, len, (int)slot_ctx);
            goto done;
        }
        n_ids[i] = (int32_t)len;
        total += (int64_t)len;
        if (total > max_tokens) {
            ret = fail(c, 400, "invalid_request_error", "input", "",
                       "'input' has more than %lld tokens in all (%lld up to 'input'[%zu]), the most one request may "
                       "have (--embd-max-tokens)",
                       (long long)max_tokens, (long long)total, i);
            goto done;
        }
    }
    const bitnet_embd_params ep = {(const int32_t *const *)ids, n_ids, n, s->cfg.pooling};
    bitnet_job *job = NULL;
    bool busy = false;
    bitnet_error err = {{0}};
    const bitnet_status st = bitnet_engine_submit_embd(s->e, &ep, &job, &busy, &err);
    free_ids(ids, n);
    free(n_ids);
    ids = NULL;
    n_ids = NULL;
    if (st != BITNET_OK) {
        if (busy) return fail(c, 429, "rate_limit_error", "", "rate_limit_exceeded", "the server is busy: %s", err.msg);
        if (st == BITNET_ERR_UNSUPPORTED) return fail(c, 503, "server_error", "", "", "%s", err.msg);
        return fail(c, st == BITNET_ERR_NOMEM ? 500 : 400, st == BITNET_ERR_NOMEM ? "server_error" : "invalid_request_error",
                    "input", "", "%s", err.msg);
    }
    char id[48];
    snprintf(id, sizeof id, "embd-%llu", (unsigned long long)atomic_fetch_add(&s->next_id, 1));
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const int fd = client_fd(c);
    bitnet_job_update u;
    bool left = false;
    for (;;) {
        char *none = NULL;
        const bool ok = bitnet_job_poll(job, 0, POLL_MS, &none, &u);
        free(none);
        if (!ok) {
            bitnet_job_release(job);
            return fail(c, 500, "server_error", "", "", "out of memory");
        }
        if (u.finish != BITNET_FINISH_NONE) break;
        if (client_gone(fd)) {
            left = true;
            break;
        }
    }
    if (s->cfg.log) {
        fprintf(s->cfg.log, "llama-server: %s /v1/embeddings: %zu texts, %d tokens, finish %s, %.0f ms\n", id, n,
                (int)u.n_prompt,
                left ? "client gone" : bitnet_finish_name(u.finish) ? bitnet_finish_name(u.finish) : "?", ms_since(&t0));
        fflush(s->cfg.log);
    }
    if (left) {
        bitnet_job_release(job);
        return MHD_NO; /* nobody to answer */
    }
    if (u.finish != BITNET_FINISH_STOP) {
        bitnet_job_release(job);
        if (u.finish == BITNET_FINISH_CANCELLED) {
            return fail(c, 503, "server_error", "", "", "the request was cancelled (the server is stopping)");
        }
        if (atomic_load(&s->stopping)) return fail(c, 503, "server_error", "", "", "%s", u.error);
        return fail(c, 500, "server_error", "", "", "embedding failed: %s", u.error);
    }
    int32_t n_vec = 0, D = 0;
    const float *vec = bitnet_job_embeddings(job, &n_vec, &D);
    float *row = malloc((size_t)(D > 0 ? D : 1) * sizeof *row);
    json_object *o = json_object_new_object(), *data = json_object_new_array();
    bool good = row && vec && n_vec == (int32_t)n, nonfinite = false;
    for (int32_t i = 0; good && i < n_vec; i++) {
        bitnet_embd_normalize(vec + (size_t)i * (size_t)D, row, D, 2);
        json_object *item = json_object_new_object();
        json_object_object_add(item, "object", json_object_new_string("embedding"));
        json_object_object_add(item, "index", json_object_new_int(i));
        if (q->base64) {
            char *b64 = base64_floats(row, (size_t)D);
            good = b64 != NULL;
            json_object_object_add(item, "embedding", b64 ? json_object_new_string(b64) : NULL);
            free(b64);
        } else {
            json_object *arr = json_object_new_array();
            for (int32_t d = 0; d < D; d++) {
                if (!isfinite(row[d])) { /* JSON has no NaN or infinity */
                    good = false;
                    nonfinite = true;
                    break;
                }
                char num[32];
                snprintf(num, sizeof num, "%.9g", (double)row[d]); /* 9 digits: the float back exactly */
                json_object_array_add(arr, json_object_new_double_s((double)row[d], num));
            }
            json_object_object_add(item, "embedding", arr);
        }
        json_object_array_add(data, item);
    }
    free(row);
    bitnet_job_release(job);
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(o, "data", data);
    json_object_object_add(o, "model", json_object_new_string(s->model_id));
    json_object *usage = json_object_new_object();
    json_object_object_add(usage, "prompt_tokens", json_object_new_int(u.n_prompt));
    json_object_object_add(usage, "total_tokens", json_object_new_int(u.n_prompt));
    json_object_object_add(o, "usage", usage);
    if (!good) {
        json_object_put(o);
        return nonfinite ? fail(c, 500, "server_error", "", "", "the model produced an embedding value that is not finite")
                         : fail(c, 500, "server_error", "", "", "out of memory");
    }
    return send_json(c, MHD_HTTP_OK, o);

done:
    free_ids(ids, n);
    free(n_ids);
    return ret;
}

/* ---- the other endpoints -------------------------------------------------------------------- */

static enum MHD_Result tokenize(bitnet_server *s, struct MHD_Connection *c, const bitnet_srv_request *q) {
    int32_t *ids = NULL;
    size_t n = 0;
    bitnet_error err = {{0}};
    if (bitnet_tokenize(s->v, q->prompt, q->prompt_len, q->add_special, true, &ids, &n, &err) != BITNET_OK) {
        return fail(c, 400, "invalid_request_error", "content", "", "cannot tokenize: %s", err.msg);
    }
    json_object *o = json_object_new_object(), *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++) json_object_array_add(arr, json_object_new_int(ids[i]));
    free(ids);
    json_object_object_add(o, "tokens", arr);
    return send_json(c, MHD_HTTP_OK, o);
}

static enum MHD_Result detokenize(bitnet_server *s, struct MHD_Connection *c, const bitnet_srv_request *q) {
    const size_t need = bitnet_detokenize(s->v, q->tokens, q->n_tokens, false, NULL, 0);
    char *buf = malloc(need + 1);
    if (!buf) return fail(c, 500, "server_error", "", "", "out of memory");
    bitnet_detokenize(s->v, q->tokens, q->n_tokens, false, buf, need);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "content", text_json(buf, need));
    free(buf);
    return send_json(c, MHD_HTTP_OK, o);
}

static enum MHD_Result models(bitnet_server *s, struct MHD_Connection *c) {
    json_object *o = json_object_new_object(), *arr = json_object_new_array(), *m = json_object_new_object();
    json_object_object_add(m, "id", json_object_new_string(s->model_id));
    json_object_object_add(m, "object", json_object_new_string("model"));
    json_object_object_add(m, "created", json_object_new_int64((int64_t)s->started));
    json_object_object_add(m, "owned_by", json_object_new_string("bitnet"));
    json_object_array_add(arr, m);
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(o, "data", arr);
    return send_json(c, MHD_HTTP_OK, o);
}

/* GET /metrics: the Prometheus text (metrics.h). */
static enum MHD_Result metrics(bitnet_server *s, struct MHD_Connection *c) {
    if (!s->cfg.metrics) {
        return fail(c, 404, "invalid_request_error", "", "not_found",
                    "the metrics endpoint is off: start llama-server with --metrics");
    }
    bitnet_engine_stats es;
    bitnet_guard_stats gs;
    bitnet_engine_get_stats(s->e, &es);
    bitnet_guard_get_stats(s->guard, &gs);
    char *txt = bitnet_metrics_render(s->metrics, &es, &gs);
    if (!txt) return fail(c, 500, "server_error", "", "", "out of memory");
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(txt), txt, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(txt);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    const enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    if (ret == MHD_YES) note_queued(MHD_HTTP_OK);
    return ret;
}

/* ---- libmicrohttpd callbacks ---------------------------------------------------------------- */

/* libmicrohttpd's idle timeout of connection c for a phase: while a request arrives and while the connection
 * idles between requests, one second past the guard's deadline (the guard answers 408 or closes first,
 * and counts it); while a request is answered, --timeout. */
static void set_idle_timeout(const bitnet_server *s, struct MHD_Connection *c, bitnet_guard_phase p) {
    const double t = p == BITNET_GUARD_RECEIVING ? s->cfg.request_timeout_s + 1.0
                     : p == BITNET_GUARD_IDLE    ? s->cfg.keepalive_timeout_s + 1.0
                                                 : s->cfg.timeout_s;
    const double whole = ceil(t) < 1.0 ? 1.0 : ceil(t) > 4000000.0 ? 4000000.0 : ceil(t);
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)whole);
}

/* The guard's record of connection c (set when it was accepted; NULL when out of memory then). */
static bitnet_guard_conn *guard_conn(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static socklen_t addr_len(const struct sockaddr *a) {
    if (!a) return 0;
    return a->sa_family == AF_INET6 ? (socklen_t)sizeof(struct sockaddr_in6)
           : a->sa_family == AF_INET ? (socklen_t)sizeof(struct sockaddr_in)
                                     : (socklen_t)sizeof(struct sockaddr);
}

/* Accept policy (called on the accepting thread): the per-address limit. Does not block. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    bitnet_server *s = cls;
    return bitnet_guard_admit(s->guard, addr, len) ? MHD_YES : MHD_NO;
}

/* A connection starts (accepting thread) or ends (before its socket is closed): in and out of the guard. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    bitnet_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *a = ai ? ai->client_addr : NULL;
        const int fd = client_fd(c);
        *socket_context = bitnet_guard_open(s->guard, fd, a, addr_len(a));
        if (!*socket_context && fd >= 0) shutdown(fd, SHUT_RDWR); /* out of memory: no deadline, no connection */
        set_idle_timeout(s, c, BITNET_GUARD_RECEIVING); /* before the connection's thread exists */
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        bitnet_guard_close(s->guard, *socket_context);
        *socket_context = NULL;
    }
}

/* The request line of a request has arrived (its connection's thread): on a kept-alive connection, a new
 * request's deadline starts. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)uri;
    bitnet_server *s = cls;
    bitnet_guard_phase_set(s->guard, guard_conn(c), BITNET_GUARD_RECEIVING);
    set_idle_timeout(s, c, BITNET_GUARD_RECEIVING);
    return NULL;
}

/* The request is handled from here on: out of the guard's request deadline. False when the guard timed the
 * connection out first (it has answered 408; nothing may be queued). */
static bool begin_answer(bitnet_server *s, struct MHD_Connection *c, bitnet_guard_conn *gc, req_state *rs) {
    rs->answered = true;
    set_idle_timeout(s, c, BITNET_GUARD_BUSY);
    return bitnet_guard_phase_set(s->guard, gc, BITNET_GUARD_BUSY);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    bitnet_server *s = cls;
    req_state *rs = *con_cls;
    bitnet_guard_conn *gc = guard_conn(c);
    tl_rs = rs;
    if (!rs) { /* first call: the headers are in */
        if (bitnet_guard_timed_out(s->guard, gc)) return MHD_NO; /* answered 408 by the guard */
        rs = calloc(1, sizeof *rs);
        if (!rs) return MHD_NO;
        *con_cls = rs;
        tl_rs = rs;
        clock_gettime(CLOCK_MONOTONIC, &rs->t0);
        atomic_fetch_add(&s->active, 1);
        bool wrong_method;
        rs->r = route_of(url, method, &wrong_method);
        if (rs->r == R_NONE) {
            if (!begin_answer(s, c, gc, rs)) return MHD_NO;
            return wrong_method ? fail(c, 405, "invalid_request_error", "", "", "%s is not allowed on %s", method, url)
                                : fail(c, 404, "invalid_request_error", "", "not_found",
                                       "no endpoint %s %s (see llama-server --help)", method, url);
        }
        if (rs->r != R_HEALTH && !key_ok(s, c)) {
            if (!begin_answer(s, c, gc, rs)) return MHD_NO;
            return fail(c, 401, "invalid_request_error", "", "invalid_api_key",
                        "Invalid API key: send the key given with --api-key as \"Authorization: Bearer KEY\"");
        }
        if (atomic_load(&s->stopping) && (rs->r == R_CHAT || rs->r == R_COMPLETION || rs->r == R_EMBEDDINGS)) {
            if (!begin_answer(s, c, gc, rs)) return MHD_NO;
            return fail(c, 503, "server_error", "", "", "the server is shutting down");
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->cfg.max_body) {
            if (!begin_answer(s, c, gc, rs)) return MHD_NO;
            return fail(c, 413, "invalid_request_error", "", "", "the request body has %s bytes, more than the %zu accepted",
                        cl, s->cfg.max_body);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) { /* a piece of the body */
        if (!rs->answered) {
            if (rs->too_large || rs->len + *upload_size > s->cfg.max_body) {
                /* past the limit: the rest is read and dropped so that the client can read the 413 at the end;
                 * a body that goes on past 4 times the limit is answered at once and the connection closed */
                rs->too_large = true;
                rs->dropped += *upload_size;
                if (rs->dropped > 4 * s->cfg.max_body + 65536) {
                    if (!begin_answer(s, c, gc, rs)) return MHD_NO;
                    *upload_size = 0;
                    return fail(c, 413, "invalid_request_error", "", "",
                                "the request body is larger than the %zu bytes accepted", s->cfg.max_body);
                }
            } else {
                if (rs->len + *upload_size > rs->cap) {
                    size_t cap = rs->cap ? rs->cap : 4096;
                    while (cap < rs->len + *upload_size) cap *= 2;
                    char *b = realloc(rs->body, cap);
                    if (!b) return MHD_NO;
                    rs->body = b;
                    rs->cap = cap;
                }
                memcpy(rs->body + rs->len, upload, *upload_size);
                rs->len += *upload_size;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rs->answered) return MHD_YES;
    if (!begin_answer(s, c, gc, rs)) return MHD_NO;
    if (rs->too_large) {
        return fail(c, 413, "invalid_request_error", "", "", "the request body is larger than the %zu bytes accepted",
                    s->cfg.max_body);
    }
    switch (rs->r) {
    case R_HEALTH: {
        int32_t busy, waiting;
        bitnet_engine_load(s->e, &busy, &waiting);
        json_object *o = json_object_new_object();
        json_object_object_add(o, "status", json_object_new_string("ok"));
        json_object_object_add(o, "slots_processing", json_object_new_int(busy));
        json_object_object_add(o, "requests_waiting", json_object_new_int(waiting));
        return send_json(c, MHD_HTTP_OK, o);
    }
    case R_MODELS: return models(s, c);
    case R_METRICS: return metrics(s, c);
    default: break;
    }
    /* the mode's refusals come before the body is looked at */
    if (s->cfg.embeddings && (rs->r == R_CHAT || rs->r == R_COMPLETION)) {
        return fail(c, 400, "invalid_request_error", "", "",
                    "this model serves embeddings only: use POST /v1/embeddings (llama-server is in embedding mode "
                    "because %s); text generation needs a generation model started without --embeddings",
                    bitnet_model_hparams(s->m)->pooling >= 0 ? "the model file has a pooling_type: an embedding model"
                                                               : "it was started with --embeddings");
    }
    if (!s->cfg.embeddings && rs->r == R_EMBEDDINGS) {
        return fail(c, 400, "invalid_request_error", "", "",
                    "this server generates text; start it with --embeddings, or load an embedding model (a GGUF with "
                    "<arch>.pooling_type), to answer /v1/embeddings");
    }
    if (rs->r == R_EMBEDDINGS && s->cfg.pooling == BITNET_POOLING_NONE) {
        return fail(c, 400, "invalid_request_error", "", "",
                    "pooling 'none' (one vector per token) has no OpenAI-compatible answer: start llama-server with "
                    "--pooling mean, cls or last for /v1/embeddings");
    }
    static const bitnet_srv_kind kinds[] = {[R_CHAT] = BITNET_SRV_CHAT, [R_COMPLETION] = BITNET_SRV_COMPLETION,
                                            [R_TOKENIZE] = BITNET_SRV_TOKENIZE, [R_DETOKENIZE] = BITNET_SRV_DETOKENIZE,
                                            [R_EMBEDDINGS] = BITNET_SRV_EMBEDDINGS};
    const bitnet_hparams *hp = bitnet_model_hparams(s->m);
    const bitnet_srv_limits lim = {s->model_id, hp->n_vocab, s->cfg.max_tokens_cap, 16, 256};
    const bitnet_srv_embd_limits el = {hp->n_embd, s->cfg.max_embd_inputs};
    bitnet_srv_request q;
    bitnet_srv_error e;
    enum MHD_Result ret;
    const char *body = rs->body ? rs->body : "";
    const bitnet_status pst = rs->r == R_EMBEDDINGS ? bitnet_srv_parse_embeddings(body, rs->len, &lim, &el, &q, &e)
                                                    : bitnet_srv_parse(kinds[rs->r], body, rs->len, &lim, &q, &e);
    if (pst != BITNET_OK) {
        ret = send_error(c, &e);
    } else if (rs->r == R_TOKENIZE) {
        ret = tokenize(s, c, &q);
    } else if (rs->r == R_DETOKENIZE) {
        ret = detokenize(s, c, &q);
    } else if (rs->r == R_EMBEDDINGS) {
        ret = embeddings(s, c, &q);
    } else {
        ret = generate(s, c, &q);
    }
    bitnet_srv_request_free(&q);
    return ret;
}

/* A request's end (its response sent, or the connection closed): counted for /metrics; the connection, if
 * kept alive, waits for the next request under the keep-alive deadline. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    bitnet_server *s = cls;
    req_state *rs = *con_cls;
    if (tl_rs == rs) tl_rs = NULL;
    bitnet_guard_phase_set(s->guard, guard_conn(c), BITNET_GUARD_IDLE);
    set_idle_timeout(s, c, BITNET_GUARD_IDLE);
    if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) { /* rs NULL: the headers never came whole */
        bitnet_metrics_timeout(s->metrics, rs && rs->queued ? BITNET_TIMEOUT_WRITE : BITNET_TIMEOUT_READ);
    }
    if (!rs) return;
    if (rs->status) bitnet_metrics_request(s->metrics, endpoint_of(rs->r), rs->status, ms_since(&rs->t0) / 1e3);
    free(rs->body);
    free(rs);
    *con_cls = NULL;
    atomic_fetch_sub(&s->active, 1);
}

/* ---- start and stop ------------------------------------------------------------------------- */

bitnet_status bitnet_server_start(bitnet_model *m, bitnet_engine *e, const bitnet_server_config *cfg,
                                  bitnet_server **out, bitnet_error *err) {
    *out = NULL;
    bitnet_server *s = calloc(1, sizeof *s);
    if (!s) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the server");
    s->m = m;
    s->v = bitnet_model_vocab(m);
    s->e = e;
    s->cfg = *cfg;
    s->model_id = strdup(cfg->model_id ? cfg->model_id : "model");
    s->api_key = cfg->api_key ? strdup(cfg->api_key) : NULL;
    s->system_prompt = cfg->system_prompt ? strdup(cfg->system_prompt) : NULL;
    s->started = time(NULL);
    if (s->cfg.request_timeout_s <= 0) s->cfg.request_timeout_s = BITNET_SERVER_REQUEST_TIMEOUT_S;
    if (s->cfg.keepalive_timeout_s <= 0) s->cfg.keepalive_timeout_s = BITNET_SERVER_KEEPALIVE_TIMEOUT_S;
    if (s->cfg.timeout_s <= 0) s->cfg.timeout_s = BITNET_SERVER_TIMEOUT_S;
    if (s->cfg.shutdown_timeout_s < 0) s->cfg.shutdown_timeout_s = BITNET_SERVER_SHUTDOWN_TIMEOUT_S;
    if (!s->cfg.max_connections) s->cfg.max_connections = 128;
    if (!s->cfg.max_connections_per_address) {
        s->cfg.max_connections_per_address = s->cfg.max_connections / 4 ? s->cfg.max_connections / 4 : 1;
    }
    const bitnet_guard_limits gl = {(int64_t)(s->cfg.request_timeout_s * 1000.0),
                                    (int64_t)(s->cfg.keepalive_timeout_s * 1000.0),
                                    s->cfg.max_connections_per_address, 50};
    s->guard = bitnet_guard_create(&gl);
    s->metrics = bitnet_metrics_create();
    if (!s->guard || !s->metrics) {
        bitnet_server_stop(s, 0);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the server (or its watchdog thread did not start)");
    }
    atomic_init(&s->active, 0);
    atomic_init(&s->stopping, false);
    atomic_init(&s->next_id, 1);
    atomic_init(&s->seed_count, 0);
    if (!s->model_id || (cfg->api_key && !s->api_key) || (cfg->system_prompt && !s->system_prompt)) {
        bitnet_server_stop(s, 0);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the server");
    }
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    const int gai = getaddrinfo(cfg->host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        bitnet_server_stop(s, 0);
        return bitnet_fail(err, BITNET_ERR_IO, "cannot resolve --host %s: %s", cfg->host, gai_strerror(gai));
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* libmicrohttpd's connection timeout closes a connection on which no byte has moved for timeout_s: a
     * client that stops reading its answer (a stream's job is then cancelled by stream_free), or stops
     * sending; the guard bounds the whole request and the keep-alive wait however the bytes trickle */
    const unsigned idle_s = s->cfg.timeout_s < 1.0 ? 1u : (unsigned)(s->cfg.timeout_s + 0.5);
    s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, on_accept, s, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_LIMIT, s->cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, idle_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                            MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        const int e2 = errno;
        bitnet_server_stop(s, 0);
        return bitnet_fail(err, BITNET_ERR_IO, "cannot listen on %s port %d: %s", cfg->host, cfg->port,
                           e2 ? strerror(e2) : "libmicrohttpd could not start");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    *out = s;
    return BITNET_OK;
}

int bitnet_server_port(const bitnet_server *s) { return s->port; }

void bitnet_server_stop(bitnet_server *s, int grace_ms) {
    if (!s) return;
    if (s->d) {
        /* new generation requests are answered 503 from here on (on_request), others still served */
        atomic_store(&s->stopping, true);
        const double limit_s = s->cfg.shutdown_timeout_s;
        if (!bitnet_engine_drain_for(s->e, (int)(limit_s * 1000.0))) {
            char why[200];
            snprintf(why, sizeof why,
                     "the server is shutting down: the request did not finish within the %g s of --shutdown-timeout",
                     limit_s);
            if (s->cfg.log) {
                int32_t busy, waiting;
                bitnet_engine_load(s->e, &busy, &waiting);
                fprintf(s->cfg.log, "llama-server: --shutdown-timeout %g s passed: ending %d running and %d waiting "
                                    "requests with an error\n", limit_s, (int)busy, (int)waiting);
                fflush(s->cfg.log);
            }
            bitnet_engine_abort(s->e, why);
            if (grace_ms > 2000) grace_ms = 2000; /* the error events are short: the deadline has passed */
        }
        /* the last bytes are being written: wait for the handlers to finish */
        const struct timespec tick = {0, 10 * 1000 * 1000};
        for (int waited = 0; atomic_load(&s->active) > 0 && waited < grace_ms; waited += 10) nanosleep(&tick, NULL);
        MHD_stop_daemon(s->d);
    }
    bitnet_guard_free(s->guard);
    bitnet_metrics_free(s->metrics);
    free(s->model_id);
    free(s->api_key);
    free(s->system_prompt);
    free(s);
}
