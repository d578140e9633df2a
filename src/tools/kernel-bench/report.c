/* report.c — what bitnet-kernel-bench prints: the header lines (machine, timing, bandwidth, pool costs),
 * the GEMV and batched-product tables, the footer, and the --json file (format 1, read by
 * `python3 -m codegen tune`: codegen/tune.py). */
#include "tools/kernel-bench/report.h"

#include "runtime/kchoice.h"

#include "tools/common/bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- JSON ------------------------------------------------------------------------------------ */

static void kb_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; ++s) {
        const unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void kb_json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else fprintf(f, "null");
}

/* {"median_us":..,"min_us":..,"max_us":..,"sd_us":..,"reps":..,"calls":..} or null */
static void kb_json_stats(FILE *f, const kb_stats *s) {
    if (!s->valid) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"median_us\": ");
    kb_json_num(f, s->median * 1e6);
    fprintf(f, ", \"min_us\": ");
    kb_json_num(f, s->min * 1e6);
    fprintf(f, ", \"max_us\": ");
    kb_json_num(f, s->max * 1e6);
    fprintf(f, ", \"sd_us\": ");
    kb_json_num(f, s->sd * 1e6);
    fprintf(f, ", \"mean_us\": ");
    kb_json_num(f, s->mean * 1e6);
    fprintf(f, ", \"reps\": %d, \"calls\": %lld}", s->reps, (long long)s->calls);
}

static void kb_json_result(FILE *f, const kb_opts *o, const kb_result *r, const kb_bw *bw, int n_bw,
                           int64_t M, int64_t K) {
    fprintf(f, "{\"kernel\": ");
    kb_json_str(f, r->kernel ? r->kernel : "?");
    fprintf(f, ", \"specialized\": %s, \"packed_bytes\": %zu, \"read_bytes\": %zu, \"cache_bust_copies\": %d,\n",
            r->specialized ? "true" : "false", r->packed_bytes, r->read_bytes, r->n_copies);
    fprintf(f, "       \"lut_ctor_1col\": ");
    kb_json_stats(f, &r->ctor1);
    fprintf(f, ",\n       \"gemv\": [");
    for (int ti = 0; ti < o->n_threads; ++ti) {
        const kb_gemv *g = &r->gemv[ti];
        const double gb = kb_gbps(r->read_bytes, &g->dram), rb = kb_bw_for(bw, n_bw, g->threads);
        fprintf(f, "%s\n         {\"threads\": %d, \"dram\": ", ti ? "," : "", g->threads);
        kb_json_stats(f, &g->dram);
        fprintf(f, ", \"gbps\": ");
        kb_json_num(f, gb);
        fprintf(f, ", \"roofline_pct\": ");
        kb_json_num(f, 100.0 * gb / rb);
        fprintf(f, ", \"lut_share\": ");
        kb_json_num(f, kb_share(&r->ctor1, &g->dram));
        fprintf(f, ", \"cache\": ");
        kb_json_stats(f, &g->cache);
        fprintf(f, ", \"cache_gbps\": ");
        kb_json_num(f, kb_gbps(r->read_bytes, &g->cache));
        fprintf(f, "}");
    }
    fprintf(f, "],\n       \"batch\": [");
    for (int i = 0; i < r->n_batch; ++i) {
        const kb_batch *b = &r->batch[i];
        int bi = 0;
        while (bi < o->n_batch && o->batch[bi] != b->N) ++bi;
        fprintf(f, "%s\n         {\"n\": %lld, \"threads\": %d, \"time\": ", i ? "," : "", (long long)b->N, b->threads);
        kb_json_stats(f, &b->t);
        fprintf(f, ", \"gops\": ");
        kb_json_num(f, b->t.valid ? 2.0 * (double)M * (double)K * (double)b->N / b->t.median * 1e-9 : NAN);
        fprintf(f, ", \"lut_share\": ");
        kb_json_num(f, bi < o->n_batch ? kb_share(&r->ctorN[bi], &b->t) : NAN);
        fprintf(f, "}");
    }
    fprintf(f, "]}");
}

/* ---- text output ----------------------------------------------------------------------------- */

