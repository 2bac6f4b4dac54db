/* keel-faults: the Jepsen-style fault suite (issue 8, docs/faults.md
 * "How a run is checked"). Publishers write unique values p<k>-<n> with
 * acks and record each attempt as ok / fail / indeterminate; a consumer
 * reads concurrently; a nemesis injures the node(s) meanwhile; then every
 * fault is healed, the recovery time measured, the stream read back in
 * full through the server, every node stopped cleanly and its data
 * directory dumped with `keel store dump`, and the checker counts lost,
 * divergent, duplicated and never-published values.
 */
#ifndef KEEL_FAULTS_H
#define KEEL_FAULTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>
#include <nats/nats.h>

#include "harness.h"
#include "netns.h"

#define F_PUBS_MAX 8
/* Attempts per publisher and run: values are p<k>-<6 digits> (f_slot_of,
 * faults_check.c), so at most 999,999. */
#define F_PER_PUB_MAX 999999
#define F_NODES_MAX 5
#define F_SEQS_MAX (F_PUBS_MAX * F_PER_PUB_MAX)
#define F_VALUE_BYTES 24
#define F_PUB_WAIT_MS 2000      /* one publish's ack wait */
#define F_RECOVERY_MS_MAX 20000 /* heal to first successful publish */
#define F_DRAIN_MS_MAX 30000    /* heal to every acked value consumed */
#define F_DRAIN_IDLE_MS 5000    /* ... or this long without a delivery */
#define F_READ_MS_MAX 60000     /* the final read: 60 s, plus */
/* ... plus 2 ms per sequence: a soak's 400,000 values, one request each,
 * read at 3,000/s under load 30; a 60 s bound cut the read and counted the
 * rest lost. */
#define F_READ_US_PER_SEQ 2000
#define F_STREAM "FAULTS"
#define F_SUBJECT "faults.v"
/* The mirror workload (--mirror, faults_mirror.c): a mirror of F_STREAM. */
#define F_MIRROR "FAULTSMIR"
/* The aggregate workload (--aggregate, faults_aggregate.c): an R1 stream
 * sourcing F_STREAM and F_MIRROR. */
#define F_AGG "FAULTSAGG"
#define F_AGG_SOURCES 2
#define F_CONVERGE_MS_MAX 30000 /* heal to every replica holding the log */
#define F_NATS_PORT 4222        /* nats-server in a namespace: fixed ports */
#define F_NATS_HTTP_PORT 8222

struct f_run_ctx;

enum f_outcome {
    F_NONE = 0, /* never attempted */
    F_PENDING,  /* sent, no answer yet */
    F_ACKED,    /* acked with a sequence */
    F_FAILED,   /* a JetStream error: not stored */
    F_INDET,    /* timeout or connection loss: may or may not be stored */
};

/* What the checker expects of a nemesis (docs/faults.md). */
enum f_expect {
    F_EXPECT_ALL,     /* every acked value served, nothing divergent */
    F_EXPECT_FLAGGED, /* R1 media fault: an acked value may be unavailable
                         only if the node flags damage, and its bytes are
                         still on disk (never deleted) */
};

/* Which nodes one event hits in a cluster (one node: always node 0).
 * Damage that stays (media faults, power loss) hits the same victims,
 * chosen once per run among the stream's peers, so a stream group never
 * has more damaged replicas than it tolerates. */
enum f_who {
    F_WHO_MINORITY = 0, /* kill/stop: a random minority of the stream's
                           peers, drawn again for every event; damage: a
                           fixed minority */
    F_WHO_ONE,          /* one fixed peer */
    F_WHO_LEADER,       /* the stream's leader at the time of the event */
    F_WHO_ALL,          /* every node at once */
};

/* Partitions (cluster only): blackhole routes between node namespaces;
 * clients still reach every node. */
enum f_cut {
    F_CUT_NONE = 0,
    F_CUT_LEADER, /* the stream leader cut from every other node */
    F_CUT_HALF,   /* a random minority of the nodes cut from the rest */
    F_CUT_BRIDGE, /* two sides that only one node (the bridge) joins */
};

struct f_nemesis {
    const char *name;
    enum f_expect expect;
    /* Injure node i while it is stopped (NULL: nothing but the stop). */
    int (*injure)(struct f_run_ctx *ctx, int node);
    bool stop; /* SIGSTOP/SIGCONT instead of kill -9 + restart */
    /* Power loss (tools/faults-powerloss --mode): NULL none, "drop" or
     * "reorder"; keeld runs under the LD_PRELOAD shim. */
    const char *power;
    enum f_who who;
    enum f_cut cut;
};

