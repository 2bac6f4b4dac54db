/* An R3 stream's replicas with real keelds in network namespaces
 * (netns.c) and libnats (issue 7): DIRECT.GET through a node that does not
 * lead the stream is answered once and sees a publish acked just before,
 * by its seq or by its new subject (a follower answers only a message it
 * holds, a miss goes to the leader: docs/cluster.md); a push consumer with a
 * deliver_group whose members sit on every node delivers each message to
 * exactly one member, also with a plain subscriber of the deliver subject on a
 * node with a member; a follower partitioned away from both peers falls behind
 * while the other two keep acknowledging, then catches up after the heal (its
 * own /jsz state, the leader's lag for it, and its store read with `keel store
 * dump`). The cases share one cluster and run in order. Shared setup:
 * cjs_common.h. */
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
#define STREAM "REP"
#define WAIT_MS 10000 /* bounded waits for the cluster to agree */
#define REQ_MS 2000   /* one request's timeout */
#define ABSENT_MS 500 /* window in which no second answer may come */
#define DQ_MSGS 60    /* messages through the deliver group */
#define CUT_MSGS 20   /* acked while a follower is cut off */

static struct cjs cj;         /* one cluster for the whole file */
static struct cjs_ledger led; /* every acked publish */

static int group_setup(void **state)
{
    (void)state;
    if (cjs_start(&cj, NODES, "cjsr", NULL, WAIT_MS) != 0) {
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    cjs_ledger_free(&led);
    return cjs_stop(&cj);
}

static void create_stream(void)
{
    jsStreamConfig cfg;
    const char *subjects[] = {"rep.>"};
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = NODES;
    cfg.AllowDirect = true;
    cjs_add_stream_cfg(&cj, 0, &cfg, WAIT_MS);
}

static int leader(void)
{
    int l = cjs_wait_stream_led(&cj, STREAM, WAIT_MS);
    assert_true(l >= 0);
    return l;
}

/* Publish data on subject through node via until acked (bounded). */
struct pub {
    int via;
    const char *subject;
    const char *data;
};

static bool published(void *arg)
{
    struct pub *p = arg;
    return cjs_publish(&cj, p->via, p->subject, p->data, &led, REQ_MS);
}

static uint64_t publish(int via, const char *subject, const char *data)
{
    struct pub p = {via, subject, data};
    if (!h_poll(published, &p, WAIT_MS)) {
        fail_msg("no ack through %s within %d ms", cj.net.node[via].name,
                 WAIT_MS);
    }
    for (uint64_t s = led.last; s > 0; s--) {
        if (led.payload[s] != NULL && strcmp(led.payload[s], data) == 0) {
            return s;
        }
    }
    fail_msg("acked %s not in the ledger", data);
    return 0;
}

static void assert_header(natsMsg *m, const char *key, const char *want)
{
    const char *v = NULL;
    if (natsMsgHeader_Get(m, key, &v) != NATS_OK || strcmp(v, want) != 0) {
        fail_msg("header %s: %s, want %s", key, v != NULL ? v : "(none)", want);
    }
}

/* DIRECT.GET through node i (subject suffix, body): one answer, the
 * message at seq with its data. */
static void direct_get(int i, const char *subject, const char *body,
                       uint64_t seq, const char *data, const char *msg_subj)
{
    natsMsg *m = NULL;
    char want[24];
    int n = cjs_answers(&cj, i, subject, body, REQ_MS, ABSENT_MS, &m);
    if (n != 1) {
        fail_msg("%s through %s: %d answers", subject, cj.net.node[i].name, n);
    }
    snprintf(want, sizeof want, "%llu", (unsigned long long)seq);
    assert_header(m, "Nats-Stream", STREAM);
    assert_header(m, "Nats-Sequence", want);
    assert_header(m, "Nats-Subject", msg_subj);
    assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(data));
    assert_memory_equal(natsMsg_GetData(m), data, strlen(data));
    natsMsg_Destroy(m);
}

