/* gguf.h — bounds-checked GGUF v3 reader (read-only mmap of a file, or bytes in memory) and a streaming
 * writer (hosted builds).
 *
 * File layout (GGUF v3, little endian; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
 *
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv × { string key | u32 value_type | value }          string = u64 len + bytes (no NUL)
 *   n_tensors × { string name | u32 n_dims | u64 ne[n_dims] | u32 type | u64 offset }
 *   padding to `general.alignment` (u32, default 32)
 *   data section: tensor i at data_start + offset_i (offset_i % alignment == 0)
 *
 * The reader validates everything before handing out a pointer: lengths against the file size, key
 * and value types, array element types, n_dims <= 4, element-count overflow, known tensor type ids
 * (an unknown id is an error naming the tensor and the id), offsets aligned, every tensor's bytes
 * inside the file, no duplicate key or tensor name. Errors name the file, the key or tensor and the
 * byte offset.
 */
#ifndef BITNET_GGUF_H
#define BITNET_GGUF_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_gguf_type {
    BITNET_GGUF_UINT8 = 0,
    BITNET_GGUF_INT8 = 1,
    BITNET_GGUF_UINT16 = 2,
    BITNET_GGUF_INT16 = 3,
    BITNET_GGUF_UINT32 = 4,
    BITNET_GGUF_INT32 = 5,
    BITNET_GGUF_FLOAT32 = 6,
    BITNET_GGUF_BOOL = 7,
    BITNET_GGUF_STRING = 8,
    BITNET_GGUF_ARRAY = 9,
    BITNET_GGUF_UINT64 = 10,
    BITNET_GGUF_INT64 = 11,
    BITNET_GGUF_FLOAT64 = 12,
} bitnet_gguf_type;

typedef struct bitnet_gguf bitnet_gguf;

typedef struct bitnet_gguf_tensor_info {
    const char *name;   /* NUL-terminated, owned by the reader */
    int n_dims;
    int64_t ne[4];      /* unused dims are 1 */
    int type;           /* enum bitnet_type */
    uint64_t offset;    /* relative to the data section */
    size_t nbytes;      /* bitnet_type_nbytes() of type and ne */
    const void *data;   /* inside the mapping; valid until bitnet_gguf_close */
} bitnet_gguf_tensor_info;

/* Name of a value type ("uint32", "string", ...; "unknown" otherwise). */
const char *bitnet_gguf_type_name(bitnet_gguf_type t);

/* Open and fully validate a GGUF v2/v3 file (read-only mmap). Errors: BITNET_ERR_IO (open/stat/mmap),
 * BITNET_ERR_FORMAT (malformed: the message names the file, the key or tensor and the byte offset),
 * BITNET_ERR_UNSUPPORTED (valid GGUF this reader refuses: unknown tensor type id, arrays of arrays,
 * big-endian or other versions), BITNET_ERR_NOMEM. Cost O(file header size) plus O(n log n) in the
 * number of tensors; string arrays get an element index built once. */
bitnet_status bitnet_gguf_open(const char *path, bitnet_gguf **out, bitnet_error *err); /* hosted builds only */

/* Flags of bitnet_gguf_open_memory. */
enum {
    /* Do not index string arrays: bitnet_gguf_get_arr_str / bitnet_gguf_kv_arr_str then walk the array
     * (O(i)) instead of keeping 4-8 bytes per element (a 128k-token vocabulary and its merges would take
     * about 1.6 MB on a 32-bit core). For readers that never look up strings by index (the bare-metal
     * runtime, which has no tokenizer). */
    BITNET_GGUF_NO_STRING_INDEX = 1u << 0,
};

/* The same validation over `size` bytes already in memory (a model image linked into flash, or read
 * into RAM), which must stay valid and unchanged until bitnet_gguf_close. `name` appears in messages
 * (NULL: "(memory)"). The reader's tables come from base/mem.h's allocator. Errors as bitnet_gguf_open
 * (no BITNET_ERR_IO). */
bitnet_status bitnet_gguf_open_memory(const void *data, size_t size, const char *name, unsigned flags,
                                      bitnet_gguf **out, bitnet_error *err);
