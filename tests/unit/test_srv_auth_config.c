/* Security settings in keeld's config: the authorization and tls blocks,
 * the limit keys, and the nats-server spelled flags (--user, --pass,
 * --auth, --tls*, --max_connections, ...), flags overriding the file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keel/error.h"
#include "srv_config.h"
#include "srv_confparse.h"

struct fixture {
    struct srv_config cfg;
    json_t *root;
    char path[64];
    char errmsg[KEEL_ERRMSG_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    srv_config_defaults(&f->cfg);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_config_release(&f->cfg);
    json_decref(f->root);
    if (f->path[0] != '\0') {
        unlink(f->path);
    }
    free(f);
    return 0;
}

static int apply(struct fixture *f, const char *text)
{
    json_decref(f->root);
    f->root = NULL;
    assert_int_equal(srv_confparse(text, strlen(text), &f->root, f->errmsg), 0);
    return srv_config_apply_json(&f->cfg, f->root, f->errmsg);
}

static void defaults_are_the_named_maximums_and_no_auth(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(f->cfg.max_connections, SRV_CONNS_MAX);
    assert_int_equal(f->cfg.max_subs, SRV_SUBS_PER_CONN_MAX);
    assert_int_equal(f->cfg.max_header_bytes, SRV_HEADER_BYTES_DEFAULT);
    assert_int_equal(f->cfg.auth_timeout_ms, 0);
    assert_string_equal(f->cfg.auth_token, "");
    assert_null(f->cfg.auth_users);
    assert_false(f->cfg.tls);
}

static void the_authorization_block_sets_users_token_and_timeout(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(apply(f, "authorization {\n  timeout: 0.5\n  users = [\n"
                              "    {user: a, password: pa}\n"
                              "    {user: b, password: pb}\n  ]\n}\n"),
                     0);
    assert_int_equal(f->cfg.auth_timeout_ms, 500);
    assert_int_equal(json_array_size(f->cfg.auth_users), 2);
    assert_int_equal(apply(f, "authorization { token: \"t0k\", timeout: 3 }"),
                     0);
    assert_string_equal(f->cfg.auth_token, "t0k");
    assert_int_equal(f->cfg.auth_timeout_ms, 3000);
    assert_int_equal(apply(f, "authorization { user: u, password: p }"), 0);
    assert_string_equal(f->cfg.auth_user, "u");
    assert_string_equal(f->cfg.auth_pass, "p");
}

static void bad_security_values_are_config_errors(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(apply(f, "authorization { users: \"a\" }"), KEEL_ECONFIG);
    assert_non_null(strstr(f->errmsg, "authorization"));
    assert_int_equal(apply(f, "authorization { timeout: \"soon\" }"),
                     KEEL_ECONFIG);
    assert_int_equal(apply(f, "max_connections: 0"), KEEL_ECONFIG);
    assert_int_equal(apply(f, "max_subscriptions: -1"), KEEL_ECONFIG);
    assert_int_equal(apply(f, "tls: true"), KEEL_ECONFIG);
}

static void limit_keys_set_the_limits(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(apply(f, "max_connections: 10\nmax_subscriptions: 5\n"
                              "max_header_size: 2KB\n"),
                     0);
    assert_int_equal(f->cfg.max_connections, 10);
    assert_int_equal(f->cfg.max_subs, 5);
    assert_int_equal(f->cfg.max_header_bytes, 2048);
    assert_int_equal(apply(f, "max_conn: 11\nmax_subs: 6\n"), 0);
    assert_int_equal(f->cfg.max_connections, 11);
    assert_int_equal(f->cfg.max_subs, 6);
}

static void the_tls_block_sets_files_verify_and_timeout(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(apply(f, "tls {\n  cert_file: \"/c.pem\"\n  key_file: "
                              "\"/k.pem\"\n  ca_file: \"/ca.pem\"\n"
                              "  verify: true\n  timeout: 4\n"
                              "  handshake_first: true\n}\n"),
                     0);
    assert_true(f->cfg.tls);
    assert_true(f->cfg.tls_verify);
    assert_true(f->cfg.tls_handshake_first);
    assert_string_equal(f->cfg.tls_cert, "/c.pem");
    assert_string_equal(f->cfg.tls_key, "/k.pem");
    assert_string_equal(f->cfg.tls_ca, "/ca.pem");
    assert_int_equal(f->cfg.tls_timeout_ms, 4000);
}

static void flags_spelled_like_nats_server_override_the_file(void **state)
{
    struct fixture *f = *state;
    int fd;

    snprintf(f->path, sizeof f->path, "/tmp/keel-authconf-XXXXXX");
    fd = mkstemp(f->path);
    assert_true(fd >= 0);
    const char *text = "authorization { user: file, password: fpw }\n"
                       "max_connections: 3\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    const char *argv[] = {"keeld",
                          "-c",
                          f->path,
                          "--user",
                          "flag",
                          "--pass",
                          "ppw",
                          "--tlsverify",
                          "--tlscert",
                          "c.pem",
                          "--tlskey",
                          "k.pem",
                          "--tlscacert",
                          "ca.pem",
                          "--auth_timeout",
                          "250ms",
                          "--max_connections",
                          "7"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    assert_int_equal(
        srv_config_from_args(&f->cfg, argc, (char **)argv, f->errmsg), 0);
    assert_string_equal(f->cfg.auth_user, "flag");
    assert_string_equal(f->cfg.auth_pass, "ppw");
    assert_true(f->cfg.tls);
    assert_true(f->cfg.tls_verify);
    assert_string_equal(f->cfg.tls_ca, "ca.pem");
    assert_int_equal(f->cfg.auth_timeout_ms, 250);
    assert_int_equal(f->cfg.max_connections, 7);
}

static void the_token_flag_is_auth(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"keeld", "--auth", "s3cret", "--tls"};

    assert_int_equal(srv_config_from_args(&f->cfg, 4, (char **)argv, f->errmsg),
                     0);
    assert_string_equal(f->cfg.auth_token, "s3cret");
    assert_true(f->cfg.tls);
    assert_false(f->cfg.tls_verify);
}

static void cluster_authorization_and_tls_blocks_set_link_security(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(
        apply(f, "cluster {\n  name: c\n"
                 "  authorization { user: route, password: \"s3 cret\" }\n"
                 "  tls { cert_file: n.pem, key_file: n.key, ca_file: ca.pem "
                 "}\n}\n"),
        0);
    assert_string_equal(f->cfg.cluster_user, "route");
    assert_string_equal(f->cfg.cluster_pass, "s3 cret");
    assert_string_equal(f->cfg.cluster_tls_cert, "n.pem");
    assert_string_equal(f->cfg.cluster_tls_key, "n.key");
    assert_string_equal(f->cfg.cluster_tls_ca, "ca.pem");
    /* The client tls block and users are untouched. */
    assert_false(f->cfg.tls);
    assert_string_equal(f->cfg.auth_user, "");
    assert_int_not_equal(apply(f, "cluster { authorization: route }\n"), 0);
    assert_int_not_equal(apply(f, "cluster { tls: [1] }\n"), 0);
}

