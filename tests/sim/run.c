/* One seed of the simulation: the fault schedule, the client, the operator
 * (membership and transfers), then healing and the liveness check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "invariants.h"
#include "keel/assert.h"
#include "sim.h"

#define FAULT_EVERY_MS 100
#define OPERATOR_EVERY_MS 40
#define QUIET_TAIL_MS                                                          \
    1500 /* no proposals at the end: let followers catch up                    \
          */

static int find_leader(struct sim *s)
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
    return leader;
}

static int random_up(struct sim *s)
{
    uint32_t start = sim_rnd(s, s->p.n_nodes);
    for (uint32_t k = 0; k < s->p.n_nodes; k++) {
        uint32_t i = (start + k) % s->p.n_nodes;
        if (s->nodes[i].up) {
            return (int)i;
        }
    }
    return -1;
}

static void links_all(struct sim *s, bool up)
{
    for (uint32_t i = 0; i < SIM_NODES_MAX; i++) {
        for (uint32_t j = 0; j < SIM_NODES_MAX; j++) {
            s->link[i][j] = up;
        }
    }
}

/* A wiped disk is a lost replica: allow one only when the configuration
 * names every node as a voter, so the other voters still form a majority. */
/* A bit flip anywhere in the node's log, even below a snapshot (a restart
 * reloads the retained log). */
static bool damaged_anywhere(const struct sim_node *n)
{
    if (n->marker_bad) {
        return true;
    }
    for (uint64_t k = 1; n->damaged && k <= n->dlen; k++) {
        if (n->dlog[k].bad || (k <= n->vlen && n->vlog[k].bad)) {
            return true;
        }
    }
    return false;
}

static bool wipe_allowed(struct sim *s, int leader)
{
    if (leader < 0) {
        return false;
    }
    const struct raft_config *c = raft_config_current(&s->nodes[leader].raft);
    if (c->n != s->p.n_nodes ||
        raft_config_current_index(&s->nodes[leader].raft) >
            s->nodes[leader].raft.commit) {
        return false;
    }
    for (uint32_t k = 0; k < c->n; k++) {
        if (c->servers[k].role != RAFT_VOTER) {
            return false;
        }
    }
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        const struct raft *r = &s->nodes[i].raft;
        if (s->wiped_inc[i] != 0 || !s->nodes[i].up ||
            damaged_anywhere(&s->nodes[i]) || s->nodes[i].amnesiac) {
            return false; /* one lost disk at a time, nobody else down */
        }
        if (raft_config_current_index(r) > r->commit) {
            /* A stale leader's uncommitted change (seed 418 of the
             * storage run): with one voter amnesiac, two healthy nodes
             * that disagree on the voters can elect nobody. */
            return false;
        }
    }
    return true;
}

static void fault_partition(struct sim *s)
{
    uint32_t mask = sim_rnd(s, 1u << s->p.n_nodes);
    links_all(s, true);
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        for (uint32_t j = 0; j < s->p.n_nodes; j++) {
            s->link[i][j] = ((mask >> i) & 1) == ((mask >> j) & 1);
        }
    }
    sim_trace(s, -1, "PARTITION mask %x", mask);
    s->stats.partitions++;
}

static bool wipe_pending(const struct sim *s)
{
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        if (s->wiped_inc[i] != 0) {
            return true;
        }
    }
    return false;
}

static void fault_stop(struct sim *s, int i, enum sim_stop_kind k)
{
    /* Records lost below a surviving marker make the node faulty there: a
     * storage fault at that index, so not while a wiped disk is pending
     * (the model's budget is one). */
    if (k == STOP_POWER && s->p.storage_faults && !wipe_pending(s) &&
        sim_rnd(s, 2) == 0) {
        k = STOP_POWER_REORDER; /* a marker may outlive a record below it */
    }
    if (i >= 0 && s->nodes[i].up) {
        sim_node_stop(s, (uint32_t)i, k);
    }
}

/* Replace a disk, often while another node lags behind a partition: the
 * wiped node rejoins with nothing while the lagging one may campaign. */
