/* srv_metrics: the stats the monitoring thread serves (docs/design.md §6).
 *
 * The loop thread owns every counter. On request (an HTTP query asks
 * through a uv_async and waits at most SRV_MON_REFRESH_WAIT_MS) it copies
 * what /connz, /jsz, /healthz and /metrics need into an immutable,
 * reference-counted struct srv_mon_snap. The HTTP thread reads only such
 * snapshots; it never touches loop-owned structures.
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "replica.h"
#include "srv_conn.h"
#include "srv_server.h"
#include "srv_turn.h"
#include "store.h"

/* A latency histogram: counts[i] counts observations at or below
 * srv_mon_hist_bounds_us[i] (cumulative sums are made when printed). */
struct srv_mon_hist {
    uint64_t counts[SRV_MON_HIST_BUCKETS];
    uint64_t count;
    uint64_t sum_us;
};

/* Upper bounds in microseconds; the last bucket is +Inf (UINT64_MAX). */
extern const uint64_t srv_mon_hist_bounds_us[SRV_MON_HIST_BUCKETS];

/* Add one observation (pure; no locking: the owner serialises). */
void srv_mon_hist_add(struct srv_mon_hist *h, uint64_t us);

struct srv_mon_conn {
    uint64_t cid;
    char ip[64];
    int port;
    struct srv_conn_mon mon;
    uint64_t subscriptions;
    uint64_t pending_bytes;
};

/* One Raft group on this node. */
struct srv_mon_group {
    char name[SRV_JS_NAME_BYTES_MAX + 8]; /* "_meta_" or the stream name */
    bool is_meta;
    bool started;
    const char *role; /* "leader", "follower", "candidate", ... (static) */
    uint64_t leader;  /* raft node id of the known leader; 0: none */
    uint64_t term, last_index, commit, applied;
    uint64_t faulty; /* first faulty index; 0: none */
    bool amnesiac;
    bool failed;                       /* the group hit a store error */
    uint64_t repairs, repairs_refused; /* replica_info */
    /* InstallSnapshot (replica_install_info): installed from a leader,
     * spooled as leader, aborted transfers, and refusals of the same
     * snapshot's content in a row (REPLICA_INSTALL_REPEATS_MAX stops the
     * group), and the last failure's text ("": none yet). */
    uint64_t installs, install_sends, install_failures, install_repeats;
    char install_error[KEEL_ERRMSG_MAX];
};

struct srv_mon_stream {
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    uint64_t messages, bytes, first_seq, last_seq, consumers;
    int64_t replicas;
    bool elsewhere; /* placed on other nodes only: no group here */
    struct srv_mon_group group;
};

/* DIRECT.GETs answered on a node, by the replica that answered: the
 * stream's leader (or a node of one), a current follower, a mirror with
 * mirror_direct (docs/decisions/0036). */
struct srv_mon_direct {
    uint64_t leader, follower, mirror;
};

struct srv_mon_snap {
    int refs; /* under the metrics mutex */
    uint64_t gen;
    uint64_t taken_ms;    /* srv_now_ms() when gathered */
    uint64_t loop_now_ms; /* uv_now() then (the clock of conns' last_ms) */
    struct srv_stats stats;
    uint64_t start_ms;
    /* Conns: the first SRV_MON_CONNS_MAX in accept order. */
    struct srv_mon_conn *conns;
    size_t nconns;
    size_t nconns_total;
    /* JetStream (js_enabled false: the rest is zero). */
    bool js_enabled;
    char store_dir[4096];                     /* as srv_config.store_dir */
    char domain[SRV_JS_DOMAIN_BYTES_MAX + 1]; /* jetstream { domain } */
    int64_t max_memory, max_storage; /* jetstream { } limits, -1 = none */
    struct srv_mon_group meta;
    struct srv_mon_stream *streams;
    size_t nstreams;
    uint64_t consumers, messages, bytes;
    uint64_t api_total, api_errors;
    struct srv_mon_direct direct;
    uint32_t streams_unopened; /* named by the meta state, not opened */
    bool meta_outsider; /* clustered, waiting to be added to the meta group */
    bool meta_joining;  /* joining through a solo seed, not a voter yet */
    char unopened_why[256];
    /* The store's counters and power-of-two histograms (fdatasync latency
     * in us, records per write batch), as its sync threads counted them. */
    struct store_stats store;
    uint64_t elections;           /* times a local group became leader */
    uint64_t consumer_visits;     /* consumers the engine's runs visited */
    unsigned quarantined_files;   /* <data>/quarantine, orphans aside */
    unsigned quarantined_orphans; /* <data>/quarantine/orphans */
    uint32_t rebuilt_groups;      /* catalogues a node of one rebuilt at
                                     start (meta.lmdb reset) */
    uint64_t rebuilt_segments;
    struct replica_scrub_stats scrub;
    struct srv_mon_hist puback; /* publish proposal to PubAck */
    /* Loop turns (srv_turn.c): a turn of seconds starves every link and
     * group of the node (docs/cluster.md, "Loop turns"). */
    struct srv_turn_stats turn;
};

