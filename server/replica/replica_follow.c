/* replica_follow: what a follower knows of its leader's commit, for reads
 * a follower answers itself (DIRECT.GET with allow_direct,
 * docs/decisions/0036-followers-answer-direct-gets-while-current.md). */
#include "replica.h"
#include "replica_int.h"

void replica__follow_note(struct replica *r, const struct raft_msg *m)
{
    ASSERT(r != NULL && m != NULL);
    /* Only an AppendEntries the core took from the leader it follows in
     * this term: a stale or rejected sender says nothing of the commit. */
    if (m->type != RAFT_MSG_APPEND || r->raft.role != RAFT_FOLLOWER ||
        r->raft.leader != m->from || m->term != r->raft.term) {
        return;
    }
    r->leader_commit = m->append.commit;
    r->leader_commit_term = m->term;
}

void replica_follow_info(const struct replica *r, struct replica_follow *out)
{
    ASSERT(r != NULL && out != NULL);
    const struct raft *rf = &r->raft;
    uint64_t now = uv_now(r->host->loop);
    bool this_term = r->leader_commit_term == rf->term;
    raft_index lc = this_term ? r->leader_commit : 0;
    *out = (struct replica_follow){
        .follower = rf->role == RAFT_FOLLOWER && rf->leader != 0,
        .intact = r->started && !r->broken && rf->faulty == 0 && !rf->amnesiac,
        .applied = r->applied,
        .leader_commit = lc,
        /* An entry at or below the applied index is in the log or the
         * snapshot, so its term is known; above it the rule fails anyway. */
        .leader_commit_own_term =
            lc > 0 && lc <= r->applied && raft_term_at(rf, lc) == rf->term,
        .contact_age_ms =
            now >= rf->leader_contact_ms ? now - rf->leader_contact_ms : 0,
        .contact_max_ms = rf->election_timeout_ms,
    };
}

bool replica_follow_current(const struct replica_follow *f)
{
    ASSERT(f != NULL);
    return f->follower && f->intact && f->leader_commit > 0 &&
           f->leader_commit_own_term && f->applied >= f->leader_commit &&
           f->contact_age_ms < f->contact_max_ms;
}
