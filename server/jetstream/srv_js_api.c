/* srv_js_api: the $JS.API stream handlers (docs/protocol.md §2.3, §2.4). Reads
 * answer at once from the applied state; writes are proposed (stream
 * config changes to the meta group, purge/delete to the stream's group)
 * and answered from the apply callback after commit. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "keel/error.h"
#include "srv_js_forward.h"
#include "srv_js_int.h"
#include "srv_js_unsupported.h"
#include "srv_log.h"
#include "srv_server.h"

#define TYPE_PREFIX "io.nats.jetstream.api.v1."

/* One request: what every handler needs. */
struct api_req {
    struct srv_js *js;
    const char *reply;
    const char *name;     /* the subject's stream name token, NUL-terminated */
    json_t *body;         /* NULL when the request body is empty */
    const char *bad_json; /* the parser's complaint, or NULL */
};

static json_t *typed(const char *kind)
{
    char type[96];
    snprintf(type, sizeof type, TYPE_PREFIX "%s", kind);
    return json_pack("{s:s}", "type", type);
}

static void b64(const uint8_t *in, size_t n, char *out)
{
    static const char t[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)in[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= in[i + 2];
        }
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < n ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

static json_t *b64_json(const uint8_t *in, size_t n)
{
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    if (s == NULL) {
        return NULL;
    }
    b64(in, n, s);
    json_t *j = json_string(s);
    free(s);
    return j;
}

/* Account info. keeld has one account, so its limits are the server's
 * jetstream { max_memory_store, max_file_store } (nats-server reports -1
 * there unless account limits are set; docs/jetstream-config.md). */
static void api_info(struct api_req *q)
{
    uint64_t consumers = 0, mem = 0, file = 0, mem_res = 0, file_res = 0;
    int64_t max_mem = -1, max_file = -1;
    const struct srv_consumer_ops *ops = q->js->cops;
    for (uint32_t i = 0; i < q->js->nstreams; i++) {
        if (ops != NULL && ops->consumer_count != NULL) {
            consumers += ops->consumer_count(q->js->streams[i]);
        }
    }
    srv_js_limits_usage(q->js, SRV_JS_STORAGE_MEMORY, &mem, &mem_res);
    srv_js_limits_usage(q->js, SRV_JS_STORAGE_FILE, &file, &file_res);
    srv_js_limits_get(q->js, &max_mem, &max_file);
    json_t *o = typed("account_info_response");
    json_t *lim =
        json_pack("{s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:b}", "max_memory",
                  (json_int_t)max_mem, "max_storage", (json_int_t)max_file,
                  "max_streams", -1, "max_consumers", -1, "max_ack_pending", -1,
                  "memory_max_stream_bytes", -1, "storage_max_stream_bytes", -1,
                  "max_bytes_required", 0);
    json_t *api = json_pack("{s:i, s:I, s:I}", "level", 1, "total",
                            (json_int_t)q->js->api_total, "errors",
                            (json_int_t)q->js->api_errors);
    if (o != NULL) {
        json_object_set_new(o, "memory", json_integer((json_int_t)mem));
        json_object_set_new(o, "storage", json_integer((json_int_t)file));
        json_object_set_new(o, "reserved_memory",
                            json_integer((json_int_t)mem_res));
        json_object_set_new(o, "reserved_storage",
                            json_integer((json_int_t)file_res));
        json_object_set_new(o, "streams",
                            json_integer((json_int_t)q->js->nstreams));
        json_object_set_new(o, "consumers",
                            json_integer((json_int_t)consumers));
        json_object_set_new(o, "limits", lim);
        srv_js_domain_add(q->js, o);
        json_object_set_new(o, "api", api);
    }
    srv_js_reply_json(q->js, q->reply, o);
}

/* Parse and check a CREATE/UPDATE body against the subject's name.
 * Returns 0 with *cfg filled, else answered the error already. */
/* jetstream { max_streams }, checked when a create is requested (not when
 * the meta entry applies: replicas must agree whatever their config). */
static size_t max_streams(const struct srv_js *js)
{
    uint64_t n = js->srv != NULL && js->srv->cfg != NULL
                     ? js->srv->cfg->js_max_streams
                     : 0;
    return n > 0 && n < SRV_JS_STREAMS_MAX ? (size_t)n : SRV_JS_STREAMS_MAX;
}

/* A request without keel_fsync gets the policy it would have had: on
 * CREATE the server's --fsync (docs/design.md §4: the default for new streams,
 * finding F4), on UPDATE the stream's current one, so leaving the field
 * out never changes a stream's durability. The meta entry then names it,
 * so every replica and every restart (whatever its --fsync) agrees. */
static void default_fsync(const struct api_req *q,
                          const struct srv_stream_config *prev,
                          struct srv_stream_config *cfg)
{
    json_t *f = json_object_get(q->body, "keel_fsync");
    if (f != NULL && !json_is_null(f)) {
        return;
    }
    if (prev != NULL) {
        cfg->fsync = prev->fsync;
        cfg->fsync_interval_ms = prev->fsync_interval_ms;
        return;
    }
    const struct srv_config *sc = q->js->srv != NULL ? q->js->srv->cfg : NULL;
    if (sc == NULL) {
        return;
    }
    static const enum srv_js_fsync pol[] = {
        [SRV_FSYNC_GROUP] = SRV_JS_FSYNC_GROUP,
        [SRV_FSYNC_ALWAYS] = SRV_JS_FSYNC_ALWAYS,
        [SRV_FSYNC_INTERVAL] = SRV_JS_FSYNC_INTERVAL};
    cfg->fsync = pol[sc->fsync];
    if (sc->fsync == SRV_FSYNC_INTERVAL) {
        uint64_t ms = sc->fsync_interval_ms;
        ms = ms < 1 ? 1 : ms;
        ms = ms > SRV_JS_FSYNC_INTERVAL_MS_MAX ? SRV_JS_FSYNC_INTERVAL_MS_MAX
                                               : ms;
        cfg->fsync_interval_ms = (uint32_t)ms;
    }
}

/* placement.cluster may only name this cluster: keeld places a stream's
 * replicas on the nodes of its own cluster and has no other to pick. A
 * node outside a cluster holds the stream itself, so placement.tags must
 * be among its own server_tags (nats-server 2.9.10 ignores placement
 * there; keeld does not accept what it cannot honour, docs/compat.md).
 * In a cluster the meta leader checks the tags as it places. */
static int placement_check(const struct api_req *q, enum srv_js_err *jerr,
                           char *err)
{
    const json_t *pj = json_object_get(q->body, "placement");
    const char *pc = json_string_value(json_object_get(pj, "cluster"));
    const struct srv_config *cfg = q->js->srv != NULL ? q->js->srv->cfg : NULL;
    const char *mine = cfg != NULL ? cfg->cluster_name : "";
    struct srv_tags want;
    srv_js_placement_tags(pj, &want);
    if (q->js->jc == NULL && want.n > 0 &&
        (cfg == NULL || !srv_tags_match(&cfg->server_tags, &want))) {
        char tags[SRV_JS_ERR_DESC_BYTES_MAX / 2];
        srv_tags_text(&want, tags, sizeof tags);
        *jerr = SRV_JS_ENO_PEERS;
        snprintf(err, SRV_JS_ERR_DESC_BYTES_MAX,
                 "no suitable peers for placement, tags not matched %s (this "
                 "node's server_tags do not hold them)",
                 tags);
        return KEEL_EINVAL;
    }
    if (pc == NULL || pc[0] == '\0' || strcmp(pc, mine) == 0) {
        return 0;
    }
    /* nats-server answers a cluster it has no peers in with 10005. */
    *jerr = SRV_JS_ENO_PEERS;
    snprintf(err, SRV_JS_ERR_DESC_BYTES_MAX,
             "no suitable peers for placement: cluster %.64s is not this "
             "cluster (%s), and keeld places replicas only on its own "
             "cluster's nodes",
             pc, mine[0] != '\0' ? mine : "no cluster_name");
    return KEEL_EINVAL;
}

static int config_from_request(struct api_req *q, const char *kind,
                               const struct srv_stream_config *prev,
                               struct srv_stream_config *cfg)
{
    enum srv_js_err jerr = SRV_JS_OK;
    char err[SRV_JS_ERR_DESC_BYTES_MAX];
    memset(cfg, 0, sizeof *cfg);
    if (q->body == NULL) {
        /* nats-server's code for an empty body: it is not JSON. */
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EINVALID_JSON,
                         "the request body is empty; send the stream "
                         "config");
        return KEEL_EINVAL;
    }
    if (!json_is_object(q->body)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EBAD_REQUEST, NULL);
        return KEEL_EINVAL;
    }
    const char *bname = json_string_value(json_object_get(q->body, "name"));
    if (bname != NULL && strcmp(bname, q->name) != 0) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_NAME_MISMATCH,
                         NULL);
        return KEEL_EINVAL;
    }
    if (bname == NULL) {
        json_object_set_new(q->body, "name", json_string(q->name));
    }
    if (srv_stream_request_check(q->body, &jerr, err) != 0 ||
        placement_check(q, &jerr, err) != 0 ||
        srv_stream_config_parse(q->body, cfg, &jerr, err) != 0) {
        srv_js_reply_err(q->js, q->reply, kind, jerr, err);
        srv_stream_config_free(cfg);
        return KEEL_EINVAL;
    }
    default_fsync(q, prev, cfg);
    const char *bad = NULL;
    if (cfg->allow_rollup_hdrs && cfg->deny_purge) {
        bad = "roll-ups require the purge permission";
    } else if (prev == NULL && cfg->sealed) {
        bad = "stream configuration for create can not be sealed";
    }
    if (bad != NULL) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG, bad);
        srv_stream_config_free(cfg);
        return KEEL_EINVAL;
    }
    if (cfg->num_replicas > 1 && !srv_js_clustered(q->js)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EREPLICAS_STANDALONE,
                         NULL);
        srv_stream_config_free(cfg);
        return KEEL_EINVAL;
    }
    if (cfg->num_replicas > srv_js_meta_voters(q->js)) {
        /* More replicas than meta voters: no placement can exist. */
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EINSUFFICIENT_RESOURCES,
                         NULL);
        srv_stream_config_free(cfg);
        return KEEL_EINVAL;
    }
    for (uint32_t i = 0; i < q->js->nstreams; i++) {
        const struct srv_stream_config *o = &q->js->streams[i]->cfg;
        if (strcmp(o->name, cfg->name) != 0 &&
            srv_js_subject_lists_overlap(o->subjects, o->nsubjects,
                                         cfg->subjects, cfg->nsubjects)) {
            srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESUBJECTS_OVERLAP,
                             NULL);
            srv_stream_config_free(cfg);
            return KEEL_EINVAL;
        }
    }
    return 0;
}

