/* The operator override of membership rule 4 (`keel cluster recover
 * --accept-loss`, docs/raft.md "Operator override"): a group whose voters
 * cannot elect a leader (a majority amnesiac) is given a term past every
 * term the survey saw and a log cut after `keep`; what lies after keep is
 * copied to <data>/quarantine/ first. The survey and the choice of the
 * source are the caller's (the CLI, over every node). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <keel/assert.h>
#include <keel/bytes.h>
#include <keel/error.h>

#include "replica_int.h"

void replica_survey(const struct replica *r, struct replica_survey *out)
{
    ASSERT(r != NULL && out != NULL);
    const struct raft *rf = &r->raft;
    *out = (struct replica_survey){
        .term = rf->term,
        .last_index = rf->last_index,
        .last_term = raft_term_at(rf, rf->last_index),
        .commit = rf->commit,
        .snap_index = rf->snap_index,
        .faulty = rf->faulty,
        .amnesiac = rf->amnesiac,
        .role = r->role,
        .leader = rf->leader,
    };
}

/* Copy records (keep, last] into one file under <data>/quarantine/:
 * "KEELRCV1", then per record u64 index, u64 term, u8 type, u32 len (LE)
 * and the payload; synced, then its directory. Records the store cannot
 * read (damaged) are skipped and counted. */
static int quarantine_tail(struct replica *r, uint64_t keep, uint64_t term,
                           char *path, size_t cap, uint32_t *copied,
                           char *errmsg)
{
    char dir[STORE_PATH_BYTES_MAX];
    char hex[33];
    struct replica_host *h = r->host;
    *copied = 0;
    if (h->snap_dir[0] == '\0') {
        return keel_err(KEEL_EINVAL, errmsg,
                        "no data directory for the quarantine copy");
    }
    store_group_id_hex(&r->gid, hex);
    int n = snprintf(dir, sizeof dir, "%s/quarantine", h->snap_dir);
    if (n < 0 || (size_t)n >= sizeof dir ||
        (mkdir(dir, 0755) != 0 && errno != EEXIST)) {
        return keel_err(KEEL_EIO, errmsg, "cannot make %s", dir);
    }
    n = snprintf(path, cap, "%s/recover-%s-term%" PRIu64 ".records", dir, hex,
                 term);
    if (n < 0 || (size_t)n >= cap) {
        return keel_err(KEEL_EINVAL, errmsg, "quarantine path too long");
    }
    FILE *f = fopen(path, "wbx");
    if (f == NULL) {
        return keel_err(KEEL_EIO, errmsg, "cannot create %s: %s", path,
                        strerror(errno));
    }
    bool ok = fwrite("KEELRCV1", 1, 8, f) == 8;
    /* Bounded by the log: one record per index after keep. */
    for (uint64_t i = keep + 1; ok && i <= r->raft.last_index; i++) {
        struct store_entry e;
        char err[KEEL_ERRMSG_MAX];
        if (store_read(r->g, i, &e, err) != 0) {
            continue; /* damaged: nothing intact to copy */
        }
        uint8_t hdr[21];
        keel_put_le64(hdr, e.index);
        keel_put_le64(hdr + 8, e.term);
        hdr[16] = e.type;
        keel_put_le32(hdr + 17, e.len);
        ok = fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr &&
             (e.len == 0 || fwrite(e.payload, 1, e.len, f) == e.len);
        store_entry_free(&e);
        *copied += ok ? 1 : 0;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    ok = ok && dfd >= 0 && fsync(dfd) == 0;
    if (dfd >= 0) {
        close(dfd);
    }
    if (!ok) {
        return keel_err(KEEL_EIO, errmsg, "cannot write %s", path);
    }
    return 0;
}

int replica__recover_out(struct replica *r, const struct raft_out *o,
                         char *errmsg)
{
    if (!o->recover_wait_changed) {
        return 0;
    }
    return store_recover_wait_set(r->g, o->recover_wait_term, errmsg);
}

int replica__load_recover_wait(struct replica *r, char *errmsg)
{
    uint64_t term = 0;
    int rv = store_recover_wait_get(r->g, &term);
    if (rv == KEEL_ENOENT) {
        return 0;
    }
    if (rv != 0) {
        /* A bad value makes the store open the group amnesiac (it votes
         * for nobody until a leader caught it up): stricter than the wait
         * itself. */
        return rv == KEEL_ECORRUPT ? 0
                                   : keel_err(rv, errmsg,
                                              "recover wait of the group "
                                              "unreadable");
    }
    raft_load_recover_wait(&r->raft);
    return 0;
}

int replica_recover(struct replica *r, uint64_t term, uint64_t keep,
                    bool source, struct replica_recovered *out, char *errmsg)
{
    ASSERT(r != NULL && out != NULL);
    ASSERT(!r->closing);
    memset(out, 0, sizeof *out);
    if (!r->started) {
        return keel_err(KEEL_EAGAIN, errmsg, "group is still opening");
    }
    const struct raft *rf = &r->raft;
    if (term <= rf->term || keep < rf->snap_index || keep < rf->commit ||
        (rf->faulty != 0 && rf->faulty <= keep)) {
        return keel_err(
            KEEL_EINVAL, errmsg,
            "recover refused: term %" PRIu64 " must be above %" PRIu64
            ", keep %" PRIu64 " at or above the snapshot %" PRIu64
            " and the commit %" PRIu64
            " and below the first damaged record %" PRIu64,
            term, rf->term, keep, rf->snap_index, rf->commit, rf->faulty);
    }
    if (keep < rf->last_index) {
        int rv = quarantine_tail(r, keep, term, out->path, sizeof out->path,
                                 &out->quarantined, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    struct raft_in in = {.type = RAFT_IN_RECOVER};
    in.recover.term = term;
    in.recover.keep = keep;
    in.recover.source = source ? 1 : 0;
    int rv = replica__step(r, &in);
    if (rv != 0) {
        return keel_err(rv, errmsg, "recover refused by the core: %s",
                        keel_strerror(rv));
    }
    return 0;
}

int replica_quarantine_survey(struct replica *r, struct store_qlog *out,
                              char *dir, size_t cap, char *errmsg)
{
    ASSERT(r != NULL && out != NULL && dir != NULL);
    store_qlog_dir(r->host->store, dir, cap);
    return store_qlog_survey(r->host->store, &r->gid, out, errmsg);
}

int replica_restore_quarantined(struct replica_host *h,
                                const struct store_group_id *gid,
                                const struct store_fsync *policy, uint64_t keep,
                                struct store_qlog *out, char *errmsg)
{
    struct store_group *g = NULL;
    struct store_recovery rep;
    ASSERT(h != NULL && gid != NULL && out != NULL);
    memset(&rep, 0, sizeof rep);
    memset(out, 0, sizeof *out);
    int rv = store_group_open(h->store, gid, policy, &g, &rep, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (rep.last_index != 0 || rep.snapshot_index != 0) {
        /* Never over a live log: it may hold more than the copy. */
        rv = keel_err(KEEL_EINVAL, errmsg,
                      "the live log of the group is not empty (through %llu, "
                      "snapshot %llu): it is kept and the quarantined log is "
                      "not restored; survey again",
                      (unsigned long long)rep.last_index,
                      (unsigned long long)rep.snapshot_index);
    } else {
        rv = store_qlog_restore(g, keep, out, errmsg);
    }
    store_group_close(g);
    return rv;
}
