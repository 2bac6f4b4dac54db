/* srv_js_status: the operator's view of the cluster and the orphans
 * commands over NATS (keel cluster status, keel cluster orphans).
 *
 * $KEEL.API.CLUSTER.STATUS and $KEEL.API.ORPHANS.LIST are answered by
 * every node with its own view: the node a client reaches answers and
 * forwards the request once to each linked peer, which answers the same
 * reply subject (as nats-server's $SYS.REQ.SERVER.PING). The client
 * gathers the replies until every member the replies say is up answered.
 * $KEEL.API.ORPHANS.RM.<node> and .RESTORE.<node> (body {"name": N}) are
 * answered by the named node only (forwarded to it).
 *
 * No request body is read except the bounded {"name"} of RM and RESTORE.
 * Permissions: these are publishes, checked against the user's publish
 * permissions before the JetStream intercept (srv_route.c, SECURITY.md).
 * Orphans are never deleted or moved by anything but RM and RESTORE
 * (docs/design.md §5). Loop thread only.
 */
#include "srv_js_status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "keel/error.h"
#include "srv_cluster.h"
#include "srv_js_forward.h"
#include "srv_js_int.h"
#include "srv_js_mon.h"
#include "srv_js_snap.h"
#include "srv_log.h"
#include "srv_metrics.h"
#include "srv_monitor.h"
#include "srv_parser.h"
#include "srv_server.h"

#define PREFIX "$KEEL.API."
#define STATUS_SUBJ "$KEEL.API.CLUSTER.STATUS"
#define LIST_SUBJ "$KEEL.API.ORPHANS.LIST"
#define RM_PREFIX "$KEEL.API.ORPHANS.RM."
#define RESTORE_PREFIX "$KEEL.API.ORPHANS.RESTORE."
#define NAME_BYTES 128 /* an orphan's name (group-<32 hex>[.N]) */

static bool subj_is(const struct srv_cmd *cmd, const char *s)
{
    size_t n = strlen(s);
    return cmd->subject.len == n && memcmp(cmd->subject.ptr, s, n) == 0;
}

static bool subj_starts(const struct srv_cmd *cmd, const char *p)
{
    size_t n = strlen(p);
    return cmd->subject.len > n && memcmp(cmd->subject.ptr, p, n) == 0;
}

/* An error answer in the JetStream API's shape. */
static void reply_error(struct srv_js *js, const char *reply, int code,
                        const char *type, const char *what)
{
    js->api_errors++;
    srv_js_reply_json(js, reply,
                      json_pack("{s:s, s:s, s:{s:i, s:s}}", "type", type,
                                "server", srv_js_self_name(js), "error", "code",
                                code, "description", what));
}

/* A client's request (not one a peer forwarded): send it once to every
 * linked peer, which answers the reply itself. Returns the names asked
 * (this node first) for the client to know whom to wait for; NULL for a
 * forwarded request. */
static json_t *fan_out(struct srv_js *js, const struct srv_cmd *cmd)
{
    const char *names[SRV_CLUSTER_LINKS_MAX];
    struct srv_cluster *cl = srv_js_server(js)->cluster;
    if (srv_js_fwd_inbound()) {
        return NULL;
    }
    json_t *asked = json_array();
    json_array_append_new(asked, json_string(srv_js_self_name(js)));
    size_t n =
        cl != NULL ? srv_cluster_peers(cl, names, SRV_CLUSTER_LINKS_MAX) : 0;
    for (size_t i = 0; i < n; i++) {
        if (srv_js_fwd_send(js, names[i], cmd) == 0) {
            json_array_append_new(asked, json_string(names[i]));
        } else {
            SRV_DEBUG("js", "%.*s not sent to %s", (int)cmd->subject.len,
                      cmd->subject.ptr, names[i]);
        }
    }
    return asked;
}

/* o with "asked" set (when this node fanned the request out). */
static json_t *with_asked(json_t *o, json_t *asked)
{
    if (o != NULL && asked != NULL) {
        json_object_set(o, "asked", asked);
    }
    json_decref(asked);
    return o;
}

