/* test_mcu_kernels.c — on the microcontroller itself (the bare-metal build, run by ctest under the board's
 * emulator): every LUT kernel this build has — the registry's kernels whose tensors fit the board's memory,
 * each (scheme, ISA) constructor and generic kernel, the scalar LUT kernels — and the I2_S int8 product
 * against the one scalar reference, bitnet_ref_gemm (src/kernels/lut/lut_ref.c): int32 sums bit-exact,
 * on random weights and activations and on the int16 worst case (every weight +1, every activation
 * +127). The host suite (tests/test_lut_kernels.cc, tests/test_i2s.cc) tests the same C code on x86 and
 * AArch64; this shows that arm-none-eabi-gcc's build of it computes the same.
 * Output: one line per kernel with the instructions one product with one activation column takes on the
 * core (LUT constructor or activation quantization included; printed, not asserted: docs/MCU.md) and a
 * summary; exit status 0 when everything matched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/quants.h"
#include "base/rng.h"
#include "kernels/dense/dense.h"
#include "kernels/i2s/i2s.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "mcu/board.h"

/* Largest packed weight of a registry kernel the test runs: 160 KiB (up to 768 x 768), which keeps the
 * emulated run near 10 s; the host suite runs every shape (tests/test_lut_kernels.cc). */
#define MAX_WEIGHT_BYTES ((size_t)160 << 10)
#define N_COLS 3

static int g_failed, g_checked;
static uint64_t g_cost_instr; /* instructions of the last one-column product measured */

/* " (N instructions per GEMV, X per weight)" for a one-column product of M x K that took n instructions
 * (nothing when the board counts none). */
static void print_cost_of(uint64_t n, int64_t M, int64_t K) {
    uint64_t probe;
    if (bitnet_board_instructions(&probe))
        printf("  (%llu instructions per GEMV, %.2f per weight)", (unsigned long long)n, (double)n / (double)(M * K));
    printf("\n");
}

typedef struct tcase {
    int64_t M, K;
    int8_t *w;     /* [M*K] ternary */
    float *x;      /* [N_COLS*K] activations */
    int8_t *q;     /* [N_COLS*K] their quantization (LAYOUTS §1) */
    int32_t *ref;  /* [N_COLS*M] the reference sums */
} tcase;

/* Random ternary weights and activations (or the worst case), their quantization and reference sums for
 * the weights packed as `type` with `tiles`; packed into *packed (malloc'ed). false when out of memory. */
static bool make_case(tcase *c, int type, bitnet_tiles tiles, bool worst, uint64_t seed, uint8_t **packed) {
    bitnet_rng rng;
    bitnet_rng_seed(&rng, seed);
    const size_t n = (size_t)(c->M * c->K);
    c->w = malloc(n);
    c->x = malloc((size_t)(N_COLS * c->K) * sizeof(float));
    c->q = malloc((size_t)(N_COLS * c->K));
    c->ref = malloc((size_t)(N_COLS * c->M) * sizeof(int32_t));
    *packed = malloc(bitnet_ternary_nbytes(type, c->M, c->K));
    if (!c->w || !c->x || !c->q || !c->ref || !*packed) {
        printf("FAIL out of memory for a %lldx%lld case\n", (long long)c->M, (long long)c->K);
        g_failed++;
        return false;
    }
    for (size_t i = 0; i < n; i++) c->w[i] = worst ? 1 : (int8_t)(bitnet_rng_next(&rng) % 3) - 1;
    for (int64_t i = 0; i < N_COLS * c->K; i++) c->x[i] = worst ? 1.0f : (float)(bitnet_rng_uniform(&rng) * 8.0 - 4.0);
    for (int n_ = 0; n_ < N_COLS; n_++) bitnet_quantize_act(c->x + n_ * c->K, c->K, c->q + n_ * c->K);
    bitnet_error err;
    bitnet_status st = type == BITNET_TYPE_I2_S ? bitnet_pack_i2s(c->w, c->M, c->K, 1.0f, *packed, &err)
                       : type == BITNET_TYPE_TL1 ? bitnet_pack_tl1(c->w, c->M, c->K, tiles, 1.0f, *packed, &err)
                                                 : bitnet_pack_tl2(c->w, c->M, c->K, tiles, 1.0f, *packed, &err);
    if (st != BITNET_OK) {
        printf("FAIL pack %lldx%lld: %s\n", (long long)c->M, (long long)c->K, err.msg);
        g_failed++;
        return false;
    }
    const bitnet_lut_shape sh = bitnet_lut_shape_make(type, c->M, c->K, tiles);
    bitnet_ref_gemm(type, *packed, &sh, c->q, N_COLS, c->ref);
    return true;
}