static void https_port_and_https_serve_monitoring_over_tls(void **state)
{
    struct fixture *f = *state;
    const char *argv[] = {"keeld", "--https_port", "8443"};

    assert_false(f->cfg.https);
    assert_int_equal(apply(f, "https: 127.0.0.1:9443\n"), 0);
    assert_true(f->cfg.https);
    assert_int_equal(f->cfg.http_port, 9443);
    srv_config_release(&f->cfg);
    srv_config_defaults(&f->cfg);
    assert_int_equal(srv_config_from_args(&f->cfg, 3, (char **)argv, f->errmsg),
                     0);
    assert_true(f->cfg.https);
    assert_int_equal(f->cfg.http_port, 8443);
}

static void jetstream_max_streams_is_bounded(void **state)
{
    struct fixture *f = *state;

    assert_int_equal(f->cfg.js_max_streams, 0);
    assert_int_equal(apply(f, "jetstream { max_streams: 10 }\n"), 0);
    assert_int_equal(f->cfg.js_max_streams, 10);
    assert_int_not_equal(apply(f, "jetstream { max_streams: 0 }\n"), 0);
    assert_int_not_equal(apply(f, "jetstream { max_streams: 100000 }\n"), 0);
    assert_int_not_equal(apply(f, "jetstream { max_streams: many }\n"), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(defaults_are_the_named_maximums_and_no_auth),
        T(the_authorization_block_sets_users_token_and_timeout),
        T(bad_security_values_are_config_errors),
        T(limit_keys_set_the_limits),
        T(the_tls_block_sets_files_verify_and_timeout),
        T(flags_spelled_like_nats_server_override_the_file),
        T(cluster_authorization_and_tls_blocks_set_link_security),
        T(https_port_and_https_serve_monitoring_over_tls),
        T(jetstream_max_streams_is_bounded),
        T(the_token_flag_is_auth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
