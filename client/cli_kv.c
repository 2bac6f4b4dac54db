/* keel kv add|ls|info and what every kv verb shares (the rest and the
 * command table: cli_kv_key.c).
 *
 * A bucket is the stream KV_<BUCKET>; libnats' kvStore API speaks the
 * conventions, so keel works the same against keeld and nats-server.
 */
#include "cli_kv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_js.h"
#include "cli_stream_cfg.h"

/* libnats prefixes its last error with "(file.c:line): ": drop it. */
const char *cli_kv_last_error(void)
{
    const char *last = nats_GetLastError(NULL);
    if (last == NULL) {
        return "";
    }
    const char *sep = last[0] == '(' ? strstr(last, "): ") : NULL;
    return sep != NULL ? sep + 3 : last;
}

int cli_kv_err(natsStatus s, const char *what, const char *key, char *errmsg)
{
    const char *last = cli_kv_last_error();
    if (s == NATS_NOT_FOUND) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "%s: key %s not found (list keys with 'keel kv keys "
                        "BUCKET')",
                        what, key != NULL ? key : "?");
    }
    if (last[0] != '\0') {
        int rv = cli_nats_err(s, errmsg, what);
        size_t used = strlen(errmsg);
        snprintf(errmsg + used, KEEL_ERRMSG_MAX - used, " (%s)", last);
        return rv;
    }
    return cli_nats_err(s, errmsg, what);
}

int cli_kv_open(struct cli_kv *k, const struct cli_cmd *cmd,
                const struct cli_flag *flags, int argc, char **argv, bool bind,
                char *errmsg)
{
    k->cmd = cmd;
    k->js = NULL;
    k->kv = NULL;
    int rv = cli_js_start(&k->r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || k->r.help) {
        return rv;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = k->r.conn.timeout_ms;
    natsStatus s = natsConnection_JetStream(&k->js, k->r.nc, &jo);
    if (s != NATS_OK) {
        return cli_nats_err(s, errmsg, "JetStream context");
    }
    if (!bind) {
        return 0;
    }
    ASSERT(k->r.args.count >= 1);
    const char *bucket = k->r.args.items[0];
    s = js_KeyValue(&k->kv, k->js, bucket);
    if (s == NATS_NOT_FOUND) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "bucket %s not found: list buckets with 'keel kv ls' "
                        "or create it with 'keel kv add %s'",
                        bucket, bucket);
    }
    if (s != NATS_OK) {
        return cli_kv_err(s, "open bucket", NULL, errmsg);
    }
    return 0;
}

void cli_kv_close(struct cli_kv *k)
{
    kvStore_Destroy(k->kv);
    jsCtx_Destroy(k->js);
    cli_js_end(&k->r);
    k->kv = NULL;
    k->js = NULL;
}

/* The human view of a bucket, from its stream's info. */
static void print_bucket(const json_t *info, const struct cli_js_run *r)
{
    (void)r;
    const json_t *cfg = json_object_get(info, "config");
    const json_t *st = json_object_get(info, "state");
    const char *stream = cli_js_str(cfg, "name", "KV_?");
    char ttl[32], vals[32], bytes[32], maxval[32], maxb[32];
    cli_fmt_duration_ns(
        cli_js_int(cfg, "max_age", 0) == 0 ? -1 : cli_js_int(cfg, "max_age", 0),
        ttl, sizeof ttl);
    cli_js_count(st, "messages", vals, sizeof vals);
    cli_js_bytes(st, "bytes", bytes, sizeof bytes);
    cli_fmt_limit(cli_js_int(cfg, "max_msg_size", -1), maxval, sizeof maxval);
    cli_fmt_limit(cli_js_int(cfg, "max_bytes", -1), maxb, sizeof maxb);
    printf("Information for Key-Value Store Bucket %s\n\n", stream + 3);
    printf("  %-18s %s\n", "Bucket Name:", stream + 3);
    printf("  %-18s %lld\n", "History Kept:",
           (long long)cli_js_int(cfg, "max_msgs_per_subject", 1));
    printf("  %-18s %s\n", "Values Stored:", vals);
    printf("  %-18s %s\n", "Size:", bytes);
    printf("  %-18s %s\n", "TTL:", ttl);
    printf("  %-18s %s\n", "Max Value Size:", maxval);
    printf("  %-18s %s\n", "Max Bucket Size:", maxb);
    printf("  %-18s %lld\n",
           "Replicas:", (long long)cli_js_int(cfg, "num_replicas", 1));
    printf("  %-18s %s\n", "Storage:", cli_js_str(cfg, "storage", "file"));
    printf("  %-18s %s\n", "Backing Stream:", stream);
}

