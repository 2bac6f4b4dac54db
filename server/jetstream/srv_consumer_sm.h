/* srv_consumer_sm: the deterministic consumer state machine (docs/design.md §6)
 * and the consumer pieces of docs/protocol.md §2.7: the $JS.ACK reply subject
 * (v1) built and parsed, the ack body (+ACK, -NAK [delay], +WPI, +TERM,
 * +NXT) parsed, the consumer entries (create, delete, ack batch) encoded,
 * decoded and applied, the leader's pending (delivered, unacked) set, and
 * the snapshot bytes of a stream's consumers. Pure: no I/O, no clock; the
 * stream is reached through struct srv_csm_stream. */
#ifndef KEEL_SRV_CONSUMER_SM_H
#define KEEL_SRV_CONSUMER_SM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "keel/limits.h"
#include "srv_consumer_cfg.h"
#include "srv_js_config.h"

/* $JS.ACK.<stream>.<consumer>.<delivered_count>.<stream_seq>.
 * <consumer_seq>.<timestamp_ns>.<num_pending> */
struct srv_ack_reply {
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    char consumer[SRV_JS_NAME_BYTES_MAX + 1];
    uint64_t delivered; /* starts at 1 */
    uint64_t stream_seq;
    uint64_t consumer_seq;
    int64_t ts_ns; /* stored time, Unix ns */
    uint64_t pending;
};

/* Longest v1 ack subject: two names and five 20-digit numbers. */
#define SRV_ACK_REPLY_BYTES_MAX (9 + 2 * SRV_JS_NAME_BYTES_MAX + 5 * 21 + 1)

/* Write the v1 ack subject of r into buf (NUL-terminated, *outlen without
 * the NUL). Names must be valid (srv_js_name_valid). Returns 0 or
 * KEEL_EINVAL (invalid name, delivered 0, ts < 0, buf too small). */
KEEL_MUST_USE int srv_ack_reply_build(const struct srv_ack_reply *r, char *buf,
                                      size_t len, size_t *outlen, char *errmsg);

/* Parse a v1 ack subject (9 tokens, numbers in decimal without sign, names
 * valid). Returns 0 or KEEL_EINVAL (not an ack subject of this form,
 * including the v2 form, which is LATER). */
KEEL_MUST_USE int srv_ack_reply_parse(const char *subj, size_t len,
                                      struct srv_ack_reply *out, char *errmsg);

enum srv_ack_kind {
    SRV_ACK_ACK = 0, /* empty body or +ACK */
    SRV_ACK_NAK,     /* -NAK, optional delay */
    SRV_ACK_WPI,     /* +WPI: reset ack_wait */
    SRV_ACK_TERM,    /* +TERM[ reason]: never redeliver */
    SRV_ACK_NXT,     /* +NXT[ pull json]: ack and pull */
};

struct srv_ack_body {
    enum srv_ack_kind kind;
    int64_t delay_ns; /* -NAK delay, 0 = redeliver now */
    const char *arg;  /* TERM reason / NXT request (points into body) */
    size_t arg_len;
};

/* Parse an ack body: "", "+ACK", "-NAK", "-NAK {\"delay\":<ns>}",
 * "-NAK <n><unit>" (unit ns|us|ms|s|m|h), "+WPI", "+TERM[ reason]",
 * "+NXT[ json]". Returns 0 or KEEL_EINVAL (unknown verb or bad delay). */
KEEL_MUST_USE int srv_ack_body_parse(const char *body, size_t len,
                                     struct srv_ack_body *out, char *errmsg);

/* ---- the consumer state machine ---- */

/* Entry kinds of the stream group owned by consumers (0x40..0x7F). */
#define SRV_CSM_KIND_CREATE 0x40
#define SRV_CSM_KIND_DELETE 0x41
#define SRV_CSM_KIND_ACKS 0x42

/* What the state machine needs from its stream; the engine implements it
 * over struct srv_stream, tests over an array. Every answer must be a
 * function of the applied log (deterministic on every replica). */
struct srv_csm_stream {
    void *ctx;
    enum srv_js_retention retention;
    /* First stored seq >= from matching any filter (n 0 = all): 0 and *seq,
     * or KEEL_ENOENT. */
    int (*next_seq)(void *ctx, uint64_t from, char *const *filters, uint32_t n,
                    uint64_t *seq);
    /* Subject of stored seq (NUL-terminated, into buf of
     * SRV_JS_SUBJECT_BYTES_MAX + 1): 0 or KEEL_ENOENT. */
    int (*subject)(void *ctx, uint64_t seq, char *buf);
    /* Last stored seq of literal subject: 0 or KEEL_ENOENT. */
    int (*last_for_subject)(void *ctx, const char *subject, uint64_t *seq);
    /* First stored seq stamped at or after ts: 0 or KEEL_ENOENT. */
    int (*seq_at_time)(void *ctx, int64_t ts_ns, uint64_t *seq);
    /* first_seq and last_seq of the stream (0, 0 when never written). */
    void (*bounds)(void *ctx, uint64_t *first, uint64_t *last);
    /* Remove seq for retention (interest / workqueue). */
    void (*remove)(void *ctx, uint64_t seq);
};

