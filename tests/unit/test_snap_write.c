/* Writing snapshots (docs/design.md §5): the write order and its crash points,
 * the persisted-entries rule, keeping the two newest, the prefix-drop rule.
 * Each test fails when its rule is removed.
 */
#include "test_snap_common.h"

struct fixture {
    struct tsn x;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    tsn_init(&f->x, 11);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tsn_fini(&f->x);
    test_free(f);
    return 0;
}

static void a_written_snapshot_survives_power_loss_and_loads(void **state)
{
    struct fixture *f = *state;

    tsn_log_and_snap(&f->x, 1, 10, 2, 2);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_NEWEST);
    assert_int_equal(f->x.lr.index, 10);
    assert_int_equal(f->x.lr.term, 2);
    assert_false(f->x.lr.newest_bad);
    assert_false(f->x.lr.must_not_lead);
    tsn_expect_body(&f->x.lr, 10, 1000);
}

/* docs/design.md §5 S1: a snapshot at X only after entries <= X persist
 * locally. */
static void a_snapshot_before_its_entries_persist_is_refused(void **state)
{
    struct fixture *f = *state;
    uint8_t body[TSN_BODY_MAX];
    size_t len = tsn_body(10, body, 100);

    tsn_restart(&f->x, true);
    ts_append(&f->x.t, 1, 10, 2, 200, 1);
    assert_int_equal(snap_write(f->x.sn, 10, 2, body, len, f->x.errmsg),
                     KEEL_EAGAIN);
    assert_false(tsn_snap_exists(&f->x, 10));
    assert_true(ts_wait_persisted(&f->x.t, 10));
    assert_int_equal(snap_write(f->x.sn, 10, 2, body, len, f->x.errmsg), 0);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.index, 10);
    for (uint64_t i = 1; i <= 10; i++) {
        ts_expect(&f->x.t, i, 2, 1);
    }
}

/* A crash at any step before the LMDB record leaves the previous snapshot
 * the one that loads, and the new file never counts. */
static void crash_at(struct fixture *f, enum snap_crash_point point,
                     enum fs_fault_cut cut)
{
    uint8_t body[TSN_BODY_MAX];
    size_t len = tsn_body(20, body, 1000);

    tsn_log_and_snap(&f->x, 1, 10, 2, 2);
    ts_append(&f->x.t, 11, 20, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->x.t, 20));
    snap_debug_crash_at(f->x.sn, point);
    assert_int_equal(snap_write(f->x.sn, 20, 2, body, len, f->x.errmsg),
                     KEEL_ECANCELED);
    tsn_crash_reopen(&f->x, cut);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_NEWEST);
    assert_int_equal(f->x.lr.index, 10);
    assert_int_equal(f->x.lr.named_index, 10);
    tsn_expect_body(&f->x.lr, 10, 1000);
    assert_false(tsn_snap_exists(&f->x, 20));
}

static void a_crash_after_the_temp_write_keeps_the_old_snapshot(void **state)
{
    crash_at(*state, SNAP_CRASH_AFTER_TEMP_WRITE, FS_CUT_REORDER);
}

static void a_crash_after_the_temp_sync_keeps_the_old_snapshot(void **state)
{
    crash_at(*state, SNAP_CRASH_AFTER_TEMP_SYNC, FS_CUT_DROP);
}

static void a_crash_after_rename_before_dir_fsync_keeps_the_old(void **state)
{
    crash_at(*state, SNAP_CRASH_AFTER_RENAME, FS_CUT_DROP);
}

/* The file is durable but LMDB does not name it: it does not count and is
 * quarantined, never loaded. */
static void a_crash_before_the_lmdb_record_keeps_the_old(void **state)
{
    struct fixture *f = *state;
    char q[1024];

    crash_at(f, SNAP_CRASH_BEFORE_RECORD, FS_CUT_DROP);
    assert_int_equal(f->x.lr.unnamed, 1);
    tsn_quarantined(&f->x, 20, q, sizeof q);
    assert_true(tsn_exists(&f->x, q));
}

