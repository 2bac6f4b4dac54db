/* The recovery scan of one group (docs/design.md §4.4 and
 * recovery rules 1–3). Phase A parses every catalogued segment into items
 * (valid records and valid sync markers, by position). Phase B walks the
 * items once per sync-marker candidate M and applies the acceptance rules:
 * damage at or below M.index is faulty, damage after it is a torn tail, a
 * record failing a check right after an intact predecessor is stale and
 * ends the log. A candidate the walk never reaches (the log ended before
 * it) is not M. A marker one flipped bit away from valid is mended and
 * counts like any other (scan_parse.c marker_at, finding 14).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/grow.h>
#include <keel/sorted.h>

#include "internal.h"
#include "scan_items.h"

struct walk {
    const struct item *m; /* the candidate, NULL for none */
    size_t m_seg;
    bool m_reached;
    bool rejected;
    bool ended; /* stale or torn tail found */
    bool end_torn;
    size_t end_seg;
    uint64_t end_off;
    uint64_t expected;
    uint64_t log_first;
    bool have_pred;
    uint64_t pred_term;
    uint64_t pred_sum;
    bool in_damage;
    bool pred_before_damage; /* pred was intact when damage began */
    uint64_t damage_from;
    size_t damage_seg; /* segment where the damaged run begins */
    uint64_t tail_off;
    size_t tail_seg;
};

struct scan {
    struct store_group *g;
    struct store_recovery *rep;
    struct sseg *ss;
    size_t n;
    uint64_t hs_term;
    struct reader rd;
};

static int ents_push(struct store_group *g, const struct ient *e)
{
    ASSERT(g != NULL);
    ASSERT(g->nents <= STORE_SCAN_RECORDS_MAX * STORE_SEGMENTS_PER_GROUP_MAX);
    int rv = keel_grow(&g->ents, &g->ents_cap, g->nents, sizeof *g->ents, 1024);

    if (rv == 0) {
        g->ents[g->nents++] = *e;
    }
    return rv;
}

static void add_faulty(struct store_recovery *rep, uint64_t from, uint64_t to)
{
    ASSERT(from <= to);
    ASSERT(rep->n_faulty <= STORE_REPORT_RANGES_MAX);
    if (rep->n_faulty > 0 && rep->faulty[rep->n_faulty - 1].to + 1 == from) {
        rep->faulty[rep->n_faulty - 1].to = to;
    } else if (rep->n_faulty < STORE_REPORT_RANGES_MAX) {
        rep->faulty[rep->n_faulty++] = (struct store_range){from, to};
    } else {
        rep->faulty[STORE_REPORT_RANGES_MAX - 1].to = to; /* merged */
    }
}

/* Indexes [from, to] become faulty entries (position unknown). A run may
 * cross into later segments: each index is placed in the segment whose
 * base it reached, where repair writes it back (repair.c). */
static int push_faulty(struct scan *sc, struct walk *w, uint64_t to)
{
    size_t si = w->damage_seg;

    ASSERT(si < sc->n);
    for (uint64_t i = w->damage_from; i <= to; i++) {
        while (si + 1 < sc->n && sc->ss[si + 1].seg->base <= i) {
            si++;
        }
        struct ient e = {0, 0, sc->ss[si].seg, 0, 0, 1};
        int rv = ents_push(sc->g, &e);
        if (rv != 0) {
            return rv;
        }
    }
    if (w->damage_from <= to) {
        add_faulty(sc->rep, w->damage_from, to);
    }
    w->expected = to + 1;
    w->in_damage = false;
    w->have_pred = false;
    return 0;
}

static void end_walk(struct walk *w, size_t si, uint64_t off, bool torn)
{
    ASSERT(w != NULL);
    ASSERT(!w->ended);
    if (w->m != NULL && !w->m_reached) {
        /* The valid log ends before the candidate: it is not M. */
        w->rejected = true;
    }
    w->ended = true;
    w->end_torn = torn;
    w->end_seg = si;
    w->end_off = off;
}

