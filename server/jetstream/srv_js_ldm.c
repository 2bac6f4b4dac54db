/* srv_js_ldm: lame duck mode's JetStream part. A node about to stop hands
 * every Raft leadership it holds (the meta group's and each stream's) to
 * a caught-up voter by a leadership transfer (Raft thesis §3.10), so no
 * group waits an election timeout for a leader once the node is gone and
 * no publish fails meanwhile.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js.h"
#include "srv_js_int.h"
#include "srv_log.h"
#include "srv_parser.h"
#include "srv_server.h"

/* One group this node leads: start its transfer when asked (start).
 * Returns 1 while it leads and can move, 0 otherwise (a follower, or a
 * group with no other voter: an R1 stream stays where it is). */
static uint32_t hand_over(struct replica *r, const char *what, bool start)
{
    char err[KEEL_ERRMSG_MAX];
    struct replica_info ri;

    replica_info(r, &ri);
    if (ri.role != RAFT_LEADER) {
        return 0;
    }
    if (!start) {
        return 1;
    }
    int rv = replica_transfer_leader(r, 0, err);
    if (rv == KEEL_EINVAL) {
        return 0; /* no other voter */
    }
    if (rv != 0) {
        SRV_WARN("js", "lame duck: %s: %s", what, err);
        return 1;
    }
    SRV_INFO("js", "lame duck: handing %s over", what);
    return 1;
}

uint32_t srv_js_hand_over(struct srv_js *js, bool start)
{
    char what[SRV_JS_NAME_BYTES_MAX + 16];
    uint32_t led = 0;

    if (js->stopping || js->jc == NULL) {
        return 0;
    }
    if (js->meta != NULL) {
        led += hand_over(js->meta, "the meta group", start);
    }
    ASSERT(js->nstreams <= SRV_JS_STREAMS_MAX);
    for (uint32_t i = 0; i < js->nstreams; i++) {
        struct srv_stream *st = js->streams[i];
        if (st->failed || st->r == NULL) {
            continue;
        }
        snprintf(what, sizeof what, "stream %s", st->cfg.name);
        led += hand_over(st->r, what, start);
    }
    return led;
}

#define LDM_SUBJ "$KEEL.API.SERVER.LAMEDUCK"

bool srv_js_ldm_request(struct srv_js *js, const struct srv_cmd *cmd,
                        const char *reply)
{
    if (cmd->subject.len != sizeof LDM_SUBJ - 1 ||
        memcmp(cmd->subject.ptr, LDM_SUBJ, sizeof LDM_SUBJ - 1) != 0) {
        return false;
    }
    struct srv_server *srv = js->srv;
    js->api_total++;
    json_t *o = json_pack("{s:s, s:b, s:s, s:b, s:i}", "type",
                          "io.keel.api.v1.server_lameduck_response", "success",
                          !srv->stopping, "server", srv_js_self_name(js),
                          "already", srv->lame_duck, "leaderships",
                          (int)srv_js_hand_over(js, false));
    srv_js_reply_json(js, reply, o);
    srv_server_lame_duck(srv);
    return true;
}
