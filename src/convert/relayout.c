/* relayout.c — bitnet_relayout_gguf (relayout.h): a GGUF file copied key by key and tensor by tensor
 * through the streaming writer, its I2_S tensors rewritten into the X86 layout by bitnet_i2s_relayout. */
#include "convert/relayout.h"

#include "base/gguf.h"
#include "base/types.h"
#include "kernels/lut/pack.h"

#include <stdlib.h>
#include <string.h>

bitnet_status bitnet_relayout_gguf(const char *in, const char *out, int layout, bitnet_relayout_summary *summary,
                                   bitnet_error *err) {
    if (!in || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "relayout: input and output paths are required");
    if (layout != BITNET_I2S_LAYOUT_X86 && layout != BITNET_I2S_LAYOUT_ARM64 && layout != BITNET_I2S_LAYOUT_ROWS4)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "relayout: layout %d is not x86, arm64 or rows4", layout);
    bitnet_relayout_summary sum = {0, 0, 0, -1};
    bitnet_gguf *g = NULL;
    bitnet_status st = bitnet_gguf_open(in, &g, err);
    if (st != BITNET_OK) return st;
    bitnet_gguf_writer *w = NULL;
    uint8_t *buf = NULL;
    if ((st = bitnet_gguf_i2s_layout(g, &sum.recorded, NULL, err)) != BITNET_OK) goto done;
    if (sum.recorded > 0 && sum.recorded != layout) {
        st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: the file records I2_S layout %s (key '%s'), not %s: %s", in,
                         bitnet_i2s_layout_name(sum.recorded), BITNET_I2S_LAYOUT_KEY, bitnet_i2s_layout_name(layout),
                         sum.recorded == BITNET_I2S_LAYOUT_X86 ? "it needs no rewrite"
                                                               : "its bytes follow the record (--relayout with that layout)");
        goto done;
    }

    /* every I2_S tensor checked before anything is written; the largest one sizes the buffer */
    size_t largest = 0;
    sum.n_tensors = bitnet_gguf_n_tensors(g);
    for (int64_t i = 0; i < sum.n_tensors; i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        if (ti->type != BITNET_TYPE_I2_S) continue;
        if (ti->n_dims != 2) { /* the layouts are defined for a weight's rows and columns */
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s' is an I2_S tensor of %d dimensions, not a 2-D weight",
                             in, ti->name, ti->n_dims);
            goto done;
        }
        bitnet_error sub;
        if (bitnet_i2s_layout_check(layout, ti->ne[1], ti->ne[0], &sub) != BITNET_OK) {
            st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': %s", in, ti->name, sub.msg);
            goto done;
        }
        sum.n_i2s++;
        sum.i2s_bytes += ti->nbytes;
        if (ti->nbytes > largest) largest = ti->nbytes;
    }
    if (sum.n_i2s == 0) {
        st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s has no I2_S tensor: there is nothing to rewrite", in);
        goto done;
    }

    w = bitnet_gguf_writer_new();
    buf = (uint8_t *)malloc(largest);
    if (!w || !buf) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory (%llu bytes)", in, (unsigned long long)largest);
        goto done;
    }
    for (int64_t i = 0; i < bitnet_gguf_n_kv(g); i++) {
        const char *key = bitnet_gguf_kv_key(g, i);
        if (strcmp(key, "general.alignment") == 0 || strcmp(key, BITNET_I2S_LAYOUT_KEY) == 0 ||
            strcmp(key, BITNET_I2S_REWRITTEN_FROM_KEY) == 0)
            continue;
        bitnet_gguf_copy_kv(w, g, i); /* a failure is reported by write_begin */
    }
    bitnet_gguf_set_str(w, BITNET_I2S_LAYOUT_KEY, "x86");
    if (sum.recorded < 0) /* the input's layout came from the caller alone: say so in the output */
        bitnet_gguf_set_str(w, BITNET_I2S_REWRITTEN_FROM_KEY, bitnet_i2s_layout_name(layout));
    for (int64_t i = 0; i < sum.n_tensors; i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        if ((st = bitnet_gguf_add_tensor(w, ti->name, ti->type, ti->n_dims, ti->ne, err)) != BITNET_OK) goto done;
    }
    if ((st = bitnet_gguf_write_begin(w, out, err)) != BITNET_OK) goto done;
    for (int64_t i = 0; i < sum.n_tensors; i++) {
        const bitnet_gguf_tensor_info *ti = bitnet_gguf_tensor(g, i);
        const void *data = ti->data;
        if (ti->type == BITNET_TYPE_I2_S) {
            bitnet_error sub;
            if (bitnet_i2s_relayout(layout, (const uint8_t *)ti->data, ti->ne[1], ti->ne[0], buf, &sub) != BITNET_OK) {
                st = bitnet_fail(err, BITNET_ERR_FORMAT, "%s: tensor '%s': %s", in, ti->name, sub.msg);
                goto done;
            }
            data = buf;
        }
        if ((st = bitnet_gguf_write_data(w, data, ti->nbytes, err)) != BITNET_OK) goto done;
        bitnet_gguf_release(g, ti->data, ti->nbytes); /* memory stays about one tensor, whatever the file's size */
    }
    st = bitnet_gguf_write_end(w, err);

done:
    bitnet_gguf_writer_free(w); /* removes "<out>.tmp" unless write_end renamed it */
    free(buf);
    bitnet_gguf_close(g);
    if (st == BITNET_OK && summary) *summary = sum;
    return st;
}
