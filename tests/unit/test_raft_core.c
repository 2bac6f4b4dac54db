/* Unit tests of the Raft core driven by hand: elections, the durability
 * contract, commitment, membership rules and read-index (docs/design.md §3). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "keel/error.h"
#include "raft.h"

#define N 3
#define ET 100

struct fixture {
    struct raft r[N + 1];
    struct raft_out out;
    uint64_t now;
    struct raft_config cfg;
    uint8_t cfgbuf[RAFT_CONFIG_BYTES_MAX];
    uint32_t cfglen;
    struct raft_msg msg; /* copy of the last message picked from out */
};

static void boot(struct fixture *f, uint32_t i, raft_term hs_term,
                 const raft_term *terms, uint32_t n)
{
    struct raft_params p = {.id = i + 1,
                            .incarnation = 100 + i,
                            .seed = i + 1,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[i], &p), 0);
    raft_load_hard_state(&f->r[i], hs_term, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[i], 1, &c), 0);
    for (uint32_t k = 0; k < n; k++) {
        struct raft_entry e = {terms[k], RAFT_ENTRY_NORMAL, 1, "x"};
        assert_int_equal(raft_load_entry(&f->r[i], 2 + k, &e), 0);
    }
    raft_start(&f->r[i], f->now);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    f->cfg.n = N;
    for (uint32_t i = 0; i < N; i++) {
        f->cfg.servers[i] = (struct raft_server){i + 1, 100 + i, RAFT_VOTER};
    }
    f->cfglen = raft_config_encode(&f->cfg, f->cfgbuf, sizeof f->cfgbuf);
    for (uint32_t i = 0; i < N; i++) {
        boot(f, i, 1, NULL, 0);
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (uint32_t i = 0; i <= N; i++) {
        if (f->r[i].runs != NULL) {
            raft_close(&f->r[i]);
        }
    }
    free(f);
    return 0;
}

static int step(struct fixture *f, uint32_t i, struct raft_in *in)
{
    in->now_ms = f->now;
    return raft_step(&f->r[i], in, &f->out);
}

static void tick(struct fixture *f, uint32_t i, uint64_t now)
{
    struct raft_in in = {.type = RAFT_IN_TICK};
    f->now = now;
    assert_int_equal(step(f, i, &in), 0);
}

/* Copy the first output message of a type to a node, or fail. */
static const struct raft_msg *pick(struct fixture *f, uint8_t type,
                                   raft_node to)
{
    for (uint32_t k = 0; k < f->out.n_msgs; k++) {
        if (f->out.msgs[k].type == type && f->out.msgs[k].to == to) {
            f->msg = f->out.msgs[k];
            return &f->msg;
        }
    }
    fail_msg("no message of type %u to %llu", type, (unsigned long long)to);
    return NULL;
}

static void deliver(struct fixture *f, uint32_t i, const struct raft_msg *m)
{
    struct raft_in in = {.type = RAFT_IN_RECEIVE, .msg = m};
    assert_int_equal(step(f, i, &in), 0);
}

static void persisted(struct fixture *f, uint32_t i, raft_index index,
                      raft_term term)
{
    struct raft_in in = {.type = RAFT_IN_PERSISTED};
    in.persisted.index = index;
    in.persisted.term = term;
    assert_int_equal(step(f, i, &in), 0);
}

static struct raft_msg vote_resp(raft_node from, raft_node to, raft_term term,
                                 bool pre)
{
    struct raft_msg m = {.type = RAFT_MSG_VOTE_RESP,
                         .from = from,
                         .from_incarnation = 100 + from - 1,
                         .to = to,
                         .term = term};
    m.vote_resp.pre = pre;
    m.vote_resp.granted = 1;
    return m;
}

/* Node 1 wins an election with node 2's votes. */
static void elect(struct fixture *f)
{
    tick(f, 0, 10 * ET);
    raft_term t = f->r[0].term;
    struct raft_msg m = vote_resp(2, 1, t + 1, true);
    deliver(f, 0, &m);
    m = vote_resp(2, 1, t + 1, false);
    deliver(f, 0, &m);
    assert_int_equal(f->r[0].role, RAFT_LEADER);
}

static struct raft_msg append_resp(raft_node from, raft_term term,
                                   raft_index match, raft_index last,
                                   uint64_t ctx)
{
    struct raft_msg m = {.type = RAFT_MSG_APPEND_RESP,
                         .from = from,
                         .from_incarnation = 100 + from - 1,
                         .to = 1,
                         .term = term};
    m.append_resp.success = 1;
    m.append_resp.match = match;
    m.append_resp.last = last;
    m.append_resp.ctx = ctx;
    return m;
}

static void
an_election_timeout_starts_a_pre_vote_that_persists_nothing(void **state)
{
    struct fixture *f = *state;
    tick(f, 0, 10 * ET);
    assert_int_equal(f->r[0].role, RAFT_PRE_CANDIDATE);
    assert_false(f->out.hs_changed);
    assert_int_equal(f->r[0].term, 1);
    const struct raft_msg *m = pick(f, RAFT_MSG_VOTE, 2);
    assert_true(m->vote.pre);
    assert_int_equal(m->term, 2);
}

