/* srv_consumer_sm: the consumer state machine against a model stream:
 * deliver policies, ack floor and sparse acks, ack all, retention
 * (interest, workqueue), create/update rules, the pending set and
 * redelivery, filtered delivery against a naive model, snapshot bytes. */
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
#include "srv_consumer_sm.h"

#define MODEL_MSGS_MAX 512

/* The model stream: seq i+1 is msgs[i]. */
struct model {
    char subj[MODEL_MSGS_MAX][32];
    int64_t ts[MODEL_MSGS_MAX];
    bool gone[MODEL_MSGS_MAX];
    uint64_t n;
    uint64_t removed;
};

struct fixture {
    struct model m;
    struct srv_csm_stream st;
    struct srv_csm_set set, set2;
    struct srv_csm_result res;
    char errmsg[KEEL_ERRMSG_MAX];
};

static int m_next(void *ctx, uint64_t from, char *const *f, uint32_t n,
                  uint64_t *seq)
{
    struct model *m = ctx;
    for (uint64_t s = from > 0 ? from : 1; s <= m->n; s++) {
        if (m->gone[s - 1]) {
            continue;
        }
        bool ok = n == 0;
        for (uint32_t i = 0; i < n && !ok; i++) {
            ok = srv_js_subject_matches(f[i], m->subj[s - 1]);
        }
        if (ok) {
            *seq = s;
            return 0;
        }
    }
    return KEEL_ENOENT;
}

static int m_subject(void *ctx, uint64_t seq, char *buf)
{
    struct model *m = ctx;
    if (seq == 0 || seq > m->n || m->gone[seq - 1]) {
        return KEEL_ENOENT;
    }
    strcpy(buf, m->subj[seq - 1]);
    return 0;
}

static int m_last_for(void *ctx, const char *subj, uint64_t *seq)
{
    struct model *m = ctx;
    for (uint64_t s = m->n; s >= 1; s--) {
        if (!m->gone[s - 1] && strcmp(m->subj[s - 1], subj) == 0) {
            *seq = s;
            return 0;
        }
    }
    return KEEL_ENOENT;
}

static int m_at_time(void *ctx, int64_t ts, uint64_t *seq)
{
    struct model *m = ctx;
    for (uint64_t s = 1; s <= m->n; s++) {
        if (!m->gone[s - 1] && m->ts[s - 1] >= ts) {
            *seq = s;
            return 0;
        }
    }
    return KEEL_ENOENT;
}

static void m_bounds(void *ctx, uint64_t *first, uint64_t *last)
{
    struct model *m = ctx;
    *first = 0;
    *last = m->n;
    for (uint64_t s = 1; s <= m->n; s++) {
        if (!m->gone[s - 1]) {
            *first = s;
            return;
        }
    }
    *first = m->n + 1;
}

static void m_remove(void *ctx, uint64_t seq)
{
    struct model *m = ctx;
    assert_false(m->gone[seq - 1]);
    m->gone[seq - 1] = true;
    m->removed++;
}

static void m_add(struct model *m, const char *subj)
{
    assert_true(m->n < MODEL_MSGS_MAX);
    snprintf(m->subj[m->n], sizeof m->subj[0], "%s", subj);
    m->ts[m->n] = (int64_t)(m->n + 1) * 1000;
    m->n++;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    f->st = (struct srv_csm_stream){.ctx = &f->m,
                                    .retention = SRV_JS_RETENTION_LIMITS,
                                    .next_seq = m_next,
                                    .subject = m_subject,
                                    .last_for_subject = m_last_for,
                                    .seq_at_time = m_at_time,
                                    .bounds = m_bounds,
                                    .remove = m_remove};
    srv_csm_set_init(&f->set);
    srv_csm_set_init(&f->set2);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    srv_csm_set_close(&f->set);
    srv_csm_set_close(&f->set2);
    free(f);
    return 0;
}

/* Commit a CREATE of the config JSON text to set s. */
static struct srv_csm *create(struct fixture *f, struct srv_csm_set *s,
                              const char *json, enum srv_csm_action action)
{
    json_error_t e;
    json_t *j = json_loads(json, 0, &e);
    assert_non_null(j);
    struct srv_consumer_config cfg;
    enum srv_js_err jerr = SRV_JS_OK;
    assert_int_equal(srv_consumer_config_parse(j, &cfg, &jerr, f->errmsg), 0);
    json_decref(j);
    uint8_t *p = NULL;
    uint32_t len = 0;
    assert_int_equal(
        srv_csm_encode_create(&cfg, action, 77, &p, &len, f->errmsg), 0);
    srv_consumer_config_free(&cfg);
    assert_int_equal(srv_csm_apply(s, &f->st, SRV_CSM_KIND_CREATE, p, len,
                                   &f->res, f->errmsg),
                     0);
    free(p);
    return f->res.c;
}

