/* keel cluster status / orphans ls: gather the answer every node sends
 * to one $KEEL.API request (cli_cluster.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_cluster.h"
#include "cli_js.h"

bool cli_cluster_has(const json_t *a, const char *s)
{
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        const char *t = json_string_value(v);
        if (t != NULL && strcmp(t, s) == 0) {
            return true;
        }
    }
    return false;
}

/* Names in asked that no reply came from (a new array). */
static json_t *not_answered(const json_t *replies, const json_t *asked)
{
    json_t *miss = json_array();
    size_t i, k;
    const json_t *a, *r;
    json_array_foreach(asked, i, a)
    {
        bool seen = false;
        json_array_foreach(replies, k, r)
        {
            const char *srv = cli_js_str(r, "server", "");
            if (json_is_object(json_object_get(r, "server"))) {
                srv = cli_js_str(json_object_get(r, "server"), "name", "");
            }
            if (strcmp(srv, json_string_value(a)) == 0) {
                seen = true;
            }
        }
        if (!seen) {
            json_array_append(miss, (json_t *)a);
        }
    }
    return miss;
}

int cli_cluster_gather(natsConnection *nc, const char *subject, int64_t wait_ms,
                       json_t **replies, json_t **missing, char *errmsg)
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    json_t *got = json_array();
    json_t *asked = NULL;
    int rv = 0;
    natsStatus s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
        s = natsConnection_SubscribeSync(&sub, nc, inbox);
    }
    if (s == NATS_OK) {
        s = natsConnection_PublishRequest(nc, subject, inbox, "", 0);
    }
    if (s == NATS_OK) {
        s = natsConnection_Flush(nc);
    }
    if (s != NATS_OK) {
        rv = cli_nats_err(s, errmsg, subject);
    }
    int64_t deadline = cli_mono_ms() + wait_ms;
    /* Bounded by the deadline: each wait ends by it. */
    while (rv == 0 && got != NULL) {
        int64_t left = deadline - cli_mono_ms();
        if (asked != NULL) {
            json_t *miss = not_answered(got, asked);
            bool done = json_array_size(miss) == 0;
            json_decref(miss);
            if (done) {
                break;
            }
        }
        if (left <= 0) {
            break;
        }
        natsMsg *m = NULL;
        s = natsSubscription_NextMsg(&m, sub, left);
        if (s == NATS_TIMEOUT) {
            break;
        }
        if (s != NATS_OK) {
            rv = cli_nats_err(s, errmsg, subject);
            break;
        }
        json_t *o = json_loadb(natsMsg_GetData(m),
                               (size_t)natsMsg_GetDataLength(m), 0, NULL);
        natsMsg_Destroy(m);
        if (!json_is_object(o)) {
            json_decref(o);
            continue; /* not an answer of this protocol */
        }
        if (asked == NULL && json_is_array(json_object_get(o, "asked"))) {
            asked = json_incref(json_object_get(o, "asked"));
        }
        json_array_append_new(got, o);
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    if (rv == 0 && got == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "%s", subject);
    }
    if (rv == 0 && json_array_size(got) == 0) {
        rv = keel_err(KEEL_ETIMEOUT, errmsg,
                      "no node answered %s within %lldms: is the server a "
                      "keeld with a data directory (-sd) and may your user "
                      "publish to $KEEL.API.>? Raise --timeout if it is busy",
                      subject, (long long)wait_ms);
    }
    if (rv != 0) {
        json_decref(got);
        json_decref(asked);
        return rv;
    }
    *missing = asked != NULL ? not_answered(got, asked) : json_array();
    json_decref(asked);
    *replies = got;
    return 0;
}

void cli_cluster_print_json(const json_t *replies, const json_t *missing)
{
    json_t *o = json_pack("{s:O, s:O}", "nodes", replies, "missing", missing);
    cli_js_print_json(o);
    json_decref(o);
}
