/* fuzz_model.c — libFuzzer target: bitnet_model_load (model/model.h), the entry point llama-cli and
 * llama-bench use, on a GGUF file: architecture and hyperparameter keys, every tensor's name, shape and
 * type against the graph, tile records, the repack of ternary weights to the CPU's path. Input: the bytes
 * of a GGUF file (the seeds are small dummy models of every architecture and layout). The model is loaded
 * on the path the input's last byte picks (AUTO, I2_S, STORED), so each loader branch is reached.
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
    char path[512];
    fuzz_write("model.gguf", data, size, path, sizeof path);
    bitnet_model_params mp;
    memset(&mp, 0, sizeof mp);
    static const bitnet_kernel_path paths[3] = {BITNET_PATH_AUTO, BITNET_PATH_I2S, BITNET_PATH_STORED};
    mp.path = paths[size ? data[size - 1] % 3 : 0];
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
