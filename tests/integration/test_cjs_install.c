/* InstallSnapshot between nodes (docs/design.md §5, issues 7-8) with real
 * keelds in network namespaces: an R3 stream with small segments, a low
 * --snapshot_entries and a max_msgs limit (so the leader proposes
 * retention cuts and drops whole segments). A follower is stopped, the
 * leader publishes until its log starts past everything the follower
 * holds, the follower restarts and catches up through InstallSnapshot (its
 * log says so; its stream info and messages equal the leader's; after a
 * clean stop `keel store dump` shows the same entries at every index both
 * hold). Then the follower's newest snapshot file is damaged while it is
 * stopped: it moves the file to quarantine/, restores from what remains
 * (older snapshot + log, or the leader) and catches up again (§5 Extent).
 * Last, both of its snapshot files are damaged while its log starts past
 * index 1 (compacted): no valid snapshot is continued by its log, so the
 * log goes to quarantine/, the replica opens empty and amnesiac, and the
 * leader restores it by InstallSnapshot; it then leads and serves every
 * message (issue 8). The cases share one cluster and run in order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cjs_common.h"
#include "netns.h"

#define NODES 3
#define STREAM "INS"
#define MAX_MSGS 200
#define BEFORE 20      /* published while every node runs */
#define BATCH 250      /* published per round while the follower is down */
#define FIRST_ROUNDS 6 /* BATCHes past FAR_INDEX + the cut spacing */
#define WAIT_MS 20000  /* bounded waits for the cluster to agree */
#define REQ_MS 2000    /* one request's timeout */
#define FAR_INDEX                                                              \
    1000 /* the leader's log starts past this: the follower                    \
            (stopped near index BEFORE) cannot be served by                    \
            AppendEntries */

static struct h_netns net;
static natsConnection *nc[NODES];
static jsCtx *js[NODES];
static int follower = -1;
static int published;

static void disconnect(int i)
{
    jsCtx_Destroy(js[i]);
    natsConnection_Destroy(nc[i]);
    js[i] = NULL;
    nc[i] = NULL;
}

static int connect_node(int i)
{
    natsOptions *o = NULL;
    int rv = -1;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.PublishAsync.MaxPending = 256;
    if (natsOptions_Create(&o) == NATS_OK &&
        natsOptions_SetURL(o, net.node[i].k.url) == NATS_OK &&
        natsOptions_SetAllowReconnect(o, false) == NATS_OK &&
        natsConnection_Connect(&nc[i], o) == NATS_OK &&
        natsConnection_JetStream(&js[i], nc[i], &jo) == NATS_OK) {
        rv = 0;
    }
    natsOptions_Destroy(o);
    return rv;
}

static json_t *request(int i, const char *subject, const char *body)
{
    natsMsg *m = NULL;
    if (nc[i] == NULL || natsConnection_RequestString(&m, nc[i], subject, body,
                                                      REQ_MS) != NATS_OK) {
        return NULL;
    }
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    return o;
}

static bool is_error(const json_t *o)
{
    return o == NULL || json_object_get(o, "error") != NULL;
}

static bool meta_ready(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        json_t *o = request(i, "$JS.API.INFO", "");
        bool ok = !is_error(o);
        json_decref(o);
        if (!ok) {
            return false;
        }
    }
    return true;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < NODES; i++) {
        disconnect(i);
    }
    if (getenv("CJS_DEBUG") != NULL) {
        for (int i = 0; i < NODES; i++) {
            h_netns_print_log(&net, i);
        }
    }
    int rv = h_netns_cleanup(&net);
    nats_Close();
    return rv;
}

static int group_setup(void **state)
{
    static const char *const extra[] = {"--segment_size", "16384",
                                        "--snapshot_entries", "100", NULL};
    if (h_netns_start(&net, NODES, "cjsi", extra) != 0) {
        (void)group_teardown(state);
        return -1;
    }
    for (int i = 0; i < NODES; i++) {
        if (connect_node(i) != 0) {
            (void)group_teardown(state);
            return -1;
        }
    }
    if (!h_poll(meta_ready, NULL, WAIT_MS)) {
        fprintf(stderr, "no meta leader within %d ms\n", WAIT_MS);
        (void)group_teardown(state);
        return -1;
    }
    return 0;
}