/* Damage (unparsed bytes or missing indexes) found at expected. */
static void on_damage(struct walk *w, size_t si, uint64_t off,
                      size_t damage_seg)
{
    ASSERT(w != NULL);
    ASSERT(!w->ended);
    if (w->in_damage) {
        return;
    }
    if (w->m != NULL && !w->m_reached && w->expected <= w->m->index) {
        w->in_damage = true;
        w->pred_before_damage = w->have_pred;
        w->damage_from = w->expected;
        w->damage_seg = damage_seg;
        return;
    }
    end_walk(w, si, off, true);
}

static int on_marker(struct scan *sc, struct walk *w, size_t si,
                     const struct item *it)
{
    ASSERT(it->kind == ITEM_MARKER);
    ASSERT(!w->ended);
    if (it != w->m) {
        return 0; /* a batch boundary of an older segment */
    }
    if (w->in_damage) {
        if (w->damage_from > it->index) {
            w->rejected = true;
            return 0;
        }
        int rv = push_faulty(sc, w, it->index);
        if (rv != 0) {
            return rv;
        }
        /* M carries the term and checksum of the faulty last record. */
        sc->g->ents[sc->g->nents - 1].term = it->term;
        sc->g->ents[sc->g->nents - 1].checksum = it->prev;
    } else if (w->expected != it->index + 1 ||
               (w->have_pred &&
                (w->pred_term != it->term || w->pred_sum != it->prev))) {
        /* The record before it is intact and not the one it names. */
        w->rejected = true;
        return 0;
    }
    w->m_reached = true;
    w->tail_seg = si;
    w->tail_off = it->off;
    return 0;
}

static bool rec_acceptable(const struct scan *sc, const struct walk *w,
                           const struct item *it, bool chain)
{
    ASSERT(it->kind == ITEM_REC);
    ASSERT(sc != NULL);
    if (it->index != w->expected) {
        return false;
    }
    if (it->term > sc->hs_term || (w->have_pred && it->term < w->pred_term)) {
        return false;
    }
    if (chain && w->have_pred && it->index != w->log_first &&
        it->prev != w->pred_sum) {
        return false;
    }
    return true;
}

static int on_record(struct scan *sc, struct walk *w, size_t si,
                     const struct item *it)
{
    struct ient e;
    int rv;

    ASSERT(it->kind == ITEM_REC);
    ASSERT(!w->ended);
    if (w->in_damage && it->index > w->damage_from) {
        if (w->m != NULL && it->index - 1 > w->m->index) {
            w->rejected = true; /* records above M before M itself */
            return 0;
        }
        rv = push_faulty(sc, w, it->index - 1);
        if (rv != 0) {
            return rv;
        }
    } else if (w->in_damage) {
        /* The damage took no index: stale bytes, check the chain against
         * the intact record before them (docs/design.md §4.4). */
        w->in_damage = false;
        w->have_pred = w->pred_before_damage;
    }
    if (!rec_acceptable(sc, w, it, true)) {
        end_walk(w, si, it->off, false); /* stale: the log ends here */
        return 0;
    }
    e = (struct ient){it->term, it->checksum,      sc->ss[si].seg,
                      it->off,  it->end - it->off, 0};
    rv = ents_push(sc->g, &e);
    w->expected = it->index + 1;
    w->have_pred = true;
    w->pred_term = it->term;
    w->pred_sum = it->checksum;
    w->tail_seg = si;
    w->tail_off = it->end;
    return rv;
}

static int walk_segment(struct scan *sc, struct walk *w, size_t si)
{
    struct sseg *x = &sc->ss[si];
    uint64_t cur = STORE_SEG_HEADER_BYTES;
    int rv = 0;

    ASSERT(si < sc->n);
    ASSERT(!w->ended);
    if (x->seg->base != w->expected) {
        if (x->seg->base < w->expected) {
            end_walk(w, si, cur, false);
            return 0;
        }
        /* Missing indexes at the end of the previous segment. */
        on_damage(w, si, cur, si > 0 ? si - 1 : si);
    }
    for (size_t i = 0; i < x->nitems && rv == 0; i++) {
        const struct item *it = &x->items[i];
        if (w->ended || w->rejected) {
            return 0;
        }
        if (it->off > cur && !(w->m_reached && it->kind == ITEM_MARKER)) {
            on_damage(w, si, cur, si);
            if (w->ended) {
                return 0;
            }
        }
        rv = it->kind == ITEM_REC ? on_record(sc, w, si, it)
                                  : on_marker(sc, w, si, it);
        cur = it->end;
    }
    if (rv == 0 && !w->ended && !w->rejected && cur < x->seg->nonzero_end &&
        si + 1 == sc->n) {
        on_damage(w, si, cur, si);
    }
    return rv;
}