static void kb_fmt_us(char *out, size_t n, const kb_stats *s) {
    if (!s->valid) {
        snprintf(out, n, "-");
        return;
    }
    const double us = s->median * 1e6;
    const double pct = s->median > 0 ? 100.0 * s->sd / s->median : 0.0;
    if (us >= 10000) snprintf(out, n, "%.0f±%.0f%%", us, pct);
    else if (us >= 100) snprintf(out, n, "%.1f±%.0f%%", us, pct);
    else snprintf(out, n, "%.2f±%.0f%%", us, pct);
}

static void kb_fmt_num(char *out, size_t n, double v, int prec) {
    if (isfinite(v)) snprintf(out, n, "%.*f", prec, v);
    else snprintf(out, n, "-");
}

/* ---- the header ------------------------------------------------------------------------------ */

void kb_report_header(const kb_session *s) {
    const kb_opts *o = s->o;
    printf("# bitnet-kernel-bench  %s\n", s->date);
    printf("# cpu: %s; %ld online CPUs; LLC %lld MiB%s; AVX2 %s, AVX-512F %s; load average %.2f %.2f %.2f\n", s->cpu,
           s->ncpu, (long long)(s->env.llc / 1048576), o->llc_mib ? " (--llc-mib)" : s->llc_level ? "" : " (assumed)",
           kb_isa("avx2") ? "yes" : "no", kb_isa("avx512f") ? "yes" : "no", s->load0[0], s->load0[1], s->load0[2]);
    printf("# timing: median of up to %d repetitions of >= %g s (after a warm-up), stop after %g s; ±%% = stddev\n",
           o->reps, o->min_time, o->max_time);
    printf("#         each repetition's time is its median call; the JSON adds the mean (throughput with stalls)\n");
}

void kb_report_bandwidth_start(const kb_session *s) {
    const kb_opts *o = s->o;
    if (o->bw_mib <= 0) {
        printf("# read bandwidth: not measured (--no-bw); no roofline percentages\n");
        return;
    }
    if (!s->bw_ctx) return;
    printf("# read bandwidth at the start (%s, each thread sums its share of a %lld MiB buffer%s):", kb_bw_method(),
           (long long)o->bw_mib,
           (double)s->bw_bytes < 4.0 * (double)s->env.llc ? "; SMALLER than 4x LLC, not a DRAM number" : "");
    for (int i = 0; i < s->n_bw; ++i)
        printf("%s %d thread%s %.2f GB/s (max %.2f)", i ? "," : "", s->bw[i].threads, s->bw[i].threads > 1 ? "s" : "",
               s->bw[i].gbps_start, s->bw[i].gbps_max);
    printf("\n");
}

void kb_report_pool(const kb_session *s) {
    const kb_opts *o = s->o;
    printf("# thread pool per call: empty task (bitnet_threadpool_run)");
    for (int ti = 0; ti < o->n_threads; ++ti) printf("%s %d thr %.2f us", ti ? "," : "", o->threads[ti], s->pool_rt[ti].median * 1e6);
    printf("; two barriers inside a task");
    for (int ti = 0; ti < o->n_threads; ++ti) printf("%s %d thr %.2f us", ti ? "," : "", o->threads[ti], s->pool_bar[ti].median * 1e6);
    printf("\n# product calls run %s\n",
           o->pool_run ? "one bitnet_threadpool_run each (--pool-run: the round trip above is included)"
                       : "back to back inside one pool task, each followed by a barrier (the barrier pair above is "
                         "included, the round trip is not; --pool-run changes that)");
    printf("# GEMV weights from DRAM: calls rotate among copies totalling >= %gx LLC (%s)\n", o->bust_factor,
           o->cache_bust ? "cache-busting" : "DISABLED by --no-cache-bust: one copy, cached when it fits");
    fflush(stdout);
}

/* ---- the tables ------------------------------------------------------------------------------ */

