/* The driver's snapshots (docs/design.md §5, snapshot/FORMAT.md "Driver
 * integration"): restore at open, take one every N applied entries or M
 * bytes on the worker pool once the entries it covers are persisted, tell
 * raft, and drop the log prefix a committed retention cut allows. */
#include <stdlib.h>
#include <string.h>

#include <keel/assert.h>
#include <keel/bytes.h>
#include <keel/error.h>

#include "replica_int.h"

/* The body of a snapshot file as the driver writes it: the Raft
 * configuration at the index (membership is part of the state, §5), then
 * the state machine's bytes. Little-endian. */
#define ENV_MAGIC 0x3153524bu /* "KRS1" */
#define ENV_HEADER_BYTES 16u

/* The configuration in effect at index: the latest at or below it. */
static const struct raft_config *config_at(const struct raft *rf,
                                           uint64_t index)
{
    const struct raft_config *c = &rf->snap_config;
    ASSERT(rf->n_configs <= RAFT_CONFIGS_MAX);
    for (uint32_t i = 0; i < rf->n_configs; i++) {
        if (rf->configs[i].index <= index) {
            c = &rf->configs[i].config;
        }
    }
    return c;
}

/* A group of one compacts its raft core to the newest snapshot; a group
 * with peers to the older one (see after_cb). */
static bool single(const struct replica *r)
{
    return raft_config_current(&r->raft)->n == 1;
}

static int env_encode(const struct raft_config *c, const uint8_t *sm,
                      size_t sm_len, uint8_t **out, size_t *len)
{
    uint8_t cfg[RAFT_CONFIG_BYTES_MAX];
    uint32_t clen = raft_config_encode(c, cfg, sizeof cfg);
    ASSERT(clen > 0);
    size_t n = ENV_HEADER_BYTES + clen + sm_len;
    uint8_t *b = malloc(n);
    if (b == NULL) {
        return KEEL_ENOMEM;
    }
    keel_put_le32(b, ENV_MAGIC);
    keel_put_le32(b + 4, clen);
    keel_put_le64(b + 8, sm_len);
    memcpy(b + ENV_HEADER_BYTES, cfg, clen);
    if (sm_len > 0) {
        memcpy(b + ENV_HEADER_BYTES + clen, sm, sm_len);
    }
    *out = b;
    *len = n;
    return 0;
}

/* The file passed its XXH3-128: a body that does not parse was written
 * by another version (or a bug), never by a media fault. */
static int env_decode(const uint8_t *b, size_t len, struct raft_config *c,
                      const uint8_t **sm, size_t *sm_len, char *errmsg)
{
    if (len < ENV_HEADER_BYTES || keel_get_le32(b) != ENV_MAGIC) {
        return keel_err(KEEL_EVERSION, errmsg,
                        "snapshot body is not a replica snapshot (version "
                        "1): start a keeld that wrote it");
    }
    uint32_t clen = keel_get_le32(b + 4);
    uint64_t slen = keel_get_le64(b + 8);
    if (clen > RAFT_CONFIG_BYTES_MAX ||
        len - ENV_HEADER_BYTES < (uint64_t)clen + slen ||
        len - ENV_HEADER_BYTES - clen != slen ||
        raft_config_decode(b + ENV_HEADER_BYTES, clen, c) != 0) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot body lengths or configuration do not "
                        "parse");
    }
    *sm = b + ENV_HEADER_BYTES + clen;
    *sm_len = (size_t)slen;
    return 0;
}

static void job_free(struct replica_snap_job *j)
{
    if (j != NULL) {
        pthread_mutex_destroy(&j->mu);
        pthread_cond_destroy(&j->cv);
        free(j->body);
        free(j);
    }
}

/* Drop what the highest committed cut allows: never past the older kept
 * snapshot held valid (snap_drop_prefix checks it again). Not while a
 * worker writes a snapshot (the store's snapshot pair is being changed). */
