/* keel consumer add|ls|info|rm|next (docs/protocol.md §2.6-2.8). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_js.h"
#include "cli_verbs.h"
#include "cli_stream_cfg.h"

struct cons_flags {
    const char *deliver; /* push: deliver subject */
    const char *filter;
    const char *ack;
    const char *policy;
    const char *ack_wait;
    int64_t start_seq, max_deliver, max_ack_pending;
    bool json, force;
};

static void print_info(const json_t *info, const struct cli_js_run *r)
{
    (void)r;
    const json_t *cfg = json_object_get(info, "config");
    const json_t *del = json_object_get(info, "delivered");
    const json_t *fl = json_object_get(info, "ack_floor");
    char n[32], w[32]; /* n: each line's number, printed before the next */
    cli_fmt_duration_ns(cli_js_int(cfg, "ack_wait", 0), w, sizeof w);
    const char *ds = cli_js_str(cfg, "deliver_subject", NULL);
    printf("Consumer %s on stream %s (created %s)\n\n",
           cli_js_str(info, "name", "?"), cli_js_str(info, "stream_name", "?"),
           cli_js_str(info, "created", "?"));
    printf("Configuration:\n");
    printf("  %-18s %s\n", "Mode:", ds != NULL ? "push" : "pull");
    if (ds != NULL) {
        printf("  %-18s %s\n", "Deliver Subject:", ds);
    }
    printf("  %-18s %s\n", "Filter:", cli_js_str(cfg, "filter_subject", "-"));
    printf("  %-18s %s\n",
           "Deliver Policy:", cli_js_str(cfg, "deliver_policy", "?"));
    printf("  %-18s %s\n", "Ack Policy:", cli_js_str(cfg, "ack_policy", "?"));
    printf("  %-18s %s\n\n", "Ack Wait:", w);
    printf("State:\n");
    printf("  %-18s %s\n",
           "Last Delivered:", cli_js_count(del, "stream_seq", n, sizeof n));
    printf("  %-18s %s\n",
           "Ack Floor:", cli_js_count(fl, "stream_seq", n, sizeof n));
    printf("  %-18s %s\n",
           "Unprocessed:", cli_js_count(info, "num_pending", n, sizeof n));
    printf("  %-18s %s\n",
           "Ack Pending:", cli_js_count(info, "num_ack_pending", n, sizeof n));
}

static int build_cfg(const struct cons_flags *cf, const char *stream,
                     const char *name, char **body, char *errmsg)
{
    json_t *cfg =
        json_pack("{s:s, s:s, s:s}", "durable_name", name, "ack_policy",
                  cf->ack, "deliver_policy", cf->policy);
    int rv = cfg == NULL ? KEEL_ENOMEM : 0;
    if (rv == 0 && cf->deliver != NULL) {
        json_object_set_new(cfg, "deliver_subject", json_string(cf->deliver));
    }
    if (rv == 0 && cf->filter != NULL) {
        json_object_set_new(cfg, "filter_subject", json_string(cf->filter));
    }
    if (rv == 0 && cf->start_seq > 0) {
        json_object_set_new(cfg, "opt_start_seq", json_integer(cf->start_seq));
    }
    if (rv == 0 && cf->max_deliver > 0) {
        json_object_set_new(cfg, "max_deliver", json_integer(cf->max_deliver));
    }
    if (rv == 0 && cf->max_ack_pending > 0) {
        json_object_set_new(cfg, "max_ack_pending",
                            json_integer(cf->max_ack_pending));
    }
    if (rv == 0 && cf->ack_wait != NULL) {
        int64_t ns = 0;
        rv = cli_parse_duration_ns("ack-wait", cf->ack_wait, &ns, errmsg);
        json_object_set_new(cfg, "ack_wait", json_integer(ns));
    }
    json_t *req =
        rv == 0 ? json_pack("{s:s, s:o}", "stream_name", stream, "config", cfg)
                : NULL;
    if (rv == 0 && req == NULL) {
        rv = KEEL_ENOMEM;
    } else if (rv != 0) {
        json_decref(cfg);
    }
    *body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    return rv == 0 && *body == NULL ? KEEL_ENOMEM : rv;
}

