/* threadpool.c — the fixed pthread pool of threadpool.h: the caller is thread 0, workers 1..n-1 wait
 * for a new "generation" (one per bitnet_threadpool_run), run the task, and report completion.
 *
 * Waiting strategy (the forward pass is one task per batch with ~20 barriers per layer, and one
 * task per generated token, so wake-up latency matters more than some µs of CPU):
 *   - a worker that finished a task spins on the generation counter for BITNET_TP_SPIN_NS with a
 *     pause instruction, then sleeps on a condition variable;
 *   - the caller waiting for the workers spins the same way, then sleeps on a second condition
 *     variable that the last finishing worker signals;
 *   - the barrier is a sense-reversing spin barrier on C11 atomics; it yields the CPU after a
 *     while so that an oversubscribed machine (more threads than cores, qemu) still makes progress.
 * No mutex on the fast path: a sleeper announces itself in an atomic counter (n_sleeping,
 * caller_sleeping) with the mutex held before it re-checks its condition and waits; the waker makes
 * the condition true first and then reads the counter, both sequentially consistent, and takes the
 * mutex to signal only when someone sleeps. Either the waker sees the announcement (then it signals
 * under the mutex, after the sleeper is waiting or before it re-checks), or the announcement comes
 * later in the single total order, so the sleeper's re-check sees the condition true: no wake-up
 * can be lost.
 *
 * The bare-metal build (BITNET_BARE_METAL) runs one thread: create accepts only n_threads = 1 and
 * allocates nothing, run calls the task on the caller, and the barrier returns at once — the seed's rule
 * that the barrier after building the LUTs is needed only when nth > 1. The pthread pool uses the C
 * library's heap, not base/mem.h: it is a platform object outside the arena. */
#include "runtime/threadpool.h"

#ifdef BITNET_BARE_METAL

struct bitnet_threadpool {
    int n_threads;
};

static bitnet_threadpool g_single_thread = {1};

bitnet_status bitnet_threadpool_create(int n_threads, bitnet_threadpool **out, bitnet_error *err) {
    if (out == NULL) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "threadpool: out pointer is NULL");
    *out = NULL;
    if (n_threads != 1)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "threadpool: n_threads = %d, but this bare-metal build runs one thread", n_threads);
    *out = &g_single_thread;
    return BITNET_OK;
}

void bitnet_threadpool_free(bitnet_threadpool *tp) { (void)tp; }

int bitnet_threadpool_n_threads(const bitnet_threadpool *tp) {
    (void)tp;
    return 1;
}

void bitnet_threadpool_run(bitnet_threadpool *tp, bitnet_task_fn fn, void *arg) {
    (void)tp;
    if (fn != NULL) fn(arg, 0, 1);
}

void bitnet_threadpool_barrier(bitnet_threadpool *tp) { (void)tp; }

#else /* hosted: pthreads */

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BITNET_CPU_PAUSE() _mm_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define BITNET_CPU_PAUSE() __asm__ __volatile__("yield" ::: "memory")
#else
#define BITNET_CPU_PAUSE() ((void)0)
#endif

/* BITNET_TP_FENCE_NOTE: each sleep/wake handshake below is a store to one atomic followed by a load of
 * another (Dekker's pattern), which C11 seq_cst operations already order. A full fence sits between
 * them all the same: under qemu-user on an x86-64 host, AArch64's STLR/LDAXR-STLXR followed by LDAR
 * were not kept in order (the translated store can pass the load), and llama-perplexity, test_threadpool
 * and test_lut_host hung with the caller and a worker both asleep, each having missed the other's
 * store. A DMB (AArch64) or MFENCE (x86-64) is translated as a full barrier. One fence per run and
 * per worker: tens of nanoseconds. */

/* How long a worker (waiting for a task) or the caller (waiting for the workers) spins before it
 * sleeps on a condition variable: a few µs. Measured (bitnet-kernel-bench's pool line, 2 threads,
 * while another process kept one core busy): spinning 200 µs (pause, then sched_yield) made an empty
 * run cost 47 µs instead of 22 µs with 5 µs, because the spinning thread holds the core the other
 * one needs; an uncontended run costs well under 1 µs either way. */
