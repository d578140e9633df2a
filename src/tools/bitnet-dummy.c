/* bitnet-dummy — command-line front end of the dummy-model writer (src/convert/dummy_model.h): writes a GGUF
 * of any architecture of base/arch.c's table ("bitnet" by default) of the given dimensions with seeded
 * random ternary weights.
 * utils/generate-dummy-bitnet-model.py calls it with the named size layouts. Progress goes to stderr.
 * Exit status (args.h): 0 written; 1 generation failed (I/O, memory; the message names what); 2 bad command line
 * or a parameter combination the writer refuses (the message names the value). */
#include "base/arch.h"
#include "convert/dummy_model.h"
#include "tools/common/args.h"
#include "tools/common/writer_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *k_description =
    "Writes a dummy BitNet model (GGUF) with seeded random ternary weights.\n"
    "The same seed gives the same ternary weights in every outtype.\n"
    "--arch qwen3 / gemma3 write the embedding models' layout (docs/EMBEDDINGS.md):\n"
    "no output.weight, QK head norms, the <proj>_norm_in norms (unless --no-norm-in),\n"
    "Gemma3's post-norms, <arch>.pooling_type, tokenizer.ggml.add_eos_token = true;\n"
    "give them --n-embd-head (BitNet-embedding-0.6B: 128, -270M: 256).\n";

static int on_arch(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val) {
    (void)flag;
    char names[256];
    if (!bitnet_dummy_arch_parse(val, opt->dst))
        return bitnet_args_fail(args, "--arch: '%s' is not one of %s", val,
                                bitnet_arch_list(names, sizeof names, "", ", ", ", "));
    return 0;
}

/* --rope-theta, --rms-eps, --rope-freq-base-swa: a positive float */
static int on_positive_float(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val) {
    double th;
    if (!bitnet_args_to_double(val, 0.0, 3.0e38, &th) || !(th > 0.0))
        return bitnet_args_fail(args, "%s: '%s' is not a positive number", flag, val);
    *(float *)opt->dst = (float)th;
    return 0;
}

static int on_pooling(const bitnet_args *args, const bitnet_arg_opt *opt, const char *flag, const char *val) {
    if (!bitnet_dummy_pooling_parse(val, opt->dst))
        return bitnet_args_fail(args, "%s: '%s' is not one of none, mean, cls, last", flag, val);
    return 0;
}

/* The names of the table's rows for which has(row) holds, "a, b" (for the refusals below). */
static const char *arch_names_where(char *buf, size_t n, bool (*has)(const bitnet_arch_info *)) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < bitnet_arch_count() && used < n; i++) {
        if (!has(bitnet_arch_at(i))) continue;
        int w = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", bitnet_arch_at(i)->name);
        if (w < 0) break;
        used += (size_t)w;
    }
    return buf;
}
static bool has_norm_in(const bitnet_arch_info *a) { return a->norm_in; }
static bool is_embedding(const bitnet_arch_info *a) {
    return a->graph == BITNET_ARCH_QWEN3 || a->graph == BITNET_ARCH_GEMMA3;
}
static bool is_gemma3(const bitnet_arch_info *a) { return a->graph == BITNET_ARCH_GEMMA3; }

/* The embedding-model flags on an arch they mean nothing for, named by flag (the writer refuses them
 * too, naming its parameter). */
static int check_arch_flags(const bitnet_args *args, const bitnet_dummy_params *p, bool pooling_given) {
    const bitnet_arch_info *a = bitnet_arch_at((size_t)p->arch);
    char names[128];
    if (p->no_norm_in && !a->norm_in)
        return bitnet_args_fail(args, "--no-norm-in: architecture %s has no <proj>_norm_in tensors (only %s have "
                                "them)", a->name, arch_names_where(names, sizeof names, has_norm_in));
    if (pooling_given && !is_embedding(a))
        return bitnet_args_fail(args, "--pooling: architecture %s files have no pooling_type key (only %s)", a->name,
                                arch_names_where(names, sizeof names, is_embedding));
    if (p->output_separate && is_embedding(a))
        return bitnet_args_fail(args, "--output-weight: architecture %s files have no output.weight (embedding models "
                                "do not generate)", a->name);
    const struct { const char *flag; bool set; } swa[] = {{"--swa", p->n_swa > 0},
                                                          {"--swa-pattern", p->swa_pattern > 0},
                                                          {"--rope-freq-base-swa", p->rope_freq_base_swa > 0}};
    for (size_t i = 0; i < sizeof swa / sizeof swa[0]; i++)
        if (swa[i].set && !is_gemma3(a))
            return bitnet_args_fail(args, "%s: architecture %s has no sliding-window layers (only %s)", swa[i].flag,
                                    a->name, arch_names_where(names, sizeof names, is_gemma3));
    return 0;
}

