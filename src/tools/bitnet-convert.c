/* bitnet-convert — command-line front end of the HF → GGUF converter (src/convert/hf_convert.h), the C core of
 * utils/convert-hf-to-gguf-bitnet.py and utils/convert-bitnet-embedding-to-gguf.py. A progress bar goes to stderr (one line redrawn on a terminal,
 * a line per 10% otherwise). With --relayout L it rewrites instead the I2_S weights of a GGUF file that
 * bitnet.cpp packed in layout L into the X86 layout and records it (src/convert/relayout.h).
 * Exit status (args.h): 0 written; 1 conversion failed (the message names the file, tensor, key or value; no
 * output file is left behind); 2 bad command line. */
#include "convert/hf_convert.h"
#include "convert/relayout.h"
#include "base/types.h"
#include "tools/common/args.h"
#include "tools/common/writer_args.h"

#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* --quant-embd's value is optional ("--quant-embd" alone = f16, bitnet.cpp's flag, also before
 * MODEL_DIR): a following word is taken as the value when it is one, or when it is no option and names
 * no existing file or directory (then it is reported as a bad value). */
static bool quant_embd_takes(const char *next) {
    struct stat sb;
    int ty;
    return bitnet_dummy_embd_type_parse(next, &ty) || (next[0] != '-' && stat(next, &sb) != 0);
}

/* --relayout: IN.gguf's I2_S weights from `layout` to x86 into OUT (relayout.h). `other`: a checkpoint flag
 * that was given too (refused), or NULL. */
static int run_relayout(const bitnet_args *args, int layout, const char *in, const char *out, bool quiet,
                        const char *other) {
    if (other) return bitnet_args_fail(args, "%s converts a checkpoint; --relayout only rewrites a GGUF file's I2_S weights", other);
    if (!in) return bitnet_args_fail(args, "--relayout needs the GGUF file to rewrite (IN.gguf)");
    if (!out) return bitnet_args_fail(args, "missing -o/--outfile PATH");
    bitnet_error err = {{0}};
    bitnet_relayout_summary s;
    if (bitnet_relayout_gguf(in, out, layout, &s, &err) != BITNET_OK)
        return bitnet_tool_error("bitnet-convert", BITNET_EXIT_FAILURE, "%s", err.msg);
    if (!quiet && layout == BITNET_I2S_LAYOUT_X86)
        fprintf(stderr, "bitnet-convert: wrote %s: %lld I2_S tensors (%.1f MB) kept in the x86 layout, which the file "
                        "now records; %lld other tensors copied\n",
                out, (long long)s.n_i2s, (double)s.i2s_bytes / 1e6, (long long)(s.n_tensors - s.n_i2s));
    else if (!quiet)
        fprintf(stderr, "bitnet-convert: wrote %s: %lld I2_S tensors (%.1f MB) rewritten from the %s layout to x86, "
                        "which the file now records; %lld other tensors copied\n",
                out, (long long)s.n_i2s, (double)s.i2s_bytes / 1e6, bitnet_i2s_layout_name(layout),
                (long long)(s.n_tensors - s.n_i2s));
    if (!quiet && s.recorded < 0)
        fprintf(stderr, "bitnet-convert: %s records no I2_S layout: its bytes were read as %s because --relayout says so "
                        "(nothing in the file can confirm it); %s records that it was rewritten from %s\n",
                in, bitnet_i2s_layout_name(layout), out, bitnet_i2s_layout_name(layout));
    return 0;
}

