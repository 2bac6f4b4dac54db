/* keel stream add|ls|info|edit|rm|purge|get (backup|restore: cli_backup.c).
 *
 * Each sub-command speaks the JetStream API (docs/protocol.md §2.4). Read
 * commands print a human summary, or with --json the API's own reply.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_js.h"
#include "cli_stream_cfg.h"

static void print_state(const json_t *info)
{
    const json_t *st = json_object_get(info, "state");
    char msgs[32], bytes[32], first[32], last[32], cons[32];
    cli_fmt_count((uint64_t)cli_js_int(st, "messages", 0), msgs, sizeof msgs);
    cli_fmt_bytes((uint64_t)cli_js_int(st, "bytes", 0), bytes, sizeof bytes);
    cli_fmt_count((uint64_t)cli_js_int(st, "first_seq", 0), first,
                  sizeof first);
    cli_fmt_count((uint64_t)cli_js_int(st, "last_seq", 0), last, sizeof last);
    cli_fmt_count((uint64_t)cli_js_int(st, "consumer_count", 0), cons,
                  sizeof cons);
    printf("State:\n");
    printf("  %-18s %s\n", "Messages:", msgs);
    printf("  %-18s %s\n", "Bytes:", bytes);
    /* An empty stream has zero times ("0001-01-01..."): print none. */
    bool empty = cli_js_int(st, "messages", 0) == 0;
    printf("  %-18s %s%s%s\n", "First Sequence:", first, empty ? "" : " @ ",
           empty ? "" : cli_js_str(st, "first_ts", "-"));
    printf("  %-18s %s%s%s\n", "Last Sequence:", last, empty ? "" : " @ ",
           empty ? "" : cli_js_str(st, "last_ts", "-"));
    printf("  %-18s %s\n", "Consumers:", cons);
}

/* One line per follower: name, current or outdated, lag, last heard. */
static void print_replicas(const json_t *reps)
{
    size_t i;
    const json_t *r;
    json_array_foreach(reps, i, r)
    {
        char active[32];
        cli_fmt_duration_ns(cli_js_int(r, "active", 0), active, sizeof active);
        printf("  %-18s %s, %s, lag %" PRId64 ", seen %s ago%s\n",
               "Replica:", cli_js_str(r, "name", "?"),
               json_is_true(json_object_get(r, "current")) ? "current"
                                                           : "outdated",
               cli_js_int(r, "lag", 0), active,
               json_is_true(json_object_get(r, "offline")) ? ", OFFLINE" : "");
    }
}

static void print_info(const json_t *info)
{
    const json_t *cfg = json_object_get(info, "config");
    const json_t *cl = json_object_get(info, "cluster");
    printf("Stream %s (created %s)\n\n", cli_js_str(cfg, "name", "?"),
           cli_js_str(info, "created", "?"));
    cli_stream_cfg_print(cfg);
    if (cl != NULL) {
        printf("Cluster:\n  %-18s %s\n",
               "Leader:", cli_js_str(cl, "leader", "(none)"));
        print_replicas(json_object_get(cl, "replicas"));
        printf("\n");
    }
    print_state(info);
}

static int stream_add_edit(const struct cli_cmd *cmd, int argc, char **argv,
                           char *errmsg, bool edit)
{
    struct cli_conn_opts conn;
    struct cli_args args;
    struct cli_stream_flags sf;
    struct cli_flag flags[CLI_STREAM_FLAGS_ROWS];
    natsConnection *nc = NULL;
    json_t *cfg = NULL;
    json_t *reply = NULL;
    char api[CLI_SUBJECT_BYTES_MAX];
    bool help = false;

    cli_stream_flags_init(&sf, flags);
    int rv =
        cli_js_start(cmd, flags, &conn, argc, argv, &args, &nc, &help, errmsg);
    if (rv != 0 || help) {
        goto out;
    }
    const char *name = args.items[0];
    if (edit) {
        /* An edit starts from the current config: flags change fields. */
        snprintf(api, sizeof api, "STREAM.INFO.%s", name);
        rv = cli_js_request(nc, conn.timeout_ms, "stream edit", api, NULL,
                            &reply, NULL, errmsg);
        if (rv == 0) {
            cfg = json_deep_copy(json_object_get(reply, "config"));
            json_decref(reply);
            reply = NULL;
        }
    }
    if (rv == 0) {
        rv = cli_stream_cfg_build(&sf, name, &cfg, errmsg);
    }
    if (rv == 0) {
        char *body = json_dumps(cfg, JSON_COMPACT);
        snprintf(api, sizeof api, "STREAM.%s.%s", edit ? "UPDATE" : "CREATE",
                 name);
        rv = body == NULL ? KEEL_ENOMEM
                          : cli_js_request(nc, conn.timeout_ms,
                                           edit ? "stream edit" : "stream add",
                                           api, body, &reply, NULL, errmsg);
        free(body);
    }
    if (rv == 0) {
        if (sf.json) {
            cli_js_print_json(reply);
        } else {
            printf("Stream %s %s\n\n", name, edit ? "updated" : "created");
            print_info(reply);
        }
    }
out:
    json_decref(cfg);
    json_decref(reply);
    natsConnection_Destroy(nc);
    return rv;
}

