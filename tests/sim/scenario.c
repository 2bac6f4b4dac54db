/* Scripted storage-fault traces (docs/design.md §4.7 R1 and R3): each puts the
 * cluster into the one state where a rule matters, with seeded timing, so
 * the simulator catches the mutation that breaks that rule on an early seed
 * and the unmutated core passes. Random faults reach these states too
 * rarely (docs/raft.md, "Storage faults").
 *
 * A trace is a sequence of EV_SCRIPT steps; a step that waits for a state
 * polls every millisecond up to a deadline (then the trace gives up and the
 * seed runs on as a plain one). */
#include <stdio.h>

#include "keel/assert.h"
#include "sim.h"

#define SCRIPT_POLL_MS 1
#define SCRIPT_WAIT_MS 1500 /* longest wait for a state before giving up */

static int leader_now(const struct sim *s)
{
    int leader = -1;
    uint64_t best = 0;
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        const struct sim_node *n = &s->nodes[i];
        if (n->up && n->raft.role == RAFT_LEADER && n->raft.term >= best) {
            best = n->raft.term;
            leader = (int)i;
        }
    }
    return leader;
}

static void link_set(struct sim *s, uint32_t a, uint32_t b, bool up)
{
    ASSERT(a < SIM_NODES_MAX && b < SIM_NODES_MAX);
    s->link[a][b] = up;
    s->link[b][a] = up;
}

static void isolate(struct sim *s, uint32_t i, bool cut)
{
    for (uint32_t j = 0; j < s->p.n_nodes; j++) {
        link_set(s, i, j, !cut);
    }
}

static void next(struct sim *s, uint64_t in_ms)
{
    sim_ev_push(s, s->now + in_ms, EV_SCRIPT, 0, 0, NULL);
}

/* Step 0 of every trace: wait for a leader, then number the nodes from it
 * (script_nodes[0] is the leader). Returns false while there is none. */
static bool script_begin(struct sim *s)
{
    int l = leader_now(s);
    if (l < 0) {
        next(s, 50);
        return false;
    }
    for (uint32_t k = 0; k < s->p.n_nodes; k++) {
        s->script_nodes[k] = (int)((uint32_t)l + k) % (int)s->p.n_nodes;
    }
    s->script_active = true;
    s->script_deadline = s->now + SCRIPT_WAIT_MS;
    return true;
}

/* Poll again, or give up once the deadline passed (the seed proves nothing
 * then; the network heals so it still ends live). */
static void script_wait(struct sim *s)
{
    if (s->now < s->script_deadline) {
        next(s, SCRIPT_POLL_MS);
        return;
    }
    sim_trace(s, -1, "SCRIPT gave up waiting");
    s->strip_from = 0;
    s->script_active = false;
    s->script_step = 99;
}

static bool holds_durably(const struct sim_node *n, uint64_t k, uint64_t hash)
{
    return n->up && n->dlen >= k && n->vlen >= k && n->dlog[k].hash == hash &&
           n->vlog[k].hash == hash && n->raft.snap_index < k;
}

/* Rule 1, "answers faulty at i, never none" (5 nodes L, F1, F2, D, E): D and
 * E are cut off; L commits index i on L, F1, F2; L is cut off before F1
 * learns the commit; i is damaged on F1 and F2. D and E can elect nobody
 * (the faulty vote with their extents). F1's discard round hears F2 say
 * "faulty" and D, E "none": 2 < n - q + 1 = 3, so it keeps i. If F2 said
 * "none", F1 would truncate a committed entry. */
