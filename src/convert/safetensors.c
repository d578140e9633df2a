/* safetensors.c — the safetensors reader of safetensors.h: mmap each file, parse and validate its JSON
 * header with json-c, merge sharded checkpoints through model.safetensors.index.json, convert
 * BF16/F16/F32/F64 elements to float32. */
#define _DEFAULT_SOURCE /* madvise(MADV_DONTNEED) */
#include "convert/safetensors.h"

#include "base/quants.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The official implementation refuses headers above 100 MB; so do we (a corrupt size field must not
 * make us parse gigabytes). */
#define MAX_HEADER_BYTES (100u * 1000u * 1000u)
#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define MAX_JSON_DEPTH 16

static const struct {
    const char *name;
    size_t size;
} DTYPES[BITNET_ST_N_DTYPES] = {
    [BITNET_ST_BOOL] = {"BOOL", 1},       [BITNET_ST_U8] = {"U8", 1},   [BITNET_ST_I8] = {"I8", 1},
    [BITNET_ST_F8_E4M3] = {"F8_E4M3", 1}, [BITNET_ST_F8_E5M2] = {"F8_E5M2", 1},
    [BITNET_ST_I16] = {"I16", 2},         [BITNET_ST_U16] = {"U16", 2}, [BITNET_ST_F16] = {"F16", 2},
    [BITNET_ST_BF16] = {"BF16", 2},       [BITNET_ST_I32] = {"I32", 4}, [BITNET_ST_U32] = {"U32", 4},
    [BITNET_ST_F32] = {"F32", 4},         [BITNET_ST_I64] = {"I64", 8}, [BITNET_ST_U64] = {"U64", 8},
    [BITNET_ST_F64] = {"F64", 8},
};

const char *bitnet_st_dtype_name(int dtype) {
    return dtype >= 0 && dtype < BITNET_ST_N_DTYPES ? DTYPES[dtype].name : "unknown";
}

size_t bitnet_st_dtype_size(int dtype) {
    return dtype >= 0 && dtype < BITNET_ST_N_DTYPES ? DTYPES[dtype].size : 0;
}

typedef struct st_file {
    char *path;
    int fd;
    uint8_t *map;      /* whole file, read-only */
    size_t size;
} st_file;

struct bitnet_st_set {
    st_file *files;
    int64_t n_files;
    bitnet_st_tensor *tensors; /* sorted by name */
    int64_t n_tensors;
    int64_t cap_tensors;
};


static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = (char *)malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t n = a;
    if (a && dir[a - 1] != '/') p[n++] = '/';
    memcpy(p + n, name, b + 1);
    return p;
}

/* ---------------------------------------------------------------------------------------------
 * Files
 * ------------------------------------------------------------------------------------------- */

static bitnet_status map_file(const char *path, st_file *f, bitnet_error *err) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    f->path = bitnet_strndup(path, strlen(path));
    if (!f->path) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return bitnet_fail(err, BITNET_ERR_IO, "%s: not a regular file", path);
    f->size = (size_t)st.st_size;
    if (f->size < 8)
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: truncated safetensors file: %zu bytes, less than the 8-byte header size field", path,
                           f->size);
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (m == MAP_FAILED) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot mmap: %s", path, strerror(errno));
    f->map = (uint8_t *)m;
    return BITNET_OK;
}