static int walk_all(struct scan *sc, struct walk *w)
{
    int rv = 0;

    ASSERT(sc != NULL);
    ASSERT(w != NULL);
    sc->g->nents = 0;
    sc->rep->n_faulty = 0;
    w->expected = sc->n > 0 ? sc->ss[0].seg->base : sc->g->first_index;
    w->log_first = w->expected;
    w->tail_seg = 0;
    w->tail_off = STORE_SEG_HEADER_BYTES;
    for (size_t si = 0; si < sc->n && rv == 0; si++) {
        if (w->ended || w->rejected) {
            break;
        }
        rv = walk_segment(sc, w, si);
    }
    if (rv == 0 && !w->ended && w->m != NULL && !w->m_reached) {
        w->rejected = true;
    }
    if (rv == 0 && !w->ended && w->in_damage) {
        w->rejected = true;
    }
    return rv;
}

/* Choose M: the nearest-the-end valid marker of the newest segment that
 * has one whose walk reaches it; otherwise no M. */
static int choose_and_walk(struct scan *sc, struct walk *out)
{
    unsigned tried = 0;
    size_t items = 0;
    int rv;

    ASSERT(sc != NULL);
    ASSERT(out != NULL);
    /* One allocation for the index table: every record item may join. */
    for (size_t si = 0; si < sc->n; si++) {
        items += sc->ss[si].nitems;
    }
    if (items > sc->g->ents_cap) {
        struct ient *p = realloc(sc->g->ents, items * sizeof *p);
        if (p == NULL) {
            return KEEL_ENOMEM;
        }
        sc->g->ents = p;
        sc->g->ents_cap = items;
    }
    for (size_t si = sc->n; si-- > 0;) {
        struct sseg *x = &sc->ss[si];
        for (size_t i = x->nitems; i-- > 0;) {
            const struct item *it = &x->items[i];
            if (it->kind != ITEM_MARKER || it->term > sc->hs_term) {
                continue;
            }
            if (++tried > STORE_MARKER_CANDIDATES_MAX) {
                goto none;
            }
            memset(out, 0, sizeof *out);
            out->m = it;
            out->m_seg = si;
            rv = walk_all(sc, out);
            if (rv != 0 || !out->rejected) {
                return rv;
            }
        }
    }
none:
    memset(out, 0, sizeof *out);
    return walk_all(sc, out);
}

static int load_segment(struct scan *sc, struct sseg *x, char *errmsg)
{
    struct store *s = sc->g->s;
    char path[STORE_PATH_BYTES_MAX];
    struct store_seg_header h;
    const uint8_t *p = NULL;
    size_t avail = 0;
    uint64_t size = 0;
    int rv;

    ASSERT(x->seg != NULL);
    ASSERT(x->seg->f == NULL);
    store__seg_path(sc->g, x->seg->base, path, sizeof path);
    rv = s->fs->open(s->fs, path, s->cfg.read_only ? FS_RDONLY : 0, &x->seg->f,
                     errmsg);
    if (rv != 0) {
        return rv == KEEL_ENOENT ? KEEL_ELOST : rv;
    }
    rv = s->fs->size(s->fs, x->seg->f, &size, errmsg);
    if (rv == 0 &&
        (size < x->seg->size || size > STORE_SEGMENT_BYTES_MAX ||
         x->seg->size < STORE_SEG_HEADER_BYTES + 8 || x->seg->size % 8 != 0)) {
        rv = KEEL_ELOST; /* shorter than its header says */
    }
    sc->rd.f = x->seg->f;
    sc->rd.size = x->seg->size;
    sc->rd.start = 0;
    sc->rd.len = 0;
    rv = rv == 0 ? store__scan_window(&sc->rd, 0, STORE_SEG_HEADER_BYTES, &p,
                                      &avail, errmsg)
                 : rv;
    if (rv == 0 && (avail < STORE_SEG_HEADER_BYTES ||
                    store_fmt_seg_header_decode(p, avail, &h) != 0 ||
                    memcmp(h.group, sc->g->id.b, 16) != 0 ||
                    h.base_index != x->seg->base || h.salt != x->seg->salt ||
                    h.size_bytes != x->seg->size)) {
        rv = KEEL_ELOST; /* unreadable header */
    }
    rv = rv == 0 ? store__scan_parse_items(x, &sc->rd, errmsg) : rv;
    sc->rd.f = NULL;
    return rv;
}

