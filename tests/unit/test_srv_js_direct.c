/* srv_js_direct_req: DIRECT.GET requests read as nats-server 2.11 reads
 * them (its 408 status lines), and the seqs a batch or multi_last names in
 * a stream state machine: start_time and up_to_time lookups, the pending
 * count, the last per subject at or before up_to_seq, the 1024 bound. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "keel_stream_entry.h"
#include "srv_js_direct_req.h"
#include "srv_stream_sm.h"
#include "stream_sm_fixture.h"

#define SEC 1000000000LL

static int setup(void **state)
{
    return sm_fixture_setup(state, "S");
}

static void pub(struct sm_fixture *f, int64_t ts, const char *subj)
{
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_PUBLISH,
        .ts_ns = ts,
        .subject = subj,
        .subject_len = strlen(subj),
        .data = (const uint8_t *)"v",
        .data_len = 1,
    };
    sm_fixture_apply(f, &e);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
}

static void del(struct sm_fixture *f, uint64_t seq)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_DELETE, .seq = seq};
    sm_fixture_apply(f, &e);
}

/* The status line a body gets (NULL: accepted). */
static const char *verdict(const char *json, bool keyed)
{
    json_t *j = json != NULL ? json_loads(json, 0, NULL) : NULL;
    struct srv_js_direct_req r;
    const char *why = NULL;
    assert_true(json == NULL || j != NULL);
    int rv = srv_js_direct_parse(j, keyed, &r, &why);
    assert_true((rv == 0) == (why == NULL));
    json_decref(j);
    return why;
}

static void requests_get_nats_server_2_11s_408s(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        bool keyed;
        const char *want;
    } cases[] = {
        {"{\"seq\":1}", false, NULL},
        {"{\"seq\":1,\"batch\":5,\"max_bytes\":100}", false, NULL},
        {"{\"next_by_subj\":\"a.*\",\"batch\":2}", false, NULL},
        {"{\"multi_last\":[\"a.>\"],\"up_to_seq\":4}", false, NULL},
        {"{\"start_time\":\"2026-01-01T00:00:00Z\",\"batch\":2}", false, NULL},
        {NULL, true, NULL},
        {"{\"max_bytes\":10,\"no_hdr\":true}", true, NULL},
        {NULL, false, "408 Empty Request"},
        {"{}", false, "408 Empty Request"},
        {"{\"batch\":3}", false, "408 Empty Request"},
        {"{\"seq\":-1}", false, "408 Malformed Request"},
        {"{\"seq\":\"1\"}", false, "408 Malformed Request"},
        {"{\"multi_last\":\"a\"}", false, "408 Malformed Request"},
        {"{\"multi_last\":[1]}", false, "408 Malformed Request"},
        {"{\"start_time\":\"yesterday\"}", false, "408 Malformed Request"},
        {"[1]", false, "408 Malformed Request"},
        {"{\"seq\":1,\"last_by_subj\":\"a\"}", false, "408 Bad Request"},
        {"{\"last_by_subj\":\"a\",\"batch\":2}", false, "408 Bad Request"},
        {"{\"last_by_subj\":\"a\",\"next_by_subj\":\"a\"}", false,
         "408 Bad Request"},
        {"{\"next_by_subj\":\"a\",\"multi_last\":[\"a\"]}", false,
         "408 Bad Request"},
        {"{\"seq\":2,\"start_time\":\"2026-01-01T00:00:00Z\"}", false,
         "408 Bad Request"},
        {"{\"multi_last\":[\"a\"],\"up_to_seq\":2,"
         "\"up_to_time\":\"2026-01-01T00:00:00Z\"}",
         false, "408 Bad Request"},
        {"{\"seq\":1}", true, "408 Bad Request"},
        {"{\"batch\":2}", true, "408 Bad Request"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = verdict(cases[i].json, cases[i].keyed);
        if (cases[i].want == NULL) {
            assert_null(got);
        } else {
            assert_non_null(got);
            assert_string_equal(got, cases[i].want);
        }
    }
}

static void a_multi_last_filter_list_is_bounded(void **state)
{
    (void)state;
    size_t n = SRV_JS_DIRECT_FILTERS_MAX + 1;
    size_t cap = 32 + n * 6;
    char *json = malloc(cap);
    size_t o = (size_t)snprintf(json, cap, "{\"multi_last\":[");
    for (size_t i = 0; i < n; i++) {
        o += (size_t)snprintf(json + o, cap - o, "%s\"a\"", i ? "," : "");
    }
    snprintf(json + o, cap - o, "]}");
    const char *got = verdict(json, false);
    assert_non_null(got);
    assert_string_equal(got, "408 Malformed Request");
    free(json);
}

