/* srv_stream_sm and the config for `sources`
 * (docs/decisions/0035-sources-share-the-mirror-pump.md): the SOURCE
 * entry's codec, its apply (the stream's own seqs, skipped when its
 * origin seq is not above its source's position, per-source order with
 * two sources interleaved, a sourced message deduped and limited as a
 * publish), the positions in the snapshot, the Nats-Stream-Source header
 * edit, and the `sources` config with nats-server 2.9.10's codes. */
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
#include "srv_stream_sm.h"
#include "stream_sm_fixture.h"

static int setup(void **state)
{
    return sm_fixture_setup(state, "AGG");
}

/* A message of source src at origin seq (subj "" : position only). */
static void src_h(struct sm_fixture *f, const char *src, uint64_t seq,
                  const char *subj, const char *hdr, uint64_t lost)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_SOURCE,
                                  .source = src,
                                  .source_len = strlen(src),
                                  .seq = seq,
                                  .ts_ns = (int64_t)f->index,
                                  .subject = subj,
                                  .subject_len = strlen(subj),
                                  .hdr = (const uint8_t *)hdr,
                                  .hdr_len = hdr != NULL ? strlen(hdr) : 0,
                                  .data = (const uint8_t *)(subj[0] ? "d" : ""),
                                  .data_len = subj[0] ? 1 : 0,
                                  .lost = lost};
    sm_fixture_apply(f, &e);
}

static void src(struct sm_fixture *f, const char *name, uint64_t seq,
                const char *subj)
{
    src_h(f, name, seq, subj, NULL, 0);
}

static void config(struct sm_fixture *f, const char *json)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_CONFIG,
                                  .subject = json,
                                  .subject_len = strlen(json)};
    sm_fixture_apply(f, &e);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
}

static void source_entry_round_trips_and_is_strict(void **state)
{
    (void)state;
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_SOURCE,
                                  .source = "ORDERS",
                                  .source_len = 6,
                                  .seq = 42,
                                  .ts_ns = 1234567,
                                  .subject = "o.a",
                                  .subject_len = 3,
                                  .data = (const uint8_t *)"pay",
                                  .data_len = 3,
                                  .lost = 7};
    uint8_t *buf = NULL;
    size_t len = 0;
    struct keel_stream_entry d;
    char err[256];
    assert_int_equal(keel_stream_entry_encode(&e, &buf, &len), 0);
    assert_int_equal(buf[0], KEEL_STREAM_E_SOURCE);
    assert_int_equal(keel_stream_entry_decode(buf, len, &d, err), 0);
    assert_int_equal(d.source_len, 6);
    assert_memory_equal(d.source, "ORDERS", 6);
    assert_int_equal(d.seq, 42);
    assert_int_equal(d.ts_ns, 1234567);
    assert_int_equal(d.lost, 7);
    assert_memory_equal(d.subject, "o.a", 3);
    assert_memory_equal(d.data, "pay", 3);
    for (size_t cut = 0; cut < len; cut++) {
        assert_int_not_equal(keel_stream_entry_decode(buf, cut, &d, err), 0);
    }
    free(buf);
    /* No source name, or origin seq 0: refused. */
    e.source_len = 0;
    sm_fixture_refused(&e);
    e.source_len = 6;
    e.seq = 0;
    sm_fixture_refused(&e);
}

static void sourced_messages_take_the_streams_own_seqs(void **state)
{
    struct sm_fixture *f = *state;
    src(f, "A", 5, "a.x");
    assert_true(f->res.stored);
    assert_int_equal(f->res.seq, 1); /* not the origin's 5 */
    src(f, "A", 9, "a.y");
    assert_int_equal(f->res.seq, 2);
    assert_int_equal(f->sm.last_seq, 2);
    assert_int_equal(f->sm.deleted, 0);
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "A", NULL), 9);
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "B", NULL), 0);
}

static void a_resent_source_entry_is_skipped(void **state)
{
    struct sm_fixture *f = *state;
    for (uint64_t s = 1; s <= 4; s++) {
        src(f, "A", s, "a.x");
    }
    /* A new leader sends 2..5 again behind what the log holds. */
    for (uint64_t s = 2; s <= 5; s++) {
        src_h(f, "A", s, "a.x", NULL, s == 2 ? 9 : 0);
        assert_int_equal(f->res.duplicate, s <= 4);
        assert_int_equal(f->res.stored, s == 5);
    }
    uint64_t lost = 0;
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "A", &lost), 5);
    assert_int_equal(lost, 0); /* a skipped entry counts nothing */
    assert_int_equal(f->sm.msgs, 5);
    assert_int_equal(f->sm.last_seq, 5);
}

