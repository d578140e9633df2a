/* yaml_check.h — strict reading of YAML files with libyaml's document API, shared by the readers of
 * boards/<name>.yaml (src/mcu/plan_board.c) and of cluster plans (src/cluster/plan.c): every mapping is matched
 * against a table of keys (unknown, repeated and missing keys refused), every value against its type, and
 * every message is "<file>: <key path>: <what is wrong> (line N)". A reader keeps the first failure only:
 * each helper returns false once anything failed, so `if (!a || !b) return false;` chains stop there. */
#ifndef BITNET_YAML_CHECK_H
#define BITNET_YAML_CHECK_H

#include <yaml.h>

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every string a reader keeps, freed together (bitnet_yc_pool_free). */
typedef struct bitnet_yc_pool bitnet_yc_pool;

/* One reading: the file (for messages), the document, the pool, the caller's error and the first failure. */
typedef struct bitnet_yc {
    const char *path;
    yaml_document_t *doc;
    bitnet_yc_pool *pool;
    bitnet_error *err;
    bitnet_status status; /* BITNET_OK until the first failure */
} bitnet_yc;

/* A key of a mapping: bitnet_yc_match fills val with its value node, or NULL when absent. */
typedef struct bitnet_yc_field {
    const char *key;
    bool required;
    const yaml_node_t *val;
} bitnet_yc_field;

/* A copy of s[0..len) owned by the pool; NULL when out of memory. */
const char *bitnet_yc_pool_dup(bitnet_yc_pool *p, const char *s, size_t len);
void bitnet_yc_pool_free(bitnet_yc_pool *p); /* NULL is fine */

/* Records the first failure as "<path>: <message>" in c->err; always returns false. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bool bitnet_yc_fail(bitnet_yc *c, bitnet_status st, const char *fmt, ...);

yaml_node_t *bitnet_yc_node(const bitnet_yc *c, int id);
int bitnet_yc_line(const yaml_node_t *n); /* 1-based line of a node, 0 for NULL */
/* The value for messages: the scalar's text in quotes (at most 60 bytes), or what the node is. */
void bitnet_yc_value_text(const yaml_node_t *n, char *out, size_t cap);
bool bitnet_yc_scalar_is(const yaml_node_t *n, const char *s);
/* "where.key" (or "key" when where is "") into out. */
void bitnet_yc_key_path(char *out, size_t cap, const char *where, const char *key);
/* The pairs of `map` (named `where` in messages; "" is the top level) matched to fields[0..n), n <= 32: a
 * non-mapping, an unknown or repeated key, or a missing required key is refused. */
bool bitnet_yc_match(bitnet_yc *c, const yaml_node_t *map, const char *where, bitnet_yc_field *fields, int n);

/* Values. A NULL node passed to bitnet_yc_string leaves *out unchanged (an absent optional key); the
 * others refuse it. */
bool bitnet_yc_string(bitnet_yc *c, const yaml_node_t *v, const char *path, bool nonempty, const char **out);
/* The scalar's text as a NUL-terminated copy in buf[cap], else a message saying it is not `expected`. */
bool bitnet_yc_scalar_copy(bitnet_yc *c, const yaml_node_t *v, const char *path, const char *expected, char *buf,
                           size_t cap);
/* A byte count: decimal digits, optionally followed by KiB, MiB or GiB (powers of 1024), at most 2^62;
 * `positive` refuses 0. */
bool bitnet_yc_bytes(bitnet_yc *c, const yaml_node_t *v, const char *path, bool positive, uint64_t *out);
bool bitnet_yc_int(bitnet_yc *c, const yaml_node_t *v, const char *path, int64_t lo, int64_t hi, int32_t *out);
bool bitnet_yc_uint64(bitnet_yc *c, const yaml_node_t *v, const char *path, uint64_t *out); /* [0, 2^62] */
bool bitnet_yc_positive(bitnet_yc *c, const yaml_node_t *v, const char *path, double *out); /* finite, > 0 */
bool bitnet_yc_number(bitnet_yc *c, const yaml_node_t *v, const char *path, double lo, double *out); /* finite, >= lo */
bool bitnet_yc_bool(bitnet_yc *c, const yaml_node_t *v, const char *path, bool *out); /* true | false */
/* One of words[0..n): *out is its index. */
bool bitnet_yc_word(bitnet_yc *c, const yaml_node_t *v, const char *path, const char *const *words, int n, int *out);
/* A list node (possibly empty), else a message naming what it should list. */
bool bitnet_yc_list(bitnet_yc *c, const yaml_node_t *v, const char *path, const char *of);
int bitnet_yc_list_len(const yaml_node_t *v);
bool bitnet_yc_is_null(const yaml_node_t *v); /* null, ~ or an empty plain scalar */

/* Reads the root node of a parsed document into the caller's structure; false after a bitnet_yc_fail. */
typedef bool (*bitnet_yc_root_fn)(bitnet_yc *c, const yaml_node_t *root, void *user);

/* Read the file at `path` (at most max_bytes; `what` names the kind of file in messages: "board file"),
 * parse exactly one YAML document and hand its root to fn. On success *pool_out holds every string fn
 * kept (the caller frees it with bitnet_yc_pool_free). Errors: BITNET_ERR_IO (cannot open or read, too
 * large), BITNET_ERR_FORMAT (YAML syntax, an empty or a second document, or fn's message), BITNET_ERR_NOMEM. */
bitnet_status bitnet_yc_load(const char *path, size_t max_bytes, const char *what, bitnet_yc_root_fn fn, void *user,
                             bitnet_yc_pool **pool_out, bitnet_error *err);

#ifdef __cplusplus
}
#endif

#endif
