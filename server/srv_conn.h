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

/* Start reading again after a stall (no-op if closing). */
void srv_conn_resume(struct srv_conn *c);

/* Note that c drained: once no conn is backed up, stalled publishers
 * resume. Called after every flush and write completion. */
void srv_conn_check_drained(struct srv_conn *c);

/* Bytes queued and not yet written. */
size_t srv_conn_pending_bytes(const struct srv_conn *c);

#endif
