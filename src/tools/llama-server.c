/* llama-server.c — an OpenAI-compatible HTTP server for a BitNet GGUF model, as llama.cpp's llama-server
 * (which bitnet.cpp's run_inference_server.py starts): N slots decoded together with continuous batching
 * (src/server/engine.h), endpoints in src/server/server.h.
 *
 * Embedding mode (--embeddings, or a model whose GGUF has <arch>.pooling_type: BitNet-embedding 0.6B / 270M):
 * the engine keeps token embeddings instead of logits and the server answers POST /v1/embeddings and
 * refuses generation (server.h); --pooling overrides the model's pooling_type.
 *
 * stderr: the model line, the kernel line, then "llama-server: listening on http://HOST:PORT (N slots x
 * C positions, batch B, threads T[, embeddings, pooling P])" once requests are accepted; one line at
 * shutdown.
 * Signals: the first SIGINT or SIGTERM stops accepting connections, lets every request already received
 * finish and be answered, and exits 0; a second one exits at once with status 1. Every generation request
 * logs one line when it ends (server.h).
 * Exit status (tools/common/args.h): 0 after a signal-initiated shutdown, 1 a model, address or runtime
 * error, 2 a bad command line. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/arch.h"
#include "model/model.h"
#include "server/engine.h"
#include "server/server.h"
#include "text/chat.h"
#include "tilefile/tile_file.h"
#include "tools/common/args.h"
#include "tools/common/chat_opt.h"

typedef struct options {
    const char *model;
    const char *alias;
    const char *host;
    long port;
    const char *api_key;
    long n_ctx;
    long n_slots;
    long n_threads;
    long n_batch;
    long n_predict;
    long queue;
    long max_tokens;
    long max_body;
    long max_connections;
    float temp;
    long top_k;
    float top_p;
    int64_t seed;
    int kernel;
    int head_type; /* bitnet_model_params.head_type */
    int i2s_layout; /* bitnet_model_params.i2s_layout (--i2s-layout) */
    const char *lut_table;
    const char *lut_tiles;
    const char *chat_template;
    const char *system_prompt;
    bool embeddings;      /* --embeddings */
    int pooling;          /* --pooling: -1 not given, else a bitnet_pooling value */
    long embd_max_inputs;
    long embd_max_tokens;
    double request_timeout;   /* --request-timeout */
    double keepalive_timeout; /* --keepalive-timeout */
    long timeout;             /* -to, --timeout */
    long max_conn_per_ip;     /* --max-connections-per-ip (0: --max-connections / 4) */
    double shutdown_timeout;  /* --shutdown-timeout */
    bool metrics;             /* --metrics */
} options;

#define fail(...) bitnet_tool_error("llama-server", BITNET_EXIT_FAILURE, __VA_ARGS__)

