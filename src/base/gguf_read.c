/* gguf_read.c — the bounds-checked GGUF v2/v3 reader of gguf.h: over a read-only mmap of a file (hosted
 * builds) or over bytes already in memory (bitnet_gguf_open_memory: a model image in flash or RAM),
 * parsing and checking the header, key/values and tensor infos, then typed access to them. Its tables
 * come from base/mem.h (the heap, or the arena of a bare-metal build). The writer is gguf_write.c.
 *
 * Format: the public GGUF specification (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).
 * Hosts are little endian (x86-64, AArch64), like the files; big-endian GGUF files are refused.
 *
 * Reader policy (what is refused, and why):
 *  - every length, count and offset is checked against the bytes that remain before use;
 *  - n_kv and n_tensors must fit the file (each kv needs >= 13 bytes, each tensor info >= 32);
 *  - keys: non-empty, <= 65535 bytes, no NUL byte (they are handed out as C strings), unique;
 *  - value types 0..12 only; arrays of arrays are refused (BITNET_ERR_UNSUPPORTED): the spec allows
 *    them, but no model uses them and bounding their nested work is not worth the code;
 *  - bool values must be 0 or 1;
 *  - general.alignment: an integer type, non-zero power of two, at most 2^24;
 *  - tensor names: < 64 bytes (GGML_MAX_NAME in the spec), no NUL, unique;
 *  - n_dims 1..4, every ne >= 1, element count <= INT64_MAX, known type id, shape valid for the type
 *    (bitnet_type_nbytes), offset % alignment == 0, data inside the file, no two tensors overlap.
 */
#ifndef BITNET_BARE_METAL
#define _DEFAULT_SOURCE /* madvise (bitnet_gguf_release) */
#endif
#include "base/gguf_internal.h"

#include "base/mem.h"
#include "base/quants.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifndef BITNET_BARE_METAL
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

static const char *const k_type_names[] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool", "string", "array", "uint64", "int64", "float64",
};

const char *bitnet_gguf_type_name(bitnet_gguf_type t) {
    if ((unsigned)t < sizeof k_type_names / sizeof k_type_names[0]) return k_type_names[t];
    return "unknown";
}

/* ---------------------------------------------------------------------------------------------
 * String hash set of indices (open addressing, FNV-1a), used for keys and tensor names.
 * ------------------------------------------------------------------------------------------- */

typedef struct strtab {
    int64_t *slots; /* index + 1, 0 = empty */
    size_t cap;     /* power of two */
} strtab;

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static bool strtab_init(strtab *t, int64_t n) {
    size_t cap = 16;
    while (cap < (size_t)n * 2 + 1) cap *= 2;
    t->slots = (int64_t *)bitnet_calloc(cap, sizeof *t->slots);
    t->cap = cap;
    return t->slots != NULL;
}

/* Find `name`; names_of(ctx, i) gives the name of entry i. Returns the index or -1. When not found and
 * insert_index >= 0, inserts it. */
