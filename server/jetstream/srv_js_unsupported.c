/* srv_js_unsupported: the stream and consumer config fields and the publish
 * headers nats-server knows (2.9 to 2.12) that keeld does not implement. A
 * request that sets one to anything but its default ("unset" as
 * nats-server reads it) is refused with an error naming the field, so an
 * OK always means the setting works (docs/jetstream-config.md lists every
 * field). Only requests are checked: configs already in the meta log are
 * never re-checked, so a log written before a field was refused replays
 * as it did. Pure: no I/O, no clock. */
#include "srv_js_unsupported.h"

#include <stdio.h>
#include <string.h>

#include "keel/error.h"
#include "srv_msg_ttl.h"
#include "srv_tags.h"
#include "srv_stream_sm.h"

#define DOC "docs/jetstream-config.md"

/* What counts as set: anything but the default nats-server treats as
 * unset. */
enum unset_is {
    UNSET_NULL,  /* absent or null (an object or array when set) */
    UNSET_FALSE, /* absent, null or false */
    UNSET_ZERO,  /* absent, null or 0 */
    UNSET_EMPTY, /* absent, null, "" or [] */
};

struct field {
    const char *key;
    enum unset_is unset;
    const char *why; /* what to do instead, for the error */
};

static const struct field stream_fields[] = {
    {"template_owner", UNSET_EMPTY, "stream templates are not implemented"},
    {"allow_msg_counter", UNSET_FALSE, "counters are not implemented"},
    {"allow_atomic", UNSET_FALSE, "atomic batches are not implemented"},
    {"allow_msg_schedules", UNSET_FALSE, "schedules are not implemented"},
};

static const struct field consumer_fields[] = {
    {"sample_freq", UNSET_EMPTY, "ack sampling is not implemented"},
    {"direct", UNSET_FALSE, "direct consumers are internal to mirrors"},
    {"priority_groups", UNSET_EMPTY, "priority groups are not implemented"},
    {"priority_timeout", UNSET_ZERO, "priority groups are not implemented"},
};

static bool is_set(const json_t *v, enum unset_is unset)
{
    if (v == NULL || json_is_null(v)) {
        return false;
    }
    switch (unset) {
    case UNSET_FALSE:
        return !json_is_false(v);
    case UNSET_ZERO:
        return !(json_is_integer(v) && json_integer_value(v) == 0);
    case UNSET_EMPTY:
        return !((json_is_string(v) && json_string_length(v) == 0) ||
                 (json_is_array(v) && json_array_size(v) == 0));
    case UNSET_NULL:
    default:
        return true;
    }
}

static int refuse(const json_t *j, const struct field *f, size_t n,
                  const char *what, enum srv_js_err bad, enum srv_js_err *jerr,
                  char *errmsg)
{
    for (size_t i = 0; i < n; i++) {
        if (is_set(json_object_get(j, f[i].key), f[i].unset)) {
            *jerr = bad;
            return keel_err(KEEL_EINVAL, errmsg,
                            "%s %s is not supported by keeld (%s): leave it "
                            "unset (" DOC ")",
                            what, f[i].key, f[i].why);
        }
    }
    return 0;
}

/* consumer_limits { inactive_threshold, max_ack_pending }: defaults for the
 * stream's consumers, which keeld does not apply. */
static bool consumer_limits_set(const json_t *j)
{
    const json_t *cl = json_object_get(j, "consumer_limits");
    return is_set(json_object_get(cl, "inactive_threshold"), UNSET_ZERO) ||
           is_set(json_object_get(cl, "max_ack_pending"), UNSET_ZERO);
}

int srv_stream_request_check(const json_t *req, enum srv_js_err *jerr,
                             char *errmsg)
{
    ASSERT(jerr != NULL);
    *jerr = SRV_JS_OK;
    if (!json_is_object(req)) {
        return 0; /* the config parse answers it */
    }
    const json_t *src = json_object_get(req, "sources");
    if (json_is_object(json_object_get(req, "mirror")) && json_is_array(src) &&
        json_array_size(src) > 0) {
        return 0; /* nats-server's 10031 comes from the parse */
    }
    int rv = refuse(req, stream_fields,
                    sizeof stream_fields / sizeof stream_fields[0], "stream",
                    SRV_JS_ESTREAM_CONFIG, jerr, errmsg);
    if (rv != 0) {
        return rv;
    }
    if (consumer_limits_set(req)) {
        *jerr = SRV_JS_ESTREAM_CONFIG;
        return keel_err(KEEL_EINVAL, errmsg,
                        "stream consumer_limits is not supported by keeld: "
                        "set inactive_threshold and max_ack_pending on each "
                        "consumer (" DOC ")");
    }
    /* Here, not in the config parse: a log written before this check
     * replays as it was. */
    const json_t *age = json_object_get(req, "max_age");
    if (json_is_integer(age) && json_integer_value(age) > 0 &&
        json_integer_value(age) < SRV_JS_MAX_AGE_NS_MIN) {
        *jerr = SRV_JS_ESTREAM_CONFIG;
        return keel_err(KEEL_EINVAL, errmsg, "max age needs to be >= 100ms");
    }
    struct srv_tags tags;
    char terr[KEEL_ERRMSG_MAX];
    if (srv_tags_parse(
            json_object_get(json_object_get(req, "placement"), "tags"), &tags,
            terr) != 0) {
        *jerr = SRV_JS_ESTREAM_CONFIG;
        return keel_err(KEEL_EINVAL, errmsg, "stream placement %s", terr);
    }
    return 0;
}

