/* Many conns, slow consumers and stale conns against a real keeld. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define RECV_MS 5000
#define RAW_CONNS 1000
#define NATS_CONNS 4

struct fixture {
    struct h_keeld k;
    int fds[RAW_CONNS];
    int nfds;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || h_keeld_init(&f->k) != 0) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < f->nfds; i++) {
        close(f->fds[i]);
    }
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

/* The test process holds 1,000+ sockets too. */
static void raise_nofile(void)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(rl.rlim_cur >= RAW_CONNS + 100);
}

static void handshake(int fd)
{
    char buf[2048];
    const char *hello = "CONNECT {\"verbose\":false}\r\nPING\r\n";

    assert_int_equal(h_read_until(fd, "}\r\n", buf, sizeof buf, RECV_MS), 0);
    assert_memory_equal(buf, "INFO {", 6);
    assert_int_equal(write(fd, hello, strlen(hello)), (ssize_t)strlen(hello));
}

static void a_thousand_conns_handshake_and_messages_still_flow(void **state)
{
    struct fixture *f = *state;
    natsConnection *nc[NATS_CONNS];
    natsSubscription *s[NATS_CONNS];
    char buf[256];
    char want[64];

    /* keeld inherits a soft limit of 256 descriptors and must raise it
     * itself to serve 1,000 conns; the test then raises its own. */
    struct rlimit low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &low), 0);
    low.rlim_cur = 256;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, true, NULL), 0);
    raise_nofile();
    for (int i = 0; i < RAW_CONNS; i++) {
        f->fds[i] = h_tcp_connect(f->k.port);
        assert_true(f->fds[i] >= 0);
        f->nfds++;
        handshake(f->fds[i]);
    }
    for (int i = 0; i < RAW_CONNS; i++) {
        assert_int_equal(
            h_read_until(f->fds[i], "PONG\r\n", buf, sizeof buf, RECV_MS), 0);
    }
    for (int i = 0; i < NATS_CONNS; i++) {
        assert_int_equal(natsConnection_ConnectTo(&nc[i], f->k.url), NATS_OK);
        assert_int_equal(natsConnection_SubscribeSync(&s[i], nc[i], "many"),
                         NATS_OK);
        assert_int_equal(natsConnection_Flush(nc[i]), NATS_OK);
    }
    snprintf(want, sizeof want, "\"connections\": %d", RAW_CONNS + NATS_CONNS);
    struct h_varz_wait w = {f->k.http_port, want, ""};
    assert_true(h_poll(h_varz_has, &w, RECV_MS));
    assert_int_equal(natsConnection_PublishString(nc[0], "many", "all"),
                     NATS_OK);
    for (int i = 0; i < NATS_CONNS; i++) {
        natsMsg *m = NULL;
        assert_int_equal(natsSubscription_NextMsg(&m, s[i], RECV_MS), NATS_OK);
        natsMsg_Destroy(m);
        natsSubscription_Destroy(s[i]);
        natsConnection_Destroy(nc[i]);
    }
}

/* Read until `want` shows up anywhere in the stream (which may be many MB
 * of queued messages first); then expect EOF. */
static bool stream_has_then_eof(int fd, const char *want, int timeout_ms)
{
    static char buf[1 << 16];
    size_t keep = strlen(want);
    size_t have = 0;
    long long end = h_now_ms() + timeout_ms;
    bool found = false;

    while (h_now_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        ssize_t n = read(fd, buf + have, sizeof buf - have - 1);
        if (n <= 0) {
            if (!found) {
                fprintf(stderr, "stream ended (%zd) without '%s'; tail: %.*s\n",
                        n, want, (int)have, buf);
            }
            return found && n == 0;
        }
        have += (size_t)n;
        buf[have] = '\0';
        found = found || memmem(buf, have, want, keep) != NULL;
        if (have > keep) {
            memmove(buf, buf + have - keep, keep);
            have = keep;
        }
    }
    return false;
}

