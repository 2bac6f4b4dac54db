#include "srv_route.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/bytes.h"
#include "keel/error.h"
#include "srv_conn.h"
#include "srv_log.h"

static void mark_dirty(struct srv_conn *c)
{
    if (!c->dirty) {
        c->dirty = true;
        srv_server_mark_dirty(c->srv, c);
    }
}

int srv_route_append(struct srv_conn *c, const char *data, size_t len)
{
    int rv = srv_outq_append(&c->out, &c->srv->outpool, data, len);

    if (srv_log_enabled(SRV_LOG_TRACE)) {
        /* Protocol replies only; MSG/HMSG are written by deliver(). */
        int n = len >= 2 ? (int)len - 2 : (int)len;
        srv_log(SRV_LOG_TRACE, "proto", "cid %llu ->> [%.*s]",
                (unsigned long long)c->cid, n, data);
    }
    if (rv != 0) {
        return rv;
    }
    mark_dirty(c);
    return 0;
}

static void send_ok(struct srv_conn *c)
{
    if (c->verbose && srv_route_append(c, "+OK\r\n", 5) != 0) {
        srv_conn_close(c, NULL, false);
    }
}

/* -ERR that keeps the conn open (docs/protocol.md §1.9). */
static void send_err(struct srv_conn *c, const char *text)
{
    char line[SRV_CONTROL_LINE_BYTES_MAX + 128];
    int n = snprintf(line, sizeof line, "-ERR '%s'\r\n", text);
    if (srv_route_append(c, line, (size_t)n) != 0) {
        srv_conn_close(c, NULL, false);
    }
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

static bool skip_for(struct srv_sub *sub, void *ud)
{
    struct srv_conn *pub = ud;
    if (sub->conn == NULL) {
        return sub->fn == NULL; /* internal: never skipped (srv_isub.c) */
    }
    return sub->conn->closing || (sub->conn == pub && !pub->echo);
}

static void unsub_now(struct srv_conn *c, struct srv_sub *sub)
{
    int rv = srv_sublist_remove(&c->srv->sublist, sub);
    ASSERT(rv == 0);
    void *v = srv_hmap_del(&c->subs, sub->sid, sub->sid_len);
    ASSERT(v == sub);
    srv_server_bury_sub(c->srv, sub);
}

static void slow_consumer(struct srv_conn *d)
{
    d->srv->stats.slow_consumers++;
    SRV_WARN("conn", "cid %llu %s: slow consumer (%zu bytes pending), closing",
             (unsigned long long)d->cid, d->peer, srv_conn_pending_bytes(d));
    /* Only whole messages lie past the in-flight prefix, so dropping them
     * keeps the stream well-formed before the -ERR. */
    srv_outq_drop_unsent(&d->out, &d->srv->outpool);
    srv_conn_close(d, "Slow Consumer", true);
}

/* Write the MSG/HMSG control line (with its CRLF) at p; returns the end.
 * The caller sized p for it (msg_line_max). */
static char *msg_line(char *p, bool hmsg, const struct srv_cmd *cmd,
                      const struct srv_sub *sub, size_t total)
{
    p = hmsg ? put(p, "HMSG ", 5) : put(p, "MSG ", 4);
    p = put(p, cmd->subject.ptr, cmd->subject.len);
    *p++ = ' ';
    p = put(p, sub->sid, sub->sid_len);
    *p++ = ' ';
    if (cmd->reply.len > 0) {
        p = put(p, cmd->reply.ptr, cmd->reply.len);
        *p++ = ' ';
    }
    if (hmsg) {
        p = keel_put_dec(p, cmd->hdr_bytes);
        *p++ = ' ';
    }
    p = keel_put_dec(p, total);
    return put(p, "\r\n", 2);
}

static size_t msg_line_max(const struct srv_cmd *cmd, const struct srv_sub *sub)
{
    return 5 + cmd->subject.len + 1 + sub->sid_len + 1 + cmd->reply.len + 1 +
           2 * 21 + 2;
}

/* Queue one message: in place when it fits one output block (the common
 * case), else as line, payload and CRLF spanning blocks. */
static int queue_msg(struct srv_conn *d, bool hmsg, const struct srv_cmd *cmd,
                     const struct srv_sub *sub, const char *payload,
                     size_t total)
{
    size_t line_max = msg_line_max(cmd, sub);
    struct srv_outpool *pool = &d->srv->outpool;
    char line[2 * SRV_CONTROL_LINE_BYTES_MAX + 64];
    char *p, *end;
    int rv;

    if (line_max + total + 2 <= SRV_OUT_BLOCK_BYTES) {
        p = srv_outq_reserve(&d->out, pool, line_max + total + 2);
        if (p == NULL) {
            return KEEL_ENOMEM;
        }
        end = msg_line(p, hmsg, cmd, sub, total);
        end = put(end, payload, total);
        end = put(end, "\r\n", 2);
        srv_outq_commit(&d->out, (size_t)(end - p));
        return 0;
    }
    /* The parser bounds subject and reply by the control line, and the
     * sid came in on a SUB control line. */
    ASSERT(line_max <= sizeof line);
    end = msg_line(line, hmsg, cmd, sub, total);
    rv = srv_outq_append(&d->out, pool, line, (size_t)(end - line));
    if (rv == 0) {
        rv = srv_outq_append(&d->out, pool, payload, total);
    }
    if (rv == 0) {
        rv = srv_outq_append(&d->out, pool, "\r\n", 2);
    }
    return rv;
}

/* Queue one MSG/HMSG for sub. Headers go only to conns that announced
 * header support; others get MSG with the header block stripped. */
static bool deliver(struct srv_conn *pub, struct srv_sub *sub,
                    const struct srv_cmd *cmd)
{
    struct srv_conn *d = sub->conn;
    if (d == NULL) { /* internal: its handler copies what it keeps */
        ASSERT(sub->fn != NULL);
        sub->delivered++;
        sub->fn(sub->fn_arg, cmd);
        return true;
    }
    bool hpub = cmd->op == SRV_OP_HPUB;
    bool hmsg = hpub && d->headers;
    const char *payload = cmd->payload;
    size_t total = cmd->total_bytes;

    if (d->perms != NULL &&
        !srv_auth_can_deliver(d->perms, cmd->subject.ptr, cmd->subject.len)) {
        return false; /* a wildcard sub overlapping the receiver's deny */
    }
    if (d->perms != NULL && d->perms->responses_max > 0 && cmd->reply.len > 0) {
        srv_conn_note_reply(d, cmd->reply.ptr, cmd->reply.len);
    }
    if (hpub && !d->headers) {
        payload += cmd->hdr_bytes;
        total -= cmd->hdr_bytes;
    }
    size_t need = msg_line_max(cmd, sub) + total + 2;
    if (srv_conn_pending_bytes(d) + need > d->srv->cfg->max_pending) {
        slow_consumer(d);
        return false;
    }
    if (queue_msg(d, hmsg, cmd, sub, payload, total) != 0) {
        srv_conn_close(d, NULL, false);
        return false;
    }
    d->srv->stats.out_msgs++;
    d->srv->stats.out_bytes += total;
    d->mon.out_msgs++;
    d->mon.out_bytes += total;
    d->mon.last_ms = uv_now(d->srv->loop);
    mark_dirty(d);
    if (d->out.bytes >= SRV_CONN_FLUSH_BYTES && !d->writing) {
        srv_conn_flush(d);
    }
    if (!d->backed_up && srv_conn_pending_bytes(d) > d->srv->stall_bytes) {
        d->backed_up = true;
        d->srv->nbacked++;
    }
    if (d->backed_up && pub != NULL && d != pub) {
        pub->stall_wanted = true;
    }
    if (++sub->delivered >= sub->max && sub->max > 0) {
        unsub_now(d, sub);
    }
    return true;
}

/* docs/protocol.md §1.8: a request that reached nobody gets a 503 status on
 * the requester's own sub matching the reply subject. */
static void no_responders(struct srv_conn *c, const struct srv_cmd *cmd)
{
    static const char status[] = "NATS/1.0 503\r\n\r\n";
    struct srv_sublist_result *r;
    struct srv_sub *mine = NULL;

    if (srv_sublist_match(&c->srv->sublist, cmd->reply.ptr, cmd->reply.len,
                          &r) != 0) {
        return;
    }
    for (size_t i = 0; i < r->npsubs && mine == NULL; i++) {
        if (r->psubs[i]->conn == c && !r->psubs[i]->removed) {
            mine = r->psubs[i];
        }
    }
    if (mine != NULL) {
        struct srv_cmd st = *cmd;
        st.op = SRV_OP_HPUB;
        st.subject = cmd->reply;
        st.reply.len = 0;
        st.hdr_bytes = sizeof status - 1;
        st.total_bytes = sizeof status - 1;
        st.payload = status;
        (void)deliver(c, mine, &st);
    }
    srv_sublist_result_release(r);
}

/* Permissions and the header limit of a PUB/HPUB: 0 to deliver, else an
 * -ERR was sent (the conn stays open) and nothing is delivered. */
static int check_pub(struct srv_conn *c, const struct srv_cmd *cmd)
{
    char text[SRV_CONTROL_LINE_BYTES_MAX + 64];

    if (cmd->hdr_bytes > c->srv->cfg->max_header_bytes) {
        send_err(c, "Maximum Header Size Exceeded");
        return KEEL_ELIMIT;
    }
    if (!srv_auth_can_publish(c->perms, cmd->subject.ptr, cmd->subject.len) &&
        !srv_conn_take_reply(c, cmd->subject.ptr, cmd->subject.len)) {
        snprintf(text, sizeof text,
                 "Permissions Violation for Publish to \"%.*s\"",
                 (int)cmd->subject.len, cmd->subject.ptr);
        SRV_DEBUG("auth", "cid %llu %s: %s", (unsigned long long)c->cid,
                  c->peer, text);
        send_err(c, text);
        return KEEL_EPERM;
    }
    return 0;
}

/* Is queue group g one of queues[0..n)? */
static bool queue_named(const struct srv_slice *queues, size_t n,
                        const struct srv_sublist_qgroup *g)
{
    for (size_t k = 0; k < n; k++) {
        if (queues[k].len == g->name_len &&
            memcmp(queues[k].ptr, g->name, g->name_len) == 0) {
            return true;
        }
    }
    return false;
}

/* A PUB/HPUB of subject, reply (may be NULL), headers and data made from
 * inside: deliver() takes headers and payload as one block, so with
 * headers *buf holds a copy of both (the caller frees it). */
static int make_cmd(struct srv_cmd *cmd, char **buf, const char *subject,
                    size_t len, const char *reply, const void *hdr, size_t hlen,
                    const void *data, size_t dlen)
{
    *cmd = (struct srv_cmd){
        .op = hlen > 0 ? SRV_OP_HPUB : SRV_OP_PUB,
        .subject = {subject, len},
        .reply = {reply, reply != NULL ? strlen(reply) : 0},
        .hdr_bytes = hlen,
        .total_bytes = hlen + dlen,
        .payload = data,
    };
    *buf = NULL;
    if (hlen > 0) {
        *buf = malloc(hlen + dlen + 1);
        if (*buf == NULL) {
            return KEEL_ENOMEM;
        }
        memcpy(*buf, hdr, hlen);
        if (dlen > 0) {
            memcpy(*buf + hlen, data, dlen);
        }
        cmd->payload = *buf;
    }
    return 0;
}

/* queues NULL: every queue group matching route is served. */
static int deliver_internal(struct srv_server *srv, const char *route,
                            size_t route_len, const char *wire, size_t wire_len,
                            const char *reply, const void *hdr, size_t hlen,
                            const void *data, size_t dlen,
                            const struct srv_slice *queues, size_t nqueues)
{
    struct srv_sublist_result *r;
    char *buf;
    struct srv_cmd cmd;
    int rv = make_cmd(&cmd, &buf, wire, wire_len, reply, hdr, hlen, data, dlen);
    if (rv != 0) {
        return rv;
    }
    rv = srv_sublist_match(&srv->sublist, route, route_len, &r);
    if (rv == 0) {
        for (size_t i = 0; i < r->npsubs; i++) {
            struct srv_sub *sub = r->psubs[i];
            if (!sub->removed && !skip_for(sub, NULL)) {
                (void)deliver(NULL, sub, &cmd);
            }
        }
        for (size_t i = 0; i < r->nqgroups; i++) {
            if (queues != NULL &&
                !queue_named(queues, nqueues, &r->qgroups[i])) {
                continue; /* another node serves this group */
            }
            struct srv_sub *sub =
                srv_sublist_qgroup_pick(&r->qgroups[i], skip_for, NULL);
            if (sub != NULL) {
                (void)deliver(NULL, sub, &cmd);
            }
        }
        srv_sublist_result_release(r);
    }
    free(buf);
    return rv;
}

int srv_route_deliver_internal(struct srv_server *srv, const char *route,
                               size_t route_len, const char *wire,
                               size_t wire_len, const char *reply,
                               const void *hdr, size_t hlen, const void *data,
                               size_t dlen)
{
    return deliver_internal(srv, route, route_len, wire, wire_len, reply, hdr,
                            hlen, data, dlen, NULL, 0);
}

int srv_route_deliver_internal_queues(struct srv_server *srv, const char *route,
                                      size_t route_len, const char *wire,
                                      size_t wire_len, const char *reply,
                                      const void *hdr, size_t hlen,
                                      const void *data, size_t dlen,
                                      const struct srv_slice *queues,
                                      size_t nqueues)
{
    static const struct srv_slice none[1];
    return deliver_internal(srv, route, route_len, wire, wire_len, reply, hdr,
                            hlen, data, dlen, queues != NULL ? queues : none,
                            nqueues);
}

static int publish(struct srv_server *srv, struct srv_conn *c,
                   const struct srv_cmd *cmd, bool *took, size_t *delivered);

static int on_pub(struct srv_conn *c, const struct srv_cmd *cmd)
{
    struct srv_server *srv = c->srv;
    const struct srv_pub_hooks *ph = srv->pub_hooks;
    size_t delivered = 0;
    int rv;

    srv->stats.in_msgs++;
    srv->stats.in_bytes += cmd->total_bytes;
    c->mon.in_msgs++;
    c->mon.in_bytes += cmd->total_bytes;
    c->mon.last_ms = uv_now(srv->loop);
    if (c->pedantic &&
        !srv_subject_valid(cmd->subject.ptr, cmd->subject.len, false)) {
        send_err(c, "Invalid Publish Subject");
        return c->closing ? KEEL_ESHUTDOWN : 0;
    }
    rv = check_pub(c, cmd);
    if (rv != 0) {
        return rv == KEEL_ESHUTDOWN || c->closing ? KEEL_ESHUTDOWN : 0;
    }
    bool took = false;
    rv = publish(srv, c, cmd, &took, &delivered);
    if (rv == KEEL_ENOMEM) {
        srv_conn_close(c, NULL, false);
        return KEEL_ESHUTDOWN;
    }
    if (delivered == 0 && !took && ph != NULL &&
        ph->park(srv->pub_arg, cmd, c->no_responders && c->headers)) {
        took = true;
    }
    if (delivered == 0 && !took && cmd->reply.len > 0 && c->no_responders &&
        !c->closing) {
        no_responders(c, cmd);
    }
    send_ok(c);
    return c->closing ? KEEL_ESHUTDOWN : 0;
}

int srv_route_publish(struct srv_server *srv, const char *subject,
                      const char *reply, const void *hdr, size_t hlen,
                      const void *data, size_t dlen, size_t *delivered)
{
    bool took = false;
    char *buf;
    struct srv_cmd cmd;
    *delivered = 0;
    int rv = make_cmd(&cmd, &buf, subject, strlen(subject), reply, hdr, hlen,
                      data, dlen);
    if (rv != 0) {
        return rv;
    }
    srv->stats.in_msgs++;
    srv->stats.in_bytes += cmd.total_bytes;
    rv = publish(srv, NULL, &cmd, &took, delivered);
    *delivered += took ? 1 : 0;
    free(buf);
    return rv;
}

/* A PUB of c (NULL: from inside keeld) past its checks: the layer above,
 * local subscribers, other nodes. *took: the layer above took it;
 * *delivered counts the subscribers and nodes that got it. */
static int publish(struct srv_server *srv, struct srv_conn *c,
                   const struct srv_cmd *cmd, bool *took, size_t *delivered)
{
    struct srv_sublist_result *r;
    const struct srv_pub_hooks *ph = srv->pub_hooks;
    const struct srv_fwd_hooks *fh = srv->fwd_hooks;
    struct srv_pub_fwd fwd;
    /* The layer above may take it (JetStream: API requests, acks, and
     * publishes a stream stores, which core subscribers get too). */
    *took = ph != NULL && ph->take(srv->pub_arg, c, cmd);
    if (fh != NULL) {
        fh->begin(srv->fwd_arg, cmd, &fwd);
    }
    int rv = srv_sublist_match(&srv->sublist, cmd->subject.ptr,
                               cmd->subject.len, &r);
    if (rv == 0) {
        for (size_t i = 0; i < r->npsubs; i++) {
            struct srv_sub *sub = r->psubs[i];
            if (!sub->removed && !skip_for(sub, c) && deliver(c, sub, cmd)) {
                (*delivered)++;
            }
        }
        for (size_t i = 0; i < r->nqgroups; i++) {
            struct srv_sublist_qgroup *g = &r->qgroups[i];
            /* Each message goes to one member of the group cluster-wide. */
            if (fh != NULL && fh->queue_remote(srv->fwd_arg, &fwd, g->name,
                                               g->name_len, g->n)) {
                continue;
            }
            struct srv_sub *sub = srv_sublist_qgroup_pick(g, skip_for, c);
            if (sub != NULL && deliver(c, sub, cmd)) {
                (*delivered)++;
            }
        }
        srv_sublist_result_release(r);
    } else if (rv == KEEL_ENOMEM) {
        return rv;
    }
    if (fh != NULL) {
        *delivered += fh->end(srv->fwd_arg, &fwd, cmd);
    }
    return 0;
}

static bool json_flag(const json_t *o, const char *key, bool dflt)
{
    const json_t *v = json_object_get(o, key);
    return v == NULL ? dflt : json_is_true(v);
}

/* CONNECT's name, lang and version, for /connz (truncated to fit). */
static void conn_identity(struct srv_conn *c, const json_t *o)
{
    const char *v = json_string_value(json_object_get(o, "name"));
    snprintf(c->mon.name, sizeof c->mon.name, "%s", v != NULL ? v : "");
    v = json_string_value(json_object_get(o, "lang"));
    snprintf(c->mon.lang, sizeof c->mon.lang, "%s", v != NULL ? v : "");
    v = json_string_value(json_object_get(o, "version"));
    snprintf(c->mon.version, sizeof c->mon.version, "%s", v != NULL ? v : "");
}

static int on_connect(struct srv_conn *c, const struct srv_cmd *cmd)
{
    json_error_t jerr;
    json_t *o = json_loadb(cmd->json.ptr, cmd->json.len, 0, &jerr);
    const char *err = NULL;

    if (o == NULL || !json_is_object(o)) {
        err = "Unknown Protocol Operation";
        goto out;
    }
    c->verbose = json_flag(o, "verbose", false);
    c->pedantic = json_flag(o, "pedantic", false);
    c->echo = json_flag(o, "echo", true);
    c->headers = json_flag(o, "headers", false);
    c->no_responders = json_flag(o, "no_responders", false);
    const json_t *proto = json_object_get(o, "protocol");
    if (proto != NULL &&
        (!json_is_integer(proto) || json_integer_value(proto) < 0 ||
         json_integer_value(proto) > 1)) {
        err = "invalid client protocol";
        goto out;
    }
    if (c->no_responders && !c->headers) {
        err = "no responders requires headers support";
        goto out;
    }
    conn_identity(c, o);
    struct srv_auth_creds creds = {
        json_string_value(json_object_get(o, "user")),
        json_string_value(json_object_get(o, "pass")),
        json_string_value(json_object_get(o, "auth_token")),
    };
    int arv = srv_conn_auth(c, &creds);
    if (arv == KEEL_EAGAIN) {
        json_decref(o);
        return 0; /* +OK (if verbose) comes when the check ends */
    }
    if (arv != 0) {
        SRV_INFO("auth", "cid %llu %s: authorization failed%s%s",
                 (unsigned long long)c->cid, c->peer,
                 creds.user != NULL ? " for user " : "",
                 creds.user != NULL ? creds.user : "");
        err = "Authorization Violation";
        goto out;
    }
    SRV_DEBUG("conn", "cid %llu %s connected: name=%s lang=%s version=%s",
              (unsigned long long)c->cid, c->peer,
              json_string_value(json_object_get(o, "name")) ?: "",
              json_string_value(json_object_get(o, "lang")) ?: "",
              json_string_value(json_object_get(o, "version")) ?: "");
out:
    json_decref(o);
    if (err != NULL) {
        srv_conn_close(c, err, true);
        return KEEL_ESHUTDOWN;
    }
    send_ok(c);
    return 0;
}

static struct srv_sub *sub_new(struct srv_conn *c, const struct srv_cmd *cmd)
{
    size_t n = sizeof(struct srv_sub) + cmd->subject.len + 1 + cmd->queue.len +
               1 + cmd->sid.len + 1;
    struct srv_sub *sub = calloc(1, n);
    char *p;

    if (sub == NULL) {
        return NULL;
    }
    /* One allocation holds the sub and its three strings. */
    p = (char *)(sub + 1);
    sub->conn = c;
    sub->subject = p;
    sub->subject_len = cmd->subject.len;
    p = put(p, cmd->subject.ptr, cmd->subject.len) + 1;
    if (cmd->queue.len > 0) {
        sub->queue = p;
        sub->queue_len = cmd->queue.len;
        p = put(p, cmd->queue.ptr, cmd->queue.len) + 1;
    }
    sub->sid = p;
    sub->sid_len = cmd->sid.len;
    put(p, cmd->sid.ptr, cmd->sid.len);
    return sub;
}

static int on_sub(struct srv_conn *c, const struct srv_cmd *cmd)
{
    struct srv_sub *sub;
    int rv;

    if (!srv_subject_valid(cmd->subject.ptr, cmd->subject.len, true)) {
        send_err(c, "Invalid Subject");
        return 0;
    }
    if (srv_hmap_get(&c->subs, cmd->sid.ptr, cmd->sid.len) != NULL) {
        /* A repeated sid keeps the first subscription, as nats-server. */
        send_ok(c);
        return 0;
    }
    if (!srv_auth_can_subscribe(c->perms, cmd->subject.ptr, cmd->subject.len)) {
        char text[SRV_CONTROL_LINE_BYTES_MAX + 64];
        snprintf(text, sizeof text,
                 "Permissions Violation for Subscription to \"%.*s\"",
                 (int)cmd->subject.len, cmd->subject.ptr);
        send_err(c, text);
        return 0;
    }
    if (c->subs.count >= SRV_SUBS_PER_CONN_MAX ||
        c->subs.count >= c->srv->cfg->max_subs) {
        send_err(c, "maximum subscriptions exceeded");
        return 0;
    }
    sub = sub_new(c, cmd);
    if (sub == NULL) {
        srv_conn_close(c, NULL, false);
        return KEEL_ESHUTDOWN;
    }
    rv = srv_sublist_insert(&c->srv->sublist, sub);
    if (rv == 0) {
        rv = srv_hmap_put(&c->subs, sub->sid, sub->sid_len, sub);
        if (rv != 0) {
            (void)srv_sublist_remove(&c->srv->sublist, sub);
        }
    }
    if (rv == 0 && c->srv->fwd_hooks != NULL) {
        c->srv->fwd_hooks->interest_add(c->srv->fwd_arg, sub);
    }
    if (rv != 0) {
        free(sub);
        send_err(c, rv == KEEL_EINVAL ? "Invalid Subject"
                                      : "maximum subscriptions exceeded");
        return 0;
    }
    send_ok(c);
    return 0;
}

static int on_unsub(struct srv_conn *c, const struct srv_cmd *cmd)
{
    struct srv_sub *sub = srv_hmap_get(&c->subs, cmd->sid.ptr, cmd->sid.len);

    if (sub != NULL) {
        if (cmd->max > 0 && sub->delivered < cmd->max) {
            sub->max = cmd->max;
        } else {
            unsub_now(c, sub);
        }
    }
    send_ok(c);
    return 0;
}

static void trace_cmd(struct srv_conn *c, const struct srv_cmd *cmd)
{
    static const char *names[] = {"",      "CONNECT", "PUB",  "HPUB", "SUB",
                                  "UNSUB", "PING",    "PONG", "INFO"};
    const struct srv_slice *arg = cmd->subject.len > 0 ? &cmd->subject
                                  : cmd->sid.len > 0   ? &cmd->sid
                                                       : &cmd->json;
    srv_log(SRV_LOG_TRACE, "proto", "cid %llu <<- [%s %.*s%s%.*s]",
            (unsigned long long)c->cid, names[cmd->op], (int)arg->len, arg->ptr,
            cmd->reply.len > 0 ? " " : "", (int)cmd->reply.len, cmd->reply.ptr);
}

/* Parser callback: one case per verb. */
static int on_cmd(void *ud, const struct srv_cmd *cmd)
{
    struct srv_conn *c = ud;

    if (c->closing) {
        return KEEL_ESHUTDOWN;
    }
    if (srv_log_enabled(SRV_LOG_TRACE)) {
        trace_cmd(c, cmd);
    }
    if (!c->connected && cmd->op != SRV_OP_CONNECT && c->srv->auth.required) {
        srv_conn_close(c, "Authorization Violation", true);
        return KEEL_ESHUTDOWN;
    }
    switch (cmd->op) {
    case SRV_OP_PUB:
    case SRV_OP_HPUB:
        return on_pub(c, cmd);
    case SRV_OP_SUB:
        return on_sub(c, cmd);
    case SRV_OP_UNSUB:
        return on_unsub(c, cmd);
    case SRV_OP_PING:
        if (srv_route_append(c, "PONG\r\n", 6) != 0) {
            srv_conn_close(c, NULL, false);
            return KEEL_ESHUTDOWN;
        }
        return 0;
    case SRV_OP_PONG:
        c->pings_out = 0;
        return 0;
    case SRV_OP_CONNECT:
        return on_connect(c, cmd);
    case SRV_OP_INFO:
        return 0; /* clients may echo INFO; nothing to do */
    }
    return KEEL_EPROTO;
}

static void feed(struct srv_conn *c, const char *data, size_t len);

void srv_route_input(struct srv_conn *c, const char *data, size_t len)
{
    /* Until CONNECT succeeds, feed one line at a time: a CONNECT whose
     * password is checked off the loop thread leaves the rest of the read
     * to be held (and fed once the check ends). Bounded: each round takes
     * at least one byte. */
    while (!c->connected && !c->closing && len > 0) {
        if (c->auth_pending) {
            if (srv_conn_hold(c, data, len) != 0) {
                srv_conn_close(c, NULL, false);
            }
            return;
        }
        const char *nl = memchr(data, '\n', len);
        size_t n = nl != NULL ? (size_t)(nl - data) + 1 : len;
        feed(c, data, n);
        data += n;
        len -= n;
    }
    if (len > 0 && !c->closing) {
        feed(c, data, len);
    }
}

static void feed(struct srv_conn *c, const char *data, size_t len)
{
    int rv = srv_parser_feed(&c->parser, data, len, on_cmd, c);
    const char *err = NULL;

    switch (rv) {
    case 0:
    case KEEL_ESHUTDOWN:
        return;
    case KEEL_EPROTO:
        err = "Unknown Protocol Operation";
        break;
    case KEEL_ETOOBIG:
        err = "maximum control line exceeded"; /* nats-server's text */
        break;
    case KEEL_ELIMIT:
        err = "Maximum Payload Violation";
        break;
    default:
        break;
    }
    SRV_DEBUG("conn", "cid %llu %s: protocol error: %s",
              (unsigned long long)c->cid, c->peer,
              err != NULL ? err : keel_strerror(rv));
    srv_conn_close(c, err, err != NULL);
}

void srv_route_deliver_routed(struct srv_server *srv, const struct srv_cmd *cmd,
                              const struct srv_slice *queues, size_t nqueues)
{
    struct srv_sublist_result *r;

    srv->stats.in_msgs++;
    srv->stats.in_bytes += cmd->total_bytes;
    if (srv_sublist_match(&srv->sublist, cmd->subject.ptr, cmd->subject.len,
                          &r) != 0) {
        return;
    }
    for (size_t i = 0; i < r->npsubs; i++) {
        struct srv_sub *sub = r->psubs[i];
        if (!sub->removed && !skip_for(sub, NULL)) {
            (void)deliver(NULL, sub, cmd);
        }
    }
    /* Only the queue groups the sending node chose this node for. */
    for (size_t i = 0; i < r->nqgroups; i++) {
        struct srv_sublist_qgroup *g = &r->qgroups[i];
        if (queue_named(queues, nqueues, g)) {
            struct srv_sub *sub = srv_sublist_qgroup_pick(g, skip_for, NULL);
            if (sub != NULL) {
                (void)deliver(NULL, sub, cmd);
            }
        }
    }
    srv_sublist_result_release(r);
}