int srv_consumer_request_check(const json_t *cfg, enum srv_js_err *jerr,
                               char *errmsg)
{
    ASSERT(jerr != NULL);
    *jerr = SRV_JS_OK;
    if (!json_is_object(cfg)) {
        return 0;
    }
    const char *pp = json_string_value(json_object_get(cfg, "priority_policy"));
    if (pp != NULL && pp[0] != '\0' && strcmp(pp, "none") != 0) {
        *jerr = SRV_JS_ECONSUMER_CONFIG;
        return keel_err(KEEL_EINVAL, errmsg,
                        "consumer priority_policy %s is not supported by "
                        "keeld: leave it unset (" DOC ")",
                        pp);
    }
    return refuse(cfg, consumer_fields,
                  sizeof consumer_fields / sizeof consumer_fields[0],
                  "consumer", SRV_JS_ECONSUMER_CONFIG, jerr, errmsg);
}

/* Publish headers keeld refuses, each with nats-server's answer for a
 * stream that does not enable the feature. */
static const struct {
    const char *name;
    enum srv_js_err err;
} refused_headers[] = {
    {"Nats-Incr", SRV_JS_EINCR_DISABLED},
    {"Nats-Schedule", SRV_JS_EHEADER_UNSUPPORTED},
    {"Nats-Batch-Id", SRV_JS_EHEADER_UNSUPPORTED},
    {"Nats-Expected-Last-Subject-Sequence-Subject", SRV_JS_EHEADER_UNSUPPORTED},
};

int srv_js_rollup_scope(const char *hdr, size_t len)
{
    const char *v = NULL;
    size_t vl = 0;

    if (hdr == NULL || len == 0 ||
        srv_nats_hdr_get(hdr, len, "Nats-Rollup", &v, &vl) != 0 || vl != 3) {
        return 0;
    }
    if (memcmp(v, "sub", 3) == 0) {
        return SRV_JS_ROLLUP_SUB;
    }
    return memcmp(v, "all", 3) == 0 ? SRV_JS_ROLLUP_ALL : 0;
}

int srv_js_publish_headers_check(const struct srv_stream_config *cfg,
                                 const char *hdr, size_t len,
                                 enum srv_js_err *jerr, char *detail)
{
    const char *v = NULL;
    size_t vl = 0;

    ASSERT(cfg != NULL);
    *jerr = SRV_JS_OK;
    detail[0] = '\0';
    if (hdr == NULL || len == 0) {
        return 0;
    }
    for (size_t i = 0; i < sizeof refused_headers / sizeof refused_headers[0];
         i++) {
        if (srv_nats_hdr_get(hdr, len, refused_headers[i].name, &v, &vl) == 0) {
            *jerr = refused_headers[i].err;
            if (*jerr == SRV_JS_EHEADER_UNSUPPORTED) {
                snprintf(detail, SRV_JS_ERR_DESC_BYTES_MAX,
                         "header %s is not supported by keeld",
                         refused_headers[i].name);
            }
            return KEEL_EINVAL;
        }
    }
    /* Nats-TTL as nats-server 2.11's clustered check: without
     * allow_msg_ttl any TTL (also an invalid one) is 10166; with it an
     * invalid one is 10165. The state machine checks again at apply. */
    int64_t ttl = 0;
    int tv = srv_msg_ttl_of(hdr, len, &ttl);
    if ((tv != 0 || ttl != 0) && !cfg->allow_msg_ttl) {
        *jerr = SRV_JS_ETTL_DISABLED;
        return KEEL_EINVAL;
    }
    if (tv != 0) {
        *jerr = SRV_JS_ETTL_INVALID;
        return KEEL_EINVAL;
    }
    if (srv_nats_hdr_get(hdr, len, "Nats-Rollup", &v, &vl) != 0) {
        return 0;
    }
    if (!cfg->allow_rollup_hdrs || cfg->deny_purge) {
        *jerr = SRV_JS_EROLLUP;
        snprintf(detail, SRV_JS_ERR_DESC_BYTES_MAX, "rollup not permitted");
        return KEEL_EINVAL;
    }
    bool sub = vl == 3 && memcmp(v, "sub", 3) == 0;
    bool all = vl == 3 && memcmp(v, "all", 3) == 0;
    if (!sub && !all) {
        *jerr = SRV_JS_EROLLUP;
        snprintf(detail, SRV_JS_ERR_DESC_BYTES_MAX,
                 "rollup value invalid: %.*s", (int)(vl > 64 ? 64 : vl), v);
        return KEEL_EINVAL;
    }
    return 0;
}
