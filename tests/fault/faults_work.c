/* The workload of keel-faults: publishers with acks recording every
 * attempt, a concurrent pull consumer, the recovery wait and the final
 * read of the whole stream through the server (any NATS JetStream server:
 * keeld or nats-server). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "faults.h"

struct pub_arg {
    struct f_run_ctx *c;
    int who;
};

static struct pub_arg pub_args[F_PUBS_MAX];

uint64_t f_rand(struct f_run_ctx *c)
{
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Pacing after a failed attempt (the server is down): not a wait for a
 * condition, only a bound on the retry rate. */
static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

uint32_t f_slot_of(const char *value, int len)
{
    unsigned k = 0;
    unsigned n = 0;
    char buf[F_VALUE_BYTES];
    char tail;
    if (len <= 0 || len >= F_VALUE_BYTES) {
        return 0;
    }
    memcpy(buf, value, (size_t)len);
    buf[len] = '\0';
    if (sscanf(buf, "p%u-%u%c", &k, &n, &tail) != 2 || k >= F_PUBS_MAX ||
        n >= F_PER_PUB_MAX) {
        return 0;
    }
    return k * F_PER_PUB_MAX + n + 1;
}

/* A comma list of URLs as a server pool: the installed libnats (3.3)
 * takes natsOptions_SetURL's argument as one URL, so a list there never
 * connects; natsOptions_SetServers takes the list. */
static natsStatus set_servers(natsOptions *o, const char *urls)
{
    char buf[1024];
    const char *srv[F_NODES_MAX * 2];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", urls);
    for (char *save = NULL, *u = strtok_r(buf, ", ", &save);
         u != NULL && n < F_NODES_MAX * 2; u = strtok_r(NULL, ", ", &save)) {
        srv[n++] = u;
    }
    return n > 0 ? natsOptions_SetServers(o, srv, n) : NATS_INVALID_ARG;
}

static int connect_to(const char *urls, bool reconnect, natsConnection **nc,
                      jsCtx **js)
{
    natsOptions *o = NULL;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = F_PUB_WAIT_MS;
    natsStatus s = natsOptions_Create(&o);
    s = s == NATS_OK ? set_servers(o, urls) : s;
    /* The list's order is the caller's: publisher k starts on node k. */
    s = s == NATS_OK ? natsOptions_SetNoRandomize(o, true) : s;
    /* The list names every node already: no pool changes from INFO's
     * connect_urls while links go up and down (two cluster runs of 50
     * died in libnats with "double free or corruption"). */
    s = s == NATS_OK ? natsOptions_SetIgnoreDiscoveredServers(o, true) : s;
    s = s == NATS_OK ? natsOptions_SetAllowReconnect(o, reconnect) : s;
    s = s == NATS_OK ? natsOptions_SetMaxReconnect(o, -1) : s;
    s = s == NATS_OK ? natsOptions_SetReconnectWait(o, 50) : s;
    s = s == NATS_OK ? natsOptions_SetTimeout(o, 1000) : s;
    /* Nothing buffered while disconnected: a publish either reaches the
     * server now or fails now (then it is indeterminate, never silent). */
    s = s == NATS_OK ? natsOptions_SetReconnectBufSize(o, 0) : s;
    s = s == NATS_OK ? natsConnection_Connect(nc, o) : s;
    s = s == NATS_OK ? natsConnection_JetStream(js, *nc, &jo) : s;
    natsOptions_Destroy(o);
    if (s != NATS_OK && getenv("KEEL_FAULTS_DEBUG") != NULL) {
        fprintf(stderr, "keel-faults: connect %s: %s\n", urls,
                natsStatus_GetText(s));
    }
    if (s != NATS_OK) {
        natsConnection_Destroy(*nc);
        *nc = NULL;
        return -1;
    }
    return 0;
}

int f_connect(const char *urls, natsConnection **nc)
{
    jsCtx *js = NULL;
    if (connect_to(urls, false, nc, &js) != 0) {
        return -1;
    }
    jsCtx_Destroy(js);
    return 0;
}

/* STREAM.CREATE as raw JSON: keeld's keel_fsync extension field carries
 * the policy (other servers ignore unknown fields; keel-faults leaves it
 * out for nats-server). */
