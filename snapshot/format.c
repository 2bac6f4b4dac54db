/* The snapshot file header and whole-image validation (FORMAT.md). Pure:
 * no I/O, so the fuzz target drives it with any bytes.
 */
#include <string.h>

#include <xxhash.h>

#include <keel/assert.h>

#include "internal.h"

_Static_assert(SNAP_HEADER_BYTES == 96, "header layout is 96 bytes");
_Static_assert(sizeof(SNAP_MAGIC) == 8, "magic is 8 bytes with its NUL");

_Static_assert(SNAP_HEADER_BYTES == SNAP__FIXED_BYTES,
               "the header is the fixed block");

void snap__fixed_encode(const char magic[8], uint32_t version,
                        const uint8_t group[16],
                        const uint64_t w[SNAP__FIXED_WORDS],
                        uint8_t out[SNAP__FIXED_BYTES])
{
    ASSERT(magic != NULL && group != NULL && w != NULL);
    memcpy(out, magic, 8);
    keel_put_le32(out + 8, version);
    keel_put_le32(out + 12, SNAP__FIXED_BYTES);
    memcpy(out + 16, group, 16);
    for (unsigned i = 0; i < SNAP__FIXED_WORDS; i++) {
        keel_put_le64(out + 32 + 8 * i, w[i]);
    }
    keel_put_le64(out + 88, XXH3_64bits(out, 88));
}

enum snap__fixed_bad snap__fixed_decode(const uint8_t b[SNAP__FIXED_BYTES],
                                        const char magic[8], uint32_t version,
                                        uint8_t group[16],
                                        uint64_t *const w[SNAP__FIXED_WORDS])
{
    ASSERT(b != NULL && magic != NULL && group != NULL && w != NULL);
    if (memcmp(b, magic, 8) != 0) {
        return SNAP__FIXED_MAGIC;
    }
    if (keel_get_le64(b + 88) != XXH3_64bits(b, 88)) {
        return SNAP__FIXED_SUM;
    }
    if (keel_get_le32(b + 8) != version) {
        return SNAP__FIXED_VERSION;
    }
    if (keel_get_le32(b + 12) != SNAP__FIXED_BYTES) {
        return SNAP__FIXED_SIZE;
    }
    memcpy(group, b + 16, 16);
    for (unsigned i = 0; i < SNAP__FIXED_WORDS; i++) {
        *w[i] = keel_get_le64(b + 32 + 8 * i);
    }
    return SNAP__FIXED_OK;
}

/* Words 5 and 6 (bytes 72..87) are the header's 16 zero bytes. */
void snap_header_encode(const struct snap_header *h,
                        uint8_t out[SNAP_HEADER_BYTES])
{
    ASSERT(h != NULL);
    ASSERT(h->body_bytes <= SNAP_BODY_BYTES_MAX);
    const uint64_t w[SNAP__FIXED_WORDS] = {
        h->index, h->term, h->body_bytes, h->body_hash_low, h->body_hash_high,
        0,        0};
    snap__fixed_encode(SNAP_MAGIC, SNAP_VERSION, h->group, w, out);
}

int snap_header_decode(const uint8_t *buf, size_t len, struct snap_header *out,
                       char *errmsg)
{
    struct snap_header h;
    uint64_t zero[2];
    uint64_t *const w[SNAP__FIXED_WORDS] = {
        &h.index,          &h.term,  &h.body_bytes, &h.body_hash_low,
        &h.body_hash_high, &zero[0], &zero[1]};

    ASSERT(out != NULL);
    ASSERT(buf != NULL || len == 0);
    if (len < SNAP_HEADER_BYTES) {
        return keel_err(KEEL_ETRUNCATED, errmsg,
                        "snapshot header truncated (%zu of %u bytes)", len,
                        SNAP_HEADER_BYTES);
    }
    switch (snap__fixed_decode(buf, SNAP_MAGIC, SNAP_VERSION, h.group, w)) {
    case SNAP__FIXED_OK:
        break;
    case SNAP__FIXED_MAGIC:
        return keel_err(KEEL_ECORRUPT, errmsg, "not a snapshot file (magic)");
    case SNAP__FIXED_SUM:
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot header checksum mismatch");
    case SNAP__FIXED_VERSION:
        return keel_err(KEEL_EVERSION, errmsg,
                        "snapshot version %u unsupported (this build reads %u)",
                        keel_get_le32(buf + 8), SNAP_VERSION);
    case SNAP__FIXED_SIZE:
        return keel_err(KEEL_ECORRUPT, errmsg, "snapshot header size wrong");
    }
    if (zero[0] != 0 || zero[1] != 0) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot header reserved bytes not zero");
    }
    *out = h;
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
