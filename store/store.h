/* store/: the checksummed .blk segment log and the node's small durable
 * facts (docs/design.md §4, §5). It knows log records and hard state, not the
 * Raft protocol.
 *
 * Threads. Every store_* function is called from one thread (the server's
 * loop thread) unless its comment says otherwise. A small pool of sync
 * threads does all segment writes, fdatasync, segment creation, repair
 * writes and the synced LMDB transactions of hard state. When work
 * completes, the store queues a completion and calls cfg.wakeup_cb(arg) from
 * the sync thread; the loop thread then drains completions with
 * store_poll(), which never blocks.
 *
 * Errors. Functions return 0 or a negative KEEL_E* code and fill errmsg
 * (KEEL_ERRMSG_MAX bytes, may be NULL). A write or fsync error on a segment
 * or LMDB is never returned: it calls cfg.fatal_cb (to log) and aborts the
 * process (docs/design.md §4.5); recovery then runs from disk.
 */
#ifndef KEEL_STORE_H
#define KEEL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <keel/error.h>
#include <keel/limits.h>

#include "fs.h"

struct store;
struct store_group;

struct store_group_id {
    uint8_t b[16];
};

enum store_fsync_policy {
    STORE_FSYNC_GROUP = 0, /* persisted when the batch's fdatasync returns */
    STORE_FSYNC_ALWAYS,    /* one batch (and sync) per store_append call */
    STORE_FSYNC_INTERVAL,  /* persisted when write() returns; timer syncs */
};

struct store_fsync {
    enum store_fsync_policy policy;
    uint32_t interval_ms; /* STORE_FSYNC_INTERVAL only */
};

/* Parse "group", "always" or "interval:<ms>". KEEL_ECONFIG otherwise. */
int store_fsync_parse(const char *text, struct store_fsync *out, char *errmsg);

struct store_config {
    const char *data_dir;         /* must exist; holds meta.lmdb, groups/ ... */
    struct fs *fs;                /* NULL: the real file system */
    uint64_t segment_bytes;       /* 0: STORE_SEGMENT_BYTES_DEFAULT */
    unsigned sync_threads;        /* 0: STORE_SYNC_THREADS_DEFAULT */
    const char *boot_id_path;     /* NULL: /proc/sys/kernel/random/boot_id */
    void (*wakeup_cb)(void *arg); /* called from sync threads */
    void *wakeup_arg;
    void (*fatal_cb)(void *arg, const char *msg); /* log, then abort */
    void *fatal_arg;
    bool no_prealloc; /* tests: create segments only when needed */
    bool manual_sync; /* tests: no sync threads; store_debug_step runs the
                         queued work on the caller (deterministic) */
    bool sole_member; /* this node is the only member of every group it
                         holds (a keeld without a cluster): after a
                         meta.lmdb reset or loss a group with no catalogue
                         entry catalogues the segment files whose headers
                         verify (nobody else can hold a newer copy: the
                         log is the stream), and neither the reset nor a
                         lost hard state makes a group amnesiac (no other
                         voter exists to be misled by a lost vote). */
    bool read_only;   /* forensic open of a stopped node's directory (keel
                         store dump): LMDB MDB_RDONLY, segments O_RDONLY, no
                         sync threads, no node record, no quarantine moves,
                         truncation, zeroing, markers or prealloc; the
                         recovery report says what a real open would do.
                         Only open, store_read, store_term_at, info and
                         close may be called. */
};

