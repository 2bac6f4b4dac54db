/* Core pub/sub through a real keeld with the real libnats client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define RECV_MS 5000

struct fixture {
    struct h_keeld k;
    natsConnection *pub;
    natsConnection *sub;
};

static struct h_keeld server; /* one keeld for the whole file */

static int group_setup(void **state)
{
    (void)state;
    if (h_keeld_init(&server) != 0 ||
        h_keeld_start(&server, 0, false, NULL) != 0) {
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    int rv = h_keeld_stop(&server, NULL);
    h_keeld_cleanup(&server);
    nats_Close();
    return rv;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || natsConnection_ConnectTo(&f->pub, server.url) != NATS_OK ||
        natsConnection_ConnectTo(&f->sub, server.url) != NATS_OK) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    natsConnection_Destroy(f->pub);
    natsConnection_Destroy(f->sub);
    free(f);
    return 0;
}

static void expect_msg(natsSubscription *s, const char *subject,
                       const char *data)
{
    natsMsg *m = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, s, RECV_MS), NATS_OK);
    assert_string_equal(natsMsg_GetSubject(m), subject);
    assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(data));
    assert_memory_equal(natsMsg_GetData(m), data, strlen(data));
    natsMsg_Destroy(m);
}

static void expect_none(natsSubscription *s)
{
    natsMsg *m = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, s, 100), NATS_TIMEOUT);
}

static void a_subscriber_receives_what_is_published(void **state)
{
    struct fixture *f = *state;
    natsSubscription *s = NULL;

    assert_int_equal(natsConnection_SubscribeSync(&s, f->sub, "greet"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->sub), NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->pub, "greet", "hello"),
                     NATS_OK);
    expect_msg(s, "greet", "hello");
    natsSubscription_Destroy(s);
}

static void wildcards_match_one_token_and_the_tail(void **state)
{
    struct fixture *f = *state;
    natsSubscription *star = NULL;
    natsSubscription *tail = NULL;

    assert_int_equal(natsConnection_SubscribeSync(&star, f->sub, "w.*"),
                     NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&tail, f->sub, "w.>"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->sub), NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->pub, "w.a", "1"), NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->pub, "w.a.b", "2"),
                     NATS_OK);
    assert_int_equal(natsConnection_PublishString(f->pub, "w", "3"), NATS_OK);
    expect_msg(star, "w.a", "1");
    expect_none(star);
    expect_msg(tail, "w.a", "1");
    expect_msg(tail, "w.a.b", "2");
    expect_none(tail);
    natsSubscription_Destroy(star);
    natsSubscription_Destroy(tail);
}

#define QMEMBERS 3
#define QMSGS 300

static void a_queue_group_spreads_messages_and_plain_subs_get_all(void **state)
{
    struct fixture *f = *state;
    natsConnection *nc[QMEMBERS];
    natsSubscription *q[QMEMBERS];
    natsSubscription *plain = NULL;
    int total = 0;

    for (int i = 0; i < QMEMBERS; i++) {
        assert_int_equal(natsConnection_ConnectTo(&nc[i], server.url), NATS_OK);
        assert_int_equal(
            natsConnection_QueueSubscribeSync(&q[i], nc[i], "work", "workers"),
            NATS_OK);
        assert_int_equal(natsConnection_Flush(nc[i]), NATS_OK);
    }
    assert_int_equal(natsConnection_SubscribeSync(&plain, f->sub, "work"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->sub), NATS_OK);
    for (int i = 0; i < QMSGS; i++) {
        assert_int_equal(natsConnection_PublishString(f->pub, "work", "job"),
                         NATS_OK);
    }
    assert_int_equal(natsConnection_Flush(f->pub), NATS_OK);
    for (int i = 0; i < QMSGS; i++) {
        expect_msg(plain, "work", "job");
    }
    for (int i = 0; i < QMEMBERS; i++) {
        int got = 0;
        natsMsg *m = NULL;
        while (natsSubscription_NextMsg(&m, q[i], 200) == NATS_OK) {
            natsMsg_Destroy(m);
            got++;
        }
        /* Each member takes a share; none gets everything. */
        assert_true(got > 0);
        assert_true(got < QMSGS);
        total += got;
        natsSubscription_Destroy(q[i]);
        natsConnection_Destroy(nc[i]);
    }
    assert_int_equal(total, QMSGS);
    natsSubscription_Destroy(plain);
}

static void responder_cb(natsConnection *nc, natsSubscription *s, natsMsg *m,
                         void *closure)
{
    (void)s;
    (void)closure;
    char reply[64];
    snprintf(reply, sizeof reply, "re:%.*s", natsMsg_GetDataLength(m),
             natsMsg_GetData(m));
    natsConnection_PublishString(nc, natsMsg_GetReply(m), reply);
    natsMsg_Destroy(m);
}

static void a_request_gets_the_responders_reply(void **state)
{
    struct fixture *f = *state;
    natsSubscription *s = NULL;
    natsMsg *reply = NULL;

    assert_int_equal(
        natsConnection_Subscribe(&s, f->sub, "svc.echo", responder_cb, NULL),
        NATS_OK);
    assert_int_equal(natsConnection_Flush(f->sub), NATS_OK);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(natsConnection_RequestString(
                             &reply, f->pub, "svc.echo", "ping", RECV_MS),
                         NATS_OK);
        assert_int_equal(natsMsg_GetDataLength(reply), 7);
        assert_memory_equal(natsMsg_GetData(reply), "re:ping", 7);
        natsMsg_Destroy(reply);
    }
    natsSubscription_Destroy(s);
}