struct srv_csm_pos {
    uint64_t cseq; /* consumer seq */
    uint64_t sseq; /* stream seq */
};

/* One delivered, unacked message (leader-local). */
struct srv_csm_pending {
    uint64_t sseq;
    uint64_t cseq;       /* of the latest delivery */
    uint64_t deliveries; /* 1 on the first delivery */
    int64_t deadline_ns; /* redeliver at or after this (local clock) */
};

/* One consumer. The replicated part (config, created, delivered high-water,
 * ack floor, acked set, lps_end) changes only in srv_csm_apply; the
 * pending set and the live delivery position are the leader's and may be
 * lost on failover (then redelivered: docs/design.md §6). */
struct srv_csm {
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    struct srv_consumer_config cfg;
    int64_t created_ns;
    struct srv_csm_pos delivered; /* highest delivery the log has seen */
    struct srv_csm_pos ack_floor; /* everything <= sseq is acked */
    /* Acked positions above the floor, ascending sseq. */
    struct srv_csm_pos *acked;
    uint32_t nacked, acked_cap;
    /* last_per_subject: a seq <= lps_end is wanted only when it is the
     * last of its subject. 0 otherwise. */
    uint64_t lps_end;
    /* Leader-local. */
    struct srv_csm_pending *pend; /* ascending sseq, holes have sseq 0 */
    uint32_t pend_len, pend_cap, pend_count;
    struct srv_csm_pos live; /* last delivery made by this leader */
    /* No pending entry is due before this (a lower bound; 0 = scan). */
    int64_t due_min_ns;
    uint64_t redelivered; /* pending entries with deliveries > 1 */
    bool read_blocked;    /* the next message did not read (warned once) */
};

/* A stream's consumers, sorted by name (deterministic iteration). */
struct srv_csm_set {
    struct srv_csm **v;
    uint32_t n, cap;
};

void srv_csm_set_init(struct srv_csm_set *s);
void srv_csm_set_close(struct srv_csm_set *s);
struct srv_csm *srv_csm_find(const struct srv_csm_set *s, const char *name);

/* Entry payloads (after the kind byte), little-endian, versioned. */
enum srv_csm_action {
    SRV_CSM_CREATE_OR_UPDATE = 0,
    SRV_CSM_CREATE,
    SRV_CSM_UPDATE,
};

enum srv_csm_ack_kind {
    SRV_CSM_ACK_ONE = 0, /* +ACK / +NXT of one message */
    SRV_CSM_ACK_UPTO,    /* ack policy all: every seq <= it */
    SRV_CSM_ACK_TERM,    /* +TERM: acked for retention, never redelivered */
};

struct srv_csm_ack {
    uint64_t sseq;
    uint64_t cseq;
    uint8_t kind; /* enum srv_csm_ack_kind */
};

/* Encode a CREATE entry (cfg's name must be set) into a malloc'ed buffer.
 * Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_csm_encode_create(const struct srv_consumer_config *cfg,
                                        enum srv_csm_action action,
                                        int64_t ts_ns, uint8_t **out,
                                        uint32_t *len, char *errmsg);
KEEL_MUST_USE int srv_csm_encode_delete(const char *name, uint8_t **out,
                                        uint32_t *len, char *errmsg);
/* An ACKS entry: the leader's delivered high-water and n acks
 * (n <= SRV_CONSUMER_ENTRY_ACKS_MAX; n 0 only records delivered). */
KEEL_MUST_USE int srv_csm_encode_acks(const char *name,
                                      struct srv_csm_pos delivered,
                                      const struct srv_csm_ack *acks,
                                      uint32_t n, uint8_t **out, uint32_t *len,
                                      char *errmsg);

/* Result of one applied entry, for the proposer's reply. */
struct srv_csm_result {
    enum srv_js_err jerr; /* SRV_JS_OK on success */
    char detail[KEEL_ERRMSG_MAX];
    char name[SRV_JS_NAME_BYTES_MAX + 1]; /* the entry's consumer */
    struct srv_csm *c;     /* the consumer created/updated/acked */
    bool created;          /* CREATE made a new consumer */
    bool deleted;          /* DELETE removed one (c is then NULL) */
    uint32_t removed_msgs; /* retention removals done by this entry */
};

