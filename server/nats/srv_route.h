/* Protocol commands of one conn and message routing: CONNECT, PUB/HPUB
 * fan-out through the sublist, SUB/UNSUB, PING/PONG (docs/protocol.md §1).
 */
#ifndef SRV_ROUTE_H
#define SRV_ROUTE_H

#include <stddef.h>

#include "keel/assert.h"
#include "srv_parser.h"

struct srv_conn;
struct srv_server;

/* Queue bytes on c's outbound buffer (protocol replies; not subject to the
 * slow-consumer limit) and mark c dirty. Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_route_append(struct srv_conn *c, const char *data,
                                   size_t len);

/* Parse and act on len bytes read from c. Protocol errors queue the -ERR
 * that docs/protocol.md §1.9 prescribes and close c. */
void srv_route_input(struct srv_conn *c, const char *data, size_t len);

struct srv_server;

/* Deliver a server-originated message (JetStream replies, consumer
 * deliveries) to the local subscribers matching route; the MSG/HMSG line
 * carries wire as its subject and reply (may be NULL). hdr is a NATS/1.0
 * block of hlen bytes (0: a plain MSG). Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_route_deliver_internal(struct srv_server *srv,
                                             const char *route,
                                             size_t route_len, const char *wire,
                                             size_t wire_len, const char *reply,
                                             const void *hdr, size_t hlen,
                                             const void *data, size_t dlen);

/* The same for a delivery another node routed here: every plain
 * subscription and one member of each queue group named in queues only
 * (the routing node chose this node for those; queues may be NULL when
 * nqueues is 0). */
KEEL_MUST_USE int srv_route_deliver_internal_queues(
    struct srv_server *srv, const char *route, size_t route_len,
    const char *wire, size_t wire_len, const char *reply, const void *hdr,
    size_t hlen, const void *data, size_t dlen, const struct srv_slice *queues,
    size_t nqueues);

/* Publish from inside keeld as a client's PUB goes, without a client:
 * the layer above (JetStream takes API requests), the local subscribers,
 * other nodes with interest. subject is valid (no wildcard), reply may be
 * NULL, hdr a NATS/1.0 block of hlen bytes (0: a PUB). *delivered counts
 * who got it (the layer above as one). Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_route_publish(struct srv_server *srv, const char *subject,
                                    const char *reply, const void *hdr,
                                    size_t hlen, const void *data, size_t dlen,
                                    size_t *delivered);

/* Deliver a message forwarded by another node to the local subscribers:
 * every plain subscription, and one member of each queue group named in
 * queues (the sender chose this node for those). Never forwarded again. */
void srv_route_deliver_routed(struct srv_server *srv, const struct srv_cmd *cmd,
                              const struct srv_slice *queues, size_t nqueues);

#endif
