/* srv_js_config_ttl: a stream config's allow_msg_ttl and
 * subject_delete_marker_ttl, read and checked with nats-server 2.11's
 * rules and texts (docs/jetstream-config.md,
 * docs/decisions/0034-per-message-ttl-in-the-state-machine.md). Pure. */
#include <string.h>

#include "srv_js_config.h"
#include "srv_js_json.h"
#include "srv_msg_ttl.h"

int srv_stream_config_parse_ttl(const struct srv_js_json_rd *rd,
                                struct srv_stream_config *c)
{
    int64_t mttl = 0;
    int rv = srv_js_json_bool(rd, "allow_msg_ttl", &c->allow_msg_ttl);
    const json_t *m = json_object_get(rd->j, "subject_delete_marker_ttl");
    if (rv != 0) {
        return rv;
    }
    if (m != NULL && !json_is_null(m)) {
        if (!json_is_integer(m)) {
            return srv_js_json_fail(rd, "subject_delete_marker_ttl must be "
                                        "a duration in nanoseconds");
        }
        mttl = (int64_t)json_integer_value(m);
    }
    if (mttl < 0) {
        return srv_js_json_fail(rd, "subject delete marker TTL must not be "
                                    "negative");
    }
    c->subject_delete_marker_ttl_ns = mttl;
    if (mttl == 0) {
        return 0;
    }
    if (mttl < SRV_MSG_TTL_NS_MIN) {
        return srv_js_json_fail(rd, "subject delete marker TTL must be at "
                                    "least 1 second");
    }
    /* nats-server 2.11 forbids markers on a mirror: they would take seqs
     * the origin does not have. */
    if (c->has_mirror) {
        return srv_js_json_fail(rd, "subject delete markers forbidden on "
                                    "mirrors");
    }
    /* A marker is a TTL'd rollup: without pedantic nats-server turns both
     * on (and deny_purge off); with it, it refuses. */
    bool pedantic = json_is_true(json_object_get(rd->j, "pedantic"));
    if (!c->allow_msg_ttl) {
        if (pedantic) {
            return srv_js_json_fail(rd, "subject delete marker cannot be set "
                                        "if message TTLs are disabled");
        }
        c->allow_msg_ttl = true;
    }
    if (!c->allow_rollup_hdrs) {
        if (pedantic) {
            return srv_js_json_fail(rd, "subject delete marker cannot be set "
                                        "if roll-ups are disabled");
        }
        c->allow_rollup_hdrs = true;
        c->deny_purge = false;
    }
    return 0;
}

int srv_stream_config_encode_ttl(const struct srv_stream_config *c, json_t *o)
{
    int bad = 0;
    /* Only when set (2.11 always sends allow_msg_ttl; 2.9 clients and the
     * compat suite see the configs they did before). */
    if (c->allow_msg_ttl) {
        bad |= json_object_set_new(o, "allow_msg_ttl", json_true());
    }
    if (c->subject_delete_marker_ttl_ns > 0) {
        bad |= json_object_set_new(
            o, "subject_delete_marker_ttl",
            json_integer((json_int_t)c->subject_delete_marker_ttl_ns));
    }
    return bad;
}
