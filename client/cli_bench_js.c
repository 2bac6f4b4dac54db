/* keel bench js pub: JetStream publish throughput with acks. P publisher
 * connections each publish --msgs/P messages asynchronously, keeping at
 * most --window unacknowledged (libnats' MaxPending); the time runs from
 * the first publish to the last ack. With --sync each publisher waits for
 * every ack before the next publish and the report adds the ack latency
 * percentiles. The bench creates the stream (--stream, capturing SUBJECT,
 * --replicas R) and deletes it afterwards. With several servers in -s,
 * publisher i tries them starting from the (i mod n)-th, so publishers
 * spread over the nodes of a cluster. Each publisher first publishes one
 * message untimed (not counted), so the run starts with the stream's
 * leader elected.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "cli_bench.h"
#include "cli_js.h"
#include "keel/error.h"
#include "keel/limits.h"

struct bjs_cfg {
    const char *subject;
    const char *stream;
    int64_t size, msgs, pubs, window, replicas;
    bool json, sync;
    struct cli_conn_opts conn;
};

struct bjs_pub {
    const struct bjs_cfg *cfg;
    const char *payload;
    natsConnection *nc;
    jsCtx *js;
    pthread_t th;
    int64_t msgs;
    int64_t *lat_ns; /* --sync: one ack latency per publish */
    int64_t sent;
    natsStatus status;
};

static _Atomic int64_t acked, ack_errors;

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
    if (p->cfg->sync) {
        /* Bounded by p->msgs; each js_Publish waits for its ack. */
        for (int64_t i = 0; i < p->msgs && p->status == NATS_OK; i++) {
            jsPubAck *pa = NULL;
            int64_t t0 = cli_mono_ns();
            p->status = js_Publish(&pa, p->js, p->cfg->subject, p->payload,
                                   (int)p->cfg->size, &po, NULL);
            p->lat_ns[i] = cli_mono_ns() - t0;
            jsPubAck_Destroy(pa);
            if (p->status == NATS_OK) {
                p->sent++;
                atomic_fetch_add(&acked, 1);
            }
        }
        return NULL;
    }
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

int cli_bench_rotate_servers(const char *list, int64_t i, char *out, size_t cap,
                             char *errmsg)
{
    const char *urls[CLI_SERVERS_MAX];
    size_t lens[CLI_SERVERS_MAX];
    int64_t n = 0;
    for (const char *t = list; *t != '\0' && n < CLI_SERVERS_MAX;) {
        size_t len = strcspn(t, ", ");
        if (len > 0) {
            urls[n] = t;
            lens[n++] = len;
        }
        t += len + (t[len] != '\0');
    }
    if (strlen(list) >= cap) {
        return keel_err(KEEL_EUSAGE, errmsg, "--server list is too long");
    }
    out[0] = '\0';
    for (int64_t k = 0; k < n; k++) {
        int64_t j = (i + k) % n;
        strncat(out, urls[j], lens[j]);
        strcat(out, k + 1 < n ? "," : "");
    }
    return 0;
}

int cli_bench_connect(const struct cli_conn_opts *conn, int64_t i,
                      natsConnection **nc, char *errmsg)
{
    struct cli_conn_opts c = *conn;
    char servers[CLI_SERVERS_BYTES_MAX];

    if (c.servers != NULL) {
        int rv = cli_bench_rotate_servers(c.servers, i, servers, sizeof servers,
                                          errmsg);
        if (rv != 0) {
            return rv;
        }
        c.servers = servers;
    }
    return cli_connect_default(&c, nc, errmsg);
}

int cli_bench_js_stream_add(jsCtx *js, const char *name, const char *subject,
                            int64_t replicas, const char *hint, char *errmsg)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {subject};
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = replicas;
    natsStatus s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    if (s != NATS_OK) {
        return keel_err(KEEL_ECONN, errmsg,
                        "create stream %s on %s: %s (JetStream error %d): %s",
                        name, subject, natsStatus_GetText(s), (int)jerr, hint);
    }
    return 0;
}

static int pub_open(struct bjs_pub *p, int64_t i, char *errmsg)
{
    int rv = cli_bench_connect(&p->cfg->conn, i, &p->nc, errmsg);
    return rv != 0
               ? rv
               : cli_js_ctx_async(p->nc, CLI_BENCH_STALL_MS_DEFAULT,
                                  CLI_BENCH_STALL_MS_DEFAULT, p->cfg->window,
                                  on_ack, NULL, &p->js, errmsg);
}

/* (Re)create the stream so every run starts empty. */
static int make_stream(jsCtx *js, const struct bjs_cfg *c, char *errmsg)
{
    jsErrCode jerr = 0;
    (void)js_DeleteStream(js, c->stream, NULL, &jerr);
    return cli_bench_js_stream_add(js, c->stream, c->subject, c->replicas,
                                   "is keeld running with a store dir?",
                                   errmsg);
}

