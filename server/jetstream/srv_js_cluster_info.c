/* The "cluster" block of stream and consumer info (docs/protocol.md §2.4): the
 * cluster name, the group's leader and its followers as the leader sees
 * them. INFO is answered by the stream leader (srv_js_forward.h), so every
 * node that asks gets the same block. Standalone: {"leader": <name>}. */
#include "srv_js_forward.h"

#include <string.h>

#include "srv_cluster.h"
#include "srv_js_int.h"
#include "srv_server.h"

/* One follower: name, current, active (ns since the leader last heard
 * from it), lag (entries behind), offline when no link to it. */
static json_t *replica_json(const struct srv_stream_peer *p)
{
    json_t *o = json_pack("{s:s, s:b, s:I, s:I}", "name", p->name, "current",
                          p->current, "active", (json_int_t)p->active_ns, "lag",
                          (json_int_t)p->lag);
    if (o != NULL && p->offline) {
        json_object_set_new(o, "offline", json_true());
    }
    return o;
}

/* The leader's group configuration is not (yet) the placement: every
 * placed (node, incarnation) a voter and nobody else (a move under way). */
static bool reconfiguring(const struct srv_stream *st)
{
    if (st->r == NULL || !srv_stream_is_leader(st)) {
        return false;
    }
    const struct raft_config *c = replica_config(st->r);
    if (c->n != st->place.n) {
        return true;
    }
    for (uint32_t i = 0; i < st->place.n; i++) {
        const struct raft_server *s = raft_config_find(c, st->place.m[i].node);
        if (s == NULL || s->role != RAFT_VOTER ||
            s->incarnation != st->place.m[i].inc) {
            return true;
        }
    }
    return false;
}

json_t *srv_js_cluster_info_json(struct srv_js *js, const struct srv_stream *st)
{
    struct srv_stream_peer peers[SRV_JS_REPLICAS_MAX];
    size_t n = 0;
    const char *leader = srv_stream_leader_name(st);
    if (!srv_js_clustered(js)) {
        return json_pack("{s:s}", "leader", srv_js_self_name(js));
    }
    struct srv_cluster *cl = srv_js_server(js)->cluster;
    json_t *o = json_object();
    json_t *reps = json_array();
    if (o == NULL || reps == NULL ||
        srv_stream_peers(st, peers, SRV_JS_REPLICAS_MAX, &n) != 0) {
        json_decref(o);
        json_decref(reps);
        return NULL;
    }
    ASSERT(n <= SRV_JS_REPLICAS_MAX);
    json_object_set_new(o, "name", json_string(cl != NULL ? cl->name : ""));
    if (leader != NULL) {
        json_object_set_new(o, "leader", json_string(leader));
    }
    for (size_t i = 0; i < n; i++) {
        if (!peers[i].leader) {
            json_array_append_new(reps, replica_json(&peers[i]));
        }
    }
    json_object_set_new(o, "replicas", reps);
    if (reconfiguring(st)) {
        json_object_set_new(o, "reconfiguring", json_true());
    }
    return o;
}
