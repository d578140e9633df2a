/* yaml_check.c — reading YAML files whose every mapping has a fixed table of keys, through libyaml's
 * document API: unknown, repeated and missing keys are refused, every value is checked against its type,
 * and every message names the file, the key path and the value or line. Contract: yaml_check.h. */
#include "yamlcheck/yaml_check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- string storage: every string of a loaded file, freed together ---------------------------------- */

struct bitnet_yc_pool {
    char **items;
    size_t n, cap;
};

const char *bitnet_yc_pool_dup(bitnet_yc_pool *p, const char *s, size_t len) {
    if (p->n == p->cap) {
        const size_t cap = p->cap ? 2 * p->cap : 32;
        char **ni = realloc(p->items, cap * sizeof *ni);
        if (!ni) return NULL;
        p->items = ni;
        p->cap = cap;
    }
    char *d = malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = '\0';
    p->items[p->n++] = d;
    return d;
}

void bitnet_yc_pool_free(bitnet_yc_pool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) free(p->items[i]);
    free(p->items);
    free(p);
}

/* ---- context and errors ----------------------------------------------------------------------------- */

/* Records the first failure as "<path>: <message>"; returns false for `return bitnet_yc_fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bool bitnet_yc_fail(bitnet_yc *c, bitnet_status st, const char *fmt, ...) {
    if (c->status != BITNET_OK) return false;
    char msg[sizeof c->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->status = st;
    bitnet_fail(c->err, st, "%s: %s", c->path, msg);
    return false;
}

yaml_node_t *bitnet_yc_node(const bitnet_yc *c, int id) { return yaml_document_get_node(c->doc, id); }
int bitnet_yc_line(const yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }

/* The value for messages: the scalar's text in quotes (at most 60 bytes), or what the node is. */
void bitnet_yc_value_text(const yaml_node_t *n, char *out, size_t cap) {
    if (!n || n->type != YAML_SCALAR_NODE) {
        snprintf(out, cap, "%s", !n ? "nothing" : n->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        return;
    }
    const size_t len = n->data.scalar.length < 60 ? n->data.scalar.length : 60;
    snprintf(out, cap, "'%.*s%s'", (int)len, (const char *)n->data.scalar.value, n->data.scalar.length > 60 ? "..." : "");
}

bool bitnet_yc_scalar_is(const yaml_node_t *n, const char *s) {
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
           memcmp(n->data.scalar.value, s, n->data.scalar.length) == 0;
}

/* "where.key" (or "key" at the top level) into out. */
void bitnet_yc_key_path(char *out, size_t cap, const char *where, const char *key) {
    snprintf(out, cap, "%s%s%s", where, where[0] ? "." : "", key);
}

/* ---- mappings against a table of keys --------------------------------------------------------------- */

/* Match the pairs of `map` (named `where` in messages; "" is the top level) to fields[0..n): a non-mapping,
 * an unknown or repeated key, or a missing required key is refused. */
bool bitnet_yc_match(bitnet_yc *c, const yaml_node_t *map, const char *where, bitnet_yc_field *fields, int n) {
    char keys[256] = "";
    for (int i = 0; i < n; i++) {
        fields[i].val = NULL;
        if (strlen(keys) + strlen(fields[i].key) + 3 < sizeof keys) {
            if (keys[0]) strcat(keys, ", ");
            strcat(keys, fields[i].key);
        }
    }
    const char *name = where[0] ? where : "the top level";
    if (!map || map->type != YAML_MAPPING_NODE) {
        char text[80];
        bitnet_yc_value_text(map, text, sizeof text);
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: expected a mapping with the keys %s, got %s (line %d)", name, keys, text,
                    bitnet_yc_line(map));
    }
    bool seen[32] = {false};
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = bitnet_yc_node(c, p->key);
        int fi = -1;
        for (int i = 0; i < n && fi < 0; i++) {
            if (bitnet_yc_scalar_is(k, fields[i].key)) fi = i;
        }
        char text[80];
        bitnet_yc_value_text(k, text, sizeof text);
        if (fi < 0)
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: unknown key %s (line %d); the keys are %s", name, text, bitnet_yc_line(k), keys);
        if (seen[fi]) return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: key %s is given twice (line %d)", name, text, bitnet_yc_line(k));
        seen[fi] = true;
        fields[fi].val = bitnet_yc_node(c, p->value);
    }
    for (int i = 0; i < n; i++) {
        if (fields[i].required && !fields[i].val)
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: missing key '%s' (the mapping at line %d)", name, fields[i].key,
                        bitnet_yc_line(map));
    }
    return true;
}

