/* Segment file discipline (docs/design.md §4.1): create = header, full
 * size zero-filled, file fsync, directory fsync, then the catalogue entry
 * (synced); delete = catalogue, unlink, directory fsync. Runs on sync
 * threads only (store__mkdirs and store__quarantine also at open).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

void store__seg_path(const struct store_group *g, uint64_t base, char *out,
                     size_t cap)
{
    ASSERT(g != NULL);
    ASSERT(base >= 1);
    store_fmt_str(out, cap, "%s/%020llu.blk", g->dir, (unsigned long long)base);
}

/* mkdir -p below the data directory; a new directory's parent is fsynced
 * so the entry itself is durable. */
int store__mkdirs(struct store *s, const char *dir, char *errmsg)
{
    char buf[STORE_PATH_BYTES_MAX];
    size_t root = strlen(s->data_dir);
    int rv;

    ASSERT(strncmp(dir, s->data_dir, root) == 0);
    ASSERT(strlen(dir) < sizeof buf);
    for (size_t i = root + 1; i <= strlen(dir); i++) {
        if (dir[i] != '/' && dir[i] != '\0') {
            continue;
        }
        memcpy(buf, dir, i);
        buf[i] = '\0';
        rv = s->fs->mkdir(s->fs, buf, errmsg);
        if (rv == KEEL_EEXIST) {
            continue;
        }
        if (rv != 0) {
            return rv;
        }
        char parent[STORE_PATH_BYTES_MAX];
        store__parent_of(buf, parent, sizeof parent);
        rv = s->fs->fsync_dir(s->fs, parent, errmsg);
        if (rv != 0) {
            store__fatal(s, "fsync directory", errmsg);
        }
    }
    return 0;
}

int store__mkdir_fresh(struct store *s, const char *dir, char *errmsg)
{
    ASSERT(strncmp(dir, s->data_dir, strlen(s->data_dir)) == 0);
    ASSERT(strlen(dir) < STORE_PATH_BYTES_MAX);
    int rv = s->fs->mkdir(s->fs, dir, errmsg);
    return rv == KEEL_EEXIST ? 0 : rv;
}

void store_group_dir_made(struct store_group *g)
{
    ASSERT(g != NULL);
    __atomic_store_n(&g->dirs_fresh, 1, __ATOMIC_RELEASE);
}