/* What store_open found about the node as a whole. */
struct store_node_report {
    bool fresh;      /* a new data directory: a new incarnation was made */
    bool meta_reset; /* meta.lmdb was unreadable (hard state or catalogue):
                        moved to quarantine/, new incarnation; every group
                        rejoins as a non-voter (docs/design.md §4.7 R3) */
    char meta_reset_reason[KEEL_ERRMSG_MAX];
    size_t meta_migrated; /* meta.lmdb values rewritten in envelope version
                             2 (their checksum covers the key) by this open:
                             nonzero once, on the first start after an
                             upgrade (store/FORMAT.md) */
    size_t meta_v1;       /* meta.lmdb values in envelope version 1 (their
                             checksum leaves the key out) after this open:
                             nonzero only on a read-only open (keel store
                             dump) of a directory written before */
    bool os_crash;        /* previous run ended without a clean shutdown and the
                             boot id changed (rule 4) */
    uint8_t incarnation[16]; /* stored id of this data directory */
    uint64_t incarnation64;  /* store_incarnation64(incarnation) */
};

/* The 64-bit form of a 16-byte incarnation used by Raft (FORMAT.md
 * "Incarnation"): bytes 0..7 as a little-endian u64, and 1 if that is 0
 * (0 means "any" on the Raft wire). Two incarnations that differ only in
 * bytes 8..15 fold alike; the 16 bytes are random, so a collision has
 * probability 2^-64 per pair. */
uint64_t store_incarnation64(const uint8_t inc[16]);

/* Open the store of a data directory. Starts the sync threads. */
int store_open(const struct store_config *cfg, struct store **out,
               struct store_node_report *rep, char *errmsg);

/* A node of one (cfg.sole_member) whose meta.lmdb was reset or lost took
 * a new incarnation, but its logs' configurations name the old one, and
 * nobody else holds its groups: keep the old one. Writes the incarnation
 * value (bytes 0..7 little-endian inc64, bytes 8..15 random) synced;
 * store_incarnation64 of it is inc64 from now on. KEEL_EINVAL without
 * cfg.sole_member or on a read-only store. */
int store_incarnation_adopt(struct store *s, uint64_t inc64, char *errmsg);

/* Stop the sync threads after they finish queued work and free everything.
 * clean=true records a clean shutdown in the node record (synced); a test
 * simulating a crash passes false. */
void store_close(struct store *s, bool clean);

/* An inclusive index range. */
struct store_range {
    uint64_t from;
    uint64_t to;
};

enum store_amnesia_reason {
    STORE_AMNESIA_NONE = 0,
    STORE_AMNESIA_RECORDED,       /* entered earlier, still recorded */
    STORE_AMNESIA_LOST_RANGE,     /* missing/short segment or bad header */
    STORE_AMNESIA_SNAPSHOT_GAP,   /* log does not reach back to snapshot */
    STORE_AMNESIA_INTERVAL_CRASH, /* interval group after an OS crash */
    STORE_AMNESIA_INTERVAL_TAIL,  /* interval group, damage after marker */
    STORE_AMNESIA_META_RESET,     /* meta.lmdb was reset: new incarnation */
    STORE_AMNESIA_BAD_VALUE,      /* the group's snapshot/amnesia value */
};

/* The recovery report of one group (docs/design.md §4.7 R1-R5). */
struct store_recovery {
    uint64_t first_index;  /* first index held in the log */
    uint64_t last_index;   /* last index of the log (intact or faulty) */
    uint64_t last_term;    /* term at last_index */
    uint64_t extent_index; /* greatest of last intact, M, snapshot */
    uint64_t extent_term;
    bool has_marker; /* M */
    uint64_t marker_index;
    uint64_t marker_term;
    bool torn;           /* a damaged or stale tail after M was dropped */
    uint64_t torn_from;  /* first index not kept */
    uint64_t torn_bytes; /* bytes zeroed */
    unsigned n_faulty;   /* faulty ranges at or below M (rule 1) */
    struct store_range faulty[STORE_REPORT_RANGES_MAX];
    unsigned n_lost; /* lost ranges (rule 3); to = UINT64_MAX if unknown */
    struct store_range lost[STORE_REPORT_RANGES_MAX];
    bool amnesia;
    enum store_amnesia_reason amnesia_reason;
    uint64_t amnesia_t0;
    uint64_t hard_term;     /* durable hard-state term */
    uint64_t max_term_seen; /* over log, quarantined records and snapshot */
    uint64_t snapshot_index;
    uint64_t snapshot_term;
    unsigned quarantined_files;
    unsigned rebuilt_segments; /* sole_member: catalogue entries rebuilt
                                  from segment headers by this open */
    uint64_t rebuilt_from;     /* base index of the first of them */
};

