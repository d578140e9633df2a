/* embed.c — text embeddings (model.h bitnet_embed): texts packed as sequences into batches of the decode
 * API, their token embeddings pooled per text; the normalizations of llama.cpp's --embd-normalize
 * (docs/EMBEDDINGS.md §3). */
#include "model/model_internal.h"

#include <math.h>

#include "base/mem.h"

bool bitnet_pooling_parse(const char *s, bitnet_pooling *out) {
    static const char *const names[] = {"none", "mean", "cls", "last"};
    for (int i = 0; i < 4; i++) {
        if (s && strcmp(s, names[i]) == 0) {
            *out = (bitnet_pooling)i;
            return true;
        }
    }
    return false;
}

const char *bitnet_pooling_name(bitnet_pooling p) {
    switch (p) {
    case BITNET_POOLING_UNSPECIFIED: return "unspecified";
    case BITNET_POOLING_NONE: return "none";
    case BITNET_POOLING_MEAN: return "mean";
    case BITNET_POOLING_CLS: return "cls";
    case BITNET_POOLING_LAST: return "last";
    default: return "invalid";
    }
}

bool bitnet_embd_normalize(const float *in, float *out, int32_t n, int norm) {
    if (norm < -1) return false;
    double s = 0.0;
    if (norm == -1) {
        s = 1.0;
    } else if (norm == 0) { /* max |x| mapped to 32760: the int16 range */
        for (int32_t i = 0; i < n; i++) s = fabs((double)in[i]) > s ? fabs((double)in[i]) : s;
        s /= 32760.0;
    } else if (norm == 2) {
        for (int32_t i = 0; i < n; i++) s += (double)in[i] * (double)in[i];
        s = sqrt(s);
    } else {
        for (int32_t i = 0; i < n; i++) s += pow(fabs((double)in[i]), (double)norm);
        s = pow(s, 1.0 / (double)norm);
    }
    const float inv = s > 0.0 ? (float)(1.0 / s) : 0.0f;
    for (int32_t i = 0; i < n; i++) out[i] = in[i] * inv;
    return true;
}

/* Whether token k of a text of n tokens contributes to the pooled vector. */
static bool wanted(bitnet_pooling p, int32_t k, int32_t n) {
    return p == BITNET_POOLING_CLS ? k == 0 : p == BITNET_POOLING_LAST ? k == n - 1 : true;
}

