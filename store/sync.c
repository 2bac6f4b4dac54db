/* The sync thread pool (docs/design.md §4.2): one sync at a time per group,
 * a small pool for all groups. A thread takes every pending op of a group
 * (writes arriving meanwhile form the next batch), writes each batch and its
 * sync marker in one pwritev at the tail, fdatasyncs, and reports
 * persisted(index, term) of the last record covered. Any write or sync
 * error aborts the process: an fsync is never retried.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define ENOSPC_RETRY_MS 1000u

static void must(struct store *s, int rv, const char *what, const char *errmsg)
{
    ASSERT(s != NULL);
    ASSERT(what != NULL);
    if (rv != 0) {
        store__fatal(s, what, errmsg);
    }
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void store_hist_add(struct store_hist *h, uint64_t v)
{
    /* Bucket i holds (2^(i-1), 2^i]: the bit length of v - 1. */
    unsigned i = v <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(v - 1);
    if (i >= STORE_HIST_BUCKETS) {
        i = STORE_HIST_BUCKETS - 1;
    }
    h->counts[i]++;
    h->count++;
    h->sum += v;
}

static void datasync(struct store_group *g, struct seg *seg)
{
    struct store *s = g->s;
    char errmsg[KEEL_ERRMSG_MAX];

    ASSERT(seg->state == SEG_LIVE);
    ASSERT(seg->f != NULL);
    uint64_t t0 = now_us();
    must(s, s->fs->fdatasync(s->fs, seg->f, errmsg), "fdatasync segment",
         errmsg);
    uint64_t us = now_us() - t0;
    pthread_mutex_lock(&s->mu);
    s->stats.fdatasyncs++;
    store_hist_add(&s->stats.fdatasync_us, us);
    pthread_mutex_unlock(&s->mu);
}

/* op's entries are durable: move the persisted mark past them (a stale op,
 * one a truncation overtook, reports nothing). Caller holds s->mu. */
static void advance_persisted(struct store_group *g, const struct op *op)
{
    ASSERT(g != NULL && op != NULL);
    ASSERT(g->s != NULL);
    if (!op->stale && op->last_index > g->persisted_index) {
        g->persisted_index = op->last_index;
        g->persisted_term = op->last_term;
        g->ev_persisted = true;
        store__queue_event(g->s, g);
    }
}

static void report_persisted(struct store_group *g, const struct op *op)
{
    struct store *s = g->s;

    ASSERT(op->kind == OP_WRITE);
    ASSERT(op->last_index >= 1);
    pthread_mutex_lock(&s->mu);
    s->stats.batches++;
    s->stats.records_written += op->last_index - op->first_index + 1;
    store_hist_add(&s->stats.batch_records,
                   op->last_index - op->first_index + 1);
    advance_persisted(g, op);
    pthread_mutex_unlock(&s->mu);
}

static void exec_write(struct store_group *g, struct op *op, bool sync_now)
{
    struct store *s = g->s;
    char errmsg[KEEL_ERRMSG_MAX];
    uint8_t marker[STORE_MARKER_BYTES];
    struct iovec iov[2] = {{op->buf, op->len}, {marker, sizeof marker}};
    bool interval = g->policy.policy == STORE_FSYNC_INTERVAL;
    struct store_fmt_marker m;

    ASSERT(op->seg->state == SEG_LIVE);
    ASSERT(op->off + op->len + STORE_MARKER_BYTES <= op->seg->size);
    if (op->len == 0) {
        return; /* emptied by a truncation */
    }
    /* Rule 2: the marker names the last record (the highest index in the
     * log) and the boot id; the next batch overwrites it. */
    m.index = op->last_index;
    m.term = op->last_term;
    m.rec_checksum = op->last_checksum;
    memcpy(m.boot_id, s->boot_id, STORE_BOOT_ID_BYTES);
    store_fmt_marker_encode(marker, &m, op->seg->salt);
    if (interval && g->last_seg != NULL && g->last_seg != op->seg &&
        g->last_seg->state == SEG_LIVE) {
        /* The log moves to a new segment: the next timer sync covers only
         * that one, but its marker will name records after everything
         * written here since the last sync (finding F12: after a power
         * loss those sat below M damaged, not torn). */
        datasync(g, g->last_seg);
    }
    must(s,
         s->fs->pwritev(s->fs, op->seg->f, iov, interval ? 1 : 2, op->off,
                        errmsg),
         "write batch", errmsg);
    uint64_t end = op->off + op->len + (interval ? 0 : STORE_MARKER_BYTES);
    op->seg->hi_water = end > op->seg->hi_water ? end : op->seg->hi_water;
    g->last_seg = op->seg;
    g->last_end = op->off + op->len;
    g->last_w_index = op->last_index;
    g->last_w_term = op->last_term;
    g->last_w_checksum = op->last_checksum;
    if (interval) {
        pthread_mutex_lock(&s->mu);
        if (!g->interval_dirty) {
            g->interval_dirty = true;
            g->interval_deadline_ms = store__now_ms() + g->policy.interval_ms;
            s->timers_due_ms = 0;
        }
        pthread_mutex_unlock(&s->mu);
    } else if (sync_now) {
        datasync(g, op->seg);
    }
    report_persisted(g, op);
}

