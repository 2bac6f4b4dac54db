/* server/replica: the Raft driver (docs/raft.md "The driver's contract").
 *
 * One struct replica per Raft group binds a struct raft (raft/) to a
 * store_group (store/) on a libuv loop. Store completions arrive on sync
 * threads; a struct replica_host owns the uv_async that drains them with
 * store_poll() on the loop thread and routes each event to its group.
 *
 * Order of one step's output (docs/raft.md): hard state saved (synced)
 * before any message is sent and before any persisted(index) is reported to
 * raft; truncation + entries appended to the store; messages; apply from the
 * store (checksum-verified reads) up to out.commit; persisted(index, term)
 * from store completions; a timer tick at out.timeout_ms.
 *
 * All functions run on the loop thread except replica_host_wakeup.
 */
#ifndef KEEL_SRV_REPLICA_H
#define KEEL_SRV_REPLICA_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "raft.h"
#include "store.h"

struct replica;
struct replica_host;

struct replica_callbacks {
    /* Called once per committed entry, in index order, with the payload
     * read back from the store. ctx is the replica_propose ctx of that
     * entry on this leader (0 for barrier/config entries and entries
     * replayed on open): the caller acks a publish here, after commit. */
    void (*apply)(struct replica *r, uint64_t index, uint64_t term,
                  uint8_t type, const void *payload, uint32_t len, uint64_t ctx,
                  void *arg);
    /* An outgoing message (AppendEntries carry payloads). May be NULL for a
     * group of one, which sends none. */
    void (*send)(struct replica *r, const struct raft_msg *m, void *arg);
    /* Role or leader changed. May be NULL. */
    void (*role_changed)(struct replica *r, uint8_t role, raft_node leader,
                         void *arg);
    /* The replica hit an unrecoverable store error (already logged by
     * nobody: the caller logs). May be NULL. */
    void (*failed)(struct replica *r, int rv, const char *msg, void *arg);
    /* Something an operator should see, the group running on (the caller
     * logs msg as a warning). Rate-limited by the replica: a failure that
     * repeats says so at most every 10 s (REPLICA_WARN_MS) with a count.
     * May be
     * NULL. */
    void (*warn)(struct replica *r, const char *msg, void *arg);
    /* Snapshots (docs/design.md §5; both or neither; NULL: the group takes
     * none). snapshot encodes the state machine right after the entry at index
     * was applied into a malloc'ed *out: the same applied entries must
     * give the same bytes on every replica. restore replaces the state
     * machine with the state a snapshot at index holds (at open, before
     * the log after index is replayed through apply). 0 or a KEEL_E*. */
    int (*snapshot)(struct replica *r, uint64_t index, uint8_t **out,
                    size_t *len, void *arg);
    int (*restore)(struct replica *r, uint64_t index, const uint8_t *body,
                   size_t len, void *arg);
    void *arg;
};

struct replica_options {
    raft_node self;
    raft_incarnation incarnation;        /* see replica_incarnation_of */
    const struct raft_config *bootstrap; /* index-1 config for an empty log;
                                            NULL: wait to be added */
    struct store_fsync fsync;
    uint32_t election_timeout_ms; /* 0: 1000 */
    uint32_t heartbeat_ms;        /* 0: 100 */
    /* While leading, fire the timer only at multiples of heartbeat_ms of
     * the loop clock: every aligned group of a node then sends its
     * heartbeats in the same loop iteration, so the cluster link carries
     * them (and the responses) in one frame per peer and tick. A tick
     * comes at most heartbeat_ms late. */
    bool align_heartbeats;
    uint64_t seed;
    /* Snapshot every this many applied entries or entry bytes (0: the
     * REPLICA_SNAP_*_DEFAULT limits). */
    uint64_t snap_entries;
    uint64_t snap_bytes;
    /* The group has peers that can send it a snapshot (a stream group with
     * more than one replica). A log that continues no valid snapshot
     * (both snapshots bad and the log compacted past them, a gap after
     * the snapshot, or a log that ends below the snapshot it would
     * restore) then goes to quarantine and the group opens empty and
     * amnesiac, to be restored by InstallSnapshot. false: such an open is
     * refused (KEEL_EAMNESIA): nobody could restore the group, and an
     * empty one would present lost data as an empty stream. */
    bool heal_by_install;
    /* Apply at most this many committed entries per loop turn (0: all of
     * them at once). The rest waits for the next turn (an idle callback),
     * so a group that falls far behind (the meta group of a node catching
     * up thousands of stream creates) never holds the loop long enough to
     * starve the cluster links' pings (docs/cluster.md, "Loop turns"). */
    uint32_t apply_turn_max;
    /* The group's store work runs before other groups' (store_group_set_
     * first): the meta group. */
    bool store_first;
};

