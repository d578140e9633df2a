/* engine.c — llama-server's continuous batching (engine.h).
 *
 * One lock (e->mu) guards the queue, the jobs' shared fields (text, finish, cancel, refs) and the slot
 * assignment; the slots' decoding state (positions, sampler, text not yet released) belongs to the
 * engine thread alone. A step: under the lock, drop cancelled jobs and give free slots to waiting ones;
 * without it, build the batch, run bitnet_decode_batch, sample and cut the text; under the lock again,
 * publish each slot's new text and finish, then wake the waiting threads (e->progress).
 * An embedding engine's slots hold one text each (slot.text of an embedding job); a job ends when its
 * last text in a slot is done (every text: STOP) or has failed or been cancelled. */
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
    /* embedding jobs: texts are prompt[text_off[i] .. text_off[i+1]); vec (n_texts, n_embd) is written by
     * the engine thread and read by the caller once finish is STOP */
    bool embd;
    int32_t n_texts;
    size_t *text_off;
    bitnet_pooling pooling;
    float *vec;
    /* under e->mu */
    int refs;        /* the caller's and the engine's */
    bool cancel;
    char *text;      /* released text */
    size_t len, cap;
    bitnet_finish finish;
    int32_t n_gen;
    char error[256];
    bitnet_job *next; /* the wait queue */
    bool queued;      /* in the wait queue (an embedding job stays there until each text has had a slot) */
    int32_t next_text, inflight, n_done; /* embedding: texts given a slot, in a slot now, done */
    uint64_t last_start;                 /* embedding: the stamp of its latest text's slot (0: none yet) */
    bool failed;                         /* embedding: a text failed (error holds why) */
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
    int32_t text;      /* embedding job: the text this slot evaluates */
    uint64_t stamp;    /* when the slot was given its job or text: passes take the oldest first */
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
    char abort_reason[200]; /* non-empty: every job not ended ends with ERROR and this message (bitnet_engine_abort) */
    slot *slots;
    int32_t n_busy, n_waiting;
    int32_t n_jobs;                                /* submitted and not ended */
    uint64_t n_finished, n_cancelled, n_generated; /* bitnet_engine_stats */
    uint64_t n_prompt_eval, n_steps;               /* bitnet_engine_stats */
    double busy_prompt_s, busy_gen_s;              /* bitnet_engine_stats */
    bitnet_job *q_head, *q_tail;
    uint64_t next_id, next_stamp;
    int32_t n_embd;
    double *acc;                    /* embedding engine, mean pooling: (n_slots, n_embd) sums */
    int32_t *b_tok, *b_pos, *b_seq; /* the step's batch (n_batch) */
    bool *b_logits;
    int32_t *order;                 /* slot indices, oldest job first */
    int32_t step_sampled;           /* the step's batch: how many of its first tokens are sampled ones */
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
    free(j->text_off);
    free(j->vec);
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
    j->e->n_jobs--;
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
    s->stamp = ++e->next_stamp;
    e->n_busy++;
}

/* Takes job j out of the wait queue (under e->mu). */
static void queue_remove(bitnet_engine *e, bitnet_job *j) {
    if (!j->queued) return;
    bitnet_job *prev = NULL;
    for (bitnet_job *q = e->q_head; q; prev = q, q = q->next) {
        if (q != j) continue;
        if (prev) prev->next = j->next;
        else e->q_head = j->next;
        if (e->q_tail == j) e->q_tail = prev;
        break;
    }
    j->next = NULL;
    j->queued = false;
    if (!j->embd || j->next_text == 0) e->n_waiting--;
}

/* Gives the next text of embedding job j to the free slot s (under e->mu); a job whose every text has
 * had a slot leaves the queue. */
static void slot_start_text(bitnet_engine *e, slot *s, bitnet_job *j) {
    slot_clear(s);
    if (j->next_text == 0) e->n_waiting--;
    s->job = j;
    s->text = j->next_text++;
    s->stamp = ++e->next_stamp;
    j->last_start = s->stamp;
    j->inflight++;
    e->n_busy++;
    if (e->acc) memset(e->acc + (size_t)(s - e->slots) * (size_t)e->n_embd, 0, (size_t)e->n_embd * sizeof(double));
    if (j->next_text == j->n_texts) queue_remove(e, j);
}

