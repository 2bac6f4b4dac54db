/* Segment header, record and sync-marker encodings (see format.h and
 * store/FORMAT.md). Every decode validates; nothing from disk is asserted.
 */
#include <string.h>
#include <xxhash.h>

#include <keel/assert.h>
#include <keel/error.h>
#include <keel/limits.h>

#include "format.h"

void store_fmt_seg_header_encode(const struct store_seg_header *h,
                                 uint8_t out[STORE_SEG_HEADER_BYTES])
{
    ASSERT(h != NULL);
    ASSERT(h->base_index >= 1);
    memset(out, 0, STORE_SEG_HEADER_BYTES);
    keel_put_le64(out + 0, STORE_SEG_MAGIC);
    keel_put_le32(out + 8, STORE_FMT_VERSION);
    keel_put_le32(out + 12, STORE_SEG_HEADER_BYTES);
    memcpy(out + 16, h->group, STORE_GROUP_ID_BYTES);
    keel_put_le64(out + 32, h->base_index);
    keel_put_le64(out + 40, h->first_index);
    keel_put_le64(out + 48, h->size_bytes);
    keel_put_le64(out + 56, h->salt);
    keel_put_le64(out + STORE_SEG_HEADER_SUM_OFF,
                  XXH3_64bits(out, STORE_SEG_HEADER_SUM_OFF));
}

/* The opening checks of every decoder here: at least need bytes (else
 * KEEL_ECORRUPT), starting with magic in its first magic_bytes (else
 * bad_magic: KEEL_ENOENT where no record or marker starts, which ends a
 * scan; KEEL_ECORRUPT for a segment header). */
static int check_head(const uint8_t *buf, size_t avail, size_t need,
                      uint64_t magic, unsigned magic_bytes, int bad_magic)
{
    ASSERT(buf != NULL || avail == 0);
    if (avail < need) {
        return KEEL_ECORRUPT;
    }
    if (keel_get_le(buf, magic_bytes) != magic) {
        return bad_magic;
    }
    return 0;
}

/* check_head, then the block's XXH3 (seeded with seed) over its first
 * sum_off bytes against the le64 stored there: a sealed fixed-size block
 * (a segment header, a marker). */
static int check_sealed(const uint8_t *buf, size_t avail, size_t need,
                        uint64_t magic, unsigned magic_bytes, int bad_magic,
                        size_t sum_off, uint64_t seed)
{
    ASSERT(sum_off + 8 <= need);
    int rv = check_head(buf, avail, need, magic, magic_bytes, bad_magic);
    if (rv == 0 && XXH3_64bits_withSeed(buf, sum_off, seed) !=
                       keel_get_le64(buf + sum_off)) {
        rv = KEEL_ECORRUPT;
    }
    return rv;
}

int store_fmt_seg_header_decode(const uint8_t *buf, size_t len,
                                struct store_seg_header *out)
{
    ASSERT(out != NULL);
    /* XXH3 seeded with 0 is the unseeded XXH3 the encoder writes. */
    int rv = check_sealed(buf, len, STORE_SEG_HEADER_BYTES, STORE_SEG_MAGIC, 8,
                          KEEL_ECORRUPT, STORE_SEG_HEADER_SUM_OFF, 0);
    if (rv != 0) {
        return rv;
    }
    out->version = keel_get_le32(buf + 8);
    if (out->version != STORE_FMT_VERSION) {
        return KEEL_EVERSION;
    }
    if (keel_get_le32(buf + 12) != STORE_SEG_HEADER_BYTES) {
        return KEEL_ECORRUPT;
    }
    memcpy(out->group, buf + 16, STORE_GROUP_ID_BYTES);
    out->base_index = keel_get_le64(buf + 32);
    out->first_index = keel_get_le64(buf + 40);
    out->size_bytes = keel_get_le64(buf + 48);
    out->salt = keel_get_le64(buf + 56);
    if (out->base_index == 0 || out->size_bytes < STORE_SEG_HEADER_BYTES ||
        out->size_bytes > STORE_SEGMENT_BYTES_MAX) {
        return KEEL_ECORRUPT;
    }
    return 0;
}

