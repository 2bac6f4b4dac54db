/* Helpers of the Key/Value tests; see kv_common.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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
