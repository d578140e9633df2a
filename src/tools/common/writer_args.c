/* writer_args.c — --outtype, --quant-embd and --tiles of bitnet-dummy and bitnet-convert (writer_args.h). */
#include "tools/common/writer_args.h"

#include <string.h>

int bitnet_tool_on_tiles(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val) {
    bitnet_tool_tile_list *t = opt->dst;
    (void)flag;
    if (t->n == BITNET_TOOL_MAX_TILES) return bitnet_args_fail(args, "--tiles given more than %s times", "64");
    if (strlen(val) >= 128) return bitnet_args_fail(args, "--tiles: '%s' is too long", val);
    int64_t f[5];
    int nf = 0;
    if (!bitnet_args_to_int64_list(val, 1, INT32_MAX, f, 5, &nf) || nf != 5)
        return bitnet_args_fail(args, "--tiles: '%s' is not M,K,BM,BK,bm (five positive integers)", val);
    bitnet_dummy_shape_tiles *s = &t->v[t->n++];
    s->M = f[0];
    s->K = f[1];
    s->tiles.BM = (int32_t)f[2];
    s->tiles.BK = (int32_t)f[3];
    s->tiles.bm = (int32_t)f[4];
    return 0;
}

int bitnet_tool_on_outtype(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val) {
    const bitnet_tool_outtype_arg *o = opt->dst;
    (void)flag;
    if (!bitnet_dummy_outtype_parse(val, o->type))
        return bitnet_args_fail(args, "--outtype: '%s' is not one of f32, f16, i2_s, tl1, tl2", val);
    if (o->word) *o->word = val;
    return 0;
}

int bitnet_tool_on_quant_embd(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *t) {
    (void)flag;
    if (!t) t = "f16";
    if (!bitnet_dummy_embd_type_parse(t, (int *)opt->dst))
        return bitnet_args_fail(args, "--quant-embd: '%s' is not one of f16, q8_0, q6_k", t);
    return 0;
}
