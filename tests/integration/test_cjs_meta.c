/* The JetStream meta group and stream placement across three real keelds
 * in network namespaces (netns.c; issue 7, docs/design.md §3): the meta group
 * is bootstrapped once from the full seed list and every node learns its
 * leader; a stream created through one node is known on every node with
 * one leader; more replicas than meta voters is refused (10023); R1
 * streams are placed on the least-loaded nodes (ties by name); a publish
 * through the stream leader's node is acked and is in the store of all
 * three nodes (read with `keel store dump` from each stopped node); after
 * a restart of every node the meta group opens from disk (no second
 * bootstrap) and the streams and messages are all there. The cases share
 * one cluster and run in order. */
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
#define STREAM "META3"
#define MSGS 20
#define WAIT_MS 15000 /* bounded waits for the cluster to agree */

static struct cjs cj; /* one cluster for the whole file */

struct fx {
    int unused; /* the cluster is file-wide: see group_setup */
};

static void disconnect_all(void)
{
    for (int i = 0; i < NODES; i++) {
        cjs_disconnect(&cj, i);
    }
}

static int connect_all(void)
{
    for (int i = 0; i < NODES; i++) {
        if (cjs_connect(&cj, i) != 0) {
            return -1;
        }
    }
    return 0;
}

static json_t *request(int i, const char *subject, const char *body)
{
    return cjs_request(&cj, i, subject, body);
}

static bool is_error(const json_t *o)
{
    return cjs_is_error(o);
}

/* The leader name of stream name as node i reports it (copied into out);
 * false when unknown. */
static bool leader_of(int i, const char *name, char *out, size_t len)
{
    char subj[128];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.INFO.%s", name);
    json_t *o = request(i, subj, "");
    const char *l = json_string_value(
        json_object_get(json_object_get(o, "cluster"), "leader"));
    bool ok = !is_error(o) && l != NULL && l[0] != '\0';
    if (ok) {
        snprintf(out, len, "%s", l);
    }
    json_decref(o);
    return ok;
}

/* Every node names the same leader of STREAM. */
static bool stream_agreed(void *arg)
{
    char first[64] = "";
    char l[64];
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        if (!leader_of(i, STREAM, l, sizeof l)) {
            return false;
        }
        if (i > 0 && strcmp(l, first) != 0) {
            return false;
        }
        snprintf(first, sizeof first, "%s", l);
    }
    return true;
}

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjsm", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

static int setup(void **state)
{
    static struct fx f;
    memset(&f, 0, sizeof f);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return 0;
}

struct create_req {
    int via;
    char subj[128];
    char body[256];
    json_t *reply;
};

/* Sent; false (try again) while the answer is 503 10008: the meta group
 * is between leaders (a loaded machine can delay heartbeats). */
static bool create_answered(void *arg)
{
    struct create_req *c = arg;
    json_decref(c->reply);
    c->reply = request(c->via, c->subj, c->body);
    json_t *e = json_object_get(c->reply, "error");
    return c->reply != NULL &&
           (e == NULL ||
            json_integer_value(json_object_get(e, "err_code")) != 10008);
}

static json_t *create(int via, const char *name, const char *subject, int r)
{
    struct create_req c = {.via = via};
    snprintf(c.subj, sizeof c.subj, "$JS.API.STREAM.CREATE.%s", name);
    snprintf(c.body, sizeof c.body,
             "{\"name\":\"%s\",\"subjects\":[\"%s\"],\"num_replicas\":%d}",
             name, subject, r);
    (void)h_poll(create_answered, &c, WAIT_MS);
    return c.reply;
}

static void
a_stream_created_through_one_node_is_known_on_every_node(void **state)
{
    (void)state;
    json_t *o = create(1, STREAM, "meta3.>", 3);
    assert_false(is_error(o));
    json_decref(o);
    assert_true(h_poll(stream_agreed, NULL, WAIT_MS));
    for (int i = 0; i < NODES; i++) {
        json_t *n = request(i, "$JS.API.STREAM.NAMES", "");
        json_t *names = json_object_get(n, "streams");
        assert_int_equal(json_array_size(names), 1);
        assert_string_equal(json_string_value(json_array_get(names, 0)),
                            STREAM);
        json_decref(n);
    }
}

static void
more_replicas_than_meta_voters_is_insufficient_resources(void **state)
{
    (void)state;
    json_t *o = create(0, "TOOMANY", "toomany.>", 5);
    json_t *e = json_object_get(o, "error");
    assert_non_null(e);
    assert_int_equal(json_integer_value(json_object_get(e, "err_code")), 10023);
    json_decref(o);
    json_t *n = request(2, "$JS.API.STREAM.INFO.TOOMANY", "");
    assert_true(is_error(n));
    json_decref(n);
}

static bool r1_led(void *arg)
{
    char l[64];
    return leader_of(0, arg, l, sizeof l);
}

static void r1_streams_go_to_the_least_loaded_nodes_ties_by_name(void **state)
{
    (void)state;
    /* Each node hosts one group (the R3 stream): the first R1 goes to n1
     * (tie, by name), the next to n2, then n3. */
    static const char *const names[] = {"ONE1", "ONE2", "ONE3"};
    static const char *const subjects[] = {"one1.>", "one2.>", "one3.>"};
    for (int k = 0; k < 3; k++) {
        char l[64];
        json_t *o = create(k, names[k], subjects[k], 1);
        assert_false(is_error(o));
        json_decref(o);
        assert_true(h_poll(r1_led, (void *)names[k], WAIT_MS));
        assert_true(leader_of(0, names[k], l, sizeof l));
        assert_string_equal(l, cj.net.node[k].name);
    }
}

