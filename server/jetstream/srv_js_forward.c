/* JetStream request forwarding to the answering leader (srv_js_forward.h).
 *
 * State is per process: keeld runs one JetStream engine, and the frames of
 * one kind have one handler (srv_cluster_register_kind). */
#include "srv_js_forward.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "keel/error.h"
#include "srv_cluster.h"
#include "srv_js.h"
#include "srv_js_err.h"
#include "srv_js_int.h"
#include "srv_js_table.h"
#include "srv_log.h"
#include "srv_parser.h"
#include "srv_route.h"
#include "srv_server.h"
#include "srv_sublist.h"

enum fwd_frame {
    FWD_REQUEST = 1,
    FWD_DELIVER = 2,
};

/* A request waiting for its leader to be known (copied: subject, reply,
 * headers + payload). */
struct parked {
    struct parked *next;
    uint64_t deadline_ms;
    size_t slen, rlen, hdr, total;
    bool late;          /* a publish nobody took: srv_js_fwd_late_park */
    bool no_responders; /* ... whose client wants the 503 status */
    char buf[];
};

/* The answer to a STREAM.CREATE forwarded from this node, held until this
 * node applied the create too (the client's next publish through this
 * node must find the stream), at most SRV_JS_FWD_PARK_MS. */
struct held {
    struct held *next;
    uint64_t deadline_ms;
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    size_t route_len, wire_len, rlen, hdr, dlen;
    char buf[]; /* route, wire, reply, headers + data */
};

/* A STREAM.CREATE forwarded from here whose answer has not come back. */
struct await_create {
    char *reply; /* malloc'ed; NULL: free slot */
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
};

static struct {
    struct srv_js *js;          /* attached engine, NULL when detached */
    struct srv_cluster *cl;     /* its cluster */
    bool inbound;               /* running a forwarded request right now */
    bool inbound_deliver;       /* delivering a deliver frame right now */
    bool replaying;             /* running a parked request again */
    bool expired;               /* ... whose wait is over */
    bool keep;                  /* ... which must wait on */
    struct parked *head, *tail; /* FIFO: requests keep their order */
    size_t nparked, parked_bytes;
    uv_timer_t timer;
    bool timer_open;
    struct held *held; /* answers awaiting the local create */
    size_t nheld;
    struct await_create await[SRV_JS_FWD_AWAIT_MAX];
    size_t await_next; /* ring: the oldest is overwritten */
    struct srv_js_fwd_stats stats;
} fwd;

/* ---- classification ---- */

enum srv_js_fwd_target srv_js_fwd_classify(const char *subject, size_t len,
                                           char *stream)
{
    return srv_js_api_target(srv_js_api_lookup(subject, len), subject, len,
                             stream);
}

/* ---- attach ---- */

static void on_frame(void *arg, const char *from, const uint8_t *data,
                     size_t len);

int srv_js_fwd_attach(struct srv_js *js, struct srv_cluster *cl)
{
    if (fwd.js == js && fwd.cl == cl) {
        return 0;
    }
    int rv = srv_cluster_register_kind(cl, SRV_CLUSTER_JS_FWD, on_frame, js);
    if (rv == 0) {
        fwd.js = js;
        fwd.cl = cl;
    }
    return rv;
}

void srv_js_fwd_detach(struct srv_js *js)
{
    if (fwd.js != js || fwd.cl == NULL) {
        return;
    }
    /* Shutting down: parked requests get no answer (clients time out). */
    while (fwd.head != NULL) {
        struct parked *p = fwd.head;
        fwd.head = p->next;
        free(p);
    }
    fwd.tail = NULL;
    fwd.nparked = 0;
    fwd.parked_bytes = 0;
    while (fwd.held != NULL) {
        struct held *h = fwd.held;
        fwd.held = h->next;
        free(h);
    }
    fwd.nheld = 0;
    for (size_t i = 0; i < SRV_JS_FWD_AWAIT_MAX; i++) {
        free(fwd.await[i].reply);
        fwd.await[i].reply = NULL;
    }
    if (fwd.timer_open) {
        uv_close((uv_handle_t *)&fwd.timer, NULL);
        fwd.timer_open = false;
    }
    /* Clearing the handler of an extension kind cannot fail. */
    int rv = srv_cluster_register_kind(fwd.cl, SRV_CLUSTER_JS_FWD, NULL, NULL);
    ASSERT(rv == 0);
    fwd.js = NULL;
    fwd.cl = NULL;
}

void srv_js_fwd_tick(struct srv_js *js)
{
    struct srv_cluster *cl = srv_js_server(js)->cluster;
    if (cl != NULL && fwd.js != js && srv_js_fwd_attach(js, cl) != 0) {
        SRV_WARN("js", "cannot receive forwarded JetStream requests: the "
                       "cluster frame kind has another handler");
    }
}

void srv_js_fwd_stats(struct srv_js_fwd_stats *out)
{
    *out = fwd.stats;
}

/* ---- sending ---- */

