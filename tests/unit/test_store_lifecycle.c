/* Group lifecycle beyond open: the hard-state read, closing one group while
 * the store stays open, explicit deletion in the safe order (with a crash
 * at every step), the 64-bit incarnation, and many groups in one store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cmocka.h>

#include "store_test_util.h"

struct fixture {
    struct ts t;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 11, false);
    ts_open(&f->t);
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

static void hard_state(struct ts *t, uint64_t term, const char *vote)
{
    assert_int_equal(
        store_hard_state_save(t->g, term, vote, strlen(vote), NULL), 0);
    assert_true(ts_wait_hard_state(t, term));
}

static struct store_group_id other_id(uint8_t v)
{
    struct store_group_id id;
    memset(id.b, v, sizeof id.b);
    return id;
}

static bool path_exists(struct ts *t, const char *path)
{
    struct fs *fs = fs_fault_fs(t->ff);
    return fs->stat(fs, path, NULL) == 0;
}

/* Two hard-state saves done before one poll give one event (a flag per
 * group), so the event counts the saves done: a driver that counted one
 * event per save waited for ever and held every message (finding F10). */
static void hard_state_events_count_the_saves_done(void **state)
{
    struct fixture *f = *state;
    struct store_event evs[16];
    ts_close(&f->t, true);
    f->t.manual = true; /* both saves run in one debug step, then one poll */
    ts_open(&f->t);
    assert_int_equal(store_hard_state_save(f->t.g, 4, "a", 1, NULL), 0);
    assert_int_equal(store_hard_state_save(f->t.g, 4, "b", 1, NULL), 0);
    for (int i = 0; i < 8; i++) {
        store_debug_step(f->t.s);
    }
    size_t n = store_poll(f->t.s, evs, 16);
    size_t hs = 0;
    uint64_t done = 0;
    for (size_t i = 0; i < n; i++) {
        if (evs[i].type == STORE_EV_HARD_STATE) {
            hs++;
            done = evs[i].index;
        }
    }
    assert_int_equal(hs, 1); /* coalesced */
    assert_int_equal(done, 2);
}

static void hard_state_load_returns_the_synced_term_and_vote(void **state)
{
    struct fixture *f = *state;
    uint8_t vote[STORE_VOTE_BYTES_MAX];
    size_t len = sizeof vote;
    uint64_t term = 99;

    assert_int_equal(store_hard_state_load(f->t.g, &term, vote, &len, NULL), 0);
    assert_int_equal(term, 0);
    assert_int_equal(len, 0);
    hard_state(&f->t, 7, "node-3");
    len = sizeof vote;
    assert_int_equal(store_hard_state_load(f->t.g, &term, vote, &len, NULL), 0);
    assert_int_equal(term, 7);
    assert_int_equal(len, 6);
    assert_memory_equal(vote, "node-3", 6);
    len = 2;
    assert_int_equal(store_hard_state_load(f->t.g, &term, vote, &len, NULL),
                     KEEL_ETOOBIG);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    len = sizeof vote;
    assert_int_equal(store_hard_state_load(f->t.g, &term, vote, &len, NULL), 0);
    assert_int_equal(term, 7);
    assert_memory_equal(vote, "node-3", 6);
}

/* Close right after appending: the accepted records are written and synced
 * before close returns, other groups keep working, and no event of the
 * closed group is delivered afterwards. */
static void group_close_syncs_accepted_records_and_keeps_the_store(void **state)
{
    struct fixture *f = *state;
    struct store_group_id id2 = other_id(0x42);
    struct store_group *g2;
    struct store_recovery rep2;
    struct store_event evs[64];
    struct store_group *closed = f->t.g;

    hard_state(&f->t, 2, "v");
    assert_int_equal(
        store_group_open(f->t.s, &id2, &f->t.policy, &g2, &rep2, NULL), 0);
    ts_append(&f->t, 1, 40, 2, 300, 1);
    store_group_close(f->t.g);
    f->t.g = g2;
    size_t n = store_poll(f->t.s, evs, 64);
    for (size_t i = 0; i < n; i++) {
        assert_ptr_not_equal(evs[i].g, closed);
    }
    assert_int_equal(store_group_open(f->t.s, &f->t.gid, &f->t.policy, &f->t.g,
                                      &f->t.rep, NULL),
                     0);
    assert_int_equal(f->t.rep.last_index, 40);
    ts_expect(&f->t, 40, 2, 1);
    /* Synced, not only written: a power loss now keeps all 40. */
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 40);
    assert_false(f->t.rep.torn);
    ts_expect(&f->t, 1, 2, 1);
}