static void fault_wipe(struct sim *s, int leader)
{
    uint32_t victim = sim_rnd(s, s->p.n_nodes);
    bool lagging = false;
    for (uint32_t j = 0; j < s->p.n_nodes; j++) {
        lagging = lagging || !s->link[leader][j];
    }
    if (lagging) {
        /* Wipe a node that holds what the cut-off one lacks. */
        for (uint32_t k = 0; k < s->p.n_nodes; k++) {
            uint32_t j = (victim + k) % s->p.n_nodes;
            if ((int)j != leader && s->link[leader][j]) {
                victim = j;
                break;
            }
        }
    }
    fault_stop(s, (int)victim, STOP_WIPE);
    if (sim_rnd(s, 2) == 0) {
        return;
    }
    uint32_t lag = sim_rnd(s, s->p.n_nodes);
    if (lag == victim || (int)lag == leader) {
        return;
    }
    for (uint32_t j = 0; j < s->p.n_nodes; j++) {
        s->link[lag][j] = false;
        s->link[j][lag] = false;
    }
    sim_trace(s, -1, "ISOLATE %u", lag + 1);
}

/* One media fault at a time (the model allows at most n - q voters with a
 * storage fault at an index): no other damage, no wiped disk pending. */
static void fault_flip(struct sim *s, int leader)
{
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        if (s->wiped_inc[i] != 0 || damaged_anywhere(&s->nodes[i]) ||
            s->nodes[i].amnesiac) {
            return;
        }
        s->nodes[i].damaged = false;
    }
    if (sim_rnd(s, 3) == 0) {
        /* Rule 3: a power loss that also loses a synced log tail (a
         * partial wipe: the same budget as a wiped disk). */
        int v = leader >= 0 && sim_rnd(s, 2) ? leader : random_up(s);
        if (v >= 0 && wipe_allowed(s, leader)) {
            sim_node_stop(s, (uint32_t)v, STOP_LOSE_TAIL);
        }
        return;
    }
    uint32_t what = sim_rnd(s, 8);
    if (what == 0) {
        /* Whole-cluster power loss (rule 4): under group/always the
         * cluster must recover by itself (leaderless repair, discard). */
        sim_trace(s, -1, "POWER LOSS of the whole cluster");
        s->stats.cluster_power_losses++;
        for (uint32_t i = 0; i < s->p.n_nodes; i++) {
            if (s->nodes[i].up) {
                sim_node_stop(s, i, STOP_POWER_REORDER);
            }
        }
        return;
    }
    int victim = leader >= 0 && sim_rnd(s, 2) ? leader : random_up(s);
    if (victim >= 0 && what == 1) {
        sim_disk_flip_marker(s, (uint32_t)victim);
    } else if (victim >= 0) {
        sim_flip(s, (uint32_t)victim);
    }
}

static void fault(struct sim *s)
{
    int leader = find_leader(s);
    if (s->p.storage_faults && sim_rnd(s, 4) == 0) {
        fault_flip(s, leader);
        return;
    }
    switch (sim_rnd(s, 12)) {
    case 0:
    case 1:
        fault_partition(s);
        break;
    case 2:
    case 3:
        links_all(s, true);
        sim_trace(s, -1, "HEAL network");
        break;
    case 4: {
        uint32_t a = sim_rnd(s, s->p.n_nodes);
        uint32_t b = sim_rnd(s, s->p.n_nodes);
        s->link[a][b] = false;
        sim_trace(s, -1, "CUT %u -> %u", a + 1, b + 1);
        break;
    }
    case 5:
        fault_stop(s, random_up(s), STOP_CRASH);
        break;
    case 6:
        fault_stop(s, random_up(s), STOP_POWER);
        break;
    case 7:
        fault_stop(s, leader, sim_rnd(s, 2) ? STOP_POWER : STOP_CRASH);
        break;
    case 8:
        if (wipe_allowed(s, leader)) {
            fault_wipe(s, leader);
        }
        break;
    case 9:
        if (leader >= 0) {
            struct raft_in in = {.type = RAFT_IN_TRANSFER};
            in.transfer_to = sim_rnd(s, 2) ? 0 : 1 + sim_rnd(s, s->p.n_nodes);
            sim_trace(s, leader, "request transfer to %llu",
                      (unsigned long long)in.transfer_to);
            sim_node_step(s, (uint32_t)leader, &in);
            s->stats.transfers += s->last_rv == 0;
        }
        break;
    case 10:
        s->drop_pct = sim_rnd(s, 15);
        s->dup_pct = sim_rnd(s, 8);
        s->reorder_pct = sim_rnd(s, 20);
        s->delay_max = 1 + sim_rnd(s, 40);
        s->sync_max = 1 + sim_rnd(s, 40);
        break;
    default:
        break; /* a quiet period */
    }
}