/* Encode and send a request frame to node. Returns 0 or a KEEL_E*. */
static int send_request(struct srv_js *js, const char *node,
                        const struct srv_cmd *cmd)
{
    const char *self = srv_js_self_name(js);
    size_t need = cmd->subject.len + cmd->reply.len + cmd->total_bytes +
                  strlen(self) + 8 * SRV_MP_HEADER_BYTES_MAX;
    uint8_t *buf = malloc(need);
    if (buf == NULL) {
        return KEEL_ENOMEM;
    }
    uint8_t *w = srv_mp_put_array(buf, 6);
    w = srv_mp_put_uint(w, FWD_REQUEST);
    w = srv_mp_put_str(w, cmd->subject.ptr, cmd->subject.len);
    w = srv_mp_put_str(w, cmd->reply.ptr, cmd->reply.len);
    w = srv_mp_put_uint(w, cmd->hdr_bytes);
    w = srv_mp_put_bin_header(w, cmd->total_bytes);
    if (cmd->total_bytes > 0) {
        memcpy(w, cmd->payload, cmd->total_bytes);
        w += cmd->total_bytes;
    }
    w = srv_mp_put_str(w, self, strlen(self));
    ASSERT((size_t)(w - buf) <= need);
    int rv = srv_cluster_send_kind(fwd.cl, node, SRV_CLUSTER_JS_FWD, buf,
                                   (size_t)(w - buf));
    free(buf);
    return rv;
}

bool srv_js_fwd_inbound(void)
{
    return fwd.inbound;
}

int srv_js_fwd_send(struct srv_js *js, const char *node,
                    const struct srv_cmd *cmd)
{
    if (fwd.js != js) {
        srv_js_fwd_tick(js);
    }
    if (fwd.cl == NULL) {
        return KEEL_ENOENT;
    }
    int rv = send_request(js, node, cmd);
    if (rv == 0) {
        fwd.stats.requests_out++;
    }
    return rv;
}

/* The request could not reach its leader (unknown, no link, or this node
 * got it forwarded and is no longer the leader): nothing was proposed, so
 * a 503 says the outcome is "not done". A publish gets the PubAck form. */
static void unavailable(struct srv_js *js, const char *reply,
                        const char *stream, bool publish, const char *why)
{
    char err[KEEL_ERRMSG_MAX];
    fwd.stats.not_leader++;
    SRV_DEBUG("js", "request not forwarded: %s", why);
    if (reply[0] == '\0') {
        return;
    }
    if (!publish) {
        srv_js_reply_err(js, reply, "api_response", SRV_JS_EUNAVAILABLE, why);
        return;
    }
    json_t *o = json_object();
    if (o != NULL && srv_js_err_add(o, SRV_JS_EUNAVAILABLE, why, err) == 0) {
        json_object_set_new(o, "stream", json_string(stream));
        json_object_set_new(o, "seq", json_integer(0));
    }
    srv_js_reply_json(js, reply, o);
}

static void on_park_tick(uv_timer_t *t);
static void release_held(struct srv_js *js, uint64_t now);

/* Run the parking timer (open) unless it runs. */
static void park_timer_start(void)
{
    if (!uv_is_active((uv_handle_t *)&fwd.timer)) {
        (void)uv_timer_start(&fwd.timer, on_park_tick, SRV_JS_FWD_PARK_TICK_MS,
                             SRV_JS_FWD_PARK_TICK_MS);
    }
}

/* Open the parking timer on js's loop. Returns 0 or a libuv error. */
static int park_timer_open(struct srv_js *js)
{
    if (fwd.timer_open) {
        return 0;
    }
    int rv = uv_timer_init(srv_js_server(js)->loop, &fwd.timer);
    fwd.timer_open = rv == 0;
    return rv;
}

/* Queue a copy of cmd at the tail (at most SRV_JS_FWD_PARK_MS). Returns
 * it, or NULL when the parking lot is full. */
static struct parked *park_copy(struct srv_js *js, const struct srv_cmd *cmd)
{
    size_t n = cmd->subject.len + cmd->reply.len + cmd->total_bytes;
    struct parked *p = NULL;
    if (fwd.nparked < SRV_JS_FWD_PARKED_MAX &&
        fwd.parked_bytes + n <= SRV_JS_FWD_PARKED_BYTES_MAX) {
        p = malloc(sizeof *p + n);
    }
    if (p != NULL && park_timer_open(js) != 0) {
        free(p);
        p = NULL;
    }
    if (p == NULL) {
        return NULL;
    }
    p->next = NULL;
    p->late = false;
    p->no_responders = false;
    p->deadline_ms = uv_now(srv_js_server(js)->loop) + SRV_JS_FWD_PARK_MS;
    p->slen = cmd->subject.len;
    p->rlen = cmd->reply.len;
    p->hdr = cmd->hdr_bytes;
    p->total = cmd->total_bytes;
    memcpy(p->buf, cmd->subject.ptr, p->slen);
    memcpy(p->buf + p->slen, cmd->reply.ptr, p->rlen);
    if (p->total > 0) {
        memcpy(p->buf + p->slen + p->rlen, cmd->payload, p->total);
    }
    if (fwd.tail != NULL) {
        fwd.tail->next = p;
    } else {
        fwd.head = p;
    }
    fwd.tail = p;
    fwd.nparked++;
    fwd.parked_bytes += n;
    park_timer_start();
    return p;
}

