/* Placement choice and the meta bootstrap decision (srv_js_meta_place.c):
 * pure functions of clustered JetStream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "keel/error.h"
#include "srv_js_cluster.h"

struct fx {
    struct srv_jsc_member m[5];
    uint32_t hosted[5];
    char seeds[SRV_JSC_SEEDS_BYTES];
    struct srv_jsc_report self;
    struct srv_jsc_report peers[4];
    struct raft_config cfg;
    char why[SRV_JSC_WHY_BYTES];
};

static int setup(void **state)
{
    static struct fx f;
    char err[KEEL_ERRMSG_MAX];
    memset(&f, 0, sizeof f);
    static const char *names[] = {"n1", "n2", "n3", "n4", "n5"};
    for (int i = 0; i < 5; i++) {
        snprintf(f.m[i].name, sizeof f.m[i].name, "%s", names[i]);
        f.m[i].node = srv_jsc_node_id(names[i]);
        f.m[i].inc = 100 + (uint64_t)i;
    }
    /* n1's routes name the other two (nats-server's documented shape). */
    static const char *routes[] = {"n3", "n2"};
    assert_int_equal(
        srv_jsc_seed_set("n1", routes, 2, f.seeds, sizeof f.seeds, err), 0);
    static const char *urls[] = {"10.0.0.1:6222", "10.0.0.2:6222",
                                 "10.0.0.3:6222"};
    f.self = (struct srv_jsc_report){.name = "n1",
                                     .url = urls[0],
                                     .inc = 100,
                                     .state = SRV_JSC_EMPTY,
                                     .seeds = f.seeds};
    for (int i = 0; i < 2; i++) {
        f.peers[i] = (struct srv_jsc_report){.name = names[i + 1],
                                             .url = urls[i + 1],
                                             .inc = 101 + (uint64_t)i,
                                             .state = SRV_JSC_EMPTY,
                                             .seeds = f.seeds};
    }
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return 0;
}

static void node_ids_are_stable_nonzero_and_distinct(void **state)
{
    (void)state;
    assert_true(srv_jsc_node_id("n1") != 0);
    assert_true(srv_jsc_node_id("n1") == srv_jsc_node_id("n1"));
    assert_true(srv_jsc_node_id("n1") != srv_jsc_node_id("n2"));
}

static void seed_sets_are_names_whatever_the_shape_of_the_routes(void **state)
{
    struct fx *f = *state;
    char other[SRV_JSC_SEEDS_BYTES];
    char err[KEEL_ERRMSG_MAX];
    assert_string_equal(f->seeds, "n1,n2,n3");
    /* The full list, this node included, in another order, one node
     * reached through two URLs (a host name and its address): the same
     * set as the others-only list. */
    static const char *full[] = {"n2", "n1", "n3", "n2"};
    assert_int_equal(srv_jsc_seed_set("n1", full, 4, other, sizeof other, err),
                     0);
    assert_string_equal(other, f->seeds);
    /* n2's others-only list agrees with n1's. */
    static const char *of_n2[] = {"n1", "n3"};
    assert_int_equal(srv_jsc_seed_set("n2", of_n2, 2, other, sizeof other, err),
                     0);
    assert_string_equal(other, f->seeds);
    /* A node without routes is its own seed set. */
    assert_int_equal(srv_jsc_seed_set("n2", NULL, 0, other, sizeof other, err),
                     0);
    assert_string_equal(other, "n2");
    static const char *comma[] = {"n,2"};
    assert_int_equal(srv_jsc_seed_set("n1", comma, 1, other, sizeof other, err),
                     KEEL_EINVAL);
    assert_int_equal(
        srv_jsc_seeds_canon("nats://nohost", other, sizeof other, err),
        KEEL_EINVAL);
    assert_int_equal(srv_jsc_seeds_canon("route://10.0.0.2:6222 "
                                         "nats://u:p@n3:6222/",
                                         other, sizeof other, err),
                     0);
}

