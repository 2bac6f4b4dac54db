/* Repair of a faulty run (docs/design.md §4.7 R1). A candidate copy, from a
 * peer or the leader, is verified by re-encoding its (index, term, type,
 * flags, payload) with the local predecessor's checksum and the salt of the
 * segment each record lies in: the chain must end equal to the local
 * successor's prev-checksum (or M's checksum at M.index) and fill the
 * damaged bytes exactly. Checking only index and term would adopt a stale
 * copy. A run that crosses a segment boundary is verified whole and
 * written as one part per segment (docs/decisions/0018).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One segment's part of the run: recs[first, first + n) go to [start, end)
 * of seg (end UINT64_MAX: bounded by the segment; the chain decides). */
struct part {
    struct seg *seg;
    uint64_t start;
    uint64_t end;
    size_t first;
    size_t n;
};

struct target {
    struct seg *seg; /* where the run starts */
    uint64_t start;
    uint64_t end; /* where the run's last part ends */
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

/* Where the run starts (after its intact predecessor) and what bounds its
 * end: the intact successor, or M. The run's last record may lie in a
 * later segment than its first (docs/decisions/0018). */
static int find_target(struct store_group *g, uint64_t a, uint64_t b,
                       struct target *t, char *errmsg)
{
    struct seg *last_seg = store__ent(g, b)->seg;

    ASSERT(a <= b);
    ASSERT(t != NULL);
    t->seg = store__ent(g, a)->seg;
    t->start = STORE_SEG_HEADER_BYTES;
    if (a > g->first_index) {
        struct ient *p = store__ent(g, a - 1);
        if (p->faulty) {
            return keel_err(KEEL_EINVAL, errmsg,
                            "repair must start right after an intact record");
        }
        t->prev = p->checksum;
        if (t->seg == p->seg) {
            t->start = p->off + p->bytes;
            skip_marker(g, t, a - 1);
        }
    } else if (g->first_index == 1) {
        t->prev = 0;
    } else {
        return keel_err(KEEL_EINVAL, errmsg,
                        "cannot verify the first index "
                        "after a prefix drop");
    }
    if (b < store__last_index(g) && !store__ent(g, b + 1)->faulty) {
        /* In the next segment the successor does not bound the bytes; the
         * chain does: a verified copy is byte-identical to the original. */
        t->end = store__ent(g, b + 1)->seg == last_seg
                     ? store__ent(g, b + 1)->off
                     : UINT64_MAX;
        return successor_prev(g, b + 1, &t->want, errmsg);
    }
    if (g->has_marker && g->marker_index == b && g->marker_seg == last_seg) {
        t->end = g->marker_off;
        t->want = store__ent(g, b)->checksum; /* M's checksum */
        t->at_marker = true;
        return 0;
    }
    return keel_err(KEEL_EINVAL, errmsg,
                    "no intact successor or marker to verify %llu..%llu",
                    (unsigned long long)a, (unsigned long long)b);
}

/* The next part of the run from recs[from]: the records that lie in the
 * same segment. A later part starts its segment, right after the header. */
static int next_part(struct store_group *g, const struct store_record *recs,
                     size_t n, size_t from, const struct target *t,
                     struct part *p, char *errmsg)
{
    struct seg *seg = store__ent(g, recs[from].index)->seg;

