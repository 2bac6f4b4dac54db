/* A record damaged under a running stream leader (docs/design.md §4.7 R5: reads
 * verify; a bad record becomes faulty and is repaired; rule 1: a leader
 * that finds damage in its own log hands over leadership), seen through a
 * durable pull consumer of an R3 stream, with real keelds in network
 * namespaces and raw $JS.API.CONSUMER.MSG.NEXT requests.
 *
 * One byte of the fifth message's record changes on the leader's disk
 * after every message was acked. The consumer must still deliver all ten,
 * the fifth from an intact copy, and the leader's copy must be repaired.
 * Before, the consumer took any read failure for a deleted message: it
 * skipped the fifth for good and delivered the sixth to the tenth, and
 * the leader, never told of the damage, kept leading (the fifth never
 * came, the test times out on it). */
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
#define STREAM "RD"
#define MSGS 10
#define VICTIM_MSG 5
#define WAIT_MS 30000 /* bounded waits for the cluster */

static struct cjs cj;
static int leader = -1;

static double metric(const char *body, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "\n%s ", key);
    const char *p = strstr(body, k);
    return p != NULL ? strtod(p + strlen(k), NULL) : -1;
}

/* The old leader counted a repair of the stream's group. */
static bool leader_repaired(void *arg)
{
    (void)arg;
    static char body[256 * 1024];
    return h_netns_http_get(&cj.net, leader, "/metrics", body, sizeof body) ==
               200 &&
           metric(body, "keel_raft_repairs_total{group=\"" STREAM "\"}") >= 1;
}

/* The value index (1-based) of a delivery "rd-value-NN", or 0. */
static int value_index(natsMsg *m)
{
    int n = 0;
    char buf[32];
    int len = natsMsg_GetDataLength(m);
    if (len <= 0 || len >= (int)sizeof buf) {
        return 0;
    }
    memcpy(buf, natsMsg_GetData(m), (size_t)len);
    buf[len] = '\0';
    return sscanf(buf, "rd-value-%d", &n) == 1 && n >= 1 && n <= MSGS ? n : 0;
}

/* Pull batches through node 0 until every value was delivered once or
 * WAIT_MS passed; each delivery is acked. Returns the count seen. */
static int consume_all(bool seen[MSGS + 1], int *after_gap)
{
    natsConnection *nc = cj.nc[0];
    natsSubscription *sub = NULL;
    natsInbox *ib = NULL;
    int got = 0;
    *after_gap = 0;
    assert_int_equal(natsInbox_Create(&ib), NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&sub, nc, ib), NATS_OK);
    long long t0 = h_now_ms();
    while (got < MSGS && h_now_ms() - t0 < WAIT_MS) {
        static const char next[] = "{\"batch\":10,\"expires\":1000000000}";
        assert_int_equal(natsConnection_PublishRequest(
                             nc, "$JS.API.CONSUMER.MSG.NEXT." STREAM ".C", ib,
                             next, (int)strlen(next)),
                         NATS_OK);
        natsMsg *m = NULL;
        /* The batch ends with a status (no data) or after 2 s of nothing. */
        while (natsSubscription_NextMsg(&m, sub, 2000) == NATS_OK) {
            int v = value_index(m);
            const char *reply = natsMsg_GetReply(m);
            if (v == 0 || reply == NULL) {
                natsMsg_Destroy(m);
                break;
            }
            if (!seen[v]) {
                seen[v] = true;
                got++;
                *after_gap += v > VICTIM_MSG && !seen[VICTIM_MSG];
            }
            (void)natsConnection_PublishString(nc, reply, "+ACK");
            natsMsg_Destroy(m);
        }
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(ib);
    return got;
}

static void
a_record_damaged_under_the_leader_is_delivered_from_a_peer(void **state)
{
    (void)state;
    struct cjs_ledger l = {0};
    cjs_add_stream(&cj, 0, STREAM, "rd.x", 3, WAIT_MS);
    json_t *o = cjs_request_retry(
        &cj, 0, "$JS.API.CONSUMER.DURABLE.CREATE." STREAM ".C",
        "{\"stream_name\":\"" STREAM "\",\"config\":{\"durable_name\":\"C\","
        "\"ack_policy\":\"explicit\",\"deliver_policy\":\"all\","
        "\"ack_wait\":2000000000}}",
        WAIT_MS);
    assert_true(o != NULL && !cjs_is_error(o));
    json_decref(o);
    for (int i = 1; i <= MSGS; i++) {
        char v[32];
        snprintf(v, sizeof v, "rd-value-%02d", i);
        bool acked = false;
        for (int t = 0; t < 5 && !acked; t++) {
            acked = cjs_publish(&cj, 0, "rd.x", v, &l, 5000);
        }
        assert_true(acked);
    }
    assert_int_equal(l.last, MSGS);
    cjs_ledger_free(&l);
    leader = cjs_wait_stream_led(&cj, STREAM, WAIT_MS);
    assert_true(leader >= 0);

    /* Bit rot under the running leader: its next read of the record
     * fails the checksum (the page cache holds the changed byte). */
    assert_int_equal(
        h_flip_segment_byte(cj.net.node[leader].k.data_dir, "rd-value-05"), 0);
    bool seen[MSGS + 1] = {false};
    int after_gap = 0;
    int got = consume_all(seen, &after_gap);
    if (got != MSGS) {
        h_netns_print_log(&cj.net, leader);
        fail_msg("%d of %d delivered, value %d %s, %d after it first", got,
                 MSGS, VICTIM_MSG, seen[VICTIM_MSG] ? "seen" : "never seen",
                 after_gap);
    }
    /* The damaged copy is repaired from the new leader's. */
    assert_true(h_poll(leader_repaired, NULL, WAIT_MS));
}

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjrd", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_record_damaged_under_the_leader_is_delivered_from_a_peer),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
