/* plan_board.c — board files of bitnet-mcu-plan (boards/<name>.yaml) through src/yamlcheck's strict reading:
 * every mapping is checked against its table of keys (unknown, repeated and missing keys are refused), every
 * value against its type, and every message names the file, the key path and the value or line. Schema:
 * boards/README.md; contract: plan.h. */
#include "mcu/plan.h"

#include "yamlcheck/yaml_check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOARD_FILE_MAX_BYTES ((size_t)1 << 20)

/* A list of source ids, each defined in b->sources; at least one. */
static bool get_refs(bitnet_yc *c, const bitnet_plan_board *b, const yaml_node_t *v, const char *path, const char **refs,
                     int *n_refs) {
    if (!bitnet_yc_list(c, v, path, "source ids")) return false;
    if (bitnet_yc_list_len(v) == 0) return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: the list is empty: name the sources of the figures (line %d)", path, bitnet_yc_line(v));
    if (bitnet_yc_list_len(v) > BITNET_PLAN_MAX_REFS)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: more than %d sources (line %d)", path, BITNET_PLAN_MAX_REFS, bitnet_yc_line(v));
    *n_refs = 0;
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, i++) {
        const yaml_node_t *item = bitnet_yc_node(c, *it);
        char ipath[160];
        snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
        const char *id = NULL;
        if (!bitnet_yc_string(c, item, ipath, true, &id)) return false;
        int found = -1;
        for (int s = 0; s < b->n_sources && found < 0; s++) {
            if (strcmp(b->sources[s].id, id) == 0) found = s;
        }
        if (found < 0) {
            char text[80];
            bitnet_yc_value_text(item, text, sizeof text);
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: %s is not the id of an entry of 'sources' (line %d)", ipath, text,
                        bitnet_yc_line(item));
        }
        refs[(*n_refs)++] = b->sources[found].id;
    }
    return true;
}

/* ---- the sections ------------------------------------------------------------------------------------ */

static bool read_sources(bitnet_yc *c, bitnet_plan_board *b, const yaml_node_t *v) {
    if (!bitnet_yc_list(c, v, "sources", "{id, title, ...}")) return false;
    if (bitnet_yc_list_len(v) == 0) return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "sources: the list is empty (line %d)", bitnet_yc_line(v));
    if (bitnet_yc_list_len(v) > BITNET_PLAN_MAX_SOURCES)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "sources: more than %d entries (line %d)", BITNET_PLAN_MAX_SOURCES, bitnet_yc_line(v));
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, i++) {
        char where[48], kp[96];
        snprintf(where, sizeof where, "sources[%d]", i);
        bitnet_yc_field f[] = {{"id", true, NULL},       {"title", true, NULL}, {"version", false, NULL},
                     {"section", false, NULL}, {"url", false, NULL},  {"note", false, NULL}};
        if (!bitnet_yc_match(c, bitnet_yc_node(c, *it), where, f, 6)) return false;
        bitnet_plan_source *s = &b->sources[b->n_sources];
        memset(s, 0, sizeof *s);
        const char **dst[6] = {&s->id, &s->title, &s->version, &s->section, &s->url, &s->note};
        for (int k = 0; k < 6; k++) {
            bitnet_yc_key_path(kp, sizeof kp, where, f[k].key);
            if (!bitnet_yc_string(c, f[k].val, kp, k < 2, dst[k])) return false;
        }
        for (int j = 0; j < b->n_sources; j++) {
            if (strcmp(b->sources[j].id, s->id) == 0)
                return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s.id: '%s' is already the id of sources[%d] (line %d)", where, s->id, j,
                            bitnet_yc_line(f[0].val));
        }
        b->n_sources++;
    }
    return true;
}

static bool read_cpu(bitnet_yc *c, bitnet_plan_board *b, const yaml_node_t *v) {
    bitnet_yc_field f[] = {{"core", true, NULL}, {"cores", true, NULL}, {"clock_mhz", true, NULL},
                 {"fpu", true, NULL},  {"simd", true, NULL},  {"source", true, NULL}};
    if (!bitnet_yc_match(c, v, "cpu", f, 6)) return false;
    static const char *const fpus[] = {"none", "single", "double"};
    int fpu = 0;
    bitnet_plan_cpu *cpu = &b->cpu;
    if (!bitnet_yc_string(c, f[0].val, "cpu.core", true, &cpu->core) ||
        !bitnet_yc_int(c, f[1].val, "cpu.cores", 1, 1024, &cpu->cores) ||
        !bitnet_yc_positive(c, f[2].val, "cpu.clock_mhz", &cpu->clock_mhz) || !bitnet_yc_word(c, f[3].val, "cpu.fpu", fpus, 3, &fpu) ||
        !bitnet_yc_string(c, f[4].val, "cpu.simd", true, &cpu->simd) ||
        !get_refs(c, b, f[5].val, "cpu.source", cpu->source, &cpu->n_source))
        return false;
    cpu->fpu = fpus[fpu];
    return true;
}

