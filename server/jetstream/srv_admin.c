/* srv_admin: cluster reconfiguration requests (see srv_admin.h). */
#include "srv_admin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "keel/error.h"
#include "srv_js_err.h"
#include "srv_js_int.h"
#include "srv_log.h"

#define ADMIN_PENDING_MAX 16
/* A change not committed within this long is answered "not confirmed". */
#define ADMIN_CONFIRM_MS 10000

#define JS_TYPE "io.nats.jetstream.api.v1."
#define KEEL_TYPE "io.keel.api.v1."

/* A membership change awaiting its commit (the reply goes out then). */
struct admin_pending {
    uint64_t ctx; /* 0: free slot */
    uint64_t index;
    uint64_t deadline_ms;
    char type[64];
    char peer[SRV_JSC_NAME_BYTES];
    char *reply;
};

struct srv_admin {
    uint64_t next_ctx;
    struct admin_pending p[ADMIN_PENDING_MAX];
    uint64_t warned_ms; /* last "no node to move a replica to" warning */
    uint64_t waited_ms; /* last "a stream's membership change waits" note */
    /* Nodes replace_reincarnated removed, to add again (new incarnation). */
    char readd[RAFT_SERVERS_MAX][SRV_JSC_NAME_BYTES];
};

/* How often at most the meta leader warns that a replica cannot move. */
#define ADMIN_WARN_MS 30000
/* How often at most a stream leader says why its placement's next change
 * waits (a move that stalls shows why in the log: finding F24). */
#define ADMIN_WAIT_NOTE_MS 10000

static struct srv_admin *admin_of(struct srv_js *js)
{
    if (js->admin == NULL) {
        js->admin = calloc(1, sizeof *js->admin);
    }
    return js->admin;
}

static void reply_err(struct srv_js *js, const char *reply, const char *type,
                      enum srv_js_err err, const char *detail)
{
    json_t *o = NULL;
    char msg[KEEL_ERRMSG_MAX];
    js->api_errors++;
    if (srv_js_err_json("x", err, detail, &o, msg) == 0) {
        json_object_set_new(o, "type", json_string(type));
        srv_js_reply_json(js, reply, o);
    }
}

static void reply_ok(struct srv_js *js, const char *reply, const char *type,
                     json_t *o)
{
    if (o == NULL) {
        o = json_object();
    }
    if (o != NULL) {
        json_object_set_new(o, "type", json_string(type));
        json_object_set_new(o, "success", json_true());
    }
    srv_js_reply_json(js, reply, o);
}

/* A refusal from replica_change / replica_transfer_leader: retryable ones
 * are 503 (10008), the rest a bad request; both carry errmsg. */
static void reply_refused(struct srv_js *js, const char *reply,
                          const char *type, int rv, const char *errmsg)
{
    char d[KEEL_ERRMSG_MAX + 8];
    snprintf(d, sizeof d, "%s", errmsg);
    bool retry = rv == KEEL_EBUSY || rv == KEEL_EAGAIN ||
                 rv == KEEL_ENOTLEADER || rv == KEEL_ENOMEM;
    reply_err(js, reply, type,
              retry ? SRV_JS_ECLUSTER_BUSY : SRV_JS_ECLUSTER_REFUSED, d);
}

static const struct raft_server *member_of(const struct raft_config *c,
                                           raft_node node)
{
    return raft_config_find(c, node);
}

/* The leader's view of node's match (0 when never heard). */
static uint64_t match_of(struct srv_js *js, raft_node node)
{
    struct replica_peer peers[RAFT_SERVERS_MAX];
    size_t n = replica_peers(js->meta, peers, RAFT_SERVERS_MAX);
    for (size_t i = 0; i < n; i++) {
        if (peers[i].node == node) {
            return peers[i].match;
        }
    }
    return 0;
}

static json_t *member_json(struct srv_js *js, const char *name,
                           const struct raft_server *s)
{
    struct replica_info ri;
    replica_info(js->meta, &ri);
    uint64_t match = s->node == srv_jsc_self_node(js->jc)
                         ? ri.last_index
                         : match_of(js, s->node);
    uint64_t lag = ri.commit > match ? ri.commit - match : 0;
    return json_pack("{s:s, s:s, s:I, s:I, s:I}", "peer", name, "role",
                     s->role == RAFT_VOTER ? "voter" : "learner", "match",
                     (json_int_t)match, "commit", (json_int_t)ri.commit, "lag",
                     (json_int_t)lag);
}

static int pending_add(struct srv_js *js, const char *reply, const char *type,
                       const char *peer, uint64_t *ctx)
{
    struct srv_admin *a = admin_of(js);
    if (a == NULL) {
        return KEEL_ENOMEM;
    }
    for (size_t i = 0; i < ADMIN_PENDING_MAX; i++) {
        struct admin_pending *p = &a->p[i];
        if (p->ctx != 0) {
            continue;
        }
        p->reply = strdup(reply);
        if (p->reply == NULL) {
            return KEEL_ENOMEM;
        }
        p->ctx = ++a->next_ctx;
        p->index = 0;
        p->deadline_ms = uv_now(js->loop) + ADMIN_CONFIRM_MS;
        snprintf(p->type, sizeof p->type, "%s", type);
        snprintf(p->peer, sizeof p->peer, "%s", peer);
        *ctx = p->ctx;
        return 0;
    }
    return KEEL_EBUSY;
}

static struct admin_pending *pending_find(struct srv_js *js, uint64_t ctx)
{
    struct srv_admin *a = js->admin;
    for (size_t i = 0; a != NULL && ctx != 0 && i < ADMIN_PENDING_MAX; i++) {
        if (a->p[i].ctx == ctx) {
            return &a->p[i];
        }
    }
    return NULL;
}

