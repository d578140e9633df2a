/* llama-cli.c — the text-generation tool bitnet.cpp users know: load a BitNet GGUF, evaluate a
 * prompt, sample tokens and print them as they come; with -cnv, a multi-turn chat.
 *
 * Text generation (default):
 * stdout: the prompt's text followed by the generated text (each token's bytes, flushed per token, through
 * tokenizer.h's UTF-8 stream: a character split over byte tokens is printed whole once complete, every byte
 * is printed — the same bytes as bitnet.cpp, never a broken sequence mid-stream), then "\n\n" as llama.cpp's
 * main does.
 * stderr: model and run information at the start, and a closing timing line:
 *   llama-cli: prompt <n> tokens in <ms> ms (<t/s> tokens/s) | generation <n> tokens in <ms> ms (<t/s> tokens/s)
 * Exit status (tools/common/args.h): 0 on success; 1 a missing or bad file, or a failed evaluation; 2 a
 * bad command line.
 *
 * Chat (-cnv / --conversation), as bitnet.cpp's llama-cli -cnv:
 * - The template comes from the model's tokenizer.chat_template (chat.h: bitnet, llama3, falcon3) or
 *   from --chat-template NAME; an unknown or missing template is an error listing the known names.
 * - -p (or -f) is the system prompt, evaluated before the first turn. User turns are read from stdin,
 *   one line each (a line ending in '\' continues on the next line; blank lines are skipped).
 * - stdout: the marker "> " before each input line is read (as llama.cpp; not before a continued
 *   line), then the reply as it is generated (UTF-8 sequences are never split), then "\n". At end of
 *   input one more "\n".
 * - A reply ends at an end-of-generation token (EOS/EOT; not printed), after -n tokens (-1: no limit),
 *   or on Ctrl-C (SIGINT) during the reply; Ctrl-C while waiting for input ends the chat.
 * - The KV cache is kept across turns: each turn evaluates only what is new — the closing text of the
 *   previous reply, the user message and the assistant header (chat.h increments); no old turn is ever
 *   evaluated again. With --print-token-ids, stderr shows per turn:
 *     chat turn <t>: n_past <p>, prompt ids: <ids evaluated at positions p, p+1, ...>
 *     chat turn <t>: generated ids: <ids> (stop: <why>)
 *   (turn 0 is the system prompt).
 * - When the context (-c) cannot hold the next turn, or fills up during a reply, a message says so and
 *   the chat ends: old turns are not dropped (that would mean evaluating them again).
 * - Exit status: 0 when the input ends (EOF, Ctrl-D); 3 when the chat ended because the context was
 *   full; 130 after Ctrl-C at the prompt; 1 on errors (model, template, failed evaluation); 2 a bad command line. */
#include "base/arch.h"
#include "text/chat.h"
#include "model/model.h"
#include "tilefile/tile_file.h"
#include "text/sampler.h"
#include "text/tokenizer.h"
#include "tools/common/args.h"
#include "tools/common/chat_opt.h"
#include "tools/common/bench_util.h"
#include "tools/common/cluster_opt.h"
#include "tools/common/text_file.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct options {
    const char *model;
    const char *prompt;
    const char *prompt_file;
    long n_predict;
    long n_threads;
    long n_ctx;
    long n_batch;
    float temp;
    long top_k;
    float top_p;
    int64_t seed;
    int kernel; /* bitnet_kernel_path: the index in "auto|i2_s|tl1|tl2" is the enum's value */
    const char *lut_table;
    const char *lut_tiles; /* --lut-tiles FILE */
    int head_type; /* bitnet_model_params.head_type */
    int i2s_layout; /* bitnet_model_params.i2s_layout (--i2s-layout) */
    const char *plan;  /* --plan FILE: one stage of a cluster plan under mpirun */
    bool link_emulate; /* --link-emulate */
    bool ignore_eos;
    bool print_ids;
    bool conversation;
    const char *chat_template;
} options;

#define fail(...) bitnet_tool_error("llama-cli", BITNET_EXIT_FAILURE, __VA_ARGS__)

