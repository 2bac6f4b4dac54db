/* keel-faults: one fault-injection run per invocation (see faults.h and
 * docs/faults.md). Prints one table row and exits 0 when the run passes
 * (0 lost, 0 divergent), 1 when it does not, 2 on a usage error.
 *
 *   keel-faults --nemesis NAME (the table below)
 *               [--nodes 1|3|5] [--replicas 1|3|5]
 *               [--policy group|always|interval:MS] [--pubs 3]
 *               [--rounds 6] [--round-ms 1500] [--seed N]
 *               [--urls nats://a,nats://b]   (an external cluster, e.g.
 *                                             nats-server: no nemesis)
 *               [--server nats-server]       (run nats-server -js instead
 *                                             of keeld: no dump)
 *               [--mirror]                   (also a mirror of the stream,
 *                                             compared with it at the end)
 *               [--sources]                  (the same with a stream that
 *                                             sources it, not a mirror)
 *               [--aggregate]                (--mirror and an R1 stream
 *                                             sourcing origin and mirror)
 * Environment: KEELD (keeld binary), KEEL (keel binary, for store dump).
 */
#include <assert.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "faults.h"

/* On one node every event hits node 0 and partitions do not exist; in a
 * cluster `who` and `cut` say which nodes (faults.h). Media faults expect
 * FLAGGED on one node (R1: no peer to repair from); with replicas the
 * checker expects every acked value served (f_check). A meta.lmdb fault
 * touches no record (the log is the stream): every acked value must be
 * served, on one node too. */
static const struct f_nemesis nemeses[] = {
    {"none", F_EXPECT_ALL, NULL, false, NULL, F_WHO_MINORITY, F_CUT_NONE},
    {"kill", F_EXPECT_ALL, NULL, false, NULL, F_WHO_MINORITY, F_CUT_NONE},
    {"kill-leader", F_EXPECT_ALL, NULL, false, NULL, F_WHO_LEADER, F_CUT_NONE},
    {"stop", F_EXPECT_ALL, NULL, true, NULL, F_WHO_MINORITY, F_CUT_NONE},
    {"stop-leader", F_EXPECT_ALL, NULL, true, NULL, F_WHO_LEADER, F_CUT_NONE},
    {"partition-leader", F_EXPECT_ALL, NULL, false, NULL, F_WHO_MINORITY,
     F_CUT_LEADER},
    {"partition-half", F_EXPECT_ALL, NULL, false, NULL, F_WHO_MINORITY,
     F_CUT_HALF},
    {"partition-bridge", F_EXPECT_ALL, NULL, false, NULL, F_WHO_MINORITY,
     F_CUT_BRIDGE},
    {"bitflip", F_EXPECT_FLAGGED, f_inject_bitflip, false, NULL, F_WHO_MINORITY,
     F_CUT_NONE},
    {"truncate", F_EXPECT_FLAGGED, f_inject_truncate, false, NULL,
     F_WHO_MINORITY, F_CUT_NONE},
    {"meta", F_EXPECT_ALL, f_inject_meta, false, NULL, F_WHO_MINORITY,
     F_CUT_NONE},
    {"snapshot", F_EXPECT_FLAGGED, f_inject_snapshot, false, NULL,
     F_WHO_MINORITY, F_CUT_NONE},
    {"powerloss", F_EXPECT_ALL, NULL, false, "drop", F_WHO_ONE, F_CUT_NONE},
    {"powerloss-reorder", F_EXPECT_ALL, NULL, false, "reorder", F_WHO_ONE,
     F_CUT_NONE},
    {"powerloss-minority", F_EXPECT_ALL, NULL, false, "drop", F_WHO_MINORITY,
     F_CUT_NONE},
    {"powerloss-all", F_EXPECT_ALL, NULL, false, "drop", F_WHO_ALL, F_CUT_NONE},
    /* Membership changes through the keel CLI (faults_member.c). */
    {"member", F_EXPECT_ALL, NULL, false, NULL, F_WHO_MINORITY, F_CUT_NONE},
    /* The soak (docs/faults.md "Soak"): every event is one of
     * mixed_kinds, drawn at random; nodes run under the power shim so any
     * of them may lose power; damage hits the fixed minority of victims. */
    {"mixed", F_EXPECT_ALL, NULL, false, "drop", F_WHO_MINORITY, F_CUT_NONE},
};

/* What the mixed nemesis draws from: the kill, pause, partition,
 * bit flip, truncation, power loss of a minority and membership change. */
