/* keel-faults: one fault-injection run per invocation (see faults.h and
 * docs/faults.md). Prints one table row and exits 0 when the run passes
 * (0 lost, 0 divergent), 1 when it does not, 2 on a usage error.
 *
 *   keel-faults --nemesis kill|stop|bitflip|truncate|meta|snapshot|none
 *               [--nodes 1] [--policy group|always] [--pubs 3]
 *               [--rounds 6] [--round-ms 1500] [--seed N]
 *               [--urls nats://a,nats://b]   (an external cluster, e.g.
 *                                             nats-server: no nemesis)
 *               [--server nats-server]       (run nats-server -js instead
 *                                             of keeld: no dump)
 * Environment: KEELD (keeld binary), KEEL (keel binary, for store dump).
 */
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

static const struct f_nemesis nemeses[] = {
    {"none", F_EXPECT_ALL, NULL, false, NULL},
    {"kill", F_EXPECT_ALL, NULL, false, NULL},
    {"stop", F_EXPECT_ALL, NULL, true, NULL},
    {"bitflip", F_EXPECT_FLAGGED, f_inject_bitflip, false, NULL},
    {"truncate", F_EXPECT_FLAGGED, f_inject_truncate, false, NULL},
    {"meta", F_EXPECT_FLAGGED, f_inject_meta, false, NULL},
    {"snapshot", F_EXPECT_FLAGGED, f_inject_snapshot, false, NULL},
    {"powerloss", F_EXPECT_ALL, NULL, false, "drop"},
    {"powerloss-reorder", F_EXPECT_ALL, NULL, false, "reorder"},
};

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

static int usage(void)
{
    fprintf(stderr, "usage: keel-faults --nemesis "
                    "kill|stop|bitflip|truncate|meta|snapshot|none "
                    "[--nodes N] [--policy P] [--pubs N] [--rounds N] "
                    "[--round-ms MS] [--seed N] [--urls LIST] "
                    "[--server keeld|nats-server]\n");
    return 2;
}

static int parse(int argc, char **argv, struct f_config *cfg)
{
    *cfg = (struct f_config){.nemesis = "kill",
                             .policy = "group",
                             .nodes = 1,
                             .pubs = 3,
                             .rounds = 6,
                             .round_ms = 1500};
    cfg->seed = (uint64_t)time(NULL) ^ (uint64_t)getpid();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-v") == 0) {
            cfg->verbose = true;
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
        } else if (strcmp(a, "--pubs") == 0) {
            cfg->pubs = atoi(v);
        } else if (strcmp(a, "--rounds") == 0) {
            cfg->rounds = atoi(v);
        } else if (strcmp(a, "--round-ms") == 0) {
            cfg->round_ms = atoi(v);
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
    bool ok = cfg->nodes == 1 && cfg->pubs >= 1 && cfg->pubs <= F_PUBS_MAX &&
              cfg->rounds >= 0 && cfg->rounds <= 1000 && cfg->round_ms > 0;
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

/* The shim's environment for node i (set around the spawn only). */
static void power_env(struct f_run_ctx *c, int i, bool on)
{
    char path[600];
    if (!on) {
        unsetenv("LD_PRELOAD");
        unsetenv("KEEL_PL_DIR");
        unsetenv("KEEL_PL_JOURNAL");
        unsetenv("KEEL_PL_BOOT_ID");
        return;
    }
    setenv("LD_PRELOAD", c->cfg.pl_shim, 1);
    setenv("KEEL_PL_DIR", c->k[i].data_dir, 1);
    snprintf(path, sizeof path, "%s/pl.journal", c->k[i].dir);
    setenv("KEEL_PL_JOURNAL", path, 1);
    snprintf(path, sizeof path, "%s/boot_id", c->k[i].dir);
    setenv("KEEL_PL_BOOT_ID", path, 1);
}

static int node_start(struct f_run_ctx *c, int i, int port)
{
    /* The snapshot nemesis needs snapshot files: take them often. */
    bool snap = strcmp(c->nem->name, "snapshot") == 0;
    const char *extra[] = {"--fsync", c->cfg.policy,
                           snap ? "--snapshot_entries" : NULL, "500", NULL};
    if (c->cfg.nats_server) {
        power_env(c, i, c->nem->power != NULL);
        int rv = nats_start(c, i, port);
        power_env(c, i, false);
        return rv;
    }
    power_env(c, i, c->nem->power != NULL);
    int rv = h_keeld_start(&c->k[i], port, false, extra);
    power_env(c, i, false);
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
             c->cfg.pl_tool, c->k[i].dir, c->nem->power,
             (unsigned long long)f_rand(c), c->k[i].dir);
    c->injured++;
    return system(cmd) == 0 ? 0 : -1;
}

/* One nemesis event on node i: pause, or kill -9 (+ injury) + restart on
 * the same port, so clients reconnect to the same address. */
static int event(struct f_run_ctx *c, int i)
{
    struct h_keeld *k = &c->k[i];
    int status = 0;
    if (k->pid <= 0) {
        return 0; /* refused to restart earlier: never signal pid <= 0 */
    }
    if (c->nem->stop) {
        ASSERT_PID(k->pid);
        kill(k->pid, SIGSTOP);
        pause_ms(200 + (long)(f_rand(c) % 1500));
        kill(k->pid, SIGCONT);
        return 0;
    }
    if (strcmp(c->nem->name, "none") == 0) {
        return 0;
    }
    int port = k->port;
    ASSERT_PID(k->pid);
    kill(k->pid, SIGKILL);
    if (h_wait_pid(k->pid, H_STOP_TIMEOUT_MS, &status) != 0) {
        return -1;
    }
    k->pid = 0;
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
    k->pid = 0;
    c->restart_failed++;
    return 0;
}