static void trace_faulty_none(struct sim *s)
{
    int *nd = s->script_nodes;
    if (s->script_step == 0) {
        if (!script_begin(s)) {
            return;
        }
        isolate(s, (uint32_t)nd[3], true);
        isolate(s, (uint32_t)nd[4], true);
        sim_trace(s, -1, "SCRIPT cut off %d and %d", nd[3] + 1, nd[4] + 1);
        s->script_step = 1;
        next(s, 100 + sim_rnd(s, 200));
        return;
    }
    if (s->script_step != 1) {
        s->script_active = false;
        return;
    }
    const struct sim_node *l = &s->nodes[nd[0]];
    uint64_t i = l->raft.commit;
    if (!l->up || l->raft.role != RAFT_LEADER || i == 0 ||
        i <= s->nodes[nd[3]].vlen || i <= s->nodes[nd[4]].vlen) {
        script_wait(s);
        return;
    }
    uint64_t h = l->vlog[i].hash;
    int f1 = s->nodes[nd[1]].raft.commit < i ? nd[1] : nd[2];
    int f2 = f1 == nd[1] ? nd[2] : nd[1];
    if (s->nodes[f1].raft.commit >= i || !holds_durably(&s->nodes[f1], i, h) ||
        !holds_durably(&s->nodes[f2], i, h)) {
        script_wait(s);
        return;
    }
    isolate(s, (uint32_t)nd[0], true);
    for (uint32_t a = 1; a < 5; a++) {
        for (uint32_t b = 1; b < 5; b++) {
            link_set(s, (uint32_t)nd[a], (uint32_t)nd[b], true);
        }
    }
    sim_trace(s, -1, "SCRIPT %d committed %llu: cut off, damaged on %d, %d",
              nd[0] + 1, (unsigned long long)i, f1 + 1, f2 + 1);
    sim_flip_at(s, (uint32_t)f1, i);
    sim_flip_at(s, (uint32_t)f2, i);
    s->script_step = 2;
    next(s, 1500);
}

/* Rule 1c, the fence (5 nodes L, F, X, Y, Z): X, Y, Z get L's heartbeats but
 * lose every append carrying index i or later, and cannot reach each other;
 * F acks i (L counts it), then F is cut off from L and i is damaged on F.
 * F's discard round asks X, Y, Z, who lack i. In the fresh term they adopt
 * durably, L's later append of i is refused; without the fence they answer
 * in L's term, F truncates i, L delivers i to X and counts F's old ack: a
 * commit held by two of five disks. */
static void trace_discard_race(struct sim *s)
{
    int *nd = s->script_nodes;
    if (s->script_step == 0) {
        if (!script_begin(s)) {
            return;
        }
        s->strip_from = (uint32_t)nd[0] + 1;
        s->strip_mask = (1u << nd[2]) | (1u << nd[3]) | (1u << nd[4]);
        s->strip_index = s->nodes[nd[0]].raft.last_index + 1;
        s->script_index = s->strip_index;
        link_set(s, (uint32_t)nd[2], (uint32_t)nd[3], false);
        link_set(s, (uint32_t)nd[2], (uint32_t)nd[4], false);
        link_set(s, (uint32_t)nd[3], (uint32_t)nd[4], false);
        sim_trace(s, -1, "SCRIPT appends from %llu on reach only %d",
                  (unsigned long long)s->strip_index, nd[1] + 1);
        s->script_step = 1;
        next(s, SCRIPT_POLL_MS);
        return;
    }
    struct sim_node *l = &s->nodes[nd[0]];
    struct sim_node *f = &s->nodes[nd[1]];
    uint64_t i = s->script_index;
    if (s->script_step == 1) {
        uint64_t match = 0;
        for (uint32_t k = 0; l->up && k < l->raft.n_progress; k++) {
            if (l->raft.progress[k].node == (uint64_t)nd[1] + 1) {
                match = l->raft.progress[k].match;
            }
        }
        if (l->raft.role != RAFT_LEADER || match < i ||
            !holds_durably(f, i, l->vlog[i].hash)) {
            script_wait(s);
            return;
        }
        link_set(s, (uint32_t)nd[0], (uint32_t)nd[1], false);
        sim_trace(s, -1, "SCRIPT %d acked %llu: cut from %d, damaged",
                  nd[1] + 1, (unsigned long long)i, nd[0] + 1);
        sim_flip_at(s, (uint32_t)nd[1], i);
        s->script_deadline = s->now + 2000;
        s->script_step = 2;
        next(s, SCRIPT_POLL_MS);
        return;
    }
    if (s->script_step == 2) {
        if (f->up && f->vlen >= i && s->now < s->script_deadline) {
            next(s, SCRIPT_POLL_MS); /* until F discarded i */
            return;
        }
        s->strip_from = 0;
        sim_trace(s, -1, "SCRIPT appends reach everyone again");
        s->script_step = 3;
        next(s, 1000);
        return;
    }
    s->script_active = false;
}

/* Steps 0 and 1 of a trace that cuts off its third node, then polls for a
 * state: true when the caller is at step 1 and should check it. */
static bool cut_third_then_poll(struct sim *s, uint32_t jitter_ms)
{
    int *nd = s->script_nodes;
    if (s->script_step == 0) {
        if (!script_begin(s)) {
            return false;
        }
        isolate(s, (uint32_t)nd[2], true);
        sim_trace(s, -1, "SCRIPT cut off %d", nd[2] + 1);
        s->script_step = 1;
        next(s, 100 + sim_rnd(s, jitter_ms));
        return false;
    }
    if (s->script_step != 1) {
        s->script_active = false;
        return false;
    }
    return true;
}