static int stream_add(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg)
{
    return stream_add_edit(cmd, argc, argv, errmsg, false);
}

static int stream_edit(const struct cli_cmd *cmd, int argc, char **argv,
                       char *errmsg)
{
    return stream_add_edit(cmd, argc, argv, errmsg, true);
}

/* What stream ls gathers: the table and, for --json, every info. */
struct ls_acc {
    struct cli_table *t;
    json_t *all;
};

static int ls_page(const json_t *streams, void *arg)
{
    struct ls_acc *acc = arg;
    struct cli_table *t = acc->t;
    if (json_array_extend(acc->all, (json_t *)streams) != 0) {
        return KEEL_ENOMEM;
    }
    size_t i;
    const json_t *info;
    json_array_foreach(streams, i, info)
    {
        const json_t *cfg = json_object_get(info, "config");
        const json_t *st = json_object_get(info, "state");
        char msgs[32], bytes[32], subjects[256];
        cli_stream_cfg_subjects(cfg, subjects, sizeof subjects);
        cli_fmt_count((uint64_t)cli_js_int(st, "messages", 0), msgs,
                      sizeof msgs);
        cli_fmt_bytes((uint64_t)cli_js_int(st, "bytes", 0), bytes,
                      sizeof bytes);
        const char *row[] = {cli_js_str(cfg, "name", "?"), subjects, msgs,
                             bytes, cli_js_str(st, "last_ts", "-")};
        int rv = cli_table_add(t, row);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

static int stream_ls(const struct cli_cmd *cmd, int argc, char **argv,
                     char *errmsg)
{
    struct cli_conn_opts conn;
    struct cli_args args;
    natsConnection *nc = NULL;
    bool json = false, help = false;
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &json, NULL, "print the API replies"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    static const char *const heads[] = {"Name", "Subjects", ">Messages",
                                        ">Bytes", "Last Message"};
    struct cli_table *t = calloc(1, sizeof *t);
    json_t *all = json_array();
    int rv = t == NULL || all == NULL ? KEEL_ENOMEM : 0;
    if (rv == 0) {
        rv = cli_js_start(cmd, flags, &conn, argc, argv, &args, &nc, &help,
                          errmsg);
    }
    if (rv == 0 && !help) {
        rv = cli_table_init(t, 5, heads);
    }
    struct ls_acc acc = {t, all};
    if (rv == 0 && !help) {
        rv = cli_js_stream_pages(nc, conn.timeout_ms, "stream ls", ls_page,
                                 &acc, errmsg);
    }
    if (rv == 0 && !help) {
        if (json) {
            cli_js_print_json(all);
        } else if (t->nrows == 1) {
            printf("No streams defined (add one with 'keel stream add')\n");
        } else {
            cli_table_print(t, stdout, cli_color(stdout));
        }
    }
    if (t != NULL) {
        cli_table_free(t);
    }
    free(t);
    json_decref(all);
    natsConnection_Destroy(nc);
    return rv;
}

/* info, rm: one stream name and a --json flag (rm: --force). */
static int stream_simple(const struct cli_cmd *cmd, int argc, char **argv,
                         char *errmsg, const char *verb)
{
    struct cli_conn_opts conn;
    struct cli_args args;
    natsConnection *nc = NULL;
    json_t *reply = NULL;
    char *raw = NULL;
    bool json = false, help = false, force = false;
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &json, NULL, "print the API reply"},
        {"force", 'f', CLI_FLAG_BOOL, &force, NULL,
         "rm: do not ask (needed when stdin is not a terminal)"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    char api[CLI_SUBJECT_BYTES_MAX];
    int rv =
        cli_js_start(cmd, flags, &conn, argc, argv, &args, &nc, &help, errmsg);
    if (rv != 0 || help) {
        goto out;
    }
    snprintf(api, sizeof api, "STREAM.%s.%s", verb, args.items[0]);
    if (strcmp(verb, "DELETE") == 0 && !force) {
        rv = cli_confirm("delete stream", args.items[0], errmsg);
    }
    if (rv == 0) {
        rv = cli_js_request(nc, conn.timeout_ms, cmd->name, api, NULL, &reply,
                            &raw, errmsg);
    }
    if (rv != 0) {
        goto out;
    }
    if (json) {
        cli_js_print_json(reply);
    } else if (strcmp(verb, "INFO") == 0) {
        print_info(reply);
    } else {
        printf("Stream %s deleted\n", args.items[0]);
    }
out:
    free(raw);
    json_decref(reply);
    natsConnection_Destroy(nc);
    return rv;
}

static int stream_info(const struct cli_cmd *cmd, int argc, char **argv,
                       char *errmsg)
{
    return stream_simple(cmd, argc, argv, errmsg, "INFO");
}

static int stream_rm(const struct cli_cmd *cmd, int argc, char **argv,
                     char *errmsg)
{
    return stream_simple(cmd, argc, argv, errmsg, "DELETE");
}

static int stream_purge(const struct cli_cmd *cmd, int argc, char **argv,
                        char *errmsg)
{
    struct cli_conn_opts conn;
    struct cli_args args;
    natsConnection *nc = NULL;
    json_t *reply = NULL;
    json_t *body = json_object();
    const char *subject = NULL;
    int64_t seq = -1, keep = -1;
    bool json = false, help = false, force = false;
    struct cli_flag flags[] = {
        {"subject", 0, CLI_FLAG_STR, &subject, "SUBJECT",
         "purge only messages on SUBJECT"},
        {"seq", 0, CLI_FLAG_INT, &seq, "N", "purge messages below seq N"},
        {"keep", 0, CLI_FLAG_INT, &keep, "N", "keep the newest N messages"},
        {"force", 'f', CLI_FLAG_BOOL, &force, NULL, "do not ask"},
        {"json", 0, CLI_FLAG_BOOL, &json, NULL, "print the API reply"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    char api[CLI_SUBJECT_BYTES_MAX];
    int rv = body == NULL ? KEEL_ENOMEM : 0;
    if (rv == 0) {
        rv = cli_js_start(cmd, flags, &conn, argc, argv, &args, &nc, &help,
                          errmsg);
    }
    if (rv != 0 || help) {
        goto out;
    }
    if (subject != NULL) {
        json_object_set_new(body, "filter", json_string(subject));
    }
    if (seq >= 0) {
        json_object_set_new(body, "seq", json_integer(seq));
    }
    if (keep >= 0) {
        json_object_set_new(body, "keep", json_integer(keep));
    }
    if (!force) {
        rv = cli_confirm("purge stream", args.items[0], errmsg);
    }
    char *text = rv == 0 ? json_dumps(body, JSON_COMPACT) : NULL;
    snprintf(api, sizeof api, "STREAM.PURGE.%s", args.items[0]);
    if (rv == 0) {
        rv = text == NULL ? KEEL_ENOMEM
                          : cli_js_request(nc, conn.timeout_ms, cmd->name, api,
                                           text, &reply, NULL, errmsg);
    }
    free(text);
    if (rv == 0 && json) {
        cli_js_print_json(reply);
    } else if (rv == 0) {
        char n[32];
        cli_fmt_count((uint64_t)cli_js_int(reply, "purged", 0), n, sizeof n);
        printf("Purged %s messages from %s\n", n, args.items[0]);
    }
out:
    json_decref(body);
    json_decref(reply);
    natsConnection_Destroy(nc);
    return rv;
}

static const struct cli_subcmd subs[] = {
    {{"stream add", NULL, "NAME",
      "Create a stream (flags as 'nats stream add', or --config FILE.json).", 1,
      1},
     stream_add},
    {{"stream ls", NULL, "", "List the streams with their sizes.", 0, 0},
     stream_ls},
    {{"stream info", NULL, "NAME", "Show a stream's config and state.", 1, 1},
     stream_info},
    {{"stream edit", NULL, "NAME",
      "Change a stream's config (only the flags given).", 1, 1},
     stream_edit},
    {{"stream rm", NULL, "NAME", "Delete a stream and all its messages.", 1, 1},
     stream_rm},
    {{"stream purge", NULL, "NAME",
      "Remove messages (all, --subject, --seq, --keep).", 1, 1},
     stream_purge},
    {{"stream get", NULL, "NAME SEQ",
      "Print one stored message (or --last-for SUBJECT).", 1, 2},
     cli_stream_get},
    {{"stream backup", NULL, "NAME FILE",
      "Write the stream's config and messages to a checksummed archive.", 2, 2},
     cli_stream_backup},
    {{"stream restore", NULL, "FILE",
      "Recreate a stream from a backup archive (--name to rename).", 1, 1},
     cli_stream_restore},
};

int cli_stream(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    (void)cmd;
    return cli_subcmd_dispatch("stream", subs, sizeof subs / sizeof subs[0],
                               argc, argv, errmsg);
}
