/* model_internal.h — private to src/model/: the structs the loader, the context and the forward pass
 * share (a projection weight, a layer, the model, the context, one forward batch), the size bounds, and
 * the functions one file of src/model/ calls in another:
 *   arch.c      architecture traits and hyperparameters (GGUF keys → bitnet_hparams)
 *   load.c      GGUF tensors → weights, the output head's type and kernel, bitnet_model_load / free
 *   load_lut.c  ternary weights handed to the LUT host: tiles from the file, the user or the built
 *               tables, repacking to the kernel path, the kernel summary
 *   context.c   the context (KV cache, scratch, RoPE tables, thread pool) and the decode API
 *   forward.c   the forward pass of one batch (norms, projections, RoPE, attention, FFN, head) */
#ifndef BITNET_MODEL_INTERNAL_H
#define BITNET_MODEL_INTERNAL_H

#include "model/model.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "base/quants.h"
#include "kernels/dense/dense.h"
#include "runtime/lut_host.h"
#include "runtime/threadpool.h"
#include "tilefile/tile_file.h"

/* Upper bounds that keep every size computation far from overflow; real models are far below. */
#define MAX_LAYERS 4096
#define MAX_DIM (1 << 20)      /* n_embd, n_ff */
#define MAX_VOCAB (1 << 24)
#define MAX_CTX (1 << 24)

/* A projection weight: a ternary tensor on the LUT host path, or a dense float matrix (F32/F16
 * files) multiplied in float without activation quantization. */
typedef struct weight {
    bitnet_tensor t;       /* name, type, shape; for the LUT path the host's extra is attached here */
    bool lut;              /* true: bitnet_mul_mat; false: dense float */
    const float *dense;    /* dense F32: [M][K] row-major (file mapping or dense_owned), or NULL */
    const uint16_t *dense_f16; /* dense F16: [M][K] binary16 rows in the file mapping, or NULL */
    float *dense_owned;
    uint8_t *i2s_owned;    /* I2_S bytes rewritten into the X86 layout at load (t.data points here), or NULL */
    int64_t M, K;
    bool has_scale;        /* blk.N.<proj>.scale present: output multiplied by out_scale */
    float out_scale;
} weight;

/* Norm weights point into the file (F32) or at a float copy listed in bitnet_model.vec_owned (F16). */
typedef struct layer {
    const float *attn_norm;     /* [n_embd] */
    const float *attn_sub_norm; /* [q_dim]; NULL without sub-norms ("llama") */
    const float *ffn_norm;      /* [n_embd] */
    const float *ffn_sub_norm;  /* [n_ff]; NULL without sub-norms */
    const float *attn_q_norm;   /* [head size]; NULL without QK head norms (qwen3, gemma3 have them) */
    const float *attn_k_norm;   /* [head size] */
    const float *post_attn_norm; /* [n_embd]; NULL without post-norms (gemma3 has them) */
    const float *post_ffw_norm; /* [n_embd] */
    const float *norm_in[7];    /* per projection in layer_proj order: the RMSNorm weight applied to its input
                                   ([its K]), or NULL (BitNet embedding models' <proj>_norm_in) */
    weight wq, wk, wv, wo; /* [n_embd → q_dim], [n_embd → kv_dim] ×2, [q_dim → n_embd] */
    weight w_gate, w_up;   /* [n_embd → n_ff] */
    weight w_down;         /* [n_ff → n_embd] */
} layer;

#define N_PROJ 7
/* Norm weights a layer can hold (attn, ffn, 2 sub-norms, 2 QK norms, 2 post-norms, 7 norm_in). */
#define VEC_PER_LAYER 15

