/* JetStream streams through a real keeld with the real libnats client:
 * create/update/info/delete/purge, publish with acks (sync and async),
 * dedupe, expected-sequence headers, API errors, and a restart that keeps
 * the stream and its messages. */
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
#include <unistd.h>

#include "harness.h"
#include "kv_common.h"

#define WAIT_MS 10000

static int setup(void **state)
{
    return kv_js1_setup(state, NULL, WAIT_MS);
}

static void add_stream_direct(struct kv_js1 *f, const char *name,
                              const char *subj, bool allow_direct)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {subj};
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.AllowDirect = allow_direct;
    assert_int_equal(js_AddStream(&si, f->js, &cfg, NULL, &jerr), NATS_OK);
    assert_string_equal(si->Config->Name, name);
    assert_int_equal(si->State.Msgs, 0);
    assert_int_equal(si->Config->AllowDirect, allow_direct);
    jsStreamInfo_Destroy(si);
}

static void add_stream(struct kv_js1 *f, const char *name, const char *subj)
{
    add_stream_direct(f, name, subj, false);
}

static uint64_t publish(struct kv_js1 *f, const char *subj, const char *data,
                        jsPubOptions *po, jsErrCode *jerr)
{
    jsPubAck *pa = NULL;
    *jerr = 0;
    natsStatus s =
        js_Publish(&pa, f->js, subj, data, (int)strlen(data), po, jerr);
    if (s != NATS_OK) {
        return 0;
    }
    uint64_t seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    return seq;
}

static void stream_state(struct kv_js1 *f, const char *name, jsStreamState *out)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetStreamInfo(&si, f->js, name, NULL, &jerr), NATS_OK);
    *out = si->State;
    jsStreamInfo_Destroy(si);
}

static void create_info_delete_round_trip(void **state)
{
    struct kv_js1 *f = *state;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    add_stream(f, "ORDERS", "orders.>");
    assert_int_equal(js_GetStreamInfo(&si, f->js, "ORDERS", NULL, &jerr),
                     NATS_OK);
    assert_string_equal(si->Config->Subjects[0], "orders.>");
    assert_int_equal(si->Config->Retention, js_LimitsPolicy);
    assert_int_equal(si->Config->Replicas, 1);
    jsStreamInfo_Destroy(si);
    assert_int_equal(js_DeleteStream(f->js, "ORDERS", NULL, &jerr), NATS_OK);
    si = NULL;
    assert_int_not_equal(js_GetStreamInfo(&si, f->js, "ORDERS", NULL, &jerr),
                         NATS_OK);
    assert_int_equal(jerr, JSStreamNotFoundErr);
    assert_null(si);
}

static void publishes_are_acked_with_consecutive_seqs(void **state)
{
    struct kv_js1 *f = *state;
    jsErrCode jerr = 0;
    natsSubscription *core = NULL;
    natsMsg *m = NULL;
    add_stream(f, "ORDERS", "orders.>");
    assert_int_equal(natsConnection_SubscribeSync(&core, f->nc, "orders.*"),
                     NATS_OK);
    for (uint64_t i = 1; i <= 3; i++) {
        assert_int_equal(publish(f, "orders.new", "x", NULL, &jerr), i);
    }
    /* Also delivered to core subscribers. */
    assert_int_equal(natsSubscription_NextMsg(&m, core, WAIT_MS), NATS_OK);
    assert_string_equal(natsMsg_GetSubject(m), "orders.new");
    natsMsg_Destroy(m);
    natsSubscription_Destroy(core);
    jsStreamState st;
    stream_state(f, "ORDERS", &st);
    assert_int_equal(st.Msgs, 3);
    assert_int_equal(st.FirstSeq, 1);
    assert_int_equal(st.LastSeq, 3);
    assert_int_equal(st.Bytes, 3 * (strlen("orders.new") + 1));
}