/* Conflict truncation: zero [off, old end of written data). The sync is
 * shared with the batch that follows in the same segment, if any. */
static void exec_zero(struct store_group *g, struct op *op, bool sync_now)
{
    struct store *s = g->s;
    static const uint8_t zeros[STORE_ZERO_CHUNK_BYTES];
    char errmsg[KEEL_ERRMSG_MAX];
    uint64_t off = op->off;

    ASSERT(op->kind == OP_ZERO);
    ASSERT(op->seg != NULL);
    if (op->seg->state != SEG_LIVE) {
        return;
    }
    if (!op->stale) {
        uint8_t marker[STORE_MARKER_BYTES];
        struct store_fmt_marker m = {
            op->last_index, op->last_term, op->last_checksum, {0}};
        struct iovec miov = {marker, sizeof marker};
        memcpy(m.boot_id, s->boot_id, STORE_BOOT_ID_BYTES);
        store_fmt_marker_encode(marker, &m, op->seg->salt);
        must(s, s->fs->pwritev(s->fs, op->seg->f, &miov, 1, off, errmsg),
             "write truncation marker", errmsg);
        datasync(g, op->seg);
        off += STORE_MARKER_BYTES;
    }
    while (off < op->seg->hi_water) {
        uint64_t left = op->seg->hi_water - off;
        struct iovec iov = {(void *)zeros,
                            left < sizeof zeros ? (size_t)left : sizeof zeros};
        must(s, s->fs->pwritev(s->fs, op->seg->f, &iov, 1, off, errmsg),
             "zero truncated records", errmsg);
        off += iov.iov_len;
    }
    op->seg->hi_water = op->stale ? op->off : op->off + STORE_MARKER_BYTES;
    g->last_seg = NULL; /* no interval marker may name a removed record */
    if (sync_now) {
        datasync(g, op->seg);
    }
}

static void exec_interval_sync(struct store_group *g)
{
    struct store *s = g->s;
    char errmsg[KEEL_ERRMSG_MAX];
    uint8_t marker[STORE_MARKER_BYTES];
    struct store_fmt_marker m;

    ASSERT(g->policy.policy == STORE_FSYNC_INTERVAL);
    ASSERT(s != NULL);
    pthread_mutex_lock(&s->mu);
    g->interval_dirty = false;
    pthread_mutex_unlock(&s->mu);
    if (g->last_seg == NULL || g->last_seg->state != SEG_LIVE) {
        return;
    }
    m.index = g->last_w_index;
    m.term = g->last_w_term;
    m.rec_checksum = g->last_w_checksum;
    memcpy(m.boot_id, s->boot_id, STORE_BOOT_ID_BYTES);
    store_fmt_marker_encode(marker, &m, g->last_seg->salt);
    struct iovec iov = {marker, sizeof marker};
    must(s, s->fs->pwritev(s->fs, g->last_seg->f, &iov, 1, g->last_end, errmsg),
         "write sync marker", errmsg);
    uint64_t end = g->last_end + STORE_MARKER_BYTES;
    g->last_seg->hi_water =
        end > g->last_seg->hi_water ? end : g->last_seg->hi_water;
    datasync(g, g->last_seg);
}

