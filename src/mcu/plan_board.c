/* plan_board.c — board files of bitnet-mcu-plan (boards/<name>.yaml) through libyaml's document API, in the
 * manner of src/tilefile/tile_file.c: every mapping is checked against its table of keys (unknown, repeated
 * and missing keys are refused), every value against its type, and every message names the file, the key
 * path and the value or line. Schema: boards/README.md; contract: plan.h. */
#include "mcu/plan.h"

#include <yaml.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOARD_FILE_MAX_BYTES ((size_t)1 << 20)

/* ---- string storage: every string of a loaded board, freed together -------------------------------- */

typedef struct strpool {
    char **items;
    size_t n, cap;
} strpool;

static const char *pool_dup(strpool *p, const char *s, size_t len) {
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

static void pool_free(strpool *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) free(p->items[i]);
    free(p->items);
    free(p);
}

void bitnet_plan_board_free(bitnet_plan_board *b) {
    if (!b) return;
    pool_free((strpool *)b->strings);
    free(b);
}

/* ---- context and errors ----------------------------------------------------------------------------- */

typedef struct ctx {
    const char *path;
    yaml_document_t *doc;
    strpool *pool;
    bitnet_error *err;
    bitnet_status status; /* of the first failure */
} ctx;

/* Records the first failure as "<path>: <message>"; returns false for `return fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool fail(ctx *c, bitnet_status st, const char *fmt, ...) {
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

static yaml_node_t *node(const ctx *c, int id) { return yaml_document_get_node(c->doc, id); }
static int line_of(const yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }

/* The value for messages: the scalar's text in quotes (at most 60 bytes), or what the node is. */
static void value_text(const yaml_node_t *n, char *out, size_t cap) {
    if (!n || n->type != YAML_SCALAR_NODE) {
        snprintf(out, cap, "%s", !n ? "nothing" : n->type == YAML_MAPPING_NODE ? "a mapping" : "a list");
        return;
    }
    const size_t len = n->data.scalar.length < 60 ? n->data.scalar.length : 60;
    snprintf(out, cap, "'%.*s%s'", (int)len, (const char *)n->data.scalar.value, n->data.scalar.length > 60 ? "..." : "");
}

static bool scalar_is(const yaml_node_t *n, const char *s) {
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
           memcmp(n->data.scalar.value, s, n->data.scalar.length) == 0;
}

/* "where.key" (or "key" at the top level) into out. */
static void key_path(char *out, size_t cap, const char *where, const char *key) {
    snprintf(out, cap, "%s%s%s", where, where[0] ? "." : "", key);
}

/* ---- mappings against a table of keys --------------------------------------------------------------- */

typedef struct field {
    const char *key;
    bool required;
    const yaml_node_t *val; /* filled: the value node, or NULL when absent */
} field;

/* Match the pairs of `map` (named `where` in messages; "" is the top level) to fields[0..n): a non-mapping,
 * an unknown or repeated key, or a missing required key is refused. */
static bool match_fields(ctx *c, const yaml_node_t *map, const char *where, field *fields, int n) {
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
        value_text(map, text, sizeof text);
        return fail(c, BITNET_ERR_FORMAT, "%s: expected a mapping with the keys %s, got %s (line %d)", name, keys, text,
                    line_of(map));
    }
    bool seen[32] = {false};
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(c, p->key);
        int fi = -1;
        for (int i = 0; i < n && fi < 0; i++) {
            if (scalar_is(k, fields[i].key)) fi = i;
        }
        char text[80];
        value_text(k, text, sizeof text);
        if (fi < 0)
            return fail(c, BITNET_ERR_FORMAT, "%s: unknown key %s (line %d); the keys are %s", name, text, line_of(k), keys);
        if (seen[fi]) return fail(c, BITNET_ERR_FORMAT, "%s: key %s is given twice (line %d)", name, text, line_of(k));
        seen[fi] = true;
        fields[fi].val = node(c, p->value);
    }
    for (int i = 0; i < n; i++) {
        if (fields[i].required && !fields[i].val)
            return fail(c, BITNET_ERR_FORMAT, "%s: missing key '%s' (the mapping at line %d)", name, fields[i].key,
                        line_of(map));
    }
    return true;
}

