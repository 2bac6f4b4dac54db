/* Group open (with the recovery scan), append and conflict truncation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/grow.h>

#include "internal.h"

/* Group facts from LMDB: hard state, snapshot, recorded amnesia. */
/* Returns true when the group's hard state could not be read (missing
 * or bad): its term is then unknown, not 0. */
static bool load_facts(struct store_group *g, struct store_recovery *rep)
{
    struct store *s = g->s;
    struct store_meta_amnesia a;
    uint8_t vote[STORE_VOTE_BYTES_MAX];
    size_t vote_len = 0;
    int rv;

    ASSERT(s != NULL);
    ASSERT(rep != NULL);
    rv = store_meta_hs_get(s->meta, g->id.b, &g->hard_term, vote, &vote_len);
    bool hs_unknown = rv != 0;
    if (hs_unknown) {
        /* Unknown, not 0: a scan bounded by term 0 would call every record
         * stale and zero the whole log (fault suite finding F2: a flipped
         * byte in the LMDB key lost every acked message). No bound; if
         * the log does hold records of a term, the group is amnesiac. */
        g->hard_term = UINT64_MAX;
    }
    rv = store_meta_snap_get(s->meta, g->id.b, &g->snap);
    if (rv != 0) {
        memset(&g->snap, 0, sizeof g->snap);
    }
    if (rv == KEEL_ECORRUPT || rv == KEEL_EVERSION) {
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_BAD_VALUE;
    }
    rv = store_meta_amnesia_get(s->meta, g->id.b, &a);
    if (rv == 0) {
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_RECORDED;
        rep->amnesia_t0 = a.t0;
    } else if (rv != KEEL_ENOENT) {
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_BAD_VALUE;
    }
    for (size_t i = 0; i < s->meta_rep.n_bad_groups; i++) {
        if (memcmp(s->meta_rep.bad_groups[i], g->id.b, 16) == 0) {
            rep->amnesia = true;
            rep->amnesia_reason = STORE_AMNESIA_BAD_VALUE;
        }
    }
    if (s->meta_reset && !s->cfg.sole_member) {
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_META_RESET;
    }
    if (s->os_crash && g->policy.policy == STORE_FSYNC_INTERVAL) {
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_INTERVAL_CRASH;
    }
    return hs_unknown;
}

/* The hard state was unreadable: term := the highest term the log shows
 * (docs/design.md §3: term := max(hard state, last log term, snapshot term)). A
 * log that holds records of a term cannot be trusted to know its vote:
 * amnesiac (rule 3), so it votes for nobody until a leader caught it up;
 * nothing is dropped. An empty or term-0 log is a group whose first hard
 * state never became durable, nothing more. On a node of one no other
 * voter exists: a lost vote cannot help elect a second leader, so such a
 * group is not amnesiac (store_config.sole_member). */
static void hs_unknown_after_scan(struct store_group *g,
                                  struct store_recovery *rep)
{
    ASSERT(g->hard_term == UINT64_MAX);
    ASSERT(rep != NULL);
    g->hard_term =
        rep->max_term_seen > g->snap.term ? rep->max_term_seen : g->snap.term;
    if (g->hard_term > 0 && !rep->amnesia && !g->s->cfg.sole_member) {
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_BAD_VALUE;
    }
}

static int record_amnesia(struct store_group *g, struct store_recovery *rep,
                          char *errmsg)
{
    struct store_meta_amnesia a;
    int rv;

    ASSERT(rep->amnesia);
    ASSERT(g != NULL);
    if (rep->amnesia_reason == STORE_AMNESIA_RECORDED) {
        return 0;
    }
    /* Threshold T0 = the durable term at start; the catch-up target is set
     * by store_amnesia_enter once a leader names its last index. */
    a = (struct store_meta_amnesia){(uint32_t)rep->amnesia_reason, g->hard_term,
                                    0};
    rep->amnesia_t0 = g->hard_term;
    rv = store_meta_amnesia_put(g->s->meta, g->id.b, &a, errmsg);
    if (rv != 0) {
        store__fatal(g->s, "record amnesia", errmsg);
    }
    return 0;
}

