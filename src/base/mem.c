/* mem.c — the runtime's allocator: the C library's heap, or the calling thread's arena (rules in mem.h). */
#if !defined(BITNET_BARE_METAL) && !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#endif
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>
#ifndef BITNET_BARE_METAL
#include <sys/mman.h>
#endif

#ifdef BITNET_BARE_METAL
static bitnet_arena *g_current; /* one thread */
#else
static _Thread_local bitnet_arena *g_current;
#endif

void bitnet_arena_init(bitnet_arena *a, void *buf, size_t bytes) {
    memset(a, 0, sizeof *a);
    const uintptr_t p = (uintptr_t)buf, aligned = (p + 63) & ~(uintptr_t)63;
    if (buf == NULL || aligned - p > bytes) return; /* size 0: every request is refused */
    a->base = (uint8_t *)aligned;
    a->size = bytes - (size_t)(aligned - p);
}

void bitnet_arena_reset(bitnet_arena *a) {
    a->used = a->last = a->peak = 0;
    a->sealed = false;
    a->n_refused = a->refused_bytes = a->refused_used = 0;
}

void bitnet_arena_seal(bitnet_arena *a) { a->sealed = true; }

bitnet_arena *bitnet_arena_use(bitnet_arena *a) {
    bitnet_arena *prev = g_current;
    g_current = a;
    return prev;
}

bitnet_arena *bitnet_arena_current(void) { return g_current; }

size_t bitnet_arena_cost(size_t used, size_t n, size_t align) {
    const size_t start = (used + align - 1) & ~(align - 1);
    return start - used + n;
}

static void *arena_alloc(bitnet_arena *a, size_t n, size_t align) {
    const size_t start = (a->used + align - 1) & ~(align - 1);
    if (a->sealed || start < a->used || start > a->size || n > a->size - start) {
        if (a->n_refused++ == 0) {
            a->refused_bytes = n;
            a->refused_used = a->used;
        }
        return NULL;
    }
    a->last = start;
    a->used = start + n;
    if (a->used > a->peak) a->peak = a->used;
    return a->base + start;
}

static bool in_arena(const bitnet_arena *a, const void *p) {
    return a->base != NULL && (const uint8_t *)p >= a->base && (const uint8_t *)p < a->base + a->size;
}

void *bitnet_malloc(size_t n) {
    if (g_current) return arena_alloc(g_current, n, 8);
#ifdef BITNET_BARE_METAL
    return NULL;
#else
    return malloc(n);
#endif
}

void *bitnet_calloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) return NULL;
    void *p = bitnet_malloc(count * size);
    if (p) memset(p, 0, count * size);
    return p;
}

void *bitnet_aligned_alloc(size_t align, size_t n) {
    if (align < 8 || (align & (align - 1)) != 0) return NULL;
    if (g_current) return align <= 64 ? arena_alloc(g_current, n, align) : NULL; /* the arena's start is 64-aligned */
#ifdef BITNET_BARE_METAL
    return NULL;
#else
    if (n > SIZE_MAX - align) return NULL;
    return aligned_alloc(align, n == 0 ? align : (n + align - 1) & ~(align - 1)); /* C11: a multiple of align */
#endif
}

void *bitnet_realloc(void *p, size_t n) {
    bitnet_arena *a = g_current;
    if (a == NULL) {
#ifdef BITNET_BARE_METAL
        return NULL;
#else
        return realloc(p, n);
#endif
    }
    if (p == NULL) return arena_alloc(a, n, 8);
    if (!in_arena(a, p)) return NULL;
    const size_t off = (size_t)((uint8_t *)p - a->base);
    if (off == a->last && a->used > a->last && !a->sealed && n <= a->size - off) { /* the most recent block: in place */
        a->used = off + n;
        if (a->used > a->peak) a->peak = a->used;
        return p;
    }
    /* an older block: a new one with the old bytes (those up to the top of the arena: the old block's
     * size is not recorded, and the block cannot extend past the top) */
    const size_t old_avail = a->used - off;
    void *q = arena_alloc(a, n, 8);
    if (q) memcpy(q, p, n < old_avail ? n : old_avail);
    return q;
}

void bitnet_free(void *p) {
    if (p == NULL) return;
    bitnet_arena *a = g_current;
    if (a == NULL) {
#ifndef BITNET_BARE_METAL
        free(p);
#endif
        return;
    }
    if (!in_arena(a, p)) return;
    if ((size_t)((uint8_t *)p - a->base) == a->last && a->used > a->last) {
        a->used = a->last; /* the most recent block: its bytes are free again (alignment padding stays) */
    }
}

void *bitnet_zeroed_alloc(size_t n, bool *mapped) {
    *mapped = false;
    if (n == 0) return NULL;
    if (g_current) {
        void *p = arena_alloc(g_current, n, 64);
        if (p) memset(p, 0, n);
        return p;
    }
#ifdef BITNET_BARE_METAL
    return NULL;
#else
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    *mapped = true;
    return p;
#endif
}

void bitnet_zeroed_free(void *p, size_t n, bool mapped) {
    if (p == NULL) return;
#ifndef BITNET_BARE_METAL
    if (mapped) {
        munmap(p, n);
        return;
    }
#else
    (void)n, (void)mapped;
#endif
    bitnet_free(p);
}
