/* The network-namespace cluster harness (netns.c) with real keelds: a
 * 3-node mesh on the fixed cluster port, core pub/sub across namespaces,
 * a partition drops exactly the cut link and healing restores it, an
 * isolated node loses every link, a node killed with -9 rejoins after a
 * restart in its data dir. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netns.h"

#define NODES 3
#define RECV_MS 5000
#define LINK_MS 15000 /* a cut link is dropped after SRV_CLUSTER_DEAD_MS */

static struct h_netns net; /* one cluster for the whole file */

static int group_setup(void **state)
{
    (void)state;
    if (h_netns_start(&net, NODES, "itns", NULL) != 0) {
        (void)h_netns_cleanup(&net); /* twice is harmless */
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    int rv = h_netns_cleanup(&net);
    nats_Close();
    return rv;
}

/* Does node i's /routez list a link to node j (by name)? */
static bool has_link(int i, int j)
{
    static char body[65536];
    size_t k;
    json_t *r;
    bool found = false;

    if (h_netns_http_get(&net, i, "/routez", body, sizeof body) != 200) {
        return false;
    }
    json_t *root = json_loads(body, 0, NULL);
    json_array_foreach(json_object_get(root, "routes"), k, r)
    {
        const char *nm = json_string_value(json_object_get(r, "remote_name"));
        found = found || (nm != NULL && strcmp(nm, net.node[j].name) == 0);
    }
    json_decref(root);
    return found;
}

struct link_want {
    int i, j;
    bool up;
};

static bool link_is(void *arg)
{
    struct link_want *w = arg;
    /* An isolated node cannot be asked; its peers' view is enough. */
    return (net.node[w->i].isolated || has_link(w->i, w->j) == w->up) &&
           (net.node[w->j].isolated || has_link(w->j, w->i) == w->up);
}

static bool wait_link(int i, int j, bool up)
{
    struct link_want w = {i, j, up};
    long long t0 = h_now_ms();
    bool ok = h_poll(link_is, &w, LINK_MS);
    printf("# link n%d-n%d %s after %lld ms\n", i + 1, j + 1,
           up ? "up" : "down", h_now_ms() - t0);
    return ok;
}

static void
every_node_listens_on_the_fixed_cluster_port_of_its_own_address(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++) {
        char want[48];
        snprintf(want, sizeof want, "nats://%s:", net.node[i].addr);
        assert_non_null(strstr(net.node[i].k.url, want));
        for (int j = 0; j < NODES; j++) {
            if (i != j) {
                assert_true(has_link(i, j));
            }
        }
    }
}

struct interest_wait {
    int node;
    const char *subject;
};

static bool interest_everywhere(void *arg)
{
    struct interest_wait *w = arg;
    static char body[65536];

    for (int i = 0; i < NODES; i++) {
        if (i == w->node) {
            continue;
        }
        if (h_netns_http_get(&net, i, "/routez", body, sizeof body) != 200 ||
            strstr(body, w->subject) == NULL) {
            return false;
        }
    }
    return true;
}

static void
a_publish_in_one_namespace_reaches_a_subscriber_in_another(void **state)
{
    (void)state;
    natsConnection *pub = NULL, *subc = NULL;
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;

    assert_int_equal(natsConnection_ConnectTo(&pub, net.node[0].k.url),
                     NATS_OK);
    assert_int_equal(natsConnection_ConnectTo(&subc, net.node[2].k.url),
                     NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&sub, subc, "ns.x"), NATS_OK);
    assert_int_equal(natsConnection_Flush(subc), NATS_OK);
    struct interest_wait w = {2, "ns.x"};
    assert_true(h_poll(interest_everywhere, &w, RECV_MS));
    assert_int_equal(natsConnection_PublishString(pub, "ns.x", "hello"),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, sub, RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetData(m), "hello");
    natsMsg_Destroy(m);
    natsSubscription_Destroy(sub);
    natsConnection_Destroy(pub);
    natsConnection_Destroy(subc);
}

static void a_partition_cuts_only_its_link_and_healing_restores_it(void **state)
{
    (void)state;
    assert_int_equal(h_netns_partition(&net, 0, 1), 0);
    assert_true(wait_link(0, 1, false));
    assert_true(has_link(0, 2));
    assert_true(has_link(1, 2));
    assert_int_equal(h_netns_heal(&net, 0, 1), 0);
    assert_true(wait_link(0, 1, true));
    assert_int_equal(h_netns_wait_mesh(&net, LINK_MS), 0);
}

static void
an_isolated_node_loses_every_link_and_rejoins_when_reattached(void **state)
{
    (void)state;
    assert_int_equal(h_netns_isolate(&net, 2, true), 0);
    assert_true(wait_link(0, 2, false));
    assert_true(wait_link(1, 2, false));
    assert_true(has_link(0, 1));
    assert_int_equal(h_netns_isolate(&net, 2, false), 0);
    assert_int_equal(h_netns_wait_mesh(&net, LINK_MS), 0);
}

static void a_node_killed_with_sigkill_rejoins_after_a_restart(void **state)
{
    (void)state;
    assert_int_equal(h_netns_node_kill(&net, 1), 0);
    assert_true(wait_link(0, 1, false));
    assert_int_equal(h_netns_node_start(&net, 1), 0);
    assert_int_equal(h_netns_wait_mesh(&net, LINK_MS), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            every_node_listens_on_the_fixed_cluster_port_of_its_own_address),
        cmocka_unit_test(
            a_publish_in_one_namespace_reaches_a_subscriber_in_another),
        cmocka_unit_test(
            a_partition_cuts_only_its_link_and_healing_restores_it),
        cmocka_unit_test(
            an_isolated_node_loses_every_link_and_rejoins_when_reattached),
        cmocka_unit_test(a_node_killed_with_sigkill_rejoins_after_a_restart),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
