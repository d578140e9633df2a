/* pipe.c — the Open MPI ring of pipe.h: messages, the CONTEXT/DECODE/STOP rounds, link pacing, the
 * stage link of rank 0, the serving loop of the other ranks, and the report of resident memory. */
#include "cluster/pipe.h"

#include <mpi.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum { CMD_CONTEXT = 1, CMD_DECODE = 2, CMD_STOP = 3, CMD_ERROR = 4 };
#define TAG_RING 7
#define MSG_MAGIC 0x424e4350 /* "BNCP" */

/* The fixed part of every message (the hidden states or an error text follow). */
typedef struct msg_header {
    int32_t magic, cmd, n, pos0;
    int32_t n_ctx, n_batch, n_threads, n_logits;
    double deliver_at; /* CLOCK_MONOTONIC seconds: not to be used before (link pacing); 0: at once */
} msg_header;

typedef struct pending_send {
    MPI_Request req;
    void *buf;
} pending_send;

struct bitnet_cluster {
    const char *tool;
    int rank, size, next, prev;
    bitnet_cluster_plan *plan;
    bool pace;
    double link_free_at;       /* pacing: when this rank's outgoing link is free again */
    double timeout_s;          /* bound on a wait for an answer */
    pending_send *sends;       /* outstanding MPI_Isend, completed lazily */
    int n_sends, cap_sends;
    bitnet_context *ctx;       /* a serving rank's context */
    int32_t decodes_in_flight; /* rank 0: batches sent and not yet received back */
    bitnet_stage_link link;
    bool serving;              /* every rank passed bitnet_cluster_check_model: the others serve the ring */
};

/* ---- abort: mpirun's SIGTERM when a rank is lost ------------------------------------------------------ */

static volatile sig_atomic_t g_waiting_for = -1;
static int g_rank = -1;
static char g_tool[64] = "bitnet";
static char g_remove_path[4096];

static void put_int(char *buf, size_t *o, long v) {
    char tmp[24];
    int n = 0;
    bool neg = v < 0;
    unsigned long u = neg ? (unsigned long)(-v) : (unsigned long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u && n < 22);
    if (neg) tmp[n++] = '-';
    while (n) buf[(*o)++] = tmp[--n];
}

static void put_str(char *buf, size_t *o, size_t cap, const char *s) {
    while (*s && *o < cap - 1) buf[(*o)++] = *s++;
}

/* Async-signal-safe: write(2), unlink(2), _exit(2) only. */
static void on_abort_signal(int sig) {
    char buf[512];
    size_t o = 0;
    put_str(buf, &o, sizeof buf, g_tool);
    put_str(buf, &o, sizeof buf, ": rank ");
    put_int(buf, &o, g_rank);
    put_str(buf, &o, sizeof buf, ": stopped by signal ");
    put_int(buf, &o, sig);
    if (g_waiting_for >= 0) {
        put_str(buf, &o, sizeof buf, " while waiting for rank ");
        put_int(buf, &o, g_waiting_for);
    }
    put_str(buf, &o, sizeof buf, ": the MPI job is being stopped because a rank was lost (mpirun names it)");
    if (g_remove_path[0]) {
        if (unlink(g_remove_path) == 0) put_str(buf, &o, sizeof buf, "; partial output removed");
    }
    buf[o++] = '\n';
    ssize_t w = write(2, buf, o);
    (void)w;
    _exit(1);
}

void bitnet_cluster_remove_on_abort(bitnet_cluster *cl, const char *path) {
    (void)cl;
    snprintf(g_remove_path, sizeof g_remove_path, "%s", path ? path : "");
}

/* ---- time and MPI errors ------------------------------------------------------------------------------ */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static bitnet_status mpi_fail(const bitnet_cluster *cl, int rc, const char *what, int peer, bitnet_error *err) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    return bitnet_fail(err, BITNET_ERR_IO, "%s: rank %d: %s rank %d failed: %s (rank %d lost?)", cl->tool, cl->rank, what,
                       peer, s, peer);
}

/* ---- messages ----------------------------------------------------------------------------------------- */