static void pending_free(struct admin_pending *p)
{
    free(p->reply);
    memset(p, 0, sizeof *p);
}

/* Propose a change and answer when it commits. */
static void change(struct srv_js *js, const char *reply, const char *type,
                   const char *peer, const struct replica_change *c)
{
    char err[KEEL_ERRMSG_MAX];
    uint64_t ctx = 0;
    uint64_t index = 0;
    int rv = pending_add(js, reply, type, peer, &ctx);
    if (rv != 0) {
        reply_refused(js, reply, type, KEEL_EBUSY,
                      "too many membership requests await their commit: "
                      "retry in a moment");
        return;
    }
    rv = replica_change(js->meta, c, ctx, &index, err);
    struct admin_pending *p = pending_find(js, ctx);
    ASSERT(p != NULL);
    if (rv != 0) {
        pending_free(p);
        reply_refused(js, reply, type, rv, err);
        return;
    }
    p->index = index;
    SRV_INFO("js", "meta group: %s %s proposed at index %" PRIu64,
             c->op == RAFT_CHANGE_ADD_LEARNER ? "adding learner"
             : c->op == RAFT_CHANGE_REMOVE    ? "removing"
                                              : "promoting",
             peer, index);
}

/* The body's "peer" (a node name), or NULL after answering the error. */
static const char *peer_of(struct srv_js *js, const json_t *body,
                           const char *reply, const char *type)
{
    const char *peer = json_string_value(json_object_get(body, "peer"));
    if (peer == NULL || peer[0] == '\0' || strlen(peer) >= SRV_JSC_NAME_BYTES) {
        reply_err(js, reply, type, SRV_JS_ECLUSTER_REFUSED,
                  "the request needs {\"peer\": \"<node name>\"}");
        return NULL;
    }
    return peer;
}

static bool is_meta_leader(struct srv_js *js, const char *reply,
                           const char *type)
{
    if (js->jc != NULL && srv_js_is_meta_leader(js)) {
        return true;
    }
    reply_err(js, reply, type, SRV_JS_ECLUSTER_BUSY,
              js->jc == NULL ? "this node is not clustered"
                             : "this node does not lead the meta group now");
    return false;
}

static void peer_add(struct srv_js *js, const json_t *body, const char *reply)
{
    static const char type[] = KEEL_TYPE "peer_add_response";
    const char *peer = peer_of(js, body, reply, type);
    if (peer == NULL || !is_meta_leader(js, reply, type)) {
        return;
    }
    raft_node node = srv_jsc_node_id(peer);
    const struct raft_server *s = member_of(replica_config(js->meta), node);
    struct srv_jsc_peer_report rep;
    bool known = srv_jsc_peer_report(js->jc, peer, &rep);
    if (s != NULL && known && rep.inc != s->incarnation &&
        node != srv_jsc_self_node(js->jc)) {
        reply_err(js, reply, type, SRV_JS_ECLUSTER_REFUSED,
                  "that node is a member with another data directory (its "
                  "disk was replaced): remove it first (keel cluster "
                  "remove-peer), then add it");
        return;
    }
    if (s != NULL) {
        reply_ok(js, reply, type, member_json(js, peer, s));
        return;
    }
    if (!known || !rep.up) {
        reply_err(js, reply, type, SRV_JS_ECLUSTER_REFUSED,
                  "that node is not linked to the meta leader: start it "
                  "with --routes naming the cluster and check the name");
        return;
    }
    if (rep.state != SRV_JSC_WAITING && rep.state != SRV_JSC_MEMBER) {
        reply_err(js, reply, type, SRV_JS_ECLUSTER_BUSY,
                  "that node has not reported that it waits to be added "
                  "yet: retry in a moment");
        return;
    }
    struct replica_change c = {
        .op = RAFT_CHANGE_ADD_LEARNER, .node = node, .incarnation = rep.inc};
    change(js, reply, type, peer, &c);
}

static void peer_info(struct srv_js *js, const json_t *body, const char *reply)
{
    static const char type[] = KEEL_TYPE "peer_info_response";
    const char *peer = peer_of(js, body, reply, type);
    if (peer == NULL || !is_meta_leader(js, reply, type)) {
        return;
    }
    const struct raft_server *s =
        member_of(replica_config(js->meta), srv_jsc_node_id(peer));
    if (s == NULL) {
        reply_err(js, reply, type, SRV_JS_EPEER_NOT_MEMBER, NULL);
        return;
    }
    reply_ok(js, reply, type, member_json(js, peer, s));
}

static int propose_move(struct srv_js *js, struct srv_stream *st,
                        const char *from, const struct srv_jsc_member *to,
                        char *errmsg);
static const struct srv_jsc_member *placed_member(const struct srv_stream *st,
                                                  const char *name);
static int replace_for(struct srv_js *js, const struct srv_stream *st,
                       struct srv_jsc_member *to, char *err);

/* A node out of the meta group gets no further meta entry, so a stream
 * group it leads never learns that its replica moves, and it goes on
 * leading with itself placed (finding F13: the membership nemesis, a
 * live stream leader removed). Checking only that it leads nothing now
 * left a race (finding F21): a stream transfer or an election could make
 * a follower leader right after the check, and it then led, removed and
 * uninformed, for ever. So a live node is removed only once no stream
 * places it: each of its replicas moves first (one move at a time), while
 * it is still a member and applies the moves itself (as leader it hands
 * over and leaves the group, decision 0022; a replica no node can take
 * stays placed on it, docs/operations.md), and once it leads none and
 * holds the meta log through the moves (its match reaches the commit).
 * The removal is answered busy meanwhile (the CLI retries); should a
 * removed node lead anyway, its group's placed followers depose it
 * (srv_stream_cluster_depose). A node that is down is removed at once (it
 * opens no stream replica when it comes back, until added back: decision
 * 0038). True when the removal must wait (answered). */