/* Loop-turn accounting (server/base/srv_turn.h, which this layer does not
 * link): enter(phase) charges the time from now on to a phase and returns
 * the one to give back to leave. The driver enters the phase of each
 * kind: a group's Raft tick, a proposal flush, store events. */
enum replica_turn_kind {
    REPLICA_TURN_TIMER,
    REPLICA_TURN_PROPOSE,
    REPLICA_TURN_EVENT,
    REPLICA_TURN_KINDS
};
struct replica_turn_hooks {
    int (*enter)(int phase);
    void (*leave)(int prev);
    int phase[REPLICA_TURN_KINDS]; /* the caller's phase of each kind */
};

/* Set the hooks (NULL: none, the default). Loop thread, before any group
 * opens. */
void replica_set_turn_hooks(const struct replica_turn_hooks *hooks);

/* The host: create it BEFORE store_open and pass replica_host_wakeup /
 * host as the store's wakeup_cb / wakeup_arg, then attach the store. */
int replica_host_create(uv_loop_t *loop, struct replica_host **out,
                        char *errmsg);
void replica_host_attach(struct replica_host *h, struct store *s);
/* Thread-safe: called by store sync threads. */
void replica_host_wakeup(void *host);
/* Close the host's handle; every replica must be closed first. Run the
 * loop afterwards until it returns so the handle close completes; the host
 * is freed in the close callback. */
void replica_host_destroy(struct replica_host *h);

/* Enable snapshots for the groups opened afterwards whose callbacks have
 * snapshot/restore: files under data_dir (the store's; copied), fatal_cb
 * logs a snapshot write error before the process aborts (docs/design.md §4). */
int replica_host_snapshots(struct replica_host *h, const char *data_dir,
                           void (*fatal_cb)(void *arg, const char *msg),
                           void *fatal_arg, char *errmsg);

/* Background scrub (docs/decisions/0027-background-scrub.md): every tick_ms (0:
 * the REPLICA_SCRUB_TICK_MS default) read and verify a share of every open
 * group's persisted records (checksum and hash chain) and held snapshot
 * files, paced so a full pass takes about pass_ms, at most
 * REPLICA_SCRUB_TICK_BYTES_MAX a tick. A damaged record takes the path a
 * failed read takes (the core learns the fault: repaired from a peer, or
 * the leader hands over); a damaged snapshot file is replaced by a fresh
 * snapshot. note_cb (may be NULL) gets one line per fault for the log.
 * pass_ms 0: no scrub. KEEL_ECONFIG when tick_ms exceeds pass_ms. */
struct replica_scrub_stats {
    uint64_t bytes;    /* record and snapshot bytes read and verified */
    uint64_t faults;   /* damaged records and snapshot files found */
    uint64_t repaired; /* of those, no longer damaged */
    uint64_t passes;   /* full passes completed */
};
int replica_host_scrub_start(struct replica_host *h, uint64_t pass_ms,
                             uint64_t tick_ms,
                             void (*note_cb)(void *arg, const char *msg),
                             void *note_arg, char *errmsg);
void replica_host_scrub_stats(const struct replica_host *h,
                              struct replica_scrub_stats *out);

