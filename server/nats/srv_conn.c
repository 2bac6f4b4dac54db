#include "srv_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/ssl.h>

#include "keel/error.h"
#include "srv_log.h"
#include "srv_turn.h"
#include "srv_route.h"

size_t srv_conn_pending_bytes(const struct srv_conn *c)
{
    return c->out.bytes;
}

/* Drop one reference: each open handle and each auth check on the worker
 * pool holds one. The last frees the conn. */
static void conn_unref(struct srv_conn *c)
{
    ASSERT(c->handles_open > 0);
    if (--c->handles_open > 0) {
        return;
    }
    srv_server_conn_gone(c->srv, c);
    srv_parser_close(&c->parser);
    srv_hmap_close(&c->subs);
    srv_hmap_close(&c->replies);
    srv_outq_close(&c->out, &c->srv->outpool);
    srv_tls_session_close(&c->tls);
    free(c->tls_wbuf);
    free(c->held);
    free(c);
}

static void close_cb(uv_handle_t *h)
{
    conn_unref(h->data);
}

/* Closing a socket whose receive queue holds unread bytes (the rest of a
 * refused PUB's payload, still arriving) makes the kernel send RST, and a
 * client that gets the RST before it read the -ERR loses the -ERR: it sees
 * a bare reset instead of the reason. So after an -ERR the conn lingers:
 * FIN is sent, input is read and discarded until the peer closes, for at
 * most SRV_CLOSE_LINGER_MS and SRV_CLOSE_DRAIN_BYTES_MAX, then it closes. */
static void linger_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    static char sink[65536]; /* loop thread only; what lands is dropped */
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(sink, sizeof sink);
}

static void hard_close(struct srv_conn *c);
static void flush_deadline_cb(uv_timer_t *t);

static void linger_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct srv_conn *c = s->data;
    (void)buf;
    if (nread > 0) {
        c->lingered += (size_t)nread;
    }
    if (nread < 0 || c->lingered >= SRV_CLOSE_DRAIN_BYTES_MAX) {
        c->lingering = false;
        hard_close(c);
    }
}

/* 0 when the conn now lingers (hard_close runs again at its end). */
static int start_linger(struct srv_conn *c)
{
    uv_os_fd_t fd;

    c->linger = false; /* once */
    if (c->tls.established || uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0 ||
        shutdown(fd, SHUT_WR) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, linger_alloc_cb,
                      linger_read_cb) != 0) {
        return -1;
    }
    c->lingering = true;
    uv_timer_stop(&c->timer);
    uv_timer_start(&c->timer, flush_deadline_cb, SRV_CLOSE_LINGER_MS, 0);
    return 0;
}

static void hard_close(struct srv_conn *c)
{
    if (c->hard_closed || c->lingering) {
        return; /* a lingering conn closes at the linger's end */
    }
    if (c->linger && c->out.bytes == 0 && !c->writing && start_linger(c) == 0) {
        return;
    }
    c->hard_closed = true;
    srv_conn_check_drained(c);
    uv_close((uv_handle_t *)&c->tcp, close_cb);
    uv_close((uv_handle_t *)&c->timer, close_cb);
}

static void remove_all_subs(struct srv_conn *c)
{
    size_t pos = 0;
    struct srv_hmap_slot *s;

    while ((s = srv_hmap_next(&c->subs, &pos)) != NULL) {
        struct srv_sub *sub = s->value;
        int rv = srv_sublist_remove(&c->srv->sublist, sub);
        ASSERT(rv == 0);
        srv_server_bury_sub(c->srv, sub);
    }
    srv_hmap_close(&c->subs);
    srv_hmap_init(&c->subs);
}

static void flush_deadline_cb(uv_timer_t *t)
{
    struct srv_conn *c = t->data;
    c->lingering = false;
    hard_close(c);
}

