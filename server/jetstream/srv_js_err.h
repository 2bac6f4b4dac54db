/* srv_js_err: the JetStream API error table (docs/protocol.md §2.2) and the
 * standard JSON error object every $JS.API reply carries on failure. Pure:
 * no I/O, no clock. */
#ifndef KEEL_SRV_JS_ERR_H
#define KEEL_SRV_JS_ERR_H

#include <jansson.h>

#include "keel/assert.h"

/* X(enum name, HTTP-like code, err_code, description). A description ending
 * in ": " or empty is a template: callers append the detail (see
 * srv_js_err_json). Any other row given a detail says "description
 * (detail)", or only the detail when it starts with the description. */
#define SRV_JS_ERRORS(X)                                                       \
    X(SRV_JS_ESTREAM_NOT_FOUND, 404, 10059, "stream not found")                \
    X(SRV_JS_ECONSUMER_NOT_FOUND, 404, 10014, "consumer not found")            \
    X(SRV_JS_ESTREAM_NAME_IN_USE, 400, 10058,                                  \
      "stream name already in use with a different configuration")             \
    X(SRV_JS_ENO_MESSAGE, 404, 10037, "no message found")                      \
    X(SRV_JS_ESEQUENCE_NOT_FOUND, 400, 10043, "") /* "sequence N not found" */ \
    X(SRV_JS_ENOT_ENABLED, 503, 10076, "JetStream not enabled")                \
    X(SRV_JS_ENOT_ENABLED_ACCOUNT, 503, 10039,                                 \
      "JetStream not enabled for account")                                     \
    X(SRV_JS_EBAD_REQUEST, 400, 10003, "bad request")                          \
    X(SRV_JS_EINVALID_JSON, 400, 10025, "invalid JSON: ")                      \
    X(SRV_JS_ESTREAM_NAME_MISMATCH, 400, 10056,                                \
      "stream name in subject does not match request")                         \
    X(SRV_JS_ESTREAM_CONFIG, 500, 10052, "")                                   \
    X(SRV_JS_ESUBJECTS_OVERLAP, 400, 10065,                                    \
      "subjects overlap with an existing stream")                              \
    X(SRV_JS_EMIRROR_SUBJECTS, 400, 10034,                                     \
      "stream mirrors can not contain subjects")                               \
    X(SRV_JS_EMIRROR_SOURCES, 400, 10031,                                      \
      "stream mirrors can not also contain other sources")                     \
    X(SRV_JS_EMIRROR_UPDATE, 400, 10055,                                       \
      "stream mirror configuration can not be updated")                        \
    X(SRV_JS_ESOURCE_MSG_SIZE, 400, 10046,                                     \
      "stream source must have max message size >= target")                    \
    X(SRV_JS_EEXTERNAL_API_OVERLAP, 400, 10021, "")                            \
    X(SRV_JS_EEXTERNAL_DELIVER, 400, 10024, "")                                \
    X(SRV_JS_ECONSUMER_NAME_IN_USE, 400, 10013,                                \
      "consumer name already in use")                                          \
    X(SRV_JS_ECONSUMER_ACTIVE, 400, 10105,                                     \
      "consumer already exists and is still active")                           \
    X(SRV_JS_ECONSUMER_EXISTS, 400, 10148, "consumer already exists")          \
    X(SRV_JS_ECONSUMER_DOES_NOT_EXIST, 400, 10149, "consumer does not exist")  \
    X(SRV_JS_EDURABLE_NAME_MISMATCH, 400, 10017,                               \
      "consumer name in subject does not match durable name in request")       \
    X(SRV_JS_EFILTER_MISMATCH, 400, 10131,                                     \
      "Consumer create request did not match filtered subject from create "    \
      "subject")                                                               \
    X(SRV_JS_EFILTER_NOT_SUBSET, 400, 10093,                                   \
      "consumer filter subject is not a valid subset of the interest "         \
      "subjects")                                                              \
    X(SRV_JS_EHEARTBEAT_MIN, 400, 10083,                                       \
      "consumer idle heartbeat needs to be >= 100ms")                          \
    X(SRV_JS_EEXPECTED_STREAM, 400, 10060, "expected stream does not match")   \
    X(SRV_JS_EWRONG_LAST_SEQ, 400, 10071, "wrong last sequence: ")             \
    X(SRV_JS_EWRONG_LAST_MSG_ID, 400, 10070, "wrong last msg ID: ")            \
    X(SRV_JS_EMSG_SIZE, 400, 10054, "message size exceeds maximum allowed")    \
    X(SRV_JS_EMAX_MSGS, 503, 10077, "maximum messages exceeded")               \
    X(SRV_JS_EMAX_BYTES, 503, 10077, "maximum bytes exceeded")                 \
    X(SRV_JS_EMAX_MSGS_PER_SUBJECT, 503, 10077,                                \
      "maximum messages per subject exceeded")                                 \
    X(SRV_JS_EREPLICAS_STANDALONE, 500, 10074,                                 \
      "replicas > 1 not supported in non-clustered mode")                      \
    X(SRV_JS_EUNAVAILABLE, 503, 10008,                                         \
      "JetStream system temporarily unavailable")                              \
    X(SRV_JS_EINSUFFICIENT_RESOURCES, 503, 10023, "insufficient resources")    \
    X(SRV_JS_ENO_PEERS, 400, 10005, "no suitable peers for placement")         \
    X(SRV_JS_ETTL_DISABLED, 400, 10166, "per-message TTL is disabled")         \
    X(SRV_JS_ETTL_INVALID, 400, 10165, "invalid per-message TTL")              \
    X(SRV_JS_EINCR_DISABLED, 400, 10168, "message counters is disabled")       \
    X(SRV_JS_EHEADER_UNSUPPORTED, 400, 10003, "bad request: ")                 \
    X(SRV_JS_EROLLUP, 500, 10111, "")                                          \
    X(SRV_JS_ESEALED, 400, 10109, "invalid operation on sealed stream")        \
    X(SRV_JS_ESTORAGE_RESOURCES, 500, 10047,                                   \
      "insufficient storage resources available")                              \
    X(SRV_JS_EMEMORY_RESOURCES, 500, 10028,                                    \
      "insufficient memory resources available")                               \
    X(SRV_JS_EMAX_CONSUMERS, 400, 10026, "maximum consumers limit reached")    \
    X(SRV_JS_EMAX_STREAMS, 400, 10027, "maximum number of streams reached")    \
    X(SRV_JS_EWORKQUEUE_ACK, 400, 10084,                                       \
      "consumer in pull mode requires ack policy")                             \
    X(SRV_JS_EPULL_RATE_LIMIT, 400, 10086,                                     \
      "consumer in pull mode can not have rate limit set")                     \
    X(SRV_JS_EWQ_MULTIPLE_UNFILTERED, 400, 10099,                              \
      "multiple non-filtered consumers not allowed on workqueue stream")       \
    X(SRV_JS_EWQ_NOT_UNIQUE, 400, 10100,                                       \
      "filtered consumer not unique on workqueue stream")                      \
    X(SRV_JS_EEPHEMERAL_DURABLE, 400, 10020,                                   \
      "consumer expected to be ephemeral but a durable name was set in "       \
      "request")                                                               \
    X(SRV_JS_ECONSUMER_CONFIG, 400, 10012, "")                                 \
    X(SRV_JS_EPEER_NOT_MEMBER, 400, 10040, "peer not a member")                \
    X(SRV_JS_ESERVER_NOT_MEMBER, 400, 10044,                                   \
      "server is not a member of the cluster")                                 \
    X(SRV_JS_ECLUSTER_BUSY, 503, 10008,                                        \
      "JetStream system temporarily unavailable: ")                            \
    X(SRV_JS_ECLUSTER_REFUSED, 400, 10003, "bad request: ")                    \
    X(SRV_JS_ETRANSFORM_SOURCE, 400, 10155, "stream transform source: ")       \
    X(SRV_JS_ETRANSFORM_DEST, 400, 10156, "stream transform: ")                \
    X(SRV_JS_ETRANSFORM_SUBJECT, 400, 10003, "bad request: ")                  \
    X(SRV_JS_ESOURCE_MULTI_FILTERS, 400, 10144,                                \
      "source with multiple subject transforms cannot also have a single "     \
      "subject filter")                                                        \
    X(SRV_JS_ESOURCE_XFORM_SOURCE, 400, 10145, "source transform source: ")    \
    X(SRV_JS_ESOURCE_XFORM_DEST, 400, 10146, "source transform: ")             \
    X(SRV_JS_ESOURCE_XFORM_OVERLAP, 400, 10147,                                \
      "source filters can not overlap")                                        \
    X(SRV_JS_EMIRROR_MULTI_FILTERS, 400, 10150,                                \
      "mirror with multiple subject transforms cannot also have a single "     \
      "subject filter")                                                        \
    X(SRV_JS_EMIRROR_XFORM_SOURCE, 400, 10151, "mirror transform source: ")    \
    X(SRV_JS_EMIRROR_XFORM_OVERLAP, 400, 10152,                                \
      "mirror subject filters can not overlap")                                \
    X(SRV_JS_EMIRROR_XFORM_DEST, 400, 10154, "mirror transform: ")

