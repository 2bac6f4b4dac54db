/* srv_consumer: the consumer hooks of the stream engine and the
 * $JS.API.CONSUMER.* handlers (create in all four subject forms, info,
 * delete, names, list, msg.next).
 *
 * For js-streams: call srv_consumer_attach(js, errmsg) right after
 * srv_js_open (before the streams replay), and srv_consumer_detach before
 * srv_js_close. srv_consumer.c needs srv_js_deliver (declared in srv_js.h)
 * implemented beside srv_js_send. */
#include "srv_consumer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"
#include "srv_consumer_pause.h"
#include "srv_js_unsupported.h"
#include "srv_js_xform.h"
#include "srv_js_forward.h"
#include "srv_log.h"
#include "srv_turn.h"
#include "srv_server.h"

#define API_PREFIX "$JS.API.CONSUMER."

static struct srv_cengine engine;

struct srv_cengine *srv_cengine_get(void)
{
    return &engine;
}

int64_t srv_cnow_ms(const struct srv_cengine *e)
{
    return (int64_t)uv_now(e->loop);
}

int64_t srv_cwall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- stream view for the state machine ---- */

static int view_next(void *ctx, uint64_t from, char *const *f, uint32_t n,
                     uint64_t *seq)
{
    struct srv_stream *st = ctx;
    /* srv_stream_next_seq bounds its work per call; keep going. */
    for (uint64_t i = 0; i < UINT64_MAX; i++) {
        int rv = srv_stream_next_seq(st, from, (const char *const *)f, n, seq);
        if (rv != KEEL_EAGAIN) {
            return rv;
        }
        ASSERT(*seq >= from);
        from = *seq;
    }
    return KEEL_ENOENT;
}

static int view_subject(void *ctx, uint64_t seq, char *buf)
{
    struct srv_stream_msg m;
    int rv = srv_stream_msg_load(ctx, seq, &m, NULL);
    if (rv != 0) {
        return KEEL_ENOENT;
    }
    size_t n = m.subject_len < SRV_JS_SUBJECT_BYTES_MAX
                   ? m.subject_len
                   : SRV_JS_SUBJECT_BYTES_MAX;
    memcpy(buf, m.subject, n);
    buf[n] = '\0';
    srv_stream_msg_free(&m);
    return 0;
}

static int view_last_for(void *ctx, const char *subj, uint64_t *seq)
{
    return srv_stream_last_seq_for_subject(ctx, subj, strlen(subj), seq);
}

static void view_bounds(void *ctx, uint64_t *first, uint64_t *last)
{
    struct srv_stream_state s;
    srv_stream_state(ctx, &s);
    *first = s.first_seq;
    *last = s.last_seq;
}

static int view_ts(struct srv_stream *st, uint64_t seq, int64_t *ts)
{
    struct srv_stream_msg m;
    int rv = srv_stream_msg_load(st, seq, &m, NULL);
    if (rv == 0) {
        *ts = m.ts_ns;
        srv_stream_msg_free(&m);
    }
    return rv;
}

/* Binary search: stored timestamps ascend with seq (the leader stamps
 * max(clock, previous)). */
static int view_at_time(void *ctx, int64_t t, uint64_t *seq)
{
    struct srv_stream *st = ctx;
    uint64_t lo = 0, hi = 0, s = 0;
    int64_t ts = 0;
    view_bounds(ctx, &lo, &hi);
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (view_next(st, mid, NULL, 0, &s) != 0 || s > hi) {
            hi = mid;
            continue;
        }
        if (view_ts(st, s, &ts) == 0 && ts >= t) {
            hi = mid;
        } else {
            lo = s + 1;
        }
    }
    if (view_next(st, lo, NULL, 0, &s) != 0 || view_ts(st, s, &ts) != 0 ||
        ts < t) {
        return KEEL_ENOENT;
    }
    *seq = s;
    return 0;
}

static void view_remove(void *ctx, uint64_t seq)
{
    int rv = srv_stream_remove_msg(ctx, seq);
    ASSERT(rv == 0 || rv == KEEL_ENOENT); /* ENOENT: already gone */
}

void srv_cstream_view(struct srv_cstream *cs, struct srv_csm_stream *out)
{
    *out = (struct srv_csm_stream){
        .ctx = cs->st,
        .retention = srv_stream_config_get(cs->st)->retention,
        .next_seq = view_next,
        .subject = view_subject,
        .last_for_subject = view_last_for,
        .seq_at_time = view_at_time,
        .bounds = view_bounds,
        .remove = view_remove,
    };
}

/* ---- slots ---- */

