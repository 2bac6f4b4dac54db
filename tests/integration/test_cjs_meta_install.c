/* A node that was down while the meta group compacted its log catches up
 * through a meta snapshot from the leader (docs/design.md §5), with real keelds
 * in network namespaces and --snapshot_entries 4 (the meta group snapshots
 * every four entries and compacts past what the stopped node holds).
 * While it is down: a stream is deleted, another gains a subject. After
 * its restart the node must (a) close the deleted stream without deleting
 * its files: the group directory goes to quarantine/orphans/ (docs/design.md
 * §5), (b) take the new subject: a publish to it through this node is stored,
 * (c) be healthy. Before the meta install reconciled, the deleted stream
 * stayed open on that node for ever (its files never reported) and the
 * update never reached it (the publish found no responders): both checks
 * fail without srv_js_meta_install. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cjs_common.h"

#define NODES 3
#define WAIT_MS 30000 /* bounded waits for the cluster to agree */
#define CHURN 24      /* meta entries while the node is down: 6 snapshots */

static struct cjs cj;
static int victim = -1;

/* Entries of DATA/js/<rel> on node i (-1 when it cannot be read). */
static int dir_entries(int i, const char *rel)
{
    char path[600];
    snprintf(path, sizeof path, "%s/js/%s", cj.net.node[i].k.data_dir, rel);
    DIR *d = opendir(path);
    if (d == NULL) {
        return -1;
    }
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        n += de->d_name[0] != '.';
    }
    closedir(d);
    return n;
}

static void request_ok(int via, const char *subject, const char *body)
{
    json_t *o = cjs_request_retry(&cj, via, subject, body, WAIT_MS);
    if (o == NULL || cjs_is_error(o)) {
        char *txt = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
        fail_msg("%s: %s", subject, txt != NULL ? txt : "no answer");
    }
    json_decref(o);
}

static void update_keep(int via, const char *subjects, int max_msgs)
{
    char body[256];
    snprintf(body, sizeof body,
             "{\"name\":\"KEEP\",\"subjects\":[%s],\"num_replicas\":3,"
             "\"max_msgs\":%d}",
             subjects, max_msgs);
    request_ok(via, "$JS.API.STREAM.UPDATE.KEEP", body);
}

static bool victim_reconciled(void *arg)
{
    (void)arg;
    char body[8192];
    return dir_entries(victim, "quarantine/orphans") == 1 &&
           h_netns_http_get(&cj.net, victim, "/healthz", body, sizeof body) ==
               200;
}

static void a_node_behind_the_meta_snapshot_takes_its_state(void **state)
{
    (void)state;
    struct cjs_ledger l = {0};
    cjs_add_stream(&cj, 0, "GONE", "gone.x", 3, WAIT_MS);
    cjs_add_stream(&cj, 0, "KEEP", "keep.x", 3, WAIT_MS);
    assert_true(cjs_publish(&cj, 0, "gone.x", "g", &l, 5000));
    cjs_ledger_free(&l);
    memset(&l, 0, sizeof l);
    victim = NODES - 1;
    /* meta, GONE and KEEP: one group directory each. */
    assert_int_equal(dir_entries(victim, "groups"), 3);
    cjs_disconnect(&cj, victim);
    assert_int_equal(h_netns_node_stop(&cj.net, victim), 0);

    request_ok(0, "$JS.API.STREAM.DELETE.GONE", "");
    update_keep(0, "\"keep.x\",\"keep.y\"", 1000);
    for (int k = 0; k < CHURN; k++) {
        update_keep(k % 2, "\"keep.x\",\"keep.y\"", 2000 + k);
    }

    assert_int_equal(h_netns_node_start(&cj.net, victim), 0);
    assert_int_equal(h_netns_wait_mesh(&cj.net, WAIT_MS), 0);
    assert_int_equal(cjs_connect(&cj, victim), 0);
    if (!h_poll(victim_reconciled, NULL, WAIT_MS)) {
        char body[8192] = "";
        int code =
            h_netns_http_get(&cj.net, victim, "/healthz", body, sizeof body);
        h_netns_print_log(&cj.net, victim);
        fail_msg("node %d: %d orphans, /healthz %d %s", victim,
                 dir_entries(victim, "quarantine/orphans"), code, body);
    }
    /* GONE's group moved, not deleted; meta and KEEP stay. */
    assert_int_equal(dir_entries(victim, "groups"), 2);
    /* The new subject through the node that was behind. */
    bool acked = false;
    for (int t = 0; t < 5 && !acked; t++) {
        acked = cjs_publish(&cj, victim, "keep.y", "y", &l, 5000);
    }
    assert_true(acked);
    cjs_ledger_free(&l);
}

static int group_setup(void **state)
{
    (void)state;
    static const char *const extra[] = {"--snapshot_entries", "4", NULL};
    return cjs_start(&cj, NODES, "cjmi", extra, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_node_behind_the_meta_snapshot_takes_its_state),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
