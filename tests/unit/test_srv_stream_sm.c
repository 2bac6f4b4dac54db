/* srv_stream_sm: the stream state machine (limits, discard policies,
 * dedupe, expectations, purge forms, delete, age expiry by tick entries,
 * snapshot determinism), the entry codec's strictness, and mirrors: the
 * MIRROR entry (origin seqs and timestamps kept, gaps as deleted seqs,
 * idempotent by origin seq, origin drops counted), the snapshot carrying
 * the position, promotion (an update removing `mirror`), and the `mirror`
 * config with nats-server 2.9.10's codes. */
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

#define SEC 1000000000LL

static int setup(void **state)
{
    return sm_fixture_setup(state, "S");
}

static void pub_h(struct sm_fixture *f, int64_t ts, const char *subj,
                  const char *hdr, const char *data)
{
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_PUBLISH,
        .ts_ns = ts,
        .subject = subj,
        .subject_len = strlen(subj),
        .hdr = (const uint8_t *)hdr,
        .hdr_len = hdr != NULL ? strlen(hdr) : 0,
        .data = (const uint8_t *)data,
        .data_len = strlen(data),
    };
    sm_fixture_apply(f, &e);
}

static void pub(struct sm_fixture *f, int64_t ts, const char *subj,
                const char *data)
{
    pub_h(f, ts, subj, NULL, data);
}

static void config(struct sm_fixture *f, const char *json)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_CONFIG,
                                  .subject = json,
                                  .subject_len = strlen(json)};
    sm_fixture_apply(f, &e);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
}

static void purge(struct sm_fixture *f, const char *filter, uint64_t seq,
                  uint64_t keep)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_PURGE,
                                  .subject = filter,
                                  .subject_len = strlen(filter),
                                  .seq = seq,
                                  .keep = keep};
    sm_fixture_apply(f, &e);
}

static void del(struct sm_fixture *f, uint64_t seq)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_DELETE, .seq = seq};
    sm_fixture_apply(f, &e);
}

static void tick(struct sm_fixture *f, int64_t ts)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_TICK, .ts_ns = ts};
    sm_fixture_apply(f, &e);
}

static void publishes_get_consecutive_seqs_and_counters(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 10, "a", "xy");
    assert_int_equal(f->res.seq, 1);
    pub(f, 11, "b", "xyz");
    assert_int_equal(f->res.seq, 2);
    pub(f, 12, "a", "");
    assert_int_equal(f->res.seq, 3);
    assert_int_equal(f->sm.msgs, 3);
    assert_int_equal(f->sm.bytes, (1 + 2) + (1 + 3) + 1);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 1);
    assert_int_equal(f->sm.last_seq, 3);
    assert_int_equal(f->sm.last_ts_ns, 12);
    const struct srv_stream_slot *s = srv_stream_sm_get(&f->sm, 2);
    assert_non_null(s);
    assert_int_equal(s->index, 2);
    assert_string_equal(s->subj->s, "b");
    struct srv_stream_subj *a = srv_hmap_get(&f->sm.subjects, "a", 1);
    assert_non_null(a);
    assert_int_equal(a->msgs, 2);
    assert_int_equal(a->last_seq, 3);
}

static void timestamps_never_go_backwards(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 100, "a", "1");
    pub(f, 50, "a", "2");
    assert_int_equal(srv_stream_sm_get(&f->sm, 2)->ts_ns, 100);
}

static void max_msgs_with_discard_old_drops_the_oldest(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"max_msgs\":2}");
    pub(f, 1, "a", "1");
    pub(f, 2, "a", "2");
    pub(f, 3, "a", "3");
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->res.seq, 3);
    assert_int_equal(f->sm.msgs, 2);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 2);
    assert_null(srv_stream_sm_get(&f->sm, 1));
}

static void max_msgs_with_discard_new_refuses_with_10077(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"max_msgs\":2,\"discard\":\"new\"}");
    pub(f, 1, "a", "1");
    pub(f, 2, "a", "2");
    pub(f, 3, "a", "3");
    assert_int_equal(f->res.jerr, SRV_JS_EMAX_MSGS);
    assert_int_equal(srv_js_err_info(f->res.jerr)->err_code, 10077);
    assert_int_equal(f->sm.msgs, 2);
    assert_int_equal(f->sm.last_seq, 2);
}

static void max_bytes_discard_old_and_new(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"max_bytes\":10}");
    pub(f, 1, "a", "1234"); /* 5 bytes */
    pub(f, 2, "a", "1234");
    pub(f, 3, "a", "1234");
    assert_int_equal(f->sm.msgs, 2);
    assert_int_equal(f->sm.bytes, 10);
    config(f, "{\"name\":\"S\",\"max_bytes\":10,\"discard\":\"new\"}");
    pub(f, 4, "a", "1");
    assert_int_equal(f->res.jerr, SRV_JS_EMAX_BYTES);
    assert_int_equal(f->sm.last_seq, 3);
}

static void max_msgs_per_subject_keeps_the_newest_of_each(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"max_msgs_per_subject\":1}");
    pub(f, 1, "a", "1");
    pub(f, 2, "b", "2");
    pub(f, 3, "a", "3");
    pub(f, 4, "b", "4");
    assert_int_equal(f->sm.msgs, 2);
    assert_null(srv_stream_sm_get(&f->sm, 1));
    assert_null(srv_stream_sm_get(&f->sm, 2));
    assert_non_null(srv_stream_sm_get(&f->sm, 3));
    assert_non_null(srv_stream_sm_get(&f->sm, 4));
}

