/* Helpers of the libnats JetStream tests (test_js_*.c, test_cjs_kv.c):
 * Key/Value over libnats' kvStore and raw JetStream API requests.
 * Functions that assert use cmocka (call them from a test case). */
#ifndef KEEL_TEST_KV_COMMON_H
#define KEEL_TEST_KV_COMMON_H

#include <jansson.h>
#include <nats/nats.h>
#include <stddef.h>

/* key's history, oldest first, as letters in out (cap bytes, NUL ended):
 * P(ut), D(elete), U (pUrge). Asserts kvStore_History succeeds. */
void kv_history_ops(kvStore *kv, const char *key, char *out, size_t cap);

/* A JetStream API request (body may be "") through nc, answered within
 * timeout_ms (asserted): the reply, parsed (asserted JSON). */
json_t *kv_api_json(natsConnection *nc, const char *subject, const char *body,
                    int timeout_ms);

#endif
