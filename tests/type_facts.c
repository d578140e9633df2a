/* type_facts.c — bitnet-type-facts, a test-only tool that answers questions about the C type traits
 * (base/types.h) and the C tile rules (bitnet_tiles_check, kernels/lut/pack.h), one line per query,
 * so a test in another language can compare its own rules with these (tests/codegen/test_type_facts.py,
 * in ctest codegen_unittest).
 *
 *   bitnet-type-facts nbytes TYPE M K
 *       the byte size of an (M, K) tensor of TYPE (ne = [K, M]; bitnet_type_nbytes), as a decimal
 *       number, or "error: <message>" (exit 1) when the type cannot hold the shape
 *   bitnet-type-facts default SCHEME M K
 *       the tiles of the default tile rule (bitnet_lut_default_tiles, kernels/lut/lut.h) as "BM BK bm",
 *       or "none" (exit 1) when the rule finds none
 *   bitnet-type-facts tiles SCHEME M K BM BK bm
 *       "ok", or "invalid <field>[,<field>...]: <message>" (exit 1) with the fields of every violated
 *       rule in the order bitnet_tiles_check lists them (m, k, block_m, block_k, simd_m) and its message
 *
 * TYPE and SCHEME are spelled as GGUF / ggml do (F32 F16 BF16 Q8_0 Q6_K I2_S TL1 TL2 ...; SCHEME: TL1
 * or TL2). Usage errors print "usage: ..." to stderr and exit 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/types.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"

static int usage(void) {
    fprintf(stderr, "usage: bitnet-type-facts nbytes TYPE M K | default SCHEME M K | tiles SCHEME M K BM BK bm\n");
    return 2;
}

/* The type id whose traits name is `name`, -1 when there is none. */
static int type_by_name(const char *name) {
    for (int t = 0; t < 256; t++) {
        const bitnet_type_traits *tr = bitnet_type_traits_of(t);
        if (tr && strcmp(tr->name, name) == 0) return t;
    }
    return -1;
}

/* A decimal int64 from s into *v; false unless all of s is one. */
static bool parse_i64(const char *s, int64_t *v) {
    char *end;
    const long long x = strtoll(s, &end, 10);
    if (end == s || *end != '\0') return false;
    *v = (int64_t)x;
    return true;
}

/* Prints the fields of the violated rules of a bitnet_tiles_check message: the rules follow "rules: "
 * (or "rule: "), separated by "; ", each starting with "<field> = ". */
/* The start of the rule after the one containing p: the next "; " followed by "<field> = " (a rule's
 * own text may contain "; "), or NULL. */
static const char *next_rule(const char *p) {
    for (const char *q = strstr(p, "; "); q; q = strstr(q + 2, "; ")) {
        const char *f = q + 2;
        size_t n = strspn(f, "abcdefghijklmnopqrstuvwxyz_");
        if (n > 0 && strncmp(f + n, " = ", 3) == 0) return f;
    }
    return NULL;
}

static void print_fields(const char *msg) {
    const char *p = strstr(msg, "rules: ");
    p = p ? p + 7 : (p = strstr(msg, "rule: ")) ? p + 6 : NULL;
    bool first = true;
    while (p && *p) {
        const char *eq = strstr(p, " = ");
        if (!eq) break;
        printf("%s%.*s", first ? "" : ",", (int)(eq - p), p);
        first = false;
        p = next_rule(eq);
    }
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "nbytes") == 0) {
        const int type = type_by_name(argv[2]);
        int64_t M, K;
        if (type < 0 || !parse_i64(argv[3], &M) || !parse_i64(argv[4], &K)) return usage();
        const int64_t ne[2] = {K, M};
        size_t n = 0;
        bitnet_error err = {0};
        if (bitnet_type_nbytes(type, 2, ne, &n, &err) != BITNET_OK) {
            printf("error: %s\n", err.msg);
            return 1;
        }
        printf("%zu\n", n);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "default") == 0) {
        const int type = type_by_name(argv[2]);
        int64_t M, K;
        if ((type != BITNET_TYPE_TL1 && type != BITNET_TYPE_TL2) || !parse_i64(argv[3], &M) || !parse_i64(argv[4], &K))
            return usage();
        bitnet_tiles t;
        if (!bitnet_lut_default_tiles(type, M, K, &t)) {
            printf("none\n");
            return 1;
        }
        printf("%d %d %d\n", (int)t.BM, (int)t.BK, (int)t.bm);
        return 0;
    }
    if (argc == 8 && strcmp(argv[1], "tiles") == 0) {
        const int type = type_by_name(argv[2]);
        int64_t v[5];
        for (int i = 0; i < 5; i++) {
            if (!parse_i64(argv[3 + i], &v[i])) return usage();
        }
        if (type != BITNET_TYPE_TL1 && type != BITNET_TYPE_TL2) return usage();
        for (int i = 2; i < 5; i++) {
            if (v[i] < INT32_MIN || v[i] > INT32_MAX) return usage();
        }
        const bitnet_tiles tiles = {(int32_t)v[2], (int32_t)v[3], (int32_t)v[4]};
        bitnet_error err = {0};
        if (bitnet_tiles_check(type, v[0], v[1], tiles, &err) == BITNET_OK) {
            printf("ok\n");
            return 0;
        }
        printf("invalid ");
        print_fields(err.msg);
        printf(": %s\n", err.msg);
        return 1;
    }
    return usage();
}
