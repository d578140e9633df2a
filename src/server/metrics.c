/* metrics.c — llama-server's /metrics counters and their Prometheus text (metrics.h). */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The statuses this server answers with; any other is counted as "other". */
static const int k_status[] = {200, 400, 401, 404, 405, 413, 429, 500, 503};
enum { N_STATUS = sizeof k_status / sizeof k_status[0] + 1 };

/* Upper bounds of the histogram buckets in seconds (+Inf is implied). */
static const double k_lat[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
static const double k_ttft[] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
enum { N_LAT = sizeof k_lat / sizeof k_lat[0] + 1, N_TTFT = sizeof k_ttft / sizeof k_ttft[0] + 1 };

typedef struct histo {
    uint64_t n[N_LAT > N_TTFT ? N_LAT : N_TTFT]; /* per bucket, not cumulative; the last is +Inf */
    uint64_t count;
    double sum;
} histo;

struct bitnet_metrics {
    pthread_mutex_t mu;
    uint64_t req[BITNET_EP_COUNT][N_STATUS];
    histo lat[BITNET_EP_COUNT];
    histo ttft;
    uint64_t timeouts[2];
};

const char *bitnet_endpoint_name(bitnet_endpoint ep) {
    static const char *names[BITNET_EP_COUNT] = {"/v1/chat/completions", "/v1/completions", "/v1/embeddings",
                                                 "/v1/models",           "/health",         "/tokenize",
                                                 "/detokenize",          "/metrics",        "other"};
    return (unsigned)ep < BITNET_EP_COUNT ? names[ep] : "other";
}

bitnet_metrics *bitnet_metrics_create(void) {
    bitnet_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    if (pthread_mutex_init(&m->mu, NULL) != 0) {
        free(m);
        return NULL;
    }
    return m;
}

void bitnet_metrics_free(bitnet_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(histo *h, const double *bounds, int n_bounds, double v) {
    int b = 0;
    while (b < n_bounds && v > bounds[b]) b++;
    h->n[b]++;
    h->count++;
    h->sum += v;
}

void bitnet_metrics_request(bitnet_metrics *m, bitnet_endpoint ep, int status, double seconds) {
    if (!m) return;
    if ((unsigned)ep >= BITNET_EP_COUNT) ep = BITNET_EP_OTHER;
    int si = N_STATUS - 1;
    for (int i = 0; i < N_STATUS - 1; i++) {
        if (k_status[i] == status) si = i;
    }
    pthread_mutex_lock(&m->mu);
    m->req[ep][si]++;
    observe(&m->lat[ep], k_lat, N_LAT - 1, seconds < 0 ? 0 : seconds);
    pthread_mutex_unlock(&m->mu);
}

void bitnet_metrics_ttft(bitnet_metrics *m, double seconds) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    observe(&m->ttft, k_ttft, N_TTFT - 1, seconds < 0 ? 0 : seconds);
    pthread_mutex_unlock(&m->mu);
}

void bitnet_metrics_timeout(bitnet_metrics *m, bitnet_timeout_kind k) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->timeouts[k == BITNET_TIMEOUT_WRITE]++;
    pthread_mutex_unlock(&m->mu);
}

/* A growing string; on out of memory it stays failed and the render returns NULL. */
typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool bad;
} sbuf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put(sbuf *b, const char *fmt, ...) {
    if (b->bad) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->bad = true;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->bad = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
}

static void family(sbuf *b, const char *name, const char *type, const char *help) {
    put(b, "# HELP bitnet_%s %s\n# TYPE bitnet_%s %s\n", name, help, name, type);
}

