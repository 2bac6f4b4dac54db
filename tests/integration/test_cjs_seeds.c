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
#include <string.h>

#include "cjs_common.h"

#define FORM_MS 60000   /* meta leader known everywhere */
#define REFUSE_MS 20000 /* the refusal is logged */
#define CREATE_MS 20000

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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
