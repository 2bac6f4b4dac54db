/* keel bench kv put|get BUCKET: Key/Value throughput and latency through
 * libnats' kvStore API, so a server sees exactly what a KV application
 * sends: a put is a publish to $KV.<bucket>.<key> that waits for its
 * JetStream ack, a get is a DIRECT.GET of the key's last message (the
 * bucket has allow_direct).
 *
 * The bench deletes and recreates the bucket (history 1, --replicas R),
 * then C client connections, one thread each, run --msgs/C operations.
 * kvStore_Put and kvStore_Get are synchronous, so every client keeps one
 * operation in flight: C clients are C operations in flight, the same for
 * every server. Keys are spread over a fixed set of --keys names
 * (operation g of the run uses key g mod K), so a put mostly replaces a
 * key's value (the per-subject limit at work) and every get hits a
 * present key: get first puts every key once (untimed). Each client first
 * runs one untimed operation, so the run starts with the stream's leader
 * elected. The time runs from the first timed operation to the last;
 * the report adds the latency percentiles of every operation. A get that
 * returns a value of the wrong size fails the run. The bucket is deleted
 * at the end. With several servers in -s, client i tries them starting
 * from the (i mod n)-th.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nats/nats.h>

#include "cli.h"
#include "cli_bench.h"
#include "cli_fmt.h"
#include "keel/error.h"
#include "keel/limits.h"

#define BKV_KEY_BYTES 24

struct bkv_cfg {
    const char *bucket;
    bool get; /* else put */
    int64_t size, msgs, clients, keys, replicas;
    bool json;
    struct cli_conn_opts conn;
};

struct bkv_client {
    const struct bkv_cfg *cfg;
    const char *payload;
    int64_t index; /* first operation: index, then every cfg->clients-th */
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
    pthread_t th;
    int64_t ops;
    int64_t done;
    int64_t *lat_ns; /* one per operation */
    int64_t start_ns, end_ns;
    int rv;
    char errmsg[KEEL_ERRMSG_MAX];
};

static void bkv_key(const struct bkv_cfg *c, int64_t g, char *key)
{
    snprintf(key, BKV_KEY_BYTES, "k%06" PRId64, g % c->keys);
}

/* One put or get of operation g; 0 or a KEEL_E* code with errmsg. */
static int bkv_op(struct bkv_client *k, int64_t g, char *errmsg)
{
    const struct bkv_cfg *c = k->cfg;
    char key[BKV_KEY_BYTES];
    bkv_key(c, g, key);
    if (!c->get) {
        uint64_t rev = 0;
        natsStatus s = kvStore_Put(&rev, k->kv, key, k->payload, (int)c->size);
        return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "kv put");
    }
    kvEntry *e = NULL;
    natsStatus s = kvStore_Get(&e, k->kv, key);
    if (s != NATS_OK) {
        return cli_nats_err(s, errmsg, "kv get");
    }
    int len = kvEntry_ValueLen(e);
    kvEntry_Destroy(e);
    if (len != (int)c->size) {
        return keel_err(KEEL_ELOST, errmsg,
                        "kv get %s: a value of %d bytes, not %" PRId64, key,
                        len, c->size);
    }
    return 0;
}

static void *bkv_thread(void *arg)
{
    struct bkv_client *k = arg;
    const struct bkv_cfg *c = k->cfg;
    k->start_ns = cli_mono_ns();
    /* Bounded by k->ops; each operation waits for its answer (at most the
     * JetStream context's wait). */
    for (k->done = 0; k->done < k->ops; k->done++) {
        int64_t t0 = cli_mono_ns();
        k->rv = bkv_op(k, k->index + k->done * c->clients, k->errmsg);
        if (k->rv != 0) {
            break;
        }
        k->lat_ns[k->done] = cli_mono_ns() - t0;
    }
    k->end_ns = cli_mono_ns();
    return NULL;
}

static int bkv_open(struct bkv_client *k, char *errmsg)
{
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = CLI_BENCH_STALL_MS_DEFAULT;
    int rv = cli_bench_connect(&k->cfg->conn, k->index, &k->nc, errmsg);
    if (rv != 0) {
        return rv;
    }
    natsStatus s = natsConnection_JetStream(&k->js, k->nc, &jo);
    return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "JetStream context");
}

