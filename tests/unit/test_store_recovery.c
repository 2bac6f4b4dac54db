/* Recovery after each fault class of the fault fs (store/ issue): write
 * records, sync some, inject, reopen; assert the exact report, that nothing
 * at or below the sync-marker boundary is dropped or returned corrupt, and
 * that nothing after the boundary survives past the first damage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "meta.h"
#include "store_test_util.h"

struct fixture {
    struct ts t;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 42, false);
    ts_open(&f->t);
    char errmsg[KEEL_ERRMSG_MAX];
    assert_int_equal(store_hard_state_save(f->t.g, 5, "n1", 2, errmsg), 0);
    assert_true(ts_wait_hard_state(&f->t, 5));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (f->t.ff != NULL) {
        fs_fault_hold_syncs(f->t.ff, false);
    }
    ts_fini(&f->t);
    test_free(f);
    return 0;
}

/* 1..10 synced, 11..20 written but their sync never completes. */
static void synced_then_unsynced(struct ts *t)
{
    ts_append(t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(t, 10));
    fs_fault_hold_syncs(t->ff, true);
    ts_append(t, 11, 20, 5, 100, 1);
    assert_true(ts_wait_held(t));
    assert_int_equal(t->persisted_index, 10);
}

static void expect_prefix(struct ts *t, uint64_t upto)
{
    for (uint64_t i = 1; i <= upto; i++) {
        ts_expect(t, i, 5, 1);
    }
}

static void power_loss_drops_only_unsynced_records(void **state)
{
    struct fixture *f = *state;
    synced_then_unsynced(&f->t);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    assert_int_equal(f->t.rep.last_index, 10);
    assert_true(f->t.rep.has_marker);
    assert_int_equal(f->t.rep.marker_index, 10);
    assert_int_equal(f->t.rep.n_faulty, 0);
    assert_false(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.extent_index, 10);
    assert_int_equal(f->t.rep.extent_term, 5);
    expect_prefix(&f->t, 10);
}

static void torn_and_reordered_tails_never_cost_a_synced_record(void **state)
{
    struct fixture *f = *state;
    enum fs_fault_cut cuts[] = {FS_CUT_TEAR_SECTOR, FS_CUT_TEAR_BYTE,
                                FS_CUT_REORDER};
    synced_then_unsynced(&f->t);
    for (unsigned c = 0; c < 3; c++) {
        ts_crash_reopen(&f->t, cuts[c]);
        struct store_recovery *r = &f->t.rep;
        assert_true(r->last_index >= 10);
        assert_true(r->last_index <= 20);
        assert_int_equal(r->n_faulty, 0);
        expect_prefix(&f->t, 10);
        /* Whatever survived after the boundary is intact and
         * chain-continuous; nothing beyond the first damage. */
        for (uint64_t i = 11; i <= r->last_index; i++) {
            ts_expect(&f->t, i, 5, 1);
        }
        struct store_entry e;
        assert_int_equal(store_read(f->t.g, r->last_index + 1, &e, NULL),
                         KEEL_ENOENT);
        /* The kept run is named by a synced recovery marker first. */
        assert_true(ts_wait_persisted(&f->t, r->last_index));
        /* Next round: write the tail again, unsynced. */
        uint64_t next = r->last_index + 1;
        if (next <= 20) {
            fs_fault_hold_syncs(f->t.ff, true);
            ts_append(&f->t, next, 20, 5, 100, 1);
            assert_true(ts_wait_held(&f->t));
        }
    }
}

static void bit_flip_below_the_marker_is_faulty_not_dropped(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;

    ts_append(&f->t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    ts_where(&f->t, 5, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 60, 3), 0);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.n_faulty, 1);
    assert_int_equal(f->t.rep.faulty[0].from, 5);
    assert_int_equal(f->t.rep.faulty[0].to, 5);
    assert_int_equal(f->t.rep.last_index, 10);
    assert_false(f->t.rep.torn);
    struct store_entry e;
    assert_int_equal(store_read(f->t.g, 5, &e, NULL), KEEL_EFAULTY);
    ts_expect(&f->t, 4, 5, 1);
    ts_expect(&f->t, 6, 5, 1);
    ts_expect(&f->t, 10, 5, 1);
}