/* The command line into o; -1 to go on, else the exit status (help printed, or a bad command line). */
static int parse_args(int argc, char **argv, options *o) {
    long ignored;
    int head = 0;
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE", "model file (required)", BITNET_ARG_STRING, &o->model),
        BITNET_OPT("-p, --prompt", "TEXT", "prompt (default: empty, generation starts from BOS)", BITNET_ARG_STRING, &o->prompt),
        BITNET_OPT("-f, --file", "FILE", "read the prompt from FILE (one trailing newline is dropped)", BITNET_ARG_STRING,
         &o->prompt_file),
        BITNET_OPT("-n, --n-predict", "N", "tokens to generate (default 128; -1 = until EOS or the context is full)",
         BITNET_ARG_LONG, &o->n_predict, .lo = -1, .hi = INT_MAX),
        BITNET_OPT("-t, --threads", "N", "threads (default: the number of online CPUs)", BITNET_ARG_LONG, &o->n_threads, .lo = 1, .hi = 1024),
        BITNET_OPT("-c, --ctx-size", "N", "context size in tokens (default 0 = min(model context, 4096))", BITNET_ARG_LONG,
         &o->n_ctx, .lo = 0, .hi = 1 << 24),
        BITNET_OPT("-b, --batch-size", "N", "prompt tokens per forward pass (default 512; with --plan\nthe plan's micro-batch)", BITNET_ARG_LONG, &o->n_batch, .lo = 1, .hi = 1 << 24),
        BITNET_OPT("--temp", "T", "temperature (default 0.8; 0 = greedy)", BITNET_ARG_FLOAT, &o->temp, .flo = 0.0, .fhi = 1e6),
        BITNET_OPT("--top-k", "N", "keep the N most likely tokens (default 40; 0 = all)", BITNET_ARG_LONG, &o->top_k, .lo = 0, .hi = INT_MAX),
        BITNET_OPT("--top-p", "P", "nucleus sampling threshold (default 0.95; 1 = off)", BITNET_ARG_FLOAT, &o->top_p, .flo = 0.0, .fhi = 1.0),
        BITNET_OPT("-s, --seed", "N", "sampling seed (default -1 = random, printed on stderr)", BITNET_ARG_INT64, &o->seed, .lo = -1, .hi = LONG_MAX),
        BITNET_OPT("--kernel", "K", "auto|i2_s|tl1|tl2 (default auto: tl2 on x86-64 with AVX2, tl1 on AArch64)",
         BITNET_ARG_CHOICE, &o->kernel, .choices = "auto|i2_s|tl1|tl2"),
        BITNET_OPT("--lut-table", "T", "default|pretuned: preferred tile table (default: the build's choice)", BITNET_ARG_WORD,
         &o->lut_table, .choices = "default|pretuned"),
        BITNET_OPT_LUT_TILES(&o->lut_tiles),
        BITNET_OPT_I2S_LAYOUT(&o->i2s_layout),
        BITNET_OPT("--head-type", "H",
         "stored|q8_0: output head as stored in the file (default, exact) or\n"
         "requantized to Q8_0 at load (about half the head's bytes per token;\n"
         "logits change by the Q8_0 rounding of head and head input)",
         BITNET_ARG_CHOICE, &head, .choices = "stored|q8_0"),
        BITNET_OPT("--ignore-eos", NULL, "keep generating after the end-of-sequence token", BITNET_ARG_FLAG, &o->ignore_eos),
        BITNET_OPT("--print-token-ids", NULL, "print the prompt and generated token ids on stderr", BITNET_ARG_FLAG,
         &o->print_ids),
        BITNET_OPT("-ngl, --n-gpu-layers", "N", "accepted for compatibility and ignored (CPU only)", BITNET_ARG_LONG, &ignored, .lo = -1, .hi = INT_MAX),
        BITNET_OPT("-cnv, --conversation", NULL,
         "chat: -p is the system prompt, user turns are read from stdin\n"
         "(one per line; Ctrl-D ends); -n limits each reply",
         BITNET_ARG_FLAG, &o->conversation),
        BITNET_OPT_PLAN(&o->plan, &o->link_emulate),
        BITNET_OPT_CHAT_TEMPLATE(&o->chat_template),
    };
    char arch_names[256], k_desc[400];
    snprintf(k_desc, sizeof k_desc, "Generate text with a ternary (BitNet b1.58) model: GGUF, architecture %s.\n",
             bitnet_arch_list(arch_names, sizeof arch_names, "", ", ", " or "));
    static const char *const k_epi = BITNET_EXIT_STATUS_HELP
        "With -cnv also: 3 the chat ended because the context was full, 130 Ctrl-C at the prompt.\n";
    const bitnet_args args = BITNET_ARGS("llama-cli", "usage: llama-cli -m MODEL [options]", k_desc, k_epi, opts,
                                         .help_col = 27);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    o->head_type = head ? BITNET_TYPE_Q8_0 : 0;
    if (!o->model) return bitnet_args_fail(&args, "no model given: use -m MODEL (see --help)");
    if (o->prompt && o->prompt_file) return bitnet_args_fail(&args, "give the prompt with -p or -f, not both");
    return -1;
}