static const char *const mixed_kinds[] = {
    "kill",
    "kill-leader",
    "stop",
    "stop-leader",
    "partition-leader",
    "partition-half",
    "partition-bridge",
    "bitflip",
    "truncate",
    "powerloss-minority",
    "member",
};
#define MIXED_N (sizeof mixed_kinds / sizeof mixed_kinds[0])
_Static_assert(MIXED_N <= F_MIXED_KINDS, "F_MIXED_KINDS too small");

static const struct f_nemesis *nemesis_named(const char *name)
{
    for (size_t i = 0; i < sizeof nemeses / sizeof nemeses[0]; i++) {
        if (strcmp(nemeses[i].name, name) == 0) {
            return &nemeses[i];
        }
    }
    return NULL;
}

static bool is_mixed(const struct f_nemesis *nem)
{
    return strcmp(nem->name, "mixed") == 0;
}

static bool is_member(const struct f_nemesis *nem)
{
    return strcmp(nem->name, "member") == 0;
}

/* kill(-1 or 0, sig) would signal every process: never. */
#define ASSERT_PID(p)                                                          \
    do {                                                                       \
        if ((p) <= 0) {                                                        \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Time, not synchronisation: how long a nemesis holds a fault (SIGSTOP)
 * and how long the workload runs between faults; also the pace of bounded
 * retries. Waits for a condition use f_wait_recovery and bounded polls. */
static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* "1800", "90s", "30m", "2h": seconds, or -1. */
static int parse_duration_s(const char *v)
{
    char *end = NULL;
    long n = strtol(v, &end, 10);
    long mul = *end == 'h' ? 3600 : *end == 'm' ? 60 : 1;
    if (end == v || n <= 0 ||
        (*end != '\0' && (strchr("hms", *end) == NULL || end[1] != '\0')) ||
        n > 24L * 3600 / mul) {
        return -1;
    }
    return (int)(n * mul);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: keel-faults --nemesis NAME [--nodes 1|3|5] "
            "[--replicas 1|3|5] [--policy P] [--pubs N] [--rounds N] "
            "[--round-ms MS] [--duration 30m] [--seed N] [--urls LIST] "
            "[--server keeld|nats-server] [--mirror|--sources|--aggregate] "
            "[--member-wait 30s]\n"
            "nemeses:");
    for (size_t i = 0; i < sizeof nemeses / sizeof nemeses[0]; i++) {
        fprintf(stderr, " %s", nemeses[i].name);
    }
    fprintf(stderr, "\n");
    return 2;
}

static int parse(int argc, char **argv, struct f_config *cfg)
{
    *cfg = (struct f_config){.nemesis = "kill",
                             .policy = "group",
                             .nodes = 1,
                             .pubs = 3,
                             .rounds = 6,
                             .round_ms = 1500,
                             .member_wait_s = 30};
    cfg->seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-v") == 0) {
            cfg->verbose = true;
            continue;
        }
        if (strcmp(a, "--mirror") == 0 || strcmp(a, "--sources") == 0 ||
            strcmp(a, "--aggregate") == 0) {
            cfg->mirror = true;
            cfg->sources = cfg->sources || strcmp(a, "--sources") == 0;
            cfg->aggregate = cfg->aggregate || strcmp(a, "--aggregate") == 0;
            continue;
        }
        if (v == NULL) {
            return -1;
        }
        i++;
        if (strcmp(a, "--nemesis") == 0) {
            cfg->nemesis = v;
        } else if (strcmp(a, "--policy") == 0) {
            cfg->policy = v;
        } else if (strcmp(a, "--nodes") == 0) {
            cfg->nodes = atoi(v);
        } else if (strcmp(a, "--replicas") == 0) {
            cfg->replicas = atoi(v);
        } else if (strcmp(a, "--pubs") == 0) {
            cfg->pubs = atoi(v);
        } else if (strcmp(a, "--rounds") == 0) {
            cfg->rounds = atoi(v);
        } else if (strcmp(a, "--round-ms") == 0) {
            cfg->round_ms = atoi(v);
        } else if (strcmp(a, "--duration") == 0) {
            cfg->duration_s = parse_duration_s(v);
            if (cfg->duration_s < 0) {
                return -1;
            }
        } else if (strcmp(a, "--member-wait") == 0) {
            cfg->member_wait_s = parse_duration_s(v);
            if (cfg->member_wait_s <= 0) {
                return -1;
            }
        } else if (strcmp(a, "--seed") == 0) {
            cfg->seed = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--urls") == 0) {
            cfg->urls = v;
        } else if (strcmp(a, "--server") == 0) {
            cfg->nats_server = strcmp(v, "nats-server") == 0;
            if (!cfg->nats_server && strcmp(v, "keeld") != 0) {
                return -1;
            }
        } else {
            return -1;
        }
    }
    /* Membership changes move a removed node's replica: R3 on 5 nodes
     * leaves two nodes free for it. */
    if (cfg->replicas == 0 && (strcmp(cfg->nemesis, "member") == 0 ||
                               strcmp(cfg->nemesis, "mixed") == 0)) {
        cfg->replicas = cfg->nodes >= 5 ? 3 : 1;
    }
    if (cfg->replicas == 0) {
        cfg->replicas = cfg->nodes >= 5 ? 5 : cfg->nodes >= 3 ? 3 : 1;
    }
    bool ok =
        (cfg->nodes == 1 || cfg->nodes == 3 || cfg->nodes == 5) &&
        (cfg->replicas == 1 || cfg->replicas == 3 || cfg->replicas == 5) &&
        cfg->replicas <= cfg->nodes && cfg->pubs >= 1 &&
        cfg->pubs <= F_PUBS_MAX && cfg->rounds >= 0 && cfg->rounds <= 1000 &&
        cfg->round_ms > 0;
    return ok ? 0 : -1;
}

