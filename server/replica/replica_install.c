/* InstallSnapshot in the driver (docs/design.md §5, docs/raft.md
 * "InstallSnapshot", snapshot/FORMAT.md "Transfer").
 *
 * Leader: the core emits RAFT_MSG_SNAPSHOT with no chunk for the snapshot
 * it compacted to; the driver spools that snapshot and its retained log
 * from the store's first index (snap_send_open_at: a consistent copy) and
 * fills one checksummed frame per message. One spool per group serves
 * every follower; it is made again when a follower reports a failed
 * transfer (its restart may be due to a bad spool).
 *
 * Follower: every frame is checked before the core sees it; a bad one
 * aborts the transfer (raft_snapshot_abort: the leader restarts at 0).
 * A complete transfer whose content is refused (KEEL_ECORRUPT: the
 * transfer's own checksums fail) is answered to the leader
 * (RAFT_IN_SNAPSHOT_REFUSED): only a fresh spool can heal a transfer wrong
 * as the leader made it. Other refusals are not: a bad frame was damaged
 * after the leader sealed it (each send seals afresh from the spool), and
 * a local error (a full disk) is this node's; a new spool helps neither.
 * Frames go to a spool in the group's snap/ directory; after the last one
 * the install runs on the loop thread, the retained log checked and then
 * written in steps of REPLICA_INSTALL_STEP_BYTES, one per loop turn
 * (decision 0041), then (blocking) its sync, the snapshot file and one
 * synced LMDB transaction; the state machine is restored from the
 * installed snapshot, and only then is RAFT_IN_SNAPSHOT_INSTALLED stepped.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <keel/assert.h>
#include <keel/error.h>

#include "replica_int.h"

static void send_close(struct replica_xfer *x)
{
    snap_send_close(x->ss);
    x->ss = NULL;
    x->ss_index = 0;
}

static void recv_close(struct replica_xfer *x)
{
    snap_recv_close(x->sr);
    x->sr = NULL;
    x->sr_index = 0;
    x->sr_waiting = false;
    x->sr_complete = false;
}

bool replica__installing(const struct replica *r)
{
    const struct replica_xfer *x = &r->snap.xfer;
    return x->sr != NULL && x->sr_complete;
}

bool replica__xfer_busy(const struct replica *r)
{
    const struct replica_xfer *x = &r->snap.xfer;
    return x->ss != NULL && x->ss_progress_ms != 0 &&
           uv_now(r->host->loop) - x->ss_progress_ms < REPLICA_XFER_HOLD_MS;
}

void replica__xfer_free(struct replica *r)
{
    struct replica_xfer *x = &r->snap.xfer;
    send_close(x);
    recv_close(x);
    free(x->frame);
    x->frame = NULL;
}

/* Count a failed transfer (either side), keep its text for /jsz and log
 * it: the first one, then at most one line per REPLICA_WARN_MS with the
 * count since. A follower refused every transfer 28,016 times in a fault
 * run with nothing logged and no endpoint saying why (issue 21). */
static void note(struct replica *r, int rv, const char *what, const char *err)
{
    struct replica_xfer *x = &r->snap.xfer;
    x->info.failures++;
    snprintf(x->info.last_error, sizeof x->info.last_error, "%s: %s (%s)", what,
             err, keel_strerror(rv));
    x->unwarned++;
    uint64_t now = uv_now(r->host->loop);
    if (x->warned && now - x->warned_ms < REPLICA_WARN_MS) {
        return;
    }
    if (r->cbs.warn != NULL) {
        char msg[KEEL_ERRMSG_MAX + 96];
        if (x->warned) {
            snprintf(msg, sizeof msg,
                     "snapshot transfer failed %" PRIu64 " times in %" PRIu64
                     " s, the last: %s",
                     x->unwarned, (now - x->warned_ms) / 1000,
                     x->info.last_error);
        } else {
            snprintf(msg, sizeof msg, "snapshot transfer failed: %s",
                     x->info.last_error);
        }
        r->cbs.warn(r, msg, r->cbs.arg);
    }
    x->warned = true;
    x->warned_ms = now;
    x->unwarned = 0;
}

