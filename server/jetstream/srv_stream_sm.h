/* srv_stream_sm: pieces of the deterministic stream state machine
 * (docs/design.md §6). So far: NATS/1.0 header block lookup and the publish
 * expectation checks of docs/protocol.md §2.5, evaluated against state values
 * the caller passes in. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_STREAM_SM_H
#define KEEL_SRV_STREAM_SM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "srv_hmap.h"
#include "srv_js_config.h"
#include "srv_js_err.h"
#include "srv_msg_ttl.h"

/* Find header name (case-insensitive) in a header block
 * "NATS/1.0[ status]\r\nName: value\r\n...\r\n\r\n". On success *val points
 * into hdr (surrounding spaces trimmed) and returns 0; KEEL_ENOENT when
 * absent; KEEL_EINVAL when the block is malformed (no NATS/1.0 line, a line
 * without ':' or without CRLF). The first occurrence wins. */
KEEL_MUST_USE int srv_nats_hdr_get(const char *hdr, size_t len,
                                   const char *name, const char **val,
                                   size_t *vlen);

/* A copy of header block hdr (len 0: none) without its `name` lines and
 * with line ("Name: value\r\n", line_len bytes) last, in a new malloc'ed
 * *out of *out_len bytes. 0, KEEL_EINVAL (a block with no blank line
 * ending it) or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_nats_hdr_replace(const char *hdr, size_t len,
                                       const char *name, const char *line,
                                       size_t line_len, char **out,
                                       size_t *out_len);

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

/* ---- the stream state machine (docs/design.md §6) ----
 * State derived only from applied entries (keel_stream_entry), never from a
 * clock: counters, per-subject counts, interior deletes, the seq -> Raft
 * index map (bodies stay in the log), the dedupe table. */

struct keel_stream_entry;

/* The config values the state machine enforces. */
struct srv_stream_limits {
    enum srv_js_retention retention;
    enum srv_js_discard discard;
    int64_t max_msgs, max_bytes, max_msgs_per_subject, max_msg_size;
    int64_t max_age_ns, duplicate_window_ns;
    bool deny_delete, deny_purge, sealed;
    bool discard_new_per_subject; /* refuse, not drop, at max per subject */
    bool allow_msg_ttl;           /* Nats-TTL taken and expired */
    int64_t marker_ttl_ns;        /* subject_delete_marker_ttl, 0 none */
};

void srv_stream_limits_from_config(const struct srv_stream_config *cfg,
                                   struct srv_stream_limits *out);

struct srv_stream_subj {
    uint64_t msgs;
    uint64_t first_seq; /* a lower bound: the first live may be later */
    uint64_t last_seq;  /* exact: the newest live seq */
    size_t len;
    char s[]; /* NUL-terminated */
};

/* One seq in [first_seq, last_seq]; subj NULL = deleted. 32 bytes: a
 * stream tracks up to SRV_STREAM_MSGS_MAX of them. */
struct srv_stream_slot {
    uint64_t index; /* Raft index of the publish entry */
    int64_t ts_ns;
    struct srv_stream_subj *subj;
    uint32_t size; /* subject + headers + payload of one entry (< 4 GiB) */
    /* Per-message TTL and marker kind (docs/decisions/0034-per-message-
     * ttl-in-the-state-machine.md): read and set through the functions
     * below. */
    uint32_t ttl;
};

/* Is a slot a delete marker, whose expiry leaves no marker behind? */
enum srv_stream_marker {
    SRV_STREAM_MARKER_NONE = 0,
    SRV_STREAM_MARKER_STORED, /* stored by an expiry: body synthesised */
    SRV_STREAM_MARKER_HDR,    /* published with Nats-Marker-Reason or as a KV
                                 purge (KV-Operation: PURGE), as 2.11 counts */
};

/* slot.ttl: the TTL in seconds in the low 30 bits (0 none, all ones
 * never; longer TTLs, over 34 years, are cut to the most), the marker
 * kind in the top 2. */
#define SRV_STREAM_TTL_SECS_MASK 0x3fffffffu
#define SRV_STREAM_TTL_NEVER_SECS SRV_STREAM_TTL_SECS_MASK

