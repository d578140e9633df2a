/* dense.h — dense (non-ternary) dot products with a fixed summation order: F32 · F32, F16 · F32 and
 * Q8_0 · Q8_0, each in a scalar and (where built) an AVX2 and a NEON version that compute exactly the
 * same floats (the F16 head's product also in AVX-512); the F16 → F32 table they share; and the dense kernels
 * of the output head per stored type (bitnet_dense_kernel_for), the kernel half of the per-type traits (the
 * format half is bitnet_type_traits in base/types.h). Versions live in dense.c (scalar, dispatch),
 * dense_avx2.c, dense_avx512.c and dense_neon.c. */
#ifndef BITNET_DENSE_H
#define BITNET_DENSE_H

#include <string.h>

#include "base/quants.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills bitnet_dense_f16_table (hosted builds) and chooses the F16 and Q8_0 dot versions for this CPU
 * (AVX2 when bitnet_cpu_supports("avx2"), and bitnet_dense_mul_f16 in AVX-512 when bitnet_cpu_supports("avx512");
 * NEON when bitnet_cpu_supports("neon"), else scalar;
 * BITNET_ISA=scalar keeps the scalar ones). Runs once (pthread_once; a flag in the one-thread bare-metal
 * build); call it before any other function of this header. */
void bitnet_dense_init(void);

#if defined(BITNET_BARE_METAL) && defined(__ARM_FP16_FORMAT_IEEE)
/* The binary16 value h as a float by the FPU's half-precision conversion (VCVTB.F32.F16 of FPv4-SP: exact,
 * NaNs made quiet with their payload, as bitnet_fp16_to_fp32 does; tests/mcu/test_mcu_kernels.c compares all
 * 65536 codes). The bare-metal build has no room for the 256 KiB table. */
static inline float bitnet_dense_f16(uint16_t h) {
    __fp16 v;
    memcpy(&v, &h, sizeof v);
    return (float)v;
}
#elif defined(BITNET_BARE_METAL)
/* The binary16 value h as a float, computed (bitnet_fp16_to_fp32, exact): the bare-metal build has no
 * room for the 256 KiB table, and both give the same float for every h. */
static inline float bitnet_dense_f16(uint16_t h) { return bitnet_fp16_to_fp32(h); }
#else
/* binary16 → binary32 for all 65536 codes (exact: bitnet_fp16_to_fp32); filled by bitnet_dense_init. */
extern float bitnet_dense_f16_table[1 << 16];

/* The binary16 value h as a float (table lookup; bitnet_dense_init first). */
static inline float bitnet_dense_f16(uint16_t h) { return bitnet_dense_f16_table[h]; }
#endif

/* x rounded to the nearest binary16 value (bitnet_fp32_to_fp16), as a float. */
static inline float bitnet_dense_round_f16(float x) { return bitnet_dense_f16(bitnet_fp32_to_fp16(x)); }

/* h[i·stride] = bitnet_fp32_to_fp16(x[i] · scale) for i < n (one IEEE multiply, then round to nearest
 * even; x · 1 is x, but for a signalling NaN made quiet, which the conversion does anyway). The AVX2 version converts 8 at a time with F16C's VCVTPS2PH, which
 * rounds the same way and keeps NaN payloads as bitnet_fp32_to_fp16 does: the same codes for every
 * float (tests/test_dense.cc). The attention's query and probabilities and the KV-cache stores. */
void bitnet_dense_to_f16(const float *x, float scale, uint16_t *h, size_t stride, int64_t n);
/* y[i] = bitnet_dense_round_f16(x[i] · scale) for i < n (y may be x): the same values as above, as floats. */
void bitnet_dense_round_f16_row(const float *x, float scale, float *y, int64_t n);

/* Σ a[i]·b[i] over n floats. Fixed order: eight lane sums s[i % 8] accumulated in index order, then
 * the tree ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)). */
float bitnet_dense_dot_f32(const float *a, const float *b, int64_t n);

