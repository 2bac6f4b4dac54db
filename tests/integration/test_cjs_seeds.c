/* Seed sets by node identity (srv_cluster_seed_names, srv_jsc_seed_set):
 * clusters configured as nats-server's documentation shows form the
 * JetStream meta group. Five nodes whose --routes list only the other
 * four, in every URL form (nats://, nats-route://, a trailing slash);
 * three nodes named by host names (a hosts file seen by keeld only, in
 * its own mount namespace), one with the full list and two with the
 * others; and seed sets that truly differ still refusing, with names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cjs_common.h"

#define FORM_MS 60000   /* meta leader known everywhere */
#define REFUSE_MS 20000 /* the refusal is logged */
#define CREATE_MS 20000
#define SRV_WAIT_MS 20000 /* a node's /healthz says what is expected */

struct fx {
    struct cjs c;
    char routes[H_NETNS_NODES_MAX][H_NETNS_NODES_MAX * 48];
};

static int setup(void **state)
{
    static struct fx f;
    memset(&f, 0, sizeof f);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    return cjs_stop(&f->c);
}

/* Node i's --routes: node j for each bit j of mask, by address (forms
 * rotating through nats://, nats-route:// and a trailing slash) or, with
 * names, by host name. */
static const char *routes_of(struct fx *f, int i, unsigned mask, bool names)
{
    static const char *const forms[] = {"nats://%s:%d", "nats-route://%s:%d",
                                        "nats://%s:%d/"};
    char *out = f->routes[i];
    size_t len = 0;
    size_t cap = sizeof f->routes[i];
    for (int j = 0; j < f->c.net.n; j++) {
        if ((mask & (1u << j)) == 0) {
            continue;
        }
        char url[48];
        const struct h_netns_node *nd = &f->c.net.node[j];
        snprintf(url, sizeof url, forms[(i + j) % 3],
                 names ? nd->name : nd->addr, H_NETNS_CLUSTER_PORT);
        len +=
            (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", url);
    }
    f->c.net.node[i].routes = out;
    return out;
}

static unsigned all_but(int n, int i)
{
    return ((1u << n) - 1) & ~(1u << i);
}

/* A stream of r replicas through node via, and one acked publish through
 * another node: the meta group places on every voter. */
static void use_a_stream(struct cjs *c, int via, int r)
{
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    cjs_add_stream(c, via, "SEEDS", "seeds.>", r, CREATE_MS);
    int other = (via + 1) % c->n;
    bool acked = false;
    for (int t = 0; t < 10 && !acked; t++) {
        acked = cjs_publish(c, other, "seeds.a", "one", &l, CJS_REQ_MS);
    }
    assert_true(acked);
    cjs_check_acked(c, via, "SEEDS", &l);
    cjs_ledger_free(&l);
}

static void
five_nodes_that_list_only_the_others_form_the_meta_group(void **state)
{
    struct fx *f = *state;
    assert_int_equal(h_netns_prepare(&f->c.net, 5, "seeds5", NULL), 0);
    for (int i = 0; i < 5; i++) {
        printf("# n%d --routes %s\n", i + 1,
               routes_of(f, i, all_but(5, i), false));
    }
    assert_int_equal(cjs_start_prepared(&f->c, FORM_MS), 0);
    for (int i = 0; i < 5; i++) {
        assert_true(cjs_log_has(&f->c, i, "seed set: n1,n2,n3,n4,n5"));
    }
    /* R5: every node is a voter of the meta group. */
    use_a_stream(&f->c, 2, 5);
}

static void nodes_named_by_host_names_form_the_meta_group(void **state)
{
    struct fx *f = *state;
    assert_int_equal(h_netns_prepare(&f->c.net, 3, "seedsh", NULL), 0);
    assert_int_equal(h_netns_hosts(&f->c.net), 0);
    /* n1 lists every node, itself included; n2 and n3 the others. */
    printf("# n1 --routes %s\n", routes_of(f, 0, 7, true));
    printf("# n2 --routes %s\n", routes_of(f, 1, all_but(3, 1), true));
    printf("# n3 --routes %s\n", routes_of(f, 2, all_but(3, 2), true));
    assert_int_equal(cjs_start_prepared(&f->c, FORM_MS), 0);
    for (int i = 0; i < 3; i++) {
        assert_true(cjs_log_has(&f->c, i, "seed set: n1,n2,n3"));
    }
    use_a_stream(&f->c, 1, 3);
}

struct refused_wait {
    struct cjs *c;
};

static bool every_node_refused(void *arg)
{
    struct refused_wait *w = arg;
    for (int i = 0; i < w->c->n; i++) {
        if (!cjs_log_has(w->c, i, "give every node the same --routes")) {
            return false;
        }
    }
    return true;
}

static void truly_different_seed_sets_still_refuse(void **state)
{
    struct fx *f = *state;
    struct cjs *c = &f->c;
    assert_int_equal(h_netns_prepare(&c->net, 3, "seedsx", NULL), 0);
    /* n1 names n2 only: its seed set {n1, n2} is not the others'. */
    printf("# n1 --routes %s\n", routes_of(f, 0, 2, false));
    printf("# n2 --routes %s\n", routes_of(f, 1, all_but(3, 1), false));
    printf("# n3 --routes %s\n", routes_of(f, 2, all_but(3, 2), false));
    c->n = 3;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(h_netns_node_start(&c->net, i), 0);
    }
    assert_int_equal(h_netns_wait_mesh(&c->net, H_START_TIMEOUT_MS), 0);
    struct refused_wait w = {c};
    assert_true(h_poll(every_node_refused, &w, REFUSE_MS));
    /* Named by node, as the operator configured them. */
    assert_true(cjs_log_has(c, 1,
                            "node n1 has the seed list [n1,n2], this "
                            "node [n1,n2,n3]"));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(cjs_connect(c, i), 0);
        json_t *o = cjs_request_ok(c, i, "$JS.API.INFO", "");
        assert_null(o);
    }
}