/* ---- status ---- */

static json_t *group_json(const struct srv_mon_group *g, const char *leader)
{
    json_t *o = json_pack(
        "{s:s, s:b, s:s, s:I, s:I, s:I, s:I, s:I, s:b, s:b}", "role", g->role,
        "started", g->started, "leader", leader != NULL ? leader : "", "term",
        (json_int_t)g->term, "last_index", (json_int_t)g->last_index, "commit",
        (json_int_t)g->commit, "applied", (json_int_t)g->applied, "lag",
        (json_int_t)(g->commit > g->applied ? g->commit - g->applied : 0),
        "amnesiac", g->amnesiac, "failed", g->failed);
    char why[256];
    if (o != NULL && g->repairs + g->repairs_refused > 0) {
        json_object_set_new(o, "repairs", json_integer((json_int_t)g->repairs));
        json_object_set_new(o, "repairs_refused",
                            json_integer((json_int_t)g->repairs_refused));
    }
    srv_mon_install_add(o, g);
    if (o != NULL && g->faulty != 0) {
        json_object_set_new(o, "faulty_from",
                            json_integer((json_int_t)g->faulty));
    }
    if (o != NULL) {
        /* The same verdict /healthz gives this group. */
        bool ok = srv_mon_group_healthy(g, why, sizeof why);
        json_object_set_new(o, "state", json_string(ok ? "ok" : why));
    }
    return o;
}

/* Meta members (the applied configuration) and every linked node. */
static json_t *members_json(struct srv_js *js)
{
    json_t *a = json_array();
    const char *self = srv_js_self_name(js);
    struct srv_cluster *cl = srv_js_server(js)->cluster;
    const char *linked[SRV_CLUSTER_LINKS_MAX];
    size_t nl =
        cl != NULL ? srv_cluster_peers(cl, linked, SRV_CLUSTER_LINKS_MAX) : 0;
    bool listed[SRV_CLUSTER_LINKS_MAX] = {false};
    if (a == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; js->jc != NULL && i < js->meta_cfg.n; i++) {
        const struct raft_server *s = &js->meta_cfg.servers[i];
        const char *nm = srv_jsc_name_of(js->jc, s->node);
        bool is_self = nm != NULL && strcmp(nm, self) == 0;
        bool up = is_self;
        for (size_t k = 0; nm != NULL && k < nl; k++) {
            if (strcmp(linked[k], nm) == 0) {
                up = true;
                listed[k] = true;
            }
        }
        json_array_append_new(
            a, json_pack("{s:s, s:b, s:b, s:s}", "name", nm != NULL ? nm : "?",
                         "up", up, "self", is_self, "meta",
                         s->role == RAFT_VOTER ? "voter" : "learner"));
    }
    if (js->jc == NULL) {
        json_array_append_new(a, json_pack("{s:s, s:b, s:b, s:s}", "name", self,
                                           "up", true, "self", true, "meta",
                                           "voter"));
    }
    for (size_t k = 0; k < nl; k++) {
        if (!listed[k]) {
            json_array_append_new(a, json_pack("{s:s, s:b, s:b, s:s}", "name",
                                               linked[k], "up", true, "self",
                                               false, "meta", "none"));
        }
    }
    return a;
}

static json_t *peers_json(const struct srv_stream *st)
{
    struct srv_stream_peer peers[SRV_JS_REPLICAS_MAX];
    size_t n = 0;
    json_t *a = json_array();
    if (a == NULL ||
        srv_stream_peers(st, peers, SRV_JS_REPLICAS_MAX, &n) != 0) {
        return a;
    }
    bool leads = srv_stream_is_leader(st);
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_pack("{s:s, s:b}", "name", peers[i].name, "leader",
                              peers[i].leader);
        if (p != NULL && leads && !peers[i].leader) {
            /* Known on the leader only (srv_stream_peers). */
            json_object_set_new(p, "current", json_boolean(peers[i].current));
            json_object_set_new(p, "lag",
                                json_integer((json_int_t)peers[i].lag));
            json_object_set_new(p, "active",
                                json_integer((json_int_t)peers[i].active_ns));
            json_object_set_new(p, "offline", json_boolean(peers[i].offline));
        }
        json_array_append_new(a, p);
    }
    return a;
}

