/* Cluster-link authentication: the route secret's proofs (pure), and
 * links between in-process nodes on one libuv loop (transport only) with
 * a shared secret, a wrong one, none, and mutual TLS with certificates
 * made at run time by the openssl tool (no key is committed). */
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
#include "srv_auth_route.h"
#include "srv_cluster.h"

#define NODES 3
#define WAIT_MS 10000

struct node_sec {
    const char *user, *pass, *routes_creds;
    const char *cert, *key, *ca; /* file names in f->certs */
};

struct fixture {
    uv_loop_t loop;
    struct srv_cluster cl[NODES];
    bool started[NODES];
    char url[NODES][300];
    char certs[128]; /* temp dir for run-time certificates */
    unsigned got_count;
    char got_from[64];
    struct srv_route_secret s1, s2;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || uv_loop_init(&f->loop) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < NODES; i++) {
        if (f->started[i]) {
            srv_cluster_stop(&f->cl[i]);
        }
    }
    uv_run(&f->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < NODES; i++) {
        if (f->started[i]) {
            srv_cluster_close(&f->cl[i]);
        }
    }
    srv_route_secret_close(&f->s1);
    srv_route_secret_close(&f->s2);
    if (f->certs[0] != '\0') {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->certs);
        assert_int_equal(system(cmd), 0);
    }
    assert_int_equal(uv_loop_close(&f->loop), 0);
    free(f);
    return 0;
}

static void cert_path(struct fixture *f, const char *name, const char *ext,
                      char *out, size_t len)
{
    snprintf(out, len, "%s/%s.%s", f->certs, name, ext);
}

/* Start node i (name n<i+1>) with security sec (NULL: none); routes is
 * a seed URL or "". Returns srv_cluster_start's result. */
static int start_node(struct fixture *f, int i, const char *routes,
                      const struct node_sec *sec)
{
    char name[16], id[16], cert[256] = "", key[256] = "", ca[256] = "";
    char errmsg[KEEL_ERRMSG_MAX] = "";

    snprintf(name, sizeof name, "n%d", i + 1);
    snprintf(id, sizeof id, "ID%d", i + 1);
    if (sec != NULL && sec->cert != NULL) {
        cert_path(f, sec->cert, "pem", cert, sizeof cert);
        cert_path(f, sec->key, "key", key, sizeof key);
        cert_path(f, sec->ca, "pem", ca, sizeof ca);
    }
    struct srv_cluster_settings s = {
        .listen = "nats://127.0.0.1:0",
        .name = "c1",
        .routes = routes,
        .node_name = name,
        .node_id = id,
        .client_url = "127.0.0.1:4222",
        .auth_user = sec != NULL ? sec->user : NULL,
        .auth_pass = sec != NULL ? sec->pass : NULL,
        .tls_cert = cert,
        .tls_key = key,
        .tls_ca = ca,
    };
    int rv = srv_cluster_start(&f->cl[i], &f->loop, NULL, &s, errmsg);
    f->started[i] = true; /* closable after a failed start too */
    if (rv == 0) {
        char url[sizeof f->cl[i].url];
        memcpy(url, f->cl[i].url, sizeof url);
        snprintf(f->url[i], sizeof f->url[i], "nats://%s", url);
    }
    return rv;
}

static size_t npeers(struct fixture *f, int i)
{
    const char *names[SRV_CLUSTER_LINKS_MAX];
    return srv_cluster_peers(&f->cl[i], names, SRV_CLUSTER_LINKS_MAX);
}

