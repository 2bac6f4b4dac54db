/* srv_js_err: the JetStream error table and the JSON error object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_js_err.h"

struct fixture {
    json_t *obj;
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
    struct fixture *f = *state;
    json_decref(f->obj);
    free(f);
    return 0;
}

static void
stream_not_found_has_type_code_err_code_and_description(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(srv_js_err_json("stream_info_response",
                                     SRV_JS_ESTREAM_NOT_FOUND, NULL, &f->obj,
                                     f->errmsg),
                     0);
    assert_string_equal(json_string_value(json_object_get(f->obj, "type")),
                        "io.nats.jetstream.api.v1.stream_info_response");
    json_t *e = json_object_get(f->obj, "error");
    assert_int_equal(json_integer_value(json_object_get(e, "code")), 404);
    assert_int_equal(json_integer_value(json_object_get(e, "err_code")), 10059);
    assert_string_equal(json_string_value(json_object_get(e, "description")),
                        "stream not found");
}

static void template_description_gets_the_detail_appended(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(srv_js_err_json("pub_ack", SRV_JS_EWRONG_LAST_SEQ, "41",
                                     &f->obj, f->errmsg),
                     0);
    json_t *e = json_object_get(f->obj, "error");
    assert_int_equal(json_integer_value(json_object_get(e, "err_code")), 10071);
    assert_string_equal(json_string_value(json_object_get(e, "description")),
                        "wrong last sequence: 41");
}

static void a_detail_repeating_the_description_is_said_once(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(srv_js_err_json("consumer_create_response",
                                     SRV_JS_EDURABLE_NAME_MISMATCH,
                                     "consumer name in subject does not "
                                     "match durable name in request",
                                     &f->obj, f->errmsg),
                     0);
    json_t *e = json_object_get(f->obj, "error");
    assert_string_equal(json_string_value(json_object_get(e, "description")),
                        "consumer name in subject does not match durable "
                        "name in request");
}

static void a_fixed_description_keeps_its_detail_in_parentheses(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(srv_js_err_json("pub_ack", SRV_JS_EBAD_REQUEST,
                                     "stream is sealed", &f->obj, f->errmsg),
                     0);
    json_t *e = json_object_get(f->obj, "error");
    assert_string_equal(json_string_value(json_object_get(e, "description")),
                        "bad request (stream is sealed)");
}

static void every_table_code_is_at_least_300(void **state)
{
    (void)state;
    for (int e = SRV_JS_OK + 1; e < SRV_JS_ERR_COUNT; e++) {
        const struct srv_js_err_info *i = srv_js_err_info(e);
        assert_true(i->code >= 300);
        assert_true(i->err_code >= 10000);
    }
}

static void unknown_error_is_refused(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(
        srv_js_err_json("x", SRV_JS_ERR_COUNT, NULL, &f->obj, f->errmsg),
        KEEL_EINVAL);
    assert_null(f->obj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            stream_not_found_has_type_code_err_code_and_description, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            template_description_gets_the_detail_appended, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_detail_repeating_the_description_is_said_once, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_fixed_description_keeps_its_detail_in_parentheses, setup,
            teardown),
        cmocka_unit_test_setup_teardown(every_table_code_is_at_least_300, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unknown_error_is_refused, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
