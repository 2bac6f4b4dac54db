/* keel object add|info|rm, what every object verb shares (the bucket, the
 * meta messages, chunk purges, ordered consumers) and the command table.
 * put and get: cli_obj_data.c; ls and watch: cli_obj_list.c.
 *
 * The convention is the clients' (nats.js @nats-io/obj, nats.go), so an
 * object keel puts is one they get and the other way round; docs/
 * operations.md ("Buckets and objects") lists what it is made of.
 */
#include "cli_obj.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_js.h"
#include "cli_kv.h"
#include "cli_stream_cfg.h"
#include "cli_verbs.h"

int cli_obj_nats_err(natsStatus s, const char *what, char *errmsg)
{
    const char *last = cli_kv_last_error();
    int rv = cli_nats_err(s, errmsg, what);
    if (last[0] != '\0') {
        size_t used = strlen(errmsg);
        snprintf(errmsg + used, KEEL_ERRMSG_MAX - used, " (%s)", last);
    }
    return rv;
}

/* The clients accept bucket names of letters, digits, '-' and '_'. */
bool cli_obj_bucket_ok(const char *b)
{
    if (b[0] == '\0' || strlen(b) > CLI_OBJ_BUCKET_BYTES_MAX) {
        return false;
    }
    for (const char *p = b; *p != '\0'; p++) {
        bool alnum = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9');
        if (!alnum && *p != '-' && *p != '_') {
            return false;
        }
    }
    return true;
}

/* Parse argv against flags and connect; when bind and a bucket is named,
 * read its stream info (a missing bucket says how to list or add one). */
static int obj_open(struct cli_obj *o, const struct cli_cmd *cmd,
                    const struct cli_flag *flags, int argc, char **argv,
                    bool bind, char *errmsg)
{
    int rv = cli_js_parse(&o->r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || o->r.help) {
        return rv;
    }
    if (o->r.args.count >= 1) {
        o->bucket = o->r.args.items[0];
        if (!cli_obj_bucket_ok(o->bucket)) {
            return keel_err(KEEL_EUSAGE, errmsg,
                            "bucket name '%.40s': use up to %d letters, "
                            "digits, '-' and '_'",
                            o->bucket, CLI_OBJ_BUCKET_BYTES_MAX);
        }
        snprintf(o->stream, sizeof o->stream, "OBJ_%s", o->bucket);
    }
    rv = cli_js_connect(&o->r, errmsg);
    if (rv != 0) {
        return rv;
    }
    jsOptions jo;
    natsStatus s = jsOptions_Init(&jo);
    jo.Wait = o->r.conn.timeout_ms;
    s = s == NATS_OK ? natsConnection_JetStream(&o->js, o->r.nc, &jo) : s;
    if (s != NATS_OK) {
        return cli_obj_nats_err(s, "JetStream context", errmsg);
    }
    if (!bind || o->bucket == NULL) {
        return 0;
    }
    char api[CLI_SUBJECT_BYTES_MAX];
    snprintf(api, sizeof api, "STREAM.INFO.%s", o->stream);
    rv = cli_js_request(o->r.nc, o->r.conn.timeout_ms, "open bucket", api, NULL,
                        &o->si, NULL, errmsg);
    if (rv == KEEL_ENOENT) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "bucket %s not found: list buckets with 'keel object "
                        "ls' or create it with 'keel object add %s'",
                        o->bucket, o->bucket);
    }
    return rv;
}

static void obj_close(struct cli_obj *o)
{
    json_decref(o->si);
    jsCtx_Destroy(o->js);
    cli_js_end(&o->r);
    o->si = NULL;
    o->js = NULL;
}

void cli_obj_b64url(const unsigned char *in, size_t n, char *out)
{
    int len = n > 0 ? EVP_EncodeBlock((unsigned char *)out, in, (int)n) : 0;
    out[len] = '\0';
    for (char *p = out; *p != '\0'; p++) {
        *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    }
}