static void the_two_newest_are_kept_and_older_ones_deleted(void **state)
{
    struct fixture *f = *state;
    struct snap_info si;

    tsn_log_and_snap(&f->x, 1, 5, 2, 2);
    tsn_log_and_snap(&f->x, 6, 10, 2, 2);
    assert_true(tsn_snap_exists(&f->x, 5));
    tsn_log_and_snap(&f->x, 11, 15, 3, 3);
    assert_false(tsn_snap_exists(&f->x, 5));
    assert_true(tsn_snap_exists(&f->x, 10));
    assert_true(tsn_snap_exists(&f->x, 15));
    snap_info(f->x.sn, &si);
    assert_int_equal(si.newest_index, 15);
    assert_int_equal(si.older_index, 10);
}

/* Deleting the pushed-out file comes after the record: a crash between
 * leaves it, and the next open finishes the deletion (it is older than both
 * named snapshots). */
static void a_crash_before_the_delete_keeps_both_named(void **state)
{
    struct fixture *f = *state;
    uint8_t body[TSN_BODY_MAX];
    size_t len = tsn_body(15, body, 1000);

    tsn_log_and_snap(&f->x, 1, 5, 2, 2);
    tsn_log_and_snap(&f->x, 6, 10, 2, 2);
    ts_append(&f->x.t, 11, 15, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->x.t, 15));
    snap_debug_crash_at(f->x.sn, SNAP_CRASH_BEFORE_DELETE);
    assert_int_equal(snap_write(f->x.sn, 15, 2, body, len, f->x.errmsg),
                     KEEL_ECANCELED);
    assert_true(tsn_snap_exists(&f->x, 5));
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.index, 15);
    assert_int_equal(f->x.lr.named_older_index, 10);
    assert_int_equal(f->x.lr.superseded, 1);
    assert_false(tsn_snap_exists(&f->x, 5));
    assert_true(tsn_snap_exists(&f->x, 10));
}

/* docs/design.md §5 S2: only at or below the older kept snapshot, so a
 * bad newest restores locally. */
static void the_prefix_drops_only_up_to_the_older_snapshot(void **state)
{
    struct fixture *f = *state;
    struct store_group_info gi;

    tsn_log_and_snap(&f->x, 1, 200, 2, 2);
    tsn_log_and_snap(&f->x, 201, 400, 2, 2);
    assert_int_equal(snap_drop_prefix(f->x.sn, 400, f->x.errmsg), KEEL_EPERM);
    assert_int_equal(store_drop_prefix(f->x.t.g, 400, NULL), KEEL_EPERM);
    assert_int_equal(snap_drop_prefix(f->x.sn, 200, f->x.errmsg), 0);
    tsn_clean_reopen(&f->x);
    store_group_info(f->x.t.g, &gi);
    assert_true(gi.first_index > 1);
    assert_true(gi.first_index <= 201);
    /* The newest goes bad: the node restores from the older one plus the
     * log, and its extent keeps the LMDB-named newest. */
    tsn_flip(&f->x, 400, SNAP_HEADER_BYTES + 10);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_OLDER);
    assert_int_equal(f->x.lr.index, 200);
    tsn_expect_body(&f->x.lr, 200, 1000);
    assert_true(f->x.lr.newest_bad);
    assert_false(f->x.lr.amnesia);
    assert_int_equal(f->x.t.rep.extent_index, 400);
    assert_int_equal(f->x.t.rep.extent_term, 2);
}

static void out_of_space_keeps_the_previous_snapshot(void **state)
{
    struct fixture *f = *state;
    uint8_t body[TSN_BODY_MAX];
    size_t len = tsn_body(20, body, 4000);

    tsn_log_and_snap(&f->x, 1, 10, 2, 2);
    ts_append(&f->x.t, 11, 20, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->x.t, 20));
    fs_fault_enospc(f->x.t.ff, true);
    assert_int_equal(snap_write(f->x.sn, 20, 2, body, len, f->x.errmsg),
                     KEEL_ENOSPC);
    fs_fault_enospc(f->x.t.ff, false);
    assert_false(tsn_snap_exists(&f->x, 20));
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.index, 10);
    assert_int_equal(f->x.lr.quarantined, 0);
}

/* An explicit, committed deletion: the store's keys and segments go, then
 * the snapshot files. */