/* 0 means "no JetStream error"; the table starts at 1. */
enum srv_js_err {
    SRV_JS_OK = 0,
#define SRV_JS_ERR_ENUM(name, code, err_code, desc) name,
    SRV_JS_ERRORS(SRV_JS_ERR_ENUM)
#undef SRV_JS_ERR_ENUM
        SRV_JS_ERR_COUNT
};

struct srv_js_err_info {
    int code;                /* HTTP-like, >= 300 */
    int err_code;            /* what nats.c and nats.js v3 switch on */
    const char *description; /* fixed text or template prefix */
};

/* The table row of err; err must be a valid non-zero srv_js_err. */
const struct srv_js_err_info *srv_js_err_info(enum srv_js_err err);

/* Build `{"type":"io.nats.jetstream.api.v1.<kind>","error":{"code":..,
 * "err_code":..,"description":..}}` into *out (caller json_decref's it).
 * The description is the table text followed by detail when detail is not
 * NULL (for templates: the JSON error, the last sequence, the config reason).
 * kind is e.g. "stream_create_response". Returns 0, KEEL_EINVAL for an
 * unknown err or kind NULL, KEEL_ENOMEM. */
KEEL_MUST_USE int srv_js_err_json(const char *kind, enum srv_js_err err,
                                  const char *detail, json_t **out,
                                  char *errmsg);

/* Add the `"error":{...}` member to an existing reply object (the publish
 * ack form of docs/protocol.md §2.5 carries it beside "stream" and "seq"). */
KEEL_MUST_USE int srv_js_err_add(json_t *obj, enum srv_js_err err,
                                 const char *detail, char *errmsg);

#endif