static bool port_open(void *arg)
{
    int fd = h_tcp_connect(*(int *)arg);
    if (fd >= 0) {
        close(fd);
    }
    return fd >= 0;
}

/* nats-server 2.9 -js on the node's data dir (the side-by-side runs):
 * its default sync_interval (2 minutes) is what the table compares. */
static int nats_start(struct f_run_ctx *c, int i, int port)
{
    struct h_keeld *k = &c->k[i];
    char ps[16];
    port = port > 0 ? port : 20000 + (int)(f_rand(c) % 20000);
    snprintf(ps, sizeof ps, "%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(k->log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("nats-server", "nats-server", "-a", "127.0.0.1", "-p", ps, "-js",
               "-sd", k->data_dir, (char *)NULL);
        _exit(127);
    }
    if (pid < 0) {
        return -1;
    }
    k->pid = pid;
    k->port = port;
    snprintf(k->url, sizeof k->url, "nats://127.0.0.1:%d", port);
    if (!h_poll(port_open, &port, H_START_TIMEOUT_MS)) {
        kill(pid, SIGKILL);
        (void)h_wait_pid(pid, H_STOP_TIMEOUT_MS, NULL);
        k->pid = 0;
        return -1;
    }
    return 0;
}

static int node_start(struct f_run_ctx *c, int i, int port)
{
    /* The snapshot nemesis needs snapshot files: take them often. */
    bool snap = f_takes_snapshots(c);
    const char *extra[] = {"--fsync", c->cfg.policy,
                           snap ? "--snapshot_entries" : NULL, "500", NULL};
    int rv;
    if (c->cluster) {
        return f_cluster_node_start(c, i); /* the shim too, when c->shim */
    }
    /* setenv while other threads may read the environment: only when the
     * shim is needed at all. */
    if (c->shim) {
        f_power_env(c, i, true);
    }
    if (c->cfg.nats_server) {
        rv = nats_start(c, i, port);
    } else {
        rv = h_keeld_start(&c->k[i], port, false, extra);
    }
    if (c->shim) {
        f_power_env(c, i, false);
    }
    return rv;
}

/* The power goes out on node i (already killed): unsynced writes and
 * directory entries are dropped, and the boot id changes. */
static int power_loss(struct f_run_ctx *c, int i)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "'%s' '%s/pl.journal' --mode %s --seed %llu --boot-id "
             "'%s/boot_id' 1>&2",
             c->cfg.pl_tool, f_k(c, i)->dir, c->nem->power,
             (unsigned long long)f_rand(c), f_k(c, i)->dir);
    c->injured++;
    return system(cmd) == 0 ? 0 : -1;
}

/* kill -9 node i and reap it. */
static int node_kill(struct f_run_ctx *c, int i)
{
    struct h_keeld *k = f_k(c, i);
    if (c->cluster) {
        return h_netns_node_kill(&c->net, i);
    }
    ASSERT_PID(k->pid);
    kill(k->pid, SIGKILL);
    int rv = h_wait_pid(k->pid, H_STOP_TIMEOUT_MS, NULL);
    k->pid = 0;
    return rv;
}

/* Node i is down: injure it, cut its power, start it again (on the same
 * port, so clients reconnect to the same address). */
