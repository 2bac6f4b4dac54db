/* libnats' Key/Value store (kvStore_*) against a real keeld: the calls an
 * application makes, each checked for what the client sees. The bucket is
 * a stream KV_<bucket> the client configures (max_msgs_per_subject =
 * history, discard new, allow_rollup_hdrs, deny_delete, allow_direct), so
 * these cases exercise those stream features through a real client.
 * The harness also reads nats-server's ports file, so KEELD may name a
 * wrapper that execs `nats-server -js` (as argv[0] "keeld", with -p 0 as
 * -p -1) to run the same cases against the reference: each case passes
 * there too, and only the teardown differs (nats-server exits 1 on
 * SIGTERM). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kv_common.h"

#define WAIT_MS 10000
#define WATCH_MS 5000
#define VALUE_BYTES_MAX 64

struct fixture {
    struct h_keeld k;
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
};

static int open_bucket(struct fixture *f)
{
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = "APP";
    kc.Description = "application settings";
    kc.History = 5;
    kc.TTL = 3600 * 1000000000LL; /* ns: libnats passes it as max_age */
    kc.MaxValueSize = VALUE_BYTES_MAX;
    kc.Replicas = 1;
    return js_CreateKeyValue(&f->kv, f->js, &kc) == NATS_OK ? 0 : -1;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = WAIT_MS;
    if (f == NULL || h_keeld_init(&f->k) != 0 ||
        h_keeld_start(&f->k, 0, false, NULL) != 0 ||
        natsConnection_ConnectTo(&f->nc, f->k.url) != NATS_OK ||
        natsConnection_JetStream(&f->js, f->nc, &o) != NATS_OK ||
        open_bucket(f) != 0) {
        fprintf(stderr, "setup: %s\n", nats_GetLastError(NULL));
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    kvStore_Destroy(f->kv);
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

/* The value of key, or "" when it has none (deleted or never put). */
static void get_value(struct fixture *f, const char *key, char *out, size_t cap)
{
    kvEntry *e = NULL;
    natsStatus s = kvStore_Get(&e, f->kv, key);
    out[0] = '\0';
    if (s == NATS_NOT_FOUND) {
        return;
    }
    assert_int_equal(s, NATS_OK);
    snprintf(out, cap, "%.*s", kvEntry_ValueLen(e), kvEntry_ValueString(e));
    kvEntry_Destroy(e);
}

static void history(struct fixture *f, const char *key, char *out, size_t cap)
{
    kv_history_ops(f->kv, key, out, cap);
}

static void put_get_and_status_report_the_bucket_config(void **state)
{
    struct fixture *f = *state;
    char v[VALUE_BYTES_MAX + 1];
    uint64_t r1 = 0;
    uint64_t r2 = 0;
    assert_int_equal(kvStore_PutString(&r1, f->kv, "db.host", "a"), NATS_OK);
    assert_int_equal(kvStore_PutString(&r2, f->kv, "db.port", "5432"), NATS_OK);
    assert_int_equal(r2, r1 + 1);
    get_value(f, "db.port", v, sizeof v);
    assert_string_equal(v, "5432");
    kvEntry *e = NULL;
    assert_int_equal(kvStore_GetRevision(&e, f->kv, "db.host", r1), NATS_OK);
    assert_string_equal(kvEntry_ValueString(e), "a");
    assert_string_equal(kvEntry_Bucket(e), "APP");
    kvEntry_Destroy(e);
    assert_int_equal(kvStore_Get(&e, f->kv, "missing"), NATS_NOT_FOUND);

    kvStatus *st = NULL;
    assert_int_equal(kvStore_Status(&st, f->kv), NATS_OK);
    assert_string_equal(kvStatus_Bucket(st), "APP");
    assert_int_equal(kvStatus_Values(st), 2);
    assert_int_equal(kvStatus_History(st), 5);
    assert_int_equal(kvStatus_TTL(st), 3600 * 1000000000LL);
    assert_int_equal(kvStatus_Replicas(st), 1);
    kvStatus_Destroy(st);
}

static void a_value_over_max_value_size_is_refused(void **state)
{
    struct fixture *f = *state;
    char big[VALUE_BYTES_MAX + 2];
    char v[VALUE_BYTES_MAX + 1];
    uint64_t rev = 0;
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_not_equal(kvStore_PutString(&rev, f->kv, "k", big), NATS_OK);
    get_value(f, "k", v, sizeof v);
    assert_string_equal(v, "");
    big[VALUE_BYTES_MAX] = '\0';
    assert_int_equal(kvStore_PutString(&rev, f->kv, "k", big), NATS_OK);
}

static void create_is_refused_when_the_key_has_a_value(void **state)
{
    struct fixture *f = *state;
    char v[VALUE_BYTES_MAX + 1];
    uint64_t rev = 0;
    assert_int_equal(kvStore_CreateString(&rev, f->kv, "lock", "me"), NATS_OK);
    assert_true(rev > 0);
    assert_int_not_equal(kvStore_CreateString(&rev, f->kv, "lock", "you"),
                         NATS_OK);
    get_value(f, "lock", v, sizeof v);
    assert_string_equal(v, "me");
    /* Once deleted, the key can be created again. */
    assert_int_equal(kvStore_Delete(f->kv, "lock"), NATS_OK);
    assert_int_equal(kvStore_CreateString(&rev, f->kv, "lock", "you"), NATS_OK);
    get_value(f, "lock", v, sizeof v);
    assert_string_equal(v, "you");
}

static void update_needs_the_current_revision(void **state)
{
    struct fixture *f = *state;
    char v[VALUE_BYTES_MAX + 1];
    uint64_t r1 = 0;
    uint64_t r2 = 0;
    uint64_t r3 = 0;
    assert_int_equal(kvStore_PutString(&r1, f->kv, "n", "1"), NATS_OK);
    assert_int_equal(kvStore_UpdateString(&r2, f->kv, "n", "2", r1), NATS_OK);
    assert_true(r2 > r1);
    /* r1 is stale now: a second writer that read "1" loses. */
    assert_int_not_equal(kvStore_UpdateString(&r3, f->kv, "n", "x", r1),
                         NATS_OK);
    assert_int_not_equal(kvStore_UpdateString(&r3, f->kv, "n", "x", r2 + 100),
                         NATS_OK);
    get_value(f, "n", v, sizeof v);
    assert_string_equal(v, "2");
    assert_int_equal(kvStore_UpdateString(&r3, f->kv, "n", "3", r2), NATS_OK);
    get_value(f, "n", v, sizeof v);
    assert_string_equal(v, "3");
}

static void delete_and_purge_leave_markers_in_the_history(void **state)
{
    struct fixture *f = *state;
    char ops[16];
    char v[VALUE_BYTES_MAX + 1];
    uint64_t rev = 0;
    assert_int_equal(kvStore_PutString(&rev, f->kv, "a", "1"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "a", "2"), NATS_OK);
    assert_int_equal(kvStore_Delete(f->kv, "a"), NATS_OK);
    get_value(f, "a", v, sizeof v);
    assert_string_equal(v, "");
    history(f, "a", ops, sizeof ops);
    assert_string_equal(ops, "PPD");
    assert_int_equal(kvStore_PutString(&rev, f->kv, "a", "3"), NATS_OK);
    assert_int_equal(kvStore_Purge(f->kv, "a", NULL), NATS_OK);
    history(f, "a", ops, sizeof ops);
    assert_string_equal(ops, "U");
    get_value(f, "a", v, sizeof v);
    assert_string_equal(v, "");
    /* History is bounded: 7 puts keep the newest 5. */
    for (int i = 0; i < 7; i++) {
        assert_int_equal(kvStore_PutString(&rev, f->kv, "h", "v"), NATS_OK);
    }
    history(f, "h", ops, sizeof ops);
    assert_string_equal(ops, "PPPPP");
}

static void keys_lists_only_keys_with_a_value(void **state)
{
    struct fixture *f = *state;
    kvKeysList l;
    uint64_t rev = 0;
    assert_int_equal(kvStore_PutString(&rev, f->kv, "x", "1"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "y", "1"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "y", "2"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "z", "1"), NATS_OK);
    assert_int_equal(kvStore_Delete(f->kv, "z"), NATS_OK);
    memset(&l, 0, sizeof l);
    assert_int_equal(kvStore_Keys(&l, f->kv, NULL), NATS_OK);
    assert_int_equal(l.Count, 2);
    bool x = false;
    bool y = false;
    for (int i = 0; i < l.Count; i++) {
        x = x || strcmp(l.Keys[i], "x") == 0;
        y = y || strcmp(l.Keys[i], "y") == 0;
    }
    assert_true(x);
    assert_true(y);
    kvKeysList_Destroy(&l);
}

/* The next entry of w as "key=value" (value "-" for a delete marker), or
 * "" for the end-of-initial-values marker (a NULL entry). */
static void next_entry(kvWatcher *w, char *out, size_t cap)
{
    kvEntry *e = NULL;
    assert_int_equal(kvWatcher_Next(&e, w, WATCH_MS), NATS_OK);
    if (e == NULL) {
        out[0] = '\0';
        return;
    }
    if (kvEntry_Operation(e) == kvOp_Put) {
        snprintf(out, cap, "%s=%.*s", kvEntry_Key(e), kvEntry_ValueLen(e),
                 kvEntry_ValueString(e));
    } else {
        snprintf(out, cap, "%s=-", kvEntry_Key(e));
    }
    kvEntry_Destroy(e);
}

static void watch_sends_initial_values_then_live_updates(void **state)
{
    struct fixture *f = *state;
    kvWatcher *w = NULL;
    char got[96];
    uint64_t rev = 0;
    assert_int_equal(kvStore_PutString(&rev, f->kv, "svc.a", "old"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "svc.a", "up"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "other", "o"), NATS_OK);
    assert_int_equal(kvStore_Watch(&w, f->kv, "svc.*", NULL), NATS_OK);
    /* Only the last value of each matching key, then the marker. */
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "svc.a=up");
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "");
    assert_int_equal(kvStore_PutString(&rev, f->kv, "other", "p"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "svc.b", "new"), NATS_OK);
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "svc.b=new");
    assert_int_equal(kvStore_Delete(f->kv, "svc.a"), NATS_OK);
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "svc.a=-");
    kvWatcher_Destroy(w);
}

