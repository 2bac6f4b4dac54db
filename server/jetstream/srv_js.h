/* srv_js: the JetStream engine of one keeld node (docs/design.md §5, §6).
 *
 * Enabled when keeld has a store dir. One store and one replica_host per
 * node; a meta group of one holds stream configs (create/update/delete are
 * meta entries applied on commit); each stream has its own Raft group
 * (struct srv_stream). The $JS.API.> subjects are answered here, on the
 * loop thread, from the publish path (srv_js_intercept); replies are
 * published as ordinary NATS messages to the request's reply subject.
 *
 * Consumers (js-consumers) plug in through struct srv_consumer_ops,
 * registered with srv_js_set_consumer_ops after srv_js_open. Until they
 * are registered every hook is a no-op and $JS.API.CONSUMER.* answers
 * "consumer not found"-style errors.
 */
#ifndef KEEL_SRV_JS_H
#define KEEL_SRV_JS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "srv_stream.h"

struct srv_js;
struct srv_server;
struct srv_conn;
struct srv_cmd;

/* Hooks the consumer layer registers. Every member may be NULL. All run
 * on the loop thread. */
struct srv_consumer_ops {
    /* A committed entry of kind 0x40..0x7F of stream st, in log order
     * (also when replayed at start: ctx 0). payload excludes the kind
     * byte. */
    void (*apply)(struct srv_stream *st, uint64_t index, uint8_t kind,
                  const void *payload, uint32_t len, uint64_t ctx);
    /* After each applied publish that stored seq (wake waiting pulls,
     * push deliveries). Also during replay at start. */
    void (*on_stored)(struct srv_stream *st, uint64_t seq);
    /* This node became the leader of st's group (leader true) or stopped
     * being it. */
    void (*role)(struct srv_stream *st, bool leader);
    /* A $JS.API.CONSUMER.* request (subject is the full subject; reply
     * may be NULL/"" when the request had none). */
    void (*api)(struct srv_js *js, const char *subject, const char *reply,
                const char *body, size_t len);
    /* A publish to $JS.ACK.> or another subject the consumer layer
     * claims; return true when it consumed the message. hdr may be NULL. */
    bool (*intercept)(struct srv_js *js, const char *subject,
                      size_t subject_len, const char *reply, size_t reply_len,
                      const char *hdr, size_t hdr_len, const char *data,
                      size_t data_len);
    /* Stream st is being deleted or closed (shutdown): free what
     * *srv_stream_consumers_slot(st) holds. deleted is true for a
     * committed stream delete (remove consumer files too). */
    void (*stream_closed)(struct srv_stream *st, bool deleted);
    /* Stream st opened (created or reopened at start), before replay. */
    void (*stream_opened)(struct srv_stream *st);
    /* Number of consumers of st (STREAM.INFO state.consumer_count). */
    uint64_t (*consumer_count)(const struct srv_stream *st);
    /* Stream snapshots (LATER: log compaction) will embed the consumers'
     * state: snapshot encodes st's consumers into a malloc'ed buffer
     * (deterministic: the same applied entries give the same bytes);
     * restore rebuilds them on a freshly opened stream. Return 0 or a
     * KEEL_E*. Not called yet. */
    int (*snapshot)(const struct srv_stream *st, uint8_t **out, size_t *len);
    int (*restore)(struct srv_stream *st, const uint8_t *buf, size_t len);
};

/* Open the engine: store at store_dir (created if missing), the meta
 * group, every stream found in the meta state (replaying their logs).
 * Returns 0 or a KEEL_E* with errmsg saying what to fix. */
KEEL_MUST_USE int srv_js_open(struct srv_server *srv, const char *store_dir,
                              struct srv_js **out, char *errmsg);

/* Begin the stop on the loop thread (srv_server_stop calls it): close
 * every stream's group (consumers get stream_closed(st, false)), the meta
 * group, the tick timer and the host handle. Idempotent. */
void srv_js_stop(struct srv_js *js);

/* After the loop has run the handle closes (srv_js_stop first): close the
 * store cleanly and free js. */
void srv_js_close(struct srv_js *js);

/* Register the consumer hooks (ops must outlive js). */
void srv_js_set_consumer_ops(struct srv_js *js,
                             const struct srv_consumer_ops *ops);
const struct srv_consumer_ops *srv_js_consumer_ops(const struct srv_js *js);

/* The server the engine belongs to. */
struct srv_server *srv_js_server(const struct srv_js *js);

/* Clustered JetStream (keeld with --cluster and a store dir): the meta
 * group spans the seed nodes and streams have replicated groups. */
