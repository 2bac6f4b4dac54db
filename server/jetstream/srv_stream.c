/* srv_stream: one stream's Raft group of one, its apply (the state machine
 * plus replies to whoever proposed), and reads of stored messages. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "keel/bytes.h"
#include "keel/error.h"
#include "srv_js_int.h"
#include "srv_js_unsupported.h"
#include "srv_log.h"
#include "srv_metrics.h"
#include "srv_server.h"
#include "srv_stream_snap.h"

const char *srv_stream_name(const struct srv_stream *st)
{
    return st->cfg.name;
}

const struct srv_stream_config *
srv_stream_config_get(const struct srv_stream *st)
{
    return &st->cfg;
}

struct srv_js *srv_stream_js(const struct srv_stream *st)
{
    return st->js;
}

bool srv_stream_is_leader(const struct srv_stream *st)
{
    return st->leader && !st->failed;
}

bool srv_stream_amnesiac(const struct srv_stream *st)
{
    struct replica_info ri;
    if (st->r == NULL) {
        return false;
    }
    replica_info(st->r, &ri);
    return ri.amnesiac;
}

bool srv_stream_absent_is_final(const struct srv_stream *st, uint64_t seq)
{
    struct replica_info ri;
    if (st->r == NULL) {
        return true; /* no replica here: the request went to the leader */
    }
    if (seq != 0 && seq <= st->sm.last_seq) {
        return true; /* applied past it: deleted or below the first seq */
    }
    replica_info(st->r, &ri);
    return ri.complete;
}

void **srv_stream_consumers_slot(struct srv_stream *st)
{
    return &st->consumers;
}

void srv_stream_state(const struct srv_stream *st, struct srv_stream_state *out)
{
    const struct srv_stream_sm *sm = &st->sm;
    memset(out, 0, sizeof *out);
    out->msgs = sm->msgs;
    out->bytes = sm->bytes;
    out->last_seq = sm->last_seq;
    out->last_ts_ns = sm->last_ts_ns;
    out->first_seq = sm->last_seq == 0 ? 0 : srv_stream_sm_first_seq(sm);
    const struct srv_stream_slot *s = srv_stream_sm_get(sm, out->first_seq);
    out->first_ts_ns = s != NULL ? s->ts_ns : 0;
    out->num_deleted = sm->deleted;
    out->num_subjects = sm->subjects.count;
}

int srv_stream_remove_msg(struct srv_stream *st, uint64_t seq)
{
    return srv_stream_sm_remove(&st->sm, seq);
}

int srv_stream_last_seq_for_subject(const struct srv_stream *st,
                                    const char *subject, size_t subject_len,
                                    uint64_t *seq)
{
    const struct srv_stream_subj *sj =
        srv_hmap_get(&st->sm.subjects, subject, subject_len);
    *seq = sj != NULL ? sj->last_seq : 0;
    return sj != NULL ? 0 : KEEL_ENOENT;
}

int srv_stream_next_seq(const struct srv_stream *st, uint64_t from_seq,
                        const char *const *filters, size_t nfilters,
                        uint64_t *seq)
{
    const struct srv_stream_sm *sm = &st->sm;
    uint64_t s = from_seq < sm->base_seq ? sm->base_seq : from_seq;
    uint64_t end = s + SRV_STREAM_SCAN_MAX;
    *seq = 0;
    for (; s <= sm->last_seq; s++) {
        if (s == end) {
            *seq = s;
            return KEEL_EAGAIN;
        }
        const struct srv_stream_slot *sl = srv_stream_sm_get(sm, s);
        if (sl == NULL) {
            continue;
        }
        bool match = nfilters == 0;
        for (size_t i = 0; i < nfilters && !match; i++) {
            match = srv_js_subject_matches(filters[i], sl->subj->s);
        }
        if (match) {
            *seq = s;
            return 0;
        }
    }
    return KEEL_ENOENT;
}

/* A subject delete marker has no entry of its own (the entry that expired
 * the subject's last message stored it): its body is its subject and the
 * header its TTL says (docs/decisions/0034-per-message-ttl-in-the-state-
 * machine.md). */
static int marker_load(const struct srv_stream_slot *sl, uint64_t seq,
                       struct srv_stream_msg *out)
{
    char hdr[SRV_MSG_MARKER_HDR_MAX];
    int64_t ttl_s = sl->ttl & SRV_STREAM_TTL_SECS_MASK;
    size_t hlen = srv_msg_marker_hdr(ttl_s > 0 ? ttl_s : 1, hdr, sizeof hdr);
    size_t slen = sl->subj->len;
    char *buf = malloc(slen + 1 + hlen + 1);
    if (buf == NULL) {
        return KEEL_ENOMEM;
    }
    memcpy(buf, sl->subj->s, slen + 1);
    uint8_t *h = (uint8_t *)buf + slen + 1;
    memcpy(h, hdr, hlen);
    h[hlen] = 0;
    *out = (struct srv_stream_msg){.seq = seq,
                                   .ts_ns = sl->ts_ns,
                                   .subject = buf,
                                   .subject_len = slen,
                                   .hdr = h,
                                   .hdr_len = hlen,
                                   .data = h + hlen,
                                   .data_len = 0,
                                   .buf_ = buf};
    return 0;
}