void srv_conn_close(struct srv_conn *c, const char *err_text, bool graceful)
{
    if (c->closing) {
        if (!graceful) {
            c->lingering = false; /* asked to close now (a stop) */
            hard_close(c);
        }
        return;
    }
    c->closing = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    remove_all_subs(c);
    ASSERT(c->srv->stats.connections > 0);
    c->srv->stats.connections--;
    SRV_DEBUG("conn", "cid %llu %s closing%s%s", (unsigned long long)c->cid,
              c->peer, err_text ? ": " : "", err_text ? err_text : "");
    if (err_text != NULL) {
        char line[256];
        int n = snprintf(line, sizeof line, "-ERR '%s'\r\n", err_text);
        if (srv_route_append(c, line, (size_t)n) == 0) {
            graceful = true;
            c->linger = true;
        }
    }
    if (!graceful) {
        hard_close(c);
        return;
    }
    uv_timer_stop(&c->timer);
    uv_timer_start(&c->timer, flush_deadline_cb, SRV_CLOSE_FLUSH_MS_MAX, 0);
    srv_conn_flush(c);
}

static void write_cb(uv_write_t *req, int status)
{
    struct srv_conn *c = req->data;

    c->writing = false;
    if (c->tls_wbuf != NULL) {
        free(c->tls_wbuf);
        c->tls_wbuf = NULL;
    } else {
        srv_outq_end_flight(&c->out, &c->srv->outpool);
    }
    if (c->hard_closed) {
        return;
    }
    if (status < 0) {
        SRV_DEBUG("conn", "cid %llu write failed: %s",
                  (unsigned long long)c->cid, uv_strerror(status));
        srv_conn_close(c, NULL, false);
        hard_close(c);
        return;
    }
    srv_conn_flush(c);
    srv_conn_check_drained(c);
}

void srv_conn_check_drained(struct srv_conn *c)
{
    struct srv_server *srv = c->srv;

    /* Hysteresis: resume at half the stall mark, so a publisher runs for
     * a while before its receivers back up again. */
    if (!c->backed_up ||
        (!c->hard_closed && srv_conn_pending_bytes(c) > srv->stall_bytes / 2)) {
        return;
    }
    c->backed_up = false;
    ASSERT(srv->nbacked > 0);
    if (--srv->nbacked == 0 && srv->stalled != NULL) {
        srv_server_resume_stalled(srv);
    }
}

static void write_failed(struct srv_conn *c)
{
    srv_conn_close(c, NULL, false);
    hard_close(c);
}

/* TLS: encrypt the queued plain text (up to SRV_OUT_IOV_MAX blocks) and
 * write the ciphertext with handshake records in one uv_write. Encrypting
 * only when no write runs keeps unsent bytes in the queue, where
 * max_pending and the stall marks see them. */
static void tls_flush(struct srv_conn *c)
{
    uv_buf_t iov[SRV_OUT_IOV_MAX];
    size_t total = 0;

    if (c->tls.established && c->out.bytes > 0) {
        unsigned cnt = srv_outq_iov(&c->out, iov, SRV_OUT_IOV_MAX, &total);
        for (unsigned i = 0; i < cnt; i++) {
            if (srv_tls_write(&c->tls, iov[i].base, iov[i].len) != 0) {
                write_failed(c);
                return;
            }
        }
        srv_outq_consume(&c->out, &c->srv->outpool, total);
    }
    size_t n = srv_tls_pending_out(&c->tls);
    if (n == 0) {
        if (c->closing && c->out.bytes == 0) {
            hard_close(c);
        }
        return;
    }
    c->tls_wbuf = malloc(n);
    if (c->tls_wbuf == NULL) {
        write_failed(c);
        return;
    }
    size_t got = srv_tls_take_out(&c->tls, c->tls_wbuf, n);
    ASSERT(got == n);
    uv_buf_t b = uv_buf_init(c->tls_wbuf, (unsigned)got);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, write_cb) != 0) {
        free(c->tls_wbuf);
        c->tls_wbuf = NULL;
        write_failed(c);
        return;
    }
    c->writing = true;
}