static void a_consumer_that_stops_reading_is_cut_off_as_slow(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--max_pending", "256KB", NULL};
    const char *sub = "SUB slow 1\r\nPING\r\n";
    natsConnection *pub = NULL;
    natsSubscription *ok = NULL;
    char buf[4096];
    static char payload[1024];

    assert_int_equal(h_keeld_start(&f->k, 0, true, args), 0);
    int fd = h_tcp_connect(f->k.port);
    assert_true(fd >= 0);
    f->fds[f->nfds++] = fd;
    handshake(fd);
    assert_int_equal(write(fd, sub, strlen(sub)), (ssize_t)strlen(sub));
    assert_int_equal(h_read_until(fd, "PONG\r\n", buf, sizeof buf, RECV_MS), 0);

    assert_int_equal(natsConnection_ConnectTo(&pub, f->k.url), NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&ok, pub, "fine"), NATS_OK);
    struct h_varz_wait w = {f->k.http_port, "\"slow_consumers\": 1", ""};
    /* Publish until keeld reports the slow consumer (bounded). */
    for (int round = 0; round < 200 && !h_varz_has(&w); round++) {
        for (int i = 0; i < 256; i++) {
            assert_int_equal(
                natsConnection_Publish(pub, "slow", payload, sizeof payload),
                NATS_OK);
        }
        assert_int_equal(natsConnection_Flush(pub), NATS_OK);
    }
    assert_non_null(strstr(w.body, "\"slow_consumers\": 1"));
    assert_true(stream_has_then_eof(fd, "-ERR 'Slow Consumer'\r\n", 10000));
    /* The publisher itself was not cut off. */
    assert_int_equal(natsConnection_PublishString(pub, "fine", "yes"), NATS_OK);
    natsMsg *m = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, ok, RECV_MS), NATS_OK);
    natsMsg_Destroy(m);
    natsSubscription_Destroy(ok);
    natsConnection_Destroy(pub);
}

#define BURST_MSGS 20000
#define BURST_SUBS 2

static void
a_fast_publisher_is_slowed_down_not_its_consumers_cut_off(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--max_pending", "1MB", NULL};
    natsConnection *pub = NULL;
    natsConnection *nc[BURST_SUBS];
    natsSubscription *s[BURST_SUBS];
    static char payload[1024];

    assert_int_equal(h_keeld_start(&f->k, 0, true, args), 0);
    for (int i = 0; i < BURST_SUBS; i++) {
        assert_int_equal(natsConnection_ConnectTo(&nc[i], f->k.url), NATS_OK);
        assert_int_equal(natsConnection_SubscribeSync(&s[i], nc[i], "burst"),
                         NATS_OK);
        assert_int_equal(natsSubscription_SetPendingLimits(s[i], -1, -1),
                         NATS_OK);
        assert_int_equal(natsConnection_Flush(nc[i]), NATS_OK);
    }
    assert_int_equal(natsConnection_ConnectTo(&pub, f->k.url), NATS_OK);
    /* 20 MB at once: 20 times what keeld may queue for one receiver. */
    for (int i = 0; i < BURST_MSGS; i++) {
        assert_int_equal(
            natsConnection_Publish(pub, "burst", payload, sizeof payload),
            NATS_OK);
    }
    assert_int_equal(natsConnection_FlushTimeout(pub, 30000), NATS_OK);
    for (int i = 0; i < BURST_SUBS; i++) {
        for (int m = 0; m < BURST_MSGS; m++) {
            natsMsg *msg = NULL;
            assert_int_equal(natsSubscription_NextMsg(&msg, s[i], RECV_MS),
                             NATS_OK);
            natsMsg_Destroy(msg);
        }
        natsSubscription_Destroy(s[i]);
        natsConnection_Destroy(nc[i]);
    }
    struct h_varz_wait w = {f->k.http_port, "\"slow_consumers\": 0", ""};
    assert_true(h_varz_has(&w));
    natsConnection_Destroy(pub);
}

static void a_conn_that_ignores_pings_is_closed_as_stale(void **state)
{
    struct fixture *f = *state;
    const char *args[] = {"--ping_interval", "100ms", "--ping_max", "2", NULL};
    natsConnection *nc = NULL;
    char buf[4096];

    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    int fd = h_tcp_connect(f->k.port);
    assert_true(fd >= 0);
    f->fds[f->nfds++] = fd;
    handshake(fd);
    assert_int_equal(h_read_until(fd, "-ERR 'Stale Connection'\r\n", buf,
                                  sizeof buf, RECV_MS),
                     0);
    assert_non_null(strstr(buf, "PING\r\nPING\r\n"));
    assert_int_equal(read(fd, buf, sizeof buf), 0);

    /* A client that answers PINGs stays connected across many intervals. */
    assert_int_equal(natsConnection_ConnectTo(&nc, f->k.url), NATS_OK);
    struct h_keeld *k = &f->k;
    (void)k;
    long long until = h_now_ms() + 600;
    while (h_now_ms() < until) {
        assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    }
    assert_int_equal(natsConnection_Status(nc), NATS_CONN_STATUS_CONNECTED);
    natsConnection_Destroy(nc);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(a_thousand_conns_handshake_and_messages_still_flow),
        T(a_consumer_that_stops_reading_is_cut_off_as_slow),
        T(a_fast_publisher_is_slowed_down_not_its_consumers_cut_off),
        T(a_conn_that_ignores_pings_is_closed_as_stale),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