/* The 64-bit Raft incarnation of a store's 16-byte incarnation. */
raft_incarnation replica_incarnation_of(const uint8_t inc[16]);

/* Open a group: store_group_open + recovery report (faulty records and
 * amnesia open: the core keeps such a group from leading or voting until
 * repaired or caught up; a log that continues no valid snapshot is
 * refused with KEEL_EAMNESIA naming the group, unless
 * opt->heal_by_install: see there), load hard state and log into raft,
 * then start. An empty log with opt->bootstrap first makes the index-1
 * configuration entry durable; the group starts when it is. */
int replica_open(struct replica_host *h, const struct store_group_id *gid,
                 const struct replica_options *opt,
                 const struct replica_callbacks *cbs, struct replica **out,
                 char *errmsg);

/* A committed retention entry says the state machine no longer needs the
 * log prefix <= upto (called from apply). The driver drops whole segments
 * <= min(upto, the older kept snapshot it holds valid) now or after the
 * next snapshot (docs/design.md §5: a committed cut AND P <= the older
 * snapshot). KEEL_EINVAL when upto is above the applied index. */
int replica_compact(struct replica *r, uint64_t upto, char *errmsg);

/* After an explicit, committed deletion of a closed group and
 * store_group_delete: remove its snapshot files (snap_group_delete). 0
 * when snapshots are off. Never because metadata says the group should
 * not exist (docs/design.md §5: those go to quarantine/orphans/). */
int replica_host_delete_snapshots(struct replica_host *h,
                                  const struct store_group_id *gid,
                                  char *errmsg);

/* The Raft configuration in effect (a restore callback sees the one its
 * snapshot holds). */
const struct raft_config *replica_config(const struct replica *r);

/* Snapshot state of a group (monitoring, tests). */
struct replica_snap_info {
    bool enabled;
    uint64_t newest_index; /* valid files held (0: none) */
    uint64_t older_index;
    uint64_t cut;               /* highest committed retention cut */
    uint64_t first_index;       /* the store log's first index */
    uint64_t taken;             /* snapshots written since open */
    bool writing;               /* one is being encoded or written */
    uint64_t restored_index;    /* the snapshot the open restored (0: none) */
    bool must_not_lead;         /* a bad newest was quarantined at open */
    bool log_quarantined;       /* the open quarantined a log that continued no
                                   valid snapshot and opened empty (amnesiac) */
    char load[KEEL_ERRMSG_MAX]; /* what the open decided (snap_report_...) */
    /* A node of one whose meta.lmdb was reset: the open catalogued this
     * many segment files from their headers (store_config.sole_member),
     * the first with this base index; 0: none. */
    unsigned rebuilt_segments;
    uint64_t rebuilt_from;
};
void replica_snap_info(const struct replica *r, struct replica_snap_info *out);

/* InstallSnapshot counters of a group (monitoring, tests). */
struct replica_install_info {
    uint64_t installs; /* snapshots installed from a leader */
    uint64_t sends;    /* transfers spooled as leader */
    uint64_t failures; /* aborted transfers (both sides) */
    uint64_t repeats;  /* content refusals of the same snapshot in a row */
    bool receiving;    /* a transfer is being received */
    uint64_t installed_index; /* the last installed (0: none) */
    char last_error[KEEL_ERRMSG_MAX];
};
void replica_install_info(const struct replica *r,
                          struct replica_install_info *out);

/* Queue a proposal (payload copied). All proposals of one loop iteration
 * go to the store as one append batch. KEEL_ENOTLEADER when not leader,
 * KEEL_EBUSY when REPLICA_QUEUE_MAX proposals await commit. */
int replica_propose(struct replica *r, uint8_t type, const void *payload,
                    uint32_t len, uint64_t ctx, char *errmsg);

/* replica_propose of a malloc'd payload the replica takes (freed when it
 * is no longer needed, on an error too): the encoded entry is the one
 * buffer that is stored, sent and cached, never copied (docs/bench.md). */
