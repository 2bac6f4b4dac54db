/* The simulated cluster: event loop, network, disk model, and the driver
 * that feeds the real Raft core (the sim's stand-in for server/replica.c).
 * Invariants are checked in invariants.c after every step. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "invariants.h"
#include "keel/assert.h"
#include "keel/error.h"
#include "sim.h"

uint64_t sim_rand(struct sim *s)
{
    uint64_t z = (s->prng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint32_t sim_rnd(struct sim *s, uint32_t n)
{
    ASSERT(n > 0);
    return (uint32_t)(sim_rand(s) % n);
}

void sim_trace(struct sim *s, int node, const char *fmt, ...)
{
    if (s->p.bench) {
        return;
    }
    struct sim_trace *t = &s->trace[s->trace_n++ % SIM_TRACE_MAX];
    va_list ap;
    t->at = s->now;
    t->node = (uint8_t)node;
    va_start(ap, fmt);
    vsnprintf(t->text, sizeof t->text, fmt, ap);
    va_end(ap);
}

void sim_violation(struct sim *s, const char *fmt, ...)
{
    if (s->violation[0] != '\0') {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->violation, sizeof s->violation, fmt, ap);
    va_end(ap);
    sim_trace(s, -1, "VIOLATION: %s", s->violation);
}

/* ---- event heap (min by time, then sequence: deterministic) ---- */

