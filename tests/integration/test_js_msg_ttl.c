/* Per-message TTL and subject delete markers through a real keeld with
 * libnats (which does not know the fields: raw API requests and raw
 * Nats-TTL headers, as a 2.11 client sends them)
 * (docs/decisions/0034-per-message-ttl-in-the-state-machine.md):
 * - a TTL'd message goes when its TTL passes, `never` outlives max_age;
 * - nats-server 2.11's errors: 10166 without allow_msg_ttl, 10165 for an
 *   invalid value, the config rules, allow_msg_ttl not turned off;
 * - the last message of a subject leaves a marker with 2.11's headers,
 *   which expires too, and TTLs still pending at a restart that loads a
 *   snapshot expire after it. */
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
#define EXPIRE_WAIT_MS 15000 /* TTLs of a few seconds, 1s ticks */

/* Snapshot every 4 entries so a restart loads one. */
static const char *const extra[] = {"--snapshot_entries", "4", NULL};

static int setup(void **state)
{
    return kv_js1_setup(state, extra, WAIT_MS);
}

static json_t *api(struct kv_js1 *f, const char *subject, const char *body)
{
    return kv_api_json(f->nc, subject, body, WAIT_MS);
}

/* The API error code of a reply (0 for none); the reply is freed. */
static int api_err(json_t *o, char *desc, size_t len)
{
    json_t *e = json_object_get(o, "error");
    int code = (int)json_integer_value(json_object_get(e, "err_code"));
    if (desc != NULL) {
        snprintf(desc, len, "%s",
                 e != NULL
                     ? json_string_value(json_object_get(e, "description"))
                     : "");
    }
    json_decref(o);
    return code;
}

static void create(struct kv_js1 *f, const char *name, const char *body)
{
    char subj[128];
    char desc[256];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    int code = api_err(api(f, subj, body), desc, sizeof desc);
    if (code != 0) {
        fail_msg("create %s: %d %s", name, code, desc);
    }
}

/* Publish with a raw Nats-TTL (NULL: none); the API error (0: stored). */
static int publish_ttl(struct kv_js1 *f, const char *subj, const char *ttl)
{
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(natsMsg_Create(&m, subj, NULL, "v", 1), NATS_OK);
    if (ttl != NULL) {
        assert_int_equal(natsMsgHeader_Set(m, "Nats-TTL", ttl), NATS_OK);
    }
    natsStatus s = js_PublishMsg(&pa, f->js, m, NULL, &jerr);
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
    return s == NATS_OK ? 0 : (int)jerr;
}

struct wait_msgs {
    struct kv_js1 *f;
    const char *stream;
    uint64_t want;
};

static uint64_t msgs_of(struct kv_js1 *f, const char *stream)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetStreamInfo(&si, f->js, stream, NULL, &jerr),
                     NATS_OK);
    uint64_t n = si->State.Msgs;
    jsStreamInfo_Destroy(si);
    return n;
}

static bool msgs_are(void *arg)
{
    struct wait_msgs *w = arg;
    return msgs_of(w->f, w->stream) == w->want;
}

static void wait_msgs(struct kv_js1 *f, const char *stream, uint64_t want)
{
    struct wait_msgs w = {f, stream, want};
    if (!h_poll(msgs_are, &w, EXPIRE_WAIT_MS)) {
        fail_msg("%s holds %llu messages, not %llu", stream,
                 (unsigned long long)msgs_of(f, stream),
                 (unsigned long long)want);
    }
}

/* The last message of subj, or NULL when it has none. */
static natsMsg *last_of(struct kv_js1 *f, const char *stream, const char *subj)
{
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    if (js_GetLastMsg(&m, f->js, stream, subj, NULL, &jerr) != NATS_OK) {
        return NULL;
    }
    return m;
}

static void a_ttl_expires_and_never_outlives_max_age(void **state)
{
    struct kv_js1 *f = *state;
    create(f, "T",
           "{\"name\":\"T\",\"subjects\":[\"t.>\"],"
           "\"allow_msg_ttl\":true,\"max_age\":4000000000}");
    long long t0 = h_now_ms();
    assert_int_equal(publish_ttl(f, "t.short", "1s"), 0);
    assert_int_equal(publish_ttl(f, "t.keep", "never"), 0);
    assert_int_equal(publish_ttl(f, "t.plain", NULL), 0);
    assert_int_equal(publish_ttl(f, "t.long", "60"), 0);
    wait_msgs(f, "T", 3); /* t.short went first */
    natsMsg *m = last_of(f, "T", "t.short");
    assert_null(m);
    assert_true(h_now_ms() - t0 >= 1000); /* not before its TTL */
    wait_msgs(f, "T", 1); /* max_age: t.plain and t.long (60s > 4s) */
    assert_true(h_now_ms() - t0 >= 4000);
    m = last_of(f, "T", "t.keep");
    assert_non_null(m);
    const char *v = NULL;
    assert_int_equal(natsMsgHeader_Get(m, "Nats-TTL", &v), NATS_OK);
    assert_string_equal(v, "never");
    natsMsg_Destroy(m);
}

