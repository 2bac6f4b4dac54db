/* srv_js_cluster_stream: the clustered side of a stream's group (docs/design.md
 * §3.2 M5): placement recorded at open, the index-1
 * configuration of placed nodes, the leader directory entry, and the
 * accessors the forwarding layer and stream info use. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_forward.h"
#include "srv_js_int.h"
#include "srv_log.h"
#include "srv_parser.h"

/* How long a group must have been led by a node out of the meta group
 * before a placed follower asks it to hand over, and how often it asks
 * again: a few election timeouts, so a leader that just lost its meta
 * membership mid-hand-over (it applied the move, decision 0022) finishes
 * first. */
#define DEPOSE_AFTER_MS (3 * SRV_JSC_ELECTION_MS)

void srv_stream_cluster_place(struct srv_stream *st,
                              const struct srv_jsc_placement *pl)
{
    struct srv_jsc *jc = st->js->jc;
    if (pl == NULL || pl->n == 0) {
        st->placed = true; /* a group of one on this node */
        return;
    }
    if (jc == NULL) {
        /* Never open a fresh group of one in place of a replicated one:
         * the stream would look empty. */
        SRV_ERROR("js",
                  "stream %s is replicated across a cluster: start keeld "
                  "with --cluster, -n and --routes to serve it",
                  st->cfg.name);
        st->placed = false;
        st->failed = true; /* not served here: refuse, never look empty */
        return;
    }
    ASSERT(pl->n <= SRV_JS_REPLICAS_MAX);
    st->place = *pl;
    memcpy(st->gid.b, pl->gid, sizeof st->gid.b);
    st->placed = false;
    for (uint32_t i = 0; i < pl->n; i++) {
        if (pl->m[i].node != srv_jsc_self_node(jc)) {
            continue;
        }
        if (pl->m[i].inc != st->js->inc) {
            /* Placed on this node's previous data directory: never
             * bootstrap a group on a disk that is not the one placed. */
            SRV_ERROR("js",
                      "stream %s was placed on this node's data directory "
                      "of incarnation %016" PRIx64 ", this one is %016" PRIx64
                      ": not opening its group here (the meta leader "
                      "places that replica again)",
                      st->cfg.name, pl->m[i].inc, st->js->inc);
            return;
        }
        st->placed = true;
    }
}

int srv_stream_cluster_opts(struct srv_stream *st, struct raft_config *rc,
                            struct replica_options *opt, char *errmsg)
{
    struct srv_jsc *jc = st->js->jc;
    ASSERT(jc != NULL && st->placed);
    ASSERT(st->place.n > 0 && st->place.n <= SRV_JS_REPLICAS_MAX);
    memset(rc, 0, sizeof *rc);
    for (uint32_t i = 0; i < st->place.n; i++) {
        rc->servers[rc->n++] =
            (struct raft_server){.node = st->place.m[i].node,
                                 .incarnation = st->place.m[i].inc,
                                 .role = RAFT_VOTER};
    }
    opt->self = srv_jsc_self_node(jc);
    opt->bootstrap = rc;
    for (uint32_t i = 0; i < st->place.n; i++) {
        if (st->place.m[i].added) {
            /* The index-1 configuration is not the placement any more: an
             * empty log waits for the leader (a voter that lost its group
             * directory is brought back by AppendEntries from index 1). */
            opt->bootstrap = NULL;
        }
    }
    opt->election_timeout_ms = SRV_JSC_ELECTION_MS;
    opt->heartbeat_ms = SRV_JSC_HEARTBEAT_MS;
    opt->align_heartbeats = true; /* one heartbeat frame per peer and tick */
    opt->seed ^= opt->self;
    /* With peers a replica whose log continues no valid snapshot opens
     * empty and amnesiac, its log quarantined, and a leader restores it by
     * InstallSnapshot; a group of one keeps the refusal (nobody could). */
    opt->heal_by_install = st->place.n > 1;
    int rv = srv_jsc_group_register(jc, st->gid.b, &st->r);
    if (rv != 0) {
        return keel_err(rv, errmsg, "stream %s: group transport", st->cfg.name);
    }
    return 0;
}

