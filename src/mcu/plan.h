/* plan.h — the memory budget of one microcontroller node (bitnet-mcu-plan; hosted builds only): a board
 * described by a YAML file (boards/README.md), a model opened exactly as a node opens it (src/mcu: the image
 * read into memory, bitnet_mcu_open over an arena, bitnet_mcu_arena_bytes), and from the two: the bytes of
 * every layer and of the layer-independent parts, where the weights and the arena go on the board, whether
 * the model fits one board, and otherwise the fewest boards of this kind that hold it in contiguous layer
 * ranges. The data is laid out for the cluster planner of a later issue, which reads the JSON written by
 * bitnet_mcu_plan_write_json (fields: boards/README.md) together with the board files.
 *
 * Units: bytes everywhere (uint64_t), MB/s = 10^6 bytes per second. Memory for the plan and the board comes
 * from the C library's heap; the node's arena is a heap buffer too, used only to open the model. */
#ifndef BITNET_MCU_PLAN_H
#define BITNET_MCU_PLAN_H

#include "mcu/mcu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- boards ------------------------------------------------------------------------------------------ */

#define BITNET_PLAN_MAX_SOURCES 16
#define BITNET_PLAN_MAX_MEMORIES 8
#define BITNET_PLAN_MAX_RESERVES 8
#define BITNET_PLAN_MAX_REFS 8

typedef enum bitnet_plan_memory_kind {
    BITNET_PLAN_FLASH = 0, /* read-only at run time: can hold the weights, never the arena */
    BITNET_PLAN_RAM = 1,
} bitnet_plan_memory_kind;

/* Roles a memory can take (bit set). */
enum {
    BITNET_PLAN_ROLE_WEIGHTS = 1u, /* the model image, read in place */
    BITNET_PLAN_ROLE_ARENA = 2u,   /* the node's arena (src/mcu), one contiguous buffer */
};

/* A public document (or this project's estimate) that figures come from. Strings are NULL when absent. */
typedef struct bitnet_plan_source {
    const char *id, *title, *version, *section, *url, *note;
} bitnet_plan_source;

/* Bytes of a memory the node cannot use (the firmware's code, RTOS, stacks, caches, alignment). */
typedef struct bitnet_plan_reserve {
    const char *what;
    uint64_t bytes;
    const char *note; /* where the figure comes from; "assumption ..." for estimates; may be NULL */
} bitnet_plan_reserve;

typedef struct bitnet_plan_memory {
    const char *name; /* unique in the board */
    bitnet_plan_memory_kind kind;
    uint64_t bytes;   /* capacity */
    unsigned roles;   /* BITNET_PLAN_ROLE_* */
    double stream_mb_s; /* streaming read bandwidth as the core sees it (an assumption on most boards) */
    const char *source[BITNET_PLAN_MAX_REFS]; /* ids of bitnet_plan_board.sources */
    int n_source;
    const char *note; /* may be NULL */
    bitnet_plan_reserve reserve[BITNET_PLAN_MAX_RESERVES];
    int n_reserve;
    uint64_t reserved; /* Σ reserve[].bytes (<= bytes) */
    uint64_t usable;   /* bytes - reserved */
} bitnet_plan_memory;

typedef struct bitnet_plan_cpu {
    const char *core;
    int32_t cores;
    double clock_mhz;
    const char *fpu;  /* "none", "single" or "double" */
    const char *simd; /* free text */
    const char *source[BITNET_PLAN_MAX_REFS];
    int n_source;
} bitnet_plan_cpu;

/* A board file (boards/README.md). Memories are in file order, which is also the order of preference when
 * a part could go to several (the first arena memory that fits gets the arena: SRAM before PSRAM). */
typedef struct bitnet_plan_board {
    const char *path; /* the file, for messages */
    const char *name;
    const char *description;
    bitnet_plan_source sources[BITNET_PLAN_MAX_SOURCES];
    int n_sources;
    bitnet_plan_cpu cpu;
    bitnet_plan_memory memories[BITNET_PLAN_MAX_MEMORIES];
    int n_memories;
    void *strings; /* the loader's string storage (NULL for a board built by hand) */
} bitnet_plan_board;

