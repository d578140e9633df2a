// test_mem.cc — base/mem.h: the arena's rules (alignment, most-recent-block free and realloc, sealing,
// refused requests, peak) and that bitnet_arena_cost predicts exactly how far an allocation moves it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "base/mem.h"

namespace {

struct ArenaScope {
    bitnet_arena *prev;
    explicit ArenaScope(bitnet_arena *a) : prev(bitnet_arena_use(a)) {}
    ~ArenaScope() { bitnet_arena_use(prev); }
};

TEST(Arena, AlignsAndCountsEveryByte) {
    std::vector<uint8_t> buf(4096 + 64);
    bitnet_arena a;
    bitnet_arena_init(&a, buf.data() + 3, 4096); // a misaligned buffer start is aligned up to 64
    EXPECT_EQ((uintptr_t)a.base % 64, 0u);
    EXPECT_LE(a.size, 4096u);
    EXPECT_GE(a.size, 4096u - 63);
    ArenaScope use(&a);
    size_t used = 0;
    for (size_t n : {1, 13, 64, 7, 100}) {
        const size_t cost = bitnet_arena_cost(used, n, 8);
        uint8_t *p = (uint8_t *)bitnet_malloc(n);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ((uintptr_t)p % 8, 0u);
        EXPECT_EQ(a.used, used + cost);
        used = a.used;
    }
    const size_t cost64 = bitnet_arena_cost(used, 10, 64);
    void *q = bitnet_aligned_alloc(64, 10);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ((uintptr_t)q % 64, 0u);
    EXPECT_EQ(a.used, used + cost64);
    EXPECT_EQ(a.peak, a.used);
}

TEST(Arena, FreeAndReallocOfTheMostRecentBlock) {
    std::vector<uint8_t> buf(1024);
    bitnet_arena a;
    bitnet_arena_init(&a, buf.data(), buf.size());
    ArenaScope use(&a);
    char *p = (char *)bitnet_malloc(16);
    char *q = (char *)bitnet_malloc(32);
    const size_t after_q = a.used;
    bitnet_free(p); // not the most recent: nothing happens
    EXPECT_EQ(a.used, after_q);
    std::memset(q, 'x', 32);
    char *q2 = (char *)bitnet_realloc(q, 64); // most recent: in place
    EXPECT_EQ(q2, q);
    EXPECT_EQ(a.used, after_q + 32);
    bitnet_free(q2); // most recent: its bytes come back
    EXPECT_LT(a.used, after_q);
    EXPECT_EQ(a.peak, after_q + 32);
    std::memcpy(p, "0123456789abcdef", 16);
    char *m = (char *)bitnet_malloc(8); // p is now older than m
    (void)m;
    char *p2 = (char *)bitnet_realloc(p, 24); // an older block: a new one with its bytes
    ASSERT_NE(p2, nullptr);
    EXPECT_NE(p2, p);
    EXPECT_EQ(0, std::memcmp(p2, "0123456789abcdef", 16));
    int *z = (int *)bitnet_calloc(4, sizeof(int));
    ASSERT_NE(z, nullptr);
    EXPECT_EQ(z[0] | z[1] | z[2] | z[3], 0);
    EXPECT_EQ(bitnet_calloc(SIZE_MAX / 2, 4), nullptr); // overflow
}

TEST(Arena, RefusesWhenFullOrSealed) {
    std::vector<uint8_t> buf(256 + 64);
    bitnet_arena a;
    bitnet_arena_init(&a, buf.data(), buf.size());
    ArenaScope use(&a);
    EXPECT_NE(bitnet_malloc(200), nullptr);
    EXPECT_EQ(bitnet_malloc(a.size), nullptr);
    EXPECT_EQ(a.n_refused, 1u);
    EXPECT_EQ(a.refused_bytes, a.size);
    EXPECT_NE(bitnet_malloc(8), nullptr);
    bitnet_arena_seal(&a);
    EXPECT_EQ(bitnet_malloc(1), nullptr);
    EXPECT_EQ(bitnet_aligned_alloc(64, 1), nullptr);
    EXPECT_EQ(bitnet_realloc(nullptr, 1), nullptr);
    EXPECT_EQ(a.n_refused, 4u);
    bitnet_arena_reset(&a);
    EXPECT_FALSE(a.sealed);
    EXPECT_EQ(a.used, 0u);
    EXPECT_NE(bitnet_malloc(8), nullptr);
}

TEST(Arena, WithoutAnArenaTheHeapServes) {
    ASSERT_EQ(bitnet_arena_current(), nullptr);
    void *p = bitnet_aligned_alloc(64, 100);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ((uintptr_t)p % 64, 0u);
    p = bitnet_realloc(p, 1000);
    ASSERT_NE(p, nullptr);
    bitnet_free(p);
    EXPECT_EQ(bitnet_aligned_alloc(3, 8), nullptr); // not a power of two
}

} // namespace
