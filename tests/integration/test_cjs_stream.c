/* Clustered JetStream through every node (issue 7, DESIGN §6 routing) with
 * real keelds in network namespaces (netns.c) and libnats: an R3 stream
 * created through one node takes publishes through every node and reads
 * back in order on every node; stream info agrees on every node; each API
 * request is answered exactly once whichever node it reaches; a pull
 * consumer made on a node that does not lead the stream fetches and acks
 * there; kill -9 of the stream leader under a publish load: a new leader
 * within a bound (measured and printed), no acked message lost, and the
 * consumer resumes after its acked progress. The cases share one cluster
 * and run in order (each builds on the stream the first made). */
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
#define STREAM "ORD"
#define MSGS 30
#define WAIT_MS 10000     /* bounded waits for the cluster to agree */
#define REQ_MS 2000       /* one request's timeout */
#define ABSENT_MS 500     /* window in which no second answer may come */
#define FAILOVER_MS 15000 /* bound on a new stream leader after kill -9 */
#define LOAD_ACKS 200     /* acked publishes of the failover load */
#define UNACKED 5         /* fetched, never acked, before the kill */

static struct h_netns net; /* one cluster for the whole file */
static natsConnection *nc[NODES];
static jsCtx *js[NODES];

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
    /* One server only: a test must know which node it talks to. */
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

/* Request subject on node i; the reply parsed as JSON (NULL: no reply). */
static json_t *request(int i, const char *subject, const char *body)
{
    natsMsg *m = NULL;
    if (natsConnection_RequestString(&m, nc[i], subject, body, REQ_MS) !=
        NATS_OK) {
        return NULL;
    }
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    return o;
}

static bool is_error(const json_t *o)
{
    return o == NULL || json_object_get(o, "error") != NULL;
}

/* The meta group has a leader every node knows (INFO answered through
 * each: a node that does not know it yet answers 503). */
static bool meta_ready(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        json_t *o = request(i, "$JS.API.INFO", "");
        bool ok = !is_error(o);
        json_decref(o);
        if (!ok) {
            return false;
        }
    }
    return true;
}

static int group_start(void **state)
{
    (void)state;
    static const char *const extra[] = {"-D", NULL};
    if (h_netns_start(&net, NODES, "cjs3",
                      getenv("CJS_DEBUG") != NULL ? extra : NULL) != 0) {
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        if (connect_node(i) != 0) {
            return -1;
        }
    }
    if (!h_poll(meta_ready, NULL, WAIT_MS)) {
        fprintf(stderr, "no meta leader within %d ms\n", WAIT_MS);
        return -1;
    }
    return 0;
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
    if (getenv("CJS_DEBUG") != NULL) {
        for (int i = 0; i < NODES; i++) {
            h_netns_print_log(&net, i);
        }
    }
    int rv = h_netns_cleanup(&net);
    nats_Close();
    return rv;
}