bitnet_status bitnet_embed(bitnet_context *c, const int32_t *const *tokens, const int32_t *n_tokens, int32_t n_texts,
                           bitnet_pooling pooling, float *out, bitnet_pooling *used, bitnet_error *err) {
    static const char fn[] = "bitnet_embed";
    if (!c || !tokens || !n_tokens || !out || n_texts < 1) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: NULL context, tokens or out, or no texts (%d)", fn,
                           (int)n_texts);
    }
    if (!c->embeddings) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s: the context computes logits; create it with bitnet_context_params.embeddings", fn);
    }
    const bitnet_hparams *hp = &c->m->hp;
    if (pooling == BITNET_POOLING_UNSPECIFIED)
        pooling = hp->pooling >= 0 ? (bitnet_pooling)hp->pooling : BITNET_POOLING_NONE;
    if (pooling < BITNET_POOLING_NONE || pooling > BITNET_POOLING_LAST) {
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: pooling %d is not supported (none 0, mean 1, cls 2, last 3; %s.pooling_type 4 is a "
                           "reranker's, which needs a classifier head this runtime does not have)",
                           fn, (int)pooling, hp->arch);
    }
    for (int32_t i = 0; i < n_texts; i++) {
        if (!tokens[i] || n_tokens[i] < 1 || n_tokens[i] > c->n_ctx) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: text %d has %d tokens; it needs 1 to n_ctx = %d", fn,
                               (int)i, tokens[i] ? (int)n_tokens[i] : 0, (int)c->n_ctx);
        }
        for (int32_t k = 0; k < n_tokens[i]; k++) {
            if (tokens[i][k] < 0 || tokens[i][k] >= hp->n_vocab) {
                return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: text %d, token %d: id %d is out of range [0, %d)",
                                   fn, (int)i, (int)k, (int)tokens[i][k], (int)hp->n_vocab);
            }
        }
    }
    if (used) *used = pooling;

    const int32_t B = c->n_batch, S = c->n_seq, D = hp->n_embd;
    int32_t *tok = bitnet_malloc((size_t)B * 4 * sizeof(int32_t));
    bool *keep = bitnet_malloc((size_t)B * sizeof(bool));
    double *acc = pooling == BITNET_POOLING_MEAN ? bitnet_malloc((size_t)S * (size_t)D * sizeof(double)) : NULL;
    size_t *first_row = pooling == BITNET_POOLING_NONE ? bitnet_malloc((size_t)n_texts * sizeof(size_t)) : NULL;
    bitnet_status st = BITNET_OK;
    if (!tok || !keep || (pooling == BITNET_POOLING_MEAN && !acc) || (pooling == BITNET_POOLING_NONE && !first_row)) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for a batch of %d tokens", fn, (int)B);
        goto done;
    }
    int32_t *pos = tok + B, *seq = tok + 2 * B, *src = tok + 3 * B; /* src: text · ... packed below */
    if (first_row) {
        size_t r = 0;
        for (int32_t i = 0; i < n_texts; i++) {
            first_row[i] = r;
            r += (size_t)n_tokens[i];
        }
    }
    int32_t text = 0, at = 0, slots = 0; /* the next token: text `text`, index `at`; sequences in use */
    int32_t slot_text[1024];             /* n_seq <= 1024 (context.c) */
    while (text < n_texts) {
        int32_t nb = 0;
        while (nb < B && text < n_texts) {
            if (at == 0) { /* a new text takes the next free sequence */
                if (slots == S) {
                    if (nb > 0) break; /* the batch still holds texts of these sequences */
                    slots = 0;         /* every earlier text is done: sequences start over at position 0 */
                }
                slot_text[slots] = text;
                if (acc) memset(acc + (size_t)slots * D, 0, (size_t)D * sizeof(double));
                slots++;
            }
            const int32_t n = n_tokens[text], take = n - at < B - nb ? n - at : B - nb;
            for (int32_t k = 0; k < take; k++) {
                tok[nb] = tokens[text][at + k];
                pos[nb] = at + k;
                seq[nb] = slots - 1;
                keep[nb] = wanted(pooling, at + k, n);
                src[nb] = at + k;
                nb++;
            }
            at += take;
            if (at == n) {
                text++;
                at = 0;
            }
        }
        const bitnet_batch b = {nb, tok, pos, seq, keep};
        if ((st = bitnet_decode_batch(c, &b, err)) != BITNET_OK) goto done;
        for (int32_t j = 0; j < nb; j++) {
            if (!keep[j]) continue;
            const int32_t ti = slot_text[seq[j]], k = src[j], n = n_tokens[ti];
            const float *e = bitnet_get_embeddings_ith(c, j);
            switch (pooling) {
            case BITNET_POOLING_NONE:
                memcpy(out + (first_row[ti] + (size_t)k) * (size_t)D, e, (size_t)D * sizeof(float));
                break;
            case BITNET_POOLING_MEAN: {
                double *a = acc + (size_t)seq[j] * D;
                for (int32_t i = 0; i < D; i++) a[i] += (double)e[i];
                if (k == n - 1) {
                    for (int32_t i = 0; i < D; i++) out[(size_t)ti * D + i] = (float)(a[i] / (double)n);
                }
                break;
            }
            default: memcpy(out + (size_t)ti * D, e, (size_t)D * sizeof(float)); break;
            }
        }
    }
done:
    bitnet_free(first_row);
    bitnet_free(acc);
    bitnet_free(keep);
    bitnet_free(tok);
    return st;
}
