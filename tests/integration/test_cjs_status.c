/* keel cluster status on a 3-node cluster in network namespaces (netns.c),
 * through the real keel binary ($KEEL) with --json and in table form:
 * every node answers with its own view, the merged view shows three
 * members and each stream's one leader; a node that hosts no replica of
 * an R1 stream stays healthy (/healthz 200); after kill -9 of a follower
 * the status names the node down, the leader reports its replica offline
 * and keel exits 1; /metrics has the store's fdatasync and batch
 * histograms with sane values; a follower whose segment has a flipped
 * byte counts the repair (keel_raft_repairs_total) and the status turns
 * ok again. The cases share one cluster, in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "netns.h"

#define NODES 3
#define WAIT_MS 20000 /* bounded waits for the cluster to agree */
#define OUT_BYTES (256 * 1024)

static struct h_netns net;
static char out[OUT_BYTES];

/* Run keel with args against node i; stdout (and stderr after it unless
 * quiet) into out. Returns its exit status (-1 when it did not run). */
static int keel_run(int i, const char *args, bool quiet)
{
    int rc = h_keel(net.node[i].k.url, args, quiet, out, sizeof out);
    if (rc != 0 && getenv("CST_DEBUG") != NULL) {
        fprintf(stderr, "keel %s: exit %d:\n%s\n", args, rc, out);
    }
    return rc;
}

static int keel(int i, const char *args)
{
    return keel_run(i, args, false);
}

/* keel cluster status --json on node i: the parsed output (NULL when it
 * printed none) and the exit status in *rc. */
static json_t *status(int i, int *rc)
{
    *rc = keel_run(i, "cluster status --json", true);
    return json_loads(out, 0, NULL);
}

static const json_t *node_reply(const json_t *st, const char *name)
{
    size_t k;
    const json_t *r;
    json_array_foreach(json_object_get(st, "nodes"), k, r)
    {
        const char *n = json_string_value(
            json_object_get(json_object_get(r, "server"), "name"));
        if (n != NULL && strcmp(n, name) == 0) {
            return r;
        }
    }
    return NULL;
}

static const json_t *group(const json_t *reply, const char *stream)
{
    size_t k;
    const json_t *g;
    json_array_foreach(json_object_get(reply, "groups"), k, g)
    {
        if (strcmp(json_string_value(json_object_get(g, "stream")), stream) ==
            0) {
            return g;
        }
    }
    return NULL;
}

/* Every node answered, is healthy, and the meta group has a leader. */
static bool all_healthy(void *arg)
{
    (void)arg;
    int rc;
    json_t *st = status(0, &rc);
    bool ok = rc == 0 && st != NULL &&
              json_array_size(json_object_get(st, "nodes")) == NODES &&
              json_array_size(json_object_get(st, "missing")) == 0;
    json_decref(st);
    return ok;
}

static int group_start(void **state)
{
    (void)state;
    if (h_netns_start(&net, NODES, "cst3", NULL) != 0) {
        return -1;
    }
    if (!h_poll(all_healthy, NULL, WAIT_MS)) {
        fprintf(stderr, "cluster status not healthy within %d ms: %s\n",
                WAIT_MS, out);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return h_netns_cleanup(&net) == 0 ? 0 : -1;
}

/* The R3 stream has one leader and three current replicas in every
 * node's answer, as seen from node 1. */
static bool r3_settled(void *arg)
{
    (void)arg;
    int rc;
    json_t *st = status(1, &rc);
    int leaders = 0, ok = 0;
    const char *leader = NULL;
    for (int i = 0; st != NULL && i < NODES; i++) {
        const json_t *g = group(node_reply(st, net.node[i].name), "ORD");
        if (g == NULL) {
            continue;
        }
        const char *role = json_string_value(json_object_get(g, "role"));
        const char *state = json_string_value(json_object_get(g, "state"));
        leaders += strcmp(role, "leader") == 0;
        ok += state != NULL && strcmp(state, "ok") == 0;
        leader = json_string_value(json_object_get(g, "leader"));
    }
    bool done = rc == 0 && leaders == 1 && ok == NODES && leader != NULL &&
                leader[0] != '\0';
    json_decref(st);
    return done;
}

/* Every node has applied the meta entry that created ORD. The create is
 * answered once a majority holds it; the third node learns the commit a
 * heartbeat later, and until then it knows no stream for "ord.x". */
static bool ord_known_everywhere(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        if (keel_run(i, "stream info ORD --json", true) != 0) {
            return false;
        }
    }
    return true;
}