struct f_config {
    const char *nemesis;
    const char *policy; /* keeld --fsync for the stream */
    int nodes;
    int replicas; /* the stream's num_replicas (<= nodes) */
    int pubs;
    int rounds;   /* nemesis events */
    int round_ms; /* traffic between events */
    uint64_t seed;
    const char *urls;    /* external cluster: no nemesis, no dump */
    const char *keel;    /* keel binary for store dump */
    const char *work;    /* temp root (default /tmp) */
    bool nats_server;    /* nodes run nats-server -js (no store dump) */
    const char *pl_shim; /* $KEEL_PL_SHIM: libkeel_powerloss.so */
    const char *pl_tool; /* $KEEL_PL_TOOL: tools/faults-powerloss */
    int duration_s;      /* > 0: events until this long has passed (the
                            soak, docs/faults.md "Soak"), not rounds */
    bool mirror;         /* also run the mirror workload (faults_mirror.c) */
    bool sources;        /* ... with a stream sourcing it instead of a
                            mirror (--sources) */
    bool aggregate;      /* the mirror workload and an R1 stream sourcing
                            both origin and mirror (--aggregate) */
    int member_wait_s;   /* the CLI's --wait for one membership change
                            (--member-wait; default 30 s) */
    bool verbose;
};

struct f_attempt {
    uint8_t outcome;
    uint64_t seq;
};

/* The soak's mixed nemesis: how many events of each kind it drew. */
#define F_MIXED_KINDS 16

struct f_run_ctx {
    struct f_config cfg;
    /* The nemesis of the event under way. The mixed nemesis points it at
     * the kind it drew for one event and back at itself after. */
    const struct f_nemesis *nem;
    const struct f_nemesis *run_nem; /* the run's own (--nemesis) */
    bool shim;                       /* nodes start under the power shim */
    long pace_us;                    /* >= this between one publisher's
                                        publishes (0: as fast as acks come) */
    int mixed_count[F_MIXED_KINDS];  /* events per kind (mixed only) */
    bool moved;                      /* a membership event ran */
    int events;                      /* nemesis events in the run */
    uint64_t rng;
    struct h_keeld k[F_NODES_MAX]; /* one node: loopback */
    bool cluster;                  /* nodes > 1: c->net, one netns each */
    struct h_netns net;
    bool host[F_NODES_MAX];   /* node i holds a replica of the stream */
    bool victim[F_NODES_MAX]; /* fixed victims of damage nemeses */
    int converge_ms;          /* heal to identical logs (-1: never) */
    pthread_mutex_t mu;
    struct f_attempt *att; /* [pub * F_PER_PUB_MAX + n] */
    uint32_t next_n[F_PUBS_MAX];
    volatile int stop_pubs;
    volatile int stop_consumer;
    uint64_t consumed;       /* deliveries to the concurrent consumer */
    uint8_t *consumer_seen;  /* per attempt slot: delivered at least once */
    uint8_t *destroyed;      /* per slot: acked value whose bytes an injury
                                destroyed (absent from disk right after it) */
    uint64_t consumer_alien; /* values never published */
    int injured;             /* injuries applied */
    char injury_log[1024];   /* what was injured, for the report */
    long long recovery_ms;
    long long drain_ms;   /* heal to every acked value consumed (-1: never) */
    int restart_failed;   /* keeld refused to start after an event */
    int unclean_stops;    /* keeld did not exit 0 on the final SIGTERM */
    int member_failed;    /* a membership change the cluster did not carry
                             out in time (faults_member.c): fails the run */
    char member_why[256]; /* the first such failure, for the info line */
    int member_undone;    /* removals that did not complete in time and
                             were undone: the node added back and the
                             stream settled (reported, not a failure) */
    char undone_why[256]; /* the first such removal's reason */
};

/* One node's or the read's view: value slot per sequence/index. */
struct f_view {
    uint32_t *slot_at; /* [seq or index] -> attempt slot + 1 (0 none) */
    uint64_t n;        /* highest seq/index + 1 */
    uint64_t bad;      /* unreadable (checksum bad / server error) */
    uint64_t alien;    /* a publish whose value is not ours */
    bool cut;          /* the final read ran out of time before the end */
    bool flagged;      /* the node reported damage (faulty, lost, amnesia) */
    bool lagging;      /* the node was down at the end: it never caught up */
    bool dump_failed;  /* keel store dump failed: nothing known, nothing
                          excused (a failed dump is not damage the node
                          flags itself) */
    uint64_t first_damage; /* lowest flagged index (1 when unknown) */
    uint64_t first_index;  /* the log's first index: above 1 when the
                              replica caught up by InstallSnapshot and holds
                              what precedes it in its snapshot only */
    char flags[128];
};

