/* Cluster reconfiguration under a publish load (issue 9), keelds in
 * network namespaces (netns.c): n1..n3 are the seeds and form the meta
 * group, n4 and n5 start later on empty data directories with --routes
 * naming the seeds; an R3 stream takes acked publishes from a thread all
 * along, and every acked message reads back at its sequence at the end.
 *
 * 1. `keel cluster add-peer n4` (learner, then voter); n3 is killed and
 *    `remove-peer n3` takes it out; the meta leader moves the stream's
 *    replica from n3 to n4; with n1 killed too, n2 and n4 commit.
 * 2. Grow 3 -> 5 (add n4, n5), the stream R3 -> R5 -> R3, one replica
 *    moved off a follower (remove-peer --stream), transfer the meta
 *    leadership to n4, shrink
 *    back (remove the leader n4: it hands over first; remove n5); then
 *    n2's disk is wiped: remove the old n2, add the new one, the stream's
 *    replica moves to it, and with n1 killed n2 and n3 commit.
 * 3. (8 KiB segments, no load) n2 and n3 lose the last segment of the
 *    stream's log: amnesiac, no leader; `keel cluster recover` surveys and
 *    prints the plan, `--accept-loss` applies it (n1 the source), and every
 *    acked message is there, new publishes too.
 * 4. n2 leads the stream and is removed alive (finding F13): remove-peer
 *    returns once the stream's replica moved off n2.
 * 5. As 3, but the override reaches only n2 and n3 while n1 (the source)
 *    is down, and one of them restarts: the recorded recover wait keeps it
 *    from campaigning until n1 is back and leads.
 * 6. n3's meta.lmdb is reset (finding F14): the meta leader replaces its
 *    old incarnation by itself and the stream's replica comes back.
 * 7. (snapshots every 50 entries) every replica's two snapshots are damaged
 *    and its log cut at a different point: each quarantines its log and
 *    opens empty; `keel cluster recover --accept-loss` restores the
 *    longest quarantined log (n1's) and every message it held is back
 *    (docs/decisions/0031-recover-reads-quarantined-logs.md).
 * 8. As 7 on n2 and n3 only: n1's live log holds more and is the source;
 *    n2 and n3 restore theirs to vote, and nothing acked is lost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netns.h"

#define NODES 5
#define SEEDS 3
#define STREAM "RC"
#define WAIT_MS 20000 /* bounded waits for the cluster to agree */
#define REQ_MS 2000   /* one request's timeout */
#define SEQ_MAX 100000

static struct h_netns net;
static natsConnection *nc[NODES];
static jsCtx *js[NODES];
static char **acked; /* payload acked at each sequence */
static atomic_int n_acked;
static atomic_bool stop_pub;
static pthread_t pub_th;
static const char *const *node_extra; /* extra keeld flags of the next setup */
static bool pub_running; /* teardown stops it after a failed assertion */
static int info_via = 1; /* the node stream info is asked through */

static int connect_node(int i)
{
    natsOptions *o = NULL;
    int rv = -1;
    if (natsOptions_Create(&o) == NATS_OK &&
        natsOptions_SetURL(o, net.node[i].k.url) == NATS_OK &&
        natsOptions_SetAllowReconnect(o, false) == NATS_OK &&
        natsConnection_Connect(&nc[i], o) == NATS_OK &&
        natsConnection_JetStream(&js[i], nc[i], NULL) == NATS_OK) {
        rv = 0;
    }
    natsOptions_Destroy(o);
    return rv;
}

static bool connected(void *arg)
{
    int i = *(int *)arg;
    return connect_node(i) == 0;
}

static void disconnect(int i)
{
    jsCtx_Destroy(js[i]);
    natsConnection_Destroy(nc[i]);
    js[i] = NULL;
    nc[i] = NULL;
}

/* A request's JSON reply, errors included; NULL on timeout. */
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

static bool answers_info(void *arg)
{
    int i = *(int *)arg;
    json_t *o = request(i, "$JS.API.INFO", "");
    bool ok = o != NULL && json_object_get(o, "error") == NULL;
    json_decref(o);
    return ok;
}

/* A fresh cluster per test: n1..n3 seeds, n4 and n5 ready to start. */
static int setup(void **state)
{
    (void)state;
    info_via = 1;
    atomic_store(&n_acked, 0);
    atomic_store(&stop_pub, false);
    acked = calloc(SEQ_MAX + 1, sizeof *acked);
    if (acked == NULL ||
        h_netns_start_seeds(&net, NODES, SEEDS, "cjsrc", node_extra) != 0) {
        return -1;
    }
    for (int i = 0; i < SEEDS; i++) {
        if (connect_node(i) != 0 || !h_poll(answers_info, &i, WAIT_MS)) {
            return -1;
        }
    }
    return 0;
}

static void stop_load(void);

/* Segments of 8 KiB: a cut inside the last one leaves the earlier ones
 * (and the group's configuration at index 1) in place. */
static int setup_small_segments(void **state)
{
    static const char *const small[] = {"--segment_size", "8192", NULL};
    node_extra = small;
    int rv = setup(state);
    node_extra = NULL;
    return rv;
}

static int teardown(void **state)
{
    (void)state;
    stop_load();
    for (int i = 0; i < NODES; i++) {
        disconnect(i);
    }
    for (int s = 0; acked != NULL && s <= SEQ_MAX; s++) {
        free(acked[s]);
    }
    free(acked);
    acked = NULL;
    return h_netns_cleanup(&net);
}

/* The publish load: through n1 (never stopped), each payload once; a
 * failed publish (a leader moving) leaves its outcome open, the next one
 * has a new payload. */