/* Read and validate the board file at `path` (YAML, schema in boards/README.md). Every error names the file,
 * the key (as a path: "memories[1].reserve[0].bytes") and the value or the line:
 *  - unreadable file → BITNET_ERR_IO; YAML syntax errors (with line and column), a missing key, an unknown
 *    or repeated key, a value of the wrong type (a list where a string belongs, "two" for an integer),
 *    a byte count that is not a non-negative integer (optionally with KiB, MiB or GiB; "-5" is refused),
 *    bandwidths or clocks that are not positive numbers, an unknown role, kind or fpu word, a source id
 *    that `sources` does not define, reserves larger than the memory, a flash memory with the arena
 *    role, no memory for the weights or for the arena → BITNET_ERR_FORMAT;
 *  - out of memory → BITNET_ERR_NOMEM.
 * *out is freed with bitnet_plan_board_free. */
bitnet_status bitnet_plan_board_load(const char *path, bitnet_plan_board **out, bitnet_error *err);
void bitnet_plan_board_free(bitnet_plan_board *b); /* NULL is fine */

/* Where `flash` bytes of weights and an arena of `arena` bytes go on one board, and whether they fit. */
typedef struct bitnet_plan_fit {
    bool fits;
    uint64_t flash_bytes, arena_bytes; /* what was asked */
    int weights_memory, arena_memory;  /* indices into board->memories; -1 when it does not fit */
    char reason[640];                  /* one sentence: where each part goes and what is left, or why not */
} bitnet_plan_fit;

/* Place the weights (one contiguous image, in a memory with the weights role) and the arena (one buffer, in a
 * memory with the arena role) on board b: the first arena memory in file order that has room, with the first
 * weights memory that leaves it that room; the two may share a memory when it has both roles (then they
 * must fit together in its usable bytes). Any assignment that fits is found, so the answer is monotone: less
 * flash or arena never turns "fits" into "does not fit". Returns out->fits. */
bool bitnet_plan_place(const bitnet_plan_board *b, uint64_t flash, uint64_t arena, bitnet_plan_fit *out);

/* ---- the partition model ----------------------------------------------------------------------------- */

/* A model cut into pieces in forward order: piece 0 = the first board's part (token_embd), pieces 1..n_layer
 * = the layers, piece n_layer + 1 = the last board's part (output_norm and the head). A board holds a
 * contiguous, non-empty range of pieces [a, b). Its bytes (bitnet_plan_range):
 *   flash = node_flash + Σ layer_flash + first_flash (if a = 0) + last_flash (if b = n_layer + 2)
 *           - shared_flash (if it holds both: a tied head is token_embd, stored once on one board)
 *   arena = node_arena + 2 · round64(Σ layer_kv / 2) + last_arena (if it holds the last piece)
 * node_flash is what every board's image carries (the GGUF header: keys and tensor table); node_arena what
 * every board's arena holds whatever its layers (the model's metadata, counted whole on every board, and the
 * context without the KV cache and the logits: activations, LUT workspaces, RoPE tables, attention
 * scratch); the KV cache is two buffers (K and V) of the board's layers, each rounded up to 64 as the
 * runtime allocates them, so a board with every layer gets exactly the runtime's arena; the logits live on
 * the board that computes them. */
typedef struct bitnet_plan_pieces {
    int32_t n_layer;
    const uint64_t *layer_flash; /* [n_layer] image bytes of each layer's tensors (with alignment padding) */
    const uint64_t *layer_kv;    /* [n_layer] KV cache bytes of each layer (K and V) */
    uint64_t node_flash, node_arena;
    uint64_t first_flash, last_flash, shared_flash;
    uint64_t last_arena;
    const char *first_name, *last_name; /* the two end pieces, for messages */
} bitnet_plan_pieces;

/* Flash and arena bytes of a board holding pieces [a, b), 0 <= a < b <= n_layer + 2 (formula above). */
void bitnet_plan_range(const bitnet_plan_pieces *pc, int32_t a, int32_t b, uint64_t *flash, uint64_t *arena);

/* One board of a partition: pieces [first_piece, end_piece), i.e. layers [first_layer, first_layer +
 * n_layers), with token_embd and/or the head, and where its parts go. */
typedef struct bitnet_plan_node {
    int32_t first_piece, end_piece;
    int32_t first_layer, n_layers;
    bool has_first, has_last;
    bitnet_plan_fit fit;
} bitnet_plan_node;