static int revive(struct f_run_ctx *c, int i)
{
    int port = f_k(c, i)->port;
    uint8_t *before = c->nem->injure != NULL ? f_disk_snapshot(c, i) : NULL;
    if (c->nem->injure != NULL && c->nem->injure(c, i) != 0) {
        fprintf(stderr, "keel-faults: injury failed on node %d\n", i);
    }
    if (c->nem->injure != NULL) {
        f_note_destroyed(c, i, before);
    }
    free(before);
    if (c->nem->power != NULL && power_loss(c, i) != 0) {
        fprintf(stderr, "keel-faults: power loss tool failed on node %d\n", i);
        return -1;
    }
    for (int tries = 0; tries < 5; tries++) {
        if (node_start(c, i, port) == 0) {
            return 0;
        }
        pause_ms(250); /* the port may still be held: retry, bounded */
    }
    /* keeld refuses to start on this directory (it logged why): a finding
     * the row reports; the checker still looks at what is on disk. */
    f_k(c, i)->pid = 0;
    c->restart_failed++;
    return 0;
}

/* The nodes one event hits (faults.h enum f_who). */
static int pick(struct f_run_ctx *c, const char *urls, bool *set)
{
    int n = c->cfg.nodes;
    memset(set, 0, F_NODES_MAX * sizeof *set);
    if (!c->cluster) {
        set[0] = true;
        return 0;
    }
    bool damage = c->nem->injure != NULL || c->nem->power != NULL;
    if (c->nem->who == F_WHO_ALL) {
        for (int i = 0; i < n; i++) {
            set[i] = true;
        }
    } else if (c->nem->who == F_WHO_LEADER) {
        int l = f_cluster_leader(c, urls);
        if (l < 0) {
            return -1; /* no leader to hit: skip this event */
        }
        set[l] = true;
    } else if (damage) {
        memcpy(set, c->victim, F_NODES_MAX * sizeof *set);
    } else {
        /* 1 .. (replicas-1)/2 of the stream's peers. */
        int want = 1 + (int)(f_rand(c) % (uint64_t)((c->cfg.replicas - 1) / 2));
        for (int got = 0, guard = 0; got < want && guard < 1000; guard++) {
            int i = (int)(f_rand(c) % (uint64_t)n);
            if (c->host[i] && !set[i]) {
                set[i] = true;
                got++;
            }
        }
        /* The mirror workload: every other event also hits the mirror's
         * leader when it hosts no origin replica (the origin still loses
         * a minority only), so the mirror's pump moves too. */
        int ml = c->cfg.mirror && f_rand(c) % 2 == 0
                     ? f_leader_node(c, urls, F_MIRROR)
                     : -1;
        if (ml >= 0 && !c->host[ml]) {
            set[ml] = true;
        }
        /* The aggregate's node too, every third event, on the same terms:
         * its pumps restart from the positions its log holds. */
        int an = c->cfg.aggregate && f_rand(c) % 3 == 0
                     ? f_leader_node(c, urls, F_AGG)
                     : -1;
        if (an >= 0 && !c->host[an]) {
            set[an] = true;
        }
    }
    return 0;
}

/* Damage that stays hits the same peers every time: one, or the largest
 * minority of the stream's group. */
static void pick_victims(struct f_run_ctx *c)
{
    int want = c->nem->who == F_WHO_ONE ? 1 : (c->cfg.replicas - 1) / 2;
    for (int got = 0, guard = 0; got < want && guard < 1000; guard++) {
        int i = (int)(f_rand(c) % (uint64_t)c->cfg.nodes);
        if (c->host[i] && !c->victim[i]) {
            c->victim[i] = true;
            got++;
        }
    }
}

static void log_event(struct f_run_ctx *c, const char *what, const bool *set)
{
    size_t used = strlen(c->injury_log);
    if (!c->cluster || used > sizeof c->injury_log / 2) {
        return;
    }
    int w = snprintf(c->injury_log + used, sizeof c->injury_log - used, "%s%s",
                     used > 0 ? "; " : "", what);
    for (int i = 0; w > 0 && i < c->cfg.nodes; i++) {
        used = strlen(c->injury_log);
        if (set[i]) {
            snprintf(c->injury_log + used, sizeof c->injury_log - used, " n%d",
                     i + 1);
        }
    }
}

static int event(struct f_run_ctx *c, const char *urls);

/* One event of the mixed nemesis: a kind drawn at random. Membership
 * changes need a free node (R3 on 5 nodes) and stop for the rest of the
 * run once one was not carried out (f_member_event). */