struct srv_cstream *srv_cstream_of(struct srv_stream *st)
{
    void **slot = srv_stream_consumers_slot(st);
    if (*slot == NULL) {
        struct srv_cstream *cs = calloc(1, sizeof *cs);
        if (cs == NULL) {
            return NULL;
        }
        cs->st = st;
        srv_csm_set_init(&cs->set);
        srv_hmap_init(&cs->live);
        cs->next = engine.streams;
        engine.streams = cs;
        *slot = cs;
    }
    return *slot;
}

struct srv_clive *srv_clive_get(struct srv_cstream *cs, const char *name)
{
    size_t n = strlen(name);
    struct srv_clive *l = srv_hmap_get(&cs->live, name, n);
    if (l != NULL) {
        return l;
    }
    l = calloc(1, sizeof *l);
    if (l == NULL) {
        return NULL;
    }
    memcpy(l->name, name, n + 1);
    l->last_active_ms = srv_cnow_ms(&engine);
    if (srv_hmap_put(&cs->live, name, n, l) != 0) {
        free(l);
        return NULL;
    }
    return l;
}

static void clive_free(struct srv_clive *l)
{
    for (uint32_t i = 0; i < l->pull_count; i++) {
        free(l->pulls[(l->pull_head + i) % l->pull_cap].reply);
    }
    for (uint32_t i = 0; i < l->nsync; i++) {
        free(l->sync_replies[i]);
    }
    free(l->pulls);
    free(l->acks);
    free(l->sync_replies);
    free(l);
}

void srv_clive_drop(struct srv_cengine *e, struct srv_cstream *cs,
                    const char *name, bool tell)
{
    struct srv_clive *l = srv_hmap_del(&cs->live, name, strlen(name));
    if (l == NULL) {
        return;
    }
    for (uint32_t i = 0; tell && i < l->pull_count; i++) {
        srv_csend_status(e, l->pulls[(l->pull_head + i) % l->pull_cap].reply,
                         "NATS/1.0 409 Consumer Deleted\r\n\r\n");
    }
    clive_free(l);
}

static void cstream_free(struct srv_cstream *cs)
{
    size_t pos = 0;
    struct srv_hmap_slot *sl = NULL;
    while ((sl = srv_hmap_next(&cs->live, &pos)) != NULL) {
        clive_free(sl->value);
    }
    srv_hmap_close(&cs->live);
    srv_csm_set_close(&cs->set);
    struct srv_cstream **pp = &engine.streams;
    while (*pp != NULL && *pp != cs) {
        pp = &(*pp)->next;
    }
    if (*pp == cs) {
        *pp = cs->next;
    }
    struct srv_cstream **lists[] = {&engine.busy, &engine.walk};
    for (size_t i = 0; cs->busy && i < 2; i++) {
        for (pp = lists[i]; *pp != NULL; pp = &(*pp)->busy_next) {
            if (*pp == cs) {
                *pp = cs->busy_next;
                cs->busy = false;
                break;
            }
        }
    }
    free(cs);
}

/* ---- proposals awaiting commit ---- */

uint64_t srv_cwait_add(struct srv_cengine *e, uint8_t kind, char *reply)
{
    struct srv_cwait *w = calloc(1, sizeof *w);
    if (w == NULL) {
        free(reply);
        return 0;
    }
    w->ctx = ++e->next_ctx;
    w->reply = reply;
    w->kind = kind;
    w->next = e->waits;
    e->waits = w;
    return w->ctx;
}

struct srv_cwait *srv_cwait_take(struct srv_cengine *e, uint64_t ctx)
{
    for (struct srv_cwait **pp = &e->waits; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->ctx == ctx) {
            struct srv_cwait *w = *pp;
            *pp = w->next;
            return w;
        }
    }
    return NULL;
}

/* ---- sending ---- */

void srv_csend(struct srv_cengine *e, const char *subject, const char *reply,
               const char *hdr)
{
    if (subject == NULL || subject[0] == '\0') {
        return;
    }
    if (srv_js_send(e->js, subject, reply, hdr, hdr != NULL ? strlen(hdr) : 0,
                    "", 0) != 0) {
        SRV_WARN("consumer", "could not send to %s", subject);
    }
}

void srv_csend_status(struct srv_cengine *e, const char *subject,
                      const char *status_hdr)
{
    srv_csend(e, subject, NULL, status_hdr);
}

static void send_json(struct srv_cengine *e, const char *reply, json_t *j)
{
    if (reply == NULL || reply[0] == '\0' || j == NULL) {
        json_decref(j);
        return;
    }
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (text == NULL ||
        srv_js_send(e->js, reply, NULL, NULL, 0, text, strlen(text)) != 0) {
        SRV_WARN("consumer", "could not send an API reply to %s", reply);
    }
    free(text);
}

