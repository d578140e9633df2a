/* fuzz_server_request.c — libFuzzer target: llama-server's request bodies (src/server/request.h), the
 * parser every HTTP client reaches before anything is queued.
 * Input: one selector byte (mod 5: chat, completion, tokenize, detokenize, embeddings), then the body.
 * Checked: a parse either fails with an error an HTTP response can carry (status 400, 404 or 500, a type,
 * a message that is valid UTF-8) or succeeds with a request that keeps the documented ranges (messages
 * with the three roles and content, max_tokens -1 or in [1, cap], stop strings non-empty and short
 * enough, token ids in [0, n_vocab), sampling values in range; embeddings: 1 to max_inputs texts, all
 * non-empty strings without NUL or all non-empty id lists in [0, n_vocab)); and bitnet_srv_utf8_clean turns the
 * body into valid UTF-8 that keeps every valid byte sequence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"

static const bitnet_srv_limits k_lim = {"model.gguf", 512, 4096, 16, 256};
static const bitnet_srv_embd_limits k_embd = {64, 8};

/* The documented shape of a parsed embeddings request (request.h); aborts otherwise. */
static void check_embeddings(const bitnet_srv_request *q) {
    if (q->n_inputs < 1 || q->n_inputs > (size_t)k_embd.max_inputs) abort();
    if (!q->inputs == !q->input_ids) abort(); /* exactly one of the two forms */
    for (size_t i = 0; i < q->n_inputs; i++) {
        if (q->inputs) {
            if (q->input_lens[i] == 0 || strlen(q->inputs[i]) != q->input_lens[i]) abort();
        } else {
            if (q->input_n_ids[i] < 1) abort();
            for (size_t k = 0; k < q->input_n_ids[i]; k++) {
                if (q->input_ids[i][k] < 0 || q->input_ids[i][k] >= k_lim.n_vocab) abort();
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int sel = data[0] % 5;
    const bitnet_srv_kind kind = sel == 4 ? BITNET_SRV_EMBEDDINGS : (bitnet_srv_kind)sel;
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    bitnet_srv_request q;
    bitnet_srv_error e;
    memset(&e, 0, sizeof e);
    const bitnet_status st = sel == 4 ? bitnet_srv_parse_embeddings(body, len, &k_lim, &k_embd, &q, &e)
                                      : bitnet_srv_parse(kind, body, len, &k_lim, &q, &e);
    if (st != BITNET_OK) {
        if (e.http_status != 400 && e.http_status != 404 && e.http_status != 500) abort();
        if (!e.type[0] || !e.message[0]) abort();
        if (!bitnet_srv_utf8_valid(e.message, strlen(e.message))) abort();
    } else {
        if (q.kind != kind) abort();
        if (kind == BITNET_SRV_EMBEDDINGS) check_embeddings(&q);
        if (kind == BITNET_SRV_CHAT) {
            if (q.n_messages < 1) abort();
            for (size_t i = 0; i < q.n_messages; i++) {
                const char *r = q.messages[i].role;
                if (strcmp(r, "system") != 0 && strcmp(r, "user") != 0 && strcmp(r, "assistant") != 0) abort();
                if (!q.messages[i].content) abort();
            }
        }
        if (kind == BITNET_SRV_COMPLETION && !q.prompt && !q.tokens) abort();
        if (q.max_tokens != -1 && (q.max_tokens < 1 || q.max_tokens > k_lim.max_tokens_cap)) abort();
        if (q.n_stop > (size_t)k_lim.max_stop) abort();
        for (size_t i = 0; i < q.n_stop; i++) {
            const size_t n = strlen(q.stop[i]);
            if (n == 0 || n > (size_t)k_lim.max_stop_len) abort();
        }
        for (size_t i = 0; i < q.n_tokens; i++) {
            if (q.tokens[i] < 0 || q.tokens[i] >= k_lim.n_vocab) abort();
        }
        if (q.has_temperature && !(q.temperature >= 0.0f && q.temperature <= 2.0f)) abort();
        if (q.has_top_p && !(q.top_p >= 0.0f && q.top_p <= 1.0f)) abort();
        if (q.has_top_k && q.top_k < 0) abort();
        if (q.prompt && strlen(q.prompt) != q.prompt_len) abort(); /* no NUL inside */
    }
    bitnet_srv_request_free(&q);

    size_t n = 0;
    char *clean = bitnet_srv_utf8_clean(body, len, &n);
    if (!clean) return 0;
    if (!bitnet_srv_utf8_valid(clean, n) || n < len || n > 3 * len) abort();
    if (bitnet_srv_utf8_valid(body, len) && (n != len || memcmp(clean, body, len) != 0)) abort();
    free(clean);
    return 0;
}
