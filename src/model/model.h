/* model.h — a BitNet model loaded from GGUF and its forward pass.
 *
 * Architectures (general.architecture). Hyperparameters come only from GGUF keys <arch>.*, never from
 * a table of model names; the graph facts below are cited from the sources named with them.
 *
 *  "bitnet" — bitnet_b1_58-large/3B and bitnet.cpp's dummy models (formats.md "Architecture bitnet";
 *     bitnet.cpp's llama.cpp fork, build_bitnet): per layer
 *       h = x + Wo·RMSNorm_attn_sub(Attn(RoPE_NEOX(Wq·n), RoPE_NEOX(Wk·n), Wv·n)),  n = RMSNorm_attn(x)
 *       x' = h + Wdown·RMSNorm_ffn_sub(silu(Wgate·m) ⊙ Wup·m),                        m = RMSNorm_ffn(h)
 *     logits = head · RMSNorm_output(x), head = output.weight if present, else token_embd.
 *  "bitnet-b1.58" (alias "bitnet-25") — BitNet-b1.58-2B-4T (formats.md "Architecture bitnet-b1.58";
 *     Hugging Face transformers' BitNet model, model_type "bitnet" / BitNetForCausalLM: config.json
 *     "hidden_act": "relu2", BitNetAttention applies attn_sub_norm to the attention output before
 *     o_proj, BitNetMLP computes down_proj(ffn_sub_norm(act(gate_proj(x)) * up_proj(x))), rotary
 *     embedding by rotate_half; bitnet.cpp's fork runs both names through build_bitnet_158 with
 *     LLM_FFN_RELU_SQR and lists output.weight as optional): the "bitnet" graph with the FFN activation
 *     relu²(g) = max(g, 0)², RoPE theta from <arch>.rope.freq_base (500000 for 2B-4T), GQA, and
 *     output.weight if present (untied head) else token_embd ("tie_word_embeddings": true in 2B-4T).
 *     (bitnet.cpp's build_bitnet_158 always multiplies by token_embd, even when output.weight exists;
 *     we use output.weight, as the Hugging Face model does with tie_word_embeddings false.)
 *  "llama" with ternary projections — HF1BitLLM Llama3-8B-1.58-100B-tokens, tiiuae Falcon3-*-1.58bit,
 *     Falcon-E-* (their config.json: "architectures": ["LlamaForCausalLM"], "model_type": "llama",
 *     "hidden_act": "silu", a "quantization_config" with "quant_method": "bitnet"; llama.cpp's
 *     LLM_ARCH_LLAMA graph and tensor names): per layer
 *       h = x + Wo·Attn(RoPE_NORM(Wq·n), RoPE_NORM(Wk·n), Wv·n),   n = RMSNorm_attn(x)
 *       x' = h + Wdown·(silu(Wgate·m) ⊙ Wup·m),                   m = RMSNorm_ffn(h)
 *     i.e. no sub-norms, output.weight or tied. transformers' BitLinear (integrations/bitnet.py, the
 *     layer these checkpoints load into) quantizes activations per token to int8 by absmax and has no
 *     norm of its own, so the GGUF graph is complete. (Checkpoints fine-tuned with an extra RMSNorm
 *     before every projection — arXiv:2505.08823, a BitLinear option in newer transformers — would need
 *     per-projection norm tensors that llama GGUF files cannot name: not supported, and none of the
 *     models above is one.)
 *
 * RoPE (Su et al. 2021, RoFormer): angle of pair i at position p = p · freq_scale · base^(-2i/d),
 * d = head size. NEOX style rotates the pairs (i, i + d/2) of each head, NORM style the pairs
 * (2i, 2i + 1) (ggml's GGML_ROPE_TYPE_NEOX / normal mode; llama.cpp's llama_rope_type puts BITNET,
 * BITNET_25 and BITNET_B158 in the NEOX group and LLAMA in the NORM group).
 *
 * Q/K row order of "llama" files (what every llama.cpp-style converter writes, bitnet.cpp's included:
 * LlamaModel.permute in convert-hf-to-gguf-bitnet.py / convert_hf_to_gguf.py; any converter of ours
 * must write exactly this). Hugging Face's LlamaAttention rotates with rotate_half, i.e. NEOX pairs
 * (i, i + d/2); the GGUF rows are permuted so that RoPE NORM on the GGUF rows computes the same thing.
 * For attn_q (H = n_head heads) and attn_k (H = n_head_kv heads), d = head size, each head's d rows
 * are interleaved: GGUF row  h·d + 2i + s  =  HF row  h·d + s·(d/2) + i
 * for head h < H, pair i < d/2, s ∈ {0, 1} (numpy: w.reshape(H, 2, d/2, K).swapaxes(1, 2).reshape(H·d, K)).
 * The ternary values and the per-tensor scale are unchanged by this row permutation. attn_v,
 * attn_output and the FFN are not permuted. "bitnet" / "bitnet-b1.58" files are not permuted (NEOX).
 *
 * Keys read: <arch>.block_count, .context_length, .embedding_length, .feed_forward_length,
 * .attention.head_count, .attention.head_count_kv (default head_count), .attention.layer_norm_rms_epsilon,
 * .rope.freq_base (default 10000), .rope.scaling.type ("linear"/"none") and .factor, .rope.dimension_count
 * (must equal the head size: partial RoPE is refused), .attention.key_length / .value_length (head
 * size; default embedding_length / head_count; they must be equal), .vocab_size (default: the length of
 * tokenizer.ggml.tokens; llama.cpp-made files of older converters omit it). A rope_freqs.weight tensor
 * (Llama 3.1 frequency factors) is refused with a message.
 *
 * token_embd.weight / output.weight may be F32, F16, BF16, Q8_0 or Q6_K (published 2B-4T files carry F16
 * or Q6_K, formats.md; converters that keep a checkpoint's dtype write BF16). A Q6_K head is multiplied as
 * float rows (decoded by the format's definition) times the float head input, not as ggml's Q6_K x Q8_K
 * integer product, so its logits can differ from bitnet.cpp's by that rounding. A BF16 head likewise: each
 * value widened exactly to float (the upper half of a binary32), times the float head input, where ggml
 * rounds the input to BF16 first (vec_dot_bf16); bit-identical to an F32 head holding the same values
 * (bitnet_dense_mul_bf16).
 *
 * Ternary weights (I2_S, TL1, TL2) are prepared for one kernel path: TL2 on x86, TL1 on ARM, or the
 * I2_S reference path. F32/F16 projection weights (ternary-valued, e.g. bitnet.cpp's
 * ggml-model-f32.gguf) use a dense float product without activation quantization, so "F32 vs I2_S"
 * comparisons measure the quantization; F16 weights are multiplied as stored, by the input rounded to
 * binary16 (as ggml's F16 product converts its float operand), several tokens per pass over the weights
 * (bitnet_dense_mul_f16). Float math in the forward pass is written so that results do
 * not depend on the thread count or the batch split and match between x86 and ARM builds (fixed
 * summation order, no FMA contraction: the build uses -ffp-contract=off; the F16 dots fuse only exact
 * products of binary16 values). The attention and the F16
 * output head round like ggml's CPU path (Q, softmax probabilities and head input to F16) so greedy ids
 * match bitnet.cpp's. */
