/* srv_stream_ttl: per-message TTL and subject delete markers in the stream
 * state machine (docs/decisions/0034-per-message-ttl-in-the-state-
 * machine.md): Nats-TTL values read as nats-server 2.11 reads them, TTL
 * removal by entry timestamps only, `never` outliving max_age, markers
 * when the last message of a subject expires, the config rules, and a
 * snapshot (and a replay from the log) keeping every pending TTL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "keel_stream_entry.h"
#include "srv_js_config.h"
#include "srv_msg_ttl.h"
#include "srv_stream_sm.h"
#include "stream_sm_fixture.h"

#define SEC 1000000000LL
#define ENTRIES_MAX 64

struct fixture {
    struct srv_stream_sm sm;
    uint64_t index;
    struct srv_stream_result res;
    /* Every applied entry, encoded, to replay into a second machine. */
    uint8_t *log[ENTRIES_MAX];
    size_t log_len[ENTRIES_MAX];
    size_t n;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || srv_stream_sm_init(&f->sm, "S") != 0) {
        free(f);
        return -1;
    }
    f->index = 1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_stream_sm_close(&f->sm);
    for (size_t i = 0; i < f->n; i++) {
        free(f->log[i]);
    }
    free(f);
    return 0;
}

static void apply(struct fixture *f, const struct keel_stream_entry *e)
{
    uint8_t *buf;
    size_t len;
    sm_fixture_apply_to(&f->sm, f->index++, &f->res, e, &buf, &len);
    assert_true(f->n < ENTRIES_MAX);
    f->log[f->n] = buf;
    f->log_len[f->n++] = len;
}

static void pub_raw(struct fixture *f, int64_t ts, const char *subj,
                    const char *hdr)
{
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_PUBLISH,
        .ts_ns = ts,
        .subject = subj,
        .subject_len = strlen(subj),
        .hdr = (const uint8_t *)hdr,
        .hdr_len = hdr != NULL ? strlen(hdr) : 0,
        .data = (const uint8_t *)"v",
        .data_len = 1,
    };
    apply(f, &e);
}

static void pub_ttl(struct fixture *f, int64_t ts, const char *subj,
                    const char *ttl)
{
    char hdr[128];
    if (ttl == NULL) {
        pub_raw(f, ts, subj, NULL);
        return;
    }
    snprintf(hdr, sizeof hdr, "NATS/1.0\r\nNats-TTL: %s\r\n\r\n", ttl);
    pub_raw(f, ts, subj, hdr);
}

static void config(struct fixture *f, const char *json)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_CONFIG,
                                  .subject = json,
                                  .subject_len = strlen(json)};
    apply(f, &e);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
}

static void tick(struct fixture *f, int64_t ts)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_TICK, .ts_ns = ts};
    apply(f, &e);
}

static bool live(const struct fixture *f, uint64_t seq)
{
    return srv_stream_sm_get(&f->sm, seq) != NULL;
}