static json_t *orphan_names(struct srv_js *js, size_t *count)
{
    char names[4096];
    json_t *a = json_array();
    srv_js_orphans(js, count, names, sizeof names);
    for (char *p = names, *save = NULL, *t;
         a != NULL && (t = strtok_r(p, ",", &save)) != NULL; p = NULL) {
        json_array_append_new(a, json_string(t));
    }
    return a;
}

static json_t *status_json(struct srv_js *js, struct srv_mon_snap *snap)
{
    struct srv_server *srv = srv_js_server(js);
    char why[256] = "";
    bool ok = srv_mon_healthy(snap, why, sizeof why);
    size_t norphans = 0;
    json_t *o = json_pack(
        "{s:s, s:{s:s, s:s, s:s, s:s, s:I}, s:s}", "type",
        "io.keel.api.v1.cluster_status_response", "server", "name",
        srv_js_self_name(js), "id", srv->server_id, "cluster",
        srv->cluster != NULL ? srv->cluster->name : "", "version", KEEL_VERSION,
        "uptime_ms", (json_int_t)(snap->taken_ms - snap->start_ms), "status",
        ok                   ? "ok"
        : snap->meta_joining ? "joining"
                             : "unavailable");
    if (o == NULL) {
        return NULL;
    }
    if (!ok) {
        json_object_set_new(o, "error", json_string(why));
    }
    if (srv->cfg != NULL) {
        json_object_set_new(json_object_get(o, "server"), "tags",
                            srv_tags_json(&srv->cfg->server_tags));
    }
    json_object_set_new(o, "warnings", srv_mon_warnings_json(snap));
    json_object_set_new(o, "orphans", orphan_names(js, &norphans));
    json_object_set_new(o, "orphans_count", json_integer((json_int_t)norphans));
    json_object_set_new(o, "members", members_json(js));
    json_object_set_new(o, "meta",
                        group_json(&snap->meta, srv_js_meta_leader_name(js)));
    json_t *groups = json_array();
    for (size_t i = 0; groups != NULL && i < snap->nstreams; i++) {
        const struct srv_mon_stream *ms = &snap->streams[i];
        struct srv_stream *st = NULL;
        if (ms->elsewhere || srv_js_find_stream(js, ms->name, &st) != 0) {
            continue; /* placed on other nodes: they report it */
        }
        json_t *g = group_json(&ms->group, srv_stream_leader_name(st));
        if (g == NULL) {
            continue;
        }
        json_object_set_new(g, "stream", json_string(ms->name));
        json_object_set_new(g, "replicas", json_integer(ms->replicas));
        json_object_set_new(g, "messages",
                            json_integer((json_int_t)ms->messages));
        json_object_set_new(g, "peers", peers_json(st));
        json_array_append_new(groups, g);
    }
    json_object_set_new(o, "groups", groups);
    return o;
}

static void status(struct srv_js *js, const char *reply, json_t *asked)
{
    struct srv_mon_snap *snap = calloc(1, sizeof *snap);
    struct srv_server *srv = srv_js_server(js);
    if (snap == NULL) {
        json_decref(asked);
        return; /* no answer: the client reports this node as silent */
    }
    snap->taken_ms = srv_now_ms();
    snap->start_ms = srv->start_ms;
    if (srv_js_mon_gather(js, snap) == 0) {
        srv_js_reply_json(js, reply, with_asked(status_json(js, snap), asked));
    } else {
        json_decref(asked);
    }
    free(snap->streams);
    free(snap);
}

/* ---- orphans ---- */

/* An orphan name as srv_js_orphans_check makes them: "group-" and 32 hex
 * digits, maybe ".N" when quarantine held a copy already. */
