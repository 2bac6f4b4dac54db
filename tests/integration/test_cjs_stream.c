/* Clustered JetStream through every node (issue 7, docs/design.md §6 A3) with
 * real keelds in network namespaces (netns.c) and libnats: an R3 stream
 * created through one node takes publishes through every node and reads
 * back in order on every node; stream info agrees on every node; each API
 * request is answered exactly once whichever node it reaches; a pull
 * consumer made on a node that does not lead the stream fetches and acks
 * there and its info agrees on every node; kill -9 of the stream leader
 * under a publish load: a new leader within a bound (the first ack after
 * the kill, measured and printed), no acked message lost, and the consumer
 * resumes after its acked progress (every later message delivered, none
 * acked delivered again). The cases share one cluster and run in order
 * (each builds on the stream the first made). Shared setup: cjs_common.h. */
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

#define NODES 3
#define STREAM "ORD"
#define MSGS 30
#define WAIT_MS 10000     /* bounded waits for the cluster to agree */
#define REQ_MS 2000       /* one request's timeout */
#define ABSENT_MS 500     /* window in which no second answer may come */
#define FAILOVER_MS 15000 /* bound on a new stream leader after kill -9 */
#define LOAD_ACKS 200     /* acked publishes of the failover load */
#define UNACKED 5         /* fetched, never acked, before the kill */

static struct cjs cj; /* one cluster for the whole file */

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjs3", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

static json_t *request(int i, const char *subject, const char *body)
{
    return cjs_request(&cj, i, subject, body);
}

static json_t *stream_info(int i)
{
    return cjs_stream_info(&cj, i, STREAM);
}

/* The stream leader's node index as node i reports it, or -1. */
static int leader_index(int i)
{
    return cjs_stream_leader(&cj, i, STREAM);
}

static struct cjs_ledger led; /* every acked publish of the file */

/* Publish payload m<k> through node i: acked at sequence k + 1. */
static void publish_through(int i, int k)
{
    char subj[32], data[32];
    snprintf(subj, sizeof subj, "ord.%d", k);
    snprintf(data, sizeof data, "m%d", k);
    assert_true(cjs_publish(&cj, i, subj, data, &led, CJS_REQ_MS));
    assert_int_equal(led.last, (uint64_t)k + 1);
}

static void
an_r3_stream_takes_publishes_through_every_node_and_reads_back_in_order(
    void **state)
{
    (void)state;
    cjs_add_stream(&cj, 1, STREAM, "ord.>", 3, WAIT_MS);
    for (int k = 0; k < MSGS; k++) {
        publish_through(k % NODES, k);
    }
    for (int i = 0; i < NODES; i++) {
        cjs_check_acked(&cj, i, STREAM, &led);
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

static int answers(int i, const char *subject, const char *body)
{
    return cjs_answers(&cj, i, subject, body, REQ_MS, ABSENT_MS, NULL);
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
                        cj.net.node[i].name, n);
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
        js_PullSubscribe(&sub, cj.js[i], "ord.>", durable, NULL, &so, &jerr),
        NATS_OK);
    return sub;
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
    cjs_fetch_ack(sub, MSGS, &next, WAIT_MS);
    natsSubscription_Destroy(sub);
    /* Consumer info agrees on every node (each answered by the stream
     * leader): all MSGS acked, nothing pending, the same leader. */
    static const char *const keys[] = {"delivered", "ack_floor",
                                       "num_ack_pending", "num_redelivered",
                                       "num_pending"};
    json_t *first = NULL;
    for (int i = 0; i < NODES; i++) {
        json_t *o = request(i, "$JS.API.CONSUMER.INFO." STREAM ".PC", "");
        assert_false(cjs_is_error(o));
        json_t *floor = json_object_get(o, "ack_floor");
        assert_int_equal(
            json_integer_value(json_object_get(floor, "stream_seq")), MSGS);
        assert_int_equal(
            json_integer_value(json_object_get(o, "num_ack_pending")), 0);
        assert_int_equal(json_integer_value(json_object_get(o, "num_pending")),
                         0);
        for (size_t k = 0; first != NULL && k < sizeof keys / sizeof *keys;
             k++) {
            if (!json_equal(json_object_get(o, keys[k]),
                            json_object_get(first, keys[k]))) {
                fail_msg("consumer info %s differs on %s", keys[k],
                         cj.net.node[i].name);
            }
        }
        const char *l = json_string_value(
            json_object_get(json_object_get(o, "cluster"), "leader"));
        if (first != NULL &&
            (l == NULL || strcmp(l, json_string_value(json_object_get(
                                        json_object_get(first, "cluster"),
                                        "leader"))) != 0)) {
            fail_msg("consumer info leader %s on %s", l != NULL ? l : "none",
                     cj.net.node[i].name);
        }
        if (first == NULL) {
            first = o;
        } else {
            json_decref(o);
        }
    }
    json_decref(first);
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
    assert_false(cjs_is_error(o));
    assert_true(json_is_true(json_object_get(o, "success")));
    json_decref(o);
    assert_true(h_poll(leader_moved, &m, WAIT_MS));
}

