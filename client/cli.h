/* keel: the command-line client. Shared declarations for the command table,
 * the flag parser and the connection helpers every command uses.
 *
 * Every command function returns 0, KEEL_EUSAGE (the dispatcher exits 2) or
 * another KEEL_E* code (exit 1), and fills errmsg with a one-line message
 * that tells the user what to do next.
 */
#ifndef KEEL_CLI_H
#define KEEL_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include <nats/nats.h>

#include "keel/error.h"
#include "keel/limits.h"

/* Connection flags shared by every command, spelled as the nats CLI spells
 * them. The strings point into argv or the environment; nothing is owned.
 */
struct cli_conn_opts {
    const char *servers; /* comma list; NULL: $NATS_URL, then the default */
    const char *user;
    const char *password;
    const char *creds;   /* NATS credentials file (JWT + NKey seed) */
    const char *tlscert; /* client certificate (with tlskey) */
    const char *tlskey;
    const char *tlsca; /* CA bundle that signed the server's certificate */
    int64_t timeout_ms;
};

enum cli_flag_kind {
    CLI_FLAG_BOOL,     /* bool *; takes no value */
    CLI_FLAG_STR,      /* const char **; */
    CLI_FLAG_INT,      /* int64_t *; a count >= 0 */
    CLI_FLAG_SIZE,     /* int64_t *; bytes, with an optional K/KiB/M/MiB */
    CLI_FLAG_DURATION, /* int64_t * in ms; "500ms", "5s", "2m" or seconds */
    CLI_FLAG_LIST,     /* struct cli_list *; repeatable */
};

struct cli_list {
    const char *items[CLI_LIST_ITEMS_MAX];
    int count;
};

/* One row of a command's flag table. A table ends with a row whose name is
 * NULL. `arg` names the value in --help ("N", "BYTES"); NULL for bools.
 */
struct cli_flag {
    const char *name;
    char short_name;
    enum cli_flag_kind kind;
    void *dst;
    const char *arg;
    const char *help;
};

/* The row that ends every flag table. */
#define CLI_FLAG_END                                                           \
    {                                                                          \
        NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL                               \
    }

/* Positional arguments left after flags, in order. */
struct cli_args {
    char *items[CLI_ARGS_MAX];
    int count;
};

struct cli_cmd;

/* A command handler: argv[0] is the command name. */
typedef int (*cli_cmd_fn)(const struct cli_cmd *cmd, int argc, char **argv,
                          char *errmsg);

/* One row of the command table in cli_main.c. */
struct cli_cmd {
    const char *name;
    cli_cmd_fn fn;
    const char *usage;   /* positional arguments, e.g. "SUBJECT [BODY]" */
    const char *summary; /* one line for `keel --help` */
    int args_min;
    int args_max;
};

/* Parse argv[1..argc) of `cmd` against its `flags` and the common connection
 * flags (written to `conn`, which the caller initialised with
 * cli_conn_opts_init). Positionals go to `args`. On --help prints the
 * command's help to stdout and sets *help_shown. Returns 0 or KEEL_EUSAGE
 * with errmsg naming the bad flag or value.
 */
int cli_parse(const struct cli_cmd *cmd, const struct cli_flag *flags,
              struct cli_conn_opts *conn, int argc, char **argv,
              struct cli_args *args, bool *help_shown, char *errmsg);

/* NATS users type connection flags before the command (`keel -s URL stream
 * ls`). Move the connection flags (and their values) that lead argv[1..]
 * behind the command words that follow them, before any "--", so the
 * command's own parser reads them. argv[0] is not moved. *hoisted is how
 * many words moved; when it is argc - 1 no command followed them. Returns 0
 * or KEEL_EUSAGE (a connection flag without its value).
 */
int cli_hoist_conn_flags(int argc, char **argv, int *hoisted, char *errmsg);

/* Defaults: servers NULL, no auth, CLI_TIMEOUT_MS_DEFAULT. */
void cli_conn_opts_init(struct cli_conn_opts *conn);

/* Parse one flag value of `kind` into `dst`. Returns 0 or KEEL_EUSAGE. */
int cli_parse_value(enum cli_flag_kind kind, const char *name,
                    const char *value, void *dst, char *errmsg);

/* Build libnats options from `conn`: servers (comma list, else $NATS_URL,
 * else nats://127.0.0.1:4222), user/password, connect timeout. The caller
 * owns *out (natsOptions_Destroy) and may tune it before cli_connect.
 * Returns 0, KEEL_EUSAGE for a bad server list, or KEEL_ENOMEM.
 */
int cli_options_create(const struct cli_conn_opts *conn, natsOptions **out,
                       char *errmsg);

/* Connect with `opts`. On failure errmsg says which servers were tried, why
 * it failed, and what to do ("is keeld running?"). Returns 0, KEEL_ECONN or
 * KEEL_EAUTH. The caller owns *nc (natsConnection_Destroy).
 */
int cli_connect(const struct cli_conn_opts *conn, natsOptions *opts,
                natsConnection **nc, char *errmsg);

/* Shorthand: cli_options_create + cli_connect with no tuning. */
int cli_connect_default(const struct cli_conn_opts *conn, natsConnection **nc,
                        char *errmsg);

/* Map a libnats status to a KEEL_E* code and a message that starts with
 * `what` ("publish to foo") and ends with the library's own last error.
 */
int cli_nats_err(natsStatus s, char *errmsg, const char *what);

/* KEEL_EPERM with a sentence when the server refused something on nc with
 * a permissions violation (the connection's last error), else 0. Call it
 * after a flush or a timed-out request. */
int cli_perm_err(natsConnection *nc, const char *what, char *errmsg);

/* 0, or KEEL_EUSAGE saying why `subject` cannot be used: empty, white space,
 * an empty token, or a wildcard where !wildcards_ok (publishing). */
int cli_subject_check(const char *subject, bool wildcards_ok, char *errmsg);

/* Split a flag value "Key<sep>Value" (-H 'Key:Value', --metadata
 * key=value): the key into key (cap bytes), *value after sep and its
 * leading spaces. KEEL_EUSAGE naming flag and the form when the key is
 * empty or too long. */
int cli_pair_split(const char *item, char sep, const char *flag, char *key,
                   size_t cap, const char **value, char *errmsg);

/* Command handlers (one file per group). */
int cli_pub(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
int cli_req(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
int cli_sub(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
int cli_reply(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
int cli_bench(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
/* keel bench js pub SUBJECT (cli_bench_js.c): argv[0] is "js". cmd is the
 * bench's own row (cli_bench.c), as for cli_bench_kv and
 * cli_bench_js_consume. */
int cli_bench_js(const struct cli_cmd *cmd, int argc, char **argv,
                 char *errmsg);
/* keel bench kv put|get BUCKET (cli_bench_kv.c): argv[0] is "kv". */
int cli_bench_kv(const struct cli_cmd *cmd, int argc, char **argv,
                 char *errmsg);
/* keel bench js fetch|push SUBJECT (cli_bench_js_consume.c): argv[0] is
 * "js", the mode is the first positional argument. */
int cli_bench_js_consume(const struct cli_cmd *cmd, int argc, char **argv,
                         char *errmsg);

#endif
