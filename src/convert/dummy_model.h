/* dummy_model.h — writes dummy BitNet models: GGUF files of architecture "bitnet" (formats.md
 * "Architecture bitnet", the key set, key order, key types and tensor names of the files bitnet.cpp
 * writes), "bitnet-b1.58" / "bitnet-25" (BitNet-b1.58-2B-4T's graph), "llama" (ternary Llama 3 /
 * Falcon3 / Falcon-E), or the embedding models' "qwen3" / "gemma3" (BitNet-embedding-0.6B / -270M and
 * their plain teacher layouts; docs/EMBEDDINGS.md §1), filled with seeded pseudo-random weights, for
 * benchmarks and tests. The key and tensor sets of each architecture are listed at bitnet_dummy_write;
 * the graph each one means is documented in model.h.
 *
 * What the weights are (all of it reproducible from the seed, identical on every ISA):
 * - PRNG: rng.h; splitmix64 derives seeds, xoshiro256** (bitnet_rng) produces the stream. Each tensor
 *   has its own stream, seeded from (seed, tensor name) only, so a tensor's values do not depend on
 *   the output type, the architecture, on the other tensors or on the order they are written in.
 * - Ternary projections (attn_q/k/v/output, ffn_gate/up/down): w ∈ {-1, 0, +1}, each value with
 *   probability exactly 1/3, independent; one scale per tensor, drawn uniformly from
 *   {768, 769, ..., 895} / 1024 ∈ [0.75, 0.875) (about the 0.8 of bitnet.cpp's own random models; every
 *   such value is exact in F16, so F32, F16, I2_S, TL1 and TL2 files of one seed hold the same model).
 *   F32/F16 files store w·scale; I2_S/TL1/TL2 files store the packed codes and the scale.
 *   The values are the GGUF rows as stored: for "llama" that is attn_q/attn_k AFTER the converters'
 *   RoPE row permutation (model.h), so an HF checkpoint holding the same model has them un-permuted.
 * - token_embd (and output.weight when written): z ~ N(0, 1) approximated by the Irwin-Hall sum of 12
 *   uniforms minus 6 (no libm, so identical bits everywhere). Stored as F32 for outtype f32; for the
 *   other outtypes F16 when n_embd % 256 == 0, else Q8_0 (what bitnet.cpp's quantize does, formats.md;
 *   "qwen3"/"gemma3": F16 for every n_embd, as bitnet.cpp's embedding converter writes it),
 *   or token_embd in the type embd_type asks for (F16, Q8_0 or Q6_K by ggml's reference quantizers,
 *   quants.h; output.weight keeps the rule, as llama-quantize's --token-embedding-type leaves it).
 * - Norm weights (attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm, output_norm): 1 + 0.1·z, F32.
 *   "qwen3" / "gemma3" (also attn_q_norm, attn_k_norm, post_attention_norm, post_ffw_norm and the
 *   <proj>_norm_in weights): 1 + 0.1·z rounded to the nearest F16 value, stored as F32 in f32 files and
 *   F16 in every other outtype (bitnet.cpp's embedding converter), so the f32, f16 and i2_s files of
 *   one seed hold the same norms.
 *
 * Memory: bounded by the largest tensor. Weights are generated and written in chunks of rows
 * (8 MiB of int8 values by default); only TL2, whose three streams each run over the whole tensor,
 * keeps one whole packed tensor (about M·K/4.8 bytes) while its tiles are packed. The file goes
 * through the streaming GGUF writer (gguf.h), so a failure never leaves a truncated file behind. */
#ifndef BITNET_DUMMY_MODEL_H
#define BITNET_DUMMY_MODEL_H

#include "base/common.h"
#include "base/gguf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_dummy_outtype {
    BITNET_DUMMY_F32 = 0,  /* general.file_type 0 */
    BITNET_DUMMY_F16 = 1,  /* 1 */
    BITNET_DUMMY_I2_S = 2, /* 40 */
    BITNET_DUMMY_TL1 = 3,  /* 38 */
    BITNET_DUMMY_TL2 = 4,  /* 39 */
} bitnet_dummy_outtype;

