/* The background scrub (docs/decisions/0027-background-scrub.md,
 * docs/operations.md): a slow pass over every group's persisted records and
 * held snapshot files that finds media damage before a reader or a leader
 * change meets it.
 *
 * Pace: at the start of a pass the host sums its groups' log bytes; each
 * tick grants that sum times tick / pass of credit (carried over, at most
 * REPLICA_SCRUB_TICK_BYTES_MAX), so a pass takes about pass_ms however
 * large the logs, and a tick never stalls the loop for more than one
 * bounded read. Records go through store_scrub (checksum and hash chain);
 * a record that fails is faulty in the store exactly as after a failed
 * read, and the core is told at once (replica__fault_report): a follower
 * repairs it from the leader, a leader hands over (rule 1). A held
 * snapshot file that fails its checksum is replaced by a fresh snapshot
 * of the applied state (docs/design.md §5 keeps two, the newest valid one
 * suffices to restore). Loop thread only.
 */
#include <stdio.h>
#include <string.h>

#include "replica_int.h"

static uint64_t host_log_bytes(const struct replica_host *h)
{
    uint64_t sum = 0;
    ASSERT(h->n <= REPLICA_GROUPS_MAX);
    for (uint32_t i = 0; i < h->n; i++) {
        struct store_group_info gi;
        store_group_info(h->groups[i]->g, &gi);
        sum += gi.log_bytes;
    }
    return sum;
}

static void note(struct replica_host *h, const char *fmt, unsigned long long a,
                 unsigned long long b)
{
    char msg[KEEL_ERRMSG_MAX];
    if (h->scrub.note_cb == NULL) {
        return;
    }
    snprintf(msg, sizeof msg, fmt, a, b);
    h->scrub.note_cb(h->scrub.note_arg, msg);
}

/* A fault the scrub found that the store no longer reports is repaired
 * (rewritten from a verified copy, or discarded as never committed). */
static void count_repaired(struct replica_host *h)
{
    ASSERT(h->n <= REPLICA_GROUPS_MAX);
    for (uint32_t i = 0; i < h->n; i++) {
        struct replica *r = h->groups[i];
        struct store_group_info gi;
        if (r->scrub_fault == 0) {
            continue;
        }
        store_group_info(r->g, &gi);
        if (gi.first_faulty == 0 || gi.first_faulty > r->scrub_fault) {
            h->scrub.stats.repaired++;
            r->scrub_fault = 0;
        }
    }
}

/* Scrub records of r from the cursor with at most `credit` bytes;
 * returns the bytes used; *done when r has nothing left this pass. */
static uint64_t scrub_records(struct replica_host *h, struct replica *r,
                              uint64_t credit, bool *done)
{
    struct replica_scrub *sc = &h->scrub;
    char err[KEEL_ERRMSG_MAX];
    uint64_t next = 0;
    uint64_t bytes = 0;
    int rv = store_scrub(r->g, sc->next_index, credit, &next, &bytes, err);
    sc->stats.bytes += bytes;
    if (rv == KEEL_ECORRUPT) {
        sc->stats.faults++;
        if (r->scrub_fault == 0) {
            r->scrub_fault = next - 1;
        }
        note(h,
             "scrub: record %llu of a group failed its checksum "
             "(%llu faults found so far); repairing it",
             (unsigned long long)(next - 1),
             (unsigned long long)sc->stats.faults);
        if (!r->closing && r->started) {
            replica__fault_report(r);
        }
    }
    *done = bytes == 0 && rv == 0;
    sc->next_index = next;
    return bytes > 0 ? bytes : 1;
}

/* Advance the cursor to the next group; a wrap ends the pass. */
static void next_group(struct replica_host *h)
{
    struct replica_scrub *sc = &h->scrub;
    sc->slot++;
    sc->next_index = 0;
    sc->snap_done = false;
    if (sc->slot >= h->n) {
        sc->slot = 0;
        sc->stats.passes++;
        sc->pass_bytes = host_log_bytes(h);
    }
}

static void scrub_tick(uv_timer_t *t)
{
    struct replica_host *h = t->data;
    struct replica_scrub *sc = &h->scrub;
    count_repaired(h);
    if (h->n == 0 || h->store == NULL) {
        return;
    }
    if (sc->pass_bytes == 0) {
        sc->pass_bytes = host_log_bytes(h); /* the first pass */
    }
    uint64_t grant = sc->pass_bytes * sc->tick_ms / sc->pass_ms;
    grant = grant > 0 ? grant : 1;
    sc->credit += grant;
    if (sc->credit > REPLICA_SCRUB_TICK_BYTES_MAX) {
        sc->credit = REPLICA_SCRUB_TICK_BYTES_MAX;
    }
    /* Bounded: each round uses credit or moves to the next group, and a
     * tick visits each group at most twice. */
    for (uint32_t rounds = 0;
         sc->credit > 0 && rounds < 2 * h->n + REPLICA_SCRUB_TICK_RUNS_MAX;
         rounds++) {
        if (sc->slot >= h->n) {
            sc->slot = 0;
        }
        struct replica *r = h->groups[sc->slot];
        if (memcmp(&sc->gid, &r->gid, sizeof sc->gid) != 0) {
            sc->gid = r->gid; /* groups came or went: start this one over */
            sc->next_index = 0;
            sc->snap_done = false;
        }
        bool done = false;
        if (!sc->snap_done) {
            uint64_t used = replica__snap_scrub(r, &sc->stats);
            sc->credit -= used < sc->credit ? used : sc->credit;
            sc->snap_done = true;
            continue;
        }
        uint64_t used = scrub_records(h, r, sc->credit, &done);
        sc->credit -= used < sc->credit ? used : sc->credit;
        if (done) {
            next_group(h);
        }
    }
}

int replica_host_scrub_start(struct replica_host *h, uint64_t pass_ms,
                             uint64_t tick_ms,
                             void (*note_cb)(void *arg, const char *msg),
                             void *note_arg, char *errmsg)
{
    ASSERT(h != NULL);
    ASSERT(!h->scrub.on);
    if (pass_ms == 0) {
        return 0;
    }
    tick_ms = tick_ms != 0 ? tick_ms : REPLICA_SCRUB_TICK_MS;
    if (tick_ms > pass_ms) {
        return keel_err(KEEL_ECONFIG, errmsg,
                        "scrub pass of %llu ms is shorter than its tick of "
                        "%llu ms",
                        (unsigned long long)pass_ms,
                        (unsigned long long)tick_ms);
    }
    h->scrub.pass_ms = pass_ms;
    h->scrub.tick_ms = tick_ms;
    h->scrub.note_cb = note_cb;
    h->scrub.note_arg = note_arg;
    uv_timer_init(h->loop, &h->scrub.timer);
    h->scrub.timer.data = h;
    uv_unref((uv_handle_t *)&h->scrub.timer);
    uv_timer_start(&h->scrub.timer, scrub_tick, tick_ms, tick_ms);
    h->scrub.on = true;
    return 0;
}

void replica_host_scrub_stats(const struct replica_host *h,
                              struct replica_scrub_stats *out)
{
    ASSERT(h != NULL && out != NULL);
    *out = h->scrub.stats;
}
