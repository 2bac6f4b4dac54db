/* A compare-and-set counter in an R3 Key/Value bucket on a 3-node keeld
 * cluster in network namespaces, with libnats' kvStore: 4 clients each
 * read the counter, kvStore_Update it to value+1 at the revision they read
 * and retry on any failure, while the bucket's stream leader is killed
 * (kill -9) and restarted; built with KV_FIVE, an R5 bucket on 5 nodes
 * whose stream leader is cut off from every other node and healed. The final
 * value must equal the number of updates that took effect: none lost, none
 * applied twice.
 *
 * An update that fails with an error other than "wrong last sequence"
 * (a timeout, a 503 while a leader is elected, a lost connection) may
 * still have been applied. It is resolved once the key has moved past the
 * revision r it was based on: of all updates based on r at most one can
 * apply, and it is the key's first message after r (STREAM.MSG.GET with
 * next_by_subj, answered by the stream leader), so the update took effect
 * exactly when that message carries its value. Each value names its
 * writer and attempt, so no two updates write the same bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <nats/nats.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cjs_common.h"
#include "harness.h"

/* Built twice (tests/integration/meson.build): 3 nodes, R3, the leader
 * killed and restarted; and with KV_FIVE 5 nodes, R5, the leader cut off
 * from everyone (its link down: a partition) and healed. */
#ifdef KV_FIVE
#define NODES 5
#else
#define NODES 3
#endif
#define CLIENTS 4
#define WAIT_MS 20000
#define STEP_MS 60000     /* bound on each phase's progress */
#define STEP_UPDATES 20   /* updates that must take effect in each phase */
#define PENDING_MAX 256   /* unresolved updates per client */
#define RETRY_PAUSE_MS 20 /* between failed attempts (a backoff) */
#define VALUE_BYTES 64
#define KEY_SUBJECT "$KV.CTR.n"
#define REVISIONS_MAX 1000000

static struct cjs cj; /* one cluster for the whole file */

struct pending {
    uint64_t base_rev; /* the revision the update expected */
    char value[VALUE_BYTES];
};

struct client {
    int id;
    pthread_t thread;
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
    struct pending pending[PENDING_MAX];
    int pending_n;
    int attempts;
    int conflicts; /* refused: another update won */
    int failures;  /* indeterminate at first */
    long long applied;
    const char *error; /* set when the client gave up */
};

static atomic_bool stopping;
static atomic_llong applied_total;

static int group_setup(void **state)
{
    (void)state;
    return cjs_start(&cj, NODES, "cjskv", NULL, WAIT_MS);
}

static int group_teardown(void **state)
{
    (void)state;
    return cjs_stop(&cj);
}

static void b64(const char *in, char *out, size_t cap)
{
    static const char t[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in), o = 0;
    assert_true(cap >= 4 * ((n + 2) / 3) + 1);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)in[i] << 16;
        v |= i + 1 < n ? (uint32_t)(unsigned char)in[i + 1] << 8 : 0;
        v |= i + 2 < n ? (uint32_t)(unsigned char)in[i + 2] : 0;
        out[o++] = t[(v >> 18) & 63];
        out[o++] = t[(v >> 12) & 63];
        out[o++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < n ? t[v & 63] : '=';
    }
    out[o] = '\0';
}

/* The connection of a client: every node's URL, reconnecting for ever,
 * so it survives the node it is on being killed. */
static int client_connect(struct client *cl)
{
    const char *urls[NODES];
    natsOptions *o = NULL;
    jsOptions jo;
    int rv = -1;
    for (int i = 0; i < NODES; i++) {
        urls[i] = cj.net.node[(cl->id + i) % NODES].k.url;
    }
    jsOptions_Init(&jo);
    jo.Wait = 2000;
    if (natsOptions_Create(&o) == NATS_OK &&
        natsOptions_SetServers(o, urls, NODES) == NATS_OK &&
        natsOptions_SetNoRandomize(o, true) == NATS_OK &&
        natsOptions_SetMaxReconnect(o, -1) == NATS_OK &&
        natsOptions_SetReconnectWait(o, 100) == NATS_OK &&
        natsOptions_SetTimeout(o, 2000) == NATS_OK &&
        natsConnection_Connect(&cl->nc, o) == NATS_OK &&
        natsConnection_JetStream(&cl->js, cl->nc, &jo) == NATS_OK &&
        js_KeyValue(&cl->kv, cl->js, "CTR") == NATS_OK) {
        rv = 0;
    }
    natsOptions_Destroy(o);
    return rv;
}

/* The key's first message after base_rev, through the stream leader: 1
 * and its data (base64) in data when there is one, 0 when there is none
 * yet, -1 when the leader did not answer. */
