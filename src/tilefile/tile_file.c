/* tile_file.c — user tile tables (`--lut-tiles FILE`): bitnet.cpp's kernel_config.ini through libinih,
 * configs/-style YAML through libyaml's document API. Formats, rules and errors: tile_file.h. */
#include "tilefile/tile_file.h"

#include "kernels/lut/pack.h"

#include <ini.h>
#include <yaml.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define TILE_FILE_MAX_BYTES ((size_t)4 << 20)
#define TILE_FILE_MAX_ENTRIES 4096
#define INI_LINE_MAX 199 /* libinih's INI_MAX_LINE (200) less the NUL */

void bitnet_tile_file_free(bitnet_tile_file *f) {
    if (!f) return;
    free(f->entries);
    free(f);
}

/* ---- entries and errors ------------------------------------------------------------------------ */

typedef struct builder {
    bitnet_tile_file *f;
    size_t cap;
    bitnet_error *err;
    bitnet_status status; /* of the first failure */
} builder;

/* Records the first failure: "<path>: <message>". Returns false, for `return fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static bool fail(builder *b, bitnet_status st, const char *fmt, ...) {
    if (b->status != BITNET_OK) return false;
    char msg[sizeof b->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    b->status = st;
    bitnet_fail(b->err, st, "%s: %s", b->f->path, msg);
    return false;
}

/* A positive decimal integer of at most 2^31 - 1, digits only: no sign, no spaces and no leading zero
 * (YAML 1.1 readers such as PyYAML take "0256" for octal, so it is refused rather than read as 256). */
static bool parse_count(const char *s, size_t len, int64_t *out) {
    if (len == 0 || len > 10 || s[0] == '0') return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > INT32_MAX) return false;
    *out = v;
    return true;
}

static const char *scheme_name(int type) {
    return type == BITNET_TYPE_TL1 ? "TL1" : type == BITNET_TYPE_TL2 ? "TL2" : "TL1/TL2";
}

/* Appends an entry after checking it (tile rules of a stated scheme; one shape, one set of tiles). */
static bool add_entry(builder *b, int type, int64_t M, int64_t K, bitnet_tiles t, const char *where) {
    bitnet_tile_file *f = b->f;
    if (type != 0) {
        bitnet_error sub;
        if (bitnet_tiles_check(type, M, K, t, &sub) != BITNET_OK)
            return fail(b, BITNET_ERR_FORMAT, "%s: tiles BM %d BK %d bm %d for %lldx%lld break the %s rules: %s", where,
                        t.BM, t.BK, t.bm, (long long)M, (long long)K, scheme_name(type), sub.msg);
    }
    for (size_t i = 0; i < f->n_entries; i++) {
        const bitnet_tile_entry *e = &f->entries[i];
        if (e->type != type || e->M != M || e->K != K) continue;
        if (e->tiles.BM == t.BM && e->tiles.BK == t.BK && e->tiles.bm == t.bm) return true; /* a repeat */
        return fail(b, BITNET_ERR_FORMAT,
                    "shape %lldx%lld is listed twice with different tiles: %s (BM %d BK %d bm %d) and %s (BM %d BK %d "
                    "bm %d)",
                    (long long)M, (long long)K, e->where, e->tiles.BM, e->tiles.BK, e->tiles.bm, where, t.BM, t.BK,
                    t.bm);
    }
    if (f->n_entries == TILE_FILE_MAX_ENTRIES) return fail(b, BITNET_ERR_FORMAT, "more than %d entries", TILE_FILE_MAX_ENTRIES);
    if (f->n_entries == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        bitnet_tile_entry *ne = realloc(f->entries, cap * sizeof *ne);
        if (!ne) return fail(b, BITNET_ERR_NOMEM, "out of memory");
        f->entries = ne;
        b->cap = cap;
    }
    bitnet_tile_entry *e = &f->entries[f->n_entries++];
    memset(e, 0, sizeof *e);
    e->type = type;
    e->M = M;
    e->K = K;
    e->tiles = t;
    snprintf(e->where, sizeof e->where, "%s", where);
    return true;
}

