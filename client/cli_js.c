/* JetStream API plumbing shared by keel stream / consumer (cli_js.h). */
#include "cli_js.h"
#include "cli_stream_cfg.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"

int cli_subcmd_dispatch(const char *group, const struct cli_subcmd *subs,
                        size_t n, int argc, char **argv, char *errmsg)
{
    /* `keel stream -s URL ls`: connection flags go anywhere. */
    int hoisted = 0;
    int rv = cli_hoist_conn_flags(argc, argv, &hoisted, errmsg);
    if (rv != 0) {
        return rv;
    }
    const char *name = argc - hoisted >= 2 ? argv[1] : NULL;
    bool help =
        name != NULL && (strcmp(name, "--help") == 0 ||
                         strcmp(name, "-h") == 0 || strcmp(name, "help") == 0);
    for (size_t i = 0; name != NULL && !help && i < n; i++) {
        /* The last word: "stream add", "cluster orphans ls". */
        const char *sub = strrchr(subs[i].cmd.name, ' ');
        ASSERT(sub != NULL);
        if (strcmp(sub + 1, name) == 0) {
            return subs[i].fn(&subs[i].cmd, argc - 1, argv + 1, errmsg);
        }
    }
    FILE *out = help ? stdout : stderr;
    fprintf(out, "usage: keel %s <command> [args] [flags]\n\ncommands:\n",
            group);
    int w = 16; /* the widest name sets the column */
    for (size_t i = 0; i < n; i++) {
        int len = (int)strlen(subs[i].cmd.name);
        w = len > w ? len : w;
    }
    for (size_t i = 0; i < n; i++) {
        fprintf(out, "  %-*s  %s\n", w, subs[i].cmd.name, subs[i].cmd.summary);
    }
    fprintf(out, "\nRun 'keel %s <command> --help' for its flags.\n", group);
    if (help) {
        return 0;
    }
    if (name == NULL) {
        return keel_err(KEEL_EUSAGE, errmsg, "which %s command? (see above)",
                        group);
    }
    return keel_err(KEEL_EUSAGE, errmsg, "unknown %s command '%s'", group,
                    name);
}

size_t cli_subcmd_index(const struct cli_cmd *cmd,
                        const struct cli_subcmd *subs, size_t n)
{
    ptrdiff_t i = (const struct cli_subcmd *)(const void *)cmd - subs;
    ASSERT(i >= 0 && (size_t)i < n);
    return (size_t)i;
}

void cli_flags_pick(const struct cli_flag *all, const unsigned *bit, size_t n,
                    unsigned want, struct cli_flag *out, size_t out_max)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if ((bit[i] & want) != 0) {
            ASSERT(k + 1 < out_max);
            out[k++] = all[i];
        }
    }
    out[k] = (struct cli_flag)CLI_FLAG_END;
}

int cli_js_parse(struct cli_js_run *r, const struct cli_cmd *cmd,
                 const struct cli_flag *flags, int argc, char **argv,
                 char *errmsg)
{
    memset(r, 0, sizeof *r);
    cli_conn_opts_init(&r->conn);
    return cli_parse(cmd, flags, &r->conn, argc, argv, &r->args, &r->help,
                     errmsg);
}

int cli_js_connect(struct cli_js_run *r, char *errmsg)
{
    ASSERT(r->nc == NULL);
    return cli_connect_default(&r->conn, &r->nc, errmsg);
}

int cli_js_start(struct cli_js_run *r, const struct cli_cmd *cmd,
                 const struct cli_flag *flags, int argc, char **argv,
                 char *errmsg)
{
    int rv = cli_js_parse(r, cmd, flags, argc, argv, errmsg);
    return rv != 0 || r->help ? rv : cli_js_connect(r, errmsg);
}

void cli_js_end(struct cli_js_run *r)
{
    json_decref(r->reply);
    natsConnection_Destroy(r->nc);
    r->reply = NULL;
    r->nc = NULL;
}

int cli_js_show(struct cli_js_run *r, const char *what, const char *api,
                const char *body, cli_js_print_fn print, char *errmsg)
{
    ASSERT(r->nc != NULL);
    json_decref(r->reply);
    r->reply = NULL;
    int rv = cli_js_request(r->nc, r->conn.timeout_ms, what, api, body,
                            &r->reply, NULL, errmsg);
    if (rv == 0 && r->json) {
        cli_js_print_json(r->reply);
    } else if (rv == 0) {
        print(r->reply, r);
    }
    return rv;
}

