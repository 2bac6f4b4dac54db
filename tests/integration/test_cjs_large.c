/* Clusters larger than five nodes (issue 22 item 4): a 7-node and then a
 * 9-node cluster of real keelds in network namespaces. Node i carries the
 * server tag az:<i mod 3 + 1>, so az:1 is on three nodes in both sizes
 * and az:2 on two of seven or three of nine. On each: `keel cluster
 * status` lists every node, R3 streams without tags are placed on
 * different node sets that together cover every node, a stream asking
 * for az:1 lands on exactly the az:1 nodes, an R3 stream asking for az:2
 * is refused with 10005 on seven nodes and placed on nine, and an R5
 * stream works, and `keel cluster recover` surveys all the nodes it is
 * given. docs/cluster.md, "Placement tags" and "Larger clusters".
 * Shared setup: cjs_common.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cjs_common.h"
#include "harness.h"

#define WAIT_MS 30000
#define OUT_BYTES (256 * 1024)
#define SETS_MAX 16

static struct cjs cj;
static int nodes; /* 7 or 9: the size of the cluster of this group */
static char conf[H_NETNS_NODES_MAX][64];
static char out[OUT_BYTES];

static int start(int n)
{
    nodes = n;
    char name[16];
    snprintf(name, sizeof name, "cjsl%d", n);
    if (h_netns_prepare(&cj.net, n, name, NULL) != 0) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(conf[i], sizeof conf[i], "/tmp/keel-large-%d-%d.conf",
                 (int)getpid(), i);
        FILE *f = fopen(conf[i], "w");
        if (f == NULL ||
            fprintf(f, "server_tags: [\"az:%d\"]\n", i % 3 + 1) < 0 ||
            fclose(f) != 0) {
            return -1;
        }
        cj.net.node[i].config = conf[i];
    }
    return cjs_start_prepared(&cj, WAIT_MS);
}

static int setup7(void **state)
{
    (void)state;
    return start(7);
}

static int setup9(void **state)
{
    (void)state;
    return start(9);
}

static int teardown(void **state)
{
    (void)state;
    int rv = cjs_stop(&cj);
    for (int i = 0; i < nodes; i++) {
        unlink(conf[i]);
    }
    return rv;
}

/* keel against servers (a URL or a comma list), output into out. */
static int keel_at(const char *servers, const char *args, bool quiet)
{
    return h_keel(servers, args, quiet, out, sizeof out);
}

static int keel_run(int i, const char *args)
{
    return keel_at(cj.net.node[i].k.url, args, true);
}

/* keel cluster status --json through node 0 names every node, misses
 * none, and exits 0 (every node healthy, the meta group led). */
static bool status_lists_all(void *arg)
{
    (void)arg;
    int rc = keel_run(0, "cluster status --json");
    json_t *st = json_loads(out, 0, NULL);
    bool ok = rc == 0 && st != NULL &&
              json_array_size(json_object_get(st, "nodes")) == (size_t)nodes &&
              json_array_size(json_object_get(st, "missing")) == 0;
    if (ok) {
        bool seen[H_NETNS_NODES_MAX] = {false};
        size_t k;
        const json_t *r;
        json_array_foreach(json_object_get(st, "nodes"), k, r)
        {
            int i =
                cjs_node_named(&cj, json_string_value(json_object_get(
                                        json_object_get(r, "server"), "name")));
            ok = ok && i >= 0 && !seen[i];
            if (i >= 0) {
                seen[i] = true;
            }
        }
    }
    json_decref(st);
    return ok;
}

static void cluster_status_lists_every_node(void **state)
{
    (void)state;
    assert_true(h_poll(status_lists_all, NULL, WAIT_MS));
    /* The table form too: one line per node. */
    assert_int_equal(keel_run(nodes - 1, "cluster status"), 0);
    for (int i = 0; i < nodes; i++) {
        char want[32];
        snprintf(want, sizeof want, "%s ", cj.net.node[i].name);
        assert_non_null(strstr(out, want));
    }
}

/* STREAM.CREATE of name (subject name.>) with r replicas and placement
 * tags (a JSON array text, NULL: none) through node via: the answer. */
static json_t *create(int via, const char *name, int r, const char *tags)
{
    char subj[128], body[512];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    snprintf(
        body, sizeof body,
        "{\"name\":\"%s\",\"subjects\":[\"%s.>\"],\"num_replicas\":%d%s%s%s}",
        name, name, r, tags != NULL ? ",\"placement\":{\"tags\":" : "",
        tags != NULL ? tags : "", tags != NULL ? "}" : "");
    json_t *o = cjs_request_retry(&cj, via, subj, body, WAIT_MS);
    assert_non_null(o);
    return o;
}

/* The stream's replicas (leader and followers) as a bit set of node
 * indexes; 0 while node 0 knows no leader. */
static unsigned replica_set(const char *stream)
{
    json_t *si = cjs_stream_info(&cj, 0, stream);
    const json_t *c = json_object_get(si, "cluster");
    int leader =
        cjs_node_named(&cj, json_string_value(json_object_get(c, "leader")));
    unsigned set = 0;
    if (leader >= 0) {
        set = 1u << leader;
        size_t k;
        const json_t *r;
        json_array_foreach(json_object_get(c, "replicas"), k, r)
        {
            int i = cjs_node_named(
                &cj, json_string_value(json_object_get(r, "name")));
            if (i >= 0) {
                set |= 1u << i;
            }
        }
    }
    json_decref(si);
    return set;
}

struct want_set {
    const char *stream;
    int size;    /* replicas */
    unsigned in; /* every replica within this set */
};