/* ---- values ----------------------------------------------------------------------------------------- */

/* A string (any scalar); `nonempty`: the empty string is refused. NULL node: *out stays NULL. */
static bool get_string(ctx *c, const yaml_node_t *v, const char *path, bool nonempty, const char **out) {
    if (!v) return true;
    char text[80];
    value_text(v, text, sizeof text);
    if (v->type != YAML_SCALAR_NODE)
        return fail(c, BITNET_ERR_FORMAT, "%s: expected a string, got %s (line %d)", path, text, line_of(v));
    if (nonempty && v->data.scalar.length == 0)
        return fail(c, BITNET_ERR_FORMAT, "%s: expected a non-empty string (line %d)", path, line_of(v));
    *out = pool_dup(c->pool, (const char *)v->data.scalar.value, v->data.scalar.length);
    if (!*out) return fail(c, BITNET_ERR_NOMEM, "out of memory");
    return true;
}

/* The scalar's text (NUL-terminated copy in buf), or false with a message saying what was expected. */
static bool scalar_copy(ctx *c, const yaml_node_t *v, const char *path, const char *expected, char *buf, size_t cap) {
    char text[80];
    value_text(v, text, sizeof text);
    if (!v || v->type != YAML_SCALAR_NODE || v->data.scalar.length >= cap)
        return fail(c, BITNET_ERR_FORMAT, "%s: %s is not %s (line %d)", path, text, expected, line_of(v));
    memcpy(buf, v->data.scalar.value, v->data.scalar.length);
    buf[v->data.scalar.length] = '\0';
    return true;
}

#define BYTES_EXPECTED "a byte count (a non-negative integer, optionally followed by KiB, MiB or GiB)"

/* A byte count: decimal digits, optionally followed by spaces and KiB, MiB or GiB (powers of 1024); at most
 * 2^62. `positive`: 0 is refused too. */
static bool get_bytes(ctx *c, const yaml_node_t *v, const char *path, bool positive, uint64_t *out) {
    char buf[64] = "", text[80];
    if (!scalar_copy(c, v, path, BYTES_EXPECTED, buf, sizeof buf)) return false;
    value_text(v, text, sizeof text);
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
    if (!ok) return fail(c, BITNET_ERR_FORMAT, "%s: %s is not %s (line %d)", path, text, BYTES_EXPECTED, line_of(v));
    n <<= shift;
    if (positive && n == 0) return fail(c, BITNET_ERR_FORMAT, "%s: %s: the size must be at least 1 byte (line %d)", path, text, line_of(v));
    *out = n;
    return true;
}