/* The lines of one histogram; labels is "" or `key="value",` (with the trailing comma). */
static void put_histo(sbuf *b, const char *name, const char *labels, const histo *h, const double *bounds, int n_bounds) {
    uint64_t cum = 0;
    for (int i = 0; i < n_bounds; i++) {
        cum += h->n[i];
        put(b, "bitnet_%s_bucket{%sle=\"%g\"} %llu\n", name, labels, bounds[i], (unsigned long long)cum);
    }
    cum += h->n[n_bounds];
    put(b, "bitnet_%s_bucket{%sle=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
    char lab[128] = "";
    if (labels[0]) snprintf(lab, sizeof lab, "{%.*s}", (int)strlen(labels) - 1, labels);
    put(b, "bitnet_%s_sum%s %.6f\n", name, lab, h->sum);
    put(b, "bitnet_%s_count%s %llu\n", name, lab, (unsigned long long)h->count);
}

char *bitnet_metrics_render(bitnet_metrics *m, const bitnet_engine_stats *es, const bitnet_guard_stats *gs) {
    sbuf b = {0};
    pthread_mutex_lock(&m->mu);
    family(&b, "requests_total", "counter", "Answered HTTP requests by endpoint and status.");
    for (int ep = 0; ep < BITNET_EP_COUNT; ep++) {
        for (int si = 0; si < N_STATUS; si++) {
            if (!m->req[ep][si]) continue;
            char st[8];
            if (si < N_STATUS - 1) snprintf(st, sizeof st, "%d", k_status[si]);
            else snprintf(st, sizeof st, "other");
            put(&b, "bitnet_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n", bitnet_endpoint_name((bitnet_endpoint)ep),
                st, (unsigned long long)m->req[ep][si]);
        }
    }
    if (gs->timeout_request) { /* the guard's answers (guard.h): no endpoint is known before the request is whole */
        put(&b, "bitnet_requests_total{endpoint=\"other\",status=\"408\"} %llu\n", (unsigned long long)gs->timeout_request);
    }
    family(&b, "request_duration_seconds", "histogram",
           "Seconds from a request's headers to its last byte handed to the socket.");
    for (int ep = 0; ep < BITNET_EP_COUNT; ep++) {
        if (!m->lat[ep].count) continue;
        char lab[64];
        snprintf(lab, sizeof lab, "endpoint=\"%s\",", bitnet_endpoint_name((bitnet_endpoint)ep));
        put_histo(&b, "request_duration_seconds", lab, &m->lat[ep], k_lat, N_LAT - 1);
    }
    family(&b, "time_to_first_token_seconds", "histogram",
           "Seconds from a generation request's headers to its first text.");
    put_histo(&b, "time_to_first_token_seconds", "", &m->ttft, k_ttft, N_TTFT - 1);
    uint64_t n429 = 0, n413 = 0;
    for (int ep = 0; ep < BITNET_EP_COUNT; ep++) {
        for (int si = 0; si < N_STATUS - 1; si++) {
            if (k_status[si] == 429) n429 += m->req[ep][si];
            if (k_status[si] == 413) n413 += m->req[ep][si];
        }
    }
    const uint64_t t_read = m->timeouts[0], t_write = m->timeouts[1];
    pthread_mutex_unlock(&m->mu);

    family(&b, "rejected_total", "counter", "Requests and connections refused or closed, by reason.");
    put(&b, "bitnet_rejected_total{reason=\"queue_full\"} %llu\n", (unsigned long long)n429);
    put(&b, "bitnet_rejected_total{reason=\"body_too_large\"} %llu\n", (unsigned long long)n413);
    put(&b, "bitnet_rejected_total{reason=\"per_address_limit\"} %llu\n", (unsigned long long)gs->rejected_address);
    put(&b, "bitnet_rejected_total{reason=\"request_timeout\"} %llu\n", (unsigned long long)gs->timeout_request);
    put(&b, "bitnet_rejected_total{reason=\"keepalive_timeout\"} %llu\n", (unsigned long long)gs->timeout_keepalive);
    put(&b, "bitnet_rejected_total{reason=\"read_timeout\"} %llu\n", (unsigned long long)t_read);
    put(&b, "bitnet_rejected_total{reason=\"write_timeout\"} %llu\n", (unsigned long long)t_write);
    family(&b, "connections_open", "gauge", "Connections open now.");
    put(&b, "bitnet_connections_open %u\n", (unsigned)gs->open);
    family(&b, "connections_accepted_total", "counter", "Connections accepted.");
    put(&b, "bitnet_connections_accepted_total %llu\n", (unsigned long long)gs->accepted);

    family(&b, "prompt_tokens_total", "counter", "Prompt (and embedding input) tokens evaluated.");
    put(&b, "bitnet_prompt_tokens_total %llu\n", (unsigned long long)es->prompt_evaluated);
    family(&b, "generated_tokens_total", "counter", "Tokens generated.");
    put(&b, "bitnet_generated_tokens_total %llu\n", (unsigned long long)es->generated);
    family(&b, "tokens_per_second", "gauge",
           "Mean tokens per second over the busy time of the forward passes that had tokens of the phase.");
    put(&b, "bitnet_tokens_per_second{phase=\"prompt\"} %.3f\n",
        es->busy_prompt_s > 0 ? (double)es->prompt_evaluated / es->busy_prompt_s : 0.0);
    put(&b, "bitnet_tokens_per_second{phase=\"generation\"} %.3f\n",
        es->busy_gen_s > 0 ? (double)es->generated / es->busy_gen_s : 0.0);
    family(&b, "forward_passes_total", "counter", "Forward passes of the engine.");
    put(&b, "bitnet_forward_passes_total %llu\n", (unsigned long long)es->steps);
    family(&b, "slots", "gauge", "Slots by state.");
    put(&b, "bitnet_slots{state=\"busy\"} %d\n", (int)es->busy);
    put(&b, "bitnet_slots{state=\"idle\"} %d\n", (int)(es->slots - es->busy));
    family(&b, "queue_length", "gauge", "Requests waiting for a slot.");
    put(&b, "bitnet_queue_length %d\n", (int)es->waiting);
    family(&b, "engine_requests_finished_total", "counter", "Requests the engine ended, any way.");
    put(&b, "bitnet_engine_requests_finished_total %llu\n", (unsigned long long)es->finished);
    family(&b, "engine_requests_cancelled_total", "counter", "Requests the engine ended because their client left.");
    put(&b, "bitnet_engine_requests_cancelled_total %llu\n", (unsigned long long)es->cancelled);
    if (b.bad) {
        free(b.p);
        return NULL;
    }
    return b.p ? b.p : strdup("");
}
