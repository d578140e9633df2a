/* text_file.c — bitnet_tool_read_text (text_file.h). */
#include "tools/common/text_file.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *bitnet_tool_read_text(const char *tool, const char *what, const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: error: cannot open %s '%s': %s\n", tool, what, path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int read_errno = 0;
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        const size_t r = fread(buf + n, 1, cap - 1 - n, f);
        n += r;
        if (r == 0) {
            if (ferror(f)) read_errno = errno ? errno : EIO;
            break;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: error: out of memory reading '%s'\n", tool, path);
        return NULL;
    }
    if (read_errno) {
        fprintf(stderr, "%s: error: cannot read %s '%s': %s\n", tool, what, path, strerror(read_errno));
        free(buf);
        return NULL;
    }
    if (n > 0 && buf[n - 1] == '\n') n--;
    buf[n] = '\0';
    *len = n;
    return buf;
}