/* Stream info of STREAM asked on node i (NULL on error). */
static json_t *stream_info(int i)
{
    json_t *o = request(i, "$JS.API.STREAM.INFO." STREAM, "");
    if (is_error(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The stream leader's node index as node i reports it, or -1. */
static int leader_index(int i)
{
    json_t *o = stream_info(i);
    const char *l = json_string_value(
        json_object_get(json_object_get(o, "cluster"), "leader"));
    int idx = -1;
    for (int k = 0; l != NULL && k < NODES; k++) {
        if (strcmp(net.node[k].name, l) == 0) {
            idx = k;
        }
    }
    json_decref(o);
    return idx;
}

static bool stream_led_everywhere(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        if (net.node[i].running && leader_index(i) < 0) {
            return false;
        }
    }
    return true;
}

static void publish_through(int i, int k)
{
    char subj[32], data[32];
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    snprintf(subj, sizeof subj, "ord.%d", k);
    snprintf(data, sizeof data, "m%d", k);
    assert_int_equal(
        js_Publish(&pa, js[i], subj, data, (int)strlen(data), NULL, &jerr),
        NATS_OK);
    assert_int_equal(pa->Sequence, (uint64_t)k + 1);
    jsPubAck_Destroy(pa);
}

static void
an_r3_stream_takes_publishes_through_every_node_and_reads_back_in_order(
    void **state)
{
    (void)state;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"ord.>"};
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    natsStatus s = js_AddStream(&si, js[1], &cfg, NULL, &jerr);
    if (s != NATS_OK) {
        fprintf(stderr, "add stream: %s (%d): %s\n", natsStatus_GetText(s),
                (int)jerr, nats_GetLastError(NULL));
    }
    assert_int_equal(s, NATS_OK);
    jsStreamInfo_Destroy(si);
    assert_true(h_poll(stream_led_everywhere, NULL, WAIT_MS));
    for (int k = 0; k < MSGS; k++) {
        publish_through(k % NODES, k);
    }
    for (int i = 0; i < NODES; i++) {
        for (int k = 0; k < MSGS; k++) {
            natsMsg *m = NULL;
            char want[32];
            snprintf(want, sizeof want, "m%d", k);
            natsStatus gs =
                js_GetMsg(&m, js[i], STREAM, (uint64_t)k + 1, NULL, &jerr);
            if (gs != NATS_OK) {
                fprintf(stderr, "seq %d on %s: %s (%d)\n", k + 1,
                        net.node[i].name, natsStatus_GetText(gs), (int)jerr);
            }
            assert_int_equal(gs, NATS_OK);
            assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
            assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
            natsMsg_Destroy(m);
        }
    }
}

static void stream_info_agrees_on_every_node(void **state)
{
    (void)state;
    json_t *first = stream_info(0);
    assert_non_null(first);
    json_t *c0 = json_object_get(first, "cluster");
    assert_non_null(json_string_value(json_object_get(c0, "leader")));
    assert_string_equal(json_string_value(json_object_get(c0, "name")), "cjs3");
    assert_int_equal(json_array_size(json_object_get(c0, "replicas")),
                     NODES - 1);
    for (int i = 1; i < NODES; i++) {
        json_t *o = stream_info(i);
        assert_non_null(o);
        assert_string_equal(json_string_value(json_object_get(
                                json_object_get(o, "cluster"), "leader")),
                            json_string_value(json_object_get(c0, "leader")));
        assert_true(json_equal(json_object_get(o, "state"),
                               json_object_get(first, "state")));
        json_decref(o);
    }
    json_t *st = json_object_get(first, "state");
    assert_int_equal(json_integer_value(json_object_get(st, "messages")), MSGS);
    json_decref(first);
}

/* Send subject with a reply to a fresh inbox on node i; count answers:
 * the first within REQ_MS, then any other within ABSENT_MS (a second
 * answer from another node would arrive in that window). */
static int answers(int i, const char *subject, const char *body)
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;
    int n = 0;
    assert_int_equal(natsInbox_Create(&inbox), NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&sub, nc[i], inbox), NATS_OK);
    assert_int_equal(
        natsConnection_PublishRequestString(nc[i], subject, inbox, body),
        NATS_OK);
    for (int wait = REQ_MS; natsSubscription_NextMsg(&m, sub, wait) == NATS_OK;
         wait = ABSENT_MS) {
        natsMsg_Destroy(m);
        n++;
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    return n;
}

static void
every_api_request_is_answered_exactly_once_on_every_node(void **state)
{
    (void)state;
    static const char *const subjects[] = {
        "$JS.API.INFO",
        "$JS.API.STREAM.NAMES",
        "$JS.API.STREAM.INFO." STREAM,
        "$JS.API.STREAM.MSG.GET." STREAM,
    };
    for (int i = 0; i < NODES; i++) {
        for (size_t s = 0; s < sizeof subjects / sizeof subjects[0]; s++) {
            const char *body =
                strstr(subjects[s], "MSG.GET") != NULL ? "{\"seq\":1}" : "";
            int n = answers(i, subjects[s], body);
            if (n != 1) {
                fprintf(stderr, "%s on %s: %d answers\n", subjects[s],
                        net.node[i].name, n);
            }
            assert_int_equal(n, 1);
        }
    }
}

