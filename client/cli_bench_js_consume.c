/* keel bench js fetch|push: JetStream consume throughput. The bench
 * creates a stream with a fresh name (--stream plus the PID and a clock
 * stamp, so runs never see each other's messages), preloads --msgs
 * messages with async publish (not timed), then times only the consume
 * phase of a durable consumer and deletes the stream at the end.
 *
 * fetch: a pull consumer; natsSubscription_Fetch of --batch messages at a
 *        time, acking each (--ack explicit) or only the last of a batch
 *        (--ack all). The time runs to the flush after the last ack.
 * push:  a push consumer with a callback; --ack none or explicit (libnats
 *        acks after the callback returns).
 *
 * libnats subscribes with a consumer filtered on SUBJECT (what every client
 * does); --unfiltered instead creates the consumer without a filter and
 * binds to it, to show what a filter equal to the stream's subjects costs.
 *
 * mirror: the same preloaded stream as an origin, then a mirror of it
 *        (cli_bench_js_mirror.c).
 */
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

struct bjc {
    const struct cli_bjc_cfg *cfg;
    natsConnection *nc;
    jsCtx *js;
    natsSubscription *sub;
    jsAckPolicy ackp;
    _Atomic int64_t received;
    _Atomic int64_t bad_size;
    _Atomic int64_t pub_errors;
    pthread_mutex_t mu;
    pthread_cond_t cond;
};

static void bjc_on_pub_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa,
                           jsPubAckErr *pae, void *closure)
{
    struct bjc *b = closure;
    (void)js;
    if (pa == NULL || pae != NULL) {
        atomic_fetch_add(&b->pub_errors, 1);
    }
    natsMsg_Destroy(msg);
}

/* Create the fresh stream and fill it with --msgs messages (not timed). */
static int bjc_preload(struct bjc *b, char *errmsg)
{
    const struct cli_bjc_cfg *c = b->cfg;
    int rv = cli_bench_js_stream_add(
        b->js, c->stream, c->subject, c->replicas,
        "is the server running with JetStream (a store dir)?", errmsg);
    return rv != 0 ? rv
                   : cli_bench_js_fill(b->js, c->subject, c->size, c->msgs,
                                       c->stall_ms, &b->pub_errors, errmsg);
}

int cli_bench_js_fill(jsCtx *js, const char *subject, int64_t size,
                      int64_t msgs, int64_t wait_ms, _Atomic int64_t *errors,
                      char *errmsg)
{
    natsStatus s = NATS_OK;
    char *payload = malloc((size_t)size + 1);
    if (payload == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "payload of %" PRId64 " B", size);
    }
    memset(payload, 'k', (size_t)size + 1);
    /* Bounded by msgs; js_PublishAsync blocks at the context's window. */
    for (int64_t i = 0; i < msgs && s == NATS_OK; i++) {
        s = js_PublishAsync(js, subject, payload, (int)size, NULL);
    }
    free(payload);
    if (s == NATS_OK) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = wait_ms;
        s = js_PublishAsyncComplete(js, &po);
    }
    if (s != NATS_OK) {
        return cli_nats_err(s, errmsg, "preload (async publish)");
    }
    if (atomic_load(errors) != 0) {
        return keel_err(KEEL_ECONN, errmsg,
                        "preload: %" PRId64 " publishes were not acked",
                        atomic_load(errors));
    }
    return 0;
}

static void bjc_count(struct bjc *b, natsMsg *m)
{
    if (natsMsg_GetDataLength(m) != (int)b->cfg->size) {
        atomic_fetch_add(&b->bad_size, 1);
    }
    atomic_fetch_add(&b->received, 1);
}

/* Pull loop: one Fetch per batch until --msgs arrived; a fetch that
 * returns nothing for --stall fails the run. */
static int bjc_fetch_loop(struct bjc *b, char *errmsg)
{
    const struct cli_bjc_cfg *c = b->cfg;
    int64_t idle_since = cli_mono_ns();
    /* Bounded by --msgs (each turn receives at least one message) and the
     * stall deadline (each empty turn waits up to --expires). */
    while (atomic_load(&b->received) < c->msgs) {
        natsMsgList list = {0};
        int64_t want = c->msgs - atomic_load(&b->received);
        int batch = (int)(want < c->batch ? want : c->batch);
        natsStatus s =
            natsSubscription_Fetch(&list, b->sub, batch, c->expires_ms, NULL);
        if (s != NATS_OK && s != NATS_TIMEOUT) {
            natsMsgList_Destroy(&list);
            return cli_nats_err(s, errmsg, "fetch");
        }
        for (int i = 0; i < list.Count && s == NATS_OK; i++) {
            bjc_count(b, list.Msgs[i]);
            if (b->ackp == js_AckExplicit ||
                (b->ackp == js_AckAll && i == list.Count - 1)) {
                s = natsMsg_Ack(list.Msgs[i], NULL);
            }
        }
        natsMsgList_Destroy(&list);
        if (s != NATS_OK && s != NATS_TIMEOUT) {
            return cli_nats_err(s, errmsg, "ack");
        }
        int64_t now = cli_mono_ns();
        if (list.Count > 0) {
            idle_since = now;
        } else if (now - idle_since > c->stall_ms * 1000000) {
            return keel_err(KEEL_ETIMEOUT, errmsg,
                            "fetch: no message for %" PRId64
                            " ms after %" PRId64 " of %" PRId64,
                            c->stall_ms, atomic_load(&b->received), c->msgs);
        }
    }
    natsStatus s = natsConnection_FlushTimeout(b->nc, c->stall_ms);
    return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "flush acks");
}