/* Propose a meta entry {op, name[, config, nonce, created]}; the reply
 * comes from the apply. */
static void meta_write(struct api_req *q, const char *op, const char *kind,
                       enum srv_js_pend_kind pk,
                       const struct srv_stream_config *cfg)
{
    char err[KEEL_ERRMSG_MAX];
    bool full = false;
    json_t *e = json_pack("{s:s, s:s}", "op", op, "name", q->name);
    json_t *cj = NULL;
    if (e != NULL && cfg != NULL) {
        uint64_t nonce = 0;
        if (getrandom(&nonce, sizeof nonce, 0) != sizeof nonce) {
            nonce = (uint64_t)srv_js_now_ns();
        }
        if (srv_stream_config_encode(cfg, &cj, err) == 0) {
            json_object_set_new(e, "config", cj);
        }
        json_object_set_new(e, "nonce", json_integer((json_int_t)(nonce >> 1)));
        json_object_set_new(e, "created", json_integer(srv_js_now_ns()));
    }
    uint64_t ctx = srv_js_pending_add(q->js, pk, NULL, q->reply, &full);
    int rv = e == NULL || full ? KEEL_EBUSY
                               : srv_js_meta_propose(q->js, e, ctx, err);
    if (e != NULL && full) {
        json_decref(e);
    }
    if (rv != 0) {
        /* KEEL_ENOENT is the placement's: too few nodes carry the tags
         * asked for, said as nats-server says it. Anything else (no
         * leader, too few voters up yet) passes: 503, retry. */
        free(srv_js_pending_take(q->js, ctx));
        srv_js_reply_err(q->js, q->reply, kind,
                         rv == KEEL_ENOENT ? SRV_JS_ENO_PEERS
                                           : SRV_JS_EUNAVAILABLE,
                         rv == KEEL_ENOENT ? err : NULL);
    }
}

