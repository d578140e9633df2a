/* mem.h — the allocator of the runtime's libraries (base, runtime, model, mcu) and the arena that
 * replaces the heap on a microcontroller.
 *
 * bitnet_malloc/calloc/realloc/aligned_alloc/free are the C library's functions, except while an arena
 * is in use on the calling thread (bitnet_arena_use): then every request is served from that arena, a
 * bump allocator over one caller-given buffer, in the manner of TensorFlow Lite Micro's tensor arena.
 * The bare-metal build (BITNET_BARE_METAL) has no other memory: without an arena every request fails.
 *
 * Arena rules (what bitnet_arena_cost computes):
 *  - a block of n bytes with alignment a starts at the next multiple of a (a = 8 for malloc/calloc/
 *    realloc, else the requested power of two) and ends n bytes later; the buffer's start is aligned to
 *    64 at init, so offsets and addresses agree on alignment;
 *  - free releases the most recent block only (its bytes become available again): a temporary buffer
 *    allocated and freed at once costs nothing; freeing an older block does nothing until
 *    bitnet_arena_reset. realloc grows the most recent block in place;
 *  - after bitnet_arena_seal every request fails (returns NULL) and is counted in n_refused: the runtime
 *    allocates everything at start-up and nothing afterwards;
 *  - `peak` is the highest offset ever in use: the bytes the buffer had to have.
 * An arena is not thread-safe; it belongs to the thread that uses it. */
#ifndef BITNET_MEM_H
#define BITNET_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_arena {
    uint8_t *base;    /* buffer start aligned up to 64 */
    size_t size;      /* usable bytes from base */
    size_t used;      /* offset of the first free byte */
    size_t last;      /* offset of the most recent block (== used when there is none to pop) */
    size_t peak;      /* highest `used` seen */
    bool sealed;      /* no more allocations */
    size_t n_refused; /* requests refused (out of space or sealed) */
    size_t refused_bytes; /* size of the first refused request (for messages) */
    size_t refused_used;  /* bytes in use when it was refused */
} bitnet_arena;

/* Arena over buf[0, bytes) (its start aligned up to 64, so up to 63 bytes are lost). */
void bitnet_arena_init(bitnet_arena *a, void *buf, size_t bytes);
/* Forget every block (the buffer can be reused); clears sealed and the counters. */
void bitnet_arena_reset(bitnet_arena *a);
void bitnet_arena_seal(bitnet_arena *a);

/* Serve this thread's bitnet_* allocations from `a` (NULL: the C library again); returns the arena that
 * was in use before. */
bitnet_arena *bitnet_arena_use(bitnet_arena *a);
bitnet_arena *bitnet_arena_current(void);

/* Bytes an arena whose first free offset is `used` moves forward for a block of n bytes aligned to
 * `align` (a power of two): the padding plus n. */
size_t bitnet_arena_cost(size_t used, size_t n, size_t align);

void *bitnet_malloc(size_t n);
void *bitnet_calloc(size_t count, size_t size); /* NULL when count·size overflows */
void *bitnet_realloc(void *p, size_t n);
/* n bytes aligned to `align` (a power of two >= 8; in an arena at most 64, the alignment of its start);
 * unlike C11 aligned_alloc, n need not be a multiple of align. */
void *bitnet_aligned_alloc(size_t align, size_t n);
void bitnet_free(void *p);

/* n bytes of zeros for a large buffer that is written before it is read (the KV cache). On the C library's
 * heap: an anonymous private mapping, page-aligned, whose pages the kernel zeroes on first touch, so the
 * bytes never touched cost neither time nor resident memory (POSIX mmap); *mapped is set to true. In an
 * arena: a 64-aligned block, zeroed with memset; *mapped false. NULL when out of memory (or n == 0). Give it
 * back with bitnet_zeroed_free(p, n, mapped) with the same n and flag. */
void *bitnet_zeroed_alloc(size_t n, bool *mapped);
void bitnet_zeroed_free(void *p, size_t n, bool mapped);

#ifdef __cplusplus
}
#endif

#endif