static void drop_prefix(struct replica *r)
{
    struct replica_snap *s = &r->snap;
    struct snap_info si;
    char err[KEEL_ERRMSG_MAX];
    ASSERT(s->sn != NULL);
    if (s->cut == 0 || (s->job != NULL && s->job->queued) ||
        replica__xfer_busy(r)) {
        return;
    }
    snap_info(s->sn, &si);
    uint64_t upto = s->cut < si.older_index ? s->cut : si.older_index;
    if (upto == 0) {
        return;
    }
    int rv = snap_drop_prefix(s->sn, upto, err);
    ASSERT(rv != KEEL_EPERM); /* upto <= the older valid snapshot */
    (void)rv; /* other errors: the next cut or snapshot retries */
}

static void take(struct replica *r, uint64_t index, uint64_t term);

static bool due(const struct replica_snap *s)
{
    return s->since_entries >= s->every_entries ||
           s->since_bytes >= s->every_bytes;
}

/* Entries applied while a snapshot was being written may already make the
 * next one due: take it at the applied index (the loop is between two
 * applies, so the state machine is exactly there). */
static void maybe_take_now(struct replica *r)
{
    uint64_t term = 0;
    if (r->closing || r->snap.job != NULL || !due(&r->snap) ||
        r->applied <= r->snap.floor ||
        store_term_at(r->g, r->applied, &term) != 0) {
        return;
    }
    take(r, r->applied, term);
}

