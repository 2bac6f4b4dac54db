/* srv_js_direct: $JS.API.DIRECT.GET.<stream>[.<subject>] for allow_direct
 * streams (docs/jetstream-config.md, "Direct get"): one message by seq,
 * last_by_subj or next_by_subj, and nats-server 2.11's batched
 * ("batch", "start_time", "max_bytes") and multi-subject ("multi_last",
 * "up_to_seq", "up_to_time") forms, whose replies carry Nats-Num-Pending
 * and Nats-Last-Sequence and end with a "204 EOB" status.
 *
 * Answers are raw messages and status lines, never JSON: a bad request is
 * a 408 status as nats-server sends it. Everything is read from this
 * node's applied state on the loop thread; a reply is bounded by
 * SRV_JS_DIRECT_BATCH_MAX messages and SRV_JS_DIRECT_BYTES_MAX bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_direct_req.h"
#include "srv_js_int.h"
#include "srv_log.h"

/* One reply under construction: the stream and what was sent so far. */
struct dout {
    struct srv_js *js;
    struct srv_stream *st;
    const char *reply;
    uint64_t sent, sent_bytes, last_seq;
};

static void status(struct srv_js *js, const char *reply, const char *line)
{
    char h[160];
    int n = snprintf(h, sizeof h, "NATS/1.0 %s\r\n\r\n", line);
    ASSERT(n > 0 && (size_t)n < sizeof h);
    if (srv_js_send(js, reply, NULL, h, (size_t)n, NULL, 0) != 0) {
        SRV_DEBUG("js", "direct get status to %s not queued", reply);
    }
}

/* The first live seq >= from matching filter (NULL: any). Returns 0 or
 * KEEL_ENOENT. srv_stream_next_seq bounds each call; keep going. */
static int next_live(const struct srv_stream *st, uint64_t from,
                     const char *filter, uint64_t *seq)
{
    const char *f[] = {filter};
    size_t nf = filter != NULL ? 1 : 0;
    int rv;
    /* Each round advances SRV_STREAM_SCAN_MAX seqs: bounded by last_seq. */
    while ((rv = srv_stream_next_seq(st, from, f, nf, seq)) == KEEL_EAGAIN) {
        from = *seq;
    }
    return rv;
}

/* ---- sending ---- */

/* Send message m: the Nats-Stream/-Subject/-Sequence/-Time-Stamp headers
 * (with Nats-Num-Pending and Nats-Last-Sequence in a batch, np >= 0)
 * before the message's own, or no headers at all for no_hdr. Returns 0 or
 * KEEL_ENOMEM. */
static int send_msg(struct dout *o, const struct srv_stream_msg *m, int64_t np,
                    bool no_hdr)
{
    const char *own = "";
    size_t own_len = 0;
    char t[SRV_JS_TIME_BYTES];
    char extra[96] = "";
    srv_js_time_format(m->ts_ns, t);
    /* The stored block minus its NATS/1.0 line and final blank line. */
    if (m->hdr_len > 12) {
        const char *nl = memchr(m->hdr, '\n', m->hdr_len);
        if (nl != NULL) {
            own = nl + 1;
            own_len = m->hdr_len - (size_t)(own - (const char *)m->hdr) - 2;
        }
    }
    if (np >= 0) {
        snprintf(extra, sizeof extra,
                 "Nats-Num-Pending: %" PRId64 "\r\nNats-Last-Sequence: "
                 "%" PRIu64 "\r\n",
                 np, o->last_seq);
    }
    const char *name = srv_stream_name(o->st);
    size_t cap = 128 + strlen(name) + m->subject_len + strlen(extra) + own_len;
    char *h = no_hdr ? NULL : malloc(cap);
    int n = 0;
    if (!no_hdr && h == NULL) {
        return KEEL_ENOMEM;
    }
    if (h != NULL) {
        n = snprintf(h, cap,
                     "NATS/1.0\r\nNats-Stream: %s\r\nNats-Subject: %.*s\r\n"
                     "Nats-Sequence: %" PRIu64 "\r\nNats-Time-Stamp: %s\r\n"
                     "%s%.*s\r\n",
                     name, (int)m->subject_len, m->subject, m->seq, t, extra,
                     (int)own_len, own);
        ASSERT(n > 0 && (size_t)n < cap);
    }
    if (srv_js_send(o->js, o->reply, NULL, h, (size_t)n, m->data,
                    m->data_len) != 0) {
        SRV_DEBUG("js", "direct get reply to %s not queued", o->reply);
    }
    free(h);
    o->sent++;
    o->sent_bytes += m->subject_len + m->hdr_len + m->data_len;
    o->last_seq = m->seq;
    return 0;
}

