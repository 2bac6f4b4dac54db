/* srv_js_config: stream config defaults, validation, echo, subjects, time. */
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
    struct srv_stream_config cfg;
    json_t *in;
    json_t *out;
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
    struct fixture *f = *state;
    srv_stream_config_free(&f->cfg);
    json_decref(f->in);
    json_decref(f->out);
    free(f);
    return 0;
}

static int parse(struct fixture *f, const char *text)
{
    json_decref(f->in);
    srv_stream_config_free(&f->cfg);
    f->in = json_loads(text, 0, NULL);
    assert_non_null(f->in);
    return srv_stream_config_parse(f->in, &f->cfg, &f->jerr, f->errmsg);
}

static void encode(struct fixture *f)
{
    json_decref(f->out);
    assert_int_equal(srv_stream_config_encode(&f->cfg, &f->out, f->errmsg), 0);
}

static json_int_t out_int(struct fixture *f, const char *key)
{
    json_t *v = json_object_get(f->out, key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static const char *out_str(struct fixture *f, const char *key)
{
    const char *s = json_string_value(json_object_get(f->out, key));
    assert_non_null(s);
    return s;
}

static void minimal_config_is_echoed_with_every_default(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, "{\"name\":\"ORDERS\",\"x_unknown\":1}"), 0);
    encode(f);
    json_t *subj = json_object_get(f->out, "subjects");
    assert_int_equal(json_array_size(subj), 1);
    assert_string_equal(json_string_value(json_array_get(subj, 0)), "ORDERS");
    assert_string_equal(out_str(f, "retention"), "limits");
    assert_string_equal(out_str(f, "discard"), "old");
    assert_string_equal(out_str(f, "storage"), "file");
    assert_string_equal(out_str(f, "compression"), "none");
    assert_string_equal(out_str(f, "keel_fsync"), "group");
    const char *minus_one[] = {"max_consumers", "max_msgs", "max_bytes",
                               "max_msgs_per_subject", "max_msg_size"};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(out_int(f, minus_one[i]), -1);
    }
    assert_int_equal(out_int(f, "max_age"), 0);
    assert_int_equal(out_int(f, "num_replicas"), 1);
    assert_int_equal(out_int(f, "duplicate_window"), 120000000000LL);
    assert_true(json_is_false(json_object_get(f->out, "deny_delete")));
    assert_true(json_is_object(json_object_get(f->out, "consumer_limits")));
    assert_null(json_object_get(f->out, "description"));
    assert_null(json_object_get(f->out, "metadata"));
    assert_null(json_object_get(f->out, "first_seq"));
    assert_null(json_object_get(f->out, "x_unknown"));
}