static void a_committed_deletion_removes_the_snapshot_files(void **state)
{
    struct fixture *f = *state;
    struct snap_config cfg = tsn_cfg(&f->x);
    char path[1024];

    tsn_log_and_snap(&f->x, 1, 10, 2, 2);
    snap_path(f->x.sn, 10, path, sizeof path);
    tsn_close_snap(&f->x);
    assert_int_equal(store_group_delete(f->x.t.s, &f->x.t.gid, NULL), 0);
    f->x.t.g = NULL;
    assert_true(tsn_exists(&f->x, path));
    assert_int_equal(snap_group_delete(&cfg, &f->x.t.gid, f->x.errmsg), 0);
    assert_false(tsn_exists(&f->x, path));
    /* A second call finds nothing to delete. */
    assert_int_equal(snap_group_delete(&cfg, &f->x.t.gid, f->x.errmsg), 0);
}

#define PROP_SEEDS 6
#define PROP_ROUNDS 8

static uint64_t prop_rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Property: writes with a random crash point and a random power-loss cut
 * (the file system keeps only synced data, or a random subset of unsynced
 * pages) always restart from the newest recorded snapshot, with the older
 * recorded one still on disk. */
static void any_crash_restarts_from_the_newest_recorded_snapshot(void **state)
{
    struct fixture *f = *state;
    static const enum fs_fault_cut cuts[] = {FS_CUT_DROP, FS_CUT_REORDER,
                                             FS_CUT_TEAR_BYTE};
    uint8_t body[TSN_BODY_MAX];

    for (uint64_t seed = 1; seed <= PROP_SEEDS; seed++) {
        uint64_t rng = seed * 0x9e3779b97f4a7c15ull;
        uint64_t newest = 0;
        uint64_t older = 0;
        uint64_t last = 0;
        tsn_fini(&f->x);
        tsn_init(&f->x, 100 + seed);
        for (unsigned r = 0; r < PROP_ROUNDS; r++) {
            uint64_t to = last + 1 + prop_rng(&rng) % 20;
            ts_append(&f->x.t, last + 1, to, 2, 64, 1);
            assert_true(ts_wait_persisted(&f->x.t, to));
            last = to;
            enum snap_crash_point cp =
                (enum snap_crash_point)(prop_rng(&rng) % 6);
            size_t len = tsn_body(to, body, 1 + prop_rng(&rng) % 3000);
            snap_debug_crash_at(f->x.sn, cp);
            int rv = snap_write(f->x.sn, to, 2, body, len, f->x.errmsg);
            assert_int_equal(rv, cp == SNAP_CRASH_NONE ? 0 : KEEL_ECANCELED);
            if (cp == SNAP_CRASH_NONE || cp == SNAP_CRASH_BEFORE_DELETE) {
                older = newest;
                newest = to;
            }
            if (cp == SNAP_CRASH_NONE && prop_rng(&rng) % 2 == 0) {
                continue; /* keep running: the next round writes again */
            }
            tsn_crash_reopen(&f->x, cuts[prop_rng(&rng) % 3]);
            if (newest == 0) {
                assert_int_equal(f->x.lr.named_index, 0);
                continue;
            }
            if (f->x.lr.index != newest || f->x.lr.named_older_index != older) {
                fail_msg("seed %llu round %u: loaded %llu (older %llu), want "
                         "%llu (older %llu)",
                         (unsigned long long)seed, r,
                         (unsigned long long)f->x.lr.index,
                         (unsigned long long)f->x.lr.named_older_index,
                         (unsigned long long)newest, (unsigned long long)older);
            }
            assert_false(f->x.lr.newest_bad);
            assert_true(older == 0 || tsn_snap_exists(&f->x, older));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_written_snapshot_survives_power_loss_and_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_snapshot_before_its_entries_persist_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_after_the_temp_write_keeps_the_old_snapshot, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_after_the_temp_sync_keeps_the_old_snapshot, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_after_rename_before_dir_fsync_keeps_the_old, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_before_the_lmdb_record_keeps_the_old, setup, teardown),
        cmocka_unit_test_setup_teardown(
            the_two_newest_are_kept_and_older_ones_deleted, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_before_the_delete_keeps_both_named, setup, teardown),
        cmocka_unit_test_setup_teardown(
            the_prefix_drops_only_up_to_the_older_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(
            out_of_space_keeps_the_previous_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_committed_deletion_removes_the_snapshot_files, setup, teardown),
        cmocka_unit_test_setup_teardown(
            any_crash_restarts_from_the_newest_recorded_snapshot, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
