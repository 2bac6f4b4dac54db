/* Loop-turn accounting: how long each turn of the loop thread worked (the
 * time between two prepare callbacks minus the time libuv spent blocked in
 * the poll) and in which phase (link reads, Raft timers, meta apply ...).
 * A turn longer than SRV_TURN_SLOW_MS is logged with its phases: a node
 * whose turn outlasts SRV_CLUSTER_DEAD_MS starves its links' pings and
 * its peers drop it (docs/cluster.md, "Loop turns"). Loop thread only. */
#ifndef SRV_TURN_H
#define SRV_TURN_H

#include <stdint.h>
#include <uv.h>

/* X(name, text): the phases a turn's work is charged to. */
#define SRV_TURN_PHASES(X)                                                     \
    X(OTHER, "other")                                                          \
    X(LINK_READ, "link read")                                                  \
    X(LINK_FLUSH, "link flush")                                                \
    X(CLUSTER_TICK, "cluster tick")                                            \
    X(RAFT_TIMER, "raft timers")                                               \
    X(PROPOSE, "proposal flush")                                               \
    X(STORE_EVENT, "store events")                                             \
    X(META_APPLY, "meta apply")                                                \
    X(STREAM_OPEN, "stream open")                                              \
    X(META_REPLY, "meta reply")                                                \
    X(CONSUMER, "consumer engine")                                             \
    X(JS_TICK, "jetstream tick")                                               \
    X(CLIENT_READ, "client read")

#define SRV_TURN__ENUM(name, text) SRV_TURN_##name,
enum srv_turn_phase { SRV_TURN_PHASES(SRV_TURN__ENUM) SRV_TURN_PHASE_N };
#undef SRV_TURN__ENUM

/* Upper bounds (ms) of the turn histogram's buckets; the last is +Inf. */
#define SRV_TURN_BUCKETS_MS                                                    \
    {                                                                          \
        1, 10, 100, 1000, 5000                                                 \
    }
#define SRV_TURN_BUCKETS 6

struct srv_turn_stats {
    uint64_t turns;
    uint64_t max_ms;                     /* longest turn since start */
    uint64_t max_phase_ms;               /* its largest phase */
    enum srv_turn_phase max_phase;       /* ... and which */
    uint64_t hist[SRV_TURN_BUCKETS];     /* turns per bucket, not cumulative */
    uint64_t phase_ms[SRV_TURN_PHASE_N]; /* total per phase since start */
};

/* Start measuring the turns of loop (before uv_run: it turns on libuv's
 * idle-time metric). Returns 0 or KEEL_EIO with errmsg. */
int srv_turn_start(uv_loop_t *loop, char *errmsg);

/* Close the handle start opened (runs at the loop's next round). */
void srv_turn_stop(void);

/* Charge the time from now on to phase p; returns the phase to give back
 * to srv_turn_leave (phases nest: meta apply inside a link read). */
enum srv_turn_phase srv_turn_enter(enum srv_turn_phase p);
void srv_turn_leave(enum srv_turn_phase prev);

/* End one turn of `busy_ns` of work now (what the prepare callback does;
 * tests call it directly). */
void srv_turn_end(uint64_t busy_ns);

/* A copy of the counters. */
void srv_turn_stats(struct srv_turn_stats *out);

/* The phase's text ("link read"). */
const char *srv_turn_phase_name(enum srv_turn_phase p);

#endif