static bool hosts_streams(struct srv_js *js, const char *peer,
                          const char *reply, const char *type)
{
    char err[KEEL_ERRMSG_MAX];
    char d[KEEL_ERRMSG_MAX + 2 * SRV_JS_NAME_BYTES_MAX + SRV_JSC_NAME_BYTES +
           160];
    struct replica_info ri;
    if (!srv_jsc_peer_up(js->jc, peer)) {
        return false; /* down: its groups elect a leader among the rest */
    }
    replica_info(js->meta, &ri);
    for (uint32_t i = 0; i < js->nstreams; i++) {
        struct srv_stream *st = js->streams[i];
        const char *ln =
            st->place.n > 0 ? srv_jsc_leader_name(js->jc, st->gid.b) : NULL;
        bool leads = ln != NULL && strcmp(ln, peer) == 0;
        if (!leads && placed_member(st, peer) == NULL) {
            continue;
        }
        int rv = 0;
        struct srv_jsc_member to;
        /* One move at a time: proposed only once the last one applied. */
        if (placed_member(st, peer) != NULL && ri.applied == ri.last_index) {
            rv = replace_for(js, st, &to, err);
            rv = rv == 0 ? propose_move(js, st, peer, &to, err) : rv;
        }
        if (rv != 0 && !leads) {
            continue; /* no node can take it: it stays placed there */
        }
        if (rv != 0) {
            snprintf(d, sizeof d,
                     "%s leads stream %s and its replica cannot move (%s): "
                     "hand the stream's leadership over first (keel cluster "
                     "transfer-leader --stream %s)",
                     peer, st->cfg.name, err, st->cfg.name);
            reply_err(js, reply, type, SRV_JS_ECLUSTER_REFUSED, d);
            return true;
        }
        snprintf(d, sizeof d,
                 "%s %s stream %s: its replica moves off first, retry the "
                 "removal once it has",
                 peer, leads ? "leads" : "holds a replica of", st->cfg.name);
        reply_err(js, reply, type, SRV_JS_ECLUSTER_BUSY, d);
        return true;
    }
    uint64_t match = match_of(js, srv_jsc_node_id(peer));
    if (match < ri.commit) {
        snprintf(d, sizeof d,
                 "%s holds the meta log through index %" PRIu64 " of %" PRIu64
                 " (its replicas' moves): retry the removal "
                 "once it has them",
                 peer, match, ri.commit);
        reply_err(js, reply, type, SRV_JS_ECLUSTER_BUSY, d);
        return true;
    }
    return false;
}

static void server_remove(struct srv_js *js, const json_t *body,
                          const char *reply)
{
    static const char type[] = JS_TYPE "meta_server_remove_response";
    char err[KEEL_ERRMSG_MAX];
    const char *peer = peer_of(js, body, reply, type);
    if (peer == NULL || !is_meta_leader(js, reply, type)) {
        return;
    }
    raft_node node = srv_jsc_node_id(peer);
    const struct raft_server *s = member_of(replica_config(js->meta), node);
    if (s == NULL) {
        reply_err(js, reply, type, SRV_JS_ESERVER_NOT_MEMBER, NULL);
        return;
    }
    if (node == srv_jsc_self_node(js->jc)) {
        /* Rule 4: the leader is never removed; it hands over first. */
        int rv = replica_transfer_leader(js->meta, 0, err);
        SRV_INFO("js",
                 "meta group: removal of the leader %s asked: "
                 "transferring leadership first",
                 peer);
        reply_err(js, reply, type, SRV_JS_ECLUSTER_BUSY,
                  rv == 0 ? "this node leads the meta group: leadership is "
                            "moving to another node, retry the removal"
                          : err);
        return;
    }
    if (hosts_streams(js, peer, reply, type)) {
        return;
    }
    bool force = json_is_true(json_object_get(body, "force"));
    if (force) {
        SRV_WARN("js",
                 "meta group: removing %s with --force (the healthy "
                 "majority check is skipped)",
                 peer);
    }
    struct replica_change c = {.op = RAFT_CHANGE_REMOVE,
                               .node = node,
                               .incarnation = s->incarnation,
                               .force = force};
    change(js, reply, type, peer, &c);
}

static void meta_stepdown(struct srv_js *js, const json_t *body,
                          const char *reply)
{
    static const char type[] = JS_TYPE "meta_leader_stepdown_response";
    char err[KEEL_ERRMSG_MAX];
    if (!is_meta_leader(js, reply, type)) {
        return;
    }
    const char *pref = json_string_value(
        json_object_get(json_object_get(body, "placement"), "preferred"));
    raft_node to = 0;
    if (pref != NULL && pref[0] != '\0') {
        to = srv_jsc_node_id(pref);
        const struct raft_server *s = member_of(replica_config(js->meta), to);
        if (s == NULL || s->role != RAFT_VOTER) {
            reply_err(js, reply, type, SRV_JS_EPEER_NOT_MEMBER, NULL);
            return;
        }
    }
    if (to == srv_jsc_self_node(js->jc)) {
        reply_ok(js, reply, type, NULL); /* leads already */
        return;
    }
    int rv = replica_transfer_leader(js->meta, to, err);
    if (rv != 0) {
        reply_refused(js, reply, type, rv, err);
        return;
    }
    SRV_INFO("js", "meta group: leadership transfer started (step-down%s%s)",
             pref != NULL ? " to " : "", pref != NULL ? pref : "");
    reply_ok(js, reply, type, NULL);
}