/* An integer in [lo, hi], decimal digits only. */
static bool get_int(ctx *c, const yaml_node_t *v, const char *path, int64_t lo, int64_t hi, int32_t *out) {
    char buf[32] = "", text[80], expected[96];
    snprintf(expected, sizeof expected, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    if (!scalar_copy(c, v, path, expected, buf, sizeof buf)) return false;
    value_text(v, text, sizeof text);
    char *end = NULL;
    errno = 0;
    const long long n = buf[0] >= '0' && buf[0] <= '9' ? strtoll(buf, &end, 10) : 0;
    if (!end || *end || errno || n < lo || n > hi)
        return fail(c, BITNET_ERR_FORMAT, "%s: %s is not %s (line %d)", path, text, expected, line_of(v));
    *out = (int32_t)n;
    return true;
}

/* A finite number > 0 (decimal, optionally with a fraction or exponent). */
static bool get_positive(ctx *c, const yaml_node_t *v, const char *path, double *out) {
    char buf[64] = "", text[80];
    if (!scalar_copy(c, v, path, "a positive number", buf, sizeof buf)) return false;
    value_text(v, text, sizeof text);
    char *end = NULL;
    errno = 0;
    const double d = (buf[0] >= '0' && buf[0] <= '9') || buf[0] == '.' ? strtod(buf, &end) : -1.0;
    if (!end || *end || errno || !isfinite(d) || !(d > 0))
        return fail(c, BITNET_ERR_FORMAT, "%s: %s is not a positive number (line %d)", path, text, line_of(v));
    *out = d;
    return true;
}

/* One of words[0..n) ("a|b|c" in messages). */
static bool get_word(ctx *c, const yaml_node_t *v, const char *path, const char *const *words, int n, int *out) {
    char text[80], list[128] = "";
    for (int i = 0; i < n; i++) {
        if (i) strcat(list, ", ");
        strcat(list, words[i]);
    }
    for (int i = 0; v && i < n; i++) {
        if (scalar_is(v, words[i])) {
            *out = i;
            return true;
        }
    }
    value_text(v, text, sizeof text);
    return fail(c, BITNET_ERR_FORMAT, "%s: %s is not one of %s (line %d)", path, text, list, line_of(v));
}

/* A list node (possibly empty), else a message. */
static bool get_list(ctx *c, const yaml_node_t *v, const char *path, const char *of) {
    if (v && v->type == YAML_SEQUENCE_NODE) return true;
    char text[80];
    value_text(v, text, sizeof text);
    return fail(c, BITNET_ERR_FORMAT, "%s: expected a list of %s, got %s (line %d)", path, of, text, line_of(v));
}

static int list_len(const yaml_node_t *v) { return (int)(v->data.sequence.items.top - v->data.sequence.items.start); }

/* A list of source ids, each defined in b->sources; at least one. */
static bool get_refs(ctx *c, const bitnet_plan_board *b, const yaml_node_t *v, const char *path, const char **refs,
                     int *n_refs) {
    if (!get_list(c, v, path, "source ids")) return false;
    if (list_len(v) == 0) return fail(c, BITNET_ERR_FORMAT, "%s: the list is empty: name the sources of the figures (line %d)", path, line_of(v));
    if (list_len(v) > BITNET_PLAN_MAX_REFS)
        return fail(c, BITNET_ERR_FORMAT, "%s: more than %d sources (line %d)", path, BITNET_PLAN_MAX_REFS, line_of(v));
    *n_refs = 0;
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, i++) {
        const yaml_node_t *item = node(c, *it);
        char ipath[160];
        snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
        const char *id = NULL;
        if (!get_string(c, item, ipath, true, &id)) return false;
        int found = -1;
        for (int s = 0; s < b->n_sources && found < 0; s++) {
            if (strcmp(b->sources[s].id, id) == 0) found = s;
        }
        if (found < 0) {
            char text[80];
            value_text(item, text, sizeof text);
            return fail(c, BITNET_ERR_FORMAT, "%s: %s is not the id of an entry of 'sources' (line %d)", ipath, text,
                        line_of(item));
        }
        refs[(*n_refs)++] = b->sources[found].id;
    }
    return true;
}

/* ---- the sections ------------------------------------------------------------------------------------ */

static bool read_sources(ctx *c, bitnet_plan_board *b, const yaml_node_t *v) {
    if (!get_list(c, v, "sources", "{id, title, ...}")) return false;
    if (list_len(v) == 0) return fail(c, BITNET_ERR_FORMAT, "sources: the list is empty (line %d)", line_of(v));
    if (list_len(v) > BITNET_PLAN_MAX_SOURCES)
        return fail(c, BITNET_ERR_FORMAT, "sources: more than %d entries (line %d)", BITNET_PLAN_MAX_SOURCES, line_of(v));
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, i++) {
        char where[48], kp[96];
        snprintf(where, sizeof where, "sources[%d]", i);
        field f[] = {{"id", true, NULL},       {"title", true, NULL}, {"version", false, NULL},
                     {"section", false, NULL}, {"url", false, NULL},  {"note", false, NULL}};
        if (!match_fields(c, node(c, *it), where, f, 6)) return false;
        bitnet_plan_source *s = &b->sources[b->n_sources];
        memset(s, 0, sizeof *s);
        const char **dst[6] = {&s->id, &s->title, &s->version, &s->section, &s->url, &s->note};
        for (int k = 0; k < 6; k++) {
            key_path(kp, sizeof kp, where, f[k].key);
            if (!get_string(c, f[k].val, kp, k < 2, dst[k])) return false;
        }
        for (int j = 0; j < b->n_sources; j++) {
            if (strcmp(b->sources[j].id, s->id) == 0)
                return fail(c, BITNET_ERR_FORMAT, "%s.id: '%s' is already the id of sources[%d] (line %d)", where, s->id, j,
                            line_of(f[0].val));
        }
        b->n_sources++;
    }
    return true;
}

