/* keel sub and keel reply: the commands that receive. Both print a line on
 * stderr once the server has the subscription (after a flush round trip), so
 * scripts and tests can wait for it instead of sleeping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli.h"

static void print_headers(natsMsg *msg)
{
    const char **keys = NULL;
    int nkeys = 0;
    if (natsMsgHeader_Keys(msg, &keys, &nkeys) != NATS_OK) {
        return;
    }
    for (int i = 0; i < nkeys && i < CLI_LIST_ITEMS_MAX; i++) {
        const char **values = NULL;
        int nvalues = 0;
        if (natsMsgHeader_Values(msg, keys[i], &values, &nvalues) != NATS_OK) {
            continue;
        }
        for (int j = 0; j < nvalues && j < CLI_LIST_ITEMS_MAX; j++) {
            printf("%s: %s\n", keys[i], values[j]);
        }
        free((void *)values);
    }
    free((void *)keys);
}

/* Raw: the body and a newline. Otherwise a header line with the subject and
 * reply, the headers, a blank line, the body and a blank line.
 */
static void print_msg(int64_t n, natsMsg *msg, bool raw)
{
    if (!raw) {
        const char *reply = natsMsg_GetReply(msg);
        printf("[#%lld] Received on \"%s\"", (long long)n,
               natsMsg_GetSubject(msg));
        if (reply != NULL && reply[0] != '\0') {
            printf(" with reply \"%s\"", reply);
        }
        printf("\n");
        print_headers(msg);
        printf("\n");
    }
    fwrite(natsMsg_GetData(msg), 1, (size_t)natsMsg_GetDataLength(msg), stdout);
    printf(raw ? "\n" : "\n\n");
    fflush(stdout);
}

/* Subscribe (queue may be NULL) and wait until the server has the interest. */
static int subscribe(const struct cli_conn_opts *conn, natsConnection *nc,
                     const char *subject, const char *queue,
                     natsSubscription **sub, char *errmsg)
{
    natsStatus s;
    if (queue != NULL) {
        s = natsConnection_QueueSubscribeSync(sub, nc, subject, queue);
    } else {
        s = natsConnection_SubscribeSync(sub, nc, subject);
    }
    if (s == NATS_INVALID_SUBJECT || s == NATS_INVALID_QUEUE_NAME) {
        return keel_err(KEEL_EUSAGE, errmsg, "invalid subject or queue: %s%s%s",
                        subject, queue ? " " : "", queue ? queue : "");
    }
    if (s == NATS_OK) {
        s = natsConnection_FlushTimeout(nc, conn->timeout_ms);
    }
    int rv = s == NATS_OK ? cli_perm_err(nc, "subscribe", errmsg)
                          : cli_nats_err(s, errmsg, "subscribe failed");
    if (rv != 0) {
        natsSubscription_Destroy(*sub);
        *sub = NULL;
    }
    return rv;
}

/* Wait for the next message, in slices so a count of 0 runs until ^C. */
static int next_msg(natsSubscription *sub, natsMsg **msg, char *errmsg)
{
    for (int64_t waited = 0; waited < CLI_COUNT_MAX;
         waited += CLI_WAIT_SLICE_MS) {
        natsStatus s = natsSubscription_NextMsg(msg, sub, CLI_WAIT_SLICE_MS);
        if (s == NATS_OK) {
            return 0;
        }
        if (s != NATS_TIMEOUT) {
            return cli_nats_err(s, errmsg, "receive failed");
        }
    }
    return keel_err(KEEL_ETIMEOUT, errmsg, "no message for too long");
}

/* The body of sub and reply: receive `count` messages (0 = forever). */
static int receive_loop(natsConnection *nc, natsSubscription *sub,
                        int64_t count, bool raw, const char *answer,
                        char *errmsg)
{
    int64_t limit = count > 0 ? count : CLI_COUNT_MAX;
    for (int64_t n = 1; n <= limit; n++) {
        natsMsg *msg = NULL;
        int rv = next_msg(sub, &msg, errmsg);
        if (rv != 0) {
            return rv;
        }
        print_msg(n, msg, raw);
        const char *reply = natsMsg_GetReply(msg);
        if (answer != NULL && reply != NULL && reply[0] != '\0') {
            natsStatus s = natsConnection_PublishString(nc, reply, answer);
            if (s == NATS_OK) {
                s = natsConnection_Flush(nc);
            }
            if (s != NATS_OK) {
                natsMsg_Destroy(msg);
                return cli_nats_err(s, errmsg, "reply failed");
            }
        }
        natsMsg_Destroy(msg);
    }
    return 0;
}

static int run_receiver(const struct cli_conn_opts *conn, const char *subject,
                        const char *queue, int64_t count, bool raw,
                        const char *answer, char *errmsg)
{
    natsConnection *nc = NULL;
    natsSubscription *sub = NULL;
    int rv = cli_subject_check(subject, true, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = cli_connect_default(conn, &nc, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = subscribe(conn, nc, subject, queue, &sub, errmsg);
    if (rv != 0) {
        goto out_conn;
    }
    fprintf(stderr, "%s on \"%s\"%s%s\n",
            answer != NULL ? "Listening for requests" : "Subscribed", subject,
            queue != NULL ? " in queue group " : "", queue ? queue : "");
    fflush(stderr);
    rv = receive_loop(nc, sub, count, raw, answer, errmsg);
    natsSubscription_Destroy(sub);
out_conn:
    natsConnection_Destroy(nc);
    return rv;
}

/* sub SUBJECT and reply SUBJECT ANSWER: the same flags, worded for what
 * each receives. */
static int receiver_cmd(const struct cli_cmd *cmd, int argc, char **argv,
                        bool reply, char *errmsg)
{
    struct cli_conn_opts conn;
    struct cli_args args;
    const char *queue = NULL;
    int64_t count = 0;
    bool raw = false;
    bool help;

    cli_conn_opts_init(&conn);
    const struct cli_flag flags[] = {
        {"queue", 0, CLI_FLAG_STR, &queue, "GROUP",
         reply ? "join a queue group, to share requests with other responders"
               : "join a queue group"},
        {"count", 0, CLI_FLAG_INT, &count, "N",
         reply ? "exit after N requests (default: run until ^C)"
               : "exit after N messages (default: run until ^C)"},
        {"raw", 'r', CLI_FLAG_BOOL, &raw, NULL,
         reply ? "print only request bodies, one per line"
               : "print only message bodies, one per line"},
        CLI_FLAG_END,
    };
    int rv = cli_parse(cmd, flags, &conn, argc, argv, &args, &help, errmsg);
    if (rv != 0 || help) {
        return rv;
    }
    ASSERT(args.count == (reply ? 2 : 1));
    return run_receiver(&conn, args.items[0], queue, count, raw,
                        reply ? args.items[1] : NULL, errmsg);
}

int cli_sub(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    return receiver_cmd(cmd, argc, argv, false, errmsg);
}

int cli_reply(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    return receiver_cmd(cmd, argc, argv, true, errmsg);
}
