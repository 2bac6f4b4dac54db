/* keel-sim: run the deterministic Raft simulation over many seeds.
 *
 *   keel-sim --seeds N [--start S]      soak: seeds S..S+N-1 (default 1..100)
 *   keel-sim --seed S                   reproduce one seed, with its trace
 *   keel-sim --mutate NAME --expect-violation --seeds N
 *                                       prove the simulator catches a broken
 *                                       rule within N seeds
 *   --nodes 3|5 (default: alternate), --duration MS (safety phase)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

struct mutation {
    const char *name;
    uint32_t bits;
    const char *rule;
};

static const struct mutation MUTATIONS[] = {
    {"leader-counts-unsynced", RAFT_MUT_LEADER_COUNTS_UNSYNCED,
     "the leader counts itself only up to its accepted persisted index"},
    {"persisted-by-index", RAFT_MUT_PERSISTED_BY_INDEX,
     "persisted notifications are matched by (index, term)"},
    {"term-not-synced", SIM_MUT_TERM_NOT_SYNCED,
     "the term is synced before any message in it"},
    {"truncation-not-durable", SIM_MUT_TRUNC_NOT_DURABLE,
     "conflict truncation is durable with the new entries"},
    {"marker-torn", SIM_MUT_MARKER_TORN,
     "damage below a damaged newest marker is faulty, never a torn tail"},
    {"commit-prev-term", RAFT_MUT_COMMIT_PREV_TERM,
     "commit only by counting an entry of the current term"},
    {"config-early", RAFT_MUT_CONFIG_EARLY,
     "a configuration change only after a current-term commit, one at a "
     "time"},
    {"no-incarnation", RAFT_MUT_NO_INCARNATION,
     "voters are named by (node, incarnation)"},
    {"faulty-match-above", RAFT_MUT_FAULTY_MATCH_ABOVE,
     "a faulty node reports match below its first faulty index"},
    {"faulty-leader-counts", RAFT_MUT_FAULTY_LEADER_COUNTS,
     "a faulty leader counts itself only below its fault"},
    {"faulty-answers-none", RAFT_MUT_FAULTY_ANSWERS_NONE,
     "a faulty node answers \"faulty at i\", never \"none\""},
    {"discard-unfenced", RAFT_MUT_DISCARD_UNFENCED,
     "a discard counts only answers in a fresh term adopted durably"},
    {"amnesiac-votes", RAFT_MUT_AMNESIAC_VOTES,
     "an amnesiac node grants no vote and no pre-vote"},
    {"amnesia-at-commit", RAFT_MUT_AMNESIA_AT_COMMIT,
     "amnesia ends at the leader's last index, not its commit"},
    {"truncate-faulty", RAFT_MUT_TRUNCATE_FAULTY,
     "a faulty record is repaired or discarded by rule 1, never truncated "
     "on sight"},
};

struct scenario {
    const char *name;
    uint32_t id;
    uint32_t nodes;
};

static const struct scenario SCENARIOS[] = {
    {"wipe-vote", SIM_SCENARIO_WIPE_VOTE, 3},
    {"figure8", SIM_SCENARIO_FIGURE8, 5},
    {"faulty-none", SIM_SCENARIO_FAULTY_NONE, 5},
    {"discard-race", SIM_SCENARIO_DISCARD_RACE, 5},
    {"amnesia-commit", SIM_SCENARIO_AMNESIA_COMMIT, 3},
    {"recover", SIM_SCENARIO_RECOVER, 3},
    {"power-all", SIM_SCENARIO_POWER_ALL, 0},
    {"marker-record", SIM_SCENARIO_MARKER_RECORD, 3},
};

/* A core ASSERT aborts mid-seed: still say which seed, and show its trace.
 * (Not async-signal-safe; the process is dying anyway.) */
static struct sim *g_sim;
static uint64_t g_seed;
static const struct mutation *g_mut;

static void on_abort(int sig)
{
    (void)sig;
    if (g_sim != NULL) {
        sim_print_trace(g_sim);
    }
    printf("FAIL seed %llu (%u nodes%s%s): assertion failed in the core\n"
           "reproduce: tools/dev sim --seed %llu --nodes %u%s%s\n",
           (unsigned long long)g_seed, g_sim ? g_sim->p.n_nodes : 0,
           g_mut ? ", mutation " : "", g_mut ? g_mut->name : "",
           (unsigned long long)g_seed, g_sim ? g_sim->p.n_nodes : 0,
           g_mut ? " --mutate " : "", g_mut ? g_mut->name : "");
    fflush(stdout);
    _exit(1);
}

