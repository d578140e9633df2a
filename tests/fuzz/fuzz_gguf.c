/* fuzz_gguf.c — libFuzzer target: the GGUF reader (base/gguf.h) on an in-memory image, then everything a
 * tool reads from the metadata: every key through every typed getter, string arrays by index, the
 * tensor table, the vocabulary (text/tokenizer.h: bitnet_vocab_load, a tokenize/detokenize round of a
 * fixed text) and the chat template family. Input: one selector byte, then the bytes of a GGUF file;
 * the selector's bit 0 set opens the image without the string-array index (BITNET_GGUF_NO_STRING_INDEX,
 * the bare-metal reader's way), clear with it (the hosted tools' way). The reader must refuse malformed
 * input with a status and a message, never read outside the image. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/gguf.h"
#include "text/chat.h"
#include "text/tokenizer.h"

/* The vocabulary of g, if it has one: tokenize a text with special tokens and detokenize the ids. */
static void exercise_vocab(const bitnet_gguf *g) {
    bitnet_error err = {{0}};
    bitnet_vocab *v = NULL;
    if (bitnet_vocab_load(g, &v, &err) != BITNET_OK) return;
    static const char text[] = "Hello world! <s> </s> <|eot_id|> \xE2\x96\x81x \xF0\x9F\x98\x80 \xFF 123";
    int32_t *ids = NULL;
    size_t n = 0;
    if (bitnet_tokenize(v, text, sizeof text - 1, true, true, &ids, &n, &err) == BITNET_OK) {
        char buf[512];
        bitnet_detokenize(v, ids, n, true, buf, sizeof buf);
        free(ids);
    }
    const int32_t n_tokens = bitnet_vocab_n_tokens(v);
    char piece[64];
    for (int32_t id = -1; id <= n_tokens && id < 300; id++) bitnet_token_to_piece(v, id, true, piece, sizeof piece);
    bitnet_chat_template t;
    bitnet_chat_template_init(&t, BITNET_CHAT_LLAMA3, v);
    bitnet_chat_missing_marker(&t, v);
    bitnet_vocab_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const unsigned flags = (data[0] & 1) ? BITNET_GGUF_NO_STRING_INDEX : 0;
    data++;
    size--;
    /* an exact-size private copy: ASan sees a read one past the image */
    uint8_t *img = (uint8_t *)malloc(size ? size : 1);
    if (!img) return 0;
    if (size) memcpy(img, data, size);
    bitnet_error err = {{0}};
    bitnet_gguf *g = NULL;
    if (bitnet_gguf_open_memory(img, size, "fuzz.gguf", flags, &g, &err) != BITNET_OK) {
        free(img);
        return 0;
    }
    (void)bitnet_gguf_version(g);
    (void)bitnet_gguf_alignment(g);
    (void)bitnet_gguf_data_offset(g);
    const int64_t n_kv = bitnet_gguf_n_kv(g);
    for (int64_t i = 0; i < n_kv; i++) {
        const char *key = bitnet_gguf_kv_key(g, i);
        (void)bitnet_gguf_type_name(bitnet_gguf_kv_type(g, i));
        if (bitnet_gguf_find_kv(g, key) < 0) abort(); /* a key the reader listed must be found */
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        double f64;
        float f32;
        bool b;
        const char *s;
        size_t len;
        bitnet_gguf_get_u32(g, key, &u32, &err);
        bitnet_gguf_get_i64(g, key, &i64, &err);
        bitnet_gguf_get_u64(g, key, &u64, &err);
        bitnet_gguf_get_f64(g, key, &f64, &err);
        bitnet_gguf_get_f32(g, key, &f32, &err);
        bitnet_gguf_get_bool(g, key, &b, &err);
        if (bitnet_gguf_get_str(g, key, &s, &len, &err) == BITNET_OK && len > 0) (void)(volatile char)s[len - 1];
        bitnet_gguf_type et;
        uint64_t n;
        const void *arr;
        if (bitnet_gguf_get_arr(g, key, &et, &n, &arr, &err) == BITNET_OK && n > 0) {
            const uint64_t probe[3] = {0, n / 2, n - 1};
            for (int k = 0; k < 3; k++) {
                if (bitnet_gguf_get_arr_str(g, key, probe[k], &s, &len, &err) == BITNET_OK && len > 0) {
                    (void)(volatile char)s[len - 1];
                }
                s = bitnet_gguf_kv_arr_str(g, i, probe[k], &len);
                if (s && len > 0) (void)(volatile char)s[len - 1];
            }
            if (bitnet_gguf_get_arr_str(g, key, n, &s, &len, &err) == BITNET_OK) abort(); /* one past the end */
        }
    }
    const int64_t n_t = bitnet_gguf_n_tensors(g);
    for (int64_t i = 0; i < n_t; i++) {
        const bitnet_gguf_tensor_info *t = bitnet_gguf_tensor(g, i);
        if (bitnet_gguf_find_tensor(g, t->name) == NULL) abort();
        /* the reader promised the data lies inside the image: touch its first and last byte */
        if (t->nbytes > 0) {
            (void)(volatile uint8_t)((const uint8_t *)t->data)[0];
            (void)(volatile uint8_t)((const uint8_t *)t->data)[t->nbytes - 1];
        }
    }
    exercise_vocab(g);
    bitnet_chat_family fam;
    bitnet_chat_family_from_gguf(g, &fam, &err);
    bitnet_gguf_close(g);
    free(img);
    return 0;
}