/* Propose the meta entry moving st's replica off node `from` to `to`. */
static int propose_move(struct srv_js *js, struct srv_stream *st,
                        const char *from, const struct srv_jsc_member *to,
                        char *errmsg)
{
    struct srv_jsc_placement one;
    memset(&one, 0, sizeof one);
    memcpy(one.gid, st->gid.b, sizeof one.gid);
    one.n = 1;
    one.m[0] = *to;
    json_t *e = json_pack("{s:s, s:s, s:s}", "op", "move", "name", st->cfg.name,
                          "from", from);
    if (e == NULL || srv_jsc_placement_to_json(&one, e) != 0) {
        json_decref(e);
        return keel_err(KEEL_ENOMEM, errmsg, "move entry");
    }
    SRV_INFO("js", "stream %s: moving its replica off %s to %s", st->cfg.name,
             from, to->name);
    return srv_js_meta_propose(js, e, 0, errmsg);
}

/* A node to take one of st's replicas: up, not hosting it, with the tags
 * its placement asks for. */
static int replace_for(struct srv_js *js, const struct srv_stream *st,
                       struct srv_jsc_member *to, char *err)
{
    struct srv_tags want;
    srv_js_placement_tags(st->cfg.placement, &want);
    return srv_jsc_place_replacement(js->jc, &st->place, &want, to, err);
}

static const struct srv_jsc_member *placed_member(const struct srv_stream *st,
                                                  const char *name)
{
    for (uint32_t i = 0; i < st->place.n; i++) {
        if (strcmp(st->place.m[i].name, name) == 0) {
            return &st->place.m[i];
        }
    }
    return NULL;
}

static void stream_peer_remove(struct srv_js *js, const char *stream,
                               const json_t *body, const char *reply)
{
    static const char type[] = JS_TYPE "stream_remove_peer_response";
    char err[KEEL_ERRMSG_MAX];
    struct srv_stream *st = NULL;
    struct srv_jsc_member to;
    const char *peer = peer_of(js, body, reply, type);
    if (peer == NULL || !is_meta_leader(js, reply, type)) {
        return;
    }
    if (srv_js_find_stream(js, stream, &st) != 0) {
        reply_err(js, reply, type, SRV_JS_ESTREAM_NOT_FOUND, NULL);
        return;
    }
    if (st->place.n == 0 || placed_member(st, peer) == NULL) {
        reply_err(js, reply, type, SRV_JS_EPEER_NOT_MEMBER, NULL);
        return;
    }
    int rv = replace_for(js, st, &to, err);
    if (rv == 0) {
        rv = propose_move(js, st, peer, &to, err);
    }
    if (rv != 0) {
        reply_refused(js, reply, type, rv, err);
        return;
    }
    reply_ok(js, reply, type, NULL);
}

/* The stream's replica on this node, or answers err (why) and NULL. */
static struct replica *replica_or_err(struct srv_js *js, const char *reply,
                                      const char *type,
                                      const struct srv_stream *st,
                                      enum srv_js_err err, const char *why)
{
    if (st->r == NULL) {
        reply_err(js, reply, type, err, why);
    }
    return st->r;
}

/* The group a recover request names on this node: the stream's
 * ("stream") or the meta group; NULL after answering the error. */
static struct replica *recover_group(struct srv_js *js, const json_t *body,
                                     const char *reply, const char *type)
{
    const char *name = json_string_value(json_object_get(body, "stream"));
    struct srv_stream *st = NULL;
    if (name == NULL) {
        if (js->meta == NULL) {
            reply_err(js, reply, type, SRV_JS_ECLUSTER_REFUSED,
                      "this node has no meta group");
        }
        return js->meta;
    }
    if (srv_js_find_stream(js, name, &st) != 0) {
        reply_err(js, reply, type, SRV_JS_ESTREAM_NOT_FOUND, NULL);
        return NULL;
    }
    return replica_or_err(js, reply, type, st, SRV_JS_EPEER_NOT_MEMBER,
                          ": the stream has no replica on this node");
}

/* $KEEL.API.CLUSTER.RECOVER.SURVEY {"stream"?}: this node's view of one
 * group (answered here, never forwarded: the CLI asks every node). */
static void recover_survey(struct srv_js *js, const json_t *body,
                           const char *reply)
{
    static const char type[] = KEEL_TYPE "recover_survey_response";
    struct replica *r = recover_group(js, body, reply, type);
    struct replica_survey sv;
    if (r == NULL) {
        return;
    }
    replica_survey(r, &sv);
    json_t *o = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b}", "node",
        srv_js_self_name(js), "term", (json_int_t)sv.term, "last_index",
        (json_int_t)sv.last_index, "last_term", (json_int_t)sv.last_term,
        "commit", (json_int_t)sv.commit, "snapshot", (json_int_t)sv.snap_index,
        "faulty", (json_int_t)sv.faulty, "amnesiac", sv.amnesiac, "leader",
        sv.role == RAFT_LEADER);
    /* A stream replica's quarantined log, a candidate when it verifies
     * from index 1 (docs/decisions/0031-recover-reads-quarantined-logs.md;
     * the meta group never quarantines its log, decision 0024). */
    struct store_qlog q;
    char dir[STORE_PATH_BYTES_MAX];
    char err[KEEL_ERRMSG_MAX];
    bool stream = json_object_get(body, "stream") != NULL;
    int rv =
        stream ? replica_quarantine_survey(r, &q, dir, sizeof dir, err) : 0;
    if (o != NULL && stream && (rv != 0 || q.files > 0)) {
        json_object_set_new(o, "quarantine",
                            json_pack("{s:s, s:i, s:I, s:I, s:b, s:s}", "dir",
                                      dir, "files", (int)q.files, "last_index",
                                      (json_int_t)q.last_index, "last_term",
                                      (json_int_t)q.last_term, "usable",
                                      rv == 0 && q.last_index > 0, "why",
                                      rv == 0 ? q.why : err));
    }
    reply_ok(js, reply, type, o);
}

