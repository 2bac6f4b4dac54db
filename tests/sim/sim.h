/* Deterministic Raft simulation: N nodes running the real core against a
 * simulated network and a model of the store's durability (docs/design.md
 * §3.4). One seed fixes everything; a failing seed reproduces exactly. */
#ifndef KEEL_SIM_H
#define KEEL_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "raft.h"

#define SIM_NODES_MAX 5
#define SIM_LOG_MAX 6144      /* entries per node log */
#define SIM_EVENTS_MAX 65536  /* pending events */
#define SIM_OPS_MAX 4096      /* unsynced disk writes per node */
#define SIM_CFG_MAX 64        /* configuration entries per node log */
#define SIM_TRACE_MAX 8192    /* events kept for a failure report */
#define SIM_TERMS_MAX 65536   /* leader-per-term table */
#define SIM_CREATED_MAX 32768 /* (index, term) -> entry table, power of 2 */
#define SIM_PAYLOAD_MAX 96    /* a 5-node configuration plus learners */
#define SIM_READS_MAX 1024
#define SIM_STEPS_MAX 4000000 /* events per seed */

enum sim_mutation {
    SIM_MUT_TERM_NOT_SYNCED = 1u << 16,
    SIM_MUT_TRUNC_NOT_DURABLE = 1u << 17,
    SIM_MUT_MARKER_TORN = 1u << 18, /* a damaged M falls back (finding 14) */
};

struct sim_entry {
    uint64_t term;
    uint64_t hash; /* chain: the entry and everything before it */
    uint64_t id;   /* unique per proposal; 0 for barriers */
    uint8_t type;
    uint8_t bad; /* media fault: the stored bytes no longer verify */
    uint32_t len;
    uint8_t payload[SIM_PAYLOAD_MAX];
};

enum sim_op_type {
    SIM_OP_TRUNCATE = 1,
    SIM_OP_APPEND = 2,
};

struct sim_op {
    uint8_t type;
    uint64_t index;
    struct sim_entry e;
};

struct sim_node {
    bool up;
    uint64_t incarnation;
    struct raft raft;
    uint64_t timer_gen;
    /* Disk: durable part (survives power loss). */
    uint64_t hs_term;
    uint64_t hs_vote;
    uint64_t dlen;
    struct sim_entry *dlog; /* [1..dlen] */
    /* Page cache: what the store reads, durable or not. */
    uint64_t vlen;
    struct sim_entry *vlog;
    /* Writes not yet covered by a completed sync. */
    uint32_t n_ops;
    struct sim_op *ops;
    bool syncing;
    uint64_t sync_gen;
    uint32_t sync_ops; /* ops the running sync covers */
    uint64_t sync_index;
    uint64_t sync_term;
    /* Mutation "term not synced": hard state written after the log. */
    bool hs_pending;
    uint64_t hs_pending_term;
    uint64_t hs_pending_vote;
    uint64_t commit_seen; /* highest commit checked since start */
    /* InstallSnapshot being received: the leader's log through X. */
    struct sim_entry *stage;
    uint64_t stage_index;
    uint64_t stage_term;
    uint64_t stage_n;
    struct raft_config stage_config;
    uint64_t install_gen;
    uint32_t n_cfg;
    uint64_t cfg_idx[SIM_CFG_MAX]; /* indexes of configuration entries */
    bool damaged; /* a bit flip may still be on disk or in the cache */
    /* What the node may have been counted for before the flip: acks in
     * flight (a follower's persisted) or its commit (a leader). */
    uint64_t flip_counted;
    /* Amnesia state in LMDB (rule 3), synced when the core changes it. */
    bool amnesiac;
    uint64_t amnesia_t0;
    uint64_t amnesia_target;
    /* The synced records a lost tail took (hashes of (lost_from,
     * lost_to]): acks the node may have sent for them can still count. */
    uint64_t *lost;
    uint64_t lost_from;
    uint64_t lost_to;
    /* Sync markers (docs/design.md §4.7 R2): the newest one on disk names the
     * last record of the last completed sync (marker_bad: its bytes are
     * damaged, the one before it, marker_prev, is M then). */
    uint64_t marker;
    uint64_t marker_prev;
    bool marker_bad;
};

