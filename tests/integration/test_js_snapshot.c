/* Stream snapshots and log compaction through a real keeld (docs/design.md §5):
 * with small segments and a small snapshot interval, a stream with
 * max_msgs keeps its log bounded (a committed cut drops whole segments,
 * never past the older snapshot), and a restart restores the stream and a
 * durable consumer from the snapshot when the log no longer holds the
 * entries that made them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <sys/stat.h>
#include <nats/nats.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define WAIT_MS 20000
#define MAX_MSGS 100
#define PUBLISHES 4000

static const char *const keeld_args[] = {"--segment_size", "8KB",
                                         "--snapshot_entries", "500", NULL};

struct fixture {
    struct h_keeld k;
    natsConnection *nc;
    jsCtx *js;
    jsErrCode jerr;
};

static int connect_js(struct fixture *f)
{
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = WAIT_MS;
    if (natsConnection_ConnectTo(&f->nc, f->k.url) != NATS_OK ||
        natsConnection_JetStream(&f->js, f->nc, &o) != NATS_OK) {
        return -1;
    }
    return 0;
}

static void disconnect_js(struct fixture *f)
{
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    f->js = NULL;
    f->nc = NULL;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (f == NULL || h_keeld_init(&f->k) != 0 ||
        h_keeld_start(&f->k, 0, false, keeld_args) != 0 || connect_js(f) != 0) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    disconnect_js(f);
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

static void add_stream(struct fixture *f, const char *name, const char *subj)
{
    jsStreamConfig cfg;
    jsStreamInfo *si = NULL;
    const char *subjects[] = {subj};
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.MaxMsgs = MAX_MSGS;
    assert_int_equal(js_AddStream(&si, f->js, &cfg, NULL, &f->jerr), NATS_OK);
    jsStreamInfo_Destroy(si);
}

/* In batches of 250, so snapshots (one at a time) keep up with them. */
static void publish_n(struct fixture *f, const char *subj, int n)
{
    char buf[64];
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = WAIT_MS;
    for (int i = 0; i < n; i++) {
        int len = snprintf(buf, sizeof buf, "m-%d", i);
        assert_int_equal(js_PublishAsync(f->js, subj, buf, len, NULL), NATS_OK);
        if (i % 250 == 249) {
            assert_int_equal(js_PublishAsyncComplete(f->js, &po), NATS_OK);
        }
    }
    assert_int_equal(js_PublishAsyncComplete(f->js, &po), NATS_OK);
}

static void stream_state(struct fixture *f, const char *name,
                         jsStreamState *out)
{
    jsStreamInfo *si = NULL;
    assert_int_equal(js_GetStreamInfo(&si, f->js, name, NULL, &f->jerr),
                     NATS_OK);
    *out = si->State;
    jsStreamInfo_Destroy(si);
}

/* Over every group of the node: segment files, the lowest segment base,
 * and snapshot files. */
struct disk {
    unsigned blk;
    unsigned snap;
    uint64_t max_first; /* highest lowest-base over the groups */
};

static void scan_dir(const char *path, struct disk *d, bool log)
{
    DIR *dir = opendir(path);
    struct dirent *e;
    uint64_t lowest = UINT64_MAX;
    if (dir == NULL) {
        return;
    }
    while ((e = readdir(dir)) != NULL) {
        size_t n = strlen(e->d_name);
        if (log && n > 4 && strcmp(e->d_name + n - 4, ".blk") == 0) {
            uint64_t base = strtoull(e->d_name, NULL, 10);
            lowest = base < lowest ? base : lowest;
            d->blk++;
        }
        if (!log && n > 5 && strcmp(e->d_name + n - 5, ".snap") == 0) {
            d->snap++;
        }
    }
    closedir(dir);
    if (lowest != UINT64_MAX && lowest > d->max_first) {
        d->max_first = lowest;
    }
}