int srv_stream_msg_load(struct srv_stream *st, uint64_t seq,
                        struct srv_stream_msg *out, char *errmsg)
{
    memset(out, 0, sizeof *out);
    const struct srv_stream_slot *sl = srv_stream_sm_get(&st->sm, seq);
    if (sl == NULL || st->r == NULL) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "stream %s has no message %" PRIu64, st->cfg.name, seq);
    }
    if (srv_stream_slot_marker(sl) == SRV_STREAM_MARKER_STORED) {
        return marker_load(sl, seq, out);
    }
    struct store_entry e;
    struct keel_stream_entry d;
    int rv = replica_read(st->r, sl->index, &e, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = keel_stream_entry_decode(e.payload, e.len, &d, errmsg);
    if (rv == 0 && d.kind != KEEL_STREAM_E_PUBLISH &&
        !((d.kind == KEEL_STREAM_E_MIRROR || d.kind == KEEL_STREAM_E_SOURCE) &&
          d.subject_len > 0)) {
        rv = keel_err(KEEL_ECORRUPT, errmsg,
                      "index %" PRIu64 " is not a "
                      "publish",
                      sl->index);
    }
    char *buf = NULL;
    if (rv == 0) {
        buf = malloc(d.subject_len + 1 + d.hdr_len + d.data_len + 1);
        rv = buf == NULL ? KEEL_ENOMEM : 0;
    }
    if (rv == 0) {
        memcpy(buf, d.subject, d.subject_len);
        buf[d.subject_len] = '\0';
        uint8_t *h = (uint8_t *)buf + d.subject_len + 1;
        if (d.hdr_len > 0) {
            memcpy(h, d.hdr, d.hdr_len);
        }
        if (d.data_len > 0) {
            memcpy(h + d.hdr_len, d.data, d.data_len);
        }
        h[d.hdr_len + d.data_len] = 0;
        *out = (struct srv_stream_msg){.seq = seq,
                                       .ts_ns = sl->ts_ns,
                                       .subject = buf,
                                       .subject_len = d.subject_len,
                                       .hdr = d.hdr_len ? h : NULL,
                                       .hdr_len = d.hdr_len,
                                       .data = h + d.hdr_len,
                                       .data_len = d.data_len,
                                       .buf_ = buf};
    }
    store_entry_free(&e);
    return rv;
}

void srv_stream_msg_free(struct srv_stream_msg *m)
{
    free(m->buf_);
    memset(m, 0, sizeof *m);
}

int srv_stream_propose_entry(struct srv_stream *st,
                             const struct keel_stream_entry *e, uint64_t ctx,
                             char *errmsg)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (st->failed || st->r == NULL) {
        return keel_err(KEEL_EBUSY, errmsg, "stream %s is unavailable",
                        st->cfg.name);
    }
    int rv = keel_stream_entry_encode(e, &buf, &len);
    if (rv != 0) {
        return keel_err(rv, errmsg, "stream entry encode");
    }
    if (len > UINT32_MAX) {
        free(buf);
        return keel_err(KEEL_ETOOBIG, errmsg, "entry of %zu bytes", len);
    }
    return replica_propose_take(st->r, RAFT_ENTRY_NORMAL, buf, (uint32_t)len,
                                ctx, errmsg);
}

int srv_stream_propose(struct srv_stream *st, uint8_t kind, const void *payload,
                       uint32_t len, uint64_t ctx, char *errmsg)
{
    if (kind < SRV_STREAM_KIND_CONSUMER_MIN ||
        kind > SRV_STREAM_KIND_CONSUMER_MAX || len == UINT32_MAX) {
        return keel_err(KEEL_EINVAL, errmsg, "consumer entry kind 0x%02x",
                        kind);
    }
    if (st->failed || st->r == NULL) {
        return keel_err(KEEL_EBUSY, errmsg, "stream %s is unavailable",
                        st->cfg.name);
    }
    uint8_t *buf = malloc((size_t)len + 1);
    if (buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "consumer entry");
    }
    buf[0] = kind;
    if (len > 0) {
        memcpy(buf + 1, payload, len);
    }
    return replica_propose_take(st->r, RAFT_ENTRY_NORMAL, buf, len + 1, ctx,
                                errmsg);
}