static bool ev_less(const struct sim_event *a, const struct sim_event *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

void sim_ev_push(struct sim *s, uint64_t at, uint8_t type, uint32_t node,
                 uint64_t gen, struct sim_msg *msg)
{
    if (s->n_events == SIM_EVENTS_MAX) {
        sim_violation(s, "simulator event queue full");
        free(msg);
        return;
    }
    struct sim_event e = {.at = at,
                          .seq = s->seq++,
                          .type = type,
                          .node = (uint8_t)node,
                          .gen = gen,
                          .msg = msg};
    uint32_t i = s->n_events++;
    while (i > 0 && ev_less(&e, &s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
}

struct sim_event sim_ev_pop(struct sim *s)
{
    ASSERT(s->n_events > 0);
    struct sim_event top = s->heap[0];
    struct sim_event last = s->heap[--s->n_events];
    uint32_t i = 0;
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= s->n_events) {
            break;
        }
        if (c + 1 < s->n_events && ev_less(&s->heap[c + 1], &s->heap[c])) {
            c++;
        }
        if (!ev_less(&s->heap[c], &last)) {
            break;
        }
        s->heap[i] = s->heap[c];
        i = c;
    }
    s->heap[i] = last;
    return top;
}

/* ---- disk model ---- */

static void disk_apply(struct sim *s, struct sim_node *n,
                       const struct sim_op *op)
{
    if (op->type == SIM_OP_TRUNCATE) {
        if ((s->p.mutations & SIM_MUT_TRUNC_NOT_DURABLE) != 0) {
            return; /* the mutation: the stale tail stays on disk */
        }
        if (n->dlen >= op->index) {
            n->dlen = op->index - 1;
        }
        return;
    }
    ASSERT(op->index <= n->dlen + 1);
    n->dlog[op->index] = op->e;
    if (op->index > n->dlen) {
        n->dlen = op->index;
    }
}

static void disk_push(struct sim *s, struct sim_node *n, uint8_t type,
                      uint64_t index, const struct sim_entry *e)
{
    if (n->n_ops == SIM_OPS_MAX) {
        sim_violation(s, "simulator: too many unsynced writes");
        return;
    }
    struct sim_op *op = &n->ops[n->n_ops++];
    op->type = type;
    op->index = index;
    if (e != NULL) {
        op->e = *e;
    }
}

static void disk_maybe_sync(struct sim *s, uint32_t i)
{
    struct sim_node *n = &s->nodes[i];
    if (n->syncing || n->n_ops == 0) {
        return;
    }
    n->syncing = true;
    n->sync_ops = n->n_ops;
    n->sync_index = n->vlen;
    n->sync_term = n->vlen > 0 ? n->vlog[n->vlen].term : 0;
    n->sync_gen++;
    uint64_t d = s->p.bench ? 0 : 1 + sim_rnd(s, s->sync_max);
    if (!s->p.bench && sim_rnd(s, 15) == 0) {
        d += 150 + sim_rnd(s, 350); /* a stalled device now and then */
    }
    sim_ev_push(s, s->now + d, EV_SYNC_DONE, i, n->sync_gen, NULL);
}

void sim_disk_sync_done(struct sim *s, uint32_t i, uint64_t gen)
{
    struct sim_node *n = &s->nodes[i];
    if (!n->up || !n->syncing || gen != n->sync_gen) {
        return;
    }
    uint64_t top = 0;
    for (uint32_t k = 0; k < n->sync_ops; k++) {
        disk_apply(s, n, &n->ops[k]);
        if (n->ops[k].type == SIM_OP_APPEND && n->ops[k].index > top) {
            top = n->ops[k].index;
        }
    }
    inv_durable_chain(s, i, top);
    sim_disk_marker(n, n->sync_index);
    memmove(n->ops, n->ops + n->sync_ops,
            (n->n_ops - n->sync_ops) * sizeof *n->ops);
    n->n_ops -= n->sync_ops;
    n->syncing = false;
    if (n->sync_index > 0) {
        struct raft_in in = {.type = RAFT_IN_PERSISTED};
        in.persisted.index = n->sync_index;
        in.persisted.term = n->sync_term;
        sim_trace(s, (int)i, "sync done: persisted(%llu, t%llu)",
                  (unsigned long long)n->sync_index,
                  (unsigned long long)n->sync_term);
        sim_node_step(s, i, &in);
    }
    disk_maybe_sync(s, i);
}

/* ---- network ---- */

#define SNAPSHOT_CHUNK_ENTRIES 32

/* InstallSnapshot: the driver fills the chunk at the core's offset with the
 * leader's retained log (here, entries 1..X as records). */
static struct sim_msg *snapshot_clone(struct sim *s, uint32_t from,
                                      const struct raft_msg *m)
{
    struct sim_node *n = &s->nodes[from];
    const uint64_t es = sizeof(struct sim_entry);
    uint64_t x = m->snapshot.index;
    uint64_t first = m->snapshot.offset / es + 1;
    uint64_t cnt = 0;
    if (first <= x && x <= n->vlen) {
        cnt = x - first + 1;
        if (cnt > SNAPSHOT_CHUNK_ENTRIES) {
            cnt = SNAPSHOT_CHUNK_ENTRIES;
        }
    } else {
        sim_violation(s, "driver: node %u cannot fill snapshot %llu at %llu",
                      from + 1, (unsigned long long)x,
                      (unsigned long long)first);
    }
    struct sim_msg *sm = calloc(1, sizeof *sm + cnt * es);
    ASSERT(sm != NULL);
    sm->m = *m;
    struct sim_entry *chunk = (struct sim_entry *)(sm + 1);
    for (uint64_t k = 0; k < cnt; k++) {
        chunk[k] = n->vlog[first + k];
    }
    sm->m.snapshot.chunk = chunk;
    sm->m.snapshot.len = (uint32_t)(cnt * es);
    sm->m.snapshot.done = cnt > 0 && first + cnt - 1 == x;
    sm->m.snapshot.log_first = 1;
    return sm;
}

static struct sim_msg *msg_clone(struct sim *s, uint32_t from,
                                 const struct raft_msg *m)
{
    if (m->type == RAFT_MSG_SNAPSHOT) {
        return snapshot_clone(s, from, m);
    }
    struct sim_node *n = &s->nodes[from];
    uint32_t cnt = m->type == RAFT_MSG_APPEND ? m->append.n_entries : 0;
    if (m->type == RAFT_MSG_FETCH_RESP &&
        m->discard_resp.status == RAFT_DISCARD_HAS &&
        m->discard_resp.index <= n->vlen) {
        cnt = 1; /* the copy, from the store's retained log */
    }
    struct sim_msg *sm =
        calloc(1, sizeof *sm + cnt * (sizeof(struct sim_entry) +
                                      sizeof(struct raft_entry)));
    ASSERT(sm != NULL);
    sm->m = *m;
    sm->n = cnt;
    if (cnt == 0) {
        return sm;
    }
    sm->entries = (struct sim_entry *)(sm + 1);
    sm->re = (struct raft_entry *)(sm->entries + cnt);
    uint64_t first = m->type == RAFT_MSG_APPEND ? m->append.prev_index + 1
                                                : m->discard_resp.index;
    if (first + cnt - 1 > n->vlen) {
        sim_violation(s,
                      "driver: node %u asked to send %llu..%llu beyond its "
                      "log (%llu)",
                      from + 1, (unsigned long long)first,
                      (unsigned long long)(first + cnt - 1),
                      (unsigned long long)n->vlen);
        sm->n = 0;
        sm->m.append.n_entries = 0;
        return sm;
    }
    for (uint32_t k = 0; k < cnt; k++) {
        const struct sim_entry *e = &n->vlog[first + k];
        if (e->bad) {
            sim_violation(s, "node %u serves damaged record %llu", from + 1,
                          (unsigned long long)(first + k));
        }
        if (m->type == RAFT_MSG_APPEND &&
            e->term != raft_term_at(&n->raft, first + k)) {
            sim_violation(s, "driver: node %u store and core disagree at %llu",
                          from + 1, (unsigned long long)(first + k));
        }
        sm->entries[k] = *e;
        sm->re[k] = (struct raft_entry){.term = e->term,
                                        .type = e->type,
                                        .len = e->len,
                                        .buf = sm->entries[k].payload};
    }
    if (m->type == RAFT_MSG_APPEND) {
        sm->m.append.entries = sm->re;
    } else {
        sm->m.discard_resp.entry = sm->re;
    }
    return sm;
}

/* A scripted trace's selective loss: an AppendEntries carrying entries at
 * or after strip_index is lost, and a heartbeat (the same message without
 * those entries) gets through in its place. */
static const struct raft_msg *net_strip(struct sim *s, uint32_t from,
                                        uint32_t to, const struct raft_msg *m,
                                        struct raft_msg *copy)
{
    if (s->strip_from != from + 1 || ((s->strip_mask >> to) & 1u) == 0 ||
        m->type != RAFT_MSG_APPEND) {
        return m;
    }
    uint64_t prev = m->append.prev_index;
    if (prev + m->append.n_entries < s->strip_index) {
        return m;
    }
    *copy = *m;
    copy->append.n_entries =
        prev + 1 >= s->strip_index ? 0 : (uint32_t)(s->strip_index - 1 - prev);
    return copy;
}

static void net_send(struct sim *s, uint32_t from, const struct raft_msg *m)
{
    struct raft_msg copy;
    if (m->to == 0 || m->to > s->p.n_nodes) {
        return;
    }
    uint32_t to = (uint32_t)m->to - 1;
    m = net_strip(s, from, to, m, &copy);
    if (!s->link[from][to] || sim_rnd(s, 100) < s->drop_pct) {
        return;
    }
    uint32_t copies = sim_rnd(s, 100) < s->dup_pct ? 2 : 1;
    for (uint32_t c = 0; c < copies; c++) {
        struct sim_msg *sm = msg_clone(s, from, m);
        uint64_t at = s->now + (s->p.bench ? 0 : 1 + sim_rnd(s, s->delay_max));
        /* Cluster links are TCP: in order per link, except when a
         * reconnect reorders (reorder_pct) or duplicates (dup_pct). */
        if (sim_rnd(s, 100) >= s->reorder_pct) {
            if (at < s->link_last[from][to]) {
                at = s->link_last[from][to];
            }
            s->link_last[from][to] = at;
        }
        sim_ev_push(s, at, EV_DELIVER, to, from, sm);
    }
}

/* ---- the driver ---- */

static void cfg_track(struct sim *s, struct sim_node *n, uint64_t idx)
{
    if (n->vlog[idx].type != RAFT_ENTRY_CONFIG) {
        return;
    }
    if (n->n_cfg == SIM_CFG_MAX) {
        sim_violation(s, "simulator: too many configuration entries");
        return;
    }
    n->cfg_idx[n->n_cfg++] = idx;
}

static void store_entries(struct sim *s, uint32_t i, const struct raft_out *out)
{
    struct sim_node *n = &s->nodes[i];
    if (out->truncate_from != 0) {
        uint64_t k = out->truncate_from;
        inv_truncate(s, i, k);
        s->stats.truncations++;
        sim_trace(s, (int)i, "truncate from %llu", (unsigned long long)k);
        if (k <= n->vlen) {
            n->vlen = k - 1;
        }
        while (n->n_cfg > 0 && n->cfg_idx[n->n_cfg - 1] >= k) {
            n->n_cfg--;
        }
        disk_push(s, n, SIM_OP_TRUNCATE, k, NULL);
    }
    for (uint32_t j = 0; j < out->n_entries; j++) {
        const struct raft_entry *re = &out->entries[j];
        uint64_t idx = out->entries_first + j;
        if (idx != n->vlen + 1 || idx >= SIM_LOG_MAX ||
            re->len > SIM_PAYLOAD_MAX) {
            sim_violation(s, "driver: node %u entry %llu not contiguous", i + 1,
                          (unsigned long long)idx);
            return;
        }
        struct sim_entry e = {
            .term = re->term, .type = re->type, .len = re->len};
        if (re->len > 0) {
            memcpy(e.payload, re->buf, re->len);
        }
        if (re->type == RAFT_ENTRY_NORMAL && re->len == 8) {
            memcpy(&e.id, re->buf, 8);
        }
        e.hash = inv_entry_hash(idx > 1 ? n->vlog[idx - 1].hash : 0, idx, &e);
        inv_created(s, i, idx, &e);
        n->vlog[idx] = e;
        n->vlen = idx;
        cfg_track(s, n, idx);
        disk_push(s, n, SIM_OP_APPEND, idx, &e);
    }
    if (out->n_entries > 0) {
        sim_trace(s, (int)i, "append %llu..%llu t%llu",
                  (unsigned long long)out->entries_first,
                  (unsigned long long)(out->entries_first + out->n_entries - 1),
                  (unsigned long long)out->entries[0].term);
    }
    disk_maybe_sync(s, i);
}

static const char *role_name(uint8_t r)
{
    switch (r) {
    case RAFT_FOLLOWER:
        return "follower";
    case RAFT_PRE_CANDIDATE:
        return "pre-candidate";
    case RAFT_CANDIDATE:
        return "candidate";
    case RAFT_LEADER:
        return "leader";
    default:
        return "?";
    }
}

static void trace_msg(struct sim *s, uint32_t i, const struct raft_msg *m,
                      bool in)
{
    const char *dir = in ? "<-" : "->";
    unsigned long long peer = in ? m->from : m->to;
    switch (m->type) {
    case RAFT_MSG_APPEND:
        sim_trace(s, (int)i, "%s %llu append t%llu prev=%llu/t%llu n=%u c=%llu",
                  dir, peer, (unsigned long long)m->term,
                  (unsigned long long)m->append.prev_index,
                  (unsigned long long)m->append.prev_term, m->append.n_entries,
                  (unsigned long long)m->append.commit);
        break;
    case RAFT_MSG_APPEND_RESP:
        sim_trace(s, (int)i,
                  "%s %llu append-resp t%llu ok=%u match=%llu "
                  "last=%llu hint=%llu",
                  dir, peer, (unsigned long long)m->term,
                  m->append_resp.success,
                  (unsigned long long)m->append_resp.match,
                  (unsigned long long)m->append_resp.last,
                  (unsigned long long)m->append_resp.hint);
        break;
    case RAFT_MSG_VOTE:
        sim_trace(s, (int)i, "%s %llu %svote t%llu last=%llu/t%llu", dir, peer,
                  m->vote.pre ? "pre-" : "", (unsigned long long)m->term,
                  (unsigned long long)m->vote.last_index,
                  (unsigned long long)m->vote.last_term);
        break;
    case RAFT_MSG_VOTE_RESP:
        sim_trace(s, (int)i, "%s %llu %svote-resp t%llu granted=%u", dir, peer,
                  m->vote_resp.pre ? "pre-" : "", (unsigned long long)m->term,
                  m->vote_resp.granted);
        break;
    default:
        sim_trace(s, (int)i, "%s %llu msg type %u t%llu", dir, peer, m->type,
                  (unsigned long long)m->term);
        break;
    }
}

/* Write one InstallSnapshot chunk to the staging area; the last one starts
 * the install (segments, snapshot file, LMDB: a few syncs). */
static void stage_chunk(struct sim *s, uint32_t i,
                        const struct raft_msg_snapshot *sn)
{
    struct sim_node *n = &s->nodes[i];
    const uint64_t es = sizeof(struct sim_entry);
    uint64_t first = sn->offset / es + 1;
    uint64_t cnt = sn->len / es;
    if (sn->offset == 0) {
        n->stage_n = 0;
    }
    if (first != n->stage_n + 1 || first + cnt - 1 > sn->index ||
        sn->index >= SIM_LOG_MAX) {
        sim_violation(s,
                      "driver: node %u got snapshot chunk %llu out of "
                      "order",
                      i + 1, (unsigned long long)first);
        return;
    }
    memcpy(&n->stage[first], sn->chunk, cnt * es);
    n->stage_n = first + cnt - 1;
    n->stage_index = sn->index;
    n->stage_term = sn->term;
    n->stage_config = sn->config;
    if (sn->done) {
        sim_trace(s, (int)i, "snapshot %llu received, installing",
                  (unsigned long long)sn->index);
        sim_ev_push(s, s->now + 5 + sim_rnd(s, 40), EV_INSTALL, i,
                    ++n->install_gen, NULL);
    }
}

static void node_schedule_tick(struct sim *s, uint32_t i, uint64_t at)
{
    struct sim_node *n = &s->nodes[i];
    if (at <= s->now) {
        at = s->now + 1;
    }
    n->timer_gen++;
    sim_ev_push(s, at, EV_TICK, i, n->timer_gen, NULL);
}

static void node_hard_state(struct sim *s, uint32_t i,
                            const struct raft_out *out)
{
    struct sim_node *n = &s->nodes[i];
    sim_trace(s, (int)i, "hard state t%llu vote %llu",
              (unsigned long long)out->term, (unsigned long long)out->vote);
    if ((s->p.mutations & SIM_MUT_TERM_NOT_SYNCED) != 0) {
        /* The mutation: the LMDB write lands after the log sync. */
        n->hs_pending = true;
        n->hs_pending_term = out->term;
        n->hs_pending_vote = out->vote;
        sim_ev_push(s, s->now + 5 + sim_rnd(s, 60), EV_HS_WRITE, i,
                    n->incarnation, NULL);
        return;
    }
    n->hs_term = out->term;
    n->hs_vote = out->vote;
}

uint64_t sim_first_bad(const struct sim_node *n, bool disk)
{
    if (!n->damaged) {
        return 0;
    }
    uint64_t len = disk ? n->dlen : n->vlen;
    const struct sim_entry *log = disk ? n->dlog : n->vlog;
    /* Below the core's snapshot a committed retention cut covers it. */
    uint64_t from = n->up ? n->raft.snap_index + 1 : 1;
    for (uint64_t k = from; k <= len; k++) {
        if (log[k].bad) {
            return k;
        }
    }
    return 0;
}

static void report_faulty(struct sim *s, uint32_t i)
{
    struct sim_node *n = &s->nodes[i];
    struct raft_in in = {.type = RAFT_IN_FAULTY};
    in.faulty.index = sim_first_bad(n, false);
    in.faulty.extent_index = n->vlen;
    in.faulty.extent_term = n->vlen > 0 ? n->vlog[n->vlen].term : 0;
    if (in.faulty.index <= n->raft.snap_index) {
        in.faulty.index = 0; /* covered by the snapshot (discard rule b) */
    }
    sim_node_step(s, i, &in);
}

/* The store's repair: the copy verifies when, re-chained from the local
 * predecessor, it gives the hash the local record had (the successor's
 * prev-checksum in the real store). Written in place and synced. */
static void repair(struct sim *s, uint32_t i, const struct raft_repair *rp)
{
    struct sim_node *n = &s->nodes[i];
    uint64_t k = rp->index;
    if (k == 0 || k > n->vlen) {
        sim_violation(s, "driver: node %u asked to repair %llu past its log",
                      i + 1, (unsigned long long)k);
        return;
    }
    if (!n->vlog[k].bad) {
        return; /* copies run on from the fault: an intact record */
    }
    struct sim_entry e = {
        .term = rp->entry.term, .type = rp->entry.type, .len = rp->entry.len};
    if (e.len > SIM_PAYLOAD_MAX) {
        return;
    }
    if (e.len > 0) {
        memcpy(e.payload, rp->entry.buf, e.len);
    }
    if (e.type == RAFT_ENTRY_NORMAL && e.len == 8) {
        memcpy(&e.id, rp->entry.buf, 8);
    }
    e.hash = inv_entry_hash(k > 1 ? n->vlog[k - 1].hash : 0, k, &e);
    if (e.hash != n->vlog[k].hash) {
        sim_trace(s, (int)i, "repair of %llu does not verify",
                  (unsigned long long)k);
        return;
    }
    n->vlog[k].bad = 0;
    if (k <= n->dlen && n->dlog[k].hash == e.hash) {
        n->dlog[k].bad = 0;
    }
    s->stats.repairs++;
    sim_trace(s, (int)i, "repaired %llu", (unsigned long long)k);
    report_faulty(s, i);
}

void sim_flip(struct sim *s, uint32_t i)
{
    struct sim_node *n = &s->nodes[i];
    uint64_t top = n->dlen < n->vlen ? n->dlen : n->vlen;
    uint64_t low = n->raft.snap_index + 1;
    if (!n->up || top < low) {
        return;
    }
    /* Often the newest synced record: the one most likely not committed
     * yet, where counting it would matter. */
    uint64_t k =
        sim_rnd(s, 2) ? top : low + sim_rnd(s, (uint32_t)(top - low + 1));
    sim_flip_at(s, i, k);
}

void sim_flip_at(struct sim *s, uint32_t i, uint64_t k)
{
    struct sim_node *n = &s->nodes[i];
    ASSERT(n->up);
    ASSERT(k > n->raft.snap_index && k <= n->dlen && k <= n->vlen);
    if (n->dlog[k].hash != n->vlog[k].hash) {
        return;
    }
    n->dlog[k].bad = 1;
    n->vlog[k].bad = 1;
    n->damaged = true;
    n->flip_counted =
        n->raft.role == RAFT_LEADER ? n->raft.commit : n->raft.persisted;
    s->stats.flips++;
    sim_trace(s, (int)i, "BIT FLIP at %llu (%s, commit %llu)",
              (unsigned long long)k, role_name(n->raft.role),
              (unsigned long long)n->raft.commit);
    report_faulty(s, i);
}

void sim_node_step(struct sim *s, uint32_t i, struct raft_in *in)
{
    struct sim_node *n = &s->nodes[i];
    struct raft_out *out = s->out;
    uint8_t role_before = n->raft.role;
    ASSERT(n->up);
    in->now_ms = s->now;
    s->steps++;
    int rv = raft_step(&n->raft, in, out);
    if (in->type == RAFT_IN_PROPOSE || in->type == RAFT_IN_CHANGE ||
        in->type == RAFT_IN_TRANSFER || in->type == RAFT_IN_READ_INDEX) {
        s->last_rv = rv;
    }
    if (out->hs_changed) {
        node_hard_state(s, i, out);
    }
    if (out->amnesia_changed) {
        n->amnesiac = out->amnesiac;
        n->amnesia_t0 = out->amnesia_t0;
        n->amnesia_target = out->amnesia_target;
        if (!out->amnesiac) {
            inv_amnesia_exit(s, i);
        }
        sim_trace(s, (int)i, "amnesia %s (t0 %llu target %llu)",
                  out->amnesiac ? "target learned" : "cleared",
                  (unsigned long long)out->amnesia_t0,
                  (unsigned long long)out->amnesia_target);
    }
    if (out->truncate_from != 0 && in->type == RAFT_IN_RECEIVE &&
        in->msg->type == RAFT_MSG_DISCARD_RESP) {
        s->stats.discards++; /* rule 1c: a discard round decided */
    }
    store_entries(s, i, out);
    if (role_before != out->role) {
        sim_trace(s, (int)i, "role %s term %llu", role_name(out->role),
                  (unsigned long long)out->term);
    }
    if (out->became_leader) {
        s->stats.leaders++;
        inv_leader(s, i);
    }
    for (uint32_t j = 0; j < out->n_msgs; j++) {
        if (!s->p.bench) {
            trace_msg(s, i, &out->msgs[j], false);
        }
        net_send(s, i, &out->msgs[j]);
    }
    if (out->commit > n->commit_seen) {
        inv_commit(s, i, out->commit);
    }
    if (out->role == RAFT_LEADER && n->raft.commit > out->commit) {
        inv_faulty_leader_commit(s, i, n->raft.commit);
    }
    for (uint32_t j = 0; j < out->n_reads; j++) {
        inv_read(s, i, &out->reads[j]);
    }
    if (out->has_snapshot) {
        stage_chunk(s, i, &out->snapshot);
    }
    node_schedule_tick(s, i, out->timeout_ms);
    /* out is reused by the steps a repair reports: copy the list first. */
    uint32_t nr = out->n_repairs;
    struct raft_repair rps[RAFT_OUT_REPAIRS_MAX];
    memcpy(rps, out->repairs, nr * sizeof rps[0]);
    for (uint32_t j = 0; j < nr; j++) {
        repair(s, i, &rps[j]);
    }
}

/* ---- node lifecycle ---- */

/* Open the data directory: the scanner keeps records up to the first one
 * whose term exceeds the hard-state term (docs/design.md §4.4). */
void sim_node_boot(struct sim *s, uint32_t i)
{
    struct sim_node *n = &s->nodes[i];
    struct raft_params p = {.id = i + 1,
                            .incarnation = n->incarnation,
                            .seed = sim_rand(s),
                            .election_timeout_ms = SIM_ELECTION_MS,
                            .heartbeat_ms = SIM_HEARTBEAT_MS,
                            .append_entries_max = s->batch_max};
    ASSERT(!n->up);
    /* A restart after a process crash finds the page cache: the store
     * syncs what it reads before reporting anything as persisted. */
    for (uint32_t k = 0; k < n->n_ops; k++) {
        disk_apply(s, n, &n->ops[k]);
    }
    n->n_ops = 0;
    n->syncing = false;
    n->sync_gen++;
    uint64_t len = 0;
    while (len < n->dlen && n->dlog[len + 1].term <= n->hs_term) {
        len++;
    }
    len = sim_disk_scan(s, i, len);
    n->dlen = len;
    int rv = raft_init(&n->raft, &p);
    ASSERT(rv == 0);
    n->raft.mutations = s->p.mutations & 0xffffu;
    raft_load_hard_state(&n->raft, n->hs_term, n->hs_vote);
    n->vlen = 0;
    n->n_cfg = 0;
    for (uint64_t k = 1; k <= len; k++) {
        struct sim_entry e = n->dlog[k];
        e.hash = inv_entry_hash(k > 1 ? n->vlog[k - 1].hash : 0, k, &e);
        inv_created(s, i, k, &e);
        n->dlog[k].hash = e.hash;
        n->vlog[k] = e;
        n->vlen = k;
        cfg_track(s, n, k);
        struct raft_entry re = {
            .term = e.term, .type = e.type, .len = e.len, .buf = e.payload};
        rv = raft_load_entry(&n->raft, k, &re);
        if (rv != 0) {
            sim_violation(s, "node %u: load of entry %llu failed (%d)", i + 1,
                          (unsigned long long)k, rv);
            break;
        }
    }
    uint64_t bad = sim_first_bad(n, false);
    if (bad != 0) {
        /* Rule 1: the extent is the last record (the sim keeps terms of
         * damaged records, so the tail term is known). */
        raft_load_faulty(&n->raft, bad, n->vlen, n->vlog[n->vlen].term);
    }
    if (n->amnesiac) {
        raft_load_amnesia(&n->raft, n->amnesia_t0, n->amnesia_target);
    }
    raft_start(&n->raft, s->now);
    n->up = true;
    n->commit_seen = 0;
    sim_trace(s, (int)i, "boot inc %llx hs t%llu log %llu",
              (unsigned long long)n->incarnation,
              (unsigned long long)n->hs_term, (unsigned long long)len);
    struct raft_in in = {.type = RAFT_IN_TICK};
    sim_node_step(s, i, &in);
}

/* Rule 3: a truncated segment or a missing catalogued file: synced (maybe
 * acknowledged) records are gone; the node is amnesiac with T0 = its
 * durable term. */
static void lose_tail(struct sim *s, struct sim_node *n)
{
    ASSERT(!n->up);
    ASSERT(n->dlen < SIM_LOG_MAX);
    n->n_ops = 0;
    uint64_t cut = n->dlen > 1 ? 1 + sim_rnd(s, (uint32_t)(n->dlen - 1)) : 1;
    if (s->lose_tail_at != 0) {
        cut = s->lose_tail_at; /* a scripted trace chose it */
        s->lose_tail_at = 0;
    }
    n->lost_from = cut;
    n->lost_to = n->raft.persisted < n->dlen ? n->raft.persisted : n->dlen;
    for (uint64_t x = cut + 1; x <= n->lost_to; x++) {
        n->lost[x] = n->dlog[x].hash;
    }
    if (n->dlen > cut) {
        n->dlen = cut;
    }
    n->amnesiac = true;
    /* What its acks may already have been counted for. */
    n->flip_counted =
        n->raft.role == RAFT_LEADER ? n->raft.commit : n->raft.persisted;
    n->amnesia_t0 = n->hs_term > 0 ? n->hs_term : 1;
    n->amnesia_target = 0;
    s->stats.amnesias++;
}

void sim_node_stop(struct sim *s, uint32_t i, enum sim_stop_kind k)
{
    struct sim_node *n = &s->nodes[i];
    ASSERT(n->up);
    n->up = false;
    raft_close(&n->raft);
    if (k == STOP_POWER_REORDER) {
        sim_disk_power_reorder(s, i);
    }
    n->syncing = false;
    n->sync_gen++;
    n->timer_gen++;
    n->hs_pending = false; /* the process never wrote it */
    if (k == STOP_POWER) {
        /* Writeback reached a prefix of the unsynced writes; the rest,
         * including the page cache, is gone. */
        uint32_t keep = sim_rnd(s, n->n_ops + 1);
        for (uint32_t j = 0; j < keep; j++) {
            disk_apply(s, n, &n->ops[j]);
        }
        n->n_ops = 0;
    }
    if (k == STOP_LOSE_TAIL) {
        lose_tail(s, n);
    }
    if (k == STOP_WIPE) {
        s->wiped_inc[i] = n->incarnation;
        n->incarnation = sim_rand(s) | 1;
        n->dlen = 0;
        n->n_ops = 0;
        n->hs_term = 0;
        n->hs_vote = 0;
        n->amnesiac = false; /* a new incarnation: nothing to remember */
        n->marker = 0;
        n->marker_prev = 0;
        n->marker_bad = false;
    }
    n->vlen = 0;
    if (k == STOP_CRASH) {
        s->stats.crashes++;
    } else if (k == STOP_POWER || k == STOP_LOSE_TAIL ||
               k == STOP_POWER_REORDER) {
        s->stats.power_losses++;
    } else {
        s->stats.wipes++;
    }
    sim_trace(s, (int)i, "%s",
              k == STOP_CRASH           ? "CRASH (process)"
              : k == STOP_POWER         ? "POWER LOSS"
              : k == STOP_LOSE_TAIL     ? "POWER LOSS, LOG TAIL LOST (amnesia)"
              : k == STOP_POWER_REORDER ? "POWER LOSS, writeback reordered"
                                        : "WIPE (new incarnation)");
    sim_ev_push(s, s->now + 20 + sim_rnd(s, 400), EV_RESTART, i, n->sync_gen,
                NULL);
}

/* The install is durable: the retained log through X and the snapshot are on
 * disk. A local entry at X with the leader's term keeps the log after it. */
void sim_install(struct sim *s, uint32_t i, uint64_t gen)
{
    struct sim_node *n = &s->nodes[i];
    if (!n->up || gen != n->install_gen) {
        return;
    }
    uint64_t x = n->stage_index;
    if (n->stage_n != x || x == 0) {
        sim_violation(s, "driver: node %u installs an incomplete snapshot",
                      i + 1);
        return;
    }
    if (n->install_gen % 3 == 1) {
        /* A node refuses the content of its first complete transfer and
         * of every third after it (a spool damaged on the leader's disk,
         * finding F29): the core forgets it and answers the leader with
         * failure; the leader starts again at 0. No RNG draw: the faults
         * each seed draws stay as they were. */
        s->stats.refusals++;
        sim_trace(s, (int)i, "snapshot %llu refused", (unsigned long long)x);
        n->stage_n = 0;
        struct raft_in in = {.type = RAFT_IN_SNAPSHOT_REFUSED};
        in.snapshot.index = x;
        in.snapshot.term = n->stage_term;
        sim_node_step(s, i, &in);
        return;
    }
    for (uint64_t k = 1; k <= x; k++) {
        struct sim_entry *e = &n->stage[k];
        e->bad = 0; /* a snapshot is state, not the damaged bytes */
        e->hash = inv_entry_hash(k > 1 ? n->stage[k - 1].hash : 0, k, e);
        inv_created(s, i, k, e);
    }
    bool keep = n->vlen >= x && n->vlog[x].hash == n->stage[x].hash;
    memcpy(&n->dlog[1], &n->stage[1], x * sizeof *n->dlog);
    if (keep) {
        for (uint64_t k = 1; k <= x; k++) {
            n->vlog[k].bad = 0; /* discard rule (b): the snapshot covers it */
        }
        if (n->dlen < x) {
            n->dlen = x;
        }
    } else {
        memcpy(&n->vlog[1], &n->stage[1], x * sizeof *n->vlog);
        n->vlen = x;
        n->dlen = x;
        n->marker = x; /* the install syncs the replaced log */
        n->marker_prev = x;
        n->marker_bad = false;
        n->n_ops = 0;
        n->syncing = false;
        n->sync_gen++;
        n->n_cfg = 0;
        for (uint64_t k = 1; k <= x; k++) {
            cfg_track(s, n, k);
        }
    }
    s->stats.installs++;
    sim_trace(s, (int)i, "snapshot %llu installed (%s)", (unsigned long long)x,
              keep ? "log kept" : "log replaced");
    struct raft_in in = {.type = RAFT_IN_SNAPSHOT_INSTALLED};
    in.snapshot.index = x;
    in.snapshot.term = n->stage_term;
    in.snapshot.config = &n->stage_config;
    if (keep) {
        for (uint64_t k = x + 1; in.snapshot.faulty == 0 && k <= n->vlen; k++) {
            in.snapshot.faulty = n->vlog[k].bad ? k : 0;
        }
    }
    sim_node_step(s, i, &in);
    if (n->up && sim_first_bad(n, false) > x) {
        report_faulty(s, i); /* damage after X survives the install */
    }
}

/* Compact the core's log at what is applied and persisted (docs/design.md §5: a
 * snapshot at X only after entries <= X are persisted locally). */
void sim_take_snapshot(struct sim *s, uint32_t i)
{
    struct sim_node *n = &s->nodes[i];
    struct raft *r = &n->raft;
    uint64_t x = n->commit_seen < r->persisted ? n->commit_seen : r->persisted;
    if (!n->up || x <= r->snap_index + 50 || x > r->commit) {
        return;
    }
    struct raft_in in = {.type = RAFT_IN_APPLIED, .applied = r->commit};
    sim_node_step(s, i, &in);
    in = (struct raft_in){.type = RAFT_IN_SNAPSHOT_TAKEN};
    in.snapshot.index = x;
    in.snapshot.term = raft_term_at(r, x);
    sim_node_step(s, i, &in);
    s->stats.snapshots++;
    sim_trace(s, (int)i, "snapshot taken at %llu", (unsigned long long)x);
}
