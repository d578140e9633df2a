/* run.h — one bitnet-kernel-bench run: the list of (target, shape, tiles) jobs, the machine facts and
 * thread pools of the session, the bandwidth and pool-cost measurements around the kernels, and the
 * loop that checks every product bit for bit and measures it. report.h prints what it holds. */
#ifndef BITNET_KERNEL_BENCH_RUN_H
#define BITNET_KERNEL_BENCH_RUN_H

#include "tools/kernel-bench/measure.h"

typedef struct kb_job {
    int type;
    int64_t M, K;
    bitnet_tiles tiles;
    char origins[1024];
} kb_job;

/* The jobs o asks for (the --shape list per target, or every entry of the selected registry tables,
 * deduplicated, TL2 first then by size); at most KB_MAX_JOBS. Returns their count. */
int kb_build_jobs(const kb_opts *o, kb_job *jobs);

/* One measured job: LUT results, the I2_S results of its shape, the check's verdict. */
typedef struct kb_done {
    kb_job job;
    kb_result lut, i2s;
    bool have_i2s;
    kb_result i8;  /* the int8 kernel on the TL2 bytes (bitnet_tl2_i8_gemm), where the runtime has it */
    bool have_i8;
    char check[192];
} kb_done;

/* Everything one run measured (and the facts the report prints). */
typedef struct kb_session {
    const kb_opts *o;
    kb_env env;
    int llc_level;          /* 0: LLC assumed (not found in sysfs) */
    char cpu[256];
    char date[64];
    long ncpu;
    double load0[3], load1[3];
    double t_start;
    bitnet_threadpool *pools[KB_MAX_LIST];
    kb_bw bw[KB_MAX_LIST];
    int n_bw;
    size_t bw_bytes;
    uint8_t *bw_buf;        /* NULL: bandwidth not measured */
    kb_bw_ctx *bw_ctx;
    kb_stats pool_rt[KB_MAX_LIST], pool_bar[KB_MAX_LIST];
    const kb_job *jobs;
    int n_jobs;
    kb_done *done;
    int n_done, n_mismatch;
    int skipped_from;       /* -1: none skipped by --budget */
    bool failed;            /* an allocation, thread or product failed (exit 1) */
} kb_session;

/* Machine facts, date and one thread pool per o->threads[i]. 0, or 1 after a message. */
int kb_session_start(kb_session *s, const kb_opts *o, const kb_job *jobs, int n_jobs);
/* The read bandwidth before the kernels (nothing with --bw-mib 0 or when the buffer cannot be had). */
void kb_bandwidth_start(kb_session *s);
/* The pools' own costs: an empty task, and two barriers inside a task. */
void kb_pool_costs(kb_session *s);
/* Checks and measures every job (until --budget is spent or something fails). */
void kb_run_jobs(kb_session *s);
/* The read bandwidth again after the kernels; the roofline becomes the larger median. */
void kb_bandwidth_end(kb_session *s);
/* Frees the session's thread pools and bandwidth buffers. */
void kb_session_free(kb_session *s);

#endif