static void discard_new_per_subject_refuses_only_the_full_subject(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"discard\":\"new\","
              "\"max_msgs_per_subject\":2,\"discard_new_per_subject\":true}");
    pub(f, 1, "a", "1");
    pub(f, 2, "a", "2");
    pub(f, 3, "a", "3");
    assert_int_equal(f->res.jerr, SRV_JS_EMAX_MSGS_PER_SUBJECT);
    assert_int_equal(srv_js_err_info(f->res.jerr)->err_code, 10077);
    pub(f, 4, "b", "4");
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->res.seq, 3);
    assert_int_equal(f->sm.msgs, 3);
    /* Deleting one of a's makes room for one more. */
    del(f, 1);
    pub(f, 5, "a", "5");
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->res.seq, 4);
    /* It survives a snapshot: the restored state still refuses. */
    uint8_t *a = NULL;
    size_t alen = 0;
    char err[256];
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    srv_stream_sm_close(&f->sm);
    assert_int_equal(srv_stream_sm_init(&f->sm, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&f->sm, a, alen, err), 0);
    free(a);
    pub(f, 6, "a", "6");
    assert_int_equal(f->res.jerr, SRV_JS_EMAX_MSGS_PER_SUBJECT);
    /* Without the flag, discard new keeps dropping the subject's oldest. */
    config(f, "{\"name\":\"S\",\"discard\":\"new\","
              "\"max_msgs_per_subject\":2}");
    pub(f, 7, "a", "7");
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->sm.msgs, 3);
}

static void first_seq_sets_the_first_message_seq_once(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"first_seq\":100}");
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 100);
    assert_int_equal(f->sm.last_seq, 99);
    pub(f, 1, "a", "1");
    assert_int_equal(f->res.seq, 100);
    /* A later config entry (a new leader's, an update) never moves it. */
    config(f, "{\"name\":\"S\",\"first_seq\":500}");
    pub(f, 2, "a", "2");
    assert_int_equal(f->res.seq, 101);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 100);
}

static void max_msg_size_refuses_with_10054(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"max_msg_size\":3}");
    pub(f, 1, "a", "123");
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    pub(f, 2, "a", "1234");
    assert_int_equal(f->res.jerr, SRV_JS_EMSG_SIZE);
    assert_int_equal(srv_js_err_info(f->res.jerr)->err_code, 10054);
    assert_int_equal(f->sm.msgs, 1);
}

static void tick_entries_expire_messages_past_max_age(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"max_age\":10000000000}");
    pub(f, 1 * SEC, "a", "1");
    pub(f, 5 * SEC, "a", "2");
    tick(f, 10 * SEC);
    assert_int_equal(f->sm.msgs, 2);
    tick(f, 11 * SEC);
    assert_int_equal(f->sm.msgs, 1);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 2);
    tick(f, 16 * SEC);
    assert_int_equal(f->sm.msgs, 0);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 3);
}

static void same_msg_id_within_window_is_a_duplicate(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"duplicate_window\":2000000000}");
    const char *h = "NATS/1.0\r\nNats-Msg-Id: m1\r\n\r\n";
    pub_h(f, 1 * SEC, "a", h, "x");
    assert_int_equal(f->res.seq, 1);
    pub_h(f, 2 * SEC, "a", h, "x");
    assert_true(f->res.duplicate);
    assert_int_equal(f->res.seq, 1);
    assert_int_equal(f->sm.msgs, 1);
    pub_h(f, 4 * SEC, "a", h, "x"); /* past the window */
    assert_false(f->res.duplicate);
    assert_int_equal(f->res.seq, 2);
}

static void expected_last_sequence_mismatch_is_10071(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 1, "a", "1");
    pub_h(f, 2, "a", "NATS/1.0\r\nNats-Expected-Last-Sequence: 5\r\n\r\n", "2");
    assert_int_equal(f->res.jerr, SRV_JS_EWRONG_LAST_SEQ);
    assert_string_equal(f->res.detail, "1");
    pub_h(f, 3, "a", "NATS/1.0\r\nNats-Expected-Last-Sequence: 1\r\n\r\n", "2");
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->res.seq, 2);
    pub_h(f, 4, "a", "NATS/1.0\r\nNats-Expected-Stream: T\r\n\r\n", "3");
    assert_int_equal(f->res.jerr, SRV_JS_EEXPECTED_STREAM);
}

static void purge_all_moves_first_seq_past_last(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 1, "a", "1");
    pub(f, 2, "b", "2");
    purge(f, "", 0, 0);
    assert_int_equal(f->res.purged, 2);
    assert_int_equal(f->sm.msgs, 0);
    assert_int_equal(f->sm.bytes, 0);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 3);
    pub(f, 3, "a", "3");
    assert_int_equal(f->res.seq, 3);
}

