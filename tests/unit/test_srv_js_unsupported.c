/* srv_js_unsupported: stream and consumer config fields and publish
 * headers keeld does not implement are refused when set, and accepted at
 * the defaults nats-server treats as unset, including what libnats 3.4 and
 * nats.js 2.29 send by default. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_unsupported.h"

struct fixture {
    json_t *j;
    enum srv_js_err jerr;
    char errmsg[KEEL_ERRMSG_MAX];
    struct srv_stream_config cfg;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    json_decref(f->j);
    free(f);
    return 0;
}

static int stream(struct fixture *f, const char *text)
{
    json_decref(f->j);
    f->j = json_loads(text, 0, NULL);
    assert_non_null(f->j);
    f->errmsg[0] = '\0';
    return srv_stream_request_check(f->j, &f->jerr, f->errmsg);
}

static int consumer(struct fixture *f, const char *text)
{
    json_decref(f->j);
    f->j = json_loads(text, 0, NULL);
    assert_non_null(f->j);
    f->errmsg[0] = '\0';
    return srv_consumer_request_check(f->j, &f->jerr, f->errmsg);
}

static void stream_defaults_and_client_bodies_are_accepted(void **state)
{
    struct fixture *f = *state;
    /* nats.js 2.29 kv create, libnats-style zero values, object store. */
    const char *ok[] = {
        "{\"name\":\"KV_B\",\"retention\":\"limits\","
        "\"max_msgs_per_subject\":5,\"max_bytes\":-1,\"max_msg_size\":-1,"
        "\"storage\":\"file\",\"subjects\":[\"$KV.B.>\"],\"discard\":\"new\","
        "\"allow_direct\":true,\"num_replicas\":1,\"allow_rollup_hdrs\":true}",
        "{\"name\":\"S\",\"first_seq\":0,\"sources\":[],\"mirror\":null,"
        "\"mirror_direct\":false,\"discard_new_per_subject\":false,"
        "\"template_owner\":\"\",\"allow_msg_ttl\":false,"
        "\"subject_delete_marker_ttl\":0,\"compression\":\"none\","
        "\"consumer_limits\":{},\"placement\":{\"cluster\":\"\",\"tags\":[]},"
        "\"metadata\":{\"k\":\"v\"}}",
        "{\"name\":\"S\",\"compression\":\"s2\",\"consumer_limits\":"
        "{\"inactive_threshold\":0,\"max_ack_pending\":0}}",
        /* Implemented (srv_js_config_xform.c): checked by the config. */
        "{\"name\":\"S\",\"republish\":{\"src\":\">\",\"dest\":\"x.>\"},"
        "\"subject_transform\":{\"src\":\"a\",\"dest\":\"b\"}}",
        /* Implemented (srv_js_config_mirror.c): checked by the config,
         * also mirror with sources (10031) and mirror_direct without a
         * mirror (10052, nats-server's text). */
        "{\"name\":\"S\",\"mirror\":{\"name\":\"O\",\"external\":null,"
        "\"subject_transforms\":[]}}",
        "{\"name\":\"S\",\"mirror\":{\"name\":\"O\"},\"sources\":"
        "[{\"name\":\"P\"}]}",
        "{\"name\":\"S\",\"mirror_direct\":true}",
        "{\"name\":\"S\",\"mirror\":{\"name\":\"O\"},"
        "\"mirror_direct\":true}",
        "{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"external\":null,"
        "\"subject_transforms\":[]}]}",
        /* Implemented: checked by the config (srv_js_config_mirror.c). */
        "{\"name\":\"S\",\"mirror\":{\"name\":\"O\",\"subject_transforms\":"
        "[{\"src\":\">\",\"dest\":\"x.>\"}]}}",
        "{\"name\":\"S\",\"sources\":[{\"name\":\"O\",\"subject_transforms\":"
        "[{\"src\":\">\",\"dest\":\"x.>\"}]}]}",
        /* Implemented (srv_js_config_ttl.c): checked by the config. */
        "{\"name\":\"S\",\"allow_msg_ttl\":true,"
        "\"subject_delete_marker_ttl\":1000000000}",
        /* external (docs/decisions/0039-external-origins-through-the-api.md) */
        "{\"name\":\"S\",\"sources\":[{\"name\":\"O\"},{\"name\":\"P\","
        "\"external\":{\"api\":\"$JS.hub.API\"}}]}",
        "{\"name\":\"S\",\"mirror\":{\"name\":\"O\",\"external\":"
        "{\"api\":\"$JS.hub.API\"}}}",
        /* libnats 3.4 js_AddStream with jsStreamConfig_Init defaults. */
        "{\"name\":\"S1\",\"subjects\":[\"s1\"],\"retention\":\"limits\","
        "\"max_consumers\":-1,\"max_msgs\":-1,\"max_bytes\":-1,\"max_age\":0,"
        "\"max_msg_size\":-1,\"max_msgs_per_subject\":0,\"discard\":\"old\","
        "\"storage\":\"file\",\"num_replicas\":1}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(stream(f, ok[i]), 0);
        assert_int_equal(f->jerr, SRV_JS_OK);
    }
}

