/* board_host.c — the board of a hosted build (board.h): image and arena from the C library's heap (the
 * arena's pages are touched only as it fills), no instruction counter. */
#include "mcu/board.h"

#include <stdio.h>
#include <stdlib.h>

/* Default arena on a host: far more than the dummy layouts a node runs need; --arena sets another. */
#define HOST_ARENA_DEFAULT ((size_t)256 << 20)

const char *bitnet_board_name(void) { return "host"; }

static void *alloc64(size_t bytes, char *why, size_t why_size) {
    const size_t n = (bytes + 63) & ~(size_t)63;
    void *p = n >= bytes ? aligned_alloc(64, n ? n : 64) : NULL;
    if (!p) snprintf(why, why_size, "out of memory for %zu bytes", bytes);
    return p;
}

void *bitnet_board_image_buffer(size_t bytes, char *why, size_t why_size) { return alloc64(bytes, why, why_size); }

void *bitnet_board_arena(size_t want, size_t *got, char *why, size_t why_size) {
    *got = want ? want : HOST_ARENA_DEFAULT;
    return alloc64(*got, why, why_size);
}

void bitnet_board_release(void *p) { free(p); }

bool bitnet_board_stack_peak(size_t *bytes) {
    (void)bytes;
    return false;
}

bool bitnet_board_instructions(uint64_t *n) {
    (void)n;
    return false;
}
