/* Direct gets answered by followers and by mirrors with mirror_direct, on
 * three real keelds in network namespaces
 * (docs/decisions/0036-followers-answer-direct-gets-while-current.md):
 * a current follower answers a DIRECT.GET of an R3 stream itself, once
 * (its /jsz direct_gets.follower counts it), and leaves a miss to the
 * leader; a follower cut off from both peers stops answering within a
 * bound, then never returns the value it holds once a newer one is
 * acknowledged, nor "not found" for the newer seq, and answers again once
 * healed; an R3 mirror with mirror_direct of an R1 KV bucket answers
 * libnats' kvStore_Get on a node without the bucket, also while the
 * bucket's only node is down. Shared setup: cjs_common.h. */
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
#include "harness.h"

#define NODES 3
#define WAIT_MS 20000
#define FIRST_MS 2000 /* the first answer to a request */
#define MORE_MS 300   /* a second answer would come within this */
/* A cut-off follower stops answering within an election timeout (1 s by
 * default) of its last contact; the bound allows a loaded machine. */
#define STALE_MS 10000
#define READS 500 /* timed reads through a follower */

static struct cjs cj; /* one cluster for the whole file */

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjsdir", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

/* /jsz direct_gets.<by> of node i (-1: no answer). */
static json_int_t direct_count(int i, const char *by)
{
    static char body[1 << 17];
    if (h_netns_http_get(&cj.net, i, "/jsz", body, sizeof body) != 200) {
        return -1;
    }
    json_t *o = json_loads(body, 0, NULL);
    json_t *v = json_object_get(json_object_get(o, "direct_gets"), by);
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(o);
    return n;
}

/* One direct get through node i: how it was answered. */
struct answer {
    int n;          /* replies: never more than one */
    char data[64];  /* the payload of a message, "" otherwise */
    char status[8]; /* a status line's code ("404"), "" otherwise */
    bool by_follower, by_mirror; /* node i's counters moved */
};

static void direct_get(int i, const char *subject, const char *body,
                       struct answer *a)
{
    natsMsg *m = NULL;
    const char *st = NULL;
    json_int_t f = direct_count(i, "follower"), mi = direct_count(i, "mirror");
    memset(a, 0, sizeof *a);
    a->n = cjs_answers(&cj, i, subject, body, FIRST_MS, MORE_MS, &m);
    assert_true(a->n <= 1); /* exactly one node answers */
    if (m != NULL) {
        if (natsMsgHeader_Get(m, "Status", &st) == NATS_OK) {
            snprintf(a->status, sizeof a->status, "%s", st);
        } else {
            snprintf(a->data, sizeof a->data, "%.*s", natsMsg_GetDataLength(m),
                     natsMsg_GetData(m));
        }
        natsMsg_Destroy(m);
    }
    a->by_follower = direct_count(i, "follower") > f;
    a->by_mirror = direct_count(i, "mirror") > mi;
}

/* Publish data on subject through any running node until acked; its seq. */
static uint64_t publish(const char *subject, const char *data)
{
    struct cjs_ledger l = {0};
    cjs_publish_any(&cj, subject, data, &l, WAIT_MS);
    uint64_t seq = l.last;
    cjs_ledger_free(&l);
    return seq;
}

struct want {
    int node;
    const char *subject, *body, *data;
    struct answer a;
};

/* Node w->node's follower answered w->data. */
static bool follower_answers(void *arg)
{
    struct want *w = arg;
    direct_get(w->node, w->subject, w->body, &w->a);
    return w->a.by_follower && strcmp(w->a.data, w->data) == 0;
}

/* Node w->node did not answer from its own replica. */
static bool not_from_follower(void *arg)
{
    struct want *w = arg;
    direct_get(w->node, w->subject, w->body, &w->a);
    return !w->a.by_follower;
}

/* READS requests of subject (body) through node i, each answered; the
 * time they took in ms. */