/* A follower that has not applied a message just acked does not answer
 * for it: the request goes to the leader, so it is there at once through
 * any node (docs/decisions/0036-...: a miss is the leader's). */
static void
a_direct_get_through_a_follower_is_answered_once_and_sees_an_acked_publish(
    void **state)
{
    (void)state;
    create_stream();
    int l = leader();
    for (int i = 0; i < NODES; i++) {
        if (i == l) {
            continue;
        }
        char subj[32], data[32], body[48];
        snprintf(subj, sizeof subj, "rep.dg.%d", i);
        snprintf(data, sizeof data, "dg-%d", i);
        uint64_t seq = publish(i, subj, data);
        snprintf(body, sizeof body, "{\"seq\":%llu}", (unsigned long long)seq);
        direct_get(i, "$JS.API.DIRECT.GET." STREAM, body, seq, data, subj);
        /* Last message of a subject, the subject in the request's. */
        char last[80];
        snprintf(last, sizeof last, "$JS.API.DIRECT.GET." STREAM ".%s", subj);
        direct_get(i, last, "", seq, data, subj);
    }
}

/* Every other node lists the queue interest of node i. */
struct interest {
    int from;
    const char *key;
};

static bool interest_everywhere(void *arg)
{
    struct interest *w = arg;
    for (int i = 0; i < NODES; i++) {
        if (i != w->from && !cjs_has_interest(&cj, i, w->from, w->key)) {
            return false;
        }
    }
    return true;
}

static void wait_interest(int from, const char *key)
{
    struct interest w = {from, key};
    assert_int_equal(natsConnection_Flush(cj.nc[from]), NATS_OK);
    assert_true(h_poll(interest_everywhere, &w, WAIT_MS));
}

/* Publish n messages on subject prefix.<k> through the nodes in turn;
 * returns the first acked sequence (they are consecutive: nothing else
 * publishes meanwhile). */
static uint64_t publish_n(const char *prefix, int n)
{
    uint64_t first = 0;
    for (int k = 0; k < n; k++) {
        char subj[48], data[48];
        snprintf(subj, sizeof subj, "%s.%d", prefix, k);
        snprintf(data, sizeof data, "%s-%d", prefix, k);
        uint64_t s = publish(k % NODES, subj, data);
        first = first == 0 ? s : first;
        assert_int_equal(s, first + (uint64_t)k);
    }
    return first;
}

/* Collect deliveries from the members until n arrived, then any extra
 * within ABSENT_MS; count[seq - first] per stream sequence, per_node[i]
 * per member. */
static void collect(natsSubscription **members, uint64_t first, int n,
                    int *count, int *per_node)
{
    int got = 0;
    long long deadline = h_now_ms() + WAIT_MS;
    long long quiet_until = 0;
    memset(count, 0, (size_t)n * sizeof *count);
    memset(per_node, 0, NODES * sizeof *per_node);
    for (;;) {
        bool any = false;
        for (int i = 0; i < NODES; i++) {
            natsMsg *m = NULL;
            if (members[i] == NULL ||
                natsSubscription_NextMsg(&m, members[i], 10) != NATS_OK) {
                continue;
            }
            uint64_t s = cjs_stream_seq(m);
            natsMsg_Destroy(m);
            assert_true(s >= first && s < first + (uint64_t)n);
            count[s - first]++;
            per_node[i]++;
            got++;
            any = true;
        }
        long long now = h_now_ms();
        if (got >= n && quiet_until == 0) {
            quiet_until = now + ABSENT_MS;
        }
        if (quiet_until > 0 && now >= quiet_until && !any) {
            return;
        }
        if (now > deadline) {
            fail_msg("%d of %d deliveries within %d ms", got, n, WAIT_MS);
        }
    }
}

static void assert_each_once(const int *count, int n, const int *per_node,
                             const char *what)
{
    printf("# deliver group (%s): %d / %d / %d per node\n", what, per_node[0],
           per_node[1], per_node[2]);
    for (int k = 0; k < n; k++) {
        if (count[k] != 1) {
            fail_msg("%s: message %d delivered %d times", what, k, count[k]);
        }
    }
}

