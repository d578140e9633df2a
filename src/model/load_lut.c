/* load_lut.c — the ternary weights (I2_S, TL1, TL2) of a model handed to the LUT host for the model's
 * kernel path: the tiles a stored TL1/TL2 weight was packed with (its bitnet.lut.<name>.tiles key or
 * the user's --lut-tiles table, never a guess), the target tiles (stored, or the preferred built-in
 * table per shape), repacking through bitnet_lut_transform_tensor, and the kernel summary
 * (bitnet_model_kernel_summary). */
#if !defined(BITNET_BARE_METAL) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "model/model_internal.h"

#include "base/mem.h"
#include "kernels/i2s/i2s.h"
#include "kernels/lut/lut.h"
#include "kernels/lut/pack.h"
#include "kernels/lut/tl2_i8.h"

/* The stored type a kernel path runs on. */
static int path_type(bitnet_kernel_path p) {
    return p == BITNET_PATH_TL1 ? BITNET_TYPE_TL1 : p == BITNET_PATH_TL2 ? BITNET_TYPE_TL2 : BITNET_TYPE_I2_S;
}

/* Tiles recorded by our writer: key bitnet.lut.<tensor>.tiles = [BM, BK, bm] (LAYOUTS.md §7).
 * *found = false when the key is absent. */
static bitnet_status file_tiles(loader *ld, const char *tensor, bitnet_tiles *tiles, bool *found) {
    char key[192];
    snprintf(key, sizeof key, "bitnet.lut.%s.tiles", tensor);
    *found = false;
    if (bitnet_gguf_find_kv(ld->g, key) < 0) return BITNET_OK;
    bitnet_gguf_type et;
    uint64_t n;
    const void *data;
    bitnet_status st = bitnet_gguf_get_arr(ld->g, key, &et, &n, &data, ld->err);
    if (st != BITNET_OK) return st;
    if (n != 3 || (et != BITNET_GGUF_UINT32 && et != BITNET_GGUF_INT32)) {
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' must be an array of 3 uint32 [BM, BK, bm]",
                           ld->path, key);
    }
    uint32_t v[3];
    memcpy(v, data, sizeof v);
    for (int i = 0; i < 3; i++) {
        if (v[i] == 0 || v[i] > (1u << 20)) {
            return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: key '%s' = [%u, %u, %u] holds an impossible tile",
                               ld->path, key, (unsigned)v[0], (unsigned)v[1], (unsigned)v[2]);
        }
    }
    tiles->BM = (int32_t)v[0];
    tiles->BK = (int32_t)v[1];
    tiles->bm = (int32_t)v[2];
    *found = true;
    return BITNET_OK;
}

/* "; bitnet-convert --relayout rewrote it from the <from> layout it was told the original held" for a file
 * with the rewrite's provenance key (from >= 0), else "". */
static const char *rewrite_provenance(int from, char *buf, size_t cap) {
    buf[0] = '\0';
    if (from >= 0)
        snprintf(buf, cap, "; bitnet-convert --relayout rewrote it from the %s layout it was told the original held",
                 bitnet_i2s_layout_name(from));
    return buf;
}