/* Restore this node's quarantined log through keep before the override
 * ("quarantine": true): only into an empty replica, through the install
 * path (srv_stream_restore_quarantined). The replica to recover, or NULL
 * after answering the error. */
static struct replica *recover_restore(struct srv_js *js, const json_t *body,
                                       uint64_t keep, struct store_qlog *q,
                                       const char *reply, const char *type)
{
    char err[KEEL_ERRMSG_MAX];
    struct srv_stream *st = NULL;
    const char *name = json_string_value(json_object_get(body, "stream"));
    if (name == NULL) {
        reply_err(js, reply, type, SRV_JS_ECLUSTER_REFUSED,
                  "only a stream's group restores a quarantined log (the "
                  "meta group never quarantines its log)");
        return NULL;
    }
    if (srv_js_find_stream(js, name, &st) != 0 || st->r == NULL) {
        reply_err(js, reply, type, SRV_JS_ESTREAM_NOT_FOUND, NULL);
        return NULL;
    }
    int rv = srv_stream_restore_quarantined(st, keep, q, err);
    if (rv != 0) {
        reply_refused(js, reply, type, rv, err);
        return NULL;
    }
    SRV_WARN("js",
             "operator recover of stream %s: quarantined log restored "
             "through index %" PRIu64 " (verified through %" PRIu64
             ", term %" PRIu64 ") by the install path",
             name, keep, q->last_index, q->last_term);
    return replica_or_err(js, reply, type, st, SRV_JS_ECLUSTER_REFUSED,
                          "the restored group did not open: see the server "
                          "log");
}

/* $KEEL.API.CLUSTER.RECOVER {"stream"?, "term", "keep", "accept_loss":
 * true}: replica_recover on this node's group. */
static void recover_apply(struct srv_js *js, const json_t *body,
                          const char *reply)
{
    static const char type[] = KEEL_TYPE "recover_response";
    char err[KEEL_ERRMSG_MAX];
    struct replica_recovered rec;
    json_int_t term = json_integer_value(json_object_get(body, "term"));
    json_int_t keep = json_integer_value(json_object_get(body, "keep"));
    if (!json_is_true(json_object_get(body, "accept_loss")) || term <= 0 ||
        keep < 0) {
        reply_err(js, reply, type, SRV_JS_ECLUSTER_REFUSED,
                  "recover needs {\"term\", \"keep\", \"accept_loss\": "
                  "true}");
        return;
    }
    struct replica *r = recover_group(js, body, reply, type);
    if (r == NULL) {
        return;
    }
    struct store_qlog q;
    memset(&q, 0, sizeof q);
    bool restore = json_is_true(json_object_get(body, "quarantine"));
    if (restore) {
        r = recover_restore(js, body, (uint64_t)keep, &q, reply, type);
        if (r == NULL) {
            return;
        }
    }
    /* The CLI's choice and its reason, logged here as on its screen. */
    const char *plan = json_string_value(json_object_get(body, "plan"));
    bool source = json_is_true(json_object_get(body, "source"));
    int rv =
        replica_recover(r, (uint64_t)term, (uint64_t)keep, source, &rec, err);
    if (rv != 0) {
        reply_refused(js, reply, type, rv, err);
        return;
    }
    SRV_WARN(
        "js",
        "operator recover (accept loss) of %s: term %" PRIu64
        ", %s log kept through %" PRIu64 ", %u records quarantined%s%s%s%.600s",
        json_string_value(json_object_get(body, "stream")) != NULL
            ? json_string_value(json_object_get(body, "stream"))
            : "the meta group",
        (uint64_t)term, restore ? "restored quarantined" : "live",
        (uint64_t)keep, rec.quarantined, rec.path[0] != '\0' ? " to " : "",
        rec.path, plan != NULL ? "; plan: " : "", plan != NULL ? plan : "");
    json_t *o = json_pack(
        "{s:s, s:i, s:s, s:s, s:I}", "node", srv_js_self_name(js),
        "quarantined", (int)rec.quarantined, "file", rec.path, "candidate",
        restore ? "quarantine" : "live", "kept", (json_int_t)keep);
    if (o != NULL && restore) {
        json_object_set_new(o, "restored", json_integer((json_int_t)keep));
    }
    if (o != NULL && plan != NULL) {
        json_object_set_new(o, "plan", json_string(plan));
    }
    reply_ok(js, reply, type, o);
}

bool srv_admin_request(struct srv_js *js, const char *subject, size_t slen,
                       const char *reply, const char *body, size_t len)
{
    static const char peer_remove[] = "$JS.API.STREAM.PEER.REMOVE.";
    const size_t prl = sizeof peer_remove - 1;
    if (slen > prl && slen - prl <= SRV_JS_NAME_BYTES_MAX &&
        memcmp(subject, peer_remove, prl) == 0) {
        char stream[SRV_JS_NAME_BYTES_MAX + 1];
        memcpy(stream, subject + prl, slen - prl);
        stream[slen - prl] = '\0';
        json_t *b = len > 0 ? json_loadb(body, len, 0, NULL) : json_object();
        if (reply != NULL && reply[0] != '\0' && b != NULL) {
            stream_peer_remove(js, stream, b, reply);
        }
        json_decref(b);
        return true;
    }
    static const struct {
        const char *subject;
        void (*fn)(struct srv_js *, const json_t *, const char *);
    } routes[] = {
        {"$KEEL.API.CLUSTER.PEER.ADD", peer_add},
        {"$KEEL.API.CLUSTER.PEER.INFO", peer_info},
        {"$JS.API.SERVER.REMOVE", server_remove},
        {"$JS.API.META.LEADER.STEPDOWN", meta_stepdown},
        {"$KEEL.API.CLUSTER.RECOVER.SURVEY", recover_survey},
        {"$KEEL.API.CLUSTER.RECOVER", recover_apply},
    };
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        if (strlen(routes[i].subject) != slen ||
            memcmp(routes[i].subject, subject, slen) != 0) {
            continue;
        }
        if (reply == NULL || reply[0] == '\0') {
            return true; /* nobody to answer: not acted on */
        }
        json_t *b = len > 0 ? json_loadb(body, len, 0, NULL) : json_object();
        if (b == NULL || !json_is_object(b)) {
            reply_err(js, reply, KEEL_TYPE "api_response",
                      SRV_JS_ECLUSTER_REFUSED, "the body is not a JSON object");
        } else {
            routes[i].fn(js, b, reply);
        }
        json_decref(b);
        return true;
    }
    return false;
}