static void async_publishes_all_acked_and_stored(void **state)
{
    struct kv_js1 *f = *state;
    add_stream(f, "EV", "ev.>");
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(js_PublishAsync(f->js, "ev.a", "payload", 7, NULL),
                         NATS_OK);
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = WAIT_MS;
    assert_int_equal(js_PublishAsyncComplete(f->js, &po), NATS_OK);
    natsMsgList pending = {0};
    assert_int_equal(js_PublishAsyncGetPendingList(&pending, f->js),
                     NATS_NOT_FOUND);
    jsStreamState st;
    stream_state(f, "EV", &st);
    assert_int_equal(st.Msgs, 2000);
    assert_int_equal(st.LastSeq, 2000);
}

static void same_msg_id_is_acked_as_duplicate(void **state)
{
    struct kv_js1 *f = *state;
    jsPubOptions po;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    add_stream(f, "D", "d");
    jsPubOptions_Init(&po);
    po.MsgId = "id-1";
    assert_int_equal(js_Publish(&pa, f->js, "d", "a", 1, &po, &jerr), NATS_OK);
    assert_int_equal(pa->Sequence, 1);
    assert_false(pa->Duplicate);
    jsPubAck_Destroy(pa);
    assert_int_equal(js_Publish(&pa, f->js, "d", "a", 1, &po, &jerr), NATS_OK);
    assert_int_equal(pa->Sequence, 1);
    assert_true(pa->Duplicate);
    jsPubAck_Destroy(pa);
    jsStreamState st;
    stream_state(f, "D", &st);
    assert_int_equal(st.Msgs, 1);
}

static void wrong_expected_last_sequence_is_refused(void **state)
{
    struct kv_js1 *f = *state;
    jsPubOptions po;
    jsErrCode jerr = 0;
    add_stream(f, "E", "e");
    assert_int_equal(publish(f, "e", "1", NULL, &jerr), 1);
    jsPubOptions_Init(&po);
    po.ExpectLastSeq = 7;
    assert_int_equal(publish(f, "e", "2", &po, &jerr), 0);
    assert_int_equal(jerr, JSStreamWrongLastSequenceErr);
    po.ExpectLastSeq = 1;
    assert_int_equal(publish(f, "e", "2", &po, &jerr), 2);
}

static void api_errors_name_in_use_overlap_and_idempotent_create(void **state)
{
    struct kv_js1 *f = *state;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"orders.>"};
    add_stream(f, "ORDERS", "orders.>");
    /* Same config again: success. */
    add_stream(f, "ORDERS", "orders.>");
    jsStreamConfig_Init(&cfg);
    cfg.Name = "ORDERS";
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.MaxMsgs = 5;
    assert_int_not_equal(js_AddStream(&si, f->js, &cfg, NULL, &jerr), NATS_OK);
    assert_int_equal(jerr, JSStreamNameExistErr);
    cfg.Name = "OTHER";
    jerr = 0;
    assert_int_not_equal(js_AddStream(&si, f->js, &cfg, NULL, &jerr), NATS_OK);
    assert_int_equal(jerr, JSStreamSubjectOverlapErr);
    cfg.Replicas = 3;
    const char *other[] = {"other"};
    cfg.Subjects = other;
    jerr = 0;
    assert_int_not_equal(js_AddStream(&si, f->js, &cfg, NULL, &jerr), NATS_OK);
    assert_int_equal(jerr, JSStreamReplicasNotSupportedErr);
    assert_int_not_equal(js_DeleteStream(f->js, "NOPE", NULL, &jerr), NATS_OK);
    assert_int_equal(jerr, JSStreamNotFoundErr);
}

static void update_limits_and_purge(void **state)
{
    struct kv_js1 *f = *state;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"u.>"};
    add_stream(f, "U", "u.>");
    for (int i = 0; i < 10; i++) {
        assert_int_not_equal(
            publish(f, i % 2 ? "u.a" : "u.b", "x", NULL, &jerr), 0);
    }
    jsStreamConfig_Init(&cfg);
    cfg.Name = "U";
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.MaxMsgs = 4;
    assert_int_equal(js_UpdateStream(&si, f->js, &cfg, NULL, &jerr), NATS_OK);
    assert_int_equal(si->Config->MaxMsgs, 4);
    assert_int_equal(si->State.Msgs, 4);
    assert_int_equal(si->State.FirstSeq, 7);
    jsStreamInfo_Destroy(si);
    jsOptions o;
    jsOptions_Init(&o);
    o.Stream.Purge.Subject = "u.a";
    assert_int_equal(js_PurgeStream(f->js, "U", &o, &jerr), NATS_OK);
    jsStreamState st;
    stream_state(f, "U", &st);
    assert_int_equal(st.Msgs, 2); /* 7 and 9 were u.b */
    assert_int_equal(js_PurgeStream(f->js, "U", NULL, &jerr), NATS_OK);
    stream_state(f, "U", &st);
    assert_int_equal(st.Msgs, 0);
    assert_int_equal(st.FirstSeq, 11);
}