static void acks(struct fixture *f, struct srv_csm_set *s, const char *name,
                 struct srv_csm_pos delivered, const struct srv_csm_ack *a,
                 uint32_t n)
{
    uint8_t *p = NULL;
    uint32_t len = 0;
    assert_int_equal(
        srv_csm_encode_acks(name, delivered, a, n, &p, &len, f->errmsg), 0);
    assert_int_equal(
        srv_csm_apply(s, &f->st, SRV_CSM_KIND_ACKS, p, len, &f->res, f->errmsg),
        0);
    free(p);
}

static void deliver_policies_set_the_starting_floor(void **state)
{
    struct fixture *f = *state;
    const char *subj[] = {"a", "b", "a", "c", "b"};
    for (int i = 0; i < 5; i++) {
        m_add(&f->m, subj[i]);
    }
    struct {
        const char *cfg;
        uint64_t floor, lps_end;
    } cases[] = {
        {"{\"durable_name\":\"ALL\"}", 0, 0},
        {"{\"durable_name\":\"NEW\",\"deliver_policy\":\"new\"}", 5, 0},
        {"{\"durable_name\":\"LAST\",\"deliver_policy\":\"last\"}", 4, 0},
        {"{\"durable_name\":\"LASTA\",\"deliver_policy\":\"last\","
         "\"filter_subject\":\"a\"}",
         2, 0},
        {"{\"durable_name\":\"SEQ\",\"deliver_policy\":\"by_start_sequence\","
         "\"opt_start_seq\":3}",
         2, 0},
        {"{\"durable_name\":\"TIME\",\"deliver_policy\":\"by_start_time\","
         "\"opt_start_time\":\"1970-01-01T00:00:00.000003500Z\"}",
         3, 0},
        {"{\"durable_name\":\"LPS\",\"deliver_policy\":"
         "\"last_per_subject\"}",
         0, 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct srv_csm *c =
            create(f, &f->set, cases[i].cfg, SRV_CSM_CREATE_OR_UPDATE);
        assert_non_null(c);
        assert_true(f->res.created);
        assert_int_equal(c->ack_floor.sseq, cases[i].floor);
        assert_int_equal(c->lps_end, cases[i].lps_end);
        assert_int_equal(c->created_ns, 77);
    }
    /* last_per_subject wants only the last message of each subject. */
    struct srv_csm *lps = srv_csm_find(&f->set, "LPS");
    uint64_t seq = 0, got[5], n = 0;
    for (uint64_t from = 1; srv_csm_next_wanted(lps, &f->st, from, &seq) == 0;
         from = seq + 1) {
        got[n++] = seq;
    }
    assert_int_equal(n, 3);
    assert_int_equal(got[0], 3);
    assert_int_equal(got[1], 4);
    assert_int_equal(got[2], 5);
}

static void floor_waits_for_the_gap_and_skips_unwanted_seqs(void **state)
{
    struct fixture *f = *state;
    const char *subj[] = {"a", "x", "a", "x", "a"};
    for (int i = 0; i < 5; i++) {
        m_add(&f->m, subj[i]);
    }
    struct srv_csm *c =
        create(f, &f->set, "{\"durable_name\":\"C\",\"filter_subject\":\"a\"}",
               SRV_CSM_CREATE_OR_UPDATE);
    struct srv_csm_ack a5 = {5, 3, SRV_CSM_ACK_ONE};
    acks(f, &f->set, "C", (struct srv_csm_pos){3, 5}, &a5, 1);
    assert_int_equal(c->ack_floor.sseq, 0);
    assert_int_equal(c->nacked, 1);
    assert_true(srv_csm_is_acked(c, 5));
    assert_false(srv_csm_is_acked(c, 3));
    struct srv_csm_ack a1 = {1, 1, SRV_CSM_ACK_ONE};
    acks(f, &f->set, "C", (struct srv_csm_pos){3, 5}, &a1, 1);
    assert_int_equal(c->ack_floor.sseq, 1);
    struct srv_csm_ack a3 = {3, 2, SRV_CSM_ACK_TERM};
    acks(f, &f->set, "C", (struct srv_csm_pos){3, 5}, &a3, 1);
    /* 2 and 4 are x: they never block the floor. */
    assert_int_equal(c->ack_floor.sseq, 5);
    assert_int_equal(c->ack_floor.cseq, 3);
    assert_int_equal(c->nacked, 0);
    assert_int_equal(c->delivered.sseq, 5);
    assert_int_equal(f->m.removed, 0); /* limits retention keeps all */
}

static void ack_all_acks_everything_up_to_the_seq(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 6; i++) {
        m_add(&f->m, "a");
    }
    f->st.retention = SRV_JS_RETENTION_WORKQUEUE;
    struct srv_csm *c = create(f, &f->set,
                               "{\"durable_name\":\"C\",\"ack_policy\":\"all\","
                               "\"deliver_subject\":\"d\"}",
                               SRV_CSM_CREATE_OR_UPDATE);
    assert_non_null(c);
    struct srv_csm_pending p;
    for (uint64_t s = 1; s <= 6; s++) {
        assert_int_equal(srv_csm_deliver(c, s, 0, &p), 0);
    }
    assert_int_equal(srv_csm_num_ack_pending(c), 6);
    struct srv_csm_ack a = {4, 4, SRV_CSM_ACK_UPTO};
    acks(f, &f->set, "C", c->live, &a, 1);
    assert_int_equal(c->ack_floor.sseq, 4);
    assert_int_equal(srv_csm_num_ack_pending(c), 2);
    assert_int_equal(f->m.removed, 4);
    assert_int_equal(f->res.removed_msgs, 4);
}

