/* fuzz_safetensors.c — libFuzzer target: the safetensors reader (convert/safetensors.h) on one file:
 * the 8-byte header length, the JSON header (dtypes, shapes, data_offsets, __metadata__), the ranges
 * against the file size; then every tensor is read through bitnet_st_read_f32 (first, middle and last
 * elements) as the converter reads them. Input: the bytes of a .safetensors file. */
#include <stdint.h>
#include <stdlib.h>

#include "convert/safetensors.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    fuzz_write("model.safetensors", data, size, path, sizeof path);
    bitnet_error err = {{0}};
    bitnet_st_set *s = NULL;
    if (bitnet_st_open(path, &s, &err) != BITNET_OK) return 0;
    const int64_t n = bitnet_st_n_tensors(s);
    for (int64_t i = 0; i < n; i++) {
        const bitnet_st_tensor *t = bitnet_st_tensor_at(s, i);
        if (bitnet_st_find(s, t->name) == NULL) abort(); /* every listed tensor is found by name */
        if (t->nbytes > 0) {
            (void)(volatile uint8_t)t->data[0];
            (void)(volatile uint8_t)t->data[t->nbytes - 1];
        }
        float v[4];
        const uint64_t ne = t->n_elements;
        const uint64_t first[3] = {0, ne / 2, ne > 4 ? ne - 4 : 0};
        for (int k = 0; k < 3; k++) {
            const uint64_t cnt = ne - first[k] < 4 ? ne - first[k] : 4;
            if (cnt > 0) bitnet_st_read_f32(t, first[k], cnt, v, &err);
        }
        bitnet_st_release(t);
    }
    bitnet_st_close(s);
    return 0;
}
