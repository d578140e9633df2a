/* head.c — the output-head measurement of bitnet-kernel-bench (head.h). */
#include "tools/kernel-bench/head.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/quants.h"
#include "base/rng.h"
#include "base/types.h"
#include "kernels/dense/dense.h"

/* One head product: the rows of copy `copy` times the prepared activation, rows split among nth threads. */
typedef struct kb_head {
    const bitnet_dense_kernel *k;
    const uint8_t *rows;  /* copies of V rows, `stride` bytes apart */
    size_t row_bytes, stride;
    int n_copies;
    int64_t V, D;
    const void *act;
    size_t act_bytes;
    float *out;           /* [V] */
    bitnet_threadpool *tp;
    int64_t copy;         /* the copy this call reads */
} kb_head;

static void kb_head_task(void *arg, int ith, int nth) {
    const kb_head *h = arg;
    int64_t r0, r1;
    bitnet_split_range(h->V, ith, nth, &r0, &r1);
    const uint8_t *rows = h->rows + (size_t)h->copy * h->stride;
    h->k->mul(rows + (size_t)r0 * h->row_bytes, h->row_bytes, r1 - r0, h->act, h->act_bytes, 1, h->D, h->out + r0,
              (size_t)h->V);
}

static void kb_head_call(void *ctx, int64_t i) {
    kb_head *h = ctx;
    h->copy = i % h->n_copies;
    bitnet_threadpool_run(h->tp, kb_head_task, h);
}

/* V x D rows of `type` with random values (F16: N(0, 0.02)-like uniform values; Q8_0: those quantized). */
static bool kb_head_rows(int type, int64_t V, int64_t D, uint64_t seed, uint8_t *dst, size_t row_bytes) {
    float *x = malloc((size_t)D * sizeof *x);
    if (!x) return false;
    bitnet_rng rng;
    bitnet_rng_seed(&rng, seed);
    for (int64_t r = 0; r < V; r++) {
        for (int64_t j = 0; j < D; j++) x[j] = (float)(bitnet_rng_uniform(&rng) - 0.5) * 0.08f;
        uint8_t *row = dst + (size_t)r * row_bytes;
        if (type == BITNET_TYPE_F16) {
            for (int64_t j = 0; j < D; j++) {
                const uint16_t h = bitnet_fp32_to_fp16(x[j]);
                memcpy(row + 2 * j, &h, 2);
            }
        } else {
            bitnet_quantize_row_q8_0(x, (bitnet_block_q8_0 *)row, D);
        }
    }
    free(x);
    return true;
}

void kb_run_heads(kb_session *s) {
    const kb_opts *o = s->o;
    if (o->n_heads == 0) return;
    bitnet_dense_init(); /* the dense kernels of this CPU */
    printf("\noutput head: dense GEMV of V rows x D values, rows split among the threads, weights from DRAM "
           "(rotated copies); GB/s = row bytes / median call; %%roof of the read bandwidth at the start\n");
    printf("type  shape            MiB thr |       GEMV us   GB/s %%roof | check\n");
    static const int types[2] = {BITNET_TYPE_F16, BITNET_TYPE_Q8_0};
    for (int hi = 0; hi < o->n_heads; hi++) {
        const int64_t V = o->heads[hi].M, D = o->heads[hi].K;
        for (int ti = 0; ti < 2; ti++) {
            const int type = types[ti];
            if (type == BITNET_TYPE_Q8_0 && D % 32 != 0) continue;
            const bitnet_dense_kernel *k = bitnet_dense_kernel_for(type);
            const bitnet_type_traits *tr = bitnet_type_traits_of(type);
            const size_t row_bytes = (size_t)(D / tr->blck_size) * (size_t)tr->type_size, bytes = row_bytes * (size_t)V;
            const size_t stride = kb_round64(bytes);
            const int n_copies = kb_copies_for(&s->env, bytes);
            kb_progress("head %s %lldx%lld: %d cop%s of %.1f MiB", bitnet_type_name(type), (long long)V, (long long)D,
                        n_copies, n_copies == 1 ? "y" : "ies", (double)bytes / 1048576.0);
            uint8_t *rows = kb_alloc(stride * (size_t)n_copies);
            float *x = kb_alloc((size_t)D * sizeof(float)), *out = kb_alloc((size_t)V * sizeof(float));
            void *act = kb_alloc(k->act_bytes(D));
            if (!rows || !x || !out || !act || !kb_head_rows(type, V, D, o->seed + (uint64_t)ti, rows, row_bytes)) {
                fprintf(stderr, "bitnet-kernel-bench: out of memory for the %s head %lldx%lld (%d copies)\n",
                        bitnet_type_name(type), (long long)V, (long long)D, n_copies);
                s->failed = true;
                free(rows), free(x), free(out), free(act);
                continue;
            }
            for (int c = 1; c < n_copies; c++) memcpy(rows + (size_t)c * stride, rows, bytes);
            bitnet_rng rng;
            bitnet_rng_seed(&rng, o->seed + 99);
            for (int64_t j = 0; j < D; j++) x[j] = (float)(bitnet_rng_uniform(&rng) - 0.5) * 4.0f;
            k->prepare(x, act, D);
            for (int tj = 0; tj < o->n_threads; tj++) {
                kb_head h = {k, rows, row_bytes, stride, n_copies, V, D, act, k->act_bytes(D), out, s->pools[tj], 0};
                /* the check: every row's float equals the single-row dot */
                kb_head_call(&h, 0);
                int64_t bad = 0;
                for (int64_t r = 0; r < V; r++) {
                    const float want = k->dot(rows + (size_t)r * row_bytes, act, D);
                    if (memcmp(&want, &out[r], sizeof want) != 0) bad++;
                }
                if (bad) s->n_mismatch++;
                const kb_stats st = kb_measure(kb_head_call, &h, o);
                const double gbps = kb_gbps(bytes, &st), roof = kb_bw_for(s->bw, s->n_bw, o->threads[tj]);
                char shape[48];
                snprintf(shape, sizeof shape, "%lldx%lld", (long long)V, (long long)D);
                printf("%-5s %-14s %6.1f %3d | %10.1f±%.0f%% %6.2f %5.1f | %s\n", bitnet_type_name(type), shape,
                       (double)bytes / 1048576.0, o->threads[tj], st.median * 1e6,
                       st.median > 0 ? 100.0 * st.sd / st.median : 0.0, gbps, 100.0 * gbps / roof,
                       bad ? "DIFFERS from the single-row dot" : "equal");
            }
            free(rows), free(x), free(out), free(act);
        }
    }
    fflush(stdout);
}
