/* request.c — llama-server's request bodies (request.h): JSON with json-c (strict mode, UTF-8 checked),
 * then each field's type and range, with OpenAI-style errors naming the field. */
#include "server/request.h"

#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const char k_invalid[] = "invalid_request_error";

bitnet_status bitnet_srv_vfail(bitnet_srv_error *e, int http_status, const char *type, const char *param,
                               const char *code, const char *fmt, va_list ap) {
    if (!e) return BITNET_ERR_INVALID_ARG;
    e->http_status = http_status;
    snprintf(e->type, sizeof e->type, "%s", type ? type : k_invalid);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    return http_status >= 500 ? BITNET_ERR_NOMEM : BITNET_ERR_INVALID_ARG;
}

bitnet_status bitnet_srv_fail(bitnet_srv_error *e, int http_status, const char *type, const char *param,
                              const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const bitnet_status st = bitnet_srv_vfail(e, http_status, type, param, code, fmt, ap);
    va_end(ap);
    return st;
}

#define BAD(param, ...) bitnet_srv_fail(e, 400, k_invalid, (param), "", __VA_ARGS__)
#define NOMEM() bitnet_srv_fail(e, 500, "server_error", "", "", "out of memory")

bool bitnet_srv_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        const unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t len;
        unsigned cp, min;
        if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F, min = 0x80;
        else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, min = 0x800;
        else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, min = 0x10000;
        else return false;
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

char *bitnet_srv_utf8_clean(const char *s, size_t n, size_t *out_len) {
    char *o = malloc(3 * n + 1);
    if (!o) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, k = 0;
    while (i < n) {
        size_t len = 1;
        if (p[i] >= 0x80) {
            len = p[i] >= 0xF0 ? 4 : p[i] >= 0xE0 ? 3 : 2;
            if (i + len > n || !bitnet_srv_utf8_valid(s + i, len)) {
                memcpy(o + k, "\xEF\xBF\xBD", 3);
                k += 3;
                i++;
                continue;
            }
        }
        memcpy(o + k, s + i, len);
        k += len;
        i += len;
    }
    o[k] = 0;
    if (out_len) *out_len = k;
    return o;
}

/* A short printable rendering of a JSON value for messages (at most about 60 bytes). */
static const char *shown(json_object *v, char *buf, size_t cap) {
    const char *s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!s) s = "?";
    const size_t n = strlen(s);
    if (n < 60 && n < cap) {
        snprintf(buf, cap, "%s", s);
    } else {
        size_t k = cap - 4 < 56 ? cap - 4 : 56;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--; /* not inside a character */
        snprintf(buf, cap, "%.*s...", (int)k, s);
    }
    return buf;
}

static const char *type_name(json_object *v) {
    switch (json_object_get_type(v)) {
    case json_type_null: return "null";
    case json_type_boolean: return "a boolean";
    case json_type_double: return "a number";
    case json_type_int: return "an integer";
    case json_type_object: return "an object";
    case json_type_array: return "an array";
    case json_type_string: return "a string";
    }
    return "?";
}

/* The field `key` of obj: false when absent or null (OpenAI's clients send null for "not given"). */
static bool field(json_object *obj, const char *key, json_object **out) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(obj, key, &v) || json_object_get_type(v) == json_type_null) return false;
    *out = v;
    return true;
}

/* A copy of the string v, refused when it holds a NUL. */
static bitnet_status copy_string(json_object *v, const char *param, char **out, size_t *len, bitnet_srv_error *e) {
    const char *s = json_object_get_string(v);
    const size_t n = (size_t)json_object_get_string_len(v);
    if (memchr(s, 0, n)) return BAD(param, "'%s' contains a NUL character (\\u0000)", param);
    if (!(*out = bitnet_strndup(s, n))) return NOMEM();
    if (len) *len = n;
    return BITNET_OK;
}

