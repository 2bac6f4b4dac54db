/* srv_parser: commands split at any byte boundary parse identically;
 * pipelining; malformed input, long lines and big payloads are rejected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_parser.h"

#define LOG_BYTES (64 * 1024)
#define MAX_PAYLOAD 1024

struct fixture {
    struct srv_parser p;
    char log[LOG_BYTES]; /* one line per event */
    size_t log_len;
    int events;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    srv_parser_init(&f->p, MAX_PAYLOAD);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_parser_close(&f->p);
    free(f);
    return 0;
}

static void reset(struct fixture *f)
{
    srv_parser_close(&f->p);
    srv_parser_init(&f->p, MAX_PAYLOAD);
    f->log_len = 0;
    f->log[0] = '\0';
    f->events = 0;
}

/* Record every field of a command, so two runs compare exactly. */
static int record_cb(void *ud, const struct srv_cmd *c)
{
    struct fixture *f = ud;
    int n = snprintf(
        f->log + f->log_len, LOG_BYTES - f->log_len,
        "op=%d subj=%.*s reply=%.*s queue=%.*s sid=%.*s json=%.*s max=%llu "
        "hdr=%zu total=%zu payload=%.*s\n",
        (int)c->op, (int)c->subject.len, c->subject.ptr, (int)c->reply.len,
        c->reply.ptr, (int)c->queue.len, c->queue.ptr, (int)c->sid.len,
        c->sid.ptr, (int)c->json.len, c->json.ptr, (unsigned long long)c->max,
        c->hdr_bytes, c->total_bytes,
        c->payload != NULL ? (int)c->total_bytes : 0,
        c->payload != NULL ? c->payload : "");
    assert_true(n > 0);
    f->log_len += (size_t)n;
    f->events++;
    return 0;
}

static const char sample[] = "CONNECT {\"verbose\":false,\"headers\":true}\r\n"
                             "PING\r\n"
                             "SUB foo  5\r\n"
                             "SUB foo.* workers 6\r\n"
                             "pub foo 5\r\nhello\r\n"
                             "PUB foo _INBOX.abc 0\r\n\r\n"
                             "HPUB foo.bar rep 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
                             "PUB\tfoo\t\t3  \r\na\r\n\r\n"
                             "UNSUB 5 \r\n"
                             "UNSUB 6 10\r\n"
                             "PONG\r\n";

static int feed(struct fixture *f, const char *data, size_t len)
{
    return srv_parser_feed(&f->p, data, len, record_cb, f);
}

static void every_command_parses_the_same_split_at_any_byte(void **state)
{
    struct fixture *f = *state;
    size_t len = sizeof sample - 1;
    char whole[LOG_BYTES];

    assert_int_equal(feed(f, sample, len), 0);
    assert_int_equal(f->events, 11);
    memcpy(whole, f->log, f->log_len + 1);
    for (size_t cut = 0; cut <= len; cut++) {
        reset(f);
        assert_int_equal(feed(f, sample, cut), 0);
        assert_int_equal(feed(f, sample + cut, len - cut), 0);
        assert_string_equal(f->log, whole);
    }
    /* Three pieces, every pair of cuts. */
    for (size_t a = 0; a <= len; a += 3) {
        for (size_t b = a; b <= len; b += 5) {
            reset(f);
            assert_int_equal(feed(f, sample, a), 0);
            assert_int_equal(feed(f, sample + a, b - a), 0);
            assert_int_equal(feed(f, sample + b, len - b), 0);
            assert_string_equal(f->log, whole);
        }
    }
}

static void byte_at_a_time_input_gives_the_same_commands(void **state)
{
    struct fixture *f = *state;
    size_t len = sizeof sample - 1;
    char whole[LOG_BYTES];

    assert_int_equal(feed(f, sample, len), 0);
    memcpy(whole, f->log, f->log_len + 1);
    reset(f);
    for (size_t i = 0; i < len; i++) {
        assert_int_equal(feed(f, sample + i, 1), 0);
    }
    assert_string_equal(f->log, whole);
}

