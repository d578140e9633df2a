/* gguf_write.c — the streaming GGUF v3 writer of gguf.h: keys and tensor infos are collected first
 * (bitnet_gguf_set_*, bitnet_gguf_add_tensor), bitnet_gguf_write_begin writes the header to a temporary
 * file, bitnet_gguf_write_data streams each tensor's bytes in order (with the alignment padding) and
 * bitnet_gguf_write_end renames the file into place (the temporary file and the rename are outfile.h's).
 * Format: the public GGUF specification (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md); the
 * reader is gguf_read.c. */
#include "base/gguf_internal.h"

#include "base/outfile.h"
#include "base/quants.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Writer
 * ------------------------------------------------------------------------------------------- */

typedef struct wkv {
    char *key;
    uint32_t type;
    uint8_t *val; /* encoded value: everything after the u32 value type */
    size_t val_len;
} wkv;

typedef struct wtensor {
    char *name;
    int type;
    int n_dims;
    int64_t ne[4];
    size_t nbytes;
    uint64_t offset;
} wtensor;

struct bitnet_gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t data_size; /* running end of the data section (aligned) */
    char sticky[512];   /* first set_* failure, reported by write_begin */
    bitnet_status sticky_st;
    /* streaming state */
    bitnet_outfile out;   /* "<path>.tmp" while a write is in progress (out.f != NULL) */
    size_t cur;           /* current tensor */
    size_t cur_written;   /* bytes of the current tensor written */
    bool begun; /* write_begin was called: keys and tensors are frozen */
};

bitnet_gguf_writer *bitnet_gguf_writer_new(void) {
    return (bitnet_gguf_writer *)calloc(1, sizeof(bitnet_gguf_writer));
}

void bitnet_gguf_write_abort(bitnet_gguf_writer *w) {
    if (!w) return;
    bitnet_outfile_abort(&w->out);
}

void bitnet_gguf_writer_free(bitnet_gguf_writer *w) {
    if (!w) return;
    bitnet_gguf_write_abort(w);
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val);
    }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w);
}

static bitnet_status set_sticky(bitnet_gguf_writer *w, bitnet_status st, const char *key, const char *why) {
    if (w && w->sticky_st == BITNET_OK) {
        w->sticky_st = st;
        snprintf(w->sticky, sizeof w->sticky, "gguf writer: key '%s': %s", key ? key : "(null)", why);
    }
    return st;
}

/* Store an encoded value under key (replacing an earlier value). Takes ownership of val. */
static bitnet_status put_kv(bitnet_gguf_writer *w, const char *key, uint32_t type, uint8_t *val, size_t len) {
    if (!w) {
        free(val);
        return BITNET_ERR_INVALID_ARG;
    }
    if (!val) return set_sticky(w, BITNET_ERR_NOMEM, key, "out of memory");
    const char *why = NULL;
    if (!key || !key[0] || strlen(key) > GGUF_MAX_KEY) why = "key must be 1..65535 bytes";
    else if (w->begun) why = "set after write_begin";
    if (why) {
        free(val);
        return set_sticky(w, BITNET_ERR_INVALID_ARG, key, why);
    }
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, key) == 0) {
            free(w->kv[i].val);
            w->kv[i].type = type;
            w->kv[i].val = val;
            w->kv[i].val_len = len;
            return BITNET_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        size_t nc = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *nk = (wkv *)realloc(w->kv, nc * sizeof *nk);
        if (!nk) {
            free(val);
            return set_sticky(w, BITNET_ERR_NOMEM, key, "out of memory");
        }
        w->kv = nk;
        w->cap_kv = nc;
    }
    char *k = bitnet_strndup(key, strlen(key));
    if (!k) {
        free(val);
        return set_sticky(w, BITNET_ERR_NOMEM, key, "out of memory");
    }
    w->kv[w->n_kv++] = (wkv){k, type, val, len};
    return BITNET_OK;
}

static uint8_t *encode(const void *data, size_t n) {
    uint8_t *v = (uint8_t *)malloc(n ? n : 1);
    if (v && n) memcpy(v, data, n);
    return v;
}

