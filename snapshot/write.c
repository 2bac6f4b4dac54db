/* Writing a snapshot (docs/design.md §5): temp file, write, fsync, rename,
 * directory fsync, then the synced LMDB record; the snapshot pushed out of
 * the two kept is deleted only after the newer one is recorded.
 */
#include <string.h>

#include <xxhash.h>

#include "internal.h"

void snap_path(const struct snap *sn, uint64_t index, char *out, size_t cap)
{
    ASSERT(sn != NULL);
    ASSERT(index >= 1);
    snap__fmt(out, cap, "%s/%020llu.snap", sn->dir, (unsigned long long)index);
}

void snap_debug_crash_at(struct snap *sn, enum snap_crash_point point)
{
    ASSERT(sn != NULL);
    ASSERT(point <= SNAP_CRASH_BEFORE_DELETE);
    sn->crash = point;
}

/* True (and the crash point cleared) if the test asked to die here. */
bool snap__crash_here(struct snap *sn, enum snap_crash_point point)
{
    ASSERT(sn != NULL);
    ASSERT(point != SNAP_CRASH_NONE);
    if (sn->crash != point) {
        return false;
    }
    sn->crash = SNAP_CRASH_NONE;
    return true;
}

static int write_body(struct snap *sn, struct fs_file *f,
                      const struct snap_header *h, snap_body_read_cb read_cb,
                      void *arg, uint8_t *buf, char *errmsg)
{
    uint64_t off = 0;
    uint64_t steps = 0;
    int rv;

    ASSERT(h->body_bytes <= SNAP_BODY_BYTES_MAX);
    ASSERT(buf != NULL);
    while (off < h->body_bytes) {
        ASSERT(++steps <= SNAP_BODY_BYTES_MAX / SNAP_IO_BYTES + 1);
        uint64_t left = h->body_bytes - off;
        size_t n = left < SNAP_IO_BYTES ? (size_t)left : SNAP_IO_BYTES;
        rv = read_cb(arg, off, buf, n, errmsg);
        if (rv != 0) {
            return rv;
        }
        struct iovec iov = {buf, n};
        rv = sn->fs->pwritev(sn->fs, f, &iov, 1, SNAP_HEADER_BYTES + off,
                             errmsg);
        if (rv != 0) {
            return rv;
        }
        off += n;
    }
    return 0;
}

/* Write header and body into the open temp file. ENOSPC and body-source
 * errors are returned; other write errors abort. */
