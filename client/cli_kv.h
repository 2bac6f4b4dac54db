/* cli_kv: keel kv — Key/Value buckets over libnats' kvStore API, with the
 * nats CLI's verbs, arguments and main flags.
 */
#ifndef KEEL_CLI_KV_H
#define KEEL_CLI_KV_H

#include <nats/nats.h>

#include "cli_js.h"

/* An open bucket: the run (flags, arguments, connection), its JetStream
 * context and the store. cli_kv_close releases whatever cli_kv_open set;
 * fields may be NULL. */
struct cli_kv {
    struct cli_js_run r;
    jsCtx *js;
    kvStore *kv;
};

/* Parse argv against flags and connect (cli_js_start) and, when bind,
 * bind to the bucket r.args.items[0]. A missing bucket is KEEL_ENOENT
 * with a sentence naming 'keel kv ls' / 'keel kv add'. On --help sets
 * k->r.help and opens nothing. Always call cli_kv_close. */
int cli_kv_open(struct cli_kv *k, const struct cli_cmd *cmd,
                const struct cli_flag *flags, int argc, char **argv, bool bind,
                char *errmsg);

void cli_kv_close(struct cli_kv *k);

/* libnats' last error text without its source-file prefix ("" if none). */
const char *cli_kv_last_error(void);

/* The libnats error of a kv call as a sentence: what failed, the library's
 * last error; a missing key says how to list the keys. */
int cli_kv_err(natsStatus s, const char *what, const char *key, char *errmsg);

/* kv add and kv ls|info (cli_kv.c); argv[0] is the verb. */
int cli_kv_add(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);
int cli_kv_ls(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);

/* keel kv ... (the command table: cli_kv_key.c). */
int cli_kv(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);

#endif
