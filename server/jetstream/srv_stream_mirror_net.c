/* srv_stream_mirror_net: a mirror's leader (or a sourcing stream's, for
 * each source) reads an origin it holds no intact replica of through the
 * cluster
 * (docs/decisions/0032-mirrors-pull-into-the-log.md, "Reading an origin
 * elsewhere"). The NATS core has no internal request/reply path and needs
 * none: the read is a JetStream frame of its own kind on the cluster
 * links (SRV_CLUSTER_JS_MIRROR, as SRV_CLUSTER_JS_FWD carries forwarded
 * requests), so the layers rule holds (docs/architecture.md).
 *
 * One read in flight per mirror or source: the leader asks a node that holds
 * the origin (its leader first, the other peers after failures) for up to
 * MIRROR_READ_MSGS records from its position; that node reads its applied
 * state with the pump's own reader (srv_stream_mirror__read: every record
 * committed, an amnesiac or failed replica never read) and answers with
 * at most MIRROR_READ_BYTES (one message more when a single one is
 * larger). The reply is kept, copied, until each record is proposed in
 * seq order under the pump's window; only then is the next read sent. An
 * unanswered read is given up after MIRROR_READ_TIMEOUT_MS, a refused or
 * unsent one backs off as any unreadable origin (srv_stream_mirror.c).
 * Exactly once stays the apply's (idempotent by origin seq): a stale or
 * repeated reply changes nothing but the in-flight window.
 *
 * Frames (msgpack arrays):
 *   read:  [1, id, mirror, origin, from, filter, since_ns, max, max_bytes]
 *   (filter: the subjects kept, separated by a space, "" every subject;
 *   with more than one a 10th field, 1, so a node that knows only one
 *   filter drops the read as malformed rather than read it unfiltered)
 *   reply: [2, id, mirror, from, jerr, why, next, more, origin_last,
 *           [[seq, lost, ts_ns, subject, hdr, data], ...]]
 *   (subject "" in a record: position only, past seqs dropped unseen)
 *
 * Loop thread only. State is per process (one JetStream engine). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/grow.h"
#include "srv_cluster.h"
#include "srv_js_int.h"
#include "srv_log.h"
#include "srv_server.h"

#define MIRROR_READ_MSGS 64
#define MIRROR_READ_BYTES (1024u * 1024u)
#define MIRROR_READ_TIMEOUT_MS 2000
/* A read's filters joined by spaces (no subject holds one). */
#define MIRROR_FILTER_BYTES                                                    \
    (SRV_JS_FEED_XFORMS_MAX * (SRV_JS_SUBJECT_BYTES_MAX + 1))

enum mirror_frame {
    MIRROR_READ = 1,
    MIRROR_REPLY = 2,
};

static struct {
    struct srv_js *js;      /* attached engine, NULL when detached */
    struct srv_cluster *cl; /* its cluster */
    uint64_t next_id;
    bool warned;
} mnet;

static int64_t mono_ns(void)
{
    return (int64_t)uv_hrtime();
}

void srv_stream_mirror__drop(struct srv_mirror_pump *p)
{
    srv_stream_mirror__ext_drop(p);
    free(p->rbuf);
    p->rbuf = NULL;
    p->rpos = p->rlen = 0;
    p->rleft = 0;
    p->rmore = false;
    p->req_id = 0;
}

/* ---- the reading side ---- */

/* The node to read origin o from, NULL when none is known: its leader
 * unless the last reads failed, then its other peers in turn. */
static const char *pick_node(struct srv_js *js, const struct srv_stream *o,
                             uint32_t tries)
{
    const char *self = srv_js_self_name(js);
    const char *leader = srv_stream_leader_name(o);
    if (tries == 0 && leader != NULL && strcmp(leader, self) != 0) {
        return leader;
    }
    for (uint32_t i = 0; js->jc != NULL && i < o->place.n; i++) {
        const struct srv_jsc_member *m = &o->place.m[(tries + i) % o->place.n];
        const char *name = srv_jsc_name_of(js->jc, m->node);
        if (name != NULL && strcmp(name, self) != 0) {
            return name;
        }
    }
    return NULL;
}

