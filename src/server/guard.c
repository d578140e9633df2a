/* guard.c — the connection guard of llama-server (guard.h): a list of open connections under one lock,
 * and a watchdog thread that wakes every tick and shuts down the sockets whose deadline has passed. */
#include "server/guard.h"

#include <errno.h>
#include <linux/sockios.h>
#include <linux/tcp.h> /* the kernel's struct tcp_info: glibc's lacks tcpi_bytes_acked */
#include <stddef.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

/* A client's host address: family (AF_INET, AF_INET6, 0 for others) and its bytes (an IPv4-mapped IPv6
 * address counts as the IPv4 one). */
typedef struct host_key {
    int family;
    unsigned char b[16];
} host_key;

struct bitnet_guard_conn {
    int fd;
    host_key host;
    bitnet_guard_phase phase;
    int64_t deadline_ms; /* CLOCK_MONOTONIC ms; 0: none */
    bool timed_out;
    bitnet_guard_conn *prev, *next;
};

struct bitnet_guard {
    bitnet_guard_limits lim;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    pthread_t thread;
    bool quit;
    bitnet_guard_conn *head;
    bitnet_guard_stats st;
};

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static host_key key_of(const struct sockaddr *a, socklen_t len) {
    host_key k;
    memset(&k, 0, sizeof k);
    if (!a) return k;
    if (a->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)(const void *)a;
        k.family = AF_INET;
        memcpy(k.b, &v4->sin_addr, 4);
    } else if (a->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)(const void *)a;
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(v6->sin6_addr.s6_addr, mapped, 12) == 0) {
            k.family = AF_INET;
            memcpy(k.b, v6->sin6_addr.s6_addr + 12, 4);
        } else {
            k.family = AF_INET6;
            memcpy(k.b, v6->sin6_addr.s6_addr, 16);
        }
    }
    return k;
}

/* The answer written to a connection whose request did not arrive in time (RFC 9110 §15.5.9). */
static void write_408(int fd, int64_t request_ms) {
    char body[256], msg[512];
    const int nb = snprintf(body, sizeof body,
                            "{\"error\":{\"message\":\"the request did not arrive whole within %lld ms "
                            "(llama-server --request-timeout)\",\"type\":\"invalid_request_error\",\"param\":null,"
                            "\"code\":\"request_timeout\"}}",
                            (long long)request_ms);
    const int n = snprintf(msg, sizeof msg,
                           "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: application/json\r\n"
                           "Content-Length: %d\r\n\r\n%s",
                           nb, body);
    if (n > 0 && (size_t)n < sizeof msg) (void)send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void *watchdog(void *arg) {
    bitnet_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->quit) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)g->lim.tick_ms * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&g->wake, &g->mu, &until);
        if (g->quit) break;
        const int64_t now = now_ms();
        for (bitnet_guard_conn *c = g->head; c; c = c->next) {
            if (c->timed_out || c->deadline_ms == 0 || now < c->deadline_ms) continue;
            if (c->phase == BITNET_GUARD_RECEIVING) {
                write_408(c->fd, g->lim.request_ms);
                g->st.timeout_request++;
            } else if (c->phase == BITNET_GUARD_IDLE) {
                g->st.timeout_keepalive++;
            } else {
                continue;
            }
            c->timed_out = true;
            shutdown(c->fd, SHUT_RDWR); /* the HTTP server's thread sees the end and closes it */
        }
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

bitnet_guard *bitnet_guard_create(const bitnet_guard_limits *lim) {
    if (!lim || lim->request_ms <= 0 || lim->keepalive_ms <= 0 || lim->per_address == 0 || lim->tick_ms <= 0) return NULL;
    bitnet_guard *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->lim = *lim;
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g);
        return NULL;
    }
    pthread_condattr_t ca; /* deadlines on the monotonic clock: a wall clock stepped back must not stall them */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    const int cr = pthread_cond_init(&g->wake, &ca);
    pthread_condattr_destroy(&ca);
    if (cr != 0) {
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    if (pthread_create(&g->thread, NULL, watchdog, g) != 0) {
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return NULL;
    }
    return g;
}

void bitnet_guard_free(bitnet_guard *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->quit = true;
    pthread_cond_signal(&g->wake);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->thread, NULL);
    for (bitnet_guard_conn *c = g->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    pthread_cond_destroy(&g->wake);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

bool bitnet_guard_admit(bitnet_guard *g, const struct sockaddr *addr, socklen_t len) {
    const host_key k = key_of(addr, len);
    if (k.family == 0) return true;
    pthread_mutex_lock(&g->mu);
    unsigned n = 0;
    for (const bitnet_guard_conn *c = g->head; c && n < g->lim.per_address; c = c->next) {
        if (c->host.family == k.family && memcmp(c->host.b, k.b, sizeof k.b) == 0) n++;
    }
    const bool ok = n < g->lim.per_address;
    if (!ok) g->st.rejected_address++;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

bitnet_guard_conn *bitnet_guard_open(bitnet_guard *g, int fd, const struct sockaddr *addr, socklen_t len) {
    bitnet_guard_conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->host = key_of(addr, len);
    c->phase = BITNET_GUARD_RECEIVING;
    c->deadline_ms = now_ms() + g->lim.request_ms;
    pthread_mutex_lock(&g->mu);
    c->next = g->head;
    if (g->head) g->head->prev = c;
    g->head = c;
    g->st.accepted++;
    g->st.open++;
    pthread_mutex_unlock(&g->mu);
    return c;
}

bool bitnet_guard_phase_set(bitnet_guard *g, bitnet_guard_conn *c, bitnet_guard_phase p) {
    if (!c) return true;
    pthread_mutex_lock(&g->mu);
    const bool ok = !c->timed_out;
    if (ok) {
        if (p == BITNET_GUARD_RECEIVING) {
            if (c->phase != BITNET_GUARD_RECEIVING) c->deadline_ms = now_ms() + g->lim.request_ms;
        } else if (p == BITNET_GUARD_IDLE) {
            c->deadline_ms = now_ms() + g->lim.keepalive_ms;
        } else {
            c->deadline_ms = 0;
        }
        c->phase = p;
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

bool bitnet_guard_timed_out(bitnet_guard *g, const bitnet_guard_conn *c) {
    if (!c) return false;
    pthread_mutex_lock(&g->mu);
    const bool t = c->timed_out;
    pthread_mutex_unlock(&g->mu);
    return t;
}

void bitnet_guard_close(bitnet_guard *g, bitnet_guard_conn *c) {
    if (!c) return;
    pthread_mutex_lock(&g->mu);
    if (c->prev) c->prev->next = c->next;
    else g->head = c->next;
    if (c->next) c->next->prev = c->prev;
    g->st.open--;
    pthread_mutex_unlock(&g->mu);
    free(c);
}

void bitnet_guard_get_stats(bitnet_guard *g, bitnet_guard_stats *out) {
    pthread_mutex_lock(&g->mu);
    *out = g->st;
    pthread_mutex_unlock(&g->mu);
}

bool bitnet_guard_peer_progress(int fd, uint64_t *acked, uint32_t *pending) {
    struct tcp_info ti;
    memset(&ti, 0, sizeof ti);
    socklen_t len = sizeof ti;
    const socklen_t need = (socklen_t)(offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof ti.tcpi_bytes_acked);
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 || len < need) return false;
    int q = 0;
    if (ioctl(fd, SIOCOUTQ, &q) != 0 || q < 0) return false;
    *acked = ti.tcpi_bytes_acked;
    *pending = (uint32_t)q;
    return true;
}