/* The streams placed on a node just removed: {"name", "moves"} each, and
 * "why" when no node can take the replica now (it stays placed on the
 * removed node until one can; keel cluster remove-peer waits for the
 * others to move). */
static json_t *removed_streams(struct srv_js *js, const char *peer)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a != NULL && i < js->nstreams; i++) {
        struct srv_stream *st = js->streams[i];
        struct srv_jsc_member to;
        char err[KEEL_ERRMSG_MAX];
        if (placed_member(st, peer) == NULL) {
            continue;
        }
        bool moves = replace_for(js, st, &to, err) == 0;
        json_t *o =
            json_pack("{s:s, s:b}", "name", st->cfg.name, "moves", moves);
        if (o != NULL && !moves) {
            json_object_set_new(o, "why", json_string(err));
        }
        json_array_append_new(a, o);
    }
    return a;
}

void srv_admin_config_applied(struct srv_js *js, uint64_t index, uint64_t ctx)
{
    struct admin_pending *p = pending_find(js, ctx);
    if (js->jc != NULL) {
        srv_jsc_config_applied(js->jc, &js->meta_cfg);
    }
    if (p == NULL || p->index != index) {
        return;
    }
    const struct raft_server *s =
        member_of(&js->meta_cfg, srv_jsc_node_id(p->peer));
    json_t *o = s != NULL ? member_json(js, p->peer, s)
                          : json_pack("{s:s}", "peer", p->peer);
    if (s == NULL && o != NULL) {
        json_object_set_new(o, "streams", removed_streams(js, p->peer));
    }
    SRV_INFO("js", "meta group: change for %s committed at index %" PRIu64,
             p->peer, index);
    reply_ok(js, p->reply, p->type, o);
    pending_free(p);
}

/* Promote the meta group's learners that caught up (rule 4: raft refuses
 * the others; they are tried again at the next tick). */
static void promote_learners(struct srv_js *js)
{
    const struct raft_config *c = replica_config(js->meta);
    char err[KEEL_ERRMSG_MAX];
    for (uint32_t i = 0; i < c->n; i++) {
        if (c->servers[i].role != RAFT_LEARNER) {
            continue;
        }
        struct replica_change ch = {.op = RAFT_CHANGE_PROMOTE,
                                    .node = c->servers[i].node,
                                    .incarnation = c->servers[i].incarnation};
        uint64_t index = 0;
        const char *name = srv_jsc_name_of(js->jc, ch.node);
        if (replica_change(js->meta, &ch, 0, &index, err) == 0) {
            SRV_INFO("js",
                     "meta group: promoting %s to voter at index %" PRIu64,
                     name != NULL ? name : "?", index);
            return; /* one change at a time */
        }
        /* Not caught up (a learner killed mid-join): the next may be. */
    }
}

/* The meta leader applied every entry of its log: a change it proposed
 * took effect, so the next one may be chosen (one change at a time). */
static bool meta_log_applied(struct srv_js *js)
{
    struct replica_info ri;
    replica_info(js->meta, &ri);
    return ri.applied == ri.last_index;
}

/* Add the nodes that join through a solo seed (docs/design.md "Cluster
 * formation"), one change at a time, each once the previous change is
 * applied: a learner first (no effect on any majority), promoted by
 * promote_learners once caught up. A node of another meta group, or one
 * whose name is a member already (another incarnation: the operator's or
 * replace_reincarnated's business), is never added here. */
static void add_joiners(struct srv_js *js)
{
    char name[SRV_JSC_NAME_BYTES];
    char err[KEEL_ERRMSG_MAX];
    raft_incarnation inc = 0;
    const struct raft_config *c = replica_config(js->meta);
    if (!meta_log_applied(js) ||
        !srv_jsc_next_joiner(js->jc, c, name, sizeof name, &inc)) {
        return;
    }
    struct replica_change ch = {.op = RAFT_CHANGE_ADD_LEARNER,
                                .node = srv_jsc_node_id(name),
                                .incarnation = inc};
    uint64_t index = 0;
    ASSERT(raft_config_find(c, ch.node) == NULL);
    if (replica_change(js->meta, &ch, 0, &index, err) == 0) {
        SRV_INFO("js",
                 "meta group: adding %s, which joins through its seed, as a "
                 "learner at index %" PRIu64,
                 name, index);
    }
}

/* Finding F14: a node that came back with another data directory (its
 * meta.lmdb reset, rule 3, or its disk replaced) is a new incarnation the
 * meta group does not know, and its old incarnation never votes again; it
 * stayed outside every group until an operator removed and added it, and
 * its clients had no JetStream. The meta leader now does what the
 * operator would (docs/operations.md "Replace a node"): remove the old
 * incarnation, then add the new one as a learner (promote_learners and
 * move_off_misplaced do the rest). One change at a time, only with the meta
 * log applied; only a node that is linked, reports the other incarnation
 * and is not this one. */