static void status_shows_three_members_and_the_stream_leader(void **state)
{
    (void)state;
    assert_int_equal(keel(0, "stream add ORD --subjects 'ord.>' --replicas 3"),
                     0);
    assert_true(h_poll(ord_known_everywhere, NULL, WAIT_MS));
    assert_int_equal(keel(2, "pub --jetstream ord.x hello --count 20"), 0);
    assert_true(h_poll(r3_settled, NULL, WAIT_MS));
    int rc;
    json_t *st = status(2, &rc);
    assert_int_equal(rc, 0);
    const json_t *r0 = node_reply(st, net.node[0].name);
    assert_non_null(r0);
    assert_int_equal(json_array_size(json_object_get(r0, "members")), NODES);
    /* The node the client reached says whom it asked: all three. */
    size_t k;
    const json_t *r;
    json_array_foreach(json_object_get(st, "nodes"), k, r)
    {
        const json_t *asked = json_object_get(r, "asked");
        if (asked != NULL) {
            assert_int_equal(json_array_size(asked), NODES);
        }
    }
    json_decref(st);
    /* The table form: one line per node, three replica rows. */
    assert_int_equal(keel(1, "cluster status"), 0);
    assert_non_null(strstr(out, "3 of 3 nodes answered"));
    int rows = 0;
    for (const char *p = out; (p = strstr(p, "\nORD ")) != NULL; p++) {
        rows++;
    }
    assert_int_equal(rows, NODES);
}

/* An R1 stream lives on one node; the other two host no replica of it
 * and must still answer /healthz 200 (no "not caught up" for a group that
 * is not theirs). */
static bool every_healthz_200(void *arg)
{
    (void)arg;
    char body[8192];
    for (int i = 0; i < NODES; i++) {
        if (h_netns_http_get(&net, i, "/healthz", body, sizeof body) != 200) {
            return false;
        }
    }
    return true;
}

static void a_node_without_a_replica_of_an_r1_stream_is_healthy(void **state)
{
    (void)state;
    assert_int_equal(keel(1, "stream add ONE --subjects 'one.>' --replicas 1"),
                     0);
    /* Through the node that created it (another may not know it yet). */
    assert_int_equal(keel(1, "pub --jetstream one.x hi --count 3"), 0);
    assert_true(h_poll(every_healthz_200, NULL, WAIT_MS));
    int rc;
    json_t *st = status(0, &rc);
    assert_int_equal(rc, 0);
    int hosts = 0;
    for (int i = 0; i < NODES; i++) {
        hosts += group(node_reply(st, net.node[i].name), "ONE") != NULL;
    }
    assert_int_equal(hosts, 1);
    json_decref(st);
}

/* The number after the line start key in a /metrics body, or -1. */
static double metric(const char *body, const char *key)
{
    char k[128];
    snprintf(k, sizeof k, "\n%s ", key);
    const char *p = strstr(body, k);
    return p != NULL ? strtod(p + strlen(k), NULL) : -1;
}

