/* keel object put|get: an object's bytes in chunks, its SHA-256 digest,
 * and a progress bar on stderr when it is a terminal.
 *
 * put publishes the chunks on $O.B.C.<new nuid>, then the meta with a
 * rollup, then purges the chunks of the object it replaced: a reader sees
 * the old object or the new one, never a mix. get reads the chunks with an
 * ordered consumer and refuses an object whose bytes do not hash to its
 * digest, writing to a temporary file renamed only once they do.
 */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "keel/assert.h"
#include "cli_js.h"
#include "cli_obj.h"
#include "cli_stream_cfg.h"

#define SHA256_BYTES 32

/* A NUID-shaped id (22 base62 characters) for the chunk subject. */
static int new_nuid(char out[CLI_OBJ_NUID_LEN + 1], char *errmsg)
{
    static const char digits[] =
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    unsigned char rnd[CLI_OBJ_NUID_LEN];
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        return keel_err(KEEL_EIO, errmsg, "no random bytes for the object id");
    }
    for (size_t i = 0; i < sizeof rnd; i++) {
        out[i] = digits[rnd[i] % 62];
    }
    out[CLI_OBJ_NUID_LEN] = '\0';
    return 0;
}

/* Now as RFC 3339 UTC with nanoseconds, the clients' "mtime". */
static void now_rfc3339(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%09ldZ", ts.tv_nsec);
}

static void digest_text(const unsigned char sha[SHA256_BYTES], char *out)
{
    size_t plen = strlen(CLI_OBJ_DIGEST_PREFIX);
    memcpy(out, CLI_OBJ_DIGEST_PREFIX, plen);
    cli_obj_b64url(sha, SHA256_BYTES, out + plen);
}

/* The bytes of an object as they pass (put reads them, get writes them):
 * their count, their SHA-256 and the progress bar. */
struct obj_pass {
    EVP_MD_CTX *md;
    struct cli_progress bar;
    uint64_t bytes;
};

static int pass_start(struct obj_pass *p, uint64_t total, bool quiet,
                      char *errmsg)
{
    p->bytes = 0;
    cli_progress_init(&p->bar, "bytes", total);
    p->bar.tty = p->bar.tty && !quiet;
    p->md = EVP_MD_CTX_new();
    if (p->md == NULL) {
        return KEEL_ENOMEM;
    }
    return EVP_DigestInit_ex(p->md, EVP_sha256(), NULL) == 1
               ? 0
               : keel_err(KEEL_EIO, errmsg, "SHA-256 unavailable in OpenSSL");
}

static void pass_add(struct obj_pass *p, const void *data, size_t n)
{
    EVP_DigestUpdate(p->md, data, n);
    p->bytes += n;
    cli_progress_update(&p->bar, p->bytes);
}

/* Release p; when done, end the bar and put the digest into sha. */
static void pass_end(struct obj_pass *p, bool done,
                     unsigned char sha[SHA256_BYTES])
{
    if (done) {
        cli_progress_done(&p->bar);
        EVP_DigestFinal_ex(p->md, sha, NULL);
    }
    EVP_MD_CTX_free(p->md);
    p->md = NULL;
}

/* What a put is writing: the new object's chunk subject and counts. */
struct put_state {
    char nuid[CLI_OBJ_NUID_LEN + 1];
    char subj[CLI_SUBJECT_BYTES_MAX];
    size_t chunk_bytes; /* 128 KiB, or the server's max_payload if less */
    uint64_t size;
    uint64_t chunks;
    unsigned char sha[SHA256_BYTES];
};

