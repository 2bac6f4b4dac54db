/* The Raft core: a pure state machine (docs/design.md §3).
 *
 * No I/O, no clock, no threads, no global state: every group is one
 * struct raft, driven by raft_step() with one input at a time (a tick carrying
 * the time, a received message, a proposal, a persisted/applied notification,
 * a request). Each step fills a struct raft_out with what the driver must do,
 * in this order:
 *
 *   1. if out.hs_changed: write (out.term, out.vote) and sync it;
 *   2. if out.truncate_from: drop the log from that index (durably, with the
 *      same sync that covers the new entries);
 *      then append out.entries[0..n_entries) at out.entries_first;
 *   3. send out.msgs (AppendEntries carry an index range; the driver fills in
 *      the payloads from its store before encoding);
 *   4. apply committed entries up to out.commit, report applied(index);
 *   5. when a sync completes, report persisted(index, term) of the last record
 *      it covered.
 *
 * The core does not own entry payloads: it keeps the term of every index as
 * run-length (first index, term) runs, the configuration entries (parsed when
 * appended), and the indexes that matter for the durability contract.
 */
#ifndef KEEL_RAFT_H
#define KEEL_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/limits.h"

typedef uint64_t raft_index;
typedef uint64_t raft_term;
typedef uint64_t raft_node;        /* a node's stable id; 0 means none */
typedef uint64_t raft_incarnation; /* random id of a data directory */

/* X(name, value, text): one list gives each enum below its values and the
 * text monitoring and `keel store dump` print (raft_role_name,
 * raft_entry_type_name). */
#define RAFT_ROLES(X)                                                          \
    X(RAFT_FOLLOWER, 1, "follower")                                            \
    X(RAFT_PRE_CANDIDATE, 2, "pre-candidate")                                  \
    X(RAFT_CANDIDATE, 3, "candidate")                                          \
    X(RAFT_LEADER, 4, "leader")
#define RAFT_ENUM_ROW(name, value, text) name = value,

enum raft_role { RAFT_ROLES(RAFT_ENUM_ROW) };

enum raft_server_role {
    RAFT_VOTER = 1,
    RAFT_LEARNER = 2,
};

/* BARRIER: the no-op a new leader appends; CONFIG's payload is
 * raft_config_encode(). */
#define RAFT_ENTRY_TYPES(X)                                                    \
    X(RAFT_ENTRY_NORMAL, 1, "normal")                                          \
    X(RAFT_ENTRY_BARRIER, 2, "barrier")                                        \
    X(RAFT_ENTRY_CONFIG, 3, "config")

enum raft_entry_type { RAFT_ENTRY_TYPES(RAFT_ENUM_ROW) };

/* The text of a raft_role ("none" for any other value) and of a
 * raft_entry_type ("unknown" for any other value). Inline: keel, which
 * links no raft code, prints entry types too. */
#define RAFT_NAME_ROW(name, value, text) [value] = text,
static inline const char *raft__name_of(const char *const *names, size_t n,
                                        uint8_t v, const char *other)
{
    return v < n && names[v] != NULL ? names[v] : other;
}
static inline const char *raft_role_name(uint8_t role)
{
    static const char *const names[] = {RAFT_ROLES(RAFT_NAME_ROW)};
    return raft__name_of(names, sizeof names / sizeof names[0], role, "none");
}
static inline const char *raft_entry_type_name(uint8_t type)
{
    static const char *const names[] = {RAFT_ENTRY_TYPES(RAFT_NAME_ROW)};
    return raft__name_of(names, sizeof names / sizeof names[0], type,
                         "unknown");
}

/* Membership rule 1: a server is (node, incarnation). */
struct raft_server {
    raft_node node;
    raft_incarnation incarnation;
    uint8_t role; /* enum raft_server_role */
};

struct raft_config {
    uint32_t n;
    struct raft_server servers[RAFT_SERVERS_MAX];
};

struct raft_entry {
    raft_term term;
    uint8_t type; /* enum raft_entry_type */
    uint32_t len;
    const void *buf; /* NULL in messages the core emits: the driver fills it */
};

