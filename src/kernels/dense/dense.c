/* dense.c — the F16 → F32 table, the scalar F32 / F16 / BF16 / Q6_K / Q8_0 dot products, the choice of the F16 and
 * Q8_0 versions for this CPU, and the output head's dense kernels per stored type (contracts in
 * dense.h; the AVX2, AVX-512 and NEON versions are in dense_avx2.c, dense_avx512.c and dense_neon.c). */
#include "kernels/dense/dense.h"

#include <string.h>

#include "kernels/dense/dense_internal.h"
#include "kernels/isa.h"

#ifndef BITNET_BARE_METAL
#include <pthread.h>

float bitnet_dense_f16_table[1 << 16];
#endif

float bitnet_dense_dot_f32(const float *a, const float *b, int64_t n) {
    float s[8] = {0};
    const int64_t n8 = n - n % 8;
    for (int64_t i = 0; i < n8; i += 8) {
        for (int l = 0; l < 8; l++) s[l] += a[i + l] * b[i + l];
    }
    for (int64_t i = n8; i < n; i++) s[i - n8] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* the binary32 whose upper half is h */
static inline float bf16_value(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float bitnet_dense_dot_bf16(const uint16_t *a, const float *b, int64_t n) {
    float s[8] = {0};
    const int64_t n8 = n - n % 8;
    for (int64_t i = 0; i < n8; i += 8) {
        for (int l = 0; l < 8; l++) s[l] += bf16_value(a[i + l]) * b[i + l];
    }
    for (int64_t i = n8; i < n; i++) s[i - n8] += bf16_value(a[i]) * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void mul_bf16_scalar(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                            int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t j = 0; j < n_cols; j++)
            out[(size_t)j * out_stride + (size_t)r] = bitnet_dense_dot_bf16(a + (size_t)r * a_stride, b + (size_t)j * b_stride, n);
}

float bitnet_dense_dot_q6_k(const uint8_t *a, const float *b, int64_t n) {
    float s[8] = {0}, v[256];
    for (int64_t k = 0; k < n / 256; k++) {
        bitnet_q6_k_block_to_f32(a + (size_t)k * 210, v);
        for (int i = 0; i < 256; i += 8)
            for (int l = 0; l < 8; l++) s[l] += v[i + l] * b[256 * k + i + l];
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void mul_q6_k_scalar(const uint8_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                            int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t j = 0; j < n_cols; j++)
            out[(size_t)j * out_stride + (size_t)r] = bitnet_dense_dot_q6_k(a + (size_t)r * a_stride, b + (size_t)j * b_stride, n);
}

static float dot_f16_scalar(const uint16_t *a, const float *b, int64_t n) {
    float s[32] = {0};
    const int64_t n32 = n - n % 32;
    for (int64_t i = 0; i < n32; i += 32) {
        for (int l = 0; l < 32; l++) s[l] += bitnet_dense_f16(a[i + l]) * b[i + l];
    }
    return bitnet_dense_dot_f16_finish(s, a, b, n32, n);
}

static void mul_f16_scalar(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                           int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t j = 0; j < n_cols; j++)
            out[(size_t)j * out_stride + (size_t)r] = dot_f16_scalar(a + (size_t)r * a_stride, b + (size_t)j * b_stride, n);
}

static void dot_f16_rows_loop(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_rows,
                              float *out);

/* 8 channels per pass over the 32-lane part (each position's 8 values read together, 1 KiB of lane sums on
 * the stack), each channel with dot_f16_scalar's lanes, fold and tail; fewer than 8 left: one at a time. */
static void dot_f16_columns_scalar(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_cols,
                                   float *out) {
    enum { CB = 8 };
    const int64_t n32 = n - n % 32;
    int64_t i0 = 0;
    for (; i0 + CB <= n_cols; i0 += CB) {
        float s[32][CB] = {{0}};
        for (int64_t j = 0; j < n32; j++) {
            const uint16_t *row = a + (size_t)j * a_stride + (size_t)i0;
            for (int c = 0; c < CB; c++) s[j % 32][c] += bitnet_dense_f16(row[c]) * b[j];
        }
        for (int c = 0; c < CB; c++) {
            float lanes[32];
            for (int l = 0; l < 32; l++) lanes[l] = s[l][c];
            out[i0 + c] = bitnet_dense_dot_f16_tail(bitnet_dense_fold32(lanes), a + i0 + c, a_stride, b, n32, n);
        }
    }
    for (; i0 < n_cols; i0++) out[i0] = bitnet_dense_dot_f16_column(a + i0, a_stride, b, n);
}

static float dot_q8_0_scalar(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 32; j++) isum += (int32_t)a[i].qs[j] * (int32_t)b[i].qs[j];
        sum += (float)isum * (bitnet_dense_f16(a[i].d) * bitnet_dense_f16(b[i].d));
    }
    return sum;
}

