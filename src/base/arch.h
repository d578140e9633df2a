/* arch.h — the GGUF architectures (general.architecture) this project reads and writes, as one table:
 * name → graph variant, FFN activation, RoPE pairing, sub-norms, and whether attn_q/attn_k rows are
 * stored in the converters' RoPE permutation. The runtime (model/arch.c), the GGUF writers
 * (convert/dummy_model.c, convert/hf_convert.c) and the tools' help and error texts read it, so a new
 * name for an existing graph is one row in arch.c. Sources of each graph: model/model.h. */
#ifndef BITNET_ARCH_H
#define BITNET_ARCH_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The graph variants src/model/ implements (model/model.h describes each). */
typedef enum bitnet_arch {
    BITNET_ARCH_BITNET = 0,      /* "bitnet" */
    BITNET_ARCH_BITNET_B158 = 1, /* "bitnet-b1.58" and "bitnet-25" */
    BITNET_ARCH_LLAMA = 2,       /* "llama" */
    BITNET_ARCH_QWEN3 = 3,       /* "qwen3" (BitNet-embedding-0.6B and plain Qwen3) */
    BITNET_ARCH_GEMMA3 = 4,      /* "gemma3" (BitNet-embedding-270M and plain Gemma3 text) */
} bitnet_arch;

typedef enum bitnet_ffn_act {
    BITNET_ACT_SILU = 0,  /* x / (1 + e^-x) */
    BITNET_ACT_RELU2 = 1, /* max(x, 0)² */
    BITNET_ACT_GELU = 2,  /* GELU, tanh approximation (ggml_gelu's rounding: model.h) */
} bitnet_ffn_act;

typedef enum bitnet_rope_type {
    BITNET_ROPE_NEOX = 0, /* pairs (i, i + d/2) */
    BITNET_ROPE_NORM = 1, /* pairs (2i, 2i + 1) */
} bitnet_rope_type;

typedef struct bitnet_arch_info {
    const char *name;      /* general.architecture, e.g. "bitnet-b1.58" */
    bitnet_arch graph;     /* the graph the runtime runs for it */
    bitnet_ffn_act ffn_act;
    bitnet_rope_type rope;
    bool sub_norms;        /* attn_sub_norm / ffn_sub_norm tensors in every layer */
    bool permuted_qk;      /* attn_q/attn_k rows in the llama converters' RoPE permutation (model.h) */
    bool qk_norm;          /* attn_q_norm / attn_k_norm: RMSNorm of every q and k head over head_dim */
    bool post_norms;       /* post_attention_norm / post_ffw_norm on each block's output (Gemma3) */
    bool embd_scale;       /* token embeddings multiplied by sqrtf(n_embd) (Gemma) */
    bool norm_in;          /* optional <proj>_norm_in tensors: RMSNorm before each projection (BitNet
                              embedding models) */
} bitnet_arch_info;

/* Number of rows; rows are numbered 0 .. count-1 in the order of arch.c (the dummy writer's
 * bitnet_dummy_arch values are these numbers). */
size_t bitnet_arch_count(void);
/* Row i, or NULL when i >= bitnet_arch_count(). */
const bitnet_arch_info *bitnet_arch_at(size_t i);
/* The row named by the len bytes at name (not NUL-terminated), or NULL. */
const bitnet_arch_info *bitnet_arch_find(const char *name, size_t len);
/* Row number of the NUL-terminated name, or -1. */
int bitnet_arch_index(const char *name);
/* Every name into buf, each in `quote`, separated by `sep` and the last one by `last`:
 * ("'", ", ", " and ") → "'bitnet', 'bitnet-b1.58', 'bitnet-25' and 'llama'". Returns buf
 * (truncated to n - 1 bytes when too small). */
const char *bitnet_arch_list(char *buf, size_t n, const char *quote, const char *sep, const char *last);

#ifdef __cplusplus
}
#endif

#endif
