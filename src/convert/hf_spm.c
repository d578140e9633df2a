/* hf_spm.c — tokenizer.model, the SentencePiece ModelProto of a Hugging Face folder → bitnet_hf_vocab
 * (GGUF model "llama": the file's pieces, scores and types), and tokenizer_config.json's
 * added_tokens_decoder for such a vocabulary.
 *
 * Facts this file relies on (restated; the code is our own):
 *  - tokenizer.model is a protobuf ModelProto (sentencepiece_model.proto): field 1 repeated SentencePiece
 *    {1 piece: string, 2 score: float, 3 type: enum NORMAL=1 UNKNOWN=2 CONTROL=3 USER_DEFINED=4 UNUSED=5
 *    BYTE=6}, field 2 TrainerSpec {3 model_type: UNIGRAM=1 BPE=2 WORD=3 CHAR=4, 40 unk_id, 41 bos_id,
 *    42 eos_id, 43 pad_id}, field 3 NormalizerSpec {3 add_dummy_prefix (default true)}. Wire format
 *    (https://protobuf.dev/programming-guides/encoding/): key = varint (field << 3 | wire type), wire types
 *    0 varint, 1 fixed64, 2 length-delimited, 5 fixed32; int32 -1 is a 10-byte varint.
 */
#include "convert/hf_tokenizer_internal.h"

#include "text/tokenizer.h"

#include <errno.h>
#include <stdio.h>

typedef struct pb {
    const unsigned char *p, *end, *base;
    const char *path;
    bitnet_error *err;
    bool bad;
} pb;

static bool pb_fail(pb *r, const char *what) {
    if (!r->bad) {
        bitnet_fail(r->err, BITNET_ERR_FORMAT, "%s: malformed protobuf at byte %zu: %s", r->path, (size_t)(r->p - r->base),
                    what);
    }
    r->bad = true;
    return false;
}

static bool pb_varint(pb *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return pb_fail(r, "varint runs past the end");
        const unsigned char b = *r->p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return pb_fail(r, "varint longer than 10 bytes");
}

/* Read a field key; false at the end of the message or on error. */
static bool pb_key(pb *r, uint32_t *field, uint32_t *wire) {
    if (r->bad || r->p >= r->end) return false;
    uint64_t k;
    if (!pb_varint(r, &k)) return false;
    *field = (uint32_t)(k >> 3);
    *wire = (uint32_t)(k & 7);
    if (*field == 0) return pb_fail(r, "field number 0");
    return true;
}

static bool pb_bytes(pb *r, const unsigned char **data, size_t *len) {
    uint64_t n;
    if (!pb_varint(r, &n)) return false;
    if (n > (uint64_t)(r->end - r->p)) return pb_fail(r, "length-delimited field runs past the end");
    *data = r->p;
    *len = (size_t)n;
    r->p += n;
    return true;
}

static bool pb_skip(pb *r, uint32_t wire) {
    uint64_t v;
    const unsigned char *d;
    size_t n;
    switch (wire) {
    case 0: return pb_varint(r, &v);
    case 1:
        if (r->end - r->p < 8) return pb_fail(r, "fixed64 runs past the end");
        r->p += 8;
        return true;
    case 2: return pb_bytes(r, &d, &n);
    case 5:
        if (r->end - r->p < 4) return pb_fail(r, "fixed32 runs past the end");
        r->p += 4;
        return true;
    default: return pb_fail(r, "unknown wire type (groups are not used by sentencepiece_model.proto)");
    }
}

static pb pb_sub(const pb *parent, const unsigned char *d, size_t n) {
    pb s = *parent;
    s.p = d;
    s.end = d + n;
    return s;
}

/* Pass 1 over a ModelProto: count the pieces (field 1) and read the TrainerSpec (field 2: model_type,
 * unk/bos/eos/pad ids) and NormalizerSpec (field 3: add_dummy_prefix) fields. Errors set r->bad. */
