/* cli_js: what the keel stream / consumer / backup commands share — the
 * JetStream API request helper (docs/protocol.md §2) and sub-command dispatch.
 */
#ifndef KEEL_CLI_JS_H
#define KEEL_CLI_JS_H

#include <jansson.h>
#include <nats/nats.h>

#include "cli.h"
#include "cli_fmt.h"

/* One sub-command ("stream add"): the row cli_parse and --help use. */
struct cli_subcmd {
    struct cli_cmd cmd; /* cmd.name is the full "stream add" */
    cli_cmd_fn fn;
};

/* Find argv[1] among subs (n rows) and run it with argv shifted by one
 * (its argv[0] is the sub-command). With no or an unknown sub-command,
 * prints the list and returns KEEL_EUSAGE. */
int cli_subcmd_dispatch(const char *group, const struct cli_subcmd *subs,
                        size_t n, int argc, char **argv, char *errmsg);

/* One row of a list in cli_verbs.h as a struct cli_subcmd. */
#define CLI_SUBCMD_ROW(name, usage, min, max, fn, help)                        \
    {{name, NULL, usage, help, min, max}, fn},

/* The command fn of a group ("stream") with its sub-command table
 * fn##_subs made of the rows that follow (struct cli_subcmd rows): fn
 * finds argv[1] there (cli_subcmd_dispatch). */
#define CLI_SUBCMD_TABLE(fn, group, ...)                                       \
    static const struct cli_subcmd fn##_subs[] = {__VA_ARGS__};                \
    int fn(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)     \
    {                                                                          \
        (void)cmd;                                                             \
        return cli_subcmd_dispatch(group, fn##_subs,                           \
                                   sizeof fn##_subs / sizeof fn##_subs[0],     \
                                   argc, argv, errmsg);                        \
    }

/* The command fn of a group ("stream") with its sub-command table made
 * from VERBS (cli_verbs.h). Expand it where VERBS's handlers are
 * declared. */
#define CLI_SUBCMD_GROUP(fn, group, VERBS)                                     \
    CLI_SUBCMD_TABLE(fn, group, VERBS(CLI_SUBCMD_ROW))

/* A group whose verbs share one flag table (keel kv, keel object) lists
 * them once, VERBS(X), a row X(name, usage, args_min, args_max, flags,
 * bind, run, help); flags are the group's bits choosing rows of its flag
 * table, bind whether the verb needs its bucket to exist, run the
 * function that runs the verb on the group's context once it is open.
 * CLI_VERB_GROUP(fn, group, VERBS, ctx, flags_max, setup, open, close)
 * makes the group's command fn, whose every sub-command runs the one
 * runner cli_verb_run (so one group a file): a ctx c zeroed, setup(&c,
 * flags, out) sets its defaults and picks the verb's flags into out
 * (flags_max rows, cli_flags_pick), open(&c, cmd, out, argc, argv, bind,
 * errmsg) parses and connects, run(&c, errmsg) unless --help, and
 * close(&c) releases whatever open reached. */
#define CLI_VERB_SUBCMD(name, usage, min, max, flags, bind, run, help)         \
    {{name, NULL, usage, help, min, max}, cli_verb_run},
#define CLI_VERB_ROW(name, usage, min, max, flags, bind, run, help)            \
    {flags, bind, run},
