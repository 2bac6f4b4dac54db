/* A stream's republish and subject_transform through a real keeld with
 * libnats: each stored message is republished once, to the transformed
 * dest, with nats-server's headers (headers_only: no body and
 * Nats-Msg-Size); a subject_transform stores the transformed subject,
 * which consumers filter on; both hold across a restart that loads a
 * snapshot (Nats-Last-Sequence comes from the restored state) and the
 * replayed entries are not republished again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kv_common.h"

#define WAIT_MS 10000

/* Snapshot every 4 entries so a restart loads one. */
static const char *const extra[] = {"--snapshot_entries", "4", NULL};

static int setup(void **state)
{
    return kv_js1_setup(state, extra, WAIT_MS);
}

static void header_is(natsMsg *m, const char *name, const char *want)
{
    const char *v = NULL;
    assert_int_equal(natsMsgHeader_Get(m, name, &v), NATS_OK);
    assert_string_equal(v, want);
}

/* The next republished message: its subject, body, and the headers
 * nats-server adds. */
static void next_is(natsSubscription *sub, const char *subj, const char *data,
                    const char *seq, const char *last, const char *stored)
{
    natsMsg *m = NULL;
    const char *ts = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, sub, WAIT_MS), NATS_OK);
    assert_string_equal(natsMsg_GetSubject(m), subj);
    assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(data));
    assert_memory_equal(natsMsg_GetData(m), data, strlen(data));
    header_is(m, "Nats-Stream", "RP");
    header_is(m, "Nats-Subject", stored);
    header_is(m, "Nats-Sequence", seq);
    header_is(m, "Nats-Last-Sequence", last);
    assert_int_equal(natsMsgHeader_Get(m, "Nats-Time-Stamp", &ts), NATS_OK);
    assert_non_null(strchr(ts, 'T'));
    natsMsg_Destroy(m);
}

static void each_stored_message_is_republished_once(void **state)
{
    struct kv_js1 *f = *state;
    natsSubscription *sub = NULL;
    json_decref(
        kv_js1_api(f, "$JS.API.STREAM.CREATE.RP",
                   "{\"name\":\"RP\",\"subjects\":[\"rp.>\"],"
                   "\"republish\":{\"src\":\"rp.*\",\"dest\":\"out.$1\"}}"));
    assert_int_equal(natsConnection_SubscribeSync(&sub, f->nc, "out.>"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc), NATS_OK);
    assert_int_equal(kv_js1_publish(f, "rp.a", "one", NULL, NULL), 1);
    assert_int_equal(kv_js1_publish(f, "rp.b", "two", "X-Trace", "7"), 2);
    assert_int_equal(kv_js1_publish(f, "rp.a", "three", NULL, NULL), 3);
    /* Not the republish source (rp.*): stored, not republished. */
    assert_int_equal(kv_js1_publish(f, "rp.x.y", "four", NULL, NULL), 4);
    assert_int_equal(kv_js1_publish(f, "rp.b", "five", NULL, NULL), 5);
    next_is(sub, "out.a", "one", "1", "0", "rp.a");
    natsMsg *m = NULL;
    assert_int_equal(natsSubscription_NextMsg(&m, sub, WAIT_MS), NATS_OK);
    header_is(m, "X-Trace", "7"); /* the message's own headers stay */
    header_is(m, "Nats-Sequence", "2");
    natsMsg_Destroy(m);
    next_is(sub, "out.a", "three", "3", "1", "rp.a");
    next_is(sub, "out.b", "five", "5", "2", "rp.b");

    /* A restart loads a snapshot and replays the log after it: the
     * per-subject last seq comes back with the state. (Replayed entries
     * are never republished: test_cjs_features checks that on a cluster,
     * where a subscriber stays connected through restarts.) */
    natsSubscription_Destroy(sub);
    kv_js1_restart(f);
    assert_int_equal(natsConnection_SubscribeSync(&sub, f->nc, "out.>"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc), NATS_OK);
    assert_int_equal(kv_js1_publish(f, "rp.a", "six", NULL, NULL), 6);
    next_is(sub, "out.a", "six", "6", "3", "rp.a");
    natsSubscription_Destroy(sub);
}

static void headers_only_sends_the_size_and_no_body(void **state)
{
    struct kv_js1 *f = *state;
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;
    json_t *o = kv_js1_api(f, "$JS.API.STREAM.CREATE.HO",
                           "{\"name\":\"HO\",\"subjects\":[\"ho.*\"],"
                           "\"republish\":{\"dest\":\"hdr.>\","
                           "\"headers_only\":true}}");
    json_t *rp = json_object_get(json_object_get(o, "config"), "republish");
    assert_string_equal(json_string_value(json_object_get(rp, "src")), ">");
    assert_true(json_is_true(json_object_get(rp, "headers_only")));
    json_decref(o);
    assert_int_equal(natsConnection_SubscribeSync(&sub, f->nc, "hdr.>"),
                     NATS_OK);
    assert_int_equal(natsConnection_Flush(f->nc), NATS_OK);
    assert_int_equal(kv_js1_publish(f, "ho.k", "twelve bytes", NULL, NULL), 1);
    assert_int_equal(natsSubscription_NextMsg(&m, sub, WAIT_MS), NATS_OK);
    assert_string_equal(natsMsg_GetSubject(m), "hdr.ho.k");
    assert_int_equal(natsMsg_GetDataLength(m), 0);
    header_is(m, "Nats-Msg-Size", "12");
    header_is(m, "Nats-Stream", "HO");
    header_is(m, "Nats-Sequence", "1");
    natsMsg_Destroy(m);
    natsSubscription_Destroy(sub);
}

