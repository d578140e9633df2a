// test_threadpool.cc — the pthread pool, its spin barrier and bitnet_split_range (src/runtime/threadpool.c).
#include <gtest/gtest.h>

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/threadpool.h"

namespace {

struct PoolDeleter {
    void operator()(bitnet_threadpool *tp) const { bitnet_threadpool_free(tp); }
};
using Pool = std::unique_ptr<bitnet_threadpool, PoolDeleter>;

Pool make_pool(int n) {
    bitnet_threadpool *tp = nullptr;
    bitnet_error err;
    err.msg[0] = '\0';
    bitnet_status st = bitnet_threadpool_create(n, &tp, &err);
    EXPECT_EQ(st, BITNET_OK) << err.msg;
    EXPECT_NE(tp, nullptr);
    return Pool(tp);
}

// ---- create / free ---------------------------------------------------------------------------

TEST(ThreadPool, CreateRejectsZeroAndNegative) {
    for (int n : {0, -1, -100}) {
        bitnet_threadpool *tp = reinterpret_cast<bitnet_threadpool *>(0x1);
        bitnet_error err;
        err.msg[0] = '\0';
        EXPECT_EQ(bitnet_threadpool_create(n, &tp, &err), BITNET_ERR_INVALID_ARG) << n;
        EXPECT_EQ(tp, nullptr);
        EXPECT_NE(std::strstr(err.msg, "n_threads"), nullptr) << err.msg;
    }
    // err may be NULL
    bitnet_threadpool *tp = nullptr;
    EXPECT_EQ(bitnet_threadpool_create(0, &tp, nullptr), BITNET_ERR_INVALID_ARG);
    EXPECT_EQ(bitnet_threadpool_create(1, nullptr, nullptr), BITNET_ERR_INVALID_ARG);
}

TEST(ThreadPool, FreeNullIsFine) {
    bitnet_threadpool_free(nullptr);
    EXPECT_EQ(bitnet_threadpool_n_threads(nullptr), 1);
}

TEST(ThreadPool, CreateAndFreeWithoutRunning) {
    for (int n = 1; n <= 4; ++n) {
        Pool tp = make_pool(n);
        ASSERT_TRUE(tp);
        EXPECT_EQ(bitnet_threadpool_n_threads(tp.get()), n);
    }
}

// ---- run: every thread runs exactly once per run ---------------------------------------------

struct CountArg {
    std::atomic<int> calls[8];
    std::atomic<int> bad_nth;
    int expect_nth;
};

void count_task(void *p, int ith, int nth) {
    auto *a = static_cast<CountArg *>(p);
    if (nth != a->expect_nth || ith < 0 || ith >= 8) {
        a->bad_nth.fetch_add(1);
        return;
    }
    a->calls[ith].fetch_add(1);
}

TEST(ThreadPool, EveryThreadRunsExactlyOncePerRun) {
    for (int n = 1; n <= 4; ++n) {
        Pool tp = make_pool(n);
        ASSERT_TRUE(tp);
        CountArg a;
        for (auto &c : a.calls) c.store(0);
        a.bad_nth.store(0);
        a.expect_nth = n;
        const int runs = 200;
        for (int r = 0; r < runs; ++r) {
            bitnet_threadpool_run(tp.get(), count_task, &a);
            // After run returns, exactly r+1 calls per thread are visible: nothing is still running.
            for (int i = 0; i < n; ++i) ASSERT_EQ(a.calls[i].load(), r + 1) << "n=" << n << " i=" << i;
        }
        for (int i = n; i < 8; ++i) EXPECT_EQ(a.calls[i].load(), 0);
        EXPECT_EQ(a.bad_nth.load(), 0);
    }
}

TEST(ThreadPool, CallerIsThreadZero) {
    struct Arg {
        pthread_t caller;
        std::atomic<int> zero_is_caller{0};
        std::atomic<int> other_is_caller{0};
    } a;
    a.caller = pthread_self();
    Pool tp = make_pool(3);
    ASSERT_TRUE(tp);
    bitnet_threadpool_run(tp.get(), [](void *p, int ith, int) {
        auto *a = static_cast<Arg *>(p);
        bool same = pthread_equal(pthread_self(), a->caller) != 0;
        if (ith == 0 && same) a->zero_is_caller.fetch_add(1);
        if (ith != 0 && same) a->other_is_caller.fetch_add(1);
    }, &a);
    EXPECT_EQ(a.zero_is_caller.load(), 1);
    EXPECT_EQ(a.other_is_caller.load(), 0);
}

// Plain (non-atomic) writes made by workers are visible to the caller after run returns.
TEST(ThreadPool, RunPublishesPlainWrites) {
    Pool tp = make_pool(4);
    ASSERT_TRUE(tp);
    std::vector<int64_t> out(4 * 1000, -1);
    for (int r = 0; r < 50; ++r) {
        struct Arg { std::vector<int64_t> *out; int r; } a{&out, r};
        bitnet_threadpool_run(tp.get(), [](void *p, int ith, int nth) {
            auto *a = static_cast<Arg *>(p);
            int64_t b, e;
            bitnet_split_range((int64_t)a->out->size(), ith, nth, &b, &e);
            for (int64_t i = b; i < e; ++i) (*a->out)[i] = i * 7 + a->r;
        }, &a);
        for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], (int64_t)i * 7 + r) << i;
    }
}