static void unmap_file(st_file *f) {
    if (f->map) munmap(f->map, f->size);
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

/* Parse `len` bytes of JSON text; *out is a new reference. The whole text must be one value plus
 * optional whitespace (safetensors pads headers with spaces). */
static bitnet_status parse_json(const char *path, const char *what, const char *text, size_t len, size_t base,
                                json_object **out, bitnet_error *err) {
    *out = NULL;
    if (len > (size_t)INT32_MAX)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s of %zu bytes is too large", path, what, len);
    json_tokener *tok = json_tokener_new_ex(MAX_JSON_DEPTH);
    if (!tok) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS | JSON_TOKENER_VALIDATE_UTF8);
    json_object *o = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    bitnet_status st = BITNET_OK;
    if (!o) {
        if (jerr == json_tokener_continue)
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s: JSON ends early at byte %zu (truncated?)", path, what,
                             base + len);
        else
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s: malformed JSON at byte %zu: %s", path, what, base + end,
                             json_tokener_error_desc(jerr));
    } else {
        for (size_t i = end; i < len; i++) {
            char c = text[i];
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s: unexpected byte 0x%02x after the JSON value at byte %zu",
                                 path, what, (unsigned)(unsigned char)c, base + i);
                break;
            }
        }
    }
    json_tokener_free(tok);
    if (st != BITNET_OK) {
        json_object_put(o);
        return st;
    }
    *out = o;
    return BITNET_OK;
}

/* A JSON integer that is >= 0 and fits int64. */
static bool json_nonneg_int(json_object *v, int64_t *out) {
    if (!v || !json_object_is_type(v, json_type_int)) return false;
    errno = 0;
    int64_t x = json_object_get_int64(v);
    if (x < 0 || errno) return false;
    if (x == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX) return false; /* clamped */
    *out = x;
    return true;
}

static int find_dtype(const char *s, size_t len) {
    for (int i = 0; i < BITNET_ST_N_DTYPES; i++)
        if (strlen(DTYPES[i].name) == len && memcmp(DTYPES[i].name, s, len) == 0) return i;
    return -1;
}

static bitnet_status push_tensor(bitnet_st_set *s, const bitnet_st_tensor *t, const char *path, bitnet_error *err) {
    if (s->n_tensors == s->cap_tensors) {
        int64_t cap = s->cap_tensors ? s->cap_tensors * 2 : 256;
        bitnet_st_tensor *n = (bitnet_st_tensor *)realloc(s->tensors, (size_t)cap * sizeof *n);
        if (!n) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
        s->tensors = n;
        s->cap_tensors = cap;
    }
    s->tensors[s->n_tensors++] = *t;
    return BITNET_OK;
}

typedef struct range {
    uint64_t begin, end;
    const char *name;
} range;

static int cmp_range(const void *a, const void *b) {
    const range *x = (const range *)a, *y = (const range *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* One tensor entry of a header. */
static bitnet_status parse_entry(const st_file *f, const char *name, json_object *v, uint64_t data_start,
                                 bitnet_st_tensor *t, bitnet_error *err) {
    const char *path = f->path;
    memset(t, 0, sizeof *t);
    if (!json_object_is_type(v, json_type_object))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': header entry is not a JSON object", path, name);
    json_object *jd = NULL, *js = NULL, *jo = NULL;
    if (!json_object_object_get_ex(v, "dtype", &jd) || !json_object_is_type(jd, json_type_string))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    if (!json_object_object_get_ex(v, "shape", &js) || !json_object_is_type(js, json_type_array))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
    if (!json_object_object_get_ex(v, "data_offsets", &jo) || !json_object_is_type(jo, json_type_array) ||
        json_object_array_length(jo) != 2)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" must be an array [begin, end]",
                           path, name);
    const char *ds = json_object_get_string(jd);
    int dt = find_dtype(ds, (size_t)json_object_get_string_len(jd));
    if (dt < 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s': unknown dtype \"%.32s\" (known: BOOL, U8, I8, F8_E4M3, F8_E5M2, I16, U16, "
                           "F16, BF16, I32, U32, F32, I64, U64, F64)",
                           path, name, ds);
    size_t nd = json_object_array_length(js);
    if (nd > BITNET_ST_MAX_DIMS)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s': %zu dimensions (at most %d supported)", path,
                           name, nd, BITNET_ST_MAX_DIMS);
    t->dtype = dt;
    t->n_dims = (int)nd;
    uint64_t n = 1;
    for (int i = 0; i < BITNET_ST_MAX_DIMS; i++) t->shape[i] = 1;
    for (size_t i = 0; i < nd; i++) {
        int64_t d;
        if (!json_nonneg_int(json_object_array_get_idx(js, i), &d))
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path,
                               name, i);
        t->shape[i] = d;
        if (d != 0 && n > UINT64_MAX / (uint64_t)d)
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': element count overflows", path, name);
        n *= (uint64_t)d;
    }
    t->n_elements = n;
    int64_t b, e;
    if (!json_nonneg_int(json_object_array_get_idx(jo, 0), &b) || !json_nonneg_int(json_object_array_get_idx(jo, 1), &e))
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", path,
                           name);
    const uint64_t esz = DTYPES[dt].size;
    if (n > UINT64_MAX / esz)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': byte size overflows", path, name);
    if (e < b || (uint64_t)(e - b) != n * esz)
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: tensor '%s': data_offsets [%lld, %lld] hold %lld bytes, but %s of %llu elements need %llu",
                           path, name, (long long)b, (long long)e, (long long)(e - b), DTYPES[dt].name,
                           (unsigned long long)n, (unsigned long long)(n * esz));
    const uint64_t data_size = f->size - data_start;
    if ((uint64_t)e > data_size)
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: tensor '%s': data_offsets [%lld, %lld] end beyond the data buffer (%llu bytes): "
                           "the file is truncated",
                           path, name, (long long)b, (long long)e, (unsigned long long)data_size);
    t->data = f->map + data_start + (uint64_t)b;
    t->nbytes = (size_t)(n * esz);
    t->path = f->path;
    return BITNET_OK;
}

