/* The replica on one node: the durability path end to end (propose ->
 * store append -> persisted -> commit -> apply from the store), reopen
 * replay, and hard state durable before the leader's entries count. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_srv_replica_common.h"

static int setup(void **state)
{
    struct tr *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    snprintf(t->dir, sizeof(t->dir), "/tmp/keel-replica-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    memset(t->gid.b, 0x42, sizeof(t->gid.b));
    assert_int_equal(tr_start(t), 0);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tr *t = *state;
    tr_stop(t, true);
    nftw(t->dir, tr_rm, 16, FTW_DEPTH | FTW_PHYS);
    free(t);
    return 0;
}

static void propose_n(struct tr *t, uint32_t from, uint32_t n)
{
    char err[KEEL_ERRMSG_MAX];
    for (uint32_t i = from; i < from + n; i++) {
        char p[32];
        int len = snprintf(p, sizeof(p), "msg-%u", i);
        assert_int_equal(replica_propose(t->r, RAFT_ENTRY_NORMAL, p,
                                         (uint32_t)len, 1000 + i, err),
                         0);
    }
}

/* Check the NORMAL entries applied from position k on are msg-from.. in
 * order, each once, with its ctx, applied after the store persisted it. */
static uint32_t check_normals(struct tr *t, uint32_t k, uint32_t from,
                              bool with_ctx)
{
    uint32_t next = from;
    uint64_t prev = k > 0 ? t->applied[k - 1].index : 0;
    for (uint32_t i = k; i < t->n_applied; i++) {
        struct tr_applied *a = &t->applied[i];
        assert_int_equal(a->index, prev + 1);
        prev = a->index;
        assert_true(a->store_persisted >= a->index);
        assert_true(a->hs_term >= a->term);
        if (a->type != RAFT_ENTRY_NORMAL) {
            continue;
        }
        char want[32];
        snprintf(want, sizeof(want), "msg-%u", next);
        assert_string_equal(a->payload, want);
        if (with_ctx) {
            assert_int_equal(a->ctx, 1000 + next);
        }
        next++;
    }
    return next - from;
}

static void a_group_of_one_bootstraps_and_becomes_leader(void **state)
{
    struct tr *t = *state;
    assert_true(tr_wait(t, tr_is_leader, 0));
    /* index 1: the bootstrap configuration; 2: the leader's barrier. */
    assert_true(t->n_applied >= 2);
    assert_int_equal(t->applied[0].index, 1);
    assert_int_equal(t->applied[0].type, RAFT_ENTRY_CONFIG);
    assert_int_equal(t->applied[1].type, RAFT_ENTRY_BARRIER);
}

static void proposals_apply_once_in_order_only_after_persisted(void **state)
{
    struct tr *t = *state;
    char err[KEEL_ERRMSG_MAX];
    assert_true(tr_wait(t, tr_is_leader, 0));
    uint32_t k = t->n_applied;
    struct replica_info ri;
    replica_info(t->r, &ri);
    for (uint32_t round = 0; round < 5; round++) {
        propose_n(t, round * 200, 200);
        assert_true(
            tr_wait(t, tr_applied_ge, ri.last_index + 200 * (round + 1)));
    }
    assert_int_equal(check_normals(t, k, 0, true), 1000);
    /* A follower (not started / not leader) refuses: here the leader
     * accepts a zero-length payload too. */
    assert_int_equal(replica_propose(t->r, RAFT_ENTRY_NORMAL, NULL, 0, 0, err),
                     0);
}

static void
hard_state_is_durable_before_the_leaders_entries_commit(void **state)
{
    struct tr *t = *state;
    assert_true(tr_wait(t, tr_is_leader, 0));
    struct replica_info ri;
    replica_info(t->r, &ri);
    assert_true(ri.term >= 2);
    /* The barrier of the new term applied only once its term was durable. */
    assert_int_equal(t->applied[1].term, ri.term);
    assert_true(t->applied[1].hs_term >= ri.term);
}

static void reopen_replays_the_log_and_continues_after_it(void **state)
{
    struct tr *t = *state;
    assert_true(tr_wait(t, tr_is_leader, 0));
    propose_n(t, 0, 300);
    struct replica_info before;
    replica_info(t->r, &before);
    assert_true(tr_wait(t, tr_applied_ge, before.last_index + 300));
    replica_info(t->r, &before);
    tr_stop(t, true);
    t->n_applied = 0;
    assert_int_equal(tr_start(t), 0);
    assert_true(tr_wait(t, tr_is_leader, 0));
    /* A fresh state machine sees every entry again from index 1. */
    assert_int_equal(t->applied[0].index, 1);
    assert_int_equal(check_normals(t, 0, 0, false), 300);
    uint32_t k = t->n_applied;
    struct replica_info after;
    replica_info(t->r, &after);
    assert_true(after.term >= before.term);
    assert_true(after.last_index > before.last_index);
    propose_n(t, 300, 10);
    assert_true(tr_wait(t, tr_applied_ge, after.last_index + 10));
    assert_true(t->applied[k].index > before.last_index);
    assert_true(t->applied[k].term >= before.term);
    assert_int_equal(check_normals(t, k, 300, true), 10);
}

