/* bitnet-convert — command-line front end of the HF → GGUF converter (src/convert/hf_convert.h), the C core of
 * utils/convert-hf-to-gguf-bitnet.py. A progress bar goes to stderr (one line redrawn on a terminal,
 * a line per 10% otherwise).
 * Exit status: 0 written; 1 conversion failed (the message names the file, tensor, key or value; no
 * output file is left behind); 2 bad command line. */
#include "convert/hf_convert.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TILES 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: bitnet-convert MODEL_DIR -o PATH [--outtype f32|f16|i2_s|tl1|tl2] [options]\n"
            "\n"
            "Converts a Hugging Face checkpoint (config.json, *.safetensors or a sharded index,\n"
            "tokenizer.json or tokenizer.model) of a ternary model to a BitNet GGUF.\n"
            "\n"
            "  -o, --outfile PATH      output file (written through PATH.tmp, renamed at the end)\n"
            "  --outtype T             f32, f16, i2_s, tl1 or tl2 (default i2_s): the type of every\n"
            "                          projection weight\n"
            "  --quant-embd [T]        token_embd.weight as f16 (T omitted: bitnet.cpp's flag), q8_0 or\n"
            "                          q6_k (ggml's reference quantizers; q6_k is what llama-quantize\n"
            "                          --token-embedding-type q6_k writes); default: F32, for i2_s F16\n"
            "                          (Q8_0 when n_embd %% 256 != 0). Refused when n_embd is not a\n"
            "                          multiple of the type's block (q6_k 256, q8_0 32). An untied\n"
            "                          output.weight keeps its default. With --outtype f32 (all F32)\n"
            "                          f16 changes nothing and q8_0/q6_k are refused\n"
            "  --force                 ternarize weights of a plain (non-BitNet) checkpoint that are not\n"
            "                          ternary already (changes what the model computes)\n"
            "  --name NAME             general.name (default: the folder's name)\n"
            "  --tiles M,K,BM,BK,bm    TL1/TL2 tiles for weight shape MxK (repeatable; default: the built-in\n"
            "                          table covering the model, else the default tile rule)\n"
            "  --lut-table NAME        default or pretuned: preferred built-in tile table (default default)\n"
            "  -q, --quiet             no progress output\n"
            "  -h, --help              this text\n");
}

static int bad(const char *fmt, const char *a) {
    fprintf(stderr, "bitnet-convert: ");
    fprintf(stderr, fmt, a);
    fprintf(stderr, "\n(run bitnet-convert --help for usage)\n");
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

typedef struct progress_state {
    bool tty;
    int last_pct;
    int64_t last_tensor;
} progress_state;

static void on_progress(void *user, int64_t ti, int64_t nt, const char *name, uint64_t done, uint64_t total) {
    progress_state *ps = (progress_state *)user;
    const int pct = total ? (int)(done * 100 / total) : 100;
    if (ps->tty) {
        if (pct == ps->last_pct && ti == ps->last_tensor) return;
        char bar[31];
        const int fill = pct * 30 / 100;
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\rbitnet-convert: [%s] %3d%% tensor %lld/%lld %-32.32s", bar, pct, (long long)ti + 1,
                (long long)nt, name);
        if (done == total) fprintf(stderr, "\n");
    } else {
        if (pct / 10 == ps->last_pct / 10 && done != total) return;
        if (pct == ps->last_pct) return;
        fprintf(stderr, "bitnet-convert: %3d%% (%.1f of %.1f MiB) tensor %lld/%lld %s\n", pct, (double)done / 1048576.0,
                (double)total / 1048576.0, (long long)ti + 1, (long long)nt, name);
    }
    ps->last_pct = pct;
    ps->last_tensor = ti;
}