static void work_cb(uv_work_t *req)
{
    struct replica_snap_job *j = req->data;
    j->rv =
        snap_write(j->r->snap.sn, j->index, j->term, j->body, j->len, j->err);
    pthread_mutex_lock(&j->mu);
    j->written = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void replica__snap_wait(struct replica *r)
{
    struct replica_snap_job *j = r->snap.job;
    ASSERT(r->closing);
    if (j == NULL || !j->queued) {
        return;
    }
    if (uv_cancel((uv_req_t *)&j->req) == 0) {
        return; /* never started: after_cb runs with UV_ECANCELED */
    }
    pthread_mutex_lock(&j->mu);
    /* Bounded by one snapshot write (its fsyncs). */
    while (!j->written) {
        pthread_cond_wait(&j->cv, &j->mu);
    }
    pthread_mutex_unlock(&j->mu);
}

static void after_cb(uv_work_t *req, int status)
{
    struct replica_snap_job *j = req->data;
    struct replica *r = j->r;
    struct replica_snap *s = &r->snap;
    ASSERT(s->job == j);
    ASSERT(j->queued);
    j->queued = false;
    if (r->closing || status != 0) {
        s->job = NULL;
        job_free(j);
        replica__release(r);
        return;
    }
    replica__release(r);
    if (j->rv == KEEL_EAGAIN) {
        replica__snap_kick(r); /* the store's record saw an older report */
        return;
    }
    s->job = NULL;
    if (j->rv == 0) {
        s->taken++;
        s->floor = j->index;
        s->must_not_lead = false;
        struct raft_in in = {.type = RAFT_IN_SNAPSHOT_TAKEN,
                             .snapshot = {.index = j->index, .term = j->term}};
        job_free(j);
        if (!single(r)) {
            /* With peers the core compacts only to the older kept
             * snapshot: a follower up to one interval behind is still
             * served by AppendEntries, one further behind by
             * InstallSnapshot of that snapshot (replica_install.c). */
            struct snap_info si;
            snap_info(s->sn, &si);
            in.snapshot.index = si.older_index;
            in.snapshot.term = si.older_term;
        }
        if (!replica__xfer_busy(r) && in.snapshot.index > r->raft.snap_index &&
            in.snapshot.index <= r->raft.last_index &&
            raft_term_at(&r->raft, in.snapshot.index) == in.snapshot.term) {
            (void)replica__step(r, &in);
        }
        drop_prefix(r);
        maybe_take_now(r);
        replica__snap_install_kick(r);
        return;
    }
    /* ENOSPC and the like: the previous snapshots stay; the next
     * interval tries again. */
    memcpy(s->load, j->err, sizeof s->load);
    job_free(j);
    replica__snap_install_kick(r);
}

bool replica__snap_idle(struct replica *r, uint64_t index)
{
    struct replica_snap_job *j = r->snap.job;
    if (j == NULL) {
        return true;
    }
    if (j->queued) {
        return false;
    }
    if (j->index <= index) {
        job_free(j);
        r->snap.job = NULL;
    }
    return true;
}

void replica__snap_kick(struct replica *r)
{
    struct replica_snap_job *j = r->snap.job;
    /* An install in steps owns the snap until it is recorded. */
    if (j == NULL || j->queued || r->closing || replica__installing(r)) {
        return;
    }
    /* §5: a snapshot at X only after the entries <= X are persisted. */
    if (r->persisted < j->index) {
        return;
    }
    j->req.data = j;
    if (uv_queue_work(r->host->loop, &j->req, work_cb, after_cb) != 0) {
        return; /* retried at the next persisted report */
    }
    j->queued = true;
    r->handles_open++;
}

/* Encode the state right after index was applied (loop thread). */
static void take(struct replica *r, uint64_t index, uint64_t term)
{
    struct replica_snap *s = &r->snap;
    uint8_t *sm = NULL;
    size_t sm_len = 0;
    ASSERT(s->job == NULL);
    ASSERT(index > s->floor);
    struct replica_snap_job *j = calloc(1, sizeof *j);
    if (j == NULL) {
        return;
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    int rv = r->cbs.snapshot(r, index, &sm, &sm_len, r->cbs.arg);
    if (rv == 0) {
        rv = env_encode(config_at(&r->raft, index), sm, sm_len, &j->body,
                        &j->len);
    }
    free(sm);
    if (rv != 0) {
        job_free(j);
        return; /* retried after the next interval */
    }
    j->r = r;
    j->index = index;
    j->term = term;
    s->job = j;
    s->since_entries = 0;
    s->since_bytes = 0;
    replica__snap_kick(r);
}

static void snap_apply(struct replica *r, uint64_t index, uint64_t term,
                       uint8_t type, const void *payload, uint32_t len,
                       uint64_t ctx, void *arg)
{
    struct replica_snap *s = &r->snap;
    if (s->user_apply != NULL) {
        s->user_apply(r, index, term, type, payload, len, ctx, arg);
    }
    s->since_entries++;
    s->since_bytes += len;
    if (s->job == NULL && index > s->floor && due(s)) {
        take(r, index, term);
    }
}

/* Replace the state machine with a snapshot body (the envelope: its
 * configuration, then the state machine's bytes); *c gets the
 * configuration. At open and after an install. */
int replica__snap_restore_body(struct replica *r, uint64_t index,
                               const uint8_t *body, size_t len,
                               struct raft_config *c, char *errmsg)
{
    const uint8_t *sm = NULL;
    size_t sm_len = 0;
    ASSERT(body != NULL);
    ASSERT(index > 0);
    int rv = env_decode(body, len, c, &sm, &sm_len, errmsg);
    if (rv != 0) {
        return rv;
    }
    r->snap.restore_cfg = c; /* replica_config during the callback */
    rv = r->cbs.restore(r, index, sm, sm_len, r->cbs.arg);
    r->snap.restore_cfg = NULL;
    if (rv != 0) {
        return keel_err(rv, errmsg, "the state machine refused snapshot %llu",
                        (unsigned long long)index);
    }
    r->applied = index;
    r->snap.restored_index = index;
    r->snap.floor = index > r->snap.floor ? index : r->snap.floor;
    r->snap.since_entries = 0;
    r->snap.since_bytes = 0;
    return 0;
}

/* The core would start at the snapshot (its log after lr->index) while
 * the store's log ends below it: every store append continues the store's
 * last index, so the first entry after the snapshot could not be written
 * (finding F19: a segment below the newest snapshot cut short, rule 3
 * dropped it and every later one). A log from index 1 is no exception
 * (finding F18): the core would hold 1..L, but the leader's core is
 * compacted to the older of its snapshots (decision 0017), so L + 1 comes
 * only by InstallSnapshot, which the snapshot held here refuses while the
 * stream is quiet (every install at or below it). The entries between
 * the log's end and the snapshot are committed and their bodies are gone
 * here, so the log continues no snapshot it can restore: the group is
 * amnesiac and heals by InstallSnapshot like a log with a gap
 * (docs/design.md §5 S4,
 * docs/decisions/0033-a-log-that-ends-below-its-snapshot-heals-by-install.md).
 * Recorded amnesiac first: replica_open quarantines only such a log. */
static int log_ends_below(struct replica *r, const struct snap_load_report *lr,
                          const struct store_recovery *rep, char *errmsg)
{
    struct raft_config c;
    const uint8_t *sm = NULL;
    size_t sm_len = 0;
    char hex[33];
    if (rep->last_index >= lr->index) {
        return 0; /* the log reaches the snapshot */
    }
    int rv = env_decode(lr->body, lr->body_len, &c, &sm, &sm_len, errmsg);
    if (rv != 0 || c.n == 1) {
        /* A group of one has no leader to heal from: it opens amnesiac
         * and only the operator's recover ends that (rule 4). */
        return rv;
    }
    if (!rep->amnesia) {
        rv = store_amnesia_enter(r->g, rep->hard_term, 0, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    store_group_id_hex(&r->gid, hex);
    return keel_err(KEEL_EAMNESIA, errmsg,
                    "group %s: its log ends at index %llu, below its snapshot "
                    "%llu (the records between are lost); it needs a snapshot "
                    "and log from a leader",
                    hex, (unsigned long long)rep->last_index,
                    (unsigned long long)lr->index);
}

/* Restore the state machine from lr. *from: the first log index raft
 * loads. Raft loads the snapshot (its core starts compacted there) when
 * the group is of one or the log no longer starts at index 1; a group
 * with peers whose log starts at 1 keeps it all in raft (followers behind
 * the snapshot are served by AppendEntries) and only the state machine
 * starts at the snapshot (apply resumes after it). */
static int restore(struct replica *r, const struct snap_load_report *lr,
                   const struct store_recovery *rep, uint64_t *from,
                   char *errmsg)
{
    struct raft_config c;
    ASSERT(lr->body != NULL);
    ASSERT(lr->index > 0);
    int rv = log_ends_below(r, lr, rep, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = replica__snap_restore_body(r, lr->index, lr->body, lr->body_len, &c,
                                    errmsg);
    if (rv != 0) {
        return rv;
    }
    if (c.n == 1 || rep->first_index > 1) {
        raft_load_snapshot(&r->raft, lr->index, lr->term, &c);
        *from = lr->index + 1;
    } else {
        *from = rep->first_index;
    }
    return 0;
}

int replica__snap_open(struct replica *r, const struct replica_options *opt,
                       const struct store_recovery *rep, uint64_t *from,
                       char *errmsg)
{
    struct replica_host *h = r->host;
    struct replica_snap *s = &r->snap;
    struct snap_load_report lr;
    ASSERT(s->sn == NULL);
    *from = 0;
    if (!h->snapshots || r->cbs.snapshot == NULL || r->cbs.restore == NULL) {
        return 0;
    }
    int rv = snap_open(&h->snap_cfg, h->store, r->g, rep, &s->sn, &lr, errmsg);
    if (rv != 0) {
        return rv;
    }
    snap_report_describe(&lr, s->load, sizeof s->load);
    /* A store-amnesiac group whose log or snapshot still loads opens
     * amnesiac (replica_fault.c) and catches up from a leader; a log that
     * continues no valid snapshot cannot be loaded at all (replica_open
     * quarantines it for a group with peers and opens again, empty). */
    if (lr.source == SNAP_SOURCE_AMNESIA) {
        snap_body_free(&lr);
        return keel_err(KEEL_EAMNESIA, errmsg,
                        "%s: it restores only by InstallSnapshot from a "
                        "leader",
                        s->load);
    }
    if (lr.source == SNAP_SOURCE_NEWEST || lr.source == SNAP_SOURCE_OLDER) {
        rv = restore(r, &lr, rep, from, errmsg);
    } else {
        *from = rep->first_index; /* rebuilt from index 1 (snap_open) */
    }
    s->floor = lr.named_index > lr.index ? lr.named_index : lr.index;
    s->must_not_lead = lr.must_not_lead;
    s->every_entries = opt->snap_entries != 0 ? opt->snap_entries
                                              : REPLICA_SNAP_ENTRIES_DEFAULT;
    s->every_bytes =
        opt->snap_bytes != 0 ? opt->snap_bytes : REPLICA_SNAP_BYTES_DEFAULT;
    s->user_apply = r->cbs.apply;
    r->cbs.apply = snap_apply;
    snap_body_free(&lr);
    return rv;
}

void replica__snap_free(struct replica *r)
{
    struct replica_snap *s = &r->snap;
    replica__xfer_free(r);
    ASSERT(s->job == NULL || !s->job->queued);
    job_free(s->job);
    s->job = NULL;
    snap_close(s->sn);
    s->sn = NULL;
}

int replica_compact(struct replica *r, uint64_t upto, char *errmsg)
{
    ASSERT(r != NULL);
    if (upto > r->applied) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "retention cut %llu above the applied index %llu",
                        (unsigned long long)upto,
                        (unsigned long long)r->applied);
    }
    if (r->snap.sn == NULL || upto <= r->snap.cut) {
        return 0;
    }
    r->snap.cut = upto;
    drop_prefix(r);
    return 0;
}

/* Read back one held snapshot file; true when it verifies (or is gone
 * since: nothing to check). *bytes grows by its body size. */
static bool held_ok(struct snap *sn, uint64_t index, uint64_t *bytes)
{
    uint8_t *body = NULL;
    size_t len = 0;
    char err[KEEL_ERRMSG_MAX];
    int rv = snap_read_held(sn, index, &body, &len, err);
    free(body);
    *bytes += len;
    return rv == 0 || rv == KEEL_ENOENT;
}

uint64_t replica__snap_scrub(struct replica *r, struct replica_scrub_stats *st)
{
    struct replica_snap *s = &r->snap;
    struct snap_info si;
    uint64_t bytes = 0;
    uint64_t term = 0;
    ASSERT(st != NULL);
    if (s->sn == NULL || r->closing) {
        return 0;
    }
    snap_info(s->sn, &si);
    bool bad =
        (si.newest_index != 0 && !held_ok(s->sn, si.newest_index, &bytes)) ||
        (si.older_index != 0 && !held_ok(s->sn, si.older_index, &bytes));
    st->bytes += bytes;
    if (!bad) {
        return bytes;
    }
    st->faults++;
    /* A fresh snapshot of the applied state pushes a damaged file out of
     * the kept pair; with the log it restores everything either did. */
    if (s->job == NULL && r->applied > s->floor &&
        store_term_at(r->g, r->applied, &term) == 0) {
        take(r, r->applied, term);
        st->repaired++;
    }
    return bytes;
}

void replica_snap_info(const struct replica *r, struct replica_snap_info *out)
{
    const struct replica_snap *s = &r->snap;
    struct store_group_info gi;
    ASSERT(r != NULL && out != NULL);
    memset(out, 0, sizeof *out);
    store_group_info(r->g, &gi);
    out->first_index = gi.first_index;
    out->enabled = s->sn != NULL;
    if (s->sn != NULL) {
        struct snap_info si;
        snap_info(s->sn, &si);
        out->newest_index = si.newest_index;
        out->older_index = si.older_index;
        out->must_not_lead = si.must_not_lead;
    }
    out->log_quarantined = s->log_quarantined;
    out->rebuilt_segments = s->rebuilt_segments;
    out->rebuilt_from = s->rebuilt_from;
    out->cut = s->cut;
    out->taken = s->taken;
    out->writing = s->job != NULL;
    out->restored_index = s->restored_index;
    memcpy(out->load, s->load, sizeof out->load);
}

const struct raft_config *replica_config(const struct replica *r)
{
    ASSERT(r != NULL);
    if (r->snap.restore_cfg != NULL) {
        return r->snap.restore_cfg;
    }
    return raft_config_current(&r->raft);
}

int replica_host_delete_snapshots(struct replica_host *h,
                                  const struct store_group_id *gid,
                                  char *errmsg)
{
    ASSERT(h != NULL && gid != NULL);
    if (!h->snapshots) {
        return 0;
    }
    return snap_group_delete(&h->snap_cfg, gid, errmsg);
}

int replica_host_snapshots(struct replica_host *h, const char *data_dir,
                           void (*fatal_cb)(void *arg, const char *msg),
                           void *fatal_arg, char *errmsg)
{
    ASSERT(h != NULL && data_dir != NULL);
    size_t n = strlen(data_dir);
    if (n >= sizeof h->snap_dir) {
        return keel_err(KEEL_EINVAL, errmsg, "data directory path too long");
    }
    memcpy(h->snap_dir, data_dir, n + 1);
    h->snap_cfg = (struct snap_config){
        .data_dir = h->snap_dir, .fatal_cb = fatal_cb, .fatal_arg = fatal_arg};
    h->snapshots = true;
    return 0;
}
