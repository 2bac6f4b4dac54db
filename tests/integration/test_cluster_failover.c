/* A 5-node keeld cluster losing and regaining a node, with real libnats
 * clients: the survivors keep routing, a client that only knew the dead
 * node fails over through the connect_urls INFO gave it, and the node
 * that comes back gets its links and every node's interest again. The
 * tests run in order on one cluster (each one starts where the previous
 * left it). */
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

#include "harness.h"

#define NODES 5
#define RECV_MS 5000
#define WAIT_MS 15000

static struct h_cluster cluster;

struct fixture {
    natsConnection *nc[NODES]; /* one client per running node */
};

static int group_setup(void **state)
{
    (void)state;
    return h_cluster_start(&cluster, NODES, "it5");
}

static int group_teardown(void **state)
{
    (void)state;
    int rv = h_cluster_cleanup(&cluster);
    nats_Close();
    return rv;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        if (cluster.running[i] &&
            natsConnection_ConnectTo(&f->nc[i], cluster.k[i].url) != NATS_OK) {
            return -1;
        }
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < NODES; i++) {
        natsConnection_Destroy(f->nc[i]);
    }
    free(f);
    return 0;
}

static void wait_interest(natsConnection *nc, int node, const char *key)
{
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    assert_true(h_cluster_wait_interest(&cluster, node, key, WAIT_MS));
}

static int count_until_end(natsSubscription *sub)
{
    int n = 0;
    for (;;) {
        natsMsg *m = NULL;
        assert_int_equal(natsSubscription_NextMsg(&m, sub, RECV_MS), NATS_OK);
        bool end = strcmp(natsMsg_GetData(m), "end") == 0;
        natsMsg_Destroy(m);
        if (end) {
            return n;
        }
        n++;
    }
}

/* Publish n messages and "end" on subject through nc. */
static void publish_n(natsConnection *nc, const char *subject, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(natsConnection_PublishString(nc, subject, "m"),
                         NATS_OK);
    }
    assert_int_equal(natsConnection_PublishString(nc, subject, "end"), NATS_OK);
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
}

static void kill_node(int i)
{
    int st = 0;
    assert_int_equal(kill(cluster.k[i].pid, SIGKILL), 0);
    assert_int_equal(h_wait_pid(cluster.k[i].pid, WAIT_MS, &st), 0);
    cluster.k[i].pid = -1;
    cluster.running[i] = false;
}

struct failover {
    natsConnection *nc;
    int servers;
    volatile bool reconnected;
};

static bool learned_all(void *arg)
{
    struct failover *fo = arg;
    char **servers = NULL;
    int count = 0;

    if (natsConnection_GetServers(fo->nc, &servers, &count) != NATS_OK) {
        return false;
    }
    for (int i = 0; i < count; i++) {
        free(servers[i]);
    }
    free(servers);
    fo->servers = count;
    return count == NODES;
}

static void reconnected_cb(natsConnection *nc, void *closure)
{
    (void)nc;
    struct failover *fo = closure;
    fo->reconnected = true;
}

static bool is_reconnected(void *arg)
{
    struct failover *fo = arg;
    return fo->reconnected &&
           natsConnection_Status(fo->nc) == NATS_CONN_STATUS_CONNECTED;
}

static void
a_client_of_a_killed_node_fails_over_to_a_node_it_learned(void **state)
{
    struct fixture *f = *state;
    struct failover fo = {0};
    natsOptions *opts = NULL;
    natsSubscription *sub;

    assert_int_equal(natsOptions_Create(&opts), NATS_OK);
    assert_int_equal(natsOptions_SetURL(opts, cluster.k[0].url), NATS_OK);
    assert_int_equal(natsOptions_SetMaxReconnect(opts, 50), NATS_OK);
    assert_int_equal(natsOptions_SetReconnectWait(opts, 50), NATS_OK);
    assert_int_equal(natsOptions_SetReconnectedCB(opts, reconnected_cb, &fo),
                     NATS_OK);
    assert_int_equal(natsConnection_Connect(&fo.nc, opts), NATS_OK);
    /* INFO connect_urls named the four other nodes. */
    assert_true(h_poll(learned_all, &fo, WAIT_MS));
    assert_int_equal(natsConnection_SubscribeSync(&sub, fo.nc, "fo.x"),
                     NATS_OK);
    wait_interest(fo.nc, 0, "fo.x");

    kill_node(0);
    assert_int_equal(h_cluster_wait_mesh(&cluster, WAIT_MS), 0);
    assert_true(h_poll(is_reconnected, &fo, WAIT_MS));
    char url[128] = "";
    assert_int_equal(natsConnection_GetConnectedUrl(fo.nc, url, sizeof url),
                     NATS_OK);
    assert_string_not_equal(url, cluster.k[0].url);
    printf("failover: reconnected to %s\n", url);

    /* The client re-sent its SUB; publish from another node until the
     * marker arrives (the node it landed on may be the publisher's). */
    int landed = -1;
    for (int i = 1; i < NODES; i++) {
        if (strstr(url, strrchr(cluster.k[i].url, ':')) != NULL) {
            landed = i;
        }
    }
    assert_true(landed > 0);
    wait_interest(fo.nc, landed, "fo.x");
    publish_n(f->nc[landed == 4 ? 3 : 4], "fo.x", 100);
    assert_int_equal(count_until_end(sub), 100);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(fo.nc);
    natsOptions_Destroy(opts);
}

static void the_surviving_nodes_keep_routing_between_themselves(void **state)
{
    struct fixture *f = *state;
    natsSubscription *s[NODES] = {NULL};

    assert_false(cluster.running[0]);
    for (int i = 1; i < NODES; i++) {
        assert_int_equal(
            natsConnection_SubscribeSync(&s[i], f->nc[i], "alive.x"), NATS_OK);
        wait_interest(f->nc[i], i, "alive.x");
    }
    publish_n(f->nc[2], "alive.x", 200);
    for (int i = 1; i < NODES; i++) {
        assert_int_equal(count_until_end(s[i]), 200);
        natsSubscription_Destroy(s[i]);
    }
}

static void a_restarted_node_relinks_and_gets_every_nodes_interest(void **state)
{
    struct fixture *f = *state;
    natsConnection *back = NULL;
    natsSubscription *old_sub, *new_sub;

    /* Interest that exists before the node comes back must reach it in
     * the full resend when its links are established. */
    assert_int_equal(natsConnection_SubscribeSync(&old_sub, f->nc[1], "re.x"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc[1]), NATS_OK);
    assert_int_equal(h_cluster_node_start(&cluster, 0), 0);
    assert_int_equal(h_cluster_wait_mesh(&cluster, WAIT_MS), 0);
    wait_interest(f->nc[1], 1, "re.x");
    assert_int_equal(natsConnection_ConnectTo(&back, cluster.k[0].url),
                     NATS_OK);
    publish_n(back, "re.x", 100);
    assert_int_equal(count_until_end(old_sub), 100);

    /* And the other way: a subscriber on the restarted node. */
    assert_int_equal(natsConnection_SubscribeSync(&new_sub, back, "re.y"),
                     NATS_OK);
    wait_interest(back, 0, "re.y");
    publish_n(f->nc[4], "re.y", 100);
    assert_int_equal(count_until_end(new_sub), 100);
    natsSubscription_Destroy(old_sub);
    natsSubscription_Destroy(new_sub);
    natsConnection_Destroy(back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_client_of_a_killed_node_fails_over_to_a_node_it_learned, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            the_surviving_nodes_keep_routing_between_themselves, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_restarted_node_relinks_and_gets_every_nodes_interest, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