/* Apply a committed consumer entry (kind, payload) in log order. Every
 * replica reaches the same state: positions come from the entry and from
 * st (the applied stream). Returns 0 (the outcome, including refusals
 * such as "consumer already exists", is in *res), KEEL_ECORRUPT for a
 * payload that does not decode (never asserted: bytes from disk), or
 * KEEL_ENOMEM. */
KEEL_MUST_USE int srv_csm_apply(struct srv_csm_set *s,
                                const struct srv_csm_stream *st, uint8_t kind,
                                const uint8_t *p, uint32_t len,
                                struct srv_csm_result *res, char *errmsg);

/* After the stream applied a publish of seq: an interest stream drops a
 * message no consumer wants (nobody will ever ack it). */
void srv_csm_on_stored(struct srv_csm_set *s, const struct srv_csm_stream *st,
                       uint64_t seq);

/* True when consumer c wants stored seq (filters, last_per_subject). */
bool srv_csm_wants(const struct srv_csm *c, const struct srv_csm_stream *st,
                   uint64_t seq);

/* True when seq is acked by c (at/below the floor or in the acked set). */
bool srv_csm_is_acked(const struct srv_csm *c, uint64_t seq);

/* The first stored seq >= from that c wants: 0 and *seq or KEEL_ENOENT. */
KEEL_MUST_USE int srv_csm_next_wanted(const struct srv_csm *c,
                                      const struct srv_csm_stream *st,
                                      uint64_t from, uint64_t *seq);

/* Number of stored seqs > after that c wants (num_pending), counting at
 * most limit of them. */
uint64_t srv_csm_num_pending(const struct srv_csm *c,
                             const struct srv_csm_stream *st, uint64_t after,
                             uint64_t limit);

/* ---- leader-local pending set ---- */

/* Record a delivery of sseq at now (the first, or a redelivery of a
 * pending one): assigns the next consumer seq, counts deliveries and sets
 * the ack deadline (now + ack_wait, or the backoff step). Ack none records
 * nothing pending. *out is the delivery made. Returns 0, KEEL_ELIMIT
 * (SRV_CONSUMER_PENDING_MAX) or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_csm_deliver(struct srv_csm *c, uint64_t sseq,
                                  int64_t now_ns, struct srv_csm_pending *out);

/* The pending entry of sseq, or NULL. */
struct srv_csm_pending *srv_csm_pending_get(struct srv_csm *c, uint64_t sseq);

/* p's deadline was moved (NAK, WPI): keep the due bound valid. */
void srv_csm_pending_touch(struct srv_csm *c, const struct srv_csm_pending *p);

/* Forget pending sseq (acked, termed, or past max_deliver). */
void srv_csm_pending_del(struct srv_csm *c, uint64_t sseq);

/* The pending entry with the earliest deadline <= now whose deliveries
 * are below max_deliver, or NULL. */
struct srv_csm_pending *srv_csm_pending_due(struct srv_csm *c, int64_t now_ns);

/* Earliest deadline of any pending entry (INT64_MAX when none). */
int64_t srv_csm_pending_next_deadline(const struct srv_csm *c);

/* Number of pending (delivered, unacked) messages. */
static inline uint32_t srv_csm_num_ack_pending(const struct srv_csm *c)
{
    return c->pend_count;
}

/* Leader start: rebuild pending from the log's view: every wanted seq in
 * (ack_floor, delivered] not acked is pending with one delivery and due
 * now (docs/design.md §6: uncommitted delivery state means redelivery). */
KEEL_MUST_USE int srv_csm_leader_start(struct srv_csm *c,
                                       const struct srv_csm_stream *st,
                                       int64_t now_ns);

/* ---- snapshot ---- */

/* Encode every consumer of s (by name order) to a malloc'ed buffer:
 * deterministic bytes for equal states. Returns 0, KEEL_ENOMEM or
 * KEEL_ETOOBIG (SRV_CONSUMER_SNAP_BYTES_MAX). */
KEEL_MUST_USE int srv_csm_snapshot_encode(const struct srv_csm_set *s,
                                          uint8_t **out, uint32_t *len,
                                          char *errmsg);

/* Replace s with the consumers in a snapshot. Returns 0, KEEL_ECORRUPT or
 * KEEL_ENOMEM (s is then empty). */
KEEL_MUST_USE int srv_csm_snapshot_decode(struct srv_csm_set *s,
                                          const uint8_t *p, uint32_t len,
                                          char *errmsg);

#endif
