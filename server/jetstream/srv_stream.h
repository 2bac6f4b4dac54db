/* srv_stream: one JetStream stream on this node (docs/design.md §6): its
 * config, its Raft group (a struct replica), its deterministic state machine
 * (srv_stream_sm) and message reads from the store.
 *
 * Bodies stay in the Raft log: the state machine maps each stream seq to
 * the Raft index of the entry that stored it, and a read is a
 * checksum-verified store_read of that index.
 *
 * Everything runs on the loop thread. The interface below is what
 * js-consumers builds on (see also srv_js.h, struct srv_consumer_ops).
 */
#ifndef KEEL_SRV_STREAM_H
#define KEEL_SRV_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "srv_js_config.h"

struct srv_js;
struct srv_stream;

/* Entry kinds (the first byte of every stream-group entry payload).
 * 0x01..0x3F belong to the stream, 0x40..0x7F to consumers: the stream's
 * apply hands those to srv_consumer_ops.apply untouched. */
#define SRV_STREAM_KIND_STREAM_MIN 0x01
#define SRV_STREAM_KIND_STREAM_MAX 0x3F
#define SRV_STREAM_KIND_CONSUMER_MIN 0x40
#define SRV_STREAM_KIND_CONSUMER_MAX 0x7F

/* Counters of a stream (STREAM.INFO "state"). */
struct srv_stream_state {
    uint64_t msgs;
    uint64_t bytes;
    uint64_t first_seq;
    int64_t first_ts_ns; /* 0 when empty */
    uint64_t last_seq;
    int64_t last_ts_ns;
    uint64_t num_deleted;  /* interior deletes between first and last */
    uint64_t num_subjects; /* distinct subjects stored */
};

/* A loaded message. Pointers point into one allocation owned by the
 * struct; free with srv_stream_msg_free. */
struct srv_stream_msg {
    uint64_t seq;
    int64_t ts_ns; /* leader time stamped into the entry */
    const char *subject;
    size_t subject_len;
    const uint8_t *hdr; /* NATS/1.0 header block, NULL when none */
    size_t hdr_len;
    const uint8_t *data;
    size_t data_len;
    void *buf_; /* private */
};

/* The stream's name and config (valid until the stream is deleted or
 * updated; do not keep the pointer across loop iterations). */
const char *srv_stream_name(const struct srv_stream *st);
const struct srv_stream_config *
srv_stream_config_get(const struct srv_stream *st);

/* The engine the stream belongs to. */
struct srv_js *srv_stream_js(const struct srv_stream *st);

/* Current counters (applied state). */
void srv_stream_state(const struct srv_stream *st,
                      struct srv_stream_state *out);

/* True while this node is the leader of the stream's group (always true
 * for a started group of one). Consumers propose only on the leader. */
bool srv_stream_is_leader(const struct srv_stream *st);
/* The stream's group lost records it may have acked (docs/design.md §4.7 R3):
 * its applied state is not the stream's, so nothing is served from it until a
 * leader caught it up (or the operator ran `keel cluster recover`). */
bool srv_stream_amnesiac(const struct srv_stream *st);
/* Does "no such message" from this node's state mean the stream has no
 * message seq (0: a lookup by subject)? True for a seq the applied state
 * passed (deleted or purged) and on a replica whose state holds every
 * acknowledged entry (replica_info.complete). False on a replica that is
 * faulty, amnesiac, not the leader or not caught up: it answers a
 * retryable error instead, never "not found" for an acked message. */
bool srv_stream_absent_is_final(const struct srv_stream *st, uint64_t seq);

/* The stream group's leader name: self's name when this node leads, NULL
 * while unknown. Known on every node, also those not hosting the group
 * (leader announcements). */
const char *srv_stream_leader_name(const struct srv_stream *st);

/* True when this node is one of the stream's peers (hosts its group). A
 * node that is not placed knows the config but has no replica. Always
 * true when not clustered. */
