/* fuzz_hf_tokenizer.c — libFuzzer targets for the Hugging Face tokenizer import (convert/hf_tokenizer.h),
 * the path bitnet-convert and bitnet-vocab take, through to the runtime:
 *   bitnet_hf_vocab_load on a scratch model folder → bitnet_hf_vocab_pad → a vocabulary-only GGUF
 *   (bitnet_hf_vocab_write_vocab_only) → bitnet_gguf_open + bitnet_vocab_load → tokenize and detokenize
 *   a fixed text.
 * Built twice (tests/fuzz/CMakeLists.txt):
 *   hf_tokenizer_json   (FUZZ_HF_MODEL 0): input = tokenizer.json, then optionally tokenizer_config.json
 *                       and special_tokens_map.json, separated by FUZZ_SEP lines;
 *   hf_tokenizer_model  (FUZZ_HF_MODEL 1): input = tokenizer.model (SentencePiece protobuf), then
 *                       optionally tokenizer_config.json after a FUZZ_SEP line (a separator inside the
 *                       binary protobuf just cuts it short, which is one more malformed model).
 * A file the importer accepts must give a GGUF the importer's writer writes: a write failure other
 * than I/O aborts (the importer accepted something its own writer calls inconsistent). */
#include <stdint.h>
#include <stdlib.h>

#include "base/gguf.h"
#include "convert/hf_tokenizer.h"
#include "fuzz_util.h"
#include "text/tokenizer.h"

#ifndef FUZZ_HF_MODEL
#define FUZZ_HF_MODEL 0
#endif

/* Runs the runtime's vocabulary loader and tokenizer on the GGUF at path. */
static void runtime_side(const char *path) {
    bitnet_error err = {{0}};
    bitnet_gguf *g = NULL;
    if (bitnet_gguf_open(path, &g, &err) != BITNET_OK) abort(); /* our own writer's file must open */
    bitnet_vocab *v = NULL;
    if (bitnet_vocab_load(g, &v, &err) == BITNET_OK) {
        static const char text[] = "Hello, world! <|eot_id|> <s>\xC3\xA9 \xE2\x96\x81 12345 \xFF";
        int32_t *ids = NULL;
        size_t n = 0;
        if (bitnet_tokenize(v, text, sizeof text - 1, true, true, &ids, &n, &err) == BITNET_OK) {
            char buf[256];
            bitnet_detokenize(v, ids, n, false, buf, sizeof buf);
            free(ids);
        }
        bitnet_vocab_free(v);
    }
    bitnet_gguf_close(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[3];
    size_t len[3];
    char path[512];
#if FUZZ_HF_MODEL
    static const char *const names[3] = {"tokenizer.model", "tokenizer_config.json", NULL};
    const size_t n_parts = fuzz_split(data, size, 2, part, len);
#else
    static const char *const names[3] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"};
    const size_t n_parts = fuzz_split(data, size, 3, part, len);
#endif
    for (size_t i = 0; i < 3 && names[i]; i++) {
        if (i < n_parts) fuzz_write(names[i], part[i], len[i], path, sizeof path);
        else fuzz_unlink(names[i]);
    }
    bitnet_error err = {{0}};
    bitnet_hf_vocab *v = NULL;
    if (bitnet_hf_vocab_load(fuzz_dir(), &v, &err) != BITNET_OK) return 0;
    if (v->n_tokens <= 0) abort();
    /* config.json's vocab_size may exceed the tokenizer's ids (padding) */
    if (bitnet_hf_vocab_pad(v, (int64_t)v->n_tokens + 3, &err) != BITNET_OK) abort();
    fuzz_path("vocab.gguf", path, sizeof path);
    const bitnet_status st = bitnet_hf_vocab_write_vocab_only(v, "llama", "fuzz", path, &err);
    bitnet_hf_vocab_free(v);
    if (st == BITNET_OK) runtime_side(path);
    else if (st != BITNET_ERR_IO && st != BITNET_ERR_NOMEM) abort();
    return 0;
}