#define CLI_VERB_GROUP(fn, group, VERBS, ctx, flags_max, setup, open, close)   \
    static int cli_verb_run(const struct cli_cmd *cmd, int argc, char **argv,  \
                            char *errmsg);                                     \
    CLI_SUBCMD_TABLE(fn, group, VERBS(CLI_VERB_SUBCMD))                        \
    static const struct {                                                      \
        unsigned flags;                                                        \
        bool bind;                                                             \
        int (*run)(ctx * c, char *errmsg);                                     \
    } cli_verbs[] = {VERBS(CLI_VERB_ROW)};                                     \
    static int cli_verb_run(const struct cli_cmd *cmd, int argc, char **argv,  \
                            char *errmsg)                                      \
    {                                                                          \
        size_t i = cli_subcmd_index(cmd, fn##_subs,                            \
                                    sizeof fn##_subs / sizeof fn##_subs[0]);   \
        ctx c = {0};                                                           \
        struct cli_flag flags[flags_max];                                      \
        setup(&c, cli_verbs[i].flags, flags);                                  \
        int rv = open(&c, cmd, flags, argc, argv, cli_verbs[i].bind, errmsg);  \
        if (rv == 0 && !c.r.help) {                                            \
            rv = cli_verbs[i].run(&c, errmsg);                                 \
        }                                                                      \
        close(&c);                                                             \
        return rv;                                                             \
    }

/* Which row of subs (n rows) cmd is: a CLI_VERB_GROUP's runner gets
 * &subs[i].cmd, the first member of subs[i]. */
size_t cli_subcmd_index(const struct cli_cmd *cmd,
                        const struct cli_subcmd *subs, size_t n);

/* Copy into out (out_max rows) the rows of all (n rows) whose bit[i] has
 * a bit of want, in all's order (the order --help lists them), and the
 * CLI_FLAG_END row. */
void cli_flags_pick(const struct cli_flag *all, const unsigned *bit, size_t n,
                    unsigned want, struct cli_flag *out, size_t out_max);

/* What a JetStream sub-command holds from its parse to its exit: its
 * connection flags, positional arguments and connection, and the API
 * reply it prints. The command's flag table may point a --json row at
 * json. cli_js_end releases what the run holds, whatever it reached. */
struct cli_js_run {
    struct cli_conn_opts conn;
    struct cli_args args;
    natsConnection *nc; /* NULL until cli_js_connect */
    json_t *reply;      /* the reply cli_js_show printed */
    bool help;          /* --help was printed: the command is done */
    bool json;
};

/* Clear r and parse argv against flags (positionals into r->args;
 * --help prints and sets r->help). Returns 0 or the cli_parse error. */
int cli_js_parse(struct cli_js_run *r, const struct cli_cmd *cmd,
                 const struct cli_flag *flags, int argc, char **argv,
                 char *errmsg);

/* Connect r with its connection flags. Returns 0 or the cli_connect
 * error. */
int cli_js_connect(struct cli_js_run *r, char *errmsg);

/* The start of most sub-commands: cli_js_parse, then (unless --help)
 * cli_js_connect. Returns 0 or their error. */
int cli_js_start(struct cli_js_run *r, const struct cli_cmd *cmd,
                 const struct cli_flag *flags, int argc, char **argv,
                 char *errmsg);

void cli_js_end(struct cli_js_run *r);

/* Prints a reply in human form; r gives the command's arguments. */
typedef void (*cli_js_print_fn)(const json_t *reply,
                                const struct cli_js_run *r);

/* One request on r's connection (cli_js_request: what, api, body) and
 * its reply printed: the API's own JSON with --json, else print(reply,
 * r). r->reply keeps the reply until cli_js_end. Returns 0 or the
 * request's error (nothing printed). */
int cli_js_show(struct cli_js_run *r, const char *what, const char *api,
                const char *body, cli_js_print_fn print, char *errmsg);

/* The info and rm sub-commands of a JetStream object (stream, consumer):
 * api ("STREAM") and the command's arguments (the object's names) make
 * the request's subject, "STREAM.INFO.<name>" or "STREAM.DELETE.<name>";
 * rm (the command's name ends in " rm") first asks "<ask> <last name>?"
 * unless --force (help: force_help). The reply printed by info or
 * deleted, or with --json as it came. */
struct cli_js_info_rm {
    const char *api;
    const char *ask;
    const char *force_help;
    cli_js_print_fn info;
    cli_js_print_fn deleted;
};

/* Run an info or rm command (cmd, argv) as how says. Returns 0 or the
 * parse, connect, confirmation or request error. */
int cli_js_info_rm(const struct cli_cmd *cmd, int argc, char **argv,
                   const struct cli_js_info_rm *how, char *errmsg);

/* Send a JetStream API request: subject is "$JS.API." + api (e.g.
 * "STREAM.INFO.ORDERS"; an api starting with '$' is the whole subject, as
 * "$KEEL.API.CLUSTER.PEER.ADD"), body may be NULL (empty). On success *out (may
 * be NULL) owns the parsed reply and *raw (may be NULL) the reply text
 * (free()). An API error returns KEEL_ENOENT (404) or KEEL_EIO with
 * errmsg "<what>: <description> (error <err_code>)"; a timeout says that
 * JetStream may be off ("start keeld with -sd DIR").
 */
int cli_js_request(natsConnection *nc, int64_t timeout_ms, const char *what,
                   const char *api, const char *body, json_t **out, char **raw,
                   char *errmsg);

/* A JetStream context on nc for async publishing: at most window publishes
 * unacknowledged, each ack (or its error) reported to ack_cb(closure).
 * wait_ms bounds an API call, stall_ms a publish blocked on the window.
 * The caller owns *js (jsCtx_Destroy). Returns 0 or the libnats error. */
int cli_js_ctx_async(natsConnection *nc, int64_t wait_ms, int64_t stall_ms,
                     int64_t window, jsPubAckHandler ack_cb, void *closure,
                     jsCtx **js, char *errmsg);

/* Called with each page (the "streams" array) of STREAM.LIST; return
 * non-zero to stop with that code. */
typedef int (*cli_js_page_cb)(const json_t *streams, void *arg);

/* Page through STREAM.LIST (at most CLI_JS_PAGES_MAX pages), calling cb
 * with each page's stream infos. Returns 0, cb's code or the request's. */
int cli_js_stream_pages(natsConnection *nc, int64_t timeout_ms,
                        const char *what, cli_js_page_cb cb, void *arg,
                        char *errmsg);

/* Fill the cells of one ls row from item (a stream's or consumer's
 * info); a cell the function makes (a number, a list) goes into text[i]
 * (CLI_TABLE_CELL_BYTES each, CLI_TABLE_COLS_MAX of them). */
typedef void (*cli_js_row_fn)(const json_t *item, const char **cells,
                              char (*text)[CLI_TABLE_CELL_BYTES]);

/* One row of t per element of list, its cells made by row. Returns 0 or
 * KEEL_ENOMEM. */
int cli_js_rows(struct cli_table *t, const json_t *list, cli_js_row_fn row);

/* Print JSON o to stdout, indented (the --json output). */
void cli_js_print_json(const json_t *o);

/* The end of an ls: with json the gathered API objects all, else the line
 * none when t has no rows, else t. */
void cli_js_print_ls(const struct cli_table *t, const json_t *all, bool json,
                     const char *none);

/* An int64 member of o, or dflt when absent. */
int64_t cli_js_int(const json_t *o, const char *key, int64_t dflt);

/* A string member of o, or dflt. */
const char *cli_js_str(const json_t *o, const char *key, const char *dflt);

/* An int64 member of o (0 when absent) as a count with thousands
 * separators (cli_fmt_count) or a size in human units (cli_fmt_bytes),
 * into buf (len bytes). Returns buf, for a table row's cell. */
const char *cli_js_count(const json_t *o, const char *key, char *buf,
                         size_t len);
const char *cli_js_bytes(const json_t *o, const char *key, char *buf,
                         size_t len);

/* The stream sequence, stored time and pending count of a delivered
 * message, from its $JS.ACK reply subject (docs/protocol.md §2.7). Returns 0 or
 * KEEL_EPROTO. */
int cli_js_ack_meta(const char *reply, uint64_t *sseq, int64_t *ts_ns,
                    uint64_t *pending);

/* Called for each message a pull delivers; return non-zero to stop. */
typedef int (*cli_pull_cb)(natsMsg *m, void *arg, char *errmsg);

/* One pull request (docs/protocol.md §2.8) for up to batch messages of a pull
 * consumer, expiring after expires_ms: cb gets each message in order; ends
 * at batch, a status (404/408/409) or a silent timeout. *got counts the
 * messages. Returns 0, cb's error, or a KEEL_E* from the connection. */
int cli_js_pull(natsConnection *nc, const char *stream, const char *consumer,
                int64_t batch, int64_t expires_ms, cli_pull_cb cb, void *arg,
                int64_t *got, char *errmsg);

/* base64 (standard or URL alphabet, padding optional) into out (cap
 * bytes). Returns 0, KEEL_EPROTO (bad character) or KEEL_ETOOBIG. */
int cli_b64_decode(const char *in, unsigned char *out, size_t cap, size_t *len);

/* keel consumer next STREAM NAME (cli_consumer_next.c). */
int cli_consumer_next(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg);

/* Command handlers. */
int cli_stream(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
int cli_consumer(const struct cli_cmd *cmd, int argc, char **argv,
                 char *errmsg);
/* keel cluster ... (cli_cluster.c). */
int cli_cluster(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
/* stream backup / restore (cli_backup.c); argv[0] is the sub-command. */
int cli_stream_backup(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg);
int cli_stream_restore(const struct cli_cmd *cmd, int argc, char **argv,
                       char *errmsg);

#endif
