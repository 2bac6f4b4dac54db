/* srv_js: the engine (store, host, meta group of one, streams), pending
 * replies keyed by the replica ctx, the publish-path intercept and
 * server-originated messages. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <xxhash.h>

#include "keel/error.h"
#include "srv_admin.h"
#include "srv_consumer.h"
#include "srv_conn.h"
#include "srv_js_forward.h"
#include "srv_js_index.h"
#include "srv_js_status.h"
#include "srv_js_int.h"
#include "srv_js_unsupported.h"
#include "srv_js_snap.h"
#include "srv_js_table.h"
#include "srv_log.h"
#include "srv_turn.h"
#include "srv_metrics.h"
#include "srv_parser.h"
#include "srv_route.h"
#include "srv_server.h"

int64_t srv_js_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct srv_server *srv_js_server(const struct srv_js *js)
{
    return js->srv;
}

void srv_js_set_consumer_ops(struct srv_js *js,
                             const struct srv_consumer_ops *ops)
{
    js->cops = ops;
}

const struct srv_consumer_ops *srv_js_consumer_ops(const struct srv_js *js)
{
    return js->cops;
}

/* ---- pending replies ---- */

uint64_t srv_js_pending_add(struct srv_js *js, enum srv_js_pend_kind kind,
                            struct srv_stream *st, const char *reply,
                            bool *full)
{
    *full = false;
    /* A rollup needs its record even without a reply: it chains the
     * PURGE to the PUBLISH. */
    if ((reply == NULL || reply[0] == '\0') && kind != SRV_JS_PEND_ROLLUP) {
        return 0;
    }
    reply = reply != NULL ? reply : "";
    size_t n = strlen(reply);
    struct srv_js_pending *p = malloc(sizeof *p + n + 1);
    if (js->pending.count >= SRV_JS_PENDING_MAX || p == NULL) {
        free(p);
        *full = true;
        return 0;
    }
    p->id = ++js->next_id;
    p->kind = kind;
    p->added_us = kind == SRV_JS_PEND_PUB ? srv_metrics_now_us() : 0;
    p->st = st;
    p->rollup = 0;
    p->seq = 0;
    memcpy(p->reply, reply, n + 1);
    if (srv_hmap_put(&js->pending, (const char *)&p->id, sizeof p->id, p) !=
        0) {
        free(p);
        *full = true;
        return 0;
    }
    return p->id;
}

uint64_t srv_js_pending_readd(struct srv_js *js, struct srv_js_pending *p)
{
    ASSERT(p != NULL);
    p->id = ++js->next_id;
    if (js->pending.count >= SRV_JS_PENDING_MAX ||
        srv_hmap_put(&js->pending, (const char *)&p->id, sizeof p->id, p) !=
            0) {
        return 0;
    }
    return p->id;
}

struct srv_js_pending *srv_js_pending_take(struct srv_js *js, uint64_t ctx)
{
    if (ctx == 0) {
        return NULL;
    }
    struct srv_js_pending *p =
        srv_hmap_del(&js->pending, (const char *)&ctx, sizeof ctx);
    if (p != NULL && p->kind == SRV_JS_PEND_PUB) {
        srv_metrics_puback_observe(js->srv, srv_metrics_now_us() - p->added_us);
    }
    return p;
}

void srv_js_pending_drop_stream(struct srv_js *js, struct srv_stream *st)
{
    size_t pos = 0;
    struct srv_hmap_slot *s;
    /* Deleting while iterating is not allowed: collect in rounds, each
     * bounded by SRV_JS_LIST_PAGE ids, until none is left. */
    for (;;) {
        uint64_t ids[SRV_JS_LIST_PAGE];
        size_t n = 0;
        pos = 0;
        while (n < SRV_JS_LIST_PAGE &&
               (s = srv_hmap_next(&js->pending, &pos)) != NULL) {
            struct srv_js_pending *p = s->value;
            if (p->st == st) {
                ids[n++] = p->id;
            }
        }
        for (size_t i = 0; i < n; i++) {
            free(srv_js_pending_take(js, ids[i]));
        }
        if (n < SRV_JS_LIST_PAGE) {
            return;
        }
    }
}

/* ---- replies and server-originated messages ---- */

int srv_js_deliver(struct srv_js *js, const char *route_subject,
                   const char *wire_subject, size_t wire_len, const char *reply,
                   const void *hdr, size_t hlen, const void *data, size_t dlen)
{
    size_t rlen = strlen(route_subject);
    if (rlen == 0 || rlen > SRV_JS_SUBJECT_BYTES_MAX || wire_len == 0) {
        return KEEL_EINVAL;
    }
    int rv =
        srv_route_deliver_internal(js->srv, route_subject, rlen, wire_subject,
                                   wire_len, reply, hdr, hlen, data, dlen);
    /* The subscriber may be on another node (a pull request made there). */
    (void)srv_js_fwd_deliver(js, route_subject, rlen, wire_subject, wire_len,
                             reply, hdr, hlen, data, dlen);
    return rv;
}