static int send_read(const struct srv_stream *st, const struct srv_feed *f,
                     const struct srv_stream *o, const char *node, uint64_t id)
{
    const struct srv_stream_mirror *mc = f->o;
    const char *filters[SRV_JS_FEED_XFORMS_MAX];
    uint32_t nf = srv_stream_mirror_filters(mc, filters);
    char filter[MIRROR_FILTER_BYTES];
    size_t fl = 0;
    for (uint32_t i = 0; i < nf; i++) {
        size_t n = strlen(filters[i]);
        if (n > SRV_JS_SUBJECT_BYTES_MAX) {
            return KEEL_EINVAL;
        }
        if (i > 0) {
            filter[fl++] = ' ';
        }
        memcpy(filter + fl, filters[i], n);
        fl += n;
    }
    filter[fl] = '\0';
    int64_t since = srv_stream_feed_pos(st, f) == 0 ? mc->opt_start_time_ns : 0;
    uint8_t buf[2 * SRV_JS_NAME_BYTES_MAX + MIRROR_FILTER_BYTES +
                12 * SRV_MP_HEADER_BYTES_MAX];
    uint8_t *w = srv_mp_put_array(buf, nf > 1 ? 10 : 9);
    w = srv_mp_put_uint(w, MIRROR_READ);
    w = srv_mp_put_uint(w, id);
    w = srv_mp_put_str(w, st->cfg.name, strlen(st->cfg.name));
    w = srv_mp_put_str(w, o->cfg.name, strlen(o->cfg.name));
    w = srv_mp_put_uint(w, f->p->next);
    w = srv_mp_put_str(w, filter, strlen(filter));
    w = srv_mp_put_uint(w, since > 0 ? (uint64_t)since : 0);
    w = srv_mp_put_uint(w, MIRROR_READ_MSGS);
    w = srv_mp_put_uint(w, MIRROR_READ_BYTES);
    if (nf > 1) {
        w = srv_mp_put_uint(w, 1); /* the filters are a list */
    }
    ASSERT((size_t)(w - buf) <= sizeof buf);
    return srv_cluster_send_kind(mnet.cl, node, SRV_CLUSTER_JS_MIRROR, buf,
                                 (size_t)(w - buf));
}

/* One record of the kept reply at *r. */
static int get_rec(struct srv_mp_reader *r, struct srv_mirror_rec *rec,
                   struct srv_stream_msg *m)
{
    uint32_t n = 0;
    uint64_t ts = 0;
    const uint8_t *subj, *hdr, *data;
    size_t slen = 0, hlen = 0, dlen = 0;
    memset(m, 0, sizeof *m);
    if (srv_mp_get_array(r, &n) != 0 || n != 6 ||
        srv_mp_get_uint(r, &rec->seq) != 0 ||
        srv_mp_get_uint(r, &rec->lost) != 0 || srv_mp_get_uint(r, &ts) != 0 ||
        srv_mp_get_bytes(r, &subj, &slen) != 0 ||
        srv_mp_get_bytes(r, &hdr, &hlen) != 0 ||
        srv_mp_get_bytes(r, &data, &dlen) != 0 || rec->seq == 0 ||
        ts > INT64_MAX) {
        return KEEL_EPROTO;
    }
    m->seq = rec->seq;
    m->ts_ns = (int64_t)ts;
    m->subject = (const char *)subj;
    m->subject_len = slen;
    m->hdr = hlen > 0 ? hdr : NULL;
    m->hdr_len = hlen;
    m->data = data;
    m->data_len = dlen;
    rec->m = slen > 0 ? m : NULL;
    return 0;
}

/* Propose the kept reply's records while the window has room. Returns
 * true when one was proposed. */