/* ---- single-seed clusters: every node's --routes names n1 only ---- */

#define JOIN_MS 90000 /* every node a voter of one meta group */

/* The meta leader node i's /jsz names (0: none or no answer). */
static long long jsz_leader(struct cjs *c, int i)
{
    static char body[65536];
    if (h_netns_http_get(&c->net, i, "/jsz", body, sizeof body) != 200) {
        return 0;
    }
    json_t *o = json_loads(body, 0, NULL);
    long long l = (long long)json_integer_value(
        json_object_get(json_object_get(o, "meta_cluster"), "leader"));
    json_decref(o);
    return l;
}

/* Voters of the meta group as node i's own cluster status shows them
 * (-1: no answer from node i itself). */
static int voters_seen_by(struct cjs *c, int i)
{
    if (c->nc[i] == NULL && cjs_connect(c, i) != 0) {
        return -1;
    }
    json_t *o = cjs_request(c, i, "$KEEL.API.CLUSTER.STATUS", "");
    const char *nm = json_string_value(
        json_object_get(json_object_get(o, "server"), "name"));
    int voters = -1;
    size_t k;
    json_t *m;
    if (nm != NULL && strcmp(nm, c->net.node[i].name) == 0) {
        voters = 0;
        json_array_foreach(json_object_get(o, "members"), k, m)
        {
            const char *role = json_string_value(json_object_get(m, "meta"));
            voters += role != NULL && strcmp(role, "voter") == 0;
        }
    }
    json_decref(o);
    return voters;
}

struct group_want {
    struct cjs *c;
    int voters;
};

/* One meta group: every running node names the same leader and sees
 * want voters. */
static bool one_group_of(void *arg)
{
    struct group_want *w = arg;
    long long leader = 0;
    for (int i = 0; i < w->c->n; i++) {
        if (!w->c->net.node[i].running) {
            continue;
        }
        long long l = jsz_leader(w->c, i);
        if (l == 0 || (leader != 0 && l != leader) ||
            voters_seen_by(w->c, i) != w->voters) {
            return false;
        }
        leader = l;
    }
    return leader != 0;
}

static void wait_one_group(struct cjs *c, int voters)
{
    struct group_want w = {c, voters};
    long long t0 = h_now_ms();
    bool ok = h_poll(one_group_of, &w, JOIN_MS);
    printf("# one meta group of %d voters: %s after %lld ms\n", voters,
           ok ? "yes" : "NO", h_now_ms() - t0);
    for (int i = 0; !ok && i < c->n; i++) {
        h_netns_print_log(&c->net, i);
    }
    assert_true(ok);
}

struct status_want {
    struct cjs *c;
    int i;
    const char *status;
};

static bool healthz_says(void *arg)
{
    struct status_want *w = arg;
    char body[4096];
    char want[64];
    (void)h_netns_http_get(&w->c->net, w->i, "/healthz", body, sizeof body);
    snprintf(want, sizeof want, "\"status\":\"%s\"", w->status);
    return strstr(body, want) != NULL;
}

/* Node i's own answer to $KEEL.API.CLUSTER.STATUS (keel cluster
 * status) has this status. */
static bool status_says(struct cjs *c, int i, const char *status)
{
    if (c->nc[i] == NULL && cjs_connect(c, i) != 0) {
        return false;
    }
    json_t *o = cjs_request(c, i, "$KEEL.API.CLUSTER.STATUS", "");
    const char *nm = json_string_value(
        json_object_get(json_object_get(o, "server"), "name"));
    const char *st = json_string_value(json_object_get(o, "status"));
    bool ok = nm != NULL && strcmp(nm, c->net.node[i].name) == 0 &&
              st != NULL && strcmp(st, status) == 0;
    if (!ok) {
        char *d = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
        printf("# n%d status: %s\n", i + 1, d != NULL ? d : "(none)");
        free(d);
    }
    json_decref(o);
    return ok;
}