static void metrics_have_fdatasync_and_batch_histograms(void **state)
{
    (void)state;
    static char body[256 * 1024];
    assert_int_equal(h_netns_http_get(&net, 0, "/metrics", body, sizeof body),
                     200);
    double n = metric(body, "keel_store_fdatasync_seconds_count");
    double secs = metric(body, "keel_store_fdatasync_seconds_sum");
    assert_true(n > 0);
    assert_true(secs > 0 && secs / n < 10); /* sane: seconds, not garbage */
    assert_true(
        metric(body, "keel_store_fdatasync_seconds_bucket{le=\"+Inf\"}") == n);
    double batches = metric(body, "keel_store_batch_records_count");
    assert_true(batches > 0);
    /* Every batch holds at least one record. */
    assert_true(metric(body, "keel_store_batch_records_sum") >= batches);
    /* A follower learns the commit index a heartbeat later: > 0 here. */
    assert_true(metric(body, "keel_raft_commit_index{group=\"ORD\"}") > 0);
}

/* The repaired node's /metrics counts a repair of ORD and every node is
 * healthy again. */
static int repaired = -1;
static bool repair_counted(void *arg)
{
    (void)arg;
    static char body[256 * 1024];
    if (h_netns_http_get(&net, repaired, "/metrics", body, sizeof body) !=
        200) {
        return false;
    }
    return metric(body, "keel_raft_repairs_total{group=\"ORD\"}") >= 1 &&
           all_healthy(NULL);
}

static void a_follower_repair_is_counted_and_status_turns_ok(void **state)
{
    (void)state;
    int rc;
    json_t *st = status(0, &rc);
    assert_int_equal(rc, 0);
    for (int i = 0; i < NODES && repaired < 0; i++) {
        const json_t *g = group(node_reply(st, net.node[i].name), "ORD");
        if (strcmp(json_string_value(json_object_get(g, "role")), "leader") !=
            0) {
            repaired = i;
        }
    }
    json_decref(st);
    assert_true(repaired >= 0);
    assert_int_equal(h_netns_node_stop(&net, repaired), 0);
    /* A byte inside the first acked record ("hello"), below later sync
     * markers: a faulty record, repaired from the leader's copy. */
    assert_int_equal(
        h_flip_segment_byte(net.node[repaired].k.data_dir, "hello"), 0);
    assert_int_equal(h_netns_node_start(&net, repaired), 0);
    assert_true(h_poll(repair_counted, NULL, WAIT_MS));
}

/* A group directory no stream of the meta state names, planted on a
 * stopped follower: once the restarted node's meta state is complete it
 * moves to quarantine/orphans/ (docs/design.md §5: never deleted), the node
 * reports it, and only the operator's rm removes it. Before clustered
 * nodes ran the check, such a directory (a stream deleted while the node
 * was down, its delete only in a meta snapshot) stayed unreported. */
#define PLANT_HEX "00112233445566778899aabbccddeeff"
static char plant_dir[600], orphan_dir[600];

static bool planted_quarantined(void *arg)
{
    int i = *(const int *)arg;
    struct stat sb;
    if (stat(plant_dir, &sb) == 0 || stat(orphan_dir, &sb) != 0) {
        return false;
    }
    int rc;
    json_t *st = status(i, &rc);
    const json_t *r = node_reply(st, net.node[i].name);
    bool seen = r != NULL &&
                json_integer_value(json_object_get(r, "orphans_count")) == 1 &&
                strcmp(json_string_value(
                           json_array_get(json_object_get(r, "orphans"), 0)),
                       "group-" PLANT_HEX) == 0;
    json_decref(st);
    return seen;
}