static uint64_t fault_t0;

/* The group leads, or ten election timeouts passed since fault_t0. */
static bool leads_or_waited(struct tr *t, uint64_t ms)
{
    struct replica_info ri;
    replica_info(t->r, &ri);
    return ri.role == RAFT_LEADER || uv_now(&t->loop) - fault_t0 >= ms;
}

static bool applied_to_fault(struct tr *t, uint64_t arg)
{
    (void)arg;
    struct replica_info ri;
    replica_info(t->r, &ri);
    return ri.faulty != 0 && ri.applied + 1 == ri.faulty;
}

/* Rules 1 and 5 on a group of one (finding F1): a flipped byte in record
 * 10 does not keep the group closed; it applies everything before the
 * damage, never applies the damaged record, and never leads (so it takes
 * no write it could not place after a hole). */
static void
a_faulty_group_of_one_serves_up_to_its_fault_and_never_leads(void **state)
{
    struct tr *t = *state;
    assert_true(tr_wait(t, tr_is_leader, 0));
    propose_n(t, 0, 50);
    struct replica_info ri;
    replica_info(t->r, &ri);
    assert_true(tr_wait(t, tr_applied_ge, ri.last_index + 50));
    uint64_t last = ri.last_index + 50;
    char path[512];
    uint64_t off = 0;
    assert_int_equal(store_debug_segment_path(replica_store_group(t->r), 10,
                                              path, sizeof(path), &off),
                     0);
    tr_stop(t, true);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, (long)off + 40, SEEK_SET);
    int c = fgetc(f);
    fseek(f, (long)off + 40, SEEK_SET);
    fputc(c ^ 0xff, f);
    fclose(f);
    t->n_applied = 0;
    assert_int_equal(tr_start(t), 0);
    assert_true(tr_wait(t, applied_to_fault, 0));
    replica_info(t->r, &ri);
    assert_int_equal(ri.faulty, 10);
    assert_int_equal(ri.last_index, last); /* every record after it kept */
    assert_int_equal(t->applied[t->n_applied - 1].index, 9);
    fault_t0 = uv_now(&t->loop);
    assert_true(tr_wait(t, leads_or_waited, 10 * 30));
    replica_info(t->r, &ri);
    assert_int_not_equal(ri.role, RAFT_LEADER);
    assert_int_equal(ri.applied, 9);
    char err[KEEL_ERRMSG_MAX];
    assert_int_equal(replica_propose(t->r, RAFT_ENTRY_NORMAL, "x", 1, 1, err),
                     KEEL_ENOTLEADER);
}

static void a_proposal_before_leadership_is_refused_not_leader(void **state)
{
    struct tr *t = *state;
    char err[KEEL_ERRMSG_MAX];
    struct replica_info ri;
    replica_info(t->r, &ri);
    assert_int_not_equal(ri.role, RAFT_LEADER);
    assert_int_equal(replica_propose(t->r, RAFT_ENTRY_NORMAL, "x", 1, 1, err),
                     KEEL_ENOTLEADER);
    assert_int_equal(t->n_applied, 0);
}

/* replica_propose_take keeps the caller's buffer (one encode per entry,
 * no copy) and frees it on a refusal too: ASan's leak check fails the
 * test if it does not. */
static void a_taken_proposal_is_applied_and_a_refused_one_freed(void **state)
{
    struct tr *t = *state;
    char err[KEEL_ERRMSG_MAX];
    char *x = strdup("x");
    assert_non_null(x);
    assert_int_equal(
        replica_propose_take(t->r, RAFT_ENTRY_NORMAL, x, 1, 1, err),
        KEEL_ENOTLEADER);
    assert_true(tr_wait(t, tr_is_leader, 0));
    uint32_t k = t->n_applied;
    struct replica_info ri;
    replica_info(t->r, &ri);
    for (uint32_t i = 0; i < 10; i++) {
        char *p = malloc(32);
        assert_non_null(p);
        int len = snprintf(p, 32, "msg-%u", i);
        assert_int_equal(replica_propose_take(t->r, RAFT_ENTRY_NORMAL, p,
                                              (uint32_t)len, 1000 + i, err),
                         0);
    }
    assert_true(tr_wait(t, tr_applied_ge, ri.last_index + 10));
    assert_int_equal(check_normals(t, k, 0, true), 10);
}

