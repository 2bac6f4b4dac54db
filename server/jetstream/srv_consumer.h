/* srv_consumer: the live consumer engine of one keeld node on top of the
 * stream engine (srv_js, srv_stream): the $JS.API.CONSUMER.* handlers,
 * the pull waiting lists, push delivery with flow control and idle
 * heartbeats, acks batched into one entry per consumer per loop iteration
 * (docs/design.md §6), ack_wait redelivery timers, and ephemeral reaping.
 *
 * The replicated state is srv_consumer_sm's (struct srv_csm_set in the
 * stream's consumer slot); everything here is the leader's and is rebuilt
 * from the log after a restart or failover (srv_csm_leader_start).
 * Everything runs on the loop thread. */
#ifndef KEEL_SRV_CONSUMER_H
#define KEEL_SRV_CONSUMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "keel/assert.h"
#include "srv_consumer_pause.h"
#include "srv_consumer_sm.h"
#include "srv_hmap.h"
#include "srv_js.h"
#include "srv_stream.h"

/* Register the consumer hooks with js (call once, right after
 * srv_js_open and before the streams replay their logs) and start the
 * engine's loop handles on the server's loop. Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_consumer_attach(struct srv_js *js, char *errmsg);

/* Stop the engine's handles (before srv_js_close). */
void srv_consumer_detach(struct srv_js *js);

/* ---- internal: shared by srv_consumer.c and srv_consumer_deliver.c ---- */

/* One waiting pull request (docs/protocol.md §2.8). */
struct srv_cpull {
    char *reply;
    int64_t batch;        /* messages still wanted */
    int64_t bytes;        /* bytes still allowed, 0 = no limit */
    int64_t expires_ms;   /* loop time it expires, 0 = never */
    int64_t hb_ms;        /* idle heartbeat interval, 0 = none */
    int64_t last_send_ms; /* last message or heartbeat sent */
    bool no_wait;
    uint64_t sent; /* messages delivered to it */
};

/* A proposal awaiting its commit on this node (the ctx of the entry). */
/* The wait kind of a PAUSE request: its entry is a consumer update
 * (SRV_CSM_KIND_CREATE), its answer a consumer_pause_response. */
#define SRV_CWAIT_PAUSE 0xff

struct srv_cwait {
    uint64_t ctx;
    char *reply; /* API reply or AckSync reply; NULL = none */
    uint8_t kind;
    struct srv_cwait *next;
};

/* The leader's live state of one consumer. */
struct srv_clive {
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    struct srv_cpull *pulls; /* FIFO ring of max_waiting */
    uint32_t pull_head, pull_count, pull_cap;
    struct srv_csm_ack *acks; /* this loop iteration's batch */
    uint32_t nacks, acks_cap;
    char **sync_replies; /* AckSync replies of the batch */
    uint32_t nsync, sync_cap;
    bool started;                   /* srv_csm_leader_start ran */
    bool delete_proposed;           /* ephemeral reaped */
    int64_t last_active_ms;         /* interest or a pull request seen */
    int64_t last_send_ms;           /* push: last message or heartbeat */
    int64_t last_delivered_prop_ms; /* ack none: delivered recorded */
    uint64_t prop_delivered_sseq;
    char fc_reply[SRV_JS_NAME_BYTES_MAX * 2 + 32]; /* "" = none waiting */
    uint64_t fc_bytes;      /* push bytes since the last flow control */
    int64_t last_active_ns; /* wall clock of the last delivery */
    /* replay_policy original (srv_consumer_pause.c): on since this
     * leader started the consumer, until it delivered replay_until (the
     * stream's last seq then); the last delivered message's stored time,
     * and when (mono ns) the next may go, 0 = not computed. */
    bool replay;
    uint64_t replay_until;
    int64_t replay_lts, replay_at;
    /* rate_limit_bps: the leader's bucket, full when it starts the
     * consumer (as on a new nats-server leader). */
    struct srv_consumer_rate rate;
};

/* A stream's consumer slot. */
struct srv_cstream {
    struct srv_stream *st;
    struct srv_csm_set set;
    struct srv_hmap live; /* name -> struct srv_clive */
    struct srv_cstream *next;
    /* The engine's busy list (docs/architecture.md, "Apply → deliver"):
     * busy is true while the stream is on e->busy or e->walk. */
    struct srv_cstream *busy_next;
    bool busy;
};

