/* lut.h — the LUT kernels' contract (docs/LAYOUTS.md §5-6): function types, the plain scalar
 * reference every kernel is tested against, the generated kernel registry, and the choice of
 * implementation for one weight (of the best ISA the CPU runs — SIMD, else portable C —: specialized
 * kernel > generic kernel; the scalar LUT kernel when no registry row runs).
 * The CPU feature checks (bitnet_cpu_supports) live in kernels/isa.h, included here.
 *
 * Implemented in src/kernels/lut/lut_ref.c (scalar reference and scalar LUT path), src/kernels/lut/lut.c (dispatch) and the
 * generated files in generated/ (SIMD and portable C kernels and the registry). */
#ifndef BITNET_LUT_H
#define BITNET_LUT_H

#include "base/common.h"
#include "kernels/isa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Build one activation column's LUT. x: [K] floats. Writes qlut (LAYOUTS.md §5, bitnet_qlut_bytes
 * bytes) and *lut_scale = s of LAYOUTS.md §1. three_k is ignored by TL1 constructors. */
typedef void (*bitnet_lut_ctor_fn)(const float *x, int64_t K, int64_t three_k, int8_t *qlut, float *lut_scale);

/* One BM-row tile for n_cols activation columns:
 * acc[n*BM + i] = Σ_k w[tile*BM + i][k] * q[n][k]   (written, not accumulated into)
 * w: packed tensor base (TL1 or TL2 layout for sh's tiles); qlut: column 0, column n at
 * qlut + n*qlut_stride bytes. */
typedef void (*bitnet_qgemm_fn)(const bitnet_lut_shape *sh, int32_t *acc, const uint8_t *w,
                                const int8_t *qlut, size_t qlut_stride, int64_t tile, int64_t n_cols);

/* LUT bytes per activation column (unpadded): TL1 16*K; TL2 32*(three_k/3 + two_k/2). */
size_t bitnet_qlut_bytes(int type, const bitnet_lut_shape *sh);

/* ---- Scalar reference (src/kernels/lut/lut_ref.c) -------------------------------------------------------- */

/* Exact integer product read straight from a packed weight (I2_S, TL1 or TL2; no LUT):
 * acc[n*M + m] = Σ_k w[m][k] * q[n*K + k]. The readable definition of each layout. */
void bitnet_ref_gemm(int type, const uint8_t *packed, const bitnet_lut_shape *sh,
                     const int8_t *q, int64_t n_cols, int32_t *acc);

/* The same for rows m0 <= m < m1 only: acc[n*(m1-m0) + (m-m0)] (tests of single tiles of big shapes). */
void bitnet_ref_gemm_rows(int type, const uint8_t *packed, const bitnet_lut_shape *sh, const int8_t *q,
                          int64_t n_cols, int64_t m0, int64_t m1, int32_t *acc);

/* One weight w[m][k] (-1, 0, +1) decoded from a packed I2_S/TL1/TL2 tensor by the formulas of
 * LAYOUTS.md §2-4. Codes no ternary weight produces are not checked (the unpackers reject them). */
int bitnet_ref_weight(int type, const uint8_t *packed, const bitnet_lut_shape *sh, int64_t m, int64_t k);

/* Scalar LUT constructors and LUT kernels (runtime tiles). They are the definition the SIMD and portable
 * constructors must match byte for byte, and the fallback when no registry (type, ISA) row runs (every
 * build from codegen has the portable rows, so none does in practice). */
void bitnet_tl1_lut_ctor__scalar(const float *x, int64_t K, int64_t three_k, int8_t *qlut, float *lut_scale);
void bitnet_tl2_lut_ctor__scalar(const float *x, int64_t K, int64_t three_k, int8_t *qlut, float *lut_scale);
void bitnet_tl1_qgemm_generic__scalar(const bitnet_lut_shape *sh, int32_t *acc, const uint8_t *w,
                                      const int8_t *qlut, size_t qlut_stride, int64_t tile, int64_t n_cols);
void bitnet_tl2_qgemm_generic__scalar(const bitnet_lut_shape *sh, int32_t *acc, const uint8_t *w,
                                      const int8_t *qlut, size_t qlut_stride, int64_t tile, int64_t n_cols);

/* ---- Generated registry (generated/bitnet-lut-registry.c) ------------------------------------- */

