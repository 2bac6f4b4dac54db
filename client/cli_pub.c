/* keel pub and keel req: the commands that send. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_js.h"

/* Build a message with the -H 'Key:Value' headers. Caller owns *out. */
static int build_msg(const char *subject, const char *reply, const char *body,
                     const struct cli_list *headers, natsMsg **out,
                     char *errmsg)
{
    natsMsg *msg = NULL;
    size_t len = strlen(body);
    int rv;

    ASSERT(headers->count <= CLI_LIST_ITEMS_MAX);
    if (len > CLI_BODY_BYTES_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg, "body is over %d bytes",
                        CLI_BODY_BYTES_MAX);
    }
    natsStatus s = natsMsg_Create(&msg, subject, reply, body, (int)len);
    if (s != NATS_OK) {
        return cli_nats_err(s, errmsg, "cannot build the message");
    }
    for (int i = 0; i < headers->count; i++) {
        char key[CLI_HEADER_KEY_BYTES_MAX];
        const char *value = NULL;
        rv = cli_pair_split(headers->items[i], ':', "header", key, sizeof key,
                            &value, errmsg);
        if (rv != 0) {
            goto err_msg;
        }
        s = natsMsgHeader_Add(msg, key, value);
        if (s != NATS_OK) {
            rv = cli_nats_err(s, errmsg, "cannot add header");
            goto err_msg;
        }
    }
    *out = msg;
    return 0;

err_msg:
    natsMsg_Destroy(msg);
    return rv;
}

static _Atomic int64_t js_acked, js_failed;

static void js_ack_cb(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
                      void *closure)
{
    (void)js;
    (void)closure;
    atomic_fetch_add(pa != NULL && pae == NULL ? &js_acked : &js_failed, 1);
    natsMsg_Destroy(msg);
}

/* --jetstream: publish count copies with acks, CLI_BACKUP_WINDOW in
 * flight; fails unless every copy was acknowledged as stored. */
static int pub_jetstream(natsConnection *nc, const char *subject,
                         const char *body, const struct cli_list *headers,
                         int64_t count, int64_t timeout_ms, char *errmsg)
{
    jsCtx *js = NULL;
    natsStatus s = NATS_OK;
    int rv = cli_js_ctx_async(nc, timeout_ms, timeout_ms, CLI_BACKUP_WINDOW,
                              js_ack_cb, NULL, &js, errmsg);
    for (int64_t i = 0; rv == 0 && i < count; i++) {
        natsMsg *msg = NULL;
        rv = build_msg(subject, NULL, body, headers, &msg, errmsg);
        s = rv == 0 ? js_PublishMsgAsync(js, &msg, NULL) : NATS_OK;
        natsMsg_Destroy(msg); /* NULL once the library owns it */
        if (s != NATS_OK) {
            rv = cli_nats_err(s, errmsg, "JetStream publish");
        }
    }
    if (rv == 0) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = timeout_ms;
        s = js_PublishAsyncComplete(js, &po);
        rv = s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "waiting for acks");
    }
    if (rv == 0 && atomic_load(&js_acked) != count) {
        rv = keel_err(KEEL_EIO, errmsg,
                      "%lld of %lld publishes were not stored (no stream "
                      "captures \"%s\"? see keel stream ls)",
                      (long long)(count - atomic_load(&js_acked)),
                      (long long)count, subject);
    }
    jsCtx_Destroy(js);
    return rv;
}