static void group_close_syncs_an_interval_group(void **state)
{
    struct fixture *f = *state;

    ts_close(&f->t, true);
    f->t.policy = (struct store_fsync){STORE_FSYNC_INTERVAL, 600000};
    ts_open(&f->t);
    hard_state(&f->t, 3, "v");
    ts_append(&f->t, 1, 20, 3, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 20)); /* written, timer far off */
    store_group_close(f->t.g);
    f->t.g = NULL;
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 20);
    assert_false(f->t.rep.amnesia);
    ts_expect(&f->t, 20, 3, 1);
}

static void group_delete_removes_catalogue_hard_state_and_files(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;

    hard_state(&f->t, 4, "v");
    ts_append(&f->t, 1, 120, 4, 300, 1); /* several 16 KiB segments */
    assert_true(ts_wait_persisted(&f->t, 120));
    ts_where(&f->t, 1, path, &off);
    assert_true(path_exists(&f->t, path));
    assert_int_equal(store_group_delete(f->t.s, &f->t.gid, NULL), 0);
    f->t.g = NULL;
    assert_false(path_exists(&f->t, path));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 0);
    assert_int_equal(f->t.rep.hard_term, 0);
    assert_int_equal(f->t.rep.quarantined_files, 0);
    assert_false(f->t.rep.amnesia);
    /* The id is usable again, from index 1. */
    hard_state(&f->t, 1, "v");
    ts_append(&f->t, 1, 3, 1, 50, 2);
    assert_true(ts_wait_persisted(&f->t, 3));
    ts_expect(&f->t, 3, 1, 2);
}

/* Issue 8: the log of a closed group recorded amnesiac moves to
 * quarantine/ (catalogue and snapshot pair forgotten first, in one synced
 * LMDB transaction), never deleted; the hard state and the amnesia record
 * survive a crash and the group opens with an empty log from index 1.
 * Refused for an open group and for one not recorded amnesiac. */
static void quarantine_log_keeps_hard_state_and_amnesia(void **state)
{
    struct fixture *f = *state;
    char path[512], qpath[700], hex[33];
    uint64_t off;

    hard_state(&f->t, 4, "v");
    ts_append(&f->t, 1, 120, 4, 300, 1); /* several 16 KiB segments */
    assert_true(ts_wait_persisted(&f->t, 120));
    assert_int_equal(store_snapshot_record(f->t.g, 100, 4, NULL), 0);
    ts_where(&f->t, 1, path, &off);
    assert_int_equal(store_group_quarantine_log(f->t.s, &f->t.gid, NULL),
                     KEEL_EEXIST);
    store_group_close(f->t.g);
    f->t.g = NULL;
    assert_int_equal(store_group_quarantine_log(f->t.s, &f->t.gid, NULL),
                     KEEL_EINVAL);
    assert_true(path_exists(&f->t, path));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(store_amnesia_enter(f->t.g, 4, 0, NULL), 0);
    store_group_close(f->t.g);
    f->t.g = NULL;
    assert_int_equal(store_group_quarantine_log(f->t.s, &f->t.gid, NULL), 0);
    assert_false(path_exists(&f->t, path));
    store_group_id_hex(&f->t.gid, hex);
    snprintf(qpath, sizeof qpath, "%s/quarantine/%s-%s", f->t.dir, hex,
             strrchr(path, '/') + 1);
    assert_true(path_exists(&f->t, qpath));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.first_index, 1);
    assert_int_equal(f->t.rep.last_index, 0);
    assert_int_equal(f->t.rep.snapshot_index, 0);
    assert_int_equal(f->t.rep.hard_term, 4);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_RECORDED);
    assert_true(path_exists(&f->t, qpath));
}

static void flip_byte(struct ts *t, const char *path, uint64_t off)
{
    struct fs *fs = fs_fault_fs(t->ff);
    struct fs_file *file = NULL;
    uint8_t b = 0;
    size_t got = 0;
    assert_int_equal(fs->open(fs, path, 0, &file, NULL), 0);
    assert_int_equal(fs->pread(fs, file, &b, 1, off, &got, NULL), 0);
    assert_int_equal(got, 1);
    b ^= 0x10;
    struct iovec iov = {&b, 1};
    assert_int_equal(fs->pwritev(fs, file, &iov, 1, off, NULL), 0);
    assert_int_equal(fs->fsync(fs, file, NULL), 0);
    fs->close(fs, file);
}

/* Decision 0031: a quarantined log is read back as one verified run from
 * index 1 (a damaged record ends it) and restored through the
 * InstallSnapshot replacement into an empty group only, the quarantined
 * files left in place. */
