/* srv_isub: subscriptions and publishes from inside keeld, as a client
 * makes them but without a connection. An internal subscription is in the
 * server's sublist like a client's: a message published here, delivered
 * by the layer above (srv_route_deliver_internal) or routed from another
 * node reaches its handler, and its interest goes to the other nodes
 * through the forwarder's hooks, so what is published anywhere in the
 * cluster reaches it. A publish goes where a client's PUB goes: the layer
 * above (JetStream answers API requests), local subscribers, other nodes.
 * A JetStream stream reads another through the JetStream API with them
 * (a mirror or source with `external`). Loop thread only. */
#ifndef SRV_ISUB_H
#define SRV_ISUB_H

#include <stddef.h>

#include "keel/assert.h"
#include "srv_sublist.h"

struct srv_server;

/* Subscribe to subject (wildcards allowed; no queue group): fn(arg, msg)
 * gets each message, on the loop thread, while it runs only; it must copy
 * what it keeps and must not remove this subscription. *out is the
 * handle for srv_isub_remove. Returns 0, KEEL_EINVAL (a bad subject) or
 * KEEL_ENOMEM. */
KEEL_MUST_USE int srv_isub_add(struct srv_server *srv, const char *subject,
                               srv_sub_fn fn, void *arg, struct srv_sub **out);

/* Unsubscribe (NULL: nothing). fn is not called again; the memory goes
 * when the loop iteration ends. */
void srv_isub_remove(struct srv_server *srv, struct srv_sub *sub);

/* Publish data (len bytes) with headers hdr (hlen bytes, a NATS/1.0
 * block; 0: none) to subject, reply may be NULL. *delivered: how many got
 * it (0: nobody listened). Returns 0, KEEL_EINVAL or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_isub_publish(struct srv_server *srv, const char *subject,
                                   const char *reply, const void *hdr,
                                   size_t hlen, const void *data, size_t len,
                                   size_t *delivered);

#endif
