/* srv_js_fwd_classify: which node answers each JetStream subject
 * (docs/design.md §6): the meta leader for INFO and stream
 * create/update/delete/names/ list, the stream leader for everything naming one
 * stream (stream info, purge, messages, direct get, step-down, every consumer
 * request, acks, flow control); anything else is answered where it arrives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/limits.h"
#include "srv_js_forward.h"
#include "srv_js_table.h"

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

/* A subject of each entry's own shape (the prefix plus a name token when
 * it takes one) finds that entry: no entry is shadowed by an earlier
 * one, so the table is the whole story. */
static void every_api_table_entry_is_reachable(void **state)
{
    (void)state;
    char subj[128];
    assert_true(srv_js_api_table_len > 0);
    for (size_t i = 0; i < srv_js_api_table_len; i++) {
        const struct srv_js_api_entry *e = &srv_js_api_table[i];
        assert_int_equal(strlen(e->subject), e->len);
        assert_non_null(e->fn);
        snprintf(subj, sizeof subj, "%s%s", e->subject,
                 e->match == SRV_JS_MATCH_EXACT ? "" : "ORD");
        const struct srv_js_api_entry *got =
            srv_js_api_lookup(subj, strlen(subj));
        if (got != e) {
            fail_msg("%s finds entry %s, not its own", subj,
                     got != NULL ? got->subject : "(none)");
        }
    }
}

/* A publish to an ordinary subject is looked up no further than its first
 * byte; a $ subject no entry names reaches no handler either. */
static void ordinary_subjects_match_no_entry(void **state)
{
    (void)state;
    static const char *const none[] = {
        "orders.new",
        "",
        "$JS.API",
        "$JS.ACK",
        "$JS.FC.",
        "$KEEL.API.OTHER",
        "$JS.EVENT.ADVISORY.X",
        "$KEEL.API.ORPHANS.RM.",
        "$KEEL.API.CLUSTER.STATUSX",
    };
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        assert_null(srv_js_api_lookup(none[i], strlen(none[i])));
    }
    /* Unknown $JS.API requests still get their error answer, here. */
    const struct srv_js_api_entry *e =
        srv_js_api_lookup("$JS.API.UNKNOWN", strlen("$JS.API.UNKNOWN"));
    assert_non_null(e);
    assert_string_equal(e->subject, "$JS.API.");
    assert_int_equal(e->route, SRV_JS_FWD_HERE);
    assert_true((e->flags & SRV_JS_API_READY) != 0);
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
        cmocka_unit_test(every_api_table_entry_is_reachable),
        cmocka_unit_test(ordinary_subjects_match_no_entry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
