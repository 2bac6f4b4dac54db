/* Helpers shared by the store unit tests: a temporary data directory, a
 * boot-id file, the fault fs, deterministic payloads and bounded waits for
 * completions (never sleeps standing in for synchronisation).
 */
#ifndef KEEL_TEST_STORE_UTIL_H
#define KEEL_TEST_STORE_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "fs_fault.h"
#include "store.h"

#define TS_WAIT_MS_MAX 20000
#define TS_PAYLOAD_MAX 2048

struct ts {
    char dir[256];
    char boot_path[300];
    struct fs_fault *ff; /* NULL: real fs */
    struct store *s;
    struct store_node_report node;
    struct store_group *g;
    struct store_recovery rep;
    struct store_group_id gid;
    struct store_fsync policy;
    uint64_t segment_bytes;
    uint64_t seed;
    bool manual;   /* deterministic: no sync threads */
    bool prealloc; /* fault fs: make spares too (off by default) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t wakeups;
    uint64_t persisted_index; /* from STORE_EV_PERSISTED */
    uint64_t persisted_term;
    uint64_t events_persisted;
    uint64_t hs_term;
    uint64_t repaired_to;
    bool enospc_event;
    bool space_event;
};

/* Create the data dir and (fault) fs; real_fs selects the POSIX fs. */
void ts_init(struct ts *t, uint64_t seed, bool real_fs);
void ts_fini(struct ts *t);
void ts_set_boot_id(struct ts *t, const char *id);
/* Open the store and the group (t->policy, t->segment_bytes). */
void ts_open(struct ts *t);
/* Close as a crash (no clean record) or cleanly. */
void ts_close(struct ts *t, bool clean);
/* Power loss: cut, close the dead store, thaw, reopen. */
void ts_crash_reopen(struct ts *t, enum fs_fault_cut cut);
/* Drain completions once. */
void ts_drain(struct ts *t);
/* Wait (bounded) until persisted index >= index; false on timeout. */
bool ts_wait_persisted(struct ts *t, uint64_t index);
bool ts_wait_hard_state(struct ts *t, uint64_t term);
bool ts_wait_repaired(struct ts *t, uint64_t to);
bool ts_wait_enospc(struct ts *t);
bool ts_wait_space(struct ts *t);
/* Wait until the fault fs has a sync held (a batch written, unsynced). */
bool ts_wait_held(struct ts *t);
/* Deterministic payload of (index, version): len bytes. */
uint32_t ts_payload(uint64_t index, uint64_t version, uint32_t len,
                    uint8_t *out);
/* Check a payload made by ts_payload; returns its version or UINT64_MAX. */
uint64_t ts_payload_version(uint64_t index, const uint8_t *p, uint32_t len);
/* Append [from, to] with term and payload length len (version 1). */
void ts_append(struct ts *t, uint64_t from, uint64_t to, uint64_t term,
               uint32_t len, uint64_t version);
/* Segment path and offset of index (for fault injection). */
void ts_where(struct ts *t, uint64_t index, char *path, uint64_t *off);
/* Read index; assert it is intact with the given term and version. */
void ts_expect(struct ts *t, uint64_t index, uint64_t term, uint64_t version);
void ts_write_boot(struct ts *t, const char *id);

#endif
