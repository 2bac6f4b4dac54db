/* store_read_range: runs of records read with one pread each, every record
 * still checksum-verified (rule 5), records not yet on disk served from the
 * write queue.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store_test_util.h"

#define LAST 300 /* records; 16 KiB segments hold ~60 of 200 bytes */

struct fixture {
    struct ts t;
    uint64_t next;    /* index the callback expects */
    uint64_t bad;     /* records whose payload did not check out */
    uint64_t stop_at; /* callback returns 7 at this index (0: never) */
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 23, false);
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

static int collect(void *arg, const struct store_entry *e)
{
    struct fixture *f = arg;
    if (e->index != f->next || e->term != 2 ||
        ts_payload_version(e->index, e->payload, e->len) != 1) {
        f->bad++;
    }
    f->next++;
    return f->stop_at != 0 && e->index == f->stop_at ? 7 : 0;
}

static void every_record_across_segments_comes_back_in_order(void **state)
{
    struct fixture *f = *state;
    char path[STORE_PATH_BYTES_MAX];
    char last_path[STORE_PATH_BYTES_MAX];
    uint64_t off;

    ts_append(&f->t, 1, LAST, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->t, LAST));
    ts_where(&f->t, 1, path, &off);
    ts_where(&f->t, LAST, last_path, &off);
    assert_string_not_equal(path, last_path); /* the range spans segments */
    f->next = 1;
    assert_int_equal(store_read_range(f->t.g, 1, LAST, collect, f, NULL), 0);
    assert_int_equal(f->next, LAST + 1);
    assert_int_equal(f->bad, 0);
    /* A sub-range, and the callback's stop value is returned. */
    f->next = 17;
    f->stop_at = 40;
    assert_int_equal(store_read_range(f->t.g, 17, 200, collect, f, NULL), 7);
    assert_int_equal(f->next, 41);
    assert_int_equal(f->bad, 0);
}

static void a_flipped_record_in_a_run_is_never_handed_out(void **state)
{
    struct fixture *f = *state;
    char path[STORE_PATH_BYTES_MAX];
    uint64_t off;
    struct store_entry e;

    ts_append(&f->t, 1, LAST, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->t, LAST));
    ts_where(&f->t, 150, path, &off);
    assert_int_equal(fs_fault_flip_bit(f->t.ff, path, off + 100, 3), 0);
    f->next = 1;
    assert_int_equal(store_read_range(f->t.g, 1, LAST, collect, f, NULL),
                     KEEL_ECORRUPT);
    /* Everything before it was delivered intact, nothing from 150 on. */
    assert_int_equal(f->next, 150);
    assert_int_equal(f->bad, 0);
    /* Rule 5: it is now faulty and stays unreadable. */
    assert_int_equal(store_read(f->t.g, 150, &e, NULL), KEEL_EFAULTY);
    /* The records after it still read (around the faulty one). */
    f->next = 151;
    assert_int_equal(store_read_range(f->t.g, 151, LAST, collect, f, NULL), 0);
    assert_int_equal(f->next, LAST + 1);
    assert_int_equal(f->bad, 0);
}

static void records_not_yet_synced_are_read_from_the_queue(void **state)
{
    struct fixture *f = *state;

    ts_append(&f->t, 1, 50, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->t, 50));
    fs_fault_hold_syncs(f->t.ff, true);
    ts_append(&f->t, 51, 120, 2, 200, 1);
    assert_true(ts_wait_held(&f->t));
    f->next = 1;
    assert_int_equal(store_read_range(f->t.g, 1, 120, collect, f, NULL), 0);
    assert_int_equal(f->next, 121);
    assert_int_equal(f->bad, 0);
    fs_fault_hold_syncs(f->t.ff, false);
    assert_true(ts_wait_persisted(&f->t, 120));
}

static void a_range_outside_the_log_is_refused(void **state)
{
    struct fixture *f = *state;

    ts_append(&f->t, 1, 10, 2, 200, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    f->next = 1;
    assert_int_equal(store_read_range(f->t.g, 5, 11, collect, f, NULL),
                     KEEL_ENOENT);
    assert_int_equal(f->next, 1); /* nothing delivered */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            every_record_across_segments_comes_back_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_flipped_record_in_a_run_is_never_handed_out, setup, teardown),
        cmocka_unit_test_setup_teardown(
            records_not_yet_synced_are_read_from_the_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(a_range_outside_the_log_is_refused,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