static void replace_reincarnated(struct srv_js *js)
{
    struct srv_admin *a = js->admin;
    char err[KEEL_ERRMSG_MAX];
    const struct raft_config *c = replica_config(js->meta);
    if (!meta_log_applied(js)) {
        return;
    }
    for (uint32_t i = 0; i < c->n; i++) {
        const struct raft_server *s = &c->servers[i];
        const char *name = srv_jsc_name_of(js->jc, s->node);
        struct srv_jsc_peer_report rep;
        if (s->node == srv_jsc_self_node(js->jc) || name == NULL ||
            !srv_jsc_peer_report(js->jc, name, &rep) || !rep.up ||
            rep.inc == s->incarnation ||
            (rep.state != SRV_JSC_WAITING && rep.state != SRV_JSC_MEMBER)) {
            continue;
        }
        struct replica_change ch = {.op = RAFT_CHANGE_REMOVE,
                                    .node = s->node,
                                    .incarnation = s->incarnation};
        uint64_t index = 0;
        char keep[SRV_JSC_NAME_BYTES];
        snprintf(keep, sizeof keep, "%s", name);
        if (replica_change(js->meta, &ch, 0, &index, err) != 0) {
            return; /* e.g. another change in flight: next tick */
        }
        SRV_WARN("js",
                 "meta group: %s came back with another data directory "
                 "(incarnation %016" PRIx64 ", was %016" PRIx64
                 "): removing the old one at index %" PRIu64
                 ", then adding it again as a learner",
                 keep, rep.inc, s->incarnation, index);
        for (size_t k = 0; k < RAFT_SERVERS_MAX; k++) {
            if (a->readd[k][0] == '\0') {
                snprintf(a->readd[k], sizeof a->readd[k], "%s", keep);
                break;
            }
        }
        return;
    }
    /* A meta leader elected between the removal and the add has no
     * readd entry: a stream placement naming the node with its old
     * incarnation says it was a member too. */
    for (uint32_t i = 0; i < js->nstreams; i++) {
        const struct srv_stream *st = js->streams[i];
        for (uint32_t m = 0; m < st->place.n; m++) {
            const struct srv_jsc_member *pm = &st->place.m[m];
            struct srv_jsc_peer_report rep;
            if (member_of(c, pm->node) != NULL ||
                !srv_jsc_peer_report(js->jc, pm->name, &rep) ||
                rep.inc == pm->inc) {
                continue;
            }
            for (size_t k = 0; k < RAFT_SERVERS_MAX; k++) {
                if (strcmp(a->readd[k], pm->name) == 0) {
                    break;
                }
                if (a->readd[k][0] == '\0') {
                    snprintf(a->readd[k], sizeof a->readd[k], "%s", pm->name);
                    break;
                }
            }
        }
    }
    for (size_t k = 0; k < RAFT_SERVERS_MAX; k++) {
        struct srv_jsc_peer_report rep;
        const char *name = a->readd[k];
        if (name[0] == '\0' || member_of(c, srv_jsc_node_id(name)) != NULL) {
            a->readd[k][0] = '\0'; /* added (by us or an operator) */
            continue;
        }
        if (!srv_jsc_peer_report(js->jc, name, &rep) || !rep.up ||
            (rep.state != SRV_JSC_WAITING && rep.state != SRV_JSC_MEMBER)) {
            continue; /* not linked now: later */
        }
        struct replica_change ch = {.op = RAFT_CHANGE_ADD_LEARNER,
                                    .node = srv_jsc_node_id(name),
                                    .incarnation = rep.inc};
        uint64_t index = 0;
        if (replica_change(js->meta, &ch, 0, &index, err) == 0) {
            SRV_INFO("js",
                     "meta group: adding %s (incarnation %016" PRIx64
                     ") as a learner at index %" PRIu64,
                     name, rep.inc, index);
        }
        return;
    }
}

/* Why m, a replica of st, must move (NULL: it stays): its node left the
 * meta group or came back with another disk, or it does not carry every
 * tag st's placement asks for (an update changed them). A node whose tags
 * are not known now (down, not reported yet) keeps its replica. */
static const char *must_move(struct srv_js *js, const struct raft_config *c,
                             const struct srv_tags *want,
                             const struct srv_jsc_member *m)
{
    const struct raft_server *s = member_of(c, m->node);
    if (s == NULL) {
        return "removed node";
    }
    if (s->incarnation != m->inc) {
        return "node with a new data directory,";
    }
    const struct srv_tags *t = srv_jsc_tags_of(js->jc, m->name);
    if (want->n > 0 && t != NULL && !srv_tags_match(t, want)) {
        return "node without the placement's tags,";
    }
    return NULL;
}

/* The meta leader: a replica that must move (must_move) gets a
 * replacement, one move per tick, only while the meta log is applied: a
 * proposed move must apply before the next is chosen. */
