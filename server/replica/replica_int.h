/* Internals shared by replica.c (the driver) and replica_snap.c (its
 * snapshots, docs/design.md §5). Not part of the replica API. */
#ifndef KEEL_SRV_REPLICA_INT_H
#define KEEL_SRV_REPLICA_INT_H

#include <pthread.h>

#include "replica.h"
#include "snap.h"

struct replica_prop {
    uint8_t type;
    uint32_t len;
    uint8_t *buf;
    uint64_t ctx;
};

/* A leader's ctx is for the entry it proposed: (index, term). A deposed
 * leader's entry at index may be replaced by another leader's; that one
 * must not be answered with this ctx. */
struct replica_ctx {
    raft_index index;
    raft_term term;
    uint64_t ctx;
};

/* One snapshot being written: the body encoded on the loop at index
 * (deterministic), written by snap_write on a worker once the store has
 * persisted every entry <= index (§5). */
struct replica_snap_job {
    uv_work_t req;
    struct replica *r;
    uint64_t index;
    uint64_t term;
    uint8_t *body;
    size_t len;
    bool queued; /* handed to the worker pool */
    /* Set by the worker when snap_write returned (under mu): a close
     * waits for it, so the group's store outlives the write. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool written;
    int rv;
    char err[KEEL_ERRMSG_MAX];
};

/* InstallSnapshot transfers (replica_install.c). While a follower takes
 * a transfer (a chunk past offset 0 sent within REPLICA_XFER_HOLD_MS) the
 * group neither compacts its core nor drops a prefix: the core restarts a
 * transfer at 0 whenever it compacts, so a transfer longer than a snapshot
 * interval would never finish. A spool nobody takes is made again at most
 * every REPLICA_XFER_RESPOOL_MS. */
#define REPLICA_XFER_HOLD_MS 5000u
#define REPLICA_XFER_RESPOOL_MS 3000u
/* Refusals of one complete transfer's content in a row before the group
 * stops (replica_install.c install_failed). */
#define REPLICA_INSTALL_REPEATS_MAX 5u
/* Transfer failures are logged (the warn callback): the first at once,
 * then at most one line per this many ms per group, with the count since,
 * so a transfer failing in a loop is seen without flooding the log. */
#define REPLICA_WARN_MS 10000u
/* A complete transfer installs in steps of this many bytes of its retained
 * log, one step per loop turn (snap_recv_apply_step): the links, clients
 * and other groups run between them (docs/decisions/0041). */
#define REPLICA_INSTALL_STEP_BYTES (8u * 1024 * 1024)
struct replica_xfer {
    /* Leader: the spool of the snapshot the core sends (one per group). */
    struct snap_send *ss;
    uint64_t ss_index;
    bool ss_stale;           /* a follower reported a failed transfer */
    uint64_t ss_made_ms;     /* loop time the spool was made */
    uint64_t ss_progress_ms; /* last chunk past offset 0 sent (0: none) */
    uint8_t *frame;          /* SNAP_FRAME_BYTES: the chunk being sent */
    /* Follower: the transfer being received. */
    struct snap_recv *sr;
    uint64_t sr_index;
    uint64_t sr_term;
    bool sr_complete; /* every frame is in */
    bool sr_waiting;  /* appended log not yet persisted */
    struct raft_config cfg;
    uint64_t failed_index; /* the snapshot info.repeats counts for */
    uint64_t failed_term;
    bool install_due; /* durable and restored: step INSTALLED */
    /* A complete transfer's content was refused: step SNAPSHOT_REFUSED
     * for (refused_index, refused_term), so the leader spools afresh. */
    bool refuse_due;
    uint64_t refused_index;
    uint64_t refused_term;
    uint64_t installed_term;
    /* The counters replica_install_info reports (receiving aside: sr says
     * it), kept in the reported form so the report is one copy. */
    struct replica_install_info info;
    /* The warn callback's rate limit (REPLICA_WARN_MS): whether a failure
     * was logged yet, when, and the failures since. */
    bool warned;
    uint64_t warned_ms;
    uint64_t unwarned;
};

struct replica_snap {
    struct snap *sn;        /* NULL: snapshots off for this group */
    uint64_t every_entries; /* trigger */
    uint64_t every_bytes;
    uint64_t since_entries; /* applied since the last snapshot */
    uint64_t since_bytes;
    uint64_t floor; /* next snapshot must be above (LMDB newest) */
    uint64_t cut;   /* highest committed retention cut */
    uint64_t taken;
    uint64_t restored_index;
    bool must_not_lead;
    const struct raft_config *restore_cfg; /* during the restore callback */
    struct replica_snap_job *job;          /* at most one in flight */
    struct replica_xfer xfer;
    void (*user_apply)(struct replica *r, uint64_t index, uint64_t term,
                       uint8_t type, const void *payload, uint32_t len,
                       uint64_t ctx, void *arg);
    char load[KEEL_ERRMSG_MAX];
    bool log_quarantined;      /* opened empty after replica__quarantine_log */
    unsigned rebuilt_segments; /* catalogue rebuilt by the open (store.h) */
    uint64_t rebuilt_from;
};

struct replica_cached {
    raft_index index;
    raft_term term;
    uint8_t type;
    uint32_t len;
    uint8_t *buf; /* owned; NULL: empty slot */
};

struct replica {
    struct replica_host *host;
    struct store_group *g;
    struct store_group_id gid;
    struct raft raft;
    struct replica_callbacks cbs;
    uv_timer_t timer;
    uv_idle_t idle;
    bool started;
    bool closing;
    /* The core's log and the store's parted (replica__break): nothing is
     * stepped any more; a restart loads the core from the store. */
    bool broken;
    raft_index boot_wait; /* bootstrap: start once this index persisted */
    /* Hard state saved but not yet durable: persisted events wait. */
    /* Hard-state saves asked of the store / reported done by it (its
     * events coalesce: count, never one event per save). */
    uint64_t hs_issued;
    uint64_t hs_done;
    raft_index held_persisted;
    raft_term held_term;
    uint32_t n_held;
    struct raft_msg *held; /* REPLICA_HELD_MSGS_MAX, NULL while none */
    raft_index persisted;
    raft_index applied;
    uint8_t role;
    raft_node leader;
    uint32_t align_ms; /* leader timer quantum (align_heartbeats), 0: none */
    uint32_t apply_turn_max; /* replica_options.apply_turn_max */
    uint32_t apply_left;     /* entries this turn may still apply */
    uint64_t timer_due;      /* loop time the Raft timer is due at */
    bool tick_deferred;      /* the due tick waits for this turn's reads */
    uint64_t ticks_deferred; /* how often (replica_info) */
    /* Proposals queued this iteration, then (index, ctx) awaiting apply. */
    uint32_t n_queue, queue_cap;
    struct replica_prop *queue;
    size_t ctx_head, ctx_n, ctx_cap; /* a ring of ctx_cap */
    struct replica_ctx *ctxs;
    struct raft_out out;
    /* Storage faults (replica_fault.c): the extent the core votes with,
     * a read that found damage (reported after the current step), and
     * repair copies written / refused by the store. */
    raft_index fault_extent_index;
    raft_term fault_extent_term;
    bool fault_check;
    uint64_t scrub_fault; /* a record the scrub found damaged (0: none) */
    uint64_t repairs_queued;
    uint64_t repairs_refused;
    /* The leader's copies of the damaged run [rb.first, rb.last] being
     * collected (the store verifies a run only whole: finding F12), the
     * first rb.n of them held with their payloads; repair_restart: a run
     * was refused, the core must hand copies from its fault again. */
    struct replica_rbuf {
        uint64_t first, last;
        uint32_t n, cap;
        size_t bytes;
        struct store_record *v;
    } rb;
    bool repair_restart;
    int handles_open; /* timer, idle, and a snapshot job in flight */
    struct replica_snap snap;
    /* Leader's send cache (replica_cache.c): REPLICA_SEND_CACHE_ENTRIES
     * slots by index % entries, NULL until the first proposal. */
    struct replica_cached *cache;
    /* Follower reads (replica_follow.c): the commit index the leader sent
     * in its last AppendEntries, and that message's term. */
    raft_index leader_commit;
    raft_term leader_commit_term;
};

/* replica_follow.c: note what the leader's AppendEntries m said, once
 * the core has taken it (follower reads). */
void replica__follow_note(struct replica *r, const struct raft_msg *m);

/* The background scrub's cursor and counters (replica_scrub.c). */
struct replica_scrub {
    bool on;
    uv_timer_t timer;
    uint64_t pass_ms, tick_ms;
    uint64_t pass_bytes; /* log bytes of every group at the pass start */
    uint64_t credit;     /* bytes it may still read (carried over) */
    uint32_t slot;       /* groups[slot] is being scrubbed */
    struct store_group_id gid;
    uint64_t next_index;
    bool snap_done; /* its held snapshots were checked this pass */
    struct replica_scrub_stats stats;
    void (*note_cb)(void *arg, const char *msg);
    void *note_arg;
};

struct replica_host {
    uv_loop_t *loop;
    uv_async_t async;
    struct replica_scrub scrub;
    int closes; /* handle closes left before the host is freed */
    struct store *store;
    uint32_t n;
    struct replica *groups[REPLICA_GROUPS_MAX];
    /* The groups again, by their store group (open addressing, linear
     * probing, at most half full): a store event finds its group in O(1),
     * not by a walk over every group (host_find). */
    struct replica *by_store[2 * REPLICA_GROUPS_MAX];
    bool snapshots; /* replica_host_snapshots was called */
    struct snap_config snap_cfg;
    char snap_dir[STORE_PATH_BYTES_MAX];
};

/* replica_snap.c: verify the held snapshot files of r (the scrub);
 * a damaged one is replaced by a fresh snapshot. Returns bytes read. */
uint64_t replica__snap_scrub(struct replica *r, struct replica_scrub_stats *st);

/* replica.c */
int replica__step(struct replica *r, struct raft_in *in);
/* The store's log no longer is the core's: stop stepping the group and
 * report why through the failed callback (a restart loads both again). */
void replica__break(struct replica *r, int rv, const char *msg);
/* Drop one of handles_open; the last frees r. */
void replica__release(struct replica *r);

/* replica_fault.c */
/* Load [from, rep->last_index] into the core, damaged records as
 * placeholders, and tell it about the first one (rule 1). */
int replica__load_log(struct replica *r, uint64_t from,
                      const struct store_recovery *rep, char *errmsg);
/* A refused open (KEEL_EAMNESIA) of a group with peers: close its store
 * group g and move its log to quarantine (store_group_quarantine_log);
 * then note, on the group opened again (empty, amnesiac), why. */
int replica__quarantine_log(struct replica_host *h,
                            const struct store_group_id *gid,
                            struct store_group *g, char *errmsg);
void replica__note_quarantined(struct replica *r, const char *why);
/* Rule 3: an amnesiac group (lost range, OS crash under interval, reset
 * metadata) opens amnesiac with its recorded target. */
int replica__load_amnesia(struct replica *r, const struct store_recovery *rep,
                          char *errmsg);
/* replica_recover.c: the recover wait (`keel cluster recover` on a node
 * that is not the source) recorded before the step's messages, and loaded
 * at open so a restart before a leader is heard does not campaign. */
int replica__recover_out(struct replica *r, const struct raft_out *o,
                         char *errmsg);
int replica__load_recover_wait(struct replica *r, char *errmsg);
/* Amnesia record and repair writes of one step, before its messages. */
int replica__fault_out(struct replica *r, const struct raft_out *o,
                       char *errmsg);
/* The store's first faulty index changed (a read found damage, a repair
 * finished) or a run was refused: one RAFT_IN_FAULTY step. */
void replica__fault_report(struct replica *r);
/* Free the copies of a run being collected. */
void replica__repair_drop(struct replica *r);
/* Send a FETCH answer with the record filled from the store. */
void replica__fill_fetch(struct replica *r, const struct raft_msg *m,
                         void (*send)(struct replica *,
                                      const struct raft_msg *));

/* replica_snap.c */
/* At open, after store_group_open: open the group's snapshots, restore
 * the state machine from the chosen one and load it into raft. *from is
 * the first log index to load into raft (0: as without snapshots).
 * KEEL_EAMNESIA when no valid snapshot continues the log. */
int replica__snap_open(struct replica *r, const struct replica_options *opt,
                       const struct store_recovery *rep, uint64_t *from,
                       char *errmsg);
/* Closing: block until a snapshot on a worker has been written (one
 * snapshot write at most), so store_group_delete or store_close may
 * follow. */
void replica__snap_wait(struct replica *r);
/* The store reported persisted: a waiting snapshot may be written. */
void replica__snap_kick(struct replica *r);
void replica__snap_free(struct replica *r);
/* Run on_idle at the next loop turn (an install's next step). */
void replica__idle_start(struct replica *r);
/* No local snapshot is being written (a waiting one at or below index is
 * dropped: the install supersedes it): an install may touch the snap. */
bool replica__snap_idle(struct replica *r, uint64_t index);
/* Replace the state machine with a snapshot body (*c: its config). */
int replica__snap_restore_body(struct replica *r, uint64_t index,
                               const uint8_t *body, size_t len,
                               struct raft_config *c, char *errmsg);

/* replica_install.c */
/* Leader: fill the chunk of a RAFT_MSG_SNAPSHOT the core emitted into
 * *copy; non-zero: drop the message (the core resends it). */
int replica__snap_fill(struct replica *r, const struct raft_msg *m,
                       struct raft_msg *copy);
/* Before a received message is stepped: false drops it (a frame failing
 * its checksum aborts the transfer). */
bool replica__snap_receive(struct replica *r, const struct raft_msg *m);
/* Follower: out.has_snapshot (during handle_out): spool the chunk and,
 * after the last one, install. */
void replica__snap_chunk(struct replica *r, const struct raft_msg_snapshot *s);
/* Outside handle_out (a persisted report, a local snapshot written): a
 * complete transfer may install now; then step INSTALLED if due. */
void replica__snap_install_kick(struct replica *r);
/* After handle_out: step RAFT_IN_SNAPSHOT_REFUSED if a transfer's content
 * was refused, and RAFT_IN_SNAPSHOT_INSTALLED if an install became
 * durable. */
void replica__snap_install_step(struct replica *r);
void replica__xfer_free(struct replica *r);
/* A complete transfer is being installed (in steps, or waiting for its
 * log to persist): the core takes no entries or chunks, no local snapshot
 * is written. */
bool replica__installing(const struct replica *r);
/* A follower is taking a transfer now: hold compaction. */
bool replica__xfer_busy(const struct replica *r);

/* The leader's send cache (replica_cache.c). put takes buf and returns
 * true, or false and leaves it to the caller (too large, not leading, no
 * memory); it frees the entry it evicts, REPLICA_SEND_CACHE_ENTRIES
 * indexes older, so never one of the current step. get fills out (buf owned
 * by the cache, valid until the next put/drop) when the slot holds index
 * with the term raft's log has there; drop frees everything. */
bool replica__cache_put(struct replica *r, raft_index index, raft_term term,
                        uint8_t type, uint32_t len, uint8_t *buf);
bool replica__cache_get(const struct replica *r, raft_index index,
                        struct raft_entry *out);
void replica__cache_drop(struct replica *r);

#endif
