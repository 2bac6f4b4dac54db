/* srv_js_snap: the meta group's snapshots (docs/design.md §5) and the orphan
 * check of the node's group directories. The meta state (every stream's
 * config, id nonce, creation time and placement) is written as the list
 * of create entries that rebuild it; a restore applies them as the log
 * would. Loop thread only. */
#ifndef KEEL_SRV_JS_SNAP_H
#define KEEL_SRV_JS_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "keel/assert.h"

struct srv_js;
struct replica;

/* replica_callbacks.snapshot / .restore of the meta group (arg: js). */
int srv_js_snap_encode(struct replica *r, uint64_t index, uint8_t **out,
                       size_t *len, void *arg);
int srv_js_snap_restore(struct replica *r, uint64_t index, const uint8_t *body,
                        size_t len, void *arg);

/* srv_js.c: apply one meta entry (create, update, delete), as from the
 * log. ctx 0: nobody waits for an answer. */
void srv_js_meta_apply_json(struct srv_js *js, const json_t *e, uint64_t ctx);

/* A meta snapshot (array a of create entries) installed from the leader
 * over this node's older meta state (srv_js.c): streams a lacks, or holds
 * as another group, are closed with their files kept (orphans once the
 * state is complete again: never deleted, docs/design.md §5); streams here take
 * a's placement and config; the rest are created; the order becomes a's.
 * Without this a stream deleted while the node was behind stayed open
 * here for ever, and an update or move compacted away never reached it. */
void srv_js_meta_install(struct srv_js *js, const json_t *a);

/* Once the meta state is complete (a node that is not clustered: applied
 * at open; clustered: srv_js_orphans_tick): move every group directory
 * the meta state does not name (a stream of its, or the meta group) to
 * quarantine/orphans/ (docs/design.md §5: never deleted). Returns the number
 * moved now. */
unsigned srv_js_orphans_check(struct srv_js *js);

/* Clustered: run srv_js_orphans_check once per process, on the first tick
 * at which the meta state here is known complete: the meta group is
 * undamaged, has a leader, and every entry of its log is committed and
 * applied (so no create this node ever applied is missing), and every
 * stream the state names opened. A node far behind reaches that only
 * after the leader brought it up to date. */
void srv_js_orphans_tick(struct srv_js *js);

/* Orphans held in quarantine/orphans/ (monitoring: /healthz warnings,
 * /metrics): count, and up to cap bytes of comma-separated names. */
void srv_js_orphans(struct srv_js *js, size_t *count, char *names, size_t cap);

#endif
