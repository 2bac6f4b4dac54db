/* One test per store rule of docs/design.md §4 and §5 (each with its trace
 * there). Each fails when its rule is removed.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "meta.h"
#include "store_test_util.h"

struct fixture {
    struct ts t;
};

static void hard_state(struct ts *t, uint64_t term)
{
    assert_int_equal(store_hard_state_save(t->g, term, "v", 1, NULL), 0);
    assert_true(ts_wait_hard_state(t, term));
}

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 7, false);
    ts_open(&f->t);
    hard_state(&f->t, 5);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    ts_fini(&f->t);
    test_free(f);
    return 0;
}

/* docs/design.md §4.3: truncate at 6, append shorter 6'-7',
 * sync: every byte after 7' (and its marker) to the old end is zero. */
static void conflict_truncation_zeroes_to_the_old_end(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off7;
    uint64_t off10;
    uint8_t buf[16384];
    size_t got;

    ts_append(&f->t, 1, 10, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    ts_where(&f->t, 10, path, &off10);
    assert_int_equal(store_truncate(f->t.g, 6, NULL), 0);
    f->t.persisted_index = 5;
    ts_append(&f->t, 6, 7, 3, 20, 2);
    assert_true(ts_wait_persisted(&f->t, 7));
    assert_int_equal(f->t.persisted_term, 3);
    ts_where(&f->t, 7, path, &off7);
    uint64_t end7 = off7 + store_fmt_rec_bytes(20);
    uint64_t old_end = off10 + store_fmt_rec_bytes(200) + STORE_MARKER_BYTES;
    assert_int_equal(fs_fault_peek(f->t.ff, path, 0, buf, sizeof buf, &got), 0);
    struct store_fmt_marker m;
    assert_int_equal(store_fmt_marker_decode(buf + end7, got - end7,
                                             f->t.g == NULL ? 0 : 0,
                                             &m) == KEEL_ENOENT,
                     0);
    for (uint64_t i = end7 + STORE_MARKER_BYTES; i < old_end; i++) {
        if (buf[i] != 0) {
            fail_msg("byte %llu after 7' is not zero", (unsigned long long)i);
        }
    }
}

/* The conflict-truncation trace end to end: after a crash the stale
 * 8..10(t2) never come back. */
static void stale_records_are_never_readopted_after_a_crash(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 10, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    assert_int_equal(store_truncate(f->t.g, 6, NULL), 0);
    f->t.persisted_index = 5;
    ts_append(&f->t, 6, 7, 3, 20, 2);
    assert_true(ts_wait_persisted(&f->t, 7));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 7);
    assert_int_equal(f->t.rep.last_term, 3);
    assert_int_equal(f->t.rep.extent_index, 7);
    ts_expect(&f->t, 7, 3, 2);
    ts_expect(&f->t, 5, 2, 1);
}

/* docs/design.md §4.4: step 3's file with zeroing off (old tail
 * left in place), in both term orders: the log ends at 7'. */
static void scan_ends_at_the_shorter_tail_in_both_term_orders(void **state)
{
    struct fixture *f = *state;
    uint64_t orders[2][2] = {{2, 3}, {3, 3}};
    /* order 0: old 6..10(t2), new 6'..7'(t3); order 1: old 6..10(t3),
     * resent 6'..7' in the older term t2 is not allowed after t3 in one
     * log, so the stale successor has the same or higher term: 6'(t3)
     * written over 6..10(t3) of an uncommitted leader, a stale 8(t3). */
    store_debug_no_zeroing(f->t.s, true);
    for (int o = 0; o < 2; o++) {
        uint64_t base = o == 0 ? 0 : 20;
        if (o == 1) {
            ts_append(&f->t, 11, 20, 3, 50, 1);
            assert_true(ts_wait_persisted(&f->t, 20));
        }
        ts_append(&f->t, base + 1, base + 10, orders[o][0], 200, 1);
        assert_true(ts_wait_persisted(&f->t, base + 10));
        assert_int_equal(store_truncate(f->t.g, base + 6, NULL), 0);
        f->t.persisted_index = base + 5;
        ts_append(&f->t, base + 6, base + 7, orders[o][1], 20, 2);
        assert_true(ts_wait_persisted(&f->t, base + 7));
        ts_crash_reopen(&f->t, FS_CUT_DROP);
        store_debug_no_zeroing(f->t.s, true);
        assert_int_equal(f->t.rep.last_index, base + 7);
        assert_int_equal(f->t.rep.n_faulty, 0);
        assert_int_equal(f->t.rep.extent_index, base + 7);
        ts_expect(&f->t, base + 7, orders[o][1], 2);
        if (o == 0) {
            /* Continue the log for order 1 from 8. */
            ts_append(&f->t, 8, 10, 3, 50, 1);
            assert_true(ts_wait_persisted(&f->t, 10));
        }
    }
}

