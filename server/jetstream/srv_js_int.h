/* srv_js_int: what srv_js.c, srv_js_api.c and srv_stream.c share (not part
 * of the interface other modules use). Loop thread only. */
#ifndef KEEL_SRV_JS_INT_H
#define KEEL_SRV_JS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <uv.h>

#include "keel/limits.h"
#include "replica.h"
#include "srv_hmap.h"
#include "srv_js.h"
#include "srv_js_cluster.h"
#include "srv_js_config.h"
#include "srv_metrics.h"
#include "srv_stream.h"
#include "keel_stream_entry.h"
#include "srv_stream_sm.h"
#include "srv_sublist.h"

/* Election timeout of the node's groups of one: a restart replays each
 * stream's log after its first election. */
#define SRV_JS_ELECTION_MS 100
/* How often the leader checks streams for max_age expiry (tick entries). */
#define SRV_JS_TICK_MS 1000
/* srv_js_open waits this long at most for the groups to lead. */
#define SRV_JS_READY_MS 30000

/* What a committed entry answers (the replica ctx maps to one of these). */
enum srv_js_pend_kind {
    SRV_JS_PEND_PUB = 1,    /* PubAck */
    SRV_JS_PEND_CREATE,     /* stream_create_response */
    SRV_JS_PEND_UPDATE,     /* stream_update_response */
    SRV_JS_PEND_DELETE,     /* stream_delete_response */
    SRV_JS_PEND_PURGE,      /* stream_purge_response */
    SRV_JS_PEND_MSG_DELETE, /* stream_msg_delete_response */
    /* A publish with Nats-Rollup: once stored, the leader proposes the
     * PURGE of what it rolls up; the PubAck waits for that PURGE. */
    SRV_JS_PEND_ROLLUP,       /* the PUBLISH */
    SRV_JS_PEND_ROLLUP_PURGE, /* its PURGE; seq = the stored message */
};

struct srv_js_pending {
    uint64_t id;
    enum srv_js_pend_kind kind;
    struct srv_stream *st; /* NULL while a meta entry awaits commit */
    uint64_t added_us;     /* srv_metrics_now_us() at add (PubAck latency) */
    uint8_t rollup;        /* ROLLUP: SRV_JS_ROLLUP_SUB or _ALL */
    uint64_t seq;          /* ROLLUP_PURGE: the rolled-up message's seq */
    char reply[];          /* NUL-terminated reply subject ("" = none) */
};

/* A mirror's pump (srv_stream_mirror.c): state of the leader that runs it,
 * never replicated; the position it resumes from is the applied
 * sm.mirror_pos (docs/decisions/0032-mirrors-pull-into-the-log.md). */
struct srv_mirror_pump {
    char origin[SRV_JS_NAME_BYTES_MAX + 1]; /* a source's: its name */
    uint64_t term;        /* the leader term `next` is valid in */
    uint64_t next;        /* next origin seq to read (0: from the position) */
    int64_t contact_ns;   /* monotonic time the origin was last read; 0 never */
    int64_t retry_ns;     /* backing off: no read before this */
    uint32_t backoff_ms;  /* the next wait after a failed read */
    enum srv_js_err jerr; /* the origin's last error; SRV_JS_OK none */
    char why[SRV_JS_ERR_DESC_BYTES_MAX];
    /* Reading an origin this node holds no intact replica of, through
     * the cluster (srv_stream_mirror_net.c): the one read in flight
     * (req_id 0: none), the reply's records not proposed yet, and the
     * origin's last seq as the serving node last said. */
    uint64_t req_id;
    int64_t req_ns;       /* monotonic time the read was sent */
    uint32_t tries;       /* reads failed in a row: which node to ask */
    uint8_t *rbuf;        /* a copy of the reply frame, NULL none */
    size_t rpos, rlen;    /* the next record's offset, the frame's size */
    uint32_t rleft;       /* records not proposed yet */
    uint64_t rnext;       /* the read continues there once they are */
    bool rmore;           /* the server stopped at a bound: read again */
    uint64_t origin_last; /* the origin's last seq: remote reads, external */
    /* A source stalled on a refused message (srv_stream_sm_source.c):
     * no retry before stall_ns, the next wait stall_ms (doubling,
     * bounded), and whether a retry read from the position is under way. */
    int64_t stall_ns;
    uint32_t stall_ms;
    bool stall_read;
    /* The largest record (subject, headers, payload) this pump proposed
     * in its term, 0 none yet: it sizes the window (srv_stream_mirror.c). */
    uint32_t rec_max;
    /* The origin read through the JetStream API (`external`,
     * srv_stream_mirror_ext.c): its consumer and queue; NULL none. */
    struct srv_mirror_ext *ext;
};