/* ---- kernel_config.ini (libinih) ------------------------------------------------------------------ */

enum { INI_M, INI_K, INI_BM, INI_BK, INI_BMM, INI_NKEYS };
static const char *const k_ini_keys[INI_NKEYS] = {"m", "k", "bm", "bk", "bmm"};

/* One [Kernels_<n>] section: found by the prescan (name, line), filled by libinih's pairs. */
typedef struct ini_section {
    char name[48];
    int line;
    int64_t v[INI_NKEYS];
    unsigned have; /* bit per key */
} ini_section;

typedef struct ini_state {
    builder *b;
    const char *p, *end; /* the text not read yet */
    int line;            /* lines handed to libinih so far = the line of the current handler call */
    int err_line;        /* line of the first error the handler found (0: none) */
    ini_section *sec;
    size_t n_sec;
} ini_state;

/* libinih's fgets-style reader over the text; counts lines. */
static char *ini_read_line(char *str, int num, void *stream) {
    ini_state *s = stream;
    if (s->p >= s->end || num < 2) return NULL;
    int n = 0;
    while (s->p < s->end && n < num - 1) {
        const char c = *s->p++;
        str[n++] = c;
        if (c == '\n') break;
    }
    str[n] = '\0';
    s->line++;
    return str;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int ini_error(ini_state *s, const char *fmt, ...) {
    if (s->err_line == 0) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        s->err_line = s->line;
        fail(s->b, BITNET_ERR_FORMAT, "line %d: %s", s->line, msg);
    }
    return 0;
}

static int on_ini_pair(void *user, const char *section, const char *name, const char *value) {
    ini_state *s = user;
    if (s->err_line) return 0;
    if (section[0] == '\0') return ini_error(s, "'%s' stands before the first [Kernels_<n>] section", name);
    ini_section *cur = NULL; /* every header was seen by the prescan, so the section is in the list */
    for (size_t i = 0; i < s->n_sec && !cur; i++) {
        if (strcmp(s->sec[i].name, section) == 0) cur = &s->sec[i];
    }
    if (!cur) return ini_error(s, "section [%s] was not found by the prescan", section);
    int key = -1;
    for (int i = 0; i < INI_NKEYS; i++) {
        if (strcasecmp(name, k_ini_keys[i]) == 0) key = i;
    }
    if (key < 0) return ini_error(s, "[%s]: unknown key '%s' (expected m, k, bm, bk, bmm)", section, name);
    if (cur->have & (1u << key)) return ini_error(s, "[%s]: key '%s' is given twice", section, k_ini_keys[key]);
    if (!parse_count(value, strlen(value), &cur->v[key]))
        return ini_error(s, "[%s]: %s = '%s' is not a positive decimal integer", section, k_ini_keys[key], value);
    cur->have |= 1u << key;
    return 1;
}

/* Before libinih reads the text (its handler sees keys, not headers): every section header, checked —
 * a name other than Kernels_<n> (n without leading zero) or one seen before (ConfigParser refuses a
 * repeated section too) is refused with its line — and lines longer than libinih's INI_MAX_LINE
 * (it would cut them and count the pieces as lines). The sections go to s->sec in file order. */