/* docs/design.md §4.5: one failed fdatasync aborts the process and
 * nothing is reported persisted. */
static void failed_fdatasync_aborts_with_nothing_persisted(void **state)
{
    struct fixture *f = *state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    /* The child runs its own store: threads do not survive fork. */
    ts_close(&f->t, true);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        ts_open(&f->t);
        fs_fault_fail_next_fdatasync(f->t.ff);
        ts_append(&f->t, 1, 5, 5, 100, 1);
        if (ts_wait_persisted(&f->t, 1)) {
            (void)!write(fds[1], "P", 1);
        }
        _exit(0);
    }
    close(fds[1]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char c;
    assert_int_equal(read(fds[0], &c, 1), 0);
    close(fds[0]);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    ts_open(&f->t);
}

/* docs/design.md §4.7 R2 (a): the marker is written before the fdatasync, so a
 * flip in the last synced record is faulty, not torn: extent (t5, 100). */
static void marker_keeps_a_flipped_last_record_faulty(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;

    ts_append(&f->t, 1, 90, 5, 40, 1);
    assert_true(ts_wait_persisted(&f->t, 90));
    ts_append(&f->t, 91, 100, 5, 40, 1);
    assert_true(ts_wait_persisted(&f->t, 100));
    ts_where(&f->t, 100, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 44, 1), 0);
    ts_open(&f->t);
    assert_true(f->t.rep.has_marker);
    assert_int_equal(f->t.rep.marker_index, 100);
    assert_int_equal(f->t.rep.extent_index, 100);
    assert_int_equal(f->t.rep.extent_term, 5);
    assert_int_equal(f->t.rep.n_faulty, 1);
    assert_int_equal(f->t.rep.faulty[0].from, 100);
    assert_int_equal(f->t.rep.faulty[0].to, 100);
    assert_false(f->t.rep.torn);
}

static struct store_record rec_of(uint64_t index, uint64_t term,
                                  uint64_t version, uint32_t len, uint8_t *buf)
{
    uint32_t l = ts_payload(index, version, len, buf);
    return (struct store_record){index, term, 1, 0, l, buf};
}

/* Repair between two batches: records appended one batch each (sync
 * publishes) sit between sync markers, the one before the damaged record
 * included; the copy goes in right after that marker, where the record
 * was (found by the cluster repair test, test_cjs_repair). */
static void repair_of_a_record_between_markers_lands_in_place(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;
    uint8_t buf[64];

    for (uint64_t k = 1; k <= 10; k++) {
        ts_append(&f->t, k, k, 3, 16, 1);
        assert_true(ts_wait_persisted(&f->t, k));
    }
    ts_where(&f->t, 5, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 20, 0), 0);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.n_faulty, 1);
    assert_int_equal(f->t.rep.faulty[0].from, 5);
    struct store_record good = rec_of(5, 3, 1, 16, buf);
    assert_int_equal(store_repair(f->t.g, &good, 1, NULL), 0);
    assert_true(ts_wait_repaired(&f->t, 5));
    ts_expect(&f->t, 5, 3, 1);
    ts_close(&f->t, true);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.n_faulty, 0);
    for (uint64_t k = 1; k <= 10; k++) {
        ts_expect(&f->t, k, 3, 1);
    }
}