bool srv_js_clustered(const struct srv_js *js);

/* Clustered: the meta replica holds entries it has not applied yet and
 * knows a leader (that will tell it the commit). A node cut off from its
 * meta leader stops saying so once it stops naming one (an election
 * timeout), so publishes parked on it (srv_js_fwd_late_park) and the
 * requests parked behind them wait no longer than that. */
bool srv_js_meta_behind(struct srv_js *js);
/* This node's name (-n; the server id when not clustered and unnamed). */
const char *srv_js_self_name(const struct srv_js *js);
/* The meta group leader's name: self's name when this node leads, NULL
 * while unknown (no leader yet, or its announcement went stale). */
const char *srv_js_meta_leader_name(const struct srv_js *js);
/* Lame duck mode (srv_server_lame_duck): with start, begin a leadership
 * transfer (to a healthy voter) of every group this node leads,
 * the meta group and each stream's. Returns how many groups this node
 * still leads that another voter could take: 0 once every leadership
 * moved (a group with no other voter, an R1 stream, does not count; nor
 * does anything on a node that is not clustered). A transfer that does
 * not complete within an election timeout is abandoned by Raft: call
 * again with start to retry. Loop thread only. */
uint32_t srv_js_hand_over(struct srv_js *js, bool start);

/* $KEEL.API.SERVER.LAMEDUCK (keel server lameduck), answered by the node
 * that receives it: reply {"success", "server", "already", "leaderships"}
 * and enter lame duck mode (srv_server_lame_duck). Returns false for any
 * other subject. */
bool srv_js_ldm_request(struct srv_js *js, const struct srv_cmd *cmd,
                        const char *reply);

/* True while this node leads the meta group. */
bool srv_js_is_meta_leader(const struct srv_js *js);
/* This node's place in the meta group, for logs and monitoring:
 * "standalone" (not clustered), "forming" (empty, waiting for every seed),
 * "member", "not a member" (empty, found an existing cluster: waits to
 * be added, issue 9), or "joining" (joins through a solo seed and is not
 * a voter yet: the meta leader adds and promotes it). */
const char *srv_js_meta_membership(const struct srv_js *js);

/* What keeld registers with the NATS core (srv_server_set_pub_hooks, arg
 * the struct srv_js): take is srv_js_intercept, park srv_js_fwd_late_park,
 * hand_over srv_js_hand_over, stop srv_js_stop. */
struct srv_pub_hooks;
extern const struct srv_pub_hooks srv_js_pub_hooks;

/* Called by the publish path for every PUB/HPUB before core delivery
 * (srv_js_pub_hooks' take). Looks the subject up in srv_js_api_table
 * (srv_js_table.h) and answers, forwards or drops what an entry names
 * ($JS.API.*, $KEEL.API.*, $JS.ACK.*, $JS.FC.*), and proposes publishes whose
 * subject a stream captures (the message is then ALSO delivered to core
 * subscribers: the return value says only whether JetStream answered the
 * request, so no 503 no-responders status is sent for it). */
bool srv_js_intercept(struct srv_js *js, struct srv_conn *c,
                      const struct srv_cmd *cmd);

/* The stream named name. Returns 0 or KEEL_ENOENT. */
KEEL_MUST_USE int srv_js_find_stream(struct srv_js *js, const char *name,
                                     struct srv_stream **out);

/* Publish a server-originated message to local subscribers of subject
 * (deliveries, API replies, 404/408 status messages): hdr (a NATS/1.0
 * block) may be NULL; reply may be NULL. Returns 0 or KEEL_ENOMEM /
 * KEEL_EINVAL (subject empty or too long). */
KEEL_MUST_USE int srv_js_send(struct srv_js *js, const char *subject,
                              const char *reply, const void *hdr, size_t hlen,
                              const void *data, size_t dlen);

/* Deliver a consumer message (docs/protocol.md §2.7): routed like a publish to
 * route_subject (the pull request's reply inbox, or the push
 * deliver_subject, where a queue group gets it once) but the MSG/HMSG line
 * carries wire_subject (the stored message's subject) and reply (its
 * $JS.ACK subject). hdr may be NULL. Returns 0, KEEL_ENOMEM or KEEL_EINVAL.
 * Declared by js-consumers (srv_consumer.c calls it); js-streams implements
 * it beside srv_js_send. */
KEEL_MUST_USE int srv_js_deliver(struct srv_js *js, const char *route_subject,
                                 const char *wire_subject, size_t wire_len,
                                 const char *reply, const void *hdr,
                                 size_t hlen, const void *data, size_t dlen);

#endif
