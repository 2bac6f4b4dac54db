/* A damaged replica of an R3 stream on node n3 (found by keel-faults'
 * cluster bitflip nemesis, finding F8):
 * - a bit flipped inside a record: n3 keeps serving the stream (info,
 *   publish through n3) and exits cleanly on SIGTERM;
 * - a replica that cannot open at all (its group directory replaced by a
 *   file, an I/O error at open): the group must leave the cluster
 *   transport with the freed stream. Before the fix the next Raft frame
 *   for the group read the freed stream: SIGSEGV (about every other run
 *   in a release build) or a hung node;
 * - an amnesiac replica whose snapshot lies past its cut log (finding F18):
 *   no read through it comes from its short state, and it catches up. */
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
/* The amnesiac replica: snapshots every AMN_SNAP_ENTRIES entries, 16 KiB
 * segments (a few hundred records each); its log is cut in the segment
 * holding message AMN_CUT of AMN_MSGS, far below its newest snapshot. */
#define AMN_MSGS 1000
#define AMN_CUT 500
#define AMN_SNAP_ENTRIES "50"

static struct h_netns net;
static int total; /* the amnesia case: messages 1..total published */

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
    jsPubOptions po;
    snprintf(data, sizeof data, "dmg-%04d", p->k);
    /* Its own Nats-Msg-Id: a retry after a lost ack is a duplicate, so the
     * stream holds exactly 1..k. */
    jsPubOptions_Init(&po);
    po.MsgId = data;
    po.MaxWait = REQ_MS;
    if (js_Publish(&pa, p->js, "dmg.x", data, (int)strlen(data), &po, &jerr) !=
        NATS_OK) {
        return false; /* a leader election: try again, bounded */
    }
    p->seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    return true;
}

/* The stream's group in node i's /jsz (NULL: not listed). */
static json_t *group_of(int i)
{
    static char body[65536];
    if (h_netns_http_get(&net, i, "/jsz?streams=true", body, sizeof body) !=
        200) {
        return NULL;
    }
    json_t *o = json_loads(body, 0, NULL);
    json_t *s, *g = NULL;
    size_t k;
    json_array_foreach(json_object_get(o, "stream_detail"), k, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (name != NULL && strcmp(name, STREAM) == 0) {
            g = json_incref(json_object_get(s, "group"));
        }
    }
    json_decref(o);
    return g;
}

static long long group_int(int i, const char *key)
{
    json_t *g = group_of(i);
    long long v = g != NULL ? json_integer_value(json_object_get(g, key)) : -1;
    json_decref(g);
    return v;
}

/* Node i's replica of the stream has applied `want` entries or more. */
struct applied {
    int node;
    long long want;
};

static bool replica_applied(void *arg)
{
    struct applied *a = arg;
    return group_int(a->node, "applied") >= a->want;
}

/* The .blk under dir (recursively) holding needle: its path into out (if
 * not NULL) and the needle's offset in it. */
static bool find_blk(const char *dir, const char *needle, char *out, size_t cap,
                     long long *off)
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
            found = find_blk(path, needle, out, cap, off);
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
            char *hit = memmem(buf, (size_t)st.st_size, needle, strlen(needle));
            if (hit != NULL && (out == NULL || strlen(path) < cap)) {
                if (out != NULL) {
                    memcpy(out, path, strlen(path) + 1);
                }
                *off = hit - buf;
                found = true;
            }
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

/* Flip one bit of the payload "dmg-0005" in the segment holding it. */
static bool flip_in(const char *dir)
{
    char path[1200];
    long long off = -1;
    char b = 0;
    if (!find_blk(dir, "dmg-0005", path, sizeof path, &off)) {
        return false;
    }
    int fd = open(path, O_RDWR);
    bool done = fd >= 0 && pread(fd, &b, 1, off + 5) == 1;
    b = (char)(b ^ 0x04);
    done = done && pwrite(fd, &b, 1, off + 5) == 1 && fsync(fd) == 0;
    if (fd >= 0) {
        close(fd);
    }
    return done;
}