/* Validate one file's header and append its tensors to the set. */
static bitnet_status load_header(bitnet_st_set *s, const st_file *f, bitnet_error *err) {
    const char *path = f->path;
    uint64_t hsize = 0;
    for (int i = 7; i >= 0; i--) hsize = hsize << 8 | f->map[i];
    if (hsize > MAX_HEADER_BYTES)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: header size %llu is larger than the 100 MB the format allows "
                           "(not a safetensors file?)", path, (unsigned long long)hsize);
    if (hsize > f->size - 8)
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: truncated safetensors file: the header needs %llu bytes, the file has %zu after the size "
                           "field", path, (unsigned long long)hsize, f->size - 8);
    if (hsize < 2 || f->map[8] != '{')
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: the header does not start with '{' (not a safetensors file?)",
                           path);
    json_object *root = NULL;
    bitnet_status st = parse_json(path, "header", (const char *)f->map + 8, (size_t)hsize, 8, &root, err);
    if (st != BITNET_OK) return st;
    if (!json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: the header is not a JSON object", path);
    }
    const uint64_t data_start = 8 + hsize;
    const int64_t first = s->n_tensors;
    json_object_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_object_is_type(val, json_type_object)) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"__metadata__\" is not a JSON object", path);
                break;
            }
            continue;
        }
        bitnet_st_tensor t;
        if ((st = parse_entry(f, key, val, data_start, &t, err)) != BITNET_OK) break;
        t.name = bitnet_strndup(key, strlen(key));
        if (!t.name) {
            st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
            break;
        }
        if ((st = push_tensor(s, &t, path, err)) != BITNET_OK) {
            free((char *)t.name);
            break;
        }
    }
    json_object_put(root);
    if (st != BITNET_OK) return st;

    /* The byte ranges must tile the data buffer: sorted, no overlap, no hole, nothing after the last. */
    const int64_t n = s->n_tensors - first;
    range *r = (range *)malloc((size_t)(n ? n : 1) * sizeof *r);
    if (!r) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    for (int64_t i = 0; i < n; i++) {
        const bitnet_st_tensor *t = &s->tensors[first + i];
        r[i].begin = (uint64_t)(t->data - (f->map + data_start));
        r[i].end = r[i].begin + t->nbytes;
        r[i].name = t->name;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_range);
    uint64_t pos = 0;
    for (int64_t i = 0; i < n && st == BITNET_OK; i++) {
        if (r[i].begin < pos)
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s'", path,
                             r[i].name, (unsigned long long)r[i].begin, (unsigned long long)r[i].end, r[i - 1].name);
        else if (r[i].begin > pos)
            st = bitnet_fail(err, BITNET_ERR_FORMAT,
                             "%s: tensor '%s': data_offsets [%llu, %llu] leave a hole at [%llu, %llu) in the data buffer",
                             path, r[i].name, (unsigned long long)r[i].begin, (unsigned long long)r[i].end,
                             (unsigned long long)pos, (unsigned long long)r[i].begin);
        pos = r[i].end;
    }
    if (st == BITNET_OK && pos != f->size - data_start)
        st = bitnet_fail(err, BITNET_ERR_FORMAT,
                         "%s: %llu bytes after the last tensor's data (the header describes %llu of %llu data bytes)", path,
                         (unsigned long long)(f->size - data_start - pos), (unsigned long long)pos,
                         (unsigned long long)(f->size - data_start));
    free(r);
    return st;
}