/* A number field (integer or not) in [lo, hi]. */
static bitnet_status number_field(json_object *obj, const char *key, double lo, double hi, bool *has, float *out,
                                  bitnet_srv_error *e) {
    json_object *v;
    if (!field(obj, key, &v)) return BITNET_OK;
    char b[80];
    const json_type t = json_object_get_type(v);
    if (t != json_type_int && t != json_type_double) {
        return BAD(key, "'%s' must be a number in [%g, %g], got %s %s", key, lo, hi, type_name(v), shown(v, b, sizeof b));
    }
    const double d = json_object_get_double(v);
    if (!(d >= lo && d <= hi)) return BAD(key, "'%s' must be in [%g, %g], got %s", key, lo, hi, shown(v, b, sizeof b));
    *has = true;
    *out = (float)d;
    return BITNET_OK;
}

/* An integer field in [lo, hi]. */
static bitnet_status int_field(json_object *obj, const char *key, int64_t lo, int64_t hi, bool *has, int64_t *out,
                               bitnet_srv_error *e) {
    json_object *v;
    if (!field(obj, key, &v)) return BITNET_OK;
    char b[80];
    if (json_object_get_type(v) != json_type_int) {
        return BAD(key, "'%s' must be an integer in [%lld, %lld], got %s %s", key, (long long)lo, (long long)hi,
                   type_name(v), shown(v, b, sizeof b));
    }
    const int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi) {
        return BAD(key, "'%s' must be in [%lld, %lld], got %s", key, (long long)lo, (long long)hi, shown(v, b, sizeof b));
    }
    *has = true;
    *out = x;
    return BITNET_OK;
}

static bitnet_status bool_field(json_object *obj, const char *key, bool *out, bitnet_srv_error *e) {
    json_object *v;
    if (!field(obj, key, &v)) return BITNET_OK;
    char b[80];
    if (json_object_get_type(v) != json_type_boolean) {
        return BAD(key, "'%s' must be true or false, got %s %s", key, type_name(v), shown(v, b, sizeof b));
    }
    *out = json_object_get_boolean(v);
    return BITNET_OK;
}

/* Token ids: an array of integers in [0, n_vocab) into *ids (malloc'ed, set before any refusal so that
 * the request frees it) and *n_ids. where: how messages name the array ("'prompt'", "'input'[2]"). */
static bitnet_status id_array(json_object *arr, const char *param, const char *where, int32_t n_vocab, int32_t **ids,
                              size_t *n_ids, bitnet_srv_error *e) {
    const size_t n = json_object_array_length(arr);
    *ids = malloc((n ? n : 1) * sizeof **ids);
    if (!*ids) return NOMEM();
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(arr, i);
        char b[80];
        if (json_object_get_type(v) != json_type_int) {
            return BAD(param, "%s[%zu] must be a token id (an integer), got %s %s", where, i, type_name(v),
                       shown(v, b, sizeof b));
        }
        const int64_t id = json_object_get_int64(v);
        if (id < 0 || id >= n_vocab) {
            return BAD(param, "%s[%zu] = %lld is not a token id: the vocabulary has ids [0, %d)", where, i, (long long)id,
                       (int)n_vocab);
        }
        (*ids)[i] = (int32_t)id;
    }
    *n_ids = n;
    return BITNET_OK;
}

/* Token ids of a completion prompt or a detokenize request: r->tokens. */
static bitnet_status token_array(json_object *arr, const char *param, int32_t n_vocab, bitnet_srv_request *r,
                                 bitnet_srv_error *e) {
    char where[64];
    snprintf(where, sizeof where, "'%s'", param);
    return id_array(arr, param, where, n_vocab, &r->tokens, &r->n_tokens, e);
}