struct srv_stream {
    struct srv_js *js;
    struct srv_stream_config cfg; /* latest committed in the meta group */
    uint64_t nonce;
    int64_t created_ns;
    struct store_group_id gid;
    struct replica *r;
    bool leader;
    bool failed;      /* the group hit a store error: refuse writes */
    uint64_t cfg_ctx; /* pending create/update answered by CONFIG apply */
    struct srv_stream_sm sm;
    int64_t last_prop_ts; /* last leader timestamp stamped on a publish */
    void *consumers;      /* js-consumers' slot */
    /* Clustered (srv_js_cluster.h): the committed placement (n 0 on a node
     * that is not clustered), whether this node is one of its peers, and
     * the group's leader as Raft last told it here. */
    struct srv_jsc_placement place;
    bool placed;
    raft_node leader_node;
    raft_term leader_term;
    /* Since when (uv_now ms; 0: not so) this placed follower's group has
     * been led by a node the meta group removed, and when it last asked
     * that leader to hand over (srv_stream_cluster_depose). */
    uint64_t depose_since_ms;
    uint64_t depose_asked_ms;
    struct srv_mirror_pump mir;
    /* The pumps of its sources (srv_stream_feeds keeps them matching
     * cfg.sources by name); NULL none. */
    struct srv_mirror_pump *srcp;
    uint32_t nsrcp;
    uint32_t src_turn; /* which source the next round starts at */
    /* Its subjects in js->subjects (srv_js_index.c): one entry a subject
     * of cfg while it is indexed. */
    struct srv_js_isub *isubs;
    uint32_t nisubs;
    bool indexed; /* joined the index (srv_js_index_join), not left */
};

/* One subject of a stream in the index: the sublist entry first, so a
 * match's entry leads back to its stream. */
struct srv_js_isub {
    struct srv_sub sub;
    struct srv_stream *st;
};

struct srv_js {
    struct srv_server *srv;
    uv_loop_t *loop;
    struct store *store;
    struct replica_host *host;
    struct replica *meta;
    bool meta_leader;
    raft_incarnation inc;
    struct srv_stream **streams;
    uint32_t nstreams;
    /* The index of streams by subject and by name (srv_js_index.h);
     * index_off: an insert failed, lookups walk streams[] instead. */
    struct srv_sublist subjects;
    struct srv_hmap names;
    bool index_off;
    uint32_t nmirrors;       /* indexed streams with a mirror or sources */
    struct srv_hmap pending; /* 8-byte id -> struct srv_js_pending */
    uint64_t next_id;
    const struct srv_consumer_ops *cops;
    uv_timer_t tick;
    bool tick_open;
    uv_timer_t mirror_timer; /* the mirrors' pumps (srv_stream_mirror.c) */
    bool mirror_open;
    bool stopping;
    uint64_t api_total, api_errors;
    struct srv_mon_direct direct; /* DIRECT.GETs answered here (/jsz) */
    /* Streams the meta state names that failed to open (/healthz 503). */
    uint32_t streams_unopened;
    char unopened_why[256];
    /* Clustered JetStream (NULL when keeld runs without --cluster). */
    struct srv_jsc *jc;
    struct raft_config meta_cfg; /* latest applied meta configuration */
    raft_node meta_leader_node;
    bool meta_leader_seen;   /* a meta leader was known since start */
    struct srv_admin *admin; /* membership requests (srv_admin.c) */
    bool orphans_checked;    /* clustered: srv_js_orphans_tick ran */
    /* Groups (and their segment files) whose catalogue this node of one
     * rebuilt at start after a meta.lmdb reset (/healthz warns). */
    uint32_t rebuilt_groups;
    uint64_t rebuilt_segments;
};

