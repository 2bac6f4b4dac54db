/* On-disk encodings of the .blk segment log (store/FORMAT.md describes them
 * byte by byte). Pure functions over buffers: no I/O, so the fuzzer and the
 * recovery scan share them. All integers are little-endian.
 */
#ifndef KEEL_STORE_FORMAT_H
#define KEEL_STORE_FORMAT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "keel/bytes.h"

#define STORE_FMT_VERSION 1u
#define STORE_SEG_MAGIC 0x004b4c424c45454bull /* "KEELBLK\0" */
#define STORE_SEG_HEADER_BYTES 128u
#define STORE_SEG_HEADER_SUM_OFF 120u
#define STORE_REC_MAGIC 0x4345524bu /* "KREC" */
#define STORE_REC_HEADER_BYTES 40u
#define STORE_REC_OVERHEAD 48u
#define STORE_MARKER_MAGIC 0x4b524d4bu /* "KMRK" */
#define STORE_MARKER_BYTES 56u
#define STORE_MARKER_SEED_TWEAK 0x6d61726b65723031ull
#define STORE_BOOT_ID_BYTES 16u
#define STORE_GROUP_ID_BYTES 16u

_Static_assert(STORE_SEG_HEADER_BYTES % 8 == 0, "records start 8-aligned");
_Static_assert(STORE_REC_OVERHEAD % 8 == 0, "records stay 8-aligned");
_Static_assert(STORE_MARKER_BYTES % 8 == 0, "markers stay 8-aligned");
_Static_assert(STORE_MARKER_BYTES < STORE_REC_OVERHEAD + STORE_MARKER_BYTES,
               "a batch always covers the marker it overwrites");

struct store_seg_header {
    uint32_t version;
    uint8_t group[STORE_GROUP_ID_BYTES];
    uint64_t base_index;
    uint64_t first_index; /* the log's first index if it starts here, or 0 */
    uint64_t size_bytes;
    uint64_t salt;
};

struct store_fmt_rec {
    uint64_t index;
    uint64_t term;
    uint64_t prev_checksum;
    uint64_t checksum;
    uint32_t len;
    uint8_t type;
    uint8_t flags;
    const uint8_t *payload; /* points into the decoded buffer */
};

struct store_fmt_marker {
    uint64_t index;
    uint64_t term;
    uint64_t rec_checksum;
    uint8_t boot_id[STORE_BOOT_ID_BYTES];
};

/* Bytes a record with a payload of len bytes occupies on disk. */
static inline uint64_t store_fmt_rec_bytes(uint64_t len)
{
    return STORE_REC_OVERHEAD + ((len + 7u) & ~(uint64_t)7u);
}

void store_fmt_seg_header_encode(const struct store_seg_header *h,
                                 uint8_t out[STORE_SEG_HEADER_BYTES]);
/* KEEL_ECORRUPT on a bad magic/checksum/field, KEEL_EVERSION on an unknown
 * version. */
int store_fmt_seg_header_decode(const uint8_t *buf, size_t len,
                                struct store_seg_header *out);

/* Encode one record into out (store_fmt_rec_bytes(r->len) bytes) and return
 * its checksum. r->checksum is ignored. */
uint64_t store_fmt_rec_encode(uint8_t *out, const struct store_fmt_rec *r,
                              uint64_t salt);
/* Decode the record at buf. KEEL_ENOENT when no record magic is there,
 * KEEL_ECORRUPT when the bytes fail length or checksum checks. */
int store_fmt_rec_decode(const uint8_t *buf, size_t avail, uint64_t salt,
                         struct store_fmt_rec *out);

void store_fmt_marker_encode(uint8_t out[STORE_MARKER_BYTES],
                             const struct store_fmt_marker *m, uint64_t salt);
int store_fmt_marker_decode(const uint8_t *buf, size_t avail, uint64_t salt,
                            struct store_fmt_marker *out);

/* snprintf for paths and messages: a too-long result is cut (paths are
 * bounded by STORE_PATH_BYTES_MAX at configuration time). */
__attribute__((format(printf, 3, 4))) static inline void
store_fmt_str(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

#endif
