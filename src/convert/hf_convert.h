/* hf_convert.h — Hugging Face checkpoint (config.json + safetensors + tokenizer files) → BitNet GGUF:
 * the C core of utils/convert-hf-to-gguf-bitnet.py (build/bin/bitnet-convert).
 *
 * What a checkpoint means, and therefore how its projection weights (q/k/v/o, gate/up/down) become
 * ternary values w ∈ {-1, 0, +1} and one scale per tensor, is decided from config.json
 * (bitnet_hf_config_load documents the fields and their sources):
 *
 *   LATENT      full-precision "latent" weights that the model's forward pass ternarizes on the fly
 *               (1bitLLM BitnetForCausalLM, BitNet-b1.58-2B-4T-bf16, quantization_config
 *               {quant_method "bitnet", linear_class "autobitlinear", quantization_mode "online"}):
 *               absmean ternarization per tensor, formats.md "I2_S" and transformers' WeightQuant:
 *               mean = max(mean|W|, 1e-5) (summed in double), s = 1/mean (float32),
 *               w = clamp(round_half_even(W·s), -1, 1), scale = mean (rounded once to float32).
 *               bitnet.cpp computes the same w and stores fl(1/s); that differs from `mean` in the last
 *               bit for some values (e.g. 787/1024), and only `mean` lets every float32 scale survive
 *               a round trip through a checkpoint.
 *   AS_STORED   weights a plain model uses as stored (LlamaForCausalLM without a bitnet
 *               quantization_config): every tensor must already be ternary × one scale, i.e. hold only
 *               the values {-c, 0, +c}; w = sign, scale = c. Anything else (a full-precision model) is
 *               refused, unless `force`, which ternarizes it as LATENT (a different model).
 *   PACKED_DIV  transformers' BitLinear (quantization_config quant_method "bitnet", linear_class
 *               "bitlinear", the default; HF1BitLLM Llama3-8B-1.58, Falcon3-*-1.58bit): weight U8
 *               [ceil(M/4), K], four 2-bit codes per byte, code c → w = c - 1; row r of the unpacked
 *               matrix is packed row r mod R, bits 2·(r div R) .. 2·(r div R)+1 (R = packed rows);
 *               "<name>.weight_scale" holds one number ws and the layer computes y = (w·x) / ws, so
 *               scale = 1 / ws. (transformers integrations/bitnet.py: pack_weights/unpack_weights,
 *               BitLinear.post_quant_process.)
 *   PACKED_MUL  transformers' AutoBitLinear, quantization_mode "offline" (BitNet-b1.58-2B-4T): the
 *               same U8 packing (or the values -1/0/1 stored as floats), y = (w·x) · ws, scale = ws.
 *
 * Codes 3 in packed data, a missing or non-positive weight_scale, or a float value outside {-1,0,1}
 * in an unpacked offline checkpoint are errors naming the tensor and the index.
 *
 * Output (GGUF v3 through the streaming writer: "<out>.tmp" renamed at the end, so a failure never
 * leaves a truncated file; memory is about one projection tensor as int8 plus its packed form):
 *   projections in the asked type (F32 / F16 hold w·scale; I2_S, TL1, TL2 the packed codes and the
 *   scale, LAYOUTS.md §2-4) — never silently another type: a shape the type cannot hold is an error;
 *   norms F32; token_embd F32 by default (for I2_S, as bitnet.cpp's converter followed by its quantizer
 *   produce: F16 when n_embd % 256 == 0 or n_embd % 32 != 0, else Q8_0), or the embd_type asked for
 *   (bitnet.cpp's --quant-embd: F16; also Q8_0 and Q6_K by ggml's reference quantizers, quants.h) in
 *   every outtype but f32, whose files hold every tensor in F32; a type whose block does not divide
 *   n_embd (Q6_K 256, Q8_0 32) is refused, never replaced (llama-quantize falls back to another type
 *   with a warning). An untied output.weight: F32 for f32, for I2_S the n_embd rule above, else F16 —
 *   embd_type does not change it, as llama-quantize's --token-embedding-type (what bitnet.cpp's
 *   setup_env.py passes for --quant-embd) sets token_embd.weight only and output.weight keeps its own
 *   rule unless --output-tensor-type is given. A tied head is token_embd itself, so there the type
 *   also decides the head's bytes per generated token. Tensor order and key set are those of bitnet_dummy_write for the same architecture
 *   (dummy_model.h), so a converted file and a dummy file of the same weights hold identical tensors.
 *   For "llama" the q/k rows are permuted for RoPE NORM as llama.cpp's converters do
 *   (bitnet_hf_rope_permute). TL1/TL2 files record bitnet.lut.<tensor>.tiles, I2_S files their layout
 *   (BITNET_I2S_LAYOUT_KEY = "x86"; LAYOUTS.md §7).
 */