static int dumped_publishes(int i)
{
    return cjs_store_count(&cj, i, STREAM, "cjsm-");
}

static void
a_publish_acked_by_the_leader_is_in_the_store_of_every_node(void **state)
{
    (void)state;
    char l[64];
    assert_true(leader_of(0, STREAM, l, sizeof l));
    int ld = cjs_node_named(&cj, l);
    assert_true(ld >= 0);
    for (int k = 0; k < MSGS; k++) {
        char data[32];
        snprintf(data, sizeof data, "cjsm-%d", k);
        json_t *a = request(ld, "meta3.x", data);
        assert_false(is_error(a));
        assert_int_equal(json_integer_value(json_object_get(a, "seq")), k + 1);
        json_decref(a);
    }
    /* Stop every node (cleanly: the acked entries are on a majority of
     * disks already; a follower may still be catching up, so each dump is
     * taken after all stopped and every follower had its chance). */
    disconnect_all();
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(h_netns_node_stop(&cj.net, i), 0);
    }
    int majority = 0;
    for (int i = 0; i < NODES; i++) {
        int n = dumped_publishes(i);
        fprintf(stderr, "node %s holds %d of %d acked publishes\n",
                cj.net.node[i].name, n, MSGS);
        assert_true(n == 0 || n == MSGS);
        majority += n == MSGS ? 1 : 0;
    }
    /* PubAck after a majority commit: at least two stores hold them. */
    assert_true(majority >= 2);
}

/* The leader reports both followers current with lag 0. */
static bool followers_current(void *arg)
{
    (void)arg;
    json_t *o = request(0, "$JS.API.STREAM.INFO." STREAM, "");
    json_t *reps = json_object_get(json_object_get(o, "cluster"), "replicas");
    size_t n = 0;
    for (size_t k = 0; k < json_array_size(reps); k++) {
        json_t *r = json_array_get(reps, k);
        n += json_is_true(json_object_get(r, "current")) &&
                     json_integer_value(json_object_get(r, "lag")) == 0
                 ? 1
                 : 0;
    }
    json_int_t msgs = json_integer_value(
        json_object_get(json_object_get(o, "state"), "messages"));
    json_decref(o);
    return n == NODES - 1 && msgs == MSGS;
}

/* Start every (stopped) node, wait for the mesh and the meta leader. */
static void start_all(void)
{
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(h_netns_node_start(&cj.net, i), 0);
    }
    assert_int_equal(h_netns_wait_mesh(&cj.net, WAIT_MS), 0);
    assert_int_equal(connect_all(), 0);
    assert_true(h_poll(cjs_meta_ready, &cj, WAIT_MS));
}

static void
after_a_restart_of_every_node_the_meta_group_opens_from_disk(void **state)
{
    (void)state;
    start_all();
    assert_true(h_poll(stream_agreed, NULL, WAIT_MS));
    for (int i = 0; i < NODES; i++) {
        json_t *n = request(i, "$JS.API.STREAM.NAMES", "");
        assert_int_equal(json_array_size(json_object_get(n, "streams")), 4);
        json_decref(n);
    }
    assert_true(h_poll(followers_current, NULL, WAIT_MS));
    /* Every store holds every acked publish once followers caught up. */
    disconnect_all();
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(h_netns_node_stop(&cj.net, i), 0);
    }
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(dumped_publishes(i), MSGS);
    }
}

/* A publish through any node right after the create was answered is
 * stored. The meta leader answers a create once a majority holds it; a
 * follower learns the commit a heartbeat later, and until then knows no
 * stream for the subject: the publish found no responders there. Now it
 * waits (srv_js_fwd_late_park) for that node's meta state to apply. Each
 * node creates in turn, so some creates are answered by the meta leader
 * itself (a create forwarded from a follower is answered only once that
 * follower applied it). */
static void
a_publish_right_after_the_create_is_stored_on_every_node(void **state)
{
    (void)state;
    struct cjs_ledger l = {0};
    start_all(); /* the case before stopped every node */
    for (int k = 0; k < 2 * NODES; k++) {
        char name[16], subj[32];
        snprintf(name, sizeof name, "LATE%d", k);
        snprintf(subj, sizeof subj, "late%d.x", k);
        json_t *o = create(k % NODES, name, subj, 3);
        assert_false(is_error(o));
        json_decref(o);
        for (int j = 1; j < NODES; j++) {
            int via = (k + j) % NODES;
            if (!cjs_publish(&cj, via, subj, name, &l, 5000)) {
                fail_msg("publish to %s through node %d right after its "
                         "create was not acked",
                         name, via);
            }
        }
        cjs_ledger_free(&l);
        memset(&l, 0, sizeof l);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_stream_created_through_one_node_is_known_on_every_node, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            more_replicas_than_meta_voters_is_insufficient_resources, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            r1_streams_go_to_the_least_loaded_nodes_ties_by_name, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_publish_acked_by_the_leader_is_in_the_store_of_every_node, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            after_a_restart_of_every_node_the_meta_group_opens_from_disk, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_publish_right_after_the_create_is_stored_on_every_node, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