static int mixed_event(struct f_run_ctx *c, const char *urls)
{
    bool member_ok = c->cfg.nodes >= 5 && c->cfg.replicas < c->cfg.nodes &&
                     c->member_failed == 0;
    size_t k;
    do {
        k = (size_t)(f_rand(c) % MIXED_N);
    } while (strcmp(mixed_kinds[k], "member") == 0 && !member_ok);
    c->mixed_count[k]++;
    c->moved = c->moved || strcmp(mixed_kinds[k], "member") == 0;
    c->nem = nemesis_named(mixed_kinds[k]);
    assert(c->nem != NULL && !is_mixed(c->nem));
    int rv = event(c, urls);
    c->nem = c->run_nem;
    return rv;
}

/* One nemesis event: pause, partition, or kill -9 (+ injury) + restart. */
static int event(struct f_run_ctx *c, const char *urls)
{
    bool set[F_NODES_MAX];
    if (strcmp(c->nem->name, "none") == 0) {
        return 0;
    }
    if (is_mixed(c->nem)) {
        return mixed_event(c, urls);
    }
    if (is_member(c->nem)) {
        return f_member_event(c);
    }
    if (c->nem->cut != F_CUT_NONE) {
        static bool cut[F_NODES_MAX * F_NODES_MAX];
        int l = c->nem->cut == F_CUT_LEADER ? f_cluster_leader(c, urls) : -1;
        if (f_cluster_cut(c, l, cut) == 0) {
            pause_ms(1000 + (long)(f_rand(c) % 2000));
        }
        f_cluster_heal(c, cut);
        return 0;
    }
    if (pick(c, urls, set) != 0) {
        return 0;
    }
    log_event(c, c->nem->stop ? "stop" : "kill", set);
    if (c->nem->stop) {
        for (int i = 0; i < c->cfg.nodes; i++) {
            if (set[i] && f_k(c, i)->pid > 0) {
                kill(f_k(c, i)->pid, SIGSTOP);
            }
        }
        pause_ms(200 + (long)(f_rand(c) % 1500));
        for (int i = 0; i < c->cfg.nodes; i++) {
            if (set[i] && f_k(c, i)->pid > 0) {
                kill(f_k(c, i)->pid, SIGCONT);
            }
        }
        return 0;
    }
    for (int i = 0; i < c->cfg.nodes; i++) {
        /* pid <= 0: refused to restart earlier; never signal it. */
        if (set[i] && f_k(c, i)->pid > 0 && node_kill(c, i) != 0) {
            return -1;
        }
    }
    if (c->cluster) {
        pause_ms((long)(f_rand(c) % 1000)); /* the others run without it */
    }
    for (int i = 0; i < c->cfg.nodes; i++) {
        if (set[i] && f_k(c, i)->pid <= 0 && revive(c, i) != 0) {
            return -1;
        }
    }
    return 0;
}

static void row(const struct f_run_ctx *c, const struct f_result *r,
                const struct f_view *read, const struct f_view *nodes,
                int nviews)
{
    char flags[256] = "";
    for (int i = 0; i < nviews; i++) {
        size_t used = strlen(flags);
        if (nodes[i].flags[0] != '\0' && used + 8 < sizeof flags) {
            snprintf(flags + used, sizeof flags - used, "%s%s", used ? ";" : "",
                     nodes[i].flags);
        }
    }
    printf("| %-8s | %-6s | %d/R%d | %6llu | %6llu | %5llu | %5llu | %4llu "
           "| %5llu | %4llu | %3llu | %6lld | %-4s | %s |\n",
           c->nem->name, c->cfg.nats_server ? "nats" : c->cfg.policy,
           c->cfg.nodes, c->cfg.replicas, (unsigned long long)r->attempts,
           (unsigned long long)r->acked, (unsigned long long)r->indet,
           (unsigned long long)r->failed, (unsigned long long)r->lost,
           (unsigned long long)r->unavailable, (unsigned long long)r->divergent,
           (unsigned long long)r->dup, c->recovery_ms,
           r->pass ? "PASS" : "FAIL", c->cfg.urls != NULL ? "external" : flags);
    printf(
        "keel-faults: nemesis=%s seed=%llu injuries=%d [%s] read=%llu "
        "misplaced=%llu never_published=%llu on_disk_missing=%llu "
        "consumed=%llu consumer_missing=%llu drain_ms=%lld restart_failed=%d "
        "converge_ms=%d unclean_stops=%d failed_stored=%llu "
        "member_failed=%d dump_failed=%llu read_cut=%d%s%s%s "
        "member_undone=%d%s%s%s\n",
        c->nem->name, (unsigned long long)c->cfg.seed, c->injured,
        c->injury_log, (unsigned long long)r->read_total,
        (unsigned long long)r->misplaced,
        (unsigned long long)r->never_published,
        (unsigned long long)r->on_disk_missing, (unsigned long long)c->consumed,
        (unsigned long long)r->consumer_missing, c->drain_ms, c->restart_failed,
        c->converge_ms, c->unclean_stops, (unsigned long long)r->failed_stored,
        c->member_failed, (unsigned long long)r->dump_failed, read->cut,
        c->member_why[0] != '\0' ? " [" : "", c->member_why,
        c->member_why[0] != '\0' ? "]" : "", c->member_undone,
        c->undone_why[0] != '\0' ? " [" : "", c->undone_why,
        c->undone_why[0] != '\0' ? "]" : "");
    if (is_mixed(c->run_nem)) {
        printf("keel-faults: mixed events=%d", c->events);
        for (size_t k = 0; k < MIXED_N; k++) {
            printf("%s%s:%d", k == 0 ? " [" : " ", mixed_kinds[k],
                   c->mixed_count[k]);
        }
        printf("]\n");
    }
}