static int put_chunks(struct cli_obj *o, FILE *in, uint64_t total,
                      struct put_state *ps, char *errmsg)
{
    int64_t max = natsConnection_GetMaxPayload(o->r.nc);
    size_t chunk = max > 0 && max < CLI_OBJ_CHUNK_BYTES ? (size_t)max
                                                        : CLI_OBJ_CHUNK_BYTES;
    ps->chunk_bytes = chunk;
    unsigned char *buf = malloc(chunk);
    struct obj_pass pass = {0};
    int rv = buf == NULL ? KEEL_ENOMEM
                         : pass_start(&pass, total, o->opt.no_progress, errmsg);
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.ExpectStream = o->stream;
    while (rv == 0) {
        size_t n = fread(buf, 1, chunk, in);
        if (n == 0) {
            rv = ferror(in) ? keel_err(KEEL_EIO, errmsg, "read the file: %s",
                                       strerror(errno))
                            : 0;
            break;
        }
        jsPubAck *pa = NULL;
        jsErrCode jerr = 0;
        natsStatus s =
            js_Publish(&pa, o->js, ps->subj, buf, (int)n, &po, &jerr);
        jsPubAck_Destroy(pa);
        if (s != NATS_OK) {
            rv = cli_obj_nats_err(s, "publish a chunk", errmsg);
            break;
        }
        pass_add(&pass, buf, n);
        ps->chunks++;
    }
    ps->size = pass.bytes;
    pass_end(&pass, rv == 0, ps->sha);
    free(buf);
    return rv;
}

/* -H 'Key:Value' as the meta's "headers" ({"Key": ["Value", ...]}, the
 * clients' form). */
static int meta_headers(const struct cli_list *items, json_t *meta,
                        char *errmsg)
{
    json_t *h = items->count > 0 ? json_object() : NULL;
    if (items->count > 0 &&
        (h == NULL || json_object_set_new(meta, "headers", h) != 0)) {
        return KEEL_ENOMEM;
    }
    for (int i = 0; i < items->count; i++) {
        char key[CLI_HEADER_KEY_BYTES_MAX];
        const char *value = NULL;
        int rv = cli_pair_split(items->items[i], ':', "header", key, sizeof key,
                                &value, errmsg);
        if (rv != 0) {
            return rv;
        }
        json_t *vals = json_object_get(h, key);
        if (vals == NULL) {
            vals = json_array();
            if (vals == NULL || json_object_set_new(h, key, vals) != 0) {
                return KEEL_ENOMEM;
            }
        }
        if (json_array_append_new(vals, json_string(value)) != 0) {
            return KEEL_ENOMEM;
        }
    }
    return 0;
}

static int put_meta(const struct cli_obj *o, const char *name,
                    const struct put_state *ps, json_t **out, char *errmsg)
{
    char mtime[64], digest[64];
    now_rfc3339(mtime, sizeof mtime);
    digest_text(ps->sha, digest);
    const char *description = o->opt.description;
    json_t *meta = json_pack(
        "{s:s, s:s, s:{s:I}, s:s, s:s, s:I, s:I, s:s, s:s, s:b}", "name", name,
        "description", description != NULL ? description : "", "options",
        "max_chunk_size", (json_int_t)ps->chunk_bytes, "bucket", o->bucket,
        "nuid", ps->nuid, "size", (json_int_t)ps->size, "chunks",
        (json_int_t)ps->chunks, "mtime", mtime, "digest", digest, "deleted", 0);
    int rv = meta == NULL ? KEEL_ENOMEM
                          : meta_headers(&o->opt.headers, meta, errmsg);
    if (rv != 0) {
        json_decref(meta);
        meta = NULL;
    }
    *out = meta;
    return rv;
}

/* The meta of the object name replaces, or NULL: a missing object is no
 * error here. */
static int old_meta(struct cli_obj *o, const char *name, json_t **old,
                    char *errmsg)
{
    int rv = cli_obj_meta_get(o, name, old, errmsg);
    if (rv == KEEL_ENOENT) {
        errmsg[0] = '\0';
        return 0;
    }
    return rv;
}

