/* An R3 stream sourcing two R3 origins on three real keelds in network
 * namespaces (docs/decisions/0035-sources-share-the-mirror-pump.md): the
 * aggregate's leader is killed (-9) twice while both origins take
 * publishes. The aggregate ends, on every node, with every message of
 * each origin exactly once, in origin order per source, each with its
 * Nats-Stream-Source header and its origin's payload, under the
 * aggregate's own gapless seqs: the positions are the aggregate's
 * replicated state, so a new leader resumes where the committed state
 * says. An R3 aggregate of an R1 origin, with subject_transforms, led off
 * the origin's node. Shared setup: cjs_common.h. */
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
#define ROUND 40    /* publishes to each origin between two kills */
#define BACKLOG 200 /* to each origin before the aggregate exists */

static struct cjs cj; /* one cluster for the whole file */

static int group_setup(void **state)
{
    (void)state;
    /* Frequent snapshots: the positions also come back from one. */
    static const char *const extra[] = {"--snapshot_entries", "40", NULL};
    return cjs_start(&cj, NODES, "cjssrc", extra, WAIT_MS);
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

/* Publish n payloads "<prefix><k>" to each origin through a running node,
 * each retried (bounded) until acked; k counts on from *next. */
static void publish_round(struct cjs_ledger *la, struct cjs_ledger *lb,
                          int *next, int n)
{
    for (int i = 0; i < n; i++, (*next)++) {
        for (int o = 0; o < 2; o++) {
            char data[32];
            snprintf(data, sizeof data, "%s%d", o == 0 ? "a" : "b", *next);
            cjs_publish_any(&cj, o == 0 ? "oa.k" : "ob.k", data,
                            o == 0 ? la : lb, WAIT_MS);
        }
    }
}

/* Every running node's aggregate holds as many messages as both origins
 * together. */
static bool caught_up(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        if (!cj.net.node[i].running) {
            continue;
        }
        json_int_t a = state_int(i, "OA", "messages");
        json_int_t b = state_int(i, "OB", "messages");
        if (a == 0 || b == 0 || state_int(i, "AGG", "messages") != a + b) {
            return false;
        }
    }
    return true;
}

static natsMsg *get(int via, const char *stream, uint64_t seq)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    natsStatus st = js_GetMsg(&m, cj.js[via], stream, seq, NULL, &jerr);
    if (st != NATS_OK) {
        fail_msg("%s seq %llu through %s: %s (%d)", stream,
                 (unsigned long long)seq, cj.net.node[via].name,
                 natsStatus_GetText(st), (int)jerr);
    }
    return m;
}

/* Read the aggregate through node via: seqs 1..last all there, each
 * origin's seqs exactly once and in order, payloads equal the origin's. */
static void check_exactly_once(int via)
{
    json_int_t last = state_int(via, "AGG", "last_seq");
    json_int_t want[2] = {state_int(via, "OA", "last_seq"),
                          state_int(via, "OB", "last_seq")};
    static const char *const names[2] = {"OA", "OB"};
    uint64_t prev[2] = {0, 0};
    json_int_t count[2] = {0, 0};
    assert_int_equal(state_int(via, "AGG", "first_seq"), 1);
    assert_int_equal(state_int(via, "AGG", "num_deleted"), 0);
    for (json_int_t s = 1; s <= last; s++) {
        natsMsg *m = get(via, "AGG", (uint64_t)s);
        const char *src = NULL;
        char name[16];
        unsigned long long oseq = 0;
        assert_int_equal(natsMsgHeader_Get(m, "Nats-Stream-Source", &src),
                         NATS_OK);
        assert_int_equal(sscanf(src, "%15s %llu", name, &oseq), 2);
        int k = strcmp(name, "OA") == 0 ? 0 : 1;
        assert_string_equal(name, names[k]);
        if (oseq != prev[k] + 1) {
            fail_msg("AGG seq %lld: %s after %s %llu (a gap or a repeat)",
                     (long long)s, src, names[k], (unsigned long long)prev[k]);
        }
        prev[k] = oseq;
        count[k]++;
        natsMsg *o = get(via, names[k], oseq);
        assert_int_equal(natsMsg_GetDataLength(m), natsMsg_GetDataLength(o));
        assert_memory_equal(natsMsg_GetData(m), natsMsg_GetData(o),
                            (size_t)natsMsg_GetDataLength(o));
        assert_string_equal(natsMsg_GetSubject(m), natsMsg_GetSubject(o));
        natsMsg_Destroy(o);
        natsMsg_Destroy(m);
    }
    assert_int_equal(count[0], want[0]);
    assert_int_equal(count[1], want[1]);
}