static void a_won_pre_vote_persists_term_and_vote_before_asking(void **state)
{
    struct fixture *f = *state;
    tick(f, 0, 10 * ET);
    struct raft_msg m = vote_resp(2, 1, 2, true);
    deliver(f, 0, &m);
    assert_int_equal(f->r[0].role, RAFT_CANDIDATE);
    assert_true(f->out.hs_changed);
    assert_int_equal(f->out.term, 2);
    assert_int_equal(f->out.vote, 1);
    assert_false(pick(f, RAFT_MSG_VOTE, 3)->vote.pre);
}

static void a_new_leader_appends_a_barrier_of_its_term(void **state)
{
    struct fixture *f = *state;
    elect(f);
    assert_int_equal(f->out.n_entries, 1);
    assert_int_equal(f->out.entries_first, 2);
    assert_int_equal(f->out.entries[0].type, RAFT_ENTRY_BARRIER);
    assert_int_equal(f->out.entries[0].term, f->r[0].term);
}

static void
the_leader_counts_itself_only_up_to_its_persisted_index(void **state)
{
    struct fixture *f = *state;
    elect(f);
    raft_term t = f->r[0].term;
    struct raft_msg m = append_resp(2, t, 2, 2, 0);
    deliver(f, 0, &m);
    assert_int_equal(f->out.commit, 0); /* own copy of 2 not synced */
    persisted(f, 0, 2, t);
    assert_int_equal(f->out.commit, 2);
}

static void
a_follower_reports_match_bounded_by_its_persisted_index(void **state)
{
    struct fixture *f = *state;
    elect(f);
    const struct raft_msg *a = pick(f, RAFT_MSG_APPEND, 2);
    struct raft_msg app = *a;
    struct raft_entry e = {f->r[0].term, RAFT_ENTRY_BARRIER, 0, NULL};
    app.append.prev_index = 1;
    app.append.prev_term = 1;
    app.append.n_entries = 1;
    app.append.entries = &e;
    deliver(f, 1, &app);
    assert_int_equal(f->out.n_entries, 1);
    const struct raft_msg *r = pick(f, RAFT_MSG_APPEND_RESP, 1);
    assert_int_equal(r->append_resp.match, 1); /* 2 is not synced yet */
    assert_int_equal(r->append_resp.last, 2);
    /* The follower answers as soon as its persisted index advances. */
    persisted(f, 1, 2, f->r[0].term);
    assert_int_equal(pick(f, RAFT_MSG_APPEND_RESP, 1)->append_resp.match, 2);
}

static bool has_msg(const struct fixture *f, uint8_t type)
{
    for (uint32_t k = 0; k < f->out.n_msgs; k++) {
        if (f->out.msgs[k].type == type) {
            return true;
        }
    }
    return false;
}

/* docs/raft.md, "Replication": an AppendEntries that brings new entries is
 * answered by the ack after they persist, not once on receipt and again
 * after the sync; a new read round or half a heartbeat without a response
 * is answered at once. */
static void a_follower_answers_new_entries_once_after_persist(void **state)
{
    struct fixture *f = *state;
    elect(f);
    raft_term t = f->r[0].term;
    struct raft_msg app = *pick(f, RAFT_MSG_APPEND, 2);
    struct raft_entry e[3] = {{t, RAFT_ENTRY_BARRIER, 0, NULL},
                              {t, RAFT_ENTRY_NORMAL, 1, "a"},
                              {t, RAFT_ENTRY_NORMAL, 1, "b"}};
    app.append.prev_index = 1;
    app.append.prev_term = 1;
    app.append.n_entries = 1;
    app.append.entries = &e[0];
    deliver(f, 1, &app); /* the first one is answered: none went out yet */
    assert_true(has_msg(f, RAFT_MSG_APPEND_RESP));

    app.append.prev_index = 2;
    app.append.prev_term = t;
    app.append.entries = &e[1];
    deliver(f, 1, &app);
    assert_int_equal(f->out.n_entries, 1);
    assert_false(has_msg(f, RAFT_MSG_APPEND_RESP));
    persisted(f, 1, 3, t);
    const struct raft_msg *r = pick(f, RAFT_MSG_APPEND_RESP, 1);
    assert_int_equal(r->append_resp.match, 3);
    assert_int_equal(r->append_resp.last, 3); /* frees the leader's window */
    assert_int_equal(r->append_resp.ctx, app.append.ctx);

    /* A new read round is answered at once, with its ctx. */
    app.append.prev_index = 3;
    app.append.entries = &e[2];
    app.append.ctx++;
    deliver(f, 1, &app);
    r = pick(f, RAFT_MSG_APPEND_RESP, 1);
    assert_int_equal(r->append_resp.last, 4);
    assert_int_equal(r->append_resp.ctx, app.append.ctx);

    /* So is any AppendEntries half a heartbeat after the last response. */
    app.append.prev_index = 4;
    app.append.entries = &e[1];
    f->now += f->r[1].heartbeat_ms / 2;
    deliver(f, 1, &app);
    assert_int_equal(f->out.n_entries, 1);
    assert_int_equal(pick(f, RAFT_MSG_APPEND_RESP, 1)->append_resp.last, 5);
}

