/* mcu.h — the runtime of one microcontroller node: a BitNet GGUF image (linked into flash, or read once
 * into RAM) run with one thread from one arena that the caller gives at start-up, with nothing allocated
 * afterwards (TensorFlow Lite Micro's "tensor arena" discipline). It is the same model code as on a host
 * (src/model: the same forward pass and float operations), so a node's logits equal the x86 build's bit for
 * bit; it runs in hosted builds too (tests, bitnet-mcu-plan) and is all the bare-metal build has.
 *
 * Life cycle, all memory from `arena`:
 *   bitnet_mcu_open        the GGUF index, the model, its layers and the LUT host's extras (the ternary
 *                          weights stay in the image, used in place: BITNET_PATH_STORED, so I2_S runs the
 *                          I2_S int8 kernels, TL1/TL2 files their LUT kernels with the tiles they record);
 *   bitnet_mcu_arena_bytes the exact arena a context of given sizes needs on top (the sizing call);
 *   bitnet_mcu_start       the context (KV cache, activations, LUT workspaces, RoPE tables, logits), then
 *                          the arena is sealed: any later allocation fails;
 *   bitnet_mcu_eval ...    evaluate tokens; read logits; bitnet_argmax (text/sampler.h) picks greedily.
 * The image must stay valid and unchanged while the node is open and start on a 32-byte boundary (its
 * tensors are used in place). Errors name the image and the value: a truncated or malformed image
 * (BITNET_ERR_FORMAT), a tensor type this build cannot run (BITNET_ERR_UNSUPPORTED), an arena too small
 * (BITNET_ERR_NOMEM, naming the bytes given and needed). */
#ifndef BITNET_MCU_H
#define BITNET_MCU_H

#include "base/common.h"
#include "base/mem.h"
#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_mcu_params {
    int32_t n_ctx;    /* KV cache positions */
    int32_t n_batch;  /* tokens per forward pass (prompt chunks); >= 1 */
    int32_t n_logits; /* rows of logits kept: 1 = the last token of each call; up to n_ctx */
} bitnet_mcu_params;

/* Arena bytes of a node, by purpose; every figure includes its alignment padding. */
typedef struct bitnet_mcu_budget {
    size_t model;       /* taken by bitnet_mcu_open: GGUF index, model and layer structs, weight extras */
    bitnet_context_budget context; /* what bitnet_mcu_start takes, by buffer group (model.h) */
    size_t total;       /* model + context.total: the arena's usable size must be at least this */
} bitnet_mcu_budget;

typedef struct bitnet_mcu {
    char name[128];    /* the image's name for messages (cut to 127 bytes) */
    bitnet_arena arena;
    bitnet_model *model;
    bitnet_context *ctx;
    bitnet_mcu_params params;
    int32_t n_past;    /* positions evaluated so far */
    int32_t n_last;    /* tokens of the last bitnet_mcu_eval */
    bool last_all;     /* the last eval kept every position's logits */
} bitnet_mcu;

/* Open the image (`image_bytes` bytes; `name` for messages) with memory from arena[0, arena_bytes)
 * (aligned up to 64 first). Errors: BITNET_ERR_INVALID_ARG (NULL, an image not on a 32-byte boundary),
 * the loader's errors (bitnet_model_load_memory: truncated or malformed GGUF, unsupported types or
 * architectures), BITNET_ERR_NOMEM when the arena cannot hold the model (the message gives the arena's
 * size and the request that failed). On error nothing stays open. */
bitnet_status bitnet_mcu_open(bitnet_mcu *rt, const void *image, size_t image_bytes, const char *name, void *arena,
                              size_t arena_bytes, bitnet_error *err);
/* bitnet_mcu_open for an image whose I2_S weights are in `i2s_layout` (bitnet_model_params.i2s_layout:
 * AUTO = the image's record, else X86). Weights in bitnet.cpp's ARM64 or ROWS4 layout are rewritten into
 * X86 copies in the arena (M·K/4 + 32 bytes each rounded up to 64, counted in bitnet_mcu_budget.model), since no kernel
 * reads those layouts in place; an image rewritten once on a host (bitnet-convert --relayout) needs none.
 * A layout that contradicts the image's record is refused naming both. */
bitnet_status bitnet_mcu_open_layout(bitnet_mcu *rt, const void *image, size_t image_bytes, const char *name,
                                     int i2s_layout, void *arena, size_t arena_bytes, bitnet_error *err);

/* The arena this node needs with params p: exact (tests check that bitnet_mcu_start then uses every byte
 * of it and that one byte less is refused). Errors as bitnet_context_arena_bytes (bad sizes). */
bitnet_status bitnet_mcu_arena_bytes(const bitnet_mcu *rt, const bitnet_mcu_params *p, bitnet_mcu_budget *out,
                                     bitnet_error *err);

/* Create the context with params p in the arena and seal it. BITNET_ERR_NOMEM when the arena is short,
 * naming its usable size and the bytes needed (bitnet_mcu_arena_bytes); nothing is allocated then. */
bitnet_status bitnet_mcu_start(bitnet_mcu *rt, const bitnet_mcu_params *p, bitnet_error *err);

/* Evaluate n tokens at positions n_past .. n_past+n-1 (in chunks of n_batch) and advance n_past. With
 * all_logits every position's logits are kept (n <= n_logits, else BITNET_ERR_INVALID_ARG), else the last
 * one's. Errors (state unchanged): not started, n < 1, a token id out of range, the context full
 * (n_past + n > n_ctx, naming the three numbers). */
bitnet_status bitnet_mcu_eval(bitnet_mcu *rt, const int32_t *tokens, int32_t n, bool all_logits, bitnet_error *err);

/* [n_vocab] logits of token i of the last eval (negative i counts from the end); NULL when not kept. */
const float *bitnet_mcu_logits(const bitnet_mcu *rt, int32_t i);

/* Free the context and the model (the arena's contents; the buffers themselves are the caller's). */
void bitnet_mcu_close(bitnet_mcu *rt);

#ifdef __cplusplus
}
#endif

#endif