void srv_stream_cluster_move(struct srv_stream *st, const json_t *e)
{
    struct srv_js *js = st->js;
    struct srv_jsc_placement to;
    const char *from = json_string_value(json_object_get(e, "from"));
    if (js->jc == NULL || from == NULL ||
        srv_jsc_placement_from_json(e, &to) != 0 || to.n != 1 ||
        memcmp(to.gid, st->gid.b, sizeof to.gid) != 0) {
        SRV_WARN("js", "stream %s: malformed move entry ignored", st->cfg.name);
        return;
    }
    uint32_t k = st->place.n;
    for (uint32_t i = 0; i < st->place.n; i++) {
        if (strcmp(st->place.m[i].name, from) == 0) {
            k = i;
        }
        if (st->place.m[i].node == to.m[0].node &&
            st->place.m[i].inc == to.m[0].inc) {
            return; /* placed there already: nothing moves */
        }
    }
    if (k == st->place.n) {
        return; /* moved already (the same on every node) */
    }
    struct srv_jsc_placement pl = st->place;
    pl.m[k] = to.m[0];
    pl.m[k].added = true;
    SRV_INFO("js", "stream %s: replica moves from %s to %s", st->cfg.name, from,
             to.m[0].name);
    srv_stream_cluster_replace(st, &pl);
}

void srv_stream_cluster_replace(struct srv_stream *st,
                                const struct srv_jsc_placement *pl)
{
    struct srv_js *js = st->js;
    char err[KEEL_ERRMSG_MAX];
    ASSERT(js->jc != NULL && pl->n > 0 && pl->n <= SRV_JS_REPLICAS_MAX);
    ASSERT(memcmp(pl->gid, st->gid.b, sizeof pl->gid) == 0);
    st->place = *pl;
    srv_js_meta_learn(js, pl);
    bool here = false;
    for (uint32_t i = 0; i < pl->n; i++) {
        here = here || (pl->m[i].node == srv_jsc_self_node(js->jc) &&
                        pl->m[i].inc == js->inc);
    }
    if (!here || st->r != NULL) {
        return; /* a node that left keeps its group until removed */
    }
    st->placed = true;
    if (srv_stream_open_replica(st, err) != 0) {
        SRV_ERROR("js", "stream %s: group not opened: %s", st->cfg.name, err);
        st->placed = false;
        st->failed = true;
    }
}

/* Is node (any incarnation) one of pl's members? */
static bool names_node(const struct srv_jsc_placement *pl, raft_node node)
{
    for (uint32_t i = 0; i < pl->n; i++) {
        if (pl->m[i].node == node) {
            return true;
        }
    }
    return false;
}

/* Finding F21, the F13 residual (docs/faults.md): a node removed from the
 * meta group gets no further meta entry. If it leads the stream's group
 * (its replica stayed placed there while no node could take it and moved
 * once one was added, or a transfer made it leader right after the meta
 * leader checked), it never learns that its replica moved and leads on
 * with itself placed: the new replica is never added and the stream never
 * settles (decision 0038). A placed
 * follower knows both the placement and the meta configuration: when the
 * leader is in neither for DEPOSE_AFTER_MS, it asks that leader, over the
 * cluster link the removal left, to hand its leadership over to this node
 * (a stream step-down naming it preferred, as `keel cluster
 * transfer-leader --stream --to` sends). The new leader carries out the
 * placement: the moved replica is added and the removed node's taken out
 * of the group (docs/cluster.md "Membership changes"). */
void srv_stream_cluster_depose(struct srv_stream *st)
{
    struct srv_js *js = st->js;
    struct srv_jsc *jc = js->jc;
    raft_node l = st->leader_node;
    bool here = false;
    for (uint32_t i = 0; jc != NULL && i < st->place.n; i++) {
        here = here || (st->place.m[i].node == srv_jsc_self_node(jc) &&
                        st->place.m[i].inc == js->inc);
    }
    if (!here || st->r == NULL || srv_stream_is_leader(st) || l == 0 ||
        js->meta_cfg.n == 0 || names_node(&st->place, l) ||
        raft_config_find(&js->meta_cfg, l) != NULL) {
        st->depose_since_ms = 0;
        return;
    }
    uint64_t now = uv_now(js->loop);
    if (st->depose_since_ms == 0) {
        st->depose_since_ms = now;
    }
    const char *name = srv_jsc_name_of(jc, l);
    if (name == NULL || now - st->depose_since_ms < DEPOSE_AFTER_MS ||
        now - st->depose_asked_ms < DEPOSE_AFTER_MS) {
        return;
    }
    st->depose_asked_ms = now;
    char subject[64 + SRV_JS_NAME_BYTES_MAX];
    char body[64 + SRV_JSC_NAME_BYTES];
    static const char reply[] = "_KEEL.DEPOSE"; /* nobody reads the answer */
    int slen = snprintf(subject, sizeof subject,
                        "$JS.API.STREAM.LEADER.STEPDOWN.%s", st->cfg.name);
    int blen =
        snprintf(body, sizeof body, "{\"placement\":{\"preferred\":\"%s\"}}",
                 srv_js_self_name(js));
    ASSERT(slen > 0 && (size_t)slen < sizeof subject);
    ASSERT(blen > 0 && (size_t)blen < sizeof body);
    struct srv_cmd cmd = {.op = SRV_OP_PUB,
                          .subject = {subject, (size_t)slen},
                          .reply = {reply, sizeof reply - 1},
                          .total_bytes = (size_t)blen,
                          .payload = body};
    int rv = srv_js_fwd_send(js, name, &cmd);
    SRV_WARN("js",
             "stream %s: its leader %s is out of the meta group and cannot "
             "learn the stream's placement (finding F21): %s",
             st->cfg.name, name,
             rv == 0 ? "asked it to hand its leadership over to this node"
                     : "no link to it now, asking again later");
}

