/* cli_cluster: what keel cluster status and orphans share — gathering
 * the answers every node sends to one $KEEL.API request (srv_js_status.c;
 * cli_cluster_gather.c) — and their entry points for cli_cluster.c.
 */
#ifndef KEEL_CLI_CLUSTER_H
#define KEEL_CLI_CLUSTER_H

#include <stdio.h>

#include <jansson.h>
#include <nats/nats.h>

#include "cli.h"

/* Publish one request to subject (every node answers it, the node this
 * client reached first with "asked": the names it forwarded to) and
 * gather the answers until each asked node answered or wait_ms passed.
 * *replies: a JSON array of the answers (objects with "server"), in
 * arrival order; *missing: the asked names that did not answer. Returns
 * 0, or KEEL_ETIMEOUT when no node answered (errmsg says what to check),
 * or a connection error. */
int cli_cluster_gather(natsConnection *nc, const char *subject, int64_t wait_ms,
                       json_t **replies, json_t **missing, char *errmsg);

/* The --json output of a gather: {"nodes": replies, "missing": missing}. */
void cli_cluster_print_json(const json_t *replies, const json_t *missing);

/* One request (cli_js_request), retried while the server says retry
 * (503, 10008: busy, leadership moving) until deadline (monotonic ms). */
int cli_cluster_request_retry(natsConnection *nc, int64_t timeout_ms,
                              const char *what, const char *subject,
                              const char *body, int64_t deadline, json_t **out,
                              char *errmsg);

/* cli_cluster_move.c. The streams whose STREAM.INFO names peer as
 * leader or replica: *names, a JSON array of stream names (json_decref).
 * Busy answers are retried until deadline (monotonic ms). 0 or the
 * first error (a stream deleted meanwhile is left out). */
int cli_cluster_streams_on(natsConnection *nc, int64_t timeout_ms,
                           const char *peer, int64_t deadline, json_t **names,
                           char *errmsg);
/* After peer left the meta group (reply: the removal's answer, whose
 * "streams" say which replicas cannot move now: warned, not waited for):
 * wait up to wait_ms until each stream in names has num_replicas
 * replicas, none on peer, and is not reconfiguring. A line per stream
 * when it has moved, and on a terminal each change of where its replicas
 * are (nothing when quiet). 0, or KEEL_ETIMEOUT naming the first stream
 * that did not move. */
int cli_cluster_wait_moved(natsConnection *nc, int64_t timeout_ms,
                           const char *peer, const json_t *names,
                           const json_t *reply, int64_t wait_ms, bool quiet,
                           char *errmsg);

/* Does the JSON array of strings a hold s? */
bool cli_cluster_has(const json_t *a, const char *s);

/* Sub-commands of keel cluster (cli_cluster_status.c, cli_orphans.c). */
int cli_cluster_status(const struct cli_cmd *cmd, int argc, char **argv,
                       char *errmsg);
int cli_cluster_orphans(const struct cli_cmd *cmd, int argc, char **argv,
                        char *errmsg);

/* The pure part of keel cluster status (unit-tested): print the tables
 * of the gathered replies to out and return 0 when every node answered
 * and is healthy, else KEEL_EIO with errmsg naming the first
 * problems. */
int cli_cluster_status_print(const json_t *replies, const json_t *missing,
                             FILE *out, bool color, char *errmsg);

#endif