static void
a_sync_of_replaced_entries_is_not_accepted_as_persisted(void **state)
{
    struct fixture *f = *state;
    struct raft_entry old[2] = {{2, RAFT_ENTRY_NORMAL, 1, "a"},
                                {2, RAFT_ENTRY_NORMAL, 1, "b"}};
    struct raft_entry new_ = {3, RAFT_ENTRY_NORMAL, 1, "c"};
    struct raft_msg app = {.type = RAFT_MSG_APPEND,
                           .from = 1,
                           .from_incarnation = 100,
                           .to = 2,
                           .term = 2};
    app.append.prev_index = 1;
    app.append.prev_term = 1;
    app.append.n_entries = 2;
    app.append.entries = old;
    deliver(f, 1, &app);
    assert_int_equal(f->r[1].last_index, 3);
    /* A leader of term 3 replaces them while their sync runs. */
    app.from = 3;
    app.from_incarnation = 102;
    app.term = 3;
    app.append.n_entries = 1;
    app.append.entries = &new_;
    deliver(f, 1, &app);
    assert_int_equal(f->out.truncate_from, 2);
    persisted(f, 1, 3, 2); /* the sync that covered the old 2..3 */
    assert_int_equal(f->r[1].persisted, 1);
    assert_int_equal(f->out.n_msgs, 0);
    persisted(f, 1, 2, 3);
    assert_int_equal(f->r[1].persisted, 2);
}

static void
an_entry_of_a_previous_term_commits_only_with_one_of_this_term(void **state)
{
    struct fixture *f = *state;
    raft_close(&f->r[0]);
    raft_term terms[2] = {2, 2};
    boot(f, 0, 2, terms, 2); /* 1(t1) 2(t2) 3(t2) */
    elect(f);
    raft_term t = f->r[0].term;
    assert_int_equal(f->out.entries_first, 4);
    persisted(f, 0, 4, t);
    struct raft_msg m = append_resp(2, t, 3, 3, 0);
    deliver(f, 0, &m);
    assert_int_equal(f->out.commit, 0); /* 3 is on a majority, but t2 */
    m = append_resp(2, t, 4, 4, 0);
    deliver(f, 0, &m);
    assert_int_equal(f->out.commit, 4);
}

static void term_on_start_is_at_least_the_last_log_term(void **state)
{
    struct fixture *f = *state;
    raft_close(&f->r[2]);
    raft_term terms[1] = {4};
    boot(f, 2, 1, terms, 1);
    assert_int_equal(f->r[2].term, 4);
    tick(f, 2, 1);
    assert_true(f->out.hs_changed);
    assert_int_equal(f->out.term, 4);
}