static void operator_change(struct sim *s, int leader, uint8_t op,
                            uint64_t node, uint64_t inc)
{
    struct raft_in in = {.type = RAFT_IN_CHANGE};
    in.change.op = op;
    in.change.node = node;
    in.change.incarnation = inc;
    sim_node_step(s, (uint32_t)leader, &in);
    s->stats.changes += s->last_rv == 0;
    sim_trace(s, leader, "change op %u node %llu -> %d", op,
              (unsigned long long)node, s->last_rv);
}

static void operator_clear_wiped(struct sim *s)
{
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        if (s->wiped_inc[i] == 0) {
            continue;
        }
        bool named = false;
        for (uint32_t j = 0; j < s->p.n_nodes; j++) {
            struct sim_node *n = &s->nodes[j];
            const struct raft_server *sv;
            if (!n->up) {
                named = true; /* cannot tell: wait */
                continue;
            }
            sv = raft_config_find(raft_config_current(&n->raft), i + 1);
            if (sv != NULL && sv->incarnation == s->wiped_inc[i]) {
                named = true;
            }
        }
        if (!named) {
            s->wiped_inc[i] = 0;
        }
    }
}

/* What an operator does: replace wiped incarnations (remove, add as
 * learner, promote when caught up), and some churn during traffic. */
static void operator(struct sim *s)
{
    int leader = find_leader(s);
    operator_clear_wiped(s);
    if (s->snapshots) {
        uint32_t i = sim_rnd(s, s->p.n_nodes);
        if (s->nodes[i].up && sim_rnd(s, 3) == 0) {
            sim_take_snapshot(s, i);
        }
    }
    if (leader < 0 || s->script_active) {
        return;
    }
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        if (s->nodes[i].amnesiac) {
            /* The leader does not learn that a follower is amnesiac (no
             * wire field yet), so membership rule 4 cannot count it as
             * unhealthy: the operator waits (docs/raft.md). */
            return;
        }
    }
    const struct raft_config *c = raft_config_current(&s->nodes[leader].raft);
    for (uint32_t k = 0; k < c->n; k++) {
        const struct raft_server *sv = &c->servers[k];
        if (sv->node <= s->p.n_nodes &&
            s->nodes[sv->node - 1].incarnation != sv->incarnation) {
            operator_change(s, leader, RAFT_CHANGE_REMOVE, sv->node,
                            sv->incarnation);
            return;
        }
    }
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        if (s->nodes[i].up && raft_config_find(c, i + 1) == NULL) {
            operator_change(s, leader, RAFT_CHANGE_ADD_LEARNER, i + 1,
                            s->nodes[i].incarnation);
            return;
        }
    }
    for (uint32_t k = 0; k < c->n; k++) {
        const struct raft_server *sv = &c->servers[k];
        if (sv->role == RAFT_LEARNER) {
            operator_change(s, leader, RAFT_CHANGE_PROMOTE, sv->node,
                            sv->incarnation);
            return;
        }
    }
    bool wiped = false;
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        wiped = wiped || s->wiped_inc[i] != 0;
    }
    if (!s->healing && !wiped && c->n >= 3 && s->p.scenario == 0 &&
        sim_rnd(s, 10) == 0) {
        const struct raft_server *sv = &c->servers[sim_rnd(s, c->n)];
        if (sv->node != (uint64_t)leader + 1) {
            operator_change(s, leader, RAFT_CHANGE_REMOVE, sv->node,
                            sv->incarnation);
        }
    }
}

static int random_leader(struct sim *s)
{
    uint32_t start = sim_rnd(s, s->p.n_nodes);
    for (uint32_t k = 0; k < s->p.n_nodes; k++) {
        uint32_t i = (start + k) % s->p.n_nodes;
        if (s->nodes[i].up && s->nodes[i].raft.role == RAFT_LEADER) {
            return (int)i;
        }
    }
    return -1;
}

