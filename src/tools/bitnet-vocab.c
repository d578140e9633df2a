/* bitnet-vocab — writes the tokenizer of a Hugging Face model folder (tokenizer.json or tokenizer.model,
 * with tokenizer_config.json) as a vocabulary-only GGUF: general.architecture plus the tokenizer.ggml.*
 * keys llama.cpp's converters write, no tensors (src/convert/hf_tokenizer.h). Tests and the dummy-model writer
 * (--vocab-from) use such files. A summary goes to stderr.
 * Exit status (args.h): 0 written; 1 the folder's tokenizer could not be read or written (the message
 * names the file and what is wrong); 2 bad command line. */
#include "convert/hf_tokenizer.h"
#include "tools/common/args.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *arch = "llama", *name = NULL;
    int64_t n_vocab = -1;
    bool quiet = false;
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-o, --out", "PATH", "output file (written through PATH.tmp)", BITNET_ARG_STRING, &out),
        BITNET_OPT("--arch", "NAME", "general.architecture (default \"llama\")", BITNET_ARG_STRING, &arch),
        BITNET_OPT("--n-vocab", "N", "pad the vocabulary to N tokens with [PAD<id>] (config.json's vocab_size)", BITNET_ARG_INT64,
         &n_vocab, .lo = 1, .hi = 0x7FFFFFFE),
        BITNET_OPT("--name", "NAME", "general.name", BITNET_ARG_STRING, &name),
        BITNET_OPT("-q, --quiet", NULL, "no summary", BITNET_ARG_FLAG, &quiet),
    };
    static const char *const k_desc =
        "Reads MODEL_DIR/tokenizer.json (or tokenizer.model) and tokenizer_config.json and writes a GGUF\n"
        "that holds only the tokenizer keys.\n";
    static const char *const k_use = "usage: bitnet-vocab MODEL_DIR --out PATH [--arch NAME] [--n-vocab N] [--name NAME] [-q]";
    const bitnet_args args = BITNET_ARGS("bitnet-vocab", k_use, k_desc, BITNET_EXIT_STATUS_HELP, opts, .help_col = 18,
                                         .flat = true, .positional = "MODEL_DIR", .pos_dst = &dir);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    if (!dir || !out) return bitnet_args_fail(&args, "%s is required (see --help)", !dir ? "MODEL_DIR" : "--out PATH");
    bitnet_error err = {{0}};
    bitnet_hf_vocab *v = NULL;
    bitnet_status st = bitnet_hf_vocab_load(dir, &v, &err);
    if (st == BITNET_OK && n_vocab > 0) st = bitnet_hf_vocab_pad(v, n_vocab, &err);
    if (st == BITNET_OK) st = bitnet_hf_vocab_write_vocab_only(v, arch, name, out, &err);
    if (st != BITNET_OK) {
        bitnet_hf_vocab_free(v);
        return bitnet_tool_error("bitnet-vocab", BITNET_EXIT_FAILURE, "%s", err.msg);
    }
    if (!quiet) {
        fprintf(stderr,
                "bitnet-vocab: %s (%s): model %s, pre %s, %d tokens, %lld merges, bos %d, eos %d, unk %d, pad %d, "
                "add_bos %d, add_eos %d, add_space_prefix %d, chat template %s -> %s\n",
                dir, v->source, v->model, v->pre, (int)v->n_tokens, (long long)v->n_merges, (int)v->bos_id,
                (int)v->eos_id, (int)v->unk_id, (int)v->pad_id, v->add_bos, v->add_eos, v->add_space_prefix,
                v->chat_template ? "yes" : "no", out);
    }
    bitnet_hf_vocab_free(v);
    return 0;
}