bitnet_status bitnet_gguf_copy_kv(bitnet_gguf_writer *w, const bitnet_gguf *g, int64_t i) {
    uint32_t type;
    const uint8_t *val;
    size_t len;
    if (!bitnet_gguf_kv_encoded(g, i, &type, &val, &len))
        return set_sticky(w, BITNET_ERR_INVALID_ARG, "(copy)", "no such key in the source file");
    return put_kv(w, bitnet_gguf_kv_key(g, i), type, encode(val, len), len);
}

bitnet_status bitnet_gguf_set_scalar(bitnet_gguf_writer *w, const char *key, bitnet_gguf_type type, const void *value) {
    const size_t sz = type_size((uint32_t)type);
    if (sz == 0 || !value) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "set_scalar: not a numeric/bool type");
    if (type == BITNET_GGUF_BOOL && *(const uint8_t *)value > 1) {
        return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "bool value must be 0 or 1");
    }
    return put_kv(w, key, (uint32_t)type, encode(value, sz), sz);
}

bitnet_status bitnet_gguf_set_u32(bitnet_gguf_writer *w, const char *key, uint32_t v) {
    return bitnet_gguf_set_scalar(w, key, BITNET_GGUF_UINT32, &v);
}
bitnet_status bitnet_gguf_set_i32(bitnet_gguf_writer *w, const char *key, int32_t v) {
    return bitnet_gguf_set_scalar(w, key, BITNET_GGUF_INT32, &v);
}
bitnet_status bitnet_gguf_set_f32(bitnet_gguf_writer *w, const char *key, float v) {
    return bitnet_gguf_set_scalar(w, key, BITNET_GGUF_FLOAT32, &v);
}
bitnet_status bitnet_gguf_set_bool(bitnet_gguf_writer *w, const char *key, bool v) {
    const uint8_t b = v ? 1 : 0;
    return bitnet_gguf_set_scalar(w, key, BITNET_GGUF_BOOL, &b);
}

bitnet_status bitnet_gguf_set_str(bitnet_gguf_writer *w, const char *key, const char *v) {
    if (!v) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "NULL string value");
    const uint64_t n = strlen(v);
    uint8_t *val = (uint8_t *)malloc(8 + n);
    if (val) {
        memcpy(val, &n, 8);
        memcpy(val + 8, v, n);
    }
    return put_kv(w, key, BITNET_GGUF_STRING, val, 8 + n);
}

bitnet_status bitnet_gguf_set_arr(bitnet_gguf_writer *w, const char *key, bitnet_gguf_type elem_type, const void *data,
                                  uint64_t n) {
    const size_t sz = type_size((uint32_t)elem_type);
    if (sz == 0) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "set_arr: element type must be numeric or bool");
    if (n && !data) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "set_arr: NULL data");
    if (n > (SIZE_MAX - 12) / sz) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "set_arr: too many elements");
    if (elem_type == BITNET_GGUF_BOOL) {
        for (uint64_t i = 0; i < n; i++) {
            if (((const uint8_t *)data)[i] > 1) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "bool element not 0/1");
        }
    }
    const size_t len = 12 + (size_t)n * sz;
    uint8_t *val = (uint8_t *)malloc(len);
    if (val) {
        const uint32_t et = (uint32_t)elem_type;
        memcpy(val, &et, 4);
        memcpy(val + 4, &n, 8);
        if (n) memcpy(val + 12, data, (size_t)n * sz);
    }
    return put_kv(w, key, BITNET_GGUF_ARRAY, val, len);
}

bitnet_status bitnet_gguf_set_arr_str(bitnet_gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    if (n && !strs) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "set_arr_str: NULL strings");
    size_t len = 12;
    for (uint64_t i = 0; i < n; i++) {
        if (!strs[i]) return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "set_arr_str: NULL element");
        if (__builtin_add_overflow(len, 8 + strlen(strs[i]), &len)) {
            return set_sticky(w, BITNET_ERR_INVALID_ARG, key, "set_arr_str: too large");
        }
    }
    uint8_t *val = (uint8_t *)malloc(len);
    if (val) {
        const uint32_t et = BITNET_GGUF_STRING;
        memcpy(val, &et, 4);
        memcpy(val + 4, &n, 8);
        size_t o = 12;
        for (uint64_t i = 0; i < n; i++) {
            const uint64_t sl = strlen(strs[i]);
            memcpy(val + o, &sl, 8);
            memcpy(val + o + 8, strs[i], sl);
            o += 8 + sl;
        }
    }
    return put_kv(w, key, BITNET_GGUF_ARRAY, val, len);
}