static void a_leader_step_down_hands_the_stream_to_another_node(void **state)
{
    (void)state;
    step_down("$JS.API.STREAM.LEADER.STEPDOWN." STREAM);
    /* A consumer step-down moves its stream's group (docs/design.md §3). */
    step_down("$JS.API.CONSUMER.LEADER.STEPDOWN." STREAM ".PC");
    int leader = leader_index(0);
    json_t *o =
        request(follower_of(leader), "$JS.API.CONSUMER.INFO." STREAM ".PC", "");
    assert_false(cjs_is_error(o));
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(o, "cluster"), "leader")),
                        cj.net.node[leader].name);
    json_decref(o);
}

struct led_by {
    int node;
};

static bool led_by_node(void *arg)
{
    const struct led_by *w = arg;
    int l = -1;
    return cjs_stream_agreed(&cj, STREAM, &l) && l == w->node;
}

/* Step down with {"placement":{"preferred":NAME}} through node via: the
 * answer's err_code (0: success). */
static json_int_t step_down_to(int via, const char *name)
{
    char body[96];
    snprintf(body, sizeof body, "{\"placement\":{\"preferred\":\"%s\"}}", name);
    json_t *o = request(via, "$JS.API.STREAM.LEADER.STEPDOWN." STREAM, body);
    assert_non_null(o);
    json_int_t code = json_integer_value(
        json_object_get(json_object_get(o, "error"), "err_code"));
    assert_true(code != 0 || json_is_true(json_object_get(o, "success")));
    json_decref(o);
    return code;
}

/* A step-down names the node to lead, as nats-server's placement
 * "preferred" and `keel cluster transfer-leader --stream --to`: one ask
 * through any node makes each node in turn the leader (twice round, so
 * an ignored preference fails: a random pick of two would match all six
 * one time in 64). A name that is no voter of the stream is refused. */
static void a_step_down_hands_the_stream_to_the_preferred_node(void **state)
{
    (void)state;
    for (int k = 0; k < 2 * NODES; k++) {
        int want = (leader_index(0) + 1 + k % 2) % NODES;
        assert_int_equal(step_down_to(k % NODES, cj.net.node[want].name), 0);
        struct led_by w = {want};
        assert_true(h_poll(led_by_node, &w, WAIT_MS));
    }
    int l = leader_index(0);
    assert_int_equal(step_down_to(0, cj.net.node[l].name), 0); /* leads */
    assert_int_equal(step_down_to(0, "nosuch"), 10040);
    assert_int_equal(leader_index(0), l);
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
    assert_int_equal(cjs_stream_seq(l.Msgs[0]), MSGS + 1);
    natsMsgList_Destroy(&l);
    natsSubscription_Destroy(sub);
}

/* Consumer PC after the failover, through node i: every stream sequence
 * after the MSGS acked before it up to last comes (nothing skipped), none
 * of the acked ones comes again, and a message acked here is not
 * delivered again (at-least-once allows redelivering only what was not
 * acked: the UNACKED fetched before the kill). Ends with nothing left. */
static void consumer_resumes(int i, uint64_t last)
{
    static bool acked[CJS_SEQ_MAX + 1];
    natsSubscription *sub = pull_sub(i, "PC");
    uint64_t left = last - MSGS;
    jsErrCode jerr = 0;
    assert_true(last < CJS_SEQ_MAX);
    while (left > 0) {
        natsMsgList l = {0};
        natsStatus st = natsSubscription_Fetch(&l, sub, 64, WAIT_MS, &jerr);
        if (st != NATS_OK) {
            fail_msg("fetch with %llu of %llu left: %s (%d)",
                     (unsigned long long)left, (unsigned long long)last,
                     natsStatus_GetText(st), (int)jerr);
        }
        for (int k = 0; k < l.Count; k++) {
            uint64_t s = cjs_stream_seq(l.Msgs[k]);
            if (s <= MSGS || s > last || acked[s]) {
                fail_msg("seq %llu delivered again (acked before)",
                         (unsigned long long)s);
            }
            assert_int_equal(natsMsg_AckSync(l.Msgs[k], NULL, &jerr), NATS_OK);
            acked[s] = true;
            left--;
        }
        natsMsgList_Destroy(&l);
    }
    natsMsgList l = {0};
    assert_int_equal(natsSubscription_Fetch(&l, sub, 1, ABSENT_MS, &jerr),
                     NATS_TIMEOUT);
    natsSubscription_Destroy(sub);
}