/* Architecture of the written file (general.architecture): a row number of the table in base/arch.c
 * (bitnet_arch_at); the constants name the rows of the architectures tests refer to. A row added to
 * that table is accepted by name (bitnet_dummy_arch_parse) without a constant here. The graphs are
 * described in model.h. */
typedef enum bitnet_dummy_arch {
    BITNET_DUMMY_ARCH_BITNET = 0,      /* "bitnet": bitnet.cpp's own files (bitnet_b1_58-large/3B layout) */
    BITNET_DUMMY_ARCH_BITNET_B158 = 1, /* "bitnet-b1.58": BitNet-b1.58-2B-4T (relu² FFN, sub-norms) */
    BITNET_DUMMY_ARCH_BITNET_25 = 2,   /* "bitnet-25": bitnet.cpp's older name of the same graph */
    BITNET_DUMMY_ARCH_LLAMA = 3,       /* "llama": ternary Llama 3 / Falcon3 / Falcon-E (no sub-norms) */
    BITNET_DUMMY_ARCH_QWEN3 = 4,       /* "qwen3": BitNet-embedding-0.6B (QK head norms, <proj>_norm_in) */
    BITNET_DUMMY_ARCH_GEMMA3 = 5,      /* "gemma3": BitNet-embedding-270M (also post-norms; optional SWA keys) */
} bitnet_dummy_arch;

/* bitnet_dummy_params.pooling_type: the <arch>.pooling_type value to write plus one, so that the zero of a
 * cleared struct means "the default" (3, last token: what both BitNet-embedding models use). */
enum {
    BITNET_DUMMY_POOLING_DEFAULT = 0, /* writes 3 (last) */
    BITNET_DUMMY_POOLING_NONE = 1,    /* writes 0 */
    BITNET_DUMMY_POOLING_MEAN = 2,    /* writes 1 */
    BITNET_DUMMY_POOLING_CLS = 3,     /* writes 2 */
    BITNET_DUMMY_POOLING_LAST = 4,    /* writes 3 */
};
/* "none", "mean", "cls", "last" → BITNET_DUMMY_POOLING_NONE .. _LAST (exactly, lower case). */
bool bitnet_dummy_pooling_parse(const char *s, int32_t *out);

/* A name of base/arch.c's table ("bitnet", "bitnet-b1.58", ...; exactly: GGUF names are case sensitive). */
bool bitnet_dummy_arch_parse(const char *s, bitnet_dummy_arch *out);
const char *bitnet_dummy_arch_name(bitnet_dummy_arch a); /* "invalid" for a value outside the table */

/* "f32", "f16", "i2_s", "tl1", "tl2" (also upper case). false for anything else. */
bool bitnet_dummy_outtype_parse(const char *s, bitnet_dummy_outtype *out);
const char *bitnet_dummy_outtype_name(bitnet_dummy_outtype t);
/* --quant-embd values: "f16", "q8_0", "q6_k" (also upper case) → BITNET_TYPE_F16 / _Q8_0 / _Q6_K.
 * false for anything else. */
bool bitnet_dummy_embd_type_parse(const char *s, int *type);

/* Whether token_embd.weight [n_embd, n_vocab] can be stored as `type` (0: the outtype's default, always
 * fine) in a file of outtype `o`, shared by the dummy writer and the HF converter:
 * BITNET_ERR_INVALID_ARG for a type other than F16, Q8_0, Q6_K or for outtype f32 (whose files hold
 * every tensor in F32); BITNET_ERR_UNSUPPORTED when n_embd is not a multiple of the type's block
 * (Q6_K 256, Q8_0 32; ggml's block sizes) — never another type instead. Messages name the tensor,
 * the type, n_embd and the block size. */
bitnet_status bitnet_dummy_embd_type_check(bitnet_dummy_outtype o, int type, int64_t n_embd, bitnet_error *err);

/* GGUF tensor type id of the ternary projections (F32 0, F16 1, I2_S 36, TL1 38, TL2 39), and the
 * general.file_type value (0, 1, 40, 38, 39). -1 for an invalid outtype. */
int bitnet_dummy_ternary_type(bitnet_dummy_outtype t);
int bitnet_dummy_file_type(bitnet_dummy_outtype t);

/* Tiles of one ternary weight shape (M rows = outputs, K columns = inputs), LAYOUTS.md §3-4. */
typedef struct bitnet_dummy_shape_tiles {
    int64_t M, K;
    bitnet_tiles tiles;
} bitnet_dummy_shape_tiles;

