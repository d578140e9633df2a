/* types.h — the traits of every tensor type id a GGUF file may carry (one table, as ggml's type
 * traits): name, block size and bytes per block, the shape-level sizes of the ternary types I2_S, TL1
 * and TL2 (formats.md "Byte size of one tensor", the one place the TL2 size formula lives), the row →
 * float conversion of the dense types (F32, F16, BF16, Q8_0, Q6_K) and the type whose dense kernel
 * multiplies a type's rows in the output head (kernels/dense/dense.h: bitnet_dense_kernel_for). */
#ifndef BITNET_TYPES_H
#define BITNET_TYPES_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_type_kind {
    BITNET_KIND_BLOCK = 0, /* ne[0] in whole blocks of blck_size elements, type_size bytes each */
    BITNET_KIND_TERNARY,   /* I2_S, TL1, TL2: 2-D [K, M], size from the shape (ternary_data_bytes + 32) */
    BITNET_KIND_ACT_ONLY,  /* I8_S: activations only, never stored in a file */
} bitnet_type_kind;

typedef struct bitnet_type_traits {
    const char *name;         /* as GGUF / ggml spell it: "F32", "Q8_0", "I2_S", "TL2", ... */
    int type;                 /* GGUF type id (BITNET_TYPE_*) */
    int32_t blck_size;        /* elements per block (1 for the ternary types) */
    int32_t type_size;        /* bytes per block (0 for the ternary types) */
    bitnet_type_kind kind;
    /* ternary only: M·K must be a multiple of ternary_unit (0: no such rule), K >= ternary_min_k, and
     * the packed weights take ternary_data_bytes(M, K) bytes before the 32-byte scale tail */
    int32_t ternary_unit;
    int32_t ternary_min_k;
    size_t (*ternary_data_bytes)(int64_t M, int64_t K);
    /* one row of n elements (n % blck_size == 0; row may be unaligned) to float; NULL: not supported */
    void (*to_f32)(const void *row, float *dst, int64_t n);
    /* the type whose dense kernel multiplies rows of this type in the output head (a row of another
     * type is converted with to_f32 first); -1 where the head does not take this type */
    int dense_dot_type;
} bitnet_type_traits;

/* The I2_S byte layouts (bitnet_i2s_layout, common.h): "x86", "arm64", "rows4"; "auto" for
 * BITNET_I2S_LAYOUT_AUTO; NULL for anything else. */
const char *bitnet_i2s_layout_name(int layout);
/* The layout named by the n bytes at s ("x86", "arm64" or "rows4"; not "auto"), or -1. */
int bitnet_i2s_layout_parse(const char *s, size_t n);

/* The traits of a type id; NULL for ids this build does not know (including the removed 4 and 5). */
const bitnet_type_traits *bitnet_type_traits_of(int type);

/* "F32", "F16", "Q8_0", "I2_S", "TL1", "TL2", ...; "unknown" for ids this build does not know. */
const char *bitnet_type_name(int type);

/* true for I2_S, TL1, TL2 */
bool bitnet_type_is_ternary(int type);

/* Byte size of a tensor of `type` with n_dims dims ne[0..n_dims-1] (ne[0] fastest).
 * Block types need ne[0] % block == 0. Ternary types are 2-D [K, M] with the sizes of formats.md:
 * I2_S and TL1 M*K/4 + 32; TL2 pad32((K-256)*M/3*5/8 + 256*M/2*4/8) + 32.
 * Errors: BITNET_ERR_UNSUPPORTED for an unknown type id (message names the id),
 * BITNET_ERR_FORMAT for a shape the type cannot hold (names the dimension), overflow. */
bitnet_status bitnet_type_nbytes(int type, int n_dims, const int64_t *ne, size_t *out, bitnet_error *err);

/* Bytes of the packed weights of a ternary (M, K) tensor before its 32-byte scale tail (the offset of
 * the float scale): I2_S and TL1 M*K/4; TL2 pad32((K-256)*M/3*5/8 + 256*M/2*4/8), integer arithmetic
 * left to right (formats.md), 0 for K < 256 or M <= 0, where the formula is undefined. No checks of the
 * shape rules; 0 for a type that is not ternary. */
size_t bitnet_ternary_data_bytes(int type, int64_t M, int64_t K);

/* Full byte size of a ternary (M, K) tensor: bitnet_ternary_data_bytes + 32; 0 for a type that is not
 * ternary and for TL2 with K < 256. */
size_t bitnet_ternary_nbytes(int type, int64_t M, int64_t K);

/* Convert n elements of one row of a dense type (F32, F16, BF16, Q8_0, Q6_K) to float. row may be
 * unaligned. BITNET_ERR_UNSUPPORTED for other types; BITNET_ERR_INVALID_ARG for a negative n or one that
 * is not a multiple of the block size. */
bitnet_status bitnet_row_to_f32(int type, const void *row, float *dst, int64_t n, bitnet_error *err);

#ifdef __cplusplus
}
#endif

#endif
