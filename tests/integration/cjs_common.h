/* Shared setup of the clustered JetStream tests (test_cjs_*.c): a netns
 * cluster (netns.h) with one libnats connection and JetStream context per
 * node, bound to that node only (a test must know which node answers), the
 * JetStream API requests the tests make, the stream leader as each node
 * reports it, a ledger of acknowledged publishes and the checks on it.
 * Functions that assert use cmocka (call them from a test case).
 */
#ifndef KEEL_TEST_CJS_COMMON_H
#define KEEL_TEST_CJS_COMMON_H

#include <jansson.h>
#include <nats/nats.h>
#include <stdbool.h>
#include <stdint.h>

#include "netns.h"

#define CJS_REQ_MS 2000  /* one request's timeout */
#define CJS_SEQ_MAX 1024 /* highest sequence a ledger records */

struct cjs {
    int n;
    struct h_netns net;
    natsConnection *nc[H_NETNS_NODES_MAX]; /* NULL while disconnected */
    jsCtx *js[H_NETNS_NODES_MAX];
};

/* Start n nodes (h_netns_start with extra, and -D when $CJS_DEBUG is set
 * and extra is NULL), connect to each and wait (bounded by wait_ms) until
 * every node answers $JS.API.INFO (the meta group has a leader all know).
 * On failure it cleans up itself and returns -1. */
int cjs_start(struct cjs *c, int n, const char *name, const char *const *extra,
              int wait_ms);

/* cjs_start for a cluster the caller prepared (h_netns_prepare into
 * c->net, then per-node routes, a hosts file...): start every node, wait
 * (bounded) for the full mesh, connect and wait wait_ms for a meta
 * leader every node knows. Returns 0 or -1 (logs printed; the caller
 * still calls cjs_stop). */
int cjs_start_prepared(struct cjs *c, int wait_ms);

/* Does node i's log contain text? */
bool cjs_log_has(const struct cjs *c, int i, const char *text);

/* Disconnect every node, print the logs when $CJS_DEBUG is set, stop the
 * cluster and close libnats. Returns h_netns_cleanup's result. */
int cjs_stop(struct cjs *c);

/* Poll condition (arg: struct cjs): the meta group has a leader every
 * node knows ($JS.API.INFO answered through each: a node that does not
 * know it yet answers 503). */
bool cjs_meta_ready(void *c);

/* Connect to node i only, no reconnect. Returns 0 or -1. */
int cjs_connect(struct cjs *c, int i);
void cjs_disconnect(struct cjs *c, int i);

/* Request subject (body may be "") on node i: the reply as JSON, NULL when
 * there was none (or i is disconnected). */
json_t *cjs_request(struct cjs *c, int i, const char *subject,
                    const char *body);

/* NULL or a JSON API error. */
bool cjs_is_error(const json_t *o);

/* cjs_request, with an error answer turned into NULL. */
json_t *cjs_request_ok(struct cjs *c, int i, const char *subject,
                       const char *body);

/* cjs_request, sent again while there is no answer or the answer is 503
 * 10008 (no leader now: a loaded machine can delay heartbeats), for at
 * most wait_ms; the last answer (NULL: none). Only for requests that are
 * safe to repeat. */
json_t *cjs_request_retry(struct cjs *c, int i, const char *subject,
                          const char *body, int wait_ms);

/* Stream info of stream asked on node i; NULL on no answer or error. */
json_t *cjs_stream_info(struct cjs *c, int i, const char *stream);

/* Whether info (a STREAM.INFO reply, may be NULL) shows the replica on
 * the node named name current with no lag: the leader's view of it. */
bool cjs_replica_current(const json_t *info, const char *name);

/* A "state" counter (messages, last_seq...) of stream's info asked on
 * node i; 0 when there is no answer. */
json_int_t cjs_state_int(struct cjs *c, int i, const char *stream,
                         const char *key);

/* STREAM.MSG.GET of seq through node i (retried as cjs_request_retry):
 * the "message" object (the caller decrefs), NULL when there is none;
 * asserts an answer. */
json_t *cjs_msg_get(struct cjs *c, int i, const char *stream, json_int_t seq,
                    int wait_ms);

/* Create stream name mirroring origin with replicas through node via and
 * wait until every running node names its leader; asserts both. */
void cjs_add_mirror(struct cjs *c, int via, const char *name,
                    const char *origin, int replicas, int wait_ms);

/* Mirror holds every seq of origin, asked through node via: subject,
 * payload, headers and timestamp equal, none missing or twice, no deleted
 * seq, lag 0, no error and no lost seqs in its mirror block. Returns the
 * origin's last seq. */
json_int_t cjs_check_mirror(struct cjs *c, int via, const char *origin,
                            const char *mirror, int wait_ms);

/* The state of stream in node i's own replica (/jsz?streams=1, never
 * forwarded): its last_seq, and its messages into *messages (may be
 * NULL); -1 when node i has none or does not answer. */
