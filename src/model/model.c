/* model.c — architectures "bitnet", "bitnet-b1.58" (alias "bitnet-25") and "llama" (the graphs and
 * their sources: model.h): loading and validating a GGUF file, preparing the ternary weights for one
 * kernel path, the F16 KV cache and the forward pass.
 *
 * Layout of this file, top to bottom:
 *   1. small float helpers (F16 table, dot products with a fixed summation order, RMSNorm)
 *   2. loading: hyperparameters from keys, tensors checked against them, ternary weights handed to
 *      the LUT host (bitnet_lut_transform_tensor) with tiles from the file or the built-in tables
 *   3. the context: KV cache, scratch buffers, RoPE tables, thread pool
 *   4. the forward pass (one thread-pool task per batch, barriers between the steps), llama2.c
 *      style: the math from top to bottom, each buffer with its shape
 *
 * Determinism: every float reduction has a fixed order that does not depend on the thread count, the
 * batch split or the ISA (no FMA: the build uses -ffp-contract=off; libm only for expf, sqrtf and the
 * double cos/sin/pow of the RoPE tables, whose results are rounded to float once per context). Every
 * output element is written by exactly one thread. */
#include "model/model.h"

#include "kernels/i2s/i2s.h"
#include "kernels/lut/lut.h"
#include "runtime/lut_host.h"
#include "kernels/lut/pack.h"
#include "base/quants.h"
#include "runtime/threadpool.h"
#include "tilefile/tile_file.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#ifndef BITNET_LUT_TABLE_DEFAULT
#define BITNET_LUT_TABLE_DEFAULT "default"
#endif

/* Upper bounds that keep every size computation far from overflow; real models are far below. */
#define MAX_LAYERS 4096
#define MAX_DIM (1 << 20)      /* n_embd, n_ff */
#define MAX_VOCAB (1 << 24)
#define MAX_CTX (1 << 24)

/* =============================================================================================
 * 1. Float helpers
 * =========================================================================================== */

/* binary16 → binary32 for all 65536 codes (exact; built once from bitnet_fp16_to_fp32). */
static float g_f16_table[1 << 16];
static pthread_once_t g_f16_once = PTHREAD_ONCE_INIT;

static void dot_f16_select(void);

static void f16_table_init(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) g_f16_table[i] = bitnet_fp16_to_fp32((uint16_t)i);
    dot_f16_select();
}

static inline float f16(uint16_t h) { return g_f16_table[h]; }

/* Σ a[i]·b[i] over n floats. Fixed order: eight lane sums s[i % 8] accumulated in index order, then
 * the tree ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)). */
static float dot_f32(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    const int64_t n8 = n - n % 8;
    for (int64_t i = 0; i < n8; i += 8) {
        for (int l = 0; l < 8; l++) s[l] += a[i + l] * b[i + l];
    }
    for (int64_t i = n8; i < n; i++) s[i - n8] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* Σ a[i]·b[i] for a binary16 vector a and a float vector b whose values are binary16 values (rounded
 * with bitnet_fp32_to_fp16 first). Such a product is exact in binary32, so only the summation order
 * matters, and it is fixed: 32 lane sums s[i % 32] accumulated in index order, folded as lanes
 * (l, l+16), (l, l+8), (l, l+4), then (s0+s1) + (s2+s3); a tail of n % 32 products is added in double.
 * This is the order of ggml's AVX2 F16 dot product (four 8-lane accumulators), so the attention and
 * the F16 head round like bitnet.cpp's x86 build. The scalar, AVX2/F16C and NEON versions below all
 * compute exactly this (same lanes, same fold), so results are identical on every ISA. */
static float dot_f16_finish(float s[32], const uint16_t *a, const float *b, int64_t n32, int64_t n) {
    for (int l = 0; l < 16; l++) s[l] += s[l + 16];
    for (int l = 0; l < 8; l++) s[l] += s[l + 8];
    for (int l = 0; l < 4; l++) s[l] += s[l + 4];
    double sum = (double)((s[0] + s[1]) + (s[2] + s[3]));
    for (int64_t i = n32; i < n; i++) sum += (double)(f16(a[i]) * b[i]);
    return (float)sum;
}

static float dot_f16_scalar(const uint16_t *a, const float *b, int64_t n) {
    float s[32] = {0};
    const int64_t n32 = n - n % 32;
    for (int64_t i = 0; i < n32; i += 32) {
        for (int l = 0; l < 32; l++) s[l] += f16(a[i + l]) * b[i + l];
    }
    return dot_f16_finish(s, a, b, n32, n);
}

#if defined(__x86_64__)
/* lanes 8j..8j+7 in accumulator j; AVX2 CPUs have F16C (bitnet_cpu_supports("avx2") checks both) */
__attribute__((target("avx2,f16c"))) static float dot_f16_avx2(const uint16_t *a, const float *b, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int64_t n32 = n - n % 32;
    for (int64_t i = 0; i < n32; i += 32) {
        for (int j = 0; j < 4; j++) {
            const __m256 va = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(a + i + 8 * j)));
            acc[j] = _mm256_add_ps(acc[j], _mm256_mul_ps(va, _mm256_loadu_ps(b + i + 8 * j)));
        }
    }
    /* dot_f16_finish's fold on whole vectors (the same additions lane by lane): lanes (l, l+16) are
     * acc[0]+acc[2] and acc[1]+acc[3], then (l, l+8), then (l, l+4) across the 128-bit halves */
    const __m256 h16 = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    const __m128 f4 = _mm_add_ps(_mm256_castps256_ps128(h16), _mm256_extractf128_ps(h16, 1));
    float s[4];
    _mm_storeu_ps(s, f4);
    double sum = (double)((s[0] + s[1]) + (s[2] + s[3]));
    for (int64_t i = n32; i < n; i++) sum += (double)(f16(a[i]) * b[i]);
    return (float)sum;
}
#endif

#if defined(__aarch64__)
/* lanes 4j..4j+3 in accumulator j */
static float dot_f16_neon(const uint16_t *a, const float *b, int64_t n) {
    float32x4_t acc[8];
    for (int j = 0; j < 8; j++) acc[j] = vdupq_n_f32(0.0f);
    const int64_t n32 = n - n % 32;
    for (int64_t i = 0; i < n32; i += 32) {
        for (int j = 0; j < 8; j++) {
            const float32x4_t va = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i + 4 * j)));
            acc[j] = vaddq_f32(acc[j], vmulq_f32(va, vld1q_f32(b + i + 4 * j)));
        }
    }
    float s[32];
    for (int j = 0; j < 8; j++) vst1q_f32(s + 4 * j, acc[j]);
    return dot_f16_finish(s, a, b, n32, n);
}
#endif

static float (*g_dot_f16)(const uint16_t *a, const float *b, int64_t n) = dot_f16_scalar;

static float dot_q8_0_scalar(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n);
#if defined(__x86_64__)
static float dot_q8_0_avx2(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n);
#elif defined(__aarch64__)
static float dot_q8_0_neon(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n);
#endif
static float (*g_dot_q8_0)(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n);

/* The F16 and Q8_0 dot products for this CPU (BITNET_ISA=scalar, read by bitnet_cpu_supports, keeps
 * the scalar ones; the tests compare them). */
static void dot_f16_select(void) {
#if defined(__x86_64__)
    if (bitnet_cpu_supports("avx2")) {
        g_dot_f16 = dot_f16_avx2;
        g_dot_q8_0 = dot_q8_0_avx2;
    }
#elif defined(__aarch64__)
    if (bitnet_cpu_supports("neon")) {
        g_dot_f16 = dot_f16_neon;
        g_dot_q8_0 = dot_q8_0_neon;
    }
#endif
}

static inline float dot_f16(const uint16_t *a, const float *b, int64_t n) { return g_dot_f16(a, b, n); }

/* x rounded to the nearest binary16 value, as a float */
static inline float round_f16(float x) { return f16(bitnet_fp32_to_fp16(x)); }

/* Q8_0 × Q8_0 dot product of n/32 blocks: Σ_blocks (float)(Σ qa·qb) · (da·db), blocks in order
 * (ggml's Q8_0 vec_dot definition). The integer block sums are exact (|Σ| ≤ 32·128·127 < 2^24, so the
 * conversion to float is exact too); only the float steps round, and every version below performs
 * the same float operations in the same order: per block p = (float)isum · (da·db), then sum += p in
 * block order. b must hold values in [-127, 127] (bitnet_quantize_row_q8_0's output); a may hold -128. */
static float dot_q8_0_scalar(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += (int32_t)a[i].qs[j] * (int32_t)b[i].qs[j];
        sum += (float)isum * (f16(a[i].d) * f16(b[i].d));
    }
    return sum;
}

#if defined(__x86_64__)
/* Σ qa·qb of one block in 8 int32 lanes: |qa| (u8, ≤ 128) times qb with qa's sign (|qb| ≤ 127),
 * pairs summed to int16 (≤ 2·128·127 < 2^15, no saturation), then pairs of those to int32. */
__attribute__((target("avx2"))) static inline __m256i q8_block_dot_avx2(const bitnet_block_q8_0 *a,
                                                                        const bitnet_block_q8_0 *b) {
    const __m256i va = _mm256_loadu_si256((const __m256i *)a->qs);
    const __m256i vb = _mm256_loadu_si256((const __m256i *)b->qs);
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(va, va), _mm256_sign_epi8(vb, va));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

__attribute__((target("avx2,f16c"))) static float dot_q8_0_avx2(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b,
                                                          int64_t n) {
    const int64_t nb = n / 32, nb4 = nb - nb % 4;
    float sum = 0.0f;
    for (int64_t i = 0; i < nb4; i += 4) {
        const __m256i s0 = q8_block_dot_avx2(a + i, b + i), s1 = q8_block_dot_avx2(a + i + 1, b + i + 1);
        const __m256i s2 = q8_block_dot_avx2(a + i + 2, b + i + 2), s3 = q8_block_dot_avx2(a + i + 3, b + i + 3);
        /* lanes of block k summed into lane k (hadd pairs within 128-bit halves, then the two halves) */
        const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
        const __m128i isum = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        /* da·db per block: the binary16 scales widened by F16C (exact, as the table) then multiplied */
        const __m128 da = _mm_cvtph_ps(_mm_setr_epi16((short)a[i].d, (short)a[i + 1].d, (short)a[i + 2].d,
                                                      (short)a[i + 3].d, 0, 0, 0, 0));
        const __m128 db = _mm_cvtph_ps(_mm_setr_epi16((short)b[i].d, (short)b[i + 1].d, (short)b[i + 2].d,
                                                      (short)b[i + 3].d, 0, 0, 0, 0));
        const __m128 d = _mm_mul_ps(da, db);
        float p[4];
        _mm_storeu_ps(p, _mm_mul_ps(_mm_cvtepi32_ps(isum), d));
        sum += p[0];
        sum += p[1];
        sum += p[2];
        sum += p[3];
    }
    for (int64_t i = nb4; i < nb; i++) {
        const __m256i s = q8_block_dot_avx2(a + i, b + i);
        const __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        const __m128i h2 = _mm_hadd_epi32(h, h);
        const int32_t isum = _mm_cvtsi128_si32(_mm_hadd_epi32(h2, h2));
        sum += (float)isum * (f16(a[i].d) * f16(b[i].d));
    }
    return sum;
}
#endif