static void watch_all_sees_every_key(void **state)
{
    struct fixture *f = *state;
    kvWatcher *w = NULL;
    char got[96];
    uint64_t rev = 0;
    assert_int_equal(kvStore_PutString(&rev, f->kv, "k1", "a"), NATS_OK);
    assert_int_equal(kvStore_WatchAll(&w, f->kv, NULL), NATS_OK);
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "k1=a");
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "");
    assert_int_equal(kvStore_PutString(&rev, f->kv, "k2", "b"), NATS_OK);
    assert_int_equal(kvStore_PutString(&rev, f->kv, "k1", "c"), NATS_OK);
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "k2=b");
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "k1=c");
    kvWatcher_Destroy(w);
}

static void a_watch_of_an_empty_bucket_ends_its_initial_values(void **state)
{
    struct fixture *f = *state;
    kvWatcher *w = NULL;
    char got[96];
    uint64_t rev = 0;
    assert_int_equal(kvStore_WatchAll(&w, f->kv, NULL), NATS_OK);
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "");
    assert_int_equal(kvStore_PutString(&rev, f->kv, "first", "1"), NATS_OK);
    next_entry(w, got, sizeof got);
    assert_string_equal(got, "first=1");
    kvWatcher_Destroy(w);
}

static void delete_bucket_removes_its_stream(void **state)
{
    struct fixture *f = *state;
    uint64_t rev = 0;
    kvStore *again = NULL;
    assert_int_equal(kvStore_PutString(&rev, f->kv, "a", "1"), NATS_OK);
    assert_int_equal(js_DeleteKeyValue(f->js, "APP"), NATS_OK);
    assert_int_equal(js_KeyValue(&again, f->js, "APP"), NATS_NOT_FOUND);
    assert_int_not_equal(js_DeleteKeyValue(f->js, "APP"), NATS_OK);
    /* A new bucket of the same name starts empty. */
    kvStore_Destroy(f->kv);
    f->kv = NULL;
    assert_int_equal(open_bucket(f), 0);
    char v[VALUE_BYTES_MAX + 1];
    get_value(f, "a", v, sizeof v);
    assert_string_equal(v, "");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(put_get_and_status_report_the_bucket_config),
        T(a_value_over_max_value_size_is_refused),
        T(create_is_refused_when_the_key_has_a_value),
        T(update_needs_the_current_revision),
        T(delete_and_purge_leave_markers_in_the_history),
        T(keys_lists_only_keys_with_a_value),
        T(watch_sends_initial_values_then_live_updates),
        T(watch_all_sees_every_key),
        T(a_watch_of_an_empty_bucket_ends_its_initial_values),
        T(delete_bucket_removes_its_stream),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