/* A fresh cluster of n nodes by host name, every --routes the seed n1's
 * (n1's own route is itself). Nodes are started by the caller. */
static void prepare_single_seed(struct fx *f, int n, const char *name)
{
    assert_int_equal(h_netns_prepare(&f->c.net, n, name, NULL), 0);
    assert_int_equal(h_netns_hosts(&f->c.net), 0);
    f->c.n = n;
    for (int i = 0; i < n; i++) {
        f->c.net.node[i].routes = "nats://n1:6222";
    }
}

/* An R3 stream created through via, then a publish through every node
 * acked and every acked message read back through every node. */
static void use_r3_everywhere(struct cjs *c, int via)
{
    struct cjs_ledger l;
    memset(&l, 0, sizeof l);
    for (int i = 0; i < c->n; i++) {
        if (c->nc[i] == NULL) {
            assert_int_equal(cjs_connect(c, i), 0);
        }
    }
    cjs_add_stream(c, via, "ONE", "one.>", 3, CREATE_MS);
    for (int i = 0; i < c->n; i++) {
        char data[16];
        snprintf(data, sizeof data, "via-n%d", i + 1);
        bool acked = false;
        for (int t = 0; t < 10 && !acked; t++) {
            acked = cjs_publish(c, i, "one.x", data, &l, CJS_REQ_MS);
        }
        assert_true(acked);
    }
    for (int i = 0; i < c->n; i++) {
        cjs_check_acked(c, i, "ONE", &l);
    }
    assert_int_equal(l.acked, c->n);
    cjs_ledger_free(&l);
}

static void
three_nodes_with_one_seed_form_one_group_in_every_order(void **state)
{
    struct fx *f = *state;
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {2, 0, 1}, {1, 2, 0}, {2, 1, 0}};
    for (int o = 0; o < 6; o++) {
        printf("# start order n%d n%d n%d\n", orders[o][0] + 1,
               orders[o][1] + 1, orders[o][2] + 1);
        prepare_single_seed(f, 3, "seeds1");
        for (int k = 0; k < 3; k++) {
            assert_int_equal(h_netns_node_start(&f->c.net, orders[o][k]), 0);
        }
        if (o == 0) {
            /* The seed waits before it starts the group alone: meanwhile
             * a node that names it says it is joining, not broken. */
            struct status_want w = {&f->c, 1, "joining"};
            assert_true(h_poll(healthz_says, &w, SRV_WAIT_MS));
            assert_true(status_says(&f->c, 1, "joining"));
        }
        wait_one_group(&f->c, 3);
        if (o == 0) {
            struct status_want w = {&f->c, 1, "ok"};
            assert_true(h_poll(healthz_says, &w, SRV_WAIT_MS));
            use_r3_everywhere(&f->c, 2);
        }
        assert_int_equal(cjs_stop(&f->c), 0);
        memset(&f->c, 0, sizeof f->c);
    }
}

static void
five_nodes_with_one_seed_survive_a_seed_restart_and_a_kill(void **state)
{
    struct fx *f = *state;
    struct cjs *c = &f->c;
    prepare_single_seed(f, 5, "seeds5s");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(h_netns_node_start(&c->net, i), 0);
    }
    wait_one_group(c, 3);
    /* n4 joins later and is killed while joining. */
    assert_int_equal(h_netns_node_start(&c->net, 3), 0);
    struct status_want w = {c, 3, "joining"};
    assert_true(h_poll(healthz_says, &w, SRV_WAIT_MS));
    assert_int_equal(h_netns_node_kill(&c->net, 3), 0);
    /* n5 joins while the seed restarts. */
    assert_int_equal(h_netns_node_start(&c->net, 4), 0);
    cjs_disconnect(c, 0);
    assert_int_equal(h_netns_node_stop(&c->net, 0), 0);
    assert_int_equal(h_netns_node_start(&c->net, 0), 0);
    assert_int_equal(h_netns_node_start(&c->net, 3), 0);
    wait_one_group(c, 5);
    use_r3_everywhere(c, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            five_nodes_that_list_only_the_others_form_the_meta_group, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            nodes_named_by_host_names_form_the_meta_group, setup, teardown),
        cmocka_unit_test_setup_teardown(truly_different_seed_sets_still_refuse,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            three_nodes_with_one_seed_form_one_group_in_every_order, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            five_nodes_with_one_seed_survive_a_seed_restart_and_a_kill, setup,
            teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