/* Keep a copy of cmd until its leader is known; 503 when the parking lot
 * is full. */
static void park(struct srv_js *js, const struct srv_cmd *cmd,
                 const char *reply, const char *stream, bool publish)
{
    if (park_copy(js, cmd) == NULL) {
        unavailable(js, reply, stream, publish,
                    "too many requests wait for a leader; retry");
        return;
    }
    fwd.stats.parked++;
}

bool srv_js_fwd_late_park(struct srv_js *js, const struct srv_cmd *cmd,
                          bool no_responders)
{
    static const char inbox[] = "_INBOX.";
    const struct srv_slice *subj = &cmd->subject;
    if (!srv_js_clustered(js) || js->stopping || fwd.inbound || fwd.replaying ||
        subj->len == 0 || subj->ptr[0] == '$' ||
        (subj->len >= sizeof inbox - 1 &&
         memcmp(subj->ptr, inbox, sizeof inbox - 1) == 0) ||
        !srv_js_meta_behind(js)) {
        return false;
    }
    if (fwd.js != js) {
        srv_js_fwd_tick(js); /* attach: the timer closes with the engine */
    }
    struct parked *p = park_copy(js, cmd);
    if (p == NULL) {
        return false; /* full: answered as today (no responders) */
    }
    p->late = true;
    p->no_responders = no_responders && cmd->reply.len > 0;
    fwd.stats.late_parked++;
    return true;
}

/* A late-parked publish still no stream captures: the answer the client
 * would have had at once (srv_route.c: no responders), now. */
static void late_unanswered(struct srv_js *js, const struct parked *p)
{
    static const char status[] = "NATS/1.0 503\r\n\r\n";
    char reply[SRV_CONTROL_LINE_BYTES_MAX + 1];
    if (!p->no_responders || p->rlen >= sizeof reply) {
        return;
    }
    memcpy(reply, p->buf + p->slen, p->rlen);
    reply[p->rlen] = '\0';
    if (srv_js_send(js, reply, NULL, status, sizeof status - 1, NULL, 0) != 0) {
        SRV_WARN("js", "no-responders status to %s not queued", reply);
    }
}

/* Forward cmd to leader (a node name, NULL unknown) unless this node is
 * it. Returns true when handled (forwarded, parked or answered 503). */
static bool forward_to(struct srv_js *js, const char *leader,
                       const struct srv_cmd *cmd, const char *reply,
                       const char *stream, bool publish)
{
    const char *self = srv_js_self_name(js);
    if (fwd.js != js) {
        /* A request before the first tick: attach now, so the parking
         * timer is closed by srv_js_fwd_detach. */
        srv_js_fwd_tick(js);
    }
    if (!fwd.inbound && !fwd.replaying && fwd.head != NULL) {
        park(js, cmd, reply, stream, publish); /* behind earlier ones */
        return true;
    }
    if (leader != NULL && strcmp(leader, self) == 0) {
        return false; /* answer here */
    }
    if (fwd.inbound) {
        /* Forwarded once already: never again (no loops, one answer). */
        unavailable(js, reply, stream, publish,
                    "this node is no longer the leader; retry");
        return true;
    }
    if (leader == NULL && fwd.replaying && !fwd.expired) {
        fwd.keep = true; /* still electing: wait on, in order */
        return true;
    }
    if (leader == NULL && !fwd.replaying) {
        park(js, cmd, reply, stream, publish); /* e.g. a first election */
        return true;
    }
    if (leader == NULL) {
        unavailable(js, reply, stream, publish,
                    "no leader is known for this request now; retry");
        return true;
    }
    int rv = fwd.cl != NULL ? send_request(js, leader, cmd) : KEEL_ENOENT;
    if (rv != 0) {
        fwd.stats.send_failures++;
        unavailable(js, reply, stream, publish,
                    "the leader cannot be reached now; retry");
        return true;
    }
    fwd.stats.requests_out++;
    SRV_DEBUG("js", "forwarded %.*s to %s", (int)cmd->subject.len,
              cmd->subject.ptr, leader);
    return true;
}

/* Remember a forwarded STREAM.CREATE of stream answered to reply. */
static void await_add(const char *reply, const char *stream)
{
    struct await_create *a = &fwd.await[fwd.await_next];
    fwd.await_next = (fwd.await_next + 1) % SRV_JS_FWD_AWAIT_MAX;
    free(a->reply);
    a->reply = strdup(reply);
    snprintf(a->stream, sizeof a->stream, "%s", stream);
}

/* Was route the reply of a forwarded STREAM.CREATE? Then forget it and
 * copy its stream name into stream. */
