/* outfile.h — an output file that appears whole under its name or not at all: the bytes go to
 * "<path>.tmp", which is flushed, fsync'ed, closed and then renamed over path. Until the rename a file
 * already at path keeps its bytes; any failure (a full disk: ENOSPC; a file past RLIMIT_FSIZE: EFBIG;
 * EIO) closes and removes the temporary file. Used by the GGUF writer (gguf_write.c) and by the tools
 * that write other files (bitnet-logits --out). Hosted builds only (files, fsync, rename). */
#ifndef BITNET_OUTFILE_H
#define BITNET_OUTFILE_H

#include "base/common.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One output file. Zero-initialize it ({0}) before bitnet_outfile_open; every field is owned by it. */
typedef struct bitnet_outfile {
    FILE *f;    /* the open temporary file, NULL when none is open: write with bitnet_outfile_write, or
                 * with stdio (fprintf, ...), whose errors bitnet_outfile_finish then reports */
    char *path; /* the final name */
    char *tmp;  /* "<path>.tmp" while it exists and is ours to remove, else NULL */
} bitnet_outfile;

/* Create "<path>.tmp" (truncating a stale one) for writing. Errors: BITNET_ERR_IO
 * "PATH.tmp: cannot create: <strerror>" (nothing is created, o stays closed), BITNET_ERR_NOMEM,
 * BITNET_ERR_INVALID_ARG for NULL arguments or an o that is already open. */
bitnet_status bitnet_outfile_open(bitnet_outfile *o, const char *path, bitnet_error *err);

/* Append n bytes (through stdio's buffer). On failure: BITNET_ERR_IO "cannot write PATH: <strerror>"
 * naming the final path, and the file is aborted (bitnet_outfile_abort). A full buffer is written out
 * here, so the error of a full disk may come from this call or only from bitnet_outfile_finish. */
bitnet_status bitnet_outfile_write(bitnet_outfile *o, const void *p, size_t n, bitnet_error *err);

/* Flush, fsync and close the temporary file (it stays under "<path>.tmp" until bitnet_outfile_commit),
 * so that every byte is known to be on disk before any rename: a caller with several files finishes
 * all of them, then commits each. Reports a stdio error flagged on f meanwhile as well. On failure:
 * BITNET_ERR_IO "cannot write PATH: <strerror>" (EIO when stdio kept no errno), the file is aborted. */
bitnet_status bitnet_outfile_finish(bitnet_outfile *o, bitnet_error *err);

/* bitnet_outfile_finish when still open, then rename "<path>.tmp" to path; o is then empty (its
 * strings freed). On failure: BITNET_ERR_IO naming the file, the file is aborted. */
bitnet_status bitnet_outfile_commit(bitnet_outfile *o, bitnet_error *err);

/* Close and remove the temporary file if any, free the names; o is empty afterwards. Safe on an empty
 * (zeroed, committed or aborted) o and on NULL. */
void bitnet_outfile_abort(bitnet_outfile *o);

#ifdef __cplusplus
}
#endif

#endif