static bool propose_kept(struct srv_stream *st, const struct srv_feed *f,
                         uint64_t *inflight, uint32_t window)
{
    struct srv_mirror_pump *p = f->p;
    char err[KEEL_ERRMSG_MAX];
    bool progress = false;
    while (p->rleft > 0 && *inflight < window) {
        struct srv_mp_reader r = {p->rbuf + p->rpos, p->rbuf + p->rlen};
        struct srv_mirror_rec rec;
        struct srv_stream_msg m;
        if (get_rec(&r, &rec, &m) != 0) {
            srv_stream_mirror__drop(p);
            srv_stream_mirror__fail(st, f, SRV_JS_EUNAVAILABLE,
                                    "a malformed read reply was dropped");
            return progress;
        }
        if (rec.seq < p->next) {
            p->rpos = (size_t)(r.p - p->rbuf); /* already proposed */
            p->rleft--;
            continue;
        }
        int rv = srv_stream_mirror__propose(st, f, &rec, err);
        if (rv != 0) {
            if (rv != KEEL_EBUSY) {
                SRV_DEBUG("js",
                          "stream %s: origin %s seq %" PRIu64
                          " not proposed: %s",
                          st->cfg.name, f->o->name, rec.seq, err);
            }
            return progress; /* the queue is full, or no longer leader */
        }
        p->rpos = (size_t)(r.p - p->rbuf);
        p->rleft--;
        p->next = rec.seq + 1;
        (*inflight)++;
        progress = true;
    }
    return progress;
}

bool srv_stream_mirror__remote(struct srv_stream *st, const struct srv_feed *f,
                               struct srv_stream *o, uint64_t *inflight,
                               uint32_t window)
{
    struct srv_mirror_pump *p = f->p;
    struct srv_js *js = st->js;
    char why[SRV_JS_ERR_DESC_BYTES_MAX];
    bool progress = false;
    if (p->rbuf != NULL) {
        progress = propose_kept(st, f, inflight, window);
        if (p->rbuf == NULL || p->rleft > 0) {
            return progress;
        }
        bool more = p->rmore;
        if (p->rnext > p->next) {
            p->next = p->rnext; /* skipped seqs: filtered, deleted, early */
        }
        srv_stream_mirror__drop(p);
        if (!more) {
            return progress; /* the next read on the next round */
        }
    }
    if (p->req_id != 0) {
        if (mono_ns() - p->req_ns < (int64_t)MIRROR_READ_TIMEOUT_MS * 1000000) {
            return progress; /* waiting for the reply */
        }
        p->req_id = 0;
        p->tries++;
        srv_stream_mirror__fail(st, f, SRV_JS_EUNAVAILABLE,
                                "the node holding the origin did not answer "
                                "the read in time: retrying");
        return progress;
    }
    if (*inflight >= window) {
        return progress; /* the window is full: wait for the applies */
    }
    if (mnet.cl == NULL || mnet.js != js) {
        srv_stream_mirror__fail(st, f, SRV_JS_EUNAVAILABLE,
                                "no cluster links to read the origin over");
        return progress;
    }
    const char *node = pick_node(js, o, p->tries);
    if (node == NULL) {
        srv_stream_mirror__fail(
            st, f, SRV_JS_EUNAVAILABLE,
            "the origin has no replica on this node and no other node "
            "holding one is known now: the stream waits "
            "(docs/jetstream-config.md \"Mirrors\")");
        return progress;
    }
    uint64_t id = ++mnet.next_id;
    int rv = send_read(st, f, o, node, id);
    if (rv != 0) {
        p->tries++;
        snprintf(why, sizeof why,
                 "node %s, which holds the origin, cannot be reached now (%s): "
                 "retrying",
                 node, keel_strerror(rv));
        srv_stream_mirror__fail(st, f, SRV_JS_EUNAVAILABLE, why);
        return progress;
    }
    p->req_id = id;
    p->req_ns = mono_ns();
    return progress;
}