int cli_obj_put(struct cli_obj *o, char *errmsg)
{
    const char *name = o->opt.name;
    FILE *in = NULL;
    json_t *old = NULL, *meta = NULL;
    struct put_state ps = {0};
    int rv = 0;
    const char *file = o->r.args.count > 1 ? o->r.args.items[1] : NULL;
    if (name == NULL && file != NULL) {
        /* As the nats CLI cleans the path: "./a.pdf" is "a.pdf". */
        for (name = file; strncmp(name, "./", 2) == 0;) {
            name += 2;
        }
    }
    if (name == NULL) {
        rv = keel_err(KEEL_EUSAGE, errmsg,
                      "give a FILE, or --name NAME to read the object from "
                      "stdin");
        goto out;
    }
    uint64_t total = 0;
    in = file != NULL ? fopen(file, "rb") : stdin;
    struct stat st;
    if (in == NULL) {
        rv =
            keel_err(KEEL_ENOENT, errmsg, "open %s: %s", file, strerror(errno));
        goto out;
    }
    if (fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode)) {
        total = (uint64_t)st.st_size;
    }
    /* A bad -H is refused before any chunk is written. */
    meta = json_object();
    rv = meta == NULL ? KEEL_ENOMEM
                      : meta_headers(&o->opt.headers, meta, errmsg);
    json_decref(meta);
    meta = NULL;
    if (rv == 0) {
        rv = old_meta(o, name, &old, errmsg);
    }
    if (rv == 0 && old != NULL && !o->opt.force &&
        !json_is_true(json_object_get(old, "deleted"))) {
        rv = cli_confirm("replace object", name, errmsg);
    }
    if (rv == 0) {
        rv = new_nuid(ps.nuid, errmsg);
    }
    if (rv != 0) {
        goto out;
    }
    snprintf(ps.subj, sizeof ps.subj, "$O.%s.C.%s", o->bucket, ps.nuid);
    rv = put_chunks(o, in, total, &ps, errmsg);
    if (rv == 0) {
        rv = put_meta(o, name, &ps, &meta, errmsg);
    }
    if (rv == 0) {
        rv = cli_obj_meta_put(o, meta, errmsg);
    }
    if (rv != 0) {
        /* Leave no orphan chunks behind; the error above is the one to
         * report. */
        char ignored[KEEL_ERRMSG_MAX];
        if (ps.chunks > 0) {
            (void)cli_obj_purge_chunks(o, ps.nuid, ignored);
        }
        goto out;
    }
    const char *old_nuid = old != NULL ? cli_js_str(old, "nuid", "") : "";
    if (old_nuid[0] != '\0' && strcmp(old_nuid, ps.nuid) != 0) {
        rv = cli_obj_purge_chunks(o, old_nuid, errmsg);
    }
    if (rv == 0) {
        cli_obj_print_info(meta);
    }
out:
    if (in != NULL && in != stdin) {
        fclose(in);
    }
    json_decref(meta);
    json_decref(old);
    return rv;
}

/* A link (options.link) names the object to read instead; the clients
 * refuse links to links, so one hop is all there is. */
static int follow_link(struct cli_obj *o, json_t **meta, char *bucket,
                       size_t blen, char *errmsg)
{
    const json_t *link =
        json_object_get(json_object_get(*meta, "options"), "link");
    if (link == NULL || json_is_null(link)) {
        return 0;
    }
    char name[CLI_OBJ_NAME_BYTES_MAX + 1];
    snprintf(bucket, blen, "%s", cli_js_str(link, "bucket", o->bucket));
    snprintf(name, sizeof name, "%s", cli_js_str(link, "name", ""));
    if (!cli_obj_bucket_ok(bucket)) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "object %s links to bucket '%.40s', not a bucket "
                        "name: put the link again",
                        cli_js_str(*meta, "name", "?"), bucket);
    }
    if (name[0] == '\0') {
        return keel_err(KEEL_EINVAL, errmsg,
                        "object %s is a link to bucket %s: list it with "
                        "'keel object ls %s'",
                        cli_js_str(*meta, "name", "?"), bucket, bucket);
    }
    json_decref(*meta);
    *meta = NULL;
    o->bucket = bucket;
    snprintf(o->stream, sizeof o->stream, "OBJ_%s", bucket);
    return cli_obj_meta_get(o, name, meta, errmsg);
}