static int64_t strtab_lookup(strtab *t, const char *name, const char *(*names_of)(const void *, int64_t),
                             const void *ctx, int64_t insert_index) {
    if (!t->slots) return -1;
    const size_t n = strlen(name);
    size_t i = (size_t)fnv1a(name, n) & (t->cap - 1);
    for (;;) {
        const int64_t v = t->slots[i];
        if (v == 0) {
            if (insert_index >= 0) t->slots[i] = insert_index + 1;
            return -1;
        }
        if (strcmp(names_of(ctx, v - 1), name) == 0) return v - 1;
        i = (i + 1) & (t->cap - 1);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Reader
 * ------------------------------------------------------------------------------------------- */

typedef struct gguf_kv {
    char *key;
    uint32_t type;      /* bitnet_gguf_type */
    size_t rec_off;     /* byte offset of the kv record (for messages) */
    size_t val_off;     /* scalar: the value; string: its u64 length; array: first element */
    uint32_t elem_type; /* arrays */
    uint64_t n;         /* arrays: element count */
    size_t *str_offs;   /* string arrays: offset of each element's u64 length (NULL: not indexed) */
} gguf_kv;

struct bitnet_gguf {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;        /* base is this reader's mmap (bitnet_gguf_open) */
    bool index_strings; /* string arrays get an element index (str_offs) */
    uint32_t version;
    uint32_t alignment;
    size_t data_start;
    int64_t n_kv;
    gguf_kv *kv;
    int64_t n_tensors;
    bitnet_gguf_tensor_info *tensors;
    size_t *tinfo_off; /* byte offset of each tensor info record (for messages) */
    strtab kv_tab, tensor_tab;
};

static const char *kv_name_of(const void *ctx, int64_t i) { return ((const bitnet_gguf *)ctx)->kv[i].key; }
static const char *tensor_name_of(const void *ctx, int64_t i) {
    return ((const bitnet_gguf *)ctx)->tensors[i].name;
}

/* Error "<path>: <message> (at byte <off>)". */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static bitnet_status fail_at(const bitnet_gguf *g, bitnet_error *err, bitnet_status st, size_t off, const char *fmt,
                             ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return bitnet_fail(err, st, "%s: %s (at byte %llu)", g->path, msg, (unsigned long long)off);
}

/* A NUL-terminated copy of n bytes from base/mem.h's allocator. */
static char *copy_str(const char *s, size_t n) {
    char *d = (char *)bitnet_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

typedef struct cursor {
    const uint8_t *p;
    size_t size;
    size_t off;
} cursor;

static bool cur_has(const cursor *c, uint64_t n) { return n <= (uint64_t)(c->size - c->off); }

static uint32_t rd_u32(cursor *c) {
    uint32_t v;
    memcpy(&v, c->p + c->off, 4);
    c->off += 4;
    return v;
}

static uint64_t rd_u64(cursor *c) {
    uint64_t v;
    memcpy(&v, c->p + c->off, 8);
    c->off += 8;
    return v;
}

/* Read "u64 len + bytes"; *s points into the file. `what` names the thing being read. */
static bitnet_status rd_str(const bitnet_gguf *g, cursor *c, const char **s, uint64_t *len, const char *what,
                            bitnet_error *err) {
    const size_t at = c->off;
    if (!cur_has(c, 8)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, at, "%s: string length runs past the end of the file (size %llu)",
                       what, (unsigned long long)c->size);
    }
    const uint64_t n = rd_u64(c);
    if (!cur_has(c, n)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, at,
                       "%s: string length %llu runs past the end of the file (size %llu)", what,
                       (unsigned long long)n, (unsigned long long)c->size);
    }
    *s = (const char *)c->p + c->off;
    *len = n;
    c->off += (size_t)n;
    return BITNET_OK;
}

static bitnet_status parse_kv(bitnet_gguf *g, cursor *c, int64_t i, bitnet_error *err) {
    gguf_kv *kv = &g->kv[i];
    kv->rec_off = c->off;
    char what[64];
    snprintf(what, sizeof what, "key #%lld", (long long)i);
    const char *ks = NULL;
    uint64_t klen = 0;
    bitnet_status st = rd_str(g, c, &ks, &klen, what, err);
    if (st != BITNET_OK) return st;
    if (klen == 0 || klen > GGUF_MAX_KEY) {
        return fail_at(g, err, BITNET_ERR_FORMAT, kv->rec_off, "key #%lld: length %llu (must be 1..%u)", (long long)i,
                       (unsigned long long)klen, GGUF_MAX_KEY);
    }
    if (memchr(ks, 0, (size_t)klen)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, kv->rec_off, "key #%lld contains a NUL byte", (long long)i);
    }
    kv->key = copy_str(ks, (size_t)klen);
    if (!kv->key) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory reading keys", g->path);
    if (strtab_lookup(&g->kv_tab, kv->key, kv_name_of, g, i) >= 0) {
        return fail_at(g, err, BITNET_ERR_FORMAT, kv->rec_off, "duplicate key '%s'", kv->key);
    }
    const size_t type_at = c->off;
    if (!cur_has(c, 4)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, type_at, "key '%s': value type runs past the end of the file",
                       kv->key);
    }
    kv->type = rd_u32(c);
    kv->val_off = c->off;
    if (kv->type > BITNET_GGUF_FLOAT64) {
        return fail_at(g, err, BITNET_ERR_FORMAT, type_at, "key '%s': unknown value type %u", kv->key, (unsigned)kv->type);
    }
    if (kv->type == BITNET_GGUF_STRING) {
        const char *s = NULL;
        uint64_t n = 0;
        return rd_str(g, c, &s, &n, kv->key, err);
    }
    if (kv->type != BITNET_GGUF_ARRAY) {
        const size_t sz = type_size(kv->type);
        if (!cur_has(c, sz)) {
            return fail_at(g, err, BITNET_ERR_FORMAT, kv->val_off, "key '%s': %s value runs past the end of the file",
                           kv->key, bitnet_gguf_type_name((bitnet_gguf_type)kv->type));
        }
        if (kv->type == BITNET_GGUF_BOOL && c->p[c->off] > 1) {
            return fail_at(g, err, BITNET_ERR_FORMAT, kv->val_off, "key '%s': bool value %u is not 0 or 1", kv->key,
                           c->p[c->off]);
        }
        c->off += sz;
        return BITNET_OK;
    }
    /* array: u32 element type, u64 count, elements */
    if (!cur_has(c, 12)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, kv->val_off, "key '%s': array header runs past the end of the file",
                       kv->key);
    }
    kv->elem_type = rd_u32(c);
    kv->n = rd_u64(c);
    kv->val_off = c->off;
    if (kv->elem_type == BITNET_GGUF_ARRAY) {
        return fail_at(g, err, BITNET_ERR_UNSUPPORTED, kv->val_off - 12,
                       "key '%s': arrays of arrays are not supported", kv->key);
    }
    if (kv->elem_type > BITNET_GGUF_FLOAT64) {
        return fail_at(g, err, BITNET_ERR_FORMAT, kv->val_off - 12, "key '%s': unknown array element type %u",
                       kv->key, (unsigned)kv->elem_type);
    }
    const uint64_t remain = (uint64_t)(c->size - c->off);
    if (kv->elem_type != BITNET_GGUF_STRING) {
        const size_t sz = type_size(kv->elem_type);
        if (kv->n > remain / sz) {
            return fail_at(g, err, BITNET_ERR_FORMAT, kv->val_off - 8,
                           "key '%s': array of %llu %s runs past the end of the file (size %llu)", kv->key,
                           (unsigned long long)kv->n, bitnet_gguf_type_name((bitnet_gguf_type)kv->elem_type), (unsigned long long)c->size);
        }
        if (kv->elem_type == BITNET_GGUF_BOOL) {
            for (uint64_t j = 0; j < kv->n; j++) {
                if (c->p[c->off + j] > 1) {
                    return fail_at(g, err, BITNET_ERR_FORMAT, c->off + (size_t)j,
                                   "key '%s': bool element %llu is %u, not 0 or 1", kv->key, (unsigned long long)j,
                                   c->p[c->off + j]);
                }
            }
        }
        c->off += (size_t)kv->n * sz;
        return BITNET_OK;
    }
    /* string array: every element needs >= 8 bytes, which bounds the index we allocate */
    if (kv->n > remain / 8) {
        return fail_at(g, err, BITNET_ERR_FORMAT, kv->val_off - 8,
                       "key '%s': array of %llu strings cannot fit in the rest of the file (%llu bytes)", kv->key,
                       (unsigned long long)kv->n, (unsigned long long)remain);
    }
    if (g->index_strings) {
        kv->str_offs = (size_t *)bitnet_malloc((size_t)(kv->n ? kv->n : 1) * sizeof(size_t));
        if (!kv->str_offs) {
            return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory indexing %llu strings of key '%s'", g->path,
                               (unsigned long long)kv->n, kv->key);
        }
    }
    for (uint64_t j = 0; j < kv->n; j++) {
        if (kv->str_offs) kv->str_offs[j] = c->off;
        const size_t at = c->off;
        if (!cur_has(c, 8)) {
            return fail_at(g, err, BITNET_ERR_FORMAT, at,
                           "key '%s': string element %llu: length runs past the end of the file (size %llu)", kv->key,
                           (unsigned long long)j, (unsigned long long)c->size);
        }
        const uint64_t n = rd_u64(c);
        if (!cur_has(c, n)) {
            return fail_at(g, err, BITNET_ERR_FORMAT, at,
                           "key '%s': string element %llu: length %llu runs past the end of the file (size %llu)",
                           kv->key, (unsigned long long)j, (unsigned long long)n, (unsigned long long)c->size);
        }
        c->off += (size_t)n;
    }
    return BITNET_OK;
}