static void report(const struct bjs_cfg *c, int64_t ns,
                   const struct bench_result *lat)
{
    double s = (double)ns / 1e9;
    int64_t n = atomic_load(&acked);
    double rate = s > 0 ? (double)n / s : 0;
    double mbs = rate * (double)c->size / (1024.0 * 1024.0);
    if (c->json) {
        printf("{\"mode\":\"js_pub\",\"size\":%" PRId64 ",\"pubs\":%" PRId64
               ",\"window\":%" PRId64 ",\"replicas\":%" PRId64
               ",\"sync\":%s,\"acked\":%" PRId64 ",\"errors\":%" PRId64
               ",\"seconds\":%.3f,\"msgs_per_s\":%.0f,\"mb_per_s\":%.2f",
               c->size, c->pubs, c->sync ? 1 : c->window, c->replicas,
               c->sync ? "true" : "false", n, atomic_load(&ack_errors), s, rate,
               mbs);
        if (c->sync) {
            cli_bench_lat_print(lat, NULL, true);
        }
        printf("}\n");
        return;
    }
    printf("js pub%s: %" PRId64 " acked msgs of %" PRId64
           " B in %.3f s from %" PRId64 " publishers (window %" PRId64
           ", R%" PRId64 "): %.0f msgs/s, %.2f MB/s, %" PRId64 " errors\n",
           c->sync ? " --sync" : "", n, c->size, s, c->pubs,
           c->sync ? 1 : c->window, c->replicas, rate, mbs,
           atomic_load(&ack_errors));
    if (c->sync) {
        cli_bench_lat_print(lat, "ack latency", false);
    }
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
        if (c->sync) {
            pubs[i].lat_ns = calloc((size_t)pubs[i].msgs + 1, sizeof(int64_t));
            if (pubs[i].lat_ns == NULL) {
                rv = keel_err(KEEL_ENOMEM, errmsg, "latency samples");
                break;
            }
        }
        rv = pub_open(&pubs[i], i, errmsg);
    }
    if (rv == 0) {
        rv = make_stream(pubs[0].js, c, errmsg);
    }
    /* One untimed publish per connection first: a replicated stream may
     * still be electing its leader when the create returns (Keel answers
     * the create once the group is placed), and the run measures the
     * steady state. */
    for (i = 0; rv == 0 && i < c->pubs; i++) {
        jsPubAck *pa = NULL;
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = CLI_BENCH_STALL_MS_DEFAULT;
        natsStatus s = js_Publish(&pa, pubs[i].js, c->subject, payload,
                                  (int)c->size, &po, NULL);
        jsPubAck_Destroy(pa);
        if (s != NATS_OK) {
            rv = cli_nats_err(s, errmsg, "first (untimed) publish");
        }
    }
    int64_t t0 = cli_mono_ns();
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
    int64_t t1 = cli_mono_ns();
    struct bench_result lat = {0};
    if (rv == 0 && c->sync) {
        /* --sync only: every publisher's ack latencies. */
        rv = cli_bench_lat_merge(pubs, c->pubs, sizeof *pubs,
                                 offsetof(struct bjs_pub, lat_ns),
                                 offsetof(struct bjs_pub, sent), &lat, errmsg);
    }
    if (rv == 0) {
        report(c, t1 - t0, &lat);
        jsErrCode jerr = 0;
        (void)js_DeleteStream(pubs[0].js, c->stream, NULL, &jerr);
    }
    for (i = 0; pubs != NULL && i < c->pubs; i++) {
        jsCtx_Destroy(pubs[i].js);
        natsConnection_Destroy(pubs[i].nc);
        free(pubs[i].lat_ns);
    }
    free(pubs);
    free(payload);
    return rv;
}

/* cli_bench_main's run_cb: the ranges, then the bench. */
static int bjs_start(void *arg, int mode, const char *subject, char *errmsg)
{
    struct bjs_cfg *c = arg;
    (void)mode; /* pub, the only one */
    c->subject = subject;
    const struct cli_bench_range ranges[] = {
        {"--size", c->size, 0, CLI_BENCH_SIZE_BYTES_MAX},
        {"--msgs", c->msgs, 1, CLI_BENCH_MSGS_MAX},
        {"--pub", c->pubs, 1, CLI_BENCH_CONNS_MAX},
        {"--window", c->window, 1, CLI_BENCH_PENDING_MSGS},
        {"--replicas", c->replicas, 1, SRV_JS_REPLICAS_MAX},
    };
    int rv = cli_bench_ranges(ranges, sizeof ranges / sizeof ranges[0], errmsg);
    return rv != 0 ? rv : bjs_run(c, errmsg);
}

int cli_bench_js(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    struct bjs_cfg c = {.stream = "BENCH",
                        .size = 128,
                        .msgs = 100000,
                        .pubs = 1,
                        .window = 256,
                        .replicas = 1};
    static const struct cli_bench_modes modes = {"js bench", "pub", {"pub"}};
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
        {"replicas", 0, CLI_FLAG_INT, &c.replicas, "R",
         "replicas of the stream (default 1)"},
        {"sync", 0, CLI_FLAG_BOOL, &c.sync, NULL,
         "wait for each ack before the next publish; report ack latency"},
        {"json", 0, CLI_FLAG_BOOL, &c.json, NULL, "print one JSON object"},
        CLI_FLAG_END,
    };
    return cli_bench_main(cmd, &modes, flags, &c.conn, argc, argv, bjs_start,
                          &c, errmsg);
}
