/* keel stream restore FILE [--name NAME] (docs/backup.md): verify the
 * archive, create the stream, republish every message in order.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "cli_backup.h"
#include "cli_js.h"

struct restore {
    uint64_t base; /* the new stream's last seq before the first publish */
    _Atomic uint64_t acked;
    _Atomic uint64_t bad; /* failed, duplicate or out-of-order acks */
    _Atomic uint64_t first_bad_seq;
    _Atomic uint64_t first_bad_want;
};

/* Acks of one connection arrive in publish order: the k-th must carry
 * base + k, else a message was lost, duplicated or another publisher
 * interleaved. */
static void on_ack(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
                   void *closure)
{
    struct restore *r = closure;
    (void)js;
    uint64_t k = atomic_fetch_add(&r->acked, 1) + 1;
    if (pa == NULL || pae != NULL || pa->Duplicate ||
        pa->Sequence != r->base + k) {
        if (atomic_fetch_add(&r->bad, 1) == 0) {
            atomic_store(&r->first_bad_seq, pa != NULL ? pa->Sequence : 0);
            atomic_store(&r->first_bad_want, r->base + k);
        }
    }
    natsMsg_Destroy(msg);
}

/* Pass 1: read the whole archive, checking every checksum. */
static int verify(FILE *f, uint64_t *count, char **config, char *errmsg)
{
    struct cli_bak b;
    struct cli_bak_msg m = {0};
    bool end = false;
    int rv = cli_bak_read_start(&b, f, config, errmsg);
    for (uint64_t i = 0; rv == 0 && !end && i <= CLI_BACKUP_MSGS_MAX; i++) {
        rv = cli_bak_read_msg(&b, &m, &end, errmsg);
    }
    if (rv == 0 && !end) {
        rv = keel_err(KEEL_ELIMIT, errmsg, "archive holds too many messages");
    }
    *count = b.count;
    cli_bak_msg_free(&m);
    cli_bak_close(&b);
    return rv;
}

/* Create the stream from the archived config (renamed with --name). */
static int create_stream(natsConnection *nc, int64_t timeout_ms,
                         const char *config, const char *name, uint64_t *base,
                         char *out_name, size_t len, char *errmsg)
{
    char api[CLI_SUBJECT_BYTES_MAX + 32];
    json_t *reply = NULL;
    json_t *cfg = json_loads(config, 0, NULL);
    if (cfg == NULL) {
        return keel_err(KEEL_ECORRUPT, errmsg, "archived config is not JSON");
    }
    if (json_object_get(cfg, "mirror") != NULL) {
        /* A mirror takes no publishes, and a new one would copy its
         * origin again (docs/backup.md). */
        int r =
            keel_err(KEEL_EINVAL, errmsg,
                     "the archive holds the mirror %s of %s: a mirror "
                     "takes no publishes; restore its origin's archive, "
                     "then create the mirror anew",
                     cli_js_str(cfg, "name", "?"),
                     cli_js_str(json_object_get(cfg, "mirror"), "name", "?"));
        json_decref(cfg);
        return r;
    }
    const json_t *src = json_object_get(cfg, "sources");
    if (json_array_size(src) > 0) {
        /* Its messages carry the origins' subjects (a publish would reach
         * the origins), and a new stream with sources copies them anew
         * (docs/backup.md). */
        int r = keel_err(KEEL_EINVAL, errmsg,
                         "the archive holds %s, which sources %s%s: its "
                         "messages cannot be published back; restore the "
                         "origins' archives, then create the stream anew",
                         cli_js_str(cfg, "name", "?"),
                         cli_js_str(json_array_get(src, 0), "name", "?"),
                         json_array_size(src) > 1 ? " and others" : "");
        json_decref(cfg);
        return r;
    }
    if (name != NULL) {
        json_object_set_new(cfg, "name", json_string(name));
    }
    snprintf(out_name, len, "%s", cli_js_str(cfg, "name", ""));
    char *body = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    snprintf(api, sizeof api, "STREAM.CREATE.%s", out_name);
    int rv = body == NULL ? KEEL_ENOMEM
                          : cli_js_request(nc, timeout_ms, "restore", api, body,
                                           &reply, NULL, errmsg);
    free(body);
    if (rv == 0) {
        const json_t *st = json_object_get(reply, "state");
        if (cli_js_int(st, "messages", 0) != 0) {
            rv = keel_err(KEEL_EEXIST, errmsg,
                          "stream %s already holds messages: restore into a "
                          "new name with --name, or delete it first",
                          out_name);
        }
        *base = (uint64_t)cli_js_int(st, "last_seq", 0);
    }
    json_decref(reply);
    return rv;
}