int srv_js_send(struct srv_js *js, const char *subject, const char *reply,
                const void *hdr, size_t hlen, const void *data, size_t dlen)
{
    return srv_js_deliver(js, subject, subject, strlen(subject), reply, hdr,
                          hlen, data, dlen);
}

void srv_js_reply_json(struct srv_js *js, const char *reply, json_t *o)
{
    if (o == NULL) {
        return;
    }
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (s != NULL && reply != NULL && reply[0] != '\0' &&
        srv_js_send(js, reply, NULL, NULL, 0, s, strlen(s)) != 0) {
        SRV_WARN("js", "reply to %s not queued", reply);
    }
    free(s);
}

void srv_js_reply_err(struct srv_js *js, const char *reply, const char *kind,
                      enum srv_js_err err, const char *detail)
{
    json_t *o = NULL;
    char msg[KEEL_ERRMSG_MAX];
    js->api_errors++;
    if (srv_js_err_json(kind, err, detail, &o, msg) == 0) {
        srv_js_reply_json(js, reply, o);
    }
}

/* ---- streams ---- */

int srv_js_find_stream(struct srv_js *js, const char *name,
                       struct srv_stream **out)
{
    *out = srv_js_index_find(js, name);
    return *out != NULL ? 0 : KEEL_ENOENT;
}

struct srv_stream *srv_js_stream_for_subject(struct srv_js *js,
                                             const char *subj, size_t len)
{
    return srv_js_index_match(js, subj, len);
}

static void streams_remove(struct srv_js *js, struct srv_stream *st)
{
    srv_js_index_leave(js, st);
    for (uint32_t i = 0; i < js->nstreams; i++) {
        if (js->streams[i] == st) {
            /* Keep creation order (NAMES/LIST pages stay stable). */
            memmove(&js->streams[i], &js->streams[i + 1],
                    (js->nstreams - i - 1) * sizeof *js->streams);
            js->nstreams--;
            return;
        }
    }
}

/* ---- the meta group: create / update / delete entries (JSON) ---- */

int srv_js_meta_propose(struct srv_js *js, json_t *entry, uint64_t ctx,
                        char *errmsg)
{
    int rv = js->jc != NULL ? srv_js_meta_place(js, entry, errmsg) : 0;
    if (rv != 0) {
        json_decref(entry);
        return rv;
    }
    char *s = json_dumps(entry, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(entry);
    if (s == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "meta entry");
    }
    rv = KEEL_ENOTLEADER;
    if (js->meta != NULL && js->meta_leader) {
        rv = replica_propose(js->meta, RAFT_ENTRY_NORMAL, s,
                             (uint32_t)strlen(s), ctx, errmsg);
    } else {
        keel_err(rv, errmsg, "the JetStream meta group has no leader yet");
    }
    free(s);
    return rv;
}

static void meta_reply_err(struct srv_js *js, uint64_t ctx, enum srv_js_err err,
                           const char *detail)
{
    static const char *kinds[] = {
        [SRV_JS_PEND_CREATE] = "stream_create_response",
        [SRV_JS_PEND_UPDATE] = "stream_update_response",
        [SRV_JS_PEND_DELETE] = "stream_delete_response"};
    struct srv_js_pending *p = srv_js_pending_take(js, ctx);
    if (p != NULL && p->kind >= SRV_JS_PEND_CREATE &&
        p->kind <= SRV_JS_PEND_DELETE) {
        srv_js_reply_err(js, p->reply, kinds[p->kind], err, detail);
    }
    free(p);
}

/* A create or update of st applied from the meta log: the waiting request
 * ctx (if this node holds it) is re-filed under the same id, now bound to
 * the stream, and answered once the stream's group has the config. */
static void meta_applied(struct srv_js *js, struct srv_stream *st, uint64_t ctx,
                         bool created)
{
    struct srv_js_pending *p = srv_js_pending_take(js, ctx);

    ASSERT(st != NULL);
    if (p != NULL) {
        p->st = st;
        if (srv_hmap_put(&js->pending, (const char *)&p->id, sizeof p->id, p) !=
            0) {
            free(p);
            ctx = 0;
        }
    }
    ctx = srv_js_meta_answer(js, st, ctx, created);
    srv_stream_config_request(st, ctx);
}