static long long read_ms(int i, const char *subject, const char *body)
{
    long long t0 = h_now_ms();
    for (int k = 0; k < READS; k++) {
        natsMsg *m = NULL;
        assert_int_equal(
            natsConnection_RequestString(&m, cj.nc[i], subject, body, FIRST_MS),
            NATS_OK);
        natsMsg_Destroy(m);
    }
    return h_now_ms() - t0;
}

/* The same reads through follower f: direct gets (answered there) and
 * STREAM.MSG.GETs (forwarded to the leader), printed for the record. */
static void timed_reads(int f)
{
    json_int_t before = direct_count(f, "follower");
    long long dg = read_ms(f, "$JS.API.DIRECT.GET.DG.dg.a", "");
    json_int_t here = direct_count(f, "follower") - before;
    long long mg =
        read_ms(f, "$JS.API.STREAM.MSG.GET.DG", "{\"last_by_subj\":\"dg.a\"}");
    print_message("%d reads through a follower: DIRECT.GET %lld ms (%lld "
                  "answered there), STREAM.MSG.GET %lld ms\n",
                  READS, dg, (long long)here, mg);
    assert_true(here > 0);
}

static void add_direct_stream(void)
{
    jsStreamConfig cfg;
    const char *subjects[] = {"dg.>"};
    jsStreamConfig_Init(&cfg);
    cfg.Name = "DG";
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = NODES;
    cfg.AllowDirect = true;
    cjs_add_stream_cfg(&cj, 0, &cfg, WAIT_MS);
}

static void
a_current_follower_answers_once_and_a_miss_goes_to_the_leader(void **state)
{
    (void)state;
    add_direct_stream();
    (void)publish("dg.a", "v1");
    int leader = cjs_wait_stream_led(&cj, "DG", WAIT_MS);
    assert_true(leader >= 0);
    int f = (leader + 1) % NODES;
    struct want w = {f, "$JS.API.DIRECT.GET.DG.dg.a", "", "v1", {0}};
    assert_true(h_poll(follower_answers, &w, WAIT_MS));
    assert_int_equal(w.a.n, 1);
    /* The JSON form by subject, too. */
    w.subject = "$JS.API.DIRECT.GET.DG";
    w.body = "{\"last_by_subj\":\"dg.a\"}";
    assert_true(h_poll(follower_answers, &w, WAIT_MS));
    timed_reads(f);
    /* A seq the stream has not reached: the leader says "not found". */
    json_int_t led = direct_count(leader, "leader");
    struct answer a;
    direct_get(f, "$JS.API.DIRECT.GET.DG", "{\"seq\":999}", &a);
    assert_int_equal(a.n, 1);
    assert_string_equal(a.status, "404");
    assert_false(a.by_follower);
    assert_true(direct_count(leader, "leader") > led);
}

static void partition_node(int f, bool cut)
{
    for (int j = 0; j < NODES; j++) {
        if (j != f) {
            assert_int_equal(cut ? h_netns_partition(&cj.net, f, j)
                                 : h_netns_heal(&cj.net, f, j),
                             0);
        }
    }
}

static void a_cut_off_follower_never_answers_with_stale_data(void **state)
{
    (void)state;
    int leader = cjs_wait_stream_led(&cj, "DG", WAIT_MS);
    assert_true(leader >= 0);
    int f = (leader + 2) % NODES;
    (void)publish("dg.b", "old");
    struct want w = {f, "$JS.API.DIRECT.GET.DG.dg.b", "", "old", {0}};
    assert_true(h_poll(follower_answers, &w, WAIT_MS));

    partition_node(f, true);
    long long t0 = h_now_ms();
    assert_true(h_poll(not_from_follower, &w, STALE_MS));
    print_message("cut-off follower stopped answering after %lld ms\n",
                  h_now_ms() - t0);
    uint64_t seq = publish("dg.b", "new"); /* the other two commit it */
    char by_seq[64];
    snprintf(by_seq, sizeof by_seq, "{\"seq\":%llu}", (unsigned long long)seq);
    for (int k = 0; k < 5; k++) {
        struct answer a;
        direct_get(f, "$JS.API.DIRECT.GET.DG.dg.b", "", &a);
        assert_false(a.by_follower);
        assert_string_not_equal(a.data, "old");
        direct_get(f, "$JS.API.DIRECT.GET.DG", by_seq, &a);
        assert_false(a.by_follower);
        assert_string_not_equal(a.status, "404");
    }

    partition_node(f, false);
    w.data = "new";
    assert_true(h_poll(follower_answers, &w, WAIT_MS));
}

