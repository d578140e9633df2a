/* gguf_internal.h — what the GGUF reader (gguf_read.c) and writer (gguf_write.c) share, private to
 * src/base: the format's limits and default alignment, the byte size of fixed-size value types, and a
 * NUL-terminated copy of a byte string. */
#ifndef BITNET_GGUF_INTERNAL_H
#define BITNET_GGUF_INTERNAL_H

#include "base/gguf.h"

#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf_read.c and gguf_write.c assume a little-endian host"
#endif

#define GGUF_DEFAULT_ALIGNMENT 32u
#define GGUF_MAX_ALIGNMENT (1u << 24)
#define GGUF_MAX_KEY 65535u
#define GGUF_MAX_NAME 64u

/* Bytes per element of a fixed-size value type; 0 for string, array and unknown ids. */
static inline size_t type_size(uint32_t t) {
    switch (t) {
    case BITNET_GGUF_UINT8: case BITNET_GGUF_INT8: case BITNET_GGUF_BOOL: return 1;
    case BITNET_GGUF_UINT16: case BITNET_GGUF_INT16: return 2;
    case BITNET_GGUF_UINT32: case BITNET_GGUF_INT32: case BITNET_GGUF_FLOAT32: return 4;
    case BITNET_GGUF_UINT64: case BITNET_GGUF_INT64: case BITNET_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* gguf_read.c: key i of g as the writer stores values (gguf_write.c): its value type and the encoded
 * bytes after it, as they are in the file (scalar; u64 length + bytes; u32 element type + u64 count +
 * elements), validated at open. false when i is out of range. */
bool bitnet_gguf_kv_encoded(const bitnet_gguf *g, int64_t i, uint32_t *type, const uint8_t **val, size_t *len);

#endif