static void disk_scan(struct fixture *f, struct disk *d)
{
    char path[1024];
    memset(d, 0, sizeof *d);
    snprintf(path, sizeof path, "%s/js/groups", f->k.data_dir);
    DIR *dir = opendir(path);
    assert_non_null(dir);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        char sub[1400];
        snprintf(sub, sizeof sub, "%s/%s/log", path, e->d_name);
        scan_dir(sub, d, true);
        snprintf(sub, sizeof sub, "%s/%s/snap", path, e->d_name);
        scan_dir(sub, d, false);
    }
    closedir(dir);
}

/* The stream's log starts past its first 1000 entries (consumer create
 * and ack entries included) and holds few segments. */
static bool log_compacted(void *arg)
{
    struct fixture *f = arg;
    struct disk d;
    disk_scan(f, &d);
    return d.max_first > 1000 && d.blk <= 36;
}

static void restart(struct fixture *f)
{
    disconnect_js(f);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, false, keeld_args), 0);
    assert_int_equal(connect_js(f), 0);
}

static void a_max_msgs_stream_keeps_its_log_bounded_and_restarts(void **state)
{
    struct fixture *f = *state;
    add_stream(f, "B", "b.>");
    publish_n(f, "b.x", PUBLISHES);
    /* The leader proposes the cut on its 1 s tick. */
    bool compacted = h_poll(log_compacted, f, WAIT_MS);
    struct disk d;
    disk_scan(f, &d);
    /* 4000 entries of ~90 bytes are ~45 segments of 8 KiB uncompacted. */
    print_message("segments %u, snapshots %u, first base %llu\n", d.blk, d.snap,
                  (unsigned long long)d.max_first);
    assert_true(compacted);
    assert_true(d.blk <= 36);
    assert_true(d.snap >= 2);
    jsStreamState before;
    stream_state(f, "B", &before);
    assert_int_equal(before.Msgs, MAX_MSGS);
    assert_int_equal(before.LastSeq, PUBLISHES);
    restart(f);
    jsStreamState after;
    stream_state(f, "B", &after);
    assert_int_equal(after.Msgs, MAX_MSGS);
    assert_int_equal(after.FirstSeq, before.FirstSeq);
    assert_int_equal(after.LastSeq, PUBLISHES);
    natsMsg *m = NULL;
    assert_int_equal(js_GetMsg(&m, f->js, "B", PUBLISHES - 1, NULL, &f->jerr),
                     NATS_OK);
    char want[32];
    int wl = snprintf(want, sizeof want, "m-%d", PUBLISHES - 2);
    assert_int_equal(natsMsg_GetDataLength(m), wl);
    assert_memory_equal(natsMsg_GetData(m), want, (size_t)wl);
    natsMsg_Destroy(m);
    jsPubAck *pa = NULL;
    assert_int_equal(js_Publish(&pa, f->js, "b.x", "next", 4, NULL, &f->jerr),
                     NATS_OK);
    assert_int_equal(pa->Sequence, PUBLISHES + 1);
    jsPubAck_Destroy(pa);
}

static void
a_consumer_survives_a_restart_after_its_entries_are_cut(void **state)
{
    struct fixture *f = *state;
    add_stream(f, "C", "c.>");
    publish_n(f, "c.x", 20);
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = "C";
    natsSubscription *sub = NULL;
    assert_int_equal(
        js_PullSubscribe(&sub, f->js, "c.>", "D", NULL, &so, &f->jerr),
        NATS_OK);
    natsMsgList l = {0};
    assert_int_equal(natsSubscription_Fetch(&l, sub, 10, WAIT_MS, NULL),
                     NATS_OK);
    assert_int_equal(l.Count, 10);
    for (int i = 0; i < l.Count; i++) {
        assert_int_equal(natsMsg_AckSync(l.Msgs[i], NULL, &f->jerr), NATS_OK);
    }
    natsMsgList_Destroy(&l);
    natsSubscription_Destroy(sub);
    /* Enough entries that the create and ack entries fall below the cut. */
    publish_n(f, "c.x", PUBLISHES);
    assert_true(h_poll(log_compacted, f, WAIT_MS));
    restart(f);
    jsConsumerInfo *ci = NULL;
    assert_int_equal(js_GetConsumerInfo(&ci, f->js, "C", "D", NULL, &f->jerr),
                     NATS_OK);
    assert_int_equal(ci->AckFloor.Stream, 10);
    assert_int_equal(ci->Delivered.Stream, 10);
    assert_int_equal(ci->NumAckPending, 0);
    jsConsumerInfo_Destroy(ci);
}

