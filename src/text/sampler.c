/* sampler.c — greedy and temperature / top-k / top-p sampling (sampler.h); the uniform draws come
 * from the seeded generator of rng.h, e^x from base/detmath.h and the scratch from base/mem.h, so a
 * seeded run picks the same tokens on every platform, the bare-metal build included. */
#include "text/sampler.h"

#include <math.h>

#include "base/detmath.h"
#include "base/mem.h"

/* ---------------------------------------------------------------------------------------------
 * Sampler
 * ------------------------------------------------------------------------------------------- */

bitnet_status bitnet_sampler_init(bitnet_sampler *s, int32_t n_vocab, float temp, int32_t top_k, float top_p,
                                  uint64_t seed, bitnet_error *err) {
    s->probs = NULL;
    s->idx = NULL;
    s->n_vocab = 0;
    if (n_vocab < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "sampler: n_vocab = %d must be >= 1", (int)n_vocab);
    if (isnan(temp)) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "sampler: temperature is NaN");
    if (isnan(top_p)) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "sampler: top_p is NaN");
    s->temp = temp;
    s->top_k = top_k;
    s->top_p = top_p;
    bitnet_rng_seed(&s->rng, seed);
    s->probs = (float *)bitnet_malloc((size_t)n_vocab * sizeof *s->probs);
    s->idx = (int32_t *)bitnet_malloc((size_t)n_vocab * sizeof *s->idx);
    if (!s->probs || !s->idx) {
        bitnet_sampler_free(s);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "sampler: out of memory for a vocabulary of %d", (int)n_vocab);
    }
    s->n_vocab = n_vocab;
    return BITNET_OK;
}

void bitnet_sampler_free(bitnet_sampler *s) {
    if (!s) return;
    bitnet_free(s->idx);
    bitnet_free(s->probs);
    s->probs = NULL;
    s->idx = NULL;
    s->n_vocab = 0;
}

int32_t bitnet_argmax(const float *x, int32_t n) {
    int32_t best = 0;
    float bv = -INFINITY;
    bool found = false;
    for (int32_t i = 0; i < n; i++) {
        const float v = x[i];
        if (isnan(v)) continue;
        if (!found || v > bv) { /* strict: the first (lowest id) of equal maxima wins */
            best = i;
            bv = v;
            found = true;
        }
    }
    return best;
}

/* Heap of candidate ids, max first by (logit desc, id asc). */
static bool before(const float *l, int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); }

static void sift_down(const float *l, int32_t *h, int32_t n, int32_t i) {
    const int32_t x = h[i];
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && before(l, h[c + 1], h[c])) c++;
        if (!before(l, h[c], x)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

/* Pop the best id; the popped ids accumulate at the end of h (h[n-1], then h[n-2], ...). */
static int32_t heap_pop(const float *l, int32_t *h, int32_t n) {
    const int32_t top = h[0];
    h[0] = h[n - 1];
    h[n - 1] = top;
    if (n > 1) sift_down(l, h, n - 1, 0);
    return top;
}

int32_t bitnet_sampler_sample(bitnet_sampler *s, const float *logits) {
    const int32_t n = s->n_vocab;
    if (s->temp <= 0.0f || !s->probs || n <= 0) return bitnet_argmax(logits, n > 0 ? n : 1);

    /* 1. candidates: finite or +inf logits */
    int32_t nc = 0;
    float lmax = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        const float v = logits[i];
        if (isnan(v) || v == -INFINITY) continue;
        s->idx[nc++] = i;
        if (v > lmax) lmax = v;
    }
    if (nc == 0) return 0;
    if (isinf(lmax)) return bitnet_argmax(logits, n); /* lowest id with +inf */

    const float temp = s->temp;
    const bool use_k = s->top_k > 0 && s->top_k < nc;
    const bool use_p = s->top_p < 1.0f;
    double total = 0.0;
    const double u = bitnet_rng_uniform(&s->rng);

    if (!use_k && !use_p) {
        /* 3 + 5 in id order */
        for (int32_t j = 0; j < nc; j++) {
            const int32_t i = s->idx[j];
            const float p = bitnet_expf((logits[i] - lmax) / temp);
            s->probs[j] = p;
            total += p;
        }
        const double target = u * total;
        double acc = 0.0;
        int32_t last = s->idx[0];
        for (int32_t j = 0; j < nc; j++) {
            if (s->probs[j] <= 0.0f) continue;
            acc += s->probs[j];
            last = s->idx[j];
            if (acc > target) return last;
        }
        return last; /* rounding: the last candidate with mass */
    }

    /* candidates in order of decreasing logit, extracted lazily from a heap */
    int32_t *h = s->idx;
    for (int32_t i = nc / 2 - 1; i >= 0; i--) sift_down(logits, h, nc, i);
    const int32_t k = use_k ? s->top_k : nc;

    /* mass of the top-k set (for top-p's threshold); without top-k, of all candidates */
    double mass = 0.0;
    if (use_p && !use_k) {
        for (int32_t j = 0; j < nc; j++) mass += bitnet_expf((logits[h[j]] - lmax) / temp);
    }
    /* pop in order; s->probs[m] holds the mass of the m-th popped candidate */
    int32_t m = 0;
    int32_t *order = s->idx; /* popped ids collect at the end of h: order[nc-1-m] is the m-th */
    int32_t left = nc;
    while (m < k) {
        const int32_t id = heap_pop(logits, h, left--); /* == order[nc - 1 - m] */
        const float p = bitnet_expf((logits[id] - lmax) / temp);
        s->probs[m] = p;
        total += p;
        m++;
        if (use_p && !use_k && total >= (double)s->top_p * mass) break;
    }
    if (use_p && use_k) {
        /* top-p inside the top-k set: shortest prefix reaching top_p of its mass */
        const double thr = (double)s->top_p * total;
        double acc = 0.0;
        int32_t keep = 0;
        while (keep < m) {
            acc += s->probs[keep++];
            if (acc >= thr) break;
        }
        m = keep;
        total = acc;
    }
    const double target = u * total;
    double acc = 0.0;
    int32_t last = order[nc - 1];
    for (int32_t j = 0; j < m; j++) {
        if (s->probs[j] <= 0.0f) continue;
        acc += s->probs[j];
        last = order[nc - 1 - j];
        if (acc > target) return last;
    }
    return last;
}