/* A vocabulary to store under tokenizer.ggml.*. All arrays have n_tokens entries.
 * Vocabularies returned by bitnet_dummy_vocab_builtin / bitnet_dummy_vocab_from_gguf own their memory
 * (free with bitnet_dummy_vocab_free); a caller may also fill one with pointers of its own. */
typedef struct bitnet_dummy_vocab {
    const char *model;          /* tokenizer.ggml.model; NULL → "llama" (SentencePiece-style) */
    const char *pre;            /* tokenizer.ggml.pre; NULL → "default"; "" → key omitted */
    int32_t n_tokens;
    const char *const *tokens;  /* UTF-8, NUL-terminated */
    const float *scores;        /* NULL → key omitted (BPE vocabularies have none) */
    const int32_t *types;       /* enum bitnet_token_type values; NULL → key omitted */
    uint64_t n_merges;          /* BPE merges ("a b"), copied when present; 0 → key omitted */
    const char *const *merges;
    int32_t bos_id, eos_id;     /* -1 → key omitted */
    int32_t pad_id;             /* -1 → key omitted */
    void *owned_;               /* private: storage of library-made vocabularies */
} bitnet_dummy_vocab;

/* Progress of bitnet_dummy_write: called after every chunk written. tensor_index counts from 0;
 * bytes are tensor data bytes (the file is slightly larger: header and padding). */
typedef void (*bitnet_dummy_progress_fn)(void *user, int64_t tensor_index, int64_t n_tensors,
                                         const char *tensor_name, uint64_t bytes_done, uint64_t bytes_total);

typedef struct bitnet_dummy_params {
    const char *name;           /* general.name; NULL → "bitnet-dummy" */
    int32_t n_embd;             /* hidden size */
    int32_t n_ff;               /* FFN size */
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;          /* 0 → n_head */
    int32_t n_ctx;              /* bitnet.context_length; 0 → 2048 */
    float rope_freq_base;       /* 0 → 10000 */
    float rms_eps;              /* 0 → 1e-5 */
    const bitnet_dummy_vocab *vocab; /* NULL → the built-in vocabulary of n_vocab tokens */
    int32_t n_vocab;            /* built-in vocabulary size; 0 → 32002 (bitnet.cpp's dummy models) */
    bitnet_dummy_outtype outtype;
    /* TL1/TL2 tiles per shape. A shape not listed gets the default tile rule
     * (bitnet_lut_default_tiles, the rule of `python3 -m codegen derive`). Ignored for other outtypes. */
    const bitnet_dummy_shape_tiles *tiles;
    size_t n_tiles;
    uint64_t seed;
    bitnet_dummy_progress_fn progress; /* may be NULL */
    void *progress_user;
    size_t chunk_bytes;         /* target int8 bytes per generated chunk; 0 → 8 MiB (tests use tiny ones) */
    /* Added for issue #3 (zero = the issue #2 behaviour, byte for byte): */
    bitnet_dummy_arch arch;     /* BITNET_DUMMY_ARCH_BITNET (0) by default */
    bool output_separate;       /* also write output.weight (an untied head); false: the head is token_embd */
    int32_t n_embd_head;        /* head size d; 0 → n_embd / n_head. Any other value is written as
                                   <arch>.attention.key_length and .value_length (not for "bitnet") */
    bool no_tile_record;        /* TL1/TL2: leave out the bitnet.lut.<tensor>.tiles keys, as bitnet.cpp's
                                   writers do (to test how the runtime treats such files) */
    bool no_layout_record;      /* I2_S: leave out the BITNET_I2S_LAYOUT_KEY record, as bitnet.cpp's
                                   writers do (the file's layout is then assumed at load) */
    /* Added for issue #7 (zero = the behaviour before, byte for byte): */
    int embd_type;              /* token_embd.weight type: 0 → the rule above; BITNET_TYPE_F16, _Q8_0 or
                                   _Q6_K (bitnet_dummy_embd_type_check's rules) */
    /* Added for issue #25, the embedding models (zero = the behaviour before, byte for byte; each one
     * is refused, naming it, for an architecture it means nothing for): */
    bool no_norm_in;            /* "qwen3"/"gemma3" (the archs with base/arch.h's norm_in trait): the plain
                                   teacher layout, without the 7 <proj>_norm_in tensors per layer */
    int32_t pooling_type;       /* "qwen3"/"gemma3": BITNET_DUMMY_POOLING_* (the value written + 1;
                                   0 → 3, last token) */
    int32_t n_swa;              /* "gemma3": > 0 → gemma3.attention.sliding_window (uint32) */
    int32_t swa_pattern;        /* "gemma3": > 0 → gemma3.attention.sliding_window_pattern (uint32) */
    float rope_freq_base_swa;   /* "gemma3": > 0 → gemma3.rope.freq_base_swa (float32) */
} bitnet_dummy_params;