/* Delete and recreate the bucket, so every run starts empty. */
static int bkv_make_bucket(struct bkv_client *k0, char *errmsg)
{
    const struct bkv_cfg *c = k0->cfg;
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = c->bucket;
    kc.History = 1;
    kc.Replicas = (int)c->replicas;
    (void)js_DeleteKeyValue(k0->js, c->bucket);
    kvStore *kv = NULL;
    natsStatus s = js_CreateKeyValue(&kv, k0->js, &kc);
    kvStore_Destroy(kv);
    if (s != NATS_OK) {
        return keel_err(KEEL_ECONN, errmsg,
                        "create bucket %s (R%" PRId64 "): %s: is the server "
                        "running with JetStream (a store dir)?",
                        c->bucket, c->replicas, natsStatus_GetText(s));
    }
    return 0;
}

/* Bind every client to the bucket; for get, put every key once (from
 * client 0) so each get finds its key; then one untimed operation per
 * client. */
static int bkv_prepare(struct bkv_client *ks, char *errmsg)
{
    const struct bkv_cfg *c = ks[0].cfg;
    for (int64_t i = 0; i < c->clients; i++) {
        natsStatus s = js_KeyValue(&ks[i].kv, ks[i].js, c->bucket);
        if (s != NATS_OK) {
            return cli_nats_err(s, errmsg, "bind to the bucket");
        }
    }
    /* Bounded by --keys. */
    for (int64_t g = 0; c->get && g < c->keys; g++) {
        char key[BKV_KEY_BYTES];
        uint64_t rev = 0;
        bkv_key(c, g, key);
        natsStatus s =
            kvStore_Put(&rev, ks[0].kv, key, ks[0].payload, (int)c->size);
        if (s != NATS_OK) {
            return cli_nats_err(s, errmsg, "preload (kv put, untimed)");
        }
    }
    for (int64_t i = 0; i < c->clients; i++) {
        int rv = bkv_op(&ks[i], i, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

static void bkv_report(const struct bkv_cfg *c, int64_t n, int64_t ns,
                       const struct bench_result *lat)
{
    double s = (double)ns / 1e9;
    double rate = s > 0 ? (double)n / s : 0;
    const char *mode = c->get ? "get" : "put";
    if (c->json) {
        printf("{\"mode\":\"kv_%s\",\"size\":%" PRId64 ",\"clients\":%" PRId64
               ",\"keys\":%" PRId64 ",\"replicas\":%" PRId64 ",\"ops\":%" PRId64
               ",\"seconds\":%.3f,\"msgs_per_s\":%.0f",
               mode, c->size, c->clients, c->keys, c->replicas, n, s, rate);
        cli_bench_lat_print(lat, NULL, true);
        printf("}\n");
        return;
    }
    printf("kv %s: %" PRId64 " ops of %" PRId64 " B in %.3f s from %" PRId64
           " clients over %" PRId64 " keys (R%" PRId64 "): %.0f ops/s\n",
           mode, n, c->size, s, c->clients, c->keys, c->replicas, rate);
    cli_bench_lat_print(lat, "latency", false);
}

/* Merge every client's latencies, report, and return the first error. */
static int bkv_collect(const struct bkv_cfg *c, const struct bkv_client *ks,
                       char *errmsg)
{
    int64_t n = 0, t0 = INT64_MAX, t1 = 0;
    for (int64_t i = 0; i < c->clients; i++) {
        if (ks[i].rv != 0) {
            return keel_err(ks[i].rv, errmsg, "%s", ks[i].errmsg);
        }
        n += ks[i].done;
        t0 = ks[i].start_ns < t0 ? ks[i].start_ns : t0;
        t1 = ks[i].end_ns > t1 ? ks[i].end_ns : t1;
    }
    struct bench_result lat = {0};
    int rv = cli_bench_lat_merge(
        ks, c->clients, sizeof *ks, offsetof(struct bkv_client, lat_ns),
        offsetof(struct bkv_client, done), &lat, errmsg);
    if (rv == 0) {
        bkv_report(c, n, t1 - t0, &lat);
    }
    return rv;
}

static int bkv_run(const struct bkv_cfg *c, char *errmsg)
{
    struct bkv_client *ks = calloc((size_t)c->clients, sizeof *ks);
    char *payload = malloc((size_t)c->size + 1);
    int rv = ks == NULL || payload == NULL
                 ? keel_err(KEEL_ENOMEM, errmsg, "no memory for the bench")
                 : 0;
    int64_t i, started = 0;
    if (payload != NULL) {
        memset(payload, 'v', (size_t)c->size + 1);
    }
    for (i = 0; rv == 0 && i < c->clients; i++) {
        ks[i] = (struct bkv_client){.cfg = c, .payload = payload, .index = i};
        ks[i].ops = c->msgs / c->clients + (i < c->msgs % c->clients);
        ks[i].lat_ns = calloc((size_t)ks[i].ops + 1, sizeof(int64_t));
        rv = ks[i].lat_ns == NULL
                 ? keel_err(KEEL_ENOMEM, errmsg, "latency samples")
                 : bkv_open(&ks[i], errmsg);
    }
    rv = rv == 0 ? bkv_make_bucket(&ks[0], errmsg) : rv;
    rv = rv == 0 ? bkv_prepare(ks, errmsg) : rv;
    for (i = 0; rv == 0 && i < c->clients; i++, started++) {
        if (pthread_create(&ks[i].th, NULL, bkv_thread, &ks[i]) != 0) {
            rv = keel_err(KEEL_ENOMEM, errmsg, "client thread");
        }
    }
    for (i = 0; i < started; i++) {
        pthread_join(ks[i].th, NULL);
    }
    if (rv == 0) {
        rv = bkv_collect(c, ks, errmsg);
    }
    if (ks != NULL && ks[0].js != NULL) {
        (void)js_DeleteKeyValue(ks[0].js, c->bucket);
    }
    for (i = 0; ks != NULL && i < c->clients; i++) {
        kvStore_Destroy(ks[i].kv);
        jsCtx_Destroy(ks[i].js);
        natsConnection_Destroy(ks[i].nc);
        free(ks[i].lat_ns);
    }
    free(ks);
    free(payload);
    return rv;
}

/* cli_bench_main's run_cb: the ranges, then the bench. */
static int bkv_start(void *arg, int mode, const char *bucket, char *errmsg)
{
    struct bkv_cfg *c = arg;
    c->get = mode == 1; /* else put */
    c->bucket = bucket;
    const struct cli_bench_range ranges[] = {
        {"--size", c->size, 0, CLI_BENCH_SIZE_BYTES_MAX},
        {"--msgs", c->msgs, 1, CLI_BENCH_REQ_MSGS_MAX},
        {"--clients", c->clients, 1, CLI_BENCH_CONNS_MAX},
        {"--keys", c->keys, 1, CLI_BENCH_KV_KEYS_MAX},
        {"--replicas", c->replicas, 1, SRV_JS_REPLICAS_MAX},
    };
    int rv = cli_bench_ranges(ranges, sizeof ranges / sizeof ranges[0], errmsg);
    return rv != 0 ? rv : bkv_run(c, errmsg);
}

int cli_bench_kv(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    struct bkv_cfg c = {
        .size = 128, .msgs = 20000, .clients = 1, .keys = 1000, .replicas = 1};
    static const struct cli_bench_modes modes = {
        "kv bench", "put or get", {"put", "get"}};
    const struct cli_flag flags[] = {
        {"size", 0, CLI_FLAG_SIZE, &c.size, "BYTES",
         "value size (default 128)"},
        {"msgs", 0, CLI_FLAG_INT, &c.msgs, "N",
         "operations in total (default 20000)"},
        {"clients", 0, CLI_FLAG_INT, &c.clients, "C",
         "client connections, one operation in flight each (default 1)"},
        {"keys", 0, CLI_FLAG_INT, &c.keys, "K",
         "distinct keys the operations cycle over (default 1000)"},
        {"replicas", 0, CLI_FLAG_INT, &c.replicas, "R",
         "replicas of the bucket (default 1)"},
        {"json", 0, CLI_FLAG_BOOL, &c.json, NULL, "print one JSON object"},
        CLI_FLAG_END,
    };
    return cli_bench_main(cmd, &modes, flags, &c.conn, argc, argv, bkv_start,
                          &c, errmsg);
}