/* Does following cfg's mirror or sources from stream to origin come back
 * to cfg's name (nats-server's "detected cycle")? A breadth-first walk
 * over the streams this node knows, each visited once: bounded by
 * SRV_JS_STREAMS_MAX. */
static bool origin_cycle(struct srv_js *js, const struct srv_stream_config *cfg)
{
    const struct srv_stream_config **todo =
        calloc((size_t)js->nstreams + 1, sizeof *todo);
    struct srv_hmap seen;
    bool cycle = false;
    uint32_t head = 0, tail = 0;
    if (todo == NULL) {
        return false; /* out of memory: the create goes on unchecked */
    }
    srv_hmap_init(&seen);
    todo[tail++] = cfg;
    while (head < tail && !cycle) {
        const struct srv_stream_config *c = todo[head++];
        uint32_t n = c->has_mirror ? 1 : c->nsources;
        for (uint32_t i = 0; i < n && !cycle; i++) {
            const char *name =
                c->has_mirror ? c->mirror.name : c->sources[i].name;
            struct srv_stream *o = NULL;
            cycle = strcmp(name, cfg->name) == 0;
            if (cycle || srv_hmap_get(&seen, name, strlen(name)) != NULL ||
                srv_js_find_stream(js, name, &o) != 0 ||
                strcmp(o->cfg.name, cfg->name) == 0 || tail > js->nstreams ||
                srv_hmap_put(&seen, name, strlen(name), o) != 0) {
                continue;
            }
            todo[tail++] = &o->cfg;
        }
    }
    srv_hmap_close(&seen);
    free(todo);
    return cycle;
}