/* Zero everything, then outtype = I2_S; the other defaults are the 0 values documented above. */
void bitnet_dummy_params_init(bitnet_dummy_params *p);

/* The hyperparameter keys of an embedding-model file (architecture "qwen3" or "gemma3"), for
 * bitnet_dummy_set_embedding_keys. Sliding-window values <= 0 leave their key out. */
typedef struct bitnet_embd_keys {
    const char *arch, *name;
    int32_t n_layer, n_ctx, n_embd, n_ff, n_head, n_head_kv, n_vocab;
    int32_t head_dim;      /* rope.dimension_count, attention.key_length and .value_length */
    float rope_freq_base, rms_eps;
    int file_type;         /* general.file_type */
    int32_t pooling_type;  /* the <arch>.pooling_type value itself (0 none .. 3 last) */
    int32_t n_swa, swa_pattern;
    float rope_freq_base_swa;
} bitnet_embd_keys;

/* Sets k's keys on w in the order of bitnet.cpp's utils/convert-bitnet-embedding-to-gguf.py (the list at
 * bitnet_dummy_write); the one writer of that key set, for the dummy writer and the HF converter.
 * Errors: the writer's, naming the key. */
bitnet_status bitnet_dummy_set_embedding_keys(bitnet_gguf_writer *w, const bitnet_embd_keys *k, bitnet_error *err);

