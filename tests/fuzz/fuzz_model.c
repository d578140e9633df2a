/* fuzz_model.c — libFuzzer target: bitnet_model_load (model/model.h), the entry point llama-cli and
 * llama-bench use, on a GGUF file: architecture and hyperparameter keys, every tensor's name, shape and
 * type against the graph, tile records, the repack of ternary weights to a kernel path. Input: one
 * selector byte, then the bytes of a GGUF file (the seeds are small dummy models of every architecture,
 * I2_S and TL1). The selector modulo 5 picks the path: AUTO (TL2 on x86-64, which refuses the seeds'
 * K = 64: its legal tiles need K >= 256), I2_S, TL1, TL2 or STORED, so each loader branch is reached.
 * BITNET_KERNEL_CACHE is set to "off" (no cache file is written) and no context is made. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "model/model.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("BITNET_KERNEL_CACHE", "off", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const bitnet_kernel_path paths[5] = {BITNET_PATH_AUTO, BITNET_PATH_I2S, BITNET_PATH_TL1, BITNET_PATH_TL2,
                                                BITNET_PATH_STORED};
    bitnet_model_params mp;
    memset(&mp, 0, sizeof mp);
    mp.path = paths[data[0] % 5];
    char path[512];
    fuzz_write("model.gguf", data + 1, size - 1, path, sizeof path);
    bitnet_error err = {{0}};
    bitnet_model *m = NULL;
    if (bitnet_model_load(path, &mp, &m, &err) == BITNET_OK) {
        const bitnet_hparams *hp = bitnet_model_hparams(m);
        if (hp->n_layer <= 0 || hp->n_embd <= 0) abort(); /* a loaded model has a graph */
        if (!bitnet_model_kernel_summary(m)) abort();
        bitnet_model_free(m);
    }
    return 0;
}