int cli_obj_meta_subject(const struct cli_obj *o, const char *name, char *out,
                         size_t len, char *errmsg)
{
    size_t n = strlen(name);
    if (n == 0 || n > CLI_OBJ_NAME_BYTES_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "object name '%.40s': give 1 to %d bytes", name,
                        CLI_OBJ_NAME_BYTES_MAX);
    }
    char enc[(CLI_OBJ_NAME_BYTES_MAX + 2) / 3 * 4 + 1];
    cli_obj_b64url((const unsigned char *)name, n, enc);
    int w = snprintf(out, len, "$O.%s.M.%s", o->bucket, enc);
    ASSERT(w > 0 && (size_t)w < len);
    return 0;
}

int cli_obj_meta_get(struct cli_obj *o, const char *name, json_t **meta,
                     char *errmsg)
{
    char subj[CLI_SUBJECT_BYTES_MAX], api[CLI_SUBJECT_BYTES_MAX];
    *meta = NULL;
    int rv = cli_obj_meta_subject(o, name, subj, sizeof subj, errmsg);
    if (rv != 0) {
        return rv;
    }
    json_t *req = json_pack("{s:s}", "last_by_subj", subj);
    char *body = req != NULL ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (body == NULL) {
        return KEEL_ENOMEM;
    }
    json_t *reply = NULL;
    snprintf(api, sizeof api, "STREAM.MSG.GET.%s", o->stream);
    rv = cli_js_request(o->r.nc, o->r.conn.timeout_ms, "read object meta", api,
                        body, &reply, NULL, errmsg);
    free(body);
    if (rv == KEEL_ENOENT) {
        return keel_err(KEEL_ENOENT, errmsg,
                        "object %s not found in bucket %s: list objects with "
                        "'keel object ls %s'",
                        name, o->bucket, o->bucket);
    }
    if (rv != 0) {
        return rv;
    }
    const char *b64 = cli_js_str(json_object_get(reply, "message"), "data", "");
    size_t cap = strlen(b64) / 4 * 3 + 3, n = 0;
    unsigned char *text = malloc(cap);
    rv = text == NULL ? KEEL_ENOMEM : cli_b64_decode(b64, text, cap, &n);
    if (rv == 0) {
        *meta = json_loadb((const char *)text, n, 0, NULL);
    }
    free(text);
    json_decref(reply);
    if (rv == 0 && !json_is_object(*meta)) {
        json_decref(*meta);
        *meta = NULL;
        rv = keel_err(KEEL_EPROTO, errmsg,
                      "the meta message of object %s is not a JSON object: "
                      "put the object again",
                      name);
    }
    return rv;
}

int cli_obj_meta_put(struct cli_obj *o, const json_t *meta, char *errmsg)
{
    char subj[CLI_SUBJECT_BYTES_MAX];
    int rv = cli_obj_meta_subject(o, cli_js_str(meta, "name", ""), subj,
                                  sizeof subj, errmsg);
    char *text = rv == 0 ? json_dumps(meta, JSON_COMPACT) : NULL;
    if (rv == 0 && text == NULL) {
        rv = KEEL_ENOMEM;
    }
    natsMsg *m = NULL;
    jsPubAck *pa = NULL;
    jsErrCode jerr = 0;
    natsStatus s = NATS_OK;
    if (rv == 0) {
        s = natsMsg_Create(&m, subj, NULL, text, (int)strlen(text));
    }
    /* A rollup keeps only this meta message on the subject: one meta per
     * object, whatever it replaces. */
    if (rv == 0 && s == NATS_OK) {
        s = natsMsgHeader_Set(m, "Nats-Rollup", "sub");
    }
    if (rv == 0 && s == NATS_OK) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.ExpectStream = o->stream;
        s = js_PublishMsg(&pa, o->js, m, &po, &jerr);
    }
    if (rv == 0 && s != NATS_OK) {
        rv = cli_obj_nats_err(s, "publish the object meta", errmsg);
    }
    jsPubAck_Destroy(pa);
    natsMsg_Destroy(m);
    free(text);
    return rv;
}

int cli_obj_purge_chunks(struct cli_obj *o, const char *nuid, char *errmsg)
{
    char api[CLI_SUBJECT_BYTES_MAX], body[CLI_SUBJECT_BYTES_MAX];
    snprintf(api, sizeof api, "STREAM.PURGE.%s", o->stream);
    snprintf(body, sizeof body, "{\"filter\":\"$O.%s.C.%s\"}", o->bucket, nuid);
    return cli_js_request(o->r.nc, o->r.conn.timeout_ms, "purge old chunks",
                          api, body, NULL, NULL, errmsg);
}