static natsSubscription *pull_sub(int i, const char *durable)
{
    jsSubOptions so;
    jsErrCode jerr = 0;
    natsSubscription *sub = NULL;
    jsSubOptions_Init(&so);
    so.Stream = STREAM;
    so.Config.AckWait = 2LL * 1000 * 1000 * 1000;
    assert_int_equal(
        js_PullSubscribe(&sub, js[i], "ord.>", durable, NULL, &so, &jerr),
        NATS_OK);
    return sub;
}

static uint64_t stream_seq(natsMsg *m)
{
    jsMsgMetaData *md = NULL;
    assert_int_equal(natsMsg_GetMetaData(&md, m), NATS_OK);
    uint64_t s = md->Sequence.Stream;
    jsMsgMetaData_Destroy(md);
    return s;
}

/* Fetch want messages on sub, acking each synchronously; *next is the
 * stream sequence expected first, advanced past each message. */
static void fetch_ack(natsSubscription *sub, int want, uint64_t *next)
{
    jsErrCode jerr = 0;
    while (want > 0) {
        natsMsgList l = {0};
        assert_int_equal(natsSubscription_Fetch(&l, sub, want, WAIT_MS, &jerr),
                         NATS_OK);
        for (int k = 0; k < l.Count; k++) {
            assert_int_equal(stream_seq(l.Msgs[k]), *next);
            (*next)++;
            assert_int_equal(natsMsg_AckSync(l.Msgs[k], NULL, &jerr), NATS_OK);
        }
        want -= l.Count;
        natsMsgList_Destroy(&l);
    }
}

static int follower_of(int leader)
{
    return (leader + 1) % NODES;
}

static void a_pull_consumer_on_a_follower_node_fetches_and_acks(void **state)
{
    (void)state;
    int leader = leader_index(0);
    assert_true(leader >= 0);
    int b = follower_of(leader);
    natsSubscription *sub = pull_sub(b, "PC");
    uint64_t next = 1;
    fetch_ack(sub, MSGS, &next);
    natsSubscription_Destroy(sub);
    /* Consumer info agrees on every node (answered by the leader). */
    for (int i = 0; i < NODES; i++) {
        json_t *o = request(i, "$JS.API.CONSUMER.INFO." STREAM ".PC", "");
        assert_false(is_error(o));
        json_t *floor = json_object_get(o, "ack_floor");
        assert_int_equal(
            json_integer_value(json_object_get(floor, "stream_seq")), MSGS);
        assert_int_equal(
            json_integer_value(json_object_get(o, "num_ack_pending")), 0);
        json_decref(o);
    }
}

struct moved {
    int from; /* the leader before the step-down */
};

static bool leader_moved(void *arg)
{
    struct moved *m = arg;
    int first = leader_index(0);
    if (first < 0 || first == m->from) {
        return false;
    }
    for (int i = 1; i < NODES; i++) {
        if (leader_index(i) != first) {
            return false;
        }
    }
    return true;
}

/* Step down through a node that does not lead (forwarded to the leader):
 * one success answer, then every node names the same new leader. */
static void step_down(const char *subject)
{
    struct moved m = {leader_index(0)};
    assert_true(m.from >= 0);
    json_t *o = request(follower_of(m.from), subject, "");
    assert_false(is_error(o));
    assert_true(json_is_true(json_object_get(o, "success")));
    json_decref(o);
    assert_true(h_poll(leader_moved, &m, WAIT_MS));
}