/* seqs 1..6 at 10s..60s: a.1 a.2 a.1 b.1 a.2 a.1; seq 4 (b.1) deleted. */
static void fill(struct sm_fixture *f)
{
    static const char *subj[] = {"a.1", "a.2", "a.1", "b.1", "a.2", "a.1"};
    for (size_t i = 0; i < 6; i++) {
        pub(f, (int64_t)(i + 1) * 10 * SEC, subj[i]);
    }
    del(f, 4);
}

static void times_and_pending_counts_skip_deleted_seqs(void **state)
{
    struct sm_fixture *f = *state;
    fill(f);
    const struct srv_stream_sm *sm = &f->sm;
    assert_int_equal(srv_js_direct_seq_at_time(sm, 0), 1);
    assert_int_equal(srv_js_direct_seq_at_time(sm, 10 * SEC), 1);
    assert_int_equal(srv_js_direct_seq_at_time(sm, 11 * SEC), 2);
    assert_int_equal(srv_js_direct_seq_at_time(sm, 35 * SEC), 5);
    assert_int_equal(srv_js_direct_seq_at_time(sm, 60 * SEC), 6);
    assert_int_equal(srv_js_direct_seq_at_time(sm, 61 * SEC), 7);

    assert_int_equal(srv_js_direct_num_pending(sm, 1, NULL), 5);
    assert_int_equal(srv_js_direct_num_pending(sm, 3, NULL), 3);
    assert_int_equal(srv_js_direct_num_pending(sm, 2, "a.1"), 2);
    assert_int_equal(srv_js_direct_num_pending(sm, 1, "a.*"), 5);
    assert_int_equal(srv_js_direct_num_pending(sm, 1, "b.*"), 0);
    assert_int_equal(srv_js_direct_num_pending(sm, 7, NULL), 0);
}

static void multi(struct sm_fixture *f, const char *filters, uint64_t up_to,
                  const uint64_t *want, size_t nwant)
{
    json_t *j = json_loads(filters, 0, NULL);
    uint64_t seqs[SRV_JS_DIRECT_BATCH_MAX];
    size_t n = 0;
    assert_non_null(j);
    assert_int_equal(srv_js_direct_multi_last(&f->sm, j, up_to, seqs, &n), 0);
    json_decref(j);
    assert_int_equal(n, nwant);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(seqs[i], want[i]);
    }
}

static void multi_last_is_the_last_of_each_subject_up_to_a_seq(void **state)
{
    struct sm_fixture *f = *state;
    fill(f);
    multi(f, "[\"a.*\"]", 6, (const uint64_t[]){5, 6}, 2);
    multi(f, "[\"a.*\"]", 4, (const uint64_t[]){2, 3}, 2);
    multi(f, "[\"a.1\"]", 2, (const uint64_t[]){1}, 1);
    multi(f, "[\"a.1\", \"a.>\", \">\"]", 6, (const uint64_t[]){5, 6}, 2);
    multi(f, "[\"b.1\", \"c\", \"bad..subject\"]", 6, NULL, 0);
    multi(f, "[\"a.2\"]", 1, NULL, 0);
    multi(f, "[\">\"]", 1000, (const uint64_t[]){5, 6}, 2);
}

static void multi_last_past_1024_subjects_is_too_many(void **state)
{
    struct sm_fixture *f = *state;
    char subj[32];
    for (int i = 0; i <= SRV_JS_DIRECT_BATCH_MAX; i++) {
        snprintf(subj, sizeof subj, "k.%d", i);
        pub(f, SEC + i, subj);
    }
    json_t *j = json_loads("[\"k.*\"]", 0, NULL);
    uint64_t seqs[SRV_JS_DIRECT_BATCH_MAX];
    size_t n = 0;
    assert_int_equal(
        srv_js_direct_multi_last(&f->sm, j, f->sm.last_seq, seqs, &n),
        KEEL_ELIMIT);
    assert_true(n <= SRV_JS_DIRECT_BATCH_MAX);
    /* One subject fewer fits. */
    del(f, f->sm.last_seq);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->sm.msgs, SRV_JS_DIRECT_BATCH_MAX);
    assert_int_equal(
        srv_js_direct_multi_last(&f->sm, j, f->sm.last_seq, seqs, &n), 0);
    assert_int_equal(n, SRV_JS_DIRECT_BATCH_MAX);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(requests_get_nats_server_2_11s_408s),
        cmocka_unit_test(a_multi_last_filter_list_is_bounded),
        cmocka_unit_test_setup_teardown(
            times_and_pending_counts_skip_deleted_seqs, setup,
            sm_fixture_teardown),
        cmocka_unit_test_setup_teardown(
            multi_last_is_the_last_of_each_subject_up_to_a_seq, setup,
            sm_fixture_teardown),
        cmocka_unit_test_setup_teardown(
            multi_last_past_1024_subjects_is_too_many, setup,
            sm_fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
