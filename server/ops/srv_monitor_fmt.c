/* srv_monitor_fmt: the bodies of /connz, /jsz and /metrics, built from a
 * stats snapshot only (pure: no server state, so unit tests build them from
 * a hand-made snapshot).
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"
#include "srv_metrics.h"
#include "srv_monitor.h"

/* Append one warning, formatted, to the array w (nothing when w is NULL). */
static void warn_add(json_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void warn_add(json_t *w, const char *fmt, ...)
{
    char text[4400];
    va_list ap;

    if (w == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    json_array_append_new(w, json_string(text));
}

/* Warnings that do not make the node unhealthy (docs/design.md §6). */
json_t *srv_mon_warnings_json(const struct srv_mon_snap *snap)
{
    json_t *w = json_array();
    if (snap->quarantined_orphans > 0) {
        warn_add(w,
                 "%u quarantined orphan file(s) in %s/js/quarantine/orphans: "
                 "inspect, then restore or remove them",
                 snap->quarantined_orphans, snap->store_dir);
    }
    if (snap->quarantined_files > 0) {
        warn_add(w,
                 "%u quarantined file(s) in %s/js/quarantine (damaged data "
                 "kept for inspection)",
                 snap->quarantined_files, snap->store_dir);
    }
    if (snap->rebuilt_groups > 0) {
        warn_add(w,
                 "meta.lmdb was reset at start: the catalogue of %u group(s) "
                 "was rebuilt from %llu segment file(s) (this node is the "
                 "only member of its groups; the old meta.lmdb is in "
                 "%s/js/quarantine)",
                 snap->rebuilt_groups,
                 (unsigned long long)snap->rebuilt_segments, snap->store_dir);
    }
    return w;
}

void srv_mon_rfc3339(uint64_t unix_ms, char *buf, size_t len)
{
    time_t secs = (time_t)(unix_ms / 1000);
    struct tm tm;
    char base[32];
    gmtime_r(&secs, &tm);
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03uZ", base, (unsigned)(unix_ms % 1000));
}

void srv_mon_domain_add(json_t *o, const struct srv_mon_snap *snap)
{
    json_t *c = o != NULL ? json_object_get(o, "config") : NULL;
    if (c != NULL && snap->domain[0] != '\0') {
        json_object_set_new(c, "domain", json_string(snap->domain));
    }
}

void srv_mon_duration(uint64_t ms, char *buf, size_t len)
{
    uint64_t s = ms / 1000;
    if (s >= 86400) {
        snprintf(
            buf, len, "%llud%lluh%llum%llus", (unsigned long long)(s / 86400),
            (unsigned long long)(s % 86400 / 3600),
            (unsigned long long)(s % 3600 / 60), (unsigned long long)(s % 60));
    } else if (s >= 3600) {
        snprintf(buf, len, "%lluh%llum%llus", (unsigned long long)(s / 3600),
                 (unsigned long long)(s % 3600 / 60),
                 (unsigned long long)(s % 60));
    } else if (s >= 60) {
        snprintf(buf, len, "%llum%llus", (unsigned long long)(s / 60),
                 (unsigned long long)(s % 60));
    } else {
        snprintf(buf, len, "%llus", (unsigned long long)s);
    }
}

static char *dump(json_t *o)
{
    if (o == NULL) {
        return NULL;
    }
    char *s = json_dumps(o, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    json_decref(o);
    return s;
}

static json_t *conn_json(const struct srv_mon_conn *c,
                         const struct srv_mon_snap *s)
{
    char uptime[64];
    char idle[64];
    uint64_t now = s->taken_ms;
    uint64_t start = c->mon.start_ms != 0 ? c->mon.start_ms : now;
    uint64_t up_ms = now > start ? now - start : 0;
    /* last_ms is loop time (uv_now); no message yet: idle since accept. */
    uint64_t idle_ms = c->mon.last_ms == 0 ? up_ms
                       : s->loop_now_ms > c->mon.last_ms
                           ? s->loop_now_ms - c->mon.last_ms
                           : 0;
    srv_mon_duration(up_ms, uptime, sizeof uptime);
    srv_mon_duration(idle_ms, idle, sizeof idle);
    return json_pack(
        "{s:I, s:s, s:i, s:s, s:s, s:s, s:I, s:I, s:I, s:I, "
        "s:I, s:I, s:s, s:s}",
        "cid", (json_int_t)c->cid, "ip", c->ip, "port", c->port, "name",
        c->mon.name, "lang", c->mon.lang, "version", c->mon.version,
        "subscriptions", (json_int_t)c->subscriptions, "pending_bytes",
        (json_int_t)c->pending_bytes, "in_msgs", (json_int_t)c->mon.in_msgs,
        "out_msgs", (json_int_t)c->mon.out_msgs, "in_bytes",
        (json_int_t)c->mon.in_bytes, "out_bytes", (json_int_t)c->mon.out_bytes,
        "uptime", uptime, "idle", idle);
}

char *srv_mon_connz_json(const struct srv_mon_snap *s, const char *server_id,
                         uint64_t offset, uint64_t limit)
{
    char now[64];
    srv_mon_rfc3339(s->taken_ms, now, sizeof now);
    json_t *list = json_array();
    size_t end =
        offset + limit < s->nconns ? (size_t)(offset + limit) : s->nconns;
    for (size_t i = (size_t)offset; list != NULL && i < end; i++) {
        json_array_append_new(list, conn_json(&s->conns[i], s));
    }
    if (list == NULL) {
        return NULL;
    }
    return dump(json_pack(
        "{s:s, s:s, s:I, s:I, s:I, s:I, s:o}", "server_id", server_id, "now",
        now, "num_connections", (json_int_t)json_array_size(list), "total",
        (json_int_t)s->nconns_total, "offset", (json_int_t)offset, "limit",
        (json_int_t)limit, "connections", list));
}

void srv_mon_install_add(json_t *o, const struct srv_mon_group *g)
{
    if (o == NULL ||
        g->installs + g->install_sends + g->install_failures == 0) {
        return;
    }
    json_object_set_new(o, "snapshot_installs",
                        json_integer((json_int_t)g->installs));
    json_object_set_new(o, "snapshot_sends",
                        json_integer((json_int_t)g->install_sends));
    json_object_set_new(o, "snapshot_failures",
                        json_integer((json_int_t)g->install_failures));
    json_object_set_new(o, "install_repeats",
                        json_integer((json_int_t)g->install_repeats));
    if (g->install_error[0] != '\0') {
        /* What the last failure was: a transfer that fails in a loop is
         * otherwise only a growing count (issue 21). */
        json_object_set_new(o, "snapshot_last_error",
                            json_string(g->install_error));
    }
}

static json_t *group_json(const struct srv_mon_group *g)
{
    json_t *o = json_pack(
        "{s:s, s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:b}", "name",
        g->name, "role", g->role, "started", g->started, "leader",
        (json_int_t)g->leader, "term", (json_int_t)g->term, "last_index",
        (json_int_t)g->last_index, "commit", (json_int_t)g->commit, "applied",
        (json_int_t)g->applied, "lag",
        (json_int_t)(g->commit > g->applied ? g->commit - g->applied : 0),
        "amnesiac", g->amnesiac, "failed", g->failed);
    if (o != NULL && g->faulty != 0) {
        json_object_set_new(o, "faulty_from",
                            json_integer((json_int_t)g->faulty));
    }
    srv_mon_install_add(o, g);
    return o;
}

static json_t *stream_json(const struct srv_mon_stream *ms)
{
    return json_pack("{s:s, s:{s:I, s:I, s:I, s:I, s:I}, s:I, s:o}", "name",
                     ms->name, "state", "messages", (json_int_t)ms->messages,
                     "bytes", (json_int_t)ms->bytes, "first_seq",
                     (json_int_t)ms->first_seq, "last_seq",
                     (json_int_t)ms->last_seq, "consumer_count",
                     (json_int_t)ms->consumers, "replicas",
                     (json_int_t)ms->replicas, "group", group_json(&ms->group));
}

char *srv_mon_jsz_json(const struct srv_mon_snap *s, const char *server_id,
                       bool streams)
{
    char now[64];
    srv_mon_rfc3339(s->taken_ms, now, sizeof now);
    if (!s->js_enabled) {
        return dump(json_pack("{s:s, s:s, s:b}", "server_id", server_id, "now",
                              now, "disabled", true));
    }
    json_t *groups = json_array();
    json_t *details = json_array();
    if (groups == NULL || details == NULL) {
        json_decref(groups);
        json_decref(details);
        return NULL;
    }
    json_array_append_new(groups, group_json(&s->meta));
    for (size_t i = 0; i < s->nstreams; i++) {
        json_array_append_new(groups, group_json(&s->streams[i].group));
        if (streams) {
            json_array_append_new(details, stream_json(&s->streams[i]));
        }
    }
    json_t *o = json_pack(
        "{s:s, s:s, s:{s:s, s:I, s:I}, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I}, "
        "s:{s:s, s:I, s:I}, s:o}",
        "server_id", server_id, "now", now, "config", "store_dir", s->store_dir,
        "max_memory", (json_int_t)s->max_memory, "max_storage",
        (json_int_t)s->max_storage, "memory", (json_int_t)0, "storage",
        (json_int_t)s->bytes, "streams", (json_int_t)s->nstreams, "consumers",
        (json_int_t)s->consumers, "messages", (json_int_t)s->messages, "api",
        "total", (json_int_t)s->api_total, "errors", (json_int_t)s->api_errors,
        "meta_cluster", "leader_role", s->meta.role, "leader",
        (json_int_t)s->meta.leader, "term", (json_int_t)s->meta.term, "groups",
        groups);
    srv_mon_domain_add(o, s);
    if (o != NULL) {
        json_object_set_new(o, "bytes", json_integer((json_int_t)s->bytes));
        /* Who answered the DIRECT.GETs this node took (keeld only). */
        json_object_set_new(o, "direct_gets",
                            json_pack("{s:I, s:I, s:I}", "leader",
                                      (json_int_t)s->direct.leader, "follower",
                                      (json_int_t)s->direct.follower, "mirror",
                                      (json_int_t)s->direct.mirror));
        if (streams) {
            json_object_set_new(o, "stream_detail", details);
            details = NULL;
        }
    }
    json_decref(details);
    return dump(o);
}