static bool run_until(struct fixture *f, bool (*cond)(struct fixture *))
{
    uint64_t end = uv_now(&f->loop) + WAIT_MS;
    while (!cond(f)) {
        if (uv_now(&f->loop) > end) {
            return false;
        }
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    return true;
}

static bool mesh2(struct fixture *f)
{
    return npeers(f, 0) == 1 && npeers(f, 1) == 1;
}

static void group_cb(void *arg, const char *from, const uint8_t *data,
                     size_t len)
{
    struct fixture *f = arg;
    (void)data;
    (void)len;
    snprintf(f->got_from, sizeof f->got_from, "%s", from);
    f->got_count++;
}

static bool got_one(struct fixture *f)
{
    return f->got_count >= 1;
}

/* Watch both nodes for a second of redials: neither ever has a link.
 * (Without the checks under test they link within milliseconds.) */
static void assert_never_linked(struct fixture *f)
{
    uint64_t end = uv_now(&f->loop) + 1000;
    while (uv_now(&f->loop) < end) {
        uv_run(&f->loop, UV_RUN_ONCE);
        assert_int_equal(npeers(f, 0), 0);
        assert_int_equal(npeers(f, 1), 0);
    }
}

static uint8_t n_a[SRV_ROUTE_NONCE_BYTES] = {1};
static uint8_t n_b[SRV_ROUTE_NONCE_BYTES] = {2};

static void a_proof_binds_secret_nonces_direction_and_names(void **state)
{
    struct fixture *f = *state;
    uint8_t p[SRV_ROUTE_PROOF_BYTES], q[SRV_ROUTE_PROOF_BYTES];
    char hex[SRV_ROUTE_HEX_BYTES];

    assert_int_equal(srv_route_secret_init(&f->s1, "route", "s3cret"), 0);
    assert_int_equal(srv_route_secret_init(&f->s2, "route", "s3creT"), 0);
    srv_route_proof(&f->s1, n_a, n_b, "n1", "n2", "c1", p);
    srv_route_hex(p, sizeof p, hex);
    assert_true(srv_route_proof_ok(p, hex));
    /* Another secret, the reverse direction, swapped nonces, other
     * names or cluster: each gives a different proof. */
    srv_route_proof(&f->s2, n_a, n_b, "n1", "n2", "c1", q);
    assert_false(srv_route_proof_ok(q, hex));
    srv_route_proof(&f->s1, n_b, n_a, "n2", "n1", "c1", q);
    assert_false(srv_route_proof_ok(q, hex));
    srv_route_proof(&f->s1, n_b, n_a, "n1", "n2", "c1", q);
    assert_false(srv_route_proof_ok(q, hex));
    srv_route_proof(&f->s1, n_a, n_b, "n1", "n3", "c1", q);
    assert_false(srv_route_proof_ok(q, hex));
    srv_route_proof(&f->s1, n_a, n_b, "n1", "n2", "c2", q);
    assert_false(srv_route_proof_ok(q, hex));
    /* Names are delimited: "n1"+"n2" is not "n1n"+"2". */
    srv_route_proof(&f->s1, n_a, n_b, "n1n", "2", "c1", q);
    assert_false(srv_route_proof_ok(q, hex));
}

static void malformed_proof_text_is_refused(void **state)
{
    (void)state;
    uint8_t p[SRV_ROUTE_PROOF_BYTES] = {0};
    char hex[SRV_ROUTE_HEX_BYTES];

    srv_route_hex(p, sizeof p, hex);
    assert_true(srv_route_proof_ok(p, hex));
    assert_false(srv_route_proof_ok(p, NULL));
    assert_false(srv_route_proof_ok(p, ""));
    hex[5] = 'g';
    assert_false(srv_route_proof_ok(p, hex));
    hex[5] = '0';
    hex[63] = '\0'; /* one digit short */
    assert_false(srv_route_proof_ok(p, hex));
}

static void route_url_credentials_are_split_out(void **state)
{
    (void)state;
    char u[64], p[64];

    assert_true(srv_route_url_creds("nats://ru:rp@10.0.0.1:6222", u, p, 64));
    assert_string_equal(u, "ru");
    assert_string_equal(p, "rp");
    assert_true(srv_route_url_creds("ru:r:p@10.0.0.1:6222", u, p, 64));
    assert_string_equal(u, "ru");
    assert_string_equal(p, "r:p");
    assert_false(srv_route_url_creds("nats://10.0.0.1:6222", u, p, 64));
    assert_false(srv_route_url_creds("nats://@10.0.0.1:6222", u, p, 64));
    assert_false(srv_route_url_creds("nats://toolongname@h:1", u, p, 4));
}

static void nodes_with_the_same_secret_link_and_carry_frames(void **state)
{
    struct fixture *f = *state;
    struct node_sec sec = {.user = "route", .pass = "s3cret"};
    uint8_t g[SRV_CLUSTER_GROUP_ID_BYTES] = {7};

    assert_int_equal(start_node(f, 0, "", &sec), 0);
    assert_int_equal(start_node(f, 1, f->url[0], &sec), 0);
    assert_int_equal(srv_cluster_register_group(&f->cl[0], g, group_cb, f), 0);
    assert_true(run_until(f, mesh2));
    assert_int_equal(srv_cluster_send(&f->cl[1], "n1", g, "x", 1), 0);
    assert_true(run_until(f, got_one));
    assert_string_equal(f->got_from, "n2");
}

static void a_node_with_a_wrong_secret_never_links(void **state)
{
    struct fixture *f = *state;
    struct node_sec good = {.user = "route", .pass = "s3cret"};
    struct node_sec bad = {.user = "route", .pass = "guess"};

    assert_int_equal(start_node(f, 0, "", &good), 0);
    assert_int_equal(start_node(f, 1, f->url[0], &bad), 0);
    assert_never_linked(f);
}

static void a_node_without_the_secret_never_links(void **state)
{
    struct fixture *f = *state;
    struct node_sec good = {.user = "route", .pass = "s3cret"};

    assert_int_equal(start_node(f, 0, "", &good), 0);
    assert_int_equal(start_node(f, 1, f->url[0], NULL), 0);
    assert_never_linked(f);
}

static void credentials_in_the_route_url_are_the_secret(void **state)
{
    struct fixture *f = *state;
    struct node_sec good = {.user = "route", .pass = "s3cret"};
    char seed[400];

    assert_int_equal(start_node(f, 0, "", &good), 0);
    snprintf(seed, sizeof seed, "nats://route:s3cret@%s", f->url[0] + 7);
    assert_int_equal(start_node(f, 1, seed, NULL), 0);
    assert_true(run_until(f, mesh2));
}

static void a_hashed_route_password_is_a_config_error(void **state)
{
    struct fixture *f = *state;
    struct node_sec sec = {.user = "route",
                           .pass = "$pbkdf2-sha256$i=1000$AAAA$BBBB"};

    assert_int_equal(start_node(f, 0, "", &sec), KEEL_ECONFIG);
}

/* ---- mutual TLS ---- */

static void sh(const char *cmd)
{
    char full[2048];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    assert_int_equal(system(full), 0);
}

static void make_ca(struct fixture *f, const char *ca)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && openssl req -x509 -newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes -keyout %s.key -out %s.pem "
             "-days 2 -subj /CN=%s",
             f->certs, ca, ca, ca);
    sh(cmd);
}