/* A reply to a read of this node's: keep its records for the pump. */
static int on_reply(struct srv_js *js, struct srv_mp_reader *r,
                    const uint8_t *frame, size_t len)
{
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    char why[SRV_JS_ERR_DESC_BYTES_MAX];
    uint64_t id = 0, from = 0, jerr = 0, next = 0, more = 0, last = 0;
    const uint8_t *s;
    size_t n = 0, wn = 0;
    uint32_t nrec = 0;
    if (srv_mp_get_uint(r, &id) != 0 || srv_mp_get_bytes(r, &s, &n) != 0 ||
        n >= sizeof name) {
        return KEEL_EPROTO;
    }
    memcpy(name, s, n);
    name[n] = '\0';
    if (srv_mp_get_uint(r, &from) != 0 || srv_mp_get_uint(r, &jerr) != 0 ||
        srv_mp_get_bytes(r, &s, &wn) != 0 || srv_mp_get_uint(r, &next) != 0 ||
        srv_mp_get_uint(r, &more) != 0 || srv_mp_get_uint(r, &last) != 0 ||
        srv_mp_get_array(r, &nrec) != 0 || nrec > MIRROR_READ_MSGS) {
        return KEEL_EPROTO;
    }
    snprintf(why, sizeof why, "%.*s", (int)(wn < sizeof why ? wn : 0),
             (const char *)s);
    struct srv_stream *st = NULL;
    struct srv_feed fs[SRV_JS_SOURCES_MAX];
    const struct srv_feed *f = NULL;
    uint32_t nf = id != 0 && srv_js_find_stream(js, name, &st) == 0
                      ? srv_stream_feeds(st, fs)
                      : 0;
    for (uint32_t i = 0; i < nf && f == NULL; i++) {
        f = fs[i].p->req_id == id ? &fs[i] : NULL;
    }
    if (f == NULL) {
        return 0; /* stale: the stream or source went, or it was given up */
    }
    struct srv_mirror_pump *p = f->p;
    p->req_id = 0;
    if (jerr != 0) {
        p->tries++;
        srv_stream_mirror__fail(st, f,
                                jerr == SRV_JS_ESTREAM_NOT_FOUND
                                    ? SRV_JS_ESTREAM_NOT_FOUND
                                    : SRV_JS_EUNAVAILABLE,
                                why[0] != '\0' ? why : "the read was refused");
        return 0;
    }
    if (from != p->next) {
        return 0; /* read for a cursor the pump left (a new term) */
    }
    p->origin_last = last;
    srv_stream_mirror__contact(p);
    p->tries = 0;
    if (nrec == 0) {
        if (next > p->next) {
            p->next = next;
        }
        if (more != 0) {
            srv_stream_mirror__kick(js);
        }
        return 0;
    }
    p->rbuf = malloc(len);
    if (p->rbuf == NULL) {
        return 0; /* read again on a later round */
    }
    memcpy(p->rbuf, frame, len);
    p->rpos = (size_t)(r->p - frame);
    p->rlen = len;
    p->rleft = nrec;
    p->rnext = next;
    p->rmore = more != 0;
    srv_stream_mirror__kick(js);
    return 0;
}

/* ---- the serving side ---- */

struct recs {
    uint8_t *b;
    size_t len, cap;
    uint32_t n;
    uint64_t max_bytes;
    bool full; /* stopped at max_bytes */
};

static int emit_append(void *arg, const struct srv_mirror_rec *rec)
{
    struct recs *o = arg;
    const struct srv_stream_msg *m = rec->m;
    size_t body = m != NULL ? m->subject_len + m->hdr_len + m->data_len : 0;
    size_t need = body + 7 * SRV_MP_HEADER_BYTES_MAX;
    if (o->n > 0 && o->len + need > o->max_bytes) {
        o->full = true;
        return KEEL_ELIMIT;
    }
    if (keel_reserve(&o->b, &o->cap, o->len + need, 1, 4096) != 0) {
        o->full = true;
        return KEEL_ENOMEM;
    }
    uint8_t *w = srv_mp_put_array(o->b + o->len, 6);
    w = srv_mp_put_uint(w, rec->seq);
    w = srv_mp_put_uint(w, rec->lost);
    w = srv_mp_put_uint(w, m != NULL && m->ts_ns > 0 ? (uint64_t)m->ts_ns : 0);
    w = srv_mp_put_str(w, m != NULL ? m->subject : "",
                       m != NULL ? m->subject_len : 0);
    w = srv_mp_put_bin_header(w, m != NULL ? m->hdr_len : 0);
    if (m != NULL && m->hdr_len > 0) {
        memcpy(w, m->hdr, m->hdr_len);
        w += m->hdr_len;
    }
    w = srv_mp_put_bin_header(w, m != NULL ? m->data_len : 0);
    if (m != NULL && m->data_len > 0) {
        memcpy(w, m->data, m->data_len);
        w += m->data_len;
    }
    o->len = (size_t)(w - o->b);
    ASSERT(o->len <= o->cap);
    o->n++;
    return 0;
}

