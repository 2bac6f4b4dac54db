/* srv_js_domain: jetstream { domain } (docs/jetstream-config.md
 * "Domain"). A node with a domain answers $JS.<domain>.API.> exactly as
 * $JS.API.>: the subject is rewritten before the API table is consulted
 * (srv_js_intercept), so every handler, forward and reply sees the one
 * API, and nats-server 2.9.10's replies name the domain (account info,
 * stream info, PubAck). */
#include <string.h>

#include "keel/limits.h"
#include "srv_config.h"
#include "srv_js_int.h"
#include "srv_server.h"

#define JS_PRE "$JS."
#define API_PRE "$JS.API."

bool srv_js_domain_subject(const struct srv_js *js, const char *s, size_t n,
                           char *out, size_t cap, size_t *out_len)
{
    const char *d = js->srv->cfg->js_domain;
    size_t dlen = strlen(d);
    size_t pre = sizeof JS_PRE - 1;
    /* "$JS." domain ".API." then at least one byte. */
    if (dlen == 0 || n <= pre + dlen + 5 || memcmp(s, JS_PRE, pre) != 0 ||
        memcmp(s + pre, d, dlen) != 0 ||
        memcmp(s + pre + dlen, ".API.", 5) != 0) {
        return false;
    }
    size_t rest = n - (pre + dlen + 5);
    if (sizeof API_PRE - 1 + rest > cap) {
        return false; /* cannot happen: the result is shorter than s */
    }
    memcpy(out, API_PRE, sizeof API_PRE - 1);
    memcpy(out + sizeof API_PRE - 1, s + pre + dlen + 5, rest);
    *out_len = sizeof API_PRE - 1 + rest;
    return true;
}

void srv_js_domain_add(const struct srv_js *js, json_t *o)
{
    const char *d = js->srv->cfg->js_domain;
    if (o != NULL && d[0] != '\0') {
        json_object_set_new(o, "domain", json_string(d));
    }
}
