/* Phase A of the recovery scan: one segment's bytes into items (see
 * scan_items.h); the walk over them is scan.c's. */
#include <stdlib.h>
#include <string.h>

#include <keel/grow.h>

#include "scan_items.h"

static int push_item(struct sseg *x, const struct item *it)
{
    ASSERT(x != NULL);
    ASSERT(x->nitems <= STORE_SCAN_RECORDS_MAX);
    int rv = keel_grow(&x->items, &x->cap, x->nitems, sizeof *x->items, 256);

    if (rv == 0) {
        x->items[x->nitems++] = *it;
    }
    return rv;
}

/* Make [off, off + need) readable (need is cut at the segment end); *p
 * points at off and *avail counts the readable bytes from there. */
int store__scan_window(struct reader *r, uint64_t off, size_t need,
                       const uint8_t **p, size_t *avail, char *errmsg)
{
    ASSERT(off < r->size);
    ASSERT(need <= STORE_SCAN_READ_BYTES + STORE_RECORD_PAYLOAD_BYTES_MAX +
                       STORE_REC_OVERHEAD);
    need = off + need > r->size ? (size_t)(r->size - off) : need;
    if (off < r->start || off + need > r->start + r->len) {
        size_t keep = 0;
        if (off >= r->start && off < r->start + r->len) {
            keep = (size_t)(r->start + r->len - off);
            memmove(r->buf, r->buf + (off - r->start), keep);
        }
        if (need > r->cap) { /* a record larger than the read size */
            uint8_t *nb = realloc(r->buf, need);
            if (nb == NULL) {
                return keel_err(KEEL_ENOMEM, errmsg, "scan: out of memory");
            }
            r->buf = nb;
            r->cap = need;
        }
        uint64_t left = r->size - off;
        size_t want = (left < r->cap ? (size_t)left : r->cap) - keep;
        size_t got = 0;
        int rv = r->s->fs->pread(r->s->fs, r->f, r->buf + keep, want,
                                 off + keep, &got, errmsg);
        if (rv != 0) {
            return rv;
        }
        if (got != want) {
            return KEEL_ELOST; /* shorter than its header says */
        }
        r->start = off;
        r->len = keep + got;
    }
    *p = r->buf + (off - r->start);
    *avail = (size_t)(r->start + r->len - off);
    return 0;
}

/* Length of the run of zero 8-byte words at p (avail bytes readable):
 * 64 bytes per step, so an empty segment tail costs little. */
static size_t zero_run(const uint8_t *p, size_t avail)
{
    size_t n = 0;

    ASSERT(p != NULL);
    avail &= ~(size_t)7;
    while (n + 64 <= avail) {
        uint64_t w[8];
        memcpy(w, p + n, sizeof w);
        if ((w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) != 0) {
            break;
        }
        n += 64;
    }
    while (n + 8 <= avail && keel_get_le64(p + n) == 0) {
        n += 8;
    }
    ASSERT(n <= avail);
    return n;
}

/* A marker at p, valid or one flipped bit away from valid (*mended).
 * A marker damaged by a media fault after its sync still ends a completed
 * sync (docs/raft.md finding 14), and the flipped bit is found: every
 * field comes back exact. A marker a power loss left half-written is never
 * mended: a torn byte is old, zero past the tail, and whole zero bytes
 * differ from the marker in one bit only where it held that one bit (a
 * tear before its last byte zeroes its 64-bit checksum). */
static bool marker_at(const uint8_t *p, size_t avail, uint64_t salt,
                      struct store_fmt_marker *m, bool *mended)
{
    uint8_t b[STORE_MARKER_BYTES];