/* "--quant-embd" alone means f16 (bitnet.cpp's flag): the next word is its value unless it is an option */
static bool quant_embd_takes(const char *next) {
    return next[0] != '-';
}

/* Says which tiles each projection shape of a TL1/TL2 file gets (given or the default rule). */
static void report_tiles(const bitnet_dummy_params *p, const bitnet_tool_tile_list *tiles) {
    const int32_t n_kv = p->n_head_kv ? p->n_head_kv : p->n_head;
    int64_t hd = p->n_embd_head > 0 ? p->n_embd_head : p->n_head > 0 ? p->n_embd / p->n_head : 0;
    const int64_t shapes[5][2] = {{hd * p->n_head, p->n_embd}, {p->n_embd, hd * p->n_head}, {hd * n_kv, p->n_embd},
                                  {p->n_ff, p->n_embd}, {p->n_embd, p->n_ff}};
    for (int s = 0; s < 5; s++) {
        bool dup = false;
        for (int q = 0; q < s; q++) dup = dup || (shapes[q][0] == shapes[s][0] && shapes[q][1] == shapes[s][1]);
        if (dup) continue;
        bitnet_tiles t;
        bitnet_error e2;
        if (bitnet_dummy_tiles_for(p, bitnet_dummy_ternary_type(p->outtype), shapes[s][0], shapes[s][1], &t, &e2) ==
            BITNET_OK) {
            bool given = false;
            for (size_t k = 0; k < tiles->n; k++)
                given = given || (tiles->v[k].M == shapes[s][0] && tiles->v[k].K == shapes[s][1]);
            fprintf(stderr, "bitnet-dummy: tiles %lldx%lld: BM %d, BK %d, bm %d (%s)\n", (long long)shapes[s][0],
                    (long long)shapes[s][1], (int)t.BM, (int)t.BK, (int)t.bm, given ? "given" : "default rule");
        }
    }
}

