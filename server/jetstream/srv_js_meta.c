/* srv_js_meta: the clustered side of the meta group (docs/design.md §3): open
 * or wait for bootstrap, placement of new streams at propose time, the leader
 * directory entry of the meta group, and the accessors other modules use to
 * find the meta leader. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "keel/error.h"
#include "srv_config.h"
#include "srv_js_int.h"
#include "srv_log.h"
#include "srv_server.h"

void srv_js_meta_gid(struct store_group_id *gid)
{
    static const char tag[] = "keel-js-meta";
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(tag, sizeof tag - 1));
    memcpy(gid->b, c.digest, sizeof gid->b);
}

/* Has this data directory a meta group log (at least one segment)? A
 * directory without segments never made the index-1 entry durable. */
static bool meta_on_disk(const char *store_dir)
{
    struct store_group_id gid;
    char hex[33];
    char path[PATH_MAX];
    srv_js_meta_gid(&gid);
    store_group_id_hex(&gid, hex);
    int n = snprintf(path, sizeof path, "%s/js/groups/%s/log", store_dir, hex);
    if (n < 0 || (size_t)n >= sizeof path) {
        return false;
    }
    DIR *d = opendir(path);
    if (d == NULL) {
        return false;
    }
    bool found = false;
    struct dirent *e;
    /* Bounded by the directory's entries. */
    while (!found && (e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        found = len > 4 && strcmp(e->d_name + len - 4, ".blk") == 0;
    }
    closedir(d);
    return found;
}

int srv_js_cluster_open(struct srv_js *js, const char *store_dir, char *errmsg)
{
    const struct srv_config *c = js->srv->cfg;
    bool member = meta_on_disk(store_dir);
    int rv = srv_jsc_create(js, c->name, js->inc, c->routes, member, &js->jc,
                            errmsg);
    if (rv == 0 && member) {
        SRV_INFO("js", "JetStream meta group found on disk: opening it");
        rv = srv_js_meta_bootstrap(js, NULL, errmsg);
    } else if (rv == 0) {
        SRV_INFO("js", "empty JetStream data directory: the meta group is "
                       "created once every seed of --routes is connected "
                       "and empty");
    }
    return rv;
}

static void meta_send(struct replica *r, const struct raft_msg *m, void *arg)
{
    struct srv_js *js = arg;
    struct store_group_id gid;
    (void)r;
    srv_js_meta_gid(&gid);
    srv_jsc_send(js->jc, gid.b, m);
}

int srv_js_meta_cluster_opts(struct srv_js *js, const struct raft_config *boot,
                             struct replica_options *opt,
                             struct replica_callbacks *cbs, char *errmsg)
{
    struct store_group_id gid;
    ASSERT(js->jc != NULL);
    ASSERT(js->meta == NULL);
    srv_js_meta_gid(&gid);
    opt->self = srv_jsc_self_node(js->jc);
    opt->bootstrap = boot;
    opt->election_timeout_ms = SRV_JSC_ELECTION_MS;
    opt->heartbeat_ms = SRV_JSC_HEARTBEAT_MS;
    opt->align_heartbeats = true; /* one heartbeat frame per peer and tick */
    opt->seed ^= opt->self;
    /* Never heal_by_install: the meta log is kept from index 1 (no cuts),
     * so it continues no snapshot only after losing its beginning with
     * both snapshots bad. Opened empty, this node would know no stream
     * until the install: every stream it hosts unopened and "stream not
     * found" answered for streams that exist. Refused instead (the node
     * says why); an operator moves the data directory (a new incarnation
     * the meta leader replaces, docs/decisions/0015). */
    opt->heal_by_install = false;
    cbs->send = meta_send;
    int rv = srv_jsc_group_register(js->jc, gid.b, &js->meta);
    if (rv != 0 && rv != KEEL_EEXIST) {
        return keel_err(rv, errmsg, "meta group transport");
    }
    return 0;
}

void srv_js_meta_role_cluster(struct srv_js *js, struct replica *r,
                              raft_node leader)
{
    struct store_group_id gid;
    struct replica_info ri;
    js->meta_leader_node = leader;
    if (js->jc == NULL) {
        return;
    }
    srv_js_meta_gid(&gid);
    replica_info(r, &ri);
    srv_jsc_led(js->jc, gid.b, ri.term, js->meta_leader);
    if (!js->meta_leader) {
        srv_jsc_leader_seen(js->jc, gid.b, ri.term, leader);
    }
}

void srv_js_placement_tags(const json_t *placement, struct srv_tags *out)
{
    char ignored[KEEL_ERRMSG_MAX];
    /* The request check (srv_stream_request_check) refused bad tags. */
    if (srv_tags_parse(json_object_get(placement, "tags"), out, ignored) != 0) {
        memset(out, 0, sizeof *out);
    }
}

/* Would the members of pl whose tags match want, and the matching voters
 * up besides them, hold r replicas? An update to tags no r nodes carry is
 * refused as nats-server refuses it, before anything moves. */
static int tags_placeable(struct srv_js *js, const struct srv_jsc_placement *pl,
                          const struct srv_tags *want, uint32_t r, char *errmsg)
{
    struct srv_jsc_placement keep = {.n = 0};
    for (uint32_t i = 0; i < pl->n; i++) {
        const struct srv_tags *t = srv_jsc_tags_of(js->jc, pl->m[i].name);
        if (t != NULL && srv_tags_match(t, want)) {
            keep.m[keep.n++] = pl->m[i];
        }
    }
    /* Placement with keep as the skip list counts the others. */
    while (keep.n < r) {
        int rv = srv_jsc_place_replacement(js->jc, &keep, want, &keep.m[keep.n],
                                           errmsg);
        if (rv != 0) {
            return rv;
        }
        keep.n++;
    }
    return 0;
}

/* An update changing num_replicas to r: the new placement keeps the
 * members it can (the stream's leader last), adds the least loaded free
 * voters whose tags match the config's, and is marked changed (no member
 * bootstraps any more). A change of tags alone moves the replicas that no
 * longer match later, one at a time (srv_admin_tick). */
static int replace_placement(struct srv_js *js, json_t *entry, uint32_t r,
                             char *errmsg)
{
    struct srv_stream *st = NULL;
    struct srv_tags want;
    const char *name = json_string_value(json_object_get(entry, "name"));
    if (name == NULL || srv_js_find_stream(js, name, &st) != 0 ||
        st->place.n == 0) {
        return 0;
    }
    struct srv_tags had;
    srv_js_placement_tags(
        json_object_get(json_object_get(entry, "config"), "placement"), &want);
    srv_js_placement_tags(st->cfg.placement, &had);
    /* Unchanged tags are not checked again: a member that is down (its
     * tags unknown) must not block an update of other fields. */
    bool same = srv_tags_match(&had, &want) && srv_tags_match(&want, &had);
    int trv = same ? 0 : tags_placeable(js, &st->place, &want, r, errmsg);
    if (trv != 0 || st->place.n == r) {
        return trv;
    }
    struct srv_jsc_placement pl = st->place;
    const char *leader = srv_stream_leader_name(st);
    while (pl.n > r) {
        uint32_t k = pl.n - 1;
        if (leader != NULL && strcmp(pl.m[k].name, leader) == 0) {
            k--; /* r >= 1: another member is left to drop */
        }
        memmove(&pl.m[k], &pl.m[k + 1], (pl.n - k - 1) * sizeof pl.m[0]);
        pl.n--;
    }
    while (pl.n < r) {
        int rv =
            srv_jsc_place_replacement(js->jc, &pl, &want, &pl.m[pl.n], errmsg);
        if (rv != 0) {
            return rv;
        }
        pl.n++;
    }
    for (uint32_t i = 0; i < pl.n; i++) {
        pl.m[i].added = true;
    }
    SRV_INFO("js", "stream %s: %u replicas asked, placement changes", name, r);
    return srv_jsc_placement_to_json(&pl, entry);
}

int srv_js_meta_place(struct srv_js *js, json_t *entry, char *errmsg)
{
    struct srv_jsc_placement pl;
    const char *op = json_string_value(json_object_get(entry, "op"));
    if (js->jc == NULL || op == NULL ||
        (strcmp(op, "create") != 0 && strcmp(op, "update") != 0)) {
        return 0;
    }
    json_int_t r = json_integer_value(
        json_object_get(json_object_get(entry, "config"), "num_replicas"));
    if (r <= 0) {
        r = 1;
    }
    if (r > SRV_JS_REPLICAS_MAX) {
        return keel_err(KEEL_ELIMIT, errmsg, "replicas > %d not supported",
                        SRV_JS_REPLICAS_MAX);
    }
    if (strcmp(op, "update") == 0) {
        return replace_placement(js, entry, (uint32_t)r, errmsg);
    }
    /* A mirror on its origin's nodes (0032): its leader reads the origin
     * there. A stream with sources on its first source's (0035). */
    const json_t *config = json_object_get(entry, "config");
    const char *origin = json_string_value(
        json_object_get(json_object_get(config, "mirror"), "name"));
    if (origin == NULL) {
        origin = json_string_value(json_object_get(
            json_array_get(json_object_get(config, "sources"), 0), "name"));
    }
    struct srv_stream *o = NULL;
    const struct srv_jsc_placement *prefer =
        origin != NULL && srv_js_find_stream(js, origin, &o) == 0 &&
                o->place.n > 0
            ? &o->place
            : NULL;
    struct srv_tags want;
    srv_js_placement_tags(
        json_object_get(json_object_get(entry, "config"), "placement"), &want);
    int rv =
        srv_jsc_place_stream(js->jc, (uint32_t)r, prefer, &want, &pl, errmsg);
    if (rv == 0) {
        rv = srv_jsc_placement_to_json(&pl, entry);
    }
    return rv;
}

void srv_js_meta_learn(struct srv_js *js, const struct srv_jsc_placement *pl)
{
    for (uint32_t i = 0; js->jc != NULL && i < pl->n; i++) {
        srv_jsc_learn(js->jc, pl->m[i].name, pl->m[i].inc);
    }
}

uint32_t srv_js_meta_voters(const struct srv_js *js)
{
    if (js->jc == NULL) {
        return 1;
    }
    if (js->meta_cfg.n == 0) {
        return RAFT_SERVERS_MAX; /* not applied yet: the propose decides */
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < js->meta_cfg.n; i++) {
        n += js->meta_cfg.servers[i].role == RAFT_VOTER ? 1 : 0;
    }
    return n;
}

/* ---- accessors (srv_js.h) ---- */

bool srv_js_clustered(const struct srv_js *js)
{
    return js->jc != NULL;
}

bool srv_js_meta_behind(struct srv_js *js)
{
    struct replica_info ri;
    if (js->jc == NULL || js->meta == NULL) {
        return false;
    }
    replica_info(js->meta, &ri);
    return ri.applied < ri.last_index && ri.leader != 0;
}

const char *srv_js_self_name(const struct srv_js *js)
{
    if (js->jc != NULL) {
        return srv_jsc_self_name(js->jc);
    }
    const struct srv_config *c = js->srv->cfg;
    return c->name[0] != '\0' ? c->name : js->srv->server_id;
}

bool srv_js_is_meta_leader(const struct srv_js *js)
{
    return js->meta != NULL && js->meta_leader;
}

const char *srv_js_meta_leader_name(const struct srv_js *js)
{
    struct store_group_id gid;
    if (srv_js_is_meta_leader(js)) {
        return srv_js_self_name(js);
    }
    if (js->jc == NULL) {
        return NULL;
    }
    /* A member knows the leader from Raft; others from announcements. */
    const char *n = js->meta != NULL && js->meta_leader_node != 0
                        ? srv_jsc_name_of(js->jc, js->meta_leader_node)
                        : NULL;
    if (n != NULL) {
        return n;
    }
    srv_js_meta_gid(&gid);
    return srv_jsc_leader_name(js->jc, gid.b);
}

uint64_t srv_js_meta_answer(struct srv_js *js, struct srv_stream *st,
                            uint64_t ctx, bool created)
{
    const char *kind =
        created ? "stream_create_response" : "stream_update_response";
    if (js->jc == NULL || ctx == 0) {
        return ctx;
    }
    struct srv_js_pending *p = srv_js_pending_take(js, ctx);
    if (p == NULL) {
        return 0;
    }
    json_t *o = srv_stream_info_json(st, kind, NULL, false);
    if (o != NULL && created) {
        json_object_set_new(o, "did_create", json_true());
    }
    srv_js_reply_json(js, p->reply, o);
    free(p);
    return 0;
}

const char *srv_js_meta_membership(const struct srv_js *js)
{
    if (js->jc == NULL) {
        return "standalone";
    }
    /* Joining through a solo seed until this node votes (a learner, or
     * waiting to be added): not broken, its leader adds it. */
    const struct raft_server *me =
        raft_config_find(&js->meta_cfg, srv_jsc_self_node(js->jc));
    bool voter = me != NULL && me->role == RAFT_VOTER;
    if (srv_jsc_joining(js->jc) && !voter) {
        return "joining";
    }
    switch (srv_jsc_state(js->jc)) {
    case SRV_JSC_MEMBER:
        return "member";
    case SRV_JSC_WAITING:
        return "not a member";
    default:
        return "forming";
    }
}