static void placement_prefers_the_least_loaded_nodes(void **state)
{
    struct fx *f = *state;
    size_t chosen[5];
    uint32_t hosted[5] = {3, 0, 2, 1, 0};
    assert_int_equal(srv_jsc_place(f->m, 5, hosted, 3, chosen), 0);
    /* n2 and n5 host none, n4 one: chosen sorted by name. */
    assert_string_equal(f->m[chosen[0]].name, "n2");
    assert_string_equal(f->m[chosen[1]].name, "n4");
    assert_string_equal(f->m[chosen[2]].name, "n5");
}

static void placement_breaks_ties_by_name(void **state)
{
    struct fx *f = *state;
    size_t chosen[5];
    assert_int_equal(srv_jsc_place(f->m, 5, f->hosted, 1, chosen), 0);
    assert_string_equal(f->m[chosen[0]].name, "n1");
    assert_int_equal(srv_jsc_place(f->m, 5, f->hosted, 3, chosen), 0);
    assert_string_equal(f->m[chosen[2]].name, "n3");
}

static void placement_refuses_more_replicas_than_nodes(void **state)
{
    struct fx *f = *state;
    size_t chosen[5];
    assert_int_equal(srv_jsc_place(f->m, 3, f->hosted, 4, chosen), KEEL_ELIMIT);
    assert_int_equal(srv_jsc_place(f->m, 3, f->hosted, 0, chosen), KEEL_ELIMIT);
}

static void bootstrap_creates_when_every_seed_is_empty_and_agrees(void **state)
{
    struct fx *f = *state;
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_CREATE);
    assert_int_equal(f->cfg.n, 3);
    /* Seed-list order: the same index-1 entry on every seed. */
    assert_true(f->cfg.servers[0].node == srv_jsc_node_id("n1"));
    assert_true(f->cfg.servers[2].node == srv_jsc_node_id("n3"));
    assert_true(f->cfg.servers[1].incarnation == 101);
    assert_int_equal(f->cfg.servers[1].role, RAFT_VOTER);
}

static void every_seed_computes_the_same_configuration(void **state)
{
    struct fx *f = *state;
    struct raft_config other;
    struct srv_jsc_report peers2[2] = {f->self, f->peers[1]};
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_CREATE);
    assert_int_equal(
        srv_jsc_boot_decide(&f->peers[0], peers2, 2, &other, f->why),
        SRV_JSC_BOOT_CREATE);
    assert_memory_equal(&f->cfg, &other, sizeof other);
}

static void bootstrap_waits_for_a_missing_seed(void **state)
{
    struct fx *f = *state;
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 1, &f->cfg, f->why),
        SRV_JSC_BOOT_WAIT);
    assert_non_null(strstr(f->why, "seed n3"));
    assert_int_equal(f->cfg.n, 0);
}

static void bootstrap_joins_when_a_peer_has_the_meta_group(void **state)
{
    struct fx *f = *state;
    f->peers[1].state = SRV_JSC_MEMBER;
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_JOIN);
    assert_non_null(strstr(f->why, "n3"));
}

static void a_seed_that_bootstrapped_the_same_config_counts(void **state)
{
    struct fx *f = *state;
    struct raft_config mine;
    /* n2 saw every seed first and created the meta group. */
    assert_int_equal(srv_jsc_boot_decide(&f->self, f->peers, 2, &mine, f->why),
                     SRV_JSC_BOOT_CREATE);
    f->peers[0].state = SRV_JSC_MEMBER;
    f->peers[0].fp = srv_jsc_config_fp(&mine);
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_CREATE);
    assert_memory_equal(&mine, &f->cfg, sizeof mine);
    /* Another configuration (e.g. n1's disk was wiped since): join. */
    f->self.inc = 999;
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_JOIN);
    assert_int_equal(f->cfg.n, 0);
}

static void bootstrap_refuses_disagreeing_seed_lists(void **state)
{
    struct fx *f = *state;
    f->peers[0].seeds = "n1,n2";
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_REFUSE);
    assert_non_null(strstr(f->why, "n2"));
}