static void two_sources_interleaved_keep_per_source_order(void **state)
{
    struct sm_fixture *f = *state;
    /* A's and B's origin seqs overlap: each is its own position. */
    src(f, "A", 1, "a.1");
    src(f, "B", 1, "b.1");
    src(f, "B", 2, "b.2");
    src(f, "A", 2, "a.2");
    src(f, "A", 2, "a.2"); /* resent: skipped */
    assert_true(f->res.duplicate);
    src(f, "B", 1, "b.1"); /* resent: skipped */
    assert_true(f->res.duplicate);
    src(f, "A", 3, "a.3");
    src(f, "B", 3, "b.3");
    assert_int_equal(f->sm.msgs, 6);
    const char *want[] = {"a.1", "b.1", "b.2", "a.2", "a.3", "b.3"};
    for (uint64_t s = 1; s <= 6; s++) {
        const struct srv_stream_slot *sl = srv_stream_sm_get(&f->sm, s);
        assert_non_null(sl);
        assert_string_equal(sl->subj->s, want[s - 1]);
    }
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "A", NULL), 3);
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "B", NULL), 3);
}

static void position_only_entries_store_nothing(void **state)
{
    struct sm_fixture *f = *state;
    src(f, "A", 1, "a.1");
    src_h(f, "A", 7, "", NULL, 5); /* the origin dropped 2..6 unread */
    assert_false(f->res.stored);
    uint64_t lost = 0;
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "A", &lost), 7);
    assert_int_equal(lost, 5);
    assert_int_equal(f->sm.last_seq, 1);
    src(f, "A", 8, "a.8");
    assert_int_equal(f->res.seq, 2);
}

/* The stall's state on sm: position, stalled seq and refusal. */
static void assert_stall(const struct srv_stream_sm *sm, uint64_t pos,
                         uint64_t stalled, enum srv_js_err jerr)
{
    enum srv_js_err j = SRV_JS_OK;
    assert_int_equal(srv_stream_sm_source_pos(sm, "A", NULL), pos);
    assert_int_equal(srv_stream_sm_source_stalled(sm, "A", &j), stalled);
    assert_int_equal(j, jerr);
}

static void sourced_messages_follow_the_streams_rules(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\"}],"
              "\"max_msgs\":2,\"discard\":\"new\","
              "\"duplicate_window\":60000000000}");
    static const char id1[] = "NATS/1.0\r\nNats-Msg-Id: one\r\n\r\n";
    src_h(f, "A", 1, "a.x", id1, 0);
    assert_true(f->res.stored);
    /* The same Nats-Msg-Id from the origin again: a duplicate, skipped
     * with the position moved (dedupe, not a refusal: no stall). */
    src_h(f, "A", 2, "a.x", id1, 0);
    assert_true(f->res.duplicate);
    assert_false(f->res.stored);
    assert_stall(&f->sm, 2, 0, SRV_JS_OK);
    src(f, "A", 3, "a.y");
    assert_true(f->res.stored);
    /* Discard new on a full stream: refused, the source stalls there. */
    src(f, "A", 4, "a.z");
    assert_int_equal(f->res.jerr, SRV_JS_EMAX_MSGS);
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "A", NULL), 3);
    assert_int_equal(f->sm.msgs, 2);
}

/* A stream of max_msgs max, discard new, sourcing A: origin seqs 1..max
 * stored, max + 1 refused and stalled at. */
static void fill_and_stall(struct sm_fixture *f, uint64_t max)
{
    char cfg[160], subj[16];
    snprintf(cfg, sizeof cfg,
             "{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\"}],"
             "\"max_msgs\":%llu,\"discard\":\"new\"}",
             (unsigned long long)max);
    config(f, cfg);
    for (uint64_t s = 1; s <= max + 1; s++) {
        snprintf(subj, sizeof subj, "a.%llu", (unsigned long long)s);
        src(f, "A", s, subj);
    }
    assert_int_equal(f->res.jerr, SRV_JS_EMAX_MSGS);
    assert_stall(&f->sm, max, max + 1, SRV_JS_EMAX_MSGS);
}