int replica__snap_fill(struct replica *r, const struct raft_msg *m,
                       struct raft_msg *copy)
{
    struct replica_xfer *x = &r->snap.xfer;
    char err[KEEL_ERRMSG_MAX];
    uint64_t total = 0;
    int rv = 0;
    ASSERT(m->type == RAFT_MSG_SNAPSHOT);
    if (r->snap.sn == NULL) {
        return KEEL_ENOENT;
    }
    if (x->frame == NULL) {
        x->frame = malloc(SNAP_FRAME_BYTES);
        if (x->frame == NULL) {
            return KEEL_ENOMEM;
        }
    }
    uint64_t now = uv_now(r->host->loop);
    bool other = x->ss != NULL && x->ss_index != m->snapshot.index;
    if (other && x->ss_progress_ms == 0 &&
        now - x->ss_made_ms < REPLICA_XFER_RESPOOL_MS) {
        /* Nobody is taking the spool we have (a follower that is down
         * is sent a chunk every heartbeat): do not copy the snapshot and
         * the retained log again at every compaction. */
        return KEEL_EAGAIN;
    }
    if (x->ss == NULL || other || (m->snapshot.offset == 0 && x->ss_stale)) {
        struct store_group_info gi;
        struct snap_send *ss = NULL;
        store_group_info(r->g, &gi);
        rv = snap_send_open_at(r->snap.sn, m->snapshot.index, gi.first_index,
                               &ss, &total, err);
        if (rv != 0 && !other && x->ss != NULL) {
            /* The snapshot is gone (a newer pair pushed it out while a
             * transfer held the core's compaction): the spool we have is
             * a consistent copy of it. */
            x->ss_stale = false;
        } else if (rv != 0) {
            note(r, rv, "snapshot send", err);
            return rv;
        } else {
            send_close(x);
            x->ss = ss;
            x->ss_index = m->snapshot.index;
            x->ss_stale = false;
            x->ss_made_ms = now;
            x->ss_progress_ms = 0;
            x->info.sends++;
        }
    }
    if (m->snapshot.offset > 0) {
        x->ss_progress_ms = now; /* a follower is taking it */
    }
    uint64_t index = 0, term = 0, log_first = 0;
    snap_send_info(x->ss, &index, &term, &log_first);
    ASSERT(index == m->snapshot.index);
    size_t len = 0;
    bool done = false;
    rv = snap_send_chunk(x->ss, m->snapshot.offset, x->frame, SNAP_FRAME_BYTES,
                         &len, &done, err);
    if (rv != 0) {
        note(r, rv, "snapshot chunk", err);
        return rv;
    }
    *copy = *m;
    copy->snapshot.log_first = log_first;
    copy->snapshot.chunk = x->frame;
    copy->snapshot.len = (uint32_t)len;
    copy->snapshot.done = done;
    return 0;
}

/* Forget the transfer being received; the leader restarts it. Once the
 * install changed the live log (truncated or appended to it outside the
 * core) the core's log is not the store's any more: the group stops
 * rather than hand the store entries after a log it does not hold (a
 * restart loads the core from the store; docs/raft.md "InstallSnapshot"). */
static void recv_abort(struct replica *r, int rv, const char *what,
                       const char *err)
{
    struct replica_xfer *x = &r->snap.xfer;
    bool touched = x->sr != NULL && snap_recv_touched_log(x->sr);
    uint64_t index = x->sr_index;
    note(r, rv, what, err);
    recv_close(x);
    raft_snapshot_abort(&r->raft);
    if (touched) {
        char msg[KEEL_ERRMSG_MAX];
        snprintf(msg, sizeof msg,
                 "install of snapshot %" PRIu64 " failed after it changed "
                 "the local log (%.40s: %.100s): the group stops, restart the "
                 "node",
                 index, what, err);
        replica__break(r, rv, msg);
    }
}

/* A complete transfer, every frame of it intact, failed to install. A
 * refusal of its content is answered to the leader, which spools the
 * snapshot afresh (a spool damaged on its disk heals; finding F29). A
 * refusal that repeats with fresh spools too (the snapshot itself is
 * wrong, or this side misreads it) would loop for ever with nothing said:
 * an empty retained log refused as a bad checksum was taken 1,084 times
 * in a minute (issue 21, docs/faults.md F26). After
 * REPLICA_INSTALL_REPEATS_MAX such refusals of the same snapshot in a row,
 * whatever spool carried them, the group stops and says why. Other errors
 * (a full disk, say) are counted and retried: they can clear. */