static void purge_by_filter_seq_and_keep(void **state)
{
    struct sm_fixture *f = *state;
    for (int i = 0; i < 6; i++) {
        pub(f, i + 1, i % 2 ? "b" : "a", "x"); /* a:1,3,5 b:2,4,6 */
    }
    purge(f, "a", 0, 0);
    assert_int_equal(f->res.purged, 3);
    assert_int_equal(f->sm.msgs, 3);
    assert_int_equal(f->sm.deleted, 2); /* 3 and 5 inside [2, 6] */
    purge(f, "", 4, 0);                 /* below seq 4: 2 */
    assert_int_equal(f->res.purged, 1);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 4);
    purge(f, ">", 0, 1); /* keep the newest 1 */
    assert_int_equal(f->res.purged, 1);
    assert_int_equal(f->sm.msgs, 1);
    assert_non_null(srv_stream_sm_get(&f->sm, 6));
}

static void delete_interior_and_missing(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 1, "a", "1");
    pub(f, 2, "a", "2");
    pub(f, 3, "a", "3");
    del(f, 2);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->sm.msgs, 2);
    assert_int_equal(f->sm.deleted, 1);
    del(f, 2);
    assert_int_equal(f->res.jerr, SRV_JS_ESEQUENCE_NOT_FOUND);
    assert_string_equal(f->res.detail, "sequence 2 not found");
    del(f, 1);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 3);
    assert_int_equal(f->sm.deleted, 0);
    config(f, "{\"name\":\"S\",\"deny_delete\":true}");
    del(f, 3);
    assert_int_equal(f->res.jerr, SRV_JS_EBAD_REQUEST);
    assert_int_equal(f->sm.msgs, 1);
}

static void remove_by_consumer_ack_updates_subject_counts(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 1, "a", "1");
    pub(f, 2, "a", "2");
    assert_int_equal(srv_stream_sm_remove(&f->sm, 2), 0);
    assert_int_equal(srv_stream_sm_remove(&f->sm, 2), KEEL_ENOENT);
    struct srv_stream_subj *a = srv_hmap_get(&f->sm.subjects, "a", 1);
    assert_int_equal(a->msgs, 1);
    assert_int_equal(srv_stream_sm_remove(&f->sm, 1), 0);
    assert_null(srv_hmap_get(&f->sm.subjects, "a", 1));
}

/* Random entries (xorshift, fixed seed printed on failure). */
static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void random_entries(struct sm_fixture *f, uint64_t seed, int n)
{
    static const char *subj[] = {"a", "b", "c.d", "c.e"};
    char hdr[64];
    for (int i = 0; i < n; i++) {
        uint64_t r = rnd(&seed);
        switch (r % 10) {
        case 0:
            del(f, f->sm.last_seq > 0 ? r % f->sm.last_seq + 1 : 1);
            break;
        case 1:
            purge(f, r & 16 ? "c.>" : "", 0, r % 3);
            break;
        case 2:
            tick(f, i * SEC / 10);
            break;
        default:
            snprintf(hdr, sizeof hdr, "NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n",
                     (int)(r % 50));
            pub_h(f, i * SEC / 10, subj[r % 4], r & 32 ? hdr : NULL, "data");
        }
    }
}

/* Publish subj with Nats-Expected-Last-Subject-Sequence: want. */
static void pub_expect_subj(struct sm_fixture *f, int64_t ts, const char *subj,
                            uint64_t want)
{
    char h[96];
    snprintf(h, sizeof h,
             "NATS/1.0\r\nNats-Expected-Last-Subject-Sequence: %llu\r\n\r\n",
             (unsigned long long)want);
    pub_h(f, ts, subj, h, "x");
}

/* Every subject's count and last_seq are those of its live slots, its
 * first_seq a lower bound of the oldest (srv_stream_sm.h). */
static void assert_subjects_exact(const struct srv_stream_sm *sm)
{
    size_t pos = 0;
    struct srv_hmap_slot *hs;
    while ((hs = srv_hmap_next(&sm->subjects, &pos)) != NULL) {
        const struct srv_stream_subj *sj = hs->value;
        uint64_t first = 0, last = 0, n = 0;
        for (uint64_t q = sm->base_seq; q <= sm->last_seq; q++) {
            const struct srv_stream_slot *s = srv_stream_sm_get(sm, q);
            if (s != NULL && s->subj == sj) {
                first = first == 0 ? q : first;
                last = q;
                n++;
            }
        }
        assert_int_equal(sj->msgs, n);
        assert_int_equal(sj->last_seq, last);
        assert_true(sj->first_seq <= first);
    }
}

static uint64_t subj_last(const struct srv_stream_sm *sm, const char *subj)
{
    const struct srv_stream_subj *sj =
        srv_hmap_get(&sm->subjects, subj, strlen(subj));
    return sj != NULL ? sj->last_seq : 0;
}

static void deleting_a_subjects_newest_moves_its_last_back(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 1, "a", "1");
    pub(f, 2, "b", "2");
    pub(f, 3, "a", "3");
    del(f, 3);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(subj_last(&f->sm, "a"), 1);
    assert_subjects_exact(&f->sm);
    /* nats-server 2.9.10 answers from the message that is left. */
    pub_expect_subj(f, 4, "a", 3);
    assert_int_equal(f->res.jerr, SRV_JS_EWRONG_LAST_SEQ);
    assert_string_equal(f->res.detail, "1");
    pub_expect_subj(f, 5, "a", 1);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->res.seq, 4);
    /* Deleting every message of a subject: it has no last any more. */
    del(f, 4);
    del(f, 1);
    assert_int_equal(subj_last(&f->sm, "a"), 0);
    pub_expect_subj(f, 6, "a", 0);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
    assert_int_equal(f->res.seq, 5);
}