static void a_request_nobody_listens_to_fails_with_no_responders(void **state)
{
    struct fixture *f = *state;
    natsMsg *reply = NULL;

    assert_int_equal(
        natsConnection_RequestString(&reply, f->pub, "svc.none", "x", RECV_MS),
        NATS_NO_RESPONDERS);
    assert_null(reply);
}

static void headers_survive_the_round_trip(void **state)
{
    struct fixture *f = *state;
    natsSubscription *s = NULL;
    natsMsg *out = NULL;
    natsMsg *in = NULL;
    const char *v = NULL;

    assert_int_equal(natsConnection_SubscribeSync(&s, f->sub, "hdr"), NATS_OK);
    assert_int_equal(natsConnection_Flush(f->sub), NATS_OK);
    assert_int_equal(natsMsg_Create(&out, "hdr", NULL, "body", 4), NATS_OK);
    assert_int_equal(natsMsgHeader_Set(out, "X-Trace", "abc123"), NATS_OK);
    assert_int_equal(natsConnection_PublishMsg(f->pub, out), NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&in, s, RECV_MS), NATS_OK);
    assert_int_equal(natsMsgHeader_Get(in, "X-Trace", &v), NATS_OK);
    assert_string_equal(v, "abc123");
    assert_int_equal(natsMsg_GetDataLength(in), 4);
    assert_memory_equal(natsMsg_GetData(in), "body", 4);
    natsMsg_Destroy(in);
    natsMsg_Destroy(out);
    natsSubscription_Destroy(s);
}

static void
payloads_up_to_max_payload_pass_and_larger_are_rejected(void **state)
{
    struct fixture *f = *state;
    natsSubscription *s = NULL;
    natsMsg *m = NULL;
    int64_t max = natsConnection_GetMaxPayload(f->pub);
    char *big;

    assert_int_equal(max, 1024 * 1024);
    big = malloc((size_t)max + 1);
    assert_non_null(big);
    for (int64_t i = 0; i <= max; i++) {
        big[i] = (char)('a' + i % 26);
    }
    assert_int_equal(natsConnection_SubscribeSync(&s, f->sub, "big"), NATS_OK);
    assert_int_equal(natsConnection_Flush(f->sub), NATS_OK);
    assert_int_equal(natsConnection_Publish(f->pub, "big", big, (int)max),
                     NATS_OK);
    assert_int_equal(natsSubscription_NextMsg(&m, s, RECV_MS), NATS_OK);
    assert_int_equal(natsMsg_GetDataLength(m), (int)max);
    assert_memory_equal(natsMsg_GetData(m), big, (size_t)max);
    natsMsg_Destroy(m);
    assert_int_equal(natsConnection_Publish(f->pub, "big", big, (int)max + 1),
                     NATS_MAX_PAYLOAD);
    free(big);
    natsSubscription_Destroy(s);
}

static void the_server_closes_a_conn_that_sends_too_big_a_payload(void **state)
{
    (void)state;
    char buf[4096];
    int fd = h_tcp_connect(server.port);
    const char *cmd = "CONNECT {}\r\nPUB big 1048577\r\n";

    assert_true(fd >= 0);
    assert_int_equal(h_read_until(fd, "\r\n", buf, sizeof buf, RECV_MS), 0);
    assert_int_equal(write(fd, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
    assert_int_equal(h_read_until(fd, "-ERR 'Maximum Payload Violation'\r\n",
                                  buf, sizeof buf, RECV_MS),
                     0);
    /* Then EOF: the server closed the conn. */
    assert_int_equal(read(fd, buf, sizeof buf), 0);
    close(fd);
}

static void echo_false_never_returns_own_messages(void **state)
{
    (void)state;
    natsOptions *o = NULL;
    natsConnection *nc = NULL;
    natsSubscription *s = NULL;

    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetURL(o, server.url), NATS_OK);
    assert_int_equal(natsOptions_SetNoEcho(o, true), NATS_OK);
    assert_int_equal(natsConnection_Connect(&nc, o), NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&s, nc, "self"), NATS_OK);
    assert_int_equal(natsConnection_PublishString(nc, "self", "mine"), NATS_OK);
    assert_int_equal(natsConnection_Flush(nc), NATS_OK);
    expect_none(s);
    natsSubscription_Destroy(s);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(a_subscriber_receives_what_is_published,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(wildcards_match_one_token_and_the_tail,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_queue_group_spreads_messages_and_plain_subs_get_all, setup,
            teardown),
        cmocka_unit_test_setup_teardown(a_request_gets_the_responders_reply,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_request_nobody_listens_to_fails_with_no_responders, setup,
            teardown),
        cmocka_unit_test_setup_teardown(headers_survive_the_round_trip, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            payloads_up_to_max_payload_pass_and_larger_are_rejected, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            the_server_closes_a_conn_that_sends_too_big_a_payload, setup,
            teardown),
        cmocka_unit_test_setup_teardown(echo_false_never_returns_own_messages,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
