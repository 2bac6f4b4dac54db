/* Cluster-link authentication with real keelds on loopback: a node with
 * the wrong route secret, or without a certificate from the cluster's CA,
 * never gets a link (core messages published on the cluster never reach
 * it and its subscriptions never receive); the right credentials link up
 * and route messages; a raw TCP client that forges a HELLO and then GROUP
 * and MSG frames on the cluster port is cut off and delivers nothing.
 * Certificates are made at run time by the openssl tool.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <nats/nats.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define NODES 3
#define RECV_MS 5000
#define QUIET_MS 1500 /* > one redial at the minimum backoff, many frames */

struct fixture {
    struct h_keeld k[NODES];
    int cluster_port[NODES];
    natsConnection *nc[NODES];
    natsSubscription *sub[NODES];
    char certs[256];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        if (h_keeld_init(&f->k[i]) != 0) {
            return -1;
        }
    }
    snprintf(f->certs, sizeof f->certs, "%s/certs", f->k[0].dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    int rv = 0;
    for (int i = 0; i < NODES; i++) {
        natsSubscription_Destroy(f->sub[i]);
        natsConnection_Destroy(f->nc[i]);
    }
    for (int i = 0; i < NODES; i++) {
        if (f->k[i].pid > 0 && h_keeld_stop(&f->k[i], NULL) != 0) {
            rv = -1;
        }
        h_keeld_cleanup(&f->k[i]);
    }
    free(f);
    return rv;
}

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
    char cmd[512];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", f->certs);
    sh(cmd);
    make_ca(f, "ca");
    make_ca(f, "evil");
    make_cert(f, "ca", "n1");
    make_cert(f, "ca", "n2");
    make_cert(f, "evil", "n3");
}

/* The cluster { } lines for a route secret and/or TLS with cert name
 * (NULL: none), signed by... whatever CA made it; every node trusts ca. */
static void cluster_extra(struct fixture *f, const char *pass, const char *cert,
                          char *out, size_t len)
{
    size_t n = 0;
    if (pass != NULL) {
        n += (size_t)snprintf(out + n, len - n,
                              "  authorization { user: route, password: "
                              "\"%s\" }\n",
                              pass);
    }
    if (cert != NULL) {
        n += (size_t)snprintf(out + n, len - n,
                              "  tls { cert_file: \"%s/%s.pem\", key_file: "
                              "\"%s/%s.key\", ca_file: \"%s/ca.pem\" }\n",
                              f->certs, cert, f->certs, cert, f->certs);
    }
    if (n == 0) {
        out[0] = '\0';
    }
}

static bool cluster_port_ready(void *arg)
{
    struct h_keeld *k = arg;
    json_t *root = json_load_file(k->ports_file, 0, NULL);
    const char *url =
        json_string_value(json_array_get(json_object_get(root, "cluster"), 0));
    bool ok = url != NULL && strrchr(url, ':') != NULL;
    json_decref(root);
    return ok;
}

static int read_cluster_port(struct h_keeld *k)
{
    json_t *root = json_load_file(k->ports_file, 0, NULL);
    const char *url =
        json_string_value(json_array_get(json_object_get(root, "cluster"), 0));
    int port = url != NULL ? atoi(strrchr(url, ':') + 1) : -1;
    json_decref(root);
    return port;
}

/* Start node i (n<i+1>) with a config file holding the cluster block; it
 * seeds from node seed (-1: none). pass/cert as cluster_extra. */
static void start_node(struct fixture *f, int i, int seed, const char *pass,
                       const char *cert)
{
    char conf[512], extra[2048], routes[64] = "", name[16];
    snprintf(conf, sizeof conf, "%s/keeld.conf", f->k[i].dir);
    snprintf(name, sizeof name, "n%d", i + 1);
    cluster_extra(f, pass, cert, extra, sizeof extra);
    FILE *fp = fopen(conf, "w");
    assert_non_null(fp);
    fprintf(fp, "cluster {\n  name: sec\n%s}\n", extra);
    assert_int_equal(fclose(fp), 0);
    if (seed >= 0) {
        snprintf(routes, sizeof routes, "nats://127.0.0.1:%d",
                 f->cluster_port[seed]);
    }
    const char *args[] = {"-c",
                          conf,
                          "-n",
                          name,
                          "--cluster",
                          "nats://127.0.0.1:0",
                          seed >= 0 ? "--routes" : NULL,
                          routes,
                          NULL};
    assert_int_equal(h_keeld_start(&f->k[i], 0, true, args), 0);
    assert_true(h_poll(cluster_port_ready, &f->k[i], H_START_TIMEOUT_MS));
    f->cluster_port[i] = read_cluster_port(&f->k[i]);
    assert_true(f->cluster_port[i] > 0);
}

