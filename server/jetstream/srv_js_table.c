/* srv_js_table: the JetStream API as one declared table (see the header).
 */
#include "srv_js_table.h"

#include <string.h>

#include "keel/limits.h"
#include "srv_admin.h"
#include "srv_js.h"
#include "srv_js_int.h"
#include "srv_js_status.h"
#include "srv_parser.h"

/* ---- handlers: each the entry point of one module ---- */

static bool h_status(struct srv_js *js, const struct srv_js_req *q)
{
    return srv_js_status_intercept(js, q->cmd, q->reply);
}

static bool h_ldm(struct srv_js *js, const struct srv_js_req *q)
{
    return srv_js_ldm_request(js, q->cmd, q->reply);
}

static bool h_api(struct srv_js *js, const struct srv_js_req *q)
{
    js->api_total++;
    srv_js_api(js, q->subject, q->subject_len, q->reply, q->body, q->body_len);
    return true;
}

static bool h_admin(struct srv_js *js, const struct srv_js_req *q)
{
    if (!srv_admin_request(js, q->subject, q->subject_len, q->reply, q->body,
                           q->body_len)) {
        return false;
    }
    js->api_total++;
    return true;
}

/* A name too long for srv_admin gets $JS.API's "bad request" answer. */
static bool h_admin_or_api(struct srv_js *js, const struct srv_js_req *q)
{
    return h_admin(js, q) || h_api(js, q);
}

/* Acks and flow-control replies: the consumers' hook, when registered. */
static bool h_consumer(struct srv_js *js, const struct srv_js_req *q)
{
    const struct srv_consumer_ops *ops = js->cops;
    const struct srv_cmd *cmd = q->cmd;
    return ops != NULL && ops->intercept != NULL &&
           ops->intercept(js, q->subject, q->subject_len, q->reply,
                          cmd->reply.len, cmd->hdr_bytes ? cmd->payload : NULL,
                          cmd->hdr_bytes, q->body, q->body_len);
}

/* ---- the table ---- */

#define E(subj, match, flags, route, fn)                                       \
    {                                                                          \
        subj, sizeof subj - 1, SRV_JS_MATCH_##match, flags,                    \
            SRV_JS_FWD_##route, fn                                             \
    }
#define LOCAL SRV_JS_API_LOCAL
#define READY SRV_JS_API_READY

/* Who answers each subject (docs/design.md §6 A3). Order: the first match wins,
 * so a catch-all prefix comes after every entry it covers; the busiest subjects
 * (acks) come first. */
const struct srv_js_api_entry srv_js_api_table[] = {
    /* Consumers: acks and flow control, to the stream's leader. */
    E("$JS.ACK.", ATLEAST, 0, STREAM, h_consumer),
    E("$JS.FC.", LONGER, 0, STREAM, h_consumer),
    /* Every node answers for itself (srv_js_status.c, srv_js_ldm.c). */
    E("$KEEL.API.CLUSTER.STATUS", EXACT, LOCAL, HERE, h_status),
    E("$KEEL.API.ORPHANS.LIST", EXACT, LOCAL, HERE, h_status),
    E("$KEEL.API.ORPHANS.RM.", LONGER, LOCAL, HERE, h_status),
    E("$KEEL.API.ORPHANS.RESTORE.", LONGER, LOCAL, HERE, h_status),
    E("$KEEL.API.SERVER.LAMEDUCK", EXACT, LOCAL, HERE, h_ldm),
    /* Cluster administration (srv_admin.c). */
    E("$KEEL.API.CLUSTER.PEER.ADD", EXACT, 0, META, h_admin),
    E("$KEEL.API.CLUSTER.PEER.INFO", EXACT, 0, META, h_admin),
    E("$KEEL.API.CLUSTER.RECOVER.SURVEY", EXACT, 0, HERE, h_admin),
    E("$KEEL.API.CLUSTER.RECOVER", EXACT, 0, HERE, h_admin),
    E("$JS.API.SERVER.REMOVE", EXACT, READY, META, h_admin),
    E("$JS.API.META.LEADER.STEPDOWN", EXACT, READY, META, h_admin),
    E("$JS.API.STREAM.PEER.REMOVE.", LONGER, READY, META, h_admin_or_api),
    /* The meta leader's (srv_js_api.c). */
    E("$JS.API.INFO", EXACT, READY, META, h_api),
    E("$JS.API.STREAM.CREATE.", LONGER, READY, META, h_api),
    E("$JS.API.STREAM.UPDATE.", LONGER, READY, META, h_api),
    E("$JS.API.STREAM.DELETE.", LONGER, READY, META, h_api),
    E("$JS.API.STREAM.NAMES", EXACT, READY, META, h_api),
    E("$JS.API.STREAM.LIST", EXACT, READY, META, h_api),
    /* The stream leader's (srv_js_api.c; consumers through their hook). */
    E("$JS.API.STREAM.INFO.", LONGER, READY, STREAM, h_api),
    E("$JS.API.STREAM.PURGE.", LONGER, READY, STREAM, h_api),
    E("$JS.API.STREAM.MSG.GET.", LONGER, READY, STREAM, h_api),
    E("$JS.API.STREAM.MSG.DELETE.", LONGER, READY, STREAM, h_api),
    E("$JS.API.STREAM.LEADER.STEPDOWN.", LONGER, READY, STREAM, h_api),
    E("$JS.API.DIRECT.GET.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.CREATE.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.DURABLE.CREATE.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.INFO.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.DELETE.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.PAUSE.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.NAMES.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.LIST.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.MSG.NEXT.", LONGER, READY, STREAM, h_api),
    E("$JS.API.CONSUMER.LEADER.STEPDOWN.", LONGER, READY, STREAM, h_api),
    /* Any other $JS.API request: answered here, with an error. */
    E("$JS.API.", LONGER, READY, HERE, h_api),
};

const size_t srv_js_api_table_len =
    sizeof srv_js_api_table / sizeof srv_js_api_table[0];

const struct srv_js_api_entry *srv_js_api_lookup(const char *subject,
                                                 size_t len)
{
    if (len == 0 || subject[0] != '$') {
        return NULL;
    }
    for (size_t i = 0; i < srv_js_api_table_len; i++) {
        const struct srv_js_api_entry *e = &srv_js_api_table[i];
        bool fits = e->match == SRV_JS_MATCH_EXACT    ? len == e->len
                    : e->match == SRV_JS_MATCH_LONGER ? len > e->len
                                                      : len >= e->len;
        if (fits && memcmp(subject, e->subject, e->len) == 0) {
            return e;
        }
    }
    return NULL;
}

enum srv_js_fwd_target srv_js_api_target(const struct srv_js_api_entry *e,
                                         const char *subject, size_t len,
                                         char *stream)
{
    if (e == NULL || e->route == SRV_JS_FWD_HERE) {
        return SRV_JS_FWD_HERE;
    }
    if (e->match == SRV_JS_MATCH_EXACT) {
        return (enum srv_js_fwd_target)e->route;
    }
    const char *name = subject + e->len;
    const char *dot = memchr(name, '.', len - e->len);
    size_t n = dot != NULL ? (size_t)(dot - name) : len - e->len;
    if (n == 0 || n > SRV_JS_NAME_BYTES_MAX) {
        return SRV_JS_FWD_HERE;
    }
    memcpy(stream, name, n);
    stream[n] = '\0';
    return (enum srv_js_fwd_target)e->route;
}