#if defined(__aarch64__)
static float dot_q8_0_neon(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b,
                                                  int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int32x4_t acc = vdupq_n_s32(0);
        for (int h = 0; h < 32; h += 16) {
            const int8x16_t va = vld1q_s8(a[i].qs + h), vb = vld1q_s8(b[i].qs + h);
            /* products ≤ 128·127 in int16; two of them summed by vpadal into int32 */
            acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(va), vget_low_s8(vb)));
            acc = vpadalq_s16(acc, vmull_s8(vget_high_s8(va), vget_high_s8(vb)));
        }
        sum += (float)vaddvq_s32(acc) * (f16(a[i].d) * f16(b[i].d));
    }
    return sum;
}
#endif

static float (*g_dot_q8_0)(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) = dot_q8_0_scalar;

static inline float dot_q8_0(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) {
    return g_dot_q8_0(a, b, n);
}

/* One row of Q6_K (ggml's k-quant, 256 weights per 210-byte block: ql[128] low 4 bits, qh[64] high 2
 * bits, scales[16] int8 per 16 weights, d binary16) to float, the format's definition: in each half of
 * 128 weights, for l < 32 the four weights l, l+32, l+64, l+96 take ql[l] & 15, ql[l+32] & 15,
 * ql[l] >> 4, ql[l+32] >> 4 as low bits and bit pairs 0-1, 2-3, 4-5, 6-7 of qh[l] as high bits;
 * value = d · scale[16-weight group] · (q − 32). Published BitNet-b1.58-2B-4T files may carry the
 * token embedding as Q6_K (formats.md). n % 256 == 0 (checked at load). */
static void row_q6_k_to_f32(const uint8_t *row, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++) {
        const uint8_t *ql = row + b * 210, *qh = ql + 128;
        const int8_t *sc = (const int8_t *)(ql + 192);
        uint16_t dh;
        memcpy(&dh, ql + 208, 2);
        const float d = f16(dh);
        float *out = y + b * 256;
        for (int half = 0; half < 2; half++) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = (int)((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32;
                const int q2 = (int)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = (int)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = (int)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                out[l] = d * (float)sc[is] * (float)q1;
                out[l + 32] = d * (float)sc[is + 2] * (float)q2;
                out[l + 64] = d * (float)sc[is + 4] * (float)q3;
                out[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
            out += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* A row of the embedding / head types (F32, F16, Q8_0, Q6_K; checked at load) to float. */
static void embd_row_to_f32(int type, const uint8_t *row, float *y, int64_t n) {
    if (type == BITNET_TYPE_Q6_K) row_q6_k_to_f32(row, y, n);
    else bitnet_row_to_f32(type, row, y, n, NULL);
}

/* RMSNorm (Zhang & Sennrich 2019), as ggml computes it: mean of squares summed in double in index
 * order, then float: y[i] = (x[i] · 1/sqrtf(mean + eps)) · w[i].  x, y, w: [n]; y may alias x. */
static void rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

/* SiLU (Elfwing et al. 2018): x · sigmoid(x) = x / (1 + e^-x). */
static inline float silu(float x) { return x / (1.0f + expf(-x)); }

/* Squared ReLU (So et al. 2021, "Primer"; BitNet b1.58 2B4T's "relu2"), as ggml's relu then sqr:
 * r = x > 0 ? x : 0, then r · r (NaN → 0). */
static inline float relu2(float x) {
    const float r = x > 0.0f ? x : 0.0f;
    return r * r;
}

static void *alloc64(size_t bytes) {
    if (bytes == 0) bytes = 64;
    if (bytes > SIZE_MAX - 63) return NULL;
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes);
}

/* a * b * c with overflow check; false on overflow. */
static bool mul3(size_t a, size_t b, size_t c, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return false;
    const size_t ab = a * b;
    if (ab != 0 && c > SIZE_MAX / ab) return false;
    *out = ab * c;
    return true;
}

/* =============================================================================================
 * 2. Model and loading
 * =========================================================================================== */

/* A projection weight: a ternary tensor on the LUT host path, or a dense float matrix (F32/F16
 * files) multiplied in float without activation quantization. */
typedef struct weight {
    bitnet_tensor t;       /* name, type, shape; for the LUT path the host's extra is attached here */
    bool lut;              /* true: bitnet_mul_mat; false: dense float */
    const float *dense;    /* dense: [M][K] row-major (file mapping or dense_owned) */
    float *dense_owned;
    int64_t M, K;
    bool has_scale;        /* blk.N.<proj>.scale present: output multiplied by out_scale */
    float out_scale;
} weight;

typedef struct layer {
    float *attn_norm;      /* [n_embd] */
    float *attn_sub_norm;  /* [q_dim]; NULL without sub-norms ("llama") */
    float *ffn_norm;       /* [n_embd] */
    float *ffn_sub_norm;   /* [n_ff]; NULL without sub-norms */
    weight wq, wk, wv, wo; /* [n_embd → q_dim], [n_embd → kv_dim] ×2, [q_dim → n_embd] */
    weight w_gate, w_up;   /* [n_embd → n_ff] */
    weight w_down;         /* [n_ff → n_embd] */
} layer;

#define N_PROJ 7

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
    const uint8_t *head_data;               /* [n_vocab] rows: the file's data or head_owned */
    bitnet_block_q8_0 *head_owned;          /* head requantized to Q8_0 at load, or NULL */
    float *output_norm;                     /* [n_embd] */
    layer *layers;                          /* [n_layer] */
    uint64_t n_params, size_bytes;
    bool lut_used;                          /* weights were handed to the LUT host */
    char summary[512];
};

/* Models alive that hold LUT-host extras; the host's table is released with the last of them
 * (bitnet_lut_free releases every extra at once). */
static atomic_int g_lut_models;

static weight *layer_proj(layer *L, int i) {
    weight *w[N_PROJ] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
    return w[i];
}

typedef struct loader {
    const char *path;
    bitnet_gguf *g;
    char arch[32];
    bitnet_error *err;
} loader;

static bitnet_status key_present(loader *ld, const char *key) {
    if (bitnet_gguf_find_kv(ld->g, key) < 0) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: missing required key '%s'", ld->path, key);
    }
    return BITNET_OK;
}

/* Read <arch>.<suffix> as a positive integer in [lo, hi]. */
static bitnet_status get_int_key(loader *ld, const char *suffix, bool required, int64_t dflt, int64_t lo,
                                 int64_t hi, int32_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    int64_t v = dflt;
    if (bitnet_gguf_find_kv(ld->g, key) >= 0) {
        bitnet_status st = bitnet_gguf_get_i64(ld->g, key, &v, ld->err);
        if (st != BITNET_OK) return st;
    } else if (required) {
        return key_present(ld, key);
    }
    if (v < lo || v > hi) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = %lld is outside [%lld, %lld]", ld->path,
                           key, (long long)v, (long long)lo, (long long)hi);
    }
    *out = (int32_t)v;
    return BITNET_OK;
}

/* Read <arch>.<suffix> as a finite float > 0. */
static bitnet_status get_pos_float_key(loader *ld, const char *suffix, bool required, float dflt, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->arch, suffix);
    float v = dflt;
    if (bitnet_gguf_find_kv(ld->g, key) >= 0) {
        bitnet_status st = bitnet_gguf_get_f32(ld->g, key, &v, ld->err);
        if (st != BITNET_OK) return st;
    } else if (required) {
        return key_present(ld, key);
    }
    if (!(v > 0.0f) || isinf(v)) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = %g must be a finite number > 0", ld->path,
                           key, (double)v);
    }
    *out = v;
    return BITNET_OK;
}

/* The graph facts of each architecture name (sources: model.h). */
typedef struct arch_info {
    const char *name;
    bitnet_arch id;
    bitnet_ffn_act act;
    bitnet_rope_type rope;
    bool sub_norms;
} arch_info;

static const arch_info k_archs[] = {
    {"bitnet", BITNET_ARCH_BITNET, BITNET_ACT_SILU, BITNET_ROPE_NEOX, true},
    {"bitnet-b1.58", BITNET_ARCH_BITNET_B158, BITNET_ACT_RELU2, BITNET_ROPE_NEOX, true},
    {"bitnet-25", BITNET_ARCH_BITNET_B158, BITNET_ACT_RELU2, BITNET_ROPE_NEOX, true},
    {"llama", BITNET_ARCH_LLAMA, BITNET_ACT_SILU, BITNET_ROPE_NORM, false},
};

