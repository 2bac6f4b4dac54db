/* A growing little-endian byte writer and a bounded reader, one copy for
 * the state machines that write their entries and snapshots as plain
 * fields (the consumer entries and snapshot, srv_consumer_state.c; the
 * stream snapshot, srv_stream_sm_state.c): u8, u64 and length-prefixed
 * strings (a u64 length, then the bytes). Errors are sticky: a writer that
 * ran out of memory sets oom and writes nothing more, a reader that ran
 * past its end sets bad and reads zeros; the caller checks once at the
 * end. Header-only; growth is keel_reserve's (keel/grow.h). */
#ifndef KEEL_BYTEBUF_H
#define KEEL_BYTEBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/bytes.h"
#include "keel/grow.h"

struct keel_wbuf {
    uint8_t *p; /* owned: the caller frees it (or takes it) */
    size_t len, cap;
    bool oom;
};

struct keel_rbuf {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

static inline void keel_wbuf_put(struct keel_wbuf *w, const void *src, size_t n)
{
    ASSERT(w != NULL && (src != NULL || n == 0));
    if (w->oom || n == 0) {
        return;
    }
    if (w->len > SIZE_MAX - n ||
        keel_reserve(&w->p, &w->cap, w->len + n, 1, 256) != 0) {
        w->oom = true;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static inline void keel_wbuf_u8(struct keel_wbuf *w, uint8_t v)
{
    keel_wbuf_put(w, &v, 1);
}

static inline void keel_wbuf_u64(struct keel_wbuf *w, uint64_t v)
{
    uint8_t b[8];
    keel_put_le64(b, v);
    keel_wbuf_put(w, b, sizeof b);
}

/* s[0..n) after its length. */
static inline void keel_wbuf_str(struct keel_wbuf *w, const void *s, size_t n)
{
    keel_wbuf_u64(w, (uint64_t)n);
    keel_wbuf_put(w, s, n);
}

static inline uint64_t keel_rbuf_u64(struct keel_rbuf *r)
{
    uint64_t v;
    ASSERT(r != NULL && r->off <= r->len);
    if (r->bad || r->len - r->off < 8) {
        r->bad = true;
        return 0;
    }
    v = keel_get_le64(r->p + r->off);
    r->off += 8;
    return v;
}

static inline uint8_t keel_rbuf_u8(struct keel_rbuf *r)
{
    ASSERT(r != NULL && r->off <= r->len);
    if (r->bad || r->len - r->off < 1) {
        r->bad = true;
        return 0;
    }
    return r->p[r->off++];
}

/* A length-prefixed string: its bytes in the buffer (not NUL-terminated)
 * and *n their count; NULL (and *n 0) past the end. */
static inline const char *keel_rbuf_str(struct keel_rbuf *r, size_t *n)
{
    uint64_t len = keel_rbuf_u64(r);
    const char *s;

    ASSERT(n != NULL);
    *n = 0;
    if (r->bad || r->len - r->off < len) {
        r->bad = true;
        return NULL;
    }
    s = (const char *)r->p + r->off;
    r->off += (size_t)len;
    *n = (size_t)len;
    return s;
}

#endif
