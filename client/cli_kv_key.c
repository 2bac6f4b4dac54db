/* keel kv put|get|create|update|del|purge|history|keys|watch|rm: the verbs
 * on keys of one bucket, and the kv command table, as the nats CLI spells
 * them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/assert.h"
#include "cli_js.h"
#include "cli_kv.h"
#include "cli_stream_cfg.h"

/* The value argument, or stdin when it is absent (as `nats kv put B K`).
 * *owned is the buffer to free (NULL when the value is argv's). */
static int read_value(const struct cli_args *args, int at, const char **val,
                      int *len, char **owned, char *errmsg)
{
    *owned = NULL;
    if (args->count > at) {
        *val = args->items[at];
        *len = (int)strlen(*val);
        return 0;
    }
    char *buf = malloc((size_t)CLI_BODY_BYTES_MAX + 1);
    if (buf == NULL) {
        return KEEL_ENOMEM;
    }
    size_t n = fread(buf, 1, (size_t)CLI_BODY_BYTES_MAX + 1, stdin);
    if (n > (size_t)CLI_BODY_BYTES_MAX) {
        free(buf);
        return keel_err(KEEL_ETOOBIG, errmsg,
                        "the value on stdin is over %d bytes: store large "
                        "data in an object store",
                        (int)CLI_BODY_BYTES_MAX);
    }
    *owned = buf;
    *val = buf;
    *len = (int)n;
    return 0;
}

enum put_mode { PUT_ANY, PUT_CREATE, PUT_UPDATE };

static int parse_revision(const char *text, uint64_t *rev, char *errmsg)
{
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (text[0] == '\0' || text[0] == '-' || *end != '\0' || v == 0) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "revision '%s': give the positive number 'keel kv "
                        "get' or 'keel kv history' shows",
                        text);
    }
    *rev = (uint64_t)v;
    return 0;
}

/* create and update are refused by the server's expected-last-sequence
 * check ("wrong last sequence: N", N the key's revision now). */
static int refusal(natsStatus s, const char *what, const char *key,
                   enum put_mode mode, uint64_t last, char *errmsg)
{
    const char *text = cli_kv_last_error();
    const char *seq = strstr(text, "wrong last sequence");
    if (mode == PUT_ANY || seq == NULL) {
        return cli_kv_err(s, what, key, errmsg);
    }
    const char *colon = strchr(seq, ':');
    const char *now = colon != NULL ? colon + 2 : "?";
    if (mode == PUT_CREATE) {
        return keel_err(KEEL_EEXIST, errmsg,
                        "%s: key %s already has a value (revision %s): set "
                        "it with 'keel kv put' or 'keel kv update'",
                        what, key, now);
    }
    return keel_err(KEEL_EEXIST, errmsg,
                    "%s: key %s is at revision %s, not %" PRIu64
                    ": read it with 'keel kv get' and retry",
                    what, key, now, last);
}

/* put, create and update: the row's name says which. */
static int kv_put(const struct cli_cmd *cmd, int argc, char **argv,
                  char *errmsg)
{
    enum put_mode mode = strcmp(cmd->name, "kv create") == 0   ? PUT_CREATE
                         : strcmp(cmd->name, "kv update") == 0 ? PUT_UPDATE
                                                               : PUT_ANY;
    struct cli_kv k = {0};
    char *owned = NULL;
    struct cli_flag flags[] = {CLI_FLAG_END};
    int rv = cli_kv_open(&k, cmd, flags, argc, argv, true, errmsg);
    if (rv != 0 || k.r.help) {
        goto out;
    }
    const char *key = k.r.args.items[1], *val = NULL;
    int len = 0;
    uint64_t last = 0, rev = 0;
    if (mode == PUT_UPDATE) {
        rv = parse_revision(k.r.args.items[3], &last, errmsg);
    }
    if (rv == 0) {
        rv = read_value(&k.r.args, 2, &val, &len, &owned, errmsg);
    }
    if (rv != 0) {
        goto out;
    }
    natsStatus s =
        mode == PUT_CREATE   ? kvStore_Create(&rev, k.kv, key, val, len)
        : mode == PUT_UPDATE ? kvStore_Update(&rev, k.kv, key, val, len, last)
                             : kvStore_Put(&rev, k.kv, key, val, len);
    if (s != NATS_OK) {
        rv = refusal(s, cmd->name, key, mode, last, errmsg);
        goto out;
    }
    /* The nats CLI echoes the value stored. */
    fwrite(val, 1, (size_t)len, stdout);
    printf("\n");
out:
    free(owned);
    cli_kv_close(&k);
    return rv;
}