static int parse_args(int argc, char **argv, options *o) {
    long ignored;
    int head = 0;
    bool cont_batching = false;
    const bitnet_arg_opt opts[] = {
        BITNET_OPT("-m, --model", "FILE", "model file (required)", BITNET_ARG_STRING, &o->model),
        BITNET_OPT("-a, --alias", "NAME", "the model id of /v1/models and requests (default: the file name)",
                   BITNET_ARG_STRING, &o->alias),
        BITNET_OPT("--host", "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 = every interface)",
                   BITNET_ARG_STRING, &o->host),
        BITNET_OPT("--port", "N", "port (default 8080; 0 = any free port, printed at start)", BITNET_ARG_LONG, &o->port,
                   .lo = 0, .hi = 65535),
        BITNET_OPT("--api-key", "KEY", "require \"Authorization: Bearer KEY\" (every endpoint but /health);\n"
                                      "default: $LLAMA_API_KEY if set, else no key",
                   BITNET_ARG_STRING, &o->api_key),
        BITNET_OPT("-c, --ctx-size", "N", "context size in tokens shared by the slots: each slot holds N / -np\n"
                                         "(default 0 = min(model context, 4096) per slot)",
                   BITNET_ARG_LONG, &o->n_ctx, .lo = 0, .hi = 1 << 24),
        BITNET_OPT("-np, --parallel", "N", "slots: requests decoded together (default 4)", BITNET_ARG_LONG, &o->n_slots,
                   .lo = 1, .hi = 256),
        BITNET_OPT("-cb, --cont-batching", NULL, "accepted for compatibility: batching is always continuous",
                   BITNET_ARG_FLAG, &cont_batching),
        BITNET_OPT("-t, --threads", "N", "threads (default: the number of online CPUs)", BITNET_ARG_LONG, &o->n_threads,
                   .lo = 1, .hi = 1024),
        BITNET_OPT("-b, --batch-size", "N", "tokens per forward pass over all slots (default 512)", BITNET_ARG_LONG,
                   &o->n_batch, .lo = 1, .hi = 1 << 24),
        BITNET_OPT("-n, --n-predict", "N", "max_tokens of a request that gives none (default -1 = until the slot's\n"
                                          "context is full)",
                   BITNET_ARG_LONG, &o->n_predict, .lo = -1, .hi = INT_MAX),
        BITNET_OPT("--max-tokens", "N", "the largest max_tokens a request may ask for (default 4096)", BITNET_ARG_LONG,
                   &o->max_tokens, .lo = 1, .hi = INT_MAX),
        BITNET_OPT("--queue", "N", "requests that may wait for a free slot; more get 429 (default 64)", BITNET_ARG_LONG,
                   &o->queue, .lo = 0, .hi = 1 << 20),
        BITNET_OPT("--max-body", "BYTES", "largest request body; more gets 413 (default 1048576)", BITNET_ARG_LONG,
                   &o->max_body, .lo = 1, .hi = 1L << 30),
        BITNET_OPT("--max-connections", "N", "simultaneous connections (default 128)", BITNET_ARG_LONG,
                   &o->max_connections, .lo = 1, .hi = 65536),
        BITNET_OPT("--max-connections-per-ip", "N", "connections open at once from one client address; more are\n"
                                                    "closed at accept (default --max-connections / 4)",
                   BITNET_ARG_LONG, &o->max_conn_per_ip, .lo = 1, .hi = 65536),
        BITNET_OPT("--request-timeout", "S", "a request (line, headers, body) must arrive whole within S\n"
                                             "seconds, however slowly its bytes come; else 408 and the\n"
                                             "connection is closed (default 30)",
                   BITNET_ARG_DOUBLE, &o->request_timeout, .flo = 0.1, .fhi = 86400.0),
        BITNET_OPT("--keepalive-timeout", "S", "an idle kept-alive connection is closed after S seconds\n"
                                               "(default 15)",
                   BITNET_ARG_DOUBLE, &o->keepalive_timeout, .flo = 0.1, .fhi = 86400.0),
        BITNET_OPT("-to, --timeout", "S", "read/write timeout: a connection on which no byte moves for S\n"
                                          "seconds is closed, e.g. a client that stops reading a stream\n"
                                          "(its generation stops, its slot is freed) (default 30)",
                   BITNET_ARG_LONG, &o->timeout, .lo = 1, .hi = 86400),
        BITNET_OPT("--shutdown-timeout", "S", "on SIGTERM/SIGINT, requests still running after S seconds end\n"
                                              "with a 503 error (a stream: an error event) and the server\n"
                                              "exits 0 (default 20; 0 = at once)",
                   BITNET_ARG_DOUBLE, &o->shutdown_timeout, .flo = 0.0, .fhi = 86400.0),
        BITNET_OPT("--metrics", NULL, "answer GET /metrics (Prometheus text format; under --api-key)",
                   BITNET_ARG_FLAG, &o->metrics),
        BITNET_OPT("--temp", "T", "default temperature (default 0.8; 0 = greedy)", BITNET_ARG_FLOAT, &o->temp,
                   .flo = 0.0, .fhi = 2.0),
        BITNET_OPT("--top-k", "N", "default top-k (default 40; 0 = all)", BITNET_ARG_LONG, &o->top_k, .lo = 0, .hi = INT_MAX),
        BITNET_OPT("--top-p", "P", "default top-p (default 0.95; 1 = off)", BITNET_ARG_FLOAT, &o->top_p, .flo = 0.0,
                   .fhi = 1.0),
        BITNET_OPT("-s, --seed", "N", "seed of requests that give none (default -1 = a new one each)", BITNET_ARG_INT64,
                   &o->seed, .lo = -1, .hi = LONG_MAX),
        BITNET_OPT("--kernel", "K", "auto|i2_s|tl1|tl2 (default auto: tl2 on x86-64 with AVX2, tl1 on AArch64)",
                   BITNET_ARG_CHOICE, &o->kernel, .choices = "auto|i2_s|tl1|tl2"),
        BITNET_OPT("--lut-table", "T", "default|pretuned: preferred tile table (default: the build's choice)",
                   BITNET_ARG_WORD, &o->lut_table, .choices = "default|pretuned"),
        BITNET_OPT_LUT_TILES(&o->lut_tiles),
        BITNET_OPT_I2S_LAYOUT(&o->i2s_layout),
        BITNET_OPT("--head-type", "H",
                   "stored|q8_0: output head as stored in the file (default, exact) or\n"
                   "requantized to Q8_0 at load (fewer bytes and integer products per\n"
                   "token and sequence; logits change by the Q8_0 rounding)",
                   BITNET_ARG_CHOICE, &head, .choices = "stored|q8_0"),
        BITNET_OPT_CHAT_TEMPLATE(&o->chat_template),
        BITNET_OPT("-sp, --system-prompt", "TEXT", "system message of chat requests that do not begin with one\n"
                                                  "(run_inference_server.py -p)",
                   BITNET_ARG_STRING, &o->system_prompt),
        BITNET_OPT("-ngl, --n-gpu-layers", "N", "accepted for compatibility and ignored (CPU only)", BITNET_ARG_LONG,
                   &ignored, .lo = -1, .hi = INT_MAX),
        BITNET_OPT("--embedding, --embeddings", NULL,
                   "embedding mode: answer POST /v1/embeddings and refuse generation\n"
                   "(the default for a model whose GGUF has <arch>.pooling_type)",
                   BITNET_ARG_FLAG, &o->embeddings),
        BITNET_OPT("--pooling", "P", "none|mean|cls|last: how an embedding server pools a text's token\n"
                                   "embeddings (default: the model's pooling_type, else none;\n"
                                   "none: /v1/embeddings answers 400, as llama.cpp's server)",
                   BITNET_ARG_CHOICE, &o->pooling, .choices = "none|mean|cls|last"),
        BITNET_OPT("--embd-max-inputs", "N", "texts in one /v1/embeddings request (default 512)", BITNET_ARG_LONG,
                   &o->embd_max_inputs, .lo = 1, .hi = 1 << 20),
        BITNET_OPT("--embd-max-tokens", "N", "tokens of all texts of one /v1/embeddings request (default 32768)",
                   BITNET_ARG_LONG, &o->embd_max_tokens, .lo = 1, .hi = INT_MAX),
    };
    char arch_names[256], desc[900];
    snprintf(desc, sizeof desc,
             "Serve a ternary (BitNet b1.58) model over HTTP with OpenAI's API: POST /v1/chat/completions,\n"
             "/v1/completions (stream or not), GET /v1/models, /health, POST /tokenize, /detokenize,\n"
             "GET /metrics (with --metrics).\n"
             "Embedding models (a GGUF with <arch>.pooling_type, or --embeddings): POST /v1/embeddings\n"
             "(L2-normalized vectors, float or base64) instead of generation.\n"
             "Architectures: %s. Listens on 127.0.0.1 unless --host says otherwise.\n",
             bitnet_arch_list(arch_names, sizeof arch_names, "", ", ", " or "));
    static const char *const epi =
        "SIGINT/SIGTERM: finish the requests already received (for at most --shutdown-timeout), then exit 0\n"
        "(a second signal exits 1 at once).\n"
        BITNET_EXIT_STATUS_HELP;
    const bitnet_args args = BITNET_ARGS("llama-server", "usage: llama-server -m MODEL [options]", desc, epi, opts,
                                         .help_col = 27);
    const int pr = bitnet_args_parse(&args, argc, argv);
    if (pr >= 0) return pr;
    o->head_type = head ? BITNET_TYPE_Q8_0 : 0;
    if (!o->model) return bitnet_args_fail(&args, "no model given: use -m MODEL (see --help)");
    if (o->n_ctx > 0 && o->n_ctx < o->n_slots) {
        return bitnet_args_fail(&args, "-c %ld is smaller than -np %ld: every slot needs at least one position", o->n_ctx,
                                o->n_slots);
    }
    if (o->api_key && !*o->api_key) return bitnet_args_fail(&args, "--api-key is empty");
    return -1;
}