/* Load seq and send it; false when it could not be loaded (rv says why). */
static bool load_send(struct dout *o, uint64_t seq, int64_t np, bool no_hdr,
                      int *rv)
{
    struct srv_stream_msg m;
    char err[KEEL_ERRMSG_MAX];
    *rv = srv_stream_msg_load(o->st, seq, &m, err);
    if (*rv != 0) {
        return false;
    }
    *rv = send_msg(o, &m, np, no_hdr);
    srv_stream_msg_free(&m);
    return *rv == 0;
}

/* max_bytes: 0 or more than keeld sends in one reply is the bound. */
static uint64_t bytes_max(const struct srv_js_direct_req *r)
{
    return r->max_bytes > 0 && (uint64_t)r->max_bytes < SRV_JS_DIRECT_BYTES_MAX
               ? (uint64_t)r->max_bytes
               : SRV_JS_DIRECT_BYTES_MAX;
}

/* ---- multi_last ---- */

/* multi_last: the last message of each matching subject up to up_to_seq
 * (or up_to_time), at or after seq, ascending, then an EOB naming the
 * up_to seq. */
static void get_multi_last(struct dout *o, const struct srv_js_direct_req *r)
{
    const struct srv_stream_sm *sm = &o->st->sm;
    uint64_t up_to = r->up_to_seq, *seqs = NULL;
    size_t n = 0;
    if (r->has_up_to_time) {
        up_to = srv_js_direct_seq_at_time(sm, r->up_to_ns);
        if (up_to <= srv_stream_sm_first_seq(sm)) {
            status(o->js, o->reply, "404 No Results");
            return;
        }
        up_to--; /* the first seq at the time is the ceiling's next */
    }
    if (up_to == 0) {
        up_to = sm->last_seq;
    }
    seqs = malloc(SRV_JS_DIRECT_BATCH_MAX * sizeof *seqs);
    if (seqs == NULL) {
        status(o->js, o->reply, "500 Out Of Memory");
        return;
    }
    if (srv_js_direct_multi_last(sm, r->multi, up_to, seqs, &n) != 0) {
        status(o->js, o->reply, "413 Too Many Results");
        free(seqs);
        return;
    }
    uint64_t np = n, limit = bytes_max(r);
    int rv = 0;
    for (size_t i = 0; i < n; i++) {
        np--;
        if (seqs[i] < r->seq) {
            continue;
        }
        if (!load_send(o, seqs[i], (int64_t)np, r->no_hdr, &rv) ||
            o->sent_bytes >= limit ||
            (r->batch > 0 && o->sent >= (uint64_t)r->batch)) {
            break;
        }
    }
    free(seqs);
    char eob[160];
    snprintf(eob, sizeof eob,
             "204 EOB\r\nNats-Num-Pending: %" PRIu64
             "\r\nNats-Last-Sequence: %" PRIu64
             "\r\nNats-UpTo-Sequence: %" PRIu64,
             np, o->last_seq, up_to);
    /* A message that failed to load ends the reply as on nats-server. */
    status(o->js, o->reply,
           n == 0    ? "404 No Results"
           : rv != 0 ? "404 Message Not Found"
                     : eob);
}

/* ---- one message, or a batch ---- */

/* The seq of message i of the request, from *cursor on. */
static int pick(const struct srv_stream *st, const struct srv_js_direct_req *r,
                bool batch, uint64_t i, uint64_t *cursor, uint64_t *seq)
{
    int rv;
    if (r->last_for != NULL) {
        *seq = srv_js_api__last_matching(st, r->last_for);
        return *seq != 0 ? 0 : KEEL_ENOENT;
    }
    if (*cursor > 0 && r->next_for == NULL && i == 0 && !batch) {
        *seq = *cursor;
        rv = srv_stream_sm_get(&st->sm, *seq) != NULL ? 0 : KEEL_ENOENT;
    } else {
        rv = next_live(st, *cursor > 0 ? *cursor : 1, r->next_for, seq);
    }
    *cursor = (rv == 0 ? *seq : *cursor) + 1;
    return rv;
}

