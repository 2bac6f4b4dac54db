/* Stream sources through a real keeld with libnats
 * (docs/decisions/0035-sources-share-the-mirror-pump.md): a stream with
 * subjects of its own sourcing two origins, one filtered, stores every
 * origin message once, in order per source, under its own seqs, with
 * subject, payload and headers kept and Nats-Stream-Source "<origin>
 * <origin seq>" added; opt_start_seq and opt_start_time; a restart that
 * loads a snapshot leaves no duplicate and no gap; an origin deleted shows
 * in info and, recreated, is read past the position; sources added and
 * removed by an update; a message refused by discard new retried until a
 * purge makes room; config errors with nats-server's codes; subject_transforms
 * of sources and of a mirror (nats-server 2.10's): only what their sources
 * match is read, stored under the transformed subject, once, across a
 * restart. */
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
    long long msgs;
};

static bool reached(void *arg)
{
    struct want *w = arg;
    json_t *o = kv_js1_info(w->f, w->stream);
    bool ok = kv_js1_state(o, "messages") >= w->msgs;
    json_decref(o);
    return ok;
}

/* Wait (bounded) until stream holds msgs messages, then a little longer
 * for any message too many (a duplicate would land then). */
static void wait_msgs(struct kv_js1 *f, const char *stream, long long msgs)
{
    struct want w = {f, stream, msgs};
    if (!h_poll(reached, &w, WAIT_MS)) {
        json_t *o = kv_js1_info(f, stream);
        char *s = json_dumps(o, 0);
        fail_msg("stream %s never reached %lld messages: %s", stream, msgs, s);
    }
}

/* One stored message of the sourcing stream, read back with libnats. */
struct got {
    char subject[64];
    char data[64];
    char src[64]; /* Nats-Stream-Source, "" none */
    char trace[64];
};

static bool get_msg(struct kv_js1 *f, const char *stream, uint64_t seq,
                    struct got *g)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    memset(g, 0, sizeof *g);
    if (js_GetMsg(&m, f->js, stream, seq, NULL, &jerr) != NATS_OK) {
        return false;
    }
    snprintf(g->subject, sizeof g->subject, "%s", natsMsg_GetSubject(m));
    snprintf(g->data, sizeof g->data, "%.*s", natsMsg_GetDataLength(m),
             natsMsg_GetData(m));
    const char *v = NULL;
    if (natsMsgHeader_Get(m, "Nats-Stream-Source", &v) == NATS_OK) {
        snprintf(g->src, sizeof g->src, "%s", v);
    }
    if (natsMsgHeader_Get(m, "X-Trace", &v) == NATS_OK) {
        snprintf(g->trace, sizeof g->trace, "%s", v);
    }
    natsMsg_Destroy(m);
    return true;
}

/* Check the sourcing stream holds, in seqs 1..n, every message of each
 * origin once (counted in seen[o][origin seq]), in origin order per
 * source. Returns the message count per source in per[]. */
struct check {
    const char *names[2];
    unsigned seen[2][64];
    uint64_t last[2];
    unsigned per[2];
    unsigned own;
};

static void check_stream(struct kv_js1 *f, const char *stream, uint64_t n,
                         struct check *c)
{
    for (uint64_t s = 1; s <= n; s++) {
        struct got g;
        if (!get_msg(f, stream, s, &g)) {
            fail_msg("%s has no seq %llu: a gap", stream,
                     (unsigned long long)s);
        }
        if (g.src[0] == '\0') {
            c->own++; /* published to the stream's own subject */
            continue;
        }
        char name[32];
        unsigned long long oseq = 0;
        assert_int_equal(sscanf(g.src, "%31s %llu", name, &oseq), 2);
        int k = strcmp(name, c->names[0]) == 0   ? 0
                : strcmp(name, c->names[1]) == 0 ? 1
                                                 : -1;
        assert_true(k >= 0 && oseq > 0 && oseq < 64);
        if (oseq <= c->last[k]) {
            fail_msg("%s seq %llu: %s out of order after %llu", stream,
                     (unsigned long long)s, g.src,
                     (unsigned long long)c->last[k]);
        }
        c->last[k] = oseq;
        c->seen[k][oseq]++;
        c->per[k]++;
        /* Subject and payload kept: the payload names the origin seq. */
        char want[64];
        snprintf(want, sizeof want, "%s-%llu", name, oseq);
        assert_string_equal(g.data, want);
    }
}

