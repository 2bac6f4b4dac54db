/* srv_stream_mirror: the pump of a stream's `mirror`
 * (docs/decisions/0032-mirrors-pull-into-the-log.md). Only the mirror
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
 * proposes only while fewer than MIRROR_WINDOW of its group's entries are
 * in flight (in the log, not yet applied). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_int.h"
#include "srv_log.h"

#define MIRROR_IDLE_MS 20
#define MIRROR_BUSY_MS 1
#define MIRROR_WINDOW 64
#define MIRROR_BACKOFF_MIN_MS 100
#define MIRROR_BACKOFF_MAX_MS 2000

static int64_t mono_ns(void)
{
    return (int64_t)uv_hrtime();
}

void srv_stream_mirror__fail(struct srv_stream *st, enum srv_js_err jerr,
                             const char *why)
{
    struct srv_mirror_pump *p = &st->mir;
    if (p->jerr != jerr || strcmp(p->why, why) != 0) {
        SRV_WARN("js", "mirror %s: origin %s: %s", st->cfg.name,
                 st->cfg.mirror.name, why);
    }
    p->jerr = jerr;
    snprintf(p->why, sizeof p->why, "%s", why);
    p->backoff_ms = p->backoff_ms == 0 ? MIRROR_BACKOFF_MIN_MS
                    : p->backoff_ms * 2 > MIRROR_BACKOFF_MAX_MS
                        ? MIRROR_BACKOFF_MAX_MS
                        : p->backoff_ms * 2;
    p->retry_ns = mono_ns() + (int64_t)p->backoff_ms * 1000000;
}

void srv_stream_mirror__contact(struct srv_stream *st)
{
    struct srv_mirror_pump *p = &st->mir;
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

int srv_stream_mirror__propose(struct srv_stream *st,
                               const struct srv_mirror_rec *r, char *err)
{
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_MIRROR, .seq = r->seq, .lost = r->lost};
    const struct srv_stream_msg *m = r->m;
    if (m != NULL) {
        e.ts_ns = m->ts_ns;
        e.subject = m->subject;
        e.subject_len = m->subject_len;
        e.hdr = m->hdr;
        e.hdr_len = m->hdr_len;
        e.data = m->data;
        e.data_len = m->data_len;
    }
    return srv_stream_propose_entry(st, &e, 0, err);
}

/* Where reading starts for a mirror that stored nothing yet. */
static uint64_t start_seq(const struct srv_stream *st)
{
    if (st->sm.mirror_pos > 0) {
        return st->sm.mirror_pos + 1;
    }
    return st->cfg.mirror.opt_start_seq > 0 ? st->cfg.mirror.opt_start_seq : 1;
}