static void meta_create(struct srv_js *js, const json_t *e,
                        const struct srv_stream_config *cfg, uint64_t ctx)
{
    struct srv_stream *st = NULL;
    struct srv_jsc_placement pl;
    char err[KEEL_ERRMSG_MAX];
    if (srv_jsc_placement_from_json(e, &pl) != 0) {
        meta_reply_err(js, ctx, SRV_JS_EBAD_REQUEST, "bad placement");
        return;
    }
    srv_js_meta_learn(js, &pl);
    if (srv_js_find_stream(js, cfg->name, &st) == 0) {
        meta_reply_err(js, ctx, SRV_JS_ESTREAM_NAME_IN_USE, NULL);
        return;
    }
    if (js->nstreams >= SRV_JS_STREAMS_MAX) {
        meta_reply_err(js, ctx, SRV_JS_EMAX_STREAMS, NULL);
        return;
    }
    uint64_t nonce = (uint64_t)json_integer_value(json_object_get(e, "nonce"));
    int64_t created = json_integer_value(json_object_get(e, "created"));
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_STREAM_OPEN);
    int rv = srv_stream_open_placed(js, cfg, nonce, created, &pl, &st, err);
    srv_turn_leave(ph);
    if (rv != 0) {
        SRV_ERROR("js", "stream %s not opened: %s", cfg->name, err);
        js->streams_unopened++;
        snprintf(js->unopened_why, sizeof js->unopened_why,
                 "stream %.64s not opened: %.160s", cfg->name, err);
        meta_reply_err(js, ctx, SRV_JS_EUNAVAILABLE, NULL);
        return;
    }
    js->streams[js->nstreams++] = st;
    srv_js_index_join(js, st);
    ph = srv_turn_enter(SRV_TURN_META_REPLY);
    meta_applied(js, st, ctx, true);
    srv_turn_leave(ph);
}

static void meta_update(struct srv_js *js, struct srv_stream *st,
                        const json_t *e, const struct srv_stream_config *cfg,
                        uint64_t ctx)
{
    char err[KEEL_ERRMSG_MAX];
    struct srv_jsc_placement pl;
    struct srv_stream_config copy;
    /* A num_replicas change carries the new placement (issue 9). */
    if (js->jc != NULL && srv_jsc_placement_from_json(e, &pl) == 0 &&
        pl.n > 0 && memcmp(pl.gid, st->gid.b, sizeof pl.gid) == 0) {
        srv_stream_cluster_replace(st, &pl);
    }
    memset(&copy, 0, sizeof copy);
    if (srv_stream_config_copy(cfg, &copy, err) != 0) {
        meta_reply_err(js, ctx, SRV_JS_EUNAVAILABLE, NULL);
        return;
    }
    srv_js_index_leave(js, st);
    srv_stream_config_free(&st->cfg);
    st->cfg = copy;
    srv_js_index_join(js, st);
    meta_applied(js, st, ctx, false);
}

static void meta_delete(struct srv_js *js, struct srv_stream *st, uint64_t ctx)
{
    streams_remove(js, st);
    srv_stream_close(st, true);
    struct srv_js_pending *p = srv_js_pending_take(js, ctx);
    if (p != NULL) {
        srv_js_reply_json(
            js, p->reply,
            json_pack("{s:s, s:b}", "type",
                      "io.nats.jetstream.api.v1.stream_delete_response",
                      "success", 1));
        free(p);
    }
}

/* ---- a meta snapshot installed from the leader ---- */

/* Same members (node, incarnation, moved mark) in the same order. */
static bool placement_equal(const struct srv_jsc_placement *a,
                            const struct srv_jsc_placement *b)
{
    if (a->n != b->n || memcmp(a->gid, b->gid, sizeof a->gid) != 0) {
        return false;
    }
    for (uint32_t i = 0; i < a->n; i++) {
        if (a->m[i].node != b->m[i].node || a->m[i].inc != b->m[i].inc ||
            a->m[i].added != b->m[i].added) {
            return false;
        }
    }
    return true;
}

/* The create entry of a names st's group in the snapshot a, or NULL: a
 * stream of the same name but another group was deleted and created
 * again while this node was behind. */
static const json_t *snapshot_entry_of(const json_t *a,
                                       const struct srv_stream *st)
{
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        struct srv_jsc_placement pl;
        if (name == NULL || strcmp(name, st->cfg.name) != 0) {
            continue;
        }
        if (st->place.n == 0) {
            return e; /* not clustered: the name is the stream */
        }
        bool same = srv_jsc_placement_from_json(e, &pl) == 0 && pl.n > 0 &&
                    memcmp(pl.gid, st->gid.b, sizeof pl.gid) == 0;
        return same ? e : NULL;
    }
    return NULL;
}

/* Bring a stream this node has up to the snapshot's entry e: the
 * placement first (a move), then the config (an update). */
static void install_existing(struct srv_js *js, struct srv_stream *st,
                             const json_t *e)
{
    struct srv_stream_config cfg;
    struct srv_jsc_placement pl;
    enum srv_js_err jerr = SRV_JS_OK;
    char err[KEEL_ERRMSG_MAX];
    if (js->jc != NULL && srv_jsc_placement_from_json(e, &pl) == 0 &&
        pl.n > 0 && !placement_equal(&pl, &st->place)) {
        SRV_INFO("js", "stream %s: placement from the meta snapshot",
                 st->cfg.name);
        srv_stream_cluster_replace(st, &pl);
    }
    memset(&cfg, 0, sizeof cfg);
    if (srv_stream_config_parse(json_object_get(e, "config"), &cfg, &jerr,
                                err) != 0) {
        SRV_WARN("js", "stream %s: meta snapshot config not applied: %s",
                 st->cfg.name, err);
        return;
    }
    if (!srv_stream_config_equal(&st->cfg, &cfg)) {
        SRV_INFO("js", "stream %s: config from the meta snapshot",
                 st->cfg.name);
        meta_update(js, st, e, &cfg, 0);
    }
    srv_stream_config_free(&cfg);
}