/* The engine (one per srv_js). */
struct srv_cengine {
    struct srv_js *js;
    uv_loop_t *loop;
    uv_check_t check;
    uv_timer_t tick;
    struct srv_cstream *streams;
    /* The streams srv_cengine_run visits: woken by an event (a stored
     * message, a consumer entry applied, an ack, a pull request, this
     * node taking the lead) and kept while a consumer has timed work
     * (waiting pulls, unacked messages, a push target, an ephemeral to
     * reap). An idle stream costs nothing per loop turn. walk is the part
     * of the list the current run has not reached yet. */
    struct srv_cstream *busy;
    struct srv_cstream *walk;
    uint64_t visits; /* consumers visited by srv_cengine_run */
    struct srv_cwait *waits;
    uint64_t next_ctx;
    uint64_t rng;
};

struct srv_cengine *srv_cengine_get(void);
struct srv_cstream *srv_cstream_of(struct srv_stream *st);
/* srv_consumer_ops.snapshot / .restore (srv_consumer_snap.c): the stream's
 * consumer set in a stream snapshot (docs/design.md §5). */
int srv_consumer_snap_encode(const struct srv_stream *st, uint8_t **out,
                             size_t *len);
int srv_consumer_snap_restore(struct srv_stream *st, const uint8_t *buf,
                              size_t len);
struct srv_clive *srv_clive_get(struct srv_cstream *cs, const char *name);
void srv_cstream_view(struct srv_cstream *cs, struct srv_csm_stream *out);
int64_t srv_cnow_ms(const struct srv_cengine *e);
int64_t srv_cwall_ns(void);

/* Send an empty-body message to subject with optional reply and header
 * block (NULL = none); a failure is logged (the client retries). */
void srv_csend(struct srv_cengine *e, const char *subject, const char *reply,
               const char *hdr);

/* Send a status message (empty body) to subject. */
void srv_csend_status(struct srv_cengine *e, const char *subject,
                      const char *status_hdr);

/* A MSG.NEXT request for consumer name of stream cs with the given body,
 * replying to reply. */
void srv_cpull_request(struct srv_cengine *e, struct srv_cstream *cs,
                       struct srv_csm *c, const char *reply, const char *body,
                       size_t len);

/* Deliver what can be delivered now for every consumer (leader only),
 * expire pulls, send heartbeats; flush ack batches as entries. Visits
 * only the busy streams (srv_cstream_wake); a stream whose consumers are
 * all idle leaves the list until the next event wakes it. */
void srv_cengine_run(struct srv_cengine *e);

/* Put cs on the engine's busy list (visited at the next run). Call on
 * every event that can give a consumer of cs work. */
void srv_cstream_wake(struct srv_cengine *e, struct srv_cstream *cs);

/* An ack or flow-control publish. True when consumed. */
bool srv_cack_intercept(struct srv_cengine *e, const char *subject,
                        size_t subject_len, const char *reply, size_t reply_len,
                        const char *data, size_t data_len);

/* Drop a consumer's live state, telling waiting pulls "409 Consumer
 * Deleted". */
void srv_clive_drop(struct srv_cengine *e, struct srv_cstream *cs,
                    const char *name, bool tell);

/* On the leader, make sure the consumer's pending set was rebuilt from
 * the log (srv_csm_leader_start) once; false when not the leader. */
bool srv_clive_start(struct srv_cengine *e, struct srv_cstream *cs,
                     struct srv_csm *c, struct srv_clive *l);

/* Wanted messages after seq (num_pending): exact for an unfiltered
 * consumer unless interior deletes sit above seq, counted up to limit for
 * filtered ones. */
uint64_t srv_cpending_after(struct srv_cstream *cs, struct srv_csm *c,
                            uint64_t seq, uint64_t limit);

/* True when someone is subscribed to subject on this node. */
bool srv_cinterest(struct srv_cengine *e, const char *subject);

/* Remember a proposal's ctx to answer on commit. Takes reply. */
uint64_t srv_cwait_add(struct srv_cengine *e, uint8_t kind, char *reply);
struct srv_cwait *srv_cwait_take(struct srv_cengine *e, uint64_t ctx);

#endif