/* ---- srv_js.c ---- */
/* Remember a reply to send when the entry commits; returns its ctx (0 when
 * reply is empty/NULL, or on OOM / SRV_JS_PENDING_MAX: then no ack is
 * promised and the caller answers 503). */
uint64_t srv_js_pending_add(struct srv_js *js, enum srv_js_pend_kind kind,
                            struct srv_stream *st, const char *reply,
                            bool *full);
/* Put back a record taken with srv_js_pending_take under a new id, for the
 * next entry of a chain (a rollup's PURGE); returns the id, or 0 when the
 * table is full (p stays the caller's). */
uint64_t srv_js_pending_readd(struct srv_js *js, struct srv_js_pending *p);
/* Take (remove) the pending record of ctx, or NULL. Caller frees. */
struct srv_js_pending *srv_js_pending_take(struct srv_js *js, uint64_t ctx);
/* Drop every pending record of st (its group closed: never answered). */
void srv_js_pending_drop_stream(struct srv_js *js, struct srv_stream *st);

/* Reply helpers: publish JSON o to reply (no-op when reply is empty);
 * they consume o. */
void srv_js_reply_json(struct srv_js *js, const char *reply, json_t *o);
void srv_js_reply_err(struct srv_js *js, const char *reply, const char *kind,
                      enum srv_js_err err, const char *detail);

/* Propose a meta entry (JSON object, consumed). */
int srv_js_meta_propose(struct srv_js *js, json_t *entry, uint64_t ctx,
                        char *errmsg);

/* Stream capturing a literal subject, or NULL. */
struct srv_stream *srv_js_stream_for_subject(struct srv_js *js,
                                             const char *subj, size_t len);

int64_t srv_js_now_ns(void);

/* The replica options every JetStream group (the meta group, each stream)
 * opens with: a group of one (node 1, this node's incarnation) in *boot
 * until the cluster layer names its voters, the JetStream election and
 * heartbeat timings, the server's snapshot interval; fsync and seed are
 * the group's own. opt->bootstrap points at boot. */
void srv_js_group_options(const struct srv_js *js, struct store_fsync fsync,
                          uint64_t seed, struct raft_config *boot,
                          struct replica_options *opt);

/* Clustered: create the meta group with the index-1 configuration cfg
 * (srv_js_cluster.c decided every seed agrees), or open it from disk
 * (cfg NULL). Returns 0 or a KEEL_E*. */
int srv_js_meta_bootstrap(struct srv_js *js, const struct raft_config *cfg,
                          char *errmsg);

/* ---- srv_js_limits.c (jetstream { max_memory_store, max_file_store }) ----
 */
/* The configured limits in bytes, -1 = none. */
void srv_js_limits_get(const struct srv_js *js, int64_t *max_memory,
                       int64_t *max_file);
/* Bytes held by the streams of one storage type on this node, and the sum
 * of their max_bytes (the reservation). */
void srv_js_limits_usage(const struct srv_js *js, enum srv_js_storage type,
                         uint64_t *used, uint64_t *reserved);
/* A create or update of cfg (an update replaces the reservation of the
 * stream of the same name): 0, or KEEL_ELIMIT with *jerr 10047 (file) or
 * 10028 (memory) when the reservations would pass the limit. */