enum raft_msg_type {
    RAFT_MSG_APPEND = 1,
    RAFT_MSG_APPEND_RESP = 2,
    RAFT_MSG_VOTE = 3, /* also pre-vote, with vote.pre set */
    RAFT_MSG_VOTE_RESP = 4,
    RAFT_MSG_SNAPSHOT = 5,
    RAFT_MSG_SNAPSHOT_RESP = 6,
    RAFT_MSG_TIMEOUT_NOW = 7,
    /* Reserved for storage-fault handling (issue 5). */
    RAFT_MSG_FETCH = 8,
    RAFT_MSG_FETCH_RESP = 9,
    RAFT_MSG_DISCARD = 10,
    RAFT_MSG_DISCARD_RESP = 11,
    RAFT_MSG_TYPE_MAX = 11,
};

struct raft_msg_append {
    raft_index prev_index;
    raft_term prev_term;
    raft_index commit;
    raft_index leader_last; /* the leader's last index (amnesia exit) */
    uint64_t ctx;           /* read-index round, echoed in the response */
    uint32_t n_entries;
    const struct raft_entry *entries; /* NULL when the core emits it */
};

struct raft_msg_append_resp {
    uint8_t success;
    raft_index match;    /* min(matching, accepted persisted) */
    raft_index last;     /* last index of the answered append, 0 if none */
    raft_index hint;     /* on reject: where the leader should look */
    raft_term hint_term; /* on reject: the term at hint */
    uint64_t ctx;        /* echoed read-index round */
};

struct raft_msg_vote {
    uint8_t pre;      /* pre-vote: persists nothing, term is term + 1 */
    uint8_t transfer; /* leadership transfer: ignore leader stickiness */
    raft_index last_index;
    raft_term last_term;
};

struct raft_msg_vote_resp {
    uint8_t pre;
    uint8_t granted;
};

/* InstallSnapshot (docs/design.md §5): the snapshot at index and the leader's
 * retained log from first through index, in chunks the driver fills. */
struct raft_msg_snapshot {
    raft_index index;
    raft_term term;
    raft_index leader_last;
    raft_index log_first;
    uint64_t offset;
    uint8_t done;
    uint32_t len;
    const void *chunk;
    struct raft_config config;
};

struct raft_msg_snapshot_resp {
    uint8_t success;
    raft_index match;
    uint64_t offset;
};

/* Repair and discard (docs/design.md §4.7 R1). FETCH asks for one index (any
 * term, with or without a leader; the answer is a copy to verify). DISCARD
 * asks the same in a fresh term the faulty node made durable and every
 * receiver adopts durably (rule 1c); both answer with discard_resp. */
struct raft_msg_discard {
    raft_index index;
};

enum raft_discard_status {
    RAFT_DISCARD_NONE = 1,   /* no record at index */
    RAFT_DISCARD_FAULTY = 2, /* a damaged record at index */
    RAFT_DISCARD_HAS = 3,    /* an intact record of `term` at index */
};

struct raft_msg_discard_resp {
    raft_index index;
    uint8_t status; /* enum raft_discard_status */
    raft_term term; /* HAS: the record's term */
    /* FETCH_RESP with HAS: the intact record. NULL when the core emits it:
     * the driver fills it from its store (reads verify; never a damaged
     * record). */
    const struct raft_entry *entry;
};

struct raft_msg {
    uint8_t type; /* enum raft_msg_type */
    raft_node from;
    raft_incarnation from_incarnation;
    raft_node to;
    raft_incarnation to_incarnation; /* 0: any */
    raft_term term;
    union {
        struct raft_msg_append append;
        struct raft_msg_append_resp append_resp;
        struct raft_msg_vote vote;
        struct raft_msg_vote_resp vote_resp;
        struct raft_msg_snapshot snapshot;
        struct raft_msg_snapshot_resp snapshot_resp;
        struct raft_msg_discard discard;
        struct raft_msg_discard_resp discard_resp;
    };
};

enum raft_change_op {
    RAFT_CHANGE_ADD_LEARNER = 1,
    RAFT_CHANGE_PROMOTE = 2,
    RAFT_CHANGE_REMOVE = 3,
};

