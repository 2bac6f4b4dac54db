/* keel_units: the one duration reader and the one size reader keeld and
 * keel share (common/keel_units.c), with what each caller takes besides
 * the common core. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "keel_units.h"

#define S 1000000000ULL

static void whole_numbers_take_the_four_units_and_bare_seconds(void **state)
{
    uint64_t ns = 0;
    (void)state;
    assert_true(keel_duration_parse("500ms", 0, &ns));
    assert_true(ns == 500000000ULL);
    assert_true(keel_duration_parse("30s", 0, &ns));
    assert_true(ns == 30 * S);
    assert_true(keel_duration_parse("2m", 0, &ns));
    assert_true(ns == 120 * S);
    assert_true(keel_duration_parse("1h", 0, &ns));
    assert_true(ns == 3600 * S);
    assert_true(keel_duration_parse("10", 0, &ns));
    assert_true(ns == 10 * S);
    assert_true(keel_duration_parse("0s", 0, &ns));
    assert_true(ns == 0);
}

static void anything_else_is_refused_and_leaves_the_output(void **state)
{
    static const char *const bad[] = {
        "",
        "s",
        "soon",
        "2M",
        "5 s",
        " 5s",
        "-1s",
        "+1s",
        "1e3s",
        "5ss",
        "1.5s",
        "7d",
        "1y",
        ".s",
        "18446744073709551616ms",
        "18446744074s", /* past 2^64 ns */
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t ns = 42;
        assert_false(keel_duration_parse(bad[i], 0, &ns));
        assert_true(ns == 42);
    }
    uint64_t ns = 42;
    assert_false(keel_duration_parse(NULL, 0, &ns));
    assert_false(keel_duration_parse("1.5.0s", KEEL_DURATION_FRACTION, &ns));
    assert_false(keel_duration_parse(".", KEEL_DURATION_FRACTION, &ns));
    assert_false(keel_duration_parse("3w", KEEL_DURATION_DAYS, &ns));
    assert_true(ns == 42);
}

static void fractions_and_days_only_when_asked_for(void **state)
{
    uint64_t ns = 0;
    (void)state;
    assert_true(keel_duration_parse("0.5s", KEEL_DURATION_FRACTION, &ns));
    assert_true(ns == S / 2);
    assert_true(keel_duration_parse("1.5h", KEEL_DURATION_FRACTION, &ns));
    assert_true(ns == 5400 * S);
    assert_true(keel_duration_parse(".25", KEEL_DURATION_FRACTION, &ns));
    assert_true(ns == S / 4);
    assert_true(keel_duration_parse("2.", KEEL_DURATION_FRACTION, &ns));
    assert_true(ns == 2 * S);
    assert_true(keel_duration_parse("0.001ms", KEEL_DURATION_FRACTION, &ns));
    assert_true(ns == 1000);
    assert_true(keel_duration_parse("7d", KEEL_DURATION_DAYS, &ns));
    assert_true(ns == 7 * 86400 * S);
    assert_true(keel_duration_parse("1y", KEEL_DURATION_DAYS, &ns));
    assert_true(ns == 365 * 86400 * S);
    assert_true(keel_duration_parse(
        "0.5d", KEEL_DURATION_FRACTION | KEEL_DURATION_DAYS, &ns));
    assert_true(ns == 43200 * S);
    /* The last whole second below 2^64 ns fits (the next is refused
     * above). */
    assert_true(keel_duration_parse("18446744073s", 0, &ns));
    assert_true(ns == 18446744073ULL * S);
}

static void sizes_are_powers_of_1024_with_each_callers_units(void **state)
{
    uint64_t v = 0;
    (void)state;
    assert_true(keel_size_parse("16", 0, &v));
    assert_true(v == 16);
    assert_true(keel_size_parse("16b", 0, &v));
    assert_true(v == 16);
    assert_true(keel_size_parse("64K", 0, &v));
    assert_true(v == 64 * 1024);
    assert_true(keel_size_parse("2mB", 0, &v));
    assert_true(v == 2 * 1024 * 1024);
    /* keel's flags take KiB and MiB, keeld's G and T. */
    assert_false(keel_size_parse("1KiB", 0, &v));
    assert_true(keel_size_parse("1KiB", KEEL_SIZE_IEC, &v));
    assert_true(v == 1024);
    assert_true(keel_size_parse("3mib", KEEL_SIZE_IEC, &v));
    assert_true(v == 3 * 1024 * 1024);
    assert_false(keel_size_parse("3GB", KEEL_SIZE_IEC, &v));
    assert_true(keel_size_parse("3GB", KEEL_SIZE_LARGE, &v));
    assert_true(v == 3ULL << 30);
    assert_true(keel_size_parse("16777215tb", KEEL_SIZE_LARGE, &v));
    assert_true(v == 16777215ULL << 40);
    assert_false(keel_size_parse("1GiB", KEEL_SIZE_IEC | KEEL_SIZE_LARGE, &v));
}

static void a_bad_or_too_large_size_leaves_the_output(void **state)
{
    static const char *const bad[] = {
        "",
        "k",
        " 1",
        "+1",
        "-1",
        "1.5k",
        "1 k",
        "1kk",
        "0x10",
        "18446744073709551616",
        "17179869184GB",
        "16777216tb",
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 42;
        assert_false(keel_size_parse(bad[i], KEEL_SIZE_LARGE, &v));
        assert_true(v == 42);
    }
    uint64_t v = 0;
    assert_false(keel_size_parse(NULL, 0, &v));
    assert_true(keel_size_parse("18446744073709551615", 0, &v));
    assert_true(v == UINT64_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(whole_numbers_take_the_four_units_and_bare_seconds),
        cmocka_unit_test(anything_else_is_refused_and_leaves_the_output),
        cmocka_unit_test(fractions_and_days_only_when_asked_for),
        cmocka_unit_test(sizes_are_powers_of_1024_with_each_callers_units),
        cmocka_unit_test(a_bad_or_too_large_size_leaves_the_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
