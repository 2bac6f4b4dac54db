/* keel stream backup NAME FILE / keel stream restore FILE (docs/backup.md).
 *
 * Backup reads the stream through a temporary pull consumer (ack none) in
 * batches, up to the last sequence it saw when it started, into FILE.tmp,
 * then renames it: a FILE that exists is complete. Restore verifies the
 * whole archive first, creates the stream, republishes every message with
 * a window of asynchronous publishes, and checks that the k-th PubAck
 * carries the k-th sequence after the new stream's start, so nothing was
 * lost, duplicated or interleaved by another publisher.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "keel/assert.h"
#include "cli_backup.h"
#include "cli_js.h"

#define BACKUP_BATCH 1000

struct backup {
    natsConnection *nc;
    struct cli_bak bak;
    struct cli_progress prog;
    uint64_t last_seq; /* stop here: the stream's last seq at the start */
    uint64_t done;     /* messages written */
    bool finished;
};

/* The "key: value" lines of the message's headers written into buf (cap
 * bytes; NULL to measure only); returns the bytes they take. */
static size_t header_lines(natsMsg *m, const char **keys, int nkeys, char *buf,
                           size_t cap)
{
    size_t used = 0;

    for (int i = 0; i < nkeys; i++) {
        const char **vals = NULL;
        int nv = 0;
        if (natsMsgHeader_Values(m, keys[i], &vals, &nv) != NATS_OK) {
            continue;
        }
        for (int j = 0; j < nv; j++) {
            size_t n = strlen(keys[i]) + strlen(vals[j]) + 4;
            if (buf != NULL && used + n < cap) {
                snprintf(buf + used, cap - used, "%s: %s\r\n", keys[i],
                         vals[j]);
            }
            used += n;
        }
        free((void *)vals);
    }
    return used;
}

/* The message's header block as NATS/1.0 text, rebuilt from libnats'
 * parsed headers (malloc'ed into *out, "" when none). */
static int header_block(natsMsg *m, char **out, uint32_t *len)
{
    static const char first[] = "NATS/1.0\r\n";
    const char **keys = NULL;
    int nkeys = 0;
    size_t cap;
    size_t used;
    char *buf = NULL;
    *out = NULL;
    *len = 0;
    if (natsMsgHeader_Keys(m, &keys, &nkeys) != NATS_OK || nkeys == 0) {
        free((void *)keys);
        return 0;
    }
    cap = sizeof first + header_lines(m, keys, nkeys, NULL, 0) + 2;
    buf = malloc(cap + 1);
    if (buf == NULL) {
        free((void *)keys);
        return KEEL_ENOMEM;
    }
    used = (size_t)snprintf(buf, cap, "%s", first);
    used += header_lines(m, keys, nkeys, buf + used, cap - used);
    used += (size_t)snprintf(buf + used, cap - used, "\r\n");
    free((void *)keys);
    *out = buf;
    *len = (uint32_t)used;
    return 0;
}

static int backup_one(natsMsg *m, void *arg, char *errmsg)
{
    struct backup *b = arg;
    struct cli_bak_msg bm = {0};
    uint64_t pending = 0;
    char *hdr = NULL;
    if (cli_js_ack_meta(natsMsg_GetReply(m), &bm.seq, &bm.time_ns, &pending) !=
        0) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "backup: a delivery without its sequence");
    }
    if (bm.seq > b->last_seq) {
        b->finished = true; /* published after the backup started */
        return 0;
    }
    int rv = header_block(m, &hdr, &bm.hdr_len);
    bm.subject = (char *)natsMsg_GetSubject(m);
    bm.subject_len = (uint32_t)strlen(bm.subject);
    bm.hdr = (unsigned char *)hdr;
    bm.data = (unsigned char *)natsMsg_GetData(m);
    bm.data_len = (uint32_t)natsMsg_GetDataLength(m);
    if (rv == 0) {
        rv = cli_bak_write_msg(&b->bak, &bm, errmsg);
    }
    free(hdr);
    b->done++;
    b->finished = b->finished || bm.seq == b->last_seq || pending == 0;
    cli_progress_update(&b->prog, b->done);
    return rv;
}

/* Create the temporary consumer; *name gets its name. */
static int make_consumer(natsConnection *nc, int64_t timeout_ms,
                         const char *stream, char *name, size_t len,
                         char *errmsg)
{
    char api[CLI_SUBJECT_BYTES_MAX];
    char body[512];
    snprintf(name, len, "keel_backup_%d", (int)getpid());
    snprintf(body, sizeof body,
             "{\"stream_name\":\"%s\",\"config\":{\"durable_name\":\"%s\","
             "\"ack_policy\":\"none\",\"deliver_policy\":\"all\","
             "\"max_waiting\":4}}",
             stream, name);
    snprintf(api, sizeof api, "CONSUMER.CREATE.%s.%s", stream, name);
    return cli_js_request(nc, timeout_ms, "backup: create the reader", api,
                          body, NULL, NULL, errmsg);
}