/* What a get reads: the expected digest and counts, and what came. */
struct get_state {
    unsigned char want[SHA256_BYTES];
    uint64_t size;
    uint64_t chunks;
    uint64_t got_bytes;
    uint64_t got_chunks;
    unsigned char sha[SHA256_BYTES];
};

static int get_expect(const json_t *meta, struct get_state *gs, char *errmsg)
{
    const char *digest = cli_js_str(meta, "digest", "");
    size_t plen = strlen(CLI_OBJ_DIGEST_PREFIX), n = 0;
    unsigned char raw[SHA256_BYTES + 3];
    if (strncmp(digest, CLI_OBJ_DIGEST_PREFIX, plen) != 0 ||
        cli_b64_decode(digest + plen, raw, sizeof raw, &n) != 0 ||
        n != SHA256_BYTES) {
        return keel_err(KEEL_EPROTO, errmsg,
                        "object %s has digest '%.60s', not SHA-256=<base64>: "
                        "put it again",
                        cli_js_str(meta, "name", "?"), digest);
    }
    memcpy(gs->want, raw, SHA256_BYTES);
    gs->size = (uint64_t)cli_js_int(meta, "size", 0);
    gs->chunks = (uint64_t)cli_js_int(meta, "chunks", 0);
    return 0;
}

static int get_chunks(struct cli_obj *o, const json_t *meta, FILE *out,
                      struct get_state *gs, char *errmsg)
{
    natsSubscription *sub = NULL;
    struct obj_pass pass = {0};
    int rv = pass_start(&pass, gs->size, o->opt.no_progress, errmsg);
    char subj[CLI_SUBJECT_BYTES_MAX];
    snprintf(subj, sizeof subj, "$O.%s.C.%s", o->bucket,
             cli_js_str(meta, "nuid", ""));
    if (rv == 0 && gs->chunks > 0) {
        rv = cli_obj_subscribe(o, subj, false, &sub, errmsg);
    }
    while (rv == 0 && gs->got_chunks < gs->chunks) {
        natsMsg *m = NULL;
        jsMsgMetaData *md_js = NULL;
        natsStatus s = natsSubscription_NextMsg(&m, sub, o->r.conn.timeout_ms);
        if (s == NATS_TIMEOUT) {
            rv = keel_err(KEEL_ETIMEOUT, errmsg,
                          "chunk %" PRIu64 " of %" PRIu64
                          " did not come within --timeout",
                          gs->got_chunks + 1, gs->chunks);
            break;
        }
        if (s != NATS_OK) {
            rv = cli_obj_nats_err(s, "read a chunk", errmsg);
            break;
        }
        size_t n = (size_t)natsMsg_GetDataLength(m);
        uint64_t pending = 0;
        if (natsMsg_GetMetaData(&md_js, m) == NATS_OK) {
            pending = md_js->NumPending;
        }
        jsMsgMetaData_Destroy(md_js);
        pass_add(&pass, natsMsg_GetData(m), n);
        if (n > 0 && fwrite(natsMsg_GetData(m), 1, n, out) != n) {
            rv = keel_err(KEEL_EIO, errmsg, "write the object: %s",
                          strerror(errno));
        }
        natsMsg_Destroy(m);
        gs->got_bytes += n;
        gs->got_chunks++;
        if (rv == 0 && pending == 0 && gs->got_chunks < gs->chunks) {
            rv = keel_err(KEEL_ECORRUPT, errmsg,
                          "the stream holds %" PRIu64
                          " of the object's %" PRIu64 " chunks: put it again",
                          gs->got_chunks, gs->chunks);
        }
    }
    pass_end(&pass, rv == 0, gs->sha);
    natsSubscription_Destroy(sub);
    return rv;
}

