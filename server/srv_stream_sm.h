/* srv_stream_sm: pieces of the deterministic stream state machine
 * (DESIGN §6). So far: NATS/1.0 header block lookup and the publish
 * expectation checks of PROTOCOL §2.5, evaluated against state values the
 * caller passes in. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_STREAM_SM_H
#define KEEL_SRV_STREAM_SM_H

#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "srv_hmap.h"
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

/* Dedupe table: Nats-Msg-Id → stream seq for ids seen within
 * duplicate_window, measured with the ENTRIES' leader timestamps, never a
 * local clock, so every replica keeps the same table. Ids are kept in apply
 * order (a FIFO) so expiry and snapshots are deterministic. */
struct srv_dedupe_ent {
    char *id;
    size_t id_len;
    int64_t ts_ns;
    uint64_t seq;
};

struct srv_dedupe {
    struct srv_hmap map;          /* id → struct srv_dedupe_ent * */
    struct srv_dedupe_ent **ring; /* FIFO in apply order */
    size_t cap, head, count;
};

void srv_dedupe_init(struct srv_dedupe *d);
void srv_dedupe_close(struct srv_dedupe *d);

/* Forget ids stored at or before now_ns - window_ns (entry time now_ns). */
void srv_dedupe_expire(struct srv_dedupe *d, int64_t now_ns, int64_t window_ns);

/* Seq of id if remembered, else 0. Call srv_dedupe_expire first. */
uint64_t srv_dedupe_find(const struct srv_dedupe *d, const char *id,
                         size_t id_len);

/* Remember id (not already present) stored as seq at ts_ns. Past
 * SRV_JS_DEDUPE_IDS_MAX the oldest id is forgotten. Returns 0, KEEL_EINVAL
 * (empty id or already present) or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_dedupe_add(struct srv_dedupe *d, const char *id,
                                 size_t id_len, int64_t ts_ns, uint64_t seq);

#endif