/* The entry time at which the slot expires: 0 none, SRV_MSG_TTL_NEVER
 * (kept past max_age), else its stored time plus its TTL. */
static inline int64_t srv_stream_slot_expire(const struct srv_stream_slot *s)
{
    uint32_t secs = s->ttl & SRV_STREAM_TTL_SECS_MASK;
    if (secs == 0) {
        return 0;
    }
    if (secs == SRV_STREAM_TTL_NEVER_SECS) {
        return SRV_MSG_TTL_NEVER;
    }
    return s->ts_ns + (int64_t)secs * 1000000000LL;
}

static inline enum srv_stream_marker
srv_stream_slot_marker(const struct srv_stream_slot *s)
{
    return (enum srv_stream_marker)(s->ttl >> 30);
}

/* secs > 0, or SRV_MSG_TTL_NEVER. */
static inline void srv_stream_slot_set_ttl(struct srv_stream_slot *s,
                                           int64_t secs)
{
    uint32_t v = secs == SRV_MSG_TTL_NEVER ? SRV_STREAM_TTL_NEVER_SECS
                 : secs >= (int64_t)SRV_STREAM_TTL_NEVER_SECS
                     ? SRV_STREAM_TTL_NEVER_SECS - 1
                     : (uint32_t)secs;
    s->ttl = (s->ttl & ~SRV_STREAM_TTL_SECS_MASK) | v;
}

static inline void srv_stream_slot_set_marker(struct srv_stream_slot *s,
                                              enum srv_stream_marker m)
{
    s->ttl = (s->ttl & SRV_STREAM_TTL_SECS_MASK) | (uint32_t)m << 30;
}

/* A pending TTL: a min-heap of (expire_ns, seq), a cache of the slots'
 * expiry (entries for removed seqs are skipped when they come up). */
struct srv_stream_ttl_ent {
    int64_t expire_ns;
    uint64_t seq;
};

/* A sourcing stream's position in one origin (srv_stream_sm_source.c):
 * the highest origin seq a SOURCE entry for it carried, and the origin
 * seqs dropped before they were read. stalled (0: none) is the origin seq
 * the stream refused for a limit (jerr the refusal): the position stays
 * below it until a retry of it fits. */
struct srv_stream_src_pos {
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    uint64_t pos;
    uint64_t lost;
    uint64_t stalled;
    enum srv_js_err stall_jerr;
};

/* Positions kept: a source removed from the config keeps its position
 * (added back, it resumes there, as nats-server resumes from the last
 * Nats-Stream-Source header it stored); past this many names the oldest
 * is forgotten, the same on every replica. */
#define SRV_STREAM_SOURCE_POS_MAX (2 * SRV_JS_SOURCES_MAX)

struct srv_stream_sm {
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    struct srv_stream_limits lim;
    bool configured;              /* a CONFIG entry was applied */
    struct srv_stream_slot *ring; /* seqs base_seq .. base_seq+count-1 */
    size_t cap, head, count;
    uint64_t base_seq; /* == first_seq when count > 0 */
    uint64_t last_seq;
    int64_t last_ts_ns;
    uint64_t msgs, bytes, deleted;
    struct srv_hmap subjects; /* subject -> struct srv_stream_subj */
    struct srv_dedupe dedupe;
    char *last_msg_id; /* Nats-Msg-Id of the last stored message */
    size_t last_msg_id_len;
    /* A mirror's position in its origin: the highest origin seq a MIRROR
     * entry carried (applied, so the same on every replica and in the
     * snapshot), and the origin seqs the origin dropped before the mirror
     * read them (docs/decisions/0032-mirrors-pull-into-the-log.md). */
    uint64_t mirror_pos;
    uint64_t mirror_lost;
    /* A mirror: the applied config has a mirror, or a MIRROR entry was
     * applied. Promoted: a config without a mirror followed (an update
     * removed `mirror`); from then on MIRROR entries are skipped and a
     * config that still names the mirror (one proposed by a leader whose
     * node had not applied the update yet) does not make it a mirror
     * again. Both in the snapshot. */
    bool mirror_cfg;
    bool promoted;
    /* A sourcing stream's positions, one per origin in the order first
     * seen (docs/decisions/0035-sources-share-the-mirror-pump.md):
     * replicated state like mirror_pos, in the snapshot. */
    struct srv_stream_src_pos *src;
    uint32_t nsrc;
    /* Per-message TTLs: the heap, and how many live slots expire by a
     * TTL. Derived from the slots (rebuilt on restore). */
    struct srv_stream_ttl_ent *ttl_heap;
    size_t ttl_n, ttl_cap;
    uint64_t ttl_live;
    /* Below this seq every slot is deleted or never expires by age: where
     * the max_age scan starts. A lower bound only (0 after restore), so it
     * changes no outcome, only how far a scan walks. */
    uint64_t age_from;
};

