/* The invariants of docs/design.md §3 and STYLE (Election Safety, Log Matching,
 * Leader Completeness, State Machine Safety, no committed entry lost or
 * changed, durable majority at commit, linearizable read-index). Each is
 * checked incrementally, where the step that could break it happens. */
#include <string.h>

#include "invariants.h"
#include "keel/assert.h"

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 29);
}

/* Chain hash: equal hashes at an index mean equal logs up to it. */
uint64_t inv_entry_hash(uint64_t prev, uint64_t index,
                        const struct sim_entry *e)
{
    uint64_t h = mix(prev, index);
    h = mix(h, e->term);
    h = mix(h, e->type);
    h = mix(h, e->len);
    for (uint32_t k = 0; k < e->len; k++) {
        h = mix(h, e->payload[k]);
    }
    return h | 1; /* 0 marks an empty slot */
}

/* Log Matching: the first time (index, term) is seen its leader created it;
 * every later copy must carry the same chain hash. */
void inv_created(struct sim *s, uint32_t node, uint64_t index,
                 const struct sim_entry *e)
{
    uint64_t key = mix(index, e->term);
    for (uint32_t probe = 0; probe < SIM_CREATED_MAX; probe++) {
        struct sim_created *c =
            &s->created[(key + probe) & (SIM_CREATED_MAX - 1)];
        if (c->hash == 0) {
            c->index = index;
            c->term = e->term;
            c->hash = e->hash;
            return;
        }
        if (c->index == index && c->term == e->term) {
            if (c->hash != e->hash) {
                sim_violation(s,
                              "log matching: node %u holds (%llu, t%llu) "
                              "with a different log before it",
                              node + 1, (unsigned long long)index,
                              (unsigned long long)e->term);
            }
            return;
        }
    }
    sim_violation(s, "simulator: entry table full");
}

void inv_truncate(struct sim *s, uint32_t node, uint64_t from)
{
    struct sim_node *n = &s->nodes[node];
    ASSERT(from > 0);
    if (from <= s->committed_len && from <= n->vlen &&
        n->vlog[from].hash == s->committed[from]) {
        sim_violation(s, "committed entry %llu truncated on node %u",
                      (unsigned long long)from, node + 1);
    }
}

/* Election Safety and Leader Completeness. */
void inv_leader(struct sim *s, uint32_t node)
{
    struct sim_node *n = &s->nodes[node];
    uint64_t t = n->raft.term;
    if (t < SIM_TERMS_MAX) {
        if (s->leader_of_term[t] != 0 && s->leader_of_term[t] != node + 1) {
            sim_violation(s, "two leaders in term %llu: nodes %llu and %u",
                          (unsigned long long)t,
                          (unsigned long long)s->leader_of_term[t], node + 1);
        }
        s->leader_of_term[t] = node + 1;
    }
    uint64_t g = s->committed_len;
    sim_trace(s, (int)node, "LEADER of term %llu (log %llu, committed %llu)",
              (unsigned long long)t, (unsigned long long)n->vlen,
              (unsigned long long)g);
    if (g > 0 && (n->vlen < g || n->vlog[g].hash != s->committed[g])) {
        sim_violation(s,
                      "leader completeness: node %u leads term %llu "
                      "without committed entry %llu",
                      node + 1, (unsigned long long)t, (unsigned long long)g);
    }
}

/* The recovered (after power loss) log of a node holds the entry with this
 * chain hash at index: durable, and not above the durable term. */
static bool durable_holds(const struct sim_node *n, uint64_t index,
                          uint64_t hash)
{
    return n->dlen >= index && n->dlog[index].hash == hash &&
           n->dlog[index].term <= n->hs_term;
}

/* A leader's commit means the entry survives a power loss of every node:
 * it is on the disk of a majority of the voters it counted. */
static void durable_majority(struct sim *s, uint32_t node, uint64_t c,
                             uint64_t from)
{
    struct sim_node *l = &s->nodes[node];
    const struct raft_config *cfg = raft_config_current(&l->raft);
    uint32_t voters = 0;
    uint32_t holding = 0;
    for (uint32_t k = 0; k < cfg->n; k++) {
        const struct raft_server *sv = &cfg->servers[k];
        if (sv->role != RAFT_VOTER) {
            continue;
        }
        voters++;
        if (sv->node == 0 || sv->node > s->p.n_nodes) {
            continue;
        }
        struct sim_node *f = &s->nodes[sv->node - 1];
        if (f->incarnation != sv->incarnation) {
            holding++; /* a wiped disk: a fault the model allows once */
            continue;
        }
        /* A damaged record this commit covers for the first time counts
         * only if the node was counted for it before the damage (rule 1:
         * never after). */
        uint64_t bad = sim_first_bad(f, true);
        bool newly = bad > from && bad <= c && c > f->flip_counted;
        /* An amnesiac node lost records it may have acknowledged before
         * the loss (rule 3: a fault the model allows, one at a time). */
        bool lost = f->amnesiac && c <= f->flip_counted;
        if ((durable_holds(f, c, l->vlog[c].hash) && !newly) || lost) {
            holding++;
        }
    }
    if (holding * 2 <= voters) {
        sim_violation(s,
                      "leader %u committed %llu but only %u of %u voters "
                      "hold it durably",
                      node + 1, (unsigned long long)c, holding, voters);
    }
}