/* Write the model to `path` (through "<path>.tmp", renamed at the end).
 * With d = head size (n_embd_head or n_embd / n_head), q = n_head·d, kv = n_head_kv·d:
 *
 * Tensors (GGUF ne order, K first). Order: by the name of the Hugging Face tensor each one comes from,
 * sorted as strings, the layers in numeric order — the order the converters (bitnet.cpp's, ours) write
 * when they walk a checkpoint's sorted tensor names, and the order of tests/data/bitnetcpp-tiny:
 *   output.weight [n_embd, n_vocab] (only with output_separate; HF "lm_head.weight");
 *   token_embd.weight [n_embd, n_vocab];
 *   per layer N, "bitnet", "bitnet-b1.58", "bitnet-25": blk.N.{attn_norm [n_embd], ffn_down [n_ff, n_embd],
 *     ffn_sub_norm [n_ff], ffn_gate [n_embd, n_ff], ffn_up [n_embd, n_ff], ffn_norm [n_embd],
 *     attn_sub_norm [q], attn_k [n_embd, kv], attn_output [q, n_embd], attn_q [n_embd, q],
 *     attn_v [n_embd, kv]}.weight;
 *   per layer N, "llama": blk.N.{attn_norm, ffn_down, ffn_gate, ffn_up, ffn_norm, attn_k, attn_output,
 *     attn_q, attn_v}.weight (same shapes; no sub-norms);
 *   per layer N, "qwen3" / "gemma3" (docs/EMBEDDINGS.md §1; the HF names are bitnet.cpp's
 *     convert-bitnet-embedding-to-gguf.py map, e.g. mlp.down_proj.norm → ffn_down_norm_in, Gemma3's
 *     post_attention_layernorm → post_attention_norm, pre_feedforward_layernorm → ffn_norm,
 *     post_feedforward_layernorm → post_ffw_norm; Qwen3's post_attention_layernorm → ffn_norm):
 *     blk.N.{attn_norm [n_embd], ffn_down_norm_in [n_ff], ffn_down [n_ff, n_embd], ffn_gate_norm_in
 *     [n_embd], ffn_gate [n_embd, n_ff], ffn_up_norm_in [n_embd], ffn_up [n_embd, n_ff],
 *     post_attention_norm [n_embd] (gemma3), post_ffw_norm [n_embd] (gemma3), ffn_norm [n_embd],
 *     attn_k_norm [d], attn_k_norm_in [n_embd], attn_k [n_embd, kv], attn_output_norm_in [q],
 *     attn_output [q, n_embd], attn_q_norm [d], attn_q_norm_in [n_embd], attn_q [n_embd, q],
 *     attn_v_norm_in [n_embd], attn_v [n_embd, kv]}.weight — 18 (qwen3) or 20 (gemma3) per layer;
 *     no_norm_in leaves out the seven *_norm_in (11 or 13 per layer);
 *   output_norm.weight [n_embd].
 * output.weight has the type token_embd has by default (F32 for f32, else F16 or Q8_0 by the n_embd
 * rule), also when embd_type sets token_embd's. "qwen3" / "gemma3" have no output.weight, and their
 * token_embd is F32 in f32 files and F16 in all others (any n_embd; embd_type still applies) and every
 * norm F32 in f32 files and F16 in all others (bitnet.cpp's embedding converter: f32 → all F32; f16 →
 * projections, token_embd and norms F16; i2_s → projections I2_S, the rest F16; TL1/TL2, which that
 * converter does not write, are this project's: projections TL1/TL2, the rest F16).
 *
 * Keys, in this order (A = the architecture name):
 *   "bitnet" — those of formats.md "Architecture bitnet" in bitnet.cpp's order: general.architecture,
 *     general.name, A.block_count, A.context_length, A.embedding_length, A.feed_forward_length,
 *     A.attention.head_count, A.attention.head_count_kv, A.rope.freq_base,
 *     A.attention.layer_norm_rms_epsilon, general.file_type, A.vocab_size, A.rope.scaling.type
 *     ("linear"), A.rope.scaling.factor (1.0), then the tokenizer keys;
 *   "bitnet-b1.58", "bitnet-25", "llama" — the keys bitnet.cpp's converter writes for its Llama-style
 *     models (utils/convert-hf-to-gguf-bitnet.py: the common keys, then LlamaModel's vocab_size and
 *     rope.dimension_count; the published 2B-4T GGUF has the same set): general.architecture,
 *     general.name, A.block_count, A.context_length, A.embedding_length, A.feed_forward_length,
 *     A.attention.head_count, A.attention.head_count_kv, A.rope.freq_base,
 *     A.attention.layer_norm_rms_epsilon, general.file_type, A.vocab_size, A.rope.dimension_count (d),
 *     [A.attention.key_length, A.attention.value_length (d) when n_embd_head != n_embd / n_head],
 *     then the tokenizer keys;
 *   "qwen3", "gemma3" — those of bitnet.cpp's utils/convert-bitnet-embedding-to-gguf.py in its order
 *     (docs/EMBEDDINGS.md §1): general.architecture, general.name, A.block_count, A.context_length,
 *     A.embedding_length, A.feed_forward_length, A.attention.head_count, A.attention.head_count_kv,
 *     A.vocab_size, A.rope.dimension_count, A.attention.key_length, A.attention.value_length (all three
 *     d, always), A.rope.freq_base, A.attention.layer_norm_rms_epsilon, general.file_type,
 *     A.pooling_type (uint32, pooling_type - 1, default 3), then for gemma3 only the keys asked for
 *     (that converter writes none of them): gemma3.attention.sliding_window (n_swa),
 *     gemma3.attention.sliding_window_pattern (swa_pattern), gemma3.rope.freq_base_swa
 *     (rope_freq_base_swa); then the tokenizer keys, then tokenizer.ggml.add_space_prefix = false
 *     (gemma3 with a caller's vocabulary only: Gemma's tokenizer adds no space; the built-in
 *     vocabulary's pieces assume the SentencePiece default, so with it the key is left out) and
 *     tokenizer.ggml.add_eos_token = true (bool; both archs, so the runtime appends the EOS that
 *     last-token pooling reads: bitnet.cpp's converter writes it for qwen3, and a gemma3 dummy with
 *     the built-in vocabulary gets it too so tests read an EOS there as well);
 *   tokenizer keys: tokenizer.ggml.model, .pre (unless ""), .tokens, .scores, .token_type, .merges,
 *     .bos_token_id, .eos_token_id, .padding_token_id (each only when the vocabulary has it);
 *   general.quantization_version (2) only for I2_S/TL1/TL2 of the other archs (bitnet.cpp's converter
 *     writes none into F32/F16 files, its quantizer adds it; its embedding converter, which writes I2_S
 *     itself, writes none, so "qwen3"/"gemma3" files never have it); I2_S files also get
 *     BITNET_I2S_LAYOUT_KEY = "x86" (the layout of bitnet_pack_i2s), TL1/TL2 files
 *     bitnet.lut.<tensor>.tiles = [BM, BK, bm] (uint32) per ternary tensor (LAYOUTS.md §7).
 * Errors: BITNET_ERR_INVALID_ARG naming the parameter, shape or tile that is wrong (n_embd % n_head
 * without n_embd_head, n_head % n_head_kv, odd head size, an unknown arch, n_embd_head on "bitnet",
 * output_separate on "qwen3"/"gemma3", no_norm_in on an arch without the norm_in trait, pooling_type
 * outside 0..4 or on an arch other than "qwen3"/"gemma3", negative n_swa / swa_pattern /
 * rope_freq_base_swa or any of them on an arch other than "gemma3",
 * I2_S with M·K % 128 != 0, tiles breaking a rule or naming a shape the model does not have, Q8_0
 * token_embd (or output.weight) with n_embd % 32 != 0, an embd_type bitnet_dummy_embd_type_check
 * refuses, vocabulary too small or with ids out of range); BITNET_ERR_IO
 * naming the path; BITNET_ERR_NOMEM. */