static void fmt_time(int64_t ns, char *buf, size_t len)
{
    time_t sec = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static const char *op_name(kvOperation op)
{
    static const char *const names[] = {"?", "PUT", "DEL", "PURGE"};
    _Static_assert(kvOp_Purge == 3, "names[] follows kvOperation");
    return op >= kvOp_Put && op <= kvOp_Purge ? names[op] : names[0];
}

static int kv_get(const struct cli_cmd *cmd, int argc, char **argv,
                  char *errmsg)
{
    struct cli_kv k = {0};
    kvEntry *e = NULL;
    bool raw = false;
    int64_t revision = 0;
    struct cli_flag flags[] = {
        {"raw", 0, CLI_FLAG_BOOL, &raw, NULL, "print only the value"},
        {"revision", 0, CLI_FLAG_INT, &revision, "N",
         "the value at revision N (default the latest)"},
        CLI_FLAG_END,
    };
    int rv = cli_kv_open(&k, cmd, flags, argc, argv, true, errmsg);
    if (rv != 0 || k.r.help) {
        goto out;
    }
    const char *key = k.r.args.items[1];
    natsStatus s = revision > 0
                       ? kvStore_GetRevision(&e, k.kv, key, (uint64_t)revision)
                       : kvStore_Get(&e, k.kv, key);
    if (s != NATS_OK) {
        rv = cli_kv_err(s, "kv get", key, errmsg);
        goto out;
    }
    if (!raw) {
        char when[32];
        fmt_time(kvEntry_Created(e), when, sizeof when);
        printf("%s > %s revision: %" PRIu64 " created @ %s UTC\n\n",
               kvEntry_Bucket(e), kvEntry_Key(e), kvEntry_Revision(e), when);
    }
    fwrite(kvEntry_Value(e), 1, (size_t)kvEntry_ValueLen(e), stdout);
    printf("\n");
out:
    kvEntry_Destroy(e);
    cli_kv_close(&k);
    return rv;
}

/* del and purge leave a marker (purge also drops the key's history); rm
 * deletes the bucket. All three ask first unless --force. */
enum del_kind { DEL_KEY, PURGE_KEY, RM_BUCKET };

static natsStatus del_run(const struct cli_kv *k, const char *bucket,
                          const char *key, enum del_kind kind)
{
    switch (kind) {
    case DEL_KEY:
        return kvStore_Delete(k->kv, key);
    case PURGE_KEY:
        return kvStore_Purge(k->kv, key, NULL);
    default:
        return js_DeleteKeyValue(k->js, bucket);
    }
}

/* del, purge and rm: the row's name says which. */
static int kv_del(const struct cli_cmd *cmd, int argc, char **argv,
                  char *errmsg)
{
    enum del_kind kind = strcmp(cmd->name, "kv purge") == 0 ? PURGE_KEY
                         : strcmp(cmd->name, "kv rm") == 0  ? RM_BUCKET
                                                            : DEL_KEY;
    static const char *const asks[] = {"delete key", "purge key",
                                       "delete bucket"};
    static const char *const dones[] = {"Deleted", "Purged", "Deleted bucket"};
    struct cli_kv k = {0};
    bool force = false;
    struct cli_flag flags[] = {
        {"force", 'f', CLI_FLAG_BOOL, &force, NULL,
         "do not ask (needed when stdin is not a terminal)"},
        CLI_FLAG_END,
    };
    int rv = cli_kv_open(&k, cmd, flags, argc, argv, true, errmsg);
    if (rv != 0 || k.r.help) {
        goto out;
    }
    const char *bucket = k.r.args.items[0];
    const char *key = kind == RM_BUCKET ? NULL : k.r.args.items[1];
    if (!force) {
        rv = cli_confirm(asks[kind], key != NULL ? key : bucket, errmsg);
    }
    if (rv == 0) {
        natsStatus s = del_run(&k, bucket, key, kind);
        rv = s == NATS_OK ? 0 : cli_kv_err(s, cmd->name, key, errmsg);
    }
    if (rv == 0) {
        printf("%s %s%s%s\n", dones[kind], bucket, key != NULL ? " > " : "",
               key != NULL ? key : "");
    }
out:
    cli_kv_close(&k);
    return rv;
}

static int history_table(const kvEntryList *l, struct cli_table *t)
{
    static const char *const heads[] = {"Key",     ">Revision", "Op",
                                        "Created", ">Length",   "Value"};
    int rv = cli_table_init(t, 6, heads);
    for (int i = 0; rv == 0 && i < l->Count; i++) {
        kvEntry *e = l->Entries[i];
        char revs[32], when[32], lens[32], val[64];
        snprintf(revs, sizeof revs, "%" PRIu64, kvEntry_Revision(e));
        fmt_time(kvEntry_Created(e), when, sizeof when);
        snprintf(lens, sizeof lens, "%d", kvEntry_ValueLen(e));
        /* Long values are cut, as the nats CLI does: 'get' prints all. */
        snprintf(val, sizeof val, "%.*s",
                 kvEntry_ValueLen(e) > 40 ? 40 : kvEntry_ValueLen(e),
                 kvEntry_ValueLen(e) > 0 ? (const char *)kvEntry_Value(e) : "");
        const char *row[] = {
            kvEntry_Key(e), revs, op_name(kvEntry_Operation(e)),
            when,           lens, val};
        rv = cli_table_add(t, row);
    }
    return rv;
}

static int print_history(const struct cli_kv *k, const char *key,
                         kvWatchOptions *wo, char *errmsg)
{
    kvEntryList l = {0};
    struct cli_table *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return KEEL_ENOMEM;
    }
    natsStatus s = kvStore_History(&l, k->kv, key, wo);
    int rv = s == NATS_OK ? history_table(&l, t)
                          : cli_kv_err(s, "kv history", key, errmsg);
    if (rv == 0) {
        cli_table_print(t, stdout, cli_color(stdout));
    }
    kvEntryList_Destroy(&l);
    if (t->ncols > 0) {
        cli_table_free(t);
    }
    free(t);
    return rv;
}

