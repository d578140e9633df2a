/* relayout.h — a GGUF file's I2_S weights rewritten once from one of bitnet.cpp's other byte layouts into
 * the X86 layout (bitnet-convert --relayout). bitnet.cpp's files do not record which of its three I2_S
 * layouts they hold (bitnet_i2s_layout, base/common.h; LAYOUTS.md §2); the runtime reads ARM64 and ROWS4
 * weights by rewriting them at every load (bitnet_model_params.i2s_layout), a file rewritten here is read
 * as stored, in place (the microcontroller node, the I2_S path) and without the extra copy. */
#ifndef BITNET_RELAYOUT_H
#define BITNET_RELAYOUT_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What bitnet_relayout_gguf wrote. */
typedef struct bitnet_relayout_summary {
    int64_t n_tensors;   /* every tensor of the file, copied */
    int64_t n_i2s;       /* of them I2_S, rewritten */
    uint64_t i2s_bytes;  /* bytes of those I2_S tensors */
    int recorded;        /* the input's record (bitnet_i2s_layout), or -1 when it had none */
} bitnet_relayout_summary;

/* Copy the GGUF file `in` to `out` with every I2_S tensor, stored in `layout` (BITNET_I2S_LAYOUT_X86,
 * _ARM64 or _ROWS4), rewritten into the X86 layout (bitnet_i2s_relayout: the same codes and scale, the 28
 * bytes after the scale zeroed) and the record BITNET_I2S_LAYOUT_KEY = "x86" set. When `in` records no
 * layout, `layout` is what the caller says of it, which the bytes cannot confirm: the output then also
 * records it as BITNET_I2S_REWRITTEN_FROM_KEY, which the load summary shows. Every other key (but
 * general.alignment: the output is 32-aligned) and every other tensor are copied as they are, in file
 * order. `out` is written through "<out>.tmp" and renamed at the end (it may be `in`), so a failure leaves
 * no output; memory is one I2_S tensor, and the input's pages are released as they are written. `summary`
 * may be NULL.
 * Errors (naming the file, and the tensor or key): a layout other than those three
 * (BITNET_ERR_INVALID_ARG); an input whose record says another layout (BITNET_ERR_UNSUPPORTED naming both)
 * or holds an unknown one (BITNET_ERR_FORMAT); an input without I2_S tensors, or with one that is not 2-D
 * (BITNET_ERR_UNSUPPORTED); an I2_S tensor that `layout` cannot hold (bitnet_i2s_layout_check) or with a
 * code 3 or a non-finite scale (BITNET_ERR_FORMAT); the reader's and the writer's errors. */
bitnet_status bitnet_relayout_gguf(const char *in, const char *out, int layout, bitnet_relayout_summary *summary,
                                   bitnet_error *err);

#ifdef __cplusplus
}
#endif

#endif