void bitnet_gguf_close(bitnet_gguf *g); /* NULL is fine */

const char *bitnet_gguf_path(const bitnet_gguf *g);
uint32_t bitnet_gguf_version(const bitnet_gguf *g);
uint32_t bitnet_gguf_alignment(const bitnet_gguf *g);
size_t bitnet_gguf_file_size(const bitnet_gguf *g);
size_t bitnet_gguf_data_offset(const bitnet_gguf *g); /* byte offset of the data section in the file */

/* The bytes [p, p + n) of a file g maps will not be read again soon (data the caller has copied, such as
 * I2_S weights rewritten at load): the whole pages inside the range are dropped from memory (madvise
 * MADV_DONTNEED; they would be read from the file again if they were). No effect for an image in memory
 * (bitnet_gguf_open_memory), the bare-metal build or a range outside the mapping. */
void bitnet_gguf_release(const bitnet_gguf *g, const void *p, size_t n);

/* The I2_S layout g records (keys BITNET_I2S_LAYOUT_KEY and BITNET_I2S_REWRITTEN_FROM_KEY, common.h) into
 * *layout and *from (bitnet_i2s_layout values; -1 when the key is absent; from may be NULL). Errors
 * (BITNET_ERR_FORMAT, naming the file, the key and the value): a key that is not a string, or names no
 * layout (x86, arm64, rows4). */
bitnet_status bitnet_gguf_i2s_layout(const bitnet_gguf *g, int *layout, int *from, bitnet_error *err);

/* Key/value access. Index-based accessors take 0 <= i < n_kv. */
int64_t bitnet_gguf_n_kv(const bitnet_gguf *g);
const char *bitnet_gguf_kv_key(const bitnet_gguf *g, int64_t i);
bitnet_gguf_type bitnet_gguf_kv_type(const bitnet_gguf *g, int64_t i);
int64_t bitnet_gguf_find_kv(const bitnet_gguf *g, const char *key); /* -1 if absent */

/* Typed getters. Absent key: BITNET_ERR_FORMAT "missing key"; wrong type: BITNET_ERR_FORMAT naming the
 * key, the expected and the stored type. Integer getters accept any integer type whose value fits. */
bitnet_status bitnet_gguf_get_u32(const bitnet_gguf *g, const char *key, uint32_t *out, bitnet_error *err);
bitnet_status bitnet_gguf_get_i64(const bitnet_gguf *g, const char *key, int64_t *out, bitnet_error *err);
bitnet_status bitnet_gguf_get_u64(const bitnet_gguf *g, const char *key, uint64_t *out, bitnet_error *err);
bitnet_status bitnet_gguf_get_f64(const bitnet_gguf *g, const char *key, double *out, bitnet_error *err); /* FLOAT32 or FLOAT64 */
bitnet_status bitnet_gguf_get_f32(const bitnet_gguf *g, const char *key, float *out, bitnet_error *err); /* FLOAT32 or FLOAT64 */
bitnet_status bitnet_gguf_get_bool(const bitnet_gguf *g, const char *key, bool *out, bitnet_error *err);
/* String value: pointer into the mapping (not NUL-terminated) and its length. */
bitnet_status bitnet_gguf_get_str(const bitnet_gguf *g, const char *key, const char **ptr, size_t *len, bitnet_error *err);

/* Arrays. For numeric element types *data points at n packed little-endian elements (possibly
 * unaligned: copy with memcpy). For string arrays use bitnet_gguf_get_arr_str (*data is then the
 * first element's length prefix). Arrays of arrays are refused at open. */
bitnet_status bitnet_gguf_get_arr(const bitnet_gguf *g, const char *key, bitnet_gguf_type *elem_type,
                                  uint64_t *n, const void **data, bitnet_error *err);
bitnet_status bitnet_gguf_get_arr_str(const bitnet_gguf *g, const char *key, uint64_t i,
                                      const char **ptr, size_t *len, bitnet_error *err);
/* Fast element access for loops over big string arrays (a vocabulary): kv is an index from
 * bitnet_gguf_find_kv. Returns a pointer into the mapping (not NUL-terminated) and sets *len, or NULL
 * when kv is not a string array or i >= its length. O(1). */
