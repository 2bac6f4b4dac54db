/* srv_isub: internal subscriptions and publishes (see the header). */
#include "srv_isub.h"

#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_parser.h"
#include "srv_route.h"
#include "srv_server.h"

int srv_isub_add(struct srv_server *srv, const char *subject, srv_sub_fn fn,
                 void *arg, struct srv_sub **out)
{
    size_t n = strlen(subject);
    ASSERT(fn != NULL);
    *out = NULL;
    if (n == 0 || n > SRV_CONTROL_LINE_BYTES_MAX ||
        !srv_subject_valid(subject, n, true)) {
        return KEEL_EINVAL;
    }
    /* One allocation: the sub, its subject, an empty sid. */
    struct srv_sub *sub = calloc(1, sizeof *sub + n + 2);
    if (sub == NULL) {
        return KEEL_ENOMEM;
    }
    sub->subject = (char *)(sub + 1);
    memcpy(sub->subject, subject, n);
    sub->subject_len = n;
    sub->sid = sub->subject + n + 1;
    sub->fn = fn;
    sub->fn_arg = arg;
    int rv = srv_sublist_insert(&srv->sublist, sub);
    if (rv != 0) {
        free(sub);
        return rv;
    }
    if (srv->fwd_hooks != NULL) {
        srv->fwd_hooks->interest_add(srv->fwd_arg, sub);
    }
    *out = sub;
    return 0;
}

void srv_isub_remove(struct srv_server *srv, struct srv_sub *sub)
{
    if (sub == NULL) {
        return;
    }
    ASSERT(sub->conn == NULL && sub->fn != NULL && !sub->removed);
    int rv = srv_sublist_remove(&srv->sublist, sub);
    ASSERT(rv == 0);
    ASSERT(sub->removed);
    /* A match result may still point at it: freed after the iteration,
     * its interest withdrawn from the other nodes (srv_server.c). */
    srv_server_bury_sub(srv, sub);
}

int srv_isub_publish(struct srv_server *srv, const char *subject,
                     const char *reply, const void *hdr, size_t hlen,
                     const void *data, size_t len, size_t *delivered)
{
    size_t n = strlen(subject);
    size_t rn = reply != NULL ? strlen(reply) : 0;
    *delivered = 0;
    if (n == 0 || n > SRV_CONTROL_LINE_BYTES_MAX ||
        rn > SRV_CONTROL_LINE_BYTES_MAX ||
        !srv_subject_valid(subject, n, false)) {
        return KEEL_EINVAL;
    }
    return srv_route_publish(srv, subject, reply, hdr, hlen, data, len,
                             delivered);
}
