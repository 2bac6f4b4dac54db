/* The Raft driver: see replica.h for the contract it implements. */
#include "replica.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/assert.h>
#include <keel/bytes.h>
#include <keel/error.h>
#include <keel/grow.h>

#include "meta.h"
#include "replica_int.h"

/* The held messages' buffer, made when a message first waits for a hard
 * state sync and freed once they are sent: an idle group keeps none.
 * False when it cannot be made (the message is dropped: Raft resends). */
static bool held_room(struct replica *r)
{
    if (r->held == NULL) {
        r->held = malloc(REPLICA_HELD_MSGS_MAX * sizeof *r->held);
    }
    return r->held != NULL;
}

static int handle_out(struct replica *r);
static const struct replica_turn_hooks *turn_hooks;

void replica_set_turn_hooks(const struct replica_turn_hooks *hooks)
{
    turn_hooks = hooks;
}

static int turn_enter(enum replica_turn_kind k)
{
    return turn_hooks != NULL ? turn_hooks->enter(turn_hooks->phase[k]) : 0;
}

static void turn_leave(int prev)
{
    if (turn_hooks != NULL) {
        turn_hooks->leave(prev);
    }
}

static void on_timer(uv_timer_t *t);

static void fail(struct replica *r, int rv, const char *msg)
{
    if (r->cbs.failed != NULL) {
        r->cbs.failed(r, rv, msg, r->cbs.arg);
    }
}

static uint64_t now_ms(struct replica *r)
{
    return uv_now(r->host->loop);
}

void replica__break(struct replica *r, int rv, const char *msg)
{
    r->broken = true;
    uv_timer_stop(&r->timer);
    fail(r, rv, msg);
}

/* One input into raft, then its output handled. */
static int step(struct replica *r, struct raft_in *in)
{
    if (r->broken) {
        return KEEL_EIO; /* replica__break said why */
    }
    in->now_ms = now_ms(r);
    int rv = raft_step(&r->raft, in, &r->out);
    int hv = handle_out(r);
    if ((r->fault_check || r->repair_restart) && !r->closing) {
        r->fault_check = false; /* a read of this step found damage */
        replica__fault_report(r);
    }
    return rv != 0 ? rv : hv;
}

int replica__step(struct replica *r, struct raft_in *in)
{
    ASSERT(r != NULL && in != NULL);
    ASSERT(!r->closing);
    return step(r, in);
}

static void send_raw(struct replica *r, const struct raft_msg *m)
{
    r->cbs.send(r, m, r->cbs.arg);
}

static void send_msg(struct replica *r, const struct raft_msg *m)
{
    if (r->cbs.send == NULL) {
        return;
    }
    if (m->type == RAFT_MSG_SNAPSHOT && m->snapshot.chunk == NULL) {
        struct raft_msg copy;
        if (replica__snap_fill(r, m, &copy) == 0) {
            r->cbs.send(r, &copy, r->cbs.arg);
        }
        return; /* not filled: the core resends on a heartbeat */
    }
    if (m->type == RAFT_MSG_FETCH_RESP) {
        replica__fill_fetch(r, m, send_raw);
        return;
    }
    if (m->type != RAFT_MSG_APPEND || m->append.n_entries == 0) {
        r->cbs.send(r, m, r->cbs.arg);
        return;
    }
    /* Fill the range from the send cache, else the store (reads verify
     * checksums). On the stack: bounded by RAFT_APPEND_ENTRIES_MAX, and two
     * callocs per follower per AppendEntries showed in the leader's
     * profile (docs/bench.md, "Where a replicated publish goes"). */
    uint32_t n = m->append.n_entries;
    ASSERT(n <= RAFT_APPEND_ENTRIES_MAX);
    struct raft_entry es[RAFT_APPEND_ENTRIES_MAX];
    struct store_entry se[RAFT_APPEND_ENTRIES_MAX];
    uint32_t got = 0;
    char err[KEEL_ERRMSG_MAX];
    for (; got < n; got++) {
        se[got].payload = NULL; /* freed at cleanup when read */
        if (replica__cache_get(r, m->append.prev_index + 1 + got, &es[got])) {
            continue;
        }
        int rv =
            store_read(r->g, m->append.prev_index + 1 + got, &se[got], err);
        if (rv != 0) {
            /* Damage found now: the core learns it after this step. */
            r->fault_check = rv == KEEL_ECORRUPT || rv == KEEL_EFAULTY;
            goto cleanup;
        }
        es[got] = (struct raft_entry){.term = se[got].term,
                                      .type = se[got].type,
                                      .len = se[got].len,
                                      .buf = se[got].payload};
    }
    struct raft_msg copy = *m;
    copy.append.entries = es;
    r->cbs.send(r, &copy, r->cbs.arg);
cleanup:
    for (uint32_t i = 0; i < got; i++) {
        store_entry_free(&se[i]);
    }
}

static uint64_t ctx_take(struct replica *r, raft_index index, raft_term term)
{
    while (r->ctx_n > 0) {
        struct replica_ctx *c = &r->ctxs[r->ctx_head];
        if (c->index > index) {
            return 0;
        }
        r->ctx_head = (r->ctx_head + 1) % r->ctx_cap;
        r->ctx_n--;
        if (c->index == index) {
            return c->term == term ? c->ctx : 0;
        }
    }
    return 0;
}