void srv_js_meta_install(struct srv_js *js, const json_t *a)
{
    /* Streams the snapshot lacks: deleted while this node was behind,
     * the delete compacted away. Closed, never deleted (docs/design.md §5):
     * their group directories become orphans, quarantined once the meta state
     * is complete again (srv_js_orphans_tick). */
    for (uint32_t k = 0; k < js->nstreams;) {
        struct srv_stream *st = js->streams[k];
        if (snapshot_entry_of(a, st) != NULL) {
            k++;
            continue;
        }
        SRV_WARN("js",
                 "stream %s is not in the leader's meta snapshot (deleted "
                 "meanwhile): closed here, its files go to "
                 "quarantine/orphans",
                 st->cfg.name);
        streams_remove(js, st);
        srv_stream_close(st, false);
    }
    size_t i;
    const json_t *e;
    json_array_foreach(a, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        struct srv_stream *st = NULL;
        if (name != NULL && srv_js_find_stream(js, name, &st) == 0) {
            install_existing(js, st, e);
        } else {
            srv_js_meta_apply_json(js, e, 0); /* a create */
        }
    }
    /* The leader's order (NAMES and LIST pages, snapshot bytes): every
     * stream here is now one of a's, each once. Bounded by
     * SRV_JS_STREAMS_MAX. */
    uint32_t n = 0;
    json_array_foreach(a, i, e)
    {
        const char *name = json_string_value(json_object_get(e, "name"));
        for (uint32_t k = n; name != NULL && k < js->nstreams; k++) {
            if (strcmp(js->streams[k]->cfg.name, name) == 0) {
                struct srv_stream *t = js->streams[n];
                js->streams[n++] = js->streams[k];
                js->streams[k] = t;
                break;
            }
        }
    }
    js->orphans_checked = false; /* look again once complete */
}

/* Apply one meta entry (create, update or delete of a stream config). */
void srv_js_meta_apply_json(struct srv_js *js, const json_t *e, uint64_t ctx)
{
    const char *op = json_string_value(json_object_get(e, "op"));
    const char *name = json_string_value(json_object_get(e, "name"));
    struct srv_stream_config cfg;
    enum srv_js_err jerr = SRV_JS_OK;
    char err[KEEL_ERRMSG_MAX];
    struct srv_stream *st = NULL;
    memset(&cfg, 0, sizeof cfg);
    if (op == NULL || name == NULL) {
        meta_reply_err(js, ctx, SRV_JS_EBAD_REQUEST, NULL);
        return;
    }
    bool found = srv_js_find_stream(js, name, &st) == 0;
    if (strcmp(op, "move") == 0) {
        if (found) {
            srv_stream_cluster_move(st, e);
        }
        return;
    }
    if (strcmp(op, "delete") == 0) {
        if (found) {
            meta_delete(js, st, ctx);
        } else {
            meta_reply_err(js, ctx, SRV_JS_ESTREAM_NOT_FOUND, NULL);
        }
        return;
    }
    if (srv_stream_config_parse(json_object_get(e, "config"), &cfg, &jerr,
                                err) != 0) {
        meta_reply_err(js, ctx, jerr, err);
    } else if (strcmp(op, "create") == 0) {
        meta_create(js, e, &cfg, ctx);
    } else if (strcmp(op, "update") == 0 && found) {
        meta_update(js, st, e, &cfg, ctx);
    } else {
        meta_reply_err(js, ctx, SRV_JS_ESTREAM_NOT_FOUND, NULL);
    }
    srv_stream_config_free(&cfg);
}

static void meta_apply(struct replica *r, uint64_t index, uint64_t term,
                       uint8_t type, const void *payload, uint32_t len,
                       uint64_t ctx, void *arg)
{
    struct srv_js *js = arg;
    json_error_t jerr;
    (void)r;
    (void)term;
    if (type == RAFT_ENTRY_CONFIG &&
        raft_config_decode(payload, len, &js->meta_cfg) != 0) {
        SRV_WARN("js", "meta index %" PRIu64 ": undecodable configuration",
                 index);
    } else if (type == RAFT_ENTRY_CONFIG) {
        srv_admin_config_applied(js, index, ctx);
    }
    if (type != RAFT_ENTRY_NORMAL || js->stopping) {
        return;
    }
    json_t *e = json_loadb(payload, len, 0, &jerr);
    if (e == NULL) {
        SRV_WARN("js", "meta index %" PRIu64 " is not JSON: %s", index,
                 jerr.text);
        meta_reply_err(js, ctx, SRV_JS_EBAD_REQUEST, NULL);
        return;
    }
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_META_APPLY);
    srv_js_meta_apply_json(js, e, ctx);
    srv_turn_leave(ph);
    json_decref(e);
}