static void kb_report_gemv(const kb_session *s) {
    const kb_opts *o = s->o;
    const kb_bw *bw = s->bw;
    const int n_bw = s->n_bw, n_done = s->n_done;
    const kb_done *done = s->done;
    printf("\n");
    printf("%-4s %-11s %-11s %-4s %7s %3s | %13s %6s %5s %5s | %13s %6s | %13s %6s %5s\n", "tgt", "shape", "tiles",
           "kern", "MiB", "thr", "GEMV us", "GB/s", "%roof", "LUT%", "in-cache us", "GB/s", "I2_S us", "GB/s",
           "%roof");
    for (int i = 0; i < n_done; ++i) {
        const kb_done *d = &done[i];
        const kb_result *r = &d->lut;
        char shape[32], tiles[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)d->job.M, (long long)d->job.K);
        snprintf(tiles, sizeof tiles, "%d/%d/%d", d->job.tiles.BM, d->job.tiles.BK, d->job.tiles.bm);
        const char *kind = r->specialized ? "spec" : (r->kernel && strstr(r->kernel, "scalar")) ? "scal" : "gen";
        for (int ti = 0; ti < o->n_threads; ++ti) {
            const kb_gemv *g = &r->gemv[ti];
            const double rb = kb_bw_for(bw, n_bw, g->threads);
            char a[32], b[16], c[16], dd[16], e[32], f[16], gi[32], h[16], k[16];
            kb_fmt_us(a, sizeof a, &g->dram);
            kb_fmt_num(b, sizeof b, kb_gbps(r->read_bytes, &g->dram), 2);
            kb_fmt_num(c, sizeof c, 100.0 * kb_gbps(r->read_bytes, &g->dram) / rb, 1);
            kb_fmt_num(dd, sizeof dd, 100.0 * kb_share(&r->ctor1, &g->dram), 1);
            kb_fmt_us(e, sizeof e, &g->cache);
            kb_fmt_num(f, sizeof f, kb_gbps(r->read_bytes, &g->cache), 2);
            if (d->have_i2s) {
                kb_fmt_us(gi, sizeof gi, &d->i2s.gemv[ti].dram);
                kb_fmt_num(h, sizeof h, kb_gbps(d->i2s.read_bytes, &d->i2s.gemv[ti].dram), 2);
                kb_fmt_num(k, sizeof k, 100.0 * kb_gbps(d->i2s.read_bytes, &d->i2s.gemv[ti].dram) / rb, 1);
            } else {
                snprintf(gi, sizeof gi, "-");
                snprintf(h, sizeof h, "-");
                snprintf(k, sizeof k, "-");
            }
            printf("%-4s %-11s %-11s %-4s %7.2f %3d | %13s %6s %5s %5s | %13s %6s | %13s %6s %5s\n",
                   ti ? "" : kb_type_tag(d->job.type), ti ? "" : shape, ti ? "" : tiles, ti ? "" : kind,
                   (double)r->read_bytes / 1048576.0, g->threads, a, b, c, dd, e, f, gi, h, k);
        }
    }
}

/* One result's batched GOP/s at every N of thread column ti after `lead` ("-" for each N without a result). */
static void kb_print_gops(const kb_opts *o, const char *lead, const kb_result *r, int ti, double ops1) {
    printf("%s", lead);
    for (int b = 0; b < o->n_batch; ++b) {
        char g[16] = "-";
        if (r) {
            const kb_batch *bb = &r->batch[b * o->n_threads + ti];
            kb_fmt_num(g, sizeof g, bb->t.valid ? ops1 * (double)bb->N / bb->t.median * 1e-9 : NAN, 1);
        }
        printf(" %7s", g);
    }
}

