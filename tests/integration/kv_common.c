/* Helpers of the Key/Value tests; see kv_common.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_common.h"

void kv_history_ops(kvStore *kv, const char *key, char *out, size_t cap)
{
    kvEntryList l;
    size_t n = 0;
    assert_true(cap > 0);
    memset(&l, 0, sizeof l);
    assert_int_equal(kvStore_History(&l, kv, key, NULL), NATS_OK);
    for (int i = 0; i < l.Count && n + 1 < cap; i++) {
        kvOperation op = kvEntry_Operation(l.Entries[i]);
        out[n++] = op == kvOp_Put ? 'P' : op == kvOp_Delete ? 'D' : 'U';
    }
    out[n] = '\0';
    kvEntryList_Destroy(&l);
}

json_t *kv_api_json(natsConnection *nc, const char *subject, const char *body,
                    int timeout_ms)
{
    natsMsg *m = NULL;
    assert_int_equal(
        natsConnection_RequestString(&m, nc, subject, body, timeout_ms),
        NATS_OK);
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    natsMsg_Destroy(m);
    assert_non_null(o);
    return o;
}

static int js1_connect(struct kv_js1 *f)
{
    jsOptions o;
    jsOptions_Init(&o);
    o.Wait = f->wait_ms;
    return natsConnection_ConnectTo(&f->nc, f->k.url) == NATS_OK &&
                   natsConnection_JetStream(&f->js, f->nc, &o) == NATS_OK
               ? 0
               : -1;
}

static void js1_disconnect(struct kv_js1 *f)
{
    jsCtx_Destroy(f->js);
    natsConnection_Destroy(f->nc);
    f->js = NULL;
    f->nc = NULL;
}

int kv_js1_setup(void **state, const char *const *extra, int wait_ms)
{
    struct kv_js1 *f = calloc(1, sizeof *f);
    if (f == NULL) {
        return -1;
    }
    f->extra = extra;
    f->wait_ms = wait_ms;
    if (h_keeld_init(&f->k) != 0 ||
        h_keeld_start(&f->k, 0, false, extra) != 0 || js1_connect(f) != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

int kv_js1_teardown(void **state)
{
    struct kv_js1 *f = *state;
    js1_disconnect(f);
    int rv = h_keeld_stop(&f->k, NULL);
    h_keeld_cleanup(&f->k);
    free(f);
    return rv;
}

void kv_js1_stop(struct kv_js1 *f)
{
    js1_disconnect(f);
    assert_int_equal(h_keeld_stop(&f->k, NULL), 0);
}

void kv_js1_start(struct kv_js1 *f)
{
    assert_int_equal(h_keeld_start(&f->k, 0, false, f->extra), 0);
    assert_int_equal(js1_connect(f), 0);
}

void kv_js1_restart(struct kv_js1 *f)
{
    kv_js1_stop(f);
    kv_js1_start(f);
}

json_t *kv_js1_api(struct kv_js1 *f, const char *subject, const char *body)
{
    return kv_api_json(f->nc, subject, body, f->wait_ms);
}

void kv_js1_api_ok(struct kv_js1 *f, const char *subject, const char *body)
{
    json_t *o = kv_js1_api(f, subject, body);
    if (json_object_get(o, "error") != NULL) {
        char *s = json_dumps(o, 0);
        fail_msg("%s: %s", subject, s);
    }
    json_decref(o);
}

long long kv_js1_api_err(struct kv_js1 *f, const char *subject,
                         const char *body)
{
    json_t *o = kv_js1_api(f, subject, body);
    long long code = json_integer_value(
        json_object_get(json_object_get(o, "error"), "err_code"));
    json_decref(o);
    return code;
}

void kv_js1_create(struct kv_js1 *f, const char *name, const char *body)
{
    char subj[128];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.CREATE.%s", name);
    kv_js1_api_ok(f, subj, body);
}

json_t *kv_js1_info(struct kv_js1 *f, const char *stream)
{
    char subj[128];
    snprintf(subj, sizeof subj, "$JS.API.STREAM.INFO.%s", stream);
    return kv_js1_api(f, subj, "");
}

long long kv_js1_state(const json_t *info, const char *key)
{
    return json_integer_value(
        json_object_get(json_object_get(info, "state"), key));
}

uint64_t kv_js1_publish(struct kv_js1 *f, const char *subj, const char *data,
                        const char *hname, const char *hval)
{
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    assert_int_equal(natsMsg_Create(&m, subj, NULL, data, (int)strlen(data)),
                     NATS_OK);
    if (hname != NULL) {
        assert_int_equal(natsMsgHeader_Set(m, hname, hval), NATS_OK);
    }
    assert_int_equal(js_PublishMsg(&pa, f->js, m, NULL, &jerr), NATS_OK);
    uint64_t seq = pa->Sequence;
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
    return seq;
}