/* Room in the ring for need contexts. The ring and the queue grow as
 * proposals arrive (up to REPLICA_QUEUE_MAX between them) rather than
 * start at their bound: a node holds thousands of mostly idle groups.
 * Returns 0 or KEEL_ENOMEM. */
static int ctx_reserve(struct replica *r, size_t need)
{
    if (need <= r->ctx_cap) {
        return 0;
    }
    size_t cap = r->ctx_cap == 0 ? 16 : r->ctx_cap;
    while (cap < need) {
        cap *= 2;
    }
    return keel_ring_resize(&r->ctxs, sizeof *r->ctxs, &r->ctx_cap,
                            &r->ctx_head, r->ctx_n, cap);
}

static void ctx_push(struct replica *r, raft_index index, raft_term term,
                     uint64_t ctx)
{
    ASSERT(r->ctx_n < r->ctx_cap && r->ctx_n < REPLICA_QUEUE_MAX);
    uint32_t k = (r->ctx_head + r->ctx_n) % r->ctx_cap;
    r->ctxs[k] = (struct replica_ctx){.index = index, .term = term, .ctx = ctx};
    r->ctx_n++;
}

/* Apply (applied, commit] from the store, then report applied. */
static int apply_one(void *arg, const struct store_entry *e)
{
    struct replica *r = arg;
    uint64_t ctx = ctx_take(r, e->index, e->term);
    ASSERT(e->index == r->applied + 1);
    if (r->cbs.apply != NULL) {
        r->cbs.apply(r, e->index, e->term, e->type, e->payload, e->len, ctx,
                     r->cbs.arg);
    }
    r->applied = e->index;
    return 0;
}

/* Apply committed entries read back from the store (checksum-verified),
 * in runs of one pread each. */
static void on_idle(uv_idle_t *h);

static int apply_to(struct replica *r, raft_index commit)
{
    char err[KEEL_ERRMSG_MAX];
    raft_index from = r->applied;
    raft_index to = commit;
    if (r->apply_turn_max > 0 && to > r->applied &&
        to - r->applied > r->apply_left) {
        /* The rest waits for the next loop turn (on_idle). */
        to = r->applied + r->apply_left;
        if (!r->closing) {
            uv_idle_start(&r->idle, on_idle);
        }
    }
    if (r->applied < to) {
        int rv = store_read_range(r->g, r->applied + 1, to, apply_one, r, err);
        if (rv == KEEL_ECORRUPT || rv == KEEL_EFAULTY) {
            /* Rule 5: a damaged record is never applied; the core stops
             * apply before it and the group repairs or waits. */
            r->fault_check = true;
        } else if (rv != 0) {
            fail(r, rv, err);
            return rv;
        }
    }
    if (r->applied == from) {
        return 0;
    }
    if (r->apply_turn_max > 0) {
        uint64_t n = r->applied - from;
        r->apply_left -= n < r->apply_left ? (uint32_t)n : r->apply_left;
    }
    struct raft_in in = {.type = RAFT_IN_APPLIED, .applied = r->applied};
    return step(r, &in);
}

/* Entries that do not continue the store's log: the store asserts that
 * an append continues it, so such an append is never handed to it. The
 * group stops (replica__break) with what the next run needs to find the
 * path (finding F19 was one: a log that ended below the snapshot the core
 * started at). */
static int discontinuous(struct replica *r, const struct raft_out *o, char *err)
{
    char hex[33];
    store_group_id_hex(&r->gid, hex);
    return keel_err(KEEL_EINVAL, err,
                    "group %s: raft wrote entries from index %llu but the "
                    "store's log ends at %llu (raft: last %llu, snapshot %llu, "
                    "commit %llu, applied %llu, role %d, amnesiac %d, faulty "
                    "%llu; install receiving %d): the group stops, restart "
                    "the node (it loads the log the store holds) and report "
                    "this",
                    hex, (unsigned long long)o->entries_first,
                    (unsigned long long)(store_next_index(r->g) - 1),
                    (unsigned long long)r->raft.last_index,
                    (unsigned long long)r->raft.snap_index,
                    (unsigned long long)r->raft.commit,
                    (unsigned long long)r->applied, (int)r->raft.role,
                    (int)r->raft.amnesiac, (unsigned long long)r->raft.faulty,
                    (int)(r->snap.xfer.sr != NULL));
}

static int persist_out(struct replica *r, const struct raft_out *o)
{
    char err[KEEL_ERRMSG_MAX];
    int rv = 0;
    if (o->hs_changed) {
        uint8_t vote[8];
        keel_put_le64(vote, o->vote);
        rv = store_hard_state_save(r->g, o->term, vote, sizeof(vote), err);
        if (rv != 0) {
            goto cleanup;
        }
        r->hs_issued++;
    }
    rv = replica__fault_out(r, o, err);
    rv = rv == 0 ? replica__recover_out(r, o, err) : rv;
    if (rv != 0) {
        goto cleanup;
    }
    if (o->truncate_from != 0) {
        rv = store_truncate(r->g, o->truncate_from, err);
        if (rv != 0) {
            goto cleanup;
        }
    }
    if (o->n_entries > 0 && o->entries_first != store_next_index(r->g)) {
        rv = discontinuous(r, o, err);
        replica__break(r, rv, err);
        return rv;
    }
    if (o->n_entries > 0) {
        struct store_record recs[RAFT_OUT_ENTRIES_MAX];
        ASSERT(o->n_entries <= RAFT_OUT_ENTRIES_MAX);
        for (uint32_t i = 0; i < o->n_entries; i++) {
            recs[i] = (struct store_record){.index = o->entries_first + i,
                                            .term = o->entries[i].term,
                                            .type = o->entries[i].type,
                                            .len = o->entries[i].len,
                                            .payload = o->entries[i].buf};
        }
        rv = store_append(r->g, recs, o->n_entries, err);
    }
cleanup:
    if (rv != 0) {
        fail(r, rv, err);
    }
    return rv;
}

