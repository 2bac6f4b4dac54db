/* cli_kv: keel kv — Key/Value buckets over libnats' kvStore API, with the
 * nats CLI's verbs, arguments and main flags.
 */
#ifndef KEEL_CLI_KV_H
#define KEEL_CLI_KV_H

#include <nats/nats.h>

#include "cli_js.h"

/* The values of every kv verb's flags (kv_setup in cli_kv_key.c picks the
 * rows a verb takes; the defaults are set there). */
struct cli_kv_opts {
    int64_t history;   /* add */
    int64_t ttl_ms;    /* add */
    int64_t max_value; /* add: -1 unlimited */
    int64_t max_bytes; /* add: -1 unlimited */
    int64_t replicas;  /* add */
    const char *storage;
    const char *description;
    bool raw;         /* get */
    int64_t revision; /* get: 0 the latest */
    bool force;       /* del, purge, rm */
    int64_t count;    /* watch: 0 until ^C */
};

/* An open bucket: the verb's row, the run (flags, arguments, connection),
 * its JetStream context and the store. The kv runner (CLI_VERB_GROUP in
 * cli_kv_key.c) opens it (cli_kv_open) when the flags parsed, runs the
 * verb and releases whatever was set; fields may be NULL. */
struct cli_kv {
    const struct cli_cmd *cmd; /* cmd->name is the full "kv put" */
    struct cli_kv_opts opt;
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

/* kv add and kv ls|info (cli_kv.c), on a bucket the kv runner opened. */
int cli_kv_add(struct cli_kv *k, char *errmsg);
int cli_kv_ls(struct cli_kv *k, char *errmsg);

/* keel kv ... (the command table: cli_kv_key.c). */
int cli_kv(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);

#endif