bitnet_status bitnet_gguf_add_tensor(bitnet_gguf_writer *w, const char *name, int type, int n_dims, const int64_t *ne,
                                     bitnet_error *err) {
    if (!w || !name || !ne) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: add_tensor: NULL argument");
    if (w->begun) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: tensor %s added after write_begin", name);
    const size_t nl = strlen(name);
    if (nl >= GGUF_MAX_NAME) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: tensor name '%s' is %zu bytes (limit %u)", name,
                           nl, GGUF_MAX_NAME - 1);
    }
    for (size_t i = 0; i < w->n_t; i++) {
        if (strcmp(w->t[i].name, name) == 0) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: duplicate tensor name '%s'", name);
        }
    }
    size_t nbytes;
    bitnet_error terr;
    bitnet_status st = bitnet_type_nbytes(type, n_dims, ne, &nbytes, &terr);
    if (st != BITNET_OK) return bitnet_fail(err, st, "gguf writer: tensor %s: %s", name, terr.msg);
    if (w->n_t == w->cap_t) {
        size_t nc = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = (wtensor *)realloc(w->t, nc * sizeof *nt);
        if (!nt) return bitnet_fail(err, BITNET_ERR_NOMEM, "gguf writer: out of memory adding tensor %s", name);
        w->t = nt;
        w->cap_t = nc;
    }
    char *nm = bitnet_strndup(name, nl);
    if (!nm) return bitnet_fail(err, BITNET_ERR_NOMEM, "gguf writer: out of memory adding tensor %s", name);
    wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof *t);
    t->name = nm;
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) t->ne[d] = ne[d];
    t->nbytes = nbytes;
    t->offset = w->data_size;
    w->data_size += (nbytes + GGUF_DEFAULT_ALIGNMENT - 1) / GGUF_DEFAULT_ALIGNMENT * GGUF_DEFAULT_ALIGNMENT;
    return BITNET_OK;
}

/* Write helpers: on failure set the error ("cannot write PATH: <strerror>") and abort the write. */
static bitnet_status w_bytes(bitnet_gguf_writer *w, const void *p, size_t n, bitnet_error *err) {
    return bitnet_outfile_write(&w->out, p, n, err);
}

static bitnet_status w_zeros(bitnet_gguf_writer *w, size_t n, bitnet_error *err) {
    static const uint8_t z[64];
    while (n) {
        const size_t k = n < sizeof z ? n : sizeof z;
        bitnet_status st = w_bytes(w, z, k, err);
        if (st != BITNET_OK) return st;
        n -= k;
    }
    return BITNET_OK;
}

static bitnet_status w_str(bitnet_gguf_writer *w, const char *s, bitnet_error *err) {
    const uint64_t n = strlen(s);
    bitnet_status st = w_bytes(w, &n, 8, err);
    return st != BITNET_OK ? st : w_bytes(w, s, (size_t)n, err);
}