#ifndef BITNET_MODEL_H
#define BITNET_MODEL_H

#include "base/common.h"
#include "base/arch.h"
#include "base/gguf.h"
#include "text/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_kernel_path {
    BITNET_PATH_AUTO = 0, /* TL2 on x86-64, TL1 on AArch64, I2_S elsewhere */
    BITNET_PATH_I2S = 1,  /* I2_S reference path (activations int8, dot products on I2_S codes) */
    BITNET_PATH_TL1 = 2,
    BITNET_PATH_TL2 = 3,
    /* Every ternary weight in the layout the file stores (I2_S, TL1 or TL2 of its first projection
     * weight), used in place: nothing is repacked. The choice of bitnet_model_load_memory and of memory-
     * bound builds (a TL1/TL2 file needs its tile record or params.lut_tiles, as on every path). */
    BITNET_PATH_STORED = 4,
} bitnet_kernel_path;

/* bitnet_arch, bitnet_ffn_act, bitnet_rope_type: base/arch.h (one table of architecture names). */

typedef struct bitnet_hparams {
    char arch[32];        /* general.architecture */
    int32_t n_vocab;
    int32_t n_ctx_train;  /* <arch>.context_length */
    int32_t n_embd;
    int32_t n_ff;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t n_embd_head;  /* head size d: attention.key_length, default n_embd / n_head */
    float rope_freq_base;
    float rope_scale;     /* 1 / rope.scaling.factor for "linear" */
    float rms_eps;
    /* added in issue #3 */
    bitnet_arch arch_id;
    bitnet_ffn_act ffn_act;
    bitnet_rope_type rope_type;
    bool sub_norms;       /* attn_sub_norm / ffn_sub_norm present in the graph */
    bool tied_output;     /* no output.weight: the head is token_embd */
    /* added in issue #25 (qwen3, gemma3: docs/EMBEDDINGS.md) */
    bool qk_norm;         /* attn_q_norm / attn_k_norm: RMSNorm of each q and k head before RoPE */
    bool post_norms;      /* post_attention_norm / post_ffw_norm on each block's output */
    bool embd_scale;      /* token embeddings times sqrtf(n_embd) */
    float q_scale;        /* q is multiplied by this before attention (Gemma3: 1/sqrt(head size); else 1) */
    float kq_scale;       /* attention scores q·k times this (1/sqrt(head size); Gemma3: 1) */
    int32_t n_swa;        /* gemma3.attention.sliding_window: keys of a local layer lie within n_swa positions
                             (pos - pos' < n_swa); 0: every layer attends to all earlier positions */
    int32_t swa_period;   /* layer l is local when n_swa > 0 and l % swa_period != swa_period - 1 */
    float rope_freq_base_swa; /* the RoPE base of local layers */
    int32_t pooling;      /* <arch>.pooling_type (bitnet_pooling), BITNET_POOLING_UNSPECIFIED when absent */
    float logit_softcap;  /* gemma3.final_logit_softcapping: logits = c · tanh(logits / c); 0: none */
} bitnet_hparams;