/* nats-server's 10046: a source this node knows that may hold messages
 * larger than the stream's max_msg_size takes. */
static bool source_too_big(struct srv_js *js,
                           const struct srv_stream_config *cfg)
{
    for (uint32_t i = 0; cfg->max_msg_size > 0 && i < cfg->nsources; i++) {
        struct srv_stream *o = NULL;
        if (srv_js_find_stream(js, cfg->sources[i].name, &o) == 0 &&
            o->cfg.max_msg_size > 0 &&
            cfg->max_msg_size < o->cfg.max_msg_size) {
            return true;
        }
    }
    return false;
}

static void api_create(struct api_req *q)
{
    static const char kind[] = "stream_create_response";
    struct srv_stream_config cfg;
    struct srv_stream *st = NULL;
    enum srv_js_err jerr = SRV_JS_OK;
    if (config_from_request(q, kind, NULL, &cfg) != 0) {
        return;
    }
    if (source_too_big(q->js, &cfg)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESOURCE_MSG_SIZE, NULL);
    } else if (origin_cycle(q->js, &cfg)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "detected cycle");
    } else if (srv_js_find_stream(q->js, q->name, &st) == 0) {
        if (srv_stream_config_equal(&st->cfg, &cfg)) {
            /* nats-server says did_create for an identical stream too: the
             * create succeeded, the stream is as asked. */
            json_t *o = srv_stream_info_json(st, kind, NULL, false);
            if (o != NULL) {
                json_object_set_new(o, "did_create", json_true());
            }
            srv_js_reply_json(q->js, q->reply, o);
        } else {
            srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_NAME_IN_USE,
                             NULL);
        }
    } else if (q->js->nstreams >= max_streams(q->js)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EMAX_STREAMS, NULL);
    } else if (srv_js_limits_check_config(q->js, &cfg, &jerr) != 0) {
        srv_js_reply_err(q->js, q->reply, kind, jerr, NULL);
    } else {
        meta_write(q, "create", kind, SRV_JS_PEND_CREATE, &cfg);
    }
    srv_stream_config_free(&cfg);
}

static void api_update(struct api_req *q)
{
    static const char kind[] = "stream_update_response";
    struct srv_stream_config cfg;
    struct srv_stream *st = NULL;
    enum srv_js_err jerr = SRV_JS_OK;
    if (srv_js_find_stream(q->js, q->name, &st) != 0) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_NOT_FOUND, NULL);
        return;
    }
    if (config_from_request(q, kind, &st->cfg, &cfg) != 0) {
        return;
    }
    if (cfg.first_seq == 0) {
        cfg.first_seq = st->cfg.first_seq; /* not given: kept */
    }
    if (!srv_stream_mirror_equal(&st->cfg, &cfg) &&
        !(st->cfg.has_mirror && !cfg.has_mirror)) {
        /* nats-server's rule, also for adding one: the mirror's position
         * is the origin's seqs. Removing it promotes the mirror to a
         * stream of its own, as nats-server 2.12 allows. */
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EMIRROR_UPDATE, NULL);
    } else if (source_too_big(q->js, &cfg)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESOURCE_MSG_SIZE, NULL);
    } else if (origin_cycle(q->js, &cfg)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "detected cycle");
    } else if (cfg.first_seq != st->cfg.first_seq) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "stream configuration update can not change "
                         "first_seq (it only sets where a new stream "
                         "starts)");
    } else if (st->cfg.allow_msg_ttl && !cfg.allow_msg_ttl) {
        /* nats-server 2.11's rule: pending TTLs would never expire. */
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "message TTL status can not be disabled");
    } else if (st->cfg.sealed && !cfg.sealed) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "stream configuration update can not unseal a "
                         "sealed stream");
    } else if (cfg.storage != st->cfg.storage) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "stream configuration update can not change "
                         "storage type");
    } else if (cfg.retention != st->cfg.retention) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "stream configuration update can not change "
                         "retention policy");
    } else if (cfg.num_replicas != st->cfg.num_replicas && st->place.n == 0) {
        /* Only a placed (clustered) stream's group can change members. */
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_CONFIG,
                         "stream configuration update can not change "
                         "num_replicas of a stream that is not clustered");
    } else if (srv_js_limits_check_config(q->js, &cfg, &jerr) != 0) {
        srv_js_reply_err(q->js, q->reply, kind, jerr, NULL);
    } else {
        meta_write(q, "update", kind, SRV_JS_PEND_UPDATE, &cfg);
    }
    srv_stream_config_free(&cfg);
}