int srv_stream_publish(struct srv_stream *st, const char *subj, size_t slen,
                       const char *hdr, size_t hlen, const char *data,
                       size_t dlen, uint64_t ctx, char *errmsg)
{
    char tsubj[SRV_JS_SUBJECT_BYTES_MAX + 1];
    int rv = srv_stream_subject_for(st, &subj, &slen, tsubj, errmsg);
    if (rv != 0) {
        return rv;
    }
    int64_t now = srv_js_now_ns();
    if (now < st->last_prop_ts) {
        now = st->last_prop_ts; /* leader time never goes backwards */
    }
    st->last_prop_ts = now;
    /* A TTL under the marker TTL is stored raised to it, as 2.11 stores
     * it (the state machine raises it at apply either way). */
    char *raised = NULL;
    size_t rlen = 0;
    const struct srv_stream_config *c = &st->cfg;
    if (c->allow_msg_ttl && c->subject_delete_marker_ttl_ns > 0 &&
        c->max_msgs_per_subject != 1 &&
        srv_msg_ttl_raise(hdr, hlen,
                          c->subject_delete_marker_ttl_ns / 1000000000LL,
                          &raised, &rlen) != 0) {
        return keel_err(KEEL_ENOMEM, errmsg, "raising a TTL");
    }
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_PUBLISH,
        .ts_ns = now,
        .subject = subj,
        .subject_len = slen,
        .hdr = (const uint8_t *)(raised != NULL ? raised : hdr),
        .hdr_len = raised != NULL ? rlen : hlen,
        .data = (const uint8_t *)data,
        .data_len = dlen};
    rv = srv_stream_propose_entry(st, &e, ctx, errmsg);
    free(raised);
    return rv;
}

void srv_stream_maybe_tick(struct srv_stream *st, int64_t now_ns)
{
    char err[KEEL_ERRMSG_MAX];
    int64_t at = INT64_MAX;
    srv_stream_cut_maybe(st);
    if (!srv_stream_is_leader(st)) {
        return;
    }
    /* max_age and per-message TTLs: the tick's own timestamp decides what
     * every replica removes (docs/decisions/0034-per-message-ttl-in-the-
     * state-machine.md). */
    srv_stream_sm_next_expiry(&st->sm, &at);
    if (at > now_ns) {
        return;
    }
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_TICK, .ts_ns = now_ns};
    if (srv_stream_propose_entry(st, &e, 0, err) != 0) {
        SRV_DEBUG("js", "stream %s: tick not proposed: %s", st->cfg.name, err);
    }
}

/* ---- apply: the state machine, then the reply to the proposer ---- */

static void answer_publish(struct srv_stream *st, const char *reply,
                           const struct srv_stream_result *res)
{
    json_t *o = json_object();
    if (o == NULL) {
        return;
    }
    if (res->jerr != SRV_JS_OK) {
        char err[KEEL_ERRMSG_MAX];
        if (srv_js_err_add(o, res->jerr, res->detail[0] ? res->detail : NULL,
                           err) != 0) {
            json_decref(o);
            return;
        }
        json_object_set_new(o, "stream", json_string(st->cfg.name));
        json_object_set_new(o, "seq", json_integer(0));
    } else {
        json_object_set_new(o, "stream", json_string(st->cfg.name));
        json_object_set_new(o, "seq", json_integer((json_int_t)res->seq));
        srv_js_domain_add(st->js, o);
        if (res->duplicate) {
            json_object_set_new(o, "duplicate", json_true());
        }
    }
    srv_js_reply_json(st->js, reply, o);
}

/* Does name need no JSON escaping? */
static bool json_plain(const char *name)
{
    for (const unsigned char *c = (const unsigned char *)name; *c != 0; c++) {
        if (*c < 0x20 || *c >= 0x7f || *c == '"' || *c == '\\') {
            return false;
        }
    }
    return true;
}

/* The PubAck of a stored publish: formatted directly, as building and
 * dumping a JSON object for it was a tenth of the loop thread's time per
 * publish. Other answers go through answer_publish. */
