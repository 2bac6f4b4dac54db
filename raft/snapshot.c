/* InstallSnapshot (docs/design.md §5, Raft §7): the leader streams the snapshot
 * at its snapshot index X, with its retained log through X, in chunks the
 * driver fills; the follower reports persisted(X) only once the install is
 * durable, and never discards a local entry that matches the leader's. */
#include <string.h>

#include "internal.h"
#include "keel/assert.h"
#include "keel/error.h"

/* Leader: send p the next chunk of the snapshot at r->snap_index (the driver
 * fills chunk, len, done and log_first). One chunk in flight per follower;
 * a heartbeat resends it. */
void raft__send_snapshot(struct raft *r, struct raft_progress *p,
                         bool heartbeat, struct raft_out *out)
{
    ASSERT(r->role == RAFT_LEADER);
    ASSERT(r->snap_index > 0);
    if (p->snap_index != r->snap_index) {
        p->snap_index = r->snap_index;
        p->snap_offset = 0;
        p->snap_sent = false;
        p->snap_heard = false;
    }
    if (p->snap_sent) {
        /* A heartbeat sends the chunk again only when no answer came
         * since the last one: answers already pace the transfer, and a
         * copy per heartbeat while the follower is slow piled up in the
         * link to it (finding F25). */
        bool resend = heartbeat && !p->snap_heard;
        if (heartbeat) {
            p->snap_heard = false;
        }
        if (!resend) {
            return;
        }
    }
    struct raft_msg *m =
        raft__out_msg(out, RAFT_MSG_SNAPSHOT, r, p->node, p->incarnation);
    if (m == NULL) {
        return;
    }
    m->snapshot.index = r->snap_index;
    m->snapshot.term = r->snap_term;
    m->snapshot.leader_last = r->last_index;
    m->snapshot.offset = p->snap_offset;
    m->snapshot.config = r->snap_config;
    p->snap_sent = true;
    ASSERT(m->snapshot.term > 0);
}

static void reply(struct raft *r, const struct raft_msg *m, uint8_t success,
                  struct raft_out *out)
{
    struct raft_msg *resp = raft__out_msg(out, RAFT_MSG_SNAPSHOT_RESP, r,
                                          m->from, m->from_incarnation);
    ASSERT(r->role == RAFT_FOLLOWER);
    if (resp == NULL) {
        return;
    }
    resp->snapshot_resp.success = success;
    resp->snapshot_resp.offset = r->recv_offset;
    resp->snapshot_resp.match = raft__follower_match(r);
}

/* Follower, faulty at or below the leader's snapshot: ask the leader for
 * its copy of the first faulty index (FETCH; its driver answers from its
 * store, whose retained log outlives the core's compaction). The leader's
 * core holds neither that entry nor its term, so it never sends it by
 * AppendEntries; the transfer it sends instead is refused by a follower
 * holding a snapshot of its own at or above it (snap_recv_open), and a
 * follower damaged below its snapshot stayed faulty for good, refusing
 * one transfer after another (issue 21: 28,016 refusals in the seed-202
 * fault run). The answer is a repair like any FETCH answer: verified by
 * the store's chain before it is written (docs/design.md §4.7 R1). Asked
 * at each start of a transfer (offset 0); like the leaderless FETCH it
 * heals a damaged run of one record only. */
static void fetch_from_leader(struct raft *r, const struct raft_msg *m,
                              struct raft_out *out)
{
    ASSERT(r->faulty > r->snap_index);
    ASSERT(r->role == RAFT_FOLLOWER);
    struct raft_msg *q =
        raft__out_msg(out, RAFT_MSG_FETCH, r, m->from, m->from_incarnation);
    if (q != NULL) {
        q->discard.index = r->faulty;
    }
}

/* Follower: one chunk. Chunks must arrive in order; anything else is
 * answered with the offset we expect. */
void raft__recv_snapshot(struct raft *r, const struct raft_msg *m,
                         struct raft_out *out)
{
    const struct raft_msg_snapshot *s = &m->snapshot;
    ASSERT(r->role == RAFT_FOLLOWER);
    ASSERT(m->term == r->term);
    bool covers_fault = r->faulty != 0 && r->faulty <= s->index;
    if (covers_fault && s->offset == 0) {
        fetch_from_leader(r, m, out);
    }
    if ((s->index <= r->commit || s->index <= r->snap_index) && !covers_fault) {
        /* Committed entries match every later leader's log. */
        raft_index c = r->commit < r->last_index ? r->commit : r->last_index;
        if (c > r->leader_match) {
            r->leader_match = c;
        }
        reply(r, m, 1, out);
        return;
    }
    if (!covers_fault && s->index <= r->last_index &&
        raft_term_at(r, s->index) == s->term) {
        /* Our entry at the snapshot's index has its term: by log matching
         * we hold everything it covers (Raft §7: keep the log after it).
         * A follower that made an install durable and restarted before
         * the leader heard of it holds that log from index 1 with no
         * compacted core; taking the transfer again would be refused by
         * the snapshot it holds, and the leader would start over for
         * ever (finding F18). Answer with the match instead. */
        if (s->index > r->leader_match) {
            r->leader_match = s->index;
        }
        reply(r, m, 1, out);
        return;
    }
    if (r->recv_done) {
        return; /* an install is under way; it answers when durable */
    }
    if (s->index != r->recv_snap_index || s->term != r->recv_snap_term) {
        if (s->offset != 0) {
            r->recv_offset = 0;
            reply(r, m, 0, out);
            return;
        }
        r->recv_snap_index = s->index;
        r->recv_snap_term = s->term;
        r->recv_offset = 0;
        r->recv_done = false;
    }
    if (s->offset != r->recv_offset) {
        reply(r, m, 1, out);
        return;
    }
    out->has_snapshot = true;
    out->snapshot = *s;
    r->recv_offset += s->len;
    if (s->done) {
        r->recv_done = true;
        return;
    }
    reply(r, m, 1, out);
}

