/* Helpers of the libnats JetStream tests (test_js_*.c, test_cjs_kv.c):
 * Key/Value over libnats' kvStore and raw JetStream API requests.
 * Functions that assert use cmocka (call them from a test case). */
#ifndef KEEL_TEST_KV_COMMON_H
#define KEEL_TEST_KV_COMMON_H

#include <jansson.h>
#include <nats/nats.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* key's history, oldest first, as letters in out (cap bytes, NUL ended):
 * P(ut), D(elete), U (pUrge). Asserts kvStore_History succeeds. */
void kv_history_ops(kvStore *kv, const char *key, char *out, size_t cap);

/* A JetStream API request (body may be "") through nc, answered within
 * timeout_ms (asserted): the reply, parsed (asserted JSON). */
json_t *kv_api_json(natsConnection *nc, const char *subject, const char *body,
                    int timeout_ms);

/* The fixture of the single-node JetStream tests: one keeld started with
 * extra arguments (NULL-ended, may be NULL) and a connection with a
 * JetStream context whose API calls wait wait_ms. */
struct kv_js1 {
    struct h_keeld k;
    natsConnection *nc;
    jsCtx *js;
    const char *const *extra;
    int wait_ms;
};

/* A cmocka setup: *state becomes a started struct kv_js1 (-1 on failure). */
int kv_js1_setup(void **state, const char *const *extra, int wait_ms);

/* A cmocka teardown for kv_js1_setup: stops keeld and frees the fixture. */
int kv_js1_teardown(void **state);

/* Disconnect and stop keeld; start it again on the same data directory
 * with f->extra and reconnect; or both (a restart). Each asserts. */
void kv_js1_stop(struct kv_js1 *f);
void kv_js1_start(struct kv_js1 *f);
void kv_js1_restart(struct kv_js1 *f);

/* Raw JetStream API calls of the kv_js1 tests (test_js_mirror.c,
 * test_js_sources.c, test_js_republish.c); each asserts as it says. */

/* A request through f's connection, answered within f->wait_ms: the
 * reply, parsed. */
json_t *kv_js1_api(struct kv_js1 *f, const char *subject, const char *body);

/* A request whose reply has no error (asserted). */
void kv_js1_api_ok(struct kv_js1 *f, const char *subject, const char *body);

/* The err_code of the reply to a request (0: none). */
long long kv_js1_api_err(struct kv_js1 *f, const char *subject,
                         const char *body);

/* STREAM.CREATE of name with the config body, without error. */
void kv_js1_create(struct kv_js1 *f, const char *name, const char *body);

/* STREAM.INFO of stream: the reply, parsed. */
json_t *kv_js1_info(struct kv_js1 *f, const char *stream);

/* An integer of a STREAM.INFO reply's state (0 when absent). */
long long kv_js1_state(const json_t *info, const char *key);

/* Publish data to subj through f->js, with the header hname: hval
 * unless hname is NULL; the acked seq. */
uint64_t kv_js1_publish(struct kv_js1 *f, const char *subj, const char *data,
                        const char *hname, const char *hval);

#endif