struct sim_event {
    uint64_t at;
    uint64_t seq;
    uint8_t type;
    uint8_t node;
    uint64_t gen;
    struct sim_msg *msg;
};

struct sim_msg {
    struct raft_msg m;
    uint32_t n;
    struct sim_entry *entries;
    struct raft_entry *re;
};

struct sim_trace {
    uint64_t at;
    uint8_t node;
    char text[120];
};

/* Counters of one seed (all uint64_t: main.c sums them as an array). */
struct sim_stats {
    uint64_t crashes, power_losses, wipes, partitions, truncations, leaders,
        changes, transfers, reads, snapshots, installs, flips, repairs,
        amnesias, cluster_power_losses, holes, torn, marker_flips, discards,
        refusals;
};

struct sim_params {
    uint32_t n_nodes;
    uint32_t mutations;
    uint64_t duration_ms; /* safety phase */
    uint64_t heal_ms;     /* liveness bound after healing */
    bool quiet;
    bool bench;          /* instant network and disk, no faults */
    uint32_t scenario;   /* 0: random faults; else a scripted trace */
    bool storage_faults; /* bit flips in records (docs/design.md §4.7 R1) */
};

struct sim_created {
    uint64_t index;
    uint64_t term;
    uint64_t hash;
};

struct sim_read {
    uint64_t id;
    uint64_t committed_at_request;
};

struct sim {
    struct sim_params p;
    uint64_t seed;
    uint64_t prng;
    uint64_t now;
    uint64_t seq;
    uint64_t steps;
    struct sim_node nodes[SIM_NODES_MAX];
    bool link[SIM_NODES_MAX][SIM_NODES_MAX];
    uint64_t link_last[SIM_NODES_MAX][SIM_NODES_MAX]; /* FIFO per link */
    uint32_t reorder_pct;
    uint32_t drop_pct;
    uint32_t dup_pct;
    uint32_t delay_max;
    uint32_t sync_max;
    uint32_t batch_max; /* entries per AppendEntries this seed */
    bool snapshots;     /* nodes compact their logs this seed */
    uint32_t n_events;
    struct sim_event *heap;
    /* Invariant state. */
    uint64_t committed_len;
    uint64_t *committed; /* chain hash of every committed index */
    uint64_t *leader_of_term;
    struct sim_created *created;
    uint64_t next_id;
    uint32_t n_reads;
    struct sim_read reads[SIM_READS_MAX];
    uint64_t next_read_id;
    uint64_t wiped_inc[SIM_NODES_MAX]; /* old incarnation awaiting removal */
    bool healing;
    char violation[256];
    struct raft_out *out;
    int last_rv;
    uint64_t heal_id; /* first proposal id after healing */
    uint32_t script_step;
    int script_nodes[SIM_NODES_MAX]; /* roles in the scripted trace */
    bool script_active;
    bool heal_committed;
    /* Scripted storage traces (scenario.c): appends from strip_from (node
     * + 1, 0: off) to the nodes in strip_mask lose their entries at and
     * after strip_index (as if those messages were lost and heartbeats got
     * through); lose_tail_at fixes where the next lost tail ends. */
    uint32_t strip_from;
    uint32_t strip_mask;
    uint64_t strip_index;
    uint64_t lose_tail_at;
    uint64_t script_deadline;
    uint64_t script_index;
    uint64_t proposals;
    struct sim_stats stats;
    uint64_t trace_n;
    struct sim_trace trace[SIM_TRACE_MAX];
};

#define SIM_ELECTION_MS 150
#define SIM_HEARTBEAT_MS 30

enum sim_ev_type {
    EV_DELIVER = 1,
    EV_SYNC_DONE,
    EV_TICK,
    EV_FAULT,
    EV_PROPOSE,
    EV_HS_WRITE,
    EV_RESTART,
    EV_OPERATOR,
    EV_HEAL,
    EV_CRASH_LEADER,
    EV_SCRIPT,
    EV_INSTALL,
};

