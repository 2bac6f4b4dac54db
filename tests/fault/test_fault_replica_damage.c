/* A damaged replica of an R3 stream on node n3 (found by keel-faults'
 * cluster bitflip nemesis, finding F8):
 * - a bit flipped inside a record: n3 keeps serving the stream (info,
 *   publish through n3) and exits cleanly on SIGTERM;
 * - a replica that cannot open at all (its group directory replaced by a
 *   file, an I/O error at open): the group must leave the cluster
 *   transport with the freed stream. Before the fix the next Raft frame
 *   for the group read the freed stream: SIGSEGV (about every other run
 *   in a release build) or a hung node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "netns.h"

#define NODES 3
#define VICTIM 2
#define STREAM "DMG"
#define MSGS 20
#define WAIT_MS 15000
#define REQ_MS 2000

static struct h_netns net;

static int connect_node(int i, natsConnection **nc, jsCtx **js)
{
    natsOptions *o = NULL;
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = REQ_MS;
    int rv = -1;
    if (natsOptions_Create(&o) == NATS_OK &&
        natsOptions_SetURL(o, net.node[i].k.url) == NATS_OK &&
        natsOptions_SetAllowReconnect(o, false) == NATS_OK &&
        natsConnection_Connect(nc, o) == NATS_OK &&
        natsConnection_JetStream(js, *nc, &jo) == NATS_OK) {
        rv = 0;
    }
    natsOptions_Destroy(o);
    return rv;
}

struct pub {
    jsCtx *js;
    int k;
    uint64_t seq;
};

static bool publish_once(void *arg)
{
    struct pub *p = arg;
    char data[32];
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    snprintf(data, sizeof data, "dmg-%04d", p->k);
    if (js_Publish(&pa, p->js, "dmg.x", data, (int)strlen(data), NULL, &jerr) !=
        NATS_OK) {
        return false; /* a leader election: try again, bounded */
    }
    p->seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    return true;
}

/* Node i's replica of the stream has applied `want` entries or more. */
struct applied {
    int node;
    long long want;
};

static bool replica_applied(void *arg)
{
    static char body[65536];
    struct applied *a = arg;
    long long got = -1;
    if (h_netns_http_get(&net, a->node, "/jsz?streams=true", body,
                         sizeof body) != 200) {
        return false;
    }
    json_t *o = json_loads(body, 0, NULL);
    json_t *s;
    size_t k;
    json_array_foreach(json_object_get(o, "stream_detail"), k, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (name != NULL && strcmp(name, STREAM) == 0) {
            got = json_integer_value(
                json_object_get(json_object_get(s, "group"), "applied"));
        }
    }
    json_decref(o);
    return got >= a->want;
}