/* Open (or create, empty from index 1) the log of a group and run the
 * recovery scan. The policy comes from the stream config. The group lives
 * until store_group_close, store_group_delete or store_close. KEEL_EEXIST
 * if already open. Cost: one catalogue read and one scan of the group's
 * segments; no file is created until the first append. */
int store_group_open(struct store *s, const struct store_group_id *id,
                     const struct store_fsync *policy, struct store_group **out,
                     struct store_recovery *rep, char *errmsg);

struct store_record {
    uint64_t index;
    uint64_t term;
    uint8_t type;
    uint8_t flags;
    uint32_t len;
    const void *payload; /* copied by store_append */
};

/* Append records (Raft decides index and term): recs[0].index must be the
 * last index + 1 and indexes consecutive (asserted), terms non-decreasing.
 * Durability is reported later by STORE_EV_PERSISTED. KEEL_ENOSPC when a
 * new segment could not be created (refuse publishes, keep serving reads;
 * STORE_EV_SPACE tells when it resumes). KEEL_ETOOBIG for a record larger
 * than a segment. */
KEEL_MUST_USE int store_append(struct store_group *g,
                               const struct store_record *recs, size_t n,
                               char *errmsg);

/* Conflict truncation (docs/design.md §4.3): remove every index >= from. The
 * bytes are zeroed durably before any later entry is reported persisted. */
KEEL_MUST_USE int store_truncate(struct store_group *g, uint64_t from,
                                 char *errmsg);

/* A read record. The payload is malloc'ed; free with store_entry_free. */
struct store_entry {
    uint64_t index;
    uint64_t term;
    uint8_t type;
    uint8_t flags;
    uint32_t len;
    uint8_t *payload;
};

/* Read one record with its checksum verified (rule 5). KEEL_ENOENT outside
 * [first, last]; KEEL_EFAULTY for a known faulty index; KEEL_ECORRUPT when
 * verification fails now: the index becomes faulty (never truncated). */
KEEL_MUST_USE int store_read(struct store_group *g, uint64_t index,
                             struct store_entry *out, char *errmsg);
void store_entry_free(struct store_entry *e);

/* Call cb for each record in [from, to] in order; stops at the first
 * error (returned) or non-zero cb result. */
typedef int (*store_iter_cb)(void *arg, const struct store_entry *e);
KEEL_MUST_USE int store_iterate(struct store_group *g, uint64_t from,
                                uint64_t to, store_iter_cb cb, void *arg,
                                char *errmsg);

/* As store_iterate, reading runs of back-to-back records of one segment
 * with one pread each (at most STORE_READ_RANGE_BYTES), every record
 * still checksum-verified before cb sees it (a bad one is marked faulty
 * and KEEL_ECORRUPT returned). e->payload is valid only during cb. Records
 * not yet written, faulty or of unknown position go through store_read.
 * KEEL_ENOENT when [from, to] is not inside the log. */
KEEL_MUST_USE int store_read_range(struct store_group *g, uint64_t from,
                                   uint64_t to, store_iter_cb cb, void *arg,
                                   char *errmsg);

/* Background scrub (docs/decisions/0027-background-scrub.md): read and verify
 * (checksum, and the hash chain through the checksums the open's scan verified)
 * the persisted records from `from` on, skipping known faulty ones, at most
 * max_bytes of records (at least one). *next := the index to scrub next
 * (past the log's persisted end when done), *bytes := record bytes read.
 * KEEL_ECORRUPT when a record failed: it is faulty now, as after a failed
 * read (rule 5), and the caller tells the Raft driver; *next is past it.
 * Loop thread, like store_read. */