int cli_js_info_rm(const struct cli_cmd *cmd, int argc, char **argv,
                   const struct cli_js_info_rm *how, char *errmsg)
{
    size_t n = strlen(cmd->name);
    bool rm = n > 3 && strcmp(cmd->name + n - 3, " rm") == 0;
    struct cli_js_run r;
    bool force = false;
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        {"force", 'f', CLI_FLAG_BOOL, &force, NULL, how->force_help},
        CLI_FLAG_END,
    };
    char api[CLI_SUBJECT_BYTES_MAX];
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    ASSERT(r.help || rv != 0 || (r.args.count >= 1 && r.args.count <= 2));
    if (rv == 0 && !r.help && rm && !force) {
        rv = cli_confirm(how->ask, r.args.items[r.args.count - 1], errmsg);
    }
    if (rv == 0 && !r.help) {
        /* STREAM NAME or STREAM CONSUMER: one or two names. */
        bool two = r.args.count == 2;
        snprintf(api, sizeof api, "%s.%s.%s%s%s", how->api,
                 rm ? "DELETE" : "INFO", r.args.items[0], two ? "." : "",
                 two ? r.args.items[1] : "");
        rv = cli_js_show(&r, cmd->name, api, NULL,
                         rm ? how->deleted : how->info, errmsg);
    }
    cli_js_end(&r);
    return rv;
}

static int api_error(const json_t *err, const char *what, char *errmsg)
{
    int64_t code = cli_js_int(err, "code", 0);
    int64_t ecode = cli_js_int(err, "err_code", 0);
    const char *desc = cli_js_str(err, "description", "unknown error");
    const char *hint = "";
    switch (ecode) {
    case 10059:
        hint = " — list streams with 'keel stream ls'";
        break;
    case 10014:
        hint = " — list consumers with 'keel consumer ls STREAM'";
        break;
    case 10058:
        hint = " — change it with 'keel stream edit', or pick another name";
        break;
    case 10065:
        hint = " — another stream already captures these subjects";
        break;
    default:
        break;
    }
    if (ecode == 0) { /* $KEEL.API errors carry only the HTTP-like code */
        return keel_err(code == 404 ? KEEL_ENOENT : KEEL_EIO, errmsg, "%s: %s",
                        what, desc);
    }
    return keel_err(code == 404 ? KEEL_ENOENT : KEEL_EIO, errmsg,
                    "%s: %s (error %lld)%s", what, desc, (long long)ecode,
                    hint);
}

int cli_js_request(natsConnection *nc, int64_t timeout_ms, const char *what,
                   const char *api, const char *body, json_t **out, char **raw,
                   char *errmsg)
{
    char subject[CLI_SUBJECT_BYTES_MAX];
    natsMsg *reply = NULL;
    json_error_t jerr;
    int n = snprintf(subject, sizeof subject, "%s%s",
                     api[0] == '$' ? "" : "$JS.API.", api);
    if (n < 0 || (size_t)n >= sizeof subject) {
        return keel_err(KEEL_EUSAGE, errmsg, "%s: name too long", what);
    }
    natsStatus s = natsConnection_Request(
        &reply, nc, subject, body != NULL ? body : "",
        body != NULL ? (int)strlen(body) : 0, timeout_ms);
    if (s == NATS_TIMEOUT && cli_perm_err(nc, what, errmsg) != 0) {
        return KEEL_EPERM;
    }
    if (s == NATS_NO_RESPONDERS || s == NATS_TIMEOUT) {
        return keel_err(s == NATS_TIMEOUT ? KEEL_ETIMEOUT : KEEL_EIO, errmsg,
                        "%s: no JetStream answer (%s) — is JetStream on? "
                        "start keeld with -sd DIR, or raise --timeout",
                        what, natsStatus_GetText(s));
    }
    if (s != NATS_OK) {
        return cli_nats_err(s, errmsg, what);
    }
    const char *data = natsMsg_GetData(reply);
    int len = natsMsg_GetDataLength(reply);
    json_t *o = json_loadb(data, (size_t)len, 0, &jerr);
    if (o == NULL || !json_is_object(o)) {
        json_decref(o);
        natsMsg_Destroy(reply);
        return keel_err(KEEL_EPROTO, errmsg, "%s: the reply is not JSON (%s)",
                        what, jerr.text);
    }
    const json_t *err = json_object_get(o, "error");
    if (err != NULL) {
        int rv = api_error(err, what, errmsg);
        json_decref(o);
        natsMsg_Destroy(reply);
        return rv;
    }
    if (raw != NULL) {
        *raw = strndup(data, (size_t)len);
    }
    natsMsg_Destroy(reply);
    if (out != NULL) {
        *out = o;
    } else {
        json_decref(o);
    }
    return 0;
}

