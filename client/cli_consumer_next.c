/* keel consumer next STREAM NAME [--count N] [--no-ack]: pull the next
 * messages of a pull consumer, print them and acknowledge each (+ACK).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_js.h"

struct next_state {
    natsConnection *nc;
    bool ack;
    bool raw;
};

static int print_one(natsMsg *m, void *arg, char *errmsg)
{
    struct next_state *ns = arg;
    uint64_t seq = 0, pending = 0;
    int64_t ts = 0;
    const char *reply = natsMsg_GetReply(m);
    if (cli_js_ack_meta(reply, &seq, &ts, &pending) != 0) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "consumer next: a delivery without a JetStream ack "
                        "subject ('%s')",
                        reply != NULL ? reply : "");
    }
    if (!ns->raw) {
        char p[32];
        cli_fmt_count(pending, p, sizeof p);
        printf("[#%llu] %s (%s pending)\n", (unsigned long long)seq,
               natsMsg_GetSubject(m), p);
    }
    fwrite(natsMsg_GetData(m), 1, (size_t)natsMsg_GetDataLength(m), stdout);
    printf("\n");
    if (ns->ack) {
        natsStatus s = natsConnection_PublishString(ns->nc, reply, "+ACK");
        if (s != NATS_OK) {
            return cli_nats_err(s, errmsg, "ack");
        }
    }
    return 0;
}

/* Ask for the consumer first: a missing stream or consumer, or a push
 * consumer, then fails with the server's own sentence instead of a pull
 * that waits for --timeout and says nothing. */
static int check_pull_consumer(natsConnection *nc, int64_t timeout_ms,
                               const char *stream, const char *consumer,
                               char *errmsg)
{
    char api[CLI_SUBJECT_BYTES_MAX];
    char what[CLI_SUBJECT_BYTES_MAX];
    json_t *info = NULL;
    snprintf(api, sizeof api, "CONSUMER.INFO.%s.%s", stream, consumer);
    snprintf(what, sizeof what, "consumer next %s %s", stream, consumer);
    int rv =
        cli_js_request(nc, timeout_ms, what, api, NULL, &info, NULL, errmsg);
    if (rv != 0) {
        return rv;
    }
    const char *deliver =
        cli_js_str(json_object_get(info, "config"), "deliver_subject", NULL);
    if (deliver != NULL && deliver[0] != '\0') {
        rv = keel_err(KEEL_EUSAGE, errmsg,
                      "%s: a push consumer (it delivers to %s); 'keel "
                      "consumer next' needs a pull consumer — use 'keel sub "
                      "%s'",
                      what, deliver, deliver);
    }
    json_decref(info);
    return rv;
}

int cli_consumer_next(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg)
{
    struct cli_js_run r;
    struct next_state ns = {.ack = true};
    int64_t count = 1;
    int64_t got = 0;
    bool no_ack = false;
    struct cli_flag flags[] = {
        {"count", 'n', CLI_FLAG_INT, &count, "N", "messages to fetch (1)"},
        {"no-ack", 0, CLI_FLAG_BOOL, &no_ack, NULL,
         "do not acknowledge (they are redelivered after ack_wait)"},
        {"raw", 0, CLI_FLAG_BOOL, &ns.raw, NULL, "print only the bodies"},
        CLI_FLAG_END,
    };
    int rv = cli_js_parse(&r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || r.help) {
        return rv;
    }
    if (count < 1 || count > CLI_NEXT_MSGS_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg, "--count wants 1 to %d",
                        CLI_NEXT_MSGS_MAX);
    }
    ns.ack = !no_ack;
    rv = cli_js_connect(&r, errmsg);
    ns.nc = r.nc;
    if (rv == 0) {
        rv = check_pull_consumer(ns.nc, r.conn.timeout_ms, r.args.items[0],
                                 r.args.items[1], errmsg);
    }
    if (rv == 0) {
        rv = cli_js_pull(ns.nc, r.args.items[0], r.args.items[1], count,
                         r.conn.timeout_ms, print_one, &ns, &got, errmsg);
    }
    if (rv == 0 && ns.ack) {
        natsStatus s = natsConnection_FlushTimeout(ns.nc, r.conn.timeout_ms);
        rv = s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "flush acks");
    }
    if (rv == 0 && got == 0) {
        rv = keel_err(KEEL_ENOENT, errmsg,
                      "no message arrived within --timeout (%lld ms): the "
                      "consumer has nothing pending",
                      (long long)r.conn.timeout_ms);
    }
    cli_js_end(&r);
    return rv;
}