static void make_cert(struct fixture *f, const char *ca, const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && openssl req -newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes -keyout %s.key -out %s.csr "
             "-subj /CN=%s && openssl x509 -req -in %s.csr -CA %s.pem -CAkey "
             "%s.key -CAcreateserial -out %s.pem -days 2",
             f->certs, name, name, name, name, ca, ca, name);
    sh(cmd);
}

static void make_certs(struct fixture *f)
{
    snprintf(f->certs, sizeof f->certs, "/tmp/keel-route-tls-XXXXXX");
    assert_non_null(mkdtemp(f->certs));
    make_ca(f, "ca");
    make_ca(f, "evil");
    make_cert(f, "ca", "node1");
    make_cert(f, "ca", "node2");
    make_cert(f, "evil", "intruder");
}

static void nodes_with_certificates_from_the_ca_link_over_tls(void **state)
{
    struct fixture *f = *state;
    struct node_sec s1 = {.cert = "node1", .key = "node1", .ca = "ca"};
    struct node_sec s2 = {.cert = "node2", .key = "node2", .ca = "ca"};
    uint8_t g[SRV_CLUSTER_GROUP_ID_BYTES] = {7};
    uint8_t big[100000];

    make_certs(f);
    assert_int_equal(start_node(f, 0, "", &s1), 0);
    assert_int_equal(start_node(f, 1, f->url[0], &s2), 0);
    assert_int_equal(srv_cluster_register_group(&f->cl[0], g, group_cb, f), 0);
    assert_true(run_until(f, mesh2));
    /* A frame larger than one TLS record and one read crosses intact. */
    memset(big, 'x', sizeof big);
    assert_int_equal(srv_cluster_send(&f->cl[1], "n1", g, big, sizeof big), 0);
    assert_true(run_until(f, got_one));
    assert_string_equal(f->got_from, "n2");
}