static json_t *stream_info(int i)
{
    json_t *o = request(i, "$JS.API.STREAM.INFO." STREAM, "");
    if (is_error(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int leader_index(int i)
{
    json_t *o = stream_info(i);
    const char *l = json_string_value(
        json_object_get(json_object_get(o, "cluster"), "leader"));
    int idx = -1;
    for (int k = 0; l != NULL && k < NODES; k++) {
        if (strcmp(net.node[k].name, l) == 0) {
            idx = k;
        }
    }
    json_decref(o);
    return idx;
}

static bool stream_led_everywhere(void *arg)
{
    (void)arg;
    for (int i = 0; i < NODES; i++) {
        if (net.node[i].running && leader_index(i) < 0) {
            return false;
        }
    }
    return true;
}

/* A running node other than the follower that leads the stream. */
static int leader(void)
{
    for (int i = 0; i < NODES; i++) {
        if (i != follower && net.node[i].running) {
            int l = leader_index(i);
            if (l >= 0 && l != follower) {
                return l;
            }
        }
    }
    return -1;
}

static bool has_leader(void *arg)
{
    (void)arg;
    return leader() >= 0;
}

/* Publish n messages through node i, pipelined, all acked. */
static void publish(int i, int n)
{
    for (int k = 0; k < n; k++) {
        char subj[32], data[64];
        snprintf(subj, sizeof subj, "ins.%d", published % 7);
        snprintf(data, sizeof data, "ins-%06d-payload-payload-payload",
                 published);
        assert_int_equal(
            js_PublishAsync(js[i], subj, data, (int)strlen(data), NULL),
            NATS_OK);
        published++;
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = WAIT_MS;
    assert_int_equal(js_PublishAsyncComplete(js[i], &po), NATS_OK);
    natsMsgList pending;
    assert_int_equal(js_PublishAsyncGetPendingList(&pending, js[i]),
                     NATS_NOT_FOUND);
}

/* API requests are answered by the stream leader whichever node they
 * reach, so a node's own progress shows in its log line and in the
 * leader's view of its replica: current, no lag. */
static bool follower_current(void *arg)
{
    (void)arg;
    int l = leader();
    json_t *o = l >= 0 ? stream_info(l) : NULL;
    bool ok = cjs_replica_current(o, net.node[follower].name);
    json_decref(o);
    return ok;
}

struct log_wait {
    int node;
    const char *needle;
    int more_than;
};

static int count_in_log(int i, const char *needle);

static bool log_grew(void *arg)
{
    const struct log_wait *w = arg;
    return count_in_log(w->node, w->needle) > w->more_than;
}

static uint64_t log_start(int i)
{
    return h_log_start(net.node[i].k.data_dir);
}

static int count_in_log(int i, const char *needle)
{
    FILE *f = fopen(net.node[i].k.log_path, "r");
    char line[4096];
    int n = 0;
    if (f == NULL) {
        return 0;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        n += strstr(line, needle) != NULL;
    }
    fclose(f);
    return n;
}

static bool stream_created(void *arg)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"ins.>"};
    (void)arg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    cfg.MaxMsgs = MAX_MSGS;
    /* Right after the meta group elects, placement may not know every
     * peer yet: retried (bounded). */
    natsStatus s = js_AddStream(&si, js[0], &cfg, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    return s == NATS_OK;
}

static void create_stream(void)
{
    assert_true(h_poll(stream_created, NULL, WAIT_MS));
    assert_true(h_poll(stream_led_everywhere, NULL, WAIT_MS));
}

/* The last MAX_MSGS messages read back from node i are the published
 * ones. */
static void expect_messages(int i)
{
    for (int k = published - MAX_MSGS; k < published; k += 37) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        char want[64];
        snprintf(want, sizeof want, "ins-%06d-payload-payload-payload", k);
        natsStatus gs =
            js_GetMsg(&m, js[i], STREAM, (uint64_t)k + 1, NULL, &jerr);
        if (gs != NATS_OK) {
            fprintf(stderr, "seq %d on %s: %s (%d)\n", k + 1, net.node[i].name,
                    natsStatus_GetText(gs), (int)jerr);
        }
        assert_int_equal(gs, NATS_OK);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
        assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
        natsMsg_Destroy(m);
    }
}

/* Keep publishing a little until the leader's log starts past FAR_INDEX:
 * its retention cuts come from a 1 s tick, so the bound is in time, not in
 * messages (a fast publisher outruns the ticks). */
static bool leader_compacted(void *arg)
{
    int l = *(const int *)arg;
    if (log_start(l) > FAR_INDEX) {
        return true;
    }
    publish(l, BATCH / 5);
    return false;
}

/* Stop follower f, publish until the leader's log starts past FAR_INDEX. */
static void leave_behind(void)
{
    assert_true(h_poll(has_leader, NULL, WAIT_MS));
    int l = leader();
    follower = (l + 1) % NODES;
    disconnect(follower);
    assert_int_equal(h_netns_node_stop(&net, follower), 0);
    for (int r = 0; r < FIRST_ROUNDS; r++) {
        publish(l, BATCH); /* past FAR_INDEX + SRV_STREAM_CUT_ENTRIES_MIN */
    }
    bool ok = h_poll(leader_compacted, &l, 2 * WAIT_MS);
    fprintf(stderr, "leader %s: log starts at %" PRIu64 " after %d msgs\n",
            net.node[l].name, log_start(l), published);
    assert_true(ok);
}

static void restart_follower(void)
{
    assert_int_equal(h_netns_node_start(&net, follower), 0);
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);
    assert_int_equal(connect_node(follower), 0);
    if (!h_poll(follower_current, NULL, WAIT_MS)) {
        h_netns_print_log(&net, follower);
        fail_msg("follower %s did not catch up", net.node[follower].name);
    }
}

/* A counter of the stream's group in node i's /metrics (finding F29: an
 * operator sees installs and refusals); -1 when absent. */
static long long group_metric(int i, const char *name)
{
    static char body[256 * 1024];
    char key[128];
    if (h_netns_http_get(&net, i, "/metrics", body, sizeof body) != 200) {
        return -1;
    }
    snprintf(key, sizeof key, "%s{group=\"" STREAM "\"} ", name);
    const char *p = strstr(body, key);
    return p == NULL ? -1 : strtoll(p + strlen(key), NULL, 10);
}

static void
a_follower_behind_the_leaders_log_catches_up_by_install_snapshot(void **state)
{
    (void)state;
    create_stream();
    assert_true(h_poll(has_leader, NULL, WAIT_MS));
    publish(leader(), BEFORE);
    leave_behind();
    struct log_wait w = {follower, "installed snapshot", 0};
    w.more_than = count_in_log(follower, w.needle);
    int before = w.more_than;
    restart_follower();
    assert_true(h_poll(log_grew, &w, WAIT_MS));
    assert_true(h_poll(follower_current, NULL, WAIT_MS));
    int after = count_in_log(follower, w.needle);
    fprintf(stderr, "follower %s: %d install(s)\n", net.node[follower].name,
            after - before);
    assert_true(after > before);
    expect_messages(follower);
    /* The operator sees it in /metrics; nothing was refused. */
    assert_true(group_metric(follower, "keel_raft_snapshot_installs_total") >=
                1);
    assert_int_equal(
        group_metric(follower, "keel_raft_snapshot_install_repeats"), 0);
    /* It keeps up afterwards, by AppendEntries. */
    int l = leader();
    publish(l, 50);
    assert_true(h_poll(follower_current, NULL, WAIT_MS));
    expect_messages(follower);
}

/* Find the newest snapshot file of the stream group (the group whose log
 * starts furthest) on node i: path into out. */
static bool newest_snapshot(int i, char *out, size_t cap)
{
    char path[768];
    uint64_t best_start = 0;
    bool found = false;
    snprintf(path, sizeof path, "%s/js/groups", net.node[i].k.data_dir);
    DIR *g = opendir(path);
    assert_non_null(g);
    struct dirent *ge;
    while ((ge = readdir(g)) != NULL) {
        if (ge->d_name[0] == '.') {
            continue;
        }
        char sp[2048];
        snprintf(sp, sizeof sp, "%s/%s/snap", path, ge->d_name);
        DIR *d = opendir(sp);
        if (d == NULL) {
            continue;
        }
        uint64_t hi = 0;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            size_t n = strlen(e->d_name);
            if (n > 5 && strcmp(e->d_name + n - 5, ".snap") == 0) {
                uint64_t x = strtoull(e->d_name, NULL, 10);
                hi = x > hi ? x : hi;
            }
        }
        closedir(d);
        if (hi > best_start) {
            best_start = hi;
            snprintf(out, cap, "%s/%020" PRIu64 ".snap", sp, hi);
            found = true;
        }
    }
    closedir(g);
    return found;
}

