#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cjs_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cjs_disconnect(struct cjs *c, int i)
{
    jsCtx_Destroy(c->js[i]);
    natsConnection_Destroy(c->nc[i]);
    c->js[i] = NULL;
    c->nc[i] = NULL;
}

int cjs_connect(struct cjs *c, int i)
{
    natsOptions *o = NULL;
    int rv = -1;
    /* One server only: a test must know which node it talks to. */
    if (natsOptions_Create(&o) == NATS_OK &&
        natsOptions_SetURL(o, c->net.node[i].k.url) == NATS_OK &&
        natsOptions_SetAllowReconnect(o, false) == NATS_OK &&
        natsConnection_Connect(&c->nc[i], o) == NATS_OK &&
        natsConnection_JetStream(&c->js[i], c->nc[i], NULL) == NATS_OK) {
        rv = 0;
    }
    natsOptions_Destroy(o);
    return rv;
}

json_t *cjs_request(struct cjs *c, int i, const char *subject, const char *body)
{
    natsMsg *m = NULL;
    if (c->nc[i] == NULL ||
        natsConnection_RequestString(&m, c->nc[i], subject, body, CJS_REQ_MS) !=
            NATS_OK) {
        return NULL;
    }
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    return o;
}

bool cjs_is_error(const json_t *o)
{
    return o == NULL || json_object_get(o, "error") != NULL;
}

