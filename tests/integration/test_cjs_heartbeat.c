/* Heartbeat coalescing (docs/design.md §3: the cluster link batches the
 * heartbeats of all groups between two nodes into one frame per tick, each
 * group keeping its own term, commit and response). Three keelds in network
 * namespaces (netns.c) with 20 R3 streams, so 21 Raft groups (with the
 * meta group) span every pair of nodes. Idle, each link carries a few
 * frames per heartbeat tick (one batch of heartbeats and one of responses
 * each way, plus the link's own PING and the leader announcements), not
 * one per group: without batching the same cluster sends 3-4 times as many
 * (see FRAMES_PER_TICK). Every stream keeps its leader meanwhile: the
 * batched heartbeats still hold each group's leadership. */
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
#include <time.h>

#include "netns.h"

#define NODES 3
#define STREAMS 20
#define WAIT_MS 30000    /* bounded waits for the cluster to agree */
#define REQ_MS 2000      /* one request's timeout */
#define HEARTBEAT_MS 150 /* SRV_JSC_HEARTBEAT_MS */
#define WINDOW_MS 5000   /* how long the frames are counted */
#define STALE_MS 1100    /* /routez counters lag by up to this */
/* Bound per link, both directions. Measured on the 2-core VM under load
 * 17: 7.5 with batching, 25.9 with every group message framed alone. */
#define FRAMES_PER_TICK 14
#define BODY_MAX (64 * 1024)

static struct h_netns net; /* one cluster for the whole file */
static natsConnection *nc[NODES];
static jsCtx *js[NODES];

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

/* Request subject on node 0; the reply parsed (NULL: none or an error). */
static json_t *request(const char *subject, const char *body)
{
    natsMsg *m = NULL;
    if (natsConnection_RequestString(&m, nc[0], subject, body, REQ_MS) !=
        NATS_OK) {
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
    json_t *o = request("$JS.API.INFO", "");
    json_decref(o);
    return o != NULL;
}

static int group_setup(void **state)
{
    (void)state;
    if (h_netns_start(&net, NODES, "cjshb", NULL) != 0) {
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        if (connect_node(i) != 0) {
            return -1;
        }
    }
    return h_poll(meta_ready, NULL, WAIT_MS) ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++) {
        jsCtx_Destroy(js[i]);
        natsConnection_Destroy(nc[i]);
    }
    int rv = h_netns_cleanup(&net);
    nats_Close();
    return rv;
}

/* Every stream answers an acked publish (its group has a leader). */
static bool all_led(void *arg)
{
    (void)arg;
    for (int s = 0; s < STREAMS; s++) {
        char subj[32];
        jsPubAck *pa = NULL;
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = REQ_MS;
        snprintf(subj, sizeof subj, "hb%d.x", s);
        natsStatus st = js_Publish(&pa, js[0], subj, "x", 1, &po, NULL);
        jsPubAck_Destroy(pa);
        if (st != NATS_OK) {
            return false;
        }
    }
    return true;
}

/* The leader name of every stream, as node 0 reports it (into names). */
static void leaders(char names[STREAMS][16])
{
    for (int s = 0; s < STREAMS; s++) {
        char subj[64];
        snprintf(subj, sizeof subj, "$JS.API.STREAM.INFO.HB%d", s);
        json_t *o = request(subj, "");
        const char *l = json_string_value(
            json_object_get(json_object_get(o, "cluster"), "leader"));
        snprintf(names[s], 16, "%s", l != NULL ? l : "");
        json_decref(o);
    }
}

/* Frames in + out on node 0's link to each other node (its /routez), in
 * frames[k] for node k; false if /routez did not answer. */
static bool link_frames(uint64_t frames[NODES])
{
    static char body[BODY_MAX];
    if (h_netns_http_get(&net, 0, "/routez", body, sizeof body) != 200) {
        return false;
    }
    json_t *root = json_loads(body, 0, NULL);
    json_t *routes = json_object_get(root, "routes");
    size_t i;
    json_t *r;
    memset(frames, 0, NODES * sizeof frames[0]);
    json_array_foreach(routes, i, r)
    {
        const char *name = json_string_value(json_object_get(r, "remote_name"));
        for (int k = 1; name != NULL && k < NODES; k++) {
            if (strcmp(name, net.node[k].name) == 0) {
                frames[k] = (uint64_t)json_integer_value(
                                json_object_get(r, "in_msgs")) +
                            (uint64_t)json_integer_value(
                                json_object_get(r, "out_msgs"));
            }
        }
    }
    json_decref(root);
    return true;
}

struct create_try {
    const char *subject, *body;
};

/* One stream create; false (try again) on an error or a timeout: on a
 * loaded machine the meta group may be between leaders or slower than
 * REQ_MS to commit. An identical stream made by an earlier try counts
 * as created, as on nats-server. */
static bool created(void *arg)
{
    const struct create_try *t = arg;
    json_t *o = request(t->subject, t->body);
    json_decref(o);
    return o != NULL;
}

static void twenty_groups_share_a_few_frames_per_tick_on_each_link(void **state)
{
    (void)state;
    for (int s = 0; s < STREAMS; s++) {
        char subj[64], cfg[160];
        snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.HB%d", s);
        snprintf(cfg, sizeof cfg,
                 "{\"name\":\"HB%d\",\"subjects\":[\"hb%d.x\"],"
                 "\"num_replicas\":3}",
                 s, s);
        struct create_try t = {subj, cfg};
        assert_true(h_poll(created, &t, WAIT_MS));
    }
    assert_true(h_poll(all_led, NULL, WAIT_MS));
    char before[STREAMS][16], after[STREAMS][16];
    leaders(before);

    uint64_t a[NODES], b[NODES];
    assert_true(link_frames(a));
    long long t0 = h_now_ms();
    /* A counting window, not a wait for a condition: the rate is what the
     * test measures. */
    struct timespec ts = {WINDOW_MS / 1000, (WINDOW_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    assert_true(link_frames(b));
    long long ms = h_now_ms() - t0;

    /* The counters lag by up to STALE_MS at each end: count the window
     * as short as it may have been. */
    double ticks = (double)(ms - STALE_MS) / HEARTBEAT_MS;
    for (int k = 1; k < NODES; k++) {
        double per_tick = (double)(b[k] - a[k]) / ticks;
        fprintf(stderr, "link n1-%s: %llu frames in %lld ms, %.1f per tick\n",
                net.node[k].name, (unsigned long long)(b[k] - a[k]), ms,
                per_tick);
        assert_true(b[k] > a[k]);
        assert_true(per_tick <= FRAMES_PER_TICK);
    }
    leaders(after);
    for (int s = 0; s < STREAMS; s++) {
        assert_string_not_equal(before[s], "");
        assert_string_equal(before[s], after[s]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            twenty_groups_share_a_few_frames_per_tick_on_each_link),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