static void pipelined_commands_keep_their_fields(void **state)
{
    struct fixture *f = *state;
    const char *in = "SUB a.b q 7\r\nHPUB x r 3 5\r\nK\r\nyz\r\nUNSUB 7 2\r\n";

    assert_int_equal(feed(f, in, strlen(in)), 0);
    assert_string_equal(
        f->log,
        "op=4 subj=a.b reply= queue=q sid=7 json= max=0 hdr=0 total=0 "
        "payload=\n"
        "op=3 subj=x reply=r queue= sid= json= max=0 hdr=3 total=5 "
        "payload=K\r\nyz\n"
        "op=5 subj= reply= queue= sid=7 json= max=2 hdr=0 total=0 payload=\n");
}

static void expect_error(struct fixture *f, const char *in, int want)
{
    size_t len = strlen(in);
    for (size_t cut = 0; cut <= len; cut++) {
        reset(f);
        int rv = feed(f, in, cut);
        if (rv == 0) {
            rv = feed(f, in + cut, len - cut);
        }
        assert_int_equal(rv, want);
        /* A failed parser stays failed. */
        assert_int_equal(feed(f, "PING\r\n", 6), KEEL_EPROTO);
    }
}

static void malformed_commands_are_unknown_protocol_operations(void **state)
{
    struct fixture *f = *state;

    expect_error(f, "FOO bar\r\n", KEEL_EPROTO);
    expect_error(f, "PUB foo\r\n", KEEL_EPROTO);
    expect_error(f, "PUB foo x\r\n", KEEL_EPROTO);
    expect_error(f, "PUB a b c 1\r\nx\r\n", KEEL_EPROTO);
    expect_error(f, "PUB foo 3\r\nabcXY", KEEL_EPROTO);
    expect_error(f, "HPUB foo 5 3\r\nabc\r\n", KEEL_EPROTO);
    expect_error(f, "SUB foo\r\n", KEEL_EPROTO);
    expect_error(f, "UNSUB\r\n", KEEL_EPROTO);
    expect_error(f, "UNSUB 1 x\r\n", KEEL_EPROTO);
    expect_error(f, "PING extra\r\n", KEEL_EPROTO);
    expect_error(f, "PUB foo 99999999999999999999999\r\n", KEEL_EPROTO);
}

static void a_payload_over_max_payload_is_refused(void **state)
{
    struct fixture *f = *state;
    char in[64];

    snprintf(in, sizeof in, "PUB foo %d\r\n", MAX_PAYLOAD + 1);
    expect_error(f, in, KEEL_ELIMIT);
    snprintf(in, sizeof in, "HPUB foo 2 %d\r\n", MAX_PAYLOAD + 1);
    expect_error(f, in, KEEL_ELIMIT);
}

static void a_control_line_over_the_maximum_is_refused(void **state)
{
    struct fixture *f = *state;
    size_t n = SRV_CONTROL_LINE_BYTES_MAX + 10;
    char *in = malloc(n + 3);

    assert_non_null(in);
    memcpy(in, "SUB ", 4);
    memset(in + 4, 'a', n - 4);
    memcpy(in + n, "\r\n", 3);
    expect_error(f, in, KEEL_ETOOBIG);
    /* Without a newline the parser refuses once the limit is passed. */
    reset(f);
    assert_int_equal(feed(f, in, n), KEEL_ETOOBIG);
    free(in);
}

static void a_control_line_at_the_maximum_is_accepted(void **state)
{
    struct fixture *f = *state;
    size_t n = SRV_CONTROL_LINE_BYTES_MAX;
    char *in = malloc(n + 3);

    assert_non_null(in);
    memcpy(in, "SUB ", 4);
    memset(in + 4, 'a', n - 6);
    memcpy(in + n - 2, " 1\r\n", 5);
    assert_int_equal(feed(f, in, n + 2), 0);
    assert_int_equal(f->events, 1);
    free(in);
}

static int stop_cb(void *ud, const struct srv_cmd *c)
{
    struct fixture *f = ud;
    (void)c;
    f->events++;
    return KEEL_ESHUTDOWN;
}

static void a_callback_error_stops_parsing(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(srv_parser_feed(&f->p, "PING\r\nPING\r\n", 12, stop_cb, f),
                     KEEL_ESHUTDOWN);
    assert_int_equal(f->events, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            every_command_parses_the_same_split_at_any_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(
            byte_at_a_time_input_gives_the_same_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(pipelined_commands_keep_their_fields,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            malformed_commands_are_unknown_protocol_operations, setup,
            teardown),
        cmocka_unit_test_setup_teardown(a_payload_over_max_payload_is_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_control_line_over_the_maximum_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_control_line_at_the_maximum_is_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(a_callback_error_stops_parsing, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