enum raft_in_type {
    RAFT_IN_TICK = 1,
    RAFT_IN_RECEIVE,
    RAFT_IN_PROPOSE,
    RAFT_IN_PERSISTED,
    RAFT_IN_HARD_STATE_PERSISTED,
    RAFT_IN_APPLIED,
    RAFT_IN_SNAPSHOT_TAKEN,
    RAFT_IN_TRANSFER,
    RAFT_IN_READ_INDEX,
    RAFT_IN_CHANGE,
    RAFT_IN_SNAPSHOT_INSTALLED,
    /* Storage faults (docs/design.md §4.7 R1): the store found a damaged record
     * (reads verify), or repaired one. Carries the first faulty index now
     * (0: the log is intact again) and the extent. */
    RAFT_IN_FAULTY,
    /* The operator override of rule 4 (`keel cluster recover`), only when
     * asked: the survey picked a source; keep the log through `keep` (the
     * driver copied what lies after it to quarantine/ first), take `term`
     * (past every term the survey saw) durably, and leave amnesia. */
    RAFT_IN_RECOVER,
    /* Follower: the driver refused the content of the complete transfer of
     * snapshot (index, term) (every frame was intact, the transfer's own
     * checksums failed): forget it, as raft_snapshot_abort, and answer the
     * leader SNAPSHOT_RESP success=0 at offset 0 so that it spools the
     * snapshot afresh (docs/raft.md "InstallSnapshot"). Ignored while
     * another transfer is being received. */
    RAFT_IN_SNAPSHOT_REFUSED,
};

struct raft_in {
    uint8_t type;    /* enum raft_in_type */
    uint64_t now_ms; /* every input carries the time */
    union {
        const struct raft_msg *msg;
        struct {
            uint32_t n;
            const struct raft_entry *entries;
        } propose;
        struct {
            raft_index index;
            raft_term term;
        } persisted;
        raft_index applied;
        struct {
            raft_index index;
            raft_term term;
            const struct raft_config *config; /* INSTALLED only */
            /* INSTALLED only: the first damaged record the store still
             * finds after index (0: none), so no step applies past it. */
            raft_index faulty;
        } snapshot;
        raft_node transfer_to; /* 0: the most caught-up voter */
        uint64_t read_id;
        struct {
            raft_index index;        /* first faulty index; 0: none */
            raft_index extent_index; /* rule 1 extent (vote with it) */
            raft_term extent_term;   /* 0: the tail term is unknown */
        } faulty;
        struct {
            raft_term term;  /* > every term seen by the survey */
            raft_index keep; /* >= snapshot and commit, < first fault */
            /* 1 on the survey's source only. Every other node votes but
             * never campaigns until it hears a leader: else the longest
             * non-source log could win with a shorter one's vote and cut
             * the source's longer (acked) log. */
            uint8_t source;
        } recover;
        struct {
            uint8_t op; /* enum raft_change_op */
            raft_node node;
            raft_incarnation incarnation;
            /* The operator's --force: skip membership rule 4 (a majority
             * of the new voters healthy) for ADD_LEARNER and REMOVE. Rule 3
             * (one change at a time, after a commit of this term) and a
             * learner's catch-up before PROMOTE still hold. */
            uint8_t force;
        } change;
    };
};

struct raft_read {
    uint64_t id;
    int status;       /* 0, or KEEL_ENOTLEADER / KEEL_EAGAIN */
    raft_index index; /* serve the read once applied >= index */
};

/* A copy of a record at or after the first faulty index, received from the
 * leader. Copies come in index order from the first faulty index on (one
 * step may carry several, a run continues in later steps). The driver
 * collects them until they cover a damaged run up to an intact successor,
 * verifies the run (re-encoded with the local predecessor checksum and
 * salt, the chain must end at the local successor's prev-checksum, or M),
 * writes it in place, syncs, and reports RAFT_IN_FAULTY with the next
 * faulty index. A run that does not verify is dropped (the store keeps it
 * faulty) and the driver reports RAFT_IN_FAULTY with the same index: the
 * core then starts handing copies from that index again. */