static void a_candidate_of_another_incarnation_gets_no_vote(void **state)
{
    struct fixture *f = *state;
    struct raft_msg v = {.type = RAFT_MSG_VOTE,
                         .from = 3,
                         .from_incarnation = 999, /* a wiped disk */
                         .to = 2,
                         .term = 2};
    v.vote.last_index = 10;
    v.vote.last_term = 1;
    deliver(f, 1, &v);
    assert_false(pick(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
    v.from_incarnation = 102;
    deliver(f, 1, &v);
    assert_true(pick(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
    assert_true(f->out.hs_changed); /* the vote is synced before the reply */
}

static void a_node_with_an_empty_log_never_votes_nor_campaigns(void **state)
{
    struct fixture *f = *state;
    struct raft_params p = {.id = 2,
                            .incarnation = 555,
                            .seed = 9,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[N], &p), 0);
    raft_start(&f->r[N], f->now);
    struct raft_msg v = {.type = RAFT_MSG_VOTE,
                         .from = 3,
                         .from_incarnation = 102,
                         .to = 2,
                         .term = 2};
    struct raft_in in = {.type = RAFT_IN_RECEIVE, .msg = &v};
    assert_int_equal(raft_step(&f->r[N], &in, &f->out), 0);
    assert_false(pick(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
    in = (struct raft_in){.type = RAFT_IN_TICK, .now_ms = 10 * ET};
    assert_int_equal(raft_step(&f->r[N], &in, &f->out), 0);
    assert_int_equal(f->out.n_msgs, 0);
}

/* Node N+1 alone in its configuration (voter, as an R1 stream's group),
 * faulty when faulty is set. */
static void boot_sole(struct fixture *f, bool faulty)
{
    struct raft_params p = {.id = 9,
                            .incarnation = 900,
                            .seed = 9,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    struct raft_config one = {.n = 1};
    one.servers[0] = (struct raft_server){9, 900, RAFT_VOTER};
    uint8_t buf[RAFT_CONFIG_BYTES_MAX];
    uint32_t len = raft_config_encode(&one, buf, sizeof buf);
    assert_int_equal(raft_init(&f->r[N], &p), 0);
    raft_load_hard_state(&f->r[N], 1, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, len, buf};
    assert_int_equal(raft_load_entry(&f->r[N], 1, &c), 0);
    if (faulty) {
        raft_load_faulty(&f->r[N], 1, 1, 1);
    }
    raft_start(&f->r[N], f->now);
}

static void a_sole_voter_campaigns_at_its_first_tick(void **state)
{
    struct fixture *f = *state;
    /* A voter of three waits an election timeout first. */
    tick(f, 0, f->now + 1);
    assert_int_equal(f->r[0].role, RAFT_FOLLOWER);
    assert_int_equal(f->out.n_msgs, 0);
    assert_false(f->out.hs_changed);
    /* Alone it runs its election at the first tick after its start:
     * nobody else could lead (a pre-vote it wins alone, then the real
     * one); a tick of the start instant (the driver's, while it opens the
     * group) does not yet. */
    boot_sole(f, false);
    struct raft_in in = {.type = RAFT_IN_TICK, .now_ms = f->now};
    assert_int_equal(raft_step(&f->r[N], &in, &f->out), 0);
    assert_int_equal(f->r[N].term, 1);
    in.now_ms = f->now + 1;
    assert_int_equal(raft_step(&f->r[N], &in, &f->out), 0);
    assert_int_equal(f->r[N].term, 2);
    assert_true(f->out.hs_changed); /* its vote, synced before it leads */
}

static void a_lone_leader_ticks_rarely_and_a_leader_of_three_often(void **state)
{
    struct fixture *f = *state;
    elect(f);
    assert_true(f->out.timeout_ms <= f->now + 20); /* its heartbeat */
    boot_sole(f, false);
    struct raft_in in = {.type = RAFT_IN_TICK, .now_ms = f->now + 1};
    assert_int_equal(raft_step(&f->r[N], &in, &f->out), 0);
    in = (struct raft_in){.type = RAFT_IN_PERSISTED, .now_ms = f->now + 1};
    in.persisted.index = f->r[N].last_index;
    in.persisted.term = f->r[N].term;
    assert_int_equal(raft_step(&f->r[N], &in, &f->out), 0);
    assert_int_equal(f->r[N].role, RAFT_LEADER);
    assert_true(f->out.timeout_ms >= f->now + 1 + RAFT_LONE_LEADER_TICK_MS);
}

static void a_faulty_sole_voter_still_never_campaigns(void **state)
{
    struct fixture *f = *state;
    boot_sole(f, true);
    struct raft_in in = {.type = RAFT_IN_TICK, .now_ms = f->now + 1};
    assert_int_equal(raft_step(&f->r[N], &in, &f->out), 0);
    assert_int_equal(f->r[N].term, 1); /* Rule 1 holds */
    assert_int_not_equal(f->r[N].role, RAFT_LEADER);
}

static int change(struct fixture *f, uint8_t op, raft_node node,
                  raft_incarnation inc)
{
    struct raft_in in = {.type = RAFT_IN_CHANGE};
    in.change.op = op;
    in.change.node = node;
    in.change.incarnation = inc;
    return step(f, 0, &in);
}

static void commit_barrier(struct fixture *f)
{
    raft_term t = f->r[0].term;
    persisted(f, 0, 2, t);
    struct raft_msg m = append_resp(2, t, 2, 2, 0);
    deliver(f, 0, &m);
    assert_int_equal(f->r[0].commit, 2);
}

static void a_configuration_change_waits_for_a_current_term_commit(void **state)
{
    struct fixture *f = *state;
    elect(f);
    assert_int_equal(change(f, RAFT_CHANGE_ADD_LEARNER, 4, 400), KEEL_EBUSY);
    commit_barrier(f);
    assert_int_equal(change(f, RAFT_CHANGE_ADD_LEARNER, 4, 400), 0);
    assert_int_equal(f->out.entries[0].type, RAFT_ENTRY_CONFIG);
    /* One at a time: the first is not committed yet. */
    assert_int_equal(change(f, RAFT_CHANGE_ADD_LEARNER, 5, 500), KEEL_EBUSY);
}

static void unsafe_changes_are_refused(void **state)
{
    struct fixture *f = *state;
    elect(f);
    commit_barrier(f);
    assert_int_equal(change(f, RAFT_CHANGE_REMOVE, 1, 100), KEEL_EINVAL);
    assert_int_equal(change(f, RAFT_CHANGE_ADD_LEARNER, 4, 400), 0);
    raft_term t = f->r[0].term;
    persisted(f, 0, 3, t);
    struct raft_msg m = append_resp(2, t, 3, 3, 0);
    deliver(f, 0, &m);
    assert_int_equal(f->r[0].commit, 3);
    /* The learner has nothing yet: promoting it is refused. */
    assert_int_equal(change(f, RAFT_CHANGE_PROMOTE, 4, 400), KEEL_EBUSY);
    m = append_resp(4, t, 3, 3, 0);
    m.from_incarnation = 400;
    deliver(f, 0, &m);
    assert_int_equal(change(f, RAFT_CHANGE_PROMOTE, 4, 400), 0);
}

/* The operator's recover: a node that is not the survey's source votes
 * but never campaigns until it hears a leader; the source campaigns. */
static void after_recover_only_the_source_campaigns(void **state)
{
    struct fixture *f = *state;
    struct raft_in in = {.type = RAFT_IN_RECOVER};
    in.recover.term = f->r[1].term + 5;
    in.recover.keep = f->r[1].last_index;
    assert_int_equal(step(f, 1, &in), 0);
    tick(f, 1, 10 * ET);
    assert_int_equal(f->out.n_msgs, 0);
    assert_int_equal(f->r[1].role, RAFT_FOLLOWER);
    in.recover.term = f->r[0].term + 5;
    in.recover.keep = f->r[0].last_index;
    in.recover.source = 1;
    assert_int_equal(step(f, 0, &in), 0);
    tick(f, 0, 20 * ET);
    const struct raft_msg *v = pick(f, RAFT_MSG_VOTE, 2);
    assert_true(v->vote.pre);
    /* A leader heard: the wait ends, the next timeout campaigns. */
    struct raft_msg a = {.type = RAFT_MSG_APPEND,
                         .from = 3,
                         .from_incarnation = 102,
                         .to = 2,
                         .to_incarnation = 101,
                         .term = f->r[1].term};
    a.append.prev_index = f->r[1].last_index;
    a.append.prev_term = raft_term_at(&f->r[1], f->r[1].last_index);
    deliver(f, 1, &a);
    tick(f, 1, 40 * ET);
    v = pick(f, RAFT_MSG_VOTE, 1);
    assert_true(v->vote.pre);
}

/* The wait is reported for the driver to record (set with the recover's
 * term, cleared when a leader is heard), and a node restarted with it
 * recorded (raft_load_recover_wait) does not campaign either. */
static void the_recover_wait_is_reported_and_survives_a_restart(void **state)
{
    struct fixture *f = *state;
    struct raft_in in = {.type = RAFT_IN_RECOVER};
    in.recover.term = f->r[1].term + 5;
    in.recover.keep = f->r[1].last_index;
    assert_int_equal(step(f, 1, &in), 0);
    assert_true(f->out.recover_wait_changed);
    assert_int_equal(f->out.recover_wait_term, in.recover.term);
    /* The restart: the same log and hard state, the wait loaded. */
    raft_close(&f->r[1]);
    struct raft_params p = {.id = 2,
                            .incarnation = 101,
                            .seed = 2,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[1], &p), 0);
    raft_load_hard_state(&f->r[1], in.recover.term, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[1], 1, &c), 0);
    raft_load_recover_wait(&f->r[1]);
    raft_start(&f->r[1], f->now);
    tick(f, 1, 10 * ET);
    assert_int_equal(f->out.n_msgs, 0);
    assert_false(f->out.recover_wait_changed);
    /* A leader heard: the wait ends and the record is cleared. */
    struct raft_msg a = {.type = RAFT_MSG_APPEND,
                         .from = 1,
                         .from_incarnation = 100,
                         .to = 2,
                         .to_incarnation = 101,
                         .term = f->r[1].term};
    a.append.prev_index = f->r[1].last_index;
    a.append.prev_term = raft_term_at(&f->r[1], f->r[1].last_index);
    deliver(f, 1, &a);
    assert_true(f->out.recover_wait_changed);
    assert_int_equal(f->out.recover_wait_term, 0);
}

/* --force skips rule 4 (healthy majority) but never rule 3. */
static void force_skips_only_the_healthy_majority_rule(void **state)
{
    struct fixture *f = *state;
    elect(f);
    commit_barrier(f);
    /* {1, 3}: node 3 has nothing yet, so 1 of 2 voters is healthy. */
    assert_int_equal(change(f, RAFT_CHANGE_REMOVE, 2, 101), KEEL_EBUSY);
    struct raft_in in = {.type = RAFT_IN_CHANGE};
    in.change.op = RAFT_CHANGE_REMOVE;
    in.change.node = 2;
    in.change.incarnation = 101;
    in.change.force = 1;
    assert_int_equal(step(f, 0, &in), 0);
    assert_int_equal(f->out.entries[0].type, RAFT_ENTRY_CONFIG);
    /* One at a time, forced or not. */
    in.change.op = RAFT_CHANGE_ADD_LEARNER;
    in.change.node = 4;
    in.change.incarnation = 400;
    assert_int_equal(step(f, 0, &in), KEEL_EBUSY);
}

static void a_truncated_configuration_entry_stops_applying(void **state)
{
    struct fixture *f = *state;
    struct raft_config c = f->cfg;
    uint8_t buf[RAFT_CONFIG_BYTES_MAX];
    c.servers[c.n++] = (struct raft_server){4, 400, RAFT_LEARNER};
    uint32_t n = raft_config_encode(&c, buf, sizeof buf);
    struct raft_entry e = {2, RAFT_ENTRY_CONFIG, n, buf};
    struct raft_msg app = {.type = RAFT_MSG_APPEND,
                           .from = 1,
                           .from_incarnation = 100,
                           .to = 2,
                           .term = 2};
    app.append.prev_index = 1;
    app.append.prev_term = 1;
    app.append.n_entries = 1;
    app.append.entries = &e;
    deliver(f, 1, &app);
    assert_int_equal(raft_config_current(&f->r[1])->n, 4);
    struct raft_entry other = {3, RAFT_ENTRY_NORMAL, 1, "z"};
    app.from = 3;
    app.from_incarnation = 102;
    app.term = 3;
    app.append.entries = &other;
    deliver(f, 1, &app);
    assert_int_equal(raft_config_current(&f->r[1])->n, 3);
}

static void read_index_waits_for_a_heartbeat_round_of_this_term(void **state)
{
    struct fixture *f = *state;
    elect(f);
    struct raft_in in = {.type = RAFT_IN_READ_INDEX, .read_id = 7};
    assert_int_equal(step(f, 0, &in), KEEL_EAGAIN); /* no commit yet */
    commit_barrier(f);
    assert_int_equal(step(f, 0, &in), 0);
    assert_int_equal(f->out.n_reads, 0);
    uint64_t ctx = pick(f, RAFT_MSG_APPEND, 2)->append.ctx;
    struct raft_msg m = append_resp(2, f->r[0].term, 2, 0, ctx);
    deliver(f, 0, &m);
    assert_int_equal(f->out.n_reads, 1);
    assert_int_equal(f->out.reads[0].id, 7);
    assert_int_equal(f->out.reads[0].status, 0);
    assert_int_equal(f->out.reads[0].index, 2);
}

/* docs/design.md §4.7 R3: a node whose hard state was unreadable rejoins with a
 * new incarnation; until the leader replaces the old one (remove, add as
 * learner, promote) its responses count for nothing. */
static void a_new_incarnation_counts_for_nothing_until_replaced(void **state)
{
    struct fixture *f = *state;
    elect(f);
    raft_term t = f->r[0].term;
    persisted(f, 0, 2, t);
    struct raft_msg m = append_resp(3, t, 2, 2, 0);
    m.from_incarnation = 999; /* meta.lmdb quarantined: new incarnation */
    deliver(f, 0, &m);
    assert_true(f->r[0].commit < 2); /* no commit from it */
    commit_barrier(f);
    struct raft_in in = {.type = RAFT_IN_READ_INDEX, .read_id = 7};
    assert_int_equal(step(f, 0, &in), 0);
    m.append_resp.ctx = pick(f, RAFT_MSG_APPEND, 3)->append.ctx;
    deliver(f, 0, &m);
    assert_int_equal(f->out.n_reads, 0); /* no read-index round from it */
    /* Check-quorum: only the new incarnation answers for two periods. */
    uint64_t end = f->now + 3 * ET;
    for (uint64_t now = f->now + ET / 2; now < end; now += ET / 2) {
        deliver(f, 0, &m);
        tick(f, 0, now);
    }
    assert_int_not_equal(f->r[0].role, RAFT_LEADER);
}

static struct raft_msg snapshot_chunk(uint64_t offset, uint32_t len, bool done,
                                      const struct raft_config *c)
{
    struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT,
                         .from = 1,
                         .from_incarnation = 100,
                         .to = 2,
                         .term = 2};
    m.snapshot.index = 5;
    m.snapshot.term = 2;
    m.snapshot.leader_last = 9;
    m.snapshot.offset = offset;
    m.snapshot.len = len;
    m.snapshot.chunk = "0123456789";
    m.snapshot.done = done;
    m.snapshot.config = *c;
    return m;
}

static void an_installed_snapshot_counts_only_once_durable(void **state)
{
    struct fixture *f = *state;
    struct raft_msg m = snapshot_chunk(0, 10, false, &f->cfg);
    deliver(f, 1, &m);
    assert_true(f->out.has_snapshot);
    assert_int_equal(f->out.snapshot.offset, 0);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT_RESP, 1)->snapshot_resp.offset,
                     10);
    /* A chunk out of order is answered with the offset expected. */
    m = snapshot_chunk(20, 5, false, &f->cfg);
    deliver(f, 1, &m);
    assert_false(f->out.has_snapshot);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT_RESP, 1)->snapshot_resp.offset,
                     10);
    m = snapshot_chunk(10, 5, true, &f->cfg);
    deliver(f, 1, &m);
    assert_true(f->out.has_snapshot);
    assert_int_equal(f->out.n_msgs, 0); /* no answer before the install */
    assert_int_equal(f->r[1].persisted, 1);
    struct raft_in in = {.type = RAFT_IN_SNAPSHOT_INSTALLED};
    in.snapshot.index = 5;
    in.snapshot.term = 2;
    in.snapshot.config = &f->cfg;
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->r[1].persisted, 5);
    assert_int_equal(f->r[1].commit, 5);
    assert_int_equal(f->r[1].last_index, 5);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT_RESP, 1)->snapshot_resp.match,
                     5);
}