/* Does a .blk under dir hold the payload "dmg-0001"? */
static bool flip_probe(const char *dir)
{
    long long off = -1;
    return find_blk(dir, "dmg-0001", NULL, 0, &off);
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
    assert_true(flip_in(path));
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

/* Node i leads the stream. */
static bool leads(int i)
{
    json_t *g = group_of(i);
    const char *role = json_string_value(json_object_get(g, "role"));
    bool yes = role != NULL && strcmp(role, "leader") == 0;
    json_decref(g);
    return yes;
}

struct leader_wait {
    int leader;
};

static bool some_leader(void *arg)
{
    struct leader_wait *w = arg;
    for (int i = 0; i < NODES; i++) {
        if (leads(i)) {
            w->leader = i;
            return true;
        }
    }
    return false;
}

/* The report line of `keel store dump` of the stream on node i (stopped):
 * what its next open finds. NULL when the dump failed. */
static json_t *dump_report(int i)
{
    static char line[1 << 16];
    char cmd[1024];
    const char *keel = getenv("KEEL");
    json_t *rep = NULL;
    snprintf(cmd, sizeof cmd,
             "'%s' store dump --no-payload --data '%s' "
             "--stream " STREAM,
             keel != NULL ? keel : "keel", net.node[i].k.data_dir);
    FILE *p = popen(cmd, "r");
    while (p != NULL && fgets(line, sizeof line, p) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *kind = json_string_value(json_object_get(o, "kind"));
        if (kind != NULL && strcmp(kind, "report") == 0) {
            json_decref(rep);
            rep = json_incref(o);
        }
        json_decref(o);
    }
    if (p != NULL && pclose(p) != 0) {
        json_decref(rep);
        rep = NULL;
    }
    return rep;
}

/* One look through the victim's connection: what it served, if anything,
 * must be the whole stream. Counts the answers from short state. */
struct probe {
    jsCtx *js;
    int victim;
    int short_info, short_get, answered;
};

static void probe_once(struct probe *p)
{
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    if (js_GetStreamInfo(&si, p->js, STREAM, NULL, &jerr) == NATS_OK) {
        p->answered++;
        if (si->State.Msgs != (uint64_t)total ||
            si->State.LastSeq != (uint64_t)total) {
            fprintf(stderr,
                    "stream info through the victim: %llu msgs, "
                    "last seq %llu (want %d)\n",
                    (unsigned long long)si->State.Msgs,
                    (unsigned long long)si->State.LastSeq, total);
            p->short_info++;
        }
        jsStreamInfo_Destroy(si);
    }
    natsMsg *m = NULL;
    jerr = 0;
    natsStatus s = js_GetMsg(&m, p->js, STREAM, (uint64_t)total, NULL, &jerr);
    if (s == NATS_OK) {
        char want[32];
        snprintf(want, sizeof want, "dmg-%04d", total);
        p->answered++;
        if (natsMsg_GetDataLength(m) != (int)strlen(want) ||
            memcmp(natsMsg_GetData(m), want, strlen(want)) != 0) {
            p->short_get++;
        }
        natsMsg_Destroy(m);
    } else if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr) {
        fprintf(stderr, "msg get %d through the victim: not found\n", total);
        p->short_get++;
    }
}

/* The victim left amnesia and applied what the leader applied. */
struct caught {
    struct probe *p;
    int leader;
};

static bool caught_up(void *arg)
{
    struct caught *c = arg;
    probe_once(c->p);
    json_t *g = group_of(c->p->victim);
    long long want = group_int(c->leader, "applied");
    bool ok = g != NULL && !json_is_true(json_object_get(g, "amnesiac")) &&
              json_integer_value(json_object_get(g, "applied")) >= want &&
              want >= total;
    json_decref(g);
    return ok;
}