static void complete_sends(bitnet_cluster *cl, bool wait) {
    int k = 0;
    for (int i = 0; i < cl->n_sends; i++) {
        int done = 0;
        if (wait) MPI_Wait(&cl->sends[i].req, MPI_STATUS_IGNORE), done = 1;
        else MPI_Test(&cl->sends[i].req, &done, MPI_STATUS_IGNORE);
        if (done) free(cl->sends[i].buf);
        else cl->sends[k++] = cl->sends[i];
    }
    cl->n_sends = k;
}

/* Send header h and payload[bytes] to the next rank without waiting (the buffer is copied). */
static bitnet_status send_next(bitnet_cluster *cl, msg_header h, const void *payload, size_t bytes, bitnet_error *err) {
    complete_sends(cl, false);
    const size_t total = sizeof h + bytes;
    if (total > (size_t)INT32_MAX)
        return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "%s: a message of %zu bytes is too large for one MPI send",
                           cl->tool, total);
    h.magic = MSG_MAGIC;
    h.deliver_at = 0.0;
    if (cl->pace) {
        const bitnet_cluster_link *l = &cl->plan->stages[cl->rank].link;
        const double t = now_s(), start = t > cl->link_free_at ? t : cl->link_free_at;
        cl->link_free_at = start + bitnet_cluster_link_seconds(l, total) - l->latency_s;
        h.deliver_at = cl->link_free_at + l->latency_s;
    }
    if (cl->n_sends == cl->cap_sends) {
        const int cap = cl->cap_sends ? 2 * cl->cap_sends : 16;
        pending_send *ns = realloc(cl->sends, (size_t)cap * sizeof *ns);
        if (!ns) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", cl->tool);
        cl->sends = ns;
        cl->cap_sends = cap;
    }
    unsigned char *buf = malloc(total);
    if (!buf) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory for a message of %zu bytes", cl->tool, total);
    memcpy(buf, &h, sizeof h);
    if (bytes) memcpy(buf + sizeof h, payload, bytes);
    pending_send *ps = &cl->sends[cl->n_sends];
    const int rc = MPI_Isend(buf, (int)total, MPI_BYTE, cl->next, TAG_RING, MPI_COMM_WORLD, &ps->req);
    if (rc != MPI_SUCCESS) {
        free(buf);
        return mpi_fail(cl, rc, "sending to", cl->next, err);
    }
    ps->buf = buf;
    cl->n_sends++;
    return BITNET_OK;
}

/* Receive the next message from the previous rank into *h and a malloc'd *payload (*bytes). bounded: give up
 * after cl->timeout_s. Waits by polling with short sleeps, so an oversubscribed machine keeps its cores for
 * the ranks that compute. */
static bitnet_status recv_prev(bitnet_cluster *cl, bool bounded, msg_header *h, void **payload, size_t *bytes,
                               bitnet_error *err) {
    *payload = NULL;
    *bytes = 0;
    const double t0 = now_s();
    double nap = 20e-6;
    MPI_Status status;
    g_waiting_for = cl->prev;
    for (;;) {
        int flag = 0;
        const int rc = MPI_Iprobe(cl->prev, TAG_RING, MPI_COMM_WORLD, &flag, &status);
        if (rc != MPI_SUCCESS) return mpi_fail(cl, rc, "waiting for", cl->prev, err);
        if (flag) break;
        complete_sends(cl, false);
        if (bounded && now_s() - t0 > cl->timeout_s) {
            g_waiting_for = -1;
            return bitnet_fail(err, BITNET_ERR_IO,
                               "%s: rank %d: no answer from rank %d (node %s) within %.0f s (BITNET_CLUSTER_TIMEOUT): rank "
                               "%d lost or stuck",
                               cl->tool, cl->rank, cl->prev, cl->plan->stages[cl->prev].node, cl->timeout_s, cl->prev);
        }
        sleep_s(nap);
        if (nap < 200e-6) nap *= 2; /* at most 0.2 ms late: a generated token crosses every link */
    }
    g_waiting_for = -1;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (count < (int)sizeof *h)
        return bitnet_fail(err, BITNET_ERR_IO, "%s: rank %d: a message of %d bytes from rank %d is shorter than a header",
                           cl->tool, cl->rank, count, cl->prev);
    unsigned char *buf = malloc((size_t)count);
    if (!buf) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", cl->tool);
    const int rc = MPI_Recv(buf, count, MPI_BYTE, cl->prev, TAG_RING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        free(buf);
        return mpi_fail(cl, rc, "receiving from", cl->prev, err);
    }
    memcpy(h, buf, sizeof *h);
    if (h->magic != MSG_MAGIC) {
        free(buf);
        return bitnet_fail(err, BITNET_ERR_IO, "%s: rank %d: a message from rank %d is not this program's", cl->tool,
                           cl->rank, cl->prev);
    }
    if (h->deliver_at > 0) sleep_s(h->deliver_at - now_s());
    *bytes = (size_t)count - sizeof *h;
    memmove(buf, buf + sizeof *h, *bytes);
    *payload = buf;
    return BITNET_OK;
}