typedef struct bitnet_plan_partition {
    bool possible;       /* false: one piece does not fit a board alone, so no number of boards holds it */
    int32_t n_boards;    /* the minimum, when possible */
    bitnet_plan_node *nodes; /* [n_boards] (heap) */
    int32_t bad_piece;   /* when !possible: the first piece that fits no board alone */
    int32_t n_bad_pieces; /* when !possible: how many pieces fit no board alone (all listed in reason) */
    char reason[1024];
} bitnet_plan_partition;

/* The fewest boards of kind b holding the pieces in contiguous ranges, found greedily: each board takes the
 * longest run of pieces that still fits it (bitnet_plan_place). Greedy is optimal here: whether a range fits
 * depends only on its own pieces and shrinking a range never makes it fit worse (bytes only drop, and
 * bitnet_plan_place is monotone), so by induction the k-th greedy board ends no earlier than the k-th board
 * of any valid partition, and greedy needs no more boards than the best one. When a single piece does not
 * fit an otherwise empty board, no partition exists (a partition cannot split a tensor): possible = false,
 * the reason names the first such piece with its bytes and lists every piece that fits no board alone. Errors: BITNET_ERR_INVALID_ARG (bad pieces), BITNET_ERR_NOMEM.
 * Free with bitnet_plan_partition_free. */
bitnet_status bitnet_plan_partition_make(const bitnet_plan_board *b, const bitnet_plan_pieces *pc,
                                         bitnet_plan_partition *out, bitnet_error *err);
void bitnet_plan_partition_free(bitnet_plan_partition *p); /* NULL is fine; resets *p */

/* bitnet.cpp's LUT workspace rule (ggml_bitnet_mul_mat_get_wsize as the seed article ../shared/seed
 * describes it, with bitnet_float_type = float so that its F16 extra term is absent) for ne10 = K and
 * ne11 = columns: TL1 ne10·ne11·15 + ne11·2·sizeof(float), TL2 ne10·ne11·11 + 2·ne11·2·sizeof(float),
 * rounded up to 64. scheme: BITNET_TYPE_TL1 or BITNET_TYPE_TL2 (0 otherwise). For comparison only: the
 * runtime's own size (bitnet_mul_mat_get_wsize) covers every byte its kernels write (design.md §3). */
uint64_t bitnet_plan_seed_wsize(int scheme, int64_t ne10, int64_t ne11);

/* ---- the plan of one model on one board ---------------------------------------------------------------- */

typedef struct bitnet_mcu_plan_params {
    int32_t n_ctx;   /* KV cache positions, [1, 2^24] */
    int32_t n_batch; /* tokens per forward pass, >= 1 (clamped to n_ctx); rows of logits = n_batch, as
                        bitnet-mcu-run keeps them */
    int i2s_layout;  /* bitnet_model_params.i2s_layout: AUTO (0: the image's record, else x86) or X86. A board
                        runs its image in place, so the plan is of an image in the x86 layout: ARM64 and ROWS4
                        (whose node would rewrite every I2_S weight into its arena) are refused, naming
                        bitnet-convert --relayout, which writes the image to plan and flash */
} bitnet_mcu_plan_params;

typedef struct bitnet_plan_tensor {
    char name[96];
    int type;            /* enum bitnet_type */
    int n_dims;
    int64_t ne[4];
    uint64_t bytes;      /* as stored (the type's size of ne) */
    uint64_t flash_bytes; /* its span in the image: bytes plus the alignment padding up to the next tensor */
    int32_t layer;       /* <l> of blk.<l>.*, else -1 */
} bitnet_plan_tensor;

typedef struct bitnet_plan_layer {
    uint64_t tensor_bytes;   /* Σ bytes of blk.<l>.* (weights and norms, as stored) */
    uint64_t flash_bytes;    /* Σ flash_bytes of the same tensors */
    uint64_t kv_cache_bytes; /* this layer's K and V cache: the context's kv_cache / n_layer */
    int32_t n_tensors;
} bitnet_plan_layer;