static void kb_report_batch(const kb_session *s) {
    const kb_opts *o = s->o;
    const int n_done = s->n_done;
    const kb_done *done = s->done;
    if (o->n_batch && n_done) {
        printf("\nbatched products, GOP/s = 2*M*K*N / time (weights from DRAM as above); LUT%% = constructor share\n");
        printf("%-4s %-11s %-11s %3s", "tgt", "shape", "tiles", "thr");
        for (int b = 0; b < o->n_batch; ++b) printf(" | N=%-5lld GOP/s  LUT%%", (long long)o->batch[b]);
        bool any_i8 = false;
        for (int i = 0; i < n_done; ++i) any_i8 = any_i8 || done[i].have_i8;
        if (o->i2s) {
            printf(" | I2_S GOP/s:");
            for (int b = 0; b < o->n_batch; ++b) printf(" N=%-5lld", (long long)o->batch[b]);
        }
        if (any_i8) {
            printf(" | int8 on TL2 GOP/s:");
            for (int b = 0; b < o->n_batch; ++b) printf(" N=%-5lld", (long long)o->batch[b]);
        }
        printf("\n");
        for (int i = 0; i < n_done; ++i) {
            const kb_done *d = &done[i];
            char shape[32], tiles[32];
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)d->job.M, (long long)d->job.K);
            snprintf(tiles, sizeof tiles, "%d/%d/%d", d->job.tiles.BM, d->job.tiles.BK, d->job.tiles.bm);
            const double ops1 = 2.0 * (double)d->job.M * (double)d->job.K;
            for (int ti = 0; ti < o->n_threads; ++ti) {
                printf("%-4s %-11s %-11s %3d", ti ? "" : kb_type_tag(d->job.type), ti ? "" : shape, ti ? "" : tiles,
                       o->threads[ti]);
                for (int b = 0; b < o->n_batch; ++b) {
                    const kb_batch *bb = &d->lut.batch[b * o->n_threads + ti];
                    char g[16], s[16];
                    kb_fmt_num(g, sizeof g, bb->t.valid ? ops1 * (double)bb->N / bb->t.median * 1e-9 : NAN, 1);
                    kb_fmt_num(s, sizeof s, 100.0 * kb_share(&d->lut.ctorN[b], &bb->t), 1);
                    printf(" | %14s %5s", g, s);
                }
                if (o->i2s) kb_print_gops(o, " |           ", d->have_i2s ? &d->i2s : NULL, ti, ops1);
                if (any_i8) kb_print_gops(o, " |                  ", d->have_i8 ? &d->i8 : NULL, ti, ops1);
                printf("\n");
            }
        }
    }
}

/* Which kernel the runtime's rule picks per N (runtime/kchoice.h: the int8 kernel — on the TL2 bytes where
 * the runtime has it, else on I2_S bytes — from the crossover on), from this run's GEMV (DRAM) and batched times, and the time of that pick over the
 * faster of the two at each N. With the choice the runtime recorded in its cache file for this CPU,
 * build, ISA cap, shape, tiles and thread count, when there is one. */