KEEL_MUST_USE int
srv_js_limits_check_config(const struct srv_js *js,
                           const struct srv_stream_config *cfg,
                           enum srv_js_err *jerr);
/* A publish to st: 0, or KEEL_ELIMIT with *jerr 10023 when the streams of
 * its storage type already hold more than the limit. */
KEEL_MUST_USE int srv_js_limits_check_publish(const struct srv_js *js,
                                              const struct srv_stream *st,
                                              enum srv_js_err *jerr);

/* ---- srv_js_alone.c (a node without a cluster) ---- */
/* Before the meta group opens: report a rebuilt meta catalogue and keep
 * the incarnation the meta log names (store_incarnation_adopt). */
int srv_js_alone_open(struct srv_js *js, char *errmsg);

/* ---- srv_js_meta.c (clustered meta group) ---- */
/* The meta group's id, the same on every node. */
void srv_js_meta_gid(struct store_group_id *gid);
/* Create the cluster layer; open the meta group when it is on disk. */
int srv_js_cluster_open(struct srv_js *js, const char *store_dir, char *errmsg);
/* Clustered replica options of the meta group (self, boot, timers, send)
 * and its transport registration. */
int srv_js_meta_cluster_opts(struct srv_js *js, const struct raft_config *boot,
                             struct replica_options *opt,
                             struct replica_callbacks *cbs, char *errmsg);
/* meta role_changed: the leader directory follows. */
void srv_js_meta_role_cluster(struct srv_js *js, struct replica *r,
                              raft_node leader);
/* A meta entry about to be proposed: a create gets its placement. */
int srv_js_meta_place(struct srv_js *js, json_t *entry, char *errmsg);
/* The tags a stream config's placement asks for (none when it has none). */
void srv_js_placement_tags(const json_t *placement, struct srv_tags *out);
/* Names and incarnations of a committed placement into the directory. */
void srv_js_meta_learn(struct srv_js *js, const struct srv_jsc_placement *pl);
/* Clustered: answer a committed create/update now, on the meta leader
 * (the stream's leader may be another node); returns the ctx left for the
 * stream's CONFIG entry (0 once answered; ctx unchanged when not
 * clustered). */
uint64_t srv_js_meta_answer(struct srv_js *js, struct srv_stream *st,
                            uint64_t ctx, bool created);
/* Voters of the meta group (1 when not clustered). */
uint32_t srv_js_meta_voters(const struct srv_js *js);

/* ---- srv_stream.c ---- */
int srv_stream_open(struct srv_js *js, const struct srv_stream_config *cfg,
                    uint64_t nonce, int64_t created_ns, struct srv_stream **out,
                    char *errmsg);
/* Clustered open: pl is the committed placement (its gid names the
 * group); only a placed node opens the replica, bootstrapped with the
 * placement as the index-1 configuration (docs/design.md §3.2 M5).
 * pl NULL or pl->n 0: as srv_stream_open. */
int srv_stream_open_placed(struct srv_js *js,
                           const struct srv_stream_config *cfg, uint64_t nonce,
                           int64_t created_ns,
                           const struct srv_jsc_placement *pl,
                           struct srv_stream **out, char *errmsg);

/* ---- srv_js_cluster_stream.c (clustered stream groups) ---- */
/* Record pl on st (gid, placed); without a placement st->placed = true. */
void srv_stream_cluster_place(struct srv_stream *st,
                              const struct srv_jsc_placement *pl);
/* Replica options of a placed stream: rc = the placement, opt->self,
 * bootstrap, timers; registers the transport. */
int srv_stream_cluster_opts(struct srv_stream *st, struct raft_config *rc,
                            struct replica_options *opt, char *errmsg);
/* A committed meta "move" entry: the replica on node "from" goes to the
 * one-member placement of e (same group); the node it goes to opens the
 * group on an empty log. The stream leader carries it out (srv_admin). */