struct srv_metrics;

/* Create the metrics hub on the loop thread (after srv_server_init). The
 * async handle is unref'd: it never keeps the loop alive. Returns 0 or
 * KEEL_ENOMEM. */
KEEL_MUST_USE int srv_metrics_init(struct srv_server *srv, uv_loop_t *loop,
                                   struct srv_metrics **out);

/* Loop thread, as the server stops: close the async handle and release
 * every waiting HTTP query (they get the last snapshot). Idempotent; NULL
 * is fine. */
void srv_metrics_stop(struct srv_metrics *m);

/* After the loop ended and the monitor thread stopped: free m. */
void srv_metrics_free(struct srv_metrics *m);

/* Any thread but the loop's: a snapshot refreshed through the loop (a
 * bounded wait; the previous snapshot if the loop does not answer). Returns a
 * reference the caller drops with srv_metrics_release, or NULL when none could
 * be made (out of memory before the first snapshot). */
struct srv_mon_snap *srv_metrics_acquire(struct srv_metrics *m);
void srv_metrics_release(struct srv_metrics *m, struct srv_mon_snap *s);

/* Loop-thread hooks (m may be NULL: monitoring off or not yet created). */
void srv_metrics_puback_observe(struct srv_server *srv, uint64_t us);
void srv_metrics_election(struct srv_server *srv);
/* n more consumers visited by the consumer engine (srv_cengine_run). */
void srv_metrics_consumer_visits(struct srv_server *srv, uint64_t n);

/* Monotonic microseconds (for latency stamps). */
uint64_t srv_metrics_now_us(void);

/* A layer above fills its part of each snapshot (JetStream: streams,
 * groups, store counters) on the loop thread; without one js_enabled stays
 * false. Returns 0 or KEEL_ENOMEM (the snapshot is skipped). */
typedef int (*srv_metrics_gather_fn)(void *arg, struct srv_mon_snap *snap);
void srv_metrics_set_gather(struct srv_metrics *m, srv_metrics_gather_fn fn,
                            void *arg);

/* What keeld registers with the NATS core (srv_server_set_mon_hooks, arg
 * the struct srv_metrics): stop is srv_metrics_stop. */
extern const struct srv_mon_hooks srv_metrics_mon_hooks;

/* ---- srv_metrics_health.c: the verdicts over a snapshot (pure) ---- */
/* Health per docs/design.md §6: writes a reason into why (len bytes) and
 * returns false while any local group is failed, faulty, amnesiac or not caught
 * up, or JetStream has no meta leader. Pure over snap. */
bool srv_mon_healthy(const struct srv_mon_snap *snap, char *why, size_t len);

/* The meta part of that verdict alone (/healthz?js-server-only): this node
 * is a member of the meta group, knows its leader and its meta replica is
 * healthy. True when JetStream is off. Pure over snap. */
bool srv_mon_healthy_meta(const struct srv_mon_snap *snap, char *why,
                          size_t len);

/* The part of that verdict about one group (failed, faulty, amnesiac, not
 * caught up). Pure. */
bool srv_mon_group_healthy(const struct srv_mon_group *g, char *why,
                           size_t len);

#endif