static void get_and_delete_message(void **state)
{
    struct kv_js1 *f = *state;
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    add_stream(f, "G", "g.*");
    assert_int_equal(publish(f, "g.one", "first", NULL, &jerr), 1);
    assert_int_equal(publish(f, "g.two", "second", NULL, &jerr), 2);
    assert_int_equal(js_GetMsg(&m, f->js, "G", 2, NULL, &jerr), NATS_OK);
    assert_string_equal(natsMsg_GetSubject(m), "g.two");
    assert_memory_equal(natsMsg_GetData(m), "second", 6);
    natsMsg_Destroy(m);
    assert_int_equal(js_GetLastMsg(&m, f->js, "G", "g.one", NULL, &jerr),
                     NATS_OK);
    assert_int_equal(natsMsg_GetSequence(m), 1);
    natsMsg_Destroy(m);
    assert_int_equal(js_DeleteMsg(f->js, "G", 1, NULL, &jerr), NATS_OK);
    m = NULL;
    assert_int_not_equal(js_GetMsg(&m, f->js, "G", 1, NULL, &jerr), NATS_OK);
    assert_int_equal(jerr, JSNoMessageFoundErr);
}

/* DIRECT.GET (allow_direct): by sequence, last by subject and next by
 * subject, with the Nats-Stream/-Subject/-Sequence headers libnats reads;
 * an absent sequence is an error, never a message. */
static void direct_get_reads_by_seq_and_subject(void **state)
{
    struct kv_js1 *f = *state;
    jsErrCode jerr = 0;
    add_stream_direct(f, "D", "d.*", true);
    assert_int_equal(publish(f, "d.a", "a1", NULL, &jerr), 1);
    assert_int_equal(publish(f, "d.b", "b1", NULL, &jerr), 2);
    assert_int_equal(publish(f, "d.a", "a2", NULL, &jerr), 3);

    natsMsg *m = NULL;
    jsDirectGetMsgOptions o;
    jsDirectGetMsgOptions_Init(&o);
    o.Sequence = 2;
    assert_int_equal(js_DirectGetMsg(&m, f->js, "D", NULL, &o), NATS_OK);
    assert_string_equal(natsMsg_GetSubject(m), "d.b");
    assert_int_equal(natsMsg_GetSequence(m), 2);
    assert_memory_equal(natsMsg_GetData(m), "b1", 2);
    natsMsg_Destroy(m);

    jsDirectGetMsgOptions_Init(&o);
    o.LastBySubject = "d.a";
    assert_int_equal(js_DirectGetMsg(&m, f->js, "D", NULL, &o), NATS_OK);
    assert_int_equal(natsMsg_GetSequence(m), 3);
    assert_memory_equal(natsMsg_GetData(m), "a2", 2);
    natsMsg_Destroy(m);

    jsDirectGetMsgOptions_Init(&o);
    o.Sequence = 2;
    o.NextBySubject = "d.a";
    assert_int_equal(js_DirectGetMsg(&m, f->js, "D", NULL, &o), NATS_OK);
    assert_int_equal(natsMsg_GetSequence(m), 3);
    natsMsg_Destroy(m);

    jsDirectGetMsgOptions_Init(&o);
    o.Sequence = 99;
    m = NULL;
    assert_int_not_equal(js_DirectGetMsg(&m, f->js, "D", NULL, &o), NATS_OK);
    assert_null(m);
}

static const char *hdr_or_dash(natsMsg *m, const char *name)
{
    const char *v = NULL;
    return natsMsgHeader_Get(m, name, &v) == NATS_OK && v != NULL ? v : "-";
}