static void kb_report_choice(const kb_session *s) {
    const kb_opts *o = s->o;
    if (!o->i2s || s->n_done == 0) return;
    char pbuf[1024];
    const char *cache = bitnet_kchoice_cache_path(pbuf, sizeof pbuf);
    printf("\nkernel per batch size: the runtime runs an int8 kernel (on the TL2 bytes on x86-64 with AVX2: \"int8\",\n"
           "else on the I2_S bytes of weights repacked from I2_S: \"I2_S\") on TL1/TL2 weights for\n"
           "N >= the crossover (the threshold with the least total slowdown over the measured N: runtime/kchoice.h);\n"
           "per N: the path the runtime runs (its cached crossover, else the one measured here) and its time over\n"
           "the faster path's time in this run (1.00 = the best)\n");
    for (int i = 0; i < s->n_done; ++i) {
        const kb_done *d = &s->done[i];
        if ((!d->have_i2s && !d->have_i8) || d->job.type == BITNET_TYPE_I2_S) continue;
        /* the runtime's int8 path for this weight: the TL2 bytes where it has that kernel, else I2_S */
        const kb_result *q8 = d->have_i8 ? &d->i8 : &d->i2s;
        const char *q8_tag = d->have_i8 ? "int8" : "I2_S";
        char shape[32], tiles[32];
        snprintf(shape, sizeof shape, "%lldx%lld", (long long)d->job.M, (long long)d->job.K);
        snprintf(tiles, sizeof tiles, "%d/%d/%d", d->job.tiles.BM, d->job.tiles.BK, d->job.tiles.bm);
        for (int ti = 0; ti < o->n_threads; ++ti) {
            bitnet_kchoice_point pts[KB_MAX_LIST + 1];
            int np = 0;
            if (d->lut.gemv[ti].dram.valid && q8->gemv[ti].dram.valid)
                pts[np++] = (bitnet_kchoice_point){1, d->lut.gemv[ti].dram.median, q8->gemv[ti].dram.median};
            for (int b = 0; b < o->n_batch && np < KB_MAX_LIST + 1; ++b) {
                const kb_batch *l = &d->lut.batch[b * o->n_threads + ti], *q = &q8->batch[b * o->n_threads + ti];
                if (l->t.valid && q->t.valid && l->N > 1) pts[np++] = (bitnet_kchoice_point){l->N, l->t.median, q->t.median};
            }
            const int64_t cross = bitnet_kchoice_crossover(pts, np);
            bitnet_kchoice key_of = {.type = d->job.type, .M = d->job.M, .K = d->job.K, .BM = d->job.tiles.BM,
                                     .BK = d->job.tiles.BK, .bm = d->job.tiles.bm, .n_threads = o->threads[ti],
                                     .int8_on_tl2 = d->have_i8};
            char key[512], rt[48] = "not measured yet";
            int64_t cached = 0;
            bitnet_kchoice_key(&key_of, d->lut.kernel, key, sizeof key);
            const bool have_cached = bitnet_kchoice_cache_get(cache, key, &cached);
            const int64_t use = have_cached ? cached : cross;
            if (have_cached) {
                if (cached > 0) snprintf(rt, sizeof rt, "%s from N >= %lld", q8_tag, (long long)cached);
                else snprintf(rt, sizeof rt, "LUT for every N");
            }
            char here[48];
            if (cross > 0) snprintf(here, sizeof here, "%s from N >= %lld", q8_tag, (long long)cross);
            else snprintf(here, sizeof here, "LUT for every N");
            printf("%-4s %-11s %-11s %3d | here: %-18s | runtime's cache: %-18s |", ti ? "" : kb_type_tag(d->job.type),
                   ti ? "" : shape, ti ? "" : tiles, o->threads[ti], here, rt);
            for (int p = 0; p < np; ++p) {
                const bool i2s = use > 0 && pts[p].n_cols >= use;
                const double t = i2s ? pts[p].i2s_us : pts[p].lut_us;
                const double best = pts[p].i2s_us < pts[p].lut_us ? pts[p].i2s_us : pts[p].lut_us;
                printf(" N=%lld %s %.2f", (long long)pts[p].n_cols, i2s ? q8_tag : d->job.type == BITNET_TYPE_TL1 ? "TL1" : "TL2",
                       t / best);
            }
            printf("\n");
        }
    }
    printf("# runtime's cache: %s (a context measures and records its choice at creation: bitnet_context_kernel_choice)\n",
           cache ? cache : "none (BITNET_KERNEL_CACHE=off)");
}

static void kb_report_footer(const kb_session *s) {
    const kb_opts *o = s->o;
    const int n_done = s->n_done, n_jobs = s->n_jobs, skipped_from = s->skipped_from;
    const kb_done *done = s->done;
    const kb_job *jobs = s->jobs;
    const double t_start = s->t_start;
    const double *load1 = s->load1;
    printf("\n# columns: kern = spec (specialized generated kernel), gen (generic kernel, runtime tiles), scal\n"
           "# (scalar LUT kernel), of the best ISA this CPU runs: SIMD, else portable C (the JSON names the kernel);\n"
           "# MiB = weight bytes read per call; in-cache = one copy (only when it fits in half the LLC); %%roof =\n"
           "# weight GB/s / read GB/s at the same thread count.\n");
    int n_cache_bust = 0;
    for (int i = 0; i < n_done; ++i) n_cache_bust += done[i].lut.n_copies > 1;
    printf("# %d of %d measured weights were smaller than %gx LLC and rotated among copies (cache-busting).\n",
           n_cache_bust, n_done, o->bust_factor);
    for (int i = 0; i < n_done; ++i)
        if (strncmp(done[i].check, "bit-exact", 9) != 0)
            printf("# CHECK FAILED: %s %lldx%lld tiles %d/%d/%d: %s\n", kb_type_tag(done[i].job.type),
                   (long long)done[i].job.M, (long long)done[i].job.K, done[i].job.tiles.BM, done[i].job.tiles.BK,
                   done[i].job.tiles.bm, done[i].check);
    printf("# every product above was checked bit for bit against the I2_S path (or bitnet_ref_gemm): %s\n",
           s->n_mismatch ? "MISMATCHES (see CHECK FAILED)" : "all equal");
    if (skipped_from >= 0)
        printf("# budget of %g s spent: %d shape(s) skipped, from %s %lldx%lld on\n", o->budget, n_jobs - skipped_from,
               kb_type_tag(jobs[skipped_from].type), (long long)jobs[skipped_from].M, (long long)jobs[skipped_from].K);
    printf("# load average at the end: %.2f %.2f %.2f; wall time %.1f s\n", load1[0], load1[1], load1[2],
           bitnet_tool_now_s() - t_start);
    fflush(stdout);

}

