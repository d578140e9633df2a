/* tile_file.h — tile tables a user hands to the runtime (`--lut-tiles FILE`): the tiles (BM, BK, bm)
 * a TL1/TL2 file was packed with when the file records none, and the tiles an I2_S file is repacked to.
 *
 * Two formats, told apart by the file name (".ini" / ".yaml", ".yml") or else by the first line that
 * is neither blank nor a comment ("[" starts an ini section):
 *
 *  - bitnet.cpp's include/kernel_config.ini, which its utils/codegen_tl1.py / codegen_tl2.py write next
 *    to the kernel header they generate (Python's ConfigParser, so keys are lower case):
 *        [Kernels_0]
 *        m = 1536        weight rows M (ne01)
 *        k = 4096        weight columns K (ne00)
 *        bm = 256        BM   (YAML block_m)
 *        bk = 128        BK   (YAML block_k)
 *        bmm = 32        bm   (YAML simd_m)
 *    one section [Kernels_<n>] per shape, every key exactly once (keys are matched without regard to
 *    case, as ConfigParser reads them). The file does not say TL1 or TL2: its entries apply to the
 *    scheme of the tensor they are looked up for (type 0 below), and the tile rules of that scheme are
 *    checked then (bitnet_tiles_check).
 *  - a configs/-style YAML (docs/ARCHITECTURE.md "Configs"): top-level keys `tl1` / `tl2`, each a
 *    mapping of table names (default, pretuned, ...) to {source, kernels: [{m, k, block_m, block_k,
 *    simd_m, note}]}. A scheme with one table uses it; of a scheme with several tables the one named
 *    `table_name` is used, and with table_name NULL such a scheme is refused (the file's tiles must
 *    not depend on which table a build prefers). Other top-level keys (model, layout, shapes, notes,
 *    ...) are not read here — `python3 -m codegen validate` checks a config as a whole. Entries are
 *    checked against the tile rules of their scheme when the file is read.
 *
 * Errors name the file, the section / table and entry, the key and the value: an unreadable or
 * oversized file (> 4 MiB) → BITNET_ERR_IO; anything malformed (a YAML/ini syntax error with its line,
 * a missing, repeated or unknown key, a value that is not a positive decimal integer, an unknown
 * section, an entry breaking the tile rules, one shape listed twice with different tiles, no entry at
 * all, a requested table the file does not have) → BITNET_ERR_FORMAT. */
#ifndef BITNET_TILE_FILE_H
#define BITNET_TILE_FILE_H

#include "base/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bitnet_tile_file_format {
    BITNET_TILE_FILE_INI = 1,  /* bitnet.cpp's kernel_config.ini */
    BITNET_TILE_FILE_YAML = 2, /* configs/-style YAML */
} bitnet_tile_file_format;

typedef struct bitnet_tile_entry {
    int type;          /* BITNET_TYPE_TL1 / BITNET_TYPE_TL2, or 0: the file does not say (kernel_config.ini) */
    int64_t M, K;      /* weight rows (ne01) and columns (ne00) */
    bitnet_tiles tiles;
    char where[96];    /* where the entry stands, for messages: "[Kernels_1]", "tl2/default kernels[0] (line 12)" */
} bitnet_tile_entry;

typedef struct bitnet_tile_file {
    char path[512];
    bitnet_tile_file_format format;
    size_t n_entries;
    bitnet_tile_entry *entries;
} bitnet_tile_file;

/* Parse n bytes of text (no NUL needed) named `path` in messages, in `format` (0: tell it as
 * described above). table_name as above (NULL: none chosen). On success *out is a new table
 * (bitnet_tile_file_free); on error *out is NULL and err says why. */
bitnet_status bitnet_tile_file_parse(const char *text, size_t n, const char *path, bitnet_tile_file_format format,
                                     const char *table_name, bitnet_tile_file **out, bitnet_error *err);

/* Read `path` and parse it (bitnet_tile_file_parse with format 0). */
bitnet_status bitnet_tile_file_load(const char *path, const char *table_name, bitnet_tile_file **out,
                                    bitnet_error *err);

void bitnet_tile_file_free(bitnet_tile_file *f); /* NULL is fine */

/* The entry for a weight of scheme `type` (BITNET_TYPE_TL1/TL2) and shape M×K: one of that type or of
 * unstated type (0); NULL when the file lists none. f may be NULL (→ NULL). Inline, so that code
 * using a table (the model loader) does not depend on the parsers. */
static inline const bitnet_tile_entry *bitnet_tile_file_find(const bitnet_tile_file *f, int type, int64_t M,
                                                             int64_t K) {
    for (size_t i = 0; f && i < f->n_entries; i++) {
        const bitnet_tile_entry *e = &f->entries[i];
        if ((e->type == type || e->type == 0) && e->M == M && e->K == K) return e;
    }
    return NULL;
}

/* "kernel_config.ini" or "YAML" (for messages). */
static inline const char *bitnet_tile_file_format_name(bitnet_tile_file_format format) {
    return format == BITNET_TILE_FILE_INI ? "kernel_config.ini" : "YAML";
}

#ifdef __cplusplus
}
#endif

#endif