static bool prescan_ini(ini_state *s, const char *text, size_t n) {
    builder *b = s->b;
    size_t cap = 0;
    int line = 1;
    for (size_t i = 0; i < n; line++, i++) { /* i++: past the newline */
        const size_t start = i;
        while (i < n && text[i] != '\n') i++;
        if (i - start > INI_LINE_MAX) return fail(b, BITNET_ERR_FORMAT, "line %d is longer than %d characters", line, INI_LINE_MAX);
        size_t p = start;
        while (p < i && (text[p] == ' ' || text[p] == '\t')) p++;
        const char *close = p < i && text[p] == '[' ? memchr(text + p, ']', i - p) : NULL;
        if (!close) continue;
        const char *name = text + p + 1;
        const size_t len = (size_t)(close - name);
        int64_t idx;
        const bool kernels = len > 8 && memcmp(name, "Kernels_", 8) == 0 &&
                             ((len == 9 && name[8] == '0') || parse_count(name + 8, len - 8, &idx));
        if (!kernels)
            return fail(b, BITNET_ERR_FORMAT,
                        "line %d: unknown section [%.*s] (bitnet.cpp's kernel_config.ini has [Kernels_0], [Kernels_1], ...)",
                        line, (int)(len < 40 ? len : 40), name);
        for (size_t k = 0; k < s->n_sec; k++) {
            if (strlen(s->sec[k].name) == len && memcmp(s->sec[k].name, name, len) == 0)
                return fail(b, BITNET_ERR_FORMAT, "line %d: section [%.*s] appears twice (first on line %d)", line,
                            (int)len, name, s->sec[k].line);
        }
        if (s->n_sec == TILE_FILE_MAX_ENTRIES) return fail(b, BITNET_ERR_FORMAT, "more than %d sections", TILE_FILE_MAX_ENTRIES);
        if (s->n_sec == cap) {
            cap = cap ? 2 * cap : 16;
            ini_section *ns = realloc(s->sec, cap * sizeof *ns);
            if (!ns) return fail(b, BITNET_ERR_NOMEM, "out of memory");
            s->sec = ns;
        }
        ini_section *sec = &s->sec[s->n_sec++];
        memset(sec, 0, sizeof *sec);
        snprintf(sec->name, sizeof sec->name, "%.*s", (int)len, name); /* len <= 18: "Kernels_" + 10 digits */
        sec->line = line;
    }
    return true;
}

static bool parse_ini(builder *b, const char *text, size_t n) {
    ini_state s = {b, text, text + n, 0, 0, NULL, 0};
    bool ok = prescan_ini(&s, text, n);
    if (ok) {
        const int rc = ini_parse_stream(ini_read_line, &s, on_ini_pair, &s);
        if (rc < 0) ok = fail(b, BITNET_ERR_NOMEM, "the ini reader failed (%d)", rc);
        else if (rc > 0 && (s.err_line == 0 || rc < s.err_line))
            ok = fail(b, BITNET_ERR_FORMAT, "line %d: not a [section] header, a 'key = value' line or a comment", rc);
        else if (s.err_line) ok = false; /* message already written */
    }
    for (size_t i = 0; ok && i < s.n_sec; i++) {
        const ini_section *sec = &s.sec[i];
        for (int k = 0; k < INI_NKEYS && ok; k++) {
            if (!(sec->have & (1u << k)))
                ok = fail(b, BITNET_ERR_FORMAT, "[%s] (line %d) has no key '%s' (every section needs m, k, bm, bk, bmm)",
                          sec->name, sec->line, k_ini_keys[k]);
        }
        if (!ok) break;
        char where[96];
        snprintf(where, sizeof where, "[%s]", sec->name);
        const bitnet_tiles t = {(int32_t)sec->v[INI_BM], (int32_t)sec->v[INI_BK], (int32_t)sec->v[INI_BMM]};
        ok = add_entry(b, 0, sec->v[INI_M], sec->v[INI_K], t, where);
    }
    free(s.sec);
    return ok;
}

/* ---- configs/-style YAML (libyaml) ---------------------------------------------------------------- */

typedef struct yaml_ctx {
    builder *b;
    yaml_document_t *doc;
} yaml_ctx;

static bool scalar_is(const yaml_node_t *n, const char *s) {
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
           memcmp(n->data.scalar.value, s, n->data.scalar.length) == 0;
}

static bool same_scalar(const yaml_node_t *a, const yaml_node_t *b) {
    return a && b && a->type == YAML_SCALAR_NODE && b->type == YAML_SCALAR_NODE &&
           a->data.scalar.length == b->data.scalar.length &&
           memcmp(a->data.scalar.value, b->data.scalar.value, a->data.scalar.length) == 0;
}