static bitnet_status load_hparams(loader *ld, bitnet_hparams *hp) {
    bitnet_status st;
    memset(hp, 0, sizeof *hp);

    const char *s;
    size_t len;
    if ((st = key_present(ld, "general.architecture")) != BITNET_OK) return st;
    if ((st = bitnet_gguf_get_str(ld->g, "general.architecture", &s, &len, ld->err)) != BITNET_OK) return st;
    const arch_info *ai = NULL;
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0] && !ai; i++) {
        if (len == strlen(k_archs[i].name) && memcmp(s, k_archs[i].name, len) == 0) ai = &k_archs[i];
    }
    if (!ai) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: unsupported architecture '%.*s' (general.architecture); this build runs 'bitnet', "
                           "'bitnet-b1.58', 'bitnet-25' and 'llama'",
                           ld->path, (int)(len > 64 ? 64 : len), s);
    }
    memcpy(ld->arch, s, len);
    ld->arch[len] = '\0';
    memcpy(hp->arch, s, len);
    hp->arch[len] = '\0';
    hp->arch_id = ai->id;
    hp->ffn_act = ai->act;
    hp->rope_type = ai->rope;
    hp->sub_norms = ai->sub_norms;

    if ((st = get_int_key(ld, "block_count", true, 0, 1, MAX_LAYERS, &hp->n_layer)) != BITNET_OK) return st;
    if ((st = get_int_key(ld, "context_length", true, 0, 1, MAX_CTX, &hp->n_ctx_train)) != BITNET_OK) return st;
    if ((st = get_int_key(ld, "embedding_length", true, 0, 1, MAX_DIM, &hp->n_embd)) != BITNET_OK) return st;
    if ((st = get_int_key(ld, "feed_forward_length", true, 0, 1, MAX_DIM, &hp->n_ff)) != BITNET_OK) return st;
    if ((st = get_int_key(ld, "attention.head_count", true, 0, 1, MAX_DIM, &hp->n_head)) != BITNET_OK) return st;
    /* head_count_kv defaults to head_count (no GQA), as in llama.cpp */
    if ((st = get_int_key(ld, "attention.head_count_kv", false, hp->n_head, 1, MAX_DIM, &hp->n_head_kv)) !=
        BITNET_OK)
        return st;
    if ((st = get_pos_float_key(ld, "attention.layer_norm_rms_epsilon", true, 0.0f, &hp->rms_eps)) != BITNET_OK)
        return st;
    /* llama.cpp's default RoPE base when the key is absent */
    if ((st = get_pos_float_key(ld, "rope.freq_base", false, 10000.0f, &hp->rope_freq_base)) != BITNET_OK)
        return st;

    /* RoPE scaling: "linear" (or "none") only; frequency scale = 1 / factor. */
    char key[128];
    hp->rope_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", ld->arch);
    bool linear = true;
    if (bitnet_gguf_find_kv(ld->g, key) >= 0) {
        if ((st = bitnet_gguf_get_str(ld->g, key, &s, &len, ld->err)) != BITNET_OK) return st;
        if (len == 4 && memcmp(s, "none", 4) == 0) {
            linear = false;
        } else if (!(len == 6 && memcmp(s, "linear", 6) == 0)) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                               "%s: key '%s' = '%.*s' is not supported (only 'linear' and 'none')", ld->path, key,
                               (int)(len > 64 ? 64 : len), s);
        }
    }
    snprintf(key, sizeof key, "%s.rope.scaling.factor", ld->arch);
    if (linear && bitnet_gguf_find_kv(ld->g, key) >= 0) {
        float factor = 1.0f;
        if ((st = bitnet_gguf_get_f32(ld->g, key, &factor, ld->err)) != BITNET_OK) return st;
        if (factor != 0.0f) { /* 0 means "not set" in llama.cpp's writer */
            if (!(factor > 0.0f) || isinf(factor)) {
                return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = %g must be a finite number > 0",
                                   ld->path, key, (double)factor);
            }
            hp->rope_scale = 1.0f / factor;
        }
    }

    /* head size: attention.key_length (llama.cpp's n_embd_head_k), default n_embd / n_head;
     * attention.value_length must be the same (one head size for Q, K and V) */
    bool have_kl = false;
    {
        char kl_key[128];
        snprintf(kl_key, sizeof kl_key, "%s.attention.key_length", ld->arch);
        have_kl = bitnet_gguf_find_kv(ld->g, kl_key) >= 0;
    }
    if (have_kl) {
        if ((st = get_int_key(ld, "attention.key_length", true, 0, 2, MAX_DIM, &hp->n_embd_head)) != BITNET_OK)
            return st;
    } else {
        if (hp->n_embd % hp->n_head != 0) {
            return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                               "%s: %s.embedding_length = %d is not a multiple of %s.attention.head_count = %d",
                               ld->path, ld->arch, hp->n_embd, ld->arch, hp->n_head);
        }
        hp->n_embd_head = hp->n_embd / hp->n_head;
    }
    if (hp->n_embd_head % 2 != 0) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: head dimension %s = %d must be even (RoPE pairs)",
                           ld->path, have_kl ? "attention.key_length" : "n_embd / n_head", hp->n_embd_head);
    }
    int32_t vlen = hp->n_embd_head;
    if ((st = get_int_key(ld, "attention.value_length", false, hp->n_embd_head, 1, MAX_DIM, &vlen)) != BITNET_OK)
        return st;
    if (vlen != hp->n_embd_head) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: %s.attention.value_length = %d differs from the key head size %d (not supported)",
                           ld->path, ld->arch, vlen, hp->n_embd_head);
    }
    if ((int64_t)hp->n_head * hp->n_embd_head > MAX_DIM) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: %s.attention.head_count · head size = %d · %d is too large",
                           ld->path, ld->arch, hp->n_head, hp->n_embd_head);
    }
    if (hp->n_head_kv > hp->n_head || hp->n_head % hp->n_head_kv != 0) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                           "%s: %s.attention.head_count = %d is not a multiple of %s.attention.head_count_kv = %d",
                           ld->path, ld->arch, hp->n_head, ld->arch, hp->n_head_kv);
    }
    int32_t n_rot = hp->n_embd_head;
    if ((st = get_int_key(ld, "rope.dimension_count", false, hp->n_embd_head, 0, MAX_DIM, &n_rot)) != BITNET_OK)
        return st;
    if (n_rot != hp->n_embd_head) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: %s.rope.dimension_count = %d differs from the head dimension %d (partial RoPE is "
                           "not supported)",
                           ld->path, ld->arch, n_rot, hp->n_embd_head);
    }
    return BITNET_OK;
}

static void format_ne(char *buf, size_t size, const int64_t *ne, int n_dims) {
    int o = snprintf(buf, size, "[");
    for (int i = 0; i < n_dims && o > 0 && (size_t)o < size; i++) {
        o += snprintf(buf + o, size - (size_t)o, "%s%lld", i ? ", " : "", (long long)ne[i]);
    }
    if (o > 0 && (size_t)o < size) snprintf(buf + o, size - (size_t)o, "]");
}

/* Find a tensor and check its shape against the hparams: expected ne[0..n_dims-1], trailing dims 1. */
static bitnet_status find_tensor(loader *ld, const char *name, int n_dims, int64_t ne0, int64_t ne1, bool required,
                                 const bitnet_gguf_tensor_info **out) {
    *out = NULL;
    const bitnet_gguf_tensor_info *ti = bitnet_gguf_find_tensor(ld->g, name);
    if (!ti) {
        if (!required) return BITNET_OK;
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: missing required tensor '%s'", ld->path, name);
    }
    const int64_t want[4] = {ne0, n_dims > 1 ? ne1 : 1, 1, 1};
    bool ok = true;
    for (int i = 0; i < 4; i++) ok = ok && ti->ne[i] == want[i];
    if (!ok) {
        char got_s[96], want_s[64];
        format_ne(got_s, sizeof got_s, ti->ne, ti->n_dims);
        format_ne(want_s, sizeof want_s, want, n_dims);
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                           "%s: tensor '%s' has shape ne = %s, expected %s from the hyperparameters", ld->path, name,
                           got_s, want_s);
    }
    *out = ti;
    return BITNET_OK;
}

/* A norm weight (F32 or F16) [n] as an owned float vector. */
static bitnet_status load_vector(loader *ld, const char *name, int64_t n, float **out) {
    const bitnet_gguf_tensor_info *ti;
    bitnet_status st = find_tensor(ld, name, 1, n, 1, true, &ti);
    if (st != BITNET_OK) return st;
    if (ti->type != BITNET_TYPE_F32 && ti->type != BITNET_TYPE_F16) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (id %d); expected F32 or F16",
                           ld->path, name, bitnet_type_name(ti->type), ti->type);
    }
    float *v = malloc((size_t)n * sizeof(float));
    if (!v) return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory for tensor '%s'", ld->path, name);
    st = bitnet_row_to_f32(ti->type, ti->data, v, n, ld->err);
    if (st != BITNET_OK) {
        free(v);
        return st;
    }
    *out = v;
    return BITNET_OK;
}

/* A projection weight `name` with K inputs and M outputs (ne = [K, M]) and its optional
 * "<name without .weight>.scale" [1] tensor. Ternary types are only described here; they are
 * handed to the LUT host by prepare_lut_weights once all shapes are known. */
static bitnet_status load_weight(loader *ld, const char *name, int64_t K, int64_t M, weight *w) {
    const bitnet_gguf_tensor_info *ti;
    bitnet_status st = find_tensor(ld, name, 2, K, M, true, &ti);
    if (st != BITNET_OK) return st;
    memset(w, 0, sizeof *w);
    snprintf(w->t.name, sizeof w->t.name, "%s", name);
    w->t.type = ti->type;
    w->t.n_dims = 2;
    w->t.ne[0] = K;
    w->t.ne[1] = M;
    w->t.ne[2] = w->t.ne[3] = 1;
    w->t.data = (void *)ti->data; /* read-only mapping: the LUT host reads it, never writes */
    w->t.nbytes = ti->nbytes;
    w->M = M;
    w->K = K;
    w->out_scale = 1.0f;

    switch (ti->type) {
    case BITNET_TYPE_I2_S:
    case BITNET_TYPE_TL1:
    case BITNET_TYPE_TL2:
        w->lut = true;
        w->t.nb[0] = 1;
        w->t.nb[1] = (size_t)K / 4;
        break;
    case BITNET_TYPE_F32:
        w->dense = (const float *)ti->data;
        w->t.nb[0] = 4;
        w->t.nb[1] = (size_t)K * 4;
        break;
    case BITNET_TYPE_F16: {
        w->dense_owned = malloc((size_t)M * (size_t)K * sizeof(float));
        if (!w->dense_owned) return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory for '%s'", ld->path, name);
        st = bitnet_row_to_f32(BITNET_TYPE_F16, ti->data, w->dense_owned, M * K, ld->err);
        if (st != BITNET_OK) return st;
        w->dense = w->dense_owned;
        w->t.nb[0] = 2;
        w->t.nb[1] = (size_t)K * 2;
        break;
    }
    default:
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' has type %s (id %d); projection weights must be I2_S, TL1, TL2, F32 or F16",
                           ld->path, name, bitnet_type_name(ti->type), ti->type);
    }
    w->t.nb[2] = w->t.nb[3] = w->t.nb[1] * (size_t)M;

    /* optional per-projection output scale, e.g. blk.0.attn_q.scale */
    char sname[128];
    size_t base = strlen(name);
    if (base > 7 && strcmp(name + base - 7, ".weight") == 0) base -= 7;
    snprintf(sname, sizeof sname, "%.*s.scale", (int)base, name);
    const bitnet_gguf_tensor_info *si;
    if ((st = find_tensor(ld, sname, 1, 1, 1, false, &si)) != BITNET_OK) return st;
    if (si) {
        if (si->type != BITNET_TYPE_F32 && si->type != BITNET_TYPE_F16) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s (id %d); expected F32 or F16",
                               ld->path, sname, bitnet_type_name(si->type), si->type);
        }
        if ((st = bitnet_row_to_f32(si->type, si->data, &w->out_scale, 1, ld->err)) != BITNET_OK) return st;
        if (!isfinite(w->out_scale)) {
            return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: tensor '%s' holds %g, not a finite scale", ld->path,
                               sname, (double)w->out_scale);
        }
        w->has_scale = true;
    }
    return BITNET_OK;
}

static int path_type(bitnet_kernel_path p) {
    return p == BITNET_PATH_TL1 ? BITNET_TYPE_TL1 : p == BITNET_PATH_TL2 ? BITNET_TYPE_TL2 : BITNET_TYPE_I2_S;
}

/* AUTO: TL2 on x86-64 with AVX2, TL1 on AArch64, the I2_S reference path elsewhere. */
static bitnet_kernel_path resolve_path(bitnet_kernel_path p) {
    if (p != BITNET_PATH_AUTO) return p;
#if defined(__x86_64__) || defined(_M_X64)
    return bitnet_cpu_supports("avx2") ? BITNET_PATH_TL2 : BITNET_PATH_I2S;
#elif defined(__aarch64__)
    return BITNET_PATH_TL1;
#else
    return BITNET_PATH_I2S;
#endif
}

/* Tiles recorded by our writer: key bitnet.lut.<tensor>.tiles = [BM, BK, bm] (LAYOUTS.md §7).
 * *found = false when the key is absent. */