#ifndef BITNET_HF_CONVERT_H
#define BITNET_HF_CONVERT_H

#include "base/common.h"
#include "convert/dummy_model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_hf_weights {
    BITNET_HF_LATENT = 0,
    BITNET_HF_AS_STORED = 1,
    BITNET_HF_PACKED_DIV = 2,
    BITNET_HF_PACKED_MUL = 3,
} bitnet_hf_weights;

const char *bitnet_hf_weights_name(bitnet_hf_weights k); /* "latent", "as-stored", ... */

/* What config.json says, resolved to GGUF terms. */
typedef struct bitnet_hf_config {
    char hf_arch[96];        /* architectures[0] as written */
    char arch[16];           /* GGUF general.architecture: "bitnet", "bitnet-b1.58" or "llama" */
    int32_t n_vocab;         /* vocab_size */
    int32_t n_ctx;           /* max_position_embeddings (default 2048) */
    int32_t n_embd;          /* hidden_size */
    int32_t n_ff;            /* intermediate_size */
    int32_t n_layer;         /* num_hidden_layers */
    int32_t n_head;          /* num_attention_heads */
    int32_t n_head_kv;       /* num_key_value_heads (default n_head) */
    int32_t n_embd_head;     /* head_dim (default n_embd / n_head) */
    float rope_theta;        /* rope_theta (default 10000) */
    float rms_eps;           /* rms_norm_eps (default 1e-6) */
    float rope_scale;        /* rope_scaling.factor of a "linear" rope_scaling; 1 without one */
    int tie_embeddings;      /* tie_word_embeddings: 1 / 0; -1 = not stated (decided by lm_head.weight) */
    bitnet_hf_weights weights;
} bitnet_hf_config;

/* Read and check `dir`/config.json. Sources of the mapping (cited, not copied):
 *  - architectures[0], compared without regard to case (bitnet.cpp rejects "BitNetForCausalLM"):
 *    "BitnetForCausalLM"/"BitNetForCausalLM" → hidden_act "relu2" (transformers BitNetConfig,
 *    BitNet-b1.58-2B-4T: relu²(gate)·up, sub-norms) gives "bitnet-b1.58"; hidden_act "silu" or absent
 *    (1bitLLM bitnet_b1_58-large/3B) gives "bitnet"; "LlamaForCausalLM" (HF1BitLLM Llama3-8B-1.58,
 *    tiiuae Falcon3-*-1.58bit, Falcon-E; model_type "llama") gives "llama" (hidden_act must be silu);
 *  - hyperparameters: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 *    num_key_value_heads, head_dim, max_position_embeddings, rope_theta, rms_norm_eps, vocab_size,
 *    tie_word_embeddings, rope_scaling (transformers LlamaConfig field names and defaults);
 *  - quantization_config (transformers BitNetQuantConfig: quant_method "bitnet", linear_class
 *    "bitlinear" | "autobitlinear", quantization_mode "offline" | "online", use_rms_norm) → weights.
 * Errors (message names dir/config.json and the field): BITNET_ERR_IO missing/unreadable file;
 * BITNET_ERR_FORMAT malformed JSON, missing or ill-typed field, inconsistent sizes (hidden_size not a
 * multiple of the heads without head_dim, heads not a multiple of KV heads, odd head size);
 * BITNET_ERR_UNSUPPORTED unknown architecture (named, with the known ones), another hidden_act,
 * rope_scaling other than "linear", another quant_method, use_rms_norm = true (an RMSNorm inside
 * BitLinear that no GGUF key can express). */
bitnet_status bitnet_hf_config_load(const char *dir, bitnet_hf_config *out, bitnet_error *err);

/* Progress of bitnet_convert_hf, after every chunk: tensor_index from 0; bytes are output tensor bytes. */
typedef void (*bitnet_convert_progress_fn)(void *user, int64_t tensor_index, int64_t n_tensors,
                                           const char *tensor_name, uint64_t bytes_done, uint64_t bytes_total);