static bool answer_stored(struct srv_stream *st, const char *reply,
                          const struct srv_stream_result *res)
{
    static const char pre[] = "{\"stream\":\"", dom[] = "\",\"domain\":\"",
                      mid[] = "\",\"seq\":", dup[] = ",\"duplicate\":true";
    char buf[SRV_JS_NAME_BYTES_MAX + SRV_JS_DOMAIN_BYTES_MAX + 96];
    size_t nlen = strlen(st->cfg.name);
    /* jetstream { domain }: nats-server's PubAck names it (srv_config_js.c
     * keeps it free of characters JSON escapes). */
    const char *domain = srv_js_server(st->js)->cfg->js_domain;
    size_t dlen = strlen(domain);
    if (res->jerr != SRV_JS_OK || nlen > SRV_JS_NAME_BYTES_MAX ||
        !json_plain(st->cfg.name)) {
        return false;
    }
    ASSERT(dlen <= SRV_JS_DOMAIN_BYTES_MAX);
    _Static_assert(sizeof pre + sizeof dom + sizeof mid + KEEL_DEC_U64_BYTES +
                           sizeof dup + 1 <=
                       96,
                   "a PubAck fits its buffer");
    /* Without snprintf, which took 1,400 instructions per PubAck
     * (docs/bench.md, "Where a replicated publish goes"). */
    char *p = buf;
    memcpy(p, pre, sizeof pre - 1);
    p += sizeof pre - 1;
    memcpy(p, st->cfg.name, nlen);
    p += nlen;
    if (dlen > 0) {
        memcpy(p, dom, sizeof dom - 1);
        memcpy(p + sizeof dom - 1, domain, dlen);
        p += sizeof dom - 1 + dlen;
    }
    memcpy(p, mid, sizeof mid - 1);
    p = keel_put_dec(p + sizeof mid - 1, res->seq);
    if (res->duplicate) {
        memcpy(p, dup, sizeof dup - 1);
        p += sizeof dup - 1;
    }
    *p++ = '}';
    if (reply != NULL && reply[0] != '\0' &&
        srv_js_send(st->js, reply, NULL, NULL, 0, buf, (size_t)(p - buf)) !=
            0) {
        SRV_WARN("js", "reply to %s not queued", reply);
    }
    return true;
}

static void answer(struct srv_stream *st, struct srv_js_pending *p,
                   const struct srv_stream_result *res)
{
    static const char *kinds[] = {
        [SRV_JS_PEND_CREATE] = "stream_create_response",
        [SRV_JS_PEND_UPDATE] = "stream_update_response",
        [SRV_JS_PEND_DELETE] = "stream_delete_response",
        [SRV_JS_PEND_PURGE] = "stream_purge_response",
        [SRV_JS_PEND_MSG_DELETE] = "stream_msg_delete_response"};
    if (p->kind == SRV_JS_PEND_PUB || p->kind == SRV_JS_PEND_ROLLUP ||
        p->kind == SRV_JS_PEND_ROLLUP_PURGE) {
        if (!answer_stored(st, p->reply, res)) {
            answer_publish(st, p->reply, res);
        }
        return;
    }
    const char *kind = kinds[p->kind];
    if (res->jerr != SRV_JS_OK) {
        srv_js_reply_err(st->js, p->reply, kind, res->jerr,
                         res->detail[0] ? res->detail : NULL);
        return;
    }
    if (p->kind == SRV_JS_PEND_CREATE || p->kind == SRV_JS_PEND_UPDATE) {
        json_t *o = srv_stream_info_json(st, kind, NULL, false);
        if (o != NULL && p->kind == SRV_JS_PEND_CREATE) {
            json_object_set_new(o, "did_create", json_true());
        }
        srv_js_reply_json(st->js, p->reply, o);
        return;
    }
    json_t *o = json_pack("{s:s, s:b}", "type", "", "success", 1);
    char type[96];
    snprintf(type, sizeof type, "io.nats.jetstream.api.v1.%s", kind);
    if (o != NULL) {
        json_object_set_new(o, "type", json_string(type));
        if (p->kind == SRV_JS_PEND_PURGE) {
            json_object_set_new(o, "purged",
                                json_integer((json_int_t)res->purged));
        }
    }
    srv_js_reply_json(st->js, p->reply, o);
}

/* A rollup publish was stored at res->seq: propose the PURGE of the older
 * messages it rolls up (its subject's, or the stream's for "all"), the
 * PURGE entry with filter and up-to seq that every replica applies the
 * same way. The PubAck waits for that PURGE (rollup_done). Takes p. */
static void rollup_purge(struct srv_stream *st, struct srv_js_pending *p,
                         const struct keel_stream_entry *e,
                         struct srv_stream_result *res)
{
    char err[KEEL_ERRMSG_MAX] = "no longer the stream leader";
    bool all = p->rollup == SRV_JS_ROLLUP_ALL;
    struct keel_stream_entry pe = {.kind = KEEL_STREAM_E_PURGE,
                                   .subject = all ? "" : e->subject,
                                   .subject_len = all ? 0 : e->subject_len,
                                   .seq = res->seq};
    ASSERT(p->kind == SRV_JS_PEND_ROLLUP);
    ASSERT(res->seq > 0);
    p->kind = SRV_JS_PEND_ROLLUP_PURGE;
    p->seq = res->seq;
    int rv = srv_stream_is_leader(st) ? 0 : KEEL_ENOTLEADER;
    if (rv == 0) {
        uint64_t ctx = srv_js_pending_readd(st->js, p);
        rv = ctx == 0 ? keel_err(KEEL_EBUSY, err, "too many pending requests")
                      : srv_stream_propose_entry(st, &pe, ctx, err);
        if (rv == 0) {
            return;
        }
        if (ctx != 0) {
            p = srv_js_pending_take(st->js, ctx);
        }
    }
    res->jerr = SRV_JS_EROLLUP;
    snprintf(res->detail, sizeof res->detail,
             "rollup for stream failed: the message is stored at seq %" PRIu64
             " but older messages were kept (%s); publish it again",
             res->seq, err);
    answer(st, p, res);
    free(p);
}

