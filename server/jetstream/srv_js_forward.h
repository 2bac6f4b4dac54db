/* srv_js_forward: JetStream requests reach the node that must answer them
 * (docs/design.md §6 A3).
 *
 * Exactly one node answers each request: the meta leader for INFO and
 * stream create/update/delete/names/list, the stream leader for everything
 * about one stream and its consumers (stream info, purge, msg get/delete,
 * direct get, leader step-down, every CONSUMER.* request, $JS.ACK and
 * $JS.FC) and for stream publishes. A node that is not that leader sends
 * the request once, in a SRV_CLUSTER_JS_FWD frame, to the leader its
 * directory names; the receiver runs it through srv_js_intercept as if a
 * local client had sent it, but never forwards it again: a forwarded
 * request that finds the receiver no longer the leader is answered with
 * the JetStream 503 "temporarily unavailable" error when it has a reply,
 * dropped when not, and never stored. Core delivery of a publish to
 * subscribers is done only by the node the client published on.
 *
 * While a request's leader is unknown (a new stream's first election, a
 * failover) the request waits here, copied, up to SRV_JS_FWD_PARK_MS and
 * is retried every SRV_JS_FWD_PARK_TICK_MS; then it gets the 503 answer.
 * Waiting requests keep their order: while any waits, later requests
 * queue behind it (also those this node would answer itself).
 *
 * A stream request that names a stream this node does not know goes to
 * the meta leader, which knows every stream: a node whose meta state is
 * behind (just restarted, before a leader told it the commit index) never
 * answers "stream not found" (10059) for one that exists; the meta leader
 * answers it itself when it leads the stream, else with the 503.
 *
 * Replies and consumer deliveries (srv_js_deliver) made on the leader go
 * to local subscribers and, in a SRV_CLUSTER_JS_FWD deliver frame, once to
 * each node with interest in the route subject (a pull request's inbox on
 * another node), which delivers them locally only. Each queue group (push
 * consumer deliver_group) is served by one node: the leader's when it has
 * a member, else one holding members (preferably one that gets the frame
 * anyway); the frame names the groups the receiver must serve, and it
 * serves only those, so a node that gets a delivery for a plain
 * subscriber does not also hand it to its member of a group served
 * elsewhere (each message reaches one member cluster-wide).
 *
 * Frames (msgpack arrays):
 *   request: [1, subject, reply, hdr_bytes, headers+payload, origin]
 *   deliver: [2, route, wire, reply, hdr_bytes, headers+payload,
 *             [queue, ...]]
 *   (a 6-element deliver frame, without the list, is served to every
 *   local queue group, as before the list existed)
 *
 * Loop thread only. Without a cluster every call is a no-op that says
 * "answer here".
 */
#ifndef KEEL_SRV_JS_FORWARD_H
#define KEEL_SRV_JS_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"

struct srv_js;
struct srv_cmd;
struct srv_stream;
struct srv_cluster;
struct srv_js_api_entry;

/* Who must answer a subject (srv_js_fwd_classify). */
enum srv_js_fwd_target {
    SRV_JS_FWD_HERE = 0,   /* not a routed JetStream subject */
    SRV_JS_FWD_META = 1,   /* the meta leader */
    SRV_JS_FWD_STREAM = 2, /* the leader of the named stream */
};

/* Classify a $JS.API / $JS.ACK / $JS.FC subject by srv_js_api_table
 * (srv_js_table.h); for SRV_JS_FWD_STREAM
 * stream (at least SRV_JS_NAME_BYTES_MAX + 1 bytes) gets the stream name.
 * A subject naming no valid stream is SRV_JS_FWD_HERE (answered locally
 * with the usual error). Pure. */
enum srv_js_fwd_target srv_js_fwd_classify(const char *subject, size_t len,
                                           char *stream);

/* Register the SRV_CLUSTER_JS_FWD handler on cl for js (idempotent; also
 * done by srv_js_fwd_tick once the cluster is up). Returns 0 or a
 * KEEL_E* from srv_cluster_register_kind. */
KEEL_MUST_USE int srv_js_fwd_attach(struct srv_js *js, struct srv_cluster *cl);

/* Unregister (srv_js_stop): frames arriving after it are dropped. */
void srv_js_fwd_detach(struct srv_js *js);

/* JetStream's tick: attach once keeld's cluster links started (they start
 * after the JetStream engine opens). */
