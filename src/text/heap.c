/* heap.c — the binary heap of heap.h (sift up on push, sift down on pop), shared by the
 * SentencePiece-style (spm.c) and byte-level BPE (bpe.c) merges. */
#include "text/heap.h"

#include <stdlib.h>
#include <string.h>

static void *at(const bitnet_heap *h, size_t i) { return (char *)h->a + i * h->elem_size; }

void bitnet_heap_push(bitnet_heap *h, const void *x) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        void *na = realloc(h->a, nc * h->elem_size);
        if (!na) {
            h->oom = true;
            return;
        }
        h->a = na;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!h->before(x, at(h, p))) break;
        memcpy(at(h, i), at(h, p), h->elem_size);
        i = p;
    }
    memcpy(at(h, i), x, h->elem_size);
}

void bitnet_heap_pop(bitnet_heap *h, void *top) {
    memcpy(top, at(h, 0), h->elem_size);
    /* the last element stays in its slot (index n after the decrement) while the hole sinks: the sift
     * only writes slots below n */
    const void *last = at(h, --h->n);
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->before(at(h, c + 1), at(h, c))) c++;
        if (!h->before(at(h, c), last)) break;
        memcpy(at(h, i), at(h, c), h->elem_size);
        i = c;
    }
    if (h->n > 0) memcpy(at(h, i), last, h->elem_size);
}