/* docs/design.md §4.7 R2 (b) and Repair: the marker names the highest index,
 * repair appends none; a stale candidate fails the chain, the true copy is
 * written; a later flip at 900 is still faulty: extent (t5, 1000). */
static void repair_verifies_by_chain_and_marker_names_the_highest(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;
    uint8_t buf[64];

    f->t.segment_bytes = 64 * 1024;
    ts_close(&f->t, true);
    ts_open(&f->t);
    ts_append(&f->t, 1, 1000, 5, 16, 1);
    assert_true(ts_wait_persisted(&f->t, 1000));
    ts_where(&f->t, 300, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 20, 0), 0);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.faulty[0].from, 300);
    /* A stale 300'(t4) with the same shape does not verify. */
    struct store_record stale = rec_of(300, 4, 9, 16, buf);
    assert_int_equal(store_repair(f->t.g, &stale, 1, NULL), KEEL_ECONFLICT);
    struct store_entry e;
    assert_int_equal(store_read(f->t.g, 300, &e, NULL), KEEL_EFAULTY);
    struct store_record good = rec_of(300, 5, 1, 16, buf);
    assert_int_equal(store_repair(f->t.g, &good, 1, NULL), 0);
    assert_true(ts_wait_repaired(&f->t, 300));
    ts_expect(&f->t, 300, 5, 1);
    ts_where(&f->t, 900, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 20, 0), 0);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.marker_index, 1000);
    assert_int_equal(f->t.rep.extent_index, 1000);
    assert_int_equal(f->t.rep.extent_term, 5);
    assert_int_equal(f->t.rep.n_faulty, 1);
    assert_int_equal(f->t.rep.faulty[0].from, 900);
    ts_expect(&f->t, 300, 5, 1);
    ts_expect(&f->t, 1000, 5, 1);
}

/* docs/design.md §4.7 R5: a flipped payload byte fails the read, the index
 * becomes faulty, nothing is truncated. */
static void reads_verify_and_never_truncate(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;
    struct store_entry e;
    struct store_group_info info;

    ts_append(&f->t, 1, 1000 / 20, 5, 64, 1);
    assert_true(ts_wait_persisted(&f->t, 50));
    ts_where(&f->t, 25, path, &off);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 50, 2), 0);
    assert_int_equal(store_read(f->t.g, 25, &e, NULL), KEEL_ECORRUPT);
    assert_int_equal(store_read(f->t.g, 25, &e, NULL), KEEL_EFAULTY);
    store_group_info(f->t.g, &info);
    assert_int_equal(info.first_faulty, 25);
    assert_int_equal(info.last_index, 50);
    ts_expect(&f->t, 26, 5, 1);
    ts_expect(&f->t, 50, 5, 1);
}

/* docs/design.md §4.1: a power cut dropping every unsynced directory entry
 * keeps every acked record (new segments are fsynced into their dir). */
static void directory_entry_cut_keeps_every_acked_record(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 400, 5, 100, 1); /* spans several segments */
    assert_true(ts_wait_persisted(&f->t, 400));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 400);
    assert_false(f->t.rep.amnesia);
    for (uint64_t i = 1; i <= 400; i++) {
        ts_expect(&f->t, i, 5, 1);
    }
}

/* docs/design.md §4.1: a new group's directories are made without an
 * fsync on the opening (loop) thread; a sync thread makes their entries
 * durable before its first entry is persisted, so a power cut dropping
 * every unsynced directory entry keeps every acked record of it. */
