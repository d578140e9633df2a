/* lut.c — dispatch around the LUT kernels: qlut sizes, the choice of kernel for one weight
 * (specialized > generic of the best ISA the CPU runs > scalar, docs/ARCHITECTURE.md "Runtime rules";
 * the candidates are the generated registry's (type, ISA) rows — SIMD, then portable C —, the CPU check
 * is kernels/isa.h), the choice of tile table for a model, and the tile rule for shapes no config covers
 * (the same rule as codegen/derive.py). */
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"

#include <string.h>

size_t bitnet_qlut_bytes(int type, const bitnet_lut_shape *sh) {
    if (type == BITNET_TYPE_TL1) return 16 * (size_t)sh->K;
    if (type == BITNET_TYPE_TL2) return 32 * ((size_t)sh->three_k / 3 + (size_t)sh->two_k / 2);
    return 0;
}

/* The scalar LUT path of each type (src/kernels/lut/lut_ref.c): the fallback when no compiled
 * (type, ISA) pair of bitnet_lut_isa_impls runs on this CPU. */
static const bitnet_lut_isa_impl scalar_impls[] = {
    {BITNET_TYPE_TL1, "scalar", bitnet_tl1_lut_ctor__scalar, bitnet_tl1_qgemm_generic__scalar,
     "bitnet_tl1_qgemm_generic__scalar"},
    {BITNET_TYPE_TL2, "scalar", bitnet_tl2_lut_ctor__scalar, bitnet_tl2_qgemm_generic__scalar,
     "bitnet_tl2_qgemm_generic__scalar"},
};

bitnet_status bitnet_lut_select(int type, const bitnet_lut_shape *sh, bitnet_lut_impl *out, bitnet_error *err) {
    const bitnet_tiles tiles = {sh->BM, sh->BK, sh->bm};
    bitnet_status st = bitnet_tiles_check(type, sh->M, sh->K, tiles, err);
    if (st) return st;
    const bitnet_lut_shape want = bitnet_lut_shape_make(type, sh->M, sh->K, tiles);
    if (sh->three_k != want.three_k || sh->two_k != want.two_k) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s shape M=%lld, K=%lld, block_k=%d: three_k/two_k = %lld/%lld, expected %lld/%lld",
                           type == BITNET_TYPE_TL1 ? "TL1" : "TL2", (long long)sh->M, (long long)sh->K, (int)sh->BK,
                           (long long)sh->three_k, (long long)sh->two_k, (long long)want.three_k,
                           (long long)want.two_k);
    }
    /* the ISA implementation (constructor + generic kernel) this CPU runs */
    const bitnet_lut_isa_impl *isa = NULL;
    for (size_t i = 0; i < bitnet_lut_n_isa_impls; i++) {
        const bitnet_lut_isa_impl *c = &bitnet_lut_isa_impls[i];
        if (c->type == type && c->ctor && c->generic && bitnet_cpu_supports(c->isa)) {
            isa = c;
            break;
        }
    }
    if (isa) {
        for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
            const bitnet_lut_kernel *k = &bitnet_lut_kernels[i];
            if (k->type == type && k->M == sh->M && k->K == sh->K && k->tiles.BM == sh->BM &&
                k->tiles.BK == sh->BK && k->tiles.bm == sh->bm && k->qgemm && strcmp(k->isa, isa->isa) == 0) {
                *out = (bitnet_lut_impl){isa->ctor, k->qgemm, k->name, true};
                return BITNET_OK;
            }
        }
        *out = (bitnet_lut_impl){isa->ctor, isa->generic, isa->generic_name, false};
        return BITNET_OK;
    }
    const bitnet_lut_isa_impl *scalar = &scalar_impls[type == BITNET_TYPE_TL1 ? 0 : 1];
    *out = (bitnet_lut_impl){scalar->ctor, scalar->generic, scalar->generic_name, false};
    return BITNET_OK;
}

