/* keel bench js mirror: how fast a new mirror catches up with an origin
 * that already holds --msgs messages, and how far it lags behind while
 * the origin takes a paced publish load (docs/bench.md "Mirrors").
 *
 * The origin (R --replicas) is filled untimed. The catch-up phase runs
 * from the mirror's create request until its stream info counts every
 * origin message (polled every 10 ms). The lag phase publishes --rate
 * messages a second for 10 s while a second connection samples
 * origin and mirror last_seq every CLI_BENCH_TICK_MS; lag is their
 * difference, in messages. Both streams are deleted afterwards. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#include "cli_bench.h"
#include "cli_js.h"
#include "keel/error.h"
#include "keel/limits.h"

/* Lag samples kept: an hour at one per CLI_BENCH_TICK_MS. */
#define BJM_SAMPLES_MAX (3600 * 1000 / CLI_BENCH_TICK_MS)
#define BJM_POLL_MS 10
/* How long the lag phase publishes. */
#define CLI_BENCH_MIRROR_LAG_MS 10000ll

struct bjm {
    const struct cli_bjc_cfg *cfg;
    char mirror[80];          /* the origin's name and M */
    natsConnection *nc, *snc; /* publisher; sampler */
    jsCtx *js, *sjs;
    _Atomic int64_t pub_errors;
    _Atomic bool stop;
    int64_t *lag; /* samples, at most BJM_SAMPLES_MAX */
    int64_t nlag;
    natsStatus sample_status;
};

static void bjm_on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
                       void *closure)
{
    struct bjm *b = closure;
    (void)js;
    if (pa == NULL || pae != NULL) {
        atomic_fetch_add(&b->pub_errors, 1);
    }
    natsMsg_Destroy(msg);
}

static void bjm_sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* last_seq and message count of stream. */
static natsStatus bjm_state(jsCtx *js, const char *stream, uint64_t *last,
                            uint64_t *msgs)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, stream, NULL, &jerr);
    if (s == NATS_OK) {
        *last = si->State.LastSeq;
        *msgs = si->State.Msgs;
    }
    jsStreamInfo_Destroy(si);
    return s;
}