/* A message's content: a string, or an array of {"type": "text", "text": STRING} parts (joined). */
static bitnet_status message_content(json_object *msg, size_t i, char **out, bitnet_srv_error *e) {
    json_object *c;
    char param[48];
    snprintf(param, sizeof param, "messages[%zu].content", i);
    if (!field(msg, "content", &c)) {
        /* an assistant message may carry only tool calls, which this server does not have */
        return BAD(param, "'%s' is missing", param);
    }
    if (json_object_get_type(c) == json_type_string) return copy_string(c, param, out, NULL, e);
    char b[80];
    if (json_object_get_type(c) != json_type_array) {
        return BAD(param, "'%s' must be a string or an array of text parts, got %s %s", param, type_name(c),
                   shown(c, b, sizeof b));
    }
    const size_t n = json_object_array_length(c);
    size_t total = 0;
    for (size_t k = 0; k < n; k++) {
        json_object *part = json_object_array_get_idx(c, k), *type, *text;
        if (json_object_get_type(part) != json_type_object || !field(part, "type", &type) ||
            json_object_get_type(type) != json_type_string || strcmp(json_object_get_string(type), "text") != 0) {
            return BAD(param, "'%s'[%zu] must be {\"type\": \"text\", \"text\": ...}: this server reads text only, got %s",
                       param, k, shown(part, b, sizeof b));
        }
        if (!field(part, "text", &text) || json_object_get_type(text) != json_type_string) {
            return BAD(param, "'%s'[%zu].text must be a string", param, k);
        }
        total += (size_t)json_object_get_string_len(text);
    }
    char *s = malloc(total + 1);
    if (!s) return NOMEM();
    size_t at = 0;
    for (size_t k = 0; k < n; k++) {
        json_object *text = NULL;
        if (!field(json_object_array_get_idx(c, k), "text", &text)) continue; /* checked above */
        const size_t len = (size_t)json_object_get_string_len(text);
        memcpy(s + at, json_object_get_string(text), len);
        at += len;
    }
    s[at] = 0;
    *out = s;
    if (memchr(s, 0, at)) return BAD(param, "'%s' contains a NUL character (\\u0000)", param);
    return BITNET_OK;
}

static bitnet_status parse_messages(json_object *root, bitnet_srv_request *r, bitnet_srv_error *e) {
    json_object *arr;
    char b[80];
    if (!field(root, "messages", &arr)) return BAD("messages", "'messages' is missing: a chat request needs at least one message");
    if (json_object_get_type(arr) != json_type_array) {
        return BAD("messages", "'messages' must be an array of messages, got %s %s", type_name(arr), shown(arr, b, sizeof b));
    }
    const size_t n = json_object_array_length(arr);
    if (n == 0) return BAD("messages", "'messages' is empty: a chat request needs at least one message");
    r->messages = calloc(n, sizeof *r->messages);
    if (!r->messages) return NOMEM();
    for (size_t i = 0; i < n; i++) {
        json_object *msg = json_object_array_get_idx(arr, i), *role;
        char param[48];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (json_object_get_type(msg) != json_type_object) {
            return BAD(param, "'%s' must be an object with 'role' and 'content', got %s", param, shown(msg, b, sizeof b));
        }
        snprintf(param, sizeof param, "messages[%zu].role", i);
        if (!field(msg, "role", &role) || json_object_get_type(role) != json_type_string) {
            return BAD(param, "'%s' must be a string: system, developer, user or assistant", param);
        }
        const char *rs = json_object_get_string(role);
        const char *mapped = strcmp(rs, "system") == 0 || strcmp(rs, "developer") == 0 ? "system"
                             : strcmp(rs, "user") == 0                                  ? "user"
                             : strcmp(rs, "assistant") == 0                             ? "assistant"
                                                                                        : NULL;
        if (!mapped) {
            return BAD(param, "'%s' is %s: this server takes system, developer, user and assistant messages (no tools)",
                       param, shown(role, b, sizeof b));
        }
        r->messages[i].role = mapped; /* a static string */
        r->n_messages = i + 1;
        char *content = NULL;
        bitnet_status st = message_content(msg, i, &content, e);
        r->messages[i].content = content;
        if (st != BITNET_OK) return st;
    }
    return BITNET_OK;
}