static void acking_a_subjects_newest_moves_its_last_back(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"retention\":\"workqueue\"}");
    pub(f, 1, "a", "1");
    pub(f, 2, "a", "2");
    pub(f, 3, "b", "3");
    pub(f, 4, "a", "4");
    assert_int_equal(srv_stream_sm_remove(&f->sm, 4), 0);
    assert_int_equal(subj_last(&f->sm, "a"), 2);
    assert_int_equal(srv_stream_sm_remove(&f->sm, 2), 0);
    assert_int_equal(subj_last(&f->sm, "a"), 1);
    assert_subjects_exact(&f->sm);
    pub_expect_subj(f, 5, "a", 1);
    assert_int_equal(f->res.jerr, SRV_JS_OK);
}

/* Purge by filter, purge below a seq, max_msgs_per_subject, max_age and a
 * rollup's purge (a subject filter keeping 1) each leave every subject's
 * last exact. */
static void purges_and_limits_keep_each_subjects_last_exact(void **state)
{
    struct sm_fixture *f = *state;
    config(f, "{\"name\":\"S\",\"max_msgs_per_subject\":2,"
              "\"max_age\":10000000000}");
    for (int i = 0; i < 9; i++) {
        pub(f, i + 1, i % 3 == 0 ? "a" : i % 3 == 1 ? "b.x" : "b.y", "x");
    }
    assert_subjects_exact(&f->sm); /* each keeps its newest 2 */
    purge(f, "b.x", 0, 0);
    assert_int_equal(subj_last(&f->sm, "b.x"), 0);
    assert_subjects_exact(&f->sm);
    purge(f, "b.>", 0, 1); /* a rollup's purge */
    assert_int_equal(subj_last(&f->sm, "b.y"), 9);
    purge(f, "", 8, 0);
    assert_subjects_exact(&f->sm);
    pub(f, 12 * SEC, "c", "x"); /* ages out the rest */
    assert_int_equal(subj_last(&f->sm, "a"), 0);
    assert_int_equal(subj_last(&f->sm, "b.y"), 0);
    assert_int_equal(subj_last(&f->sm, "c"), 10);
    assert_subjects_exact(&f->sm);
}

/* Random deletes, acks, purges, limits and publishes: after each entry every
 * subject's last is exact, and a snapshot restored elsewhere answers every
 * subject's last (and so Nats-Expected-Last-Subject-Sequence) the same as
 * the replica that applied the entries. */
static void subject_last_is_exact_and_survives_a_snapshot(void **state)
{
    static const char *subj[] = {"a", "b", "c.d", "c.e"};
    struct sm_fixture *f = *state;
    uint64_t seed = 0x243f6a8885a308d3ull;
    config(f, "{\"name\":\"S\",\"max_msgs\":30,\"max_msgs_per_subject\":6,"
              "\"max_age\":20000000000}");
    for (int i = 0; i < 600; i++) {
        uint64_t r = rnd(&seed);
        uint64_t first = srv_stream_sm_first_seq(&f->sm);
        uint64_t span = f->sm.last_seq - first + 1; /* 0 when empty */
        uint64_t seq = first + (span > 0 ? (r >> 8) % span : 0);
        switch (r % 8) {
        case 0:
            del(f, seq);
            break;
        case 1: {
            int rv = srv_stream_sm_remove(&f->sm, seq);
            assert_true(rv == 0 || rv == KEEL_ENOENT);
            break;
        }
        case 2:
            purge(f, r & 16 ? "c.>" : subj[(r >> 5) % 4], 0, r % 2);
            break;
        case 3:
            tick(f, i * SEC / 10);
            break;
        default:
            pub(f, i * SEC / 10, subj[(r >> 5) % 4], "data");
        }
        assert_subjects_exact(&f->sm);
    }
    uint8_t *a = NULL;
    size_t alen = 0;
    char err[256];
    struct sm_fixture g = {.index = f->index};
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    assert_int_equal(srv_stream_sm_init(&g.sm, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&g.sm, a, alen, err), 0);
    for (size_t k = 0; k < 4; k++) {
        uint64_t want = subj_last(&f->sm, subj[k]);
        assert_int_equal(subj_last(&g.sm, subj[k]), want);
        pub_expect_subj(f, 61 * SEC, subj[k], want);
        pub_expect_subj(&g, 61 * SEC, subj[k], want);
        assert_int_equal(f->res.jerr, SRV_JS_OK);
        assert_int_equal(g.res.jerr, SRV_JS_OK);
        assert_int_equal(g.res.seq, f->res.seq);
    }
    srv_stream_sm_close(&g.sm);
    free(a);
}

