/* srv_js_fwd_classify: which node answers each JetStream subject (DESIGN
 * §6): the meta leader for INFO and stream create/update/delete/names/
 * list, the stream leader for everything naming one stream (stream info,
 * purge, messages, direct get, step-down, every consumer request, acks,
 * flow control); anything else is answered where it arrives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/limits.h"
#include "srv_js_forward.h"

struct fixture {
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    memset(f->stream, 'x', sizeof f->stream - 1);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static enum srv_js_fwd_target classify(struct fixture *f, const char *subject)
{
    return srv_js_fwd_classify(subject, strlen(subject), f->stream);
}

static void stream_and_account_requests_go_to_the_meta_leader(void **state)
{
    struct fixture *f = *state;
    static const char *const meta[] = {
        "$JS.API.INFO",
        "$JS.API.STREAM.CREATE.ORD",
        "$JS.API.STREAM.UPDATE.ORD",
        "$JS.API.STREAM.DELETE.ORD",
        "$JS.API.STREAM.NAMES",
        "$JS.API.STREAM.LIST",
        "$JS.API.META.LEADER.STEPDOWN",
    };
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        assert_int_equal(classify(f, meta[i]), SRV_JS_FWD_META);
    }
}

static void
requests_about_one_stream_go_to_its_leader_with_its_name(void **state)
{
    struct fixture *f = *state;
    static const char *const per_stream[] = {
        "$JS.API.STREAM.INFO.ORD",
        "$JS.API.STREAM.PURGE.ORD",
        "$JS.API.STREAM.MSG.GET.ORD",
        "$JS.API.STREAM.MSG.DELETE.ORD",
        "$JS.API.STREAM.LEADER.STEPDOWN.ORD",
        "$JS.API.DIRECT.GET.ORD",
        "$JS.API.DIRECT.GET.ORD.ord.a",
        "$JS.API.CONSUMER.CREATE.ORD",
        "$JS.API.CONSUMER.CREATE.ORD.C1.ord.>",
        "$JS.API.CONSUMER.DURABLE.CREATE.ORD.C1",
        "$JS.API.CONSUMER.INFO.ORD.C1",
        "$JS.API.CONSUMER.DELETE.ORD.C1",
        "$JS.API.CONSUMER.NAMES.ORD",
        "$JS.API.CONSUMER.LIST.ORD",
        "$JS.API.CONSUMER.MSG.NEXT.ORD.C1",
        "$JS.API.CONSUMER.LEADER.STEPDOWN.ORD.C1",
        "$JS.ACK.ORD.C1.1.5.5.1700000000000000000.0",
        "$JS.FC.ORD.C1.ab12",
    };
    for (size_t i = 0; i < sizeof per_stream / sizeof per_stream[0]; i++) {
        memset(f->stream, 0, sizeof f->stream);
        assert_int_equal(classify(f, per_stream[i]), SRV_JS_FWD_STREAM);
        assert_string_equal(f->stream, "ORD");
    }
}

static void other_subjects_are_answered_where_they_arrive(void **state)
{
    struct fixture *f = *state;
    static const char *const here[] = {
        "orders.new",
        "$JS",
        "$JS.API",
        "$JS.API.INFOX",
        "$JS.API.STREAM.NAMESX",
        "$JS.API.UNKNOWN.ORD",
        "$JS.EVENT.ADVISORY.X",
        "$JS.API.STREAM.INFO.", /* no stream name */
        "$JS.ACK..C1.1",        /* empty stream token */
    };
    for (size_t i = 0; i < sizeof here / sizeof here[0]; i++) {
        assert_int_equal(classify(f, here[i]), SRV_JS_FWD_HERE);
    }
}

static void a_stream_name_longer_than_the_limit_is_answered_here(void **state)
{
    struct fixture *f = *state;
    char subj[64 + SRV_JS_NAME_BYTES_MAX + 2];
    int n = snprintf(subj, sizeof subj, "$JS.API.STREAM.INFO.");
    memset(subj + n, 'S', SRV_JS_NAME_BYTES_MAX + 1);
    subj[n + SRV_JS_NAME_BYTES_MAX + 1] = '\0';
    assert_int_equal(classify(f, subj), SRV_JS_FWD_HERE);
    subj[n + SRV_JS_NAME_BYTES_MAX] = '\0'; /* exactly the limit */
    assert_int_equal(classify(f, subj), SRV_JS_FWD_STREAM);
    assert_int_equal(strlen(f->stream), SRV_JS_NAME_BYTES_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            stream_and_account_requests_go_to_the_meta_leader, setup, teardown),
        cmocka_unit_test_setup_teardown(
            requests_about_one_stream_go_to_its_leader_with_its_name, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            other_subjects_are_answered_where_they_arrive, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_stream_name_longer_than_the_limit_is_answered_here, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
