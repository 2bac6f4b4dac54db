/* keel object ls [BUCKET] and keel object watch BUCKET: the buckets are
 * the streams named OBJ_*; the objects of one are the last meta message
 * on each $O.B.M.* subject, read with an ordered consumer.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/assert.h"
#include "cli_js.h"
#include "cli_obj.h"

struct ls_acc {
    struct cli_table *t;
    json_t *all; /* bucket names, or metas, for --json and --names */
};

static int bucket_page(const json_t *streams, void *arg)
{
    struct ls_acc *acc = arg;
    size_t i;
    const json_t *info;
    json_array_foreach(streams, i, info)
    {
        const json_t *cfg = json_object_get(info, "config");
        const char *name = cli_js_str(cfg, "name", "");
        if (strncmp(name, "OBJ_", 4) != 0) {
            continue;
        }
        char bytes[32], created[32];
        cli_fmt_bytes(
            (uint64_t)cli_js_int(json_object_get(info, "state"), "bytes", 0),
            bytes, sizeof bytes);
        /* "2026-12-03T23:39:20.123Z" to the second. */
        snprintf(created, sizeof created, "%.19s",
                 cli_js_str(info, "created", ""));
        char *t = strchr(created, 'T');
        if (t != NULL) {
            *t = ' ';
        }
        const char *row[] = {name + 4, cli_js_str(cfg, "description", ""),
                             created, bytes};
        if (cli_table_add(acc->t, row) != 0 ||
            json_array_append_new(acc->all, json_string(name + 4)) != 0) {
            return KEEL_ENOMEM;
        }
    }
    return 0;
}

static json_t *msg_meta(natsMsg *m)
{
    json_t *meta = json_loadb(natsMsg_GetData(m),
                              (size_t)natsMsg_GetDataLength(m), 0, NULL);
    if (!json_is_object(meta)) {
        json_decref(meta);
        return NULL;
    }
    return meta;
}

/* The live objects of o's bucket into acc: as many meta messages as the
 * consumer had pending when it was made, each the last of its subject. */
static int list_objects(struct cli_obj *o, struct ls_acc *acc, char *errmsg)
{
    char filter[CLI_SUBJECT_BYTES_MAX];
    snprintf(filter, sizeof filter, "$O.%s.M.>", o->bucket);
    natsSubscription *sub = NULL;
    jsConsumerInfo *ci = NULL;
    jsErrCode jerr = 0;
    int rv = cli_obj_subscribe(o, filter, true, &sub, errmsg);
    natsStatus s = rv == 0
                       ? natsSubscription_GetConsumerInfo(&ci, sub, NULL, &jerr)
                       : NATS_OK;
    if (rv == 0 && s != NATS_OK) {
        rv = cli_obj_nats_err(s, "object ls", errmsg);
    }
    uint64_t total = ci != NULL ? ci->NumPending + ci->Delivered.Consumer : 0;
    jsConsumerInfo_Destroy(ci);
    for (uint64_t got = 0; rv == 0 && got < total; got++) {
        natsMsg *m = NULL;
        s = natsSubscription_NextMsg(&m, sub, o->r.conn.timeout_ms);
        if (s != NATS_OK) {
            rv = cli_obj_nats_err(s, "object ls", errmsg);
            break;
        }
        json_t *meta = msg_meta(m);
        natsMsg_Destroy(m);
        if (meta == NULL || json_is_true(json_object_get(meta, "deleted"))) {
            json_decref(meta);
            continue; /* a deleted object, or not one of ours */
        }
        char size[32];
        cli_fmt_bytes((uint64_t)cli_js_int(meta, "size", 0), size, sizeof size);
        const char *row[] = {cli_js_str(meta, "name", "?"), size,
                             cli_js_str(meta, "mtime", "")};
        if (cli_table_add(acc->t, row) != 0 ||
            json_array_append_new(acc->all, meta) != 0) {
            rv = KEEL_ENOMEM;
        }
    }
    natsSubscription_Destroy(sub);
    return rv;
}

static void print_names(const json_t *all, bool objects)
{
    size_t i;
    const json_t *v;
    json_array_foreach(all, i, v)
    {
        printf("%s\n",
               objects ? cli_js_str(v, "name", "?") : json_string_value(v));
    }
}