static bitnet_status parse_tensor_info(bitnet_gguf *g, cursor *c, int64_t i, bitnet_error *err) {
    bitnet_gguf_tensor_info *t = &g->tensors[i];
    const size_t at = c->off;
    g->tinfo_off[i] = at;
    char what[64];
    snprintf(what, sizeof what, "tensor #%lld name", (long long)i);
    const char *ns = NULL;
    uint64_t nlen = 0;
    bitnet_status st = rd_str(g, c, &ns, &nlen, what, err);
    if (st != BITNET_OK) return st;
    if (nlen >= GGUF_MAX_NAME) {
        return fail_at(g, err, BITNET_ERR_FORMAT, at, "tensor #%lld: name of %llu bytes (the limit is %u)",
                       (long long)i, (unsigned long long)nlen, GGUF_MAX_NAME - 1);
    }
    if (memchr(ns, 0, (size_t)nlen)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, at, "tensor #%lld: name contains a NUL byte", (long long)i);
    }
    char *name = copy_str(ns, (size_t)nlen);
    if (!name) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory reading tensor names", g->path);
    t->name = name;
    if (strtab_lookup(&g->tensor_tab, name, tensor_name_of, g, i) >= 0) {
        return fail_at(g, err, BITNET_ERR_FORMAT, at, "duplicate tensor name '%s'", name);
    }
    if (!cur_has(c, 4)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, c->off, "tensor %s: n_dims runs past the end of the file", name);
    }
    const uint32_t nd = rd_u32(c);
    if (nd < 1 || nd > 4) {
        return fail_at(g, err, BITNET_ERR_FORMAT, c->off - 4, "tensor %s: n_dims = %u (must be 1..4)", name, (unsigned)nd);
    }
    t->n_dims = (int)nd;
    if (!cur_has(c, 8ull * nd + 4 + 8)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, c->off, "tensor %s: tensor info runs past the end of the file",
                       name);
    }
    int64_t count = 1;
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        const uint64_t v = rd_u64(c);
        if (v < 1 || v > (uint64_t)INT64_MAX) {
            return fail_at(g, err, BITNET_ERR_FORMAT, c->off - 8, "tensor %s: ne[%u] = %lld (must be >= 1)", name, (unsigned)d,
                           (long long)v);
        }
        t->ne[d] = (int64_t)v;
        if (__builtin_mul_overflow(count, t->ne[d], &count)) {
            return fail_at(g, err, BITNET_ERR_FORMAT, c->off - 8, "tensor %s: element count overflows at ne[%u] = %llu",
                           name, (unsigned)d, (unsigned long long)v);
        }
    }
    const size_t type_at = c->off;
    const uint32_t type = rd_u32(c);
    t->offset = rd_u64(c);
    if (type > 0x7fffffffu) {
        return fail_at(g, err, BITNET_ERR_UNSUPPORTED, type_at, "tensor %s: unknown tensor type id %u", name, (unsigned)type);
    }
    t->type = (int)type;
    bitnet_error terr;
    st = bitnet_type_nbytes(t->type, t->n_dims, t->ne, &t->nbytes, &terr);
    if (st != BITNET_OK) return fail_at(g, err, st, type_at, "tensor %s: %s", name, terr.msg);
    return BITNET_OK;
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const bitnet_gguf_tensor_info *x = *(const bitnet_gguf_tensor_info *const *)a;
    const bitnet_gguf_tensor_info *y = *(const bitnet_gguf_tensor_info *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* general.alignment, if present (any integer type; power of two). */
static bitnet_status read_alignment(bitnet_gguf *g, bitnet_error *err) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const int64_t i = bitnet_gguf_find_kv(g, "general.alignment");
    if (i < 0) return BITNET_OK;
    uint64_t v = 0;
    bitnet_error e2;
    if (bitnet_gguf_get_u64(g, "general.alignment", &v, &e2) != BITNET_OK) {
        return fail_at(g, err, BITNET_ERR_FORMAT, g->kv[i].rec_off,
                       "key 'general.alignment' must be a non-negative integer, got %s",
                       bitnet_gguf_type_name((bitnet_gguf_type)g->kv[i].type));
    }
    if (v == 0 || (v & (v - 1)) != 0 || v > GGUF_MAX_ALIGNMENT) {
        return fail_at(g, err, BITNET_ERR_FORMAT, g->kv[i].val_off,
                       "key 'general.alignment' = %llu is not a power of two in 1..%u", (unsigned long long)v,
                       GGUF_MAX_ALIGNMENT);
    }
    g->alignment = (uint32_t)v;
    return BITNET_OK;
}