static int print_keys(const struct cli_kv *k, kvWatchOptions *wo, char *errmsg)
{
    kvKeysList l = {0};
    natsStatus s = kvStore_Keys(&l, k->kv, wo);
    int rv = 0;
    if (s == NATS_NOT_FOUND || (s == NATS_OK && l.Count == 0)) {
        printf("No keys found in bucket\n");
    } else if (s != NATS_OK) {
        rv = cli_kv_err(s, "kv keys", NULL, errmsg);
    }
    for (int i = 0; rv == 0 && i < l.Count; i++) {
        printf("%s\n", l.Keys[i]);
    }
    kvKeysList_Destroy(&l);
    return rv;
}

/* keys and history: the row's name says which. */
static int kv_list(const struct cli_cmd *cmd, int argc, char **argv,
                   char *errmsg)
{
    struct cli_kv k = {0};
    struct cli_flag flags[] = {CLI_FLAG_END};
    int rv = cli_kv_open(&k, cmd, flags, argc, argv, true, errmsg);
    if (rv == 0 && !k.r.help) {
        kvWatchOptions wo;
        kvWatchOptions_Init(&wo);
        wo.Timeout = k.r.conn.timeout_ms;
        rv = strcmp(cmd->name, "kv history") == 0
                 ? print_history(&k, k.r.args.items[1], &wo, errmsg)
                 : print_keys(&k, &wo, errmsg);
    }
    cli_kv_close(&k);
    return rv;
}