int cli_js_ctx_async(natsConnection *nc, int64_t wait_ms, int64_t stall_ms,
                     int64_t window, jsPubAckHandler ack_cb, void *closure,
                     jsCtx **js, char *errmsg)
{
    ASSERT(window > 0);
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = wait_ms;
    jo.PublishAsync.AckHandler = ack_cb;
    jo.PublishAsync.AckHandlerClosure = closure;
    jo.PublishAsync.MaxPending = window;
    jo.PublishAsync.StallWait = stall_ms;
    natsStatus s = natsConnection_JetStream(js, nc, &jo);
    return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "JetStream context");
}

void cli_js_print_json(const json_t *o)
{
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s != NULL) {
        printf("%s\n", s);
        free(s);
    }
}

void cli_js_print_ls(const struct cli_table *t, const json_t *all, bool json,
                     const char *none)
{
    if (json) {
        cli_js_print_json(all);
    } else if (t->nrows == 1) {
        printf("%s\n", none);
    } else {
        cli_table_print(t, stdout, cli_color(stdout));
    }
}

int64_t cli_js_int(const json_t *o, const char *key, int64_t dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

const char *cli_js_str(const json_t *o, const char *key, const char *dflt)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v != NULL ? v : dflt;
}

int cli_js_rows(struct cli_table *t, const json_t *list, cli_js_row_fn row)
{
    size_t i;
    const json_t *item;
    json_array_foreach(list, i, item)
    {
        const char *cells[CLI_TABLE_COLS_MAX] = {0};
        char text[CLI_TABLE_COLS_MAX][CLI_TABLE_CELL_BYTES];
        row(item, cells, text);
        int rv = cli_table_add(t, cells);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

const char *cli_js_count(const json_t *o, const char *key, char *buf,
                         size_t len)
{
    cli_fmt_count((uint64_t)cli_js_int(o, key, 0), buf, len);
    return buf;
}

const char *cli_js_bytes(const json_t *o, const char *key, char *buf,
                         size_t len)
{
    cli_fmt_bytes((uint64_t)cli_js_int(o, key, 0), buf, len);
    return buf;
}

int cli_js_ack_meta(const char *reply, uint64_t *sseq, int64_t *ts_ns,
                    uint64_t *pending)
{
    /* $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<cseq>.<ts>.<pending> */
    const char *tok[9];
    int n = 0;
    if (reply == NULL || strncmp(reply, "$JS.ACK.", 8) != 0) {
        return KEEL_EPROTO;
    }
    for (const char *p = reply; *p != '\0' && n < 9; p++) {
        if (p == reply || p[-1] == '.') {
            tok[n++] = p;
        }
    }
    if (n != 9 || strchr(tok[8], '.') != NULL) {
        return KEEL_EPROTO;
    }
    *sseq = strtoull(tok[5], NULL, 10);
    *ts_ns = strtoll(tok[7], NULL, 10);
    *pending = strtoull(tok[8], NULL, 10);
    return 0;
}

static int pull_request(natsConnection *nc, const char *stream,
                        const char *consumer, const char *inbox, int64_t batch,
                        int64_t expires_ms, char *errmsg)
{
    char subj[CLI_SUBJECT_BYTES_MAX];
    char body[128];
    snprintf(subj, sizeof subj, "$JS.API.CONSUMER.MSG.NEXT.%s.%s", stream,
             consumer);
    snprintf(body, sizeof body, "{\"batch\":%lld,\"expires\":%lld}",
             (long long)batch, (long long)expires_ms * 1000000ll);
    natsStatus s = natsConnection_PublishRequestString(nc, subj, inbox, body);
    return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "pull request");
}

/* A status that ends a pull (docs/protocol.md §2.8): 404 and 408 say nothing is
 * pending, which the caller reports from the count; every other status is
 * an error that names the consumer and what to do. */
static int pull_status(natsMsg *m, const char *status, const char *stream,
                       const char *consumer, char *errmsg)
{
    const char *desc = NULL;
    if (natsMsgHeader_Get(m, "Description", &desc) != NATS_OK || desc == NULL) {
        desc = "";
    }
    if (strcmp(status, "404") == 0 || strcmp(status, "408") == 0) {
        return 0;
    }
    if (strcmp(status, "503") == 0) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "consumer %s on stream %s not found (no responders) "
                        "— list consumers with 'keel consumer ls %s'",
                        consumer, stream, stream);
    }
    if (strstr(desc, "Not Found") != NULL) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "pull from %s/%s: the server said %s %s — list "
                        "consumers with 'keel consumer ls %s'",
                        stream, consumer, status, desc, stream);
    }
    const char *hint = "";
    if (strstr(desc, "Deleted") != NULL) {
        hint = " — the consumer was deleted while the pull waited";
    } else if (strstr(desc, "MaxRequestBatch") != NULL) {
        hint = " — lower --count";
    } else if (strstr(desc, "MaxWaiting") != NULL) {
        hint = " — too many pulls are waiting; retry later";
    }
    return keel_err(KEEL_EIO, errmsg,
                    "pull from %s/%s: the server said %s%s%s%s", stream,
                    consumer, status, desc[0] != '\0' ? " " : "", desc, hint);
}

