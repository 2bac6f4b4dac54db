/* The meta group's snapshots and the orphan check (docs/design.md §5): see
 * srv_js_snap.h. */
#include "srv_js_snap.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "snap.h"
#include "srv_js_int.h"
#include "srv_log.h"
#include "srv_server.h"

/* One stream as the create entry that makes it (srv_js_api's shape). */
static json_t *stream_entry(const struct srv_stream *st)
{
    char err[KEEL_ERRMSG_MAX];
    json_t *cfg = NULL;
    if (srv_stream_config_encode(&st->cfg, &cfg, err) != 0) {
        return NULL;
    }
    json_t *e =
        json_pack("{s:s, s:s, s:o, s:I, s:I}", "op", "create", "name",
                  st->cfg.name, "config", cfg, "nonce", (json_int_t)st->nonce,
                  "created", (json_int_t)st->created_ns);
    if (e != NULL && st->place.n > 0 &&
        srv_jsc_placement_to_json(&st->place, e) != 0) {
        json_decref(e);
        return NULL;
    }
    return e;
}

/* Body: a JSON array of create entries in the meta state's stream order
 * (the order their creates were applied), keys sorted: the same applied
 * entries give the same bytes. */
int srv_js_snap_encode(struct replica *r, uint64_t index, uint8_t **out,
                       size_t *len, void *arg)
{
    struct srv_js *js = arg;
    (void)r;
    (void)index;
    json_t *a = json_array();
    int rv = a == NULL ? KEEL_ENOMEM : 0;
    /* Bounded by SRV_JS_STREAMS_MAX. */
    for (uint32_t i = 0; rv == 0 && i < js->nstreams; i++) {
        json_t *e = stream_entry(js->streams[i]);
        rv = e == NULL || json_array_append_new(a, e) != 0 ? KEEL_ENOMEM : 0;
    }
    char *s = rv == 0 ? json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(a);
    if (s == NULL) {
        return KEEL_ENOMEM;
    }
    *out = (uint8_t *)s;
    *len = strlen(s);
    return 0;
}

int srv_js_snap_restore(struct replica *r, uint64_t index, const uint8_t *body,
                        size_t len, void *arg)
{
    struct srv_js *js = arg;
    json_error_t jerr;
    json_t *a = json_loadb((const char *)body, len, 0, &jerr);
    if (a == NULL || !json_is_array(a) ||
        json_array_size(a) > SRV_JS_STREAMS_MAX) {
        SRV_ERROR("js", "meta snapshot %" PRIu64 " does not parse: %s", index,
                  a == NULL ? jerr.text : "not an array of streams");
        json_decref(a);
        return KEEL_ECORRUPT;
    }
    struct replica_install_info ii = {0};
    if (r != NULL) {
        replica_install_info(r, &ii);
    }
    /* The membership the snapshot holds (entries before it are gone). */
    js->meta_cfg = *replica_config(r);
    if (ii.receiving) {
        /* This node's state is older than the snapshot: reconcile. */
        SRV_INFO("js", "meta: installed snapshot %" PRIu64 " from the leader",
                 index);
        srv_js_meta_install(js, a);
        json_decref(a);
        return 0;
    }
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e)
    {
        srv_js_meta_apply_json(js, e, 0);
    }
    json_decref(a);
    return 0;
}

/* ---- orphans ---- */

struct orphan_list {
    char *names;
    size_t cap;
    size_t used;
};

static int orphan_cb(void *arg, const char *name)
{
    struct orphan_list *l = arg;
    size_t n = strlen(name);
    if (l->cap == 0 || l->used + n + 2 > l->cap) {
        return 0; /* counted, not listed */
    }
    if (l->used > 0) {
        l->names[l->used++] = ',';
    }
    memcpy(l->names + l->used, name, n + 1);
    l->used += n;
    return 0;
}