bitnet_status bitnet_model_read_i2s_layout(loader *ld, bitnet_model *m, int requested) {
    m->i2s_layout = BITNET_I2S_LAYOUT_AUTO;
    m->i2s_note[0] = '\0';
    int recorded, from;
    bitnet_status st = bitnet_gguf_i2s_layout(ld->g, &recorded, &from, ld->err);
    if (st != BITNET_OK) return st;
    char prov[160];
    rewrite_provenance(recorded > 0 ? from : -1, prov, sizeof prov);
    if (requested != BITNET_I2S_LAYOUT_AUTO && recorded > 0 && requested != recorded) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: the file records I2_S layout %s (key '%s'%s), but layout %s was asked for "
                           "(--i2s-layout %s): the file's bytes follow its record; drop --i2s-layout or give %s%s",
                           ld->path, bitnet_i2s_layout_name(recorded), BITNET_I2S_LAYOUT_KEY, prov,
                           bitnet_i2s_layout_name(requested), bitnet_i2s_layout_name(requested),
                           bitnet_i2s_layout_name(recorded),
                           from >= 0 ? " (if the original was packed in another layout, rewrite the original again with "
                                       "that one)"
                                     : "");
    }
    const int layout = recorded > 0 ? recorded : requested != BITNET_I2S_LAYOUT_AUTO ? requested : BITNET_I2S_LAYOUT_X86;
    int n_i2s = 0;
    uint64_t rewritten = 0;
    for (int32_t l = m->l_begin; l < m->l_end; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut || w->t.type != BITNET_TYPE_I2_S) continue;
            n_i2s++;
            if (layout == BITNET_I2S_LAYOUT_X86) continue; /* read as stored */
            bitnet_error sub;
            if (bitnet_i2s_layout_check(layout, w->M, w->K, &sub) != BITNET_OK)
                return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: tensor '%s': %s", ld->path, w->t.name, sub.msg);
            const size_t nbytes = bitnet_i2s_nbytes(w->M, w->K); /* = t.nbytes: the reader checked the size */
            w->i2s_owned = (uint8_t *)bitnet_aligned_alloc(64, (nbytes + 63) / 64 * 64);
            if (!w->i2s_owned) {
                return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory rewriting tensor '%s' (%llu bytes) to the x86 layout",
                                   ld->path, w->t.name, (unsigned long long)nbytes);
            }
            if (bitnet_i2s_relayout(layout, (const uint8_t *)w->t.data, w->M, w->K, w->i2s_owned, &sub) != BITNET_OK)
                return bitnet_fail(ld->err, BITNET_ERR_FORMAT, "%s: tensor '%s': %s", ld->path, w->t.name, sub.msg);
            bitnet_gguf_release(ld->g, w->t.data, w->t.nbytes); /* the file's pages of it are not read again */
            w->t.data = w->i2s_owned;
            w->t.nbytes = nbytes;
            rewritten += nbytes;
        }
    }
    if (n_i2s == 0) return BITNET_OK;
    m->i2s_layout = layout;
    const char *name = bitnet_i2s_layout_name(layout);
    int len;
    if (recorded > 0) {
        len = snprintf(m->i2s_note, sizeof m->i2s_note, "I2_S layout %s (recorded in the file%s)", name, prov);
    } else if (requested != BITNET_I2S_LAYOUT_AUTO) {
        len = snprintf(m->i2s_note, sizeof m->i2s_note, "I2_S layout %s (--i2s-layout; the file records none)", name);
    } else {
        len = snprintf(m->i2s_note, sizeof m->i2s_note,
                       "I2_S layout x86 (assumed: the file does not record how its I2_S weights were packed; a file "
                       "quantized by bitnet.cpp on ARM needs --i2s-layout arm64, one by its x86 build without "
                       "ACT_PARALLEL --i2s-layout rows4)");
    }
    if (rewritten && len > 0 && (size_t)len < sizeof m->i2s_note) {
        snprintf(m->i2s_note + len, sizeof m->i2s_note - (size_t)len,
                 ", rewritten to x86 at load (%d tensors, %.1f MB; bitnet-convert --relayout %s writes a file that "
                 "needs no rewrite)",
                 n_i2s, (double)rewritten / 1e6, name);
    }
    return BITNET_OK;
}

/* Distinct (M, K) of the model's LUT weights. shapes: room for n_layer·N_PROJ entries. */
static size_t lut_shapes(const bitnet_model *m, int64_t (*shapes)[2]) {
    size_t n = 0;
    for (int32_t l = m->l_begin; l < m->l_end; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) continue;
            bool seen = false;
            for (size_t i = 0; i < n && !seen; i++) seen = shapes[i][0] == w->M && shapes[i][1] == w->K;
            if (!seen) {
                shapes[n][0] = w->M;
                shapes[n][1] = w->K;
                n++;
            }
        }
    }
    return n;
}

/* The ISA of a kernel: what follows the last "__" of its name ("scalar" without one). */
static const char *isa_of(const char *impl_name) {
    const char *p = impl_name ? strstr(impl_name, "__") : NULL;
    const char *last = p;
    while (p) {
        last = p;
        p = strstr(p + 2, "__");
    }
    return last ? last + 2 : "scalar";
}

/* Where the tiles of the kernels in use came from (for the summary). */
typedef struct tiles_origin {
    bool file;                    /* a TL1/TL2 tensor's bitnet.lut.<name>.tiles key */
    const bitnet_tile_file *user; /* --lut-tiles: the tiles a TL1/TL2 file without tile keys was packed with */
} tiles_origin;

static void write_summary(bitnet_model *m, int target, const bitnet_lut_table *target_table, tiles_origin origin);

/* The tiles `table` lists for (M, K) ({0, 0, 0} when it has none). */
static bitnet_tiles built_tiles(const bitnet_lut_table *table, int64_t M, int64_t K) {
    const bitnet_tiles none = {0, 0, 0};
    for (size_t k = 0; table && k < table->n_entries; k++) {
        if (table->entries[k].M == M && table->entries[k].K == K) return table->entries[k].tiles;
    }
    return none;
}

static bool same_tiles(bitnet_tiles a, bitnet_tiles b) { return a.BM == b.BM && a.BK == b.BK && a.bm == b.bm; }