int cli_obj_subscribe(struct cli_obj *o, const char *filter, bool last,
                      natsSubscription **sub, char *errmsg)
{
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = o->stream;
    so.Ordered = true;
    so.Config.DeliverPolicy = last ? js_DeliverLastPerSubject : js_DeliverAll;
    jsErrCode jerr = 0;
    natsStatus s = js_SubscribeSync(sub, o->js, filter, NULL, &so, &jerr);
    if (s == NATS_OK) {
        /* A large object arrives faster than it is written out. */
        s = natsSubscription_SetPendingLimits(*sub, -1, -1);
    }
    return s == NATS_OK ? 0 : cli_obj_nats_err(s, "subscribe", errmsg);
}

void cli_obj_print_info(const json_t *meta)
{
    char size[32], chunks[32];
    cli_js_bytes(meta, "size", size, sizeof size);
    cli_js_count(meta, "chunks", chunks, sizeof chunks);
    printf("Object information for %s > %s\n\n",
           cli_js_str(meta, "bucket", "?"), cli_js_str(meta, "name", "?"));
    const char *desc = cli_js_str(meta, "description", "");
    if (desc[0] != '\0') {
        printf("  %-18s %s\n", "Description:", desc);
    }
    printf("  %-18s %s\n", "Size:", size);
    printf("  %-18s %s\n", "Modification Time:", cli_js_str(meta, "mtime", ""));
    printf("  %-18s %s\n", "Chunks:", chunks);
    /* The nats CLI shows the digest in hex. */
    const char *digest = cli_js_str(meta, "digest", "");
    unsigned char raw[64];
    size_t n = 0;
    size_t plen = strlen(CLI_OBJ_DIGEST_PREFIX);
    if (strncmp(digest, CLI_OBJ_DIGEST_PREFIX, plen) == 0 &&
        cli_b64_decode(digest + plen, raw, sizeof raw, &n) == 0) {
        printf("  %-18s SHA-256 ", "Digest:");
        for (size_t i = 0; i < n; i++) {
            printf("%02x", raw[i]);
        }
        printf("\n");
    }
    const json_t *link =
        json_object_get(json_object_get(meta, "options"), "link");
    if (link != NULL) {
        printf("  %-18s %s > %s\n", "Link To:", cli_js_str(link, "bucket", "?"),
               cli_js_str(link, "name", ""));
    }
    if (json_is_true(json_object_get(meta, "deleted"))) {
        printf("  %-18s true\n", "Deleted:");
    }
}

static void print_bucket(const json_t *info, const struct cli_js_run *r)
{
    (void)r;
    const json_t *cfg = json_object_get(info, "config");
    const json_t *st = json_object_get(info, "state");
    const char *stream = cli_js_str(cfg, "name", "OBJ_?");
    int64_t max_age = cli_js_int(cfg, "max_age", 0);
    char ttl[32], bytes[32], maxb[32];
    cli_fmt_duration_ns(max_age == 0 ? -1 : max_age, ttl, sizeof ttl);
    cli_js_bytes(st, "bytes", bytes, sizeof bytes);
    int64_t max_bytes = cli_js_int(cfg, "max_bytes", -1);
    if (max_bytes < 0) {
        snprintf(maxb, sizeof maxb, "unlimited");
    } else {
        cli_fmt_bytes((uint64_t)max_bytes, maxb, sizeof maxb);
    }
    printf("Information for Object Store Bucket %s\n\n", stream + 4);
    printf("  %-20s %s\n", "Bucket Name:", stream + 4);
    const char *desc = cli_js_str(cfg, "description", "");
    if (desc[0] != '\0') {
        printf("  %-20s %s\n", "Description:", desc);
    }
    printf("  %-20s %lld\n",
           "Replicas:", (long long)cli_js_int(cfg, "num_replicas", 1));
    printf("  %-20s %s\n", "TTL:", ttl);
    printf("  %-20s %s\n", "Sealed:",
           json_is_true(json_object_get(cfg, "sealed")) ? "true" : "false");
    printf("  %-20s %s\n", "Size:", bytes);
    printf("  %-20s %s\n", "Maximum Bucket Size:", maxb);
    printf("  %-20s %s\n", "Storage:", cli_js_str(cfg, "storage", "file"));
    printf("  %-20s %s\n", "Backing Store Kind:", "JetStream");
    printf("  %-20s %s\n", "JetStream Stream:", stream);
}

