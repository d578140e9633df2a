/* dummy_model.c — dummy BitNet GGUF writer: the seeded weight generator, the output types and
 * architectures, the model description (tensor list, shapes, tiles, parameter checks) and the streaming
 * writer (bitnet_dummy_write). The vocabularies are dummy_vocab.c. What the weights are and why:
 * dummy_model.h. */
#include "convert/dummy_model.h"

#include "base/arch.h"
#include "base/gguf.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#include "base/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ============================================================================================
 * Weight streams (the generator is rng.h's)
 * ========================================================================================== */

uint64_t bitnet_dummy_tensor_seed(uint64_t seed, const char *tensor_name) {
    /* FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3) of the name. */
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *c = (const unsigned char *)tensor_name; *c; c++) {
        h ^= *c;
        h *= 0x100000001b3ull;
    }
    uint64_t st = seed ^ h;
    return bitnet_splitmix64(&st);
}

/* Ternary stream: each 64-bit output is cut into 8 bytes (lowest first); a byte b < 243 = 3^5 gives
 * five base-3 digits (least significant first) and a byte >= 243 is skipped, so every digit is
 * uniform on {0, 1, 2} and independent; digit d becomes the weight d - 1. */
typedef struct trit_stream {
    bitnet_rng rng;
    int8_t buf[40];
    int n, pos;
} trit_stream;

static void trit_refill(trit_stream *t) {
    t->n = 0;
    t->pos = 0;
    while (t->n == 0) {
        uint64_t x = bitnet_rng_next(&t->rng);
        for (int b = 0; b < 8; b++) {
            unsigned v = (unsigned)(x >> (8 * b)) & 0xffu;
            if (v >= 243) continue;
            for (int d = 0; d < 5; d++) {
                t->buf[t->n++] = (int8_t)((int)(v % 3) - 1);
                v /= 3;
            }
        }
    }
}

static void trit_fill(trit_stream *t, int8_t *w, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        if (t->pos == t->n) trit_refill(t);
        int64_t take = t->n - t->pos;
        if (take > n - i) take = n - i;
        memcpy(w + i, t->buf + t->pos, (size_t)take);
        t->pos += (int)take;
        i += take;
    }
}

/* The tensor's scale is the first output of its stream: (768 + top 7 bits) / 1024. */
static float ternary_stream_init(trit_stream *t, uint64_t seed, const char *name) {
    bitnet_rng_seed(&t->rng, bitnet_dummy_tensor_seed(seed, name));
    t->n = t->pos = 0;
    uint64_t x = bitnet_rng_next(&t->rng);
    return (float)(768 + (int)(x >> 57)) / 1024.0f;
}

void bitnet_dummy_ternary_values(uint64_t seed, const char *tensor_name, int64_t M, int64_t K, int8_t *w,
                                 float *scale) {
    trit_stream t;
    float s = ternary_stream_init(&t, seed, tensor_name);
    if (scale) *scale = s;
    trit_fill(&t, w, M * K);
}

/* Approximately N(0,1): Irwin-Hall sum of 12 uniforms on [0,1) with 24-bit resolution, minus 6.
 * Mean 0, variance 1, range (-6, 6). Each 64-bit output supplies two uniforms (bits 40..63, 8..31);
 * every float operation is exact or correctly rounded in a fixed order, so results are the same on
 * every IEEE-754 machine. */
static float gauss12(bitnet_rng *r) {
    const float inv = 1.0f / 16777216.0f;
    float sum = 0.0f;
    for (int i = 0; i < 6; i++) {
        uint64_t x = bitnet_rng_next(r);
        sum += (float)(uint32_t)(x >> 40) * inv;
        sum += (float)(uint32_t)((x >> 8) & 0xffffffu) * inv;
    }
    return sum - 6.0f;
}

/* ============================================================================================
 * Outtypes
 * ========================================================================================== */

static const char *const outtype_names[] = {"f32", "f16", "i2_s", "tl1", "tl2"};

bool bitnet_dummy_outtype_parse(const char *s, bitnet_dummy_outtype *out) {
    if (!s) return false;
    for (int i = 0; i < 5; i++) {
        const char *n = outtype_names[i];
        size_t k = 0;
        while (n[k] && s[k] && (s[k] == n[k] || (s[k] >= 'A' && s[k] <= 'Z' && s[k] - 'A' + 'a' == n[k]))) k++;
        if (!n[k] && !s[k]) {
            *out = (bitnet_dummy_outtype)i;
            return true;
        }
    }
    return false;
}

const char *bitnet_dummy_outtype_name(bitnet_dummy_outtype t) {
    return ((int)t >= 0 && (int)t < 5) ? outtype_names[t] : "invalid";
}

int bitnet_dummy_ternary_type(bitnet_dummy_outtype t) {
    switch (t) {
    case BITNET_DUMMY_F32: return BITNET_TYPE_F32;
    case BITNET_DUMMY_F16: return BITNET_TYPE_F16;
    case BITNET_DUMMY_I2_S: return BITNET_TYPE_I2_S;
    case BITNET_DUMMY_TL1: return BITNET_TYPE_TL1;
    case BITNET_DUMMY_TL2: return BITNET_TYPE_TL2;
    }
    return -1;
}

int bitnet_dummy_file_type(bitnet_dummy_outtype t) {
    switch (t) {
    case BITNET_DUMMY_F32: return 0;
    case BITNET_DUMMY_F16: return 1;
    case BITNET_DUMMY_I2_S: return 40;
    case BITNET_DUMMY_TL1: return 38;
    case BITNET_DUMMY_TL2: return 39;
    }
    return -1;
}

/* ASCII case-insensitive equality (type names are ASCII) */
bool bitnet_dummy_embd_type_parse(const char *s, int *type) {
    if (!s) return false;
    static const struct { const char *name; int type; } names[] = {
        {"f16", BITNET_TYPE_F16}, {"q8_0", BITNET_TYPE_Q8_0}, {"q6_k", BITNET_TYPE_Q6_K}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *type = names[i].type;
            return true;
        }
    }
    return false;
}

bitnet_status bitnet_dummy_embd_type_check(bitnet_dummy_outtype outtype, int type, int64_t n_embd, bitnet_error *err) {
    if (type == 0) return BITNET_OK;
    if (type != BITNET_TYPE_F16 && type != BITNET_TYPE_Q8_0 && type != BITNET_TYPE_Q6_K)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "token_embd.weight: type %s (id %d) is not an embedding type (F16, Q8_0 or Q6_K)",
                           bitnet_type_name(type), type);
    if (outtype == BITNET_DUMMY_F32)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "token_embd.weight: outtype f32 stores every tensor as F32 (the unquantized reference); "
                           "a %s embedding needs another outtype", bitnet_type_name(type));
    const int64_t block = bitnet_type_traits_of(type)->blck_size; /* base/types.h; F16: 1 */
    if (n_embd % block != 0)
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "token_embd.weight: %s stores each row of n_embd values in blocks of %lld, and n_embd = %lld "
                           "is not a multiple of %lld (Q8_0 needs a multiple of 32; F16 holds any n_embd)",
                           bitnet_type_name(type), (long long)block, (long long)n_embd, (long long)block);
    return BITNET_OK;
}

