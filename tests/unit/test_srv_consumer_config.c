/* srv_consumer_cfg: consumer config parse, defaults, encode, update rules
 * and RFC3339 parse. */
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
#include "srv_consumer_pause.h"
#include "srv_js_config.h"

struct fixture {
    struct srv_consumer_config a, b;
    json_t *j;
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
    srv_consumer_config_free(&f->a);
    srv_consumer_config_free(&f->b);
    json_decref(f->j);
    free(f);
    return 0;
}

static int parse(struct fixture *f, struct srv_consumer_config *c,
                 const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    assert_non_null(j);
    srv_consumer_config_free(c);
    int rv = srv_consumer_config_parse(j, c, &f->jerr, f->errmsg);
    json_decref(j);
    return rv;
}

static void
pull_durable_gets_defaults_and_encodes_without_deliver_subject(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, &f->a, "{\"durable_name\":\"D\"}"), 0);
    assert_string_equal(f->a.name, "D");
    assert_int_equal(f->a.ack_policy, SRV_ACKP_EXPLICIT);
    assert_int_equal(f->a.ack_wait_ns, SRV_JS_ACK_WAIT_NS_DEFAULT);
    assert_int_equal(f->a.max_deliver, -1);
    assert_int_equal(f->a.max_waiting, SRV_JS_MAX_WAITING_DEFAULT);
    assert_int_equal(f->a.max_ack_pending, SRV_JS_MAX_ACK_PENDING_DEFAULT);
    assert_int_equal(f->a.inactive_threshold_ns, 0);
    assert_int_equal(srv_consumer_config_encode(&f->a, &f->j, f->errmsg), 0);
    assert_null(json_object_get(f->j, "deliver_subject"));
    assert_null(json_object_get(f->j, "filter_subject"));
    assert_null(json_object_get(f->j, "description"));
    assert_string_equal(
        json_string_value(json_object_get(f->j, "deliver_policy")), "all");
    assert_string_equal(json_string_value(json_object_get(f->j, "ack_policy")),
                        "explicit");
    assert_int_equal(json_integer_value(json_object_get(f->j, "max_waiting")),
                     512);
    assert_int_equal(json_integer_value(json_object_get(f->j, "ack_wait")),
                     30000000000LL);
    assert_non_null(json_object_get(f->j, "num_replicas"));
}

static void
push_ephemeral_gets_inactive_threshold_and_no_max_waiting(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, &f->a,
                           "{\"deliver_subject\":\"in.1\",\"ack_policy\":"
                           "\"none\",\"deliver_group\":\"q\"}"),
                     0);
    assert_int_equal(f->a.max_waiting, 0);
    assert_int_equal(f->a.max_ack_pending, 0);
    assert_int_equal(f->a.inactive_threshold_ns, SRV_JS_INACTIVE_NS_DEFAULT);
    assert_int_equal(srv_consumer_config_encode(&f->a, &f->j, f->errmsg), 0);
    assert_string_equal(
        json_string_value(json_object_get(f->j, "deliver_subject")), "in.1");
    assert_null(json_object_get(f->j, "max_waiting"));
    assert_null(json_object_get(f->j, "max_ack_pending"));
}

static void every_field_survives_an_encode_parse_round_trip(void **state)
{
    struct fixture *f = *state;
    const char *full =
        "{\"durable_name\":\"D\",\"name\":\"D\",\"description\":\"x\","
        "\"deliver_policy\":\"by_start_time\",\"opt_start_time\":"
        "\"2026-12-01T01:02:03.000000004Z\",\"ack_policy\":\"all\","
        "\"ack_wait\":5000000000,\"max_deliver\":5,\"backoff\":[1000,2000],"
        "\"filter_subjects\":[\"a.*\",\"b.>\"],\"replay_policy\":"
        "\"original\",\"max_ack_pending\":-1,\"deliver_subject\":\"d.x\","
        "\"flow_control\":true,\"idle_heartbeat\":5000000000,"
        "\"headers_only\":true,\"mem_storage\":true,\"num_replicas\":1,"
        "\"metadata\":{\"k\":\"v\"},\"unknown_field\":7}";
    assert_int_equal(parse(f, &f->a, full), 0);
    assert_int_equal(f->a.opt_start_time_ns, 1796086923000000004LL);
    assert_int_equal(f->a.nfilter_subjects, 2);
    assert_int_equal(srv_consumer_config_copy(&f->b, &f->a, f->errmsg), 0);
    assert_true(srv_consumer_config_equal(&f->a, &f->b));
    assert_int_equal(f->b.max_ack_pending, 0);
    assert_int_equal(f->b.nbackoff, 2);
    assert_int_equal(f->b.backoff_ns[1], 2000);
}