int store_group_dirs_sync(struct store_group *g, char *errmsg)
{
    struct store *s = g->s;
    char dir[STORE_PATH_BYTES_MAX];
    int rv = 0;

    ASSERT(s != NULL);
    if (__atomic_load_n(&g->dirs_fresh, __ATOMIC_ACQUIRE) == 0) {
        return 0;
    }
    pthread_mutex_lock(&s->dirs_mu);
    /* Read before the fsync: every group counted was made before it. */
    uint64_t made = __atomic_load_n(&s->groups_made, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&g->dirs_fresh, __ATOMIC_ACQUIRE) != 0 &&
        s->groups_synced < made) {
        store_fmt_str(dir, sizeof dir, "%s/groups", s->data_dir);
        rv = s->fs->fsync_dir(s->fs, dir, errmsg);
        s->groups_synced = rv == 0 ? made : s->groups_synced;
    }
    if (rv == 0 && __atomic_load_n(&g->dirs_fresh, __ATOMIC_ACQUIRE) != 0) {
        store__parent_of(g->dir, dir, sizeof dir); /* <data>/groups/<hex> */
        __atomic_store_n(&g->dirs_fresh, 0, __ATOMIC_RELEASE);
        rv = s->fs->fsync_dir(s->fs, dir, errmsg);
        if (rv != 0) {
            __atomic_store_n(&g->dirs_fresh, 1, __ATOMIC_RELEASE);
        }
    }
    pthread_mutex_unlock(&s->dirs_mu);
    return rv;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    ASSERT(ts.tv_sec >= 0);
    ASSERT(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Paced (a spare made ahead of need): at most STORE_PREALLOC_BYTES_PER_S
 * and an fdatasync every STORE_PREALLOC_SYNC_BYTES. */
static void pace(struct store *s, struct fs_file *f, uint64_t done, uint64_t t0)
{
    char errmsg[KEEL_ERRMSG_MAX];
    uint64_t due = done * 1000000000u / STORE_PREALLOC_BYTES_PER_S;
    uint64_t spent = now_ns() - t0;

    ASSERT(s != NULL);
    ASSERT(f != NULL);
    if (done % STORE_PREALLOC_SYNC_BYTES == 0 &&
        s->fs->fdatasync(s->fs, f, errmsg) != 0) {
        store__fatal(s, "fdatasync spare segment", errmsg);
    }
    if (spent < due) {
        struct timespec ts = {(time_t)((due - spent) / 1000000000u),
                              (long)((due - spent) % 1000000000u)};
        (void)nanosleep(&ts, NULL); /* a rate limit, not a wait */
    }
}

static int zero_fill(struct store *s, struct fs_file *f, uint64_t from,
                     uint64_t to, bool paced, char *errmsg)
{
    static const uint8_t zeros[STORE_ZERO_CHUNK_BYTES];
    uint64_t chunks = 0;
    uint64_t t0 = now_ns();

    ASSERT(from <= to);
    ASSERT(to <= STORE_SEGMENT_BYTES_MAX);
    while (from < to) {
        size_t n =
            to - from < sizeof zeros ? (size_t)(to - from) : sizeof zeros;
        struct iovec iov = {(void *)zeros, n};
        int rv = s->fs->pwritev(s->fs, f, &iov, 1, from, errmsg);
        ASSERT(++chunks <=
               STORE_SEGMENT_BYTES_MAX / STORE_ZERO_CHUNK_BYTES + 1);
        if (rv != 0) {
            return rv;
        }
        from += n;
        if (paced) {
            pace(s, f, from, t0);
        }
    }
    return 0;
}

static int write_header(struct store_group *g, struct seg *seg,
                        struct fs_file *f, char *errmsg)
{
    struct store_seg_header h;
    uint8_t buf[STORE_SEG_HEADER_BYTES];
    struct iovec iov = {buf, sizeof buf};

    ASSERT(seg->size >= STORE_SEG_HEADER_BYTES);
    ASSERT(seg->base >= 1);
    memset(&h, 0, sizeof h);
    memcpy(h.group, g->id.b, STORE_GROUP_ID_BYTES);
    h.base_index = seg->base;
    h.first_index = seg->first_index;
    h.size_bytes = seg->size;
    h.salt = seg->salt;
    store_fmt_seg_header_encode(&h, buf);
    return g->s->fs->pwritev(g->s->fs, f, &iov, 1, 0, errmsg);
}

/* A zero-filled, fsynced file of the segment size, or KEEL_ENOSPC. */
static int make_zeroed(struct store_group *g, const char *path, uint64_t size,
                       bool paced, struct fs_file **out, char *errmsg)
{
    struct store *s = g->s;
    struct fs_file *f;
    int rv;

    ASSERT(path != NULL);
    ASSERT(out != NULL);
    rv = s->fs->open(s->fs, path, FS_CREATE, &f, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = s->fs->ftruncate(s->fs, f, 0, errmsg);
    rv = rv == 0 ? zero_fill(s, f, 0, size, paced, errmsg) : rv;
    if (rv == KEEL_ENOSPC) {
        s->fs->close(s->fs, f);
        (void)s->fs->unlink(s->fs, path, NULL);
        return rv;
    }
    if (rv != 0) {
        store__fatal(s, "zero-fill segment", errmsg);
    }
    rv = s->fs->fsync(s->fs, f, errmsg);
    if (rv != 0) {
        store__fatal(s, "fsync segment", errmsg);
    }
    *out = f;
    return 0;
}

/* A segment file for an InstallSnapshot log replacement (replace.c):
 * zero-filled, header written, fsynced; the caller fsyncs the directory
 * and catalogues it (in the replacement's one LMDB transaction). An
 * existing file of that name is refused (KEEL_EEXIST): it may be one LMDB
 * names. KEEL_ENOSPC. */
int store__seg_make(struct store_group *g, struct seg *seg,
                    struct fs_file **out, char *errmsg)
{
    struct store *s = g->s;
    char path[STORE_PATH_BYTES_MAX];
    struct fs_file *f;

    ASSERT(seg->f == NULL);
    store__seg_path(g, seg->base, path, sizeof path);
    if (s->fs->stat(s->fs, path, NULL) == 0) {
        return keel_err(KEEL_EEXIST, errmsg, "segment %s exists", path);
    }
    int rv = make_zeroed(g, path, seg->size, false, &f, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = write_header(g, seg, f, errmsg);
    rv = rv == 0 ? s->fs->fsync(s->fs, f, errmsg) : rv;
    if (rv != 0) {
        store__fatal(s, "write segment header", errmsg);
    }
    *out = f;
    return 0;
}

/* Size of the group's next segment: STORE_SEGMENT_BYTES_FIRST, then twice
 * the tail's, at most segment_bytes; large enough for a record of need
 * bytes (append_check guarantees one fits segment_bytes). */
uint64_t store__next_seg_size(const struct store_group *g, uint64_t need)
{
    uint64_t max = g->s->cfg.segment_bytes;
    uint64_t size = g->nsegs > 0 ? g->segs[g->nsegs - 1]->size * 2
                                 : STORE_SEGMENT_BYTES_FIRST;

    ASSERT(max >= STORE_SEGMENT_BYTES_MIN);
    size = size < max ? size : max;
    while (size < max &&
           STORE_SEG_HEADER_BYTES + need + 2 * STORE_MARKER_BYTES > size) {
        size = size * 2 < max ? size * 2 : max;
    }
    ASSERT(size % 4096 == 0 && size <= max);
    return size;
}

/* The loop thread (or open) after appending: once the tail segment is half
 * full, ask the prealloc thread for the group's spare. Bounded ahead of
 * need: one spare per group, only for a group filling its tail; an idle or
 * new group costs no file. Caller holds s->mu. */
void store__spare_check(struct store_group *g)
{
    struct store *s = g->s;
    struct seg *tail = g->nsegs > 0 ? g->segs[g->nsegs - 1] : NULL;

    ASSERT(s != NULL);
    ASSERT(!g->has_spare || !g->pre_queued);
    if (s->cfg.no_prealloc || g->has_spare || g->spare_pending ||
        tail == NULL || g->tail_off < tail->size / 2 ||
        (g->spare_retry_ms != 0 && store__now_ms() < g->spare_retry_ms)) {
        return;
    }
    ASSERT(!g->pre_queued);
    g->spare_pending = true;
    g->spare_size = store__next_seg_size(g, 0);
    g->pre_queued = true;
    store__gq_push(s, STORE__Q_PREALLOC, g);
    pthread_cond_signal(&s->pre_cv);
}

/* Take g off the prealloc queue (closing). Caller holds s->mu. */
void store__spare_unqueue(struct store *s, struct store_group *g)
{
    ASSERT(s != NULL);
    ASSERT(g->pre_queued);
    store__gq_unlink(s, STORE__Q_PREALLOC, g);
    g->pre_queued = false;
    g->spare_pending = false;
}

/* Preallocate the group's spare file on the prealloc thread (paced). */
void store__prealloc(struct store_group *g)
{
    struct store *s = g->s;
    char path[STORE_PATH_BYTES_MAX];
    char errmsg[KEEL_ERRMSG_MAX];
    struct fs_file *f;
    int rv = KEEL_EIO;

    ASSERT(g != NULL);
    ASSERT(!g->has_spare && g->pre_running);
    store_fmt_str(path, sizeof path, "%s/%s", g->dir, STORE_PREALLOC_NAME);
    if (!store__dead(s)) {
        rv = make_zeroed(g, path, g->spare_size, true, &f, errmsg);
    }
    if (rv == 0) {
        s->fs->close(s->fs, f);
        rv = s->fs->fsync_dir(s->fs, g->dir, errmsg);
        if (rv != 0) {
            store__fatal(s, "fsync directory", errmsg);
        }
    }
    pthread_mutex_lock(&s->mu);
    g->has_spare = rv == 0;
    g->spare_pending = false;
    /* Out of space: do not refill the disk on every append meanwhile. */
    g->spare_retry_ms = rv == 0 ? 0 : store__now_ms() + STORE_SPARE_RETRY_MS;
    s->stats.spares_attempted++;
    pthread_mutex_unlock(&s->mu);
}

static int take_spare(struct store_group *g, const char *path, uint64_t size,
                      struct fs_file **out, char *errmsg)
{
    struct store *s = g->s;
    char spare[STORE_PATH_BYTES_MAX];
    bool have;
    int rv;

    ASSERT(path != NULL);
    ASSERT(out != NULL);
    pthread_mutex_lock(&s->mu);
    have = g->has_spare && g->spare_size == size; /* else: made again */
    g->has_spare = false;
    /* No new spare may start writing prealloc.tmp before the rename. */
    g->spare_pending = g->spare_pending || have;
    pthread_mutex_unlock(&s->mu);
    if (!have) {
        return make_zeroed(g, path, size, false, out, errmsg);
    }
    store_fmt_str(spare, sizeof spare, "%s/%s", g->dir, STORE_PREALLOC_NAME);
    rv = s->fs->rename(s->fs, spare, path, errmsg);
    if (rv != 0) {
        store__fatal(s, "rename spare segment", errmsg);
    }
    pthread_mutex_lock(&s->mu);
    g->spare_pending = false;
    pthread_mutex_unlock(&s->mu);
    return s->fs->open(s->fs, path, 0, out, errmsg);
}

/* Create seg's file on a sync thread. On ENOSPC the group is marked and the
 * segment stays PLANNED; any other error aborts. */
void store__seg_create(struct store_group *g, struct seg *seg)
{
    struct store *s = g->s;
    char path[STORE_PATH_BYTES_MAX];
    char errmsg[KEEL_ERRMSG_MAX];
    struct store_meta_seg ms;
    struct fs_file *f;
    int rv;

    ASSERT(seg->state == SEG_PLANNED);
    ASSERT(seg->f == NULL);
    store__seg_path(g, seg->base, path, sizeof path);
    rv = take_spare(g, path, seg->size, &f, errmsg);
    if (rv == KEEL_ENOSPC) {
        pthread_mutex_lock(&s->mu);
        g->enospc = true;
        g->enospc_reported = false;
        s->timers_due_ms = 0;
        store__queue_event(s, g);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    if (rv != 0) {
        store__fatal(s, "create segment", errmsg);
    }
    rv = write_header(g, seg, f, errmsg);
    rv = rv == 0 ? s->fs->fsync(s->fs, f, errmsg) : rv;
    rv = rv == 0 ? s->fs->fsync_dir(s->fs, g->dir, errmsg) : rv;
    /* The log directory's own entries, before anything in it counts. */
    rv = rv == 0 ? store_group_dirs_sync(g, errmsg) : rv;
    if (rv != 0) {
        store__fatal(s, "write segment header", errmsg);
    }
    if (store__dead(s)) {
        s->fs->close(s->fs, f);
        return; /* tests: died before the catalogue entry */
    }
    ms = (struct store_meta_seg){seg->base, seg->salt, seg->size,
                                 seg->first_index};
    rv = store_meta_cat_put(s->meta, g->id.b, &ms, errmsg);
    if (rv != 0) {
        store__fatal(s, "catalogue segment", errmsg);
    }
    pthread_mutex_lock(&s->mu);
    seg->f = f;
    seg->state = SEG_LIVE;
    seg->hi_water = STORE_SEG_HEADER_BYTES;
    if (g->enospc) {
        g->enospc = false;
        g->space_reported = false;
        store__queue_event(s, g);
    }
    pthread_mutex_unlock(&s->mu);
}

/* Delete a live segment: catalogue (synced), unlink, directory fsync. */
void store__seg_delete(struct store_group *g, struct seg *seg)
{
    struct store *s = g->s;
    char path[STORE_PATH_BYTES_MAX];
    char errmsg[KEEL_ERRMSG_MAX];
    int rv;

    ASSERT(seg != NULL);
    ASSERT(seg->state == SEG_LIVE);
    store__seg_path(g, seg->base, path, sizeof path);
    if (store__dead(s)) {
        /* Tests' killed store: nothing is removed, but the caller frees
         * seg, so its handle is closed here (it leaked when the kill came
         * between the op's dispatch and this check). */
        if (seg->f != NULL) {
            s->fs->close(s->fs, seg->f);
            seg->f = NULL;
        }
        return;
    }
    rv = store_meta_cat_del(s->meta, g->id.b, seg->base, errmsg);
    if (rv != 0) {
        store__fatal(s, "remove catalogue entry", errmsg);
    }
    if (seg->f != NULL) {
        s->fs->close(s->fs, seg->f);
        seg->f = NULL;
    }
    rv = s->fs->unlink(s->fs, path, errmsg);
    if (rv != 0 && rv != KEEL_ENOENT) {
        store__fatal(s, "unlink segment", errmsg);
    }
    rv = s->fs->fsync_dir(s->fs, g->dir, errmsg);
    if (rv != 0) {
        store__fatal(s, "fsync directory", errmsg);
    }
}

/* Move path into <data>/quarantine/<name>. Every failed fsync of the
 * store is fatal (docs/design.md §4.5): store__mkdirs makes the directory
 * so, and a failed directory fsync after the rename is too. */
int store__quarantine(struct store *s, const char *path, const char *name,
                      char *errmsg)
{
    char qdir[STORE_PATH_BYTES_MAX];
    bool moved = false;

    store_fmt_str(qdir, sizeof qdir, "%s/quarantine", s->data_dir);
    int rv = store__mkdirs(s, qdir, errmsg);
    rv = rv == 0 ? store_quarantine_move(s->fs, s->data_dir, "", path, name,
                                         &moved, errmsg)
                 : rv;
    if (rv != 0 && moved) {
        store__fatal(s, "fsync quarantine directories", errmsg);
    }
    return rv;
}
