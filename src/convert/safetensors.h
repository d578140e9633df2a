/* safetensors.h — bounds-checked, read-only (mmap) reader of Hugging Face safetensors checkpoints,
 * single files or sharded through model.safetensors.index.json.
 *
 * File layout (https://huggingface.co/docs/safetensors, "Format"):
 *
 *   u64 N (little endian) | N bytes of UTF-8 JSON header | data buffer (the rest of the file)
 *   header = { "__metadata__": {string: string} (optional),
 *              "<tensor name>": {"dtype": "BF16", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ... }
 *
 * Offsets are relative to the start of the data buffer; a tensor's bytes are row-major with shape[0]
 * the slowest dimension (an HF Linear weight is [out_features, in_features] = [M, K]), elements little
 * endian. As the format specification requires, the reader refuses a header that is not a JSON object
 * (or over 100 MB), unknown dtypes, byte ranges whose length is not elements × dtype size, ranges that
 * leave the file (a truncated download), overlap each other or leave holes in the data buffer.
 *
 * Sharded checkpoints: model.safetensors.index.json = {"metadata": {...}, "weight_map": {"<tensor
 * name>": "<shard file name>", ...}}. Every shard named there is opened (names must be plain file
 * names in the same folder); every listed tensor must be in the shard the index names; a tensor name
 * that two shards both hold is an error.
 *
 * JSON is parsed with json-c (Debian libjson-c-dev), the library src/convert/hf_tokenizer.c uses.
 * Nothing is copied: tensor data pointers point into the mappings and stay valid until
 * bitnet_st_close. Every error names the file and the tensor or key (and the byte offset for JSON
 * syntax errors). */
#ifndef BITNET_SAFETENSORS_H
#define BITNET_SAFETENSORS_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dtype names of the safetensors format. Sizes: BOOL/U8/I8/F8_* 1, I16/U16/F16/BF16 2,
 * I32/U32/F32 4, I64/U64/F64 8. */
typedef enum bitnet_st_dtype {
    BITNET_ST_BOOL = 0,
    BITNET_ST_U8,
    BITNET_ST_I8,
    BITNET_ST_F8_E4M3,
    BITNET_ST_F8_E5M2,
    BITNET_ST_I16,
    BITNET_ST_U16,
    BITNET_ST_F16,
    BITNET_ST_BF16,
    BITNET_ST_I32,
    BITNET_ST_U32,
    BITNET_ST_F32,
    BITNET_ST_I64,
    BITNET_ST_U64,
    BITNET_ST_F64,
    BITNET_ST_N_DTYPES
} bitnet_st_dtype;

#define BITNET_ST_MAX_DIMS 8

const char *bitnet_st_dtype_name(int dtype); /* "BF16", ...; "unknown" otherwise */
size_t bitnet_st_dtype_size(int dtype);      /* bytes per element; 0 for an invalid dtype */

typedef struct bitnet_st_tensor {
    const char *name;          /* NUL-terminated, owned by the set */
    int dtype;                 /* enum bitnet_st_dtype */
    int n_dims;                /* 0 (a scalar) .. BITNET_ST_MAX_DIMS */
    int64_t shape[BITNET_ST_MAX_DIMS]; /* shape[0] slowest; unused entries 1 */
    uint64_t n_elements;       /* product of the shape (1 for a scalar) */
    const uint8_t *data;       /* inside the mapping (any alignment: read with memcpy) */
    size_t nbytes;             /* n_elements · dtype size */
    const char *path;          /* the file holding it */
} bitnet_st_tensor;

typedef struct bitnet_st_set bitnet_st_set;

/* Open `path`: a .safetensors file, or a directory holding model.safetensors.index.json (sharded;
 * preferred), else model.safetensors, else exactly the *.safetensors files in it (sorted by name).
 * Every file is validated completely before this returns. Errors: BITNET_ERR_IO (missing path, no
 * safetensors file in the directory — the message lists what was looked for —, open/mmap failure),
 * BITNET_ERR_FORMAT (malformed header or index, truncated file, bad ranges: names file and tensor),
 * BITNET_ERR_UNSUPPORTED (a dtype this reader does not know: names file, tensor and dtype),
 * BITNET_ERR_NOMEM. Cost: O(header bytes + n log n) per file; data pages are not touched. */
bitnet_status bitnet_st_open(const char *path, bitnet_st_set **out, bitnet_error *err);
void bitnet_st_close(bitnet_st_set *s); /* NULL is fine */

int64_t bitnet_st_n_files(const bitnet_st_set *s);
const char *bitnet_st_file(const bitnet_st_set *s, int64_t i); /* path of the i-th opened file */

/* Tensors of every file, sorted by name (strcmp). */
int64_t bitnet_st_n_tensors(const bitnet_st_set *s);
const bitnet_st_tensor *bitnet_st_tensor_at(const bitnet_st_set *s, int64_t i);
const bitnet_st_tensor *bitnet_st_find(const bitnet_st_set *s, const char *name); /* NULL if absent */

/* Elements [first, first + n) of a BF16, F16, F32 or F64 tensor (flat row-major index) as float32.
 * BF16 and F16 widen exactly; F64 rounds to nearest. BITNET_ERR_UNSUPPORTED naming the tensor and
 * dtype for any other dtype; BITNET_ERR_INVALID_ARG for a range outside the tensor. */
bitnet_status bitnet_st_read_f32(const bitnet_st_tensor *t, uint64_t first, uint64_t n, float *out,
                                 bitnet_error *err);

/* Tell the kernel the tensor's pages are no longer needed (madvise DONTNEED on the read-only mapping),
 * so converting a checkpoint larger than RAM keeps the resident set near one tensor. The data stays
 * readable (pages are read from the file again if touched). */
void bitnet_st_release(const bitnet_st_tensor *t);

/* Read and parse a whole JSON file (at most 512 MiB) with the strictness used for safetensors headers
 * (RFC 8259, UTF-8 checked, nothing but whitespace after the value). *out is a new json-c reference
 * (release with json_object_put). Errors: BITNET_ERR_IO naming the path, BITNET_ERR_FORMAT naming the
 * path and the byte offset of a syntax error or of a premature end. */
struct json_object;
bitnet_status bitnet_json_read_file(const char *path, struct json_object **out, bitnet_error *err);

#ifdef __cplusplus
}
#endif

#endif