static void ttl_values_are_read_as_nats_server_2_11_reads_them(void **state)
{
    (void)state;
    const struct {
        const char *v;
        int rv;
        int64_t secs;
    } cases[] = {
        {"5s", 0, 5},
        {"1m", 0, 60},
        {"1h30m", 0, 5400},
        {"1.5s", 0, 1},
        {"90", 0, 90},
        {"never", 0, -1},
        {"NEVER", 0, -1},
        {"1000ms", 0, 1},
        {"500ms", KEEL_EINVAL, 0},
        {"0", KEEL_EINVAL, 0},
        {"-5", KEEL_EINVAL, 0},
        {"-1s", KEEL_EINVAL, 0},
        {"5x", KEEL_EINVAL, 0},
        {"abc", KEEL_EINVAL, 0},
        {"", KEEL_EINVAL, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t secs = 99;
        int rv = srv_msg_ttl_parse(cases[i].v, strlen(cases[i].v), &secs);
        if (rv != cases[i].rv || (rv == 0 && secs != cases[i].secs)) {
            fail_msg("%s: rv %d secs %lld", cases[i].v, rv, (long long)secs);
        }
    }
    char h[SRV_MSG_MARKER_HDR_MAX];
    size_t n = srv_msg_marker_hdr(60, h, sizeof h);
    assert_int_equal(n, strlen(h));
    assert_string_equal(h, "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\n"
                           "Nats-TTL: 1m0s\r\nNats-Rollup: sub\r\n\r\n");
    srv_msg_marker_hdr(3725, h, sizeof h);
    assert_non_null(strstr(h, "Nats-TTL: 1h2m5s\r\n"));
    srv_msg_marker_hdr(5, h, sizeof h);
    assert_non_null(strstr(h, "Nats-TTL: 5s\r\n"));
}

/* The leader stores a TTL under the marker TTL raised to it, as 2.11. */
static void a_ttl_under_the_marker_ttl_is_stored_raised(void **state)
{
    (void)state;
    const char *h = "NATS/1.0\r\nA: 1\r\nnats-ttl: 5s\r\nB: 2\r\n\r\n";
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(srv_msg_ttl_raise(h, strlen(h), 60, &out, &n), 0);
    assert_non_null(out);
    assert_int_equal(n, strlen("NATS/1.0\r\nA: 1\r\nB: 2\r\nNats-TTL: 60\r\n"
                               "\r\n"));
    assert_memory_equal(out, "NATS/1.0\r\nA: 1\r\nB: 2\r\nNats-TTL: 60\r\n\r\n",
                        n);
    int64_t secs = 0;
    assert_int_equal(srv_msg_ttl_of(out, n, &secs), 0);
    assert_int_equal(secs, 60);
    free(out);
    const char *keep[] = {"NATS/1.0\r\nNats-TTL: 90\r\n\r\n",
                          "NATS/1.0\r\nNats-TTL: never\r\n\r\n",
                          "NATS/1.0\r\nA: 1\r\n\r\n"};
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(
            srv_msg_ttl_raise(keep[i], strlen(keep[i]), 60, &out, &n), 0);
        assert_null(out);
    }
    assert_int_equal(srv_msg_ttl_raise(NULL, 0, 60, &out, &n), 0);
    assert_null(out);
}

static void a_ttl_removes_the_message_at_the_entry_time_it_passes(void **state)
{
    struct fixture *f = *state;
    config(f, "{\"name\":\"S\",\"allow_msg_ttl\":true}");
    pub_ttl(f, 10 * SEC, "a", "5s");
    pub_ttl(f, 11 * SEC, "b", "2");
    pub_ttl(f, 12 * SEC, "c", NULL);
    assert_int_equal(f->sm.ttl_live, 2);
    int64_t at = 0;
    srv_stream_sm_next_expiry(&f->sm, &at);
    assert_int_equal(at, 13 * SEC);
    tick(f, 13 * SEC - 1); /* a replica's clock does not matter: the
                              entry's time does */
    assert_true(live(f, 2));
    tick(f, 13 * SEC);
    assert_false(live(f, 2));
    assert_true(live(f, 1));
    srv_stream_sm_next_expiry(&f->sm, &at);
    assert_int_equal(at, 15 * SEC);
    /* A publish entry's time expires too. */
    pub_ttl(f, 15 * SEC, "d", NULL);
    assert_false(live(f, 1));
    assert_true(live(f, 3) && live(f, 4));
    assert_int_equal(f->sm.msgs, 2);
    assert_int_equal(f->sm.ttl_live, 0);
    srv_stream_sm_next_expiry(&f->sm, &at);
    assert_int_equal(at, INT64_MAX);
}

static void without_allow_msg_ttl_a_ttl_is_refused_at_apply(void **state)
{
    struct fixture *f = *state;
    pub_ttl(f, 10 * SEC, "a", "5s");
    assert_int_equal(f->res.jerr, SRV_JS_ETTL_DISABLED);
    assert_int_equal(f->sm.msgs, 0);
    config(f, "{\"name\":\"S\",\"allow_msg_ttl\":true}");
    pub_ttl(f, 10 * SEC, "a", "500ms");
    assert_int_equal(f->res.jerr, SRV_JS_ETTL_INVALID);
    assert_int_equal(f->sm.msgs, 0);
    pub_ttl(f, 10 * SEC, "a", "never");
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->sm.msgs, 1);
}