static void same_entries_give_identical_snapshots(void **state)
{
    struct sm_fixture *f = *state;
    struct sm_fixture g = {.index = 1};
    assert_int_equal(srv_stream_sm_init(&g.sm, "S"), 0);
    const char *cfg = "{\"name\":\"S\",\"max_msgs\":40,\"max_age\":"
                      "30000000000,\"duplicate_window\":2000000000}";
    config(f, cfg);
    config(&g, cfg);
    random_entries(f, 0x9e3779b97f4a7c15ull, 400);
    random_entries(&g, 0x9e3779b97f4a7c15ull, 400);
    uint8_t *a = NULL, *b = NULL, *c = NULL;
    size_t alen = 0, blen = 0, clen = 0;
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    assert_int_equal(srv_stream_sm_snapshot(&g.sm, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    /* Restored state encodes to the same bytes and keeps the counters. */
    struct srv_stream_sm r;
    char err[256];
    assert_int_equal(srv_stream_sm_init(&r, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&r, a, alen, err), 0);
    assert_int_equal(srv_stream_sm_snapshot(&r, &c, &clen), 0);
    assert_int_equal(clen, alen);
    assert_memory_equal(a, c, alen);
    assert_int_equal(r.msgs, f->sm.msgs);
    assert_int_equal(r.bytes, f->sm.bytes);
    assert_int_equal(r.deleted, f->sm.deleted);
    assert_int_equal(srv_stream_sm_first_seq(&r),
                     srv_stream_sm_first_seq(&f->sm));
    assert_int_equal(r.dedupe.count, f->sm.dedupe.count);
    srv_stream_sm_close(&r);
    srv_stream_sm_close(&g.sm);
    free(a);
    free(b);
    free(c);
}

static void msg_id_with_a_nul_byte_survives_a_snapshot(void **state)
{
    struct sm_fixture *f = *state;
    static const char h[] = "NATS/1.0\r\nNats-Msg-Id: a\0b\r\n\r\n";
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_PUBLISH,
                                  .ts_ns = 1,
                                  .subject = "a",
                                  .subject_len = 1,
                                  .hdr = (const uint8_t *)h,
                                  .hdr_len = sizeof h - 1,
                                  .data = (const uint8_t *)"x",
                                  .data_len = 1};
    sm_fixture_apply(f, &e);
    assert_int_equal(f->res.seq, 1);
    assert_int_equal(f->sm.last_msg_id_len, 3);
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    char err[256];
    struct srv_stream_sm r;
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    assert_int_equal(srv_stream_sm_init(&r, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&r, a, alen, err), 0);
    assert_int_equal(r.last_msg_id_len, 3);
    assert_memory_equal(r.last_msg_id, "a\0b", 3);
    assert_int_equal(srv_stream_sm_snapshot(&r, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    srv_stream_sm_close(&r);
    free(a);
    free(b);
}

static void restore_refuses_every_truncation(void **state)
{
    struct sm_fixture *f = *state;
    random_entries(f, 42, 100);
    uint8_t *a = NULL;
    size_t alen = 0;
    char err[256];
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    for (size_t n = 0; n < alen; n++) {
        struct srv_stream_sm r;
        assert_int_equal(srv_stream_sm_init(&r, "S"), 0);
        assert_int_equal(srv_stream_sm_restore(&r, a, n, err), KEEL_ECORRUPT);
        srv_stream_sm_close(&r);
    }
    free(a);
}

static void entry_decoder_refuses_truncation_and_trailing_bytes(void **state)
{
    (void)state;
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_PUBLISH,
                                  .ts_ns = 7,
                                  .subject = "foo.bar",
                                  .subject_len = 7,
                                  .hdr = (const uint8_t *)"NATS/1.0\r\n\r\n",
                                  .hdr_len = 12,
                                  .data = (const uint8_t *)"hello",
                                  .data_len = 5};
    uint8_t *buf = NULL;
    size_t len = 0;
    struct keel_stream_entry d;
    char err[256];
    assert_int_equal(keel_stream_entry_encode(&e, &buf, &len), 0);
    assert_int_equal(keel_stream_entry_decode(buf, len, &d, err), 0);
    assert_int_equal(d.ts_ns, 7);
    assert_memory_equal(d.subject, "foo.bar", 7);
    assert_memory_equal(d.data, "hello", 5);
    assert_int_equal(d.hdr_len, 12);
    for (size_t n = 0; n < len; n++) {
        assert_int_equal(keel_stream_entry_decode(buf, n, &d, err),
                         KEEL_ECORRUPT);
    }
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, buf, len);
    longer[len] = 0;
    assert_int_equal(keel_stream_entry_decode(longer, len + 1, &d, err),
                     KEEL_ECORRUPT);
    longer[0] = 0x40; /* a consumer kind */
    assert_int_equal(keel_stream_entry_decode(longer, len, &d, err),
                     KEEL_EINVAL);
    free(longer);
    free(buf);
}

static void entry_decoder_survives_random_bytes(void **state)
{
    (void)state;
    uint64_t seed = 12345;
    uint8_t buf[64];
    struct keel_stream_entry d;
    char err[256];
    int ok = 0;
    for (int i = 0; i < 20000; i++) {
        size_t n = rnd(&seed) % sizeof buf;
        for (size_t k = 0; k < n; k++) {
            buf[k] = (uint8_t)rnd(&seed);
        }
        if (n > 1) {
            buf[0] = (uint8_t)(1 + rnd(&seed) % 5);
            buf[1] = (uint8_t)(0x91 + rnd(&seed) % 4);
        }
        int rv = keel_stream_entry_decode(buf, n, &d, err);
        assert_true(rv == 0 || rv == KEEL_ECORRUPT || rv == KEEL_EINVAL);
        ok += rv == 0;
        if (rv == 0 && d.subject_len > 0) {
            assert_true(d.subject >= (const char *)buf &&
                        d.subject + d.subject_len <= (const char *)buf + n);
        }
    }
    (void)ok;
}

/* ---- mirrors (docs/decisions/0032-mirrors-pull-into-the-log.md) ---- */

/* A mirrored message of origin seq at origin time ts. */
static void mir(struct sm_fixture *f, uint64_t seq, int64_t ts,
                const char *subj, const char *data, uint64_t lost)
{
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_MIRROR,
                                  .seq = seq,
                                  .ts_ns = ts,
                                  .subject = subj,
                                  .subject_len = strlen(subj),
                                  .data = (const uint8_t *)data,
                                  .data_len = strlen(data),
                                  .lost = lost};
    sm_fixture_apply(f, &e);
}