static void truncated_segment_is_a_lost_range_and_amnesia(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;

    ts_append(&f->t, 1, 300, 5, 100, 1); /* several 16 KiB segments */
    assert_true(ts_wait_persisted(&f->t, 300));
    ts_where(&f->t, 300, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_truncate(f->t.ff, path, off), 0);
    ts_open(&f->t);
    struct store_recovery *r = &f->t.rep;
    assert_true(r->amnesia);
    assert_int_equal(r->amnesia_reason, STORE_AMNESIA_LOST_RANGE);
    assert_int_equal(r->amnesia_t0, 5);
    assert_int_equal(r->n_lost, 1);
    assert_true(r->lost[0].from <= 300);
    assert_int_equal(r->last_index, r->lost[0].from - 1);
    assert_int_equal(r->quarantined_files, 1);
    assert_int_equal(r->max_term_seen, 5);
    expect_prefix(&f->t, r->last_index);
    /* The amnesia state is durable: a restart keeps it. */
    ts_close(&f->t, false);
    ts_open(&f->t);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_RECORDED);
}

static void missing_segment_ends_the_log_before_it(void **state)
{
    struct fixture *f = *state;
    char p1[512];
    char p2[512];
    uint64_t off;

    ts_append(&f->t, 1, 600, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 600));
    ts_where(&f->t, 200, p1, &off);
    ts_where(&f->t, 600, p2, &off);
    assert_string_not_equal(p1, p2);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_delete(f->t.ff, p1), 0);
    ts_open(&f->t);
    struct store_recovery *r = &f->t.rep;
    assert_true(r->amnesia);
    assert_int_equal(r->amnesia_reason, STORE_AMNESIA_LOST_RANGE);
    assert_true(r->last_index < 200);
    assert_int_equal(r->lost[0].from, r->last_index + 1);
    assert_true(r->quarantined_files >= 1); /* segments after the hole */
    expect_prefix(&f->t, r->last_index);
}

static void corrupted_segment_header_is_a_lost_range(void **state)
{
    struct fixture *f = *state;
    char path[512];
    uint64_t off;

    ts_append(&f->t, 1, 50, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 50));
    ts_where(&f->t, 1, path, &off);
    ts_close(&f->t, false);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, 33, 0), 0);
    ts_open(&f->t);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_LOST_RANGE);
    assert_int_equal(f->t.rep.lost[0].from, 1);
    assert_int_equal(f->t.rep.quarantined_files, 1);
}

static void
corrupted_hard_state_resets_meta_with_a_new_incarnation(void **state)
{
    struct fixture *f = *state;
    uint8_t inc[16];

    memcpy(inc, f->t.node.incarnation, 16);
    ts_append(&f->t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    assert_int_equal(
        store_meta_debug_corrupt(store_debug_meta(f->t.s), 'H', f->t.gid.b), 0);
    ts_close(&f->t, false);
    ts_open(&f->t);
    assert_true(f->t.node.meta_reset);
    assert_memory_not_equal(inc, f->t.node.incarnation, 16);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_META_RESET);
    /* The catalogue went with it: the log moved to quarantine, not
     * deleted. */
    assert_int_equal(f->t.rep.quarantined_files, 1);
    assert_int_equal(f->t.rep.last_index, 0);
}

/* LMDB meta pages (page 0 and 1, 4 KiB pages): a 16-byte page header,
 * then MDB_meta: magic, version, address, mapsize (24 bytes), the free db
 * (48), the main db (48, md_root its last 8 bytes), last_pg, txnid. */
#define LMDB_PAGE 4096
#define LMDB_MAGIC_AT 16
#define LMDB_ROOT_AT 128
#define LMDB_TXNID_AT 144

static int open_meta_lmdb(const char *dir)
{
    char path[400];
    snprintf(path, sizeof path, "%s/meta.lmdb", dir);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    for (off_t page = 0; page < 2; page++) {
        uint32_t magic = 0;
        assert_int_equal(pread(fd, &magic, 4, page * LMDB_PAGE + LMDB_MAGIC_AT),
                         4);
        assert_int_equal(magic, 0xBEEFC0DE);
    }
    return fd;
}

