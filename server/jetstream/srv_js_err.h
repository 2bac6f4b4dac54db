/* srv_js_err: the JetStream API error table (docs/protocol.md §2.2) and the
 * standard JSON error object every $JS.API reply carries on failure. Pure:
 * no I/O, no clock. */
#ifndef KEEL_SRV_JS_ERR_H
#define KEEL_SRV_JS_ERR_H

#include <jansson.h>

#include "keel/assert.h"

/* SRV_JS_ERRORS(X): X(enum name, HTTP-like code, err_code, description)
 * a row, generated at build time from srv_js_errors.json (one source of
 * truth for the codes and texts, gen_js_errors.py). A description ending
 * in ": " or empty is a template: callers append the detail (see
 * srv_js_err_json). Any other row given a detail says "description
 * (detail)", or only the detail when it starts with the description. */
#include "srv_js_errors.h"

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