struct dir_ctx {
    struct scan *sc;
    const struct store_meta_seg *cat;
    size_t ncat;
    char *errmsg;
};

static bool in_catalogue(const struct dir_ctx *d, uint64_t base)
{
    bool found = false;

    ASSERT(d != NULL);
    ASSERT(d->ncat <= STORE_SEGMENTS_PER_GROUP_MAX);
    /* The catalogue is sorted by base index. */
    (void)keel_sorted_find(d->cat, d->ncat, sizeof *d->cat,
                           offsetof(struct store_meta_seg, base_index), base,
                           &found);
    return found;
}

/* A segment file the catalogue does not name is never part of the log
 * (interrupted create, delete or install): quarantine it. A leftover spare
 * never held records and is removed. */
static int dir_entry_cb(void *arg, const char *name)
{
    struct dir_ctx *d = arg;
    struct store_group *g = d->sc->g;
    char path[STORE_PATH_BYTES_MAX];
    char qname[STORE_PATH_BYTES_MAX];
    char hex[33];
    unsigned long long base;
    char tail[8];

    ASSERT(d != NULL);
    ASSERT(name != NULL);
    store_fmt_str(path, sizeof path, "%s/%s", g->dir, name);
    if (strcmp(name, STORE_PREALLOC_NAME) == 0) {
        return g->s->cfg.read_only
                   ? 0
                   : g->s->fs->unlink(g->s->fs, path, d->errmsg);
    }
    if (sscanf(name, "%20llu%7s", &base, tail) == 2 &&
        strcmp(tail, ".blk") == 0 && in_catalogue(d, base)) {
        return 0;
    }
    store_group_id_hex(&g->id, hex);
    store_fmt_str(qname, sizeof qname, "%s-%s", hex, name);
    d->sc->rep->quarantined_files++; /* read-only: would be quarantined */
    return g->s->cfg.read_only
               ? 0
               : store__quarantine(g->s, path, qname, d->errmsg);
}

static uint64_t items_max_term(const struct sseg *x)
{
    uint64_t t = 0;

    ASSERT(x != NULL);
    ASSERT(x->nitems <= STORE_SCAN_RECORDS_MAX);
    for (size_t i = 0; i < x->nitems; i++) {
        t = x->items[i].term > t ? x->items[i].term : t;
    }
    return t;
}

/* Rule 3: segments from the first lost one on leave the log: their files
 * move to quarantine (their terms still count) and their catalogue entries
 * go. */
static int drop_lost(struct scan *sc, size_t k, char *errmsg)
{
    struct store_group *g = sc->g;
    struct store_recovery *rep = sc->rep;
    char path[STORE_PATH_BYTES_MAX];
    char qname[STORE_PATH_BYTES_MAX];
    char hex[33];
    int rv;

    ASSERT(k < sc->n);
    ASSERT(rep->n_lost < STORE_REPORT_RANGES_MAX);
    rep->lost[rep->n_lost++] =
        (struct store_range){sc->ss[k].seg->base, UINT64_MAX};
    rep->amnesia = true;
    rep->amnesia_reason = STORE_AMNESIA_LOST_RANGE;
    store_group_id_hex(&g->id, hex);
    for (size_t i = k; i < sc->n; i++) {
        struct seg *seg = sc->ss[i].seg;
        uint64_t t = items_max_term(&sc->ss[i]);
        rep->max_term_seen = t > rep->max_term_seen ? t : rep->max_term_seen;
        if (seg->f != NULL && g->s->cfg.read_only) {
            g->s->fs->close(g->s->fs, seg->f); /* reported, not moved */
            seg->f = NULL;
        } else if (seg->f != NULL) {
            g->s->fs->close(g->s->fs, seg->f);
            seg->f = NULL;
            store__seg_path(g, seg->base, path, sizeof path);
            store_fmt_str(qname, sizeof qname, "%s-%s", hex,
                          strrchr(path, '/') + 1);
            rv = store__quarantine(g->s, path, qname, errmsg);
            if (rv != 0) {
                return rv;
            }
            rep->quarantined_files++;
        }
        rv = g->s->cfg.read_only
                 ? 0
                 : store_meta_cat_del(g->s->meta, g->id.b, seg->base, errmsg);
        if (rv != 0) {
            store__fatal(g->s, "remove catalogue entry", errmsg);
        }
        free(seg);
        free(sc->ss[i].items);
        sc->ss[i] = (struct sseg){0};
    }
    sc->n = k;
    return 0;
}