/* An ERROR message carrying err's text, prefixed with this rank and node (once). */
static bitnet_status send_error(bitnet_cluster *cl, const bitnet_error *e, bitnet_error *err) {
    char text[sizeof e->msg + 64];
    snprintf(text, sizeof text, "rank %d (node %s): %s", cl->rank, cl->plan->stages[cl->rank].node, e->msg);
    msg_header h;
    memset(&h, 0, sizeof h);
    h.cmd = CMD_ERROR;
    return send_next(cl, h, text, strlen(text) + 1, err);
}

/* ---- start, agree -------------------------------------------------------------------------------------- */

bitnet_status bitnet_cluster_agree(bitnet_cluster *cl, bitnet_status local, bitnet_error *err) {
    int mine = local == BITNET_OK ? cl->size : cl->rank, first = cl->size;
    int rc = MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(cl, rc, "agreeing with", 0, err);
    if (first == cl->size) return BITNET_OK;
    char msg[sizeof err->msg];
    int st = (int)local;
    if (cl->rank == first) {
        const bool named = cl->plan && first < cl->plan->n_stages;
        int o = snprintf(msg, sizeof msg, "rank %d%s%s%s: ", first, named ? " (node " : "",
                         named ? cl->plan->stages[first].node : "", named ? ")" : "");
        if (o < 0 || (size_t)o >= sizeof msg) o = 0;
        memcpy(msg + o, err->msg, strnlen(err->msg, sizeof msg - (size_t)o - 1));
        msg[o + (int)strnlen(err->msg, sizeof msg - (size_t)o - 1)] = '\0';
    }
    rc = MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD);
    if (rc == MPI_SUCCESS) rc = MPI_Bcast(&st, 1, MPI_INT, first, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail(cl, rc, "agreeing with", first, err);
    msg[sizeof msg - 1] = '\0';
    return bitnet_fail(err, (bitnet_status)st, "%s", msg);
}