/* One raw DIRECT.GET request with body: every reply up to and including
 * the first status message, "seq/status" each, into out (e.g.
 * "2:a.1:p3 4:a.2:p2 204:p2"); p is Nats-Num-Pending ("-" when absent,
 * which ends a reply of one message, as nats.js reads it). */
static void direct_raw(struct kv_js1 *f, const char *subject, const char *body,
                       char *out, size_t cap)
{
    natsSubscription *sub = NULL;
    char inbox[64];
    size_t o = 0;
    snprintf(inbox, sizeof inbox, "_INBOX.direct.%d", rand());
    assert_int_equal(natsConnection_SubscribeSync(&sub, f->nc, inbox), NATS_OK);
    assert_int_equal(
        natsConnection_PublishRequestString(f->nc, subject, inbox, body),
        NATS_OK);
    out[0] = '\0';
    /* Bounded: SRV_JS_DIRECT_BATCH_MAX messages and one status at most. */
    for (int i = 0; i < 1100; i++) {
        natsMsg *m = NULL;
        const char *st = NULL;
        assert_int_equal(natsSubscription_NextMsg(&m, sub, WAIT_MS), NATS_OK);
        bool status = natsMsgHeader_Get(m, "Status", &st) == NATS_OK;
        const char *seq = hdr_or_dash(m, "Nats-Sequence");
        const char *subj = hdr_or_dash(m, "Nats-Subject");
        const char *np = hdr_or_dash(m, "Nats-Num-Pending");
        int n = status ? snprintf(out + o, cap - o, "%s%s:p%s", o ? " " : "",
                                  st, np)
                       : snprintf(out + o, cap - o, "%s%s:%s:p%s", o ? " " : "",
                                  seq, subj, np);
        assert_true(n > 0 && (size_t)n < cap - o);
        o += (size_t)n;
        bool counted = strcmp(np, "-") != 0;
        natsMsg_Destroy(m);
        if (status || !counted) {
            break; /* a status ends it, or one message without a count */
        }
    }
    natsSubscription_Destroy(sub);
}

/* nats-server 2.11's batched and multi-subject DIRECT.GET: batch from a
 * seq or a time, next_by_subj with a wildcard, max_bytes, multi_last with
 * up_to_seq, each reply with Nats-Num-Pending and an EOB status 204; bad
 * requests get 408. */
static void direct_get_batches_and_multi_last_end_with_eob(void **state)
{
    struct kv_js1 *f = *state;
    jsErrCode jerr = 0;
    char got[4096];
    add_stream_direct(f, "B", "b.*", true);
    const char *pubs[] = {"b.x", "b.y", "b.x", "b.z", "b.y"};
    for (uint64_t i = 0; i < 5; i++) {
        assert_int_equal(publish(f, pubs[i], "0123456789", NULL, &jerr), i + 1);
    }
    const char *G = "$JS.API.DIRECT.GET.B";
    direct_raw(f, G, "{\"seq\":2,\"batch\":2}", got, sizeof got);
    assert_string_equal(got, "2:b.y:p3 3:b.x:p2 204:p2");
    direct_raw(f, G, "{\"seq\":4,\"batch\":10}", got, sizeof got);
    assert_string_equal(got, "4:b.z:p1 5:b.y:p0 204:p0");
    direct_raw(f, G, "{\"seq\":1,\"batch\":5,\"next_by_subj\":\"b.y\"}", got,
               sizeof got);
    assert_string_equal(got, "2:b.y:p1 5:b.y:p0 204:p0");
    /* max_bytes: stop once 13 bytes (subject + payload) went. */
    direct_raw(f, G, "{\"seq\":1,\"batch\":5,\"max_bytes\":13}", got,
               sizeof got);
    assert_string_equal(got, "1:b.x:p4 204:p4");
    direct_raw(f, G, "{\"start_time\":\"2000-01-01T00:00:00Z\",\"batch\":1}",
               got, sizeof got);
    assert_string_equal(got, "1:b.x:p4 204:p4");
    direct_raw(f, G, "{\"multi_last\":[\"b.*\"]}", got, sizeof got);
    assert_string_equal(got, "3:b.x:p2 4:b.z:p1 5:b.y:p0 204:p0");
    direct_raw(f, G, "{\"multi_last\":[\"b.x\",\"b.y\"],\"up_to_seq\":3}", got,
               sizeof got);
    assert_string_equal(got, "2:b.y:p1 3:b.x:p0 204:p0");
    direct_raw(f, G, "{\"multi_last\":[\"b.q\"]}", got, sizeof got);
    assert_string_equal(got, "404:p-");
    /* One message as before: no pending count, no EOB. */
    direct_raw(f, G, "{\"seq\":3}", got, sizeof got);
    assert_string_equal(got, "3:b.x:p-");
    direct_raw(f, G, "", got, sizeof got);
    assert_string_equal(got, "408:p-");
    direct_raw(f, G, "{\"seq\":1,\"last_by_subj\":\"b.x\"}", got, sizeof got);
    assert_string_equal(got, "408:p-");
    direct_raw(f, G, "{\"seq\":\"one\"}", got, sizeof got);
    assert_string_equal(got, "408:p-");
    direct_raw(f, G, "{\"seq\":9,\"batch\":3}", got, sizeof got);
    assert_string_equal(got, "404:p-");
}

