/* srv_js_mon: the JetStream half of a stats snapshot (loop thread): the
 * metrics hub calls it through the gather hook keeld registers.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_int.h"
#include "srv_js_mon.h"
#include "srv_metrics.h"
#include "srv_server.h"

static void group_of(struct replica *r, const char *name, bool is_meta,
                     struct srv_mon_group *g)
{
    struct replica_info ri;
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->is_meta = is_meta;
    g->role = "none";
    if (r == NULL) {
        return;
    }
    replica_info(r, &ri);
    g->started = ri.started;
    g->role = raft_role_name(ri.role);
    g->leader = ri.leader;
    g->term = ri.term;
    g->last_index = ri.last_index;
    g->commit = ri.commit;
    g->applied = ri.applied;
    g->faulty = ri.faulty;
    g->amnesiac = ri.amnesiac;
    g->repairs = ri.repairs;
    g->repairs_refused = ri.repairs_refused;
    struct replica_install_info ii;
    replica_install_info(r, &ii);
    g->installs = ii.installs;
    g->install_sends = ii.sends;
    g->install_failures = ii.failures;
    g->install_repeats = ii.repeats;
    snprintf(g->install_error, sizeof g->install_error, "%s", ii.last_error);
}

/* Entries of dir, without "." and ".." and without a subdirectory named
 * skip (may be NULL). Bounded by SRV_MON_CONNS_MAX: a count past it is
 * reported as that. */
static unsigned count_entries(const char *dir, const char *skip)
{
    DIR *d = opendir(dir);
    unsigned n = 0;
    if (d == NULL) {
        return 0;
    }
    struct dirent *e;
    while (n < SRV_MON_CONNS_MAX && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            (skip != NULL && strcmp(e->d_name, skip) == 0)) {
            continue;
        }
        n++;
    }
    closedir(d);
    return n;
}

static void gather_quarantine(const char *store_dir, struct srv_mon_snap *s)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/js/quarantine", store_dir);
    s->quarantined_files = count_entries(path, "orphans");
    snprintf(path, sizeof path, "%s/js/quarantine/orphans", store_dir);
    s->quarantined_orphans = count_entries(path, NULL);
}

static void gather_stream(struct srv_stream *st, struct srv_mon_stream *ms)
{
    const struct srv_consumer_ops *ops = srv_js_consumer_ops(st->js);
    struct srv_stream_state state;

    srv_stream_state(st, &state);
    snprintf(ms->name, sizeof ms->name, "%s", st->cfg.name);
    ms->messages = state.msgs;
    ms->bytes = state.bytes;
    ms->first_seq = state.first_seq;
    ms->last_seq = state.last_seq;
    ms->consumers = ops != NULL && ops->consumer_count != NULL
                        ? ops->consumer_count(st)
                        : 0;
    ms->replicas = st->cfg.num_replicas;
    /* A clustered stream placed on other nodes has no group here. */
    ms->elsewhere = st->r == NULL && !st->placed;
    group_of(st->r, st->cfg.name, false, &ms->group);
    ms->group.failed = st->failed;
}

int srv_js_mon_gather(struct srv_js *js, struct srv_mon_snap *s)
{
    const struct srv_server *srv = srv_js_server(js);
    s->js_enabled = true;
    snprintf(s->store_dir, sizeof s->store_dir, "%s", srv->cfg->store_dir);
    snprintf(s->domain, sizeof s->domain, "%s", srv->cfg->js_domain);
    s->max_memory = srv->cfg->js_max_memory;
    s->max_storage = srv->cfg->js_max_file;
    s->direct = js->direct;
    group_of(js->meta, "_meta_", true, &s->meta);
    s->api_total = js->api_total;
    s->api_errors = js->api_errors;
    s->streams_unopened = js->streams_unopened;
    s->rebuilt_groups = js->rebuilt_groups;
    s->rebuilt_segments = js->rebuilt_segments;
    if (js->host != NULL) {
        replica_host_scrub_stats(js->host, &s->scrub);
    }
    s->meta_outsider = strcmp(srv_js_meta_membership(js), "not a member") == 0;
    s->meta_joining = strcmp(srv_js_meta_membership(js), "joining") == 0;
    snprintf(s->unopened_why, sizeof s->unopened_why, "%s", js->unopened_why);
    if (js->store != NULL) {
        store_stats(js->store, &s->store);
    }
    gather_quarantine(srv->cfg->store_dir, s);
    ASSERT(js->nstreams <= SRV_JS_STREAMS_MAX);
    if (js->nstreams == 0) {
        return 0;
    }
    s->streams = calloc(js->nstreams, sizeof *s->streams);
    if (s->streams == NULL) {
        return KEEL_ENOMEM;
    }
    for (uint32_t i = 0; i < js->nstreams; i++) {
        struct srv_mon_stream *ms = &s->streams[i];
        gather_stream(js->streams[i], ms);
        s->consumers += ms->consumers;
        s->messages += ms->messages;
        s->bytes += ms->bytes;
    }
    s->nstreams = js->nstreams;
    return 0;
}