/* The architectures are the rows of base/arch.c; a bitnet_dummy_arch value is a row number. */
bool bitnet_dummy_arch_parse(const char *s, bitnet_dummy_arch *out) {
    const int i = s ? bitnet_arch_index(s) : -1;
    if (i < 0) return false;
    *out = (bitnet_dummy_arch)i;
    return true;
}

const char *bitnet_dummy_arch_name(bitnet_dummy_arch a) {
    const bitnet_arch_info *ai = (int)a >= 0 ? bitnet_arch_at((size_t)a) : NULL;
    return ai ? ai->name : "invalid";
}

/* The table row of p->arch (checked by check_params before any use). */
static const bitnet_arch_info *arch_info(const bitnet_dummy_params *p) { return bitnet_arch_at((size_t)p->arch); }

/* The embedding models' file contract (docs/EMBEDDINGS.md §1): key set, tensor set and types of
 * bitnet.cpp's convert-bitnet-embedding-to-gguf.py. */
static bool embedding_arch(const bitnet_dummy_params *p) {
    const bitnet_arch graph = arch_info(p)->graph;
    return graph == BITNET_ARCH_QWEN3 || graph == BITNET_ARCH_GEMMA3;
}

bool bitnet_dummy_pooling_parse(const char *s, int32_t *out) {
    static const char *const names[] = {"none", "mean", "cls", "last"};
    for (int i = 0; s && i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = BITNET_DUMMY_POOLING_NONE + i;
            return true;
        }
    }
    return false;
}

void bitnet_dummy_params_init(bitnet_dummy_params *p) {
    memset(p, 0, sizeof *p);
    p->outtype = BITNET_DUMMY_I2_S;
}

/* ============================================================================================
 * Model description
 * ========================================================================================== */

enum tensor_kind { T_EMBD, T_NORM, T_TERNARY };

typedef struct tensor_desc {
    char name[64];
    enum tensor_kind kind;
    int type;       /* GGUF tensor type id */
    int64_t M, K;   /* ternary: rows, columns; embd: n_vocab, n_embd; norm: 1, n */
    bitnet_tiles tiles;
    size_t nbytes;
} tensor_desc;

/* Per-layer tensor order: the HF tensor names sorted (see bitnet_dummy_write). The bitnet graphs
 * (tests/data/bitnetcpp-tiny, and BitNet-b1.58-2B-4T's names input_layernorm, mlp.down_proj,
 * mlp.ffn_sub_norm, mlp.gate_proj, mlp.up_proj, post_attention_layernorm, self_attn.attn_sub_norm,
 * self_attn.{k,o,q,v}_proj), llama's (the same without the two sub-norms) and the embedding models'
 * (below). */
enum { P_Q, P_K, P_V, P_O, P_GATE, P_UP, P_DOWN };
enum { N_EMBD = 0, N_FF = 1, N_Q = 2, N_HEAD = 3 }; /* size of a norm: n_embd, n_ff, n_head·d or d */
/* layer_tensor.only: the entry is written only when the arch has the trait (and, for L_NORM_IN, unless
 * no_norm_in) */
enum { L_ALWAYS = 0, L_NORM_IN = 1, L_QK_NORM = 2, L_POST_NORMS = 3 };
typedef struct layer_tensor {
    const char *name;
    int proj; /* -1: a norm whose size `norm` gives */
    int norm;
    int only;
} layer_tensor;
static const layer_tensor bitnet_layer_order[] = {
    {"attn_norm", -1, N_EMBD, L_ALWAYS},    {"ffn_down", P_DOWN, 0, L_ALWAYS}, {"ffn_sub_norm", -1, N_FF, L_ALWAYS},
    {"ffn_gate", P_GATE, 0, L_ALWAYS},      {"ffn_up", P_UP, 0, L_ALWAYS},     {"ffn_norm", -1, N_EMBD, L_ALWAYS},
    {"attn_sub_norm", -1, N_Q, L_ALWAYS},   {"attn_k", P_K, 0, L_ALWAYS},      {"attn_output", P_O, 0, L_ALWAYS},
    {"attn_q", P_Q, 0, L_ALWAYS},           {"attn_v", P_V, 0, L_ALWAYS},
};
static const layer_tensor llama_layer_order[] = {
    {"attn_norm", -1, N_EMBD, L_ALWAYS},    {"ffn_down", P_DOWN, 0, L_ALWAYS}, {"ffn_gate", P_GATE, 0, L_ALWAYS},
    {"ffn_up", P_UP, 0, L_ALWAYS},          {"ffn_norm", -1, N_EMBD, L_ALWAYS}, {"attn_k", P_K, 0, L_ALWAYS},
    {"attn_output", P_O, 0, L_ALWAYS},      {"attn_q", P_Q, 0, L_ALWAYS},      {"attn_v", P_V, 0, L_ALWAYS},
};

/* "qwen3" and "gemma3": the HF names of bitnet.cpp's embedding converter, sorted (input_layernorm,
 * mlp.down_proj.norm, mlp.down_proj, mlp.gate_proj.norm, mlp.gate_proj, mlp.up_proj.norm, mlp.up_proj,
 * post_attention_layernorm, post_feedforward_layernorm, pre_feedforward_layernorm, self_attn.k_norm,
 * self_attn.k_proj.norm, self_attn.k_proj, self_attn.o_proj.norm, self_attn.o_proj, self_attn.q_norm,
 * self_attn.q_proj.norm, self_attn.q_proj, self_attn.v_proj.norm, self_attn.v_proj). Qwen3's
 * post_attention_layernorm is its ffn_norm, Gemma3's is post_attention_norm and its
 * pre_feedforward_layernorm the ffn_norm: both put ffn_norm right after the post-norms. */
