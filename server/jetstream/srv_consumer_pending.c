/* srv_consumer_pending: the leader's set of delivered, unacked messages of
 * one consumer (ascending stream seq, holes compacted lazily), with the
 * ack deadlines that drive redelivery. Leader-local: lost on failover,
 * rebuilt from the replicated floor and delivered high-water
 * (srv_csm_leader_start), which means redelivery, never loss. */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "keel/grow.h"
#include "srv_consumer_sm.h"

static uint32_t pend_pos(const struct srv_csm *c, uint64_t sseq, bool *found)
{
    /* Holes (sseq 0) keep their slot's order: search over live neighbours
     * by skipping them linearly inside the binary search window. */
    uint32_t lo = 0, hi = c->pend_len;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2, m = mid;
        while (m < hi && c->pend[m].sseq == 0) {
            m++;
        }
        if (m == hi) {
            hi = mid;
            continue;
        }
        if (c->pend[m].sseq == sseq) {
            *found = true;
            return m;
        }
        if (c->pend[m].sseq < sseq) {
            lo = m + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

struct srv_csm_pending *srv_csm_pending_get(struct srv_csm *c, uint64_t sseq)
{
    bool found = false;
    if (sseq == 0) {
        return NULL;
    }
    uint32_t i = pend_pos(c, sseq, &found);
    return found ? &c->pend[i] : NULL;
}

static void pend_compact(struct srv_csm *c)
{
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->pend_len; i++) {
        if (c->pend[i].sseq != 0) {
            c->pend[k++] = c->pend[i];
        }
    }
    ASSERT(k == c->pend_count);
    c->pend_len = k;
}

void srv_csm_pending_del(struct srv_csm *c, uint64_t sseq)
{
    struct srv_csm_pending *p = srv_csm_pending_get(c, sseq);
    if (p == NULL) {
        return;
    }
    ASSERT(c->pend_count > 0);
    if (p->deliveries > 1) {
        ASSERT(c->redelivered > 0);
        c->redelivered--;
    }
    p->sseq = 0;
    c->pend_count--;
    if (c->pend_len > 64 && c->pend_count < c->pend_len / 2) {
        pend_compact(c);
    }
}

static int pend_insert(struct srv_csm *c, struct srv_csm_pending e)
{
    if (c->pend_count >= SRV_CONSUMER_PENDING_MAX) {
        return KEEL_ELIMIT;
    }
    if (c->pend_len == c->pend_cap) {
        pend_compact(c);
    }
    if (keel_grow_u32(&c->pend, &c->pend_cap, c->pend_len, sizeof *c->pend,
                      64) != 0) {
        return KEEL_ENOMEM;
    }
    bool found = false;
    uint32_t i = c->pend_len == 0 || c->pend[c->pend_len - 1].sseq < e.sseq
                     ? c->pend_len
                     : pend_pos(c, e.sseq, &found);
    ASSERT(!found);
    memmove(c->pend + i + 1, c->pend + i, (c->pend_len - i) * sizeof *c->pend);
    c->pend[i] = e;
    c->pend_len++;
    c->pend_count++;
    return 0;
}

static int64_t wait_for(const struct srv_csm *c, uint64_t deliveries)
{
    if (c->cfg.nbackoff > 0) {
        uint64_t k = deliveries - 1;
        return c->cfg.backoff_ns[k < c->cfg.nbackoff ? k : c->cfg.nbackoff - 1];
    }
    return c->cfg.ack_wait_ns;
}

int srv_csm_deliver(struct srv_csm *c, uint64_t sseq, int64_t now_ns,
                    struct srv_csm_pending *out)
{
    ASSERT(sseq > 0);
    uint64_t cseq =
        (c->live.cseq > c->delivered.cseq ? c->live.cseq : c->delivered.cseq) +
        1;
    struct srv_csm_pending e = {sseq, cseq, 1, now_ns + c->cfg.ack_wait_ns};
    struct srv_csm_pending *p = c->cfg.ack_policy == SRV_ACKP_NONE
                                    ? NULL
                                    : srv_csm_pending_get(c, sseq);
    if (p != NULL) {
        p->deliveries++;
        p->cseq = cseq;
        p->deadline_ns = now_ns + wait_for(c, p->deliveries);
        if (p->deliveries == 2) {
            c->redelivered++;
        }
        e = *p;
    } else if (c->cfg.ack_policy != SRV_ACKP_NONE) {
        e.deadline_ns = now_ns + wait_for(c, 1);
        int rv = pend_insert(c, e);
        if (rv != 0) {
            return rv;
        }
    }
    if (c->cfg.ack_policy != SRV_ACKP_NONE) {
        srv_csm_pending_touch(c, &e);
    }
    c->live.cseq = cseq;
    if (sseq > c->live.sseq) {
        c->live.sseq = sseq;
    }
    ASSERT(c->live.cseq >= c->delivered.cseq);
    *out = e;
    return 0;
}

static bool exhausted(const struct srv_csm *c, const struct srv_csm_pending *p)
{
    return c->cfg.max_deliver > 0 &&
           p->deliveries >= (uint64_t)c->cfg.max_deliver;
}

void srv_csm_pending_touch(struct srv_csm *c, const struct srv_csm_pending *p)
{
    if (p->deadline_ns < c->due_min_ns) {
        c->due_min_ns = p->deadline_ns;
    }
}

/* Called every loop turn: scans only once something may be due, and
 * remembers the earliest deadline it saw for the next turns. */
struct srv_csm_pending *srv_csm_pending_due(struct srv_csm *c, int64_t now_ns)
{
    if (c->due_min_ns > now_ns) {
        return NULL;
    }
    struct srv_csm_pending *best = NULL;
    int64_t min = INT64_MAX;
    for (uint32_t i = 0; i < c->pend_len; i++) {
        struct srv_csm_pending *p = &c->pend[i];
        if (p->sseq == 0 || exhausted(c, p)) {
            continue;
        }
        if (p->deadline_ns < min) {
            min = p->deadline_ns;
        }
        if (p->deadline_ns <= now_ns &&
            (best == NULL || p->deadline_ns < best->deadline_ns)) {
            best = p;
        }
    }
    c->due_min_ns = min;
    ASSERT(best == NULL || best->deadline_ns >= min);
    return best;
}

int64_t srv_csm_pending_next_deadline(const struct srv_csm *c)
{
    int64_t t = INT64_MAX;
    for (uint32_t i = 0; i < c->pend_len; i++) {
        const struct srv_csm_pending *p = &c->pend[i];
        if (p->sseq != 0 && !exhausted(c, p) && p->deadline_ns < t) {
            t = p->deadline_ns;
        }
    }
    return t;
}

int srv_csm_leader_start(struct srv_csm *c, const struct srv_csm_stream *st,
                         int64_t now_ns)
{
    c->pend_len = c->pend_count = 0;
    c->redelivered = 0;
    c->due_min_ns = now_ns;
    c->live = c->delivered;
    if (c->cfg.ack_policy == SRV_ACKP_NONE) {
        return 0;
    }
    uint64_t from = c->ack_floor.sseq + 1, seq = 0;
    while (srv_csm_next_wanted(c, st, from, &seq) == 0 &&
           seq <= c->delivered.sseq) {
        from = seq + 1;
        if (srv_csm_is_acked(c, seq)) {
            continue;
        }
        /* Delivered once before the restart; due now. */
        struct srv_csm_pending e = {seq, 0, 1, now_ns};
        int rv = pend_insert(c, e);
        if (rv != 0) {
            return rv;
        }
    }
    ASSERT(c->pend_count <= SRV_CONSUMER_PENDING_MAX);
    return 0;
}
