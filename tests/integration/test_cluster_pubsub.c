/* Core NATS across a 3-node keeld cluster with real libnats clients:
 * cross-node pub/sub exactly once, wildcards, queue groups spread over
 * nodes (each message to exactly one member), request/reply, headers.
 * Exactly-once is checked with an end marker: messages from one publisher
 * reach a node in order over one link, so when the marker arrives every
 * earlier message (and any duplicate) has arrived too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define NODES 3
#define RECV_MS 5000
#define WAIT_MS 10000

static struct h_cluster cluster; /* one cluster for the whole file */

struct fixture {
    natsConnection *nc[NODES]; /* one client per node */
};

static int group_setup(void **state)
{
    (void)state;
    return h_cluster_start(&cluster, NODES, "it3");
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
        if (natsConnection_ConnectTo(&f->nc[i], cluster.k[i].url) != NATS_OK) {
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

/* Flush node's client (its SUBs reached the server), then wait until every
 * other node lists the interest key from it. */
static void wait_interest(struct fixture *f, int node, const char *key)
{
    assert_int_equal(natsConnection_Flush(f->nc[node]), NATS_OK);
    assert_true(h_cluster_wait_interest(&cluster, node, key, WAIT_MS));
}

/* Count messages on sub until one with payload "end"; returns the count. */
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

static void
a_publish_reaches_subscribers_on_every_node_exactly_once(void **state)
{
    struct fixture *f = *state;
    natsSubscription *s[NODES];

    for (int i = 0; i < NODES; i++) {
        assert_int_equal(
            natsConnection_SubscribeSync(&s[i], f->nc[i], "x.once"), NATS_OK);
        wait_interest(f, i, "x.once");
    }
    for (int m = 0; m < 200; m++) {
        assert_int_equal(natsConnection_PublishString(f->nc[1], "x.once", "m"),
                         NATS_OK);
    }
    assert_int_equal(natsConnection_PublishString(f->nc[1], "x.once", "end"),
                     NATS_OK);
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(count_until_end(s[i]), 200);
        natsSubscription_Destroy(s[i]);
    }
}

static void
wildcard_subscriptions_on_other_nodes_match_forwarded_subjects(void **state)
{
    struct fixture *f = *state;
    natsSubscription *star, *gt;

    assert_int_equal(natsConnection_SubscribeSync(&star, f->nc[0], "w.*"),
                     NATS_OK);
    wait_interest(f, 0, "w.*");
    assert_int_equal(natsConnection_SubscribeSync(&gt, f->nc[2], "w.>"),
                     NATS_OK);
    wait_interest(f, 2, "w.>");
    assert_int_equal(natsConnection_PublishString(f->nc[1], "w.a", "1"),
                     NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->nc[1], "w.a.b", "2"),
                     NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->nc[1], "other", "3"),
                     NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->nc[1], "w.z", "end"),
                     NATS_OK);
    assert_int_equal(count_until_end(star), 1); /* w.a only */
    assert_int_equal(count_until_end(gt), 2);   /* w.a and w.a.b */
    natsSubscription_Destroy(star);
    natsSubscription_Destroy(gt);
}

static void a_queue_group_over_three_nodes_gets_each_message_once(void **state)
{
    struct fixture *f = *state;
    natsSubscription *q[NODES][2];
    natsSubscription *end[NODES];
    int total = 0;
    int msgs = 600;

    for (int i = 0; i < NODES; i++) {
        for (int k = 0; k < 2; k++) {
            assert_int_equal(natsConnection_QueueSubscribeSync(
                                 &q[i][k], f->nc[i], "work", "workers"),
                             NATS_OK);
        }
        assert_int_equal(
            natsConnection_SubscribeSync(&end[i], f->nc[i], "work.end"),
            NATS_OK);
        wait_interest(f, i, "work workers");
        wait_interest(f, i, "work.end");
    }
    for (int m = 0; m < msgs; m++) {
        assert_int_equal(natsConnection_PublishString(f->nc[0], "work", "j"),
                         NATS_OK);
    }
    assert_int_equal(natsConnection_PublishString(f->nc[0], "work.end", "e"),
                     NATS_OK);
    for (int i = 0; i < NODES; i++) {
        natsMsg *m = NULL;
        int node_total = 0;
        /* The marker came after every job on the same link, so every job
         * for this node is already queued at its subscriptions. */
        assert_int_equal(natsSubscription_NextMsg(&m, end[i], RECV_MS),
                         NATS_OK);
        natsMsg_Destroy(m);
        assert_int_equal(natsConnection_Flush(f->nc[i]), NATS_OK);
        for (int k = 0; k < 2; k++) {
            int pending = 0, bytes = 0;
            assert_int_equal(
                natsSubscription_GetPending(q[i][k], &pending, &bytes),
                NATS_OK);
            node_total += pending;
            natsSubscription_Destroy(q[i][k]);
        }
        printf("queue group: node n%d got %d of %d\n", i + 1, node_total, msgs);
        /* Spread: with weights 2:2:2, every node gets a share. */
        assert_true(node_total > msgs / 10);
        total += node_total;
        natsSubscription_Destroy(end[i]);
    }
    assert_int_equal(total, msgs);
}