static void a_leader_step_down_hands_the_stream_to_another_node(void **state)
{
    (void)state;
    step_down("$JS.API.STREAM.LEADER.STEPDOWN." STREAM);
    /* A consumer step-down moves its stream's group (DESIGN §3). */
    step_down("$JS.API.CONSUMER.LEADER.STEPDOWN." STREAM ".PC");
    int leader = leader_index(0);
    json_t *o =
        request(follower_of(leader), "$JS.API.CONSUMER.INFO." STREAM ".PC", "");
    assert_false(is_error(o));
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(o, "cluster"), "leader")),
                        net.node[leader].name);
    json_decref(o);
}

struct load {
    int via;                             /* node the publisher talks to */
    int acked;                           /* acked publishes so far */
    uint64_t last_seq;                   /* highest acked sequence */
    char *payload[MSGS + LOAD_ACKS + 1]; /* by seq: what was acked there */
};

/* One publish of the load; retried by the caller when not acked. */
static bool publish_load(struct load *ld, int k)
{
    char subj[32], data[32];
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = REQ_MS;
    snprintf(subj, sizeof subj, "ord.load.%d", k);
    snprintf(data, sizeof data, "load%d", k);
    if (js_Publish(&pa, js[ld->via], subj, data, (int)strlen(data), &po,
                   &jerr) != NATS_OK) {
        return false;
    }
    uint64_t seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    assert_true(seq > MSGS && seq <= MSGS + LOAD_ACKS);
    assert_null(ld->payload[seq]); /* never acked for two payloads */
    ld->payload[seq] = strdup(data);
    ld->last_seq = seq > ld->last_seq ? seq : ld->last_seq;
    ld->acked++;
    return true;
}

/* Fetch UNACKED messages of consumer PC through node i and leave them
 * unacked: they follow the MSGS acked ones. */
static void fetch_unacked(int i)
{
    natsSubscription *sub = pull_sub(i, "PC");
    natsMsgList l = {0};
    jsErrCode jerr = 0;
    assert_int_equal(natsSubscription_Fetch(&l, sub, UNACKED, WAIT_MS, &jerr),
                     NATS_OK);
    assert_true(l.Count >= 1);
    assert_int_equal(stream_seq(l.Msgs[0]), MSGS + 1);
    natsMsgList_Destroy(&l);
    natsSubscription_Destroy(sub);
}

static void
killing_the_stream_leader_under_load_loses_no_acked_message(void **state)
{
    (void)state;
    static struct load ld;
    int leader = leader_index(0);
    assert_true(leader >= 0);
    ld.via = follower_of(leader);
    long long killed_ms = 0, first_ack_after_ms = 0;
    for (int k = 0; ld.acked < LOAD_ACKS;) {
        bool ok = publish_load(&ld, k);
        if (ok) {
            k++;
            if (killed_ms > 0 && first_ack_after_ms == 0) {
                first_ack_after_ms = h_now_ms();
            }
        }
        if (ld.acked == LOAD_ACKS / 4 && killed_ms == 0) {
            fetch_unacked(ld.via);
            assert_int_equal(h_netns_node_kill(&net, leader), 0);
            disconnect(leader);
            killed_ms = h_now_ms();
        }
        assert_true(killed_ms == 0 || h_now_ms() - killed_ms < FAILOVER_MS);
    }
    printf("# failover: first ack through %s %lld ms after kill -9 of %s\n",
           net.node[ld.via].name, first_ack_after_ms - killed_ms,
           net.node[leader].name);
    int now = leader_index(ld.via);
    assert_true(now >= 0 && now != leader);
    /* Every acked publish reads back at its acked sequence. */
    for (uint64_t s = MSGS + 1; s <= ld.last_seq; s++) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        if (ld.payload[s] == NULL) {
            continue; /* not acked (indeterminate): may or may not exist */
        }
        assert_int_equal(js_GetMsg(&m, js[ld.via], STREAM, s, NULL, &jerr),
                         NATS_OK);
        assert_memory_equal(natsMsg_GetData(m), ld.payload[s],
                            strlen(ld.payload[s]));
        natsMsg_Destroy(m);
        free(ld.payload[s]);
    }
    /* The consumer acked all of the first MSGS and left the next
     * UNACKED unacked before the kill: the new leader resumes at the first
     * unacked one (not lost, and nothing acked comes again). */
    natsSubscription *sub = pull_sub(ld.via, "PC");
    natsMsgList l = {0};
    jsErrCode jerr = 0;
    assert_int_equal(natsSubscription_Fetch(&l, sub, 1, WAIT_MS, &jerr),
                     NATS_OK);
    assert_int_equal(stream_seq(l.Msgs[0]), MSGS + 1);
    natsMsgList_Destroy(&l);
    natsSubscription_Destroy(sub);
    /* The killed node comes back and catches up. */
    assert_int_equal(h_netns_node_start(&net, leader), 0);
    assert_int_equal(connect_node(leader), 0);
}