static void install_failed(struct replica *r, int rv, const char *err)
{
    struct replica_xfer *x = &r->snap.xfer;
    uint64_t index = x->sr_index, term = x->sr_term;
    if (index != x->failed_index || term != x->failed_term) {
        x->failed_index = index;
        x->failed_term = term;
        x->info.repeats = 0;
    }
    x->info.repeats += rv == KEEL_ECORRUPT;
    if (rv == KEEL_ECORRUPT) {
        x->refuse_due = true; /* replica__snap_install_step answers */
        x->refused_index = index;
        x->refused_term = term;
    }
    recv_abort(r, rv, "snapshot install", err);
    if (!r->broken && x->info.repeats >= REPLICA_INSTALL_REPEATS_MAX) {
        char msg[KEEL_ERRMSG_MAX];
        snprintf(msg, sizeof msg,
                 "install of snapshot %" PRIu64 " (term %" PRIu64 ") refused "
                 "%" PRIu64 " times in a row (%.60s): the group stops; "
                 "restart the node to retry",
                 index, term, x->info.repeats, err);
        replica__break(r, rv, msg);
    }
}

bool replica__snap_receive(struct replica *r, const struct raft_msg *m)
{
    struct replica_xfer *x = &r->snap.xfer;
    char err[KEEL_ERRMSG_MAX];
    if (m->type == RAFT_MSG_SNAPSHOT_RESP && !m->snapshot_resp.success) {
        x->ss_stale = true; /* the next restart spools again */
        return true;
    }
    if ((m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_SNAPSHOT) &&
        replica__installing(r)) {
        /* The retained log is being written outside the core, over loop
         * turns: a new leader's entries and another transfer wait until
         * the install is recorded (the core answers on its next
         * heartbeat; the leader sends the chunk again). */
        return false;
    }
    if (m->type != RAFT_MSG_SNAPSHOT || r->snap.sn == NULL) {
        return r->snap.sn != NULL || m->type != RAFT_MSG_SNAPSHOT;
    }
    struct snap_frame fm;
    if (m->snapshot.chunk == NULL ||
        snap_frame_check(m->snapshot.chunk, m->snapshot.len, &fm, err) != 0) {
        if (m->snapshot.chunk == NULL) {
            snprintf(err, sizeof err, "empty chunk");
        }
        recv_abort(r, KEEL_ECORRUPT, "snapshot chunk", err);
        return false;
    }
    return true;
}

/* Restore the state machine from the snapshot just installed. */
static int restore_installed(struct replica *r, struct raft_config *c,
                             char *err)
{
    struct replica_xfer *x = &r->snap.xfer;
    uint8_t *body = NULL;
    size_t len = 0;
    int rv = snap_read_held(r->snap.sn, x->sr_index, &body, &len, err);
    if (rv == 0) {
        rv = replica__snap_restore_body(r, x->sr_index, body, len, c, err);
    }
    free(body);
    return rv;
}

/* Commit the install (snapshot file, LMDB), restore the state machine and
 * mark INSTALLED due. KEEL_EAGAIN while an appended log is not persisted. */
static int install_commit(struct replica *r)
{
    struct replica_xfer *x = &r->snap.xfer;
    char err[KEEL_ERRMSG_MAX];
    int rv = snap_recv_commit(x->sr, err);
    if (rv == KEEL_EAGAIN) {
        x->sr_waiting = true;
        return rv;
    }
    if (rv != 0) {
        install_failed(r, rv, err);
        return rv;
    }
    x->sr_waiting = false;
    rv = restore_installed(r, &x->cfg, err);
    if (rv != 0) {
        /* The install is durable; the state machine refused it (another
         * version wrote it): stop this group rather than diverge. */
        recv_close(x);
        if (r->cbs.failed != NULL) {
            r->cbs.failed(r, rv, err, r->cbs.arg);
        }
        return rv;
    }
    struct store_group_info gi;
    store_group_info(r->g, &gi);
    x->info.installed_index = x->sr_index;
    x->installed_term = x->sr_term;
    x->install_due = true;
    x->info.installs++;
    x->info.repeats = 0;
    x->failed_index = 0;
    if (gi.persisted_index > r->persisted) {
        r->persisted = gi.persisted_index;
    }
    recv_close(x);
    return 0;
}

