/* run.c — one bitnet-kernel-bench run (run.h): the job list, the session's machine facts and pools,
 * bandwidth before and after the kernels, the pool costs, and the check-then-measure loop. */
#include "tools/kernel-bench/run.h"

#include "base/rng.h"
#include "kernels/lut/pack.h"
#include "tools/common/bench_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- jobs ------------------------------------------------------------------------------------ */

static int kb_job_cmp(const void *a, const void *b) {
    const kb_job *x = (const kb_job *)a, *y = (const kb_job *)b;
    if (x->type != y->type) return x->type > y->type ? -1 : 1; /* TL2 first */
    if (x->M * x->K != y->M * y->K) return x->M * x->K < y->M * y->K ? -1 : 1;
    if (x->M != y->M) return x->M < y->M ? -1 : 1;
    if (x->K != y->K) return x->K < y->K ? -1 : 1;
    if (x->tiles.BM != y->tiles.BM) return x->tiles.BM < y->tiles.BM ? -1 : 1;
    if (x->tiles.BK != y->tiles.BK) return x->tiles.BK < y->tiles.BK ? -1 : 1;
    return (x->tiles.bm > y->tiles.bm) - (x->tiles.bm < y->tiles.bm);
}

static void kb_append_origin(kb_job *j, const char *origin) {
    size_t len = strlen(j->origins);
    if (len + strlen(origin) + 3 >= sizeof j->origins) return;
    snprintf(j->origins + len, sizeof j->origins - len, "%s%s", len ? ", " : "", origin);
}

/* Add (type, M, K, tiles) unless present; then append `origin`. */
static int kb_add_job(kb_job *jobs, int n, int type, int64_t M, int64_t K, bitnet_tiles t, const char *origin) {
    for (int i = 0; i < n; ++i) {
        if (jobs[i].type == type && jobs[i].M == M && jobs[i].K == K && jobs[i].tiles.BM == t.BM &&
            jobs[i].tiles.BK == t.BK && jobs[i].tiles.bm == t.bm) {
            kb_append_origin(&jobs[i], origin);
            return n;
        }
    }
    if (n >= KB_MAX_JOBS) return n;
    memset(&jobs[n], 0, sizeof jobs[n]);
    jobs[n].type = type;
    jobs[n].M = M;
    jobs[n].K = K;
    jobs[n].tiles = t;
    kb_append_origin(&jobs[n], origin);
    return n + 1;
}

int kb_build_jobs(const kb_opts *o, kb_job *jobs) {
    int n = 0;
    char origin[300];
    if (o->n_shapes) {
        for (int ti = 0; ti < o->n_targets; ++ti) {
            const int type = o->targets[ti];
            for (int s = 0; s < o->n_shapes; ++s) {
                const int64_t M = o->shapes[s].M, K = o->shapes[s].K;
                if (o->n_tiles) {
                    for (int t = 0; t < o->n_tiles; ++t) n = kb_add_job(jobs, n, type, M, K, o->tiles[t], "--tiles");
                } else {
                    bitnet_tiles t = bitnet_lut_tiles_for(type, M, K, NULL, "default");
                    n = kb_add_job(jobs, n, type, M, K, t, "runtime choice (registry table or default rule)");
                }
            }
        }
        return n;
    }
    for (size_t i = 0; i < bitnet_lut_n_tables; ++i) {
        const bitnet_lut_table *t = &bitnet_lut_tables[i];
        bool want_type = false;
        for (int ti = 0; ti < o->n_targets; ++ti) want_type |= t->type == o->targets[ti];
        if (!want_type) continue;
        if (o->config && strcmp(o->config, t->config)) continue;
        if (o->table && strcmp(o->table, t->table)) continue;
        snprintf(origin, sizeof origin, "%s/%s", t->config, t->table);
        for (size_t e = 0; e < t->n_entries; ++e)
            n = kb_add_job(jobs, n, t->type, t->entries[e].M, t->entries[e].K, t->entries[e].tiles, origin);
    }
    qsort(jobs, (size_t)n, sizeof *jobs, kb_job_cmp);
    return n;
}

