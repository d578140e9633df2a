/* pipe.h — pipeline-parallel generation over Open MPI (docs/CLUSTER.md "Pipeline runtime"): one process
 * (MPI rank) per stage of a cluster plan (plan.h). Rank 0 runs the tool (tokenizes, samples, prints) with
 * the embedding, its layers and the head; the other ranks serve: they receive the hidden states of a batch
 * of tokens from the previous rank, run their layers (bitnet_decode_hidden) and pass them on; the last
 * rank passes them back to rank 0 (bitnet_stage_link of model.h). Prompts flow as batches of n_batch
 * tokens, so the ranks overlap; the floats cross the links unchanged, so logits are bit-identical to one
 * process.
 *
 * Messages are MPI point-to-point on MPI_COMM_WORLD with MPI_ERRORS_RETURN: a failed call becomes an error
 * naming the peer rank. Commands travel the ring like the hidden states: CONTEXT (every rank makes its
 * context: n_ctx, n_batch, n_threads), DECODE (a batch), STOP; a rank that fails passes an ERROR with its
 * message instead, and rank 0 reports it. A wait for an answer is bounded (BITNET_CLUSTER_TIMEOUT seconds,
 * default 300). A rank that dies makes mpirun stop the others (SIGTERM): each says which rank it was
 * waiting for, removes the output file registered with bitnet_cluster_remove_on_abort and exits 1.
 *
 * With pace_links (the tools' --link-emulate) every message is delivered no earlier than the plan's link
 * would deliver it (plan.h bitnet_cluster_link_seconds; the sender's link is busy for the transfer, the
 * receiver waits until the arrival time): a loopback run behaves like the plan's UART or SPI cluster. It
 * uses CLOCK_MONOTONIC across ranks, so it needs every rank on one machine (it refuses otherwise). */
#ifndef BITNET_CLUSTER_PIPE_H
#define BITNET_CLUSTER_PIPE_H

#include "cluster/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_cluster bitnet_cluster;

/* MPI_Init, then on every rank: the plan read and checked against the rank count and the model file
 * (plan.h). Every rank learns whether all succeeded: on failure each returns the same error, naming the
 * first failing rank, with *is_root true on rank 0 only (the one that should print it), and every rank then
 * calls bitnet_cluster_abandon (so no rank exits, and mpirun stops the job, before rank 0 has printed).
 * `tool` names the program in messages. */
bitnet_status bitnet_cluster_start(const char *tool, const char *plan_path, const char *model_path, bool pace_links,
                                   int *argc, char ***argv, bitnet_cluster **out, bool *is_root, bitnet_error *err);
/* After a failed bitnet_cluster_start, on every rank once the message is printed: a barrier, then MPI_Finalize. */
void bitnet_cluster_abandon(void);
int bitnet_cluster_rank(const bitnet_cluster *cl);
int bitnet_cluster_size(const bitnet_cluster *cl);
const bitnet_cluster_plan *bitnet_cluster_get_plan(const bitnet_cluster *cl);
/* This rank's stage: first_layer, n_layers and skip_embd_head of mp. */
void bitnet_cluster_model_params(const bitnet_cluster *cl, bitnet_model_params *mp);

/* Collective: every rank passes its status of a step (loading the model, say) and its message; every rank
 * gets BITNET_OK when all succeeded, else the first failing rank's status and message prefixed with its
 * rank and node ("rank 2 (node host2): ..."). */
bitnet_status bitnet_cluster_agree(bitnet_cluster *cl, bitnet_status local, bitnet_error *err);

/* Collective: the loaded stage model against the plan (bitnet_cluster_plan_check_model with cp) on every
 * rank, agreed as bitnet_cluster_agree does. */
bitnet_status bitnet_cluster_check_model(bitnet_cluster *cl, const bitnet_model *m, const bitnet_context_params *cp,
                                         bitnet_error *err);

/* Rank 0: its context of cp (as bitnet_context_create_params), every other rank's (a CONTEXT round of the
 * ring: each checks it against its plan stage and makes it, replacing the one before), and the link that
 * makes bitnet_decode on it run the pipeline. Free it with bitnet_cluster_context_free. */
bitnet_status bitnet_cluster_context_create(bitnet_cluster *cl, bitnet_model *m, const bitnet_context_params *cp,
                                            bitnet_context **out, bitnet_error *err);
void bitnet_cluster_context_free(bitnet_cluster *cl, bitnet_context *c);

/* Ranks other than 0: serve the ring with this rank's stage model until rank 0 stops it. BITNET_OK after
 * STOP; an error when a step failed (after passing it on) or a message could not be received. */
bitnet_status bitnet_cluster_serve(bitnet_cluster *cl, bitnet_model *m, bitnet_error *err);

/* A file the tool is writing: removed if the job is aborted (a rank lost) before bitnet_cluster_finish. */
void bitnet_cluster_remove_on_abort(bitnet_cluster *cl, const char *path);

/* Rank 0: STOP round, then every rank's peak resident memory and stage tensor bytes printed on stderr (one
 * line per rank, unless quiet); then MPI_Finalize on every rank and the cluster freed. Returns the exit
 * status to use: `status` unless the shutdown failed (1). NULL cl is fine. */
int bitnet_cluster_finish(bitnet_cluster *cl, const bitnet_model *m, int status, bool quiet);

#ifdef __cplusplus
}
#endif

#endif