static void client(struct sim *s)
{
    /* Clients also reach stale leaders cut off in a minority: their
     * uncommitted tails are what conflict truncation later removes. */
    int leader = sim_rnd(s, 3) == 0 ? random_leader(s) : find_leader(s);
    if (leader < 0 || s->nodes[leader].vlen + 64 >= SIM_LOG_MAX) {
        return;
    }
    if (sim_rnd(s, 10) == 0) {
        struct raft_in in = {.type = RAFT_IN_READ_INDEX};
        in.read_id = ++s->next_read_id;
        inv_read_request(s, in.read_id);
        sim_node_step(s, (uint32_t)leader, &in);
        if (s->last_rv != 0 && s->n_reads > 0 &&
            s->reads[s->n_reads - 1].id == in.read_id) {
            s->n_reads--;
        }
        return;
    }
    struct raft_entry e[4];
    uint64_t ids[4];
    uint32_t k = 1 + sim_rnd(s, s->p.bench ? 4 : 3);
    for (uint32_t j = 0; j < k; j++) {
        ids[j] = ++s->next_id;
        e[j] = (struct raft_entry){
            .term = 0, .type = RAFT_ENTRY_NORMAL, .len = 8, .buf = &ids[j]};
    }
    struct raft_in in = {.type = RAFT_IN_PROPOSE};
    in.propose.n = k;
    in.propose.entries = e;
    sim_node_step(s, (uint32_t)leader, &in);
    if (s->last_rv == 0) {
        s->proposals += k;
    }
}

static void heal(struct sim *s)
{
    s->healing = true;
    s->heal_id = s->next_id + 1;
    s->strip_from = 0;
    links_all(s, true);
    s->drop_pct = 0;
    s->dup_pct = 0;
    s->reorder_pct = 0;
    s->delay_max = 5;
    s->sync_max = 5;
    sim_trace(s, -1, "HEAL everything; liveness phase");
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        if (!s->nodes[i].up) {
            sim_node_boot(s, i);
        }
    }
}

/* docs/design.md §3.2 M1: e commits on {A, C} while B is cut off; C's
 * disk is replaced (same node id, new incarnation) and it rejoins; A fails
 * while C is catching up. C must not vote (it would elect B, lacking e). */
static void script_wipe_vote(struct sim *s)
{
    int *nd = s->script_nodes;
    switch (s->script_step) {
    case 0:
        nd[0] = find_leader(s);
        if (nd[0] < 0) {
            sim_ev_push(s, s->now + 50, EV_SCRIPT, 0, 0, NULL);
            return;
        }
        s->script_active = true;
        nd[1] = (nd[0] + 1) % 3;
        nd[2] = (nd[0] + 2) % 3;
        for (uint32_t j = 0; j < 3; j++) {
            s->link[nd[1]][j] = false;
            s->link[j][nd[1]] = false;
        }
        sim_trace(s, -1, "SCRIPT isolate %d, traffic on %d and %d", nd[1] + 1,
                  nd[0] + 1, nd[2] + 1);
        sim_ev_push(s, s->now + 200 + sim_rnd(s, 400), EV_SCRIPT, 0, 0, NULL);
        break;
    case 1:
        if (s->nodes[nd[2]].up) {
            sim_node_stop(s, (uint32_t)nd[2], STOP_WIPE);
            sim_node_boot(s, (uint32_t)nd[2]);
        }
        sim_ev_push(s, s->now + 5 + sim_rnd(s, 150), EV_SCRIPT, 0, 0, NULL);
        break;
    case 2:
        fault_stop(s, nd[0], STOP_CRASH);
        links_all(s, true);
        sim_ev_push(s, s->now + 1000, EV_SCRIPT, 0, 0, NULL);
        break;
    default:
        s->script_active = false; /* the operator may act again */
        return;
    }
    s->script_step++;
}

static void isolate(struct sim *s, int i, bool cut)
{
    for (uint32_t j = 0; j < s->p.n_nodes; j++) {
        s->link[i][j] = !cut;
        s->link[j][i] = !cut;
    }
}

/* Raft Figure 8 with five nodes: L (term t) writes a tail reaching only F;
 * L fails and F is cut off; M wins t+1 among the rest, appends its barrier
 * and is cut off before it reaches anyone; L returns and wins t+2, and copies
 * its old tail one entry per message. Counting that tail on a majority before
 * L's own barrier is there would commit what M could still overwrite. */
