/* plan.c — cluster plan files (plan.h; format: docs/CLUSTER.md) through src/yamlcheck, and their checks
 * against the rank count, the model file and the loaded model. */
#include "cluster/plan.h"

#include <openssl/evp.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "yamlcheck/yaml_check.h"

#define PLAN_FILE_MAX_BYTES ((size_t)4 << 20)

static bool read_link(bitnet_yc *c, const yaml_node_t *v, const char *where, bitnet_cluster_link *l) {
    memset(l, 0, sizeof *l);
    if (bitnet_yc_is_null(v)) return true;
    bitnet_yc_field f[] = {{"kind", true, NULL},
                           {"bandwidth_bytes_s", true, NULL},
                           {"latency_s", true, NULL},
                           {"frame_payload_bytes", true, NULL},
                           {"frame_overhead_bytes", true, NULL}};
    if (!bitnet_yc_match(c, v, where, f, 5)) return false;
    static const char *const kinds[] = {"uart", "spi", "espnow", "ethernet", "loopback"};
    int kind = 0;
    char kp[5][128];
    for (int i = 0; i < 5; i++) bitnet_yc_key_path(kp[i], sizeof kp[i], where, f[i].key);
    if (!bitnet_yc_word(c, f[0].val, kp[0], kinds, 5, &kind) ||
        !bitnet_yc_positive(c, f[1].val, kp[1], &l->bandwidth_bytes_s) ||
        !bitnet_yc_number(c, f[2].val, kp[2], 0.0, &l->latency_s) ||
        !bitnet_yc_uint64(c, f[3].val, kp[3], &l->frame_payload_bytes) ||
        !bitnet_yc_uint64(c, f[4].val, kp[4], &l->frame_overhead_bytes))
        return false;
    if (l->frame_payload_bytes == 0)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "%s: must be at least 1 (line %d)", kp[3], bitnet_yc_line(f[3].val));
    l->kind = kinds[kind];
    l->present = true;
    return true;
}

static bool read_stage(bitnet_yc *c, bitnet_cluster_plan *p, const yaml_node_t *v, int i) {
    char where[48], kp[160];
    snprintf(where, sizeof where, "stages[%d]", i);
    bitnet_yc_field f[] = {{"node", true, NULL},         {"board", false, NULL},
                           {"first_layer", true, NULL},  {"n_layers", true, NULL},
                           {"token_embd", true, NULL},   {"head", true, NULL},
                           {"weights_capacity_bytes", true, NULL}, {"arena_capacity_bytes", true, NULL},
                           {"link_to_next", true, NULL}, {"predicted", false, NULL},
                           {"shared_memory", false, NULL}};
    if (!bitnet_yc_match(c, v, where, f, 11)) return false;
    bitnet_cluster_stage *s = &p->stages[i];
    memset(s, 0, sizeof *s);
    s->board = "";
#define KP(k) (bitnet_yc_key_path(kp, sizeof kp, where, f[k].key), kp)
    if (!bitnet_yc_string(c, f[0].val, KP(0), true, &s->node) || !bitnet_yc_string(c, f[1].val, KP(1), false, &s->board) ||
        !bitnet_yc_int(c, f[2].val, KP(2), 0, 1 << 20, &s->first_layer) ||
        !bitnet_yc_int(c, f[3].val, KP(3), 1, 1 << 20, &s->n_layers) || !bitnet_yc_bool(c, f[4].val, KP(4), &s->token_embd) ||
        !bitnet_yc_bool(c, f[5].val, KP(5), &s->head) || !bitnet_yc_uint64(c, f[6].val, KP(6), &s->weights_capacity_bytes) ||
        !bitnet_yc_uint64(c, f[7].val, KP(7), &s->arena_capacity_bytes) || !read_link(c, f[8].val, KP(8), &s->link) ||
        (f[10].val && !bitnet_yc_bool(c, f[10].val, KP(10), &s->shared_memory)))
        return false;
    if (s->shared_memory && s->weights_capacity_bytes != s->arena_capacity_bytes)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT,
                              "%s: shared_memory is true but weights_capacity_bytes %llu and arena_capacity_bytes %llu "
                              "differ (one memory has one capacity)",
                              where, (unsigned long long)s->weights_capacity_bytes,
                              (unsigned long long)s->arena_capacity_bytes);
#undef KP
    return true;
}

