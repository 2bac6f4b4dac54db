/* Repair from peers (docs/design.md §4.7 R1, issue 8): a follower of an
 * R3 stream whose `.blk` file has one flipped byte inside an acked record
 * opens anyway, reports the group faulty (/healthz 503), gets an intact
 * copy of the record from the leader, verifies it against its own hash
 * chain and writes it in place: the byte on disk is the original again,
 * /healthz returns to 200, and the stream keeps every acked message on
 * every node. Before the driver handled storage faults the follower
 * refused to open the group and stayed out of it for good. Real keelds in
 * network namespaces (netns.c) and libnats. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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
#define STREAM "REP"
#define MSGS 60
#define VICTIM_MSG 42 /* the message whose record gets the flip */
#define WAIT_MS 20000 /* bounded waits for the cluster to agree */
#define REQ_MS 2000   /* one request's timeout */

static struct h_netns net;
static natsConnection *nc;
static jsCtx *js;

static json_t *request(const char *subject, const char *body)
{
    natsMsg *m = NULL;
    if (natsConnection_RequestString(&m, nc, subject, body, REQ_MS) !=
        NATS_OK) {
        return NULL;
    }
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    return o;
}

static bool meta_ready(void *arg)
{
    (void)arg;
    json_t *o = request("$JS.API.INFO", "");
    bool ok = o != NULL && json_object_get(o, "error") == NULL;
    json_decref(o);
    return ok;
}

static int group_setup(void **state)
{
    (void)state;
    natsOptions *o = NULL;
    if (h_netns_start(&net, NODES, "rep3", NULL) != 0 ||
        natsOptions_Create(&o) != NATS_OK ||
        natsOptions_SetURL(o, net.node[0].k.url) != NATS_OK ||
        natsOptions_SetAllowReconnect(o, false) != NATS_OK ||
        natsConnection_Connect(&nc, o) != NATS_OK ||
        natsConnection_JetStream(&js, nc, NULL) != NATS_OK ||
        !h_poll(meta_ready, NULL, WAIT_MS)) {
        natsOptions_Destroy(o);
        fprintf(stderr, "cluster setup failed\n");
        return -1;
    }
    natsOptions_Destroy(o);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    (void)h_netns_cleanup(&net);
    return 0;
}

/* The token of message k: unique, so it marks one record on disk. */
static void token(int k, char *out, size_t len)
{
    snprintf(out, len, "repair-value-%05d-end", k);
}

/* ---- finding the record on disk ---- */

static struct {
    char path[512];
    off_t off;
} found;

/* The live segment file of stopped node `node` holding want, into found. */
static bool find_token(int node, const char *want)
{
    return h_netns_find_in_blk(&net, node, want, found.path, sizeof found.path,
                               &found.off) == 0;
}

/* ---- cluster state ---- */

static int node_of(const char *name)
{
    for (int i = 0; i < NODES; i++) {
        if (strcmp(net.node[i].name, name) == 0) {
            return i;
        }
    }
    return -1;
}

static char leader_name[32];

static bool have_leader(void *arg)
{
    (void)arg;
    json_t *o = request("$JS.API.STREAM.INFO." STREAM, "");
    const char *l = json_string_value(
        json_object_get(json_object_get(o, "cluster"), "leader"));
    bool ok = l != NULL && node_of(l) >= 0;
    if (ok) {
        snprintf(leader_name, sizeof leader_name, "%s", l);
    }
    json_decref(o);
    return ok;
}

static int healthz_node;

static bool healthy(void *arg)
{
    (void)arg;
    char body[4096];
    return h_netns_http_get(&net, healthz_node, "/healthz", body,
                            sizeof body) == 200;
}

/* Node i answers /healthz 200 within WAIT_MS, or the test fails with its
 * last /healthz answer and its log. */
static void wait_healthy(int i, const char *after)
{
    healthz_node = i;
    if (h_poll(healthy, NULL, WAIT_MS)) {
        return;
    }
    char body[4096];
    int code = h_netns_http_get(&net, i, "/healthz", body, sizeof body);
    fprintf(stderr, "healthz %d: %s\n", code, body);
    h_netns_print_log(&net, i);
    fail_msg("node %d not healthy within %d ms after %s", i, WAIT_MS, after);
}

static bool stream_has(void *arg)
{
    json_t *o = request("$JS.API.STREAM.INFO." STREAM, "");
    json_int_t n = json_integer_value(
        json_object_get(json_object_get(o, "state"), "messages"));
    json_decref(o);
    return n == *(json_int_t *)arg;
}

