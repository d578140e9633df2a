/* nfc.c — Unicode Normalization Form C of UTF-8 text (bitnet_utf8_nfc in tokenizer.h), the normalizer
 * of Qwen's tokenizer.json ("normalizer": {"type": "NFC"}) that the "qwen2" pre-tokenizer applies.
 *
 * The algorithm is UAX #15 (https://www.unicode.org/reports/tr15/), restated:
 *  1. canonical decomposition: each code point is replaced, recursively, by its canonical decomposition
 *     mapping (tables in unicode_nfc_data.c); a Hangul syllable S = 0xAC00 + (L·21 + V)·28 + T
 *     decomposes to L 0x1100 + L, V 0x1161 + V and, when T > 0, T 0x11A7 + T;
 *  2. canonical ordering: in every run of code points with a non-zero Canonical_Combining_Class the code
 *     points are stably sorted by that class;
 *  3. canonical composition: each code point C after the last starter S (class 0) is combined with it
 *     when C is not blocked (no code point between them has class 0 or a class >= C's) and (S, C) has a
 *     primary composite P (table, or the Hangul L+V -> LV and LV+T -> LVT rules); S becomes P, C goes.
 * Text whose code points are all below U+0300 is already NFC (no such code point decomposes into,
 * composes with, or reorders against anything: the first code point that can is U+0300), which is the fast
 * path. Bytes that are not valid UTF-8 are kept as they are and act as starters that compose with
 * nothing. */
#include "text/tokenizer_internal.h"
#include "text/unicode_nfc.h"

#define HANGUL_S 0xAC00u
#define HANGUL_L 0x1100u
#define HANGUL_V 0x1161u
#define HANGUL_T 0x11A7u
#define HANGUL_LN 19u
#define HANGUL_VN 21u
#define HANGUL_TN 28u
#define HANGUL_N (HANGUL_VN * HANGUL_TN) /* 588 */
#define HANGUL_SN (HANGUL_LN * HANGUL_N) /* 11172 */

/* An invalid byte b is carried as INVALID | b: class 0, no decomposition, no composition. */
#define INVALID 0x80000000u

static uint8_t ccc_of(uint32_t cp) {
    if (cp < 0x300 || (cp & INVALID)) return 0;
    size_t lo = 0, hi = bitnet_unicode_n_ccc;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        const bitnet_ccc_range *r = &bitnet_unicode_ccc[mid];
        if (cp < r->lo) hi = mid;
        else if (cp > r->hi) lo = mid + 1;
        else return r->ccc;
    }
    return 0;
}

static const bitnet_decomp *decomp_of(uint32_t cp) {
    size_t lo = 0, hi = bitnet_unicode_n_decomp;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        const uint32_t c = bitnet_unicode_decomp[mid].cp;
        if (cp < c) hi = mid;
        else if (cp > c) lo = mid + 1;
        else return &bitnet_unicode_decomp[mid];
    }
    return NULL;
}

/* Primary composite of (a, b), or 0. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if ((a | b) & INVALID) return 0;
    if (a >= HANGUL_L && a < HANGUL_L + HANGUL_LN && b >= HANGUL_V && b < HANGUL_V + HANGUL_VN) {
        return HANGUL_S + ((a - HANGUL_L) * HANGUL_VN + (b - HANGUL_V)) * HANGUL_TN;
    }
    if (a >= HANGUL_S && a < HANGUL_S + HANGUL_SN && (a - HANGUL_S) % HANGUL_TN == 0 && b > HANGUL_T &&
        b < HANGUL_T + HANGUL_TN) {
        return a + (b - HANGUL_T);
    }
    size_t lo = 0, hi = bitnet_unicode_n_comp;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        const bitnet_comp *c = &bitnet_unicode_comp[mid];
        if (a < c->first || (a == c->first && b < c->second)) hi = mid;
        else if (a > c->first || b > c->second) lo = mid + 1;
        else return c->cp;
    }
    return 0;
}

typedef struct cps {
    uint32_t *a;
    size_t n, cap;
    bool oom;
} cps;

static void cps_push(cps *c, uint32_t cp) {
    if (c->oom) return;
    if (c->n == c->cap) {
        const size_t nc = c->cap ? 2 * c->cap : 64;
        uint32_t *na = (uint32_t *)realloc(c->a, nc * sizeof *na);
        if (!na) {
            c->oom = true;
            return;
        }
        c->a = na;
        c->cap = nc;
    }
    c->a[c->n++] = cp;
}

/* Full canonical decomposition of cp appended to c (mappings nest at most a few levels). */
static void decompose(uint32_t cp, cps *c) {
    if (cp >= HANGUL_S && cp < HANGUL_S + HANGUL_SN) {
        const uint32_t s = cp - HANGUL_S;
        cps_push(c, HANGUL_L + s / HANGUL_N);
        cps_push(c, HANGUL_V + (s % HANGUL_N) / HANGUL_TN);
        if (s % HANGUL_TN) cps_push(c, HANGUL_T + s % HANGUL_TN);
        return;
    }
    const bitnet_decomp *d = cp >= 0xC0 && !(cp & INVALID) ? decomp_of(cp) : NULL;
    if (!d) {
        cps_push(c, cp);
        return;
    }
    decompose(d->first, c);
    if (d->second) decompose(d->second, c);
}