struct last {
    uint64_t term;
    uint64_t index;
};

static bool last_ge(struct last a, struct last b)
{
    return a.term != b.term ? a.term > b.term : a.index >= b.index;
}

static struct last durable_last(const struct sim_node *n)
{
    struct last l = {0, 0};
    if (n->dlen > 0) {
        l.term = n->dlog[n->dlen].term;
        l.index = n->dlen;
    }
    return l;
}

/* The most up-to-date log the node could campaign with: its current log, or
 * its disk after a crash. */
static struct last best_last(const struct sim_node *n)
{
    struct last l = durable_last(n);
    struct last v = {0, 0};
    if (n->up && n->vlen > 0) {
        v.term = n->vlog[n->vlen].term;
        v.index = n->vlen;
    }
    return last_ge(v, l) ? v : l;
}

/* Could a voter lacking committed index c win an election in cfg? It would
 * need a majority whose (durable) logs are no more up to date than its own.
 * Raft's safety argument says no, for the configuration in effect and the
 * last committed one (single-server changes keep their majorities
 * overlapping). */
static void winner_in(struct sim *s, uint32_t leader, uint64_t c,
                      const struct raft_config *cfg)
{
    uint64_t h = s->nodes[leader].vlog[c].hash;
    uint32_t voters = 0;
    for (uint32_t k = 0; k < cfg->n; k++) {
        voters += cfg->servers[k].role == RAFT_VOTER;
    }
    for (uint32_t k = 0; k < cfg->n; k++) {
        const struct raft_server *x = &cfg->servers[k];
        if (x->role != RAFT_VOTER || x->node == 0 || x->node > s->p.n_nodes) {
            continue;
        }
        struct sim_node *xn = &s->nodes[x->node - 1];
        if (xn->incarnation != x->incarnation || xn->amnesiac ||
            (xn->up && xn->vlen >= c && xn->vlog[c].hash == h) ||
            durable_holds(xn, c, h)) {
            continue;
        }
        struct last xl = best_last(xn);
        uint32_t grant = 0;
        for (uint32_t j = 0; j < cfg->n; j++) {
            const struct raft_server *y = &cfg->servers[j];
            if (y->role != RAFT_VOTER || y->node == 0 ||
                y->node > s->p.n_nodes) {
                continue;
            }
            struct sim_node *yn = &s->nodes[y->node - 1];
            if (yn->incarnation == y->incarnation && !yn->amnesiac &&
                last_ge(xl, durable_last(yn))) {
                grant++;
            }
        }
        if (grant * 2 > voters) {
            sim_violation(s,
                          "leader %u committed %llu, yet node %llu lacking "
                          "it could win an election",
                          leader + 1, (unsigned long long)c,
                          (unsigned long long)x->node);
            return;
        }
    }
}

static void winner_check(struct sim *s, uint32_t leader, uint64_t c,
                         uint64_t committed_before)
{
    struct sim_node *l = &s->nodes[leader];
    uint32_t from = 0;
    for (uint32_t k = 0; k < l->n_cfg; k++) {
        if (l->cfg_idx[k] <= committed_before) {
            from = k;
        }
    }
    for (uint32_t k = from; k < l->n_cfg; k++) {
        const struct sim_entry *e = &l->vlog[l->cfg_idx[k]];
        struct raft_config cfg;
        if (raft_config_decode(e->payload, e->len, &cfg) == 0) {
            winner_in(s, leader, c, &cfg);
        }
    }
}

/* State Machine Safety and "no committed entry ever changed". */
void inv_commit(struct sim *s, uint32_t node, uint64_t commit)
{
    struct sim_node *n = &s->nodes[node];
    uint64_t committed_before = s->committed_len;
    ASSERT(commit > n->commit_seen);
    if (commit > n->vlen) {
        sim_violation(s, "node %u commits %llu beyond its log %llu", node + 1,
                      (unsigned long long)commit, (unsigned long long)n->vlen);
        return;
    }
    for (uint64_t k = n->commit_seen + 1; k <= commit; k++) {
        if (n->vlog[k].bad && k > n->raft.snap_index) {
            sim_violation(s, "node %u applies damaged record %llu", node + 1,
                          (unsigned long long)k);
            return;
        }
        if (k <= s->committed_len) {
            if (n->vlog[k].hash != s->committed[k]) {
                sim_violation(s,
                              "state machine safety: node %u commits a "
                              "different entry at %llu",
                              node + 1, (unsigned long long)k);
                return;
            }
            continue;
        }
        ASSERT(k == s->committed_len + 1);
        s->committed[k] = n->vlog[k].hash;
        s->committed_len = k;
        if (n->vlog[k].id >= s->heal_id && s->healing) {
            s->heal_committed = true;
        }
    }
    n->commit_seen = commit;
    if (n->raft.role == RAFT_LEADER) {
        durable_majority(s, node, commit, committed_before);
        winner_check(s, node, commit, committed_before);
    }
}