void srv_conn_flush(struct srv_conn *c)
{
    uv_buf_t iov[SRV_OUT_IOV_MAX];
    size_t total = 0;
    unsigned cnt;
    int n;

    if (c->hard_closed || c->writing) {
        return;
    }
    if (c->tls_on) {
        tls_flush(c);
        return;
    }
    if (c->out.bytes == 0) {
        if (c->closing) {
            hard_close(c);
        }
        return;
    }
    cnt = srv_outq_iov(&c->out, iov, SRV_OUT_IOV_MAX, &total);
    n = uv_try_write((uv_stream_t *)&c->tcp, iov, cnt);
    if (n == UV_EAGAIN) {
        n = 0;
    } else if (n < 0) {
        srv_conn_close(c, NULL, false);
        hard_close(c);
        return;
    }
    srv_outq_consume(&c->out, &c->srv->outpool, (size_t)n);
    if (c->out.bytes == 0) {
        if (c->closing) {
            hard_close(c);
        }
        return;
    }
    /* The kernel is full: uv_write owns the next blocks until write_cb
     * (it copies the iovec array, not the bytes), while new output keeps
     * going to the tail. */
    cnt = srv_outq_iov(&c->out, iov, SRV_OUT_IOV_MAX, &total);
    ASSERT(cnt > 0 && total > 0);
    srv_outq_start_flight(&c->out, total);
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, iov, cnt, write_cb) != 0) {
        srv_outq_end_flight(&c->out, &c->srv->outpool);
        srv_conn_close(c, NULL, false);
        hard_close(c);
        return;
    }
    c->writing = true;
}

static void ping_cb(uv_timer_t *t)
{
    struct srv_conn *c = t->data;

    if (c->closing) {
        return;
    }
    if (c->pings_out >= c->srv->cfg->ping_max) {
        SRV_INFO("conn", "cid %llu %s: stale connection, closing",
                 (unsigned long long)c->cid, c->peer);
        srv_conn_close(c, "Stale Connection", true);
        return;
    }
    c->pings_out++;
    if (srv_route_append(c, "PING\r\n", 6) == 0) {
        srv_conn_flush(c);
    }
}

static void auth_timeout_cb(uv_timer_t *t)
{
    struct srv_conn *c = t->data;

    if (c->closing || c->connected) {
        return;
    }
    SRV_DEBUG("conn", "cid %llu %s: no CONNECT in time",
              (unsigned long long)c->cid, c->peer);
    srv_conn_close(c, "Authentication Timeout", true);
}

