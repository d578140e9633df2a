/* engine.h — continuous batching for llama-server: N slots share one model and one context (one KV cache
 * per slot, model.h bitnet_decode_batch); a thread runs one forward pass per step over the new tokens of
 * every active slot (prompt chunks and single generated tokens together, at most n_batch), samples each
 * slot's next token with its own sampler, and hands the text to the request's waiting thread.
 *
 * Properties:
 *  - A request's tokens and text do not depend on what else runs: every column of a batched product is
 *    computed as when its sequence runs alone (bitnet_decode_batch), and each request has its own
 *    seeded sampler. At temperature 0 the output is byte-identical alone or among any others.
 *  - A finished, cancelled or failed request frees its slot at once; the oldest waiting request takes it
 *    at the next step. At most queue_max requests wait; bitnet_engine_submit refuses more (HTTP 429).
 *  - Text is released only in whole UTF-8 characters (tokenizer.h bitnet_utf8_stream) and never
 *    shows a stop string: the end of the text that could still become one is held back until it cannot,
 *    and a request ends where a stop string begins (the stop string is not part of the text).
 *  - Generation ends at an end-of-generation token (finish "stop"; the token is not part of the text or
 *    the count), a stop string ("stop"), max_tokens generated tokens or a full slot context ("length").
 *
 * An embedding engine (params.embeddings) runs embedding jobs instead: a job is a list of texts (token
 * ids); each text takes a free slot as its own sequence (positions 0 .., several passes when it is
 * longer than what a pass has room for), texts of any number of jobs share a pass, and a text's pooled
 * vector is written when its last token has been evaluated. Free slots go to the next text of the job
 * with the fewest texts in slots, and among equals of the one whose last text got a slot longest ago (a
 * new job first): round robin, so a job of many texts shares the slots with the jobs that arrive after
 * it instead of holding them all until its end; a pass takes the tokens of
 * the texts that entered their slots first. A text's vector is bit-identical to bitnet_embed's for the
 * same tokens (per-token embeddings do not depend on the batch; mean pooling sums in double in token
 * order, as bitnet_embed does), whatever else runs.
 * All functions are thread-safe; jobs are reference-counted between the caller and the engine. */
#ifndef BITNET_SERVER_ENGINE_H
#define BITNET_SERVER_ENGINE_H

#include "base/common.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_engine_params {
    int32_t n_slots;    /* requests decoded together, [1, 1024] */
    int32_t n_ctx_slot; /* positions of each slot's KV cache (prompt + generated tokens) */
    int32_t n_batch;    /* tokens per forward pass, >= 1 */
    int32_t n_threads;  /* threads of the forward pass */
    int32_t queue_max;  /* requests that may wait for a slot, >= 0 */
    bool embeddings;    /* an embedding engine: the context keeps token embeddings instead of logits
                           (model.h bitnet_context_params.embeddings), and only bitnet_engine_submit_embd
                           is accepted; false: only bitnet_engine_submit */
} bitnet_engine_params;

/* One generation request. The engine copies everything it needs. */
typedef struct bitnet_gen_params {
    const int32_t *prompt; /* n_prompt token ids, 1 <= n_prompt <= n_ctx_slot */
    size_t n_prompt;
    int32_t max_tokens;    /* >= 1 */
    float temperature;     /* <= 0: greedy (sampler.h) */
    int32_t top_k;
    float top_p;
    uint64_t seed;
    char *const *stop;     /* n_stop non-empty strings */
    size_t n_stop;
    bool ignore_eos;       /* end-of-generation tokens do not end the request (their text is empty) */
} bitnet_gen_params;

typedef enum bitnet_finish {
    BITNET_FINISH_NONE = 0,      /* still running or waiting */
    BITNET_FINISH_STOP = 1,      /* end-of-generation token or stop string */
    BITNET_FINISH_LENGTH = 2,    /* max_tokens, or the slot's context is full */
    BITNET_FINISH_CANCELLED = 3, /* bitnet_job_cancel (the client went away) or bitnet_engine_free */
    BITNET_FINISH_ERROR = 4,     /* the forward pass or the sampler failed (bitnet_job_poll's message) */
} bitnet_finish;

/* "stop", "length", "cancelled", "error", or NULL for BITNET_FINISH_NONE (OpenAI's finish_reason). */
const char *bitnet_finish_name(bitnet_finish f);

typedef struct bitnet_engine bitnet_engine;
typedef struct bitnet_job bitnet_job;

/* Creates the context (n_seq = n_slots, n_ctx = n_ctx_slot, embeddings as params say) and starts the
 * engine's thread.
 * Errors: those of bitnet_context_create_params, BITNET_ERR_INVALID_ARG for params out of range,
 * thread creation failure (BITNET_ERR_IO). The model must outlive the engine. */
bitnet_status bitnet_engine_start(bitnet_model *m, const bitnet_engine_params *p, bitnet_engine **out, bitnet_error *err);

/* Queues a generation request on a generation engine. On success *out holds the caller's reference
 * (bitnet_job_release).
 * Errors: BITNET_ERR_UNSUPPORTED when every slot is busy and queue_max requests wait (*busy set: HTTP
 * 429) or the engine is draining (*busy false: HTTP 503); BITNET_ERR_INVALID_ARG for an embedding engine, an empty
 * prompt, one longer than n_ctx_slot (message with both numbers), max_tokens < 1 or bad sampler values;
 * BITNET_ERR_NOMEM. */