static int num_routes(struct h_keeld *k)
{
    char body[16384];
    if (h_http_get(k->http_port, "/routez", body, sizeof body) != 200) {
        return -1;
    }
    json_t *root = json_loads(body, 0, NULL);
    int n = (int)json_integer_value(json_object_get(root, "num_routes"));
    json_decref(root);
    return n;
}

struct linked_arg {
    struct fixture *f;
    int a, b;
};

static bool linked(void *arg)
{
    struct linked_arg *l = arg;
    return num_routes(&l->f->k[l->a]) == 1 && num_routes(&l->f->k[l->b]) == 1;
}

static void connect_sub(struct fixture *f, int i, const char *subject)
{
    assert_int_equal(natsConnection_ConnectTo(&f->nc[i], f->k[i].url), NATS_OK);
    assert_int_equal(
        natsConnection_SubscribeSync(&f->sub[i], f->nc[i], subject), NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[i]), NATS_OK);
}

/* Publish on node from to subject; does node to's subscription get it
 * within wait_ms? */
static bool crosses(struct fixture *f, int from, int to, const char *subject,
                    int wait_ms)
{
    natsMsg *m = NULL;
    assert_int_equal(natsConnection_PublishString(f->nc[from], subject, "hi"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[from]), NATS_OK);
    natsStatus s = natsSubscription_NextMsg(&m, f->sub[to], wait_ms);
    natsMsg_Destroy(m);
    return s == NATS_OK;
}

static bool log_has(struct h_keeld *k, const char *want)
{
    return h_file_has(k->log_path, want);
}

/* Two nodes that must not link: for QUIET_MS neither lists a route, and
 * messages published on each never reach the other's subscriber. */
static void assert_kept_apart(struct fixture *f, int a, int b)
{
    long long end = h_now_ms() + QUIET_MS;
    while (h_now_ms() < end) {
        assert_int_equal(num_routes(&f->k[a]), 0);
        assert_int_equal(num_routes(&f->k[b]), 0);
    }
    connect_sub(f, a, "apart.a");
    connect_sub(f, b, "apart.b");
    assert_false(crosses(f, a, b, "apart.b", 300));
    assert_false(crosses(f, b, a, "apart.a", 300));
}

static void nodes_with_the_route_secret_link_and_route_messages(void **state)
{
    struct fixture *f = *state;
    struct linked_arg l = {f, 0, 1};

    start_node(f, 0, -1, "s3cret-route", NULL);
    start_node(f, 1, 0, "s3cret-route", NULL);
    assert_true(h_poll(linked, &l, RECV_MS));
    connect_sub(f, 0, "x.0");
    connect_sub(f, 1, "x.1");
    /* Interest crosses the link: retry until the subscription is known. */
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) {
        ok = crosses(f, 0, 1, "x.1", 100);
    }
    assert_true(ok);
    assert_true(crosses(f, 1, 0, "x.0", RECV_MS));
}

static void a_node_with_the_wrong_secret_never_gets_a_link(void **state)
{
    struct fixture *f = *state;

    start_node(f, 0, -1, "s3cret-route", NULL);
    start_node(f, 1, 0, "guessed", NULL);
    start_node(f, 2, 0, NULL, NULL); /* no secret at all */
    assert_kept_apart(f, 0, 1);
    assert_int_equal(num_routes(&f->k[2]), 0);
    assert_true(log_has(&f->k[0], "wrong route credentials"));
    assert_true(log_has(&f->k[2], "it requires route credentials"));
}

static void
nodes_with_certificates_from_the_ca_link_and_route_messages(void **state)
{
    struct fixture *f = *state;
    struct linked_arg l = {f, 0, 1};

    make_certs(f);
    start_node(f, 0, -1, NULL, "n1");
    start_node(f, 1, 0, NULL, "n2");
    assert_true(h_poll(linked, &l, RECV_MS));
    connect_sub(f, 0, "t.0");
    connect_sub(f, 1, "t.1");
    bool ok = false;
    for (int i = 0; i < 50 && !ok; i++) {
        ok = crosses(f, 0, 1, "t.1", 100);
    }
    assert_true(ok);
}

static void a_node_without_a_trusted_certificate_never_gets_a_link(void **state)
{
    struct fixture *f = *state;

    make_certs(f);
    start_node(f, 0, -1, NULL, "n1");
    start_node(f, 1, 0, NULL, "n3"); /* signed by another CA */
    start_node(f, 2, 0, NULL, NULL); /* plain TCP */
    assert_kept_apart(f, 0, 1);
    assert_int_equal(num_routes(&f->k[2]), 0);
    assert_true(log_has(&f->k[0], "certificate verify failed"));
}