/* CONNECT accepted: pings replace the connect deadline. */
static void conn_connected(struct srv_conn *c)
{
    c->connected = true;
    uv_timer_stop(&c->timer);
    uv_timer_start(&c->timer, ping_cb, c->srv->cfg->ping_interval_ms,
                   c->srv->cfg->ping_interval_ms);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct srv_conn *c = h->data;
    (void)suggested;
    /* One loop thread reads one conn at a time and the parser consumes
     * each read before returning, so all conns share one big buffer. */
    *buf = uv_buf_init(c->srv->read_buf, sizeof c->srv->read_buf);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

void srv_conn_resume(struct srv_conn *c)
{
    if (!c->closing) {
        uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    }
}

static void tls_failed(struct srv_conn *c, const char *errmsg)
{
    SRV_DEBUG("tls", "cid %llu %s: %s", (unsigned long long)c->cid, c->peer,
              errmsg);
    /* Graceful: the TLS alert OpenSSL queued tells the client why. */
    srv_conn_close(c, NULL, true);
}

static int send_info(struct srv_conn *c);

/* Handshake done: the conn proceeds as a plain one would after INFO
 * (handshake_first: INFO goes now, encrypted). */
static void tls_established(struct srv_conn *c)
{
    if (c->srv->cfg->tls_handshake_first && send_info(c) != 0) {
        srv_conn_close(c, NULL, false);
        return;
    }
    SRV_DEBUG("tls", "cid %llu %s: TLS established (%s)",
              (unsigned long long)c->cid, c->peer, SSL_get_version(c->tls.ssl));
}

/* Ciphertext from the socket: handshake, then plain text to the protocol
 * in SRV_TLS_CHUNK_BYTES pieces (bounded: one read of ciphertext yields
 * at most as much plain text). */
static void tls_input(struct srv_conn *c, const char *data, size_t len)
{
    char errmsg[KEEL_ERRMSG_MAX] = "";
    char *plain = c->srv->tls_plain;
    size_t rounds = 0;

    if (!c->tls.seen_bytes) {
        c->tls.seen_bytes = true;
        if (!srv_tls_looks_like_tls(data, len)) {
            /* A plain-text client: tell it in plain text. */
            c->tls_on = false;
            srv_conn_close(c, "Secure Connection - TLS Required", true);
            return;
        }
    }
    if (srv_tls_feed(&c->tls, data, len, errmsg) != 0) {
        tls_failed(c, errmsg);
        return;
    }
    if (!c->tls.established) {
        if (srv_tls_handshake(&c->tls, errmsg) != 0) {
            tls_failed(c, errmsg);
            return;
        }
        if (c->tls.established) {
            tls_established(c);
        }
    }
    while (c->tls.established && !c->closing &&
           rounds++ < SRV_READ_BYTES / 64 + 2) {
        size_t n = 0;
        int rv = srv_tls_read(&c->tls, plain, SRV_TLS_CHUNK_BYTES, &n, errmsg);
        if (rv != 0) {
            tls_failed(c, rv == KEEL_ESHUTDOWN ? "peer closed TLS" : errmsg);
            return;
        }
        if (n == 0) {
            break;
        }
        srv_route_input(c, plain, n);
    }
    srv_conn_flush(c); /* handshake records, if any */
}

static void conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct srv_conn *c = s->data;

    if (nread == 0 || c->closing) {
        return;
    }
    if (nread < 0) {
        if (nread != UV_EOF) {
            SRV_DEBUG("conn", "cid %llu read: %s", (unsigned long long)c->cid,
                      uv_strerror((int)nread));
        }
        srv_conn_close(c, NULL, false);
        return;
    }
    if (c->tls_on) {
        tls_input(c, buf->base, (size_t)nread);
    } else {
        srv_route_input(c, buf->base, (size_t)nread);
    }
    if (c->stall_wanted && !c->closing && !c->stalled) {
        srv_server_stall(c->srv, c);
    }
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_CLIENT_READ);
    conn_read(s, nread, buf);
    srv_turn_leave(ph);
}

static int send_info(struct srv_conn *c)
{
    struct srv_server *srv = c->srv;
    char line[SRV_INFO_LINE_BYTES_MAX];

    /* srv_server_init refused an INFO too long for this line. */
    ASSERT(srv->info_json_len + 64 < sizeof line);
    memcpy(line, "INFO ", 5);
    memcpy(line + 5, srv->info_json, srv->info_json_len);
    size_t n = 5 + srv->info_json_len;
    n += (size_t)snprintf(line + n, sizeof line - n, ",\"client_id\":%llu}\r\n",
                          (unsigned long long)c->cid);
    return srv_route_append(c, line, n);
}

const char *srv_conn_peer_addr(uv_tcp_t *tcp, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int n = sizeof ss;
    char ip[64] = "?";
    int port = 0;

    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &n) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            (void)uv_ip4_name(a, ip, sizeof ip);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            (void)uv_ip6_name(a, ip, sizeof ip);
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(buf, len, "%s:%d", ip, port);
    return buf;
}

/* After accept: INFO in plain text, then TLS if configured (the NATS
 * flow); or with handshake_first, TLS at once and INFO inside it. */
static int conn_start(struct srv_conn *c)
{
    struct srv_server *srv = c->srv;
    bool tls_first = srv->tls != NULL && srv->cfg->tls_handshake_first;

    if (!tls_first) {
        if (send_info(c) != 0) {
            srv_conn_close(c, NULL, false);
            return KEEL_ENOMEM;
        }
        srv_conn_flush(c);
        if (c->closing) {
            return 0; /* the INFO write failed; the conn is going away */
        }
    }
    if (srv->stats.connections > srv->cfg->max_connections) {
        SRV_WARN("conn", "%s refused: max_connections (%llu) reached", c->peer,
                 (unsigned long long)srv->cfg->max_connections);
        srv_conn_close(c, "maximum connections exceeded", true);
        return 0;
    }
    if (srv->tls != NULL) {
        if (c->out.bytes > 0 || c->writing) {
            /* INFO must be on the wire before TLS records follow it. */
            srv_conn_close(c, NULL, false);
            return KEEL_EIO;
        }
        if (srv_tls_session_init(&c->tls, srv->tls) != 0) {
            srv_conn_close(c, NULL, false);
            return KEEL_ENOMEM;
        }
        c->tls_on = true;
    }
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    uint64_t ms = srv->auth_timeout_ms;
    if (srv->tls != NULL) {
        ms += srv->cfg->tls_timeout_ms;
    }
    uv_timer_start(&c->timer, auth_timeout_cb, ms, 0);
    return 0;
}