void kb_report_tables(const kb_session *s) {
    const kb_bw *bw = s->bw;
    const int n_bw = s->n_bw, n_done = s->n_done;
    if (n_bw > 0 && n_done > 0) {
        printf("# read bandwidth at the end:");
        for (int i = 0; i < n_bw; ++i)
            printf("%s %d thread%s %.2f GB/s", i ? "," : "", bw[i].threads, bw[i].threads > 1 ? "s" : "", bw[i].gbps_end);
        printf("; %%roof below uses the larger median:");
        for (int i = 0; i < n_bw; ++i)
            printf("%s %d thread%s %.2f GB/s", i ? "," : "", bw[i].threads, bw[i].threads > 1 ? "s" : "",
                   bw[i].gbps_median);
        printf("\n");
    }
    if (n_done == 0 && s->n_jobs == 0) { /* --head only */
        printf("# load average at the end: %.2f %.2f %.2f; wall time %.1f s\n", s->load1[0], s->load1[1], s->load1[2],
               bitnet_tool_now_s() - s->t_start);
        return;
    }
    kb_report_gemv(s);
    kb_report_batch(s);
    kb_report_choice(s);
    kb_report_footer(s);
}

/* ---- JSON ------------------------------------------------------------------------------------ */

static void kb_json_head(FILE *f, const kb_session *s) {
    const kb_opts *o = s->o;
    const kb_bw *bw = s->bw;
    const int n_bw = s->n_bw;
    const long ncpu = s->ncpu;
    const double *load0 = s->load0, *load1 = s->load1;
    const kb_stats *pool_rt = s->pool_rt, *pool_bar = s->pool_bar;
    fprintf(f, "{\"tool\": \"bitnet-kernel-bench\", \"format\": 1, \"date\": ");
    kb_json_str(f, s->date);
    fprintf(f, ",\n \"machine\": {\"cpu\": ");
    kb_json_str(f, s->cpu);
    fprintf(f, ", \"online_cpus\": %ld, \"llc_bytes\": %lld, \"avx2\": %s, \"avx512f\": %s, \"loadavg_start\": [%.2f, %.2f, %.2f], \"loadavg_end\": [%.2f, %.2f, %.2f]},\n",
            ncpu, (long long)s->env.llc, kb_isa("avx2") ? "true" : "false", kb_isa("avx512f") ? "true" : "false",
            load0[0], load0[1], load0[2], load1[0], load1[1], load1[2]);
    fprintf(f, " \"settings\": {\"reps\": %d, \"min_time_s\": %g, \"max_time_s\": %g, \"budget_s\": %g, \"bust_factor\": %g, \"cache_bust\": %s, \"seed\": %llu, \"threads\": [",
            o->reps, o->min_time, o->max_time, o->budget, o->bust_factor, o->cache_bust ? "true" : "false",
            (unsigned long long)o->seed);
    for (int i = 0; i < o->n_threads; ++i) fprintf(f, "%s%d", i ? ", " : "", o->threads[i]);
    fprintf(f, "], \"batch\": [");
    for (int i = 0; i < o->n_batch; ++i) fprintf(f, "%s%lld", i ? ", " : "", (long long)o->batch[i]);
    fprintf(f, "], \"generic\": %s},\n \"bandwidth\": {\"method\": ", o->force_generic ? "true" : "false");
    kb_json_str(f, kb_bw_method());
    fprintf(f, ", \"buffer_bytes\": %lld, \"results\": [", (long long)o->bw_mib * 1048576);
    for (int i = 0; i < n_bw; ++i) {
        fprintf(f, "%s{\"threads\": %d, \"gbps\": ", i ? ", " : "", bw[i].threads);
        kb_json_num(f, bw[i].gbps_median);
        fprintf(f, ", \"gbps_start\": ");
        kb_json_num(f, bw[i].gbps_start);
        fprintf(f, ", \"gbps_end\": ");
        kb_json_num(f, bw[i].s_end.valid ? bw[i].gbps_end : NAN);
        fprintf(f, ", \"gbps_max\": ");
        kb_json_num(f, bw[i].gbps_max);
        fprintf(f, ", \"pass\": ");
        kb_json_stats(f, &bw[i].s);
        fprintf(f, ", \"pass_end\": ");
        kb_json_stats(f, &bw[i].s_end);
        fprintf(f, "}");
    }
    fprintf(f, "]},\n \"pool\": {\"calls_in_one_task\": %s, \"results\": [", o->pool_run ? "false" : "true");
    for (int i = 0; i < o->n_threads; ++i) {
        fprintf(f, "%s{\"threads\": %d, \"empty_run\": ", i ? ", " : "", o->threads[i]);
        kb_json_stats(f, &pool_rt[i]);
        fprintf(f, ", \"barrier_pair\": ");
        kb_json_stats(f, &pool_bar[i]);
        fprintf(f, "}");
    }
}

