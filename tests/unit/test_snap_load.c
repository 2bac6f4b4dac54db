/* Loading at start (docs/design.md §5, docs/faults.md): a bad
 * newest snapshot moves to quarantine and the node restores from the older
 * one plus the log, votes with the LMDB extent and does not lead; with
 * neither valid and a log that does not reach back, the node is amnesiac.
 */
#include <xxhash.h>

#include "test_snap_common.h"

struct fixture {
    struct tsn x;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    tsn_init(&f->x, 23);
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

/* Snapshots at 200 and 400 (term 2); with cut, the log prefix <= 200 is
 * dropped, so the log no longer reaches back to index 1. */
static void two_snapshots(struct fixture *f, bool cut)
{
    tsn_log_and_snap(&f->x, 1, 200, 2, 2);
    tsn_log_and_snap(&f->x, 201, 400, 2, 2);
    if (cut) {
        assert_int_equal(snap_drop_prefix(f->x.sn, 200, f->x.errmsg), 0);
        tsn_clean_reopen(&f->x);
        assert_true(f->x.t.rep.first_index > 1);
    }
}

static void expect_restored_from_older(struct fixture *f)
{
    char q[1024];
    char line[512];

    snap_report_describe(&f->x.lr, line, sizeof line);
    assert_non_null(strstr(line, "newest snapshot 400 quarantined"));
    assert_non_null(strstr(line, "restored from snapshot 200"));
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_OLDER);
    assert_int_equal(f->x.lr.index, 200);
    assert_int_equal(f->x.lr.term, 2);
    tsn_expect_body(&f->x.lr, 200, 1000);
    assert_true(f->x.lr.newest_bad);
    assert_true(f->x.lr.must_not_lead);
    assert_false(f->x.lr.amnesia);
    assert_int_equal(f->x.lr.named_index, 400);
    /* Never deleted: the bad file is in quarantine/. */
    tsn_quarantined(&f->x, 400, q, sizeof q);
    assert_true(tsn_exists(&f->x, q));
    assert_false(tsn_snap_exists(&f->x, 400));
}

static void a_bit_flip_in_the_newest_body_restores_from_the_older(void **state)
{
    struct fixture *f = *state;

    two_snapshots(f, true);
    tsn_flip(&f->x, 400, SNAP_HEADER_BYTES + 500);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    expect_restored_from_older(f);
    assert_int_equal(f->x.lr.quarantined, 1);
}

static void
a_bit_flip_in_the_newest_header_restores_from_the_older(void **state)
{
    struct fixture *f = *state;

    two_snapshots(f, true);
    tsn_flip(&f->x, 400, 33); /* inside the index field */
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    expect_restored_from_older(f);
}

static void a_truncated_newest_restores_from_the_older(void **state)
{
    struct fixture *f = *state;
    char path[1024];

    two_snapshots(f, true);
    snap_path(f->x.sn, 400, path, sizeof path);
    assert_int_equal(fs_fault_truncate(f->x.t.ff, path, 500), 0);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    expect_restored_from_older(f);
    assert_non_null(strstr(f->x.lr.newest_reason, "bytes"));
}

/* LMDB names a snapshot whose file is missing: reported, older used. */
static void a_missing_newest_file_restores_from_the_older(void **state)
{
    struct fixture *f = *state;
    char path[1024];

    two_snapshots(f, true);
    snap_path(f->x.sn, 400, path, sizeof path);
    assert_int_equal(fs_fault_delete(f->x.t.ff, path), 0);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_OLDER);
    assert_true(f->x.lr.newest_bad);
    assert_true(f->x.lr.must_not_lead);
    assert_non_null(strstr(f->x.lr.newest_reason, "no file"));
}

/* §5 Extent: a bad file never shrinks it, across restarts. */
static void the_extent_keeps_the_quarantined_newest(void **state)
{
    struct fixture *f = *state;

    two_snapshots(f, true);
    tsn_flip(&f->x, 400, SNAP_HEADER_BYTES + 1);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_OLDER);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.t.rep.extent_index, 400);
    assert_int_equal(f->x.t.rep.extent_term, 2);
    assert_int_equal(f->x.t.rep.snapshot_index, 400);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_OLDER);
}

/* docs/design.md §5 S4: no valid snapshot and a log that does not reach back
 * to index 1: amnesia, recorded so a restart keeps it. */