static void publish(int from, int to)
{
    for (int k = from; k < to; k++) {
        char v[64];
        token(k, v, sizeof v);
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        assert_int_equal(
            js_Publish(&pa, js, "rep.v", v, (int)strlen(v), NULL, &jerr),
            NATS_OK);
        assert_int_equal(pa->Sequence, (uint64_t)k + 1);
        jsPubAck_Destroy(pa);
    }
}

/* The create, sent again while unanswered or answered 503 10008 (the meta
 * group between leaders: a loaded machine delays heartbeats; CI saw it). */
static json_t *created;
static bool create_answered(void *arg)
{
    (void)arg;
    json_decref(created);
    created = request("$JS.API.STREAM.CREATE." STREAM,
                      "{\"name\":\"" STREAM "\",\"subjects\":[\"rep.>\"],"
                      "\"num_replicas\":3}");
    json_t *e = json_object_get(created, "error");
    return created != NULL &&
           (e == NULL ||
            json_integer_value(json_object_get(e, "err_code")) != 10008);
}

static void a_follower_repairs_a_flipped_byte_from_the_leader(void **state)
{
    (void)state;
    (void)h_poll(create_answered, NULL, WAIT_MS);
    assert_non_null(created);
    if (json_object_get(created, "error") != NULL) {
        char *txt = json_dumps(created, JSON_COMPACT);
        fail_msg("stream create answered %s", txt);
    }
    json_decref(created);
    created = NULL;
    publish(0, MSGS);
    assert_true(h_poll(have_leader, NULL, WAIT_MS));
    /* A follower, and not node 0 (the test's client stays connected). */
    int victim = node_of(leader_name) == 1 ? 2 : 1;
    healthz_node = victim;
    assert_true(h_poll(healthy, NULL, WAIT_MS));
    assert_int_equal(h_netns_node_stop(&net, victim), 0);

    char want[64];
    token(VICTIM_MSG, want, sizeof want);
    assert_true(find_token(victim, want));
    off_t off = found.off + 13; /* a digit of the token: payload bytes */
    int original = h_byte_at(found.path, off);
    assert_true(original >= 0);
    assert_int_equal(h_flip_byte(found.path, off), 0);
    assert_int_not_equal(h_byte_at(found.path, off), original);

    assert_int_equal(h_netns_node_start(&net, victim), 0);
    /* Faulty (503) until repaired, then 200. */
    wait_healthy(victim, "the repair");
    publish(MSGS, MSGS + 10);
    json_int_t total = MSGS + 10;
    assert_true(h_poll(stream_has, &total, WAIT_MS));

    /* The repaired byte is on disk, in place. */
    assert_int_equal(h_netns_node_stop(&net, victim), 0);
    assert_int_equal(h_byte_at(found.path, off), original);
    assert_true(find_token(victim, want));
    assert_int_equal(h_netns_node_start(&net, victim), 0);
}

static bool file_short(const char *path, off_t off)
{
    struct stat sb;
    return stat(path, &sb) != 0 || sb.st_size <= off;
}

/* Rule 3: a follower whose `.blk` file was cut short inside an acked record
 * lost a range: the segment goes to quarantine, the group opens amnesiac
 * (503, votes for nobody), catches up from the leader and leaves amnesia;
 * the record is back in its log. */
static void
a_follower_that_lost_a_range_catches_up_from_the_leader(void **state)
{
    (void)state;
    assert_true(h_poll(have_leader, NULL, WAIT_MS));
    int victim = node_of(leader_name) == 1 ? 2 : 1;
    healthz_node = victim;
    assert_true(h_poll(healthy, NULL, WAIT_MS));
    assert_int_equal(h_netns_node_stop(&net, victim), 0);
    char want[64];
    token(VICTIM_MSG + 5, want, sizeof want);
    assert_true(find_token(victim, want));
    char path[512];
    snprintf(path, sizeof path, "%s", found.path);
    assert_int_equal(truncate(path, found.off), 0);
    assert_true(file_short(path, found.off));

    assert_int_equal(h_netns_node_start(&net, victim), 0);
    wait_healthy(victim, "losing a range");
    publish(MSGS + 10, MSGS + 20);
    json_int_t total = MSGS + 20;
    assert_true(h_poll(stream_has, &total, WAIT_MS));
    assert_int_equal(h_netns_node_stop(&net, victim), 0);
    /* Back in a live segment (the cut file went to quarantine/). */
    assert_true(find_token(victim, want));
    assert_null(strstr(found.path, "quarantine"));
    assert_int_equal(h_netns_node_start(&net, victim), 0);
}

