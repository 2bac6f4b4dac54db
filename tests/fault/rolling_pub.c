/* keel-rolling-pub: the publisher of a rolling-restart measurement
 * (tools/rolling-restart, docs/operations.md "Lame duck mode"). One
 * libnats connection to every node publishes unique messages to an R3
 * stream, one at a time, each with a Nats-Msg-Id so a retry is never
 * stored twice; a publish that gets no ack is retried until it is acked
 * or --give-up-ms passed (then it counts as failed). When the stop file
 * appears it reads the stream back and checks that every acked message is
 * at its acked sequence. Prints one JSON line of counts and latencies
 * (first attempt to ack) and exits 0 when nothing failed and nothing
 * acked was lost.
 *
 * usage: keel-rolling-pub --servers URL,URL,... --stop-file PATH
 *        [--stream NAME] [--replicas N] [--rate MSGS_PER_S]
 *        [--wait-ms MS] [--give-up-ms MS] [--max N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nats/nats.h>

#define PUB_MAX 1000000 /* messages per run */
#define SERVERS_MAX 16
#define CREATE_MS_MAX 60000

struct opts {
    char *servers[SERVERS_MAX];
    int nservers;
    const char *stop_file;
    const char *stream;
    int replicas;
    int rate;
    int wait_ms;
    int give_up_ms;
    int max;
};

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The publish rate's pacing and the retry pause: a bound on the rate,
 * not a wait for a condition. */
static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int parse(struct opts *o, int argc, char **argv)
{
    *o = (struct opts){.stream = "ROLL",
                       .replicas = 3,
                       .rate = 200,
                       .wait_ms = 2000,
                       .give_up_ms = 30000,
                       .max = PUB_MAX};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i];
        char *v = argv[i + 1];
        if (strcmp(k, "--servers") == 0) {
            for (char *t = strtok(v, ","); t && o->nservers < SERVERS_MAX;
                 t = strtok(NULL, ",")) {
                o->servers[o->nservers++] = t;
            }
        } else if (strcmp(k, "--stop-file") == 0) {
            o->stop_file = v;
        } else if (strcmp(k, "--stream") == 0) {
            o->stream = v;
        } else if (strcmp(k, "--replicas") == 0) {
            o->replicas = atoi(v);
        } else if (strcmp(k, "--rate") == 0) {
            o->rate = atoi(v);
        } else if (strcmp(k, "--wait-ms") == 0) {
            o->wait_ms = atoi(v);
        } else if (strcmp(k, "--give-up-ms") == 0) {
            o->give_up_ms = atoi(v);
        } else if (strcmp(k, "--max") == 0) {
            o->max = atoi(v);
        } else {
            fprintf(stderr, "keel-rolling-pub: unknown flag %s\n", k);
            return -1;
        }
    }
    if (o->nservers == 0 || o->stop_file == NULL || o->rate <= 0 ||
        o->max <= 0 || o->max > PUB_MAX) {
        fprintf(stderr, "usage: keel-rolling-pub --servers URL,URL,... "
                        "--stop-file PATH [--stream NAME] [--replicas N] "
                        "[--rate N] [--wait-ms MS] [--give-up-ms MS] "
                        "[--max N]\n");
        return -1;
    }
    return 0;
}

static int connect_all(const struct opts *o, natsConnection **nc, jsCtx **js)
{
    natsOptions *no = NULL;
    jsOptions jo;
    int rv = -1;
    if (natsOptions_Create(&no) == NATS_OK &&
        natsOptions_SetServers(no, (const char **)o->servers, o->nservers) ==
            NATS_OK &&
        natsOptions_SetMaxReconnect(no, -1) == NATS_OK &&
        natsOptions_SetReconnectWait(no, 50) == NATS_OK &&
        natsOptions_SetNoRandomize(no, false) == NATS_OK &&
        natsConnection_Connect(nc, no) == NATS_OK) {
        jsOptions_Init(&jo);
        jo.Wait = o->wait_ms;
        rv = natsConnection_JetStream(js, *nc, &jo) == NATS_OK ? 0 : -1;
    }
    natsOptions_Destroy(no);
    return rv;
}