/* The file a get writes: -O, else the last part of the object's name. */
static void out_path(const char *opt, const char *name, char *buf, size_t len)
{
    if (opt != NULL) {
        snprintf(buf, len, "%s", opt);
        return;
    }
    char copy[CLI_OBJ_NAME_BYTES_MAX + 1];
    snprintf(copy, sizeof copy, "%s", name);
    snprintf(buf, len, "%s", basename(copy));
}

static int get_check(const json_t *meta, const struct get_state *gs,
                     bool to_stdout, char *errmsg)
{
    if (gs->got_bytes == gs->size &&
        memcmp(gs->sha, gs->want, SHA256_BYTES) == 0) {
        return 0;
    }
    char want[64], got[64];
    digest_text(gs->want, want);
    digest_text(gs->sha, got);
    return keel_err(
        KEEL_ECORRUPT, errmsg,
        "object %s is corrupt: %" PRIu64 " bytes hash to %s, its "
        "meta says %" PRIu64 " bytes %s%s",
        cli_js_str(meta, "name", "?"), gs->got_bytes, got, gs->size, want,
        to_stdout ? " (discard the output)" : "; no file was written");
}

int cli_obj_get(struct cli_obj *o, char *errmsg)
{
    const char *output = o->opt.output;
    json_t *meta = NULL;
    FILE *out = NULL;
    char path[4096], tmp[4096 + 16] = "", bucket[CLI_OBJ_BUCKET_BYTES_MAX + 1];
    struct get_state gs = {0};
    const char *name = o->r.args.items[1];
    int rv = cli_obj_meta_get(o, name, &meta, errmsg);
    if (rv == 0) {
        rv = follow_link(o, &meta, bucket, sizeof bucket, errmsg);
    }
    if (rv == 0 && json_is_true(json_object_get(meta, "deleted"))) {
        rv = keel_err(KEEL_ENOENT, errmsg,
                      "object %s was deleted: list objects with 'keel object "
                      "ls %s'",
                      name, o->bucket);
    }
    if (rv == 0) {
        rv = get_expect(meta, &gs, errmsg);
    }
    if (rv != 0) {
        goto out;
    }
    bool to_stdout = output != NULL && strcmp(output, "-") == 0;
    out_path(output, cli_js_str(meta, "name", name), path, sizeof path);
    if (!to_stdout && !o->opt.force && access(path, F_OK) == 0) {
        rv = cli_confirm("replace file", path, errmsg);
    }
    int fd = -1;
    if (rv == 0 && !to_stdout) {
        /* Next to the target, so the rename is atomic. */
        snprintf(tmp, sizeof tmp, "%s.keel-XXXXXX", path);
        fd = mkstemp(tmp);
        out = fd >= 0 ? fdopen(fd, "wb") : NULL;
        if (out == NULL) {
            rv = keel_err(KEEL_EIO, errmsg, "create %s: %s", tmp,
                          strerror(errno));
            tmp[0] = '\0';
        }
    } else if (rv == 0) {
        out = stdout;
    }
    int64_t start = cli_mono_ms();
    if (rv == 0) {
        rv = get_chunks(o, meta, out, &gs, errmsg);
    }
    if (rv == 0) {
        rv = get_check(meta, &gs, to_stdout, errmsg);
    }
    if (out != NULL && out != stdout && fclose(out) != 0 && rv == 0) {
        rv = keel_err(KEEL_EIO, errmsg, "write %s: %s", tmp, strerror(errno));
    }
    out = NULL;
    if (rv == 0 && tmp[0] != '\0' && rename(tmp, path) != 0) {
        rv = keel_err(KEEL_EIO, errmsg, "rename %s to %s: %s", tmp, path,
                      strerror(errno));
    }
    if (rv == 0) {
        tmp[0] = '\0';
    }
    if (rv == 0 && !to_stdout) {
        char size[32];
        cli_fmt_bytes(gs.got_bytes, size, sizeof size);
        printf("Wrote: %s to %s in %lldms\n", size, path,
               (long long)(cli_mono_ms() - start));
    }
out:
    if (tmp[0] != '\0') {
        unlink(tmp);
    }
    json_decref(meta);
    return rv;
}