/* The driver's contract, steps 1-6, for r->out. */
static int handle_out(struct replica *r)
{
    struct raft_out *o = &r->out;
    int rv = persist_out(r, o);
    if (rv != 0) {
        return rv;
    }
    if (o->has_snapshot) {
        replica__snap_chunk(r, &o->snapshot); /* may install (blocking) */
    }
    for (uint32_t i = 0; i < o->n_msgs; i++) {
        if (r->hs_issued == r->hs_done) {
            send_msg(r, &o->msgs[i]);
        } else if (r->n_held < REPLICA_HELD_MSGS_MAX && held_room(r)) {
            r->held[r->n_held++] = o->msgs[i]; /* raft resends on loss */
        }
    }
    if (o->role != r->role || o->leader != r->leader) {
        if (o->role != RAFT_LEADER) {
            replica__cache_drop(r);
        }
        r->role = o->role;
        r->leader = o->leader;
        if (r->cbs.role_changed != NULL) {
            r->cbs.role_changed(r, r->role, r->leader, r->cbs.arg);
        }
    }
    if (!r->closing) {
        uint64_t now = now_ms(r);
        uint64_t due = o->timeout_ms;
        if (r->align_ms > 0 && r->role == RAFT_LEADER) {
            due = (due + r->align_ms - 1) / r->align_ms * r->align_ms;
        }
        uint64_t t = due > now ? due - now : 0;
        r->timer_due = now + t;
        uv_timer_start(&r->timer, on_timer, t, 0);
    }
    rv = apply_to(r, o->commit);
    replica__snap_install_step(r); /* o is not used past apply_to */
    return rv;
}

static void on_timer(uv_timer_t *t)
{
    struct replica *r = t->data;
    struct raft_in in = {.type = RAFT_IN_TICK};
    if (!r->tick_deferred && now_ms(r) > r->timer_due + REPLICA_LATE_TICK_MS) {
        /* A loop turn held the loop past the due time: what the peers
         * sent meanwhile (heartbeats, votes, responses) waits unread, and
         * libuv runs timers before the poll. Judged now, every follower
         * would start an election and every leader would miss its quorum
         * (check-quorum). The tick waits 1 ms: this iteration's poll reads
         * first (docs/cluster.md, "Loop turns"). Once per tick. */
        r->tick_deferred = true;
        r->ticks_deferred++;
        uv_timer_start(&r->timer, on_timer, 1, 0);
        return;
    }
    r->tick_deferred = false;
    int ph = turn_enter(REPLICA_TURN_TIMER);
    (void)step(r, &in);
    turn_leave(ph);
}

/* Flush the queued proposals as one raft step each RAFT_PROPOSE_ENTRIES_MAX
 * (one store append batch per step: group commit). */
static void flush_queue(struct replica *r)
{
    struct raft_entry es[RAFT_PROPOSE_ENTRIES_MAX];
    uint32_t done = 0;
    while (done < r->n_queue && !r->broken) {
        uint32_t n = r->n_queue - done;
        n = n > RAFT_PROPOSE_ENTRIES_MAX ? RAFT_PROPOSE_ENTRIES_MAX : n;
        if (ctx_reserve(r, r->ctx_n + n) != 0) {
            /* Out of memory: the rest is dropped below, never proposed
             * and never acked (their clients time out and retry). */
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            struct replica_prop *p = &r->queue[done + i];
            es[i] = (struct raft_entry){
                .term = 0, .type = p->type, .len = p->len, .buf = p->buf};
        }
        raft_index first = r->raft.last_index + 1;
        struct raft_in in = {.type = RAFT_IN_PROPOSE,
                             .propose = {.n = n, .entries = es}};
        in.now_ms = now_ms(r);
        int rv = raft_step(&r->raft, &in, &r->out);
        if (rv == 0) {
            ASSERT(r->out.entries_first == first);
            for (uint32_t i = 0; i < n; i++) {
                struct replica_prop *p = &r->queue[done + i];
                ctx_push(r, first + i, r->out.entries[i].term, p->ctx);
                /* The cache takes the payload (the append below still
                 * writes it from r->out, which points at it). */
                if (replica__cache_put(r, first + i, r->out.entries[i].term,
                                       p->type, p->len, p->buf)) {
                    p->buf = NULL;
                }
            }
        }
        (void)handle_out(r);
        done += n;
    }
    for (uint32_t i = 0; i < r->n_queue; i++) {
        free(r->queue[i].buf);
    }
    r->n_queue = 0;
}