/* The stream named in the subject, or answers 10059 and returns NULL. */
static struct srv_stream *need_stream(struct api_req *q, const char *kind)
{
    struct srv_stream *st = NULL;
    if (srv_js_find_stream(q->js, q->name, &st) != 0) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESTREAM_NOT_FOUND, NULL);
        return NULL;
    }
    if (srv_stream_amnesiac(st)) {
        /* Never look empty (or short): the state is not the stream's. */
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EUNAVAILABLE,
                         "the stream's storage on this node lost records "
                         "(amnesia): it waits for a leader to catch it up; "
                         "/healthz says why, `keel cluster recover` is the "
                         "operator's override");
        return NULL;
    }
    return st;
}

static void api_stream_info(struct api_req *q)
{
    static const char kind[] = "stream_info_response";
    struct srv_stream *st = need_stream(q, kind);
    if (st == NULL) {
        return;
    }
    const char *filter =
        json_string_value(json_object_get(q->body, "subjects_filter"));
    bool details = json_is_true(json_object_get(q->body, "deleted_details"));
    if (filter != NULL && !srv_js_subject_valid(filter, true)) {
        filter = NULL;
    }
    json_t *o = srv_stream_info_json(st, kind, filter, details);
    if (o != NULL && filter != NULL) {
        json_t *subs = json_object_get(json_object_get(o, "state"), "subjects");
        json_object_set_new(o, "total",
                            json_integer((json_int_t)json_object_size(subs)));
        json_object_set_new(o, "offset", json_integer(0));
        json_object_set_new(o, "limit",
                            json_integer((json_int_t)json_object_size(subs)));
    } else if (o != NULL) {
        /* nats-server pages subjects even when none were asked for: the
         * paging fields are always there, 0 without a filter. */
        json_object_set_new(o, "total", json_integer(0));
        json_object_set_new(o, "offset", json_integer(0));
        json_object_set_new(o, "limit", json_integer(0));
    }
    if (o != NULL) {
        /* Leader and followers as this node (the leader) sees them. */
        json_object_set_new(o, "cluster", srv_js_cluster_info_json(q->js, st));
    }
    srv_js_reply_json(q->js, q->reply, o);
}

static void api_delete(struct api_req *q)
{
    static const char kind[] = "stream_delete_response";
    if (need_stream(q, kind) != NULL) {
        meta_write(q, "delete", kind, SRV_JS_PEND_DELETE, NULL);
    }
}

/* Propose a purge or message delete entry to the stream's group. */
static void stream_write(struct api_req *q, struct srv_stream *st,
                         const char *kind, enum srv_js_pend_kind pk,
                         const struct keel_stream_entry *e)
{
    char err[KEEL_ERRMSG_MAX];
    bool full = false;
    uint64_t ctx = srv_js_pending_add(q->js, pk, st, q->reply, &full);
    int rv = full ? KEEL_EBUSY : 0;
    if (rv == 0 && !srv_stream_is_leader(st)) {
        rv = KEEL_ENOTLEADER;
    }
    if (rv == 0) {
        rv = srv_stream_propose_entry(st, e, ctx, err);
    }
    if (rv != 0) {
        free(srv_js_pending_take(q->js, ctx));
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EUNAVAILABLE, NULL);
    }
}