static void move_off_misplaced(struct srv_js *js)
{
    char err[KEEL_ERRMSG_MAX];
    const struct raft_config *c = replica_config(js->meta);
    if (!meta_log_applied(js)) {
        return;
    }
    for (uint32_t i = 0; i < js->nstreams; i++) {
        struct srv_stream *st = js->streams[i];
        struct srv_tags want;
        srv_js_placement_tags(st->cfg.placement, &want);
        for (uint32_t k = 0; k < st->place.n; k++) {
            struct srv_jsc_member to;
            const struct srv_jsc_member *m = &st->place.m[k];
            const char *why = must_move(js, c, &want, m);
            if (why == NULL) {
                continue;
            }
            int rv = replace_for(js, st, &to, err);
            if (rv == 0) {
                rv = propose_move(js, st, m->name, &to, err);
            }
            if (rv == 0 && member_of(c, m->node) != NULL &&
                member_of(c, m->node)->incarnation != m->inc) {
                /* Finding F21: the replica's disk is gone; the new one
                 * catches up from the others (an empty log, decision 0024). */
                SRV_WARN("js",
                         "stream %s: its replica on %s was placed on data "
                         "directory %016" PRIx64 ", which %s no longer has "
                         "(now %016" PRIx64 "): placed again on %s, which "
                         "catches up from the other replicas",
                         st->cfg.name, m->name, m->inc, m->name,
                         member_of(c, m->node)->incarnation, to.name);
            }
            uint64_t now = uv_now(js->loop);
            if (rv != 0 && now - js->admin->warned_ms >= ADMIN_WARN_MS) {
                js->admin->warned_ms = now;
                SRV_WARN("js", "stream %s keeps its replica on %s %s: %s",
                         st->cfg.name, why, m->name, err);
            }
            return;
        }
    }
}

/* The stream leader carries out its placement (docs/design.md §3.2 M5): a
 * placed node missing from the group is added as a learner, a caught-up
 * learner promoted, and a voter no longer placed removed once every
 * placed node votes (the leader hands over first). One change a tick. */
static void stream_reconcile(struct srv_stream *st)
{
    const struct raft_config *c = replica_config(st->r);
    char err[KEEL_ERRMSG_MAX];
    uint64_t index = 0;
    struct replica_change ch = {0};
    bool all_vote = true;
    for (uint32_t i = 0; i < st->place.n && ch.op == 0; i++) {
        const struct srv_jsc_member *m = &st->place.m[i];
        const struct raft_server *s = raft_config_find(c, m->node);
        if (s == NULL) {
            ch = (struct replica_change){.op = RAFT_CHANGE_ADD_LEARNER,
                                         .node = m->node,
                                         .incarnation = m->inc};
        } else if (s->role == RAFT_LEARNER && s->incarnation == m->inc) {
            ch = (struct replica_change){.op = RAFT_CHANGE_PROMOTE,
                                         .node = m->node,
                                         .incarnation = m->inc};
        }
        all_vote = all_vote && s != NULL && s->role == RAFT_VOTER;
    }
    for (uint32_t i = 0; i < c->n && ch.op == 0 && all_vote; i++) {
        const struct raft_server *s = &c->servers[i];
        bool placed = false;
        for (uint32_t k = 0; k < st->place.n; k++) {
            placed = placed || (st->place.m[k].node == s->node &&
                                st->place.m[k].inc == s->incarnation);
        }
        if (placed) {
            continue;
        }
        if (s->node == srv_jsc_self_node(st->js->jc)) {
            if (replica_transfer_leader(st->r, 0, err) == 0) {
                SRV_INFO("js",
                         "stream %s: handing leadership over before "
                         "leaving the group",
                         st->cfg.name);
            }
            return;
        }
        ch = (struct replica_change){.op = RAFT_CHANGE_REMOVE,
                                     .node = s->node,
                                     .incarnation = s->incarnation};
    }
    if (ch.op == 0) {
        return;
    }
    int rv = replica_change(st->r, &ch, 0, &index, err);
    const char *name = srv_jsc_name_of(st->js->jc, ch.node);
    const char *what = ch.op == RAFT_CHANGE_ADD_LEARNER ? "adding learner"
                       : ch.op == RAFT_CHANGE_PROMOTE   ? "promoting"
                                                        : "removing";
    struct srv_admin *a = admin_of(st->js);
    uint64_t now = uv_now(st->js->loop);
    if (rv == 0) {
        SRV_INFO("js", "stream %s: %s %s at index %" PRIu64, st->cfg.name, what,
                 name != NULL ? name : "?", index);
    } else if (a != NULL && now - a->waited_ms >= ADMIN_WAIT_NOTE_MS) {
        a->waited_ms = now;
        SRV_INFO("js", "stream %s: %s %s waits: %s", st->cfg.name, what,
                 name != NULL ? name : "?", err);
    }
}

void srv_admin_tick(struct srv_js *js)
{
    struct srv_admin *a = js->admin;
    uint64_t now = uv_now(js->loop);
    for (size_t i = 0; a != NULL && i < ADMIN_PENDING_MAX; i++) {
        struct admin_pending *p = &a->p[i];
        if (p->ctx != 0 && now >= p->deadline_ms) {
            reply_err(js, p->reply, p->type, SRV_JS_ECLUSTER_BUSY,
                      "the change did not commit in time (a leader change, "
                      "or no majority): check the membership and retry");
            pending_free(p);
        }
    }
    if (js->jc == NULL) {
        return;
    }
    if (srv_js_is_meta_leader(js) && admin_of(js) != NULL) {
        replace_reincarnated(js);
        add_joiners(js);
        promote_learners(js);
        move_off_misplaced(js);
    }
    for (uint32_t i = 0; i < js->nstreams; i++) {
        struct srv_stream *st = js->streams[i];
        if (st->r != NULL && st->place.n > 0 && srv_stream_is_leader(st)) {
            stream_reconcile(st);
        } else if (st->r != NULL && st->place.n > 0) {
            srv_stream_cluster_depose(st);
        }
    }
}

void srv_admin_free(struct srv_js *js)
{
    struct srv_admin *a = js->admin;
    for (size_t i = 0; a != NULL && i < ADMIN_PENDING_MAX; i++) {
        free(a->p[i].reply);
    }
    free(a);
    js->admin = NULL;
}
