/* bitnet-dummy — command-line front end of the dummy-model writer (src/convert/dummy_model.h): writes a GGUF
 * of architecture "bitnet" (default), "bitnet-b1.58", "bitnet-25" or "llama" of the given dimensions
 * with seeded random ternary weights.
 * utils/generate-dummy-bitnet-model.py calls it with the named size layouts. Progress goes to stderr.
 * Exit status: 0 written; 1 generation failed (I/O, memory; the message names what); 2 bad command line
 * or a parameter combination the writer refuses (the message names the value). */
#include "convert/dummy_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TILES 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: bitnet-dummy -o PATH --n-embd N --n-ff N --n-layer N --n-head N [options]\n"
            "\n"
            "Writes a dummy BitNet model (GGUF) with seeded random ternary weights.\n"
            "The same seed gives the same ternary weights in every outtype.\n"
            "\n"
            "  -o, --outfile PATH      output file (written through PATH.tmp)\n"
            "  --n-embd N              hidden size\n"
            "  --n-ff N                feed-forward size\n"
            "  --n-layer N             number of layers\n"
            "  --n-head N              attention heads\n"
            "  --n-head-kv N           key/value heads (default: --n-head)\n"
            "  --ctx N                 <arch>.context_length (default 2048)\n"
            "  --arch NAME             bitnet (default), bitnet-b1.58, bitnet-25 or llama\n"
            "  --n-embd-head N         head size (default n_embd / n_head; another value is written as\n"
            "                          <arch>.attention.key_length/value_length; not for bitnet)\n"
            "  --rope-theta F          <arch>.rope.freq_base (default 10000)\n"
            "  --output-weight         write a separate output.weight (default: tied to token_embd)\n"
            "  --outtype T             f32, f16, i2_s, tl1 or tl2 (default i2_s)\n"
            "  --quant-embd [T]        token_embd.weight as f16 (T omitted), q8_0 or q6_k (ggml's\n"
            "                          quantizers) instead of the default F16/Q8_0 rule; output.weight\n"
            "                          keeps the rule. Refused when n_embd is not a multiple of the\n"
            "                          type's block (q6_k 256, q8_0 32); with --outtype f32 (all F32)\n"
            "                          f16 changes nothing and q8_0/q6_k are refused\n"
            "  --seed N                PRNG seed, unsigned 64-bit (default 0)\n"
            "  --vocab-size N          size of the built-in vocabulary (default 32002, at least 259)\n"
            "  --vocab-from GGUF       copy the vocabulary of another GGUF file instead\n"
            "  --tiles M,K,BM,BK,bm    TL1/TL2 tiles for weight shape MxK (repeat per shape; shapes not\n"
            "                          given use the default tile rule of `python3 -m codegen derive`)\n"
            "  --no-tile-record        TL1/TL2: write no bitnet.lut.<tensor>.tiles keys, as bitnet.cpp's\n"
            "                          writers do (such a file loads only with the tools' --lut-tiles)\n"
            "  --name NAME             general.name (default \"bitnet-dummy\")\n"
            "  -q, --quiet             no progress output\n"
            "  -h, --help              this text\n");
}

static int bad(const char *fmt, const char *a, const char *b) {
    fprintf(stderr, "bitnet-dummy: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n(run bitnet-dummy --help for usage)\n");
    return 2;
}

static bool parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end) return false;
    *out = v;
    return true;
}

typedef struct progress_state {
    bool tty;
    int last_pct;
    int64_t last_tensor;
} progress_state;

static void on_progress(void *user, int64_t ti, int64_t nt, const char *name, uint64_t done, uint64_t total) {
    progress_state *ps = (progress_state *)user;
    int pct = total ? (int)(done * 100 / total) : 100;
    if (ps->tty) {
        if (pct == ps->last_pct && ti == ps->last_tensor) return;
        fprintf(stderr, "\rbitnet-dummy: %3d%% tensor %lld/%lld %-40s", pct, (long long)ti + 1, (long long)nt, name);
        if (done == total) fprintf(stderr, "\n");
    } else {
        if (pct / 10 == ps->last_pct / 10 && done != total) return;
        if (pct == ps->last_pct) return;
        fprintf(stderr, "bitnet-dummy: %3d%% (%.1f of %.1f MiB) tensor %lld/%lld %s\n", pct, (double)done / 1048576.0,
                (double)total / 1048576.0, (long long)ti + 1, (long long)nt, name);
    }
    ps->last_pct = pct;
    ps->last_tensor = ti;
}