static int publish_one(jsCtx *js, const struct cli_bak_msg *m, char *errmsg)
{
    natsMsg *msg = NULL;
    natsStatus s = natsMsg_Create(&msg, m->subject, NULL, (const char *)m->data,
                                  (int)m->data_len);
    /* Re-add each archived header line ("Key: value"). */
    const char *p = (const char *)m->hdr;
    const char *end = p + m->hdr_len;
    const char *line = p != NULL ? memchr(p, '\n', m->hdr_len) : NULL;
    for (p = line != NULL ? line + 1 : end; s == NATS_OK && p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *colon = memchr(p, ':', (size_t)((nl ? nl : end) - p));
        if (nl == NULL || colon == NULL) {
            break;
        }
        char key[CLI_HEADER_KEY_BYTES_MAX];
        size_t kl = (size_t)(colon - p);
        const char *v = colon + 1 + (colon[1] == ' ');
        size_t vl = (size_t)(nl - v) - (nl > v && nl[-1] == '\r');
        char *val = strndup(v, vl);
        snprintf(key, sizeof key, "%.*s", (int)kl, p);
        s = val != NULL ? natsMsgHeader_Add(msg, key, val) : NATS_NO_MEMORY;
        free(val);
        p = nl + 1;
    }
    if (s == NATS_OK) {
        s = js_PublishMsgAsync(js, &msg, NULL);
    }
    natsMsg_Destroy(msg);
    return s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "restore: publish");
}

/* Pass 2: republish every message through a window of async publishes. */
static int republish(jsCtx *js, FILE *f, uint64_t total, char *errmsg)
{
    struct cli_bak b;
    struct cli_bak_msg m = {0};
    struct cli_progress prog;
    char *config = NULL;
    bool end = false;
    cli_progress_init(&prog, "messages", total);
    rewind(f);
    int rv = cli_bak_read_start(&b, f, &config, errmsg);
    for (uint64_t i = 0; rv == 0 && i <= total; i++) {
        rv = cli_bak_read_msg(&b, &m, &end, errmsg);
        if (rv != 0 || end) {
            break;
        }
        rv = publish_one(js, &m, errmsg);
        cli_progress_update(&prog, i + 1);
    }
    if (rv == 0) {
        jsPubOptions po;
        jsPubOptions_Init(&po);
        po.MaxWait = CLI_BENCH_STALL_MS_DEFAULT;
        natsStatus s = js_PublishAsyncComplete(js, &po);
        rv = s == NATS_OK ? 0 : cli_nats_err(s, errmsg, "restore: wait acks");
    }
    prog.done = b.count;
    cli_progress_done(&prog);
    free(config);
    cli_bak_msg_free(&m);
    cli_bak_close(&b);
    return rv;
}

static int restore_run(const struct cli_conn_opts *conn, const char *path,
                       const char *name, char *errmsg)
{
    struct restore r = {0};
    natsConnection *nc = NULL;
    jsCtx *js = NULL;
    char *config = NULL;
    char sname[CLI_SUBJECT_BYTES_MAX];
    uint64_t count = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return keel_err(KEEL_EIO, errmsg, "cannot open %s", path);
    }
    int rv = verify(f, &count, &config, errmsg);
    if (rv == 0) {
        rv = cli_connect_default(conn, &nc, errmsg);
    }
    if (rv == 0) {
        rv = create_stream(nc, conn->timeout_ms, config, name, &r.base, sname,
                           sizeof sname, errmsg);
    }
    if (rv == 0) {
        rv = cli_js_ctx_async(nc, conn->timeout_ms, CLI_BENCH_STALL_MS_DEFAULT,
                              CLI_BACKUP_WINDOW, on_ack, &r, &js, errmsg);
    }
    if (rv == 0) {
        rv = republish(js, f, count, errmsg);
    }
    if (rv == 0 &&
        (atomic_load(&r.bad) > 0 || atomic_load(&r.acked) != count)) {
        rv = keel_err(KEEL_EIO, errmsg,
                      "restore into %s is not exact: %llu of %llu acks "
                      "wrong (first: seq %llu where %llu was due); another "
                      "publisher may have written to it — delete it and "
                      "restore again",
                      sname, (unsigned long long)atomic_load(&r.bad),
                      (unsigned long long)count,
                      (unsigned long long)atomic_load(&r.first_bad_seq),
                      (unsigned long long)atomic_load(&r.first_bad_want));
    }
    if (rv == 0) {
        char n[32];
        cli_fmt_count(count, n, sizeof n);
        printf("Restored %s messages into stream %s (seq %llu..%llu)\n", n,
               sname, (unsigned long long)r.base + 1,
               (unsigned long long)(r.base + count));
    }
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
    free(config);
    fclose(f);
    return rv;
}

int cli_stream_restore(const struct cli_cmd *cmd, int argc, char **argv,
                       char *errmsg)
{
    struct cli_js_run r;
    const char *name = NULL;
    struct cli_flag flags[] = {
        {"name", 0, CLI_FLAG_STR, &name, "NAME",
         "restore under another stream name"},
        CLI_FLAG_END,
    };
    /* restore_run connects once the archive has been verified. */
    int rv = cli_js_parse(&r, cmd, flags, argc, argv, errmsg);
    return rv != 0 || r.help
               ? rv
               : restore_run(&r.conn, r.args.items[0], name, errmsg);
}
