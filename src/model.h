/* model.h — a BitNet model loaded from GGUF and its forward pass.
 *
 * Issue #2 scope: architecture "bitnet" exactly as formats.md describes it (bitnet_b1_58-large/3B and
 * bitnet.cpp's dummy models). Hyperparameters come from GGUF keys. Ternary weights (I2_S, TL1, TL2,
 * or F32/F16 ternary-valued weights, which are ternarized at load) are prepared for one kernel path:
 * TL2 on x86, TL1 on ARM, or the I2_S reference path. Float math in the forward pass is written so
 * that results do not depend on the thread count and match between x86 and ARM builds (fixed
 * summation order, no FMA contraction: the build uses -ffp-contract=off). */
#ifndef BITNET_MODEL_H
#define BITNET_MODEL_H

#include "common.h"
#include "gguf.h"
#include "tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_kernel_path {
    BITNET_PATH_AUTO = 0, /* TL2 on x86-64, TL1 on AArch64, I2_S elsewhere */
    BITNET_PATH_I2S = 1,  /* I2_S reference path (activations int8, dot products on I2_S codes) */
    BITNET_PATH_TL1 = 2,
    BITNET_PATH_TL2 = 3,
} bitnet_kernel_path;

typedef struct bitnet_hparams {
    char arch[32];        /* general.architecture */
    int32_t n_vocab;
    int32_t n_ctx_train;  /* <arch>.context_length */
    int32_t n_embd;
    int32_t n_ff;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_embd_head;  /* n_embd / n_head */
    float rope_freq_base;
    float rope_scale;     /* 1 / rope.scaling.factor for "linear" */
    float rms_eps;
} bitnet_hparams;

typedef struct bitnet_model_params {
    bitnet_kernel_path path;
    const char *lut_table; /* preferred tile table name: "default" (NULL) or "pretuned" */
} bitnet_model_params;

typedef struct bitnet_model bitnet_model;

/* Load and validate: architecture (unknown → BITNET_ERR_UNSUPPORTED naming it), required keys and
 * tensors (missing → error naming it), every tensor's shape against the hparams, ternary tensors
 * repacked for the chosen path (a TL1/TL2 file's tiles from its metadata, else the built-in table
 * covering the model; shapes no table covers use the generic kernel, said once on stderr). */
bitnet_status bitnet_model_load(const char *path, const bitnet_model_params *params, bitnet_model **out,
                                bitnet_error *err);
void bitnet_model_free(bitnet_model *m);

const bitnet_hparams *bitnet_model_hparams(const bitnet_model *m);
const bitnet_vocab *bitnet_model_vocab(const bitnet_model *m);
bitnet_kernel_path bitnet_model_path(const bitnet_model *m); /* the path actually used */
uint64_t bitnet_model_n_params(const bitnet_model *m);
uint64_t bitnet_model_size_bytes(const bitnet_model *m);  /* bytes of tensor data in the file */
/* One line describing kernels in use, e.g. "TL2 (avx2): 3 specialized, 0 generic kernels". */
const char *bitnet_model_kernel_summary(const bitnet_model *m);

/* Inference state: KV cache (F16) for n_ctx positions, scratch buffers for up to n_batch tokens per
 * call, a thread pool of n_threads. */
typedef struct bitnet_context bitnet_context;

bitnet_status bitnet_context_create(bitnet_model *m, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                    bitnet_context **out, bitnet_error *err);
void bitnet_context_free(bitnet_context *c);
int32_t bitnet_context_n_ctx(const bitnet_context *c);

/* Evaluate n_tokens tokens at positions n_past .. n_past+n_tokens-1 (split into n_batch chunks),
 * appending to the KV cache. Logits of the last token become available through bitnet_get_logits;
 * with all_logits, every position's logits are kept (bitnet_get_logits_ith).
 * Errors: token id out of range, n_past + n_tokens > n_ctx (BITNET_ERR_INVALID_ARG, names both). */
bitnet_status bitnet_decode(bitnet_context *c, const int32_t *tokens, int32_t n_tokens, int32_t n_past,
                            bool all_logits, bitnet_error *err);
const float *bitnet_get_logits(const bitnet_context *c);               /* [n_vocab] */
const float *bitnet_get_logits_ith(const bitnet_context *c, int32_t i); /* i-th token of the last call */

#ifdef __cplusplus
}
#endif

#endif
