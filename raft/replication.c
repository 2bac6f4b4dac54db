/* Log replication (Raft §5.3), commitment (§5.4.2), the durability contract
 * of docs/design.md §3, and read-index (thesis §6.4, without leases). */
#include <string.h>

#include "internal.h"
#include "keel/assert.h"
#include "keel/error.h"

_Static_assert(RAFT_OUT_READS_MAX >= RAFT_READS_MAX,
               "failing every pending read must fit one step's output");

/* What a follower may claim to hold: the last index known to match the
 * leader, never above the accepted persisted index. Issue 5 caps this at the
 * first faulty index - 1 as well; keep every response going through here. */
raft_index raft__follower_match(const struct raft *r)
{
    ASSERT(r->persisted <= r->last_index);
    ASSERT(r->leader_match <= r->last_index);
    raft_index m =
        r->leader_match < r->persisted ? r->leader_match : r->persisted;
    if (r->faulty != 0 && m >= r->faulty &&
        !MUTATED(r, RAFT_MUT_FAULTY_MATCH_ABOVE)) {
        m = r->faulty - 1; /* rule 1: never counted as holding it */
    }
    return m;
}

void raft__ack_leader(struct raft *r, uint8_t type, struct raft_out *out)
{
    ASSERT(type == RAFT_MSG_APPEND_RESP || type == RAFT_MSG_SNAPSHOT_RESP);
    if (r->role != RAFT_FOLLOWER || r->leader == 0) {
        return;
    }
    struct raft_msg *resp = raft__out_msg(out, type, r, r->leader, 0);
    if (resp == NULL) {
        return;
    }
    if (type == RAFT_MSG_APPEND_RESP) {
        /* Also the answer to the AppendEntries recv_append left for it:
         * what it received (last) and the read round it heard (ctx). */
        resp->append_resp.success = 1;
        resp->append_resp.match = raft__follower_match(r);
        resp->append_resp.last = r->leader_match;
        resp->append_resp.ctx = r->leader_ctx;
        r->ack_sent_ms = r->now_ms;
        r->acks_owed = 0;
    } else {
        resp->snapshot_resp.success = 1;
        resp->snapshot_resp.match = raft__follower_match(r);
    }
}

static void inflight_push(struct raft_inflight *f, raft_index last)
{
    ASSERT(f->n < RAFT_INFLIGHT_MAX);
    ASSERT(f->head < RAFT_INFLIGHT_MAX);
    f->last[(f->head + f->n) % RAFT_INFLIGHT_MAX] = last;
    f->n++;
}

static void inflight_free_to(struct raft_inflight *f, raft_index last)
{
    uint32_t i = 0;
    ASSERT(f->n <= RAFT_INFLIGHT_MAX);
    while (f->n > 0 && f->last[f->head] <= last) {
        ASSERT(i++ < RAFT_INFLIGHT_MAX);
        f->head = (f->head + 1) % RAFT_INFLIGHT_MAX;
        f->n--;
    }
}

static void progress_probe(struct raft_progress *p, raft_index next)
{
    ASSERT(next > 0);
    p->probe = true;
    p->probe_sent = false;
    p->next = next;
    p->inflight.n = 0;
    p->inflight.head = 0;
    ASSERT(p->inflight.n == 0);
}

/* Send one AppendEntries to p: entries from p->next (a range: the driver fills
 * payloads), or an empty one at p->match when it is a heartbeat that cannot
 * carry more. Pipelined while replicating, one at a time while probing. */