/* A pull answered with a JetStream API error body instead of messages
 * (a server that rejects the request itself). Returns 0 for a delivery. */
static int pull_api_error(natsMsg *m, const char *stream, const char *consumer,
                          char *errmsg)
{
    const char *reply = natsMsg_GetReply(m);
    if (reply != NULL && strncmp(reply, "$JS.ACK.", 8) == 0) {
        return 0;
    }
    json_t *o = json_loadb(natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m),
                           0, NULL);
    const json_t *err = json_object_get(o, "error");
    char what[CLI_SUBJECT_BYTES_MAX];
    snprintf(what, sizeof what, "pull from %s/%s", stream, consumer);
    int rv = err != NULL ? api_error(err, what, errmsg)
                         : keel_err(KEEL_EPROTO, errmsg,
                                    "%s: the server sent a message without a "
                                    "JetStream ack subject",
                                    what);
    json_decref(o);
    return rv;
}

int cli_js_pull(natsConnection *nc, const char *stream, const char *consumer,
                int64_t batch, int64_t expires_ms, cli_pull_cb cb, void *arg,
                int64_t *got, char *errmsg)
{
    natsInbox *inbox = NULL;
    natsSubscription *sub = NULL;
    natsMsg *m = NULL;
    *got = 0;
    natsStatus s = natsInbox_Create(&inbox);
    if (s == NATS_OK) {
        s = natsConnection_SubscribeSync(&sub, nc, inbox);
    }
    if (s == NATS_OK) {
        s = natsSubscription_SetPendingLimits(sub, -1, -1);
    }
    int rv = s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "pull subscribe");
    if (rv == 0) {
        rv = pull_request(nc, stream, consumer, inbox, batch, expires_ms,
                          errmsg);
    }
    /* Bounded by batch; each wait by the request's expiry plus a margin. */
    while (rv == 0 && *got < batch) {
        s = natsSubscription_NextMsg(&m, sub, expires_ms + CLI_WAIT_SLICE_MS);
        if (s == NATS_TIMEOUT) {
            break;
        }
        if (s != NATS_OK) {
            rv = cli_nats_err(s, errmsg, "pull");
            break;
        }
        const char *status = NULL;
        if (natsMsgHeader_Get(m, "Status", &status) == NATS_OK &&
            natsMsg_GetDataLength(m) == 0) {
            rv = pull_status(m, status, stream, consumer, errmsg);
            natsMsg_Destroy(m);
            break; /* 404 no messages, 408 expired: done; others fail */
        }
        rv = pull_api_error(m, stream, consumer, errmsg);
        if (rv != 0) {
            natsMsg_Destroy(m);
            break;
        }
        (*got)++;
        rv = cb(m, arg, errmsg);
        natsMsg_Destroy(m);
    }
    natsSubscription_Destroy(sub);
    natsInbox_Destroy(inbox);
    return rv;
}

int cli_js_stream_pages(natsConnection *nc, int64_t timeout_ms,
                        const char *what, cli_js_page_cb cb, void *arg,
                        char *errmsg)
{
    ASSERT(cb != NULL);
    int rv = 0;
    int64_t offset = 0;
    for (int page = 0; rv == 0 && page < CLI_JS_PAGES_MAX; page++) {
        char body[64];
        json_t *reply = NULL;
        snprintf(body, sizeof body, "{\"offset\":%lld}", (long long)offset);
        rv = cli_js_request(nc, timeout_ms, what, "STREAM.LIST", body, &reply,
                            NULL, errmsg);
        if (rv != 0) {
            break;
        }
        const json_t *streams = json_object_get(reply, "streams");
        rv = cb(streams, arg);
        offset += (int64_t)json_array_size(streams);
        bool last = json_array_size(streams) == 0 ||
                    offset >= cli_js_int(reply, "total", 0);
        json_decref(reply);
        if (last) {
            break;
        }
    }
    return rv;
}