static void *publisher(void *arg)
{
    jsPubOptions po;
    (void)arg;
    jsPubOptions_Init(&po);
    po.MaxWait = REQ_MS;
    for (int k = 0; !atomic_load(&stop_pub); k++) {
        char data[32];
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        snprintf(data, sizeof data, "m%d", k);
        if (js_Publish(&pa, js[0], "rc.x", data, (int)strlen(data), &po,
                       &jerr) != NATS_OK) {
            continue;
        }
        uint64_t seq = pa->Sequence;
        jsPubAck_Destroy(pa);
        if (seq >= 1 && seq <= SEQ_MAX && acked[seq] == NULL) {
            acked[seq] = strdup(data);
            atomic_fetch_add(&n_acked, 1);
        }
    }
    return NULL;
}

/* Run keel (the CLI) with args; its stdout into out. Exit status. */
static int keel(char *out, size_t len, const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    const char *bin = getenv("KEEL");
    assert_non_null(bin);
    int n = snprintf(cmd, sizeof cmd, "%s ", bin);
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, len - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    printf("# %s ->\n%s", cmd, out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool acked_at_least(void *arg)
{
    return atomic_load(&n_acked) >= *(int *)arg;
}

/* More acks arrive (the load goes on through the change). */
static void load_goes_on(int more)
{
    int want = atomic_load(&n_acked) + more;
    assert_true(h_poll(acked_at_least, &want, WAIT_MS));
}

/* The meta leader's view of a peer ("none": not a member). */
static char *role_of(const char *peer)
{
    char body[64];
    snprintf(body, sizeof body, "{\"peer\":\"%s\"}", peer);
    json_t *o = request(0, "$KEEL.API.CLUSTER.PEER.INFO", body);
    const char *r = json_string_value(json_object_get(o, "role"));
    char *s = strdup(r != NULL ? r : "none");
    json_decref(o);
    return s;
}

/* Stream info (through n2) lists want_n replicas, each current, all named
 * in want (NULL: any names), and the group's voters are its placement. */
static bool replicas_match(const char *want, size_t want_n)
{
    json_t *o = request(info_via, "$JS.API.STREAM.INFO." STREAM, "");
    json_t *c = json_object_get(o, "cluster");
    const char *leader = json_string_value(json_object_get(c, "leader"));
    bool ok = leader != NULL && (want == NULL || strstr(want, leader) != NULL);
    size_t n = leader != NULL ? 1 : 0;
    size_t k;
    json_t *r;
    json_array_foreach(json_object_get(c, "replicas"), k, r)
    {
        const char *name = json_string_value(json_object_get(r, "name"));
        ok = ok && name != NULL &&
             (want == NULL || strstr(want, name) != NULL) &&
             json_is_true(json_object_get(r, "current"));
        n++;
    }
    ok = ok && json_object_get(c, "reconfiguring") == NULL;
    json_decref(o);
    return ok && n == want_n;
}

/* arg: a comma list of exactly the replicas wanted. */
static bool replicas_are(void *arg)
{
    const char *want = arg;
    size_t want_n = 1;
    for (const char *p = want; *p != '\0'; p++) {
        want_n += *p == ',' ? 1 : 0;
    }
    return replicas_match(want, want_n);
}

static bool three_replicas(void *arg)
{
    (void)arg;
    return replicas_match(NULL, 3);
}

/* The first follower stream info names (its name copied into out). */
static void a_follower(char *out, size_t len)
{
    json_t *o = request(info_via, "$JS.API.STREAM.INFO." STREAM, "");
    json_t *r = json_array_get(
        json_object_get(json_object_get(o, "cluster"), "replicas"), 0);
    const char *name = json_string_value(json_object_get(r, "name"));
    assert_non_null(name);
    snprintf(out, len, "%s", name);
    json_decref(o);
}

/* Three current replicas, none of them on node arg (a name). */
static bool moved_off(void *arg)
{
    const char *gone = arg;
    json_t *o = request(info_via, "$JS.API.STREAM.INFO." STREAM, "");
    char *s = json_dumps(o, JSON_COMPACT);
    char quoted[32];
    snprintf(quoted, sizeof quoted, "\"%s\"", gone);
    bool ok = s != NULL && strstr(s, quoted) == NULL;
    free(s);
    json_decref(o);
    return ok && three_replicas(NULL);
}

/* Change the stream's num_replicas through node i. */
static void set_replicas(int i, int r)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    jsStreamConfig cfg;
    const char *subjects[] = {"rc.>"};
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = r;
    assert_int_equal(js_UpdateStream(&si, js[i], &cfg, NULL, &jerr), NATS_OK);
    assert_int_equal((int)si->Config->Replicas, r);
    jsStreamInfo_Destroy(si);
}

/* Publish through node i until acked (the load thread has stopped). */
static void publish_more(int i, int k)
{
    char data[128];
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = REQ_MS;
    /* ~100 bytes: a few hundred fill several small segments. */
    snprintf(data, sizeof data, "late%d-%090d", k, 0);
    long long t0 = h_now_ms();
    for (;;) {
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        if (js_Publish(&pa, js[i], "rc.y", data, (int)strlen(data), &po,
                       &jerr) == NATS_OK) {
            assert_true(pa->Sequence <= SEQ_MAX);
            assert_null(acked[pa->Sequence]);
            acked[pa->Sequence] = strdup(data);
            atomic_fetch_add(&n_acked, 1);
            jsPubAck_Destroy(pa);
            return;
        }
        assert_true(h_now_ms() - t0 < WAIT_MS);
    }
}

static void check_acked(int i)
{
    int checked = 0;
    for (uint64_t s = 1; s <= SEQ_MAX; s++) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        if (acked[s] == NULL) {
            continue;
        }
        assert_int_equal(js_GetMsg(&m, js[i], STREAM, s, NULL, &jerr), NATS_OK);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(acked[s]));
        assert_memory_equal(natsMsg_GetData(m), acked[s], strlen(acked[s]));
        natsMsg_Destroy(m);
        checked++;
    }
    assert_int_equal(checked, atomic_load(&n_acked));
}

