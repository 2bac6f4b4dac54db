/* Helpers of the Key/Value tests (test_js_kv.c, test_js_rollup.c,
 * test_cjs_kv.c) over libnats' kvStore. Functions that assert use cmocka
 * (call them from a test case). */
#ifndef KEEL_TEST_KV_COMMON_H
#define KEEL_TEST_KV_COMMON_H

#include <nats/nats.h>
#include <stddef.h>

/* key's history, oldest first, as letters in out (cap bytes, NUL ended):
 * P(ut), D(elete), U (pUrge). Asserts kvStore_History succeeds. */
void kv_history_ops(kvStore *kv, const char *key, char *out, size_t cap);

#endif