static void
a_group_no_stream_names_goes_to_orphans_on_a_cluster_node(void **state)
{
    (void)state;
    int i = repaired; /* a follower of ORD, as above */
    assert_true(i >= 0);
    snprintf(plant_dir, sizeof plant_dir, "%s/js/groups/" PLANT_HEX,
             net.node[i].k.data_dir);
    snprintf(orphan_dir, sizeof orphan_dir,
             "%s/js/quarantine/orphans/group-" PLANT_HEX "/log/seg",
             net.node[i].k.data_dir);
    assert_int_equal(h_netns_node_stop(&net, i), 0);
    char path[700];
    assert_int_equal(mkdir(plant_dir, 0755), 0);
    snprintf(path, sizeof path, "%s/log", plant_dir);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/log/seg", plant_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("planted", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(h_netns_node_start(&net, i), 0);
    assert_true(h_poll(planted_quarantined, &i, WAIT_MS));
    /* ORD's own replica is placed here: it stays and serves. */
    assert_true(h_poll(r3_settled, NULL, WAIT_MS));
    char args[256];
    snprintf(args, sizeof args,
             "cluster orphans rm group-" PLANT_HEX " --force --node %s",
             net.node[i].name);
    assert_int_equal(keel(0, args), 0);
    struct stat sb;
    assert_int_not_equal(stat(orphan_dir, &sb), 0);
    assert_true(h_poll(all_healthy, NULL, WAIT_MS));
}

/* node 0's view names the killed node down, and the stream's leader
 * reports its replica offline. */
static int killed = -1;
static bool down_seen(void *arg)
{
    (void)arg;
    int rc;
    int asker = (killed + 1) % NODES;
    json_t *st = status(asker, &rc);
    bool missing_or_down = false, offline = false;
    const char *kname = net.node[killed].name;
    for (int i = 0; st != NULL && i < NODES; i++) {
        const json_t *r = node_reply(st, net.node[i].name);
        size_t k;
        const json_t *m;
        json_array_foreach(json_object_get(r, "members"), k, m)
        {
            if (strcmp(json_string_value(json_object_get(m, "name")), kname) ==
                    0 &&
                !json_is_true(json_object_get(m, "up"))) {
                missing_or_down = true;
            }
        }
        const json_t *g = group(r, "ORD");
        const json_t *p;
        json_array_foreach(json_object_get(g, "peers"), k, p)
        {
            if (strcmp(json_string_value(json_object_get(p, "name")), kname) ==
                    0 &&
                (json_is_true(json_object_get(p, "offline")) ||
                 json_is_false(json_object_get(p, "current")))) {
                offline = true;
            }
        }
    }
    bool done =
        rc == 1 && missing_or_down && offline && node_reply(st, kname) == NULL;
    json_decref(st);
    return done;
}

static void a_killed_follower_shows_down_and_offline(void **state)
{
    (void)state;
    int rc;
    json_t *st = status(0, &rc);
    assert_int_equal(rc, 0);
    /* A follower of ORD that does not lead the meta group either. */
    for (int i = 0; i < NODES && killed < 0; i++) {
        const json_t *r = node_reply(st, net.node[i].name);
        const json_t *g = group(r, "ORD");
        if (strcmp(json_string_value(json_object_get(g, "role")), "leader") !=
                0 &&
            strcmp(json_string_value(
                       json_object_get(json_object_get(r, "meta"), "role")),
                   "leader") != 0) {
            killed = i;
        }
    }
    json_decref(st);
    assert_true(killed >= 0);
    assert_int_equal(h_netns_node_kill(&net, killed), 0);
    /* Publishes go on with two of three; the leader sees the third lag. */
    assert_int_equal(
        keel((killed + 1) % NODES, "pub --jetstream ord.x after --count 5"), 0);
    assert_true(h_poll(down_seen, NULL, WAIT_MS));
    assert_int_equal(keel((killed + 1) % NODES, "cluster status"), 1);
    assert_non_null(strstr(out, "2 of 3 nodes answered"));
    assert_non_null(strstr(out, "DOWN"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_shows_three_members_and_the_stream_leader),
        cmocka_unit_test(a_node_without_a_replica_of_an_r1_stream_is_healthy),
        cmocka_unit_test(metrics_have_fdatasync_and_batch_histograms),
        cmocka_unit_test(a_follower_repair_is_counted_and_status_turns_ok),
        cmocka_unit_test(
            a_group_no_stream_names_goes_to_orphans_on_a_cluster_node),
        cmocka_unit_test(a_killed_follower_shows_down_and_offline),
    };
    return cmocka_run_group_tests(tests, group_start, group_teardown);
}