static const layer_tensor embedding_layer_order[] = {
    {"attn_norm", -1, N_EMBD, L_ALWAYS},
    {"ffn_down_norm_in", -1, N_FF, L_NORM_IN},
    {"ffn_down", P_DOWN, 0, L_ALWAYS},
    {"ffn_gate_norm_in", -1, N_EMBD, L_NORM_IN},
    {"ffn_gate", P_GATE, 0, L_ALWAYS},
    {"ffn_up_norm_in", -1, N_EMBD, L_NORM_IN},
    {"ffn_up", P_UP, 0, L_ALWAYS},
    {"post_attention_norm", -1, N_EMBD, L_POST_NORMS},
    {"post_ffw_norm", -1, N_EMBD, L_POST_NORMS},
    {"ffn_norm", -1, N_EMBD, L_ALWAYS},
    {"attn_k_norm", -1, N_HEAD, L_QK_NORM},
    {"attn_k_norm_in", -1, N_EMBD, L_NORM_IN},
    {"attn_k", P_K, 0, L_ALWAYS},
    {"attn_output_norm_in", -1, N_Q, L_NORM_IN},
    {"attn_output", P_O, 0, L_ALWAYS},
    {"attn_q_norm", -1, N_HEAD, L_QK_NORM},
    {"attn_q_norm_in", -1, N_EMBD, L_NORM_IN},
    {"attn_q", P_Q, 0, L_ALWAYS},
    {"attn_v_norm_in", -1, N_EMBD, L_NORM_IN},
    {"attn_v", P_V, 0, L_ALWAYS},
};

/* Whether the file of p has the entry t (layer_tensor.only against the arch's traits). */
static bool layer_tensor_used(const bitnet_dummy_params *p, const layer_tensor *t) {
    const bitnet_arch_info *a = arch_info(p);
    switch (t->only) {
    case L_NORM_IN: return a->norm_in && !p->no_norm_in;
    case L_QK_NORM: return a->qk_norm;
    case L_POST_NORMS: return a->post_norms;
    default: return true;
    }
}

/* The order table of p's arch (entries layer_tensor_used says are left out are skipped). */
static const layer_tensor *layer_order(const bitnet_dummy_params *p, int *n) {
    if (embedding_arch(p)) {
        *n = (int)(sizeof embedding_layer_order / sizeof embedding_layer_order[0]);
        return embedding_layer_order;
    }
    if (!arch_info(p)->sub_norms) {
        *n = (int)(sizeof llama_layer_order / sizeof llama_layer_order[0]);
        return llama_layer_order;
    }
    *n = (int)(sizeof bitnet_layer_order / sizeof bitnet_layer_order[0]);
    return bitnet_layer_order;
}

/* head size d (n_embd_head or n_embd / n_head) */
static int64_t head_size(const bitnet_dummy_params *p) {
    return p->n_embd_head > 0 ? p->n_embd_head : (int64_t)p->n_embd / p->n_head;
}

static void proj_shape(const bitnet_dummy_params *p, int proj, int64_t *M, int64_t *K) {
    const int64_t n_embd = p->n_embd, d = head_size(p), q = d * p->n_head, kv = d * p->n_head_kv;
    switch (proj) {
    case P_Q: *M = q; *K = n_embd; break;
    case P_O: *M = n_embd; *K = q; break;
    case P_K: case P_V: *M = kv; *K = n_embd; break;
    case P_GATE: case P_UP: *M = p->n_ff; *K = n_embd; break;
    default: *M = n_embd; *K = p->n_ff; break;
    }
}

bitnet_status bitnet_dummy_tiles_for(const bitnet_dummy_params *p, int type, int64_t M, int64_t K,
                                     bitnet_tiles *out, bitnet_error *err) {
    const char *tname = type == BITNET_TYPE_TL1 ? "TL1" : "TL2";
    for (size_t i = 0; i < p->n_tiles; i++) {
        if (p->tiles[i].M == M && p->tiles[i].K == K) {
            *out = p->tiles[i].tiles;
            return bitnet_tiles_check(type, M, K, *out, err);
        }
    }
    if (!bitnet_lut_default_tiles(type, M, K, out))
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s weight %lldx%lld (MxK): no tiles given and the default tile rule has none for this "
                           "shape (pass tiles with --tiles M,K,BM,BK,bm)", tname, (long long)M, (long long)K);
    return bitnet_tiles_check(type, M, K, *out, err);
}

/* The parameters added for the embedding models (dummy_model.h, issue #25): each is refused for an arch
 * it means nothing for, naming the parameter and the arch. */
static bitnet_status check_embedding_params(const bitnet_dummy_params *p, bitnet_error *err) {
    const char *arch = arch_info(p)->name;
    const bool emb = embedding_arch(p), gemma3 = arch_info(p)->graph == BITNET_ARCH_GEMMA3;
    if (p->output_separate && emb)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "output_separate: architecture \"%s\" files have no output.weight (embedding models do not "
                           "generate; docs/EMBEDDINGS.md §1)", arch);
    if (p->no_norm_in && !arch_info(p)->norm_in)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "no_norm_in: architecture \"%s\" has no <proj>_norm_in tensors to leave out (only the "
                           "embedding models' archs have them)", arch);
    if (p->pooling_type < BITNET_DUMMY_POOLING_DEFAULT || p->pooling_type > BITNET_DUMMY_POOLING_LAST)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "pooling_type = %d: must be 0 (default, last) or 1..4 (none, mean, cls, last)",
                           (int)p->pooling_type);
    if (p->pooling_type != BITNET_DUMMY_POOLING_DEFAULT && !emb)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "pooling_type = %d: architecture \"%s\" files have no pooling_type key (only qwen3 and "
                           "gemma3 embedding models)", (int)p->pooling_type, arch);
    const struct { const char *name; double v; } swa[] = {
        {"n_swa", p->n_swa}, {"swa_pattern", p->swa_pattern}, {"rope_freq_base_swa", p->rope_freq_base_swa}};
    for (size_t i = 0; i < sizeof swa / sizeof swa[0]; i++) {
        if (!(swa[i].v >= 0.0) || swa[i].v > 3.0e38)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s = %g: must be 0 (key not written) or a finite positive number",
                               swa[i].name, swa[i].v);
        if (swa[i].v != 0.0 && !gemma3)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "%s = %g: only architecture \"gemma3\" has sliding-window layers (arch is \"%s\")",
                               swa[i].name, swa[i].v, arch);
    }
    return BITNET_OK;
}