struct store_group *store__find_group(struct store *s,
                                      const struct store_group_id *id)
{
    ASSERT(s != NULL);
    ASSERT(id != NULL);
    for (struct store_group *g = s->groups; g != NULL; g = g->next) {
        if (memcmp(g->id.b, id->b, 16) == 0) {
            return g;
        }
    }
    return NULL;
}

/* What open reports persisted: the log's end, or only up to M until a
 * queued recovery marker is synced. Caller holds s->mu. */
static void init_persisted(struct store_group *g,
                           const struct store_recovery *rep)
{
    bool marking = false;

    ASSERT(g != NULL);
    ASSERT(rep != NULL);
    g->persisted_index = rep->last_index;
    g->persisted_term = rep->last_term;
    for (struct op *op = g->ops_head; op != NULL; op = op->next) {
        marking = marking || op->kind == OP_MARK;
    }
    if (marking) {
        g->persisted_index =
            rep->has_marker && rep->marker_index < rep->last_index
                ? rep->marker_index
                : g->first_index - 1;
        g->persisted_term = g->persisted_index >= g->first_index
                                ? store__ent(g, g->persisted_index)->term
                                : g->snap.term;
    }
}

/* A read-only open writes nothing: the cleanup the scan queued (zeroing a
 * torn tail, deleting later segments, a recovery marker) is dropped; the
 * recovery report already says what a writable open would do. A delete
 * op owns its segment. */
static void drop_queued_ro(struct store_group *g)
{
    ASSERT(g->s->cfg.read_only);
    ASSERT(g->inflight == NULL);
    store__ops_drop(g);
}

/* Made at open (snapshot/ puts snap/ next to log/) without an fsync on
 * the loop thread: a new group's entries become durable in
 * store_group_dirs_sync, before its first segment (docs/design.md §4.1),
 * and one fsync of groups/ covers every group made meanwhile. Only
 * groups/ itself, made once per data directory, is synced here. */
static int make_dirs(struct store_group *g, const char *hex, char *errmsg)
{
    struct store *s = g->s;
    char dir[STORE_PATH_BYTES_MAX];

    ASSERT(!s->cfg.read_only);
    store_fmt_str(dir, sizeof dir, "%s/groups", s->data_dir);
    int rv = store__mkdirs(s, dir, errmsg);
    store_fmt_str(dir, sizeof dir, "%s/groups/%s", s->data_dir, hex);
    rv = rv == 0 ? store__mkdir_fresh(s, dir, errmsg) : rv;
    rv = rv == 0 ? store__mkdir_fresh(s, g->dir, errmsg) : rv;
    /* Found ones count as fresh too: an earlier process may have made
     * them and stopped before their first segment synced them. */
    __atomic_add_fetch(&s->groups_made, 1, __ATOMIC_ACQ_REL);
    store_group_dir_made(g);
    return rv;
}

int store_group_open(struct store *s, const struct store_group_id *id,
                     const struct store_fsync *policy, struct store_group **out,
                     struct store_recovery *rep, char *errmsg)
{
    struct store_group *g;
    char hex[33];
    int rv;