static bitnet_status parse(bitnet_gguf *g, bitnet_error *err) {
    cursor c = {g->base, g->size, 0};
    if (g->size < 24) {
        return fail_at(g, err, BITNET_ERR_FORMAT, 0, "file of %llu bytes is too small for a GGUF header (24 bytes)",
                       (unsigned long long)g->size);
    }
    if (memcmp(g->base, "GGUF", 4) != 0) {
        return fail_at(g, err, BITNET_ERR_FORMAT, 0, "bad magic %02x %02x %02x %02x (expected \"GGUF\")", g->base[0],
                       g->base[1], g->base[2], g->base[3]);
    }
    c.off = 4;
    g->version = rd_u32(&c);
    if (g->version != 2 && g->version != 3) {
        const char *hint = (g->version & 0xffffu) == 0 ? " (a big-endian GGUF?)" : "";
        return fail_at(g, err, g->version == 1 ? BITNET_ERR_UNSUPPORTED : BITNET_ERR_FORMAT, 4,
                       "GGUF version %u is not supported (2 or 3)%s", (unsigned)g->version, hint);
    }
    const uint64_t n_tensors = rd_u64(&c);
    const uint64_t n_kv = rd_u64(&c);
    const uint64_t rest = g->size - 24;
    if (n_tensors > rest / 32) {
        return fail_at(g, err, BITNET_ERR_FORMAT, 8, "n_tensors = %llu is impossible in a file of %llu bytes",
                       (unsigned long long)n_tensors, (unsigned long long)g->size);
    }
    if (n_kv > rest / 13 || n_kv * 13 + n_tensors * 32 > rest) {
        return fail_at(g, err, BITNET_ERR_FORMAT, 16,
                       "n_kv = %llu (with n_tensors = %llu) is impossible in a file of %llu bytes",
                       (unsigned long long)n_kv, (unsigned long long)n_tensors, (unsigned long long)g->size);
    }
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kv = (gguf_kv *)bitnet_calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = (bitnet_gguf_tensor_info *)bitnet_calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    g->tinfo_off = (size_t *)bitnet_calloc(n_tensors ? n_tensors : 1, sizeof *g->tinfo_off);
    if (!g->kv || !g->tensors || !g->tinfo_off || !strtab_init(&g->kv_tab, g->n_kv) || !strtab_init(&g->tensor_tab, g->n_tensors)) {
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for %llu keys and %llu tensors", g->path,
                           (unsigned long long)n_kv, (unsigned long long)n_tensors);
    }
    bitnet_status st;
    for (int64_t i = 0; i < g->n_kv; i++) {
        if ((st = parse_kv(g, &c, i, err)) != BITNET_OK) return st;
    }
    if ((st = read_alignment(g, err)) != BITNET_OK) return st;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        if ((st = parse_tensor_info(g, &c, i, err)) != BITNET_OK) return st;
    }
    /* data section: header end rounded up to the alignment */
    const size_t a = g->alignment;
    g->data_start = (c.off + a - 1) / a * a; /* c.off <= size, a <= 2^24: no overflow */
    if (g->n_tensors == 0) return BITNET_OK;

    const bitnet_gguf_tensor_info **order =
        (const bitnet_gguf_tensor_info **)bitnet_malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", g->path);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        bitnet_gguf_tensor_info *t = &g->tensors[i];
        order[i] = t;
        if (t->offset % a != 0) {
            bitnet_free(order);
            return fail_at(g, err, BITNET_ERR_FORMAT, g->tinfo_off[i],
                           "tensor %s: offset %llu is not a multiple of the alignment %llu", t->name,
                           (unsigned long long)t->offset, (unsigned long long)a);
        }
        const uint64_t avail = g->size >= g->data_start ? g->size - g->data_start : 0;
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            bitnet_free(order);
            return fail_at(g, err, BITNET_ERR_FORMAT, g->tinfo_off[i],
                           "tensor %s: data at offset %llu + %llu bytes (data section at byte %llu) runs past the end "
                           "of the file (size %llu)",
                           t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes, (unsigned long long)g->data_start, (unsigned long long)g->size);
        }
        t->data = g->base + g->data_start + t->offset;
    }
    qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_tensor_offset);
    for (int64_t i = 1; i < g->n_tensors; i++) {
        const bitnet_gguf_tensor_info *p = order[i - 1], *q = order[i];
        if (p->offset + p->nbytes > q->offset) {
            bitnet_status r = fail_at(g, err, BITNET_ERR_FORMAT, g->data_start + q->offset,
                                      "tensor %s (offset %llu, %llu bytes) overlaps tensor %s (offset %llu)", p->name,
                                      (unsigned long long)p->offset, (unsigned long long)p->nbytes, q->name,
                                      (unsigned long long)q->offset);
            bitnet_free(order);
            return r;
        }
    }
    bitnet_free(order);
    return BITNET_OK;
}