static int bucket_info(struct cli_obj *o, char *errmsg)
{
    char api[CLI_SUBJECT_BYTES_MAX];
    snprintf(api, sizeof api, "STREAM.INFO.%s", o->stream);
    return cli_js_show(&o->r, "object info", api, NULL, print_bucket, errmsg);
}

static json_t *bucket_config(const struct cli_obj *o, const char *description,
                             int64_t ttl_ms, int64_t max_bytes,
                             int64_t replicas, bool mem)
{
    char chunks[CLI_SUBJECT_BYTES_MAX], metas[CLI_SUBJECT_BYTES_MAX];
    snprintf(chunks, sizeof chunks, "$O.%s.C.>", o->bucket);
    snprintf(metas, sizeof metas, "$O.%s.M.>", o->bucket);
    /* As the clients create it: direct gets read the meta, rollups keep
     * one meta per object, discard new refuses a put to a full bucket. */
    json_t *cfg = json_pack(
        "{s:s, s:[s,s], s:I, s:I, s:s, s:I, s:s, s:b, s:b}", "name", o->stream,
        "subjects", chunks, metas, "max_age", (json_int_t)(ttl_ms * 1000000),
        "max_bytes", (json_int_t)max_bytes, "storage", mem ? "memory" : "file",
        "num_replicas", (json_int_t)replicas, "discard", "new",
        "allow_rollup_hdrs", 1, "allow_direct", 1);
    if (cfg != NULL && description != NULL) {
        json_object_set_new(cfg, "description", json_string(description));
    }
    return cfg;
}

/* --metadata key=value into the config's "metadata" object, as the nats
 * CLI sets it. */
static int bucket_metadata(const struct cli_list *items, json_t *cfg,
                           char *errmsg)
{
    if (items->count == 0) {
        return 0;
    }
    json_t *md = json_object();
    int rv = md == NULL || json_object_set_new(cfg, "metadata", md) != 0
                 ? KEEL_ENOMEM
                 : 0;
    for (int i = 0; rv == 0 && i < items->count; i++) {
        char key[CLI_HEADER_KEY_BYTES_MAX];
        const char *value = NULL;
        rv = cli_pair_split(items->items[i], '=', "--metadata", key, sizeof key,
                            &value, errmsg);
        if (rv == 0 && json_object_set_new(md, key, json_string(value)) != 0) {
            rv = KEEL_ENOMEM;
        }
    }
    return rv;
}

static int obj_add(struct cli_obj *o, char *errmsg)
{
    const struct cli_obj_opts *op = &o->opt;
    bool mem = strcmp(op->storage, "memory") == 0;
    if (op->replicas < 1 || op->replicas > 5) {
        return keel_err(KEEL_EUSAGE, errmsg, "--replicas %lld: use 1 to 5",
                        (long long)op->replicas);
    }
    if (!mem && strcmp(op->storage, "file") != 0) {
        return keel_err(KEEL_EUSAGE, errmsg, "--storage %s: use file or memory",
                        op->storage);
    }
    json_t *cfg = bucket_config(o, op->description, op->ttl_ms, op->max_bytes,
                                op->replicas, mem);
    int rv =
        cfg == NULL ? KEEL_ENOMEM : bucket_metadata(&op->metadata, cfg, errmsg);
    char *body = rv == 0 ? json_dumps(cfg, JSON_COMPACT) : NULL;
    json_decref(cfg);
    if (rv != 0 || body == NULL) {
        return rv != 0 ? rv : KEEL_ENOMEM;
    }
    char api[CLI_SUBJECT_BYTES_MAX];
    snprintf(api, sizeof api, "STREAM.CREATE.%s", o->stream);
    rv = cli_js_request(o->r.nc, o->r.conn.timeout_ms, "object add", api, body,
                        NULL, NULL, errmsg);
    free(body);
    return rv != 0 ? rv : bucket_info(o, errmsg);
}