/* A TL1/TL2 file's recorded tiles must be ones this build has kernels for (issue #3: "loading a
 * TL1/TL2 file whose tiles do not match the built kernels is an error"): when any built tile table
 * (configs/, the same list on every ISA) has the shape (M, K) of `type`, the file's tiles must equal
 * one of its entries; *first is set to the first such table for the message. A shape no table lists
 * runs on the generic kernel, which takes any legal tiles. */
static bool tiles_match_built(int type, int64_t M, int64_t K, bitnet_tiles t, const bitnet_lut_table **first) {
    bool listed = false;
    for (size_t i = 0; i < bitnet_lut_n_tables; i++) {
        const bitnet_lut_table *tab = &bitnet_lut_tables[i];
        if (tab->type != type) continue;
        for (size_t k = 0; k < tab->n_entries; k++) {
            const bitnet_lut_table_entry *e = &tab->entries[k];
            if (e->M != M || e->K != K) continue;
            if (same_tiles(e->tiles, t)) return true;
            if (!listed) *first = tab;
            listed = true;
        }
    }
    return !listed;
}

/* The tiles a stored TL1/TL2 weight was packed with (*tiles), from its bitnet.lut.<name>.tiles key
 * (*have_key) or from the user's table (params.lut_tiles; *user_entry). The byte
 * order of TL1/TL2 data depends on the tiles and bitnet.cpp's files record none, so a tensor without
 * the key is refused unless the user's table lists its shape: tiles are never guessed from a built-in
 * table. A key and a user entry that disagree are refused, naming both. */
static bitnet_status stored_tiles_of(loader *ld, const weight *w, const bitnet_tile_file *user, bitnet_tiles *tiles,
                                     bool *have_key, const bitnet_tile_entry **user_entry) {
    const int stored = w->t.type;
    const char *tn = bitnet_type_name(stored);
    bitnet_status st = file_tiles(ld, w->t.name, tiles, have_key);
    if (st != BITNET_OK) return st;
    const bitnet_tile_entry *ue = bitnet_tile_file_find(user, stored, w->M, w->K);
    *user_entry = ue;
    if (!*have_key && !ue) {
        if (user) {
            return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                               "%s: tensor '%s' (%s, M = %lld, K = %lld): the file records no tile table (no key "
                               "'bitnet.lut.%s.tiles'), and --lut-tiles %s lists no tiles for %lldx%lld: give the tiles "
                               "the file was written with, or use the model's I2_S file, which every path can repack",
                               ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, w->t.name, user->path,
                               (long long)w->M, (long long)w->K);
        }
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' (%s, M = %lld, K = %lld): the file records no tile table (no key "
                           "'bitnet.lut.%s.tiles'; bitnet.cpp's %s files never do), and %s bytes can only be read with "
                           "the tiles they were packed with. Pass those tiles with --lut-tiles FILE (bitnet.cpp's "
                           "include/kernel_config.ini from the setup that wrote the file, or a configs/-style YAML), or "
                           "use the model's I2_S file, which every path can repack",
                           ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, w->t.name, tn, tn);
    }
    if (*have_key && ue && !same_tiles(*tiles, ue->tiles)) {
        return bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                           "%s: tensor '%s' (%s, M = %lld, K = %lld) records tiles BM %d BK %d bm %d (key "
                           "'bitnet.lut.%s.tiles'), but --lut-tiles %s gives BM %d BK %d bm %d (%s): the file's bytes "
                           "follow its recorded tiles; drop --lut-tiles or give a table that agrees",
                           ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, (int)tiles->BM, (int)tiles->BK, (int)tiles->bm,
                           w->t.name, user->path, (int)ue->tiles.BM, (int)ue->tiles.BK, (int)ue->tiles.bm, ue->where);
    }
    if (!*have_key) *tiles = ue->tiles;
    bitnet_error terr;
    if (bitnet_tiles_check(stored, w->M, w->K, *tiles, &terr) != BITNET_OK) {
        if (!*have_key) {
            return bitnet_fail(ld->err, BITNET_ERR_INVALID_ARG,
                               "%s: tensor '%s' (%s, M = %lld, K = %lld): --lut-tiles %s %s gives BM %d BK %d bm %d, "
                               "which %s cannot use: %s",
                               ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, user->path, ue->where,
                               (int)tiles->BM, (int)tiles->BK, (int)tiles->bm, tn, terr.msg);
        }
        return bitnet_fail(ld->err, BITNET_ERR_FORMAT,
                           "%s: tensor '%s' (%s, M = %lld, K = %lld): stored tiles BM %d BK %d bm %d are invalid: %s",
                           ld->path, w->t.name, tn, (long long)w->M, (long long)w->K, (int)tiles->BM, (int)tiles->BK, (int)tiles->bm,
                           terr.msg);
    }
    return BITNET_OK;
}