static void on_idle(uv_idle_t *h)
{
    struct replica *r = h->data;
    uv_idle_stop(h);
    int ph = turn_enter(REPLICA_TURN_PROPOSE);
    flush_queue(r);
    /* A new turn: a bounded apply goes on (apply_turn_max). */
    r->apply_left = r->apply_turn_max;
    if (r->applied < r->raft.commit && !r->broken && !r->closing) {
        (void)apply_to(r, r->raft.commit);
    }
    /* An install goes on by one step (decision 0041). */
    if (replica__installing(r) && !r->broken && !r->closing) {
        replica__snap_install_kick(r);
    }
    turn_leave(ph);
}

void replica__idle_start(struct replica *r)
{
    if (!r->closing) {
        uv_idle_start(&r->idle, on_idle);
    }
}

/* A new entry may be queued: the group runs (a broken one leads no more),
 * leads when need_leader, and the ring has room. */
static int can_queue(const struct replica *r, bool need_leader, char *errmsg)
{
    if (r->broken || (need_leader && (!r->started || r->role != RAFT_LEADER))) {
        return keel_err(KEEL_ENOTLEADER, errmsg,
                        "this node does not lead the group: retry at the "
                        "leader");
    }
    /* Queued proposals take their ring slots at the next flush. */
    if (r->n_queue + r->ctx_n >= REPLICA_QUEUE_MAX) {
        return keel_err(KEEL_EBUSY, errmsg,
                        "%u proposals await commit: retry after acks",
                        REPLICA_QUEUE_MAX);
    }
    return 0;
}

int replica_propose_take(struct replica *r, uint8_t type, void *payload,
                         uint32_t len, uint64_t ctx, char *errmsg)
{
    ASSERT(r != NULL);
    ASSERT(payload != NULL);
    uint8_t *buf = payload;
    int rv = can_queue(r, true, errmsg);
    if (rv != 0) {
        free(buf);
        return rv;
    }
    if (keel_grow_u32(&r->queue, &r->queue_cap, r->n_queue, sizeof *r->queue,
                      16) != 0) {
        free(buf);
        return keel_err(KEEL_ENOMEM, errmsg, "proposal queue");
    }
    r->queue[r->n_queue++] =
        (struct replica_prop){.type = type, .len = len, .buf = buf, .ctx = ctx};
    if (r->n_queue == 1) {
        uv_idle_start(&r->idle, on_idle);
    }
    return 0;
}

int replica_propose(struct replica *r, uint8_t type, const void *payload,
                    uint32_t len, uint64_t ctx, char *errmsg)
{
    ASSERT(payload != NULL || len == 0);
    uint8_t *buf = malloc(len > 0 ? len : 1);
    if (buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "proposal of %u bytes", len);
    }
    if (len > 0) {
        memcpy(buf, payload, len);
    }
    return replica_propose_take(r, type, buf, len, ctx, errmsg);
}

int replica_receive(struct replica *r, const struct raft_msg *m, char *errmsg)
{
    ASSERT(r != NULL && m != NULL);
    if (!r->started) {
        return keel_err(KEEL_EAGAIN, errmsg, "group is still opening");
    }
    if (!replica__snap_receive(r, m)) {
        return 0; /* dropped (a bad snapshot frame aborts its transfer) */
    }
    struct raft_in in = {.type = RAFT_IN_RECEIVE, .msg = m};
    int rv = step(r, &in);
    if (rv == 0) {
        replica__follow_note(r, m);
    }
    return rv;
}

/* ---- store events ---- */

static void start_group(struct replica *r)
{
    r->started = true;
    raft_start(&r->raft, now_ms(r));
    r->persisted = r->raft.last_index;
    struct raft_in in = {.type = RAFT_IN_TICK};
    (void)step(r, &in);
}

static void on_event(struct replica *r, const struct store_event *ev)
{
    if (ev->type == STORE_EV_HARD_STATE) {
        /* Two saves completed before one poll give one event: a count,
         * or the node would hold its messages for good (finding F10: a
         * resumed old leader stepped down and voted in one go and never
         * answered again). */
        ASSERT(ev->index <= r->hs_issued);
        r->hs_done = ev->index > r->hs_done ? ev->index : r->hs_done;
        if (r->hs_done < r->hs_issued) {
            return;
        }
        for (uint32_t i = 0; i < r->n_held; i++) {
            send_msg(r, &r->held[i]);
        }
        r->n_held = 0;
        free(r->held);
        r->held = NULL;
        if (r->held_persisted == 0) {
            return;
        }
        /* A persisted report that waited for the hard state. */
        struct store_event pe = {.type = STORE_EV_PERSISTED,
                                 .index = r->held_persisted,
                                 .term = r->held_term};
        r->held_persisted = 0;
        on_event(r, &pe);
        return;
    }
    if (ev->type == STORE_EV_REPAIRED) {
        if (r->started) {
            replica__fault_report(r); /* the next fault, or intact again */
        }
        return;
    }
    if (ev->type != STORE_EV_PERSISTED) {
        return; /* space events */
    }
    if (!r->started) {
        if (r->boot_wait != 0 && ev->index >= r->boot_wait) {
            start_group(r);
        }
        return;
    }
    if (r->hs_done < r->hs_issued) {
        r->held_persisted = ev->index;
        r->held_term = ev->term;
        return;
    }
    r->persisted = ev->index;
    struct raft_in in = {.type = RAFT_IN_PERSISTED,
                         .persisted = {.index = ev->index, .term = ev->term}};
    (void)step(r, &in);
    replica__snap_kick(r);
    replica__snap_install_kick(r);
}

