/* engine.c — llama-server's continuous batching (engine.h).
 *
 * One lock (e->mu) guards the queue, the jobs' shared fields (text, finish, cancel, refs) and the slot
 * assignment; the slots' decoding state (positions, sampler, text not yet released) belongs to the
 * engine thread alone. A step: under the lock, drop cancelled jobs and give free slots to waiting ones;
 * without it, build the batch, run bitnet_decode_batch, sample and cut the text; under the lock again,
 * publish each slot's new text and finish, then wake the waiting threads (e->progress). */
#include "server/engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/sampler.h"
#include "text/tokenizer.h"

struct bitnet_job {
    /* set at submit, then read-only */
    bitnet_engine *e;
    uint64_t id; /* submit order */
    int32_t *prompt;
    size_t n_prompt;
    int32_t max_tokens;
    float temperature, top_p;
    int32_t top_k;
    uint64_t seed;
    bool ignore_eos;
    char **stop;
    size_t *stop_len;
    size_t n_stop;
    /* under e->mu */
    int refs;        /* the caller's and the engine's */
    bool cancel;
    char *text;      /* released text */
    size_t len, cap;
    bitnet_finish finish;
    int32_t n_gen;
    char error[256];
    bitnet_job *next; /* the wait queue */
};

typedef struct slot {
    bitnet_job *job;   /* NULL: free (assigned and cleared under e->mu) */
    int32_t n_fed;     /* prompt tokens evaluated */
    int32_t n_past;    /* cache positions in use */
    int32_t next_tok;  /* the sampled token to evaluate next (has_next) */
    bool has_next;
    int32_t n_gen;
    bitnet_sampler smp;
    bitnet_utf8_stream utf8;
    char *gen;         /* text generated so far (whole UTF-8 characters, or bytes the stream gave up on) */
    size_t gen_len, gen_cap;
    size_t release_to; /* bytes of gen that may be shown */
    size_t published;  /* bytes of gen copied to the job */
    bitnet_finish finish;
    bool cut;          /* ended by a stop string: gen ends where it began */
    char error[256];
    int32_t bi;        /* this step: batch index whose logits the slot samples from, or -1 */
    bool in_batch;     /* this step's batch holds tokens of this slot */
} slot;

struct bitnet_engine {
    bitnet_model *m;
    const bitnet_vocab *v;
    int32_t n_vocab;
    bitnet_context *ctx;
    bitnet_engine_params p;
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work;     /* the engine thread waits for requests */
    pthread_cond_t progress; /* callers wait for text or an end */
    bool quit, draining;
    slot *slots;
    int32_t n_busy, n_waiting;
    uint64_t n_finished, n_cancelled, n_generated; /* bitnet_engine_stats */
    bitnet_job *q_head, *q_tail;
    uint64_t next_id;
    int32_t *b_tok, *b_pos, *b_seq; /* the step's batch (n_batch) */
    bool *b_logits;
    int32_t *order;                 /* slot indices, oldest job first */
};