/* A reader for `size` bytes at base named `name` (messages); *out on success. Frees itself on failure. */
static bitnet_status open_bytes(const uint8_t *base, size_t size, bool mapped, const char *name, bool index_strings,
                                bitnet_gguf **out, bitnet_error *err) {
    bitnet_gguf *g = (bitnet_gguf *)bitnet_calloc(1, sizeof *g);
    if (!g) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", name);
    g->path = copy_str(name, strlen(name));
    g->base = base;
    g->size = size;
    g->mapped = mapped;
    g->index_strings = index_strings;
    bitnet_status st = g->path ? parse(g, err) : bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", name);
    if (st != BITNET_OK) {
        bitnet_gguf_close(g);
        return st;
    }
    *out = g;
    return BITNET_OK;
}

bitnet_status bitnet_gguf_open_memory(const void *data, size_t size, const char *name, unsigned flags,
                                      bitnet_gguf **out, bitnet_error *err) {
    if (out) *out = NULL;
    if (!out || (!data && size)) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf_open_memory: NULL data or output");
    if (!name) name = "(memory)";
    return open_bytes((const uint8_t *)data, size, false, name, (flags & BITNET_GGUF_NO_STRING_INDEX) == 0, out, err);
}

#ifndef BITNET_BARE_METAL
bitnet_status bitnet_gguf_open(const char *path, bitnet_gguf **out, bitnet_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf_open: NULL path or output");
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        const int e = errno;
        close(fd);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: not a regular file", path);
    }
    const size_t size = (size_t)sb.st_size;
    if (size < 24) {
        close(fd);
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: file of %llu bytes is too small for a GGUF header (24 bytes) (at byte 0)", path, (unsigned long long)size);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) return bitnet_fail(err, BITNET_ERR_IO, "%s: mmap failed: %s", path, strerror(map_errno));
    return open_bytes((const uint8_t *)map, size, true, path, true, out, err);
}
#endif

