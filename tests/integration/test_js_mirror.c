/* Stream mirrors through a real keeld with libnats
 * (docs/decisions/0032-mirrors-pull-into-the-log.md): a mirror stores each
 * origin message at its origin seq with its subject, headers, payload and
 * timestamp; opt_start_seq, opt_start_time and filter_subject (origin seqs
 * kept, the gaps deleted); a missing origin shows in info and is mirrored once
 * created; deleting the origin leaves the mirror's messages; origin drops are
 * recorded instead of stalling; a restart that loads a snapshot resumes
 * without a duplicate; an update removing `mirror` promotes it; other
 * config changes and cycles are refused with nats-server's codes; a publish
 * to a mirror reaches no stream. */
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

struct want {
    struct kv_js1 *f;
    const char *stream;
    long long last_seq, msgs;
};

static bool reached(void *arg)
{
    struct want *w = arg;
    json_t *o = kv_js1_info(w->f, w->stream);
    bool ok = kv_js1_state(o, "last_seq") == w->last_seq &&
              kv_js1_state(o, "messages") == w->msgs;
    json_decref(o);
    return ok;
}

/* Wait (bounded) until the mirror holds msgs messages up to last_seq. */
static void wait_mirror(struct kv_js1 *f, const char *stream,
                        long long last_seq, long long msgs)
{
    struct want w = {f, stream, last_seq, msgs};
    if (!h_poll(reached, &w, WAIT_MS)) {
        json_t *o = kv_js1_info(f, stream);
        char *s = json_dumps(o, 0);
        fail_msg("mirror %s never reached last_seq %lld with %lld messages: "
                 "%s",
                 stream, last_seq, msgs, s);
    }
}

/* STREAM.MSG.GET of seq: the "message" object (NULL: error, *code set). */
static json_t *get(struct kv_js1 *f, const char *stream, uint64_t seq,
                   long long *code)
{
    char subj[128], body[64];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.MSG.GET.%s", stream);
    snprintf(body, sizeof body, "{\"seq\":%llu}", (unsigned long long)seq);
    json_t *o = kv_js1_api(f, subj, body);
    *code = json_integer_value(
        json_object_get(json_object_get(o, "error"), "err_code"));
    json_t *m = json_incref(json_object_get(o, "message"));
    json_decref(o);
    return m;
}

/* The mirror's message seq equals the origin's: subject, headers,
 * payload and time. */
static void same_message(struct kv_js1 *f, const char *origin,
                         const char *mirror, uint64_t seq)
{
    long long c1 = 0, c2 = 0;
    json_t *a = get(f, origin, seq, &c1);
    json_t *b = get(f, mirror, seq, &c2);
    assert_non_null(a);
    if (b == NULL) {
        fail_msg("mirror %s has no seq %llu (err_code %lld)", mirror,
                 (unsigned long long)seq, c2);
    }
    assert_true(json_equal(a, b));
    json_decref(a);
    json_decref(b);
}

/* Seqs 1 to n of M equal O's. */
static void same_messages(struct kv_js1 *f, uint64_t n)
{
    for (uint64_t s = 1; s <= n; s++) {
        same_message(f, "O", "M", s);
    }
}

/* Stream O on o.> and M mirroring it, once M holds the n messages
 * published on o.a. */
static void origin_and_mirror(struct kv_js1 *f, int n)
{
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    kv_js1_create(f, "M", "{\"name\":\"M\",\"mirror\":{\"name\":\"O\"}}");
    for (int i = 1; i <= n; i++) {
        kv_js1_publish(f, "o.a", "x", NULL, NULL);
    }
    wait_mirror(f, "M", n, n);
}

static void a_mirror_stores_each_origin_message_at_its_seq(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    kv_js1_publish(f, "o.a", "m1", NULL, NULL);
    kv_js1_publish(f, "o.b", "m2", "X-Trace", "t2");
    kv_js1_publish(f, "o.a", "m3", NULL, NULL);
    kv_js1_create(f, "M", "{\"name\":\"M\",\"mirror\":{\"name\":\"O\"}}");
    wait_mirror(f, "M", 3, 3);
    /* Published after the mirror was created: pumped too. */
    kv_js1_publish(f, "o.c", "m4", NULL, NULL);
    kv_js1_publish(f, "o.a", "m5", NULL, NULL);
    wait_mirror(f, "M", 5, 5);
    same_messages(f, 5);
    json_t *o = kv_js1_info(f, "M");
    const json_t *m = json_object_get(o, "mirror");
    assert_string_equal(json_string_value(json_object_get(m, "name")), "O");
    assert_int_equal(json_integer_value(json_object_get(m, "lag")), 0);
    assert_true(json_integer_value(json_object_get(m, "active")) >= 0);
    assert_null(json_object_get(m, "error"));
    assert_null(json_object_get(json_object_get(o, "config"), "subjects"));
    json_decref(o);
    /* A mirror has no subjects: a publish to its name reaches no stream. */
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    assert_int_not_equal(js_Publish(&pa, f->js, "M", "x", 1, NULL, &jerr),
                         NATS_OK);
    assert_null(pa);
    wait_mirror(f, "M", 5, 5);
}

