/* srv_js_config: consumer create subject forms and their checks (§2.6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_js_config.h"

struct fixture {
    struct srv_consumer_create_subj s;
    enum srv_js_err jerr;
    char errmsg[KEEL_ERRMSG_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    *state = f;
    return f == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static int subj(struct fixture *f, const char *s)
{
    return srv_consumer_create_subject_parse(s, strlen(s), &f->s, f->errmsg);
}

static void the_four_subject_forms_parse(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(subj(f, "$JS.API.CONSUMER.CREATE.ORDERS"), 0);
    assert_string_equal(f->s.stream, "ORDERS");
    assert_string_equal(f->s.consumer, "");
    assert_int_equal(subj(f, "$JS.API.CONSUMER.CREATE.ORDERS.C1"), 0);
    assert_string_equal(f->s.consumer, "C1");
    assert_string_equal(f->s.filter, "");
    assert_int_equal(subj(f, "$JS.API.CONSUMER.CREATE.ORDERS.C1.orders.*"), 0);
    assert_string_equal(f->s.filter, "orders.*");
    assert_false(f->s.durable_form);
    assert_int_equal(subj(f, "$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.D"), 0);
    assert_true(f->s.durable_form);
    assert_string_equal(f->s.consumer, "D");
}

static void malformed_create_subjects_are_refused(void **state)
{
    struct fixture *f = *state;
    const char *bad[] = {
        "$JS.API.CONSUMER.CREATE.",
        "$JS.API.CONSUMER.CREATE.S.",
        "$JS.API.CONSUMER.CREATE.S.C.>",
        "$JS.API.CONSUMER.CREATE.S.C.a..b",
        "$JS.API.CONSUMER.DURABLE.CREATE.S",
        "$JS.API.CONSUMER.DURABLE.CREATE.S.D.x",
        "$JS.API.CONSUMER.INFO.S.C",
        "$JS.API.CONSUMER.CREATE.S*.C",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(subj(f, bad[i]), KEEL_EINVAL);
    }
}

static int check(struct fixture *f, const char *stream, const char *durable,
                 const char *name, const char *filter)
{
    return srv_consumer_create_check(&f->s, stream, durable, name, filter,
                                     &f->jerr, f->errmsg);
}

static void create_checks_return_the_right_error_codes(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(subj(f, "$JS.API.CONSUMER.CREATE.S.C.a.b"), 0);
    assert_int_equal(check(f, "S", NULL, "C", "a.b"), 0);
    assert_int_equal(check(f, "T", NULL, "C", "a.b"), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_NAME_MISMATCH);
    assert_int_equal(check(f, NULL, "X", NULL, "a.b"), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EDURABLE_NAME_MISMATCH);
    assert_int_equal(check(f, NULL, "C", NULL, "a.c"), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EFILTER_MISMATCH);
    assert_int_equal(subj(f, "$JS.API.CONSUMER.DURABLE.CREATE.S.D"), 0);
    assert_int_equal(check(f, "S", NULL, NULL, NULL), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EDURABLE_NAME_MISMATCH);
    assert_int_equal(check(f, "S", "D", NULL, NULL), 0);
    assert_int_equal(subj(f, "$JS.API.CONSUMER.CREATE.S"), 0);
    assert_int_equal(check(f, "", NULL, NULL, NULL), 0);
    assert_int_equal(check(f, "S", "D", NULL, NULL), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EEPHEMERAL_DURABLE);
    assert_int_equal(srv_js_err_info(f->jerr)->err_code, 10020);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(the_four_subject_forms_parse),
        T(malformed_create_subjects_are_refused),
        T(create_checks_return_the_right_error_codes),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