static void bjc_on_push(natsConnection *nc, natsSubscription *sub, natsMsg *m,
                        void *closure)
{
    struct bjc *b = closure;
    (void)nc, (void)sub;
    bjc_count(b, m);
    if (atomic_load(&b->received) == b->cfg->msgs) {
        pthread_mutex_lock(&b->mu);
        pthread_cond_broadcast(&b->cond);
        pthread_mutex_unlock(&b->mu);
    }
    natsMsg_Destroy(m);
}

/* Wait for the push callback to count --msgs; fail after --stall without
 * progress. */
static int bjc_push_wait(struct bjc *b, char *errmsg)
{
    const struct cli_bjc_cfg *c = b->cfg;
    int64_t last = -1, idle_since = cli_mono_ns();
    pthread_mutex_lock(&b->mu);
    /* Bounded by the stall deadline: each turn waits one tick. */
    while (atomic_load(&b->received) < c->msgs) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += CLI_BENCH_TICK_MS * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        (void)pthread_cond_timedwait(&b->cond, &b->mu, &ts);
        int64_t n = atomic_load(&b->received), now = cli_mono_ns();
        if (n != last) {
            last = n;
            idle_since = now;
        } else if (now - idle_since > c->stall_ms * 1000000) {
            pthread_mutex_unlock(&b->mu);
            return keel_err(KEEL_ETIMEOUT, errmsg,
                            "push: no message for %" PRId64 " ms after %" PRId64
                            " of %" PRId64,
                            c->stall_ms, n, c->msgs);
        }
    }
    pthread_mutex_unlock(&b->mu);
    natsStatus s = natsConnection_FlushTimeout(b->nc, c->stall_ms);
    return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "flush acks");
}

/* --unfiltered: create the consumer with no filter subject; the
 * subscription then binds to it by name. */
static natsStatus bjc_add_unfiltered(struct bjc *b, jsSubOptions *so,
                                     natsInbox **inbox, jsErrCode *jerr)
{
    jsConsumerInfo *ci = NULL;
    jsConsumerConfig cc = so->Config;
    natsStatus s = NATS_OK;
    cc.Durable = b->cfg->mode == CLI_BJC_FETCH ? "BENCHFETCH" : "BENCHPUSH";
    if (b->cfg->mode == CLI_BJC_PUSH) {
        s = natsInbox_Create(inbox);
        cc.DeliverSubject = *inbox;
    }
    if (s == NATS_OK) {
        s = js_AddConsumer(&ci, b->js, b->cfg->stream, &cc, NULL, jerr);
    }
    jsConsumerInfo_Destroy(ci);
    so->Consumer = cc.Durable;
    return s;
}

/* Create the durable consumer and run the timed consume phase. */
static int bjc_consume(struct bjc *b, int64_t *ns, char *errmsg)
{
    const struct cli_bjc_cfg *c = b->cfg;
    jsSubOptions so;
    jsErrCode jerr = 0;
    natsInbox *inbox = NULL;
    natsStatus s = NATS_OK;
    jsSubOptions_Init(&so);
    so.Stream = c->stream;
    so.Config.AckPolicy = b->ackp;
    so.Config.MaxAckPending = -1;
    so.Config.DeliverPolicy = js_DeliverAll;
    int64_t t0 = cli_mono_ns();
    if (c->unfiltered) {
        s = bjc_add_unfiltered(b, &so, &inbox, &jerr);
    }
    if (s == NATS_OK && c->mode == CLI_BJC_FETCH) {
        s = js_PullSubscribe(&b->sub, b->js, c->subject, "BENCHFETCH", NULL,
                             &so, &jerr);
    } else if (s == NATS_OK) {
        so.Config.Durable = "BENCHPUSH";
        so.ManualAck = b->ackp == js_AckNone;
        s = js_Subscribe(&b->sub, b->js, c->subject, bjc_on_push, b, NULL, &so,
                         &jerr);
        if (s == NATS_OK) {
            s = natsSubscription_SetPendingLimits(b->sub, -1, -1);
        }
    }
    natsInbox_Destroy(inbox);
    if (s != NATS_OK) {
        return keel_err(KEEL_ECONN, errmsg,
                        "create consumer on %s: %s (JetStream error %d)",
                        c->stream, natsStatus_GetText(s), (int)jerr);
    }
    int rv = c->mode == CLI_BJC_FETCH ? bjc_fetch_loop(b, errmsg)
                                      : bjc_push_wait(b, errmsg);
    *ns = cli_mono_ns() - t0;
    if (rv == 0 && atomic_load(&b->bad_size) != 0) {
        rv = keel_err(KEEL_EPROTO, errmsg,
                      "%" PRId64 " messages had the wrong size",
                      atomic_load(&b->bad_size));
    }
    return rv;
}