/* How a sequence's token embeddings become one vector (llama.cpp's pooling types and their GGUF values,
 * <arch>.pooling_type; docs/EMBEDDINGS.md §3). */
typedef enum bitnet_pooling {
    BITNET_POOLING_UNSPECIFIED = -1, /* the model's own (its pooling_type key), else NONE */
    BITNET_POOLING_NONE = 0,         /* every token's embedding */
    BITNET_POOLING_MEAN = 1,
    BITNET_POOLING_CLS = 2,          /* the first token's */
    BITNET_POOLING_LAST = 3,         /* the last token's */
} bitnet_pooling;

/* "none", "mean", "cls", "last" → the value; false for anything else. */
bool bitnet_pooling_parse(const char *s, bitnet_pooling *out);
/* The name, "unspecified", or "invalid". */
const char *bitnet_pooling_name(bitnet_pooling p);

/* Whether layer l of a model with these hyperparameters is a sliding-window (local) layer. */
static inline bool bitnet_layer_is_swa(const bitnet_hparams *hp, int32_t l) {
    return hp->n_swa > 0 && l % hp->swa_period != hp->swa_period - 1;
}

typedef struct bitnet_model_params {
    bitnet_kernel_path path;
    const char *lut_table; /* preferred tile table name: "default" (NULL) or "pretuned" */
    /* Output head format (issue #4 item 3): 0 = as stored in the file (exact; the default), or
     * BITNET_TYPE_Q8_0 = requantize the head (output.weight, or token_embd when the head is tied) to
     * Q8_0 rows once at load into a private buffer, ggml's Q8_0 definition per 32-value block:
     * d = max|x| / 127 stored as binary16, q = round(x / d) (bitnet_quantize_row_q8_0). The head input
     * is then quantized to Q8_0 per block and each logit is Σ_blocks (float)(Σ q_w·q_x) · (d_w·d_x), blocks
     * in order (the Q8_0-file path), so it does not depend on the thread count. About half the bytes of
     * an F16 head per token; the logits differ from the stored head's by the two quantization steps.
     * The token-embedding lookup always reads the stored data. A head stored as Q8_0 is used as is.
     * Needs n_embd % 32 == 0 (else BITNET_ERR_UNSUPPORTED); other values → BITNET_ERR_INVALID_ARG. */
    int head_type;
    /* The tiles a TL1/TL2 file was packed with, for files that record none (bitnet.cpp's): a table
     * read by tile_file.h (the tools' --lut-tiles FILE: bitnet.cpp's kernel_config.ini or a
     * configs/-style YAML); NULL: none given. A TL1/TL2 tensor without the bitnet.lut.<tensor>.tiles
     * key is refused unless this table lists its (scheme, M, K); a key that disagrees with the table is
     * refused. Tiles given here that no built kernel has run on the generic kernel. Not used for I2_S
     * weights or for the tiles a weight is repacked to. Read during bitnet_model_load only (not kept). */
    const struct bitnet_tile_file *lut_tiles;
    /* Use every projection weight in place, as stored (what a microcontroller node needs: src/mcu): refuse,
     * naming the tensor, a ternary weight of another layout than the path's or not on the
     * BITNET_WEIGHT_ALIGN boundary (either would be repacked into a copy), F16 projection weights (a node
     * runs ternary or F32 weights only) and head_type Q8_0 (a requantized copy of the head). Always on in the bare-metal build. */
    bool weights_in_place;
    /* A pipeline stage (docs/CLUSTER.md, src/cluster): run only layers [first_layer, first_layer +
     * n_layers) (n_layers 0: through the last layer), and with skip_embd_head neither the token embedding
     * nor output_norm and the head. Tensors of other layers are checked for shape and type but their
     * data is not read, converted or repacked, so a stage's memory is about its share of the file. The
     * stage holding the embedding (skip_embd_head false) must start at layer 0. Zero: the whole model.
     * Errors: a range outside [0, block_count) or empty, or skip_embd_head false with first_layer > 0 →
     * BITNET_ERR_INVALID_ARG naming the values and the layer count. */
    int32_t first_layer;
    int32_t n_layers;
    bool skip_embd_head;
    /* The byte layout of the file's I2_S weights (bitnet_i2s_layout, base/common.h; the tools'
     * --i2s-layout). bitnet.cpp's files do not say which of its three layouts they hold, so: AUTO (0) takes
     * the layout the file records (key BITNET_I2S_LAYOUT_KEY, written by this project's writers), else
     * assumes X86 (bitnet.cpp's x86 build, the official files) and says so in bitnet_model_i2s_note; X86,
     * ARM64 or ROWS4 name it, and a file whose record says another layout is refused naming both. I2_S
     * weights in ARM64 or ROWS4 are rewritten into X86 at load (bitnet_i2s_relayout) into a copy the model
     * owns (M·K/4 + 32 bytes each rounded up to 64, from base/mem.h: the arena of a microcontroller node too, even with
     * weights_in_place, since no kernel reads those layouts), which every kernel path then uses. Files
     * without I2_S weights ignore it. */
    int i2s_layout;
} bitnet_model_params;

