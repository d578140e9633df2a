/* guard.h — llama-server's connection guard: the per-address connection limit and the deadlines that a
 * client cannot stretch by sending slowly (slowloris), enforced by a watchdog thread.
 *
 * A connection goes through these phases (bitnet_guard_* calls made by the HTTP side):
 *   RECEIVING   from accept, or from the request line of a later request on a kept-alive connection, until
 *               the whole request (line, headers, body) has arrived: at most request_ms in all, however
 *               the bytes trickle in. Past it, the watchdog writes "408 Request Timeout" (a JSON error,
 *               Connection: close) and shuts the socket down.
 *   BUSY        the request is handled and answered: no deadline here (a generation takes as long as its
 *               max_tokens; a client that stops reading the answer is the HTTP server's write timeout).
 *   IDLE        after an answer, waiting for the next request of a kept-alive connection: at most
 *               keepalive_ms, then the socket is shut down (no answer: none is owed).
 * The watchdog shuts a socket down (shutdown(2), SHUT_RDWR) and lets the HTTP server close it; it never
 * closes a descriptor itself, and a connection leaves the guard (bitnet_guard_close) before its socket is
 * closed, under the same lock, so a descriptor number reused by a later connection is never touched.
 * bitnet_guard_admit is the accept-time check of the per-address limit: it does not block.
 * All functions are thread-safe. */
#ifndef BITNET_SERVER_GUARD_H
#define BITNET_SERVER_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bitnet_guard_limits {
    int64_t request_ms;   /* a whole request must arrive within this (> 0) */
    int64_t keepalive_ms; /* an idle kept-alive connection is closed after this (> 0) */
    unsigned per_address; /* connections open at once from one client address (> 0) */
    int tick_ms;          /* how often the watchdog looks (> 0; deadlines are met within one tick) */
} bitnet_guard_limits;

/* Counters since the start, and connections open now. */
typedef struct bitnet_guard_stats {
    uint64_t accepted;           /* connections admitted */
    uint64_t rejected_address;   /* connections refused at accept: their address had per_address open */
    uint64_t timeout_request;    /* closed in RECEIVING at request_ms (answered 408) */
    uint64_t timeout_keepalive;  /* closed in IDLE at keepalive_ms */
    uint32_t open;               /* connections in the guard now */
} bitnet_guard_stats;

typedef enum bitnet_guard_phase {
    BITNET_GUARD_RECEIVING = 0,
    BITNET_GUARD_BUSY = 1,
    BITNET_GUARD_IDLE = 2,
} bitnet_guard_phase;

typedef struct bitnet_guard bitnet_guard;
typedef struct bitnet_guard_conn bitnet_guard_conn;

/* Starts the watchdog thread. Returns NULL when out of memory or the thread cannot start, or when a limit
 * is out of range. Free with bitnet_guard_free. */
bitnet_guard *bitnet_guard_create(const bitnet_guard_limits *lim);

/* Stops the watchdog and frees the guard and any connection still in it (their sockets are not touched).
 * NULL is fine. */
void bitnet_guard_free(bitnet_guard *g);

/* Whether a connection from addr may be accepted now: fewer than per_address connections from the same
 * address (IPv4 or IPv6 host address; the port does not count; other families always pass) are in the
 * guard. A refusal is counted in rejected_address. */
bool bitnet_guard_admit(bitnet_guard *g, const struct sockaddr *addr, socklen_t len);

/* Adds an accepted connection with socket fd, in RECEIVING with its deadline from now. Returns NULL when
 * out of memory (the caller should then close the connection). */
bitnet_guard_conn *bitnet_guard_open(bitnet_guard *g, int fd, const struct sockaddr *addr, socklen_t len);

/* Moves c to phase p. RECEIVING from IDLE starts a new request deadline; RECEIVING from RECEIVING keeps the
 * running one. Returns false when the watchdog has already timed the connection out: the caller must then
 * not answer (the 408 has been written) but close. c may be NULL (returns true). */
bool bitnet_guard_phase_set(bitnet_guard *g, bitnet_guard_conn *c, bitnet_guard_phase p);

/* Whether the watchdog has timed c out (false for NULL). */
bool bitnet_guard_timed_out(bitnet_guard *g, const bitnet_guard_conn *c);

/* Removes c (before its socket is closed) and frees it. NULL is fine. */
void bitnet_guard_close(bitnet_guard *g, bitnet_guard_conn *c);

void bitnet_guard_get_stats(bitnet_guard *g, bitnet_guard_stats *out);

/* How far the peer of TCP socket fd has taken what was written: *acked = bytes it has acknowledged since the
 * connection opened (TCP_INFO tcpi_bytes_acked, RFC 4898 HCThruOctetsAcked), *pending = bytes written and not
 * yet acknowledged (SIOCOUTQ). A peer whose application stops reading closes its receive window, so *acked
 * stops growing while *pending stays above 0. Returns false when fd is not a TCP socket or the kernel does
 * not say (Linux only). */
bool bitnet_guard_peer_progress(int fd, uint64_t *acked, uint32_t *pending);

#ifdef __cplusplus
}
#endif

#endif
