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
#include "cli_verbs.h"
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
static int kv_put(struct cli_kv *k, char *errmsg)
{
    const char *name = k->cmd->name;
    enum put_mode mode = strcmp(name, "kv create") == 0   ? PUT_CREATE
                         : strcmp(name, "kv update") == 0 ? PUT_UPDATE
                                                          : PUT_ANY;
    char *owned = NULL;
    const char *key = k->r.args.items[1], *val = NULL;
    int len = 0, rv = 0;
    uint64_t last = 0, rev = 0;
    if (mode == PUT_UPDATE) {
        rv = parse_revision(k->r.args.items[3], &last, errmsg);
    }
    if (rv == 0) {
        rv = read_value(&k->r.args, 2, &val, &len, &owned, errmsg);
    }
    if (rv != 0) {
        return rv;
    }
    natsStatus s =
        mode == PUT_CREATE   ? kvStore_Create(&rev, k->kv, key, val, len)
        : mode == PUT_UPDATE ? kvStore_Update(&rev, k->kv, key, val, len, last)
                             : kvStore_Put(&rev, k->kv, key, val, len);
    if (s != NATS_OK) {
        rv = refusal(s, name, key, mode, last, errmsg);
    } else {
        /* The nats CLI echoes the value stored. */
        fwrite(val, 1, (size_t)len, stdout);
        printf("\n");
    }
    free(owned);
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

static int kv_get(struct cli_kv *k, char *errmsg)
{
    kvEntry *e = NULL;
    int64_t revision = k->opt.revision;
    const char *key = k->r.args.items[1];
    natsStatus s = revision > 0
                       ? kvStore_GetRevision(&e, k->kv, key, (uint64_t)revision)
                       : kvStore_Get(&e, k->kv, key);
    if (s != NATS_OK) {
        return cli_kv_err(s, "kv get", key, errmsg);
    }
    if (!k->opt.raw) {
        char when[32];
        fmt_time(kvEntry_Created(e), when, sizeof when);
        printf("%s > %s revision: %" PRIu64 " created @ %s UTC\n\n",
               kvEntry_Bucket(e), kvEntry_Key(e), kvEntry_Revision(e), when);
    }
    fwrite(kvEntry_Value(e), 1, (size_t)kvEntry_ValueLen(e), stdout);
    printf("\n");
    kvEntry_Destroy(e);
    return 0;
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
static int kv_del(struct cli_kv *k, char *errmsg)
{
    const char *name = k->cmd->name;
    enum del_kind kind = strcmp(name, "kv purge") == 0 ? PURGE_KEY
                         : strcmp(name, "kv rm") == 0  ? RM_BUCKET
                                                       : DEL_KEY;
    static const char *const asks[] = {"delete key", "purge key",
                                       "delete bucket"};
    static const char *const dones[] = {"Deleted", "Purged", "Deleted bucket"};
    int rv = 0;
    const char *bucket = k->r.args.items[0];
    const char *key = kind == RM_BUCKET ? NULL : k->r.args.items[1];
    if (!k->opt.force) {
        rv = cli_confirm(asks[kind], key != NULL ? key : bucket, errmsg);
    }
    if (rv == 0) {
        natsStatus s = del_run(k, bucket, key, kind);
        rv = s == NATS_OK ? 0 : cli_kv_err(s, name, key, errmsg);
    }
    if (rv == 0) {
        printf("%s %s%s%s\n", dones[kind], bucket, key != NULL ? " > " : "",
               key != NULL ? key : "");
    }
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
static int kv_list(struct cli_kv *k, char *errmsg)
{
    kvWatchOptions wo;
    kvWatchOptions_Init(&wo);
    wo.Timeout = k->r.conn.timeout_ms;
    return strcmp(k->cmd->name, "kv history") == 0
               ? print_history(k, k->r.args.items[1], &wo, errmsg)
               : print_keys(k, &wo, errmsg);
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

static int kv_watch(struct cli_kv *k, char *errmsg)
{
    kvWatcher *w = NULL;
    int64_t count = k->opt.count;
    int rv = 0;
    natsStatus s = k->r.args.count > 1
                       ? kvStore_Watch(&w, k->kv, k->r.args.items[1], NULL)
                       : kvStore_WatchAll(&w, k->kv, NULL);
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
    kvWatcher_Destroy(w);
    return rv;
}

/* Which flags a verb takes (struct cli_kv_opts holds their values). */
enum {
    KF_BUCKET = 1 << 0, /* add: --history, --ttl, ... and --json */
    KF_JSON = 1 << 1,   /* ls, info */
    KF_GET = 1 << 2,    /* --raw, --revision */
    KF_FORCE = 1 << 3,
    KF_COUNT = 1 << 4,
};

#define KV_FLAGS_MAX 12

/* CLI_VERB_GROUP's setup: k's defaults, and the flags of want into out,
 * their values into k->opt (and --json into k->r.json). */
static void kv_setup(struct cli_kv *k, unsigned want, struct cli_flag *out)
{
    k->opt = (struct cli_kv_opts){.history = 1,
                                  .max_value = -1,
                                  .max_bytes = -1,
                                  .replicas = 1,
                                  .storage = "file"};
    struct cli_kv_opts *op = &k->opt;
    const struct cli_flag all[] = {
        {"history", 0, CLI_FLAG_INT, &op->history, "N",
         "values kept per key (1-64, default 1)"},
        {"ttl", 0, CLI_FLAG_DURATION, &op->ttl_ms, "DURATION",
         "how long a value lives (default forever)"},
        {"max-value-size", 0, CLI_FLAG_SIZE, &op->max_value, "BYTES",
         "largest value accepted"},
        {"max-bucket-size", 0, CLI_FLAG_SIZE, &op->max_bytes, "BYTES",
         "largest size of the whole bucket"},
        {"replicas", 0, CLI_FLAG_INT, &op->replicas, "N",
         "copies of the bucket (1, 3 or 5 on a cluster)"},
        {"storage", 0, CLI_FLAG_STR, &op->storage, "file|memory",
         "where values are kept"},
        {"description", 0, CLI_FLAG_STR, &op->description, "TEXT",
         "what the bucket is for"},
        {"json", 0, CLI_FLAG_BOOL, &k->r.json, NULL, "print the stream info"},
        {"json", 0, CLI_FLAG_BOOL, &k->r.json, NULL,
         "print JSON (ls: the names, info: the stream info)"},
        {"raw", 0, CLI_FLAG_BOOL, &op->raw, NULL, "print only the value"},
        {"revision", 0, CLI_FLAG_INT, &op->revision, "N",
         "the value at revision N (default the latest)"},
        {"force", 'f', CLI_FLAG_BOOL, &op->force, NULL,
         "do not ask (needed when stdin is not a terminal)"},
        {"count", 0, CLI_FLAG_INT, &op->count, "N",
         "stop after N entries (default: until ^C)"},
    };
    /* Which KF_ bit takes each row of all. */
    static const unsigned bit[] = {KF_BUCKET, KF_BUCKET, KF_BUCKET, KF_BUCKET,
                                   KF_BUCKET, KF_BUCKET, KF_BUCKET, KF_BUCKET,
                                   KF_JSON,   KF_GET,    KF_GET,    KF_FORCE,
                                   KF_COUNT};
    _Static_assert(sizeof bit / sizeof bit[0] == sizeof all / sizeof all[0],
                   "one bit a flag");
    cli_flags_pick(all, bit, sizeof all / sizeof all[0], want, out,
                   KV_FLAGS_MAX);
}

/* Every verb: its flags parsed, connected (and bound to the bucket when it
 * needs one), run, and everything released. */
CLI_VERB_GROUP(cli_kv, "kv", KV_VERBS, struct cli_kv, KV_FLAGS_MAX, kv_setup,
               cli_kv_open, cli_kv_close)