long long cjs_local_last_seq(struct cjs *c, int i, const char *stream,
                             long long *messages);

/* Index of the node called name, or -1. */
int cjs_node_named(const struct cjs *c, const char *name);

/* The leader of stream as node i reports it (index), or -1. */
int cjs_stream_leader(struct cjs *c, int i, const char *stream);

/* Every running node names the same leader of stream; that leader's index
 * (*leader may be NULL) when true. */
bool cjs_stream_agreed(struct cjs *c, const char *stream, int *leader);

/* Wait (bounded) until cjs_stream_agreed. Returns the leader or -1. */
int cjs_wait_stream_led(struct cjs *c, const char *stream, int wait_ms);

/* Ask stream's leader to step down to node want (placement "preferred",
 * bounded by wait_ms) until want leads it on every running node. On a timeout
 * it prints each node's view of the group (role, term, commit, applied, the
 * peers' lag) and returns false. */
bool cjs_lead_to(struct cjs *c, const char *stream, int want, int wait_ms);

/* $JS.API.STREAM.CREATE.name with a JSON body through node via, sent
 * again (bounded by wait_ms) while it gets no answer or an error; asserts
 * it is created. For configurations libnats cannot express. */
void cjs_create_json(struct cjs *c, int via, const char *name, const char *body,
                     int wait_ms);

/* js_AddStream through node via (name, one subject, replicas) and wait
 * until every running node names its leader; asserts both. */
void cjs_add_stream(struct cjs *c, int via, const char *name,
                    const char *subject, int replicas, int wait_ms);

/* The same with a full configuration. */
void cjs_add_stream_cfg(struct cjs *c, int via, jsStreamConfig *cfg,
                        int wait_ms);

/* js_CreateKeyValue through node via, retried (bounded) while the meta
 * group is between leaders or slow to commit, then wait until every
 * running node names the bucket stream's leader; asserts both. */
kvStore *cjs_create_kv(struct cjs *c, int via, kvConfig *kc, int wait_ms);

/* The stream sequence of a JetStream message (asserts its metadata). */
uint64_t cjs_stream_seq(natsMsg *m);

/* Fetch want messages on sub, acking each synchronously; *next is the
 * stream sequence expected first, advanced past each message. */
void cjs_fetch_ack(natsSubscription *sub, int want, uint64_t *next,
                   int wait_ms);

/* Acknowledged publishes by sequence: each sequence acked for one payload
 * at most (asserted), so a lost or overwritten ack shows up on read back. */
struct cjs_ledger {
    char *payload[CJS_SEQ_MAX + 1];
    uint64_t last; /* highest acked sequence */
    int acked;
};

/* One publish of data on subject through node via, waiting req_ms for the
 * ack; recorded in l when acked. False (not acked: 503 while a leader is
 * elected, a timeout, a lost connection) leaves the outcome indeterminate:
 * the caller may try again. */
bool cjs_publish(struct cjs *c, int via, const char *subject, const char *data,
                 struct cjs_ledger *l, int req_ms);

/* cjs_publish through the first running node that acks, tried again
 * (bounded by wait_ms) while none does; asserted to be acked. */
void cjs_publish_any(struct cjs *c, const char *subject, const char *data,
                     struct cjs_ledger *l, int wait_ms);

/* Kill (-9) the leader of stream (waited for, bounded by wait_ms) after
 * disconnecting from it; its node. */
int cjs_kill_stream_leader(struct cjs *c, const char *stream, int wait_ms);

/* Start killed node i again, reconnect, and wait (bounded by wait_ms)
 * until stream has a leader every running node agrees on. */
void cjs_restart_node(struct cjs *c, int i, const char *stream, int wait_ms);

/* Every payload of l reads back at its sequence of stream through node i
 * (js_GetMsg: answered by the stream leader). */
void cjs_check_acked(struct cjs *c, int i, const char *stream,
                     const struct cjs_ledger *l);

void cjs_ledger_free(struct cjs_ledger *l);

/* Publish records of stream whose payload starts with prefix in the store
 * of stopped node i, read with `keel store dump` ($KEEL, meson sets it). */
int cjs_store_count(struct cjs *c, int i, const char *stream,
                    const char *prefix);

/* Send subject (body) with a reply to a fresh inbox through node i and
 * count the answers: the first within first_ms, then any other within
 * absent_ms (a second answer from another node would come in that
 * window). *first (may be NULL) gets the first answer, the caller
 * destroys it. */
int cjs_answers(struct cjs *c, int i, const char *subject, const char *body,
                int first_ms, int absent_ms, natsMsg **first);

/* Does node i list interest key ("subject" or "subject queue") from node
 * from in its /routez? */
bool cjs_has_interest(struct cjs *c, int i, int from, const char *key);

#endif