static void on_request(natsConnection *nc, natsSubscription *sub, natsMsg *msg,
                       void *closure)
{
    (void)sub;
    (void)closure;
    char reply[64];
    snprintf(reply, sizeof reply, "re:%s", natsMsg_GetData(msg));
    (void)natsConnection_PublishString(nc, natsMsg_GetReply(msg), reply);
    natsMsg_Destroy(msg);
}

static void
a_request_on_one_node_is_answered_by_a_responder_on_another(void **state)
{
    struct fixture *f = *state;
    natsSubscription *resp;
    natsMsg *reply = NULL;

    assert_int_equal(
        natsConnection_Subscribe(&resp, f->nc[2], "svc.echo", on_request, NULL),
        NATS_OK);
    wait_interest(f, 2, "svc.echo");
    for (int i = 0; i < 20; i++) {
        char req[16], want[24];
        snprintf(req, sizeof req, "r%d", i);
        snprintf(want, sizeof want, "re:r%d", i);
        assert_int_equal(natsConnection_RequestString(&reply, f->nc[0],
                                                      "svc.echo", req, RECV_MS),
                         NATS_OK);
        assert_string_equal(natsMsg_GetData(reply), want);
        natsMsg_Destroy(reply);
    }
    /* Nobody anywhere listens on svc.none: the requester hears so. */
    assert_int_equal(natsConnection_RequestString(&reply, f->nc[0], "svc.none",
                                                  "x", RECV_MS),
                     NATS_NO_RESPONDERS);
    natsSubscription_Destroy(resp);
}

static void headers_survive_the_hop_between_nodes(void **state)
{
    struct fixture *f = *state;
    natsSubscription *s;
    natsMsg *m = NULL, *got = NULL;
    const char *v = NULL;

    assert_int_equal(natsConnection_SubscribeSync(&s, f->nc[1], "h.x"),
                     NATS_OK);
    wait_interest(f, 1, "h.x");
    assert_int_equal(natsMsg_Create(&m, "h.x", NULL, "body", 4), NATS_OK);
    assert_int_equal(natsMsgHeader_Set(m, "Keel-Test", "v1"), NATS_OK);
    assert_int_equal(natsConnection_PublishMsg(f->nc[0], m), NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&got, s, RECV_MS), NATS_OK);
    assert_int_equal(natsMsgHeader_Get(got, "Keel-Test", &v), NATS_OK);
    assert_string_equal(v, "v1");
    assert_int_equal(natsMsg_GetDataLength(got), 4);
    assert_memory_equal(natsMsg_GetData(got), "body", 4);
    natsMsg_Destroy(m);
    natsMsg_Destroy(got);
    natsSubscription_Destroy(s);
}

struct log_wait {
    const char *path;
    const char *text;
};

static bool log_has(void *arg)
{
    struct log_wait *w = arg;
    return h_file_has(w->path, w->text);
}

static void
a_node_of_another_cluster_name_is_refused_with_a_log_line(void **state)
{
    (void)state;
    struct h_keeld other;
    char seed[64];

    snprintf(seed, sizeof seed, "nats://127.0.0.1:%d", cluster.cluster_port[0]);
    const char *extra[] = {"-n",
                           "x1",
                           "--cluster",
                           "nats://127.0.0.1:0",
                           "--cluster_name",
                           "not-it3",
                           "--routes",
                           seed,
                           NULL};
    assert_int_equal(h_keeld_init(&other), 0);
    assert_int_equal(h_keeld_start(&other, 0, false, extra), 0);
    struct log_wait w = {other.log_path, "refusing link with node n1"};
    assert_true(h_poll(log_has, &w, WAIT_MS));
    struct log_wait w1 = {cluster.k[0].log_path, "refusing link with node x1"};
    assert_true(h_poll(log_has, &w1, WAIT_MS));
    /* The cluster is unchanged: still a full mesh of three. */
    assert_int_equal(h_cluster_wait_mesh(&cluster, WAIT_MS), 0);
    assert_int_equal(h_keeld_stop(&other, NULL), 0);
    h_keeld_cleanup(&other);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_publish_reaches_subscribers_on_every_node_exactly_once, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            wildcard_subscriptions_on_other_nodes_match_forwarded_subjects,
            setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_queue_group_over_three_nodes_gets_each_message_once, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_request_on_one_node_is_answered_by_a_responder_on_another, setup,
            teardown),
        cmocka_unit_test_setup_teardown(headers_survive_the_hop_between_nodes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_node_of_another_cluster_name_is_refused_with_a_log_line, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