/* Stream info through node i names the leader and every follower is
 * current with lag 0 (the leader's view: followers caught up). */
static bool caught_up(void *arg)
{
    (void)arg;
    json_t *o = stream_info(0);
    json_t *reps = json_object_get(json_object_get(o, "cluster"), "replicas");
    size_t k;
    json_t *r;
    bool ok = leader_index(0) >= 0 && json_array_size(reps) == NODES - 1;
    json_array_foreach(reps, k, r)
    {
        ok = ok && json_is_true(json_object_get(r, "current")) &&
             json_integer_value(json_object_get(r, "lag")) == 0;
    }
    json_decref(o);
    return ok;
}

struct cut_off {
    int leader;
};

/* The partitioned leader no longer answers as leader: its stream info
 * request finds no reachable leader (503) instead of its own answer. */
static bool stepped_down(void *arg)
{
    struct cut_off *c = arg;
    json_t *o = stream_info(c->leader);
    json_decref(o);
    return o == NULL;
}

struct ack_through {
    int via;
    uint64_t seq;
    char data[32];
};

static bool acked_through(void *arg)
{
    struct ack_through *a = arg;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = REQ_MS;
    if (js_Publish(&pa, js[a->via], "ord.part", a->data, (int)strlen(a->data),
                   &po, &jerr) != NATS_OK) {
        return false; /* 503 while a new leader is elected: try again */
    }
    a->seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    return true;
}

static void
a_leader_cut_off_from_its_followers_stops_acking_and_catches_up_after_heal(
    void **state)
{
    (void)state;
    assert_true(h_poll(caught_up, NULL, WAIT_MS));
    int leader = leader_index(0);
    int f1 = follower_of(leader), f2 = follower_of(f1);
    long long t0 = h_now_ms();
    assert_int_equal(h_netns_partition(&net, leader, f1), 0);
    assert_int_equal(h_netns_partition(&net, leader, f2), 0);
    /* The majority side elects a leader and acknowledges. */
    struct ack_through a = {f1, 0, "part1"};
    assert_true(h_poll(acked_through, &a, FAILOVER_MS));
    printf("# majority side acked %lld ms after the leader was cut off\n",
           h_now_ms() - t0);
    /* Check-quorum: the cut-off leader steps down; a publish through it
     * is not acknowledged. */
    struct cut_off c = {leader};
    assert_true(h_poll(stepped_down, &c, FAILOVER_MS));
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = REQ_MS;
    assert_int_not_equal(
        js_Publish(&pa, js[leader], "ord.part", "lost", 4, &po, &jerr),
        NATS_OK);
    assert_int_equal(h_netns_heal(&net, leader, f1), 0);
    assert_int_equal(h_netns_heal(&net, leader, f2), 0);
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);
    assert_true(h_poll(caught_up, NULL, WAIT_MS));
    /* Read back through the healed node (answered by the leader). */
    natsMsg *m = NULL;
    assert_int_equal(js_GetMsg(&m, js[leader], STREAM, a.seq, NULL, &jerr),
                     NATS_OK);
    assert_memory_equal(natsMsg_GetData(m), "part1", 5);
    natsMsg_Destroy(m);
}

