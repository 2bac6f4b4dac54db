/* srv_js_alone: a keeld without a cluster whose meta.lmdb was reset or
 * lost (docs/faults.md F3, docs/decisions/0025). Such a node is the
 * only member of every group it holds, so the store catalogues their
 * segment files again (store_config.sole_member) instead of moving them
 * to quarantine/. What is left is the incarnation: the reset made a new
 * one, but the configuration entries in the logs name the old one, and
 * a group whose only voter is another incarnation never leads. Nobody
 * else can hold these groups, so the node keeps the incarnation its meta
 * log names. Loop thread, before the meta group opens.
 */
#include <string.h>

#include "srv_js_int.h"
#include "srv_log.h"

/* The incarnation the meta log's index-1 configuration names for this
 * node when it is that configuration's only voter; 0 otherwise. */
static raft_incarnation logged_incarnation(struct store_group *g)
{
    struct store_group_info gi;
    struct store_entry e;
    struct raft_config c;
    raft_incarnation inc = 0;
    char err[KEEL_ERRMSG_MAX];

    store_group_info(g, &gi);
    if (gi.first_index != 1 || gi.last_index < 1 ||
        store_read(g, 1, &e, err) != 0) {
        return 0;
    }
    if (e.type == RAFT_ENTRY_CONFIG &&
        raft_config_decode(e.payload, e.len, &c) == 0 && c.n == 1 &&
        c.servers[0].node == 1 && c.servers[0].role == RAFT_VOTER) {
        inc = c.servers[0].incarnation;
    }
    store_entry_free(&e);
    return inc;
}

int srv_js_alone_open(struct srv_js *js, char *errmsg)
{
    struct store_group_id gid;
    struct store_group *g = NULL;
    struct store_recovery rep;
    const struct store_fsync pol = {STORE_FSYNC_ALWAYS, 0};

    ASSERT(js->jc == NULL);
    srv_js_meta_gid(&gid);
    int rv = store_group_open(js->store, &gid, &pol, &g, &rep, errmsg);
    if (rv != 0) {
        return 0; /* the meta group's own open reports it */
    }
    if (rep.rebuilt_segments > 0) {
        js->rebuilt_groups++;
        js->rebuilt_segments += rep.rebuilt_segments;
        SRV_WARN("js",
                 "meta group: catalogue rebuilt from %u segment file(s) "
                 "(log %llu..%llu): this node is its only member",
                 rep.rebuilt_segments, (unsigned long long)rep.first_index,
                 (unsigned long long)rep.last_index);
    }
    raft_incarnation inc = logged_incarnation(g);
    store_group_close(g);
    if (inc == 0 || inc == js->inc) {
        return 0;
    }
    rv = store_incarnation_adopt(js->store, inc, errmsg);
    if (rv != 0) {
        return rv;
    }
    SRV_WARN("js",
             "incarnation %016llx kept from the meta log (meta.lmdb had "
             "made %016llx): this node is the only member of its groups",
             (unsigned long long)inc, (unsigned long long)js->inc);
    js->inc = inc;
    return 0;
}