static void never_outlives_max_age_and_a_ttl_cannot_pass_it(void **state)
{
    struct fixture *f = *state;
    config(f, "{\"name\":\"S\",\"allow_msg_ttl\":true,"
              "\"max_age\":10000000000}");
    pub_ttl(f, 1 * SEC, "a", "never");
    pub_ttl(f, 2 * SEC, "b", "1h");
    pub_ttl(f, 3 * SEC, "c", NULL);
    tick(f, 12 * SEC);
    assert_true(live(f, 1));
    assert_false(live(f, 2)); /* max_age still bounds a longer TTL */
    assert_true(live(f, 3));
    tick(f, 13 * SEC);
    assert_false(live(f, 3));
    assert_true(live(f, 1));
    int64_t at = 0;
    srv_stream_sm_next_expiry(&f->sm, &at);
    /* Only a never message is left; b's removed TTL may still answer a
     * tick that then removes nothing. */
    assert_true(at == INT64_MAX || at == 3602 * SEC);
    tick(f, 3602 * SEC);
    assert_true(live(f, 1));
    srv_stream_sm_next_expiry(&f->sm, &at);
    assert_int_equal(at, INT64_MAX);
    pub_ttl(f, 14 * SEC, "d", NULL);
    srv_stream_sm_next_expiry(&f->sm, &at);
    assert_int_equal(at, 24 * SEC);
}

static void the_last_message_of_a_subject_leaves_a_marker(void **state)
{
    struct fixture *f = *state;
    config(f, "{\"name\":\"S\",\"allow_msg_ttl\":true,"
              "\"max_age\":10000000000,"
              "\"subject_delete_marker_ttl\":60000000000}");
    pub_ttl(f, 1 * SEC, "a", NULL);
    pub_ttl(f, 2 * SEC, "a", NULL);
    pub_ttl(f, 3 * SEC, "b", "120");
    pub_ttl(f, 4 * SEC, "c", "70");
    tick(f, 12 * SEC); /* a#1, a#2 expire: a's marker */
    assert_int_equal(f->res.markers, 1);
    assert_true(live(f, 3));
    assert_int_equal(f->res.marker_first, 5);
    tick(f, 13 * SEC); /* b expires: b's marker */
    assert_int_equal(f->res.markers, 1);
    assert_int_equal(f->res.marker_first, 6);
    const struct srv_stream_slot *m = srv_stream_sm_get(&f->sm, 5);
    assert_non_null(m);
    assert_int_equal(srv_stream_slot_marker(m), SRV_STREAM_MARKER_STORED);
    assert_string_equal(m->subj->s, "a");
    assert_int_equal(m->ts_ns, 12 * SEC);
    assert_int_equal(srv_stream_slot_expire(m), 72 * SEC);
    m = srv_stream_sm_get(&f->sm, 6);
    assert_non_null(m);
    assert_string_equal(m->subj->s, "b");
    assert_true(live(f, 4));
    tick(f, 14 * SEC); /* c's last message ages out */
    assert_int_equal(f->res.markers, 1);
    m = srv_stream_sm_get(&f->sm, 7);
    assert_non_null(m);
    assert_string_equal(m->subj->s, "c");
    assert_int_equal(f->sm.msgs, 3);
    assert_int_equal(f->sm.bytes,
                     3 * (1 + strlen("NATS/1.0\r\nNats-Marker-Reason: "
                                     "MaxAge\r\nNats-TTL: 1m0s\r\n"
                                     "Nats-Rollup: sub\r\n\r\n")));
    /* A marker is a message: max_age removes it too, and a marker's
     * removal leaves no marker behind. */
    tick(f, 22 * SEC);
    assert_int_equal(f->res.markers, 0);
    assert_false(live(f, 5));
    assert_int_equal(f->sm.msgs, 2);
}

static void a_ttl_under_the_marker_ttl_is_raised_to_it(void **state)
{
    struct fixture *f = *state;
    config(f, "{\"name\":\"S\",\"allow_msg_ttl\":true,"
              "\"subject_delete_marker_ttl\":60000000000}");
    pub_ttl(f, 1 * SEC, "a", "5s");
    assert_int_equal(srv_stream_slot_expire(srv_stream_sm_get(&f->sm, 1)),
                     61 * SEC);
    tick(f, 60 * SEC);
    assert_true(live(f, 1));
    tick(f, 61 * SEC);
    assert_false(live(f, 1));
    assert_int_equal(f->res.markers, 1);
    /* The marker expires by its own TTL, and leaves none behind. */
    tick(f, 120 * SEC);
    assert_int_equal(f->sm.msgs, 1);
    tick(f, 121 * SEC);
    assert_int_equal(f->sm.msgs, 0);
    assert_int_equal(f->res.markers, 0);
}

