/* perplexity.h — llama.cpp's perplexity method over a tokenized text (the library side of
 * build/bin/llama-perplexity): how the text is cut into chunks, which positions are scored, the
 * negative log-likelihood of one token, and the estimate with its uncertainty.
 *
 * The method (llama.cpp tools/perplexity/perplexity.cpp, function perplexity(); the same rules in the
 * examples/perplexity/perplexity.cpp of the llama.cpp versions bitnet.cpp's fork is based on):
 *  - the whole text is tokenized once, with BOS when the vocabulary adds one (common_tokenize with
 *    add_special = true, parse_special = false);
 *  - it needs at least 2 · n_ctx tokens ("you need at least 2*n_ctx tokens to evaluate perplexity with
 *    a context of n_ctx"), and is cut into n_chunk = n_tokens / n_ctx non-overlapping chunks of n_ctx
 *    tokens (the tail that does not fill a chunk is not used), at most --chunks of them;
 *  - every chunk is evaluated from position 0 with an empty KV cache, in batches of n_batch tokens,
 *    its first token replaced by BOS when the vocabulary adds BOS (the text itself keeps its token);
 *  - only the second half of a chunk is scored: first = n_ctx / 2, and for j in [first, n_ctx - 1) the
 *    logits at position j give the NLL of token j + 1, i.e. n_ctx - 1 - first tokens per chunk;
 *  - PPL = exp(mean NLL) over all scored tokens so far, printed after every chunk;
 *  - uncertainty: with m = mean NLL, m2 = mean NLL², count scored tokens,
 *      sigma(PPL) = PPL · sqrt((m2 - m²) / (count - 1)),
 *    the standard error of the mean NLL carried through exp (d exp(x) = exp(x) dx).
 * Differences from llama.cpp, all deliberate: the log-softmax is computed wholly in double (llama.cpp
 * sums float expf terms in double); NLLs are summed in token order on one thread (llama.cpp's worker
 * threads add partial sums in whatever order they finish), so the result does not depend on the thread
 * count; a zero variance gives an uncertainty of 0 (llama.cpp prints "Unexpected negative standard
 * deviation" instead of the estimate); n_ctx < 3, a text shorter than 2 · n_ctx and fewer than 2 scored
 * tokens are errors (llama.cpp computes nan for n_ctx 2 and returns exit status 0 on a short text). */
#ifndef BITNET_PERPLEXITY_H
#define BITNET_PERPLEXITY_H

#include "base/common.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Which tokens of a text are evaluated and scored (see the top of this file). */
typedef struct bitnet_ppl_plan {
    int32_t n_ctx;    /* tokens per chunk */
    int32_t n_chunk;  /* chunks evaluated: min(n_tokens / n_ctx, max_chunks) */
    int32_t n_chunk_max; /* n_tokens / n_ctx, the chunks the text holds */
    int32_t first;    /* first scored logit position of a chunk: n_ctx / 2 */
    int32_t n_scored; /* tokens scored per chunk: n_ctx - 1 - first */
} bitnet_ppl_plan;

/* The plan for n_tokens tokens (BOS included when the tokenizer added it), chunks of n_ctx tokens,
 * at most max_chunks chunks (-1 = all). Errors (BITNET_ERR_INVALID_ARG; the message gives the numbers):
 * n_ctx < 3 (n_ctx 2 scores no token: [1, 1) is empty), max_chunks 0 or < -1, n_tokens < 2 · n_ctx
 * (the message says how many tokens the text has and how many n_ctx needs), fewer than 2 scored tokens
 * in all (the uncertainty divides by count - 1: only n_ctx 3 with max_chunks 1). */
bitnet_status bitnet_ppl_plan_make(size_t n_tokens, int32_t n_ctx, int32_t max_chunks, bitnet_ppl_plan *out,
                                   bitnet_error *err);

/* Negative log-likelihood of `token` under the softmax of n_vocab logits, in nats:
 *   NLL = log Σ_i exp(l_i - max) - (l_token - max),   max = max_i l_i,
 * every term in double (exp and log from libm), summed in index order. n_vocab >= 1, token in
 * [0, n_vocab) (the caller checks). A NaN or infinite logit gives a non-finite result. */
double bitnet_token_nll(const float *logits, int32_t n_vocab, int32_t token);

/* Running sums of the scored tokens' NLLs, in the order they were scored. */
typedef struct bitnet_ppl_sums {
    double nll;    /* Σ NLL */
    double nll2;   /* Σ NLL² */
    int64_t count; /* tokens scored */
} bitnet_ppl_sums;

/* exp(Σ NLL / count); NaN when count is 0. */
double bitnet_ppl_value(const bitnet_ppl_sums *s);
/* llama.cpp's uncertainty of the PPL: PPL · sqrt(max(m2 - m², 0) / (count - 1)), m = Σ NLL / count,
 * m2 = Σ NLL² / count (the top of this file); NaN when count < 2. */
double bitnet_ppl_uncertainty(const bitnet_ppl_sums *s);

/* Evaluate chunk c_idx of `tokens` (tokens[c_idx·n_ctx .. (c_idx+1)·n_ctx - 1]) per plan p with context c
 * of model m (m gives n_vocab; c must have been created for m): positions
 * 0 .. n_ctx - 1 in batches of at most n_batch tokens from an empty KV cache (the context's cache is
 * rewritten from position 0; nothing of an earlier chunk is attended to), token 0 replaced by `bos`
 * when bos >= 0 (the caller passes -1 when the vocabulary does not add BOS); a batch that would cross
 * position `first` is split there, and logits are computed only for batches from `first` on (llama.cpp
 * likewise asks for the logits of positions >= first only). Adds the NLL of every scored token
 * (positions first+1 .. n_ctx-1 of the chunk, original tokens) to *sums in position order. The context needs n_ctx >= p->n_ctx.
 * Errors: BITNET_ERR_INVALID_ARG for c_idx outside [0, p->n_chunk), n_batch < 1, bos or a token id
 * of the chunk out of the vocabulary (checked before anything is evaluated; names the position and
 * the id); bitnet_decode's errors; BITNET_ERR_FORMAT when a
 * scored token's NLL is not finite (the model produced NaN/inf logits; names chunk and position);
 * BITNET_ERR_NOMEM. *sums is unchanged on error. */
bitnet_status bitnet_ppl_eval_chunk(bitnet_context *c, const bitnet_model *m, const int32_t *tokens,
                                    const bitnet_ppl_plan *p, int32_t c_idx, int32_t n_batch, int32_t bos,
                                    bitnet_ppl_sums *sums, bitnet_error *err);

#ifdef __cplusplus
}
#endif

#endif
