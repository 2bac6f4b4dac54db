/* srv_msg_ttl: per-message TTL as nats-server 2.11 reads it (the Nats-TTL
 * header) and the subject delete marker it leaves behind
 * (docs/decisions/0034-per-message-ttl-in-the-state-machine.md). Pure: no
 * I/O, no clock. */
#ifndef KEEL_SRV_MSG_TTL_H
#define KEEL_SRV_MSG_TTL_H

#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"

/* A message's TTL that says "keep it forever, whatever max_age says". */
#define SRV_MSG_TTL_NEVER (-1)

/* Header names and the marker's reason (nats-server 2.11's). */
#define SRV_MSG_TTL_HDR "Nats-TTL"
#define SRV_MSG_MARKER_REASON_HDR "Nats-Marker-Reason"

/* The shortest TTL and marker TTL nats-server takes. */
#define SRV_MSG_TTL_NS_MIN 1000000000LL

/* A Nats-TTL value: "never" (any case) is SRV_MSG_TTL_NEVER; a Go duration
 * ("5s", "1m30s", "1.5h") of at least 1s is its whole seconds; otherwise
 * a non-negative integer of seconds (0: no TTL of its own). Returns 0 with
 * *secs, or KEEL_EINVAL (answered with 10165 "invalid per-message TTL"). */
KEEL_MUST_USE int srv_msg_ttl_parse(const char *v, size_t len, int64_t *secs);

/* The Nats-TTL of a header block (hdr may be NULL): *secs 0 when absent,
 * empty or the block is malformed (other checks answer that), else as
 * srv_msg_ttl_parse. */
KEEL_MUST_USE int srv_msg_ttl_of(const char *hdr, size_t len, int64_t *secs);

/* nats-server 2.11 raises a TTL under the marker TTL to it (unless
 * max_msgs_per_subject is 1) and stores the raised value: for a stream
 * with allow_msg_ttl and marker TTL marker_secs (> 0), when hdr's
 * Nats-TTL is a TTL under it, *out (malloc'ed, *out_len bytes) is hdr with
 * that header replaced by "Nats-TTL: <marker_secs>" at the end of the
 * block. *out NULL when nothing changes. 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_msg_ttl_raise(const char *hdr, size_t len,
                                    int64_t marker_secs, char **out,
                                    size_t *out_len);

/* The header block of a subject delete marker whose own TTL is ttl_secs
 * (> 0): "NATS/1.0", Nats-Marker-Reason: MaxAge, Nats-TTL as Go formats a
 * duration ("30s", "1m0s", "1h0m0s"), Nats-Rollup: sub. Writes at most n
 * bytes (n >= SRV_MSG_MARKER_HDR_MAX fits any) and returns its length. */
#define SRV_MSG_MARKER_HDR_MAX 128
size_t srv_msg_marker_hdr(int64_t ttl_secs, char *buf, size_t n);

#endif