static void publish_n(struct kv_js1 *f, const char *name, const char *subj0,
                      const char *subj1, int from, int to)
{
    for (int i = from; i <= to; i++) {
        char d[32], t[32];
        snprintf(d, sizeof d, "%s-%d", name, i);
        snprintf(t, sizeof t, "t%d", i);
        kv_js1_publish(f, i % 2 == 1 ? subj0 : subj1, d, "X-Trace", t);
    }
}

static void two_origins_each_message_once_in_order(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    kv_js1_create(f, "B", "{\"name\":\"B\",\"subjects\":[\"b.>\"]}");
    publish_n(f, "A", "a.x", "a.y", 1, 6);
    kv_js1_create(
        f, "AGG",
        "{\"name\":\"AGG\",\"subjects\":[\"agg\"],\"sources\":["
        "{\"name\":\"A\",\"filter_subject\":\"a.x\"},{\"name\":\"B\"}]}");
    publish_n(f, "B", "b.x", "b.y", 1, 10);
    publish_n(f, "A", "a.x", "a.y", 7, 12);
    /* Its own subject: its own next seq, no source header. */
    kv_js1_publish(f, "agg", "own", NULL, NULL);
    wait_msgs(f, "AGG", 6 + 10 + 1);
    json_t *o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 17);
    assert_int_equal(kv_js1_state(o, "first_seq"), 1);
    assert_int_equal(kv_js1_state(o, "last_seq"), 17);
    const json_t *si = json_object_get(o, "sources");
    assert_int_equal(json_array_size(si), 2);
    for (size_t i = 0; i < 2; i++) {
        const json_t *x = json_array_get(si, i);
        assert_string_equal(json_string_value(json_object_get(x, "name")),
                            i == 0 ? "A" : "B");
        assert_true(json_integer_value(json_object_get(x, "active")) >= 0);
        assert_null(json_object_get(x, "error"));
    }
    json_decref(o);
    struct check c = {.names = {"A", "B"}};
    check_stream(f, "AGG", 17, &c);
    assert_int_equal(c.own, 1);
    assert_int_equal(c.per[0], 6);
    assert_int_equal(c.per[1], 10);
    for (int s = 1; s <= 12; s++) {
        assert_int_equal(c.seen[0][s], s % 2 == 1 ? 1 : 0); /* a.x only */
    }
    for (int s = 1; s <= 10; s++) {
        assert_int_equal(c.seen[1][s], 1);
    }
    /* Headers kept, the source header exact. A's first message need not
     * be seq 1: B's, or the stream's own publish, can be stored before
     * the pump's first turn reaches A. */
    struct got g;
    uint64_t seq = 1;
    for (; seq <= 17; seq++) {
        assert_true(get_msg(f, "AGG", seq, &g));
        if (strcmp(g.src, "A 1") == 0) {
            break;
        }
    }
    assert_true(seq <= 17);
    assert_string_equal(g.src, "A 1");
    assert_string_equal(g.subject, "a.x");
    assert_string_equal(g.trace, "t1");
}

static void start_seq_and_start_time(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    kv_js1_create(f, "B", "{\"name\":\"B\",\"subjects\":[\"b.>\"]}");
    publish_n(f, "A", "a.x", "a.x", 1, 5);
    publish_n(f, "B", "b.x", "b.x", 1, 5);
    /* B's seq 4 time, from the API. */
    json_t *r = kv_js1_api(f, "$JS.API.STREAM.MSG.GET.B", "{\"seq\":4}");
    const char *t = json_string_value(
        json_object_get(json_object_get(r, "message"), "time"));
    assert_non_null(t);
    char body[512];
    snprintf(
        body, sizeof body,
        "{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\","
        "\"opt_start_seq\":3},{\"name\":\"B\",\"opt_start_time\":\"%s\"}]}",
        t);
    json_decref(r);
    kv_js1_create(f, "AGG", body);
    wait_msgs(f, "AGG", 3 + 2);
    struct check c = {.names = {"A", "B"}};
    check_stream(f, "AGG", 5, &c);
    assert_int_equal(c.per[0], 3);
    assert_int_equal(c.per[1], 2);
    assert_int_equal(c.seen[0][3], 1);
    assert_int_equal(c.seen[0][2], 0);
    assert_int_equal(c.seen[1][4], 1);
    assert_int_equal(c.seen[1][3], 0);
}