/* Create the stream (the cluster may still be electing: retry). */
static int ensure_stream(const struct opts *o, jsCtx *js)
{
    char subj[300];
    const char *subjects[] = {subj};
    jsStreamConfig cfg;
    jsErrCode jerr = 0;
    long long end = now_ms() + CREATE_MS_MAX;
    snprintf(subj, sizeof subj, "%s.>", o->stream);
    jsStreamConfig_Init(&cfg);
    cfg.Name = o->stream;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = o->replicas;
    while (now_ms() < end) {
        jsStreamInfo *si = NULL;
        natsStatus s = js_AddStream(&si, js, &cfg, NULL, &jerr);
        jsStreamInfo_Destroy(si);
        if (s == NATS_OK || jerr == JSStreamNameExistErr) {
            return 0;
        }
        pause_ms(200);
    }
    fprintf(stderr, "keel-rolling-pub: cannot create stream %s\n", o->stream);
    return -1;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a;
    long long y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

struct result {
    int sent;
    int acked;
    int failed;
    int retried; /* publishes that needed more than one attempt */
    int attempts;
    int lost;
    uint64_t *seq;  /* acked sequence of message i (0: not acked) */
    long long *lat; /* first attempt to ack, ms, of acked ones */
};

/* Publish message i until acked or give_up_ms passed. */
static void publish_one(const struct opts *o, jsCtx *js, int i,
                        struct result *r)
{
    char id[32];
    char data[48];
    jsPubOptions po;
    long long t0 = now_ms();
    int n = snprintf(data, sizeof data, "m-%d", i);
    snprintf(id, sizeof id, "m-%d", i);
    jsPubOptions_Init(&po);
    po.MsgId = id;
    po.MaxWait = o->wait_ms;
    char subj[300];
    snprintf(subj, sizeof subj, "%s.x", o->stream);
    for (int attempt = 0;; attempt++) {
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        r->attempts++;
        natsStatus s = js_Publish(&pa, js, subj, data, n, &po, &jerr);
        if (s == NATS_OK) {
            r->seq[i] = pa->Sequence;
            r->lat[r->acked++] = now_ms() - t0;
            r->retried += attempt > 0;
            jsPubAck_Destroy(pa);
            return;
        }
        if (now_ms() - t0 >= o->give_up_ms) {
            fprintf(stderr,
                    "keel-rolling-pub: m-%d failed after %d attempts: "
                    "%s (%d)\n",
                    i, attempt + 1, natsStatus_GetText(s), (int)jerr);
            r->failed++;
            return;
        }
        pause_ms(20);
    }
}

/* Every acked message at its acked sequence, with its payload (a read
 * that times out is retried: the cluster settles after the restarts). */
static void verify(const struct opts *o, jsCtx *js, struct result *r)
{
    for (int i = 0; i < r->sent; i++) {
        char want[48];
        natsMsg *m = NULL;
        natsStatus s = NATS_ERR;
        if (r->seq[i] == 0) {
            continue;
        }
        int n = snprintf(want, sizeof want, "m-%d", i);
        for (int t = 0; t < 20 && s != NATS_OK && s != NATS_NOT_FOUND; t++) {
            jsErrCode jerr = 0;
            s = js_GetMsg(&m, js, o->stream, r->seq[i], NULL, &jerr);
            if (s != NATS_OK && jerr == JSNoMessageFoundErr) {
                s = NATS_NOT_FOUND;
            }
        }
        if (s != NATS_OK || natsMsg_GetDataLength(m) != n ||
            memcmp(natsMsg_GetData(m), want, (size_t)n) != 0) {
            fprintf(stderr, "keel-rolling-pub: acked %s not at seq %llu (%s)\n",
                    want, (unsigned long long)r->seq[i],
                    s == NATS_OK ? "other data" : natsStatus_GetText(s));
            r->lost++;
        }
        natsMsg_Destroy(m);
    }
}

int main(int argc, char **argv)
{
    struct opts o;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    struct result r = {0};
    if (parse(&o, argc, argv) != 0) {
        return 2;
    }
    r.seq = calloc((size_t)o.max, sizeof *r.seq);
    r.lat = calloc((size_t)o.max, sizeof *r.lat);
    if (r.seq == NULL || r.lat == NULL || connect_all(&o, &nc, &js) != 0 ||
        ensure_stream(&o, js) != 0) {
        fprintf(stderr, "keel-rolling-pub: cannot start\n");
        return 1;
    }
    int gap_ms = 1000 / o.rate;
    while (r.sent < o.max && access(o.stop_file, F_OK) != 0) {
        publish_one(&o, js, r.sent++, &r);
        if (gap_ms > 0) {
            pause_ms(gap_ms);
        }
    }
    verify(&o, js, &r);
    qsort(r.lat, (size_t)r.acked, sizeof *r.lat, cmp_ll);
    long long p50 = r.acked > 0 ? r.lat[r.acked / 2] : 0;
    long long p99 = r.acked > 0 ? r.lat[(r.acked * 99) / 100] : 0;
    long long mx = r.acked > 0 ? r.lat[r.acked - 1] : 0;
    printf("{\"sent\":%d,\"acked\":%d,\"failed\":%d,\"retried\":%d,"
           "\"attempts\":%d,\"lost\":%d,\"p50_ms\":%lld,\"p99_ms\":%lld,"
           "\"max_ms\":%lld}\n",
           r.sent, r.acked, r.failed, r.retried, r.attempts, r.lost, p50, p99,
           mx);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(r.seq);
    free(r.lat);
    nats_Close();
    return r.failed == 0 && r.lost == 0 ? 0 : 1;
}