void raft__send_append(struct raft *r, struct raft_progress *p, bool heartbeat,
                       struct raft_out *out)
{
    ASSERT(r->role == RAFT_LEADER);
    ASSERT(p->next > 0);
    bool full = p->probe ? p->probe_sent : p->inflight.n == RAFT_INFLIGHT_MAX;
    if (full && !heartbeat) {
        return;
    }
    raft_index prev = p->next - 1;
    raft_index n = 0;
    if (!full || p->probe) {
        if (prev > r->last_index) {
            prev = r->last_index;
        }
        n = r->last_index - prev;
        if (n > r->append_entries_max) {
            n = r->append_entries_max;
        }
        if (r->faulty != 0 && prev + n >= r->faulty) {
            /* Never serve a damaged record (docs/design.md §4.7 R5). */
            n = prev < r->faulty ? r->faulty - 1 - prev : 0;
        }
    } else {
        prev = p->match; /* a heartbeat while the pipeline is full */
    }
    if (n == 0 && !heartbeat && !p->probe) {
        return; /* nothing new: the next heartbeat carries the commit */
    }
    if (prev < r->snap_index) {
        /* The entries it needs are compacted: InstallSnapshot. */
        raft__send_snapshot(r, p, heartbeat, out);
        return;
    }
    struct raft_msg *m =
        raft__out_msg(out, RAFT_MSG_APPEND, r, p->node, p->incarnation);
    if (m == NULL) {
        return;
    }
    m->append.prev_index = prev;
    m->append.prev_term = raft_term_at(r, prev);
    m->append.commit = r->commit;
    m->append.leader_last = r->last_index;
    m->append.ctx = r->read_round;
    m->append.n_entries = (uint32_t)n;
    m->append.entries = NULL;
    if (p->probe) {
        p->probe_sent = true;
    } else if (!full && n > 0) {
        p->next = prev + n + 1;
        inflight_push(&p->inflight, prev + n);
    }
}

void raft__broadcast_append(struct raft *r, bool heartbeat,
                            struct raft_out *out)
{
    ASSERT(r->role == RAFT_LEADER);
    ASSERT(r->n_progress <= RAFT_SERVERS_MAX);
    for (uint32_t i = 0; i < r->n_progress; i++) {
        struct raft_progress *p = &r->progress[i];
        if (heartbeat && !p->probe && p->inflight.n > 0 &&
            p->acked == p->acked_at_heartbeat) {
            /* Nothing received over a heartbeat interval: messages were
             * lost. Resume after what the follower last acknowledged
             * receiving (a slow disk delays match, not this). */
            raft_index from = p->acked > p->match ? p->acked : p->match;
            progress_probe(p, from + 1);
        }
        if (heartbeat) {
            p->acked_at_heartbeat = p->acked;
        }
        raft__send_append(r, p, heartbeat, out);
    }
}

/* Append entries of the current term to the leader's log and start
 * replicating them. */
int raft__leader_append(struct raft *r, const struct raft_entry *e, uint32_t n,
                        struct raft_out *out)
{
    int rv = 0;
    ASSERT(r->role == RAFT_LEADER);
    ASSERT(out->n_entries == 0);
    ASSERT(n <= RAFT_OUT_ENTRIES_MAX);
    out->entries_first = r->last_index + 1;
    for (uint32_t i = 0; i < n; i++) {
        struct raft_entry copy = e[i];
        copy.term = r->term;
        rv = raft__log_append(r, r->last_index + 1, &copy);
        if (rv != 0) {
            break;
        }
        out->entries[out->n_entries++] = copy;
    }
    for (uint32_t i = 0; i < r->n_progress; i++) {
        raft__send_append(r, &r->progress[i], false, out);
    }
    raft__maybe_commit(r, out);
    return rv;
}

int raft__propose(struct raft *r, const struct raft_in *in,
                  struct raft_out *out)
{
    ASSERT(in->type == RAFT_IN_PROPOSE);
    ASSERT(in->propose.n == 0 || in->propose.entries != NULL);
    if (r->role != RAFT_LEADER) {
        return KEEL_ENOTLEADER;
    }
    if (r->transfer_to != 0 || r->faulty != 0) {
        return KEEL_EBUSY; /* rule 1: a faulty leader stops proposing */
    }
    if (in->propose.n == 0 || in->propose.n > RAFT_PROPOSE_ENTRIES_MAX) {
        return KEEL_EINVAL;
    }
    for (uint32_t i = 0; i < in->propose.n; i++) {
        if (in->propose.entries[i].type != RAFT_ENTRY_NORMAL) {
            return KEEL_EINVAL; /* configurations go through RAFT_IN_CHANGE */
        }
    }
    return raft__leader_append(r, in->propose.entries, in->propose.n, out);
}