/* An embedding job whose texts have all left their slots ends (under e->mu): ERROR when one failed, STOP
 * when every text is done, CANCELLED when it was cancelled or the engine quits. */
static void embd_maybe_end(bitnet_engine *e, bitnet_job *j) {
    if (j->inflight > 0 || j->finish != BITNET_FINISH_NONE) return;
    const bitnet_finish f = j->failed                  ? BITNET_FINISH_ERROR
                            : j->n_done == j->n_texts ? BITNET_FINISH_STOP
                            : j->cancel || e->quit     ? BITNET_FINISH_CANCELLED
                                                       : BITNET_FINISH_NONE;
    if (f == BITNET_FINISH_NONE) return;
    queue_remove(e, j);
    e->n_finished++;
    if (f == BITNET_FINISH_CANCELLED) e->n_cancelled++;
    job_end(j, f, NULL); /* an error is already in j->error */
}

/* The tokens slot s evaluates (its job's prompt, or its text of an embedding job); returns their number. */
static int32_t slot_tokens(const slot *s, const int32_t **toks) {
    const bitnet_job *j = s->job;
    if (!j->embd) {
        *toks = j->prompt;
        return (int32_t)j->n_prompt;
    }
    *toks = j->prompt + j->text_off[s->text];
    return (int32_t)(j->text_off[s->text + 1] - j->text_off[s->text]);
}