static void reject_cb(uv_handle_t *h)
{
    free(h);
}

int srv_conn_accept(struct srv_server *srv, uv_stream_t *listener)
{
    struct srv_conn *c = calloc(1, sizeof *c);

    if (c == NULL) {
        return KEEL_ENOMEM;
    }
    uv_tcp_init(srv->loop, &c->tcp);
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 ||
        srv->nconns >= SRV_CONNS_MAX || srv->stopping) {
        uv_close((uv_handle_t *)&c->tcp, reject_cb);
        return KEEL_ELIMIT;
    }
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c;
    c->timer.data = c;
    c->handles_open = 2;
    c->srv = srv;
    c->cid = ++srv->next_cid;
    c->mon.start_ms = srv_now_ms();
    c->echo = true;
    srv_parser_init(&c->parser, (size_t)srv->cfg->max_payload);
    srv_hmap_init(&c->subs);
    srv_hmap_init(&c->replies);
    c->next = srv->conns;
    if (srv->conns != NULL) {
        srv->conns->prev = c;
    }
    srv->conns = c;
    srv->nconns++;
    srv->stats.connections++;
    srv->stats.total_connections++;
    uv_tcp_nodelay(&c->tcp, 1);
    (void)srv_conn_peer_addr(&c->tcp, c->peer, sizeof c->peer);
    SRV_DEBUG("conn", "cid %llu accepted from %s", (unsigned long long)c->cid,
              c->peer);
    return conn_start(c);
}

/* ---- authentication off the loop thread ---- */

struct auth_work {
    uv_work_t req;
    struct srv_conn *c;
    char *user; /* copies: the CONNECT line is gone when the work runs */
    char *pass;
    char *token;
    const struct srv_user *user_out;
    int rv;
};

static void auth_work_free(struct auth_work *w)
{
    free(w->user);
    free(w->pass);
    free(w->token);
    free(w);
}

/* Worker thread: reads only the immutable srv->auth. */
static void auth_work_cb(uv_work_t *req)
{
    struct auth_work *w = req->data;
    struct srv_auth_creds creds = {w->user, w->pass, w->token};

    w->rv = srv_auth_check(&w->c->srv->auth, &creds, &w->user_out);
}

static void auth_granted(struct srv_conn *c, const struct srv_user *u)
{
    c->perms = u != NULL && u->has_perms ? &u->perms : NULL;
    conn_connected(c);
    SRV_DEBUG("auth", "cid %llu %s: authenticated%s%s",
              (unsigned long long)c->cid, c->peer, u != NULL ? " as " : "",
              u != NULL ? u->name : "");
}

static void auth_after_cb(uv_work_t *req, int status)
{
    struct auth_work *w = req->data;
    struct srv_conn *c = w->c;

    ASSERT(c->srv->auth_inflight > 0);
    c->srv->auth_inflight--;
    c->auth_pending = false;
    if (!c->closing) {
        if (status != 0 || w->rv != 0) {
            SRV_INFO("auth", "cid %llu %s: authorization failed%s%s",
                     (unsigned long long)c->cid, c->peer,
                     w->user != NULL ? " for user " : "",
                     w->user != NULL ? w->user : "");
            srv_conn_close(c, "Authorization Violation", true);
        } else {
            auth_granted(c, w->user_out);
            if (c->verbose && srv_route_append(c, "+OK\r\n", 5) != 0) {
                srv_conn_close(c, NULL, false);
            }
            char *held = c->held;
            size_t n = c->held_len;
            c->held = NULL;
            c->held_len = 0;
            if (n > 0 && !c->closing) {
                srv_route_input(c, held, n);
            }
            free(held);
            if (c->stall_wanted && !c->closing && !c->stalled) {
                /* The held input published to backed-up receivers: stay
                 * paused as read_cb would have. */
                srv_server_stall(c->srv, c);
            } else {
                srv_conn_resume(c);
            }
        }
    }
    auth_work_free(w);
    conn_unref(c);
}