static bitnet_status add_file(bitnet_st_set *s, const char *path, bitnet_error *err) {
    st_file *nf = (st_file *)realloc(s->files, (size_t)(s->n_files + 1) * sizeof *nf);
    if (!nf) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    s->files = nf;
    st_file *f = &s->files[s->n_files];
    bitnet_status st = map_file(path, f, err);
    s->n_files++; /* even on failure: close releases what map_file got */
    if (st != BITNET_OK) return st;
    return load_header(s, f, err);
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const bitnet_st_tensor *)a)->name, ((const bitnet_st_tensor *)b)->name);
}

/* Sort the set's tensors by name; a name held twice (two shards, or a header naming it twice) is an
 * error naming both files. */
static bitnet_status sort_tensors(bitnet_st_set *s, bitnet_error *err) {
    if (s->n_tensors < 2) return BITNET_OK; /* a header of no tensors leaves s->tensors NULL: qsort takes no NULL */
    qsort(s->tensors, (size_t)s->n_tensors, sizeof *s->tensors, cmp_tensor);
    for (int64_t i = 1; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i - 1].name, s->tensors[i].name) == 0)
            return bitnet_fail(err, BITNET_ERR_FORMAT, "tensor '%s' is stored twice: in %s and in %s", s->tensors[i].name,
                               s->tensors[i - 1].path, s->tensors[i].path);
    return BITNET_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---------------------------------------------------------------------------------------------
 * Sharded checkpoints
 * ------------------------------------------------------------------------------------------- */

static bool plain_file_name(const char *s) {
    return *s && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static bitnet_status read_small_file(const char *path, char **text, size_t *len, bitnet_error *err) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 65536;
            if (cap > (size_t)512 << 20) {
                fclose(fp);
                free(buf);
                return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: larger than 512 MiB (not a JSON file of a model folder?)", path);
            }
            char *nb = (char *)realloc(buf, cap);
            if (!nb) {
                fclose(fp);
                free(buf);
                return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, fp);
        n += got;
        if (got == 0) break;
    }
    bool bad = ferror(fp) != 0;
    fclose(fp);
    if (bad) {
        free(buf);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: read error", path);
    }
    *text = buf;
    *len = n;
    return BITNET_OK;
}

bitnet_status bitnet_json_read_file(const char *path, struct json_object **out, bitnet_error *err) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    bitnet_status st = read_small_file(path, &text, &len, err);
    if (st != BITNET_OK) return st;
    st = parse_json(path, "JSON", text, len, 0, out, err);
    free(text);
    return st;
}

