/* arch.c — the table of GGUF architectures (arch.h): one row per general.architecture name. */
#include "base/arch.h"

#include <stdio.h>
#include <string.h>

/* New rows go at the end: the constants of bitnet_dummy_arch (convert/dummy_model.h) are row numbers
 * (test_model.cc Archs.DummyKeysAndTensorsPerArchitecture checks each one against its name). */
static const bitnet_arch_info k_archs[] = {
    /* bitnet.cpp's own files (bitnet_b1_58-large / 3B layout, converter "bitnet") */
    {"bitnet", BITNET_ARCH_BITNET, BITNET_ACT_SILU, BITNET_ROPE_NEOX, true, false, false, false, false, false},
    /* BitNet-b1.58-2B-4T: relu² FFN, sub-norms, GQA */
    {"bitnet-b1.58", BITNET_ARCH_BITNET_B158, BITNET_ACT_RELU2, BITNET_ROPE_NEOX, true, false, false, false, false, false},
    /* bitnet.cpp's older name of the same graph */
    {"bitnet-25", BITNET_ARCH_BITNET_B158, BITNET_ACT_RELU2, BITNET_ROPE_NEOX, true, false, false, false, false, false},
    /* ternary Llama 3 / Falcon3 / Falcon-E: no sub-norms, Q/K rows permuted by the converters */
    {"llama", BITNET_ARCH_LLAMA, BITNET_ACT_SILU, BITNET_ROPE_NORM, false, true, false, false, false, false},
    /* Qwen3 (BitNet-embedding-0.6B; plain Qwen3 files): QK head norms, per-projection norms if present */
    {"qwen3", BITNET_ARCH_QWEN3, BITNET_ACT_SILU, BITNET_ROPE_NEOX, false, false, true, false, false, true},
    /* Gemma3 text (BitNet-embedding-270M; plain Gemma3 files): GELU, QK head norms, post-norms, scaled
     * embeddings, sliding-window layers when the file says so */
    {"gemma3", BITNET_ARCH_GEMMA3, BITNET_ACT_GELU, BITNET_ROPE_NEOX, false, false, true, true, true, true},
};

size_t bitnet_arch_count(void) { return sizeof k_archs / sizeof k_archs[0]; }

const bitnet_arch_info *bitnet_arch_at(size_t i) { return i < bitnet_arch_count() ? &k_archs[i] : NULL; }

const bitnet_arch_info *bitnet_arch_find(const char *name, size_t len) {
    for (size_t i = 0; i < bitnet_arch_count(); i++) {
        if (strlen(k_archs[i].name) == len && memcmp(k_archs[i].name, name, len) == 0) return &k_archs[i];
    }
    return NULL;
}

int bitnet_arch_index(const char *name) {
    const bitnet_arch_info *a = bitnet_arch_find(name, strlen(name));
    return a ? (int)(a - k_archs) : -1;
}

const char *bitnet_arch_list(char *buf, size_t n, const char *quote, const char *sep, const char *last) {
    if (n == 0) return buf;
    buf[0] = '\0';
    size_t used = 0;
    const size_t count = bitnet_arch_count();
    for (size_t i = 0; i < count && used < n; i++) {
        const char *before = i == 0 ? "" : (i + 1 == count ? last : sep);
        int w = snprintf(buf + used, n - used, "%s%s%s%s", before, quote, k_archs[i].name, quote);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}
