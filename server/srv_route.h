/* Protocol commands of one conn and message routing: CONNECT, PUB/HPUB
 * fan-out through the sublist, SUB/UNSUB, PING/PONG (PROTOCOL.md §1).
 */
#ifndef SRV_ROUTE_H
#define SRV_ROUTE_H

#include <stddef.h>

#include "keel/assert.h"

struct srv_conn;

/* Queue bytes on c's outbound buffer (protocol replies; not subject to the
 * slow-consumer limit) and mark c dirty. Returns 0 or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_route_append(struct srv_conn *c, const char *data,
                                   size_t len);

/* Parse and act on len bytes read from c. Protocol errors queue the -ERR
 * that PROTOCOL.md §1.9 prescribes and close c. */
void srv_route_input(struct srv_conn *c, const char *data, size_t len);

#endif