struct info_wait {
    struct kv_js1 *f;
    const char *name;
};

static bool stream_visible(void *arg)
{
    struct info_wait *w = arg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    if (js_GetStreamInfo(&si, w->f->js, w->name, NULL, &jerr) != NATS_OK) {
        return false;
    }
    jsStreamInfo_Destroy(si);
    return true;
}

static void restart_keeps_streams_and_messages(void **state)
{
    struct kv_js1 *f = *state;
    jsErrCode jerr = 0;
    natsMsg *m = NULL;
    add_stream(f, "R", "r.>");
    for (uint64_t i = 1; i <= 5; i++) {
        assert_int_equal(publish(f, "r.x", "keep", NULL, &jerr), i);
    }
    kv_js1_restart(f);
    struct info_wait w = {f, "R"};
    assert_true(h_poll(stream_visible, &w, WAIT_MS));
    jsStreamState st;
    stream_state(f, "R", &st);
    assert_int_equal(st.Msgs, 5);
    assert_int_equal(st.LastSeq, 5);
    assert_int_equal(js_GetMsg(&m, f->js, "R", 3, NULL, &jerr), NATS_OK);
    assert_memory_equal(natsMsg_GetData(m), "keep", 4);
    natsMsg_Destroy(m);
    assert_int_equal(publish(f, "r.x", "next", NULL, &jerr), 6);
}

/* The stream's keel_fsync as STREAM.INFO / CREATE / UPDATE report it
 * (body is the raw request, NULL for INFO). Caller frees. */
static char *api_fsync(struct kv_js1 *f, const char *op, const char *name,
                       const char *body)
{
    char subj[128];
    natsMsg *m = NULL;
    snprintf(subj, sizeof subj, "$JS.API.STREAM.%s.%s", op, name);
    assert_int_equal(
        natsConnection_Request(&m, f->nc, subj, body,
                               body != NULL ? (int)strlen(body) : 0, WAIT_MS),
        NATS_OK);
    json_t *r = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    assert_non_null(r);
    assert_null(json_object_get(r, "error"));
    const char *v = json_string_value(
        json_object_get(json_object_get(r, "config"), "keel_fsync"));
    assert_non_null(v);
    char *out = strdup(v);
    json_decref(r);
    return out;
}

static void expect_fsync(struct kv_js1 *f, const char *op, const char *name,
                         const char *body, const char *want)
{
    char *got = api_fsync(f, op, name, body);
    assert_string_equal(got, want);
    free(got);
}

/* docs/design.md §4: keeld's --fsync is the default for new streams (finding
 * F4: it used to be ignored, every stream without keel_fsync got group).
 * The policy is recorded in the stream's config, so an UPDATE without the
 * field and a restart under another --fsync keep it. */