typedef struct bitnet_model bitnet_model;

/* Load and validate `path` (GGUF, architecture "bitnet", "bitnet-b1.58", "bitnet-25" or "llama"; see
 * the top of this file and formats.md). params may be NULL (AUTO path, table BITNET_LUT_TABLE_DEFAULT).
 * Errors (message names the file and the key/tensor/value):
 *  - unknown architecture → BITNET_ERR_UNSUPPORTED naming it and listing the supported ones;
 *  - a missing required key or tensor → BITNET_ERR_FORMAT naming it;
 *  - a tensor whose ne disagrees with the hparams → BITNET_ERR_FORMAT naming tensor, actual and
 *    expected ne; an unsupported tensor type → BITNET_ERR_UNSUPPORTED naming tensor and type;
 *  - a tensor the graph does not use (a bias, sub-norms in a "llama" file, a layer beyond block_count,
 *    rope_freqs.weight) → BITNET_ERR_UNSUPPORTED naming it (ignoring it would change the model);
 *  - TL paths: a shape without legal tiles → BITNET_ERR_UNSUPPORTED naming tensor, M and K;
 *  - a TL1/TL2 tensor without a bitnet.lut.<tensor>.tiles key (every file bitnet.cpp writes) that
 *    params->lut_tiles does not list → BITNET_ERR_UNSUPPORTED saying the file records no tile table,
 *    naming the tensor and (M, K) and the two ways out (--lut-tiles with the tiles it was written
 *    with, or the I2_S file); a key that contradicts params->lut_tiles → BITNET_ERR_UNSUPPORTED naming
 *    both; tiles from params->lut_tiles that break the scheme's rules (entries of a kernel_config.ini,
 *    whose scheme is known only here) → BITNET_ERR_INVALID_ARG;
 *  - a TL1/TL2 tensor run on its own path whose recorded tiles differ from every built tile table
 *    (configs/) that lists its shape, and that params->lut_tiles does not confirm →
 *    BITNET_ERR_UNSUPPORTED naming the tensor, both tile sets and the table (the "tiles do not
 *    match the built kernels"); the I2_S path and the other TL path repack such a file and run it.
 *    Shapes no table lists take any legal tiles.
 * Ternary tensors are repacked for the chosen path through bitnet_lut_transform_tensor: a TL1/TL2
 * file's tiles come from its bitnet.lut.<tensor>.tiles keys (LAYOUTS.md §7), else from
 * params->lut_tiles, never from a guess; target tiles from the preferred covering table, else per shape
 * bitnet_lut_tiles_for. Where the tiles came from is part of bitnet_model_kernel_summary (libraries
 * do not print). The file stays mapped until bitnet_model_free. */