bitnet_status bitnet_cluster_start(const char *tool, const char *plan_path, const char *model_path, bool pace_links,
                                   int *argc, char ***argv, bitnet_cluster **out, bool *is_root, bitnet_error *err) {
    *out = NULL;
    *is_root = true;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(argc, argv) != MPI_SUCCESS)
        return bitnet_fail(err, BITNET_ERR_IO, "%s: MPI_Init failed (run under mpirun)", tool);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    bitnet_cluster *cl = calloc(1, sizeof *cl);
    if (!cl) return bitnet_fail(err, BITNET_ERR_NOMEM, "%s: out of memory", tool);
    cl->tool = tool;
    MPI_Comm_rank(MPI_COMM_WORLD, &cl->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &cl->size);
    *is_root = cl->rank == 0;
    cl->next = (cl->rank + 1) % cl->size;
    cl->prev = (cl->rank + cl->size - 1) % cl->size;
    cl->pace = pace_links;
    cl->timeout_s = 300.0;
    const char *to = getenv("BITNET_CLUSTER_TIMEOUT");
    bitnet_status st = BITNET_OK;
    if (to) {
        char *end = NULL;
        const double t = strtod(to, &end);
        if (end == to || *end || !(t > 0) || t > 1e6)
            st = bitnet_fail(err, BITNET_ERR_INVALID_ARG,
                             "BITNET_CLUSTER_TIMEOUT='%.40s' is not a number of seconds in (0, 1e6]", to);
        else cl->timeout_s = t;
    }
    g_rank = cl->rank;
    snprintf(g_tool, sizeof g_tool, "%s", tool);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_abort_signal;
    sigaction(SIGTERM, &sa, NULL);

    if (st == BITNET_OK) st = bitnet_cluster_plan_load(plan_path, &cl->plan, err);
    if (st == BITNET_OK) st = bitnet_cluster_plan_check_ranks(cl->plan, cl->size, err);
    if (st == BITNET_OK && pace_links) {
        /* pacing compares CLOCK_MONOTONIC between ranks: one machine only */
        char host[MPI_MAX_PROCESSOR_NAME] = "", host0[MPI_MAX_PROCESSOR_NAME] = "";
        int len = 0;
        MPI_Get_processor_name(host, &len);
        memcpy(host0, host, sizeof host);
        MPI_Bcast(host0, (int)sizeof host0, MPI_CHAR, 0, MPI_COMM_WORLD);
        if (strcmp(host, host0) != 0)
            st = bitnet_fail(err, BITNET_ERR_UNSUPPORTED,
                             "--link-emulate paces with one clock: rank %d runs on %s, rank 0 on %s", cl->rank, host, host0);
    }
    if (st == BITNET_OK) st = bitnet_cluster_plan_check_file(cl->plan, model_path, err);
    st = bitnet_cluster_agree(cl, st, err); /* a rank without a plan names no node */
    if (st != BITNET_OK) {
        bitnet_cluster_plan_free(cl->plan);
        free(cl);
        return st;
    }
    *out = cl;
    return BITNET_OK;
}

void bitnet_cluster_abandon(void) {
    int inited = 0, finalized = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (!inited || finalized) return;
    signal(SIGTERM, SIG_DFL);   /* a refusal is not a lost rank: no abort message if mpirun stops this one */
    MPI_Barrier(MPI_COMM_WORLD); /* rank 0 has printed the refusal before any rank exits */
    MPI_Finalize();
}

int bitnet_cluster_rank(const bitnet_cluster *cl) { return cl->rank; }
int bitnet_cluster_size(const bitnet_cluster *cl) { return cl->size; }
const bitnet_cluster_plan *bitnet_cluster_get_plan(const bitnet_cluster *cl) { return cl->plan; }

void bitnet_cluster_model_params(const bitnet_cluster *cl, bitnet_model_params *mp) {
    bitnet_cluster_plan_stage_params(cl->plan, cl->rank, mp);
}

bitnet_status bitnet_cluster_check_model(bitnet_cluster *cl, const bitnet_model *m, const bitnet_context_params *cp,
                                         bitnet_error *err) {
    bitnet_status st = bitnet_cluster_plan_check_model(cl->plan, cl->rank, m, cp, err);
    st = bitnet_cluster_agree(cl, st, err);
    cl->serving = st == BITNET_OK;
    return st;
}

/* ---- rank 0: the link and the rounds --------------------------------------------------------------------- */

/* Wait for the round started by rank 0 to come back: `want` or an ERROR (whose text becomes err). */
static bitnet_status await_round(bitnet_cluster *cl, int want, msg_header *h, void **payload, size_t *bytes,
                                 bitnet_error *err) {
    bitnet_status st = recv_prev(cl, true, h, payload, bytes, err);
    if (st != BITNET_OK) return st;
    if (h->cmd == CMD_ERROR) {
        ((char *)*payload)[*bytes ? *bytes - 1 : 0] = '\0';
        st = bitnet_fail(err, BITNET_ERR_IO, "%s: %s", cl->tool, *bytes ? (const char *)*payload : "a rank failed");
        free(*payload);
        *payload = NULL;
        return st;
    }
    if (h->cmd != want) {
        free(*payload);
        *payload = NULL;
        return bitnet_fail(err, BITNET_ERR_IO, "%s: rank 0: expected message %d back from the ring, got %d", cl->tool,
                           want, h->cmd);
    }
    return BITNET_OK;
}