/* A push consumer's deliveries are routed by the consumer leader; with a
 * deliver_group, each goes to one member cluster-wide, whichever nodes the
 * members (and other subscribers of the deliver subject) are on. */
static void
a_deliver_group_with_members_on_every_node_gets_each_message_once(void **state)
{
    (void)state;
    natsSubscription *members[NODES] = {NULL};
    natsSubscription *tap = NULL;
    int count[DQ_MSGS], per_node[NODES];
    int l = leader();
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(natsConnection_QueueSubscribeSync(
                             &members[i], cj.nc[i], "dq.deliver", "G"),
                         NATS_OK);
        wait_interest(i, "dq.deliver G");
    }
    json_t *o = cjs_request_retry(
        &cj, (l + 1) % NODES, "$JS.API.CONSUMER.DURABLE.CREATE." STREAM ".DQ",
        "{\"stream_name\":\"" STREAM "\",\"config\":{\"durable_name\":\"DQ\","
        "\"deliver_subject\":\"dq.deliver\",\"deliver_group\":\"G\","
        "\"ack_policy\":\"none\",\"filter_subject\":\"rep.dq.>\"}}",
        WAIT_MS);
    assert_false(cjs_is_error(o));
    json_decref(o);

    uint64_t first = publish_n("rep.dq.a", DQ_MSGS / 2);
    collect(members, first, DQ_MSGS / 2, count, per_node);
    assert_each_once(count, DQ_MSGS / 2, per_node, "members on every node");

    /* A plain subscriber of the deliver subject on a node that also has a
     * member: that node gets every message for it, and must not hand it
     * to its member too when another node's member was chosen. */
    int f = (l + 1) % NODES;
    assert_int_equal(natsConnection_SubscribeSync(&tap, cj.nc[f], "dq.deliver"),
                     NATS_OK);
    wait_interest(f, "dq.deliver");
    first = publish_n("rep.dq.b", DQ_MSGS / 2);
    collect(members, first, DQ_MSGS / 2, count, per_node);
    assert_each_once(count, DQ_MSGS / 2, per_node, "and a plain subscriber");
    for (int k = 0; k < DQ_MSGS / 2; k++) {
        natsMsg *m = NULL;
        assert_int_equal(natsSubscription_NextMsg(&m, tap, WAIT_MS), NATS_OK);
        natsMsg_Destroy(m);
    }

    /* No member on the consumer leader's node. */
    natsSubscription_Destroy(members[l]);
    members[l] = NULL;
    assert_int_equal(natsConnection_Flush(cj.nc[l]), NATS_OK);
    first = publish_n("rep.dq.c", DQ_MSGS / 2);
    collect(members, first, DQ_MSGS / 2, count, per_node);
    assert_each_once(count, DQ_MSGS / 2, per_node, "none on the leader");
    natsSubscription_Destroy(tap);
    for (int i = 0; i < NODES; i++) {
        natsSubscription_Destroy(members[i]);
    }
}

/* The state of STREAM in node i's own store (cjs_local_last_seq). */
static long long local_last_seq(int i, long long *messages)
{
    return cjs_local_last_seq(&cj, i, STREAM, messages);
}

/* The leader's view of follower f (stream info through node via). */
static bool follower_view(int via, int f, bool *current, long long *lag)
{
    json_t *o = cjs_stream_info(&cj, via, STREAM);
    size_t k;
    json_t *r;
    bool found = false;
    json_array_foreach(
        json_object_get(json_object_get(o, "cluster"), "replicas"), k, r)
    {
        const char *nm = json_string_value(json_object_get(r, "name"));
        if (nm != NULL && strcmp(nm, cj.net.node[f].name) == 0) {
            *current = json_is_true(json_object_get(r, "current"));
            *lag = json_integer_value(json_object_get(r, "lag"));
            found = true;
        }
    }
    json_decref(o);
    return found;
}

struct behind {
    int via, f;
    long long lag;
};