#define BY_STORE_MASK (2 * REPLICA_GROUPS_MAX - 1)
_Static_assert((REPLICA_GROUPS_MAX & (REPLICA_GROUPS_MAX - 1)) == 0,
               "the by_store table's size is a power of two");

static uint32_t by_store_slot(const struct store_group *g)
{
    uint64_t x = (uint64_t)(uintptr_t)g;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (uint32_t)(x & BY_STORE_MASK);
}

static void by_store_put(struct replica_host *h, struct replica *r)
{
    uint32_t i = by_store_slot(r->g);
    while (h->by_store[i] != NULL) {
        i = (i + 1) & BY_STORE_MASK;
    }
    h->by_store[i] = r;
}

static struct replica *host_find(struct replica_host *h, struct store_group *g)
{
    for (uint32_t i = by_store_slot(g); h->by_store[i] != NULL;
         i = (i + 1) & BY_STORE_MASK) {
        if (h->by_store[i]->g == g) {
            return h->by_store[i];
        }
    }
    return NULL;
}

/* Remove r; the entries after it in its probe run move back over the hole
 * when their home slot does not lie (cyclically) between the hole and
 * them, so every entry stays reachable from its home slot. */
static void by_store_del(struct replica_host *h, const struct replica *r)
{
    uint32_t i = by_store_slot(r->g);
    while (h->by_store[i] != r) {
        ASSERT(h->by_store[i] != NULL);
        i = (i + 1) & BY_STORE_MASK;
    }
    h->by_store[i] = NULL;
    for (uint32_t j = (i + 1) & BY_STORE_MASK; h->by_store[j] != NULL;
         j = (j + 1) & BY_STORE_MASK) {
        uint32_t home = by_store_slot(h->by_store[j]->g);
        if (((j - home) & BY_STORE_MASK) >= ((j - i) & BY_STORE_MASK)) {
            h->by_store[i] = h->by_store[j];
            h->by_store[j] = NULL;
            i = j;
        }
    }
}

static void on_async(uv_async_t *a)
{
    struct replica_host *h = a->data;
    struct store_event evs[REPLICA_EVENTS_MAX];
    size_t n = 0;
    if (h->store == NULL) {
        return;
    }
    int ph = turn_enter(REPLICA_TURN_EVENT);
    do {
        n = store_poll(h->store, evs, REPLICA_EVENTS_MAX);
        for (size_t i = 0; i < n; i++) {
            struct replica *r = host_find(h, evs[i].g);
            if (r != NULL && !r->closing) {
                on_event(r, &evs[i]);
            }
        }
    } while (n == REPLICA_EVENTS_MAX);
    turn_leave(ph);
}

/* ---- host ---- */

int replica_host_create(uv_loop_t *loop, struct replica_host **out,
                        char *errmsg)
{
    ASSERT(loop != NULL && out != NULL);
    struct replica_host *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "replica host");
    }
    h->loop = loop;
    h->async.data = h;
    if (uv_async_init(loop, &h->async, on_async) != 0) {
        free(h);
        return keel_err(KEEL_EIO, errmsg, "uv_async_init failed");
    }
    *out = h;
    return 0;
}

void replica_host_attach(struct replica_host *h, struct store *s)
{
    ASSERT(h != NULL && s != NULL);
    h->store = s;
    uv_async_send(&h->async); /* events queued before attach */
}

void replica_host_wakeup(void *host)
{
    struct replica_host *h = host;
    uv_async_send(&h->async);
}

static void host_closed(uv_handle_t *hd)
{
    struct replica_host *h = hd->data;
    ASSERT(h->closes > 0);
    if (--h->closes == 0) {
        free(h);
    }
}

void replica_host_destroy(struct replica_host *h)
{
    ASSERT(h != NULL);
    ASSERT(h->n == 0);
    h->closes = h->scrub.on ? 2 : 1;
    if (h->scrub.on) {
        uv_close((uv_handle_t *)&h->scrub.timer, host_closed);
    }
    uv_close((uv_handle_t *)&h->async, host_closed);
}

raft_incarnation replica_incarnation_of(const uint8_t inc[16])
{
    raft_incarnation v = keel_get_le64(inc);
    return v != 0 ? v : 1; /* 0 means "any" on the wire */
}

/* ---- open ---- */

static int check_report(const struct store_group_id *gid,
                        const struct store_recovery *rep, char *errmsg)
{
    char hex[33];
    store_group_id_hex(gid, hex);
    /* Faulty records (rule 1) and amnesia (rule 3) open: the core keeps
     * such a group from leading or voting until it is repaired or caught
     * up (replica_fault.c). Only a log that does not continue its snapshot
     * cannot be loaded at all (InstallSnapshot from a leader restores it:
     * replica_open quarantines the log of a group with peers). */
    if (rep->amnesia && rep->amnesia_reason == STORE_AMNESIA_SNAPSHOT_GAP) {
        return keel_err(KEEL_EAMNESIA, errmsg,
                        "group %s: its log does not continue its snapshot "
                        "(a gap after index %llu); it needs a snapshot from a "
                        "leader",
                        hex, (unsigned long long)rep->snapshot_index);
    }
    return 0;
}

