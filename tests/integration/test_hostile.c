/* Hostile input against a live 3-node cluster under load: while one thread
 * publishes to an R1 stream (counting acks) and core messages cross the
 * cluster, seeded random and malformed bytes go to every node's client,
 * cluster and monitoring ports. Clustered JetStream needs every node's
 * fixed address in every seed list (the netns tests), so the stream lives
 * on a fourth, standalone node, attacked the same way. Afterwards every node is
 * alive and answers /healthz, every acked message reads back, and the workload
 * kept going. The seed is printed (KEEL_HOSTILE_SEED reproduces a run).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define NODES 3
#define HOSTILE_CONNS 3000 /* connections opened by the attacker */
#define HOSTILE_BYTES 4096 /* at most this many bytes per connection */
#define PUBS_MAX 200000    /* bound of the publisher loop */
#define RECV_MS 5000

struct fixture {
    struct h_cluster c;
    struct h_keeld solo; /* standalone JetStream node holding the stream */
    natsConnection *nc_js, *nc_pub, *nc_sub;
    jsCtx *js;
    natsSubscription *sub;
    pthread_t pub_thread;
    bool pub_started;
    atomic_bool stop;
    atomic_ulong acked;   /* stream publishes acked */
    atomic_ulong pub_err; /* publishes that failed (not acked) */
    uint64_t rng;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || h_cluster_start(&f->c, NODES, "hostile") != 0 ||
        h_keeld_init(&f->solo) != 0 ||
        h_keeld_start(&f->solo, 0, true, NULL) != 0) {
        return -1;
    }
    const char *s = getenv("KEEL_HOSTILE_SEED");
    f->rng = s != NULL ? strtoull(s, NULL, 10) : (uint64_t)h_now_ms();
    f->rng |= 1;
    fprintf(stderr, "hostile seed %llu (KEEL_HOSTILE_SEED reproduces it)\n",
            (unsigned long long)f->rng);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    atomic_store(&f->stop, true);
    if (f->pub_started) {
        pthread_join(f->pub_thread, NULL);
    }
    natsSubscription_Destroy(f->sub);
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc_js);
    natsConnection_Destroy(f->nc_pub);
    natsConnection_Destroy(f->nc_sub);
    int rv = h_cluster_cleanup(&f->c);
    if (f->solo.pid > 0 && h_keeld_stop(&f->solo, NULL) != 0) {
        rv = -1;
    }
    h_keeld_cleanup(&f->solo);
    free(f);
    return rv;
}

static uint64_t rnd(struct fixture *f)
{
    uint64_t x = f->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    f->rng = x;
    return x;
}

/* Publishes hostile.<n> with payload "m<n>" until stopped; counts acks. */
static void *publisher(void *arg)
{
    struct fixture *f = arg;
    char subj[64], data[64];

    for (unsigned long i = 0; i < PUBS_MAX && !atomic_load(&f->stop); i++) {
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        jsPubOptions o;
        jsPubOptions_Init(&o);
        o.MaxWait = 2000;
        snprintf(subj, sizeof subj, "hostile.%lu", i);
        int n = snprintf(data, sizeof data, "m%lu", i);
        if (js_Publish(&pa, f->js, subj, data, n, &o, &jerr) == NATS_OK) {
            atomic_fetch_add(&f->acked, 1);
        } else {
            atomic_fetch_add(&f->pub_err, 1);
        }
        jsPubAck_Destroy(pa);
    }
    return NULL;
}

/* Bytes an attacker sends to a port of kind (0 client, 1 cluster, 2
 * monitoring): pure noise, or a valid-looking start (client protocol, a
 * cluster frame header, an HTTP request) with noise after. Returns the
 * length, at most sizeof buf = 2 * HOSTILE_BYTES. */
