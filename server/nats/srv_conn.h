/* One client connection: protocol handling, delivery into its bounded
 * outbound buffer, flushing, pings and closing.
 */
#ifndef SRV_CONN_H
#define SRV_CONN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "srv_hmap.h"
#include "srv_outq.h"
#include "srv_parser.h"
#include "srv_server.h"
#include "srv_tls.h"

/* Per-conn counters kept in struct srv_conn (loop thread; monitoring copies
 * them into its snapshots). */
struct srv_conn_mon {
    char name[64]; /* from CONNECT; truncated */
    char lang[16];
    char version[32];
    uint64_t in_msgs, in_bytes, out_msgs, out_bytes;
    uint64_t start_ms; /* srv_now_ms() at accept */
    uint64_t last_ms;  /* uv_now of the last message in or out */
};

struct srv_conn {
    uv_tcp_t tcp;
    uv_timer_t timer; /* pings; after close starts, the flush deadline */
    uv_write_t wreq;
    struct srv_server *srv;
    uint64_t cid;
    struct srv_parser parser;
    struct srv_hmap subs; /* sid -> struct srv_sub */
    struct srv_outq out;  /* its in-flight prefix belongs to wreq */
    bool writing;
    bool dirty;
    bool closing;     /* no more input; flushing what is queued */
    bool hard_closed; /* uv_close called */
    bool linger;      /* closed after an -ERR: linger before the close */
    bool lingering;   /* FIN sent, discarding input until the peer closes */
    size_t lingered;  /* input bytes discarded while lingering */
    int handles_open;
    bool connected;
    bool verbose;
    bool pedantic;
    bool echo;
    bool headers;
    bool no_responders;
    unsigned pings_out;
    bool stall_wanted; /* a receiver of ours is backed up */
    bool stalled;      /* reading paused, on srv->stalled */
    bool backed_up;    /* pending above srv->stall_bytes; in srv->nbacked */
    struct srv_conn *stall_next;
    char peer[64];
    struct srv_conn_mon mon; /* /connz counters (loop thread) */
    /* Security: perms is NULL when the user has no permission lists. */
    const struct srv_perms *perms;
    bool auth_pending; /* a password hash is checked on the worker pool */
    char *held;        /* input that came after that CONNECT */
    size_t held_len;
    struct srv_hmap replies; /* allow_responses: reply subject -> left */
    bool tls_on;             /* ciphertext on the socket from here on */
    struct srv_tls_session tls;
    char *tls_wbuf; /* ciphertext owned by wreq while a TLS write runs */
    struct srv_conn *prev;
    struct srv_conn *next;
};

/* Accept a pending connection on the listener and send INFO. Returns 0 or
 * a KEEL_E* code (the conn is then not created). */
int srv_conn_accept(struct srv_server *srv, uv_stream_t *listener);

/* Write the queued output with uv_try_write, handing any rest to uv_write.
 * Called once per loop iteration for every dirty conn. */
void srv_conn_flush(struct srv_conn *c);

/* Close: with err_text, queue "-ERR '<err_text>'" first; with graceful,
 * flush queued output (bounded by SRV_CLOSE_FLUSH_MS_MAX) before closing.
 * Removes every sub of the conn at once. Idempotent. */
void srv_conn_close(struct srv_conn *c, const char *err_text, bool graceful);

/* Authenticate the CONNECT of c with creds. Returns 0 (c is connected),
 * KEEL_EAGAIN (a password hash is being checked off the loop thread: input
 * is held and reading paused; on success the conn continues as if CONNECT
 * just succeeded, +OK included, on failure it is closed with
 * 'Authorization Violation'), or KEEL_EAUTH (the caller closes it). */
int srv_conn_auth(struct srv_conn *c, const struct srv_auth_creds *creds);

/* Keep input that arrives while auth_pending, for after the check.
 * Returns 0 or KEEL_ELIMIT past SRV_AUTH_HELD_BYTES_MAX. */
int srv_conn_hold(struct srv_conn *c, const char *data, size_t len);

/* allow_responses: remember that c received a request with this reply
 * subject (at most SRV_AUTH_REPLIES_PER_CONN_MAX; past it the oldest
 * permissions are forgotten all at once). */
void srv_conn_note_reply(struct srv_conn *c, const char *subj, size_t len);

/* Whether c may publish to subj as a response; uses one of its replies. */
bool srv_conn_take_reply(struct srv_conn *c, const char *subj, size_t len);

/* Start reading again after a stall (no-op if closing). */
void srv_conn_resume(struct srv_conn *c);

/* Note that c drained: once no conn is backed up, stalled publishers
 * resume. Called after every flush and write completion. */
void srv_conn_check_drained(struct srv_conn *c);

/* "ip:port" of tcp's peer into buf[len] ("?:0" when unknown), for the
 * log; returns buf. Client connections and cluster links alike. */
const char *srv_conn_peer_addr(uv_tcp_t *tcp, char *buf, size_t len);

/* Bytes queued and not yet written. */
size_t srv_conn_pending_bytes(const struct srv_conn *c);

#endif