/* The whole transfer is in: install it unless a local snapshot is being
 * written by a worker (the snap functions are not concurrent; the job's
 * end kicks us again). */
static void install_try(struct replica *r)
{
    struct replica_xfer *x = &r->snap.xfer;
    char err[KEEL_ERRMSG_MAX];
    ASSERT(x->sr != NULL && x->sr_complete);
    if (x->sr_waiting) {
        if (r->persisted >= x->sr_index) {
            (void)install_commit(r);
        }
        return;
    }
    if (!replica__snap_idle(r, x->sr_index)) {
        return;
    }
    bool done = false;
    int rv =
        snap_recv_apply_step(x->sr, REPLICA_INSTALL_STEP_BYTES, &done, err);
    if (rv != 0) {
        install_failed(r, rv, err);
        return;
    }
    if (!done) {
        /* The next step at the next loop turn: a transfer of hundreds of
         * MB held the loop for seconds when it was checked and written in
         * the read callback of its last chunk (decision 0041). */
        replica__idle_start(r);
        return;
    }
    (void)install_commit(r);
}

void replica__snap_chunk(struct replica *r, const struct raft_msg_snapshot *s)
{
    struct replica_xfer *x = &r->snap.xfer;
    char err[KEEL_ERRMSG_MAX];
    uint64_t next = 0;
    bool done = false;
    int rv = 0;
    if (r->snap.sn == NULL) {
        return;
    }
    if (s->offset == 0 && x->sr != NULL) {
        recv_close(x); /* a restart, or another snapshot */
    }
    if (x->sr == NULL) {
        if (s->offset != 0) {
            recv_abort(r, KEEL_ESTALE, "snapshot chunk", "no transfer open");
            return;
        }
        rv = snap_recv_open(r->snap.sn, s->index, s->term, s->log_first, &x->sr,
                            err);
        if (rv != 0) {
            x->sr = NULL;
            recv_abort(r, rv, "snapshot receive", err);
            return;
        }
        x->sr_index = s->index;
        x->sr_term = s->term;
        x->cfg = s->config;
    }
    rv = snap_recv_chunk(x->sr, s->offset, s->chunk, s->len, &next, &done, err);
    if (rv != 0) {
        recv_abort(r, rv, "snapshot chunk", err);
        return;
    }
    if (!s->done) {
        return;
    }
    if (!done) {
        recv_abort(r, KEEL_ECORRUPT, "snapshot transfer", "ends early");
        return;
    }
    x->sr_complete = true;
    install_try(r);
}

void replica__snap_install_kick(struct replica *r)
{
    struct replica_xfer *x = &r->snap.xfer;
    if (x->sr != NULL && x->sr_complete) {
        install_try(r);
    }
    replica__snap_install_step(r);
}

void replica__snap_install_step(struct replica *r)
{
    struct replica_xfer *x = &r->snap.xfer;
    if (x->refuse_due && !r->closing) {
        x->refuse_due = false;
        struct raft_in in = {
            .type = RAFT_IN_SNAPSHOT_REFUSED,
            .snapshot = {.index = x->refused_index, .term = x->refused_term}};
        (void)replica__step(r, &in); /* a stopped group sends nothing */
    }
    if (!x->install_due || r->closing) {
        return;
    }
    x->install_due = false;
    struct store_group_info gi;
    store_group_info(r->g, &gi);
    struct raft_in in = {
        .type = RAFT_IN_SNAPSHOT_INSTALLED,
        .snapshot = {.index = x->info.installed_index,
                     .term = x->installed_term,
                     .config = &x->cfg,
                     .faulty = gi.first_faulty > x->info.installed_index
                                   ? gi.first_faulty
                                   : 0}};
    (void)replica__step(r, &in);
}

void replica_install_info(const struct replica *r,
                          struct replica_install_info *out)
{
    const struct replica_xfer *x = &r->snap.xfer;
    ASSERT(r != NULL && out != NULL);
    *out = x->info;
    out->receiving = x->sr != NULL;
}