typedef struct bitnet_mcu_plan {
    char model_path[512];
    bitnet_hparams hp;
    char kernel_path[16];    /* bitnet_kernel_path_name of the node's path ("stored") */
    char kernels[256];       /* bitnet_model_kernel_summary */
    char i2s_note[384];      /* bitnet_model_i2s_note: the I2_S layout the image is planned in ("" without I2_S) */
    bitnet_mcu_params params; /* n_ctx, n_batch (clamped), n_logits = n_batch */

    /* the image (it stays in flash and is used in place: its size is the flash a single node needs) */
    uint64_t image_bytes;
    uint64_t header_bytes;   /* keys, tensor table and the padding before the data section */
    uint32_t alignment;      /* general.alignment */
    bitnet_plan_tensor *tensors; /* [n_tensors], in file order */
    int32_t n_tensors;
    bitnet_plan_layer *layers;   /* [hp.n_layer] */
    int32_t token_embd, output, output_norm; /* tensor indices; output = -1 when the head is tied */
    uint64_t other_flash;    /* tensors outside the layers and the three above (none in files the loader
                                accepts); counted on every board */

    /* the arena: the node's own numbers (bitnet_mcu_arena_bytes), exact for this host's struct sizes */
    bitnet_mcu_budget budget;
    uint64_t kv_bytes_per_layer; /* budget.context.kv_cache / n_layer */
    uint64_t lut_buffer_bytes;   /* one of the two LUT workspaces: budget.context.lut_workspace / 2 */
    int32_t lut_tensor;      /* the ternary weight with the largest workspace (largest K), -1: none */
    uint64_t seed_tl1_bytes, seed_tl2_bytes; /* bitnet_plan_seed_wsize over the same product */

    /* bytes one generated token reads (a token at position pos attends over pos + 1 cached positions):
     * from the weights memory every layer tensor once, output_norm, one row of token_embd and the whole
     * head; from the arena memory the K and V cache of every layer. The activations, LUT tables and
     * scratch (a few KiB, read once per tile) are not counted: on a real board they stay in SRAM or the
     * cache; flash and PSRAM are what stream through a small cache. */
    uint64_t token_layer_bytes;   /* Σ layers' tensor_bytes */
    uint64_t token_head_bytes;    /* output.weight, or token_embd when tied */
    uint64_t token_embd_row_bytes;/* one row of token_embd */
    uint64_t token_flash_bytes;   /* the three above and output_norm */
    uint64_t token_kv_mid_bytes;  /* K and V read at pos = n_ctx / 2 */
    uint64_t token_kv_full_bytes; /* K and V read at pos = n_ctx - 1 */
    uint64_t token_kv_write_bytes;/* K and V of the new position */

    /* on one board, and the partition over boards of the same kind */
    bitnet_plan_fit one;
    uint64_t *piece_arrays;  /* storage of pieces.layer_flash / layer_kv */
    bitnet_plan_pieces pieces;
    bitnet_plan_partition partition;
} bitnet_mcu_plan;

/* Plan the model at `model_path` on board b with the sizes in pp. The file is read into a 64-byte aligned
 * heap buffer and opened with bitnet_mcu_open over a heap arena (grown until the model opens), so the arena
 * figures are the runtime's own (bitnet_mcu_arena_bytes). The image is named `model_path`, as bitnet-mcu-run
 * names it: the GGUF index keeps a copy of the name, so a node that names its image differently has a
 * metadata size a few bytes (8-byte steps) apart. Errors: an unreadable file (BITNET_ERR_IO, naming it), the
 * node's errors (a malformed or unsupported model: BITNET_ERR_FORMAT / BITNET_ERR_UNSUPPORTED), n_ctx outside
 * [1, 2^24] or n_batch < 1 (BITNET_ERR_INVALID_ARG), an I2_S layout other than AUTO or X86 asked for, or
 * recorded by the image (BITNET_ERR_UNSUPPORTED), BITNET_ERR_NOMEM. *out is freed with
 * bitnet_mcu_plan_free; its fits and partition name b's memories by index. */
bitnet_status bitnet_mcu_plan_make(const char *model_path, const bitnet_plan_board *b,
                                   const bitnet_mcu_plan_params *pp, bitnet_mcu_plan **out, bitnet_error *err);
void bitnet_mcu_plan_free(bitnet_mcu_plan *p); /* NULL is fine */

/* Write plan p of board b as JSON (format "bitnet-mcu-plan", version 1; fields in boards/README.md) to
 * `path` through json-c. Errors: BITNET_ERR_IO naming the path, BITNET_ERR_NOMEM. */
bitnet_status bitnet_mcu_plan_write_json(const bitnet_mcu_plan *p, const bitnet_plan_board *b, const char *path,
                                         bitnet_error *err);

#ifdef __cplusplus
}
#endif

#endif