/* bitnet_dense_mul_q8_0 pair by pair through the chosen single dot (NEON on AArch64, else scalar) */
static void mul_q8_0_loop(const bitnet_block_q8_0 *a, size_t a_stride, int64_t n_rows, const bitnet_block_q8_0 *b,
                          size_t b_stride, int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t j = 0; j < n_cols; j++)
            out[(size_t)j * out_stride + (size_t)r] =
                bitnet_dense_dot_q8_0(a + (size_t)r * a_stride, b + (size_t)j * b_stride, n);
}

static void to_f16_scalar(const float *x, float scale, uint16_t *h, size_t stride, int64_t n) {
    for (int64_t i = 0; i < n; i++) h[(size_t)i * stride] = bitnet_fp32_to_fp16(x[i] * scale);
}

static void round_f16_row_scalar(const float *x, float scale, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = bitnet_dense_round_f16(x[i] * scale);
}

static float (*g_dot_f16)(const uint16_t *a, const float *b, int64_t n) = dot_f16_scalar;
static void (*g_dot_f16_rows)(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_rows,
                              float *out) = dot_f16_rows_loop;
static void (*g_dot_f16_columns)(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_cols,
                                 float *out) = dot_f16_columns_scalar;
static void (*g_mul_f16)(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                         int64_t n_cols, int64_t n, float *out, size_t out_stride) = mul_f16_scalar;
static void (*g_mul_bf16)(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                          int64_t n_cols, int64_t n, float *out, size_t out_stride) = mul_bf16_scalar;
static void (*g_mul_q6_k)(const uint8_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                          int64_t n_cols, int64_t n, float *out, size_t out_stride) = mul_q6_k_scalar;
static void (*g_to_f16)(const float *x, float scale, uint16_t *h, size_t stride, int64_t n) = to_f16_scalar;
static void (*g_round_f16_row)(const float *x, float scale, float *y, int64_t n) = round_f16_row_scalar;
static float (*g_dot_q8_0)(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) = dot_q8_0_scalar;
static void (*g_mul_q8_0)(const bitnet_block_q8_0 *a, size_t a_stride, int64_t n_rows, const bitnet_block_q8_0 *b,
                          size_t b_stride, int64_t n_cols, int64_t n, float *out, size_t out_stride) = mul_q8_0_loop;
static void dense_init_once(void) {
#ifndef BITNET_BARE_METAL
    for (uint32_t i = 0; i < (1u << 16); i++) bitnet_dense_f16_table[i] = bitnet_fp16_to_fp32((uint16_t)i);
#endif
#if defined(__x86_64__)
    if (bitnet_cpu_supports("avx2")) {
        g_dot_f16 = bitnet_dense_dot_f16__avx2;
        g_mul_f16 = bitnet_dense_mul_f16__avx2;
        g_dot_f16_columns = bitnet_dense_dot_f16_columns__avx2;
        g_dot_f16_rows = bitnet_dense_dot_f16_rows__avx2;
        g_dot_q8_0 = bitnet_dense_dot_q8_0__avx2;
        g_mul_q8_0 = bitnet_dense_mul_q8_0__avx2;
        g_mul_bf16 = bitnet_dense_mul_bf16__avx2;
        g_mul_q6_k = bitnet_dense_mul_q6_k__avx2;
        g_to_f16 = bitnet_dense_to_f16__avx2;
        g_round_f16_row = bitnet_dense_round_f16_row__avx2;
        if (bitnet_cpu_supports("avx512")) {
            g_mul_f16 = bitnet_dense_mul_f16__avx512;
            g_mul_q8_0 = bitnet_dense_mul_q8_0__avx512;
        }
    }
#elif defined(__aarch64__)
    if (bitnet_cpu_supports("neon")) {
        g_dot_f16 = bitnet_dense_dot_f16__neon;
        g_mul_f16 = bitnet_dense_mul_f16__neon;
        g_dot_q8_0 = bitnet_dense_dot_q8_0__neon;
    }
#endif
}