const char *bitnet_gguf_kv_arr_str(const bitnet_gguf *g, int64_t kv, uint64_t i, size_t *len);

/* Tensors. */
int64_t bitnet_gguf_n_tensors(const bitnet_gguf *g);
const bitnet_gguf_tensor_info *bitnet_gguf_tensor(const bitnet_gguf *g, int64_t i);
const bitnet_gguf_tensor_info *bitnet_gguf_find_tensor(const bitnet_gguf *g, const char *name); /* NULL if absent */

/* ---------------------------------------------------------------------------------------------
 * Writer. Declare keys and tensors (metadata only), then stream tensor bytes in declaration order,
 * so a 100B-parameter file never has to be in memory. Output goes to "<path>.tmp" and is renamed to
 * path by bitnet_gguf_write_end (base/outfile.h); any failure (or write_abort) removes the temporary
 * file, so a failure never leaves a truncated GGUF behind and a file already at path keeps its bytes. A
 * failed write or flush (a full disk, RLIMIT_FSIZE) is BITNET_ERR_IO "cannot write PATH: <strerror>".
 * Keys keep insertion order; setting a key twice replaces its value. Alignment 32.
 * ------------------------------------------------------------------------------------------- */
typedef struct bitnet_gguf_writer bitnet_gguf_writer;

bitnet_gguf_writer *bitnet_gguf_writer_new(void); /* NULL on out of memory */
void bitnet_gguf_writer_free(bitnet_gguf_writer *w); /* also aborts an unfinished write */

bitnet_status bitnet_gguf_set_u32(bitnet_gguf_writer *w, const char *key, uint32_t v);
bitnet_status bitnet_gguf_set_i32(bitnet_gguf_writer *w, const char *key, int32_t v);
bitnet_status bitnet_gguf_set_f32(bitnet_gguf_writer *w, const char *key, float v);
bitnet_status bitnet_gguf_set_bool(bitnet_gguf_writer *w, const char *key, bool v);
bitnet_status bitnet_gguf_set_str(bitnet_gguf_writer *w, const char *key, const char *v);
/* Any numeric or bool scalar type; value points at one element of that type (host = little endian). */
bitnet_status bitnet_gguf_set_scalar(bitnet_gguf_writer *w, const char *key, bitnet_gguf_type type, const void *value);
bitnet_status bitnet_gguf_set_arr(bitnet_gguf_writer *w, const char *key, bitnet_gguf_type elem_type,
                                  const void *data, uint64_t n); /* numeric element types */
bitnet_status bitnet_gguf_set_arr_str(bitnet_gguf_writer *w, const char *key, const char *const *strs, uint64_t n);

/* Key i of the open file g (0 <= i < bitnet_gguf_n_kv(g)), with its value type and value as they are,
 * arrays of strings included: how a file is rewritten with every key kept. Errors as the set_* calls. */
bitnet_status bitnet_gguf_copy_kv(bitnet_gguf_writer *w, const bitnet_gguf *g, int64_t i);

/* Declare a tensor; its size is bitnet_type_nbytes(type, n_dims, ne). */
bitnet_status bitnet_gguf_add_tensor(bitnet_gguf_writer *w, const char *name, int type, int n_dims,
                                     const int64_t *ne, bitnet_error *err);

/* Write the header, every key and the tensor table to "<path>.tmp" (after the keys and tensors are declared);
 * the tensors' bytes follow with bitnet_gguf_write_data in declaration order. Errors name path. */
bitnet_status bitnet_gguf_write_begin(bitnet_gguf_writer *w, const char *path, bitnet_error *err);
/* Append bytes of the current tensor; may be called several times per tensor. Bytes beyond the
 * current tensor's size are an error. Padding between tensors is written automatically. */
bitnet_status bitnet_gguf_write_data(bitnet_gguf_writer *w, const void *data, size_t n, bitnet_error *err);
bitnet_status bitnet_gguf_write_end(bitnet_gguf_writer *w, bitnet_error *err);
void bitnet_gguf_write_abort(bitnet_gguf_writer *w);

#ifdef __cplusplus
}
#endif

#endif