/* Whether token k of a text of n tokens is kept for the pooling p (its embedding read after the pass). */
static bool pooled(bitnet_pooling p, int32_t k, int32_t n) {
    return p == BITNET_POOLING_CLS ? k == 0 : p == BITNET_POOLING_LAST ? k == n - 1 : true;
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
    e->step_sampled = n;
    /* prompt chunks (and texts to embed): slots in the order they were given their job or text, which for
     * generation jobs is the order of the jobs' ids (insertion sort; n_slots is small) */
    int32_t k = 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        const slot *s = &e->slots[i];
        const int32_t *toks;
        if (!s->job || s->finish != BITNET_FINISH_NONE || s->n_fed >= slot_tokens(s, &toks)) continue;
        int32_t at = k++;
        while (at > 0 && e->slots[e->order[at - 1]].stamp > s->stamp) {
            e->order[at] = e->order[at - 1];
            at--;
        }
        e->order[at] = i;
    }
    for (int32_t o = 0; o < k && n < e->p.n_batch; o++) {
        slot *s = &e->slots[e->order[o]];
        const bitnet_job *j = s->job;
        const int32_t *toks;
        const int32_t plen = slot_tokens(s, &toks);
        while (s->n_fed < plen && n < e->p.n_batch) {
            e->b_tok[n] = toks[s->n_fed];
            e->b_pos[n] = s->n_fed;
            e->b_seq[n] = e->order[o];
            s->in_batch = true;
            e->b_logits[n] = j->embd ? pooled(j->pooling, s->n_fed, plen) : s->n_fed + 1 == plen;
            if (!j->embd && e->b_logits[n]) s->bi = n;
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
        if (j->embd) { /* a text done, failed or cancelled leaves its slot */
            if (s->finish == BITNET_FINISH_NONE) continue;
            if (s->finish == BITNET_FINISH_STOP) {
                j->n_done++;
            } else if (s->finish == BITNET_FINISH_ERROR && !j->failed) {
                j->failed = true;
                snprintf(j->error, sizeof j->error, "text %d: %.200s", (int)s->text, s->error);
                queue_remove(e, j); /* no further text of it starts */
            }
            j->inflight--;
            slot_clear(s);
            e->n_busy--;
            embd_maybe_end(e, j);
            continue;
        }
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

/* Under e->mu: cancelled jobs out of their slots and the queue (after bitnet_engine_abort: every job, with
 * ERROR); free slots to waiting jobs. */
static void admit(bitnet_engine *e) {
    const bool aborting = e->abort_reason[0] != 0;
    for (int32_t i = 0; i < e->p.n_slots; i++) {
        slot *s = &e->slots[i];
        if (!s->job || s->finish != BITNET_FINISH_NONE) continue;
        if (s->job->cancel || e->quit) {
            s->finish = BITNET_FINISH_CANCELLED;
        } else if (aborting) {
            s->finish = BITNET_FINISH_ERROR;
            snprintf(s->error, sizeof s->error, "%s", e->abort_reason);
        }
    }
    publish(e);
    for (bitnet_job *j = e->q_head, *next; j; j = next) {
        next = j->next;
        if (!j->cancel && !e->quit && !aborting) continue;
        queue_remove(e, j);
        if (j->embd) { /* its slots were freed above */
            if (!j->cancel && !e->quit && !j->failed) {
                j->failed = true;
                snprintf(j->error, sizeof j->error, "%s", e->abort_reason);
            }
            embd_maybe_end(e, j);
        } else if (!j->cancel && !e->quit) {
            e->n_finished++;
            job_end(j, BITNET_FINISH_ERROR, e->abort_reason);
        } else {
            e->n_finished++;
            e->n_cancelled++;
            job_end(j, BITNET_FINISH_CANCELLED, NULL);
        }
    }
    for (int32_t i = 0; i < e->p.n_slots && e->q_head; i++) {
        if (e->slots[i].job) continue;
        bitnet_job *j = e->q_head;
        if (e->p.embeddings) {
            /* the next text of the job with the fewest texts in slots; among those, of the one served longest
             * ago (never before the others): round robin, so no job waits while others take turns */
            for (bitnet_job *q = j->next; q; q = q->next) {
                if (q->inflight < j->inflight || (q->inflight == j->inflight && q->last_start < j->last_start)) j = q;
            }
            slot_start_text(e, &e->slots[i], j);
            continue;
        }
        queue_remove(e, j);
        slot_start(e, &e->slots[i], j);
    }
}

/* After a pass of an embedding engine: the kept tokens' embeddings pooled into their texts' vectors, in
 * batch order (so a mean sums a text's tokens in token order, as bitnet_embed does). Returns false when
 * an embedding is missing (the texts in the batch then fail). */
static bool take_embeddings(bitnet_engine *e, int32_t n) {
    const int32_t D = e->n_embd;
    for (int32_t i = 0; i < n; i++) {
        if (!e->b_logits[i]) continue;
        const slot *s = &e->slots[e->b_seq[i]];
        const bitnet_job *j = s->job;
        const int32_t *toks;
        const int32_t len = slot_tokens(s, &toks), k = e->b_pos[i];
        const float *v = bitnet_get_embeddings_ith(e->ctx, i);
        if (!v) return false;
        float *row = j->vec + (size_t)s->text * (size_t)D;
        if (j->pooling == BITNET_POOLING_MEAN) {
            double *a = e->acc + (size_t)e->b_seq[i] * (size_t)D;
            for (int32_t d = 0; d < D; d++) a[d] += (double)v[d];
            if (k == len - 1) {
                for (int32_t d = 0; d < D; d++) row[d] = (float)(a[d] / (double)len);
            }
        } else {
            memcpy(row, v, (size_t)D * sizeof(float));
        }
    }
    return true;
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

        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        const int32_t n = build_batch(e);
        bitnet_error err = {{0}};
        bitnet_status st = BITNET_OK;
        if (n > 0) {
            const bitnet_batch b = {n, e->b_tok, e->b_pos, e->b_seq, e->b_logits};
            st = bitnet_decode_batch(e->ctx, &b, &err);
            if (st == BITNET_OK && e->p.embeddings && !take_embeddings(e, n)) {
                st = bitnet_fail(&err, BITNET_ERR_INVALID_ARG, "the context kept no embedding of a pooled token");
            }
        }
        for (int32_t i = 0; i < e->p.n_slots; i++) {
            slot *s = &e->slots[i];
            if (!s->job || s->finish != BITNET_FINISH_NONE) continue;
            if (st != BITNET_OK && s->in_batch) { /* its cache now lacks this step's rows: it cannot go on */
                s->finish = BITNET_FINISH_ERROR;
                snprintf(s->error, sizeof s->error, "the forward pass failed: %.200s", err.msg);
                continue;
            }
            if (s->job->embd) { /* a text is done once its last token has been evaluated */
                const int32_t *toks;
                if (s->in_batch && s->n_fed == slot_tokens(s, &toks)) s->finish = BITNET_FINISH_STOP;
                continue;
            }
            if (st == BITNET_OK && s->bi >= 0)
                take_token(e, s, bitnet_sampler_sample(&s->smp, bitnet_get_logits_ith(e->ctx, s->bi)));
        }

        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        pthread_mutex_lock(&e->mu);
        if (n > 0) {
            /* a pass that evaluates prompt tokens counts for the prompt rate, one with sampled tokens for the
             * generation rate (a mixed pass for both) */
            e->n_steps++;
            e->n_prompt_eval += (uint64_t)(n - e->step_sampled);
            if (n > e->step_sampled) e->busy_prompt_s += dt;
            if (e->step_sampled > 0) e->busy_gen_s += dt;
        }
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
    e->n_embd = bitnet_model_hparams(m)->n_embd;
    const bitnet_context_params cp = {p->n_ctx_slot, p->n_batch, p->n_threads, 1, p->n_slots, p->embeddings};
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
    if (p->embeddings) e->acc = calloc((size_t)p->n_slots * (size_t)e->n_embd, sizeof *e->acc);
    if (!e->slots || !e->order || !e->b_tok || !e->b_pos || !e->b_seq || !e->b_logits || (p->embeddings && !e->acc)) {
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

/* Puts a new job (the engine's and the caller's references) at the end of the queue, or refuses it when
 * the engine drains or n_slots + queue_max jobs are alive (then frees it). */
static bitnet_status enqueue(bitnet_engine *e, bitnet_job *j, bitnet_job **out, bool *busy, bitnet_error *err) {
    j->refs = 2;
    pthread_mutex_lock(&e->mu);
    if (e->draining || e->quit) {
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "the server is shutting down");
    }
    if (e->n_jobs >= e->p.n_slots + e->p.queue_max) {
        pthread_mutex_unlock(&e->mu);
        job_free(j);
        *busy = true;
        if (e->p.embeddings) {
            return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                               "%d requests are running or waiting, the most %d slots and the queue (--queue %d) hold",
                               (int)(e->p.n_slots + e->p.queue_max), (int)e->p.n_slots, (int)e->p.queue_max);
        }
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "all %d slots are taken and %d requests wait, the most the queue holds (--queue)",
                           (int)e->p.n_slots, (int)e->p.queue_max);
    }
    j->id = e->next_id++;
    j->queued = true;
    if (e->q_tail) e->q_tail->next = j;
    else e->q_head = j;
    e->q_tail = j;
    e->n_waiting++;
    e->n_jobs++;
    pthread_cond_signal(&e->work);
    pthread_mutex_unlock(&e->mu);
    *out = j;
    return BITNET_OK;
}

bitnet_status bitnet_engine_submit(bitnet_engine *e, const bitnet_gen_params *p, bitnet_job **out, bool *busy,
                                   bitnet_error *err) {
    *out = NULL;
    *busy = false;
    if (e->p.embeddings) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "this engine computes embeddings: it does not generate text");
    }
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
    return enqueue(e, j, out, busy, err);
}