enum sim_scenario {
    SIM_SCENARIO_NONE = 0,
    SIM_SCENARIO_WIPE_VOTE = 1, /* docs/design.md §3.2 M1 */
    SIM_SCENARIO_FIGURE8 =
        2, /* Raft Figure 8, docs/design.md §3.1 D5 commit rule */
    /* docs/design.md §4.7 R1 and R3 traces (scenario.c). */
    SIM_SCENARIO_FAULTY_NONE = 3,    /* two faulty at a committed index */
    SIM_SCENARIO_DISCARD_RACE = 4,   /* a discard round vs a live leader */
    SIM_SCENARIO_AMNESIA_COMMIT = 5, /* amnesia with acks in flight */
    SIM_SCENARIO_RECOVER = 6,        /* all amnesiac: operator override */
    SIM_SCENARIO_POWER_ALL = 7,      /* whole-cluster power loss heals */
    SIM_SCENARIO_MARKER_RECORD = 8,  /* damaged M and a record below it */
};

enum sim_stop_kind {
    STOP_CRASH,
    STOP_POWER,
    STOP_WIPE,
    STOP_LOSE_TAIL,
    STOP_POWER_REORDER, /* writeback reached a random subset of the batch */
};

/* sim.c: the cluster and its driver. */
uint64_t sim_rand(struct sim *s);
uint32_t sim_rnd(struct sim *s, uint32_t n);
void sim_trace(struct sim *s, int node, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sim_violation(struct sim *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void sim_ev_push(struct sim *s, uint64_t at, uint8_t type, uint32_t node,
                 uint64_t gen, struct sim_msg *msg);
struct sim_event sim_ev_pop(struct sim *s);
void sim_node_step(struct sim *s, uint32_t i, struct raft_in *in);
void sim_node_boot(struct sim *s, uint32_t i);
void sim_node_stop(struct sim *s, uint32_t i, enum sim_stop_kind k);
void sim_disk_sync_done(struct sim *s, uint32_t i, uint64_t gen);
void sim_install(struct sim *s, uint32_t i, uint64_t gen);
void sim_take_snapshot(struct sim *s, uint32_t i);
/* Storage faults: the first damaged index in the page cache (what the store
 * reads) or on disk; 0 when none. */
uint64_t sim_first_bad(const struct sim_node *n, bool disk);
/* Flip bits in one synced record of node i (reads verify: the store reports
 * it to the core at once). */
void sim_flip(struct sim *s, uint32_t i);
/* Flip bits in record k of node i (synced, on disk and in the cache). */
void sim_flip_at(struct sim *s, uint32_t i, uint64_t k);

/* disk.c: the store's view of a disk after faults (docs/design.md §4.7 R2). */
/* A sync completed: its marker names the last record it covered. */
void sim_disk_marker(struct sim_node *n, uint64_t index);
/* Power loss with reordered writeback: every write of the batch under sync
 * reached the disk or not, independently, the marker too; later writes were
 * never issued. */
void sim_disk_power_reorder(struct sim *s, uint32_t i);
/* On open: how many records of the disk log join the log (a damaged record
 * above M is a torn tail: discarded; at or below M it is faulty). */
uint64_t sim_disk_scan(struct sim *s, uint32_t i, uint64_t len);
/* Bit flips in the newest sync marker of node i. */
void sim_disk_flip_marker(struct sim *s, uint32_t i);

/* scenario.c: one step of a scripted storage-fault trace (EV_SCRIPT). */
void sim_script_storage(struct sim *s);

/* Run one seed. Returns 0 when every invariant held and the cluster was
 * live after healing; 1 on a violation (sim->violation says which). */
int sim_run(struct sim *s, uint64_t seed, const struct sim_params *p);

/* Print the last events of the failed run. */
void sim_print_trace(const struct sim *s);

/* End a run (pending events, open cores); buffers stay for the next seed. */
void sim_free(struct sim *s);

/* Release the buffers. */
void sim_destroy(struct sim *s);

#endif