static bool read_reserve(bitnet_yc *c, bitnet_plan_memory *m, const yaml_node_t *v, const char *where) {
    char path[96];
    bitnet_yc_key_path(path, sizeof path, where, "reserve");
    if (!bitnet_yc_list(c, v, path, "{what, bytes, note}")) return false;
    if (bitnet_yc_list_len(v) > BITNET_PLAN_MAX_RESERVES)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: more than %d entries (line %d)", path, BITNET_PLAN_MAX_RESERVES, bitnet_yc_line(v));
    int i = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++, i++) {
        char rw[128], kp[160];
        snprintf(rw, sizeof rw, "%s[%d]", path, i);
        bitnet_yc_field f[] = {{"what", true, NULL}, {"bytes", true, NULL}, {"note", false, NULL}};
        if (!bitnet_yc_match(c, bitnet_yc_node(c, *it), rw, f, 3)) return false;
        bitnet_plan_reserve *r = &m->reserve[m->n_reserve];
        memset(r, 0, sizeof *r);
        bitnet_yc_key_path(kp, sizeof kp, rw, "what");
        if (!bitnet_yc_string(c, f[0].val, kp, true, &r->what)) return false;
        bitnet_yc_key_path(kp, sizeof kp, rw, "bytes");
        if (!bitnet_yc_bytes(c, f[1].val, kp, false, &r->bytes)) return false;
        bitnet_yc_key_path(kp, sizeof kp, rw, "note");
        if (!bitnet_yc_string(c, f[2].val, kp, false, &r->note)) return false;
        m->reserved += r->bytes;
        m->n_reserve++;
    }
    return true;
}

static bool read_memory(bitnet_yc *c, bitnet_plan_board *b, const yaml_node_t *v, int index) {
    char where[48], kp[96];
    snprintf(where, sizeof where, "memories[%d]", index);
    bitnet_yc_field f[] = {{"name", true, NULL},   {"kind", true, NULL}, {"bytes", true, NULL},  {"roles", true, NULL},
                 {"stream_mb_s", true, NULL}, {"source", true, NULL}, {"note", false, NULL}, {"reserve", false, NULL}};
    if (!bitnet_yc_match(c, v, where, f, 8)) return false;
    bitnet_plan_memory *m = &b->memories[b->n_memories];
    memset(m, 0, sizeof *m);
    static const char *const kinds[] = {"flash", "ram"};
    static const char *const roles[] = {"weights", "arena"};
    int kind = 0;
    bitnet_yc_key_path(kp, sizeof kp, where, "name");
    if (!bitnet_yc_string(c, f[0].val, kp, true, &m->name)) return false;
    for (int j = 0; j < b->n_memories; j++) {
        if (strcmp(b->memories[j].name, m->name) == 0)
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: '%s' is already the name of memories[%d] (line %d)", kp, m->name, j,
                        bitnet_yc_line(f[0].val));
    }
    bitnet_yc_key_path(kp, sizeof kp, where, "kind");
    if (!bitnet_yc_word(c, f[1].val, kp, kinds, 2, &kind)) return false;
    m->kind = kind == 0 ? BITNET_PLAN_FLASH : BITNET_PLAN_RAM;
    bitnet_yc_key_path(kp, sizeof kp, where, "bytes");
    if (!bitnet_yc_bytes(c, f[2].val, kp, true, &m->bytes)) return false;
    bitnet_yc_key_path(kp, sizeof kp, where, "roles");
    if (!bitnet_yc_list(c, f[3].val, kp, "roles (weights, arena)")) return false;
    int i = 0;
    for (yaml_node_item_t *it = f[3].val->data.sequence.items.start; it < f[3].val->data.sequence.items.top; it++, i++) {
        char rp[128];
        snprintf(rp, sizeof rp, "%s[%d]", kp, i);
        int r = 0;
        if (!bitnet_yc_word(c, bitnet_yc_node(c, *it), rp, roles, 2, &r)) return false;
        const unsigned bit = r == 0 ? BITNET_PLAN_ROLE_WEIGHTS : BITNET_PLAN_ROLE_ARENA;
        if (m->roles & bit) return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: role '%s' is listed twice (line %d)", rp, roles[r], bitnet_yc_line(bitnet_yc_node(c, *it)));
        m->roles |= bit;
    }
    if (m->kind == BITNET_PLAN_FLASH && (m->roles & BITNET_PLAN_ROLE_ARENA))
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: memory '%s' is flash (read-only at run time) and cannot take the role 'arena' (line %d)",
                    kp, m->name, bitnet_yc_line(f[3].val));
    bitnet_yc_key_path(kp, sizeof kp, where, "stream_mb_s");
    if (!bitnet_yc_positive(c, f[4].val, kp, &m->stream_mb_s)) return false;
    bitnet_yc_key_path(kp, sizeof kp, where, "source");
    if (!get_refs(c, b, f[5].val, kp, m->source, &m->n_source)) return false;
    bitnet_yc_key_path(kp, sizeof kp, where, "note");
    if (!bitnet_yc_string(c, f[6].val, kp, false, &m->note)) return false;
    if (f[7].val && !read_reserve(c, m, f[7].val, where)) return false;
    if (m->reserved > m->bytes) {
        bitnet_yc_key_path(kp, sizeof kp, where, "reserve");
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: the reserves of memory '%s' add up to %llu bytes, more than its %llu bytes", kp,
                    m->name, (unsigned long long)m->reserved, (unsigned long long)m->bytes);
    }
    m->usable = m->bytes - m->reserved;
    b->n_memories++;
    return true;
}

