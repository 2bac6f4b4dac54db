/* HTTP monitoring (libmicrohttpd, its own thread): GET /healthz and
 * GET /varz. The thread only reads copies of the stats that the loop
 * thread publishes under srv->stats_mu.
 */
#ifndef SRV_MONITOR_H
#define SRV_MONITOR_H

#include "keel/assert.h"
#include "srv_server.h"

struct srv_monitor;

/* Listen on addr:port (port 0 lets the kernel pick) and serve srv's
 * stats. *port_out gets the bound port. Returns 0, KEEL_EIO with errmsg,
 * or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_monitor_start(struct srv_server *srv, const char *addr,
                                    int port, struct srv_monitor **out,
                                    int *port_out, char *errmsg);

/* Stop the thread and free the monitor (NULL is fine). */
void srv_monitor_stop(struct srv_monitor *m);

#endif