bitnet_status bitnet_engine_submit_embd(bitnet_engine *e, const bitnet_embd_params *p, bitnet_job **out, bool *busy,
                                        bitnet_error *err) {
    *out = NULL;
    *busy = false;
    if (!e->p.embeddings) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "this engine generates text: embeddings need an engine started with params.embeddings");
    }
    if (p->n_texts < 1 || p->n_texts > INT32_MAX || !p->texts || !p->n_tokens) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "an embedding request needs 1 to %d texts, got %zu", INT32_MAX,
                           p->n_texts);
    }
    if (p->pooling != BITNET_POOLING_MEAN && p->pooling != BITNET_POOLING_CLS && p->pooling != BITNET_POOLING_LAST) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "pooling %s (%d): the engine pools with mean, cls or last",
                           bitnet_pooling_name(p->pooling), (int)p->pooling);
    }
    size_t total = 0;
    for (size_t i = 0; i < p->n_texts; i++) {
        if (p->n_tokens[i] < 1 || p->n_tokens[i] > e->p.n_ctx_slot) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "text %zu has %d tokens: a text needs 1 to %d (the positions of a slot's context)", i,
                               (int)p->n_tokens[i], (int)e->p.n_ctx_slot);
        }
        for (int32_t k = 0; k < p->n_tokens[i]; k++) {
            if (p->texts[i][k] < 0 || p->texts[i][k] >= e->n_vocab) {
                return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "text %zu, token %d is %d, outside [0, %d)", i, (int)k,
                                   (int)p->texts[i][k], (int)e->n_vocab);
            }
        }
        total += (size_t)p->n_tokens[i];
    }
    bitnet_job *j = calloc(1, sizeof *j);
    if (!j) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a request");
    j->e = e;
    j->embd = true;
    j->n_texts = (int32_t)p->n_texts;
    j->pooling = p->pooling;
    j->n_prompt = total;
    j->prompt = malloc(total * sizeof *j->prompt);
    j->text_off = malloc((p->n_texts + 1) * sizeof *j->text_off);
    j->vec = calloc(p->n_texts * (size_t)e->n_embd, sizeof *j->vec);
    if (!j->prompt || !j->text_off || !j->vec) {
        job_free(j);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a request of %zu texts", p->n_texts);
    }
    size_t at = 0;
    for (size_t i = 0; i < p->n_texts; i++) {
        j->text_off[i] = at;
        memcpy(j->prompt + at, p->texts[i], (size_t)p->n_tokens[i] * sizeof *j->prompt);
        at += (size_t)p->n_tokens[i];
    }
    j->text_off[p->n_texts] = at;
    return enqueue(e, j, out, busy, err);
}