static void api_purge(struct api_req *q)
{
    static const char kind[] = "stream_purge_response";
    struct srv_stream *st = need_stream(q, kind);
    if (st == NULL) {
        return;
    }
    const char *filter = json_string_value(json_object_get(q->body, "filter"));
    json_int_t seq = json_integer_value(json_object_get(q->body, "seq"));
    json_int_t keep = json_integer_value(json_object_get(q->body, "keep"));
    if ((filter != NULL && !srv_js_subject_valid(filter, true)) || seq < 0 ||
        keep < 0 || (seq > 0 && keep > 0)) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EBAD_REQUEST, NULL);
        return;
    }
    if (st->cfg.sealed) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESEALED, NULL);
        return;
    }
    if (st->cfg.deny_purge) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EBAD_REQUEST,
                         "stream purge not permitted");
        return;
    }
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_PURGE,
                                  .subject = filter != NULL ? filter : "",
                                  .subject_len = filter ? strlen(filter) : 0,
                                  .seq = (uint64_t)seq,
                                  .keep = (uint64_t)keep};
    stream_write(q, st, kind, SRV_JS_PEND_PURGE, &e);
}

static void api_msg_delete(struct api_req *q)
{
    static const char kind[] = "stream_msg_delete_response";
    struct srv_stream *st = need_stream(q, kind);
    if (st == NULL) {
        return;
    }
    json_int_t seq = json_integer_value(json_object_get(q->body, "seq"));
    if (seq <= 0) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_EBAD_REQUEST, NULL);
        return;
    }
    if (st->cfg.sealed) {
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESEALED, NULL);
        return;
    }
    if (srv_stream_sm_get(&st->sm, (uint64_t)seq) == NULL) {
        char d[48]; /* nats-server's 10043, as the state machine answers */
        snprintf(d, sizeof d, "sequence %lld not found", (long long)seq);
        srv_js_reply_err(q->js, q->reply, kind, SRV_JS_ESEQUENCE_NOT_FOUND, d);
        return;
    }
    /* no_erase is accepted: bodies live in the Raft log, which is never
     * rewritten; a deleted message is unreachable either way. */
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_DELETE,
                                  .seq = (uint64_t)seq};
    stream_write(q, st, kind, SRV_JS_PEND_MSG_DELETE, &e);
}

/* NAMES / LIST: streams (in creation order) whose subjects overlap the
 * request's "subject", paged from "offset". */
static void api_names(struct api_req *q, bool list)
{
    const char *kind = list ? "stream_list_response" : "stream_names_response";
    json_int_t off = json_integer_value(json_object_get(q->body, "offset"));
    const char *subj = json_string_value(json_object_get(q->body, "subject"));
    json_int_t limit = list ? SRV_JS_LIST_PAGE : 1024;
    json_t *arr = json_array();
    json_int_t total = 0;
    if (subj != NULL &&
        (subj[0] == '\0' || !srv_js_subject_valid(subj, true))) {
        subj = NULL;
    }
    for (uint32_t i = 0; i < q->js->nstreams && arr != NULL; i++) {
        struct srv_stream *st = q->js->streams[i];
        char *one[] = {(char *)subj};
        if (subj != NULL && !srv_js_subject_lists_overlap(
                                st->cfg.subjects, st->cfg.nsubjects, one, 1)) {
            continue;
        }
        if (total++ < off || (json_int_t)json_array_size(arr) >= limit) {
            continue;
        }
        json_array_append_new(
            arr,
            list ? srv_stream_info_json(st, "stream_info_response", NULL, false)
                 : json_string(st->cfg.name));
    }
    json_t *o = typed(kind);
    if (o != NULL && list) {
        /* Items of a list carry no "type" of their own. */
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v)
        {
            json_object_del(v, "type");
        }
    }
    if (o != NULL) {
        json_object_set_new(o, "total", json_integer(total));
        json_object_set_new(o, "offset", json_integer(off < 0 ? 0 : off));
        json_object_set_new(o, "limit", json_integer(limit));
        json_object_set_new(o, "streams", arr);
    } else {
        json_decref(arr);
    }
    srv_js_reply_json(q->js, q->reply, o);
}

/* Last seq of any subject matching filter (a valid subject, wildcards
 * allowed), 0 when none. A literal filter (every KV get) is one lookup in
 * the per-subject index, whose last_seq is exact (srv_stream_sm.h); only a
 * wildcard filter walks the subjects. */