static int load_hard_state(struct replica *r, char *errmsg)
{
    /* store.h has no hard-state read: go through its meta handle. */
    uint64_t term = 0;
    uint8_t vote[STORE_VOTE_BYTES_MAX];
    size_t vlen = sizeof(vote);
    int rv = store_meta_hs_get(store_debug_meta(r->host->store), r->gid.b,
                               &term, vote, &vlen);
    if (rv == KEEL_ENOENT) {
        return 0;
    }
    if (rv != 0 || vlen != 8) {
        return keel_err(rv != 0 ? rv : KEEL_ECORRUPT, errmsg,
                        "hard state of the group is unreadable");
    }
    raft_load_hard_state(&r->raft, term, keel_get_le64(vote));
    return 0;
}

static int bootstrap(struct replica *r, const struct raft_config *c,
                     char *errmsg)
{
    uint8_t buf[RAFT_CONFIG_BYTES_MAX];
    uint32_t len = raft_config_encode(c, buf, sizeof(buf));
    ASSERT(len > 0);
    struct store_record rec = {.index = 1,
                               .term = 1,
                               .type = RAFT_ENTRY_CONFIG,
                               .len = len,
                               .payload = buf};
    int rv = store_append(r->g, &rec, 1, errmsg);
    if (rv != 0) {
        return rv;
    }
    struct raft_entry e = {
        .term = 1, .type = RAFT_ENTRY_CONFIG, .len = len, .buf = buf};
    rv = raft_load_entry(&r->raft, 1, &e);
    if (rv != 0) {
        return keel_err(rv, errmsg, "bootstrap configuration refused");
    }
    r->boot_wait = 1; /* raft_start counts it persisted: wait until it is */
    return 0;
}

static int load_group(struct replica *r, const struct replica_options *opt,
                      const struct store_recovery *rep, char *errmsg)
{
    int rv = load_hard_state(r, errmsg);
    if (rv != 0) {
        return rv;
    }
    uint64_t from = 0;
    rv = replica__snap_open(r, opt, rep, &from, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (from == 0 && rep->snapshot_index != 0) {
        if (opt->bootstrap == NULL) {
            return keel_err(KEEL_EINVAL, errmsg,
                            "snapshot without a configuration: the store "
                            "keeps none");
        }
        raft_load_snapshot(&r->raft, rep->snapshot_index, rep->snapshot_term,
                           opt->bootstrap);
        r->applied = rep->snapshot_index;
        from = rep->snapshot_index + 1;
    }
    /* Raft holds the log after its snapshot; the store may retain more
     * (the prefix goes only under a committed cut, docs/design.md §5). */
    from = from > rep->first_index ? from : rep->first_index;
    rv = replica__load_amnesia(r, rep, errmsg);
    rv = rv == 0 ? replica__load_recover_wait(r, errmsg) : rv;
    if (rv != 0) {
        return rv;
    }
    if (rep->last_index >= from && rep->last_index > 0) {
        return replica__load_log(r, from, rep, errmsg);
    }
    /* An amnesiac group that lost its whole log never writes index 1
     * again: the placement may have changed since its bootstrap, and a
     * different entry at (1, term 1) would break log matching. It takes
     * index 1 from the leader. */
    if (opt->bootstrap != NULL && rep->snapshot_index == 0 && r->applied == 0 &&
        !rep->amnesia) {
        return bootstrap(r, opt->bootstrap, errmsg);
    }
    return 0;
}

static int replica_alloc(struct replica_host *h,
                         const struct replica_options *opt,
                         const struct replica_callbacks *cbs,
                         struct replica **out, char *errmsg)
{
    if (opt->heartbeat_ms != 0 && opt->election_timeout_ms != 0 &&
        opt->heartbeat_ms >= opt->election_timeout_ms) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "heartbeat %u ms must be below the election timeout "
                        "%u ms",
                        opt->heartbeat_ms, opt->election_timeout_ms);
    }
    struct replica *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "replica");
    }
    uint32_t et = opt->election_timeout_ms ? opt->election_timeout_ms : 1000;
    struct raft_params p = {
        .id = opt->self,
        .incarnation = opt->incarnation,
        .seed = opt->seed,
        .election_timeout_ms = et,
        .heartbeat_ms =
            opt->heartbeat_ms ? opt->heartbeat_ms : (et / 10 > 0 ? et / 10 : 1),
    };
    if (raft_init(&r->raft, &p) != 0) {
        free(r);
        return keel_err(KEEL_ENOMEM, errmsg, "replica");
    }
    r->host = h;
    r->cbs = *cbs;
    r->role = RAFT_FOLLOWER;
    r->align_ms = opt->align_heartbeats ? p.heartbeat_ms : 0;
    r->apply_turn_max = opt->apply_turn_max;
    r->apply_left = opt->apply_turn_max;
    *out = r;
    return 0;
}

static void replica_free(struct replica *r)
{
    replica__snap_free(r);
    free(r->held);
    for (uint32_t i = 0; i < r->n_queue; i++) {
        free(r->queue[i].buf);
    }
    raft_close(&r->raft);
    replica__cache_drop(r);
    replica__repair_drop(r);
    free(r->queue);
    free(r->ctxs);
    free(r);
}

/* One attempt: *g is the store group left open by a refused attempt
 * (NULL when store_group_open failed). */