static void read_specs(pb *r, int64_t *n_pieces, int64_t *model_type, int64_t *unk, int64_t *bos, int64_t *eos,
                       int64_t *pad, int *add_dummy_prefix) {
    uint32_t f, w;
    while (pb_key(r, &f, &w)) {
        const unsigned char *d;
        size_t n;
        if (f == 1 && w == 2) {
            if (!pb_bytes(r, &d, &n)) break;
            (*n_pieces)++;
        } else if ((f == 2 || f == 3) && w == 2) {
            if (!pb_bytes(r, &d, &n)) break;
            pb s = pb_sub(r, d, n);
            uint32_t sf, sw;
            while (pb_key(&s, &sf, &sw)) {
                uint64_t x;
                if (sw != 0) {
                    if (!pb_skip(&s, sw)) break;
                    continue;
                }
                if (!pb_varint(&s, &x)) break;
                const int64_t sx = (int64_t)(int32_t)(uint32_t)x; /* int32 fields: -1 is sign-extended */
                if (f == 2 && sf == 3) *model_type = sx;
                else if (f == 2 && sf == 40) *unk = sx;
                else if (f == 2 && sf == 41) *bos = sx;
                else if (f == 2 && sf == 42) *eos = sx;
                else if (f == 2 && sf == 43) *pad = sx;
                else if (f == 3 && sf == 3) *add_dummy_prefix = x != 0;
            }
            if (s.bad) r->bad = true;
        } else if (!pb_skip(r, w)) {
            break;
        }
    }
}

/* Pass 2: each SentencePiece (field 1: piece, score, type) into v's tokens, scores and types (v has one
 * entry per piece). A malformed encoding sets r->bad (the status is then BITNET_ERR_FORMAT). */
static bitnet_status read_pieces(pb *r, const char *path, bitnet_hf_vocab *v, bitnet_error *err) {
    r->p = r->base;
    int32_t i = 0;
    uint32_t f, w;
    while (pb_key(r, &f, &w)) {
        const unsigned char *d;
        size_t n;
        if (!(f == 1 && w == 2)) {
            if (!pb_skip(r, w)) break;
            continue;
        }
        if (!pb_bytes(r, &d, &n)) break;
        pb s = pb_sub(r, d, n);
        const unsigned char *text = NULL;
        size_t tl = 0;
        float score = 0.0f;
        uint64_t type = 1;
        uint32_t sf, sw;
        while (pb_key(&s, &sf, &sw)) {
            if (sf == 1 && sw == 2) {
                if (!pb_bytes(&s, &text, &tl)) break;
            } else if (sf == 2 && sw == 5) {
                if (s.end - s.p < 4) {
                    pb_fail(&s, "fixed32 runs past the end");
                    break;
                }
                uint32_t bits = (uint32_t)s.p[0] | (uint32_t)s.p[1] << 8 | (uint32_t)s.p[2] << 16 | (uint32_t)s.p[3] << 24;
                memcpy(&score, &bits, 4);
                s.p += 4;
            } else if (sf == 3 && sw == 0) {
                if (!pb_varint(&s, &type)) break;
            } else if (!pb_skip(&s, sw)) {
                break;
            }
        }
        if (s.bad) {
            r->bad = true;
            break;
        }
        if (!text || tl == 0 || memchr(text, 0, tl)) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: piece %d has no text, an empty text or a NUL byte", path, (int)i);
        }
        if (type < 1 || type > 6) {
            /* the piece's text lies in the file buffer, not NUL-terminated: at most its own tl bytes */
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: piece %d \"%.*s\" has type %llu (expected 1..6)", path, (int)i,
                               (int)(tl < 40 ? tl : 40), (const char *)text, (unsigned long long)type);
        }
        if (!(v->tokens[i] = bitnet_strndup((const char *)text, tl))) return oom(err);
        v->scores[i] = score;
        v->token_types[i] = (int32_t)type; /* SentencePiece's enum values are GGUF's token types */
        i++;
    }
    return r->bad ? BITNET_ERR_FORMAT : BITNET_OK;
}