static void free_case(tcase *c, uint8_t *packed) {
    free(c->w);
    free(c->x);
    free(c->q);
    free(c->ref);
    free(packed);
}

/* A LUT kernel (ctor + qgemm) on every tile of an M x K weight with `tiles`, against the reference. */
static void check_lut(const char *name, int type, int64_t M, int64_t K, bitnet_tiles tiles, bitnet_lut_ctor_fn ctor,
                      bitnet_qgemm_fn qgemm) {
    for (int worst = 0; worst < 2; worst++) {
        tcase c = {M, K, NULL, NULL, NULL, NULL};
        uint8_t *packed = NULL;
        if (!make_case(&c, type, tiles, worst, 1000u + (uint64_t)(M * 7 + K), &packed)) {
            free_case(&c, packed);
            return;
        }
        const bitnet_lut_shape sh = bitnet_lut_shape_make(type, M, K, tiles);
        const size_t stride = (bitnet_qlut_bytes(type, &sh) + 63) & ~(size_t)63;
        int8_t *qlut = malloc(stride * N_COLS);
        int32_t *acc = malloc((size_t)(N_COLS * sh.BM) * sizeof(int32_t));
        int bad = 0;
        uint64_t i0 = 0;
        if (qlut && acc && worst == 0) { /* the cost of one column: constructor, then every tile */
            float s;
            bitnet_board_instructions(&i0);
            ctor(c.x, K, sh.three_k, qlut, &s);
            for (int64_t t = 0; t < M / sh.BM; t++) qgemm(&sh, acc, packed, qlut, stride, t, 1);
        }
        uint64_t i_end = 0;
        bitnet_board_instructions(&i_end);
        if (worst == 0) g_cost_instr = i_end - i0;
        if (qlut && acc) {
            for (int n = 0; n < N_COLS; n++) {
                float s;
                ctor(c.x + n * K, K, sh.three_k, qlut + (size_t)n * stride, &s);
            }
            for (int64_t t = 0; t < M / sh.BM && !bad; t++) {
                qgemm(&sh, acc, packed, qlut, stride, t, N_COLS);
                for (int n = 0; n < N_COLS && !bad; n++) {
                    for (int64_t i = 0; i < sh.BM; i++) {
                        if (acc[n * sh.BM + i] != c.ref[n * M + t * sh.BM + i]) {
                            printf("FAIL %s %lldx%lld tiles %d/%d/%d%s: row %lld column %d: %ld, reference %ld\n",
                                   name, (long long)M, (long long)K, (int)tiles.BM, (int)tiles.BK, (int)tiles.bm,
                                   worst ? " (worst case)" : "", (long long)(t * sh.BM + i), n,
                                   (long)acc[n * sh.BM + i], (long)c.ref[n * M + t * sh.BM + i]);
                            bad = 1;
                            break;
                        }
                    }
                }
            }
        } else {
            printf("FAIL %s: out of memory\n", name);
            bad = 1;
        }
        free(qlut);
        free(acc);
        free_case(&c, packed);
        g_failed += bad;
        g_checked++;
        if (bad) return;
    }
    printf("ok   %s %lldx%lld tiles %d/%d/%d", name, (long long)M, (long long)K, (int)tiles.BM, (int)tiles.BK,
           (int)tiles.bm);
    print_cost_of(g_cost_instr, M, K);
}

static void check_i2s(int64_t M, int64_t K) {
    for (int worst = 0; worst < 2; worst++) {
        tcase c = {M, K, NULL, NULL, NULL, NULL};
        uint8_t *packed = NULL;
        const bitnet_tiles none = {0, 0, 0};
        int bad = 0;
        int32_t *acc = malloc((size_t)(N_COLS * M) * sizeof(int32_t));
        int32_t qsum[N_COLS];
        if (acc && make_case(&c, BITNET_TYPE_I2_S, none, worst, 77u + (uint64_t)K, &packed)) {
            if (worst == 0) { /* the cost of one column: quantization with its sum, then every row */
                uint64_t i0 = 0, i1 = 0;
                bitnet_board_instructions(&i0);
                int32_t s0;
                bitnet_i2s_quantize_act(c.x, K, c.q, &s0);
                bitnet_i2s_gemm(packed, M, K, c.q, (size_t)K, &s0, 1, 0, M, acc, (size_t)M);
                bitnet_board_instructions(&i1);
                g_cost_instr = i1 - i0;
            }
            for (int n = 0; n < N_COLS; n++) qsum[n] = bitnet_i2s_qsum(c.q + n * K, K);
            bitnet_i2s_gemm(packed, M, K, c.q, (size_t)K, qsum, N_COLS, 0, M, acc, (size_t)M);
            for (int64_t i = 0; i < N_COLS * M && !bad; i++) {
                if (acc[i] != c.ref[i]) {
                    printf("FAIL i2s_gemm (%s) %lldx%lld: output %lld: %ld, reference %ld\n", bitnet_i2s_isa(),
                           (long long)M, (long long)K, (long long)i, (long)acc[i], (long)c.ref[i]);
                    bad = 1;
                }
            }
        } else {
            bad = 1;
        }
        free(acc);
        free_case(&c, packed);
        g_failed += bad;
        g_checked++;
        if (bad) return;
    }
    printf("ok   i2s_gemm (%s) %lldx%lld", bitnet_i2s_isa(), (long long)M, (long long)K);
    print_cost_of(g_cost_instr, M, K);
}