const char *bitnet_finish_name(bitnet_finish f) {
    switch (f) {
    case BITNET_FINISH_STOP: return "stop";
    case BITNET_FINISH_LENGTH: return "length";
    case BITNET_FINISH_CANCELLED: return "cancelled";
    case BITNET_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

static void job_free(bitnet_job *j) {
    for (size_t i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->stop);
    free(j->stop_len);
    free(j->prompt);
    free(j->text);
    free(j);
}

/* Drops one reference (under e->mu). */
static void job_unref(bitnet_job *j) {
    if (--j->refs == 0) job_free(j);
}

/* Appends n bytes at s to the growing buffer *buf (*len bytes used of *cap); false on out of memory. */
static bool buf_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (n == 0) return true;
    if (*len + n > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n) c *= 2;
        char *t = realloc(*buf, c);
        if (!t) return false;
        *buf = t;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    return true;
}

/* Appends n bytes to the job's text (under e->mu); false on out of memory. */
static bool job_append(bitnet_job *j, const char *s, size_t n) { return buf_append(&j->text, &j->len, &j->cap, s, n); }

/* The end of a job that never reached a slot, or of one in a slot (under e->mu): its final state, the
 * engine's reference dropped, the waiters woken by the caller. */
static void job_end(bitnet_job *j, bitnet_finish f, const char *error) {
    j->finish = f;
    if (error) snprintf(j->error, sizeof j->error, "%.240s", error);
    job_unref(j);
}

static void slot_clear(slot *s) {
    bitnet_sampler_free(&s->smp);
    free(s->gen);
    memset(s, 0, sizeof *s);
    s->bi = -1;
}

/* Gives a waiting job to a free slot (under e->mu). A sampler that cannot be made ends the job. */
static void slot_start(bitnet_engine *e, slot *s, bitnet_job *j) {
    slot_clear(s);
    bitnet_error err = {{0}};
    if (bitnet_sampler_init(&s->smp, e->n_vocab, j->temperature, j->top_k, j->top_p, j->seed, &err) != BITNET_OK) {
        job_end(j, BITNET_FINISH_ERROR, err.msg);
        return;
    }
    bitnet_utf8_stream_init(&s->utf8);
    s->job = j;
    e->n_busy++;
}

/* Appends n bytes to the slot's generated text; false on out of memory. */
static bool gen_append(slot *s, const char *p, size_t n) { return buf_append(&s->gen, &s->gen_len, &s->gen_cap, p, n); }

/* After new text: ends the generation at the first stop string that occurs (the text is cut where it
 * begins), else moves release_to up to the longest tail that could still grow into a stop string. */
static void cut_stops(slot *s, const bitnet_job *j) {
    size_t first = SIZE_MAX;
    for (size_t k = 0; k < j->n_stop; k++) {
        const size_t L = j->stop_len[k];
        if (s->gen_len < L) continue;
        /* text before release_to was checked before, except where a match could end after it */
        size_t from = s->release_to >= L - 1 ? s->release_to - (L - 1) : 0;
        for (size_t at = from; at + L <= s->gen_len && at < first; at++) {
            if (memcmp(s->gen + at, j->stop[k], L) == 0) {
                first = at;
                break;
            }
        }
    }
    if (first != SIZE_MAX) {
        s->gen_len = first;
        s->release_to = first;
        s->finish = BITNET_FINISH_STOP;
        s->cut = true;
        return;
    }
    size_t hold = 0;
    for (size_t k = 0; k < j->n_stop; k++) {
        const size_t L = j->stop_len[k];
        for (size_t h = L - 1; h > hold; h--) {
            if (h <= s->gen_len && memcmp(s->gen + s->gen_len - h, j->stop[k], h) == 0) {
                hold = h;
                break;
            }
        }
    }
    const size_t to = s->gen_len - hold;
    if (to > s->release_to) s->release_to = to;
}

/* The sampled token tok of slot s: its end, or its text and the next step's input. */
static void take_token(bitnet_engine *e, slot *s, int32_t tok) {
    const bitnet_job *j = s->job;
    if (!j->ignore_eos && bitnet_vocab_is_eog(e->v, tok)) {
        s->finish = BITNET_FINISH_STOP;
        return;
    }
    s->n_gen++;
    char piece[256], out[256 + 3];
    char *big = NULL;
    const char *src = piece;
    size_t n = bitnet_token_to_piece(e->v, tok, false, piece, sizeof piece);
    if (n > sizeof piece) {
        big = malloc(2 * n + 3);
        if (!big) {
            s->finish = BITNET_FINISH_ERROR;
            snprintf(s->error, sizeof s->error, "out of memory for the text of token %d", (int)tok);
            return;
        }
        bitnet_token_to_piece(e->v, tok, false, big, n);
        src = big;
    }
    char *dst = big ? big + n : out;
    const size_t m = bitnet_utf8_stream_push(&s->utf8, src, n, dst);
    const bool ok = gen_append(s, dst, m);
    free(big);
    if (!ok) {
        s->finish = BITNET_FINISH_ERROR;
        snprintf(s->error, sizeof s->error, "out of memory for the generated text");
        return;
    }
    cut_stops(s, j);
    if (s->finish == BITNET_FINISH_NONE && s->n_gen >= j->max_tokens) s->finish = BITNET_FINISH_LENGTH;
    if (s->finish == BITNET_FINISH_NONE) {
        s->next_tok = tok;
        s->has_next = true;
    }
}

/* At a finish other than a stop string: what the UTF-8 stream still holds, then all of the text. */
static void release_all(slot *s) {
    if (!s->cut) {
        char rest[4];
        const size_t n = bitnet_utf8_stream_flush(&s->utf8, rest);
        if (!gen_append(s, rest, n) && s->finish != BITNET_FINISH_ERROR) {
            s->finish = BITNET_FINISH_ERROR;
            snprintf(s->error, sizeof s->error, "out of memory for the generated text");
        }
    }
    s->release_to = s->gen_len;
}

/* Fills the batch: each generating slot's next token, then prompt chunks, oldest request first. Slots
 * whose context is full end with "length". Returns the number of tokens. */
static int32_t build_batch(bitnet_engine *e) {
    int32_t n = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        slot *s = &e->slots[i];
        s->bi = -1;
        s->in_batch = false;
        if (!s->job || s->finish != BITNET_FINISH_NONE || !s->has_next) continue;
        if (s->n_past >= e->p.n_ctx_slot) {
            s->finish = BITNET_FINISH_LENGTH;
            continue;
        }
        e->b_tok[n] = s->next_tok;
        e->b_pos[n] = s->n_past++;
        e->b_seq[n] = i;
        e->b_logits[n] = true;
        s->has_next = false;
        s->in_batch = true;
        s->bi = n++;
    }
    /* prompt chunks: slots in order of their job's id (insertion sort; n_slots is small) */
    int32_t k = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        const slot *s = &e->slots[i];
        if (!s->job || s->finish != BITNET_FINISH_NONE || (size_t)s->n_fed >= s->job->n_prompt) continue;
        int32_t at = k++;
        while (at > 0 && e->slots[e->order[at - 1]].job->id > s->job->id) {
            e->order[at] = e->order[at - 1];
            at--;
        }
        e->order[at] = i;
    }
    for (int32_t o = 0; o < k && n < e->p.n_batch; o++) {
        slot *s = &e->slots[e->order[o]];
        const int32_t plen = (int32_t)s->job->n_prompt;
        while (s->n_fed < plen && n < e->p.n_batch) {
            e->b_tok[n] = s->job->prompt[s->n_fed];
            e->b_pos[n] = s->n_fed;
            e->b_seq[n] = e->order[o];
            s->in_batch = true;
            e->b_logits[n] = s->n_fed + 1 == plen;
            if (e->b_logits[n]) s->bi = n;
            s->n_fed++;
            n++;
        }
        s->n_past = s->n_fed;
    }
    return n;
}

