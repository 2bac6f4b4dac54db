/* srv_stream_mirror: the pump of a stream's `mirror`, and of each of its
 * `sources` (docs/decisions/0032-mirrors-pull-into-the-log.md,
 * docs/decisions/0035-sources-share-the-mirror-pump.md). A source is read
 * as a mirror's origin is; its messages are proposed as SOURCE entries
 * (the stream's own seq, a Nats-Stream-Source header) and its position is
 * the applied sm.src entry of its name. Several sources are pumped in
 * turn, each at most SOURCE_BATCH records a turn. Only the mirror
 * group's leader, in its term, pumps: it reads the origin's applied state
 * (every message there is committed), on its own node when it holds an
 * intact replica of the origin, else through the cluster from a node that
 * does (srv_stream_mirror_net.c), and proposes each message as a MIRROR
 * entry carrying the origin seq, timestamp, subject, headers and payload.
 * The position is the applied sm.mirror_pos, part of the mirror's
 * replicated state and snapshot; the apply skips an origin seq not above
 * it, so a new leader that sends again what its predecessor's log already
 * holds never stores a message twice.
 *
 * One timer on the loop runs every pump: at once again while a pump made
 * progress, else every MIRROR_IDLE_MS; an origin that cannot be read is
 * retried with a doubling wait up to MIRROR_BACKOFF_MAX_MS. A pump
 * proposes only while its group's entries in flight (in the log, not yet
 * applied) are fewer than its window: MIRROR_WINDOW_FIRST until it has
 * read a record, then as many of the largest record it read this term as
 * fit MIRROR_WINDOW_BYTES (1 to MIRROR_WINDOW_MAX). One fdatasync then
 * commits many of them: with 64 in flight a local R1 mirror of 128 B
 * messages caught up at 13,700 msgs/s, with 16,384 at 218,000 on a quiet
 * machine (docs/bench.md "Mirrors"). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_int.h"
#include "srv_log.h"

#define MIRROR_IDLE_MS 20
#define MIRROR_BUSY_MS 1
#define MIRROR_WINDOW_FIRST 64
#define MIRROR_WINDOW_MAX 16384
#define MIRROR_WINDOW_BYTES (16u * 1024 * 1024)
#define MIRROR_BACKOFF_MIN_MS 100
#define MIRROR_BACKOFF_MAX_MS 2000
#define SOURCE_BATCH 16

static int64_t mono_ns(void)
{
    return (int64_t)uv_hrtime();
}

void srv_stream_mirror__fail(const struct srv_stream *st,
                             const struct srv_feed *f, enum srv_js_err jerr,
                             const char *why)
{
    struct srv_mirror_pump *p = f->p;
    if (p->jerr != jerr || strcmp(p->why, why) != 0) {
        SRV_WARN("js", "%s %s: origin %s: %s", f->source ? "stream" : "mirror",
                 st->cfg.name, f->o->name, why);
    }
    p->jerr = jerr;
    snprintf(p->why, sizeof p->why, "%s", why);
    p->backoff_ms = p->backoff_ms == 0 ? MIRROR_BACKOFF_MIN_MS
                    : p->backoff_ms * 2 > MIRROR_BACKOFF_MAX_MS
                        ? MIRROR_BACKOFF_MAX_MS
                        : p->backoff_ms * 2;
    p->retry_ns = mono_ns() + (int64_t)p->backoff_ms * 1000000;
}

void srv_stream_mirror__contact(struct srv_mirror_pump *p)
{
    p->contact_ns = mono_ns();
    p->jerr = SRV_JS_OK;
    p->why[0] = '\0';
    p->backoff_ms = 0;
    p->retry_ns = 0;
}

bool srv_stream_mirror__readable(const struct srv_stream *o)
{
    return o->r != NULL && o->placed && !o->failed && !srv_stream_amnesiac(o);
}

/* The Nats-Stream-Source line nats-server 2.9.10 writes: the origin's
 * name and the message's seq there. */
static size_t source_line(const struct srv_feed *f, uint64_t seq, char *buf,
                          size_t n)
{
    int w = snprintf(buf, n, "Nats-Stream-Source: %s %" PRIu64 "\r\n",
                     f->o->name, seq);
    ASSERT(w > 0 && (size_t)w < n);
    return (size_t)w;
}