static void reads_check(struct raft *r, struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    uint32_t voters = raft__config_n_voters(c);
    ASSERT(r->role == RAFT_LEADER);
    while (r->n_reads > 0) {
        struct raft_pending_read *rd = &r->reads[0];
        uint32_t acks = 1;
        for (uint32_t i = 0; i < r->n_progress; i++) {
            struct raft_progress *p = &r->progress[i];
            if (p->read_round >= rd->round &&
                raft__config_is_voter(r, c, p->node, p->incarnation)) {
                acks++;
            }
        }
        if (acks * 2 <= voters) {
            return;
        }
        ASSERT(out->n_reads < RAFT_OUT_READS_MAX);
        out->reads[out->n_reads++] =
            (struct raft_read){.id = rd->id, .status = 0, .index = rd->index};
        memmove(&r->reads[0], &r->reads[1],
                (r->n_reads - 1) * sizeof r->reads[0]);
        r->n_reads--;
    }
}

void raft__reads_fail(struct raft *r, int status, struct raft_out *out)
{
    ASSERT(status != 0);
    ASSERT(r->n_reads <= RAFT_READS_MAX);
    for (uint32_t i = 0; i < r->n_reads && out->n_reads < RAFT_OUT_READS_MAX;
         i++) {
        out->reads[out->n_reads++] = (struct raft_read){
            .id = r->reads[i].id, .status = status, .index = 0};
    }
    r->n_reads = 0;
}

/* Read-index (docs/design.md §3): only after an entry of this term committed;
 * record commit, confirm leadership with a heartbeat round of this term, and
 * let the driver serve the read once applied >= the recorded index. */
int raft__read_index(struct raft *r, uint64_t id, struct raft_out *out)
{
    ASSERT(r->n_reads <= RAFT_READS_MAX);
    if (r->role != RAFT_LEADER) {
        return KEEL_ENOTLEADER;
    }
    ASSERT(r->term_start > 0);
    if (r->commit < r->term_start) {
        return KEEL_EAGAIN;
    }
    if (r->n_reads == RAFT_READS_MAX) {
        return KEEL_ELIMIT;
    }
    r->read_round++;
    r->reads[r->n_reads++] = (struct raft_pending_read){
        .id = id, .index = r->commit, .round = r->read_round};
    raft__broadcast_append(r, true, out);
    reads_check(r, out);
    return 0;
}

/* Leader: the highest index persisted on a majority of voters whose entry has
 * the current term (Raft §5.4.2, Figure 8). The leader counts itself only up
 * to its accepted persisted index. */
void raft__maybe_commit(struct raft *r, struct raft_out *out)
{
    const struct raft_config *c = raft_config_current(r);
    raft_index m[RAFT_SERVERS_MAX];
    uint32_t n = 0;

    (void)out;
    ASSERT(r->role == RAFT_LEADER);
    if (raft__config_is_voter(r, c, r->id, r->incarnation)) {
        raft_index self = MUTATED(r, RAFT_MUT_LEADER_COUNTS_UNSYNCED)
                              ? r->last_index
                              : r->persisted;
        if (r->faulty != 0 && self >= r->faulty &&
            !MUTATED(r, RAFT_MUT_FAULTY_LEADER_COUNTS)) {
            self = r->faulty - 1; /* rule 1: only below its own fault */
        }
        m[n++] = self;
    }
    for (uint32_t i = 0; i < r->n_progress; i++) {
        struct raft_progress *p = &r->progress[i];
        if (raft__config_is_voter(r, c, p->node, p->incarnation)) {
            m[n++] = p->match;
        }
    }
    ASSERT(n <= RAFT_SERVERS_MAX);
    if (n == 0) {
        return;
    }
    /* Insertion sort, descending: n is at most RAFT_SERVERS_MAX. */
    for (uint32_t i = 1; i < n; i++) {
        for (uint32_t j = i; j > 0 && m[j] > m[j - 1]; j--) {
            raft_index t = m[j];
            m[j] = m[j - 1];
            m[j - 1] = t;
        }
    }
    raft_index candidate = m[raft__config_n_voters(c) / 2];
    if (candidate <= r->commit || candidate > r->last_index) {
        return;
    }
    if (raft_term_at(r, candidate) != r->term &&
        !MUTATED(r, RAFT_MUT_COMMIT_PREV_TERM)) {
        return;
    }
    r->commit = candidate;
}