void srv_stream_cluster_move(struct srv_stream *st, const json_t *e);
/* A committed new placement pl of st (same group id; a move, or a
 * num_replicas update): a node newly placed opens the group on an empty
 * log; a node no longer placed keeps its group until the stream leader
 * removed it from the group. */
void srv_stream_cluster_replace(struct srv_stream *st,
                                const struct srv_jsc_placement *pl);
/* Open st's replica now (a move placed st on this node). */
int srv_stream_open_replica(struct srv_stream *st, char *errmsg);
/* keel cluster recover from a quarantined log (srv_admin.c, decision
 * 0031): close this node's empty replica, write the verified quarantined
 * run 1..keep as its log (replica_restore_quarantined) and open it again.
 * KEEL_EINVAL when the replica's live log is not empty. */
int srv_stream_restore_quarantined(struct srv_stream *st, uint64_t keep,
                                   struct store_qlog *out, char *errmsg);
/* A placed follower whose group a node out of the meta group leads asks
 * it to hand over (finding F21, the F13 residual); srv_admin_tick. */
void srv_stream_cluster_depose(struct srv_stream *st);
/* Before the replica closes: leave the transport and leader directory. */
void srv_stream_cluster_close(struct srv_stream *st);
/* stream role_changed: leader node, term and the leader directory. */
void srv_stream_role_cluster(struct srv_stream *st, struct replica *r,
                             raft_node leader);
/* Close the group; deleted: also remove its store files. Frees st. */
void srv_stream_close(struct srv_stream *st, bool deleted);
/* Propose a stream entry (publish, purge, delete, config, tick). */
int srv_stream_propose_entry(struct srv_stream *st,
                             const struct keel_stream_entry *e, uint64_t ctx,
                             char *errmsg);
/* Leader's publish: stamp ts, encode, propose. */
int srv_stream_publish(struct srv_stream *st, const char *subj, size_t slen,
                       const char *hdr, size_t hlen, const char *data,
                       size_t dlen, uint64_t ctx, char *errmsg);
/* srv_stream_xform.c. The subject a publish is stored under: *subj
 * unchanged, or its subject_transform written into buf (KEEL_ELIMIT when
 * that is too long). */
int srv_stream_subject_for(const struct srv_stream *st, const char **subj,
                           size_t *slen, char buf[SRV_JS_SUBJECT_BYTES_MAX + 1],
                           char *errmsg);
/* Before applying e: the last seq of its subject (Nats-Last-Sequence), 0
 * without republish. After it stored seq: republish it when this node
 * leads in the entry's term. */
uint64_t srv_stream_republish_prev(const struct srv_stream *st,
                                   const struct keel_stream_entry *e);
void srv_stream_republish(struct srv_stream *st, uint64_t term,
                          const struct keel_stream_entry *e, uint64_t seq,
                          uint64_t prev);
/* The stream info JSON ("config", "created", "state", "cluster", "ts"). */
json_t *srv_stream_info_json(struct srv_stream *st, const char *type,
                             const char *subjects_filter, bool deleted_details);
/* Copy a config (through its JSON form). */
int srv_stream_config_copy(const struct srv_stream_config *src,
                           struct srv_stream_config *dst, char *errmsg);
/* A committed meta create/update: propose the CONFIG entry (now when
 * leader, else at leadership); ctx's reply is sent when it applies. */
void srv_stream_config_request(struct srv_stream *st, uint64_t ctx);
/* A tick entry when the oldest message passed max_age (leader only). */
void srv_stream_maybe_tick(struct srv_stream *st, int64_t now_ns);

/* ---- srv_stream_mirror.c (docs/decisions/0032-mirrors-pull-into-the-log.md)
 * ---- */
/* Start and stop the timer that runs every mirror's pump on its leader. */
void srv_js_mirror_open(struct srv_js *js);
void srv_js_mirror_close(struct srv_js *js);
/* One record a read of the origin yields: the message at origin seq
 * (m NULL: a position-only record past seqs the origin dropped unseen)
 * and how many origin seqs before it were dropped unseen. */