static bool await_take(const char *route, char *stream)
{
    for (size_t i = 0; i < SRV_JS_FWD_AWAIT_MAX; i++) {
        struct await_create *a = &fwd.await[i];
        if (a->reply != NULL && strcmp(a->reply, route) == 0) {
            memcpy(stream, a->stream, sizeof a->stream);
            free(a->reply);
            a->reply = NULL;
            return true;
        }
    }
    return false;
}

bool srv_js_fwd_request(struct srv_js *js, const struct srv_js_api_entry *e,
                        const struct srv_cmd *cmd, const char *reply)
{
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    if (!srv_js_clustered(js)) {
        return false;
    }
    enum srv_js_fwd_target t =
        srv_js_api_target(e, cmd->subject.ptr, cmd->subject.len, stream);
    if (t == SRV_JS_FWD_META) {
        uint64_t sent = fwd.stats.requests_out;
        bool done =
            forward_to(js, srv_js_meta_leader_name(js), cmd, reply, "", false);
        if (fwd.stats.requests_out > sent && reply[0] != '\0' &&
            cmd->subject.len > 22 &&
            memcmp(cmd->subject.ptr, "$JS.API.STREAM.CREATE.", 22) == 0) {
            await_add(reply, stream);
        }
        return done;
    }
    struct srv_stream *st = NULL;
    if (t != SRV_JS_FWD_STREAM) {
        return false; /* not routed: answered (or refused) here */
    }
    /* Acks and flow-control replies carry no API answer: when they cannot
     * reach the leader they are dropped (the message is redelivered). */
    bool api =
        cmd->subject.len > 8 && memcmp(cmd->subject.ptr, "$JS.API.", 8) == 0;
    if (api && !fwd.inbound && srv_js_direct_here(js, cmd, reply)) {
        return true; /* a current follower or mirror here had it */
    }
    if (srv_js_find_stream(js, stream, &st) != 0) {
        if (srv_js_is_meta_leader(js) && srv_js_meta_behind(js)) {
            /* Just elected, its meta log not yet applied (a new leader
             * applies the entries of earlier terms once one of its own
             * commits): "stream not found" could be false. Retry soon. */
            if (api && reply[0] != '\0') {
                srv_js_reply_err(js, reply, "api_response",
                                 SRV_JS_ECLUSTER_BUSY,
                                 "the meta leader is applying its log: "
                                 "retry");
            }
            return true;
        }
        /* Unknown here, but this node's meta state may be behind (just
         * restarted: it applies the meta log once a leader tells it the
         * commit index): "stream not found" comes from the meta leader,
         * which knows every stream; one it knows and does not lead gets
         * the 503 retry answer there. */
        return forward_to(js, srv_js_meta_leader_name(js), cmd,
                          api ? reply : "", stream, false);
    }
    return forward_to(js, srv_stream_leader_name(st), cmd, api ? reply : "",
                      stream, false);
}

bool srv_js_fwd_publish(struct srv_js *js, struct srv_stream *st,
                        const struct srv_cmd *cmd, const char *reply)
{
    if (!srv_js_clustered(js)) {
        return false;
    }
    return forward_to(js, srv_stream_leader_name(st), cmd,
                      st->cfg.no_ack ? "" : reply, st->cfg.name, true);
}

/* Run parked requests again in order, up to the first still waiting for
 * its leader; requests whose wait is over get the 503 answer. */
static void on_park_tick(uv_timer_t *t)
{
    struct srv_js *js = fwd.js;
    uint64_t now = uv_now(t->loop);
    for (size_t i = 0; i < SRV_JS_FWD_PARKED_MAX && fwd.head != NULL; i++) {
        struct parked *p = fwd.head;
        struct srv_cmd cmd = {
            .op = p->hdr > 0 ? SRV_OP_HPUB : SRV_OP_PUB,
            .subject = {p->buf, p->slen},
            .reply = {p->buf + p->slen, p->rlen},
            .hdr_bytes = p->hdr,
            .total_bytes = p->total,
            .payload = p->buf + p->slen + p->rlen,
        };
        if (js == NULL || js->stopping) {
            break;
        }
        fwd.replaying = true;
        fwd.expired = now >= p->deadline_ms;
        fwd.keep = false;
        bool took = srv_js_intercept(js, NULL, &cmd);
        if (p->late && !took) {
            if (!fwd.expired && srv_js_meta_behind(js)) {
                fwd.keep = true; /* the create may be next to apply */
            } else {
                late_unanswered(js, p);
            }
        }
        fwd.replaying = false;
        if (fwd.keep) {
            break;
        }
        fwd.head = p->next;
        fwd.tail = fwd.head != NULL ? fwd.tail : NULL;
        fwd.nparked--;
        fwd.parked_bytes -= p->slen + p->rlen + p->total;
        free(p);
    }
    if (js != NULL && !js->stopping) {
        release_held(js, now);
    }
    if (fwd.head == NULL && fwd.held == NULL) {
        uv_timer_stop(t);
    }
}

/* ---- leader step-down ---- */

/* The voter a step-down's {"placement":{"preferred":NAME}} names: *to is
 * its node (0: none named). -1 after answering why not (bad JSON, not a
 * voter of the stream's group). */