#ifdef BITNET_BARE_METAL
void bitnet_dense_init(void) {
    static bool done = false; /* one thread */
    if (!done) dense_init_once();
    done = true;
}
#else
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

void bitnet_dense_init(void) { pthread_once(&g_once, dense_init_once); }
#endif

float bitnet_dense_dot_f16(const uint16_t *a, const float *b, int64_t n) { return g_dot_f16(a, b, n); }

/* the scalar and NEON rows: one single dot per row */
static void dot_f16_rows_loop(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_rows,
                              float *out) {
    for (int64_t r = 0; r < n_rows; r++) out[r] = g_dot_f16(a + (size_t)r * a_stride, b, n);
}

void bitnet_dense_dot_f16_rows(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_rows,
                               float *out) {
    g_dot_f16_rows(a, a_stride, b, n, n_rows, out);
}

void bitnet_dense_dot_f16_columns(const uint16_t *a, size_t a_stride, const float *b, int64_t n, int64_t n_cols,
                                  float *out) {
    g_dot_f16_columns(a, a_stride, b, n, n_cols, out);
}

void bitnet_dense_mul_f16(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                          int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    g_mul_f16(a, a_stride, n_rows, b, b_stride, n_cols, n, out, out_stride);
}

void bitnet_dense_mul_bf16(const uint16_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                           int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    g_mul_bf16(a, a_stride, n_rows, b, b_stride, n_cols, n, out, out_stride);
}

void bitnet_dense_mul_q6_k(const uint8_t *a, size_t a_stride, int64_t n_rows, const float *b, size_t b_stride,
                           int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    g_mul_q6_k(a, a_stride, n_rows, b, b_stride, n_cols, n, out, out_stride);
}

void bitnet_dense_to_f16(const float *x, float scale, uint16_t *h, size_t stride, int64_t n) {
    g_to_f16(x, scale, h, stride, n);
}

void bitnet_dense_round_f16_row(const float *x, float scale, float *y, int64_t n) { g_round_f16_row(x, scale, y, n); }

float bitnet_dense_dot_q8_0(const bitnet_block_q8_0 *a, const bitnet_block_q8_0 *b, int64_t n) {
    return g_dot_q8_0(a, b, n);
}

void bitnet_dense_mul_q8_0(const bitnet_block_q8_0 *a, size_t a_stride, int64_t n_rows, const bitnet_block_q8_0 *b,
                           size_t b_stride, int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    g_mul_q8_0(a, a_stride, n_rows, b, b_stride, n_cols, n, out, out_stride);
}

/* ---- the output head's kernels per stored type ------------------------------------------------ */

static size_t act_bytes_f32(int64_t n) { return (size_t)n * sizeof(float); }
static size_t act_bytes_q8_0(int64_t n) { return (size_t)(n / 32) * sizeof(bitnet_block_q8_0); }

static void prepare_f32(const float *x, void *act, int64_t n) { memcpy(act, x, (size_t)n * sizeof(float)); }

static void prepare_f16(const float *x, void *act, int64_t n) {
    float *y = act;
    for (int64_t i = 0; i < n; i++) y[i] = bitnet_dense_round_f16(x[i]);
}

static void prepare_q8_0(const float *x, void *act, int64_t n) { bitnet_quantize_row_q8_0(x, act, n); }

