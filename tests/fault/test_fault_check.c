/* The fault suite's checker (faults_check.c) on made-up outcomes: no
 * server, no data directory (an external run skips the disk scan). An
 * attempt answered with a JetStream error ("not stored") whose value the
 * final read serves fails the run and is counted. The mirror workload's
 * comparison counts a gap, a reorder and a duplicate; the aggregate
 * workload's count does the same per source.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "faults.h"

struct fixture {
    struct f_run_ctx c;
    struct f_nemesis nem;
    struct f_view read;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->nem = (struct f_nemesis){.name = "kill", .expect = F_EXPECT_ALL};
    f->c.nem = &f->nem;
    f->c.cfg.urls = "nats://external"; /* no data directories to scan */
    f->c.cfg.replicas = 1;
    f->c.att = calloc(F_SEQS_MAX, sizeof *f->c.att);
    f->c.consumer_seen = calloc(F_SEQS_MAX, 1);
    f->c.destroyed = calloc(F_SEQS_MAX, 1);
    f->read.slot_at = calloc(F_SEQS_MAX + 1024, sizeof *f->read.slot_at);
    assert_non_null(f->c.att);
    assert_non_null(f->c.consumer_seen);
    assert_non_null(f->c.destroyed);
    assert_non_null(f->read.slot_at);
    f->read.n = 1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    free(f->c.att);
    free(f->c.consumer_seen);
    free(f->c.destroyed);
    free(f->read.slot_at);
    free(f);
    return 0;
}

/* Attempt slot s acked at seq, served there and delivered. */
static void acked_and_served(struct fixture *f, uint32_t s, uint64_t seq)
{
    f->c.att[s] = (struct f_attempt){F_ACKED, seq};
    f->c.consumer_seen[s] = 1;
    f->read.slot_at[seq] = s + 1;
    f->read.n = seq + 1 > f->read.n ? seq + 1 : f->read.n;
}

static void failed_attempt(struct fixture *f, uint32_t s, uint64_t served_at)
{
    f->c.att[s] = (struct f_attempt){F_FAILED, 0};
    if (served_at != 0) {
        f->read.slot_at[served_at] = s + 1;
        f->read.n = served_at + 1 > f->read.n ? served_at + 1 : f->read.n;
    }
}

/* Two acked values served around one failed attempt, which the read
 * serves at failed_at (0: not served). */
static void check_around_a_failure(struct fixture *f, uint64_t failed_at,
                                   struct f_result *r)
{
    acked_and_served(f, 0, 1);
    failed_attempt(f, 1, failed_at);
    acked_and_served(f, 2, failed_at != 0 ? failed_at + 1 : 2);
    f_check(&f->c, &f->read, NULL, 0, r);
    assert_int_equal(r->acked, 2);
    assert_int_equal(r->failed, 1);
    assert_int_equal(r->lost, 0);
    assert_int_equal(r->never_published, 0);
}

static void a_failed_publish_that_is_not_served_passes(void **state)
{
    struct f_result r;

    check_around_a_failure(*state, 0, &r);
    assert_int_equal(r.failed_stored, 0);
    assert_true(r.pass);
}

static void a_failed_publish_that_is_served_fails_the_run(void **state)
{
    struct f_result r;

    check_around_a_failure(*state, 2, &r);
    assert_int_equal(r.failed_stored, 1);
    assert_false(r.pass);
}

/* An R1 media-fault run: the one node's view for the checker. */
static void r1_flagged_node(struct fixture *f, struct f_view *node)
{
    f->nem.expect = F_EXPECT_FLAGGED;
    memset(node, 0, sizeof *node);
    node->slot_at = calloc(F_SEQS_MAX + 1024, sizeof *node->slot_at);
    assert_non_null(node->slot_at);
    node->n = 1;
    node->flagged = true;
    node->first_damage = 1;
    f->c.att[0] = (struct f_attempt){F_ACKED, 1};
}

static void
an_unserved_value_on_a_node_flagging_damage_is_unavailable(void **state)
{
    struct fixture *f = *state;
    struct f_view node;
    struct f_result r;

    r1_flagged_node(f, &node);
    f_check(&f->c, &f->read, &node, 1, &r);
    assert_int_equal(r.unavailable, 1);
    assert_int_equal(r.lost, 0);
    assert_true(r.pass);
    f_view_free(&node);
}