bool srv_stream_mirror__read(struct srv_stream *o, uint64_t *next,
                             const char *filter, int64_t since, uint32_t max,
                             srv_mirror_emit_fn emit, void *arg, int *failed,
                             char *err)
{
    const char *const *filters = filter != NULL ? &filter : NULL;
    size_t nf = filter != NULL ? 1 : 0;
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
            if (lost > 0 && filter == NULL) {
                /* The origin dropped every message the mirror has not
                 * read: record the gap rather than wait for them. */
                struct srv_mirror_rec r = {first - 1, lost, NULL};
                if (emit(arg, &r) == 0) {
                    *next = first;
                    progress = true;
                }
            } else if (o->sm.last_seq >= *next && filter != NULL) {
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

/* The local pump's emit: propose to the mirror (arg). */
static int emit_propose(void *arg, const struct srv_mirror_rec *r)
{
    struct srv_stream *st = arg;
    char err[KEEL_ERRMSG_MAX];
    int rv = srv_stream_mirror__propose(st, r, err);
    if (rv != 0 && rv != KEEL_EBUSY) {
        SRV_DEBUG("js", "mirror %s: seq %" PRIu64 " not proposed: %s",
                  st->cfg.name, r->seq, err);
    }
    return rv; /* the proposal queue is full, or no longer leader */
}

/* Propose what the origin holds past the cursor, up to the window.
 * Returns true when it made progress (more may follow at once). */
static bool pump_one(struct srv_stream *st, const struct replica_info *ri)
{
    struct srv_mirror_pump *p = &st->mir;
    char err[KEEL_ERRMSG_MAX];
    if (p->term != ri->term) {
        p->term = ri->term; /* a new term: resume from the applied state */
        p->next = 0;
        srv_stream_mirror__drop(st);
    }
    uint64_t from = start_seq(st);
    if (p->next < from) {
        p->next = from;
    }
    if (p->retry_ns != 0 && mono_ns() < p->retry_ns) {
        return false;
    }
    struct srv_stream *o = NULL;
    if (srv_js_find_stream(st->js, st->cfg.mirror.name, &o) != 0) {
        srv_stream_mirror__drop(st);
        srv_stream_mirror__fail(st, SRV_JS_ESTREAM_NOT_FOUND,
                                "stream not found");
        return false;
    }
    uint64_t inflight = ri->last_index - ri->applied;
    if (!srv_stream_mirror__readable(o)) {
        /* No intact replica here: read it where one is. */
        return srv_stream_mirror__remote(st, o, inflight, MIRROR_WINDOW);
    }
    srv_stream_mirror__drop(st);
    srv_stream_mirror__contact(st);
    if (inflight >= MIRROR_WINDOW) {
        return false; /* the window is full: wait for the applies */
    }
    int64_t since =
        st->sm.mirror_pos == 0 ? st->cfg.mirror.opt_start_time_ns : 0;
    int failed = 0;
    bool progress = srv_stream_mirror__read(
        o, &p->next, st->cfg.mirror.filter_subject, since,
        (uint32_t)(MIRROR_WINDOW - inflight), emit_propose, st, &failed, err);
    if (failed != 0) {
        srv_stream_mirror__fail(st, SRV_JS_EUNAVAILABLE, err);
    }
    return progress;
}

static bool pumps(struct srv_stream *st, struct replica_info *ri)
{
    if (!st->cfg.has_mirror || !st->leader || st->r == NULL || st->failed ||
        srv_stream_amnesiac(st)) {
        srv_stream_mirror__drop(st);
        return false;
    }
    replica_info(st->r, ri);
    if (ri->role != RAFT_LEADER) {
        srv_stream_mirror__drop(st);
        return false;
    }
    return true;
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
            busy |= pump_one(st, &ri);
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

json_t *srv_stream_mirror_info(const struct srv_stream *st)
{
    const struct srv_mirror_pump *p = &st->mir;
    struct srv_stream *o = NULL;
    uint64_t lag = 0;
    /* The origin's last seq: its state here, else as the node that
     * served the last remote read said. */
    uint64_t last = srv_js_find_stream(st->js, st->cfg.mirror.name, &o) == 0 &&
                            srv_stream_mirror__readable(o)
                        ? o->sm.last_seq
                        : p->origin_last;
    if (last > st->sm.mirror_pos) {
        lag = last - st->sm.mirror_pos;
    }
    /* nats-server: -1 until the origin was reached. */
    json_int_t active =
        p->contact_ns == 0 ? -1 : (json_int_t)(mono_ns() - p->contact_ns);
    json_t *m = json_pack("{s:s, s:I, s:I}", "name", st->cfg.mirror.name, "lag",
                          (json_int_t)lag, "active", active);
    if (m != NULL && st->sm.mirror_lost > 0) {
        /* Keel's own: origin seqs dropped before the mirror read them. */
        json_object_set_new(m, "keel_lost",
                            json_integer((json_int_t)st->sm.mirror_lost));
    }
    if (m != NULL && p->jerr != SRV_JS_OK) {
        json_t *r = NULL;
        char msg[KEEL_ERRMSG_MAX];
        const char *detail =
            p->jerr == SRV_JS_ESTREAM_NOT_FOUND ? NULL : p->why;
        if (srv_js_err_json("stream_info_response", p->jerr, detail, &r, msg) ==
            0) {
            json_object_set(m, "error", json_object_get(r, "error"));
            json_decref(r);
        }
    }
    return m;
}