/* A specialized kernel compiled into this build. */
typedef struct bitnet_lut_kernel {
    const char *name;      /* computed by codegen/targets.py: bitnet_tl2_qgemm_m.._k.._bm.._bk.._sm..__avx2 */
    int type;              /* BITNET_TYPE_TL1 or BITNET_TYPE_TL2 */
    const char *isa;       /* "neon", "avx512", "avx2", "portable" */
    int64_t M, K;
    bitnet_tiles tiles;
    bitnet_qgemm_fn qgemm;
} bitnet_lut_kernel;

/* The constructor and generic kernel of one (type, ISA) pair compiled into this build: one row per
 * pair of codegen/targets.py PAIRS whose ISA guard holds, a type's best ISA first. */
typedef struct bitnet_lut_isa_impl {
    int type;                  /* BITNET_TYPE_TL1 or BITNET_TYPE_TL2 (the scheme) */
    const char *isa;           /* "neon", "avx512", "avx2", "portable": the name bitnet_cpu_supports checks */
    bitnet_lut_ctor_fn ctor;
    bitnet_qgemm_fn generic;
    const char *generic_name;  /* symbol name of generic, e.g. "bitnet_tl2_qgemm_generic__avx2" */
} bitnet_lut_isa_impl;

/* One tile table of one config file (configs/<config>.yaml, table "default" or "pretuned"). Tables
 * are listed for every target on every architecture, kernels only where their ISA compiles. */
typedef struct bitnet_lut_table_entry {
    int64_t M, K;
    bitnet_tiles tiles;
} bitnet_lut_table_entry;

typedef struct bitnet_lut_table {
    const char *config;    /* file stem, e.g. "bitnet_b1_58-large" */
    const char *table;     /* "default" | "pretuned" */
    int type;
    size_t n_entries;
    const bitnet_lut_table_entry *entries;
} bitnet_lut_table;

extern const bitnet_lut_kernel bitnet_lut_kernels[];
extern const size_t bitnet_lut_n_kernels;
extern const bitnet_lut_isa_impl bitnet_lut_isa_impls[];
extern const size_t bitnet_lut_n_isa_impls;
extern const bitnet_lut_table bitnet_lut_tables[];
extern const size_t bitnet_lut_n_tables;

/* ---- Dispatch (src/kernels/lut/lut.c) --------------------------------------------------------------------- */

/* What runs one weight. */
typedef struct bitnet_lut_impl {
    bitnet_lut_ctor_fn ctor;
    bitnet_qgemm_fn qgemm;
    const char *name;      /* kernel name, or "<type>_qgemm_generic__<isa>" */
    bool specialized;
} bitnet_lut_impl;

/* Pick the implementation for a TL1/TL2 weight with the shape and tiles in sh: the specialized kernel
 * for exactly (type, M, K, tiles) if compiled and supported by this CPU, else the generic kernel of
 * the best supported ISA, else the scalar LUT kernel. Fails (BITNET_ERR_INVALID_ARG) only when the
 * tiles break a rule (bitnet_tiles_check, same message) or sh->three_k/two_k are not what
 * bitnet_lut_shape_make gives for them. out->name is the kernel's symbol name, e.g.
 * "bitnet_tl2_qgemm_generic__avx2" or "bitnet_tl1_qgemm_generic__scalar". */
bitnet_status bitnet_lut_select(int type, const bitnet_lut_shape *sh, bitnet_lut_impl *out, bitnet_error *err);

/* The tile table to use for a model: among bitnet_lut_tables of `type`, the one that covers all
 * n_shapes (M, K) pairs, preferring table name `preferred` ("default" or "pretuned"), then the first
 * config in name order. NULL when no table covers every shape (or n_shapes == 0); an entry whose
 * tiles break a rule does not cover its shape. shapes: [n_shapes][2] = {M, K}. */
const bitnet_lut_table *bitnet_lut_find_table(int type, const int64_t (*shapes)[2], size_t n_shapes,
                                              const char *preferred);

/* Tiles for one (type, M, K): from `table` if it has the shape, else from any table that has it
 * (preferred name first, then config name order), else the documented default rule
 * (bitnet_lut_default_tiles); {0, 0, 0} when the rule finds none either. */
bitnet_tiles bitnet_lut_tiles_for(int type, int64_t M, int64_t K, const bitnet_lut_table *table, const char *preferred);

/* Tile rule for shapes no config covers (the same rule as `python3 -m codegen derive`).
 * Returns false when no legal tiles exist for (M, K) (e.g. M % 32 != 0). */
bool bitnet_lut_default_tiles(int type, int64_t M, int64_t K, bitnet_tiles *out);

#ifdef __cplusplus
}
#endif

#endif