uint64_t srv_js_api__last_matching(const struct srv_stream *st,
                                   const char *filter)
{
    uint64_t best = 0;
    size_t pos = 0;
    struct srv_hmap_slot *sl;
    if (srv_js_subject_valid(filter, false)) {
        int rv =
            srv_stream_last_seq_for_subject(st, filter, strlen(filter), &best);
        return rv == 0 ? best : 0;
    }
    /* Bounded by the number of subjects. */
    while ((sl = srv_hmap_next(&st->sm.subjects, &pos)) != NULL) {
        const struct srv_stream_subj *sj = sl->value;
        if (sj->last_seq > best && srv_js_subject_matches(filter, sj->s)) {
            best = sj->last_seq;
        }
    }
    return best;
}

/* The seq a MSG.GET / DIRECT.GET body names: {"seq"}, {"last_by_subj"},
 * {"seq","next_by_subj"}. Returns 0, KEEL_ENOENT or KEEL_EINVAL. */
static int resolve_seq(const struct srv_stream *st, const json_t *body,
                       uint64_t *seq)
{
    json_int_t s = json_integer_value(json_object_get(body, "seq"));
    const char *last = json_string_value(json_object_get(body, "last_by_subj"));
    const char *next = json_string_value(json_object_get(body, "next_by_subj"));
    *seq = 0;
    if (s < 0 || (last != NULL && !srv_js_subject_valid(last, true)) ||
        (next != NULL && !srv_js_subject_valid(next, true))) {
        return KEEL_EINVAL;
    }
    if (last != NULL) {
        *seq = srv_js_api__last_matching(st, last);
        return *seq != 0 ? 0 : KEEL_ENOENT;
    }
    if (next != NULL) {
        const char *f[] = {next};
        uint64_t from = s > 0 ? (uint64_t)s : 1;
        int rv;
        /* Each round advances SRV_STREAM_SCAN_MAX seqs: bounded by the
         * stream's last seq. */
        while ((rv = srv_stream_next_seq(st, from, f, 1, seq)) == KEEL_EAGAIN) {
            from = *seq;
        }
        return rv;
    }
    if (s == 0) {
        return KEEL_EINVAL;
    }
    *seq = (uint64_t)s;
    return srv_stream_sm_get(&st->sm, *seq) != NULL ? 0 : KEEL_ENOENT;
}

/* The answer to a MSG.GET / DIRECT.GET this node's state cannot serve:
 * "not found" only when that is final (srv_stream_absent_is_final); a
 * damaged record, or a replica that is damaged, amnesiac or behind, gets
 * the retryable 503 (issue 8: an acked message never reads as missing). */
enum srv_js_err srv_js_api__get_error(const struct srv_stream *st, uint64_t seq,
                                      int rv)
{
    if (rv == KEEL_EINVAL) {
        return SRV_JS_EBAD_REQUEST;
    }
    return rv == KEEL_ENOENT && srv_stream_absent_is_final(st, seq)
               ? SRV_JS_ENO_MESSAGE
               : SRV_JS_EUNAVAILABLE;
}

static void api_msg_get(struct api_req *q)
{
    static const char kind[] = "stream_msg_get_response";
    struct srv_stream *st = need_stream(q, kind);
    struct srv_stream_msg m;
    char err[KEEL_ERRMSG_MAX];
    uint64_t seq = 0;
    if (st == NULL) {
        return;
    }
    int rv = resolve_seq(st, q->body, &seq);
    if (rv == 0) {
        rv = srv_stream_msg_load(st, seq, &m, err);
    }
    if (rv != 0) {
        srv_js_reply_err(q->js, q->reply, kind,
                         srv_js_api__get_error(st, seq, rv), NULL);
        return;
    }
    char t[SRV_JS_TIME_BYTES];
    srv_js_time_format(m.ts_ns, t);
    json_t *msg = json_pack("{s:s%, s:I, s:s}", "subject", m.subject,
                            m.subject_len, "seq", (json_int_t)m.seq, "time", t);
    if (msg != NULL && m.data_len > 0) {
        /* Omitted when empty, as nats-server's omitempty: libnats refuses
         * an empty base64 string (a delete marker has no body). */
        json_object_set_new(msg, "data", b64_json(m.data, m.data_len));
    }
    if (msg != NULL && m.hdr_len > 0) {
        json_object_set_new(msg, "hdrs", b64_json(m.hdr, m.hdr_len));
    }
    json_t *o = typed(kind);
    if (o != NULL) {
        json_object_set_new(o, "message", msg);
    } else {
        json_decref(msg);
    }
    srv_stream_msg_free(&m);
    srv_js_reply_json(q->js, q->reply, o);
}