/* Finding F29: a complete transfer whose content the driver refused is
 * answered with failure at offset 0 (the leader's driver spools afresh)
 * and forgotten, so the next chunk at 0 starts it again. A refusal of a
 * transfer other than the one being received says nothing. */
static void a_refused_transfer_is_answered_with_failure(void **state)
{
    struct fixture *f = *state;
    struct raft_msg m = snapshot_chunk(0, 10, true, &f->cfg);
    deliver(f, 1, &m);
    assert_true(f->out.has_snapshot);
    assert_int_equal(f->out.n_msgs, 0); /* no answer before the install */
    struct raft_in in = {.type = RAFT_IN_SNAPSHOT_REFUSED};
    in.snapshot.index = 5;
    in.snapshot.term = 2;
    assert_int_equal(step(f, 1, &in), 0);
    const struct raft_msg *r = pick(f, RAFT_MSG_SNAPSHOT_RESP, 1);
    assert_int_equal(r->snapshot_resp.success, 0);
    assert_int_equal(r->snapshot_resp.offset, 0);
    assert_true(r->snapshot_resp.match < 5); /* it holds nothing of it */
    assert_int_equal(f->r[1].persisted, 1);
    /* Forgotten: the transfer is taken again from 0. */
    deliver(f, 1, &m);
    assert_true(f->out.has_snapshot);
    assert_int_equal(f->out.snapshot.offset, 0);
    /* Another snapshot's refusal: this transfer goes on, unanswered. */
    in.snapshot.index = 4;
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->out.n_msgs, 0);
    in.snapshot.index = 5;
    in.snapshot.config = &f->cfg;
    in.type = RAFT_IN_SNAPSHOT_INSTALLED;
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->r[1].persisted, 5);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT_RESP, 1)->snapshot_resp.success,
                     1);
}