static int bucket_info(struct cli_kv *k, const char *bucket, char *errmsg)
{
    char api[CLI_SUBJECT_BYTES_MAX];
    snprintf(api, sizeof api, "STREAM.INFO.KV_%s", bucket);
    int rv = cli_js_show(&k->r, "kv info", api, NULL, print_bucket, errmsg);
    if (rv == KEEL_ENOENT) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "bucket %s not found: list buckets with 'keel kv ls'",
                        bucket);
    }
    return rv;
}

int cli_kv_add(struct cli_kv *k, char *errmsg)
{
    const struct cli_kv_opts *o = &k->opt;
    const char *bucket = k->r.args.items[0];
    if (o->history < 1 || o->history > 64) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--history %lld: a bucket keeps 1 to 64 values per "
                        "key",
                        (long long)o->history);
    }
    if (o->max_value > INT32_MAX || o->replicas > 5 || o->replicas < 1) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "--max-value-size must be below 2 GiB and --replicas "
                        "1 to 5");
    }
    bool mem = strcmp(o->storage, "memory") == 0;
    if (!mem && strcmp(o->storage, "file") != 0) {
        return keel_err(KEEL_EUSAGE, errmsg, "--storage %s: use file or memory",
                        o->storage);
    }
    kvConfig kc;
    kvConfig_Init(&kc);
    kc.Bucket = bucket;
    kc.Description = o->description;
    kc.History = (uint8_t)o->history;
    kc.TTL = o->ttl_ms * 1000000;
    kc.MaxValueSize = (int32_t)o->max_value;
    kc.MaxBytes = o->max_bytes;
    kc.Replicas = (int)o->replicas;
    kc.StorageType = mem ? js_MemoryStorage : js_FileStorage;
    natsStatus s = js_CreateKeyValue(&k->kv, k->js, &kc);
    if (s != NATS_OK) {
        return cli_kv_err(s, "kv add", NULL, errmsg);
    }
    return bucket_info(k, bucket, errmsg);
}

/* Buckets are the streams named KV_*: one page of STREAM.LIST at a time. */
struct ls_acc {
    struct cli_table *t;
    json_t *all; /* the bucket names, for --json */
};

static int ls_page(const json_t *streams, void *arg)
{
    struct ls_acc *acc = arg;
    size_t i;
    const json_t *info;
    json_array_foreach(streams, i, info)
    {
        const json_t *cfg = json_object_get(info, "config");
        const json_t *st = json_object_get(info, "state");
        const char *name = cli_js_str(cfg, "name", "");
        if (strncmp(name, "KV_", 3) != 0) {
            continue;
        }
        char vals[32], bytes[32], hist[32];
        cli_js_count(st, "messages", vals, sizeof vals);
        cli_js_bytes(st, "bytes", bytes, sizeof bytes);
        snprintf(hist, sizeof hist, "%lld",
                 (long long)cli_js_int(cfg, "max_msgs_per_subject", 1));
        const char *row[] = {name + 3, hist, vals, bytes};
        int rv = cli_table_add(acc->t, row);
        if (rv != 0 ||
            json_array_append_new(acc->all, json_string(name + 3)) != 0) {
            return KEEL_ENOMEM;
        }
    }
    return 0;
}

/* ls and info: the row's name says which. */
int cli_kv_ls(struct cli_kv *k, char *errmsg)
{
    static const char *const heads[] = {"Bucket", ">History", ">Values",
                                        ">Size"};
    if (strcmp(k->cmd->name, "kv info") == 0) {
        return bucket_info(k, k->r.args.items[0], errmsg);
    }
    struct ls_acc acc = {calloc(1, sizeof *acc.t), json_array()};
    int rv = acc.t == NULL || acc.all == NULL ? KEEL_ENOMEM
                                              : cli_table_init(acc.t, 4, heads);
    if (rv == 0) {
        rv = cli_js_stream_pages(k->r.nc, k->r.conn.timeout_ms, "kv ls",
                                 ls_page, &acc, errmsg);
    }
    if (rv == 0) {
        cli_js_print_ls(acc.t, acc.all, k->r.json,
                        "No Key-Value buckets found (add one with 'keel kv "
                        "add')");
    }
    cli_table_destroy(acc.t);
    json_decref(acc.all);
    return rv;
}