static void meta_role(struct replica *r, uint8_t role, raft_node leader,
                      void *arg)
{
    struct srv_js *js = arg;
    struct replica_info ri;
    replica_info(r, &ri);
    js->meta_leader = role == RAFT_LEADER;
    SRV_INFO("js",
             "meta group: %s of term %" PRIu64 " (leader node %" PRIu64
             ", commit %" PRIu64 ", applied %" PRIu64 ")",
             raft_role_name(role), ri.term, (uint64_t)leader, ri.commit,
             ri.applied);
    srv_js_meta_role_cluster(js, r, leader);
    if (js->meta_leader) {
        srv_metrics_election(js->srv);
    }
}

static void meta_failed(struct replica *r, int rv, const char *msg, void *arg)
{
    struct srv_js *js = arg;
    (void)r;
    SRV_ERROR("js", "JetStream meta group stopped: %s (%s)", msg,
              keel_strerror(rv));
    js->meta_leader = false;
}

static void meta_warn(struct replica *r, const char *msg, void *arg)
{
    (void)r;
    (void)arg;
    SRV_GWARN("js", "_meta_", "%s", msg);
}

/* ---- lifecycle ---- */

static void on_tick(uv_timer_t *t)
{
    struct srv_js *js = t->data;
    int64_t now = srv_js_now_ns();
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_JS_TICK);
    if (js->meta != NULL && js->meta_leader_node == 0 &&
        srv_log_enabled(SRV_LOG_DEBUG)) {
        struct replica_info ri;
        replica_info(js->meta, &ri);
        SRV_DEBUG("js",
                  "meta group without a leader: role %s, term %" PRIu64
                  ", last %" PRIu64 ", persisted %" PRIu64 ", commit %" PRIu64
                  ", applied %" PRIu64,
                  raft_role_name(ri.role), ri.term, ri.last_index, ri.persisted,
                  ri.commit, ri.applied);
    }
    srv_js_fwd_tick(js);
    srv_admin_tick(js);
    srv_js_orphans_tick(js);
    for (uint32_t i = 0; i < js->nstreams; i++) {
        srv_stream_maybe_tick(js->streams[i], now);
    }
    srv_turn_leave(ph);
}

static void store_fatal(void *arg, const char *msg)
{
    (void)arg;
    SRV_ERROR("js", "store: %s", msg);
}

static void scrub_note(void *arg, const char *msg)
{
    (void)arg;
    SRV_WARN("js", "%s", msg);
}

static int open_store(struct srv_js *js, const char *dir, char *errmsg)
{
    char path[PATH_MAX];
    struct store_node_report rep;
    int n = snprintf(path, sizeof path, "%s/js", dir);
    if (n < 0 || (size_t)n >= sizeof path) {
        return keel_err(KEEL_ECONFIG, errmsg, "store dir %s is too long", dir);
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        return keel_err(KEEL_EIO, errmsg, "cannot create %s: %s", path,
                        strerror(errno));
    }
    int rv = replica_host_create(js->loop, &js->host, errmsg);
    if (rv != 0) {
        return rv;
    }
    struct store_config sc = {.data_dir = path,
                              .segment_bytes = js->srv->cfg->segment_bytes,
                              .wakeup_cb = replica_host_wakeup,
                              .wakeup_arg = js->host,
                              .fatal_cb = store_fatal,
                              .fatal_arg = js,
                              .sole_member =
                                  js->srv->cfg->cluster_listen[0] == '\0'};
    memset(&rep, 0, sizeof rep);
    rv = store_open(&sc, &js->store, &rep, errmsg);
    if (rv != 0) {
        return rv;
    }
    replica_host_attach(js->host, js->store);
    /* Stream and meta groups snapshot their state (docs/design.md §5). */
    rv = replica_host_snapshots(js->host, path, store_fatal, js, errmsg);
    rv = rv == 0
             ? replica_host_scrub_start(js->host, js->srv->cfg->scrub_pass_ms,
                                        0, scrub_note, js, errmsg)
             : rv;
    if (rv != 0) {
        return rv;
    }
    js->inc = replica_incarnation_of(rep.incarnation);
    if (rep.meta_reset) {
        SRV_WARN("js", "store metadata was reset: %s", rep.meta_reset_reason);
    }
    if (rep.meta_migrated > 0) {
        SRV_INFO("js",
                 "store metadata: %zu meta.lmdb values rewritten in envelope "
                 "version 2 (the checksum covers the key)",
                 rep.meta_migrated);
    }
    return 0;
}