/* Files in node i's quarantine/ whose name holds what (".snap", ".blk"). */
static int quarantined_files(int i, const char *what)
{
    char path[768];
    int n = 0;
    snprintf(path, sizeof path, "%s/js/quarantine", net.node[i].k.data_dir);
    DIR *d = opendir(path);
    if (d == NULL) {
        return 0;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += strstr(e->d_name, what) != NULL;
    }
    closedir(d);
    return n;
}

static int quarantined(int i)
{
    return quarantined_files(i, ".snap");
}

static void a_follower_whose_newest_snapshot_is_damaged_recovers_and_catches_up(
    void **state)
{
    (void)state;
    assert_true(follower >= 0);
    int l = leader();
    assert_true(l >= 0);
    publish(l, 150); /* a snapshot of the follower's own after the install */
    assert_true(h_poll(follower_current, NULL, WAIT_MS));
    disconnect(follower);
    assert_int_equal(h_netns_node_stop(&net, follower), 0);
    char snap[4096];
    assert_true(newest_snapshot(follower, snap, sizeof snap));
    struct stat st;
    assert_int_equal(stat(snap, &st), 0);
    FILE *f = fopen(snap, "r+b");
    assert_non_null(f);
    /* A flipped bit in the body: the file fails its XXH3-128. */
    assert_int_equal(fseek(f, st.st_size - 1, SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, st.st_size - 1, SEEK_SET), 0);
    fputc(c ^ 0x10, f);
    fclose(f);
    int q = quarantined(follower);
    publish(l, 60);
    restart_follower();
    assert_true(quarantined(follower) > q);
    expect_messages(follower);
}