/* A sealed bucket's stream takes no more writes, deletes or purges; the
 * clients seal by updating the stream config with sealed set, and so does
 * this (the config comes from the bucket's stream info). */
static int obj_seal(struct cli_obj *o, char *errmsg)
{
    int rv = o->opt.force ? 0 : cli_confirm("seal bucket", o->bucket, errmsg);
    json_t *cfg = json_deep_copy(json_object_get(o->si, "config"));
    if (rv == 0 &&
        (cfg == NULL || json_object_set_new(cfg, "sealed", json_true()) != 0)) {
        rv = KEEL_ENOMEM;
    }
    char *body = rv == 0 ? json_dumps(cfg, JSON_COMPACT) : NULL;
    json_decref(cfg);
    if (rv == 0 && body == NULL) {
        rv = KEEL_ENOMEM;
    }
    char api[CLI_SUBJECT_BYTES_MAX];
    snprintf(api, sizeof api, "STREAM.UPDATE.%s", o->stream);
    if (rv == 0) {
        rv = cli_js_request(o->r.nc, o->r.conn.timeout_ms, "object seal", api,
                            body, NULL, NULL, errmsg);
    }
    free(body);
    if (rv == 0) {
        printf("%s has been sealed\n", o->bucket);
        rv = bucket_info(o, errmsg);
    }
    return rv;
}

static int obj_info(struct cli_obj *o, char *errmsg)
{
    if (o->r.args.count == 1) {
        return bucket_info(o, errmsg);
    }
    json_t *meta = NULL;
    int rv = cli_obj_meta_get(o, o->r.args.items[1], &meta, errmsg);
    if (rv == 0 && o->r.json) {
        cli_js_print_json(meta);
    } else if (rv == 0) {
        cli_obj_print_info(meta);
    }
    json_decref(meta);
    return rv;
}

/* Deleting an object leaves a meta that says deleted (so watchers see it)
 * and purges its chunks, as the clients do. */
static int delete_object(struct cli_obj *o, const char *name, char *errmsg)
{
    json_t *meta = NULL;
    int rv = cli_obj_meta_get(o, name, &meta, errmsg);
    if (rv != 0) {
        return rv;
    }
    char nuid[CLI_OBJ_NUID_LEN * 2 + 1];
    snprintf(nuid, sizeof nuid, "%s", cli_js_str(meta, "nuid", ""));
    if (json_object_set_new(meta, "deleted", json_true()) != 0 ||
        json_object_set_new(meta, "size", json_integer(0)) != 0 ||
        json_object_set_new(meta, "chunks", json_integer(0)) != 0 ||
        json_object_set_new(meta, "digest", json_string("")) != 0) {
        rv = KEEL_ENOMEM;
    }
    if (rv == 0) {
        rv = cli_obj_meta_put(o, meta, errmsg);
    }
    if (rv == 0 && nuid[0] != '\0') {
        rv = cli_obj_purge_chunks(o, nuid, errmsg);
    }
    json_decref(meta);
    return rv;
}

static int obj_rm(struct cli_obj *o, char *errmsg)
{
    const char *name = o->r.args.count > 1 ? o->r.args.items[1] : NULL;
    int rv = 0;
    if (!o->opt.force) {
        rv = name != NULL ? cli_confirm("delete object", name, errmsg)
                          : cli_confirm("delete bucket", o->bucket, errmsg);
    }
    if (rv == 0 && name != NULL) {
        rv = delete_object(o, name, errmsg);
        if (rv == 0) {
            printf("Removed %s > %s\n", o->bucket, name);
        }
    } else if (rv == 0) {
        char api[CLI_SUBJECT_BYTES_MAX];
        snprintf(api, sizeof api, "STREAM.DELETE.%s", o->stream);
        rv = cli_js_request(o->r.nc, o->r.conn.timeout_ms, "object rm", api,
                            NULL, NULL, NULL, errmsg);
        if (rv == 0) {
            printf("Deleted bucket %s\n", o->bucket);
        }
    }
    return rv;
}