static int line_of(const yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }

/* The scalar's text for messages (at most 40 bytes). */
static void scalar_text(const yaml_node_t *n, char *out, size_t cap) {
    if (!n || n->type != YAML_SCALAR_NODE) {
        snprintf(out, cap, "%s", !n ? "(nothing)" : n->type == YAML_MAPPING_NODE ? "(a mapping)" : "(a list)");
        return;
    }
    const size_t len = n->data.scalar.length < 40 ? n->data.scalar.length : 40;
    snprintf(out, cap, "%.*s%s", (int)len, (const char *)n->data.scalar.value, n->data.scalar.length > 40 ? "..." : "");
}

static yaml_node_t *node(const yaml_ctx *c, int id) { return yaml_document_get_node(c->doc, id); }

/* A mapping whose keys repeat would mean "the last one wins" to PyYAML: refused, naming key and line. */
static bool unique_keys(const yaml_ctx *c, const yaml_node_t *map, const char *where) {
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *k = node(c, p->key);
            if (!same_scalar(k, node(c, q->key))) continue;
            char text[64];
            scalar_text(k, text, sizeof text);
            return fail(c->b, BITNET_ERR_FORMAT, "%s: key '%s' is given twice (line %d)", where, text, line_of(k));
        }
    }
    return true;
}

static bool yaml_kernel(const yaml_ctx *c, int type, const char *table, size_t index, const yaml_node_t *item) {
    static const char *const keys[5] = {"m", "k", "block_m", "block_k", "simd_m"};
    char where[96];
    snprintf(where, sizeof where, "%s/%s kernels[%zu] (line %d)", type == BITNET_TYPE_TL1 ? "tl1" : "tl2", table, index,
             line_of(item));
    if (item->type != YAML_MAPPING_NODE) return fail(c->b, BITNET_ERR_FORMAT, "%s: expected {m, k, block_m, block_k, simd_m}", where);
    if (!unique_keys(c, item, where)) return false;
    int64_t v[5];
    unsigned have = 0;
    for (yaml_node_pair_t *p = item->data.mapping.pairs.start; p < item->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(c, p->key), *val = node(c, p->value);
        if (scalar_is(k, "note")) continue;
        int ki = -1;
        for (int i = 0; i < 5; i++) {
            if (scalar_is(k, keys[i])) ki = i;
        }
        char text[64];
        if (ki < 0) {
            scalar_text(k, text, sizeof text);
            return fail(c->b, BITNET_ERR_FORMAT,
                        "%s: unknown key '%s' (expected m, k, block_m, block_k, simd_m and optionally note)", where, text);
        }
        if (!val || val->type != YAML_SCALAR_NODE || val->data.scalar.style != YAML_PLAIN_SCALAR_STYLE ||
            !parse_count((const char *)val->data.scalar.value, val->data.scalar.length, &v[ki])) {
            scalar_text(val, text, sizeof text);
            return fail(c->b, BITNET_ERR_FORMAT, "%s: %s = %s is not a positive decimal integer", where, keys[ki], text);
        }
        have |= 1u << ki;
    }
    for (int i = 0; i < 5; i++) {
        if (!(have & (1u << i))) return fail(c->b, BITNET_ERR_FORMAT, "%s: no key '%s'", where, keys[i]);
    }
    const bitnet_tiles t = {(int32_t)v[2], (int32_t)v[3], (int32_t)v[4]};
    return add_entry(c->b, type, v[0], v[1], t, where);
}