/* The layout named by string key `key` into *layout (-1 when absent). */
static bitnet_status layout_key(const bitnet_gguf *g, const char *key, int *layout, bitnet_error *err) {
    *layout = -1;
    if (bitnet_gguf_find_kv(g, key) < 0) return BITNET_OK;
    const char *s = NULL;
    size_t n = 0;
    bitnet_status st = bitnet_gguf_get_str(g, key, &s, &n, err);
    if (st != BITNET_OK) return st;
    if ((*layout = bitnet_i2s_layout_parse(s, n)) < 0) {
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: key '%s' = '%.*s' is not an I2_S layout this runtime knows (x86, arm64, rows4)", g->path,
                           key, n > 64 ? 64 : (int)n, s);
    }
    return BITNET_OK;
}

bitnet_status bitnet_gguf_i2s_layout(const bitnet_gguf *g, int *layout, int *from, bitnet_error *err) {
    int dummy;
    bitnet_status st = layout_key(g, BITNET_I2S_LAYOUT_KEY, layout, err);
    if (st != BITNET_OK) return st;
    return layout_key(g, BITNET_I2S_REWRITTEN_FROM_KEY, from ? from : &dummy, err);
}

void bitnet_gguf_release(const bitnet_gguf *g, const void *p, size_t n) {
#ifndef BITNET_BARE_METAL
    if (!g || !g->mapped || !p || n == 0) return;
    const uintptr_t base = (uintptr_t)g->base, lo = (uintptr_t)p, hi = lo + n;
    if (lo < base || hi > base + g->size || hi < lo) return;
    const long page_l = sysconf(_SC_PAGESIZE);
    const uintptr_t page = page_l > 0 ? (uintptr_t)page_l : 4096u;
    const uintptr_t first = (lo + page - 1) / page * page, last = hi / page * page; /* whole pages only */
    if (last > first) madvise((void *)first, (size_t)(last - first), MADV_DONTNEED);
#else
    (void)g, (void)p, (void)n;
#endif
}

void bitnet_gguf_close(bitnet_gguf *g) {
    if (!g) return;
#ifndef BITNET_BARE_METAL
    if (g->mapped && g->base) munmap((void *)g->base, g->size);
#endif
    bitnet_free(g->tensor_tab.slots);
    bitnet_free(g->kv_tab.slots);
    if (g->tensors) {
        for (int64_t i = g->n_tensors - 1; i >= 0; i--) bitnet_free((void *)g->tensors[i].name);
    }
    if (g->kv) {
        for (int64_t i = g->n_kv - 1; i >= 0; i--) {
            bitnet_free(g->kv[i].str_offs);
            bitnet_free(g->kv[i].key);
        }
    }
    bitnet_free(g->tinfo_off);
    bitnet_free(g->tensors);
    bitnet_free(g->kv);
    bitnet_free(g->path);
    bitnet_free(g);
}

const char *bitnet_gguf_path(const bitnet_gguf *g) { return g->path; }
uint32_t bitnet_gguf_version(const bitnet_gguf *g) { return g->version; }
uint32_t bitnet_gguf_alignment(const bitnet_gguf *g) { return g->alignment; }
size_t bitnet_gguf_file_size(const bitnet_gguf *g) { return g->size; }
size_t bitnet_gguf_data_offset(const bitnet_gguf *g) { return g->data_start; }

int64_t bitnet_gguf_n_kv(const bitnet_gguf *g) { return g->n_kv; }