struct raft_repair {
    raft_index index;
    struct raft_entry entry; /* buf points into the input message */
};

struct raft_out {
    bool hs_changed; /* persist (term, vote) and sync BEFORE sending */
    raft_term term;
    raft_node vote;
    raft_index truncate_from; /* 0: no truncation */
    raft_index entries_first;
    uint32_t n_entries;
    struct raft_entry entries[RAFT_OUT_ENTRIES_MAX];
    uint32_t n_msgs;
    struct raft_msg msgs[RAFT_OUT_MSGS_MAX];
    raft_index commit;
    uint32_t n_reads;
    struct raft_read reads[RAFT_OUT_READS_MAX];
    uint64_t timeout_ms; /* call with a tick at or after this time */
    /* InstallSnapshot chunk to write (docs/design.md §5): write [offset, offset
     * + len) of the transfer; when done, install (segments, snapshot, then
     * LMDB, all synced) and report RAFT_IN_SNAPSHOT_INSTALLED. Pointers are
     * valid during this step only. */
    bool has_snapshot;
    struct raft_msg_snapshot snapshot;
    /* Amnesia state changed (target learned, or cleared): record
     * (amnesiac, t0, target) in LMDB, synced, before sending. */
    bool amnesia_changed;
    bool amnesiac;
    raft_term amnesia_t0;
    raft_index amnesia_target;
    /* Recover wait changed (set by RAFT_IN_RECOVER on a node that is not
     * the source, cleared when a leader is heard): record
     * recover_wait_term (0: clear) in LMDB, synced, before sending, so a
     * restart before the source leads does not campaign either. */
    bool recover_wait_changed;
    raft_term recover_wait_term;
    /* Storage faults: verified copies to write in place (see raft_repair). */
    uint32_t n_repairs;
    struct raft_repair repairs[RAFT_OUT_REPAIRS_MAX];
    /* Trace: what changed in this step, for the driver's event log. */
    uint8_t role;
    raft_node leader;
    bool became_leader;
};

struct raft_params {
    raft_node id;
    raft_incarnation incarnation;
    uint64_t seed;
    uint32_t election_timeout_ms; /* randomized in [t, 2t) */
    uint32_t heartbeat_ms;
    uint32_t append_entries_max; /* per AppendEntries; 0: the maximum */
};

struct raft_log_run {
    raft_index first;
    raft_term term;
};

struct raft_config_entry {
    raft_index index;
    struct raft_config config;
};

struct raft_inflight {
    uint32_t head;
    uint32_t n;
    raft_index last[RAFT_INFLIGHT_MAX];
};

struct raft_progress {
    raft_node node;
    raft_incarnation incarnation;
    uint8_t role;
    raft_index next;
    raft_index match;
    bool probe;      /* probing: one append at a time */
    bool probe_sent; /* the probe is out; wait for an answer or heartbeat */
    bool active;     /* heard from in this check-quorum period */
    uint64_t heard_ms;
    uint64_t read_round;
    raft_index acked;      /* highest index the follower said it received */
    raft_index snap_index; /* != 0: sending this snapshot */
    uint64_t snap_offset;
    bool snap_sent;
    bool snap_heard; /* a chunk answered since the last heartbeat */
    raft_index acked_at_heartbeat;
    struct raft_inflight inflight;
};

struct raft_pending_read {
    uint64_t id;
    raft_index index;
    uint64_t round;
};

/* Rule mutations for the simulator (test-only build of the core). */
enum raft_mutation {
    RAFT_MUT_NONE = 0,
    RAFT_MUT_LEADER_COUNTS_UNSYNCED = 1u << 0,
    RAFT_MUT_PERSISTED_BY_INDEX = 1u << 1,
    RAFT_MUT_COMMIT_PREV_TERM = 1u << 2,
    RAFT_MUT_CONFIG_EARLY = 1u << 3,
    RAFT_MUT_NO_INCARNATION = 1u << 4,
    RAFT_MUT_FAULTY_MATCH_ABOVE = 1u << 5,   /* match not capped at fault */
    RAFT_MUT_FAULTY_LEADER_COUNTS = 1u << 6, /* leader counts its damage */
    RAFT_MUT_FAULTY_ANSWERS_NONE = 1u << 7,  /* "none" about its fault */
    RAFT_MUT_DISCARD_UNFENCED = 1u << 8,     /* no fresh term, any answer */
    RAFT_MUT_AMNESIAC_VOTES = 1u << 9,       /* amnesia does not stop votes */
    RAFT_MUT_AMNESIA_AT_COMMIT = 1u << 10,   /* exit at the leader's commit */
    RAFT_MUT_TRUNCATE_FAULTY = 1u << 11,     /* truncate instead of repair */
};