static void
interest_removes_only_after_every_interested_consumer_acks(void **state)
{
    struct fixture *f = *state;
    f->st.retention = SRV_JS_RETENTION_INTEREST;
    create(f, &f->set, "{\"durable_name\":\"A\"}", SRV_CSM_CREATE_OR_UPDATE);
    create(f, &f->set, "{\"durable_name\":\"B\",\"filter_subject\":\"b\"}",
           SRV_CSM_CREATE_OR_UPDATE);
    m_add(&f->m, "a");
    srv_csm_on_stored(&f->set, &f->st, 1);
    m_add(&f->m, "b");
    srv_csm_on_stored(&f->set, &f->st, 2);
    assert_int_equal(f->m.removed, 0);
    struct srv_csm_ack a1 = {1, 1, SRV_CSM_ACK_ONE};
    acks(f, &f->set, "A", (struct srv_csm_pos){2, 2}, &a1, 1);
    assert_true(f->m.gone[0]); /* only A wanted "a" */
    struct srv_csm_ack a2 = {2, 2, SRV_CSM_ACK_ONE};
    acks(f, &f->set, "A", (struct srv_csm_pos){2, 2}, &a2, 1);
    assert_false(f->m.gone[1]); /* B still holds "b" */
    uint8_t *p = NULL;
    uint32_t len = 0;
    assert_int_equal(srv_csm_encode_delete("B", &p, &len, f->errmsg), 0);
    assert_int_equal(srv_csm_apply(&f->set, &f->st, SRV_CSM_KIND_DELETE, p, len,
                                   &f->res, f->errmsg),
                     0);
    free(p);
    assert_true(f->res.deleted);
    assert_true(f->m.gone[1]); /* the delete released it */
    /* With no consumer left, a new message has no interest at all. */
    assert_int_equal(srv_csm_apply(&f->set, &f->st, SRV_CSM_KIND_DELETE,
                                   (const uint8_t *)"\x01\x01\0\0\0\0\0\0\0A",
                                   10, &f->res, f->errmsg),
                     0);
    m_add(&f->m, "c");
    srv_csm_on_stored(&f->set, &f->st, 3);
    assert_true(f->m.gone[2]);
}