static void errors_are_nats_server_2_11s(void **state)
{
    struct kv_js1 *f = *state;
    char desc[256];
    create(f, "N", "{\"name\":\"N\",\"subjects\":[\"n\"]}");
    assert_int_equal(publish_ttl(f, "n", "5s"), 10166);
    assert_int_equal(publish_ttl(f, "n", "soon"), 10166);
    assert_int_equal(msgs_of(f, "N"), 0);
    create(f, "Y",
           "{\"name\":\"Y\",\"subjects\":[\"y\"],"
           "\"allow_msg_ttl\":true}");
    assert_int_equal(publish_ttl(f, "y", "500ms"), 10165);
    assert_int_equal(publish_ttl(f, "y", "-1"), 10165);
    assert_int_equal(publish_ttl(f, "y", "2m"), 0);
    assert_int_equal(msgs_of(f, "Y"), 1);
    assert_int_equal(api_err(api(f, "$JS.API.STREAM.UPDATE.Y",
                                 "{\"name\":\"Y\",\"subjects\":[\"y\"]}"),
                             desc, sizeof desc),
                     10052);
    assert_string_equal(desc, "message TTL status can not be disabled");
    assert_int_equal(api_err(api(f, "$JS.API.STREAM.CREATE.M",
                                 "{\"name\":\"M\",\"subjects\":[\"m\"],"
                                 "\"subject_delete_marker_ttl\":500000000}"),
                             desc, sizeof desc),
                     10052);
    assert_non_null(strstr(desc, "at least 1 second"));
    assert_int_equal(
        api_err(api(f, "$JS.API.STREAM.CREATE.M",
                    "{\"name\":\"M\",\"subjects\":[\"m\"],\"pedantic\":true,"
                    "\"subject_delete_marker_ttl\":1000000000}"),
                desc, sizeof desc),
        10052);
    assert_non_null(strstr(desc, "message TTLs are disabled"));
    /* Without pedantic, markers turn TTLs and rollups on. */
    json_t *o = api(f, "$JS.API.STREAM.CREATE.M",
                    "{\"name\":\"M\",\"subjects\":[\"m\"],"
                    "\"subject_delete_marker_ttl\":1000000000}");
    json_t *cfg = json_object_get(o, "config");
    assert_true(json_is_true(json_object_get(cfg, "allow_msg_ttl")));
    assert_true(json_is_true(json_object_get(cfg, "allow_rollup_hdrs")));
    assert_int_equal(
        json_integer_value(json_object_get(cfg, "subject_delete_marker_ttl")),
        1000000000);
    json_decref(o);
    /* A TTL under the marker TTL is stored raised to it. */
    create(f, "R",
           "{\"name\":\"R\",\"subjects\":[\"r\"],"
           "\"subject_delete_marker_ttl\":5000000000}");
    assert_int_equal(publish_ttl(f, "r", "2s"), 0);
    natsMsg *m = last_of(f, "R", "r");
    assert_non_null(m);
    const char *v = NULL;
    assert_int_equal(natsMsgHeader_Get(m, "Nats-TTL", &v), NATS_OK);
    assert_string_equal(v, "5");
    natsMsg_Destroy(m);
}

static void header_is(natsMsg *m, const char *name, const char *want)
{
    const char *v = NULL;
    assert_int_equal(natsMsgHeader_Get(m, name, &v), NATS_OK);
    assert_string_equal(v, want);
}

struct wait_marker {
    struct kv_js1 *f;
};

static bool marker_stored(void *arg)
{
    struct wait_marker *w = arg;
    natsMsg *m = last_of(w->f, "K", "k.a");
    const char *v = NULL;
    bool ok =
        m != NULL && natsMsgHeader_Get(m, "Nats-Marker-Reason", &v) == NATS_OK;
    natsMsg_Destroy(m);
    return ok;
}

static void a_marker_replaces_the_last_message_across_a_restart(void **state)
{
    struct kv_js1 *f = *state;
    create(f, "K",
           "{\"name\":\"K\",\"subjects\":[\"k.>\"],"
           "\"allow_msg_ttl\":true,\"allow_rollup_hdrs\":true,"
           "\"subject_delete_marker_ttl\":2000000000}");
    /* More entries than --snapshot_entries: the restart loads a
     * snapshot holding the pending TTLs. */
    assert_int_equal(publish_ttl(f, "k.a", "4s"), 0);
    for (int i = 0; i < 6; i++) {
        assert_int_equal(publish_ttl(f, "k.b", NULL), 0);
    }
    kv_js1_restart(f);
    assert_int_equal(msgs_of(f, "K"), 7);
    struct wait_marker w = {f};
    assert_true(h_poll(marker_stored, &w, EXPIRE_WAIT_MS));
    natsMsg *m = last_of(f, "K", "k.a");
    assert_non_null(m);
    header_is(m, "Nats-Marker-Reason", "MaxAge");
    header_is(m, "Nats-TTL", "2s");
    header_is(m, "Nats-Rollup", "sub");
    assert_int_equal(natsMsg_GetDataLength(m), 0);
    assert_int_equal(natsMsg_GetSequence(m), 8);
    natsMsg_Destroy(m);
    /* The marker expires by its own TTL and leaves nothing. */
    wait_msgs(f, "K", 6);
    assert_null(last_of(f, "K", "k.a"));
    kv_js1_restart(f);
    assert_int_equal(msgs_of(f, "K"), 6);
    assert_null(last_of(f, "K", "k.a"));
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, kv_js1_teardown)
    const struct CMUnitTest tests[] = {
        T(a_ttl_expires_and_never_outlives_max_age),
        T(errors_are_nats_server_2_11s),
        T(a_marker_replaces_the_last_message_across_a_restart),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