static char *dup_opt(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

int srv_conn_auth(struct srv_conn *c, const struct srv_auth_creds *creds)
{
    struct srv_server *srv = c->srv;
    const struct srv_user *u = NULL;

    if (!srv_auth_check_is_slow(&srv->auth, creds)) {
        if (srv_auth_check(&srv->auth, creds, &u) != 0) {
            return KEEL_EAUTH;
        }
        auth_granted(c, u);
        return 0;
    }
    if (srv->auth_inflight >= SRV_AUTH_VERIFY_INFLIGHT_MAX) {
        SRV_WARN("auth",
                 "cid %llu %s: %d password checks already running, "
                 "refusing",
                 (unsigned long long)c->cid, c->peer,
                 SRV_AUTH_VERIFY_INFLIGHT_MAX);
        return KEEL_EAUTH;
    }
    struct auth_work *w = calloc(1, sizeof *w);
    if (w == NULL) {
        return KEEL_EAUTH;
    }
    w->c = c;
    w->req.data = w;
    w->user = dup_opt(creds->user);
    w->pass = dup_opt(creds->pass);
    w->token = dup_opt(creds->token);
    if ((creds->user != NULL && w->user == NULL) ||
        (creds->pass != NULL && w->pass == NULL) ||
        (creds->token != NULL && w->token == NULL) ||
        uv_queue_work(srv->loop, &w->req, auth_work_cb, auth_after_cb) != 0) {
        auth_work_free(w);
        return KEEL_EAUTH;
    }
    srv->auth_inflight++;
    c->handles_open++; /* the work holds the conn until auth_after_cb */
    c->auth_pending = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    return KEEL_EAGAIN;
}

int srv_conn_hold(struct srv_conn *c, const char *data, size_t len)
{
    if (c->held_len + len > SRV_AUTH_HELD_BYTES_MAX) {
        return KEEL_ELIMIT;
    }
    char *n = realloc(c->held, c->held_len + len);
    if (n == NULL) {
        return KEEL_ENOMEM;
    }
    memcpy(n + c->held_len, data, len);
    c->held = n;
    c->held_len += len;
    return 0;
}

/* ---- allow_responses ---- */

void srv_conn_note_reply(struct srv_conn *c, const char *subj, size_t len)
{
    ASSERT(c->perms != NULL && c->perms->responses_max > 0);
    if (c->replies.count >= SRV_AUTH_REPLIES_PER_CONN_MAX) {
        /* Requests never answered: forget them rather than grow. */
        srv_hmap_close(&c->replies);
        srv_hmap_init(&c->replies);
    }
    uintptr_t left = c->perms->responses_max;
    if (srv_hmap_put(&c->replies, subj, len, (void *)left) != 0) {
        /* Out of memory: the reply will be refused as a violation. */
        SRV_DEBUG("auth", "cid %llu: reply permission not recorded",
                  (unsigned long long)c->cid);
    }
}

bool srv_conn_take_reply(struct srv_conn *c, const char *subj, size_t len)
{
    if (c->perms == NULL || c->perms->responses_max == 0) {
        return false;
    }
    uintptr_t left = (uintptr_t)srv_hmap_get(&c->replies, subj, len);
    if (left == 0) {
        return false;
    }
    /* Replacing an existing key's value needs no memory; if it ever
     * failed, dropping the entry errs on the side of refusing. */
    if (left == 1 ||
        srv_hmap_put(&c->replies, subj, len, (void *)(left - 1)) != 0) {
        (void)srv_hmap_del(&c->replies, subj, len);
    }
    return true;
}