static void row(const struct f_run_ctx *c, const struct f_result *r,
                const struct f_view *nodes)
{
    printf("| %-8s | %-6s | %d | %6llu | %6llu | %5llu | %5llu | %4llu | %5llu "
           "| %4llu | %3llu | %6lld | %-4s | %s |\n",
           c->nem->name, c->cfg.nats_server ? "nats" : c->cfg.policy,
           c->cfg.nodes, (unsigned long long)r->attempts,
           (unsigned long long)r->acked, (unsigned long long)r->indet,
           (unsigned long long)r->failed, (unsigned long long)r->lost,
           (unsigned long long)r->unavailable, (unsigned long long)r->divergent,
           (unsigned long long)r->dup, c->recovery_ms,
           r->pass ? "PASS" : "FAIL",
           c->cfg.urls != NULL ? "external" : nodes[0].flags);
    printf("keel-faults: nemesis=%s seed=%llu injuries=%d [%s] read=%llu "
           "misplaced=%llu never_published=%llu on_disk_missing=%llu "
           "consumed=%llu consumer_missing=%llu restart_failed=%d\n",
           c->nem->name, (unsigned long long)c->cfg.seed, c->injured,
           c->injury_log, (unsigned long long)r->read_total,
           (unsigned long long)r->misplaced,
           (unsigned long long)r->never_published,
           (unsigned long long)r->on_disk_missing,
           (unsigned long long)c->consumed,
           (unsigned long long)r->consumer_missing, c->restart_failed);
}

/* Traffic with nemesis events, then heal and measure recovery. */
static int traffic(struct f_run_ctx *c, const char *urls)
{
    pthread_t pubs[F_PUBS_MAX];
    pthread_t cons;
    if (f_stream_create(c, urls) != 0) {
        fprintf(stderr, "keel-faults: stream not created at %s\n", urls);
        return -1;
    }
    if (f_consumer_start(c, &cons) != 0 || f_pubs_start(c, pubs) != 0) {
        return -1;
    }
    int rv = 0;
    for (int r = 0; r < c->cfg.rounds && rv == 0; r++) {
        pause_ms(c->cfg.round_ms / 2 +
                 (long)(f_rand(c) % (uint64_t)c->cfg.round_ms));
        if (c->cfg.urls == NULL) {
            rv = event(c, (int)(f_rand(c) % (uint64_t)c->cfg.nodes));
        }
    }
    pause_ms(c->cfg.round_ms / 2);
    f_pubs_stop(c, pubs);
    c->recovery_ms = c->restart_failed > 0 ? -1 : f_wait_recovery(c, urls);
    pause_ms(500); /* let the consumer catch up a little (info only) */
    f_consumer_stop(c, cons);
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

static int run(struct f_run_ctx *c)
{
    char urls[512] = "";
    struct f_view read = {0};
    struct f_view nodes[F_NODES_MAX];
    struct f_result r;
    memset(nodes, 0, sizeof nodes);
    for (int i = 0; c->cfg.urls == NULL && i < c->cfg.nodes; i++) {
        if (h_keeld_init(&c->k[i]) != 0 || boot_id_init(&c->k[i]) != 0 ||
            node_start(c, i, 0) != 0) {
            return -1;
        }
        snprintf(urls + strlen(urls), sizeof urls - strlen(urls), "%s%s",
                 i > 0 ? "," : "", c->k[i].url);
    }
    const char *u = c->cfg.urls != NULL ? c->cfg.urls : urls;
    int rv = traffic(c, u);
    for (int tries = 0; rv == 0 && c->restart_failed == 0 && tries < 30;
         tries++) {
        memset(&read, 0, sizeof read);
        if (f_read_stream(c, u, &read) == 0) {
            break;
        }
        pause_ms(500); /* stream info not served yet: retry, bounded */
    }
    for (int i = 0; c->cfg.urls == NULL && i < c->cfg.nodes; i++) {
        if (h_keeld_stop(&c->k[i], NULL) != 0 && !c->cfg.nats_server) {
            fprintf(stderr, "keel-faults: node %d did not stop cleanly\n", i);
        }
        if (!c->cfg.nats_server) {
            (void)f_dump_node(c, i, &nodes[i]);
        }
    }
    f_check(c, &read, nodes,
            c->cfg.urls == NULL && !c->cfg.nats_server ? c->cfg.nodes : 0, &r);
    row(c, &r, nodes);
    for (int i = 0; c->cfg.urls == NULL && i < c->cfg.nodes; i++) {
        if (r.pass) {
            h_keeld_cleanup(&c->k[i]);
        } else {
            printf("keel-faults: node %d data kept in %s\n", i, c->k[i].dir);
        }
        f_view_free(&nodes[i]);
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
    for (size_t i = 0; i < sizeof nemeses / sizeof nemeses[0]; i++) {
        if (strcmp(nemeses[i].name, c.cfg.nemesis) == 0) {
            c.nem = &nemeses[i];
        }
    }
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
    printf("keel-faults: nemesis=%s policy=%s nodes=%d seed=%llu (repeat "
           "with --seed)\n",
           c.nem->name, c.cfg.policy, c.cfg.nodes,
           (unsigned long long)c.cfg.seed);
    int rv = run(&c);
    free(c.att);
    free(c.consumer_seen);
    free(c.destroyed);
    nats_Close();
    return rv;
}