int main(int argc, char **argv) {
    bitnet_dummy_params p;
    bitnet_dummy_params_init(&p);
    const char *out = NULL, *vocab_from = NULL;
    bool quiet = false, have_vocab_size = false;
    bitnet_dummy_shape_tiles tiles[MAX_TILES];
    size_t n_tiles = 0;
    struct {
        const char *flag;
        int32_t *dst;
        int64_t lo;
    } dims[] = {
        {"--n-embd", &p.n_embd, 1}, {"--n-ff", &p.n_ff, 1},         {"--n-layer", &p.n_layer, 1},
        {"--n-head", &p.n_head, 1}, {"--n-head-kv", &p.n_head_kv, 1}, {"--ctx", &p.n_ctx, 1},
        {"--vocab-size", &p.n_vocab, 259}, {"--n-embd-head", &p.n_embd_head, 2},
    };
    const size_t n_dims = sizeof dims / sizeof dims[0];

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
            continue;
        }
        if (!strcmp(a, "--output-weight")) {
            p.output_separate = true;
            continue;
        }
        if (!strcmp(a, "--no-tile-record")) {
            p.no_tile_record = true;
            continue;
        }
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quant-embd") || !strncmp(a, "--quant-embd=", 13)) {
            /* the value is optional: "--quant-embd" alone means f16 (bitnet.cpp's flag) */
            const char *t = a[12] == '=' ? a + 13 : val && val[0] != '-' ? argv[++i] : "f16";
            if (!bitnet_dummy_embd_type_parse(t, &p.embd_type))
                return bad("--quant-embd: '%s' is not one of f16, q8_0, q6_k%s", t, "");
            continue;
        }
        bool matched = false;
        for (size_t d = 0; d < n_dims; d++) {
            if (strcmp(a, dims[d].flag)) continue;
            matched = true;
            int64_t v;
            if (!val) return bad("%s needs a value%s", a, "");
            if (!parse_i64(val, dims[d].lo, INT32_MAX, &v))
                return bad("%s: '%s' is not an integer in the allowed range", a, val);
            *dims[d].dst = (int32_t)v;
            if (!strcmp(a, "--vocab-size")) have_vocab_size = true;
            i++;
        }
        if (matched) continue;
        if (!strcmp(a, "-o") || !strcmp(a, "--outfile") || !strcmp(a, "--outtype") || !strcmp(a, "--seed") ||
            !strcmp(a, "--vocab-from") || !strcmp(a, "--tiles") || !strcmp(a, "--name") || !strcmp(a, "--arch") ||
            !strcmp(a, "--rope-theta")) {
            if (!val) return bad("%s needs a value%s", a, "");
            i++;
            if (!strcmp(a, "-o") || !strcmp(a, "--outfile")) {
                out = val;
            } else if (!strcmp(a, "--outtype")) {
                if (!bitnet_dummy_outtype_parse(val, &p.outtype))
                    return bad("--outtype: '%s' is not one of f32, f16, i2_s, tl1, tl2%s", val, "");
            } else if (!strcmp(a, "--seed")) {
                if (!parse_u64(val, &p.seed)) return bad("--seed: '%s' is not an unsigned 64-bit integer%s", val, "");
            } else if (!strcmp(a, "--vocab-from")) {
                vocab_from = val;
            } else if (!strcmp(a, "--name")) {
                p.name = val;
            } else if (!strcmp(a, "--arch")) {
                if (!bitnet_dummy_arch_parse(val, &p.arch))
                    return bad("--arch: '%s' is not one of bitnet, bitnet-b1.58, bitnet-25, llama%s", val, "");
            } else if (!strcmp(a, "--rope-theta")) {
                char *end;
                errno = 0;
                double th = strtod(val, &end);
                if (errno || *end || end == val || !(th > 0.0) || th > 3.0e38)
                    return bad("--rope-theta: '%s' is not a positive number%s", val, "");
                p.rope_freq_base = (float)th;
            } else { /* --tiles M,K,BM,BK,bm */
                if (n_tiles == MAX_TILES) return bad("--tiles given more than %s times%s", "64", "");
                int64_t f[5];
                char buf[128];
                if (strlen(val) >= sizeof buf) return bad("--tiles: '%s' is too long%s", val, "");
                strcpy(buf, val);
                int nf = 0;
                bool ok = true;
                for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                    if (nf == 5 || !parse_i64(tok, 1, INT32_MAX, &f[nf])) ok = false;
                    nf++;
                }
                if (!ok || nf != 5) return bad("--tiles: '%s' is not M,K,BM,BK,bm (five positive integers)%s", val, "");
                tiles[n_tiles].M = f[0];
                tiles[n_tiles].K = f[1];
                tiles[n_tiles].tiles.BM = (int32_t)f[2];
                tiles[n_tiles].tiles.BK = (int32_t)f[3];
                tiles[n_tiles].tiles.bm = (int32_t)f[4];
                n_tiles++;
            }
            continue;
        }
        return bad("unknown argument '%s'%s", a, "");
    }
    if (!out) return bad("missing -o/--outfile PATH%s%s", "", "");
    const char *required[] = {"--n-embd", "--n-ff", "--n-layer", "--n-head"};
    for (size_t d = 0; d < 4; d++)
        if (*dims[d].dst == 0) return bad("missing %s N%s", required[d], "");
    if (vocab_from && have_vocab_size) return bad("--vocab-size and --vocab-from exclude each other%s%s", "", "");
    if (n_tiles && p.outtype != BITNET_DUMMY_TL1 && p.outtype != BITNET_DUMMY_TL2)
        return bad("--tiles only applies to --outtype tl1 or tl2 (outtype is %s)%s", bitnet_dummy_outtype_name(p.outtype), "");
    p.tiles = tiles;
    p.n_tiles = n_tiles;
    /* f32 files hold every tensor in F32: f16 (what the bare flag means) leaves them so, as bitnet.cpp's
     * converter does; q8_0/q6_k there are refused */
    if (p.outtype == BITNET_DUMMY_F32 && p.embd_type == BITNET_TYPE_F16) p.embd_type = 0;
    if (p.outtype == BITNET_DUMMY_F32 && p.embd_type != 0)
        return bad("--quant-embd %s: --outtype f32 writes every tensor as F32 (choose f16, i2_s, tl1 or tl2)%s",
                   p.embd_type == BITNET_TYPE_Q6_K ? "q6_k" : "q8_0", "");

    bitnet_error err = {{0}};
    bitnet_dummy_vocab *vocab = NULL;
    if (vocab_from) {
        if (bitnet_dummy_vocab_from_gguf(vocab_from, &vocab, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-dummy: --vocab-from: %s\n", err.msg);
            return 1;
        }
        p.vocab = vocab;
    }

    progress_state ps = {isatty(2) != 0, -1, -1};
    if (!quiet) {
        p.progress = on_progress;
        p.progress_user = &ps;
        int32_t n_kv = p.n_head_kv ? p.n_head_kv : p.n_head;
        fprintf(stderr,
                "bitnet-dummy: writing %s: arch %s, n_embd %d, n_ff %d, n_layer %d, n_head %d, n_head_kv %d, "
                "outtype %s, seed %llu, vocab %s\n",
                out, bitnet_dummy_arch_name(p.arch), (int)p.n_embd, (int)p.n_ff, (int)p.n_layer, (int)p.n_head, (int)n_kv,
                bitnet_dummy_outtype_name(p.outtype), (unsigned long long)p.seed, vocab_from ? vocab_from : "built-in");
        if (p.outtype == BITNET_DUMMY_TL1 || p.outtype == BITNET_DUMMY_TL2) {
            /* Say which tiles each shape gets (given or the default rule). */
            int64_t hd = p.n_embd_head > 0 ? p.n_embd_head : p.n_head > 0 ? p.n_embd / p.n_head : 0;
            const int64_t shapes[5][2] = {{hd * p.n_head, p.n_embd}, {p.n_embd, hd * p.n_head}, {hd * n_kv, p.n_embd},
                                          {p.n_ff, p.n_embd}, {p.n_embd, p.n_ff}};
            for (int s = 0; s < 5; s++) {
                bool dup = false;
                for (int q = 0; q < s; q++) dup = dup || (shapes[q][0] == shapes[s][0] && shapes[q][1] == shapes[s][1]);
                if (dup) continue;
                bitnet_tiles t;
                bitnet_error e2;
                if (bitnet_dummy_tiles_for(&p, bitnet_dummy_ternary_type(p.outtype), shapes[s][0], shapes[s][1], &t, &e2) ==
                    BITNET_OK) {
                    bool given = false;
                    for (size_t k = 0; k < n_tiles; k++) given = given || (tiles[k].M == shapes[s][0] && tiles[k].K == shapes[s][1]);
                    fprintf(stderr, "bitnet-dummy: tiles %lldx%lld: BM %d, BK %d, bm %d (%s)\n", (long long)shapes[s][0],
                            (long long)shapes[s][1], (int)t.BM, (int)t.BK, (int)t.bm, given ? "given" : "default rule");
                }
            }
        }
    }
    bitnet_status s = bitnet_dummy_write(&p, out, &err);
    bitnet_dummy_vocab_free(vocab);
    if (s != BITNET_OK) {
        if (ps.tty && !quiet && ps.last_pct >= 0) fprintf(stderr, "\n");
        fprintf(stderr, "bitnet-dummy: %s: %s (%s)\n", out, err.msg, bitnet_status_name(s));
        return s == BITNET_ERR_INVALID_ARG ? 2 : 1;
    }
    if (!quiet) fprintf(stderr, "bitnet-dummy: wrote %s\n", out);
    return 0;
}
