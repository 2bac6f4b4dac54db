/* The msgpack subset of cluster frames. A frame is a 4-byte big-endian
 * body length followed by the body, a msgpack array [kind, group id,
 * payload]. Hand-written rather than msgpack-c's unpacker: frames need
 * only arrays, unsigned integers, str and bin, read in place without a
 * zone allocation per frame, and every length is checked against the
 * bytes that are really there (they come from the network).
 */
#include <string.h>

#include "keel/bytes.h"
#include "keel/error.h"
#include "srv_cluster.h"

uint8_t *srv_mp_put_array(uint8_t *p, uint32_t n)
{
    if (n < 16) {
        *p++ = (uint8_t)(0x90 | n);
        return p;
    }
    if (n <= 0xffff) {
        *p++ = 0xdc;
        return keel_put_be(p, n, 2);
    }
    *p++ = 0xdd;
    return keel_put_be(p, n, 4);
}

uint8_t *srv_mp_put_uint(uint8_t *p, uint64_t v)
{
    if (v < 128) {
        *p++ = (uint8_t)v;
        return p;
    }
    if (v <= 0xffffffffu) {
        *p++ = 0xce;
        return keel_put_be(p, v, 4);
    }
    *p++ = 0xcf;
    return keel_put_be(p, v, 8);
}

uint8_t *srv_mp_put_str(uint8_t *p, const void *s, size_t len)
{
    ASSERT(len <= 0xffffffffu);
    if (len < 32) {
        *p++ = (uint8_t)(0xa0 | len);
    } else if (len <= 0xff) {
        *p++ = 0xd9;
        *p++ = (uint8_t)len;
    } else {
        *p++ = 0xdb;
        p = keel_put_be(p, len, 4);
    }
    if (len > 0) { /* an empty string may come as NULL (UBSan) */
        memcpy(p, s, len);
    }
    return p + len;
}

uint8_t *srv_mp_put_bin_header(uint8_t *p, size_t len)
{
    ASSERT(len <= 0xffffffffu);
    *p++ = 0xc6;
    return keel_put_be(p, len, 4);
}

static int get_be(struct srv_mp_reader *r, unsigned bytes, uint64_t *v)
{
    if ((size_t)(r->end - r->p) < bytes) {
        return KEEL_EPROTO;
    }
    *v = keel_get_be(r->p, bytes);
    r->p += bytes;
    return 0;
}

/* A msgpack head that carries a length: the fix form ((tag & fix_mask) ==
 * fix, the length in the other bits) or a tag followed by a 1-, 2- or
 * 4-byte big-endian length (tags[i] for 1 << i bytes; 0: no such tag). */
struct mp_len_form {
    uint8_t fix_mask;
    uint8_t fix;
    uint8_t tags[3][2];
};

static const struct mp_len_form array_form = {
    0xf0, 0x90, {{0}, {0xdc}, {0xdd}}};
/* str and bin alike: the frame's group and payload may be either. */
static const struct mp_len_form bytes_form = {
    0xe0, 0xa0, {{0xd9, 0xc4}, {0xda, 0xc5}, {0xdb, 0xc6}}};

static int get_len(struct srv_mp_reader *r, const struct mp_len_form *f,
                   uint64_t *n)
{
    if (r->p >= r->end) {
        return KEEL_EPROTO;
    }
    uint8_t t = *r->p++;
    if ((t & f->fix_mask) == f->fix) {
        *n = t & (uint8_t)~f->fix_mask;
        return 0;
    }
    for (unsigned i = 0; t != 0 && i < 3; i++) {
        if (t == f->tags[i][0] || t == f->tags[i][1]) {
            return get_be(r, 1u << i, n);
        }
    }
    return KEEL_EPROTO;
}

int srv_mp_get_array(struct srv_mp_reader *r, uint32_t *n)
{
    uint64_t v = 0;
    int rv = get_len(r, &array_form, &v);

    if (rv == 0) {
        *n = (uint32_t)v;
    }
    return rv;
}

int srv_mp_get_uint(struct srv_mp_reader *r, uint64_t *v)
{
    if (r->p >= r->end) {
        return KEEL_EPROTO;
    }
    uint8_t t = *r->p++;
    switch (t) {
    case 0xcc:
        return get_be(r, 1, v);
    case 0xcd:
        return get_be(r, 2, v);
    case 0xce:
        return get_be(r, 4, v);
    case 0xcf:
        return get_be(r, 8, v);
    default:
        if (t < 0x80) {
            *v = t;
            return 0;
        }
        return KEEL_EPROTO;
    }
}

int srv_mp_get_bytes(struct srv_mp_reader *r, const uint8_t **s, size_t *len)
{
    uint64_t n = 0;
    int rv = get_len(r, &bytes_form, &n);

    if (rv != 0 || n > (uint64_t)(r->end - r->p)) {
        return KEEL_EPROTO;
    }
    *s = r->p;
    *len = (size_t)n;
    r->p += n;
    return 0;
}

int srv_cluster_frame_decode(const uint8_t *body, size_t len, unsigned *kind,
                             const uint8_t **group, size_t *group_len,
                             const uint8_t **payload, size_t *payload_len)
{
    struct srv_mp_reader r = {body, body + len};
    uint32_t n = 0;
    uint64_t k = 0;

    if (srv_mp_get_array(&r, &n) != 0 || n != 3 ||
        srv_mp_get_uint(&r, &k) != 0 || k == 0 || k > SRV_CLUSTER_KIND_MAX ||
        srv_mp_get_bytes(&r, group, group_len) != 0 ||
        *group_len > SRV_CLUSTER_GROUP_ID_BYTES ||
        srv_mp_get_bytes(&r, payload, payload_len) != 0 || r.p != r.end) {
        return KEEL_EPROTO;
    }
    *kind = (unsigned)k;
    return 0;
}

size_t srv_cluster_frame_header(uint8_t *hdr, unsigned kind,
                                const uint8_t *group, size_t group_len,
                                size_t payload_len)
{
    uint8_t *p = hdr + 4;

    ASSERT(kind > 0 && kind <= SRV_CLUSTER_KIND_MAX);
    ASSERT(group_len <= SRV_CLUSTER_GROUP_ID_BYTES);
    p = srv_mp_put_array(p, 3);
    p = srv_mp_put_uint(p, kind);
    *p++ = 0xc4; /* bin 8 */
    *p++ = (uint8_t)group_len;
    if (group_len > 0) {
        memcpy(p, group, group_len);
        p += group_len;
    }
    p = srv_mp_put_bin_header(p, payload_len);
    size_t body = (size_t)(p - (hdr + 4)) + payload_len;
    keel_put_be(hdr, body, 4);
    return (size_t)(p - hdr);
}