static void fsync_flag_is_the_default_for_new_streams(void **state)
{
    struct kv_js1 *f = *state;
    const char *always[] = {"--fsync", "always", NULL};
    const char *interval[] = {"--fsync", "interval:250", NULL};
    f->extra = always;
    kv_js1_restart(f);
    expect_fsync(f, "CREATE", "FA", "{\"subjects\":[\"fa.>\"]}", "always");
    expect_fsync(f, "CREATE", "FG",
                 "{\"subjects\":[\"fg.>\"],\"keel_fsync\":\"group\"}", "group");
    /* An update that leaves the field out keeps the stream's policy. */
    expect_fsync(f, "UPDATE", "FA", "{\"subjects\":[\"fa.>\"],\"max_msgs\":10}",
                 "always");
    expect_fsync(f, "UPDATE", "FG", "{\"subjects\":[\"fg.>\"],\"max_msgs\":10}",
                 "group");
    /* A create repeated without the field is the same config (idempotent). */
    expect_fsync(f, "CREATE", "FA", "{\"subjects\":[\"fa.>\"],\"max_msgs\":10}",
                 "always");
    f->extra = interval;
    kv_js1_restart(f);
    struct info_wait w = {f, "FA"};
    assert_true(h_poll(stream_visible, &w, WAIT_MS));
    expect_fsync(f, "INFO", "FA", NULL, "always");
    expect_fsync(f, "INFO", "FG", NULL, "group");
    expect_fsync(f, "CREATE", "FI", "{\"subjects\":[\"fi.>\"]}",
                 "interval:250");
}

/* Issue 8: a stream whose replica cannot serve a message never reports
 * an acked message missing. An R1 stream with a damaged record serves what
 * precedes it read-only (docs/decisions/0016); a MSG.GET or DIRECT.GET at or
 * after the damage used to answer "no message found" (10037 / 404) for a
 * message it had acknowledged; it now answers the retryable 503. A seq
 * the stream never had and a deleted one still read as not found on a
 * healthy stream (get_and_delete_message). */
static void
a_damaged_stream_never_reads_an_acked_message_as_missing(void **state)
{
    struct kv_js1 *f = *state;
    jsErrCode jerr = 0;
    add_stream_direct(f, "DMG", "dmg.*", true);
    assert_int_equal(publish(f, "dmg.a", "first-value", NULL, &jerr), 1);
    assert_int_equal(publish(f, "dmg.b", "flip-this-value", NULL, &jerr), 2);
    assert_int_equal(publish(f, "dmg.c", "third-value", NULL, &jerr), 3);
    kv_js1_stop(f);
    assert_int_equal(h_flip_segment_byte(f->k.data_dir, "flip-this-value"), 0);
    kv_js1_start(f);
    natsMsg *m = NULL;
    assert_int_equal(js_GetMsg(&m, f->js, "DMG", 1, NULL, &jerr), NATS_OK);
    assert_memory_equal(natsMsg_GetData(m), "first-value", 11);
    natsMsg_Destroy(m);
    for (uint64_t seq = 2; seq <= 3; seq++) {
        m = NULL;
        jerr = 0;
        assert_int_not_equal(js_GetMsg(&m, f->js, "DMG", seq, NULL, &jerr),
                             NATS_OK);
        assert_int_equal(jerr, JSClusterNotAvailErr);
    }
    /* DIRECT.GET: a 503 status, not 404 (libnats reads a 503 status as
     * "no responders": retry later, like nats-server's own 503). */
    natsMsg *reply = NULL;
    assert_int_equal(natsConnection_RequestString(&reply, f->nc,
                                                  "$JS.API.DIRECT.GET.DMG",
                                                  "{\"seq\":3}", WAIT_MS),
                     NATS_NO_RESPONDERS);
    natsMsg_Destroy(reply);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, kv_js1_teardown)
        T(create_info_delete_round_trip),
        T(publishes_are_acked_with_consecutive_seqs),
        T(async_publishes_all_acked_and_stored),
        T(same_msg_id_is_acked_as_duplicate),
        T(wrong_expected_last_sequence_is_refused),
        T(api_errors_name_in_use_overlap_and_idempotent_create),
        T(update_limits_and_purge),
        T(get_and_delete_message),
        T(direct_get_reads_by_seq_and_subject),
        T(direct_get_batches_and_multi_last_end_with_eob),
        T(restart_keeps_streams_and_messages),
        T(fsync_flag_is_the_default_for_new_streams),
        T(a_damaged_stream_never_reads_an_acked_message_as_missing),
#undef T
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