static void both_bad_after_a_cut_makes_the_node_amnesiac(void **state)
{
    struct fixture *f = *state;

    two_snapshots(f, true);
    tsn_flip(&f->x, 400, SNAP_HEADER_BYTES + 7);
    tsn_flip(&f->x, 200, SNAP_HEADER_BYTES + 9);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_AMNESIA);
    assert_true(f->x.lr.amnesia);
    char line[512];
    snap_report_describe(&f->x.lr, line, sizeof line);
    assert_non_null(strstr(line, "amnesiac"));
    assert_true(f->x.lr.newest_bad);
    assert_true(f->x.lr.older_bad);
    assert_null(f->x.lr.body);
    assert_int_equal(f->x.lr.quarantined, 2);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_true(f->x.t.rep.amnesia);
    assert_int_equal(f->x.t.rep.amnesia_reason, STORE_AMNESIA_RECORDED);
    assert_int_equal(f->x.t.rep.extent_index, 400);
}

/* Both bad, but nothing was ever dropped: rebuild from index 1. */
static void both_bad_with_the_whole_log_rebuilds_from_index_1(void **state)
{
    struct fixture *f = *state;

    two_snapshots(f, false);
    tsn_flip(&f->x, 400, SNAP_HEADER_BYTES + 7);
    tsn_flip(&f->x, 200, SNAP_HEADER_BYTES + 9);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_LOG);
    assert_false(f->x.lr.amnesia);
    assert_true(f->x.lr.must_not_lead);
}

/* Three snapshots, the first deleted, the log cut at the older named one:
 * a bad newest still restores locally. */
static void
a_third_snapshot_and_a_cut_at_the_older_still_restore_locally(void **state)
{
    struct fixture *f = *state;

    tsn_log_and_snap(&f->x, 1, 200, 2, 2);
    tsn_log_and_snap(&f->x, 201, 400, 2, 2);
    tsn_log_and_snap(&f->x, 401, 600, 2, 2);
    /* Named: 600 and 400; the log starts after 400's segment cut. */
    assert_int_equal(snap_drop_prefix(f->x.sn, 400, f->x.errmsg), 0);
    tsn_clean_reopen(&f->x);
    assert_true(f->x.t.rep.first_index > 201);
    tsn_flip(&f->x, 600, SNAP_HEADER_BYTES + 3);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    /* 400 is valid and the log continues it (drop stayed <= 400). */
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_OLDER);
    assert_int_equal(f->x.lr.index, 400);
}

/* After a quarantine LMDB still names the bad file as older once a new
 * snapshot is written: the prefix may only drop to the valid one, and the
 * valid older file is kept. */
static void after_a_quarantine_the_valid_older_file_is_kept(void **state)
{
    struct fixture *f = *state;
    struct snap_info si;

    two_snapshots(f, true);
    tsn_flip(&f->x, 400, SNAP_HEADER_BYTES + 2);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    tsn_log_and_snap(&f->x, 401, 600, 2, 2);
    snap_info(f->x.sn, &si);
    assert_int_equal(si.newest_index, 600);
    assert_int_equal(si.older_index, 200);
    assert_false(si.must_not_lead);
    assert_true(tsn_snap_exists(&f->x, 200));
    assert_int_equal(snap_drop_prefix(f->x.sn, 400, f->x.errmsg), KEEL_EPERM);
    assert_int_equal(snap_drop_prefix(f->x.sn, 200, f->x.errmsg), 0);
}

/* After restoring from the older snapshot, the node may not record below
 * the quarantined newest (LMDB names it; the store would refuse), but a
 * snapshot at that very (index, term) replaces the bad file. */
static void
a_new_snapshot_at_the_quarantined_index_restores_the_pair(void **state)
{
    struct fixture *f = *state;
    uint8_t body[TSN_BODY_MAX];
    size_t len = tsn_body(400, body, 1000);
    struct snap_info si;

    two_snapshots(f, true);
    tsn_flip(&f->x, 400, SNAP_HEADER_BYTES + 2);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_OLDER);
    assert_int_equal(snap_write(f->x.sn, 300, 2, body, len, f->x.errmsg),
                     KEEL_ESTALE);
    assert_int_equal(snap_write(f->x.sn, 400, 3, body, len, f->x.errmsg),
                     KEEL_ESTALE);
    assert_int_equal(snap_write(f->x.sn, 400, 2, body, len, f->x.errmsg), 0);
    snap_info(f->x.sn, &si);
    assert_int_equal(si.newest_index, 400);
    assert_int_equal(si.older_index, 200);
    assert_false(si.must_not_lead);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_NEWEST);
    assert_int_equal(f->x.lr.index, 400);
    assert_false(f->x.lr.newest_bad);
    assert_true(tsn_snap_exists(&f->x, 200));
}