static void
invalid_configs_are_refused_with_a_consumer_config_error(void **state)
{
    struct fixture *f = *state;
    const char *bad[] = {
        "{\"filter_subject\":\"a\",\"filter_subjects\":[\"b\"]}",
        "{\"filter_subjects\":[\"a.*\",\"a.b\"]}",
        "{\"deliver_policy\":\"by_start_sequence\"}",
        "{\"opt_start_seq\":5}",
        "{\"deliver_policy\":\"soon\"}",
        "{\"ack_policy\":\"maybe\"}",
        "{\"durable_name\":\"a.b\"}",
        "{\"durable_name\":\"A\",\"name\":\"B\"}",
        "{\"deliver_subject\":\"x\",\"max_waiting\":10}",
        "{\"idle_heartbeat\":1000000000}",
        "{\"deliver_subject\":\"x\",\"max_batch\":10}",
        "{\"deliver_subject\":\"x\",\"flow_control\":true}",
        "{\"max_deliver\":-5}",
        "{\"ack_wait\":\"long\"}",
        "{\"filter_subject\":\"a..b\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse(f, &f->a, bad[i]), KEEL_EINVAL);
        assert_int_equal(f->jerr, SRV_JS_ECONSUMER_CONFIG);
        assert_true(strlen(f->errmsg) > 0);
    }
}

static void heartbeat_below_100ms_is_error_10083(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(
        parse(f, &f->a, "{\"deliver_subject\":\"x\",\"idle_heartbeat\":5}"),
        KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EHEARTBEAT_MIN);
    assert_int_equal(parse(f, &f->a, "[]"), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EBAD_REQUEST);
}

static void update_may_change_limits_but_not_the_delivery_position(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, &f->a, "{\"durable_name\":\"D\"}"), 0);
    assert_int_equal(parse(f, &f->b,
                           "{\"durable_name\":\"D\",\"max_ack_pending\":5,"
                           "\"ack_wait\":1000000000,\"filter_subject\":\"x\"}"),
                     0);
    assert_int_equal(
        srv_consumer_config_update_check(&f->a, &f->b, &f->jerr, f->errmsg), 0);
    const char *fixed[] = {
        "{\"durable_name\":\"D\",\"deliver_policy\":\"new\"}",
        "{\"durable_name\":\"D\",\"ack_policy\":\"all\"}",
        "{\"durable_name\":\"D\",\"deliver_subject\":\"p\"}",
        "{\"durable_name\":\"E\"}",
        "{\"durable_name\":\"D\",\"replay_policy\":\"original\"}",
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        assert_int_equal(parse(f, &f->b, fixed[i]), 0);
        assert_int_equal(
            srv_consumer_config_update_check(&f->a, &f->b, &f->jerr, f->errmsg),
            KEEL_EINVAL);
        assert_int_equal(f->jerr, SRV_JS_ECONSUMER_CONFIG);
    }
}

static void filters_match_by_either_form(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, &f->a, "{\"filter_subject\":\"a.*\"}"), 0);
    assert_true(srv_consumer_config_matches(&f->a, "a.b"));
    assert_false(srv_consumer_config_matches(&f->a, "a.b.c"));
    assert_int_equal(parse(f, &f->b, "{\"filter_subjects\":[\"x\",\"y.>\"]}"),
                     0);
    assert_true(srv_consumer_config_matches(&f->b, "y.z.w"));
    assert_true(srv_consumer_config_matches(&f->b, "x"));
    assert_false(srv_consumer_config_matches(&f->b, "z"));
    assert_int_equal(parse(f, &f->a, "{}"), 0);
    assert_true(srv_consumer_config_matches(&f->a, "anything"));
}

