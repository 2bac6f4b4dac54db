/* srv_stream_mirror_ext: a mirror or source with `external` {api, deliver}
 * reads its origin through the JetStream API under the prefix api, as
 * nats-server does (docs/decisions/0039-external-origins-through-the-api.md):
 * the stream's leader subscribes to a deliver subject (under `deliver`,
 * else an inbox) and to a reply inbox (srv_isub.h: the interest reaches
 * every node), then publishes <api>.CONSUMER.CREATE.<origin> for a push
 * consumer with no acks, flow control and idle heartbeats that starts at
 * the applied position + 1. Each delivery's origin seq and timestamp come
 * from its $JS.ACK reply subject; it is queued (bounded) and proposed by
 * the pump as a MIRROR or SOURCE entry, so the position stays replicated
 * state and the apply's skip of an origin seq not above it keeps exactly
 * once (decision 0032). A delivery whose consumer seq is not the next, a
 * full queue, a silence of EXT_STALL_NS or a failed create drops the
 * consumer; the pump creates a new one from the applied position + 1
 * after the pump's backoff. A new term or a lost leadership drops it
 * too (srv_stream_mirror__drop). The deliveries arrive on the loop thread
 * from inside the consumer engine: the handlers only copy, the pump acts
 * (and answers flow control) on its timer. An idle heartbeat whose last
 * consumer seq is not the last one received drops the consumer too. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "keel/error.h"
#include "srv_consumer_sm.h"
#include "srv_isub.h"
#include "srv_js_int.h"
#include "srv_log.h"
#include "srv_parser.h"
#include "srv_server.h"
#include "srv_units.h"

/* Bounds of what is held between a delivery and its proposal: flow
 * control (each 1 MiB or so, nats-server's) keeps the origin from
 * sending far past them; a delivery beyond them starts over. */
#define EXT_QUEUE_MAX 4096
#define EXT_QUEUE_BYTES (16u * 1024 * 1024)
#define EXT_HEARTBEAT_NS 1000000000LL
#define EXT_STALL_NS (5 * EXT_HEARTBEAT_NS)
#define EXT_SUBJECT_BYTES 512

struct ext_msg {
    struct ext_msg *next;
    uint64_t seq;
    int64_t ts_ns;
    size_t slen, hlen, dlen;
    char buf[]; /* subject, headers, data */
};

struct srv_mirror_ext {
    struct srv_js *js;
    char *api, *deliver; /* the config it was made for */
    char *origin;
    char dsubj[EXT_SUBJECT_BYTES];
    char rsubj[EXT_SUBJECT_BYTES];
    struct srv_sub *dsub, *rsub;
    char cname[SRV_JS_NAME_BYTES_MAX + 1]; /* the origin's consumer */
    int64_t sent_ns, heard_ns;
    bool created, restart;
    enum srv_js_err jerr; /* the create failed: why */
    char why[SRV_JS_ERR_DESC_BYTES_MAX];
    uint64_t dseq;        /* the last consumer seq */
    uint64_t last;        /* the last origin seq queued */
    uint64_t origin_last; /* stream seq + pending of the last delivery */
    struct ext_msg *head, *tail;
    size_t n, bytes;
    char fc[SRV_CONTROL_LINE_BYTES_MAX + 1]; /* a flow control to answer */
};

static int64_t mono_ns(void)
{
    return (int64_t)uv_hrtime();
}

static void rand_token(char *out, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    unsigned char r[24];
    ASSERT(n <= sizeof r + 1);
    if (getrandom(r, n - 1, 0) != (ssize_t)(n - 1)) {
        uint64_t t = (uint64_t)mono_ns();
        memcpy(r, &t, sizeof t < n - 1 ? sizeof t : n - 1);
    }
    for (size_t i = 0; i + 1 < n; i++) {
        out[i] = abc[r[i] % (sizeof abc - 1)];
    }
    out[n - 1] = '\0';
}

static void clear_queue(struct srv_mirror_ext *x)
{
    while (x->head != NULL) {
        struct ext_msg *m = x->head;
        x->head = m->next;
        free(m);
    }
    x->tail = NULL;
    x->n = x->bytes = 0;
}