static void script_figure8(struct sim *s)
{
    int *nd = s->script_nodes; /* L, F, M */
    uint32_t step = s->script_step;
    int l = find_leader(s);
    if (step == 0 || step == 2) {
        if (l < 0 || (step == 2 && (l == nd[0] || l == nd[1]))) {
            sim_ev_push(s, s->now + 1, EV_SCRIPT, 0, 0, NULL);
            return; /* poll each ms for the leader we wait for */
        }
    }
    s->script_active = true;
    if (step == 0) {
        nd[0] = l;
        nd[1] = (l + 1) % 5;
        links_all(s, true);
        isolate(s, nd[0], true);
        s->link[nd[0]][nd[1]] = true;
        s->link[nd[1]][nd[0]] = true;
        sim_ev_push(s, s->now + 20 + sim_rnd(s, 60), EV_SCRIPT, 0, 0, NULL);
    } else if (step == 1) {
        fault_stop(s, nd[0], STOP_CRASH);
        isolate(s, nd[1], true);
        sim_ev_push(s, s->now + 1, EV_SCRIPT, 0, 0, NULL);
    } else if (step == 2) {
        nd[2] = l;
        isolate(s, nd[2], true);
        if (!s->nodes[nd[0]].up) {
            sim_node_boot(s, (uint32_t)nd[0]);
        }
        isolate(s, nd[0], false);
        isolate(s, nd[1], false);
        isolate(s, nd[2], true);
        sim_ev_push(s, s->now + 1500, EV_SCRIPT, 0, 0, NULL);
    } else {
        s->script_active = false;
        return;
    }
    s->script_step++;
}

/* One event. A dispatch switch over event types: each case is one call. */
static void dispatch(struct sim *s, const struct sim_event *ev, uint64_t end)
{
    struct sim_node *n = &s->nodes[ev->node];
    switch (ev->type) {
    case EV_DELIVER:
        if (n->up && s->link[ev->gen][ev->node]) {
            struct raft_in in = {.type = RAFT_IN_RECEIVE};
            in.msg = &ev->msg->m;
            sim_node_step(s, ev->node, &in);
        }
        free(ev->msg);
        break;
    case EV_SYNC_DONE:
        sim_disk_sync_done(s, ev->node, ev->gen);
        break;
    case EV_TICK:
        if (n->up && ev->gen == n->timer_gen) {
            struct raft_in in = {.type = RAFT_IN_TICK};
            sim_node_step(s, ev->node, &in);
        }
        break;
    case EV_FAULT:
        if (!s->healing) {
            fault(s);
            sim_ev_push(s, s->now + 1 + sim_rnd(s, 2 * FAULT_EVERY_MS),
                        EV_FAULT, 0, 0, NULL);
        }
        break;
    case EV_PROPOSE:
        if (s->now + QUIET_TAIL_MS < end) {
            client(s);
        }
        sim_ev_push(s, s->now + 1 + sim_rnd(s, s->p.bench ? 2 : 10), EV_PROPOSE,
                    0, 0, NULL);
        break;
    case EV_HS_WRITE:
        if (n->up && n->hs_pending && ev->gen == n->incarnation) {
            n->hs_term = n->hs_pending_term;
            n->hs_vote = n->hs_pending_vote;
            n->hs_pending = false;
        }
        break;
    case EV_RESTART:
        if (!n->up && ev->gen == n->sync_gen && !s->healing) {
            bool wiped = n->dlen == 0;
            sim_node_boot(s, ev->node);
            if (wiped && sim_rnd(s, 2) == 0) {
                /* A replaced disk rejoining while the leader fails and the
                 * network heals. */
                links_all(s, true);
                sim_ev_push(s, s->now + 5 + sim_rnd(s, 100), EV_CRASH_LEADER, 0,
                            0, NULL);
            }
        }
        break;
    case EV_OPERATOR:
        operator(s);
        sim_ev_push(s, s->now + OPERATOR_EVERY_MS, EV_OPERATOR, 0, 0, NULL);
        break;
    case EV_HEAL:
        heal(s);
        break;
    case EV_INSTALL:
        sim_install(s, ev->node, ev->gen);
        break;
    case EV_SCRIPT:
        if (s->healing) {
            break;
        }
        if (s->p.scenario == SIM_SCENARIO_WIPE_VOTE) {
            script_wipe_vote(s);
        } else if (s->p.scenario == SIM_SCENARIO_FIGURE8) {
            script_figure8(s);
        } else {
            sim_script_storage(s);
        }
        break;
    case EV_CRASH_LEADER:
        if (!s->healing) {
            fault_stop(s, find_leader(s), STOP_CRASH);
        }
        break;
    default:
        ASSERT(false);
    }
}