static bool read_cpu(ctx *c, bitnet_plan_board *b, const yaml_node_t *v) {
    field f[] = {{"core", true, NULL}, {"cores", true, NULL}, {"clock_mhz", true, NULL},
                 {"fpu", true, NULL},  {"simd", true, NULL},  {"source", true, NULL}};
    if (!match_fields(c, v, "cpu", f, 6)) return false;
    static const char *const fpus[] = {"none", "single", "double"};
    int fpu = 0;
    bitnet_plan_cpu *cpu = &b->cpu;
    if (!get_string(c, f[0].val, "cpu.core", true, &cpu->core) ||
        !get_int(c, f[1].val, "cpu.cores", 1, 1024, &cpu->cores) ||
        !get_positive(c, f[2].val, "cpu.clock_mhz", &cpu->clock_mhz) || !get_word(c, f[3].val, "cpu.fpu", fpus, 3, &fpu) ||
        !get_string(c, f[4].val, "cpu.simd", true, &cpu->simd) ||
        !get_refs(c, b, f[5].val, "cpu.source", cpu->source, &cpu->n_source))
        return false;
    cpu->fpu = fpus[fpu];
    return true;
}

static bool read_reserve(ctx *c, bitnet_plan_memory *m, const yaml_node_t *v, const char *where) {
    char path[96];
    key_path(path, sizeof path, where, "reserve");
    if (!get_list(c, v, path, "{what, bytes, note}")) return false;
    if (list_len(v) > BITNET_PLAN_MAX_RESERVES)
        return fail(c, BITNET_ERR_FORMAT, "%s: more than %d entries (line %d)", path, BITNET_PLAN_MAX_RESERVES, line_of(v));
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, i++) {
        char rw[128], kp[160];
        snprintf(rw, sizeof rw, "%s[%d]", path, i);
        field f[] = {{"what", true, NULL}, {"bytes", true, NULL}, {"note", false, NULL}};
        if (!match_fields(c, node(c, *it), rw, f, 3)) return false;
        bitnet_plan_reserve *r = &m->reserve[m->n_reserve];
        memset(r, 0, sizeof *r);
        key_path(kp, sizeof kp, rw, "what");
        if (!get_string(c, f[0].val, kp, true, &r->what)) return false;
        key_path(kp, sizeof kp, rw, "bytes");
        if (!get_bytes(c, f[1].val, kp, false, &r->bytes)) return false;
        key_path(kp, sizeof kp, rw, "note");
        if (!get_string(c, f[2].val, kp, false, &r->note)) return false;
        m->reserved += r->bytes;
        m->n_reserve++;
    }
    return true;
}