/* A refused sourced message is retried, never skipped: entries in flight
 * past it are skipped without moving the position, the retry is stored
 * once a delete makes room, and a snapshot taken while stalled restores
 * the same state (docs/decisions/0035-sources-share-the-mirror-pump.md). */
static void a_refused_sourced_message_stalls_until_it_fits(void **state)
{
    struct sm_fixture *f = *state;
    fill_and_stall(f, 2);
    /* Already in flight from the pump: skipped, the position stays. */
    src(f, "A", 4, "a.4");
    assert_true(f->res.duplicate);
    assert_false(f->res.stored);
    assert_stall(&f->sm, 2, 3, SRV_JS_EMAX_MSGS);
    /* The retry, still refused: still stalled. */
    src(f, "A", 3, "a.3");
    assert_int_equal(f->res.jerr, SRV_JS_EMAX_MSGS);
    assert_stall(&f->sm, 2, 3, SRV_JS_EMAX_MSGS);

    /* A snapshot taken now restores the stall, bytes for bytes. */
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    char err[256];
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    struct sm_fixture g = {.index = f->index};
    assert_int_equal(srv_stream_sm_init(&g.sm, "AGG"), 0);
    assert_int_equal(srv_stream_sm_restore(&g.sm, a, alen, err), 0);
    assert_stall(&g.sm, 2, 3, SRV_JS_EMAX_MSGS);
    assert_int_equal(srv_stream_sm_snapshot(&g.sm, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    for (size_t cut = 0; cut < alen; cut++) {
        struct srv_stream_sm t;
        assert_int_equal(srv_stream_sm_init(&t, "AGG"), 0);
        assert_int_not_equal(srv_stream_sm_restore(&t, a, cut, err), 0);
        srv_stream_sm_close(&t);
    }

    /* Room made on both: the retry is stored, the stall ends and what
     * follows is stored in order. */
    struct sm_fixture *both[2] = {f, &g};
    for (int i = 0; i < 2; i++) {
        struct sm_fixture *x = both[i];
        assert_int_equal(srv_stream_sm_remove(&x->sm, 1), 0);
        src(x, "A", 4, "a.4"); /* in flight past the retry: skipped */
        assert_true(x->res.duplicate);
        src(x, "A", 3, "a.3");
        assert_true(x->res.stored);
        assert_int_equal(x->res.seq, 3);
        assert_stall(&x->sm, 3, 0, SRV_JS_OK);
        src(x, "A", 4, "a.4");
        assert_int_equal(x->res.jerr, SRV_JS_EMAX_MSGS);
        assert_stall(&x->sm, 3, 4, SRV_JS_EMAX_MSGS);
    }
    srv_stream_sm_close(&g.sm);
    free(a);
    free(b);
}

/* The origin dropped the stalled message before a retry read it: the
 * record carrying the gap ends the stall, counted lost. */
static void an_origin_gap_past_the_stall_ends_it(void **state)
{
    struct sm_fixture *f = *state;
    fill_and_stall(f, 1);
    assert_int_equal(srv_stream_sm_remove(&f->sm, 1), 0);
    src_h(f, "A", 5, "a.5", NULL, 3); /* origin seqs 2..4 gone */
    assert_true(f->res.stored);
    uint64_t lost = 0;
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "A", &lost), 5);
    assert_int_equal(lost, 3);
    assert_stall(&f->sm, 5, 0, SRV_JS_OK);
}