static void a_new_group_is_durable_before_its_first_ack(void **state)
{
    struct fixture *f = *state;
    char errmsg[KEEL_ERRMSG_MAX];
    struct store_recovery rep;
    uint64_t dir_syncs = fs_fault_dir_syncs(f->t.ff);
    f->t.gid.b[0] ^= 0xff; /* a second, new group */
    assert_int_equal(store_group_open(f->t.s, &f->t.gid, &f->t.policy, &f->t.g,
                                      &rep, errmsg),
                     0);
    assert_int_equal(fs_fault_dir_syncs(f->t.ff), dir_syncs);
    assert_int_equal(rep.last_index, 0);
    f->t.hs_term = 0;
    hard_state(&f->t, 5);
    ts_append(&f->t, 1, 20, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 20));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 20);
    for (uint64_t i = 1; i <= 20; i++) {
        ts_expect(&f->t, i, 5, 1);
    }
}

/* §5: a snapshot at X only after entries <= X are persisted. */
static void snapshot_refused_before_its_entries_are_persisted(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    fs_fault_hold_syncs(f->t.ff, true);
    ts_append(&f->t, 11, 20, 5, 100, 1);
    assert_true(ts_wait_held(&f->t));
    assert_int_equal(store_snapshot_record(f->t.g, 15, 5, NULL), KEEL_EAGAIN);
    assert_int_equal(store_snapshot_record(f->t.g, 10, 5, NULL), 0);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.snapshot_index, 10);
    for (uint64_t i = 1; i <= 10; i++) {
        ts_expect(&f->t, i, 5, 1);
    }
}

/* §5: prefix drop only up to the older kept snapshot; then the log starts
 * after it and, with the snapshot record gone, the node is amnesiac. */
static void prefix_drop_respects_older_snapshot_and_gap_is_amnesia(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 900, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 900));
    assert_int_equal(store_snapshot_record(f->t.g, 600, 5, NULL), 0);
    assert_int_equal(store_drop_prefix(f->t.g, 600, NULL), KEEL_EPERM);
    assert_int_equal(store_snapshot_record(f->t.g, 900, 5, NULL), 0);
    assert_int_equal(store_drop_prefix(f->t.g, 900, NULL), KEEL_EPERM);
    assert_int_equal(store_drop_prefix(f->t.g, 600, NULL), 0);
    struct store_group_info info;
    store_group_info(f->t.g, &info);
    assert_true(info.first_index > 1);
    assert_true(info.first_index <= 601);
    ts_close(&f->t, false);
    ts_open(&f->t);
    assert_false(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.first_index, info.first_index);
    assert_int_equal(f->t.rep.extent_index, 900);
    ts_expect(&f->t, 900, 5, 1);
    /* Remove the snapshot records: rebuilding is not allowed. */
    struct store_meta_snap none = {0, 0, 0, 0};
    assert_int_equal(
        store_meta_snap_put(store_debug_meta(f->t.s), f->t.gid.b, &none, NULL),
        0);
    ts_close(&f->t, false);
    ts_open(&f->t);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_SNAPSHOT_GAP);
}

/* Rule 4: interval groups become amnesiac after an OS crash (boot id
 * changed, unclean), not after a plain process restart. */
static void interval_group_amnesiac_only_after_os_crash(void **state)
{
    struct fixture *f = *state;
    f->t.policy.policy = STORE_FSYNC_INTERVAL;
    f->t.policy.interval_ms = 5;
    ts_close(&f->t, true);
    ts_open(&f->t);
    ts_append(&f->t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    ts_close(&f->t, false); /* kill -9: same boot id */
    ts_open(&f->t);
    assert_false(f->t.node.os_crash);
    assert_false(f->t.rep.amnesia);
    ts_close(&f->t, false);
    ts_write_boot(&f->t, "99999999-2222-3333-4444-555555555555");
    ts_open(&f->t);
    assert_true(f->t.node.os_crash);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_INTERVAL_CRASH);
    /* A group-policy group on the same node is not amnesiac. */
    ts_close(&f->t, false);
    ts_write_boot(&f->t, "aaaaaaaa-2222-3333-4444-555555555555");
    f->t.policy.policy = STORE_FSYNC_GROUP;
    f->t.gid.b[0] ^= 1;
    ts_open(&f->t);
    assert_true(f->t.node.os_crash);
    assert_false(f->t.rep.amnesia);
}

