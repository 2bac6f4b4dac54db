/* srv_stream_sm_int: what the stream state machine's files share
 * (srv_stream_sm_state.c, srv_stream_sm_ttl.c). Not for other modules. */
#ifndef KEEL_SRV_STREAM_SM_INT_H
#define KEEL_SRV_STREAM_SM_INT_H

#include "srv_stream_sm.h"

/* The slot of seq (live or deleted), or NULL outside the ring. */
struct srv_stream_slot *srv_stream_sm__slot(const struct srv_stream_sm *sm,
                                            uint64_t seq);

/* Store a message as seq last_seq + 1 (no checks); 0, KEEL_ENOMEM or
 * KEEL_ELIMIT. */
KEEL_MUST_USE int srv_stream_sm__store(struct srv_stream_sm *sm, uint64_t index,
                                       int64_t ts, const char *subj,
                                       size_t slen, uint64_t size);

/* Apply a PUBLISH (or a SOURCE's message) as published: refusals,
 * dedupe, store, limits (srv_stream_sm_state.c). */
KEEL_MUST_USE int srv_stream_sm__publish(struct srv_stream_sm *sm,
                                         uint64_t index,
                                         const struct keel_stream_entry *e,
                                         struct srv_stream_result *res);

/* ---- srv_stream_sm_source.c ---- */

/* Apply a SOURCE entry: skip it when its origin seq is not above its
 * source's position, else move the position and store the message as a
 * publish. 0, KEEL_ENOMEM or KEEL_ELIMIT. */
KEEL_MUST_USE int srv_stream_sm__apply_source(struct srv_stream_sm *sm,
                                              uint64_t index,
                                              const struct keel_stream_entry *e,
                                              struct srv_stream_result *res);

/* Add a position for source name[0..len) at 0 (the oldest is forgotten
 * past SRV_STREAM_SOURCE_POS_MAX). 0, KEEL_EINVAL or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_stream_sm__source_add(struct srv_stream_sm *sm,
                                            const char *name, size_t len,
                                            struct srv_stream_src_pos **out);

/* ---- srv_stream_sm_ttl.c ---- */

/* Give the message just stored at seq the TTL its header asks for (only
 * when the stream allows TTLs). 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_stream_sm__ttl_set(struct srv_stream_sm *sm, uint64_t seq,
                                         const char *hdr, size_t hdr_len);

/* Remove what max_age and the TTLs expire at entry time now_ns (the entry
 * at index), leaving a subject delete marker where the stream asks for
 * them. 0, KEEL_ENOMEM or KEEL_ELIMIT. */
KEEL_MUST_USE int srv_stream_sm__expire(struct srv_stream_sm *sm,
                                        uint64_t index, int64_t now_ns,
                                        struct srv_stream_result *res);

/* Rebuild the TTL heap and count from the slots (after a restore).
 * 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_stream_sm__ttl_rebuild(struct srv_stream_sm *sm);

/* A slot with a TTL left (a removal keeps ttl_live exact). */
void srv_stream_sm__ttl_forget(struct srv_stream_sm *sm,
                               const struct srv_stream_slot *s);

#endif