static bitnet_utf8_stream g_stdout_utf8; /* zero = empty stream (bitnet_utf8_stream_init) */

static void print_piece(const bitnet_vocab *v, int32_t id) {
    char buf[256], out[256 + 3];
    size_t n = bitnet_token_to_piece(v, id, false, buf, sizeof buf);
    if (n > sizeof buf) {
        char *big = malloc(2 * n + 3); /* the piece, then room for what the stream releases */
        if (big) {
            bitnet_token_to_piece(v, id, false, big, n);
            fwrite(big + n, 1, bitnet_utf8_stream_push(&g_stdout_utf8, big, n, big + n), stdout);
            free(big);
        }
    } else {
        fwrite(out, 1, bitnet_utf8_stream_push(&g_stdout_utf8, buf, n, out), stdout);
    }
    fflush(stdout);
}

/* The bytes print_piece still holds (an incomplete UTF-8 sequence at the end), as they are. */
static void print_pieces_end(void) {
    char rest[4];
    fwrite(rest, 1, bitnet_utf8_stream_flush(&g_stdout_utf8, rest), stdout);
}

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    fprintf(stderr, "%s:", what);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* ---------------------------------------------------------------------------------------------
 * Chat (-cnv)
 * ------------------------------------------------------------------------------------------- */

enum { CHAT_EXIT_CONTEXT_FULL = 3, CHAT_EXIT_INTERRUPTED = 130 };

static volatile sig_atomic_t g_interrupted = 0;

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
}

typedef struct chat {
    const options *o;
    bitnet_context *ctx;
    const bitnet_vocab *vocab;
    bitnet_sampler *smp;
    bitnet_chat_template tmpl;
    bitnet_chat_message *msgs; /* contents owned (malloc'ed) */
    size_t n_msgs, cap_msgs;
    size_t n_done;      /* messages whose text is in the cache */
    bool reply_open;    /* msgs[n_done-1] is a generated reply whose closing text is not in the cache */
    int32_t pending;    /* last generated token, printed but not evaluated yet (-1: none) */
    int32_t n_past;     /* positions in the cache */
    int turn;
    size_t n_prompt_tokens, n_gen_tokens;
    double t_prompt, t_gen;
} chat;

static int chat_add(chat *c, const char *role, char *content) {
    if (c->n_msgs == c->cap_msgs) {
        const size_t cap = c->cap_msgs ? 2 * c->cap_msgs : 16;
        bitnet_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return 1;
        c->msgs = m;
        c->cap_msgs = cap;
    }
    c->msgs[c->n_msgs].role = role;
    c->msgs[c->n_msgs].content = content;
    c->n_msgs++;
    return 0;
}

static void chat_free(chat *c) {
    for (size_t i = 0; i < c->n_msgs; i++) free((char *)c->msgs[i].content);
    free(c->msgs);
}

/* Evaluates what the cache does not hold yet: the pending token, the closing text of the last reply,
 * the new messages and (add_gen) the assistant header. 0, or an exit status. */