static int write_temp(struct snap *sn, struct fs_file *f,
                      const struct snap_header *h, snap_body_read_cb read_cb,
                      void *arg, char *errmsg)
{
    uint8_t hb[SNAP_HEADER_BYTES];
    struct iovec iov = {hb, sizeof hb};
    uint8_t *buf = malloc(SNAP_IO_BYTES);
    int rv;

    ASSERT(sn != NULL);
    ASSERT(h->index >= 1);
    if (buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    snap_header_encode(h, hb);
    rv = sn->fs->ftruncate(sn->fs, f, 0, errmsg);
    if (rv == 0) {
        rv = sn->fs->pwritev(sn->fs, f, &iov, 1, 0, errmsg);
    }
    if (rv == 0) {
        rv = write_body(sn, f, h, read_cb, arg, buf, errmsg);
    }
    free(buf);
    if (rv == KEEL_EIO) {
        snap__fatal(sn, "write snapshot", errmsg);
    }
    return rv;
}

int snap__write_file(struct snap *sn, const struct snap_header *h,
                     snap_body_read_cb read_cb, void *arg, char *errmsg)
{
    char tmp[SNAP_PATH_BYTES];
    char dst[SNAP_PATH_BYTES];
    struct fs_file *f = NULL;
    int rv;

    ASSERT(sn != NULL && h != NULL);
    ASSERT(memcmp(h->group, sn->gid, 16) == 0);
    snap__fmt(tmp, sizeof tmp, "%s/%020llu.tmp", sn->dir,
              (unsigned long long)h->index);
    snap_path(sn, h->index, dst, sizeof dst);
    rv = sn->fs->open(sn->fs, tmp, FS_CREATE, &f, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = write_temp(sn, f, h, read_cb, arg, errmsg);
    if (rv != 0) {
        sn->fs->close(sn->fs, f);
        (void)sn->fs->unlink(sn->fs, tmp, NULL);
        return rv;
    }
    if (snap__crash_here(sn, SNAP_CRASH_AFTER_TEMP_WRITE)) {
        sn->fs->close(sn->fs, f);
        return keel_err(KEEL_ECANCELED, errmsg, "crash after temp write");
    }
    rv = sn->fs->fsync(sn->fs, f, errmsg);
    sn->fs->close(sn->fs, f);
    if (rv != 0) {
        snap__fatal(sn, "fsync snapshot", errmsg);
    }
    if (snap__crash_here(sn, SNAP_CRASH_AFTER_TEMP_SYNC)) {
        return keel_err(KEEL_ECANCELED, errmsg, "crash after temp sync");
    }
    rv = sn->fs->rename(sn->fs, tmp, dst, errmsg);
    if (rv != 0) {
        snap__fatal(sn, "rename snapshot", errmsg);
    }
    if (snap__crash_here(sn, SNAP_CRASH_AFTER_RENAME)) {
        return keel_err(KEEL_ECANCELED, errmsg, "crash after rename");
    }
    rv = sn->fs->fsync_dir(sn->fs, sn->dir, errmsg);
    /* snap/'s own entry (made without fsync at open, snap.c init_snap). */
    rv = rv == 0 ? store_group_dirs_sync(sn->g, errmsg) : rv;
    if (rv != 0) {
        snap__fatal(sn, "fsync snapshot directory", errmsg);
    }
    return 0;
}

static bool held_is(const struct snap *sn, uint64_t index)
{
    ASSERT(sn != NULL);
    ASSERT(index >= 1);
    return sn->newest.index == index || sn->older.index == index;
}

/* Delete the files of gone[0..n) this node no longer holds (the §5
 * keep-two rule), then fsync the directory. */
static void unlink_gone(struct snap *sn, const uint64_t *gone, unsigned n)
{
    char path[SNAP_PATH_BYTES];
    char errmsg[KEEL_ERRMSG_MAX];
    bool unlinked = false;

    ASSERT(n <= 3);
    for (unsigned i = 0; i < n; i++) {
        if (gone[i] == 0 || held_is(sn, gone[i])) {
            continue;
        }
        snap_path(sn, gone[i], path, sizeof path);
        unlinked = sn->fs->unlink(sn->fs, path, NULL) == 0 || unlinked;
    }
    if (unlinked && sn->fs->fsync_dir(sn->fs, sn->dir, errmsg) != 0) {
        snap__fatal(sn, "fsync snapshot directory", errmsg);
    }
}

int snap__record(struct snap *sn, uint64_t index, uint64_t term, char *errmsg)
{
    struct snap_named nm;
    uint64_t gone[2];
    char path[SNAP_PATH_BYTES];
    int rv;

    ASSERT(sn != NULL);
    ASSERT(index > sn->newest.index);
    /* The snapshots the record pushes out of the kept pair: the one LMDB
     * named as older, and the older file held valid (they differ after a
     * bad newest was quarantined). */
    nm = sn->named;
    gone[0] = sn->older.index;
    gone[1] = nm.older_index;
    if (snap__crash_here(sn, SNAP_CRASH_BEFORE_RECORD)) {
        return keel_err(KEEL_ECANCELED, errmsg, "crash before LMDB record");
    }
    rv = store_snapshot_record(sn->g, index, term, errmsg);
    if (rv == KEEL_EAGAIN) {
        /* Entries <= index are not persisted yet (§5): the file must not
         * count, now or after a crash; remove it (it is not named). */
        snap_path(sn, index, path, sizeof path);
        (void)sn->fs->unlink(sn->fs, path, NULL);
        if (sn->fs->fsync_dir(sn->fs, sn->dir, NULL) != 0) {
            snap__fatal(sn, "fsync snapshot directory", "unlink");
        }
        return rv;
    }
    if (rv != 0) {
        return rv;
    }
    if (index > nm.index) {
        sn->named = (struct snap_named){index, term, nm.index, nm.term};
    }
    if (sn->newest.index != 0) {
        sn->older = sn->newest;
    }
    sn->newest = (struct snap_held){index, term};
    sn->must_not_lead = false;
    if (snap__crash_here(sn, SNAP_CRASH_BEFORE_DELETE)) {
        return keel_err(KEEL_ECANCELED, errmsg, "crash before delete");
    }
    unlink_gone(sn, gone, 2);
    return 0;
}

void snap__adopt_replaced(struct snap *sn, uint64_t index, uint64_t term,
                          uint64_t older_index, uint64_t older_term)
{
    uint64_t gone[3] = {sn->older.index, sn->named.older_index,
                        sn->newest.index};

    ASSERT(sn != NULL);
    ASSERT(index > sn->newest.index);
    ASSERT(older_index == 0 || older_index == sn->newest.index);
    sn->named = (struct snap_named){index, term, older_index, older_term};
    sn->older = (struct snap_held){older_index, older_term};
    sn->newest = (struct snap_held){index, term};
    sn->must_not_lead = false;
    unlink_gone(sn, gone, 3);
}

struct mem_body {
    const uint8_t *p;
    size_t len;
};

static int mem_read(void *arg, uint64_t off, uint8_t *buf, size_t n,
                    char *errmsg)
{
    struct mem_body *m = arg;

    (void)errmsg;
    ASSERT(m != NULL);
    ASSERT(off + n <= m->len);
    memcpy(buf, m->p + off, n);
    return 0;
}

int snap_write(struct snap *sn, uint64_t index, uint64_t term, const void *body,
               size_t len, char *errmsg)
{
    struct snap_header h;
    struct mem_body mb = {body, len};
    int rv;

    ASSERT(sn != NULL);
    ASSERT(body != NULL || len == 0);
    ASSERT(index > sn->newest.index);
    if (len > SNAP_BODY_BYTES_MAX) {
        return keel_err(KEEL_ETOOBIG, errmsg,
                        "snapshot body of %zu bytes over the %llu maximum", len,
                        (unsigned long long)SNAP_BODY_BYTES_MAX);
    }
    if (index < sn->named.index ||
        (index == sn->named.index && term != sn->named.term)) {
        /* The store cannot record below what LMDB names (a quarantined
         * newest still counts for the extent). */
        return keel_err(KEEL_ESTALE, errmsg,
                        "snapshot at (%llu, t%llu) is behind the recorded "
                        "(%llu, t%llu): snapshot at or after it",
                        (unsigned long long)index, (unsigned long long)term,
                        (unsigned long long)sn->named.index,
                        (unsigned long long)sn->named.term);
    }
    memset(&h, 0, sizeof h);
    memcpy(h.group, sn->gid, 16);
    h.index = index;
    h.term = term;
    h.body_bytes = len;
    XXH128_hash_t hh = XXH3_128bits(body, len);
    h.body_hash_low = hh.low64;
    h.body_hash_high = hh.high64;
    rv = snap__write_file(sn, &h, mem_read, &mb, errmsg);
    if (rv != 0) {
        return rv;
    }
    return snap__record(sn, index, term, errmsg);
}

int snap_drop_prefix(struct snap *sn, uint64_t upto, char *errmsg)
{
    ASSERT(sn != NULL);
    ASSERT(upto >= 1);
    ASSERT(sn->older.index <= sn->newest.index);
    /* The store checks LMDB's older snapshot; after a quarantine that one
     * may be the bad file, so also stay at or below the older snapshot this
     * node can actually restore from (docs/design.md §5 S2). */
    int rv = store_prefix_drop_check(upto, sn->older.index, "valid", errmsg);
    if (rv != 0) {
        return rv;
    }
    return store_drop_prefix(sn->g, upto, errmsg);
}