/* The R3 stream through n1 (a fresh meta group may still answer 503
 * "temporarily unavailable" for a moment: asked again, bounded). */
static bool stream_added(void *arg)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"rc.>"};
    (void)arg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    natsStatus s = js_AddStream(&si, js[0], &cfg, NULL, &jerr);
    jsStreamInfo_Destroy(si);
    return s == NATS_OK;
}

/* The R3 stream on n1..n3 and the publish load through n1. */
static void start_load(void)
{
    assert_true(h_poll(stream_added, NULL, WAIT_MS));
    assert_int_equal(pthread_create(&pub_th, NULL, publisher, NULL), 0);
    pub_running = true;
    load_goes_on(50);
}

static void stop_load(void)
{
    atomic_store(&stop_pub, true);
    if (pub_running) {
        pthread_join(pub_th, NULL);
        pub_running = false;
        printf("# %d acked publishes through the changes\n",
               atomic_load(&n_acked));
    }
}

/* Stop the load, check every ack through n1 and node i, kill n1 and
 * publish through node i: the stream's two other voters must commit. */
static void finish_without_n1(int i)
{
    stop_load();
    check_acked(0);
    check_acked(i);
    disconnect(0);
    assert_int_equal(h_netns_node_kill(&net, 0), 0);
    for (int k = 0; k < 10; k++) {
        publish_more(i, k);
    }
    check_acked(i);
}

/* Start node i (empty data directory) and add it: a voter afterwards. */
static void add_node(int i, int via)
{
    char out[4096];
    assert_int_equal(h_netns_node_start(&net, i), 0);
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);
    assert_true(h_poll(connected, &i, WAIT_MS));
    if (keel(out, sizeof out, "cluster add-peer %s -s %s --wait 60s 2>&1",
             net.node[i].name, net.node[via].k.url) != 0) {
        h_netns_print_log(&net, i);
        fail_msg("%s was not added", net.node[i].name);
    }
    char *r = role_of(net.node[i].name);
    assert_string_equal(r, "voter");
    free(r);
    assert_true(h_poll(answers_info, &i, WAIT_MS));
}

static void remove_node(const char *name, int via)
{
    char out[4096];
    assert_int_equal(keel(out, sizeof out,
                          "cluster remove-peer %s -s %s --wait 60s 2>&1", name,
                          net.node[via].k.url),
                     0);
    assert_non_null(strstr(out, "removed from the meta group"));
    char *r = role_of(name);
    assert_string_equal(r, "none");
    free(r);
}

/* Node i leads the meta group (its /jsz). */
static bool meta_led_by(void *arg)
{
    int i = *(int *)arg;
    char body[16384];
    if (h_netns_http_get(&net, i, "/jsz", body, sizeof body) != 200) {
        return false;
    }
    json_t *o = json_loads(body, 0, NULL);
    const char *r = json_string_value(
        json_object_get(json_object_get(o, "meta_cluster"), "leader_role"));
    bool ok = r != NULL && strcmp(r, "leader") == 0;
    json_decref(o);
    return ok;
}

static void grow_to_five_shrink_back_and_replace_a_wiped_node(void **state)
{
    (void)state;
    char out[4096];
    start_load();
    /* Grow 3 -> 5, one node at a time. */
    add_node(3, 1);
    add_node(4, 2);
    load_goes_on(50);
    /* The stream follows: R5 on every node, then back to R3. */
    set_replicas(0, 5);
    assert_true(h_poll(replicas_are, "n1,n2,n3,n4,n5", 3 * WAIT_MS));
    load_goes_on(50);
    set_replicas(1, 3);
    assert_true(h_poll(three_replicas, NULL, 3 * WAIT_MS));
    /* One replica moves off a node that stays (STREAM.PEER.REMOVE). */
    char follower[16];
    a_follower(follower, sizeof follower);
    assert_int_equal(keel(out, sizeof out,
                          "cluster remove-peer %s --stream " STREAM
                          " -s %s 2>&1",
                          follower, net.node[2].k.url),
                     0);
    assert_non_null(strstr(out, "moves to another node"));
    assert_true(h_poll(moved_off, follower, 3 * WAIT_MS));
    load_goes_on(50);
    /* Hand the meta group to n4, then shrink back to 3: removing the
     * leader n4 makes it hand over first (the CLI retries meanwhile). */
    assert_int_equal(keel(out, sizeof out,
                          "cluster transfer-leader --to n4 -s %s 2>&1",
                          net.node[0].k.url),
                     0);
    int n4 = 3;
    assert_true(h_poll(meta_led_by, &n4, WAIT_MS));
    remove_node("n4", 0);
    remove_node("n5", 1);
    /* Stop them only once the stream's replicas moved off them. */
    assert_true(h_poll(moved_off, "n4", 3 * WAIT_MS));
    assert_true(h_poll(moved_off, "n5", 3 * WAIT_MS));
    disconnect(3);
    disconnect(4);
    assert_int_equal(h_netns_node_stop(&net, 3), 0);
    assert_int_equal(h_netns_node_stop(&net, 4), 0);
    load_goes_on(50);
    /* n2's disk is replaced: same name, empty data directory. It waits;
     * the operator removes the old n2 and adds the new one, and the
     * stream's replica moves to it. */
    disconnect(1);
    assert_int_equal(h_netns_node_kill(&net, 1), 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'",
             net.node[1].k.data_dir, net.node[1].k.data_dir);
    assert_int_equal(system(cmd), 0);
    load_goes_on(50);
    remove_node("n2", 2);
    add_node(1, 2);
    assert_true(h_poll(replicas_are, "n1,n2,n3", 3 * WAIT_MS));
    load_goes_on(50);
    /* The new n2 votes in the stream's group: with n1 gone, n2 and n3
     * commit. */
    finish_without_n1(1);
}

