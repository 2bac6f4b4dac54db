/* Group commit: 64 concurrent appenders on one group (each waits for its
 * record to be persisted before appending the next, as publishers waiting
 * for a PubAck) share fdatasyncs: fewer syncs than appends. The sync
 * threads walk the groups for interval syncs only when one can be due,
 * not before every batch. Real fs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <time.h>

#include "store_test_util.h"

#define APPENDERS 64
#define APPENDS 1024
#define WALK_APPENDS 200

struct fixture {
    struct ts t;
};

static int setup(void **state)
{
    struct fixture *f = test_calloc(1, sizeof *f);
    ts_init(&f->t, 3, true);
    f->t.segment_bytes = 1024 * 1024;
    ts_open(&f->t);
    assert_int_equal(store_hard_state_save(f->t.g, 1, "a", 1, NULL), 0);
    assert_true(ts_wait_hard_state(&f->t, 1));
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

static void concurrent_appenders_share_fdatasyncs(void **state)
{
    struct fixture *f = *state;
    struct store_stats before;
    struct store_stats after;
    uint64_t next = 1;
    uint64_t outstanding = 0;

    store_stats(f->t.s, &before);
    /* The loop thread: keep 64 publishes in flight; each persisted
     * notification acknowledges everything at or below it. */
    while (next <= APPENDS) {
        while (outstanding < APPENDERS && next <= APPENDS) {
            ts_append(&f->t, next, next, 1, 128, 1);
            next++;
            outstanding++;
        }
        assert_true(ts_wait_persisted(&f->t, next - outstanding));
        outstanding = next - 1 - f->t.persisted_index;
    }
    assert_true(ts_wait_persisted(&f->t, APPENDS));
    store_stats(f->t.s, &after);
    uint64_t syncs = after.fdatasyncs - before.fdatasyncs;
    assert_true(syncs > 0);
    assert_true(syncs < APPENDS);
    assert_int_equal(after.records_written - before.records_written, APPENDS);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Appends one at a time, each waited for: a batch each, and with
 * --fsync group no interval deadline, so the groups are walked about
 * once per ENOSPC_RETRY_MS (1 s), not once per batch (a walk over every
 * group under the store mutex per batch cost a quarter of a node's CPU
 * at 1,400 groups: docs/bench.md, "Many streams on a cluster"). */
static void no_walk_of_every_group_per_batch(void **state)
{
    struct fixture *f = *state;
    struct store_stats before;
    struct store_stats after;
    long long t0 = now_ms();

    store_stats(f->t.s, &before);
    for (uint64_t i = 1; i <= WALK_APPENDS; i++) {
        ts_append(&f->t, i, i, 1, 128, 1);
        assert_true(ts_wait_persisted(&f->t, i));
    }
    store_stats(f->t.s, &after);
    uint64_t batches = after.batches - before.batches;
    uint64_t walks = after.timer_walks - before.timer_walks;
    long long secs = (now_ms() - t0) / 1000 + 1;
    assert_true(batches >= WALK_APPENDS);
    /* Once a second and a few for the run ends, per sync thread. */
    assert_true(walks <= (uint64_t)(4 * secs + 8));
    assert_true(walks < batches);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(concurrent_appenders_share_fdatasyncs,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(no_walk_of_every_group_per_batch, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
