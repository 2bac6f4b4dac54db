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
#include "cli_verbs.h"
#include "cli_stream_cfg.h"

static void print_state(const json_t *info)
{
    const json_t *st = json_object_get(info, "state");
    char n[32]; /* each line's number, printed before the next is made */
    printf("State:\n");
    printf("  %-18s %s\n",
           "Messages:", cli_js_count(st, "messages", n, sizeof n));
    printf("  %-18s %s\n", "Bytes:", cli_js_bytes(st, "bytes", n, sizeof n));
    /* An empty stream has zero times ("0001-01-01..."): print none. */
    bool empty = cli_js_int(st, "messages", 0) == 0;
    printf("  %-18s %s%s%s\n",
           "First Sequence:", cli_js_count(st, "first_seq", n, sizeof n),
           empty ? "" : " @ ", empty ? "" : cli_js_str(st, "first_ts", "-"));
    printf("  %-18s %s%s%s\n",
           "Last Sequence:", cli_js_count(st, "last_seq", n, sizeof n),
           empty ? "" : " @ ", empty ? "" : cli_js_str(st, "last_ts", "-"));
    printf("  %-18s %s\n",
           "Consumers:", cli_js_count(st, "consumer_count", n, sizeof n));
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

/* One origin's config (mc) and progress (m, NULL when not reported). */
static void print_origin(const json_t *mc, const json_t *m)
{
    printf("  %-18s %s\n", "Origin:", cli_js_str(mc, "name", "?"));
    if (json_object_get(mc, "filter_subject") != NULL) {
        printf("  %-18s %s\n", "Filter:", cli_js_str(mc, "filter_subject", ""));
    }
    if (m != NULL) {
        char active[32];
        int64_t ns = cli_js_int(m, "active", -1);
        if (ns < 0) {
            snprintf(active, sizeof active, "never");
        } else {
            cli_fmt_duration_ns(ns, active, sizeof active);
        }
        printf("  %-18s %" PRId64 "\n", "Lag:", cli_js_int(m, "lag", 0));
        printf("  %-18s %s%s\n", "Last Seen:", active, ns < 0 ? "" : " ago");
        if (json_object_get(m, "keel_lost") != NULL) {
            printf("  %-18s %" PRId64 " (dropped by the origin unread)\n",
                   "Lost:", cli_js_int(m, "keel_lost", 0));
        }
        const json_t *e = json_object_get(m, "error");
        if (e != NULL) {
            printf("  %-18s %s (%" PRId64 ")\n",
                   "Error:", cli_js_str(e, "description", "?"),
                   cli_js_int(e, "err_code", 0));
        }
    }
    printf("\n");
}

/* A mirror's origin and progress (docs/jetstream-config.md "Mirrors"),
 * or each source's ("Sources"). */
static void print_mirror(const json_t *cfg, const json_t *info)
{
    const json_t *mc = json_object_get(cfg, "mirror");
    if (mc != NULL) {
        printf("Mirror:\n");
        print_origin(mc, json_object_get(info, "mirror"));
        return;
    }
    const json_t *sc = json_object_get(cfg, "sources");
    const json_t *si = json_object_get(info, "sources");
    size_t n = json_is_array(sc) ? json_array_size(sc) : 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *c = json_array_get(sc, i);
        const json_t *m = NULL;
        /* Matched by name: nats-server lists them in any order. */
        for (size_t k = 0; k < json_array_size(si) && m == NULL; k++) {
            const json_t *x = json_array_get(si, k);
            m = strcmp(cli_js_str(x, "name", ""), cli_js_str(c, "name", "?")) ==
                        0
                    ? x
                    : NULL;
        }
        printf("Source %zu:\n", i + 1);
        print_origin(c, m);
    }
}

static void print_info(const json_t *info, const struct cli_js_run *r)
{
    const json_t *cfg = json_object_get(info, "config");
    const json_t *cl = json_object_get(info, "cluster");
    (void)r;
    printf("Stream %s (created %s)\n\n", cli_js_str(cfg, "name", "?"),
           cli_js_str(info, "created", "?"));
    cli_stream_cfg_print(cfg);
    if (cl != NULL) {
        printf("Cluster:\n  %-18s %s\n",
               "Leader:", cli_js_str(cl, "leader", "(none)"));
        print_replicas(json_object_get(cl, "replicas"));
        printf("\n");
    }
    print_mirror(cfg, info);
    print_state(info);
}

static void print_created(const json_t *info, const struct cli_js_run *r)
{
    printf("Stream %s created\n\n", r->args.items[0]);
    print_info(info, r);
}

static void print_updated(const json_t *info, const struct cli_js_run *r)
{
    printf("Stream %s updated\n\n", r->args.items[0]);
    print_info(info, r);
}