int cli_obj_ls(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    static const char *const bucket_heads[] = {"Bucket", "Description",
                                               "Created", ">Size"};
    static const char *const object_heads[] = {"Name", ">Size", "Time"};
    struct cli_obj o = {0};
    bool names = false;
    struct cli_flag flags[] = {
        {"names", 'n', CLI_FLAG_BOOL, &names, NULL, "print only the names"},
        {"json", 0, CLI_FLAG_BOOL, &o.r.json, NULL,
         "print JSON (the bucket names, or the objects' meta)"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    struct ls_acc acc = {calloc(1, sizeof *acc.t), json_array()};
    int rv = acc.t == NULL || acc.all == NULL ? KEEL_ENOMEM : 0;
    if (rv == 0) {
        rv = cli_obj_open(&o, cmd, flags, argc, argv, true, errmsg);
    }
    if (rv != 0 || o.r.help) {
        goto out;
    }
    bool objects = o.bucket != NULL;
    rv = cli_table_init(acc.t, objects ? 3 : 4,
                        objects ? object_heads : bucket_heads);
    if (rv == 0 && objects) {
        rv = list_objects(&o, &acc, errmsg);
    } else if (rv == 0) {
        rv = cli_js_stream_pages(o.r.nc, o.r.conn.timeout_ms, "object ls",
                                 bucket_page, &acc, errmsg);
    }
    if (rv == 0 && names && !o.r.json) {
        print_names(acc.all, objects);
    } else if (rv == 0) {
        cli_js_print_ls(acc.t, acc.all, o.r.json,
                        objects ? "No entries found"
                                : "No Object Store buckets found (add one "
                                  "with 'keel object add')");
    }
out:
    cli_table_destroy(acc.t);
    json_decref(acc.all);
    cli_obj_close(&o);
    return rv;
}

static void print_watched(natsMsg *m, const json_t *meta)
{
    jsMsgMetaData *md = NULL;
    int64_t ns = 0;
    if (natsMsg_GetMetaData(&md, m) == NATS_OK) {
        ns = md->Timestamp;
    }
    jsMsgMetaData_Destroy(md);
    time_t sec = (time_t)(ns / 1000000000);
    struct tm tm;
    char when[32];
    gmtime_r(&sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    const char *bucket = cli_js_str(meta, "bucket", "?");
    const char *name = cli_js_str(meta, "name", "?");
    if (json_is_true(json_object_get(meta, "deleted"))) {
        printf("[%s] DEL %s > %s\n", when, bucket, name);
    } else {
        char size[32], chunks[32];
        cli_fmt_bytes((uint64_t)cli_js_int(meta, "size", 0), size, sizeof size);
        cli_fmt_count((uint64_t)cli_js_int(meta, "chunks", 0), chunks,
                      sizeof chunks);
        printf("[%s] PUT %s > %s: %s in %s chunks\n", when, bucket, name, size,
               chunks);
    }
    fflush(stdout);
}

int cli_obj_watch(const struct cli_cmd *cmd, int argc, char **argv,
                  char *errmsg)
{
    struct cli_obj o = {0};
    natsSubscription *sub = NULL;
    int64_t count = 0;
    struct cli_flag flags[] = {
        {"count", 0, CLI_FLAG_INT, &count, "N",
         "stop after N changes (default: until ^C)"},
        {NULL, 0, CLI_FLAG_BOOL, NULL, NULL, NULL},
    };
    int rv = cli_obj_open(&o, cmd, flags, argc, argv, true, errmsg);
    if (rv != 0 || o.r.help) {
        goto out;
    }
    char filter[CLI_SUBJECT_BYTES_MAX];
    snprintf(filter, sizeof filter, "$O.%s.M.>", o.bucket);
    /* The last meta of each object first, then every change: as the nats
     * CLI's watch (with history). */
    rv = cli_obj_subscribe(&o, filter, true, &sub, errmsg);
    for (int64_t got = 0; rv == 0 && (count == 0 || got < count);) {
        natsMsg *m = NULL;
        natsStatus s = natsSubscription_NextMsg(&m, sub, CLI_WAIT_SLICE_MS);
        if (s == NATS_TIMEOUT) {
            continue; /* nothing new yet: keep watching */
        }
        if (s != NATS_OK) {
            rv = cli_obj_nats_err(s, "object watch", errmsg);
            break;
        }
        json_t *meta = msg_meta(m);
        if (meta != NULL) {
            print_watched(m, meta);
            got++;
        }
        json_decref(meta);
        natsMsg_Destroy(m);
    }
out:
    natsSubscription_Destroy(sub);
    cli_obj_close(&o);
    return rv;
}