int main(int argc, char **argv) {
    bitnet_convert_params p;
    bitnet_convert_params_init(&p);
    bool quiet = false;
    bitnet_dummy_shape_tiles tiles[MAX_TILES];
    size_t n_tiles = 0;
    const char *outtype = "i2_s";

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (!strcmp(a, "--quant-embd") || !strncmp(a, "--quant-embd=", 13)) {
            /* The value is optional ("--quant-embd" alone = f16, bitnet.cpp's flag, also before MODEL_DIR):
             * a following word is taken as the value when it is one, or when it is no option and names
             * no existing file or directory (then it is reported as a bad value). */
            const char *t = "f16";
            struct stat sb;
            int ty;
            if (a[12] == '=') t = a + 13;
            else if (val && (bitnet_dummy_embd_type_parse(val, &ty) || (val[0] != '-' && stat(val, &sb) != 0)))
                t = argv[++i];
            if (!bitnet_dummy_embd_type_parse(t, &p.embd_type))
                return bad("--quant-embd: '%s' is not one of f16, q8_0, q6_k", t);
        } else if (!strcmp(a, "--force")) {
            p.force = true;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--outfile") || !strcmp(a, "--outtype") || !strcmp(a, "--name") ||
                   !strcmp(a, "--tiles") || !strcmp(a, "--lut-table")) {
            if (!val) return bad("%s needs a value", a);
            i++;
            if (!strcmp(a, "-o") || !strcmp(a, "--outfile")) {
                p.outfile = val;
            } else if (!strcmp(a, "--outtype")) {
                if (!bitnet_dummy_outtype_parse(val, &p.outtype))
                    return bad("--outtype: '%s' is not one of f32, f16, i2_s, tl1, tl2", val);
                outtype = val;
            } else if (!strcmp(a, "--name")) {
                p.name = val;
            } else if (!strcmp(a, "--lut-table")) {
                if (strcmp(val, "default") != 0 && strcmp(val, "pretuned") != 0)
                    return bad("--lut-table: '%s' is neither default nor pretuned", val);
                p.lut_table = val;
            } else { /* --tiles M,K,BM,BK,bm */
                if (n_tiles == MAX_TILES) return bad("--tiles given more than %s times", "64");
                int64_t f[5];
                char buf[128];
                if (strlen(val) >= sizeof buf) return bad("--tiles: '%s' is too long", val);
                strcpy(buf, val);
                int nf = 0;
                bool ok = true;
                for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
                    if (nf == 5 || !parse_i64(tok, 1, INT32_MAX, &f[nf])) ok = false;
                    nf++;
                }
                if (!ok || nf != 5) return bad("--tiles: '%s' is not M,K,BM,BK,bm (five positive integers)", val);
                tiles[n_tiles].M = f[0];
                tiles[n_tiles].K = f[1];
                tiles[n_tiles].tiles.BM = (int32_t)f[2];
                tiles[n_tiles].tiles.BK = (int32_t)f[3];
                tiles[n_tiles].tiles.bm = (int32_t)f[4];
                n_tiles++;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            return bad("unknown argument '%s'", a);
        } else if (!p.model_dir) {
            p.model_dir = a;
        } else {
            return bad("more than one MODEL_DIR ('%s')", a);
        }
    }
    if (!p.model_dir) return bad("missing MODEL_DIR%s", "");
    if (!p.outfile) return bad("missing -o/--outfile PATH%s", "");
    p.tiles = tiles;
    p.n_tiles = n_tiles;
    /* f32 files hold every tensor in F32: f16 (what the bare flag means) leaves them so, as bitnet.cpp's
     * converter does with --outtype f32 --quant-embd; q8_0/q6_k there are refused */
    if (p.outtype == BITNET_DUMMY_F32 && p.embd_type == BITNET_TYPE_F16) p.embd_type = 0;
    if (p.outtype == BITNET_DUMMY_F32 && p.embd_type != 0)
        return bad("--quant-embd %s: --outtype f32 writes every tensor as F32 (choose f16, i2_s, tl1 or tl2)",
                   p.embd_type == BITNET_TYPE_Q6_K ? "q6_k" : "q8_0");

    progress_state ps = {isatty(2) != 0, -1, -1};
    if (!quiet) {
        p.progress = on_progress;
        p.progress_user = &ps;
        fprintf(stderr, "bitnet-convert: converting %s to %s (%s)\n", p.model_dir, p.outfile, outtype);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bitnet_error err = {{0}};
    char *summary = NULL;
    if (bitnet_convert_hf(&p, &summary, &err) != BITNET_OK) {
        if (!quiet && ps.tty && ps.last_pct >= 0) fprintf(stderr, "\n");
        fprintf(stderr, "bitnet-convert: %s\n", err.msg);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!quiet)
        fprintf(stderr, "bitnet-convert: wrote %s in %.1f s: %s\n", p.outfile,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), summary);
    free(summary);
    return 0;
}