static void a_quarantined_log_verifies_and_restores_by_replacement(void **state)
{
    struct fixture *f = *state;
    char path[512], qpath[700], hex[33];
    uint64_t off;
    struct store_qlog q;

    hard_state(&f->t, 4, "v");
    ts_append(&f->t, 1, 120, 4, 300, 1); /* several 16 KiB segments */
    assert_true(ts_wait_persisted(&f->t, 120));
    ts_where(&f->t, 60, path, &off);
    assert_int_equal(store_amnesia_enter(f->t.g, 4, 0, NULL), 0);
    store_group_close(f->t.g);
    f->t.g = NULL;
    assert_int_equal(store_group_quarantine_log(f->t.s, &f->t.gid, NULL), 0);
    assert_int_equal(store_qlog_survey(f->t.s, &f->t.gid, &q, NULL), 0);
    assert_true(q.files >= 2);
    assert_int_equal(q.last_index, 120);
    assert_int_equal(q.last_term, 4);
    /* Another group has nothing there. */
    struct store_group_id other = other_id(0x77);
    struct store_qlog none;
    assert_int_equal(store_qlog_survey(f->t.s, &other, &none, NULL), 0);
    assert_int_equal(none.files, 0);
    assert_int_equal(none.last_index, 0);
    /* A flipped bit in record 60 ends the run before it. */
    store_group_id_hex(&f->t.gid, hex);
    snprintf(qpath, sizeof qpath, "%s/quarantine/%s-%s", f->t.dir, hex,
             strrchr(path, '/') + 1);
    flip_byte(&f->t, qpath, off + 44);
    assert_int_equal(store_qlog_survey(f->t.s, &f->t.gid, &q, NULL), 0);
    assert_int_equal(q.last_index, 59);
    assert_non_null(strstr(q.why, "index 60"));
    /* Restored through 59 only: 80 is past the verified run. */
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 0);
    assert_int_equal(store_qlog_restore(f->t.g, 80, &q, NULL), KEEL_ECORRUPT);
    assert_int_equal(store_qlog_restore(f->t.g, 50, &q, NULL), 0);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.first_index, 1);
    assert_int_equal(f->t.rep.last_index, 50);
    for (uint64_t i = 1; i <= 50; i++) {
        ts_expect(&f->t, i, 4, 1);
    }
    /* Never over a live log; the quarantined copy stays. */
    assert_int_equal(store_qlog_restore(f->t.g, 50, &q, NULL), KEEL_EINVAL);
    assert_true(path_exists(&f->t, qpath));
}

/* The recover wait (operator override) is recorded synced, survives a
 * crash, is cleared by term 0, and a group delete removes it. */
static void recover_wait_survives_a_crash_until_cleared_or_deleted(void **state)
{
    struct fixture *f = *state;
    uint64_t term = 0;

    assert_int_equal(store_recover_wait_get(f->t.g, &term), KEEL_ENOENT);
    assert_int_equal(store_recover_wait_set(f->t.g, 7, NULL), 0);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(store_recover_wait_get(f->t.g, &term), 0);
    assert_int_equal(term, 7);
    assert_int_equal(store_recover_wait_set(f->t.g, 0, NULL), 0);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(store_recover_wait_get(f->t.g, &term), KEEL_ENOENT);
    assert_int_equal(store_recover_wait_set(f->t.g, 9, NULL), 0);
    assert_int_equal(store_group_delete(f->t.s, &f->t.gid, NULL), 0);
    f->t.g = NULL;
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(store_recover_wait_get(f->t.g, &term), KEEL_ENOENT);
}

/* docs/design.md §5: LMDB first (one synced txn), then unlink, then directory
 * fsync. A crash after any step opens as the whole group or as an empty
 * group whose leftover files are quarantined — never as a group with a
 * lost range (which an unlink before the LMDB transaction would give). */
static void group_delete_crash_at_every_step_never_leaves_half(void **state)
{
    struct fixture *f = *state;
    unsigned quarantined_max = 0;
    bool completed = false;

    for (unsigned step = 0; step < 16 && !completed; step++) {
        ts_fini(&f->t);
        ts_init(&f->t, 11 + step, false);
        ts_open(&f->t);
        hard_state(&f->t, 4, "v");
        ts_append(&f->t, 1, 120, 4, 300, 1);
        assert_true(ts_wait_persisted(&f->t, 120));
        store_debug_die_after(f->t.s, step);
        assert_int_equal(store_group_delete(f->t.s, &f->t.gid, NULL), 0);
        f->t.g = NULL;
        ts_crash_reopen(&f->t, FS_CUT_DROP);
        struct store_recovery *r = &f->t.rep;
        assert_int_equal(r->n_lost, 0);
        assert_int_equal(r->n_faulty, 0);
        assert_false(r->amnesia);
        if (step == 0) {
            assert_int_equal(r->last_index, 120);
            assert_int_equal(r->hard_term, 4);
            ts_expect(&f->t, 120, 4, 1);
            continue;
        }
        assert_int_equal(r->last_index, 0);
        assert_int_equal(r->hard_term, 0);
        if (r->quarantined_files > quarantined_max) {
            quarantined_max = r->quarantined_files;
        }
        completed = r->quarantined_files == 0; /* every step ran */
    }
    assert_true(completed);
    assert_true(quarantined_max >= 3); /* the crash after LMDB was tested */
}