static int stepdown_preferred(struct srv_js *js, const struct srv_stream *st,
                              const char *reply, const char *kind,
                              const char *body, size_t len, raft_node *to)
{
    json_error_t jerr;
    json_t *o = len > 0 ? json_loadb(body, len, 0, &jerr) : NULL;
    *to = 0;
    if (len > 0 && o == NULL) {
        srv_js_reply_err(js, reply, kind, SRV_JS_EINVALID_JSON, jerr.text);
        return -1;
    }
    const char *pref = json_string_value(
        json_object_get(json_object_get(o, "placement"), "preferred"));
    int rv = 0;
    if (pref != NULL && pref[0] != '\0') {
        *to = srv_jsc_node_id(pref);
        const struct raft_server *s =
            st->r != NULL ? raft_config_find(replica_config(st->r), *to) : NULL;
        rv = s != NULL && s->role == RAFT_VOTER ? 0 : -1;
    }
    if (rv != 0) {
        srv_js_reply_err(js, reply, kind, SRV_JS_EPEER_NOT_MEMBER, NULL);
    }
    json_decref(o);
    return rv;
}

void srv_js_fwd_stepdown(struct srv_js *js, const char *subject,
                         const char *reply, const char *body, size_t len)
{
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    char err[KEEL_ERRMSG_MAX];
    bool consumer = strncmp(subject, "$JS.API.CONSUMER.", 17) == 0;
    const char *kind = consumer ? "consumer_leader_stepdown_response"
                                : "stream_leader_stepdown_response";
    struct srv_stream *st = NULL;
    if (srv_js_fwd_classify(subject, strlen(subject), stream) !=
            SRV_JS_FWD_STREAM ||
        srv_js_find_stream(js, stream, &st) != 0) {
        srv_js_reply_err(js, reply, kind, SRV_JS_ESTREAM_NOT_FOUND, NULL);
        return;
    }
    ASSERT(st != NULL);
    raft_node to = 0;
    if (stepdown_preferred(js, st, reply, kind, body, len, &to) != 0) {
        return;
    }
    int rv = KEEL_ENOTLEADER;
    snprintf(err, sizeof err, "this node does not lead the stream now");
    if (srv_stream_is_leader(st) && st->r != NULL && to != 0 &&
        to == srv_jsc_self_node(js->jc)) {
        rv = 0; /* leads already, as preferred */
    } else if (srv_stream_is_leader(st) && st->r != NULL) {
        /* A consumer runs in its stream's group (docs/design.md §3): its
         * step-down hands over the whole group. */
        rv = replica_transfer_leader(st->r, to, err);
    }
    if (rv != 0) {
        srv_js_reply_err(js, reply, kind, SRV_JS_EUNAVAILABLE, err);
        return;
    }
    SRV_INFO("js", "stream %s: leadership transfer started (step-down%s)",
             stream, to != 0 ? " to the preferred node" : "");
    json_t *o = json_object();
    if (o != NULL) {
        char type[96];
        snprintf(type, sizeof type, "io.nats.jetstream.api.v1.%s", kind);
        json_object_set_new(o, "type", json_string(type));
        json_object_set_new(o, "success", json_true());
    }
    srv_js_reply_json(js, reply, o);
}

/* ---- deliveries to other nodes ---- */

static bool link_up(const struct srv_cluster_link *l)
{
    return l != NULL && l->established && !l->closing;
}

/* Index of the node of rsub's link in names[], added unless already there
 * when add; -1 when its link is down, it is not there (!add) or names[] is
 * full. */
static int node_index(const struct srv_sub *sub, const char **names, size_t *n,
                      bool add)
{
    const struct srv_cluster_rsub *rs = (const struct srv_cluster_rsub *)sub;
    if (sub->removed || !link_up(rs->link)) {
        return -1;
    }
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(names[i], rs->link->peer_name) == 0) {
            return (int)i;
        }
    }
    if (!add || *n == SRV_CLUSTER_LINKS_MAX) {
        return -1;
    }
    names[*n] = rs->link->peer_name;
    return (int)(*n)++;
}

/* Does this node have a member of the queue group g locally? */
static bool local_queue(struct srv_server *srv, const char *route,
                        size_t route_len, const struct srv_sublist_qgroup *g)
{
    struct srv_sublist_result *r;
    bool found = false;
    if (srv_sublist_match(&srv->sublist, route, route_len, &r) != 0) {
        return false;
    }
    for (size_t i = 0; i < r->nqgroups && !found; i++) {
        found = r->qgroups[i].name_len == g->name_len &&
                memcmp(r->qgroups[i].name, g->name, g->name_len) == 0;
    }
    srv_sublist_result_release(r);
    return found;
}

static size_t qgroups_routed(const struct srv_sublist_result *r)
{
    return r->nqgroups < SRV_CLUSTER_QUEUES_PER_MSG_MAX
               ? r->nqgroups
               : SRV_CLUSTER_QUEUES_PER_MSG_MAX;
}