/* keeld lost the stream from its meta state: `keel store dump` fails, and
 * that is no damage report excusing what the read does not serve. */
static void a_failed_dump_excuses_nothing_and_fails_the_run(void **state)
{
    struct fixture *f = *state;
    struct f_view node;
    struct f_result r;

    r1_flagged_node(f, &node);
    node.dump_failed = true;
    f_check(&f->c, &f->read, &node, 1, &r);
    assert_int_equal(r.unavailable, 0);
    assert_int_equal(r.lost, 1);
    assert_int_equal(r.dump_failed, 1);
    assert_false(r.pass);
    f_view_free(&node);
}

/* Three replicas of six acked values at indexes 1..6; the third caught up
 * by InstallSnapshot: its log starts at index 4. */
static void three_replicas_one_installed(struct fixture *f,
                                         struct f_view *nodes)
{
    f->c.cfg.replicas = 3;
    for (uint32_t s = 0; s < 6; s++) {
        acked_and_served(f, s, s + 1);
    }
    f->read.n = 7;
    for (int i = 0; i < 3; i++) {
        memset(&nodes[i], 0, sizeof nodes[i]);
        nodes[i].slot_at = calloc(F_SEQS_MAX + 1024, sizeof *nodes[i].slot_at);
        assert_non_null(nodes[i].slot_at);
        nodes[i].n = 7;
        nodes[i].first_index = i == 2 ? 4 : 1;
        for (uint64_t idx = nodes[i].first_index; idx <= 6; idx++) {
            nodes[i].slot_at[idx] = (uint32_t)idx; /* slot idx-1, + 1 */
        }
    }
}

/* Found by the soak: a replica healed by InstallSnapshot counted every
 * value before its first index as divergent. */
static void values_in_an_installed_snapshot_are_not_divergent(void **state)
{
    struct fixture *f = *state;
    struct f_view nodes[3];
    struct f_result r;

    three_replicas_one_installed(f, nodes);
    f_check(&f->c, &f->read, nodes, 3, &r);
    assert_int_equal(r.divergent, 0);
    assert_int_equal(r.lost, 0);
    assert_true(r.pass);
    for (int i = 0; i < 3; i++) {
        f_view_free(&nodes[i]);
    }
}

/* ... but a value missing at or above that first index still is. */
static void
a_value_missing_after_the_installed_snapshot_is_divergent(void **state)
{
    struct fixture *f = *state;
    struct f_view nodes[3];
    struct f_result r;

    three_replicas_one_installed(f, nodes);
    nodes[2].slot_at[5] = 0;
    f_check(&f->c, &f->read, nodes, 3, &r);
    assert_true(r.divergent > 0);
    assert_false(r.pass);
    for (int i = 0; i < 3; i++) {
        f_view_free(&nodes[i]);
    }
}

/* The mirror workload's comparison (faults_mirror.c): origin seqs 1..3
 * acked with slots 0..2, the mirror as given (slot + 1 per seq, 0 none). */
static void mirror_of(struct fixture *f, const uint32_t *m, uint64_t n,
                      struct f_mirror_result *mr)
{
    struct f_view mv = {0};
    mv.slot_at = calloc(F_SEQS_MAX + 1024, sizeof *mv.slot_at);
    assert_non_null(mv.slot_at);
    for (uint32_t s = 0; s < 3; s++) {
        acked_and_served(f, s, s + 1);
    }
    for (uint64_t s = 1; s <= n; s++) {
        mv.slot_at[s] = m[s - 1];
    }
    mv.n = n + 1;
    memset(mr, 0, sizeof *mr);
    f_mirror_compare(&f->c, &f->read, &mv, mr);
    f_view_free(&mv);
}

static void a_mirror_equal_to_its_origin_counts_nothing(void **state)
{
    struct f_mirror_result mr;
    const uint32_t m[] = {1, 2, 3};
    mirror_of(*state, m, 3, &mr);
    assert_int_equal(mr.missing + mr.mismatch + mr.dup + mr.alien, 0);
    assert_int_equal(mr.read, 3);
}