/* Traffic with nemesis events, then heal and measure recovery. */
static int traffic(struct f_run_ctx *c, const char *urls)
{
    pthread_t pubs[F_PUBS_MAX];
    pthread_t cons;
    /* The mirror first: its origin does not exist yet, so placement by
     * load puts it on the nodes the origin will not take first. */
    if (c->cfg.mirror && f_mirror_create(c, urls) != 0) {
        fprintf(stderr, "keel-faults: mirror not created at %s\n", urls);
        return -1;
    }
    if (f_stream_create(c, urls) != 0) {
        fprintf(stderr, "keel-faults: stream not created at %s\n", urls);
        return -1;
    }
    if (c->cfg.aggregate && f_agg_create(c, urls) != 0) {
        fprintf(stderr, "keel-faults: aggregate not created at %s\n", urls);
        return -1;
    }
    if (c->cluster && f_cluster_hosts(c, urls) != 0) {
        fprintf(stderr, "keel-faults: the stream's peers are unknown\n");
        return -1;
    }
    if (!c->cluster) {
        c->host[0] = true;
    }
    pick_victims(c);
    if (f_consumer_start(c, &cons) != 0 || f_pubs_start(c, pubs) != 0) {
        return -1;
    }
    int rv = 0;
    long long until = mono_ms() + (long long)c->cfg.duration_s * 1000;
    for (int r = 0; rv == 0 && (c->cfg.duration_s > 0 ? mono_ms() < until
                                                      : r < c->cfg.rounds);
         r++) {
        pause_ms(c->cfg.round_ms / 2 +
                 (long)(f_rand(c) % (uint64_t)c->cfg.round_ms));
        if (c->cfg.urls == NULL) {
            rv = event(c, urls);
        }
        c->events = r + 1;
    }
    pause_ms(c->cfg.round_ms / 2);
    f_pubs_stop(c, pubs);
    /* One node that stays down has nothing to recover to; a cluster
     * recovers without the nodes that refused to start. */
    c->recovery_ms =
        c->restart_failed > 0 && !c->cluster ? -1 : f_wait_recovery(c, urls);
    /* The replicas moved: the dumps cover the stream's members now. */
    if (rv == 0 && (is_member(c->nem) || c->moved)) {
        (void)f_member_settle(c, urls);
    }
    c->drain_ms = f_consumer_drain(c);
    f_consumer_stop(c, cons);
    c->converge_ms = c->cluster ? f_cluster_converge(c) : 0;
    return rv;
}

/* The data dir exists before the shim starts (it resolves it once), and
 * the node's boot id file starts as the machine's. */
static int boot_id_init(struct h_keeld *k)
{
    char path[600];
    char id[64] = "";
    FILE *in = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (in != NULL) {
        (void)!fgets(id, sizeof id, in);
        fclose(in);
    }
    snprintf(path, sizeof path, "%s/boot_id", k->dir);
    FILE *out = fopen(path, "w");
    if (out == NULL) {
        return -1;
    }
    fputs(id, out);
    fclose(out);
    return mkdir(k->data_dir, 0755) == 0 ? 0 : -1;
}

