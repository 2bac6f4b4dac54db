/* keel-store-bench: appends/s and MB/s per fsync policy, record size and
 * number of concurrent appenders (each waits for its record to be
 * persisted, like a publisher waiting for its PubAck; with a window W each
 * keeps W records outstanding, like an async publisher with W acks
 * pending, as a Raft leader does with a stream of client batches); the raw
 * fdatasync latency of the same disk; recovery scan speed over a large log.
 * usage: keel-store-bench DIR [SECONDS_PER_CASE] [RECOVERY_MB]
 *        keel-store-bench DIR groups [N]   (open cost of N groups)
 *        keel-store-bench DIR scan [N]     (reopen DIR/recovery N times)
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store.h"

static double group_open_s;     /* wall time of the last store_group_open */
static double group_open_cpu_s; /* its CPU time (the opening thread) */

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct bench {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int woken;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void wake_cb(void *arg)
{
    struct bench *b = arg;
    pthread_mutex_lock(&b->mu);
    b->woken = 1;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void wait_wake(struct bench *b)
{
    pthread_mutex_lock(&b->mu);
    while (!b->woken) {
        pthread_cond_wait(&b->cv, &b->mu);
    }
    b->woken = 0;
    pthread_mutex_unlock(&b->mu);
}

static int open_store(const char *dir, uint64_t seg, struct bench *b,
                      const char *policy, struct store **s,
                      struct store_group **g, struct store_recovery *rep)
{
    struct store_config cfg;
    struct store_node_report nr;
    struct store_fsync pol;
    struct store_group_id id;
    char errmsg[KEEL_ERRMSG_MAX];

    memset(&cfg, 0, sizeof cfg);
    memset(&id, 7, sizeof id);
    cfg.data_dir = dir;
    cfg.segment_bytes = seg;
    cfg.wakeup_cb = wake_cb;
    cfg.wakeup_arg = b;
    if (store_fsync_parse(policy, &pol, errmsg) != 0 ||
        store_open(&cfg, s, &nr, errmsg) != 0) {
        fprintf(stderr, "keel-store-bench: %s\n", errmsg);
        return 1;
    }
    double t0 = now_s();
    double c0 = cpu_s();
    if (store_group_open(*s, &id, &pol, g, rep, errmsg) != 0) {
        fprintf(stderr, "keel-store-bench: %s\n", errmsg);
        return 1;
    }
    group_open_s = now_s() - t0;
    group_open_cpu_s = cpu_s() - c0;
    return 0;
}

static uint64_t drain(struct store *s)
{
    struct store_event ev[64];
    uint64_t p = 0;
    size_t n = store_poll(s, ev, 64);
    for (size_t i = 0; i < n; i++) {
        if (ev[i].type == STORE_EV_PERSISTED && ev[i].index > p) {
            p = ev[i].index;
        }
    }
    return p;
}

static int run_case(const char *dir, const char *policy, uint32_t size,
                    unsigned appenders, unsigned window, double secs)
{
    static uint8_t payload[1024];
    struct bench b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct store *s;
    struct store_group *g;
    struct store_recovery rep;
    struct store_stats st;
    char sub[512];

    snprintf(sub, sizeof sub, "%s/case-%s-%u-%u-%u", dir, policy, size,
             appenders, window);
    for (char *c = sub + strlen(dir); *c != '\0'; c++) {
        *c = *c == ':' ? '_' : *c;
    }
    if (mkdir(sub, 0755) != 0 ||
        open_store(sub, 64ull << 20, &b, policy, &s, &g, &rep) != 0) {
        return 1;
    }
    if (store_hard_state_save(g, 1, "b", 1, NULL) != 0) {
        return 1;
    }
    uint64_t next = 1;
    uint64_t acked = 0;
    double t0 = now_s();
    while (now_s() - t0 < secs) {
        while (next - 1 - acked < (uint64_t)appenders * window) {
            struct store_record r = {next, 1, 1, 0, size, payload};
            if (store_append(g, &r, 1, NULL) != 0) {
                return 1;
            }
            next++;
        }
        wait_wake(&b);
        uint64_t p = drain(s);
        acked = p > acked ? p : acked;
    }
    double dt = now_s() - t0;
    store_stats(s, &st);
    printf("%-12s %5u B %3u appenders x%-3u: %9.0f appends/s %8.2f MB/s "
           "(%llu fdatasyncs)\n",
           policy, size, appenders, window, (double)acked / dt,
           (double)acked * size / dt / 1e6, (unsigned long long)st.fdatasyncs);
    store_close(s, true);
    return 0;
}

static void raw_fdatasync(const char *dir)
{
    char path[512];
    static char buf[4096];
    snprintf(path, sizeof path, "%s/raw-sync", dir);
    int fd = open(path, O_CREAT | O_RDWR, 0644);
    double t0 = now_s();
    int n = 200;
    for (int i = 0; i < n; i++) {
        if (pwrite(fd, buf, sizeof buf, (off_t)i * 4096) != 4096 ||
            fdatasync(fd) != 0) {
            perror("raw");
            break;
        }
    }
    printf("raw 4 KiB pwrite+fdatasync: %.3f ms each\n",
           (now_s() - t0) * 1000 / n);
    close(fd);
}

static int recovery(const char *dir, uint64_t mb)
{
    static uint8_t payload[1024];
    struct bench b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct store *s;
    struct store_group *g;
    struct store_recovery rep;
    char sub[512];
    uint64_t n = mb * 1024 * 1024 / 1072;

    snprintf(sub, sizeof sub, "%s/recovery", dir);
    if (mkdir(sub, 0755) != 0 ||
        open_store(sub, 64ull << 20, &b, "group", &s, &g, &rep) != 0 ||
        store_hard_state_save(g, 1, "b", 1, NULL) != 0) {
        return 1;
    }
    for (uint64_t i = 1; i <= n; i += 256) {
        struct store_record r[256];
        size_t k = 0;
        for (; k < 256 && i + k <= n; k++) {
            r[k] = (struct store_record){i + k, 1, 1, 0, 1024, payload};
        }
        if (store_append(g, r, k, NULL) != 0) {
            return 1;
        }
    }
    store_close(s, true);
    sync(); /* the written GiB's writeback is not the scan's time; the
               pages stay in the page cache */
    if (open_store(sub, 64ull << 20, &b, "group", &s, &g, &rep) != 0) {
        return 1;
    }
    double dt = group_open_s; /* the recovery scan, not LMDB's open */
    printf("recovery scan: %llu records, %llu MiB in %.3f s: %.0f MB/s "
           "(files in page cache); CPU %.3f s: %.0f MB/s per CPU second\n",
           (unsigned long long)rep.last_index, (unsigned long long)mb, dt,
           (double)mb * 1048576 / dt / 1e6, group_open_cpu_s,
           (double)mb * 1048576 / group_open_cpu_s / 1e6);
    store_close(s, true);
    return 0;
}

/* Open DIR/recovery (left by a full run) n times: the scan alone. */
static int rescan(const char *dir, int n)
{
    struct bench b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct store *s;
    struct store_group *g;
    struct store_recovery rep;
    char sub[512];

    snprintf(sub, sizeof sub, "%s/recovery", dir);
    for (int i = 0; i < n; i++) {
        if (open_store(sub, 64ull << 20, &b, "group", &s, &g, &rep) != 0) {
            return 1;
        }
        double mb = (double)rep.last_index * 1072 / 1048576;
        printf("rescan: %llu records, %.0f MiB in %.3f s: %.0f MB/s; CPU "
               "%.3f s: %.0f MB/s per CPU second\n",
               (unsigned long long)rep.last_index, mb, group_open_s,
               mb * 1048576 / group_open_s / 1e6, group_open_cpu_s,
               mb * 1048576 / group_open_cpu_s / 1e6);
        store_close(s, true);
    }
    return 0;
}

static long rss_kib(void)
{
    long pages = 0;
    long rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Open n groups, append one record to each, wait for all, close; then
 * reopen the store and all groups: time and memory per group. */
static int open_groups(struct store *s, unsigned n, struct store_group **gs,
                       double *secs)
{
    struct store_fsync pol = {STORE_FSYNC_GROUP, 0};
    char errmsg[KEEL_ERRMSG_MAX];
    double t0 = now_s();

    for (unsigned i = 0; i < n; i++) {
        struct store_group_id id;
        struct store_recovery rep;
        memset(&id, 0, sizeof id);
        memcpy(id.b, &i, sizeof i);
        if (store_group_open(s, &id, &pol, &gs[i], &rep, errmsg) != 0) {
            fprintf(stderr, "keel-store-bench: %s\n", errmsg);
            return 1;
        }
    }
    *secs = now_s() - t0;
    return 0;
}

static int many_groups(const char *dir, unsigned n)
{
    static uint8_t payload[128];
    static struct store_group *gs[STORE_GROUPS_MAX];
    struct bench b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    struct store_config cfg;
    struct store_node_report nr;
    struct store *s;
    char sub[512];
    double open_s;
    double reopen_s;

    snprintf(sub, sizeof sub, "%s/groups-%u", dir, n);
    memset(&cfg, 0, sizeof cfg);
    cfg.data_dir = sub;
    cfg.wakeup_cb = wake_cb;
    cfg.wakeup_arg = &b;
    if (mkdir(sub, 0755) != 0 || store_open(&cfg, &s, &nr, NULL) != 0) {
        return 1;
    }
    long rss0 = rss_kib();
    if (open_groups(s, n, gs, &open_s) != 0) {
        return 1;
    }
    long rss1 = rss_kib();
    for (unsigned i = 0; i < n; i++) {
        struct store_record r = {1, 1, 1, 0, sizeof payload, payload};
        if (store_hard_state_save(gs[i], 1, "b", 1, NULL) != 0 ||
            store_append(gs[i], &r, 1, NULL) != 0) {
            return 1;
        }
    }
    unsigned persisted = 0;
    double t0 = now_s();
    while (persisted < n) {
        struct store_event ev[64];
        size_t k = store_poll(s, ev, 64);
        for (size_t i = 0; i < k; i++) {
            persisted += ev[i].type == STORE_EV_PERSISTED;
        }
        if (k == 0) {
            wait_wake(&b);
        }
    }
    double first_s = now_s() - t0;
    long rss2 = rss_kib();
    store_close(s, true);
    if (store_open(&cfg, &s, &nr, NULL) != 0 ||
        open_groups(s, n, gs, &reopen_s) != 0) {
        return 1;
    }
    printf("%u groups: open %.2f ms/group (new), %.2f ms/group (reopen, "
           "1 segment each); RSS %.1f KiB/group open, %.1f KiB/group after "
           "one append; first append to all: %.3f s\n",
           n, open_s * 1000 / n, reopen_s * 1000 / n, (double)(rss1 - rss0) / n,
           (double)(rss2 - rss0) / n, first_s);
    store_close(s, true);
    return 0;
}

int main(int argc, char **argv)
{
    const char *policies[] = {"always", "group", "interval:10"};
    uint32_t sizes[] = {128, 1024};
    /* (appenders, window): closed-loop 1 and 64, then 64 pipelined. */
    unsigned apps[][2] = {{1, 1}, {64, 1}, {64, 16}};

    if (argc < 2) {
        fprintf(stderr,
                "usage: keel-store-bench DIR [SECONDS] [RECOVERY_MB]\n");
        return 2;
    }
    if (argc > 2 && strcmp(argv[2], "scan") == 0) {
        return rescan(argv[1], argc > 3 ? atoi(argv[3]) : 3);
    }
    if (argc > 2 && strcmp(argv[2], "groups") == 0) {
        unsigned n = argc > 3 ? (unsigned)atoi(argv[3]) : 200;
        return n >= 1 && n <= STORE_GROUPS_MAX ? many_groups(argv[1], n) : 2;
    }
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    uint64_t mb = argc > 3 ? strtoull(argv[3], NULL, 10) : 1024;
    raw_fdatasync(argv[1]);
    for (int p = 0; p < 3 && secs > 0; p++) {
        for (int z = 0; z < 2; z++) {
            for (int a = 0; a < 3; a++) {
                if (run_case(argv[1], policies[p], sizes[z], apps[a][0],
                             apps[a][1], secs)) {
                    return 1;
                }
            }
        }
    }
    return recovery(argv[1], mb);
}