static void send_err(struct srv_cengine *e, const char *reply, const char *kind,
                     enum srv_js_err err, const char *detail)
{
    json_t *j = NULL;
    if (srv_js_err_json(kind, err, detail, &j, NULL) == 0) {
        send_json(e, reply, j);
    }
}

bool srv_cinterest(struct srv_cengine *e, const char *subject)
{
    struct srv_server *srv = srv_js_server(e->js);
    struct srv_sublist_result *r = NULL;
    if (srv_sublist_match(&srv->sublist, subject, strlen(subject), &r) != 0) {
        return false;
    }
    bool any = r->npsubs > 0 || r->nqgroups > 0;
    srv_sublist_result_release(r);
    /* A pull request or push subscriber on another node counts too: the
     * delivery reaches it over the cluster (srv_js_forward.h). */
    return any || srv_js_fwd_remote_interest(e->js, subject);
}

/* ---- info ---- */

static json_t *pos_json(struct srv_csm_pos p, int64_t last_active_ns)
{
    json_t *o = json_pack("{s:I, s:I}", "consumer_seq", (json_int_t)p.cseq,
                          "stream_seq", (json_int_t)p.sseq);
    if (o != NULL && last_active_ns > 0) {
        char t[SRV_JS_TIME_BYTES];
        srv_js_time_format(last_active_ns, t);
        json_object_set_new(o, "last_active", json_string(t));
    }
    return o;
}

/* The consumer info object (docs/protocol.md §2.6), or NULL without memory. */
static json_t *info_json(struct srv_cstream *cs, struct srv_csm *c,
                         const char *type)
{
    struct srv_clive *l = srv_hmap_get(&cs->live, c->name, strlen(c->name));
    struct srv_csm_pos d =
        c->live.sseq > c->delivered.sseq ? c->live : c->delivered;
    json_t *cfg = NULL;
    if (srv_consumer_config_encode(&c->cfg, &cfg, NULL) != 0) {
        return NULL;
    }
    char created[SRV_JS_TIME_BYTES], now[SRV_JS_TIME_BYTES];
    srv_js_time_format(c->created_ns, created);
    srv_js_time_format(srv_cwall_ns(), now);
    uint64_t pending =
        srv_cpending_after(cs, c, d.sseq, SRV_CONSUMER_PENDING_MAX);
    json_t *o = json_pack(
        "{s:s, s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:s}", "stream_name",
        srv_stream_name(cs->st), "name", c->name, "config", cfg, "delivered",
        pos_json(d, l != NULL ? l->last_active_ns : 0), "ack_floor",
        pos_json(c->ack_floor, 0), "num_ack_pending",
        (json_int_t)srv_csm_num_ack_pending(c), "num_redelivered",
        (json_int_t)c->redelivered, "num_waiting",
        (json_int_t)(l != NULL ? l->pull_count : 0), "num_pending",
        (json_int_t)pending, "ts", now);
    if (o == NULL) {
        return NULL;
    }
    json_object_set_new(o, "created", json_string(created));
    if (type != NULL) {
        json_object_set_new(o, "type", json_string(type));
    }
    if (c->cfg.deliver_subject != NULL &&
        srv_cinterest(&engine, c->cfg.deliver_subject)) {
        json_object_set_new(o, "push_bound", json_true());
    }
    if (srv_consumer_pause_info(&c->cfg, srv_cwall_ns(), o) != 0) {
        json_decref(o);
        return NULL;
    }
    /* A consumer runs in its stream's group: the same leader/replicas. */
    json_object_set_new(o, "cluster",
                        srv_js_cluster_info_json(engine.js, cs->st));
    return o;
}

/* ---- API handlers ---- */

/* The token after prefix up to the next '.' (or end) into dst. */
static bool take_tok(const char **p, char *dst, size_t max)
{
    const char *dot = strchr(*p, '.');
    size_t n = dot != NULL ? (size_t)(dot - *p) : strlen(*p);
    if (n == 0 || n > max) {
        return false;
    }
    memcpy(dst, *p, n);
    dst[n] = '\0';
    *p += n + (dot != NULL ? 1 : 0);
    return true;
}

struct api_req {
    const char *reply;
    const char *body;
    size_t len;
    struct srv_cstream *cs;
    struct srv_csm *c;
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    char consumer[SRV_JS_NAME_BYTES_MAX + 1];
};