    ASSERT(from < n);
    ASSERT(n <= STORE_REPAIR_RECORDS_MAX);
    *p = (struct part){seg, t->start, UINT64_MAX, from, 0};
    while (from + p->n < n &&
           store__ent(g, recs[from + p->n].index)->seg == seg) {
        p->n++;
    }
    if (from > 0) {
        p->start = STORE_SEG_HEADER_BYTES;
        if (seg->base != recs[from].index) {
            return keel_err(KEEL_EINVAL, errmsg,
                            "faulty %llu is not the first record of its "
                            "segment",
                            (unsigned long long)recs[from].index);
        }
    }
    if (from + p->n == n) {
        p->end = t->end;
    }
    return 0;
}

/* Re-encode one part's candidates, chained from *prev, into op->buf with
 * its segment's salt; *prev := the last record's checksum. */
static int encode_part(const struct store_record *recs, const struct part *p,
                       uint64_t *prev, struct op *op, char *errmsg)
{
    size_t len = 0;

    ASSERT(p->n >= 1);
    ASSERT(p->end >= p->start);
    for (size_t i = p->first; i < p->first + p->n; i++) {
        len += (size_t)store_fmt_rec_bytes(recs[i].len);
    }
    if (p->end == UINT64_MAX &&
        p->start + len + STORE_MARKER_BYTES <= p->seg->size) {
        /* bounded by the segment; the chain check decides */
    } else if (len != p->end - p->start &&
               len + STORE_MARKER_BYTES != p->end - p->start) {
        /* (a batch's marker may sit between the run and its successor) */
        return keel_err(KEEL_ECONFLICT, errmsg,
                        "candidate run does not fill the damaged bytes");
    }
    op->buf = malloc(len);
    if (op->buf == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    for (size_t i = p->first; i < p->first + p->n; i++) {
        struct store_fmt_rec r = {
            recs[i].index, recs[i].term, *prev,         0,
            recs[i].len,   recs[i].type, recs[i].flags, recs[i].payload};
        *prev = store_fmt_rec_encode(op->buf + op->len, &r, p->seg->salt);
        op->len += (size_t)store_fmt_rec_bytes(recs[i].len);
    }
    op->seg = p->seg;
    op->off = p->start;
    op->first_index = recs[p->first].index;
    op->last_index = recs[p->first + p->n - 1].index;
    return 0;
}

static void free_ops(struct op *head)
{
    while (head != NULL) {
        struct op *next = head->next;
        store__op_free(head);
        head = next;
    }
}

/* Encode every part of the run into a list of OP_REPAIR ops (in order);
 * KEEL_ECONFLICT unless the whole chain ends at t->want. */
static int encode_run(struct store_group *g, const struct store_record *recs,
                      size_t n, const struct target *t, struct op **out,
                      char *errmsg)
{
    struct op *head = NULL;
    struct op **tail = &head;
    uint64_t prev = t->prev;
    struct part p;
    int rv = 0;

    ASSERT(n >= 1 && n <= STORE_REPAIR_RECORDS_MAX);
    ASSERT(out != NULL);
    for (size_t from = 0; from < n && rv == 0; from += p.n) {
        rv = next_part(g, recs, n, from, t, &p, errmsg);
        if (rv == 0) {
            struct op *op = store__op_new(OP_REPAIR);
            *tail = op;
            tail = &op->next;
            rv = encode_part(recs, &p, &prev, op, errmsg);
        }
    }
    if (rv == 0 && prev != t->want) {
        rv = keel_err(KEEL_ECONFLICT, errmsg,
                      "candidate for %llu..%llu does not verify against "
                      "the local chain",
                      (unsigned long long)recs[0].index,
                      (unsigned long long)recs[n - 1].index);
    }
    if (rv != 0) {
        free_ops(head);
        return rv;
    }
    *out = head;
    return 0;
}

/* The index table takes the verified copies' positions. */
static void place_run(struct store_group *g, const struct store_record *recs,
                      const struct op *ops)
{
    ASSERT(ops != NULL);
    ASSERT(g != NULL);
    for (const struct op *op = ops; op != NULL; op = op->next) {
        uint64_t off = op->off;
        for (uint64_t i = op->first_index; i <= op->last_index; i++) {
            const struct store_record *rec = &recs[i - ops->first_index];
            uint64_t bytes = store_fmt_rec_bytes(rec->len);
            struct store_fmt_rec r;
            (void)store_fmt_rec_decode(op->buf + (off - op->off), (size_t)bytes,
                                       op->seg->salt, &r);
            *store__ent(g, i) =
                (struct ient){rec->term,     r.checksum,      op->seg,
                              (uint32_t)off, (uint32_t)bytes, 0};
            off += bytes;
        }
    }
}

int store_repair(struct store_group *g, const struct store_record *recs,
                 size_t n, char *errmsg)
{
    struct target t;
    struct op *ops = NULL;
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
    rv = rv == 0 ? encode_run(g, recs, n, &t, &ops, errmsg) : rv;
    if (rv != 0) {
        return rv;
    }
    place_run(g, recs, ops);
    ASSERT(store__ent(g, b)->checksum == t.want);
    pthread_mutex_lock(&g->s->mu);
    for (struct op *op = ops; op != NULL;) {
        struct op *next = op->next;
        /* Only the last part reports, for the whole run: the parts run in
         * order on one sync thread, so then every part is durable. */
        op->stale = next != NULL;
        op->first_index = next != NULL ? op->first_index : a;
        op->next = NULL;
        store__op_push(g, op);
        op = next;
    }
    if (t.at_marker && g->marker_mended) {
        /* After the records, the mended M gets sound bytes back in place:
         * a second flip in it would not mend (finding 14). */
        struct op *mk = store__op_new(OP_MARK);
        mk->seg = store__ent(g, b)->seg;
        mk->off = g->marker_off;
        mk->first_index = b;
        mk->last_index = b;
        mk->last_term = recs[n - 1].term;
        mk->last_checksum = t.want;
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