int srv_stream_mirror__propose(struct srv_stream *st, const struct srv_feed *f,
                               const struct srv_mirror_rec *r, char *err)
{
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_MIRROR, .seq = r->seq, .lost = r->lost};
    const struct srv_stream_msg *m = r->m;
    char *hdr = NULL;
    char subj[SRV_JS_SUBJECT_BYTES_MAX + 1];
    if (m != NULL) {
        e.ts_ns = m->ts_ns;
        e.subject = m->subject;
        e.subject_len = m->subject_len;
        /* The subject it is stored under, decided here so the entry in
         * the log holds it for every replica and replay (as a stream's
         * subject_transform, decision 0029). */
        size_t n = 0;
        if (srv_stream_mirror_xform(f->o, m->subject, m->subject_len, subj,
                                    &n)) {
            e.subject = subj;
            e.subject_len = n;
        }
        e.hdr = m->hdr;
        e.hdr_len = m->hdr_len;
        e.data = m->data;
        e.data_len = m->data_len;
    }
    if (f->source) {
        e.kind = KEEL_STREAM_E_SOURCE;
        e.source = f->o->name;
        e.source_len = strlen(f->o->name);
        e.ts_ns = 0;
    }
    if (f->source && m != NULL) {
        /* The stream's own clock, as for a publish; the origin's header
         * block with its Nats-Stream-Source (a daisy chain's earlier one
         * replaced, as nats-server does). */
        int64_t now = srv_js_now_ns();
        e.ts_ns = now > st->last_prop_ts ? now : st->last_prop_ts;
        st->last_prop_ts = e.ts_ns;
        char line[SRV_JS_NAME_BYTES_MAX + 64];
        size_t ln = source_line(f, r->seq, line, sizeof line);
        size_t hlen = 0;
        int rv =
            srv_nats_hdr_replace((const char *)m->hdr, m->hdr_len,
                                 "Nats-Stream-Source", line, ln, &hdr, &hlen);
        if (rv != 0) {
            return keel_err(rv, err,
                            "origin seq %" PRIu64 ": its header "
                            "block cannot take Nats-Stream-Source",
                            r->seq);
        }
        e.hdr = (const uint8_t *)hdr;
        e.hdr_len = hlen;
    }
    int rv = srv_stream_propose_entry(st, &e, 0, err);
    free(hdr);
    return rv;
}

/* Where reading starts for a feed that read nothing yet. */
static uint64_t start_seq(const struct srv_stream *st, const struct srv_feed *f)
{
    uint64_t pos = srv_stream_feed_pos(st, f);
    if (pos > 0) {
        return pos + 1;
    }
    return f->o->opt_start_seq > 0 ? f->o->opt_start_seq : 1;
}

uint64_t srv_stream_feed_pos(const struct srv_stream *st,
                             const struct srv_feed *f)
{
    return f->source ? srv_stream_sm_source_pos(&st->sm, f->o->name, NULL)
                     : st->sm.mirror_pos;
}

/* Make st's source pumps match cfg.sources by name: a pump whose source
 * is gone is dropped, one added starts clean. */
static int sync_pumps(struct srv_stream *st)
{
    const struct srv_stream_config *c = &st->cfg;
    bool same = st->nsrcp == c->nsources;
    for (uint32_t i = 0; same && i < c->nsources; i++) {
        same = strcmp(st->srcp[i].origin, c->sources[i].name) == 0;
    }
    if (same) {
        return 0;
    }
    struct srv_mirror_pump *np =
        c->nsources > 0 ? calloc(c->nsources, sizeof *np) : NULL;
    if (c->nsources > 0 && np == NULL) {
        return KEEL_ENOMEM;
    }
    for (uint32_t i = 0; i < c->nsources; i++) {
        snprintf(np[i].origin, sizeof np[i].origin, "%s", c->sources[i].name);
        for (uint32_t k = 0; k < st->nsrcp; k++) {
            if (strcmp(st->srcp[k].origin, np[i].origin) == 0) {
                np[i] = st->srcp[k]; /* kept: its read and state move */
                st->srcp[k].rbuf = NULL;
                st->srcp[k].ext = NULL;
            }
        }
    }
    srv_stream_mirror__close(st);
    st->srcp = np;
    st->nsrcp = c->nsources;
    return 0;
}

