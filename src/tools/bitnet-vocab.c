/* bitnet-vocab — writes the tokenizer of a Hugging Face model folder (tokenizer.json or tokenizer.model,
 * with tokenizer_config.json) as a vocabulary-only GGUF: general.architecture plus the tokenizer.ggml.*
 * keys llama.cpp's converters write, no tensors (src/convert/hf_tokenizer.h). Tests and the dummy-model writer
 * (--vocab-from) use such files. A summary goes to stderr.
 * Exit status: 0 written; 1 the folder's tokenizer could not be read or written (the message names the
 * file and what is wrong); 2 bad command line. */
#include "convert/hf_tokenizer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: bitnet-vocab MODEL_DIR --out PATH [--arch NAME] [--n-vocab N] [--name NAME] [-q]\n"
            "\n"
            "Reads MODEL_DIR/tokenizer.json (or tokenizer.model) and tokenizer_config.json and writes a GGUF\n"
            "that holds only the tokenizer keys.\n"
            "\n"
            "  --out PATH      output file (written through PATH.tmp)\n"
            "  --arch NAME     general.architecture (default \"llama\")\n"
            "  --n-vocab N     pad the vocabulary to N tokens with [PAD<id>] (config.json's vocab_size)\n"
            "  --name NAME     general.name\n"
            "  -q, --quiet     no summary\n"
            "  -h, --help      this text\n");
}

int main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *arch = "llama", *name = NULL;
    long long n_vocab = -1;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o") || !strcmp(a, "--arch") || !strcmp(a, "--name") ||
                   !strcmp(a, "--n-vocab")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bitnet-vocab: %s needs a value (see --help)\n", a);
                return 2;
            }
            const char *val = argv[++i];
            if (!strcmp(a, "--out") || !strcmp(a, "-o")) out = val;
            else if (!strcmp(a, "--arch")) arch = val;
            else if (!strcmp(a, "--name")) name = val;
            else {
                char *end;
                errno = 0;
                n_vocab = strtoll(val, &end, 10);
                if (errno || *end || n_vocab < 1 || n_vocab > 0x7FFFFFFE) {
                    fprintf(stderr, "bitnet-vocab: --n-vocab expects an integer in [1, 2147483646], got '%s'\n", val);
                    return 2;
                }
            }
        } else if (a[0] == '-' && a[1] != 0) {
            fprintf(stderr, "bitnet-vocab: unknown argument '%s' (see --help)\n", a);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "bitnet-vocab: more than one model folder ('%s', '%s')\n", dir, a);
            return 2;
        }
    }
    if (!dir || !out) {
        fprintf(stderr, "bitnet-vocab: %s is required (see --help)\n", !dir ? "MODEL_DIR" : "--out PATH");
        return 2;
    }
    bitnet_error err = {{0}};
    bitnet_hf_vocab *v = NULL;
    bitnet_status st = bitnet_hf_vocab_load(dir, &v, &err);
    if (st == BITNET_OK && n_vocab > 0) st = bitnet_hf_vocab_pad(v, n_vocab, &err);
    if (st == BITNET_OK) st = bitnet_hf_vocab_write_vocab_only(v, arch, name, out, &err);
    if (st != BITNET_OK) {
        fprintf(stderr, "bitnet-vocab: error: %s\n", err.msg);
        bitnet_hf_vocab_free(v);
        return 1;
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