/* Check everything that can be checked before a byte is written. */
static bitnet_status check_params(const bitnet_dummy_params *p, bitnet_error *err) {
    bitnet_status s;
    const struct { const char *name; int32_t v; } dims[] = {
        {"n_embd", p->n_embd}, {"n_ff", p->n_ff}, {"n_layer", p->n_layer}, {"n_head", p->n_head},
        {"n_head_kv", p->n_head_kv}, {"n_ctx", p->n_ctx},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (dims[i].v <= 0)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s = %d: must be positive", dims[i].name, (int)dims[i].v);
    if (p->n_layer > 100000)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_layer = %d: too many layers", (int)p->n_layer);
    if ((int)p->arch < 0 || (size_t)p->arch >= bitnet_arch_count()) {
        char names[256];
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "arch %d is not one of %s", (int)p->arch,
                           bitnet_arch_list(names, sizeof names, "", ", ", ", "));
    }
    if (p->n_embd_head < 0 || p->n_embd_head > (1 << 20))
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_embd_head = %d: must be 0 (n_embd / n_head) or a head size",
                           (int)p->n_embd_head);
    if (p->n_embd_head > 0 && arch_info(p)->graph == BITNET_ARCH_BITNET)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "n_embd_head = %d: architecture \"bitnet\" files have no attention.key_length key "
                           "(the head size is n_embd / n_head)", (int)p->n_embd_head);
    if (p->n_embd_head == 0 && p->n_embd % p->n_head != 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_embd = %d is not a multiple of n_head = %d",
                           (int)p->n_embd, (int)p->n_head);
    if (head_size(p) % 2 != 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "head size %s = %d is odd: RoPE rotates pairs of dimensions",
                           p->n_embd_head ? "n_embd_head" : "n_embd / n_head", (int)head_size(p));
    if (p->n_head % p->n_head_kv != 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_head = %d is not a multiple of n_head_kv = %d",
                           (int)p->n_head, (int)p->n_head_kv);
    if (!(p->rope_freq_base > 0.0f) || !(p->rms_eps > 0.0f))
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "rope_freq_base = %g and rms_eps = %g must be positive",
                           (double)p->rope_freq_base, (double)p->rms_eps);
    if (bitnet_dummy_ternary_type(p->outtype) < 0)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "outtype %d is not one of f32, f16, i2_s, tl1, tl2",
                           (int)p->outtype);
    if (p->embd_type != 0) {
        bitnet_error e2 = {{0}};
        if (bitnet_dummy_embd_type_check(p->outtype, p->embd_type, p->n_embd, &e2) != BITNET_OK)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s", e2.msg);
    }
    if ((s = check_embedding_params(p, err)) != BITNET_OK) return s;
    if (!embedding_arch(p) && p->outtype != BITNET_DUMMY_F32 && p->n_embd % 256 != 0 && p->n_embd % 32 != 0 &&
        (p->embd_type == 0 || p->output_separate))
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "n_embd = %d: %s would be Q8_0 (n_embd %% 256 != 0), which needs n_embd %% 32 == 0",
                           (int)p->n_embd, p->embd_type == 0 ? "token_embd" : "output.weight");

    const bitnet_dummy_vocab *v = p->vocab;
    if (v) {
        if (v->n_tokens <= 0 || !v->tokens)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "vocabulary has no tokens");
        for (int32_t i = 0; i < v->n_tokens; i++)
            if (!v->tokens[i]) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "vocabulary token %d is NULL", (int)i);
        const int32_t ids[3] = {v->bos_id, v->eos_id, v->pad_id};
        const char *names[3] = {"bos_id", "eos_id", "pad_id"};
        for (int i = 0; i < 3; i++)
            if (ids[i] < -1 || ids[i] >= v->n_tokens)
                return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "vocabulary %s = %d is out of range (%d tokens)",
                                   names[i], (int)ids[i], (int)v->n_tokens);
        if (v->n_merges && !v->merges) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "vocabulary merges are NULL");
    }

    /* Shapes of the ternary projections. */
    for (int proj = P_Q; proj <= P_DOWN; proj++) {
        int64_t M, K;
        proj_shape(p, proj, &M, &K);
        if (p->outtype == BITNET_DUMMY_I2_S && (M * K) % 128 != 0)
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "I2_S needs M*K %% 128 == 0 (blocks of 128 weights), weight %lldx%lld (MxK) has %lld",
                               (long long)M, (long long)K, (long long)(M * K));
        if (p->outtype == BITNET_DUMMY_TL1 || p->outtype == BITNET_DUMMY_TL2) {
            bitnet_tiles t;
            if ((s = bitnet_dummy_tiles_for(p, bitnet_dummy_ternary_type(p->outtype), M, K, &t, err)) != BITNET_OK)
                return s;
        }
    }
    if (p->outtype == BITNET_DUMMY_TL1 || p->outtype == BITNET_DUMMY_TL2) {
        for (size_t i = 0; i < p->n_tiles; i++) {
            bool found = false;
            for (int proj = P_Q; proj <= P_DOWN; proj++) {
                int64_t M, K;
                proj_shape(p, proj, &M, &K);
                found = found || (M == p->tiles[i].M && K == p->tiles[i].K);
            }
            if (!found) {
                int64_t Mq, Kq, Mk, Kk, Mg, Kg, Md, Kd;
                proj_shape(p, P_Q, &Mq, &Kq);
                proj_shape(p, P_K, &Mk, &Kk);
                proj_shape(p, P_GATE, &Mg, &Kg);
                proj_shape(p, P_DOWN, &Md, &Kd);
                return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                                   "tiles given for %lldx%lld (MxK), a shape this model does not have "
                                   "(its shapes: %lldx%lld, %lldx%lld, %lldx%lld, %lldx%lld)",
                                   (long long)p->tiles[i].M, (long long)p->tiles[i].K, (long long)Mq, (long long)Kq,
                                   (long long)Mk, (long long)Kk, (long long)Mg, (long long)Kg, (long long)Md,
                                   (long long)Kd);
            }
            for (size_t j = 0; j < i; j++)
                if (p->tiles[j].M == p->tiles[i].M && p->tiles[j].K == p->tiles[i].K)
                    return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "tiles given twice for %lldx%lld (MxK)",
                                       (long long)p->tiles[i].M, (long long)p->tiles[i].K);
        }
    }
    return BITNET_OK;
}

/* ============================================================================================
 * Writing
 * ========================================================================================== */

typedef struct writer_ctx {
    const bitnet_dummy_params *p;
    bitnet_gguf_writer *w;
    int64_t n_tensors, index;
    uint64_t bytes_done, bytes_total;
    size_t chunk_bytes;
    void *buf_a, *buf_b; /* scratch, grown on demand */
    size_t cap_a, cap_b;
    bitnet_error *err;
} writer_ctx;

static void *grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return *buf;
    void *nb = realloc(*buf, need);
    if (!nb) return NULL;
    *buf = nb;
    *cap = need;
    return nb;
}

static bitnet_status emit(writer_ctx *c, const tensor_desc *t, const void *data, size_t n) {
    bitnet_status s = bitnet_gguf_write_data(c->w, data, n, c->err);
    if (s != BITNET_OK) return s;
    c->bytes_done += n;
    if (c->p->progress) c->p->progress(c->p->progress_user, c->index, c->n_tensors, t->name, c->bytes_done, c->bytes_total);
    return BITNET_OK;
}