int f_connect_js(const char *urls, natsConnection **nc, jsCtx **js)
{
    return connect_to(urls, true, nc, js);
}

/* One STREAM.CREATE of name with cfg (keel_fsync added on keeld). */
static int create_once(struct f_run_ctx *c, natsConnection *nc,
                       const char *name, json_t *cfg)
{
    char subj[128];
    if (!c->cfg.nats_server && c->cfg.urls == NULL) {
        json_object_set_new(cfg, "keel_fsync", json_string(c->cfg.policy));
    }
    char *body = json_dumps(cfg, JSON_COMPACT);
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    natsMsg *reply = NULL;
    natsStatus s = body == NULL
                       ? NATS_NO_MEMORY
                       : natsConnection_Request(&reply, nc, subj, body,
                                                (int)strlen(body), 2000);
    free(body);
    int rv = -1;
    if (s == NATS_OK) {
        json_t *r = json_loadb(natsMsg_GetData(reply),
                               (size_t)natsMsg_GetDataLength(reply), 0, NULL);
        rv = r != NULL && json_object_get(r, "error") == NULL ? 0 : -1;
        if (rv != 0 && r != NULL && c->cfg.verbose) {
            fprintf(stderr, "keel-faults: create: %.*s\n",
                    natsMsg_GetDataLength(reply), natsMsg_GetData(reply));
        }
        json_decref(r);
    }
    natsMsg_Destroy(reply);
    return rv;
}

/* Create name with cfg (owned) through url, retried while JetStream
 * starts. */
int f_create_named(struct f_run_ctx *c, const char *url, const char *name,
                   json_t *cfg)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    int rv = -1;
    if (cfg != NULL && connect_to(url, false, &nc, &js) == 0) {
        for (int i = 0; i < 200 && rv != 0; i++) {
            rv = create_once(c, nc, name, cfg);
            if (rv != 0) {
                pause_ms(100); /* JetStream may still be starting */
            }
        }
        jsCtx_Destroy(js);
        natsConnection_Destroy(nc);
    }
    json_decref(cfg);
    return rv;
}

int f_stream_create(struct f_run_ctx *c, const char *url)
{
    return f_create_named(c, url, F_STREAM,
                          json_pack("{s:s, s:[s], s:i, s:s}", "name", F_STREAM,
                                    "subjects", F_SUBJECT, "num_replicas",
                                    c->cfg.replicas, "storage", "file"));
}

int f_mirror_create(struct f_run_ctx *c, const char *url)
{
    /* --sources: a stream with the stream as its one source. The origin
     * deletes nothing, so its seq k lands at seq k here too and the
     * mirror's checks hold as they are
     * (docs/decisions/0035-sources-share-the-mirror-pump.md). */
    return f_create_named(
        c, url, F_MIRROR,
        json_pack("{s:s, s:i, s:s, s:o}", "name", F_MIRROR, "num_replicas",
                  c->cfg.replicas, "storage", "file",
                  c->cfg.sources ? "sources" : "mirror",
                  c->cfg.sources ? json_pack("[{s:s}]", "name", F_STREAM)
                                 : json_pack("{s:s}", "name", F_STREAM)));
}

/* Record one attempt's outcome. A JetStream error reply means the server
 * refused it (fail); anything else without an ack may have been stored. */
static void record(struct f_run_ctx *c, uint32_t slot, natsStatus s,
                   jsPubAck *pa, jsErrCode jerr)
{
    pthread_mutex_lock(&c->mu);
    struct f_attempt *a = &c->att[slot];
    if (s == NATS_OK && pa != NULL) {
        a->outcome = F_ACKED;
        a->seq = pa->Sequence;
    } else if (jerr != 0) {
        a->outcome = F_FAILED;
    } else {
        a->outcome = F_INDET;
    }
    pthread_mutex_unlock(&c->mu);
}

static long long mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* A soak spreads one publisher's F_PER_PUB_MAX values over its whole
 * duration (c->pace_us apart at most), so the workload lasts as long as the
 * faults do. Pacing, not synchronisation: nothing waits for a state. */