/* The rollup's PURGE applied: the PubAck of the rolled-up message. */
static void rollup_done(struct srv_stream *st, struct srv_js_pending *p,
                        struct srv_stream_result *res)
{
    ASSERT(p->kind == SRV_JS_PEND_ROLLUP_PURGE);
    if (res->jerr != SRV_JS_OK) {
        char why[SRV_JS_ERR_DESC_BYTES_MAX];
        snprintf(why, sizeof why, "%s", res->detail);
        res->jerr = SRV_JS_EROLLUP;
        snprintf(res->detail, sizeof res->detail,
                 "rollup for stream failed: the message is stored at seq "
                 "%" PRIu64 " but older messages were kept (%.200s)",
                 p->seq, why);
    }
    res->seq = p->seq;
    res->duplicate = false;
    answer(st, p, res);
}

static void stream_fail(struct srv_stream *st, int rv, const char *msg)
{
    if (!st->failed) {
        SRV_ERROR("js", "stream %s stops taking writes: %s (%s)", st->cfg.name,
                  msg, keel_strerror(rv));
    }
    st->failed = true;
}

static void stream_apply(struct replica *r, uint64_t index, uint64_t term,
                         uint8_t type, const void *payload, uint32_t len,
                         uint64_t ctx, void *arg)
{
    struct srv_stream *st = arg;
    const uint8_t *b = payload;
    struct keel_stream_entry e;
    struct srv_stream_result res;
    char err[KEEL_ERRMSG_MAX];
    uint64_t prev = 0;
    (void)r;
    if (type != RAFT_ENTRY_NORMAL || len == 0) {
        return;
    }
    if (b[0] == SRV_STREAM_KIND_CUT) {
        srv_stream_cut_apply(st, index, b, len);
        return;
    }
    if (b[0] >= SRV_STREAM_KIND_CONSUMER_MIN &&
        b[0] <= SRV_STREAM_KIND_CONSUMER_MAX) {
        const struct srv_consumer_ops *ops = st->js->cops;
        if (ops != NULL && ops->apply != NULL) {
            ops->apply(st, index, b[0], b + 1, len - 1, ctx);
        }
        return;
    }
    int rv = keel_stream_entry_decode(b, len, &e, err);
    memset(&res, 0, sizeof res);
    if (rv == 0) {
        prev = srv_stream_republish_prev(st, &e); /* before it is stored */
    }
    if (rv != 0) {
        /* Same bytes on every replica: skipping is deterministic. */
        SRV_WARN("js", "stream %s index %" PRIu64 ": %s", st->cfg.name, index,
                 err);
        res.jerr = SRV_JS_EBAD_REQUEST;
    } else if ((rv = srv_stream_sm_apply(&st->sm, index, &e, &res)) != 0) {
        stream_fail(st, rv, "the state machine cannot hold the stream");
        res.jerr = SRV_JS_EUNAVAILABLE;
    }
    if (rv == 0 && res.stored && res.jerr == SRV_JS_OK &&
        st->js->cops != NULL && st->js->cops->on_stored != NULL) {
        st->js->cops->on_stored(st, res.seq);
    }
    for (uint64_t m = 0; rv == 0 && m < res.markers && st->js->cops != NULL &&
                         st->js->cops->on_stored != NULL;
         m++) {
        st->js->cops->on_stored(st, res.marker_first + m);
    }
    if (rv == 0 && e.kind == KEEL_STREAM_E_PUBLISH && res.jerr == SRV_JS_OK &&
        !res.duplicate) {
        srv_stream_republish(st, term, &e, res.seq, prev);
    }
    struct srv_js_pending *p = srv_js_pending_take(st->js, ctx);
    if (p != NULL && p->kind == SRV_JS_PEND_ROLLUP && rv == 0 &&
        e.kind == KEEL_STREAM_E_PUBLISH && res.jerr == SRV_JS_OK &&
        !res.duplicate) {
        rollup_purge(st, p, &e, &res);
        return;
    }
    if (p != NULL && p->kind == SRV_JS_PEND_ROLLUP_PURGE) {
        rollup_done(st, p, &res);
    } else if (p != NULL) {
        answer(st, p, &res);
    }
    free(p);
}

static void propose_config(struct srv_stream *st)
{
    char err[KEEL_ERRMSG_MAX];
    json_t *j = NULL;
    char *s = NULL;
    int rv = srv_stream_config_encode(&st->cfg, &j, err);
    if (rv == 0) {
        s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        rv = s == NULL ? KEEL_ENOMEM : 0;
    }
    if (rv == 0) {
        struct keel_stream_entry e = {.kind = KEEL_STREAM_E_CONFIG,
                                      .subject = s,
                                      .subject_len = strlen(s)};
        rv = srv_stream_propose_entry(st, &e, st->cfg_ctx, err);
    }
    if (rv == 0) {
        st->cfg_ctx = 0;
    } else {
        SRV_WARN("js", "stream %s: config entry not proposed: %s", st->cfg.name,
                 err);
    }
    free(s);
    json_decref(j);
}

