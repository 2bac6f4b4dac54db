/* Lame duck mode on a 3-node cluster (seeded with the full --routes list,
 * as tools/cluster does) under a libnats publisher with retries: the node
 * that leads the R3 stream gets SIGUSR2; its client port refuses new
 * connections, its connected clients get INFO with "ldm":true, its
 * leadership moves to a peer before it exits 0, and across its exit and
 * restart no publish fails and every acked message is in the stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define NODES 3
#define WAIT_MS 30000
#define PUB_WAIT_MS 2000
#define GIVE_UP_MS 20000 /* a publish not acked this long failed */
#define PUBS_MAX 100000
#define STREAM "LDM"

struct fixture {
    struct h_keeld k[NODES];
    int cport[NODES];
    char routes[256];
    natsConnection *nc;
    jsCtx *js;
    /* the publisher thread */
    pthread_t pub;
    bool pub_started;
    volatile int stop;
    int sent;
    int acked;
    int failed;
    int retried;
    uint64_t seq[PUBS_MAX];
};

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return -1;
    }
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int start_node(struct fixture *f, int i)
{
    char name[16];
    char listen[64];
    snprintf(name, sizeof name, "n%d", i + 1);
    snprintf(listen, sizeof listen, "nats://127.0.0.1:%d", f->cport[i]);
    const char *extra[] = {"-n",       name,      "--cluster",      listen,
                           "--routes", f->routes, "--cluster_name", "ldm",
                           NULL};
    return h_keeld_start(&f->k[i], 0, true, extra);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    size_t n = 0;
    if (f == NULL) {
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        f->cport[i] = free_port();
        if (h_keeld_init(&f->k[i]) != 0 || f->cport[i] < 0) {
            return -1;
        }
        n += (size_t)snprintf(f->routes + n, sizeof f->routes - n,
                              "%snats://127.0.0.1:%d", i > 0 ? "," : "",
                              f->cport[i]);
    }
    for (int i = 0; i < NODES; i++) {
        if (start_node(f, i) != 0) {
            return -1;
        }
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    f->stop = 1;
    if (f->pub_started) {
        pthread_join(f->pub, NULL);
    }
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    for (int i = 0; i < NODES; i++) {
        h_keeld_cleanup(&f->k[i]);
    }
    free(f);
    nats_Close();
    return 0;
}

/* Retry pacing of the publisher: a bound on the attempt rate. */
static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void publish_one(struct fixture *f, int i)
{
    char id[32];
    jsPubOptions po;
    long long t0 = h_now_ms();
    int n = snprintf(id, sizeof id, "m-%d", i);
    jsPubOptions_Init(&po);
    po.MsgId = id;
    po.MaxWait = PUB_WAIT_MS;
    for (int attempt = 0;; attempt++) {
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        if (js_Publish(&pa, f->js, "ldm.x", id, n, &po, &jerr) == NATS_OK) {
            f->seq[i] = pa->Sequence;
            f->acked++;
            f->retried += attempt > 0;
            jsPubAck_Destroy(pa);
            return;
        }
        if (h_now_ms() - t0 >= GIVE_UP_MS) {
            f->failed++;
            return;
        }
        pause_ms(20);
    }
}

static void *publisher(void *arg)
{
    struct fixture *f = arg;
    while (!f->stop && f->sent < PUBS_MAX && f->failed == 0) {
        publish_one(f, f->sent++);
    }
    return NULL;
}

struct acked_wait {
    struct fixture *f;
    int want;
};

/* want acks, or a failure (the publisher stops then: checked after). */
static bool acked_past(void *arg)
{
    struct acked_wait *w = arg;
    return w->f->acked >= w->want || w->f->failed > 0;
}

static int leader_of(struct fixture *f)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    int who = -1;
    if (js_GetStreamInfo(&si, f->js, STREAM, NULL, &jerr) == NATS_OK &&
        si->Cluster != NULL && si->Cluster->Leader != NULL &&
        si->Cluster->Leader[0] == 'n') {
        who = atoi(si->Cluster->Leader + 1) - 1;
    }
    jsStreamInfo_Destroy(si);
    return who;
}

struct leader_wait {
    struct fixture *f;
    int not ; /* a leader other than this node (-1: any) */
    int got;
};

static bool has_leader(void *arg)
{
    struct leader_wait *w = arg;
    w->got = leader_of(w->f);
    return w->got >= 0 && w->got != w->not ;
}