static uint64_t last_seq(int i)
{
    json_t *o = stream_info(i);
    assert_non_null(o);
    uint64_t s = (uint64_t)json_integer_value(
        json_object_get(json_object_get(o, "state"), "last_seq"));
    json_decref(o);
    return s;
}

static void
killing_the_stream_leader_under_load_loses_no_acked_message(void **state)
{
    (void)state;
    int leader = leader_index(0);
    assert_true(leader >= 0);
    int via = follower_of(leader);
    int acked0 = led.acked;
    long long killed_ms = 0, first_ack_after_ms = 0;
    for (int k = 0; led.acked - acked0 < LOAD_ACKS;) {
        char subj[32], data[32];
        snprintf(subj, sizeof subj, "ord.load.%d", k);
        snprintf(data, sizeof data, "load%d", k);
        if (cjs_publish(&cj, via, subj, data, &led, REQ_MS)) {
            k++;
            if (killed_ms > 0 && first_ack_after_ms == 0) {
                first_ack_after_ms = h_now_ms();
            }
        }
        if (led.acked - acked0 == LOAD_ACKS / 4 && killed_ms == 0) {
            fetch_unacked(via);
            assert_int_equal(h_netns_node_kill(&cj.net, leader), 0);
            cjs_disconnect(&cj, leader);
            killed_ms = h_now_ms();
        }
        assert_true(killed_ms == 0 || h_now_ms() - killed_ms < FAILOVER_MS);
    }
    /* The first ack after the kill needs a new leader elected, known to
     * via and the publish forwarded to it: the failover time a client
     * sees. */
    printf("# failover: first ack through %s %lld ms after kill -9 of %s\n",
           cj.net.node[via].name, first_ack_after_ms - killed_ms,
           cj.net.node[leader].name);
    int now = leader_index(via);
    assert_true(now >= 0 && now != leader);
    /* Every acked publish reads back at its acked sequence. */
    cjs_check_acked(&cj, via, STREAM, &led);
    /* The consumer acked all of the first MSGS and left the next
     * UNACKED unacked before the kill: the new leader resumes after its
     * acked progress and delivers the rest, load included. */
    consumer_resumes(via, last_seq(via));
    /* The killed node comes back and catches up. */
    assert_int_equal(h_netns_node_start(&cj.net, leader), 0);
    assert_int_equal(cjs_connect(&cj, leader), 0);
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
    if (js_Publish(&pa, cj.js[a->via], "ord.part", a->data,
                   (int)strlen(a->data), &po, &jerr) != NATS_OK) {
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
    assert_int_equal(h_netns_partition(&cj.net, leader, f1), 0);
    assert_int_equal(h_netns_partition(&cj.net, leader, f2), 0);
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
        js_Publish(&pa, cj.js[leader], "ord.part", "lost", 4, &po, &jerr),
        NATS_OK);
    assert_int_equal(h_netns_heal(&cj.net, leader, f1), 0);
    assert_int_equal(h_netns_heal(&cj.net, leader, f2), 0);
    assert_int_equal(h_netns_wait_mesh(&cj.net, WAIT_MS), 0);
    assert_true(h_poll(caught_up, NULL, WAIT_MS));
    /* Read back through the healed node (answered by the leader). */
    natsMsg *m = NULL;
    assert_int_equal(js_GetMsg(&m, cj.js[leader], STREAM, a.seq, NULL, &jerr),
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
    p->st =
        js_Publish(&pa, cj.js[p->via], p->subject, "first", 5, &po, &p->jerr);
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
    natsStatus cs = js_AddStream(&si, cj.js[c], &cfg, NULL, &jerr);
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
                    cj.net.node[i].name, natsStatus_GetText(p.st), (int)p.jerr);
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
        cmocka_unit_test(a_step_down_hands_the_stream_to_the_preferred_node),
        cmocka_unit_test(
            killing_the_stream_leader_under_load_loses_no_acked_message),
        cmocka_unit_test(
            a_leader_cut_off_from_its_followers_stops_acking_and_catches_up_after_heal),
        cmocka_unit_test(
            a_publish_right_after_a_stream_is_created_is_acked_on_every_node),
    };
    int rv = cmocka_run_group_tests(tests, group_setup, group_teardown);
    cjs_ledger_free(&led);
    return rv;
}