#define BITNET_TP_SPIN_NS 5000LL
/* How long a thread spins in the barrier before it starts yielding the CPU between checks. */
#define BITNET_TP_BARRIER_SPIN_NS 20000LL
/* The clock is read once per this many pause instructions. */
#define BITNET_TP_SPIN_CHECK 64
/* Sanity limit on the pool size (far above any CPU this runs on). */
#define BITNET_TP_MAX_THREADS 1024

typedef struct bitnet_tp_worker {
    struct bitnet_threadpool *tp;
    int ith;
    pthread_t thread;
} bitnet_tp_worker;

struct bitnet_threadpool {
    int n_threads;
    int n_started; /* workers actually created (for cleanup after a failed create) */
    bitnet_tp_worker *workers; /* [n_threads]; entry 0 (the caller) is unused */

    pthread_mutex_t mutex;
    pthread_cond_t cond_work; /* workers sleep here waiting for a new generation */
    pthread_cond_t cond_done; /* the caller sleeps here waiting for n_done == n_threads - 1 */

    /* Task of the current generation; written by the caller before the release-increment of
     * `generation`, read by workers after their acquire-load of it. */
    bitnet_task_fn fn;
    void *arg;

    atomic_uint_fast64_t generation; /* incremented once per run (and once for shutdown) */
    atomic_int n_done;               /* workers that finished the current generation */
    atomic_bool stop;
    atomic_int n_sleeping;           /* workers waiting (or about to wait) on cond_work */
    atomic_int caller_sleeping;      /* 1 while the caller waits (or is about to) on cond_done */

    /* Sense-reversing barrier. */
    atomic_int barrier_count;
    atomic_int barrier_sense;
};

static int64_t bitnet_tp_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spin until *gen != seen or the spin budget is spent: pause instructions for the first
 * BITNET_TP_BARRIER_SPIN_NS, then sched_yield between checks (an oversubscribed machine runs the
 * other threads meanwhile). Returns true when the generation changed. */
static bool bitnet_tp_spin_generation(bitnet_threadpool *tp, uint_fast64_t seen) {
    int64_t start = -1;
    bool yielding = false;
    for (;;) {
        for (int i = 0; i < BITNET_TP_SPIN_CHECK; ++i) {
            if (atomic_load_explicit(&tp->generation, memory_order_acquire) != seen) return true;
            if (yielding) sched_yield();
            else BITNET_CPU_PAUSE();
        }
        const int64_t now = bitnet_tp_now_ns();
        if (start < 0) start = now;
        else if (now - start >= BITNET_TP_SPIN_NS) return false;
        else if (now - start >= BITNET_TP_BARRIER_SPIN_NS) yielding = true;
    }
}

static void *bitnet_tp_worker_main(void *p) {
    bitnet_tp_worker *w = (bitnet_tp_worker *)p;
    bitnet_threadpool *tp = w->tp;
    uint_fast64_t seen = 0; /* generation 0 = "no task yet" */

    for (;;) {
        if (!bitnet_tp_spin_generation(tp, seen)) {
            pthread_mutex_lock(&tp->mutex);
            atomic_fetch_add(&tp->n_sleeping, 1); /* seq_cst: see the file comment */
            atomic_thread_fence(memory_order_seq_cst); /* store → load order (BITNET_TP_FENCE_NOTE) */
            while (atomic_load(&tp->generation) == seen) pthread_cond_wait(&tp->cond_work, &tp->mutex);
            atomic_fetch_sub(&tp->n_sleeping, 1);
            pthread_mutex_unlock(&tp->mutex);
        }
        seen = atomic_load_explicit(&tp->generation, memory_order_acquire);
        if (atomic_load_explicit(&tp->stop, memory_order_acquire)) break;

        tp->fn(tp->arg, w->ith, tp->n_threads);

        /* The last worker to finish wakes the caller if it went to sleep. */
        const int before = (int)atomic_fetch_add(&tp->n_done, 1);
        atomic_thread_fence(memory_order_seq_cst); /* store → load order (BITNET_TP_FENCE_NOTE) */
        if (before == tp->n_threads - 2 && atomic_load(&tp->caller_sleeping)) {
            pthread_mutex_lock(&tp->mutex);
            pthread_cond_signal(&tp->cond_done);
            pthread_mutex_unlock(&tp->mutex);
        }
    }
    return NULL;
}

/* Start the generation after the current one (caller holds no lock); the mutex and the broadcast
 * only when a worker sleeps. The seq_cst increment also releases fn, arg and the counters. */
