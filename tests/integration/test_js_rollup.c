/* Key state a restart must rebuild the same from the log and from a
 * snapshot, through a real keeld with libnats' Key/Value store:
 * - Nats-Rollup: kvStore_Purge rolls a key up to its purge marker, and the
 *   rollup (a PURGE entry the stream leader proposes once the marker is
 *   stored) gives the same state after a restart that replays the log and
 *   after one that loads a snapshot.
 * - A deleted newest revision (STREAM.MSG.DELETE): kvStore_Get
 *   (DIRECT.GET last_by_subj) returns the revision left and kvStore_Update
 *   at it succeeds (Nats-Expected-Last-Subject-Sequence), one at the
 *   deleted revision is refused, before and after both kinds of restart.
 *   nats-server 2.9.10's memory store answers the same; its file store
 *   loses the key (compat case "KV get and update after the newest
 *   revision is deleted"). */
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

/* ---- a deleted newest revision ---- */

#define FILLER 8 /* entries past --snapshot_entries: a snapshot after them */

/* Bucket LAST as js_CreateKeyValue makes one with history 5, but with
 * deletes allowed (libnats sets deny_delete); opened into *kv. */
static void create_last(struct fixture *f, kvStore **kv)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"$KV.LAST.>"};
    jsStreamConfig_Init(&cfg);
    cfg.Name = "KV_LAST";
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.MaxMsgsPerSubject = 5;
    cfg.Discard = js_DiscardNew;
    cfg.AllowRollup = true;
    cfg.AllowDirect = true;
    assert_int_equal(js_AddStream(&si, f->js, &cfg, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    assert_int_equal(js_KeyValue(kv, f->js, "LAST"), NATS_OK);
}

static void restart_last(struct fixture *f, kvStore **kv)
{
    kvStore_Destroy(*kv);
    restart(f);
    assert_int_equal(js_KeyValue(kv, f->js, "LAST"), NATS_OK);
}

static uint64_t put(kvStore *kv, const char *key, const char *value)
{
    uint64_t rev = 0;
    assert_int_equal(kvStore_PutString(&rev, kv, key, value), NATS_OK);
    return rev;
}

static void delete_msg(struct fixture *f, uint64_t seq)
{
    jsErrCode jerr = 0;
    assert_int_equal(js_DeleteMsg(f->js, "KV_LAST", seq, NULL, &jerr), NATS_OK);
}

/* key reads as value at rev, and an update at deleted (a revision that
 * is gone) is refused with "wrong last sequence". */
static void assert_last(kvStore *kv, const char *key, uint64_t rev,
                        const char *value, uint64_t deleted)
{
    kvEntry *e = NULL;
    uint64_t got = 0;
    assert_int_equal(kvStore_Get(&e, kv, key), NATS_OK);
    assert_int_equal(kvEntry_Revision(e), rev);
    assert_string_equal(kvEntry_ValueString(e), value);
    kvEntry_Destroy(e);
    assert_int_equal(kvStore_UpdateString(&got, kv, key, "stale", deleted),
                     NATS_ERR);
    assert_non_null(strstr(nats_GetLastError(NULL), "wrong last sequence"));
}

static void a_deleted_newest_revision_leaves_the_one_before(void **state)
{
    struct fixture *f = *state;
    kvStore *kv = NULL;
    create_last(f, &kv);
    uint64_t r1 = put(kv, "k", "1");
    uint64_t r2 = put(kv, "k", "2");
    (void)put(kv, "other", "o");
    delete_msg(f, r2);
    assert_last(kv, "k", r1, "1", r2);

    /* The delete is among the last entries: the restart replays it. */
    restart_last(f, &kv);
    assert_last(kv, "k", r1, "1", r2);
    uint64_t r3 = 0;
    assert_int_equal(kvStore_UpdateString(&r3, kv, "k", "3", r1), NATS_OK);
    uint64_t r4 = put(kv, "k", "4");
    delete_msg(f, r4);
    assert_last(kv, "k", r3, "3", r4);

    /* More entries than --snapshot_entries after the delete: the next
     * start loads a snapshot that holds it. */
    for (int i = 0; i < FILLER; i++) {
        (void)put(kv, "other", "o");
    }
    restart_last(f, &kv);
    assert_last(kv, "k", r3, "3", r4);
    uint64_t r5 = 0;
    assert_int_equal(kvStore_UpdateString(&r5, kv, "k", "5", r3), NATS_OK);
    assert_last(kv, "k", r5, "5", r3);
    kvStore_Destroy(kv);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(purge_leaves_only_the_marker_across_restarts),
        T(a_deleted_newest_revision_leaves_the_one_before),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
