/* keel_stream_entry: the stream group's entry codec. An entry payload is a
 * kind byte followed by one msgpack array whose shape the kind fixes
 * (docs/design.md §6). The decoder is strict: exact array length, exact types,
 * lengths within the payload, no trailing bytes; it never reads past the
 * buffer and never asserts on input (it is fuzzed: fuzz_stream_entry).
 * Decoded strings and byte fields point into the payload. Pure. */
#ifndef KEEL_STREAM_ENTRY_H
#define KEEL_STREAM_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"

enum keel_stream_entry_kind {
    KEEL_STREAM_E_PUBLISH = 0x01, /* [ts_ns, subject, hdr, data] */
    KEEL_STREAM_E_PURGE = 0x02,   /* [filter, seq, keep] */
    KEEL_STREAM_E_DELETE = 0x03,  /* [seq] */
    KEEL_STREAM_E_CONFIG = 0x04,  /* [config json] */
    KEEL_STREAM_E_TICK = 0x05,    /* [ts_ns] */
};

struct keel_stream_entry {
    uint8_t kind;
    int64_t ts_ns;       /* PUBLISH, TICK */
    const char *subject; /* PUBLISH subject; PURGE filter ("" none);
                            CONFIG json */
    size_t subject_len;
    const uint8_t *hdr; /* PUBLISH header block (len 0: none) */
    size_t hdr_len;
    const uint8_t *data; /* PUBLISH payload */
    size_t data_len;
    uint64_t seq;  /* PURGE up-to seq (0 none); DELETE seq */
    uint64_t keep; /* PURGE keep (0 none) */
};

/* Encode e into a new malloc'ed buffer *out of *len bytes. Returns 0,
 * KEEL_EINVAL (unknown kind, negative ts) or KEEL_ENOMEM. */
KEEL_MUST_USE int keel_stream_entry_encode(const struct keel_stream_entry *e,
                                           uint8_t **out, size_t *len);

/* Decode a stream-kind entry (0x01..0x05). Returns 0 or KEEL_ECORRUPT
 * (malformed; errmsg says where) or KEEL_EINVAL (kind not a stream kind). */
KEEL_MUST_USE int keel_stream_entry_decode(const uint8_t *buf, size_t len,
                                           struct keel_stream_entry *e,
                                           char *errmsg);

#endif
