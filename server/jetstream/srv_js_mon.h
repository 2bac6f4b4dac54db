/* srv_js_mon: what JetStream adds to each monitoring snapshot. */
#ifndef SRV_JS_MON_H
#define SRV_JS_MON_H

#include "srv_metrics.h"

struct srv_js;

/* Loop thread: fill snap's JetStream fields (js_enabled, the meta group,
 * every stream, the store's counters). Returns 0 or KEEL_ENOMEM. */
int srv_js_mon_gather(struct srv_js *js, struct srv_mon_snap *snap);

#endif
