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
 *
 * The embedding models (config.json model_type "qwen3" → GGUF "qwen3", "gemma3_text" → "gemma3":
 * BitNet-embedding-0.6B / -270M and their plain Qwen3 / Gemma 3 teachers) follow the file contract of
 * bitnet.cpp's utils/convert-bitnet-embedding-to-gguf.py (docs/EMBEDDINGS.md §1), so its files and these
 * are interchangeable:
 *   - names: model.embed_tokens → token_embd, model.norm → output_norm, per layer input_layernorm →
 *     attn_norm, self_attn.{q,k,v,o}_proj → attn_{q,k,v,output}, self_attn.{q,k}_norm → attn_{q,k}_norm,
 *     mlp.{gate,up,down}_proj → ffn_{gate,up,down}, every <proj>.norm (the BitLinear input RMSNorm) →
 *     <gguf proj>_norm_in (optional, each on its own, as bitnet.cpp's loader has them); Qwen3's
 *     post_attention_layernorm → ffn_norm; Gemma 3's post_attention_layernorm → post_attention_norm,
 *     pre_feedforward_layernorm → ffn_norm, post_feedforward_layernorm → post_ffw_norm. The "model."
 *     prefix is optional (sentence-transformers folders save the bare Qwen3Model / Gemma3TextModel).
 *     lm_head.weight is skipped (no output.weight: these files do not generate); no Q/K row permutation
 *     (RoPE NEOX). Any other tensor is refused by name.
 *   - values: Gemma 3's own norms (attn_norm, post_attention_norm, ffn_norm, post_ffw_norm, output_norm,
 *     attn_q_norm, attn_k_norm) are stored as w + 1 (HF's Gemma3RMSNorm multiplies by 1 + w; added in
 *     float32 before any F16 rounding); the *_norm_in weights are plain RMSNorm weights, stored as they are.
 *     f32 / f16 projections hold the checkpoint's float weights as they are (bitnet.cpp's F32/F16 files:
 *     the latent weights, multiplied in float — not ternarized); i2_s / tl1 / tl2 ternarize them by
 *     absmean (LATENT above: scale = max(mean|W|, 1e-5), w = clamp(round(W / scale), -1, 1)).
 *     quantization_config is not read for these (neither does bitnet.cpp's converter): the weights must be
 *     float. A ternary outtype of a checkpoint without any <proj>.norm weight (a plain, full-precision
 *     Qwen3 / Gemma 3) is refused unless `force`.
 *   - types: f32 every tensor F32; f16 every tensor F16; i2_s (tl1, tl2: this project's) projections
 *     I2_S (TL1, TL2) and every other tensor F16; embd_type sets token_embd's type as for the other archs.
 *   - keys, in bitnet.cpp's order: general.architecture, general.name, A.block_count, A.context_length
 *     (max_position_embeddings, 32768 when absent), A.embedding_length, A.feed_forward_length,
 *     A.attention.head_count, A.attention.head_count_kv, A.vocab_size, A.rope.dimension_count,
 *     A.attention.key_length, A.attention.value_length (all three head_dim), A.rope.freq_base,
 *     A.attention.layer_norm_rms_epsilon, general.file_type, A.pooling_type (bitnet_hf_pooling_load),
 *     [gemma3 with gemma3_swa: gemma3.attention.sliding_window, gemma3.attention.sliding_window_pattern,
 *     gemma3.rope.freq_base_swa], the tokenizer keys (with bitnet_hf_vocab_apply_arch's adjustments:
 *     Qwen3's EOS <|endoftext|> and add_eos_token, Gemma 3's add_space_prefix false), then the I2_S layout
 *     record / TL tiles as above; no general.quantization_version (bitnet.cpp's embedding converter
 *     writes none). Tensor order, key set and types are bitnet_dummy_write's for "qwen3" / "gemma3".
 *   - Gemma 3's sliding-window layers: bitnet.cpp's converter writes no SWA key, so its 270M files attend
 *     globally in every layer with one RoPE base; that is the default here too (interchangeable files).
 *     gemma3_swa writes the three keys from config.json (sliding_window; the period from layer_types or
 *     sliding_window_pattern; rope_local_base_freq), so the runtime runs the local layers as HF does.
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
    /* The embedding models (model_type "qwen3" / "gemma3_text"; zero for the other archs): */
    bool embedding;          /* arch is "qwen3" or "gemma3" */
    int32_t pooling_type;    /* <arch>.pooling_type: 0 none, 1 mean, 2 cls, 3 last (bitnet_hf_pooling_load) */
    int32_t n_swa;           /* gemma3: sliding_window; 0 = none or null */
    int32_t swa_pattern;     /* gemma3: the period p of local/global layers (layer l global iff l % p == p - 1):
                                sliding_window_pattern / _sliding_window_pattern, else 6 (Gemma3TextConfig's
                                default); with layer_types the first of that, its first global layer + 1, 6,
                                n_layer + 1 that it follows; -1 = layer_types follows no such period */
    float rope_freq_base_swa; /* gemma3: rope_local_base_freq (default 10000) */
} bitnet_hf_config;

/* Read and check `dir`/config.json. Sources of the mapping (cited, not copied):
 *  - model_type first (bitnet.cpp's embedding converter decides by it alone): "qwen3" → GGUF "qwen3",
 *    "gemma3_text" → "gemma3" (architectures may then be absent; hf_arch is its first entry or the
 *    model_type). Fields and defaults of transformers' Qwen3Config / Gemma3TextConfig: hidden_act (qwen3)
 *    must be "silu" and hidden_activation (gemma3) "gelu_pytorch_tanh" when given; head_dim defaults to
 *    hidden_size / num_attention_heads (bitnet.cpp's rule; a checkpoint of other shapes is then refused
 *    tensor by tensor); max_position_embeddings 32768 (bitnet.cpp's); rope_theta 10000 (qwen3) / 1e6
 *    (gemma3); rms_norm_eps 1e-6; pooling from modules.json (bitnet_hf_pooling_load); gemma3's SWA fields
 *    (struct above). Refused (BITNET_ERR_UNSUPPORTED, naming the field): another Gemma 3 / Qwen 3
 *    model_type ("gemma3" is the multimodal model with a text_config, "qwen3_moe", ...), rope_scaling,
 *    attention_bias true, qwen3 use_sliding_window true, gemma3 query_pre_attn_scalar != head_dim (the
 *    runtime scales q by 1/sqrt(head_dim), llama.cpp's Gemma 3 rule), a malformed layer_types;
 *  - otherwise architectures[0]:
 *    compared without regard to case (bitnet.cpp rejects "BitNetForCausalLM"):
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

/* The pooling of a sentence-transformers folder, as bitnet.cpp's converter reads it: the first entry of
 * `dir`/modules.json whose "type" ends in "Pooling" names a folder ("path") whose config.json says
 * pooling_mode_mean_tokens (→ 1), pooling_mode_cls_token (→ 2) or pooling_mode_lasttoken (→ 3). 1 (mean)
 * when there is no modules.json, no Pooling entry or no such config.json (bitnet.cpp's default).
 * Errors (the message names the file and the key): BITNET_ERR_FORMAT malformed JSON or ill-typed entries;
 * BITNET_ERR_UNSUPPORTED a pooling the runtime does not have (max, weightedmean, mean_sqrt_len_tokens, or
 * several modes at once: sentence-transformers concatenates them) — bitnet.cpp writes mean for those. */
bitnet_status bitnet_hf_pooling_load(const char *dir, int32_t *pooling_type, bitnet_error *err);

/* Progress of bitnet_convert_hf, after every chunk: tensor_index from 0; bytes are output tensor bytes. */
typedef void (*bitnet_convert_progress_fn)(void *user, int64_t tensor_index, int64_t n_tensors,
                                           const char *tensor_name, uint64_t bytes_done, uint64_t bytes_total);

typedef struct bitnet_convert_params {
    const char *model_dir;      /* config.json, *.safetensors (+ index), tokenizer files */
    const char *outfile;
    bitnet_dummy_outtype outtype;
    int embd_type;              /* token_embd.weight type: 0 → the outtype's default (above);
                                   BITNET_TYPE_F16 (bitnet.cpp's --quant-embd), _Q8_0 or _Q6_K */
    bool force;                 /* ternarize AS_STORED weights that are not ternary; qwen3/gemma3: a ternary
                                   outtype of a checkpoint without <proj>.norm weights (see above) */
    bool gemma3_swa;            /* gemma3: write the sliding-window keys from config.json (see above); refused
                                   for another arch or a config.json without sliding_window */
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