static void stream_fields_keeld_does_not_implement_are_refused(void **state)
{
    struct fixture *f = *state;
    const struct {
        const char *body;
        const char *field;
    } bad[] = {
        {"{\"name\":\"S\",\"template_owner\":\"T\"}", "template_owner"},
        {"{\"name\":\"S\",\"allow_msg_counter\":true}", "allow_msg_counter"},
        {"{\"name\":\"S\",\"allow_atomic\":true}", "allow_atomic"},
        {"{\"name\":\"S\",\"allow_msg_schedules\":true}",
         "allow_msg_schedules"},
        {"{\"name\":\"S\",\"consumer_limits\":{\"max_ack_pending\":5}}",
         "consumer_limits"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(stream(f, bad[i].body), KEEL_EINVAL);
        assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
        assert_non_null(strstr(f->errmsg, bad[i].field));
        assert_non_null(strstr(f->errmsg, "not supported by keeld"));
    }
}

static void placement_tags_are_read_and_bad_ones_refused(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(
        stream(f,
               "{\"name\":\"S\",\"placement\":{\"tags\":[\"ssd\",\"AZ:1\"]}}"),
        0);
    assert_int_equal(stream(f, "{\"name\":\"S\",\"placement\":{\"tags\":[1]}}"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    assert_non_null(strstr(f->errmsg, "placement tags: each tag is a string"));
    char many[1024] = "{\"name\":\"S\",\"placement\":{\"tags\":[";
    for (int i = 0; i <= SRV_TAGS_MAX; i++) {
        snprintf(many + strlen(many), sizeof many - strlen(many), "%s\"t%d\"",
                 i > 0 ? "," : "", i);
    }
    strcat(many, "]}}");
    assert_int_equal(stream(f, many), KEEL_EINVAL);
    assert_non_null(strstr(f->errmsg, "at most 16 tags"));
}

static void a_max_age_under_100ms_is_refused_as_nats_server_does(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(stream(f, "{\"name\":\"S\",\"max_age\":99999999}"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ESTREAM_CONFIG);
    assert_string_equal(f->errmsg, "max age needs to be >= 100ms");
    assert_int_equal(stream(f, "{\"name\":\"S\",\"max_age\":100000000}"), 0);
    assert_int_equal(stream(f, "{\"name\":\"S\",\"max_age\":0}"), 0);
}

static void consumer_defaults_and_client_bodies_are_accepted(void **state)
{
    struct fixture *f = *state;
    const char *ok[] = {
        /* nats.js 2.29 kv watch and ordered consumer. */
        "{\"deliver_policy\":\"last_per_subject\",\"ack_policy\":\"none\","
        "\"ack_wait\":79200000000000,\"replay_policy\":\"instant\","
        "\"flow_control\":true,\"idle_heartbeat\":5000000000,"
        "\"headers_only\":false,\"max_deliver\":1,\"mem_storage\":true,"
        "\"num_replicas\":1}",
        /* libnats 3.4 ordered push subscription. */
        "{\"deliver_policy\":\"all\",\"deliver_subject\":\"_INBOX.X\","
        "\"ack_policy\":\"none\",\"ack_wait\":86400000000000,"
        "\"max_deliver\":1,\"filter_subject\":\"s1\","
        "\"replay_policy\":\"instant\",\"flow_control\":true,"
        "\"idle_heartbeat\":5000000000,\"num_replicas\":1,"
        "\"mem_storage\":true}",
        "{\"rate_limit_bps\":0,\"sample_freq\":\"\",\"direct\":false,"
        "\"priority_groups\":[],\"priority_policy\":\"none\","
        "\"priority_timeout\":0,\"pause_until\":\"0001-01-01T00:00:00Z\"}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(consumer(f, ok[i]), 0);
    }
}

static void consumer_fields_keeld_does_not_implement_are_refused(void **state)
{
    struct fixture *f = *state;
    const struct {
        const char *body;
        const char *field;
    } bad[] = {
        {"{\"sample_freq\":\"100%\"}", "sample_freq"},
        {"{\"direct\":true}", "direct"},
        {"{\"priority_groups\":[\"g\"]}", "priority_groups"},
        {"{\"priority_policy\":\"overflow\"}", "priority_policy"},
        {"{\"priority_timeout\":5000000000}", "priority_timeout"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(consumer(f, bad[i].body), KEEL_EINVAL);
        assert_int_equal(f->jerr, SRV_JS_ECONSUMER_CONFIG);
        assert_non_null(strstr(f->errmsg, bad[i].field));
    }
}

static int headers(struct fixture *f, const char *hdr)
{
    return srv_js_publish_headers_check(&f->cfg, hdr, strlen(hdr), &f->jerr,
                                        f->errmsg);
}

static void publish_headers_keeld_does_not_implement_are_refused(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(headers(f, "NATS/1.0\r\nNats-Msg-Id: 1\r\n"
                                "Nats-Expected-Last-Sequence: 3\r\n\r\n"),
                     0);
    assert_int_equal(headers(f, "NATS/1.0\r\nNats-TTL: 5s\r\n\r\n"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ETTL_DISABLED);
    assert_int_equal(headers(f, "NATS/1.0\r\nNats-Incr: 1\r\n\r\n"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EINCR_DISABLED);
    assert_int_equal(headers(f, "NATS/1.0\r\nNats-Batch-Id: b\r\n\r\n"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EHEADER_UNSUPPORTED);
    assert_non_null(strstr(f->errmsg, "Nats-Batch-Id"));
}

/* nats-server 2.11's clustered check: without allow_msg_ttl every TTL
 * (an invalid one too) is 10166; with it an invalid one is 10165. */
static void nats_ttl_needs_allow_msg_ttl_and_a_valid_value(void **state)
{
    struct fixture *f = *state;
    const char *bad = "NATS/1.0\r\nNats-TTL: 500ms\r\n\r\n";
    const char *good[] = {"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n",
                          "NATS/1.0\r\nNats-TTL: 60\r\n\r\n",
                          "NATS/1.0\r\nNats-TTL: never\r\n\r\n"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(headers(f, good[i]), KEEL_EINVAL);
        assert_int_equal(f->jerr, SRV_JS_ETTL_DISABLED);
    }
    assert_int_equal(headers(f, bad), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ETTL_DISABLED);
    f->cfg.allow_msg_ttl = true;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(headers(f, good[i]), 0);
    }
    assert_int_equal(headers(f, bad), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ETTL_INVALID);
    assert_int_equal(headers(f, "NATS/1.0\r\nNats-TTL: -5\r\n\r\n"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_ETTL_INVALID);
}

static void rollup_needs_allow_rollup_hdrs_and_a_valid_value(void **state)
{
    struct fixture *f = *state;
    const char *sub = "NATS/1.0\r\nNats-Rollup: sub\r\n\r\n";
    assert_int_equal(headers(f, sub), KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EROLLUP);
    assert_string_equal(f->errmsg, "rollup not permitted");
    f->cfg.allow_rollup_hdrs = true;
    assert_int_equal(headers(f, sub), 0);
    assert_int_equal(headers(f, "NATS/1.0\r\nNats-Rollup: all\r\n\r\n"), 0);
    assert_int_equal(headers(f, "NATS/1.0\r\nNats-Rollup: most\r\n\r\n"),
                     KEEL_EINVAL);
    assert_non_null(strstr(f->errmsg, "rollup value invalid: most"));
    f->cfg.deny_purge = true;
    assert_int_equal(headers(f, sub), KEEL_EINVAL);
    assert_string_equal(f->errmsg, "rollup not permitted");
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(stream_defaults_and_client_bodies_are_accepted),
        T(stream_fields_keeld_does_not_implement_are_refused),
        T(a_max_age_under_100ms_is_refused_as_nats_server_does),
        T(placement_tags_are_read_and_bad_ones_refused),
        T(consumer_defaults_and_client_bodies_are_accepted),
        T(consumer_fields_keeld_does_not_implement_are_refused),
        T(publish_headers_keeld_does_not_implement_are_refused),
        T(nats_ttl_needs_allow_msg_ttl_and_a_valid_value),
        T(rollup_needs_allow_rollup_hdrs_and_a_valid_value),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