static void stream_role(struct replica *r, uint8_t role, raft_node leader,
                        void *arg)
{
    struct srv_stream *st = arg;
    bool was = st->leader;
    st->leader = role == RAFT_LEADER;
    srv_stream_role_cluster(st, r, leader);
    const struct srv_consumer_ops *ops = st->js->cops;
    if (was != st->leader && ops != NULL && ops->role != NULL) {
        ops->role(st, st->leader);
    }
    if (st->leader) {
        srv_metrics_election(st->js->srv);
        /* The latest meta config, at a log point every replica sees
         * (also heals a crash between the meta commit and this entry). */
        propose_config(st);
    }
}

static void stream_failed(struct replica *r, int rv, const char *msg, void *arg)
{
    (void)r;
    stream_fail(arg, rv, msg);
}

static void stream_warn(struct replica *r, const char *msg, void *arg)
{
    const struct srv_stream *st = arg;
    (void)r;
    SRV_GWARN("js", st->cfg.name, "%s", msg);
}

void srv_stream_config_request(struct srv_stream *st, uint64_t ctx)
{
    if (st->cfg_ctx != 0) {
        free(srv_js_pending_take(st->js, st->cfg_ctx));
    }
    st->cfg_ctx = ctx;
    if (st->leader) {
        propose_config(st);
    }
}

/* ---- open / close ---- */

/* Copy a config through its JSON form (it owns json members). */
int srv_stream_config_copy(const struct srv_stream_config *src,
                           struct srv_stream_config *dst, char *errmsg)
{
    json_t *j = NULL;
    enum srv_js_err jerr = SRV_JS_OK;
    int rv = srv_stream_config_encode(src, &j, errmsg);
    if (rv == 0) {
        rv = srv_stream_config_parse(j, dst, &jerr, errmsg);
    }
    json_decref(j);
    return rv;
}

static void stream_gid(const char *name, uint64_t nonce,
                       struct store_group_id *gid)
{
    char buf[SRV_JS_NAME_BYTES_MAX + 32];
    int n =
        snprintf(buf, sizeof buf, "keel-stream:%s:%016" PRIx64, name, nonce);
    XXH128_hash_t h = XXH3_128bits(buf, (size_t)n);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    memcpy(gid->b, c.digest, sizeof gid->b);
}

static void stream_send(struct replica *r, const struct raft_msg *m, void *arg)
{
    struct srv_stream *st = arg;
    (void)r;
    srv_jsc_send(st->js->jc, st->gid.b, m);
}

static struct store_fsync stream_fsync(const struct srv_stream *st)
{
    static const enum store_fsync_policy pol[] = {
        [SRV_JS_FSYNC_GROUP] = STORE_FSYNC_GROUP,
        [SRV_JS_FSYNC_ALWAYS] = STORE_FSYNC_ALWAYS,
        [SRV_JS_FSYNC_INTERVAL] = STORE_FSYNC_INTERVAL};
    return (struct store_fsync){pol[st->cfg.fsync], st->cfg.fsync_interval_ms};
}

static int stream_replica_open(struct srv_stream *st, char *errmsg)
{
    struct srv_js *js = st->js;
    struct raft_config rc;
    struct replica_options opt;
    srv_js_group_options(js, stream_fsync(st), st->nonce, &rc, &opt);
    struct replica_callbacks cbs = {.apply = stream_apply,
                                    .role_changed = stream_role,
                                    .failed = stream_failed,
                                    .warn = stream_warn,
                                    .snapshot = srv_stream_snap_encode,
                                    .restore = srv_stream_snap_restore,
                                    .arg = st};
    if (st->place.n > 0) {
        /* Clustered: the placement is the index-1 configuration. */
        int rv = srv_stream_cluster_opts(st, &rc, &opt, errmsg);
        if (rv != 0) {
            return rv;
        }
        cbs.send = stream_send;
    }
    int rv = replica_open(js->host, &st->gid, &opt, &cbs, &st->r, errmsg);
    if (rv != 0) {
        /* The caller frees st: no Raft frame may reach its slot after
         * (a refused group of a placed stream was a use-after-free). */
        srv_stream_cluster_close(st);
        return rv;
    }
    struct replica_snap_info si;
    replica_snap_info(st->r, &si);
    if (si.log_quarantined) {
        SRV_WARN("js", "stream %s: %s", st->cfg.name, si.load);
    }
    if (si.rebuilt_segments > 0) {
        js->rebuilt_groups++;
        js->rebuilt_segments += si.rebuilt_segments;
        SRV_WARN("js",
                 "stream %s: catalogue rebuilt from %u segment file(s) "
                 "(from index %llu) after meta.lmdb was reset: this node "
                 "is the stream's only member",
                 st->cfg.name, si.rebuilt_segments,
                 (unsigned long long)si.rebuilt_from);
    }
    return 0;
}