static void incarnation64_folds_the_first_eight_bytes(void **state)
{
    struct fixture *f = *state;
    uint8_t inc[16] = {0};
    uint64_t want = 0;

    for (unsigned i = 0; i < 8; i++) {
        want |= (uint64_t)f->t.node.incarnation[i] << (8 * i);
    }
    assert_int_equal(f->t.node.incarnation64, want == 0 ? 1 : want);
    assert_int_equal(store_incarnation64(inc), 1);
    inc[8] = 5;
    assert_int_equal(store_incarnation64(inc), 1);
    inc[0] = 2;
    inc[7] = 1;
    assert_int_equal(store_incarnation64(inc), 0x0100000000000002ull);
    uint64_t before = f->t.node.incarnation64;
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.node.incarnation64, before);
}

static int setup_real(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 13, true);
    f->t.manual = true; /* deterministic: spares are made in debug steps */
    ts_open(&f->t);
    *state = f;
    return 0;
}

static bool spare_exists(struct ts *t, const struct store_group_id *id)
{
    char hex[33];
    char path[512];
    store_group_id_hex(id, hex);
    snprintf(path, sizeof path, "%s/groups/%s/log/prealloc.tmp", t->dir, hex);
    return access(path, F_OK) == 0;
}

static unsigned files_in(struct ts *t, const struct store_group_id *id)
{
    char hex[33];
    char path[512];
    unsigned n = 0;
    store_group_id_hex(id, hex);
    snprintf(path, sizeof path, "%s/groups/%s/log", t->dir, hex);
    DIR *d = opendir(path);
    assert_non_null(d);
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

/* 200 streams in one store: opening a group makes no file (no spare, no
 * segment) until it is written to; memory is the group's small tables. */
static void many_new_groups_open_without_making_files(void **state)
{
    struct fixture *f = *state;
    struct store_fsync pol = {STORE_FSYNC_GROUP, 0};

    for (unsigned i = 0; i < 200; i++) {
        struct store_group_id id = other_id(0);
        struct store_group *g;
        struct store_recovery rep;
        id.b[0] = (uint8_t)i;
        id.b[1] = (uint8_t)(i >> 8);
        id.b[2] = 0x77;
        assert_int_equal(store_group_open(f->t.s, &id, &pol, &g, &rep, NULL),
                         0);
    }
    store_debug_step(f->t.s);
    for (unsigned i = 0; i < 200; i += 37) {
        struct store_group_id id = other_id(0);
        id.b[0] = (uint8_t)i;
        id.b[1] = (uint8_t)(i >> 8);
        id.b[2] = 0x77;
        assert_int_equal(files_in(&f->t, &id), 0);
    }
}

/* Preallocation is bounded ahead of need: the spare appears only once the
 * tail segment is half full, and the next segment is made from it. */
static void spare_is_made_when_the_tail_is_half_full(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;

    hard_state(&f->t, 1, "v");
    ts_append(&f->t, 1, 2, 1, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 2));
    ts_append(&f->t, 3, 3, 1, 100, 1); /* the segment exists now */
    assert_true(ts_wait_persisted(&f->t, 3));
    assert_int_equal(files_in(&f->t, &f->t.gid), 1); /* the segment only */
    assert_false(spare_exists(&f->t, &f->t.gid));
    ts_append(&f->t, 4, 40, 1, 200, 1); /* past half of 16 KiB */
    assert_true(ts_wait_persisted(&f->t, 40));
    assert_true(spare_exists(&f->t, &f->t.gid));
    ts_where(&f->t, 40, path, &off);
    ts_append(&f->t, 41, 70, 1, 200, 1); /* rolls into the next segment */
    assert_true(ts_wait_persisted(&f->t, 70));
    char path70[512];
    ts_where(&f->t, 70, path70, &off);
    assert_string_not_equal(path, path70);
    assert_int_equal(files_in(&f->t, &f->t.gid),
                     2 + spare_exists(&f->t, &f->t.gid));
    ts_expect(&f->t, 70, 1, 1);
}