/* Rule 3 (3 nodes L, A, B): B is cut off, so L commits only with A's acks.
 * While an ack of A is in flight (A persisted past L's commit), A loses its
 * log tail down to L's commit and restarts amnesiac at once. The first
 * append A then hears was sent before L counted that ack: its commit is
 * below what A acknowledged, its last index is not. L counts the old ack; A
 * catches up one entry at a time. Leaving amnesia at the carried commit
 * would make A a voter lacking a committed entry it acknowledged. */
static void trace_amnesia_commit(struct sim *s)
{
    int *nd = s->script_nodes;
    if (!cut_third_then_poll(s, 100)) {
        return;
    }
    struct sim_node *l = &s->nodes[nd[0]];
    struct sim_node *a = &s->nodes[nd[1]];
    if (!l->up || !a->up || l->raft.role != RAFT_LEADER ||
        a->raft.persisted <= l->raft.commit || l->raft.commit == 0 ||
        a->dlen < a->raft.persisted) {
        script_wait(s);
        return;
    }
    s->lose_tail_at = l->raft.commit;
    sim_trace(s, -1, "SCRIPT %d acked %llu, %d counted %llu: tail lost",
              nd[1] + 1, (unsigned long long)a->raft.persisted, nd[0] + 1,
              (unsigned long long)l->raft.commit);
    sim_node_stop(s, (uint32_t)nd[1], STOP_LOSE_TAIL);
    sim_node_boot(s, (uint32_t)nd[1]);
    s->script_step = 2;
    next(s, 1500);
}

/* Rule 4's operator override (`keel cluster recover`) as the simulator's
 * operator runs it: survey every member, pick as source the greatest
 * extent (every node is intact here), bump every node past every term
 * seen, keep each log through the source's extent, clear amnesia. */
static void operator_recover(struct sim *s)
{
    uint32_t src = 0;
    uint64_t term = 0;
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        const struct raft *r = &s->nodes[i].raft;
        const struct raft *b = &s->nodes[src].raft;
        raft_term lt = raft_term_at(r, r->last_index);
        raft_term bt = raft_term_at(b, b->last_index);
        if (lt > bt || (lt == bt && r->last_index > b->last_index)) {
            src = i;
        }
        term = r->term > term ? r->term : term;
    }
    raft_index keep_max = s->nodes[src].raft.last_index;
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        const struct raft *r = &s->nodes[i].raft;
        struct raft_in in = {.type = RAFT_IN_RECOVER};
        in.recover.term = term + 1;
        in.recover.keep = r->last_index < keep_max ? r->last_index : keep_max;
        in.recover.source = i == src ? 1 : 0;
        sim_node_step(s, i, &in);
        if (s->last_rv != 0) {
            sim_violation(s, "recover refused on node %u (%d)", i + 1,
                          s->last_rv);
        }
    }
    sim_trace(s, -1, "SCRIPT operator: recover from node %u, term %llu",
              src + 1, (unsigned long long)(term + 1));
}

/* Rule 4 (3 nodes): every node restarts amnesiac at once (what an OS crash
 * under `interval` does; here nothing was lost). No node votes, so no
 * leader can ever be elected: the trace checks that the group stays
 * leaderless by itself, then the operator recovers and the group must be
 * live again with every committed entry. */
static void trace_recover(struct sim *s)
{
    if (s->script_step == 0) {
        if (!script_begin(s)) {
            return;
        }
        s->script_step = 1;
        next(s, 100 + sim_rnd(s, 200));
        return;
    }
    if (s->script_step == 1) {
        for (uint32_t i = 0; i < s->p.n_nodes; i++) {
            struct sim_node *n = &s->nodes[i];
            if (n->up) {
                sim_node_stop(s, i, STOP_CRASH);
            }
            n->amnesiac = true;
            n->amnesia_t0 = n->hs_term > 0 ? n->hs_term : 1;
            n->amnesia_target = 0;
            n->flip_counted = n->dlen;
            sim_node_boot(s, i);
        }
        /* Connections break with the processes: what the old leader sent
         * before the restarts never arrives (seed 1 of the first draft: a
         * stale append set every target and ended amnesia). */
        for (uint32_t i = 0; i < s->p.n_nodes; i++) {
            isolate(s, i, true);
        }
        sim_trace(s, -1, "SCRIPT every node restarts amnesiac");
        s->script_step = 2;
        next(s, 100);
        return;
    }
    if (s->script_step == 2) {
        for (uint32_t i = 0; i < s->p.n_nodes; i++) {
            isolate(s, i, false);
        }
        s->script_step = 3;
        next(s, 1000);
        return;
    }
    if (s->script_step == 3) {
        if (leader_now(s) >= 0) {
            sim_violation(s, "an all-amnesiac group elected a leader");
            return;
        }
        operator_recover(s);
        s->script_step = 4;
        next(s, 1000);
        return;
    }
    s->script_active = false;
}