static const char *const meta_args[] = {"--snapshot_entries", "4", NULL};

static void restart_with(struct fixture *f, const char *const *args)
{
    disconnect_js(f);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    assert_int_equal(h_keeld_start(&f->k, 0, false, args), 0);
    assert_int_equal(connect_js(f), 0);
}

static unsigned files_in(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    unsigned n = 0;
    struct dirent *e;
    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        n += l > s && strcmp(e->d_name + l - s, suffix) == 0;
    }
    closedir(d);
    return n;
}

static void the_meta_state_restarts_from_its_snapshot(void **state)
{
    struct fixture *f = *state;
    char name[16], subj[16];
    restart_with(f, meta_args);
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "M%d", i);
        snprintf(subj, sizeof subj, "m%d.>", i);
        add_stream(f, name, subj);
    }
    assert_int_equal(js_DeleteStream(f->js, "M3", NULL, &f->jerr), NATS_OK);
    /* The meta group (its id is fixed) took a snapshot. */
    char path[1024];
    snprintf(path, sizeof path, "%s/js/groups", f->k.data_dir);
    restart_with(f, meta_args);
    jsStreamNamesList *names = NULL;
    assert_int_equal(js_StreamNames(&names, f->js, NULL, &f->jerr), NATS_OK);
    assert_int_equal(names->Count, 9);
    jsStreamNamesList_Destroy(names);
    jsStreamState st;
    stream_state(f, "M9", &st);
    assert_int_equal(st.Msgs, 0);
    publish_n(f, "m9.x", 3);
    stream_state(f, "M9", &st);
    assert_int_equal(st.LastSeq, 3);
    /* Every snapshot file of every group: the meta group's among them. */
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    unsigned snaps = 0;
    while ((e = readdir(d)) != NULL) {
        char sub[1400];
        snprintf(sub, sizeof sub, "%s/%s/snap", path, e->d_name);
        snaps += files_in(sub, ".snap");
    }
    closedir(d);
    assert_true(snaps >= 1);
}

/* docs/design.md §5: data the meta state does not name is moved, never deleted.
 */
static void a_group_the_meta_state_does_not_name_goes_to_orphans(void **state)
{
    struct fixture *f = *state;
    const char *hex = "00112233445566778899aabbccddeeff";
    char dir[1024], file[1100], moved[1200];
    add_stream(f, "O", "o.>");
    disconnect_js(f);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
    snprintf(dir, sizeof dir, "%s/js/groups/%s", f->k.data_dir, hex);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(file, sizeof file, "%s/evidence", dir);
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fputs("keep me", fp);
    fclose(fp);
    assert_int_equal(h_keeld_start(&f->k, 0, false, keeld_args), 0);
    assert_int_equal(connect_js(f), 0);
    assert_int_equal(access(dir, F_OK), -1);
    snprintf(moved, sizeof moved, "%s/js/quarantine/orphans/group-%s/evidence",
             f->k.data_dir, hex);
    assert_int_equal(access(moved, R_OK), 0);
    jsStreamState st;
    stream_state(f, "O", &st); /* the named stream stays */
    assert_int_equal(st.Msgs, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
        T(a_max_msgs_stream_keeps_its_log_bounded_and_restarts),
        T(a_consumer_survives_a_restart_after_its_entries_are_cut),
        T(the_meta_state_restarts_from_its_snapshot),
        T(a_group_the_meta_state_does_not_name_goes_to_orphans),
#undef T
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    nats_Close();
    return rv;
}
