/* store_snapshot_get: the (index, term) pairs LMDB records for a group
 * (docs/design.md §5), across records, refusals, reopen and a bad value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "meta.h"
#include "store_test_util.h"

struct fixture {
    struct ts t;
    struct store_snapshot_pair p;
    char errmsg[KEEL_ERRMSG_MAX];
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 11, false);
    ts_open(&f->t);
    assert_int_equal(store_hard_state_save(f->t.g, 3, "v", 1, NULL), 0);
    assert_true(ts_wait_hard_state(&f->t, 3));
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

static void get(struct fixture *f)
{
    assert_int_equal(store_snapshot_get(f->t.g, &f->p, f->errmsg), 0);
}

static void a_group_without_snapshots_reads_none(void **state)
{
    struct fixture *f = *state;
    memset(&f->p, 0xff, sizeof f->p);
    get(f);
    assert_int_equal(f->p.index, 0);
    assert_int_equal(f->p.term, 0);
    assert_int_equal(f->p.older_index, 0);
    assert_int_equal(f->p.older_term, 0);
}

static void the_second_record_keeps_the_first_as_the_older(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 40, 3, 64, 1);
    assert_true(ts_wait_persisted(&f->t, 40));
    assert_int_equal(store_snapshot_record(f->t.g, 20, 3, NULL), 0);
    get(f);
    assert_int_equal(f->p.index, 20);
    assert_int_equal(f->p.term, 3);
    assert_int_equal(f->p.older_index, 0);
    assert_int_equal(store_snapshot_record(f->t.g, 35, 3, NULL), 0);
    get(f);
    assert_int_equal(f->p.index, 35);
    assert_int_equal(f->p.older_index, 20);
    assert_int_equal(f->p.older_term, 3);
    /* A third pushes the first out: only two are kept. */
    assert_int_equal(store_snapshot_record(f->t.g, 40, 3, NULL), 0);
    get(f);
    assert_int_equal(f->p.index, 40);
    assert_int_equal(f->p.older_index, 35);
}

/* §5: a snapshot at X only after entries <= X are persisted; the refused
 * record leaves the pair LMDB names unchanged. */
static void a_refused_record_leaves_the_pair_unchanged(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 10, 3, 64, 1);
    assert_true(ts_wait_persisted(&f->t, 10));
    assert_int_equal(store_snapshot_record(f->t.g, 10, 3, NULL), 0);
    assert_int_equal(store_snapshot_record(f->t.g, 11, 3, NULL), KEEL_EAGAIN);
    get(f);
    assert_int_equal(f->p.index, 10);
    assert_int_equal(f->p.older_index, 0);
}

static void the_pair_survives_a_crash_and_reopen(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 30, 3, 64, 1);
    assert_true(ts_wait_persisted(&f->t, 30));
    assert_int_equal(store_snapshot_record(f->t.g, 12, 3, NULL), 0);
    assert_int_equal(store_snapshot_record(f->t.g, 30, 3, NULL), 0);
    ts_crash_reopen(&f->t, FS_CUT_DROP);
    get(f);
    assert_int_equal(f->p.index, 30);
    assert_int_equal(f->p.term, 3);
    assert_int_equal(f->p.older_index, 12);
    assert_int_equal(f->t.rep.snapshot_index, 30);
}

static void a_bad_value_is_reported_not_read_as_none(void **state)
{
    struct fixture *f = *state;
    ts_append(&f->t, 1, 5, 3, 64, 1);
    assert_true(ts_wait_persisted(&f->t, 5));
    assert_int_equal(store_snapshot_record(f->t.g, 5, 3, NULL), 0);
    assert_int_equal(store_meta_debug_corrupt(store_debug_meta(f->t.s), 'S',
                                              store_group_get_id(f->t.g)->b),
                     0);
    assert_int_equal(store_snapshot_get(f->t.g, &f->p, f->errmsg),
                     KEEL_ECORRUPT);
    assert_non_null(strstr(f->errmsg, "unreadable"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_group_without_snapshots_reads_none,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            the_second_record_keeps_the_first_as_the_older, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_refused_record_leaves_the_pair_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(the_pair_survives_a_crash_and_reopen,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_bad_value_is_reported_not_read_as_none, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