// ---- barrier: no thread sees phase k+1 data before all finished phase k ------------------------

struct PhaseArg {
    bitnet_threadpool *tp;
    int phases;
    std::atomic<int> done[64];  // done[k] = threads that finished phase k
    std::atomic<int> violations;
    int slots[64][8];           // plain writes of phase k by thread i, checked after the barrier
};

void phase_task(void *p, int ith, int nth) {
    auto *a = static_cast<PhaseArg *>(p);
    for (int k = 0; k < a->phases; ++k) {
        a->slots[k][ith] = k * 100 + ith;
        a->done[k].fetch_add(1);
        // This thread has not passed barrier k, so nobody can have started phase k+1.
        if (k + 1 < a->phases && a->done[k + 1].load() != 0) a->violations.fetch_add(1);
        bitnet_threadpool_barrier(a->tp);
        // Everyone finished phase k, and their plain writes are visible.
        if (a->done[k].load() != nth) a->violations.fetch_add(1);
        for (int j = 0; j < nth; ++j)
            if (a->slots[k][j] != k * 100 + j) a->violations.fetch_add(1);
    }
}

TEST(ThreadPool, BarrierOrdersPhases) {
    for (int n = 1; n <= 4; ++n) {
        Pool tp = make_pool(n);
        ASSERT_TRUE(tp);
        for (int rep = 0; rep < 20; ++rep) {
            auto a = std::make_unique<PhaseArg>();
            a->tp = tp.get();
            a->phases = 64;
            for (auto &d : a->done) d.store(0);
            a->violations.store(0);
            std::memset(a->slots, 0xff, sizeof(a->slots));
            bitnet_threadpool_run(tp.get(), phase_task, a.get());
            EXPECT_EQ(a->violations.load(), 0) << "n=" << n;
            for (int k = 0; k < a->phases; ++k) ASSERT_EQ(a->done[k].load(), n);
        }
    }
}

TEST(ThreadPool, BarrierWithOneThreadReturnsAtOnce) {
    Pool tp = make_pool(1);
    ASSERT_TRUE(tp);
    int calls = 0;
    bitnet_threadpool_run(tp.get(), [](void *p, int, int nth) {
        for (int i = 0; i < 1000; ++i) bitnet_threadpool_barrier(static_cast<bitnet_threadpool *>(nullptr));
        (void)nth;
        ++*static_cast<int *>(p);
    }, &calls);
    EXPECT_EQ(calls, 1);
    // Direct call outside a task with nth == 1 must not block either.
    bitnet_threadpool_barrier(tp.get());
    bitnet_threadpool_barrier(nullptr);
}

// ---- many short runs: no deadlock, no lost wake-up ---------------------------------------------

struct SumArg {
    bitnet_threadpool *tp;
    std::atomic<int64_t> total;
};

TEST(ThreadPool, ThousandsOfRunsWithBarrier) {
    for (int n = 1; n <= 4; ++n) {
        Pool tp = make_pool(n);
        ASSERT_TRUE(tp);
        SumArg a;
        a.tp = tp.get();
        a.total.store(0);
        const int runs = 3000;
        for (int r = 0; r < runs; ++r) {
            bitnet_threadpool_run(tp.get(), [](void *p, int ith, int) {
                auto *a = static_cast<SumArg *>(p);
                a->total.fetch_add(ith + 1);
                bitnet_threadpool_barrier(a->tp);
                a->total.fetch_add(1);
            }, &a);
        }
        const int64_t per_run = (int64_t)n * (n + 1) / 2 + n;
        EXPECT_EQ(a.total.load(), per_run * runs) << "n=" << n;
    }
}

// Runs separated by pauses long enough for the workers to fall asleep on the condition variable.
TEST(ThreadPool, WakesSleepingWorkers) {
    Pool tp = make_pool(4);
    ASSERT_TRUE(tp);
    CountArg a;
    for (auto &c : a.calls) c.store(0);
    a.bad_nth.store(0);
    a.expect_nth = 4;
    for (int r = 0; r < 10; ++r) {
        struct timespec ts = {0, 2000000};  // 2 ms >> the spin time
        nanosleep(&ts, nullptr);
        bitnet_threadpool_run(tp.get(), count_task, &a);
    }
    for (int i = 0; i < 4; ++i) EXPECT_EQ(a.calls[i].load(), 10);
    EXPECT_EQ(a.bad_nth.load(), 0);
}

void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, nullptr);
}

// The caller outlasts its spin (a worker takes 3 ms) and sleeps on the condition variable; the last
// worker must wake it, and the worker's plain writes must be visible afterwards.
TEST(ThreadPool, CallerSleepsUntilASlowWorkerFinishes) {
    for (int n = 2; n <= 4; ++n) {
        Pool tp = make_pool(n);
        ASSERT_TRUE(tp);
        struct Arg { int value[4]; } a;
        for (int r = 0; r < 3; ++r) {
            std::memset(&a, 0, sizeof(a));
            bitnet_threadpool_run(tp.get(), [](void *p, int ith, int nth) {
                if (ith == nth - 1) sleep_us(3000);
                static_cast<Arg *>(p)->value[ith] = 100 + ith;
            }, &a);
            for (int i = 0; i < n; ++i) ASSERT_EQ(a.value[i], 100 + i) << "n=" << n << " run " << r;
        }
    }
}