const char *bitnet_gguf_kv_key(const bitnet_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

bitnet_gguf_type bitnet_gguf_kv_type(const bitnet_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? (bitnet_gguf_type)g->kv[i].type : (bitnet_gguf_type)-1;
}

int64_t bitnet_gguf_find_kv(const bitnet_gguf *g, const char *key) {
    if (!g || !key) return -1;
    return strtab_lookup((strtab *)&g->kv_tab, key, kv_name_of, g, -1);
}

/* Look up key and check its type (ARRAY: any element type). */
static bitnet_status get_kv(const bitnet_gguf *g, const char *key, const gguf_kv **out, bitnet_error *err) {
    const int64_t i = bitnet_gguf_find_kv(g, key);
    if (i < 0) return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: missing key '%s'", g->path, key ? key : "(null)");
    *out = &g->kv[i];
    return BITNET_OK;
}

static bitnet_status wrong_type(const bitnet_gguf *g, const gguf_kv *kv, const char *expected, bitnet_error *err) {
    return fail_at(g, err, BITNET_ERR_FORMAT, kv->rec_off, "key '%s' has type %s, expected %s", kv->key,
                   kv->type == BITNET_GGUF_ARRAY ? "array" : bitnet_gguf_type_name((bitnet_gguf_type)kv->type),
                   expected);
}

/* Integer value as sign + magnitude. false if kv is not an integer type. */
static bool kv_int(const bitnet_gguf *g, const gguf_kv *kv, bool *neg, uint64_t *mag) {
    const uint8_t *p = g->base + kv->val_off;
    int64_t s = 0;
    *neg = false;
    switch (kv->type) {
    case BITNET_GGUF_UINT8: *mag = p[0]; return true;
    case BITNET_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *mag = v; return true; }
    case BITNET_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *mag = v; return true; }
    case BITNET_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); *mag = v; return true; }
    case BITNET_GGUF_INT8: { int8_t v; memcpy(&v, p, 1); s = v; break; }
    case BITNET_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); s = v; break; }
    case BITNET_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); s = v; break; }
    case BITNET_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); s = v; break; }
    default: return false;
    }
    *neg = s < 0;
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
    return true;
}

static bitnet_status get_int(const bitnet_gguf *g, const char *key, bool allow_neg, uint64_t max_mag, bool *neg,
                             uint64_t *mag, const char *expected, bitnet_error *err) {
    const gguf_kv *kv = NULL;
    bitnet_status st = get_kv(g, key, &kv, err);
    if (st != BITNET_OK) return st;
    if (!kv_int(g, kv, neg, mag)) return wrong_type(g, kv, expected, err);
    if ((*neg && (!allow_neg || *mag > max_mag + 1)) || (!*neg && *mag > max_mag)) {
        return fail_at(g, err, BITNET_ERR_FORMAT, kv->val_off, "key '%s' = %s%llu does not fit %s", kv->key,
                       *neg ? "-" : "", (unsigned long long)*mag, expected);
    }
    return BITNET_OK;
}

bitnet_status bitnet_gguf_get_u32(const bitnet_gguf *g, const char *key, uint32_t *out, bitnet_error *err) {
    bool neg = false;
    uint64_t mag = 0;
    bitnet_status st = get_int(g, key, false, UINT32_MAX, &neg, &mag, "uint32", err);
    if (st == BITNET_OK) *out = (uint32_t)mag;
    return st;
}

bitnet_status bitnet_gguf_get_u64(const bitnet_gguf *g, const char *key, uint64_t *out, bitnet_error *err) {
    bool neg = false;
    uint64_t mag = 0;
    bitnet_status st = get_int(g, key, false, UINT64_MAX, &neg, &mag, "uint64", err);
    if (st == BITNET_OK) *out = mag;
    return st;
}

bitnet_status bitnet_gguf_get_i64(const bitnet_gguf *g, const char *key, int64_t *out, bitnet_error *err) {
    bool neg = false;
    uint64_t mag = 0;
    bitnet_status st = get_int(g, key, true, (uint64_t)INT64_MAX, &neg, &mag, "int64", err);
    if (st == BITNET_OK) *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return st;
}

bitnet_status bitnet_gguf_get_f64(const bitnet_gguf *g, const char *key, double *out, bitnet_error *err) {
    const gguf_kv *kv = NULL;
    bitnet_status st = get_kv(g, key, &kv, err);
    if (st != BITNET_OK) return st;
    if (kv->type == BITNET_GGUF_FLOAT32) {
        float f;
        memcpy(&f, g->base + kv->val_off, 4);
        *out = f;
    } else if (kv->type == BITNET_GGUF_FLOAT64) {
        memcpy(out, g->base + kv->val_off, 8);
    } else {
        return wrong_type(g, kv, "float32 or float64", err);
    }
    return BITNET_OK;
}

bitnet_status bitnet_gguf_get_f32(const bitnet_gguf *g, const char *key, float *out, bitnet_error *err) {
    double d;
    bitnet_status st = bitnet_gguf_get_f64(g, key, &d, err);
    if (st == BITNET_OK) *out = (float)d;
    return st;
}

bitnet_status bitnet_gguf_get_bool(const bitnet_gguf *g, const char *key, bool *out, bitnet_error *err) {
    const gguf_kv *kv = NULL;
    bitnet_status st = get_kv(g, key, &kv, err);
    if (st != BITNET_OK) return st;
    if (kv->type != BITNET_GGUF_BOOL) return wrong_type(g, kv, "bool", err);
    *out = g->base[kv->val_off] != 0;
    return BITNET_OK;
}

static const char *str_at(const bitnet_gguf *g, size_t off, size_t *len) {
    uint64_t n;
    memcpy(&n, g->base + off, 8);
    *len = (size_t)n;
    return (const char *)g->base + off + 8;
}