int srv_stream_open_replica(struct srv_stream *st, char *errmsg)
{
    ASSERT(st->r == NULL && st->placed);
    return stream_replica_open(st, errmsg);
}

int srv_stream_restore_quarantined(struct srv_stream *st, uint64_t keep,
                                   struct store_qlog *out, char *errmsg)
{
    struct replica_info ri;
    char err[KEEL_ERRMSG_MAX];
    ASSERT(st->r != NULL && st->placed);
    replica_info(st->r, &ri);
    if (ri.last_index != 0 || ri.applied != 0) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "stream %s: this replica's live log is not empty "
                        "(through %llu): it is kept, nothing restored",
                        st->cfg.name, (unsigned long long)ri.last_index);
    }
    /* Nothing was applied, so the state machine is as new: the reopened
     * group rebuilds it from index 1 as at a start (rule S4). */
    struct store_fsync pol = stream_fsync(st);
    srv_stream_cluster_close(st);
    replica_close(st->r);
    st->r = NULL;
    int rv = replica_restore_quarantined(st->js->host, &st->gid, &pol, keep,
                                         out, errmsg);
    int orv = stream_replica_open(st, err);
    if (orv != 0) {
        SRV_ERROR("js", "stream %s: group not opened again: %s", st->cfg.name,
                  err);
        st->placed = false;
        st->failed = true;
        if (rv == 0) {
            rv =
                keel_err(orv, errmsg,
                         "restored, but the group did not open again: %s", err);
        }
    }
    return rv;
}

int srv_stream_open(struct srv_js *js, const struct srv_stream_config *cfg,
                    uint64_t nonce, int64_t created_ns, struct srv_stream **out,
                    char *errmsg)
{
    return srv_stream_open_placed(js, cfg, nonce, created_ns, NULL, out,
                                  errmsg);
}

/* Damage a replica cannot open with (replica_open): a log that continues
 * no valid snapshot in a group of one (with peers it opens empty and
 * amnesiac, its log quarantined, and catches up by InstallSnapshot). */
static bool refused_replica(int rv)
{
    return rv == KEEL_EFAULTY || rv == KEEL_ELOST || rv == KEEL_EAMNESIA;
}

int srv_stream_open_placed(struct srv_js *js,
                           const struct srv_stream_config *cfg, uint64_t nonce,
                           int64_t created_ns,
                           const struct srv_jsc_placement *pl,
                           struct srv_stream **out, char *errmsg)
{
    struct srv_stream *st = calloc(1, sizeof *st);
    *out = NULL;
    if (st == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "stream %s", cfg->name);
    }
    st->js = js;
    st->nonce = nonce;
    st->created_ns = created_ns;
    int rv = srv_stream_config_copy(cfg, &st->cfg, errmsg);
    if (rv == 0) {
        rv = srv_stream_sm_init(&st->sm, cfg->name);
    }
    if (rv == 0) {
        stream_gid(cfg->name, nonce, &st->gid);
        srv_stream_cluster_place(st, pl); /* may replace the gid */
        if (js->cops != NULL && js->cops->stream_opened != NULL) {
            js->cops->stream_opened(st);
        }
        rv = st->placed ? stream_replica_open(st, errmsg) : 0;
    }
    if (rv != 0 && st->place.n > 0 && refused_replica(rv)) {
        /* This replica's store is damaged (faulty, lost or amnesiac) and
         * cannot be repaired yet: its data stays on disk untouched, and
         * the stream stays served here as on a node that is not placed
         * (requests go to the leader, the other replicas hold the log),
         * rather than "stream not found" to this node's clients. */
        SRV_ERROR("js",
                  "stream %s: this node's replica is not opened (%s); "
                  "serving the stream from its other replicas",
                  cfg->name, errmsg);
        js->streams_unopened++;
        snprintf(js->unopened_why, sizeof js->unopened_why,
                 "stream %.64s replica not opened: %.160s", cfg->name, errmsg);
        st->placed = false;
        rv = 0;
    }
    if (rv != 0) {
        if (js->cops != NULL && js->cops->stream_closed != NULL) {
            js->cops->stream_closed(st, false);
        }
        srv_stream_sm_close(&st->sm);
        srv_stream_config_free(&st->cfg);
        free(st);
        return rv;
    }
    *out = st;
    return 0;
}