static bitnet_status file_tiles(loader *ld, const char *tensor, bitnet_tiles *tiles, bool *found) {
    char key[192];
    snprintf(key, sizeof key, "bitnet.lut.%s.tiles", tensor);
    *found = false;
    if (bitnet_gguf_find_kv(ld->g, key) < 0) return BITNET_OK;
    bitnet_gguf_type et;
    uint64_t n;
    const void *data;
    bitnet_status st = bitnet_gguf_get_arr(ld->g, key, &et, &n, &data, ld->err);
    if (st != BITNET_OK) return st;
    if (n != 3 || (et != BITNET_GGUF_UINT32 && et != BITNET_GGUF_INT32)) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' must be an array of 3 uint32 [BM, BK, bm]",
                           ld->path, key);
    }
    uint32_t v[3];
    memcpy(v, data, sizeof v);
    for (int i = 0; i < 3; i++) {
        if (v[i] == 0 || v[i] > (1u << 20)) {
            return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = [%u, %u, %u] holds an impossible tile",
                               ld->path, key, v[0], v[1], v[2]);
        }
    }
    tiles->BM = (int32_t)v[0];
    tiles->BK = (int32_t)v[1];
    tiles->bm = (int32_t)v[2];
    *found = true;
    return BITNET_OK;
}

/* Distinct (M, K) of the model's LUT weights. shapes: room for n_layer·N_PROJ entries. */
static size_t lut_shapes(const bitnet_model *m, int64_t (*shapes)[2]) {
    size_t n = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) continue;
            bool seen = false;
            for (size_t i = 0; i < n && !seen; i++) seen = shapes[i][0] == w->M && shapes[i][1] == w->K;
            if (!seen) {
                shapes[n][0] = w->M;
                shapes[n][1] = w->K;
                n++;
            }
        }
    }
    return n;
}

static const char *isa_of(const char *impl_name) {
    const char *p = impl_name ? strstr(impl_name, "__") : NULL;
    const char *last = p;
    while (p) {
        last = p;
        p = strstr(p + 2, "__");
    }
    return last ? last + 2 : "scalar";
}

/* Where the tiles of the kernels in use came from (for the summary). */
typedef struct tiles_origin {
    bool file;                    /* a TL1/TL2 tensor's bitnet.lut.<name>.tiles key */
    const bitnet_tile_file *user; /* --lut-tiles: the tiles a TL1/TL2 file without tile keys was packed with */
} tiles_origin;

static void write_summary(bitnet_model *m, int target, const bitnet_lut_table *target_table, tiles_origin origin);

/* The tiles `table` lists for (M, K) ({0, 0, 0} when it has none). */
static bitnet_tiles built_tiles(const bitnet_lut_table *table, int64_t M, int64_t K) {
    const bitnet_tiles none = {0, 0, 0};
    for (size_t k = 0; table && k < table->n_entries; k++) {
        if (table->entries[k].M == M && table->entries[k].K == K) return table->entries[k].tiles;
    }
    return none;
}

static bool same_tiles(bitnet_tiles a, bitnet_tiles b) { return a.BM == b.BM && a.BK == b.BK && a.bm == b.bm; }

/* A TL1/TL2 file's recorded tiles must be ones this build has kernels for (issue #3: "loading a
 * TL1/TL2 file whose tiles do not match the built kernels is an error"): when any built tile table
 * (configs/, the same list on every ISA) has the shape (M, K) of `type`, the file's tiles must equal
 * one of its entries; *first is set to the first such table for the message. A shape no table lists
 * runs on the generic kernel, which takes any legal tiles. */
static bool tiles_match_built(int type, int64_t M, int64_t K, bitnet_tiles t, const bitnet_lut_table **first) {
    bool listed = false;
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table *tab = &bitnet_lut_tables[i];
        if (tab->type != type) continue;
        for (size_t k = 0; k < tab->n_entries; k++) {
            const bitnet_lut_table_entry *e = &tab->entries[k];
            if (e->M != M || e->K != K) continue;
            if (same_tiles(e->tiles, t)) return true;
            if (!listed) *first = tab;
            listed = true;
        }
    }
    return !listed;
}

/* The tiles a stored TL1/TL2 weight was packed with (*tiles), from its bitnet.lut.<name>.tiles key
 * (*have_key) or from the user's table (params.lut_tiles; *user_entry). The byte
 * order of TL1/TL2 data depends on the tiles and bitnet.cpp's files record none, so a tensor without
 * the key is refused unless the user's table lists its shape: tiles are never guessed from a built-in
 * table. A key and a user entry that disagree are refused, naming both. */
static bitnet_status stored_tiles_of(loader *ld, const weight *w, const bitnet_tile_file *user, bitnet_tiles *tiles,
                                     bool *have_key, const bitnet_tile_entry **user_entry) {
    const int stored = w->t.type;
    const char *tn = bitnet_type_name(stored);
    bitnet_status st = file_tiles(ld, w->t.name, tiles, have_key);
    if (st != BITNET_OK) return st;
    const bitnet_tile_entry *ue = bitnet_tile_file_find(user, stored, w->M, w->K);
    *user_entry = ue;
    if (!*have_key && !ue) {
        if (user) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                               "%s: tensor '%s' (%s, M = %lld, K = %lld): the file records no tile table (no key "
                               "'bitnet.lut.%s.tiles'), and --lut-tiles %s lists no tiles for %lldx%lld: give the tiles "
                               "the file was written with, or use the model's I2_S file, which every path can repack",
                               ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, w->t.name, user->path,
                               (long long)w->M, (long long)w->K);
        }
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' (%s, M = %lld, K = %lld): the file records no tile table (no key "
                           "'bitnet.lut.%s.tiles'; bitnet.cpp's %s files never do), and %s bytes can only be read with "
                           "the tiles they were packed with. Pass those tiles with --lut-tiles FILE (bitnet.cpp's "
                           "include/kernel_config.ini from the setup that wrote the file, or a configs/-style YAML), or "
                           "use the model's I2_S file, which every path can repack",
                           ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, w->t.name, tn, tn);
    }
    if (*have_key && ue && !same_tiles(*tiles, ue->tiles)) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' (%s, M = %lld, K = %lld) records tiles BM %d BK %d bm %d (key "
                           "'bitnet.lut.%s.tiles'), but --lut-tiles %s gives BM %d BK %d bm %d (%s): the file's bytes "
                           "follow its recorded tiles; drop --lut-tiles or give a table that agrees",
                           ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, tiles->BM, tiles->BK, tiles->bm,
                           w->t.name, user->path, ue->tiles.BM, ue->tiles.BK, ue->tiles.bm, ue->where);
    }
    if (!*have_key) *tiles = ue->tiles;
    bitnet_error terr;
    if (bitnet_tiles_check(stored, w->M, w->K, *tiles, &terr) != BITNET_OK) {
        if (!*have_key) {
            return bitnet_fail(ld->err, BITNET_ERR_INVALID_ARG,
                               "%s: tensor '%s' (%s, M = %lld, K = %lld): --lut-tiles %s %s gives BM %d BK %d bm %d, "
                               "which %s cannot use: %s",
                               ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, user->path, ue->where,
                               tiles->BM, tiles->BK, tiles->bm, tn, terr.msg);
        }
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                           "%s: tensor '%s' (%s, M = %lld, K = %lld): stored tiles BM %d BK %d bm %d are invalid: %s",
                           ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, tiles->BM, tiles->BK, tiles->bm,
                           terr.msg);
    }
    return BITNET_OK;
}

/* Hand every ternary weight to the LUT host for the model's path, with tiles:
 *  - stored tiles (TL1/TL2 files): stored_tiles_of (the file's key, else the user's table; never a
 *    guess);
 *  - target tiles (TL paths): the stored tiles when the file already has the target layout (recorded
 *    tiles no built table has for the shape are refused unless the user's table confirms them; then,
 *    like tiles given only by the user's table, they run on the generic kernel), else the preferred
 *    covering table, per shape bitnet_lut_tiles_for; a shape without legal tiles → refused naming the
 *    tensor, M and K. */
static bitnet_status prepare_lut_weights(loader *ld, bitnet_model *m, const char *table_name,
                                         const bitnet_tile_file *user) {
    const int target = path_type(m->path);
    const bitnet_lut_table *target_table = NULL;
    if (target != BITNET_TYPE_I2_S) {
        const size_t max_shapes = (size_t)m->hp.n_layer * N_PROJ;
        int64_t (*shapes)[2] = malloc(max_shapes * sizeof *shapes);
        if (!shapes) return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory", ld->path);
        size_t n = lut_shapes(m, shapes);
        target_table = bitnet_lut_find_table(target, (const int64_t(*)[2])shapes, n, table_name);
        free(shapes);
    }

    bitnet_status st = BITNET_OK;
    tiles_origin origin = {false, NULL};
    for (int32_t l = 0; l < m->hp.n_layer && st == BITNET_OK; l++) {
        for (int p = 0; p < N_PROJ && st == BITNET_OK; p++) {
            weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) continue;
            const int stored = w->t.type;
            bitnet_tiles stored_tiles = {0, 0, 0}, tiles = {0, 0, 0};
            bool have_key = false;
            const bitnet_tile_entry *ue = NULL;
            if (stored != BITNET_TYPE_I2_S &&
                (st = stored_tiles_of(ld, w, user, &stored_tiles, &have_key, &ue)) != BITNET_OK)
                break;
            if (target != BITNET_TYPE_I2_S) {
                if (stored == target) {
                    tiles = stored_tiles; /* no repacking */
                    origin.file = origin.file || have_key;
                    if (ue) origin.user = user;
                    const bitnet_lut_table *built = NULL;
                    if (have_key && !ue && !tiles_match_built(target, w->M, w->K, stored_tiles, &built)) {
                        const bitnet_tiles bt = built_tiles(built, w->M, w->K);
                        st = bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                                         "%s: tensor '%s' (%s, M = %lld, K = %lld) was packed with tiles BM %d BK %d "
                                         "bm %d (key 'bitnet.lut.%s.tiles'), but the kernels built for this shape "
                                         "(table %s/%s) use BM %d BK %d bm %d: convert the model again for this "
                                         "build, rebuild the kernels for the file's tiles, pass a --lut-tiles table "
                                         "with these tiles to run them on the generic kernel, or run another path "
                                         "(--kernel i2_s)",
                                         ld->path, w->t.name, bitnet_type_name(stored), (long long)w->M,
                                         (long long)w->K, stored_tiles.BM, stored_tiles.BK, stored_tiles.bm,
                                         w->t.name, built->config, built->table, bt.BM, bt.BK, bt.bm);
                        break;
                    }
                } else {
                    tiles = bitnet_lut_tiles_for(target, w->M, w->K, target_table, table_name);
                    bitnet_error terr;
                    if (bitnet_tiles_check(target, w->M, w->K, tiles, &terr) != BITNET_OK) {
                        st = bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                                         "%s: tensor '%s': no legal %s tiles for M = %lld, K = %lld (%s); use the "
                                         "I2_S path (--kernel i2_s)",
                                         ld->path, w->t.name, bitnet_type_name(target), (long long)w->M,
                                         (long long)w->K, terr.msg);
                        break;
                    }
                }
            }
            if (!m->lut_used) { /* from the first transform on, this model holds host extras */
                m->lut_used = true;
                atomic_fetch_add(&g_lut_models, 1);
            }
            st = bitnet_lut_transform_tensor(&w->t, &stored_tiles, target, &tiles, ld->err);
            if (st == BITNET_OK && !w->t.extra) {
                st = bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s': the LUT host attached no weights",
                                 ld->path, w->t.name);
            }
        }
    }
    if (st != BITNET_OK) return st;
    write_summary(m, target, target_table, origin);
    return BITNET_OK;
}