/* One weight's repacking (bitnet_lut_transform_tensor) with the tiles chosen for it, and its outcome. */
typedef struct transform_job {
    const char *path; /* the model file, for the messages */
    const bitnet_gguf *g; /* its mapping (release_unread_i2s) */
    weight *w;
    bitnet_tiles stored_tiles, tiles;
    int target;
    bitnet_status st;
} transform_job;

typedef struct transform_run {
    transform_job *jobs;
    bitnet_error *errs; /* errs[i]: job i's message */
    int n;
    _Atomic int next; /* the next job to take */
} transform_run;

/* A TL1/TL2 weight repacked from I2_S bytes in the file's mapping reads those bytes no more once repacked, unless
 * it keeps them for the prompt path (i2s_codes, bitnet_lut_uses_int8) with a threshold above 0. The pages of
 * bytes no product reads leave the process's resident set (bitnet_gguf_release: the mapping stays valid, and
 * a later read, after a context raised the threshold, pages them in again from the file); the model then holds
 * one copy of its ternary weights, the repacked one. Bytes outside the mapping (an I2_S copy rewritten at
 * load) are left alone. */
static void release_unread_i2s(const bitnet_gguf *g, const bitnet_tensor *t) {
    const bitnet_tensor_extra *ex = t ? t->extra : NULL;
    if (!ex || t->type != BITNET_TYPE_I2_S || ex->type == BITNET_TYPE_I2_S || (ex->i2s_codes && ex->i2s_min_cols > 0))
        return;
    bitnet_gguf_release(g, t->data, bitnet_i2s_nbytes(ex->shape.M, ex->shape.K));
}

/* A job's transform (its status in j->st, the message in err), and a weight the host attached nothing to is
 * an error. */
static bitnet_status transform_one(transform_job *j, bitnet_error *err) {
    j->st = bitnet_lut_transform_tensor(&j->w->t, &j->stored_tiles, j->target, &j->tiles, err);
    if (j->st == BITNET_OK && !j->w->t.extra)
        j->st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED, "%s: tensor '%s': the LUT host attached no weights", j->path,
                            j->w->t.name);
    if (j->st == BITNET_OK) release_unread_i2s(j->g, &j->w->t);
    return j->st;
}

#ifndef BITNET_BARE_METAL
#include <sched.h>
#include <stdatomic.h>

/* Every thread takes the next job until none is left (the weights differ in size, so no fixed split). */
static void transform_task(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    transform_run *r = arg;
    for (int i; (i = atomic_fetch_add(&r->next, 1)) < r->n;) transform_one(&r->jobs[i], &r->errs[i]);
}
#endif

/* Threads for the repacking at load: the CPUs this process may run on (its affinity mask, at most 64) in a
 * hosted build when the caller uses no arena (an arena belongs to its thread, and the node's arena must hold
 * no job list), else 1. Each weight's repacking is the same either way; the host locks its extras table. */
static int transform_threads(void) {
#ifndef BITNET_BARE_METAL
    cpu_set_t set;
    CPU_ZERO(&set);
    if (bitnet_arena_current() == NULL && sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 1) return n < 64 ? n : 64;
    }
#endif
    return 1;
}

/* The n collected jobs, in parallel on nth threads when every one is an I2_S weight (repacked one tile at a
 * time: the memory in flight is a tile per thread; other stored layouts are decoded whole, M·K bytes per
 * weight, so they run one after another), and one after another when the pool or the messages' memory cannot
 * be had. The first failed job in weight order is the error, its message as bitnet_lut_transform_tensor
 * wrote it, as when the weights are repacked one at a time. */
static bitnet_status run_transforms(loader *ld, transform_job *jobs, int n, int nth) {
#ifndef BITNET_BARE_METAL
    bool all_i2s = true;
    for (int i = 0; i < n; i++) all_i2s = all_i2s && jobs[i].w->t.type == BITNET_TYPE_I2_S;
    if (nth > n) nth = n;
    bitnet_threadpool *tp = NULL;
    bitnet_error terr;
    bitnet_error *errs = all_i2s && nth > 1 ? bitnet_malloc((size_t)n * sizeof *errs) : NULL;
    if (errs && bitnet_threadpool_create(nth, &tp, &terr) == BITNET_OK) {
        transform_run r = {jobs, errs, n, 0};
        bitnet_threadpool_run(tp, transform_task, &r);
        bitnet_threadpool_free(tp);
        bitnet_status st = BITNET_OK;
        for (int i = 0; i < n && st == BITNET_OK; i++)
            if (jobs[i].st != BITNET_OK) st = bitnet_fail(ld->err, jobs[i].st, "%s", errs[i].msg);
        bitnet_free(errs);
        return st;
    }
    bitnet_free(errs);
#endif
    (void)nth;
    for (int i = 0; i < n; i++)
        if (transform_one(&jobs[i], ld->err) != BITNET_OK) return jobs[i].st;
    return BITNET_OK;
}

