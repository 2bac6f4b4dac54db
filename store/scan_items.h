/* Phase A of the recovery scan (scan.c): the items of one segment, valid
 * records and sync markers (a marker one flipped bit away from valid
 * included, mended), parsed through a bounded read window. Internal to
 * store/.
 */
#ifndef KEEL_STORE_SCAN_ITEMS_H
#define KEEL_STORE_SCAN_ITEMS_H

#include "internal.h"

enum item_kind {
    ITEM_REC = 1,
    ITEM_MARKER,
};

struct item {
    uint8_t kind;
    uint32_t off;
    uint32_t end;
    uint64_t index;
    uint64_t term;
    uint64_t prev; /* record: prev checksum; marker: named checksum */
    uint64_t checksum;
    bool mended; /* a marker read with one bit flipped back */
};

struct sseg {
    struct seg *seg;
    struct item *items;
    size_t nitems;
    size_t cap;
};

/* A sliding read window over one segment file: bounded reads (no
 * whole-segment copy), the buffer reused across the segments of a scan. */
struct reader {
    struct store *s;
    struct fs_file *f;
    uint8_t *buf;
    size_t cap;
    uint64_t start; /* segment offset of buf[0] */
    size_t len;     /* valid bytes in buf */
    uint64_t size;  /* segment size */
};

/* Make [off, off + need) readable (need is cut at the segment end); *p
 * points at off and *avail counts the readable bytes from there.
 * KEEL_ELOST when the file is shorter than its header says. */
int store__scan_window(struct reader *r, uint64_t off, size_t need,
                       const uint8_t **p, size_t *avail, char *errmsg);
/* Phase A: valid records and markers of one segment x (open in r), in
 * order, every record's checksum verified; sets the segment's nonzero_end
 * (the end of its last non-zero 8-byte word). */
int store__scan_parse_items(struct sseg *x, struct reader *r, char *errmsg);

#endif