/* Under e->mu: each slot's newly released text and end to its job; ended slots freed. */
static void publish(bitnet_engine *e) {
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        slot *s = &e->slots[i];
        bitnet_job *j = s->job;
        if (!j) continue;
        if (s->finish != BITNET_FINISH_NONE) release_all(s);
        if (s->release_to > s->published) {
            if (!job_append(j, s->gen + s->published, s->release_to - s->published)) {
                s->finish = BITNET_FINISH_ERROR;
                snprintf(s->error, sizeof s->error, "out of memory for the response text");
            } else {
                s->published = s->release_to;
            }
        }
        e->n_generated += (uint64_t)(s->n_gen - j->n_gen);
        j->n_gen = s->n_gen;
        if (s->finish != BITNET_FINISH_NONE) {
            e->n_finished++;
            if (s->finish == BITNET_FINISH_CANCELLED) e->n_cancelled++;
            job_end(j, s->finish, s->finish == BITNET_FINISH_ERROR ? s->error : NULL);
            slot_clear(s);
            e->n_busy--;
        }
    }
}

/* Under e->mu: cancelled jobs out of their slots and the queue; free slots to waiting jobs. */
static void admit(bitnet_engine *e) {
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        slot *s = &e->slots[i];
        if (s->job && (s->job->cancel || e->quit)) s->finish = BITNET_FINISH_CANCELLED;
    }
    publish(e);
    e->q_tail = NULL;
    for (bitnet_job **pp = &e->q_head; *pp;) {
        bitnet_job *j = *pp;
        if (j->cancel || e->quit) {
            *pp = j->next;
            e->n_waiting--;
            e->n_finished++;
            e->n_cancelled++;
            job_end(j, BITNET_FINISH_CANCELLED, NULL);
        } else {
            e->q_tail = j;
            pp = &j->next;
        }
    }
    for (int32_t i = 0; i < e->p.n_slots && e->q_head; i++) {
        if (e->slots[i].job) continue;
        bitnet_job *j = e->q_head;
        e->q_head = j->next;
        if (!e->q_head) e->q_tail = NULL;
        e->n_waiting--;
        j->next = NULL;
        slot_start(e, &e->slots[i], j);
    }
}