static bitnet_status parse_prompt(json_object *root, const bitnet_srv_limits *lim, bitnet_srv_request *r,
                                  bitnet_srv_error *e) {
    json_object *p;
    char b[80];
    if (!field(root, "prompt", &p)) return BAD("prompt", "'prompt' is missing");
    if (json_object_get_type(p) == json_type_string) return copy_string(p, "prompt", &r->prompt, &r->prompt_len, e);
    if (json_object_get_type(p) == json_type_array) {
        const size_t n = json_object_array_length(p);
        json_object *first = n ? json_object_array_get_idx(p, 0) : NULL;
        if (first && json_object_get_type(first) == json_type_string) {
            if (n != 1) return BAD("prompt", "'prompt' has %zu strings: this server answers one prompt per request", n);
            return copy_string(first, "prompt", &r->prompt, &r->prompt_len, e);
        }
        if (first && json_object_get_type(first) == json_type_array) {
            return BAD("prompt", "'prompt' is an array of token arrays: this server answers one prompt per request");
        }
        return token_array(p, "prompt", lim->n_vocab, r, e);
    }
    return BAD("prompt", "'prompt' must be a string, an array of one string or an array of token ids, got %s %s",
               type_name(p), shown(p, b, sizeof b));
}

static bitnet_status parse_stop(json_object *root, const bitnet_srv_limits *lim, bitnet_srv_request *r,
                                bitnet_srv_error *e) {
    json_object *s;
    char b[80];
    if (!field(root, "stop", &s)) return BITNET_OK;
    const bool one = json_object_get_type(s) == json_type_string;
    if (!one && json_object_get_type(s) != json_type_array) {
        return BAD("stop", "'stop' must be a string or an array of strings, got %s %s", type_name(s), shown(s, b, sizeof b));
    }
    const size_t n = one ? 1 : json_object_array_length(s);
    if (n > (size_t)lim->max_stop) return BAD("stop", "'stop' has %zu strings, at most %d are accepted", n, (int)lim->max_stop);
    r->stop = calloc(n ? n : 1, sizeof *r->stop);
    if (!r->stop) return NOMEM();
    for (size_t i = 0; i < n; i++) {
        json_object *v = one ? s : json_object_array_get_idx(s, i);
        if (json_object_get_type(v) != json_type_string) {
            return BAD("stop", "'stop'[%zu] must be a string, got %s %s", i, type_name(v), shown(v, b, sizeof b));
        }
        const size_t len = (size_t)json_object_get_string_len(v);
        if (len == 0) return BAD("stop", "'stop'[%zu] is empty", i);
        if (len > (size_t)lim->max_stop_len) {
            return BAD("stop", "'stop'[%zu] has %zu bytes, at most %d are accepted", i, len, (int)lim->max_stop_len);
        }
        size_t got;
        bitnet_status st = copy_string(v, "stop", &r->stop[i], &got, e);
        if (st != BITNET_OK) return st;
        r->n_stop = i + 1;
    }
    return BITNET_OK;
}

/* "model": absent, null, or the served model's id (404 model_not_found for another). */
static bitnet_status parse_model(json_object *root, const bitnet_srv_limits *lim, bitnet_srv_error *e) {
    json_object *v;
    char b[80];
    if (!field(root, "model", &v)) return BITNET_OK;
    if (json_object_get_type(v) != json_type_string) {
        return BAD("model", "'model' must be a string, got %s %s", type_name(v), shown(v, b, sizeof b));
    }
    if (lim->model_id && strcmp(json_object_get_string(v), lim->model_id) != 0) {
        return bitnet_srv_fail(e, 404, k_invalid, "model", "model_not_found",
                               "The model %s does not exist: this server serves '%s' (GET /v1/models)",
                               shown(v, b, sizeof b), lim->model_id);
    }
    return BITNET_OK;
}

