/* srv_metrics_health: the /healthz verdict over a stats snapshot (pure).
 */
#include <stdio.h>
#include <string.h>

#include "srv_metrics.h"

bool srv_mon_group_healthy(const struct srv_mon_group *g, char *why, size_t len)
{
    if (g->failed) {
        snprintf(why, len, "group %s stopped on a store error", g->name);
        return false;
    }
    if (g->faulty != 0) {
        snprintf(why, len, "group %s has a faulty log range from index %llu",
                 g->name, (unsigned long long)g->faulty);
        return false;
    }
    if (g->amnesiac) {
        snprintf(why, len, "group %s is amnesiac (lost synced state)", g->name);
        return false;
    }
    if (!g->started || g->applied + SRV_MON_HEALTH_LAG_MAX < g->commit) {
        snprintf(why, len, "group %s is not caught up (applied %llu of %llu)",
                 g->name, (unsigned long long)g->applied,
                 (unsigned long long)g->commit);
        return false;
    }
    return true;
}

bool srv_mon_healthy_meta(const struct srv_mon_snap *snap, char *why,
                          size_t len)
{
    if (!snap->js_enabled) {
        return true;
    }
    if (snap->meta_joining) {
        /* Not broken: the meta leader adds it, then promotes it. */
        snprintf(why, len,
                 "joining the JetStream meta group: its leader adds this "
                 "node as a learner, then a voter once caught up");
        return false;
    }
    if (snap->meta_outsider) {
        /* A new data directory, or a meta.lmdb reset (rule 3): a new
         * incarnation the meta group does not know (F14). */
        snprintf(why, len,
                 "this node is not a member of the meta group (a new data "
                 "directory or a reset meta.lmdb): add it with 'keel cluster "
                 "add-peer NAME', after 'keel cluster remove-peer NAME' if "
                 "its old data directory was a member");
        return false;
    }
    if (snap->meta.leader == 0 && strcmp(snap->meta.role, "leader") != 0) {
        snprintf(why, len,
                 "JetStream has not established contact with a meta leader");
        return false;
    }
    return srv_mon_group_healthy(&snap->meta, why, len);
}

bool srv_mon_healthy(const struct srv_mon_snap *snap, char *why, size_t len)
{
    if (!srv_mon_healthy_meta(snap, why, len)) {
        return false;
    }
    if (!snap->js_enabled) {
        return true;
    }
    if (snap->streams_unopened > 0) {
        snprintf(why, len, "%u stream(s) could not open; last: %s",
                 snap->streams_unopened, snap->unopened_why);
        return false;
    }
    for (size_t i = 0; i < snap->nstreams; i++) {
        if (!snap->streams[i].elsewhere &&
            !srv_mon_group_healthy(&snap->streams[i].group, why, len)) {
            return false;
        }
    }
    return true;
}
