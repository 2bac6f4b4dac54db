/* srv_js_unsupported: refuse, with an error naming it, a stream or
 * consumer config field or a publish header that keeld does not implement
 * (docs/jetstream-config.md). Checks requests only, never configs replayed
 * from the log. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_JS_UNSUPPORTED_H
#define KEEL_SRV_JS_UNSUPPORTED_H

#include <stddef.h>

#include <jansson.h>

#include "keel/assert.h"
#include "srv_js_config.h"
#include "srv_js_err.h"

/* A stream CREATE/UPDATE request body: 0, or KEEL_EINVAL with *jerr 10052
 * and errmsg naming the field when it sets an unimplemented field to
 * anything but its default (first_seq, mirror, sources, republish,
 * subject_transform, mirror_direct, discard_new_per_subject, ...). */
KEEL_MUST_USE int srv_stream_request_check(const json_t *req,
                                           enum srv_js_err *jerr, char *errmsg);

/* A consumer create request's "config": 0, or KEEL_EINVAL with *jerr 10012
 * (sample_freq, priority groups, direct). */
KEEL_MUST_USE int srv_consumer_request_check(const json_t *cfg,
                                             enum srv_js_err *jerr,
                                             char *errmsg);

/* The header block of a publish to a stream of config cfg: 0, or
 * KEEL_EINVAL with *jerr and detail (SRV_JS_ERR_DESC_BYTES_MAX) set:
 * Nats-TTL 10166 without allow_msg_ttl (10165 for an invalid value with
 * it), Nats-Incr 10168, Nats-Schedule / Nats-Batch-Id /
 * Nats-Expected-Last-Subject-Sequence-Subject 10003, and Nats-Rollup 10111
 * when the stream does not allow rollups or the value is not sub or all. */
KEEL_MUST_USE int
srv_js_publish_headers_check(const struct srv_stream_config *cfg,
                             const char *hdr, size_t len, enum srv_js_err *jerr,
                             char *detail);

/* What a publish's Nats-Rollup header asks: 0 (none, or a value other
 * than sub and all, which srv_js_publish_headers_check refuses),
 * SRV_JS_ROLLUP_SUB (the message's subject) or SRV_JS_ROLLUP_ALL. */
#define SRV_JS_ROLLUP_SUB 1
#define SRV_JS_ROLLUP_ALL 2
int srv_js_rollup_scope(const char *hdr, size_t len);

#endif