static void mirror_entry_round_trips_and_is_strict(void **state)
{
    (void)state;
    static const char hdr[] = "NATS/1.0\r\nK: v\r\n\r\n";
    struct keel_stream_entry e = {.kind = KEEL_STREAM_E_MIRROR,
                                  .seq = 42,
                                  .ts_ns = 1234567,
                                  .subject = "o.a",
                                  .subject_len = 3,
                                  .hdr = (const uint8_t *)hdr,
                                  .hdr_len = sizeof hdr - 1,
                                  .data = (const uint8_t *)"pay",
                                  .data_len = 3,
                                  .lost = 7};
    uint8_t *buf = NULL;
    size_t len = 0;
    struct keel_stream_entry d;
    char err[256];
    assert_int_equal(keel_stream_entry_encode(&e, &buf, &len), 0);
    assert_int_equal(buf[0], KEEL_STREAM_E_MIRROR);
    assert_int_equal(keel_stream_entry_decode(buf, len, &d, err), 0);
    assert_int_equal(d.seq, 42);
    assert_int_equal(d.ts_ns, 1234567);
    assert_int_equal(d.lost, 7);
    assert_int_equal(d.subject_len, 3);
    assert_memory_equal(d.subject, "o.a", 3);
    assert_int_equal(d.hdr_len, sizeof hdr - 1);
    assert_memory_equal(d.data, "pay", 3);
    for (size_t cut = 0; cut < len; cut++) {
        assert_int_not_equal(keel_stream_entry_decode(buf, cut, &d, err), 0);
    }
    free(buf);
    /* Origin seq 0 or past INT64_MAX and a position-only entry with a
     * body are refused. */
    e.seq = 0;
    sm_fixture_refused(&e);
    e.seq = UINT64_MAX;
    sm_fixture_refused(&e);
    e.seq = 3;
    e.subject_len = 0;
    sm_fixture_refused(&e);
}

static void mirrored_messages_keep_origin_seqs_and_timestamps(void **state)
{
    struct sm_fixture *f = *state;
    mir(f, 1, 100, "o.a", "m1", 0);
    assert_true(f->res.stored);
    assert_int_equal(f->res.seq, 1);
    /* A filtered mirror: origin seqs 2 and 4 did not match. */
    mir(f, 3, 90, "o.a", "m3", 0);
    mir(f, 5, 300, "o.a", "m5", 0);
    assert_int_equal(f->sm.last_seq, 5);
    assert_int_equal(f->sm.msgs, 3);
    assert_int_equal(f->sm.deleted, 2);
    assert_null(srv_stream_sm_get(&f->sm, 2));
    assert_null(srv_stream_sm_get(&f->sm, 4));
    assert_int_equal(srv_stream_sm_get(&f->sm, 3)->ts_ns, 90);
    assert_int_equal(srv_stream_sm_get(&f->sm, 5)->ts_ns, 300);
    assert_int_equal(f->sm.last_ts_ns, 300);
    assert_int_equal(f->sm.mirror_pos, 5);
}

static void a_mirror_starting_late_has_no_deleted_prefix(void **state)
{
    struct sm_fixture *f = *state;
    mir(f, 3, 10, "o.a", "m3", 0);
    assert_int_equal(srv_stream_sm_first_seq(&f->sm), 3);
    assert_int_equal(f->sm.deleted, 0);
    assert_int_equal(f->sm.msgs, 1);
}

static void a_resent_origin_seq_is_skipped_never_stored_twice(void **state)
{
    struct sm_fixture *f = *state;
    for (uint64_t s = 1; s <= 4; s++) {
        mir(f, s, (int64_t)s, "o.a", "x", 0);
    }
    /* A new leader's pump sends 2..5 again behind what the log holds. */
    for (uint64_t s = 2; s <= 5; s++) {
        mir(f, s, (int64_t)s, "o.a", "x", s == 2 ? 9 : 0);
        assert_int_equal(f->res.duplicate, s <= 4);
        assert_int_equal(f->res.stored, s == 5);
    }
    assert_int_equal(f->sm.msgs, 5);
    assert_int_equal(f->sm.last_seq, 5);
    assert_int_equal(f->sm.mirror_lost, 0); /* a skipped entry counts nothing */
}