int replica_propose_take(struct replica *r, uint8_t type, void *payload,
                         uint32_t len, uint64_t ctx, char *errmsg);

/* A message from a peer (cluster; unused by a group of one). */
int replica_receive(struct replica *r, const struct raft_msg *m, char *errmsg);

/* Stop the group: pending proposals are dropped (never acked). Blocks
 * until a snapshot being written and the group's queued store work are
 * done, then closes the store group (store_group_close). Run the loop
 * until it returns for the handle closes to complete. */
void replica_close(struct replica *r);

/* Introspection (tests, bench, monitoring). */
struct replica_info {
    uint8_t role;
    raft_term term;
    raft_index last_index;
    raft_index commit;
    raft_index applied;
    raft_index persisted; /* last persisted index reported to raft */
    bool started;
    raft_node leader;  /* known leader; 0: none (monitoring) */
    raft_index faulty; /* first faulty index; 0: none (monitoring) */
    bool amnesiac;     /* (monitoring, /healthz) */
    /* Leader of its term with an entry of that term committed, everything
     * committed applied, intact and not amnesiac: its applied state holds
     * every acknowledged entry, so a message it lacks does not exist. */
    bool complete;
    /* Verified copies of damaged records handed to store_repair, and
     * those the store refused (monitoring). */
    uint64_t repairs, repairs_refused;
    /* Raft ticks that waited for a loop turn's reads (REPLICA_LATE_TICK_MS,
     * docs/cluster.md "Loop turns"). */
    uint64_t ticks_deferred;
};
void replica_info(const struct replica *r, struct replica_info *out);
struct store_group *replica_store_group(struct replica *r);

/* store_read of one record for the state machine (a stream's message). A
 * record that fails its checksum now is faulty (rule 5): the core learns
 * it at the next step, and a leader then stops proposing and hands over
 * leadership (rule 1), so reads of it go to an intact copy. */
int replica_read(struct replica *r, uint64_t index, struct store_entry *out,
                 char *errmsg);

/* What a follower read needs to know of this replica
 * (docs/decisions/0036-followers-answer-direct-gets-while-current.md). */
struct replica_follow {
    bool follower; /* a follower (voter or learner) that knows its leader */
    bool intact;   /* started, no damaged record, not amnesiac */
    raft_index applied;
    /* The commit index of the leader's last AppendEntries in this term
     * (0: none yet), and whether the entry there is of this term: then the
     * leader has committed its own barrier, and every entry a leader of an
     * earlier term acknowledged is at or below it (Raft §5.4.2). */
    raft_index leader_commit;
    bool leader_commit_own_term;
    uint64_t contact_age_ms; /* since the leader last reached it */
    uint32_t contact_max_ms; /* the election timeout */
};
void replica_follow_info(const struct replica *r, struct replica_follow *out);

/* The currency rule, pure: may a follower answer a read from its applied
 * state? Only while it heard from its leader within an election timeout
 * and has applied everything that leader had committed when it last said
 * so, its own barrier included. A leader answers by its own rules. */
bool replica_follow_current(const struct replica_follow *f);

/* Leader-side progress of the group's other servers (stream info
 * "cluster" replicas): up to max into out, returns the count; 0 when this
 * replica does not lead. since_ms: since the leader last heard from it
 * (UINT64_MAX: never). */
struct replica_peer {
    raft_node node;
    raft_index match;
    bool active; /* heard from in this check-quorum period */
    uint64_t since_ms;
};
size_t replica_peers(const struct replica *r, struct replica_peer *out,
                     size_t max);

/* Hand leadership to voter `to` (0: a healthy voter at random,
 * docs/raft.md "Membership") by a Raft leadership transfer
 * (LEADER.STEPDOWN): this replica stops taking proposals until the
 * transfer ends. Returns 0 (started), KEEL_EAGAIN
 * (still opening) or raft's refusal (not the leader, no other voter)
 * with errmsg; asked again while a transfer runs, it keeps its target
 * unless `to` names another. */