/* add and edit: the row's name says which. */
static int stream_add_edit(const struct cli_cmd *cmd, int argc, char **argv,
                           char *errmsg)
{
    bool edit = strcmp(cmd->name, "stream edit") == 0;
    struct cli_js_run r;
    struct cli_stream_flags sf;
    struct cli_flag flags[CLI_STREAM_FLAGS_ROWS];
    json_t *cfg = NULL;
    char api[CLI_SUBJECT_BYTES_MAX];

    cli_stream_flags_init(&sf, flags);
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || r.help) {
        goto out;
    }
    const char *name = r.args.items[0];
    if (edit) {
        /* An edit starts from the current config: flags change fields. */
        snprintf(api, sizeof api, "STREAM.INFO.%s", name);
        rv = cli_js_request(r.nc, r.conn.timeout_ms, "stream edit", api, NULL,
                            &r.reply, NULL, errmsg);
        cfg =
            rv == 0 ? json_deep_copy(json_object_get(r.reply, "config")) : NULL;
    }
    if (rv == 0) {
        rv = cli_stream_cfg_build(&sf, name, &cfg, errmsg);
    }
    char *body = rv == 0 ? json_dumps(cfg, JSON_COMPACT) : NULL;
    if (rv == 0 && body == NULL) {
        rv = KEEL_ENOMEM;
    }
    if (rv == 0) {
        r.json = sf.json;
        snprintf(api, sizeof api, "STREAM.%s.%s", edit ? "UPDATE" : "CREATE",
                 name);
        rv = cli_js_show(&r, cmd->name, api, body,
                         edit ? print_updated : print_created, errmsg);
    }
    free(body);
out:
    json_decref(cfg);
    cli_js_end(&r);
    return rv;
}

/* What stream ls gathers: the table and, for --json, every info. */
struct ls_acc {
    struct cli_table *t;
    json_t *all;
};

/* cli_js_rows' row of stream ls. */
static void ls_row(const json_t *info, const char **cells,
                   char (*text)[CLI_TABLE_CELL_BYTES])
{
    const json_t *cfg = json_object_get(info, "config");
    const json_t *st = json_object_get(info, "state");
    cli_stream_cfg_subjects(cfg, text[1], sizeof text[1]);
    cells[0] = cli_js_str(cfg, "name", "?");
    cells[1] = text[1];
    cells[2] = cli_js_count(st, "messages", text[2], sizeof text[2]);
    cells[3] = cli_js_bytes(st, "bytes", text[3], sizeof text[3]);
    cells[4] = cli_js_str(st, "last_ts", "-");
}

static int ls_page(const json_t *streams, void *arg)
{
    struct ls_acc *acc = arg;
    if (json_array_extend(acc->all, (json_t *)streams) != 0) {
        return KEEL_ENOMEM;
    }
    return cli_js_rows(acc->t, streams, ls_row);
}

static int stream_ls(const struct cli_cmd *cmd, int argc, char **argv,
                     char *errmsg)
{
    struct cli_js_run r = {0}; /* ended even when never started */
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API replies"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    static const char *const heads[] = {"Name", "Subjects", ">Messages",
                                        ">Bytes", "Last Message"};
    struct ls_acc acc = {calloc(1, sizeof *acc.t), json_array()};
    int rv = acc.t == NULL || acc.all == NULL
                 ? KEEL_ENOMEM
                 : cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv == 0 && !r.help) {
        rv = cli_table_init(acc.t, 5, heads);
    }
    if (rv == 0 && !r.help) {
        rv = cli_js_stream_pages(r.nc, r.conn.timeout_ms, "stream ls", ls_page,
                                 &acc, errmsg);
    }
    if (rv == 0 && !r.help) {
        cli_js_print_ls(acc.t, acc.all, r.json,
                        "No streams defined (add one with 'keel stream add')");
    }
    cli_table_destroy(acc.t);
    json_decref(acc.all);
    cli_js_end(&r);
    return rv;
}

static void print_deleted(const json_t *reply, const struct cli_js_run *r)
{
    (void)reply;
    printf("Stream %s deleted\n", r->args.items[0]);
}

/* info and rm: one stream name and a --json flag (rm: --force); the
 * row's name says which. */
static int stream_info_rm(const struct cli_cmd *cmd, int argc, char **argv,
                          char *errmsg)
{
    static const struct cli_js_info_rm how = {
        "STREAM", "delete stream",
        "rm: do not ask (needed when stdin is not a terminal)", print_info,
        print_deleted};
    return cli_js_info_rm(cmd, argc, argv, &how, errmsg);
}

static void print_purged(const json_t *reply, const struct cli_js_run *r)
{
    char n[32];
    cli_js_count(reply, "purged", n, sizeof n);
    printf("Purged %s messages from %s\n", n, r->args.items[0]);
}

static int stream_purge(const struct cli_cmd *cmd, int argc, char **argv,
                        char *errmsg)
{
    struct cli_js_run r = {0}; /* ended even when never started */
    json_t *body = json_object();
    const char *subject = NULL;
    int64_t seq = -1, keep = -1;
    bool force = false;
    struct cli_flag flags[] = {
        {"subject", 0, CLI_FLAG_STR, &subject, "SUBJECT",
         "purge only messages on SUBJECT"},
        {"seq", 0, CLI_FLAG_INT, &seq, "N", "purge messages below seq N"},
        {"keep", 0, CLI_FLAG_INT, &keep, "N", "keep the newest N messages"},
        {"force", 'f', CLI_FLAG_BOOL, &force, NULL, "do not ask"},
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    char api[CLI_SUBJECT_BYTES_MAX];
    int rv = body == NULL ? KEEL_ENOMEM
                          : cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || r.help) {
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
        rv = cli_confirm("purge stream", r.args.items[0], errmsg);
    }
    char *text = rv == 0 ? json_dumps(body, JSON_COMPACT) : NULL;
    snprintf(api, sizeof api, "STREAM.PURGE.%s", r.args.items[0]);
    if (rv == 0) {
        rv = text == NULL
                 ? KEEL_ENOMEM
                 : cli_js_show(&r, cmd->name, api, text, print_purged, errmsg);
    }
    free(text);
out:
    json_decref(body);
    cli_js_end(&r);
    return rv;
}

CLI_SUBCMD_GROUP(cli_stream, "stream", STREAM_VERBS)
