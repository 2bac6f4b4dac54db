/* meta.lmdb: the store's small durable facts (docs/design.md §4.6). All LMDB
 * code lives in meta.c. Every value is an envelope {version, kind, length,
 * body, checksum} (meta_env.h: version 2's checksum covers the key too);
 * a value failing it reads as KEEL_ECORRUPT. Every put is
 * one synced transaction. Thread-safe (LMDB serialises writers).
 */
#ifndef KEEL_STORE_META_H
#define KEEL_STORE_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <keel/limits.h>

#include "format.h"

#define STORE_META_BAD_GROUPS_MAX 64
/* keeld's exit status after an LMDB assertion on meta.lmdb at run time
 * (docs/decisions/0015): EX_SOFTWARE. Its next start resets the file. */
#define STORE_META_ASSERT_EXIT 70

struct store_meta;

struct store_meta_node {
    uint8_t boot_id[STORE_BOOT_ID_BYTES];
    bool clean;
};

struct store_meta_seg {
    uint64_t base_index;
    uint64_t salt;
    uint64_t size_bytes;
    uint64_t first_index;
};

struct store_meta_snap {
    uint64_t index; /* newest, 0 = none */
    uint64_t term;
    uint64_t older_index; /* the older kept snapshot, 0 = none */
    uint64_t older_term;
};

struct store_meta_amnesia {
    uint32_t reason;
    uint64_t t0;
    uint64_t target;
};

struct store_meta_report {
    bool reset; /* meta.lmdb was unreadable and moved to quarantine */
    bool fresh; /* no incarnation existed: a new data directory */
    char reset_reason[256];
    size_t n_bad_groups; /* groups with a bad version-1 snapshot, amnesia
                            or recover-wait value */
    size_t n_v1;         /* values in envelope version 1 (written before
                            version 2; their checksum leaves the key out) */
    size_t n_migrated;   /* of them, rewritten as version 2 by this open */
    uint8_t bad_groups[STORE_META_BAD_GROUPS_MAX][STORE_GROUP_ID_BYTES];
};

/* Open (creating) <data_dir>/meta.lmdb. A hard-state, catalogue, node or
 * incarnation value failing its checksum, a page failing the structural
 * check (meta_check.h), a run-time LMDB assertion's marker
 * (meta.lmdb.assert), a version-2 value failing its checksum (key or
 * value damaged) or an environment LMDB cannot open moves the file to
 * <data_dir>/quarantine/ and starts a fresh one with a new incarnation
 * (rep->reset). A sound file's version-1 values are rewritten as version
 * 2 in one synced transaction (rep->n_migrated). */
int store_meta_open(const char *data_dir, struct store_meta **out,
                    struct store_meta_report *rep, char *errmsg);
/* Open <data_dir>/meta.lmdb read-only (MDB_RDONLY | MDB_NOLOCK: the node
 * must be stopped); never creates, resets or writes. KEEL_ENOENT when it
 * does not exist; KEEL_ECORRUPT (rep->reset set) when a writable open
 * would reset it. No put may be called on the result. */
int store_meta_open_ro(const char *data_dir, struct store_meta **out,
                       struct store_meta_report *rep, char *errmsg);
void store_meta_close(struct store_meta *m);

int store_meta_incarnation(struct store_meta *m, uint8_t out[16]);
/* Replace the incarnation value (store_incarnation_adopt), synced. */
int store_meta_incarnation_put(struct store_meta *m, const uint8_t inc[16],
                               char *errmsg);
int store_meta_node_get(struct store_meta *m, struct store_meta_node *out);
int store_meta_node_put(struct store_meta *m, const struct store_meta_node *n,
                        char *errmsg);

/* KEEL_ENOENT when the group has no hard state. */
int store_meta_hs_get(struct store_meta *m, const uint8_t gid[16],
                      uint64_t *term, uint8_t *vote, size_t *vote_len);
int store_meta_hs_put(struct store_meta *m, const uint8_t gid[16],
                      uint64_t term, const uint8_t *vote, size_t vote_len,
                      char *errmsg);

/* Catalogue entries of a group sorted by base index. */
int store_meta_cat_list(struct store_meta *m, const uint8_t gid[16],
                        struct store_meta_seg *out, size_t max, size_t *n);
int store_meta_cat_put(struct store_meta *m, const uint8_t gid[16],
                       const struct store_meta_seg *seg, char *errmsg);
int store_meta_cat_del(struct store_meta *m, const uint8_t gid[16],
                       uint64_t base_index, char *errmsg);

int store_meta_snap_get(struct store_meta *m, const uint8_t gid[16],
                        struct store_meta_snap *out);
int store_meta_snap_put(struct store_meta *m, const uint8_t gid[16],
                        const struct store_meta_snap *s, char *errmsg);

int store_meta_amnesia_get(struct store_meta *m, const uint8_t gid[16],
                           struct store_meta_amnesia *out);
int store_meta_amnesia_put(struct store_meta *m, const uint8_t gid[16],
                           const struct store_meta_amnesia *a, char *errmsg);
int store_meta_amnesia_del(struct store_meta *m, const uint8_t gid[16],
                           char *errmsg);

/* Recover wait (`keel cluster recover`, docs/design.md §4.7 R4): the term of
 * the override after which this node, not the survey's source, must not
 * campaign until it hears a leader. get: 0, KEEL_ENOENT or
 * KEEL_ECORRUPT. */
int store_meta_recover_wait_get(struct store_meta *m, const uint8_t gid[16],
                                uint64_t *term);
int store_meta_recover_wait_put(struct store_meta *m, const uint8_t gid[16],
                                uint64_t term, char *errmsg);
int store_meta_recover_wait_del(struct store_meta *m, const uint8_t gid[16],
                                char *errmsg);

/* InstallSnapshot (docs/design.md §5): in one synced transaction, replace the
 * group's whole catalogue by segs[0..n) and record the snapshot pair. */
int store_meta_log_replace(struct store_meta *m, const uint8_t gid[16],
                           const struct store_meta_seg *segs, size_t n,
                           const struct store_meta_snap *sn, char *errmsg);

/* Remove every key of a group (hard state, catalogue, snapshot, amnesia,
 * recover wait) in one synced transaction (docs/design.md §5: an explicit,
 * committed stream deletion). */
int store_meta_group_del(struct store_meta *m, const uint8_t gid[16],
                         char *errmsg);

/* Tests: false leaves the structural page check (meta_check.h) out of the
 * open's probe, as before docs/decisions/0015. */
void store_meta_debug_check_structure(bool on);

/* Tests: overwrite the raw value of a group's key kind ('H','C','S','A')
 * with a version-1 value failing its checksum (a damaged value in a file
 * written before envelope version 2). */
int store_meta_debug_corrupt(struct store_meta *m, char kind,
                             const uint8_t gid[16]);

#endif
