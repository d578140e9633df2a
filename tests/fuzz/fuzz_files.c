/* fuzz_files.c — libFuzzer targets for the small configuration files the tools read, one target per
 * parser (FUZZ_FILE picks it; tests/fuzz/CMakeLists.txt builds each):
 *   hf_config     config.json of a Hugging Face folder (convert/hf_convert.h: bitnet_hf_config_load);
 *   tile_file     --lut-tiles FILE (tilefile/tile_file.h: bitnet_tile_file_parse): byte 0 picks the format
 *                 (told from the text, kernel_config.ini, YAML), byte 1 the table name (none, "default",
 *                 "pretuned"), the rest is the text. Checked: every entry has positive M, K and tiles,
 *                 and bitnet_tile_file_find finds an entry for each (type, M, K) listed;
 *   board         a microcontroller board file (mcu/plan.h: bitnet_plan_board_load, YAML);
 *   cluster_plan  a --plan file (cluster/plan.h: bitnet_cluster_plan_load, YAML), then the rank check
 *                 for 1..9 ranks;
 *   kchoice_cache the kernel-choice cache (runtime/kchoice.h): the input is the file; a lookup of a fixed
 *                 key, then a record put and looked up again, which must give the value just put.
 * The input is the file's bytes unless said otherwise. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"

#if FUZZ_FILE == 1
#include "convert/hf_convert.h"
#elif FUZZ_FILE == 2
#include "tilefile/tile_file.h"
#elif FUZZ_FILE == 3
#include "mcu/plan.h"
#elif FUZZ_FILE == 4
#include "cluster/plan.h"
#elif FUZZ_FILE == 5
#include "runtime/kchoice.h"
#else
#error "FUZZ_FILE must be 1..5"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[512];
    (void)path;
    bitnet_error err = {{0}};
    (void)err;
#if FUZZ_FILE == 1
    fuzz_write("config.json", data, size, path, sizeof path);
    bitnet_hf_config cfg;
    bitnet_hf_config_load(fuzz_dir(), &cfg, &err);
#elif FUZZ_FILE == 2
    if (size < 2) return 0;
    static const bitnet_tile_file_format formats[3] = {(bitnet_tile_file_format)0, BITNET_TILE_FILE_INI,
                                                       BITNET_TILE_FILE_YAML};
    static const char *const tables[3] = {NULL, "default", "pretuned"};
    bitnet_tile_file *f = NULL;
    if (bitnet_tile_file_parse((const char *)data + 2, size - 2, "fuzz-tiles", formats[data[0] % 3], tables[data[1] % 3],
                               &f, &err) != BITNET_OK) {
        if (f) abort(); /* *out is NULL on error */
        return 0;
    }
    for (size_t i = 0; i < f->n_entries; i++) {
        const bitnet_tile_entry *e = &f->entries[i];
        if (e->M <= 0 || e->K <= 0 || e->tiles.BM <= 0 || e->tiles.BK <= 0 || e->tiles.bm <= 0) abort();
        if (memchr(e->where, 0, sizeof e->where) == NULL) abort();
        if (e->type != 0 && bitnet_tile_file_find(f, e->type, e->M, e->K) == NULL) abort();
    }
    bitnet_tile_file_free(f);
#elif FUZZ_FILE == 3
    fuzz_write("board.yaml", data, size, path, sizeof path);
    bitnet_plan_board *b = NULL;
    if (bitnet_plan_board_load(path, &b, &err) == BITNET_OK) bitnet_plan_board_free(b);
    else if (b) abort();
#elif FUZZ_FILE == 4
    fuzz_write("plan.yaml", data, size, path, sizeof path);
    bitnet_cluster_plan *p = NULL;
    if (bitnet_cluster_plan_load(path, &p, &err) == BITNET_OK) {
        for (int r = 1; r < 10; r++) bitnet_cluster_plan_check_ranks(p, r, &err);
        bitnet_cluster_plan_free(p);
    } else if (p) {
        abort();
    }
#elif FUZZ_FILE == 5
    fuzz_write("kernel-choice.txt", data, size, path, sizeof path);
    static const char key[] = "v1|AMD_EPYC|tl2-avx2|i2s-avx2|TL2|3200x3200|160,96,32|t2";
    int64_t v = -1;
    (void)bitnet_kchoice_cache_get(path, key, &v);
    const int64_t put = (int64_t)(size % 4096);
    if (!bitnet_kchoice_cache_put(path, key, put)) abort(); /* the scratch file is writable */
    if (!bitnet_kchoice_cache_get(path, key, &v) || v != put) abort(); /* the last record wins */
#endif
    return 0;
}