bitnet_status bitnet_model_load(const char *path, const bitnet_model_params *params, bitnet_model **out,
                                bitnet_error *err);
/* The same from a GGUF image already in memory (`size` bytes at `image`, which must stay valid and
 * unchanged until bitnet_model_free; tensor data used in place needs the image on a 32-byte boundary):
 * for a model linked into flash or read once into RAM, as the bare-metal build does. `name` names the
 * image in messages. Differences from bitnet_model_load: no vocabulary is loaded (bitnet_model_vocab
 * is NULL; n_vocab comes from <arch>.vocab_size or the length of tokenizer.ggml.tokens), string arrays
 * are not indexed (bitnet_gguf_open_memory's BITNET_GGUF_NO_STRING_INDEX), and every allocation comes
 * from base/mem.h (the arena in use, if any). The bare-metal build also refuses F16 projection weights
 * (weights_in_place). */
bitnet_status bitnet_model_load_memory(const void *image, size_t size, const char *name,
                                       const bitnet_model_params *params, bitnet_model **out, bitnet_error *err);
/* NULL is fine. Releases everything the model holds, its repacked weights in the LUT host's table
 * included (other models keep theirs; the table itself goes with its last entry). */
void bitnet_model_free(bitnet_model *m);

const bitnet_hparams *bitnet_model_hparams(const bitnet_model *m);
const bitnet_vocab *bitnet_model_vocab(const bitnet_model *m);
bitnet_kernel_path bitnet_model_path(const bitnet_model *m); /* the path actually used (AUTO resolved) */
uint64_t bitnet_model_n_params(const bitnet_model *m);    /* elements of every tensor in the file */
uint64_t bitnet_model_size_bytes(const bitnet_model *m);  /* bytes of tensor data in the file */
/* One line describing kernels in use, e.g. "TL2 (avx2): 3 specialized, 0 generic kernels; tiles from
 * table bitnet_b1_58-large/default", "I2_S reference path: 14 ternary weights" or
 * "dense float: 14 weights (no LUT)". Owned by the model. */
const char *bitnet_model_kernel_summary(const bitnet_model *m);
/* The type the output head is multiplied in: the stored type of output.weight / token_embd
 * (BITNET_TYPE_F32, _F16, _BF16, _Q8_0, _Q6_K), or BITNET_TYPE_Q8_0 when requantized at load (head_type). */
int bitnet_model_head_type(const bitnet_model *m);
/* true when the head was requantized at load (bitnet_model_params.head_type), false when stored data is used. */
bool bitnet_model_head_requantized(const bitnet_model *m);
/* The layers a pipeline stage runs, [*first, *end), and whether it holds the embedding and the head. */
void bitnet_model_stage(const bitnet_model *m, int32_t *first, int32_t *end, bool *embd_head);
/* Bytes of the file's tensors this model uses: every tensor for a whole model; a stage's layers (and
 * token_embd, output_norm, output.weight when it holds them). */
uint64_t bitnet_model_stage_bytes(const bitnet_model *m);
/* The layout the model's I2_S weights were read in (BITNET_I2S_LAYOUT_X86, _ARM64 or _ROWS4), or
 * BITNET_I2S_LAYOUT_AUTO when the model (its stage) has none. */
int bitnet_model_i2s_layout(const bitnet_model *m);
/* One sentence on that layout and where it came from, for the tools' load summary: "I2_S layout x86
 * (recorded in the file)", "I2_S layout arm64 (--i2s-layout; the file records none), rewritten to x86 at
 * load (14 tensors, 0.4 MB; ...)", or for a file without a record and no layout asked for "I2_S layout x86
 * (assumed: the file does not record ...)". "" when the model has no I2_S weights. Owned by the model. */
const char *bitnet_model_i2s_note(const bitnet_model *m);
/* "auto", "I2_S", "TL1", "TL2", "stored". */
const char *bitnet_kernel_path_name(bitnet_kernel_path p);

