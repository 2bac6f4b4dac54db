/* InstallSnapshot log replacement (docs/design.md §5): the leader's retained
 * log [first, X] becomes the group's whole log. The new segments are
 * written, fsynced and their directory fsynced before anything names them;
 * then ONE synced LMDB transaction swaps the catalogue and records the
 * snapshot pair; only then do the old segments go (unlink, directory
 * fsync). A crash before the transaction leaves the old log (the new files
 * are not catalogued: the next open quarantines them); after it, the new
 * log. Never a mix.
 */
#include <stdlib.h>
#include <string.h>

#include <keel/grow.h>

#include "internal.h"

#define REPLACE_WRITE_BYTES (1024u * 1024)

struct store_replace {
    struct store_group *g;
    uint64_t first;
    uint64_t next; /* next index expected */
    uint64_t prev; /* checksum of the previous record (hash chain) */
    struct seg **segs;
    size_t nsegs;
    size_t segs_cap;
    struct ient *ents;
    size_t nents;
    size_t ents_cap;
    uint64_t tail_off; /* end of the last record in the last segment */
    uint64_t last_term;
    uint8_t *buf; /* records not yet written to the last segment */
    size_t len;
    size_t cap;
    uint64_t buf_off; /* segment offset of buf[0] */
    bool synced;
};

static void replace_free(struct store_replace *rp)
{
    free(rp->segs);
    free(rp->ents);
    free(rp->buf);
    free(rp);
}

/* Wait until the group has no queued or running store work. Caller does
 * not hold s->mu. KEEL_ENOSPC when the group is out of space (its queued
 * work waits for space). */
static int wait_idle(struct store_group *g, char *errmsg)
{
    struct store *s = g->s;
    int rv = 0;

    pthread_mutex_lock(&s->mu);
    store__schedule(s, g);
    for (unsigned n = 0; g->busy || g->queued || g->ops_head != NULL; n++) {
        ASSERT(n < 1000000000u);
        if (g->enospc && !g->busy) {
            rv = keel_err(KEEL_ENOSPC, errmsg,
                          "no space for a new segment: free disk space");
            break;
        }
        store__wait_step(s);
    }
    pthread_mutex_unlock(&s->mu);
    return rv;
}

/* Old segments starting at or after first hold no record (the log ends
 * before first) but their names are the new log's: delete them now
 * (catalogue, unlink, directory fsync) and make the next append, if the
 * replacement is abandoned, start a new segment. */
static int drop_empty_tail(struct store_group *g, uint64_t first, char *errmsg)
{
    bool dropped = false;

    pthread_mutex_lock(&g->s->mu);
    while (g->nsegs > 0 && g->segs[g->nsegs - 1]->base >= first) {
        struct seg *seg = g->segs[--g->nsegs];
        if (seg->state == SEG_LIVE) {
            struct op *op = store__op_new(OP_DELETE_SEG);
            op->seg = seg;
            store__op_push(g, op);
        } else {
            free(seg);
        }
        dropped = true;
    }
    if (dropped) {
        g->tail_off = g->nsegs > 0 ? g->segs[g->nsegs - 1]->size : 0;
        g->tail_marker = false;
    }
    pthread_mutex_unlock(&g->s->mu);
    return dropped ? wait_idle(g, errmsg) : 0;
}

int store_replace_begin(struct store_group *g, uint64_t first,
                        struct store_replace **out, char *errmsg)
{
    ASSERT(g != NULL && out != NULL);
    ASSERT(!g->s->cfg.read_only);
    if (first == 0) {
        return keel_err(KEEL_EINVAL, errmsg, "replacement log starts at 0");
    }
    if (g->nents > 0 && store__last_index(g) >= first) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "log replacement from %llu over a local log "
                        "reaching %llu: truncate it first",
                        (unsigned long long)first,
                        (unsigned long long)store__last_index(g));
    }
    /* The old log's last writes complete first: nothing may write to the
     * group while its segment list is swapped. */
    int rv = wait_idle(g, errmsg);
    rv = rv == 0 ? drop_empty_tail(g, first, errmsg) : rv;
    if (rv != 0) {
        return rv;
    }
    struct store_replace *rp = calloc(1, sizeof *rp);
    if (rp == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    rp->g = g;
    rp->first = first;
    rp->next = first;
    *out = rp;
    return 0;
}