int main(int argc, char **argv) {
    bitnet_dummy_params p;
    bitnet_dummy_params_init(&p);
    const char *out = NULL, *vocab_from = NULL;
    bool quiet = false, have_vocab_size = false, pooling_given = false;
    static bitnet_tool_tile_list tiles;
    bitnet_tool_outtype_arg outtype_arg = {&p.outtype, NULL};
    char arch_names[256], arch_help[300];
    snprintf(arch_help, sizeof arch_help, "%s (default %s)",
             bitnet_arch_list(arch_names, sizeof arch_names, "", ", ", " or "), bitnet_arch_at(0)->name);
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-o, --outfile", "PATH", "output file (written through PATH.tmp)", BITNET_ARG_STRING, &out),
        BITNET_OPT("--n-embd", "N", "hidden size", BITNET_ARG_INT32, &p.n_embd, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--n-ff", "N", "feed-forward size", BITNET_ARG_INT32, &p.n_ff, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--n-layer", "N", "number of layers", BITNET_ARG_INT32, &p.n_layer, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--n-head", "N", "attention heads", BITNET_ARG_INT32, &p.n_head, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--n-head-kv", "N", "key/value heads (default: --n-head)", BITNET_ARG_INT32, &p.n_head_kv, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--ctx", "N", "<arch>.context_length (default 2048)", BITNET_ARG_INT32, &p.n_ctx, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--arch", "NAME", arch_help, BITNET_ARG_CALL, &p.arch, .fn = on_arch),
        BITNET_OPT("--n-embd-head", "N",
         "head size (default n_embd / n_head; another value is written as\n"
         "<arch>.attention.key_length/value_length; not for bitnet)",
         BITNET_ARG_INT32, &p.n_embd_head, .lo = 2, .hi = INT32_MAX),
        BITNET_OPT("--rope-theta", "F", "<arch>.rope.freq_base (default 10000)", BITNET_ARG_CALL, &p.rope_freq_base,
         .fn = on_positive_float),
        BITNET_OPT("--rms-eps", "F", "<arch>.attention.layer_norm_rms_epsilon (default 1e-5)", BITNET_ARG_CALL,
         &p.rms_eps, .fn = on_positive_float),
        BITNET_OPT("--output-weight", NULL,
         "write a separate output.weight (default: tied to token_embd;\n"
         "not for qwen3/gemma3, which have none)",
         BITNET_ARG_FLAG, &p.output_separate),
        BITNET_OPT("--no-norm-in", NULL,
         "qwen3/gemma3: the plain teacher layout, without the seven\n"
         "blk.N.<proj>_norm_in tensors per layer",
         BITNET_ARG_FLAG, &p.no_norm_in),
        BITNET_OPT("--pooling", "P",
         "qwen3/gemma3: <arch>.pooling_type none (0), mean (1), cls (2)\n"
         "or last (3; the default)",
         BITNET_ARG_CALL, &p.pooling_type, .fn = on_pooling, .given = &pooling_given),
        BITNET_OPT("--swa", "N", "gemma3: gemma3.attention.sliding_window = N (default: no key)", BITNET_ARG_INT32,
         &p.n_swa, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--swa-pattern", "P", "gemma3: gemma3.attention.sliding_window_pattern = P (default: no key)",
         BITNET_ARG_INT32, &p.swa_pattern, .lo = 1, .hi = INT32_MAX),
        BITNET_OPT("--rope-freq-base-swa", "F", "gemma3: gemma3.rope.freq_base_swa = F (default: no key)",
         BITNET_ARG_CALL, &p.rope_freq_base_swa, .fn = on_positive_float),
        BITNET_OPT("--outtype", "T", "f32, f16, i2_s, tl1 or tl2 (default i2_s)", BITNET_ARG_CALL, &outtype_arg, .fn = bitnet_tool_on_outtype),
        BITNET_OPT("--quant-embd", "[T]",
         "token_embd.weight as f16 (T omitted), q8_0 or q6_k (ggml's\n"
         "quantizers) instead of the default F16/Q8_0 rule (qwen3/gemma3:\n"
         "F16); output.weight keeps the rule. Refused when n_embd is not a\n"
         "multiple of the type's block (q6_k 256, q8_0 32); with --outtype\n"
         "f32 (all F32) f16 changes nothing and q8_0/q6_k are refused",
         BITNET_ARG_CALL, &p.embd_type, .fn = bitnet_tool_on_quant_embd, .takes_next = quant_embd_takes, .optional = true),
        BITNET_OPT("--seed", "N", "PRNG seed, unsigned 64-bit (default 0)", BITNET_ARG_UINT64, &p.seed, .lo = 1),
        BITNET_OPT("--vocab-size", "N", "size of the built-in vocabulary (default 32002, at least 259)", BITNET_ARG_INT32,
         &p.n_vocab, .lo = 259, .hi = INT32_MAX, .given = &have_vocab_size),
        BITNET_OPT("--vocab-from", "GGUF", "copy the vocabulary of another GGUF file instead", BITNET_ARG_STRING, &vocab_from),
        BITNET_OPT("--tiles", "M,K,BM,BK,bm",
         "TL1/TL2 tiles for weight shape MxK (repeat per shape; shapes not\n"
         "given use the default tile rule of `python3 -m codegen derive`)",
         BITNET_ARG_CALL, &tiles, .fn = bitnet_tool_on_tiles),
        BITNET_OPT("--no-tile-record", NULL,
         "TL1/TL2: write no bitnet.lut.<tensor>.tiles keys, as bitnet.cpp's\n"
         "writers do (such a file loads only with the tools' --lut-tiles)",
         BITNET_ARG_FLAG, &p.no_tile_record),
        BITNET_OPT("--no-layout-record", NULL,
         "I2_S: write no bitnet.i2s.layout key, as bitnet.cpp's writers do\n"
         "(the runtime then assumes the x86 layout and says so)",
         BITNET_ARG_FLAG, &p.no_layout_record),
        BITNET_OPT("--name", "NAME", "general.name (default \"bitnet-dummy\")", BITNET_ARG_STRING, &p.name),
        BITNET_OPT("-q, --quiet", NULL, "no progress output", BITNET_ARG_FLAG, &quiet),
    };
    static const char *const k_epi =
        "A parameter combination the writer refuses is a bad command line as well (exit 2).\n"
        BITNET_EXIT_STATUS_HELP;
    static const char *const k_use = "usage: bitnet-dummy -o PATH --n-embd N --n-ff N --n-layer N --n-head N [options]";
    const bitnet_args args = BITNET_ARGS("bitnet-dummy", k_use, k_description, k_epi, opts, .help_col = 26,
                                         .flat = true);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    if (!out) return bitnet_args_fail(&args, "missing -o/--outfile PATH");
    const char *required[] = {"--n-embd", "--n-ff", "--n-layer", "--n-head"};
    const int32_t *dims[] = {&p.n_embd, &p.n_ff, &p.n_layer, &p.n_head};
    for (size_t d = 0; d < 4; d++)
        if (*dims[d] == 0) return bitnet_args_fail(&args, "missing %s N", required[d]);
    if (vocab_from && have_vocab_size) return bitnet_args_fail(&args, "--vocab-size and --vocab-from exclude each other");
    if (check_arch_flags(&args, &p, pooling_given) != 0) return BITNET_EXIT_USAGE;
    if (tiles.n && p.outtype != BITNET_DUMMY_TL1 && p.outtype != BITNET_DUMMY_TL2)
        return bitnet_args_fail(&args, "--tiles only applies to --outtype tl1 or tl2 (outtype is %s)",
                                bitnet_dummy_outtype_name(p.outtype));
    p.tiles = tiles.v;
    p.n_tiles = tiles.n;
    if (bitnet_tool_check_quant_embd(&args, p.outtype, &p.embd_type) != 0) return BITNET_EXIT_USAGE;

    bitnet_error err = {{0}};
    bitnet_dummy_vocab *vocab = NULL;
    if (vocab_from) {
        if (bitnet_dummy_vocab_from_gguf(vocab_from, &vocab, &err) != BITNET_OK) {
            fprintf(stderr, "bitnet-dummy: --vocab-from: %s\n", err.msg);
            return 1;
        }
        p.vocab = vocab;
    }

    bitnet_tool_progress ps = {"bitnet-dummy", isatty(2) != 0, false, -1, -1};
    if (!quiet) {
        p.progress = bitnet_tool_on_progress;
        p.progress_user = &ps;
        int32_t n_kv = p.n_head_kv ? p.n_head_kv : p.n_head;
        fprintf(stderr,
                "bitnet-dummy: writing %s: arch %s, n_embd %d, n_ff %d, n_layer %d, n_head %d, n_head_kv %d, "
                "outtype %s, seed %llu, vocab %s\n",
                out, bitnet_dummy_arch_name(p.arch), (int)p.n_embd, (int)p.n_ff, (int)p.n_layer, (int)p.n_head, (int)n_kv,
                bitnet_dummy_outtype_name(p.outtype), (unsigned long long)p.seed, vocab_from ? vocab_from : "built-in");
        if (p.outtype == BITNET_DUMMY_TL1 || p.outtype == BITNET_DUMMY_TL2) report_tiles(&p, &tiles);
    }
    bitnet_status s = bitnet_dummy_write(&p, out, &err);
    bitnet_dummy_vocab_free(vocab);
    if (s != BITNET_OK) {
        if (ps.tty && !quiet && ps.last_pct >= 0) fprintf(stderr, "\n");
        if (s == BITNET_ERR_IO) /* the writer's message names the file: "cannot write PATH: <strerror>" */
            fprintf(stderr, "bitnet-dummy: %s\n", err.msg);
        else
            fprintf(stderr, "bitnet-dummy: %s: %s (%s)\n", out, err.msg, bitnet_status_name(s));
        return s == BITNET_ERR_INVALID_ARG ? 2 : 1;
    }
    if (!quiet) fprintf(stderr, "bitnet-dummy: wrote %s\n", out);
    return 0;
}
