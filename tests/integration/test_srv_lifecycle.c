/* keeld as a process: flags, exit codes, ports file, data dir lock,
 * restart with client reconnect, monitoring endpoints, config file. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define RECV_MS 5000

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

static void an_unknown_flag_exits_2_with_a_one_line_error(void **state)
{
    (void)state;
    char err[1024];
    const char *args[] = {"--no-such-flag", NULL};
    int st = h_run_keeld(args, err, sizeof err);

    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    assert_non_null(strstr(err, "--no-such-flag"));
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);
}

static void a_bad_flag_value_exits_2(void **state)
{
    (void)state;
    const char *bad_port[] = {"-p", "notaport", NULL};
    const char *bad_fsync[] = {"--fsync", "never", NULL};

    int st = h_run_keeld(bad_port, NULL, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
    st = h_run_keeld(bad_fsync, NULL, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 2);
}

static void help_and_version_exit_0(void **state)
{
    (void)state;
    char out[4096];
    const char *help[] = {"--help", NULL};
    const char *version[] = {"--version", NULL};

    int st = h_run_keeld(help, out, sizeof out);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(out, "--ports_file_dir"));
    st = h_run_keeld(version, out, sizeof out);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_non_null(strstr(out, "keeld"));
}

static void sigterm_exits_0_and_removes_the_ports_file(void **state)
{
    struct fixture *f = *state;
    int st = -1;

    assert_int_equal(h_keeld_start(&f->k, 0, true, NULL), 0);
    assert_int_equal(access(f->k.ports_file, F_OK), 0);
    assert_true(f->k.http_port > 0);
    assert_int_equal(h_keeld_stop(&f->k, &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_not_equal(access(f->k.ports_file, F_OK), 0);
}

static void a_second_keeld_on_the_same_data_dir_is_refused(void **state)
{
    struct fixture *f = *state;
    char err[2048];
    char want[128];

    assert_int_equal(h_keeld_start(&f->k, 0, false, NULL), 0);
    const char *args[] = {"-a",  "127.0.0.1",   "-p", "0",
                          "-sd", f->k.data_dir, NULL};
    int st = h_run_keeld(args, err, sizeof err);
    assert_true(WIFEXITED(st));
    assert_int_not_equal(WEXITSTATUS(st), 0);
    snprintf(want, sizeof want, "is in use by another keeld (pid %d)",
             (int)f->k.pid);
    assert_non_null(strstr(err, want));
}

struct reconn {
    natsConnection *nc;
};

static bool is_connected(void *arg)
{
    struct reconn *r = arg;
    return natsConnection_Status(r->nc) == NATS_CONN_STATUS_CONNECTED;
}

static bool is_not_connected(void *arg)
{
    return !is_connected(arg);
}

static void clients_reconnect_when_keeld_restarts_on_its_port(void **state)
{
    struct fixture *f = *state;
    natsOptions *o = NULL;
    natsConnection *pub = NULL;
    natsSubscription *s = NULL;
    natsMsg *m = NULL;
    struct reconn r = {NULL};
    char port_s[16];

    assert_int_equal(h_keeld_start(&f->k, 0, false, NULL), 0);
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetURL(o, f->k.url), NATS_OK);
    assert_int_equal(natsOptions_SetMaxReconnect(o, -1), NATS_OK);
    assert_int_equal(natsOptions_SetReconnectWait(o, 20), NATS_OK);
    assert_int_equal(natsConnection_Connect(&r.nc, o), NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&s, r.nc, "after.restart"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(r.nc), NATS_OK);

    int port = f->k.port;
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    assert_true(h_poll(is_not_connected, &r, RECV_MS));
    snprintf(port_s, sizeof port_s, "%d", port);
    assert_int_equal(h_keeld_start(&f->k, port, false, NULL), 0);
    assert_int_equal(f->k.port, port);
    assert_true(h_poll(is_connected, &r, 10000));

    /* The client re-sent its SUB; a new publisher reaches it. */
    assert_int_equal(natsConnection_Flush(r.nc), NATS_OK);
    assert_int_equal(natsConnection_ConnectTo(&pub, f->k.url), NATS_OK);
    assert_int_equal(natsConnection_PublishString(pub, "after.restart", "back"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, s, RECV_MS), NATS_OK);
    assert_int_equal(natsMsg_GetDataLength(m), 4);
    natsMsg_Destroy(m);
    natsSubscription_Destroy(s);
    natsConnection_Destroy(pub);
    natsConnection_Destroy(r.nc);
    natsOptions_Destroy(o);
}

static void monitoring_serves_healthz_and_varz(void **state)
{
    struct fixture *f = *state;
    char body[8192];
    natsConnection *nc = NULL;
    const char *name[] = {"-n", "mon-test", NULL};

    assert_int_equal(h_keeld_start(&f->k, 0, true, name), 0);
    assert_int_equal(h_http_get(f->k.http_port, "/healthz", body, sizeof body),
                     200);
    assert_non_null(strstr(body, "\"status\":\"ok\""));
    assert_int_equal(h_http_get(f->k.http_port, "/nope", body, sizeof body),
                     404);

    assert_int_equal(natsConnection_ConnectTo(&nc, f->k.url), NATS_OK);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(natsConnection_PublishString(nc, "varz.x", "abcd"),
                         NATS_OK);
    }
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    struct h_varz_wait w = {f->k.http_port, "\"in_msgs\": 3", ""};
    assert_true(h_poll(h_varz_has, &w, RECV_MS));
    const char *fields[] = {"server_id",
                            "\"server_name\": \"mon-test\"",
                            "\"version\": \"2.10.24\"",
                            "now",
                            "uptime",
                            "\"connections\": 1",
                            "total_connections",
                            "out_msgs",
                            "\"in_bytes\": 12",
                            "out_bytes",
                            "subscriptions",
                            "slow_consumers"};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        assert_non_null(strstr(w.body, fields[i]));
    }
    natsConnection_Destroy(nc);
}

static void a_config_file_sets_what_flags_do_and_flags_win(void **state)
{
    struct fixture *f = *state;
    char path[512];
    char conf[1024];
    FILE *fp;

    snprintf(path, sizeof path, "%s/keeld.conf", f->k.dir);
    snprintf(conf, sizeof conf,
             "# test config\nserver_name: from-file\nmax_payload: 2KB\n"
             "ping_interval = \"2m\"\njetstream { store_dir: \"%s/other\" }\n",
             f->k.dir);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(conf, fp);
    fclose(fp);
    const char *args[] = {"-c", path, "--max_payload", "4KB", NULL};
    natsConnection *nc = NULL;

    assert_int_equal(h_keeld_start(&f->k, 0, true, args), 0);
    assert_int_equal(natsConnection_ConnectTo(&nc, f->k.url), NATS_OK);
    assert_int_equal(natsConnection_GetMaxPayload(nc), 4096);
    struct h_varz_wait w = {f->k.http_port, "\"server_name\": \"from-file\"",
                            ""};
    assert_true(h_poll(h_varz_has, &w, RECV_MS));
    natsConnection_Destroy(nc);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(an_unknown_flag_exits_2_with_a_one_line_error),
        T(a_bad_flag_value_exits_2),
        T(help_and_version_exit_0),
        T(sigterm_exits_0_and_removes_the_ports_file),
        T(a_second_keeld_on_the_same_data_dir_is_refused),
        T(clients_reconnect_when_keeld_restarts_on_its_port),
        T(monitoring_serves_healthz_and_varz),
        T(a_config_file_sets_what_flags_do_and_flags_win),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
