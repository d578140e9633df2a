/* writer_args.c — --outtype, --quant-embd and --tiles of bitnet-dummy and bitnet-convert, and their progress
 * output (writer_args.h). */
#include "tools/common/writer_args.h"

#include <stdio.h>
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

int bitnet_tool_check_quant_embd(const bitnet_args *args, bitnet_dummy_outtype outtype, int *embd_type) {
    if (outtype == BITNET_DUMMY_F32 && *embd_type == BITNET_TYPE_F16) *embd_type = 0;
    if (outtype == BITNET_DUMMY_F32 && *embd_type != 0)
        return bitnet_args_fail(args, "--quant-embd %s: --outtype f32 writes every tensor as F32 (choose f16, i2_s, tl1 or tl2)",
                                *embd_type == BITNET_TYPE_Q6_K ? "q6_k" : "q8_0");
    return 0;
}

void bitnet_tool_on_progress(void *user, int64_t ti, int64_t nt, const char *name, uint64_t done, uint64_t total) {
    bitnet_tool_progress *ps = (bitnet_tool_progress *)user;
    const int pct = total ? (int)(done * 100 / total) : 100;
    if (ps->tty) {
        if (pct == ps->last_pct && ti == ps->last_tensor) return;
        if (ps->bar) {
            char bar[31];
            const int fill = pct * 30 / 100;
            for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
            bar[30] = '\0';
            fprintf(stderr, "\r%s: [%s] %3d%% tensor %lld/%lld %-32.32s", ps->tool, bar, pct, (long long)ti + 1,
                    (long long)nt, name);
        } else {
            fprintf(stderr, "\r%s: %3d%% tensor %lld/%lld %-40s", ps->tool, pct, (long long)ti + 1, (long long)nt,
                    name);
        }
        if (done == total) fprintf(stderr, "\n");
    } else {
        if (pct / 10 == ps->last_pct / 10 && done != total) return;
        if (pct == ps->last_pct) return;
        fprintf(stderr, "%s: %3d%% (%.1f of %.1f MiB) tensor %lld/%lld %s\n", ps->tool, pct,
                (double)done / 1048576.0, (double)total / 1048576.0, (long long)ti + 1, (long long)nt, name);
    }
    ps->last_pct = pct;
    ps->last_tensor = ti;
}