static void the_snapshot_carries_every_sources_position(void **state)
{
    struct sm_fixture *f = *state;
    src(f, "A", 3, "a.3");
    src_h(f, "B", 10, "b.10", NULL, 2);
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    char err[256];
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    assert_memory_equal(a, "KSS1", 4); /* a flag bit, not a new magic */
    struct sm_fixture g = {.index = 10};
    assert_int_equal(srv_stream_sm_init(&g.sm, "AGG"), 0);
    assert_int_equal(srv_stream_sm_restore(&g.sm, a, alen, err), 0);
    uint64_t lost = 0;
    assert_int_equal(srv_stream_sm_source_pos(&g.sm, "A", NULL), 3);
    assert_int_equal(srv_stream_sm_source_pos(&g.sm, "B", &lost), 10);
    assert_int_equal(lost, 2);
    assert_int_equal(srv_stream_sm_snapshot(&g.sm, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    /* After the restore a re-sent entry is still skipped. */
    src(&g, "B", 10, "b.10");
    assert_true(g.res.duplicate);
    src(&g, "A", 4, "a.4");
    assert_int_equal(g.res.seq, 3);
    srv_stream_sm_close(&g.sm);
    /* Every truncation is refused. */
    for (size_t cut = 0; cut < alen; cut++) {
        assert_int_equal(srv_stream_sm_init(&g.sm, "AGG"), 0);
        assert_int_not_equal(srv_stream_sm_restore(&g.sm, a, cut, err), 0);
        srv_stream_sm_close(&g.sm);
    }
    free(a);
    free(b);
}

static void too_many_names_forget_the_oldest(void **state)
{
    struct sm_fixture *f = *state;
    char name[16];
    for (int i = 0; i <= SRV_STREAM_SOURCE_POS_MAX; i++) {
        snprintf(name, sizeof name, "S%d", i);
        src(f, name, 1, "x");
    }
    assert_int_equal(f->sm.nsrc, SRV_STREAM_SOURCE_POS_MAX);
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "S0", NULL), 0);
    assert_int_equal(srv_stream_sm_source_pos(&f->sm, "S1", NULL), 1);
}

static void the_source_header_replaces_a_daisy_chains(void **state)
{
    (void)state;
    static const char line[] = "Nats-Stream-Source: B 7\r\n";
    char *out = NULL;
    size_t n = 0;
    assert_int_equal(srv_nats_hdr_replace(NULL, 0, "Nats-Stream-Source", line,
                                          sizeof line - 1, &out, &n),
                     0);
    assert_int_equal(n, strlen("NATS/1.0\r\n\r\n") + sizeof line - 1);
    assert_memory_equal(out, "NATS/1.0\r\nNats-Stream-Source: B 7\r\n\r\n", n);
    free(out);
    static const char hdr[] =
        "NATS/1.0\r\nK: v\r\nNats-Stream-Source: A 3\r\nL: w\r\n\r\n";
    assert_int_equal(srv_nats_hdr_replace(hdr, sizeof hdr - 1,
                                          "Nats-Stream-Source", line,
                                          sizeof line - 1, &out, &n),
                     0);
    static const char want[] =
        "NATS/1.0\r\nK: v\r\nL: w\r\nNats-Stream-Source: B 7\r\n\r\n";
    assert_int_equal(n, sizeof want - 1);
    assert_memory_equal(out, want, n);
    free(out);
    /* A block with no blank line ending it is refused. */
    assert_int_equal(srv_nats_hdr_replace("NATS/1.0\r\nK: v\r\n", 16,
                                          "Nats-Stream-Source", line,
                                          sizeof line - 1, &out, &n),
                     KEEL_EINVAL);
}

static void a_sources_config_parses_and_encodes_like_nats_server(void **state)
{
    (void)state;
    struct srv_stream_config c;
    enum srv_js_err jerr;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(
        sm_fixture_parse_cfg("{\"name\":\"AGG\",\"sources\":[{\"name\":\"A\","
                             "\"opt_start_seq\":3,\"filter_subject\":\"a.x\"},"
                             "{\"name\":\"B\",\"opt_start_time\":"
                             "\"2026-12-01T00:00:00Z\"}]}",
                             &c, &jerr, err),
        0);
    assert_int_equal(c.nsources, 2);
    assert_false(c.has_mirror);
    assert_string_equal(c.sources[0].name, "A");
    assert_int_equal(c.sources[0].opt_start_seq, 3);
    assert_string_equal(c.sources[0].filter_subject, "a.x");
    assert_string_equal(c.sources[1].name, "B");
    assert_true(c.sources[1].opt_start_time_ns > 0);
    /* No subjects given: none, as nats-server has it; a dedupe window. */
    assert_int_equal(c.nsubjects, 0);
    assert_true(c.duplicate_window_ns > 0);
    json_t *o = NULL;
    assert_int_equal(srv_stream_config_encode(&c, &o, err), 0);
    assert_null(json_object_get(o, "subjects"));
    const json_t *s = json_object_get(o, "sources");
    assert_int_equal(json_array_size(s), 2);
    const json_t *s0 = json_array_get(s, 0);
    assert_string_equal(json_string_value(json_object_get(s0, "name")), "A");
    assert_int_equal(json_integer_value(json_object_get(s0, "opt_start_seq")),
                     3);
    assert_null(json_object_get(json_array_get(s, 1), "opt_start_seq"));
    struct srv_stream_config d;
    assert_int_equal(srv_stream_config_parse(o, &d, &jerr, err), 0);
    assert_true(srv_stream_config_equal(&c, &d));
    srv_stream_config_free(&d);
    json_decref(o);
    srv_stream_config_free(&c);
    /* Subjects of its own and sources together. */
    assert_int_equal(
        sm_fixture_parse_cfg("{\"name\":\"AGG\",\"subjects\":[\"agg\"],"
                             "\"sources\":[{\"name\":\"A\"}]}",
                             &c, &jerr, err),
        0);
    assert_int_equal(c.nsubjects, 1);
    assert_int_equal(c.nsources, 1);
    srv_stream_config_free(&c);
}