uint32_t srv_stream_feeds(struct srv_stream *st, struct srv_feed *f)
{
    if (st->cfg.has_mirror) {
        f[0] = (struct srv_feed){&st->cfg.mirror, &st->mir, false};
        return 1;
    }
    if (sync_pumps(st) != 0) {
        return 0; /* out of memory: no pump this round */
    }
    for (uint32_t i = 0; i < st->nsrcp; i++) {
        f[i] = (struct srv_feed){&st->cfg.sources[i], &st->srcp[i], true};
    }
    return st->nsrcp;
}

void srv_stream_mirror__close(struct srv_stream *st)
{
    srv_stream_mirror__drop(&st->mir);
    for (uint32_t i = 0; i < st->nsrcp; i++) {
        srv_stream_mirror__drop(&st->srcp[i]);
    }
    free(st->srcp);
    st->srcp = NULL;
    st->nsrcp = 0;
}

bool srv_stream_mirror__read(struct srv_stream *o, uint64_t *next,
                             const char *const *filters, size_t nf,
                             int64_t since, uint32_t max,
                             srv_mirror_emit_fn emit, void *arg, int *failed,
                             char *err)
{
    bool progress = false;
    uint32_t n = 0;
    *failed = 0;
    /* Bounded by max records and by SRV_STREAM_SCAN_MAX skips a round. */
    for (uint32_t skips = 0; skips < SRV_STREAM_SCAN_MAX && n < max;) {
        uint64_t first = srv_stream_sm_first_seq(&o->sm);
        uint64_t lost = *next < first ? first - *next : 0;
        uint64_t s = 0;
        int rv = srv_stream_next_seq(o, *next, filters, nf, &s);
        if (rv == KEEL_EAGAIN) {
            *next = s;
            return true;
        }
        if (rv == KEEL_ENOENT) {
            if (lost > 0 && nf == 0) {
                /* The origin dropped every message the mirror has not
                 * read: record the gap rather than wait for them. */
                struct srv_mirror_rec r = {first - 1, lost, NULL};
                if (emit(arg, &r) == 0) {
                    *next = first;
                    progress = true;
                }
            } else if (o->sm.last_seq >= *next && nf > 0) {
                *next = o->sm.last_seq + 1; /* nothing matches up to last */
            }
            break;
        }
        if (rv != 0) {
            break;
        }
        struct srv_stream_msg m;
        rv = srv_stream_msg_load(o, s, &m, err);
        if (rv == KEEL_ENOENT) {
            *next = s + 1;
            skips++;
            continue;
        }
        if (rv != 0) {
            *failed = rv;
            break;
        }
        if (since != 0 && m.ts_ns < since) {
            srv_stream_msg_free(&m);
            *next = s + 1; /* before opt_start_time */
            skips++;
            progress = true;
            continue;
        }
        struct srv_mirror_rec r = {s, lost, &m};
        rv = emit(arg, &r);
        srv_stream_msg_free(&m);
        if (rv != 0) {
            break;
        }
        *next = s + 1;
        progress = true;
        n++;
    }
    return progress;
}

struct propose_arg {
    struct srv_stream *st;
    const struct srv_feed *f;
    uint64_t proposed;
    uint64_t bytes, budget; /* proposed this read; what may be */
};

/* The pump's window in entries (see the top of this file). */
static uint32_t pump_window(const struct srv_mirror_pump *p)
{
    if (p->rec_max == 0) {
        return MIRROR_WINDOW_FIRST;
    }
    uint32_t n = MIRROR_WINDOW_BYTES / p->rec_max;
    return n < 1 ? 1 : n > MIRROR_WINDOW_MAX ? MIRROR_WINDOW_MAX : n;
}

