/* srv_consumer_pause: pause_until read, encoded and answered as nats-server
 * 2.11 does (see srv_consumer_pause.h). */
#include "srv_consumer_pause.h"

#include <string.h>

#include "keel/error.h"
#include "srv_js_config.h"
#include "srv_js_json.h"

/* A time value: "" and Go's zero time are unset (0), as are times before
 * 1970 (never in the future). */
static int read_time(const json_t *t, int64_t *ns)
{
    *ns = 0;
    if (t == NULL || json_is_null(t)) {
        return 0;
    }
    const char *s = json_string_value(t);
    if (s == NULL) {
        return KEEL_EINVAL;
    }
    if (s[0] == '\0' || strcmp(s, "0001-01-01T00:00:00Z") == 0) {
        return 0;
    }
    int64_t v = 0;
    if (srv_js_time_parse(s, &v) != 0) {
        return KEEL_EINVAL;
    }
    *ns = v > 0 ? v : 0;
    return 0;
}

int srv_consumer_parse_pause(const struct srv_js_json_rd *rd,
                             struct srv_consumer_config *c)
{
    if (read_time(json_object_get(rd->j, "pause_until"), &c->pause_until_ns) !=
        0) {
        return srv_js_json_fail(rd, "pause_until must be an RFC3339 time");
    }
    return 0;
}

int srv_consumer_encode_pause(const struct srv_consumer_config *c, json_t *o)
{
    char t[SRV_JS_TIME_BYTES];
    if (c->pause_until_ns <= 0) {
        return 0;
    }
    srv_js_time_format(c->pause_until_ns, t);
    return json_object_set_new(o, "pause_until", json_string(t));
}

bool srv_consumer_paused(const struct srv_consumer_config *c, int64_t now_ns,
                         int64_t *remaining_ns)
{
    bool paused = c->pause_until_ns > now_ns;
    if (remaining_ns != NULL) {
        *remaining_ns = paused ? c->pause_until_ns - now_ns : 0;
    }
    return paused;
}

int srv_consumer_pause_request(const char *body, size_t len, int64_t *until_ns,
                               enum srv_js_err *jerr, char *errmsg)
{
    json_error_t je;
    *until_ns = 0;
    *jerr = SRV_JS_OK;
    if (body == NULL || len == 0) {
        return 0; /* resume */
    }
    json_t *j = json_loadb(body, len, 0, &je);
    if (j == NULL) {
        return SRV_JS_CFG_ERR(jerr, SRV_JS_EINVALID_JSON, errmsg, "%s",
                              je.text);
    }
    int rv = json_is_object(j)
                 ? read_time(json_object_get(j, "pause_until"), until_ns)
                 : KEEL_EINVAL;
    json_decref(j);
    if (rv != 0) {
        return SRV_JS_CFG_ERR(jerr, SRV_JS_EBAD_REQUEST, errmsg,
                              "pause_until must be an RFC3339 time");
    }
    return 0;
}

json_t *srv_consumer_pause_response(int64_t until_ns, int64_t now_ns)
{
    char t[SRV_JS_TIME_BYTES];
    srv_js_time_format(until_ns, t);
    bool paused = until_ns > now_ns;
    json_t *o = json_pack("{s:s, s:b, s:s}", "type",
                          "io.nats.jetstream.api.v1.consumer_pause_response",
                          "paused", paused, "pause_until", t);
    if (o != NULL && paused &&
        json_object_set_new(o, "pause_remaining",
                            json_integer((json_int_t)(until_ns - now_ns))) !=
            0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int srv_consumer_pause_info(const struct srv_consumer_config *c, int64_t now_ns,
                            json_t *o)
{
    int64_t left = 0;
    if (!srv_consumer_paused(c, now_ns, &left)) {
        return 0;
    }
    return json_object_set_new(o, "paused", json_true()) |
           json_object_set_new(o, "pause_remaining",
                               json_integer((json_int_t)left));
}

bool srv_consumer_replay_wait(int64_t lts, int64_t ts, int64_t now, int64_t *at)
{
    int64_t gap = ts - lts;
    if (lts == 0 || gap <= 1000000) {
        *at = 0;
        return false;
    }
    if (*at == 0) {
        *at = now + gap;
    }
    if (now < *at) {
        return true;
    }
    *at = 0;
    return false;
}

bool srv_consumer_rate_wait(struct srv_consumer_rate *b, int64_t bps,
                            int64_t burst, size_t size, int64_t now_ns)
{
    ASSERT(burst > 0);
    if (bps <= 0) {
        return false;
    }
    double per_ns = (double)(bps / 8) / 1e9; /* bytes a ns */
    if (!b->started || now_ns < b->at_ns) {
        b->tokens = (double)burst;
        b->started = true;
    } else {
        b->tokens += (double)(now_ns - b->at_ns) * per_ns;
    }
    b->at_ns = now_ns;
    if (b->tokens > (double)burst) {
        b->tokens = (double)burst;
    }
    double need = (double)size < (double)burst ? (double)size : (double)burst;
    if (b->tokens < need) {
        return true;
    }
    b->tokens -= (double)size;
    ASSERT(b->tokens >= -(double)size);
    return false;
}