static int first_after(struct client *cl, uint64_t base_rev, char *data,
                       size_t cap)
{
    char body[128];
    natsMsg *m = NULL;
    snprintf(body, sizeof body,
             "{\"seq\":%" PRIu64 ",\"next_by_subj\":\"" KEY_SUBJECT "\"}",
             base_rev + 1);
    if (natsConnection_RequestString(&m, cl->nc,
                                     "$JS.API.STREAM.MSG.GET.KV_CTR", body,
                                     2000) != NATS_OK) {
        return -1;
    }
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    int rv = -1;
    const char *d = json_string_value(
        json_object_get(json_object_get(o, "message"), "data"));
    json_int_t code = json_integer_value(
        json_object_get(json_object_get(o, "error"), "err_code"));
    if (d != NULL) {
        snprintf(data, cap, "%s", d);
        rv = 1;
    } else if (code == 10037) { /* no message found */
        rv = 0;
    }
    json_decref(o);
    return rv;
}

/* Resolve the pending updates whose base revision the key has moved past
 * (cur_rev; UINT64_MAX: every one, at the end). */
static void resolve(struct client *cl, uint64_t cur_rev)
{
    int kept = 0;
    for (int i = 0; i < cl->pending_n; i++) {
        struct pending *p = &cl->pending[i];
        char data[2 * VALUE_BYTES], want[2 * VALUE_BYTES];
        int found = p->base_rev < cur_rev
                        ? first_after(cl, p->base_rev, data, sizeof data)
                        : -1;
        if (found == 0 && cur_rev == UINT64_MAX) {
            continue; /* at the end, nothing after it: it never applied */
        }
        if (found != 1) {
            cl->pending[kept++] = *p;
            continue;
        }
        b64(p->value, want, sizeof want);
        if (strcmp(data, want) == 0) {
            cl->applied++;
            atomic_fetch_add(&applied_total, 1);
        }
    }
    cl->pending_n = kept;
}

/* One read-modify-write; false when the client must give up. */
static bool attempt(struct client *cl)
{
    kvEntry *e = NULL;
    if (kvStore_Get(&e, cl->kv, "n") != NATS_OK) {
        nats_Sleep(RETRY_PAUSE_MS);
        return true;
    }
    uint64_t rev = kvEntry_Revision(e);
    long long count = atoll(kvEntry_ValueString(e));
    kvEntry_Destroy(e);
    resolve(cl, rev);
    char value[VALUE_BYTES];
    snprintf(value, sizeof value, "%lld c%d a%d", count + 1, cl->id,
             ++cl->attempts);
    uint64_t got = 0;
    natsStatus s = kvStore_UpdateString(&got, cl->kv, "n", value, rev);
    if (s == NATS_OK) {
        cl->applied++;
        atomic_fetch_add(&applied_total, 1);
        return true;
    }
    /* libnats keeps the last error text per thread and a timeout does not
     * always replace it: the status must match too. */
    natsStatus last = NATS_OK;
    const char *text = nats_GetLastError(&last);
    if (s == NATS_ERR && last == s &&
        strstr(text, "wrong last sequence") != NULL) {
        cl->conflicts++;
        return true;
    }
    cl->failures++;
    if (cl->pending_n == PENDING_MAX) {
        cl->error = "too many unresolved updates";
        return false;
    }
    cl->pending[cl->pending_n].base_rev = rev;
    snprintf(cl->pending[cl->pending_n].value, VALUE_BYTES, "%s", value);
    cl->pending_n++;
    nats_Sleep(RETRY_PAUSE_MS);
    return true;
}

static void *client_run(void *arg)
{
    struct client *cl = arg;
    while (!atomic_load(&stopping) && attempt(cl)) {
    }
    nats_ReleaseThreadMemory();
    return NULL;
}

struct progress {
    long long want;
};

static bool applied_reached(void *arg)
{
    const struct progress *p = arg;
    return atomic_load(&applied_total) >= p->want;
}

static void wait_updates(int more)
{
    struct progress p = {atomic_load(&applied_total) + more};
    assert_true(h_poll(applied_reached, &p, STEP_MS));
}

/* The counter's value once every node's own replica has the leader's last
 * sequence: a direct get may be answered by a follower, which must then
 * hold the last update (docs/decisions/0036). */
static long long final_value(void)
{
    kvStore *kv = NULL;
    kvEntry *e = NULL;
    assert_int_equal(js_KeyValue(&kv, cj.js[0], "CTR"), NATS_OK);
    assert_int_equal(kvStore_Get(&e, kv, "n"), NATS_OK);
    long long v = atoll(kvEntry_ValueString(e));
    kvEntry_Destroy(e);
    kvStore_Destroy(kv);
    return v;
}

static bool every_node_agrees(void *arg)
{
    (void)arg;
    json_int_t last = -1;
    for (int i = 0; i < NODES; i++) {
        json_t *si = cjs_stream_info(&cj, i, "KV_CTR");
        json_int_t l = json_integer_value(
            json_object_get(json_object_get(si, "state"), "last_seq"));
        json_decref(si);
        if (si == NULL || (last >= 0 && l != last) ||
            cjs_local_last_seq(&cj, i, "KV_CTR", NULL) != l) {
            return false;
        }
        last = l;
    }
    return true;
}