/* Hand every ternary weight to the LUT host for the model's path, with tiles:
 *  - stored tiles (TL1/TL2 files): stored_tiles_of (the file's key, else the user's table; never a
 *    guess);
 *  - target tiles (TL paths): the stored tiles when the file already has the target layout (recorded
 *    tiles no built table has for the shape are refused unless the user's table confirms them; then,
 *    like tiles given only by the user's table, they run on the generic kernel), else the preferred
 *    covering table, per shape bitnet_lut_tiles_for; a shape without legal tiles → refused naming the
 *    tensor, M and K. */
bitnet_status bitnet_model_prepare_lut_weights(loader *ld, bitnet_model *m, const char *table_name,
                                               const bitnet_tile_file *user) {
    const int target = path_type(m->path);
    const bitnet_lut_table *target_table = NULL;
    if (target != BITNET_TYPE_I2_S) {
        const size_t max_shapes = (size_t)m->hp.n_layer * N_PROJ;
        int64_t (*shapes)[2] = bitnet_malloc(max_shapes * sizeof *shapes);
        if (!shapes) return bitnet_fail(ld->err, BITNET_ERR_NOMEM, "%s: out of memory", ld->path);
        size_t n = lut_shapes(m, shapes);
        target_table = bitnet_lut_find_table(target, (const int64_t(*)[2])shapes, n, table_name);
        bitnet_free(shapes);
    }

    bitnet_status st = BITNET_OK;
    tiles_origin origin = {false, NULL};
    /* several threads: the jobs are collected, then run (run_transforms); one thread, or no memory for the
     * list: each weight at once */
    const int nth = transform_threads();
    transform_job *jobs = nth > 1 ? bitnet_malloc((size_t)(m->l_end - m->l_begin + 1) * N_PROJ * sizeof *jobs) : NULL;
    int n_jobs = 0;
    for (int32_t l = m->l_begin; l < m->l_end && st == BITNET_OK; l++) {
        for (int p = 0; p < N_PROJ && st == BITNET_OK; p++) {
            weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) continue;
            const int stored = w->t.type;
            bitnet_tiles stored_tiles = {0, 0, 0}, tiles = {0, 0, 0};
            bool have_key = false;
            const bitnet_tile_entry *ue = NULL;
            if (stored != BITNET_TYPE_I2_S &&
                (st = stored_tiles_of(ld, w, user, &stored_tiles, &have_key, &ue)) != BITNET_OK)
                break;
            if (target != BITNET_TYPE_I2_S) {
                if (stored == target) {
                    tiles = stored_tiles; /* no repacking */
                    origin.file = origin.file || have_key;
                    if (ue) origin.user = user;
                    const bitnet_lut_table *built = NULL;
                    if (have_key && !ue && !tiles_match_built(target, w->M, w->K, stored_tiles, &built)) {
                        const bitnet_tiles bt = built_tiles(built, w->M, w->K);
                        st = bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                                         "%s: tensor '%s' (%s, M = %lld, K = %lld) was packed with tiles BM %d BK %d "
                                         "bm %d (key 'bitnet.lut.%s.tiles'), but the kernels built for this shape "
                                         "(table %s/%s) use BM %d BK %d bm %d: convert the model again for this "
                                         "build, rebuild the kernels for the file's tiles, pass a --lut-tiles table "
                                         "with these tiles to run them on the generic kernel, or run another path "
                                         "(--kernel i2_s)",
                                         ld->path, w->t.name, bitnet_type_name(stored), (long long)w->M,
                                         (long long)w->K, (int)stored_tiles.BM, (int)stored_tiles.BK, (int)stored_tiles.bm,
                                         w->t.name, built->config, built->table, (int)bt.BM, (int)bt.BK, (int)bt.bm);
                        break;
                    }
                } else {
                    tiles = bitnet_lut_tiles_for(target, w->M, w->K, target_table, table_name);
                    bitnet_error terr;
                    if (bitnet_tiles_check(target, w->M, w->K, tiles, &terr) != BITNET_OK) {
                        st = bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                                         "%s: tensor '%s': no legal %s tiles for M = %lld, K = %lld (%s); use the "
                                         "I2_S path (--kernel i2_s)",
                                         ld->path, w->t.name, bitnet_type_name(target), (long long)w->M,
                                         (long long)w->K, terr.msg);
                        break;
                    }
                }
            }
            if (ld->in_place && (stored != target || (uintptr_t)w->t.data % BITNET_WEIGHT_ALIGN != 0)) {
                if (stored != target) {
                    st = bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                                     "%s: tensor '%s' is %s, but this node uses its weights in place as %s (the layout "
                                     "of the file's first ternary weight): a file that mixes layouts would be repacked "
                                     "into a copy",
                                     ld->path, w->t.name, bitnet_type_name(stored), bitnet_type_name(target));
                } else {
                    st = bitnet_fail(ld->err, BITNET_ERR_UNSUPPORTED,
                                     "%s: tensor '%s' starts at byte %llu of the image, not on a %d-byte boundary: it "
                                     "cannot be used in place (general.alignment %u)",
                                     ld->path, w->t.name,
                                     (unsigned long long)(bitnet_gguf_data_offset(ld->g) +
                                                          bitnet_gguf_find_tensor(ld->g, w->t.name)->offset),
                                     BITNET_WEIGHT_ALIGN, (unsigned)bitnet_gguf_alignment(ld->g));
                }
                break;
            }
            m->lut_used = true; /* from the first transform on, this model holds host extras */
            transform_job job = {ld->path, ld->g, w, stored_tiles, tiles, target, BITNET_OK};
            if (jobs) jobs[n_jobs++] = job;
            else st = transform_one(&job, ld->err);
        }
    }
    if (n_jobs > 0) {
        /* the weights before a refused one are repacked too, so that a failure among them is the error, as
         * when each weight is repacked at once */
        bitnet_error first = {{0}};
        if (st != BITNET_OK && ld->err) first = *ld->err;
        const bitnet_status jst = run_transforms(ld, jobs, n_jobs, nth);
        if (jst != BITNET_OK) st = jst;
        else if (st != BITNET_OK && ld->err) *ld->err = first;
    }
    bitnet_free(jobs);
    if (st != BITNET_OK) return st;
    write_summary(m, target, target_table, origin);
    return BITNET_OK;
}