static bool read_board(bitnet_yc *c, bitnet_plan_board *b, const yaml_node_t *root) {
    bitnet_yc_field f[] = {{"name", true, NULL}, {"description", true, NULL}, {"sources", true, NULL}, {"cpu", true, NULL},
                 {"memories", true, NULL}};
    if (!bitnet_yc_match(c, root, "", f, 5)) return false;
    if (!bitnet_yc_string(c, f[0].val, "name", true, &b->name) || !bitnet_yc_string(c, f[1].val, "description", true, &b->description) ||
        !read_sources(c, b, f[2].val) || !read_cpu(c, b, f[3].val))
        return false;
    const yaml_node_t *mems = f[4].val;
    if (!bitnet_yc_list(c, mems, "memories", "{name, kind, bytes, ...}")) return false;
    if (bitnet_yc_list_len(mems) == 0) return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "memories: the list is empty (line %d)", bitnet_yc_line(mems));
    if (bitnet_yc_list_len(mems) > BITNET_PLAN_MAX_MEMORIES)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "memories: more than %d entries (line %d)", BITNET_PLAN_MAX_MEMORIES, bitnet_yc_line(mems));
    int i = 0;
    for (yaml_node_item_t *it = mems->data.sequence.items.start; it < mems->data.sequence.items.top; it++, i++) {
        if (!read_memory(c, b, bitnet_yc_node(c, *it), i)) return false;
    }
    unsigned all = 0;
    for (int m = 0; m < b->n_memories; m++) all |= b->memories[m].roles;
    if (!(all & BITNET_PLAN_ROLE_WEIGHTS))
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "memories: no memory has the role 'weights' (where the model image goes)");
    if (!(all & BITNET_PLAN_ROLE_ARENA))
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "memories: no memory has the role 'arena' (where the node's arena goes)");
    return true;
}

void bitnet_plan_board_free(bitnet_plan_board *b) {
    if (!b) return;
    bitnet_yc_pool_free((bitnet_yc_pool *)b->strings);
    free(b);
}

/* ---- the file ---------------------------------------------------------------------------------------- */

static bool read_root(bitnet_yc *c, const yaml_node_t *root, void *user) {
    bitnet_plan_board *b = user;
    b->path = bitnet_yc_pool_dup(c->pool, c->path, strlen(c->path));
    if (!b->path) return bitnet_yc_fail(c, BITNET_ERR_NOMEM, "out of memory");
    b->strings = c->pool;
    return read_board(c, b, root);
}

bitnet_status bitnet_plan_board_load(const char *path, bitnet_plan_board **out, bitnet_error *err) {
    if (!path || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_plan_board_load: NULL argument");
    *out = NULL;
    bitnet_plan_board *b = calloc(1, sizeof *b);
    if (!b) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    bitnet_yc_pool *pool = NULL;
    const bitnet_status st = bitnet_yc_load(path, BOARD_FILE_MAX_BYTES, "board file", read_root, b, &pool, err);
    if (st != BITNET_OK) {
        free(b);
        return st;
    }
    b->strings = pool;
    *out = b;
    return BITNET_OK;
}