static void kb_random_weights(int8_t *w, int64_t n, uint64_t seed) {
    bitnet_rng r;
    bitnet_rng_seed(&r, seed);
    int64_t i = 0;
    while (i < n) {
        uint64_t v = bitnet_rng_next(&r);
        for (int b = 0; b < 8 && i < n; ++b, ++i, v >>= 8) w[i] = (int8_t)((int)((v & 0xff) % 3) - 1);
    }
}

static void kb_random_acts(float *x, int64_t n, uint64_t seed) {
    bitnet_rng r;
    bitnet_rng_seed(&r, seed ^ 0x5eed5eedULL);
    for (int64_t i = 0; i < n; ++i) x[i] = (float)(2.0 * bitnet_rng_uniform(&r) - 1.0);
}

/* ---- the session ----------------------------------------------------------------------------- */

int kb_session_start(kb_session *s, const kb_opts *o, const kb_job *jobs, int n_jobs) {
    memset(s, 0, sizeof *s);
    s->o = o;
    s->jobs = jobs;
    s->n_jobs = n_jobs;
    s->skipped_from = -1;
    s->t_start = bitnet_tool_now_s();
    s->env.o = o;
    s->env.llc = o->llc_mib ? o->llc_mib * 1048576 : bitnet_tool_llc_bytes(&s->llc_level);
    if (s->env.llc <= 0) s->env.llc = 32 * 1048576;
    bitnet_tool_cpu_model(s->cpu, sizeof s->cpu, true);
    bitnet_tool_loadavg(s->load0);
    time_t now = time(NULL);
    strftime(s->date, sizeof s->date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    s->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < o->n_threads; ++i) {
        bitnet_error err;
        if (bitnet_threadpool_create(o->threads[i], &s->pools[i], &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-kernel-bench: thread pool of %d: %s\n", o->threads[i], err.msg);
            return 1;
        }
    }
    s->env.pools = s->pools;
    return 0;
}

void kb_session_free(kb_session *s) {
    for (int i = 0; i < KB_MAX_LIST; ++i) bitnet_threadpool_free(s->pools[i]);
    free(s->bw_buf);
    free(s->bw_ctx);
    free(s->done);
    memset(s, 0, sizeof *s);
}

/* Bandwidth: measured before the kernels and again after them (the load of a shared machine
 * changes during a long run); the roofline uses the larger of the two medians per thread count. */
void kb_bandwidth_start(kb_session *s) {
    const kb_opts *o = s->o;
    if (o->bw_mib <= 0) return;
    const size_t bw_bytes = (size_t)o->bw_mib * 1048576;
    s->bw_bytes = bw_bytes;
    s->bw_buf = (uint8_t *)kb_alloc(bw_bytes);
    s->bw_ctx = (kb_bw_ctx *)calloc(1, sizeof *s->bw_ctx);
    if (!s->bw_buf || !s->bw_ctx) {
        fprintf(stderr, "bitnet-kernel-bench: out of memory for the %lld MiB bandwidth buffer (use --bw-mib)\n",
                (long long)o->bw_mib);
        free(s->bw_buf);
        free(s->bw_ctx);
        s->bw_buf = NULL;
        s->bw_ctx = NULL;
        return;
    }
    for (size_t i = 0; i < bw_bytes; i += 8) {
        const uint64_t v = i * 0x9e3779b97f4a7c15ULL;
        memcpy(s->bw_buf + i, &v, 8);
    }
    s->bw_ctx->buf = s->bw_buf;
    s->bw_ctx->bytes = bw_bytes;
    for (int ti = 0; ti < o->n_threads; ++ti) {
        kb_bw_run run = {s->bw_ctx, s->pools[ti]};
        kb_progress("read bandwidth, %d thread(s), %lld MiB", o->threads[ti], (long long)o->bw_mib);
        kb_bw *b = &s->bw[s->n_bw++];
        memset(b, 0, sizeof *b);
        b->threads = o->threads[ti];
        b->s = kb_measure(kb_bw_call, &run, o);
        b->gbps_start = (double)(bw_bytes / 4096 * 4096) / b->s.median * 1e-9;
        b->gbps_max = (double)(bw_bytes / 4096 * 4096) / b->s.min * 1e-9;
        b->gbps_median = b->gbps_start;
    }
}

void kb_bandwidth_end(kb_session *s) {
    if (!s->bw_ctx || s->n_done <= 0) return;
    const size_t bw_bytes = s->bw_bytes;
    for (int i = 0; i < s->n_bw; ++i) {
        kb_bw *b = &s->bw[i];
        kb_bw_run run = {s->bw_ctx, s->pools[i]};
        kb_progress("read bandwidth again, %d thread(s)", b->threads);
        b->s_end = kb_measure(kb_bw_call, &run, s->o);
        b->gbps_end = (double)(bw_bytes / 4096 * 4096) / b->s_end.median * 1e-9;
        const double mx = (double)(bw_bytes / 4096 * 4096) / b->s_end.min * 1e-9;
        if (mx > b->gbps_max) b->gbps_max = mx;
        if (b->gbps_end > b->gbps_median) b->gbps_median = b->gbps_end;
    }
}

/* Thread-pool costs, to read the product times against. */
void kb_pool_costs(kb_session *s) {
    kb_opts po = *s->o;
    po.min_time = s->o->min_time < 0.01 ? s->o->min_time : 0.01;
    for (int ti = 0; ti < s->o->n_threads; ++ti) s->pool_rt[ti] = kb_measure(kb_empty_call, s->pools[ti], &po);
    for (int ti = 0; ti < s->o->n_threads; ++ti) s->pool_bar[ti] = kb_measure_in_task(NULL, s->pools[ti], &po);
}

/* ---- the check-then-measure loop -------------------------------------------------------------- */

/* The data of the shape being measured: random weights and activations, the reference outputs of
 * the check, and (unless --no-i2s) the I2_S timings shared by every tiles of the shape. */
typedef struct kb_shape_data {
    int8_t *w8;
    int64_t M, K;
    float *x, *y, *yref1, *yrefN;
    int64_t maxN, Ncheck;
    kb_result i2s_res;
    bool have_i2s, ref_is_i2s;
} kb_shape_data;

static void kb_shape_data_free(kb_shape_data *sd) {
    free(sd->w8);
    free(sd->x);
    free(sd->y);
    free(sd->yref1);
    free(sd->yrefN);
    sd->w8 = NULL;
    sd->x = sd->y = sd->yref1 = sd->yrefN = NULL;
}

/* A new shape: random weights and activations, the reference outputs for the check (I2_S through the
 * host, or bitnet_ref_gemm when I2_S cannot hold the shape) and, unless --no-i2s, the I2_S timings.
 * false after a message. */
static bool kb_new_shape(kb_session *s, kb_shape_data *sd, int64_t M, int64_t K) {
    const kb_opts *o = s->o;
    bitnet_error err;
    err.msg[0] = '\0';
    kb_shape_data_free(sd);
    sd->w8 = (int8_t *)malloc((size_t)(M * K));
    sd->x = (float *)kb_alloc((size_t)(sd->maxN * K) * sizeof(float));
    sd->y = (float *)kb_alloc((size_t)(sd->maxN * M) * sizeof(float));
    sd->yref1 = (float *)kb_alloc((size_t)M * sizeof(float));
    sd->yrefN = (float *)kb_alloc((size_t)(sd->Ncheck * M) * sizeof(float));
    if (!sd->w8 || !sd->x || !sd->y || !sd->yref1 || !sd->yrefN) {
        fprintf(stderr, "bitnet-kernel-bench: out of memory for %lldx%lld\n", (long long)M, (long long)K);
        return false;
    }
    kb_random_weights(sd->w8, M * K, o->seed + (uint64_t)(M * 1000003 + K));
    kb_random_acts(sd->x, sd->maxN * K, o->seed + (uint64_t)K);
    sd->M = M, sd->K = K;
    sd->have_i2s = false;
    sd->ref_is_i2s = (M * K) % 128 == 0;
    if (!sd->ref_is_i2s) return true;
    kb_wset wi;
    const int copies = o->i2s ? kb_copies_for(&s->env, bitnet_i2s_nbytes(M, K)) : 1;
    if (kb_wset_make(&wi, BITNET_TYPE_I2_S, (bitnet_tiles){0, 0, 0}, sd->w8, M, K, copies, false, &err)) {
        fprintf(stderr, "bitnet-kernel-bench: I2_S %lldx%lld: %s\n", (long long)M, (long long)K, err.msg);
        return false;
    }
    bitnet_status st = kb_product(&s->env, &wi, sd->x, sd->yref1, 1, &err);
    if (!st) st = kb_product(&s->env, &wi, sd->x, sd->yrefN, sd->Ncheck, &err);
    if (!st && o->i2s) {
        kb_progress("  I2_S reference path %lldx%lld", (long long)M, (long long)K);
        st = kb_measure_wset(&s->env, &wi, sd->x, sd->y, &sd->i2s_res, &err);
        sd->have_i2s = st == BITNET_OK;
    }
    kb_wset_free(&wi);
    bitnet_lut_free();
    if (st) {
        fprintf(stderr, "bitnet-kernel-bench: I2_S %lldx%lld: %s\n", (long long)M, (long long)K, err.msg);
        return false;
    }
    return true;
}

/* Correctness first: N = 1 and N = Ncheck with all threads, bit for bit; a mismatch is recorded in
 * d->check. false when a product could not run (message printed). */
static bool kb_check(kb_session *s, kb_shape_data *sd, kb_wset *wl, kb_done *d) {
    const kb_job *jb = &d->job;
    const int64_t M = jb->M, Ncheck = sd->Ncheck;
    bitnet_error err;
    err.msg[0] = '\0';
    snprintf(d->check, sizeof d->check, "bit-exact with %s (N = 1, %lld)",
             sd->ref_is_i2s ? "I2_S" : "bitnet_ref_gemm", (long long)Ncheck);
    const int64_t checks[2] = {1, Ncheck};
    for (int c = 0; c < (Ncheck > 1 ? 2 : 1); ++c) {
        const int64_t N = checks[c];
        const float *yref = c ? sd->yrefN : sd->yref1;
        float *y = sd->y;
        if (kb_product(&s->env, wl, sd->x, y, N, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-kernel-bench: %s\n", err.msg);
            return false;
        }
        if (memcmp(y, yref, (size_t)(N * M) * sizeof(float)) != 0) {
            int64_t bad = 0;
            while (bad < N * M && !memcmp(&y[bad], &yref[bad], sizeof(float))) ++bad;
            snprintf(d->check, sizeof d->check, "MISMATCH at N = %lld, column %lld row %lld: %.9g vs %.9g",
                     (long long)N, (long long)(bad / M), (long long)(bad % M), (double)y[bad], (double)yref[bad]);
            fprintf(stderr, "bitnet-kernel-bench: %s %lldx%lld tiles %d/%d/%d (%s): %s\n", kb_type_tag(jb->type),
                    (long long)M, (long long)jb->K, jb->tiles.BM, jb->tiles.BK, jb->tiles.bm,
                    wl->base.extra->impl.name, d->check);
            ++s->n_mismatch;
            break;
        }
    }
    return true;
}

/* One job: pack, check, measure into s->done[s->n_done]. false when the run must stop. */
static bool kb_run_job(kb_session *s, kb_shape_data *sd, const kb_job *jb) {
    const kb_opts *o = s->o;
    const int64_t M = jb->M, K = jb->K;
    bitnet_error err;
    err.msg[0] = '\0';
    if ((!sd->w8 || sd->M != M || sd->K != K) && !kb_new_shape(s, sd, M, K)) return false;
    kb_done *d = &s->done[s->n_done];
    d->job = *jb;

    kb_wset wl;
    if (kb_wset_make(&wl, jb->type, jb->tiles, sd->w8, M, K, kb_copies_for(&s->env, jb->type == BITNET_TYPE_TL1
                                                                                    ? bitnet_tl1_nbytes(M, K)
                                                                                    : bitnet_tl2_nbytes(M, K)),
                     o->force_generic, &err) != BITNET_OK) {
        fprintf(stderr, "bitnet-kernel-bench: %s %lldx%lld tiles %d/%d/%d: %s\n", kb_type_tag(jb->type),
                (long long)M, (long long)K, jb->tiles.BM, jb->tiles.BK, jb->tiles.bm, err.msg);
        return false;
    }
    if (!sd->ref_is_i2s) {
        kb_ref_product(&wl, sd->x, sd->yref1, 1);
        kb_ref_product(&wl, sd->x, sd->yrefN, sd->Ncheck);
    }
    bool ok = kb_check(s, sd, &wl, d);
    if (ok && kb_measure_wset(&s->env, &wl, sd->x, sd->y, &d->lut, &err) != BITNET_OK) {
        fprintf(stderr, "bitnet-kernel-bench: %s\n", err.msg);
        ok = false;
    }
    d->i2s = sd->i2s_res;
    d->have_i2s = sd->have_i2s;
    d->have_i8 = false;
    if (ok && o->i2s && wl.base.extra->int8_on_tl2) {
        /* the runtime's other path for this weight: checked bit for bit like the LUT kernel, then timed */
        kb_wset_set_int8_min_cols(&wl, 1);
        char lut_check[sizeof d->check];
        memcpy(lut_check, d->check, sizeof lut_check);
        kb_progress("  int8 kernel on the TL2 bytes %lldx%lld", (long long)M, (long long)K);
        ok = kb_check(s, sd, &wl, d);
        if (ok && strncmp(d->check, "MISMATCH", 8) != 0) memcpy(d->check, lut_check, sizeof lut_check);
        if (ok && kb_measure_wset(&s->env, &wl, sd->x, sd->y, &d->i8, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-kernel-bench: %s\n", err.msg);
            ok = false;
        }
        d->i8.kernel = "bitnet_tl2_i8_gemm";
        d->have_i8 = ok;
    }
    kb_wset_free(&wl);
    bitnet_lut_free(); /* the transformed tensor's extra */
    if (!ok) return false;
    ++s->n_done;
    return true;
}

void kb_run_jobs(kb_session *s) {
    const kb_opts *o = s->o;
    s->done = (kb_done *)calloc((size_t)s->n_jobs, sizeof *s->done);
    kb_shape_data sd;
    memset(&sd, 0, sizeof sd);
    sd.maxN = 1;
    for (int b = 0; b < o->n_batch; ++b) sd.maxN = o->batch[b] > sd.maxN ? o->batch[b] : sd.maxN;
    sd.Ncheck = o->n_batch ? o->batch[0] : 1;
    for (int j = 0; j < s->n_jobs && s->done; ++j) {
        const kb_job *jb = &s->jobs[j];
        if (o->budget > 0 && bitnet_tool_now_s() - s->t_start > o->budget) {
            s->skipped_from = j;
            break;
        }
        kb_progress("%s %lldx%lld tiles %d/%d/%d (%d of %d)", kb_type_tag(jb->type), (long long)jb->M,
                    (long long)jb->K, jb->tiles.BM, jb->tiles.BK, jb->tiles.bm, j + 1, s->n_jobs);
        if (!kb_run_job(s, &sd, jb)) {
            s->failed = true;
            break;
        }
    }
    kb_shape_data_free(&sd);
    kb_arena_release();
}