struct f_result {
    uint64_t attempts, acked, failed, indet;
    uint64_t lost;            /* acked, not served, not explained */
    uint64_t unavailable;     /* acked, not served, node flagged damage */
    uint64_t on_disk_missing; /* acked whose bytes are nowhere on disk */
    uint64_t divergent;
    uint64_t dup;
    uint64_t never_published;
    uint64_t misplaced;     /* acked seq holds another value */
    uint64_t failed_stored; /* an error reply, yet served (fails) */
    uint64_t read_total;
    uint64_t consumer_missing; /* acked, served, never delivered */
    uint64_t dump_failed;      /* nodes whose store dump failed (fails) */
    bool pass;
};

/* Node i's process and directories (loopback or namespace). */
static inline struct h_keeld *f_k(struct f_run_ctx *c, int i)
{
    return c->cluster ? &c->net.node[i].k : &c->k[i];
}

/* faults_cluster.c: the netns cluster (keeld or nats-server), the stream's
 * peers and leader, partitions and the convergence wait. */
/* Dirs and network of cfg.nodes namespaces (no node started yet). */
int f_cluster_prepare(struct f_run_ctx *c);
/* Start node i (keeld or nats-server) on its fixed ports. */
int f_cluster_node_start(struct f_run_ctx *c, int i);
/* Set (on) or clear the power shim's environment for node i's spawn. */
void f_power_env(struct f_run_ctx *c, int i, bool on);
/* The run takes snapshots often (snapshot and mixed nemeses). */
bool f_takes_snapshots(const struct f_run_ctx *c);
/* c->host from STREAM.INFO (bounded wait for all replicas). 0 or -1. */
int f_cluster_hosts(struct f_run_ctx *c, const char *urls);
/* The stream leader's node index, or -1 (bounded wait). */
int f_cluster_leader(struct f_run_ctx *c, const char *urls);
/* Cut per c->nem->cut; cut[i * F_NODES_MAX + j] records each cut pair. */
int f_cluster_cut(struct f_run_ctx *c, int leader, bool *cut);
void f_cluster_heal(struct f_run_ctx *c, bool *cut);
/* Wait (bounded) until every running, undamaged replica holds the same
 * fully applied log: ms taken, or -1. */
int f_cluster_converge(struct f_run_ctx *c);
/* Node i's URL first, then the others: a client that fails over. */
void f_urls_from(struct f_run_ctx *c, int first, char *out, size_t len);
/* The node index named name ("n1".."n5"), or -1. */
int f_node_of(const struct f_run_ctx *c, const char *name);
/* STREAM.INFO's cluster block through any node of urls (NULL when no
 * answer within a second or an error; json_decref it). */
struct json_t *f_stream_cluster(const char *urls);

/* faults_member.c: the membership nemesis (issue 9). One event: a
 * leadership transfer (meta or stream), a stream replica moved, or a node
 * removed (alive or killed), its storage wiped and the node added back,
 * all through the keel CLI. Returns 0; a change the cluster did not carry
 * out counts in c->member_failed (the reason printed) and ends the
 * changes of the run (the workload and the checks go on). */
int f_member_event(struct f_run_ctx *c);
/* After the run: wait (bounded) until every node is a meta voter and the
 * stream has its replicas, not reconfiguring; c->host from that. 0 or
 * -1 (c->member_failed counts it). */
int f_member_settle(struct f_run_ctx *c, const char *urls);

/* faults_mirror.c: the mirror workload. An R<replicas> mirror of F_STREAM,
 * created before it so that placement by load puts it on other nodes
 * (its leader off the origin's nodes at least some of the time); once
 * healed, the checker compares it with the origin read back. */
struct f_mirror_result {
    bool caught_up;       /* same last seq and count within the bound */
    long long catchup_ms; /* from the check's start (-1: never) */
    uint64_t read;        /* seqs read back from the mirror */
    uint64_t missing;     /* acked origin value not at its seq */
    uint64_t mismatch;    /* a seq whose value differs from the origin's
                             (a gap, a reorder, one extra or missing) */
    uint64_t dup;         /* a value at two seqs of the mirror */
    uint64_t alien;       /* a value never published */
    bool leader_off;      /* the mirror's leader hosts no origin replica */
    char placement[200];  /* origin and mirror peers, for the report */
    bool pass;
};
int f_mirror_check(struct f_run_ctx *c, const char *urls,
                   const struct f_view *origin, struct f_mirror_result *mr);
/* mr's counts (missing, mismatch, dup, alien, read) from the origin's and
 * the mirror's read-back views and c's acked attempts. */
void f_mirror_compare(const struct f_run_ctx *c, const struct f_view *origin,
                      const struct f_view *mv, struct f_mirror_result *mr);
/* Poll done(js) every 200 ms until it holds or F_CONVERGE_MS_MAX passed;
 * *reached says which. The ms it took, or -1. */