static bool read_memory(ctx *c, bitnet_plan_board *b, const yaml_node_t *v, int index) {
    char where[48], kp[96];
    snprintf(where, sizeof where, "memories[%d]", index);
    field f[] = {{"name", true, NULL},   {"kind", true, NULL}, {"bytes", true, NULL},  {"roles", true, NULL},
                 {"stream_mb_s", true, NULL}, {"source", true, NULL}, {"note", false, NULL}, {"reserve", false, NULL}};
    if (!match_fields(c, v, where, f, 8)) return false;
    bitnet_plan_memory *m = &b->memories[b->n_memories];
    memset(m, 0, sizeof *m);
    static const char *const kinds[] = {"flash", "ram"};
    static const char *const roles[] = {"weights", "arena"};
    int kind = 0;
    key_path(kp, sizeof kp, where, "name");
    if (!get_string(c, f[0].val, kp, true, &m->name)) return false;
    for (int j = 0; j < b->n_memories; j++) {
        if (strcmp(b->memories[j].name, m->name) == 0)
            return fail(c, BITNET_ERR_FORMAT, "%s: '%s' is already the name of memories[%d] (line %d)", kp, m->name, j,
                        line_of(f[0].val));
    }
    key_path(kp, sizeof kp, where, "kind");
    if (!get_word(c, f[1].val, kp, kinds, 2, &kind)) return false;
    m->kind = kind == 0 ? BITNET_PLAN_FLASH : BITNET_PLAN_RAM;
    key_path(kp, sizeof kp, where, "bytes");
    if (!get_bytes(c, f[2].val, kp, true, &m->bytes)) return false;
    key_path(kp, sizeof kp, where, "roles");
    if (!get_list(c, f[3].val, kp, "roles (weights, arena)")) return false;
    int i = 0;
    for (yaml_node_item_t *it = f[3].val->data.sequence.items.start; it < f[3].val->data.sequence.items.top; it++, i++) {
        char rp[128];
        snprintf(rp, sizeof rp, "%s[%d]", kp, i);
        int r = 0;
        if (!get_word(c, node(c, *it), rp, roles, 2, &r)) return false;
        const unsigned bit = r == 0 ? BITNET_PLAN_ROLE_WEIGHTS : BITNET_PLAN_ROLE_ARENA;
        if (m->roles & bit) return fail(c, BITNET_ERR_FORMAT, "%s: role '%s' is listed twice (line %d)", rp, roles[r], line_of(node(c, *it)));
        m->roles |= bit;
    }
    if (m->kind == BITNET_PLAN_FLASH && (m->roles & BITNET_PLAN_ROLE_ARENA))
        return fail(c, BITNET_ERR_FORMAT, "%s: memory '%s' is flash (read-only at run time) and cannot take the role 'arena' (line %d)",
                    kp, m->name, line_of(f[3].val));
    key_path(kp, sizeof kp, where, "stream_mb_s");
    if (!get_positive(c, f[4].val, kp, &m->stream_mb_s)) return false;
    key_path(kp, sizeof kp, where, "source");
    if (!get_refs(c, b, f[5].val, kp, m->source, &m->n_source)) return false;
    key_path(kp, sizeof kp, where, "note");
    if (!get_string(c, f[6].val, kp, false, &m->note)) return false;
    if (f[7].val && !read_reserve(c, m, f[7].val, where)) return false;
    if (m->reserved > m->bytes) {
        key_path(kp, sizeof kp, where, "reserve");
        return fail(c, BITNET_ERR_FORMAT, "%s: the reserves of memory '%s' add up to %llu bytes, more than its %llu bytes", kp,
                    m->name, (unsigned long long)m->reserved, (unsigned long long)m->bytes);
    }
    m->usable = m->bytes - m->reserved;
    b->n_memories++;
    return true;
}