static void a_restart_leaves_no_duplicate_and_no_gap(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    kv_js1_create(f, "B", "{\"name\":\"B\",\"subjects\":[\"b.>\"]}");
    kv_js1_create(
        f, "AGG",
        "{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\"},{\"name\":\"B\"}]}");
    publish_n(f, "A", "a.x", "a.y", 1, 9);
    publish_n(f, "B", "b.x", "b.y", 1, 9);
    wait_msgs(f, "AGG", 18);
    kv_js1_restart(f);
    publish_n(f, "A", "a.x", "a.y", 10, 14);
    publish_n(f, "B", "b.x", "b.y", 10, 12);
    wait_msgs(f, "AGG", 26);
    /* One more of each: had the restart sent anything again, it would be
     * stored before these. */
    publish_n(f, "A", "a.x", "a.y", 15, 15);
    publish_n(f, "B", "b.x", "b.y", 13, 13);
    wait_msgs(f, "AGG", 28);
    json_t *o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 28);
    assert_int_equal(kv_js1_state(o, "last_seq"), 28);
    json_decref(o);
    struct check c = {.names = {"A", "B"}};
    check_stream(f, "AGG", 28, &c);
    for (int s = 1; s <= 15; s++) {
        assert_int_equal(c.seen[0][s], 1);
    }
    for (int s = 1; s <= 13; s++) {
        assert_int_equal(c.seen[1][s], 1);
    }
}

/* The err_code of AGG's first source's error (0: none). */
static long long source_err(struct kv_js1 *f)
{
    json_t *o = kv_js1_info(f, "AGG");
    const json_t *x = json_array_get(json_object_get(o, "sources"), 0);
    long long code = json_integer_value(
        json_object_get(json_object_get(x, "error"), "err_code"));
    json_decref(o);
    return code;
}

static bool source_error_is(void *arg)
{
    return source_err(arg) == 10059;
}

static bool source_stalled(void *arg)
{
    return source_err(arg) == 10077;
}

static void
an_origin_deleted_and_recreated_is_read_past_the_position(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    kv_js1_create(f, "AGG",
                  "{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\"}]}");
    publish_n(f, "A", "a.x", "a.x", 1, 3);
    wait_msgs(f, "AGG", 3);
    assert_int_equal(kv_js1_api_err(f, "$JS.API.STREAM.DELETE.A", ""), 0);
    assert_true(h_poll(source_error_is, f, WAIT_MS));
    /* Its messages stay. */
    struct got g;
    assert_true(get_msg(f, "AGG", 3, &g));
    assert_string_equal(g.src, "A 3");
    /* Recreated, its seqs start at 1 again: those at or below the
     * position (3) are not read, as nats-server 2.9.10 resumes at the
     * position + 1; the rest are. */
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    for (int i = 1; i <= 5; i++) {
        char d[16];
        snprintf(d, sizeof d, "new-%d", i);
        kv_js1_publish(f, "a.x", d, NULL, NULL);
    }
    wait_msgs(f, "AGG", 5);
    assert_true(get_msg(f, "AGG", 4, &g));
    assert_string_equal(g.src, "A 4");
    assert_string_equal(g.data, "new-4");
    assert_true(get_msg(f, "AGG", 5, &g));
    assert_string_equal(g.data, "new-5");
    json_t *o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 5);
    assert_null(json_object_get(
        json_array_get(json_object_get(o, "sources"), 0), "error"));
    json_decref(o);
}

/* A sourced message refused by discard new on a full stream is retried
 * until it fits, never skipped: after a purge makes room the rest arrive,
 * each once (nats-server 2.9.10 retries it too). */
static void a_refused_sourced_message_arrives_after_a_purge(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    publish_n(f, "A", "a.x", "a.y", 1, 8);
    kv_js1_create(f, "AGG",
                  "{\"name\":\"AGG\",\"max_msgs\":5,"
                  "\"discard\":\"new\",\"sources\":[{\"name\":\"A\"}]}");
    wait_msgs(f, "AGG", 5);
    /* Stalled at origin seq 6: the refusal shows, the lag counts it. */
    assert_true(h_poll(source_stalled, f, WAIT_MS));
    json_t *o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 5);
    assert_int_equal(
        json_integer_value(json_object_get(
            json_array_get(json_object_get(o, "sources"), 0), "lag")),
        3);
    json_decref(o);
    assert_int_equal(kv_js1_api_err(f, "$JS.API.STREAM.PURGE.AGG", ""), 0);
    wait_msgs(f, "AGG", 3);
    /* One more: anything sent twice would be stored before it. */
    publish_n(f, "A", "a.x", "a.y", 9, 9);
    wait_msgs(f, "AGG", 4);
    o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 4);
    assert_int_equal(kv_js1_state(o, "first_seq"), 6);
    assert_int_equal(kv_js1_state(o, "last_seq"), 9);
    json_decref(o);
    for (uint64_t s = 6; s <= 9; s++) {
        struct got g;
        char want[32];
        assert_true(get_msg(f, "AGG", s, &g));
        snprintf(want, sizeof want, "A %llu", (unsigned long long)s);
        assert_string_equal(g.src, want);
        snprintf(want, sizeof want, "A-%llu", (unsigned long long)s);
        assert_string_equal(g.data, want);
    }
    assert_int_equal(source_err(f), 0);
}

