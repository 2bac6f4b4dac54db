/* srv_admin: cluster reconfiguration requests (issue 9), answered by the
 * meta leader (srv_js_forward routes them there):
 *
 *   $KEEL.API.CLUSTER.PEER.ADD {"peer": NAME}
 *       NAME must be linked, waiting to be added (a fresh node that found
 *       the cluster) and not in the meta configuration: it is added as a
 *       learner; the reply comes when that entry commits. The meta leader
 *       promotes every learner of the meta group once it has caught up
 *       (srv_admin_tick). Asking again for a member answers as PEER.INFO
 *       does (idempotent: a retried request does no harm).
 *   $KEEL.API.CLUSTER.PEER.INFO {"peer": NAME}
 *       a member's role and catch-up ({"role", "match", "commit", "lag"});
 *       10040 when NAME is not in the meta configuration.
 *   $JS.API.SERVER.REMOVE {"peer": NAME, "force": bool}
 *       nats-server's request: the node leaves the meta configuration; the
 *       reply comes when that entry commits. Refused while another change
 *       is in flight, and (unless force) when afterwards fewer than a
 *       majority of the voters would be healthy. Removing the meta leader
 *       starts a leadership transfer first and answers "retry".
 *   $JS.API.META.LEADER.STEPDOWN {"placement": {"preferred": NAME}}
 *       a leadership transfer of the meta group (to NAME when given).
 *   $KEEL.API.CLUSTER.RECOVER.SURVEY {"stream"?: NAME}
 *   $KEEL.API.CLUSTER.RECOVER {"stream"?, "term", "keep", "accept_loss"}
 *       answered by the node that receives them (the CLI asks each node):
 *       one group's state, and the operator override (replica_recover).
 *
 * Permissions are the publish permissions of these subjects (srv_auth).
 * Loop thread only. */
#ifndef KEEL_SRV_ADMIN_H
#define KEEL_SRV_ADMIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct srv_js;
struct raft_config;

/* A request on one of the subjects above, on the node that answers it.
 * Returns false when subject is not one of them. */
bool srv_admin_request(struct srv_js *js, const char *subject, size_t slen,
                       const char *reply, const char *body, size_t len);

/* The meta group applied a configuration entry at index (ctx: the one
 * replica_change got on this leader, 0 otherwise). */
void srv_admin_config_applied(struct srv_js *js, uint64_t index, uint64_t ctx);

/* Every SRV_JS_TICK_MS: answer changes that never committed (a leader
 * change replaced them) and, on the meta leader, promote caught-up
 * learners. */
void srv_admin_tick(struct srv_js *js);

/* Free what srv_admin allocated for js (pending answers are dropped). */
void srv_admin_free(struct srv_js *js);

#endif
