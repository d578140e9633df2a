/* outfile.c — output files written through "<path>.tmp" and renamed into place (outfile.h). */
#include "base/outfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void bitnet_outfile_abort(bitnet_outfile *o) {
    if (!o) return;
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->path);
    o->f = NULL;
    o->tmp = NULL;
    o->path = NULL;
}

/* The error of a failed write to o (errno e, 0 = unknown: EIO), and the abort. */
static bitnet_status outfile_fail(bitnet_outfile *o, int e, bitnet_error *err) {
    const bitnet_status st =
        bitnet_fail(err, BITNET_ERR_IO, "cannot write %s: %s", o->path ? o->path : "?", strerror(e ? e : EIO));
    bitnet_outfile_abort(o);
    return st;
}

bitnet_status bitnet_outfile_open(bitnet_outfile *o, const char *path, bitnet_error *err) {
    if (!o || !path) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_outfile_open: NULL argument");
    if (o->f || o->tmp || o->path)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_outfile_open: %s: already open for %s", path, o->path);
    const size_t pl = strlen(path);
    o->path = bitnet_strndup(path, pl);
    char *tmp = (char *)malloc(pl + 5);
    if (!o->path || !tmp) {
        free(tmp);
        bitnet_outfile_abort(o);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    o->f = fopen(tmp, "wb");
    if (!o->f) {
        /* nothing was created: do not unlink a file someone else may own */
        const bitnet_status st = bitnet_fail(err, BITNET_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        bitnet_outfile_abort(o);
        return st;
    }
    o->tmp = tmp;
    return BITNET_OK;
}

bitnet_status bitnet_outfile_write(bitnet_outfile *o, const void *p, size_t n, bitnet_error *err) {
    if (!o || !o->f) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_outfile_write: no file open");
    if (n == 0) return BITNET_OK;
    errno = 0;
    if (fwrite(p, 1, n, o->f) != n) return outfile_fail(o, errno, err);
    return BITNET_OK;
}

bitnet_status bitnet_outfile_finish(bitnet_outfile *o, bitnet_error *err) {
    if (!o || !o->f) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_outfile_finish: no file open");
    FILE *f = o->f;
    o->f = NULL;
    const bool flagged = ferror(f) != 0; /* an earlier stdio write failed (its errno may be long gone) */
    int e = 0;
    errno = 0;
    if (fflush(f) != 0) e = errno ? errno : EIO;
    else if (flagged) e = EIO;
    /* EINVAL / ENOSYS: a file system without fsync; the bytes are written all the same */
    if (!e && fsync(fileno(f)) != 0 && errno != EINVAL && errno != ENOSYS) e = errno;
    if (fclose(f) != 0 && !e) e = errno ? errno : EIO;
    return e ? outfile_fail(o, e, err) : BITNET_OK;
}

bitnet_status bitnet_outfile_commit(bitnet_outfile *o, bitnet_error *err) {
    if (!o || !o->tmp) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_outfile_commit: no file written");
    bitnet_status st;
    if (o->f && (st = bitnet_outfile_finish(o, err)) != BITNET_OK) return st;
    if (rename(o->tmp, o->path) != 0) {
        st = bitnet_fail(err, BITNET_ERR_IO, "cannot write %s: renaming %s: %s", o->path, o->tmp, strerror(errno));
        bitnet_outfile_abort(o);
        return st;
    }
    free(o->tmp);
    free(o->path);
    o->tmp = NULL;
    o->path = NULL;
    return BITNET_OK;
}