struct bitnet_model {
    bitnet_gguf *gguf;
    bitnet_vocab *vocab;
    bitnet_hparams hp;
    int32_t q_dim;                          /* n_head · n_embd_head (= n_embd unless key_length says otherwise) */
    int32_t kv_dim;                         /* n_head_kv · n_embd_head */
    bitnet_kernel_path path;
    const bitnet_gguf_tensor_info *embd;    /* token_embd.weight [n_embd, n_vocab] */
    const bitnet_gguf_tensor_info *head;    /* output.weight if present, else token_embd */
    size_t embd_row_bytes, head_row_bytes;  /* head_row_bytes: rows of head_data in head_type */
    int head_type;                          /* type the head is multiplied in (stored or Q8_0) */
    const bitnet_dense_kernel *head_kernel; /* the dense kernel of head_type's dense_dot_type (types.h) */
    bool head_decode;                       /* head rows go through bitnet_row_to_f32 first (Q6_K) */
    const uint8_t *head_data;               /* [n_vocab] rows: the file's data or head_owned */
    bitnet_block_q8_0 *head_owned;          /* head requantized to Q8_0 at load, or NULL */
    const float *output_norm;               /* [n_embd] */
    layer *layers;                          /* [n_layer]; only [l_begin, l_end) loaded, the others zero */
    int32_t l_begin, l_end;                 /* the layers this model runs (a pipeline stage: model.h) */
    bool io;                                /* token_embd, output_norm and the head are used (stage 0) */
    float *gelu_f16;                        /* [65536] GELU of every binary16 code, rounded to binary16 (GELU
                                               models only, else NULL; load.c gelu_table) */
    bool has_dense_f16;                     /* a layer this model runs has an F16 projection weight */
    int64_t max_k;                          /* the largest projection input width (n_embd, q_dim, n_ff) */
    bool has_norm_in;                       /* a layer this model runs has a <proj>_norm_in tensor */
    uint64_t stage_bytes;                   /* bytes of the file's tensors this model uses */
    float **vec_owned;                      /* [VEC_PER_LAYER·n_layer + 1]: the float copies of F16 norm weights */
    int32_t n_vec_owned;
    uint64_t n_params, size_bytes;
    bool lut_used;                          /* weights were handed to the LUT host */
    int i2s_layout;                         /* the layout the I2_S weights were read in; AUTO: none (load_lut.c) */
    char i2s_note[384];                     /* bitnet_model_i2s_note */
    char summary[512];
    size_t summary_lut_len;                 /* the LUT part of summary; the batch part follows (load_lut.c) */
    char summary_tail[160];                 /* what follows: the dense part, then the head's (load.c) */
    int kchoice_threads;                    /* thread count of the last choice; 0: none */
    atomic_int kchoice_state;               /* 0 never chosen, 1 being chosen, 2 chosen (load_lut.c) */
    atomic_int n_contexts;                  /* contexts alive on this model */
};

/* Rewrite the batch part of m->summary from the thresholds in the weights' extras (after
 * bitnet_model_choose_kernels changed them). */
void bitnet_model_summary_batch(bitnet_model *m);

/* Replace the transform-time int8 thresholds of m's TL1/TL2 weights that have an int8 path by the
 * crossover measured on this CPU with tp's thread count (runtime/kchoice.h), per (layout, shape, tiles):
 * read from the cache file when it holds the key, else measured (on private copies of the weights) and
 * recorded. Only a context created while no other context of m is alive (`alone`) changes them, so no
 * product of m runs meanwhile; a creator that finds another thread choosing waits for it. Nothing
 * happens when the threshold is fixed (bitnet_lut_i2s_min_cols_fixed), under an arena, when m has no such weights, when
 * the last choice used the same thread count, or in the bare-metal build. A measurement that fails
 * leaves the thresholds as they are and says so in the note (speed only: not an error). note (cap
 * bytes; may be NULL): one line saying what was done, or "". Errors: BITNET_ERR_NOMEM. */
bitnet_status bitnet_model_choose_kernels(bitnet_model *m, bitnet_threadpool *tp, bool alone, char *note, size_t cap,
                                          bitnet_error *err);

static inline weight *layer_proj(layer *L, int i) {
    weight *w[N_PROJ] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return w[i];
}

/* The state of one bitnet_model_load call: the file, its architecture name (the key prefix) and the
 * caller's error. */
typedef struct loader {
    const char *path;
    bitnet_gguf *g;
    char arch[32];
    bitnet_error *err;
    bool in_place;  /* bitnet_model_params.weights_in_place (or the bare-metal build) */
    bool check_only; /* a tensor of another pipeline stage: shape and type checked, data not touched */
} loader;

/* arch.c: general.architecture → the graph facts, then every hyperparameter from the <arch>.* keys
 * (ranges and defaults: model.h); fills ld->arch. Errors name the file and the key. */
bitnet_status bitnet_model_load_hparams(loader *ld, bitnet_hparams *hp);

/* arch.c: <arch>.<suffix> as an integer in [lo, hi] into *out; absent: dflt, or an error when required. */
bitnet_status bitnet_model_int_key(loader *ld, const char *suffix, bool required, int64_t dflt, int64_t lo,
                                   int64_t hi, int32_t *out);

/* load_lut.c: the layout of the file's I2_S weights (params.i2s_layout against the file's record; rules
 * in model.h), checked for every I2_S weight of m's layers, those in another layout than X86 rewritten
 * into X86 copies (weight.i2s_owned), and m->i2s_layout and m->i2s_note set. Before
 * bitnet_model_prepare_lut_weights. */
bitnet_status bitnet_model_read_i2s_layout(loader *ld, bitnet_model *m, int requested);

/* load_lut.c: every ternary weight of m handed to the LUT host for m->path with its tiles, then
 * m->summary written (rules: bitnet_model_load in model.h). */
bitnet_status bitnet_model_prepare_lut_weights(loader *ld, bitnet_model *m, const char *table_name,
                                               const bitnet_tile_file *user);

struct bitnet_context {
    bitnet_model *m;
    int32_t n_ctx, n_batch, n_threads;
    int32_t n_seq;           /* sequences, each with n_ctx cache positions */
    size_t kv_rows;          /* n_seq · n_ctx: cache rows per layer and kv head (sequence s, position p at
                                s · n_ctx + p) */
    bitnet_threadpool *tp;
    char kchoice_note[384];  /* bitnet_model_choose_kernels' line at creation, or "" */
    bool counted;            /* counted in m->n_contexts */