struct srv_mirror_rec {
    uint64_t seq;
    uint64_t lost;
    const struct srv_stream_msg *m;
};
/* Takes one record; nonzero stops the read before it (not consumed). */
typedef int (*srv_mirror_emit_fn)(void *arg, const struct srv_mirror_rec *r);
/* Read the applied state of origin o from *next on (a replica on this
 * node, every message committed), the nf filters (0: all) and opt_start_time
 * since (0: none) applied, emitting at most max records in seq order;
 * *next moves past what was emitted or skipped. Work is bounded by
 * SRV_STREAM_SCAN_MAX skips. Returns true when more may follow at once
 * (a record emitted or the scan bound reached); a store error sets
 * *failed (a KEEL_E*) and err. (srv_stream_mirror.c) */
bool srv_stream_mirror__read(struct srv_stream *o, uint64_t *next,
                             const char *const *filters, size_t nf,
                             int64_t since, uint32_t max,
                             srv_mirror_emit_fn emit, void *arg, int *failed,
                             char *err);
/* Can this node's replica of o be read (placed, opened, not failed, not
 * amnesiac)? */
bool srv_stream_mirror__readable(const struct srv_stream *o);
/* One origin a stream reads: its mirror, or one of its sources
 * (docs/decisions/0035-sources-share-the-mirror-pump.md). The same pump
 * and reader serve both; only the entry proposed and the position read
 * differ. */
struct srv_feed {
    const struct srv_stream_mirror *o; /* the origin's config */
    struct srv_mirror_pump *p;         /* its pump on this leader */
    bool source;                       /* one of cfg.sources */
};
/* The feeds of st (its mirror, or its sources in config order), the
 * sources' pumps made to match the config first. Returns how many; f[i]
 * for i below it (f has SRV_JS_SOURCES_MAX entries). */
uint32_t srv_stream_feeds(struct srv_stream *st, struct srv_feed *f);
/* The stream's applied position in the feed's origin. */
uint64_t srv_stream_feed_pos(const struct srv_stream *st,
                             const struct srv_feed *f);
/* Propose one record as a MIRROR entry (a mirror) or a SOURCE entry (a
 * source: the stream's own seq, a Nats-Stream-Source header) of st
 * (srv_stream_mirror.c). Returns 0 or a KEEL_E* (KEEL_EBUSY: the
 * proposal queue is full). */
int srv_stream_mirror__propose(struct srv_stream *st, const struct srv_feed *f,
                               const struct srv_mirror_rec *r, char *err);
/* The pump's step for an origin on no intact replica here: read it
 * through the cluster from a node that holds one (srv_stream_mirror_net.c,
 * SRV_CLUSTER_JS_MIRROR frames), proposing while fewer than window
 * entries are in flight (*inflight, counted up). Returns true on
 * progress. */
bool srv_stream_mirror__remote(struct srv_stream *st, const struct srv_feed *f,
                               struct srv_stream *o, uint64_t *inflight,
                               uint32_t window);
/* Forget a remote read in flight and the records not proposed (a new
 * term, leadership lost, the stream closed). */
void srv_stream_mirror__drop(struct srv_mirror_pump *p);
/* The pump's step for an origin with `external`: read it through the
 * JetStream API under its prefix (srv_stream_mirror_ext.c), proposing
 * while fewer than window entries are in flight. True on progress. */
bool srv_stream_mirror__external(struct srv_stream *st,
                                 const struct srv_feed *f, uint64_t *inflight,
                                 uint32_t window);
/* Delete the origin's consumer, unsubscribe and free what was queued. */
void srv_stream_mirror__ext_drop(struct srv_mirror_pump *p);
/* Drop every pump of st and free the sources' (the stream closes). */
void srv_stream_mirror__close(struct srv_stream *st);
/* Register the SRV_CLUSTER_JS_MIRROR handler once the cluster is up, and
 * clear it at close. */