static void an_update_adds_and_removes_sources(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    kv_js1_create(f, "B", "{\"name\":\"B\",\"subjects\":[\"b.>\"]}");
    publish_n(f, "A", "a.x", "a.x", 1, 2);
    publish_n(f, "B", "b.x", "b.x", 1, 4);
    kv_js1_create(f, "AGG",
                  "{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\"}]}");
    wait_msgs(f, "AGG", 2);
    /* B added from its opt_start_seq; A removed. */
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.AGG",
                       "{\"name\":\"AGG\",\"sources\":[{\"name\":\"B\","
                       "\"opt_start_seq\":3}]}"),
        0);
    wait_msgs(f, "AGG", 4);
    publish_n(f, "A", "a.x", "a.x", 3, 3); /* not read any more */
    publish_n(f, "B", "b.x", "b.x", 5, 5);
    wait_msgs(f, "AGG", 5);
    json_t *o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 5);
    assert_int_equal(json_array_size(json_object_get(o, "sources")), 1);
    json_decref(o);
    struct check c = {.names = {"A", "B"}};
    check_stream(f, "AGG", 5, &c);
    assert_int_equal(c.per[0], 2);
    assert_int_equal(c.per[1], 3);
    assert_int_equal(c.seen[1][3], 1);
    /* An existing source's start changed: accepted and ignored once read,
     * as nats-server 2.9.10 does. */
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.AGG",
                       "{\"name\":\"AGG\",\"sources\":[{\"name\":\"B\","
                       "\"opt_start_seq\":1}]}"),
        0);
    publish_n(f, "B", "b.x", "b.x", 6, 6);
    wait_msgs(f, "AGG", 6);
    o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 6);
    json_decref(o);
}

static void config_errors_carry_nats_server_codes(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A",
                  "{\"name\":\"A\",\"subjects\":[\"a.>\"],"
                  "\"max_msg_size\":1024}");
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.M",
                       "{\"name\":\"M\",\"mirror\":{\"name\":\"A\"},"
                       "\"sources\":[{\"name\":\"A\"}]}"),
        10031);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.S",
                       "{\"name\":\"S\",\"sources\":[{\"name\":\"S\"}]}"),
        10052);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.S",
                       "{\"name\":\"S\",\"sources\":[{\"name\":\"A\"},"
                       "{\"name\":\"A\"}]}"),
        10052);
    assert_int_equal(kv_js1_api_err(f, "$JS.API.STREAM.CREATE.S",
                                    "{\"name\":\"S\",\"max_msg_size\":100,"
                                    "\"sources\":[{\"name\":\"A\"}]}"),
                     10046);
    /* A cycle through two streams, and behind a mirror. */
    kv_js1_create(f, "C1", "{\"name\":\"C1\",\"sources\":[{\"name\":\"C2\"}]}");
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.C2",
                       "{\"name\":\"C2\",\"sources\":[{\"name\":\"C1\"}]}"),
        10052);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.CREATE.C2",
                       "{\"name\":\"C2\",\"mirror\":{\"name\":\"C1\"}}"),
        10052);
    kv_js1_create(f, "C3", "{\"name\":\"C3\",\"subjects\":[\"c3\"]}");
    assert_int_equal(kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.C3",
                                    "{\"name\":\"C3\",\"subjects\":[\"c3\"],"
                                    "\"sources\":[{\"name\":\"C1\"}]}"),
                     0);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.C1",
                       "{\"name\":\"C1\",\"sources\":[{\"name\":\"C2\"},"
                       "{\"name\":\"C3\"}]}"),
        10052);
}