/* The leader sees f behind, and f's own store lacks the last acked one. */
static bool is_behind(void *arg)
{
    struct behind *b = arg;
    bool current = true;
    long long msgs = 0;
    return follower_view(b->via, b->f, &current, &b->lag) && !current &&
           b->lag > 0 && local_last_seq(b->f, &msgs) < (long long)led.last;
}

/* The leader sees f current with lag 0, and f's own store has every
 * message the leader's has. */
static bool is_caught_up(void *arg)
{
    struct behind *b = arg;
    bool current = false;
    long long msgs = -1, lmsgs = -2;
    int l = cjs_stream_leader(&cj, b->via, STREAM);
    return l >= 0 && l != b->f &&
           follower_view(b->via, b->f, &current, &b->lag) && current &&
           b->lag == 0 &&
           local_last_seq(b->f, &msgs) == local_last_seq(l, &lmsgs) &&
           msgs == lmsgs && msgs > 0;
}

struct known {
    int i;
    int not_found; /* 10059 answers */
};

static bool stream_known(void *arg)
{
    struct known *k = arg;
    json_t *o = cjs_request(&cj, k->i, "$JS.API.STREAM.INFO." STREAM, "");
    json_t *e = json_object_get(o, "error");
    k->not_found +=
        json_integer_value(json_object_get(e, "err_code")) == 10059 ? 1 : 0;
    bool ok = o != NULL && e == NULL;
    json_decref(o);
    return ok;
}

static void
a_partitioned_follower_falls_behind_and_catches_up_after_the_heal(void **state)
{
    (void)state;
    int l = leader();
    int f = (l + 1) % NODES, g = (l + 2) % NODES;
    struct behind b = {g, f, 0};
    assert_true(h_poll(is_caught_up, &b, WAIT_MS));
    assert_int_equal(h_netns_partition(&cj.net, f, l), 0);
    assert_int_equal(h_netns_partition(&cj.net, f, g), 0);
    /* The two others keep acknowledging. */
    for (int k = 0; k < CUT_MSGS; k++) {
        char subj[32], data[32];
        snprintf(subj, sizeof subj, "rep.cut.%d", k);
        snprintf(data, sizeof data, "cut-%d", k);
        (void)publish(k % 2 == 0 ? l : g, subj, data);
    }
    assert_true(h_poll(is_behind, &b, WAIT_MS));
    long long msgs = 0;
    printf("# cut off: %s at seq %lld, lag %lld, leader at %llu\n",
           cj.net.node[f].name, local_last_seq(f, &msgs), b.lag,
           (unsigned long long)led.last);
    long long t0 = h_now_ms();
    assert_int_equal(h_netns_heal(&cj.net, f, l), 0);
    assert_int_equal(h_netns_heal(&cj.net, f, g), 0);
    assert_true(h_poll(is_caught_up, &b, WAIT_MS));
    printf("# %s caught up %lld ms after the heal\n", cj.net.node[f].name,
           h_now_ms() - t0);
    /* Its store holds every message acked while it was cut off. */
    cjs_disconnect(&cj, f);
    assert_int_equal(h_netns_node_stop(&cj.net, f), 0);
    assert_int_equal(cjs_store_count(&cj, f, STREAM, "cut-"), CUT_MSGS);
    /* Asked at once after its restart, before it heard from a meta
     * leader, it never calls the stream unknown (10059). */
    assert_int_equal(h_netns_node_start(&cj.net, f), 0);
    assert_int_equal(cjs_connect(&cj, f), 0);
    struct known k = {f, 0};
    assert_true(h_poll(stream_known, &k, WAIT_MS));
    assert_int_equal(k.not_found, 0);
    assert_int_equal(h_netns_wait_mesh(&cj.net, WAIT_MS), 0);
    cjs_check_acked(&cj, f, STREAM, &led);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_direct_get_through_a_follower_is_answered_once_and_sees_an_acked_publish),
        cmocka_unit_test(
            a_deliver_group_with_members_on_every_node_gets_each_message_once),
        cmocka_unit_test(
            a_partitioned_follower_falls_behind_and_catches_up_after_the_heal),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
