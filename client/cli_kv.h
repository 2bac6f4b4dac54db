/* cli_kv: keel kv — Key/Value buckets over libnats' kvStore API, with the
 * nats CLI's verbs, arguments and main flags.
 */
#ifndef KEEL_CLI_KV_H
#define KEEL_CLI_KV_H

#include <nats/nats.h>

#include "cli.h"
#include "cli_js.h"

/* An open bucket: the connection, its JetStream context and the store.
 * cli_kv_close releases whatever cli_kv_open set; fields may be NULL. */
struct cli_kv {
    natsConnection *nc;
    jsCtx *js;
    kvStore *kv;
};

/* Parse argv against flags (cli_js_start), connect and, when bucket is
 * not NULL, bind to it. A missing bucket is KEEL_ENOENT with a sentence
 * naming 'keel kv ls' / 'keel kv add'. On --help sets *help and opens
 * nothing. Always call cli_kv_close. */
int cli_kv_open(const struct cli_cmd *cmd, const struct cli_flag *flags,
                struct cli_conn_opts *conn, int argc, char **argv,
                struct cli_args *args, bool bind, struct cli_kv *out,
                bool *help, char *errmsg);

void cli_kv_close(struct cli_kv *k);

/* libnats' last error text without its source-file prefix ("" if none). */
const char *cli_kv_last_error(void);

/* The libnats error of a kv call as a sentence: what failed, the library's
 * last error; a missing key says how to list the keys. */
int cli_kv_err(natsStatus s, const char *what, const char *key, char *errmsg);

/* The verbs on keys, and kv rm (cli_kv_key.c), in --help order. */
extern const struct cli_subcmd cli_kv_key_subs[];
extern const size_t cli_kv_key_subs_count;

/* keel kv ... (cli_kv.c). */
int cli_kv(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);

#endif