bool srv_stream_is_placed_here(const struct srv_stream *st);

/* One peer of a stream group (stream info "cluster" block). */
#define SRV_STREAM_PEER_NAME_BYTES 128
struct srv_stream_peer {
    char name[SRV_STREAM_PEER_NAME_BYTES];
    bool leader;        /* this peer leads the group */
    bool current;       /* caught up with the leader's last index */
    bool offline;       /* no link to it now */
    uint64_t active_ns; /* since the leader last heard from it; 0 unknown */
    uint64_t lag;       /* entries behind the leader's last index */
};

/* The stream's peers, placement order, up to max: fills out[0..*n).
 * current/active/lag are known only on the leader (elsewhere current is
 * false, lag 0, active_ns 0). Returns 0 (also for a stream that is not
 * clustered: one peer, this node, the leader). */
int srv_stream_peers(const struct srv_stream *st, struct srv_stream_peer *out,
                     size_t max, size_t *n);

/* Load message seq from the store (checksum-verified). Returns 0,
 * KEEL_ENOENT (never stored, deleted, purged or expired), KEEL_EFAULTY /
 * KEEL_ECORRUPT (the store could not verify it; errmsg says which index),
 * KEEL_ENOMEM. On success free *out with srv_stream_msg_free. */
KEEL_MUST_USE int srv_stream_msg_load(struct srv_stream *st, uint64_t seq,
                                      struct srv_stream_msg *out, char *errmsg);
void srv_stream_msg_free(struct srv_stream_msg *m);

/* The first stored seq >= from_seq whose subject matches any of the
 * nfilters filter subjects (wildcards allowed; nfilters 0 = every
 * subject). Work per call is bounded by SRV_STREAM_SCAN_MAX seqs: returns 0
 * with *seq set, KEEL_ENOENT when no stored seq >= from_seq matches, or
 * KEEL_EAGAIN with *seq = the next seq to continue from when the bound was
 * reached (call again, e.g. on the next loop iteration). */
KEEL_MUST_USE int srv_stream_next_seq(const struct srv_stream *st,
                                      uint64_t from_seq,
                                      const char *const *filters,
                                      size_t nfilters, uint64_t *seq);

/* Last stored seq of a literal subject (deliver last_per_subject).
 * Returns 0 or KEEL_ENOENT. */
KEEL_MUST_USE int srv_stream_last_seq_for_subject(const struct srv_stream *st,
                                                  const char *subject,
                                                  size_t subject_len,
                                                  uint64_t *seq);

/* Propose a consumer entry: kind in SRV_STREAM_KIND_CONSUMER_MIN..MAX,
 * payload the consumer's encoding (the stream prepends the kind byte). On
 * commit the stream's apply calls srv_consumer_ops.apply(st, index, kind,
 * payload, len, ctx) with this ctx (ctx is 0 when the entry is replayed at
 * start). Returns 0, KEEL_EINVAL (kind out of range), KEEL_ENOTLEADER,
 * KEEL_EBUSY (proposal queue full: answer the client 503-ish, never drop
 * silently), KEEL_ENOMEM. */
KEEL_MUST_USE int srv_stream_propose(struct srv_stream *st, uint8_t kind,
                                     const void *payload, uint32_t len,
                                     uint64_t ctx, char *errmsg);

/* Remove message seq because a committed consumer entry acknowledged it
 * (retention interest / workqueue). Call ONLY from inside
 * srv_consumer_ops.apply, so every replica removes at the same log point.
 * Returns 0 or KEEL_ENOENT (already gone). */
KEEL_MUST_USE int srv_stream_remove_msg(struct srv_stream *st, uint64_t seq);

/* The per-stream slot js-consumers owns (its consumer set). NULL until they
 * set it; the stream calls srv_consumer_ops.stream_closed before the stream
 * is freed so they can free it. */
void **srv_stream_consumers_slot(struct srv_stream *st);

#endif