/* Inference state: KV cache (F16) for n_ctx positions, scratch buffers for up to n_batch tokens per
 * call, a thread pool of n_threads. */
typedef struct bitnet_context bitnet_context;

/* The sizes of a context. */
typedef struct bitnet_context_params {
    int32_t n_ctx;     /* positions of the KV cache, [1, 2^24] */
    int32_t n_batch;   /* tokens per forward pass, >= 1 (clamped to n_ctx) */
    int32_t n_threads; /* [1, 1024]; 1 in the bare-metal build */
    int32_t n_logits;  /* rows of logits allocated at creation, [1, n_ctx]: bitnet_decode with all_logits on
                          more tokens grows them (which fails in a sealed arena) */
    int32_t n_seq;     /* sequences with a KV cache of n_ctx positions each (bitnet_decode_batch), [1, 1024]
                          with n_seq · n_ctx <= 2^24; 0 means 1. bitnet_decode works on sequence 0. */
    bool embeddings;   /* every kept token gets its embedding instead of logits: e_t = RMSNorm(x_t) ·
                          output_norm after the last layer (n_embd floats, docs/EMBEDDINGS.md §2; llama.cpp's
                          t_embd), read with bitnet_get_embeddings_ith; the head is not run. */
} bitnet_context_params;

/* Memory: KV cache 2 · n_layer · n_seq · n_ctx · kv_dim F16 values, n_batch rows of activations, the RoPE
 * tables (2 · n_ctx · head_size / 2 floats), per-thread attention scratch, two LUT workspaces and
 * n_logits rows of logits (n_embd floats each with params.embeddings); for the models that need them
 * the per-projection norm copies, the F16 product's rounded input and the local layers' RoPE tables: up to 27
 * buffers, each 64-byte aligned (bitnet_context_arena_bytes counts them).
 * Errors: BITNET_ERR_INVALID_ARG naming the bad value, BITNET_ERR_NOMEM, thread creation errors,
 * BITNET_ERR_UNSUPPORTED when the LUT host refuses a weight's product. The model must outlive it. */
bitnet_status bitnet_context_create_params(bitnet_model *m, const bitnet_context_params *params, bitnet_context **out,
                                           bitnet_error *err);
/* bitnet_context_create_params with n_logits = 1. */
bitnet_status bitnet_context_create(bitnet_model *m, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                    bitnet_context **out, bitnet_error *err);
/* A context's memory by purpose, in bytes as an arena hands them out (each buffer rounded up to 64). */
typedef struct bitnet_context_budget {
    size_t activations;   /* n_batch rows of x, xb, q, k, v, attention output, projection output, gate,
                             up and the head input */
    size_t kv_cache;      /* 2 · n_layer · n_seq · n_ctx · kv_dim F16 values */
    size_t rope_tables;   /* cos and sin of n_ctx · head_size/2 angles (floats) */
    size_t attention;     /* per thread: scores and probabilities (n_ctx floats each), the query, and one
                             head row as floats (Q6_K heads) */
    size_t lut_workspace; /* the two LUT workspaces, each the largest bitnet_mul_mat_get_wsize of a
                             weight for n_batch columns (quantized activations or qlut, and scales) */
    size_t logits;        /* n_logits · n_vocab floats */
    size_t other;         /* the context struct and alignment padding */
    size_t total;         /* the sum */
} bitnet_context_budget;

/* Exactly the bytes bitnet_context_create_params takes from an arena (base/mem.h) whose first free offset
 * is `used`: the context struct and its buffers with their alignment padding (the thread pool is not
 * in the arena), by purpose. The same checks and errors as creation, without allocating. */
bitnet_status bitnet_context_arena_bytes(const bitnet_model *m, const bitnet_context_params *params, size_t used,
                                         bitnet_context_budget *out, bitnet_error *err);