struct api_route {
    const char *prefix; /* after "$JS.API." */
    bool named;         /* a stream name token follows */
    const char *kind;   /* response type for errors before the handler */
    void (*fn)(struct api_req *q);
};

static void api_names_only(struct api_req *q)
{
    api_names(q, false);
}

static void api_list(struct api_req *q)
{
    api_names(q, true);
}

static const struct api_route routes[] = {
    {"INFO", false, "account_info_response", api_info},
    {"STREAM.CREATE.", true, "stream_create_response", api_create},
    {"STREAM.UPDATE.", true, "stream_update_response", api_update},
    {"STREAM.INFO.", true, "stream_info_response", api_stream_info},
    {"STREAM.DELETE.", true, "stream_delete_response", api_delete},
    {"STREAM.PURGE.", true, "stream_purge_response", api_purge},
    {"STREAM.NAMES", false, "stream_names_response", api_names_only},
    {"STREAM.LIST", false, "stream_list_response", api_list},
    {"STREAM.MSG.GET.", true, "stream_msg_get_response", api_msg_get},
    {"STREAM.MSG.DELETE.", true, "stream_msg_delete_response", api_msg_delete},
};

static void route(struct api_req *q, const char *rest)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const struct api_route *r = &routes[i];
        size_t pl = strlen(r->prefix);
        if (r->named ? strncmp(rest, r->prefix, pl) != 0
                     : strcmp(rest, r->prefix) != 0) {
            continue;
        }
        q->name = r->named ? rest + pl : "";
        if (q->bad_json != NULL) {
            /* Typed as the endpoint's reply, as nats-server types it. */
            srv_js_reply_err(q->js, q->reply, r->kind, SRV_JS_EINVALID_JSON,
                             q->bad_json);
            return;
        }
        if (r->named && !srv_js_name_valid(q->name)) {
            srv_js_reply_err(q->js, q->reply, r->kind, SRV_JS_EBAD_REQUEST,
                             NULL);
            return;
        }
        r->fn(q);
        return;
    }
    srv_js_reply_err(q->js, q->reply, "api_response", SRV_JS_EBAD_REQUEST,
                     NULL);
}

void srv_js_api(struct srv_js *js, const char *subject, size_t slen,
                const char *reply, const char *body, size_t len)
{
    char subj[SRV_JS_SUBJECT_BYTES_MAX + 1];
    json_error_t jerr;
    if (slen > SRV_JS_SUBJECT_BYTES_MAX || reply == NULL || reply[0] == '\0') {
        return; /* no reply: nothing to answer (docs/protocol.md §2.1) */
    }
    if (len > SRV_JS_API_REQUEST_BYTES_MAX) {
        /* Refused unparsed: a huge body would cost parse time and memory
         * before any handler could look at it. */
        char d[96];
        snprintf(d, sizeof d,
                 "request body of %zu bytes is over the %u "
                 "byte limit",
                 len, SRV_JS_API_REQUEST_BYTES_MAX);
        srv_js_reply_err(js, reply, "api_response", SRV_JS_EBAD_REQUEST, d);
        return;
    }
    memcpy(subj, subject, slen);
    subj[slen] = '\0';
    const char *rest = subj + 8; /* after "$JS.API." */
    if (strncmp(rest, "STREAM.LEADER.STEPDOWN.", 23) == 0 ||
        strncmp(rest, "CONSUMER.LEADER.STEPDOWN.", 25) == 0) {
        srv_js_fwd_stepdown(js, subj, reply, body, len);
        return;
    }
    if (strncmp(rest, "CONSUMER.", 9) == 0) {
        if (js->cops != NULL && js->cops->api != NULL) {
            js->cops->api(js, subj, reply, body, len);
        } else {
            srv_js_reply_err(js, reply, "consumer_info_response",
                             SRV_JS_ECONSUMER_NOT_FOUND, NULL);
        }
        return;
    }
    if (strncmp(rest, "DIRECT.GET.", 11) == 0) {
        srv_js_direct(js, rest + 11, reply, body, len);
        return;
    }
    struct api_req q = {.js = js, .reply = reply};
    if (len > 0 && (q.body = json_loadb(body, len, 0, &jerr)) == NULL) {
        q.bad_json = jerr.text;
    }
    route(&q, rest);
    json_decref(q.body);
}
