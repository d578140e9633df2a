/* fuzz_model.c — libFuzzer target: bitnet_model_load (model/model.h), the entry point llama-cli and
 * llama-bench use, on a GGUF file: architecture and hyperparameter keys, every tensor's name, shape and
 * type against the graph, tile records, the repack of ternary weights to a kernel path. Input: one
 * selector byte, then the bytes of a GGUF file (the seeds are small dummy models of every architecture,
 * I2_S and TL1, and I2_S in bitnet.cpp's ARM and 4-row layouts). The selector modulo 5 picks the path: AUTO
 * (TL2 on x86-64, which refuses the seeds' K = 64: its legal tiles need K >= 256), I2_S, TL1, TL2 or STORED,
 * so each loader branch is reached; selector / 5 modulo 4 the I2_S layout asked for (AUTO, X86, ARM64,
 * ROWS4: model.h's i2s_layout, so the rewrite of I2_S weights runs on mutated bytes).
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
    mp.i2s_layout = data[0] / 5 % 4;
    char path[512];
    fuzz_write("model.gguf", data + 1, size - 1, path, sizeof path);
    bitnet_error err = {{0}};
    bitnet_model *m = NULL;
    if (bitnet_model_load(path, &mp, &m, &err) == BITNET_OK) {
        const bitnet_hparams *hp = bitnet_model_hparams(m);
        if (hp->n_layer <= 0 || hp->n_embd <= 0) abort(); /* a loaded model has a graph */
        if (!bitnet_model_kernel_summary(m)) abort();
        /* a model with I2_S weights read them in a layout and says which; a model without says nothing */
        const int layout = bitnet_model_i2s_layout(m);
        if ((layout == BITNET_I2S_LAYOUT_AUTO) != (bitnet_model_i2s_note(m)[0] == '\0')) abort();
        if (mp.i2s_layout != BITNET_I2S_LAYOUT_AUTO && layout != BITNET_I2S_LAYOUT_AUTO && layout != mp.i2s_layout)
            abort();
        bitnet_model_free(m);
    }
    return 0;
}