static int load_all(struct scan *sc, const struct store_meta_seg *cat,
                    size_t ncat, char *errmsg)
{
    size_t lost_at = SIZE_MAX;
    int rv = 0;

    ASSERT(ncat <= STORE_SEGMENTS_PER_GROUP_MAX);
    ASSERT(sc->ss != NULL || ncat == 0);
    for (size_t i = 0; i < ncat && rv == 0; i++) {
        struct seg *seg = calloc(1, sizeof *seg);
        if (seg == NULL) {
            return keel_err(KEEL_ENOMEM, errmsg, "scan: out of memory");
        }
        seg->base = cat[i].base_index;
        seg->salt = cat[i].salt;
        seg->size = cat[i].size_bytes;
        seg->first_index = cat[i].first_index;
        seg->state = SEG_LIVE;
        sc->ss[sc->n++].seg = seg;
        rv = load_segment(sc, &sc->ss[i], errmsg);
        if (rv == KEEL_ELOST) {
            lost_at = lost_at == SIZE_MAX ? i : lost_at;
            rv = 0;
        }
    }
    if (rv == 0 && lost_at != SIZE_MAX) {
        rv = drop_lost(sc, lost_at, errmsg);
    }
    return rv;
}

static void queue_cleanup(struct scan *sc, const struct walk *w, size_t tail,
                          uint64_t keep_end)
{
    struct store_group *g = sc->g;
    struct seg *ts = sc->ss[tail].seg;

    ASSERT(tail < sc->n);
    ASSERT(keep_end >= STORE_SEG_HEADER_BYTES);
    (void)w;
    /* Delete later segments newest first (catalogue, unlink, dir fsync). */
    for (size_t i = sc->n; i-- > tail + 1;) {
        struct op *op = store__op_new(OP_DELETE_SEG);
        op->seg = sc->ss[i].seg;
        sc->rep->torn = true;
        store__op_push(g, op);
    }
    if (ts->nonzero_end > keep_end) {
        struct op *op = store__op_new(OP_ZERO);
        op->stale = true; /* no marker: just zero */
        op->seg = ts;
        op->off = keep_end;
        sc->rep->torn = true;
        sc->rep->torn_bytes += ts->nonzero_end - keep_end;
        store__op_push(g, op);
    }
}

/* The log ends past M: name its last record in a new marker (synced). */
static void queue_mark(struct store_group *g, struct seg *seg)
{
    struct op *op = store__op_new(OP_MARK);
    struct ient *last = &g->ents[g->nents - 1];

    ASSERT(g->nents > 0);
    ASSERT(last->seg == seg);
    op->seg = seg;
    op->off = g->tail_off;
    op->first_index = g->first_index + g->nents - 1;
    op->last_index = op->first_index;
    op->last_term = last->term;
    op->last_checksum = last->checksum;
    store__op_push(g, op);
    g->tail_marker = true;
}

static uint64_t keep_end_of(const struct scan *sc, const struct walk *w,
                            size_t tail)
{
    const struct sseg *x = &sc->ss[tail];
    uint64_t end = STORE_SEG_HEADER_BYTES;
    uint64_t limit = w->ended && w->end_seg == tail ? w->end_off : UINT64_MAX;

    ASSERT(tail < sc->n);
    ASSERT(x->seg != NULL);
    for (size_t i = 0; i < x->nitems; i++) {
        if (x->items[i].end <= limit && x->items[i].off < limit) {
            end = x->items[i].end;
        }
    }
    return end;
}

