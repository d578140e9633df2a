/* heap.h — the binary heap the tokenizers merge with: elements of any fixed size, ordered by a
 * caller-given "comes first" test (spm.c: highest score first; bpe.c: lowest merge rank first; both
 * break ties by the leftmost pair). Private to src/text. */
#ifndef BITNET_TEXT_HEAP_H
#define BITNET_TEXT_HEAP_H

#include <stdbool.h>
#include <stddef.h>

/* Whether element a is popped before element b. */
typedef bool (*bitnet_heap_before_fn)(const void *a, const void *b);

/* A heap of n elements of elem_size bytes each in a (capacity cap, grown by doubling from 64). Start it as
 * {NULL, 0, 0, elem_size, before, false}; free(a) when done. oom is set when a push could not grow the
 * array (the element is dropped and later pushes do nothing). */
typedef struct bitnet_heap {
    void *a;
    size_t n, cap;
    size_t elem_size;
    bitnet_heap_before_fn before;
    bool oom;
} bitnet_heap;

/* Adds a copy of the element at x. */
void bitnet_heap_push(bitnet_heap *h, const void *x);

/* Removes the first element (h->n > 0) and copies it to top. */
void bitnet_heap_pop(bitnet_heap *h, void *top);

#endif