static bool read_model(bitnet_yc *c, bitnet_cluster_plan *p, const yaml_node_t *v) {
    bitnet_yc_field f[] = {{"file", false, NULL},   {"bytes", true, NULL},   {"sha256", true, NULL},
                           {"arch", true, NULL},    {"n_layer", true, NULL}, {"n_embd", true, NULL},
                           {"n_vocab", true, NULL}, {"kernel_path", false, NULL}};
    if (!bitnet_yc_match(c, v, "model", f, 8)) return false;
    const char *sha = NULL, *path_info = NULL;
    p->model_file = "";
    if (!bitnet_yc_string(c, f[0].val, "model.file", false, &p->model_file) ||
        !bitnet_yc_uint64(c, f[1].val, "model.bytes", &p->model_bytes) ||
        !bitnet_yc_string(c, f[2].val, "model.sha256", true, &sha) || !bitnet_yc_string(c, f[3].val, "model.arch", true, &p->arch) ||
        !bitnet_yc_int(c, f[4].val, "model.n_layer", 1, 1 << 20, &p->n_layer) ||
        !bitnet_yc_int(c, f[5].val, "model.n_embd", 1, 1 << 20, &p->n_embd) ||
        !bitnet_yc_int(c, f[6].val, "model.n_vocab", 1, 1 << 24, &p->n_vocab) ||
        !bitnet_yc_string(c, f[7].val, "model.kernel_path", false, &path_info))
        return false;
    bool hex = strlen(sha) == 64;
    for (int i = 0; hex && i < 64; i++) hex = (sha[i] >= '0' && sha[i] <= '9') || (sha[i] >= 'a' && sha[i] <= 'f');
    if (!hex)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "model.sha256: '%.80s' is not 64 lowercase hex digits (line %d)", sha,
                              bitnet_yc_line(f[2].val));
    memcpy(p->model_sha256, sha, 65);
    return true;
}

static bool read_plan(bitnet_yc *c, const yaml_node_t *root, void *user) {
    bitnet_cluster_plan *p = user;
    bitnet_yc_field f[] = {{"format", true, NULL}, {"version", true, NULL}, {"model", true, NULL},
                           {"params", true, NULL}, {"cluster", false, NULL}, {"stages", true, NULL},
                           {"predicted", false, NULL}};
    if (!bitnet_yc_match(c, root, "", f, 7)) return false;
    if (!bitnet_yc_scalar_is(f[0].val, "bitnet-cluster-plan")) {
        char text[80];
        bitnet_yc_value_text(f[0].val, text, sizeof text);
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "format: %s is not 'bitnet-cluster-plan' (line %d)", text,
                              bitnet_yc_line(f[0].val));
    }
    int32_t version = 0;
    if (!bitnet_yc_int(c, f[1].val, "version", 1, INT32_MAX, &version)) return false;
    if (version != 1) {
        return bitnet_yc_fail(c, BITNET_ERR_UNSUPPORTED,
                              "version: %d is not a plan version this build reads (it reads version 1; line %d)",
                              (int)version, bitnet_yc_line(f[1].val));
    }
    if (!read_model(c, p, f[2].val)) return false;
    bitnet_yc_field pf[] = {{"n_ctx", true, NULL}, {"n_batch", false, NULL}, {"objective", false, NULL}};
    if (!bitnet_yc_match(c, f[3].val, "params", pf, 3) || !bitnet_yc_int(c, pf[0].val, "params.n_ctx", 1, 1 << 24, &p->n_ctx) ||
        (pf[1].val && !bitnet_yc_int(c, pf[1].val, "params.n_batch", 1, 1 << 24, &p->n_batch)))
        return false;
    if (f[4].val) {
        bitnet_yc_field cf[] = {{"file", false, NULL}, {"name", false, NULL}};
        if (!bitnet_yc_match(c, f[4].val, "cluster", cf, 2)) return false;
    }
    const yaml_node_t *st = f[5].val;
    if (!bitnet_yc_list(c, st, "stages", "{node, first_layer, n_layers, ...}")) return false;
    const int n = bitnet_yc_list_len(st);
    if (n < 1 || n > BITNET_CLUSTER_MAX_STAGES)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "stages: %d entries; a plan has 1 to %d stages (line %d)", n,
                              BITNET_CLUSTER_MAX_STAGES, bitnet_yc_line(st));
    int i = 0;
    for (yaml_node_item_t *it = st->data.sequence.items.start; it < st->data.sequence.items.top; it++, i++) {
        if (!read_stage(c, p, bitnet_yc_node(c, *it), i)) return false;
    }
    p->n_stages = n;
    /* the rules between stages */
    int32_t next = 0;
    for (i = 0; i < n; i++) {
        const bitnet_cluster_stage *s = &p->stages[i];
        if (s->first_layer != next)
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT,
                                  "stages[%d] (node %s): first_layer %d, but the layers before it end at %d: the ranges "
                                  "must follow each other without %s",
                                  i, s->node, (int)s->first_layer, (int)next, s->first_layer > next ? "a gap" : "overlap");
        next = s->first_layer + s->n_layers;
        if (next > p->n_layer)
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT,
                                  "stages[%d] (node %s): layers %d .. %d go beyond the model's %d layers", i, s->node,
                                  (int)s->first_layer, (int)next - 1, (int)p->n_layer);
        if (s->token_embd != (i == 0) || s->head != (i == 0))
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT,
                                  "stages[%d] (node %s): token_embd and head must be %s: stage 0 holds the embedding "
                                  "and the head (the ring)",
                                  i, s->node, i == 0 ? "true" : "false");
        if (s->link.present != (n > 1))
            return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "stages[%d] (node %s): link_to_next must be %s with %d stage%s", i,
                                  s->node, n > 1 ? "a link" : "null", n, n > 1 ? "s" : "");
    }
    if (next != p->n_layer)
        return bitnet_yc_fail(c, BITNET_ERR_FORMAT, "stages: the ranges end at layer %d; the model has %d layers",
                              (int)next, (int)p->n_layer);
    return true;
}