static bool yaml_scheme(const yaml_ctx *c, int type, const yaml_node_t *tables, const char *table_name) {
    const char *scheme = type == BITNET_TYPE_TL1 ? "tl1" : "tl2";
    if (tables->type != YAML_MAPPING_NODE || tables->data.mapping.pairs.top == tables->data.mapping.pairs.start)
        return fail(c->b, BITNET_ERR_FORMAT, "line %d: %s must map table names (default, pretuned) to tables",
                    line_of(tables), scheme);
    if (!unique_keys(c, tables, scheme)) return false;
    const size_t n_tables = (size_t)(tables->data.mapping.pairs.top - tables->data.mapping.pairs.start);
    const yaml_node_pair_t *chosen = NULL;
    char names[256] = "";
    for (yaml_node_pair_t *p = tables->data.mapping.pairs.start; p < tables->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(c, p->key);
        char text[64];
        scalar_text(k, text, sizeof text);
        if (strlen(names) + strlen(text) + 3 < sizeof names) {
            if (names[0]) strcat(names, ", ");
            strcat(names, text);
        }
        if (n_tables == 1 || (table_name && scalar_is(k, table_name))) chosen = p;
    }
    if (!chosen && !table_name)
        return fail(c->b, BITNET_ERR_FORMAT, "%s has the tables %s: say which one the file was packed with (--lut-table NAME)",
                    scheme, names);
    if (!chosen)
        return fail(c->b, BITNET_ERR_FORMAT, "%s has the tables %s but none named '%s' (--lut-table)", scheme, names,
                    table_name);
    char table[48];
    scalar_text(node(c, chosen->key), table, sizeof table);
    char where[96];
    snprintf(where, sizeof where, "%s/%s", scheme, table);
    const yaml_node_t *t = node(c, chosen->value), *kernels = NULL;
    if (t && t->type == YAML_MAPPING_NODE) {
        if (!unique_keys(c, t, where)) return false;
        for (yaml_node_pair_t *p = t->data.mapping.pairs.start; p < t->data.mapping.pairs.top; p++) {
            if (scalar_is(node(c, p->key), "kernels")) kernels = node(c, p->value);
        }
    }
    if (!kernels || kernels->type != YAML_SEQUENCE_NODE ||
        kernels->data.sequence.items.top == kernels->data.sequence.items.start)
        return fail(c->b, BITNET_ERR_FORMAT, "line %d: %s has no list 'kernels' of {m, k, block_m, block_k, simd_m}",
                    line_of(t), where);
    size_t index = 0;
    for (yaml_node_item_t *it = kernels->data.sequence.items.start; it < kernels->data.sequence.items.top; it++) {
        if (!yaml_kernel(c, type, table, index++, node(c, *it))) return false;
    }
    return true;
}

static bool parse_yaml(builder *b, const char *text, size_t n, const char *table_name) {
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser)) return fail(b, BITNET_ERR_NOMEM, "out of memory (YAML parser)");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, n);
    if (!yaml_parser_load(&parser, &doc)) {
        fail(b, BITNET_ERR_FORMAT, "YAML error at line %d, column %d: %s%s%s", (int)parser.problem_mark.line + 1,
             (int)parser.problem_mark.column + 1, parser.problem ? parser.problem : "malformed",
             parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return false;
    }
    bool ok = true;
    const yaml_ctx c = {b, &doc};
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) ok = fail(b, BITNET_ERR_FORMAT, "empty YAML document (no tl1/tl2 tables)");
    else if (root->type != YAML_MAPPING_NODE)
        ok = fail(b, BITNET_ERR_FORMAT, "the top level must be a mapping with tl1 and/or tl2 tables (configs/ style)");
    else ok = unique_keys(&c, root, "the top level");
    for (yaml_node_pair_t *p = ok ? root->data.mapping.pairs.start : NULL; ok && p < root->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = node(&c, p->key);
        if (scalar_is(k, "tl1") || scalar_is(k, "tl2"))
            ok = yaml_scheme(&c, scalar_is(k, "tl1") ? BITNET_TYPE_TL1 : BITNET_TYPE_TL2, node(&c, p->value), table_name);
    }
    yaml_document_delete(&doc);
    if (ok) { /* one document only: a second one would be ignored silently */
        yaml_document_t more;
        if (!yaml_parser_load(&parser, &more)) {
            ok = fail(b, BITNET_ERR_FORMAT, "YAML error at line %d: %s", (int)parser.problem_mark.line + 1,
                      parser.problem ? parser.problem : "malformed");
        } else {
            if (yaml_document_get_root_node(&more)) ok = fail(b, BITNET_ERR_FORMAT, "more than one YAML document ('---')");
            yaml_document_delete(&more);
        }
    }
    yaml_parser_delete(&parser);
    return ok;
}

