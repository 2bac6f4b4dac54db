/* srv_js_json: the one reader of stream and consumer config fields. Each
 * field kind leaves its default when absent or null, answers the reader's
 * API error when of the wrong type, and names the key; both config parsers
 * answer through it with their own error code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_consumer_cfg.h"
#include "srv_js_config.h"
#include "srv_js_json.h"

struct fixture {
    json_t *j;
    enum srv_js_err jerr;
    char errmsg[KEEL_ERRMSG_MAX];
    struct srv_js_json_rd rd;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    f->j = json_loads("{\"n\": 5, \"neg\": -2, \"b\": true, \"s\": \"x\","
                      " \"e\": \"new\", \"empty\": \"\", \"nul\": null,"
                      " \"name\": \"a.b\", \"ok_name\": \"ORDERS\"}",
                      0, NULL);
    f->rd = (struct srv_js_json_rd){f->j, SRV_JS_ESTREAM_CONFIG, &f->jerr,
                                    f->errmsg};
    *state = f;
    return f->j == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    json_decref(f->j);
    free(f);
    return 0;
}

static void absent_and_null_fields_keep_the_default(void **state)
{
    struct fixture *f = *state;
    int64_t v = 42;
    bool b = true;
    int e = 1;
    bool present = true;
    char *s = NULL;
    char name[SRV_JS_NAME_BYTES_MAX + 1] = "keep";
    static const char *const names[] = {"old", "new"};

    assert_int_equal(srv_js_json_int(&f->rd, "missing", 0, &v), 0);
    assert_int_equal(srv_js_json_int(&f->rd, "nul", 0, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(srv_js_json_bool(&f->rd, "nul", &b), 0);
    assert_true(b);
    assert_int_equal(srv_js_json_enum(&f->rd, "nul", names, 2, &e, &present),
                     0);
    assert_int_equal(e, 1);
    assert_false(present);
    assert_int_equal(srv_js_json_str(&f->rd, "nul", &s), 0);
    assert_int_equal(srv_js_json_str(&f->rd, "empty", &s), 0);
    assert_null(s);
    assert_int_equal(srv_js_json_name(&f->rd, "missing", name), 0);
    assert_string_equal(name, "keep");
    assert_int_equal(f->jerr, SRV_JS_OK);
}

static void present_fields_are_read(void **state)
{
    struct fixture *f = *state;
    int64_t v = 0;
    bool b = false;
    int e = 0;
    bool present = false;
    char *s = NULL;
    char name[SRV_JS_NAME_BYTES_MAX + 1] = "";
    static const char *const names[] = {"old", "new"};

    assert_int_equal(srv_js_json_int(&f->rd, "n", 0, &v), 0);
    assert_int_equal(v, 5);
    assert_int_equal(srv_js_json_bool(&f->rd, "b", &b), 0);
    assert_true(b);
    assert_int_equal(srv_js_json_enum(&f->rd, "e", names, 2, &e, &present), 0);
    assert_int_equal(e, 1);
    assert_true(present);
    assert_int_equal(srv_js_json_str(&f->rd, "s", &s), 0);
    assert_string_equal(s, "x");
    free(s);
    assert_int_equal(srv_js_json_name(&f->rd, "ok_name", name), 0);
    assert_string_equal(name, "ORDERS");
}

static void
a_bad_field_answers_the_readers_error_and_names_the_key(void **state)
{
    struct fixture *f = *state;
    int64_t v = 0;
    bool b = false;
    char *s = NULL;
    char name[SRV_JS_NAME_BYTES_MAX + 1] = "";

    assert_int_equal(srv_js_json_int(&f->rd, "neg", 0, &v), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    assert_non_null(strstr(f->errmsg, "neg must be an integer >= 0"));
    f->rd.bad = SRV_JS_ECONSUMER_CONFIG;
    assert_int_equal(srv_js_json_bool(&f->rd, "n", &b), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ECONSUMER_CONFIG);
    assert_non_null(strstr(f->errmsg, "n must be true or false"));
    assert_int_equal(srv_js_json_str(&f->rd, "b", &s), KEEL_EINVAL);
    assert_non_null(strstr(f->errmsg, "b must be a string"));
    assert_int_equal(srv_js_json_name(&f->rd, "name", name), KEEL_EINVAL);
    assert_non_null(strstr(f->errmsg, "invalid name"));
    assert_string_equal(name, "");
    assert_int_equal(v, 0);
}

static void a_bad_enum_lists_every_value(void **state)
{
    struct fixture *f = *state;
    static const char *const names[] = {"limits", "interest", "workqueue",
                                        "fourth"};
    int e = 0;

    assert_int_equal(srv_js_json_enum(&f->rd, "s", names, 4, &e, NULL),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    assert_non_null(strstr(f->errmsg, "invalid s x: use one of limits, "
                                      "interest, workqueue, fourth"));
    assert_int_equal(srv_js_json_enum(&f->rd, "n", names, 4, &e, NULL),
                     KEEL_EINVAL);
    assert_non_null(strstr(f->errmsg, "(not a string)"));
    assert_int_equal(e, 0);
}

static void begin_refuses_a_non_object_and_end_makes_oom_retryable(void **state)
{
    struct fixture *f = *state;
    json_t *arr = json_array();
    struct srv_js_json_rd rd = {arr, SRV_JS_ESTREAM_CONFIG, &f->jerr,
                                f->errmsg};

    assert_int_equal(srv_js_json_begin(&rd, "stream config"), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EBAD_REQUEST);
    assert_non_null(strstr(f->errmsg, "stream config must be a JSON object"));
    assert_int_equal(srv_js_json_begin(&f->rd, "stream config"), 0);
    assert_int_equal(f->jerr, SRV_JS_OK);
    srv_js_json_end(&f->rd); /* a failure that set no code: ENOMEM */
    assert_int_equal(f->jerr, SRV_JS_EUNAVAILABLE);
    json_decref(arr);
}