KEEL_MUST_USE int replica_transfer_leader(struct replica *r, raft_node to,
                                          char *errmsg);

/* One membership change (docs/design.md §3.2 M1-M4; raft's RAFT_IN_CHANGE). */
struct replica_change {
    uint8_t op; /* enum raft_change_op */
    raft_node node;
    raft_incarnation incarnation;
    bool force; /* skip rule 4 (healthy majority); never rule 3 */
};

/* Propose a membership change on the leader. The configuration entry
 * takes effect when appended (rule 2); when it commits, the apply callback
 * gets it (type RAFT_ENTRY_CONFIG) with ctx on this leader, and *index is
 * its index. A leader change before the commit may replace the entry: then
 * apply sees another entry at *index with ctx 0 (the caller times out).
 * Returns 0, KEEL_EAGAIN (still opening), or raft's refusal with errmsg
 * saying what to do: KEEL_ENOTLEADER, KEEL_EBUSY (another change or a
 * transfer in flight, no healthy majority afterwards, a learner not caught
 * up), KEEL_EEXIST, KEEL_ENOENT, KEEL_EINVAL (removing the leader itself:
 * transfer first), KEEL_ELIMIT. */
KEEL_MUST_USE int replica_change(struct replica *r,
                                 const struct replica_change *c, uint64_t ctx,
                                 uint64_t *index, char *errmsg);

/* What the operator's survey needs of a group (replica_recover.c). */
struct replica_survey {
    uint64_t term;
    uint64_t last_index;
    uint64_t last_term;
    uint64_t commit;
    uint64_t snap_index;
    uint64_t faulty; /* first damaged index; 0: none */
    bool amnesiac;
    uint8_t role;
    raft_node leader;
};
void replica_survey(const struct replica *r, struct replica_survey *out);

/* The group's quarantined log (store_qlog_survey) and the directory it
 * is read from: a candidate of `keel cluster recover` when it verifies
 * from index 1 (docs/decisions/0031-recover-reads-quarantined-logs.md).
 * Reads the files on the calling thread (an operator request). */
KEEL_MUST_USE int replica_quarantine_survey(struct replica *r,
                                            struct store_qlog *out, char *dir,
                                            size_t cap, char *errmsg);

/* With the group closed (replica_close): open its store group, and if its
 * live log is empty write the quarantined run 1..keep as its log through
 * the InstallSnapshot replacement (store_qlog_restore), then close it; the
 * caller opens the replica again, which scans and loads that log as at
 * any start. KEEL_EINVAL when the live log is not empty (it is kept). */
KEEL_MUST_USE int replica_restore_quarantined(struct replica_host *h,
                                              const struct store_group_id *gid,
                                              const struct store_fsync *policy,
                                              uint64_t keep,
                                              struct store_qlog *out,
                                              char *errmsg);

struct replica_recovered {
    uint32_t quarantined;            /* records copied out before the cut */
    char path[STORE_PATH_BYTES_MAX]; /* their file ("" when none) */
};

/* The operator override (rule 4, `keel cluster recover --accept-loss`):
 * copy the records after keep to <data>/quarantine/recover-<group>-
 * term<term>.records (synced), then RAFT_IN_RECOVER {term, keep}: the
 * group takes term durably, cuts its log after keep and leaves amnesia;
 * only the source (source true: the survey's longest log) campaigns, the
 * others vote but wait for a leader.
 * The caller chose term above every term its survey saw and keep at most
 * the source's last index. Returns 0, KEEL_EAGAIN (opening), KEEL_EINVAL
 * (term not above the group's, keep below its snapshot or commit or at a
 * damaged record) or KEEL_EIO (the copy), with errmsg. */
KEEL_MUST_USE int replica_recover(struct replica *r, uint64_t term,
                                  uint64_t keep, bool source,
                                  struct replica_recovered *out, char *errmsg);

#endif