static int bjm_create_mirror(struct bjm *b, char *errmsg)
{
    const struct cli_bjc_cfg *c = b->cfg;
    jsStreamConfig cfg;
    jsStreamSource src;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    jsStreamConfig_Init(&cfg);
    jsStreamSource_Init(&src);
    src.Name = c->stream;
    cfg.Name = b->mirror;
    cfg.Mirror = &src;
    cfg.Replicas = c->replicas;
    natsStatus s = js_AddStream(&si, b->js, &cfg, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    if (s != NATS_OK) {
        return keel_err(KEEL_ECONN, errmsg,
                        "create mirror %s of %s: %s (JetStream error %d)",
                        b->mirror, c->stream, natsStatus_GetText(s), (int)jerr);
    }
    return 0;
}

/* Wait until the mirror holds want messages up to last seq; fail when it
 * does not move for --stall. */
static int bjm_wait_mirror(struct bjm *b, uint64_t want_last, char *errmsg)
{
    uint64_t last = 0, msgs = 0, seen = 0;
    int64_t moved = cli_mono_ns();
    for (;;) {
        natsStatus s = bjm_state(b->js, b->mirror, &last, &msgs);
        if (s == NATS_OK && last >= want_last) {
            return 0;
        }
        int64_t now = cli_mono_ns();
        if (s == NATS_OK && last != seen) {
            seen = last;
            moved = now;
        }
        if (now - moved > b->cfg->stall_ms * 1000000) {
            return keel_err(KEEL_ETIMEOUT, errmsg,
                            "mirror %s stalled at seq %" PRIu64 " of %" PRIu64
                            " for %" PRId64 " ms",
                            b->mirror, last, want_last, b->cfg->stall_ms);
        }
        bjm_sleep_ms(BJM_POLL_MS);
    }
}

/* The sampler thread: origin then mirror last_seq, every tick. */
static void *bjm_sampler(void *arg)
{
    struct bjm *b = arg;
    while (!atomic_load(&b->stop) && b->nlag < BJM_SAMPLES_MAX) {
        uint64_t ol = 0, ml = 0, n = 0;
        natsStatus s = bjm_state(b->sjs, b->cfg->stream, &ol, &n);
        if (s == NATS_OK) {
            s = bjm_state(b->sjs, b->mirror, &ml, &n);
        }
        if (s != NATS_OK) {
            b->sample_status = s;
            break;
        }
        b->lag[b->nlag++] = ol > ml ? (int64_t)(ol - ml) : 0;
        bjm_sleep_ms(CLI_BENCH_TICK_MS);
    }
    return NULL;
}

/* Publish --rate messages a second for the lag phase (async, paced by the
 * clock, not by acks); the sampler runs meanwhile. *sent: published. */
static int bjm_paced(struct bjm *b, int64_t *sent, char *errmsg)
{
    const struct cli_bjc_cfg *c = b->cfg;
    char *payload = malloc((size_t)c->size + 1);
    pthread_t th;
    if (payload == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "payload");
    }
    memset(payload, 'm', (size_t)c->size + 1);
    if (pthread_create(&th, NULL, bjm_sampler, b) != 0) {
        free(payload);
        return keel_err(KEEL_ENOMEM, errmsg, "sampler thread");
    }
    natsStatus s = NATS_OK;
    int64_t t0 = cli_mono_ns(), n = 0;
    for (int64_t el = 0; s == NATS_OK && el < CLI_BENCH_MIRROR_LAG_MS * 1000000;
         el = cli_mono_ns() - t0) {
        int64_t due = el / 1000 * c->rate / 1000000;
        for (; n < due && s == NATS_OK; n++) {
            s = js_PublishAsync(b->js, c->subject, payload, (int)c->size, NULL);
        }
        bjm_sleep_ms(1); /* pacing by the clock */
    }
    if (s == NATS_OK) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = c->stall_ms;
        s = js_PublishAsyncComplete(b->js, &po);
    }
    atomic_store(&b->stop, true);
    pthread_join(th, NULL);
    free(payload);
    *sent = n;
    if (s != NATS_OK) {
        return cli_nats_err(s, errmsg, "paced publish");
    }
    if (b->sample_status != NATS_OK) {
        return cli_nats_err(b->sample_status, errmsg, "lag sample");
    }
    return atomic_load(&b->pub_errors) == 0
               ? 0
               : keel_err(KEEL_ECONN, errmsg,
                          "%" PRId64 " publishes were not acked",
                          atomic_load(&b->pub_errors));
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void bjm_report(const struct bjm *b, int64_t catchup_ns, int64_t sent,
                       int64_t drain_ns)
{
    const struct cli_bjc_cfg *c = b->cfg;
    double cs = (double)catchup_ns / 1e9;
    double rate = cs > 0 ? (double)c->msgs / cs : 0;
    int64_t p50 = 0, p99 = 0, max = 0;
    if (b->nlag > 0) {
        qsort(b->lag, (size_t)b->nlag, sizeof *b->lag, cmp_i64);
        p50 = b->lag[(b->nlag - 1) / 2];
        p99 = b->lag[(b->nlag - 1) * 99 / 100];
        max = b->lag[b->nlag - 1];
    }
    if (c->json) {
        printf("{\"mode\":\"js mirror\",\"msgs\":%" PRId64 ",\"size\":%" PRId64
               ",\"replicas\":%" PRId64 ",\"catchup_s\":%.3f,\"msgs_per_s\":"
               "%.0f,\"rate\":%" PRId64 ",\"published\":%" PRId64
               ",\"samples\":%" PRId64 ",\"lag_p50\":%" PRId64
               ",\"lag_p99\":%" PRId64 ",\"lag_max\":%" PRId64
               ",\"drain_ms\":%.1f}\n",
               c->msgs, c->size, c->replicas, cs, rate, c->rate, sent, b->nlag,
               p50, p99, max, (double)drain_ns / 1e6);
        return;
    }
    printf("js mirror: caught up with %" PRId64 " msgs of %" PRId64
           " B in %.3f s (R%" PRId64 "): %.0f msgs/s\n",
           c->msgs, c->size, cs, c->replicas, rate);
    if (b->nlag > 0) {
        printf("  lag at %" PRId64 " msgs/s for %.1f s (%" PRId64
               " samples): p50 %" PRId64 ", p99 %" PRId64 ", max %" PRId64
               " msgs; drained %.1f ms after the last ack\n",
               c->rate, (double)CLI_BENCH_MIRROR_LAG_MS / 1000, b->nlag, p50,
               p99, max, (double)drain_ns / 1e6);
    }
}