static bool orphan_name_valid(const char *n, char *hex)
{
    if (strncmp(n, "group-", 6) != 0 || strlen(n) < 38 ||
        strlen(n) >= NAME_BYTES) {
        return false;
    }
    for (int i = 0; i < 32; i++) {
        char c = n[6 + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    const char *tail = n + 38;
    if (tail[0] != '\0') {
        if (tail[0] != '.' || tail[1] == '\0') {
            return false;
        }
        for (const char *p = tail + 1; *p != '\0'; p++) {
            if (*p < '0' || *p > '9') {
                return false;
            }
        }
    }
    memcpy(hex, n + 6, 32);
    hex[32] = '\0';
    return true;
}

static uint64_t du_total;
static uint64_t du_files;

static int du_cb(const char *path, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag == FTW_F) {
        du_total += (uint64_t)sb->st_size;
        du_files++;
    }
    return du_files > SNAP_DIR_ENTRIES_MAX ? 1 : 0; /* bounded walk */
}

static int rm_cb(const char *path, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    int rv = flag == FTW_DP ? rmdir(path) : unlink(path);
    return rv == 0 ? 0 : errno;
}

static void orphans_dir(struct srv_js *js, char *out, size_t cap)
{
    snprintf(out, cap, "%.3900s/js/quarantine/orphans",
             srv_js_server(js)->cfg->store_dir);
}

static void list(struct srv_js *js, const char *reply, json_t *asked)
{
    char dir[PATH_MAX];
    size_t count = 0;
    json_t *names = orphan_names(js, &count);
    json_t *a = json_array();
    size_t i;
    json_t *n;
    orphans_dir(js, dir, sizeof dir);
    json_array_foreach(names, i, n)
    {
        char path[PATH_MAX + NAME_BYTES + 2];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(n));
        du_total = 0;
        du_files = 0;
        (void)nftw(path, du_cb, 16, FTW_PHYS);
        int64_t mtime = stat(path, &sb) == 0 ? (int64_t)sb.st_mtime : 0;
        json_array_append_new(a, json_pack("{s:s, s:I, s:I, s:I}", "name",
                                           json_string_value(n), "bytes",
                                           (json_int_t)du_total, "files",
                                           (json_int_t)du_files, "moved_unix",
                                           (json_int_t)mtime));
    }
    json_decref(names);
    srv_js_reply_json(
        js, reply,
        with_asked(json_pack("{s:s, s:s, s:s, s:I, s:o}", "type",
                             "io.keel.api.v1.orphans_list_response", "server",
                             srv_js_self_name(js), "dir", dir, "total",
                             (json_int_t)count, "orphans",
                             a != NULL ? a : json_array()),
                   asked));
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
        return -1;
    }
    int rv = fsync(fd);
    close(fd);
    return rv;
}

/* RM and RESTORE of name on this node; returns 0 or an HTTP-like code
 * with why filled. */