/* The local pump's emit: propose to the stream. */
static int emit_propose(void *arg, const struct srv_mirror_rec *r)
{
    struct propose_arg *a = arg;
    char err[KEEL_ERRMSG_MAX];
    uint64_t size =
        r->m != NULL ? r->m->subject_len + r->m->hdr_len + r->m->data_len : 0;
    if (a->proposed > 0 && a->bytes + size > a->budget) {
        return KEEL_EBUSY; /* the byte window is full: the next read */
    }
    int rv = srv_stream_mirror__propose(a->st, a->f, r, err);
    if (rv == 0) {
        struct srv_mirror_pump *p = a->f->p;
        a->proposed++;
        a->bytes += size;
        p->rec_max = size > p->rec_max ? (uint32_t)size : p->rec_max;
    }
    if (rv != 0 && rv != KEEL_EBUSY) {
        SRV_DEBUG("js", "stream %s: origin %s seq %" PRIu64 " not proposed: %s",
                  a->st->cfg.name, a->f->o->name, r->seq, err);
    }
    return rv; /* the proposal queue is full, or no longer leader */
}

/* Read the feed's origin here or through the cluster, proposing at most
 * max records while the window has room. */
static bool pump_read(struct srv_stream *st, const struct srv_feed *f,
                      uint64_t *inflight, uint32_t max)
{
    struct srv_mirror_pump *p = f->p;
    char err[KEEL_ERRMSG_MAX];
    struct srv_stream *o = NULL;
    uint32_t cap = pump_window(p);
    uint32_t window = (uint32_t)(*inflight + max < cap ? *inflight + max : cap);
    if (f->o->ext_api != NULL && f->o->ext_api[0] != '\0') {
        return srv_stream_mirror__external(st, f, inflight, window);
    }
    if (srv_js_find_stream(st->js, f->o->name, &o) != 0) {
        srv_stream_mirror__drop(p);
        srv_stream_mirror__fail(st, f, SRV_JS_ESTREAM_NOT_FOUND,
                                "stream not found");
        return false;
    }
    if (!srv_stream_mirror__readable(o)) {
        /* No intact replica here: read it where one is. */
        return srv_stream_mirror__remote(st, f, o, inflight, window);
    }
    srv_stream_mirror__drop(p);
    srv_stream_mirror__contact(p);
    if (*inflight >= window) {
        return false; /* the window is full: wait for the applies */
    }
    int64_t since =
        srv_stream_feed_pos(st, f) == 0 ? f->o->opt_start_time_ns : 0;
    int failed = 0;
    /* In flight at most as many bytes as the largest record times the
     * entries (an over-estimate), so what is left of MIRROR_WINDOW_BYTES. */
    uint64_t held = *inflight * (p->rec_max > 0 ? p->rec_max : 1);
    struct propose_arg arg = {
        st, f, 0, 0,
        held < MIRROR_WINDOW_BYTES ? MIRROR_WINDOW_BYTES - held : 0};
    const char *filters[SRV_JS_FEED_XFORMS_MAX];
    uint32_t nf = srv_stream_mirror_filters(f->o, filters);
    bool progress = srv_stream_mirror__read(o, &p->next, filters, nf, since,
                                            (uint32_t)(window - *inflight),
                                            emit_propose, &arg, &failed, err);
    *inflight += arg.proposed;
    if (failed != 0) {
        srv_stream_mirror__fail(st, f, SRV_JS_EUNAVAILABLE, err);
    }
    return progress;
}

/* A source stalled on a message the stream refused: read it again from
 * the position, one record, after a backoff that doubles up to
 * MIRROR_BACKOFF_MAX_MS, so a full stream costs a few proposals a second
 * (docs/decisions/0035-sources-share-the-mirror-pump.md). */
static bool pump_stalled(struct srv_stream *st, const struct srv_feed *f,
                         uint64_t *inflight, uint64_t from)
{
    struct srv_mirror_pump *p = f->p;
    if (mono_ns() < p->stall_ns) {
        return false;
    }
    if (!p->stall_read) {
        srv_stream_mirror__drop(p); /* what was read past it: read again */
        p->next = from;
        p->stall_read = true;
    }
    uint64_t before = *inflight;
    bool progress = pump_read(st, f, inflight, 1);
    if (*inflight > before) {
        p->stall_read = false;
        p->stall_ms = p->stall_ms == 0 ? MIRROR_BACKOFF_MIN_MS
                      : p->stall_ms * 2 > MIRROR_BACKOFF_MAX_MS
                          ? MIRROR_BACKOFF_MAX_MS
                          : p->stall_ms * 2;
        p->stall_ns = mono_ns() + (int64_t)p->stall_ms * 1000000;
    }
    return progress;
}

