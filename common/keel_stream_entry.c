/* keel_stream_entry: msgpack encoding of stream entries (a subset: arrays,
 * unsigned/signed integers, str and bin), written and read by hand so the
 * decoder can be exact about what it accepts. */
#include "keel_stream_entry.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/bytes.h"
#include "keel/error.h"

struct wbuf {
    uint8_t *p;
    size_t len;
};

static void put_be(struct wbuf *w, uint64_t v, unsigned n)
{
    keel_put_be(w->p + w->len, v, n);
    w->len += n;
}

static void put_u64(struct wbuf *w, uint64_t v)
{
    w->p[w->len++] = 0xcf;
    put_be(w, v, 8);
}

/* str (0xdb) or bin (0xc6) with a 32-bit length: one form per type keeps
 * the encoding canonical and simple. */
static void put_raw(struct wbuf *w, uint8_t tag, const void *b, size_t n)
{
    w->p[w->len++] = tag;
    put_be(w, n, 4);
    if (n > 0) {
        memcpy(w->p + w->len, b, n);
    }
    w->len += n;
}

static unsigned entry_fields(uint8_t kind)
{
    switch (kind) {
    case KEEL_STREAM_E_PUBLISH:
        return 4;
    case KEEL_STREAM_E_PURGE:
        return 3;
    case KEEL_STREAM_E_MIRROR:
        return 6;
    case KEEL_STREAM_E_SOURCE:
        return 7;
    case KEEL_STREAM_E_DELETE:
    case KEEL_STREAM_E_CONFIG:
    case KEEL_STREAM_E_TICK:
        return 1;
    default:
        return 0;
    }
}

int keel_stream_entry_encode(const struct keel_stream_entry *e, uint8_t **out,
                             size_t *len)
{
    unsigned nf = entry_fields(e->kind);
    *out = NULL;
    *len = 0;
    if (nf == 0 || e->ts_ns < 0 || e->subject_len > UINT32_MAX ||
        e->hdr_len > UINT32_MAX || e->data_len > UINT32_MAX ||
        e->source_len > UINT32_MAX) {
        return KEEL_EINVAL;
    }
    size_t cap = 2 + 4 * 9 + 3 * 5 + e->subject_len + e->hdr_len + e->data_len;
    if (e->kind == KEEL_STREAM_E_MIRROR || e->kind == KEEL_STREAM_E_SOURCE) {
        cap += 3 * 9 + 5 + e->source_len;
    }
    struct wbuf w = {malloc(cap), 0};
    if (w.p == NULL) {
        return KEEL_ENOMEM;
    }
    w.p[w.len++] = e->kind;
    w.p[w.len++] = (uint8_t)(0x90 | nf); /* fixarray */
    switch (e->kind) {
    case KEEL_STREAM_E_PUBLISH:
        put_u64(&w, (uint64_t)e->ts_ns);
        put_raw(&w, 0xdb, e->subject, e->subject_len);
        put_raw(&w, 0xc6, e->hdr, e->hdr_len);
        put_raw(&w, 0xc6, e->data, e->data_len);
        break;
    case KEEL_STREAM_E_PURGE:
        put_raw(&w, 0xdb, e->subject, e->subject_len);
        put_u64(&w, e->seq);
        put_u64(&w, e->keep);
        break;
    case KEEL_STREAM_E_SOURCE:
        put_raw(&w, 0xdb, e->source, e->source_len);
        /* then MIRROR's fields */
        /* fall through */
    case KEEL_STREAM_E_MIRROR:
        put_u64(&w, e->seq);
        put_u64(&w, (uint64_t)e->ts_ns);
        put_raw(&w, 0xdb, e->subject, e->subject_len);
        put_raw(&w, 0xc6, e->hdr, e->hdr_len);
        put_raw(&w, 0xc6, e->data, e->data_len);
        put_u64(&w, e->lost);
        break;
    case KEEL_STREAM_E_DELETE:
        put_u64(&w, e->seq);
        break;
    case KEEL_STREAM_E_CONFIG:
        put_raw(&w, 0xdb, e->subject, e->subject_len);
        break;
    default: /* KEEL_STREAM_E_TICK (entry_fields rejected the rest) */
        put_u64(&w, (uint64_t)e->ts_ns);
        break;
    }
    ASSERT(w.len <= cap);
    *out = w.p;
    *len = w.len;
    return 0;
}