static void sources_config_errors_carry_nats_server_codes(void **state)
{
    (void)state;
    const struct {
        const char *body;
        enum srv_js_err jerr;
        const char *text;
    } bad[] = {
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\"},\"sources\":[{\"name\":"
         "\"P\"}]}",
         SRV_JS_EMIRROR_SOURCES, "stream mirrors can not also contain"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"S\"}]}",
         SRV_JS_ESTREAM_CONFIG, "detected cycle"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"A\"},{\"name\":\"A\","
         "\"filter_subject\":\"x\"}]}",
         SRV_JS_ESTREAM_CONFIG, "duplicate source configuration detected"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"a.b\"}]}",
         SRV_JS_ESTREAM_CONFIG, "source name a.b is not a valid stream name"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"\"}]}",
         SRV_JS_ESTREAM_CONFIG, "source name is required"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"A\",\"filter_subject\":"
         "\"a..b\"}]}",
         SRV_JS_ESTREAM_CONFIG, "source filter_subject a..b is not a valid"},
        {"{\"name\":\"S\",\"sources\":[{\"name\":\"A\",\"opt_start_time\":"
         "\"yesterday\"}]}",
         SRV_JS_ESTREAM_CONFIG, "RFC3339"},
        {"{\"name\":\"S\",\"sources\":{\"name\":\"A\"}}", SRV_JS_ESTREAM_CONFIG,
         "sources must be an array"},
        {"{\"name\":\"S\",\"sources\":[\"A\"]}", SRV_JS_ESTREAM_CONFIG,
         "each source must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct srv_stream_config c;
        enum srv_js_err jerr = SRV_JS_OK;
        char err[KEEL_ERRMSG_MAX];
        assert_int_equal(sm_fixture_parse_cfg(bad[i].body, &c, &jerr, err),
                         KEEL_EINVAL);
        assert_int_equal(jerr, bad[i].jerr);
        if (strstr(err, bad[i].text) == NULL) {
            fail_msg("case %zu: %s", i, err);
        }
    }
    /* More than SRV_JS_SOURCES_MAX. */
    json_t *j = json_pack("{s:s, s:[]}", "name", "S", "sources");
    for (int i = 0; i <= SRV_JS_SOURCES_MAX; i++) {
        char name[16];
        snprintf(name, sizeof name, "O%d", i);
        json_array_append_new(json_object_get(j, "sources"),
                              json_pack("{s:s}", "name", name));
    }
    struct srv_stream_config c;
    enum srv_js_err jerr = SRV_JS_OK;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(srv_stream_config_parse(j, &c, &jerr, err), KEEL_EINVAL);
    assert_non_null(strstr(err, "too many sources"));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name)                                                                \
    cmocka_unit_test_setup_teardown(name, setup, sm_fixture_teardown)
        T(source_entry_round_trips_and_is_strict),
        T(sourced_messages_take_the_streams_own_seqs),
        T(a_resent_source_entry_is_skipped),
        T(two_sources_interleaved_keep_per_source_order),
        T(position_only_entries_store_nothing),
        T(sourced_messages_follow_the_streams_rules),
        T(a_refused_sourced_message_stalls_until_it_fits),
        T(an_origin_gap_past_the_stall_ends_it),
        T(the_snapshot_carries_every_sources_position),
        T(too_many_names_forget_the_oldest),
        T(the_source_header_replaces_a_daisy_chains),
        T(a_sources_config_parses_and_encodes_like_nats_server),
        T(sources_config_errors_carry_nats_server_codes),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