void bitnet_context_free(bitnet_context *c); /* NULL is fine */
int32_t bitnet_context_n_ctx(const bitnet_context *c);
int32_t bitnet_context_n_threads(const bitnet_context *c);
/* What creating the context did about the kernel choice per batch size: a TL2 model (with AVX-512 VNNI) or
 * a TL1/TL2 model repacked from an I2_S file can run a product of N columns with the LUT kernel or an int8
 * kernel (same results; lut_host.h); creation measures on this CPU, with the context's threads, from which N the int8 kernel
 * is faster for each weight shape, or reads that from the cache file of an earlier run
 * (runtime/kchoice.h: BITNET_KERNEL_CACHE, else $XDG_CACHE_HOME/bitnet or ~/.cache/bitnet/kernel-choice.txt),
 * and the model uses it from then on (bitnet_model_kernel_summary shows it). Only a context created while
 * no other context of the model is alive changes the choice (so a model shared by several contexts
 * keeps the first one's), and creating contexts from several threads is safe. One line, or "" when
 * nothing was chosen (another layout, BITNET_LUT_I2S_MIN_COLS set, another context alive, the same thread
 * count as the model's previous choice, the bare-metal build). */
const char *bitnet_context_kernel_choice(const bitnet_context *c);

/* Evaluate n_tokens tokens at positions n_past .. n_past+n_tokens-1 (split into n_batch chunks),
 * writing their keys and values into the KV cache at those positions (later positions are simply
 * overwritten by later calls). Logits of the last token become available through bitnet_get_logits;
 * with all_logits, every position's logits are kept (bitnet_get_logits_ith). A token's logits do not
 * depend on the batch split or the thread count (bit-identical).
 * Errors (BITNET_ERR_INVALID_ARG, state unchanged): n_tokens < 1, a token id out of [0, n_vocab)
 * (names id and index), n_past < 0 or n_past + n_tokens > n_ctx (names all three), a pipeline-stage model
 * that is not stage 0 or has no link ("Pipeline stages" below). With a link, its send/recv errors are
 * returned as they are; the logits are then unavailable until the next successful call. */
bitnet_status bitnet_decode(bitnet_context *c, const int32_t *tokens, int32_t n_tokens, int32_t n_past,
                            bool all_logits, bitnet_error *err);
/* Pipeline stages (src/cluster: one model split into contiguous layer ranges, hidden states passed
 * along a ring). The stage that holds the embedding and the head (stage 0) runs bitnet_decode as usual
 * once a link is set: per batch of n_batch tokens it embeds the tokens, runs its layers and hands the
 * hidden states to link->send; when every batch is sent it takes each batch back from link->recv, in
 * order, after the last stage's layers, and applies output_norm and the head. Sends are not waited for,
 * so later stages work on one batch while this one computes the next. The logits are bit-identical to
 * one process running the whole model: the hidden states cross the link as the same floats. */
typedef struct bitnet_stage_link {
    void *user;
    /* x (n_tokens, n_embd): hidden states of tokens at positions pos0 .. pos0+n_tokens-1 after this stage's
     * layers; the callee copies them before returning. */
    bitnet_status (*send)(void *user, const float *x, int32_t n_tokens, int32_t pos0, bitnet_error *err);
    /* The oldest batch not yet received, after the last stage: x (n_tokens, n_embd). */
    bitnet_status (*recv)(void *user, float *x, int32_t n_tokens, int32_t pos0, bitnet_error *err);
} bitnet_stage_link;

/* Set (or with NULL clear) the link of a stage-0 context; the link must outlive the context's decodes. */
void bitnet_context_set_link(bitnet_context *c, const bitnet_stage_link *link);

/* A stage without the embedding: x (n_tokens, n_embd), the hidden states of tokens at positions n_past ..
 * n_past+n_tokens-1, in place through this model's layers (their K and V stored in the context's cache),
 * in batches of n_batch. Errors (BITNET_ERR_INVALID_ARG, nothing run): the model holds the embedding (use
 * bitnet_decode), n_tokens < 1, n_past < 0 or n_past + n_tokens > n_ctx. */
bitnet_status bitnet_decode_hidden(bitnet_context *c, float *x, int32_t n_tokens, int32_t n_past, bitnet_error *err);

/* Several sequences in one forward pass (continuous batching: prompt chunks of some sequences and single
 * generated tokens of others). Token i is tokens[i] at position pos[i] of sequence seq[i]; its key and
 * value go into that sequence's KV cache at that position, and it attends to positions 0 .. pos[i] of
 * the same sequence (earlier calls' entries and this batch's). With logits[i] true its logits are kept
 * (bitnet_get_logits_ith(c, i)). Every product runs once over all n_tokens columns, and each column's
 * arithmetic is the same as when its sequence runs alone through bitnet_decode (activations are
 * quantized per token, attention reads only the token's own sequence), so a token's logits are
 * bit-identical to a single-sequence run of the same tokens, whatever else is in the batch. */