/* A Key/Value purge with a TTL (nats.js kv.purge(k, {ttl})) is a marker
 * itself: its expiry leaves the key with nothing, as on 2.11. */
static void a_kv_purge_marker_expiring_leaves_no_marker(void **state)
{
    struct fixture *f = *state;
    config(f, "{\"name\":\"S\",\"allow_msg_ttl\":true,"
              "\"subject_delete_marker_ttl\":1000000000}");
    pub_raw(f, 1 * SEC, "k",
            "NATS/1.0\r\nKV-Operation: PURGE\r\nNats-Rollup: sub\r\n"
            "Nats-TTL: 2s\r\n\r\n");
    assert_int_equal(srv_stream_slot_marker(srv_stream_sm_get(&f->sm, 1)),
                     SRV_STREAM_MARKER_HDR);
    pub_ttl(f, 1 * SEC, "j", "2s");
    tick(f, 3 * SEC);
    assert_int_equal(f->res.markers, 1); /* j's, not k's */
    assert_null(srv_stream_sm_get(&f->sm, 1));
    assert_string_equal(srv_stream_sm_get(&f->sm, 3)->subj->s, "j");
    assert_int_equal(f->sm.msgs, 1);
}

/* Compare two machines by their snapshot bytes. */
static void assert_same_state(const struct srv_stream_sm *a,
                              const struct srv_stream_sm *b)
{
    uint8_t *x = NULL, *y = NULL;
    size_t xl = 0, yl = 0;
    assert_int_equal(srv_stream_sm_snapshot(a, &x, &xl), 0);
    assert_int_equal(srv_stream_sm_snapshot(b, &y, &yl), 0);
    assert_int_equal(xl, yl);
    assert_memory_equal(x, y, xl);
    free(x);
    free(y);
}

static void a_snapshot_and_a_replay_keep_every_pending_ttl(void **state)
{
    struct fixture *f = *state;
    char err[KEEL_ERRMSG_MAX];
    config(f, "{\"name\":\"S\",\"allow_msg_ttl\":true,"
              "\"max_age\":100000000000,"
              "\"subject_delete_marker_ttl\":30000000000}");
    pub_ttl(f, 1 * SEC, "a", "40s");
    pub_ttl(f, 2 * SEC, "b", "never");
    pub_ttl(f, 3 * SEC, "c", "50");
    tick(f, 41 * SEC); /* a expires: marker for a until 71s */
    assert_int_equal(f->res.markers, 1);
    /* Restore into a new machine, as a restart or InstallSnapshot does. */
    uint8_t *snap = NULL;
    size_t slen = 0;
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &snap, &slen), 0);
    struct srv_stream_sm r;
    assert_int_equal(srv_stream_sm_init(&r, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&r, snap, slen, err), 0);
    assert_same_state(&f->sm, &r);
    assert_int_equal(r.ttl_live, f->sm.ttl_live);
    int64_t a = 0, b = 0;
    srv_stream_sm_next_expiry(&f->sm, &a);
    srv_stream_sm_next_expiry(&r, &b);
    assert_int_equal(a, b);
    assert_int_equal(a, 53 * SEC);
    /* A replay of the log gives the same state too. */
    struct srv_stream_sm p;
    assert_int_equal(srv_stream_sm_init(&p, "S"), 0);
    for (size_t i = 0; i < f->n; i++) {
        struct keel_stream_entry d;
        struct srv_stream_result res;
        assert_int_equal(
            keel_stream_entry_decode(f->log[i], f->log_len[i], &d, err), 0);
        assert_int_equal(srv_stream_sm_apply(&p, i + 1, &d, &res), 0);
    }
    assert_same_state(&f->sm, &p);
    /* The same later tick removes the same on the restored machine. */
    struct keel_stream_entry t = {.kind = KEEL_STREAM_E_TICK,
                                  .ts_ns = 71 * SEC};
    struct srv_stream_result res;
    tick(f, 71 * SEC);
    assert_int_equal(srv_stream_sm_apply(&r, f->index - 1, &t, &res), 0);
    assert_int_equal(res.markers, 1); /* c's */
    assert_same_state(&f->sm, &r);
    assert_true(live(f, 2));
    assert_int_equal(f->sm.msgs, 2); /* b (never), c's marker */
    srv_stream_sm_close(&r);
    srv_stream_sm_close(&p);
    free(snap);
}