/* m->summary: per ISA the specialized / generic kernel counts, and where the tiles came from. */
static void write_summary(bitnet_model *m, int target, const bitnet_lut_table *target_table, tiles_origin origin) {
    char *o = m->summary;
    size_t left = sizeof m->summary;
    int n_lut = 0, n_dense = 0, n_batch_i2s = 0;
    int64_t batch_min_cols = 0;
    const char *isas[8];
    int n_spec[8] = {0}, n_gen[8] = {0}, n_isa = 0;
    for (int32_t l = 0; l < m->hp.n_layer; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) {
                n_dense++;
                continue;
            }
            n_lut++;
            if (target == BITNET_TYPE_I2_S) continue;
            if (w->t.extra->i2s_codes && w->t.extra->i2s_min_cols > 0) {
                n_batch_i2s++;
                batch_min_cols = w->t.extra->i2s_min_cols;
            }
            const char *isa = isa_of(w->t.extra->impl.name);
            int i = 0;
            while (i < n_isa && strcmp(isas[i], isa) != 0) i++;
            if (i == n_isa && n_isa < 8) isas[n_isa++] = isa;
            if (i < 8) {
                if (w->t.extra->impl.specialized) n_spec[i]++;
                else n_gen[i]++;
            }
        }
    }
    int len = 0;
    if (n_lut && target == BITNET_TYPE_I2_S) {
        len = snprintf(o, left, "I2_S reference path: %d ternary weights", n_lut);
    } else if (n_lut) {
        for (int i = 0; i < n_isa && len >= 0 && (size_t)len < left; i++) {
            len += snprintf(o + len, left - (size_t)len, "%s%s (%s): %d specialized, %d generic kernels", i ? ", " : "",
                           bitnet_type_name(target), isas[i], n_spec[i], n_gen[i]);
        }
        if (len >= 0 && (size_t)len < left) {
            if (origin.user) {
                len += snprintf(o + len, left - (size_t)len, "; tiles from %s--lut-tiles %s (%s)",
                                origin.file ? "the file and " : "", origin.user->path,
                                bitnet_tile_file_format_name(origin.user->format));
            } else if (origin.file) {
                len += snprintf(o + len, left - (size_t)len, "; tiles from the file");
            } else if (target_table) {
                len += snprintf(o + len, left - (size_t)len, "; tiles from table %s/%s", target_table->config,
                               target_table->table);
            } else {
                len += snprintf(o + len, left - (size_t)len, "; no built-in table covers this model: derived tiles");
            }
        }
        if (n_batch_i2s && len >= 0 && (size_t)len < left) {
            len += snprintf(o + len, left - (size_t)len,
                            "; products of >= %lld columns (prompt batches) run the I2_S int8 kernel (%s) on %d "
                            "weights", (long long)batch_min_cols, bitnet_i2s_isa(), n_batch_i2s);
        }
    }
    if (n_dense && len >= 0 && (size_t)len < left) {
        snprintf(o + len, left - (size_t)len, "%sdense float: %d weights (no LUT)", n_lut ? "; " : "", n_dense);
    }
}

static size_t dense_row_bytes(int type, int64_t n) {
    size_t b = 0;
    bitnet_error e;
    if (bitnet_type_nbytes(type, 1, &n, &b, &e) != BITNET_OK) return 0;
    return b;
}

/* Every tensor of the file must be one the graph uses: an ignored tensor (a bias, an extra norm, a
 * frequency-factor table) would silently change the model's meaning, so it is refused by name, as
 * llama.cpp refuses files with tensors its architecture does not create. Known names: token_embd,
 * output, output_norm, blk.N.{attn_norm, ffn_norm, the 7 projections, their optional .scale} and, with
 * sub-norms, blk.N.{attn_sub_norm, ffn_sub_norm}; N < block_count. Also accepted: blk.N.<proj>.weight_scale,
 * the per-tensor scale bitnet.cpp's Python writers add after a TL1/TL2 weight ("<name>_scale"). formats.md
 * measured files where it is not listed in the tensor table; where a writer does list it, it holds the same
 * float as the weight's own 32-byte tail, which is what the loader reads, so it changes nothing. */
static bool tensor_known(const char *name, const bitnet_hparams *hp) {
    static const char *const global[] = {"token_embd.weight", "output.weight", "output_norm.weight"};
    static const char *const proj[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"};
    for (size_t i = 0; i < sizeof global / sizeof global[0]; i++) {
        if (strcmp(name, global[i]) == 0) return true;
    }
    if (strncmp(name, "blk.", 4) != 0) return false;
    const char *p = name + 4;
    long l = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 8) {
        l = l * 10 + (*p++ - '0');
        digits++;
    }
    if (digits == 0 || (digits > 1 && name[4] == '0') || *p != '.' || l >= hp->n_layer) return false;
    p++;
    const char *rest = p;
    if (strcmp(rest, "attn_norm.weight") == 0 || strcmp(rest, "ffn_norm.weight") == 0) return true;
    if (hp->sub_norms && (strcmp(rest, "attn_sub_norm.weight") == 0 || strcmp(rest, "ffn_sub_norm.weight") == 0))
        return true;
    for (size_t i = 0; i < sizeof proj / sizeof proj[0]; i++) {
        const size_t n = strlen(proj[i]);
        if (strncmp(rest, proj[i], n) == 0 && (strcmp(rest + n, ".weight") == 0 || strcmp(rest + n, ".scale") == 0 ||
                                            strcmp(rest + n, ".weight_scale") == 0))
            return true;
    }
    return false;
}

static bitnet_status check_all_tensors_known(loader *ld, const bitnet_hparams *hp) {
    for (int64_t i = 0; i < bitnet_gguf_n_tensors(ld->g); i++) {
        const char *name = bitnet_gguf_tensor(ld->g, i)->name;
        if (tensor_known(name, hp)) continue;
        if (strcmp(name, "rope_freqs.weight") == 0) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                               "%s: tensor 'rope_freqs.weight' (RoPE frequency factors, Llama 3.1 style scaling) is "
                               "not supported",
                               ld->path);
        }
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' is not part of architecture '%s'%s (an ignored tensor would change the "
                           "model's meaning)",
                           ld->path, name, hp->arch,
                           !hp->sub_norms && strstr(name, "sub_norm") ? " (this graph has no sub-norms)" : "");
    }
    return BITNET_OK;
}

/* The head (m->head: output.weight or the tied token_embd) requantized to Q8_0 rows into
 * m->head_owned (bitnet_model_params.head_type): each row decoded to float by its stored type's
 * definition, then ggml's Q8_0 reference quantizer per 32-value block (bitnet_quantize_row_q8_0:
 * d = max|x|/127 as binary16, q = round(x · 1/d)). One thread, rows in order: the result depends only on
 * the file. Sets head_type, head_data and head_row_bytes. */
static bitnet_status requantize_head_q8_0(loader *ld, bitnet_model *m) {
    const int64_t D = m->hp.n_embd, V = m->hp.n_vocab;
    if (D % 32 != 0) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: head '%s' cannot be requantized to Q8_0: rows of n_embd = %lld values are not a "
                           "multiple of the 32-value block",
                           ld->path, m->head->name, (long long)D);
    }
    const size_t nb = (size_t)(D / 32);
    float *row = malloc((size_t)D * sizeof(float));
    m->head_owned = malloc((size_t)V * nb * sizeof(bitnet_block_q8_0));
    if (!row || !m->head_owned) {
        free(row);
        return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory for the Q8_0 head (%lld × %lld)", ld->path,
                           (long long)V, (long long)D);
    }
    const uint8_t *src = (const uint8_t *)m->head->data;
    for (int64_t r = 0; r < V; r++) {
        embd_row_to_f32(m->head->type, src + (size_t)r * m->head_row_bytes, row, D);
        bitnet_quantize_row_q8_0(row, m->head_owned + (size_t)r * nb, D);
    }
    free(row);
    m->head_type = BITNET_TYPE_Q8_0;
    m->head_data = (const uint8_t *)m->head_owned;
    m->head_row_bytes = nb * sizeof(bitnet_block_q8_0);
    return BITNET_OK;
}

bitnet_status bitnet_model_load(const char *path, const bitnet_model_params *params, bitnet_model **out,
                                bitnet_error *err) {
    if (!path || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_model_load: NULL path or out");
    *out = NULL;
    const bitnet_model_params defaults = {BITNET_PATH_AUTO, NULL, 0, NULL};
    if (!params) params = &defaults;
    const char *table_name = params->lut_table ? params->lut_table : BITNET_LUT_TABLE_DEFAULT;
    if (strcmp(table_name, "default") != 0 && strcmp(table_name, "pretuned") != 0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "lut table '%s' is neither 'default' nor 'pretuned'",
                           table_name);
    }
    if (params->path < BITNET_PATH_AUTO || params->path > BITNET_PATH_TL2) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "unknown kernel path %d", (int)params->path);
    }
    if (params->head_type != 0 && params->head_type != BITNET_TYPE_Q8_0) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "head_type %d is neither 0 (as stored) nor %d (Q8_0)", params->head_type, BITNET_TYPE_Q8_0);
    }
    pthread_once(&g_f16_once, f16_table_init);

    bitnet_model *m = calloc(1, sizeof *m);
    if (!m) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    loader ld = {.path = path, .err = err};
    bitnet_status st = bitnet_gguf_open(path, &m->gguf, err);
    if (st != BITNET_OK) goto fail;
    ld.g = m->gguf;
    if ((st = load_hparams(&ld, &m->hp)) != BITNET_OK) goto fail;
    bitnet_hparams *hp = &m->hp;
    m->q_dim = hp->n_head * hp->n_embd_head;
    m->kv_dim = hp->n_head_kv * hp->n_embd_head;
    m->path = resolve_path(params->path);

    if ((st = bitnet_vocab_load(m->gguf, &m->vocab, err)) != BITNET_OK) goto fail;
    const int32_t n_tok = bitnet_vocab_n_tokens(m->vocab);
    if ((st = get_int_key(&ld, "vocab_size", false, n_tok, 1, MAX_VOCAB, &hp->n_vocab)) != BITNET_OK) goto fail;
    if (hp->n_vocab != n_tok) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %s.vocab_size = %d but tokenizer.ggml.tokens has %d entries",
                         path, ld.arch, hp->n_vocab, n_tok);
        goto fail;
    }

    /* token embeddings (also the output head unless output.weight exists) */
    if ((st = find_tensor(&ld, "token_embd.weight", 2, hp->n_embd, hp->n_vocab, true, &m->embd)) != BITNET_OK)
        goto fail;
    if ((st = find_tensor(&ld, "output.weight", 2, hp->n_embd, hp->n_vocab, false, &m->head)) != BITNET_OK) goto fail;
    hp->tied_output = m->head == NULL;
    if (!m->head) m->head = m->embd;
    const bitnet_gguf_tensor_info *dense2[2] = {m->embd, m->head};
    for (int i = 0; i < 2; i++) {
        const int t = dense2[i]->type;
        if (t != BITNET_TYPE_F32 && t != BITNET_TYPE_F16 && t != BITNET_TYPE_Q8_0 && t != BITNET_TYPE_Q6_K) {
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                             "%s: tensor '%s' has type %s (id %d); expected F32, F16, Q8_0 or Q6_K", path,
                             dense2[i]->name, bitnet_type_name(t), t);
            goto fail;
        }
    }
    m->embd_row_bytes = dense_row_bytes(m->embd->type, hp->n_embd);
    m->head_row_bytes = dense_row_bytes(m->head->type, hp->n_embd);
    if (m->embd_row_bytes == 0 || m->head_row_bytes == 0) {
        st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: rows of %d elements do not fit the embedding type", path,
                         hp->n_embd);
        goto fail;
    }
    m->head_type = m->head->type;
    m->head_data = (const uint8_t *)m->head->data;
    if (params->head_type == BITNET_TYPE_Q8_0 && m->head->type != BITNET_TYPE_Q8_0 &&
        (st = requantize_head_q8_0(&ld, m)) != BITNET_OK)
        goto fail;
    if ((st = load_vector(&ld, "output_norm.weight", hp->n_embd, &m->output_norm)) != BITNET_OK) goto fail;

    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for %d layers", path, hp->n_layer);
        goto fail;
    }
    for (int32_t l = 0; l < hp->n_layer; l++) {
        layer *L = &m->layers[l];
        char name[96];
#define NAME(suffix) (snprintf(name, sizeof name, "blk.%d." suffix, (int)l), name)
        if ((st = load_vector(&ld, NAME("attn_norm.weight"), hp->n_embd, &L->attn_norm)) != BITNET_OK) goto fail;
        if (hp->sub_norms &&
            (st = load_vector(&ld, NAME("attn_sub_norm.weight"), m->q_dim, &L->attn_sub_norm)) != BITNET_OK)
            goto fail;
        if ((st = load_vector(&ld, NAME("ffn_norm.weight"), hp->n_embd, &L->ffn_norm)) != BITNET_OK) goto fail;
        if (hp->sub_norms &&
            (st = load_vector(&ld, NAME("ffn_sub_norm.weight"), hp->n_ff, &L->ffn_sub_norm)) != BITNET_OK)
            goto fail;
        if ((st = load_weight(&ld, NAME("attn_q.weight"), hp->n_embd, m->q_dim, &L->wq)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("attn_k.weight"), hp->n_embd, m->kv_dim, &L->wk)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("attn_v.weight"), hp->n_embd, m->kv_dim, &L->wv)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("attn_output.weight"), m->q_dim, hp->n_embd, &L->wo)) != BITNET_OK)
            goto fail;
        if ((st = load_weight(&ld, NAME("ffn_gate.weight"), hp->n_embd, hp->n_ff, &L->w_gate)) != BITNET_OK)
            goto fail;
        if ((st = load_weight(&ld, NAME("ffn_up.weight"), hp->n_embd, hp->n_ff, &L->w_up)) != BITNET_OK) goto fail;
        if ((st = load_weight(&ld, NAME("ffn_down.weight"), hp->n_ff, hp->n_embd, &L->w_down)) != BITNET_OK)
            goto fail;