static int flush(struct store_replace *rp, char *errmsg)
{
    struct store *s = rp->g->s;

    if (rp->len == 0) {
        return 0;
    }
    ASSERT(rp->nsegs > 0);
    struct seg *seg = rp->segs[rp->nsegs - 1];
    struct iovec iov = {rp->buf, rp->len};
    int rv = s->fs->pwritev(s->fs, seg->f, &iov, 1, rp->buf_off, errmsg);
    if (rv != 0) {
        store__fatal(s, "write replacement segment", errmsg);
    }
    rp->buf_off += rp->len;
    rp->len = 0;
    return 0;
}

/* Start a new segment at index for a record of need bytes: sizes double
 * from STORE_SEGMENT_BYTES_FIRST up to the store's segment size. */
static int new_seg(struct store_replace *rp, uint64_t index, uint64_t need,
                   char *errmsg)
{
    struct store_group *g = rp->g;
    uint64_t max = g->s->cfg.segment_bytes;
    uint64_t size = rp->nsegs > 0 ? rp->segs[rp->nsegs - 1]->size * 2
                                  : STORE_SEGMENT_BYTES_FIRST;
    size = size < max ? size : max;
    while (size < max &&
           STORE_SEG_HEADER_BYTES + need + 2 * STORE_MARKER_BYTES > size) {
        size = size * 2 < max ? size * 2 : max;
    }
    int rv = flush(rp, errmsg);
    if (rv == 0 && keel_reserve(&rp->segs, &rp->segs_cap, rp->nsegs + 1,
                                sizeof *rp->segs, 64) != 0) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    struct seg *seg = rv == 0 ? calloc(1, sizeof *seg) : NULL;
    if (rv == 0 && seg == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    if (rv != 0) {
        return rv;
    }
    seg->base = index;
    seg->salt = store__rand(g->s);
    seg->size = size;
    seg->first_index = index == rp->first ? index : 0;
    seg->state = SEG_PLANNED;
    rv = store__seg_make(g, seg, &seg->f, errmsg);
    if (rv != 0) {
        free(seg);
        return rv;
    }
    seg->state = SEG_LIVE;
    rp->segs[rp->nsegs++] = seg;
    rp->tail_off = STORE_SEG_HEADER_BYTES;
    rp->buf_off = STORE_SEG_HEADER_BYTES;
    return 0;
}

int store_replace_append(struct store_replace *rp,
                         const struct store_record *recs, size_t n,
                         char *errmsg)
{
    struct store_group *g = rp->g;
    uint64_t room =
        g->s->cfg.segment_bytes - STORE_SEG_HEADER_BYTES - STORE_MARKER_BYTES;
    int rv = 0;

    ASSERT(!rp->synced);
    ASSERT(n <= STORE_APPEND_RECORDS_MAX);
    for (size_t i = 0; i < n; i++) {
        const struct store_record *r = &recs[i];
        ASSERT(r->index == rp->next);
        ASSERT(rp->nents == 0 || r->term >= rp->last_term);
        uint64_t bytes = store_fmt_rec_bytes(r->len);
        if (r->len > STORE_RECORD_PAYLOAD_BYTES_MAX || bytes > room) {
            return keel_err(KEEL_ETOOBIG, errmsg,
                            "record of %u bytes does not fit a segment; "
                            "raise the segment size",
                            r->len);
        }
        struct seg *seg = rp->nsegs > 0 ? rp->segs[rp->nsegs - 1] : NULL;
        if (seg == NULL ||
            rp->tail_off + bytes + 2 * STORE_MARKER_BYTES > seg->size) {
            rv = new_seg(rp, r->index, bytes, errmsg);
            if (rv != 0) {
                return rv;
            }
            seg = rp->segs[rp->nsegs - 1];
        }
        if (keel_reserve(&rp->buf, &rp->cap, rp->len + bytes, 1, 64) != 0 ||
            keel_reserve(&rp->ents, &rp->ents_cap, rp->nents + 1,
                         sizeof *rp->ents, 64) != 0) {
            return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
        }
        struct store_fmt_rec fr = {r->index, r->term, rp->prev, 0,
                                   r->len,   r->type, r->flags, r->payload};
        rp->prev = store_fmt_rec_encode(rp->buf + rp->len, &fr, seg->salt);
        rp->ents[rp->nents++] = (struct ient){
            r->term, rp->prev, seg, (uint32_t)rp->tail_off, (uint32_t)bytes, 0};
        rp->len += bytes;
        rp->tail_off += bytes;
        rp->last_term = r->term;
        rp->next++;
        if (rp->len >= REPLACE_WRITE_BYTES) {
            rv = flush(rp, errmsg);
            if (rv != 0) {
                return rv;
            }
        }
    }
    return 0;
}

int store_replace_sync(struct store_replace *rp, char *errmsg)
{
    struct store *s = rp->g->s;
    int rv;

    ASSERT(!rp->synced);
    if (rp->nents > 0) {
        /* Rule 2: a marker names the last record, as after a batch. */
        struct seg *seg = rp->segs[rp->nsegs - 1];
        struct store_fmt_marker m = {
            rp->next - 1, rp->last_term, rp->prev, {0}};
        memcpy(m.boot_id, s->boot_id, STORE_BOOT_ID_BYTES);
        if (keel_reserve(&rp->buf, &rp->cap, rp->len + STORE_MARKER_BYTES, 1,
                         64) != 0) {
            return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
        }
        ASSERT(rp->tail_off + STORE_MARKER_BYTES <= seg->size);
        store_fmt_marker_encode(rp->buf + rp->len, &m, seg->salt);
        rp->len += STORE_MARKER_BYTES;
    }
    rv = flush(rp, errmsg);
    if (rv != 0) {
        return rv;
    }
    for (size_t i = 0; i < rp->nsegs; i++) {
        rv = s->fs->fsync(s->fs, rp->segs[i]->f, errmsg);
        if (rv != 0) {
            store__fatal(s, "fsync replacement segment", errmsg);
        }
    }
    rv = s->fs->fsync_dir(s->fs, rp->g->dir, errmsg);
    rv = rv == 0 ? store_group_dirs_sync(rp->g, errmsg) : rv;
    if (rv != 0) {
        store__fatal(s, "fsync directory", errmsg);
    }
    rp->synced = true;
    return 0;
}

/* Swap the in-memory log for the replacement. Caller holds s->mu; the
 * group is idle. The old segments go through the deletion order (their
 * catalogue entries are already gone). */
static void adopt(struct store_replace *rp, const struct store_meta_snap *sn)
{
    struct store_group *g = rp->g;

    ASSERT(!g->busy && g->ops_head == NULL);
    for (size_t i = 0; i < g->nsegs; i++) {
        struct seg *old = g->segs[i];
        if (old->state == SEG_LIVE) {
            struct op *op = store__op_new(OP_DELETE_SEG);
            op->seg = old; /* the op owns it now */
            store__op_push(g, op);
        } else {
            free(old);
        }
    }
    free(g->segs);
    free(g->ents);
    g->segs = rp->segs;
    g->nsegs = rp->nsegs;
    g->segs_cap = rp->segs_cap;
    g->ents = rp->ents;
    g->nents = rp->nents;
    g->ents_cap = rp->ents_cap;
    rp->segs = NULL;
    rp->ents = NULL;
    rp->nsegs = 0;
    g->first_index = rp->first;
    g->snap = *sn;
    g->persisted_index = sn->index;
    g->persisted_term = sn->term;
    g->has_marker = false;
    g->last_seg = NULL;
    g->last_end = 0;
    g->tail_off = 0;
    g->tail_marker = false;
    if (g->nsegs > 0) {
        struct seg *tail = g->segs[g->nsegs - 1];
        for (size_t i = 0; i + 1 < g->nsegs; i++) {
            g->segs[i]->hi_water = g->segs[i]->size; /* a bound: zeros */
        }
        tail->hi_water = rp->tail_off + STORE_MARKER_BYTES;
        g->tail_off = rp->tail_off;
        g->tail_marker = true;
        g->has_marker = true;
        g->marker_mended = false;
        g->marker_index = rp->next - 1;
        g->marker_off = rp->tail_off;
        g->marker_seg = tail;
        g->last_seg = tail;
        g->last_end = rp->tail_off;
        g->last_w_index = rp->next - 1;
        g->last_w_term = rp->last_term;
        g->last_w_checksum = rp->prev;
    }
    store__schedule(g->s, g);
}

int store_replace_commit(struct store_replace *rp, uint64_t snap_index,
                         uint64_t snap_term, char *errmsg)
{
    struct store_group *g = rp->g;
    struct store *s = g->s;
    struct store_meta_seg *cat = NULL;
    int rv;

    ASSERT(rp->synced);
    ASSERT(snap_index >= rp->first - 1 && snap_index < rp->next);
    ASSERT(snap_term > 0 || snap_index == 0); /* 0: a log from index 1 */
    if (store__dead(s)) {
        return keel_err(KEEL_ECANCELED, errmsg, "store is dead");
    }
    if (rp->nsegs > 0) {
        cat = calloc(rp->nsegs, sizeof *cat);
        if (cat == NULL) {
            return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
        }
    }
    for (size_t i = 0; i < rp->nsegs; i++) {
        struct seg *seg = rp->segs[i];
        cat[i] = (struct store_meta_seg){seg->base, seg->salt, seg->size,
                                         seg->first_index};
    }
    /* The older kept snapshot stays only if the new log continues it. */
    struct store_meta_snap sn = {snap_index, snap_term, 0, 0};
    if (g->snap.index != 0 && g->snap.index < snap_index &&
        g->snap.index + 1 >= rp->first) {
        sn.older_index = g->snap.index;
        sn.older_term = g->snap.term;
    }
    rv = store_meta_log_replace(s->meta, g->id.b, cat, rp->nsegs, &sn, errmsg);
    free(cat);
    if (rv != 0) {
        store__fatal(s, "replace log in meta.lmdb", errmsg);
    }
    pthread_mutex_lock(&s->mu);
    adopt(rp, &sn);
    pthread_mutex_unlock(&s->mu);
    replace_free(rp);
    return 0;
}

void store_replace_abort(struct store_replace *rp)
{
    if (rp == NULL) {
        return;
    }
    struct store *s = rp->g->s;
    bool unlinked = false;
    for (size_t i = 0; i < rp->nsegs; i++) {
        struct seg *seg = rp->segs[i];
        char path[STORE_PATH_BYTES_MAX];
        s->fs->close(s->fs, seg->f);
        store__seg_path(rp->g, seg->base, path, sizeof path);
        /* Not catalogued: never part of the log. A dead store (a test's
         * crash) leaves them for the next open to quarantine. */
        if (!store__dead(s)) {
            unlinked = s->fs->unlink(s->fs, path, NULL) == 0 || unlinked;
        }
        free(seg);
    }
    if (unlinked) {
        char errmsg[KEEL_ERRMSG_MAX];
        if (s->fs->fsync_dir(s->fs, rp->g->dir, errmsg) != 0) {
            store__fatal(s, "fsync directory", errmsg);
        }
    }
    replace_free(rp);
}
