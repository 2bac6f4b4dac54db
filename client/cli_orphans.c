/* keel cluster orphans ls|rm|restore: the data docs/design.md §5 keeps in
 * <data>/js/quarantine/orphans/ (group directories the metadata does not
 * name). ls asks every node ($KEEL.API.ORPHANS.LIST); rm and restore go
 * to the one node holding the orphan ($KEEL.API.ORPHANS.RM.<node>,
 * .RESTORE.<node>), found by ls when --node is not given. rm deletes for
 * good (asks first); restore moves the directory back to groups/<hex>,
 * where the stream whose group it is finds it after a restart.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_cluster.h"
#include "cli_js.h"
#include "cli_verbs.h"
#include "cli_stream_cfg.h"

#define LIST_SUBJECT "$KEEL.API.ORPHANS.LIST"

/* ls, rm and restore take the same flags. */
struct orphan_opts {
    struct cli_js_run r;
    const char *node;
    bool force;
};

static int start(const struct cli_cmd *cmd, struct orphan_opts *o, int argc,
                 char **argv, char *errmsg)
{
    struct cli_flag flags[] = {
        {"json", 0, CLI_FLAG_BOOL, &o->r.json, NULL, "print the API replies"},
        {"node", 0, CLI_FLAG_STR, &o->node, "NAME",
         "rm/restore: the node holding the orphan (default: found by ls)"},
        {"force", 'f', CLI_FLAG_BOOL, &o->force, NULL,
         "rm: do not ask (needed when stdin is not a terminal)"},
        CLI_FLAG_END,
    };
    o->node = NULL;
    o->force = false;
    return cli_js_start(&o->r, cmd, flags, argc, argv, errmsg);
}

static void print_list(const json_t *replies, const json_t *missing)
{
    static const char *const heads[] = {"Node", "Orphan", ">Size", ">Files",
                                        "Moved"};
    struct cli_table t;
    size_t i, k, total = 0;
    const json_t *r, *e;
    if (cli_table_init(&t, 5, heads) != 0) {
        return;
    }
    json_array_foreach(replies, i, r)
    {
        json_array_foreach(json_object_get(r, "orphans"), k, e)
        {
            char size[32], files[32], moved[32] = "-";
            time_t ts = (time_t)cli_js_int(e, "moved_unix", 0);
            struct tm tm;
            cli_js_bytes(e, "bytes", size, sizeof size);
            cli_js_count(e, "files", files, sizeof files);
            if (ts > 0 && gmtime_r(&ts, &tm) != NULL) {
                strftime(moved, sizeof moved, "%Y-%m-%dT%H:%M:%SZ", &tm);
            }
            const char *cells[] = {cli_js_str(r, "server", "?"),
                                   cli_js_str(e, "name", "?"), size, files,
                                   moved};
            (void)cli_table_add(&t, cells);
            total++;
        }
    }
    if (total == 0) {
        printf("No orphans on %zu node(s).\n", json_array_size(replies));
    } else {
        cli_table_print(&t, stdout, cli_color(stdout));
        printf("\nInspect one with 'keel store dump' on a copy, then 'keel "
               "cluster orphans restore|rm NAME'.\n");
    }
    json_array_foreach(missing, i, e)
    {
        fprintf(stderr,
                "keel: node %s did not answer (its orphans are not "
                "listed)\n",
                json_string_value(e));
    }
    cli_table_free(&t);
}

static int orphans_ls(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg)
{
    struct orphan_opts o;
    json_t *replies = NULL, *missing = NULL;
    int rv = start(cmd, &o, argc, argv, errmsg);
    if (rv == 0 && !o.r.help) {
        rv = cli_cluster_gather(o.r.nc, LIST_SUBJECT, o.r.conn.timeout_ms,
                                &replies, &missing, errmsg);
    }
    if (rv == 0 && !o.r.help) {
        if (o.r.json) {
            cli_cluster_print_json(replies, missing);
        } else {
            print_list(replies, missing);
        }
    }
    json_decref(replies);
    json_decref(missing);
    cli_js_end(&o.r);
    return rv;
}

/* The node holding orphan name (ls on every node). Returns 0 with node
 * filled, KEEL_ENOENT or KEEL_EUSAGE (on several nodes). */
static int find_node(natsConnection *nc, int64_t timeout_ms, const char *name,
                     char *node, size_t len, char *errmsg)
{
    json_t *replies = NULL, *missing = NULL;
    int rv = cli_cluster_gather(nc, LIST_SUBJECT, timeout_ms, &replies,
                                &missing, errmsg);
    size_t i, k, found = 0;
    const json_t *r, *e;
    json_array_foreach(replies, i, r)
    {
        json_array_foreach(json_object_get(r, "orphans"), k, e)
        {
            if (strcmp(cli_js_str(e, "name", ""), name) == 0) {
                snprintf(node, len, "%s", cli_js_str(r, "server", ""));
                found++;
            }
        }
    }
    if (rv == 0 && found == 0) {
        rv = keel_err(
            KEEL_ENOENT, errmsg,
            "no node holds orphan %s%s: list them with 'keel "
            "cluster orphans ls'",
            name,
            json_array_size(missing) > 0 ? " (some nodes did not answer)" : "");
    } else if (rv == 0 && found > 1) {
        rv = keel_err(KEEL_EUSAGE, errmsg,
                      "%zu nodes hold an orphan %s: say which with --node",
                      found, name);
    }
    json_decref(replies);
    json_decref(missing);
    return rv;
}

/* rm and restore: the row's name says which. */
static int rm_restore(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg)
{
    bool restore = strcmp(cmd->name, "cluster orphans restore") == 0;
    struct orphan_opts o;
    json_t *body = NULL;
    char node[256];
    char subject[CLI_SUBJECT_BYTES_MAX];
    char *text = NULL;
    int rv = start(cmd, &o, argc, argv, errmsg);
    if (rv != 0 || o.r.help) {
        goto out;
    }
    const char *name = o.r.args.items[0];
    if (o.node != NULL) {
        snprintf(node, sizeof node, "%s", o.node);
    } else {
        rv = find_node(o.r.nc, o.r.conn.timeout_ms, name, node, sizeof node,
                       errmsg);
    }
    if (rv == 0 && !restore && !o.force) {
        char what[300];
        snprintf(what, sizeof what, "delete for good, on node %s, orphan",
                 node);
        rv = cli_confirm(what, name, errmsg);
    }
    if (rv != 0) {
        goto out;
    }
    snprintf(subject, sizeof subject, "$KEEL.API.ORPHANS.%s.%s",
             restore ? "RESTORE" : "RM", node);
    body = json_pack("{s:s}", "name", name);
    text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
    if (text == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "request body");
        goto out;
    }
    rv = cli_js_request(o.r.nc, o.r.conn.timeout_ms, cmd->name, subject, text,
                        &o.r.reply, NULL, errmsg);
    if (rv == 0 && o.r.json) {
        cli_js_print_json(o.r.reply);
    } else if (rv == 0) {
        printf("%s: %s\n", node, cli_js_str(o.r.reply, "result", "done"));
    }
out:
    free(text);
    json_decref(body);
    cli_js_end(&o.r);
    return rv;
}

CLI_SUBCMD_GROUP(cli_cluster_orphans, "cluster orphans", ORPHANS_VERBS)