/* Every seq 1..n of stream holds subject want(seq's source header). */
static void check_subjects(struct kv_js1 *f, const char *stream, uint64_t n,
                           void (*want)(const char *src, char *out, size_t cap))
{
    for (uint64_t s = 1; s <= n; s++) {
        struct got g;
        char w[64];
        assert_true(get_msg(f, stream, s, &g));
        want(g.src, w, sizeof w);
        if (strcmp(g.subject, w) != 0) {
            fail_msg("%s seq %llu (%s): subject %s, want %s", stream,
                     (unsigned long long)s, g.src, g.subject, w);
        }
    }
}

/* A's a.x is stored as ax (a.y is not read); B's b.<t> as bb.<t>. */
static void agg_subject(const char *src, char *out, size_t cap)
{
    unsigned long long oseq = 0;
    char name[32];
    assert_int_equal(sscanf(src, "%31s %llu", name, &oseq), 2);
    if (strcmp(name, "A") == 0) {
        snprintf(out, cap, "ax");
    } else {
        snprintf(out, cap, "bb.%s", oseq % 2 == 1 ? "x" : "y");
    }
}

static void source_transforms_store_transformed_subjects(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    kv_js1_create(f, "B", "{\"name\":\"B\",\"subjects\":[\"b.>\"]}");
    publish_n(f, "A", "a.x", "a.y", 1, 6);
    kv_js1_create(f, "AGG",
                  "{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\","
                  "\"subject_transforms\":[{\"src\":\"a.x\",\"dest\":\"ax\"}]},"
                  "{\"name\":\"B\",\"subject_transforms\":[{\"src\":\"b.*\","
                  "\"dest\":\"bb.$1\"}]}]}");
    publish_n(f, "B", "b.x", "b.y", 1, 6);
    wait_msgs(f, "AGG", 3 + 6);
    json_t *o = kv_js1_info(f, "AGG");
    const json_t *t = json_object_get(
        json_array_get(json_object_get(o, "sources"), 1), "subject_transforms");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(t, 0), "dest")),
        "bb.$1");
    json_decref(o);
    /* The entries in the log hold the transformed subjects: a restart
     * that loads a snapshot and replays the rest stores them again the
     * same, sends nothing twice and skips nothing. */
    kv_js1_restart(f);
    publish_n(f, "A", "a.x", "a.y", 7, 10);
    publish_n(f, "B", "b.x", "b.y", 7, 9);
    wait_msgs(f, "AGG", 5 + 9);
    publish_n(f, "B", "b.x", "b.y", 10, 10);
    wait_msgs(f, "AGG", 15);
    o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 15);
    assert_int_equal(kv_js1_state(o, "last_seq"), 15);
    json_decref(o);
    struct check c = {.names = {"A", "B"}};
    check_stream(f, "AGG", 15, &c);
    for (int s = 1; s <= 10; s++) {
        assert_int_equal(c.seen[0][s], s % 2 == 1 ? 1 : 0); /* a.x only */
        assert_int_equal(c.seen[1][s], 1);
    }
    check_subjects(f, "AGG", 15, agg_subject);
}

/* An update that changes a source's transforms applies them from the
 * position on: nothing is read again, what was stored keeps its subject
 * (docs/decisions/0037-mirror-and-source-transforms-in-the-log.md). */
static void changed_source_transforms_apply_from_the_position(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "B", "{\"name\":\"B\",\"subjects\":[\"b.>\"]}");
    kv_js1_create(f, "AGG",
                  "{\"name\":\"AGG\",\"sources\":[{\"name\":\"B\","
                  "\"subject_transforms\":[{\"src\":\"b.*\","
                  "\"dest\":\"bb.$1\"}]}]}");
    publish_n(f, "B", "b.x", "b.y", 1, 2);
    wait_msgs(f, "AGG", 2);
    assert_int_equal(
        kv_js1_api_err(f, "$JS.API.STREAM.UPDATE.AGG",
                       "{\"name\":\"AGG\",\"sources\":[{\"name\":\"B\","
                       "\"subject_transforms\":[{\"src\":\"b.*\","
                       "\"dest\":\"cc.$1\"}]}]}"),
        0);
    publish_n(f, "B", "b.x", "b.y", 3, 3);
    wait_msgs(f, "AGG", 3);
    json_t *o = kv_js1_info(f, "AGG");
    assert_int_equal(kv_js1_state(o, "messages"), 3);
    json_decref(o);
    const char *want[] = {"bb.x", "bb.y", "cc.x"};
    for (uint64_t s = 1; s <= 3; s++) {
        struct got g;
        assert_true(get_msg(f, "AGG", s, &g));
        assert_string_equal(g.subject, want[s - 1]);
    }
}