/* The fields chat and completion share: model, sampling, stop, stream, and the refused features. */
static bitnet_status parse_generation(json_object *root, const bitnet_srv_limits *lim, bitnet_srv_request *r,
                                      bitnet_srv_error *e) {
    json_object *v;
    char b[80];
    bitnet_status st = parse_model(root, lim, e);
    if (st != BITNET_OK) return st;
    bool has = false;
    int64_t x = 0;
    r->max_tokens = -1;
    for (int k = 0; k < 2; k++) {
        const char *key = k == 0 ? "max_tokens" : "max_completion_tokens";
        has = false;
        if ((st = int_field(root, key, 1, lim->max_tokens_cap, &has, &x, e)) != BITNET_OK) return st;
        if (has) r->max_tokens = (int32_t)x;
    }
    if ((st = number_field(root, "temperature", 0.0, 2.0, &r->has_temperature, &r->temperature, e)) != BITNET_OK) return st;
    if ((st = number_field(root, "top_p", 0.0, 1.0, &r->has_top_p, &r->top_p, e)) != BITNET_OK) return st;
    has = false;
    if ((st = int_field(root, "top_k", 0, INT32_MAX, &has, &x, e)) != BITNET_OK) return st;
    r->has_top_k = has;
    r->top_k = (int32_t)x;
    if (field(root, "seed", &v)) {
        if (json_object_get_type(v) != json_type_int) {
            return BAD("seed", "'seed' must be an integer, got %s %s", type_name(v), shown(v, b, sizeof b));
        }
        const int64_t s = json_object_get_int64(v);
        r->seed = s == INT64_MAX ? json_object_get_uint64(v) : (uint64_t)s;
        r->has_seed = true;
    }
    if ((st = parse_stop(root, lim, r, e)) != BITNET_OK) return st;
    if ((st = bool_field(root, "stream", &r->stream, e)) != BITNET_OK) return st;
    if ((st = bool_field(root, "ignore_eos", &r->ignore_eos, e)) != BITNET_OK) return st;
    if (field(root, "stream_options", &v)) {
        if (json_object_get_type(v) != json_type_object) {
            return BAD("stream_options", "'stream_options' must be an object, got %s %s", type_name(v), shown(v, b, sizeof b));
        }
        if ((st = bool_field(v, "include_usage", &r->include_usage, e)) != BITNET_OK) return st;
    }
    has = false;
    if ((st = int_field(root, "n", 1, 1, &has, &x, e)) != BITNET_OK) return st;
    bool flag = false;
    if ((st = bool_field(root, "logprobs", &flag, e)) != BITNET_OK) return st;
    if (flag) return BAD("logprobs", "'logprobs' is not supported by this server");
    if (field(root, "logprobs", &v) && json_object_get_type(v) == json_type_int) {
        return BAD("logprobs", "'logprobs' is not supported by this server");
    }
    static const char *const k_refused[] = {"tools", "functions", "audio"};
    for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++) {
        if (field(root, k_refused[i], &v) &&
            !(json_object_get_type(v) == json_type_array && json_object_array_length(v) == 0)) {
            return BAD(k_refused[i], "'%s' is not supported by this server (text generation only)", k_refused[i]);
        }
    }
    return BITNET_OK;
}