KEEL_MUST_USE int store_scrub(struct store_group *g, uint64_t from,
                              uint64_t max_bytes, uint64_t *next,
                              uint64_t *bytes, char *errmsg);

/* Term at index from the in-memory table (no I/O). KEEL_EFAULTY,
 * KEEL_ENOENT. For index == first_index - 1 the snapshot term is used. */
KEEL_MUST_USE int store_term_at(struct store_group *g, uint64_t index,
                                uint64_t *term);

/* Close one group; the store stays open. Blocks until the group's queued
 * work has run on the sync threads (writes already accepted are written and
 * synced; an interval group is synced; a group out of space drops what it
 * could not write), then releases its files and memory. No event of the
 * group is delivered afterwards; g is invalid on return. */
void store_group_close(struct store_group *g);

/* Delete a group's log after an explicit, committed stream deletion
 * (docs/design.md §5 S6). Closes it first if open. Blocking (call it
 * when a stall of one LMDB commit, unlinks and a directory fsync is
 * acceptable): every meta.lmdb key of the group (hard state, catalogue,
 * snapshot, amnesia) is removed in one synced transaction, then the segment
 * files are unlinked, then the directory is fsynced. A crash before the
 * transaction leaves the whole group; after it, only files LMDB does not
 * name, which a later open of the same id quarantines. Empty directories
 * are left in place. Never called because metadata says a stream should
 * not exist (those files go to quarantine/orphans/). */
int store_group_delete(struct store *s, const struct store_group_id *id,
                       char *errmsg);

/* A closed group recorded amnesiac (rule 3) whose log continues no valid
 * snapshot (docs/design.md §5 S4: it can only be restored by InstallSnapshot):
 * move its segment files to <data>/quarantine/<group hex>-<name> and forget its
 * catalogue and snapshot pair in one synced LMDB transaction first, so the next
 * store_group_open finds an empty log from index 1. Hard state, amnesia record
 * and recover wait are kept. Never deletes. Blocking. KEEL_EEXIST (the group is
 * open), KEEL_EINVAL (not recorded amnesiac), KEEL_ELIMIT, directory errors. */
int store_group_quarantine_log(struct store *s, const struct store_group_id *id,
                               char *errmsg);

struct store_group_info {
    uint64_t first_index;
    uint64_t last_index;
    uint64_t last_term;
    uint64_t persisted_index; /* last reported persisted */
    uint64_t first_faulty;    /* 0 when none */
    uint64_t log_bytes;       /* bytes of the records in the log */
    bool enospc;
    bool amnesia;
};
void store_group_info(struct store_group *g, struct store_group_info *out);

/* The index the next store_append must start at (last index + 1), in O(1):
 * for a caller that checks what it hands store_append. */
uint64_t store_next_index(const struct store_group *g);

/* Durably save (term, vote) in one synced LMDB transaction on a sync
 * thread; STORE_EV_HARD_STATE follows. Raft must not send any message of
 * the new term before it (docs/design.md §3). */
KEEL_MUST_USE int store_hard_state_save(struct store_group *g, uint64_t term,
                                        const void *vote, size_t vote_len,
                                        char *errmsg);

/* The durable hard state (the last synced store_hard_state_save; a save
 * still in flight is not visible). *vote_len: the vote buffer's size in,
 * the vote's length out (STORE_VOTE_BYTES_MAX always fits). A group that
 * never saved one reads term 0 and an empty vote. KEEL_ECORRUPT if the
 * value fails its checksum now (restart: the store then resets meta.lmdb
 * under rule 3). */
KEEL_MUST_USE int store_hard_state_load(struct store_group *g, uint64_t *term,
                                        void *vote, size_t *vote_len,
                                        char *errmsg);

/* Repair (rule 1): candidate copies of the faulty run starting at
 * recs[0].index, in order. Each is re-encoded with the local predecessor's
 * checksum and the local segment salt; the chain must end equal to the
 * local successor's prev-checksum (or M's checksum at M.index) and fill the
 * damaged bytes exactly. KEEL_ECONFLICT if a copy does not verify (nothing
 * is written); otherwise written in place and fdatasynced (no marker) on a
 * sync thread, then STORE_EV_REPAIRED. */
KEEL_MUST_USE int store_repair(struct store_group *g,
                               const struct store_record *recs, size_t n,
                               char *errmsg);

/* The damaged run starting at faulty index `from`: *last := the last index
 * of the consecutive faulty records from there (the run store_repair must
 * be given whole). KEEL_EINVAL if `from` is not faulty. Loop thread. */
KEEL_MUST_USE int store_faulty_run(struct store_group *g, uint64_t from,
                                   uint64_t *last);

/* Record a durable snapshot (index, term) (synced, blocking: call from a
 * worker thread or while the group is quiet). The previous newest becomes
 * the older kept snapshot. KEEL_EAGAIN if index is above the persisted
 * index (docs/design.md §5 S1: a snapshot at X only after entries <= X
 * persist). */
KEEL_MUST_USE int store_snapshot_record(struct store_group *g, uint64_t index,
                                        uint64_t term, char *errmsg);

/* The snapshots LMDB records for the group (docs/design.md §5: a snapshot file
 * LMDB does not name does not count): the newest and the older kept one,
 * index 0 when none. Read from LMDB (any thread). A group that never
 * recorded one reads all zeros. KEEL_ECORRUPT when the value fails its
 * checksum or names an older snapshot above the newest. */
struct store_snapshot_pair {
    uint64_t index; /* newest */
    uint64_t term;
    uint64_t older_index;
    uint64_t older_term;
};
KEEL_MUST_USE int store_snapshot_get(struct store_group *g,
                                     struct store_snapshot_pair *out,
                                     char *errmsg);

/* mkdir dir over fs (an existing one is fine) and fsync its parent, so
 * the new entry is durable. 0 or the fs error. */
KEEL_MUST_USE int store_mkdir_durable(struct fs *fs, const char *dir,
                                      char *errmsg);

/* Move path to <data_dir>/quarantine[/sub]/<name> (name.1, name.2, ...
 * when taken), making the directories durably, then fsync the quarantine
 * directory and path's own. Never unlinks (docs/design.md §5). *moved
 * says whether the rename happened, so a caller can tell a failed
 * directory fsync after it from a failure before it. 0, KEEL_ELIMIT (too
 * many copies of name) or the fs error. */
KEEL_MUST_USE int store_quarantine_move(struct fs *fs, const char *data_dir,
                                        const char *sub, const char *path,
                                        const char *name, bool *moved,
                                        char *errmsg);

/* The one check of docs/design.md §5 S2 both layers make before a prefix
 * drop: KEEL_EPERM, saying what to do, unless 1 <= upto <= older_index.
 * older_what names which older snapshot ("kept" for the store's catalogue,
 * "valid" for the one snapshot/ can restore from). */
KEEL_MUST_USE int store_prefix_drop_check(uint64_t upto, uint64_t older_index,
                                          const char *older_what, char *errmsg);

/* Drop whole segments whose records are all <= upto (docs/design.md §5): only
 * allowed when upto <= the older of the two kept snapshots (KEEL_EPERM
 * otherwise). Catalogue first, then unlink, then directory fsync, on a sync
 * thread. The caller proved the cut committed. */
KEEL_MUST_USE int store_drop_prefix(struct store_group *g, uint64_t upto,
                                    char *errmsg);

/* InstallSnapshot log replacement (docs/design.md §5): the leader's retained
 * log [first, X] becomes the group's whole log, with the snapshot at X.
 * Blocking (segment writes and fsyncs on the caller's thread, which must
 * make no other store call for the group meanwhile); the loop thread may
 * call it while the group is quiet.
 *   begin   waits until the group's queued work is done; the local log
 *           must hold no index >= first (KEEL_EINVAL: truncate first);
 *   append  records first, first+1, ... into new segment files (not yet
 *           catalogued: a crash leaves files the next open quarantines);
 *   sync    writes the sync marker after the last record, fsyncs every new
 *           file, then the directory;
 *   commit  (after the caller made the snapshot file at X durable) swaps
 *           the catalogue and records the snapshot pair (X, the previous
 *           newest as older only if the new log continues it) in one
 *           synced LMDB transaction, then queues the old segments'
 *           deletion (unlink, directory fsync). Persisted becomes X.
 *           Frees rp; KEEL_ECANCELED only in tests (store_debug_kill).
 *   abort   removes the uncatalogued files and frees rp (any time before
 *           commit returned 0).
 * KEEL_ENOSPC, KEEL_ETOOBIG, KEEL_ENOMEM, KEEL_EEXIST (a file of a new
 * segment's name exists). */
struct store_replace;
KEEL_MUST_USE int store_replace_begin(struct store_group *g, uint64_t first,
                                      struct store_replace **out, char *errmsg);
KEEL_MUST_USE int store_replace_append(struct store_replace *rp,
                                       const struct store_record *recs,
                                       size_t n, char *errmsg);
KEEL_MUST_USE int store_replace_sync(struct store_replace *rp, char *errmsg);
KEEL_MUST_USE int store_replace_commit(struct store_replace *rp,
                                       uint64_t snap_index, uint64_t snap_term,
                                       char *errmsg);
void store_replace_abort(struct store_replace *rp);

/* A group's quarantined log (store/qlog.c, docs/decisions/
 * 0031-recover-reads-quarantined-logs.md): the segment files of the group
 * in <data>/quarantine/ (<hex>-<base>.blk[.N]) read as one verified run
 * from index 1 (headers, checksums, consecutive indexes, non-decreasing
 * terms, hash chain); last_index 0 when there is none, why says where and
 * why the run ends. Read-only; nothing in quarantine/ moves. */
struct store_qlog {
    uint32_t files;      /* the group's files found in quarantine/ */
    uint64_t last_index; /* the run is 1..last_index */
    uint64_t last_term;
    char why[200];
};
void store_qlog_dir(const struct store *s, char *out, size_t cap);
KEEL_MUST_USE int store_qlog_survey(struct store *s,
                                    const struct store_group_id *id,
                                    struct store_qlog *out, char *errmsg);
/* Write the run 1..keep as the log of the open, empty group g through the
 * InstallSnapshot replacement (store_replace_*, no snapshot), verifying
 * it again on the way; the quarantined files stay. KEEL_EINVAL when g's
 * log is not empty, KEEL_ECORRUPT when the run no longer reaches keep. */
KEEL_MUST_USE int store_qlog_restore(struct store_group *g, uint64_t keep,
                                     struct store_qlog *out, char *errmsg);

/* Amnesia state (rule 3), recorded synced. */
KEEL_MUST_USE int store_amnesia_enter(struct store_group *g, uint64_t t0,
                                      uint64_t target, char *errmsg);
KEEL_MUST_USE int store_amnesia_clear(struct store_group *g, char *errmsg);

/* Recover wait (the operator override, docs/design.md §4.7 R4), recorded
 * synced: the override's term, or 0 to clear it. get: 0, KEEL_ENOENT
 * (none) or KEEL_ECORRUPT. */
KEEL_MUST_USE int store_recover_wait_set(struct store_group *g, uint64_t term,
                                         char *errmsg);
int store_recover_wait_get(struct store_group *g, uint64_t *term);

enum store_event_type {
    STORE_EV_PERSISTED = 1, /* index, term of the last record synced */
    STORE_EV_HARD_STATE,    /* term durable; index = how many hard-state
                               saves of the group completed so far (two
                               saves done before a poll give one event) */
    STORE_EV_REPAIRED,      /* index..term=last index repaired */
    STORE_EV_ENOSPC,        /* appends refused */
    STORE_EV_SPACE,         /* appends accepted again */
};

struct store_event {
    enum store_event_type type;
    struct store_group *g;
    uint64_t index;
    uint64_t term;
};

/* The group's work (hard state, appends) goes ahead of every other
 * group's on the sync threads: the meta group, whose votes and heartbeat
 * answers must not wait behind thousands of stream groups' batches
 * (docs/cluster.md, "Loop turns"). Loop thread. */
void store_group_set_first(struct store_group *g);

/* Drain up to max completions without blocking; returns how many. */
size_t store_poll(struct store *s, struct store_event *evs, size_t max);

/* A directory was made (without fsync) inside the group's directory,
 * next to its log/ (the snapshot module's snap/): store_group_dirs_sync
 * makes its entry durable. Any thread. */
void store_group_dir_made(struct store_group *g);

/* Make the entries of the group's new directories durable: its own entry
 * in <data>/groups (one fsync of that directory covers every group made
 * since the last) and those of log/ and snap/ in it. The loop thread never
 * calls it (store_group_open makes the directories without fsync): a sync
 * thread does before the group's first segment or replacement log, the
 * snapshot module before its first snapshot file (docs/design.md §4.1).
 * Any other thread; returns 0 at once when nothing is fresh, else 0 or the
 * fsync's KEEL_E* (errmsg says which directory). */
KEEL_MUST_USE int store_group_dirs_sync(struct store_group *g, char *errmsg);

/* Group id of a group, and its id as 32 hex characters + NUL. */
const struct store_group_id *store_group_get_id(struct store_group *g);
void store_group_id_hex(const struct store_group_id *id, char out[33]);

/* A histogram with power-of-two buckets: counts[i] counts values v with
 * 2^(i-1) < v <= 2^i (counts[0]: v <= 1; the last bucket takes the rest).
 * Adding is a few instructions, done under the lock the sync thread
 * already takes for its counters (no extra lock, no allocation). */
#define STORE_HIST_BUCKETS 24
struct store_hist {
    uint64_t counts[STORE_HIST_BUCKETS];
    uint64_t count;
    uint64_t sum;
};
void store_hist_add(struct store_hist *h, uint64_t v);

/* Counters (monitoring: /metrics; tests and benches). */
struct store_stats {
    uint64_t fdatasyncs; /* segment data syncs issued */
    uint64_t batches;
    uint64_t records_written;
    uint64_t spares_attempted; /* preallocations started */
    uint64_t timer_walks;      /* walks of every group for due interval syncs */
    struct store_hist fdatasync_us;  /* segment fdatasync latency */
    struct store_hist batch_records; /* records per write batch */
};
void store_stats(struct store *s, struct store_stats *out);
/* Tests with manual_sync: run all queued sync work on this thread. */
void store_debug_step(struct store *s);
/* Tests: the process dies now: sync threads write nothing more (files or
 * LMDB); close with store_close(s, false). */
void store_debug_kill(struct store *s);
/* Disable truncation zeroing (the docs/design.md §4.4 scanner test builds the
 * unzeroed file this way). Never in production. */
void store_debug_no_zeroing(struct store *s, bool on);
/* Segment file path of the segment holding index (tests). */
int store_debug_segment_path(struct store_group *g, uint64_t index, char *out,
                             size_t cap, uint64_t *off);
struct store_meta *store_debug_meta(struct store *s);
/* Tests: the next store_group_delete runs this many of its steps (LMDB
 * transaction, each unlink, directory fsync) and then the process "dies"
 * as with store_debug_kill. */
void store_debug_die_after(struct store *s, unsigned steps);

#endif