static bool placed(void *arg)
{
    const struct want_set *w = arg;
    unsigned s = replica_set(w->stream);
    return __builtin_popcount(s) == w->size && (s & ~w->in) == 0;
}

/* A publish to stream through node via is acknowledged (retried while a
 * new group elects its first leader). */
static void publish_acked(int via, const char *stream)
{
    char subj[64];
    snprintf(subj, sizeof subj, "%s.x", stream);
    json_t *a = cjs_request_retry(&cj, via, subj, "m", WAIT_MS);
    assert_false(cjs_is_error(a));
    assert_string_equal(json_string_value(json_object_get(a, "stream")),
                        stream);
    json_decref(a);
}

static void r3_streams_spread_over_every_node(void **state)
{
    (void)state;
    unsigned all = (1u << nodes) - 1, used = 0;
    unsigned sets[SETS_MAX];
    int distinct = 0;
    /* As many R3 streams as it takes to give every node a replica if
     * placement spreads them: ceil(nodes / 3), and one more. */
    int streams = (nodes + 2) / 3 + 1;
    for (int s = 0; s < streams; s++) {
        char name[32];
        snprintf(name, sizeof name, "SPREAD%d", s);
        json_t *o = create(s % nodes, name, 3, NULL);
        assert_false(cjs_is_error(o));
        json_decref(o);
        struct want_set w = {name, 3, all};
        assert_true(h_poll(placed, &w, WAIT_MS));
        unsigned set = replica_set(name);
        used |= set;
        bool seen = false;
        for (int k = 0; k < distinct; k++) {
            seen = seen || sets[k] == set;
        }
        if (!seen && distinct < SETS_MAX) {
            sets[distinct++] = set;
        }
        publish_acked((s + 1) % nodes, name);
    }
    assert_true(distinct >= 2);
    assert_int_equal(used, all);
}

static void placement_tags_choose_the_nodes(void **state)
{
    (void)state;
    unsigned az[3] = {0, 0, 0};
    for (int i = 0; i < nodes; i++) {
        az[i % 3] |= 1u << i;
    }
    json_t *o = create(nodes - 1, "AZONE", 3, "[\"az:1\"]");
    assert_false(cjs_is_error(o));
    json_decref(o);
    struct want_set w = {"AZONE", 3, az[0]};
    assert_true(h_poll(placed, &w, WAIT_MS));
    publish_acked(1, "AZONE");

    o = create(1, "AZTWO", 3, "[\"az:2\"]");
    if (nodes == 7) {
        /* Two nodes carry az:2: nats-server's 10005, nothing created. */
        assert_int_equal(json_integer_value(json_object_get(
                             json_object_get(o, "error"), "err_code")),
                         10005);
    } else {
        assert_false(cjs_is_error(o));
        w = (struct want_set){"AZTWO", 3, az[1]};
        assert_true(h_poll(placed, &w, WAIT_MS));
        publish_acked(0, "AZTWO");
    }
    json_decref(o);
}

/* keel cluster recover surveys every node it is given, the last too (it
 * used to stop at eight): a node left out could hold the longest log. An
 * R3 stream on the nodes with the last node's tag is led, so the survey
 * ends in "leads the group", after a line from each of its nodes. */
static void recover_surveys_every_node(void **state)
{
    (void)state;
    int tag = (nodes - 1) % 3;
    unsigned az = 0;
    for (int i = tag; i < nodes; i += 3) {
        az |= 1u << i;
    }
    char tags[32];
    snprintf(tags, sizeof tags, "[\"az:%d\"]", tag + 1);
    json_t *o = create(0, "LAST", 3, tags);
    assert_false(cjs_is_error(o));
    json_decref(o);
    struct want_set w = {"LAST", 3, az};
    assert_true(h_poll(placed, &w, WAIT_MS));
    char all[H_NETNS_NODES_MAX * 48];
    size_t used = 0;
    for (int i = 0; i < nodes; i++) {
        used += (size_t)snprintf(all + used, sizeof all - used, "%s%s",
                                 i > 0 ? "," : "", cj.net.node[i].k.url);
    }
    assert_int_equal(keel_at(all, "cluster recover --stream LAST", false), 1);
    assert_non_null(strstr(out, "leads the group"));
    for (int i = tag; i < nodes; i += 3) {
        char line[32];
        snprintf(line, sizeof line, "\n%s ", cj.net.node[i].name);
        assert_true(strstr(out, line) != NULL ||
                    strncmp(out, line + 1, strlen(line + 1)) == 0);
    }
}

static void an_r5_stream_takes_five_of_the_nodes(void **state)
{
    (void)state;
    json_t *o = create(2, "FIVE", 5, NULL);
    assert_false(cjs_is_error(o));
    json_decref(o);
    struct want_set w = {"FIVE", 5, (1u << nodes) - 1};
    assert_true(h_poll(placed, &w, WAIT_MS));
    publish_acked(nodes - 1, "FIVE");
    assert_int_equal(cjs_state_int(&cj, 0, "FIVE", "messages"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cluster_status_lists_every_node),
        cmocka_unit_test(r3_streams_spread_over_every_node),
        cmocka_unit_test(placement_tags_choose_the_nodes),
        cmocka_unit_test(recover_surveys_every_node),
        cmocka_unit_test(an_r5_stream_takes_five_of_the_nodes),
    };
    int failed =
        cmocka_run_group_tests_name("seven nodes", tests, setup7, teardown);
    return failed +
           cmocka_run_group_tests_name("nine nodes", tests, setup9, teardown);
}