static bool stream_created(void *arg)
{
    struct fixture *f = arg;
    const char *subjects[] = {"ldm.>"};
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = NODES;
    natsStatus s = js_AddStream(&si, f->js, &cfg, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    return s == NATS_OK;
}

static void connect_all(struct fixture *f)
{
    natsOptions *o = NULL;
    const char *urls[NODES];
    jsOptions jo;
    for (int i = 0; i < NODES; i++) {
        urls[i] = f->k[i].url;
    }
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetServers(o, urls, NODES), NATS_OK);
    assert_int_equal(natsOptions_SetMaxReconnect(o, -1), NATS_OK);
    assert_int_equal(natsOptions_SetReconnectWait(o, 50), NATS_OK);
    assert_int_equal(natsConnection_Connect(&f->nc, o), NATS_OK);
    natsOptions_Destroy(o);
    jsOptions_Init(&jo);
    jo.Wait = PUB_WAIT_MS;
    assert_int_equal(natsConnection_JetStream(&f->js, f->nc, &jo), NATS_OK);
}

/* A raw client of node i, past CONNECT: returns the socket. */
static int raw_client(struct fixture *f, int i)
{
    char buf[4096];
    int fd = h_tcp_connect(f->k[i].port);
    assert_true(fd >= 0);
    assert_int_equal(h_read_until(fd, "INFO ", buf, sizeof buf, WAIT_MS), 0);
    const char hello[] =
        "CONNECT {\"verbose\":false,\"protocol\":1}\r\nPING\r\n";
    assert_int_equal(write(fd, hello, sizeof hello - 1),
                     (ssize_t)(sizeof hello - 1));
    assert_int_equal(h_read_until(fd, "PONG", buf, sizeof buf, WAIT_MS), 0);
    return fd;
}

static void lame_duck_moves_leadership_and_no_publish_fails(void **state)
{
    struct fixture *f = *state;
    char buf[8192];
    int st = -1;

    connect_all(f);
    assert_true(h_poll(stream_created, f, WAIT_MS));
    struct leader_wait lw = {f, -1, -1};
    assert_true(h_poll(has_leader, &lw, WAIT_MS));
    int victim = lw.got;
    int raw = raw_client(f, victim);
    assert_int_equal(pthread_create(&f->pub, NULL, publisher, f), 0);
    f->pub_started = true;
    /* Some load before the lame duck, acked by the victim as leader. */
    struct acked_wait aw = {f, 50};
    assert_true(h_poll(acked_past, &aw, WAIT_MS));

    assert_int_equal(kill(f->k[victim].pid, SIGUSR2), 0);
    /* INFO ldm:true reaches the connected client ... */
    assert_int_equal(
        h_read_until(raw, "\"ldm\":true", buf, sizeof buf, WAIT_MS), 0);
    /* ... and the port refuses new clients while the node still runs. */
    assert_int_equal(waitpid(f->k[victim].pid, NULL, WNOHANG), 0);
    int fd2 = h_tcp_connect(f->k[victim].port);
    assert_true(fd2 < 0);
    close(raw);
    assert_int_equal(h_wait_pid(f->k[victim].pid, WAIT_MS, &st), 0);
    f->k[victim].pid = -1;
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* It led the stream and handed it over before it stopped. */
    assert_true(h_file_has(f->k[victim].log_path, "handing stream LDM over"));
    assert_true(
        h_file_has(f->k[victim].log_path, "every leadership handed over"));
    struct leader_wait other = {f, victim, -1};
    assert_true(h_poll(has_leader, &other, WAIT_MS));

    /* Restart it; the load goes on across the restart. */
    assert_int_equal(start_node(f, victim), 0);
    aw.want = f->acked + 100;
    assert_true(h_poll(acked_past, &aw, WAIT_MS));
    f->stop = 1;
    assert_int_equal(pthread_join(f->pub, NULL), 0);
    f->pub_started = false;
    fprintf(stderr, "ldm restart: %d sent, %d acked, %d failed, %d retried\n",
            f->sent, f->acked, f->failed, f->retried);
    assert_int_equal(f->failed, 0);
    assert_int_equal(f->acked, f->sent);
    /* Every acked message is in the stream at its sequence. */
    for (int i = 0; i < f->sent; i++) {
        char want[32];
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        int n = snprintf(want, sizeof want, "m-%d", i);
        assert_int_equal(js_GetMsg(&m, f->js, STREAM, f->seq[i], NULL, &jerr),
                         NATS_OK);
        assert_int_equal(natsMsg_GetDataLength(m), n);
        assert_memory_equal(natsMsg_GetData(m), want, (size_t)n);
        natsMsg_Destroy(m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            lame_duck_moves_leadership_and_no_publish_fails, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
