/* replay.c — main() for the fuzz targets in the normal builds (gcc, the native and AddressSanitizer test
 * stages): runs LLVMFuzzerTestOneInput once on every file named on the command line (a directory: every
 * file in it, sorted by name), as libFuzzer does when given files. So the committed corpus and the
 * inputs of past findings (tests/fuzz/corpus/T, tests/fuzz/regressions/T) are checked by ctest on every
 * build, without clang.
 * Usage: fuzz_replay_T PATH...   Exit status: 0 when every input ran (a finding aborts the process),
 * 1 when a path cannot be read, 2 without arguments. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a target (libFuzzer calls it once before the first input when the target defines it). */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Runs one file; returns 0, or 1 when it cannot be read. */
static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            fprintf(stderr, "%s: out of memory\n", path);
            return 1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *nb = realloc(buf, cap *= 2);
        if (!nb) free(buf);
        buf = nb;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "%s: read error\n", path);
        return 1;
    }
    /* an exact-size copy, so that AddressSanitizer sees a read one past the input */
    uint8_t *in = malloc(n ? n : 1);
    if (!in) {
        free(buf);
        return 1;
    }
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    int status = 0, n_run = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            perror(argv[i]);
            status = 1;
            continue;
        }
        if (!S_ISDIR(sb.st_mode)) {
            status |= run_file(argv[i]);
            n_run++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            perror(argv[i]);
            status = 1;
            continue;
        }
        char **names = NULL;
        size_t n = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char **nn = realloc(names, (n + 1) * sizeof *nn);
            if (!nn) break;
            names = nn;
            names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2);
            if (!names[n]) break;
            sprintf(names[n], "%s/%s", argv[i], e->d_name);
            n++;
        }
        closedir(d);
        qsort(names, n, sizeof *names, by_name);
        for (size_t k = 0; k < n; k++) {
            status |= run_file(names[k]);
            n_run++;
            free(names[k]);
        }
        free(names);
    }
    printf("%s: %d inputs ran\n", argv[0], n_run);
    return status;
}
