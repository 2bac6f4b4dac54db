/* Repair of a faulty run (docs/design.md §4.7 R1). A candidate copy, from a
 * peer or the leader, is verified by re-encoding its (index, term, type,
 * flags, payload) with the local predecessor's checksum and the local
 * segment salt: the chain must end equal to the local successor's
 * prev-checksum (or M's checksum at M.index) and fill the damaged bytes
 * exactly. Checking only index and term would adopt a stale copy.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct target {
    struct seg *seg;
    uint64_t start;
    uint64_t end;
    uint64_t prev;
    uint64_t want;  /* checksum the last repaired record must have */
    bool at_marker; /* the run ends at M */
};

/* The successor's prev-checksum, read and verified from disk. */
static int successor_prev(struct store_group *g, uint64_t index, uint64_t *prev,
                          char *errmsg)
{
    struct ient *e = store__ent(g, index);
    struct store_fmt_rec r;
    uint8_t *buf;
    size_t got = 0;
    int rv;

    ASSERT(!e->faulty);
    ASSERT(e->seg->f != NULL);
    buf = malloc(e->bytes);
    if (buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    rv = g->s->fs->pread(g->s->fs, e->seg->f, buf, e->bytes, e->off, &got,
                         errmsg);
    if (rv == 0 && (got != e->bytes ||
                    store_fmt_rec_decode(buf, got, e->seg->salt, &r) != 0 ||
                    r.checksum != e->checksum)) {
        rv = keel_err(KEEL_EFAULTY, errmsg, "successor %llu is damaged",
                      (unsigned long long)index);
    }
    if (rv == 0) {
        *prev = r.prev_checksum;
    }
    free(buf);
    return rv;
}

/* The predecessor ended a batch: its sync marker sits between it and the
 * damaged run (docs/decisions/0011: batches start after the marker), so
 * the run starts after that marker. A marker that does not decode, or
 * names another record, is not skipped (the length check then refuses). */
static void skip_marker(struct store_group *g, struct target *t,
                        uint64_t pred_index)
{
    uint8_t buf[STORE_MARKER_BYTES];
    struct store_fmt_marker m;
    size_t got = 0;
    char err[KEEL_ERRMSG_MAX];

    if (t->seg->f == NULL || t->start + STORE_MARKER_BYTES > t->seg->size ||
        g->s->fs->pread(g->s->fs, t->seg->f, buf, sizeof buf, t->start, &got,
                        err) != 0 ||
        got != sizeof buf) {
        return;
    }
    if (store_fmt_marker_decode(buf, got, t->seg->salt, &m) == 0 &&
        m.index == pred_index) {
        t->start += STORE_MARKER_BYTES;
    }
}

static int find_target(struct store_group *g, uint64_t a, uint64_t b,
                       struct target *t, char *errmsg)
{
    int rv;

    ASSERT(a <= b);
    ASSERT(t != NULL);
    if (a > g->first_index) {
        struct ient *p = store__ent(g, a - 1);
        if (p->faulty) {
            return keel_err(KEEL_EINVAL, errmsg,
                            "repair must start right after an intact record");
        }
        t->prev = p->checksum;
        t->seg = p->seg;
        t->start = p->off + p->bytes;
        if (store__ent(g, a)->seg != p->seg) {
            t->seg = store__ent(g, a)->seg;
            t->start = STORE_SEG_HEADER_BYTES;
        } else {
            skip_marker(g, t, a - 1);
        }
    } else if (g->first_index == 1) {
        t->prev = 0;
        t->seg = store__ent(g, a)->seg;
        t->start = STORE_SEG_HEADER_BYTES;
    } else {
        return keel_err(KEEL_EINVAL, errmsg,
                        "cannot verify the first index "
                        "after a prefix drop");
    }
    if (b < store__last_index(g) && !store__ent(g, b + 1)->faulty) {
        /* In the next segment the successor does not bound the bytes; the
         * chain does: a verified copy is byte-identical to the original. */
        t->end = store__ent(g, b + 1)->seg == t->seg ? store__ent(g, b + 1)->off
                                                     : UINT64_MAX;
        rv = successor_prev(g, b + 1, &t->want, errmsg);
        return rv;
    }
    if (g->has_marker && g->marker_index == b && g->marker_seg == t->seg) {
        t->end = g->marker_off;
        t->want = store__ent(g, b)->checksum; /* M's checksum */
        t->at_marker = true;
        return 0;
    }
    return keel_err(KEEL_EINVAL, errmsg,
                    "no intact successor or marker to verify %llu..%llu",
                    (unsigned long long)a, (unsigned long long)b);
}

/* Re-encode the candidates as a chain into op->buf. */
static int encode_chain(const struct store_record *recs, size_t n,
                        const struct target *t, struct op *op, char *errmsg)
{
    uint64_t prev = t->prev;
    size_t len = 0;

    ASSERT(n >= 1);
    ASSERT(t->end >= t->start);
    for (size_t i = 0; i < n; i++) {
        len += (size_t)store_fmt_rec_bytes(recs[i].len);
    }
    if (t->end == UINT64_MAX &&
        t->start + len + STORE_MARKER_BYTES <= t->seg->size) {
        /* bounded by the segment; the chain check below decides */
    } else if (len != t->end - t->start &&
               len + STORE_MARKER_BYTES != t->end - t->start) {
        /* (a batch's marker may sit between the run and its successor) */
        return keel_err(KEEL_ECONFLICT, errmsg,
                        "candidate run does not fill the damaged bytes");
    }
    op->buf = malloc(len);
    if (op->buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        struct store_fmt_rec r = {
            recs[i].index, recs[i].term, prev,          0,
            recs[i].len,   recs[i].type, recs[i].flags, recs[i].payload};
        prev = store_fmt_rec_encode(op->buf + op->len, &r, t->seg->salt);
        op->len += (size_t)store_fmt_rec_bytes(recs[i].len);
    }
    if (prev != t->want) {
        return keel_err(KEEL_ECONFLICT, errmsg,
                        "candidate for %llu..%llu does not verify against "
                        "the local chain",
                        (unsigned long long)recs[0].index,
                        (unsigned long long)recs[n - 1].index);
    }
    return 0;
}

int store_repair(struct store_group *g, const struct store_record *recs,
                 size_t n, char *errmsg)
{
    struct target t;
    struct op *op;
    uint64_t a = recs[0].index;
    uint64_t b = a + n - 1;
    int rv;

    ASSERT(n >= 1 && n <= STORE_REPAIR_RECORDS_MAX);
    ASSERT(g != NULL);
    if (g->nents == 0 || a < g->first_index || b > store__last_index(g)) {
        return keel_err(KEEL_ENOENT, errmsg, "repair outside the log");
    }
    for (size_t i = 0; i < n; i++) {
        ASSERT(recs[i].index == a + i);
        if (!store__ent(g, a + i)->faulty) {
            return keel_err(KEEL_EINVAL, errmsg, "index %llu is not faulty",
                            (unsigned long long)(a + i));
        }
    }
    memset(&t, 0, sizeof t);
    rv = find_target(g, a, b, &t, errmsg);
    if (rv != 0) {
        return rv;
    }
    op = store__op_new(OP_REPAIR);
    rv = encode_chain(recs, n, &t, op, errmsg);
    if (rv != 0) {
        store__op_free(op);
        return rv;
    }
    op->seg = t.seg;
    op->off = t.start;
    op->first_index = a;
    op->last_index = b;
    uint64_t off = t.start;
    uint64_t prev = t.prev;
    for (size_t i = 0; i < n; i++) {
        struct store_fmt_rec r;
        uint64_t bytes = store_fmt_rec_bytes(recs[i].len);
        (void)store_fmt_rec_decode(op->buf + (off - t.start), (size_t)bytes,
                                   t.seg->salt, &r);
        *store__ent(g, a + i) = (struct ient){
            recs[i].term, r.checksum, t.seg, (uint32_t)off, (uint32_t)bytes, 0};
        prev = r.checksum;
        off += bytes;
    }
    ASSERT(prev == t.want);
    pthread_mutex_lock(&g->s->mu);
    store__op_push(g, op);
    if (t.at_marker && g->marker_mended) {
        /* After the records, the mended M gets sound bytes back in place:
         * a second flip in it would not mend (finding 14). */
        struct op *mk = store__op_new(OP_MARK);
        mk->seg = t.seg;
        mk->off = g->marker_off;
        mk->first_index = b;
        mk->last_index = b;
        mk->last_term = recs[n - 1].term;
        mk->last_checksum = prev;
        mk->stale = true; /* persisted already: nothing to report */
        store__op_push(g, mk);
        g->marker_mended = false;
    }
    store__schedule(g->s, g);
    pthread_mutex_unlock(&g->s->mu);
    return 0;
}

int store_faulty_run(struct store_group *g, uint64_t from, uint64_t *last)
{
    ASSERT(g != NULL && last != NULL);
    if (g->nents == 0 || from < g->first_index || from > store__last_index(g) ||
        !store__ent(g, from)->faulty) {
        return KEEL_EINVAL;
    }
    uint64_t b = from;
    while (b < store__last_index(g) && store__ent(g, b + 1)->faulty) {
        b++;
    }
    *last = b;
    return 0;
}