/* The entry of table t for (M, K) whose tiles are legal, or NULL. */
static const bitnet_lut_table_entry *table_entry(const bitnet_lut_table *t, int64_t M, int64_t K) {
    for (size_t i = 0; i < t->n_entries; i++) {
        const bitnet_lut_table_entry *e = &t->entries[i];
        if (e->M == M && e->K == K) {
            return bitnet_tiles_check(t->type, M, K, e->tiles, NULL) == BITNET_OK ? e : NULL;
        }
    }
    return NULL;
}

/* Order among candidate tables: `preferred` table name first, then config name, then table name. */
static bool table_before(const bitnet_lut_table *a, const bitnet_lut_table *b, const char *preferred) {
    if (preferred) {
        const bool pa = strcmp(a->table, preferred) == 0, pb = strcmp(b->table, preferred) == 0;
        if (pa != pb) return pa;
    }
    const int c = strcmp(a->config, b->config);
    if (c != 0) return c < 0;
    return strcmp(a->table, b->table) < 0;
}

const bitnet_lut_table *bitnet_lut_find_table(int type, const int64_t (*shapes)[2], size_t n_shapes,
                                              const char *preferred) {
    if (n_shapes == 0) return NULL;
    const bitnet_lut_table *best = NULL;
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table *t = &bitnet_lut_tables[i];
        if (t->type != type) continue;
        bool covers = true;
        for (size_t s = 0; s < n_shapes && covers; s++) covers = table_entry(t, shapes[s][0], shapes[s][1]) != NULL;
        if (covers && (!best || table_before(t, best, preferred))) best = t;
    }
    return best;
}

bitnet_tiles bitnet_lut_tiles_for(int type, int64_t M, int64_t K, const bitnet_lut_table *table,
                                  const char *preferred) {
    if (table && table->type == type) {
        const bitnet_lut_table_entry *e = table_entry(table, M, K);
        if (e) return e->tiles;
    }
    const bitnet_lut_table *best = NULL;
    const bitnet_lut_table_entry *best_e = NULL;
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table *t = &bitnet_lut_tables[i];
        if (t->type != type) continue;
        const bitnet_lut_table_entry *e = table_entry(t, M, K);
        if (e && (!best || table_before(t, best, preferred))) {
            best = t;
            best_e = e;
        }
    }
    if (best_e) return best_e->tiles;
    bitnet_tiles tiles = {0, 0, 0};
    if (!bitnet_lut_default_tiles(type, M, K, &tiles)) tiles = (bitnet_tiles){0, 0, 0};
    return tiles;
}

/* Largest multiple of `step` that divides n and is <= cap (0 if none). */
static int32_t largest_dividing_multiple(int64_t n, int32_t step, int32_t cap) {
    for (int32_t v = cap / step * step; v >= step; v -= step) {
        if (n % v == 0) return v;
    }
    return 0;
}

bool bitnet_lut_default_tiles(int type, int64_t M, int64_t K, bitnet_tiles *out) {
    if (M <= 0 || K <= 0 || M % 32 != 0) return false;
    const int32_t BM = largest_dividing_multiple(M, 32, 256); /* >= 32 since M % 32 == 0 */
    int32_t BK = 0;
    if (type == BITNET_TYPE_TL1) {
        if (K % 8 != 0) return false;
        BK = largest_dividing_multiple(K, 8, 256);
    } else if (type == BITNET_TYPE_TL2) {
        if (K < 256) return false;
        if ((K % 96) % 32 == 0) {
            BK = 96;
        } else {
            for (int32_t v = 240; v >= 24; v -= 24) {
                if ((K % v) % 32 == 0) {
                    BK = v;
                    break;
                }
            }
        }
    } else {
        return false;
    }
    if (BK == 0) return false;
    *out = (bitnet_tiles){BM, BK, 32};
    return bitnet_tiles_check(type, M, K, *out, NULL) == BITNET_OK;
}