/* Finding F12: the interval sync fdatasyncs the segment of the last write
 * and writes its marker there; a segment the log left since the previous
 * sync was never synced, so after a power loss its records sat below M
 * damaged (5,377 faulty records on one node of the fault suite) instead of
 * being durable. The store now syncs the segment it leaves. */
static void
an_interval_sync_covers_the_segments_left_since_the_last(void **state)
{
    struct fixture *f = *state;
    ts_close(&f->t, true);
    f->t.manual = true; /* no timer sync between the appends */
    f->t.policy = (struct store_fsync){STORE_FSYNC_INTERVAL, 1};
    f->t.segment_bytes = STORE_SEGMENT_BYTES_MIN; /* ~50 records each */
    ts_open(&f->t);
    ts_append(&f->t, 1, 200, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 200));
    char path[512];
    uint64_t off = 0;
    ts_where(&f->t, 1, path, &off);
    char last[512];
    ts_where(&f->t, 200, last, &off);
    assert_string_not_equal(path, last); /* the log crossed segments */
    /* The timer sync (due 1 ms after the writes): step for 20 ms. The
     * checks below show it ran: every record survives the power loss. */
    for (int i = 0; i < 200; i++) {
        store_debug_step(f->t.s);
        usleep(100);
    }
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.n_faulty, 0);
    assert_int_equal(f->t.rep.last_index, 200);
    for (uint64_t i = 1; i <= 200; i++) {
        ts_expect(&f->t, i, 5, 1);
    }
}

/* Discard: truncation from the faulty index removes it for good. */
static void discard_truncates_from_the_faulty_index(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;

    ts_append(&f->t, 1, 20, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 20));
    ts_where(&f->t, 15, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 70, 0), 0);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.faulty[0].from, 15);
    assert_int_equal(store_truncate(f->t.g, 15, NULL), 0);
    f->t.persisted_index = 14;
    hard_state(&f->t, 6); /* records above the hard-state term are stale */
    ts_append(&f->t, 15, 16, 6, 30, 2);
    assert_true(ts_wait_persisted(&f->t, 16));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.n_faulty, 0);
    assert_int_equal(f->t.rep.last_index, 16);
    ts_expect(&f->t, 15, 6, 2);
}

/* ENOSPC when a new segment cannot be made: appends refused with a
 * distinct code, reads continue, and it resumes when space returns. */
static void enospc_refuses_appends_keeps_reads_and_resumes(void **state)
{
    struct fixture *f = *state;
    struct store_record r;
    uint8_t buf[256];

    ts_append(&f->t, 1, 10, 5, 200, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    fs_fault_enospc(f->t.ff, true);
    ts_append(&f->t, 11, 74, 5, 200, 1); /* one call of 64; it rolls */
    assert_true(ts_wait_enospc(&f->t));
    r = rec_of(75, 5, 1, 200, buf);
    assert_int_equal(store_append(f->t.g, &r, 1, NULL), KEEL_ENOSPC);
    ts_expect(&f->t, 5, 5, 1);
    ts_expect(&f->t, 11, 5, 1);
    fs_fault_enospc(f->t.ff, false);
    assert_true(ts_wait_space(&f->t));
    assert_true(ts_wait_persisted(&f->t, 74));
    assert_int_equal(store_append(f->t.g, &r, 1, NULL), 0);
    assert_true(ts_wait_persisted(&f->t, 75));
}

/* Rule 1 Repair across segments: faulty records in a segment before the
 * tail one — one inside it, one its last record whose intact successor
 * opens the next segment — are repaired in place and stay repaired. */
static void repair_works_in_a_segment_before_the_tail(void **state)
{
    struct fixture *f = *state;
    char p5[512];
    char pk[512];
    char pn[512];
    char ptail[512];
    uint64_t off5;
    uint64_t offk = 0;
    uint64_t off;
    uint64_t k = 0;
    uint8_t buf[64];

    ts_append(&f->t, 1, 800, 5, 16, 1);
    assert_true(ts_wait_persisted(&f->t, 800));
    ts_where(&f->t, 5, p5, &off5);
    for (uint64_t i = 5; i < 800 && k == 0; i++) {
        ts_where(&f->t, i, pk, &offk);
        ts_where(&f->t, i + 1, pn, &off);
        k = strcmp(pk, pn) != 0 ? i : 0;
    }
    ts_where(&f->t, 800, ptail, &off);
    assert_true(k > 5);
    assert_string_not_equal(p5, ptail); /* not the tail segment */
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, p5, off5 + 20, 3), 0);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, pk, offk + 44, 1), 0);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.n_faulty, 2);
    assert_int_equal(f->t.rep.faulty[0].from, 5);
    assert_int_equal(f->t.rep.faulty[1].from, k);
    struct store_record r5 = rec_of(5, 5, 1, 16, buf);
    assert_int_equal(store_repair(f->t.g, &r5, 1, NULL), 0);
    assert_true(ts_wait_repaired(&f->t, 5));
    struct store_record rk = rec_of(k, 5, 1, 16, buf);
    assert_int_equal(store_repair(f->t.g, &rk, 1, NULL), 0);
    assert_true(ts_wait_repaired(&f->t, k));
    ts_expect(&f->t, 5, 5, 1);
    ts_expect(&f->t, k, 5, 1);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.n_faulty, 0);
    assert_int_equal(f->t.rep.last_index, 800);
    ts_expect(&f->t, 5, 5, 1);
    ts_expect(&f->t, k, 5, 1);
    ts_expect(&f->t, k + 1, 5, 1);
}