static void get_batch(struct dout *o, const struct srv_js_direct_req *r)
{
    struct srv_stream *st = o->st;
    bool batch = r->batch > 0;
    uint64_t cursor =
        r->has_start ? srv_js_direct_seq_at_time(&st->sm, r->start_ns) : r->seq;
    uint64_t want = !batch ? 1
                    : (uint64_t)r->batch > SRV_JS_DIRECT_BATCH_MAX
                        ? SRV_JS_DIRECT_BATCH_MAX
                        : (uint64_t)r->batch;
    uint64_t np =
        batch ? srv_js_direct_num_pending(&st->sm, cursor, r->next_for) : 0;
    uint64_t limit = bytes_max(r), seq = 0;
    int rv = 0;
    if (r->last_for != NULL && !srv_js_subject_valid(r->last_for, true)) {
        rv = KEEL_EINVAL;
    } else if (r->next_for != NULL &&
               !srv_js_subject_valid(r->next_for, true)) {
        rv = KEEL_EINVAL;
    }
    for (uint64_t i = 0; rv == 0 && i < want; i++) {
        if (pick(st, r, batch, i, &cursor, &seq) != 0) {
            rv = i == 0 ? KEEL_ENOENT : 0;
            break;
        }
        np -= np > 0 ? 1 : 0;
        if (!load_send(o, seq, batch ? (int64_t)np : -1, r->no_hdr, &rv) ||
            o->sent_bytes >= limit) {
            break;
        }
    }
    if (rv != 0 && o->sent == 0) {
        bool busy = srv_js_api__get_error(st, seq, rv) == SRV_JS_EUNAVAILABLE;
        status(o->js, o->reply,
               busy ? "503 Stream Replica Unavailable"
                    : "404 Message Not Found");
        return;
    }
    if (batch) {
        char eob[128];
        snprintf(eob, sizeof eob,
                 "204 EOB\r\nNats-Num-Pending: %" PRIu64
                 "\r\nNats-Last-Sequence: %" PRIu64,
                 np, o->last_seq);
        status(o->js, o->reply, eob);
    }
}

/* ---- the request ---- */

/* Check a request and run it; key is the subject of the subject form
 * ($JS.API.DIRECT.GET.<stream>.<subject>), else NULL. */
static void run(struct dout *o, const char *key, const char *body, size_t len)
{
    json_t *j = NULL;
    struct srv_js_direct_req r;
    const char *bad = NULL;
    if (len > 0 && (j = json_loadb(body, len, 0, NULL)) == NULL) {
        status(o->js, o->reply, "408 Malformed Request");
        return;
    }
    if (srv_js_direct_parse(j, key != NULL, &r, &bad) != 0) {
        status(o->js, o->reply, bad);
    } else if ((r.multi != NULL || r.batch > 0) &&
               !srv_stream_absent_is_final(o->st, 0)) {
        /* A batch says how many are pending: only a replica whose state
         * holds every acknowledged message may say it (issue 8). */
        status(o->js, o->reply, "503 Stream Replica Unavailable");
    } else if (r.multi != NULL) {
        get_multi_last(o, &r);
    } else {
        r.last_for = key != NULL ? key : r.last_for;
        get_batch(o, &r);
    }
    json_decref(j);
}

bool srv_js_direct_one(struct srv_js *js, struct srv_stream *st,
                       const char *key, const char *reply, const char *body,
                       size_t len)
{
    struct dout o = {.js = js, .st = st, .reply = reply};
    struct srv_js_direct_req r;
    const char *bad = NULL;
    uint64_t cursor, seq = 0;
    int rv = KEEL_EINVAL;
    json_t *j = len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
    if ((len == 0 || j != NULL) &&
        srv_js_direct_parse(j, key != NULL, &r, &bad) == 0 && r.multi == NULL &&
        r.batch <= 0 && !r.has_start) {
        r.last_for = key != NULL ? key : r.last_for;
        cursor = r.seq;
        bool valid =
            (r.last_for == NULL || srv_js_subject_valid(r.last_for, true)) &&
            (r.next_for == NULL || srv_js_subject_valid(r.next_for, true));
        /* A miss is never answered here: the leader says "not found". */
        if (valid && pick(st, &r, false, 0, &cursor, &seq) == 0) {
            (void)load_send(&o, seq, -1, r.no_hdr, &rv);
        }
    }
    json_decref(j);
    return o.sent > 0;
}

void srv_js_direct(struct srv_js *js, const char *rest, const char *reply,
                   const char *body, size_t len)
{
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    const char *dot = strchr(rest, '.');
    size_t n = dot != NULL ? (size_t)(dot - rest) : strlen(rest);
    struct srv_stream *st = NULL;
    if (n == 0 || n > SRV_JS_NAME_BYTES_MAX) {
        return;
    }
    memcpy(name, rest, n);
    name[n] = '\0';
    if (srv_js_find_stream(js, name, &st) != 0 || !st->cfg.allow_direct ||
        srv_stream_amnesiac(st)) {
        /* No origin to read here (gone, or without allow_direct): a mirror
         * of it with mirror_direct answers in its place, misses included,
         * as on nats-server. */
        st = srv_js_direct_mirror_of(js, name);
        if (st == NULL) {
            status(js, reply, "503");
            return;
        }
        js->direct.mirror++;
    } else {
        js->direct.leader++;
    }
    struct dout o = {.js = js, .st = st, .reply = reply};
    if (dot != NULL && dot[1] == '\0') {
        status(js, reply, "408 Bad Request");
        return;
    }
    run(&o, dot != NULL ? dot + 1 : NULL, body, len);
}