static void send_reply(const char *to, uint64_t id, const char *mirror,
                       uint64_t from, enum srv_js_err jerr, const char *why,
                       uint64_t next, bool more, uint64_t last,
                       const struct recs *recs)
{
    size_t rlen = recs != NULL ? recs->len : 0;
    size_t need =
        strlen(mirror) + strlen(why) + rlen + 12 * SRV_MP_HEADER_BYTES_MAX;
    uint8_t *buf = malloc(need);
    if (buf == NULL) {
        return; /* the reader times out and asks again */
    }
    uint8_t *w = srv_mp_put_array(buf, 10);
    w = srv_mp_put_uint(w, MIRROR_REPLY);
    w = srv_mp_put_uint(w, id);
    w = srv_mp_put_str(w, mirror, strlen(mirror));
    w = srv_mp_put_uint(w, from);
    w = srv_mp_put_uint(w, (uint64_t)jerr);
    w = srv_mp_put_str(w, why, strlen(why));
    w = srv_mp_put_uint(w, next);
    w = srv_mp_put_uint(w, more ? 1 : 0);
    w = srv_mp_put_uint(w, last);
    w = srv_mp_put_array(w, recs != NULL ? recs->n : 0);
    if (rlen > 0) {
        memcpy(w, recs->b, rlen);
        w += rlen;
    }
    ASSERT((size_t)(w - buf) <= need);
    int rv = srv_cluster_send_kind(mnet.cl, to, SRV_CLUSTER_JS_MIRROR, buf,
                                   (size_t)(w - buf));
    if (rv != 0) {
        SRV_DEBUG("js", "mirror %s: read reply to %s not sent: %s", mirror, to,
                  keel_strerror(rv));
    }
    free(buf);
}