#undef NAME
    }

    if ((st = check_all_tensors_known(&ld, hp)) != BITNET_OK) goto fail;
    if ((st = prepare_lut_weights(&ld, m, table_name, params->lut_tiles)) != BITNET_OK) goto fail;
    if (m->head_owned) {
        const size_t len = strlen(m->summary);
        snprintf(m->summary + len, sizeof m->summary - len, "%shead: Q8_0 (requantized from %s at load)",
                 len ? "; " : "", bitnet_type_name(m->head->type));
    }

    for (int64_t i = 0; i < bitnet_gguf_n_tensors(m->gguf); i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(m->gguf, i);
        m->n_params += (uint64_t)(ti->ne[0] * ti->ne[1] * ti->ne[2] * ti->ne[3]);
        m->size_bytes += ti->nbytes;
    }
    *out = m;
    return BITNET_OK;

fail:
    bitnet_model_free(m);
    return st;
}

void bitnet_model_free(bitnet_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int32_t l = 0; l < m->hp.n_layer; l++) {
            layer *L = &m->layers[l];
            free(L->attn_norm);
            free(L->attn_sub_norm);
            free(L->ffn_norm);
            free(L->ffn_sub_norm);
            for (int p = 0; p < N_PROJ; p++) free(layer_proj(L, p)->dense_owned);
        }
        free(m->layers);
    }
    /* the LUT host owns the extras in one table; release it with the last model that used it */
    if (m->lut_used && atomic_fetch_sub(&g_lut_models, 1) == 1) bitnet_lut_free();
    free(m->output_norm);
    free(m->head_owned);
    bitnet_vocab_free(m->vocab);
    bitnet_gguf_close(m->gguf);
    free(m);
}

const bitnet_hparams *bitnet_model_hparams(const bitnet_model *m) { return &m->hp; }
const bitnet_vocab *bitnet_model_vocab(const bitnet_model *m) { return m->vocab; }
bitnet_kernel_path bitnet_model_path(const bitnet_model *m) { return m->path; }
uint64_t bitnet_model_n_params(const bitnet_model *m) { return m->n_params; }
uint64_t bitnet_model_size_bytes(const bitnet_model *m) { return m->size_bytes; }
const char *bitnet_model_kernel_summary(const bitnet_model *m) { return m->summary; }
int bitnet_model_head_type(const bitnet_model *m) { return m->head_type; }
bool bitnet_model_head_requantized(const bitnet_model *m) { return m->head_owned != NULL; }
const char *bitnet_kernel_path_name(bitnet_kernel_path p) {
    switch (p) {
    case BITNET_PATH_I2S: return "I2_S";
    case BITNET_PATH_TL1: return "TL1";
    case BITNET_PATH_TL2: return "TL2";
    default: return "auto";
    }
}

/* =============================================================================================
 * 3. Context
 * =========================================================================================== */

struct bitnet_context {
    bitnet_model *m;
    int32_t n_ctx, n_batch, n_threads;
    bitnet_threadpool *tp;

    /* activations of one batch of up to n_batch tokens, row t = token t */
    float *x;        /* (n_batch, n_embd) residual stream */
    float *xb;       /* (n_batch, n_embd) normed input of a projection */
    float *q;        /* (n_batch, q_dim) queries */
    float *k, *v;    /* (n_batch, kv_dim) keys, values of this batch */
    float *att;      /* (n_batch, q_dim) attention output, heads concatenated */
    float *proj;     /* (n_batch, n_embd) output of attn_output / ffn_down */
    float *hb, *hb2; /* (n_batch, n_ff) gate and up */

    uint16_t *kcache; /* (n_layer, n_ctx, kv_dim) F16 keys, position-major */
    uint16_t *vcache; /* (n_layer, kv_dim, n_ctx) F16 values, transposed: a row per value channel */

    float *rope_cos, *rope_sin; /* (n_ctx, n_embd_head/2) */

    float *att_scores;  /* (n_threads, n_ctx) per-thread scratch */
    float *att_p;       /* (n_threads, n_ctx) softmax probabilities rounded to F16 */
    float *att_q;       /* (n_threads, n_embd_head) query rounded to F16 */

    float *head_f16;            /* (n_batch, n_embd) head input rounded to F16 (F16 head) */
    bitnet_block_q8_0 *head_q8; /* (n_batch, n_embd/32) head input as Q8_0 (Q8_0 head) */
    float *head_row;            /* (n_threads, n_embd) one head row as float (Q6_K head) */

    void *wdata[2]; /* two LUT host workspaces, wsize bytes each, 64-byte aligned: consecutive products
                       alternate between them (forward pass, "Barriers") */
    size_t wsize;

    float *logits;        /* (logits_cap, n_vocab) */
    int32_t logits_cap;   /* rows allocated */
    int32_t n_last;       /* tokens in the last bitnet_decode call */
    bool all_last;        /* the last call kept every token's logits */
};

static bitnet_tensor act_tensor(float *data, int64_t ne0, int64_t ne1) {
    bitnet_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "activations");
    t.type = BITNET_TYPE_F32;
    t.n_dims = 2;
    t.ne[0] = ne0;
    t.ne[1] = ne1;
    t.ne[2] = t.ne[3] = 1;
    t.nb[0] = sizeof(float);
    t.nb[1] = (size_t)ne0 * sizeof(float);
    t.nb[2] = t.nb[3] = t.nb[1] * (size_t)ne1;
    t.data = data;
    t.nbytes = t.nb[2];
    return t;
}

/* RoPE angles as ggml computes them (so they equal bitnet.cpp's): theta_scale =
 * base^(-2/d) rounded to float; for position p the angle of pair i is freq_scale · θ_i with
 * θ_0 = p and θ_{i+1} = θ_i · theta_scale in float (Su et al. 2021, RoFormer, eq. 15). cos and sin
 * are evaluated in double and rounded to float, so the tables do not depend on the libm's float
 * functions and are the same on every ISA. */
static void rope_tables(const bitnet_hparams *hp, int32_t n_ctx, float *cos_t, float *sin_t) {
    const int32_t half = hp->n_embd_head / 2;
    const float theta_scale = (float)pow((double)hp->rope_freq_base, (double)(-2.0f / (float)hp->n_embd_head));
    for (int32_t p = 0; p < n_ctx; p++) {
        float theta = (float)p;
        for (int32_t i = 0; i < half; i++) {
            const float angle = hp->rope_scale * theta;
            cos_t[(size_t)p * half + i] = (float)cos((double)angle);
            sin_t[(size_t)p * half + i] = (float)sin((double)angle);
            theta *= theta_scale;
        }
    }
}