/* ---- values ----------------------------------------------------------------------------------------- */

/* A string (any scalar); `nonempty`: the empty string is refused. NULL node: *out stays NULL. */
bool bitnet_yc_string(bitnet_yc *c, const yaml_node_t *v, const char *path, bool nonempty, const char **out) {
    if (!v) return true;
    char text[80];
    bitnet_yc_value_text(v, text, sizeof text);
    if (v->type != YAML_SCALAR_NODE)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: expected a string, got %s (line %d)", path, text, bitnet_yc_line(v));
    if (nonempty && v->data.scalar.length == 0)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: expected a non-empty string (line %d)", path, bitnet_yc_line(v));
    *out = bitnet_yc_pool_dup(c->pool, (const char *)v->data.scalar.value, v->data.scalar.length);
    if (!*out) return bitnet_yc_fail(c, BITNET_ERR_NOMEM, "out of memory");
    return true;
}

/* The scalar's text (NUL-terminated copy in buf), or false with a message saying what was expected. */
bool bitnet_yc_scalar_copy(bitnet_yc *c, const yaml_node_t *v, const char *path, const char *expected, char *buf, size_t cap) {
    char text[80];
    bitnet_yc_value_text(v, text, sizeof text);
    if (!v || v->type != YAML_SCALAR_NODE || v->data.scalar.length >= cap)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not %s (line %d)", path, text, expected, bitnet_yc_line(v));
    memcpy(buf, v->data.scalar.value, v->data.scalar.length);
    buf[v->data.scalar.length] = '\0';
    return true;
}

#define BYTES_EXPECTED "a byte count (a non-negative integer, optionally followed by KiB, MiB or GiB)"

/* A byte count: decimal digits, optionally followed by spaces and KiB, MiB or GiB (powers of 1024); at most
 * 2^62. `positive`: 0 is refused too. */
bool bitnet_yc_bytes(bitnet_yc *c, const yaml_node_t *v, const char *path, bool positive, uint64_t *out) {
    char buf[64] = "", text[80];
    if (!bitnet_yc_scalar_copy(c, v, path, BYTES_EXPECTED, buf, sizeof buf)) return false;
    bitnet_yc_value_text(v, text, sizeof text);
    const char *s = buf;
    uint64_t n = 0;
    bool ok = *s >= '0' && *s <= '9';
    for (; ok && *s >= '0' && *s <= '9'; s++) {
        if (n > ((uint64_t)1 << 62) / 10) ok = false;
        n = n * 10 + (uint64_t)(*s - '0');
    }
    unsigned shift = 0;
    if (ok && *s) {
        while (*s == ' ') s++;
        if (strcmp(s, "KiB") == 0) shift = 10;
        else if (strcmp(s, "MiB") == 0) shift = 20;
        else if (strcmp(s, "GiB") == 0) shift = 30;
        else ok = false;
    }
    if (ok && n > (((uint64_t)1 << 62) >> shift)) ok = false;
    if (!ok) return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not %s (line %d)", path, text, BYTES_EXPECTED, bitnet_yc_line(v));
    n <<= shift;
    if (positive && n == 0) return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s: the size must be at least 1 byte (line %d)", path, text, bitnet_yc_line(v));
    *out = n;
    return true;
}

