/* keel-snap-bench: time snapshot write (temp, fsync, rename, directory
 * fsync, synced LMDB record), load (read + XXH3-128 validation at open) and
 * an InstallSnapshot transfer's leader spool (snapshot only) on the real
 * file system. usage: keel-snap-bench DIR [MiB ...] (DIR must not exist).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "snap.h"

#define BENCH_SIZES_MAX 16
#define BENCH_WAIT_ROUNDS_MAX 100000

struct bench {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t wakeups;
};

static void wakeup_cb(void *arg)
{
    struct bench *b = arg;
    pthread_mutex_lock(&b->mu);
    b->wakeups++;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Append one record at index and wait for the store to persist it. */
static int persist_one(struct bench *b, struct store *s, struct store_group *g,
                       uint64_t index)
{
    struct store_record r = {index, 1, 0, 0, 1, "x"};
    struct store_event evs[16];
    char errmsg[KEEL_ERRMSG_MAX];

    if (store_append(g, &r, 1, errmsg) != 0) {
        fprintf(stderr, "append: %s\n", errmsg);
        return 1;
    }
    for (unsigned i = 0; i < BENCH_WAIT_ROUNDS_MAX; i++) {
        size_t n = store_poll(s, evs, 16);
        for (size_t k = 0; k < n; k++) {
            if (evs[k].type == STORE_EV_PERSISTED && evs[k].index >= index) {
                return 0;
            }
        }
        pthread_mutex_lock(&b->mu);
        uint64_t seen = b->wakeups;
        while (b->wakeups == seen) {
            pthread_cond_wait(&b->cv, &b->mu);
        }
        pthread_mutex_unlock(&b->mu);
    }
    return 1;
}

static int run_size(struct bench *b, struct store *s, struct store_group *g,
                    const char *dir, uint64_t index, size_t mib)
{
    struct snap_config cfg = {NULL, dir, NULL, NULL};
    struct store_recovery rep;
    struct snap_load_report lr;
    struct snap *sn = NULL;
    struct snap_send *ss = NULL;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    size_t len = mib * 1024 * 1024;
    uint8_t *body = malloc(len);
    uint64_t total = 0;
    int rv;

    if (body == NULL || persist_one(b, s, g, index) != 0) {
        free(body);
        return 1;
    }
    for (size_t i = 0; i < len; i++) {
        body[i] = (uint8_t)(i * 31 + 7);
    }
    memset(&rep, 0, sizeof rep);
    rep.first_index = 1;
    rep.last_index = index;
    rv = snap_open(&cfg, s, g, &rep, &sn, &lr, errmsg);
    snap_body_free(&lr);
    double t0 = now_s();
    rv = rv == 0 ? snap_write(sn, index, 1, body, len, errmsg) : rv;
    double t1 = now_s();
    snap_close(sn);
    sn = NULL;
    rv = rv == 0 ? snap_open(&cfg, s, g, &rep, &sn, &lr, errmsg) : rv;
    double t2 = now_s();
    rv = rv == 0 && lr.body_len != len ? KEEL_ECORRUPT : rv;
    snap_body_free(&lr);
    rv = rv == 0 ? snap_send_open(sn, index + 1, &ss, &total, errmsg) : rv;
    double t3 = now_s();
    snap_send_close(ss);
    snap_close(sn);
    free(body);
    if (rv != 0) {
        fprintf(stderr, "%zu MiB: %s: %s\n", mib, keel_errname(rv), errmsg);
        return 1;
    }
    printf("%6zu MiB  write %8.1f ms (%7.1f MB/s)  load+validate %8.1f ms "
           "(%7.1f MB/s)  send spool %8.1f ms\n",
           mib, (t1 - t0) * 1e3, (double)len / (t1 - t0) / 1e6, (t2 - t1) * 1e3,
           (double)len / (t2 - t1) / 1e6, (t3 - t2) * 1e3);
    return 0;
}

int main(int argc, char **argv)
{
    struct bench b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct store_config cfg;
    struct store_node_report node;
    struct store_recovery rep;
    struct store_group_id gid = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
    struct store_fsync pol = {STORE_FSYNC_GROUP, 0};
    struct store *s = NULL;
    struct store_group *g = NULL;
    char errmsg[KEEL_ERRMSG_MAX] = "";
    char cmd[4200];
    int rc = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: keel-snap-bench DIR [MiB ...]\n");
        return 2;
    }
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", argv[1]);
    if (system(cmd) != 0) {
        return 1;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.data_dir = argv[1];
    cfg.wakeup_cb = wakeup_cb;
    cfg.wakeup_arg = &b;
    cfg.no_prealloc = true;
    if (store_open(&cfg, &s, &node, errmsg) != 0 ||
        store_group_open(s, &gid, &pol, &g, &rep, errmsg) != 0) {
        fprintf(stderr, "open: %s\n", errmsg);
        return 1;
    }
    static const size_t sizes[] = {1, 16, 64, 128};
    size_t n = argc > 2 ? (size_t)(argc - 2) : 4;
    for (size_t i = 0; rc == 0 && i < n && i < BENCH_SIZES_MAX; i++) {
        size_t mib =
            argc > 2 ? (size_t)strtoul(argv[i + 2], NULL, 10) : sizes[i];
        rc = run_size(&b, s, g, argv[1], rep.last_index + 1 + i, mib);
    }
    store_close(s, true);
    return rc;
}