/* The outcome of one applied entry. */
struct srv_stream_result {
    uint64_t seq;         /* PUBLISH, MIRROR, SOURCE: the stored (or
                             duplicate) seq */
    bool duplicate;       /* PUBLISH, SOURCE: Nats-Msg-Id seen within the
                             window; MIRROR, SOURCE: origin seq not above the
                             position (skipped) */
    bool stored;          /* PUBLISH, MIRROR, SOURCE: a new message is stored
                             at seq */
    uint64_t purged;      /* PURGE: messages removed */
    enum srv_js_err jerr; /* non-zero: the entry was refused */
    char detail[SRV_JS_ERR_DESC_BYTES_MAX];
    /* Subject delete markers this entry stored: seqs marker_first ..
     * marker_first + markers - 1 (any entry that expires messages). */
    uint64_t marker_first, markers;
};

/* Empty stream (first seq 1) with no limits until a CONFIG entry. */
KEEL_MUST_USE int srv_stream_sm_init(struct srv_stream_sm *sm,
                                     const char *name);
void srv_stream_sm_close(struct srv_stream_sm *sm);

/* The position of source `name` (0: nothing read yet), and the origin
 * seqs it lost when lost is not NULL (srv_stream_sm_source.c). */
uint64_t srv_stream_sm_source_pos(const struct srv_stream_sm *sm,
                                  const char *name, uint64_t *lost);
/* The origin seq source `name` is stalled at (0: not stalled) and the
 * refusal in *jerr (srv_stream_sm_source.c). */
uint64_t srv_stream_sm_source_stalled(const struct srv_stream_sm *sm,
                                      const char *name, enum srv_js_err *jerr);

/* Apply a decoded stream entry stored at Raft index. Client-level refusals
 * (limits, expectations, deny_*) fill res->jerr and return 0: the same on
 * every replica. Returns KEEL_ENOMEM/KEEL_ELIMIT only when the node cannot
 * hold the state (the caller stops the group). */
KEEL_MUST_USE int srv_stream_sm_apply(struct srv_stream_sm *sm, uint64_t index,
                                      const struct keel_stream_entry *e,
                                      struct srv_stream_result *res);

/* Remove one message (consumer ack under interest/workqueue retention, or
 * a delete). Returns 0 or KEEL_ENOENT. */
KEEL_MUST_USE int srv_stream_sm_remove(struct srv_stream_sm *sm, uint64_t seq);

/* The slot of a live seq, or NULL. */
const struct srv_stream_slot *srv_stream_sm_get(const struct srv_stream_sm *sm,
                                                uint64_t seq);

/* First seq (last_seq + 1 when empty). */
uint64_t srv_stream_sm_first_seq(const struct srv_stream_sm *sm);

/* The entry time at which the next message expires by max_age or its TTL
 * (*at_ns; INT64_MAX when none): the leader proposes a TICK once its clock
 * passes it. A long walk over messages that never expire answers the
 * current last_ts so that a tick moves the scan on. */
void srv_stream_sm_next_expiry(const struct srv_stream_sm *sm, int64_t *at_ns);

/* Deterministic encoding of the whole state (not the bodies): the same
 * applied entries give the same bytes on every replica. decode fills an
 * initialised empty sm. Return 0, KEEL_ENOMEM, KEEL_ECORRUPT (decode). */
KEEL_MUST_USE int srv_stream_sm_snapshot(const struct srv_stream_sm *sm,
                                         uint8_t **out, size_t *len);
KEEL_MUST_USE int srv_stream_sm_restore(struct srv_stream_sm *sm,
                                        const uint8_t *buf, size_t len,
                                        char *errmsg);

#endif