static void mirror_transforms_keep_origin_seqs(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "O", "{\"name\":\"O\",\"subjects\":[\"o.>\"]}");
    publish_n(f, "O", "o.x", "o.y", 1, 6);
    kv_js1_create(
        f, "M",
        "{\"name\":\"M\",\"mirror\":{\"name\":\"O\","
        "\"subject_transforms\":[{\"src\":\"o.x\",\"dest\":\"m.x\"}]}}");
    wait_msgs(f, "M", 3);
    kv_js1_restart(f);
    publish_n(f, "O", "o.x", "o.y", 7, 10);
    wait_msgs(f, "M", 5);
    publish_n(f, "O", "o.x", "o.y", 11, 11);
    wait_msgs(f, "M", 6);
    json_t *o = kv_js1_info(f, "M");
    assert_int_equal(kv_js1_state(o, "messages"), 6);
    assert_int_equal(kv_js1_state(o, "last_seq"), 11);
    json_decref(o);
    /* The origin's odd seqs, each under m.x with its payload. */
    for (uint64_t s = 1; s <= 11; s++) {
        struct got g;
        char want[32];
        bool have = get_msg(f, "M", s, &g);
        assert_int_equal(have, s % 2 == 1);
        if (have) {
            snprintf(want, sizeof want, "O-%llu", (unsigned long long)s);
            assert_string_equal(g.data, want);
            assert_string_equal(g.subject, "m.x");
        }
    }
}

static void transform_config_errors_carry_nats_server_codes(void **state)
{
    struct kv_js1 *f = *state;
    kv_js1_create(f, "A", "{\"name\":\"A\",\"subjects\":[\"a.>\"]}");
    const struct {
        const char *body;
        long long code;
    } bad[] = {
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"A\",\"filter_subject\":"
         "\"a.x\",\"subject_transforms\":[{\"src\":\"a.y\",\"dest\":\"y\"}]}]}",
         10144},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"A\",\"subject_transforms\":"
         "[{\"src\":\"a.*\",\"dest\":\"y.$2\"}]}]}",
         10146},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"A\",\"subject_transforms\":"
         "[{\"src\":\"a.>\"},{\"src\":\"a.x\"}]}]}",
         10147},
        {"{\"name\":\"S\",\"mirror\":{\"name\":\"A\",\"filter_subject\":"
         "\"a.x\",\"subject_transforms\":[{\"src\":\"a.y\",\"dest\":\"y\"}]}}",
         10150},
        {"{\"name\":\"S\",\"mirror\":{\"name\":\"A\",\"subject_transforms\":"
         "[{\"src\":\"a.*.x\",\"dest\":\"x\"},{\"src\":\"a.y.*\","
         "\"dest\":\"y\"}]}}",
         10152},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(
            kv_js1_api_err(f, "$JS.API.STREAM.CREATE.S", bad[i].body),
            bad[i].code);
    }
    /* A mirror's transforms are its config: no update changes them. */
    kv_js1_create(
        f, "M",
        "{\"name\":\"M\",\"mirror\":{\"name\":\"A\","
        "\"subject_transforms\":[{\"src\":\"a.x\",\"dest\":\"x\"}]}}");
    assert_int_equal(
        kv_js1_api_err(
            f, "$JS.API.STREAM.UPDATE.M",
            "{\"name\":\"M\",\"mirror\":{\"name\":\"A\","
            "\"subject_transforms\":[{\"src\":\"a.x\",\"dest\":\"y\"}]}}"),
        10055);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, kv_js1_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(two_origins_each_message_once_in_order),
        T(start_seq_and_start_time),
        T(a_restart_leaves_no_duplicate_and_no_gap),
        T(an_origin_deleted_and_recreated_is_read_past_the_position),
        T(a_refused_sourced_message_arrives_after_a_purge),
        T(an_update_adds_and_removes_sources),
        T(config_errors_carry_nats_server_codes),
        T(source_transforms_store_transformed_subjects),
        T(changed_source_transforms_apply_from_the_position),
        T(mirror_transforms_keep_origin_seqs),
        T(transform_config_errors_carry_nats_server_codes),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