/* The main database's root page as the newer meta page names it. */
static uint64_t meta_root(int fd)
{
    uint64_t txn[2], root[2];
    for (off_t page = 0; page < 2; page++) {
        assert_int_equal(
            pread(fd, &txn[page], 8, page * LMDB_PAGE + LMDB_TXNID_AT), 8);
        assert_int_equal(
            pread(fd, &root[page], 8, page * LMDB_PAGE + LMDB_ROOT_AT), 8);
    }
    return txn[1] > txn[0] ? root[1] : root[0];
}

/* Ten persisted records, the store closed (crash), its incarnation in inc
 * and meta.lmdb open for writing (the caller closes it). */
static int ten_records_then_meta_lmdb(struct fixture *f, uint8_t inc[16])
{
    memcpy(inc, f->t.node.incarnation, 16);
    ts_append(&f->t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    ts_close(&f->t, false);
    return open_meta_lmdb(f->t.dir);
}

static void reopen_expect_reset(struct fixture *f, const uint8_t *inc,
                                const char *why)
{
    ts_open(&f->t);
    store_meta_debug_check_structure(true);
    assert_true(f->t.node.meta_reset);
    assert_non_null(strstr(f->t.node.meta_reset_reason, why));
    assert_memory_not_equal(inc, f->t.node.incarnation, 16);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_META_RESET);
    assert_int_equal(f->t.rep.quarantined_files, 1);
}

/* A root past the last page: LMDB reports MDB_PAGE_NOTFOUND, which ended
 * the walk as if it were the end, and the open then failed on the first
 * value it could not read ("bad incarnation value": keeld refused to
 * start). Now the broken walk resets meta.lmdb (rule 3). */
static void a_meta_root_past_the_last_page_resets(void **state)
{
    struct fixture *f = *state;
    uint8_t inc[16];
    int fd = ten_records_then_meta_lmdb(f, inc);
    uint64_t root = 1000;
    for (off_t page = 0; page < 2; page++) {
        assert_int_equal(pwrite(fd, &root, 8, page * LMDB_PAGE + LMDB_ROOT_AT),
                         8);
    }
    assert_int_equal(close(fd), 0);
    /* The structural check (test_store_meta_check.c) finds it first. */
    store_meta_debug_check_structure(false);
    reopen_expect_reset(f, inc, "MDB_PAGE_NOTFOUND");
}

/* A node pointer of the main root leaf far past its page: LMDB 0.9 reads
 * the node without a bound, beyond the end of the file: SIGBUS, and keeld
 * died at every start (finding F15). The child that reads the file first
 * dies instead, and meta.lmdb is reset (rule 3). */
static void a_meta_node_pointer_past_the_file_resets_not_crashes(void **state)
{
    struct fixture *f = *state;
    uint8_t inc[16];
    int fd = ten_records_then_meta_lmdb(f, inc);
    off_t leaf = (off_t)meta_root(fd) * LMDB_PAGE;
    uint16_t flags = 0;
    assert_int_equal(pread(fd, &flags, 2, leaf + 10), 2);
    assert_true(flags & 0x02); /* P_LEAF: a small tree is one leaf */
    struct stat sb;
    assert_int_equal(fstat(fd, &sb), 0);
    assert_true(leaf + 0xFFF0 > sb.st_size); /* the node lands past EOF */
    uint16_t ptr = 0xFFF0;
    assert_int_equal(pwrite(fd, &ptr, 2, leaf + 16), 2); /* mp_ptrs[0] */
    assert_int_equal(close(fd), 0);
    store_meta_debug_check_structure(false);
    reopen_expect_reset(f, inc, "fault");
}

/* A page number in a free-page list past the file: LMDB reuses it on a
 * later write and aborts on an assertion in mdb_freelist_save, at run
 * time (the cluster meta nemesis after F15's fix). The child's walk checks
 * every list, and meta.lmdb is reset at open (rule 3). */