static bitnet_status link_send(void *user, const float *x, int32_t n, int32_t pos0, bitnet_error *err) {
    bitnet_cluster *cl = user;
    msg_header h;
    memset(&h, 0, sizeof h);
    h.cmd = CMD_DECODE;
    h.n = n;
    h.pos0 = pos0;
    const bitnet_status st = send_next(cl, h, x, (size_t)n * (size_t)cl->plan->n_embd * sizeof(float), err);
    if (st == BITNET_OK) cl->decodes_in_flight++;
    return st;
}

static bitnet_status link_recv(void *user, float *x, int32_t n, int32_t pos0, bitnet_error *err) {
    bitnet_cluster *cl = user;
    msg_header h;
    void *payload = NULL;
    size_t bytes = 0;
    bitnet_status st = await_round(cl, CMD_DECODE, &h, &payload, &bytes, err);
    if (st != BITNET_OK) return st;
    cl->decodes_in_flight--;
    const size_t want = (size_t)n * (size_t)cl->plan->n_embd * sizeof(float);
    if (h.n != n || h.pos0 != pos0 || bytes != want) {
        free(payload);
        return bitnet_fail(err, BITNET_ERR_IO,
                           "%s: rank 0: the ring returned %d tokens at position %d (%zu bytes), expected %d at %d", cl->tool,
                           (int)h.n, (int)h.pos0, bytes, (int)n, (int)pos0);
    }
    memcpy(x, payload, want);
    free(payload);
    return BITNET_OK;
}

bitnet_status bitnet_cluster_context_create(bitnet_cluster *cl, bitnet_model *m, const bitnet_context_params *cp,
                                            bitnet_context **out, bitnet_error *err) {
    *out = NULL;
    if (cl->rank != 0) return bitnet_fail(err, BITNET_ERR_INVALID_ARG, "bitnet_cluster_context_create: rank 0 only");
    bitnet_status st = bitnet_cluster_plan_check_model(cl->plan, 0, m, cp, err);
    if (st != BITNET_OK) return st;
    bitnet_context *c = NULL;
    if ((st = bitnet_context_create_params(m, cp, &c, err)) != BITNET_OK) return st;
    if (cl->size > 1) {
        msg_header h;
        memset(&h, 0, sizeof h);
        h.cmd = CMD_CONTEXT;
        h.n_ctx = cp->n_ctx;
        h.n_batch = cp->n_batch;
        h.n_threads = cp->n_threads;
        h.n_logits = 1;
        void *payload = NULL;
        size_t bytes = 0;
        st = send_next(cl, h, NULL, 0, err);
        if (st == BITNET_OK) st = await_round(cl, CMD_CONTEXT, &h, &payload, &bytes, err);
        free(payload);
        if (st != BITNET_OK) {
            bitnet_context_free(c);
            return st;
        }
        cl->link.user = cl;
        cl->link.send = link_send;
        cl->link.recv = link_recv;
        bitnet_context_set_link(c, &cl->link);
    }
    *out = c;
    return BITNET_OK;
}

void bitnet_cluster_context_free(bitnet_cluster *cl, bitnet_context *c) {
    (void)cl;
    bitnet_context_free(c);
}

/* ---- the other ranks ----------------------------------------------------------------------------------- */

