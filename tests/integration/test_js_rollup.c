/* Nats-Rollup through a real keeld with libnats' Key/Value store:
 * kvStore_Purge rolls a key up to its purge marker, and the rollup (a
 * PURGE entry the stream leader proposes once the marker is stored) gives
 * the same state after a restart that replays the log and after one that
 * loads a snapshot. */
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
#include <unistd.h>

#include "harness.h"
#include "kv_common.h"

#define WAIT_MS 10000

struct fixture {
    struct h_keeld k;
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
};

static int connect_kv(struct fixture *f, bool create)
{
    jsOptions o;
    kvConfig kc;
    jsOptions_Init(&o);
    o.Wait = WAIT_MS;
    if (natsConnection_ConnectTo(&f->nc, f->k.url) != NATS_OK ||
        natsConnection_JetStream(&f->js, f->nc, &o) != NATS_OK) {
        return -1;
    }
    kvConfig_Init(&kc);
    kc.Bucket = "CFG";
    kc.History = 10;
    return (create ? js_CreateKeyValue(&f->kv, f->js, &kc)
                   : js_KeyValue(&f->kv, f->js, "CFG")) == NATS_OK
               ? 0
               : -1;
}

static void disconnect_kv(struct fixture *f)
{
    kvStore_Destroy(f->kv);
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    f->kv = NULL;
    f->js = NULL;
    f->nc = NULL;
}

/* Snapshot every 4 entries so a restart can load one. */
static const char *const extra[] = {"--snapshot_entries", "4", NULL};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || h_keeld_init(&f->k) != 0 ||
        h_keeld_start(&f->k, 0, false, extra) != 0 || connect_kv(f, true)) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    disconnect_kv(f);
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

static void history(struct fixture *f, const char *key, char *out, size_t cap)
{
    kv_history_ops(f->kv, key, out, cap);
}

static uint64_t stream_msgs(struct fixture *f)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetStreamInfo(&si, f->js, "KV_CFG", NULL, &jerr),
                     NATS_OK);
    uint64_t n = si->State.Msgs;
    jsStreamInfo_Destroy(si);
    return n;
}

static void restart(struct fixture *f)
{
    disconnect_kv(f);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, false, extra), 0);
    assert_int_equal(connect_kv(f, false), 0);
}

static void purge_leaves_only_the_marker_across_restarts(void **state)
{
    struct fixture *f = *state;
    char ops[16];
    uint64_t rev = 0;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(kvStore_PutString(&rev, f->kv, "a", "v"), NATS_OK);
    }
    assert_int_equal(kvStore_PutString(&rev, f->kv, "b", "kept"), NATS_OK);
    history(f, "a", ops, sizeof ops);
    assert_string_equal(ops, "PPP");
    assert_int_equal(kvStore_Purge(f->kv, "a", NULL), NATS_OK);
    history(f, "a", ops, sizeof ops);
    assert_string_equal(ops, "U");
    assert_int_equal(stream_msgs(f), 2);
    /* More entries than --snapshot_entries: the next start loads a
     * snapshot taken after the rollup, then replays the rest. */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(kvStore_PutString(&rev, f->kv, "c", "x"), NATS_OK);
    }
    assert_int_equal(kvStore_Purge(f->kv, "c", NULL), NATS_OK);
    restart(f);
    history(f, "a", ops, sizeof ops);
    assert_string_equal(ops, "U");
    history(f, "c", ops, sizeof ops);
    assert_string_equal(ops, "U");
    history(f, "b", ops, sizeof ops);
    assert_string_equal(ops, "P");
    assert_int_equal(stream_msgs(f), 3);
    kvEntry *e = NULL;
    assert_int_equal(kvStore_Get(&e, f->kv, "b"), NATS_OK);
    assert_string_equal(kvEntry_ValueString(e), "kept");
    kvEntry_Destroy(e);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(purge_leaves_only_the_marker_across_restarts),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