static void a_meta_free_list_naming_a_page_past_the_file_resets(void **state)
{
    struct fixture *f = *state;
    uint8_t inc[16];
    int fd = ten_records_then_meta_lmdb(f, inc);
    uint64_t txn[2], root[2];
    for (off_t page = 0; page < 2; page++) {
        /* The free db's md_root: 16 + 24 + 40. */
        assert_int_equal(
            pread(fd, &txn[page], 8, page * LMDB_PAGE + LMDB_TXNID_AT), 8);
        assert_int_equal(pread(fd, &root[page], 8, page * LMDB_PAGE + 80), 8);
    }
    off_t leaf = (off_t)(txn[1] > txn[0] ? root[1] : root[0]) * LMDB_PAGE;
    uint16_t flags = 0, ptr = 0, ksize = 0;
    assert_int_equal(pread(fd, &flags, 2, leaf + 10), 2);
    assert_true(flags & 0x02); /* a leaf: the writes above freed pages */
    assert_int_equal(pread(fd, &ptr, 2, leaf + 16), 2); /* mp_ptrs[0] */
    off_t node = leaf + ptr;
    assert_int_equal(pread(fd, &ksize, 2, node + 6), 2);
    uint64_t count = 0, bogus = 1u << 24;
    assert_int_equal(pread(fd, &count, 8, node + 8 + ksize), 8);
    assert_true(count >= 1);
    assert_int_equal(pwrite(fd, &bogus, 8, node + 8 + ksize + 8), 8);
    assert_int_equal(close(fd), 0);
    reopen_expect_reset(f, inc, "free-page");
}

static void corrupted_snapshot_value_affects_only_its_group(void **state)
{
    struct fixture *f = *state;
    uint8_t inc[16];

    memcpy(inc, f->t.node.incarnation, 16);
    ts_append(&f->t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    struct store_meta_snap sn = {4, 5, 0, 0};
    assert_int_equal(
        store_meta_snap_put(store_debug_meta(f->t.s), f->t.gid.b, &sn, NULL),
        0);
    assert_int_equal(
        store_meta_debug_corrupt(store_debug_meta(f->t.s), 'S', f->t.gid.b), 0);
    ts_close(&f->t, false);
    ts_open(&f->t);
    assert_false(f->t.node.meta_reset);
    assert_memory_equal(inc, f->t.node.incarnation, 16);
    assert_true(f->t.rep.amnesia);
    assert_int_equal(f->t.rep.amnesia_reason, STORE_AMNESIA_BAD_VALUE);
    expect_prefix(&f->t, 10);
}

static void uncatalogued_segment_file_goes_to_quarantine(void **state)
{
    struct fixture *f = *state;
    char path[600];
    struct fs *fs = fs_fault_fs(f->t.ff);
    struct fs_file *file;
    char hex[33];

    ts_append(&f->t, 1, 10, 5, 100, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    ts_close(&f->t, false);
    store_group_id_hex(&f->t.gid, hex);
    snprintf(path, sizeof path, "%s/groups/%s/log/%020d.blk", f->t.dir, hex,
             11);
    assert_int_equal(fs->open(fs, path, FS_CREATE, &file, NULL), 0);
    fs->close(fs, file);
    ts_open(&f->t);
    assert_int_equal(f->t.rep.quarantined_files, 1);
    assert_int_equal(f->t.rep.last_index, 10);
    assert_int_equal(fs->stat(fs, path, NULL), KEEL_ENOENT);
    expect_prefix(&f->t, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(power_loss_drops_only_unsynced_records,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            torn_and_reordered_tails_never_cost_a_synced_record, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            bit_flip_below_the_marker_is_faulty_not_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(
            truncated_segment_is_a_lost_range_and_amnesia, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_segment_ends_the_log_before_it,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            corrupted_segment_header_is_a_lost_range, setup, teardown),
        cmocka_unit_test_setup_teardown(a_meta_root_past_the_last_page_resets,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_meta_node_pointer_past_the_file_resets_not_crashes, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_meta_free_list_naming_a_page_past_the_file_resets, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            corrupted_hard_state_resets_meta_with_a_new_incarnation, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            corrupted_snapshot_value_affects_only_its_group, setup, teardown),
        cmocka_unit_test_setup_teardown(
            uncatalogued_segment_file_goes_to_quarantine, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
