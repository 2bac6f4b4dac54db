#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "store_test_util.h"

static void wakeup_cb(void *arg)
{
    struct ts *t = arg;
    pthread_mutex_lock(&t->mu);
    t->wakeups++;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void ts_write_boot(struct ts *t, const char *id)
{
    FILE *f = fopen(t->boot_path, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", id);
    fclose(f);
}

void ts_init(struct ts *t, uint64_t seed, bool real_fs)
{
    memset(t, 0, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/keel-store-test-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->boot_path, sizeof t->boot_path, "%s/boot_id", t->dir);
    ts_write_boot(t, "11111111-2222-3333-4444-555555555555");
    t->seed = seed;
    if (!real_fs) {
        assert_int_equal(fs_fault_init(seed, &t->ff), 0);
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    for (int i = 0; i < 16; i++) {
        t->gid.b[i] = (uint8_t)(0xa0 + i);
    }
    t->policy.policy = STORE_FSYNC_GROUP;
    t->segment_bytes = 16 * 1024;
}

static int rm_cb(const char *p, const struct stat *sb, int flag,
                 struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void ts_fini(struct ts *t)
{
    if (t->s != NULL) {
        ts_close(t, true);
    }
    fs_fault_close(t->ff);
    t->ff = NULL;
    nftw(t->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
}

void ts_open(struct ts *t)
{
    struct store_config cfg;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    int rv;

    memset(&cfg, 0, sizeof cfg);
    cfg.data_dir = t->dir;
    cfg.fs = t->ff != NULL ? fs_fault_fs(t->ff) : NULL;
    cfg.segment_bytes = t->segment_bytes;
    cfg.boot_id_path = t->boot_path;
    cfg.wakeup_cb = wakeup_cb;
    cfg.wakeup_arg = t;
    /* Fault tests keep their syncs focused unless they ask for spares. */
    cfg.no_prealloc = t->ff != NULL && !t->prealloc;
    cfg.manual_sync = t->manual;
    rv = store_open(&cfg, &t->s, &t->node, errmsg);
    if (rv != 0) {
        fail_msg("store_open: %s (seed %llu)", errmsg,
                 (unsigned long long)t->seed);
    }
    rv = store_group_open(t->s, &t->gid, &t->policy, &t->g, &t->rep, errmsg);
    if (rv != 0) {
        fail_msg("store_group_open: %s (seed %llu)", errmsg,
                 (unsigned long long)t->seed);
    }
    t->persisted_index = t->rep.last_index;
}

void ts_close(struct ts *t, bool clean)
{
    store_close(t->s, clean);
    t->s = NULL;
    t->g = NULL;
}

void ts_crash_reopen(struct ts *t, enum fs_fault_cut cut)
{
    assert_non_null(t->ff);
    store_debug_kill(t->s);
    fs_fault_power_loss(t->ff, cut);
    ts_close(t, false);
    fs_fault_thaw(t->ff);
    ts_open(t);
}

void ts_drain(struct ts *t)
{
    struct store_event evs[64];
    size_t n = store_poll(t->s, evs, 64);
    for (size_t i = 0; i < n; i++) {
        switch (evs[i].type) {
        case STORE_EV_PERSISTED:
            t->persisted_index = evs[i].index;
            t->persisted_term = evs[i].term;
            t->events_persisted++;
            break;
        case STORE_EV_HARD_STATE:
            t->hs_term = evs[i].term;
            break;
        case STORE_EV_REPAIRED:
            t->repaired_to = evs[i].term;
            break;
        case STORE_EV_ENOSPC:
            t->enospc_event = true;
            break;
        case STORE_EV_SPACE:
            t->space_event = true;
            break;
        }
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait for the next wakeup (or 10 ms), bounded overall by the caller. */
static void wait_wakeup(struct ts *t)
{
    struct timespec ts;
    pthread_mutex_lock(&t->mu);
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    (void)pthread_cond_timedwait(&t->cv, &t->mu, &ts);
    pthread_mutex_unlock(&t->mu);
}

#define WAIT_UNTIL(t, cond)                                                    \
    do {                                                                       \
        uint64_t deadline_ = now_ms() + TS_WAIT_MS_MAX;                        \
        for (;;) {                                                             \
            if ((t)->manual) {                                                 \
                store_debug_step((t)->s);                                      \
            }                                                                  \
            ts_drain(t);                                                       \
            if (cond) {                                                        \
                return true;                                                   \
            }                                                                  \
            if (now_ms() > deadline_) {                                        \
                return false;                                                  \
            }                                                                  \
            wait_wakeup(t);                                                    \
        }                                                                      \
    } while (0)

bool ts_wait_persisted(struct ts *t, uint64_t index)
{
    WAIT_UNTIL(t, t->persisted_index >= index);
}

bool ts_wait_hard_state(struct ts *t, uint64_t term)
{
    WAIT_UNTIL(t, t->hs_term >= term);
}

bool ts_wait_repaired(struct ts *t, uint64_t to)
{
    WAIT_UNTIL(t, t->repaired_to >= to);
}

bool ts_wait_held(struct ts *t)
{
    uint64_t deadline = now_ms() + TS_WAIT_MS_MAX;
    while (fs_fault_held(t->ff) == 0) {
        if (now_ms() > deadline) {
            return false;
        }
        wait_wakeup(t);
    }
    return true;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

uint32_t ts_payload(uint64_t index, uint64_t version, uint32_t len,
                    uint8_t *out)
{
    uint64_t h = mix(index * 1000003u + version);
    if (len < 16) {
        len = 16;
    }
    assert_true(len <= TS_PAYLOAD_MAX);
    memcpy(out, &index, 8);
    memcpy(out + 8, &version, 8);
    for (uint32_t i = 16; i < len; i++) {
        h = mix(h + i);
        out[i] = (uint8_t)h;
    }
    return len;
}

uint64_t ts_payload_version(uint64_t index, const uint8_t *p, uint32_t len)
{
    uint8_t want[TS_PAYLOAD_MAX];
    uint64_t idx;
    uint64_t ver;
    if (len < 16 || len > TS_PAYLOAD_MAX) {
        return UINT64_MAX;
    }
    memcpy(&idx, p, 8);
    memcpy(&ver, p + 8, 8);
    if (idx != index) {
        return UINT64_MAX;
    }
    ts_payload(index, ver, len, want);
    return memcmp(want, p, len) == 0 ? ver : UINT64_MAX;
}

void ts_append(struct ts *t, uint64_t from, uint64_t to, uint64_t term,
               uint32_t len, uint64_t version)
{
    static uint8_t bufs[64][TS_PAYLOAD_MAX];
    struct store_record recs[64];
    char errmsg[KEEL_ERRMSG_MAX] = "";
    uint64_t i = from;

    while (i <= to) {
        size_t n = 0;
        for (; n < 64 && i <= to; n++, i++) {
            uint32_t l = ts_payload(i, version, len, bufs[n]);
            recs[n] = (struct store_record){i, term, 1, 0, l, bufs[n]};
        }
        int rv = store_append(t->g, recs, n, errmsg);
        if (rv != 0) {
            fail_msg("append %llu: %s", (unsigned long long)from, errmsg);
        }
    }
}

void ts_where(struct ts *t, uint64_t index, char *path, uint64_t *off)
{
    assert_int_equal(store_debug_segment_path(t->g, index, path, 512, off), 0);
}

void ts_expect(struct ts *t, uint64_t index, uint64_t term, uint64_t version)
{
    struct store_entry e;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    int rv = store_read(t->g, index, &e, errmsg);
    if (rv != 0) {
        fail_msg("read %llu: %s %s (seed %llu)", (unsigned long long)index,
                 keel_errname(rv), errmsg, (unsigned long long)t->seed);
    }
    assert_int_equal(e.term, term);
    assert_int_equal(ts_payload_version(index, e.payload, e.len), version);
    store_entry_free(&e);
}

bool ts_wait_enospc(struct ts *t)
{
    WAIT_UNTIL(t, t->enospc_event);
}

bool ts_wait_space(struct ts *t)
{
    WAIT_UNTIL(t, t->space_event);
}