/* An integer in [lo, hi], decimal digits only. */
bool bitnet_yc_int(bitnet_yc *c, const yaml_node_t *v, const char *path, int64_t lo, int64_t hi, int32_t *out) {
    char buf[32] = "", text[80], expected[96];
    snprintf(expected, sizeof expected, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    if (!bitnet_yc_scalar_copy(c, v, path, expected, buf, sizeof buf)) return false;
    bitnet_yc_value_text(v, text, sizeof text);
    char *end = NULL;
    errno = 0;
    const long long n = buf[0] >= '0' && buf[0] <= '9' ? strtoll(buf, &end, 10) : 0;
    if (!end || *end || errno || n < lo || n > hi)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not %s (line %d)", path, text, expected, bitnet_yc_line(v));
    *out = (int32_t)n;
    return true;
}

/* A finite number > 0 (decimal, optionally with a fraction or exponent). */
/* The scalar's text as a finite decimal number (digits, a fraction or an exponent, an optional minus). */
static bool parse_number(bitnet_yc *c, const yaml_node_t *v, const char *path, const char *expected, double *out) {
    char buf[64] = "";
    if (!bitnet_yc_scalar_copy(c, v, path, expected, buf, sizeof buf)) return false;
    char *end = NULL;
    errno = 0;
    const bool starts = (buf[0] >= '0' && buf[0] <= '9') || buf[0] == '.' || buf[0] == '-';
    *out = starts ? strtod(buf, &end) : 0.0;
    return end && !*end && !errno && isfinite(*out);
}

bool bitnet_yc_positive(bitnet_yc *c, const yaml_node_t *v, const char *path, double *out) {
    double d = 0.0;
    if (!parse_number(c, v, path, "a positive number", &d) || !(d > 0)) {
        if (c->status != BITNET_OK) return false;
        char text[80];
        bitnet_yc_value_text(v, text, sizeof text);
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not a positive number (line %d)", path, text, bitnet_yc_line(v));
    }
    *out = d;
    return true;
}

/* One of words[0..n) ("a|b|c" in messages). */
bool bitnet_yc_word(bitnet_yc *c, const yaml_node_t *v, const char *path, const char *const *words, int n, int *out) {
    char text[80], list[128] = "";
    for (int i = 0; i < n; i++) {
        if (i) strcat(list, ", ");
        strcat(list, words[i]);
    }
    for (int i = 0; v && i < n; i++) {
        if (bitnet_yc_scalar_is(v, words[i])) {
            *out = i;
            return true;
        }
    }
    bitnet_yc_value_text(v, text, sizeof text);
    return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not one of %s (line %d)", path, text, list, bitnet_yc_line(v));
}

/* A list node (possibly empty), else a message. */
bool bitnet_yc_list(bitnet_yc *c, const yaml_node_t *v, const char *path, const char *of) {
    if (v && v->type == YAML_SEQUENCE_NODE) return true;
    char text[80];
    bitnet_yc_value_text(v, text, sizeof text);
    return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: expected a list of %s, got %s (line %d)", path, of, text, bitnet_yc_line(v));
}

int bitnet_yc_list_len(const yaml_node_t *v) { return (int)(v->data.sequence.items.top - v->data.sequence.items.start); }

/* A boolean: true or false (YAML 1.2's core schema; yes/no/on/off are refused as ambiguous). */
bool bitnet_yc_bool(bitnet_yc *c, const yaml_node_t *v, const char *path, bool *out) {
    if (bitnet_yc_scalar_is(v, "true") || bitnet_yc_scalar_is(v, "false")) {
        *out = bitnet_yc_scalar_is(v, "true");
        return true;
    }
    char text[80];
    bitnet_yc_value_text(v, text, sizeof text);
    return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not true or false (line %d)", path, text, bitnet_yc_line(v));
}

bool bitnet_yc_uint64(bitnet_yc *c, const yaml_node_t *v, const char *path, uint64_t *out) {
    char buf[32] = "", text[80];
    if (!bitnet_yc_scalar_copy(c, v, path, "a non-negative integer", buf, sizeof buf)) return false;
    bitnet_yc_value_text(v, text, sizeof text);
    char *end = NULL;
    errno = 0;
    const unsigned long long n = buf[0] >= '0' && buf[0] <= '9' ? strtoull(buf, &end, 10) : 0;
    if (!end || *end || errno || n > ((uint64_t)1 << 62))
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not a non-negative integer up to 2^62 (line %d)", path,
                              text, bitnet_yc_line(v));
    *out = (uint64_t)n;
    return true;
}