/* Buffers live across seeds: a seed only resets what it reads. */
static void buffers(struct sim *s)
{
    if (s->heap == NULL) {
        s->heap = calloc(SIM_EVENTS_MAX, sizeof *s->heap);
        s->committed = calloc(SIM_LOG_MAX + 1, sizeof *s->committed);
        s->leader_of_term = calloc(SIM_TERMS_MAX, sizeof *s->leader_of_term);
        s->created = calloc(SIM_CREATED_MAX, sizeof *s->created);
        s->out = calloc(1, sizeof *s->out);
        for (uint32_t i = 0; i < SIM_NODES_MAX; i++) {
            struct sim_node *n = &s->nodes[i];
            n->dlog = calloc(SIM_LOG_MAX + 1, sizeof *n->dlog);
            n->vlog = calloc(SIM_LOG_MAX + 1, sizeof *n->vlog);
            n->ops = calloc(SIM_OPS_MAX, sizeof *n->ops);
            n->stage = calloc(SIM_LOG_MAX + 1, sizeof *n->stage);
            n->lost = calloc(SIM_LOG_MAX + 1, sizeof *n->lost);
            ASSERT(n->dlog && n->vlog && n->ops && n->stage && n->lost);
        }
    }
    ASSERT(s->heap && s->committed && s->leader_of_term && s->created &&
           s->out);
    memset(s->leader_of_term, 0, SIM_TERMS_MAX * sizeof *s->leader_of_term);
    memset(s->created, 0, SIM_CREATED_MAX * sizeof *s->created);
}

static void setup(struct sim *s, uint64_t seed, const struct sim_params *p)
{
    struct sim keep = *s;
    memset(s, 0, sizeof *s);
    s->heap = keep.heap;
    s->committed = keep.committed;
    s->leader_of_term = keep.leader_of_term;
    s->created = keep.created;
    s->out = keep.out;
    for (uint32_t i = 0; i < SIM_NODES_MAX; i++) {
        s->nodes[i].dlog = keep.nodes[i].dlog;
        s->nodes[i].vlog = keep.nodes[i].vlog;
        s->nodes[i].ops = keep.nodes[i].ops;
        s->nodes[i].stage = keep.nodes[i].stage;
        s->nodes[i].lost = keep.nodes[i].lost;
    }
    buffers(s);
    s->p = *p;
    s->seed = seed;
    s->prng = seed * 0x2545F4914F6CDD1Dull + 1;
    s->heal_id = UINT64_MAX;
    links_all(s, true);
    s->drop_pct = p->bench ? 0 : sim_rnd(s, 10);
    s->dup_pct = p->bench ? 0 : sim_rnd(s, 5);
    s->reorder_pct = p->bench ? 0 : sim_rnd(s, 10);
    s->delay_max = 1 + sim_rnd(s, 20);
    s->sync_max = 1 + sim_rnd(s, 20);
    s->batch_max = sim_rnd(s, 2) ? 1 + sim_rnd(s, 8) : 64;
    s->snapshots = sim_rnd(s, 2) == 0;
    if (p->scenario == SIM_SCENARIO_FIGURE8 ||
        p->scenario == SIM_SCENARIO_AMNESIA_COMMIT) {
        /* The old tail travels one entry at a time (figure 8); an amnesiac
         * catches up one entry at a time, so a too-early exit shows. */
        s->batch_max = 1;
        s->snapshots = false;
    }
    if (p->scenario >= SIM_SCENARIO_FAULTY_NONE) {
        s->snapshots = false; /* the traces name log indexes */
    }
    struct raft_config cfg = {.n = p->n_nodes};
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        struct sim_node *n = &s->nodes[i];
        n->incarnation = sim_rand(s) | 1;
        cfg.servers[i] = (struct raft_server){
            .node = i + 1, .incarnation = n->incarnation, .role = RAFT_VOTER};
    }
    /* Bootstrap (rule 5): every node writes the same index-1 configuration. */
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        struct sim_node *n = &s->nodes[i];
        struct sim_entry *e = &n->dlog[1];
        e->term = 1;
        e->type = RAFT_ENTRY_CONFIG;
        e->len = raft_config_encode(&cfg, e->payload, sizeof e->payload);
        n->dlen = 1;
        n->hs_term = 1;
    }
}