bitnet_status bitnet_gguf_write_begin(bitnet_gguf_writer *w, const char *path, bitnet_error *err) {
    if (!w || !path) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: write_begin: NULL argument");
    if (w->begun) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: write_begin called twice");
    if (w->sticky_st != BITNET_OK) return bitnet_fail(err, w->sticky_st, "%s", w->sticky);
    for (size_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kv[i].key, "general.alignment") == 0) {
            uint32_t a = 0;
            if (w->kv[i].type == BITNET_GGUF_UINT32) memcpy(&a, w->kv[i].val, 4);
            if (a != GGUF_DEFAULT_ALIGNMENT) {
                return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                                   "gguf writer: general.alignment must be uint32 %u (the writer's alignment)",
                                   GGUF_DEFAULT_ALIGNMENT);
            }
        }
    }
    w->begun = true;
    bitnet_status st = bitnet_outfile_open(&w->out, path, err);
    if (st != BITNET_OK) return st;
    setvbuf(w->out.f, NULL, _IOFBF, 1 << 20);

    const uint32_t version = 3;
    const uint64_t nt = w->n_t, nkv = w->n_kv;
    if ((st = w_bytes(w, "GGUF", 4, err)) || (st = w_bytes(w, &version, 4, err)) || (st = w_bytes(w, &nt, 8, err)) ||
        (st = w_bytes(w, &nkv, 8, err))) {
        return st;
    }
    uint64_t off = 24;
    for (size_t i = 0; i < w->n_kv; i++) {
        const wkv *k = &w->kv[i];
        if ((st = w_str(w, k->key, err)) || (st = w_bytes(w, &k->type, 4, err)) ||
            (st = w_bytes(w, k->val, k->val_len, err))) {
            return st;
        }
        off += 8 + strlen(k->key) + 4 + k->val_len;
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        const uint32_t nd = (uint32_t)t->n_dims, ty = (uint32_t)t->type;
        if ((st = w_str(w, t->name, err)) || (st = w_bytes(w, &nd, 4, err))) return st;
        for (int d = 0; d < t->n_dims; d++) {
            const uint64_t v = (uint64_t)t->ne[d];
            if ((st = w_bytes(w, &v, 8, err))) return st;
        }
        if ((st = w_bytes(w, &ty, 4, err)) || (st = w_bytes(w, &t->offset, 8, err))) return st;
        off += 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 12;
    }
    const uint64_t pad = (GGUF_DEFAULT_ALIGNMENT - off % GGUF_DEFAULT_ALIGNMENT) % GGUF_DEFAULT_ALIGNMENT;
    if ((st = w_zeros(w, (size_t)pad, err))) return st;
    w->cur = 0;
    w->cur_written = 0;
    return BITNET_OK;
}

static bitnet_status not_writing(bitnet_gguf_writer *w, bitnet_error *err) {
    if (!w) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: NULL writer");
    return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                       "gguf writer: no write in progress (write_begin not called, or the write finished, failed or "
                       "was aborted)");
}

/* Padding after tensor i (to the next 32-byte boundary). */
static size_t tensor_pad(const wtensor *t) {
    return (GGUF_DEFAULT_ALIGNMENT - t->nbytes % GGUF_DEFAULT_ALIGNMENT) % GGUF_DEFAULT_ALIGNMENT;
}

bitnet_status bitnet_gguf_write_data(bitnet_gguf_writer *w, const void *data, size_t n, bitnet_error *err) {
    if (!w || !w->out.f) return not_writing(w, err);
    if (n == 0) return BITNET_OK;
    if (!data) {
        bitnet_gguf_write_abort(w);
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: write_data: NULL data");
    }
    bitnet_status st;
    if (w->cur < w->n_t && w->cur_written == w->t[w->cur].nbytes) {
        /* current tensor complete: pad and move on */
        if ((st = w_zeros(w, tensor_pad(&w->t[w->cur]), err))) return st;
        w->cur++;
        w->cur_written = 0;
    }
    if (w->cur >= w->n_t) {
        bitnet_gguf_write_abort(w);
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "gguf writer: %zu bytes written after the last tensor", n);
    }
    const wtensor *t = &w->t[w->cur];
    if (n > t->nbytes - w->cur_written) {
        bitnet_status r = bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                                      "gguf writer: tensor %s: %zu bytes written at byte %zu of a %zu-byte tensor",
                                      t->name, n, w->cur_written, t->nbytes);
        bitnet_gguf_write_abort(w);
        return r;
    }
    if ((st = w_bytes(w, data, n, err))) return st;
    w->cur_written += n;
    return BITNET_OK;
}

bitnet_status bitnet_gguf_write_end(bitnet_gguf_writer *w, bitnet_error *err) {
    if (!w || !w->out.f) return not_writing(w, err);
    bitnet_status st;
    if (w->n_t > 0) {
        const wtensor *t = &w->t[w->cur];
        if (w->cur != w->n_t - 1 || w->cur_written != t->nbytes) {
            size_t i = w->cur, have = w->cur_written;
            if (have == w->t[i].nbytes) i++, have = 0; /* first incomplete tensor */
            st = bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                             "gguf writer: %s: tensor %s has %zu of %zu bytes (tensor %zu of %zu)", w->out.path,
                             w->t[i].name, have, w->t[i].nbytes, i + 1, w->n_t);
            bitnet_gguf_write_abort(w);
            return st;
        }
        if ((st = w_zeros(w, tensor_pad(t), err))) return st;
    }
    return bitnet_outfile_commit(&w->out, err); /* flush, fsync, close, rename; removes the file on failure */
}