/* A header block's status line: "NATS/1.0 100 ..." -> 100, else 0. */
static int status_of(const char *h, size_t len)
{
    if (len < 12 || memcmp(h, "NATS/1.0 ", 9) != 0) {
        return 0;
    }
    return (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
}

/* Note a flow control reply subject for the pump to answer. */
static void note_fc(struct srv_mirror_ext *x, const char *subj, size_t len)
{
    if (len > 0 && len < sizeof x->fc) {
        memcpy(x->fc, subj, len);
        x->fc[len] = '\0';
    }
}

/* An idle heartbeat names the last consumer seq the consumer sent and,
 * when it waits on flow control, the reply it waits for (nats-server's
 * and srv_consumer_deliver.c's). A last seq other than the last one
 * received means deliveries were lost with nothing after them to show
 * the gap: start over, as nats-server's mirror does. A stalled consumer
 * whose flow control request was lost is answered. */
static void on_heartbeat(struct srv_mirror_ext *x, const char *hdr, size_t hlen)
{
    const char *v = NULL;
    size_t vlen = 0;
    uint64_t last = 0;
    if (srv_nats_hdr_get(hdr, hlen, "Nats-Last-Consumer", &v, &vlen) == 0 &&
        srv_parse_u64(v, vlen, &last) && last != x->dseq) {
        x->restart = true;
    }
    if (srv_nats_hdr_get(hdr, hlen, "Nats-Consumer-Stalled", &v, &vlen) == 0) {
        note_fc(x, v, vlen);
    }
}

static void on_delivery(void *arg, const struct srv_cmd *msg)
{
    struct srv_mirror_ext *x = arg;
    const char *hdr = msg->payload;
    size_t hlen = msg->hdr_bytes;
    x->heard_ns = mono_ns();
    int status = status_of(hdr, hlen);
    if (status == 100) { /* idle heartbeat or flow control request */
        if (msg->reply.len > 0) {
            note_fc(x, msg->reply.ptr, msg->reply.len);
        } else {
            on_heartbeat(x, hdr, hlen);
        }
        return;
    }
    struct srv_ack_reply r;
    if (status != 0 || x->restart ||
        srv_ack_reply_parse(msg->reply.ptr, msg->reply.len, &r, NULL) != 0) {
        return; /* not a message of the origin */
    }
    if (x->dseq != 0 && r.consumer_seq != x->dseq + 1) {
        x->restart = true; /* a delivery was lost on the way */
        return;
    }
    x->dseq = r.consumer_seq;
    /* The origin's last seq as its consumer counts it: what it still has
     * for this consumer past the delivery (nats-server reads its lag from
     * the same field). */
    x->origin_last = r.stream_seq + r.pending;
    if (r.stream_seq <= x->last) {
        return; /* already queued */
    }
    size_t dlen = msg->total_bytes - hlen;
    size_t size = msg->subject.len + msg->total_bytes;
    if (x->n >= EXT_QUEUE_MAX || x->bytes + size > EXT_QUEUE_BYTES) {
        x->restart = true; /* over the bound: start over from the position */
        return;
    }
    struct ext_msg *m = malloc(sizeof *m + size);
    if (m == NULL) {
        x->restart = true;
        return;
    }
    *m = (struct ext_msg){.seq = r.stream_seq,
                          .ts_ns = r.ts_ns,
                          .slen = msg->subject.len,
                          .hlen = hlen,
                          .dlen = dlen};
    memcpy(m->buf, msg->subject.ptr, msg->subject.len);
    if (msg->total_bytes > 0) {
        memcpy(m->buf + msg->subject.len, msg->payload, msg->total_bytes);
    }
    if (x->tail != NULL) {
        x->tail->next = m;
    } else {
        x->head = m;
    }
    x->tail = m;
    x->n++;
    x->bytes += size;
    x->last = r.stream_seq;
}

static void on_created(void *arg, const struct srv_cmd *msg)
{
    struct srv_mirror_ext *x = arg;
    size_t hlen = msg->hdr_bytes;
    json_t *o =
        status_of(msg->payload, hlen) == 0
            ? json_loadb(msg->payload + hlen, msg->total_bytes - hlen, 0, NULL)
            : NULL;
    const json_t *e = json_object_get(o, "error");
    const char *name = json_string_value(json_object_get(o, "name"));
    x->heard_ns = mono_ns();
    if (e != NULL || name == NULL) {
        const char *d = json_string_value(json_object_get(e, "description"));
        x->jerr = SRV_JS_EUNAVAILABLE;
        snprintf(x->why, sizeof x->why, "creating the consumer through %s: %s",
                 x->api,
                 d != NULL   ? d
                 : o == NULL ? "no JetStream answered"
                             : "no consumer name in the reply");
    } else if (!x->created) {
        snprintf(x->cname, sizeof x->cname, "%s", name);
        x->created = true;
    }
    json_decref(o);
}

/* Delete the origin's consumer (no reply is awaited: an inactive one is
 * removed by the origin too) and every subscription. */
static void ext_free(struct srv_mirror_ext *x)
{
    struct srv_server *srv = srv_js_server(x->js);
    if (x->cname[0] != '\0') {
        char subj[EXT_SUBJECT_BYTES + 2 * SRV_JS_NAME_BYTES_MAX];
        size_t n = 0;
        snprintf(subj, sizeof subj, "%s.CONSUMER.DELETE.%s.%s", x->api,
                 x->origin, x->cname);
        if (srv_isub_publish(srv, subj, NULL, NULL, 0, "", 0, &n) != 0) {
            SRV_DEBUG("js", "consumer %s of %s not deleted", x->cname,
                      x->origin);
        }
    }
    srv_isub_remove(srv, x->dsub);
    srv_isub_remove(srv, x->rsub);
    clear_queue(x);
    free(x->api);
    free(x->deliver);
    free(x->origin);
    free(x);
}

void srv_stream_mirror__ext_drop(struct srv_mirror_pump *p)
{
    if (p->ext != NULL) {
        ext_free(p->ext);
        p->ext = NULL;
    }
}

/* The consumer's start: the applied position + 1, else the origin's
 * start options (nats-server's setupMirrorConsumer does the same). */
static json_t *consumer_config(const struct srv_stream *st,
                               const struct srv_feed *f, const char *dsubj)
{
    json_t *c =
        json_pack("{s:s, s:s, s:i, s:I, s:b}", "deliver_subject", dsubj,
                  "ack_policy", "none", "max_deliver", 1, "idle_heartbeat",
                  (json_int_t)EXT_HEARTBEAT_NS, "flow_control", 1);
    uint64_t pos = srv_stream_feed_pos(st, f);
    const struct srv_stream_mirror *o = f->o;
    if (c == NULL) {
        return NULL;
    }
    if (pos > 0 || o->opt_start_seq > 0) {
        json_object_set_new(c, "deliver_policy",
                            json_string("by_start_sequence"));
        json_object_set_new(
            c, "opt_start_seq",
            json_integer((json_int_t)(pos > 0 ? pos + 1 : o->opt_start_seq)));
    } else if (o->opt_start_time_ns != 0) {
        char t[SRV_JS_TIME_BYTES];
        srv_js_time_format(o->opt_start_time_ns, t);
        json_object_set_new(c, "deliver_policy", json_string("by_start_time"));
        json_object_set_new(c, "opt_start_time", json_string(t));
    } else {
        json_object_set_new(c, "deliver_policy", json_string("all"));
    }
    const char *filters[SRV_JS_FEED_XFORMS_MAX];
    uint32_t nf = srv_stream_mirror_filters(o, filters);
    if (nf == 1) {
        json_object_set_new(c, "filter_subject", json_string(filters[0]));
    } else if (nf > 1) {
        json_t *a = json_array();
        for (uint32_t i = 0; a != NULL && i < nf; i++) {
            json_array_append_new(a, json_string(filters[i]));
        }
        json_object_set_new(c, "filter_subjects", a);
    }
    return json_pack("{s:s, s:o}", "stream_name", o->name, "config", c);
}

/* Subscribe, then ask the origin for a consumer. */
static int ext_start(struct srv_stream *st, const struct srv_feed *f, char *err)
{
    struct srv_server *srv = srv_js_server(st->js);
    const struct srv_stream_mirror *o = f->o;
    struct srv_mirror_ext *x = calloc(1, sizeof *x);
    char tok[17], subj[EXT_SUBJECT_BYTES + SRV_JS_NAME_BYTES_MAX];
    if (x == NULL) {
        return keel_err(KEEL_ENOMEM, err, "out of memory");
    }
    x->js = st->js;
    x->api = strdup(o->ext_api);
    x->deliver = strdup(o->ext_deliver != NULL ? o->ext_deliver : "");
    x->origin = strdup(o->name);
    f->p->ext = x;
    rand_token(tok, sizeof tok);
    const char *dpre =
        x->deliver != NULL && x->deliver[0] != '\0' ? x->deliver : "_INBOX";
    int w = snprintf(x->dsubj, sizeof x->dsubj, "%s.%s.D", dpre, tok);
    snprintf(x->rsubj, sizeof x->rsubj, "_INBOX.%s.C", tok);
    if (x->api == NULL || x->deliver == NULL || x->origin == NULL) {
        return keel_err(KEEL_ENOMEM, err, "out of memory");
    }
    if (w < 0 || (size_t)w >= sizeof x->dsubj ||
        strlen(x->api) + sizeof ".CONSUMER.CREATE." + strlen(o->name) >
            sizeof subj) {
        return keel_err(KEEL_EINVAL, err,
                        "external api or deliver prefix too long");
    }
    int rv = srv_isub_add(srv, x->dsubj, on_delivery, x, &x->dsub);
    if (rv == 0) {
        rv = srv_isub_add(srv, x->rsubj, on_created, x, &x->rsub);
    }
    json_t *req = rv == 0 ? consumer_config(st, f, x->dsubj) : NULL;
    char *body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (rv != 0 || body == NULL) {
        free(body);
        return keel_err(rv != 0 ? rv : KEEL_ENOMEM, err,
                        "cannot subscribe for the origin's deliveries");
    }
    snprintf(subj, sizeof subj, "%s.CONSUMER.CREATE.%s", x->api, o->name);
    x->sent_ns = x->heard_ns = mono_ns();
    size_t n = 0;
    rv = srv_isub_publish(srv, subj, x->rsubj, NULL, 0, body, strlen(body), &n);
    free(body);
    if (rv != 0 || (n == 0 && !x->created && x->jerr == SRV_JS_OK)) {
        return keel_err(KEEL_EAGAIN, err,
                        "no JetStream answers %s (no responders)", x->api);
    }
    return 0;
}

/* Propose the queued deliveries while the window has room. */
static bool ext_propose(struct srv_stream *st, const struct srv_feed *f,
                        uint64_t *inflight, uint32_t window)
{
    struct srv_mirror_ext *x = f->p->ext;
    bool progress = false;
    char err[KEEL_ERRMSG_MAX];
    while (x->head != NULL && *inflight < window) {
        struct ext_msg *q = x->head;
        struct srv_stream_msg m = {
            .seq = q->seq,
            .ts_ns = q->ts_ns,
            .subject = q->buf,
            .subject_len = q->slen,
            .hdr = q->hlen > 0 ? (const uint8_t *)q->buf + q->slen : NULL,
            .hdr_len = q->hlen,
            .data = (const uint8_t *)q->buf + q->slen + q->hlen,
            .data_len = q->dlen};
        struct srv_mirror_rec r = {.seq = q->seq, .lost = 0, .m = &m};
        if (srv_stream_mirror__propose(st, f, &r, err) != 0) {
            break; /* the proposal queue is full: the next turn */
        }
        uint64_t size = q->slen + q->hlen + q->dlen;
        f->p->rec_max = size > f->p->rec_max ? (uint32_t)size : f->p->rec_max;
        x->head = q->next;
        x->tail = x->head != NULL ? x->tail : NULL;
        x->n--;
        x->bytes -= q->slen + q->hlen + q->dlen;
        free(q);
        (*inflight)++;
        progress = true;
    }
    return progress;
}

bool srv_stream_mirror__external(struct srv_stream *st,
                                 const struct srv_feed *f, uint64_t *inflight,
                                 uint32_t window)
{
    struct srv_mirror_pump *p = f->p;
    struct srv_mirror_ext *x = p->ext;
    char err[KEEL_ERRMSG_MAX];
    int64_t now = mono_ns();
    if (x != NULL &&
        (strcmp(x->api, f->o->ext_api) != 0 ||
         strcmp(x->deliver,
                f->o->ext_deliver != NULL ? f->o->ext_deliver : "") != 0)) {
        srv_stream_mirror__ext_drop(p); /* the config changed: start over */
        x = NULL;
    }
    if (x != NULL && (x->jerr != SRV_JS_OK || x->restart ||
                      now - x->heard_ns > EXT_STALL_NS)) {
        if (x->jerr != SRV_JS_OK) {
            srv_stream_mirror__fail(st, f, x->jerr, x->why);
        } else if (!x->restart) {
            snprintf(err, sizeof err,
                     "nothing from the origin's consumer through %s for "
                     "%lld ms",
                     x->api, (long long)(EXT_STALL_NS / 1000000));
            srv_stream_mirror__fail(st, f, SRV_JS_EUNAVAILABLE, err);
        }
        srv_stream_mirror__ext_drop(p);
        return false; /* created again on a later turn */
    }
    if (x == NULL) {
        int rv = ext_start(st, f, err);
        if (rv != 0) {
            srv_stream_mirror__fail(st, f, SRV_JS_EUNAVAILABLE, err);
            srv_stream_mirror__ext_drop(p);
            return false;
        }
        x = p->ext;
    }
    if (x->fc[0] != '\0') {
        size_t n = 0;
        char fc[sizeof x->fc];
        memcpy(fc, x->fc, sizeof fc);
        x->fc[0] = '\0';
        if (srv_isub_publish(srv_js_server(st->js), fc, NULL, NULL, 0, "", 0,
                             &n) != 0) {
            x->restart = true; /* the origin waits for it: start over */
        }
    }
    if (x->created && p->jerr != SRV_JS_OK) {
        srv_stream_mirror__contact(p);
    }
    if (x->created) {
        p->contact_ns = x->heard_ns;
    }
    if (x->origin_last != 0) {
        p->origin_last = x->origin_last; /* stream info's lag */
    }
    return ext_propose(st, f, inflight, window);
}
