/* srv_stream_sm: the Nats-Msg-Id dedupe table, windowed by entry time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_stream_sm.h"

#define WINDOW 1000

struct fixture {
    struct srv_dedupe d;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    srv_dedupe_init(&f->d);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_dedupe_close(&f->d);
    free(f);
    return 0;
}

static void an_id_within_the_window_is_found_with_its_seq(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(srv_dedupe_add(&f->d, "a", 1, 100, 7), 0);
    srv_dedupe_expire(&f->d, 100 + WINDOW - 1, WINDOW);
    assert_int_equal(srv_dedupe_find(&f->d, "a", 1), 7);
    assert_int_equal(srv_dedupe_add(&f->d, "a", 1, 200, 8), KEEL_EINVAL);
    assert_int_equal(srv_dedupe_find(&f->d, "b", 1), 0);
}

static void
an_id_is_forgotten_once_the_entry_time_passes_the_window(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(srv_dedupe_add(&f->d, "a", 1, 100, 1), 0);
    assert_int_equal(srv_dedupe_add(&f->d, "b", 1, 600, 2), 0);
    srv_dedupe_expire(&f->d, 100 + WINDOW, WINDOW);
    assert_int_equal(srv_dedupe_find(&f->d, "a", 1), 0);
    assert_int_equal(srv_dedupe_find(&f->d, "b", 1), 2);
    assert_int_equal(srv_dedupe_add(&f->d, "a", 1, 1100, 3), 0);
    assert_int_equal(srv_dedupe_find(&f->d, "a", 1), 3);
}

static void many_ids_grow_the_fifo_and_expire_in_order(void **state)
{
    struct fixture *f = *state;
    char id[16];
    for (int i = 1; i <= 1000; i++) {
        int n = snprintf(id, sizeof id, "id-%d", i);
        assert_int_equal(srv_dedupe_add(&f->d, id, (size_t)n, i, (uint64_t)i),
                         0);
    }
    srv_dedupe_expire(&f->d, 500 + WINDOW, WINDOW);
    assert_int_equal(f->d.count, 500);
    for (int i = 1; i <= 1000; i++) {
        int n = snprintf(id, sizeof id, "id-%d", i);
        uint64_t want = i <= 500 ? 0 : (uint64_t)i;
        assert_int_equal(srv_dedupe_find(&f->d, id, (size_t)n), want);
    }
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(an_id_within_the_window_is_found_with_its_seq),
        T(an_id_is_forgotten_once_the_entry_time_passes_the_window),
        T(many_ids_grow_the_fifo_and_expire_in_order),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
