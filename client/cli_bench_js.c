/* keel bench js pub: JetStream publish throughput with acks. P publisher
 * connections each publish --msgs/P messages asynchronously, keeping at
 * most --window unacknowledged (libnats' MaxPending); the time runs from
 * the first publish to the last ack. The bench creates the stream
 * (--stream, capturing SUBJECT) and deletes it afterwards.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nats/nats.h>

#include "cli.h"
#include "keel/error.h"
#include "keel/limits.h"

struct bjs_cfg {
    const char *subject;
    const char *stream;
    int64_t size, msgs, pubs, window;
    bool json;
    struct cli_conn_opts conn;
};

struct bjs_pub {
    const struct bjs_cfg *cfg;
    const char *payload;
    natsConnection *nc;
    jsCtx *js;
    pthread_t th;
    int64_t msgs;
    natsStatus status;
};

static _Atomic int64_t acked, ack_errors;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
                   void *closure)
{
    (void)js, (void)closure;
    if (pa != NULL && pae == NULL) {
        atomic_fetch_add(&acked, 1);
    } else {
        atomic_fetch_add(&ack_errors, 1);
    }
    natsMsg_Destroy(msg);
}

static void *pub_thread(void *arg)
{
    struct bjs_pub *p = arg;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = CLI_BENCH_STALL_MS_DEFAULT;
    p->status = NATS_OK;
    /* Bounded by p->msgs; js_PublishAsync blocks while --window acks are
     * outstanding. */
    for (int64_t i = 0; i < p->msgs && p->status == NATS_OK; i++) {
        p->status = js_PublishAsync(p->js, p->cfg->subject, p->payload,
                                    (int)p->cfg->size, NULL);
    }
    if (p->status == NATS_OK) {
        p->status = js_PublishAsyncComplete(p->js, &po);
    }
    return NULL;
}

static int pub_open(struct bjs_pub *p, char *errmsg)
{
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = CLI_BENCH_STALL_MS_DEFAULT;
    jo.PublishAsync.AckHandler = on_ack;
    jo.PublishAsync.MaxPending = p->cfg->window;
    jo.PublishAsync.StallWait = CLI_BENCH_STALL_MS_DEFAULT;
    int rv = cli_connect_default(&p->cfg->conn, &p->nc, errmsg);
    if (rv != 0) {
        return rv;
    }
    natsStatus s = natsConnection_JetStream(&p->js, p->nc, &jo);
    return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "JetStream context");
}

/* (Re)create the stream so every run starts empty. */
static int make_stream(jsCtx *js, const struct bjs_cfg *c, char *errmsg)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {c->subject};
    jsStreamConfig_Init(&cfg);
    cfg.Name = c->stream;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    (void)js_DeleteStream(js, c->stream, NULL, &jerr);
    natsStatus s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    if (s != NATS_OK) {
        return keel_err(KEEL_ECONN, errmsg,
                        "create stream %s on %s: %s (JetStream error %d): is "
                        "keeld running with a store dir?",
                        c->stream, c->subject, natsStatus_GetText(s),
                        (int)jerr);
    }
    return 0;
}

static void report(const struct bjs_cfg *c, int64_t ns)
{
    double s = (double)ns / 1e9;
    int64_t n = atomic_load(&acked);
    double rate = s > 0 ? (double)n / s : 0;
    double mbs = rate * (double)c->size / (1024.0 * 1024.0);
    if (c->json) {
        printf("{\"mode\":\"js_pub\",\"size\":%" PRId64 ",\"pubs\":%" PRId64
               ",\"window\":%" PRId64 ",\"acked\":%" PRId64
               ",\"errors\":%" PRId64 ",\"seconds\":%.3f,\"msgs_per_s\":%.0f,"
               "\"mb_per_s\":%.2f}\n",
               c->size, c->pubs, c->window, n, atomic_load(&ack_errors), s,
               rate, mbs);
        return;
    }
    printf("js pub: %" PRId64 " acked msgs of %" PRId64
           " B in %.3f s from %" PRId64 " publishers (window %" PRId64
           "): %.0f msgs/s, %.2f "
           "MB/s, %" PRId64 " errors\n",
           n, c->size, s, c->pubs, c->window, rate, mbs,
           atomic_load(&ack_errors));
}

