/* Nats-Rollup on an R3 stream of real keelds in network namespaces: a
 * libnats Key/Value purge through each node (the stream leader or a node
 * that forwards to it) leaves only the purge marker, and every node's
 * stream info agrees on what is left. Shared setup: cjs_common.h. */
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
#include "kv_common.h"

#define NODES 3
#define WAIT_MS 10000

static struct cjs cj; /* one cluster for the whole file */

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjsroll", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

struct msgs_wait {
    int want;
};

static bool every_node_counts(void *arg)
{
    const struct msgs_wait *w = arg;
    for (int i = 0; i < NODES; i++) {
        json_t *si = cjs_stream_info(&cj, i, "KV_R3");
        json_int_t n = json_integer_value(
            json_object_get(json_object_get(si, "state"), "messages"));
        json_decref(si);
        if (n != w->want) {
            return false;
        }
    }
    return true;
}

static void a_kv_purge_through_every_node_leaves_only_its_marker(void **state)
{
    (void)state;
    kvConfig kc;
    kvStore *kv = NULL;
    kvConfig_Init(&kc);
    kc.Bucket = "R3";
    kc.History = 10;
    kc.Replicas = 3;
    kvStore_Destroy(cjs_create_kv(&cj, 0, &kc, WAIT_MS));
    for (int i = 0; i < NODES; i++) {
        char key[8], ops[16];
        uint64_t rev = 0;
        snprintf(key, sizeof key, "k%d", i);
        assert_int_equal(js_KeyValue(&kv, cj.js[i], "R3"), NATS_OK);
        assert_int_equal(kvStore_PutString(&rev, kv, key, "1"), NATS_OK);
        assert_int_equal(kvStore_PutString(&rev, kv, key, "2"), NATS_OK);
        assert_int_equal(kvStore_Purge(kv, key, NULL), NATS_OK);
        kv_history_ops(kv, key, ops, sizeof ops);
        assert_string_equal(ops, "U");
        kvStore_Destroy(kv);
    }
    struct msgs_wait w = {NODES}; /* one marker per key */
    assert_true(h_poll(every_node_counts, &w, WAIT_MS));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_kv_purge_through_every_node_leaves_only_its_marker),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, group_setup, group_teardown);
    nats_Close();
    return rv;
}
