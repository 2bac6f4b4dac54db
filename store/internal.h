/* Internal structures shared by the store's source files. Not installed. */
#ifndef KEEL_STORE_INTERNAL_H
#define KEEL_STORE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <keel/assert.h>
#include <keel/error.h>
#include <keel/limits.h>

#include "format.h"
#include "fs.h"
#include "meta.h"
#include "store.h"

#define STORE_PREALLOC_NAME "prealloc.tmp"
#define STORE_MARKER_CANDIDATES_MAX 8
/* Preallocation (docs/design.md §4.1: ahead of need, off the hot path,
 * rate-limited): a group's spare is made once its tail segment is half
 * full, by one prealloc thread per store, at most this many bytes per
 * second, fdatasynced every STORE_PREALLOC_SYNC_BYTES so its writeback
 * never piles up in front of a hot fdatasync. */
#define STORE_PREALLOC_BYTES_PER_S (128ull * 1024 * 1024)
#define STORE_PREALLOC_SYNC_BYTES (8u * 1024 * 1024)
#define STORE_SPARE_RETRY_MS 1000u /* after a spare failed for space */
/* A log's first segment; each next one doubles up to segment_bytes, so a
 * stream that holds little costs little disk and its first publish does
 * not wait for a 64 MiB zero fill. */
#define STORE_SEGMENT_BYTES_FIRST (1024u * 1024)

enum seg_state {
    SEG_PLANNED = 0, /* decided by the loop thread, file not yet made */
    SEG_LIVE,        /* file made, fsynced, catalogued */
};

struct seg {
    uint64_t base;
    uint64_t salt;
    uint64_t size;
    uint64_t first_index;
    enum seg_state state; /* written by the sync thread under s->mu */
    struct fs_file *f;    /* sync thread and readers; set once LIVE */
    uint64_t hi_water;    /* sync thread: end of the highest bytes written */
    uint64_t nonzero_end; /* from the scan: bytes after it are zero */
};

/* One entry of the in-memory index→offset table (derived data). */
struct ient {
    uint64_t term;
    uint64_t checksum;
    struct seg *seg;
    uint32_t off; /* 0 for a faulty index whose position is unknown */
    uint32_t bytes;
    uint8_t faulty;
};

enum op_kind {
    OP_CREATE_SEG = 1,
    OP_WRITE,
    OP_ZERO,
    OP_DELETE_SEG,
    OP_HARD_STATE,
    OP_REPAIR,
    OP_INTERVAL_SYNC,
    OP_MARK, /* marker naming the last record after recovery, then sync */
};

struct op {
    enum op_kind kind;
    struct op *next;
    struct seg *seg;
    uint64_t off;
    uint8_t *buf;
    size_t len;
    size_t cap;
    uint64_t first_index;
    uint64_t last_index;
    uint64_t last_term;
    uint64_t last_checksum;
    bool stale; /* a truncation removed its records: do not report */
    bool taken; /* the sync thread owns it (no more coalescing) */
    uint8_t vote[STORE_VOTE_BYTES_MAX];
    size_t vote_len;
};

/* The store's three FIFO queues of groups, under s->mu: groups with ops for
 * a sync thread (run), groups with events for store_poll (event), groups
 * waiting for the prealloc thread's spare (prealloc). One intrusive link a
 * queue in each group, one push, pop and unlink for all three (store.c). */
enum store__queue {
    STORE__Q_RUN,
    STORE__Q_EVENT,
    STORE__Q_PREALLOC,
    STORE__Q_COUNT,
};

struct store__gq {
    struct store_group *head;
    struct store_group *tail;
};

struct store_group {
    struct store *s;
    struct store_group_id id;
    char dir[STORE_PATH_BYTES_MAX]; /* .../groups/<hex>/log */
    struct store_fsync policy;

    /* Loop-thread state (segs also read by the sync thread under s->mu). */
    struct seg **segs;
    size_t nsegs;
    size_t segs_cap;
    struct ient *ents; /* ents[i] is index first_index + i */
    size_t nents;
    size_t ents_cap;
    uint64_t first_index;
    uint64_t tail_off; /* append position in the last segment */
    bool tail_marker;  /* a batch's sync marker sits at tail_off: the next
                          batch starts after it, never over it */
    uint64_t hard_term;
    struct store_meta_snap snap;
    bool amnesia;
    bool has_marker;
    uint64_t marker_index;
    uint64_t marker_off; /* offset of M in its segment */
    struct seg *marker_seg;
    bool marker_mended; /* M had one bit flipped (scan_parse.c marker_at) */

    /* Under s->mu. */
    struct op *ops_head; /* pending, not yet taken */
    struct op *ops_tail;
    size_t nops;
    struct op *inflight; /* taken by a sync thread */
    bool busy;
    bool queued; /* on STORE__Q_RUN */
    bool first;  /* goes to the head of STORE__Q_RUN (store_group_set_first) */
    struct store_group *qnext[STORE__Q_COUNT]; /* links of the queues */
    bool has_spare;          /* a preallocated file is ready */
    bool spare_pending;      /* queued for, or held by, the prealloc thread or
                                take_spare: no new spare request meanwhile */
    uint64_t spare_size;     /* size of the requested or ready spare */
    uint64_t spare_retry_ms; /* after a failed spare (ENOSPC): not before */
    bool pre_queued;         /* on the store's prealloc queue */
    bool pre_running;        /* the prealloc thread is making its spare */
    bool enospc;
    uint64_t enospc_retry_ms;
    bool enospc_reported;
    bool space_reported;
    uint64_t persisted_index;
    uint64_t persisted_term;
    bool ev_persisted;
    bool ev_hard_state;
    uint64_t hs_event_term;
    uint64_t hs_done; /* hard-state saves completed (events coalesce) */
    bool ev_repaired;
    uint64_t repaired_from;
    uint64_t repaired_to;
    bool ev_queued; /* on STORE__Q_EVENT */
    /* interval policy */
    bool interval_dirty;
    uint64_t interval_deadline_ms;
    struct seg *last_seg; /* last written record's segment/end/identity */
    uint64_t last_end;
    uint64_t last_w_index;
    uint64_t last_w_term;
    uint64_t last_w_checksum;

