/* The background scrub (docs/decisions/0027-background-scrub.md): a follower of
 * an R3 stream whose cold segment (one the log has left, no longer written)
 * gets a flipped byte while the node runs finds it with no client read:
 * the scrub verifies every persisted record in the background, the
 * damaged one becomes faulty as after a failed read, the follower
 * repairs it from the leader in place, and /metrics counts the fault and
 * the repair. `--scrub_pass 2s` makes a pass take about two seconds (the
 * default is 24 h). Without the scrub nothing reads the record and the
 * damage stays until a read or a restart meets it. Real keelds in network
 * namespaces (netns.c) and libnats. */
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

#include "cjs_common.h"

#define NODES 3
#define STREAM "SCRUB"
#define MSGS 400
#define VICTIM_MSG 7  /* in the first segment: cold once the log moved on */
#define WAIT_MS 20000 /* bounded waits for the cluster and the scrub */

static struct cjs c;

static int group_setup(void **state)
{
    (void)state;
    static const char *const extra[] = {"--scrub_pass", "2s", "--segment_size",
                                        "65536", NULL};
    return cjs_start(&c, NODES, "scrub3", extra, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    (void)cjs_stop(&c);
    return 0;
}

/* The token of message k: unique, so it marks one record on disk; padded
 * so the log fills several 64 KiB segments. */
static void token(int k, char *out, size_t len)
{
    snprintf(out, len, "scrub-value-%05d-%0200d-end", k, 0);
}

static void publish_all(void)
{
    for (int k = 0; k < MSGS; k++) {
        char v[256];
        token(k, v, sizeof v);
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        assert_int_equal(
            js_Publish(&pa, c.js[0], "scrub.v", v, (int)strlen(v), NULL, &jerr),
            NATS_OK);
        assert_int_equal(pa->Sequence, (uint64_t)k + 1);
        jsPubAck_Destroy(pa);
    }
}

/* The value of metric `name` on node i (-1: not there). */
static long long metric(int i, const char *name)
{
    static char body[512 * 1024];
    if (h_netns_http_get(&c.net, i, "/metrics", body, sizeof body) != 200) {
        return -1;
    }
    char want[128];
    snprintf(want, sizeof want, "\n%s ", name);
    const char *p = strstr(body, want);
    return p != NULL ? strtoll(p + strlen(want), NULL, 10) : -1;
}

struct wait_metric {
    int node;
    const char *name;
};

static bool metric_positive(void *arg)
{
    const struct wait_metric *w = arg;
    return metric(w->node, w->name) > 0;
}

static char seg_path[512];
static off_t seg_off;

static bool record_on_disk(void *arg)
{
    const int *node = arg;
    char want[256];
    token(VICTIM_MSG, want, sizeof want);
    return h_netns_find_in_blk(&c.net, *node, want, seg_path, sizeof seg_path,
                               &seg_off) == 0;
}

static void a_follower_scrub_repairs_a_cold_segment_with_no_read(void **state)
{
    (void)state;
    cjs_add_stream(&c, 0, STREAM, "scrub.>", 3, WAIT_MS);
    publish_all();
    int leader = cjs_wait_stream_led(&c, STREAM, WAIT_MS);
    assert_true(leader >= 0);
    int victim = leader == 1 ? 2 : 1; /* a follower, not the client's node */
    assert_true(h_poll(record_on_disk, &victim, WAIT_MS));
    char first[512];
    snprintf(first, sizeof first, "%s", seg_path);
    char last[256];
    token(MSGS - 1, last, sizeof last);
    off_t last_off = 0;
    assert_int_equal(h_netns_find_in_blk(&c.net, victim, last, seg_path,
                                         sizeof seg_path, &last_off),
                     0);
    assert_string_not_equal(first, seg_path); /* the log has left it */
    snprintf(seg_path, sizeof seg_path, "%s", first);
    assert_true(record_on_disk(&victim));

    off_t off = seg_off + 14; /* a digit of the token: payload bytes */
    int original = h_byte_at(seg_path, off);
    assert_true(original >= 0);
    assert_int_equal(h_flip_byte(seg_path, off), 0); /* the node runs */
    assert_int_not_equal(h_byte_at(seg_path, off), original);

    struct wait_metric faults = {victim, "keel_scrub_faults_total"};
    struct wait_metric fixed = {victim, "keel_scrub_repaired_total"};
    if (!h_poll(metric_positive, &faults, WAIT_MS) ||
        !h_poll(metric_positive, &fixed, WAIT_MS)) {
        h_netns_print_log(&c.net, victim);
        fail_msg("node %d: scrub faults %lld, repaired %lld", victim,
                 metric(victim, faults.name), metric(victim, fixed.name));
    }
    assert_int_equal(h_byte_at(seg_path, off), original); /* in place */
    assert_true(metric(victim, "keel_scrub_bytes_total") > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_follower_scrub_repairs_a_cold_segment_with_no_read),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