void srv_js_group_options(const struct srv_js *js, struct store_fsync fsync,
                          uint64_t seed, struct raft_config *boot,
                          struct replica_options *opt)
{
    *boot = (struct raft_config){.n = 1};
    boot->servers[0] = (struct raft_server){
        .node = 1, .incarnation = js->inc, .role = RAFT_VOTER};
    *opt = (struct replica_options){
        .self = 1,
        .incarnation = js->inc,
        .bootstrap = boot,
        .fsync = fsync,
        .election_timeout_ms = SRV_JS_ELECTION_MS,
        .heartbeat_ms = SRV_JS_ELECTION_MS / 5,
        .seed = seed,
        .snap_entries = js->srv->cfg->snapshot_entries,
    };
}

/* The meta group: a group of one on a node that is not clustered; with
 * the cluster layer, the voters of boot (NULL: opened from disk). */
static int open_meta(struct srv_js *js, const struct raft_config *boot,
                     char *errmsg)
{
    struct store_group_id gid;
    struct raft_config rc;
    struct replica_options opt;
    srv_js_meta_gid(&gid);
    srv_js_group_options(js, (struct store_fsync){STORE_FSYNC_ALWAYS, 0},
                         (uint64_t)srv_js_now_ns(), &rc, &opt);
    opt.apply_turn_max = SRV_JS_META_APPLY_TURN_MAX;
    opt.store_first = true;
    struct replica_callbacks cbs = {.apply = meta_apply,
                                    .role_changed = meta_role,
                                    .failed = meta_failed,
                                    .warn = meta_warn,
                                    .snapshot = srv_js_snap_encode,
                                    .restore = srv_js_snap_restore,
                                    .arg = js};
    if (js->jc != NULL) {
        int rv = srv_js_meta_cluster_opts(js, boot, &opt, &cbs, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return replica_open(js->host, &gid, &opt, &cbs, &js->meta, errmsg);
}

int srv_js_meta_bootstrap(struct srv_js *js, const struct raft_config *cfg,
                          char *errmsg)
{
    ASSERT(js->jc != NULL);
    return js->meta != NULL ? 0 : open_meta(js, cfg, errmsg);
}

/* A damaged group (faulty or amnesiac) never leads until repaired or
 * caught up by a peer: waiting for it would only delay the others. */
static bool group_caught_up(struct replica *r)
{
    struct replica_info ri;
    replica_info(r, &ri);
    return (ri.role == RAFT_LEADER && ri.applied == ri.last_index) ||
           (ri.faulty != 0 && ri.applied + 1 >= ri.faulty) || ri.amnesiac;
}

static bool ready(struct srv_js *js)
{
    if (js->meta == NULL || !group_caught_up(js->meta)) {
        return false;
    }
    for (uint32_t i = 0; i < js->nstreams; i++) {
        struct srv_stream *st = js->streams[i];
        if (!st->failed && (st->r == NULL || !group_caught_up(st->r))) {
            return false;
        }
    }
    return true;
}

/* Before keeld opens its client port: run the loop until the meta group
 * and every stream replayed their logs and lead, so a client never sees a
 * half-open JetStream. Bounded by SRV_JS_READY_MS, and cut short by a stop
 * signal (held pending while keeld starts). The loop wakes at least every
 * SRV_JS_TICK_MS (the tick timer), so a stop waits no longer than that. */
static void wait_ready(struct srv_js *js)
{
    uint64_t start = uv_now(js->loop);
    while (!ready(js) && uv_now(js->loop) - start < SRV_JS_READY_MS) {
        if (srv_server_stop_pending()) {
            SRV_INFO("js", "stop signal while JetStream starts: not waiting "
                           "for it to be ready");
            return;
        }
        uv_run(js->loop, UV_RUN_ONCE);
        uv_update_time(js->loop);
    }
    if (!ready(js)) {
        SRV_WARN("js",
                 "JetStream not ready after %d ms: requests answer "
                 "503 until it is",
                 SRV_JS_READY_MS);
    } else {
        SRV_INFO("js", "JetStream ready: %u streams", js->nstreams);
    }
}

int srv_js_open(struct srv_server *srv, const char *store_dir,
                struct srv_js **out, char *errmsg)
{
    struct srv_js *js = calloc(1, sizeof *js);
    *out = NULL;
    if (js == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "JetStream engine");
    }
    js->srv = srv;
    js->loop = srv->loop;
    srv_hmap_init(&js->pending);
    js->streams = calloc(SRV_JS_STREAMS_MAX, sizeof *js->streams);
    int rv = js->streams == NULL ? KEEL_ENOMEM : srv_js_index_init(js);
    if (rv == 0) {
        /* Consumer hooks first: streams replay their consumer entries. */
        rv = srv_consumer_attach(js, errmsg);
    }
    if (rv == 0) {
        rv = open_store(js, store_dir, errmsg);
    }
    if (rv == 0) {
        bool alone = srv->cfg->cluster_listen[0] == '\0';
        rv = alone ? srv_js_alone_open(js, errmsg)
                   : srv_js_cluster_open(js, store_dir, errmsg);
        rv = rv == 0 && alone ? open_meta(js, NULL, errmsg) : rv;
    }
    if (rv != 0) {
        srv_js_stop(js);
        uv_run(js->loop, UV_RUN_NOWAIT);
        srv_js_close(js);
        return rv;
    }
    uv_timer_init(js->loop, &js->tick);
    js->tick.data = js;
    js->tick_open = true;
    uv_timer_start(&js->tick, on_tick, SRV_JS_TICK_MS, SRV_JS_TICK_MS);
    srv_js_mirror_open(js);
    if (js->jc == NULL) {
        wait_ready(js); /* clustered: the meta group forms after start */
        /* Only a complete meta state with every stream open may say a
         * group directory is an orphan (docs/design.md §5: moved, never
         * deleted). */
        if (ready(js) && js->streams_unopened == 0) {
            (void)srv_js_orphans_check(js);
        }
    }
    *out = js;
    return 0;
}

void srv_js_stop(struct srv_js *js)
{
    if (js->stopping) {
        return;
    }
    js->stopping = true;
    srv_js_fwd_detach(js);
    srv_consumer_detach(js);
    srv_jsc_stop(js->jc);
    /* Bounded by SRV_JS_STREAMS_MAX. */
    while (js->nstreams > 0) {
        struct srv_stream *st = js->streams[--js->nstreams];
        srv_js_index_leave(js, st);
        srv_stream_close(st, false);
    }
    if (js->meta != NULL) {
        replica_close(js->meta);
        js->meta = NULL;
    }
    if (js->tick_open) {
        uv_close((uv_handle_t *)&js->tick, NULL);
        js->tick_open = false;
    }
    srv_js_mirror_close(js);
    /* The store's sync threads wake the loop through the host's async
     * handle after each batch: join them before that handle goes (an
     * interval sync after replica_host_destroy was a SIGSEGV in
     * uv_async_send on SIGTERM, fault suite finding F11). */
    if (js->store != NULL) {
        store_close(js->store, true);
        js->store = NULL;
    }
    if (js->host != NULL) {
        replica_host_destroy(js->host);
        js->host = NULL;
    }
}

void srv_js_close(struct srv_js *js)
{
    if (js == NULL) {
        return;
    }
    ASSERT(js->stopping);
    if (js->store != NULL) {
        store_close(js->store, true);
    }
    srv_hmap_close_free(&js->pending);
    srv_admin_free(js);
    srv_js_index_close(js);
    free(js->streams);
    srv_jsc_free(js->jc);
    free(js);
}

/* ---- the publish path ---- */

/* A publish captured by st: propose it; the PubAck (or error) goes to the
 * reply from the apply callback, after commit. */
static void capture(struct srv_js *js, struct srv_stream *st,
                    const struct srv_cmd *cmd, const char *reply)
{
    char err[KEEL_ERRMSG_MAX];
    bool full = false;
    int rollup = srv_js_rollup_scope(cmd->payload, cmd->hdr_bytes);
    uint64_t ctx =
        rollup != 0 ? srv_js_pending_add(js, SRV_JS_PEND_ROLLUP, st,
                                         st->cfg.no_ack ? "" : reply, &full)
        : st->cfg.no_ack
            ? 0
            : srv_js_pending_add(js, SRV_JS_PEND_PUB, st, reply, &full);
    int rv = full ? KEEL_EBUSY : 0;
    if (rollup != 0 && ctx == 0) {
        rv = KEEL_EBUSY;
    }
    if (rv == 0 && rollup != 0) {
        struct srv_js_pending *p =
            srv_hmap_get(&js->pending, (const char *)&ctx, sizeof ctx);
        ASSERT(p != NULL);
        p->rollup = (uint8_t)rollup;
    }
    if (rv == 0 && !srv_stream_is_leader(st)) {
        rv = KEEL_ENOTLEADER;
    }
    if (rv == 0 && cmd->total_bytes > SRV_JS_MSG_BYTES_MAX) {
        rv = KEEL_ETOOBIG;
    }
    enum srv_js_err je = SRV_JS_OK;
    char detail[SRV_JS_ERR_DESC_BYTES_MAX] = "";
    if (rv == 0) {
        rv = srv_js_publish_headers_check(&st->cfg, cmd->payload,
                                          cmd->hdr_bytes, &je, detail);
    }
    if (rv == 0) {
        rv = srv_js_limits_check_publish(js, st, &je);
    }
    if (rv == 0) {
        rv = srv_stream_publish(st, cmd->subject.ptr, cmd->subject.len,
                                cmd->payload, cmd->hdr_bytes,
                                cmd->payload + cmd->hdr_bytes,
                                cmd->total_bytes - cmd->hdr_bytes, ctx, err);
    }
    if (rv == 0) {
        return;
    }
    /* Not proposed: never acked, so say so now. */
    free(srv_js_pending_take(js, ctx));
    if (st->cfg.no_ack || reply[0] == '\0') {
        return;
    }
    json_t *o = json_object();
    if (je == SRV_JS_OK && rv == KEEL_ELIMIT) {
        je = SRV_JS_ETRANSFORM_SUBJECT; /* srv_stream_subject_for */
        snprintf(detail, sizeof detail, "%s", err);
    }
    if (je == SRV_JS_OK) {
        je = rv == KEEL_ETOOBIG ? SRV_JS_EMSG_SIZE : SRV_JS_EUNAVAILABLE;
    }
    if (o != NULL &&
        srv_js_err_add(o, je, detail[0] != '\0' ? detail : NULL, err) == 0) {
        json_object_set_new(o, "stream", json_string(st->cfg.name));
        json_object_set_new(o, "seq", json_integer(0));
    }
    srv_js_reply_json(js, reply, o);
}

/* Clustered, before this node ever knew a meta leader (the cluster forms,
 * or this node just started and has not heard from the leader): an API
 * request has nobody to answer it yet, and parking it would leave a client
 * that connects the moment the port opens with a timeout. Answer 503 at
 * once, as nats-server does once it gives up on a leader (10008). Later
 * leader changes park requests instead (srv_js_forward.c): those end in
 * a leader, this one may never. Returns true when it answered. */
static bool not_ready(struct srv_js *js, const char *reply)
{
    if (js->meta_leader_seen || js->jc == NULL) {
        return false;
    }
    if (srv_js_meta_leader_name(js) != NULL) {
        js->meta_leader_seen = true;
        return false;
    }
    js->api_total++;
    if (reply[0] != '\0') {
        srv_js_reply_err(js, reply, "api_response", SRV_JS_ECLUSTER_BUSY,
                         "JetStream is not ready yet: this node knows no "
                         "meta leader (the cluster is forming or electing); "
                         "retry, or wait until /healthz answers 200");
    }
    return true;
}

/* One table lookup (srv_js_table.c) decides what a publish is: a request
 * to answer here, to forward, or a publish a stream may capture. */
bool srv_js_intercept(struct srv_js *js, struct srv_conn *c,
                      const struct srv_cmd *cmd)
{
    const char *s = cmd->subject.ptr;
    size_t n = cmd->subject.len;
    char reply[SRV_CONTROL_LINE_BYTES_MAX + 1];
    char api[SRV_CONTROL_LINE_BYTES_MAX];
    struct srv_cmd mapped;
    (void)c;
    if (js->stopping || cmd->reply.len >= sizeof reply) {
        return false;
    }
    /* $JS.<domain>.API.X is $JS.API.X from here on (srv_js_domain.c). */
    if (n > 0 && s[0] == '$' &&
        srv_js_domain_subject(js, s, n, api, sizeof api, &n)) {
        mapped = *cmd;
        mapped.subject.ptr = api;
        mapped.subject.len = n;
        cmd = &mapped;
        s = api;
    }
    if (cmd->reply.len > 0) { /* no reply: ptr may be NULL (UBSan) */
        memcpy(reply, cmd->reply.ptr, cmd->reply.len);
    }
    reply[cmd->reply.len] = '\0';
    const struct srv_js_api_entry *e = srv_js_api_lookup(s, n);
    if (e != NULL) {
        const struct srv_js_req q = {
            .cmd = cmd,
            .subject = s,
            .subject_len = n,
            .reply = reply,
            .body = cmd->payload + cmd->hdr_bytes,
            .body_len = cmd->total_bytes - cmd->hdr_bytes,
        };
        if ((e->flags & SRV_JS_API_LOCAL) != 0) {
            if (e->fn(js, &q)) {
                return true;
            }
        } else {
            if ((e->flags & SRV_JS_API_READY) != 0 && not_ready(js, reply)) {
                return true;
            }
            /* Clustered: only the leader answers (forwarded there). */
            if (srv_js_fwd_request(js, e, cmd, reply) || e->fn(js, &q)) {
                return true;
            }
        }
    }
    struct srv_stream *st = srv_js_stream_for_subject(js, s, n);
    if (st == NULL) {
        return false;
    }
    if (srv_js_fwd_publish(js, st, cmd, reply)) {
        return true; /* proposed by the stream leader, never here */
    }
    capture(js, st, cmd, reply);
    return true;
}

/* ---- the hooks keeld registers with the NATS core (main.c) ---- */

static bool hook_take(void *arg, struct srv_conn *c, const struct srv_cmd *cmd)
{
    return srv_js_intercept(arg, c, cmd);
}

/* Its stream's create may not be applied here yet. */
static bool hook_park(void *arg, const struct srv_cmd *cmd, bool no_responders)
{
    return srv_js_fwd_late_park(arg, cmd, no_responders);
}

static uint32_t hook_hand_over(void *arg, bool start)
{
    return srv_js_hand_over(arg, start);
}

static void hook_stop(void *arg)
{
    srv_js_stop(arg);
}

const struct srv_pub_hooks srv_js_pub_hooks = {
    .take = hook_take,
    .park = hook_park,
    .hand_over = hook_hand_over,
    .stop = hook_stop,
};