static void random_name(char *dst)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    for (int i = 0; i < 8; i++) {
        engine.rng ^= engine.rng << 13;
        engine.rng ^= engine.rng >> 7;
        engine.rng ^= engine.rng << 17;
        dst[i] = abc[engine.rng % (sizeof abc - 1)];
    }
    dst[8] = '\0';
}

/* Every filter must overlap one of the stream's subjects, or what its
 * subject_transform stores (10093). */
static bool filters_fit(const struct srv_consumer_config *cfg,
                        struct srv_stream *st)
{
    const struct srv_stream_config *sc = srv_stream_config_get(st);
    char *const *f = NULL;
    uint32_t n = 0;
    char dest[SRV_JS_SUBJECT_BYTES_MAX + 1] = "";
    struct srv_stream *o = NULL;
    if (sc->has_mirror) {
        /* A mirror has no subjects: its messages carry its origin's, so
         * those are what a filter must fit (as nats-server 2.9.10 checks);
         * while the origin is unknown here (or has none) any filter. */
        if (srv_js_find_stream(srv_stream_js(st), sc->mirror.name, &o) != 0 ||
            srv_stream_config_get(o)->nsubjects == 0) {
            return true;
        }
        sc = srv_stream_config_get(o);
    }
    if (sc->nsources > 0) {
        /* Its sources' messages carry their origins' subjects: any filter
         * (nats-server walks the origins; keeld does not yet,
         * docs/jetstream-config.md "Sources"). */
        return true;
    }
    if (sc->transform != NULL) {
        srv_js_xform_dest_pattern(sc->transform, dest);
    }
    srv_consumer_config_filters(cfg, &f, &n);
    for (uint32_t i = 0; i < n; i++) {
        if (!srv_js_subject_lists_overlap(&f[i], 1, sc->subjects,
                                          sc->nsubjects) &&
            (dest[0] == '\0' || !srv_js_subjects_overlap(f[i], dest))) {
            return false;
        }
    }
    return true;
}

/* The stream's max_consumers (a leader pre-check: a new name only). */
static bool at_max_consumers(struct srv_stream *st, const char *name)
{
    int64_t max = srv_stream_config_get(st)->max_consumers;
    struct srv_cstream *cs = srv_cstream_of(st);
    return max > 0 && cs != NULL && srv_csm_find(&cs->set, name) == NULL &&
           (int64_t)cs->set.n >= max;
}

static int create_parse(const struct srv_consumer_create_subj *s,
                        const json_t *body, struct srv_consumer_config *cfg,
                        enum srv_csm_action *action, enum srv_js_err *jerr,
                        char *detail)
{
    json_t *jc = json_object_get(body, "config");
    const char *act = json_string_value(json_object_get(body, "action"));
    *action = act == NULL || act[0] == '\0' ? SRV_CSM_CREATE_OR_UPDATE
              : strcmp(act, "create") == 0  ? SRV_CSM_CREATE
                                            : SRV_CSM_UPDATE;
    int rv = srv_consumer_request_check(jc, jerr, detail);
    if (rv != 0) {
        return rv;
    }
    rv = srv_consumer_config_parse(jc != NULL ? jc : json_object(), cfg, jerr,
                                   detail);
    if (rv != 0) {
        return rv;
    }
    const char *fs = cfg->filter_subject;
    rv = srv_consumer_create_check(
        s, json_string_value(json_object_get(body, "stream_name")),
        cfg->durable_name, cfg->name, fs, jerr, detail);
    if (rv != 0) {
        return rv;
    }
    if (s->consumer[0] != '\0') {
        memcpy(cfg->name, s->consumer, sizeof cfg->name);
    } else if (cfg->name[0] == '\0') {
        random_name(cfg->name);
    }
    if (cfg->durable_name[0] == '\0' && cfg->inactive_threshold_ns == 0) {
        cfg->inactive_threshold_ns = SRV_JS_INACTIVE_NS_DEFAULT;
    }
    return 0;
}