/* Σ a[i]·b[i] for a binary16 vector a[n] and a float vector b[n] whose values are binary16 values
 * (rounded with bitnet_dense_round_f16 first). Such a product is exact in binary32, so only the
 * summation order matters, and it is fixed: 32 lane sums s[i % 32] accumulated in index order, folded
 * as lanes (l, l+16), (l, l+8), (l, l+4), then (s0+s1) + (s2+s3); a tail of n % 32 products is added
 * in double. This is the order of ggml's AVX2 F16 dot product (four 8-lane accumulators), so the
 * attention and the F16 head round like bitnet.cpp's x86 build. The scalar, AVX2/F16C and NEON
 * versions all compute exactly this (same lanes, same fold), so results are identical on every ISA. */
float bitnet_dense_dot_f16(const uint16_t *a, const float *b, int64_t n);

/* out[r] = bitnet_dense_dot_f16(a + r · a_stride, b, n) for r < n_rows: n_rows binary16 rows (a_stride values
 * apart) times one float vector b[n] of binary16 values (as for the single dot), each result the single
 * dot's float. The AVX2 version adds the tails
 * (n % 32) of four rows at once in double lanes, the same additions per row: the attention's scores (key
 * rows · query). */
void bitnet_dense_dot_f16_rows(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_rows,
                               float *out);

/* out[i] = bitnet_dense_dot_f16(column i of a, b, n) for i < n_cols, column i being the binary16 values
 * a[j · a_stride + i] for j < n and b[n] binary16 values (as for the single dot): the same floats as the
 * single dot of each gathered column (lane j % 32 of column i accumulates in j order, the same fold, the
 * tail in double). The attention's output: the value rows of positions 0..n-1 (stored as a token's
 * contiguous row, a_stride apart) weighted by the probabilities b, a sum down each channel. The AVX2
 * version runs 32 channels at once in vectors, one lane of the 32 after another (positions j ≡ lane mod 32
 * in order), and their tails in double vectors; the scalar one (NEON and bare-metal builds too) 8 channels
 * per pass over the positions. */
void bitnet_dense_dot_f16_columns(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_cols,
                                  float *out);

/* out[j · out_stride + r] = bitnet_dense_dot_f16(a + r · a_stride, b + j · b_stride, n) for r < n_rows and
 * j < n_cols: binary16 rows (a_stride values apart) times float columns (b_stride floats apart, holding
 * binary16 values), each result the single dot's float (same lanes, same fold per pair). One column (the
 * generated token) streams the rows from start to end: AVX2 two rows at a time, AVX-512 four (the 32 lanes in
 * two zmm registers), each with a software prefetch 1 KiB ahead. Several columns: AVX2 in blocks of 8 rows ×
 * 8 columns × 256 values that stay in L1, widening each 8 binary16 values once for three columns; AVX-512 in
 * blocks of 4 rows × 16 columns × 256 values, each 32 values widened once for eight columns; NEON widens each
 * 4 once for two. The output head: vocabulary rows times every sequence's head input, each row read from
 * memory once per call (once per 16 columns with AVX-512, 8 with AVX2). */
void bitnet_dense_mul_f16(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                          int64_t n_cols, int64_t n, float *out, size_t out_stride);

/* Σ a[i]·b[i] for a BF16 vector a[n] (each value the upper half of a binary32, widened exactly) and a float
 * vector b[n]: exactly bitnet_dense_dot_f32 of the widened a and b (eight lane sums, the same tree), so a BF16
 * row gives the bits its F32 copy gives. */
float bitnet_dense_dot_bf16(const uint16_t *a, const float *b, int64_t n);

/* out[j · out_stride + r] = bitnet_dense_dot_bf16(a + r · a_stride, b + j · b_stride, n) for r < n_rows and
 * j < n_cols, each result the single dot's float. The AVX2 version (also taken on AVX-512 machines: the order
 * has eight lanes) streams four rows at a time for one column, widening 8 values per vpmovzxwd + vpslld,
 * each row prefetched 1 KiB ahead, and widens each row's 8 values once for every column of several: the BF16
 * output head. */
void bitnet_dense_mul_bf16(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                           int64_t n_cols, int64_t n, float *out, size_t out_stride);