void srv_stream_close(struct srv_stream *st, bool deleted)
{
    struct srv_js *js = st->js;
    char err[KEEL_ERRMSG_MAX];
    if (js->cops != NULL && js->cops->stream_closed != NULL) {
        js->cops->stream_closed(st, deleted);
    }
    srv_js_pending_drop_stream(js, st);
    srv_stream_mirror__close(st); /* remote reads' kept replies */
    srv_stream_cluster_close(st);
    if (st->r != NULL) {
        replica_close(st->r);
        st->r = NULL;
    }
    /* A node that is not placed has no group files. */
    if (deleted && st->placed &&
        store_group_delete(js->store, &st->gid, err) != 0) {
        SRV_WARN("js", "stream %s deleted, its files stay: %s", st->cfg.name,
                 err);
    } else if (deleted && st->placed &&
               replica_host_delete_snapshots(js->host, &st->gid, err) != 0) {
        SRV_WARN("js", "stream %s deleted, its snapshots stay: %s",
                 st->cfg.name, err);
    }
    srv_stream_sm_close(&st->sm);
    srv_stream_config_free(&st->cfg);
    free(st);
}

/* ---- info ---- */

static json_t *time_json(int64_t ns)
{
    char buf[SRV_JS_TIME_BYTES];
    srv_js_time_format(ns, buf);
    return json_string(buf);
}

static json_t *state_json(struct srv_stream *st, const char *filter,
                          bool deleted_details)
{
    struct srv_stream_state s;
    srv_stream_state(st, &s);
    const struct srv_consumer_ops *ops = st->js->cops;
    uint64_t consumers = ops != NULL && ops->consumer_count != NULL
                             ? ops->consumer_count(st)
                             : 0;
    json_t *o = json_pack(
        "{s:I, s:I, s:I, s:o, s:I, s:o, s:I, s:I, s:I}", "messages",
        (json_int_t)s.msgs, "bytes", (json_int_t)s.bytes, "first_seq",
        (json_int_t)s.first_seq, "first_ts", time_json(s.first_ts_ns),
        "last_seq", (json_int_t)s.last_seq, "last_ts", time_json(s.last_ts_ns),
        "num_subjects", (json_int_t)s.num_subjects, "num_deleted",
        (json_int_t)s.num_deleted, "consumer_count", (json_int_t)consumers);
    if (o != NULL && filter != NULL && filter[0] != '\0') {
        json_t *subs = json_object();
        size_t pos = 0;
        struct srv_hmap_slot *sl;
        /* Bounded by the number of subjects. */
        while (subs != NULL &&
               (sl = srv_hmap_next(&st->sm.subjects, &pos)) != NULL) {
            const struct srv_stream_subj *sj = sl->value;
            if (srv_js_subject_matches(filter, sj->s)) {
                json_object_set_new(subs, sj->s,
                                    json_integer((json_int_t)sj->msgs));
            }
        }
        json_object_set_new(o, "subjects", subs);
    }
    if (o != NULL && deleted_details && s.num_deleted > 0) {
        json_t *d = json_array();
        /* Bounded by the ring (SRV_STREAM_MSGS_MAX). */
        for (uint64_t q = s.first_seq; d != NULL && q <= s.last_seq; q++) {
            if (srv_stream_sm_get(&st->sm, q) == NULL) {
                json_array_append_new(d, json_integer((json_int_t)q));
            }
        }
        json_object_set_new(o, "deleted", d);
    }
    return o;
}

json_t *srv_stream_info_json(struct srv_stream *st, const char *kind,
                             const char *subjects_filter, bool deleted_details)
{
    char err[KEEL_ERRMSG_MAX];
    char type[96];
    json_t *cfg = NULL;
    if (srv_stream_config_encode(&st->cfg, &cfg, err) != 0) {
        return NULL;
    }
    const struct srv_config *c = srv_js_server(st->js)->cfg;
    const char *leader =
        c->name[0] != '\0' ? c->name : srv_js_server(st->js)->server_id;
    snprintf(type, sizeof type, "io.nats.jetstream.api.v1.%s", kind);
    json_t *o =
        json_pack("{s:s, s:o, s:o, s:o, s:{s:s}, s:o}", "type", type, "config",
                  cfg, "created", time_json(st->created_ns), "state",
                  state_json(st, subjects_filter, deleted_details), "cluster",
                  "leader", leader, "ts", time_json(srv_js_now_ns()));
    /* nats-server names the domain in every stream info but a create's. */
    if (o != NULL && strcmp(kind, "stream_create_response") != 0) {
        srv_js_domain_add(st->js, o);
    }
    /* Info and list carry the mirror's progress; create and update
     * answers do not, as nats-server's. */
    if (o != NULL && st->cfg.has_mirror &&
        strcmp(kind, "stream_info_response") == 0) {
        json_t *m = srv_stream_mirror_info(st);
        if (m == NULL || json_object_set_new(o, "mirror", m) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    if (o != NULL && st->cfg.nsources > 0 &&
        strcmp(kind, "stream_info_response") == 0) {
        json_t *m = srv_stream_sources_info(st);
        if (m == NULL || json_object_set_new(o, "sources", m) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