/* The store directory srv_js opened (<store_dir>/js). */
static void snap_cfg(struct srv_js *js, char *path, size_t cap,
                     struct snap_config *out)
{
    int n =
        snprintf(path, cap, "%.*s/js", PATH_MAX - 8, js->srv->cfg->store_dir);
    ASSERT(n > 0 && (size_t)n < cap);
    *out = (struct snap_config){.data_dir = path};
}

void srv_js_orphans(struct srv_js *js, size_t *count, char *names, size_t cap)
{
    char path[PATH_MAX + 8];
    char err[KEEL_ERRMSG_MAX];
    struct snap_config cfg;
    struct orphan_list l = {.names = names, .cap = cap};
    snap_cfg(js, path, sizeof path, &cfg);
    *count = 0;
    if (cap > 0) {
        names[0] = '\0';
    }
    if (snap_orphans_list(&cfg, orphan_cb, &l, count, err) != 0) {
        SRV_WARN("js", "orphans not listed: %s", err);
    }
}

/* Is hex (a group directory name) a group the meta state names? */
static bool named(struct srv_js *js, const char *hex)
{
    char h[33];
    struct store_group_id gid;
    srv_js_meta_gid(&gid);
    store_group_id_hex(&gid, h);
    if (strcmp(h, hex) == 0) {
        return true;
    }
    /* Bounded by SRV_JS_STREAMS_MAX. */
    for (uint32_t i = 0; i < js->nstreams; i++) {
        store_group_id_hex(&js->streams[i]->gid, h);
        if (strcmp(h, hex) == 0) {
            return true;
        }
    }
    return false;
}

unsigned srv_js_orphans_check(struct srv_js *js)
{
    char path[PATH_MAX + 8];
    char dir[PATH_MAX + 32];
    char err[KEEL_ERRMSG_MAX];
    struct snap_config cfg;
    unsigned moved = 0;
    snap_cfg(js, path, sizeof path, &cfg);
    snprintf(dir, sizeof dir, "%s/groups", path);
    DIR *d = opendir(dir);
    if (d == NULL) {
        return 0;
    }
    struct dirent *de;
    char names[SNAP_ORPHANS_MAX > 64 ? 64 : SNAP_ORPHANS_MAX][40];
    unsigned n = 0;
    /* Collect first, move after: the directory changes under readdir. */
    for (unsigned k = 0; k < SNAP_DIR_ENTRIES_MAX && (de = readdir(d)); k++) {
        if (strlen(de->d_name) == 32 && !named(js, de->d_name) &&
            n < sizeof names / sizeof names[0]) {
            memcpy(names[n++], de->d_name, 33);
        }
    }
    closedir(d);
    for (unsigned i = 0; i < n; i++) {
        char p[PATH_MAX + 80];
        char name[64];
        snprintf(p, sizeof p, "%s/%.32s", dir, names[i]);
        snprintf(name, sizeof name, "group-%.32s", names[i]);
        if (snap_quarantine_orphan(&cfg, p, name, err) != 0) {
            SRV_WARN("js", "group %s is not in the meta state and stays: %s",
                     names[i], err);
            continue;
        }
        SRV_WARN("js",
                 "group %s is not in the meta state: moved to "
                 "quarantine/orphans/%s (never deleted; remove it by hand "
                 "once it is known to be unneeded)",
                 names[i], name);
        moved++;
    }
    return moved;
}

void srv_js_orphans_tick(struct srv_js *js)
{
    struct replica_info ri;
    if (js->jc == NULL || js->orphans_checked || js->meta == NULL ||
        js->streams_unopened != 0) {
        return;
    }
    replica_info(js->meta, &ri);
    if (!ri.started || ri.faulty != 0 || ri.amnesiac || ri.leader == 0 ||
        ri.last_index == 0 || ri.commit != ri.last_index ||
        ri.applied != ri.last_index) {
        return;
    }
    js->orphans_checked = true;
    unsigned n = srv_js_orphans_check(js);
    SRV_INFO("js",
             "meta state complete at index %" PRIu64
             ": %u group director%s moved to quarantine/orphans",
             (uint64_t)ri.applied, n, n == 1 ? "y" : "ies");
}
