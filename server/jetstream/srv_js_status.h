/* srv_js_status: $KEEL.API.CLUSTER.STATUS and $KEEL.API.ORPHANS.* (the
 * keel cluster status / orphans commands; docs/operations.md). Loop
 * thread only.
 */
#ifndef KEEL_SRV_JS_STATUS_H
#define KEEL_SRV_JS_STATUS_H

#include <stdbool.h>

struct srv_js;
struct srv_cmd;

/* A publish reached srv_js_intercept (reply NUL-terminated, "" if none).
 * Returns true when it was one of these requests (answered here, and for
 * STATUS and ORPHANS.LIST also forwarded once to every linked peer, each
 * answering itself; RM and RESTORE forwarded to the node they name). */
bool srv_js_status_intercept(struct srv_js *js, const struct srv_cmd *cmd,
                             const char *reply);

#endif