/* The survey keel cluster recover prints (without --accept-loss) shows
 * two amnesiac replicas of the stream and no leader. */
static bool two_amnesiac(void *arg)
{
    char *out = arg;
    int rv =
        keel(out, 4096, "cluster recover --stream " STREAM " -s %s,%s,%s 2>&1",
             net.node[0].k.url, net.node[1].k.url, net.node[2].k.url);
    const char *a = strstr(out, "amnesiac");
    return rv == 1 && a != NULL && strstr(a + 1, "amnesiac") != NULL &&
           strstr(out, "LEADER") == NULL;
}

/* 300 acked messages on n1..n3; every node stops, n2 and n3 lose the
 * tail of the stream's log and all restart: no leader (out: the survey). */
static void a_majority_loses_the_tail_of_its_log(char *out)
{
    assert_true(h_poll(stream_added, NULL, WAIT_MS));
    for (int k = 0; k < 300; k++) {
        publish_more(0, k);
    }
    assert_true(h_poll(three_replicas, NULL, 3 * WAIT_MS));
    /* Every node stops; n2 and n3 lose the tail of the stream's log (the
     * segment cut inside the last acked record): they restart amnesiac,
     * vote for nobody, and n1 alone cannot be elected. */
    for (int i = 0; i < SEEDS; i++) {
        disconnect(i);
        assert_int_equal(h_netns_node_stop(&net, i), 0);
    }
    for (int i = 1; i < SEEDS; i++) {
        char path[1024];
        off_t off = 0;
        assert_int_equal(
            h_netns_find_in_blk(&net, i, "late299-", path, sizeof path, &off),
            0);
        assert_int_equal(truncate(path, off), 0);
    }
    for (int i = 0; i < SEEDS; i++) {
        assert_int_equal(h_netns_node_start(&net, i), 0);
        assert_true(h_poll(connected, &i, WAIT_MS));
    }
    assert_true(h_poll(two_amnesiac, out, 3 * WAIT_MS));
    assert_non_null(strstr(out, "rerun with --accept-loss"));
}

static void recover_after_a_majority_lost_the_tail_of_its_log(void **state)
{
    (void)state;
    char out[4096];
    a_majority_loses_the_tail_of_its_log(out);
    /* The operator accepts the loss: n1 (the longest log) is the source. */
    assert_int_equal(keel(out, sizeof out,
                          "cluster recover --accept-loss --stream " STREAM
                          " -s %s,%s,%s 2>&1",
                          net.node[0].k.url, net.node[1].k.url,
                          net.node[2].k.url),
                     0);
    assert_non_null(strstr(out, "source n1"));
    assert_non_null(strstr(out, "MAY BE LOST"));
    assert_true(h_poll(three_replicas, NULL, 3 * WAIT_MS));
    for (int k = 300; k < 310; k++) {
        publish_more(1, k);
    }
    for (int i = 0; i < SEEDS; i++) {
        check_acked(i);
    }
}

/* Node i's /healthz names what keeps it out: not a meta member (F14: the
 * operator must learn the commands from it, not "no meta leader"). */
static bool outsider_reported(void *arg)
{
    char body[2048];
    return h_netns_http_get(&net, *(const int *)arg, "/healthz", body,
                            sizeof body) == 503 &&
           strstr(body, "not a member of the meta group") != NULL &&
           strstr(body, "keel cluster add-peer") != NULL;
}

static void a_node_is_added_and_a_dead_one_removed_under_load(void **state)
{
    (void)state;
    char out[4096];
    start_load();

    /* A new node on empty storage: not a member until added. */
    assert_int_equal(h_netns_node_start(&net, 3), 0);
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);
    int four = 3;
    assert_true(h_poll(connected, &four, WAIT_MS));
    char *r = role_of("n4");
    assert_string_equal(r, "none");
    free(r);
    assert_true(h_poll(outsider_reported, &four, WAIT_MS));
    assert_int_equal(keel(out, sizeof out,
                          "cluster add-peer n4 -s %s --wait 60s 2>&1",
                          net.node[1].k.url),
                     0);
    assert_non_null(strstr(out, "n4 is a voter"));
    r = role_of("n4");
    assert_string_equal(r, "voter");
    free(r);
    assert_true(h_poll(answers_info, &four, WAIT_MS));
    load_goes_on(50);

    /* A node dies; the operator removes it. The stream keeps its two
     * other replicas and goes on. */
    disconnect(2);
    assert_int_equal(h_netns_node_kill(&net, 2), 0);
    assert_int_equal(keel(out, sizeof out,
                          "cluster remove-peer n3 -s %s --wait 60s 2>&1",
                          net.node[3].k.url),
                     0);
    assert_non_null(strstr(out, "n3 removed"));
    r = role_of("n3");
    assert_string_equal(r, "none");
    free(r);
    /* Removing it again: not a member (10044). */
    assert_int_not_equal(keel(out, sizeof out,
                              "cluster remove-peer n3 -s %s 2>&1",
                              net.node[0].k.url),
                         0);
    assert_non_null(strstr(out, "10044"));
    /* The meta leader moves the stream's replica off n3: n4 joins the
     * stream's group as a learner, catches up, is promoted, n3 leaves. */
    assert_true(h_poll(replicas_are, "n1,n2,n4", 3 * WAIT_MS));
    load_goes_on(50);

    /* n4 is a voter of the stream: with n1 gone, n2 and n4 commit. */
    finish_without_n1(3);
}

