/* keeld start-up and shutdown under stop signals: SIGTERM or SIGINT at
 * any moment (while the store opens, while streams replay, while
 * JetStream elects, after it listens, during the shutdown itself) ends
 * keeld within a bound with exit status 0; and JetStream answers from the
 * first connection the client port accepts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* A stop must end keeld this soon, start-up replay included. */
#define STOP_BOUND_MS 10000
#define DELAY_STEP_MS 15
#define DELAY_MAX_MS 300
#define REPLAY_STREAMS 100
#define REPLAY_MSGS 20
#define FIRST_CONN_RUNS 5
#define REQUEST_MS 1000 /* well under the 3 s a parked request waits */

struct fixture {
    struct h_keeld k;
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
    h_keeld_cleanup(&f->k);
    free(f);
    return 0;
}

/* The moment of the signal is what the test varies: this wait is its
 * parameter, not a stand-in for a condition. */
static void wait_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void print_log_tail(const struct h_keeld *k)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "tail -n 30 '%s' >&2", k->log_path);
    if (system(cmd) != 0) {
        fprintf(stderr, "(no log)\n");
    }
}

/* Spawn keeld, send sig after delay_ms (and second after that when not
 * 0), and expect a clean exit within STOP_BOUND_MS. */
static void expect_clean_stop(struct h_keeld *k, int delay_ms, int sig,
                              int second)
{
    int st = -1;
    /* Each run appends to the log: start it afresh. */
    unlink(k->log_path);
    assert_int_equal(h_keeld_spawn(k, 0, true, NULL), 0);
    wait_ms(delay_ms);
    assert_int_equal(kill(k->pid, sig), 0);
    if (second != 0) {
        wait_ms(1);
        (void)kill(k->pid, second);
    }
    int rv = h_wait_pid(k->pid, STOP_BOUND_MS, &st);
    if (rv != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        !h_file_has(k->log_path, "keeld stopped")) {
        fprintf(stderr, "signal %d after %d ms: %s (status 0x%x)\n", sig,
                delay_ms, rv != 0 ? "still running" : "unclean exit", st);
        print_log_tail(k);
        if (rv != 0) {
            kill(k->pid, SIGKILL);
            (void)h_wait_pid(k->pid, STOP_BOUND_MS, NULL);
        }
        k->pid = -1;
        fail();
    }
    k->pid = -1;
}

static void sweep(struct h_keeld *k, int second)
{
    for (int d = 0; d <= DELAY_MAX_MS; d += DELAY_STEP_MS) {
        int sig = (d / DELAY_STEP_MS) % 2 == 0 ? SIGTERM : SIGINT;
        expect_clean_stop(k, d, sig, second);
    }
}

static void a_stop_signal_at_any_moment_of_start_up_exits_0(void **state)
{
    struct fixture *f = *state;
    sweep(&f->k, 0);
}

static void a_second_signal_during_shutdown_still_exits_0(void **state)
{
    struct fixture *f = *state;
    sweep(&f->k, SIGTERM);
    /* And once fully started, with a client connected. */
    natsConnection *nc = NULL;
    int st = -1;
    assert_int_equal(h_keeld_start(&f->k, 0, false, NULL), 0);
    assert_int_equal(natsConnection_ConnectTo(&nc, f->k.url), NATS_OK);
    assert_int_equal(kill(f->k.pid, SIGTERM), 0);
    assert_int_equal(kill(f->k.pid, SIGINT), 0);
    assert_int_equal(h_wait_pid(f->k.pid, STOP_BOUND_MS, &st), 0);
    f->k.pid = -1;
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    natsConnection_Destroy(nc);
}

/* REPLAY_STREAMS streams of REPLAY_MSGS messages each, then a stop: the
 * next start replays them all. */