static void exec_repair(struct store_group *g, struct op *op)
{
    struct store *s = g->s;
    char errmsg[KEEL_ERRMSG_MAX];
    struct iovec iov = {op->buf, op->len};

    ASSERT(op->kind == OP_REPAIR);
    ASSERT(op->seg->state == SEG_LIVE);
    /* Rule 1: in place, fdatasync, no marker. */
    must(s, s->fs->pwritev(s->fs, op->seg->f, &iov, 1, op->off, errmsg),
         "write repair", errmsg);
    datasync(g, op->seg);
    if (op->stale) {
        return; /* a part of a run: the run's last part reports it */
    }
    pthread_mutex_lock(&s->mu);
    g->ev_repaired = true;
    g->repaired_from = op->first_index;
    g->repaired_to = op->last_index;
    store__queue_event(s, g);
    pthread_mutex_unlock(&s->mu);
}

static void exec_hard_state(struct store_group *g, struct op *op)
{
    struct store *s = g->s;
    char errmsg[KEEL_ERRMSG_MAX];

    ASSERT(op->kind == OP_HARD_STATE);
    ASSERT(op->vote_len <= STORE_VOTE_BYTES_MAX);
    if (store__dead(s)) {
        return;
    }
    must(s,
         store_meta_hs_put(s->meta, g->id.b, op->last_term, op->vote,
                           op->vote_len, errmsg),
         "write hard state", errmsg);
    pthread_mutex_lock(&s->mu);
    g->hard_term = op->last_term > g->hard_term ? op->last_term : g->hard_term;
    g->ev_hard_state = true;
    g->hs_event_term = op->last_term;
    g->hs_done++;
    store__queue_event(s, g);
    pthread_mutex_unlock(&s->mu);
}

/* After recovery the log may end past M (an intact run after it): write a
 * marker naming the last record and sync before reporting it persisted, so
 * M again names the highest index (rule 2). */
static void exec_mark(struct store_group *g, struct op *op)
{
    struct store *s = g->s;
    char errmsg[KEEL_ERRMSG_MAX];
    uint8_t marker[STORE_MARKER_BYTES];
    struct store_fmt_marker m;
    struct iovec iov = {marker, sizeof marker};

    ASSERT(op->kind == OP_MARK);
    ASSERT(op->seg->state == SEG_LIVE);
    m.index = op->last_index;
    m.term = op->last_term;
    m.rec_checksum = op->last_checksum;
    memcpy(m.boot_id, s->boot_id, STORE_BOOT_ID_BYTES);
    store_fmt_marker_encode(marker, &m, op->seg->salt);
    must(s, s->fs->pwritev(s->fs, op->seg->f, &iov, 1, op->off, errmsg),
         "write recovery marker", errmsg);
    uint64_t end = op->off + STORE_MARKER_BYTES;
    op->seg->hi_water = end > op->seg->hi_water ? end : op->seg->hi_water;
    datasync(g, op->seg);
    pthread_mutex_lock(&s->mu);
    advance_persisted(g, op);
    pthread_mutex_unlock(&s->mu);
}

/* Does the op after op write to the same segment (so it can carry the
 * sync)? Only under group policy: `always` syncs every batch. */
static bool next_shares_sync(const struct store_group *g, const struct op *op)
{
    const struct op *n = op->next;

    ASSERT(op != NULL);
    ASSERT(g != NULL);
    return n != NULL && n->kind == OP_WRITE && n->seg == op->seg &&
           (op->kind == OP_ZERO || g->policy.policy == STORE_FSYNC_GROUP);
}

/* Returns false when the group ran out of space: the remaining ops wait. */
static bool exec_op(struct store_group *g, struct op *op)
{
    ASSERT(op != NULL);
    ASSERT(g->busy);
    if (store__dead(g->s)) {
        if (op->kind == OP_DELETE_SEG) {
            if (op->seg->f != NULL) {
                g->s->fs->close(g->s->fs, op->seg->f);
            }
            free(op->seg);
            op->seg = NULL;
        }
        return true;
    }
    switch (op->kind) { /* dispatch: one case per op kind */
    case OP_CREATE_SEG:
        if (op->seg->state == SEG_PLANNED) {
            store__seg_create(g, op->seg);
        }
        return op->seg->state == SEG_LIVE;
    case OP_WRITE:
        exec_write(g, op, !next_shares_sync(g, op));
        return true;
    case OP_ZERO:
        exec_zero(g, op, !next_shares_sync(g, op));
        return true;
    case OP_DELETE_SEG:
        if (op->seg->state == SEG_LIVE) {
            store__seg_delete(g, op->seg);
        }
        free(op->seg);
        op->seg = NULL;
        return true;
    case OP_HARD_STATE:
        exec_hard_state(g, op);
        return true;
    case OP_REPAIR:
        exec_repair(g, op);
        return true;
    case OP_INTERVAL_SYNC:
        exec_interval_sync(g);
        return true;
    case OP_MARK:
        exec_mark(g, op);
        return true;
    }
    return true;
}