static void an_amnesiac_replica_never_serves_short_and_catches_up(void **state)
{
    static const char *const extra[] = {"--segment_size", "16384",
                                        "--snapshot_entries", AMN_SNAP_ENTRIES,
                                        NULL};
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    char blk[2000];
    long long off = -1;
    (void)state;
    assert_int_equal(h_netns_start(&net, NODES, "dmg3", extra), 0);
    assert_int_equal(connect_node(0, &nc, &js), 0);
    assert_true(h_poll(stream_added, js, WAIT_MS));
    struct pub p = {js, 0, 0};
    for (p.k = 1; p.k <= AMN_MSGS; p.k++) {
        assert_true(h_poll(publish_once, &p, WAIT_MS));
    }
    total = AMN_MSGS;
    struct leader_wait lw = {-1};
    assert_true(h_poll(some_leader, &lw, WAIT_MS));
    /* A follower, not node 0 (the publishing connection's). */
    int victim = lw.leader == 1 ? 2 : 1;
    struct applied a = {victim, AMN_MSGS};
    assert_true(h_poll(replica_applied, &a, WAIT_MS));
    assert_int_equal(h_netns_node_stop(&net, victim), 0);

    /* The segment holding message AMN_CUT cut inside its records: the log
     * ends where the segment before it ends, long before the snapshot,
     * and the later segments leave with it (rule R3). */
    char groups[700], needle[32];
    snprintf(groups, sizeof groups, "%s/js/groups",
             net.node[victim].k.data_dir);
    snprintf(needle, sizeof needle, "dmg-%04d", AMN_CUT);
    assert_true(find_blk(groups, needle, blk, sizeof blk, &off));
    fprintf(stderr, "victim: %s cut at %lld\n", blk, off);
    assert_int_equal(truncate(blk, off), 0);
    /* What the victim's open will find: amnesia, its log ending before
     * the snapshot. */
    json_t *rep = dump_report(victim);
    char *rs = rep != NULL ? json_dumps(rep, 0) : NULL;
    fprintf(stderr, "victim dump report: %s\n", rs != NULL ? rs : "(failed)");
    free(rs);
    assert_non_null(rep);
    json_int_t last = json_integer_value(json_object_get(rep, "last_index"));
    json_int_t sidx = json_integer_value(
        json_object_get(json_object_get(rep, "snapshot"), "index"));
    assert_true(json_is_true(json_object_get(rep, "amnesia")));
    assert_true(last > 0 && last < sidx); /* the snapshot lies past the cut */
    json_decref(rep);
    assert_int_equal(h_netns_node_start(&net, victim), 0);
    assert_int_equal(h_netns_wait_mesh(&net, WAIT_MS), 0);

    natsConnection *vnc = NULL;
    jsCtx *vjs = NULL;
    assert_int_equal(connect_node(victim, &vnc, &vjs), 0);
    /* No more publishes: a quiet stream's leader takes no newer snapshot,
     * so it sends the older of its pair (decision 0017), which is below
     * the victim's newest (finding F18: never caught up). */
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    struct probe pr = {vjs, victim, 0, 0, 0};
    struct caught c = {&pr, lw.leader};
    bool ok = h_poll(caught_up, &c, 2 * WAIT_MS);
    json_t *g = group_of(victim);
    char *gs = g != NULL ? json_dumps(g, 0) : NULL;
    fprintf(
        stderr, "victim group: %s; answers %d, short info %d, short get %d\n",
        gs != NULL ? gs : "(none)", pr.answered, pr.short_info, pr.short_get);
    free(gs);
    json_decref(g);
    if (!ok || pr.short_info != 0 || pr.short_get != 0 ||
        getenv("KEEL_TEST_LOGS") != NULL) {
        static char body[65536];
        for (int i = 0; i < NODES; i++) {
            if (h_netns_http_get(&net, i, "/jsz?streams=true", body,
                                 sizeof body) == 200) {
                fprintf(stderr, "%s /jsz: %s\n", net.node[i].name, body);
            }
        }
        h_netns_print_log(&net, victim);
    }
    assert_int_equal(pr.short_info, 0);
    assert_int_equal(pr.short_get, 0);
    assert_true(ok);
    /* Caught up: every message reads back through it. */
    for (int k = 1; k <= total; k += 29) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        char want[32];
        snprintf(want, sizeof want, "dmg-%04d", k);
        assert_int_equal(js_GetMsg(&m, vjs, STREAM, (uint64_t)k, NULL, &jerr),
                         NATS_OK);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
        assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
        natsMsg_Destroy(m);
    }
    jsCtx_Destroy(vjs);
    natsConnection_Destroy(vnc);
    assert_int_equal(h_netns_node_stop(&net, victim), 0);
    assert_int_equal(h_netns_cleanup(&net), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(damaged_replica_still_serves_and_stops_cleanly),
        cmocka_unit_test(unopenable_replica_leaves_no_dangling_group),
        cmocka_unit_test(an_amnesiac_replica_never_serves_short_and_catches_up),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    (void)h_netns_cleanup(&net);
    nats_Close();
    return rv;
}
