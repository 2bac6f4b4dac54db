/* A mirror whose leader holds no replica of its origin reads it through
 * the cluster (docs/decisions/0032-mirrors-pull-into-the-log.md, "Reading
 * an origin elsewhere"), on three real keelds in network namespaces: an R1
 * mirror created before its R1 origin, so placement by load puts the two
 * on different nodes; 1,000 publishes, the origin's only node killed (-9)
 * and restarted half way. The mirror ends with exactly the origin's seqs,
 * subjects, payloads and timestamps, none missing and none twice. An R3
 * mirror of that origin led by a node that is not the origin's keeps
 * going, as it reads remotely too. Shared setup: cjs_common.h. */
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
#include "harness.h"

#define NODES 3
#define WAIT_MS 20000
#define MSGS 1000

static struct cjs cj; /* one cluster for the whole file */

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjsmirx", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

/* A running node other than skip (or -1). */
static int running_other(int skip)
{
    for (int i = 0; i < NODES; i++) {
        if (i != skip && cj.net.node[i].running) {
            return i;
        }
    }
    return -1;
}

static json_int_t state_int(int i, const char *stream, const char *key)
{
    return cjs_state_int(&cj, i, stream, key);
}

/* Publish payloads "m<k>" for k in [*next, upto), each retried (bounded)
 * through any running node until acked. */
static void publish_until(struct cjs_ledger *l, int *next, int upto)
{
    for (; *next < upto; (*next)++) {
        char data[32];
        snprintf(data, sizeof data, "m%d", *next);
        cjs_publish_any(&cj, "rorig.k", data, l, WAIT_MS);
    }
}

static void add_mirror(int via, const char *name, const char *origin, int r)
{
    cjs_add_mirror(&cj, via, name, origin, r, WAIT_MS);
}

struct same {
    const char *mirror;
    int via;
};

/* The mirror holds what the origin holds, asked through node via. */
static bool caught_up(void *arg)
{
    const struct same *w = arg;
    json_int_t last = state_int(w->via, "RORIG", "last_seq");
    return last > 0 && state_int(w->via, w->mirror, "last_seq") == last &&
           state_int(w->via, w->mirror, "messages") ==
               state_int(w->via, "RORIG", "messages");
}

/* The mirror has read at least one message. */
static bool mirror_started(void *arg)
{
    const struct same *w = arg;
    return state_int(w->via, w->mirror, "messages") > 0;
}

/* Every origin seq equal in the mirror (subject, payload, headers,
 * timestamp): none missing, none twice, no gap; every acked payload at
 * its seq. */
static void check_equal(int via, const char *mirror, const struct cjs_ledger *l)
{
    assert_true(cjs_check_mirror(&cj, via, "RORIG", mirror, WAIT_MS) >= MSGS);
    assert_int_equal(state_int(via, mirror, "first_seq"), 1);
    cjs_check_acked(&cj, via, mirror, l);
}

static void an_r1_mirror_reads_its_r1_origin_on_another_node(void **state)
{
    (void)state;
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    int next = 1;
    /* The mirror first: its origin does not exist yet, so nothing pulls
     * it to a node, and the origin then goes to a less loaded one. */
    add_mirror(0, "RMIR", "RORIG", 1);
    cjs_add_stream(&cj, 0, "RORIG", "rorig.>", 1, WAIT_MS);
    int ml = cjs_wait_stream_led(&cj, "RMIR", WAIT_MS);
    int ol = cjs_wait_stream_led(&cj, "RORIG", WAIT_MS);
    assert_true(ml >= 0 && ol >= 0);
    assert_int_not_equal(ml, ol);
    publish_until(&l, &next, MSGS / 2);
    /* The origin's only node dies mid-stream and comes back: the mirror's
     * reads fail and back off meanwhile, then go on from its position.
     * The mirror was created before its origin, so its first read may wait
     * out a backoff (up to 2 s): wait until it has read something, so the
     * kill lands mid-stream and not before the first read. */
    struct same w = {"RMIR", ml};
    assert_true(h_poll(mirror_started, &w, WAIT_MS));
    cjs_disconnect(&cj, ol);
    assert_int_equal(h_netns_node_kill(&cj.net, ol), 0);
    assert_int_equal(h_netns_node_start(&cj.net, ol), 0);
    assert_int_equal(cjs_connect(&cj, ol), 0);
    assert_true(cjs_wait_stream_led(&cj, "RORIG", WAIT_MS) == ol);
    publish_until(&l, &next, MSGS + 1);
    assert_true(h_poll(caught_up, &w, WAIT_MS));
    assert_int_equal(cjs_wait_stream_led(&cj, "RMIR", WAIT_MS), ml);
    check_equal(running_other(-1), "RMIR", &l);
    cjs_ledger_free(&l);
}

struct led_off {
    int node;
};

/* The R3 mirror caught up, led by a node other than the origin's. */
static bool led_off_and_caught_up(void *arg)
{
    const struct led_off *w = arg;
    int l = -1;
    struct same s = {"RMIR3", running_other(-1)};
    if (!cjs_stream_agreed(&cj, "RMIR3", &l)) {
        return false;
    }
    if (l == w->node) {
        json_decref(
            cjs_request(&cj, l, "$JS.API.STREAM.LEADER.STEPDOWN.RMIR3", ""));
        return false;
    }
    return caught_up(&s);
}

/* An R3 mirror of the R1 origin: placed on every node, its leader off the
 * origin's node (stepped down until it is) reads through the cluster. */
static void an_r3_mirror_led_off_its_origin_node_keeps_up(void **state)
{
    (void)state;
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    int ol = cjs_wait_stream_led(&cj, "RORIG", WAIT_MS);
    assert_true(ol >= 0);
    add_mirror(running_other(ol), "RMIR3", "RORIG", 3);
    struct led_off w = {ol};
    assert_true(h_poll(led_off_and_caught_up, &w, WAIT_MS));
    int next = (int)state_int(ol, "RORIG", "last_seq") + 1;
    for (int i = 0; i < 15; i++, next++) { /* within CJS_SEQ_MAX */
        char data[32];
        snprintf(data, sizeof data, "n%d", next);
        assert_true(cjs_publish(&cj, ol, "rorig.k", data, &l, WAIT_MS));
    }
    assert_true(h_poll(led_off_and_caught_up, &w, WAIT_MS));
    check_equal(ol, "RMIR3", &l);
    cjs_ledger_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_r1_mirror_reads_its_r1_origin_on_another_node),
        cmocka_unit_test(an_r3_mirror_led_off_its_origin_node_keeps_up),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, group_setup, group_teardown);
    nats_Close();
    return rv;
}
