/* perplexity.c — llama.cpp's perplexity method (rules and sources at the top of perplexity.h): the
 * chunk plan, the per-token NLL in double, the running sums and the estimate, and the evaluation of
 * one chunk through bitnet_decode. */
#include "eval/perplexity.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bitnet_status bitnet_ppl_plan_make(size_t n_tokens, int32_t n_ctx, int32_t max_chunks, bitnet_ppl_plan *out,
                                   bitnet_error *err) {
    if (n_ctx < 3) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "n_ctx %d is too small for perplexity: a chunk scores the tokens after positions "
                           "n_ctx/2 .. n_ctx-2, which needs n_ctx >= 3",
                           n_ctx);
    }
    if (max_chunks == 0 || max_chunks < -1) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "max_chunks %d: expected -1 (all) or >= 1", max_chunks);
    }
    const uint64_t need = 2 * (uint64_t)n_ctx;
    if ((uint64_t)n_tokens < need) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "the text has %zu tokens, too few for n_ctx %d: one chunk is %d tokens and the method "
                           "needs at least 2 * n_ctx = %llu tokens",
                           n_tokens, n_ctx, n_ctx, (unsigned long long)need);
    }
    bitnet_ppl_plan p;
    const uint64_t chunks = (uint64_t)n_tokens / (uint64_t)n_ctx;
    p.n_chunk_max = chunks > INT32_MAX ? INT32_MAX : (int32_t)chunks;
    p.n_chunk = max_chunks < 0 || max_chunks > p.n_chunk_max ? p.n_chunk_max : max_chunks;
    p.n_ctx = n_ctx;
    p.first = n_ctx / 2;
    p.n_scored = n_ctx - 1 - p.first;
    if ((int64_t)p.n_chunk * p.n_scored < 2) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "n_ctx %d with %d chunk(s) scores only %lld token(s); the uncertainty needs at least 2",
                           n_ctx, p.n_chunk, (long long)p.n_chunk * p.n_scored);
    }
    *out = p;
    return BITNET_OK;
}

double bitnet_token_nll(const float *logits, int32_t n_vocab, int32_t token) {
    float max = logits[0];
    for (int32_t i = 1; i < n_vocab; i++) {
        if (logits[i] > max || logits[i] != logits[i]) max = logits[i]; /* a NaN wins: the result is NaN */
    }
    const double mx = (double)max;
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    return log(sum) - ((double)logits[token] - mx);
}

double bitnet_ppl_value(const bitnet_ppl_sums *s) {
    if (s->count < 1) return NAN;
    return exp(s->nll / (double)s->count);
}

double bitnet_ppl_uncertainty(const bitnet_ppl_sums *s) {
    if (s->count < 2) return NAN;
    const double n = (double)s->count;
    const double m = s->nll / n, m2 = s->nll2 / n;
    double var = m2 - m * m;
    if (var < 0) var = 0; /* rounding of a (near-)constant NLL */
    return exp(m) * sqrt(var / (n - 1));
}

bitnet_status bitnet_ppl_eval_chunk(bitnet_context *c, const bitnet_model *m, const int32_t *tokens,
                                    const bitnet_ppl_plan *p, int32_t c_idx, int32_t n_batch, int32_t bos,
                                    bitnet_ppl_sums *sums, bitnet_error *err) {
    const int32_t n_vocab = bitnet_model_hparams(m)->n_vocab;
    if (c_idx < 0 || c_idx >= p->n_chunk) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "chunk %d is outside [0, %d)", c_idx, p->n_chunk);
    }
    if (n_batch < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_batch %d: expected >= 1", n_batch);
    if (bos >= n_vocab) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "BOS id %d is out of range [0, %d)", bos, n_vocab);
    }
    const int32_t n_ctx = p->n_ctx;
    const int32_t *chunk = tokens + (size_t)c_idx * (size_t)n_ctx;
    /* every id before any is used: a scored target may lie in a batch bitnet_decode has not seen yet */
    for (int32_t j = 0; j < n_ctx; j++) {
        if (chunk[j] < 0 || chunk[j] >= n_vocab) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "chunk %d: token id %d at position %d is out of range [0, %d)",
                               c_idx, chunk[j], j, n_vocab);
        }
    }
    int32_t *ids = malloc((size_t)n_ctx * sizeof *ids); /* the chunk with BOS in front */
    if (!ids) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for %d token ids", n_ctx);
    memcpy(ids, chunk, (size_t)n_ctx * sizeof *ids);
    if (bos >= 0) ids[0] = bos;

    bitnet_ppl_sums s = *sums;
    bitnet_status st = BITNET_OK;
    int32_t cnt = 0;
    for (int32_t start = 0; start < n_ctx && st == BITNET_OK; start += cnt) {
        cnt = n_ctx - start < n_batch ? n_ctx - start : n_batch;
        /* a batch that crosses `first` ends there: the positions before it need no logits, and the head
         * (n_vocab x n_embd per kept row) is then computed only for the second half. The logits do not
         * depend on the batch split (model.h). */
        if (start < p->first && start + cnt > p->first) cnt = p->first - start;
        /* scored logit positions in this batch: [lo, hi) */
        const int32_t lo = start > p->first ? start : p->first;
        const int32_t hi = start + cnt < n_ctx - 1 ? start + cnt : n_ctx - 1;
        if ((st = bitnet_decode(c, ids + start, cnt, start, lo < hi, err)) != BITNET_OK) break;
        for (int32_t j = lo; j < hi; j++) {
            const float *l = bitnet_get_logits_ith(c, j - start);
            if (!l) {
                st = bitnet_fail(err, BITNET_ERR_INVALID_ARG, "no logits for position %d of chunk %d", j, c_idx);
                break;
            }
            const double nll = bitnet_token_nll(l, n_vocab, chunk[j + 1]);
            if (!isfinite(nll)) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT,
                                 "chunk %d: the NLL of token %d (position %d) is %g: the logits at position %d are "
                                 "not finite",
                                 c_idx, chunk[j + 1], j + 1, nll, j);
                break;
            }
            s.nll += nll;
            s.nll2 += nll * nll;
            s.count++;
        }
    }
    free(ids);
    if (st == BITNET_OK) *sums = s;
    return st;
}
