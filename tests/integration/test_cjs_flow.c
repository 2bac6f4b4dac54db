/* Flow control from a leader to a catching-up follower (finding F25,
 * docs/cluster.md "Flow control"): real keelds in network namespaces, an
 * R3 stream of 256 KiB messages. A follower is stopped while the leader
 * takes a backlog of tens of MB, then started again: first on its disk
 * (it catches up by InstallSnapshot and AppendEntries), then with its
 * stream log truncated (it opens on its snapshot, far behind),
 * and paused 1.5 s at a time while it catches up (a slow follower). Each
 * time the follower is current within a bound, the leader's link to
 * it never queued more than the held-back bound plus one frame (its
 * /routez pending_bytes_max), and no link was dropped with its outbound
 * queue full. Before the fix the leader queued 56 MB for the follower on
 * its disk and dropped the link to the one that lost its log ("outbound
 * queue full"). Last, a follower that lost its log installs the whole
 * stream (296 MiB) with no loop turn of a second (decision 0041; before,
 * the install held its loop 1.2-1.9 s). The cases share one cluster and run
 * in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <nats/nats.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cjs_common.h"
#include "keel/limits.h"

#define NODES 3
#define STREAM "FLOW"
#define MSG_BYTES (256 * 1024)
#define BACKLOG 160     /* messages published while the follower is down */
#define BIG_BACKLOG 960 /* the same, before the large install (240 MiB) */
#define WAIT_MS 20000   /* bounded waits for the cluster to agree */
#define CATCH_MS 90000  /* the follower is current within this */
#define PAUSE_MS 1500   /* the follower is stopped this long at a time */
#define RUN_MS 1000     /* and runs at least this long between pauses */
#define BODY_BYTES (256 * 1024)
#define META_GID "59863ec3cba286dee3d66a831eb83c98" /* keel-js-meta */
/* What a link may queue: the held-back bound, then one frame that started
 * below it, and small frames (heartbeats, answers). */
#define QUEUE_BOUND                                                            \
    (SRV_CLUSTER_LINK_GROUP_BYTES_MAX + SRV_CLUSTER_FRAME_BYTES_MAX +          \
     1024 * 1024)
#define DROPPED "outbound queue full"

static struct cjs cj;
static int leader = -1;
static int follower = -1;
static int published;
static char payload[MSG_BYTES];
static char body[BODY_BYTES];