void inv_faulty_leader_commit(struct sim *s, uint32_t node, uint64_t commit)
{
    struct sim_node *n = &s->nodes[node];
    ASSERT(n->raft.role == RAFT_LEADER);
    ASSERT(commit <= n->vlen);
    if (commit > s->committed_len) {
        durable_majority(s, node, commit, s->committed_len);
    }
}

void inv_read_request(struct sim *s, uint64_t id)
{
    if (s->n_reads == SIM_READS_MAX) {
        return;
    }
    s->reads[s->n_reads++] =
        (struct sim_read){.id = id, .committed_at_request = s->committed_len};
}

/* Read-index is linearizable: a read started after a commit was acked must
 * see it. */
void inv_read(struct sim *s, uint32_t node, const struct raft_read *rd)
{
    for (uint32_t k = 0; k < s->n_reads; k++) {
        if (s->reads[k].id != rd->id) {
            continue;
        }
        if (rd->status == 0 && rd->index < s->reads[k].committed_at_request) {
            sim_violation(s,
                          "stale read on node %u: read %llu at index %llu "
                          "misses committed %llu",
                          node + 1, (unsigned long long)rd->id,
                          (unsigned long long)rd->index,
                          (unsigned long long)s->reads[k].committed_at_request);
        }
        s->reads[k] = s->reads[--s->n_reads];
        return;
    }
}

/* After healing: one leader, a fresh proposal committed, every voter of its
 * configuration holding the same committed log (no divergence). */
void inv_converged(struct sim *s)
{
    int leader = -1;
    uint64_t best = 0;
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        struct sim_node *n = &s->nodes[i];
        if (n->up && n->raft.role == RAFT_LEADER && n->raft.term >= best) {
            best = n->raft.term;
            leader = (int)i;
        }
    }
    if (leader < 0) {
        sim_violation(s, "liveness: no leader %llu ms after healing",
                      (unsigned long long)s->p.heal_ms);
        return;
    }
    if (!s->heal_committed) {
        sim_violation(s, "liveness: no proposal committed after healing");
        return;
    }
    struct sim_node *l = &s->nodes[leader];
    const struct raft_config *cfg = raft_config_current(&l->raft);
    uint64_t c = l->raft.commit;
    for (uint32_t k = 0; k < cfg->n; k++) {
        const struct raft_server *sv = &cfg->servers[k];
        if (sv->node == 0 || sv->node > s->p.n_nodes) {
            continue;
        }
        struct sim_node *f = &s->nodes[sv->node - 1];
        if (f->incarnation != sv->incarnation) {
            continue;
        }
        uint64_t bad = sim_first_bad(f, false);
        if (!f->up || f->vlen < c || f->vlog[c].hash != l->vlog[c].hash ||
            f->raft.commit != c || (bad != 0 && bad <= c)) {
            sim_violation(s,
                          "divergence: node %llu has not converged on "
                          "commit %llu after healing",
                          (unsigned long long)sv->node, (unsigned long long)c);
            return;
        }
    }
}

/* Log Matching of the state a power loss would recover: after a sync whose
 * last append was at top, a durable record after top must chain from it
 * (otherwise a truncation was not made durable with the new entries). */
void inv_durable_chain(struct sim *s, uint32_t node, uint64_t top)
{
    struct sim_node *n = &s->nodes[node];
    if (top == 0 || n->dlen <= top) {
        return;
    }
    const struct sim_entry *next = &n->dlog[top + 1];
    if (inv_entry_hash(n->dlog[top].hash, top + 1, next) != next->hash) {
        sim_violation(s,
                      "node %u: after a sync up to %llu the disk still "
                      "holds a stale record at %llu (t%llu)",
                      node + 1, (unsigned long long)top,
                      (unsigned long long)(top + 1),
                      (unsigned long long)next->term);
    }
}

/* Rule 3: the acks an amnesiac node sent before the loss may be counted
 * (they were in flight, or the leader of that term counts them later), so
 * leaving amnesia claims it holds again every committed entry its lost tail
 * held. A committed entry at that index that is another entry than the lost
 * one was never acknowledged by this node, and is not its concern. */
void inv_amnesia_exit(struct sim *s, uint32_t node)
{
    struct sim_node *n = &s->nodes[node];
    uint64_t to = n->lost_to < s->committed_len ? n->lost_to : s->committed_len;
    ASSERT(n->lost != NULL);
    ASSERT(to < SIM_LOG_MAX);
    for (uint64_t k = n->lost_from + 1; k <= to; k++) {
        if (n->lost[k] != s->committed[k]) {
            continue;
        }
        if (n->dlen < k || n->dlog[k].hash != s->committed[k]) {
            sim_violation(s,
                          "node %u left amnesia without committed entry %llu "
                          "its lost tail held (its ack may have counted)",
                          node + 1, (unsigned long long)k);
            return;
        }
    }
    n->lost_from = 0;
    n->lost_to = 0;
}
