/* Helpers shared by the snapshot unit tests: a store group on the fault fs
 * (tests/unit/store_test_util.h) with its struct snap, crash-and-reopen,
 * deterministic bodies and paths for fault injection.
 */
#ifndef KEEL_TEST_SNAP_COMMON_H
#define KEEL_TEST_SNAP_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snap.h"
#include "store_test_util.h"

#define TSN_BODY_MAX 4096

struct tsn {
    struct ts t;
    struct snap *sn;
    struct snap_load_report lr;
    char errmsg[KEEL_ERRMSG_MAX];
};

static inline struct snap_config tsn_cfg(struct tsn *x)
{
    struct snap_config cfg;

    memset(&cfg, 0, sizeof cfg);
    cfg.fs = x->t.ff != NULL ? fs_fault_fs(x->t.ff) : NULL;
    cfg.data_dir = x->t.dir;
    return cfg;
}

static inline void tsn_open_snap(struct tsn *x)
{
    struct snap_config cfg = tsn_cfg(x);
    int rv =
        snap_open(&cfg, x->t.s, x->t.g, &x->t.rep, &x->sn, &x->lr, x->errmsg);
    if (rv != 0) {
        fail_msg("snap_open: %s: %s", keel_errname(rv), x->errmsg);
    }
}

/* seg_bytes 0: the store tests' small default (many segments). */
static inline void tsn_init_seg(struct tsn *x, uint64_t seed,
                                uint64_t seg_bytes)
{
    memset(x, 0, sizeof *x);
    ts_init(&x->t, seed, false);
    if (seg_bytes != 0) {
        x->t.segment_bytes = seg_bytes;
    }
    ts_open(&x->t);
    assert_int_equal(store_hard_state_save(x->t.g, 5, "v", 1, NULL), 0);
    assert_true(ts_wait_hard_state(&x->t, 5));
    tsn_open_snap(x);
}

static inline void tsn_init(struct tsn *x, uint64_t seed)
{
    tsn_init_seg(x, seed, 0);
}

static inline void tsn_close_snap(struct tsn *x)
{
    snap_close(x->sn);
    x->sn = NULL;
    snap_body_free(&x->lr);
}

static inline void tsn_fini(struct tsn *x)
{
    tsn_close_snap(x);
    ts_fini(&x->t);
}

/* The process dies (and the machine loses power with cut), then restarts:
 * store and snapshots are opened again. */
static inline void tsn_crash_reopen(struct tsn *x, enum fs_fault_cut cut)
{
    tsn_close_snap(x);
    ts_crash_reopen(&x->t, cut);
    tsn_open_snap(x);
}

/* A clean restart: queued store work finishes first. manual: no sync
 * threads after it (store work runs only in ts_wait_*), so appended
 * entries stay unpersisted until the test waits for them. */
static inline void tsn_restart(struct tsn *x, bool manual)
{
    tsn_close_snap(x);
    ts_close(&x->t, true);
    x->t.manual = manual;
    ts_open(&x->t);
    tsn_open_snap(x);
}

static inline void tsn_clean_reopen(struct tsn *x)
{
    tsn_restart(x, x->t.manual);
}

/* Deterministic body of the state at index: len bytes. */
static inline size_t tsn_body(uint64_t index, uint8_t *out, size_t len)
{
    uint64_t z = index * 0x9e3779b97f4a7c15ull + 1;

    assert_true(len <= TSN_BODY_MAX);
    for (size_t i = 0; i < len; i++) {
        z ^= z << 13;
        z ^= z >> 7;
        z ^= z << 17;
        out[i] = (uint8_t)z;
    }
    return len;
}

static inline void tsn_expect_body(const struct snap_load_report *lr,
                                   uint64_t index, size_t len)
{
    uint8_t want[TSN_BODY_MAX];

    tsn_body(index, want, len);
    assert_non_null(lr->body);
    assert_int_equal(lr->body_len, len);
    assert_memory_equal(lr->body, want, len);
}

/* Append [from, to] in term, wait until persisted, snapshot at `to`. */
static inline void tsn_log_and_snap(struct tsn *x, uint64_t from, uint64_t to,
                                    uint64_t term, uint64_t snap_term)
{
    uint8_t body[TSN_BODY_MAX];
    size_t len = tsn_body(to, body, 1000);

    if (from <= to) {
        ts_append(&x->t, from, to, term, 200, 1);
        assert_true(ts_wait_persisted(&x->t, to));
    }
    int rv = snap_write(x->sn, to, snap_term, body, len, x->errmsg);
    if (rv != 0) {
        fail_msg("snap_write %llu: %s: %s", (unsigned long long)to,
                 keel_errname(rv), x->errmsg);
    }
}

static inline bool tsn_exists(struct tsn *x, const char *path)
{
    struct fs *fs = fs_fault_fs(x->t.ff);
    return fs->stat(fs, path, NULL) == 0;
}

static inline bool tsn_snap_exists(struct tsn *x, uint64_t index)
{
    char path[1024];

    snap_path(x->sn, index, path, sizeof path);
    return tsn_exists(x, path);
}

/* Path of the quarantined copy of the snapshot at index. */
static inline void tsn_quarantined(struct tsn *x, uint64_t index, char *out,
                                   size_t cap)
{
    char hex[33];

    store_group_id_hex(&x->t.gid, hex);
    snprintf(out, cap, "%s/quarantine/snap-%s-%020llu.snap", x->t.dir, hex,
             (unsigned long long)index);
}

static inline void tsn_flip(struct tsn *x, uint64_t index, uint64_t off)
{
    char path[1024];

    snap_path(x->sn, index, path, sizeof path);
    assert_int_equal(fs_fault_flip_bit(x->t.ff, path, off, 3), 0);
}

#endif