static void duplicate_window_defaults_to_max_age_when_smaller(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, "{\"name\":\"S\",\"max_age\":5000000000}"), 0);
    assert_int_equal(f->cfg.duplicate_window_ns, 5000000000LL);
    assert_int_equal(parse(f, "{\"name\":\"S\",\"max_age\":5000000000,"
                              "\"duplicate_window\":6000000000}"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
}

static void invalid_names_are_refused_with_10052(void **state)
{
    struct fixture *f = *state;
    const char *bad[] = {"{}",
                         "{\"name\":\"a.b\"}",
                         "{\"name\":\"a b\"}",
                         "{\"name\":\"a*\"}",
                         "{\"name\":\"a/b\"}",
                         "{\"name\":\"a>\"}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse(f, bad[i]), KEEL_EINVAL);
        assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
        assert_true(strlen(f->errmsg) > 0);
    }
}

static void invalid_values_are_refused(void **state)
{
    struct fixture *f = *state;
    const char *bad[] = {
        "{\"name\":\"S\",\"retention\":\"forever\"}",
        "{\"name\":\"S\",\"discard\":1}",
        "{\"name\":\"S\",\"storage\":\"disk\"}",
        "{\"name\":\"S\",\"max_msgs\":-2}",
        "{\"name\":\"S\",\"max_bytes\":\"1\"}",
        "{\"name\":\"S\",\"num_replicas\":6}",
        "{\"name\":\"S\",\"deny_delete\":1}",
        "{\"name\":\"S\",\"subjects\":[\"a.*x\"]}",
        "{\"name\":\"S\",\"subjects\":[\"a.>.b\"]}",
        "{\"name\":\"S\",\"subjects\":[\"a..b\"]}",
        "{\"name\":\"S\",\"subjects\":[\"a\",\"a\"]}",
        "{\"name\":\"S\",\"subjects\":\"a\"}",
        "{\"name\":\"S\",\"keel_fsync\":\"sometimes\"}",
        "{\"name\":\"S\",\"keel_fsync\":\"interval:0\"}",
        "{\"name\":\"S\",\"keel_fsync\":\"interval:5x\"}",
        /* A stream's bound (a minute) is below the store's (ten). */
        "{\"name\":\"S\",\"keel_fsync\":\"interval:60001\"}",
        "{\"name\":\"S\",\"keel_fsync\":\"interval:\"}",
        "{\"name\":\"S\",\"metadata\":[]}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse(f, bad[i]), KEEL_EINVAL);
        assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    }
}

static void discard_new_per_subject_needs_discard_new_and_a_limit(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, "{\"name\":\"S\",\"max_msgs_per_subject\":1,"
                              "\"discard_new_per_subject\":true}"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    assert_string_equal(f->errmsg, "discard new per subject requires discard "
                                   "new policy to be set");
    assert_int_equal(parse(f, "{\"name\":\"S\",\"discard\":\"new\","
                              "\"discard_new_per_subject\":true}"),
                     KEEL_EINVAL);
    assert_string_equal(f->errmsg, "discard new per subject requires max msgs "
                                   "per subject > 0");
    assert_int_equal(parse(f, "{\"name\":\"S\",\"discard\":\"new\","
                              "\"max_msgs_per_subject\":1,"
                              "\"discard_new_per_subject\":true}"),
                     0);
    assert_true(f->cfg.discard_new_per_subject);
    encode(f);
    assert_true(
        json_is_true(json_object_get(f->out, "discard_new_per_subject")));
    /* Unset, it is not echoed at all (nats-server omits it). */
    assert_int_equal(parse(f, "{\"name\":\"S\"}"), 0);
    encode(f);
    assert_null(json_object_get(f->out, "discard_new_per_subject"));
}

static void parsed_encoding_parses_to_an_equal_config(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(
        parse(f, "{\"name\":\"S\",\"subjects\":[\"a.*\",\"b.>\"],"
                 "\"retention\":\"workqueue\",\"discard\":\"new\","
                 "\"storage\":\"memory\",\"max_msgs\":10,\"num_replicas\":3,"
                 "\"description\":\"d\",\"first_seq\":7,"
                 "\"metadata\":{\"k\":\"v\"},\"keel_fsync\":\"interval:25\","
                 "\"deny_purge\":true}"),
        0);
    encode(f);
    struct srv_stream_config again;
    assert_int_equal(
        srv_stream_config_parse(f->out, &again, &f->jerr, f->errmsg), 0);
    assert_true(srv_stream_config_equal(&f->cfg, &again));
    assert_int_equal(again.fsync, SRV_JS_FSYNC_INTERVAL);
    assert_int_equal(again.fsync_interval_ms, 25);
    again.max_msgs = 11;
    assert_false(srv_stream_config_equal(&f->cfg, &again));
    srv_stream_config_free(&again);
    assert_string_equal(out_str(f, "description"), "d");
    assert_int_equal(out_int(f, "first_seq"), 7);
}

static void subject_overlap_follows_wildcards(void **state)
{
    (void)state;
    assert_true(srv_js_subjects_overlap("a.b", "a.b"));
    assert_true(srv_js_subjects_overlap("a.*", "a.b"));
    assert_true(srv_js_subjects_overlap("a.>", "a.b.c"));
    assert_true(srv_js_subjects_overlap("*.b", "a.*"));
    assert_false(srv_js_subjects_overlap("a.>", "a"));
    assert_false(srv_js_subjects_overlap("a.*", "a.b.c"));
    assert_false(srv_js_subjects_overlap("a.b", "a.c"));
    char *x[] = {"orders.*", "ship"};
    char *y[] = {"inv", "orders.new"};
    char *z[] = {"inv"};
    assert_true(srv_js_subject_lists_overlap(x, 2, y, 2));
    assert_false(srv_js_subject_lists_overlap(x, 2, z, 1));
    assert_true(srv_js_subject_subset("a.b", "a.*"));
    assert_true(srv_js_subject_subset("a.*", "a.>"));
    assert_false(srv_js_subject_subset("a.>", "a.*"));
    /* Overlap is symmetric, subset is not: the walk is one for both. */
    assert_true(srv_js_subjects_overlap("a.b", "a.>"));
    assert_true(srv_js_subjects_overlap("a.b.c", "*.>"));
    assert_false(srv_js_subjects_overlap("a", "a.>"));
    assert_true(srv_js_subject_subset("a.>", "a.>"));
    assert_true(srv_js_subject_subset("a.b.c", "a.>"));
    assert_true(srv_js_subject_subset("a.b", "a.b"));
    assert_false(srv_js_subject_subset("a", "a.>"));
    assert_false(srv_js_subject_subset("*", "a"));
    assert_false(srv_js_subject_subset("a.b", "a.b.c"));
    assert_false(srv_js_subject_subset("a.b.c", "a.b"));
    assert_false(srv_js_subject_subset("a.*", "a.b"));
    assert_true(srv_js_subject_matches("a.>", "a.b.c"));
    assert_false(srv_js_subject_matches("a.*", "a.b.c"));
}

static void time_formats_rfc3339_with_nanoseconds(void **state)
{
    (void)state;
    char buf[SRV_JS_TIME_BYTES];
    srv_js_time_format(1717000000000000007LL, buf);
    assert_string_equal(buf, "2024-05-29T16:26:40.000000007Z");
    srv_js_time_format(0, buf);
    assert_string_equal(buf, "0001-01-01T00:00:00Z");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(minimal_config_is_echoed_with_every_default),
        T(duplicate_window_defaults_to_max_age_when_smaller),
        T(invalid_names_are_refused_with_10052),
        T(invalid_values_are_refused),
        T(discard_new_per_subject_needs_discard_new_and_a_limit),
        T(parsed_encoding_parses_to_an_equal_config),
        T(subject_overlap_follows_wildcards),
        T(time_formats_rfc3339_with_nanoseconds),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