/* m->summary: per ISA the specialized / generic kernel counts, and where the tiles came from. */
static void write_summary(bitnet_model *m, int target, const bitnet_lut_table *target_table, tiles_origin origin) {
    char *o = m->summary;
    size_t left = sizeof m->summary;
    int n_lut = 0, n_dense = 0;
    const char *isas[8];
    int n_spec[8] = {0}, n_gen[8] = {0}, n_isa = 0;
    for (int32_t l = m->l_begin; l < m->l_end; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            if (!w->lut) {
                n_dense++;
                continue;
            }
            n_lut++;
            if (target == BITNET_TYPE_I2_S) continue;
            const char *isa = isa_of(w->t.extra->impl.name);
            int i = 0;
            while (i < n_isa && strcmp(isas[i], isa) != 0) i++;
            if (i == n_isa && n_isa < 8) isas[n_isa++] = isa;
            if (i < 8) {
                if (w->t.extra->impl.specialized) n_spec[i]++;
                else n_gen[i]++;
            }
        }
    }
    int len = 0;
    if (n_lut && target == BITNET_TYPE_I2_S) {
        len = snprintf(o, left, "I2_S reference path: %d ternary weights", n_lut);
    } else if (n_lut) {
        for (int i = 0; i < n_isa && len >= 0 && (size_t)len < left; i++) {
            len += snprintf(o + len, left - (size_t)len, "%s%s (%s): %d specialized, %d generic kernels", i ? ", " : "",
                           bitnet_type_name(target), isas[i], n_spec[i], n_gen[i]);
        }
        if (len >= 0 && (size_t)len < left) {
            if (origin.user) {
                len += snprintf(o + len, left - (size_t)len, "; tiles from %s--lut-tiles %s (%s)",
                                origin.file ? "the file and " : "", origin.user->path,
                                bitnet_tile_file_format_name(origin.user->format));
            } else if (origin.file) {
                len += snprintf(o + len, left - (size_t)len, "; tiles from the file");
            } else if (target_table) {
                len += snprintf(o + len, left - (size_t)len, "; tiles from table %s/%s", target_table->config,
                               target_table->table);
            } else {
                len += snprintf(o + len, left - (size_t)len, "; no built-in table covers this model: derived tiles");
            }
        }
    }
    m->summary_lut_len = len < 0 ? 0 : (size_t)len < left ? (size_t)len : left - 1;
    m->summary_tail[0] = '\0';
    if (n_dense) {
        snprintf(m->summary_tail, sizeof m->summary_tail, "%sdense float: %d weights (no LUT)", n_lut ? "; " : "",
                 n_dense);
    }
    bitnet_model_summary_batch(m);
}

/* The batch part of m->summary after its LUT part (model_internal.h): which products run the int8 kernel (the
 * I2_S one on the weights' I2_S bytes, or the one on their TL2 bytes), from the thresholds now in their extras. */