/* Flip one bit of the payload "dmg-0005" in the segment holding it. */
static bool flip_in(const char *dir, int depth)
{
    DIR *d = depth < 8 ? opendir(dir) : NULL;
    struct dirent *e;
    bool done = false;
    while (!done && d != NULL && (e = readdir(d)) != NULL) {
        char path[1024];
        struct stat st;
        if (e->d_name[0] == '.' ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
                (int)sizeof path ||
            stat(path, &st) != 0) {
            continue;
        }
        size_t nl = strlen(e->d_name);
        if (S_ISDIR(st.st_mode)) {
            done = flip_in(path, depth + 1);
            continue;
        }
        if (nl < 4 || strcmp(e->d_name + nl - 4, ".blk") != 0 ||
            st.st_size <= 0) {
            continue;
        }
        int fd = open(path, O_RDWR);
        char *buf = malloc((size_t)st.st_size);
        if (fd >= 0 && buf != NULL &&
            pread(fd, buf, (size_t)st.st_size, 0) == st.st_size) {
            char *hit = memmem(buf, (size_t)st.st_size, "dmg-0005", 8);
            if (hit != NULL) {
                char b = (char)(hit[5] ^ 0x04);
                done = pwrite(fd, &b, 1, hit + 5 - buf) == 1 && fsync(fd) == 0;
            }
        }
        free(buf);
        if (fd >= 0) {
            close(fd);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return done;
}

/* Does a .blk under dir hold the payload "dmg-0001"? */
static bool flip_probe(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (!found && d != NULL && (e = readdir(d)) != NULL) {
        char path[1200];
        struct stat st;
        if (e->d_name[0] == '.' ||
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >=
                (int)sizeof path ||
            stat(path, &st) != 0) {
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            found = flip_probe(path);
            continue;
        }
        size_t nl = strlen(e->d_name);
        if (nl < 4 || strcmp(e->d_name + nl - 4, ".blk") != 0 ||
            st.st_size <= 0) {
            continue;
        }
        FILE *f = fopen(path, "rb");
        char *buf = malloc((size_t)st.st_size);
        if (f != NULL && buf != NULL &&
            fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size) {
            found = memmem(buf, (size_t)st.st_size, "dmg-0001", 8) != NULL;
        }
        free(buf);
        if (f != NULL) {
            fclose(f);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}

/* Stream STREAM (subjects dmg.>, R3) added through js, asked again while
 * the meta group forms (bounded by WAIT_MS); asserts it was. */
static bool stream_added(void *arg)
{
    jsCtx *js = arg;
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    const char *subjects[] = {"dmg.>"};
    jsStreamConfig_Init(&cfg);
    cfg.Name = STREAM;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = 3;
    if (js_AddStream(&si, js, &cfg, NULL, &jerr) != NATS_OK) {
        return false;
    }
    jsStreamInfo_Destroy(si);
    return true;
}

/* STREAM's info through js (the node's meta state may still replay). */
struct info_req {
    jsCtx *js;
    jsStreamInfo *si;
};

static bool info_answered(void *arg)
{
    struct info_req *q = arg;
    jsErrCode jerr = 0;
    return js_GetStreamInfo(&q->si, q->js, STREAM, NULL, &jerr) == NATS_OK;
}

static void damaged_replica_still_serves_and_stops_cleanly(void **state)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    char path[600];
    (void)state;
    assert_int_equal(h_netns_start(&net, NODES, "dmg", NULL), 0);
    assert_int_equal(connect_node(0, &nc, &js), 0);
    struct pub p = {js, 0, 0};
    assert_true(h_poll(stream_added, js, WAIT_MS));
    for (p.k = 1; p.k <= MSGS; p.k++) {
        assert_true(h_poll(publish_once, &p, WAIT_MS));
    }
    struct applied a = {VICTIM, (long long)p.seq};
    assert_true(h_poll(replica_applied, &a, WAIT_MS));
    assert_int_equal(h_netns_node_stop(&net, VICTIM), 0);
    snprintf(path, sizeof path, "%s/js/groups", net.node[VICTIM].k.data_dir);
    assert_true(flip_in(path, 0));
    assert_int_equal(h_netns_node_start(&net, VICTIM), 0);

    natsConnection *vnc = NULL;
    jsCtx *vjs = NULL;
    assert_int_equal(connect_node(VICTIM, &vnc, &vjs), 0);
    struct info_req q = {vjs, NULL};
    assert_true(h_poll(info_answered, &q, WAIT_MS)); /* not "not found" */
    assert_int_equal(q.si->State.Msgs, MSGS);
    jsStreamInfo_Destroy(q.si);
    struct pub vp = {vjs, MSGS + 1, 0};
    assert_true(h_poll(publish_once, &vp, WAIT_MS));
    assert_int_equal(vp.seq, MSGS + 1);
    jsCtx_Destroy(vjs);
    natsConnection_Destroy(vnc);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    /* Raft frames for the group kept arriving at n3 meanwhile. */
    assert_int_equal(h_netns_node_stop(&net, VICTIM), 0);
    assert_int_equal(h_netns_cleanup(&net), 0);
}

/* The stream's group directory on node i (the one holding a .blk). */
static bool group_dir(int i, char *out, size_t len)
{
    char groups[600];
    snprintf(groups, sizeof groups, "%s/js/groups", net.node[i].k.data_dir);
    DIR *d = opendir(groups);
    struct dirent *e;
    bool found = false;
    while (!found && d != NULL && (e = readdir(d)) != NULL) {
        char probe[1200];
        snprintf(probe, sizeof probe, "%s/%s", groups, e->d_name);
        if (e->d_name[0] == '.') {
            continue;
        }
        /* The meta group holds no payload "dmg-": look for one that does. */
        if (flip_probe(probe) && strlen(probe) < len) {
            memcpy(out, probe, strlen(probe) + 1);
            found = true;
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return found;
}

/* A replica that cannot open at all (its group directory replaced by a
 * file: an I/O error at open): the node must drop the group from the
 * cluster transport with the stream, or the next AppendEntries for it
 * reads the freed stream (finding F8: SIGSEGV or a hung node). */
static void unopenable_replica_leaves_no_dangling_group(void **state)
{
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    char dir[600], moved[700];
    (void)state;
    assert_int_equal(h_netns_start(&net, NODES, "dmg2", NULL), 0);
    assert_int_equal(connect_node(0, &nc, &js), 0);
    assert_true(h_poll(stream_added, js, WAIT_MS));
    struct pub p = {js, 0, 0};
    for (p.k = 1; p.k <= MSGS; p.k++) {
        assert_true(h_poll(publish_once, &p, WAIT_MS));
    }
    struct applied a = {VICTIM, (long long)p.seq};
    assert_true(h_poll(replica_applied, &a, WAIT_MS));
    assert_int_equal(h_netns_node_stop(&net, VICTIM), 0);
    assert_true(group_dir(VICTIM, dir, sizeof dir));
    snprintf(moved, sizeof moved, "%s.moved", dir);
    assert_int_equal(rename(dir, moved), 0);
    int fd = open(dir, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(h_netns_node_start(&net, VICTIM), 0);
    /* Traffic for the group reaches n3 (AppendEntries, heartbeats). */
    for (p.k = MSGS + 1; p.k <= 3 * MSGS; p.k++) {
        assert_true(h_poll(publish_once, &p, WAIT_MS));
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    assert_int_equal(h_netns_node_stop(&net, VICTIM), 0);
    assert_int_equal(h_netns_cleanup(&net), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(damaged_replica_still_serves_and_stops_cleanly),
        cmocka_unit_test(unopenable_replica_leaves_no_dangling_group),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    (void)h_netns_cleanup(&net);
    nats_Close();
    return rv;
}