/* Rule 4 under group/always (3 or 5 nodes): the whole cluster loses power
 * while every node has a sync in flight; writeback reached a random subset
 * of each batch and of its marker, so several nodes come back faulty below
 * their markers, often at the same indexes. Nobody campaigns while faulty:
 * leaderless repair (FETCH) and the discard round must make the cluster
 * live again by itself (checked after healing, and by the safety phase's
 * invariants meanwhile). */
static void trace_power_all(struct sim *s)
{
    if (s->script_step == 0) {
        if (!script_begin(s)) {
            return;
        }
        s->script_step = 1;
        next(s, 50 + sim_rnd(s, 150));
        return;
    }
    if (s->script_step != 1) {
        s->script_active = false;
        return;
    }
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        if (!s->nodes[i].up || !s->nodes[i].syncing) {
            script_wait(s);
            return;
        }
    }
    sim_trace(s, -1, "SCRIPT power loss of the whole cluster");
    s->stats.cluster_power_losses++;
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        sim_node_stop(s, i, STOP_POWER_REORDER);
    }
    s->script_step = 2;
    next(s, 1000);
}

/* Finding 14 (3 nodes L, F, C): C is cut off, L commits index i with F's
 * ack, and i is in F's newest synced batch (after the marker before it).
 * L is cut off; F's newest marker and record i are damaged (two media
 * faults) and F restarts. Reading i as a torn tail (the older marker
 * intact, damage after it) drops a committed entry silently: F and C then
 * elect a leader that overwrites it. Faulty, F votes for nobody lacking
 * it, and the group waits for L (healed in the liveness phase). */
static void trace_marker_record(struct sim *s)
{
    int *nd = s->script_nodes;
    if (!cut_third_then_poll(s, 200)) {
        return;
    }
    struct sim_node *l = &s->nodes[nd[0]];
    struct sim_node *f = &s->nodes[nd[1]];
    uint64_t i = l->raft.commit;
    if (!l->up || !f->up || l->raft.role != RAFT_LEADER || i == 0 ||
        i <= s->nodes[nd[2]].vlen || f->marker_bad || f->marker < i ||
        f->marker_prev >= i || !holds_durably(f, i, l->vlog[i].hash)) {
        script_wait(s);
        return;
    }
    isolate(s, (uint32_t)nd[0], true);
    link_set(s, (uint32_t)nd[1], (uint32_t)nd[2], true);
    sim_trace(s, -1,
              "SCRIPT %d committed %llu with %d: cut off, marker %llu "
              "and %llu damaged on %d, which restarts",
              nd[0] + 1, (unsigned long long)i, nd[1] + 1,
              (unsigned long long)f->marker, (unsigned long long)i, nd[1] + 1);
    sim_disk_flip_marker(s, (uint32_t)nd[1]);
    sim_flip_at(s, (uint32_t)nd[1], i);
    sim_node_stop(s, (uint32_t)nd[1], STOP_CRASH);
    sim_node_boot(s, (uint32_t)nd[1]);
    s->script_step = 2;
    next(s, 1500);
}

void sim_script_storage(struct sim *s)
{
    ASSERT(s->p.scenario >= SIM_SCENARIO_FAULTY_NONE);
    ASSERT(!s->healing);
    switch (s->p.scenario) {
    case SIM_SCENARIO_FAULTY_NONE:
        trace_faulty_none(s);
        break;
    case SIM_SCENARIO_DISCARD_RACE:
        trace_discard_race(s);
        break;
    case SIM_SCENARIO_AMNESIA_COMMIT:
        trace_amnesia_commit(s);
        break;
    case SIM_SCENARIO_RECOVER:
        trace_recover(s);
        break;
    case SIM_SCENARIO_POWER_ALL:
        trace_power_all(s);
        break;
    case SIM_SCENARIO_MARKER_RECORD:
        trace_marker_record(s);
        break;
    default:
        break;
    }
}
