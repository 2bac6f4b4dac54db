/* A lost hard-state key in meta.lmdb (suite 'fault'). The store's value
 * envelope checksums values, not keys, and LMDB does not checksum its
 * pages: a flipped byte in a key makes the key vanish for lookups. The
 * fault suite's meta nemesis found that a stream group whose hard-state
 * key is missing is opened with term 0, every record (term >= 1) fails the
 * scanner's "term <= hard-state term" check, and the whole log is zeroed
 * as a torn tail: every acked message deleted, nothing quarantined, no
 * warning (keel-faults --nemesis meta --seed 1796084248). This test takes
 * the key away on purpose (stream group only) and asserts docs/design.md §4:
 * never delete — every acked value is still on disk after the restart.
 * Expected to fail until the store treats a missing hard state of a group
 * that has catalogued segments as unreadable (rule 3). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <lmdb.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define MK_MSGS 50
#define MK_META_GID                                                            \
    "\x59\x86\x3e\xc3\xcb\xa2\x86\xde\xe3\xd6\x6a\x83\x1e\xb8\x3c\x98"

struct fx {
    struct h_keeld k;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_int_equal(h_keeld_init(&f->k), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    h_keeld_cleanup(&f->k);
    free(f);
    return 0;
}

static void publish_all(struct fx *f)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subj[] = {"mk.>"};
    assert_int_equal(natsConnection_ConnectTo(&nc, f->k.url), NATS_OK);
    assert_int_equal(natsConnection_JetStream(&js, nc, NULL), NATS_OK);
    jsStreamConfig_Init(&cfg);
    cfg.Name = "MK";
    cfg.Subjects = subj;
    cfg.SubjectsLen = 1;
    assert_int_equal(js_AddStream(&si, js, &cfg, NULL, &jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
    for (int i = 0; i < MK_MSGS; i++) {
        char v[32];
        jsPubAck *pa = NULL;
        int n = snprintf(v, sizeof v, "mk-value-%04d", i);
        assert_int_equal(js_Publish(&pa, js, "mk.x", v, n, NULL, &jerr),
                         NATS_OK);
        jsPubAck_Destroy(pa);
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
}

/* Delete the 'H' (hard state) keys of every group but the meta group:
 * what a flipped key byte in an LMDB leaf page looks like to lookups. */
static void drop_hard_state_keys(struct fx *f)
{
    char path[600];
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    MDB_cursor *cur = NULL;
    MDB_val k;
    MDB_val v;
    int dropped = 0;
    snprintf(path, sizeof path, "%s/js/meta.lmdb", f->k.data_dir);
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_mapsize(env, 64u << 20), 0);
    assert_int_equal(mdb_env_open(env, path, MDB_NOSUBDIR, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
    assert_int_equal(mdb_cursor_open(txn, dbi, &cur), 0);
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
        const char *kp = k.mv_data;
        if (k.mv_size > 17 && kp[0] == 'H' &&
            memcmp(kp + 1, MK_META_GID, 16) != 0) {
            assert_int_equal(mdb_cursor_del(cur, 0), 0);
            dropped++;
        }
    }
    mdb_cursor_close(cur);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    assert_int_equal(dropped, 2); /* term and vote of the stream group */
}

static bool file_has(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "rb");
    static char buf[8 << 20];
    size_t n = fp != NULL ? fread(buf, 1, sizeof buf, fp) : 0;
    if (fp != NULL) {
        fclose(fp);
    }
    return n > 0 && memmem(buf, n, needle, strlen(needle)) != NULL;
}

/* Every acked value somewhere under the data directory (quarantine
 * included): a bounded `grep -rl` over the few files there. */
static int values_on_disk(struct fx *f)
{
    char cmd[700];
    char line[1024];
    int found = 0;
    snprintf(cmd, sizeof cmd, "find '%s' -type f", f->k.data_dir);
    for (int i = 0; i < MK_MSGS; i++) {
        char v[32];
        snprintf(v, sizeof v, "mk-value-%04d", i);
        FILE *p = popen(cmd, "r");
        bool hit = false;
        while (p != NULL && !hit && fgets(line, sizeof line, p) != NULL) {
            line[strcspn(line, "\n")] = '\0';
            hit = file_has(line, v);
        }
        if (p != NULL) {
            pclose(p);
        }
        found += hit;
    }
    return found;
}

static void missing_hard_state_key_never_deletes_acked_records(void **state)
{
    struct fx *f = *state;
    assert_int_equal(h_keeld_start(&f->k, 0, false, NULL), 0);
    publish_all(f);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    assert_int_equal(values_on_disk(f), MK_MSGS);
    drop_hard_state_keys(f);
    assert_int_equal(h_keeld_start(&f->k, 0, false, NULL), 0);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    assert_int_equal(values_on_disk(f), MK_MSGS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            missing_hard_state_key_never_deletes_acked_records, setup,
            teardown),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