/* The driver writes an installed snapshot's retained log to the store
 * outside the core until the install is durable (docs/raft.md
 * "InstallSnapshot"): a node that campaigned then would append its own
 * entries after the core's log, not the store's (finding F19's class).
 * It waits for the install, then campaigns as before. */
static void a_follower_installing_a_snapshot_never_campaigns(void **state)
{
    struct fixture *f = *state;
    struct raft_msg m = snapshot_chunk(0, 10, true, &f->cfg);
    deliver(f, 1, &m);
    assert_true(f->out.has_snapshot);
    tick(f, 1, 10 * ET);
    assert_int_equal(f->r[1].role, RAFT_FOLLOWER);
    for (uint32_t k = 0; k < f->out.n_msgs; k++) {
        assert_int_not_equal(f->out.msgs[k].type, RAFT_MSG_VOTE);
    }
    struct raft_in in = {.type = RAFT_IN_SNAPSHOT_INSTALLED};
    in.snapshot.index = 5;
    in.snapshot.term = 2;
    in.snapshot.config = &f->cfg;
    assert_int_equal(step(f, 1, &in), 0);
    tick(f, 1, 30 * ET);
    assert_int_equal(f->r[1].role, RAFT_PRE_CANDIDATE);
    assert_true(pick(f, RAFT_MSG_VOTE, 1)->vote.pre);
}