static void a_stream_without_ttls_keeps_its_snapshot_bytes(void **state)
{
    struct fixture *f = *state;
    config(f, "{\"name\":\"S\"}");
    pub_ttl(f, 1 * SEC, "a", NULL);
    uint8_t *snap = NULL;
    size_t slen = 0;
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &snap, &slen), 0);
    /* Flag word (byte 8..15): neither bit 21 nor bit 22. */
    uint64_t flags = 0;
    for (int i = 7; i >= 0; i--) {
        flags = flags << 8 | snap[8 + i];
    }
    assert_int_equal(flags >> 21, 0);
    free(snap);
}

static void config_rules_are_nats_server_2_11s(void **state)
{
    (void)state;
    const struct {
        const char *body;
        const char *err; /* NULL: accepted */
    } cases[] = {
        {"{\"name\":\"S\",\"subject_delete_marker_ttl\":-1}",
         "subject delete marker TTL must not be negative"},
        {"{\"name\":\"S\",\"subject_delete_marker_ttl\":500000000}",
         "subject delete marker TTL must be at least 1 second"},
        {"{\"name\":\"S\",\"mirror\":{\"name\":\"O\"},"
         "\"subject_delete_marker_ttl\":1000000000}",
         "subject delete markers forbidden on mirrors"},
        {"{\"name\":\"S\",\"pedantic\":true,"
         "\"subject_delete_marker_ttl\":1000000000}",
         "subject delete marker cannot be set if message TTLs are disabled"},
        {"{\"name\":\"S\",\"pedantic\":true,\"allow_msg_ttl\":true,"
         "\"subject_delete_marker_ttl\":1000000000}",
         "subject delete marker cannot be set if roll-ups are disabled"},
        {"{\"name\":\"S\",\"subject_delete_marker_ttl\":1000000000,"
         "\"deny_purge\":true}",
         NULL},
        {"{\"name\":\"S\",\"allow_msg_ttl\":\"yes\"}", "allow_msg_ttl"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct srv_stream_config c;
        enum srv_js_err jerr = SRV_JS_OK;
        char err[KEEL_ERRMSG_MAX] = "";
        json_t *j = json_loads(cases[i].body, 0, NULL);
        assert_non_null(j);
        int rv = srv_stream_config_parse(j, &c, &jerr, err);
        json_decref(j);
        if (cases[i].err == NULL) {
            assert_int_equal(rv, 0);
            /* Without pedantic, markers turn on TTLs and rollups. */
            assert_true(c.allow_msg_ttl && c.allow_rollup_hdrs);
            assert_false(c.deny_purge);
            json_t *o = NULL;
            assert_int_equal(srv_stream_config_encode(&c, &o, err), 0);
            assert_true(json_is_true(json_object_get(o, "allow_msg_ttl")));
            assert_int_equal(json_integer_value(json_object_get(
                                 o, "subject_delete_marker_ttl")),
                             1000000000);
            json_decref(o);
        } else {
            assert_int_equal(rv, KEEL_EINVAL);
            assert_int_equal(jerr, SRV_JS_ESTREAM_CONFIG);
            if (strstr(err, cases[i].err) == NULL) {
                fail_msg("%s: %s", cases[i].body, err);
            }
        }
        srv_stream_config_free(&c);
    }
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(ttl_values_are_read_as_nats_server_2_11_reads_them),
        T(a_ttl_under_the_marker_ttl_is_stored_raised),
        T(a_ttl_removes_the_message_at_the_entry_time_it_passes),
        T(without_allow_msg_ttl_a_ttl_is_refused_at_apply),
        T(never_outlives_max_age_and_a_ttl_cannot_pass_it),
        T(the_last_message_of_a_subject_leaves_a_marker),
        T(a_ttl_under_the_marker_ttl_is_raised_to_it),
        T(a_kv_purge_marker_expiring_leaves_no_marker),
        T(a_snapshot_and_a_replay_keep_every_pending_ttl),
        T(a_stream_without_ttls_keeps_its_snapshot_bytes),
        T(config_rules_are_nats_server_2_11s),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