void bitnet_model_summary_batch(bitnet_model *m) {
    char *o = m->summary;
    const size_t left = sizeof m->summary;
    size_t len = m->summary_lut_len;
    o[len] = '\0';
    /* distinct thresholds in ascending order, with their weight counts; 0 (never) counted apart */
    int64_t th[8];
    int cnt[8], n_th = 0, n_never = 0, n_with = 0, n_tl2 = 0;
    for (int32_t l = m->l_begin; l < m->l_end; l++) {
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            const bitnet_tensor_extra *ex = w->lut ? w->t.extra : NULL;
            if (!bitnet_lut_has_int8(ex)) continue;
            n_with++;
            n_tl2 += ex->int8_on_tl2;
            if (ex->i2s_min_cols <= 0) {
                n_never++;
                continue;
            }
            int i = 0;
            while (i < n_th && th[i] < ex->i2s_min_cols) i++;
            if (i < n_th && th[i] == ex->i2s_min_cols) {
                cnt[i]++;
            } else if (n_th < 8) {
                memmove(th + i + 1, th + i, sizeof *th * (size_t)(n_th - i));
                memmove(cnt + i + 1, cnt + i, sizeof *cnt * (size_t)(n_th - i));
                th[i] = ex->i2s_min_cols, cnt[i] = 1, n_th++;
            }
        }
    }
    /* every TL2 weight of a model has the same int8 path (bitnet_lut_transform_tensor decides it per CPU) */
    char kern[64];
    if (n_tl2 > 0)
        snprintf(kern, sizeof kern, "the int8 kernel on the TL2 bytes (%s)", bitnet_tl2_i8_isa());
    else
        snprintf(kern, sizeof kern, "the I2_S int8 kernel (%s)", bitnet_i2s_isa());
    int r = 0;
    if (n_th == 1 && n_never == 0) {
        r = snprintf(o + len, left - len, "; products of >= %lld columns%s run %s on %d weights", (long long)th[0],
                     th[0] > 1 ? " (prompt batches)" : " (every product)", kern, n_with);
    } else if (n_th > 0) {
        r = snprintf(o + len, left - len, "; %s runs products of >= N columns:", kern);
        for (int i = 0; i < n_th && r >= 0 && len + (size_t)r < left; i++)
            r += snprintf(o + len + (size_t)r, left - len - (size_t)r, "%s N >= %lld on %d weights", i ? "," : "",
                          (long long)th[i], cnt[i]);
        if (n_never && r >= 0 && len + (size_t)r < left)
            r += snprintf(o + len + (size_t)r, left - len - (size_t)r, ", never on %d", n_never);
    }
    if (r > 0) len = len + (size_t)r < left ? len + (size_t)r : left - 1;
    snprintf(o + len, left - len, "%s", m->summary_tail);
}

#ifndef BITNET_BARE_METAL
#include <time.h>

#include "runtime/kchoice.h"

static bitnet_status choose_kernels_now(bitnet_model *m, bitnet_threadpool *tp, int nth, char *note, size_t cap,
                                        bitnet_error *err);

/* Two weights with an int8 path (bitnet_lut_has_int8) of the same layout, shape, tiles and int8 kernel. */
static bool same_group(const bitnet_tensor_extra *a, const bitnet_tensor_extra *b) {
    return a->type == b->type && a->int8_on_tl2 == b->int8_on_tl2 && a->shape.M == b->shape.M && a->shape.K == b->shape.K && a->shape.BM == b->shape.BM &&
           a->shape.BK == b->shape.BK && a->shape.bm == b->shape.bm;
}