static void bjc_report(const struct bjc *b, int64_t ns)
{
    const struct cli_bjc_cfg *c = b->cfg;
    const char *mode = c->mode == CLI_BJC_FETCH ? "fetch" : "push";
    double s = (double)ns / 1e9;
    int64_t n = atomic_load(&b->received);
    double rate = s > 0 ? (double)n / s : 0;
    double mbs = rate * (double)c->size / (1024.0 * 1024.0);
    int64_t batch = c->mode == CLI_BJC_FETCH ? c->batch : 0; /* 0: push */
    if (c->json) {
        printf("{\"mode\":\"js_%s\",\"size\":%" PRId64 ",\"batch\":%" PRId64
               ",\"ack\":\"%s\",\"filtered\":%s,\"received\":%" PRId64
               ",\"seconds\":%.3f,\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f}\n",
               mode, c->size, batch, c->ack, c->unfiltered ? "false" : "true",
               n, s, rate, mbs);
        return;
    }
    printf("js %s: %" PRId64 " msgs of %" PRId64 " B in %.3f s (ack %s, "
           "batch %" PRId64 ", %s): %.0f msgs/s, %.2f MB/s\n",
           mode, n, c->size, s, c->ack, batch,
           c->unfiltered ? "unfiltered" : "filtered", rate, mbs);
}

static int bjc_run(const struct cli_bjc_cfg *c, char *errmsg)
{
    struct bjc *b = calloc(1, sizeof *b);
    int64_t ns = 0;
    if (b == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "bench state");
    }
    b->cfg = c;
    b->ackp = strcmp(c->ack, "none") == 0  ? js_AckNone
              : strcmp(c->ack, "all") == 0 ? js_AckAll
                                           : js_AckExplicit;
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cond, NULL);
    int rv = cli_connect_default(&c->conn, &b->nc, errmsg);
    if (rv == 0) {
        rv = cli_js_ctx_async(b->nc, CLI_BENCH_STALL_MS_DEFAULT,
                              CLI_BENCH_STALL_MS_DEFAULT, c->window,
                              bjc_on_pub_ack, b, &b->js, errmsg);
    }
    bool made = false;
    if (rv == 0) {
        rv = bjc_preload(b, errmsg);
        made = true;
    }
    if (rv == 0) {
        rv = bjc_consume(b, &ns, errmsg);
    }
    if (rv == 0) {
        bjc_report(b, ns);
    }
    natsSubscription_Destroy(b->sub);
    if (made) {
        jsErrCode jerr = 0;
        (void)js_DeleteStream(b->js, c->stream, NULL, &jerr);
    }
    jsCtx_Destroy(b->js);
    natsConnection_Destroy(b->nc);
    pthread_cond_destroy(&b->cond);
    pthread_mutex_destroy(&b->mu);
    free(b);
    return rv;
}