long long f_wait_js(jsCtx *js, bool (*done)(jsCtx *js), bool *reached);
/* The node index of stream's leader, or -1 (one attempt). */
int f_leader_node(struct f_run_ctx *c, const char *urls, const char *stream);
/* Peer names of stream's group into out ("n1*,n2": * leads) and its
 * leader's into leader ("" unknown). */
void f_peers_of(jsCtx *js, const char *stream, char *out, size_t len,
                char *leader, size_t llen);

/* faults_aggregate.c: the aggregate workload. Once healed and the mirror
 * caught up, F_AGG must hold each origin message once from each source,
 * in origin order per source. */
#define F_AGG_UNREAD                                                           \
    (-2) /* f_agg_msg.src of a seq the server did not serve                    \
          */
struct f_agg_msg {
    int src;       /* index into F_AGG's sources; -1 no or a foreign
                      Nats-Stream-Source; F_AGG_UNREAD */
    uint64_t oseq; /* the origin seq its header names */
    uint32_t slot; /* the value's attempt slot + 1 (0: not ours) */
};
struct f_agg_result {
    bool caught_up;       /* as many messages as both sources hold */
    long long catchup_ms; /* from the check's start (-1: never) */
    uint64_t read;        /* seqs read back */
    uint64_t missing;     /* an acked value not there from one source */
    uint64_t mismatch;    /* a value other than the origin's at its seq */
    uint64_t dup;         /* one origin seq twice from one source */
    uint64_t reorder;     /* an origin seq not above its source's last */
    uint64_t alien;       /* a value or a source header not ours */
    uint64_t bad;         /* a seq the server did not serve */
    char placement[80];   /* F_AGG's peer */
    bool pass;
};
int f_agg_create(struct f_run_ctx *c, const char *url);
int f_agg_check(struct f_run_ctx *c, const char *urls,
                const struct f_view *origin, struct f_agg_result *ar);
/* ar's counts from the origin's read-back view, F_AGG's n messages in seq
 * order and c's acked attempts. */
void f_agg_count(const struct f_run_ctx *c, const struct f_view *origin,
                 const struct f_agg_msg *m, uint64_t n,
                 struct f_agg_result *ar);

/* faults_work.c */
/* A connection with reconnect and a JetStream context (both to destroy).
 * 0 or -1. */
int f_connect_js(const char *urls, natsConnection **nc, jsCtx **js);
/* Create stream name with cfg (owned) through url, retried while
 * JetStream starts. 0 or -1. */
int f_create_named(struct f_run_ctx *c, const char *url, const char *name,
                   json_t *cfg);
/* Create the mirror F_MIRROR of F_STREAM (bounded retries). 0 or -1. */
int f_mirror_create(struct f_run_ctx *c, const char *url);
/* Read every seq of stream through the server (f_read_stream for
 * F_STREAM). */
int f_read_named(struct f_run_ctx *c, const char *urls, const char *stream,
                 struct f_view *v);
uint64_t f_rand(struct f_run_ctx *c);
/* A plain connection to the first node of urls that answers (no
 * reconnect). 0 or -1. */
int f_connect(const char *urls, natsConnection **nc);
int f_stream_create(struct f_run_ctx *c, const char *url);
int f_pubs_start(struct f_run_ctx *c, pthread_t *th);
void f_pubs_stop(struct f_run_ctx *c, pthread_t *th);
int f_consumer_start(struct f_run_ctx *c, pthread_t *th);
void f_consumer_stop(struct f_run_ctx *c, pthread_t th);
long long f_wait_recovery(struct f_run_ctx *c, const char *urls);
/* After healing: ms until the concurrent consumer has delivered every
 * acked value no injury destroyed; -1 when not within F_DRAIN_MS_MAX or
 * after F_DRAIN_IDLE_MS without a delivery. */
long long f_consumer_drain(struct f_run_ctx *c);
int f_read_stream(struct f_run_ctx *c, const char *urls, struct f_view *v);
uint32_t f_slot_of(const char *value, int len);

/* faults_inject.c: disk faults on a stopped node's data directory. */
int f_inject_bitflip(struct f_run_ctx *c, int node);
int f_inject_truncate(struct f_run_ctx *c, int node);
int f_inject_meta(struct f_run_ctx *c, int node);
int f_inject_snapshot(struct f_run_ctx *c, int node);

/* faults_check.c */
int f_dump_node(struct f_run_ctx *c, int node, struct f_view *v);
void f_check(struct f_run_ctx *c, const struct f_view *read,
             const struct f_view *nodes, int n, struct f_result *r);
/* Value tokens on node i's disk now (malloc'ed, per slot). */
uint8_t *f_disk_snapshot(struct f_run_ctx *c, int node);
/* After an injury of node i: mark acked values that were on its disk
 * before the injury (before) and are gone now. */
void f_note_destroyed(struct f_run_ctx *c, int node, const uint8_t *before);
void f_view_free(struct f_view *v);

#endif
