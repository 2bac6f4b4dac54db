/* srv_stream_snap: a stream group's snapshots and retention cuts
 * (docs/design.md §5). The snapshot body is the stream state machine (state,
 * deleted sequences, seq -> Raft index, dedupe table) plus the consumers' state
 * through the consumer ops, and the highest committed cut. A cut is a
 * stream-group entry the leader proposes carrying the log index P below
 * which no live message remains; its apply tells the driver, which drops
 * the prefix only up to the older kept snapshot. Loop thread only. */
#ifndef KEEL_SRV_STREAM_SNAP_H
#define KEEL_SRV_STREAM_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"

struct srv_stream;
struct replica;

/* Entry kind of a retention cut: [kind][u64 P little-endian]. Outside the
 * codec's stream kinds and the consumer range. */
#define SRV_STREAM_KIND_CUT 0x08
#define SRV_STREAM_CUT_BYTES 9u

/* replica_callbacks.snapshot / .restore of a stream group (arg: the
 * stream). */
int srv_stream_snap_encode(struct replica *r, uint64_t index, uint8_t **out,
                           size_t *len, void *arg);
int srv_stream_snap_restore(struct replica *r, uint64_t index,
                            const uint8_t *body, size_t len, void *arg);

/* Apply a committed cut entry at index (payload with its kind byte): the
 * same on every replica. */
void srv_stream_cut_apply(struct srv_stream *st, uint64_t index,
                          const uint8_t *payload, uint32_t len);

/* Leader, from the periodic tick: propose a cut when at least
 * SRV_STREAM_CUT_ENTRIES_MIN entries below the first live message are not
 * yet covered by one. */
void srv_stream_cut_maybe(struct srv_stream *st);

#endif