static int bjc_check(struct cli_bjc_cfg *c, char *errmsg)
{
    bool ack_ok =
        c->mode == CLI_BJC_FETCH
            ? strcmp(c->ack, "explicit") == 0 || strcmp(c->ack, "all") == 0
            : strcmp(c->ack, "explicit") == 0 || strcmp(c->ack, "none") == 0;
    bool mirror_only = c->rate != 20000;
    if (c->mode == CLI_BJC_MIRROR ? c->unfiltered || c->batch != 100 ||
                                        strcmp(c->ack, "explicit") != 0
                                  : mirror_only) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--rate is for mirror only; "
                        "--batch, --ack and --unfiltered for fetch and push");
    }
    if (!ack_ok) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--ack for fetch: explicit or all; for push: "
                        "explicit or none");
    }
    if (c->size < 0 || c->size > CLI_BENCH_SIZE_BYTES_MAX || c->msgs < 1 ||
        c->msgs > CLI_BENCH_MSGS_MAX || c->batch < 1 ||
        c->batch > CLI_BENCH_FETCH_BATCH_MAX || c->window < 1 ||
        c->window > CLI_BENCH_PENDING_MSGS || c->stall_ms < 1 ||
        c->stall_ms > CLI_BENCH_WAIT_MS_MAX || c->expires_ms < 1 ||
        c->expires_ms > CLI_BENCH_WAIT_MS_MAX ||
        strlen(c->stream_prefix) > 32 || c->replicas < 1 ||
        c->replicas > SRV_JS_REPLICAS_MAX || c->rate < 0 ||
        c->rate > CLI_BENCH_MSGS_MAX) {
        return keel_err(
            KEEL_EUSAGE, errmsg,
            "--size 0..%d, --msgs 1..%lld, --batch 1..%d, "
            "--window 1..%d, --stall and --expires 1ms..1h, --stream up to 32 "
            "characters, --replicas 1..5, --rate 0..%lld",
            CLI_BENCH_SIZE_BYTES_MAX, (long long)CLI_BENCH_MSGS_MAX,
            CLI_BENCH_FETCH_BATCH_MAX, CLI_BENCH_PENDING_MSGS,
            (long long)CLI_BENCH_MSGS_MAX);
    }
    /* A fresh name per run: PID and clock, so a stream left by a killed run
     * is never reused. */
    snprintf(c->stream, sizeof c->stream, "%s_%d_%" PRId64, c->stream_prefix,
             (int)getpid(), cli_mono_ns() % 1000000000000);
    return 0;
}

/* cli_bench_main's run_cb: the flags' checks, then the bench. */
static int bjc_start(void *arg, int mode, const char *subject, char *errmsg)
{
    struct cli_bjc_cfg *c = arg;
    c->mode = (enum cli_bjc_mode)mode;
    c->subject = subject;
    int rv = bjc_check(c, errmsg);
    if (rv != 0) {
        return rv;
    }
    return c->mode == CLI_BJC_MIRROR ? cli_bench_js_mirror(c, errmsg)
                                     : bjc_run(c, errmsg);
}

int cli_bench_js_consume(const struct cli_cmd *cmd, int argc, char **argv,
                         char *errmsg)
{
    struct cli_bjc_cfg c = {.stream_prefix = "BENCHC",
                            .ack = "explicit",
                            .size = 128,
                            .msgs = 100000,
                            .batch = 100,
                            .window = 256,
                            .stall_ms = CLI_BENCH_STALL_MS_DEFAULT,
                            .expires_ms = 1000,
                            .replicas = 1,
                            .rate = 20000};
    static const struct cli_bench_modes modes = {
        "js bench", "pub, fetch, push, mirror", {"fetch", "push", "mirror"}};
    const struct cli_flag flags[] = {
        {"size", 0, CLI_FLAG_SIZE, &c.size, "BYTES",
         "message size (default 128)"},
        {"msgs", 0, CLI_FLAG_INT, &c.msgs, "N",
         "messages preloaded and consumed (default 100000)"},
        {"batch", 0, CLI_FLAG_INT, &c.batch, "K",
         "fetch: messages per pull request (default 100)"},
        {"ack", 0, CLI_FLAG_STR, &c.ack, "POLICY",
         "fetch: explicit (each) or all (last of a batch); push: explicit or "
         "none (default explicit)"},
        {"window", 0, CLI_FLAG_INT, &c.window, "W",
         "unacked publishes while preloading (default 256)"},
        {"stream", 0, CLI_FLAG_STR, &c.stream_prefix, "NAME",
         "stream name prefix; the run adds a unique suffix and deletes the "
         "stream after (default BENCHC)"},
        {"expires", 0, CLI_FLAG_DURATION, &c.expires_ms, "DURATION",
         "fetch: how long one pull request waits (default 1s)"},
        {"stall", 0, CLI_FLAG_DURATION, &c.stall_ms, "DURATION",
         "fail when no message arrives for this long (default 10s)"},
        {"replicas", 0, CLI_FLAG_INT, &c.replicas, "R",
         "replicas of the stream (default 1)"},
        {"unfiltered", 0, CLI_FLAG_BOOL, &c.unfiltered, NULL,
         "create the consumer without a filter subject and bind to it"},
        {"rate", 0, CLI_FLAG_INT, &c.rate, "R",
         "mirror: publishes a second during the 10 s lag phase (default "
         "20000; 0: no lag phase)"},
        {"json", 0, CLI_FLAG_BOOL, &c.json, NULL, "print one JSON object"},
        CLI_FLAG_END,
    };
    return cli_bench_main(cmd, &modes, flags, &c.conn, argc, argv, bjc_start,
                          &c, errmsg);
}