/* ---- a forged peer on the cluster port ---- */

static size_t put_frame(uint8_t *out, unsigned kind, const uint8_t *group,
                        size_t glen, const uint8_t *payload, size_t plen)
{
    uint8_t *p = out + 4;
    *p++ = 0x93; /* [kind, group, payload] */
    *p++ = (uint8_t)kind;
    *p++ = 0xc4;
    *p++ = (uint8_t)glen;
    memcpy(p, group, glen);
    p += glen;
    *p++ = 0xc5; /* bin 16 */
    *p++ = (uint8_t)(plen >> 8);
    *p++ = (uint8_t)plen;
    memcpy(p, payload, plen);
    p += plen;
    size_t body = (size_t)(p - out) - 4;
    out[0] = out[1] = 0;
    out[2] = (uint8_t)(body >> 8);
    out[3] = (uint8_t)body;
    return (size_t)(p - out);
}

/* Read until EOF or error; true when the peer closed within timeout. */
static bool closed_by_peer(int fd, int timeout_ms)
{
    char buf[4096];
    long long end = h_now_ms() + timeout_ms;
    while (h_now_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) > 0) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                return true;
            }
        }
    }
    return false;
}

/* Connect to node's cluster port as a node named intruder: a HELLO, a
 * guessed proof when with_proof, then a Raft GROUP frame and a core MSG
 * for subject "forged". The node must close the connection. */
static void forge(struct fixture *f, int node, bool with_proof)
{
    uint8_t buf[4096];
    size_t n = 0;
    /* A HELLO as an old or careless node sends it, or one that claims the
     * challenge-response with a made-up nonce (then a guessed proof). */
    char hello[512];
    snprintf(hello, sizeof hello,
             "{\"proto\":1,\"id\":\"FORGED\",\"name\":\"intruder\","
             "\"cluster\":\"sec\",\"url\":\"127.0.0.1:1\",\"client_url\":"
             "\"127.0.0.1:2\"%s}",
             with_proof ? ",\"auth\":\"hmac-sha256\",\"nonce\":\"01010101010101"
                          "010101010101010101010101010101010101010101010101"
                          "01\""
                        : "");
    const char *proof = "{\"proof\":\"00000000000000000000000000000000000000"
                        "00000000000000000000000000\"}";
    /* MSG [subject, reply, hdr_bytes, queues, data] for "forged" */
    const uint8_t msg[] = {0x95, 0xa6, 'f',  'o',  'r', 'g', 'e', 'd',
                           0xa0, 0x00, 0x90, 0xc4, 2,   'h', 'i'};
    uint8_t group[16] = {1, 2, 3};
    const uint8_t raft[] = {0x01, 0x02, 0x03, 0x04};

    n += put_frame(buf + n, 1, NULL, 0, (const uint8_t *)hello, strlen(hello));
    if (with_proof) {
        n += put_frame(buf + n, 1, NULL, 0, (const uint8_t *)proof,
                       strlen(proof));
    }
    n += put_frame(buf + n, 7, group, sizeof group, raft, sizeof raft);
    n += put_frame(buf + n, 6, NULL, 0, msg, sizeof msg);
    int fd = h_tcp_connect(f->cluster_port[node]);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, n), (ssize_t)n);
    assert_true(closed_by_peer(fd, RECV_MS));
    close(fd);
}

static void
a_forged_hello_and_frames_on_the_cluster_port_are_cut_off(void **state)
{
    struct fixture *f = *state;
    natsMsg *m = NULL;

    start_node(f, 0, -1, "s3cret-route", NULL);
    connect_sub(f, 0, "forged");
    /* Without route auth, this HELLO alone would make a link and the MSG
     * would be delivered. */
    forge(f, 0, false);
    forge(f, 0, true);
    assert_int_equal(natsSubscription_NextMsg(&m, f->sub[0], 300),
                     NATS_TIMEOUT);
    assert_int_equal(num_routes(&f->k[0]), 0);
    assert_true(log_has(&f->k[0], "wrong route credentials"));

    /* The same bytes on a TLS cluster port fail the handshake. */
    make_certs(f);
    start_node(f, 1, -1, NULL, "n2");
    forge(f, 1, false);
    assert_int_equal(num_routes(&f->k[1]), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            nodes_with_the_route_secret_link_and_route_messages, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_node_with_the_wrong_secret_never_gets_a_link, setup, teardown),
        cmocka_unit_test_setup_teardown(
            nodes_with_certificates_from_the_ca_link_and_route_messages, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_node_without_a_trusted_certificate_never_gets_a_link, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_forged_hello_and_frames_on_the_cluster_port_are_cut_off, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
