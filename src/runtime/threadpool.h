/* threadpool.h — a fixed pool of pthreads that run one task at a time on every thread (the caller is
 * thread 0), with a barrier usable inside the task. Built for the forward pass: thousands of short
 * tasks per second, so workers spin briefly before sleeping and the barrier spins on an atomic. */
#ifndef BITNET_THREADPOOL_H
#define BITNET_THREADPOOL_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_threadpool bitnet_threadpool;

/* fn runs once on each thread: ith in [0, nth). */
typedef void (*bitnet_task_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1 = no extra threads). BITNET_ERR_INVALID_ARG / BITNET_ERR_NOMEM / pthread errors. */
bitnet_status bitnet_threadpool_create(int n_threads, bitnet_threadpool **out, bitnet_error *err);
void bitnet_threadpool_free(bitnet_threadpool *tp); /* NULL is fine; joins all workers */
int bitnet_threadpool_n_threads(const bitnet_threadpool *tp);

/* Run fn(arg, ith, nth) on all threads and return when every thread has finished. Not reentrant. */
void bitnet_threadpool_run(bitnet_threadpool *tp, bitnet_task_fn fn, void *arg);

/* Inside a task: wait until all nth threads reach this point. With nth == 1 it returns at once. */
void bitnet_threadpool_barrier(bitnet_threadpool *tp);

/* Rows [*begin, *end) of n that thread ith of nth handles: contiguous, sizes differ by at most 1. */
void bitnet_split_range(int64_t n, int ith, int nth, int64_t *begin, int64_t *end);

#ifdef __cplusplus
}
#endif

#endif
