/* The snapshot file header and whole-image validation (FORMAT.md). Pure:
 * no I/O, so the fuzz target drives it with any bytes.
 */
#include <string.h>

#include <xxhash.h>

#include <keel/assert.h>

#include "internal.h"

_Static_assert(SNAP_HEADER_BYTES == 96, "header layout is 96 bytes");
_Static_assert(sizeof(SNAP_MAGIC) == 8, "magic is 8 bytes with its NUL");

void snap_header_encode(const struct snap_header *h,
                        uint8_t out[SNAP_HEADER_BYTES])
{
    ASSERT(h != NULL);
    ASSERT(h->body_bytes <= SNAP_BODY_BYTES_MAX);
    memset(out, 0, SNAP_HEADER_BYTES);
    memcpy(out, SNAP_MAGIC, 8);
    keel_put_le32(out + 8, SNAP_VERSION);
    keel_put_le32(out + 12, SNAP_HEADER_BYTES);
    memcpy(out + 16, h->group, 16);
    keel_put_le64(out + 32, h->index);
    keel_put_le64(out + 40, h->term);
    keel_put_le64(out + 48, h->body_bytes);
    keel_put_le64(out + 56, h->body_hash_low);
    keel_put_le64(out + 64, h->body_hash_high);
    keel_put_le64(out + 88, XXH3_64bits(out, 88));
}

int snap_header_decode(const uint8_t *buf, size_t len, struct snap_header *out,
                       char *errmsg)
{
    ASSERT(out != NULL);
    ASSERT(buf != NULL || len == 0);
    if (len < SNAP_HEADER_BYTES) {
        return keel_err(KEEL_ETRUNCATED, errmsg,
                        "snapshot header truncated (%zu of %u bytes)", len,
                        SNAP_HEADER_BYTES);
    }
    if (memcmp(buf, SNAP_MAGIC, 8) != 0) {
        return keel_err(KEEL_ECORRUPT, errmsg, "not a snapshot file (magic)");
    }
    if (keel_get_le64(buf + 88) != XXH3_64bits(buf, 88)) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot header checksum mismatch");
    }
    if (keel_get_le32(buf + 8) != SNAP_VERSION) {
        return keel_err(KEEL_EVERSION, errmsg,
                        "snapshot version %u unsupported (this build reads %u)",
                        keel_get_le32(buf + 8), SNAP_VERSION);
    }
    if (keel_get_le32(buf + 12) != SNAP_HEADER_BYTES) {
        return keel_err(KEEL_ECORRUPT, errmsg, "snapshot header size wrong");
    }
    for (unsigned i = 72; i < 88; i++) {
        if (buf[i] != 0) {
            return keel_err(KEEL_ECORRUPT, errmsg,
                            "snapshot header reserved bytes not zero");
        }
    }
    memcpy(out->group, buf + 16, 16);
    out->index = keel_get_le64(buf + 32);
    out->term = keel_get_le64(buf + 40);
    out->body_bytes = keel_get_le64(buf + 48);
    out->body_hash_low = keel_get_le64(buf + 56);
    out->body_hash_high = keel_get_le64(buf + 64);
    if (out->body_bytes > SNAP_BODY_BYTES_MAX) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot body length %llu over the maximum",
                        (unsigned long long)out->body_bytes);
    }
    if (out->index == 0) {
        return keel_err(KEEL_ECORRUPT, errmsg, "snapshot at index 0");
    }
    return 0;
}

int snap_check_expect(const struct snap_header *h, const struct snap_expect *e,
                      char *errmsg)
{
    ASSERT(h != NULL);
    ASSERT(e != NULL);
    if (memcmp(h->group, e->group, 16) != 0) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot belongs to another group");
    }
    if (h->index != e->index || h->term != e->term) {
        return keel_err(
            KEEL_ECORRUPT, errmsg,
            "snapshot is (%llu, t%llu) but LMDB names "
            "(%llu, t%llu)",
            (unsigned long long)h->index, (unsigned long long)h->term,
            (unsigned long long)e->index, (unsigned long long)e->term);
    }
    return 0;
}

int snap_validate(const uint8_t *buf, size_t len, const struct snap_expect *exp,
                  struct snap_header *hdr, const uint8_t **body,
                  size_t *body_len, char *errmsg)
{
    int rv;

    ASSERT(hdr != NULL);
    ASSERT(body != NULL && body_len != NULL);
    rv = snap_header_decode(buf, len, hdr, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (hdr->body_bytes != len - SNAP_HEADER_BYTES) {
        return keel_err(
            len - SNAP_HEADER_BYTES < hdr->body_bytes ? KEEL_ETRUNCATED
                                                      : KEEL_ECORRUPT,
            errmsg, "snapshot body is %zu bytes, header says %llu",
            len - SNAP_HEADER_BYTES, (unsigned long long)hdr->body_bytes);
    }
    XXH128_hash_t hh =
        XXH3_128bits(buf + SNAP_HEADER_BYTES, (size_t)hdr->body_bytes);
    if (hh.low64 != hdr->body_hash_low || hh.high64 != hdr->body_hash_high) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot body checksum mismatch");
    }
    if (exp != NULL) {
        rv = snap_check_expect(hdr, exp, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    *body = buf + SNAP_HEADER_BYTES;
    *body_len = (size_t)hdr->body_bytes;
    return 0;
}

#define SNAP_FRAME_MAGIC 0x5246534bu /* "KSFR" */

/* XXH3-64 of the data seeded with XXH3-64 of header bytes 0..23: covers
 * both without a streaming state. */
static uint64_t frame_sum(const uint8_t *frame, size_t n)
{
    ASSERT(frame != NULL);
    ASSERT(n <= SNAP_CHUNK_DATA_BYTES);
    return XXH3_64bits_withSeed(frame + SNAP_FRAME_HEADER_BYTES, n,
                                XXH3_64bits(frame, 24));
}

void snap_frame_seal(uint8_t *frame, uint32_t n, uint64_t data_off,
                     uint64_t total)
{
    ASSERT(frame != NULL);
    ASSERT(n <= SNAP_CHUNK_DATA_BYTES && data_off + n <= total);
    keel_put_le32(frame, SNAP_FRAME_MAGIC);
    keel_put_le32(frame + 4, n);
    keel_put_le64(frame + 8, data_off);
    keel_put_le64(frame + 16, total);
    keel_put_le64(frame + 24, frame_sum(frame, n));
}

int snap_frame_check(const uint8_t *frame, size_t len, struct snap_frame *out,
                     char *errmsg)
{
    ASSERT(out != NULL);
    ASSERT(frame != NULL || len == 0);
    if (len < SNAP_FRAME_HEADER_BYTES || len > SNAP_FRAME_BYTES ||
        keel_get_le32(frame) != SNAP_FRAME_MAGIC) {
        return keel_err(KEEL_ECORRUPT, errmsg, "transfer frame malformed");
    }
    out->len = keel_get_le32(frame + 4);
    out->data_off = keel_get_le64(frame + 8);
    out->total = keel_get_le64(frame + 16);
    if (out->len != len - SNAP_FRAME_HEADER_BYTES ||
        keel_get_le64(frame + 24) != frame_sum(frame, out->len)) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "transfer frame failed its checksum: drop it, the "
                        "leader resends it");
    }
    if (out->total > SNAP_INSTALL_BYTES_MAX || out->len == 0 ||
        out->data_off > out->total || out->len > out->total - out->data_off) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "transfer frame names data outside the stream");
    }
    return 0;
}
