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

/* One bucket's row: its name, description, creation (to the second) and
 * size. */
static int bucket_row(struct ls_acc *acc, const json_t *info,
                      const char *bucket)
{
    char bytes[32], created[32];
    const json_t *st = json_object_get(info, "state");
    cli_js_bytes(st, "bytes", bytes, sizeof bytes);
    snprintf(created, sizeof created, "%.19s", cli_js_str(info, "created", ""));
    char *t = strchr(created, 'T');
    if (t != NULL) {
        *t = ' ';
    }
    const char *desc =
        cli_js_str(json_object_get(info, "config"), "description", "");
    const char *row[] = {bucket, desc, created, bytes};
    bool ok = cli_table_add(acc->t, row) == 0 &&
              json_array_append_new(acc->all, json_string(bucket)) == 0;
    return ok ? 0 : KEEL_ENOMEM;
}

/* The buckets among one page of streams: those named OBJ_*. */
static int bucket_page(const json_t *streams, void *arg)
{
    int rv = 0;
    for (size_t i = 0; rv == 0 && i < json_array_size(streams); i++) {
        const json_t *info = json_array_get(streams, i);
        const char *name =
            cli_js_str(json_object_get(info, "config"), "name", "");
        if (strncmp(name, "OBJ_", 4) == 0) {
            rv = bucket_row(arg, info, name + 4);
        }
    }
    return rv;
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

/* The next message on sub within wait_ms and its meta (NULL when it is
 * not a JSON object): 0, KEEL_ETIMEOUT (errmsg says what timed out), or
 * the library's error. The caller destroys *m and *meta. */
static int next_meta(natsSubscription *sub, int64_t wait_ms, const char *what,
                     natsMsg **m, json_t **meta, char *errmsg)
{
    *m = NULL;
    *meta = NULL;
    natsStatus s = natsSubscription_NextMsg(m, sub, wait_ms);
    if (s == NATS_TIMEOUT) {
        return keel_err(KEEL_ETIMEOUT, errmsg,
                        "%s: no meta message within --timeout", what);
    }
    if (s != NATS_OK) {
        return cli_obj_nats_err(s, what, errmsg);
    }
    *meta = msg_meta(*m);
    return 0;
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
        json_t *meta = NULL;
        rv = next_meta(sub, o->r.conn.timeout_ms, "object ls", &m, &meta,
                       errmsg);
        natsMsg_Destroy(m);
        if (meta == NULL || json_is_true(json_object_get(meta, "deleted"))) {
            json_decref(meta);
            continue; /* a deleted object, or not one of ours */
        }
        char size[32];
        cli_js_bytes(meta, "size", size, sizeof size);
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

int cli_obj_ls(struct cli_obj *o, char *errmsg)
{
    static const char *const bucket_heads[] = {"Bucket", "Description",
                                               "Created", ">Size"};
    static const char *const object_heads[] = {"Name", ">Size", "Time"};
    bool objects = o->bucket != NULL;
    struct ls_acc acc = {calloc(1, sizeof *acc.t), json_array()};
    int rv = acc.t == NULL || acc.all == NULL
                 ? KEEL_ENOMEM
                 : cli_table_init(acc.t, objects ? 3 : 4,
                                  objects ? object_heads : bucket_heads);
    if (rv == 0 && objects) {
        rv = list_objects(o, &acc, errmsg);
    } else if (rv == 0) {
        rv = cli_js_stream_pages(o->r.nc, o->r.conn.timeout_ms, "object ls",
                                 bucket_page, &acc, errmsg);
    }
    if (rv == 0 && o->opt.names && !o->r.json) {
        print_names(acc.all, objects);
    } else if (rv == 0) {
        cli_js_print_ls(acc.t, acc.all, o->r.json,
                        objects ? "No entries found"
                                : "No Object Store buckets found (add one "
                                  "with 'keel object add')");
    }
    cli_table_destroy(acc.t);
    json_decref(acc.all);
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
        cli_js_bytes(meta, "size", size, sizeof size);
        cli_js_count(meta, "chunks", chunks, sizeof chunks);
        printf("[%s] PUT %s > %s: %s in %s chunks\n", when, bucket, name, size,
               chunks);
    }
    fflush(stdout);
}

int cli_obj_watch(struct cli_obj *o, char *errmsg)
{
    char filter[CLI_SUBJECT_BYTES_MAX];
    snprintf(filter, sizeof filter, "$O.%s.M.>", o->bucket);
    /* The last meta of each object first, then every change: as the nats
     * CLI's watch (with history). */
    natsSubscription *sub = NULL;
    int rv = cli_obj_subscribe(o, filter, true, &sub, errmsg);
    int64_t got = 0;
    while (rv == 0 && (o->opt.count == 0 || got < o->opt.count)) {
        natsMsg *m = NULL;
        json_t *meta = NULL;
        rv = next_meta(sub, CLI_WAIT_SLICE_MS, "object watch", &m, &meta,
                       errmsg);
        if (meta != NULL) {
            print_watched(m, meta);
            got++;
        }
        json_decref(meta);
        natsMsg_Destroy(m);
        if (rv == KEEL_ETIMEOUT) {
            rv = 0; /* nothing new yet: keep watching */
            errmsg[0] = '\0';
        }
    }
    natsSubscription_Destroy(sub);
    return rv;
}
