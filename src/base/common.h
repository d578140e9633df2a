/* common.h — status codes, error messages, GGML type ids and the tensor descriptor shared by every
 * module of libbitnet. Library functions return a bitnet_status and write a message naming the file,
 * key, tensor, shape or value that is wrong into a caller-provided bitnet_error; only the tools' main()
 * prints and exits. */
#ifndef BITNET_COMMON_H
#define BITNET_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_status {
    BITNET_OK = 0,
    BITNET_ERR_IO = 1,          /* open/read/write/mmap failed */
    BITNET_ERR_FORMAT = 2,      /* malformed or inconsistent file content */
    BITNET_ERR_UNSUPPORTED = 3, /* valid but not supported here (type id, architecture, shape) */
    BITNET_ERR_NOMEM = 4,
    BITNET_ERR_INVALID_ARG = 5, /* caller passed a bad value */
} bitnet_status;

/* Filled by a failing call; msg is always NUL-terminated. */
typedef struct bitnet_error {
    char msg[1024];
} bitnet_error;

/* printf-style; err may be NULL. Returns `status` so callers can `return bitnet_fail(...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bitnet_status bitnet_fail(bitnet_error *err, bitnet_status status, const char *fmt, ...);

/* Short name of a status ("I/O error", ...). */
const char *bitnet_status_name(bitnet_status status);

/* A malloc'ed copy of the n bytes at s with a NUL after them (s need not be NUL-terminated; the bytes may
 * contain NULs); NULL on out of memory. The string copies of the GGUF reader/writer, the vocabulary
 * loaders and the converters. */
char *bitnet_strndup(const char *s, size_t n);

/* GGML tensor type ids as stored in GGUF (formats.md "Type ids"). */
enum bitnet_type {
    BITNET_TYPE_F32 = 0,
    BITNET_TYPE_F16 = 1,
    BITNET_TYPE_Q4_0 = 2,
    BITNET_TYPE_Q8_0 = 8,
    BITNET_TYPE_Q6_K = 14,
    BITNET_TYPE_BF16 = 30,
    BITNET_TYPE_I2_S = 36,
    BITNET_TYPE_I8_S = 37, /* activations only, never stored */
    BITNET_TYPE_TL1 = 38,
    BITNET_TYPE_TL2 = 39,
};

/* The byte layouts of I2_S weights (docs/LAYOUTS.md §2; formats.md "I2_S"). bitnet.cpp's quantizer
 * (quantize_i2_s) writes one of three, by how it was built, and records none in the file; all have the
 * same codes, size (M·K/4 + 32) and scale position (byte M·K/4):
 *   X86   — 128-weight blocks over the flat index m·K + k (its x86 builds with ACT_PARALLEL, the
 *           default; every build before Nov 2025; the official GGUF files). The runtime's own layout.
 *   ARM64 — 64-weight blocks over the flat index (its ARM builds, every variant, since Nov 2025).
 *   ROWS4 — groups of 4 rows, one byte per (group, column) (its x86 builds without ACT_PARALLEL).
 * AUTO is no layout: in bitnet_model_params it means "the file's record, else X86". */
typedef enum bitnet_i2s_layout {
    BITNET_I2S_LAYOUT_AUTO = 0,
    BITNET_I2S_LAYOUT_X86 = 1,
    BITNET_I2S_LAYOUT_ARM64 = 2,
    BITNET_I2S_LAYOUT_ROWS4 = 3,
} bitnet_i2s_layout;

/* The GGUF key (string "x86", "arm64" or "rows4") in which the files this project writes record the
 * layout of their I2_S weights (docs/LAYOUTS.md §7), and the key in which bitnet-convert --relayout also
 * records the layout it was told the original file held (the rewrite's provenance: the original's bytes
 * could not confirm it). */
#define BITNET_I2S_LAYOUT_KEY "bitnet.i2s.layout"
#define BITNET_I2S_REWRITTEN_FROM_KEY "bitnet.i2s.rewritten_from"

/* Tile parameters of one ternary weight shape (docs/LAYOUTS.md §3-4; YAML block_m/block_k/simd_m). */
typedef struct bitnet_tiles {
    int32_t BM; /* rows per kernel call, the unit split among threads */
    int32_t BK; /* K elements per int16 accumulation block */
    int32_t bm; /* rows per SIMD step */
} bitnet_tiles;

/* Everything a LUT kernel needs to know about the weight it reads (docs/LAYOUTS.md §6). */
typedef struct bitnet_lut_shape {
    int64_t M, K;          /* weight rows (ne01) and columns (ne00) */
    int32_t BM, BK, bm;    /* tiles */
    int64_t three_k, two_k; /* TL2 split of K (three_k = floor(K/BK)*BK); TL1: three_k = 0, two_k = K */
} bitnet_lut_shape;

struct bitnet_tensor_extra;

/* A tensor as the runtime sees it. ne[0] is the fastest dimension (K for a weight, n_embd for an
 * activation row); nb are byte strides (nb[1] = bytes of one row for dense types). */
typedef struct bitnet_tensor {
    char name[96];
    int type;                       /* enum bitnet_type */
    int n_dims;
    int64_t ne[4];
    size_t nb[4];
    void *data;
    size_t nbytes;                  /* bytes at data (for I2_S/TL1/TL2 including the 32-byte tail) */
    struct bitnet_tensor_extra *extra; /* repacked ternary weights, owned by the LUT host */
} bitnet_tensor;

#ifdef __cplusplus
}
#endif

#endif