/* Σ v[i]·b[i] for the values v of n/256 Q6_K blocks at a (bitnet_q6_k_block_to_f32, any alignment) and a float
 * vector b[n]: exactly bitnet_dense_dot_f32 of the decoded row and b (eight lane sums, the same tree), so a
 * Q6_K row gives the bits of its decoded F32 copy. */
float bitnet_dense_dot_q6_k(const uint8_t *a, const float *b, int64_t n);

/* out[j · out_stride + r] = bitnet_dense_dot_q6_k(a + r · a_stride, b + j · b_stride, n) for r < n_rows and
 * j < n_cols (a_stride in bytes), each result the single dot's float. The AVX2 version decodes each block
 * into 256 floats on the stack with vector shifts and masks (the same two binary32 products per value) and
 * multiplies them into up to four columns at once, each row prefetched 1 KiB ahead: the Q6_K output head,
 * without a decoded copy of each row in memory. */
void bitnet_dense_mul_q6_k(const uint8_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                           int64_t n_cols, int64_t n, float *out, size_t out_stride);

/* Q8_0 × Q8_0 dot product of n/32 blocks: Σ_blocks (float)(Σ qa·qb) · (da·db), blocks in order
 * (ggml's Q8_0 vec_dot definition). The integer block sums are exact (|Σ| ≤ 32·128·127 < 2^24, so the
 * conversion to float is exact too); only the float steps round, and every version performs the same
 * float operations in the same order: per block p = (float)isum · (da·db), then sum += p in block
 * order. b must hold values in [-127, 127] (bitnet_quantize_row_q8_0's output); a may hold -128. */
float bitnet_dense_dot_q8_0(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n);

/* out[j · out_stride + r] = bitnet_dense_dot_q8_0(a + r · a_stride, b + j · b_stride, n) for r < n_rows and
 * j < n_cols (strides in blocks), each result the single dot's float. The AVX2 version runs four rows per pass
 * over a column, their block sums and float steps in the four lanes of one vector (the same operations per
 * row, four independent sums), each row prefetched 1 KiB ahead; the AVX-512 version is the same with one
 * VNNI vpdpbusd per block in place of maddubs + madd: the Q8_0 output head. */
void bitnet_dense_mul_q8_0(const bitnet_block_q8_0 *a, size_t a_stride, int64_t n_rows, const bitnet_block_q8_0 *b,
                           size_t b_stride, int64_t n_cols, int64_t n, float *out, size_t out_stride);

/* The dense kernel that multiplies rows of one stored type by a float activation x[n]:
 * prepare converts x into the kernel's input format (act_bytes(n) bytes: F32 copies it, F16 rounds
 * each value to binary16 and keeps floats, Q8_0 quantizes it with bitnet_quantize_row_q8_0), then
 * dot(row, act, n) is the row's dot product with it, and mul the products of n_rows rows (row_bytes
 * apart) with n_cols prepared activations (act_stride bytes apart):
 * out[j · out_stride + r] = dot(rows + r · row_bytes, act + j · act_stride, n), the floats dot gives. */
typedef struct bitnet_dense_kernel {
    int type;                                               /* stored row type (BITNET_TYPE_*) */
    size_t (*act_bytes)(int64_t n);                         /* bytes of one prepared activation row */
    void (*prepare)(const float *x, void *act, int64_t n);  /* x[n] → act */
    float (*dot)(const void *row, const void *act, int64_t n);
    void (*mul)(const void *rows, size_t row_bytes, int64_t n_rows, const void *act, size_t act_stride,
                int64_t n_cols, int64_t n, float *out, size_t out_stride);
} bitnet_dense_kernel;

/* The kernel for rows of `type` (F32, F16, BF16, Q8_0, Q6_K), NULL for other types: their rows are converted
 * to float first (bitnet_row_to_f32) and use the F32 kernel (the type's dense_dot_type in base/types.h). */
const bitnet_dense_kernel *bitnet_dense_kernel_for(int type);

#ifdef __cplusplus
}
#endif

#endif
