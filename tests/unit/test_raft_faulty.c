/* Unit tests of the Raft core under storage faults (docs/design.md
 * §4.7 R1): the match cap, votes with the extent, no campaign, apply stops at
 * the fault, a faulty leader, repair from the leader, and the discard round. */
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
    struct raft r[N];
    struct raft_out out;
    uint64_t now;
    struct raft_config cfg;
    uint8_t cfgbuf[RAFT_CONFIG_BYTES_MAX];
    uint32_t cfglen;
    struct raft_msg msg;
};

/* Node i with entries 2..4 of term 1 after the configuration at 1. */
static void boot(struct fixture *f, uint32_t i, raft_index faulty,
                 raft_term extent_term)
{
    struct raft_params p = {.id = i + 1,
                            .incarnation = 100 + i,
                            .seed = i + 1,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[i], &p), 0);
    raft_load_hard_state(&f->r[i], 1, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[i], 1, &c), 0);
    for (raft_index k = 2; k <= 4; k++) {
        struct raft_entry e = {1, RAFT_ENTRY_NORMAL, 1, "x"};
        assert_int_equal(raft_load_entry(&f->r[i], k, &e), 0);
    }
    if (faulty != 0) {
        raft_load_faulty(&f->r[i], faulty, 4, extent_term);
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
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    for (uint32_t i = 0; i < N; i++) {
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

static void deliver(struct fixture *f, uint32_t i, const struct raft_msg *m)
{
    struct raft_in in = {.type = RAFT_IN_RECEIVE, .msg = m};
    assert_int_equal(step(f, i, &in), 0);
}

static const struct raft_msg *find(struct fixture *f, uint8_t type,
                                   raft_node to)
{
    for (uint32_t k = 0; k < f->out.n_msgs; k++) {
        if (f->out.msgs[k].type == type && f->out.msgs[k].to == to) {
            f->msg = f->out.msgs[k];
            return &f->msg;
        }
    }
    return NULL;
}

static struct raft_msg vote_req(raft_node from, raft_term term, raft_index last,
                                raft_term last_term, bool pre)
{
    struct raft_msg m = {.type = RAFT_MSG_VOTE,
                         .from = from,
                         .from_incarnation = 100 + from - 1,
                         .to = 2,
                         .term = term};
    m.vote.pre = pre;
    m.vote.last_index = last;
    m.vote.last_term = last_term;
    return m;
}

static struct raft_msg append(raft_term term, raft_index prev, uint32_t n,
                              const struct raft_entry *e, raft_index commit)
{
    struct raft_msg m = {.type = RAFT_MSG_APPEND,
                         .from = 1,
                         .from_incarnation = 100,
                         .to = 2,
                         .term = term};
    m.append.prev_index = prev;
    m.append.prev_term = 1;
    m.append.n_entries = n;
    m.append.entries = e;
    m.append.commit = commit;
    m.append.leader_last = prev + n;
    return m;
}

static void a_faulty_node_reports_match_below_its_fault(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    struct raft_msg m = append(2, 4, 0, NULL, 0);
    m.append.prev_term = 1;
    deliver(f, 1, &m);
    const struct raft_msg *r = find(f, RAFT_MSG_APPEND_RESP, 1);
    assert_non_null(r);
    assert_true(r->append_resp.match <= 2);
    /* It asks for the damaged index again (a rejection hinting below it). */
    assert_false(r->append_resp.success);
    assert_int_equal(r->append_resp.hint, 2);
}

static void a_faulty_node_votes_with_its_extent(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    struct raft_msg m = vote_req(3, 2, 3, 1, false); /* behind the extent */
    deliver(f, 1, &m);
    assert_false(find(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
    m = vote_req(3, 2, 4, 1, false); /* as far as the extent */
    deliver(f, 1, &m);
    assert_true(find(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
}

static void an_unknown_tail_term_refuses_every_vote_and_pre_vote(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 0);
    struct raft_msg m = vote_req(3, 2, 100, 9, true);
    deliver(f, 1, &m);
    assert_false(find(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
    m = vote_req(3, 2, 100, 9, false);
    deliver(f, 1, &m);
    assert_false(find(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
}

static void a_faulty_node_never_campaigns_and_asks_for_a_copy(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    tick(f, 1, 10 * ET);
    assert_int_equal(f->r[1].role, RAFT_FOLLOWER);
    assert_null(find(f, RAFT_MSG_VOTE, 1));
    const struct raft_msg *m = find(f, RAFT_MSG_FETCH, 1);
    assert_non_null(m);
    assert_int_equal(m->discard.index, 3);
    assert_false(f->out.hs_changed); /* a fetch fences nothing */
}

static void apply_stops_before_the_fault(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    struct raft_entry e[3] = {{1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"}};
    struct raft_msg m = append(2, 1, 3, e, 4);
    deliver(f, 1, &m);
    assert_int_equal(f->r[1].commit, 4);
    assert_int_equal(f->out.commit, 2);
}

static void the_leaders_copy_of_a_faulty_index_is_a_repair(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    struct raft_entry e[2] = {{1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"}};
    struct raft_msg m = append(2, 2, 2, e, 0);
    deliver(f, 1, &m);
    assert_int_equal(f->out.n_repairs, 2); /* 3 and the rest up to the extent */
    assert_int_equal(f->out.repairs[0].index, 3);
    assert_int_equal(f->out.repairs[1].index, 4);
    assert_int_equal(f->out.truncate_from, 0); /* repaired, not truncated */
    struct raft_in in = {.type = RAFT_IN_FAULTY};
    in.faulty.index = 0;
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->r[1].faulty, 0);
}

static bool append_accepted(const struct fixture *f)
{
    for (uint32_t k = 0; k < f->out.n_msgs; k++) {
        if (f->out.msgs[k].type == RAFT_MSG_APPEND_RESP) {
            return f->out.msgs[k].append_resp.success;
        }
    }
    fail_msg("no append response");
    return false;
}

/* Finding F12: the store verifies a damaged run only whole (the chain ends
 * at the intact record after it), so the core hands every copy from the
 * fault through the extent, in order, over as many appends as it takes.
 * It used to hand only the first faulty index and reject every append
 * after it: a run of 5,377 records stayed faulty for good. */
static void a_damaged_run_gets_every_copy_in_order_across_appends(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 2, 1); /* 2..4 damaged, extent 4 */
    struct raft_entry e[3] = {{1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"}};
    struct raft_msg m = append(2, 1, 1, e, 0);
    deliver(f, 1, &m);
    assert_int_equal(f->out.n_repairs, 1);
    assert_int_equal(f->out.repairs[0].index, 2);
    assert_true(append_accepted(f));
    /* The next append continues the run: accepted, copies 3 and 4. */
    m = append(2, 2, 2, &e[1], 0);
    deliver(f, 1, &m);
    assert_int_equal(f->out.n_repairs, 2);
    assert_int_equal(f->out.repairs[0].index, 3);
    assert_int_equal(f->out.repairs[1].index, 4);
    assert_true(append_accepted(f));
    assert_int_equal(f->r[1].faulty, 2); /* until the store reports it */
    /* Past the extent nothing more is needed: no rejection. */
    m = append(2, 4, 0, NULL, 0);
    deliver(f, 1, &m);
    assert_int_equal(f->out.n_repairs, 0);
    assert_true(append_accepted(f));
    /* The run did not verify: the driver reports the same fault, and an
     * append after it is rejected with a hint below the fault. */
    struct raft_in in = {.type = RAFT_IN_FAULTY};
    in.faulty.index = 2;
    in.faulty.extent_index = 4;
    in.faulty.extent_term = 1;
    assert_int_equal(step(f, 1, &in), 0);
    m = append(2, 3, 1, &e[2], 0);
    deliver(f, 1, &m);
    assert_int_equal(f->out.n_repairs, 0);
    assert_false(append_accepted(f));
    assert_int_equal(f->out.msgs[0].append_resp.hint, 1);
}

static void a_faulty_leader_stops_proposing_and_transfers(void **state)
{
    struct fixture *f = *state;
    for (uint32_t i = 0; i < N; i++) {
        boot(f, i, 0, 0);
    }
    tick(f, 0, 10 * ET);
    struct raft_msg v = {.type = RAFT_MSG_VOTE_RESP,
                         .from = 2,
                         .from_incarnation = 101,
                         .to = 1,
                         .term = f->r[0].term + 1};
    v.vote_resp.pre = 1;
    v.vote_resp.granted = 1;
    deliver(f, 0, &v);
    v.vote_resp.pre = 0;
    deliver(f, 0, &v);
    assert_int_equal(f->r[0].role, RAFT_LEADER);
    struct raft_in in = {.type = RAFT_IN_FAULTY};
    in.faulty.index = 4;
    in.faulty.extent_index = 5;
    in.faulty.extent_term = f->r[0].term;
    assert_int_equal(step(f, 0, &in), 0);
    assert_int_not_equal(f->r[0].transfer_to, 0);
    struct raft_entry e = {f->r[0].term, RAFT_ENTRY_NORMAL, 1, "y"};
    in = (struct raft_in){.type = RAFT_IN_PROPOSE};
    in.propose.n = 1;
    in.propose.entries = &e;
    assert_int_equal(step(f, 0, &in), KEEL_EBUSY);
    /* The transfer stalls: it steps down after an election timeout. */
    tick(f, 0, f->now + 3 * ET);
    assert_int_not_equal(f->r[0].role, RAFT_LEADER);
}

static void a_discard_round_fences_a_fresh_term_first(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    tick(f, 1, 10 * ET); /* FETCH */
    tick(f, 1, 30 * ET); /* nobody showed a copy: discard round */
    const struct raft_msg *m = find(f, RAFT_MSG_DISCARD, 3);
    assert_non_null(m);
    assert_true(f->out.hs_changed);
    assert_int_equal(m->term, 2);
    raft_term t = m->term;
    struct raft_msg a = {.type = RAFT_MSG_DISCARD_RESP,
                         .from = 3,
                         .from_incarnation = 102,
                         .to = 2,
                         .term = t - 1}; /* an answer outside term T */
    a.discard_resp.index = 3;
    a.discard_resp.status = RAFT_DISCARD_NONE;
    deliver(f, 1, &a);
    a.from = 1;
    a.from_incarnation = 100;
    deliver(f, 1, &a);
    assert_int_equal(f->r[1].faulty, 3); /* stale answers count for nothing */
    a.term = t;
    deliver(f, 1, &a);
    a.from = 3;
    a.from_incarnation = 102;
    deliver(f, 1, &a);
    assert_int_equal(f->out.truncate_from, 3);
    assert_int_equal(f->r[1].faulty, 0);
}

static void an_amnesiac_node_grants_no_vote_and_never_campaigns(void **state)
{
    struct fixture *f = *state;
    struct raft_params p = {.id = 2,
                            .incarnation = 101,
                            .seed = 2,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[1], &p), 0);
    raft_load_hard_state(&f->r[1], 1, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[1], 1, &c), 0);
    raft_load_amnesia(&f->r[1], 1, 0);
    raft_start(&f->r[1], f->now);
    struct raft_msg m = vote_req(3, 2, 100, 9, true);
    deliver(f, 1, &m);
    assert_false(find(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
    m = vote_req(3, 2, 100, 9, false);
    deliver(f, 1, &m);
    assert_false(find(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
    tick(f, 1, 10 * ET);
    assert_int_equal(f->r[1].role, RAFT_FOLLOWER);
    assert_null(find(f, RAFT_MSG_VOTE, 1));
}

static void amnesia_ends_at_the_leaders_last_index_not_its_commit(void **state)
{
    struct fixture *f = *state;
    struct raft_params p = {.id = 2,
                            .incarnation = 101,
                            .seed = 2,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[1], &p), 0);
    raft_load_hard_state(&f->r[1], 1, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[1], 1, &c), 0);
    raft_load_amnesia(&f->r[1], 1, 0);
    raft_start(&f->r[1], f->now);
    struct raft_entry e[2] = {{1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"}};
    struct raft_msg m = append(2, 1, 2, e, 2);
    m.append.leader_last = 5; /* the leader holds more than it committed */
    deliver(f, 1, &m);
    assert_true(f->out.amnesia_changed);
    assert_int_equal(f->out.amnesia_target, 5);
    struct raft_in in = {.type = RAFT_IN_PERSISTED};
    in.persisted.index = 3;
    in.persisted.term = 1;
    assert_int_equal(step(f, 1, &in), 0);
    assert_true(f->r[1].amnesiac); /* commit (2) reached, target not */
    struct raft_entry more[2] = {{1, RAFT_ENTRY_NORMAL, 1, "x"},
                                 {1, RAFT_ENTRY_NORMAL, 1, "x"}};
    m = append(2, 3, 2, more, 2);
    deliver(f, 1, &m);
    in.persisted.index = 5;
    assert_int_equal(step(f, 1, &in), 0);
    assert_false(f->r[1].amnesiac);
    assert_true(f->out.amnesia_changed);
}

static void an_amnesiac_node_answers_faulty_beyond_its_log(void **state)
{
    struct fixture *f = *state;
    boot(f, 0, 0, 0);
    struct raft_msg q = {.type = RAFT_MSG_DISCARD,
                         .from = 3,
                         .from_incarnation = 102,
                         .to = 1,
                         .term = 2};
    q.discard.index = 6;
    deliver(f, 0, &q);
    assert_int_equal(find(f, RAFT_MSG_DISCARD_RESP, 3)->discard_resp.status,
                     RAFT_DISCARD_NONE); /* healthy: it never held 6 */
    struct raft_params p = {.id = 2,
                            .incarnation = 101,
                            .seed = 2,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[1], &p), 0);
    raft_load_hard_state(&f->r[1], 1, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[1], 1, &c), 0);
    raft_load_amnesia(&f->r[1], 1, 0);
    raft_start(&f->r[1], f->now);
    q.to = 2;
    deliver(f, 1, &q);
    /* It may have held 6 before the loss: "none" would count toward a
     * discard. */
    assert_int_equal(find(f, RAFT_MSG_DISCARD_RESP, 3)->discard_resp.status,
                     RAFT_DISCARD_FAULTY);
}

static void leaderless_repair_asks_for_the_next_fault_at_once(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 2, 1);
    tick(f, 1, 10 * ET);
    assert_int_equal(find(f, RAFT_MSG_FETCH, 1)->discard.index, 2);
    /* The copy of 2 verified and was written; 3 is damaged too. */
    struct raft_in in = {.type = RAFT_IN_FAULTY};
    in.faulty.index = 3;
    in.faulty.extent_index = 4;
    in.faulty.extent_term = 1;
    assert_int_equal(step(f, 1, &in), 0);
    const struct raft_msg *m = find(f, RAFT_MSG_FETCH, 3);
    assert_non_null(m); /* no election timeout in between */
    assert_int_equal(m->discard.index, 3);
    assert_false(f->out.hs_changed);
}

static void a_snapshot_over_a_fault_keeps_the_next_fault(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 2, 1);
    struct raft_in in = {.type = RAFT_IN_SNAPSHOT_INSTALLED};
    in.snapshot.index = 3;
    in.snapshot.term = 1;
    in.snapshot.config = &f->cfg;
    in.snapshot.faulty = 4; /* the kept log is damaged after the snapshot */
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->r[1].faulty, 4);
    assert_int_equal(f->out.commit, 3); /* never applies past 3 */
}

/* Issue 21 (fault seed 202): a follower damaged at an index its leader's
 * core compacted is sent InstallSnapshot, never the entry; a snapshot of
 * its own at or above the leader's refuses every transfer, so it stayed
 * faulty for good. It asks the leader for its copy (FETCH), and the
 * leader's answer, filled from its store, is a repair. */
static void a_fault_under_the_leaders_snapshot_is_fetched_from_it(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT,
                         .from = 1,
                         .from_incarnation = 100,
                         .to = 2,
                         .term = 2};
    m.snapshot.index = 4;
    m.snapshot.term = 1;
    m.snapshot.leader_last = 6;
    m.snapshot.log_first = 1;
    m.snapshot.config = f->cfg;
    deliver(f, 1, &m);
    const struct raft_msg *q = find(f, RAFT_MSG_FETCH, 1);
    assert_non_null(q);
    assert_int_equal(q->discard.index, 3);
    /* Not at every chunk: only when a transfer starts. */
    m.snapshot.offset = 100;
    deliver(f, 1, &m);
    assert_null(find(f, RAFT_MSG_FETCH, 1));
    struct raft_entry e = {1, RAFT_ENTRY_NORMAL, 1, "x"};
    struct raft_msg a = {.type = RAFT_MSG_FETCH_RESP,
                         .from = 1,
                         .from_incarnation = 100,
                         .to = 2,
                         .term = 2};
    a.discard_resp.index = 3;
    a.discard_resp.status = RAFT_DISCARD_HAS;
    a.discard_resp.entry = &e; /* term 0: below the leader's snapshot */
    deliver(f, 1, &a);
    assert_int_equal(f->out.n_repairs, 1);
    assert_int_equal(f->out.repairs[0].index, 3);
    /* A snapshot below the fault covers nothing: no FETCH. */
    m.snapshot.index = 2;
    m.snapshot.offset = 0;
    deliver(f, 1, &m);
    assert_null(find(f, RAFT_MSG_FETCH, 1));
}

/* Node i as boot() makes it, but amnesiac (rule 3) from term 1. */
static void boot_amnesiac(struct fixture *f, uint32_t i)
{
    struct raft_params p = {.id = i + 1,
                            .incarnation = 100 + i,
                            .seed = i + 1,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[i], &p), 0);
    raft_load_hard_state(&f->r[i], 1, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[i], 1, &c), 0);
    for (raft_index k = 2; k <= 4; k++) {
        struct raft_entry e = {1, RAFT_ENTRY_NORMAL, 1, "x"};
        assert_int_equal(raft_load_entry(&f->r[i], k, &e), 0);
    }
    raft_load_amnesia(&f->r[i], 1, 0);
    raft_start(&f->r[i], f->now);
}

static void recover_bumps_the_term_truncates_and_ends_amnesia(void **state)
{
    struct fixture *f = *state;
    boot_amnesiac(f, 1);
    struct raft_in in = {.type = RAFT_IN_RECOVER};
    in.recover.term = 5; /* past every term the survey saw */
    in.recover.keep = 3; /* the source's extent; 4 went to quarantine/ */
    assert_int_equal(step(f, 1, &in), 0);
    assert_true(f->out.hs_changed);
    assert_int_equal(f->out.term, 5);
    assert_int_equal(f->out.vote, 0);
    assert_int_equal(f->out.truncate_from, 4);
    assert_true(f->out.amnesia_changed);
    assert_false(f->out.amnesiac);
    /* A voter again: it grants the source's candidacy. */
    struct raft_msg m = vote_req(3, 6, 3, 1, false);
    deliver(f, 1, &m);
    assert_true(find(f, RAFT_MSG_VOTE_RESP, 3)->vote_resp.granted);
}

static void recover_is_refused_over_a_fault_or_an_old_term(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    struct raft_in in = {.type = RAFT_IN_RECOVER};
    in.recover.term = 5;
    in.recover.keep = 4; /* keeps the damaged 3: repair it first */
    assert_int_equal(step(f, 1, &in), KEEL_EINVAL);
    in.recover.term = 1; /* not past the node's own term */
    in.recover.keep = 2;
    assert_int_equal(step(f, 1, &in), KEEL_EINVAL);
    assert_int_equal(f->r[1].last_index, 4);
    assert_int_equal(f->r[1].faulty, 3);
    in.recover.term = 5;
    assert_int_equal(step(f, 1, &in), 0);
    assert_int_equal(f->out.truncate_from, 3);
    assert_int_equal(f->r[1].faulty, 0);
}

static struct raft_msg discard_none(raft_node from, raft_term t)
{
    struct raft_msg a = {.type = RAFT_MSG_DISCARD_RESP,
                         .from = from,
                         .from_incarnation = 100 + from - 1,
                         .to = 2,
                         .term = t};
    a.discard_resp.index = 3;
    a.discard_resp.status = RAFT_DISCARD_NONE;
    return a;
}

/* Rule 1c: index 3 was appended under five voters; the configuration at 4
 * keeps three. A leader of the five may have committed 3 with nodes 2, 4
 * and 5, so answers from 1 and 3 (a majority of the three) are not enough. */
static void
a_discard_round_convinces_the_configuration_at_the_index(void **state)
{
    struct fixture *f = *state;
    struct raft_config five = {.n = 5};
    for (uint32_t i = 0; i < 5; i++) {
        five.servers[i] = (struct raft_server){i + 1, 100 + i, RAFT_VOTER};
    }
    uint8_t buf5[RAFT_CONFIG_BYTES_MAX];
    uint32_t len5 = raft_config_encode(&five, buf5, sizeof buf5);
    struct raft_params p = {.id = 2,
                            .incarnation = 101,
                            .seed = 2,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[1], &p), 0);
    raft_load_hard_state(&f->r[1], 1, 0);
    struct raft_entry e[4] = {{1, RAFT_ENTRY_CONFIG, len5, buf5},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_NORMAL, 1, "x"},
                              {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf}};
    for (raft_index k = 1; k <= 4; k++) {
        assert_int_equal(raft_load_entry(&f->r[1], k, &e[k - 1]), 0);
    }
    raft_load_faulty(&f->r[1], 3, 4, 1);
    raft_start(&f->r[1], f->now);
    tick(f, 1, 10 * ET);                           /* FETCH */
    tick(f, 1, 30 * ET);                           /* discard round */
    assert_non_null(find(f, RAFT_MSG_DISCARD, 5)); /* asked, though removed */
    raft_term t = f->r[1].term;
    struct raft_msg a = discard_none(1, t);
    deliver(f, 1, &a);
    a = discard_none(3, t);
    deliver(f, 1, &a);
    assert_int_equal(f->out.truncate_from, 0);
    assert_int_equal(f->r[1].faulty, 3); /* the five are not convinced */
    a = discard_none(5, t);
    deliver(f, 1, &a);
    assert_int_equal(f->out.truncate_from, 3);
}

/* A node that has been the only voter of every configuration of its log:
 * entries 2..4 of term 1, the record at `faulty` damaged (0: none). */
static void boot_sole(struct fixture *f, raft_index faulty, bool amnesiac)
{
    struct raft_config one = {.n = 1};
    one.servers[0] = (struct raft_server){1, 100, RAFT_VOTER};
    f->cfglen = raft_config_encode(&one, f->cfgbuf, sizeof f->cfgbuf);
    struct raft_params p = {.id = 1,
                            .incarnation = 100,
                            .seed = 1,
                            .election_timeout_ms = ET,
                            .heartbeat_ms = 20};
    assert_int_equal(raft_init(&f->r[0], &p), 0);
    raft_load_hard_state(&f->r[0], 1, 0);
    struct raft_entry c = {1, RAFT_ENTRY_CONFIG, f->cfglen, f->cfgbuf};
    assert_int_equal(raft_load_entry(&f->r[0], 1, &c), 0);
    for (raft_index k = 2; k <= 4; k++) {
        struct raft_entry e = {1, RAFT_ENTRY_NORMAL, 1, "x"};
        assert_int_equal(raft_load_entry(&f->r[0], k, &e), 0);
    }
    if (faulty != 0) {
        raft_load_faulty(&f->r[0], faulty, 4, 1);
    }
    if (amnesiac) {
        raft_load_amnesia(&f->r[0], 1, 0);
    }
    raft_start(&f->r[0], f->now);
}

/* Finding F1: a faulty group of one never leads and has nobody to repair
 * from; what it persisted was committed, so it applies up to its fault
 * (and keeps refusing to lead). */
static void a_faulty_sole_voter_applies_up_to_its_fault(void **state)
{
    struct fixture *f = *state;
    boot_sole(f, 3, false);
    tick(f, 0, 1);
    assert_int_equal(f->out.commit, 2);
    for (uint64_t t = 1; t <= 20 * ET; t += ET / 2) {
        tick(f, 0, t);
        assert_int_not_equal(f->out.role, RAFT_LEADER);
    }
    assert_int_equal(f->out.commit, 2);
}

/* The rule is only for a node that was always the sole voter: a faulty
 * voter of three learns its commit from a leader (apply_stops_before_the_
 * fault), and an amnesiac group of one waits for the operator (rule 4). */
static void only_an_intact_memory_of_being_alone_commits(void **state)
{
    struct fixture *f = *state;
    boot(f, 1, 3, 1);
    tick(f, 1, 1);
    assert_int_equal(f->out.commit, 0);
    boot_sole(f, 0, true);
    tick(f, 0, 1);
    assert_int_equal(f->out.commit, 0);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(a_faulty_node_reports_match_below_its_fault),
        T(a_faulty_node_votes_with_its_extent),
        T(an_unknown_tail_term_refuses_every_vote_and_pre_vote),
        T(a_faulty_node_never_campaigns_and_asks_for_a_copy),
        T(apply_stops_before_the_fault),
        T(the_leaders_copy_of_a_faulty_index_is_a_repair),
        T(a_damaged_run_gets_every_copy_in_order_across_appends),
        T(a_faulty_leader_stops_proposing_and_transfers),
        T(a_discard_round_fences_a_fresh_term_first),
        T(an_amnesiac_node_grants_no_vote_and_never_campaigns),
        T(amnesia_ends_at_the_leaders_last_index_not_its_commit),
        T(an_amnesiac_node_answers_faulty_beyond_its_log),
        T(leaderless_repair_asks_for_the_next_fault_at_once),
        T(a_snapshot_over_a_fault_keeps_the_next_fault),
        T(a_fault_under_the_leaders_snapshot_is_fetched_from_it),
        T(recover_bumps_the_term_truncates_and_ends_amnesia),
        T(recover_is_refused_over_a_fault_or_an_old_term),
        T(a_discard_round_convinces_the_configuration_at_the_index),
        T(a_faulty_sole_voter_applies_up_to_its_fault),
        T(only_an_intact_memory_of_being_alone_commits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
