/* srv_consumer_sm: $JS.ACK v1 reply subjects and ack bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_consumer_sm.h"

struct fixture {
    struct srv_ack_reply r;
    struct srv_ack_body b;
    char buf[SRV_ACK_REPLY_BYTES_MAX];
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

static void ack_reply_is_built_in_the_v1_form_and_parses_back(void **state)
{
    struct fixture *f = *state;
    struct srv_ack_reply in = {.stream = "ORDERS",
                               .consumer = "C1",
                               .delivered = 1,
                               .stream_seq = 42,
                               .consumer_seq = 5,
                               .ts_ns = 1717000000000000000LL,
                               .pending = 7};
    size_t n = 0;
    assert_int_equal(
        srv_ack_reply_build(&in, f->buf, sizeof f->buf, &n, f->errmsg), 0);
    assert_string_equal(f->buf,
                        "$JS.ACK.ORDERS.C1.1.42.5.1717000000000000000.7");
    assert_int_equal(n, strlen(f->buf));
    assert_int_equal(srv_ack_reply_parse(f->buf, n, &f->r, f->errmsg), 0);
    assert_memory_equal(&f->r, &in, sizeof in);
}

static void malformed_ack_subjects_are_refused(void **state)
{
    struct fixture *f = *state;
    const char *bad[] = {
        "$JS.ACK.S.C.1.2.3.4",
        "$JS.ACK.S.C.1.2.3.4.5.6",
        "$JS.ACK.S.C.0.2.3.4.5",
        "$JS.ACK.S.C.1.-2.3.4.5",
        "$JS.ACK.S.C.1.2.3.4.5x",
        "$JS.NAK.S.C.1.2.3.4.5",
        "$JS.ACK.S..1.2.3.4.5",
        "$JS.ACK.S.C.1.2.3.99999999999999999999.5",
        "$JS.ACK.S.C.1.2.3.18446744073709551616.5",
        "$JS.ACK._.hash.S.C.1.2.3.4.5.rnd",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(
            srv_ack_reply_parse(bad[i], strlen(bad[i]), &f->r, f->errmsg),
            KEEL_EINVAL);
    }
}

static int body(struct fixture *f, const char *s)
{
    return srv_ack_body_parse(s, strlen(s), &f->b, f->errmsg);
}

static void ack_bodies_parse_to_their_kinds(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(body(f, ""), 0);
    assert_int_equal(f->b.kind, SRV_ACK_ACK);
    assert_int_equal(body(f, "+ACK"), 0);
    assert_int_equal(f->b.kind, SRV_ACK_ACK);
    assert_int_equal(body(f, "+WPI"), 0);
    assert_int_equal(f->b.kind, SRV_ACK_WPI);
    assert_int_equal(body(f, "+TERM too old"), 0);
    assert_int_equal(f->b.kind, SRV_ACK_TERM);
    assert_int_equal(f->b.arg_len, 7);
    assert_memory_equal(f->b.arg, "too old", 7);
    assert_int_equal(body(f, "+NXT {\"batch\":2}"), 0);
    assert_int_equal(f->b.kind, SRV_ACK_NXT);
    assert_int_equal(f->b.arg_len, 11);
}

static void nak_delay_is_read_from_json_or_a_duration(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(body(f, "-NAK"), 0);
    assert_int_equal(f->b.kind, SRV_ACK_NAK);
    assert_int_equal(f->b.delay_ns, 0);
    assert_int_equal(body(f, "-NAK {\"delay\":2500000000}"), 0);
    assert_int_equal(f->b.delay_ns, 2500000000LL);
    assert_int_equal(body(f, "-NAK 5s"), 0);
    assert_int_equal(f->b.delay_ns, 5000000000LL);
    assert_int_equal(body(f, "-NAK 250ms"), 0);
    assert_int_equal(f->b.delay_ns, 250000000LL);
    assert_int_equal(body(f, "-NAK 5parsecs"), KEEL_EINVAL);
    assert_int_equal(body(f, "-NAK {\"delay\":-1}"), KEEL_EINVAL);
    assert_int_equal(body(f, "+ACKX"), KEEL_EINVAL);
    assert_int_equal(body(f, "OK"), KEEL_EINVAL);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(ack_reply_is_built_in_the_v1_form_and_parses_back),
        T(malformed_ack_subjects_are_refused),
        T(ack_bodies_parse_to_their_kinds),
        T(nak_delay_is_read_from_json_or_a_duration),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