/* Node i's survey of the stream's group (NULL: no answer). */
static json_t *survey(int i)
{
    json_t *o = request(i, "$KEEL.API.CLUSTER.RECOVER.SURVEY",
                        "{\"stream\":\"" STREAM "\"}");
    if (o != NULL && json_object_get(o, "error") != NULL) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

static long long survey_int(int i, const char *key)
{
    json_t *o = survey(i);
    assert_non_null(o);
    long long v = (long long)json_integer_value(json_object_get(o, key));
    json_decref(o);
    return v;
}

static long long recover_term; /* the override's term in the test below */

/* n2 or n3 leads, or campaigned (its term moved past the override's). */
static bool n2_or_n3_campaigned(void *arg)
{
    (void)arg;
    bool moved = false;
    for (int i = 1; i < SEEDS && !moved; i++) {
        json_t *o = survey(i);
        moved = o != NULL &&
                (json_is_true(json_object_get(o, "leader")) ||
                 json_integer_value(json_object_get(o, "term")) > recover_term);
        json_decref(o);
    }
    return moved;
}

/* The override reached n2 and n3 (not the source) while n1, the source,
 * is down; then the longer of the two restarts. Without the recorded wait
 * it campaigned, won with the other's vote and cut n1's acked tail when
 * n1 came back (docs/decisions/0019): it must wait for n1. */
static void a_non_source_restarted_after_recover_does_not_campaign(void **state)
{
    (void)state;
    char out[4096];
    a_majority_loses_the_tail_of_its_log(out);
    long long term = survey_int(0, "term");
    disconnect(0);
    assert_int_equal(h_netns_node_stop(&net, 0), 0);
    for (int i = 1; i < SEEDS; i++) {
        long long t = survey_int(i, "term");
        term = t > term ? t : term;
    }
    recover_term = term + 1;
    for (int i = 1; i < SEEDS; i++) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"stream\":\"" STREAM "\",\"term\":%lld,\"keep\":%lld,"
                 "\"accept_loss\":true,\"source\":false}",
                 recover_term, survey_int(i, "last_index"));
        json_t *o = request(i, "$KEEL.API.CLUSTER.RECOVER", body);
        assert_non_null(o);
        assert_true(json_is_true(json_object_get(o, "success")));
        json_decref(o);
    }
    int longer =
        survey_int(1, "last_index") > survey_int(2, "last_index") ? 1 : 2;
    disconnect(longer);
    assert_int_equal(h_netns_node_kill(&net, longer), 0);
    assert_int_equal(h_netns_node_start(&net, longer), 0);
    assert_true(h_poll(connected, &longer, WAIT_MS));
    /* An observation, not a wait for a condition: over five election
     * timeouts neither n2 nor n3 may lead or campaign. */
    assert_false(h_poll(n2_or_n3_campaigned, NULL, 5 * 1000));
    /* n1 comes back, is elected with their votes, and nothing acked is
     * lost. */
    assert_int_equal(h_netns_node_start(&net, 0), 0);
    int zero = 0;
    assert_true(h_poll(connected, &zero, WAIT_MS));
    info_via = 0;
    assert_true(h_poll(three_replicas, NULL, 3 * WAIT_MS));
    for (int k = 300; k < 310; k++) {
        publish_more(0, k);
    }
    for (int i = 0; i < SEEDS; i++) {
        check_acked(i);
    }
}

static bool stream_led_by(void *arg)
{
    json_t *o = request(info_via, "$JS.API.STREAM.INFO." STREAM, "");
    const char *l = json_string_value(
        json_object_get(json_object_get(o, "cluster"), "leader"));
    bool ok = l != NULL && strcmp(l, arg) == 0;
    json_decref(o);
    return ok;
}

/* Transfer the stream's leadership to node (through n1) until it leads
 * (a transfer can time out while the load keeps it a few entries behind:
 * asked again, bounded). */
static void stream_lead_to(const char *node)
{
    char out[4096];
    char name[16];
    snprintf(name, sizeof name, "%s", node);
    long long t0 = h_now_ms();
    while (!h_poll(stream_led_by, name, 2000)) {
        assert_true(h_now_ms() - t0 < WAIT_MS);
        (void)keel(out, sizeof out,
                   "cluster transfer-leader --stream " STREAM
                   " --to %s -s %s 2>&1",
                   node, net.node[0].k.url);
    }
}

/* n2 leads the stream's group and is removed while it runs (finding F13:
 * out of the meta group it never learned that its replica moves and led
 * on with itself placed, for ever). Its replica moves first (the removal
 * is answered busy meanwhile, the CLI retries), and remove-peer returns
 * only once the stream has three replicas, none on n2: n2 can be stopped
 * right away, and n3 and n4 commit without n1. */