bitnet_status bitnet_context_create(bitnet_model *m, int32_t n_ctx, int32_t n_batch, int32_t n_threads,
                                    bitnet_context **out, bitnet_error *err) {
    if (!m || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_context_create: NULL model or out");
    *out = NULL;
    if (n_ctx < 1 || n_ctx > MAX_CTX) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_ctx = %d must be in [1, %d]", n_ctx, MAX_CTX);
    }
    if (n_batch < 1) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_batch = %d must be >= 1", n_batch);
    if (n_threads < 1 || n_threads > 1024) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "n_threads = %d must be in [1, 1024]", n_threads);
    }
    if (n_batch > n_ctx) n_batch = n_ctx;
    const bitnet_hparams *hp = &m->hp;
    bitnet_context *c = calloc(1, sizeof *c);
    if (!c) return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for the context");
    c->m = m;
    c->n_ctx = n_ctx;
    c->n_batch = n_batch;
    c->n_threads = n_threads;

    bitnet_status st = bitnet_threadpool_create(n_threads, &c->tp, err);
    if (st != BITNET_OK) goto fail;

    const size_t B = (size_t)n_batch, D = (size_t)hp->n_embd, F = (size_t)hp->n_ff, KV = (size_t)m->kv_dim;
    const size_t QD = (size_t)m->q_dim;
    const size_t hd = (size_t)hp->n_embd_head, T = (size_t)n_threads, C = (size_t)n_ctx;
    size_t cache_elems;
    if (!mul3((size_t)hp->n_layer, C, KV, &cache_elems) || cache_elems > SIZE_MAX / 2) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "KV cache of %d layers × %d positions × %zu overflows",
                         hp->n_layer, n_ctx, KV);
        goto fail;
    }
    c->x = malloc(B * D * sizeof(float));
    c->xb = malloc(B * D * sizeof(float));
    c->q = malloc(B * QD * sizeof(float));
    c->k = malloc(B * KV * sizeof(float));
    c->v = malloc(B * KV * sizeof(float));
    c->att = malloc(B * QD * sizeof(float));
    c->proj = malloc(B * D * sizeof(float));
    c->hb = malloc(B * F * sizeof(float));
    c->hb2 = malloc(B * F * sizeof(float));
    c->kcache = calloc(cache_elems, sizeof(uint16_t));
    c->vcache = calloc(cache_elems, sizeof(uint16_t));
    c->rope_cos = malloc(C * (hd / 2) * sizeof(float));
    c->rope_sin = malloc(C * (hd / 2) * sizeof(float));
    c->att_scores = malloc(T * C * sizeof(float));
    c->att_p = malloc(T * C * sizeof(float));
    c->att_q = malloc(T * hd * sizeof(float));
    c->head_f16 = malloc(B * D * sizeof(float));
    c->head_q8 = malloc(B * (D / 32 + 1) * sizeof(bitnet_block_q8_0));
    c->head_row = malloc(T * D * sizeof(float));
    c->logits_cap = 1;
    c->logits = malloc((size_t)hp->n_vocab * sizeof(float));
    if (!c->x || !c->xb || !c->q || !c->k || !c->v || !c->att || !c->proj || !c->hb || !c->hb2 || !c->kcache ||
        !c->vcache || !c->rope_cos || !c->rope_sin || !c->att_scores || !c->att_p || !c->att_q ||
        !c->head_f16 || !c->head_q8 || !c->head_row || !c->logits) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for a context of %d positions, batch %d", n_ctx,
                         n_batch);
        goto fail;
    }
    memset(c->logits, 0, (size_t)hp->n_vocab * sizeof(float));
    rope_tables(hp, n_ctx, c->rope_cos, c->rope_sin);

    /* LUT workspace: the largest any weight needs for n_batch columns */
    for (int32_t l = 0; l < hp->n_layer; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) continue;
            bitnet_tensor src1 = act_tensor(c->xb, w->K, n_batch), dst = act_tensor(c->q, w->M, n_batch);
            if (!bitnet_can_mul_mat(&w->t, &src1, &dst)) {
                st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "tensor '%s' (M = %lld, K = %lld): the LUT host refuses "
                                 "this product", w->t.name, (long long)w->M, (long long)w->K);
                goto fail;
            }
            const size_t ws = bitnet_mul_mat_get_wsize(&w->t, &src1, &dst);
            if (ws > c->wsize) c->wsize = ws;
        }
    }
    if (c->wsize) {
        c->wdata[0] = alloc64(c->wsize);
        c->wdata[1] = alloc64(c->wsize);
        if (!c->wdata[0] || !c->wdata[1]) {
            st = bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory for two LUT workspaces of %zu bytes", c->wsize);
            goto fail;
        }
    }
    *out = c;
    return BITNET_OK;

fail:
    bitnet_context_free(c);
    return st;
}

void bitnet_context_free(bitnet_context *c) {
    if (!c) return;
    bitnet_threadpool_free(c->tp);
    free(c->x);
    free(c->xb);
    free(c->q);
    free(c->k);
    free(c->v);
    free(c->att);
    free(c->proj);
    free(c->hb);
    free(c->hb2);
    free(c->kcache);
    free(c->vcache);
    free(c->rope_cos);
    free(c->rope_sin);
    free(c->att_scores);
    free(c->att_p);
    free(c->att_q);
    free(c->head_f16);
    free(c->head_q8);
    free(c->head_row);
    free(c->wdata[0]);
    free(c->wdata[1]);
    free(c->logits);
    free(c);
}

int32_t bitnet_context_n_ctx(const bitnet_context *c) { return c->n_ctx; }
int32_t bitnet_context_n_threads(const bitnet_context *c) { return c->n_threads; }

/* =============================================================================================
 * 4. Forward pass
 * =========================================================================================== */

typedef struct fwd_job {
    bitnet_context *c;
    const int32_t *tokens; /* (n) */
    int32_t n;             /* tokens in this batch */
    int32_t pos0;          /* position of tokens[0] */
    int32_t out_first;     /* logits for tokens out_first .. out_first+n_out-1 of the batch */
    int32_t n_out;
    float *logits;         /* (n_out, n_vocab) */
} fwd_job;

static inline void sync_threads(bitnet_context *c) { bitnet_threadpool_barrier(c->tp); }

/* y = W·x for n tokens: x (n, K) → y (n, M), then the optional output scale, using LUT workspace
 * c->wdata[ws]. With sync (or a dense weight, or an output scale) it ends with a barrier, so y is
 * complete on return. Without it, y is complete only after the next barrier; that is allowed when
 * the next step is another LUT product on the other workspace that neither reads y nor writes
 * x (see "Barriers" above forward_task). */
static void matmul(bitnet_context *c, const weight *w, float *x, float *y, int64_t n, int ith, int nth, int ws,
                   bool sync) {
    if (w->lut) {
        bitnet_tensor src1 = act_tensor(x, w->K, n), dst = act_tensor(y, w->M, n);
        bitnet_mul_mat(&w->t, &src1, &dst, c->wdata[ws], c->wsize, ith, nth, c->tp);
    } else {
        int64_t r0, r1;
        bitnet_split_range(w->M, ith, nth, &r0, &r1);
        for (int64_t t = 0; t < n; t++) {
            for (int64_t r = r0; r < r1; r++) y[t * w->M + r] = dot_f32(w->dense + r * w->K, x + t * w->K, w->K);
        }
    }
    if (sync || !w->lut || w->has_scale) sync_threads(c);
    if (w->has_scale) {
        int64_t t0, t1;
        bitnet_split_range(n, ith, nth, &t0, &t1);
        for (int64_t i = t0 * w->M; i < t1 * w->M; i++) y[i] *= w->out_scale;
        sync_threads(c);
    }
}

/* Rotate one head v (d) by the angles of its pairs (model.h "RoPE"): NEOX style pair i is
 * (i, i + d/2), NORM style pair i is (2i, 2i + 1); pair i turns by the angle in cos_p[i], sin_p[i]. */
static void rope_head(float *v, const float *cos_p, const float *sin_p, int32_t d, bitnet_rope_type type) {
    const int32_t half = d / 2;
    const int32_t stride = type == BITNET_ROPE_NORM ? 2 : 1; /* index of x0 = stride·i */
    const int32_t off = type == BITNET_ROPE_NORM ? 1 : half; /* x1 = x0 + off */
    for (int32_t i = 0; i < half; i++) {
        float *p0 = v + stride * i, *p1 = p0 + off;
        const float x0 = *p0, x1 = *p1;
        *p0 = x0 * cos_p[i] - x1 * sin_p[i];
        *p1 = x0 * sin_p[i] + x1 * cos_p[i];
    }
}

/* One head of causal attention for the token at position pos in layer l:
 * out (d) = Σ_j softmax_j(q·k_j / √d) · v_j over j = 0..pos, rounding like ggml's CPU path: q to F16
 * before q·k_j, the probabilities to F16 before the product with V. */
static void attend(bitnet_context *c, int32_t l, int32_t pos, int32_t h, const float *q, float *out, int ith) {
    const bitnet_model *m = c->m;
    const int32_t d = m->hp.n_embd_head, KV = m->kv_dim;
    const int32_t kvh = h / (m->hp.n_head / m->hp.n_head_kv); /* GQA: heads share kv head h / group */
    const float kq_scale = 1.0f / sqrtf((float)d);
    float *score = c->att_scores + (size_t)ith * c->n_ctx;      /* (pos+1) */
    float *p16 = c->att_p + (size_t)ith * c->n_ctx;             /* (pos+1) */
    float *q16 = c->att_q + (size_t)ith * d;                    /* (d) */
    const uint16_t *kc = c->kcache + (size_t)l * c->n_ctx * KV + (size_t)kvh * d;       /* row j at j·KV */
    const uint16_t *vc = c->vcache + ((size_t)l * KV + (size_t)kvh * d) * c->n_ctx;     /* channel i at i·n_ctx */

    for (int32_t i = 0; i < d; i++) q16[i] = round_f16(q[i]);
    float max = -INFINITY;
    for (int32_t j = 0; j <= pos; j++) {
        score[j] = dot_f16(kc + (size_t)j * KV, q16, d) * kq_scale;
        if (score[j] > max) max = score[j];
    }
    double sum = 0.0;
    for (int32_t j = 0; j <= pos; j++) {
        /* expf is +0 below ln(2^-150) ≈ -103.97 (exp(-104) ≈ 6.8e-46 rounds to 0); answering that
         * here skips libm's underflow path (errno, ~3% of a prompt on the dummy models) */
        const float z = score[j] - max;
        score[j] = z < -104.0f ? 0.0f : expf(z);
        sum += (double)score[j];
    }
    const float inv = (float)(1.0 / sum);
    for (int32_t j = 0; j <= pos; j++) p16[j] = round_f16(score[j] * inv);
    for (int32_t i = 0; i < d; i++) out[i] = dot_f16(vc + (size_t)i * c->n_ctx, p16, (int64_t)pos + 1);
}

/* RoPE and the F16 cache store of kv head g for tokens t0..t1-1 of the batch: k head g rotated in
 * place and stored with v head g at positions pos0 + t of layer l. */
static void rope_store_kv(bitnet_context *c, const fwd_job *J, int32_t l, int64_t g, int64_t t0, int64_t t1) {
    const bitnet_model *m = c->m;
    const int64_t KV = m->kv_dim, hd = m->hp.n_embd_head, half = hd / 2;
    for (int64_t t = t0; t < t1; t++) {
        const int64_t pos = J->pos0 + t;
        float *k = c->k + t * KV + g * hd;
        const float *v = c->v + t * KV + g * hd;
        rope_head(k, c->rope_cos + pos * half, c->rope_sin + pos * half, (int32_t)hd, m->hp.rope_type);
        uint16_t *kc = c->kcache + ((size_t)l * c->n_ctx + (size_t)pos) * KV + g * hd; /* (hd) */
        uint16_t *vc = c->vcache + ((size_t)l * KV + (size_t)(g * hd)) * c->n_ctx + (size_t)pos; /* stride n_ctx */
        for (int64_t i = 0; i < hd; i++) {
            kc[i] = bitnet_fp32_to_fp16(k[i]);
            vc[(size_t)i * c->n_ctx] = bitnet_fp32_to_fp16(v[i]);
        }
    }
}

/* Barriers. Every step reads only what earlier steps finished before a barrier, and every output
 * element is written by one thread with the arithmetic it always had, so removing a barrier never
 * changes a float. Per layer (the bitnet graphs; 16 barriers, 21 before issue #4):
 *  - the attention norm of layer l + 1 is computed right after layer l's residual by the thread
 *    that owns that token (same for the final norm after the last layer), so it needs no barrier
 *    of its own;
 *  - q, k, v (and gate, up) read the same input and write different outputs, so they run back to
 *    back without a barrier in between, alternating the two LUT workspaces: bitnet_mul_mat's own
 *    barrier (between building a product's LUTs and using them) guarantees that every thread has
 *    finished the product before last, whose workspace thread 0 overwrites next;
 *  - RoPE, the cache store and attention run per kv head: the thread that owns kv head g rotates
 *    and stores its keys and values for the batch, then attends with every query head of its group
 *    (it only reads cache rows of head g: earlier calls' rows or the ones it just wrote).
 * The remaining barriers separate a product from the step that reads its output. */
