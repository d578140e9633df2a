/* common.c — error reporting helpers and the byte-string copy shared by every module. */
#include "base/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bitnet_status bitnet_fail(bitnet_error *err, bitnet_status status, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return status;
}

const char *bitnet_status_name(bitnet_status status) {
    switch (status) {
    case BITNET_OK: return "ok";
    case BITNET_ERR_IO: return "I/O error";
    case BITNET_ERR_FORMAT: return "format error";
    case BITNET_ERR_UNSUPPORTED: return "unsupported";
    case BITNET_ERR_NOMEM: return "out of memory";
    case BITNET_ERR_INVALID_ARG: return "invalid argument";
    }
    return "unknown status";
}

char *bitnet_strndup(const char *s, size_t n) {
    char *d = (char *)malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