int main(int argc, char **argv) {
    bitnet_convert_params p;
    bitnet_convert_params_init(&p);
    bool quiet = false;
    static bitnet_tool_tile_list tiles;
    const char *outtype_word = NULL;
    bitnet_tool_outtype_arg outtype_arg = {&p.outtype, &outtype_word};
    const char *outtype = "i2_s";
    int relayout = 0; /* --relayout L: the index of L in its choices (x86, arm64, rows4) */
    bool relayout_given = false, embd_given = false, force_given = false, name_given = false, tiles_given = false, table_given = false,
         swa_given = false;
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-o, --outfile", "PATH", "output file (written through PATH.tmp, renamed at the end)", BITNET_ARG_STRING,
         &p.outfile),
        BITNET_OPT("--outtype", "T", "f32, f16, i2_s, tl1 or tl2 (default i2_s): the type of every\nprojection weight",
         BITNET_ARG_CALL, &outtype_arg, .fn = bitnet_tool_on_outtype),
        BITNET_OPT("--quant-embd", "[T]",
         "token_embd.weight as f16 (T omitted: bitnet.cpp's flag), q8_0 or\n"
         "q6_k (ggml's reference quantizers; q6_k is what llama-quantize\n"
         "--token-embedding-type q6_k writes); default: F32, for i2_s F16\n"
         "(Q8_0 when n_embd % 256 != 0; qwen3/gemma3: F16 in every outtype\n"
         "but f32). Refused when n_embd is not a\n"
         "multiple of the type's block (q6_k 256, q8_0 32). An untied\n"
         "output.weight keeps its default. With --outtype f32 (all F32)\n"
         "f16 changes nothing and q8_0/q6_k are refused",
         BITNET_ARG_CALL, &p.embd_type, .fn = bitnet_tool_on_quant_embd, .takes_next = quant_embd_takes, .optional = true,
         .given = &embd_given),
        BITNET_OPT("--force", NULL,
         "ternarize weights of a plain (non-BitNet) checkpoint that are not\n"
         "ternary already, or a qwen3/gemma3 one without <proj>.norm weights\n"
         "(changes what the model computes)",
         BITNET_ARG_FLAG, &p.force, .given = &force_given),
        BITNET_OPT("--name", "NAME", "general.name (default: the folder's name)", BITNET_ARG_STRING, &p.name,
         .given = &name_given),
        BITNET_OPT("--gemma3-swa", NULL,
         "gemma3 (BitNet-embedding-270M): also write the sliding-window keys\n"
         "from config.json (sliding_window, the layer_types period,\n"
         "rope_local_base_freq). Default: none, as bitnet.cpp's converter\n"
         "(its files attend globally in every layer)",
         BITNET_ARG_FLAG, &p.gemma3_swa, .given = &swa_given),
        BITNET_OPT("--tiles", "M,K,BM,BK,bm",
         "TL1/TL2 tiles for weight shape MxK (repeatable; default: the built-in\n"
         "table covering the model, else the default tile rule)",
         BITNET_ARG_CALL, &tiles, .fn = bitnet_tool_on_tiles, .given = &tiles_given),
        BITNET_OPT("--lut-table", "NAME", "default or pretuned: preferred built-in tile table (default default)", BITNET_ARG_WORD,
         &p.lut_table, .choices = "default|pretuned", .given = &table_given),
        BITNET_OPT("--relayout", "L",
         "instead of converting a checkpoint: MODEL_DIR is a GGUF file whose\n"
         "I2_S weights bitnet.cpp packed in layout L (arm64: its ARM builds;\n"
         "rows4: its x86 build without ACT_PARALLEL; x86), written to -o in\n"
         "the x86 layout with that recorded; every other tensor and key is\n"
         "kept as it is",
         BITNET_ARG_CHOICE, &relayout, .choices = "x86|arm64|rows4", .given = &relayout_given),
        BITNET_OPT("-q, --quiet", NULL, "no progress output", BITNET_ARG_FLAG, &quiet),
    };
    static const char *const k_desc =
        "Converts a Hugging Face checkpoint (config.json, *.safetensors or a sharded index,\n"
        "tokenizer.json or tokenizer.model) of a ternary model to a BitNet GGUF. The\n"
        "embedding models (model_type qwen3, gemma3_text: BitNet-embedding-0.6B / -270M)\n"
        "get bitnet.cpp's embedding file contract: f32/f16 hold the float weights as\n"
        "stored, i2_s ternarizes them, everything else F16; pooling from modules.json.\n";
    static const char *const k_use = "usage: bitnet-convert MODEL_DIR -o PATH [--outtype f32|f16|i2_s|tl1|tl2] [options]\n"
                                     "       bitnet-convert --relayout arm64|rows4|x86 IN.gguf -o OUT.gguf";
    const bitnet_args args = BITNET_ARGS("bitnet-convert", k_use, k_desc, BITNET_EXIT_STATUS_HELP, opts,
                                         .help_col = 26, .flat = true, .positional = "MODEL_DIR",
                                         .pos_dst = &p.model_dir);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    if (outtype_word) outtype = outtype_word;
    if (relayout_given) return run_relayout(&args, BITNET_I2S_LAYOUT_X86 + relayout, p.model_dir, p.outfile, quiet,
                                      outtype_word ? "--outtype" : embd_given ? "--quant-embd" : force_given ? "--force"
                                      : name_given ? "--name" : tiles_given ? "--tiles" : table_given ? "--lut-table"
                                      : swa_given ? "--gemma3-swa" : NULL);
    if (!p.model_dir) return bitnet_args_fail(&args, "missing MODEL_DIR");
    if (!p.outfile) return bitnet_args_fail(&args, "missing -o/--outfile PATH");
    p.tiles = tiles.v;
    p.n_tiles = tiles.n;
    if (bitnet_tool_check_quant_embd(&args, p.outtype, &p.embd_type) != 0) return BITNET_EXIT_USAGE;

    bitnet_tool_progress ps = {"bitnet-convert", isatty(2) != 0, true, -1, -1};
    if (!quiet) {
        p.progress = bitnet_tool_on_progress;
        p.progress_user = &ps;
        fprintf(stderr, "bitnet-convert: converting %s to %s (%s)\n", p.model_dir, p.outfile, outtype);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bitnet_error err = {{0}};
    char *summary = NULL;
    if (bitnet_convert_hf(&p, &summary, &err) != BITNET_OK) {
        if (!quiet && ps.tty && ps.last_pct >= 0) fprintf(stderr, "\n");
        return bitnet_tool_error("bitnet-convert", BITNET_EXIT_FAILURE, "%s", err.msg);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!quiet)
        fprintf(stderr, "bitnet-convert: wrote %s in %.1f s: %s\n", p.outfile,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), summary);
    free(summary);
    return 0;
}