static void *engine_main(void *arg) {
    bitnet_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        admit(e);
        pthread_cond_broadcast(&e->progress);
        if (e->quit) break;
        if (e->n_busy == 0) {
            pthread_cond_wait(&e->work, &e->mu);
            continue;
        }
        pthread_mutex_unlock(&e->mu);

        const int32_t n = build_batch(e);
        bitnet_error err = {{0}};
        bitnet_status st = BITNET_OK;
        if (n > 0) {
            const bitnet_batch b = {n, e->b_tok, e->b_pos, e->b_seq, e->b_logits};
            st = bitnet_decode_batch(e->ctx, &b, &err);
        }
        for (int32_t i = 0; i < e->p.n_slots; i++) {
            slot *s = &e->slots[i];
            if (!s->job || s->finish != BITNET_FINISH_NONE) continue;
            if (st != BITNET_OK && s->in_batch) { /* its cache now lacks this step's rows: it cannot go on */
                s->finish = BITNET_FINISH_ERROR;
                snprintf(s->error, sizeof s->error, "the forward pass failed: %.200s", err.msg);
                continue;
            }
            if (st == BITNET_OK && s->bi >= 0)
                take_token(e, s, bitnet_sampler_sample(&s->smp, bitnet_get_logits_ith(e->ctx, s->bi)));
        }

        pthread_mutex_lock(&e->mu);
        publish(e);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

bitnet_status bitnet_engine_start(bitnet_model *m, const bitnet_engine_params *p, bitnet_engine **out, bitnet_error *err) {
    *out = NULL;
    if (!m || !p) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_engine_start: NULL model or params");
    if (p->n_slots < 1 || p->n_slots > 1024 || p->n_ctx_slot < 1 || p->n_batch < 1 || p->queue_max < 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "engine: slots %d (need [1, 1024]), context per slot %d, batch %d, queue %d out of range",
                           (int)p->n_slots, (int)p->n_ctx_slot, (int)p->n_batch, (int)p->queue_max);
    }
    if (!bitnet_model_vocab(m)) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "engine: the model has no vocabulary");
    bitnet_engine *e = calloc(1, sizeof *e);
    if (!e) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the engine");
    e->m = m;
    e->v = bitnet_model_vocab(m);
    e->n_vocab = bitnet_model_hparams(m)->n_vocab;
    e->p = *p;
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->work, NULL);
    pthread_cond_init(&e->progress, &ca);
    pthread_condattr_destroy(&ca);
    const bitnet_context_params cp = {p->n_ctx_slot, p->n_batch, p->n_threads, 1, p->n_slots, false};
    bitnet_status st = bitnet_context_create_params(m, &cp, &e->ctx, err);
    if (st != BITNET_OK) {
        bitnet_engine_free(e);
        return st;
    }
    e->p.n_batch = p->n_batch < (int64_t)p->n_ctx_slot * p->n_slots ? p->n_batch : p->n_ctx_slot * p->n_slots;
    e->slots = calloc((size_t)p->n_slots, sizeof *e->slots);
    e->order = calloc((size_t)p->n_slots, sizeof *e->order);
    e->b_tok = calloc((size_t)e->p.n_batch, sizeof *e->b_tok);
    e->b_pos = calloc((size_t)e->p.n_batch, sizeof *e->b_pos);
    e->b_seq = calloc((size_t)e->p.n_batch, sizeof *e->b_seq);
    e->b_logits = calloc((size_t)e->p.n_batch, sizeof *e->b_logits);
    if (!e->slots || !e->order || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_logits) {
        bitnet_engine_free(e);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for %d slots", (int)p->n_slots);
    }
    for (int32_t i = 0; i < p->n_slots; i++) e->slots[i].bi = -1;
    const int rc = pthread_create(&e->thread, NULL, engine_main, e);
    if (rc != 0) {
        bitnet_engine_free(e);
        return bitnet_fail(err, BITNET_ERR_IO, "cannot start the engine thread: %s", strerror(rc));
    }
    e->thread_started = true;
    *out = e;
    return BITNET_OK;
}