static void start_seq_and_filter_keep_origin_seqs(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    for (int i = 1; i <= 6; i++) {
        char d[8];
        snprintf(d, sizeof d, "m%d", i);
        kv_js1_publish(f, i % 2 == 1 ? "o.a" : "o.b", d, NULL, NULL);
    }
    kv_js1_create(
        f, "MS",
        "{\"name\":\"MS\",\"mirror\":{\"name\":\"O\",\"opt_start_seq\":4}}");
    kv_js1_create(f, "MF",
                  "{\"name\":\"MF\",\"mirror\":{\"name\":\"O\","
                  "\"filter_subject\":\"o.a\"}}");
    wait_mirror(f, "MS", 6, 3);
    json_t *o = kv_js1_info(f, "MS");
    assert_int_equal(kv_js1_state(o, "first_seq"), 4);
    json_decref(o);
    wait_mirror(f, "MF", 5, 3);
    o = kv_js1_info(f, "MF");
    assert_int_equal(kv_js1_state(o, "first_seq"), 1);
    assert_int_equal(kv_js1_state(o, "num_deleted"), 2);
    json_decref(o);
    for (uint64_t s = 1; s <= 5; s += 2) {
        same_message(f, "O", "MF", s);
    }
    long long code = 0;
    assert_null(get(f, "MF", 2, &code));
    assert_int_equal(code, 10037);
    /* A later match lands at its origin seq. */
    kv_js1_publish(f, "o.b", "m7", NULL, NULL);
    kv_js1_publish(f, "o.a", "m8", NULL, NULL);
    wait_mirror(f, "MF", 8, 4);
    same_message(f, "O", "MF", 8);
}

static void start_time_starts_at_the_first_message_stored_then(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    for (int i = 1; i <= 4; i++) {
        kv_js1_publish(f, "o.a", "x", NULL, NULL);
    }
    long long code = 0;
    json_t *m3 = get(f, "O", 3, &code);
    assert_non_null(m3);
    char body[256];
    snprintf(body, sizeof body,
             "{\"name\":\"MT\",\"mirror\":{\"name\":\"O\","
             "\"opt_start_time\":\"%s\"}}",
             json_string_value(json_object_get(m3, "time")));
    json_decref(m3);
    kv_js1_create(f, "MT", body);
    wait_mirror(f, "MT", 4, 2);
    json_t *o = kv_js1_info(f, "MT");
    assert_int_equal(kv_js1_state(o, "first_seq"), 3);
    json_decref(o);
    same_message(f, "O", "MT", 3);
}

/* A consumer's filter on a mirror fits its origin's subjects, as
 * nats-server checks, and delivers only what it matches. */
static void a_filtered_consumer_on_a_mirror_gets_its_subject_only(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    for (int i = 1; i <= 5; i++) {
        kv_js1_publish(f, i % 2 == 1 ? "o.a" : "o.b", "x", NULL, NULL);
    }
    kv_js1_create(f, "M", "{\"name\":\"M\",\"mirror\":{\"name\":\"O\"}}");
    wait_mirror(f, "M", 5, 5);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.CONSUMER.DURABLE.CREATE.M.zz",
                       "{\"stream_name\":\"M\",\"config\":{"
                       "\"durable_name\":\"zz\",\"ack_policy\":"
                       "\"explicit\",\"filter_subject\":\"zzz\"}}"),
        10093);
    kv_js1_api_ok(f, "$JS.API.CONSUMER.DURABLE.CREATE.M.d1",
                  "{\"stream_name\":\"M\",\"config\":{\"durable_name\":\"d1\","
                  "\"ack_policy\":\"explicit\",\"filter_subject\":\"o.a\"}}");
    natsSubscription *sub = NULL;
    jsSubOptions so;
    jsErrCode jerr = 0;
    jsSubOptions_Init(&so);
    so.Stream = "M";
    so.Consumer = "d1";
    assert_int_equal(
        js_PullSubscribe(&sub, f->js, "o.a", "d1", NULL, &so, &jerr), NATS_OK);
    natsMsgList list = {0};
    int got = 0;
    long long until = h_now_ms() + WAIT_MS;
    while (got < 3 && h_now_ms() < until) {
        natsStatus st = natsSubscription_Fetch(&list, sub, 10, 1000, &jerr);
        for (int i = 0; st == NATS_OK && i < list.Count; i++) {
            jsMsgMetaData *md = NULL;
            assert_string_equal(natsMsg_GetSubject(list.Msgs[i]), "o.a");
            /* num_pending counts the filter's matches, not the stream. */
            assert_int_equal(natsMsg_GetMetaData(&md, list.Msgs[i]), NATS_OK);
            assert_int_equal(md->NumPending, (uint64_t)(2 - got));
            jsMsgMetaData_Destroy(md);
            assert_int_equal(natsMsg_Ack(list.Msgs[i], NULL), NATS_OK);
            got++;
        }
        natsMsgList_Destroy(&list);
    }
    assert_int_equal(got, 3);
    natsSubscription_Destroy(sub);
}