static int open_once(struct replica_host *h, const struct store_group_id *gid,
                     const struct replica_options *opt,
                     const struct replica_callbacks *cbs, struct replica **out,
                     struct store_group **g, char *errmsg)
{
    struct replica *r = NULL;
    *g = NULL;
    int rv = replica_alloc(h, opt, cbs, &r, errmsg);
    if (rv != 0) {
        return rv;
    }
    r->gid = *gid;
    struct store_recovery rep;
    memset(&rep, 0, sizeof(rep));
    rv = store_group_open(h->store, gid, &opt->fsync, &r->g, &rep, errmsg);
    *g = rv == 0 ? r->g : NULL;
    if (rv == 0) {
        rv = check_report(gid, &rep, errmsg);
    }
    if (rv == 0) {
        rv = load_group(r, opt, &rep, errmsg);
    }
    if (rv != 0) {
        replica_free(r);
        return rv;
    }
    r->snap.rebuilt_segments = rep.rebuilt_segments;
    r->snap.rebuilt_from = rep.rebuilt_from;
    *out = r;
    return 0;
}

int replica_open(struct replica_host *h, const struct store_group_id *gid,
                 const struct replica_options *opt,
                 const struct replica_callbacks *cbs, struct replica **out,
                 char *errmsg)
{
    ASSERT(h != NULL && h->store != NULL);
    ASSERT(gid != NULL && opt != NULL && cbs != NULL && out != NULL);
    if (h->n >= REPLICA_GROUPS_MAX) {
        return keel_err(KEEL_ELIMIT, errmsg, "%u groups on this node",
                        REPLICA_GROUPS_MAX);
    }
    struct replica *r = NULL;
    struct store_group *g = NULL;
    int rv = open_once(h, gid, opt, cbs, &r, &g, errmsg);
    if (rv == KEEL_EAMNESIA && g != NULL && opt->heal_by_install) {
        char why[KEEL_ERRMSG_MAX];
        snprintf(why, sizeof why, "%s", errmsg != NULL ? errmsg : "");
        rv = replica__quarantine_log(h, gid, g, errmsg);
        rv = rv == 0 ? open_once(h, gid, opt, cbs, &r, &g, errmsg) : rv;
        if (rv == 0) {
            replica__note_quarantined(r, why);
        }
    }
    if (rv != 0) {
        /* A refused open leaves no store group behind: otherwise every
         * later open of the group (the meta state applies its placement
         * again) fails "group already open" until keeld restarts
         * (docs/faults.md F23). */
        if (g != NULL) {
            store_group_close(g);
        }
        return rv;
    }
    uv_timer_init(h->loop, &r->timer);
    uv_idle_init(h->loop, &r->idle);
    r->timer.data = r;
    r->idle.data = r;
    r->handles_open = 2;
    h->groups[h->n++] = r;
    by_store_put(h, r);
    if (opt->store_first) {
        store_group_set_first(r->g);
    }
    if (r->boot_wait == 0) {
        start_group(r);
    }
    *out = r;
    return 0;
}

void replica__release(struct replica *r)
{
    ASSERT(r->handles_open > 0);
    if (--r->handles_open == 0) {
        ASSERT(r->closing);
        replica_free(r);
    }
}

static void handle_closed(uv_handle_t *hd)
{
    replica__release(hd->data);
}

void replica_close(struct replica *r)
{
    ASSERT(r != NULL && !r->closing);
    struct replica_host *h = r->host;
    r->closing = true;
    replica__snap_wait(r);
    /* The group's queued store work (prefix drops included) runs now, so
     * no store completion names it once the host is gone. */
    store_group_close(r->g);
    for (uint32_t i = 0; i < h->n; i++) {
        if (h->groups[i] == r) {
            h->groups[i] = h->groups[--h->n];
            by_store_del(h, r);
            break;
        }
    }
    uv_close((uv_handle_t *)&r->timer, handle_closed);
    uv_close((uv_handle_t *)&r->idle, handle_closed);
}

void replica_info(const struct replica *r, struct replica_info *out)
{
    ASSERT(r != NULL && out != NULL);
    *out = (struct replica_info){.role = r->role,
                                 .term = r->raft.term,
                                 .last_index = r->raft.last_index,
                                 .commit = r->raft.commit,
                                 .applied = r->applied,
                                 .persisted = r->persisted,
                                 .started = r->started,
                                 .leader = r->raft.leader,
                                 .faulty = r->raft.faulty,
                                 .amnesiac = r->raft.amnesiac,
                                 .complete =
                                     r->raft.role == RAFT_LEADER &&
                                     r->raft.commit >= r->raft.term_start &&
                                     r->applied >= r->raft.commit &&
                                     r->raft.faulty == 0 && !r->raft.amnesiac,
                                 .repairs = r->repairs_queued,
                                 .repairs_refused = r->repairs_refused,
                                 .ticks_deferred = r->ticks_deferred};
}

struct store_group *replica_store_group(struct replica *r)
{
    return r->g;
}

int replica_read(struct replica *r, uint64_t index, struct store_entry *out,
                 char *errmsg)
{
    ASSERT(r != NULL);
    int rv = store_read(r->g, index, out, errmsg);
    if (rv == KEEL_ECORRUPT || rv == KEEL_EFAULTY) {
        /* Not stepped from here: a read may run inside an apply. */
        r->fault_check = true;
    }
    return rv;
}