static void a_peer_that_does_not_know_its_seeds_yet_delays_only(void **state)
{
    struct fx *f = *state;
    /* n3 has not identified all its routes: n1 waits, never refuses. */
    f->peers[1].seeds = "";
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_WAIT);
    assert_non_null(strstr(f->why, "seed n3 to learn"));
    assert_int_equal(f->cfg.n, 0);
    /* A linked node outside the seed set, still learning: no effect. */
    f->peers[1].seeds = f->seeds;
    f->peers[2] = (struct srv_jsc_report){.name = "n9",
                                          .url = "10.0.0.9:6222",
                                          .inc = 9,
                                          .state = SRV_JSC_EMPTY,
                                          .seeds = ""};
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 3, &f->cfg, f->why),
        SRV_JSC_BOOT_CREATE);
    assert_int_equal(f->cfg.n, 3);
}

/* A node that is not a seed, started with --routes naming a cluster
 * whose seeds formed the meta group, waits to be added (issue 9). */
static void a_new_node_outside_the_seeds_joins(void **state)
{
    struct fx *f = *state;
    struct raft_config seeds_cfg;
    f->peers[2] = f->peers[1];
    f->peers[2].name = "n1";
    f->peers[2].url = "10.0.0.1:6222";
    f->peers[2].inc = 100;
    assert_int_equal(
        srv_jsc_boot_decide(&f->peers[2], f->peers, 2, &seeds_cfg, f->why),
        SRV_JSC_BOOT_CREATE);
    for (int i = 0; i < 3; i++) {
        f->peers[i].state = SRV_JSC_MEMBER;
        f->peers[i].fp = srv_jsc_config_fp(&seeds_cfg);
    }
    static const char *routes[] = {"n1", "n2", "n3"};
    static char mine[SRV_JSC_SEEDS_BYTES];
    char err[KEEL_ERRMSG_MAX];
    f->self.name = "n4";
    f->self.url = "10.0.0.4:6222";
    f->self.inc = 104;
    assert_int_equal(srv_jsc_seed_set("n4", routes, 3, mine, sizeof mine, err),
                     0);
    f->self.seeds = mine;
    assert_int_equal(
        srv_jsc_boot_decide(&f->self, f->peers, 3, &f->cfg, f->why),
        SRV_JSC_BOOT_JOIN);
    assert_non_null(strstr(f->why, "add-peer"));
    assert_int_equal(f->cfg.n, 0);
}