/* Decode the UTF-8 character at s (n bytes left): its code point and length, INVALID | byte for a byte
 * that does not start a valid sequence (utf8_char_len's rule). */
static uint32_t decode(const unsigned char *s, size_t n, size_t *len) {
    const size_t l = utf8_char_len(s, n);
    *len = l;
    if (l == 1) return s[0] < 0x80 ? s[0] : (INVALID | s[0]);
    if (l == 2) return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    if (l == 3) return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

static size_t encode(uint32_t cp, char *o) {
    if (cp & INVALID) {
        o[0] = (char)(cp & 0xFF);
        return 1;
    }
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

bool bitnet_utf8_is_nfc_fast(const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        const unsigned char c = (unsigned char)text[i];
        /* U+0300 is 0xCC 0x80: every lead byte >= 0xCC starts a code point >= U+0300 */
        if (c >= 0xCC) return false;
    }
    return true;
}

bitnet_status bitnet_utf8_nfc(const char *text, size_t len, char **out, size_t *out_len, bitnet_error *err) {
    *out = NULL;
    *out_len = 0;
    if (!text && len > 0) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "nfc: NULL text of length %zu", len);
    if (bitnet_utf8_is_nfc_fast(text, len)) {
        char *o = (char *)malloc(len ? len : 1);
        if (!o) return bitnet_fail(err, BITNET_ERR_NOMEM, "nfc: out of memory for %zu bytes", len);
        if (len) memcpy(o, text, len);
        *out = o;
        *out_len = len;
        return BITNET_OK;
    }
    cps c = {0};
    /* 1. decomposition */
    for (size_t i = 0; i < len;) {
        size_t l;
        const uint32_t cp = decode((const unsigned char *)text + i, len - i, &l);
        decompose(cp, &c);
        i += l;
    }
    if (c.oom) {
        free(c.a);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "nfc: out of memory for %zu bytes", len);
    }
    /* 2. canonical ordering: insertion sort inside each run of non-starters (stable) */
    for (size_t i = 1; i < c.n; i++) {
        const uint32_t x = c.a[i];
        const uint8_t cx = ccc_of(x);
        if (cx == 0) continue;
        size_t j = i;
        while (j > 0) {
            const uint8_t cp = ccc_of(c.a[j - 1]);
            if (cp == 0 || cp <= cx) break;
            c.a[j] = c.a[j - 1];
            j--;
        }
        c.a[j] = x;
    }
    /* 3. composition, in place */
    size_t kept = 0;
    if (c.n > 0) {
        size_t starter = 0;
        bool have_starter = ccc_of(c.a[0]) == 0;
        int last_class = have_starter ? 0 : 256; /* class of the last kept code point (256: none yet blocks) */
        kept = 1;
        for (size_t i = 1; i < c.n; i++) {
            const uint32_t ch = c.a[i];
            const int cc = ccc_of(ch);
            const uint32_t p = have_starter ? compose(c.a[starter], ch) : 0;
            /* not blocked: the last kept code point is the starter itself, or has a lower class than ch */
            if (p && (last_class < cc || (last_class == 0 && kept == starter + 1))) {
                c.a[starter] = p;
                continue;
            }
            if (cc == 0) {
                starter = kept;
                have_starter = true;
            }
            last_class = cc;
            c.a[kept++] = ch;
        }
    }
    char *o = (char *)malloc(kept * 4 + 1);
    if (!o) {
        free(c.a);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "nfc: out of memory for %zu bytes", len);
    }
    size_t n = 0;
    for (size_t i = 0; i < kept; i++) n += encode(c.a[i], o + n);
    free(c.a);
    *out = o;
    *out_len = n;
    return BITNET_OK;
}