static void fill_extent(struct scan *sc, const struct walk *w)
{
    struct store_group *g = sc->g;
    struct store_recovery *rep = sc->rep;
    uint64_t ti = 0;
    uint64_t tt = 0;

    ASSERT(g != NULL);
    ASSERT(rep != NULL);
    rep->first_index = g->first_index;
    rep->last_index = g->nents > 0 ? store__last_index(g) : g->first_index - 1;
    rep->last_term = g->nents > 0 ? g->ents[g->nents - 1].term : g->snap.term;
    for (size_t i = g->nents; i-- > 0;) {
        if (!g->ents[i].faulty) {
            ti = g->first_index + i;
            tt = g->ents[i].term;
            break;
        }
    }
    if (w->m != NULL) {
        rep->has_marker = true;
        rep->marker_index = w->m->index;
        rep->marker_term = w->m->term;
        if (w->m->term > tt || (w->m->term == tt && w->m->index > ti)) {
            tt = w->m->term;
            ti = w->m->index;
        }
    }
    if (g->snap.term > tt || (g->snap.term == tt && g->snap.index > ti)) {
        tt = g->snap.term;
        ti = g->snap.index;
    }
    rep->extent_index = ti;
    rep->extent_term = tt;
    rep->max_term_seen = tt > rep->max_term_seen ? tt : rep->max_term_seen;
    /* UINT64_MAX is "hard state unknown" (group.c), not a term seen. */
    if (sc->hs_term != UINT64_MAX && sc->hs_term > rep->max_term_seen) {
        rep->max_term_seen = sc->hs_term;
    }
}

static int adopt(struct scan *sc, const struct walk *w)
{
    struct store_group *g = sc->g;
    size_t tail = w->ended ? w->end_seg : sc->n - 1;
    size_t keep = tail + 1;

    ASSERT(sc->n > 0);
    ASSERT(tail < sc->n);
    if (w->ended && w->tail_seg != tail &&
        sc->ss[tail].seg->base != w->expected && tail > 0) {
        tail--; /* the segment it ended in holds nothing of the log */
        keep = tail + 1;
    }
    queue_cleanup(sc, w, tail, keep_end_of(sc, w, tail));
    g->segs = calloc(sc->n, sizeof *g->segs);
    if (g->segs == NULL) {
        return KEEL_ENOMEM;
    }
    g->segs_cap = sc->n;
    for (size_t i = 0; i < keep; i++) {
        g->segs[g->nsegs++] = sc->ss[i].seg;
    }
    g->first_index = sc->ss[0].seg->base;
    g->tail_off = w->tail_seg == tail && g->nents > 0 ? w->tail_off
                                                      : STORE_SEG_HEADER_BYTES;
    bool at_m = w->m != NULL && w->m_seg == tail && g->tail_off == w->m->off;
    bool remark =
        at_m && w->m->mended && g->nents > 0 && !g->ents[g->nents - 1].faulty;
    if (remark) {
        /* A sound marker takes the mended one's place (one marker between
         * a batch and the next, as repair expects). */
        queue_mark(g, sc->ss[tail].seg);
    } else if (at_m) {
        g->tail_off = w->m->end; /* the next batch goes after M */
    } else if (g->nents > 0 && !g->ents[g->nents - 1].faulty &&
               w->tail_seg == tail) {
        queue_mark(g, sc->ss[tail].seg);
    }
    if (w->ended) {
        sc->rep->torn_from = w->expected;
        sc->rep->torn = sc->rep->torn || w->end_torn;
    }
    if (w->m != NULL) {
        g->has_marker = true;
        g->marker_index = w->m->index;
        g->marker_off = w->m->off;
        g->marker_seg = sc->ss[w->m_seg].seg;
        g->marker_mended = w->m->mended && !remark;
    }
    return 0;
}

static void check_amnesia(struct scan *sc, const struct walk *w)
{
    struct store_group *g = sc->g;
    struct store_recovery *rep = sc->rep;

    ASSERT(g != NULL);
    ASSERT(w != NULL);
    if (g->policy.policy == STORE_FSYNC_INTERVAL && w->ended && w->end_torn) {
        /* Rule 2: under interval records after M may have been acked. */
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_INTERVAL_TAIL;
    }
    if (g->first_index > 1 && g->first_index > g->snap.index + 1) {
        /* §5: rebuild only from index 1 or right after a snapshot. */
        rep->amnesia = true;
        rep->amnesia_reason = STORE_AMNESIA_SNAPSHOT_GAP;
        if (rep->n_lost < STORE_REPORT_RANGES_MAX) {
            rep->lost[rep->n_lost++] =
                (struct store_range){g->snap.index + 1, g->first_index - 1};
        }
    }
}