/* Snapshot chunks to node to in the last output. */
static uint32_t chunks_to(const struct fixture *f, raft_node to)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < f->out.n_msgs; k++) {
        n +=
            f->out.msgs[k].type == RAFT_MSG_SNAPSHOT && f->out.msgs[k].to == to;
    }
    return n;
}

static struct raft_msg chunk_resp(raft_term term, uint64_t offset)
{
    struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT_RESP,
                         .from = 3,
                         .from_incarnation = 102,
                         .to = 1,
                         .term = term};
    m.snapshot_resp.success = 1;
    m.snapshot_resp.offset = offset;
    return m;
}

/* Finding F25: the leader sent a chunk for every answer, answers to copies
 * of the chunk before too, and a copy at every heartbeat, so the copies in
 * flight to a slow follower grew by one per heartbeat for the whole
 * transfer and filled the link to it. Now one chunk answers one answer
 * that moves the offset, and a heartbeat sends it again only when nothing
 * was answered since the one before. */
static void a_leader_sends_a_chunk_again_only_when_unanswered(void **state)
{
    struct fixture *f = *state;
    static const raft_term terms[] = {1, 1, 1, 1};
    raft_close(&f->r[0]);
    boot(f, 0, 1, terms, 4);
    elect(f);
    raft_term t = f->r[0].term;
    persisted(f, 0, 6, t);
    struct raft_msg m = append_resp(2, t, 6, 6, 0);
    deliver(f, 0, &m);
    assert_int_equal(f->r[0].commit, 6);
    struct raft_in in = {.type = RAFT_IN_APPLIED, .applied = 6};
    assert_int_equal(step(f, 0, &in), 0);
    in = (struct raft_in){.type = RAFT_IN_SNAPSHOT_TAKEN};
    in.snapshot.index = 5;
    in.snapshot.term = 1;
    assert_int_equal(step(f, 0, &in), 0);
    /* Node 3 holds nothing: it gets the snapshot from offset 0. */
    m = append_resp(3, t, 0, 0, 0);
    m.append_resp.success = 0;
    deliver(f, 0, &m);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT, 3)->snapshot.offset, 0);
    m = chunk_resp(t, 10);
    deliver(f, 0, &m);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT, 3)->snapshot.offset, 10);
    /* An answer to a copy of chunk 0 (a heartbeat's): chunk 10 is out. */
    m = chunk_resp(t, 10);
    deliver(f, 0, &m);
    assert_int_equal(chunks_to(f, 3), 0);
    /* The heartbeat after an answer sends nothing again... */
    tick(f, 0, f->now + 20);
    assert_int_equal(chunks_to(f, 3), 0);
    /* ...the one after a silent interval does. */
    tick(f, 0, f->now + 20);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT, 3)->snapshot.offset, 10);
    tick(f, 0, f->now + 20);
    assert_int_equal(chunks_to(f, 3), 1);
}

static void a_snapshot_keeps_the_local_log_that_matches_it(void **state)
{
    struct fixture *f = *state;
    raft_close(&f->r[1]);
    raft_term terms[8] = {2, 2, 2, 2, 2, 2, 2, 2}; /* 2..9 in term 2 */
    boot(f, 1, 2, terms, 8);
    struct raft_in in = {.type = RAFT_IN_SNAPSHOT_INSTALLED};
    in.snapshot.index = 5;
    in.snapshot.term = 2;
    in.snapshot.config = &f->cfg;
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->r[1].last_index, 9); /* 6..9 kept */
    assert_int_equal(raft_term_at(&f->r[1], 9), 2);
    in.snapshot.index = 7;
    in.snapshot.term = 3; /* ours at 7 is term 2: replaced */
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->r[1].last_index, 7);
    assert_int_equal(raft_term_at(&f->r[1], 7), 3);
}

/* Finding F18: a follower whose log holds the snapshot's index with its
 * term (an install made durable, then a restart before the leader heard:
 * its log from index 1 reaches X, its core is not compacted, commit 0)
 * takes no transfer of X (the snapshot it holds would refuse it, and the
 * leader would start over for ever): it answers with a match of X. */
static void
a_follower_holding_the_snapshots_entry_answers_its_match(void **state)
{
    struct fixture *f = *state;
    raft_close(&f->r[1]);
    raft_term terms[4] = {2, 2, 2, 2}; /* 2..5 in term 2 */
    boot(f, 1, 2, terms, 4);
    assert_int_equal(f->r[1].commit, 0);
    struct raft_msg m = snapshot_chunk(0, 10, false, &f->cfg);
    deliver(f, 1, &m);
    assert_false(f->out.has_snapshot);
    const struct raft_msg *r = pick(f, RAFT_MSG_SNAPSHOT_RESP, 1);
    assert_true(r->snapshot_resp.success);
    assert_int_equal(r->snapshot_resp.match, 5);
    /* A chunk past 0 (the leader's resend) is answered the same way. */
    m = snapshot_chunk(10, 5, true, &f->cfg);
    deliver(f, 1, &m);
    assert_false(f->out.has_snapshot);
    assert_int_equal(pick(f, RAFT_MSG_SNAPSHOT_RESP, 1)->snapshot_resp.match,
                     5);
    /* Another term at X is not our log: the transfer is taken. */
    raft_close(&f->r[1]);
    raft_term other[4] = {1, 1, 1, 1};
    boot(f, 1, 2, other, 4);
    m = snapshot_chunk(0, 10, false, &f->cfg);
    deliver(f, 1, &m);
    assert_true(f->out.has_snapshot);
}