bitnet_status bitnet_dummy_write(const bitnet_dummy_params *p, const char *path, bitnet_error *err);

/* The tiles bitnet_dummy_write uses for a TL1/TL2 weight of M×K: the entry of p->tiles, else the
 * default rule. BITNET_ERR_INVALID_ARG when there are none or they break a rule (message names M, K). */
bitnet_status bitnet_dummy_tiles_for(const bitnet_dummy_params *p, int type, int64_t M, int64_t K,
                                     bitnet_tiles *out, bitnet_error *err);

/* The built-in SentencePiece-style vocabulary of n_tokens tokens (n_tokens >= 259):
 * 0 <unk> (UNKNOWN), 1 <s>, 2 </s> (CONTROL), 3..258 <0x00>..<0xFF> (BYTE), all with score 0; then
 * pieces with scores -1, -2, ... (NORMAL): a built-in list of English words ("▁the", ...) and subwords
 * ("ing", ...), each preceded by any missing prefix so every piece can be reached by the tokenizer's
 * pair merges, then single characters, then distinct pseudo-words ("▁bakuro", ...) up to n_tokens.
 * Deterministic (no seed). bos 1, eos 2, no padding id, model "llama", pre "default". */
bitnet_status bitnet_dummy_vocab_builtin(int32_t n_tokens, bitnet_dummy_vocab **out, bitnet_error *err);

/* Copy the vocabulary (tokenizer.ggml.model, pre, tokens, scores, token_type, merges, bos/eos/padding
 * ids) of another GGUF file. Errors name the file and the missing or malformed key. */
bitnet_status bitnet_dummy_vocab_from_gguf(const char *path, bitnet_dummy_vocab **out, bitnet_error *err);

void bitnet_dummy_vocab_free(bitnet_dummy_vocab *v); /* NULL is fine; only library-made vocabularies */

/* ---- The weight streams, exposed so tests can check them without reading a file back --------- */

/* Seed of one tensor's stream (bitnet_rng_seed of it starts the stream):
 * bitnet_splitmix64 (rng.h) of (seed XOR FNV-1a-64(name)). */
uint64_t bitnet_dummy_tensor_seed(uint64_t seed, const char *tensor_name);

/* The ternary values and scale bitnet_dummy_write stores for a tensor (row-major w[M*K]), for tests
 * and for callers that want the reference values without reading a file back. */
void bitnet_dummy_ternary_values(uint64_t seed, const char *tensor_name, int64_t M, int64_t K, int8_t *w,
                                 float *scale);

#ifdef __cplusplus
}
#endif

#endif
