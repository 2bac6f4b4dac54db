/* Raft core: lifecycle, the step dispatcher, timers and elections
 * (Raft §5.2, §5.4.1, pre-vote and check-quorum from Ongaro's thesis §9.6). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "keel/assert.h"
#include "keel/error.h"

#define RUNS_INITIAL 16

uint64_t raft__random(struct raft *r)
{
    /* splitmix64: deterministic per group, seeded by the driver. */
    uint64_t z = (r->prng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void reset_election_timer(struct raft *r)
{
    ASSERT(r->election_timeout_ms > 0);
    uint64_t jitter = raft__random(r) % r->election_timeout_ms;
    r->election_deadline_ms = r->now_ms + r->election_timeout_ms + jitter;
    ASSERT(r->election_deadline_ms > r->now_ms);
}

int raft_init(struct raft *r, const struct raft_params *p)
{
    ASSERT(p->id != 0);
    ASSERT(p->heartbeat_ms > 0);
    ASSERT(p->election_timeout_ms > p->heartbeat_ms);
    memset(r, 0, sizeof *r);
    r->runs = malloc(RUNS_INITIAL * sizeof *r->runs);
    if (r->runs == NULL) {
        return KEEL_ENOMEM;
    }
    r->runs_cap = RUNS_INITIAL;
    r->id = p->id;
    r->incarnation = p->incarnation;
    r->prng = p->seed;
    r->election_timeout_ms = p->election_timeout_ms;
    r->heartbeat_ms = p->heartbeat_ms;
    r->append_entries_max = p->append_entries_max;
    if (r->append_entries_max == 0 ||
        r->append_entries_max > RAFT_APPEND_ENTRIES_MAX) {
        r->append_entries_max = RAFT_APPEND_ENTRIES_MAX;
    }
    r->role = RAFT_FOLLOWER;
    return 0;
}

void raft_close(struct raft *r)
{
    ASSERT(r != NULL);
    free(r->runs);
    r->runs = NULL;
    r->runs_cap = 0;
    r->n_runs = 0;
}

void raft_load_hard_state(struct raft *r, raft_term term, raft_node vote)
{
    ASSERT(r->last_index == 0);
    ASSERT(r->role == RAFT_FOLLOWER);
    r->term = term;
    r->vote = vote;
}

void raft_load_snapshot(struct raft *r, raft_index index, raft_term term,
                        const struct raft_config *config)
{
    ASSERT(r->last_index == 0);
    ASSERT(config->n <= RAFT_SERVERS_MAX);
    r->snap_index = index;
    r->snap_term = term;
    r->last_index = index;
    r->snap_config = *config;
    r->snap_config_index = index;
    r->commit = index;
    r->applied = index;
}

int raft_load_entry(struct raft *r, raft_index index,
                    const struct raft_entry *e)
{
    ASSERT(r->role == RAFT_FOLLOWER);
    ASSERT(r->n_runs <= r->runs_cap);
    if (index != r->last_index + 1 || e->term == 0) {
        return KEEL_EINVAL;
    }
    return raft__log_append(r, index, e);
}

void raft_load_faulty(struct raft *r, raft_index index, raft_index extent_index,
                      raft_term extent_term)
{
    ASSERT(r->role == RAFT_FOLLOWER);
    ASSERT(index == 0 || (index > r->snap_index && index <= r->last_index));
    r->faulty = index;
    r->extent_index = extent_index;
    r->extent_term = extent_term;
}

void raft_load_amnesia(struct raft *r, raft_term t0, raft_index target)
{
    ASSERT(r->role == RAFT_FOLLOWER);
    ASSERT(t0 > 0);
    r->amnesiac = true;
    r->amnesia_t0 = t0;
    r->amnesia_target = target;
}

void raft_load_recover_wait(struct raft *r)
{
    ASSERT(r->role == RAFT_FOLLOWER);
    r->recover_wait = true;
}

static bool is_self_voter(const struct raft *r);

void raft_start(struct raft *r, uint64_t now_ms)
{
    ASSERT(r->role == RAFT_FOLLOWER);
    ASSERT(r->last_index >= r->snap_index);
    raft_term t = raft__log_last_term(r);
    if (t > r->term) {
        /* Never below a term seen in the log or snapshot (docs/design.md §3).
         */
        r->term = t;
        r->vote = 0;
        r->hs_dirty = true;
    }
    r->persisted = r->last_index;
    r->now_ms = now_ms;
    reset_election_timer(r);
    if (is_self_voter(r) &&
        raft__config_n_voters(raft_config_current(r)) == 1) {
        /* The only voter has no leader to wait for: it campaigns at the
         * first tick after its start (the tick's rules still apply: a
         * faulty or amnesiac node does not), so a new R1 stream answers
         * at once instead of after an election timeout. Not at a tick of
         * the start instant itself: the driver steps one while it opens
         * the group, and a leadership then would reach its callbacks
         * before the open returned. */
        r->election_deadline_ms = now_ms + 1;
    }
    raft__progress_rebuild(r);
}

struct raft_msg *raft__out_msg(struct raft_out *out, uint8_t type,
                               const struct raft *r, raft_node to,
                               raft_incarnation to_inc)
{
    ASSERT(to != r->id);
    if (out->n_msgs == RAFT_OUT_MSGS_MAX) {
        /* Dropping is safe: Raft tolerates lost messages and the next
         * heartbeat retries. The bound keeps one step's output finite. */
        return NULL;
    }
    struct raft_msg *m = &out->msgs[out->n_msgs++];
    memset(m, 0, sizeof *m);
    m->type = type;
    m->from = r->id;
    m->from_incarnation = r->incarnation;
    m->to = to;
    m->to_incarnation = to_inc;
    m->term = r->term;
    ASSERT(out->n_msgs <= RAFT_OUT_MSGS_MAX);
    return m;
}

static void set_term(struct raft *r, raft_term term)
{
    ASSERT(term > r->term);
    r->term = term;
    r->vote = 0;
    r->hs_dirty = true;
    r->leader_match = 0;
    r->leader_ctx = 0;
}

void raft__become_follower(struct raft *r, raft_term term, raft_node leader,
                           struct raft_out *out)
{
    ASSERT(term >= r->term);
    if (term > r->term) {
        set_term(r, term);
    }
    if (r->role == RAFT_LEADER) {
        raft__reads_fail(r, KEEL_ENOTLEADER, out);
        r->transfer_to = 0;
    }
    if (r->leader != leader) {
        r->leader_match = 0;
        r->leader_ctx = 0;
    }
    r->role = RAFT_FOLLOWER;
    r->leader = leader;
    ASSERT(r->role == RAFT_FOLLOWER);
}

static void become_leader(struct raft *r, struct raft_out *out);

static bool is_self_voter(const struct raft *r)
{
    return raft__config_is_voter(r, raft_config_current(r), r->id,
                                 r->incarnation);
}

/* Start a pre-vote (pre) or a real election. A real one raises the term and
 * votes for itself: the driver syncs that before the requests go out. */
void raft__campaign(struct raft *r, bool pre, bool transfer,
                    struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    ASSERT(is_self_voter(r));
    ASSERT(r->role != RAFT_LEADER);
    if (pre) {
        r->role = RAFT_PRE_CANDIDATE;
    } else {
        set_term(r, r->term + 1);
        r->vote = r->id;
        r->role = RAFT_CANDIDATE;
    }
    r->leader = 0;
    r->campaign_transfer = transfer;
    r->n_votes = 1;
    r->votes[0] = r->id;
    reset_election_timer(r);
    if (raft__config_n_voters(c) == 1) {
        /* A group of one wins at once (R1 shares the one code path). */
        if (pre) {
            raft__campaign(r, false, transfer, out);
        } else {
            become_leader(r, out);
        }
        return;
    }
    const struct raft_server *s;
    for (uint32_t i = 0; (s = raft__config_next_peer(r, c, &i)) != NULL;) {
        struct raft_msg *m =
            raft__out_msg(out, RAFT_MSG_VOTE, r, s->node, s->incarnation);
        if (m == NULL) {
            continue;
        }
        m->term = pre ? r->term + 1 : r->term;
        m->vote.pre = pre;
        m->vote.transfer = transfer;
        m->vote.last_index = r->last_index;
        m->vote.last_term = raft__log_last_term(r);
    }
}

static void become_leader(struct raft *r, struct raft_out *out)
{
    ASSERT(r->role == RAFT_CANDIDATE);
    ASSERT(r->vote == r->id);
    r->role = RAFT_LEADER;
    r->leader = r->id;
    r->transfer_to = 0;
    r->n_reads = 0;
    r->heartbeat_deadline_ms = r->now_ms + r->heartbeat_ms;
    r->quorum_deadline_ms = r->now_ms + r->election_timeout_ms;
    raft__progress_rebuild(r);
    for (uint32_t i = 0; i < r->n_progress; i++) {
        struct raft_progress *p = &r->progress[i];
        p->next = r->last_index + 1;
        p->match = 0;
        p->acked = 0;
        p->acked_at_heartbeat = 0;
        p->probe = true;
        p->probe_sent = false;
        p->active = false;
        p->heard_ms = r->now_ms;
        p->read_round = 0;
        p->inflight.n = 0;
    }
    out->became_leader = true;
    /* Commit only by counting an entry of the current term (§5.4.2): the
     * barrier gives the new leader one to count. */
    struct raft_entry barrier = {
        .term = r->term, .type = RAFT_ENTRY_BARRIER, .len = 0, .buf = NULL};
    r->term_start = r->last_index + 1;
    int rv = raft__leader_append(r, &barrier, 1, out);
    ASSERT(rv == 0 || rv == KEEL_ELIMIT || rv == KEEL_ENOMEM);
}

static bool log_up_to_date(const struct raft *r, raft_term last_term,
                           raft_index last_index)
{
    raft_term mine = raft__log_last_term(r);
    ASSERT(r->last_index >= r->snap_index);
    if (last_term != mine) {
        return last_term > mine;
    }
    return last_index >= r->last_index;
}

/* Election restriction. Storage rule 1: a faulty node compares the
 * candidate with its extent, and refuses every candidate (vote and pre-vote
 * alike) when the tail term is unknown. */
static bool vote_log_ok(const struct raft *r, const struct raft_msg *m)
{
    ASSERT(m->type == RAFT_MSG_VOTE);
    ASSERT(r->faulty == 0 || r->faulty > r->snap_index);
    if (r->faulty == 0) {
        return log_up_to_date(r, m->vote.last_term, m->vote.last_index);
    }
    if (r->extent_term == 0) {
        return false;
    }
    if (m->vote.last_term != r->extent_term) {
        return m->vote.last_term > r->extent_term;
    }
    return m->vote.last_index >= r->extent_index;
}

/* Rule 1: refuse a candidate whose node our configuration names with
 * another incarnation (a wiped disk). A candidate our configuration does not
 * name as a voter may still be one in a later configuration we lack (thesis
 * §4.2.3: a learner promoted by an entry we have not received), so only the
 * incarnation decides. */
static bool candidate_known(const struct raft *r, const struct raft_msg *m)
{
    const struct raft_server *s =
        raft_config_find(raft_config_current(r), m->from);
    ASSERT(m->type == RAFT_MSG_VOTE);
    if (s == NULL) {
        return true;
    }
    return s->incarnation == m->from_incarnation ||
           MUTATED(r, RAFT_MUT_NO_INCARNATION);
}

/* Grant or deny a vote or pre-vote (Raft §5.2, §5.4.1). Membership rule 1:
 * only a node its latest configuration names with its own incarnation votes
 * (a wiped disk has none), and never for a candidate named there with another
 * incarnation. A learner votes too: its promotion may be an entry it has not
 * received yet, and the candidate counts the vote only if its own
 * configuration names this node as a voter (see docs/raft.md: refusing
 * deadlocks a group that lost one disk). */
static void recv_vote(struct raft *r, const struct raft_msg *m,
                      struct raft_out *out)
{
    bool in_lease = r->leader != 0 &&
                    r->now_ms < r->leader_contact_ms + r->election_timeout_ms;
    if (r->role == RAFT_LEADER) {
        in_lease = true;
    }
    if (m->term > r->term && in_lease && !m->vote.transfer) {
        return; /* a live leader exists: ignore disruptive candidates */
    }
    if (!m->vote.pre && m->term > r->term) {
        raft__become_follower(r, m->term, 0, out);
    }
    bool grant = m->term >= r->term;
    if (m->vote.pre) {
        grant = m->term > r->term;
    } else if (grant) {
        grant = r->vote == 0 || r->vote == m->from;
    }
    if (r->amnesiac && !MUTATED(r, RAFT_MUT_AMNESIAC_VOTES)) {
        grant = false; /* rule 3: no vote, no pre-vote */
    }
    if (grant) {
        grant = raft__config_is_member(r, raft_config_current(r), r->id,
                                       r->incarnation) &&
                candidate_known(r, m) && vote_log_ok(r, m);
    }
    if (grant && !m->vote.pre) {
        r->vote = m->from;
        r->hs_dirty = true;
        reset_election_timer(r);
    }
    struct raft_msg *resp =
        raft__out_msg(out, RAFT_MSG_VOTE_RESP, r, m->from, m->from_incarnation);
    if (resp == NULL) {
        return;
    }
    resp->term = (grant && m->vote.pre) ? m->term : r->term;
    resp->vote_resp.pre = m->vote.pre;
    resp->vote_resp.granted = grant;
}

static void recv_vote_resp(struct raft *r, const struct raft_msg *m,
                           struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    bool pre = m->vote_resp.pre;
    if (!m->vote_resp.granted) {
        if (m->term > r->term) {
            raft__become_follower(r, m->term, 0, out);
        }
        return;
    }
    if (pre && (r->role != RAFT_PRE_CANDIDATE || m->term != r->term + 1)) {
        return;
    }
    if (!pre && (r->role != RAFT_CANDIDATE || m->term != r->term)) {
        return;
    }
    if (!raft__config_is_voter(r, c, m->from, m->from_incarnation)) {
        return; /* rule 1: not the incarnation the configuration names */
    }
    for (uint32_t i = 0; i < r->n_votes; i++) {
        if (r->votes[i] == m->from) {
            return;
        }
    }
    ASSERT(r->n_votes < RAFT_SERVERS_MAX);
    r->votes[r->n_votes++] = m->from;
    if (r->n_votes * 2 <= raft__config_n_voters(c)) {
        return;
    }
    if (pre) {
        raft__campaign(r, false, r->campaign_transfer, out);
    } else {
        become_leader(r, out);
    }
}

static void recv_timeout_now(struct raft *r, const struct raft_msg *m,
                             struct raft_out *out)
{
    ASSERT(m->term == r->term);
    ASSERT(r->role != RAFT_LEADER);
    if (m->from != r->leader || !is_self_voter(r) || r->faulty != 0 ||
        r->amnesiac) {
        return; /* rule 1: a faulty node is never a transfer target */
    }
    raft__campaign(r, false, true, out);
}

/* Rule 3: the first message of a leader of term >= T0 sets the amnesia
 * catch-up target to the leader's last index. */
static void amnesia_learn(struct raft *r, const struct raft_msg *m)
{
    ASSERT(m->term == r->term);
    ASSERT(r->role == RAFT_FOLLOWER);
    if (!r->amnesiac || r->amnesia_target != 0 || m->term < r->amnesia_t0 ||
        m->type == RAFT_MSG_TIMEOUT_NOW) {
        return;
    }
    r->amnesia_target = m->type == RAFT_MSG_APPEND ? m->append.leader_last
                                                   : m->snapshot.leader_last;
    if (MUTATED(r, RAFT_MUT_AMNESIA_AT_COMMIT) && m->type == RAFT_MSG_APPEND) {
        r->amnesia_target = m->append.commit;
    }
    if (r->amnesia_target == 0) {
        r->amnesia_target = 1;
    }
    r->amnesia_dirty = true;
}

/* Terms first (Raft §5.1): a higher term from a leader makes us its
 * follower; a lower one is answered so the stale leader learns it. */
static void recv_msg(struct raft *r, const struct raft_msg *m,
                     struct raft_out *out)
{
    if (m->to != r->id ||
        (m->to_incarnation != 0 && m->to_incarnation != r->incarnation &&
         !MUTATED(r, RAFT_MUT_NO_INCARNATION))) {
        return;
    }
    if (m->type == RAFT_MSG_VOTE) {
        recv_vote(r, m, out);
        return;
    }
    if (m->type == RAFT_MSG_VOTE_RESP) {
        recv_vote_resp(r, m, out);
        return;
    }
    if (m->type == RAFT_MSG_FETCH) {
        raft__recv_discard(r, m, out); /* repair asks in any term */
        return;
    }
    if (m->type == RAFT_MSG_FETCH_RESP) {
        raft__recv_fetch_resp(r, m, out);
        return;
    }
    bool from_leader = m->type == RAFT_MSG_APPEND ||
                       m->type == RAFT_MSG_SNAPSHOT ||
                       m->type == RAFT_MSG_TIMEOUT_NOW;
    if (m->term < r->term) {
        if (from_leader) {
            struct raft_msg *resp = raft__out_msg(out, RAFT_MSG_APPEND_RESP, r,
                                                  m->from, m->from_incarnation);
            if (resp != NULL) {
                resp->append_resp.success = 0;
            }
        }
        return;
    }
    if (m->term > r->term) {
        raft__become_follower(r, m->term, from_leader ? m->from : 0, out);
    }
    if (!from_leader) {
        if (m->type == RAFT_MSG_APPEND_RESP && r->role == RAFT_LEADER) {
            raft__recv_append_resp(r, m, out);
        } else if (m->type == RAFT_MSG_SNAPSHOT_RESP &&
                   r->role == RAFT_LEADER) {
            raft__recv_snapshot_resp(r, m, out);
        } else if (m->type == RAFT_MSG_DISCARD) {
            raft__recv_discard(r, m, out); /* term T adopted above, no vote */
        } else if (m->type == RAFT_MSG_DISCARD_RESP) {
            raft__recv_discard_resp(r, m, out);
        }
        return;
    }
    if (r->role == RAFT_LEADER) {
        return; /* two leaders in one term cannot happen; ignore */
    }
    raft__become_follower(r, m->term, m->from, out);
    r->leader_contact_ms = r->now_ms;
    r->recover_wait_dirty = r->recover_wait_dirty || r->recover_wait;
    r->recover_wait = false;
    reset_election_timer(r);
    amnesia_learn(r, m);
    if (m->type == RAFT_MSG_APPEND) {
        raft__recv_append(r, m, out);
    } else if (m->type == RAFT_MSG_SNAPSHOT) {
        raft__recv_snapshot(r, m, out);
    } else if (m->type == RAFT_MSG_TIMEOUT_NOW) {
        recv_timeout_now(r, m, out);
    }
}

static void check_quorum(struct raft *r, struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    uint32_t active = 1;
    ASSERT(r->role == RAFT_LEADER);
    for (uint32_t i = 0; i < r->n_progress; i++) {
        struct raft_progress *p = &r->progress[i];
        if (p->active && raft__config_is_voter(r, c, p->node, p->incarnation)) {
            active++;
        }
        p->active = false;
    }
    r->quorum_deadline_ms = r->now_ms + r->election_timeout_ms;
    if (active * 2 <= raft__config_n_voters(c)) {
        raft__become_follower(r, r->term, 0, out);
        reset_election_timer(r);
    }
}

static void tick(struct raft *r, struct raft_out *out)
{
    ASSERT(r->role >= RAFT_FOLLOWER);
    ASSERT(r->role <= RAFT_LEADER);
    if (r->role == RAFT_LEADER) {
        if (r->now_ms >= r->quorum_deadline_ms) {
            check_quorum(r, out);
            if (r->role != RAFT_LEADER) {
                return;
            }
        }
        if (r->transfer_to != 0 && r->now_ms >= r->transfer_deadline_ms) {
            r->transfer_to = 0; /* give up; proposals resume */
            if (r->faulty != 0) {
                /* Rule 1: a faulty leader whose transfer stalled steps
                 * down rather than lead with a damaged log. */
                raft__become_follower(r, r->term, 0, out);
                reset_election_timer(r);
                return;
            }
        }
        if (r->now_ms >= r->heartbeat_deadline_ms) {
            r->heartbeat_deadline_ms = r->now_ms + r->heartbeat_ms;
            raft__broadcast_append(r, true, out);
        }
        return;
    }
    if (r->now_ms < r->election_deadline_ms) {
        return;
    }
    if (is_self_voter(r) && r->faulty != 0) {
        /* Rule 1: a faulty node never campaigns; having heard no leader
         * for an election timeout it runs a discard round instead. */
        reset_election_timer(r);
        if (r->fetch_sent && !r->fetch_held) {
            raft__discard_start(r, out); /* nobody showed an intact copy */
        }
        r->fetch_held = false;
        r->fetch_sent = true;
        raft__fetch_start(r, out);
        return;
    }
    if (!is_self_voter(r) || r->amnesiac || r->recover_wait) {
        /* Rule 3: an amnesiac never campaigns; after the operator's
         * recover only the source does, until a leader is heard. */
        reset_election_timer(r);
        return;
    }
    if (r->recv_done) {
        /* An install is being made durable: the driver writes its
         * retained log to the store outside this log, and a leader's
         * first entry would not continue the store's (docs/raft.md
         * "InstallSnapshot"). Campaign once it is installed or aborted. */
        reset_election_timer(r);
        return;
    }
    raft__campaign(r, true, false, out);
}

/* The store found a damaged record (reads verify) or repaired one. A leader
 * that finds damage in its own log stops proposing (propose refuses while
 * faulty) and hands leadership to a voter (raft__transfer_start); with no
 * voter to take it, it steps down at once. */
static int faulty_report(struct raft *r, const struct raft_in *in,
                         struct raft_out *out)
{
    raft_index f = in->faulty.index;
    ASSERT(in->type == RAFT_IN_FAULTY);
    ASSERT(r->persisted <= r->last_index);
    if (f != 0 && (f <= r->snap_index || f > r->last_index)) {
        return KEEL_EINVAL;
    }
    /* Leaderless repair moving on (a FETCH copy repaired the old first
     * fault): ask for the next one now rather than an election timeout
     * later, or a power loss that left many holes takes that many
     * timeouts to heal (storage seed 474). */
    bool chain = r->fetch_sent && f > r->faulty && r->faulty != 0 &&
                 r->role == RAFT_FOLLOWER;
    if (f != r->faulty) {
        r->fetch_sent = false;
        r->fetch_held = false;
    }
    /* Copies from the leader start again at the (new or same) first fault:
     * the driver collects one run at a time and dropped any it refused. */
    r->repair_fault = 0;
    r->repair_next = 0;
    r->faulty = f;
    if (chain && f != 0 && is_self_voter(r)) {
        r->fetch_sent = true;
        raft__fetch_start(r, out);
    }
    r->extent_index = in->faulty.extent_index;
    r->extent_term = in->faulty.extent_term;
    if (MUTATED(r, RAFT_MUT_TRUNCATE_FAULTY) && f > r->commit &&
        r->role == RAFT_FOLLOWER) {
        /* The mutation: drop the log from the damage (what a store without
         * rule 1 does) instead of keeping it faulty and repairing it. */
        raft__log_truncate(r, f);
        out->truncate_from = f;
        return 0;
    }
    if (f != 0 &&
        (r->role == RAFT_CANDIDATE || r->role == RAFT_PRE_CANDIDATE)) {
        raft__become_follower(r, r->term, 0,
                              out); /* never campaigns while faulty */
        return 0;
    }
    if (f == 0 || r->role != RAFT_LEADER || r->transfer_to != 0) {
        return 0;
    }
    if (raft__transfer_start(r, 0, out) != 0) {
        raft__become_follower(r, r->term, 0, out);
        reset_election_timer(r);
    }
    return 0;
}

/* Rule 4, the operator override: never on its own, only this input. A
 * faulty record at or below keep must be repaired first (the source of the
 * survey is intact up to its extent), and nothing known committed or in the
 * snapshot is dropped. Refused with KEEL_EINVAL otherwise. */
static int recover(struct raft *r, const struct raft_in *in,
                   struct raft_out *out)
{
    raft_index keep = in->recover.keep;
    ASSERT(in->type == RAFT_IN_RECOVER);
    ASSERT(r->last_index >= r->snap_index);
    if (in->recover.term <= r->term || keep < r->snap_index ||
        keep < r->commit || (r->faulty != 0 && r->faulty <= keep)) {
        return KEEL_EINVAL;
    }
    raft__become_follower(r, in->recover.term, 0, out);
    if (keep < r->last_index) {
        raft__log_truncate(r, keep + 1);
        out->truncate_from = keep + 1;
    }
    if (r->amnesiac) {
        r->amnesiac = false;
        r->amnesia_target = 0;
        r->amnesia_dirty = true;
    }
    r->fetch_sent = false;
    r->fetch_held = false;
    r->discard_index = 0;
    r->recover_wait = in->recover.source == 0;
    r->recover_wait_dirty = true;
    reset_election_timer(r);
    return 0;
}

static uint64_t next_timeout(const struct raft *r)
{
    ASSERT(r->role >= RAFT_FOLLOWER);
    if (r->role != RAFT_LEADER) {
        return r->election_deadline_ms;
    }
    if (r->n_progress == 0) {
        /* A leader alone in its configuration has nobody to send a
         * heartbeat to or to count for its quorum (its reads confirm at
         * once): it wakes rarely, so a node's thousands of R1 streams cost
         * no CPU while idle. Every step recomputes this, so a server added
         * to the configuration gets heartbeats at once. */
        return r->now_ms + RAFT_LONE_LEADER_TICK_MS;
    }
    uint64_t t = r->heartbeat_deadline_ms;
    if (r->quorum_deadline_ms < t) {
        t = r->quorum_deadline_ms;
    }
    if (r->transfer_to != 0 && r->transfer_deadline_ms < t) {
        t = r->transfer_deadline_ms;
    }
    return t;
}

/* Rule 3 exit: every index from the snapshot through the target is
 * persisted and matches the leader. Reports any change for LMDB. */
static void amnesia_output(struct raft *r, struct raft_out *out)
{
    ASSERT(r->persisted <= r->last_index);
    if (r->amnesiac && r->amnesia_target != 0 && r->role == RAFT_FOLLOWER &&
        raft__follower_match(r) >= r->amnesia_target) {
        r->amnesiac = false;
        r->amnesia_dirty = true;
    }
    out->amnesia_changed = r->amnesia_dirty;
    r->amnesia_dirty = false;
    out->recover_wait_changed = r->recover_wait_dirty;
    out->recover_wait_term = r->recover_wait ? r->term : 0;
    r->recover_wait_dirty = false;
    out->amnesiac = r->amnesiac;
    out->amnesia_t0 = r->amnesia_t0;
    out->amnesia_target = r->amnesia_target;
    ASSERT(!out->amnesiac || out->amnesia_t0 > 0);
}

/* Was this node the only voter in every configuration its log and
 * snapshot name? Then no other node could ever have led or voted here. */
static bool sole_voter_ever(const struct raft *r)
{
    if (r->snap_config.n > 0 &&
        (raft__config_n_voters(&r->snap_config) != 1 ||
         !raft__config_is_voter(r, &r->snap_config, r->id, r->incarnation))) {
        return false;
    }
    ASSERT(r->n_configs <= RAFT_CONFIGS_MAX);
    for (uint32_t k = 0; k < r->n_configs; k++) {
        const struct raft_config *c = &r->configs[k].config;
        if (raft__config_n_voters(c) != 1 ||
            !raft__config_is_voter(r, c, r->id, r->incarnation)) {
            return false;
        }
    }
    return r->n_configs > 0 || r->snap_config.n > 0;
}

/* A group of one (docs/design.md §4.7 R5, decision 0016): when this node has
 * been the only voter of every configuration, everything it persisted was
 * durable on a majority when persisted, so it is committed, leader or not.
 * That lets a faulty group of one, which must not lead and has nobody to
 * repair from, still apply (and serve) the intact records before its first
 * fault instead of nothing. An amnesiac one keeps waiting: rule 4 (only the
 * operator's recover ends it). */
static void sole_voter_commit(struct raft *r)
{
    if (r->amnesiac || r->role == RAFT_LEADER || r->persisted <= r->commit ||
        !sole_voter_ever(r)) {
        return;
    }
    r->commit = r->persisted;
}

/* Dispatch one input. A switch over input types: longer than 70 lines would
 * be only because of the cases, each of which calls one handler. */
int raft_step(struct raft *r, const struct raft_in *in, struct raft_out *out)
{
    int rv = 0;
    raft_index commit_before = r->commit;

    ASSERT(r->runs != NULL);
    ASSERT(in->now_ms >= r->now_ms);
    out->hs_changed = false;
    out->truncate_from = 0;
    out->n_entries = 0;
    out->entries_first = 0;
    out->n_msgs = 0;
    out->n_reads = 0;
    out->became_leader = false;
    out->has_snapshot = false;
    out->n_repairs = 0;
    r->now_ms = in->now_ms;

    switch (in->type) {
    case RAFT_IN_TICK:
        tick(r, out);
        break;
    case RAFT_IN_RECEIVE:
        if (in->msg->from != r->id) {
            recv_msg(r, in->msg, out);
        }
        break;
    case RAFT_IN_PROPOSE:
        rv = raft__propose(r, in, out);
        break;
    case RAFT_IN_PERSISTED:
        raft__on_persisted(r, in->persisted.index, in->persisted.term, out);
        break;
    case RAFT_IN_HARD_STATE_PERSISTED:
        break; /* the driver syncs hard state before sending: nothing waits */
    case RAFT_IN_APPLIED:
        ASSERT(in->applied <= r->commit);
        if (in->applied > r->applied) {
            r->applied = in->applied;
        }
        break;
    case RAFT_IN_SNAPSHOT_TAKEN:
        ASSERT(in->snapshot.index <= r->applied);
        ASSERT(in->snapshot.index <= r->persisted);
        raft__log_compact(r, in->snapshot.index, in->snapshot.term);
        break;
    case RAFT_IN_SNAPSHOT_INSTALLED:
        raft__snapshot_installed(r, in->snapshot.index, in->snapshot.term,
                                 in->snapshot.config, in->snapshot.faulty, out);
        break;
    case RAFT_IN_SNAPSHOT_REFUSED:
        raft__snapshot_refused(r, in->snapshot.index, in->snapshot.term, out);
        break;
    case RAFT_IN_TRANSFER:
        rv = raft__transfer_start(r, in->transfer_to, out);
        break;
    case RAFT_IN_READ_INDEX:
        rv = raft__read_index(r, in->read_id, out);
        break;
    case RAFT_IN_CHANGE:
        rv = raft__change_membership(r, in, out);
        break;
    case RAFT_IN_FAULTY:
        rv = faulty_report(r, in, out);
        break;
    case RAFT_IN_RECOVER:
        rv = recover(r, in, out);
        break;
    default:
        rv = KEEL_EINVAL;
        break;
    }
    if (r->hs_dirty) {
        r->hs_dirty = false;
        out->hs_changed = true;
    }
    amnesia_output(r, out);
    sole_voter_commit(r);
    if (r->commit > commit_before) {
        raft__log_configs_committed(r);
    }
    out->term = r->term;
    out->vote = r->vote;
    out->commit = r->commit;
    if (r->faulty != 0 && out->commit >= r->faulty) {
        out->commit = r->faulty - 1; /* rule 1: apply stops at the fault */
    }
    out->role = r->role;
    out->leader = r->leader;
    out->timeout_ms = next_timeout(r);
    ASSERT(r->commit >= commit_before);
    ASSERT(r->persisted <= r->last_index);
    return rv;
}