/* Replace the file of the named newest (400) with a well-formed snapshot
 * whose group or term differs: it must not load. */
static void plant(struct fixture *f, uint8_t group_byte, uint64_t term)
{
    struct fs *fs = fs_fault_fs(f->x.t.ff);
    uint8_t buf[SNAP_HEADER_BYTES + 64];
    struct snap_header h;
    struct fs_file *file = NULL;
    char path[1024];

    memset(&h, 0, sizeof h);
    memcpy(h.group, f->x.t.gid.b, 16);
    h.group[0] = group_byte;
    h.index = 400;
    h.term = term;
    h.body_bytes = 64;
    memset(buf + SNAP_HEADER_BYTES, 0x5a, 64);
    XXH128_hash_t hh = XXH3_128bits(buf + SNAP_HEADER_BYTES, 64);
    h.body_hash_low = hh.low64;
    h.body_hash_high = hh.high64;
    snap_header_encode(&h, buf);
    snap_path(f->x.sn, 400, path, sizeof path);
    assert_int_equal(fs->open(fs, path, FS_RDWR, &file, NULL), 0);
    assert_int_equal(fs->ftruncate(fs, file, 0, NULL), 0);
    struct iovec iov = {buf, sizeof buf};
    assert_int_equal(fs->pwritev(fs, file, &iov, 1, 0, NULL), 0);
    assert_int_equal(fs->fsync(fs, file, NULL), 0);
    fs->close(fs, file);
}

static void a_valid_file_of_another_group_is_not_loaded(void **state)
{
    struct fixture *f = *state;

    two_snapshots(f, true);
    plant(f, (uint8_t)(f->x.t.gid.b[0] ^ 0xff), 2);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    expect_restored_from_older(f);
    assert_non_null(strstr(f->x.lr.newest_reason, "another group"));
}

static void a_valid_file_of_another_term_is_not_loaded(void **state)
{
    struct fixture *f = *state;

    two_snapshots(f, true);
    plant(f, f->x.t.gid.b[0], 3);
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    expect_restored_from_older(f);
    assert_non_null(strstr(f->x.lr.newest_reason, "LMDB names"));
}

static void no_snapshot_and_a_log_from_index_1_rebuilds(void **state)
{
    struct fixture *f = *state;

    ts_append(&f->x.t, 1, 50, 2, 100, 1);
    assert_true(ts_wait_persisted(&f->x.t, 50));
    tsn_crash_reopen(&f->x, FS_CUT_DROP);
    assert_int_equal(f->x.lr.source, SNAP_SOURCE_LOG);
    assert_int_equal(f->x.lr.index, 0);
    assert_false(f->x.lr.amnesia);
    assert_false(f->x.lr.must_not_lead);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_bit_flip_in_the_newest_body_restores_from_the_older, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_bit_flip_in_the_newest_header_restores_from_the_older, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_truncated_newest_restores_from_the_older, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_missing_newest_file_restores_from_the_older, setup, teardown),
        cmocka_unit_test_setup_teardown(the_extent_keeps_the_quarantined_newest,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            both_bad_after_a_cut_makes_the_node_amnesiac, setup, teardown),
        cmocka_unit_test_setup_teardown(
            both_bad_with_the_whole_log_rebuilds_from_index_1, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_third_snapshot_and_a_cut_at_the_older_still_restore_locally,
            setup, teardown),
        cmocka_unit_test_setup_teardown(
            after_a_quarantine_the_valid_older_file_is_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_new_snapshot_at_the_quarantined_index_restores_the_pair, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_valid_file_of_another_group_is_not_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_valid_file_of_another_term_is_not_loaded, setup, teardown),
        cmocka_unit_test_setup_teardown(
            no_snapshot_and_a_log_from_index_1_rebuilds, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