static void both_config_parsers_answer_through_the_reader(void **state)
{
    struct fixture *f = *state;
    struct srv_stream_config sc;
    struct srv_consumer_config cc;
    json_t *sj =
        json_loads("{\"name\": \"S\", \"storage\": \"tape\"}", 0, NULL);
    json_t *cj = json_loads("{\"ack_policy\": \"some\"}", 0, NULL);

    assert_int_equal(srv_stream_config_parse(sj, &sc, &f->jerr, f->errmsg),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    assert_non_null(
        strstr(f->errmsg, "invalid storage tape: use one of file, memory"));
    assert_int_equal(srv_consumer_config_parse(cj, &cc, &f->jerr, f->errmsg),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ECONSUMER_CONFIG);
    assert_non_null(strstr(f->errmsg, "invalid ack_policy some: use one of "
                                      "none, all, explicit"));
    json_decref(sj);
    json_decref(cj);
}
/* A field table reads its rows in order, each as its own call would, and
 * stops at the first bad one. */
static void
a_field_table_reads_in_order_and_stops_at_the_first_bad(void **state)
{
    struct fixture *f = *state;
    int64_t n = 0, absent = 7, neg = 0;
    bool b = false, nb = false;
    const struct srv_js_json_field good[] = {
        SRV_JS_JSON_INT("n", 0, &n),
        SRV_JS_JSON_BOOL("b", &b),
        SRV_JS_JSON_INT("absent", 0, &absent),
    };
    const struct srv_js_json_field bad[] = {
        SRV_JS_JSON_INT("neg", -5, &neg),
        SRV_JS_JSON_BOOL("n", &nb),
        SRV_JS_JSON_INT("neg", 0, &neg),
    };

    assert_int_equal(srv_js_json_fields(&f->rd, good, 3), 0);
    assert_int_equal(n, 5);
    assert_true(b);
    assert_int_equal(absent, 7);
    assert_int_equal(srv_js_json_fields(&f->rd, bad, 3), KEEL_EINVAL);
    assert_int_equal(neg, -2); /* the first row was read */
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    assert_non_null(strstr(f->errmsg, "n must be true or false"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(absent_and_null_fields_keep_the_default,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(present_fields_are_read, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_bad_field_answers_the_readers_error_and_names_the_key, setup,
            teardown),
        cmocka_unit_test_setup_teardown(a_bad_enum_lists_every_value, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            begin_refuses_a_non_object_and_end_makes_oom_retryable, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            both_config_parsers_answer_through_the_reader, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_field_table_reads_in_order_and_stops_at_the_first_bad, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