static void a_live_stream_leader_is_removed_under_load(void **state)
{
    (void)state;
    char out[4096];
    info_via = 0;
    start_load();
    add_node(3, 1);
    /* A transfer can time out while the load keeps n2 a few entries
     * behind: ask again, bounded. */
    long long t0 = h_now_ms();
    while (!h_poll(stream_led_by, "n2", 2000)) {
        assert_true(h_now_ms() - t0 < WAIT_MS);
        assert_int_equal(keel(out, sizeof out,
                              "cluster transfer-leader --stream " STREAM
                              " --to n2 -s %s 2>&1",
                              net.node[0].k.url),
                         0);
    }
    load_goes_on(50);
    assert_int_equal(keel(out, sizeof out,
                          "cluster remove-peer n2 -s %s --wait 60s 2>&1",
                          net.node[0].k.url),
                     0);
    assert_non_null(strstr(out, "n2 removed from the meta group"));
    assert_non_null(strstr(out, "moved off"));
    /* No poll: the command returned once the replica had moved (three
     * replicas, the new one promoted: caught up when it was; "current"
     * comes and goes under the load). */
    json_t *o = request(info_via, "$JS.API.STREAM.INFO." STREAM, "");
    json_t *c = json_object_get(o, "cluster");
    char *text = json_dumps(c, JSON_COMPACT);
    assert_non_null(text);
    assert_null(strstr(text, "\"n2\""));
    assert_null(json_object_get(c, "reconfiguring"));
    assert_non_null(json_object_get(c, "leader"));
    assert_int_equal(json_array_size(json_object_get(c, "replicas")), 2);
    free(text);
    json_decref(o);
    disconnect(1);
    assert_int_equal(h_netns_node_stop(&net, 1), 0);
    load_goes_on(50);
    finish_without_n1(3);
}

/* A live follower of the stream is removed (finding F21, the F13 race):
 * the meta leader checked only that a removed node led no stream, so a
 * transfer right after the check made it leader out of the meta group,
 * for ever. Now its replica moves first, while it is a member: the
 * removal is answered busy until then, a transfer to it meanwhile is
 * handed back (it applied the move), and remove-peer returns once the
 * stream moved off it. */
static void a_live_follower_is_removed_once_its_replica_moved(void **state)
{
    (void)state;
    char out[4096];
    char follower[16];
    char body[64];
    info_via = 0;
    start_load();
    add_node(3, 1);
    /* n1 leads the meta group and the stream: the follower is n2 or n3. */
    int n1 = 0;
    assert_int_equal(keel(out, sizeof out,
                          "cluster transfer-leader --to n1 -s %s 2>&1",
                          net.node[0].k.url),
                     0);
    assert_true(h_poll(meta_led_by, &n1, WAIT_MS));
    stream_lead_to("n1");
    a_follower(follower, sizeof follower);
    snprintf(body, sizeof body, "{\"peer\":\"%s\"}", follower);
    json_t *o = request(0, "$JS.API.SERVER.REMOVE", body);
    assert_non_null(o);
    char *text = json_dumps(o, JSON_COMPACT);
    printf("# SERVER.REMOVE %s -> %s\n", follower, text);
    assert_non_null(strstr(text, "moves off first"));
    free(text);
    json_decref(o);
    /* The race: the follower leads right after the check. */
    (void)keel(out, sizeof out,
               "cluster transfer-leader --stream " STREAM " --to %s -s %s 2>&1",
               follower, net.node[0].k.url);
    load_goes_on(50);
    assert_int_equal(keel(out, sizeof out,
                          "cluster remove-peer %s -s %s --wait 60s 2>&1",
                          follower, net.node[0].k.url),
                     0);
    assert_non_null(strstr(out, "removed from the meta group"));
    assert_true(h_poll(moved_off, follower, 3 * WAIT_MS));
    int f = follower[1] - '1';
    disconnect(f);
    assert_int_equal(h_netns_node_stop(&net, f), 0);
    load_goes_on(50);
    finish_without_n1(f == 1 ? 2 : 1);
}

/* Finding F21, the F13 residual: n3, a live follower, is removed from the
 * meta group while no node can take its replica (three nodes: it stays
 * placed there, docs/operations.md), then leads the stream's group. n4 is
 * added and the meta leader moves the replica off n3 to it, but n3, out
 * of the meta group, never learns the move: it led on with itself placed
 * and never added n4, for ever. Now n1 and n2, placed followers that know
 * n3 left the meta group, ask it to hand over; the new leader adds n4 and
 * takes n3 out, and nothing acked is lost. */
static void
a_removed_node_leading_the_stream_is_asked_to_hand_over(void **state)
{
    (void)state;
    char out[4096];
    info_via = 0;
    start_load();
    stream_lead_to("n1");
    assert_int_equal(keel(out, sizeof out,
                          "cluster remove-peer n3 --wait 30s -s %s 2>&1",
                          net.node[0].k.url),
                     0);
    assert_non_null(strstr(out, "n3 removed from the meta group"));
    stream_lead_to("n3");
    load_goes_on(50);
    add_node(3, 1);
    if (!h_poll(replicas_are, "n1,n2,n4", 3 * WAIT_MS)) {
        h_netns_print_log(&net, 0);
        h_netns_print_log(&net, 2);
        fail_msg("the stream's replica did not move off n3 to n4");
    }
    load_goes_on(50);
    disconnect(2);
    assert_int_equal(h_netns_node_stop(&net, 2), 0);
    finish_without_n1(3);
}

/* LMDB meta pages 0 and 1 (4 KiB): the main database's root page number
 * at byte 128 of each. Pointing it past the last page makes the store
 * reset meta.lmdb at the next start (rule 3): a new incarnation. */
