/* HTTP monitoring (libmicrohttpd, its own thread): GET /healthz, /varz,
 * /connz, /jsz, /routez and /metrics. The thread only reads stats
 * snapshots (srv_metrics) and copies published under srv->stats_mu; it
 * never touches loop-owned structures.
 */
#ifndef SRV_MONITOR_H
#define SRV_MONITOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "srv_server.h"

struct srv_monitor;
struct srv_mon_snap;
struct srv_mon_group;

/* Listen on addr:port (port 0 lets the kernel pick) and serve srv's
 * stats; srv->metrics must be set. *port_out gets the bound port.
 * Returns 0, KEEL_EIO with errmsg, or KEEL_ENOMEM. */
KEEL_MUST_USE int srv_monitor_start(struct srv_server *srv, const char *addr,
                                    int port, struct srv_monitor **out,
                                    int *port_out, char *errmsg);

/* Stop the thread and free the monitor (NULL is fine). */
void srv_monitor_stop(struct srv_monitor *m);

/* ---- srv_monitor_fmt.c / srv_metrics_prom.c: bodies built from a
 * snapshot only (pure). Each returns a malloc'ed string or NULL (out of
 * memory). ---- */

/* /connz: nats-server's shape, conns [offset, offset+limit). */
char *srv_mon_connz_json(const struct srv_mon_snap *s, const char *server_id,
                         uint64_t offset, uint64_t limit);

/* /jsz: totals, api counters, meta group, per-group Raft state; with
 * streams, a stream_detail array. */
char *srv_mon_jsz_json(const struct srv_mon_snap *s, const char *server_id,
                       bool streams);

/* /metrics: Prometheus text format 0.0.4. */
char *srv_mon_metrics_text(const struct srv_mon_snap *s, bool healthy);

/* The /healthz warnings (docs/design.md §6: they never change the status), e.g.
 * quarantined orphans: a JSON array of strings, NULL when out of memory.
 * Also in keel cluster status (srv_js_status.c). */
struct json_t *srv_mon_warnings_json(const struct srv_mon_snap *s);
/* A group's InstallSnapshot counters into o (`snapshot_installs`,
 * `snapshot_sends`, `snapshot_failures`, `install_repeats`, and
 * `snapshot_last_error` once a transfer failed), once it has taken, sent
 * or aborted a transfer: /jsz and the status request. */
void srv_mon_install_add(struct json_t *o, const struct srv_mon_group *g);

/* RFC 3339 UTC time of unix_ms, millisecond precision. */
void srv_mon_rfc3339(uint64_t unix_ms, char *buf, size_t len);
/* Sets o's "config"."domain" to snap's jetstream { domain } when it has
 * one (/varz jetstream and /jsz, as nats-server 2.9.10). */
void srv_mon_domain_add(struct json_t *o, const struct srv_mon_snap *snap);

/* nats-server style duration: "42s", "3m5s", "2h0m1s", "1d2h3m4s". */
void srv_mon_duration(uint64_t ms, char *buf, size_t len);

#endif