/* Which flags a verb takes (struct cli_obj_opts holds their values). */
enum {
    OF_NAME = 1 << 0,
    OF_DESC = 1 << 1,
    OF_OUTPUT = 1 << 2,
    OF_FORCE = 1 << 3,
    OF_BUCKET = 1 << 4, /* add: --ttl, --replicas, --max-bucket-size... */
    OF_NAMES = 1 << 5,
    OF_COUNT = 1 << 6,
    OF_JSON = 1 << 7,
    OF_HEADER = 1 << 8,
    OF_PROGRESS = 1 << 9,
};

#define OBJ_FLAGS_MAX 16

/* CLI_VERB_GROUP's setup: o's defaults, and the flags of want into out
 * (ending with the NULL row), their values into o->opt (and --json into
 * o->r.json). */
static void obj_setup(struct cli_obj *o, unsigned want, struct cli_flag *out)
{
    o->opt.max_bytes = -1;
    o->opt.replicas = 1;
    o->opt.storage = "file";
    struct cli_obj_opts *op = &o->opt;
    const struct cli_flag all[] = {
        /* add's settings of the bucket (OF_BUCKET) come first. */
        {"ttl", 0, CLI_FLAG_DURATION, &op->ttl_ms, "DURATION",
         "how long to keep objects (default forever)"},
        {"replicas", 0, CLI_FLAG_INT, &op->replicas, "N",
         "copies of the data (1, 3 or 5 on a cluster)"},
        {"max-bucket-size", 0, CLI_FLAG_SIZE, &op->max_bytes, "BYTES",
         "largest size of the whole bucket"},
        {"storage", 0, CLI_FLAG_STR, &op->storage, "file|memory",
         "where objects are kept"},
        {"metadata", 0, CLI_FLAG_LIST, &op->metadata, "KEY=VALUE",
         "add metadata to the bucket (repeatable)"},
        {"name", 0, CLI_FLAG_STR, &op->name, "NAME",
         "the object's name (default: FILE, a leading ./ dropped)"},
        {"description", 0, CLI_FLAG_STR, &op->description, "TEXT",
         "what the bucket or object is for"},
        {"output", 'O', CLI_FLAG_STR, &op->output, "FILE",
         "write to FILE ('-': stdout; default: the name's last part)"},
        {"header", 'H', CLI_FLAG_LIST, &op->headers, "'Key:Value'",
         "add a header to the object (repeatable)"},
        {"force", 'f', CLI_FLAG_BOOL, &op->force, NULL,
         "do not ask (needed when stdin is not a terminal)"},
        {"no-progress", 0, CLI_FLAG_BOOL, &op->no_progress, NULL,
         "draw no progress bar (none is drawn unless stderr is a terminal)"},
        {"names", 'n', CLI_FLAG_BOOL, &op->names, NULL, "print only the names"},
        {"count", 0, CLI_FLAG_INT, &op->count, "N",
         "stop after N entries (default: until ^C)"},
        {"json", 0, CLI_FLAG_BOOL, &o->r.json, NULL,
         "print JSON (the stream info, or the objects' meta)"},
    };
    /* Which OF_ bit takes each row of all. */
    static const unsigned bit[] = {OF_BUCKET, OF_BUCKET, OF_BUCKET,   OF_BUCKET,
                                   OF_BUCKET, OF_NAME,   OF_DESC,     OF_OUTPUT,
                                   OF_HEADER, OF_FORCE,  OF_PROGRESS, OF_NAMES,
                                   OF_COUNT,  OF_JSON};
    _Static_assert(sizeof bit / sizeof bit[0] == sizeof all / sizeof all[0],
                   "one bit a flag");
    cli_flags_pick(all, bit, sizeof all / sizeof all[0], want, out,
                   OBJ_FLAGS_MAX);
}

/* Every verb: its flags parsed, connected (and bound to the bucket when it
 * needs one), run, and everything released. */
CLI_VERB_GROUP(cli_obj, "object", OBJ_VERBS, struct cli_obj, OBJ_FLAGS_MAX,
               obj_setup, obj_open, obj_close)
