/* The NATS wire protocol as a raw socket sees it: +OK, -ERR texts and
 * which errors close the conn, header stripping, UNSUB max, -l logging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define RECV_MS 5000
#define BUF_BYTES 65536

static struct h_keeld server;
static char log_path[512];

struct fixture {
    int a;
    int b;
    char buf[BUF_BYTES];
};

static int group_setup(void **state)
{
    (void)state;
    if (h_keeld_init(&server) != 0) {
        return -1;
    }
    snprintf(log_path, sizeof log_path, "%s/keeld-l.log", server.dir);
    const char *args[] = {"-l", log_path, "-D", NULL};
    return h_keeld_start(&server, 0, false, args);
}

static int group_teardown(void **state)
{
    (void)state;
    int rv = h_keeld_stop(&server, NULL);
    h_keeld_cleanup(&server);
    return rv;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    f->a = -1;
    f->b = -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    if (f->a >= 0) {
        close(f->a);
    }
    if (f->b >= 0) {
        close(f->b);
    }
    free(f);
    return 0;
}

static void say(int fd, const char *s)
{
    assert_int_equal(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

static void expect(struct fixture *f, int fd, const char *want)
{
    if (h_read_until(fd, want, f->buf, sizeof f->buf, RECV_MS) != 0) {
        fail_msg("wanted '%s', got '%s'", want, f->buf);
    }
}

/* Connect, read INFO, send CONNECT with `opts` and a PING, wait PONG. */
static int open_conn(struct fixture *f, const char *opts)
{
    char line[512];
    int fd = h_tcp_connect(server.port);

    assert_true(fd >= 0);
    expect(f, fd, "}\r\n");
    assert_non_null(strstr(f->buf, "\"headers\":true"));
    assert_non_null(strstr(f->buf, "\"version\":\"2.10.24\""));
    snprintf(line, sizeof line, "CONNECT %s\r\nPING\r\n", opts);
    say(fd, line);
    expect(f, fd, "PONG\r\n");
    return fd;
}

static void expect_eof(int fd)
{
    char c;
    assert_int_equal(read(fd, &c, 1), 0);
}

static void verbose_conns_get_ok_for_every_command(void **state)
{
    struct fixture *f = *state;
    f->a = open_conn(f, "{\"verbose\":true}");
    assert_non_null(strstr(f->buf, "+OK\r\nPONG\r\n"));
    say(f->a, "SUB v 1\r\nPUB v 2\r\nhi\r\nUNSUB 1\r\nPING\r\n");
    expect(f, f->a, "PONG\r\n");
    assert_string_equal(f->buf,
                        "+OK\r\nMSG v 1 2\r\nhi\r\n+OK\r\n+OK\r\nPONG\r\n");
}

static void
a_bad_subscription_subject_is_refused_and_the_conn_stays(void **state)
{
    struct fixture *f = *state;
    f->a = open_conn(f, "{}");
    say(f->a, "SUB foo..bar 1\r\nSUB foo.>.x 2\r\nPING\r\n");
    expect(f, f->a, "PONG\r\n");
    assert_string_equal(f->buf, "-ERR 'Invalid Subject'\r\n"
                                "-ERR 'Invalid Subject'\r\nPONG\r\n");
}

static void
pedantic_publish_to_a_wildcard_is_refused_and_the_conn_stays(void **state)
{
    struct fixture *f = *state;
    f->a = open_conn(f, "{\"pedantic\":true}");
    say(f->a, "PUB foo.* 1\r\nx\r\nPING\r\n");
    expect(f, f->a, "PONG\r\n");
    assert_string_equal(f->buf, "-ERR 'Invalid Publish Subject'\r\nPONG\r\n");
}

static void an_unknown_operation_closes_the_conn(void **state)
{
    struct fixture *f = *state;
    f->a = open_conn(f, "{}");
    say(f->a, "FOO bar\r\n");
    expect(f, f->a, "-ERR 'Unknown Protocol Operation'\r\n");
    expect_eof(f->a);
}