/* An embeddings request: "input" in any of its four forms, "model", "encoding_format", "dimensions". */
static bitnet_status parse_embeddings(json_object *root, const bitnet_srv_limits *lim,
                                      const bitnet_srv_embd_limits *el, bitnet_srv_request *r, bitnet_srv_error *e) {
    json_object *in, *v;
    char b[80], where[48];
    bitnet_status st = parse_model(root, lim, e);
    if (st != BITNET_OK) return st;
    if (!field(root, "input", &in)) return BAD("input", "'input' is missing: give a string or an array of strings");
    const json_type t = json_object_get_type(in);
    if (t != json_type_string && t != json_type_array) {
        return BAD("input", "'input' must be a string, an array of strings, an array of token ids or an array of "
                            "token-id arrays, got %s %s", type_name(in), shown(in, b, sizeof b));
    }
    const size_t n_items = t == json_type_string ? 1 : json_object_array_length(in);
    if (n_items == 0) return BAD("input", "'input' is an empty array: give at least one text");
    json_object *first = t == json_type_string ? in : json_object_array_get_idx(in, 0);
    const json_type ft = json_object_get_type(first);
    if (ft != json_type_string && ft != json_type_int && ft != json_type_array) {
        return BAD("input", "'input'[0] must be a string, a token id or an array of token ids, got %s %s",
                   type_name(first), shown(first, b, sizeof b));
    }
    const bool one_id_list = t == json_type_array && ft == json_type_int; /* [ids]: one text */
    const size_t n = one_id_list ? 1 : n_items;
    const int32_t max_inputs = el->max_inputs >= 1 ? el->max_inputs : 1;
    if (n > (size_t)max_inputs) {
        return BAD("input", "'input' has %zu texts, at most %d are accepted in one request", n, (int)max_inputs);
    }
    if (one_id_list || ft == json_type_array) {
        r->input_ids = calloc(n, sizeof *r->input_ids);
        r->input_n_ids = calloc(n, sizeof *r->input_n_ids);
        if (!r->input_ids || !r->input_n_ids) return NOMEM();
        r->n_inputs = n;
        for (size_t i = 0; i < n; i++) {
            json_object *arr = one_id_list ? in : json_object_array_get_idx(in, i);
            if (one_id_list) snprintf(where, sizeof where, "'input'");
            else snprintf(where, sizeof where, "'input'[%zu]", i);
            if (json_object_get_type(arr) != json_type_array) {
                return BAD("input", "%s must be an array of token ids (as 'input'[0] is), got %s %s", where, type_name(arr),
                           shown(arr, b, sizeof b));
            }
            if ((st = id_array(arr, "input", where, lim->n_vocab, &r->input_ids[i], &r->input_n_ids[i], e)) != BITNET_OK)
                return st;
            if (r->input_n_ids[i] == 0) return BAD("input", "%s is an empty array of token ids", where);
        }
    } else {
        r->inputs = calloc(n, sizeof *r->inputs);
        r->input_lens = calloc(n, sizeof *r->input_lens);
        if (!r->inputs || !r->input_lens) return NOMEM();
        r->n_inputs = n;
        for (size_t i = 0; i < n; i++) {
            json_object *s = t == json_type_string ? in : json_object_array_get_idx(in, i);
            if (t == json_type_string) snprintf(where, sizeof where, "'input'");
            else snprintf(where, sizeof where, "'input'[%zu]", i);
            if (json_object_get_type(s) != json_type_string) {
                return BAD("input", "%s must be a string (as 'input'[0] is), got %s %s", where, type_name(s),
                           shown(s, b, sizeof b));
            }
            if (json_object_get_string_len(s) == 0) return BAD("input", "%s is an empty string", where);
            if ((st = copy_string(s, "input", &r->inputs[i], &r->input_lens[i], e)) != BITNET_OK) return st;
        }
    }
    if (field(root, "encoding_format", &v)) {
        const char *f = json_object_get_type(v) == json_type_string ? json_object_get_string(v) : NULL;
        if (!f || (strcmp(f, "float") != 0 && strcmp(f, "base64") != 0)) {
            return BAD("encoding_format", "'encoding_format' must be \"float\" or \"base64\", got %s %s", type_name(v),
                       shown(v, b, sizeof b));
        }
        r->base64 = strcmp(f, "base64") == 0;
    }
    if (field(root, "dimensions", &v)) {
        if (json_object_get_type(v) != json_type_int) {
            return BAD("dimensions", "'dimensions' must be an integer, got %s %s", type_name(v), shown(v, b, sizeof b));
        }
        if (json_object_get_int64(v) != el->n_embd) {
            return BAD("dimensions", "'dimensions' is %s: this model's embeddings have %d dimensions, and this server "
                                     "does not shorten them", shown(v, b, sizeof b), (int)el->n_embd);
        }
    }
    return BITNET_OK;
}