static void kb_json_kernels(FILE *f, const kb_session *s) {
    const kb_opts *o = s->o;
    const kb_bw *bw = s->bw;
    const int n_bw = s->n_bw, n_done = s->n_done;
    const kb_done *done = s->done;
    const int n_jobs = s->n_jobs, skipped_from = s->skipped_from;
    const kb_job *jobs = s->jobs;
    const double t_start = s->t_start;
    fprintf(f, "]},\n \"kernels\": [");
    for (int i = 0; i < n_done; ++i) {
        const kb_done *d = &done[i];
        fprintf(f, "%s\n  {\"target\": \"%s\", \"M\": %lld, \"K\": %lld, \"tiles\": [%d, %d, %d], \"origins\": ",
                i ? "," : "", kb_type_tag(d->job.type), (long long)d->job.M, (long long)d->job.K,
                d->job.tiles.BM, d->job.tiles.BK, d->job.tiles.bm);
        kb_json_str(f, d->job.origins);
        fprintf(f, ", \"check\": ");
        kb_json_str(f, d->check);
        fprintf(f, ",\n   \"lut\": ");
        kb_json_result(f, o, &d->lut, bw, n_bw, d->job.M, d->job.K);
        fprintf(f, ",\n   \"i2s\": ");
        if (d->have_i2s) kb_json_result(f, o, &d->i2s, bw, n_bw, d->job.M, d->job.K);
        else fprintf(f, "null");
        fprintf(f, ",\n   \"int8_on_tl2\": ");
        if (d->have_i8) kb_json_result(f, o, &d->i8, bw, n_bw, d->job.M, d->job.K);
        else fprintf(f, "null");
        fprintf(f, "}");
    }
    fprintf(f, "],\n \"skipped\": [");
    for (int j = skipped_from; skipped_from >= 0 && j < n_jobs; ++j)
        fprintf(f, "%s{\"target\": \"%s\", \"M\": %lld, \"K\": %lld, \"tiles\": [%d, %d, %d]}",
                j > skipped_from ? ", " : "", kb_type_tag(jobs[j].type), (long long)jobs[j].M,
                (long long)jobs[j].K, jobs[j].tiles.BM, jobs[j].tiles.BK, jobs[j].tiles.bm);
    fprintf(f, "],\n \"mismatches\": %d, \"wall_s\": %.3f}\n", s->n_mismatch, bitnet_tool_now_s() - t_start);
}

bool kb_write_json(const kb_session *s, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "bitnet-kernel-bench: --json %s: %s\n", path, strerror(errno));
        return false;
    }
    kb_json_head(f, s);
    kb_json_kernels(f, s);
    if (fclose(f) != 0) {
        fprintf(stderr, "bitnet-kernel-bench: --json %s: write failed\n", path);
        return false;
    }
    return true;
}