static void origin_drops_are_recorded_and_the_mirror_moves_on(void **state)
{
    struct sm_fixture *f = *state;
    mir(f, 1, 1, "o.a", "x", 0);
    /* The origin dropped 2..6 before the mirror read them. */
    mir(f, 7, 7, "o.a", "x", 5);
    assert_int_equal(f->sm.mirror_lost, 5);
    assert_int_equal(f->sm.last_seq, 7);
    /* It dropped everything up to 9 and holds nothing now. */
    struct keel_stream_entry e = {
        .kind = KEEL_STREAM_E_MIRROR, .seq = 9, .lost = 2};
    sm_fixture_apply(f, &e);
    assert_false(f->res.stored);
    assert_int_equal(f->sm.mirror_pos, 9);
    assert_int_equal(f->sm.last_seq, 9);
    assert_int_equal(f->sm.mirror_lost, 7);
    assert_int_equal(f->sm.msgs, 2);
    /* The next message lands at its origin seq. */
    mir(f, 10, 10, "o.b", "y", 0);
    assert_int_equal(f->res.seq, 10);
    assert_non_null(srv_stream_sm_get(&f->sm, 10));
    assert_int_equal(f->sm.msgs, 3);
}

static void the_snapshot_carries_the_position(void **state)
{
    struct sm_fixture *f = *state;
    mir(f, 2, 2, "o.a", "x", 1);
    mir(f, 4, 4, "o.b", "y", 0);
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    char err[256];
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    struct sm_fixture g = {.index = 10};
    assert_int_equal(srv_stream_sm_init(&g.sm, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&g.sm, a, alen, err), 0);
    assert_int_equal(g.sm.mirror_pos, 4);
    assert_int_equal(g.sm.mirror_lost, 1);
    assert_int_equal(srv_stream_sm_snapshot(&g.sm, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    /* After the restore a re-sent seq is still skipped. */
    mir(&g, 4, 4, "o.b", "y", 0);
    assert_true(g.res.duplicate);
    mir(&g, 6, 6, "o.a", "z", 0);
    assert_int_equal(g.res.seq, 6);
    assert_non_null(srv_stream_sm_get(&g.sm, 6));
    assert_int_equal(g.sm.msgs, 3);
    /* A position past last_seq is refused as corrupt. magic, flags, 6
     * limits, last_seq, last_ts, last_msg_id's length, then the position. */
    size_t mpos = 8 + 8 + 6 * 8 + 8 + 8 + 8;
    a[mpos] = 99;
    srv_stream_sm_close(&g.sm);
    assert_int_equal(srv_stream_sm_init(&g.sm, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&g.sm, a, alen, err), KEEL_ECORRUPT);
    srv_stream_sm_close(&g.sm);
    free(a);
    free(b);
}

/* An update that removes `mirror` promotes the stream: a MIRROR entry
 * read before it and committed after is skipped, a stale config that still
 * names the mirror does not undo it, publishes follow the last seq, and a
 * snapshot keeps all of it. */
static void a_promoted_mirror_skips_mirror_entries_for_good(void **state)
{
    struct sm_fixture *f = *state;
    static const char mcfg[] = "{\"name\":\"S\",\"mirror\":{\"name\":\"O\"}}";
    config(f, mcfg);
    mir(f, 1, 1, "o.a", "x", 0);
    mir(f, 2, 2, "o.a", "x", 0);
    config(f, "{\"name\":\"S\",\"subjects\":[\"S\"]}");
    mir(f, 3, 3, "o.a", "late", 0);
    assert_true(f->res.duplicate);
    assert_false(f->res.stored);
    config(f, mcfg);
    mir(f, 4, 4, "o.a", "late", 0);
    assert_false(f->res.stored);
    assert_int_equal(f->sm.last_seq, 2);
    assert_int_equal(f->sm.mirror_pos, 2);
    pub(f, 5, "S", "own");
    assert_int_equal(f->res.seq, 3);
    uint8_t *a = NULL, *b = NULL;
    size_t alen = 0, blen = 0;
    char err[256];
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    struct sm_fixture g = {.index = 20};
    assert_int_equal(srv_stream_sm_init(&g.sm, "S"), 0);
    assert_int_equal(srv_stream_sm_restore(&g.sm, a, alen, err), 0);
    assert_int_equal(srv_stream_sm_snapshot(&g.sm, &b, &blen), 0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    mir(&g, 5, 5, "o.a", "late", 0);
    assert_false(g.res.stored);
    assert_int_equal(g.sm.last_seq, 3);
    srv_stream_sm_close(&g.sm);
    free(a);
    free(b);
}

static void a_stream_that_is_no_mirror_keeps_its_snapshot_format(void **state)
{
    struct sm_fixture *f = *state;
    pub(f, 1, "a", "x");
    uint8_t *a = NULL;
    size_t alen = 0;
    assert_int_equal(srv_stream_sm_snapshot(&f->sm, &a, &alen), 0);
    assert_memory_equal(a, "KSS1", 4);
    free(a);
}

static void a_mirror_config_parses_and_encodes_like_nats_server(void **state)
{
    (void)state;
    struct srv_stream_config c;
    enum srv_js_err jerr;
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(
        sm_fixture_parse_cfg("{\"name\":\"M\",\"mirror\":{\"name\":\"O\","
                             "\"opt_start_seq\":3,\"filter_subject\":"
                             "\"o.a\",\"opt_start_time\":"
                             "\"2026-12-01T00:00:00Z\"}}",
                             &c, &jerr, err),
        0);
    assert_true(c.has_mirror);
    assert_string_equal(c.mirror.name, "O");
    assert_int_equal(c.mirror.opt_start_seq, 3);
    assert_string_equal(c.mirror.filter_subject, "o.a");
    assert_true(c.mirror.opt_start_time_ns > 0);
    assert_int_equal(c.nsubjects, 0);
    assert_int_equal(c.duplicate_window_ns, 0);
    json_t *o = NULL;
    assert_int_equal(srv_stream_config_encode(&c, &o, err), 0);
    assert_null(json_object_get(o, "subjects"));
    assert_null(json_object_get(o, "duplicate_window"));
    const json_t *m = json_object_get(o, "mirror");
    assert_string_equal(json_string_value(json_object_get(m, "name")), "O");
    assert_int_equal(json_integer_value(json_object_get(m, "opt_start_seq")),
                     3);
    /* The encoding parses back to an equal mirror. */
    struct srv_stream_config d;
    assert_int_equal(srv_stream_config_parse(o, &d, &jerr, err), 0);
    assert_true(srv_stream_mirror_equal(&c, &d));
    assert_true(srv_stream_config_equal(&c, &d));
    srv_stream_config_free(&d);
    json_decref(o);
    /* An empty origin name is accepted, as nats-server does. */
    struct srv_stream_config e;
    assert_int_equal(
        sm_fixture_parse_cfg("{\"name\":\"E\",\"mirror\":{\"name\":\"\"}}", &e,
                             &jerr, err),
        0);
    assert_false(srv_stream_mirror_equal(&c, &e));
    srv_stream_config_free(&e);
    srv_stream_config_free(&c);
}

static void mirror_config_errors_carry_nats_server_codes(void **state)
{
    (void)state;
    const struct {
        const char *body;
        enum srv_js_err jerr;
        const char *text;
    } bad[] = {
        {"{\"name\":\"M\",\"subjects\":[\"x\"],\"mirror\":{\"name\":\"O\"}}",
         SRV_JS_EMIRROR_SUBJECTS, "stream mirrors can not contain subjects"},
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\"},\"sources\":[{\"name\":"
         "\"P\"}]}",
         SRV_JS_EMIRROR_SOURCES, "stream mirrors can not also contain"},
        {"{\"name\":\"M\",\"subjects\":[\"m\"],\"mirror_direct\":true}",
         SRV_JS_ESTREAM_CONFIG,
         "stream has no mirror but does have mirror direct"},
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"a.b\"}}",
         SRV_JS_ESTREAM_CONFIG, "not a valid stream name"},
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\",\"filter_subject\":"
         "\"a..b\"}}",
         SRV_JS_ESTREAM_CONFIG, "not a valid subject"},
        {"{\"name\":\"M\",\"mirror\":{\"name\":\"O\",\"opt_start_time\":"
         "\"yesterday\"}}",
         SRV_JS_ESTREAM_CONFIG, "RFC3339"},
        {"{\"name\":\"M\",\"mirror\":\"O\"}", SRV_JS_ESTREAM_CONFIG,
         "mirror must be an object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct srv_stream_config c;
        enum srv_js_err jerr = SRV_JS_OK;
        char err[KEEL_ERRMSG_MAX];
        assert_int_equal(sm_fixture_parse_cfg(bad[i].body, &c, &jerr, err),
                         KEEL_EINVAL);
        assert_int_equal(jerr, bad[i].jerr);
        assert_non_null(strstr(err, bad[i].text));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name)                                                                \
    cmocka_unit_test_setup_teardown(name, setup, sm_fixture_teardown)
        T(publishes_get_consecutive_seqs_and_counters),
        T(timestamps_never_go_backwards),
        T(max_msgs_with_discard_old_drops_the_oldest),
        T(max_msgs_with_discard_new_refuses_with_10077),
        T(max_bytes_discard_old_and_new),
        T(max_msgs_per_subject_keeps_the_newest_of_each),
        T(discard_new_per_subject_refuses_only_the_full_subject),
        T(first_seq_sets_the_first_message_seq_once),
        T(max_msg_size_refuses_with_10054),
        T(tick_entries_expire_messages_past_max_age),
        T(same_msg_id_within_window_is_a_duplicate),
        T(expected_last_sequence_mismatch_is_10071),
        T(purge_all_moves_first_seq_past_last),
        T(purge_by_filter_seq_and_keep),
        T(delete_interior_and_missing),
        T(remove_by_consumer_ack_updates_subject_counts),
        T(deleting_a_subjects_newest_moves_its_last_back),
        T(acking_a_subjects_newest_moves_its_last_back),
        T(purges_and_limits_keep_each_subjects_last_exact),
        T(subject_last_is_exact_and_survives_a_snapshot),
        T(same_entries_give_identical_snapshots),
        T(msg_id_with_a_nul_byte_survives_a_snapshot),
        T(restore_refuses_every_truncation),
        T(entry_decoder_refuses_truncation_and_trailing_bytes),
        T(entry_decoder_survives_random_bytes),
        T(mirror_entry_round_trips_and_is_strict),
        T(mirrored_messages_keep_origin_seqs_and_timestamps),
        T(a_mirror_starting_late_has_no_deleted_prefix),
        T(a_resent_origin_seq_is_skipped_never_stored_twice),
        T(origin_drops_are_recorded_and_the_mirror_moves_on),
        T(the_snapshot_carries_the_position),
        T(a_promoted_mirror_skips_mirror_entries_for_good),
        T(a_stream_that_is_no_mirror_keeps_its_snapshot_format),
        T(a_mirror_config_parses_and_encodes_like_nats_server),
        T(mirror_config_errors_carry_nats_server_codes),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