/* steps transfers with no target, each abandoned (an election timeout
 * later, the followers heard meanwhile, node 3 at match3) before the next
 * is asked: picked[] marks each node chosen. */
static void transfer_any(struct fixture *f, int steps, raft_index match3,
                         bool *picked)
{
    raft_term t = f->r[0].term;
    raft_index last = f->r[0].last_index;
    for (int k = 0; k < steps; k++) {
        struct raft_in in = {.type = RAFT_IN_TRANSFER};
        assert_int_equal(step(f, 0, &in), 0);
        raft_node to = f->r[0].transfer_to;
        assert_true(to == 2 || to == 3);
        picked[to] = true;
        /* Asked again while it runs: the same target. */
        assert_int_equal(step(f, 0, &in), 0);
        assert_int_equal(f->r[0].transfer_to, to);
        f->now += ET + 1;
        struct raft_msg m = append_resp(2, t, last, last, 0);
        deliver(f, 0, &m);
        m = append_resp(3, t, match3, match3, 0);
        deliver(f, 0, &m);
        tick(f, 0, f->now);
        assert_int_equal(f->r[0].role, RAFT_LEADER);
        assert_int_equal(f->r[0].transfer_to, 0);
    }
}

/* Finding F20: a transfer with no target (a stream leader's step-down)
 * picks at random among the healthy voters (match >= commit, heard
 * within an election timeout), as nats-server's step-down takes any
 * healthy peer. Taking the first of equally caught-up voters made repeated
 * step-downs of an idle group cycle between two nodes: the third never
 * led. A voter behind commit is not picked while a healthy one is; asked
 * again while a transfer runs, the leader keeps its target. */
static void a_transfer_with_no_target_picks_any_healthy_voter(void **state)
{
    struct fixture *f = *state;
    bool picked[N + 1] = {false};
    elect(f);
    raft_term t = f->r[0].term;
    persisted(f, 0, 2, t);
    struct raft_msg m = append_resp(2, t, 2, 2, 0);
    deliver(f, 0, &m);
    m = append_resp(3, t, 2, 2, 0);
    deliver(f, 0, &m);
    struct raft_entry e = {t, RAFT_ENTRY_NORMAL, 1, "y"};
    struct raft_in in = {.type = RAFT_IN_PROPOSE};
    in.propose.n = 1;
    in.propose.entries = &e;
    assert_int_equal(step(f, 0, &in), 0);
    persisted(f, 0, 3, t);
    m = append_resp(2, t, 3, 3, 0);
    deliver(f, 0, &m);
    assert_int_equal(f->r[0].commit, 3); /* node 3 is behind it */
    transfer_any(f, 16, 2, picked);
    assert_true(picked[2]);
    assert_false(picked[3]);
    transfer_any(f, 32, 3, picked);
    assert_true(picked[3]);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(an_election_timeout_starts_a_pre_vote_that_persists_nothing),
        T(a_sole_voter_campaigns_at_its_first_tick),
        T(a_faulty_sole_voter_still_never_campaigns),
        T(a_lone_leader_ticks_rarely_and_a_leader_of_three_often),
        T(a_won_pre_vote_persists_term_and_vote_before_asking),
        T(a_new_leader_appends_a_barrier_of_its_term),
        T(the_leader_counts_itself_only_up_to_its_persisted_index),
        T(a_follower_reports_match_bounded_by_its_persisted_index),
        T(a_follower_answers_new_entries_once_after_persist),
        T(a_sync_of_replaced_entries_is_not_accepted_as_persisted),
        T(an_entry_of_a_previous_term_commits_only_with_one_of_this_term),
        T(term_on_start_is_at_least_the_last_log_term),
        T(a_candidate_of_another_incarnation_gets_no_vote),
        T(a_new_incarnation_counts_for_nothing_until_replaced),
        T(a_node_with_an_empty_log_never_votes_nor_campaigns),
        T(a_configuration_change_waits_for_a_current_term_commit),
        T(unsafe_changes_are_refused),
        T(force_skips_only_the_healthy_majority_rule),
        T(after_recover_only_the_source_campaigns),
        T(the_recover_wait_is_reported_and_survives_a_restart),
        T(a_truncated_configuration_entry_stops_applying),
        T(read_index_waits_for_a_heartbeat_round_of_this_term),
        T(an_installed_snapshot_counts_only_once_durable),
        T(a_snapshot_keeps_the_local_log_that_matches_it),
        T(a_refused_transfer_is_answered_with_failure),
        T(a_follower_installing_a_snapshot_never_campaigns),
        T(a_leader_sends_a_chunk_again_only_when_unanswered),
        T(a_follower_holding_the_snapshots_entry_answers_its_match),
        T(a_transfer_with_no_target_picks_any_healthy_voter),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