void srv_js_fwd_tick(struct srv_js *js);

/* A $JS.API / $JS.ACK / $JS.FC request reached srv_js_intercept and
 * matched e of srv_js_api_table (reply is the NUL-terminated reply
 * subject, "" if none). Returns true when this
 * node must not handle it: it was forwarded to the leader, or answered
 * with the 503 error (leader unknown, or a forwarded request that found
 * this node no longer the leader). */
bool srv_js_fwd_request(struct srv_js *js, const struct srv_js_api_entry *e,
                        const struct srv_cmd *cmd, const char *reply);

/* Admin requests (srv_js_status.c) that every node answers itself: is
 * the request running now one a peer forwarded here (never forwarded
 * again)? */
bool srv_js_fwd_inbound(void);

/* Send cmd (reply and body as they are) to the node named node, whose
 * srv_js_intercept runs it as a forwarded request. Returns 0, KEEL_ENOENT
 * (no link to it now, or no cluster) or a KEEL_E* from the link. */
KEEL_MUST_USE int srv_js_fwd_send(struct srv_js *js, const char *node,
                                  const struct srv_cmd *cmd);

/* A client's publish on_pub delivered to nobody and no stream captured,
 * on a node whose meta replica has entries it has not applied yet (the
 * create of the stream for it may be among them: a create is answered
 * once a majority holds it, and this node learns the commit a heartbeat
 * later). Park it, in order behind anything parked, until the meta
 * replica applied its log, lost its leader or SRV_JS_FWD_PARK_MS ran out; then
 * a stream that captures it takes it as any publish, or else the client gets
 * the answer it would have had now (the no-responders status when
 * no_responders, else nothing). Subjects starting with '$' or "_INBOX."
 * never park. Returns true when parked. */
bool srv_js_fwd_late_park(struct srv_js *js, const struct srv_cmd *cmd,
                          bool no_responders);

/* A publish stream st captures: true when this node must not propose it
 * (forwarded to st's leader, or answered with the 503 PubAck error). */
bool srv_js_fwd_publish(struct srv_js *js, struct srv_stream *st,
                        const struct srv_cmd *cmd, const char *reply);

/* After a local delivery of a server-originated message (srv_js_deliver):
 * send it once to every other node with interest in route (not when the
 * message itself came in a deliver frame). Returns how many nodes got it. */
size_t srv_js_fwd_deliver(struct srv_js *js, const char *route,
                          size_t route_len, const char *wire, size_t wire_len,
                          const char *reply, const void *hdr, size_t hlen,
                          const void *data, size_t dlen);

/* $JS.API.STREAM.LEADER.STEPDOWN.<s> and CONSUMER.LEADER.STEPDOWN.<s>.<c>
 * (the stream leader answers: forwarded there): start a Raft leadership
 * transfer of the stream's group to the voter body's
 * {"placement":{"preferred":NAME}} names (10040 when it is no voter), else
 * to a healthy follower at random (docs/raft.md), and answer
 * {"success":true}; 503 when there is none or this node does not lead. */
void srv_js_fwd_stepdown(struct srv_js *js, const char *subject,
                         const char *reply, const char *body, size_t len);

/* Has another node interest in subject (a subscriber a delivery made
 * here would reach through srv_js_fwd_deliver)? */
bool srv_js_fwd_remote_interest(struct srv_js *js, const char *subject);

/* The stream info / consumer info "cluster" block of st (a new JSON
 * object, NULL when out of memory): {name, leader, replicas: [{name,
 * current, active, lag[, offline]}]} with the followers as the leader sees
 * them; standalone {leader}. (srv_js_cluster_info.c) */
struct json_t *srv_js_cluster_info_json(struct srv_js *js,
                                        const struct srv_stream *st);

/* Counters for /jsz and tests. */
struct srv_js_fwd_stats {
    uint64_t requests_out;  /* request frames sent to a leader */
    uint64_t requests_in;   /* request frames received */
    uint64_t not_leader;    /* answered 503 / dropped: not the leader */
    uint64_t delivers_out;  /* deliver frames sent */
    uint64_t delivers_in;   /* deliver frames received */
    uint64_t send_failures; /* no link to the leader / queue full */
    uint64_t parked;        /* requests that waited for a leader */
    uint64_t late_parked;   /* publishes that waited for the meta state */
};
void srv_js_fwd_stats(struct srv_js_fwd_stats *out);

#endif