static size_t hostile_bytes(struct fixture *f, int kind, uint8_t *buf)
{
    static const char *client[] = {
        "CONNECT {\"verbose\":true,\"pedantic\":true",
        "PUB a 99999999\r\n",
        "HPUB a 10 5\r\n",
        "SUB > 1\r\nUNSUB 1 -5\r\n",
        "PING\r\nPONG\r\n",
        "CONNECT {}\r\nPUB $JS.API.STREAM.CREATE.X _INBOX.x 7\r\n{\"na"};
    static const char *http[] = {
        "GET /varz HTTP/1.1\r\nHost: ",
        "GET /connz?limit=-1&offset=999999 HTTP/1.0",
        "POST /healthz HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n", "GET /"};
    size_t off = 0;

    if (rnd(f) % 2 == 0) {
        if (kind == 0) {
            const char *s = client[rnd(f) % 6];
            off = strlen(s);
            memcpy(buf, s, off);
        } else if (kind == 2) {
            const char *s = http[rnd(f) % 4];
            off = strlen(s);
            memcpy(buf, s, off);
        } else {
            /* A frame header: length (maybe huge), array, kind, group. */
            uint32_t len = (uint32_t)rnd(f);
            buf[0] = (uint8_t)(len >> 24);
            buf[1] = (uint8_t)(len >> 16);
            buf[2] = (uint8_t)(len >> 8);
            buf[3] = (uint8_t)len;
            buf[4] = 0x93;
            buf[5] = (uint8_t)(rnd(f) % 14);
            off = 6;
        }
    }
    size_t n = off + rnd(f) % HOSTILE_BYTES + 1;
    for (size_t i = off; i < n; i++) {
        buf[i] = (uint8_t)rnd(f);
    }
    return n;
}

static void attack(struct fixture *f)
{
    uint8_t buf[HOSTILE_BYTES * 2];

    for (int i = 0; i < HOSTILE_CONNS; i++) {
        int node = (int)(rnd(f) % (NODES + 1)); /* NODES: the solo node */
        int kind = (int)(rnd(f) % 3);
        struct h_keeld *k = node < NODES ? &f->c.k[node] : &f->solo;
        if (node == NODES && kind == 1) {
            kind = 0; /* no cluster port */
        }
        int port = kind == 0   ? k->port
                   : kind == 1 ? f->c.cluster_port[node]
                               : k->http_port;
        int fd = h_tcp_connect(port);
        if (fd < 0) {
            continue; /* a node refusing a connection is allowed */
        }
        size_t n = hostile_bytes(f, kind, buf);
        (void)send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (rnd(f) % 4 == 0) {
            (void)shutdown(fd, SHUT_WR); /* half-close mid-message */
        }
        close(fd);
    }
}

/* keeld k is alive and /healthz answers; its status code (200, or 503
 * on a cluster node whose JetStream has no meta leader: clustered
 * JetStream needs the full seed list) or -1. */
static int health(const struct h_keeld *k)
{
    char body[4096] = "";
    if (kill(k->pid, 0) != 0) {
        fprintf(stderr, "keeld %d is gone\n", (int)k->pid);
        return -1;
    }
    return h_http_get(k->http_port, "/healthz", body, sizeof body);
}

static void start_workload(struct fixture *f)
{
    jsStreamConfig sc;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"hostile.>"};

    assert_int_equal(natsConnection_ConnectTo(&f->nc_js, f->solo.url), NATS_OK);
    assert_int_equal(natsConnection_ConnectTo(&f->nc_pub, f->c.k[1].url),
                     NATS_OK);
    assert_int_equal(natsConnection_ConnectTo(&f->nc_sub, f->c.k[2].url),
                     NATS_OK);
    assert_int_equal(natsConnection_JetStream(&f->js, f->nc_js, NULL), NATS_OK);
    jsStreamConfig_Init(&sc);
    sc.Name = "HOSTILE";
    sc.Subjects = subjects;
    sc.SubjectsLen = 1;
    if (js_AddStream(&si, f->js, &sc, NULL, &jerr) != NATS_OK) {
        fail_msg("cannot create the R1 stream: jerr %d, %s", (int)jerr,
                 nats_GetLastError(NULL));
    }
    jsStreamInfo_Destroy(si);
    assert_int_equal(natsConnection_SubscribeSync(&f->sub, f->nc_sub, "core.x"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc_sub), NATS_OK);
    assert_int_equal(pthread_create(&f->pub_thread, NULL, publisher, f), 0);
    f->pub_started = true;
}

