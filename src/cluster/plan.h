/* plan.h — a cluster plan (PLAN.yaml, written by utils/plan-cluster.py; format: docs/CLUSTER.md "The plan
 * file"): which node runs which contiguous layer range of one model, in a ring (stage 0 holds the token
 * embedding, output_norm and the head; hidden states go stage 0 → 1 → … → N−1 → 0), each node's memory
 * capacities and the link to the next stage. Read by the tools' --plan (src/cluster/pipe.h) and checked
 * before any work: against the rank count, the model file (size and SHA-256, FIPS 180-4, through
 * OpenSSL's libcrypto) and the loaded model (architecture, layer count, widths, memory). */
#ifndef BITNET_CLUSTER_PLAN_H
#define BITNET_CLUSTER_PLAN_H

#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BITNET_CLUSTER_MAX_STAGES 256

/* The link from a stage to the next one in the ring. The time of one message of B payload bytes
 * (docs/CLUSTER.md "Cost model"): latency_s + (B + ceil(B / frame_payload_bytes) · frame_overhead_bytes)
 * / bandwidth_bytes_s. */
typedef struct bitnet_cluster_link {
    bool present;                  /* false for a single stage (link_to_next: null) */
    const char *kind;              /* uart, spi, espnow, ethernet, loopback */
    double bandwidth_bytes_s;      /* > 0 */
    double latency_s;              /* >= 0 */
    uint64_t frame_payload_bytes;  /* >= 1 */
    uint64_t frame_overhead_bytes; /* >= 0 */
} bitnet_cluster_link;

typedef struct bitnet_cluster_stage {
    const char *node, *board;
    int32_t first_layer, n_layers;
    bool token_embd, head;
    uint64_t weights_capacity_bytes; /* usable bytes of the memory that holds the stage's tensors */
    uint64_t arena_capacity_bytes;   /* usable bytes of the memory that holds its KV cache and scratch */
    bool shared_memory;              /* one memory holds both: tensors and context must fit it together */
    bitnet_cluster_link link;        /* to stage (i + 1) mod N */
} bitnet_cluster_stage;

typedef struct bitnet_cluster_plan {
    const char *path;
    const char *model_file; /* as given to the planner (informative) */
    uint64_t model_bytes;
    char model_sha256[65];  /* lowercase hex */
    const char *arch;
    int32_t n_layer, n_embd, n_vocab;
    int32_t n_ctx;          /* the context the memory figures assume: a larger -c is refused */
    int32_t n_batch;        /* the prompt micro-batch the prediction assumes (0: not given): the tools' default -b */
    int32_t n_stages;
    bitnet_cluster_stage stages[BITNET_CLUSTER_MAX_STAGES];
    void *strings;
} bitnet_cluster_plan;

/* Read a plan file. Checks the schema (every key, type and range, as docs/CLUSTER.md lists them) and the
 * rules that do not need the model: format "bitnet-cluster-plan" version 1; the stages' layer ranges tile
 * [0, model.n_layer) in order without gap or overlap; token_embd and head on stage 0 and nowhere else; a
 * link on every stage when there are several, none (null) for one. Errors name the file, the key path or
 * the stage (index and node) and the rule: BITNET_ERR_IO, BITNET_ERR_FORMAT, BITNET_ERR_NOMEM. */
bitnet_status bitnet_cluster_plan_load(const char *path, bitnet_cluster_plan **out, bitnet_error *err);
void bitnet_cluster_plan_free(bitnet_cluster_plan *p); /* NULL is fine */

/* The number of processes must equal the plan's stages (BITNET_ERR_INVALID_ARG naming both). */
bitnet_status bitnet_cluster_plan_check_ranks(const bitnet_cluster_plan *p, int n_ranks, bitnet_error *err);

/* The file at model_path must be the plan's model: its size, then its SHA-256 (read with read(2) through
 * a 1 MiB buffer, so the hash does not count in the process's resident memory). BITNET_ERR_IO when it
 * cannot be read, BITNET_ERR_FORMAT naming both sizes or both hashes. */
bitnet_status bitnet_cluster_plan_check_file(const bitnet_cluster_plan *p, const char *model_path, bitnet_error *err);

/* Stage `stage`'s model parameters: first_layer, n_layers, skip_embd_head set from the plan. */
void bitnet_cluster_plan_stage_params(const bitnet_cluster_plan *p, int stage, bitnet_model_params *mp);

/* The loaded stage model against the plan: architecture, block count, n_embd, n_vocab (BITNET_ERR_FORMAT
 * naming the key and both values); n_ctx above the plan's (BITNET_ERR_INVALID_ARG); the stage's tensors
 * (bitnet_model_stage_bytes) above weights_capacity_bytes, its context (bitnet_context_arena_bytes of cp)
 * above arena_capacity_bytes, or with shared_memory the two together above it (BITNET_ERR_NOMEM naming
 * the node, the memory rule and the numbers). */
bitnet_status bitnet_cluster_plan_check_model(const bitnet_cluster_plan *p, int stage, const bitnet_model *m,
                                              const bitnet_context_params *cp, bitnet_error *err);

/* Seconds to move one message of `bytes` payload bytes over the link (the formula above); 0 without a link. */
double bitnet_cluster_link_seconds(const bitnet_cluster_link *l, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif
