/* snapshot/: write, validate, load, install and quarantine state-machine
 * snapshots (docs/design.md §5). The body is opaque msgpack made by the stream
 * and meta state machines; this module stores it as a checksummed file,
 * decides which snapshot a group restarts from, and keeps the §5 rules
 * around it (file format: snapshot/FORMAT.md).
 *
 * Files live in <data>/groups/<group-hex>/snap/ as <index, 20 digits>.snap.
 * A file counts only when LMDB names its (index, term) (store_snapshot_
 * record); LMDB keeps the two newest. Bad files move to <data>/quarantine/,
 * data that metadata says should not exist to <data>/quarantine/orphans/:
 * nothing here ever deletes a file LMDB names or stream data.
 *
 * Errors: functions return 0 or a negative KEEL_E* code and fill errmsg
 * (KEEL_ERRMSG_MAX bytes, may be NULL). A write or fsync error on a
 * snapshot file is never returned (docs/design.md §4.5): cfg.fatal_cb
 * is called (to log) and the process aborts. Running out of space is
 * returned (KEEL_ENOSPC) and leaves the previous snapshots in place.
 *
 * Threads: one struct snap per group; its functions are not concurrent with
 * each other (the caller serialises them: snap_write runs on a worker).
 */
#ifndef KEEL_SNAP_H
#define KEEL_SNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <keel/error.h>
#include <keel/limits.h>

#include "fs.h"
#include "store.h"

#define SNAP_MAGIC "KEELSNP" /* 8 bytes with the NUL */
#define SNAP_VERSION 1u
#define SNAP_HEADER_BYTES 96u

/* A decoded snapshot file header (FORMAT.md). */
struct snap_header {
    uint8_t group[16];
    uint64_t index;
    uint64_t term;
    uint64_t body_bytes;
    uint64_t body_hash_low; /* XXH3-128 of the body */
    uint64_t body_hash_high;
};

/* Encode a header (computes the header checksum). Cannot fail. */
void snap_header_encode(const struct snap_header *h,
                        uint8_t out[SNAP_HEADER_BYTES]);

/* Decode and check a header: magic, version, header size, reserved bytes,
 * header checksum, body length <= SNAP_BODY_BYTES_MAX. KEEL_ETRUNCATED if
 * len < SNAP_HEADER_BYTES, KEEL_EVERSION, KEEL_ECORRUPT. Never asserts on
 * the bytes. */
KEEL_MUST_USE int snap_header_decode(const uint8_t *buf, size_t len,
                                     struct snap_header *out, char *errmsg);

/* What a file must be: the group and the (index, term) LMDB names. */
struct snap_expect {
    uint8_t group[16];
    uint64_t index;
    uint64_t term;
};

/* Validate a whole snapshot file image (header + body) in memory against
 * exp (NULL: header and body checks only): the header, the body length
 * (no trailing bytes), the body's XXH3-128, then group, index and term.
 * On success *body and *body_len point into buf. For the fuzz target and for
 * transfers; files are validated by streaming (snap_open). */
KEEL_MUST_USE int snap_validate(const uint8_t *buf, size_t len,
                                const struct snap_expect *exp,
                                struct snap_header *hdr, const uint8_t **body,
                                size_t *body_len, char *errmsg);

struct snap_config {
    struct fs *fs;        /* NULL: the real file system (store_fs_posix) */
    const char *data_dir; /* the store's data directory */
    void (*fatal_cb)(void *arg, const char *msg); /* log, then abort */
    void *fatal_arg;
};

/* What snap_open decided (for /healthz and the driver). */
enum snap_source {
    SNAP_SOURCE_LOG = 0, /* no snapshot named: rebuild from log index 1 */
    SNAP_SOURCE_NEWEST,  /* the newest LMDB-named snapshot is valid */
    SNAP_SOURCE_OLDER,   /* newest bad (quarantined): older + log */
    SNAP_SOURCE_AMNESIA, /* no valid snapshot the log continues: restore
                            by InstallSnapshot (recorded as amnesia) */
};

struct snap_load_report {
    enum snap_source source;
    uint64_t index; /* the snapshot restored from (0: none) */
    uint64_t term;
    /* The LMDB-named newest: part of the vote extent even when its file is
     * bad (a bad file never shrinks the extent, §5 Extent). */
    uint64_t named_index;
    uint64_t named_term;
    uint64_t named_older_index;
    uint64_t named_older_term;
    bool newest_bad; /* quarantined; the reason says why */
    char newest_reason[KEEL_ERRMSG_MAX];
    bool older_bad;
    char older_reason[KEEL_ERRMSG_MAX];
    /* A bad newest: the node votes with the LMDB extent and must not lead
     * until a newer snapshot is durable (snap_write or an install). */
    bool must_not_lead;
    bool amnesia; /* SNAP_SOURCE_AMNESIA, or the store already amnesiac */
    unsigned quarantined; /* files moved to quarantine/ by this open */
    unsigned unnamed;     /* of those, files LMDB does not name */
    unsigned superseded;  /* files older than both named (deleted) */
    uint8_t *body;        /* the restored body (malloc'ed), or NULL */
    size_t body_len;
};

struct snap;

/* Open the snapshots of an open store group, validate the LMDB-named ones
 * and choose the source to restore from (docs/design.md §5): the newest valid
 * one; if it is bad, quarantine it and use the older one when the log
 * continues it; with neither, the log from index 1; otherwise amnesia,
 * recorded with store_amnesia_enter (T0 = rep->hard_term). Leftover temp
 * files are removed, files LMDB does not name are quarantined, files older
 * than both named ones (an interrupted deletion) are deleted. rep is the
 * group's recovery report from store_group_open. The store and group
 * outlive the snap. lrep->body is the caller's (snap_body_free).
 * KEEL_ENOMEM, KEEL_EIO (directory unreadable). */
KEEL_MUST_USE int snap_open(const struct snap_config *cfg, struct store *s,
                            struct store_group *g,
                            const struct store_recovery *rep, struct snap **out,
                            struct snap_load_report *lrep, char *errmsg);
/* One line for /healthz and the log saying what snap_open decided and
 * why (truncated to cap). */
void snap_report_describe(const struct snap_load_report *lrep, char *out,
                          size_t cap);

void snap_close(struct snap *sn);
void snap_body_free(struct snap_load_report *lrep);

/* Write a snapshot of the state at (index, term) (docs/design.md §5): temp
 * file, write, fsync, rename, directory fsync, then store_snapshot_record
 * (synced LMDB); only then delete the snapshot the record pushed out of
 * the two kept. index must be above the newest valid snapshot held
 * (asserted). KEEL_EAGAIN when entries <= index are not yet persisted
 * locally (the store refuses the record; the file is removed and does not
 * count: retry after the store reports them; the driver should wait for
 * STORE_EV_PERSISTED >= index first), KEEL_ESTALE below the LMDB-named
 * newest, KEEL_ETOOBIG, KEEL_ENOSPC. Blocking: call from a worker thread;
 * it reads neither LMDB nor the store's in-memory log. */
KEEL_MUST_USE int snap_write(struct snap *sn, uint64_t index, uint64_t term,
                             const void *body, size_t len, char *errmsg);

/* Loop thread (as the store functions it calls). Drop the log prefix
 * <= upto through store_drop_prefix, after checking
 * upto against the older kept snapshot whose file this node holds valid
 * (after a quarantine LMDB may still name a bad one: KEEL_EPERM). The
 * caller proved a committed retention entry covers upto. */
KEEL_MUST_USE int snap_drop_prefix(struct snap *sn, uint64_t upto,
                                   char *errmsg);

/* The newest and older snapshots this node holds valid files of (0: none),
 * and whether the node must not lead (a quarantined newest). */
struct snap_info {
    uint64_t newest_index;
    uint64_t newest_term;
    uint64_t older_index;
    uint64_t older_term;
    bool must_not_lead;
};
void snap_info(const struct snap *sn, struct snap_info *out);

/* Read the body of the newest valid snapshot (malloc'ed into *body; free()
 * it), validated again. KEEL_ENOENT when there is none. */
KEEL_MUST_USE int snap_read_newest(struct snap *sn, uint8_t **body, size_t *len,
                                   char *errmsg);

/* The same for the held snapshot at index (newest or older; 0: newest).
 * KEEL_ENOENT when this node holds no valid file of it. */
KEEL_MUST_USE int snap_read_held(struct snap *sn, uint64_t index,
                                 uint8_t **body, size_t *len, char *errmsg);

/* Path of the snapshot file of index (tests, the sender). */
void snap_path(const struct snap *sn, uint64_t index, char *out, size_t cap);

/* ---- InstallSnapshot (docs/design.md §5, docs/raft.md) ----
 *
 * The transfer is a byte stream: a manifest, the snapshot file, then the
 * leader's retained log from log_first through the snapshot index. It
 * travels in frames (one per raft_msg_snapshot chunk) of at most
 * SNAP_FRAME_BYTES, each with its own checksum; the Raft offset is the
 * frame's offset in the sequence of frames (FORMAT.md). */
#define SNAP_FRAME_HEADER_BYTES 32u
#define SNAP_FRAME_BYTES (SNAP_FRAME_HEADER_BYTES + SNAP_CHUNK_DATA_BYTES)

/* One frame, checked on its own. */
struct snap_frame {
    uint32_t len;      /* data bytes after the 32-byte header */
    uint64_t data_off; /* offset of the data in the transfer stream */
    uint64_t total;    /* the stream's data bytes */
};

/* Check one frame by itself: magic, length, checksum. Pure (fuzzed). The
 * follower's driver runs it on a raft_msg_snapshot chunk BEFORE stepping
 * the Raft core and drops a chunk that fails it (the leader resends the
 * chunk on its next heartbeat): the core advances its expected offset as
 * soon as it hands a chunk out. KEEL_ECORRUPT. */
KEEL_MUST_USE int snap_frame_check(const uint8_t *frame, size_t len,
                                   struct snap_frame *out, char *errmsg);
/* Write the header of a frame whose n data bytes are already in place at
 * frame + SNAP_FRAME_HEADER_BYTES (computes the checksum). */
void snap_frame_seal(uint8_t *frame, uint32_t n, uint64_t data_off,
                     uint64_t total);

struct snap_send;

/* Leader: spool the newest valid snapshot and the retained log
 * [log_first, snapshot index] of the group into a transfer file (a
 * consistent copy: a later prefix drop does not disturb the transfer).
 * log_first must be the group's first index or later. *total is the
 * transfer's size in frame bytes. KEEL_ENOENT (no snapshot), store read
 * errors (KEEL_EFAULTY, KEEL_ECORRUPT: a damaged record is never sent). */
KEEL_MUST_USE int snap_send_open(struct snap *sn, uint64_t log_first,
                                 struct snap_send **out, uint64_t *total,
                                 char *errmsg);
/* As snap_send_open for the held snapshot at index (newest or older: the
 * one the Raft core names; a group with peers compacts its core only to
 * the older kept snapshot, so a follower just behind the newest one is
 * still served by AppendEntries). KEEL_ENOENT when not held. */
KEEL_MUST_USE int snap_send_open_at(struct snap *sn, uint64_t index,
                                    uint64_t log_first, struct snap_send **out,
                                    uint64_t *total, char *errmsg);
/* Fill the frame at Raft offset off (a multiple of SNAP_FRAME_BYTES below
 * the total) into buf (cap >= SNAP_FRAME_BYTES): *len bytes, *done for the
 * last frame. KEEL_EINVAL for an offset that is not a frame start. */
KEEL_MUST_USE int snap_send_chunk(struct snap_send *ss, uint64_t off,
                                  uint8_t *buf, size_t cap, size_t *len,
                                  bool *done, char *errmsg);
/* The (index, term) and log_first of the transfer. */
void snap_send_info(const struct snap_send *ss, uint64_t *index, uint64_t *term,
                    uint64_t *log_first);
/* Remove the spool file and free. */
void snap_send_close(struct snap_send *ss);

struct snap_recv;

/* Follower: start receiving the transfer of snapshot (index, term) with
 * log_first into a spool file in the group's snap/ directory (bounded
 * memory). A previous unfinished spool is replaced. */
KEEL_MUST_USE int snap_recv_open(struct snap *sn, uint64_t index, uint64_t term,
                                 uint64_t log_first, struct snap_recv **out,
                                 char *errmsg);
/* Accept the frame at Raft offset off. Frames must arrive in order:
 * KEEL_ESTALE when off is not the next expected one (*next says which;
 * answer the leader with it). KEEL_ECORRUPT for a frame failing its
 * checksum or naming another offset (nothing is written; the leader
 * resends it). *done once the last frame is in. */
KEEL_MUST_USE int snap_recv_chunk(struct snap_recv *sr, uint64_t off,
                                  const uint8_t *frame, size_t len,
                                  uint64_t *next, bool *done, char *errmsg);
/* After the last frame: validate the whole transfer (manifest, the
 * snapshot file's header and XXH3-128 against (index, term, group), the
 * retained log's hash and record order), then make the local log the
 * leader's (docs/design.md §5 S5: drop our own entries below log_first, never
 * discard one that matches the leader's):
 *   - we hold (index, term): the log is kept as it is;
 *   - the log is empty at log_first, or holds log_first with the leader's
 *     term: the records we lack are appended through the store (truncating
 *     at the first mismatch); wait for the store to report persisted >=
 *     index, then snap_recv_commit (KEEL_EAGAIN before);
 *   - otherwise the retained log replaces the whole log
 *     (store_replace_*): written and synced now (blocking), swapped in by
 *     snap_recv_commit (snap_recv_replacing is true).
 * KEEL_ECORRUPT (nothing written), KEEL_ENOSPC, KEEL_EEXIST. */
KEEL_MUST_USE int snap_recv_apply_log(struct snap_recv *sr, char *errmsg);
/* snap_recv_apply_log in bounded steps, so a large transfer does not hold
 * the caller's loop for its whole length (docs/decisions/0041): each call
 * reads or writes about budget bytes of the log section (the first checks
 * the manifest and the snapshot file; the last flushes and syncs what the
 * shape needs) and sets *done once the log is applied, as apply_log
 * leaves it. The whole section is checked before anything is written. A
 * step that fails leaves nothing to finish: close the transfer (an error
 * after the live log was touched is as apply_log's). */
KEEL_MUST_USE int snap_recv_apply_step(struct snap_recv *sr, uint64_t budget,
                                       bool *done, char *errmsg);
/* Whether snap_recv_apply_log truncated or appended to the group's live
 * log (it did so outside the Raft core: a transfer abandoned after that
 * leaves a log the core does not hold). */
bool snap_recv_touched_log(const struct snap_recv *sr);
/* Whether snap_recv_apply_log chose the whole-log replacement. */
bool snap_recv_replacing(const struct snap_recv *sr);
/* Write the snapshot file (temp, fsync, rename, directory fsync), then
 * record it in LMDB (synced) — with a replacement, in the one transaction
 * that swaps the catalogue; only then may the caller report
 * persisted(index) (RAFT_IN_SNAPSHOT_INSTALLED). KEEL_EAGAIN while an
 * appended retained log is not yet persisted. */
KEEL_MUST_USE int snap_recv_commit(struct snap_recv *sr, char *errmsg);
/* Remove the spool file and free (after commit, or to abandon). */
void snap_recv_close(struct snap_recv *sr);

/* ---- orphans (docs/design.md §5 S6) ---- */

/* Move path (a file or directory under the data directory that metadata
 * says should not exist) to <data>/quarantine/orphans/<name> (a numeric
 * suffix if taken), fsyncing both directories. Never deletes. */
KEEL_MUST_USE int snap_quarantine_orphan(const struct snap_config *cfg,
                                         const char *path, const char *name,
                                         char *errmsg);
/* Call cb with each name in quarantine/orphans/ (at most SNAP_ORPHANS_MAX;
 * *n counts them). No directory: 0 names. */
KEEL_MUST_USE int snap_orphans_list(const struct snap_config *cfg,
                                    int (*cb)(void *arg, const char *name),
                                    void *arg, size_t *n, char *errmsg);

/* After an explicit, committed stream deletion (docs/design.md §5 S6)
 * and store_group_delete (its LMDB keys go first, so a crash leaves files
 * nothing names): unlink the group's snapshot and temp files, then fsync
 * the directory. The group's struct snap is closed. Never called because
 * metadata says a stream should not exist (snap_quarantine_orphan). */
KEEL_MUST_USE int snap_group_delete(const struct snap_config *cfg,
                                    const struct store_group_id *id,
                                    char *errmsg);

/* ---- tests ---- */
enum snap_crash_point {
    SNAP_CRASH_NONE = 0,
    SNAP_CRASH_AFTER_TEMP_WRITE, /* temp written, not synced */
    SNAP_CRASH_AFTER_TEMP_SYNC,  /* temp synced, not renamed */
    SNAP_CRASH_AFTER_RENAME,     /* renamed, directory not synced */
    SNAP_CRASH_BEFORE_RECORD,    /* durable file, LMDB not written */
    SNAP_CRASH_BEFORE_DELETE,    /* recorded, the pushed-out file kept */
};
/* The next snap_write (or install commit) stops at point as if the process
 * died there: it returns KEEL_ECANCELED with the steps before done. */
void snap_debug_crash_at(struct snap *sn, enum snap_crash_point point);

#endif