static void scan_free(struct scan *sc)
{
    ASSERT(sc != NULL);
    ASSERT(sc->n <= STORE_SEGMENTS_PER_GROUP_MAX);
    for (size_t i = 0; i < sc->n; i++) {
        free(sc->ss[i].items);
    }
    free(sc->ss);
}

/* The group's catalogue into *cat, grown from a few entries as far as
 * STORE_SEGMENTS_PER_GROUP_MAX when it holds more: the open of a new or
 * small group never zeroes the bound's 2 MiB (a node creating thousands
 * of groups did, on its loop thread). Returns 0, KEEL_ENOMEM or the
 * listing's error. */
static int cat_load(struct store_group *g, struct store_meta_seg **cat,
                    size_t *ncat)
{
    size_t cap = 64;
    for (;;) {
        struct store_meta_seg *c = realloc(*cat, cap * sizeof *c);
        if (c == NULL) {
            return KEEL_ENOMEM;
        }
        *cat = c;
        int rv = store_meta_cat_list(g->s->meta, g->id.b, c, cap, ncat);
        if (rv != KEEL_ELIMIT || cap >= STORE_SEGMENTS_PER_GROUP_MAX) {
            return rv;
        }
        cap = cap * 16 < STORE_SEGMENTS_PER_GROUP_MAX
                  ? cap * 16
                  : STORE_SEGMENTS_PER_GROUP_MAX;
    }
}

int store__scan(struct store_group *g, struct store_recovery *rep, char *errmsg)
{
    struct scan sc = {g, rep, NULL, 0, g->hard_term, {0}};
    struct store_meta_seg *cat;
    struct dir_ctx d;
    struct walk w;
    size_t ncat = 0;
    int rv;

    ASSERT(g->nsegs == 0);
    ASSERT(g->nents == 0);
    cat = NULL;
    sc.rd.s = g->s;
    sc.rd.cap = g->s->cfg.segment_bytes < STORE_SCAN_READ_BYTES
                    ? (size_t)g->s->cfg.segment_bytes
                    : STORE_SCAN_READ_BYTES;
    sc.rd.buf = malloc(sc.rd.cap);
    if (sc.rd.buf == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "scan: out of memory");
        goto out;
    }
    rv = cat_load(g, &cat, &ncat);
    if (rv == 0 && ncat == 0 && g->s->cfg.sole_member && !g->s->cfg.read_only) {
        rv = store__rebuild_catalogue(g, rep, errmsg);
        rv = rv == 0 && rep->rebuilt_segments > 0 ? cat_load(g, &cat, &ncat)
                                                  : rv;
    }
    if (rv == KEEL_ENOMEM) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "scan: out of memory");
        goto out;
    }
    if (rv != 0) {
        rv = keel_err(rv, errmsg, "catalogue of group unreadable");
        goto out;
    }
    sc.ss = calloc(ncat > 0 ? ncat : 1, sizeof *sc.ss);
    if (sc.ss == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "scan: out of memory");
        goto out;
    }
    d = (struct dir_ctx){&sc, cat, ncat, errmsg};
    rv = g->s->fs->readdir(g->s->fs, g->dir, dir_entry_cb, &d, errmsg);
    if (rv == KEEL_ENOENT && g->s->cfg.read_only) {
        rv = 0; /* never created (a writable open makes it): no segments */
    }
    rv = rv == 0 ? load_all(&sc, cat, ncat, errmsg) : rv;
    if (rv != 0 || sc.n == 0) {
        g->first_index = g->snap.index + 1;
        memset(&w, 0, sizeof w);
        goto report;
    }
    rv = choose_and_walk(&sc, &w);
    rv = rv == 0 ? adopt(&sc, &w) : rv;
report:
    if (rv == 0) {
        fill_extent(&sc, &w);
        check_amnesia(&sc, &w);
    }
out:
    scan_free(&sc);
    free(sc.rd.buf);
    free(cat);
    return rv;
}