int sim_run(struct sim *s, uint64_t seed, const struct sim_params *p)
{
    setup(s, seed, p);
    uint64_t end = p->duration_ms + p->heal_ms;
    for (uint32_t i = 0; i < p->n_nodes; i++) {
        sim_node_boot(s, i);
    }
    sim_ev_push(s, 1, EV_PROPOSE, 0, 0, NULL);
    if (!p->bench) {
        if (p->scenario != SIM_SCENARIO_NONE) {
            sim_ev_push(s, 400, EV_SCRIPT, 0, 0, NULL);
        } else {
            sim_ev_push(s, 50 + sim_rnd(s, 200), EV_FAULT, 0, 0, NULL);
        }
        sim_ev_push(s, OPERATOR_EVERY_MS, EV_OPERATOR, 0, 0, NULL);
        sim_ev_push(s, p->duration_ms, EV_HEAL, 0, 0, NULL);
    }
    while (s->n_events > 0 && s->violation[0] == '\0') {
        struct sim_event ev = sim_ev_pop(s);
        if (ev.at > end || s->steps > SIM_STEPS_MAX) {
            free(ev.msg);
            break;
        }
        s->now = ev.at;
        dispatch(s, &ev, end);
    }
    if (s->violation[0] == '\0' && !p->bench) {
        inv_converged(s);
    }
    return s->violation[0] == '\0' ? 0 : 1;
}

static void print_nodes(const struct sim *s)
{
    printf("--- nodes at %llu ms ---\n", (unsigned long long)s->now);
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        const struct sim_node *n = &s->nodes[i];
        if (!n->up) {
            printf("n%u down, disk %llu records, hs t%llu\n", i + 1,
                   (unsigned long long)n->dlen, (unsigned long long)n->hs_term);
            continue;
        }
        const struct raft *r = &n->raft;
        printf("n%u role %u term %llu leader %llu log %llu persisted %llu "
               "commit %llu disk %llu unsynced %u syncing %d snap %llu "
               "faulty %llu bad %llu\n",
               i + 1, r->role, (unsigned long long)r->term,
               (unsigned long long)r->leader, (unsigned long long)r->last_index,
               (unsigned long long)r->persisted, (unsigned long long)r->commit,
               (unsigned long long)n->dlen, n->n_ops, n->syncing,
               (unsigned long long)r->snap_index, (unsigned long long)r->faulty,
               (unsigned long long)sim_first_bad(n, false));
    }
}

void sim_print_trace(const struct sim *s)
{
    print_nodes(s);
    uint64_t n = s->trace_n < SIM_TRACE_MAX ? s->trace_n : SIM_TRACE_MAX;
    printf("--- last %llu events (time ms, node) ---\n", (unsigned long long)n);
    for (uint64_t k = s->trace_n - n; k < s->trace_n; k++) {
        const struct sim_trace *t = &s->trace[k % SIM_TRACE_MAX];
        if (t->node == 0xff) {
            printf("%8llu  *  %s\n", (unsigned long long)t->at, t->text);
        } else {
            printf("%8llu  n%u %s\n", (unsigned long long)t->at, t->node + 1,
                   t->text);
        }
    }
}

void sim_free(struct sim *s)
{
    while (s->n_events > 0) {
        struct sim_event ev = sim_ev_pop(s);
        free(ev.msg);
    }
    for (uint32_t i = 0; i < s->p.n_nodes; i++) {
        struct sim_node *n = &s->nodes[i];
        if (n->up) {
            raft_close(&n->raft);
            n->up = false;
        }
    }
}

void sim_destroy(struct sim *s)
{
    for (uint32_t i = 0; i < SIM_NODES_MAX; i++) {
        free(s->nodes[i].dlog);
        free(s->nodes[i].vlog);
        free(s->nodes[i].ops);
        free(s->nodes[i].stage);
        free(s->nodes[i].lost);
    }
    free(s->heap);
    free(s->committed);
    free(s->leader_of_term);
    free(s->created);
    free(s->out);
    memset(s, 0, sizeof *s);
}