static void forward_task(void *arg, int ith, int nth) {
    const fwd_job *J = arg;
    bitnet_context *c = J->c;
    const bitnet_model *m = c->m;
    const bitnet_hparams *hp = &m->hp;
    const int64_t n = J->n, D = hp->n_embd, F = hp->n_ff, QD = m->q_dim, hd = hp->n_embd_head;
    const int64_t half = hd / 2, group = hp->n_head / hp->n_head_kv;
    const int type = m->head_type;
    int64_t t0, t1; /* this thread's tokens for per-token steps */
    bitnet_split_range(n, ith, nth, &t0, &t1);
    /* attention split by kv head (no RoPE barrier) unless that leaves threads idle */
    const bool attn_by_kv_head = hp->n_head_kv % nth == 0 || hp->n_head_kv >= 4 * nth;

    /* token embeddings: x[t] = token_embd row tokens[t]; attention norm of layer 0    x, xb (n, D) */
    for (int64_t t = t0; t < t1; t++) {
        const uint8_t *row = (const uint8_t *)m->embd->data + (size_t)J->tokens[t] * m->embd_row_bytes;
        embd_row_to_f32(m->embd->type, row, c->x + t * D, D); /* type checked at load */
        rmsnorm(c->xb + t * D, c->x + t * D, m->layers[0].attn_norm, D, hp->rms_eps);
    }
    sync_threads(c);

    for (int32_t l = 0; l < hp->n_layer; l++) {
        const layer *L = &m->layers[l];

        /* projections of xb = rmsnorm(x) · attn_norm: q = Wq·xb (n, QD), k = Wk·xb (n, KV), v = Wv·xb (n, KV) */
        matmul(c, &L->wq, c->xb, c->q, n, ith, nth, 0, false);
        matmul(c, &L->wk, c->xb, c->k, n, ith, nth, 1, false);
        matmul(c, &L->wv, c->xb, c->v, n, ith, nth, 0, true);

        /* RoPE on every head of q and k; k and v into the F16 cache at position pos0 + t; attention per
         * (token, head) over positions 0..pos0+t                                     att (n, QD) */
        if (attn_by_kv_head) {
            int64_t g0, g1;
            bitnet_split_range(hp->n_head_kv, ith, nth, &g0, &g1);
            for (int64_t g = g0; g < g1; g++) {
                rope_store_kv(c, J, l, g, 0, n);
                for (int64_t t = 0; t < n; t++) {
                    const int64_t pos = J->pos0 + t;
                    for (int64_t h = g * group; h < (g + 1) * group; h++) {
                        float *q = c->q + t * QD + h * hd;
                        rope_head(q, c->rope_cos + pos * half, c->rope_sin + pos * half, (int32_t)hd, hp->rope_type);
                        attend(c, l, (int32_t)pos, (int32_t)h, q, c->att + t * QD + h * hd, ith);
                    }
                }
            }
        } else {
            for (int64_t t = t0; t < t1; t++) {
                const int64_t pos = J->pos0 + t;
                const float *cs = c->rope_cos + pos * half, *sn = c->rope_sin + pos * half;
                for (int32_t h = 0; h < hp->n_head; h++)
                    rope_head(c->q + t * QD + h * hd, cs, sn, (int32_t)hd, hp->rope_type);
                for (int32_t g = 0; g < hp->n_head_kv; g++) rope_store_kv(c, J, l, g, t, t + 1);
            }
            sync_threads(c);
            int64_t a0, a1;
            bitnet_split_range(n * hp->n_head, ith, nth, &a0, &a1);
            for (int64_t a = a0; a < a1; a++) {
                const int64_t t = a / hp->n_head, h = a % hp->n_head;
                attend(c, l, (int32_t)(J->pos0 + t), (int32_t)h, c->q + t * QD + h * hd, c->att + t * QD + h * hd,
                       ith);
            }
        }
        sync_threads(c);

        /* bitnet graphs: att = rmsnorm(att) · attn_sub_norm; output projection proj = Wo·att     proj (n, D) */
        if (hp->sub_norms) {
            for (int64_t t = t0; t < t1; t++)
                rmsnorm(c->att + t * QD, c->att + t * QD, L->attn_sub_norm, QD, hp->rms_eps);
            sync_threads(c);
        }
        matmul(c, &L->wo, c->att, c->proj, n, ith, nth, 1, true);

        /* residual, FFN norm: x += proj; xb = rmsnorm(x) · ffn_norm              xb (n, D) */
        for (int64_t t = t0; t < t1; t++) {
            for (int64_t i = 0; i < D; i++) c->x[t * D + i] += c->proj[t * D + i];
            rmsnorm(c->xb + t * D, c->x + t * D, L->ffn_norm, D, hp->rms_eps);
        }
        sync_threads(c);

        /* FFN: hb = Wgate·xb, hb2 = Wup·xb                                 hb, hb2 (n, F) */
        matmul(c, &L->w_gate, c->xb, c->hb, n, ith, nth, 0, false);
        matmul(c, &L->w_up, c->xb, c->hb2, n, ith, nth, 1, true);

        /* hb = act(hb) ⊙ hb2 (act: silu, or relu² for bitnet-b1.58); bitnet graphs then
         * hb = rmsnorm(hb) · ffn_sub_norm                                          hb (n, F) */
        for (int64_t t = t0; t < t1; t++) {
            float *g = c->hb + t * F;
            const float *u = c->hb2 + t * F;
            if (hp->ffn_act == BITNET_ACT_RELU2) {
                for (int64_t i = 0; i < F; i++) g[i] = relu2(g[i]) * u[i];
            } else {
                for (int64_t i = 0; i < F; i++) g[i] = silu(g[i]) * u[i];
            }
            if (hp->sub_norms) rmsnorm(g, g, L->ffn_sub_norm, F, hp->rms_eps);
        }
        sync_threads(c);

        /* down projection and residual: x += Wdown·hb                             x (n, D)
         * then the next layer's attention norm xb = rmsnorm(x) · attn_norm, or after the last layer
         * the final norm of the tokens whose logits are wanted, xb[j] = rmsnorm(x[out_first+j]) ·
         * output_norm, in the head's input format (F16 head: rounded to F16; Q8_0 head: Q8_0) */
        matmul(c, &L->w_down, c->hb, c->proj, n, ith, nth, 0, true);
        const bool last = l + 1 == hp->n_layer;
        for (int64_t t = t0; t < t1; t++) {
            for (int64_t i = 0; i < D; i++) c->x[t * D + i] += c->proj[t * D + i];
            if (!last) {
                rmsnorm(c->xb + t * D, c->x + t * D, m->layers[l + 1].attn_norm, D, hp->rms_eps);
            } else if (t >= J->out_first && t < J->out_first + J->n_out) {
                const int64_t j = t - J->out_first;
                float *xo = c->xb + j * D;
                rmsnorm(xo, c->x + t * D, m->output_norm, D, hp->rms_eps);
                if (type == BITNET_TYPE_F16) {
                    for (int64_t i = 0; i < D; i++) c->head_f16[j * D + i] = round_f16(xo[i]);
                } else if (type == BITNET_TYPE_Q8_0) {
                    bitnet_quantize_row_q8_0(xo, c->head_q8 + j * (D / 32), D);
                }
            }
        }
        sync_threads(c);
    }

    /* logits = head · xb: vocabulary rows split among threads                logits (n_out, n_vocab) */
    int64_t r0, r1;
    bitnet_split_range(hp->n_vocab, ith, nth, &r0, &r1);
    float *row_f32 = c->head_row + (size_t)ith * D; /* Q6_K head: the row as float */
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = m->head_data + (size_t)r * m->head_row_bytes;
        if (type == BITNET_TYPE_Q6_K) row_q6_k_to_f32(row, row_f32, D);
        for (int64_t j = 0; j < J->n_out; j++) {
            float y;
            if (type == BITNET_TYPE_Q6_K) {
                y = dot_f32(row_f32, c->xb + j * D, D);
            } else if (type == BITNET_TYPE_F16) {
                y = dot_f16((const uint16_t *)row, c->head_f16 + j * D, D);
            } else if (type == BITNET_TYPE_Q8_0) {
                y = dot_q8_0((const bitnet_block_q8_0 *)row, c->head_q8 + j * (D / 32), D);
            } else {
                y = dot_f32((const float *)row, c->xb + j * D, D);
            }
            J->logits[j * hp->n_vocab + r] = y;
        }
    }
}

bitnet_status bitnet_decode(bitnet_context *c, const int32_t *tokens, int32_t n_tokens, int32_t n_past,
                            bool all_logits, bitnet_error *err) {
    if (!c) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_decode: NULL context");
    if (n_tokens < 1 || !tokens) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_decode: n_tokens = %d, need at least one token",
                           n_tokens);
    }
    if (n_past < 0 || (int64_t)n_past + n_tokens > c->n_ctx) {
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "bitnet_decode: n_past (%d) + n_tokens (%d) = %lld exceeds the context size n_ctx (%d)",
                           n_past, n_tokens, (long long)n_past + n_tokens, c->n_ctx);
    }
    const int32_t n_vocab = c->m->hp.n_vocab;
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                               "bitnet_decode: token id %d at index %d is out of range [0, %d)", tokens[i], i, n_vocab);
        }
    }
    const int32_t rows = all_logits ? n_tokens : 1;
    if (rows > c->logits_cap) {
        float *nl = realloc(c->logits, (size_t)rows * (size_t)n_vocab * sizeof(float));
        if (!nl) {
            return bitnet_fail(err, BITNET_ERR_NOMEM, "bitnet_decode: out of memory for %d × %d logits", rows, n_vocab);
        }
        c->logits = nl;
        c->logits_cap = rows;
    }
    for (int32_t start = 0; start < n_tokens; start += c->n_batch) {
        const int32_t n = n_tokens - start < c->n_batch ? n_tokens - start : c->n_batch;
        const bool last = start + n == n_tokens;
        fwd_job job = {
            .c = c,
            .tokens = tokens + start,
            .n = n,
            .pos0 = n_past + start,
            .out_first = all_logits ? 0 : n - 1,
            .n_out = all_logits ? n : (last ? 1 : 0),
            .logits = c->logits + (all_logits ? (size_t)start * n_vocab : 0),
        };
        bitnet_threadpool_run(c->tp, forward_task, &job);
    }
    c->n_last = n_tokens;
    c->all_last = all_logits;
    return BITNET_OK;
}

const float *bitnet_get_logits(const bitnet_context *c) {
    if (!c || c->n_last == 0) return NULL;
    return c->logits + (c->all_last ? (size_t)(c->n_last - 1) * c->m->hp.n_vocab : 0);
}

const float *bitnet_get_logits_ith(const bitnet_context *c, int32_t i) {
    if (!c || c->n_last == 0) return NULL;
    if (i < 0) i += c->n_last;
    if (i < 0 || i >= c->n_last) return NULL;
    if (c->all_last) return c->logits + (size_t)i * c->m->hp.n_vocab;
    return i == c->n_last - 1 ? c->logits : NULL;
}