static void republish_configs_nats_server_refuses_are_10052(void **state)
{
    struct kv_js1 *f = *state;
    const struct {
        const char *body, *why;
    } bad[] = {
        {"{\"name\":\"BAD\",\"subjects\":[\"b.>\"],\"republish\":"
         "{\"dest\":\"b.out\"}}",
         "stream configuration for republish destination forms a cycle"},
        {"{\"name\":\"BAD\",\"subjects\":[\"b.>\"],\"republish\":"
         "{\"src\":\"c.>\",\"dest\":\"d.>\"}}",
         "stream configuration for republish source is not valid subset of "
         "subjects"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *o = kv_js1_api(f, "$JS.API.STREAM.CREATE.BAD", bad[i].body);
        json_t *e = json_object_get(o, "error");
        assert_int_equal(json_integer_value(json_object_get(e, "err_code")),
                         10052);
        assert_string_equal(
            json_string_value(json_object_get(e, "description")), bad[i].why);
        json_decref(o);
    }
}

static const char *stored_subject(struct kv_js1 *f, uint64_t seq, char *buf,
                                  size_t cap)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetMsg(&m, f->js, "TR", seq, NULL, &jerr), NATS_OK);
    snprintf(buf, cap, "%s", natsMsg_GetSubject(m));
    natsMsg_Destroy(m);
    return buf;
}

static void subject_transform_stores_the_transformed_subject(void **state)
{
    struct kv_js1 *f = *state;
    char s[64];
    json_decref(kv_js1_api(f, "$JS.API.STREAM.CREATE.TR",
                           "{\"name\":\"TR\",\"subjects\":[\"in.>\"],"
                           "\"subject_transform\":{\"src\":\"in.*.*\","
                           "\"dest\":\"st.{{wildcard(2)}}.$1\"}}"));
    assert_int_equal(kv_js1_publish(f, "in.eu.42", "a", NULL, NULL), 1);
    assert_int_equal(kv_js1_publish(f, "in.us.7", "b", NULL, NULL), 2);
    assert_int_equal(kv_js1_publish(f, "in.plain", "c", NULL, NULL), 3);
    assert_string_equal(stored_subject(f, 1, s, sizeof s), "st.42.eu");
    assert_string_equal(stored_subject(f, 3, s, sizeof s), "in.plain");
    /* Expectations see the stored subject: the last seq of st.7.us. */
    assert_int_equal(kv_js1_publish(f, "in.us.7", "d",
                                    "Nats-Expected-Last-Subject-Sequence", "2"),
                     4);

    /* A consumer filters on what is stored (outside the stream's
     * subjects, inside the transform's dest). */
    natsSubscription *sub = NULL;
    natsMsgList list = {0};
    jsErrCode jerr = 0;
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = "TR";
    assert_int_equal(
        js_PullSubscribe(&sub, f->js, "st.*.us", "US", NULL, &so, &jerr),
        NATS_OK);
    assert_int_equal(natsSubscription_Fetch(&list, sub, 10, WAIT_MS, &jerr),
                     NATS_OK);
    assert_int_equal(list.Count, 2);
    assert_string_equal(natsMsg_GetSubject(list.Msgs[0]), "st.7.us");
    assert_memory_equal(natsMsg_GetData(list.Msgs[1]), "d", 1);
    natsMsgList_Destroy(&list);
    natsSubscription_Destroy(sub);

    /* The log holds the transformed subject: the same after a restart
     * that loads a snapshot, and an update can change the transform. */
    kv_js1_restart(f);
    assert_string_equal(stored_subject(f, 1, s, sizeof s), "st.42.eu");
    assert_string_equal(stored_subject(f, 4, s, sizeof s), "st.7.us");
    json_decref(kv_js1_api(f, "$JS.API.STREAM.UPDATE.TR",
                           "{\"name\":\"TR\",\"subjects\":[\"in.>\"],"
                           "\"subject_transform\":{\"src\":\"in.*.*\","
                           "\"dest\":\"v2.$1.$2\"}}"));
    assert_int_equal(kv_js1_publish(f, "in.eu.42", "e", NULL, NULL), 5);
    assert_string_equal(stored_subject(f, 5, s, sizeof s), "v2.eu.42");
    assert_string_equal(stored_subject(f, 1, s, sizeof s), "st.42.eu");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(each_stored_message_is_republished_once,
                                        setup, kv_js1_teardown),
        cmocka_unit_test_setup_teardown(headers_only_sends_the_size_and_no_body,
                                        setup, kv_js1_teardown),
        cmocka_unit_test_setup_teardown(
            republish_configs_nats_server_refuses_are_10052, setup,
            kv_js1_teardown),
        cmocka_unit_test_setup_teardown(
            subject_transform_stores_the_transformed_subject, setup,
            kv_js1_teardown),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