static bitnet_status nomem(writer_ctx *c, const tensor_desc *t, size_t bytes) {
    return bitnet_fail(c->err, BITNET_ERR_NOMEM, "out of memory: %zu bytes of scratch for %s", bytes, t->name);
}

/* Dense float rows (token_embd, norms): rows × cols values of one stream, in chunks of rows,
 * converted to the tensor's type. Norms are 1 + 0.1·z, for the embedding archs rounded to F16 first
 * (so their F32 and F16 files hold the same values). */
static bitnet_status write_dense(writer_ctx *c, const tensor_desc *t) {
    const bool f16_norms = embedding_arch(c->p);
    const int64_t rows = t->M, cols = t->K;
    bitnet_rng rng;
    bitnet_rng_seed(&rng, bitnet_dummy_tensor_seed(c->p->seed, t->name));
    int64_t chunk = (int64_t)(c->chunk_bytes / ((size_t)cols * sizeof(float)));
    if (chunk < 1) chunk = 1;
    if (chunk > rows) chunk = rows;
    size_t row_bytes = t->nbytes / (size_t)rows;
    float *f = (float *)grow(&c->buf_a, &c->cap_a, (size_t)(chunk * cols) * sizeof(float));
    if (!f) return nomem(c, t, (size_t)(chunk * cols) * sizeof(float));
    uint8_t *o = (uint8_t *)grow(&c->buf_b, &c->cap_b, (size_t)chunk * row_bytes);
    if (!o) return nomem(c, t, (size_t)chunk * row_bytes);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
        for (int64_t i = 0; i < n * cols; i++) {
            float z = gauss12(&rng);
            f[i] = t->kind == T_NORM ? 1.0f + 0.1f * z : z;
            if (t->kind == T_NORM && f16_norms) f[i] = bitnet_fp16_to_fp32(bitnet_fp32_to_fp16(f[i]));
        }
        const void *out = f;
        if (t->type == BITNET_TYPE_F16) {
            uint16_t *h = (uint16_t *)o;
            for (int64_t i = 0; i < n * cols; i++) h[i] = bitnet_fp32_to_fp16(f[i]);
            out = o;
        } else if (t->type == BITNET_TYPE_Q8_0) {
            for (int64_t r = 0; r < n; r++)
                bitnet_quantize_row_q8_0(f + r * cols, (bitnet_block_q8_0 *)(o + (size_t)r * row_bytes), cols);
            out = o;
        } else if (t->type == BITNET_TYPE_Q6_K) {
            for (int64_t r = 0; r < n; r++) {
                bitnet_status s = bitnet_quantize_row_q6_k(f + r * cols, (bitnet_block_q6_k *)(o + (size_t)r * row_bytes),
                                                           cols, c->err);
                if (s != BITNET_OK) return s; /* n_embd % 256 was checked: not reached */
            }
            out = o;
        }
        bitnet_status s = emit(c, t, out, (size_t)n * row_bytes);
        if (s != BITNET_OK) return s;
    }
    return BITNET_OK;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) {
        int64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

static bitnet_status write_ternary(writer_ctx *c, const tensor_desc *t) {
    const int64_t M = t->M, K = t->K;
    trit_stream ts;
    const float scale = ternary_stream_init(&ts, c->p->seed, t->name);

    /* Rows per chunk must keep the packed layout splittable: I2_S blocks of 128 weights run over
     * the flattened tensor and TL1 tiles are BM rows with contiguous bytes, so those chunks are
     * written as they are packed; TL2's three streams each span the whole tensor, so its tiles are
     * packed one by one (bitnet_pack_tl2_tile) into a buffer of the whole packed tensor. */
    int64_t mult = 1;
    if (t->type == BITNET_TYPE_I2_S) mult = 128 / gcd64(K, 128);
    else if (t->type == BITNET_TYPE_TL1 || t->type == BITNET_TYPE_TL2) mult = t->tiles.BM;
    int64_t chunk = (int64_t)(c->chunk_bytes / (size_t)K) / mult * mult;
    if (chunk < mult) chunk = mult;
    if (chunk > M) chunk = M;

    int8_t *w = (int8_t *)grow(&c->buf_a, &c->cap_a, (size_t)(chunk * K));
    if (!w) return nomem(c, t, (size_t)(chunk * K));
    size_t out_cap;
    switch (t->type) {
    case BITNET_TYPE_F32: out_cap = (size_t)(chunk * K) * 4; break;
    case BITNET_TYPE_F16: out_cap = (size_t)(chunk * K) * 2; break;
    case BITNET_TYPE_TL2: out_cap = t->nbytes; break;
    default: out_cap = (size_t)(chunk * K) / 4 + 32; break;
    }
    uint8_t *o = (uint8_t *)grow(&c->buf_b, &c->cap_b, out_cap);
    if (!o) return nomem(c, t, out_cap);
    if (t->type == BITNET_TYPE_TL2) memset(o, 0, t->nbytes); /* padding and tail are zeros */

    const float fv[3] = {-scale, 0.0f, scale};
    const uint16_t hv[3] = {bitnet_fp32_to_fp16(-scale), bitnet_fp32_to_fp16(0.0f), bitnet_fp32_to_fp16(scale)};
    bitnet_status s = BITNET_OK;
    for (int64_t r0 = 0; r0 < M && s == BITNET_OK; r0 += chunk) {
        const int64_t n = M - r0 < chunk ? M - r0 : chunk, cnt = n * K;
        trit_fill(&ts, w, cnt);
        switch (t->type) {
        case BITNET_TYPE_F32: {
            float *f = (float *)o;
            for (int64_t i = 0; i < cnt; i++) f[i] = fv[w[i] + 1];
            s = emit(c, t, o, (size_t)cnt * 4);
            break;
        }
        case BITNET_TYPE_F16: {
            uint16_t *h = (uint16_t *)o;
            for (int64_t i = 0; i < cnt; i++) h[i] = hv[w[i] + 1];
            s = emit(c, t, o, (size_t)cnt * 2);
            break;
        }
        case BITNET_TYPE_I2_S:
            s = bitnet_pack_i2s(w, n, K, scale, o, c->err);
            if (s == BITNET_OK) s = emit(c, t, o, (size_t)cnt / 4);
            break;
        case BITNET_TYPE_TL1:
            s = bitnet_pack_tl1(w, n, K, t->tiles, scale, o, c->err);
            if (s == BITNET_OK) s = emit(c, t, o, (size_t)cnt / 4);
            break;
        case BITNET_TYPE_TL2:
            for (int64_t i = 0; i < n / t->tiles.BM && s == BITNET_OK; i++)
                s = bitnet_pack_tl2_tile(w + i * t->tiles.BM * K, M, K, t->tiles, r0 / t->tiles.BM + i, o, c->err);
            if (s == BITNET_OK && r0 + n == M) {
                memcpy(o + bitnet_ternary_scale_offset(BITNET_TYPE_TL2, M, K), &scale, sizeof scale);
                s = emit(c, t, o, t->nbytes);
            }
            break;
        default:
            s = bitnet_fail(c->err, BITNET_ERR_INVALID_ARG, "%s: type %d is not a ternary output type", t->name, t->type);
        }
    }
    if (s != BITNET_OK) return s;
    if (t->type == BITNET_TYPE_I2_S || t->type == BITNET_TYPE_TL1) {
        /* The 32-byte tail: the float32 scale (little endian) and 28 zero bytes. */
        uint8_t tail[32] = {0};
        memcpy(tail, &scale, sizeof scale);
        s = emit(c, t, tail, sizeof tail);
    }
    return s;
}

static bitnet_status set_ok(bitnet_status s, const char *key, bitnet_error *err) {
    return s == BITNET_OK ? s : bitnet_fail(err, s, "cannot set GGUF key %s (%s)", key, bitnet_status_name(s));
}

/* Set one key (call) in a function whose status is s; on failure the error names the key and the
 * function returns. */
#define SETK(call, key)                                         \
    do {                                                        \
        if ((s = set_ok((call), (key), err)) != BITNET_OK) return s; \
    } while (0)

/* The defaults of the zero parameters (n_head_kv = n_head, n_ctx 2048, 32002 tokens, rope base 10000,
 * rms eps 1e-5, name "bitnet-dummy"). */
static void apply_defaults(bitnet_dummy_params *p) {
    if (p->n_head_kv == 0) p->n_head_kv = p->n_head;
    if (p->n_ctx == 0) p->n_ctx = 2048;
    if (p->n_vocab == 0) p->n_vocab = 32002;
    if (p->rope_freq_base == 0.0f) p->rope_freq_base = 10000.0f;
    if (p->rms_eps == 0.0f) p->rms_eps = 1e-5f;
    if (!p->name) p->name = "bitnet-dummy";
}

/* The n_tensors entries of td, in file order (bitnet_dummy_write's comment in dummy_model.h), with their
 * types, shapes, tiles and byte sizes; *bytes_total = the sum of the sizes. */
static bitnet_status describe_tensors(const bitnet_dummy_params *p, const bitnet_dummy_vocab *v, tensor_desc *td,
                                      int64_t n_tensors, uint64_t *bytes_total, bitnet_error *err) {
    bitnet_status s;
    const int ttype = bitnet_dummy_ternary_type(p->outtype);
    const bool tl = p->outtype == BITNET_DUMMY_TL1 || p->outtype == BITNET_DUMMY_TL2;
    int n_layer_tensors;
    const layer_tensor *order = layer_order(p, &n_layer_tensors);
    const bool emb = embedding_arch(p);
    const int embd_type = p->outtype == BITNET_DUMMY_F32     ? BITNET_TYPE_F32
                          : emb || p->n_embd % 256 == 0     ? BITNET_TYPE_F16
                                                            : BITNET_TYPE_Q8_0;
    /* norms: F32, except in the embedding archs' non-f32 files (F16, bitnet.cpp's embedding converter) */
    const int norm_type = emb && p->outtype != BITNET_DUMMY_F32 ? BITNET_TYPE_F16 : BITNET_TYPE_F32;
    {
        int64_t k = 0;
        tensor_desc *e;
        if (p->output_separate) { /* HF "lm_head.weight" sorts before "model.*" */
            e = &td[k++];
            snprintf(e->name, sizeof e->name, "output.weight");
            e->kind = T_EMBD;
            e->type = embd_type;
            e->M = v->n_tokens;
            e->K = p->n_embd;
        }
        e = &td[k++];
        snprintf(e->name, sizeof e->name, "token_embd.weight");
        e->kind = T_EMBD;
        e->type = p->embd_type ? p->embd_type : embd_type;
        e->M = v->n_tokens;
        e->K = p->n_embd;
        const int64_t q_dim = head_size(p) * p->n_head;
        for (int32_t l = 0; l < p->n_layer; l++) {
            for (int j = 0; j < n_layer_tensors; j++) {
                if (!layer_tensor_used(p, &order[j])) continue;
                e = &td[k++];
                snprintf(e->name, sizeof e->name, "blk.%d.%s.weight", (int)l, order[j].name);
                if (order[j].proj < 0) {
                    e->kind = T_NORM;
                    e->type = norm_type;
                    e->M = 1;
                    e->K = order[j].norm == N_FF     ? p->n_ff
                           : order[j].norm == N_Q    ? q_dim
                           : order[j].norm == N_HEAD ? head_size(p)
                                                     : p->n_embd;
                } else {
                    e->kind = T_TERNARY;
                    e->type = ttype;
                    proj_shape(p, order[j].proj, &e->M, &e->K);
                    if (tl && (s = bitnet_dummy_tiles_for(p, ttype, e->M, e->K, &e->tiles, err)) != BITNET_OK)
                        return s;
                }
            }
        }
        e = &td[k++];
        snprintf(e->name, sizeof e->name, "output_norm.weight");
        e->kind = T_NORM;
        e->type = norm_type;
        e->M = 1;
        e->K = p->n_embd;
    }
    for (int64_t i = 0; i < n_tensors; i++) {
        tensor_desc *e = &td[i];
        int64_t ne[2] = {e->K, e->M};
        int nd = e->kind == T_NORM ? 1 : 2;
        if ((s = bitnet_type_nbytes(e->type, nd, ne, &e->nbytes, err)) != BITNET_OK) return s;
        *bytes_total += e->nbytes;
    }
    return BITNET_OK;
}

bitnet_status bitnet_dummy_set_embedding_keys(bitnet_gguf_writer *w, const bitnet_embd_keys *k, bitnet_error *err) {
    bitnet_status s;
    const uint32_t d = (uint32_t)k->head_dim;
    char key[128];
#define AKEY(suffix) (snprintf(key, sizeof key, "%s.%s", k->arch, (suffix)), key)
    SETK(bitnet_gguf_set_str(w, "general.architecture", k->arch), "general.architecture");
    SETK(bitnet_gguf_set_str(w, "general.name", k->name), "general.name");
    SETK(bitnet_gguf_set_u32(w, AKEY("block_count"), (uint32_t)k->n_layer), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("context_length"), (uint32_t)k->n_ctx), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("embedding_length"), (uint32_t)k->n_embd), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("feed_forward_length"), (uint32_t)k->n_ff), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("attention.head_count"), (uint32_t)k->n_head), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("attention.head_count_kv"), (uint32_t)k->n_head_kv), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("vocab_size"), (uint32_t)k->n_vocab), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("rope.dimension_count"), d), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("attention.key_length"), d), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("attention.value_length"), d), key);
    SETK(bitnet_gguf_set_f32(w, AKEY("rope.freq_base"), k->rope_freq_base), key);
    SETK(bitnet_gguf_set_f32(w, AKEY("attention.layer_norm_rms_epsilon"), k->rms_eps), key);
    SETK(bitnet_gguf_set_u32(w, "general.file_type", (uint32_t)k->file_type), "general.file_type");
    SETK(bitnet_gguf_set_u32(w, AKEY("pooling_type"), (uint32_t)k->pooling_type), key);
    if (k->n_swa > 0) SETK(bitnet_gguf_set_u32(w, AKEY("attention.sliding_window"), (uint32_t)k->n_swa), key);
    if (k->swa_pattern > 0)
        SETK(bitnet_gguf_set_u32(w, AKEY("attention.sliding_window_pattern"), (uint32_t)k->swa_pattern), key);
    if (k->rope_freq_base_swa > 0.0f)
        SETK(bitnet_gguf_set_f32(w, AKEY("rope.freq_base_swa"), k->rope_freq_base_swa), key);
