/* srv_stream_sm: pieces of the deterministic stream state machine
 * (DESIGN §6). So far: NATS/1.0 header block lookup and the publish
 * expectation checks of PROTOCOL §2.5, evaluated against state values the
 * caller passes in. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_STREAM_SM_H
#define KEEL_SRV_STREAM_SM_H

#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "srv_js_err.h"

/* Find header name (case-insensitive) in a header block
 * "NATS/1.0[ status]\r\nName: value\r\n...\r\n\r\n". On success *val points
 * into hdr (surrounding spaces trimmed) and returns 0; KEEL_ENOENT when
 * absent; KEEL_EINVAL when the block is malformed (no NATS/1.0 line, a line
 * without ':' or without CRLF). The first occurrence wins. */
KEEL_MUST_USE int srv_nats_hdr_get(const char *hdr, size_t len,
                                   const char *name, const char **val,
                                   size_t *vlen);

/* The stream state a publish's expectations are checked against. */
struct srv_stream_expect_state {
    const char *stream;        /* stream name */
    uint64_t last_seq;         /* stream last_seq */
    uint64_t subject_last_seq; /* last seq of the publish's subject, 0 none */
    const char *last_msg_id;   /* Nats-Msg-Id of the last message, NULL none */
};

/* Check Nats-Expected-Stream (10060), Nats-Expected-Last-Sequence and
 * Nats-Expected-Last-Subject-Sequence (10071, detail = the actual value),
 * Nats-Expected-Last-Msg-Id (10070, detail = the actual id). Returns 0 when
 * all hold (or hdr is NULL/empty), KEEL_EINVAL with *jerr and the detail
 * for srv_js_err_json in detail (SRV_JS_ERR_DESC_BYTES_MAX bytes) otherwise,
 * also for a malformed header block or number (SRV_JS_EBAD_REQUEST). */
KEEL_MUST_USE int
srv_stream_check_expect(const struct srv_stream_expect_state *st,
                        const char *hdr, size_t len, enum srv_js_err *jerr,
                        char *detail);

#endif
