/* Mirror and source `external` on a 3-node cluster with jetstream
 * { domain: HUB } (docs/decisions/0039-external-origins-through-the-api.md):
 * an R3 mirror and an R3 source of an R3 origin reached through
 * $JS.HUB.API, the origin's leader and the mirror's on different nodes, so
 * the consumer create, its reply and the deliveries cross the routes to
 * the internal subscriptions of the mirror's leader. The mirror's leader
 * is killed mid-stream and restarted: the new leader creates the consumer
 * again from the applied position + 1, and the copy holds every origin
 * message once, no gap, no duplicate. The consumer the killed leader
 * made on the origin (its delete never sent) loses its interest with the
 * node and the origin removes it as an inactive ephemeral: one consumer
 * per feed is left, not one per leader change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cjs_common.h"
#include "harness.h"

#define NODES 3
#define WAIT_MS 20000
#define ROUND 60

static struct cjs cj;
static char conf[64];

static int group_setup(void **state)
{
    (void)state;
    static const char *const extra[] = {"-c", conf, NULL};
    return cjs_start(&cj, NODES, "cjsext", extra, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

static void publish_round(struct cjs_ledger *l, int *next, int n)
{
    for (int i = 0; i < n; i++, (*next)++) {
        char data[32];
        snprintf(data, sizeof data, "p%d", *next);
        cjs_publish_any(&cj, "orig.k", data, l, WAIT_MS);
    }
}

static bool copied(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        json_int_t last = cjs_state_int(&cj, i, "ORIG", "last_seq");
        if (last == 0 || cjs_state_int(&cj, i, "MIR", "last_seq") != last ||
            cjs_state_int(&cj, i, "SRC", "messages") != last ||
            cjs_state_int(&cj, i, "SRC", "last_seq") != last) {
            return false;
        }
    }
    return true;
}

/* ORIG has exactly one consumer for each of the two feeds. */
static bool one_consumer_a_feed(void *arg)
{
    (void)arg;
    json_t *o = cjs_request_ok(&cj, 0, "$JS.API.CONSUMER.NAMES.ORIG", "");
    bool ok = o != NULL && json_integer_value(json_object_get(o, "total")) == 2;
    json_decref(o);
    return ok;
}

static void external_copies_survive_a_mirror_leader_kill(void **state)
{
    (void)state;
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    int next = 1;
    cjs_add_stream(&cj, 0, "ORIG", "orig.>", 3, WAIT_MS);
    cjs_create_json(&cj, 1, "MIR",
                    "{\"name\":\"MIR\",\"num_replicas\":3,\"mirror\":{"
                    "\"name\":\"ORIG\",\"external\":{\"api\":\"$JS.HUB."
                    "API\"}}}",
                    WAIT_MS);
    cjs_create_json(&cj, 2, "SRC",
                    "{\"name\":\"SRC\",\"num_replicas\":3,\"sources\":[{"
                    "\"name\":\"ORIG\",\"external\":{\"api\":\"$JS.HUB."
                    "API\",\"deliver\":\"dlv.src\"}}]}",
                    WAIT_MS);
    /* The origin's leader on node 0, the mirror's and the source's on
     * node 1: everything crosses a route. */
    assert_true(cjs_lead_to(&cj, "ORIG", 0, WAIT_MS));
    assert_true(cjs_lead_to(&cj, "MIR", 1, WAIT_MS));
    assert_true(cjs_lead_to(&cj, "SRC", 1, WAIT_MS));
    publish_round(&l, &next, ROUND);
    int killed = cjs_kill_stream_leader(&cj, "MIR", WAIT_MS);
    publish_round(&l, &next, ROUND);
    cjs_restart_node(&cj, killed, "MIR", WAIT_MS);
    publish_round(&l, &next, ROUND);
    assert_true(h_poll(copied, NULL, WAIT_MS));
    /* Every origin seq in the mirror: subject, payload, headers and
     * timestamp equal; none missing, none twice. */
    assert_true(cjs_check_mirror(&cj, 2, "ORIG", "MIR", WAIT_MS) >= 3 * ROUND);
    /* The source: every acked payload once, in origin order. */
    for (int i = 0; i < NODES; i++) {
        cjs_check_acked(&cj, i, "SRC", &l);
    }
    assert_true(h_poll(one_consumer_a_feed, NULL, WAIT_MS));
    cjs_ledger_free(&l);
}

int main(void)
{
    char dir[] = "/tmp/keel-cjsext-XXXXXX";
    if (h_conf_write(dir, "domain.conf", "jetstream { domain: HUB }\n", conf,
                     sizeof conf) != 0) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(external_copies_survive_a_mirror_leader_kill),
    };
    int rv = cmocka_run_group_tests(tests, group_setup, group_teardown);
    h_conf_remove(dir, conf);
    return rv;
}