int cli_pub(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    struct cli_conn_opts conn;
    struct cli_list headers = {.count = 0};
    struct cli_args args;
    int64_t count = 1;
    const char *reply = NULL;
    bool help;
    bool jetstream = false;
    natsConnection *nc = NULL;
    natsMsg *msg = NULL;
    int rv;

    cli_conn_opts_init(&conn);
    const struct cli_flag flags[] = {
        {"count", 0, CLI_FLAG_INT, &count, "N", "publish N copies (default 1)"},
        {"header", 'H', CLI_FLAG_LIST, &headers, "'Key:Value'", "add a header"},
        {"reply", 0, CLI_FLAG_STR, &reply, "SUBJECT", "reply subject to set"},
        {"jetstream", 'J', CLI_FLAG_BOOL, &jetstream, NULL,
         "wait for each copy's stream ack (fails if one is not stored)"},
        CLI_FLAG_END,
    };
    rv = cli_parse(cmd, flags, &conn, argc, argv, &args, &help, errmsg);
    if (rv != 0 || help) {
        return rv;
    }
    const char *subject = args.items[0];
    const char *body = args.count > 1 ? args.items[1] : "";
    rv = cli_subject_check(subject, false, errmsg);
    if (rv == 0 && reply != NULL) {
        rv = cli_subject_check(reply, false, errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    rv = build_msg(subject, reply, body, &headers, &msg, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = cli_connect_default(&conn, &nc, errmsg);
    if (rv != 0) {
        goto out_msg;
    }
    if (jetstream) {
        rv = pub_jetstream(nc, subject, body, &headers, count, conn.timeout_ms,
                           errmsg);
        if (rv == 0) {
            fprintf(stderr, "Stored %lld message%s in JetStream\n",
                    (long long)count, count == 1 ? "" : "s");
        }
        goto out_conn;
    }
    for (int64_t i = 0; i < count; i++) {
        ASSERT(i < CLI_COUNT_MAX);
        natsStatus s = natsConnection_PublishMsg(nc, msg);
        if (s != NATS_OK) {
            rv = cli_nats_err(s, errmsg, "publish failed");
            goto out_conn;
        }
    }
    /* The flush round trip proves the server has read every message. */
    natsStatus s = natsConnection_FlushTimeout(nc, conn.timeout_ms);
    if (s != NATS_OK) {
        rv = cli_nats_err(s, errmsg, "server did not confirm the publish");
        goto out_conn;
    }
    rv = cli_perm_err(nc, "publish", errmsg);
    if (rv != 0) {
        goto out_conn;
    }
    fprintf(stderr, "Published %lld message%s of %zu bytes to \"%s\"\n",
            (long long)count, count == 1 ? "" : "s", strlen(body), subject);

out_conn:
    natsConnection_Destroy(nc);
out_msg:
    natsMsg_Destroy(msg);
    return rv;
}

/* Print a reply the way keel sub prints a message body: raw bytes + LF. */
static void print_body(natsMsg *msg)
{
    fwrite(natsMsg_GetData(msg), 1, (size_t)natsMsg_GetDataLength(msg), stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

int cli_req(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    struct cli_conn_opts conn;
    struct cli_list headers = {.count = 0};
    struct cli_args args;
    bool help;
    natsConnection *nc = NULL;
    natsMsg *msg = NULL;
    natsMsg *reply = NULL;
    int rv;

    cli_conn_opts_init(&conn);
    const struct cli_flag flags[] = {
        {"header", 'H', CLI_FLAG_LIST, &headers, "'Key:Value'", "add a header"},
        CLI_FLAG_END,
    };
    rv = cli_parse(cmd, flags, &conn, argc, argv, &args, &help, errmsg);
    if (rv != 0 || help) {
        return rv;
    }
    const char *subject = args.items[0];
    rv = cli_subject_check(subject, false, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = build_msg(subject, NULL, args.items[1], &headers, &msg, errmsg);
    if (rv != 0) {
        return rv;
    }
    rv = cli_connect_default(&conn, &nc, errmsg);
    if (rv != 0) {
        goto out_msg;
    }
    natsStatus s = natsConnection_RequestMsg(&reply, nc, msg, conn.timeout_ms);
    if (s == NATS_NO_RESPONDERS) {
        rv = keel_err(KEEL_ENOENT, errmsg,
                      "no responders on \"%s\" — start one with keel reply "
                      "%s BODY",
                      subject, subject);
    } else if (s == NATS_TIMEOUT && cli_perm_err(nc, "request", errmsg)) {
        rv = KEEL_EPERM;
    } else if (s == NATS_TIMEOUT) {
        rv = keel_err(KEEL_ETIMEOUT, errmsg,
                      "no reply on \"%s\" within %lld ms — raise --timeout "
                      "or check the responder",
                      subject, (long long)conn.timeout_ms);
    } else if (s != NATS_OK) {
        rv = cli_nats_err(s, errmsg, "request failed");
    } else {
        print_body(reply);
        natsMsg_Destroy(reply);
    }
    natsConnection_Destroy(nc);
out_msg:
    natsMsg_Destroy(msg);
    return rv;
}