/* bitnet_srv_parse and bitnet_srv_parse_embeddings (el NULL: an embeddings body is refused with 500). */
static bitnet_status parse_body(bitnet_srv_kind kind, const char *body, size_t len, const bitnet_srv_limits *lim,
                                const bitnet_srv_embd_limits *el, bitnet_srv_request *out, bitnet_srv_error *e) {
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->max_tokens = -1;
    if (!bitnet_srv_utf8_valid(body, len)) return BAD("", "the request body is not valid UTF-8");
    json_tokener *tok = json_tokener_new();
    if (!tok) return NOMEM();
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *root = len ? json_tokener_parse_ex(tok, body, (int)(len > INT32_MAX ? INT32_MAX : len)) : NULL;
    const enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    bitnet_status st = BITNET_OK;
    if (len > INT32_MAX) {
        st = BAD("", "the request body is too large");
    } else if (!root || jerr != json_tokener_success) {
        st = len == 0 || jerr == json_tokener_continue
                 ? BAD("", "the request body is not a complete JSON object%s", len == 0 ? " (it is empty)" : "")
                 : BAD("", "the request body is not valid JSON: %s at byte %zu", json_tokener_error_desc(jerr), end);
    } else {
        while (end < len && (body[end] == ' ' || body[end] == '\t' || body[end] == '\r' || body[end] == '\n')) end++;
        if (end < len) {
            st = BAD("", "the request body has more after its JSON value (at byte %zu)", end);
        } else if (json_object_get_type(root) != json_type_object) {
            st = BAD("", "the request body must be a JSON object, got %s", type_name(root));
        }
    }
    if (st == BITNET_OK) {
        json_object *v;
        char b[80];
        switch (kind) {
        case BITNET_SRV_CHAT:
            if ((st = parse_messages(root, out, e)) == BITNET_OK) st = parse_generation(root, lim, out, e);
            break;
        case BITNET_SRV_COMPLETION:
            if ((st = parse_prompt(root, lim, out, e)) == BITNET_OK) st = parse_generation(root, lim, out, e);
            break;
        case BITNET_SRV_TOKENIZE:
            if (!field(root, "content", &v) || json_object_get_type(v) != json_type_string) {
                st = BAD("content", "'content' must be a string");
            } else if ((st = copy_string(v, "content", &out->prompt, &out->prompt_len, e)) == BITNET_OK) {
                st = bool_field(root, "add_special", &out->add_special, e);
            }
            break;
        case BITNET_SRV_DETOKENIZE:
            if (!field(root, "tokens", &v) || json_object_get_type(v) != json_type_array) {
                st = field(root, "tokens", &v) ? BAD("tokens", "'tokens' must be an array of token ids, got %s %s",
                                                     type_name(v), shown(v, b, sizeof b))
                                               : BAD("tokens", "'tokens' is missing");
            } else {
                st = token_array(v, "tokens", lim->n_vocab, out, e);
            }
            break;
        case BITNET_SRV_EMBEDDINGS:
            st = el ? parse_embeddings(root, lim, el, out, e)
                    : bitnet_srv_fail(e, 500, "server_error", "", "",
                                      "embeddings bodies are parsed by bitnet_srv_parse_embeddings (their limits)");
            break;
        default:
            st = bitnet_srv_fail(e, 500, "server_error", "", "", "unknown request kind %d", (int)kind);
        }
    }
    json_object_put(root);
    return st;
}

bitnet_status bitnet_srv_parse(bitnet_srv_kind kind, const char *body, size_t len, const bitnet_srv_limits *lim,
                               bitnet_srv_request *out, bitnet_srv_error *e) {
    return parse_body(kind, body, len, lim, NULL, out, e);
}

bitnet_status bitnet_srv_parse_embeddings(const char *body, size_t len, const bitnet_srv_limits *lim,
                                          const bitnet_srv_embd_limits *el, bitnet_srv_request *out,
                                          bitnet_srv_error *e) {
    return parse_body(BITNET_SRV_EMBEDDINGS, body, len, lim, el, out, e);
}

void bitnet_srv_request_free(bitnet_srv_request *r) {
    if (!r) return;
    for (size_t i = 0; r->messages && i < r->n_messages; i++) free((void *)r->messages[i].content);
    free(r->messages);
    free(r->prompt);
    free(r->tokens);
    for (size_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    for (size_t i = 0; i < r->n_inputs; i++) {
        if (r->inputs) free(r->inputs[i]);
        if (r->input_ids) free(r->input_ids[i]);
    }
    free(r->inputs);
    free(r->input_lens);
    free(r->input_ids);
    free(r->input_n_ids);
    memset(r, 0, sizeof *r);
}
