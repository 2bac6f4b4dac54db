/* The simulated disk under storage faults, as the store's open sees it
 * (docs/design.md §4.7 R1-R2): sync markers, power loss with reordered
 * writeback (a marker can reach the disk while a record below it does not), bit
 * flips in markers. Records are whole (the store's checksums turn a partly
 * written or zero-filled record into a damaged one: `bad`, content kept so the
 * simulator can verify repairs against it). */
#include "keel/assert.h"
#include "sim.h"

void sim_disk_marker(struct sim_node *n, uint64_t index)
{
    ASSERT(index < SIM_LOG_MAX);
    ASSERT(n->marker < SIM_LOG_MAX);
    if (index == 0) {
        return;
    }
    n->marker_prev = n->marker_bad ? n->marker_prev : n->marker;
    n->marker = index;
    n->marker_bad = false;
}

/* Only the batch under sync was written (pwritev of records and marker);
 * what was queued behind it was never issued. A truncation in the batch
 * keeps the old prefix model (its zeroing and the new records share one
 * write). */
void sim_disk_power_reorder(struct sim *s, uint32_t i)
{
    struct sim_node *n = &s->nodes[i];
    uint32_t cnt = n->syncing ? n->sync_ops : 0;
    ASSERT(cnt <= n->n_ops);
    ASSERT(!n->up);
    for (uint32_t k = 0; k < cnt; k++) {
        const struct sim_op *op = &n->ops[k];
        if (op->type == SIM_OP_TRUNCATE) {
            if (op->index <= n->dlen) {
                n->dlen = op->index - 1;
            }
            continue;
        }
        ASSERT(op->index <= n->dlen + 1);
        n->dlog[op->index] = op->e;
        if (sim_rnd(s, 2) == 0) {
            /* This page never reached the disk: zeros (or the old bytes)
             * where the record should be. */
            n->dlog[op->index].bad = 1;
            n->damaged = true;
            s->stats.holes++;
        }
        if (op->index > n->dlen) {
            n->dlen = op->index;
        }
    }
    if (cnt > 0 && n->sync_index > 0 && sim_rnd(s, 2) == 0) {
        sim_disk_marker(n, n->sync_index); /* the marker page made it */
    }
    n->n_ops = 0;
}

/* Rule 2 under `group`/`always`: M is the newest marker, intact or with one
 * bit flipped by a media fault (the store mends those, store/scan_parse.c
 * marker_at; here only single bit flips damage a marker, and a torn one is
 * never mended). Damage at or below M is faulty (rule 1: kept, repaired or
 * discarded by the group); after M the intact run is kept and the log ends
 * at the first damaged record (never acknowledged: no sync covered it). On
 * open the store syncs what it kept and writes a marker naming its last
 * record. SIM_MUT_MARKER_TORN falls back to the older marker past a
 * damaged one, as the store first did (finding 14). */
uint64_t sim_disk_scan(struct sim *s, uint32_t i, uint64_t len)
{
    struct sim_node *n = &s->nodes[i];
    bool fall_back =
        n->marker_bad && (s->p.mutations & SIM_MUT_MARKER_TORN) != 0;
    uint64_t m = fall_back ? n->marker_prev : n->marker;
    ASSERT(len <= n->dlen);
    ASSERT(len < SIM_LOG_MAX);
    for (uint64_t k = m + 1; k <= len; k++) {
        if (n->dlog[k].bad) {
            s->stats.torn++;
            len = k - 1;
            break;
        }
    }
    n->marker = len;
    n->marker_prev = len;
    n->marker_bad = false;
    return len;
}

void sim_disk_flip_marker(struct sim *s, uint32_t i)
{
    struct sim_node *n = &s->nodes[i];
    ASSERT(n->up);
    ASSERT(n->marker < SIM_LOG_MAX);
    if (n->marker == 0 || n->marker_bad) {
        return;
    }
    n->marker_bad = true;
    n->damaged = true; /* one fault at a time (run.c) */
    s->stats.marker_flips++;
    sim_trace(s, (int)i, "BIT FLIP in the sync marker of %llu (M is %llu)",
              (unsigned long long)n->marker,
              (unsigned long long)n->marker_prev);
}