static void rfc3339_times_parse_with_offsets_and_fractions(void **state)
{
    (void)state;
    int64_t t = -1;
    assert_int_equal(srv_js_time_parse("1970-01-01T00:00:01Z", &t), 0);
    assert_int_equal(t, 1000000000LL);
    assert_int_equal(srv_js_time_parse("1970-01-01T01:00:01.5+01:00", &t), 0);
    assert_int_equal(t, 1500000000LL);
    assert_int_equal(srv_js_time_parse("0001-01-01T00:00:00Z", &t), 0);
    assert_int_equal(t, 0);
    char buf[SRV_JS_TIME_BYTES];
    srv_js_time_format(1796086923000000004LL, buf);
    assert_int_equal(srv_js_time_parse(buf, &t), 0);
    assert_int_equal(t, 1796086923000000004LL);
    assert_int_equal(srv_js_time_parse("2026-13-01T00:00:00Z", &t),
                     KEEL_EINVAL);
    assert_int_equal(srv_js_time_parse("2026-01-01 00:00:00Z", &t),
                     KEEL_EINVAL);
    assert_int_equal(srv_js_time_parse("2026-01-01T00:00:00", &t), KEEL_EINVAL);
}

/* pause_until and the PAUSE answer as nats-server 2.11: an RFC3339 time
 * kept across an encode and an update, Go's zero time as unset, and the
 * response's paused / pause_until / pause_remaining. */
static void pause_until_round_trips_and_answers_as_2_11(void **state)
{
    struct fixture *f = *state;
    const int64_t t = 1893456000LL * 1000000000LL; /* 2030-01-01 */
    assert_int_equal(parse(f, &f->a,
                           "{\"durable_name\":\"D\","
                           "\"pause_until\":\"2030-01-01T00:00:00Z\"}"),
                     0);
    assert_int_equal(f->a.pause_until_ns, t);
    int64_t left = 0;
    assert_true(srv_consumer_paused(&f->a, t - 5, &left));
    assert_int_equal(left, 5);
    assert_false(srv_consumer_paused(&f->a, t, &left));
    assert_int_equal(left, 0);
    assert_int_equal(srv_consumer_config_encode(&f->a, &f->j, f->errmsg), 0);
    assert_string_equal(json_string_value(json_object_get(f->j, "pause_until")),
                        "2030-01-01T00:00:00.000000000Z");
    assert_int_equal(parse(f, &f->b,
                           "{\"durable_name\":\"D\",\"pause_until\":"
                           "\"0001-01-01T00:00:00Z\"}"),
                     0);
    assert_int_equal(f->b.pause_until_ns, 0);
    /* An update may pause or resume. */
    assert_int_equal(
        srv_consumer_config_update_check(&f->b, &f->a, &f->jerr, f->errmsg), 0);
    assert_int_equal(parse(f, &f->b, "{\"pause_until\":5}"), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ECONSUMER_CONFIG);

    int64_t until = -1;
    assert_int_equal(
        srv_consumer_pause_request("", 0, &until, &f->jerr, f->errmsg), 0);
    assert_int_equal(until, 0);
    const char *body = "{\"pause_until\":\"2030-01-01T00:00:00Z\"}";
    assert_int_equal(srv_consumer_pause_request(body, strlen(body), &until,
                                                &f->jerr, f->errmsg),
                     0);
    assert_int_equal(until, t);
    assert_int_equal(
        srv_consumer_pause_request("{", 1, &until, &f->jerr, f->errmsg),
        KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EINVALID_JSON);
    json_t *r = srv_consumer_pause_response(t, t - 7);
    assert_true(json_is_true(json_object_get(r, "paused")));
    assert_int_equal(json_integer_value(json_object_get(r, "pause_remaining")),
                     7);
    json_decref(r);
    r = srv_consumer_pause_response(0, t);
    assert_true(json_is_false(json_object_get(r, "paused")));
    assert_string_equal(json_string_value(json_object_get(r, "pause_until")),
                        "0001-01-01T00:00:00Z");
    assert_null(json_object_get(r, "pause_remaining"));
    json_decref(r);
}

/* replay original: the gap between stored times, counted from when the
 * message first came up; the first message and gaps <= 1 ms go at once. */
static void replay_original_waits_the_stored_gap(void **state)
{
    (void)state;
    const int64_t ms = 1000000;
    int64_t at = 0;
    assert_false(srv_consumer_replay_wait(0, 5 * ms, 100 * ms, &at));
    assert_false(srv_consumer_replay_wait(5 * ms, 6 * ms, 100 * ms, &at));
    assert_true(srv_consumer_replay_wait(5 * ms, 405 * ms, 100 * ms, &at));
    assert_int_equal(at, 500 * ms);
    assert_true(srv_consumer_replay_wait(5 * ms, 405 * ms, 499 * ms, &at));
    assert_false(srv_consumer_replay_wait(5 * ms, 405 * ms, 500 * ms, &at));
    assert_int_equal(at, 0);
}

