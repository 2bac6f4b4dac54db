#include "srv_conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_log.h"
#include "srv_route.h"

size_t srv_conn_pending_bytes(const struct srv_conn *c)
{
    return c->out.bytes;
}

static void close_cb(uv_handle_t *h)
{
    struct srv_conn *c = h->data;

    ASSERT(c->handles_open > 0);
    if (--c->handles_open > 0) {
        return;
    }
    srv_server_conn_gone(c->srv, c);
    srv_parser_close(&c->parser);
    srv_hmap_close(&c->subs);
    srv_outq_close(&c->out, &c->srv->outpool);
    free(c);
}

static void hard_close(struct srv_conn *c)
{
    if (c->hard_closed) {
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
    hard_close(c);
}

void srv_conn_close(struct srv_conn *c, const char *err_text, bool graceful)
{
    if (c->closing) {
        if (!graceful) {
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
    srv_outq_end_flight(&c->out, &c->srv->outpool);
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

void srv_conn_flush(struct srv_conn *c)
{
    uv_buf_t iov[SRV_OUT_IOV_MAX];
    size_t total = 0;
    unsigned cnt;
    int n;

    if (c->hard_closed || c->writing) {
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

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
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
    srv_route_input(c, buf->base, (size_t)nread);
    if (c->stall_wanted && !c->closing && !c->stalled) {
        srv_server_stall(c->srv, c);
    }
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

static void peer_name(struct srv_conn *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char ip[48] = "?";
    int port = 0;

    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof ip);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof ip);
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(c->peer, sizeof c->peer, "%s:%d", ip, port);
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
    c->echo = true;
    srv_parser_init(&c->parser, (size_t)srv->cfg->max_payload);
    srv_hmap_init(&c->subs);
    c->next = srv->conns;
    if (srv->conns != NULL) {
        srv->conns->prev = c;
    }
    srv->conns = c;
    srv->nconns++;
    srv->stats.connections++;
    srv->stats.total_connections++;
    uv_tcp_nodelay(&c->tcp, 1);
    peer_name(c);
    SRV_DEBUG("conn", "cid %llu accepted from %s", (unsigned long long)c->cid,
              c->peer);
    if (send_info(c) != 0) {
        srv_conn_close(c, NULL, false);
        return KEEL_ENOMEM;
    }
    srv_conn_flush(c);
    if (c->closing) {
        return 0; /* the INFO write failed; the conn is going away */
    }
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    uv_timer_start(&c->timer, ping_cb, srv->cfg->ping_interval_ms,
                   srv->cfg->ping_interval_ms);
    return 0;
}