/* Propose what the feed's origin holds past its cursor: at most max
 * records and only while the window has room (*inflight counts up).
 * Returns true when it made progress (more may follow at once). */
static bool pump_one(struct srv_stream *st, const struct srv_feed *f,
                     uint64_t term, uint64_t *inflight, uint32_t max)
{
    struct srv_mirror_pump *p = f->p;
    if (p->term != term) {
        p->term = term; /* a new term: resume from the applied state */
        p->next = 0;
        p->rec_max = 0;
        srv_stream_mirror__drop(p);
    }
    uint64_t from = start_seq(st, f);
    if (p->next < from) {
        p->next = from;
    }
    if (p->retry_ns != 0 && mono_ns() < p->retry_ns) {
        return false;
    }
    enum srv_js_err sj = SRV_JS_OK;
    if (f->source &&
        srv_stream_sm_source_stalled(&st->sm, f->o->name, &sj) != 0) {
        return pump_stalled(st, f, inflight, from);
    }
    p->stall_ms = 0;
    p->stall_ns = 0;
    p->stall_read = false;
    return pump_read(st, f, inflight, max);
}

static void drop_all(struct srv_stream *st)
{
    srv_stream_mirror__drop(&st->mir);
    for (uint32_t i = 0; i < st->nsrcp; i++) {
        srv_stream_mirror__drop(&st->srcp[i]);
    }
}

static bool pumps(struct srv_stream *st, struct replica_info *ri)
{
    if (!srv_stream_pumps_cfg(&st->cfg) || !st->leader || st->r == NULL ||
        st->failed || srv_stream_amnesiac(st)) {
        drop_all(st);
        return false;
    }
    replica_info(st->r, ri);
    if (ri->role != RAFT_LEADER) {
        drop_all(st);
        return false;
    }
    return true;
}

/* Every feed of st in turn, starting one further each round so no source
 * takes the window first every time; a source at most SOURCE_BATCH
 * records a turn. */
static bool pump_stream(struct srv_stream *st, const struct replica_info *ri)
{
    struct srv_feed f[SRV_JS_SOURCES_MAX];
    uint32_t n = srv_stream_feeds(st, f);
    uint64_t inflight = ri->last_index - ri->applied;
    bool busy = false;
    if (n == 0) {
        return false;
    }
    uint32_t first = st->src_turn++ % n;
    for (uint32_t k = 0; k < n; k++) {
        const struct srv_feed *x = &f[(first + k) % n];
        busy |= pump_one(st, x, ri->term, &inflight,
                         x->source ? SOURCE_BATCH : MIRROR_WINDOW_MAX);
    }
    return busy;
}

static void on_mirror_timer(uv_timer_t *t)
{
    struct srv_js *js = t->data;
    bool busy = false;
    if (js->stopping) {
        return;
    }
    srv_stream_mirror__attach(js);
    /* Bounded by SRV_JS_STREAMS_MAX, and skipped while no stream is a
     * mirror (a node's thousands of streams are walked only for them). */
    for (uint32_t i = 0; js->nmirrors > 0 && i < js->nstreams; i++) {
        struct replica_info ri;
        struct srv_stream *st = js->streams[i];
        if (pumps(st, &ri)) {
            busy |= pump_stream(st, &ri);
        }
    }
    uv_timer_start(t, on_mirror_timer, busy ? MIRROR_BUSY_MS : MIRROR_IDLE_MS,
                   0);
}

void srv_js_mirror_open(struct srv_js *js)
{
    uv_timer_init(js->loop, &js->mirror_timer);
    js->mirror_timer.data = js;
    js->mirror_open = true;
    uv_timer_start(&js->mirror_timer, on_mirror_timer, MIRROR_IDLE_MS, 0);
}

