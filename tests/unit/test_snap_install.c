/* InstallSnapshot (docs/design.md §5 S5): the leader's
 * snapshot and retained log travel in checksummed frames; the follower
 * refuses a damaged frame or transfer, writes the retained log, then the
 * snapshot, then the LMDB record, and keeps matching entries.
 */
#include "test_snap_common.h"

struct fixture {
    struct tsn l; /* leader */
    struct tsn f; /* follower */
    uint8_t *frame;
};

static int setup(void **state)
{
    struct fixture *fx = test_calloc(1, sizeof *fx);
    tsn_init_seg(&fx->l, 41, 1024 * 1024);
    tsn_init_seg(&fx->f, 43, 1024 * 1024);
    fx->frame = test_malloc(SNAP_FRAME_BYTES);
    /* Leader: 1..100 in term 1, 101..300 in term 2 (1200-byte payloads:
     * several frames), snapshot at 250. */
    ts_append(&fx->l.t, 1, 100, 1, 1200, 1);
    ts_append(&fx->l.t, 101, 300, 2, 1200, 1);
    assert_true(ts_wait_persisted(&fx->l.t, 300));
    uint8_t body[TSN_BODY_MAX];
    size_t len = tsn_body(250, body, 3000);
    assert_int_equal(snap_write(fx->l.sn, 250, 2, body, len, NULL), 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    tsn_fini(&fx->l);
    tsn_fini(&fx->f);
    test_free(fx->frame);
    test_free(fx);
    return 0;
}

/* Move every frame from the leader's transfer to the follower's. */
static void transfer(struct fixture *fx, uint64_t log_first,
                     struct snap_recv **out)
{
    struct snap_send *ss = NULL;
    struct snap_recv *sr = NULL;
    uint64_t total = 0;
    uint64_t off = 0;
    bool rdone = false;
    unsigned frames = 0;

    assert_int_equal(snap_send_open(fx->l.sn, log_first, &ss, &total, NULL), 0);
    assert_int_equal(snap_recv_open(fx->f.sn, 250, 2, log_first, &sr, NULL), 0);
    while (!rdone) {
        size_t len = 0;
        bool done = false;
        uint64_t next = 0;
        assert_true(++frames < 100);
        assert_int_equal(snap_send_chunk(ss, off, fx->frame, SNAP_FRAME_BYTES,
                                         &len, &done, NULL),
                         0);
        assert_int_equal(
            snap_recv_chunk(sr, off, fx->frame, len, &next, &rdone, NULL), 0);
        assert_int_equal(done, rdone);
        off = next;
    }
    assert_int_equal(off, total);
    assert_true(log_first > 1 || frames >= 2);
    snap_send_close(ss);
    *out = sr;
}

static void install(struct fixture *fx, struct snap_recv *sr)
{
    char errmsg[KEEL_ERRMSG_MAX] = "";
    int rv = snap_recv_apply_log(sr, errmsg);
    if (rv != 0) {
        fail_msg("apply_log: %s: %s", keel_errname(rv), errmsg);
    }
    assert_true(ts_wait_persisted(&fx->f.t, 250));
    assert_int_equal(snap_recv_commit(sr, errmsg), 0);
}

static void an_install_writes_the_retained_log_and_the_snapshot(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;

    transfer(fx, 1, &sr);
    install(fx, sr);
    snap_recv_close(sr);
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_int_equal(fx->f.lr.source, SNAP_SOURCE_NEWEST);
    assert_int_equal(fx->f.lr.index, 250);
    assert_int_equal(fx->f.lr.term, 2);
    tsn_expect_body(&fx->f.lr, 250, 3000);
    for (uint64_t i = 1; i <= 250; i++) {
        ts_expect(&fx->f.t, i, i <= 100 ? 1 : 2, 1);
    }
}

/* In steps of 4 KiB (decision 0041) the install takes many calls and
 * leaves what one call leaves. */
static void an_install_in_small_steps_writes_the_same_log(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    bool done = false;
    unsigned steps = 0;

    transfer(fx, 1, &sr);
    while (!done) {
        assert_true(++steps < 1000);
        int rv = snap_recv_apply_step(sr, 4096, &done, errmsg);
        if (rv != 0) {
            fail_msg("apply_step: %s: %s", keel_errname(rv), errmsg);
        }
    }
    /* 250 records of 1200 bytes, checked then written: over 100 steps. */
    assert_true(steps > 100);
    assert_true(ts_wait_persisted(&fx->f.t, 250));
    assert_int_equal(snap_recv_commit(sr, errmsg), 0);
    snap_recv_close(sr);
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_int_equal(fx->f.lr.index, 250);
    for (uint64_t i = 1; i <= 250; i++) {
        ts_expect(&fx->f.t, i, i <= 100 ? 1 : 2, 1);
    }
}

/* The retained log must be durable before the snapshot counts. */
static void the_commit_waits_for_the_retained_log_to_persist(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;

    char path[1024];

    tsn_restart(&fx->f, true); /* store work runs only while we wait */
    transfer(fx, 1, &sr);
    assert_int_equal(snap_recv_apply_log(sr, NULL), 0);
    assert_int_equal(snap_recv_commit(sr, NULL), KEEL_EAGAIN);
    snap_path(fx->f.sn, 250, path, sizeof path);
    assert_false(tsn_exists(&fx->f, path));
    assert_true(ts_wait_persisted(&fx->f.t, 250));
    assert_int_equal(snap_recv_commit(sr, NULL), 0);
    snap_recv_close(sr);
}

static void a_corrupted_chunk_is_refused_and_its_resend_accepted(void **state)
{
    struct fixture *fx = *state;
    struct snap_send *ss = NULL;
    struct snap_recv *sr = NULL;
    uint64_t total = 0;
    uint64_t next = 99;
    size_t len = 0;
    bool done = false;

    assert_int_equal(snap_send_open(fx->l.sn, 1, &ss, &total, NULL), 0);
    assert_int_equal(snap_recv_open(fx->f.sn, 250, 2, 1, &sr, NULL), 0);
    assert_int_equal(
        snap_send_chunk(ss, 0, fx->frame, SNAP_FRAME_BYTES, &len, &done, NULL),
        0);
    fx->frame[SNAP_FRAME_HEADER_BYTES + 1000] ^= 0x10;
    /* The driver's check before stepping Raft, and the receiver's own. */
    struct snap_frame fm;
    assert_int_equal(snap_frame_check(fx->frame, len, &fm, NULL),
                     KEEL_ECORRUPT);
    assert_int_equal(snap_recv_chunk(sr, 0, fx->frame, len, &next, &done, NULL),
                     KEEL_ECORRUPT);
    assert_int_equal(next, 0);
    /* Out of order: the follower names the offset it expects. */
    assert_int_equal(snap_recv_chunk(sr, SNAP_FRAME_BYTES, fx->frame, len,
                                     &next, &done, NULL),
                     KEEL_ESTALE);
    assert_int_equal(next, 0);
    fx->frame[SNAP_FRAME_HEADER_BYTES + 1000] ^= 0x10;
    assert_int_equal(snap_recv_chunk(sr, 0, fx->frame, len, &next, &done, NULL),
                     0);
    assert_int_equal(next, SNAP_FRAME_BYTES);
    snap_send_close(ss);
    snap_recv_close(sr);
}

/* Frames that each check out but carry damaged content (re-checksummed):
 * the whole-transfer validation refuses it before anything is written. */
static void a_transfer_with_damaged_content_writes_nothing(void **state)
{
    struct fixture *fx = *state;
    struct snap_send *ss = NULL;
    struct snap_recv *sr = NULL;
    struct store_group_info gi;
    uint64_t total = 0;
    uint64_t off = 0;
    bool rdone = false;

    assert_int_equal(snap_send_open(fx->l.sn, 1, &ss, &total, NULL), 0);
    assert_int_equal(snap_recv_open(fx->f.sn, 250, 2, 1, &sr, NULL), 0);
    for (unsigned k = 0; !rdone; k++) {
        size_t len = 0;
        bool done = false;
        assert_true(k < 100);
        assert_int_equal(snap_send_chunk(ss, off, fx->frame, SNAP_FRAME_BYTES,
                                         &len, &done, NULL),
                         0);
        if (k == 1) {
            /* Damage a record payload and forge the frame checksum. */
            struct snap_frame fm;
            assert_int_equal(snap_frame_check(fx->frame, len, &fm, NULL), 0);
            fx->frame[SNAP_FRAME_HEADER_BYTES + 5000] ^= 0x01;
            assert_int_equal(snap_frame_check(fx->frame, len, &fm, NULL),
                             KEEL_ECORRUPT);
            snap_frame_seal(fx->frame, fm.len, fm.data_off, fm.total);
            assert_int_equal(snap_frame_check(fx->frame, len, &fm, NULL), 0);
        }
        assert_int_equal(
            snap_recv_chunk(sr, off, fx->frame, len, &off, &rdone, NULL), 0);
    }
    assert_int_equal(snap_recv_apply_log(sr, fx->f.errmsg), KEEL_ECORRUPT);
    store_group_info(fx->f.t.g, &gi);
    assert_int_equal(gi.last_index, 0);
    snap_send_close(ss);
    snap_recv_close(sr);
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_int_equal(fx->f.lr.named_index, 0);
}

/* Never discard a local entry that matches the leader's; replace from the
 * first one that does not. */
static void matching_entries_are_kept_and_divergent_ones_replaced(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;

    /* Same (index, term) as the leader for 1..100; version 7 marks that
     * the bytes were never rewritten. 101..120 are a stale term 1. */
    ts_append(&fx->f.t, 1, 120, 1, 300, 7);
    assert_true(ts_wait_persisted(&fx->f.t, 120));
    transfer(fx, 1, &sr);
    install(fx, sr);
    snap_recv_close(sr);
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    ts_expect(&fx->f.t, 1, 1, 7);
    ts_expect(&fx->f.t, 100, 1, 7);
    ts_expect(&fx->f.t, 101, 2, 1);
    ts_expect(&fx->f.t, 250, 2, 1);
    assert_int_equal(fx->f.lr.index, 250);
}

/* A local log that ends before the leader's retained log starts is
 * replaced as a whole (docs/design.md §5 S5: drop our own entries below
 * log_first). */
static void a_log_behind_the_leaders_first_index_is_replaced(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;
    struct store_group_info gi;

    ts_append(&fx->f.t, 1, 10, 1, 100, 1);
    assert_true(ts_wait_persisted(&fx->f.t, 10));
    transfer(fx, 200, &sr);
    assert_int_equal(snap_recv_apply_log(sr, fx->f.errmsg), 0);
    assert_true(snap_recv_replacing(sr));
    /* Nothing names the new segments yet: the old log is the log. */
    store_group_info(fx->f.t.g, &gi);
    assert_int_equal(gi.first_index, 1);
    assert_int_equal(gi.last_index, 10);
    assert_int_equal(snap_recv_commit(sr, fx->f.errmsg), 0);
    snap_recv_close(sr);
    store_group_info(fx->f.t.g, &gi);
    assert_int_equal(gi.first_index, 200);
    assert_int_equal(gi.last_index, 250);
    assert_int_equal(gi.persisted_index, 250);
    /* The replaced log takes appends after it. */
    ts_append(&fx->f.t, 251, 260, 2, 100, 1);
    assert_true(ts_wait_persisted(&fx->f.t, 260));
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_int_equal(fx->f.lr.source, SNAP_SOURCE_NEWEST);
    assert_int_equal(fx->f.lr.index, 250);
    assert_int_equal(fx->f.t.rep.first_index, 200);
    assert_int_equal(fx->f.t.rep.last_index, 260);
    assert_false(fx->f.t.rep.amnesia);
    assert_int_equal(fx->f.t.rep.n_faulty, 0);
    ts_expect(&fx->f.t, 200, 2, 1);
    ts_expect(&fx->f.t, 250, 2, 1);
    ts_expect(&fx->f.t, 260, 2, 1);
}

/* The leader dropped its log through the snapshot (a committed cut at
 * the older snapshot it sends, docs/design.md §5): the retained log is
 * empty (log_first = index + 1) and the transfer is the snapshot alone.
 * It was refused as "log section failed its checksum" (the section's
 * last term, of no record, is not the snapshot's), and the leader sent
 * the same transfer again for ever (issue 21). */
static void a_transfer_with_an_empty_retained_log_installs(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;
    struct store_group_info gi;

    transfer(fx, 251, &sr);
    int rv = snap_recv_apply_log(sr, fx->f.errmsg);
    if (rv != 0) {
        fail_msg("apply_log: %s: %s", keel_errname(rv), fx->f.errmsg);
    }
    assert_int_equal(snap_recv_commit(sr, fx->f.errmsg), 0);
    snap_recv_close(sr);
    store_group_info(fx->f.t.g, &gi);
    assert_int_equal(gi.first_index, 251);
    assert_int_equal(gi.last_index, 250);
    /* The log after the snapshot takes appends. */
    ts_append(&fx->f.t, 251, 260, 2, 100, 1);
    assert_true(ts_wait_persisted(&fx->f.t, 260));
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_int_equal(fx->f.lr.source, SNAP_SOURCE_NEWEST);
    assert_int_equal(fx->f.lr.index, 250);
    tsn_expect_body(&fx->f.lr, 250, 3000);
    assert_int_equal(fx->f.t.rep.first_index, 251);
    assert_int_equal(fx->f.t.rep.last_index, 260);
    ts_expect(&fx->f.t, 251, 2, 1);
}

/* The local entry at log_first differs (so does every later one): the
 * divergent tail is truncated and the whole log replaced. */
static void
a_divergent_entry_at_the_leaders_first_index_is_replaced(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;

    ts_append(&fx->f.t, 1, 220, 1, 100, 1);
    assert_true(ts_wait_persisted(&fx->f.t, 220));
    transfer(fx, 150, &sr);
    assert_int_equal(snap_recv_apply_log(sr, fx->f.errmsg), 0);
    assert_true(snap_recv_replacing(sr));
    assert_int_equal(snap_recv_commit(sr, fx->f.errmsg), 0);
    snap_recv_close(sr);
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_int_equal(fx->f.lr.index, 250);
    assert_int_equal(fx->f.t.rep.first_index, 150);
    assert_int_equal(fx->f.t.rep.last_index, 250);
    ts_expect(&fx->f.t, 150, 2, 1);
    ts_expect(&fx->f.t, 250, 2, 1);
}

/* Crash at each step of a replacement (docs/design.md §5 order: segments
 * synced, snapshot file, then one LMDB transaction): the old state or the new,
 * never a mix; LMDB names only synced files. */
enum replace_crash {
    CRASH_AFTER_SEGMENTS,  /* new segments synced, nothing named */
    CRASH_AFTER_SNAP_FILE, /* + the snapshot file, LMDB not written */
    CRASH_AFTER_LMDB,      /* named; the old segments not yet unlinked */
};

static void replace_and_crash(struct fixture *fx, enum replace_crash at)
{
    struct snap_recv *sr = NULL;

    /* Manual sync: the old segments' deletion stays queued. */
    tsn_restart(&fx->f, true);
    ts_append(&fx->f.t, 1, 10, 1, 100, 1);
    assert_true(ts_wait_persisted(&fx->f.t, 10));
    transfer(fx, 200, &sr);
    assert_int_equal(snap_recv_apply_log(sr, fx->f.errmsg), 0);
    if (at == CRASH_AFTER_SNAP_FILE) {
        snap_debug_crash_at(fx->f.sn, SNAP_CRASH_BEFORE_RECORD);
        assert_int_equal(snap_recv_commit(sr, NULL), KEEL_ECANCELED);
    } else if (at == CRASH_AFTER_LMDB) {
        assert_int_equal(snap_recv_commit(sr, fx->f.errmsg), 0);
    }
    store_debug_kill(fx->f.t.s); /* the process dies: no more writes */
    snap_recv_close(sr);
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_false(fx->f.t.rep.amnesia);
    assert_int_equal(fx->f.t.rep.n_faulty, 0);
    assert_int_equal(fx->f.t.rep.n_lost, 0);
    assert_true(fx->f.t.rep.quarantined_files >= 1);
}

static void a_crash_after_the_new_segments_keeps_the_old_log(void **state)
{
    struct fixture *fx = *state;

    replace_and_crash(fx, CRASH_AFTER_SEGMENTS);
    assert_int_equal(fx->f.t.rep.first_index, 1);
    assert_int_equal(fx->f.t.rep.last_index, 10);
    assert_int_equal(fx->f.lr.named_index, 0);
    ts_expect(&fx->f.t, 10, 1, 1);
}

static void a_crash_before_the_lmdb_swap_keeps_the_old_log(void **state)
{
    struct fixture *fx = *state;

    replace_and_crash(fx, CRASH_AFTER_SNAP_FILE);
    assert_int_equal(fx->f.t.rep.first_index, 1);
    assert_int_equal(fx->f.t.rep.last_index, 10);
    assert_int_equal(fx->f.lr.named_index, 0);
    assert_int_equal(fx->f.lr.unnamed, 1); /* the snapshot file */
    ts_expect(&fx->f.t, 1, 1, 1);
}

static void a_crash_after_the_lmdb_swap_has_the_new_log(void **state)
{
    struct fixture *fx = *state;

    replace_and_crash(fx, CRASH_AFTER_LMDB);
    assert_int_equal(fx->f.t.rep.first_index, 200);
    assert_int_equal(fx->f.t.rep.last_index, 250);
    assert_int_equal(fx->f.lr.source, SNAP_SOURCE_NEWEST);
    assert_int_equal(fx->f.lr.index, 250);
    ts_expect(&fx->f.t, 200, 2, 1);
    ts_expect(&fx->f.t, 250, 2, 1);
}

static void a_crash_before_the_record_leaves_the_install_uncounted(void **state)
{
    struct fixture *fx = *state;
    struct snap_recv *sr = NULL;

    transfer(fx, 1, &sr);
    assert_int_equal(snap_recv_apply_log(sr, NULL), 0);
    assert_true(ts_wait_persisted(&fx->f.t, 250));
    snap_debug_crash_at(fx->f.sn, SNAP_CRASH_BEFORE_RECORD);
    assert_int_equal(snap_recv_commit(sr, NULL), KEEL_ECANCELED);
    snap_recv_close(sr);
    tsn_crash_reopen(&fx->f, FS_CUT_DROP);
    assert_int_equal(fx->f.lr.named_index, 0);
    assert_int_equal(fx->f.lr.source, SNAP_SOURCE_LOG);
    assert_int_equal(fx->f.lr.unnamed, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            an_install_writes_the_retained_log_and_the_snapshot, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            an_install_in_small_steps_writes_the_same_log, setup, teardown),
        cmocka_unit_test_setup_teardown(
            the_commit_waits_for_the_retained_log_to_persist, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_corrupted_chunk_is_refused_and_its_resend_accepted, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_transfer_with_damaged_content_writes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            matching_entries_are_kept_and_divergent_ones_replaced, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_transfer_with_an_empty_retained_log_installs, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_log_behind_the_leaders_first_index_is_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_divergent_entry_at_the_leaders_first_index_is_replaced, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_after_the_new_segments_keeps_the_old_log, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_before_the_lmdb_swap_keeps_the_old_log, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_after_the_lmdb_swap_has_the_new_log, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_crash_before_the_record_leaves_the_install_uncounted, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
