/* The snapshot file header and whole-image validation (FORMAT.md). Pure:
 * no I/O, so the fuzz target drives it with any bytes.
 */
#include <string.h>

#include <xxhash.h>

#include <keel/assert.h>

#include "internal.h"

_Static_assert(SNAP_HEADER_BYTES == 96, "header layout is 96 bytes");
_Static_assert(sizeof(SNAP_MAGIC) == 8, "magic is 8 bytes with its NUL");

void snap_put64(uint8_t *p, uint64_t v)
{
    ASSERT(p != NULL);
    for (unsigned i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
    ASSERT(p[0] == (uint8_t)v);
}

uint64_t snap_get64(const uint8_t *p)
{
    uint64_t v = 0;

    ASSERT(p != NULL);
    for (unsigned i = 0; i < 8; i++) {
        v |= (uint64_t)p[i] << (8 * i);
    }
    ASSERT((uint8_t)v == p[0]);
    return v;
}

void snap_put32(uint8_t *p, uint32_t v)
{
    ASSERT(p != NULL);
    for (unsigned i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
    ASSERT(p[0] == (uint8_t)v);
}

uint32_t snap_get32(const uint8_t *p)
{
    uint32_t v = 0;

    ASSERT(p != NULL);
    for (unsigned i = 0; i < 4; i++) {
        v |= (uint32_t)p[i] << (8 * i);
    }
    ASSERT((uint8_t)v == p[0]);
    return v;
}

void snap_header_encode(const struct snap_header *h,
                        uint8_t out[SNAP_HEADER_BYTES])
{
    ASSERT(h != NULL);
    ASSERT(h->body_bytes <= SNAP_BODY_BYTES_MAX);
    memset(out, 0, SNAP_HEADER_BYTES);
    memcpy(out, SNAP_MAGIC, 8);
    snap_put32(out + 8, SNAP_VERSION);
    snap_put32(out + 12, SNAP_HEADER_BYTES);
    memcpy(out + 16, h->group, 16);
    snap_put64(out + 32, h->index);
    snap_put64(out + 40, h->term);
    snap_put64(out + 48, h->body_bytes);
    snap_put64(out + 56, h->body_hash_low);
    snap_put64(out + 64, h->body_hash_high);
    snap_put64(out + 88, XXH3_64bits(out, 88));
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
    if (snap_get64(buf + 88) != XXH3_64bits(buf, 88)) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "snapshot header checksum mismatch");
    }
    if (snap_get32(buf + 8) != SNAP_VERSION) {
        return keel_err(KEEL_EVERSION, errmsg,
                        "snapshot version %u unsupported (this build reads %u)",
                        snap_get32(buf + 8), SNAP_VERSION);
    }
    if (snap_get32(buf + 12) != SNAP_HEADER_BYTES) {
        return keel_err(KEEL_ECORRUPT, errmsg, "snapshot header size wrong");
    }
    for (unsigned i = 72; i < 88; i++) {
        if (buf[i] != 0) {
            return keel_err(KEEL_ECORRUPT, errmsg,
                            "snapshot header reserved bytes not zero");
        }
    }
    memcpy(out->group, buf + 16, 16);
    out->index = snap_get64(buf + 32);
    out->term = snap_get64(buf + 40);
    out->body_bytes = snap_get64(buf + 48);
    out->body_hash_low = snap_get64(buf + 56);
    out->body_hash_high = snap_get64(buf + 64);
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
    snap_put32(frame, SNAP_FRAME_MAGIC);
    snap_put32(frame + 4, n);
    snap_put64(frame + 8, data_off);
    snap_put64(frame + 16, total);
    snap_put64(frame + 24, frame_sum(frame, n));
}

int snap_frame_check(const uint8_t *frame, size_t len, struct snap_frame *out,
                     char *errmsg)
{
    ASSERT(out != NULL);
    ASSERT(frame != NULL || len == 0);
    if (len < SNAP_FRAME_HEADER_BYTES || len > SNAP_FRAME_BYTES ||
        snap_get32(frame) != SNAP_FRAME_MAGIC) {
        return keel_err(KEEL_ECORRUPT, errmsg, "transfer frame malformed");
    }
    out->len = snap_get32(frame + 4);
    out->data_off = snap_get64(frame + 8);
    out->total = snap_get64(frame + 16);
    if (out->len != len - SNAP_FRAME_HEADER_BYTES ||
        snap_get64(frame + 24) != frame_sum(frame, out->len)) {
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