/* Single seed: n1's route is itself, n2 and n3 name n1 only. */
static void a_solo_seed_creates_alone_and_the_others_join_it(void **state)
{
    struct fx *f = *state;
    struct srv_jsc_report seed = {.name = "n1",
                                  .url = "10.0.0.1:6222",
                                  .inc = 100,
                                  .state = SRV_JSC_EMPTY,
                                  .seeds = "n1"};
    struct srv_jsc_report joiners[2] = {f->peers[0], f->peers[1]};
    joiners[0].seeds = "n1,n2";
    joiners[1].seeds = "n1,n3";
    /* The seed ignores the empty nodes that name it. */
    assert_int_equal(srv_jsc_boot_decide(&seed, joiners, 2, &f->cfg, f->why),
                     SRV_JSC_BOOT_CREATE);
    assert_int_equal(f->cfg.n, 1);
    assert_true(f->cfg.servers[0].node == srv_jsc_node_id("n1"));
    /* A joiner never creates: it joins through the seed, whether the
     * seed is still empty or has the meta group (a node added later). */
    struct srv_jsc_report others[2] = {seed, joiners[1]};
    assert_int_equal(
        srv_jsc_boot_decide(&joiners[0], others, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_JOIN_SEED);
    assert_non_null(strstr(f->why, "seed n1"));
    assert_int_equal(f->cfg.n, 0);
    others[0].state = SRV_JSC_MEMBER;
    others[0].fp = 42;
    assert_int_equal(
        srv_jsc_boot_decide(&joiners[0], others, 2, &f->cfg, f->why),
        SRV_JSC_BOOT_JOIN_SEED);
    /* Without the seed linked, a joiner only waits. */
    assert_int_equal(
        srv_jsc_boot_decide(&joiners[0], &joiners[1], 1, &f->cfg, f->why),
        SRV_JSC_BOOT_WAIT);
}

static void two_solo_seeds_refuse_and_a_solo_seed_joins_a_group(void **state)
{
    struct fx *f = *state;
    struct srv_jsc_report a = {.name = "n1",
                               .url = "10.0.0.1:6222",
                               .inc = 100,
                               .state = SRV_JSC_EMPTY,
                               .seeds = "n1"};
    struct srv_jsc_report b = a;
    b.name = "n2";
    b.seeds = "n2";
    /* Linked by gossip, each its own only seed: never two groups. */
    assert_int_equal(srv_jsc_boot_decide(&a, &b, 1, &f->cfg, f->why),
                     SRV_JSC_BOOT_REFUSE);
    assert_int_equal(srv_jsc_boot_decide(&b, &a, 1, &f->cfg, f->why),
                     SRV_JSC_BOOT_REFUSE);
    /* A seed whose data directory was wiped meets a member: it waits to
     * be added by an operator, it is not a joiner. */
    f->peers[0].state = SRV_JSC_MEMBER;
    f->peers[0].fp = 7;
    f->peers[0].seeds = "n1";
    assert_int_equal(srv_jsc_boot_decide(&a, f->peers, 1, &f->cfg, f->why),
                     SRV_JSC_BOOT_JOIN);
    assert_int_equal(f->cfg.n, 0);
}

static void placement_survives_its_json_form(void **state)
{
    struct fx *f = *state;
    struct srv_jsc_placement pl;
    struct srv_jsc_placement back;
    memset(&pl, 0, sizeof pl);
    for (int i = 0; i < 16; i++) {
        pl.gid[i] = (uint8_t)(0xf0 + i);
    }
    pl.n = 3;
    memcpy(pl.m, f->m, 3 * sizeof pl.m[0]);
    pl.m[2].added = true; /* joined by a move: never bootstraps */
    json_t *e = json_object();
    assert_int_equal(srv_jsc_placement_to_json(&pl, e), 0);
    assert_int_equal(srv_jsc_placement_from_json(e, &back), 0);
    assert_memory_equal(&pl, &back, sizeof pl);
    json_object_set_new(e, "group", json_string("zz"));
    assert_int_equal(srv_jsc_placement_from_json(e, &back), KEEL_EPROTO);
    json_object_del(e, "group");
    assert_int_equal(srv_jsc_placement_from_json(e, &back), 0);
    assert_int_equal(back.n, 0);
    json_decref(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            node_ids_are_stable_nonzero_and_distinct, setup, teardown),
        cmocka_unit_test_setup_teardown(
            seed_sets_are_names_whatever_the_shape_of_the_routes, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            placement_prefers_the_least_loaded_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(placement_breaks_ties_by_name, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            placement_refuses_more_replicas_than_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(
            bootstrap_creates_when_every_seed_is_empty_and_agrees, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            every_seed_computes_the_same_configuration, setup, teardown),
        cmocka_unit_test_setup_teardown(a_new_node_outside_the_seeds_joins,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(bootstrap_waits_for_a_missing_seed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            bootstrap_joins_when_a_peer_has_the_meta_group, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_seed_that_bootstrapped_the_same_config_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(
            bootstrap_refuses_disagreeing_seed_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_peer_that_does_not_know_its_seeds_yet_delays_only, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_solo_seed_creates_alone_and_the_others_join_it, setup, teardown),
        cmocka_unit_test_setup_teardown(
            two_solo_seeds_refuse_and_a_solo_seed_joins_a_group, setup,
            teardown),
        cmocka_unit_test_setup_teardown(placement_survives_its_json_form, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