bitnet_status bitnet_cluster_plan_load(const char *path, bitnet_cluster_plan **out, bitnet_error *err) {
    if (!path || !out) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_cluster_plan_load: NULL argument");
    *out = NULL;
    bitnet_cluster_plan *p = calloc(1, sizeof *p);
    if (!p) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    bitnet_yc_pool *pool = NULL;
    bitnet_status st = bitnet_yc_load(path, PLAN_FILE_MAX_BYTES, "cluster plan", read_plan, p, &pool, err);
    if (st != BITNET_OK) {
        free(p);
        return st;
    }
    p->strings = pool;
    p->path = bitnet_yc_pool_dup(pool, path, strlen(path));
    if (!p->path) {
        bitnet_cluster_plan_free(p);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = p;
    return BITNET_OK;
}

void bitnet_cluster_plan_free(bitnet_cluster_plan *p) {
    if (!p) return;
    bitnet_yc_pool_free(p->strings);
    free(p);
}

bitnet_status bitnet_cluster_plan_check_ranks(const bitnet_cluster_plan *p, int n_ranks, bitnet_error *err) {
    if (n_ranks != p->n_stages)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s: the plan has %d stage%s but %d process%s run (mpirun -np %d with this plan)", p->path,
                           (int)p->n_stages, p->n_stages == 1 ? "" : "s", n_ranks, n_ranks == 1 ? "" : "es",
                           (int)p->n_stages);
    return BITNET_OK;
}

bitnet_status bitnet_cluster_plan_check_file(const bitnet_cluster_plan *p, const char *model_path, bitnet_error *err) {
    const int fd = open(model_path, O_RDONLY);
    if (fd < 0) return bitnet_fail(err, BITNET_ERR_IO, "%s: cannot open: %s", model_path, strerror(errno));
    struct stat sb;
    const long long have = fstat(fd, &sb) == 0 ? (long long)sb.st_size : -1;
    if (have < 0 || (uint64_t)have != p->model_bytes) {
        close(fd);
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: the plan %s is for a model of %llu bytes (%s), this file has %lld: plan it for this model "
                           "(utils/plan-cluster.py)",
                           model_path, p->path, (unsigned long long)p->model_bytes, p->model_file, have);
    }
    const size_t cap = (size_t)1 << 20;
    unsigned char *buf = malloc(cap);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bitnet_status st = BITNET_OK;
    if (!buf || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        st = bitnet_fail(err, BITNET_ERR_NOMEM, "%s: cannot start SHA-256 (out of memory)", model_path);
    }
    while (st == BITNET_OK) {
        const ssize_t n = read(fd, buf, cap);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) st = bitnet_fail(err, BITNET_ERR_IO, "%s: read error: %s", model_path, strerror(errno));
        if (n <= 0) break;
        if (EVP_DigestUpdate(md, buf, (size_t)n) != 1) st = bitnet_fail(err, BITNET_ERR_IO, "%s: SHA-256 failed", model_path);
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (st == BITNET_OK && EVP_DigestFinal_ex(md, digest, &dlen) != 1)
        st = bitnet_fail(err, BITNET_ERR_IO, "%s: SHA-256 failed", model_path);
    EVP_MD_CTX_free(md);
    free(buf);
    close(fd);
    if (st != BITNET_OK) return st;
    char hex[65];
    for (unsigned i = 0; i < 32 && i < dlen; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
    if (strcmp(hex, p->model_sha256) != 0)
        return bitnet_fail(err, BITNET_ERR_FORMAT,
                           "%s: SHA-256 %s, but the plan %s is for a file with SHA-256 %s (%s): another model or another "
                           "version of it; plan it for this file (utils/plan-cluster.py)",
                           model_path, hex, p->path, p->model_sha256, p->model_file);
    return BITNET_OK;
}