static void reply_append(struct raft *r, const struct raft_msg *m, bool success,
                         raft_index last, raft_index hint, struct raft_out *out)
{
    struct raft_msg *resp = raft__out_msg(out, RAFT_MSG_APPEND_RESP, r, m->from,
                                          m->from_incarnation);
    ASSERT(m->type == RAFT_MSG_APPEND);
    ASSERT(hint <= r->last_index);
    if (resp == NULL) {
        return;
    }
    resp->append_resp.success = success;
    resp->append_resp.match = raft__follower_match(r);
    resp->append_resp.last = last;
    resp->append_resp.hint = hint;
    resp->append_resp.hint_term = raft_term_at(r, hint);
    resp->append_resp.ctx = m->append.ctx;
    r->ack_sent_ms = r->now_ms;
    r->acks_owed = 0;
}

/* The next index whose leader copy the driver still needs (finding F12):
 * faulty itself, or past the copies already handed for this fault. */
static raft_index repair_want(const struct raft *r)
{
    ASSERT(r->faulty != 0);
    return r->repair_fault == r->faulty && r->repair_next > r->faulty
               ? r->repair_next
               : r->faulty;
}

/* The last index a fault can reach: the extent (the loaded log's end, or
 * the log's end when a read found the damage), never past the log. */
static raft_index repair_bound(const struct raft *r)
{
    ASSERT(r->faulty != 0);
    return r->extent_index >= r->faulty && r->extent_index < r->last_index
               ? r->extent_index
               : r->last_index;
}

/* Hand the leader's copy of index (our term) to the driver when it is the
 * next one a repair needs: a damaged run is verified as a whole, so every
 * index from the fault through the run's end is needed, in order. */
static void repair_offer(struct raft *r, raft_index index,
                         const struct raft_entry *e, struct raft_out *out)
{
    if (r->faulty == 0 || index != repair_want(r) || index > repair_bound(r) ||
        out->n_repairs >= RAFT_OUT_REPAIRS_MAX) {
        return;
    }
    out->repairs[out->n_repairs++] =
        (struct raft_repair){.index = index, .entry = *e};
    r->repair_fault = r->faulty;
    r->repair_next = index + 1;
}

/* Store the new part of an accepted AppendEntries: skip what matches,
 * truncate at the first conflict, append the rest. Returns the last index
 * now known to match the leader. */
static raft_index append_entries(struct raft *r, raft_index prev,
                                 const struct raft_entry *e, uint32_t n,
                                 struct raft_out *out)
{
    uint32_t i = 0;
    ASSERT(prev <= r->last_index);
    ASSERT(n <= RAFT_APPEND_ENTRIES_MAX);
    while (i < n && prev + 1 + i <= r->last_index &&
           raft_term_at(r, prev + 1 + i) == e[i].term) {
        /* Repair: the leader's copy of a damaged record, for the store
         * to verify (with the rest of its run) and write in place. */
        repair_offer(r, prev + 1 + i, &e[i], out);
        i++;
    }
    if (i == n) {
        return prev + n;
    }
    raft_index at = prev + 1 + i;
    if (at <= r->last_index) {
        if (at <= r->commit) {
            return prev + i; /* a leader never conflicts with our commit */
        }
        raft__log_truncate(r, at);
        out->truncate_from = at;
    }
    out->entries_first = at;
    for (; i < n; i++) {
        if (e[i].term == 0 || e[i].term > r->term ||
            raft__log_append(r, prev + 1 + i, &e[i]) != 0) {
            break; /* malformed or over a bound: keep what fits */
        }
        out->entries[out->n_entries++] = e[i];
    }
    ASSERT(r->last_index >= prev + i);
    return prev + i;
}

void raft__recv_append(struct raft *r, const struct raft_msg *m,
                       struct raft_out *out)
{
    const struct raft_msg_append *a = &m->append;
    raft_index prev = a->prev_index;
    const struct raft_entry *e = a->entries;
    uint32_t n = a->n_entries;