struct reconnect {
    int node;
};

/* The test's own connection to a node that is back (a healed link may
 * take a moment to carry a new connection). */
static bool reconnected(void *arg)
{
    const struct reconnect *r = arg;
    return cjs_connect(&cj, r->node) == 0;
}

/* Take the leader away (kill -9, or with KV_FIVE cut its link) and bring
 * it back, with STEP_UPDATES applied before, during and after. */
static void fault_the_leader_under_load(void)
{
    int leader = cjs_wait_stream_led(&cj, "KV_CTR", WAIT_MS);
    assert_true(leader >= 0);
    wait_updates(STEP_UPDATES);
    cjs_disconnect(&cj, leader);
#ifdef KV_FIVE
    assert_int_equal(h_netns_isolate(&cj.net, leader, true), 0);
    printf("# cut off the stream leader %s after %lld updates\n",
           cj.net.node[leader].name, (long long)atomic_load(&applied_total));
    wait_updates(STEP_UPDATES);
    assert_int_equal(h_netns_isolate(&cj.net, leader, false), 0);
#else
    assert_int_equal(h_netns_node_kill(&cj.net, leader), 0);
    printf("# killed the stream leader %s after %lld updates\n",
           cj.net.node[leader].name, (long long)atomic_load(&applied_total));
    wait_updates(STEP_UPDATES);
    assert_int_equal(h_netns_node_start(&cj.net, leader), 0);
#endif
    struct reconnect rc = {leader};
    assert_true(h_poll(reconnected, &rc, WAIT_MS));
    wait_updates(STEP_UPDATES);
}

/* Keep every revision of the key (a per-subject limit past what a run
 * writes): resolve() reads the message after a revision, however long
 * ago a client that was cut off made its attempt. libnats refuses to open
 * a bucket without a limit, but takes any positive one. */
static void keep_every_revision(void)
{
    jsStreamInfo *si = NULL;
    jsStreamInfo *up = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(js_GetStreamInfo(&si, cj.js[0], "KV_CTR", NULL, &jerr),
                     NATS_OK);
    si->Config->MaxMsgsPerSubject = REVISIONS_MAX;
    assert_int_equal(js_UpdateStream(&up, cj.js[0], si->Config, NULL, &jerr),
                     NATS_OK);
    jsStreamInfo_Destroy(up);
    jsStreamInfo_Destroy(si);
}

static void a_cas_counter_loses_no_update_across_a_leader_kill(void **state)
{
    (void)state;
    static struct client cl[CLIENTS];
    kvConfig kc;
    kvStore *kv = NULL;
    uint64_t rev = 0;
    kvConfig_Init(&kc);
    kc.Bucket = "CTR";
    kc.History = 64;
    kc.Replicas = NODES;
    kv = cjs_create_kv(&cj, 0, &kc, WAIT_MS);
    keep_every_revision();
    assert_int_equal(kvStore_PutString(&rev, kv, "n", "0 start"), NATS_OK);
    kvStore_Destroy(kv);

    for (int i = 0; i < CLIENTS; i++) {
        cl[i].id = i;
        assert_int_equal(client_connect(&cl[i]), 0);
        assert_int_equal(
            pthread_create(&cl[i].thread, NULL, client_run, &cl[i]), 0);
    }
    fault_the_leader_under_load();
    atomic_store(&stopping, true);
    long long applied = 0;
    int failures = 0, conflicts = 0;
    for (int i = 0; i < CLIENTS; i++) {
        assert_int_equal(pthread_join(cl[i].thread, NULL), 0);
        assert_null(cl[i].error);
    }
    assert_true(h_poll(every_node_agrees, NULL, WAIT_MS));
    for (int i = 0; i < CLIENTS; i++) {
        resolve(&cl[i], UINT64_MAX);
        assert_int_equal(cl[i].pending_n, 0);
        applied += cl[i].applied;
        failures += cl[i].failures;
        conflicts += cl[i].conflicts;
        kvStore_Destroy(cl[i].kv);
        jsCtx_Destroy(cl[i].js);
        natsConnection_Destroy(cl[i].nc);
    }
    long long value = final_value();
    printf("# counter %lld, updates applied %lld, conflicts %d, "
           "indeterminate %d\n",
           value, applied, conflicts, failures);
    assert_true(applied >= 3 * STEP_UPDATES);
    assert_int_equal(value, applied);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cas_counter_loses_no_update_across_a_leader_kill),
    };
    nats_Open(-1);
    int rv = cmocka_run_group_tests(tests, group_setup, group_teardown);
    nats_Close();
    return rv;
}