static void reset_meta_lmdb_of(int i)
{
    char path[600];
    snprintf(path, sizeof path, "%s/js/meta.lmdb", net.node[i].k.data_dir);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    uint64_t root = 100000;
    for (long page = 0; page < 2; page++) {
        assert_int_equal(fseek(f, page * 4096 + 128, SEEK_SET), 0);
        assert_int_equal(fwrite(&root, sizeof root, 1, f), 1);
    }
    assert_int_equal(fclose(f), 0);
}

static bool is_voter(void *arg)
{
    char *r = role_of(arg);
    bool ok = r != NULL && strcmp(r, "voter") == 0;
    free(r);
    return ok;
}

/* Finding F14: n3's meta.lmdb is reset (a new incarnation). It stayed out
 * of every group until an operator removed and added it, and its clients
 * had no JetStream. The meta leader now replaces the old incarnation by
 * itself: n3 becomes a voter again, the stream's replica comes back to it,
 * and it serves JetStream; nothing acked is lost. */
static void a_node_whose_meta_lmdb_was_reset_is_replaced_by_itself(void **state)
{
    (void)state;
    info_via = 0;
    start_load();
    disconnect(2);
    assert_int_equal(h_netns_node_kill(&net, 2), 0);
    reset_meta_lmdb_of(2);
    load_goes_on(50);
    assert_int_equal(h_netns_node_start(&net, 2), 0);
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);
    int three = 2;
    assert_true(h_poll(connected, &three, WAIT_MS));
    if (!h_poll(is_voter, "n3", 3 * WAIT_MS)) {
        h_netns_print_log(&net, 2);
        fail_msg("n3 was not a voter again within %d ms", 3 * WAIT_MS);
    }
    assert_true(h_poll(answers_info, &three, WAIT_MS));
    assert_true(h_poll(replicas_are, "n1,n2,n3", 3 * WAIT_MS));
    load_goes_on(50);
    /* n3 holds the stream again: with n1 gone, n2 and n3 commit. */
    finish_without_n1(2);
}

/* Snapshots every 50 entries (and 8 KiB segments). */
static int setup_snapshots(void **state)
{
    static const char *const snaps[] = {"--segment_size", "8192",
                                        "--snapshot_entries", "50", NULL};
    node_extra = snaps;
    int rv = setup(state);
    node_extra = NULL;
    return rv;
}

/* Flip the last byte of every snapshot of the group whose segment blk is:
 * <group>/log/<base>.blk -> <group>/snap/<index>.snap. Returns how many. */
static int damage_group_snapshots(const char *blk)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", blk);
    for (int k = 0; k < 2; k++) {
        char *slash = strrchr(dir, '/');
        assert_non_null(slash);
        *slash = '\0';
    }
    strncat(dir, "/snap", sizeof dir - strlen(dir) - 1);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        char path[1400];
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".snap") != 0) {
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDWR);
        assert_true(fd >= 0);
        off_t end = lseek(fd, 0, SEEK_END);
        unsigned char b = 0;
        assert_true(end > 0);
        assert_int_equal(pread(fd, &b, 1, end - 1), 1);
        b ^= 0x5a;
        assert_int_equal(pwrite(fd, &b, 1, end - 1), 1);
        assert_int_equal(fsync(fd), 0);
        close(fd);
        n++;
    }
    closedir(d);
    return n;
}

static int count_of(const char *out, const char *what)
{
    int n = 0;
    for (const char *p = strstr(out, what); p != NULL;
         p = strstr(p + 1, what)) {
        n++;
    }
    return n;
}

static int quarantined_n; /* replicas n_amnesiac waits for */

/* The survey (no --accept-loss) shows quarantined_n amnesiac replicas and
 * no leader. */
static bool n_amnesiac(void *arg)
{
    char *out = arg;
    int rv =
        keel(out, 8192, "cluster recover --stream " STREAM " -s %s,%s,%s 2>&1",
             net.node[0].k.url, net.node[1].k.url, net.node[2].k.url);
    return rv == 1 && count_of(out, "amnesiac") == quarantined_n &&
           strstr(out, "LEADER") == NULL;
}

/* Forget the acked messages at and after the first "late<from>" payload:
 * the accepted loss (no replica held them). */
static void forget_from(int from)
{
    for (uint64_t s = 1; s <= SEQ_MAX; s++) {
        int k = -1;
        if (acked[s] != NULL && sscanf(acked[s], "late%d-", &k) == 1 &&
            k >= from) {
            free(acked[s]);
            acked[s] = NULL;
            atomic_fetch_sub(&n_acked, 1);
        }
    }
}

/* 300 acked messages; every node stops; node i with cut[i] >= 0 has both
 * snapshots of the stream's group damaged and its log cut before
 * "late<cut[i]>": it continues no valid snapshot, so the replica moves the
 * log to quarantine/ and opens empty and amnesiac (decision 0024). All
 * restart; returns once the survey (out) shows those amnesiac and no
 * leader. */