bitnet_status bitnet_engine_submit(bitnet_engine *e, const bitnet_gen_params *p, bitnet_job **out, bool *busy,
                                   bitnet_error *err) {
    *out = NULL;
    *busy = false;
    if (p->n_prompt < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "the prompt is empty (no tokens)");
    if (p->n_prompt > (size_t)e->p.n_ctx_slot) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "the prompt has %zu tokens, more than the %d positions of a slot's context (-c / -np)",
                           p->n_prompt, (int)e->p.n_ctx_slot);
    }
    if (p->max_tokens < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "max_tokens = %d must be >= 1", (int)p->max_tokens);
    for (size_t i = 0; i < p->n_prompt; i++) {
        if (p->prompt[i] < 0 || p->prompt[i] >= e->n_vocab) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "prompt token %zu is %d, outside [0, %d)", i, (int)p->prompt[i],
                               (int)e->n_vocab);
        }
    }
    bitnet_job *j = calloc(1, sizeof *j);
    if (!j) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a request");
    j->e = e;
    j->prompt = malloc(p->n_prompt * sizeof *j->prompt);
    j->stop = calloc(p->n_stop ? p->n_stop : 1, sizeof *j->stop);
    j->stop_len = calloc(p->n_stop ? p->n_stop : 1, sizeof *j->stop_len);
    bool ok = j->prompt && j->stop && j->stop_len;
    for (size_t i = 0; ok && i < p->n_stop; i++) {
        j->stop_len[i] = strlen(p->stop[i]);
        ok = j->stop_len[i] > 0 && (j->stop[i] = strdup(p->stop[i])) != NULL;
        if (ok) j->n_stop = i + 1;
    }
    if (!ok) {
        job_free(j);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a request (or an empty stop string)");
    }
    memcpy(j->prompt, p->prompt, p->n_prompt * sizeof *j->prompt);
    j->n_prompt = p->n_prompt;
    j->max_tokens = p->max_tokens;
    j->temperature = p->temperature;
    j->top_k = p->top_k;
    j->top_p = p->top_p;
    j->seed = p->seed;
    j->ignore_eos = p->ignore_eos;
    j->refs = 2;

    pthread_mutex_lock(&e->mu);
    if (e->draining || e->quit) {
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "the server is shutting down");
    }
    if (e->n_busy + e->n_waiting >= e->p.n_slots + e->p.queue_max) {
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        *busy = true;
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "all %d slots are taken and %d requests wait, the most the queue holds (--queue)",
                           (int)e->p.n_slots, (int)e->p.queue_max);
    }
    j->id = e->next_id++;
    if (e->q_tail) e->q_tail->next = j;
    else e->q_head = j;
    e->q_tail = j;
    e->n_waiting++;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->mu);
    *out = j;
    return BITNET_OK;
}

bool bitnet_job_poll(bitnet_job *j, size_t have, int timeout_ms, char **text, bitnet_job_update *u) {
    bitnet_engine *e = j->e;
    *text = NULL;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->mu);
    while (j->len <= have && j->finish == BITNET_FINISH_NONE && timeout_ms > 0) {
        if (pthread_cond_timedwait(&e->progress, &e->mu, &until) == ETIMEDOUT) break;
    }
    bool ok = true;
    if (j->len > have) {
        *text = malloc(j->len - have);
        if (*text) memcpy(*text, j->text + have, j->len - have);
        else ok = false;
    }
    memset(u, 0, sizeof *u);
    u->text_len = ok ? j->len : have;
    u->finish = ok ? j->finish : BITNET_FINISH_NONE;
    u->n_prompt = (int32_t)j->n_prompt;
    u->n_gen = j->n_gen;
    snprintf(u->error, sizeof u->error, "%s", j->error);
    pthread_mutex_unlock(&e->mu);
    return ok;
}

/* Under e->mu: asks the engine to stop a job that has not ended. */
static void job_cancel_locked(bitnet_engine *e, bitnet_job *j) {
    if (j->finish == BITNET_FINISH_NONE) {
        j->cancel = true;
        pthread_cond_signal(&e->work);
    }
}

void bitnet_job_cancel(bitnet_job *j) {
    if (!j) return;
    bitnet_engine *e = j->e;
    pthread_mutex_lock(&e->mu);
    job_cancel_locked(e, j);
    pthread_mutex_unlock(&e->mu);
}

void bitnet_job_release(bitnet_job *j) {
    if (!j) return;
    bitnet_engine *e = j->e;
    pthread_mutex_lock(&e->mu);
    job_cancel_locked(e, j);
    job_unref(j);
    pthread_mutex_unlock(&e->mu);
}

void bitnet_engine_load(bitnet_engine *e, int32_t *busy, int32_t *waiting) {
    bitnet_engine_stats st;
    bitnet_engine_get_stats(e, &st);
    *busy = st.busy;
    *waiting = st.waiting;
}

void bitnet_engine_get_stats(bitnet_engine *e, bitnet_engine_stats *out) {
    pthread_mutex_lock(&e->mu);
    out->busy = e->n_busy;
    out->waiting = e->n_waiting;
    out->finished = e->n_finished;
    out->cancelled = e->n_cancelled;
    out->generated = e->n_generated;
    pthread_mutex_unlock(&e->mu);
}

void bitnet_engine_drain(bitnet_engine *e) {
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    while (e->n_busy + e->n_waiting > 0) pthread_cond_wait(&e->progress, &e->mu);
    pthread_mutex_unlock(&e->mu);
}

void bitnet_engine_free(bitnet_engine *e) {
    if (!e) return;
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->quit = true;
        pthread_cond_signal(&e->work);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    for (int32_t i = 0; e->slots && i < e->p.n_slots; i++) slot_clear(&e->slots[i]);
    free(e->slots);
    free(e->order);
    free(e->b_tok);
    free(e->b_pos);
    free(e->b_seq);
    free(e->b_logits);
    bitnet_context_free(e->ctx);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->progress);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