/* Start every node; urls gets the client URL list. */
static int start_all(struct f_run_ctx *c, char *urls, size_t len)
{
    if (c->cfg.nodes > 1 && f_cluster_prepare(c) != 0) {
        return -1;
    }
    for (int i = 0; i < c->cfg.nodes; i++) {
        if ((!c->cluster && h_keeld_init(&c->k[i]) != 0) ||
            boot_id_init(f_k(c, i)) != 0 || node_start(c, i, 0) != 0) {
            return -1;
        }
    }
    /* nats-server's /routez counts routes its own way: for it the stream
     * create's bounded retries wait for the cluster instead. */
    if (c->cluster && !c->cfg.nats_server &&
        h_netns_wait_mesh(&c->net, F_RECOVERY_MS_MAX) != 0) {
        fprintf(stderr, "keel-faults: the cluster did not form a mesh\n");
        return -1;
    }
    f_urls_from(c, 0, urls, len);
    return 0;
}

/* Stop every node cleanly, dump the stream's peers; views[] gets one
 * view per peer (the checker compares them). Returns the view count. */
static int stop_and_dump(struct f_run_ctx *c, struct f_view *views)
{
    int nv = 0;
    for (int i = 0; c->cfg.urls == NULL && i < c->cfg.nodes; i++) {
        struct h_keeld *k = f_k(c, i);
        bool down = k->pid <= 0; /* refused to restart */
        if (k->pid > 0) {
            int st = c->cluster ? h_netns_node_stop(&c->net, i)
                                : h_keeld_stop(k, NULL);
            if (st != 0 && !c->cfg.nats_server) {
                fprintf(stderr, "keel-faults: node %d did not stop cleanly\n",
                        i);
                c->unclean_stops++; /* crashed or hung: fails the run */
            }
        }
        if (!c->cfg.nats_server && c->host[i]) {
            views[nv].lagging = down && c->cluster;
            (void)f_dump_node(c, i, &views[nv++]);
        }
    }
    return nv;
}

static int run(struct f_run_ctx *c)
{
    char urls[512] = "";
    struct f_view read = {0};
    struct f_view views[F_NODES_MAX];
    struct f_result r;
    memset(views, 0, sizeof views);
    if (c->cfg.urls == NULL && start_all(c, urls, sizeof urls) != 0) {
        if (c->cluster) {
            c->net.keep_dirs = true; /* the logs say why */
            for (int i = 0; i < c->cfg.nodes; i++) {
                printf("keel-faults: node %d log in %s\n", i,
                       c->net.node[i].k.log_path);
            }
            (void)h_netns_cleanup(&c->net);
        }
        return 1;
    }
    const char *u = c->cfg.urls != NULL ? c->cfg.urls : urls;
    int rv = traffic(c, u);

    for (int tries = 0;
         rv == 0 && (c->restart_failed == 0 || c->cluster) && tries < 30;
         tries++) {
        memset(&read, 0, sizeof read);
        if (f_read_stream(c, u, &read) == 0) {
            break;
        }
        pause_ms(500); /* stream info not served yet: retry, bounded */
    }
    struct f_mirror_result mr = {.pass = true};
    if (c->cfg.mirror && (rv != 0 || f_mirror_check(c, u, &read, &mr) != 0)) {
        mr.pass = false;
    }
    struct f_agg_result ar = {.pass = true};
    if (c->cfg.aggregate && (rv != 0 || f_agg_check(c, u, &read, &ar) != 0)) {
        ar.pass = false;
    }
    int nv = stop_and_dump(c, views);
    f_check(c, &read, views, nv, &r);
    /* A run that could not run fails, and so does a keeld that crashed or
     * hung on SIGTERM (its log says which). */
    r.pass = r.pass && rv == 0 && c->unclean_stops == 0 &&
             c->member_failed == 0 && mr.pass && ar.pass;
    bool keep = !r.pass || getenv("KEEL_FAULTS_KEEP") != NULL;
    row(c, &r, &read, views, nv);
    if (c->cfg.mirror) {
        printf("keel-faults: %s %s caught_up=%s catchup_ms=%lld "
               "read=%llu missing=%llu mismatch=%llu dup=%llu alien=%llu "
               "leader_off_origin=%s [%s]\n",
               c->cfg.sources ? "sources" : "mirror", mr.pass ? "PASS" : "FAIL",
               mr.caught_up ? "yes" : "no", mr.catchup_ms,
               (unsigned long long)mr.read, (unsigned long long)mr.missing,
               (unsigned long long)mr.mismatch, (unsigned long long)mr.dup,
               (unsigned long long)mr.alien, mr.leader_off ? "yes" : "no",
               mr.placement);
    }
    if (c->cfg.aggregate) {
        printf("keel-faults: aggregate %s caught_up=%s catchup_ms=%lld "
               "read=%llu missing=%llu mismatch=%llu dup=%llu reorder=%llu "
               "alien=%llu bad=%llu [%s]\n",
               ar.pass ? "PASS" : "FAIL", ar.caught_up ? "yes" : "no",
               ar.catchup_ms, (unsigned long long)ar.read,
               (unsigned long long)ar.missing, (unsigned long long)ar.mismatch,
               (unsigned long long)ar.dup, (unsigned long long)ar.reorder,
               (unsigned long long)ar.alien, (unsigned long long)ar.bad,
               ar.placement);
    }
    for (int i = 0; c->cfg.urls == NULL && i < c->cfg.nodes; i++) {
        if (keep) {
            printf("keel-faults: node %d data kept in %s\n", i, f_k(c, i)->dir);
        } else if (!c->cluster) {
            h_keeld_cleanup(&c->k[i]);
        }
    }
    if (c->cluster) {
        c->net.keep_dirs = keep;
        (void)h_netns_cleanup(&c->net);
    }
    for (int i = 0; i < nv; i++) {
        f_view_free(&views[i]);
    }
    f_view_free(&read);
    return rv == 0 && r.pass ? 0 : 1;
}