void srv_stream_cluster_close(struct srv_stream *st)
{
    if (st->js->jc != NULL && st->place.n > 0) {
        srv_jsc_group_unregister(st->js->jc, st->gid.b);
    }
}

void srv_stream_role_cluster(struct srv_stream *st, struct replica *r,
                             raft_node leader)
{
    struct replica_info ri;
    struct srv_jsc *jc = st->js->jc;
    replica_info(r, &ri);
    st->leader_node = leader;
    st->leader_term = ri.term;
    if (jc == NULL || st->place.n == 0) {
        return;
    }
    srv_jsc_led(jc, st->gid.b, ri.term, st->leader);
    if (!st->leader) {
        srv_jsc_leader_seen(jc, st->gid.b, ri.term, leader);
    }
}

bool srv_stream_is_placed_here(const struct srv_stream *st)
{
    return st->placed;
}

const char *srv_stream_leader_name(const struct srv_stream *st)
{
    struct srv_jsc *jc = st->js->jc;
    if (srv_stream_is_leader(st)) {
        return srv_js_self_name(st->js);
    }
    if (jc == NULL || st->place.n == 0) {
        return NULL;
    }
    if (st->r != NULL && st->leader_node != 0) {
        return srv_jsc_name_of(jc, st->leader_node);
    }
    return srv_jsc_leader_name(jc, st->gid.b);
}

/* The leader's view of member m into out (current/active/lag). */
static void peer_progress(const struct srv_stream *st, raft_node node,
                          struct srv_stream_peer *out)
{
    struct replica_peer rp[RAFT_SERVERS_MAX];
    struct replica_info ri;
    if (st->r == NULL || !srv_stream_is_leader(st)) {
        return;
    }
    replica_info(st->r, &ri);
    size_t n = replica_peers(st->r, rp, RAFT_SERVERS_MAX);
    for (size_t i = 0; i < n; i++) {
        if (rp[i].node != node) {
            continue;
        }
        out->lag =
            rp[i].match < ri.last_index ? ri.last_index - rp[i].match : 0;
        out->current = out->lag == 0 && rp[i].active;
        out->active_ns =
            rp[i].since_ms == UINT64_MAX ? 0 : rp[i].since_ms * 1000 * 1000;
    }
}

int srv_stream_peers(const struct srv_stream *st, struct srv_stream_peer *out,
                     size_t max, size_t *n)
{
    struct srv_jsc *jc = st->js->jc;
    const char *leader = srv_stream_leader_name(st);
    *n = 0;
    if (jc == NULL || st->place.n == 0) {
        if (max > 0) {
            memset(&out[0], 0, sizeof out[0]);
            snprintf(out[0].name, sizeof out[0].name, "%s",
                     srv_js_self_name(st->js));
            out[0].leader = srv_stream_is_leader(st);
            out[0].current = true;
            *n = 1;
        }
        return 0;
    }
    for (uint32_t i = 0; i < st->place.n && *n < max; i++) {
        struct srv_stream_peer *p = &out[(*n)++];
        memset(p, 0, sizeof *p);
        snprintf(p->name, sizeof p->name, "%s", st->place.m[i].name);
        p->leader = leader != NULL && strcmp(leader, p->name) == 0;
        p->offline = !srv_jsc_peer_up(jc, p->name);
        if (p->leader) {
            p->current = true;
            continue;
        }
        peer_progress(st, st->place.m[i].node, p);
    }
    return 0;
}