static bitnet_status open_index(bitnet_st_set *s, const char *dir, const char *index_path, bitnet_error *err) {
    json_object *root = NULL;
    bitnet_status st = bitnet_json_read_file(index_path, &root, err);
    if (st != BITNET_OK) return st;
    json_object *map = NULL;
    if (!json_object_is_type(root, json_type_object) || !json_object_object_get_ex(root, "weight_map", &map) ||
        !json_object_is_type(map, json_type_object)) {
        json_object_put(root);
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: no \"weight_map\" object", index_path);
    }
    /* Distinct shard names, sorted. */
    size_t n_map = (size_t)json_object_object_length(map);
    const char **shards = (const char **)malloc((n_map ? n_map : 1) * sizeof *shards);
    size_t n_shards = 0;
    if (!shards) {
        json_object_put(root);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", index_path);
    }
    json_object_object_foreach(map, tname, shard) {
        if (!json_object_is_type(shard, json_type_string) || !plain_file_name(json_object_get_string(shard))) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT,
                             "%s: weight_map[\"%s\"] must be the file name of a shard in the same folder", index_path,
                             tname);
            break;
        }
        shards[n_shards++] = json_object_get_string(shard);
    }
    if (st == BITNET_OK && n_shards == 0)
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);
    if (st == BITNET_OK) {
        qsort(shards, n_shards, sizeof *shards, cmp_str);
        size_t u = 0;
        for (size_t i = 0; i < n_shards; i++)
            if (u == 0 || strcmp(shards[u - 1], shards[i]) != 0) shards[u++] = shards[i];
        n_shards = u;
        for (size_t i = 0; i < n_shards && st == BITNET_OK; i++) {
            char *p = join_path(dir, shards[i]);
            if (!p) {
                st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", index_path);
                break;
            }
            if (access(p, F_OK) != 0)
                st = bitnet_fail(err, BITNET_ERR_IO, "%s: shard %s named by %s is missing", p, shards[i], index_path);
            else
                st = add_file(s, p, err);
            free(p);
        }
    }
    free(shards);
    if (st == BITNET_OK) st = sort_tensors(s, err);
    if (st == BITNET_OK) {
        json_object_object_foreach(map, tname, shard) {
            const bitnet_st_tensor *t = bitnet_st_find(s, tname);
            const char *want = json_object_get_string(shard);
            if (!t) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s' is listed in shard %s, which does not hold it",
                                 index_path, tname, want);
                break;
            }
            const char *base = strrchr(t->path, '/');
            base = base ? base + 1 : t->path;
            if (strcmp(base, want) != 0) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s' is listed in shard %s but is in %s", index_path,
                                 tname, want, t->path);
                break;
            }
        }
    }
    json_object_put(root);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Public functions
 * ------------------------------------------------------------------------------------------- */

static bitnet_status open_dir(bitnet_st_set *s, const char *dir, bitnet_error *err) {
    char *index = join_path(dir, INDEX_NAME);
    if (!index) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", dir);
    if (access(index, F_OK) == 0) {
        bitnet_status st = open_index(s, dir, index, err);
        free(index);
        return st;
    }
    free(index);
    char *single = join_path(dir, SINGLE_NAME);
    if (!single) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", dir);
    if (access(single, F_OK) == 0) {
        bitnet_status st = add_file(s, single, err);
        free(single);
        return st;
    }
    free(single);
    DIR *d = opendir(dir);
    if (!d) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open directory: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    bitnet_status st = BITNET_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 12 || strcmp(e->d_name + len - 12, ".safetensors") != 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = (char **)realloc(names, cap * sizeof *nn);
            if (!nn) {
                st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", dir);
                break;
            }
            names = nn;
        }
        if (!(names[n] = bitnet_strndup(e->d_name, len))) {
            st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", dir);
            break;
        }
        n++;
    }
    closedir(d);
    if (st == BITNET_OK && n == 0)
        st = bitnet_fail(err, BITNET_ERR_IO, "%s: no checkpoint: looked for %s, %s and *.safetensors", dir, INDEX_NAME,
                         SINGLE_NAME);
    if (st == BITNET_OK) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && st == BITNET_OK; i++) {
        char *p = join_path(dir, names[i]);
        st = p ? add_file(s, p, err) : bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", dir);
        free(p);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

bitnet_status bitnet_st_open(const char *path, bitnet_st_set **out, bitnet_error *err) {
    *out = NULL;
    if (!path || !*path) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "safetensors: empty path");
    struct stat st_;
    if (stat(path, &st_) != 0) return bitnet_fail(err, BITNET_ERR_IO, "%s: %s", path, strerror(errno));
    bitnet_st_set *s = (bitnet_st_set *)calloc(1, sizeof *s);
    if (!s) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    bitnet_status st;
    if (S_ISDIR(st_.st_mode)) {
        st = open_dir(s, path, err);
    } else {
        st = add_file(s, path, err);
    }
    if (st == BITNET_OK) st = sort_tensors(s, err); /* (again, for an index: cheap) */
    if (st != BITNET_OK) {
        bitnet_st_close(s);
        return st;
    }
    *out = s;
    return BITNET_OK;
}

