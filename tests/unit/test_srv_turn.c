/* Loop-turn accounting (server/base/srv_turn.c): each ended turn lands in
 * one histogram bucket, the longest turn is kept with its largest phase,
 * and time charged to a phase is the time between enter and leave. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "srv_turn.h"

#define MS 1000000ull

static void turns_land_in_their_buckets_and_the_longest_is_kept(void **state)
{
    (void)state;
    struct srv_turn_stats st;
    srv_turn_stats(&st);
    uint64_t turns = st.turns;
    uint64_t h[SRV_TURN_BUCKETS];
    memcpy(h, st.hist, sizeof h);
    srv_turn_end(0);         /* < 1 ms */
    srv_turn_end(50 * MS);   /* < 100 ms */
    srv_turn_end(1500 * MS); /* < 5000 ms */
    srv_turn_end(6000 * MS); /* >= 5000 ms */
    srv_turn_end(700 * MS);  /* < 1000 ms */
    srv_turn_stats(&st);
    assert_int_equal(st.turns, turns + 5);
    assert_int_equal(st.hist[0], h[0] + 1);
    assert_int_equal(st.hist[2], h[2] + 1);
    assert_int_equal(st.hist[3], h[3] + 1);
    assert_int_equal(st.hist[4], h[4] + 1);
    assert_int_equal(st.hist[5], h[5] + 1);
    assert_int_equal(st.max_ms, 6000);
    /* No phase was entered: the whole turn is "other". */
    assert_int_equal(st.max_phase, SRV_TURN_OTHER);
    assert_int_equal(st.max_phase_ms, 6000);
}

static void time_between_enter_and_leave_is_charged_to_the_phase(void **state)
{
    (void)state;
    struct srv_turn_stats st;
    srv_turn_end(0); /* start a fresh turn */
    srv_turn_stats(&st);
    uint64_t before = st.phase_ms[SRV_TURN_META_APPLY];
    enum srv_turn_phase prev = srv_turn_enter(SRV_TURN_META_APPLY);
    assert_int_equal(prev, SRV_TURN_OTHER);
    /* Work of at least 20 ms inside the phase. */
    uint64_t t0 = uv_hrtime();
    volatile uint64_t spin = 0;
    while (uv_hrtime() - t0 < 20 * MS) {
        spin++;
    }
    enum srv_turn_phase inner = srv_turn_enter(SRV_TURN_STREAM_OPEN);
    assert_int_equal(inner, SRV_TURN_META_APPLY);
    srv_turn_leave(inner);
    srv_turn_leave(prev);
    srv_turn_end(uv_hrtime() - t0 + 10 * MS);
    srv_turn_stats(&st);
    assert_true(st.phase_ms[SRV_TURN_META_APPLY] >= before + 20);
    assert_string_equal(srv_turn_phase_name(SRV_TURN_META_APPLY), "meta apply");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(turns_land_in_their_buckets_and_the_longest_is_kept),
        cmocka_unit_test(time_between_enter_and_leave_is_charged_to_the_phase),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