/* A refused open closes the store group it opened (finding F23): the
 * soak's replica, refused once at load, answered "group already open" to
 * every later open until keeld restarted. */
static void a_refused_open_leaves_the_group_closed(void **state)
{
    struct tr *t = *state;
    char err[KEEL_ERRMSG_MAX];
    assert_true(tr_wait(t, tr_is_leader, 0));
    replica_close(t->r);
    t->r = NULL;
    uint8_t vote[8] = {0};
    /* A vote of 4 bytes: load_hard_state refuses the group. */
    assert_int_equal(
        store_meta_hs_put(store_debug_meta(t->s), t->gid.b, 5, vote, 4, err),
        0);
    assert_int_not_equal(tr_replica_open(t), 0);
    assert_null(t->r);
    assert_int_equal(store_meta_hs_put(store_debug_meta(t->s), t->gid.b, 5,
                                       vote, sizeof vote, err),
                     0);
    assert_int_equal(tr_replica_open(t), 0);
    assert_true(tr_wait(t, tr_is_leader, 0));
}

/* apply_turn_max bounds what one loop turn applies: 40 entries committed
 * at once are applied at most 4 a turn, in order, each once (the meta
 * group of a node catching up thousands of creates, docs/cluster.md,
 * "Loop turns"). */
static void a_bounded_group_applies_at_most_its_max_per_loop_turn(void **state)
{
    struct tr *t = *state;
    assert_true(tr_wait(t, tr_is_leader, 0));
    replica_close(t->r);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    t->opt.apply_turn_max = 4;
    assert_int_equal(tr_replica_open(t), 0);
    assert_true(tr_wait(t, tr_is_leader, 0));
    struct replica_info ri;
    replica_info(t->r, &ri);
    uint32_t k = t->n_applied;
    propose_n(t, 0, 40);
    uint32_t turns = 0;
    uint32_t most = 0;
    for (int i = 0;
         i < TR_LOOP_ROUNDS_MAX && !tr_applied_ge(t, ri.last_index + 40); i++) {
        uint32_t before = t->n_applied;
        uv_run(&t->loop, UV_RUN_ONCE);
        uint32_t got = t->n_applied - before;
        most = got > most ? got : most;
        turns += got > 0 ? 1 : 0;
    }
    assert_true(tr_applied_ge(t, ri.last_index + 40));
    assert_int_equal(check_normals(t, k, 0, true), 40);
    assert_true(most <= 4);
    assert_true(turns >= 10);
}

static void hold_cb(uv_timer_t *h)
{
    (void)h;
    usleep(400 * 1000); /* a loop turn that holds the loop (not a wait) */
}

/* A Raft tick due during a loop turn that held the loop waits once for
 * that iteration's reads (libuv runs timers before the poll), then runs:
 * the group still leads and commits. */
static void a_tick_after_a_held_loop_waits_for_the_turns_reads(void **state)
{
    struct tr *t = *state;
    assert_true(tr_wait(t, tr_is_leader, 0));
    struct replica_info ri;
    replica_info(t->r, &ri);
    uint64_t before = ri.ticks_deferred;
    uv_timer_t hold;
    uv_timer_init(&t->loop, &hold);
    uv_timer_start(&hold, hold_cb, 0, 0);
    for (int i = 0; i < 100 && ri.ticks_deferred == before; i++) {
        uv_run(&t->loop, UV_RUN_ONCE);
        replica_info(t->r, &ri);
    }
    assert_true(ri.ticks_deferred > before);
    uv_close((uv_handle_t *)&hold, NULL);
    uint32_t k = t->n_applied;
    propose_n(t, 0, 3);
    assert_true(tr_wait(t, tr_applied_ge, ri.last_index + 3));
    assert_int_equal(check_normals(t, k, 0, true), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_proposal_before_leadership_is_refused_not_leader, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_group_of_one_bootstraps_and_becomes_leader, setup, teardown),
        cmocka_unit_test_setup_teardown(
            proposals_apply_once_in_order_only_after_persisted, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            hard_state_is_durable_before_the_leaders_entries_commit, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            reopen_replays_the_log_and_continues_after_it, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_faulty_group_of_one_serves_up_to_its_fault_and_never_leads, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_taken_proposal_is_applied_and_a_refused_one_freed, setup,
            teardown),
        cmocka_unit_test_setup_teardown(a_refused_open_leaves_the_group_closed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_bounded_group_applies_at_most_its_max_per_loop_turn, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_tick_after_a_held_loop_waits_for_the_turns_reads, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