/* Rule 1 Repair of a run across a segment boundary (docs/decisions/0018):
 * the last two records of a segment and the first two of the next are
 * damaged. The scan places each faulty index in its own segment, the run
 * verifies only whole (each part re-encoded with its segment's salt), a
 * stale copy of one record fails it and writes nothing, and the true run
 * is written in place in both segments and stays repaired after a crash.
 * Before, the whole run was re-encoded into the first segment and never
 * verified: it stayed faulty for good. */
static void
repair_of_a_run_across_a_segment_boundary_lands_in_both(void **state)
{
    struct fixture *f = *state;
    char path[4][512];
    uint64_t off[4];
    uint64_t k = 0;
    uint8_t bufs[4][64];
    struct store_record run[4];

    ts_append(&f->t, 1, 800, 5, 16, 1);
    assert_true(ts_wait_persisted(&f->t, 800));
    for (uint64_t i = 5; i < 790 && k == 0; i++) {
        char pn[512];
        uint64_t o;
        ts_where(&f->t, i, path[0], &o);
        ts_where(&f->t, i + 1, pn, &o);
        k = strcmp(path[0], pn) != 0 ? i : 0; /* k: last of its segment */
    }
    assert_true(k > 5);
    for (int j = 0; j < 4; j++) {
        ts_where(&f->t, k - 1 + (uint64_t)j, path[j], &off[j]);
    }
    assert_string_equal(path[0], path[1]);
    assert_string_not_equal(path[1], path[2]);
    assert_string_equal(path[2], path[3]);
    ts_close(&f->t, false);
    for (int j = 0; j < 4; j++) {
        assert_int_equal(fs_fault_flip_bit(f->t.ff, path[j], off[j] + 44, 2),
                         0);
    }
    ts_open(&f->t);
    assert_int_equal(f->t.rep.n_faulty, 1);
    assert_int_equal(f->t.rep.faulty[0].from, k - 1);
    assert_int_equal(f->t.rep.faulty[0].to, k + 2);
    for (int j = 0; j < 4; j++) {
        run[j] = rec_of(k - 1 + (uint64_t)j, 5, 1, 16, bufs[j]);
    }
    /* A stale copy of the head of the next segment: nothing is written. */
    run[2] = rec_of(k + 1, 5, 9, 16, bufs[2]);
    assert_int_equal(store_repair(f->t.g, run, 4, NULL), KEEL_ECONFLICT);
    struct store_entry e;
    assert_int_equal(store_read(f->t.g, k - 1, &e, NULL), KEEL_EFAULTY);
    run[2] = rec_of(k + 1, 5, 1, 16, bufs[2]);
    assert_int_equal(store_repair(f->t.g, run, 4, NULL), 0);
    assert_true(ts_wait_repaired(&f->t, k + 2));
    for (uint64_t i = k - 2; i <= k + 3; i++) {
        ts_expect(&f->t, i, 5, 1);
    }
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.n_faulty, 0);
    assert_int_equal(f->t.rep.last_index, 800);
    for (int j = 0; j < 4; j++) {
        char p2[512];
        uint64_t o2;
        ts_where(&f->t, k - 1 + (uint64_t)j, p2, &o2);
        assert_string_equal(p2, path[j]); /* in place, in its own segment */
        assert_int_equal(o2, off[j]);
        ts_expect(&f->t, k - 1 + (uint64_t)j, 5, 1);
    }
}