const float *bitnet_job_embeddings(bitnet_job *j, int32_t *n_texts, int32_t *n_embd) {
    bitnet_engine *e = j->e;
    pthread_mutex_lock(&e->mu);
    const bool done = j->embd && j->finish == BITNET_FINISH_STOP;
    pthread_mutex_unlock(&e->mu);
    if (n_texts) *n_texts = done ? j->n_texts : 0;
    if (n_embd) *n_embd = done ? e->n_embd : 0;
    return done ? j->vec : NULL;
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
    u->n_gen = j->embd ? j->n_done : j->n_gen;
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
    out->prompt_evaluated = e->n_prompt_eval;
    out->steps = e->n_steps;
    out->busy_prompt_s = e->busy_prompt_s;
    out->busy_gen_s = e->busy_gen_s;
    out->slots = e->p.n_slots;
    pthread_mutex_unlock(&e->mu);
}

bool bitnet_engine_drain_for(bitnet_engine *e, int timeout_ms) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until); /* the clock of e->progress (bitnet_engine_start) */
    if (timeout_ms > 0) {
        until.tv_sec += timeout_ms / 1000;
        until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    while (e->n_jobs > 0) {
        if (timeout_ms < 0) {
            pthread_cond_wait(&e->progress, &e->mu);
        } else if (timeout_ms == 0 || pthread_cond_timedwait(&e->progress, &e->mu, &until) == ETIMEDOUT) {
            break;
        }
    }
    const bool drained = e->n_jobs == 0;
    pthread_mutex_unlock(&e->mu);
    return drained;
}

void bitnet_engine_drain(bitnet_engine *e) { (void)bitnet_engine_drain_for(e, -1); }

void bitnet_engine_abort(bitnet_engine *e, const char *reason) {
    pthread_mutex_lock(&e->mu);
    e->draining = true;
    snprintf(e->abort_reason, sizeof e->abort_reason, "%s", reason && *reason ? reason : "the server is stopping");
    pthread_cond_signal(&e->work);
    while (e->n_jobs > 0 && !e->quit) pthread_cond_wait(&e->progress, &e->mu);
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
    free(e->acc);
    bitnet_context_free(e->ctx);
    pthread_cond_destroy(&e->work);
    pthread_cond_destroy(&e->progress);
    pthread_mutex_destroy(&e->mu);
    free(e);
}
