/* keel-replica-bench: proposals/s committed+applied through one replica
 * (group of one) for a payload size, fsync policy and window of
 * outstanding proposals. Usage:
 *   keel-replica-bench <dir> <payload-bytes> <group|always|interval:ms>
 *                      <outstanding> <count>
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <keel/error.h>

#include "replica.h"

struct bench {
    uv_loop_t loop;
    struct replica_host *host;
    struct store *s;
    struct replica *r;
    uint32_t len;
    uint64_t window, total, sent, acked;
    uint8_t *payload;
    int rv;
};

static void pump(struct bench *b)
{
    char err[KEEL_ERRMSG_MAX];
    while (b->sent < b->total && b->sent - b->acked < b->window) {
        b->rv = replica_propose(b->r, RAFT_ENTRY_NORMAL, b->payload, b->len,
                                b->sent + 1, err);
        if (b->rv != 0) {
            fprintf(stderr, "propose: %s\n", err);
            return;
        }
        b->sent++;
    }
}

static void on_apply(struct replica *r, uint64_t index, uint64_t term,
                     uint8_t type, const void *payload, uint32_t len,
                     uint64_t ctx, void *arg)
{
    (void)r, (void)index, (void)term, (void)payload, (void)len;
    struct bench *b = arg;
    if (type == RAFT_ENTRY_NORMAL && ctx != 0) {
        b->acked++;
        pump(b);
    }
}

static void on_role(struct replica *r, uint8_t role, raft_node leader,
                    void *arg)
{
    (void)r, (void)leader;
    if (role == RAFT_LEADER) {
        pump(arg);
    }
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr,
                "usage: %s <dir> <bytes> <fsync> <outstanding> "
                "<count>\n",
                argv[0]);
        return 2;
    }
    static struct bench b;
    char err[KEEL_ERRMSG_MAX];
    struct replica_options opt = {
        .self = 1, .election_timeout_ms = 20, .heartbeat_ms = 10};
    b.len = (uint32_t)atoi(argv[2]);
    b.window = (uint64_t)atoll(argv[4]);
    b.total = (uint64_t)atoll(argv[5]);
    b.payload = calloc(1, b.len + 1);
    if (store_fsync_parse(argv[3], &opt.fsync, err) != 0 || b.window == 0) {
        fprintf(stderr, "%s\n", err);
        return 2;
    }
    uv_loop_init(&b.loop);
    struct store_config sc = {.data_dir = argv[1],
                              .wakeup_cb = replica_host_wakeup};
    struct store_node_report nr;
    if (replica_host_create(&b.loop, &b.host, err) != 0) {
        return 1;
    }
    sc.wakeup_arg = b.host;
    if (store_open(&sc, &b.s, &nr, err) != 0) {
        fprintf(stderr, "store_open: %s\n", err);
        return 1;
    }
    replica_host_attach(b.host, b.s);
    struct raft_config cfg = {.n = 1};
    opt.incarnation = replica_incarnation_of(nr.incarnation);
    cfg.servers[0] = (struct raft_server){1, opt.incarnation, RAFT_VOTER};
    opt.bootstrap = &cfg;
    struct replica_callbacks cbs = {
        .apply = on_apply, .role_changed = on_role, .arg = &b};
    struct store_group_id gid;
    memset(&gid, 7, sizeof(gid));
    if (replica_open(b.host, &gid, &opt, &cbs, &b.r, err) != 0) {
        fprintf(stderr, "replica_open: %s\n", err);
        return 1;
    }
    uint64_t t0 = uv_hrtime();
    while (b.acked < b.total && b.rv == 0) {
        uv_run(&b.loop, UV_RUN_ONCE);
    }
    double s = (double)(uv_hrtime() - t0) / 1e9;
    struct store_stats st;
    store_stats(b.s, &st);
    printf("bytes=%u fsync=%s outstanding=%llu n=%llu secs=%.3f "
           "proposals/s=%.0f fdatasyncs=%llu batches=%llu\n",
           b.len, argv[3], (unsigned long long)b.window,
           (unsigned long long)b.acked, s, (double)b.acked / s,
           (unsigned long long)st.fdatasyncs, (unsigned long long)st.batches);
    replica_close(b.r);
    store_close(b.s, true);
    replica_host_destroy(b.host);
    uv_run(&b.loop, UV_RUN_DEFAULT);
    uv_loop_close(&b.loop);
    free(b.payload);
    return b.rv == 0 ? 0 : 1;
}