static void bitnet_tp_publish(bitnet_threadpool *tp) {
    atomic_fetch_add(&tp->generation, 1);
    atomic_thread_fence(memory_order_seq_cst); /* store → load order (BITNET_TP_FENCE_NOTE) */
    if (atomic_load(&tp->n_sleeping) > 0) {
        pthread_mutex_lock(&tp->mutex);
        pthread_cond_broadcast(&tp->cond_work);
        pthread_mutex_unlock(&tp->mutex);
    }
}

/* Stop and join the workers that were started, then release everything. */
static void bitnet_tp_destroy(bitnet_threadpool *tp) {
    if (tp->n_started > 0) {
        atomic_store_explicit(&tp->stop, true, memory_order_release);
        bitnet_tp_publish(tp);
        for (int i = 1; i <= tp->n_started; ++i) pthread_join(tp->workers[i].thread, NULL);
    }
    pthread_cond_destroy(&tp->cond_done);
    pthread_cond_destroy(&tp->cond_work);
    pthread_mutex_destroy(&tp->mutex);
    free(tp->workers);
    free(tp);
}

/* Create a pool of n_threads threads, the calling thread being thread 0 (so n_threads - 1 pthreads
 * are started). Errors: BITNET_ERR_INVALID_ARG for n_threads < 1 or > 1024 or out == NULL,
 * BITNET_ERR_NOMEM, BITNET_ERR_IO when pthread_create fails (message carries the errno text). */
bitnet_status bitnet_threadpool_create(int n_threads, bitnet_threadpool **out, bitnet_error *err) {
    if (out == NULL) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "threadpool: out pointer is NULL");
    *out = NULL;
    if (n_threads < 1 || n_threads > BITNET_TP_MAX_THREADS)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "threadpool: n_threads = %d, must be in [1, %d]",
                           n_threads, BITNET_TP_MAX_THREADS);

    bitnet_threadpool *tp = (bitnet_threadpool *)calloc(1, sizeof(*tp));
    if (tp == NULL) return bitnet_fail(err, BITNET_ERR_NOMEM, "threadpool: out of memory for %d threads", n_threads);
    tp->workers = (bitnet_tp_worker *)calloc((size_t)n_threads, sizeof(*tp->workers));
    if (tp->workers == NULL) {
        free(tp);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "threadpool: out of memory for %d threads", n_threads);
    }
    tp->n_threads = n_threads;
    atomic_init(&tp->generation, 0);
    atomic_init(&tp->n_done, 0);
    atomic_init(&tp->stop, false);
    atomic_init(&tp->n_sleeping, 0);
    atomic_init(&tp->caller_sleeping, 0);
    atomic_init(&tp->barrier_count, 0);
    atomic_init(&tp->barrier_sense, 0);

    int rc = pthread_mutex_init(&tp->mutex, NULL);
    if (rc == 0) {
        rc = pthread_cond_init(&tp->cond_work, NULL);
        if (rc == 0) {
            rc = pthread_cond_init(&tp->cond_done, NULL);
            if (rc != 0) pthread_cond_destroy(&tp->cond_work);
        }
        if (rc != 0) pthread_mutex_destroy(&tp->mutex);
    }
    if (rc != 0) {
        free(tp->workers);
        free(tp);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "threadpool: mutex/condition init failed: %s", strerror(rc));
    }

    for (int i = 1; i < n_threads; ++i) {
        tp->workers[i].tp = tp;
        tp->workers[i].ith = i;
        rc = pthread_create(&tp->workers[i].thread, NULL, bitnet_tp_worker_main, &tp->workers[i]);
        if (rc != 0) {
            bitnet_tp_destroy(tp);
            return bitnet_fail(err, rc == EAGAIN ? BITNET_ERR_NOMEM : BITNET_ERR_IO,
                               "threadpool: pthread_create for thread %d of %d failed: %s", i, n_threads,
                               strerror(rc));
        }
        tp->n_started = i;
    }
    *out = tp;
    return BITNET_OK;
}

/* Stop and join every worker and release the pool. NULL is fine. Must not be called while a run
 * is in progress. */
void bitnet_threadpool_free(bitnet_threadpool *tp) {
    if (tp == NULL) return;
    bitnet_tp_destroy(tp);
}

/* Number of threads including the caller; 1 for NULL. */
int bitnet_threadpool_n_threads(const bitnet_threadpool *tp) {
    return tp == NULL ? 1 : tp->n_threads;
}