/* 1 ms (the wait for another thread's choice) */
static void kchoice_nap(void) {
    const struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

bitnet_status bitnet_model_choose_kernels(bitnet_model *m, bitnet_threadpool *tp, bool alone, char *note, size_t cap,
                                          bitnet_error *err) {
    if (note && cap) note[0] = '\0';
    if (!m || !tp) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_model_choose_kernels: NULL model or pool");
    const int nth = bitnet_threadpool_n_threads(tp);
    if (bitnet_lut_i2s_min_cols_fixed()) return BITNET_OK;
    /* under an arena (a microcontroller node's, bitnet_mcu_open) the measurement's buffers are not in the node's
     * memory plan: the weights keep their transform-time thresholds, as in the bare-metal build */
    if (bitnet_arena_current() != NULL) return BITNET_OK;
    /* kchoice_state: 0 never chosen, 1 a thread is choosing (every other creator waits), 2 chosen. Only a
     * context with no other context alive on the model chooses, so no product runs while thresholds change. */
    for (;;) {
        int s = atomic_load(&m->kchoice_state);
        if (s == 1) {
            kchoice_nap();
            continue;
        }
        if (!alone || (s == 2 && m->kchoice_threads == nth)) return BITNET_OK;
        if (atomic_compare_exchange_strong(&m->kchoice_state, &s, 1)) break;
    }
    const bitnet_status st = choose_kernels_now(m, tp, nth, note, cap, err);
    atomic_store(&m->kchoice_state, 2);
    return st;
}

static bitnet_status choose_kernels_now(bitnet_model *m, bitnet_threadpool *tp, int nth, char *note, size_t cap,
                                        bitnet_error *err) {
    /* every weight with an int8 batch path, grouped by (layout, shape, tiles, int8 kernel) */
    int n = 0;
    for (int32_t l = m->l_begin; l < m->l_end; l++)
        for (int p = 0; p < N_PROJ; p++) {
            const weight *w = layer_proj(&m->layers[l], p);
            const bitnet_tensor_extra *ex = w->lut ? w->t.extra : NULL;
            if (bitnet_lut_has_int8(ex)) n++;
        }
    if (n == 0) return BITNET_OK;
    bitnet_tensor **all = bitnet_malloc((size_t)n * sizeof *all), **grp = bitnet_malloc((size_t)n * sizeof *grp);
    bool *done = bitnet_calloc((size_t)n, sizeof *done);
    if (!all || !grp || !done) {
        bitnet_free(all), bitnet_free(grp), bitnet_free(done);
        return bitnet_fail(err, BITNET_ERR_NOMEM, "out of memory choosing the kernels");
    }
    n = 0;
    for (int32_t l = m->l_begin; l < m->l_end; l++)
        for (int p = 0; p < N_PROJ; p++) {
            weight *w = layer_proj(&m->layers[l], p);
            const bitnet_tensor_extra *ex = w->lut ? w->t.extra : NULL;
            if (bitnet_lut_has_int8(ex)) all[n++] = &w->t;
        }
    char path_buf[1024], key[512];
    const char *path = bitnet_kchoice_cache_path(path_buf, sizeof path_buf);
    int n_shapes = 0, n_measured = 0, n_unsaved = 0;
    bool failed = false;
    double seconds = 0.0;
    for (int i = 0; i < n; i++) {
        if (done[i]) continue;
        int g = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && same_group(all[i]->extra, all[j]->extra)) {
                grp[g++] = all[j];
                done[j] = true;
            }
        const bitnet_tensor_extra *ex = all[i]->extra;
        bitnet_kchoice c;
        memset(&c, 0, sizeof c);
        c.type = ex->type, c.M = ex->shape.M, c.K = ex->shape.K;
        c.BM = ex->shape.BM, c.BK = ex->shape.BK, c.bm = ex->shape.bm, c.n_threads = nth;
        c.int8_on_tl2 = ex->int8_on_tl2;
        bitnet_kchoice_key(&c, ex->impl.name, key, sizeof key);
        int64_t v = 0;
        if (!bitnet_kchoice_cache_get(path, key, &v)) {
            bitnet_error merr = {0};
            if (bitnet_kchoice_measure(grp, g, tp, &c, &merr) != BITNET_OK) {
                /* speed only: the weights keep their thresholds and the context is made all the same */
                if (note && cap) snprintf(note, cap, "kernel per batch size: not measured (%s)", merr.msg);
                failed = true;
                break;
            }
            v = c.i2s_min_cols;
            seconds += c.seconds;
            n_measured++;
            if (!bitnet_kchoice_cache_put(path, key, v)) n_unsaved++;
        }
        for (int j = 0; j < g; j++) {
            grp[j]->extra->i2s_min_cols = v;
            release_unread_i2s(m->gguf, grp[j]); /* the measurement may have read them */
        }
        n_shapes++;
    }
    bitnet_free(all), bitnet_free(grp), bitnet_free(done);
    m->kchoice_threads = nth;
    bitnet_model_summary_batch(m);
    if (note && cap && !failed) {
        if (n_measured == 0) {
            snprintf(note, cap, "kernel per batch size: %d shapes at %d threads read from %s", n_shapes, nth, path);
        } else {
            snprintf(note, cap, "kernel per batch size: measured %d of %d shapes at %d threads in %.2f s%s%s%s",
                     n_measured, n_shapes, nth, seconds, !path ? " (no cache file)" : n_unsaved ? "; could not write " : "; recorded in ",
                     path && n_unsaved ? path : "", path && !n_unsaved ? path : "");
        }
    }
    return BITNET_OK;
}
#else
bitnet_status bitnet_model_choose_kernels(bitnet_model *m, bitnet_threadpool *tp, bool alone, char *note, size_t cap,
                                          bitnet_error *err) {
    (void)m, (void)tp, (void)alone, (void)err;
    if (note && cap) note[0] = '\0';
    return BITNET_OK;
}
#endif