bitnet_status bitnet_engine_submit(bitnet_engine *e, const bitnet_gen_params *p, bitnet_job **out, bool *busy,
                                   bitnet_error *err);

/* One embedding request: n_texts texts of token ids (as the tokenizer made them, BOS/EOS included), pooled
 * with `pooling`. The engine copies everything it needs. */
typedef struct bitnet_embd_params {
    const int32_t *const *texts; /* text i: texts[i][0 .. n_tokens[i]-1], ids in [0, n_vocab) */
    const int32_t *n_tokens;     /* each in [1, n_ctx_slot] */
    size_t n_texts;              /* [1, INT32_MAX] */
    bitnet_pooling pooling;      /* BITNET_POOLING_MEAN, _CLS or _LAST (one vector per text) */
} bitnet_embd_params;

/* Queues an embedding request on an embedding engine. On success *out holds the caller's reference
 * (bitnet_job_release). The job finishes STOP when every text has its vector (bitnet_job_embeddings),
 * CANCELLED or ERROR (bitnet_job_poll's message) otherwise; bitnet_job_poll reports n_prompt = the tokens
 * of all texts and n_gen = the texts done so far.
 * Errors: BITNET_ERR_UNSUPPORTED when n_slots + queue_max requests are running or waiting (*busy set: HTTP
 * 429) or the engine is draining (*busy false: HTTP 503); BITNET_ERR_INVALID_ARG (naming the text and
 * value) for a generation engine, no texts, a text with no tokens or more than n_ctx_slot, an id out of
 * range, a pooling other than mean, cls or last; BITNET_ERR_NOMEM. */
bitnet_status bitnet_engine_submit_embd(bitnet_engine *e, const bitnet_embd_params *p, bitnet_job **out, bool *busy,
                                        bitnet_error *err);

/* The vectors of an embedding job that finished STOP: (n_texts, n_embd) floats, text i at row i, pooled and
 * not normalized; owned by the job (valid until bitnet_job_release). NULL (and zeros) for a generation job
 * or one that has not finished STOP. *n_texts and *n_embd may be NULL. */
const float *bitnet_job_embeddings(bitnet_job *j, int32_t *n_texts, int32_t *n_embd);

/* What a job has produced so far. */
typedef struct bitnet_job_update {
    size_t text_len;      /* bytes of text released so far (all of it, from the start) */
    bitnet_finish finish; /* NONE while running */
    int32_t n_prompt;     /* prompt tokens */
    int32_t n_gen;        /* generated tokens (an end-of-generation token is not counted) */
    char error[256];      /* finish ERROR: what failed */
} bitnet_job_update;

/* Waits up to timeout_ms (0: not at all) until the job has text beyond `have` bytes or has finished,
 * then copies text bytes [have, text_len) to *text (malloc'ed, caller frees; NULL when none) and fills
 * *u. Returns false on out of memory. */
bool bitnet_job_poll(bitnet_job *j, size_t have, int timeout_ms, char **text, bitnet_job_update *u);

/* Asks the engine to stop the job (finish CANCELLED at the next step unless it finishes first). */
void bitnet_job_cancel(bitnet_job *j);

/* Drops the caller's reference (cancelling the job if it is still running). NULL is fine. */
void bitnet_job_release(bitnet_job *j);

/* Busy slots and waiting requests (of an embedding engine: requests none of whose texts has a slot yet) now. */
void bitnet_engine_load(bitnet_engine *e, int32_t *busy, int32_t *waiting);

/* The state now and counters since the start. A pass (forward pass + sampling) that evaluates prompt tokens
 * (or texts to embed) adds its wall time to busy_prompt_s, one that evaluates sampled tokens to busy_gen_s
 * (a mixed pass to both), so prompt_evaluated / busy_prompt_s and generated / busy_gen_s are the mean
 * rates while busy, in tokens per second. */
typedef struct bitnet_engine_stats {
    int32_t busy, waiting, slots; /* slots in use, requests waiting for one, slots in all */
    uint64_t finished, cancelled; /* requests that ended (any way), and of those cancelled */
    uint64_t generated;           /* generated tokens (end-of-generation tokens not counted) */
    uint64_t prompt_evaluated;    /* prompt (and embedding) tokens evaluated */
    uint64_t steps;               /* forward passes */
    double busy_prompt_s, busy_gen_s;
} bitnet_engine_stats;
void bitnet_engine_get_stats(bitnet_engine *e, bitnet_engine_stats *out);

/* Refuses new requests from now on and waits until every submitted one has finished. */
void bitnet_engine_drain(bitnet_engine *e);

/* bitnet_engine_drain that waits at most timeout_ms (< 0: without a bound, 0: not at all); returns whether
 * every submitted request has finished. New requests stay refused either way. */
bool bitnet_engine_drain_for(bitnet_engine *e, int timeout_ms);

/* Ends every request that has not finished, running or waiting, with BITNET_FINISH_ERROR and `reason` as
 * its message (an embedding job's message may carry a "text N: " prefix), refuses new ones, and waits
 * until the engine has ended them all (at most one forward pass). Used when a drain's deadline passes. */
void bitnet_engine_abort(bitnet_engine *e, const char *reason);

/* Cancels what still runs, stops the thread and frees the engine and its context. Every job must have
 * been released before (the jobs use the engine's lock). NULL is fine. */
void bitnet_engine_free(bitnet_engine *e);

#ifdef __cplusplus
}
#endif

#endif