void bitnet_st_close(bitnet_st_set *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n_tensors; i++) free((char *)s->tensors[i].name);
    free(s->tensors);
    for (int64_t i = 0; i < s->n_files; i++) unmap_file(&s->files[i]);
    free(s->files);
    free(s);
}

int64_t bitnet_st_n_files(const bitnet_st_set *s) { return s->n_files; }

const char *bitnet_st_file(const bitnet_st_set *s, int64_t i) {
    return i >= 0 && i < s->n_files ? s->files[i].path : NULL;
}

int64_t bitnet_st_n_tensors(const bitnet_st_set *s) { return s->n_tensors; }

const bitnet_st_tensor *bitnet_st_tensor_at(const bitnet_st_set *s, int64_t i) {
    return i >= 0 && i < s->n_tensors ? &s->tensors[i] : NULL;
}

const bitnet_st_tensor *bitnet_st_find(const bitnet_st_set *s, const char *name) {
    int64_t lo = 0, hi = s->n_tensors - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->tensors[mid].name, name);
        if (c == 0) return &s->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

bitnet_status bitnet_st_read_f32(const bitnet_st_tensor *t, uint64_t first, uint64_t n, float *out,
                                 bitnet_error *err) {
    if (first > t->n_elements || n > t->n_elements - first)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: tensor '%s': elements [%llu, %llu) are outside its %llu",
                           t->path, t->name, (unsigned long long)first, (unsigned long long)(first + n),
                           (unsigned long long)t->n_elements);
    const uint8_t *p = t->data + first * DTYPES[t->dtype].size;
    switch (t->dtype) {
    case BITNET_ST_F32:
        memcpy(out, p, n * 4);
        return BITNET_OK;
    case BITNET_ST_BF16:
        /* bfloat16 is the upper half of a binary32 (same sign and exponent, 7 fraction bits): exact. */
        for (uint64_t i = 0; i < n; i++) {
            uint32_t bits = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
            memcpy(&out[i], &bits, 4);
        }
        return BITNET_OK;
    case BITNET_ST_F16:
        for (uint64_t i = 0; i < n; i++) out[i] = bitnet_fp16_to_fp32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return BITNET_OK;
    case BITNET_ST_F64:
        for (uint64_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
        }
        return BITNET_OK;
    default:
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' has dtype %s; only BF16, F16, F32 and F64 convert to float", t->path, t->name,
                           DTYPES[t->dtype].name);
    }
}

void bitnet_st_release(const bitnet_st_tensor *t) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !t->data || t->nbytes == 0) return;
    uintptr_t b = ((uintptr_t)t->data + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t e = ((uintptr_t)t->data + t->nbytes) & ~((uintptr_t)page - 1);
    if (e > b) (void)madvise((void *)b, e - b, MADV_DONTNEED);
}