#undef AKEY
    return BITNET_OK;
}

/* The keys of "qwen3" / "gemma3" files, in the order of bitnet.cpp's convert-bitnet-embedding-to-gguf.py
 * (bitnet_dummy_write's comment; docs/EMBEDDINGS.md §1), then the optional Gemma3 SWA keys. */
static bitnet_status set_embedding_model_keys(bitnet_gguf_writer *w, const bitnet_dummy_params *p,
                                              const bitnet_dummy_vocab *v, bitnet_error *err) {
    const bitnet_embd_keys k = {
        .arch = bitnet_dummy_arch_name(p->arch), .name = p->name, .n_layer = p->n_layer, .n_ctx = p->n_ctx,
        .n_embd = p->n_embd, .n_ff = p->n_ff, .n_head = p->n_head, .n_head_kv = p->n_head_kv,
        .n_vocab = v->n_tokens, .head_dim = (int32_t)head_size(p), .rope_freq_base = p->rope_freq_base,
        .rms_eps = p->rms_eps, .file_type = bitnet_dummy_file_type(p->outtype),
        .pooling_type = p->pooling_type == BITNET_DUMMY_POOLING_DEFAULT ? 3 : p->pooling_type - 1,
        .n_swa = p->n_swa, .swa_pattern = p->swa_pattern, .rope_freq_base_swa = p->rope_freq_base_swa,
    };
    return bitnet_dummy_set_embedding_keys(w, &k, err);
}

