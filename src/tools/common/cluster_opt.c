/* cluster_opt.c — the tools' --plan glue (cluster_opt.h). */
#include "cluster_opt.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef BITNET_HAVE_CLUSTER
#include "cluster/pipe.h"
#endif

struct bitnet_tool_cluster {
    const char *tool;
#ifdef BITNET_HAVE_CLUSTER
    bitnet_cluster *cl;
#endif
};

int bitnet_tool_cluster_begin(const char *tool, const char *plan, bool pace, const char *model, int *argc, char ***argv,
                              bitnet_model_params *mp, bitnet_tool_cluster **out) {
    *out = NULL;
    if (!plan) {
        if (pace) {
            fprintf(stderr, "%s: error: --link-emulate paces the links of a cluster plan: give --plan FILE\n", tool);
            return 2;
        }
        return -1;
    }
#ifdef BITNET_HAVE_CLUSTER
    bitnet_tool_cluster *tc = calloc(1, sizeof *tc);
    if (!tc) return 1;
    tc->tool = tool;
    bitnet_error err = {{0}};
    bool root = true;
    if (bitnet_cluster_start(tool, plan, model, pace, argc, argv, &tc->cl, &root, &err) != BITNET_OK) {
        if (root) fprintf(stderr, "%s: error: --plan: %s\n", tool, err.msg);
        fflush(stderr);
        bitnet_cluster_abandon();
        free(tc);
        return 1;
    }
    bitnet_cluster_model_params(tc->cl, mp);
    *out = tc;
    return -1;
#else
    (void)model, (void)argc, (void)argv, (void)mp;
    fprintf(stderr,
            "%s: error: --plan %s: this build has no cluster support (Open MPI and OpenSSL were not found at configure "
            "time: deps/install.sh cluster, then configure again)\n",
            tool, plan);
    return 1;
#endif
}

int bitnet_tool_cluster_loaded(bitnet_tool_cluster *tc, bitnet_status load_status, const bitnet_error *err,
                               bitnet_model **m, const bitnet_context_params *cp) {
    if (!tc) return -1;
#ifdef BITNET_HAVE_CLUSTER
    bitnet_error e = *err;
    bitnet_status st = bitnet_cluster_agree(tc->cl, load_status, &e);
    if (st == BITNET_OK) st = bitnet_cluster_check_model(tc->cl, *m, cp, &e);
    const int rank = bitnet_cluster_rank(tc->cl);
    if (st != BITNET_OK) {
        if (rank == 0) fprintf(stderr, "%s: error: --plan: %s\n", tc->tool, e.msg);
        bitnet_cluster_finish(tc->cl, NULL, 1, true);
        bitnet_model_free(*m);
        *m = NULL;
        free(tc);
        return 1;
    }
    if (rank == 0) return -1;
    st = bitnet_cluster_serve(tc->cl, *m, &e);
    if (st != BITNET_OK) fprintf(stderr, "%s: error: %s\n", tc->tool, e.msg);
    const int rc = bitnet_cluster_finish(tc->cl, *m, st == BITNET_OK ? 0 : 1, true);
    bitnet_model_free(*m);
    *m = NULL;
    free(tc);
    return rc;
#else
    (void)load_status, (void)err, (void)m, (void)cp;
    return 1;
#endif
}

bitnet_status bitnet_tool_cluster_context(bitnet_tool_cluster *tc, bitnet_model *m, const bitnet_context_params *cp,
                                          bitnet_context **out, bitnet_error *err) {
#ifdef BITNET_HAVE_CLUSTER
    if (tc) return bitnet_cluster_context_create(tc->cl, m, cp, out, err);
#endif
    (void)tc;
    return bitnet_context_create_params(m, cp, out, err);
}

void bitnet_tool_cluster_output(bitnet_tool_cluster *tc, const char *path) {
#ifdef BITNET_HAVE_CLUSTER
    if (tc) bitnet_cluster_remove_on_abort(tc->cl, path);
#else
    (void)tc, (void)path;
#endif
}

int bitnet_tool_cluster_end(bitnet_tool_cluster *tc, const bitnet_model *m, int status) {
    if (!tc) return status;
#ifdef BITNET_HAVE_CLUSTER
    status = bitnet_cluster_finish(tc->cl, m, status, false);
#else
    (void)m;
#endif
    free(tc);
    return status;
}

bool bitnet_tool_cluster_is_root(const bitnet_tool_cluster *tc) {
#ifdef BITNET_HAVE_CLUSTER
    return !tc || bitnet_cluster_rank(tc->cl) == 0;
#else
    (void)tc;
    return true;
#endif
}

int32_t bitnet_tool_cluster_n_ctx(const bitnet_tool_cluster *tc) {
#ifdef BITNET_HAVE_CLUSTER
    return tc ? bitnet_cluster_get_plan(tc->cl)->n_ctx : 0;
#else
    (void)tc;
    return 0;
#endif
}

int32_t bitnet_tool_cluster_n_batch(const bitnet_tool_cluster *tc) {
#ifdef BITNET_HAVE_CLUSTER
    return tc ? bitnet_cluster_get_plan(tc->cl)->n_batch : 0;
#else
    (void)tc;
    return 0;
#endif
}