    /* activations of one batch of up to n_batch tokens, row t = token t */
    float *x;        /* (n_batch, n_embd) residual stream */
    float *xb;       /* (n_batch, n_embd) normed input of a projection */
    float *q;        /* (n_batch, q_dim) queries */
    float *k, *v;    /* (n_batch, kv_dim) keys, values of this batch */
    float *att;      /* (n_batch, q_dim) attention output, heads concatenated */
    float *proj;     /* (n_batch, n_embd) output of attn_output / ffn_down */
    float *hb, *hb2; /* (n_batch, n_ff) gate and up */
    float *act16;    /* (n_batch, max_k) a dense F16 product's input rounded to binary16 (F16 models only) */
    float *xn[3];    /* (n_batch, n_embd) each: the inputs of q, k, v (gate, up) after their norm_in
                        (allocated only for models with norm_in tensors; else NULL) */

    uint16_t *kcache; /* (n_layer, n_head_kv, kv_rows, head_size) F16 keys: a kv head's keys of consecutive
                         positions are contiguous, so the attention reads them as one stream */
    uint16_t *vcache; /* (n_layer, n_head_kv, kv_rows, head_size) F16 values, laid out as the keys; the
                         attention sums each channel down its column (bitnet_dense_dot_f16_columns) */
    size_t kv_bytes;  /* bytes of each of kcache and vcache */
    bool kv_mapped[2]; /* kcache, vcache came from bitnet_zeroed_alloc as mappings (pages committed when
                          first written, so a short sequence costs only the rows it reached) */

    float *rope_cos, *rope_sin; /* (n_ctx, n_embd_head/2) */

    float *att_scores;  /* (n_threads, G, n_ctx) per-thread scratch, G = n_head / n_head_kv (the query heads
                           of one kv head, attended together) */
    float *att_p;       /* (n_threads, G, n_ctx) softmax probabilities rounded to F16 */
    float *att_q;       /* (n_threads, G, n_embd_head) queries rounded to F16 */

    uint8_t *head_act;  /* (n_batch) rows of head_act_bytes: the head input in the head kernel's format
                           (F32 copy, floats rounded to F16, or Q8_0 blocks; bitnet_dense_kernel.prepare) */
    size_t head_act_bytes;
    float *head_row;    /* (n_threads, n_embd) one head row as float (head_decode: Q6_K head) */

    void *wdata[2]; /* two LUT host workspaces, wsize bytes each, 64-byte aligned: consecutive products
                       alternate between them (forward pass, "Barriers") */
    size_t wsize;

    float *logits;        /* (logits_cap, out_width): logits, or embeddings (params.embeddings) */
    int32_t out_width;    /* n_vocab, or n_embd with params.embeddings */
    bool embeddings;      /* params.embeddings */
    float *rope_cos_swa, *rope_sin_swa; /* (n_ctx, n_embd_head/2) tables of the local layers' RoPE base, or
                                           the same pointers as rope_cos / rope_sin when it is the same base */
    int32_t logits_cap;   /* rows allocated */
    int32_t n_last;       /* tokens in the last bitnet_decode call */
    bool all_last;        /* the last call kept every token's logits */
    int32_t *out_row;     /* (out_cap) after bitnet_decode_batch (batch_last): token i's logits row or -1 */
    int32_t *seq_len;     /* (n_seq), from the first bitnet_decode_batch: positions each sequence holds */
    int32_t out_cap;
    bool batch_last;      /* the last call was bitnet_decode_batch */
    const bitnet_stage_link *link; /* stage 0 of a pipeline: where the hidden states go and come back */
};

/* One batch of the forward pass (bitnet_decode splits its tokens into batches of n_batch). */
typedef struct fwd_job {
    bitnet_context *c;
    const int32_t *tokens; /* (n) token ids to embed; NULL: c->x already holds the batch's hidden states */
    int32_t n;             /* tokens in this batch */
    int32_t pos0;          /* position of tokens[0] (pos NULL) */
    const int32_t *pos;    /* (n) per-token positions, or NULL: pos0 + t */
    const int32_t *seq;    /* (n) per-token sequences, or NULL: sequence 0 */
    int32_t out_first;     /* logits for tokens out_first .. out_first+n_out-1 of the batch (out_row NULL) */
    const int32_t *out_row; /* (n) per-token logits row or -1, or NULL: out_first .. out_first+n_out-1 */
    int32_t n_out;
    float *logits;         /* (n_out, n_vocab), or (n_out, n_embd) embeddings when c->embeddings */
    bool layers;           /* run the model's layers [l_begin, l_end) */
    bool head;             /* then output_norm and the head for the n_out tokens (else x is the result) */
} fwd_job;


/* forward.c: the forward pass of one batch as a thread-pool task (arg: a fwd_job). */
void bitnet_model_forward_task(void *arg, int ith, int nth);

#endif