static void api_create(const char *subject, const char *reply, const char *body,
                       size_t len)
{
    const char *kind = "consumer_create_response";
    struct srv_consumer_create_subj s;
    enum srv_js_err jerr = SRV_JS_OK;
    char detail[KEEL_ERRMSG_MAX] = "";
    if (srv_consumer_create_subject_parse(subject, strlen(subject), &s,
                                          detail) != 0) {
        send_err(&engine, reply, kind, SRV_JS_EBAD_REQUEST, NULL);
        return;
    }
    json_error_t je;
    json_t *j = json_loadb(body, len, 0, &je);
    if (j == NULL) {
        send_err(&engine, reply, kind, SRV_JS_EINVALID_JSON, je.text);
        return;
    }
    struct srv_stream *st = NULL;
    struct srv_consumer_config cfg;
    enum srv_csm_action action = SRV_CSM_CREATE_OR_UPDATE;
    memset(&cfg, 0, sizeof cfg);
    if (srv_js_find_stream(engine.js, s.stream, &st) != 0) {
        jerr = SRV_JS_ESTREAM_NOT_FOUND;
    } else if (create_parse(&s, j, &cfg, &action, &jerr, detail) != 0) {
        /* jerr and detail set */
    } else if (!filters_fit(&cfg, st)) {
        jerr = SRV_JS_EFILTER_NOT_SUBSET;
    } else if (at_max_consumers(st, cfg.name)) {
        jerr = SRV_JS_EMAX_CONSUMERS;
    }
    json_decref(j);
    uint8_t *p = NULL;
    uint32_t plen = 0;
    if (jerr == SRV_JS_OK && srv_csm_encode_create(&cfg, action, srv_cwall_ns(),
                                                   &p, &plen, detail) != 0) {
        jerr = SRV_JS_EUNAVAILABLE;
    }
    srv_consumer_config_free(&cfg);
    if (jerr != SRV_JS_OK) {
        send_err(&engine, reply, kind, jerr, detail[0] ? detail : NULL);
        return;
    }
    char *r = reply != NULL && reply[0] != '\0' ? strdup(reply) : NULL;
    uint64_t ctx = srv_cwait_add(&engine, SRV_CSM_KIND_CREATE, r);
    if (ctx == 0 || srv_stream_propose(st, SRV_CSM_KIND_CREATE, p, plen, ctx,
                                       detail) != 0) {
        free(srv_cwait_take(&engine, ctx));
        send_err(&engine, reply, kind, SRV_JS_EUNAVAILABLE, NULL);
    }
    free(p);
}

/* The refusal of a request api_target cannot serve: a JSON API error of
 * `kind`, or for a pull (kind NULL) a status message, because a pull's
 * reply subject gets messages and statuses: a JSON body there reaches the
 * application as a delivery. */
static void target_err(const struct api_req *q, const char *kind,
                       enum srv_js_err err, const char *status_hdr)
{
    if (kind != NULL) {
        send_err(&engine, q->reply, kind, err, NULL);
    } else {
        srv_csend_status(&engine, q->reply, status_hdr);
    }
}

/* Resolve <stream>.<consumer> after the verb; replies the error itself. */
static bool api_target(const char *rest, struct api_req *q, const char *kind,
                       bool need_consumer)
{
    struct srv_stream *st = NULL;
    if (!take_tok(&rest, q->stream, SRV_JS_NAME_BYTES_MAX) ||
        (need_consumer &&
         !take_tok(&rest, q->consumer, SRV_JS_NAME_BYTES_MAX)) ||
        *rest != '\0') {
        target_err(q, kind, SRV_JS_EBAD_REQUEST,
                   "NATS/1.0 400 Bad Request\r\n\r\n");
        return false;
    }
    if (srv_js_find_stream(engine.js, q->stream, &st) != 0 ||
        (q->cs = srv_cstream_of(st)) == NULL) {
        target_err(q, kind, SRV_JS_ESTREAM_NOT_FOUND,
                   "NATS/1.0 409 Stream Not Found\r\n\r\n");
        return false;
    }
    if (need_consumer) {
        q->c = srv_csm_find(&q->cs->set, q->consumer);
        if (q->c == NULL) {
            target_err(q, kind, SRV_JS_ECONSUMER_NOT_FOUND,
                       "NATS/1.0 409 Consumer Not Found\r\n\r\n");
            return false;
        }
    }
    return true;
}

static void api_info(struct api_req *q)
{
    const char *kind = "consumer_info_response";
    struct srv_clive *l = srv_clive_get(q->cs, q->c->name);
    if (l != NULL) {
        /* After a restart, count what awaits redelivery. */
        (void)srv_clive_start(&engine, q->cs, q->c, l);
    }
    json_t *o = info_json(q->cs, q->c,
                          "io.nats.jetstream.api.v1."
                          "consumer_info_response");
    if (o == NULL) {
        send_err(&engine, q->reply, kind, SRV_JS_EUNAVAILABLE, NULL);
        return;
    }
    send_json(&engine, q->reply, o);
}