// Gaps between runs around every waiting regime of the workers (pause spin, yield spin, sleep) and
// barriers inside the runs: every run completes with the right count (no lost wake-up).
TEST(ThreadPool, RunsAfterGapsOfEveryLength) {
    const long gaps_us[] = {0, 5, 30, 120, 250, 1000};
    for (int n = 1; n <= 4; ++n) {
        Pool tp = make_pool(n);
        ASSERT_TRUE(tp);
        SumArg a;
        a.tp = tp.get();
        a.total.store(0);
        int runs = 0;
        for (int rep = 0; rep < 4; ++rep) {
            for (long g : gaps_us) {
                sleep_us(g);
                bitnet_threadpool_run(tp.get(), [](void *p, int ith, int) {
                    auto *a = static_cast<SumArg *>(p);
                    a->total.fetch_add(ith + 1);
                    bitnet_threadpool_barrier(a->tp);
                    a->total.fetch_add(1);
                    bitnet_threadpool_barrier(a->tp);
                }, &a);
                ++runs;
            }
        }
        EXPECT_EQ(a.total.load(), ((int64_t)n * (n + 1) / 2 + n) * runs) << "n=" << n;
    }
}

// Many consecutive barriers in one run: after barrier k every thread has made its k+1 increments and
// none can have made more than k+2 (it would need this thread at barrier k+1).
TEST(ThreadPool, ManyConsecutiveBarriers) {
    for (int n = 1; n <= 4; ++n) {
        Pool tp = make_pool(n);
        ASSERT_TRUE(tp);
        struct Arg {
            bitnet_threadpool *tp;
            std::atomic<int64_t> count;
            std::atomic<int> violations;
        } a;
        a.tp = tp.get();
        a.count.store(0);
        a.violations.store(0);
        bitnet_threadpool_run(tp.get(), [](void *p, int, int nth) {
            auto *a = static_cast<Arg *>(p);
            for (int64_t k = 0; k < 2000; ++k) {
                a->count.fetch_add(1);
                bitnet_threadpool_barrier(a->tp);
                const int64_t c = a->count.load();
                if (c < nth * (k + 1) || c > nth * (k + 2)) a->violations.fetch_add(1);
            }
        }, &a);
        EXPECT_EQ(a.violations.load(), 0) << "n=" << n;
        EXPECT_EQ(a.count.load(), 2000 * n);
    }
}

TEST(ThreadPool, NullPoolRunsOnCaller) {
    CountArg a;
    for (auto &c : a.calls) c.store(0);
    a.bad_nth.store(0);
    a.expect_nth = 1;
    bitnet_threadpool_run(nullptr, count_task, &a);
    EXPECT_EQ(a.calls[0].load(), 1);
    EXPECT_EQ(a.bad_nth.load(), 0);
}

// ---- split_range -------------------------------------------------------------------------------

TEST(SplitRange, ContiguousCoveringBalanced) {
    for (int64_t n : {0, 1, 2, 3, 7, 8, 64, 100, 1001}) {
        for (int nth = 1; nth <= 9; ++nth) {
            int64_t expect_begin = 0, min_size = INT64_MAX, max_size = -1;
            for (int ith = 0; ith < nth; ++ith) {
                int64_t b = -1, e = -1;
                bitnet_split_range(n, ith, nth, &b, &e);
                EXPECT_EQ(b, expect_begin) << "n=" << n << " nth=" << nth << " ith=" << ith;
                EXPECT_LE(b, e);
                expect_begin = e;
                min_size = std::min(min_size, e - b);
                max_size = std::max(max_size, e - b);
            }
            EXPECT_EQ(expect_begin, n) << "n=" << n << " nth=" << nth;
            EXPECT_LE(max_size - min_size, 1) << "n=" << n << " nth=" << nth;
        }
    }
}

TEST(SplitRange, ExactValues) {
    int64_t b, e;
    bitnet_split_range(10, 0, 3, &b, &e);
    EXPECT_EQ(b, 0); EXPECT_EQ(e, 4);
    bitnet_split_range(10, 1, 3, &b, &e);
    EXPECT_EQ(b, 4); EXPECT_EQ(e, 7);
    bitnet_split_range(10, 2, 3, &b, &e);
    EXPECT_EQ(b, 7); EXPECT_EQ(e, 10);
    bitnet_split_range(2, 3, 4, &b, &e);  // more threads than items: empty tail
    EXPECT_EQ(b, 2); EXPECT_EQ(e, 2);
    bitnet_split_range(5, 4, 4, &b, &e);  // ith out of range
    EXPECT_EQ(b, e);
    bitnet_split_range(5, 0, 0, &b, &e);  // nth < 1
    EXPECT_EQ(b, e);
}

}  // namespace
