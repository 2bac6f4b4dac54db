/* Five keelds in network namespaces (netns.c) with libnats: an R3 stream
 * is served through the two nodes that do not host it (their publishes,
 * reads and a pull consumer's fetches and acks are forwarded to its
 * leader, its deliveries come back), and a rolling restart of all five
 * nodes, twice, with publishes through a running node at every step, loses
 * no acknowledged message. */
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

#include "cjs_common.h"

#define NODES 5
#define STREAM "FIVE"
#define WAIT_MS 15000 /* bounded waits for the cluster to agree */
#define REQ_MS 2000   /* one request's timeout */
#define PER_STEP 10   /* acked publishes per rolling-restart step */
#define ROUNDS 2      /* rolling restarts of every node */

static struct cjs cj;         /* one cluster for the whole file */
static struct cjs_ledger led; /* every acked publish */

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjs5", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    cjs_ledger_free(&led);
    return cjs_stop(&cj);
}

/* hosts[i] = node i is one of the stream's peers (stream info cluster). */
static void hosts_of(bool *hosts)
{
    json_t *o = cjs_stream_info(&cj, 0, STREAM);
    json_t *c = json_object_get(o, "cluster");
    size_t k;
    json_t *r;
    memset(hosts, 0, NODES * sizeof *hosts);
    int l =
        cjs_node_named(&cj, json_string_value(json_object_get(c, "leader")));
    assert_true(l >= 0);
    hosts[l] = true;
    json_array_foreach(json_object_get(c, "replicas"), k, r)
    {
        int f =
            cjs_node_named(&cj, json_string_value(json_object_get(r, "name")));
        assert_true(f >= 0);
        hosts[f] = true;
    }
    json_decref(o);
}

struct pub_try {
    int via;
    int k;
};

/* One publish attempt; a failure (503 while a leader is elected, or a
 * timeout) leaves the outcome indeterminate: the caller tries again. */
static bool publish_once(void *arg)
{
    struct pub_try *p = arg;
    char subj[32], data[32];
    snprintf(subj, sizeof subj, "five.%d", p->k);
    snprintf(data, sizeof data, "p%d", p->k);
    return cjs_publish(&cj, p->via, subj, data, &led, REQ_MS);
}

/* Publish payload k through node i until acked (bounded by WAIT_MS). */
static void publish(int i, int k)
{
    struct pub_try p = {i, k};
    if (!h_poll(publish_once, &p, WAIT_MS)) {
        fail_msg("no ack through %s within %d ms", cj.net.node[i].name,
                 WAIT_MS);
    }
}

static void check_acked(int i)
{
    cjs_check_acked(&cj, i, STREAM, &led);
}

static int first_outside(const bool *hosts)
{
    for (int i = 0; i < NODES; i++) {
        if (!hosts[i]) {
            return i;
        }
    }
    return -1;
}

/* A durable pull consumer made through node i (which need not host the
 * stream) fetches messages 1..n in order and acks each. */
static void fetch_all_through(int i, int n)
{
    jsSubOptions so;
    jsErrCode jerr = 0;
    natsSubscription *sub = NULL;
    uint64_t next = 1;
    assert_true(i >= 0);
    jsSubOptions_Init(&so);
    so.Stream = STREAM;
    assert_int_equal(
        js_PullSubscribe(&sub, cj.js[i], "five.>", "OUT", NULL, &so, &jerr),
        NATS_OK);
    cjs_fetch_ack(sub, n, &next, WAIT_MS);
    natsSubscription_Destroy(sub);
}

static void
an_r3_stream_is_served_through_the_nodes_that_do_not_host_it(void **state)
{
    (void)state;
    bool hosts[NODES];
    int outside = 0;
    cjs_add_stream(&cj, 4, STREAM, "five.>", 3, WAIT_MS);
    hosts_of(hosts);
    for (int i = 0, k = 0; i < NODES; i++) {
        if (hosts[i]) {
            continue;
        }
        outside++;
        for (int j = 0; j < PER_STEP; j++, k++) {
            publish(i, k);
        }
        check_acked(i);
    }
    assert_int_equal(outside, NODES - 3);
    fetch_all_through(first_outside(hosts), outside * PER_STEP);
}

/* Node i restarted: wait until it rejoined and the stream is led again. */
static void rejoin(int i)
{
    assert_int_equal(h_netns_node_start(&cj.net, i), 0);
    assert_int_equal(h_netns_wait_mesh(&cj.net, WAIT_MS), 0);
    assert_int_equal(cjs_connect(&cj, i), 0);
    assert_true(cjs_wait_stream_led(&cj, STREAM, WAIT_MS) >= 0);
}

static void
a_rolling_restart_of_all_five_nodes_twice_loses_no_acked_message(void **state)
{
    (void)state;
    int k = 1000;
    long long t0 = h_now_ms();
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < NODES; i++) {
            int via = (i + 1) % NODES;
            cjs_disconnect(&cj, i);
            assert_int_equal(h_netns_node_stop(&cj.net, i), 0);
            for (int j = 0; j < PER_STEP; j++) {
                publish(via, k++);
            }
            rejoin(i);
            for (int j = 0; j < PER_STEP; j++) {
                publish(i, k++);
            }
        }
    }
    printf("# %d rolling restarts of %d nodes in %lld ms\n", ROUNDS, NODES,
           h_now_ms() - t0);
    for (int i = 0; i < NODES; i++) {
        check_acked(i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            an_r3_stream_is_served_through_the_nodes_that_do_not_host_it),
        cmocka_unit_test(
            a_rolling_restart_of_all_five_nodes_twice_loses_no_acked_message),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