struct raft {
    raft_node id;
    raft_incarnation incarnation;
    uint64_t prng;
    uint32_t election_timeout_ms;
    uint32_t heartbeat_ms;
    uint32_t append_entries_max;
    uint32_t mutations;

    /* Hard state: (term, vote) only. */
    raft_term term;
    raft_node vote;
    bool hs_dirty;

    uint8_t role;
    raft_node leader;
    uint64_t now_ms;
    uint64_t election_deadline_ms;
    uint64_t leader_contact_ms; /* last AppendEntries from a leader */

    /* Log: terms as runs over (snap_index, last_index]. */
    raft_index snap_index;
    raft_term snap_term;
    raft_index last_index;
    struct raft_log_run *runs;
    uint32_t n_runs;
    uint32_t runs_cap;

    raft_index persisted; /* accepted persisted index */
    raft_index commit;
    raft_index applied;

    /* Configurations: the latest applies, committed or not. */
    struct raft_config snap_config;
    raft_index snap_config_index;
    uint32_t n_configs;
    struct raft_config_entry configs[RAFT_CONFIGS_MAX];

    /* Follower: the last index known to match the current leader. */
    raft_index leader_match;
    /* Follower: the highest read round (ctx) heard from the current leader,
     * echoed by the ack after persist, when an AppendEntries response last
     * went out and how many AppendEntries wait for the ack since: one that
     * brings new entries is answered by that ack (docs/raft.md,
     * "Replication"). */
    uint64_t leader_ctx;
    uint64_t ack_sent_ms;
    uint32_t acks_owed;
    /* Follower: the snapshot being received. */
    raft_index recv_snap_index;
    raft_term recv_snap_term;
    uint64_t recv_offset;
    bool recv_done; /* all chunks written: waiting for the install */

    /* Candidate. */
    uint32_t n_votes;
    raft_node votes[RAFT_SERVERS_MAX];
    bool campaign_transfer;

    /* Leader. */
    uint32_t n_progress;
    struct raft_progress progress[RAFT_SERVERS_MAX];
    raft_index term_start; /* index of this leader's barrier */
    uint64_t heartbeat_deadline_ms;
    uint64_t quorum_deadline_ms;
    raft_node transfer_to;
    uint64_t transfer_deadline_ms;
    uint64_t read_round;
    uint32_t n_reads;
    struct raft_pending_read reads[RAFT_READS_MAX];
    uint8_t config_buf[RAFT_CONFIG_BYTES_MAX];

    /* Storage faults (docs/design.md §4.7 R1). faulty: the first damaged index
     * at or below the sync marker (0: none). While faulty the node reports
     * match below it, votes with its extent (not at all if extent_term is
     * 0), never campaigns, is never a transfer target, applies nothing from
     * it on; a faulty leader transfers leadership or steps down. */
    raft_index faulty;
    raft_index extent_index;
    raft_term extent_term;
    /* The discard round under way (index 0: none): who answered what. */
    raft_index discard_index;
    raft_term discard_term;
    uint32_t n_discard;
    raft_node discard_from[RAFT_SERVERS_MAX];
    uint8_t discard_status[RAFT_SERVERS_MAX];
    /* Amnesia (docs/design.md §4.7 R3-R4): lost a range that may have been
     * acknowledged. No vote, no pre-vote, no campaign, not a transfer
     * target; acks count. Exit once persisted >= target, the leader's last
     * index carried by the first AppendEntries/InstallSnapshot of a leader
     * of term >= t0. */
    bool amnesiac;
    raft_term amnesia_t0;
    raft_index amnesia_target; /* 0: not learned yet */
    bool amnesia_dirty;
    /* After RAFT_IN_RECOVER on a node that is not the source: no
     * campaign until a leader is heard (persisted by the driver:
     * raft_out.recover_wait_changed, raft_load_recover_wait). */
    bool recover_wait;
    bool recover_wait_dirty;
    bool fetch_sent; /* a FETCH round went out for this fault */
    bool fetch_held; /* a FETCH answer showed an intact copy exists */
    /* Repair from the leader (finding F12): the store verifies a damaged
     * run only as a whole (the chain must end at an intact successor), so
     * the core hands the leader's copies of faulty..extent in order, one
     * per index, and the driver collects them. repair_next: the next index
     * to hand while repair_fault == faulty (else faulty itself). */
    raft_index repair_fault;
    raft_index repair_next;
};