static int chat_eval(chat *c, bool add_gen) {
    bitnet_error err = {{0}};
    char *text = NULL;
    size_t len = 0;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (bitnet_chat_format_increment(&c->tmpl, c->msgs, c->n_done, c->n_msgs, add_gen, c->reply_open, &text, &len,
                                     &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: chat template: %s\n", err.msg);
        return 1;
    }
    const bool first = c->n_past == 0 && c->pending < 0;
    bitnet_status st = bitnet_tokenize(c->vocab, text, len, first, true, &ids, &n_ids, &err);
    free(text);
    if (st != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: cannot tokenize the chat turn: %s\n", err.msg);
        return 1;
    }
    if (c->pending >= 0) { /* the last token of a reply cut by -n comes first */
        int32_t *nb = realloc(ids, (n_ids + 1) * sizeof *nb);
        if (!nb) {
            free(ids);
            fprintf(stderr, "llama-cli: error: out of memory\n");
            return 1;
        }
        ids = nb;
        memmove(ids + 1, ids, n_ids * sizeof *ids);
        ids[0] = c->pending;
        n_ids++;
    }
    if (c->o->print_ids) {
        fprintf(stderr, "chat turn %d: n_past %d, prompt ids:", c->turn, c->n_past);
        for (size_t i = 0; i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    int rc = 0;
    if (n_ids > 0) {
        if ((size_t)c->n_past + n_ids > (size_t)c->o->n_ctx) {
            fprintf(stderr,
                    "llama-cli: the context is full: turn %d needs %zu more tokens, %d of the %ld (-c) are in use; "
                    "the chat ends here (start again with a larger -c)\n",
                    c->turn, n_ids, c->n_past, c->o->n_ctx);
            rc = CHAT_EXIT_CONTEXT_FULL;
        } else {
            const double t0 = (bitnet_tool_now_s() * 1e3);
            if (bitnet_decode(c->ctx, ids, (int32_t)n_ids, c->n_past, false, &err) != BITNET_OK) {
                fprintf(stderr, "llama-cli: error: evaluation failed: %s\n", err.msg);
                rc = 1;
            } else {
                c->t_prompt += (bitnet_tool_now_s() * 1e3) - t0;
                c->n_prompt_tokens += n_ids;
                c->n_past += (int32_t)n_ids;
            }
        }
    }
    free(ids);
    if (rc == 0) {
        c->n_done = c->n_msgs;
        c->reply_open = false;
        c->pending = -1;
    }
    return rc;
}

/* Samples and prints one reply; adds it to the conversation. 0, or an exit status. */
static int chat_reply(chat *c) {
    const options *o = c->o;
    bitnet_error err = {{0}};
    int32_t *gen = NULL;
    size_t n_gen = 0, cap_gen = 0;
    char *reply = NULL;
    size_t n_reply = 0, cap_reply = 0;
    bitnet_utf8_stream u;
    bitnet_utf8_stream_init(&u);
    const char *why = "n_predict";
    int32_t eog = -1;
    int rc = 0;
    bool oom = false;
    const double t0 = (bitnet_tool_now_s() * 1e3);
    while (o->n_predict < 0 || n_gen < (size_t)o->n_predict) {
        if (g_interrupted) { /* Ctrl-C since the turn was read (also while its prompt was evaluated) */
            g_interrupted = 0;
            why = "interrupted";
            break;
        }
        const int32_t id = bitnet_sampler_sample(c->smp, bitnet_get_logits(c->ctx));
        if (bitnet_vocab_is_eog(c->vocab, id) && !o->ignore_eos) {
            why = "end-of-generation token";
            eog = id;
            break;
        }
        char piece[256], shown[256 + 3];
        size_t np = bitnet_token_to_piece(c->vocab, id, false, piece, sizeof piece);
        char *big = NULL;
        const char *pp = piece;
        char *out = shown;
        if (np > sizeof piece) { /* the piece, then room for what the stream releases */
            big = malloc(2 * np + 3);
            if (!big) {
                oom = true;
                break;
            }
            bitnet_token_to_piece(c->vocab, id, false, big, np);
            pp = big;
            out = big + np;
        }
        if (n_gen == cap_gen) {
            const size_t cap = cap_gen ? 2 * cap_gen : 64;
            int32_t *ng = realloc(gen, cap * sizeof *ng);
            if (!ng) {
                free(big);
                oom = true;
                break;
            }
            gen = ng;
            cap_gen = cap;
        }
        if (n_reply + np + 1 > cap_reply) {
            size_t cap = cap_reply ? 2 * cap_reply : 256;
            while (cap < n_reply + np + 1) cap *= 2;
            char *nr = realloc(reply, cap);
            if (!nr) {
                free(big);
                oom = true;
                break;
            }
            reply = nr;
            cap_reply = cap;
        }
        gen[n_gen++] = id;
        memcpy(reply + n_reply, pp, np);
        n_reply += np;
        fwrite(out, 1, bitnet_utf8_stream_push(&u, pp, np, out), stdout);
        fflush(stdout);
        free(big);
        if (o->n_predict >= 0 && n_gen == (size_t)o->n_predict) {
            c->pending = id;
            break;
        }
        if (c->n_past >= o->n_ctx) {
            c->pending = id;
            why = "context full";
            rc = CHAT_EXIT_CONTEXT_FULL;
            break;
        }
        if (bitnet_decode(c->ctx, &id, 1, c->n_past, false, &err) != BITNET_OK) {
            fprintf(stderr, "\nllama-cli: error: evaluation failed: %s\n", err.msg);
            rc = 1;
            break;
        }
        c->n_past++;
    }
    char rest[4];
    fwrite(rest, 1, bitnet_utf8_stream_flush(&u, rest), stdout);
    fputs("\n", stdout);
    fflush(stdout);
    c->t_gen += (bitnet_tool_now_s() * 1e3) - t0;
    c->n_gen_tokens += n_gen;
    if (oom) {
        fprintf(stderr, "llama-cli: error: out of memory\n");
        rc = 1;
    }
    if (o->print_ids) {
        fprintf(stderr, "chat turn %d: generated ids:", c->turn);
        for (size_t i = 0; i < n_gen; i++) fprintf(stderr, " %d", gen[i]);
        if (eog >= 0) fprintf(stderr, " (stop: %s %d)\n", why, eog);
        else fprintf(stderr, " (stop: %s)\n", why);
    }
    free(gen);
    if (rc == CHAT_EXIT_CONTEXT_FULL) {
        fprintf(stderr, "llama-cli: the context is full (%ld tokens, -c): the reply is cut here and the chat ends "
                        "(start again with a larger -c)\n", o->n_ctx);
    }
    if (rc == 1) {
        free(reply);
        return rc;
    }
    if (!reply) reply = calloc(1, 1);
    else reply[n_reply] = '\0';
    if (!reply || chat_add(c, "assistant", reply)) {
        free(reply);
        fprintf(stderr, "llama-cli: error: out of memory\n");
        return 1;
    }
    c->n_done = c->n_msgs;
    c->reply_open = true;
    return rc;
}

/* One user turn from stdin: a line (without its newline); a line ending in '\\' continues on the next.
 * Returns the malloc'ed text, or NULL at end of input (*interrupted set on Ctrl-C). */
static char *read_turn(bool *interrupted) {
    char *text = NULL, *line = NULL;
    size_t n_text = 0, cap_line = 0;
    *interrupted = false;
    g_interrupted = 0; /* only a Ctrl-C at the prompt ends the chat */
    for (;;) {
        errno = 0;
        ssize_t r = getline(&line, &cap_line, stdin);
        if (r < 0) {
            if (g_interrupted) *interrupted = true;
            if (*interrupted || n_text == 0) {
                free(text);
                text = NULL;
            }
            break;
        }
        size_t n = (size_t)r;
        if (n > 0 && line[n - 1] == '\n') n--;
        if (n > 0 && line[n - 1] == '\r') n--;
        bool more = n > 0 && line[n - 1] == '\\';
        if (more) line[n - 1] = '\n'; /* the continuation becomes a newline of the message */
        char *nt = realloc(text, n_text + n + 1);
        if (!nt) {
            free(text);
            text = NULL;
            break;
        }
        text = nt;
        memcpy(text + n_text, line, n);
        n_text += n;
        text[n_text] = '\0';
        if (!more) break;
    }
    free(line);
    return text;
}

static bool blank(const char *s) {
    for (; *s; s++) {
        if (!(*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) return false;
    }
    return true;
}

/* The chat loop; returns the exit status. */
static int run_chat(const options *o, const bitnet_model *model, bitnet_context *ctx, bitnet_sampler *smp,
                    const char *system_prompt) {
    const bitnet_vocab *vocab = bitnet_model_vocab(model);
    bitnet_chat_family family = BITNET_CHAT_UNKNOWN;
    const char *from = "--chat-template";
    if (o->chat_template) {
        family = bitnet_chat_family_parse(o->chat_template);
    } else {
        bitnet_error err = {{0}};
        const char *ct = bitnet_vocab_chat_template(vocab);
        if (bitnet_chat_family_of(ct, ct ? strlen(ct) : 0, o->model, &family, &err) != BITNET_OK) {
            fprintf(stderr, "llama-cli: error: %s; choose a template with --chat-template NAME\n", err.msg);
            return 1;
        }
        from = "tokenizer.chat_template";
    }
    chat c = {0};
    c.o = o;
    c.ctx = ctx;
    c.vocab = vocab;
    c.smp = smp;
    c.pending = -1;
    bitnet_chat_template_init(&c.tmpl, family, vocab);
    fprintf(stderr, "llama-cli: chat template %s (from %s); type a message and press Enter, Ctrl-D to end\n",
            bitnet_chat_family_name(family), from);
    const char *missing = bitnet_chat_missing_marker(&c.tmpl, vocab);
    if (missing) {
        fprintf(stderr, "llama-cli: warning: '%s' of the %s template is not a token of this vocabulary; it is "
                        "tokenized as plain text\n", missing, bitnet_chat_family_name(family));
    }

    struct sigaction sa, old_sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: Ctrl-C interrupts a blocking read of the next turn */
    const bool have_handler = sigaction(SIGINT, &sa, &old_sa) == 0;

    int rc = 0;
    if (system_prompt && system_prompt[0]) {
        char *sp = strdup(system_prompt);
        if (!sp || chat_add(&c, "system", sp)) {
            free(sp);
            fprintf(stderr, "llama-cli: error: out of memory\n");
            rc = 1;
        } else {
            rc = chat_eval(&c, false);
        }
    }
    while (rc == 0) {
        fputs("> ", stdout);
        fflush(stdout);
        bool interrupted;
        char *text = read_turn(&interrupted);
        if (!text) {
            fputs("\n", stdout);
            fflush(stdout);
            if (interrupted) rc = CHAT_EXIT_INTERRUPTED;
            else if (ferror(stdin) && !feof(stdin)) {
                fprintf(stderr, "llama-cli: error: cannot read the next turn from stdin: %s\n", strerror(errno));
                rc = 1;
            }
            break;
        }
        if (blank(text)) {
            free(text);
            continue;
        }
        if (chat_add(&c, "user", text)) {
            free(text);
            fprintf(stderr, "llama-cli: error: out of memory\n");
            rc = 1;
            break;
        }
        c.turn++;
        rc = chat_eval(&c, true);
        if (rc == 0) rc = chat_reply(&c);
    }
    if (have_handler) sigaction(SIGINT, &old_sa, NULL);
    fprintf(stderr,
            "llama-cli: chat: %d turns, n_past %d | prompt %zu tokens in %.2f ms (%.2f tokens/s) | generation %zu "
            "tokens in %.2f ms (%.2f tokens/s)\n",
            c.turn, c.n_past, c.n_prompt_tokens, c.t_prompt,
            c.t_prompt > 0 ? (double)c.n_prompt_tokens * 1e3 / c.t_prompt : 0.0, c.n_gen_tokens, c.t_gen,
            c.t_gen > 0 ? (double)c.n_gen_tokens * 1e3 / c.t_gen : 0.0);
    chat_free(&c);
    return rc;
}

/* Text generation: evaluates the prompt, then samples, prints and evaluates up to -n tokens; prints
 * the timing line (and the ids with --print-token-ids). Returns the exit status. */
static int generate(const options *o, bitnet_context *ctx, const bitnet_vocab *vocab, bitnet_sampler *smp,
                    const char *prompt, size_t prompt_len) {
    int rc = 1;
    bitnet_error err = {{0}};
    int32_t *prompt_ids = NULL, *gen = NULL;
    size_t n_prompt = 0, n_gen = 0;
    if (bitnet_tokenize(vocab, prompt, prompt_len, true, true, &prompt_ids, &n_prompt, &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: cannot tokenize the prompt: %s\n", err.msg);
        goto done;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "llama-cli: error: the prompt is empty and the vocabulary has no BOS token\n");
        goto done;
    }
    if (n_prompt >= (size_t)o->n_ctx) {
        fprintf(stderr, "llama-cli: error: the prompt has %zu tokens, the context only %ld (use -c)\n", n_prompt,
                o->n_ctx);
        goto done;
    }
    gen = malloc((size_t)o->n_ctx * sizeof *gen);
    if (!gen) {
        fprintf(stderr, "llama-cli: error: out of memory\n");
        goto done;
    }

    /* the prompt */
    const double t0 = (bitnet_tool_now_s() * 1e3);
    if (bitnet_decode(ctx, prompt_ids, (int32_t)n_prompt, 0, false, &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: prompt evaluation failed: %s\n", err.msg);
        goto done;
    }
    const double t_prompt = (bitnet_tool_now_s() * 1e3) - t0;
    for (size_t i = 0; i < n_prompt; i++) print_piece(vocab, prompt_ids[i]);

    /* generation: sample, print, evaluate the token for the next step */
    const double t1 = (bitnet_tool_now_s() * 1e3);
    int32_t n_past = (int32_t)n_prompt;
    int gen_failed = 0;
    while (o->n_predict < 0 || n_gen < (size_t)o->n_predict) {
        const int32_t id = bitnet_sampler_sample(smp, bitnet_get_logits(ctx));
        if (bitnet_vocab_is_eog(vocab, id) && !o->ignore_eos) break;
        gen[n_gen++] = id;
        print_piece(vocab, id);
        if (o->n_predict >= 0 && n_gen == (size_t)o->n_predict) break;
        if (n_past >= o->n_ctx) {
            fprintf(stderr, "\nllama-cli: the context is full (%ld tokens); stopping\n", o->n_ctx);
            break;
        }
        if (bitnet_decode(ctx, &id, 1, n_past, false, &err) != BITNET_OK) {
            fprintf(stderr, "\nllama-cli: error: evaluation failed: %s\n", err.msg);
            gen_failed = 1;
            break;
        }
        n_past++;
    }
    const double t_gen = (bitnet_tool_now_s() * 1e3) - t1;
    print_pieces_end();
    fputs("\n\n", stdout);
    fflush(stdout);

    if (o->print_ids) {
        print_ids("prompt ids", prompt_ids, n_prompt);
        print_ids("generated ids", gen, n_gen);
    }
    fprintf(stderr,
            "llama-cli: prompt %zu tokens in %.2f ms (%.2f tokens/s) | generation %zu tokens in %.2f ms (%.2f "
            "tokens/s)\n",
            n_prompt, t_prompt, t_prompt > 0 ? (double)n_prompt * 1e3 / t_prompt : 0.0, n_gen, t_gen,
            t_gen > 0 ? (double)n_gen * 1e3 / t_gen : 0.0);
    rc = gen_failed;

done:
    free(gen);
    free(prompt_ids);
    return rc;
}

int main(int argc, char **argv) {
    options o = {
        .n_predict = 128,
        .n_threads = 0,
        .n_ctx = 0,
        .n_batch = 0, /* not given: 512, or the plan's micro-batch */
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .seed = -1,
        .kernel = BITNET_PATH_AUTO,
    };
    int pr = parse_args(argc, argv, &o);
    if (pr >= 0) return pr;
    const bool ctx_given = o.n_ctx != 0;
    if (o.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.n_threads = n >= 1 ? (n > 1024 ? 1024 : n) : 1;
    }
    if (o.seed < 0) o.seed = (int64_t)((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16));

    char *file_prompt = NULL;
    size_t prompt_len = 0;
    const char *prompt = o.prompt ? o.prompt : "";
    if (o.prompt_file) {
        file_prompt = bitnet_tool_read_text("llama-cli", "prompt file", o.prompt_file, &prompt_len);
        if (!file_prompt) return 1;
        prompt = file_prompt;
    } else {
        prompt_len = strlen(prompt);
    }

    int rc = 1;
    bitnet_error err = {{0}};
    bitnet_model *model = NULL;
    bitnet_context *ctx = NULL;
    bitnet_sampler smp;
    int smp_ok = 0;
    bitnet_tool_cluster *cluster = NULL; /* --plan */

    bitnet_tile_file *tiles = NULL; /* --lut-tiles; a YAML with several tables needs --lut-table */
    if (o.lut_tiles && bitnet_tile_file_load(o.lut_tiles, o.lut_table, &tiles, &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: --lut-tiles: %s\n", err.msg);
        goto done;
    }
    bitnet_model_params mp = {(bitnet_kernel_path)o.kernel, o.lut_table, o.head_type, tiles, false, 0, 0, false, o.i2s_layout};
    if ((rc = bitnet_tool_cluster_begin("llama-cli", o.plan, o.link_emulate, o.model, &argc, &argv, &mp, &cluster)) >= 0) {
        bitnet_tile_file_free(tiles);
        goto done;
    }
    rc = 1;
    const bitnet_status load_st = bitnet_model_load(o.model, &mp, &model, &err);
    bitnet_tile_file_free(tiles);
    if (load_st != BITNET_OK && !cluster) { /* with --plan every rank learns of it next */
        fprintf(stderr, "llama-cli: error: cannot load model: %s\n", err.msg);
        goto done;
    }
    if (load_st == BITNET_OK) {
        const bitnet_hparams *h = bitnet_model_hparams(model);
        if (o.n_ctx == 0) o.n_ctx = h->n_ctx_train < 4096 ? h->n_ctx_train : 4096;
        const int32_t plan_ctx = bitnet_tool_cluster_n_ctx(cluster); /* --plan without -c: at most the plan's */
        if (plan_ctx > 0 && o.n_ctx > plan_ctx && !ctx_given) o.n_ctx = plan_ctx;
        const int32_t plan_batch = bitnet_tool_cluster_n_batch(cluster); /* --plan without -b: its micro-batch */
        if (o.n_batch == 0) o.n_batch = plan_batch > 0 ? plan_batch : 512;
        if (o.n_batch > o.n_ctx) o.n_batch = o.n_ctx;
    }
    const bitnet_context_params cp = {(int32_t)o.n_ctx, (int32_t)o.n_batch, (int32_t)o.n_threads, 1, 1, false};
    if ((rc = bitnet_tool_cluster_loaded(cluster, load_st, &err, &model, &cp)) >= 0) {
        cluster = NULL; /* finished (and freed) by bitnet_tool_cluster_loaded */
        goto done;
    }
    rc = 1;
    const bitnet_hparams *hp = bitnet_model_hparams(model);
    const bitnet_vocab *vocab = bitnet_model_vocab(model);

    fprintf(stderr, "llama-cli: model %s: arch %s, %.2fM params, %.2f MiB, n_vocab %d, n_embd %d, n_layer %d, "
                    "n_head %d/%d, n_ctx_train %d\n",
            o.model, hp->arch, (double)bitnet_model_n_params(model) / 1e6,
            (double)bitnet_model_size_bytes(model) / (1024.0 * 1024.0), hp->n_vocab, hp->n_embd, hp->n_layer,
            hp->n_head, hp->n_head_kv, hp->n_ctx_train);
    fprintf(stderr, "llama-cli: kernels: %s\n", bitnet_model_kernel_summary(model));
    if (bitnet_model_i2s_note(model)[0]) fprintf(stderr, "llama-cli: %s\n", bitnet_model_i2s_note(model));
    /* a model without ternary weights (an F32/F16 file) runs no kernel path: say so */
    const bool dense_only = strncmp(bitnet_model_kernel_summary(model), "dense float", 11) == 0;
    fprintf(stderr, "llama-cli: path %s, threads %ld, ctx %ld, batch %ld, temp %.2f, top_k %ld, top_p %.2f, seed %lld\n",
            dense_only ? "dense float" : bitnet_kernel_path_name(bitnet_model_path(model)), o.n_threads, o.n_ctx,
            o.n_batch, (double)o.temp,
            o.top_k, (double)o.top_p, (long long)o.seed);

    if (bitnet_tool_cluster_context(cluster, model, &cp, &ctx, &err) != BITNET_OK) {
        fprintf(stderr, "llama-cli: error: cannot create the context: %s\n", err.msg);
        goto done;
    }
    if (*bitnet_context_kernel_choice(ctx)) {
        fprintf(stderr, "llama-cli: %s\nllama-cli: kernels: %s\n", bitnet_context_kernel_choice(ctx),
                bitnet_model_kernel_summary(model));
    }
    if (bitnet_sampler_init(&smp, hp->n_vocab, o.temp, (int32_t)o.top_k, o.top_p, (uint64_t)o.seed, &err) !=
        BITNET_OK) {
        fprintf(stderr, "llama-cli: error: sampler: %s\n", err.msg);
        goto done;
    }
    smp_ok = 1;
    if (o.conversation) {
        rc = run_chat(&o, model, ctx, &smp, prompt);
        goto done;
    }
    rc = generate(&o, ctx, vocab, &smp, prompt, prompt_len);

done:
    if (smp_ok) bitnet_sampler_free(&smp);
    bitnet_context_free(ctx);
    rc = bitnet_tool_cluster_end(cluster, model, rc);
    bitnet_model_free(model);
    free(file_prompt);
    return rc;
}