uint64_t store_fmt_rec_encode(uint8_t *out, const struct store_fmt_rec *r,
                              uint64_t salt)
{
    uint64_t total = store_fmt_rec_bytes(r->len);
    uint64_t sum;

    ASSERT(r->len <= STORE_RECORD_PAYLOAD_BYTES_MAX);
    ASSERT(r->index >= 1);
    keel_put_le32(out + 0, STORE_REC_MAGIC);
    keel_put_le32(out + 4, r->len);
    keel_put_le64(out + 8, r->index);
    keel_put_le64(out + 16, r->term);
    out[24] = r->type;
    out[25] = r->flags;
    memset(out + 26, 0, 6);
    keel_put_le64(out + 32, r->prev_checksum);
    if (r->len > 0) {
        memcpy(out + STORE_REC_HEADER_BYTES, r->payload, r->len);
    }
    /* Zero padding keeps the on-disk image deterministic. */
    memset(out + STORE_REC_HEADER_BYTES + r->len, 0,
           (size_t)(total - 8 - STORE_REC_HEADER_BYTES - r->len));
    sum = XXH3_64bits_withSeed(out, (size_t)(total - 8), salt);
    keel_put_le64(out + total - 8, sum);
    return sum;
}

int store_fmt_rec_decode(const uint8_t *buf, size_t avail, uint64_t salt,
                         struct store_fmt_rec *out)
{
    uint64_t total;
    uint32_t len;

    ASSERT(out != NULL);
    int rv = check_head(buf, avail, STORE_REC_OVERHEAD, STORE_REC_MAGIC, 4,
                        KEEL_ENOENT);
    if (rv != 0) {
        return rv;
    }
    len = keel_get_le32(buf + 4);
    if (len > STORE_RECORD_PAYLOAD_BYTES_MAX) {
        return KEEL_ECORRUPT;
    }
    total = store_fmt_rec_bytes(len);
    if (total > avail) {
        return KEEL_ECORRUPT;
    }
    out->checksum = keel_get_le64(buf + total - 8);
    if (XXH3_64bits_withSeed(buf, (size_t)(total - 8), salt) != out->checksum) {
        return KEEL_ECORRUPT;
    }
    out->len = len;
    out->index = keel_get_le64(buf + 8);
    out->term = keel_get_le64(buf + 16);
    out->type = buf[24];
    out->flags = buf[25];
    out->prev_checksum = keel_get_le64(buf + 32);
    out->payload = buf + STORE_REC_HEADER_BYTES;
    return 0;
}

void store_fmt_marker_encode(uint8_t out[STORE_MARKER_BYTES],
                             const struct store_fmt_marker *m, uint64_t salt)
{
    ASSERT(m != NULL);
    ASSERT(m->index >= 1);
    keel_put_le32(out + 0, STORE_MARKER_MAGIC);
    keel_put_le32(out + 4, 0);
    keel_put_le64(out + 8, m->index);
    keel_put_le64(out + 16, m->term);
    keel_put_le64(out + 24, m->rec_checksum);
    memcpy(out + 32, m->boot_id, STORE_BOOT_ID_BYTES);
    keel_put_le64(out + 48, XXH3_64bits_withSeed(
                                out, 48, salt ^ STORE_MARKER_SEED_TWEAK));
}

int store_fmt_marker_decode(const uint8_t *buf, size_t avail, uint64_t salt,
                            struct store_fmt_marker *out)
{
    ASSERT(out != NULL);
    int rv = check_sealed(buf, avail, STORE_MARKER_BYTES, STORE_MARKER_MAGIC, 4,
                          KEEL_ENOENT, 48, salt ^ STORE_MARKER_SEED_TWEAK);
    if (rv != 0) {
        return rv;
    }
    if (keel_get_le32(buf + 4) != 0) {
        return KEEL_ECORRUPT;
    }
    out->index = keel_get_le64(buf + 8);
    out->term = keel_get_le64(buf + 16);
    out->rec_checksum = keel_get_le64(buf + 24);
    memcpy(out->boot_id, buf + 32, STORE_BOOT_ID_BYTES);
    if (out->index == 0) {
        return KEEL_ECORRUPT;
    }
    return 0;
}
