/* Integers in byte buffers, one copy for every module: the
 * little-endian fields of Keel's own formats (store/FORMAT.md,
 * snapshot/FORMAT.md, the quarantine and snapshot envelopes) and the
 * big-endian lengths of msgpack and cluster frames, decimal text for
 * protocol lines. Header-only and pure
 * (shifts and byte stores, no libc), so raft/ may use it too. The caller
 * checks that n bytes are there: n is 1 to 8. */
#ifndef KEEL_BYTES_H
#define KEEL_BYTES_H

#include <stdint.h>

#include "keel/assert.h"

/* Write the low n bytes of v at p, least significant first. */
static inline void keel_put_le(uint8_t *p, uint64_t v, unsigned n)
{
    ASSERT(n >= 1);
    ASSERT(n <= 8);
    for (unsigned i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* Read n bytes at p, least significant first. */
static inline uint64_t keel_get_le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    ASSERT(n >= 1);
    ASSERT(n <= 8);
    for (unsigned i = 0; i < n; i++) {
        v |= (uint64_t)p[i] << (8 * i);
    }
    return v;
}

/* Write the low n bytes of v at p, most significant first (network order,
 * as msgpack wants it). Returns p + n. */
static inline uint8_t *keel_put_be(uint8_t *p, uint64_t v, unsigned n)
{
    ASSERT(n >= 1);
    ASSERT(n <= 8);
    for (unsigned i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    }
    return p + n;
}

/* Read n bytes at p, most significant first. */
static inline uint64_t keel_get_be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    ASSERT(n >= 1);
    ASSERT(n <= 8);
    for (unsigned i = 0; i < n; i++) {
        v = (v << 8) | p[i];
    }
    return v;
}

static inline void keel_put_le64(uint8_t *p, uint64_t v)
{
    keel_put_le(p, v, 8);
}

static inline void keel_put_le32(uint8_t *p, uint32_t v)
{
    keel_put_le(p, v, 4);
}

static inline uint64_t keel_get_le64(const uint8_t *p)
{
    return keel_get_le(p, 8);
}

static inline uint32_t keel_get_le32(const uint8_t *p)
{
    return (uint32_t)keel_get_le(p, 4);
}

/* Write v in decimal ASCII at p: at most KEEL_DEC_U64_BYTES bytes, no NUL.
 * Returns the end. For hot protocol lines, where snprintf cost more than
 * the rest of the line. */
#define KEEL_DEC_U64_BYTES 20
static inline char *keel_put_dec(char *p, uint64_t v)
{
    char tmp[KEEL_DEC_U64_BYTES];
    unsigned n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    while (n > 0) {
        *p++ = tmp[--n];
    }
    return p;
}

#endif