bitnet_status bitnet_gguf_get_str(const bitnet_gguf *g, const char *key, const char **ptr, size_t *len,
                                  bitnet_error *err) {
    const gguf_kv *kv = NULL;
    bitnet_status st = get_kv(g, key, &kv, err);
    if (st != BITNET_OK) return st;
    if (kv->type != BITNET_GGUF_STRING) return wrong_type(g, kv, "string", err);
    *ptr = str_at(g, kv->val_off, len);
    return BITNET_OK;
}

bitnet_status bitnet_gguf_get_arr(const bitnet_gguf *g, const char *key, bitnet_gguf_type *elem_type, uint64_t *n,
                                  const void **data, bitnet_error *err) {
    const gguf_kv *kv = NULL;
    bitnet_status st = get_kv(g, key, &kv, err);
    if (st != BITNET_OK) return st;
    if (kv->type != BITNET_GGUF_ARRAY) return wrong_type(g, kv, "array", err);
    if (elem_type) *elem_type = (bitnet_gguf_type)kv->elem_type;
    if (n) *n = kv->n;
    if (data) *data = g->base + kv->val_off;
    return BITNET_OK;
}

/* Offset of element i's u64 length in string array kv (i < kv->n): the index, or a walk over the elements
 * before it (validated at open) when string arrays are not indexed. */
static size_t arr_str_off(const bitnet_gguf *g, const gguf_kv *kv, uint64_t i) {
    if (kv->str_offs) return kv->str_offs[i];
    size_t off = kv->val_off;
    for (uint64_t j = 0; j < i; j++) {
        uint64_t n;
        memcpy(&n, g->base + off, 8);
        off += 8 + (size_t)n;
    }
    return off;
}

bitnet_status bitnet_gguf_get_arr_str(const bitnet_gguf *g, const char *key, uint64_t i, const char **ptr,
                                      size_t *len, bitnet_error *err) {
    const gguf_kv *kv = NULL;
    bitnet_status st = get_kv(g, key, &kv, err);
    if (st != BITNET_OK) return st;
    if (kv->type != BITNET_GGUF_ARRAY || kv->elem_type != BITNET_GGUF_STRING) {
        return wrong_type(g, kv, "array of string", err);
    }
    if (i >= kv->n) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: key '%s': index %llu out of range (%llu strings)",
                           g->path, kv->key, (unsigned long long)i, (unsigned long long)kv->n);
    }
    *ptr = str_at(g, arr_str_off(g, kv, i), len);
    return BITNET_OK;
}

const char *bitnet_gguf_kv_arr_str(const bitnet_gguf *g, int64_t kv, uint64_t i, size_t *len) {
    if (!g || kv < 0 || kv >= g->n_kv) return NULL;
    const gguf_kv *k = &g->kv[kv];
    if (k->type != BITNET_GGUF_ARRAY || k->elem_type != BITNET_GGUF_STRING || i >= k->n) return NULL;
    return str_at(g, arr_str_off(g, k, i), len);
}

bool bitnet_gguf_kv_encoded(const bitnet_gguf *g, int64_t i, uint32_t *type, const uint8_t **val, size_t *len) {
    if (!g || i < 0 || i >= g->n_kv) return false;
    const gguf_kv *kv = &g->kv[i];
    size_t start = kv->val_off, end;
    if (kv->type == BITNET_GGUF_STRING) {
        uint64_t n;
        memcpy(&n, g->base + start, 8);
        end = start + 8 + (size_t)n;
    } else if (kv->type == BITNET_GGUF_ARRAY) {
        start = kv->val_off - 12; /* u32 element type, u64 count */
        if (kv->elem_type != BITNET_GGUF_STRING) {
            end = kv->val_off + (size_t)kv->n * type_size(kv->elem_type);
        } else if (kv->n == 0) {
            end = kv->val_off;
        } else {
            const size_t last = arr_str_off(g, kv, kv->n - 1);
            uint64_t n;
            memcpy(&n, g->base + last, 8);
            end = last + 8 + (size_t)n;
        }
    } else {
        end = start + type_size(kv->type);
    }
    *type = kv->type;
    *val = g->base + start;
    *len = end - start;
    return true;
}

int64_t bitnet_gguf_n_tensors(const bitnet_gguf *g) { return g->n_tensors; }

const bitnet_gguf_tensor_info *bitnet_gguf_tensor(const bitnet_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const bitnet_gguf_tensor_info *bitnet_gguf_find_tensor(const bitnet_gguf *g, const char *name) {
    if (!g || !name) return NULL;
    const int64_t i = strtab_lookup((strtab *)&g->tensor_tab, name, tensor_name_of, g, -1);
    return i >= 0 ? &g->tensors[i] : NULL;
}