bitnet_status bitnet_hf_load_tokenizer_model(const char *path, bitnet_hf_vocab *v, bitnet_error *err) {
    char *data;
    size_t size;
    bitnet_status st = bitnet_hf_read_file(path, &data, &size, err);
    if (st != BITNET_OK) return st;
    pb r = {(const unsigned char *)data, (const unsigned char *)data + size, (const unsigned char *)data, path, err, false};
    /* pass 1: count pieces, read trainer and normalizer specs */
    int64_t n_pieces = 0;
    int64_t model_type = 1, unk = 0, bos = 1, eos = 2, pad = -1; /* proto defaults */
    int add_dummy_prefix = 1;
    read_specs(&r, &n_pieces, &model_type, &unk, &bos, &eos, &pad, &add_dummy_prefix);
    if (r.bad) {
        free(data);
        return BITNET_ERR_FORMAT;
    }
    if (n_pieces == 0 || n_pieces > INT32_MAX - 2) {
        free(data);
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: %lld pieces (not a SentencePiece model?)", path, (long long)n_pieces);
    }
    if (model_type != 2) {
        free(data);
        static const char *const names[] = {"?", "UNIGRAM", "BPE", "WORD", "CHAR"};
        return bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                           "%s: SentencePiece model_type %s (%lld) is not supported (supported: BPE, as Llama's)", path,
                           model_type >= 0 && model_type <= 4 ? names[model_type] : "?", (long long)model_type);
    }
    if ((st = bitnet_hf_vocab_alloc(v, (int32_t)n_pieces, true, err)) != BITNET_OK) {
        free(data);
        return st;
    }
    /* pass 2: the pieces */
    st = read_pieces(&r, path, v, err);
    free(data);
    if (st != BITNET_OK) return st;
    strcpy(v->model, "llama");
    strcpy(v->pre, "default");
    snprintf(v->source, sizeof v->source, "tokenizer.model");
    v->add_space_prefix = add_dummy_prefix;
    const int64_t ids[4] = {unk, bos, eos, pad};
    int32_t *dst[4] = {&v->unk_id, &v->bos_id, &v->eos_id, &v->pad_id};
    static const char *const names[4] = {"unk_id", "bos_id", "eos_id", "pad_id"};
    for (int k = 0; k < 4; k++) {
        if (ids[k] < -1 || ids[k] >= v->n_tokens) {
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: trainer_spec.%s = %lld is not a piece id (%d pieces)", path,
                               names[k], (long long)ids[k], (int)v->n_tokens);
        }
        *dst[k] = (int32_t)ids[k];
    }
    return BITNET_OK;
}

/* tokenizer_config.json's added_tokens_decoder for a tokenizer.model vocabulary: type (and, for ids
 * beyond the pieces, the text) of each added token. */
bitnet_status bitnet_hf_apply_added_decoder(bitnet_hf_vocab *v, const char *dir, json_object *config, bitnet_error *err) {
    json_object *dec = get(config, "added_tokens_decoder");
    if (!dec || !json_object_is_type(dec, json_type_object)) return BITNET_OK;
    int64_t max_id = v->n_tokens - 1;
    json_object_object_foreach(dec, key, val) {
        char *end;
        errno = 0;
        const long long id = strtoll(key, &end, 10);
        if (errno || *end || id < 0 || id >= BITNET_HF_MAX_VOCAB || !get_str(val, "content")) {
            return bitnet_fail(err, BITNET_ERR_FORMAT,
                               "%s/tokenizer_config.json: added_tokens_decoder entry \"%.20s\" is not an id (0 to %lld) "
                               "with a content", dir, key, (long long)BITNET_HF_MAX_VOCAB - 1);
        }
        if (id > max_id) max_id = id;
    }
    if (max_id >= v->n_tokens) {
        bitnet_status st = bitnet_hf_vocab_pad(v, max_id + 1, err);
        if (st != BITNET_OK) return st;
    }
    json_object_object_foreach(dec, key2, val2) {
        const int32_t id = (int32_t)strtoll(key2, NULL, 10);
        const char *content = get_str(val2, "content");
        if (strcmp(v->tokens[id], content) != 0) {
            char *t = bitnet_strndup(content, strlen(content));
            if (!t) return oom(err);
            free(v->tokens[id]);
            v->tokens[id] = t;
        }
        if (v->token_types[id] == BITNET_TOKEN_BYTE || v->token_types[id] == BITNET_TOKEN_UNKNOWN) continue;
        v->token_types[id] = get_bool(val2, "special") == 1 ? BITNET_TOKEN_CONTROL : BITNET_TOKEN_USER_DEFINED;
    }
    return BITNET_OK;
}