static int copy_messages(struct backup *b, const char *stream, const char *cons,
                         int64_t timeout_ms, char *errmsg)
{
    int rv = 0;
    /* Bounded: every round either adds a message or ends the copy. */
    for (uint64_t round = 0; rv == 0 && !b->finished &&
                             round < CLI_BACKUP_MSGS_MAX / BACKUP_BATCH + 1;
         round++) {
        int64_t got = 0;
        rv = cli_js_pull(b->nc, stream, cons, BACKUP_BATCH, timeout_ms,
                         backup_one, b, &got, errmsg);
        if (rv == 0 && got == 0) {
            b->finished = true;
        }
    }
    return rv;
}

static int backup_run(struct backup *b, const struct cli_conn_opts *conn,
                      const char *stream, const char *path, char *errmsg)
{
    char api[CLI_SUBJECT_BYTES_MAX];
    char tmp[4200];
    char cons[64] = "";
    json_t *info = NULL;
    snprintf(api, sizeof api, "STREAM.INFO.%s", stream);
    int rv = cli_js_request(b->nc, conn->timeout_ms, "backup", api, NULL, &info,
                            NULL, errmsg);
    if (rv != 0) {
        return rv;
    }
    const json_t *st = json_object_get(info, "state");
    b->last_seq = (uint64_t)cli_js_int(st, "last_seq", 0);
    b->finished = cli_js_int(st, "messages", 0) == 0;
    cli_progress_init(&b->prog, "messages",
                      (uint64_t)cli_js_int(st, "messages", 0));
    char *cfg = json_dumps(json_object_get(info, "config"), JSON_COMPACT);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = cfg != NULL ? fopen(tmp, "wb") : NULL;
    if (f == NULL) {
        rv = cfg == NULL ? KEEL_ENOMEM
                         : keel_err(KEEL_EIO, errmsg, "cannot write %s", tmp);
    }
    if (rv == 0) {
        rv = cli_bak_write_start(&b->bak, f, cfg, errmsg);
    }
    if (rv == 0 && !b->finished) {
        rv = make_consumer(b->nc, conn->timeout_ms, stream, cons, sizeof cons,
                           errmsg);
    }
    if (rv == 0) {
        rv = copy_messages(b, stream, cons, conn->timeout_ms, errmsg);
    }
    if (rv == 0) {
        rv = cli_bak_write_end(&b->bak, errmsg);
    }
    if (f != NULL && (fflush(f) != 0 || fsync(fileno(f)) != 0) && rv == 0) {
        rv = keel_err(KEEL_EIO, errmsg, "cannot flush %s", tmp);
    }
    if (f != NULL) {
        fclose(f);
    }
    if (rv == 0 && rename(tmp, path) != 0) {
        rv = keel_err(KEEL_EIO, errmsg, "cannot rename %s to %s", tmp, path);
    } else if (rv != 0) {
        unlink(tmp);
    }
    if (cons[0] != '\0') {
        snprintf(api, sizeof api, "CONSUMER.DELETE.%s.%s", stream, cons);
        char ignored[KEEL_ERRMSG_MAX];
        (void)cli_js_request(b->nc, conn->timeout_ms, "backup", api, NULL, NULL,
                             NULL, ignored);
    }
    cli_bak_close(&b->bak);
    free(cfg);
    json_decref(info);
    return rv;
}

int cli_stream_backup(const struct cli_cmd *cmd, int argc, char **argv,
                      char *errmsg)
{
    struct cli_js_run r;
    struct backup b;
    struct cli_flag flags[] = {CLI_FLAG_END};
    memset(&b, 0, sizeof b);
    int rv = cli_js_start(&r, cmd, flags, argc, argv, errmsg);
    if (rv == 0 && !r.help) {
        b.nc = r.nc;
        rv = backup_run(&b, &r.conn, r.args.items[0], r.args.items[1], errmsg);
    }
    if (rv == 0 && !r.help) {
        char n[32];
        cli_progress_done(&b.prog);
        cli_fmt_count(b.done, n, sizeof n);
        printf("Backed up %s messages of stream %s to %s\n", n, r.args.items[0],
               r.args.items[1]);
    }
    cli_js_end(&r);
    return rv;
}
