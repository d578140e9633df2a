/* writer_args.h — what the two GGUF writers bitnet-dummy and bitnet-convert share: the option callbacks
 * (args.h) of --outtype, --quant-embd [T] and the repeatable --tiles M,K,BM,BK,bm, and the progress
 * output on stderr. */
#ifndef BITNET_TOOL_WRITER_ARGS_H
#define BITNET_TOOL_WRITER_ARGS_H

#include "convert/dummy_model.h"
#include "tools/common/args.h"

#define BITNET_TOOL_MAX_TILES 64

/* dst of bitnet_tool_on_tiles: the --tiles given, in order */
typedef struct bitnet_tool_tile_list {
    bitnet_dummy_shape_tiles v[BITNET_TOOL_MAX_TILES];
    size_t n;
} bitnet_tool_tile_list;

/* dst of bitnet_tool_on_outtype: the parsed type and the word as given (word may be NULL) */
typedef struct bitnet_tool_outtype_arg {
    bitnet_dummy_outtype *type;
    const char **word;
} bitnet_tool_outtype_arg;

/* --tiles M,K,BM,BK,bm: five positive integers appended to a bitnet_tool_tile_list (at most 64). */
int bitnet_tool_on_tiles(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val);
/* --outtype f32|f16|i2_s|tl1|tl2 (any case) into a bitnet_tool_outtype_arg. */
int bitnet_tool_on_outtype(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val);
/* --quant-embd [T]: f16 (T absent), q8_0 or q6_k into an int (a BITNET_TYPE_* id). */
int bitnet_tool_on_quant_embd(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val);

/* --quant-embd against --outtype, after parsing: f32 files hold every tensor in F32, so f16 (what the
 * bare flag means) leaves them so (*embd_type becomes 0), as bitnet.cpp's converter does with --outtype
 * f32 --quant-embd, and q8_0/q6_k are refused (bitnet_args_fail). Returns 0 or BITNET_EXIT_USAGE. */
int bitnet_tool_check_quant_embd(const bitnet_args *args, bitnet_dummy_outtype outtype, int *embd_type);

/* Progress of a writer (the `progress` callback of bitnet_dummy_params / bitnet_convert_params, user data
 * a bitnet_tool_progress): on a terminal one line redrawn per tensor ("<tool>: [####....] 42% tensor
 * i/n NAME" with `bar`, without the bar otherwise), elsewhere one line per 10% ("<tool>: 40% (x of y MiB)
 * tensor i/n NAME"). Initialize with {tool, isatty(2) != 0, bar, -1, -1}. */
typedef struct bitnet_tool_progress {
    const char *tool;
    bool tty;
    bool bar;
    int last_pct;
    int64_t last_tensor;
} bitnet_tool_progress;
void bitnet_tool_on_progress(void *user, int64_t ti, int64_t nt, const char *name, uint64_t done, uint64_t total);

#endif