struct rbuf {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static uint64_t get_be(struct rbuf *r, unsigned n)
{
    uint64_t v;
    if (r->bad || r->len - r->off < n) {
        r->bad = true;
        return 0;
    }
    v = keel_get_be(r->p + r->off, n);
    r->off += n;
    return v;
}

/* Any msgpack unsigned int form (positive fixint, uint8..64). */
static uint64_t get_uint(struct rbuf *r)
{
    uint64_t tag = get_be(r, 1);
    if (r->bad) {
        return 0;
    }
    if (tag <= 0x7f) {
        return tag;
    }
    switch (tag) {
    case 0xcc:
        return get_be(r, 1);
    case 0xcd:
        return get_be(r, 2);
    case 0xce:
        return get_be(r, 4);
    case 0xcf:
        return get_be(r, 8);
    default:
        r->bad = true;
        return 0;
    }
}

/* str (want_str) or bin of any length form. */
static const uint8_t *get_raw(struct rbuf *r, bool want_str, size_t *n)
{
    uint64_t tag = get_be(r, 1);
    uint64_t len = 0;
    *n = 0;
    if (r->bad) {
        return NULL;
    }
    if (want_str && tag >= 0xa0 && tag <= 0xbf) {
        len = tag & 0x1f;
    } else if (tag == (want_str ? 0xd9u : 0xc4u)) {
        len = get_be(r, 1);
    } else if (tag == (want_str ? 0xdau : 0xc5u)) {
        len = get_be(r, 2);
    } else if (tag == (want_str ? 0xdbu : 0xc6u)) {
        len = get_be(r, 4);
    } else {
        r->bad = true;
    }
    if (r->bad || r->len - r->off < len) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *b = r->p + r->off;
    r->off += len;
    *n = (size_t)len;
    return b;
}

static void decode_fields(struct rbuf *r, struct keel_stream_entry *e)
{
    uint64_t u;
    switch (e->kind) {
    case KEEL_STREAM_E_PUBLISH:
        u = get_uint(r);
        e->ts_ns = (int64_t)u;
        if (u > INT64_MAX) {
            r->bad = true;
        }
        e->subject = (const char *)get_raw(r, true, &e->subject_len);
        e->hdr = get_raw(r, false, &e->hdr_len);
        e->data = get_raw(r, false, &e->data_len);
        /* No leader proposes a message without a subject, and a snapshot
         * could not hold one (fuzz_stream_entry found this). */
        if (e->subject_len == 0) {
            r->bad = true;
        }
        break;
    case KEEL_STREAM_E_PURGE:
        e->subject = (const char *)get_raw(r, true, &e->subject_len);
        e->seq = get_uint(r);
        e->keep = get_uint(r);
        break;
    case KEEL_STREAM_E_SOURCE:
        e->source = (const char *)get_raw(r, true, &e->source_len);
        if (e->source_len == 0) {
            r->bad = true; /* a source always names its origin */
        }
        /* then MIRROR's fields */
        /* fall through */
    case KEEL_STREAM_E_MIRROR:
        e->seq = get_uint(r);
        u = get_uint(r);
        e->ts_ns = (int64_t)u;
        e->subject = (const char *)get_raw(r, true, &e->subject_len);
        e->hdr = get_raw(r, false, &e->hdr_len);
        e->data = get_raw(r, false, &e->data_len);
        e->lost = get_uint(r);
        /* Origin seqs start at 1 and stay far below UINT64_MAX (seq + 1
         * never wraps); a position-only entry carries no body. */
        if (u > INT64_MAX || e->seq == 0 || e->seq > INT64_MAX ||
            (e->subject_len == 0 && e->hdr_len + e->data_len > 0)) {
            r->bad = true;
        }
        break;
    case KEEL_STREAM_E_DELETE:
        e->seq = get_uint(r);
        break;
    case KEEL_STREAM_E_CONFIG:
        e->subject = (const char *)get_raw(r, true, &e->subject_len);
        break;
    default:
        u = get_uint(r);
        e->ts_ns = (int64_t)u;
        if (u > INT64_MAX) {
            r->bad = true;
        }
        break;
    }
}

int keel_stream_entry_decode(const uint8_t *buf, size_t len,
                             struct keel_stream_entry *e, char *errmsg)
{
    struct rbuf r = {buf, len, 0, false};
    memset(e, 0, sizeof *e);
    if (len < 2) {
        return keel_err(KEEL_ECORRUPT, errmsg, "stream entry of %zu bytes",
                        len);
    }
    e->kind = buf[0];
    unsigned nf = entry_fields(e->kind);
    if (nf == 0) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "entry kind 0x%02x is not a "
                        "stream kind",
                        e->kind);
    }
    r.off = 1;
    uint64_t tag = get_be(&r, 1);
    if (tag != (0x90u | nf)) {
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "stream entry kind 0x%02x: "
                        "not an array of %u",
                        e->kind, nf);
    }
    decode_fields(&r, e);
    if (r.bad || r.off != len) {
        memset(e, 0, sizeof *e);
        return keel_err(KEEL_ECORRUPT, errmsg,
                        "stream entry kind 0x%02x: "
                        "malformed at byte %zu of %zu",
                        buf[0], r.off, len);
    }
    return 0;
}