static int bjm_phases(struct bjm *b, char *errmsg)
{
    const struct cli_bjc_cfg *c = b->cfg;
    int64_t t0 = cli_mono_ns(), sent = 0, drain = 0;
    int rv = bjm_create_mirror(b, errmsg);
    if (rv == 0) {
        rv = bjm_wait_mirror(b, (uint64_t)c->msgs, errmsg);
    }
    int64_t catchup = cli_mono_ns() - t0;
    if (rv == 0 && c->rate > 0 && CLI_BENCH_MIRROR_LAG_MS > 0) {
        rv = bjm_paced(b, &sent, errmsg);
        int64_t t1 = cli_mono_ns();
        if (rv == 0) {
            rv = bjm_wait_mirror(b, (uint64_t)(c->msgs + sent), errmsg);
        }
        drain = cli_mono_ns() - t1;
    }
    if (rv == 0) {
        bjm_report(b, catchup, sent, drain);
    }
    return rv;
}

int cli_bench_js_mirror(const struct cli_bjc_cfg *c, char *errmsg)
{
    struct bjm *b = calloc(1, sizeof *b);
    if (b == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "bench state");
    }
    b->cfg = c;
    snprintf(b->mirror, sizeof b->mirror, "%sM", c->stream);
    b->lag = calloc(BJM_SAMPLES_MAX, sizeof *b->lag);
    int rv = b->lag == NULL ? keel_err(KEEL_ENOMEM, errmsg, "lag samples") : 0;
    if (rv == 0) {
        rv = cli_connect_default(&c->conn, &b->nc, errmsg);
    }
    if (rv == 0) {
        rv = cli_connect_default(&c->conn, &b->snc, errmsg);
    }
    if (rv == 0) {
        rv = cli_js_ctx_async(b->nc, CLI_BENCH_STALL_MS_DEFAULT,
                              CLI_BENCH_STALL_MS_DEFAULT, c->window, bjm_on_ack,
                              b, &b->js, errmsg);
    }
    if (rv == 0 && natsConnection_JetStream(&b->sjs, b->snc, NULL) != NATS_OK) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "JetStream context");
    }
    bool made = false;
    if (rv == 0) {
        rv = cli_bench_js_stream_add(
            b->js, c->stream, c->subject, c->replicas,
            "is the server running with JetStream (a store dir)?", errmsg);
        made = rv == 0;
    }
    if (rv == 0) {
        rv = cli_bench_js_fill(b->js, c->subject, c->size, c->msgs, c->stall_ms,
                               &b->pub_errors, errmsg);
    }
    if (rv == 0) {
        rv = bjm_phases(b, errmsg);
    }
    if (made) {
        jsErrCode jerr = 0;
        (void)js_DeleteStream(b->js, b->mirror, NULL, &jerr);
        (void)js_DeleteStream(b->js, c->stream, NULL, &jerr);
    }
    jsCtx_Destroy(b->js);
    jsCtx_Destroy(b->sjs);
    natsConnection_Destroy(b->nc);
    natsConnection_Destroy(b->snc);
    free(b->lag);
    free(b);
    return rv;
}