static void
a_gap_a_reorder_and_a_duplicate_in_a_mirror_are_counted(void **state)
{
    struct f_mirror_result mr;
    const uint32_t gap[] = {1, 0, 3};
    mirror_of(*state, gap, 3, &mr);
    assert_int_equal(mr.missing, 1);
    assert_int_equal(mr.mismatch, 1);
    assert_int_equal(mr.dup, 0);
    const uint32_t reorder[] = {2, 1, 3};
    mirror_of(*state, reorder, 3, &mr);
    assert_int_equal(mr.missing, 2);
    assert_int_equal(mr.mismatch, 2);
    const uint32_t dup[] = {1, 2, 3, 1};
    mirror_of(*state, dup, 4, &mr);
    assert_int_equal(mr.missing, 0);
    assert_int_equal(mr.mismatch, 1);
    assert_int_equal(mr.dup, 1);
}

/* The aggregate workload's count (faults_aggregate.c): origin seqs 1..3
 * acked with slots 0..2, F_AGG's messages as {source, origin seq, slot}. */
static void agg_of(struct fixture *f, const struct f_agg_msg *m, uint64_t n,
                   struct f_agg_result *ar)
{
    for (uint32_t s = 0; s < 3; s++) {
        acked_and_served(f, s, s + 1);
    }
    memset(ar, 0, sizeof *ar);
    f_agg_count(&f->c, &f->read, m, n, ar);
}

static void an_aggregate_with_each_message_once_per_source_passes(void **state)
{
    struct f_agg_result ar;
    /* Interleaved across sources, in order within each. */
    const struct f_agg_msg m[] = {{0, 1, 1}, {1, 1, 1}, {1, 2, 2},
                                  {0, 2, 2}, {0, 3, 3}, {1, 3, 3}};
    agg_of(*state, m, 6, &ar);
    assert_int_equal(
        ar.missing + ar.mismatch + ar.dup + ar.reorder + ar.alien + ar.bad, 0);
    assert_int_equal(ar.read, 6);
}

static void
an_aggregate_gap_duplicate_reorder_and_alien_are_counted(void **state)
{
    struct f_agg_result ar;
    /* The mirror's seq 2 never arrived; the origin's seq 1 came twice. */
    const struct f_agg_msg gap[] = {{0, 1, 1}, {0, 2, 2}, {0, 3, 3},
                                    {1, 1, 1}, {1, 3, 3}, {0, 1, 1}};
    agg_of(*state, gap, 6, &ar);
    assert_int_equal(ar.missing, 1);
    assert_int_equal(ar.dup, 1);
    assert_int_equal(ar.reorder, 1);
    assert_int_equal(ar.mismatch, 0);
    /* Origin seqs 2 and 3 swapped, a value under the wrong seq, a foreign
     * header and a seq not served. */
    const struct f_agg_msg bad[] = {{0, 1, 1},  {0, 3, 3},           {0, 2, 2},
                                    {1, 1, 2},  {1, 2, 2},           {1, 3, 3},
                                    {-1, 0, 1}, {F_AGG_UNREAD, 0, 0}};
    agg_of(*state, bad, 8, &ar);
    assert_int_equal(ar.reorder, 1);
    assert_int_equal(ar.mismatch, 1);
    assert_int_equal(ar.alien, 1);
    assert_int_equal(ar.bad, 1);
    assert_int_equal(ar.missing, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_failed_publish_that_is_not_served_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_failed_publish_that_is_served_fails_the_run, setup, teardown),
        cmocka_unit_test_setup_teardown(
            an_unserved_value_on_a_node_flagging_damage_is_unavailable, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_failed_dump_excuses_nothing_and_fails_the_run, setup, teardown),
        cmocka_unit_test_setup_teardown(
            values_in_an_installed_snapshot_are_not_divergent, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_value_missing_after_the_installed_snapshot_is_divergent, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_mirror_equal_to_its_origin_counts_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_gap_a_reorder_and_a_duplicate_in_a_mirror_are_counted, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            an_aggregate_with_each_message_once_per_source_passes, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            an_aggregate_gap_duplicate_reorder_and_alien_are_counted, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