size_t replica_peers(const struct replica *r, struct replica_peer *out,
                     size_t max)
{
    ASSERT(r != NULL && out != NULL);
    size_t n = 0;
    if (r->role != RAFT_LEADER) {
        return 0;
    }
    uint64_t now = uv_now(r->host->loop);
    ASSERT(r->raft.n_progress <= RAFT_SERVERS_MAX);
    for (uint32_t i = 0; i < r->raft.n_progress && n < max; i++) {
        const struct raft_progress *p = &r->raft.progress[i];
        if (p->node == r->raft.id) {
            continue;
        }
        bool heard = p->heard_ms != 0 && p->heard_ms <= now;
        out[n++] = (struct replica_peer){.node = p->node,
                                         .match = p->match,
                                         .active = p->active,
                                         .since_ms = heard ? now - p->heard_ms
                                                           : UINT64_MAX};
    }
    return n;
}

int replica_transfer_leader(struct replica *r, raft_node to, char *errmsg)
{
    ASSERT(r != NULL);
    ASSERT(!r->closing);
    if (!r->started) {
        return keel_err(KEEL_EAGAIN, errmsg, "group is still opening");
    }
    struct raft_in in = {.type = RAFT_IN_TRANSFER, .transfer_to = to};
    int rv = step(r, &in);
    if (rv != 0) {
        return keel_err(rv, errmsg, "leadership transfer refused: %s",
                        keel_strerror(rv));
    }
    return 0;
}

/* Why raft refused a membership change, in words that say what to do. */
static int change_refused(struct replica *r, const struct raft_in *in, int rv,
                          char *errmsg)
{
    const struct raft *rf = &r->raft;
    unsigned long long node = (unsigned long long)in->change.node;
    switch (rv) {
    case KEEL_ENOTLEADER:
        return keel_err(rv, errmsg,
                        "this node does not lead the group: send the change "
                        "to its leader");
    case KEEL_EEXIST:
        return keel_err(rv, errmsg,
                        "node %016llx is in the configuration already (a "
                        "replaced disk: remove the old incarnation first)",
                        node);
    case KEEL_ENOENT:
        return keel_err(rv, errmsg,
                        "node %016llx with that incarnation is not in the "
                        "configuration",
                        node);
    case KEEL_ELIMIT:
        return keel_err(rv, errmsg,
                        "the configuration has %d servers already: remove "
                        "one first",
                        RAFT_SERVERS_MAX);
    case KEEL_EINVAL:
        if (in->change.op == RAFT_CHANGE_REMOVE) {
            return keel_err(rv, errmsg,
                            "this node leads the group: transfer leadership "
                            "first (membership rule 4)");
        }
        return keel_err(rv, errmsg,
                        "node %016llx is not a learner of the configuration",
                        node);
    case KEEL_EBUSY:
        break;
    default:
        return keel_err(rv, errmsg, "membership change refused: %s",
                        keel_strerror(rv));
    }
    if (rf->transfer_to != 0) {
        return keel_err(rv, errmsg,
                        "a leadership transfer is running: retry when it "
                        "ends");
    }
    if (rf->commit < rf->term_start) {
        return keel_err(rv, errmsg,
                        "the leader has not committed an entry of its term "
                        "yet: retry in a moment");
    }
    if (raft_config_current_index(rf) > rf->commit) {
        return keel_err(rv, errmsg,
                        "another membership change (index %llu) has not "
                        "committed yet: one change at a time, retry when it "
                        "has",
                        (unsigned long long)raft_config_current_index(rf));
    }
    if (in->change.op == RAFT_CHANGE_PROMOTE) {
        return keel_err(rv, errmsg,
                        "the learner has not caught up to the commit index "
                        "%llu or was not heard within an election timeout: "
                        "wait for it",
                        (unsigned long long)rf->commit);
    }
    return keel_err(rv, errmsg,
                    "afterwards fewer than a majority of the voters would be "
                    "healthy (answering and caught up): bring the other "
                    "nodes back first, or override with --force");
}

int replica_change(struct replica *r, const struct replica_change *c,
                   uint64_t ctx, uint64_t *index, char *errmsg)
{
    ASSERT(r != NULL && c != NULL && index != NULL);
    ASSERT(!r->closing);
    *index = 0;
    if (!r->started) {
        return keel_err(KEEL_EAGAIN, errmsg, "group is still opening");
    }
    int qv = can_queue(r, false, errmsg);
    if (qv == 0 && ctx_reserve(r, r->ctx_n + 1) != 0) {
        qv = keel_err(KEEL_ENOMEM, errmsg, "membership change context");
    }
    if (qv != 0) {
        return qv;
    }
    raft_index first = r->raft.last_index + 1;
    struct raft_in in = {.type = RAFT_IN_CHANGE};
    in.change.op = c->op;
    in.change.node = c->node;
    in.change.incarnation = c->incarnation;
    in.change.force = c->force ? 1 : 0;
    in.now_ms = now_ms(r);
    int rv = raft_step(&r->raft, &in, &r->out);
    if (rv == 0) {
        ASSERT(r->out.n_entries == 1 && r->out.entries_first == first);
        ASSERT(r->out.entries[0].type == RAFT_ENTRY_CONFIG);
        ctx_push(r, first, r->out.entries[0].term, ctx);
        *index = first;
    }
    int hv = handle_out(r);
    if (rv != 0) {
        return change_refused(r, &in, rv, errmsg);
    }
    return hv != 0 ? keel_err(hv, errmsg, "the change could not be stored") : 0;
}