static void an_overlong_control_line_closes_the_conn(void **state)
{
    struct fixture *f = *state;
    static char line[5000];
    f->a = open_conn(f, "{}");
    memset(line, 'a', sizeof line - 1);
    memcpy(line, "SUB ", 4);
    say(f->a, line);
    expect(f, f->a, "-ERR 'maximum control line exceeded'\r\n");
    expect_eof(f->a);
}

static void no_responders_without_headers_is_refused(void **state)
{
    struct fixture *f = *state;
    int fd = h_tcp_connect(server.port);
    f->a = fd;
    expect(f, fd, "}\r\n");
    say(fd, "CONNECT {\"no_responders\":true}\r\nPING\r\n");
    expect(f, fd, "-ERR 'no responders requires headers support'\r\n");
    expect_eof(fd);
}

static void headers_are_stripped_for_conns_without_header_support(void **state)
{
    struct fixture *f = *state;
    f->a = open_conn(f, "{\"headers\":false}");
    f->b = open_conn(f, "{\"headers\":true}");
    say(f->a, "SUB h 1\r\nPING\r\n");
    expect(f, f->a, "PONG\r\n");
    say(f->b, "SUB h 9\r\nHPUB h r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n");
    expect(f, f->b, "PONG\r\n");
    assert_string_equal(f->buf,
                        "HMSG h 9 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPONG\r\n");
    say(f->a, "PING\r\n");
    expect(f, f->a, "PONG\r\n");
    assert_string_equal(f->buf, "MSG h 1 r 2\r\nhi\r\nPONG\r\n");
}

static void unsub_with_max_removes_after_that_many_messages(void **state)
{
    struct fixture *f = *state;
    f->a = open_conn(f, "{}");
    f->b = open_conn(f, "{}");
    say(f->a, "SUB m 7\r\nUNSUB 7 2\r\nPING\r\n");
    expect(f, f->a, "PONG\r\n");
    say(f->b, "PUB m 1\r\n1\r\nPUB m 1\r\n2\r\nPUB m 1\r\n3\r\nPING\r\n");
    expect(f, f->b, "PONG\r\n");
    say(f->a, "PING\r\n");
    expect(f, f->a, "PONG\r\n");
    assert_string_equal(f->buf, "MSG m 7 1\r\n1\r\nMSG m 7 1\r\n2\r\nPONG\r\n");
}

static void a_request_to_nobody_gets_a_503_on_the_reply_sub(void **state)
{
    struct fixture *f = *state;
    f->a = open_conn(f, "{\"headers\":true,\"no_responders\":true}");
    say(f->a, "SUB _INBOX.abc.* 3\r\nPUB nobody.home _INBOX.abc.1 0\r\n\r\n"
              "PING\r\n");
    expect(f, f->a, "PONG\r\n");
    assert_string_equal(f->buf, "HMSG _INBOX.abc.1 3 16 16\r\n"
                                "NATS/1.0 503\r\n\r\n\r\nPONG\r\n");
}

static void the_log_file_gets_one_line_per_event(void **state)
{
    (void)state;
    char line[1024];
    bool listening = false;
    FILE *fp = fopen(log_path, "r");

    assert_non_null(fp);
    while (fgets(line, sizeof line, fp) != NULL) {
        /* "<time> <LEVEL> [<component>] message" */
        assert_true(strlen(line) > 28 && line[4] == '-' && line[10] == 'T');
        assert_non_null(strstr(line, " ["));
        listening = listening || strstr(line, "INFO [server]") != NULL;
    }
    fclose(fp);
    assert_true(listening);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(verbose_conns_get_ok_for_every_command),
        T(a_bad_subscription_subject_is_refused_and_the_conn_stays),
        T(pedantic_publish_to_a_wildcard_is_refused_and_the_conn_stays),
        T(an_unknown_operation_closes_the_conn),
        T(an_overlong_control_line_closes_the_conn),
        T(no_responders_without_headers_is_refused),
        T(headers_are_stripped_for_conns_without_header_support),
        T(unsub_with_max_removes_after_that_many_messages),
        T(a_request_to_nobody_gets_a_503_on_the_reply_sub),
        T(the_log_file_gets_one_line_per_event),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