static void api_delete(struct api_req *q)
{
    const char *kind = "consumer_delete_response";
    uint8_t *p = NULL;
    uint32_t len = 0;
    char *r = q->reply != NULL && q->reply[0] ? strdup(q->reply) : NULL;
    if (srv_csm_encode_delete(q->c->name, &p, &len, NULL) != 0) {
        free(r);
        send_err(&engine, q->reply, kind, SRV_JS_EUNAVAILABLE, NULL);
        return;
    }
    uint64_t ctx = srv_cwait_add(&engine, SRV_CSM_KIND_DELETE, r);
    if (ctx == 0 || srv_stream_propose(q->cs->st, SRV_CSM_KIND_DELETE, p, len,
                                       ctx, NULL) != 0) {
        free(srv_cwait_take(&engine, ctx));
        send_err(&engine, q->reply, kind, SRV_JS_EUNAVAILABLE, NULL);
    }
    free(p);
}

/* PAUSE: the consumer's config with pause_until set (or cleared), proposed
 * as a consumer update through the stream's group, so every replica and
 * a new leader hold it; answered once it commits (answer()). */
static void api_pause(struct api_req *q)
{
    const char *kind = "consumer_pause_response";
    enum srv_js_err jerr = SRV_JS_OK;
    char detail[KEEL_ERRMSG_MAX] = "";
    int64_t until = 0;
    struct srv_consumer_config cfg;
    json_t *j = NULL;
    memset(&cfg, 0, sizeof cfg);
    if (srv_consumer_pause_request(q->body, q->len, &until, &jerr, detail) !=
        0) {
        send_err(&engine, q->reply, kind, jerr, detail);
        return;
    }
    uint8_t *p = NULL;
    uint32_t plen = 0;
    int rv = srv_consumer_config_encode(&q->c->cfg, &j, detail);
    if (rv == 0) {
        rv = srv_consumer_config_parse(j, &cfg, &jerr, detail);
    }
    json_decref(j);
    if (rv == 0) {
        cfg.pause_until_ns = until;
        rv = srv_csm_encode_create(&cfg, SRV_CSM_UPDATE, srv_cwall_ns(), &p,
                                   &plen, detail);
    }
    srv_consumer_config_free(&cfg);
    char *r = q->reply != NULL && q->reply[0] ? strdup(q->reply) : NULL;
    uint64_t ctx = rv == 0 ? srv_cwait_add(&engine, SRV_CWAIT_PAUSE, r) : 0;
    if (ctx == 0 || srv_stream_propose(q->cs->st, SRV_CSM_KIND_CREATE, p, plen,
                                       ctx, NULL) != 0) {
        if (ctx != 0) {
            struct srv_cwait *w = srv_cwait_take(&engine, ctx);
            free(w != NULL ? w->reply : NULL);
            free(w);
        } else {
            free(r);
        }
        send_err(&engine, q->reply, kind, SRV_JS_EUNAVAILABLE, NULL);
    }
    free(p);
}

/* NAMES (limit 1024) and LIST (limit 256), paged by {"offset":N}. */
static void api_page(struct api_req *q, bool list)
{
    const char *kind =
        list ? "consumer_list_response" : "consumer_names_response";
    int64_t offset = 0, limit = list ? 256 : 1024;
    json_t *j = q->len > 0 ? json_loadb(q->body, q->len, 0, NULL) : NULL;
    if (json_is_integer(json_object_get(j, "offset"))) {
        offset = (int64_t)json_integer_value(json_object_get(j, "offset"));
    }
    json_decref(j);
    if (offset < 0) {
        offset = 0;
    }
    json_t *arr = json_array();
    for (uint32_t i = (uint32_t)(offset < q->cs->set.n ? offset : q->cs->set.n);
         arr != NULL && i < q->cs->set.n && i < offset + limit; i++) {
        struct srv_csm *c = q->cs->set.v[i];
        json_array_append_new(arr, list ? info_json(q->cs, c, NULL)
                                        : json_string(c->name));
    }
    char type[80];
    snprintf(type, sizeof type, "io.nats.jetstream.api.v1.%s", kind);
    json_t *o =
        json_pack("{s:s, s:I, s:I, s:I, s:o}", "type", type, "total",
                  (json_int_t)q->cs->set.n, "offset", (json_int_t)offset,
                  "limit", (json_int_t)limit, "consumers", arr);
    send_json(&engine, q->reply, o);
}