static int act(struct srv_js *js, bool restore, const char *name, char *why,
               size_t len, char *done, size_t dlen)
{
    char hex[33];
    char dir[PATH_MAX];
    char path[PATH_MAX + NAME_BYTES + 2];
    struct stat sb;
    orphans_dir(js, dir, sizeof dir);
    if (!orphan_name_valid(name, hex)) {
        snprintf(why, len,
                 "'%s' is not an orphan name (group-<32 hex digits>[.N]): "
                 "list them with 'keel cluster orphans ls'",
                 name);
        return 400;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lstat(path, &sb) != 0) {
        snprintf(why, len,
                 "no orphan %s on this node: list them with 'keel cluster "
                 "orphans ls'",
                 name);
        return 404;
    }
    if (!restore) {
        int rv = nftw(path, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
        if (rv != 0) {
            snprintf(why, len, "removing %s failed: %s (what is left stays)",
                     path, strerror(rv > 0 ? rv : errno));
            return 500;
        }
        (void)fsync_dir(dir);
        SRV_WARN("js", "orphan %s removed by an operator command", name);
        snprintf(done, dlen, "orphan %s removed", name);
        return 0;
    }
    char gdir[PATH_MAX];
    char dst[PATH_MAX + 64];
    snprintf(gdir, sizeof gdir, "%.3900s/js/groups",
             srv_js_server(js)->cfg->store_dir);
    snprintf(dst, sizeof dst, "%s/%s", gdir, hex);
    if (lstat(dst, &sb) == 0) {
        snprintf(why, len,
                 "group directory %s exists: the group is in use, so %s stays "
                 "in quarantine (inspect both with 'keel store dump')",
                 dst, name);
        return 409;
    }
    if (rename(path, dst) != 0) {
        snprintf(why, len, "moving %s to groups/%s failed: %s", name, hex,
                 strerror(errno));
        return 500;
    }
    (void)fsync_dir(gdir);
    (void)fsync_dir(dir);
    SRV_WARN("js", "orphan %s restored to groups/%s by an operator command",
             name, hex);
    snprintf(done, dlen,
             "orphan %s moved back to groups/%s; a stream whose group is %s "
             "uses it after a restart of this node, otherwise the next start "
             "quarantines it again (nothing is deleted)",
             name, hex, hex);
    return 0;
}

static void rm_restore(struct srv_js *js, const struct srv_cmd *cmd,
                       const char *reply, bool restore)
{
    const char *prefix = restore ? RESTORE_PREFIX : RM_PREFIX;
    const char *type = restore ? "io.keel.api.v1.orphans_restore_response"
                               : "io.keel.api.v1.orphans_rm_response";
    size_t plen = strlen(prefix);
    char node[SRV_CLUSTER_NAME_BYTES];
    char why[PATH_MAX + 256];
    char done[PATH_MAX + 256];
    size_t nlen = cmd->subject.len - plen;
    if (nlen >= sizeof node) {
        reply_error(js, reply, 400, type, "node name too long");
        return;
    }
    memcpy(node, cmd->subject.ptr + plen, nlen);
    node[nlen] = '\0';
    if (strcmp(node, srv_js_self_name(js)) != 0) {
        if (srv_js_fwd_inbound()) {
            reply_error(js, reply, 404, type, "not this node");
            return;
        }
        if (srv_js_fwd_send(js, node, cmd) != 0) {
            snprintf(why, sizeof why,
                     "node %s is not linked to %s now: check the name with "
                     "'keel cluster status', or connect to it directly",
                     node, srv_js_self_name(js));
            reply_error(js, reply, 503, type, why);
        }
        return;
    }
    const char *body = cmd->payload + cmd->hdr_bytes;
    size_t blen = cmd->total_bytes - cmd->hdr_bytes;
    json_t *req =
        blen > 0 && blen <= 4096 ? json_loadb(body, blen, 0, NULL) : NULL;
    const char *name = json_string_value(json_object_get(req, "name"));
    if (name == NULL) {
        json_decref(req);
        reply_error(js, reply, 400, type,
                    "the request body must be {\"name\": \"<orphan>\"}");
        return;
    }
    int code = act(js, restore, name, why, sizeof why, done, sizeof done);
    if (code != 0) {
        reply_error(js, reply, code, type, why);
    } else {
        srv_js_reply_json(js, reply,
                          json_pack("{s:s, s:s, s:s, s:b, s:s}", "type", type,
                                    "server", srv_js_self_name(js), "name",
                                    name, "success", true, "result", done));
    }
    json_decref(req);
}

bool srv_js_status_intercept(struct srv_js *js, const struct srv_cmd *cmd,
                             const char *reply)
{
    if (!subj_starts(cmd, PREFIX)) {
        return false;
    }
    if (subj_is(cmd, STATUS_SUBJ)) {
        js->api_total++;
        status(js, reply, fan_out(js, cmd));
        return true;
    }
    if (subj_is(cmd, LIST_SUBJ)) {
        js->api_total++;
        list(js, reply, fan_out(js, cmd));
        return true;
    }
    if (subj_starts(cmd, RM_PREFIX) || subj_starts(cmd, RESTORE_PREFIX)) {
        js->api_total++;
        rm_restore(js, cmd, reply, subj_starts(cmd, RESTORE_PREFIX));
        return true;
    }
    return false; /* another $KEEL.API request (srv_admin, ...) */
}