/* ---- entry points ----------------------------------------------------------------------------------- */

static bitnet_tile_file_format guess_format(const char *path, const char *text, size_t n) {
    const size_t pl = strlen(path);
    if (pl >= 4 && strcasecmp(path + pl - 4, ".ini") == 0) return BITNET_TILE_FILE_INI;
    if ((pl >= 5 && strcasecmp(path + pl - 5, ".yaml") == 0) || (pl >= 4 && strcasecmp(path + pl - 4, ".yml") == 0))
        return BITNET_TILE_FILE_YAML;
    size_t i = 0;
    while (i < n) { /* first line that is neither blank nor a comment */
        while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r' || text[i] == '\n')) i++;
        if (i < n && (text[i] == '#' || text[i] == ';')) {
            while (i < n && text[i] != '\n') i++;
            continue;
        }
        break;
    }
    return i < n && text[i] == '[' ? BITNET_TILE_FILE_INI : BITNET_TILE_FILE_YAML;
}

bitnet_status bitnet_tile_file_parse(const char *text, size_t n, const char *path, bitnet_tile_file_format format,
                                     const char *table_name, bitnet_tile_file **out, bitnet_error *err) {
    if (!out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tile file: out is NULL");
    *out = NULL;
    if (!path) path = "(tile table)";
    if (!text && n) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: no text", path);
    if (n > TILE_FILE_MAX_BYTES)
        return bitnet_fail(err, BITNET_ERR_IO, "%s: %zu bytes is more than a tile table can hold (%zu MiB at most)", path,
                           n, TILE_FILE_MAX_BYTES >> 20);
    const char *nul = n ? memchr(text, '\0', n) : NULL;
    if (nul) return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: a NUL byte at offset %zu: not a text file", path, (size_t)(nul - text));
    if (format == 0) format = guess_format(path, text, n);
    if (format != BITNET_TILE_FILE_INI && format != BITNET_TILE_FILE_YAML)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: unknown tile file format %d", path, (int)format);

    bitnet_tile_file *f = calloc(1, sizeof *f);
    if (!f) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->format = format;
    bitnet_error local;
    builder b = {f, 0, err ? err : &local, BITNET_OK};
    bool ok = format == BITNET_TILE_FILE_INI ? parse_ini(&b, text, n) : parse_yaml(&b, text, n, table_name);
    if (ok && f->n_entries == 0) {
        ok = fail(&b, BITNET_ERR_FORMAT, "no tiles in this file (%s)",
                  format == BITNET_TILE_FILE_INI ? "no [Kernels_<n>] section with m, k, bm, bk, bmm"
                                                 : "no tl1 or tl2 table with kernels");
    }
    if (!ok) {
        bitnet_tile_file_free(f);
        return b.status != BITNET_OK ? b.status : BITNET_ERR_FORMAT;
    }
    *out = f;
    return BITNET_OK;
}

bitnet_status bitnet_tile_file_load(const char *path, const char *table_name, bitnet_tile_file **out,
                                    bitnet_error *err) {
    if (!out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tile file: out is NULL");
    *out = NULL;
    if (!path) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tile file: no path");
    FILE *fp = fopen(path, "rb");
    if (!fp) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(TILE_FILE_MAX_BYTES + 1);
    if (!buf) {
        fclose(fp);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    const size_t n = fread(buf, 1, TILE_FILE_MAX_BYTES + 1, fp);
    const int read_err = ferror(fp);
    fclose(fp);
    bitnet_status st;
    if (read_err) st = bitnet_fail(err, BITNET_ERR_IO, "%s: read error (a directory?)", path);
    else st = bitnet_tile_file_parse(buf, n, path, 0, table_name, out, err);
    free(buf);
    return st;
}