static void
workqueue_refuses_overlapping_filters_and_pull_without_explicit(void **state)
{
    struct fixture *f = *state;
    f->st.retention = SRV_JS_RETENTION_WORKQUEUE;
    assert_non_null(create(
        f, &f->set, "{\"durable_name\":\"A\",\"filter_subject\":\"a.*\"}",
        SRV_CSM_CREATE_OR_UPDATE));
    assert_null(create(f, &f->set,
                       "{\"durable_name\":\"B\",\"filter_subject\":\"a.b\"}",
                       SRV_CSM_CREATE_OR_UPDATE));
    assert_int_equal(f->res.jerr, SRV_JS_EWQ_NOT_UNIQUE);
    assert_null(create(f, &f->set, "{\"durable_name\":\"C\"}",
                       SRV_CSM_CREATE_OR_UPDATE));
    assert_int_equal(f->res.jerr, SRV_JS_EWQ_MULTIPLE_UNFILTERED);
    assert_null(create(f, &f->set,
                       "{\"durable_name\":\"D\",\"filter_subject\":\"b\","
                       "\"ack_policy\":\"none\"}",
                       SRV_CSM_CREATE_OR_UPDATE));
    assert_int_equal(f->res.jerr, SRV_JS_EWORKQUEUE_ACK);
    assert_non_null(create(f, &f->set,
                           "{\"durable_name\":\"E\",\"filter_subject\":\"b\"}",
                           SRV_CSM_CREATE_OR_UPDATE));
    assert_int_equal(f->set.n, 2);
}

static void create_update_rules_follow_the_action(void **state)
{
    struct fixture *f = *state;
    assert_non_null(
        create(f, &f->set, "{\"durable_name\":\"C\"}", SRV_CSM_CREATE));
    assert_true(f->res.created);
    assert_non_null(
        create(f, &f->set, "{\"durable_name\":\"C\"}", SRV_CSM_CREATE));
    assert_false(f->res.created); /* same config: success */
    assert_null(create(f, &f->set,
                       "{\"durable_name\":\"C\",\"max_ack_pending\":5}",
                       SRV_CSM_CREATE));
    assert_int_equal(f->res.jerr, SRV_JS_ECONSUMER_EXISTS);
    struct srv_csm *c =
        create(f, &f->set, "{\"durable_name\":\"C\",\"max_ack_pending\":5}",
               SRV_CSM_UPDATE);
    assert_non_null(c);
    assert_int_equal(c->cfg.max_ack_pending, 5);
    assert_null(create(f, &f->set,
                       "{\"durable_name\":\"C\",\"deliver_policy\":\"new\"}",
                       SRV_CSM_CREATE_OR_UPDATE));
    assert_int_equal(f->res.jerr, SRV_JS_ECONSUMER_CONFIG);
    assert_null(create(f, &f->set, "{\"durable_name\":\"D\"}", SRV_CSM_UPDATE));
    assert_int_equal(f->res.jerr, SRV_JS_ECONSUMER_DOES_NOT_EXIST);
    assert_int_equal(f->set.n, 1);
}

static void pending_redelivers_after_ack_wait_up_to_max_deliver(void **state)
{
    struct fixture *f = *state;
    m_add(&f->m, "a");
    m_add(&f->m, "a");
    struct srv_csm *c =
        create(f, &f->set,
               "{\"durable_name\":\"C\",\"ack_wait\":1000,\"max_deliver\":2}",
               SRV_CSM_CREATE_OR_UPDATE);
    struct srv_csm_pending p;
    assert_int_equal(srv_csm_deliver(c, 1, 0, &p), 0);
    assert_int_equal(p.cseq, 1);
    assert_int_equal(srv_csm_deliver(c, 2, 10, &p), 0);
    assert_int_equal(p.cseq, 2);
    assert_null(srv_csm_pending_due(c, 999));
    assert_int_equal(srv_csm_pending_next_deadline(c), 1000);
    struct srv_csm_pending *due = srv_csm_pending_due(c, 1005);
    assert_non_null(due);
    assert_int_equal(due->sseq, 1);
    assert_int_equal(srv_csm_deliver(c, 1, 1005, &p), 0);
    assert_int_equal(p.deliveries, 2);
    assert_int_equal(p.cseq, 3);
    assert_int_equal(c->redelivered, 1);
    /* seq 1 reached max_deliver: never due again; seq 2 is. */
    due = srv_csm_pending_due(c, 100000);
    assert_non_null(due);
    assert_int_equal(due->sseq, 2);
    struct srv_csm_ack a = {2, 2, SRV_CSM_ACK_ONE};
    acks(f, &f->set, "C", c->live, &a, 1);
    assert_null(srv_csm_pending_due(c, 100000));
    assert_int_equal(srv_csm_num_ack_pending(c), 1);
    assert_int_equal(srv_csm_pending_next_deadline(c), INT64_MAX);
}