static void print_watched(const kvEntry *ce)
{
    kvEntry *e = (kvEntry *)ce; /* libnats' getters take a non-const */
    char when[32];
    fmt_time(kvEntry_Created(e), when, sizeof when);
    kvOperation op = kvEntry_Operation(e);
    printf("[%s] %s %s > %s", when, op_name(op), kvEntry_Bucket(e),
           kvEntry_Key(e));
    if (op == kvOp_Put) {
        printf(": ");
        fwrite(kvEntry_Value(e), 1, (size_t)kvEntry_ValueLen(e), stdout);
    }
    printf("\n");
    fflush(stdout);
}

static int kv_watch(const struct cli_cmd *cmd, int argc, char **argv,
                    char *errmsg)
{
    struct cli_kv k = {0};
    kvWatcher *w = NULL;
    int64_t count = 0;
    struct cli_flag flags[] = {
        {"count", 0, CLI_FLAG_INT, &count, "N",
         "stop after N entries (default: until ^C)"},
        CLI_FLAG_END,
    };
    int rv = cli_kv_open(&k, cmd, flags, argc, argv, true, errmsg);
    if (rv != 0 || k.r.help) {
        goto out;
    }
    natsStatus s = k.r.args.count > 1
                       ? kvStore_Watch(&w, k.kv, k.r.args.items[1], NULL)
                       : kvStore_WatchAll(&w, k.kv, NULL);
    for (int64_t got = 0; s == NATS_OK && (count == 0 || got < count);) {
        kvEntry *e = NULL;
        s = kvWatcher_Next(&e, w, CLI_WAIT_SLICE_MS);
        if (s == NATS_TIMEOUT) {
            s = NATS_OK; /* nothing new yet: keep watching */
            continue;
        }
        if (s == NATS_OK && e != NULL) {
            print_watched(e);
            kvEntry_Destroy(e);
            got++;
        }
        /* e == NULL marks the end of the initial values: keep going. */
    }
    if (s != NATS_OK) {
        rv = cli_kv_err(s, "kv watch", NULL, errmsg);
    }
out:
    kvWatcher_Destroy(w);
    cli_kv_close(&k);
    return rv;
}

static const struct cli_subcmd subs[] = {
    {{"kv add", NULL, "BUCKET",
      "Create a bucket (--history, --ttl, --max-value-size, --replicas).", 1,
      1},
     cli_kv_add},
    {{"kv ls", NULL, "", "List the buckets.", 0, 0}, cli_kv_ls},
    {{"kv info", NULL, "BUCKET", "Show a bucket's settings and size.", 1, 1},
     cli_kv_ls},
    {{"kv put", NULL, "BUCKET KEY [VALUE]",
      "Set KEY to VALUE (default: read stdin).", 2, 3},
     kv_put},
    {{"kv get", NULL, "BUCKET KEY", "Print a key's value (--raw: only it).", 2,
      2},
     kv_get},
    {{"kv create", NULL, "BUCKET KEY [VALUE]",
      "Set KEY only if it has no value.", 2, 3},
     kv_put},
    {{"kv update", NULL, "BUCKET KEY VALUE REVISION",
      "Set KEY only if its last revision is REVISION.", 4, 4},
     kv_put},
    {{"kv del", NULL, "BUCKET KEY", "Delete KEY (keeps its history).", 2, 2},
     kv_del},
    {{"kv purge", NULL, "BUCKET KEY", "Delete KEY and all its history.", 2, 2},
     kv_del},
    {{"kv history", NULL, "BUCKET KEY", "List the revisions of KEY.", 2, 2},
     kv_list},
    {{"kv keys", NULL, "BUCKET", "List the keys that have a value.", 1, 1},
     kv_list},
    {{"kv watch", NULL, "BUCKET [KEY]",
      "Print values, then changes, of KEY (wildcards) or all keys.", 1, 2},
     kv_watch},
    {{"kv rm", NULL, "BUCKET", "Delete a bucket and all its keys.", 1, 1},
     kv_del},
};

int cli_kv(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    (void)cmd;
    return cli_subcmd_dispatch("kv", subs, sizeof subs / sizeof subs[0], argc,
                               argv, errmsg);
}