void srv_stream_mirror__kick(struct srv_js *js)
{
    if (js->mirror_open && !js->stopping) {
        uv_timer_start(&js->mirror_timer, on_mirror_timer, 0, 0);
    }
}

void srv_js_mirror_close(struct srv_js *js)
{
    srv_stream_mirror__detach(js);
    if (js->mirror_open) {
        uv_timer_stop(&js->mirror_timer);
        uv_close((uv_handle_t *)&js->mirror_timer, NULL);
        js->mirror_open = false;
    }
}

/* The info block {name, lag, active, error?} of one feed. */
static json_t *feed_info(struct srv_stream *st, const struct srv_feed *f)
{
    const struct srv_mirror_pump *p = f->p;
    struct srv_stream *o = NULL;
    uint64_t lag = 0, lost = 0;
    uint64_t pos = f->source
                       ? srv_stream_sm_source_pos(&st->sm, f->o->name, &lost)
                       : st->sm.mirror_pos;
    if (!f->source) {
        lost = st->sm.mirror_lost;
    }
    /* The origin's last seq: for an external feed as its consumer's last
     * delivery said (a stream of that name here is another one), else
     * its state here, else as the node that served the last remote read
     * said. With a filter this counts every origin seq past the
     * position, as a bound. */
    bool ext = f->o->ext_api != NULL && f->o->ext_api[0] != '\0';
    uint64_t last = !ext && srv_js_find_stream(st->js, f->o->name, &o) == 0 &&
                            srv_stream_mirror__readable(o)
                        ? o->sm.last_seq
                        : p->origin_last;
    if (last > pos) {
        lag = last - pos;
    }
    /* nats-server: -1 until the origin was reached. */
    json_int_t active =
        p->contact_ns == 0 ? -1 : (json_int_t)(mono_ns() - p->contact_ns);
    json_t *m = json_pack("{s:s, s:I, s:I}", "name", f->o->name, "lag",
                          (json_int_t)lag, "active", active);
    if (m != NULL && lost > 0) {
        /* Keel's own: origin seqs dropped before they were read. */
        json_object_set_new(m, "keel_lost", json_integer((json_int_t)lost));
    }
    if (m != NULL && f->o->ext_api != NULL) { /* as nats-server 2.9.10 */
        json_object_set_new(
            m, "external",
            json_pack("{s:s, s:s}", "api", f->o->ext_api, "deliver",
                      f->o->ext_deliver != NULL ? f->o->ext_deliver : ""));
    }
    if (m != NULL && f->o->nxf > 0) {
        /* As nats-server 2.10 and later show them. */
        json_object_set_new(m, "subject_transforms",
                            srv_stream_mirror_xforms_json(f->o));
    }
    /* A source stalled on a refused message shows the refusal (the
     * applied state: the same on every replica's info). */
    enum srv_js_err jerr = p->jerr;
    const char *detail = jerr == SRV_JS_ESTREAM_NOT_FOUND ? NULL : p->why;
    enum srv_js_err sj = SRV_JS_OK;
    if (jerr == SRV_JS_OK && f->source &&
        srv_stream_sm_source_stalled(&st->sm, f->o->name, &sj) != 0) {
        jerr = sj;
        detail = NULL;
    }
    if (m != NULL && jerr != SRV_JS_OK) {
        json_t *r = NULL;
        char msg[KEEL_ERRMSG_MAX];
        if (srv_js_err_json("stream_info_response", jerr, detail, &r, msg) ==
            0) {
            json_object_set(m, "error", json_object_get(r, "error"));
            json_decref(r);
        }
    }
    return m;
}

json_t *srv_stream_mirror_info(struct srv_stream *st)
{
    const struct srv_feed f = {&st->cfg.mirror, &st->mir, false};
    return feed_info(st, &f);
}

json_t *srv_stream_sources_info(struct srv_stream *st)
{
    struct srv_feed f[SRV_JS_SOURCES_MAX];
    uint32_t n = srv_stream_feeds(st, f);
    json_t *a = json_array();
    for (uint32_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, feed_info(st, &f[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}