static void a_deadline_moved_earlier_is_due_at_once(void **state)
{
    struct fixture *f = *state;
    m_add(&f->m, "a");
    struct srv_csm *c =
        create(f, &f->set, "{\"durable_name\":\"C\",\"ack_wait\":1000}",
               SRV_CSM_CREATE_OR_UPDATE);
    struct srv_csm_pending p;
    assert_int_equal(srv_csm_deliver(c, 1, 0, &p), 0);
    assert_null(srv_csm_pending_due(c, 500)); /* remembers 1000 */
    struct srv_csm_pending *pp = srv_csm_pending_get(c, 1);
    pp->deadline_ns = 100; /* what a -NAK does */
    srv_csm_pending_touch(c, pp);
    assert_ptr_equal(srv_csm_pending_due(c, 500), pp);
}

static void leader_start_rebuilds_unacked_deliveries_as_due(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 4; i++) {
        m_add(&f->m, "a");
    }
    struct srv_csm *c = create(f, &f->set, "{\"durable_name\":\"C\"}",
                               SRV_CSM_CREATE_OR_UPDATE);
    struct srv_csm_ack a = {2, 2, SRV_CSM_ACK_ONE};
    acks(f, &f->set, "C", (struct srv_csm_pos){3, 3}, &a, 1);
    assert_int_equal(srv_csm_leader_start(c, &f->st, 50), 0);
    assert_int_equal(srv_csm_num_ack_pending(c), 2); /* 1 and 3 */
    assert_non_null(srv_csm_pending_get(c, 1));
    assert_null(srv_csm_pending_get(c, 2));
    assert_non_null(srv_csm_pending_get(c, 3));
    assert_null(srv_csm_pending_get(c, 4));
    struct srv_csm_pending p;
    assert_int_equal(srv_csm_deliver(c, 1, 50, &p), 0);
    assert_int_equal(p.cseq, 4); /* consumer seqs continue */
    assert_int_equal(p.deliveries, 2);
}

/* Property: for random streams and filters, walking next_wanted delivers
 * exactly the messages a naive scan says match, in order, and num_pending
 * counts them. */
static void
filtered_consumer_never_skips_or_delivers_a_wrong_message(void **state)
{
    struct fixture *f = *state;
    const char *subjects[] = {"a.x", "a.y", "b.x", "b.y.z", "c"};
    const char *filters[] = {"{\"filter_subject\":\"a.*\"}",
                             "{\"filter_subject\":\"*.x\"}",
                             "{\"filter_subjects\":[\"b.>\",\"c\"]}",
                             "{\"filter_subjects\":[\"a.y\",\"b.x\"]}", "{}"};
    uint32_t rng = 12345;
    for (int round = 0; round < 200; round++) {
        memset(&f->m, 0, sizeof f->m);
        srv_csm_set_close(&f->set);
        uint64_t n = 1 + (rng = rng * 1103515245 + 12345) % 200;
        for (uint64_t i = 0; i < n; i++) {
            rng = rng * 1103515245 + 12345;
            m_add(&f->m, subjects[(rng >> 16) % 5]);
            f->m.gone[i] = ((rng >> 8) % 7) == 0;
        }
        size_t fi = (size_t)round % 5;
        char cfg[256];
        if (strcmp(filters[fi], "{}") == 0) {
            snprintf(cfg, sizeof cfg, "{\"durable_name\":\"P\"}");
        } else {
            snprintf(cfg, sizeof cfg, "{\"durable_name\":\"P\",%s",
                     filters[fi] + 1);
        }
        struct srv_csm *c = create(f, &f->set, cfg, SRV_CSM_CREATE_OR_UPDATE);
        assert_non_null(c);
        uint64_t expect = 0;
        for (uint64_t s = 1; s <= n; s++) {
            if (!f->m.gone[s - 1] &&
                srv_consumer_config_matches(&c->cfg, f->m.subj[s - 1])) {
                expect++;
            }
        }
        assert_int_equal(srv_csm_num_pending(c, &f->st, 0, UINT64_MAX), expect);
        uint64_t from = 1, seq = 0, prev = 0, got = 0;
        while (srv_csm_next_wanted(c, &f->st, from, &seq) == 0) {
            for (uint64_t s = prev + 1; s < seq; s++) {
                assert_true(f->m.gone[s - 1] || !srv_consumer_config_matches(
                                                    &c->cfg, f->m.subj[s - 1]));
            }
            assert_false(f->m.gone[seq - 1]);
            assert_true(
                srv_consumer_config_matches(&c->cfg, f->m.subj[seq - 1]));
            prev = seq;
            from = seq + 1;
            got++;
        }
        assert_int_equal(got, expect);
    }
}