static void usage(void)
{
    fprintf(stderr, "usage: keel-sim [--seeds N] [--start S] [--seed S] "
                    "[--nodes 3|5] [--duration MS] [--mutate NAME "
                    "[--expect-violation]] [--scenario NAME] "
                    "[--storage-faults] [--quiet]\nmutations:");
    for (size_t i = 0; i < sizeof MUTATIONS / sizeof MUTATIONS[0]; i++) {
        fprintf(stderr, " %s", MUTATIONS[i].name);
    }
    fprintf(stderr, "\nscenarios:");
    for (size_t i = 0; i < sizeof SCENARIOS / sizeof SCENARIOS[0]; i++) {
        fprintf(stderr, " %s", SCENARIOS[i].name);
    }
    fprintf(stderr, "\n");
    exit(2);
}

struct options {
    uint64_t start;
    uint64_t seeds;
    uint32_t nodes;
    bool one;
    bool expect;
    const struct mutation *mut;
    struct sim_params p;
};

static const struct mutation *find_mutation(const char *name)
{
    for (size_t k = 0; k < sizeof MUTATIONS / sizeof MUTATIONS[0]; k++) {
        if (strcmp(MUTATIONS[k].name, name) == 0) {
            return &MUTATIONS[k];
        }
    }
    usage();
    return NULL;
}

static void find_scenario(const char *name, struct options *o)
{
    for (size_t k = 0; k < sizeof SCENARIOS / sizeof SCENARIOS[0]; k++) {
        if (strcmp(SCENARIOS[k].name, name) == 0) {
            o->p.scenario = SCENARIOS[k].id;
            o->nodes = SCENARIOS[k].nodes;
            return;
        }
    }
    usage();
}

static void parse(int argc, char **argv, struct options *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--expect-violation") == 0) {
            o->expect = true;
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            o->p.quiet = true;
            continue;
        }
        if (strcmp(a, "--storage-faults") == 0) {
            o->p.storage_faults = true;
            continue;
        }
        if (v == NULL) {
            usage();
        }
        i++;
        if (strcmp(a, "--seeds") == 0) {
            o->seeds = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--start") == 0) {
            o->start = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--seed") == 0) {
            o->start = strtoull(v, NULL, 10);
            o->seeds = 1;
            o->one = true;
        } else if (strcmp(a, "--nodes") == 0) {
            o->nodes = (uint32_t)atoi(v);
        } else if (strcmp(a, "--duration") == 0) {
            o->p.duration_ms = strtoull(v, NULL, 10);
        } else if (strcmp(a, "--mutate") == 0) {
            o->mut = find_mutation(v);
        } else if (strcmp(a, "--scenario") == 0) {
            find_scenario(v, o);
        } else {
            usage();
        }
    }
}

/* Sum one seed's counters into the totals (every field is a uint64_t). */
static void stats_add(struct sim_stats *t, const struct sim_stats *one)
{
    uint64_t *a = (uint64_t *)t;
    const uint64_t *b = (const uint64_t *)one;
    _Static_assert(sizeof *t % sizeof(uint64_t) == 0, "counters only");
    for (size_t k = 0; k < sizeof *t / sizeof(uint64_t); k++) {
        a[k] += b[k];
    }
}

static void print_storage(const struct sim_stats *t)
{
    printf("storage faults: %llu bit flips, %llu records repaired, %llu "
           "lost log tails (amnesia)\n",
           (unsigned long long)t->flips, (unsigned long long)t->repairs,
           (unsigned long long)t->amnesias);
    printf("storage faults: %llu whole-cluster power losses, %llu records "
           "lost to reordered writeback, %llu torn tails discarded, %llu "
           "damaged sync markers, %llu discard rounds decided\n",
           (unsigned long long)t->cluster_power_losses,
           (unsigned long long)t->holes, (unsigned long long)t->torn,
           (unsigned long long)t->marker_flips,
           (unsigned long long)t->discards);
}