    ASSERT(r->role == RAFT_FOLLOWER);
    ASSERT(m->term == r->term);
    if (n > RAFT_APPEND_ENTRIES_MAX || (n > 0 && e == NULL)) {
        return; /* malformed: the codec rejects this before us */
    }
    bool new_round = a->ctx > r->leader_ctx;
    if (new_round) {
        r->leader_ctx = a->ctx;
    }
    if (prev < r->snap_index) {
        /* Entries up to our snapshot are committed: skip them. */
        raft_index skip = r->snap_index - prev;
        if (skip >= n) {
            reply_append(r, m, true, 0, r->last_index, out);
            return;
        }
        e += skip;
        n -= (uint32_t)skip;
        prev = r->snap_index;
    } else if (prev > r->last_index) {
        reply_append(r, m, false, 0, r->last_index, out);
        return;
    } else if (raft_term_at(r, prev) != a->prev_term) {
        /* Fast backtracking: the last index whose term could match. */
        raft_index hint = raft__log_find_le_term(r, prev - 1, a->prev_term);
        reply_append(r, m, false, 0, hint, out);
        return;
    }
    raft_index matched = append_entries(r, prev, e, n, out);
    if (matched > r->leader_match) {
        r->leader_match = matched;
    }
    raft_index c = a->commit < r->leader_match ? a->commit : r->leader_match;
    if (c > r->commit) {
        r->commit = c;
    }
    if (r->faulty != 0 && out->n_repairs == 0 && prev >= repair_want(r) &&
        repair_want(r) <= repair_bound(r)) {
        /* Faulty and this append skipped the next index the repair needs:
         * reject with a hint below it so the leader resends from there. */
        reply_append(r, m, false, 0, repair_want(r) - 1, out);
        return;
    }
    if (out->n_entries > 0 && !new_round &&
        a->prev_index + a->n_entries >= a->leader_last &&
        r->acks_owed < RAFT_INFLIGHT_MAX / 2 &&
        r->now_ms < r->ack_sent_ms + r->heartbeat_ms / 2) {
        /* The ack after these entries persist answers this message too
         * (raft__ack_leader): one response per sync, not one per
         * AppendEntries and another per sync. Only the leader's tail: a
         * catch-up (or probe) far behind is answered at once, and so is a
         * new read round, every (RAFT_INFLIGHT_MAX / 2 + 1)th
         * message and any half a heartbeat after the last response, so a
         * slow disk neither fills the leader's window nor trips its stall
         * detection (acked). */
        r->acks_owed++;
        return;
    }
    reply_append(r, m, true, r->leader_match, r->last_index, out);
}

void raft__recv_append_resp(struct raft *r, const struct raft_msg *m,
                            struct raft_out *out)
{
    const struct raft_msg_append_resp *a = &m->append_resp;
    struct raft_progress *p = raft__progress_heard(r, m);

    if (p == NULL) {
        return; /* rule 1: an incarnation the configuration does not name */
    }
    if (a->ctx > p->read_round && a->ctx <= r->read_round) {
        p->read_round = a->ctx;
        reads_check(r, out);
    }
    if (!a->success) {
        raft_index hint = a->hint < r->last_index ? a->hint : r->last_index;
        progress_probe(p, raft__log_find_le_term(r, hint, a->hint_term) + 1);
        raft__send_append(r, p, false, out);
        return;
    }
    /* The latest value reported in this term, even if lower (docs/design.md
     * §3). */
    p->match = a->match <= r->last_index ? a->match : r->last_index;
    if (p->snap_index != 0) {
        if (p->match >= p->snap_index) {
            raft__snapshot_done(r, p, out);
        }
        return;
    }
    if (a->last > 0 && a->last <= r->last_index) {
        if (a->last > p->acked) {
            p->acked = a->last;
        }
        inflight_free_to(&p->inflight, a->last);
        if (p->probe) {
            progress_probe(p, a->last + 1);
            p->probe = false;
        }
    }
    if (p->next <= p->match) {
        p->next = p->match + 1;
    }
    raft__maybe_commit(r, out);
    raft__transfer_check(r, p, out);
    raft__send_append(r, p, false, out);
}

/* A sync completed covering (index, term). Accepted only if the log still
 * holds that term there (docs/design.md §3): a sync that raced a conflict
 * truncation says nothing about the new entries. */
void raft__on_persisted(struct raft *r, raft_index index, raft_term term,
                        struct raft_out *out)
{
    ASSERT(r->persisted <= r->last_index);
    if (MUTATED(r, RAFT_MUT_PERSISTED_BY_INDEX)) {
        if (index > r->last_index) {
            index = r->last_index;
        }
    } else if (index > r->last_index || raft_term_at(r, index) != term) {
        return;
    }
    if (index <= r->persisted || index < r->snap_index) {
        return;
    }
    r->persisted = index;
    if (r->role == RAFT_LEADER) {
        raft__maybe_commit(r, out);
        return;
    }
    /* Answer as soon as the persisted index advances. */
    raft__ack_leader(r, RAFT_MSG_APPEND_RESP, out);
    ASSERT(r->persisted <= r->last_index);
}
