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
    /* A mirrored message, stored under the origin's seq and timestamp
     * (docs/decisions/0032-mirrors-pull-into-the-log.md): [origin_seq,
     * ts_ns, subject, hdr, data, lost]. An empty subject (hdr and data
     * empty too) stores nothing: the mirror's position moves to
     * origin_seq. lost counts origin seqs before origin_seq the origin
     * dropped before the mirror read them. */
    KEEL_STREAM_E_MIRROR = 0x06,
    /* A message of one of the stream's `sources`, stored under the
     * stream's own next seq like a publish
     * (docs/decisions/0035-sources-share-the-mirror-pump.md): [source,
     * origin_seq, ts_ns, subject, hdr, data, lost], MIRROR's fields after
     * the source's (origin stream's) name. ts_ns is the leader's clock, as
     * for a publish. An empty subject stores nothing: the source's
     * position moves to origin_seq. */
    KEEL_STREAM_E_SOURCE = 0x07,
};

struct keel_stream_entry {
    uint8_t kind;
    int64_t ts_ns;       /* PUBLISH, TICK, MIRROR, SOURCE */
    const char *subject; /* PUBLISH, MIRROR, SOURCE subject; PURGE filter (""
                            none); CONFIG json */
    size_t subject_len;
    const uint8_t *hdr; /* PUBLISH header block (len 0: none) */
    size_t hdr_len;
    const uint8_t *data; /* PUBLISH payload */
    size_t data_len;
    uint64_t seq;       /* PURGE up-to seq (0 none); DELETE seq; MIRROR, SOURCE
                           origin seq */
    uint64_t keep;      /* PURGE keep (0 none) */
    uint64_t lost;      /* MIRROR, SOURCE */
    const char *source; /* SOURCE: the origin stream's name */
    size_t source_len;
};

/* Encode e into a new malloc'ed buffer *out of *len bytes. Returns 0,
 * KEEL_EINVAL (unknown kind, negative ts) or KEEL_ENOMEM. */
KEEL_MUST_USE int keel_stream_entry_encode(const struct keel_stream_entry *e,
                                           uint8_t **out, size_t *len);

/* Decode a stream-kind entry (0x01..0x07). Returns 0 or KEEL_ECORRUPT
 * (malformed; errmsg says where) or KEEL_EINVAL (kind not a stream kind). */
KEEL_MUST_USE int keel_stream_entry_decode(const uint8_t *buf, size_t len,
                                           struct keel_stream_entry *e,
                                           char *errmsg);

#endif