    ASSERT(s != NULL && id != NULL && policy != NULL);
    ASSERT(out != NULL && rep != NULL);
    memset(rep, 0, sizeof *rep);
    if (store__find_group(s, id) != NULL) {
        return keel_err(KEEL_EEXIST, errmsg, "group already open");
    }
    if (s->ngroups >= STORE_GROUPS_MAX) {
        return keel_err(KEEL_ELIMIT, errmsg, "too many groups");
    }
    g = calloc(1, sizeof *g);
    if (g == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    g->s = s;
    g->id = *id;
    g->policy = *policy;
    g->space_reported = true;
    store_group_id_hex(id, hex);
    store_fmt_str(g->dir, sizeof g->dir, "%s/groups/%s/log", s->data_dir, hex);
    rv = s->cfg.read_only ? 0 : make_dirs(g, hex, errmsg);
    if (rv != 0) {
        free(g);
        return rv;
    }
    bool hs_unknown = load_facts(g, rep);
    rv = store__scan(g, rep, errmsg);
    if (rv == 0 && hs_unknown) {
        hs_unknown_after_scan(g, rep);
    }
    if (rv == 0 && rep->amnesia && !s->cfg.read_only) {
        rv = record_amnesia(g, rep, errmsg);
    }
    if (rv == 0 && s->cfg.read_only) {
        drop_queued_ro(g);
    }
    if (rv != 0) {
        free(g->ents);
        for (size_t i = 0; i < g->nsegs; i++) {
            free(g->segs[i]);
        }
        free(g->segs);
        free(g);
        return rv;
    }
    rep->hard_term = g->hard_term;
    rep->snapshot_index = g->snap.index;
    rep->snapshot_term = g->snap.term;
    g->amnesia = rep->amnesia;
    pthread_mutex_lock(&s->mu);
    store__spare_check(g);
    init_persisted(g, rep);
    g->next = s->groups;
    s->groups = g;
    s->ngroups++;
    store__schedule(s, g);
    pthread_mutex_unlock(&s->mu);
    *out = g;
    return 0;
}

/* Plan a new segment starting at index (the loop thread decides; a sync
 * thread creates the file before any write to it). Caller holds s->mu. */
static struct seg *plan_segment(struct store_group *g, uint64_t index,
                                uint64_t need)
{
    struct seg *seg = calloc(1, sizeof *seg);

    ASSERT(g->nsegs < STORE_SEGMENTS_PER_GROUP_MAX);
    ASSERT(index >= 1);
    if (seg == NULL) {
        store__fatal(g->s, "plan segment", "out of memory");
    }
    if (keel_grow(&g->segs, &g->segs_cap, g->nsegs, sizeof *g->segs, 8) != 0) {
        store__fatal(g->s, "plan segment", "out of memory");
    }
    seg->base = index;
    seg->salt = store__rand(g->s);
    seg->size = store__next_seg_size(g, need); /* before it joins segs */
    seg->first_index = index == g->first_index ? index : 0;
    seg->state = SEG_PLANNED;
    seg->hi_water = STORE_SEG_HEADER_BYTES;
    g->segs[g->nsegs++] = seg;
    struct op *op = store__op_new(OP_CREATE_SEG);
    op->seg = seg;
    store__op_push(g, op);
    g->tail_off = STORE_SEG_HEADER_BYTES;
    g->tail_marker = false;
    return seg;
}

/* The write op records at (seg, tail_off) go into: the last pending write
 * op when it continues exactly there (group commit), else a new one. */
static struct op *write_op_for(struct store_group *g, struct seg *seg,
                               uint64_t bytes, bool fresh)
{
    struct op *op = g->ops_tail;

    ASSERT(seg != NULL);
    ASSERT(bytes <= STORE_BATCH_BYTES_MAX);
    if (fresh || op == NULL || op->kind != OP_WRITE || op->seg != seg ||
        op->off + op->len != g->tail_off ||
        op->len + bytes > STORE_BATCH_BYTES_MAX) {
        op = store__op_new(OP_WRITE);
        op->seg = seg;
        /* Never write over the previous batch's marker: a torn write of
         * this batch would destroy M, and a bit flip in the previous batch
         * would then be read as a torn tail (found by the property test). */
        op->off = g->tail_off + (g->tail_marker ? STORE_MARKER_BYTES : 0);
        g->tail_off = op->off;
        g->tail_marker = g->policy.policy != STORE_FSYNC_INTERVAL;
        store__op_push(g, op);
    }
    if (keel_reserve(&op->buf, &op->cap, op->len + bytes, 1, 4096) != 0) {
        store__fatal(g->s, "grow write batch", "out of memory");
    }
    return op;
}

static int append_check(struct store_group *g, const struct store_record *recs,
                        size_t n, char *errmsg)
{
    uint64_t room =
        g->s->cfg.segment_bytes - STORE_SEG_HEADER_BYTES - STORE_MARKER_BYTES;

    ASSERT(n >= 1 && n <= STORE_APPEND_RECORDS_MAX);
    ASSERT(recs[0].index == store__last_index(g) + 1);
    for (size_t i = 0; i < n; i++) {
        ASSERT(i == 0 || recs[i].index == recs[i - 1].index + 1);
        ASSERT(i == 0 || recs[i].term >= recs[i - 1].term);
        if (recs[i].len > STORE_RECORD_PAYLOAD_BYTES_MAX ||
            store_fmt_rec_bytes(recs[i].len) > room) {
            return keel_err(KEEL_ETOOBIG, errmsg,
                            "record of %u bytes does not fit a segment; "
                            "raise the segment size",
                            recs[i].len);
        }
    }
    if (g->nents > 0) {
        ASSERT(recs[0].term >= g->ents[g->nents - 1].term);
    }
    return 0;
}

static int ents_reserve(struct store_group *g, size_t more)
{
    ASSERT(g != NULL);
    ASSERT(more <= STORE_APPEND_RECORDS_MAX);
    return keel_reserve(&g->ents, &g->ents_cap, g->nents + more,
                        sizeof *g->ents, 1024);
}

int store_append(struct store_group *g, const struct store_record *recs,
                 size_t n, char *errmsg)
{
    struct store *s = g->s;
    uint64_t prev;
    int rv = append_check(g, recs, n, errmsg);

    if (rv != 0) {
        return rv;
    }
    if (ents_reserve(g, n) != 0) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    pthread_mutex_lock(&s->mu);
    if (g->enospc) {
        pthread_mutex_unlock(&s->mu);
        return keel_err(KEEL_ENOSPC, errmsg,
                        "no space for a new segment: free disk space");
    }
    prev = g->nents > 0 ? g->ents[g->nents - 1].checksum : 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = store_fmt_rec_bytes(recs[i].len);
        struct seg *seg = g->nsegs > 0 ? g->segs[g->nsegs - 1] : NULL;
        if (seg == NULL ||
            g->tail_off + bytes + 2 * STORE_MARKER_BYTES > seg->size) {
            seg = plan_segment(g, recs[i].index, bytes);
        }
        bool fresh = i == 0 && g->policy.policy == STORE_FSYNC_ALWAYS;
        struct op *op = write_op_for(g, seg, bytes, fresh);
        struct store_fmt_rec r = {
            recs[i].index, recs[i].term, prev,          0,
            recs[i].len,   recs[i].type, recs[i].flags, recs[i].payload};
        prev = store_fmt_rec_encode(op->buf + op->len, &r, seg->salt);
        if (op->len == 0) {
            op->first_index = recs[i].index;
        }
        op->len += bytes;
        op->last_index = recs[i].index;
        op->last_term = recs[i].term;
        op->last_checksum = prev;
        g->ents[g->nents++] = (struct ient){
            recs[i].term, prev, seg, (uint32_t)g->tail_off, (uint32_t)bytes, 0};
        g->tail_off += bytes;
    }
    store__spare_check(g);
    store__schedule(s, g);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Position where index starts: known for intact entries, else right after
 * the nearest intact predecessor in the same segment. */
static void pos_of(struct store_group *g, uint64_t index, struct seg **seg,
                   uint64_t *off)
{
    struct ient *e = store__ent(g, index);

    ASSERT(seg != NULL);
    ASSERT(off != NULL);
    *seg = e->seg;
    *off = STORE_SEG_HEADER_BYTES;
    if (!e->faulty) {
        *off = e->off;
        return;
    }
    for (uint64_t i = index; i-- > g->first_index;) {
        struct ient *p = store__ent(g, i);
        if (p->seg != e->seg) {
            break;
        }
        if (!p->faulty) {
            *off = p->off + p->bytes;
            break;
        }
    }
}

/* Remove pending ops that only carry indexes >= from; trim the one that
 * straddles; mark in-flight ones stale. Caller holds s->mu. */
static void drop_pending(struct store_group *g, uint64_t from)
{
    struct op **pp = &g->ops_head;
    struct op *last = NULL;

    ASSERT(g != NULL);
    ASSERT(from >= g->first_index);
    for (struct op *op = g->inflight; op != NULL; op = op->next) {
        if ((op->kind == OP_WRITE || op->kind == OP_MARK) &&
            op->last_index >= from) {
            op->stale = true;
        }
    }
    while (*pp != NULL) {
        struct op *op = *pp;
        bool drop = false;
        if (op->kind == OP_WRITE && op->first_index >= from) {
            drop = true;
        } else if (op->kind == OP_WRITE && op->last_index >= from) {
            struct ient *e = store__ent(g, from);
            op->len = e->off - op->off;
            op->last_index = from - 1;
            op->last_term = store__ent(g, from - 1)->term;
            op->last_checksum = store__ent(g, from - 1)->checksum;
        } else if (op->kind == OP_MARK && op->last_index >= from) {
            drop = true;
        } else if ((op->kind == OP_CREATE_SEG || op->kind == OP_ZERO) &&
                   op->seg->base > from) {
            drop = true; /* never created: the seg is freed below */
        }
        if (drop) {
            *pp = op->next;
            g->nops--;
            store__op_free(op);
            continue;
        }
        last = op;
        pp = &op->next;
    }
    g->ops_tail = last;
}

static bool create_pending(struct store_group *g, struct seg *seg)
{
    ASSERT(g != NULL);
    ASSERT(seg != NULL);
    for (struct op *op = g->inflight; op != NULL; op = op->next) {
        if (op->kind == OP_CREATE_SEG && op->seg == seg) {
            return true;
        }
    }
    return false;
}

int store_truncate(struct store_group *g, uint64_t from, char *errmsg)
{
    struct store *s = g->s;
    struct seg *seg;
    uint64_t off;
    size_t keep = 0;

    ASSERT(g != NULL);
    ASSERT(from >= 1);
    if (from < g->first_index) {
        return keel_err(KEEL_EINVAL, errmsg, "truncate below first index");
    }
    if (g->nents == 0 || from > store__last_index(g)) {
        return 0;
    }
    pos_of(g, from, &seg, &off);
    pthread_mutex_lock(&s->mu);
    drop_pending(g, from);
    while (keep < g->nsegs && g->segs[keep] != seg) {
        keep++;
    }
    ASSERT(keep < g->nsegs);
    for (size_t i = g->nsegs; i-- > keep + 1;) {
        struct seg *later = g->segs[i];
        if (later->state == SEG_LIVE || create_pending(g, later)) {
            struct op *op = store__op_new(OP_DELETE_SEG);
            op->seg = later; /* the op owns it now */
            store__op_push(g, op);
        } else {
            free(later);
        }
    }
    g->nsegs = keep + 1;
    bool mark = false;
    if (!s->no_zeroing) {
        struct op *op = store__op_new(OP_ZERO);
        op->seg = seg;
        op->off = off;
        if (from > g->first_index && store__ent(g, from - 1)->term != 0) {
            /* A synced marker naming from-1 before the zeroing: the old M
             * is zeroed, and a crash meanwhile must not leave no M. */
            op->last_index = from - 1;
            op->last_term = store__ent(g, from - 1)->term;
            op->last_checksum = store__ent(g, from - 1)->checksum;
            mark = off + 2 * STORE_MARKER_BYTES <= seg->size;
        }
        op->stale = !mark; /* reused: no marker to write */
        store__op_push(g, op);
    }
    g->nents = from - g->first_index;
    g->tail_off = off;
    g->tail_marker = mark;
    if (g->has_marker && g->marker_index >= from) {
        g->has_marker = false;
    }
    if (g->persisted_index >= from) {
        g->persisted_index = from - 1;
        g->persisted_term = from - 1 >= g->first_index
                                ? store__ent(g, from - 1)->term
                                : g->snap.term;
    }
    store__schedule(s, g);
    pthread_mutex_unlock(&s->mu);
    return 0;
}