static void fill_streams(struct h_keeld *k)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(h_keeld_start(k, 0, false, NULL), 0);
    assert_int_equal(natsConnection_ConnectTo(&nc, k->url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    for (int i = 0; i < REPLAY_STREAMS; i++) {
        char name[32];
        char subj[32];
        const char *subjects[] = {subj};
        jsStreamConfig cfg;
        jsStreamConfig_Init(&cfg);
        snprintf(name, sizeof name, "R%d", i);
        snprintf(subj, sizeof subj, "r.%d", i);
        cfg.Name = name;
        cfg.Subjects = subjects;
        cfg.SubjectsLen = 1;
        assert_int_equal(js_AddStream(NULL, js, &cfg, NULL, &jerr), NATS_OK);
        for (int m = 0; m < REPLAY_MSGS; m++) {
            assert_int_equal(
                js_Publish(NULL, js, subj, "payload", 7, NULL, &jerr), NATS_OK);
        }
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(h_keeld_stop(k, NULL), 0);
}

static void a_stop_signal_while_streams_replay_exits_0(void **state)
{
    struct fixture *f = *state;
    fill_streams(&f->k);
    sweep(&f->k, 0);
    /* Every stream is still there after all those stops. */
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(h_keeld_start(&f->k, 0, false, NULL), 0);
    assert_int_equal(natsConnection_ConnectTo(&nc, f->k.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    for (int i = 0; i < REPLAY_STREAMS; i++) {
        char name[32];
        snprintf(name, sizeof name, "R%d", i);
        assert_int_equal(js_GetStreamInfo(&si, js, name, NULL, &jerr), NATS_OK);
        assert_int_equal(si->State.Msgs, REPLAY_MSGS);
        jsStreamInfo_Destroy(si);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* A port no process listens on now (bound, read back, closed). */
static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

struct first_conn {
    struct h_keeld *k;
    char url[64];
    natsConnection *nc;
};

/* Connect the moment the port accepts, as a CI script or a TCP health
 * check does; stop polling if keeld exited. */
static bool connected(void *arg)
{
    struct first_conn *fc = arg;
    if (waitpid(fc->k->pid, NULL, WNOHANG) == fc->k->pid) {
        fc->k->pid = -1;
        return true;
    }
    return natsConnection_ConnectTo(&fc->nc, fc->url) == NATS_OK;
}

static void
jetstream_answers_the_first_connection_the_port_accepts(void **state)
{
    struct fixture *f = *state;
    fill_streams(&f->k); /* a start with something to replay */
    for (int run = 0; run < FIRST_CONN_RUNS; run++) {
        natsMsg *m = NULL;
        int port = free_port();
        struct first_conn fc = {&f->k, "", NULL};
        snprintf(fc.url, sizeof fc.url, "nats://127.0.0.1:%d", port);
        assert_int_equal(h_keeld_spawn(&f->k, port, false, NULL), 0);
        assert_true(h_poll(connected, &fc, H_START_TIMEOUT_MS));
        assert_true(f->k.pid > 0);
        natsStatus s = natsConnection_RequestString(&m, fc.nc, "$JS.API.INFO",
                                                    "", REQUEST_MS);
        if (s != NATS_OK) {
            fprintf(stderr, "run %d: $JS.API.INFO on the first conn: %s\n", run,
                    natsStatus_GetText(s));
        }
        assert_int_equal(s, NATS_OK);
        assert_non_null(strstr(natsMsg_GetData(m), "account_info_response"));
        assert_null(strstr(natsMsg_GetData(m), "\"error\""));
        natsMsg_Destroy(m);
        natsConnection_Destroy(fc.nc);
        assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    }
}

/* One node of a three-node cluster whose seeds never come: no meta leader
 * can exist. Requests get the JSON 503 at once, never silence, and
 * /healthz says 503 except for js-enabled-only. */
static void a_node_without_a_meta_leader_answers_not_ready(void **state)
{
    struct fixture *f = *state;
    char routes[128];
    char body[4096];
    natsConnection *nc = NULL;
    natsMsg *m = NULL;
    snprintf(routes, sizeof routes, "nats://127.0.0.1:%d,nats://127.0.0.1:%d",
             free_port(), free_port());
    const char *extra[] = {"-n",
                           "n1",
                           "--cluster",
                           "nats://127.0.0.1:0",
                           "--cluster_name",
                           "c",
                           "--routes",
                           routes,
                           NULL};
    assert_int_equal(h_keeld_start(&f->k, 0, true, extra), 0);
    assert_int_equal(natsConnection_ConnectTo(&nc, f->k.url), NATS_OK);
    const char *subjects[] = {"$JS.API.INFO", "$JS.API.STREAM.NAMES",
                              "$JS.API.STREAM.INFO.X"};
    for (size_t i = 0; i < sizeof subjects / sizeof subjects[0]; i++) {
        assert_int_equal(
            natsConnection_RequestString(&m, nc, subjects[i], "", REQUEST_MS),
            NATS_OK);
        const char *d = natsMsg_GetData(m);
        assert_non_null(strstr(d, "\"code\":503"));
        assert_non_null(strstr(d, "\"err_code\":10008"));
        assert_non_null(strstr(d, "JetStream is not ready yet"));
        natsMsg_Destroy(m);
    }
    assert_int_equal(h_http_get(f->k.http_port, "/healthz", body, sizeof body),
                     503);
    assert_non_null(strstr(body, "meta leader"));
    assert_int_equal(h_http_get(f->k.http_port, "/healthz?js-server-only=true",
                                body, sizeof body),
                     503);
    assert_int_equal(h_http_get(f->k.http_port, "/healthz?js-enabled-only=true",
                                body, sizeof body),
                     200);
    natsConnection_Destroy(nc);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(a_stop_signal_at_any_moment_of_start_up_exits_0),
        T(a_second_signal_during_shutdown_still_exits_0),
        T(a_stop_signal_while_streams_replay_exits_0),
        T(jetstream_answers_the_first_connection_the_port_accepts),
        T(a_node_without_a_meta_leader_answers_not_ready),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