/* Run the ops a thread took; on ENOSPC put the rest back in front. */
static void run_group(struct store *s, struct store_group *g)
{
    struct op *op = g->inflight;
    struct op *rest = NULL;

    ASSERT(g->busy);
    ASSERT(s != NULL);
    for (; op != NULL; op = op->next) {
        if (!exec_op(g, op)) {
            rest = op;
            break;
        }
    }
    pthread_mutex_lock(&s->mu);
    struct op *done = g->inflight;
    g->inflight = NULL;
    while (done != NULL && done != rest) {
        struct op *next = done->next;
        store__op_free(done);
        done = next;
    }
    if (rest != NULL) {
        struct op *last = rest;
        size_t n = 1;
        while (last->next != NULL) {
            last = last->next;
            n++;
        }
        last->next = g->ops_head;
        g->ops_head = rest;
        g->ops_tail = g->ops_tail == NULL ? last : g->ops_tail;
        g->nops += n;
    }
    g->busy = false;
    if (!g->enospc) {
        store__schedule(s, g);
    }
    if (g->interval_dirty || g->enospc) {
        /* Idle threads recompute their timers: this group's deadline was
         * skipped while it was busy. Only then: a broadcast after every
         * batch woke each idle sync thread to find nothing to do, two
         * context switches per fdatasync (docs/bench.md, "Where a
         * replicated publish goes"). New work signals on its own
         * (store__schedule). */
        s->timers_due_ms = 0;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_cond_broadcast(&s->idle_cv); /* store_group_close waits */
    pthread_mutex_unlock(&s->mu);
}

/* Interval timers and ENOSPC retries due now; returns ms to the next one.
 * Caller holds s->mu. The walk over every group runs only when something
 * is due (s->timers_due_ms): the sync threads look before every group
 * run, and a walk per run under s->mu was a quarter of a node's CPU with
 * 1,400 groups, holding up the loop thread's appends (docs/bench.md,
 * "Many streams on a cluster"). */
static uint64_t timers(struct store *s)
{
    uint64_t now = store__now_ms();
    uint64_t next = ENOSPC_RETRY_MS;
    size_t n = 0;

    ASSERT(s != NULL);
    if (now < s->timers_due_ms) {
        ASSERT(s->timers_due_ms - now <= ENOSPC_RETRY_MS);
        return s->timers_due_ms - now;
    }
    s->stats.timer_walks++;
    for (struct store_group *g = s->groups; g != NULL; g = g->next) {
        ASSERT(++n <= STORE_GROUPS_MAX);
        if (g->interval_dirty && !g->busy) {
            if (g->interval_deadline_ms <= now) {
                g->interval_dirty = false;
                store__op_push(g, store__op_new(OP_INTERVAL_SYNC));
                store__schedule(s, g);
            } else if (g->interval_deadline_ms - now < next) {
                next = g->interval_deadline_ms - now;
            }
        }
        if (g->enospc && !g->busy && g->ops_head != NULL) {
            if (g->enospc_retry_ms <= now) {
                g->enospc_retry_ms = now + ENOSPC_RETRY_MS;
                store__schedule(s, g);
            } else if (g->enospc_retry_ms - now < next) {
                next = g->enospc_retry_ms - now;
            }
        }
    }
    s->timers_due_ms = now + next;
    return next;
}

static struct store_group *runq_pop(struct store *s)
{
    struct store_group *g = store__gq_pop(s, STORE__Q_RUN);

    if (g == NULL) {
        return NULL;
    }
    ASSERT(g->queued);
    g->queued = false;
    return g;
}

static void wait_ms(struct store *s, uint64_t ms)
{
    struct timespec ts;

    ASSERT(s != NULL);
    ASSERT(ms <= ENOSPC_RETRY_MS);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    (void)pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

/* Take every pending op of g. Caller holds s->mu. */
static void take_ops(struct store_group *g)
{
    ASSERT(!g->busy);
    ASSERT(g->inflight == NULL);
    g->busy = true;
    g->inflight = g->ops_head;
    g->ops_head = NULL;
    g->ops_tail = NULL;
    g->nops = 0;
    for (struct op *op = g->inflight; op != NULL; op = op->next) {
        op->taken = true;
    }
}

/* Make the spare of the first queued group. Caller holds s->mu; returns
 * false when none is queued. */
static bool prealloc_one(struct store *s)
{
    struct store_group *g = store__gq_pop(s, STORE__Q_PREALLOC);

    if (g == NULL) {
        return false;
    }
    ASSERT(g->pre_queued && !g->pre_running);
    g->pre_queued = false;
    g->pre_running = true;
    pthread_mutex_unlock(&s->mu);
    store__prealloc(g);
    pthread_mutex_lock(&s->mu);
    g->pre_running = false;
    pthread_cond_broadcast(&s->idle_cv); /* store_group_close waits */
    return true;
}

/* The prealloc thread: spares are made here, paced, so neither the sync
 * pool nor any group's ordered work waits for a 64 MiB zero fill. */
static void *prealloc_main(void *arg)
{
    struct store *s = arg;

    ASSERT(s != NULL);
    ASSERT(!s->cfg.manual_sync);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->stopping) {
            break;
        }
        if (!prealloc_one(s)) {
            pthread_cond_wait(&s->pre_cv, &s->mu);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Run the group g just popped off the run queue: its ops taken under
 * s->mu (held on entry and on return), the I/O and the wakeup without it. */
static void run_unlocked(struct store *s, struct store_group *g)
{
    ASSERT(s != NULL);
    ASSERT(g != NULL);
    take_ops(g);
    pthread_mutex_unlock(&s->mu);
    run_group(s, g);
    if (s->cfg.wakeup_cb != NULL) {
        s->cfg.wakeup_cb(s->cfg.wakeup_arg);
    }
    pthread_mutex_lock(&s->mu);
}

void store_debug_step(struct store *s)
{
    ASSERT(s != NULL);
    ASSERT(s->cfg.manual_sync);
    pthread_mutex_lock(&s->mu);
    for (unsigned n = 0; n < STORE_GROUPS_MAX && prealloc_one(s); n++) {
    }
    for (unsigned n = 0; n < STORE_GROUPS_MAX; n++) {
        (void)timers(s);
        struct store_group *g = runq_pop(s);
        if (g == NULL) {
            break;
        }
        run_unlocked(s, g);
    }
    pthread_mutex_unlock(&s->mu);
}

static void *sync_main(void *arg)
{
    struct store *s = arg;

    ASSERT(s != NULL);
    pthread_mutex_lock(&s->mu);
    for (;;) {
        uint64_t next = timers(s);
        struct store_group *g = runq_pop(s);
        if (g == NULL) {
            if (s->stopping) {
                break;
            }
            wait_ms(s, next);
            continue;
        }
        run_unlocked(s, g);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int store__sync_start(struct store *s, char *errmsg)
{
    ASSERT(s != NULL);
    ASSERT(s->cfg.sync_threads <= STORE_SYNC_THREADS_MAX);
    if (!s->cfg.manual_sync && !s->cfg.no_prealloc) {
        int rc = pthread_create(&s->pre_thread, NULL, prealloc_main, s);
        if (rc != 0) {
            return keel_err(KEEL_ENOMEM, errmsg, "start prealloc thread: %s",
                            strerror(rc));
        }
        s->pre_started = true;
    }
    for (unsigned i = 0; !s->cfg.manual_sync && i < s->cfg.sync_threads; i++) {
        int rc = pthread_create(&s->threads[i], NULL, sync_main, s);
        if (rc != 0) {
            store__sync_stop(s);
            return keel_err(KEEL_ENOMEM, errmsg, "start sync thread: %s",
                            strerror(rc));
        }
        s->nthreads++;
    }
    return 0;
}

/* Finish queued work, then join the threads. Groups out of space drop
 * their waiting ops (nothing more can be written). */
void store__sync_stop(struct store *s)
{
    ASSERT(s != NULL);
    ASSERT(s->nthreads <= STORE_SYNC_THREADS_MAX);
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_broadcast(&s->cv);
    pthread_cond_broadcast(&s->pre_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->pre_started) {
        pthread_join(s->pre_thread, NULL); /* finishes the spare it makes */
        s->pre_started = false;
    }
    for (unsigned i = 0; i < s->nthreads; i++) {
        pthread_join(s->threads[i], NULL);
    }
    s->nthreads = 0;
    if (s->cfg.manual_sync) {
        store_debug_step(s);
    }
}