static int cons_add(const struct cli_cmd *cmd, int argc, char **argv,
                    char *errmsg)
{
    struct cli_js_run r;
    struct cons_flags cf = {.ack = "explicit", .policy = "all"};
    struct cli_flag flags[] = {
        {"deliver", 0, CLI_FLAG_STR, &cf.deliver, "SUBJECT",
         "push consumer delivering to SUBJECT (default: pull)"},
        {"filter", 0, CLI_FLAG_STR, &cf.filter, "SUBJECT",
         "only messages on SUBJECT"},
        {"ack", 0, CLI_FLAG_STR, &cf.ack, "POLICY",
         "explicit (default), all or none"},
        {"deliver-policy", 0, CLI_FLAG_STR, &cf.policy, "POLICY",
         "all (default), last, new, by_start_sequence"},
        {"start-seq", 0, CLI_FLAG_INT, &cf.start_seq, "N",
         "first sequence (with by_start_sequence)"},
        {"max-deliver", 0, CLI_FLAG_INT, &cf.max_deliver, "N",
         "deliveries per message (default unlimited)"},
        {"max-ack-pending", 0, CLI_FLAG_INT, &cf.max_ack_pending, "N",
         "unacknowledged messages in flight (default 1000)"},
        {"ack-wait", 0, CLI_FLAG_STR, &cf.ack_wait, "DURATION",
         "redeliver after this long without an ack (default 30s)"},
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        CLI_FLAG_END,
    };
    char *body = NULL;
    char api[CLI_SUBJECT_BYTES_MAX];
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv == 0 && !r.help) {
        rv = build_cfg(&cf, r.args.items[0], r.args.items[1], &body, errmsg);
    }
    if (rv == 0 && !r.help) {
        snprintf(api, sizeof api, "CONSUMER.CREATE.%s.%s", r.args.items[0],
                 r.args.items[1]);
        rv = cli_js_show(&r, "consumer add", api, body, print_info, errmsg);
    }
    free(body);
    cli_js_end(&r);
    return rv;
}

/* cli_js_rows' row of consumer ls. */
static void ls_row(const json_t *info, const char **cells,
                   char (*text)[CLI_TABLE_CELL_BYTES])
{
    const json_t *cfg = json_object_get(info, "config");
    cells[0] = cli_js_str(info, "name", "?");
    cells[1] = json_object_get(cfg, "deliver_subject") ? "push" : "pull";
    cells[2] = cli_js_str(cfg, "ack_policy", "?");
    cells[3] = cli_js_count(json_object_get(info, "delivered"), "stream_seq",
                            text[3], sizeof text[3]);
    cells[4] = cli_js_count(info, "num_pending", text[4], sizeof text[4]);
    cells[5] = cli_js_count(info, "num_ack_pending", text[5], sizeof text[5]);
}

static int cons_ls(const struct cli_cmd *cmd, int argc, char **argv,
                   char *errmsg)
{
    static const char *const heads[] = {"Name",         "Mode",
                                        "Ack",          ">Last Delivered",
                                        ">Unprocessed", ">Ack Pending"};
    struct cli_js_run r = {0}; /* ended even when never started */
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        CLI_FLAG_END,
    };
    char api[CLI_SUBJECT_BYTES_MAX];
    char none[CLI_SUBJECT_BYTES_MAX + 64];
    struct cli_table *t = calloc(1, sizeof *t);
    int rv = t == NULL ? KEEL_ENOMEM
                       : cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv == 0 && !r.help) {
        snprintf(api, sizeof api, "CONSUMER.LIST.%s", r.args.items[0]);
        rv = cli_js_request(r.nc, r.conn.timeout_ms, "consumer ls", api, NULL,
                            &r.reply, NULL, errmsg);
    }
    if (rv == 0 && !r.help) {
        rv = cli_table_init(t, 6, heads);
    }
    const json_t *list = json_object_get(r.reply, "consumers");
    if (rv == 0 && !r.help) {
        rv = cli_js_rows(t, list, ls_row);
    }
    if (rv == 0 && !r.help) {
        snprintf(none, sizeof none,
                 "No consumers on stream %s (add one with 'keel consumer "
                 "add')",
                 r.args.items[0]);
        cli_js_print_ls(t, list, r.json, none);
    }
    cli_table_destroy(t);
    cli_js_end(&r);
    return rv;
}

static void print_deleted(const json_t *reply, const struct cli_js_run *r)
{
    (void)reply;
    printf("Consumer %s > %s deleted\n", r->args.items[0], r->args.items[1]);
}

/* info and rm: STREAM NAME; the row's name says which. */
static int cons_info_rm(const struct cli_cmd *cmd, int argc, char **argv,
                        char *errmsg)
{
    static const struct cli_js_info_rm how = {"CONSUMER", "delete consumer",
                                              "rm: do not ask", print_info,
                                              print_deleted};
    return cli_js_info_rm(cmd, argc, argv, &how, errmsg);
}

CLI_SUBCMD_GROUP(cli_consumer, "consumer", CONSUMER_VERBS)
