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

#include "netns.h"

#define NODES 5
#define STREAM "FIVE"
#define WAIT_MS 15000 /* bounded waits for the cluster to agree */
#define REQ_MS 2000   /* one request's timeout */
#define PER_STEP 10   /* acked publishes per rolling-restart step */
#define ROUNDS 2      /* rolling restarts of every node */
#define SEQ_MAX 512   /* highest sequence this file can ack */

static struct h_netns net; /* one cluster for the whole file */
static natsConnection *nc[NODES];
static jsCtx *js[NODES];
static char *acked[SEQ_MAX + 1]; /* payload acked at each sequence */

static void disconnect(int i)
{
    jsCtx_Destroy(js[i]);
    natsConnection_Destroy(nc[i]);
    js[i] = NULL;
    nc[i] = NULL;
}

static int connect_node(int i)
{
    natsOptions *o = NULL;
    int rv = -1;
    if (natsOptions_Create(&o) == NATS_OK &&
        natsOptions_SetURL(o, net.node[i].k.url) == NATS_OK &&
        natsOptions_SetAllowReconnect(o, false) == NATS_OK &&
        natsConnection_Connect(&nc[i], o) == NATS_OK &&
        natsConnection_JetStream(&js[i], nc[i], NULL) == NATS_OK) {
        rv = 0;
    }
    natsOptions_Destroy(o);
    return rv;
}

static json_t *request(int i, const char *subject)
{
    natsMsg *m = NULL;
    if (nc[i] == NULL || natsConnection_RequestString(&m, nc[i], subject, "",
                                                      REQ_MS) != NATS_OK) {
        return NULL;
    }
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    if (o != NULL && json_object_get(o, "error") != NULL) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static bool meta_ready(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        json_t *o = request(i, "$JS.API.INFO");
        json_decref(o);
        if (o == NULL) {
            return false;
        }
    }
    return true;
}

static int group_start(void **state)
{
    (void)state;
    if (h_netns_start(&net, NODES, "cjs5", NULL) != 0) {
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        if (connect_node(i) != 0) {
            return -1;
        }
    }
    return h_poll(meta_ready, NULL, WAIT_MS) ? 0 : -1;
}

static int group_teardown(void **state);

/* A failed setup cleans up itself (namespaces, keelds); cleaning up twice
 * is harmless. */
static int group_setup(void **state)
{
    int rv = group_start(state);
    if (rv != 0) {
        (void)group_teardown(state);
    }
    return rv;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++) {
        disconnect(i);
    }
    for (int s = 0; s <= SEQ_MAX; s++) {
        free(acked[s]);
    }
    int rv = h_netns_cleanup(&net);
    nats_Close();
    return rv;
}

static int index_of(const char *name)
{
    for (int k = 0; name != NULL && k < NODES; k++) {
        if (strcmp(net.node[k].name, name) == 0) {
            return k;
        }
    }
    return -1;
}

/* Every running node answers stream info naming the same leader. */
static bool stream_led(void *arg)
{
    int leader = -2;
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        if (!net.node[i].running) {
            continue;
        }
        json_t *o = request(i, "$JS.API.STREAM.INFO." STREAM);
        int l = index_of(json_string_value(
            json_object_get(json_object_get(o, "cluster"), "leader")));
        json_decref(o);
        if (l < 0 || (leader != -2 && l != leader)) {
            return false;
        }
        leader = l;
    }
    return true;
}

/* hosts[i] = node i is one of the stream's peers (stream info cluster). */
static void hosts_of(bool *hosts)
{
    json_t *o = request(0, "$JS.API.STREAM.INFO." STREAM);
    json_t *c = json_object_get(o, "cluster");
    size_t k;
    json_t *r;
    memset(hosts, 0, NODES * sizeof *hosts);
    int l = index_of(json_string_value(json_object_get(c, "leader")));
    assert_true(l >= 0);
    hosts[l] = true;
    json_array_foreach(json_object_get(c, "replicas"), k, r)
    {
        int f = index_of(json_string_value(json_object_get(r, "name")));
        assert_true(f >= 0);
        hosts[f] = true;
    }
    json_decref(o);
}

struct pub_try {
    int via;
    int k;
    uint64_t seq; /* acked sequence, 0 until acked */
};

/* One publish attempt; a failure (503 while a leader is elected, or a
 * timeout) leaves the outcome indeterminate: the caller tries again. */
static bool publish_once(void *arg)
{
    struct pub_try *p = arg;
    char subj[32], data[32];
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = REQ_MS;
    snprintf(subj, sizeof subj, "five.%d", p->k);
    snprintf(data, sizeof data, "p%d", p->k);
    if (js_Publish(&pa, js[p->via], subj, data, (int)strlen(data), &po,
                   &jerr) != NATS_OK) {
        return false;
    }
    p->seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    assert_true(p->seq >= 1 && p->seq <= SEQ_MAX);
    assert_null(acked[p->seq]); /* never acked for two payloads */
    acked[p->seq] = strdup(data);
    return true;
}

/* Publish payload k through node i until acked (bounded by WAIT_MS). */
static void publish(int i, int k)
{
    struct pub_try p = {i, k, 0};
    if (!h_poll(publish_once, &p, WAIT_MS)) {
        fail_msg("no ack through %s within %d ms", net.node[i].name, WAIT_MS);
    }
}

/* Every acked payload reads back at its sequence through node i. */
static void check_acked(int i)
{
    for (uint64_t s = 1; s <= SEQ_MAX; s++) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        if (acked[s] == NULL) {
            continue;
        }
        assert_int_equal(js_GetMsg(&m, js[i], STREAM, s, NULL, &jerr), NATS_OK);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(acked[s]));
        assert_memory_equal(natsMsg_GetData(m), acked[s], strlen(acked[s]));
        natsMsg_Destroy(m);
    }
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
        js_PullSubscribe(&sub, js[i], "five.>", "OUT", NULL, &so, &jerr),
        NATS_OK);
    while (next <= (uint64_t)n) {
        natsMsgList l = {0};
        assert_int_equal(
            natsSubscription_Fetch(&l, sub, n - (int)next + 1, WAIT_MS, &jerr),
            NATS_OK);
        for (int k = 0; k < l.Count; k++) {
            jsMsgMetaData *md = NULL;
            assert_int_equal(natsMsg_GetMetaData(&md, l.Msgs[k]), NATS_OK);
            assert_int_equal(md->Sequence.Stream, next);
            jsMsgMetaData_Destroy(md);
            assert_int_equal(natsMsg_AckSync(l.Msgs[k], NULL, &jerr), NATS_OK);
            next++;
        }
        natsMsgList_Destroy(&l);
    }
    natsSubscription_Destroy(sub);
}

static void
an_r3_stream_is_served_through_the_nodes_that_do_not_host_it(void **state)
{
    (void)state;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"five.>"};
    bool hosts[NODES];
    int outside = 0;
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    assert_int_equal(js_AddStream(&si, js[4], &cfg, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    assert_true(h_poll(stream_led, NULL, WAIT_MS));
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
    assert_int_equal(h_netns_node_start(&net, i), 0);
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);
    assert_int_equal(connect_node(i), 0);
    assert_true(h_poll(stream_led, NULL, WAIT_MS));
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
            disconnect(i);
            assert_int_equal(h_netns_node_stop(&net, i), 0);
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