static void pace(struct f_run_ctx *c, uint32_t n)
{
    static __thread long long start_us;
    if (c->pace_us <= 0) {
        return;
    }
    if (n == 0) {
        start_us = mono_us();
    }
    long long due = start_us + (long long)(n + 1) * c->pace_us;
    long long now = mono_us();
    if (due > now) {
        struct timespec ts = {(time_t)((due - now) / 1000000),
                              (long)((due - now) % 1000000) * 1000L};
        nanosleep(&ts, NULL);
    }
}

static void *publisher(void *arg)
{
    struct pub_arg *p = arg;
    struct f_run_ctx *c = p->c;
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsPubOptions po;
    char v[F_VALUE_BYTES];
    char url[512];
    if (c->cfg.urls != NULL) {
        snprintf(url, sizeof url, "%s", c->cfg.urls);
    } else {
        f_urls_from(c, p->who % c->cfg.nodes, url, sizeof url);
    }
    for (int i = 0; i < 200 && connect_to(url, true, &nc, &js) != 0; i++) {
        pause_ms(50);
    }
    jsPubOptions_Init(&po);
    po.MaxWait = F_PUB_WAIT_MS;
    for (uint32_t n = 0; !c->stop_pubs && js != NULL && n < F_PER_PUB_MAX;
         n++) {
        int len = snprintf(v, sizeof v, "p%d-%06u", p->who, n);
        uint32_t slot = (uint32_t)p->who * F_PER_PUB_MAX + n;
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        pthread_mutex_lock(&c->mu);
        c->att[slot].outcome = F_PENDING;
        c->next_n[p->who] = n + 1;
        pthread_mutex_unlock(&c->mu);
        natsStatus s = js_Publish(&pa, js, F_SUBJECT, v, len, &po, &jerr);
        record(c, slot, s, pa, jerr);
        jsPubAck_Destroy(pa);
        if (s != NATS_OK) {
            pause_ms(20);
        }
        pace(c, n);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return NULL;
}

int f_pubs_start(struct f_run_ctx *c, pthread_t *th)
{
    c->stop_pubs = 0;
    for (int i = 0; i < c->cfg.pubs; i++) {
        pub_args[i] = (struct pub_arg){c, i};
        if (pthread_create(&th[i], NULL, publisher, &pub_args[i]) != 0) {
            return -1;
        }
    }
    return 0;
}

void f_pubs_stop(struct f_run_ctx *c, pthread_t *th)
{
    c->stop_pubs = 1;
    for (int i = 0; i < c->cfg.pubs; i++) {
        pthread_join(th[i], NULL);
    }
}

#define F_CONSUMER "faults-c"
#define F_NEXT "$JS.API.CONSUMER.MSG.NEXT." F_STREAM "." F_CONSUMER

/* The durable pull consumer, made through the API (an existing one with
 * the same config answers with its info). A delivery lost with the node
 * that made it (its connection died) is redelivered after ack_wait, kept
 * short so the drain after healing sees it. */
static int consumer_create(natsConnection *nc)
{
    static const char body[] =
        "{\"stream_name\":\"" F_STREAM "\",\"config\":{\"durable_name\":"
        "\"" F_CONSUMER "\",\"ack_policy\":\"explicit\",\"deliver_policy\":"
        "\"all\",\"ack_wait\":2000000000,\"filter_subject\":\"" F_SUBJECT
        "\"}}";
    natsMsg *m = NULL;
    natsStatus s = natsConnection_Request(
        &m, nc, "$JS.API.CONSUMER.DURABLE.CREATE." F_STREAM "." F_CONSUMER,
        body, (int)strlen(body), F_PUB_WAIT_MS);
    int rv = s == NATS_OK && natsMsg_GetDataLength(m) > 0 &&
                     strstr(natsMsg_GetData(m), "\"error\"") == NULL
                 ? 0
                 : -1;
    natsMsg_Destroy(m);
    return rv;
}

/* One MSG.NEXT of up to 200 messages into inbox: count each delivery and
 * ack it. A message without data is a status (no messages, timeout): the
 * batch is over. Returns -1 when the connection is gone. */
static int consume_batch(struct f_run_ctx *c, natsConnection *nc,
                         natsSubscription *sub, const char *inbox)
{
    static const char next[] = "{\"batch\":200,\"expires\":500000000}";
    if (natsConnection_PublishRequest(nc, F_NEXT, inbox, next,
                                      (int)strlen(next)) != NATS_OK) {
        return -1;
    }
    for (int i = 0; i < 200 && !c->stop_consumer; i++) {
        natsMsg *m = NULL;
        if (natsSubscription_NextMsg(&m, sub, 1000) != NATS_OK) {
            return natsConnection_IsClosed(nc) ? -1 : 0;
        }
        const char *reply = natsMsg_GetReply(m);
        if (natsMsg_GetDataLength(m) == 0 || reply == NULL) {
            natsMsg_Destroy(m);
            return 0;
        }
        uint32_t slot = f_slot_of(natsMsg_GetData(m), natsMsg_GetDataLength(m));
        pthread_mutex_lock(&c->mu);
        c->consumed++;
        if (slot == 0) {
            c->consumer_alien++;
        } else {
            c->consumer_seen[slot - 1] = 1;
        }
        pthread_mutex_unlock(&c->mu);
        (void)natsConnection_PublishString(nc, reply, "+ACK");
        natsMsg_Destroy(m);
    }
    return 0;
}

/* A durable pull consumer reading while the nemesis runs, through the
 * plain JetStream API (libnats' js_PullSubscribe is not used: the test
 * process died twice inside libnats during cluster runs); it reconnects
 * and re-creates as often as needed (bounded by the stop flag). */
static void *consumer(void *arg)
{
    struct f_run_ctx *c = arg;
    char url[512];
    char inbox[128];
    if (c->cfg.urls != NULL) {
        snprintf(url, sizeof url, "%s", c->cfg.urls);
    } else {
        /* The last node first: publishers start on the first ones. */
        f_urls_from(c, c->cfg.nodes - 1, url, sizeof url);
    }
    while (!c->stop_consumer) {
        natsConnection *nc = NULL;
        natsSubscription *sub = NULL;
        natsInbox *ib = NULL;
        if (f_connect(url, &nc) == 0 && consumer_create(nc) == 0 &&
            natsInbox_Create(&ib) == NATS_OK &&
            snprintf(inbox, sizeof inbox, "%s", (const char *)ib) > 0 &&
            natsConnection_SubscribeSync(&sub, nc, inbox) == NATS_OK) {
            while (!c->stop_consumer && consume_batch(c, nc, sub, inbox) == 0) {
            }
        } else {
            pause_ms(100);
        }
        /* The connection first: its close joins the read loop, which may
         * still be delivering the rest of a batch to sub. libnats 3.4
         * looks the subscription up and then locks it without holding a
         * reference (fixed upstream in 3.6.1, nats.c #637), so a
         * subscription destroyed under a live read loop was used after
         * free: the rare "double free or corruption" abort of keel-faults
         * (docs/faults.md). A closed subscription is freed without UNSUB. */
        natsConnection_Destroy(nc);
        natsSubscription_Destroy(sub);
        natsInbox_Destroy(ib);
    }
    return NULL;
}

int f_consumer_start(struct f_run_ctx *c, pthread_t *th)
{
    c->stop_consumer = 0;
    return pthread_create(th, NULL, consumer, c) == 0 ? 0 : -1;
}

void f_consumer_stop(struct f_run_ctx *c, pthread_t th)
{
    c->stop_consumer = 1;
    pthread_join(th, NULL);
}

/* Acked values the consumer has not delivered yet. */
static uint64_t consumer_behind(struct f_run_ctx *c)
{
    uint64_t n = 0;
    pthread_mutex_lock(&c->mu);
    for (uint32_t s = 0; s < F_SEQS_MAX; s++) {
        n += c->att[s].outcome == F_ACKED && !c->consumer_seen[s] &&
             !c->destroyed[s];
    }
    pthread_mutex_unlock(&c->mu);
    return n;
}

long long f_consumer_drain(struct f_run_ctx *c)
{
    long long t0 = h_now_ms();
    long long moved = t0;
    uint64_t seen = 0;
    while (consumer_behind(c) > 0) {
        long long now = h_now_ms();
        pthread_mutex_lock(&c->mu);
        if (c->consumed != seen) {
            seen = c->consumed;
            moved = now;
        }
        pthread_mutex_unlock(&c->mu);
        /* Values a damaged replica cannot serve are never delivered: the
         * checker counts only those the final read serves. */
        if (now - t0 >= F_DRAIN_MS_MAX || now - moved >= F_DRAIN_IDLE_MS) {
            return -1;
        }
        pause_ms(100); /* poll pacing: the consumer thread does the work */
    }
    return h_now_ms() - t0;
}

/* After healing: milliseconds until a publish is acked again (-1: not
 * within F_RECOVERY_MS_MAX). The probe value is one slot of the last
 * publisher's range past anything it sent, recorded like any attempt. */
long long f_wait_recovery(struct f_run_ctx *c, const char *urls)
{
    long long t0 = h_now_ms();
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 1000;
    int who = c->cfg.pubs - 1;
    while (h_now_ms() - t0 < F_RECOVERY_MS_MAX) {
        if (js == NULL && connect_to(urls, true, &nc, &js) != 0) {
            pause_ms(50);
            continue;
        }
        uint32_t n = c->next_n[who]++;
        char v[F_VALUE_BYTES];
        int len = snprintf(v, sizeof v, "p%d-%06u", who, n);
        uint32_t slot = (uint32_t)who * F_PER_PUB_MAX + n;
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        c->att[slot].outcome = F_PENDING;
        natsStatus s = js_Publish(&pa, js, F_SUBJECT, v, len, &po, &jerr);
        record(c, slot, s, pa, jerr);
        jsPubAck_Destroy(pa);
        if (s == NATS_OK) {
            break;
        }
        pause_ms(50);
    }
    long long ms = h_now_ms() - t0;
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return ms < F_RECOVERY_MS_MAX ? ms : -1;
}

static int view_put(struct f_view *v, uint64_t pos, uint32_t slot)
{
    if (pos >= F_SEQS_MAX + 1024) {
        return -1;
    }
    if (v->slot_at == NULL) {
        v->slot_at = calloc(F_SEQS_MAX + 1024, sizeof *v->slot_at);
        if (v->slot_at == NULL) {
            return -1;
        }
    }
    v->slot_at[pos] = slot;
    v->n = pos + 1 > v->n ? pos + 1 : v->n;
    return 0;
}

/* Read every sequence of the stream through the server. */
int f_read_stream(struct f_run_ctx *c, const char *urls, struct f_view *v)
{
    return f_read_named(c, urls, F_STREAM, v);
}

int f_read_named(struct f_run_ctx *c, const char *urls, const char *stream,
                 struct f_view *v)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    (void)c;
    if (connect_to(urls, true, &nc, &js) != 0 ||
        js_GetStreamInfo(&si, js, stream, NULL, &jerr) != NATS_OK) {
        natsConnection_Destroy(nc);
        return -1;
    }
    uint64_t first = si->State.FirstSeq;
    uint64_t last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    long long t0 = h_now_ms();
    long long bound = F_READ_MS_MAX;
    if (last >= first && first > 0) {
        bound += (long long)((last - first + 1) * F_READ_US_PER_SEQ / 1000);
    }
    (void)view_put(v, 0, 0);
    for (uint64_t seq = first; seq <= last && seq > 0; seq++) {
        natsMsg *m = NULL;
        if (h_now_ms() - t0 > bound) {
            v->cut = true; /* the row says so: not a loss by itself */
            break;
        }
        if (js_GetMsg(&m, js, stream, seq, NULL, &jerr) != NATS_OK) {
            v->bad++;
            continue;
        }
        uint32_t slot = f_slot_of(natsMsg_GetData(m), natsMsg_GetDataLength(m));
        v->alien += slot == 0;
        (void)view_put(v, seq, slot);
        natsMsg_Destroy(m);
    }
    /* The read's rate (finding F25: a read of 79 a second ran into its
     * bound while a leader buried a follower). */
    long long ms = h_now_ms() - t0;
    printf(
        "keel-faults: read %s seqs %llu..%llu in %lld ms (%lld a second)%s\n",
        stream, (unsigned long long)first, (unsigned long long)last, ms,
        last >= first && first > 0 && ms > 0
            ? (long long)((last - first + 1) * 1000 / (uint64_t)ms)
            : 0,
        v->cut ? ", cut" : "");
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    return 0;
}