static void build_state(struct fixture *f, struct srv_csm_set *s)
{
    create(f, s, "{\"durable_name\":\"Z\",\"filter_subject\":\"a\"}",
           SRV_CSM_CREATE_OR_UPDATE);
    create(f, s, "{\"durable_name\":\"A\",\"deliver_subject\":\"in\"}",
           SRV_CSM_CREATE_OR_UPDATE);
    struct srv_csm_ack a[] = {{3, 2, SRV_CSM_ACK_ONE},
                              {5, 3, SRV_CSM_ACK_TERM}};
    acks(f, s, "Z", (struct srv_csm_pos){3, 5}, a, 2);
}

static void snapshot_bytes_are_deterministic_and_decode_back(void **state)
{
    struct fixture *f = *state;
    for (int i = 0; i < 6; i++) {
        m_add(&f->m, "a");
    }
    build_state(f, &f->set);
    build_state(f, &f->set2);
    uint8_t *a = NULL, *b = NULL, *c = NULL;
    uint32_t alen = 0, blen = 0, clen = 0;
    assert_int_equal(srv_csm_snapshot_encode(&f->set, &a, &alen, f->errmsg), 0);
    assert_int_equal(srv_csm_snapshot_encode(&f->set2, &b, &blen, f->errmsg),
                     0);
    assert_int_equal(alen, blen);
    assert_memory_equal(a, b, alen);
    assert_int_equal(srv_csm_snapshot_decode(&f->set2, a, alen, f->errmsg), 0);
    assert_int_equal(f->set2.n, 2);
    struct srv_csm *z = srv_csm_find(&f->set2, "Z");
    assert_non_null(z);
    assert_int_equal(z->nacked, 2);
    assert_int_equal(z->delivered.sseq, 5);
    assert_int_equal(srv_csm_snapshot_encode(&f->set2, &c, &clen, f->errmsg),
                     0);
    assert_int_equal(clen, alen);
    assert_memory_equal(a, c, alen);
    /* Every truncation and a flipped version byte are refused. */
    for (uint32_t cut = 0; cut < alen; cut++) {
        assert_int_equal(srv_csm_snapshot_decode(&f->set2, a, cut, f->errmsg),
                         KEEL_ECORRUPT);
        assert_int_equal(f->set2.n, 0);
    }
    a[0] ^= 0xff;
    assert_int_equal(srv_csm_snapshot_decode(&f->set2, a, alen, f->errmsg),
                     KEEL_ECORRUPT);
    free(a);
    free(b);
    free(c);
}

static void truncated_entries_are_corrupt_not_asserted(void **state)
{
    struct fixture *f = *state;
    m_add(&f->m, "a");
    create(f, &f->set, "{\"durable_name\":\"C\"}", SRV_CSM_CREATE_OR_UPDATE);
    struct srv_csm_ack a = {1, 1, SRV_CSM_ACK_ONE};
    uint8_t *p = NULL;
    uint32_t len = 0;
    assert_int_equal(srv_csm_encode_acks("C", (struct srv_csm_pos){1, 1}, &a, 1,
                                         &p, &len, f->errmsg),
                     0);
    for (uint32_t cut = 0; cut < len; cut++) {
        assert_int_equal(srv_csm_apply(&f->set, &f->st, SRV_CSM_KIND_ACKS, p,
                                       cut, &f->res, f->errmsg),
                         KEEL_ECORRUPT);
    }
    free(p);
    assert_int_equal(srv_csm_find(&f->set, "C")->ack_floor.sseq, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(deliver_policies_set_the_starting_floor),
        T(floor_waits_for_the_gap_and_skips_unwanted_seqs),
        T(ack_all_acks_everything_up_to_the_seq),
        T(interest_removes_only_after_every_interested_consumer_acks),
        T(workqueue_refuses_overlapping_filters_and_pull_without_explicit),
        T(create_update_rules_follow_the_action),
        T(pending_redelivers_after_ack_wait_up_to_max_deliver),
        T(a_deadline_moved_earlier_is_due_at_once),
        T(leader_start_rebuilds_unacked_deliveries_as_due),
        T(filtered_consumer_never_skips_or_delivers_a_wrong_message),
        T(snapshot_bytes_are_deterministic_and_decode_back),
        T(truncated_entries_are_corrupt_not_asserted),
#undef T
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