int main(void) {
    /* the registry's specialized kernels this CPU runs, where the tensor fits */
    for (size_t i = 0; i < bitnet_lut_n_kernels; i++) {
        const bitnet_lut_kernel *k = &bitnet_lut_kernels[i];
        if (!bitnet_cpu_supports(k->isa) || bitnet_ternary_nbytes(k->type, k->M, k->K) > MAX_WEIGHT_BYTES) continue;
        bitnet_lut_impl impl;
        bitnet_lut_shape sh = bitnet_lut_shape_make(k->type, k->M, k->K, k->tiles);
        if (bitnet_lut_select(k->type, &sh, &impl, NULL) != BITNET_OK) continue;
        check_lut(k->name, k->type, k->M, k->K, k->tiles, impl.ctor, k->qgemm);
    }
    /* every (scheme, ISA) constructor + generic kernel, and the scalar LUT path, on odd legal shapes */
    static const struct {
        int type;
        int64_t M, K;
        bitnet_tiles tiles;
    } odd[] = {
        {BITNET_TYPE_TL1, 96, 200, {96, 40, 32}},   {BITNET_TYPE_TL1, 128, 256, {64, 128, 64}},
        {BITNET_TYPE_TL2, 96, 320, {96, 96, 32}},   {BITNET_TYPE_TL2, 64, 752, {32, 240, 32}},
        {BITNET_TYPE_TL2, 32, 264, {32, 24, 32}},
    };
    for (size_t j = 0; j < sizeof odd / sizeof odd[0]; j++) {
        for (size_t i = 0; i < bitnet_lut_n_isa_impls; i++) {
            const bitnet_lut_isa_impl *p = &bitnet_lut_isa_impls[i];
            if (p->type != odd[j].type || !bitnet_cpu_supports(p->isa)) continue;
            check_lut(p->generic_name, p->type, odd[j].M, odd[j].K, odd[j].tiles, p->ctor, p->generic);
        }
        if (odd[j].type == BITNET_TYPE_TL1)
            check_lut("bitnet_tl1_qgemm_generic__scalar", BITNET_TYPE_TL1, odd[j].M, odd[j].K, odd[j].tiles,
                      bitnet_tl1_lut_ctor__scalar, bitnet_tl1_qgemm_generic__scalar);
        else
            check_lut("bitnet_tl2_qgemm_generic__scalar", BITNET_TYPE_TL2, odd[j].M, odd[j].K, odd[j].tiles,
                      bitnet_tl2_lut_ctor__scalar, bitnet_tl2_qgemm_generic__scalar);
    }
    /* binary16 → float as the dense kernels read it on this core, against the portable definition */
    {
        bitnet_dense_init();
        int bad = 0;
        for (uint32_t h = 0; h < 65536u && !bad; h++) {
            const float a = bitnet_dense_f16((uint16_t)h), b = bitnet_fp16_to_fp32((uint16_t)h);
            if (memcmp(&a, &b, sizeof a) != 0) {
                printf("FAIL bitnet_dense_f16(0x%04lx) differs from bitnet_fp16_to_fp32\n", (unsigned long)h);
                bad = 1;
            }
        }
        g_failed += bad;
        g_checked++;
        if (!bad) printf("ok   bitnet_dense_f16: all 65536 codes as bitnet_fp16_to_fp32\n");
    }
    /* I2_S: K a multiple of 128, of 32 only, and rows straddling 128-weight blocks */
    check_i2s(64, 256);
    check_i2s(32, 96);
    check_i2s(64, 200);
    check_i2s(256, 768);
    printf("%d kernel checks, %d failed\n", g_checked, g_failed);
    return g_failed == 0 && g_checked > 0 ? 0 : 1;
}