static void a_missing_origin_is_shown_then_mirrored_once_created(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "M", "{\"name\":\"M\",\"mirror\":{\"name\":\"LATER\"}}");
    json_t *o = kv_js1_info(f, "M");
    const json_t *m = json_object_get(o, "mirror");
    /* The pump may not have tried yet: the error, once there, is 10059. */
    const json_t *e = json_object_get(m, "error");
    if (e != NULL) {
        assert_int_equal(json_integer_value(json_object_get(e, "err_code")),
                         10059);
    }
    json_decref(o);
    kv_js1_create(f, "LATER", "{\"name\":\"LATER\",\"subjects\":[\"later\"]}");
    kv_js1_publish(f, "later", "one", NULL, NULL);
    kv_js1_publish(f, "later", "two", NULL, NULL);
    wait_mirror(f, "M", 2, 2);
    same_message(f, "LATER", "M", 2);
    o = kv_js1_info(f, "M");
    assert_null(json_object_get(json_object_get(o, "mirror"), "error"));
    json_decref(o);
}

static void
an_origin_deleted_keeps_the_mirror_then_recreated_is_read(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    kv_js1_publish(f, "o.a", "m1", NULL, NULL);
    kv_js1_publish(f, "o.a", "m2", NULL, NULL);
    kv_js1_create(f, "M", "{\"name\":\"M\",\"mirror\":{\"name\":\"O\"}}");
    wait_mirror(f, "M", 2, 2);
    kv_js1_api_ok(f, "$JS.API.STREAM.DELETE.O", "");
    long long code = 0;
    json_t *m = get(f, "M", 2, &code);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "subject")),
                        "o.a");
    json_decref(m);
    wait_mirror(f, "M", 2, 2);
    /* Recreated, the origin's seqs start at 1 again: those at or below
     * the mirror's position (2) are not read, the rest land at their
     * seqs, as nats-server 2.9.10 does (compat: "a mirror whose origin is
     * deleted and recreated reads past its seq"). */
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    for (int i = 1; i <= 4; i++) {
        char d[8];
        snprintf(d, sizeof d, "n%d", i);
        kv_js1_publish(f, "o.b", d, NULL, NULL);
    }
    wait_mirror(f, "M", 4, 4);
    const char *want[] = {"o.a", "o.a", "o.b", "o.b"};
    for (uint64_t s = 1; s <= 4; s++) {
        m = get(f, "M", s, &code);
        assert_non_null(m);
        assert_string_equal(json_string_value(json_object_get(m, "subject")),
                            want[s - 1]);
        json_decref(m);
    }
    json_t *o = kv_js1_info(f, "M");
    assert_null(json_object_get(json_object_get(o, "mirror"), "error"));
    json_decref(o);
}

static bool has_lost(void *arg)
{
    struct kv_js1 *f = arg;
    json_t *o = kv_js1_info(f, "M");
    bool ok = json_integer_value(json_object_get(json_object_get(o, "mirror"),
                                                 "keel_lost")) == 7;
    json_decref(o);
    return ok;
}

static void origin_drops_are_recorded_not_waited_for(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O",
                  "{\"name\":\"O\",\"subjects\":[\"o.>\"],\"max_msgs\":3}");
    for (int i = 1; i <= 10; i++) {
        kv_js1_publish(f, "o.a", "x", NULL, NULL);
    }
    kv_js1_create(f, "M", "{\"name\":\"M\",\"mirror\":{\"name\":\"O\"}}");
    wait_mirror(f, "M", 10, 3);
    assert_true(h_poll(has_lost, f, WAIT_MS));
    json_t *o = kv_js1_info(f, "M");
    assert_int_equal(kv_js1_state(o, "first_seq"), 8);
    json_decref(o);
}