void raft_snapshot_abort(struct raft *r)
{
    ASSERT(r != NULL);
    r->recv_snap_index = 0;
    r->recv_snap_term = 0;
    r->recv_offset = 0;
    r->recv_done = false;
}

/* Follower: the driver refused the content of the complete transfer of
 * (index, term). Without an answer the leader, which heard nothing since
 * the last chunk, sent the same spool again at its next heartbeat: a
 * transfer wrong as the leader made it (a spool damaged on its disk) was
 * refused until the follower stopped (issue 21, finding F29). A failure
 * at offset 0 makes the leader's driver spool the snapshot afresh
 * (replica_install.c) and its core restart the transfer at 0. The match
 * is the usual one (raft__follower_match): the refusal claims nothing. */
void raft__snapshot_refused(struct raft *r, raft_index index, raft_term term,
                            struct raft_out *out)
{
    if (r->recv_snap_index != 0 &&
        (r->recv_snap_index != index || r->recv_snap_term != term)) {
        return; /* another transfer began since: it is not refused */
    }
    raft_snapshot_abort(r);
    if (r->role != RAFT_FOLLOWER || r->leader == 0) {
        return;
    }
    struct raft_msg *resp =
        raft__out_msg(out, RAFT_MSG_SNAPSHOT_RESP, r, r->leader, 0);
    if (resp == NULL) {
        return;
    }
    resp->snapshot_resp.success = 0;
    resp->snapshot_resp.offset = 0;
    resp->snapshot_resp.match = raft__follower_match(r);
}

/* Follower: the driver made the snapshot, the retained log and their LMDB
 * records durable. Keep our entries after X if ours at X matches. */
void raft__snapshot_installed(struct raft *r, raft_index index, raft_term term,
                              const struct raft_config *config,
                              raft_index faulty, struct raft_out *out)
{
    ASSERT(term > 0);
    ASSERT(config != NULL);
    r->recv_snap_index = 0;
    r->recv_snap_term = 0;
    r->recv_offset = 0;
    r->recv_done = false;
    if (index <= r->snap_index) {
        return;
    }
    if (r->faulty != 0 && r->faulty <= index) {
        /* Discard rule (b): the installed snapshot covers the damage; the
         * driver names any fault it still finds after index (a later
         * record of the kept log may be damaged too). */
        r->faulty = faulty > index && faulty <= r->last_index ? faulty : 0;
    }
    if (index <= r->last_index && raft_term_at(r, index) == term) {
        raft__log_compact(r, index, term);
    } else {
        ASSERT(r->commit < index);
        r->faulty = 0; /* the whole log is replaced */
        r->n_runs = 0;
        r->n_configs = 0;
        r->last_index = index;
        r->persisted = index; /* the install is durable */
        r->leader_match = r->leader_match < index ? r->leader_match : index;
        r->snap_index = index;
        r->snap_term = term;
    }
    r->snap_config = *config;
    r->snap_config_index = index;
    raft__progress_rebuild(r);
    if (r->commit < index) {
        r->commit = index;
    }
    if (r->applied < index) {
        r->applied = index;
    }
    if (r->persisted < index) {
        r->persisted = index;
    }
    if (r->leader_match < index) {
        r->leader_match = index;
    }
    raft__ack_leader(r, RAFT_MSG_SNAPSHOT_RESP, out);
    ASSERT(r->last_index >= r->snap_index);
}

/* Leader: a follower's answer to a chunk or to the install. */
void raft__recv_snapshot_resp(struct raft *r, const struct raft_msg *m,
                              struct raft_out *out)
{
    const struct raft_msg_snapshot_resp *a = &m->snapshot_resp;
    struct raft_progress *p = raft__progress_heard(r, m);
    if (p == NULL) {
        return; /* rule 1 */
    }
    p->match = a->match <= r->last_index ? a->match : r->last_index;
    if (p->snap_index == 0) {
        return;
    }
    if (p->match >= p->snap_index) {
        raft__snapshot_done(r, p, out);
        return;
    }
    uint64_t offset = a->success ? a->offset : 0;
    p->snap_heard = true;
    if (p->snap_sent && offset == p->snap_offset) {
        /* The answer to a copy of the chunk before (a heartbeat's): the
         * chunk at this offset is out already. Sending it again for each
         * such answer kept one more copy in flight per heartbeat, for the
         * whole transfer (finding F25). */
        return;
    }
    p->snap_offset = offset;
    p->snap_sent = false;
    raft__send_snapshot(r, p, false, out);
}

/* The follower holds everything through the snapshot: replicate again. */
void raft__snapshot_done(struct raft *r, struct raft_progress *p,
                         struct raft_out *out)
{
    ASSERT(p->snap_index != 0);
    ASSERT(p->match >= p->snap_index);
    p->snap_index = 0;
    p->snap_sent = false;
    p->probe = true;
    p->probe_sent = false;
    p->next = p->match + 1;
    p->inflight.n = 0;
    raft__maybe_commit(r, out);
    raft__send_append(r, p, false, out);
}