static bool read_board(ctx *c, bitnet_plan_board *b, const yaml_node_t *root) {
    field f[] = {{"name", true, NULL}, {"description", true, NULL}, {"sources", true, NULL}, {"cpu", true, NULL},
                 {"memories", true, NULL}};
    if (!match_fields(c, root, "", f, 5)) return false;
    if (!get_string(c, f[0].val, "name", true, &b->name) || !get_string(c, f[1].val, "description", true, &b->description) ||
        !read_sources(c, b, f[2].val) || !read_cpu(c, b, f[3].val))
        return false;
    const yaml_node_t *mems = f[4].val;
    if (!get_list(c, mems, "memories", "{name, kind, bytes, ...}")) return false;
    if (list_len(mems) == 0) return fail(c, BITNET_ERR_FORMAT, "memories: the list is empty (line %d)", line_of(mems));
    if (list_len(mems) > BITNET_PLAN_MAX_MEMORIES)
        return fail(c, BITNET_ERR_FORMAT, "memories: more than %d entries (line %d)", BITNET_PLAN_MAX_MEMORIES, line_of(mems));
    int i = 0;
    for (yaml_node_item_t *it = mems->data.sequence.items.start; it < mems->data.sequence.items.top; it++, i++) {
        if (!read_memory(c, b, node(c, *it), i)) return false;
    }
    unsigned all = 0;
    for (int m = 0; m < b->n_memories; m++) all |= b->memories[m].roles;
    if (!(all & BITNET_PLAN_ROLE_WEIGHTS))
        return fail(c, BITNET_ERR_FORMAT, "memories: no memory has the role 'weights' (where the model image goes)");
    if (!(all & BITNET_PLAN_ROLE_ARENA))
        return fail(c, BITNET_ERR_FORMAT, "memories: no memory has the role 'arena' (where the node's arena goes)");
    return true;
}

/* ---- the file ---------------------------------------------------------------------------------------- */

static bool parse(ctx *c, bitnet_plan_board *b, const char *text, size_t n) {
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return fail(c, BITNET_ERR_NOMEM, "out of memory (YAML parser)");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, n);
    if (!yaml_parser_load(&parser, &doc)) {
        fail(c, BITNET_ERR_FORMAT, "YAML error at line %d, column %d: %s%s%s", (int)parser.problem_mark.line + 1,
             (int)parser.problem_mark.column + 1, parser.problem ? parser.problem : "malformed", parser.context ? " " : "",
             parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return false;
    }
    c->doc = &doc;
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    bool ok = root ? read_board(c, b, root) : fail(c, BITNET_ERR_FORMAT, "empty YAML document (no board)");
    yaml_document_delete(&doc);
    if (ok) { /* one document only: a second one would be ignored silently */
        yaml_document_t more;
        if (!yaml_parser_load(&parser, &more)) {
            ok = fail(c, BITNET_ERR_FORMAT, "YAML error at line %d: %s", (int)parser.problem_mark.line + 1,
                      parser.problem ? parser.problem : "malformed");
        } else {
            if (yaml_document_get_root_node(&more)) ok = fail(c, BITNET_ERR_FORMAT, "more than one YAML document ('---')");
            yaml_document_delete(&more);
        }
    }
    yaml_parser_delete(&parser);
    c->doc = NULL;
    return ok;
}

bitnet_status bitnet_plan_board_load(const char *path, bitnet_plan_board **out, bitnet_error *err) {
    if (!path || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_plan_board_load: NULL argument");
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open the board file: %s", path, strerror(errno));
    char *text = malloc(BOARD_FILE_MAX_BYTES + 1);
    if (!text) {
        fclose(fp);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    const size_t n = fread(text, 1, BOARD_FILE_MAX_BYTES + 1, fp);
    const bool bad = ferror(fp) != 0;
    fclose(fp);
    if (bad || n > BOARD_FILE_MAX_BYTES) {
        free(text);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: %s", path,
                           bad ? "read error" : "larger than 1 MiB: not a board file");
    }
    bitnet_plan_board *b = calloc(1, sizeof *b);
    strpool *pool = calloc(1, sizeof *pool);
    if (!b || !pool) {
        free(b);
        free(pool);
        free(text);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    b->strings = pool;
    ctx c = {path, NULL, pool, err, BITNET_OK};
    b->path = pool_dup(pool, path, strlen(path));
    const bool ok = b->path ? parse(&c, b, text, n) : fail(&c, BITNET_ERR_NOMEM, "out of memory");
    free(text);
    if (!ok) {
        bitnet_plan_board_free(b);
        return c.status;
    }
    *out = b;
    return BITNET_OK;
}