void bitnet_cluster_plan_stage_params(const bitnet_cluster_plan *p, int stage, bitnet_model_params *mp) {
    mp->first_layer = p->stages[stage].first_layer;
    mp->n_layers = p->stages[stage].n_layers;
    mp->skip_embd_head = !p->stages[stage].token_embd;
}

bitnet_status bitnet_cluster_plan_check_model(const bitnet_cluster_plan *p, int stage, const bitnet_model *m,
                                              const bitnet_context_params *cp, bitnet_error *err) {
    const bitnet_hparams *hp = bitnet_model_hparams(m);
    const bitnet_cluster_stage *s = &p->stages[stage];
    if (strcmp(hp->arch, p->arch) != 0)
        return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: plan for architecture '%s', the model is '%s'", p->path, p->arch,
                           hp->arch);
    const struct {
        const char *what;
        int32_t plan, model;
    } dims[] = {{"block_count (n_layer)", p->n_layer, hp->n_layer},
                {"embedding_length (n_embd)", p->n_embd, hp->n_embd},
                {"n_vocab", p->n_vocab, hp->n_vocab}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].plan != dims[i].model)
            return bitnet_fail(err, BITNET_ERR_FORMAT, "%s: plan for a model with %s %d, the model has %d", p->path,
                               dims[i].what, (int)dims[i].plan, (int)dims[i].model);
    }
    if (cp->n_ctx > p->n_ctx)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                           "%s: n_ctx %d is larger than the plan's %d (its memory figures assume it): plan again with "
                           "--ctx %d or run with -c %d",
                           p->path, (int)cp->n_ctx, (int)p->n_ctx, (int)cp->n_ctx, (int)p->n_ctx);
    const uint64_t w = bitnet_model_stage_bytes(m);
    if (w > s->weights_capacity_bytes)
        return bitnet_fail(err, BITNET_ERR_NOMEM,
                           "%s: stage %d (node %s, layers %d .. %d%s): its tensors take %llu bytes, more than the %llu "
                           "bytes of its weights memory (weights_capacity_bytes)",
                           p->path, stage, s->node, (int)s->first_layer, (int)(s->first_layer + s->n_layers - 1),
                           s->token_embd ? ", embedding and head" : "", (unsigned long long)w,
                           (unsigned long long)s->weights_capacity_bytes);
    bitnet_context_budget b;
    bitnet_status st = bitnet_context_arena_bytes(m, cp, 0, &b, err);
    if (st != BITNET_OK) return st;
    if (b.total > s->arena_capacity_bytes)
        return bitnet_fail(err, BITNET_ERR_NOMEM,
                           "%s: stage %d (node %s, layers %d .. %d): its context (KV cache %llu bytes, %llu in all at "
                           "n_ctx %d) is more than the %llu bytes of its arena memory (arena_capacity_bytes)",
                           p->path, stage, s->node, (int)s->first_layer, (int)(s->first_layer + s->n_layers - 1),
                           (unsigned long long)b.kv_cache, (unsigned long long)b.total, (int)cp->n_ctx,
                           (unsigned long long)s->arena_capacity_bytes);
    if (s->shared_memory && w + b.total > s->weights_capacity_bytes)
        return bitnet_fail(err, BITNET_ERR_NOMEM,
                           "%s: stage %d (node %s, layers %d .. %d): its tensors (%llu bytes) and its context (%llu bytes "
                           "at n_ctx %d) share one memory (shared_memory) and together exceed its %llu bytes",
                           p->path, stage, s->node, (int)s->first_layer, (int)(s->first_layer + s->n_layers - 1),
                           (unsigned long long)w, (unsigned long long)b.total, (int)cp->n_ctx,
                           (unsigned long long)s->weights_capacity_bytes);
    return BITNET_OK;
}

double bitnet_cluster_link_seconds(const bitnet_cluster_link *l, uint64_t bytes) {
    if (!l || !l->present) return 0.0;
    const uint64_t frames = (bytes + l->frame_payload_bytes - 1) / l->frame_payload_bytes;
    return l->latency_s + ((double)bytes + (double)frames * (double)l->frame_overhead_bytes) / l->bandwidth_bytes_s;
}