    /* 1 while a directory made inside the group's directory (log/,
     * snap/) or the group's directory itself has an entry not yet
     * fsynced: store_group_dirs_sync makes them durable off the loop
     * thread (atomic; the sync under s->dirs_mu). */
    int dirs_fresh;

    struct store_group *next; /* all groups of the store */
};

struct store {
    struct store_config cfg;
    struct fs *fs;
    struct store_meta *meta;
    char data_dir[STORE_PATH_BYTES_MAX];
    uint8_t boot_id[STORE_BOOT_ID_BYTES];
    bool os_crash;
    bool meta_reset;
    struct store_meta_report meta_rep;
    uint64_t rng;
    bool no_zeroing;
    int dead; /* tests: the process "died"; no more writes (atomic) */
    bool die_after_armed; /* tests: store_debug_die_after */
    unsigned die_after;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t idle_cv; /* broadcast when a group's run ends */
    pthread_t threads[STORE_SYNC_THREADS_MAX];
    unsigned nthreads;
    bool stopping;
    struct store__gq q[STORE__Q_COUNT];
    struct store_group *groups;
    size_t ngroups;
    /* No interval sync or ENOSPC retry is due before this (store__now_ms);
     * 0: walk the groups at the next look (a deadline was set, a group
     * holding one stopped being busy). */
    uint64_t timers_due_ms;
    pthread_cond_t pre_cv;
    pthread_t pre_thread;
    bool pre_started;
    struct store_stats stats;
    /* New group directories (docs/design.md §4.1): the loop thread makes
     * them without fsync and counts them in groups_made (atomic); the
     * first store_group_dirs_sync after them fsyncs <data>/groups once
     * for all of them (groups_synced, under dirs_mu). */
    pthread_mutex_t dirs_mu;
    uint64_t groups_made;
    uint64_t groups_synced;
};

static inline bool store__dead(struct store *s)
{
    return __atomic_load_n(&s->dead, __ATOMIC_ACQUIRE) != 0;
}

/* store.c */
void store__gq_push(struct store *s, enum store__queue q,
                    struct store_group *g);
struct store_group *store__gq_pop(struct store *s, enum store__queue q);
void store__gq_unlink(struct store *s, enum store__queue q,
                      struct store_group *g);
void store__schedule(struct store *s, struct store_group *g);
void store__queue_event(struct store *s, struct store_group *g);
void store__op_push(struct store_group *g, struct op *op);
struct op *store__op_new(enum op_kind kind);
void store__op_free(struct op *op);
void store__ops_drop(struct store_group *g);
void store__wait_step(struct store *s);
uint64_t store__now_ms(void);
__attribute__((noreturn)) void store__fatal(struct store *s, const char *what,
                                            const char *errmsg);
static inline struct ient *store__ent(struct store_group *g, uint64_t index)
{
    ASSERT(index >= g->first_index);
    ASSERT(index - g->first_index < g->nents);
    return &g->ents[index - g->first_index];
}
static inline uint64_t store__last_index(const struct store_group *g)
{
    return g->first_index + g->nents - 1;
}

void store__group_free(struct store *s, struct store_group *g);
struct store_group *store__find_group(struct store *s,
                                      const struct store_group_id *id);

/* segment.c */
void store__seg_path(const struct store_group *g, uint64_t base, char *out,
                     size_t cap);
int store__mkdirs(struct store *s, const char *dir, char *errmsg);
/* mkdir dir (0 when it exists) without any fsync: the caller marks its
 * group fresh (store_group_dir_made). */
int store__mkdir_fresh(struct store *s, const char *dir, char *errmsg);
void store__seg_create(struct store_group *g, struct seg *seg);
void store__seg_delete(struct store_group *g, struct seg *seg);
int store__seg_make(struct store_group *g, struct seg *seg,
                    struct fs_file **out, char *errmsg);
void store__prealloc(struct store_group *g);
void store__spare_check(struct store_group *g);
uint64_t store__next_seg_size(const struct store_group *g, uint64_t need);
void store__spare_unqueue(struct store *s, struct store_group *g);
int store__quarantine(struct store *s, const char *path, const char *name,
                      char *errmsg);

/* quarantine.c: out gets path up to its last '/' ("" without one). */
void store__parent_of(const char *path, char *out, size_t cap);

/* scan.c */
int store__scan(struct store_group *g, struct store_recovery *rep,
                char *errmsg);

/* rebuild.c: a node of one with no catalogue entry for the group
 * catalogues the segment files whose headers verify (one synced
 * transaction) and says so in rep. */
int store__rebuild_catalogue(struct store_group *g, struct store_recovery *rep,
                             char *errmsg);

/* sync.c */
int store__sync_start(struct store *s, char *errmsg);
void store__sync_stop(struct store *s);

/* repair.c */
uint64_t store__rand(struct store *s);

#endif