static void print_faults(const struct sim_stats *t)
{
    printf("faults: %llu crashes, %llu power losses, %llu wiped disks, %llu "
           "partitions; %llu elections won, %llu conflict truncations, %llu "
           "membership changes, %llu transfers, %llu snapshots taken, %llu "
           "installed, %llu refused\n",
           (unsigned long long)t->crashes, (unsigned long long)t->power_losses,
           (unsigned long long)t->wipes, (unsigned long long)t->partitions,
           (unsigned long long)t->leaders, (unsigned long long)t->truncations,
           (unsigned long long)t->changes, (unsigned long long)t->transfers,
           (unsigned long long)t->snapshots, (unsigned long long)t->installs,
           (unsigned long long)t->refusals);
}

/* A seed violated an invariant: with --expect-violation that is the
 * mutation caught (exit 0), otherwise a failure with its trace (exit 1). */
static int seed_failed(struct sim *s, const struct mutation *mut, bool expect,
                       bool one, const struct sim_params *p, uint64_t k)
{
    int rv = 1;
    if (expect) {
        printf("mutation %s caught after %llu seeds (seed %llu, %u nodes): "
               "%s\n",
               mut->name, (unsigned long long)(k + 1),
               (unsigned long long)s->seed, p->n_nodes, s->violation);
        if (one) {
            sim_print_trace(s);
        }
        rv = 0;
    } else {
        sim_print_trace(s);
        printf("FAIL seed %llu (%u nodes%s%s): %s\n",
               (unsigned long long)s->seed, p->n_nodes,
               mut ? ", mutation " : "", mut ? mut->name : "", s->violation);
        const char *sc = NULL;
        for (size_t j = 0; j < sizeof SCENARIOS / sizeof SCENARIOS[0]; j++) {
            sc = SCENARIOS[j].id == p->scenario ? SCENARIOS[j].name : sc;
        }
        printf("reproduce: tools/dev sim --seed %llu --nodes %u%s%s%s%s%s\n",
               (unsigned long long)s->seed, p->n_nodes, mut ? " --mutate " : "",
               mut ? mut->name : "",
               p->storage_faults ? " --storage-faults" : "",
               sc ? " --scenario " : "", sc ? sc : "");
    }
    sim_free(s);
    sim_destroy(s);
    return rv;
}

int main(int argc, char **argv)
{
    struct options o = {
        .start = 1, .seeds = 100, .p = {.duration_ms = 3000, .heal_ms = 5000}};
    parse(argc, argv, &o);
    uint64_t start = o.start, seeds = o.seeds;
    uint32_t nodes = o.nodes;
    bool one = o.one, expect = o.expect;
    const struct mutation *mut = o.mut;
    struct sim_params p = o.p;
    if ((nodes != 0 && nodes != 3 && nodes != 5) || (expect && mut == NULL)) {
        usage();
    }
    p.mutations = mut != NULL ? mut->bits : 0;

    static struct sim s;
    g_sim = &s;
    g_mut = mut;
    signal(SIGABRT, on_abort);
    uint64_t sim_ms = 0, steps = 0, committed = 0;
    struct sim_stats t = {0};
    for (uint64_t k = 0; k < seeds; k++) {
        uint64_t seed = start + k;
        p.n_nodes = nodes != 0 ? nodes : (seed % 2 == 0 ? 3 : 5);
        g_seed = seed;
        int rv = sim_run(&s, seed, &p);
        sim_ms += s.now;
        steps += s.steps;
        committed += s.committed_len;
        stats_add(&t, &s.stats);
        if (rv != 0) {
            return seed_failed(&s, mut, expect, one, &p, k);
        }
        if (one && !p.quiet) {
            sim_print_trace(&s);
        }
        sim_free(&s);
    }
    sim_destroy(&s);
    if (p.storage_faults || p.scenario >= SIM_SCENARIO_FAULTY_NONE) {
        print_storage(&t);
    }
    if (expect) {
        printf("mutation %s NOT caught in %llu seeds (rule: %s)\n", mut->name,
               (unsigned long long)seeds, mut->rule);
        return 1;
    }
    printf("%llu seeds passed (%llu..%llu): %.3f simulated hours, %llu steps, "
           "%llu entries committed\n",
           (unsigned long long)seeds, (unsigned long long)start,
           (unsigned long long)(start + seeds - 1), (double)sim_ms / 3.6e6,
           (unsigned long long)steps, (unsigned long long)committed);
    print_faults(&t);
    return 0;
}