static void a_restart_resumes_from_the_snapshot_without_duplicates(void **state)
{
    struct kv_js1 *f = *state;
    origin_and_mirror(f, 9);
    kv_js1_restart(f);
    wait_mirror(f, "M", 9, 9);
    for (int i = 10; i <= 12; i++) {
        kv_js1_publish(f, "o.b", "y", NULL, NULL);
    }
    wait_mirror(f, "M", 12, 12);
    same_messages(f, 12);
}

/* An update without `mirror` promotes the mirror (nats-server 2.12): it
 * keeps the origin's messages at their seqs, stops reading the origin,
 * takes publishes at the seqs after its last, and stays promoted across a
 * restart that loads a snapshot. */
static void removing_the_mirror_promotes_it_to_a_stream(void **state)
{
    struct kv_js1 *f = *state;
    origin_and_mirror(f, 3);
    json_t *u = kv_js1_api(f, "$JS.API.STREAM.UPDATE.M", "{\"name\":\"M\"}");
    assert_null(json_object_get(u, "error"));
    const json_t *c = json_object_get(u, "config");
    assert_null(json_object_get(c, "mirror"));
    /* No subjects given: its name, as for any stream without a mirror. */
    assert_string_equal(
        json_string_value(json_array_get(json_object_get(c, "subjects"), 0)),
        "M");
    json_decref(u);
    /* Origin messages after the promotion are not copied: M's next seq
     * is its own publish. */
    kv_js1_publish(f, "o.a", "late", NULL, NULL);
    kv_js1_publish(f, "o.a", "late", NULL, NULL);
    assert_int_equal(kv_js1_publish(f, "M", "own", NULL, NULL), 4);
    same_messages(f, 3);
    kv_js1_restart(f);
    assert_int_equal(kv_js1_publish(f, "M", "own", NULL, NULL), 5);
    json_t *o = kv_js1_info(f, "M");
    assert_null(json_object_get(o, "mirror"));
    assert_int_equal(kv_js1_state(o, "messages"), 5);
    assert_int_equal(kv_js1_state(o, "last_seq"), 5);
    json_decref(o);
    long long code = 0;
    json_t *m = get(f, "M", 4, &code);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "subject")), "M");
    json_decref(m);
}

static void mirror_config_changes_and_cycles_are_refused(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    kv_js1_create(f, "M", "{\"name\":\"M\",\"mirror\":{\"name\":\"O\"}}");
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.M",
                       "{\"name\":\"M\",\"mirror\":{\"name\":\"O\","
                       "\"filter_subject\":\"o.a\"}}"),
        10055);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.M",
                       "{\"name\":\"M\",\"mirror\":{\"name\":\"O\"},"
                       "\"max_msgs\":10}"),
        0);
    /* Adding a mirror to a stream that has none is a change too. */
    kv_js1_create(f, "P", "{\"name\":\"P\",\"subjects\":[\"p\"]}");
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.P",
                       "{\"name\":\"P\",\"mirror\":{\"name\":\"O\"}}"),
        10055);
    assert_int_equal(kv_js1_api_err(f, "$JS.API.STREAM.CREATE.X",
                                    "{\"name\":\"X\",\"subjects\":[\"x\"],"
                                    "\"mirror\":{\"name\":\"O\"}}"),
                     10034);
    kv_js1_create(f, "C1", "{\"name\":\"C1\",\"mirror\":{\"name\":\"C2\"}}");
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.C2",
                       "{\"name\":\"C2\",\"mirror\":{\"name\":\"C1\"}}"),
        10052);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.C3",
                       "{\"name\":\"C3\",\"mirror\":{\"name\":\"C3\"}}"),
        10052);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, kv_js1_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_mirror_stores_each_origin_message_at_its_seq),
        T(start_seq_and_filter_keep_origin_seqs),
        T(start_time_starts_at_the_first_message_stored_then),
        T(a_filtered_consumer_on_a_mirror_gets_its_subject_only),
        T(a_missing_origin_is_shown_then_mirrored_once_created),
        T(an_origin_deleted_keeps_the_mirror_then_recreated_is_read),
        T(origin_drops_are_recorded_not_waited_for),
        T(a_restart_resumes_from_the_snapshot_without_duplicates),
        T(removing_the_mirror_promotes_it_to_a_stream),
        T(mirror_config_changes_and_cycles_are_refused),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
