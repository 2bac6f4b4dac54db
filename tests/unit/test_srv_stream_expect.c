/* srv_stream_sm: NATS/1.0 header lookup and publish expectations (§2.5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_stream_sm.h"

struct fixture {
    struct srv_stream_expect_state st;
    enum srv_js_err jerr;
    char detail[SRV_JS_ERR_DESC_BYTES_MAX];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    f->st.stream = "ORDERS";
    f->st.last_seq = 41;
    f->st.subject_last_seq = 17;
    f->st.last_msg_id = "m-41";
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static void header_lookup_is_case_insensitive_and_trims(void **state)
{
    (void)state;
    const char *h = "NATS/1.0\r\nA: 1\r\nnats-msg-id:  x y \r\n\r\n";
    const char *v = NULL;
    size_t vl = 0;
    assert_int_equal(srv_nats_hdr_get(h, strlen(h), "Nats-Msg-Id", &v, &vl), 0);
    assert_int_equal(vl, 3);
    assert_memory_equal(v, "x y", 3);
    assert_int_equal(srv_nats_hdr_get(h, strlen(h), "B", &v, &vl), KEEL_ENOENT);
    const char *bad[] = {"HTTP/1.0\r\n\r\n", "NATS/1.0\r\nnocolon\r\n\r\n",
                         "NATS/1.0\r\nA: 1"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(srv_nats_hdr_get(bad[i], strlen(bad[i]), "A", &v, &vl),
                         KEEL_EINVAL);
    }
}

static int expect(struct fixture *f, const char *h)
{
    return srv_stream_check_expect(&f->st, h, h != NULL ? strlen(h) : 0,
                                   &f->jerr, f->detail);
}

static void matching_expectations_pass(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(expect(f, NULL), 0);
    assert_int_equal(expect(f, "NATS/1.0\r\nNats-Expected-Stream: ORDERS\r\n"
                               "Nats-Expected-Last-Sequence: 41\r\n"
                               "Nats-Expected-Last-Subject-Sequence: 17\r\n"
                               "Nats-Expected-Last-Msg-Id: m-41\r\n\r\n"),
                     0);
    assert_int_equal(f->jerr, SRV_JS_OK);
}

static void each_failed_expectation_has_its_error_and_detail(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(expect(f, "NATS/1.0\r\nNats-Expected-Stream: X\r\n\r\n"),
                     KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EEXPECTED_STREAM);
    assert_int_equal(
        expect(f, "NATS/1.0\r\nNats-Expected-Last-Sequence: 40\r\n\r\n"),
        KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EWRONG_LAST_SEQ);
    assert_string_equal(f->detail, "41");
    assert_int_equal(
        expect(f, "NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: 0\r\n\r\n"),
        KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EWRONG_LAST_SEQ);
    assert_string_equal(f->detail, "17");
    assert_int_equal(
        expect(f, "NATS/1.0\r\nNats-Expected-Last-Msg-Id: m-40\r\n\r\n"),
        KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EWRONG_LAST_MSG_ID);
    assert_string_equal(f->detail, "m-41");
    assert_int_equal(
        expect(f, "NATS/1.0\r\nNats-Expected-Last-Sequence: x1\r\n\r\n"),
        KEEL_EINVAL);
    assert_int_equal(f->jerr, SRV_JS_EBAD_REQUEST);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(header_lookup_is_case_insensitive_and_trims),
        T(matching_expectations_pass),
        T(each_failed_expectation_has_its_error_and_detail),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