static float dot_row_f32(const void *row, const void *act, int64_t n) { return bitnet_dense_dot_f32(row, act, n); }
static float dot_row_f16(const void *row, const void *act, int64_t n) { return bitnet_dense_dot_f16(row, act, n); }
static float dot_row_bf16(const void *row, const void *act, int64_t n) { return bitnet_dense_dot_bf16(row, act, n); }
static float dot_row_q6_k(const void *row, const void *act, int64_t n) { return bitnet_dense_dot_q6_k(row, act, n); }
static float dot_row_q8_0(const void *row, const void *act, int64_t n) { return bitnet_dense_dot_q8_0(row, act, n); }

/* out[j · out_stride + r] = dot(row r, activation j) pair by pair: the F32 kernel's mul */
static void mul_pairs(float (*dot)(const void *, const void *, int64_t), const void *rows, size_t row_bytes,
                      int64_t n_rows, const void *act, size_t act_stride, int64_t n_cols, int64_t n, float *out,
                      size_t out_stride) {
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t j = 0; j < n_cols; j++)
            out[(size_t)j * out_stride + (size_t)r] =
                dot((const char *)rows + (size_t)r * row_bytes, (const char *)act + (size_t)j * act_stride, n);
}

static void mul_f32(const void *rows, size_t row_bytes, int64_t n_rows, const void *act, size_t act_stride,
                    int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    mul_pairs(dot_row_f32, rows, row_bytes, n_rows, act, act_stride, n_cols, n, out, out_stride);
}

/* row_bytes and act_stride are whole numbers of binary16 values and floats (row sizes, act_bytes_f32) */
static void mul_f16(const void *rows, size_t row_bytes, int64_t n_rows, const void *act, size_t act_stride,
                    int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    bitnet_dense_mul_f16(rows, row_bytes / sizeof(uint16_t), n_rows, act, act_stride / sizeof(float), n_cols, n, out,
                         out_stride);
}

/* row_bytes and act_stride are whole numbers of bfloat16 values and floats (row sizes, act_bytes_f32) */
static void mul_bf16(const void *rows, size_t row_bytes, int64_t n_rows, const void *act, size_t act_stride,
                     int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    bitnet_dense_mul_bf16(rows, row_bytes / sizeof(uint16_t), n_rows, act, act_stride / sizeof(float), n_cols, n, out,
                          out_stride);
}

/* row_bytes in bytes; act_stride a whole number of floats (act_bytes_f32) */
static void mul_q6_k(const void *rows, size_t row_bytes, int64_t n_rows, const void *act, size_t act_stride,
                     int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    bitnet_dense_mul_q6_k(rows, row_bytes, n_rows, act, act_stride / sizeof(float), n_cols, n, out, out_stride);
}

/* row_bytes and act_stride are whole numbers of blocks (row sizes, act_bytes_q8_0) */
static void mul_q8_0(const void *rows, size_t row_bytes, int64_t n_rows, const void *act, size_t act_stride,
                     int64_t n_cols, int64_t n, float *out, size_t out_stride) {
    bitnet_dense_mul_q8_0(rows, row_bytes / sizeof(bitnet_block_q8_0), n_rows, act, act_stride / sizeof(bitnet_block_q8_0),
                          n_cols, n, out, out_stride);
}

static const bitnet_dense_kernel k_kernels[] = {
    {BITNET_TYPE_F32, act_bytes_f32, prepare_f32, dot_row_f32, mul_f32},
    {BITNET_TYPE_F16, act_bytes_f32, prepare_f16, dot_row_f16, mul_f16}, /* activation: floats holding binary16 values */
    {BITNET_TYPE_BF16, act_bytes_f32, prepare_f32, dot_row_bf16, mul_bf16}, /* activation: the floats as they are */
    {BITNET_TYPE_Q8_0, act_bytes_q8_0, prepare_q8_0, dot_row_q8_0, mul_q8_0},
    {BITNET_TYPE_Q6_K, act_bytes_f32, prepare_f32, dot_row_q6_k, mul_q6_k}, /* activation: the floats as they are */
};

const bitnet_dense_kernel *bitnet_dense_kernel_for(int type) {
    for (size_t i = 0; i < sizeof k_kernels / sizeof k_kernels[0]; i++) {
        if (k_kernels[i].type == type) return &k_kernels[i];
    }
    return NULL;
}