static int bjs_run(const struct bjs_cfg *c, char *errmsg)
{
    struct bjs_pub *pubs = calloc((size_t)c->pubs, sizeof *pubs);
    char *payload = malloc((size_t)c->size + 1);
    int rv = pubs == NULL || payload == NULL ? KEEL_ENOMEM : 0;
    int64_t i, started = 0;
    if (payload != NULL) {
        memset(payload, 'k', (size_t)c->size + 1);
    }
    for (i = 0; rv == 0 && i < c->pubs; i++) {
        pubs[i] = (struct bjs_pub){.cfg = c, .payload = payload};
        pubs[i].msgs = c->msgs / c->pubs + (i < c->msgs % c->pubs);
        rv = pub_open(&pubs[i], errmsg);
    }
    if (rv == 0) {
        rv = make_stream(pubs[0].js, c, errmsg);
    }
    int64_t t0 = now_ns();
    for (i = 0; rv == 0 && i < c->pubs; i++, started++) {
        if (pthread_create(&pubs[i].th, NULL, pub_thread, &pubs[i]) != 0) {
            rv = keel_err(KEEL_ENOMEM, errmsg, "publisher thread");
        }
    }
    for (i = 0; i < started; i++) {
        pthread_join(pubs[i].th, NULL);
        if (rv == 0 && pubs[i].status != NATS_OK) {
            rv = cli_nats_err(pubs[i].status, errmsg, "async publish");
        }
    }
    int64_t t1 = now_ns();
    if (rv == 0) {
        report(c, t1 - t0);
        jsErrCode jerr = 0;
        (void)js_DeleteStream(pubs[0].js, c->stream, NULL, &jerr);
    }
    for (i = 0; pubs != NULL && i < c->pubs; i++) {
        jsCtx_Destroy(pubs[i].js);
        natsConnection_Destroy(pubs[i].nc);
    }
    free(pubs);
    free(payload);
    return rv;
}

int cli_bench_js(const struct cli_cmd *parent, int argc, char **argv,
                 char *errmsg)
{
    /* fetch and push take other flags: their own parser (the mode must be
     * the first argument after "js"). */
    if (argc > 1 &&
        (strcmp(argv[1], "fetch") == 0 || strcmp(argv[1], "push") == 0)) {
        return cli_bench_js_consume(parent, argc, argv, errmsg);
    }
    (void)parent;
    static const struct cli_cmd cmd = {
        "bench js",
        NULL,
        "pub SUBJECT",
        "JetStream publish throughput with acks (also: fetch|push SUBJECT, "
        "see keel bench js fetch --help).",
        2,
        2};
    struct bjs_cfg c = {.stream = "BENCH",
                        .size = 128,
                        .msgs = 100000,
                        .pubs = 1,
                        .window = 256};
    struct cli_args args;
    bool help = false;
    cli_conn_opts_init(&c.conn);
    const struct cli_flag flags[] = {
        {"size", 0, CLI_FLAG_SIZE, &c.size, "BYTES",
         "message size (default 128)"},
        {"msgs", 0, CLI_FLAG_INT, &c.msgs, "N",
         "messages in total (default 100000)"},
        {"pub", 0, CLI_FLAG_INT, &c.pubs, "P", "publishers (default 1)"},
        {"window", 0, CLI_FLAG_INT, &c.window, "W",
         "unacked publishes per publisher (default 256)"},
        {"stream", 0, CLI_FLAG_STR, &c.stream, "NAME",
         "stream to create on SUBJECT and delete after (default BENCH)"},
        {"json", 0, CLI_FLAG_BOOL, &c.json, NULL, "print one JSON object"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    int rv = cli_parse(&cmd, flags, &c.conn, argc, argv, &args, &help, errmsg);
    if (rv != 0 || help) {
        return rv;
    }
    if (strcmp(args.items[0], "pub") != 0) {
        return keel_err(KEEL_EUSAGE, errmsg, "unknown js bench mode '%s' (pub)",
                        args.items[0]);
    }
    c.subject = args.items[1];
    if (c.size < 0 || c.size > CLI_BENCH_SIZE_BYTES_MAX || c.msgs < 1 ||
        c.msgs > CLI_BENCH_MSGS_MAX || c.pubs < 1 ||
        c.pubs > CLI_BENCH_CONNS_MAX || c.window < 1 ||
        c.window > CLI_BENCH_PENDING_MSGS) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--size 0..%d, --msgs 1..%lld, --pub 1..%d, --window "
                        "1..%d",
                        CLI_BENCH_SIZE_BYTES_MAX, (long long)CLI_BENCH_MSGS_MAX,
                        CLI_BENCH_CONNS_MAX, CLI_BENCH_PENDING_MSGS);
    }
    return bjs_run(&c, errmsg);
}
