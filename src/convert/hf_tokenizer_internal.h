/* hf_tokenizer_internal.h — what the readers of Hugging Face tokenizer files share, private to
 * src/convert: hf_tokenizer.c (tokenizer.json, tokenizer_config.json, the entry points) and hf_spm.c
 * (tokenizer.model, the SentencePiece protobuf): small JSON and memory helpers, the whole-file reader,
 * the vocabulary allocation, and hf_spm.c's entry points. */
#ifndef BITNET_HF_TOKENIZER_INTERNAL_H
#define BITNET_HF_TOKENIZER_INTERNAL_H

#include "convert/hf_tokenizer.h"

#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

/* The largest vocabulary the importer builds: ids from 0 to BITNET_HF_MAX_VOCAB - 1 (2^21; the largest
 * real vocabularies have about 2^18 entries). A file naming a larger id is refused: padding the holes up to
 * it would take memory and time without bound (an id of 2^30 in a 1 KB file asked for 7.5 GB). */
#define BITNET_HF_MAX_VOCAB ((int64_t)1 << 21)

static inline bitnet_status oom(bitnet_error *err) { return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory reading the tokenizer"); }


static inline json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    if (o && json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v)) return v;
    return NULL;
}

static inline const char *get_str(json_object *o, const char *key) {
    json_object *v = get(o, key);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* Boolean field: 1 / 0, or -1 when absent or not a boolean. */
static inline int get_bool(json_object *o, const char *key) {
    json_object *v = get(o, key);
    if (!v || !json_object_is_type(v, json_type_boolean)) return -1;
    return json_object_get_boolean(v) ? 1 : 0;
}

/* Whole file into a NUL-terminated buffer (*data malloc'ed, *size bytes without the NUL). */
bitnet_status bitnet_hf_read_file(const char *path, char **data, size_t *size, bitnet_error *err);

/* Allocate n_tokens entries (texts NULL, types 0, scores 0 when with_scores). */
bitnet_status bitnet_hf_vocab_alloc(bitnet_hf_vocab *v, int32_t n, bool with_scores, bitnet_error *err);

/* tokenizer.model (SentencePiece ModelProto, BPE model type) → v (fresh from vocab_new): pieces, scores,
 * types, unk/bos/eos/pad ids, add_space_prefix (hf_spm.c). */
bitnet_status bitnet_hf_load_tokenizer_model(const char *path, bitnet_hf_vocab *v, bitnet_error *err);

/* tokenizer_config.json's added_tokens_decoder for a tokenizer.model vocabulary: type (and, for ids
 * beyond the pieces, the text) of each added token. */
bitnet_status bitnet_hf_apply_added_decoder(bitnet_hf_vocab *v, const char *dir, json_object *config, bitnet_error *err);

#endif