#define RUN_FIRST 5 /* messages RUN_FIRST..RUN_LAST: one damaged run */
#define RUN_LAST 24

struct get_try {
    jsCtx *js;
    uint64_t seq;
    natsMsg *m;
    natsStatus st;
    jsErrCode jerr;
};

/* One MSG.GET; done unless the answer is the retryable 503 (10008: no
 * leader known yet on a node that just restarted, or a replica that
 * cannot serve the seq now). Any other error ends the wait. */
static bool get_done(void *arg)
{
    struct get_try *g = arg;
    g->m = NULL;
    g->jerr = 0;
    g->st = js_GetMsg(&g->m, g->js, STREAM, g->seq, NULL, &g->jerr);
    return g->st == NATS_OK || g->jerr != JSClusterNotAvailErr;
}

/* Every sequence 1..total read through node i (its own connection):
 * each answer must be the acked message (after retryable 503s), never
 * "not found". */
static void read_all_through(int i, int total)
{
    natsConnection *c = NULL;
    jsCtx *j = NULL;
    natsOptions *o = NULL;
    assert_int_equal(natsOptions_Create(&o), NATS_OK);
    assert_int_equal(natsOptions_SetURL(o, net.node[i].k.url), NATS_OK);
    assert_int_equal(natsOptions_SetAllowReconnect(o, false), NATS_OK);
    assert_int_equal(natsConnection_Connect(&c, o), NATS_OK);
    natsOptions_Destroy(o);
    assert_int_equal(natsConnection_JetStream(&j, c, NULL), NATS_OK);
    for (int k = 0; k < total; k++) {
        struct get_try g = {.js = j, .seq = (uint64_t)k + 1};
        (void)h_poll(get_done, &g, WAIT_MS);
        if (g.st != NATS_OK) {
            fail_msg("seq %d through node %d: status %d, JetStream error %d",
                     k + 1, i, (int)g.st, (int)g.jerr);
        }
        natsMsg *m = g.m;
        char v[64];
        token(k, v, sizeof v);
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(v));
        assert_memory_equal(natsMsg_GetData(m), v, strlen(v));
        natsMsg_Destroy(m);
    }
    jsCtx_Destroy(j);
    natsConnection_Destroy(c);
}

/* Finding F12: a damaged run of many records (here 20, one flipped byte
 * in each; after an interval power loss it was 5,377) is verified by the
 * store only whole, against the intact record after it. The core handed
 * the leader's copy of the first damaged record alone, the store refused
 * it (no intact successor), and the follower stayed faulty for good. Now
 * every copy of the run is collected and written at once; reads through
 * the damaged follower return every acked message meanwhile. */
static void a_follower_repairs_a_damaged_run_of_records(void **state)
{
    (void)state;
    assert_true(h_poll(have_leader, NULL, WAIT_MS));
    int victim = node_of(leader_name) == 1 ? 2 : 1;
    healthz_node = victim;
    assert_true(h_poll(healthy, NULL, WAIT_MS));
    assert_int_equal(h_netns_node_stop(&net, victim), 0);
    char path[RUN_LAST + 1][512];
    off_t offs[RUN_LAST + 1];
    int orig[RUN_LAST + 1];
    for (int k = RUN_FIRST; k <= RUN_LAST; k++) {
        char want[64];
        token(k, want, sizeof want);
        assert_true(find_token(victim, want));
        snprintf(path[k], sizeof path[k], "%s", found.path);
        offs[k] = found.off + 13;
        orig[k] = h_byte_at(path[k], offs[k]);
        assert_true(orig[k] >= 0);
        assert_int_equal(h_flip_byte(path[k], offs[k]), 0);
    }
    assert_int_equal(h_netns_node_start(&net, victim), 0);
    read_all_through(victim, MSGS + 20);
    wait_healthy(victim, "the repair of a damaged run");
    publish(MSGS + 20, MSGS + 30);
    json_int_t total = MSGS + 30;
    assert_true(h_poll(stream_has, &total, WAIT_MS));
    read_all_through(victim, MSGS + 30);
    assert_int_equal(h_netns_node_stop(&net, victim), 0);
    for (int k = RUN_FIRST; k <= RUN_LAST; k++) {
        assert_int_equal(h_byte_at(path[k], offs[k]), orig[k]);
    }
    assert_int_equal(h_netns_node_start(&net, victim), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_follower_repairs_a_flipped_byte_from_the_leader),
        cmocka_unit_test(
            a_follower_that_lost_a_range_catches_up_from_the_leader),
        cmocka_unit_test(a_follower_repairs_a_damaged_run_of_records),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