/* The tokenizer flags of the embedding archs, after the vocabulary's keys (bitnet_dummy_write's comment):
 * add_space_prefix = false for gemma3 with a caller's vocabulary, add_eos_token = true. */
static bitnet_status set_embedding_vocab_flags(bitnet_gguf_writer *w, const bitnet_dummy_params *p, bool builtin_vocab,
                                               bitnet_error *err) {
    bitnet_status s;
    if (arch_info(p)->graph == BITNET_ARCH_GEMMA3 && !builtin_vocab)
        SETK(bitnet_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", false), "tokenizer.ggml.add_space_prefix");
    SETK(bitnet_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", true), "tokenizer.ggml.add_eos_token");
    return BITNET_OK;
}

/* The architecture keys, in the order of bitnet.cpp's files (bitnet_dummy_write's comment). */
static bitnet_status set_model_keys(bitnet_gguf_writer *w, const bitnet_dummy_params *p,
                                    const bitnet_dummy_vocab *v, bitnet_error *err) {
    if (embedding_arch(p)) return set_embedding_model_keys(w, p, v, err);
    bitnet_status s;
    const char *arch = bitnet_dummy_arch_name(p->arch);
    const bool bitnet = arch_info(p)->graph == BITNET_ARCH_BITNET; /* bitnet.cpp's "bitnet" key set */
    char key[128];
#define AKEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, (suffix)), key)
    SETK(bitnet_gguf_set_str(w, "general.architecture", arch), "general.architecture");
    SETK(bitnet_gguf_set_str(w, "general.name", p->name), "general.name");
    SETK(bitnet_gguf_set_u32(w, AKEY("block_count"), (uint32_t)p->n_layer), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("context_length"), (uint32_t)p->n_ctx), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("embedding_length"), (uint32_t)p->n_embd), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("feed_forward_length"), (uint32_t)p->n_ff), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("attention.head_count"), (uint32_t)p->n_head), key);
    SETK(bitnet_gguf_set_u32(w, AKEY("attention.head_count_kv"), (uint32_t)p->n_head_kv), key);
    SETK(bitnet_gguf_set_f32(w, AKEY("rope.freq_base"), p->rope_freq_base), key);
    SETK(bitnet_gguf_set_f32(w, AKEY("attention.layer_norm_rms_epsilon"), p->rms_eps), key);
    SETK(bitnet_gguf_set_u32(w, "general.file_type", (uint32_t)bitnet_dummy_file_type(p->outtype)),
         "general.file_type");
    SETK(bitnet_gguf_set_u32(w, AKEY("vocab_size"), (uint32_t)v->n_tokens), key);
    if (bitnet) {
        SETK(bitnet_gguf_set_str(w, AKEY("rope.scaling.type"), "linear"), key);
        SETK(bitnet_gguf_set_f32(w, AKEY("rope.scaling.factor"), 1.0f), key);
    } else {
        SETK(bitnet_gguf_set_u32(w, AKEY("rope.dimension_count"), (uint32_t)head_size(p)), key);
        if (p->n_embd_head > 0 && (int64_t)p->n_embd_head * p->n_head != p->n_embd) {
            SETK(bitnet_gguf_set_u32(w, AKEY("attention.key_length"), (uint32_t)p->n_embd_head), key);
            SETK(bitnet_gguf_set_u32(w, AKEY("attention.value_length"), (uint32_t)p->n_embd_head), key);
        }
    }
#undef AKEY
    return BITNET_OK;
}