/* Size of a file of the fault fs: it ends exactly at size. */
static bool file_ends_at(struct ts *t, const char *path, uint64_t size)
{
    uint8_t buf[16];
    size_t got = 0;
    assert_int_equal(fs_fault_peek(t->ff, path, size - 8, buf, 16, &got), 0);
    return got == 8;
}

/* A log starts with a 1 MiB segment and doubles up to segment_bytes, so a
 * small stream does not hold (or wait for) a full-size zero fill. */
static void segments_grow_from_one_mib_to_the_configured_size(void **state)
{
    struct fixture *f = *state;
    char p1[512];
    char p2[512];
    char p3[512];
    uint64_t off;

    ts_close(&f->t, true);
    f->t.segment_bytes = 2 * 1024 * 1024;
    ts_open(&f->t);
    hard_state(&f->t, 1, "v");
    ts_append(&f->t, 1, 1, 1, 1000, 1);
    assert_true(ts_wait_persisted(&f->t, 1));
    ts_where(&f->t, 1, p1, &off);
    assert_true(file_ends_at(&f->t, p1, 1024 * 1024));
    ts_append(&f->t, 2, 3100, 1, 1000, 1); /* ~3 MiB */
    assert_true(ts_wait_persisted(&f->t, 3100));
    ts_where(&f->t, 1100, p2, &off);
    ts_where(&f->t, 3100, p3, &off);
    assert_string_not_equal(p1, p2);
    assert_string_not_equal(p2, p3);
    assert_true(file_ends_at(&f->t, p2, 2 * 1024 * 1024));
    assert_true(file_ends_at(&f->t, p3, 2 * 1024 * 1024));
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 3100);
    ts_expect(&f->t, 1, 1, 1);
    ts_expect(&f->t, 3100, 1, 1);
}

/* Out of space, a failed spare is not retried on every append (each try
 * writes until the disk is full again); it waits STORE_SPARE_RETRY_MS. */
static void failed_spare_is_not_retried_on_every_append(void **state)
{
    struct fixture *f = *state;
    struct store_stats st;

    ts_close(&f->t, true);
    f->t.manual = true;
    f->t.prealloc = true;
    ts_open(&f->t);
    hard_state(&f->t, 1, "v");
    fs_fault_enospc(f->t.ff, true); /* segments exist: appends still fit */
    ts_append(&f->t, 1, 1, 1, 100, 1);
    assert_true(ts_wait_enospc(&f->t)); /* the first segment cannot be made */
    fs_fault_enospc(f->t.ff, false);
    assert_true(ts_wait_persisted(&f->t, 1));
    ts_append(&f->t, 2, 30, 1, 300, 1); /* past half: a spare is asked */
    assert_true(ts_wait_persisted(&f->t, 30));
    store_stats(f->t.s, &st);
    uint64_t made = st.spares_attempted;
    assert_int_equal(made, 1);
    fs_fault_enospc(f->t.ff, true);
    /* One record per batch: the tail rolls into the spare, then passes
     * half of the new segment, where the next spare fails for space. */
    for (uint64_t i = 31; i <= 75; i++) {
        ts_append(&f->t, i, i, 1, 300, 1);
        assert_true(ts_wait_persisted(&f->t, i));
    }
    store_stats(f->t.s, &st);
    assert_int_equal(st.spares_attempted, made + 1);
    fs_fault_enospc(f->t.ff, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            many_new_groups_open_without_making_files, setup_real, teardown),
        cmocka_unit_test_setup_teardown(
            spare_is_made_when_the_tail_is_half_full, setup_real, teardown),
        cmocka_unit_test_setup_teardown(
            hard_state_load_returns_the_synced_term_and_vote, setup, teardown),
        cmocka_unit_test_setup_teardown(hard_state_events_count_the_saves_done,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            group_close_syncs_accepted_records_and_keeps_the_store, setup,
            teardown),
        cmocka_unit_test_setup_teardown(group_close_syncs_an_interval_group,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            group_delete_removes_catalogue_hard_state_and_files, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            group_delete_crash_at_every_step_never_leaves_half, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            quarantine_log_keeps_hard_state_and_amnesia, setup, teardown),
        cmocka_unit_test_setup_teardown(
            recover_wait_survives_a_crash_until_cleared_or_deleted, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_quarantined_log_verifies_and_restores_by_replacement, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            incarnation64_folds_the_first_eight_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(
            segments_grow_from_one_mib_to_the_configured_size, setup, teardown),
        cmocka_unit_test_setup_teardown(
            failed_spare_is_not_retried_on_every_append, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