static void a_certificate_from_another_ca_never_links(void **state)
{
    struct fixture *f = *state;
    struct node_sec s1 = {.cert = "node1", .key = "node1", .ca = "ca"};
    struct node_sec bad = {.cert = "intruder", .key = "intruder", .ca = "ca"};

    make_certs(f);
    assert_int_equal(start_node(f, 0, "", &s1), 0);
    assert_int_equal(start_node(f, 1, f->url[0], &bad), 0);
    assert_never_linked(f);
}

static void a_plain_node_never_links_with_a_tls_cluster(void **state)
{
    struct fixture *f = *state;
    struct node_sec s1 = {.cert = "node1", .key = "node1", .ca = "ca"};

    make_certs(f);
    assert_int_equal(start_node(f, 0, "", &s1), 0);
    assert_int_equal(start_node(f, 1, f->url[0], NULL), 0);
    /* The plain dialer's HELLO is no TLS record: the acceptor drops it. */
    assert_never_linked(f);
}

static void tls_and_secret_together_link(void **state)
{
    struct fixture *f = *state;
    struct node_sec s1 = {
        .user = "r", .pass = "p", .cert = "node1", .key = "node1", .ca = "ca"};
    struct node_sec s2 = {
        .user = "r", .pass = "p", .cert = "node2", .key = "node2", .ca = "ca"};

    make_certs(f);
    assert_int_equal(start_node(f, 0, "", &s1), 0);
    assert_int_equal(start_node(f, 1, f->url[0], &s2), 0);
    assert_true(run_until(f, mesh2));
}

static void tls_without_a_ca_file_is_a_config_error(void **state)
{
    struct fixture *f = *state;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    struct srv_cluster_settings s = {
        .listen = "nats://127.0.0.1:0",
        .node_name = "n1",
        .node_id = "ID1",
        .tls_cert = "/nonexistent.pem",
        .tls_key = "/nonexistent.key",
    };

    assert_int_equal(srv_cluster_start(&f->cl[0], &f->loop, NULL, &s, errmsg),
                     KEEL_ECONFIG);
    f->started[0] = true;
    assert_non_null(strstr(errmsg, "ca_file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_proof_binds_secret_nonces_direction_and_names, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_proof_text_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(route_url_credentials_are_split_out,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            nodes_with_the_same_secret_link_and_carry_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(a_node_with_a_wrong_secret_never_links,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_node_without_the_secret_never_links,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            credentials_in_the_route_url_are_the_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_hashed_route_password_is_a_config_error, setup, teardown),
        cmocka_unit_test_setup_teardown(
            nodes_with_certificates_from_the_ca_link_over_tls, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_certificate_from_another_ca_never_links, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_plain_node_never_links_with_a_tls_cluster, setup, teardown),
        cmocka_unit_test_setup_teardown(tls_and_secret_together_link, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(tls_without_a_ca_file_is_a_config_error,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
