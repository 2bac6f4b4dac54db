/* The currency rule of follower reads (server/replica/replica_follow.c,
 * docs/decisions/0036-followers-answer-direct-gets-while-current.md): a
 * follower answers from its applied state only while it heard from its
 * leader within an election timeout, has applied the commit index that
 * leader last sent, and that index is at an entry of the leader's own
 * term; a damaged, amnesiac or leaderless replica never does; a leader is
 * never a "current follower" (it answers by its own rule). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "test_srv_replica_common.h"

/* A current follower; each test changes one thing. */
struct fixture {
    struct replica_follow f;
};

static int setup(void **state)
{
    struct fixture *x = calloc(1, sizeof *x);
    assert_non_null(x);
    x->f = (struct replica_follow){
        .follower = true,
        .intact = true,
        .applied = 100,
        .leader_commit = 100,
        .leader_commit_own_term = true,
        .contact_age_ms = 40,
        .contact_max_ms = 1000,
    };
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    free(*state);
    return 0;
}

static void a_follower_that_applied_the_leaders_commit_is_current(void **state)
{
    struct fixture *x = *state;
    assert_true(replica_follow_current(&x->f));
    x->f.applied = 101; /* a newer leader's commit may be lower */
    x->f.leader_commit = 90;
    assert_true(replica_follow_current(&x->f));
}

static void a_follower_behind_the_leaders_commit_is_not(void **state)
{
    struct fixture *x = *state;
    x->f.applied = 99;
    assert_false(replica_follow_current(&x->f));
}

static void a_follower_that_heard_no_commit_this_term_is_not(void **state)
{
    struct fixture *x = *state;
    x->f.leader_commit = 0;
    x->f.applied = 0;
    assert_false(replica_follow_current(&x->f));
}

static void a_commit_below_the_new_leaders_barrier_is_not_enough(void **state)
{
    struct fixture *x = *state;
    /* A new leader's commit may still be an old term's entry: entries an
     * earlier leader acknowledged can lie above it (Raft §5.4.2). */
    x->f.leader_commit_own_term = false;
    assert_false(replica_follow_current(&x->f));
}

static void silence_for_an_election_timeout_ends_currency(void **state)
{
    struct fixture *x = *state;
    x->f.contact_age_ms = 999;
    assert_true(replica_follow_current(&x->f));
    x->f.contact_age_ms = 1000;
    assert_false(replica_follow_current(&x->f));
}

static void a_damaged_or_leaderless_replica_is_not(void **state)
{
    struct fixture *x = *state;
    x->f.intact = false;
    assert_false(replica_follow_current(&x->f));
    x->f.intact = true;
    x->f.follower = false;
    assert_false(replica_follow_current(&x->f));
}

/* A real group of one: its leader is no follower, so the rule says no. */
static void a_leader_is_never_a_current_follower(void **state)
{
    (void)state;
    struct tr *t = calloc(1, sizeof *t);
    struct replica_follow f;
    assert_non_null(t);
    snprintf(t->dir, sizeof t->dir, "/tmp/keel-replica-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    memset(t->gid.b, 0x43, sizeof t->gid.b);
    assert_int_equal(tr_start(t), 0);
    assert_true(tr_wait(t, tr_is_leader, 0));
    replica_follow_info(t->r, &f);
    assert_false(f.follower);
    assert_true(f.intact);
    assert_int_equal(f.leader_commit, 0);
    assert_false(replica_follow_current(&f));
    tr_stop(t, true);
    nftw(t->dir, tr_rm, 16, FTW_DEPTH | FTW_PHYS);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_follower_that_applied_the_leaders_commit_is_current, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_follower_behind_the_leaders_commit_is_not, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_follower_that_heard_no_commit_this_term_is_not, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_commit_below_the_new_leaders_barrier_is_not_enough, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            silence_for_an_election_timeout_ends_currency, setup, teardown),
        cmocka_unit_test_setup_teardown(a_damaged_or_leaderless_replica_is_not,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_leader_is_never_a_current_follower,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