bitnet_status bitnet_cluster_serve(bitnet_cluster *cl, bitnet_model *m, bitnet_error *err) {
    bitnet_status failed = BITNET_OK;
    bitnet_error first = {{0}};
    for (;;) {
        msg_header h;
        void *payload = NULL;
        size_t bytes = 0;
        bitnet_status st = recv_prev(cl, false, &h, &payload, &bytes, err);
        if (st != BITNET_OK) return st; /* the ring is broken: nothing to pass on */
        bitnet_error e = {{0}};
        switch (h.cmd) {
        case CMD_CONTEXT: {
            bitnet_context_free(cl->ctx);
            cl->ctx = NULL;
            const bitnet_context_params cp = {h.n_ctx, h.n_batch, h.n_threads, h.n_logits, 1, false};
            st = bitnet_cluster_plan_check_model(cl->plan, cl->rank, m, &cp, &e);
            if (st == BITNET_OK) st = bitnet_context_create_params(m, &cp, &cl->ctx, &e);
            if (st == BITNET_OK) {
                st = send_next(cl, h, NULL, 0, err);
            } else {
                failed = st;
                first = e;
                st = send_error(cl, &e, err);
            }
            break;
        }
        case CMD_DECODE: {
            const size_t want = (size_t)h.n * (size_t)cl->plan->n_embd * sizeof(float);
            if (!cl->ctx) st = bitnet_fail(&e, BITNET_ERR_INVALID_ARG, "a batch arrived before a context was made");
            else if (bytes != want || h.n < 1)
                st = bitnet_fail(&e, BITNET_ERR_IO, "a batch of %d tokens came with %zu bytes, not %zu", (int)h.n, bytes, want);
            else st = bitnet_decode_hidden(cl->ctx, payload, h.n, h.pos0, &e);
            if (st == BITNET_OK) {
                st = send_next(cl, h, payload, bytes, err);
            } else {
                failed = st;
                first = e;
                st = send_error(cl, &e, err);
            }
            break;
        }
        case CMD_ERROR:
            st = send_next(cl, h, payload, bytes, err); /* rank 0 reports it */
            break;
        case CMD_STOP:
            st = send_next(cl, h, NULL, 0, err);
            free(payload);
            complete_sends(cl, true);
            bitnet_context_free(cl->ctx);
            cl->ctx = NULL;
            if (st != BITNET_OK) return st;
            if (failed != BITNET_OK) {
                *err = first;
                return failed;
            }
            return BITNET_OK;
        default:
            st = bitnet_fail(err, BITNET_ERR_IO, "%s: rank %d: unknown message %d from rank %d", cl->tool, cl->rank,
                             (int)h.cmd, cl->prev);
        }
        free(payload);
        if (st != BITNET_OK) return st; /* a message could not be passed on: the ring is broken */
    }
}

/* ---- the end ---------------------------------------------------------------------------------------------- */

int bitnet_cluster_finish(bitnet_cluster *cl, const bitnet_model *m, int status, bool quiet) {
    if (!cl) return status;
    bitnet_error err = {{0}};
    if (cl->rank == 0 && cl->size > 1 && cl->serving) {
        msg_header h;
        memset(&h, 0, sizeof h);
        void *payload = NULL;
        size_t bytes = 0;
        /* batches still in the ring (a decode that failed half-way) come back before STOP */
        while (cl->decodes_in_flight > 0 && recv_prev(cl, true, &h, &payload, &bytes, &err) == BITNET_OK) {
            free(payload);
            payload = NULL;
            if (h.cmd == CMD_DECODE) cl->decodes_in_flight--;
        }
        h.cmd = CMD_STOP;
        bitnet_status st = send_next(cl, h, NULL, 0, &err);
        while (st == BITNET_OK) {
            st = recv_prev(cl, true, &h, &payload, &bytes, &err);
            free(payload);
            payload = NULL;
            if (st == BITNET_OK && h.cmd == CMD_STOP) break;
        }
        if (st != BITNET_OK) {
            fprintf(stderr, "%s\n", err.msg);
            status = status ? status : 1;
        }
    }
    complete_sends(cl, true);
    signal(SIGTERM, SIG_DFL); /* the work is over: a rank stopped from here on has nothing to report or remove */
    /* every rank's peak resident memory and its share of the file */
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double mine[2] = {(double)ru.ru_maxrss * 1024.0, m ? (double)bitnet_model_stage_bytes(m) : 0.0};
    double *all = cl->rank == 0 ? calloc((size_t)cl->size * 2, sizeof(double)) : NULL;
    if (MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD) == MPI_SUCCESS && all && !quiet) {
        for (int r = 0; r < cl->size; r++) {
            const bitnet_cluster_stage *s = &cl->plan->stages[r];
            fprintf(stderr, "%s: rank %d (node %s, layers %d .. %d%s): peak RSS %.1f MiB, stage tensors %.1f MiB\n",
                    cl->tool, r, s->node, (int)s->first_layer, (int)(s->first_layer + s->n_layers - 1),
                    s->token_embd ? ", embedding and head" : "", all[2 * r] / 1048576.0, all[2 * r + 1] / 1048576.0);
        }
    }
    free(all);
    free(cl->sends);
    bitnet_cluster_plan_free(cl->plan);
    free(cl);
    g_remove_path[0] = '\0';
    MPI_Finalize();
    return status;
}
