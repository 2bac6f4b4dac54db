/* The consumer engine visits only consumers with work (issue 22 item 3):
 * a node whose streams each have an idle durable pull consumer adds
 * nothing to keel_js_consumer_visits_total however many loop turns pass,
 * and a publish, a pull request and an ack make one deliver as before. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kv_common.h"

#define STREAMS 20
#define TURNS 200 /* client round trips: each is a loop turn or more */
#define WAIT_MS 5000

static const char *const monitor_args[] = {"-m", "0", NULL};

static int setup(void **state)
{
    return kv_js1_setup(state, monitor_args, WAIT_MS);
}

static uint64_t visits(struct kv_js1 *f)
{
    static char body[1 << 16];
    const char *key = "\nkeel_js_consumer_visits_total ";
    assert_int_equal(h_http_get(f->k.http_port, "/metrics", body, sizeof body),
                     200);
    const char *p = strstr(body, key);
    assert_non_null(p);
    return strtoull(p + strlen(key), NULL, 10);
}

/* TURNS round trips to the server: every one wakes its loop. */
static void turns(struct kv_js1 *f)
{
    for (int i = 0; i < TURNS; i++) {
        assert_int_equal(natsConnection_FlushTimeout(f->nc, WAIT_MS), NATS_OK);
    }
}

static void add_stream_and_consumer(struct kv_js1 *f, int i)
{
    char name[32], body[96], subj[96];
    snprintf(name, sizeof name, "S%d", i);
    snprintf(body, sizeof body, "{\"name\":\"S%d\",\"subjects\":[\"s%d.>\"]}",
             i, i);
    kv_js1_create(f, name, body);
    snprintf(subj, sizeof subj, "$JS.API.CONSUMER.DURABLE.CREATE.S%d.C", i);
    snprintf(body, sizeof body,
             "{\"stream_name\":\"S%d\",\"config\":{\"durable_name\":\"C\","
             "\"ack_policy\":\"explicit\"}}",
             i);
    kv_js1_api_ok(f, subj, body);
}

static void idle_pull_consumers_are_not_visited_and_still_deliver(void **state)
{
    struct kv_js1 *f = *state;
    for (int i = 0; i < STREAMS; i++) {
        add_stream_and_consumer(f, i);
    }
    /* Idle: fewer visits over TURNS turns than one per consumer (the
     * walk over every stream made it STREAMS per turn). */
    uint64_t v0 = visits(f);
    turns(f);
    uint64_t v1 = visits(f);
    assert_true(v1 - v0 < STREAMS);

    /* A publish and a pull request wake one consumer, which delivers;
     * its ack commits and it goes idle again. */
    (void)kv_js1_publish(f, "s7.x", "hello", NULL, NULL);
    natsMsg *m = NULL;
    assert_int_equal(
        natsConnection_RequestString(
            &m, f->nc, "$JS.API.CONSUMER.MSG.NEXT.S7.C", "1", WAIT_MS),
        NATS_OK);
    assert_string_equal(natsMsg_GetData(m), "hello");
    natsMsg *ok = NULL;
    assert_int_equal(natsConnection_RequestString(
                         &ok, f->nc, natsMsg_GetReply(m), "+ACK", WAIT_MS),
                     NATS_OK); /* an AckSync: answered once committed */
    natsMsg_Destroy(ok);
    natsMsg_Destroy(m);
    uint64_t v2 = visits(f);
    assert_true(v2 > v1);
    turns(f);
    uint64_t v3 = visits(f);
    assert_true(v3 - v2 < STREAMS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            idle_pull_consumers_are_not_visited_and_still_deliver, setup,
            kv_js1_teardown),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