int main(int argc, char **argv)
{
    static struct f_run_ctx c;
    if (parse(argc, argv, &c.cfg) != 0) {
        return usage();
    }
    c.nem = nemesis_named(c.cfg.nemesis);
    c.run_nem = c.nem;
    c.shim = c.nem != NULL && c.nem->power != NULL;
    c.cfg.keel = getenv("KEEL");
    c.cfg.pl_shim = getenv("KEEL_PL_SHIM");
    c.cfg.pl_tool = getenv("KEEL_PL_TOOL");
    if (c.nem != NULL && c.nem->power != NULL &&
        (c.cfg.pl_shim == NULL || c.cfg.pl_tool == NULL)) {
        fprintf(stderr, "keel-faults: %s needs KEEL_PL_SHIM and KEEL_PL_TOOL\n",
                c.nem->name);
        return 2;
    }
    if (c.nem == NULL ||
        (c.cfg.urls == NULL && !c.cfg.nats_server && c.cfg.keel == NULL)) {
        return usage();
    }
    c.rng = c.cfg.seed;
    pthread_mutex_init(&c.mu, NULL);
    c.att = calloc(F_SEQS_MAX, sizeof *c.att);
    c.consumer_seen = calloc(F_SEQS_MAX, 1);
    c.destroyed = calloc(F_SEQS_MAX, 1);
    if (c.att == NULL || c.consumer_seen == NULL || c.destroyed == NULL) {
        return 1;
    }
    if (is_member(c.nem) && (c.cfg.nodes < 5 || c.cfg.replicas >= c.cfg.nodes ||
                             c.cfg.nats_server || c.cfg.urls != NULL)) {
        fprintf(stderr, "keel-faults: member needs keeld --nodes 5 and "
                        "--replicas 3 (a free node for a moved replica)\n");
        return 2;
    }
    if (is_mixed(c.nem) &&
        (c.cfg.nodes < 3 || c.cfg.nats_server || c.cfg.urls != NULL)) {
        fprintf(stderr, "keel-faults: mixed needs keeld --nodes 3 or 5\n");
        return 2;
    }
    /* A soak spreads each publisher's values over its duration (90 % of
     * what one publisher may hold, the rest for the drain's retries). */
    if (c.cfg.duration_s > 0) {
        c.pace_us = (long)((long long)c.cfg.duration_s * 1000000LL /
                           (F_PER_PUB_MAX / 10 * 9));
    }
    if (c.cfg.aggregate && c.cfg.sources) {
        fprintf(stderr, "keel-faults: --aggregate sources the mirror: "
                        "leave out --sources\n");
        return 2;
    }
    if (c.cfg.mirror &&
        (c.cfg.nodes < 3 || c.cfg.nats_server || c.cfg.urls != NULL)) {
        fprintf(stderr, "keel-faults: --mirror needs keeld --nodes 3 or 5\n");
        return 2;
    }
    if (c.nem->cut != F_CUT_NONE && c.cfg.nodes < 3) {
        fprintf(stderr, "keel-faults: %s needs --nodes 3 or 5\n", c.nem->name);
        return 2;
    }
    printf("keel-faults: nemesis=%s policy=%s nodes=%d replicas=%d seed=%llu "
           "(repeat with --seed)\n",
           c.nem->name, c.cfg.policy, c.cfg.nodes, c.cfg.replicas,
           (unsigned long long)c.cfg.seed);
    int rv = run(&c);
    free(c.att);
    free(c.consumer_seen);
    free(c.destroyed);
    nats_Close();
    return rv;
}