static int group_setup(void **state)
{
    /* Snapshots every 50 entries: the leader's log is compacted past an
     * amnesiac follower, which then needs InstallSnapshot. */
    static const char *const extra[] = {"--snapshot_entries", "50", NULL};
    (void)state;
    memset(payload, 'f', sizeof payload);
    return cjs_start(&cj, NODES, "cjsf", extra, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

/* Publish n messages of MSG_BYTES through node i, pipelined, all acked. */
static void publish(int i, int n)
{
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = WAIT_MS;
    for (int k = 0; k < n; k++) {
        char id[32];
        int len = snprintf(id, sizeof id, "flow-%06d-", published);
        memcpy(payload, id, (size_t)len);
        assert_int_equal(js_PublishAsync(cj.js[i], "flow.x", payload,
                                         (int)sizeof payload, NULL),
                         NATS_OK);
        published++;
        if (k % 16 == 15) {
            assert_int_equal(js_PublishAsyncComplete(cj.js[i], &po), NATS_OK);
        }
    }
    assert_int_equal(js_PublishAsyncComplete(cj.js[i], &po), NATS_OK);
    natsMsgList pending;
    assert_int_equal(js_PublishAsyncGetPendingList(&pending, cj.js[i]),
                     NATS_NOT_FOUND);
}

/* The leader's view of the follower's replica: current, no lag. */
static bool follower_current(void *arg)
{
    (void)arg;
    json_t *o = cjs_stream_info(&cj, leader, STREAM);
    bool ok = cjs_replica_current(o, cj.net.node[follower].name);
    json_decref(o);
    return ok;
}

/* The most bytes node i's link to node peer queued (its /routez), -1 when
 * not shown. */
static long long queue_peak(int i, int peer)
{
    long long peak = -1;
    if (h_netns_http_get(&cj.net, i, "/routez", body, sizeof body) != 200) {
        return -1;
    }
    json_t *o = json_loads(body, 0, NULL);
    size_t k;
    json_t *r;
    json_array_foreach(json_object_get(o, "routes"), k, r)
    {
        const char *n = json_string_value(json_object_get(r, "remote_name"));
        if (n != NULL && strcmp(n, cj.net.node[peer].name) == 0) {
            json_t *v = json_object_get(r, "pending_bytes_max");
            peak = json_is_integer(v) ? json_integer_value(v) : -1;
            fprintf(stderr, "%s -> %s: pending_bytes_max %lld held_back %lld\n",
                    cj.net.node[i].name, n, peak,
                    json_integer_value(json_object_get(r, "held_back")));
        }
    }
    json_decref(o);
    return peak;
}

/* Truncate every segment of node i's stream log to its first byte: the
 * records are lost; the replica opens on its snapshot, behind the leader's
 * compacted log, and is restored by InstallSnapshot. */
static void truncate_stream_log(int i)
{
    char groups[512];
    snprintf(groups, sizeof groups, "%s/js/groups", cj.net.node[i].k.data_dir);
    DIR *d = opendir(groups);
    assert_non_null(d);
    struct dirent *g;
    int cut = 0;
    while ((g = readdir(d)) != NULL) {
        if (g->d_name[0] == '.' || strcmp(g->d_name, META_GID) == 0) {
            continue;
        }
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s/log", groups, g->d_name);
        DIR *l = opendir(dir);
        struct dirent *e;
        while (l != NULL && (e = readdir(l)) != NULL) {
            size_t nl = strlen(e->d_name);
            if (nl > 4 && strcmp(e->d_name + nl - 4, ".blk") == 0) {
                char path[1400];
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                assert_int_equal(truncate(path, 1), 0);
                cut++;
            }
        }
        if (l != NULL) {
            closedir(l);
        }
    }
    closedir(d);
    assert_true(cut > 0);
}

/* Stop a follower, give the leader a backlog of n messages, start the
 * follower again (its log lost if asked). */
static void leave_behind(int n, bool lost_log)
{
    leader = cjs_wait_stream_led(&cj, STREAM, WAIT_MS);
    assert_true(leader >= 0);
    follower = (leader + 1) % NODES;
    cjs_disconnect(&cj, follower);
    assert_int_equal(h_netns_node_stop(&cj.net, follower), 0);
    publish(leader, n);
    if (lost_log) {
        truncate_stream_log(follower);
    }
    assert_int_equal(h_netns_node_start(&cj.net, follower), 0);
    assert_int_equal(h_netns_wait_mesh(&cj.net, WAIT_MS), 0);
}

/* leave_behind, then slow the follower down and check how the leader fed
 * it. */
static void catch_up(bool lost_log)
{
    leave_behind(BACKLOG, lost_log);
    assert_int_equal(cjs_connect(&cj, follower), 0);
    /* A slow follower: paused PAUSE_MS at a time while it catches up
     * (time, not synchronisation: how long the fault lasts; under
     * SRV_CLUSTER_DEAD_MS, so its links stay up). Meanwhile the leader
     * hears nothing from it and sends again from what it acknowledged. */
    long long until = h_now_ms() + CATCH_MS;
    int pauses = 0;
    while (!follower_current(NULL) && h_now_ms() < until) {
        assert_int_equal(kill(cj.net.node[follower].k.pid, SIGSTOP), 0);
        usleep(PAUSE_MS * 1000);
        assert_int_equal(kill(cj.net.node[follower].k.pid, SIGCONT), 0);
        pauses++;
        (void)h_poll(follower_current, NULL, RUN_MS);
    }
    fprintf(stderr, "follower %s: %d pause(s)\n", cj.net.node[follower].name,
            pauses);
    if (!h_poll(follower_current, NULL, WAIT_MS)) {
        h_netns_print_log(&cj.net, leader);
        fail_msg("follower %s not current within %d ms",
                 cj.net.node[follower].name, CATCH_MS + WAIT_MS);
    }
    for (int i = 0; i < NODES; i++) {
        assert_false(cjs_log_has(&cj, i, DROPPED));
    }
    long long peak = queue_peak(leader, follower);
    assert_true(peak > 0);
    assert_true(peak <= QUEUE_BOUND);
    /* It keeps up afterwards. */
    publish(leader, 8);
    assert_true(h_poll(follower_current, NULL, WAIT_MS));
}

static void a_follower_back_from_a_stop_gets_a_bounded_backlog(void **state)
{
    (void)state;
    cjs_add_stream(&cj, 0, STREAM, "flow.>", 3, WAIT_MS);
    leader = cjs_wait_stream_led(&cj, STREAM, WAIT_MS);
    assert_true(leader >= 0);
    publish(leader, 8);
    catch_up(false);
}

static void a_follower_that_lost_its_log_gets_a_bounded_backlog(void **state)
{
    (void)state;
    catch_up(true);
}

/* The count of node i's loop turns of a second or more and its longest
 * turn (its /metrics: the +Inf bucket less the le="1" one), -1 when not
 * shown. */
static long long slow_turns(int i, double *max_s)
{
    static const char inf[] = "keel_loop_turn_seconds_bucket{le=\"+Inf\"} ";
    static const char one[] = "keel_loop_turn_seconds_bucket{le=\"1\"} ";
    static const char max[] = "keel_loop_turn_max_seconds{phase=";
    if (h_netns_http_get(&cj.net, i, "/metrics", body, sizeof body) != 200) {
        return -1;
    }
    const char *a = strstr(body, inf);
    const char *b = strstr(body, one);
    const char *m = strstr(body, max);
    const char *v = m != NULL ? strstr(m, "} ") : NULL;
    if (a == NULL || b == NULL || v == NULL) {
        return -1;
    }
    *max_s = strtod(v + 2, NULL);
    fprintf(stderr, "%s: %.*s\n", cj.net.node[i].name, (int)strcspn(m, "\n"),
            m);
    return strtoll(a + strlen(inf), NULL, 10) -
           strtoll(b + strlen(one), NULL, 10);
}

/* A follower that lost its log installs the whole stream (its retained
 * log, 296 MiB by now) from the leader: reading, checking and writing
 * it never holds the follower's loop for a second (decision 0041; before,
 * the whole install ran inside the link's read callback: turns of
 * seconds, finding F28). */
static void
a_follower_installing_a_large_log_keeps_its_turns_short(void **state)
{
    (void)state;
    leave_behind(BIG_BACKLOG, true);
    double max_before = 0, max_after = 0;
    long long before = slow_turns(follower, &max_before);
    assert_true(before >= 0);
    if (!h_poll(follower_current, NULL, CATCH_MS)) {
        h_netns_print_log(&cj.net, follower);
        fail_msg("follower %s not current within %d ms",
                 cj.net.node[follower].name, CATCH_MS);
    }
    long long after = slow_turns(follower, &max_after);
    fprintf(stderr,
            "follower %s: turns of 1 s or more %lld before the install, "
            "%lld after; longest turn %.3f s, then %.3f s\n",
            cj.net.node[follower].name, before, after, max_before, max_after);
    /* The leader spools the transfer in one turn (open: decision 0041);
     * shown, not asserted. */
    double lmax = 0;
    long long lslow = slow_turns(leader, &lmax);
    fprintf(stderr, "leader %s: turns of 1 s or more %lld, longest %.3f s\n",
            cj.net.node[leader].name, lslow, lmax);
    assert_int_equal(after, before);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_follower_back_from_a_stop_gets_a_bounded_backlog),
        cmocka_unit_test(a_follower_that_lost_its_log_gets_a_bounded_backlog),
        cmocka_unit_test(
            a_follower_installing_a_large_log_keeps_its_turns_short),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