/* Run fn(arg, ith, n) on every thread (the caller runs ith = 0) and return when all have returned.
 * The task's writes are visible to the caller afterwards (acquire on the completion counter).
 * tp == NULL runs fn(arg, 0, 1) on the caller. */
void bitnet_threadpool_run(bitnet_threadpool *tp, bitnet_task_fn fn, void *arg) {
    if (fn == NULL) return;
    if (tp == NULL || tp->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    const int n_workers = tp->n_threads - 1;
    tp->fn = fn;
    tp->arg = arg;
    atomic_store_explicit(&tp->n_done, 0, memory_order_relaxed);
    atomic_store_explicit(&tp->barrier_count, 0, memory_order_relaxed);
    bitnet_tp_publish(tp); /* release: workers see fn, arg and the counters reset above */

    fn(arg, 0, tp->n_threads);

    /* the same spin as the workers': pause, then yield, then sleep */
    int64_t start = -1;
    bool yielding = false;
    for (;;) {
        for (int i = 0; i < BITNET_TP_SPIN_CHECK; ++i) {
            if (atomic_load_explicit(&tp->n_done, memory_order_acquire) == n_workers) return;
            if (yielding) sched_yield();
            else BITNET_CPU_PAUSE();
        }
        const int64_t now = bitnet_tp_now_ns();
        if (start < 0) start = now;
        else if (now - start >= BITNET_TP_SPIN_NS) break;
        else if (now - start >= BITNET_TP_BARRIER_SPIN_NS) yielding = true;
    }
    pthread_mutex_lock(&tp->mutex);
    atomic_store(&tp->caller_sleeping, 1); /* seq_cst: see the file comment */
    atomic_thread_fence(memory_order_seq_cst); /* store → load order (BITNET_TP_FENCE_NOTE) */
    while (atomic_load(&tp->n_done) != n_workers) pthread_cond_wait(&tp->cond_done, &tp->mutex);
    atomic_store(&tp->caller_sleeping, 0);
    pthread_mutex_unlock(&tp->mutex);
}

/* Sense-reversing barrier (Mellor-Crummey & Scott, "Algorithms for scalable synchronization on
 * shared-memory multiprocessors", 1991). The thread's local sense is taken as the complement of the
 * global sense on entry (the global sense cannot flip before this thread arrives), the last arriving
 * thread resets the count and flips the global sense with release order; the others spin until they
 * see the flip (acquire), so every write before the barrier in any thread is visible after it. */
void bitnet_threadpool_barrier(bitnet_threadpool *tp) {
    if (tp == NULL || tp->n_threads <= 1) return;
    const int my_sense = !atomic_load_explicit(&tp->barrier_sense, memory_order_acquire);
    if (atomic_fetch_add_explicit(&tp->barrier_count, 1, memory_order_acq_rel) == tp->n_threads - 1) {
        atomic_store_explicit(&tp->barrier_count, 0, memory_order_relaxed);
        atomic_store_explicit(&tp->barrier_sense, my_sense, memory_order_release);
        return;
    }
    int64_t deadline = -1;
    bool yielding = false;
    for (;;) {
        for (int i = 0; i < BITNET_TP_SPIN_CHECK; ++i) {
            if (atomic_load_explicit(&tp->barrier_sense, memory_order_acquire) == my_sense) return;
            if (yielding) sched_yield();
            else BITNET_CPU_PAUSE();
        }
        if (!yielding) {
            int64_t now = bitnet_tp_now_ns();
            if (deadline < 0) deadline = now + BITNET_TP_BARRIER_SPIN_NS;
            else if (now >= deadline) yielding = true;
        }
    }
}

#endif /* BITNET_BARE_METAL */

/* Contiguous split of [0, n) into nth parts: the first n % nth parts get one extra element.
 * Out-of-range ith/nth (nth < 1, ith outside [0, nth)) or n <= 0 give an empty range. */
void bitnet_split_range(int64_t n, int ith, int nth, int64_t *begin, int64_t *end) {
    if (n <= 0 || nth < 1 || ith < 0 || ith >= nth) {
        *begin = *end = 0;
        return;
    }
    const int64_t base = n / nth, rem = n % nth;
    const int64_t b = (int64_t)ith * base + (ith < rem ? ith : rem);
    *begin = b;
    *end = b + base + (ith < rem ? 1 : 0);
}