/* A read of a mirror elsewhere: answer from this node's replica. */
static int on_read(struct srv_js *js, const char *to, struct srv_mp_reader *r)
{
    char mirror[SRV_JS_NAME_BYTES_MAX + 1];
    char origin[SRV_JS_NAME_BYTES_MAX + 1];
    char filter[MIRROR_FILTER_BYTES];
    char err[KEEL_ERRMSG_MAX];
    char *outs[3] = {mirror, origin, filter};
    size_t caps[3] = {sizeof mirror, sizeof origin, sizeof filter};
    uint64_t id = 0, from = 0, since = 0, max = 0, max_bytes = 0;
    const uint8_t *s;
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        if ((i == 0 && srv_mp_get_uint(r, &id) != 0) ||
            (i == 2 && srv_mp_get_uint(r, &from) != 0) ||
            srv_mp_get_bytes(r, &s, &n) != 0 || n >= caps[i]) {
            return KEEL_EPROTO;
        }
        memcpy(outs[i], s, n);
        outs[i][n] = '\0';
    }
    if (srv_mp_get_uint(r, &since) != 0 || srv_mp_get_uint(r, &max) != 0 ||
        srv_mp_get_uint(r, &max_bytes) != 0 || from == 0 || since > INT64_MAX) {
        return KEEL_EPROTO;
    }
    const char *filters[SRV_JS_FEED_XFORMS_MAX];
    size_t nf = 0;
    for (char *save = NULL, *t = strtok_r(filter, " ", &save); t != NULL;
         t = strtok_r(NULL, " ", &save)) {
        if (nf == SRV_JS_FEED_XFORMS_MAX || !srv_js_subject_valid(t, true)) {
            return KEEL_EPROTO;
        }
        filters[nf++] = t;
    }
    struct srv_stream *o = NULL;
    if (srv_js_find_stream(js, origin, &o) != 0) {
        send_reply(to, id, mirror, from, SRV_JS_ESTREAM_NOT_FOUND, "", from,
                   false, 0, NULL);
        return 0;
    }
    if (!srv_stream_mirror__readable(o)) {
        snprintf(err, sizeof err,
                 "node %s holds no intact replica of the origin now: retrying "
                 "on another",
                 srv_js_self_name(js));
        send_reply(to, id, mirror, from, SRV_JS_EUNAVAILABLE, err, from, false,
                   0, NULL);
        return 0;
    }
    struct recs recs = {.max_bytes = max_bytes < MIRROR_READ_BYTES
                                         ? max_bytes
                                         : MIRROR_READ_BYTES};
    uint64_t next = from;
    int failed = 0;
    bool more = srv_stream_mirror__read(
        o, &next, filters, nf, (int64_t)since,
        max < MIRROR_READ_MSGS ? (uint32_t)max : MIRROR_READ_MSGS, emit_append,
        &recs, &failed, err);
    if (failed != 0 && recs.n == 0) {
        send_reply(to, id, mirror, from, SRV_JS_EUNAVAILABLE, err, from, false,
                   0, NULL);
    } else {
        send_reply(to, id, mirror, from, SRV_JS_OK, "", next, more || recs.full,
                   o->sm.last_seq, &recs);
    }
    free(recs.b);
    return 0;
}

/* Dispatch of one SRV_CLUSTER_JS_MIRROR frame (bytes from the network: a
 * malformed frame is dropped with a warning, never asserted on). */
static void on_frame(void *arg, const char *from, const uint8_t *data,
                     size_t len)
{
    struct srv_js *js = arg;
    if (js != mnet.js || js->stopping) {
        return; /* detached, or stopping */
    }
    struct srv_mp_reader r = {data, data + len};
    uint32_t fields = 0;
    uint64_t kind = 0;
    bool ok =
        srv_mp_get_array(&r, &fields) == 0 && srv_mp_get_uint(&r, &kind) == 0;
    /* A newer kind is ignored, not malformed: nodes of two versions. */
    if (ok && kind == MIRROR_READ) {
        /* Its 10th field says the filter is a list (read as one). */
        ok = (fields == 9 || fields == 10) && on_read(js, from, &r) == 0;
    } else if (ok && kind == MIRROR_REPLY) {
        ok = fields == 10 && on_reply(js, &r, data, len) == 0;
    }
    if (!ok) {
        SRV_WARN("js", "malformed mirror read frame from %s dropped", from);
    }
}

void srv_stream_mirror__attach(struct srv_js *js)
{
    struct srv_cluster *cl = srv_js_server(js)->cluster;
    if (cl == NULL || (mnet.js == js && mnet.cl == cl)) {
        return;
    }
    if (srv_cluster_register_kind(cl, SRV_CLUSTER_JS_MIRROR, on_frame, js) !=
        0) {
        if (!mnet.warned) {
            SRV_WARN("js", "mirrors cannot read origins on other nodes: the "
                           "cluster frame kind has another handler");
            mnet.warned = true;
        }
        return;
    }
    mnet.js = js;
    mnet.cl = cl;
}

void srv_stream_mirror__detach(struct srv_js *js)
{
    if (mnet.js != js || mnet.cl == NULL) {
        return;
    }
    /* Clearing the handler of an extension kind cannot fail. */
    int rv =
        srv_cluster_register_kind(mnet.cl, SRV_CLUSTER_JS_MIRROR, NULL, NULL);
    ASSERT(rv == 0);
    mnet.js = NULL;
    mnet.cl = NULL;
}
