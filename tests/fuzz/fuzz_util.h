/* fuzz_util.h — what the libFuzzer targets of tests/fuzz share: a private scratch directory for the
 * parsers that take a path (files are rewritten for every input; tmpfs /dev/shm when there is one), and
 * splitting one input into the several files a Hugging Face folder holds.
 *
 * The scratch directory is made in $BITNET_FUZZ_SCRATCH when set (run.sh sets it to a directory of its
 * own, which it removes at the end, since a process that dies on a finding never runs its atexit
 * handlers), else in /dev/shm, else in $TMPDIR or /tmp.
 *
 * Every target defines LLVMFuzzerTestOneInput (libFuzzer's entry point, https://llvm.org/docs/LibFuzzer.html)
 * and must return 0 for every input: a parser's error status is an expected outcome, only a sanitizer
 * report, a crash, a timeout or a leak is a finding. */
#ifndef BITNET_FUZZ_UTIL_H
#define BITNET_FUZZ_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The separator between the files of a multi-file input (fuzz_split): a line of five '=' characters. */
#define FUZZ_SEP "\n=====\n"

static char fuzz_dir_path[256];

static inline void fuzz_dir_remove(void) {
    if (!fuzz_dir_path[0]) return;
    DIR *d = opendir(fuzz_dir_path);
    if (d) {
        struct dirent *e;
        char p[512];
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", fuzz_dir_path, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(fuzz_dir_path);
}

/* The scratch directory of this process (made on first use, removed at exit). Aborts when it cannot be
 * made: a target without its directory would report every input as a parser error. */
static inline const char *fuzz_dir(void) {
    if (fuzz_dir_path[0]) return fuzz_dir_path;
    const char *base = getenv("BITNET_FUZZ_SCRATCH");
    if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/bitnet-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) {
        perror("fuzz_dir: mkdtemp");
        abort();
    }
    atexit(fuzz_dir_remove);
    return fuzz_dir_path;
}

/* Path of `name` in the scratch directory, written into buf (cap bytes); returns buf. */
static inline const char *fuzz_path(const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", fuzz_dir(), name);
    return buf;
}

/* Writes size bytes to the scratch file `name` (replacing it) and returns its path in buf. Aborts on an
 * I/O error (the harness, not the parser, failed). */
static inline const char *fuzz_write(const char *name, const void *data, size_t size, char *buf, size_t cap) {
    fuzz_path(name, buf, cap);
    const int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror(buf);
        abort();
    }
    const unsigned char *p = (const unsigned char *)data;
    while (size > 0) {
        const ssize_t n = write(fd, p, size);
        if (n <= 0) {
            perror(buf);
            abort();
        }
        p += n;
        size -= (size_t)n;
    }
    close(fd);
    return buf;
}

/* Removes the scratch file `name` if it exists. */
static inline void fuzz_unlink(const char *name) {
    char p[512];
    unlink(fuzz_path(name, p, sizeof p));
}

/* Splits data at FUZZ_SEP into at most max parts; part i is [start[i], start[i] + len[i]). Returns the
 * number of parts (at least 1; the last part takes the rest when there are more separators). */
static inline size_t fuzz_split(const uint8_t *data, size_t size, size_t max, const uint8_t **start, size_t *len) {
    const size_t sep = sizeof FUZZ_SEP - 1;
    size_t n = 0, at = 0;
    while (n + 1 < max) {
        const uint8_t *hit = NULL;
        for (size_t i = at; i + sep <= size; i++) {
            if (data[i] == '\n' && memcmp(data + i, FUZZ_SEP, sep) == 0) {
                hit = data + i;
                break;
            }
        }
        if (!hit) break;
        start[n] = data + at;
        len[n] = (size_t)(hit - (data + at));
        n++;
        at = (size_t)(hit - data) + sep;
    }
    start[n] = data + at;
    len[n] = size - at;
    return n + 1;
}

#endif