/* Nodes that must get a delivery (r: the remote interest matching its
 * route): every node with a plain subscription, and for each queue group
 * without a local member one node that has members, choice[g] (-1: none;
 * the local delivery served it). A receiving node serves only the groups
 * it was chosen for: a node that gets the delivery for a plain
 * subscription must not also hand it to its member of a group served
 * elsewhere. Returns the count of names[]. */
static size_t interested_nodes(struct srv_js *js, const char *route,
                               size_t route_len,
                               const struct srv_sublist_result *r,
                               const char **names, int *choice)
{
    size_t n = 0;
    for (size_t i = 0; i < r->npsubs; i++) {
        (void)node_index(r->psubs[i], names, &n, true);
    }
    for (size_t i = 0; i < qgroups_routed(r); i++) {
        const struct srv_sublist_qgroup *g = &r->qgroups[i];
        choice[i] = -1;
        if (local_queue(srv_js_server(js), route, route_len, g)) {
            continue; /* the local delivery served the group */
        }
        /* A node that gets the delivery anyway first (one frame less),
         * else the first linked one with a member. */
        for (size_t k = 0; k < g->n && choice[i] < 0; k++) {
            choice[i] = node_index(g->subs[k], names, &n, false);
        }
        for (size_t k = 0; k < g->n && choice[i] < 0; k++) {
            choice[i] = node_index(g->subs[k], names, &n, true);
        }
    }
    return n;
}

bool srv_js_fwd_remote_interest(struct srv_js *js, const char *subject)
{
    const char *names[SRV_CLUSTER_LINKS_MAX];
    int choice[SRV_CLUSTER_QUEUES_PER_MSG_MAX];
    struct srv_sublist_result *r;
    if (fwd.cl == NULL || fwd.js != js || fwd.cl->rsublist.count == 0 ||
        srv_sublist_match(&fwd.cl->rsublist, subject, strlen(subject), &r) !=
            0) {
        return false;
    }
    size_t n = interested_nodes(js, subject, strlen(subject), r, names, choice);
    srv_sublist_result_release(r);
    return n > 0;
}

/* Send one deliver frame to each of names[]: the common part (prefix,
 * plen bytes, buf has room for the rest) and the queue groups that node
 * was chosen for. Returns how many were queued. */
static size_t send_delivers(const struct srv_sublist_result *r,
                            const char **names, size_t n, const int *choice,
                            uint8_t *buf, size_t plen)
{
    size_t sent = 0;
    for (size_t t = 0; t < n; t++) {
        uint32_t nq = 0;
        for (size_t i = 0; i < qgroups_routed(r); i++) {
            nq += choice[i] == (int)t ? 1 : 0;
        }
        uint8_t *w = srv_mp_put_array(buf + plen, nq);
        for (size_t i = 0; i < qgroups_routed(r); i++) {
            if (choice[i] == (int)t) {
                w = srv_mp_put_str(w, r->qgroups[i].name,
                                   r->qgroups[i].name_len);
            }
        }
        if (srv_cluster_send_kind(fwd.cl, names[t], SRV_CLUSTER_JS_FWD, buf,
                                  (size_t)(w - buf)) == 0) {
            sent++;
        } else {
            fwd.stats.send_failures++;
        }
    }
    return sent;
}

size_t srv_js_fwd_deliver(struct srv_js *js, const char *route,
                          size_t route_len, const char *wire, size_t wire_len,
                          const char *reply, const void *hdr, size_t hlen,
                          const void *data, size_t dlen)
{
    const char *names[SRV_CLUSTER_LINKS_MAX];
    int choice[SRV_CLUSTER_QUEUES_PER_MSG_MAX];
    struct srv_sublist_result *r;
    size_t rlen = reply != NULL ? strlen(reply) : 0;
    if (fwd.cl == NULL || fwd.js != js || fwd.inbound_deliver ||
        fwd.cl->rsublist.count == 0 ||
        srv_sublist_match(&fwd.cl->rsublist, route, route_len, &r) != 0) {
        return 0;
    }
    size_t n = interested_nodes(js, route, route_len, r, names, choice);
    size_t qbytes = 0;
    for (size_t i = 0; i < qgroups_routed(r); i++) {
        qbytes += r->qgroups[i].name_len + SRV_MP_HEADER_BYTES_MAX;
    }
    size_t need = route_len + wire_len + rlen + hlen + dlen + qbytes +
                  8 * SRV_MP_HEADER_BYTES_MAX;
    uint8_t *buf = n > 0 ? malloc(need) : NULL;
    if (buf == NULL) {
        srv_sublist_result_release(r);
        return 0;
    }
    /* [kind, route, wire, reply, hdr bytes, hdr + data, [queue, ...]] */
    uint8_t *w = srv_mp_put_array(buf, 7);
    w = srv_mp_put_uint(w, FWD_DELIVER);
    w = srv_mp_put_str(w, route, route_len);
    w = srv_mp_put_str(w, wire, wire_len);
    w = srv_mp_put_str(w, reply != NULL ? reply : "", rlen);
    w = srv_mp_put_uint(w, hlen);
    w = srv_mp_put_bin_header(w, hlen + dlen);
    if (hlen > 0) {
        memcpy(w, hdr, hlen);
        w += hlen;
    }
    if (dlen > 0) {
        memcpy(w, data, dlen);
        w += dlen;
    }
    ASSERT((size_t)(w - buf) + qbytes + SRV_MP_HEADER_BYTES_MAX <= need);
    size_t sent = send_delivers(r, names, n, choice, buf, (size_t)(w - buf));
    srv_sublist_result_release(r);
    free(buf);
    fwd.stats.delivers_out += sent;
    SRV_DEBUG("js", "delivery to %.*s sent to %zu nodes", (int)route_len, route,
              sent);
    return sent;
}