/* $JS.API.CONSUMER.<verb>... (dispatch switch on the verb). */
static void hook_api(struct srv_js *js, const char *subject, const char *reply,
                     const char *body, size_t len)
{
    ASSERT(js == engine.js);
    ASSERT(strncmp(subject, API_PREFIX, strlen(API_PREFIX)) == 0);
    const char *v = subject + strlen(API_PREFIX);
    struct api_req q = {.reply = reply, .body = body, .len = len};
    if (strncmp(v, "CREATE.", 7) == 0 ||
        strncmp(v, "DURABLE.CREATE.", 15) == 0) {
        api_create(subject, reply, body, len);
    } else if (strncmp(v, "INFO.", 5) == 0) {
        if (api_target(v + 5, &q, "consumer_info_response", true)) {
            api_info(&q);
        }
    } else if (strncmp(v, "DELETE.", 7) == 0) {
        if (api_target(v + 7, &q, "consumer_delete_response", true)) {
            api_delete(&q);
        }
    } else if (strncmp(v, "PAUSE.", 6) == 0) {
        if (api_target(v + 6, &q, "consumer_pause_response", true)) {
            api_pause(&q);
        }
    } else if (strncmp(v, "NAMES.", 6) == 0) {
        if (api_target(v + 6, &q, "consumer_names_response", false)) {
            api_page(&q, false);
        }
    } else if (strncmp(v, "LIST.", 5) == 0) {
        if (api_target(v + 5, &q, "consumer_list_response", false)) {
            api_page(&q, true);
        }
    } else if (strncmp(v, "MSG.NEXT.", 9) == 0) {
        if (api_target(v + 9, &q, NULL, true)) {
            srv_cpull_request(&engine, q.cs, q.c, reply, body, len);
        }
    } else {
        send_err(&engine, reply, "consumer_info_response", SRV_JS_EBAD_REQUEST,
                 NULL);
    }
}

/* ---- hooks ---- */

static void answer(struct srv_cstream *cs, uint8_t kind,
                   const struct srv_csm_result *res, uint64_t ctx)
{
    struct srv_cwait *w = ctx != 0 ? srv_cwait_take(&engine, ctx) : NULL;
    if (w == NULL) {
        return;
    }
    if (w->reply != NULL && w->kind == SRV_CWAIT_PAUSE) {
        if (res->jerr != SRV_JS_OK || res->c == NULL) {
            send_err(&engine, w->reply, "consumer_pause_response",
                     res->jerr != SRV_JS_OK ? res->jerr : SRV_JS_EUNAVAILABLE,
                     res->detail[0] ? res->detail : NULL);
        } else {
            send_json(&engine, w->reply,
                      srv_consumer_pause_response(res->c->cfg.pause_until_ns,
                                                  srv_cwall_ns()));
        }
    } else if (w->reply != NULL) {
        const char *rk = kind == SRV_CSM_KIND_CREATE
                             ? "consumer_create_response"
                             : "consumer_delete_response";
        if (res->jerr != SRV_JS_OK) {
            send_err(&engine, w->reply, rk, res->jerr,
                     res->detail[0] ? res->detail : NULL);
        } else if (kind == SRV_CSM_KIND_CREATE && res->c != NULL) {
            send_json(&engine, w->reply,
                      info_json(cs, res->c,
                                "io.nats.jetstream.api.v1."
                                "consumer_create_response"));
        } else if (kind == SRV_CSM_KIND_DELETE) {
            send_json(&engine, w->reply,
                      json_pack("{s:s, s:b}", "type",
                                "io.nats.jetstream.api.v1."
                                "consumer_delete_response",
                                "success", 1));
        } else {
            /* AckSync: an empty message to each once the acks committed
             * (the replies are joined by newlines). */
            char *save = NULL;
            for (char *r = strtok_r(w->reply, "\n", &save); r != NULL;
                 r = strtok_r(NULL, "\n", &save)) {
                srv_csend(&engine, r, NULL, NULL);
            }
        }
    }
    free(w->reply);
    free(w);
}

static void hook_apply(struct srv_stream *st, uint64_t index, uint8_t kind,
                       const void *payload, uint32_t len, uint64_t ctx)
{
    (void)index;
    struct srv_cstream *cs = srv_cstream_of(st);
    char errmsg[KEEL_ERRMSG_MAX];
    struct srv_csm_result res;
    struct srv_csm_stream view;
    if (cs == NULL) {
        SRV_ERROR("consumer", "out of memory applying a consumer entry");
        return;
    }
    srv_cstream_view(cs, &view);
    int rv = srv_csm_apply(&cs->set, &view, kind, payload, len, &res, errmsg);
    if (rv != 0) {
        /* Every replica refuses the same bytes the same way. */
        SRV_ERROR("consumer", "stream %s: consumer entry %" PRIu64 ": %s",
                  srv_stream_name(st), index, errmsg);
        return;
    }
    if (res.deleted) {
        srv_clive_drop(&engine, cs, res.name, true);
    }
    srv_cstream_wake(&engine, cs); /* a new, changed or acked consumer */
    answer(cs, kind, &res, ctx);
}