/* A core message from n2 reaches the subscriber on n3 (retrying while
 * interest propagates). */
static bool core_crosses(struct fixture *f)
{
    for (int i = 0; i < 50; i++) {
        natsMsg *m = NULL;
        assert_int_equal(natsConnection_PublishString(f->nc_pub, "core.x", "c"),
                         NATS_OK);
        assert_int_equal(natsConnection_Flush(f->nc_pub), NATS_OK);
        if (natsSubscription_NextMsg(&m, f->sub, 100) == NATS_OK) {
            natsMsg_Destroy(m);
            return true;
        }
    }
    return false;
}

static bool acked_past(void *arg)
{
    void **a = arg;
    struct fixture *f = a[0];
    return atomic_load(&f->acked) > *(unsigned long *)a[1];
}

/* Every acked message is in the stream: the count matches and sampled
 * sequences read back with their payload. */
static void assert_acked_read_back(struct fixture *f)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    unsigned long acked = atomic_load(&f->acked);

    assert_int_equal(js_GetStreamInfo(&si, f->js, "HOSTILE", NULL, &jerr),
                     NATS_OK);
    /* A publish that timed out may still have been stored: at least every
     * acked one, at most acked + failed. */
    assert_true(si->State.Msgs >= acked);
    assert_true(si->State.Msgs <= acked + atomic_load(&f->pub_err));
    jsStreamInfo_Destroy(si);
    for (int i = 0; i < 20 && acked > 0; i++) {
        uint64_t seq = rnd(f) % acked + 1;
        natsMsg *m = NULL;
        assert_int_equal(js_GetMsg(&m, f->js, "HOSTILE", seq, NULL, &jerr),
                         NATS_OK);
        assert_true(natsMsg_GetDataLength(m) > 1);
        assert_int_equal(natsMsg_GetData(m)[0], 'm');
        natsMsg_Destroy(m);
    }
}

static void
hostile_bytes_on_every_port_crash_nothing_and_lose_nothing(void **state)
{
    struct fixture *f = *state;

    start_workload(f);
    assert_true(core_crosses(f));
    unsigned long before = 0;
    void *arg[2] = {f, &before};
    assert_true(h_poll(acked_past, arg, RECV_MS));

    int before_code[NODES];
    for (int i = 0; i < NODES; i++) {
        before_code[i] = health(&f->c.k[i]);
        assert_true(before_code[i] == 200 || before_code[i] == 503);
    }
    attack(f);
    /* Every node alive and as healthy as before. */
    for (int i = 0; i < NODES; i++) {
        if (health(&f->c.k[i]) != before_code[i]) {
            fail_msg("node n%d is down or changed health after the attack",
                     i + 1);
        }
    }
    assert_int_equal(health(&f->solo), 200);
    assert_int_equal(h_cluster_wait_mesh(&f->c, RECV_MS), 0);
    /* The workload keeps going: more acks and core messages after. */
    before = atomic_load(&f->acked);
    assert_true(h_poll(acked_past, arg, RECV_MS));
    assert_true(core_crosses(f));
    atomic_store(&f->stop, true);
    pthread_join(f->pub_thread, NULL);
    f->pub_started = false;
    fprintf(stderr, "acked %lu, failed %lu\n", atomic_load(&f->acked),
            atomic_load(&f->pub_err));
    assert_acked_read_back(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            hostile_bytes_on_every_port_crash_nothing_and_lose_nothing, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