/* Signals are blocked in every thread; this one waits for them. */
static sigset_t g_signals;
static atomic_int g_n_signals;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

static void *signal_thread(void *arg) {
    (void)arg;
    for (;;) {
        int sig = 0;
        if (sigwait(&g_signals, &sig) != 0) continue;
        if (atomic_fetch_add(&g_n_signals, 1) >= 1) {
            fprintf(stderr, "llama-server: second signal (%s): exiting now\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
            _exit(BITNET_EXIT_FAILURE);
        }
        pthread_mutex_lock(&g_mu);
        pthread_cond_signal(&g_cond);
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int main(int argc, char **argv) {
    options o = {
        .host = "127.0.0.1", .port = 8080, .n_slots = 4, .n_batch = 512, .n_predict = -1, .queue = 64,
        .max_tokens = 4096, .max_body = 1 << 20, .max_connections = 128, .temp = 0.8f, .top_k = 40, .top_p = 0.95f,
        .seed = -1, .kernel = BITNET_PATH_AUTO, .pooling = -1, .embd_max_inputs = 512, .embd_max_tokens = 32768,
        .request_timeout = BITNET_SERVER_REQUEST_TIMEOUT_S, .keepalive_timeout = BITNET_SERVER_KEEPALIVE_TIMEOUT_S,
        .timeout = BITNET_SERVER_TIMEOUT_S, .shutdown_timeout = BITNET_SERVER_SHUTDOWN_TIMEOUT_S,
    };
    const int pr = parse_args(argc, argv, &o);
    if (pr >= 0) return pr;
    if (!o.api_key && getenv("LLAMA_API_KEY") && *getenv("LLAMA_API_KEY")) o.api_key = getenv("LLAMA_API_KEY");
    if (o.n_threads == 0) {
        const long n = sysconf(_SC_NPROCESSORS_ONLN);
        o.n_threads = n >= 1 ? (n > 1024 ? 1024 : n) : 1;
    }

    /* every thread started from here on inherits the blocked signals */
    sigemptyset(&g_signals);
    sigaddset(&g_signals, SIGINT);
    sigaddset(&g_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &g_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    int rc = BITNET_EXIT_FAILURE;
    bitnet_error err = {{0}};
    bitnet_model *model = NULL;
    bitnet_engine *engine = NULL;
    bitnet_server *server = NULL;
    bitnet_tile_file *tiles = NULL;
    if (o.lut_tiles && bitnet_tile_file_load(o.lut_tiles, o.lut_table, &tiles, &err) != BITNET_OK) {
        fail("--lut-tiles: %s", err.msg);
        goto done;
    }
    const bitnet_model_params mp = {(bitnet_kernel_path)o.kernel, o.lut_table, o.head_type, tiles, false, 0, 0, false, o.i2s_layout};
    const bitnet_status load_st = bitnet_model_load(o.model, &mp, &model, &err);
    bitnet_tile_file_free(tiles);
    if (load_st != BITNET_OK) {
        fail("cannot load model: %s", err.msg);
        goto done;
    }
    const bitnet_hparams *hp = bitnet_model_hparams(model);
    const bitnet_vocab *vocab = bitnet_model_vocab(model);
    const int32_t per_slot_default = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    const int32_t n_ctx_slot = o.n_ctx > 0 ? (int32_t)(o.n_ctx / o.n_slots) : per_slot_default;
    if (o.n_batch > (long)n_ctx_slot * o.n_slots) o.n_batch = (long)n_ctx_slot * o.n_slots;
    fprintf(stderr, "llama-server: model %s: arch %s, %.2fM params, %.2f MiB, n_vocab %d, n_embd %d, n_layer %d, "
                    "n_ctx_train %d\n",
            o.model, hp->arch, (double)bitnet_model_n_params(model) / 1e6,
            (double)bitnet_model_size_bytes(model) / (1024.0 * 1024.0), hp->n_vocab, hp->n_embd, hp->n_layer,
            hp->n_ctx_train);
    fprintf(stderr, "llama-server: kernels: %s\n", bitnet_model_kernel_summary(model));
    if (bitnet_model_i2s_note(model)[0]) fprintf(stderr, "llama-server: %s\n", bitnet_model_i2s_note(model));

    /* embedding mode: asked for, or the file is an embedding model */
    const bool embeddings = o.embeddings || hp->pooling >= 0;
    const bitnet_pooling pooling = o.pooling >= 0 ? (bitnet_pooling)o.pooling
                                   : hp->pooling >= 0 ? (bitnet_pooling)hp->pooling
                                                      : BITNET_POOLING_NONE;
    if (embeddings && (pooling < BITNET_POOLING_NONE || pooling > BITNET_POOLING_LAST)) {
        fail("the model's %s.pooling_type is %d (rank: a reranker's classifier head, which this runtime does not "
             "have); start with --pooling mean|cls|last",
             hp->arch, (int)pooling);
        goto done;
    }
    if (!embeddings && o.pooling >= 0) {
        fprintf(stderr, "llama-server: warning: --pooling has no effect: this server generates text (add --embeddings "
                        "for /v1/embeddings)\n");
    }
    if (embeddings && pooling == BITNET_POOLING_NONE) {
        fprintf(stderr, "llama-server: warning: pooling none: /v1/embeddings answers 400 (one vector per token has no "
                        "OpenAI-compatible answer) until started with --pooling mean|cls|last\n");
    }

    bitnet_chat_template tmpl;
    bitnet_chat_family fam = BITNET_CHAT_UNKNOWN;
    if (o.chat_template) {
        fam = bitnet_chat_family_parse(o.chat_template);
    } else {
        const char *t = bitnet_vocab_chat_template(vocab);
        if (t) fam = bitnet_chat_detect(t, strlen(t));
    }
    bitnet_chat_template_init(&tmpl, fam, vocab);
    if (embeddings) {
        /* no chat: nothing to warn about */
    } else if (fam == BITNET_CHAT_UNKNOWN) {
        fprintf(stderr, "llama-server: warning: %s; /v1/chat/completions answers 400 until started with "
                        "--chat-template NAME (%s)\n",
                bitnet_vocab_chat_template(vocab) ? "the model's tokenizer.chat_template is none this server knows"
                                                   : "the model has no tokenizer.chat_template",
                bitnet_chat_known_names());
    } else {
        const char *missing = bitnet_chat_missing_marker(&tmpl, vocab);
        if (missing) {
            fprintf(stderr, "llama-server: warning: chat template %s: the marker \"%s\" is not a token of this "
                            "vocabulary; it is tokenized as text\n",
                    bitnet_chat_family_name(fam), missing);
        }
    }

    const bitnet_engine_params ep = {(int32_t)o.n_slots, n_ctx_slot, (int32_t)o.n_batch, (int32_t)o.n_threads,
                                     (int32_t)o.queue, embeddings};
    if (bitnet_engine_start(model, &ep, &engine, &err) != BITNET_OK) {
        fail("cannot start the engine: %s", err.msg);
        goto done;
    }
    const bitnet_server_config cfg = {
        .host = o.host,
        .port = (int)o.port,
        .api_key = o.api_key,
        .model_id = o.alias ? o.alias : base_name(o.model),
        .max_body = (size_t)o.max_body,
        .n_ctx_slot = n_ctx_slot,
        .max_tokens_cap = (int32_t)o.max_tokens,
        .n_predict = (int32_t)o.n_predict,
        .temp = o.temp,
        .top_p = o.top_p,
        .top_k = (int32_t)o.top_k,
        .seed = o.seed,
        .tmpl = tmpl,
        .max_connections = (unsigned)o.max_connections,
        .log = stderr,
        .system_prompt = o.system_prompt,
        .embeddings = embeddings,
        .pooling = pooling,
        .max_embd_inputs = (int32_t)o.embd_max_inputs,
        .max_embd_tokens = (int32_t)o.embd_max_tokens,
        .request_timeout_s = o.request_timeout,
        .keepalive_timeout_s = o.keepalive_timeout,
        .timeout_s = (double)o.timeout,
        .max_connections_per_address = (unsigned)o.max_conn_per_ip,
        .shutdown_timeout_s = o.shutdown_timeout,
        .metrics = o.metrics,
    };
    if (bitnet_server_start(model, engine, &cfg, &server, &err) != BITNET_OK) {
        fail("%s", err.msg);
        goto done;
    }
    pthread_t sig_thread;
    if (pthread_create(&sig_thread, NULL, signal_thread, NULL) != 0) {
        fail("cannot start the signal thread");
        goto done;
    }
    const bool v6 = strchr(o.host, ':') != NULL;
    char mode[64] = "";
    if (embeddings) {
        snprintf(mode, sizeof mode, ", embeddings, pooling %s%s", bitnet_pooling_name(pooling),
                 o.pooling < 0 && hp->pooling >= 0 ? " (the model's)" : "");
    }
    fprintf(stderr,
            "llama-server: listening on http://%s%s%s:%d (%ld slots x %d positions, batch %ld, threads %ld%s%s)\n",
            v6 ? "[" : "", o.host, v6 ? "]" : "", bitnet_server_port(server), o.n_slots, (int)n_ctx_slot, o.n_batch,
            o.n_threads, mode, o.api_key ? ", API key required" : "");

    pthread_mutex_lock(&g_mu);
    while (atomic_load(&g_n_signals) == 0) pthread_cond_wait(&g_cond, &g_mu);
    pthread_mutex_unlock(&g_mu);
    int32_t busy, waiting;
    bitnet_engine_load(engine, &busy, &waiting);
    fprintf(stderr, "llama-server: shutting down: finishing %d running and %d waiting requests\n", (int)busy, (int)waiting);
    bitnet_server_stop(server, 10000);
    server = NULL;
    rc = BITNET_EXIT_OK;
    fprintf(stderr, "llama-server: stopped\n");

done:
    bitnet_server_stop(server, 0);
    bitnet_engine_free(engine);
    bitnet_model_free(model);
    return rc;
}