static void quarantine_replicas(const int cut[SEEDS], char *out)
{
    int damaged = 0;
    assert_true(h_poll(stream_added, NULL, WAIT_MS));
    for (int k = 0; k < 300; k++) {
        publish_more(0, k);
    }
    assert_true(h_poll(three_replicas, NULL, 3 * WAIT_MS));
    for (int i = 0; i < SEEDS; i++) {
        disconnect(i);
        assert_int_equal(h_netns_node_stop(&net, i), 0);
    }
    for (int i = 0; i < SEEDS; i++) {
        char want[32];
        char path[1024];
        off_t off = 0;
        if (cut[i] < 0) {
            continue;
        }
        snprintf(want, sizeof want, "late%d-", cut[i]);
        assert_int_equal(
            h_netns_find_in_blk(&net, i, want, path, sizeof path, &off), 0);
        assert_true(damage_group_snapshots(path) >= 2);
        assert_int_equal(truncate(path, off), 0);
        damaged++;
    }
    for (int i = 0; i < SEEDS; i++) {
        assert_int_equal(h_netns_node_start(&net, i), 0);
        assert_true(h_poll(connected, &i, WAIT_MS));
    }
    quarantined_n = damaged;
    assert_true(h_poll(n_amnesiac, out, 3 * WAIT_MS));
    for (int i = 0; i < SEEDS; i++) {
        if (cut[i] >= 0) {
            assert_int_equal(survey_int(i, "last_index"), 0);
        }
    }
}

/* Every replica of the stream heals by quarantine and opens empty. Before
 * decision 0031 the override surveyed three empty logs and left an empty,
 * leaderless stream while the data sat in each node's quarantine/. */
static void recover_restores_the_longest_quarantined_log(void **state)
{
    (void)state;
    static const int cut[SEEDS] = {140, 100, 60}; /* "late<k>" each loses */
    char out[8192];
    quarantine_replicas(cut, out);
    assert_int_equal(keel(out, sizeof out,
                          "cluster recover --accept-loss --stream " STREAM
                          " -s %s,%s,%s 2>&1",
                          net.node[0].k.url, net.node[1].k.url,
                          net.node[2].k.url),
                     0);
    /* Before decision 0031 no replica held a log here, nobody could be
     * elected and the stream stayed empty. */
    info_via = 0;
    assert_true(h_poll(three_replicas, NULL, 3 * WAIT_MS));
    /* The choice and its reason: n1's quarantined log, the longest, each
     * node's verified run shown. */
    assert_int_equal(count_of(out, "verified 1.."), 3);
    assert_non_null(strstr(out, "source n1, its quarantined log in "));
    assert_non_null(strstr(out, "chosen because it holds the most"));
    assert_non_null(strstr(out, "n2 quarantine 1.."));
    assert_non_null(strstr(out, "recovered from its quarantine log"));
    forget_from(cut[0]);
    assert_true(atomic_load(&n_acked) >= cut[0]);
    for (int i = 0; i < SEEDS; i++) {
        check_acked(i);
    }
    for (int k = 300; k < 310; k++) {
        publish_more(1, k);
    }
    for (int i = 0; i < SEEDS; i++) {
        check_acked(i);
    }
    /* The server log says what was restored and why. */
    char line[4096];
    bool logged = false;
    FILE *f = fopen(net.node[0].k.log_path, "r");
    assert_non_null(f);
    while (!logged && fgets(line, sizeof line, f) != NULL) {
        logged =
            strstr(line, "restored quarantined log kept through") != NULL &&
            strstr(line, "chosen because") != NULL;
    }
    fclose(f);
    assert_true(logged);
}

/* Only n2 and n3 quarantine; n1's live log holds every message. A live
 * log holding more is never passed over for a quarantined one: n1 is the
 * source, n2 and n3 restore their quarantined runs (so they hold the
 * index-1 configuration and vote), and nothing acknowledged is lost. */
static void a_live_log_holding_more_wins_over_quarantined_ones(void **state)
{
    (void)state;
    static const int cut[SEEDS] = {-1, 100, 60};
    char out[8192];
    quarantine_replicas(cut, out);
    assert_int_equal(keel(out, sizeof out,
                          "cluster recover --accept-loss --stream " STREAM
                          " -s %s,%s,%s 2>&1",
                          net.node[0].k.url, net.node[1].k.url,
                          net.node[2].k.url),
                     0);
    info_via = 0;
    assert_true(h_poll(three_replicas, NULL, 3 * WAIT_MS));
    assert_int_equal(count_of(out, "verified 1.."), 2);
    assert_non_null(strstr(out, "source n1, its live log:"));
    assert_non_null(strstr(out, "n2 quarantine 1.."));
    assert_non_null(strstr(out, "n1       recovered from its live log"));
    assert_non_null(strstr(out, "n2       recovered from its quarantine log"));
    for (int i = 0; i < SEEDS; i++) {
        check_acked(i);
    }
    for (int k = 300; k < 310; k++) {
        publish_more(1, k);
    }
    for (int i = 0; i < SEEDS; i++) {
        check_acked(i);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_node_is_added_and_a_dead_one_removed_under_load, setup, teardown),
        cmocka_unit_test_setup_teardown(
            grow_to_five_shrink_back_and_replace_a_wiped_node, setup, teardown),
        cmocka_unit_test_setup_teardown(
            recover_after_a_majority_lost_the_tail_of_its_log,
            setup_small_segments, teardown),
        cmocka_unit_test_setup_teardown(
            a_live_stream_leader_is_removed_under_load, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_live_follower_is_removed_once_its_replica_moved, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_removed_node_leading_the_stream_is_asked_to_hand_over, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_non_source_restarted_after_recover_does_not_campaign,
            setup_small_segments, teardown),
        cmocka_unit_test_setup_teardown(
            a_node_whose_meta_lmdb_was_reset_is_replaced_by_itself, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            recover_restores_the_longest_quarantined_log, setup_snapshots,
            teardown),
        cmocka_unit_test_setup_teardown(
            a_live_log_holding_more_wins_over_quarantined_ones, setup_snapshots,
            teardown),
    };
    if (getenv("CMOCKA_TEST_FILTER") != NULL) { /* one test by hand */
        cmocka_set_test_filter(getenv("CMOCKA_TEST_FILTER"));
    }
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