struct first_pub {
    int via;
    bool created_here; /* the create was answered through via */
    const char *subject;
    uint64_t seq;
    natsStatus st;
    jsErrCode jerr;
};

/* One publish to the new stream through node via. Only "no responders"
 * (the node has not applied the stream's create yet: nothing was stored)
 * is tried again, and not on the node the create went through: it
 * answers the create only once it applied it. An ack or any other answer
 * ends the poll. */
static bool first_publish(void *arg)
{
    struct first_pub *p = arg;
    jsPubAck *pa = NULL;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = 2 * WAIT_MS;
    p->st = js_Publish(&pa, js[p->via], p->subject, "first", 5, &po, &p->jerr);
    if (p->st == NATS_NO_RESPONDERS && !p->created_here) {
        return false;
    }
    p->seq = p->st == NATS_OK ? pa->Sequence : 0;
    jsPubAck_Destroy(pa);
    return true;
}

/* Create stream NEW<c> (subjects new<c>.>) through node c, then publish
 * to it through every node at once: each acked, none answered 503. */
static void create_and_publish_at_once(int c)
{
    char name[16], subj[16];
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    snprintf(name, sizeof name, "NEW%d", c);
    snprintf(subj, sizeof subj, "new%d.>", c);
    const char *subjects[] = {subj};
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    natsStatus cs = js_AddStream(&si, js[c], &cfg, NULL, &jerr);
    if (cs != NATS_OK) {
        fprintf(stderr, "create: %s (%d) %s\n", natsStatus_GetText(cs),
                (int)jerr, nats_GetLastError(NULL));
    }
    assert_int_equal(cs, NATS_OK);
    jsStreamInfo_Destroy(si);
    snprintf(subj, sizeof subj, "new%d.a", c);
    for (int i = 0; i < NODES; i++) {
        struct first_pub p = {i, i == c, subj, 0, NATS_OK, 0};
        assert_true(h_poll(first_publish, &p, WAIT_MS));
        if (p.st != NATS_OK) {
            fprintf(stderr, "publish to %s through %s: %s (%d)\n", name,
                    net.node[i].name, natsStatus_GetText(p.st), (int)p.jerr);
        }
        assert_int_equal(p.st, NATS_OK); /* never a 503 */
        assert_int_equal(p.seq, (uint64_t)i + 1);
    }
}

/* No wait for an election: a new stream's first leader is elected while
 * the publishes wait for it (srv_js_forward.h parking), and the node a
 * create went through answers it only once it knows the stream. Created
 * through every node, so most creates do not go through the meta leader. */
static void
a_publish_right_after_a_stream_is_created_is_acked_on_every_node(void **state)
{
    (void)state;
    for (int c = 0; c < NODES; c++) {
        create_and_publish_at_once(c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            an_r3_stream_takes_publishes_through_every_node_and_reads_back_in_order),
        cmocka_unit_test(stream_info_agrees_on_every_node),
        cmocka_unit_test(
            every_api_request_is_answered_exactly_once_on_every_node),
        cmocka_unit_test(a_pull_consumer_on_a_follower_node_fetches_and_acks),
        cmocka_unit_test(a_leader_step_down_hands_the_stream_to_another_node),
        cmocka_unit_test(
            killing_the_stream_leader_under_load_loses_no_acked_message),
        cmocka_unit_test(
            a_leader_cut_off_from_its_followers_stops_acking_and_catches_up_after_heal),
        cmocka_unit_test(
            a_publish_right_after_a_stream_is_created_is_acked_on_every_node),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