bool bitnet_yc_number(bitnet_yc *c, const yaml_node_t *v, const char *path, double lo, double *out) {
    double d = 0.0;
    if (!parse_number(c, v, path, "a number", &d) || d < lo) {
        if (c->status != BITNET_OK) return false;
        char text[80];
        bitnet_yc_value_text(v, text, sizeof text);
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not a number >= %g (line %d)", path, text, lo,
                              bitnet_yc_line(v));
    }
    *out = d;
    return true;
}

bool bitnet_yc_is_null(const yaml_node_t *v) {
    return v && v->type == YAML_SCALAR_NODE && v->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
           (bitnet_yc_scalar_is(v, "null") || bitnet_yc_scalar_is(v, "~") || v->data.scalar.length == 0);
}

/* ---- the file ---------------------------------------------------------------------------------------- */

static bool parse(bitnet_yc *c, const char *text, size_t n, const char *what, bitnet_yc_root_fn fn, void *user) {
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return bitnet_yc_fail(c, BITNET_ERR_NOMEM, "out of memory (YAML parser)");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, n);
    if (!yaml_parser_load(&parser, &doc)) {
        bitnet_yc_fail(c, BITNET_ERR_FORMAT, "YAML error at line %d, column %d: %s%s%s", (int)parser.problem_mark.line + 1,
                       (int)parser.problem_mark.column + 1, parser.problem ? parser.problem : "malformed",
                       parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return false;
    }
    c->doc = &doc;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    bool ok = root ? fn(c, root, user) : bitnet_yc_fail(c, BITNET_ERR_FORMAT, "empty YAML document (no %s)", what);
    yaml_document_delete(&doc);
    if (ok) { /* one document only: a second one would be ignored silently */
        yaml_document_t more;
        if (!yaml_parser_load(&parser, &more)) {
            ok = bitnet_yc_fail(c, BITNET_ERR_FORMAT, "YAML error at line %d: %s", (int)parser.problem_mark.line + 1,
                                parser.problem ? parser.problem : "malformed");
        } else {
            if (yaml_document_get_root_node(&more))
                ok = bitnet_yc_fail(c, BITNET_ERR_FORMAT, "more than one YAML document ('---')");
            yaml_document_delete(&more);
        }
    }
    yaml_parser_delete(&parser);
    c->doc = NULL;
    return ok;
}

bitnet_status bitnet_yc_load(const char *path, size_t max_bytes, const char *what, bitnet_yc_root_fn fn, void *user,
                             bitnet_yc_pool **pool_out, bitnet_error *err) {
    *pool_out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open the %s: %s", path, what, strerror(errno));
    /* a buffer that grows with the file up to max_bytes + 1 bytes (reading that many tells a file too
     * large): board and plan files are a few KiB, the limits MiBs */
    size_t cap = max_bytes < 16384 ? max_bytes + 1 : 16384, n = 0;
    char *text = malloc(cap);
    while (text) {
        n += fread(text + n, 1, cap - n, fp);
        if (ferror(fp) || n < cap || cap == max_bytes + 1) break;
        const size_t nc = cap > (max_bytes + 1) / 2 ? max_bytes + 1 : 2 * cap;
        char *nt = realloc(text, nc);
        if (!nt) break;
        text = nt;
        cap = nc;
    }
    const bool io_error = text && ferror(fp) != 0;
    const bool oom = !text || (!io_error && n == cap && cap < max_bytes + 1);
    fclose(fp);
    if (oom) {
        free(text);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    if (io_error || n > max_bytes) {
        free(text);
        if (io_error) return bitnet_fail(err, BITNET_ERR_IO, "%s: read error", path);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: larger than %zu bytes: not a %s", path, max_bytes, what);
    }
    bitnet_yc_pool *pool = calloc(1, sizeof *pool);
    if (!pool) {
        free(text);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    bitnet_yc c = {path, NULL, pool, err, BITNET_OK};
    const bool ok = parse(&c, text, n, what, fn, user);
    free(text);
    if (!ok) {
        bitnet_yc_pool_free(pool);
        return c.status;
    }
    *pool_out = pool;
    return BITNET_OK;
}