void srv_stream_mirror__attach(struct srv_js *js);
void srv_stream_mirror__detach(struct srv_js *js);
/* Set a pump's error and back off (doubling, bounded). */
void srv_stream_mirror__fail(const struct srv_stream *st,
                             const struct srv_feed *f, enum srv_js_err jerr,
                             const char *why);
/* The origin was read: clear the error and the backoff. */
void srv_stream_mirror__contact(struct srv_mirror_pump *p);
/* Run the pumps again now (a reply arrived). */
void srv_stream_mirror__kick(struct srv_js *js);
/* The stream info "mirror" block {name, lag, active, error?}; NULL when
 * out of memory. */
json_t *srv_stream_mirror_info(struct srv_stream *st);
/* The stream info "sources" array of such blocks, in config order; NULL
 * when out of memory. */
json_t *srv_stream_sources_info(struct srv_stream *st);

/* ---- srv_js_api.c ---- */
void srv_js_api(struct srv_js *js, const char *subject, size_t slen,
                const char *reply, const char *body, size_t len);
/* Last seq of any subject matching filter (a valid subject, wildcards
 * allowed), 0 when none. */
uint64_t srv_js_api__last_matching(const struct srv_stream *st,
                                   const char *filter);
/* The error a MSG.GET / DIRECT.GET of seq that failed with rv answers:
 * SRV_JS_EBAD_REQUEST (KEEL_EINVAL), SRV_JS_ENO_MESSAGE only when the
 * absence is final, else the retryable SRV_JS_EUNAVAILABLE. */
enum srv_js_err srv_js_api__get_error(const struct srv_stream *st, uint64_t seq,
                                      int rv);

/* ---- srv_js_direct.c ---- */
/* $JS.API.DIRECT.GET.<rest> with its raw body: answered with messages and
 * status lines (nats-server 2.11's direct get, batches and multi_last
 * included), or nothing when reply is empty. */
void srv_js_direct(struct srv_js *js, const char *rest, const char *reply,
                   const char *body, size_t len);
/* Answer $JS.API.DIRECT.GET.<stream>[.<key>] from st's applied state
 * only when the request names one message and st holds it (a follower, or
 * a mirror of the stream with mirror_direct; the caller checked that st is
 * current, docs/decisions/0036-followers-answer-direct-gets-while-current.md).
 * True when sent; false, with nothing sent, for anything else (a batch,
 * multi_last, a bad request, a miss): the stream's leader answers those. */
bool srv_js_direct_one(struct srv_js *js, struct srv_stream *st,
                       const char *key, const char *reply, const char *body,
                       size_t len);

/* ---- srv_js_domain.c ---- */
/* jetstream { domain }: s (n bytes) is $JS.<domain>.API.<rest> of this
 * node's domain. Writes $JS.API.<rest> to out (cap bytes, no NUL) and its
 * length to out_len, and returns true; false when s is anything else. */
bool srv_js_domain_subject(const struct srv_js *js, const char *s, size_t n,
                           char *out, size_t cap, size_t *out_len);
/* Adds "domain" to o when this node has one (nats-server 2.9.10's account
 * info, stream info and PubAck). */
void srv_js_domain_add(const struct srv_js *js, json_t *o);

/* ---- srv_js_direct_here.c ---- */
struct srv_cmd;
/* A DIRECT.GET answered on this node before it is forwarded to the
 * stream's leader: by a current follower of the stream, or by a current
 * replica of a mirror of it with mirror_direct. True when answered here. */
bool srv_js_direct_here(struct srv_js *js, const struct srv_cmd *cmd,
                        const char *reply);
/* A current replica on this node of a mirror of origin with
 * mirror_direct, or NULL. */
struct srv_stream *srv_js_direct_mirror_of(struct srv_js *js,
                                           const char *origin);

#endif