/* One stream's entries, index -> "term payload", from `keel store dump`
 * of stopped node i. */
static json_t *dump(int i)
{
    char cmd[1024];
    const char *keel = getenv("KEEL");
    assert_non_null(keel);
    snprintf(cmd, sizeof cmd, "%s store dump --data %s --stream %s", keel,
             net.node[i].k.data_dir, STREAM);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    json_t *m = json_object();
    static char line[1 << 16];
    while (fgets(line, sizeof line, p) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        json_t *idx = json_object_get(o, "index");
        if (json_is_integer(idx)) {
            char key[32];
            snprintf(key, sizeof key, "%" JSON_INTEGER_FORMAT,
                     json_integer_value(idx));
            json_object_del(o, "index");
            json_object_set(m, key, o);
        }
        json_decref(o);
    }
    assert_int_equal(pclose(p), 0);
    return m;
}

static void every_node_holds_the_same_entries_after_a_clean_stop(void **state)
{
    (void)state;
    int l = leader();
    assert_true(l >= 0);
    assert_true(h_poll(follower_current, NULL, WAIT_MS));
    for (int i = 0; i < NODES; i++) {
        disconnect(i);
    }
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(h_netns_node_stop(&net, i), 0);
    }
    json_t *ld = dump(l);
    json_t *fd = dump(follower);
    size_t common = 0;
    const char *key;
    json_t *v;
    json_object_foreach(fd, key, v)
    {
        json_t *w = json_object_get(ld, key);
        if (w != NULL) {
            if (!json_equal(v, w)) {
                char *a = json_dumps(v, 0), *b = json_dumps(w, 0);
                fprintf(stderr, "index %s: follower %s, leader %s\n", key, a,
                        b);
                free(a);
                free(b);
            }
            assert_true(json_equal(v, w));
            common++;
        }
    }
    fprintf(stderr, "%zu entries on both (leader %zu, follower %zu)\n", common,
            json_object_size(ld), json_object_size(fd));
    assert_true(common >= MAX_MSGS);
    json_decref(ld);
    json_decref(fd);
}

/* Flip a bit in the last byte of file path (the body fails its
 * XXH3-128). */
static void flip_last_byte(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, st.st_size - 1, SEEK_SET), 0);
    int c = fgetc(f);
    assert_int_equal(fseek(f, st.st_size - 1, SEEK_SET), 0);
    fputc(c ^ 0x10, f);
    fclose(f);
}

/* The snapshot files of the stream group on node i (the group whose
 * newest snapshot is the highest); with damage, each one's last byte is
 * flipped (node i stopped). Returns how many. */