    ASSERT(p != NULL);
    ASSERT(m != NULL);
    ASSERT(mended != NULL);
    *mended = false;
    if (store_fmt_marker_decode(p, avail, salt, m) == 0) {
        return true;
    }
    uint64_t diff = keel_get_le64(p) ^ (uint64_t)STORE_MARKER_MAGIC;
    if (avail < STORE_MARKER_BYTES || (diff & (diff - 1)) != 0) {
        return false; /* not a marker's first word, even to a bit */
    }
    for (unsigned bit = 0; bit < 8 * STORE_MARKER_BYTES; bit++) {
        memcpy(b, p, sizeof b);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        if (store_fmt_marker_decode(b, sizeof b, salt, m) == 0) {
            *mended = true;
            return true;
        }
    }
    return false;
}

/* One item at off (a valid record or marker), or *step: bytes to skip
 * (a zero run, or 8 for a damaged word). */
static int parse_one(struct reader *r, uint64_t off, uint64_t salt,
                     struct item *it, size_t *step, char *errmsg)
{
    const uint8_t *p;
    size_t avail;
    struct store_fmt_rec rec;
    struct store_fmt_marker m;
    bool mended = false;
    int rv = store__scan_window(r, off, STORE_REC_OVERHEAD + STORE_MARKER_BYTES,
                                &p, &avail, errmsg);

    ASSERT(off % 8 == 0);
    ASSERT(it != NULL && step != NULL);
    *step = 0;
    if (rv != 0) {
        return rv;
    }
    uint32_t magic = keel_get_le32(p);
    if (magic == STORE_REC_MAGIC) {
        uint32_t len = keel_get_le32(p + 4);
        if (len <= STORE_RECORD_PAYLOAD_BYTES_MAX) {
            rv = store__scan_window(r, off, (size_t)store_fmt_rec_bytes(len),
                                    &p, &avail, errmsg);
        }
        if (rv == 0 && len <= STORE_RECORD_PAYLOAD_BYTES_MAX &&
            store_fmt_rec_decode(p, avail, salt, &rec) == 0) {
            *it = (struct item){ITEM_REC,     (uint32_t)off, 0,
                                rec.index,    rec.term,      rec.prev_checksum,
                                rec.checksum, false};
            it->end = (uint32_t)(off + store_fmt_rec_bytes(rec.len));
            return 0;
        }
    } else if (marker_at(p, avail, salt, &m, &mended)) {
        *it = (struct item){ITEM_MARKER, (uint32_t)off,  0, m.index,
                            m.term,      m.rec_checksum, 0, mended};
        it->end = (uint32_t)(off + STORE_MARKER_BYTES);
        return 0;
    }
    if (rv != 0) {
        return rv;
    }
    size_t z = zero_run(p, avail);
    *step = z > 0 ? z : 8; /* empty, or damaged: resynchronise on 8 */
    return 0;
}

/* Phase A: valid records and markers of one segment, in order; every
 * record's checksum is verified. nonzero_end: the end of the last non-zero
 * 8-byte word. */
int store__scan_parse_items(struct sseg *x, struct reader *r, char *errmsg)
{
    uint64_t off = STORE_SEG_HEADER_BYTES;
    uint64_t nonzero_end = STORE_SEG_HEADER_BYTES;
    int rv = 0;

    ASSERT(r->size <= STORE_SEGMENT_BYTES_MAX);
    ASSERT(r->size >= STORE_SEG_HEADER_BYTES);
    while (rv == 0 && off + 8 <= r->size) {
        struct item it;
        size_t step = 0;
        rv = parse_one(r, off, x->seg->salt, &it, &step, errmsg);
        if (rv != 0) {
            break;
        }
        if (step == 0) {
            off = it.end;
            nonzero_end = off;
            rv = push_item(x, &it);
            continue;
        }
        const uint8_t *p;
        size_t avail;
        rv = store__scan_window(r, off, 8, &p, &avail, errmsg);
        if (rv == 0 && keel_get_le64(p) != 0) {
            nonzero_end = off + 8; /* a damaged word */
        }
        off += step;
    }
    x->seg->nonzero_end = nonzero_end;
    x->seg->hi_water = nonzero_end;
    return rv;
}
