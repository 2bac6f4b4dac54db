/* srv_js_direct_here: the replicas of this node that may answer a
 * $JS.API.DIRECT.GET before it goes to the stream's leader: a current
 * follower of an allow_direct stream, and a current replica of a mirror of
 * it with mirror_direct
 * (docs/decisions/0036-followers-answer-direct-gets-while-current.md).
 *
 * The node the client's request reaches decides, once: it answers from
 * one local replica, or forwards the request to the leader as before
 * (srv_js_forward.c). No queue group spans nodes, so exactly one reply
 * goes back. A local replica answers only a request of one message that
 * it holds; anything else (a miss, a batch, multi_last, a bad request) is
 * the leader's, so a follower never says "not found" for a message it has
 * not applied yet. */
#include <string.h>

#include "keel/limits.h"
#include "replica.h"
#include "srv_js_int.h"
#include "srv_parser.h"

#define PREFIX "$JS.API.DIRECT.GET."

/* May st's applied state answer a read now? A leader when its state holds
 * every acknowledged entry; a follower by the currency rule. */
static bool current(const struct srv_stream *st)
{
    struct replica_info ri;
    struct replica_follow f;
    if (st->r == NULL || srv_stream_amnesiac(st)) {
        return false;
    }
    if (srv_stream_is_leader(st)) {
        replica_info(st->r, &ri);
        return ri.complete;
    }
    replica_follow_info(st->r, &f);
    return replica_follow_current(&f);
}

struct srv_stream *srv_js_direct_mirror_of(struct srv_js *js,
                                           const char *origin)
{
    /* Bounded by the streams of this node; skipped while none mirrors. */
    for (uint32_t i = 0; js->nmirrors > 0 && i < js->nstreams; i++) {
        struct srv_stream *m = js->streams[i];
        if (m->cfg.has_mirror && m->cfg.mirror_direct &&
            strcmp(m->cfg.mirror.name, origin) == 0 && current(m)) {
            return m;
        }
    }
    return NULL;
}

bool srv_js_direct_here(struct srv_js *js, const struct srv_cmd *cmd,
                        const char *reply)
{
    char subj[SRV_CONTROL_LINE_BYTES_MAX + 1];
    size_t n = cmd->subject.len, pre = sizeof PREFIX - 1;
    struct srv_stream *st = NULL;
    if (reply[0] == '\0' || n <= pre || n >= sizeof subj ||
        memcmp(cmd->subject.ptr, PREFIX, pre) != 0) {
        return false;
    }
    memcpy(subj, cmd->subject.ptr, n);
    subj[n] = '\0';
    char *name = subj + pre, *key = strchr(name, '.');
    if (key != NULL) {
        *key++ = '\0';
        if (*key == '\0') {
            return false; /* the leader answers the 408 */
        }
    }
    const char *body = cmd->payload + cmd->hdr_bytes;
    size_t len = cmd->total_bytes - cmd->hdr_bytes;
    if (srv_js_find_stream(js, name, &st) == 0 && st->cfg.allow_direct) {
        if (srv_stream_is_leader(st)) {
            return false; /* the leader's own path, freshest of all */
        }
        if (current(st) && srv_js_direct_one(js, st, key, reply, body, len)) {
            js->direct.follower++;
            return true;
        }
    }
    struct srv_stream *m = srv_js_direct_mirror_of(js, name);
    if (m != NULL && srv_js_direct_one(js, m, key, reply, body, len)) {
        js->direct.mirror++;
        return true;
    }
    return false;
}
