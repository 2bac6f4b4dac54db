/* The wire format of Raft messages: one msgpack array per message.
 *
 *   [version, type, from, from_incarnation, to, to_incarnation, term, ...]
 *
 * followed by the type's fields (see codec.c). Decoding is strict: a frame
 * that is truncated, too large, wrongly typed, of an unknown version or type,
 * or followed by trailing bytes is rejected with an error; no input crashes
 * the decoder or makes it allocate more than a small multiple of its size.
 */
#ifndef KEEL_RAFT_CODEC_H
#define KEEL_RAFT_CODEC_H

#include <stddef.h>

#include "raft.h"

#define RAFT_CODEC_VERSION 1

/* Encode m into a new buffer (*buf, *len), freed by the caller with free().
 * For AppendEntries, m->append.entries must hold every payload (the driver
 * fills them from its store). Returns 0, KEEL_ENOMEM, or KEEL_EINVAL for a
 * message the decoder would reject (so nothing invalid is ever sent). */
int raft_msg_encode(const struct raft_msg *m, void **buf, size_t *len,
                    char *errmsg);

/* An AppendEntries in two parts, whose concatenation is exactly what
 * raft_msg_encode writes: the head (header and every field before the
 * entries, at most RAFT_APPEND_HEAD_BYTES_MAX bytes, into out) and the
 * entries (a new buffer, freed by the caller). The entries part depends
 * only on the entries, so a leader sending the same range to several
 * followers encodes it once (docs/bench.md, "Where a replicated publish
 * goes"). Same errors as raft_msg_encode. */
#define RAFT_APPEND_HEAD_BYTES_MAX 128
int raft_msg_encode_append_head(const struct raft_msg *m, uint8_t *out,
                                size_t *len, char *errmsg);
int raft_msg_encode_append_entries(const struct raft_msg *m, void **buf,
                                   size_t *len, char *errmsg);

/* Decode one frame. Entries go to entries[0..RAFT_APPEND_ENTRIES_MAX); their
 * payload pointers point into buf, so buf must outlive their use (one
 * raft_step). InstallSnapshot chunks point into buf likewise. Returns 0,
 * KEEL_ETOOBIG, KEEL_ETRUNCATED, KEEL_EPROTO (malformed), KEEL_EVERSION,
 * with errmsg saying what was wrong. */
int raft_msg_decode(const void *buf, size_t len, struct raft_msg *m,
                    struct raft_entry *entries, char *errmsg);

#endif
