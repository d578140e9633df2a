/* cluster_opt.h — what llama-cli, llama-bench and bitnet-logits share to run as one stage of a cluster plan
 * under mpirun (--plan FILE, --link-emulate; src/cluster/pipe.h): start the ring, load this rank's layers,
 * let the ranks other than 0 serve, and finish with the resident-memory report. In a build without Open MPI
 * (src/cluster not built) --plan is refused with a message saying so. */
#ifndef BITNET_TOOL_CLUSTER_OPT_H
#define BITNET_TOOL_CLUSTER_OPT_H

#include "model/model.h"

/* --plan FILE and --link-emulate, for a tool's option table. */
#define BITNET_OPT_PLAN(plan_dst_, pace_dst_)                                                            \
    BITNET_OPT("--plan", "FILE",                                                                           \
               "run as one stage of a cluster plan (utils/plan-cluster.py) under\n"                          \
               "mpirun -np N: rank 0 prints, the others run their layers",                                   \
               BITNET_ARG_STRING, (plan_dst_)),                                                              \
        BITNET_OPT("--link-emulate", NULL,                                                                 \
                   "with --plan: deliver every message no earlier than the plan's\n"                         \
                   "links would (UART/SPI/... timing on one machine)",                                       \
                   BITNET_ARG_FLAG, (pace_dst_))

typedef struct bitnet_tool_cluster bitnet_tool_cluster;

/* With plan == NULL: nothing (returns -1, *out NULL). Else MPI_Init and the plan's checks (pipe.h
 * bitnet_cluster_start), and mp's stage fields set for this rank. Returns -1 to go on, else the exit status
 * (the message printed as "<tool>: error: ..."). */
int bitnet_tool_cluster_begin(const char *tool, const char *plan, bool pace, const char *model, int *argc, char ***argv,
                              bitnet_model_params *mp, bitnet_tool_cluster **out);

/* After this rank's bitnet_model_load (load_status, err its message; m NULL on failure): every rank agrees
 * on the load and checks the stage against the plan for the context cp. On rank 0 returns -1 to go on;
 * on the other ranks serves the ring until rank 0 finishes and returns the exit status (m is freed).
 * On failure every rank returns 1 (rank 0 prints the message). */
int bitnet_tool_cluster_loaded(bitnet_tool_cluster *tc, bitnet_status load_status, const bitnet_error *err,
                               bitnet_model **m, const bitnet_context_params *cp);

/* A context on rank 0: bitnet_context_create_params without a cluster, else every rank's (pipe.h). */
bitnet_status bitnet_tool_cluster_context(bitnet_tool_cluster *tc, bitnet_model *m, const bitnet_context_params *cp,
                                          bitnet_context **out, bitnet_error *err);

/* Register an output file to remove if the job is aborted (NULL tc: nothing). */
void bitnet_tool_cluster_output(bitnet_tool_cluster *tc, const char *path);

/* Rank 0 at the end: stops the ring, prints every rank's peak RSS, MPI_Finalize; returns the exit status.
 * NULL tc: returns status. */
int bitnet_tool_cluster_end(bitnet_tool_cluster *tc, const bitnet_model *m, int status);

bool bitnet_tool_cluster_is_root(const bitnet_tool_cluster *tc); /* true without a cluster */
/* The plan's n_ctx (the largest context its memory figures allow); 0 without a cluster. */
int32_t bitnet_tool_cluster_n_ctx(const bitnet_tool_cluster *tc);
/* The plan's prompt micro-batch (params.n_batch: the tools' -b when none is given, so that the prompt's
 * batches flow through the stages one after another); 0 without a cluster or when the plan gives none. */
int32_t bitnet_tool_cluster_n_batch(const bitnet_tool_cluster *tc);

#endif
