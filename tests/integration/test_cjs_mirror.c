/* An R3 mirror of an R3 origin on three real keelds in network
 * namespaces (docs/decisions/0032-mirrors-pull-into-the-log.md): the
 * mirror's leader is killed (-9) while the origin takes publishes, the
 * origin's leader steps down, the mirror's leader is killed again; the mirror
 * ends with every origin seq, subject, payload and timestamp, none missing and
 * none twice, on every node. The position is the mirror's replicated state, so
 * the new leader's pump resumes where the committed state says. An R1 mirror of
 * an R1 origin is placed on the origin's node, where its leader reads; an R3
 * mirror of an R1 origin goes on led by a node that reads it remotely.
 * Shared setup: cjs_common.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cjs_common.h"
#include "harness.h"

#define NODES 3
#define WAIT_MS 20000
#define ROUND 60 /* publishes between two kills */

static struct cjs cj; /* one cluster for the whole file */

static int group_setup(void **state)
{
    (void)state;
    /* Frequent snapshots: the position also comes back from one. */
    static const char *const extra[] = {"--snapshot_entries", "40", NULL};
    return cjs_start(&cj, NODES, "cjsmir", extra, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

static json_int_t state_int(int i, const char *stream, const char *key)
{
    return cjs_state_int(&cj, i, stream, key);
}

/* Publish n payloads "p<k>" through a running node, each retried
 * (bounded) until acked; k counts on from *next. */
static void publish_round(struct cjs_ledger *l, int *next, int n)
{
    for (int i = 0; i < n; i++, (*next)++) {
        char data[32];
        snprintf(data, sizeof data, "p%d", *next);
        cjs_publish_any(&cj, "orig.k", data, l, WAIT_MS);
    }
}

/* Every running node's mirror holds what the origin holds. */
static bool caught_up(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        if (!cj.net.node[i].running) {
            continue;
        }
        json_int_t last = state_int(i, "ORIG", "last_seq");
        if (last == 0 || state_int(i, "MIR", "last_seq") != last ||
            state_int(i, "MIR", "messages") !=
                state_int(i, "ORIG", "messages")) {
            return false;
        }
    }
    return true;
}

static void add_mirror(int via, const char *name, const char *origin, int r)
{
    cjs_add_mirror(&cj, via, name, origin, r, WAIT_MS);
}

struct moved {
    int from;
};

/* The origin is led by another node than from (asked to step down while
 * it is not). */
static bool origin_moved(void *arg)
{
    const struct moved *m = arg;
    int l = -1;
    if (cjs_stream_agreed(&cj, "ORIG", &l) && l != m->from) {
        return true;
    }
    if (l >= 0) {
        json_decref(
            cjs_request(&cj, l, "$JS.API.STREAM.LEADER.STEPDOWN.ORIG", ""));
    }
    return false;
}

static void an_r3_mirror_keeps_every_seq_once_across_leader_kills(void **state)
{
    (void)state;
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    int next = 1, killed = -1;
    cjs_add_stream(&cj, 0, "ORIG", "orig.>", 3, WAIT_MS);
    add_mirror(1, "MIR", "ORIG", 3);
    publish_round(&l, &next, ROUND);
    /* Mid-stream: the mirror's leader dies while it pumps. */
    killed = cjs_kill_stream_leader(&cj, "MIR", WAIT_MS);
    publish_round(&l, &next, ROUND);
    cjs_restart_node(&cj, killed, "MIR", WAIT_MS);
    publish_round(&l, &next, ROUND);
    /* A leader change of the origin: the pump reads committed state, on
     * whichever node, so nothing changes for the mirror. */
    struct moved mv = {cjs_wait_stream_led(&cj, "ORIG", WAIT_MS)};
    assert_true(mv.from >= 0);
    assert_true(h_poll(origin_moved, &mv, WAIT_MS));
    publish_round(&l, &next, ROUND);
    killed = cjs_kill_stream_leader(&cj, "MIR", WAIT_MS);
    publish_round(&l, &next, ROUND);
    cjs_restart_node(&cj, killed, "MIR", WAIT_MS);
    assert_true(h_poll(caught_up, NULL, WAIT_MS));
    /* Every acked payload at its seq, read from the mirror on each node
     * (answered by the mirror's leader). */
    for (int i = 0; i < NODES; i++) {
        cjs_check_acked(&cj, i, "MIR", &l);
    }
    /* Every origin seq, acked or not, equal in the mirror: subject,
     * payload, headers and timestamp; none missing, none twice. */
    assert_true(cjs_check_mirror(&cj, 0, "ORIG", "MIR", WAIT_MS) >= 5 * ROUND);
    cjs_ledger_free(&l);
}

struct r1_wait {
    json_int_t msgs;
};

static bool r1_mirrored(void *arg)
{
    const struct r1_wait *w = arg;
    return state_int(0, "M1", "messages") == w->msgs &&
           state_int(0, "M1", "last_seq") == w->msgs;
}

/* The mirror's leader reads the origin on its own node: an R1 mirror of
 * an R1 origin is placed on the origin's node, also when another node
 * hosts fewer streams. */
static void an_r1_mirror_is_placed_on_its_origin_node(void **state)
{
    (void)state;
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    cjs_add_stream(&cj, 0, "O1", "o1.>", 1, WAIT_MS);
    for (int i = 1; i <= 5; i++) {
        char data[16];
        snprintf(data, sizeof data, "r%d", i);
        assert_true(cjs_publish(&cj, 0, "o1.k", data, &l, WAIT_MS));
    }
    add_mirror(2, "M1", "O1", 1);
    int ol = cjs_wait_stream_led(&cj, "O1", WAIT_MS);
    int ml = cjs_wait_stream_led(&cj, "M1", WAIT_MS);
    assert_true(ol >= 0);
    assert_int_equal(ml, ol);
    struct r1_wait w = {5};
    assert_true(h_poll(r1_mirrored, &w, WAIT_MS));
    cjs_check_acked(&cj, 1, "M1", &l);
    cjs_ledger_free(&l);
}

struct led_off {
    const char *stream;
    int node;
    json_int_t msgs;
};

/* Every node names a leader of stream other than node, and the mirror
 * holds msgs messages. */
static bool mirrored_and_led_off(void *arg)
{
    const struct led_off *w = arg;
    int l = -1;
    return cjs_stream_agreed(&cj, w->stream, &l) && l != w->node &&
           state_int(0, w->stream, "messages") == w->msgs;
}

/* An R3 mirror of an R1 origin: one of its peers holds the origin, the
 * others read it through the cluster, so a leader elsewhere (here: after
 * a step-down) goes on from the position where it is. */
static void an_r3_mirror_of_an_r1_origin_goes_on_led_elsewhere(void **state)
{
    (void)state;
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    cjs_add_stream(&cj, 0, "O3", "o3.>", 1, WAIT_MS);
    int x = cjs_wait_stream_led(&cj, "O3", WAIT_MS);
    assert_true(x >= 0);
    add_mirror(1, "M3", "O3", 3);
    for (int i = 1; i <= 10; i++) {
        char data[16];
        snprintf(data, sizeof data, "q%d", i);
        assert_true(cjs_publish(&cj, 0, "o3.k", data, &l, WAIT_MS));
        if (i == 5) {
            struct led_off w5 = {"M3", -1, 5}; /* any leader */
            assert_true(h_poll(mirrored_and_led_off, &w5, WAIT_MS));
            int ml = cjs_wait_stream_led(&cj, "M3", WAIT_MS);
            assert_true(ml >= 0);
            if (ml == x) {
                json_decref(cjs_request(
                    &cj, x, "$JS.API.STREAM.LEADER.STEPDOWN.M3", ""));
            }
        }
    }
    struct led_off w = {"M3", x, 10};
    assert_true(h_poll(mirrored_and_led_off, &w, WAIT_MS));
    for (int i = 0; i < NODES; i++) {
        cjs_check_acked(&cj, i, "M3", &l);
    }
    cjs_ledger_free(&l);
    /* Lame duck mode on the origin's node: every leadership it can hand
     * over moves, and the node stops well before SRV_LDM_HANDOFF_MS_MAX
     * (10 s). */
    pid_t pid = cj.net.node[x].k.pid;
    cjs_disconnect(&cj, x);
    long long t0 = h_now_ms();
    assert_int_equal(kill(pid, SIGUSR2), 0);
    assert_int_equal(h_wait_pid(pid, 9000, NULL), 0);
    cj.net.node[x].k.pid = -1;
    cj.net.node[x].running = false;
    assert_true(h_now_ms() - t0 < 9000);
    assert_true(cjs_log_has(&cj, x, "every leadership handed over"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_r3_mirror_keeps_every_seq_once_across_leader_kills),
        cmocka_unit_test(an_r1_mirror_is_placed_on_its_origin_node),
        cmocka_unit_test(an_r3_mirror_of_an_r1_origin_goes_on_led_elsewhere),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, group_setup, group_teardown);
    nats_Close();
    return rv;
}