/* The store's policy text: its interval bound is ten minutes (a stream's
 * keel_fsync reads the same text with a one-minute bound,
 * include/keel/fsync.h). */
static void fsync_policy_text_reads_within_the_store_bound(void **state)
{
    struct store_fsync p;
    char errmsg[KEEL_ERRMSG_MAX];
    (void)state;
    assert_int_equal(store_fsync_parse("always", &p, NULL), 0);
    assert_int_equal(p.policy, STORE_FSYNC_ALWAYS);
    assert_int_equal(store_fsync_parse("interval:600000", &p, NULL), 0);
    assert_int_equal(p.policy, STORE_FSYNC_INTERVAL);
    assert_int_equal(p.interval_ms, 600000);
    assert_int_equal(store_fsync_parse("group", &p, NULL), 0);
    assert_int_equal(p.policy, STORE_FSYNC_GROUP);
    assert_int_equal(p.interval_ms, 0);
    assert_int_equal(store_fsync_parse("interval:600001", &p, errmsg),
                     KEEL_ECONFIG);
    assert_string_equal(errmsg, "fsync policy 'interval:600001': use group, "
                                "always or interval:<ms> (1..600000)");
    assert_int_equal(store_fsync_parse("interval:-1", &p, NULL), KEEL_ECONFIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fsync_policy_text_reads_within_the_store_bound),
        cmocka_unit_test_setup_teardown(
            a_new_group_is_durable_before_its_first_ack, setup, teardown),
        cmocka_unit_test_setup_teardown(
            conflict_truncation_zeroes_to_the_old_end, setup, teardown),
        cmocka_unit_test_setup_teardown(
            stale_records_are_never_readopted_after_a_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(
            scan_ends_at_the_shorter_tail_in_both_term_orders, setup, teardown),
        cmocka_unit_test_setup_teardown(
            failed_fdatasync_aborts_with_nothing_persisted, setup, teardown),
        cmocka_unit_test_setup_teardown(
            marker_keeps_a_flipped_last_record_faulty, setup, teardown),
        cmocka_unit_test_setup_teardown(
            repair_verifies_by_chain_and_marker_names_the_highest, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            repair_works_in_a_segment_before_the_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(
            repair_of_a_record_between_markers_lands_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(
            repair_of_a_run_across_a_segment_boundary_lands_in_both, setup,
            teardown),
        cmocka_unit_test_setup_teardown(reads_verify_and_never_truncate, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            directory_entry_cut_keeps_every_acked_record, setup, teardown),
        cmocka_unit_test_setup_teardown(
            snapshot_refused_before_its_entries_are_persisted, setup, teardown),
        cmocka_unit_test_setup_teardown(
            prefix_drop_respects_older_snapshot_and_gap_is_amnesia, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            interval_group_amnesiac_only_after_os_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(
            an_interval_sync_covers_the_segments_left_since_the_last, setup,
            teardown),
        cmocka_unit_test_setup_teardown(discard_truncates_from_the_faulty_index,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            enospc_refuses_appends_keeps_reads_and_resumes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