/* Node i's mirror MDM holds n messages. */
struct mirror_at {
    int node;
    json_int_t n;
};

static bool mirror_has(void *arg)
{
    const struct mirror_at *m = arg;
    return cjs_state_int(&cj, m->node, "MDM", "last_seq") == m->n;
}

struct kv_want {
    kvStore *kv;
    int node;
    bool by_mirror;
};

/* kvStore_Get of "k" through the bound store gives "v1". */
static bool kv_reads(void *arg)
{
    struct kv_want *w = arg;
    kvEntry *e = NULL;
    json_int_t before = direct_count(w->node, "mirror");
    bool ok = kvStore_Get(&e, w->kv, "k") == NATS_OK &&
              strcmp(kvEntry_ValueString(e), "v1") == 0;
    kvEntry_Destroy(e);
    w->by_mirror = direct_count(w->node, "mirror") > before;
    return ok && w->by_mirror;
}

static void
a_mirror_with_mirror_direct_answers_kv_gets_of_its_origin(void **state)
{
    (void)state;
    kvConfig kc;
    uint64_t rev = 0;
    kvConfig_Init(&kc);
    kc.Bucket = "MD";
    kc.Replicas = 1;
    kvStore *kv = cjs_create_kv(&cj, 0, &kc, WAIT_MS);
    assert_int_equal(kvStore_PutString(&rev, kv, "k", "v1"), NATS_OK);
    kvStore_Destroy(kv);
    int origin = cjs_wait_stream_led(&cj, "KV_MD", WAIT_MS);
    assert_true(origin >= 0);
    int b = (origin + 1) % NODES;

    json_t *o = cjs_request_retry(
        &cj, b, "$JS.API.STREAM.CREATE.MDM",
        "{\"name\":\"MDM\",\"num_replicas\":3,\"mirror\":{\"name\":\"KV_MD\"},"
        "\"mirror_direct\":true}",
        WAIT_MS);
    assert_non_null(o);
    assert_false(cjs_is_error(o));
    json_decref(o);
    assert_true(cjs_wait_stream_led(&cj, "MDM", WAIT_MS) >= 0);
    struct mirror_at m = {b, (json_int_t)rev};
    assert_true(h_poll(mirror_has, &m, WAIT_MS));

    /* Node b holds no replica of KV_MD: its mirror answers, once. */
    struct kv_want w = {NULL, b, false};
    assert_int_equal(js_KeyValue(&w.kv, cj.js[b], "MD"), NATS_OK);
    assert_true(h_poll(kv_reads, &w, WAIT_MS));
    struct answer a;
    direct_get(b, "$JS.API.DIRECT.GET.KV_MD.$KV.MD.k", "", &a);
    assert_int_equal(a.n, 1);
    assert_string_equal(a.data, "v1");
    assert_true(a.by_mirror);

    /* The bucket's only node down: the mirror still serves its reads. */
    cjs_disconnect(&cj, origin);
    assert_int_equal(h_netns_node_kill(&cj.net, origin), 0);
    assert_true(h_poll(kv_reads, &w, WAIT_MS));
    kvStore_Destroy(w.kv);
    assert_int_equal(h_netns_node_start(&cj.net, origin), 0);
    assert_int_equal(cjs_connect(&cj, origin), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            a_current_follower_answers_once_and_a_miss_goes_to_the_leader),
        cmocka_unit_test(a_cut_off_follower_never_answers_with_stale_data),
        cmocka_unit_test(
            a_mirror_with_mirror_direct_answers_kv_gets_of_its_origin),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