/* The tokenizer keys of v (each only when the vocabulary has it). */
static bitnet_status set_vocab_keys(bitnet_gguf_writer *w, const bitnet_dummy_vocab *v, bitnet_error *err) {
    bitnet_status s;
    SETK(bitnet_gguf_set_str(w, "tokenizer.ggml.model", v->model ? v->model : "llama"), "tokenizer.ggml.model");
    {
        const char *pre = v->pre ? v->pre : "default";
        if (pre[0]) SETK(bitnet_gguf_set_str(w, "tokenizer.ggml.pre", pre), "tokenizer.ggml.pre");
    }
    SETK(bitnet_gguf_set_arr_str(w, "tokenizer.ggml.tokens", v->tokens, (uint64_t)v->n_tokens), "tokenizer.ggml.tokens");
    if (v->scores)
        SETK(bitnet_gguf_set_arr(w, "tokenizer.ggml.scores", BITNET_GGUF_FLOAT32, v->scores, (uint64_t)v->n_tokens),
             "tokenizer.ggml.scores");
    if (v->types)
        SETK(bitnet_gguf_set_arr(w, "tokenizer.ggml.token_type", BITNET_GGUF_INT32, v->types, (uint64_t)v->n_tokens),
             "tokenizer.ggml.token_type");
    if (v->n_merges)
        SETK(bitnet_gguf_set_arr_str(w, "tokenizer.ggml.merges", v->merges, v->n_merges), "tokenizer.ggml.merges");
    if (v->bos_id >= 0)
        SETK(bitnet_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos_id), "tokenizer.ggml.bos_token_id");
    if (v->eos_id >= 0)
        SETK(bitnet_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos_id), "tokenizer.ggml.eos_token_id");
    if (v->pad_id >= 0)
        SETK(bitnet_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad_id),
             "tokenizer.ggml.padding_token_id");
    return BITNET_OK;
}

/* general.quantization_version (quantized outtypes; not for the embedding archs), the I2_S layout record
 * (BITNET_I2S_LAYOUT_KEY = "x86": bitnet_pack_i2s's layout; unless no_layout_record) and the
 * bitnet.lut.<tensor>.tiles records (TL1/TL2, unless no_tile_record). */
static bitnet_status set_quant_keys(bitnet_gguf_writer *w, const bitnet_dummy_params *p, const tensor_desc *td,
                                    int64_t n_tensors, bitnet_error *err) {
    bitnet_status s;
    const bool tl = p->outtype == BITNET_DUMMY_TL1 || p->outtype == BITNET_DUMMY_TL2;
    if (p->outtype != BITNET_DUMMY_F32 && p->outtype != BITNET_DUMMY_F16 && !embedding_arch(p))
        SETK(bitnet_gguf_set_u32(w, "general.quantization_version", 2), "general.quantization_version");
    if (p->outtype == BITNET_DUMMY_I2_S && !p->no_layout_record)
        SETK(bitnet_gguf_set_str(w, BITNET_I2S_LAYOUT_KEY, "x86"), BITNET_I2S_LAYOUT_KEY);
    if (tl && !p->no_tile_record) {
        for (int64_t i = 0; i < n_tensors; i++) {
            if (td[i].kind != T_TERNARY) continue;
            char key[128];
            snprintf(key, sizeof key, "bitnet.lut.%s.tiles", td[i].name);
            const uint32_t tv[3] = {(uint32_t)td[i].tiles.BM, (uint32_t)td[i].tiles.BK, (uint32_t)td[i].tiles.bm};
            SETK(bitnet_gguf_set_arr(w, key, BITNET_GGUF_UINT32, tv, 3), key);
        }
    }
    return BITNET_OK;
}

/* The tensor infos, then the file: header, each tensor's data streamed in order, rename into place. */
static bitnet_status write_tensors(writer_ctx *c, const tensor_desc *td, const char *path, bitnet_error *err) {
    bitnet_gguf_writer *w = c->w;
    bitnet_status s;
    for (int64_t i = 0; i < c->n_tensors; i++) {
        int64_t ne[2] = {td[i].K, td[i].M};
        if ((s = bitnet_gguf_add_tensor(w, td[i].name, td[i].type, td[i].kind == T_NORM ? 1 : 2, ne, err)) != BITNET_OK)
            return s;
    }
    if ((s = bitnet_gguf_write_begin(w, path, err)) != BITNET_OK) return s;
    for (int64_t i = 0; i < c->n_tensors; i++) {
        c->index = i;
        s = td[i].kind == T_TERNARY ? write_ternary(c, &td[i]) : write_dense(c, &td[i]);
        if (s != BITNET_OK) {
            bitnet_gguf_write_abort(w);
            return s;
        }
    }
    return bitnet_gguf_write_end(w, err);
}

bitnet_status bitnet_dummy_write(const bitnet_dummy_params *params, const char *path, bitnet_error *err) {
    if (!params || !path) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_dummy_write: NULL params or path");
    {
        const uint16_t one = 1;
        uint8_t lo;
        memcpy(&lo, &one, 1);
        if (lo != 1) return bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "big-endian hosts are not supported (GGUF is little endian)");
    }
    bitnet_dummy_params p = *params;
    apply_defaults(&p);

    bitnet_status s = check_params(&p, err);
    if (s != BITNET_OK) return s;

    bitnet_dummy_vocab *own_vocab = NULL;
    if (!p.vocab) {
        s = bitnet_dummy_vocab_builtin(p.n_vocab, &own_vocab, err);
        if (s != BITNET_OK) return s;
        p.vocab = own_vocab;
    }
    const bitnet_dummy_vocab *v = p.vocab;
    int n_order, n_layer_tensors = 0;
    const layer_tensor *order = layer_order(&p, &n_order); /* the count; describe_tensors fills the entries */
    for (int j = 0; j < n_order; j++) n_layer_tensors += layer_tensor_used(&p, &order[j]);
    const int64_t n_tensors = 2 + (p.output_separate ? 1 : 0) + (int64_t)p.n_layer * n_layer_tensors;

    writer_ctx c = {0};
    c.p = &p;
    c.err = err;
    c.n_tensors = n_tensors;
    c.chunk_bytes = p.chunk_bytes ? p.chunk_bytes : ((size_t)8 << 20);
    tensor_desc *td = (tensor_desc *)calloc((size_t)n_tensors, sizeof *td);
    bitnet_gguf_writer *w = bitnet_gguf_writer_new();
    c.w = w;
    if (!td || !w) {
        s = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory describing %lld tensors", (long long)n_tensors);
        goto done;
    }
    if ((s = describe_tensors(&p, v, td, n_tensors, &c.bytes_total, err)) != BITNET_OK ||
        (s = set_model_keys(w, &p, v, err)) != BITNET_OK || (s = set_vocab_keys(w, v, err)) != BITNET_OK ||
        (embedding_arch(&p) && (s = set_embedding_vocab_flags(w, &p, own_vocab != NULL, err)) != BITNET_OK) ||
        (s = set_quant_keys(w, &p, td, n_tensors, err)) != BITNET_OK) {
        goto done;
    }
    s = write_tensors(&c, td, path, err);

done:
    bitnet_gguf_writer_free(w);
    free(td);
    free(c.buf_a);
    free(c.buf_b);
    bitnet_dummy_vocab_free(own_vocab);
    return s;
}