static void hook_on_stored(struct srv_stream *st, uint64_t seq)
{
    struct srv_cstream *cs = srv_cstream_of(st);
    if (cs == NULL) {
        return;
    }
    struct srv_csm_stream view;
    srv_cstream_view(cs, &view);
    srv_csm_on_stored(&cs->set, &view, seq);
    if (cs->set.n > 0) {
        srv_cstream_wake(&engine, cs);
    }
}

/* This node took or lost the lead of st. A new leader rebuilds each
 * consumer's pending set from the log (srv_clive_start), also when it led
 * before: what another leader delivered meanwhile is only in the log. */
static void hook_role(struct srv_stream *st, bool leader)
{
    struct srv_cstream *cs = *srv_stream_consumers_slot(st);
    if (cs == NULL) {
        return;
    }
    size_t pos = 0;
    struct srv_hmap_slot *sl = NULL;
    while (!leader && (sl = srv_hmap_next(&cs->live, &pos)) != NULL) {
        ((struct srv_clive *)sl->value)->started = false;
    }
    if (leader) {
        srv_cstream_wake(&engine, cs);
    }
}

static bool hook_intercept(struct srv_js *js, const char *subject,
                           size_t subject_len, const char *reply,
                           size_t reply_len, const char *hdr, size_t hdr_len,
                           const char *data, size_t data_len)
{
    (void)hdr;
    (void)hdr_len;
    ASSERT(js == engine.js);
    return srv_cack_intercept(&engine, subject, subject_len, reply, reply_len,
                              data, data_len);
}

static void hook_stream_closed(struct srv_stream *st, bool deleted)
{
    void **slot = srv_stream_consumers_slot(st);
    struct srv_cstream *cs = *slot;
    if (cs == NULL) {
        return;
    }
    if (deleted) {
        for (uint32_t i = 0; i < cs->set.n; i++) {
            srv_clive_drop(&engine, cs, cs->set.v[i]->name, true);
        }
    }
    cstream_free(cs);
    *slot = NULL;
}

static void hook_stream_opened(struct srv_stream *st)
{
    (void)srv_cstream_of(st);
}

static uint64_t hook_consumer_count(const struct srv_stream *st)
{
    void **slot = srv_stream_consumers_slot((struct srv_stream *)st);
    const struct srv_cstream *cs = *slot;
    return cs != NULL ? cs->set.n : 0;
}

static const struct srv_consumer_ops ops = {
    .apply = hook_apply,
    .on_stored = hook_on_stored,
    .role = hook_role,
    .api = hook_api,
    .intercept = hook_intercept,
    .stream_closed = hook_stream_closed,
    .stream_opened = hook_stream_opened,
    .consumer_count = hook_consumer_count,
    .snapshot = srv_consumer_snap_encode,
    .restore = srv_consumer_snap_restore,
};

static void check_cb(uv_check_t *h)
{
    ASSERT(h == &engine.check);
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_CONSUMER);
    srv_cengine_run(&engine);
    srv_turn_leave(ph);
}

static void tick_cb(uv_timer_t *h)
{
    ASSERT(h == &engine.tick);
    enum srv_turn_phase ph = srv_turn_enter(SRV_TURN_CONSUMER);
    srv_cengine_run(&engine);
    srv_turn_leave(ph);
}

int srv_consumer_attach(struct srv_js *js, char *errmsg)
{
    ASSERT(engine.js == NULL);
    memset(&engine, 0, sizeof engine);
    engine.js = js;
    engine.loop = srv_js_server(js)->loop;
    engine.rng = (uint64_t)srv_cwall_ns() | 1;
    if (uv_check_init(engine.loop, &engine.check) != 0 ||
        uv_timer_init(engine.loop, &engine.tick) != 0) {
        return keel_err(KEEL_ENOMEM, errmsg, "consumer engine handles");
    }
    (void)uv_check_start(&engine.check, check_cb);
    (void)uv_timer_start(&engine.tick, tick_cb, SRV_CONSUMER_TICK_MS,
                         SRV_CONSUMER_TICK_MS);
    uv_unref((uv_handle_t *)&engine.tick);
    uv_unref((uv_handle_t *)&engine.check);
    srv_js_set_consumer_ops(js, &ops);
    return 0;
}

void srv_consumer_detach(struct srv_js *js)
{
    if (engine.js != js) {
        return;
    }
    uv_check_stop(&engine.check);
    uv_timer_stop(&engine.tick);
    uv_close((uv_handle_t *)&engine.check, NULL);
    uv_close((uv_handle_t *)&engine.tick, NULL);
    while (engine.waits != NULL) {
        struct srv_cwait *w = engine.waits;
        engine.waits = w->next;
        free(w->reply);
        free(w);
    }
    engine.js = NULL;
}
