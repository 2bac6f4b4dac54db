/* kill -9 crash safety of the replica (suite 'integration'): a child
 * proposes entries and reports each applied (committed) index with its
 * payload on a pipe; the parent SIGKILLs it after a random number of
 * reports, then a fresh child reopens the store and verifies every index
 * ever reported is present with its payload. 20 rounds on one data
 * directory (each round also replays the previous rounds' log), with a
 * printed seed (KEEL_SEED=<n> to repeat). */
#include <errno.h>
#include <setjmp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include "test_srv_replica_common.h"

#define CR_ROUNDS 20
#define CR_REPORTS_MAX 400
#define CR_WINDOW 16
#define CR_REPORT_WAIT_MS 30000 /* one report's bound (a loaded machine) */

struct cr_report {
    uint64_t index;
    char payload[24];
};

struct cr_child {
    struct tr *t;
    int fd;
    uint32_t round;
    uint64_t sent, acked;
};

static struct cr_child cr;

static void cr_pump(void)
{
    char err[KEEL_ERRMSG_MAX];
    while (cr.sent - cr.acked < CR_WINDOW) {
        char p[24];
        memset(p, 0, sizeof(p));
        snprintf(p, sizeof(p), "r%u-%llu", cr.round,
                 (unsigned long long)cr.sent);
        if (replica_propose(cr.t->r, RAFT_ENTRY_NORMAL, p, sizeof(p), 1, err) !=
            0) {
            return;
        }
        cr.sent++;
    }
}

static void cr_apply(struct replica *r, uint64_t index, uint64_t term,
                     uint8_t type, const void *payload, uint32_t len,
                     uint64_t ctx, void *arg)
{
    (void)r, (void)term, (void)arg;
    if (type != RAFT_ENTRY_NORMAL || ctx == 0 || len != 24) {
        return; /* replayed entries are not new acks */
    }
    struct cr_report rep = {.index = index};
    memcpy(rep.payload, payload, 24);
    if (write(cr.fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) {
        _exit(3);
    }
    cr.acked++;
    cr_pump();
}

static void cr_role(struct replica *r, uint8_t role, raft_node leader,
                    void *arg)
{
    (void)r, (void)leader, (void)arg;
    if (role == RAFT_LEADER) {
        cr_pump();
    }
}

static void cr_run_child(struct tr *t, int fd, uint32_t round)
{
    cr = (struct cr_child){.t = t, .fd = fd, .round = round};
    uv_loop_init(&t->loop);
    char err[KEEL_ERRMSG_MAX];
    if (replica_host_create(&t->loop, &t->host, err) != 0 ||
        tr_store_open(t) != 0) {
        _exit(4);
    }
    replica_host_attach(t->host, t->s);
    struct replica_callbacks cbs = {
        .apply = cr_apply, .role_changed = cr_role, .arg = t};
    t->opt.incarnation = replica_incarnation_of(t->node.incarnation);
    t->cfg.n = 1;
    t->cfg.servers[0] = (struct raft_server){1, t->opt.incarnation, 1};
    t->opt.self = 1;
    t->opt.bootstrap = &t->cfg;
    t->opt.election_timeout_ms = 20;
    if (replica_open(t->host, &t->gid, &t->opt, &cbs, &t->r, err) != 0) {
        fprintf(stderr, "child: %s\n", err);
        _exit(5);
    }
    for (;;) {
        uv_run(&t->loop, UV_RUN_ONCE); /* until the parent kills us */
    }
}

static int cr_verify_child(struct tr *t, const struct cr_report *reps,
                           uint32_t n)
{
    char err[KEEL_ERRMSG_MAX];
    struct store_config sc = {
        .data_dir = t->dir, .no_prealloc = true, .segment_bytes = 1024 * 1024};
    struct store *s = NULL;
    struct store_node_report nr;
    struct store_group *g = NULL;
    struct store_recovery rec;
    struct store_fsync pol = {.policy = STORE_FSYNC_GROUP};
    if (store_open(&sc, &s, &nr, err) != 0 ||
        store_group_open(s, &t->gid, &pol, &g, &rec, err) != 0) {
        fprintf(stderr, "verify: %s\n", err);
        return 1;
    }
    int bad = 0;
    for (uint32_t i = 0; i < n && bad < 5; i++) {
        struct store_entry e;
        if (store_read(g, reps[i].index, &e, err) != 0) {
            fprintf(stderr, "index %llu lost: %s\n",
                    (unsigned long long)reps[i].index, err);
            bad++;
            continue;
        }
        if (e.len != 24 || memcmp(e.payload, reps[i].payload, 24) != 0) {
            fprintf(stderr, "index %llu has another payload\n",
                    (unsigned long long)reps[i].index);
            bad++;
        }
        store_entry_free(&e);
    }
    store_close(s, false);
    return bad == 0 ? 0 : 1;
}

static int setup(void **state)
{
    struct tr *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    snprintf(t->dir, sizeof(t->dir), "/tmp/keel-replica-crash-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    memset(t->gid.b, 0x5a, sizeof(t->gid.b));
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tr *t = *state;
    nftw(t->dir, tr_rm, 16, FTW_DEPTH | FTW_PHYS);
    free(t);
    return 0;
}

/* One round: run a proposer child, kill it after `want` reports, return
 * how many reports were read into reps. */
static uint32_t cr_round(struct tr *t, uint32_t round, uint32_t want,
                         struct cr_report *reps)
{
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        cr_run_child(t, fds[1], round);
    }
    close(fds[1]);
    uint32_t n = 0;
    while (n < want) {
        /* Bounded: a child that stops reporting (never leads, hangs) ends
         * the round with what it reported, and the verify still runs. */
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pfd, 1, CR_REPORT_WAIT_MS);
        if (pr == 0) {
            fprintf(stderr, "round %u: no report for %d ms after %u\n", round,
                    CR_REPORT_WAIT_MS, n);
            break;
        }
        if (pr < 0) {
            continue; /* EINTR */
        }
        ssize_t k = read(fds[0], &reps[n], sizeof(reps[n]));
        if (k == (ssize_t)sizeof(reps[n])) {
            n++;
        } else if (k <= 0 && errno != EINTR) {
            break; /* the child died early: the verify still runs */
        }
    }
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    close(fds[0]);
    return n;
}

static void every_committed_index_survives_kill_9(void **state)
{
    struct tr *t = *state;
    const char *env = getenv("KEEL_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 10)
                        : (unsigned)time(NULL) ^ (unsigned)getpid();
    printf("crash test seed %u (KEEL_SEED=%u to repeat)\n", seed, seed);
    srand(seed);
    static struct cr_report reps[CR_ROUNDS * CR_REPORTS_MAX];
    uint32_t total = 0;
    for (uint32_t round = 0; round < CR_ROUNDS; round++) {
        uint32_t want = 1 + (uint32_t)rand() % CR_REPORTS_MAX;
        uint32_t got = cr_round(t, round, want, &reps[total]);
        assert_true(got > 0);
        total += got;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            _exit(cr_verify_child(t, reps, total));
        }
        int st = 0;
        waitpid(pid, &st, 0);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    printf("%u committed indexes verified over %u kills\n", total, CR_ROUNDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(every_committed_index_survives_kill_9,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