typedef struct bitnet_convert_params {
    const char *model_dir;      /* config.json, *.safetensors (+ index), tokenizer files */
    const char *outfile;
    bitnet_dummy_outtype outtype;
    int embd_type;              /* token_embd.weight type: 0 → the outtype's default (above);
                                   BITNET_TYPE_F16 (bitnet.cpp's --quant-embd), _Q8_0 or _Q6_K */
    bool force;                 /* ternarize AS_STORED weights that are not ternary (see above) */
    const char *name;           /* general.name; NULL → the folder's base name */
    /* TL1/TL2 tiles per shape; shapes not listed take the tiles of the built-in table that covers the
     * model (preferring table `lut_table`), else bitnet_lut_tiles_for's rules — i.e. the tiles the
     * kernels of this build were generated for. Listing a shape the model does not have is an error. */
    const bitnet_dummy_shape_tiles *tiles;
    size_t n_tiles;
    const char *lut_table;      /* "default" (NULL) or "pretuned" */
    bitnet_convert_progress_fn progress; /* may be NULL */
    void *progress_user;
    size_t chunk_bytes;         /* float elements ×4 per streamed chunk; 0 → 8 MiB */
} bitnet_convert_params;

void bitnet_convert_params_init(bitnet_convert_params *p); /* zeros, outtype I2_S */

/* Convert p->model_dir into p->outfile. On success *summary (may be NULL) receives a one-line
 * description (architecture, weights kind, outtype, tensor count, tile source), owned by the caller
 * (free()). Errors name the file, tensor, key, shape or value:
 *   everything bitnet_hf_config_load, bitnet_st_open and bitnet_hf_vocab_load report;
 *   BITNET_ERR_FORMAT: a missing tensor (HF and GGUF name), a tensor of the wrong shape (actual and
 *     expected), a tensor the graph has no place for (e.g. a bias), vocab_size != embedding rows,
 *     non-ternary AS_STORED weights without force (tensor, two distinct magnitudes), packed code 3;
 *   BITNET_ERR_UNSUPPORTED: a dtype that cannot be converted, a projection shape the output type cannot
 *     hold (I2_S: M·K % 128, TL1/TL2: no legal tiles), an embd_type whose block does not divide n_embd
 *     (token_embd.weight, n_embd and the block size named);
 *   BITNET_ERR_INVALID_ARG: tiles breaking a rule or naming a shape the model does not have, an
 *     embd_type other than 0/F16/Q8_0/Q6_K, or one with outtype f32;
 *   BITNET_ERR_IO: writing the output (the temporary file is removed). */
bitnet_status bitnet_convert_hf(const bitnet_convert_params *p, char **summary, bitnet_error *err);

/* ---- Pieces, exposed for tests -------------------------------------------------------------- */

/* Absmean ternarization of n floats (LATENT above): w[n] and *scale = max(mean|W|, 1e-5) as float32,
 * or 0 when every w is 0. NaN weights count as 0 in the mean and give w = 0. */
void bitnet_hf_ternarize(const float *W, int64_t n, int8_t *w, float *scale);

/* AS_STORED: w = sign(W), *scale = c when every nonzero |W| equals one c; false otherwise (then
 * *bad_index is the first element whose magnitude differs from the first nonzero one, or is NaN/inf). */
bool bitnet_hf_exact_ternary(const float *W, int64_t n, int8_t *w, float *scale, int64_t *bad_index);

/* Unpack transformers' 2-bit layout: packed [R, K] bytes (R = M / 4) → w [M, K] (row-major).
 * BITNET_ERR_FORMAT naming `what` and the packed row/column on a code 3; M % 4 != 0 → INVALID_ARG. */
bitnet_status bitnet_hf_unpack_2bit(const uint8_t *packed, int64_t M, int64_t K, int8_t *w, const char *what,
                                    bitnet_error *err);

/* llama.cpp's q/k row permutation for RoPE NORM: for each of n_head heads of d = M / n_head rows,
 * HF row h·d + j·(d/2) + i (the "rotate half" order, j ∈ {0,1}) becomes GGUF row h·d + 2·i + j
 * (adjacent pairs). src and dst are [M, K] int8, distinct. M % n_head and d % 2 must be 0 (checked by
 * the caller). Source: llama.cpp convert_hf_to_gguf.py LlamaModel.permute (reshape(n_head, 2, d/2, K)
 * .swapaxes(1, 2)); for attn_k n_head is the KV head count. */
void bitnet_hf_rope_permute(const int8_t *src, int64_t M, int64_t K, int32_t n_head, int8_t *dst);

#ifdef __cplusplus
}
#endif

#endif