/* Initialise an empty group object. Allocates the term-run table; returns 0
 * or KEEL_ENOMEM. Follow with the raft_load_* calls, then raft_start. */
int raft_init(struct raft *r, const struct raft_params *p);

/* Free what raft_init allocated. */
void raft_close(struct raft *r);

/* Restore the durable state read from disk, before raft_start. */
void raft_load_hard_state(struct raft *r, raft_term term, raft_node vote);
void raft_load_snapshot(struct raft *r, raft_index index, raft_term term,
                        const struct raft_config *config);

/* Append one durable log record during load (indexes in order, starting right
 * after the snapshot). Configuration entries are parsed. Returns 0,
 * KEEL_EINVAL (out of order) or KEEL_ECORRUPT (bad configuration payload). */
int raft_load_entry(struct raft *r, raft_index index,
                    const struct raft_entry *e);

/* Rule 1: the store's recovery report found the first damaged record at
 * index (within the loaded log) and the extent (the greatest of the last
 * intact record, the sync marker and the snapshot; extent_term 0 when the
 * tail term is unknown). Call after the raft_load_entry calls. */
void raft_load_faulty(struct raft *r, raft_index index, raft_index extent_index,
                      raft_term extent_term);

/* Rules 3-4: the group lost a range (or an OS crash under `interval`): it
 * is amnesiac with threshold t0 (its durable term at start) and the exit
 * target recorded in LMDB (0 if not learned yet). Before raft_start. */
void raft_load_amnesia(struct raft *r, raft_term t0, raft_index target);
/* Before raft_start: a recover wait recorded before a restart (no
 * campaign until a leader is heard). */
void raft_load_recover_wait(struct raft *r);

/* Start the group: term := max(hard state, last log term, snapshot term);
 * every loaded record counts as persisted. */
void raft_start(struct raft *r, uint64_t now_ms);

/* The one entry point (see the file comment for the output contract).
 * Returns 0, or KEEL_ENOTLEADER / KEEL_EBUSY / KEEL_EINVAL / KEEL_ELIMIT for a
 * refused request (propose, transfer, change); out is valid either way. */
int raft_step(struct raft *r, const struct raft_in *in, struct raft_out *out);

/* Follower: the driver could not take the snapshot being received (a
 * chunk failed its checksum, the spool or the install failed): forget it.
 * The next chunk at a non-zero offset is answered with failure, so the
 * leader restarts the transfer at offset 0. Nothing is sent: a refusal the
 * leader must hear of (a fresh spool can help) is RAFT_IN_SNAPSHOT_REFUSED. */
void raft_snapshot_abort(struct raft *r);

/* Membership: the configuration in effect (the latest in the log). */
const struct raft_config *raft_config_current(const struct raft *r);
raft_index raft_config_current_index(const struct raft *r);
raft_term raft_term_at(const struct raft *r, raft_index index);

/* Encode / decode a configuration entry payload (little-endian, versioned).
 * Decode returns KEEL_ECORRUPT on malformed input. */
uint32_t raft_config_encode(const struct raft_config *c, uint8_t *buf,
                            uint32_t cap);
int raft_config_decode(const void *buf, uint32_t len, struct raft_config *c);

const struct raft_server *raft_config_find(const struct raft_config *c,
                                           raft_node node);

#endif
