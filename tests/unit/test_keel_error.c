/* keel/error.h: every code's name and message come from the one KEEL_ERRORS
 * table, and a code outside it gets the "unknown" texts, never a read past
 * the table. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "keel/error.h"

static void every_code_has_its_name_and_message(void **state)
{
    (void)state;
    assert_string_equal(keel_errname(0), "OK");
    assert_string_equal(keel_strerror(0), "ok");
#define CHECK_ROW(name, value, msg)                                            \
    assert_string_equal(keel_errname(value), #name);                           \
    assert_string_equal(keel_strerror(value), msg);
    KEEL_ERRORS(CHECK_ROW)
#undef CHECK_ROW
    assert_string_equal(keel_errname(KEEL_ECORRUPT), "KEEL_ECORRUPT");
    assert_string_equal(keel_strerror(KEEL_ELOST), "range is lost");
}

/* The codes run -1 .. -ROWS with no gap (error.h), so -(ROWS + 1) is the
 * first code past the table. */
#define COUNT_ROW(name, value, msg) +1
enum { ROWS = 0 KEEL_ERRORS(COUNT_ROW) };
#undef COUNT_ROW

static void codes_outside_the_table_are_unknown(void **state)
{
    static const int odd[] = {1, 7, -(ROWS + 1), -1000, INT_MAX, INT_MIN};
    (void)state;
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        assert_string_equal(keel_errname(odd[i]), "KEEL_E?");
        assert_string_equal(keel_strerror(odd[i]), "unknown error");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_code_has_its_name_and_message),
        cmocka_unit_test(codes_outside_the_table_are_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