json_t *cjs_request_ok(struct cjs *c, int i, const char *subject,
                       const char *body)
{
    json_t *o = cjs_request(c, i, subject, body);
    if (cjs_is_error(o)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

bool cjs_meta_ready(void *arg)
{
    struct cjs *c = arg;
    for (int i = 0; i < c->n; i++) {
        json_t *o = cjs_request_ok(c, i, "$JS.API.INFO", "");
        json_decref(o);
        if (o == NULL) {
            return false;
        }
    }
    return true;
}

int cjs_start(struct cjs *c, int n, const char *name, const char *const *extra,
              int wait_ms)
{
    static const char *const debug[] = {"-D", NULL};
    memset(c, 0, sizeof *c);
    c->n = n;
    if (extra == NULL && getenv("CJS_DEBUG") != NULL) {
        extra = debug;
    }
    int rv = h_netns_start(&c->net, n, name, extra);
    for (int i = 0; rv == 0 && i < n; i++) {
        rv = cjs_connect(c, i);
    }
    if (rv == 0 && !h_poll(cjs_meta_ready, c, wait_ms)) {
        fprintf(stderr, "no meta leader within %d ms\n", wait_ms);
        rv = -1;
    }
    if (rv != 0) {
        (void)cjs_stop(c); /* namespaces and keelds; twice is harmless */
    }
    return rv;
}

int cjs_start_prepared(struct cjs *c, int wait_ms)
{
    c->n = c->net.n;
    for (int i = 0; i < c->n; i++) {
        if (h_netns_node_start(&c->net, i) != 0) {
            return -1;
        }
    }
    int rv = h_netns_wait_mesh(&c->net, H_START_TIMEOUT_MS);
    for (int i = 0; rv == 0 && i < c->n; i++) {
        rv = cjs_connect(c, i);
    }
    if (rv == 0 && !h_poll(cjs_meta_ready, c, wait_ms)) {
        fprintf(stderr, "no meta leader within %d ms\n", wait_ms);
        rv = -1;
    }
    for (int i = 0; rv != 0 && i < c->n; i++) {
        h_netns_print_log(&c->net, i);
    }
    return rv;
}

bool cjs_log_has(const struct cjs *c, int i, const char *text)
{
    char line[1024];
    bool found = false;
    FILE *f = fopen(c->net.node[i].k.log_path, "r");
    /* Bounded by the log file (one test's run). */
    while (f != NULL && !found && fgets(line, sizeof line, f) != NULL) {
        found = strstr(line, text) != NULL;
    }
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

int cjs_stop(struct cjs *c)
{
    for (int i = 0; i < c->n; i++) {
        cjs_disconnect(c, i);
    }
    if (getenv("CJS_DEBUG") != NULL) {
        for (int i = 0; i < c->n; i++) {
            h_netns_print_log(&c->net, i);
        }
    }
    int rv = h_netns_cleanup(&c->net);
    nats_Close();
    return rv;
}

struct req_try {
    struct cjs *c;
    int i;
    const char *subject, *body;
    json_t *reply;
};

static bool answered(void *arg)
{
    struct req_try *t = arg;
    json_decref(t->reply);
    t->reply = cjs_request(t->c, t->i, t->subject, t->body);
    json_t *e = json_object_get(t->reply, "error");
    return t->reply != NULL &&
           json_integer_value(json_object_get(e, "err_code")) != 10008;
}

json_t *cjs_request_retry(struct cjs *c, int i, const char *subject,
                          const char *body, int wait_ms)
{
    struct req_try t = {c, i, subject, body, NULL};
    (void)h_poll(answered, &t, wait_ms);
    return t.reply;
}

json_t *cjs_stream_info(struct cjs *c, int i, const char *stream)
{
    char subj[160];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.INFO.%s", stream);
    return cjs_request_ok(c, i, subj, "");
}

bool cjs_replica_current(const json_t *info, const char *name)
{
    json_t *reps =
        json_object_get(json_object_get(info, "cluster"), "replicas");
    bool ok = false;
    size_t k;
    json_t *r;
    json_array_foreach(reps, k, r)
    {
        const char *n = json_string_value(json_object_get(r, "name"));
        if (n != NULL && strcmp(n, name) == 0) {
            ok = json_is_true(json_object_get(r, "current")) &&
                 json_integer_value(json_object_get(r, "lag")) == 0;
        }
    }
    return ok;
}

json_int_t cjs_state_int(struct cjs *c, int i, const char *stream,
                         const char *key)
{
    json_t *si = cjs_stream_info(c, i, stream);
    json_int_t v =
        json_integer_value(json_object_get(json_object_get(si, "state"), key));
    json_decref(si);
    return v;
}

json_t *cjs_msg_get(struct cjs *c, int i, const char *stream, json_int_t seq,
                    int wait_ms)
{
    char subj[160], body[48];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.MSG.GET.%s", stream);
    snprintf(body, sizeof body, "{\"seq\":%lld}", (long long)seq);
    json_t *o = cjs_request_retry(c, i, subj, body, wait_ms);
    assert_non_null(o);
    json_t *m = json_incref(json_object_get(o, "message"));
    json_decref(o);
    return m;
}

void cjs_add_mirror(struct cjs *c, int via, const char *name,
                    const char *origin, int replicas, int wait_ms)
{
    char subj[160], body[256];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    snprintf(body, sizeof body,
             "{\"name\":\"%s\",\"num_replicas\":%d,\"mirror\":{\"name\":"
             "\"%s\"}}",
             name, replicas, origin);
    json_t *o = cjs_request_retry(c, via, subj, body, wait_ms);
    assert_false(cjs_is_error(o));
    json_decref(o);
    assert_true(cjs_wait_stream_led(c, name, wait_ms) >= 0);
}

json_int_t cjs_check_mirror(struct cjs *c, int via, const char *origin,
                            const char *mirror, int wait_ms)
{
    json_int_t last = cjs_state_int(c, via, origin, "last_seq");
    assert_int_equal(cjs_state_int(c, via, mirror, "messages"),
                     cjs_state_int(c, via, origin, "messages"));
    assert_int_equal(cjs_state_int(c, via, mirror, "num_deleted"), 0);
    for (json_int_t s = 1; s <= last; s++) {
        json_t *a = cjs_msg_get(c, via, origin, s, wait_ms);
        json_t *b = cjs_msg_get(c, via, mirror, s, wait_ms);
        if (a == NULL || b == NULL || !json_equal(a, b)) {
            char *x = a != NULL ? json_dumps(a, 0) : NULL;
            char *y = b != NULL ? json_dumps(b, 0) : NULL;
            fail_msg("seq %lld: origin %s, mirror %s", (long long)s,
                     x != NULL ? x : "none", y != NULL ? y : "none");
        }
        json_decref(a);
        json_decref(b);
    }
    json_t *si = cjs_stream_info(c, via, mirror);
    const json_t *m = json_object_get(si, "mirror");
    assert_non_null(m);
    assert_int_equal(json_integer_value(json_object_get(m, "lag")), 0);
    assert_null(json_object_get(m, "error"));
    assert_null(json_object_get(m, "keel_lost"));
    json_decref(si);
    return last;
}

int cjs_node_named(const struct cjs *c, const char *name)
{
    for (int k = 0; name != NULL && k < c->n; k++) {
        if (strcmp(c->net.node[k].name, name) == 0) {
            return k;
        }
    }
    return -1;
}

int cjs_stream_leader(struct cjs *c, int i, const char *stream)
{
    json_t *o = cjs_stream_info(c, i, stream);
    int idx = cjs_node_named(c, json_string_value(json_object_get(
                                    json_object_get(o, "cluster"), "leader")));
    json_decref(o);
    return idx;
}

bool cjs_stream_agreed(struct cjs *c, const char *stream, int *leader)
{
    int first = -1;
    for (int i = 0; i < c->n; i++) {
        if (!c->net.node[i].running) {
            continue;
        }
        int l = cjs_stream_leader(c, i, stream);
        if (l < 0 || (first >= 0 && l != first)) {
            return false;
        }
        first = l;
    }
    if (leader != NULL) {
        *leader = first;
    }
    return first >= 0;
}

struct led_wait {
    struct cjs *c;
    const char *stream;
    int leader;
};

static bool led(void *arg)
{
    struct led_wait *w = arg;
    return cjs_stream_agreed(w->c, w->stream, &w->leader);
}

/* Print each node's view of stream's Raft group (its
 * $KEEL.API.CLUSTER.STATUS group: role, leader, term, last_index, commit,
 * applied and, on the leader, each peer's lag), asked through node via:
 * what a wait that timed out needs to say why. */
static void dump_group(struct cjs *c, int via, const char *stream)
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    if (c->nc[via] == NULL || natsInbox_Create(&inbox) != NATS_OK ||
        natsConnection_SubscribeSync(&sub, c->nc[via], inbox) != NATS_OK ||
        natsConnection_PublishRequestString(
            c->nc[via], "$KEEL.API.CLUSTER.STATUS", inbox, "") != NATS_OK) {
        fprintf(stderr, "group %s: no status through node %d\n", stream, via);
    }
    /* One answer per node at most (the request fans out). */
    for (int k = 0; sub != NULL && k < c->n; k++) {
        natsMsg *m = NULL;
        if (natsSubscription_NextMsg(&m, sub, CJS_REQ_MS) != NATS_OK) {
            break;
        }
        json_t *o = json_loadb(natsMsg_GetData(m),
                               (size_t)natsMsg_GetDataLength(m), 0, NULL);
        const char *nm = json_string_value(
            json_object_get(json_object_get(o, "server"), "name"));
        size_t i;
        json_t *g;
        json_t *mine = json_object_get(o, "meta"); /* none: say the meta's */
        json_array_foreach(json_object_get(o, "groups"), i, g)
        {
            const char *gs = json_string_value(json_object_get(g, "stream"));
            if (gs != NULL && strcmp(gs, stream) == 0) {
                mine = g;
            }
        }
        char *txt = json_dumps(mine, JSON_COMPACT);
        fprintf(stderr, "%s %s on %s: %s\n",
                mine == json_object_get(o, "meta") ? "no group; meta of"
                                                   : "group",
                stream, nm != NULL ? nm : "?", txt != NULL ? txt : "?");
        free(txt);
        json_decref(o);
        natsMsg_Destroy(m);
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    for (int i = 0; i < c->n; i++) {
        char subj[160];
        snprintf(subj, sizeof subj, "$JS.API.STREAM.INFO.%s", stream);
        json_t *o = c->nc[i] != NULL ? cjs_request(c, i, subj, "") : NULL;
        json_t *part = json_object_get(o, "error");
        char *txt = json_dumps(
            part != NULL ? part : json_object_get(o, "cluster"), JSON_COMPACT);
        fprintf(stderr, "stream info %s through node %d: %s\n", stream, i,
                txt != NULL ? txt : "no answer");
        free(txt);
        json_decref(o);
    }
}

int cjs_wait_stream_led(struct cjs *c, const char *stream, int wait_ms)
{
    struct led_wait w = {c, stream, -1};
    if (h_poll(led, &w, wait_ms)) {
        return w.leader;
    }
    fprintf(stderr, "stream %s: no leader every node names within %d ms\n",
            stream, wait_ms);
    for (int i = 0; i < c->n; i++) {
        if (c->nc[i] != NULL) {
            dump_group(c, i, stream);
            break;
        }
    }
    return -1;
}

struct lead_to {
    struct cjs *c;
    const char *stream;
    int want, asked;
    long long asked_ms;
};

/* Has want become stream's leader on every running node? Else ask the
 * leader every node names, at most every 100 ms (a transfer takes an
 * election or a catch-up), to hand over to want (placement "preferred"). */
static bool led_by_want(void *arg)
{
    struct lead_to *w = arg;
    char subj[160], body[160];
    int l = -1;
    if (cjs_stream_agreed(w->c, w->stream, &l) && l == w->want) {
        return true;
    }
    if (l >= 0 && h_now_ms() - w->asked_ms >= 100) {
        snprintf(subj, sizeof subj, "$JS.API.STREAM.LEADER.STEPDOWN.%s",
                 w->stream);
        snprintf(body, sizeof body, "{\"placement\":{\"preferred\":\"%s\"}}",
                 w->c->net.node[w->want].name);
        json_decref(cjs_request(w->c, l, subj, body));
        w->asked++;
        w->asked_ms = h_now_ms();
    }
    return false;
}

bool cjs_lead_to(struct cjs *c, const char *stream, int want, int wait_ms)
{
    struct lead_to w = {c, stream, want, 0, 0};
    long long t0 = h_now_ms();
    if (h_poll(led_by_want, &w, wait_ms)) {
        return true;
    }
    fprintf(stderr,
            "stream %s: node %d (%s) not its leader after %d step-downs "
            "in %lld ms\n",
            stream, want, c->net.node[want].name, w.asked, h_now_ms() - t0);
    dump_group(c, want, stream);
    return false;
}

/* One create; false (try again) on no answer or any error: a node just
 * restarted answers 10008 until it knows the meta leader, a create that
 * timed out may have been applied (then this one is answered as created,
 * nats-server's did_create), and two racing in the meta log answer the
 * later one 10058 though the stream is as asked. */
static bool created(void *arg)
{
    struct req_try *t = arg;
    json_decref(t->reply);
    t->reply = cjs_request(t->c, t->i, t->subject, t->body);
    return !cjs_is_error(t->reply);
}

void cjs_create_json(struct cjs *c, int via, const char *name, const char *body,
                     int wait_ms)
{
    char subj[160];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    struct req_try t = {c, via, subj, body, NULL};
    if (!h_poll(created, &t, wait_ms)) {
        char *txt = t.reply != NULL ? json_dumps(t.reply, JSON_COMPACT) : NULL;
        fprintf(stderr, "create %s through node %d: %s\n", name, via,
                txt != NULL ? txt : "no answer");
        free(txt);
    }
    assert_false(cjs_is_error(t.reply));
    json_decref(t.reply);
}

struct add_try {
    struct cjs *c;
    int via;
    jsStreamConfig *cfg;
    natsStatus s;
    jsErrCode jerr;
    bool retried;
};

/* One create; false (try again) on 10008 (the meta group is between
 * leaders) or on a timeout (a loaded machine can take longer than one
 * request to commit the create). A retried create may find the stream
 * made by the earlier try (10058). */
static bool added(void *arg)
{
    struct add_try *a = arg;
    jsStreamInfo *si = NULL;
    a->jerr = 0;
    a->s = js_AddStream(&si, a->c->js[a->via], a->cfg, NULL, &a->jerr);
    jsStreamInfo_Destroy(si);
    if (a->s == NATS_TIMEOUT || (a->s != NATS_OK && a->jerr == 10008)) {
        a->retried = true;
        return false;
    }
    if (a->s != NATS_OK && a->retried && a->jerr == 10058) {
        a->s = NATS_OK;
    }
    return true;
}

void cjs_add_stream_cfg(struct cjs *c, int via, jsStreamConfig *cfg,
                        int wait_ms)
{
    struct add_try a = {c, via, cfg, NATS_OK, 0, false};
    (void)h_poll(added, &a, wait_ms);
    if (a.s != NATS_OK) {
        fprintf(stderr, "add stream %s: %s (%d): %s\n", cfg->Name,
                natsStatus_GetText(a.s), (int)a.jerr, nats_GetLastError(NULL));
    }
    assert_int_equal(a.s, NATS_OK);
    assert_true(cjs_wait_stream_led(c, cfg->Name, wait_ms) >= 0);
}

struct kv_try {
    struct cjs *c;
    int via;
    kvConfig *kc;
    kvStore *kv;
    natsStatus s;
};

/* One bucket create; an identical bucket made by an earlier try that
 * timed out is found as created (nats-server's did_create rule). */
static bool kv_made(void *arg)
{
    struct kv_try *a = arg;
    kvStore_Destroy(a->kv);
    a->kv = NULL;
    a->s = js_CreateKeyValue(&a->kv, a->c->js[a->via], a->kc);
    return a->s == NATS_OK;
}

kvStore *cjs_create_kv(struct cjs *c, int via, kvConfig *kc, int wait_ms)
{
    struct kv_try a = {c, via, kc, NULL, NATS_OK};
    if (!h_poll(kv_made, &a, wait_ms)) {
        fprintf(stderr, "create bucket %s: %s: %s\n", kc->Bucket,
                natsStatus_GetText(a.s), nats_GetLastError(NULL));
    }
    assert_int_equal(a.s, NATS_OK);
    char stream[96];
    snprintf(stream, sizeof stream, "KV_%s", kc->Bucket);
    assert_true(cjs_wait_stream_led(c, stream, wait_ms) >= 0);
    return a.kv;
}

void cjs_add_stream(struct cjs *c, int via, const char *name,
                    const char *subject, int replicas, int wait_ms)
{
    jsStreamConfig cfg;
    const char *subjects[] = {subject};
    jsStreamConfig_Init(&cfg);
    cfg.Name = name;
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Replicas = replicas;
    cjs_add_stream_cfg(c, via, &cfg, wait_ms);
}

uint64_t cjs_stream_seq(natsMsg *m)
{
    jsMsgMetaData *md = NULL;
    assert_int_equal(natsMsg_GetMetaData(&md, m), NATS_OK);
    uint64_t s = md->Sequence.Stream;
    jsMsgMetaData_Destroy(md);
    return s;
}

void cjs_fetch_ack(natsSubscription *sub, int want, uint64_t *next, int wait_ms)
{
    jsErrCode jerr = 0;
    while (want > 0) {
        natsMsgList l = {0};
        assert_int_equal(natsSubscription_Fetch(&l, sub, want, wait_ms, &jerr),
                         NATS_OK);
        for (int k = 0; k < l.Count; k++) {
            assert_int_equal(cjs_stream_seq(l.Msgs[k]), *next);
            (*next)++;
            assert_int_equal(natsMsg_AckSync(l.Msgs[k], NULL, &jerr), NATS_OK);
        }
        want -= l.Count;
        natsMsgList_Destroy(&l);
    }
}

bool cjs_publish(struct cjs *c, int via, const char *subject, const char *data,
                 struct cjs_ledger *l, int req_ms)
{
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = req_ms;
    if (c->js[via] == NULL ||
        js_Publish(&pa, c->js[via], subject, data, (int)strlen(data), &po,
                   &jerr) != NATS_OK) {
        return false;
    }
    uint64_t seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    assert_true(seq >= 1 && seq <= CJS_SEQ_MAX);
    if (l->payload[seq] != NULL) {
        fail_msg("seq %llu acked for %s and again for %s",
                 (unsigned long long)seq, l->payload[seq], data);
    }
    l->payload[seq] = strdup(data);
    l->last = seq > l->last ? seq : l->last;
    l->acked++;
    return true;
}

void cjs_check_acked(struct cjs *c, int i, const char *stream,
                     const struct cjs_ledger *l)
{
    for (uint64_t s = 1; s <= l->last; s++) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        const char *want = l->payload[s];
        if (want == NULL) {
            continue; /* not acked (indeterminate): may or may not exist */
        }
        natsStatus st = js_GetMsg(&m, c->js[i], stream, s, NULL, &jerr);
        if (st != NATS_OK) {
            fail_msg("acked seq %llu (%s) through %s: %s (%d)",
                     (unsigned long long)s, want, c->net.node[i].name,
                     natsStatus_GetText(st), (int)jerr);
        }
        assert_int_equal(natsMsg_GetDataLength(m), (int)strlen(want));
        assert_memory_equal(natsMsg_GetData(m), want, strlen(want));
        natsMsg_Destroy(m);
    }
}

void cjs_publish_any(struct cjs *c, const char *subject, const char *data,
                     struct cjs_ledger *l, int wait_ms)
{
    long long until = h_now_ms() + wait_ms;
    bool acked = false;
    while (!acked && h_now_ms() < until) {
        for (int via = 0; via < c->n && !acked; via++) {
            acked = c->net.node[via].running &&
                    cjs_publish(c, via, subject, data, l, CJS_REQ_MS);
        }
    }
    assert_true(acked);
}

int cjs_kill_stream_leader(struct cjs *c, const char *stream, int wait_ms)
{
    int leader = cjs_wait_stream_led(c, stream, wait_ms);
    assert_true(leader >= 0);
    cjs_disconnect(c, leader);
    assert_int_equal(h_netns_node_kill(&c->net, leader), 0);
    return leader;
}

void cjs_restart_node(struct cjs *c, int i, const char *stream, int wait_ms)
{
    assert_int_equal(h_netns_node_start(&c->net, i), 0);
    assert_int_equal(cjs_connect(c, i), 0);
    assert_true(cjs_wait_stream_led(c, stream, wait_ms) >= 0);
}

void cjs_ledger_free(struct cjs_ledger *l)
{
    for (size_t s = 0; s <= CJS_SEQ_MAX; s++) {
        free(l->payload[s]);
        l->payload[s] = NULL;
    }
    l->last = 0;
    l->acked = 0;
}

int cjs_store_count(struct cjs *c, int i, const char *stream,
                    const char *prefix)
{
    static char line[64 * 1024];
    char cmd[1024];
    const char *keel = getenv("KEEL");
    assert_non_null(keel);
    assert_false(c->net.node[i].running);
    snprintf(cmd, sizeof cmd, "%s store dump --data %s --stream %s", keel,
             c->net.node[i].k.data_dir, stream);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = 0;
    while (fgets(line, sizeof line, p) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *entry = json_string_value(json_object_get(o, "entry"));
        const char *payload = json_string_value(json_object_get(o, "payload"));
        if (entry != NULL && strcmp(entry, "publish") == 0 && payload != NULL &&
            strncmp(payload, prefix, strlen(prefix)) == 0) {
            n++;
        }
        json_decref(o);
    }
    assert_int_equal(pclose(p), 0);
    return n;
}

int cjs_answers(struct cjs *c, int i, const char *subject, const char *body,
                int first_ms, int absent_ms, natsMsg **first)
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;
    int n = 0;
    if (first != NULL) {
        *first = NULL;
    }
    assert_int_equal(natsInbox_Create(&inbox), NATS_OK);
    assert_int_equal(natsConnection_SubscribeSync(&sub, c->nc[i], inbox),
                     NATS_OK);
    assert_int_equal(
        natsConnection_PublishRequestString(c->nc[i], subject, inbox, body),
        NATS_OK);
    for (int wait = first_ms;
         natsSubscription_NextMsg(&m, sub, wait) == NATS_OK; wait = absent_ms) {
        if (first != NULL && *first == NULL) {
            *first = m;
        } else {
            natsMsg_Destroy(m);
        }
        n++;
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    return n;
}

bool cjs_has_interest(struct cjs *c, int i, int from, const char *key)
{
    static char body[65536];
    return h_netns_http_get(&c->net, i, "/routez", body, sizeof body) == 200 &&
           h_routez_has_interest(body, c->net.node[from].name, key);
}

long long cjs_local_last_seq(struct cjs *c, int i, const char *stream,
                             long long *messages)
{
    static char body[65536];
    long long last = -1;
    size_t k;
    json_t *s;
    if (h_netns_http_get(&c->net, i, "/jsz?streams=1", body, sizeof body) !=
        200) {
        return -1;
    }
    json_t *root = json_loads(body, 0, NULL);
    json_array_foreach(json_object_get(root, "stream_detail"), k, s)
    {
        const char *name = json_string_value(json_object_get(s, "name"));
        if (name != NULL && strcmp(name, stream) == 0) {
            json_t *st = json_object_get(s, "state");
            last = json_integer_value(json_object_get(st, "last_seq"));
            if (messages != NULL) {
                *messages = json_integer_value(json_object_get(st, "messages"));
            }
        }
    }
    json_decref(root);
    return last;
}