/* ---- receiving ---- */

/* A string field as a NUL-terminated copy into out (cap bytes). */
static int get_str(struct srv_mp_reader *r, char *out, size_t cap, size_t *len)
{
    const uint8_t *s;
    size_t n = 0;
    if (srv_mp_get_bytes(r, &s, &n) != 0 || n >= cap) {
        return KEEL_EPROTO;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    *len = n;
    return 0;
}

static int on_request(struct srv_js *js, struct srv_mp_reader *r)
{
    char subject[SRV_CONTROL_LINE_BYTES_MAX + 1];
    char reply[SRV_CONTROL_LINE_BYTES_MAX + 1];
    size_t slen = 0, rlen = 0, dlen = 0;
    uint64_t hdr = 0;
    const uint8_t *data;
    if (get_str(r, subject, sizeof subject, &slen) != 0 || slen == 0 ||
        get_str(r, reply, sizeof reply, &rlen) != 0 ||
        srv_mp_get_uint(r, &hdr) != 0 ||
        srv_mp_get_bytes(r, &data, &dlen) != 0 || hdr > dlen) {
        return KEEL_EPROTO;
    }
    struct srv_cmd cmd = {
        .op = hdr > 0 ? SRV_OP_HPUB : SRV_OP_PUB,
        .subject = {subject, slen},
        .reply = {reply, rlen},
        .hdr_bytes = (size_t)hdr,
        .total_bytes = dlen,
        .payload = (const char *)data,
    };
    fwd.stats.requests_in++;
    fwd.inbound = true;
    (void)srv_js_intercept(js, NULL, &cmd);
    fwd.inbound = false;
    return 0;
}

/* The queue groups a deliver frame names (this node serves only those). */
struct fwd_queues {
    bool all; /* a frame without the list, or a held answer: every group */
    uint32_t n;
    struct srv_slice q[SRV_CLUSTER_QUEUES_PER_MSG_MAX];
};

static int deliver_local(struct srv_js *js, const char *route, size_t route_len,
                         const char *wire, size_t wire_len, const char *reply,
                         const uint8_t *data, size_t hdr, size_t dlen,
                         const struct fwd_queues *qs)
{
    fwd.inbound_deliver = true;
    int rv = qs == NULL || qs->all
                 ? srv_route_deliver_internal(srv_js_server(js), route,
                                              route_len, wire, wire_len, reply,
                                              data, hdr, data + hdr, dlen - hdr)
                 : srv_route_deliver_internal_queues(
                       srv_js_server(js), route, route_len, wire, wire_len,
                       reply, data, hdr, data + hdr, dlen - hdr, qs->q, qs->n);
    fwd.inbound_deliver = false;
    return rv;
}

/* Hold a create answer (copied) until the stream is known here. Returns
 * false when it cannot be held (deliver it now). */
static bool hold(struct srv_js *js, const char *stream, const char *route,
                 size_t route_len, const char *wire, size_t wire_len,
                 const char *reply, size_t rlen, const uint8_t *data,
                 size_t hdr, size_t dlen)
{
    if (fwd.nheld >= SRV_JS_FWD_AWAIT_MAX || park_timer_open(js) != 0) {
        return false;
    }
    struct held *h = malloc(sizeof *h + route_len + wire_len + rlen + dlen);
    if (h == NULL) {
        return false;
    }
    *h = (struct held){.next = fwd.held,
                       .deadline_ms =
                           uv_now(fwd.timer.loop) + SRV_JS_FWD_PARK_MS,
                       .route_len = route_len,
                       .wire_len = wire_len,
                       .rlen = rlen,
                       .hdr = hdr,
                       .dlen = dlen};
    snprintf(h->stream, sizeof h->stream, "%s", stream);
    memcpy(h->buf, route, route_len);
    memcpy(h->buf + route_len, wire, wire_len);
    memcpy(h->buf + route_len + wire_len, reply, rlen);
    memcpy(h->buf + route_len + wire_len + rlen, data, dlen);
    fwd.held = h;
    fwd.nheld++;
    park_timer_start();
    return true;
}

/* Deliver held create answers whose stream this node knows now, or whose
 * wait is over (at most SRV_JS_FWD_AWAIT_MAX are held). */
static void release_held(struct srv_js *js, uint64_t now)
{
    struct held **pp = &fwd.held;
    while (*pp != NULL) {
        struct held *h = *pp;
        struct srv_stream *st = NULL;
        if (srv_js_find_stream(js, h->stream, &st) != 0 &&
            now < h->deadline_ms) {
            pp = &h->next;
            continue;
        }
        char route[SRV_CONTROL_LINE_BYTES_MAX + 1];
        char reply[SRV_CONTROL_LINE_BYTES_MAX + 1];
        const char *wire = h->buf + h->route_len;
        memcpy(route, h->buf, h->route_len);
        route[h->route_len] = '\0';
        memcpy(reply, wire + h->wire_len, h->rlen);
        reply[h->rlen] = '\0';
        (void)deliver_local(js, route, h->route_len, wire, h->wire_len,
                            h->rlen > 0 ? reply : NULL,
                            (const uint8_t *)wire + h->wire_len + h->rlen,
                            h->hdr, h->dlen, NULL);
        *pp = h->next;
        fwd.nheld--;
        free(h);
    }
}

/* Is a create answer an API error? A refused create is never applied, so
 * holding it until this node applies the stream only delays it past the
 * client's timeout (cjs_meta's R5-on-three-nodes case timed out so). */
static bool answer_is_error(const uint8_t *body, size_t len)
{
    json_t *o = json_loadb((const char *)body, len, 0, NULL);
    bool err = o == NULL || json_object_get(o, "error") != NULL;
    json_decref(o);
    return err;
}

/* The queue list of a 7-element deliver frame (pointing into the frame). */
static int get_queues(struct srv_mp_reader *r, struct fwd_queues *qs)
{
    const uint8_t *q;
    size_t qlen = 0;
    if (srv_mp_get_array(r, &qs->n) != 0 ||
        qs->n > SRV_CLUSTER_QUEUES_PER_MSG_MAX) {
        return KEEL_EPROTO;
    }
    for (uint32_t i = 0; i < qs->n; i++) {
        if (srv_mp_get_bytes(r, &q, &qlen) != 0) {
            return KEEL_EPROTO;
        }
        qs->q[i] = (struct srv_slice){(const char *)q, qlen};
    }
    return 0;
}

/* fields: 6 = [kind, route, wire, reply, hdr, data] (serve every local
 * queue group), 7 = with the list of the groups to serve. */
static int on_deliver(struct srv_js *js, struct srv_mp_reader *r,
                      uint32_t fields)
{
    char route[SRV_CONTROL_LINE_BYTES_MAX + 1];
    char wire[SRV_CONTROL_LINE_BYTES_MAX + 1];
    char reply[SRV_CONTROL_LINE_BYTES_MAX + 1];
    size_t route_len = 0, wire_len = 0, rlen = 0, dlen = 0;
    uint64_t hdr = 0;
    const uint8_t *data;
    struct fwd_queues qs = {.all = fields == 6};
    if (get_str(r, route, sizeof route, &route_len) != 0 || route_len == 0 ||
        get_str(r, wire, sizeof wire, &wire_len) != 0 || wire_len == 0 ||
        get_str(r, reply, sizeof reply, &rlen) != 0 ||
        srv_mp_get_uint(r, &hdr) != 0 ||
        srv_mp_get_bytes(r, &data, &dlen) != 0 || hdr > dlen ||
        (!qs.all && get_queues(r, &qs) != 0)) {
        return KEEL_EPROTO;
    }
    fwd.stats.delivers_in++;
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    struct srv_stream *st = NULL;
    if (await_take(route, stream) && srv_js_find_stream(js, stream, &st) != 0 &&
        !answer_is_error(data + hdr, dlen - (size_t)hdr) &&
        hold(js, stream, route, route_len, wire, wire_len, reply, rlen, data,
             (size_t)hdr, dlen)) {
        return 0; /* answered once this node applied the create */
    }
    return deliver_local(js, route, route_len, wire, wire_len,
                         rlen > 0 ? reply : NULL, data, (size_t)hdr, dlen, &qs);
}

/* Dispatch of one SRV_CLUSTER_JS_FWD frame (bytes from the network: a
 * malformed frame is dropped with a warning, never asserted on). */
static void on_frame(void *arg, const char *from, const uint8_t *data,
                     size_t len)
{
    struct srv_js *js = arg;
    struct srv_mp_reader r = {data, data + len};
    uint32_t n = 0;
    uint64_t kind = 0;
    int rv = KEEL_EPROTO;
    if (js != fwd.js || js->stopping) {
        return;
    }
    if (srv_mp_get_array(&r, &n) == 0 && (n == 6 || n == 7) &&
        srv_mp_get_uint(&r, &kind) == 0) {
        rv = kind == FWD_REQUEST && n == 6 ? on_request(js, &r)
             : kind == FWD_DELIVER         ? on_deliver(js, &r, n)
             : kind == FWD_REQUEST         ? KEEL_EPROTO
                                           : 0; /* a newer kind: ignored */
    }
    if (rv == KEEL_EPROTO) {
        SRV_WARN("js", "malformed forwarded JetStream frame from %s dropped",
                 from);
    }
}