static void an_r3_aggregate_keeps_every_message_once_across_kills(void **state)
{
    (void)state;
    struct cjs_ledger la, lb;
    memset(&la, 0, sizeof la);
    memset(&lb, 0, sizeof lb);
    int next = 1, killed = -1;
    cjs_add_stream(&cj, 0, "OA", "oa.>", 3, WAIT_MS);
    cjs_add_stream(&cj, 1, "OB", "ob.>", 3, WAIT_MS);
    /* A backlog first: the first kill lands while the pump proposes
     * whole windows, so the new leader's log holds entries it has not
     * applied when it starts to pump (sent again, and skipped). */
    publish_round(&la, &lb, &next, BACKLOG);
    json_t *o = cjs_request_retry(
        &cj, 2, "$JS.API.STREAM.CREATE.AGG",
        "{\"name\":\"AGG\",\"num_replicas\":3,\"sources\":[{\"name\":\"OA\"},"
        "{\"name\":\"OB\"}]}",
        WAIT_MS);
    assert_false(cjs_is_error(o));
    json_decref(o);
    assert_true(cjs_wait_stream_led(&cj, "AGG", WAIT_MS) >= 0);
    /* Mid-backlog: the aggregate's leader dies while it pumps. */
    killed = cjs_kill_stream_leader(&cj, "AGG", WAIT_MS);
    publish_round(&la, &lb, &next, ROUND);
    cjs_restart_node(&cj, killed, "AGG", WAIT_MS);
    publish_round(&la, &lb, &next, ROUND);
    /* While it pumps what the origins took. */
    killed = cjs_kill_stream_leader(&cj, "AGG", WAIT_MS);
    publish_round(&la, &lb, &next, ROUND);
    cjs_restart_node(&cj, killed, "AGG", WAIT_MS);
    assert_true(h_poll(caught_up, NULL, WAIT_MS));
    for (int i = 0; i < NODES; i++) {
        check_exactly_once(i);
    }
    assert_true(la.acked >= BACKLOG + 3 * ROUND &&
                lb.acked >= BACKLOG + 3 * ROUND);
    /* Stream info reports both sources, read. */
    o = cjs_stream_info(&cj, 0, "AGG");
    const json_t *si = json_object_get(o, "sources");
    assert_int_equal(json_array_size(si), 2);
    for (size_t i = 0; i < 2; i++) {
        const json_t *x = json_array_get(si, i);
        assert_int_equal(json_integer_value(json_object_get(x, "lag")), 0);
        assert_null(json_object_get(x, "error"));
    }
    json_decref(o);
    cjs_ledger_free(&la);
    cjs_ledger_free(&lb);
}

struct led_off {
    int node;
    json_int_t msgs;
};

/* Every node names a leader of AGG1 other than node, and it holds msgs
 * messages. */
static bool sourced_and_led_off(void *arg)
{
    const struct led_off *w = arg;
    int l = -1;
    return cjs_stream_agreed(&cj, "AGG1", &l) && l != w->node &&
           state_int(0, "AGG1", "messages") == w->msgs;
}

/* An R3 aggregate of an R1 origin: one of its peers holds the origin, the
 * others read it through the cluster (the mirror's read frames), so a
 * leader elsewhere goes on from the replicated position. Its source has
 * subject_transforms (docs/decisions/0037-mirror-and-source-transforms-
 * in-the-log.md): every replica stores the transformed subject. */
static void an_r3_aggregate_of_an_r1_origin_goes_on_led_elsewhere(void **state)
{
    (void)state;
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    cjs_add_stream(&cj, 0, "O1", "o1.>", 1, WAIT_MS);
    int x = cjs_wait_stream_led(&cj, "O1", WAIT_MS);
    assert_true(x >= 0);
    json_t *o = cjs_request_retry(&cj, 1, "$JS.API.STREAM.CREATE.AGG1",
                                  "{\"name\":\"AGG1\",\"num_replicas\":3,"
                                  "\"sources\":[{\"name\":\"O1\","
                                  "\"subject_transforms\":[{\"src\":"
                                  "\"o1.k\",\"dest\":\"agg1.k\"},"
                                  "{\"src\":\"o1.q.>\"}]}]}",
                                  WAIT_MS);
    assert_false(cjs_is_error(o));
    json_decref(o);
    for (int i = 1; i <= 20; i++) {
        char data[16];
        snprintf(data, sizeof data, "q%d", i);
        assert_true(cjs_publish(&cj, 0, "o1.k", data, &l, WAIT_MS));
        if (i == 10) {
            struct led_off w10 = {-1, 10}; /* any leader */
            assert_true(h_poll(sourced_and_led_off, &w10, WAIT_MS));
            int ml = cjs_wait_stream_led(&cj, "AGG1", WAIT_MS);
            assert_true(ml >= 0);
            if (ml == x) {
                json_decref(cjs_request(
                    &cj, x, "$JS.API.STREAM.LEADER.STEPDOWN.AGG1", ""));
            }
        }
    }
    struct led_off w = {x, 20};
    assert_true(h_poll(sourced_and_led_off, &w, WAIT_MS));
    for (json_int_t s = 1; s <= 20; s++) {
        natsMsg *m = get(0, "AGG1", (uint64_t)s);
        const char *src = NULL;
        char want[32];
        snprintf(want, sizeof want, "O1 %lld", (long long)s);
        assert_int_equal(natsMsgHeader_Get(m, "Nats-Stream-Source", &src),
                         NATS_OK);
        assert_string_equal(src, want);
        /* Transformed by whichever leader proposed it, from a read here
         * or through the cluster (both transforms' sources the filter). */
        assert_string_equal(natsMsg_GetSubject(m), "agg1.k");
        natsMsg_Destroy(m);
    }
    cjs_ledger_free(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_r3_aggregate_keeps_every_message_once_across_kills),
        cmocka_unit_test(an_r3_aggregate_of_an_r1_origin_goes_on_led_elsewhere),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, group_setup, group_teardown);
    nats_Close();
    return rv;
}