static int stream_snapshots(int i, bool damage)
{
    char snap[4096];
    assert_true(newest_snapshot(i, snap, sizeof snap));
    char *slash = strrchr(snap, '/');
    assert_non_null(slash);
    *slash = '\0';
    DIR *d = opendir(snap);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".snap") == 0) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", snap, e->d_name);
            if (damage) {
                flip_last_byte(path);
            }
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Poll: the running follower holds two snapshot files of the stream. Its
 * snapshots are written by a worker after it applies (and none while an
 * install is under way, decision 0041), so being current is not enough;
 * each try that finds fewer publishes 50 more, so another one falls due. */
static bool follower_has_two_snapshots(void *arg)
{
    (void)arg;
    if (stream_snapshots(follower, false) >= 2) {
        return true;
    }
    int l = leader();
    if (l >= 0) {
        publish(l, 50);
    }
    return false;
}

/* Poll: the stream is led by the follower (*arg true) or by another node
 * (false); a wrong leader is asked to step down. */
static bool led_by_follower_is(void *arg)
{
    bool want = *(const bool *)arg;
    int l = -1;
    for (int i = 0; i < NODES && l < 0; i++) {
        l = nc[i] != NULL ? leader_index(i) : -1;
    }
    if (l < 0) {
        return false;
    }
    if ((l == follower) == want) {
        return true;
    }
    json_decref(request(l, "$JS.API.STREAM.LEADER.STEPDOWN." STREAM, ""));
    return false;
}

static void
a_follower_whose_log_continues_no_valid_snapshot_heals_by_install_snapshot(
    void **state)
{
    (void)state;
    assert_true(follower >= 0);
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(h_netns_node_start(&net, i), 0);
    }
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);
    for (int i = 0; i < NODES; i++) {
        assert_int_equal(connect_node(i), 0);
    }
    assert_true(h_poll(meta_ready, NULL, WAIT_MS));
    bool led = false;
    assert_true(h_poll(led_by_follower_is, &led, WAIT_MS));
    int l = leader();
    assert_true(l >= 0);
    publish(l, 150);
    assert_true(h_poll(follower_has_two_snapshots, NULL, WAIT_MS));
    assert_true(h_poll(follower_current, NULL, WAIT_MS));
    disconnect(follower);
    assert_int_equal(h_netns_node_stop(&net, follower), 0);
    /* Its log starts past index 1: without a valid snapshot it cannot
     * rebuild the state (docs/design.md §5). */
    assert_true(log_start(follower) > 1);
    assert_true(stream_snapshots(follower, true) >= 2);
    int qlog = quarantined_files(follower, ".blk");
    struct log_wait w = {follower, "installed snapshot", 0};
    w.more_than = count_in_log(follower, w.needle);
    int healed = count_in_log(follower, "opened empty and amnesiac");
    publish(l, 60);
    restart_follower(); /* bounded wait until the leader sees it current */
    assert_true(h_poll(log_grew, &w, WAIT_MS));
    assert_true(count_in_log(follower, "opened empty and amnesiac") > healed);
    fprintf(stderr, "follower %s: %d log file(s) quarantined\n",
            net.node[follower].name,
            quarantined_files(follower, ".blk") - qlog);
    assert_true(quarantined_files(follower, ".blk") > qlog);
    /* Every message is served by the healed replica: the leader stops
     * (the healed one now counts for every commit) and a step-down of
     * the third node, if it won, hands over to the healed one (the only
     * voter it hears from). */
    disconnect(l);
    assert_int_equal(h_netns_node_stop(&net, l), 0);
    led = true;
    assert_true(h_poll(led_by_follower_is, &led, WAIT_MS));
    for (int k = published - MAX_MSGS; k < published; k++) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        char want[64];
        snprintf(want, sizeof want, "ins-%06d-payload-payload-payload", k);
        natsStatus gs =
            js_GetMsg(&m, js[follower], STREAM, (uint64_t)k + 1, NULL, &jerr);
        if (gs != NATS_OK) {
            fprintf(stderr, "seq %d: %s (%d)\n", k + 1, natsStatus_GetText(gs),
                    (int)jerr);
        }
        assert_int_equal(gs, NATS_OK);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
        assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
        natsMsg_Destroy(m);
    }
    /* It also takes new messages as leader. */
    publish(follower, 20);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_follower_behind_the_leaders_log_catches_up_by_install_snapshot),
        cmocka_unit_test(
            a_follower_whose_newest_snapshot_is_damaged_recovers_and_catches_up),
        cmocka_unit_test(every_node_holds_the_same_entries_after_a_clean_stop),
        cmocka_unit_test(
            a_follower_whose_log_continues_no_valid_snapshot_heals_by_install_snapshot),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