typedef struct bitnet_batch {
    int32_t n_tokens;     /* [1, n_batch] */
    const int32_t *token; /* (n_tokens) ids in [0, n_vocab) */
    const int32_t *pos;   /* (n_tokens) positions in [0, n_ctx) */
    const int32_t *seq;   /* (n_tokens) sequences in [0, n_seq) */
    const bool *logits;   /* (n_tokens) keep this token's logits; NULL: only the last token's */
} bitnet_batch;

/* Evaluate a batch of tokens of several sequences (bitnet_batch above) in one forward pass. A sequence
 * holds the positions [0, L) its last evaluation ended at (bitnet_decode sets L of sequence 0); a batch
 * continues it at any position p <= L with consecutive positions p, p+1, ... (p < L overwrites: the
 * sequence then holds [0, last + 1)). Errors (BITNET_ERR_INVALID_ARG naming the index and value, nothing
 * run): n_tokens outside [1, n_batch], a token id, position or sequence out of range, a sequence's
 * positions not consecutive in the batch or starting beyond L, a pipeline-stage model or a context with a
 * link; BITNET_ERR_NOMEM. */
bitnet_status bitnet_decode_batch(bitnet_context *c, const bitnet_batch *batch, bitnet_error *err);
int32_t bitnet_context_n_seq(const bitnet_context *c);

/* [n_vocab] logits of the last token of the last bitnet_decode call; NULL before the first call. After a
 * bitnet_decode_batch call: the logits of the batch's last token, NULL when they were not kept. */
const float *bitnet_get_logits(const bitnet_context *c);
/* [n_vocab] logits of the i-th token of the last call (negative i counts from the end); NULL when
 * that token's logits were not kept (call without all_logits: only the last token; bitnet_decode_batch:
 * the tokens with logits[i] false). */
const float *bitnet_get_logits_ith(const bitnet_context *c, int32_t i);

/* [n_embd] embedding e_t of the i-th token of the last call of a context made with params.embeddings
 * (negative i counts from the end), NULL when that token's row was not kept or the context computes
 * logits. The rules of bitnet_get_logits_ith otherwise. */
const float *bitnet_get_embeddings_ith(const bitnet_context *c, int32_t i);

/* Embeddings of n_texts token sequences (text i: tokens[i][0 .. n_tokens[i]-1], as the tokenizer made them:
 * BOS/EOS included as the vocabulary says) through a context made with params.embeddings. Each text is its
 * own sequence at positions 0.., and texts are packed into batches of up to n_batch tokens and n_seq
 * sequences (a text longer than n_batch spans batches), so a text's vector does not depend on the other
 * texts, the batch size or the thread count (bitnet_decode_batch). pooling (UNSPECIFIED: the model's
 * pooling_type, NONE when it has none):
 *   NONE  out (Σ n_tokens[i], n_embd): every token's e_t, texts in order;
 *   MEAN  out (n_texts, n_embd): Σ_t e_t / n (summed in double in token order, then rounded to float);
 *   CLS   out (n_texts, n_embd): e of the first token;  LAST: e of the last token.
 * *used (may be NULL) gets the pooling applied. No normalization (bitnet_embd_normalize).
 * Errors (BITNET_ERR_INVALID_ARG, naming the text and value): a context without params.embeddings, a text
 * with no tokens or more than n_ctx, a token id out of range, an unknown pooling; the decode errors;
 * BITNET_ERR_NOMEM. The cache of every sequence is overwritten. */
bitnet_status bitnet_embed(bitnet_context *c, const int32_t *const *tokens, const int32_t *n_tokens, int32_t n_texts,
                           bitnet_pooling pooling, float *out, bitnet_pooling *used, bitnet_error *err);

/* out (n) = in (n) / s, as llama.cpp's --embd-normalize defines s (docs/EMBEDDINGS.md §3):
 *   norm -1: s = 1 (none);  0: s = max|in_i| / 32760 (the int16 range);  2: s = sqrt(Σ in_i²) (Euclidean);
 *   p > 0: s = (Σ |in_i|^p)^(1/p). Sums in double in index order; a zero vector (s = 0) gives zeros.
 * out may alias in. Returns false (out untouched) for norm < -1. */
bool bitnet_embd_normalize(const float *in, float *out, int32_t n, int norm);

#ifdef __cplusplus
}
#endif

#endif