/* rate_limit_bps: push only (10086 on a pull consumer, as nats-server),
 * echoed, and changeable by an update. */
static void rate_limit_is_for_push_consumers_and_echoed(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(parse(f, &f->a,
                           "{\"durable_name\":\"P\","
                           "\"rate_limit_bps\":8000}"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EPULL_RATE_LIMIT);
    assert_string_equal(f->errmsg,
                        "consumer in pull mode can not have rate limit set");
    assert_int_equal(parse(f, &f->a,
                           "{\"deliver_subject\":\"x\","
                           "\"rate_limit_bps\":-1}"),
                     KEEL_EINVAL);
    assert_int_equal(parse(f, &f->a,
                           "{\"deliver_subject\":\"x\","
                           "\"rate_limit_bps\":8000}"),
                     0);
    assert_int_equal(f->a.rate_limit_bps, 8000);
    assert_int_equal(srv_consumer_config_encode(&f->a, &f->j, f->errmsg), 0);
    assert_int_equal(
        json_integer_value(json_object_get(f->j, "rate_limit_bps")), 8000);
    assert_int_equal(parse(f, &f->b,
                           "{\"deliver_subject\":\"x\","
                           "\"rate_limit_bps\":16000}"),
                     0);
    assert_int_equal(
        srv_consumer_config_update_check(&f->a, &f->b, &f->jerr, f->errmsg), 0);
}

/* The bucket: full at first (burst bytes go at once), then bps / 8 bytes
 * a second; a message over the burst goes once the bucket is full. */
static void rate_limit_bucket_fills_at_bps_over_8(void **state)
{
    (void)state;
    const int64_t ms = 1000000;
    struct srv_consumer_rate b = {0};
    /* 8000 bps = 1000 bytes a second, burst 500 bytes. */
    assert_false(srv_consumer_rate_wait(&b, 8000, 500, 300, 0));
    assert_false(srv_consumer_rate_wait(&b, 8000, 500, 200, 0));
    assert_true(srv_consumer_rate_wait(&b, 8000, 500, 100, 0));
    assert_true(srv_consumer_rate_wait(&b, 8000, 500, 100, 99 * ms));
    assert_false(srv_consumer_rate_wait(&b, 8000, 500, 100, 100 * ms));
    /* Refills stop at the burst: after 10 s only 500 bytes go at once. */
    assert_false(srv_consumer_rate_wait(&b, 8000, 500, 500, 10000 * ms));
    assert_true(srv_consumer_rate_wait(&b, 8000, 500, 1, 10000 * ms));
    /* Over the burst: waits for a full bucket, then goes. */
    assert_true(srv_consumer_rate_wait(&b, 8000, 500, 900, 10499 * ms));
    assert_false(srv_consumer_rate_wait(&b, 8000, 500, 900, 10500 * ms));
    assert_true(srv_consumer_rate_wait(&b, 8000, 500, 1, 10500 * ms));
    /* No limit. */
    assert_false(srv_consumer_rate_wait(&b, 0, 500, 1 << 20, 10500 * ms));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            pull_durable_gets_defaults_and_encodes_without_deliver_subject,
            setup, teardown),
        cmocka_unit_test_setup_teardown(
            push_ephemeral_gets_inactive_threshold_and_no_max_waiting, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            every_field_survives_an_encode_parse_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(
            invalid_configs_are_refused_with_a_consumer_config_error, setup,
            teardown),
        cmocka_unit_test_setup_teardown(heartbeat_below_100ms_is_error_10083,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            update_may_change_limits_but_not_the_delivery_position, setup,
            teardown),
        cmocka_unit_test_setup_teardown(filters_match_by_either_form, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            rfc3339_times_parse_with_offsets_and_fractions, setup, teardown),
        cmocka_unit_test_setup_teardown(
            pause_until_round_trips_and_answers_as_2_11, setup, teardown),
        cmocka_unit_test_setup_teardown(replay_original_waits_the_stored_gap,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            rate_limit_is_for_push_consumers_and_echoed, setup, teardown),
        cmocka_unit_test_setup_teardown(rate_limit_bucket_fills_at_bps_over_8,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
