/* cli_obj: keel object — Object Store buckets with the nats CLI's verbs and
 * flags. libnats 3.4 has no object store API, so keel speaks the clients'
 * convention itself over JetStream calls (docs/operations.md, "Buckets and
 * objects"): bucket B is the stream OBJ_B, an object is chunks on
 * $O.B.C.<nuid> and one meta message (JSON) on $O.B.M.<base64url(name)>,
 * rolled up on each change, whose digest is "SHA-256=<base64url>".
 */
#ifndef KEEL_CLI_OBJ_H
#define KEEL_CLI_OBJ_H

#include <nats/nats.h>

#include "cli_js.h"

/* Chunk size the clients write by default (smaller if the server's
 * max_payload is). */
#define CLI_OBJ_CHUNK_BYTES (128 * 1024)
/* Object names are the base64 of at most this many bytes, so a meta
 * subject fits CLI_SUBJECT_BYTES_MAX. */
#define CLI_OBJ_NAME_BYTES_MAX 512
#define CLI_OBJ_NUID_LEN 22
/* Bucket names: up to this many letters, digits, '-' and '_'. */
#define CLI_OBJ_BUCKET_BYTES_MAX 200
#define CLI_OBJ_DIGEST_PREFIX "SHA-256="

/* The flags of the object verbs; each verb reads those it takes. */
struct cli_obj_opts {
    const char *name;         /* put --name */
    const char *description;  /* add, put --description */
    const char *output;       /* get -O */
    const char *storage;      /* add --storage (default "file") */
    int64_t ttl_ms;           /* add --ttl */
    int64_t max_bytes;        /* add --max-bucket-size (default -1) */
    int64_t replicas;         /* add --replicas (default 1) */
    int64_t count;            /* watch --count */
    struct cli_list headers;  /* put -H 'Key:Value' */
    struct cli_list metadata; /* add --metadata key=value */
    bool force;               /* put, get, del, seal -f */
    bool names;               /* ls -n */
    bool no_progress;         /* put, get --no-progress */
};

/* A run of one object verb: its flags, arguments and connection, its
 * JetStream context and the bucket (args.items[0]) when the verb names one,
 * with its stream info when the verb needs the bucket to exist. cli_obj()
 * parses, connects and releases; the verb only runs. */
struct cli_obj {
    struct cli_js_run r;
    jsCtx *js;
    const char *bucket; /* NULL when the verb names none */
    char stream[CLI_OBJ_BUCKET_BYTES_MAX + 8]; /* "OBJ_<bucket>" */
    json_t *si;                                /* its STREAM.INFO when bound */
    struct cli_obj_opts opt;
};

/* Whether b is a bucket name: 1 to CLI_OBJ_BUCKET_BYTES_MAX letters,
 * digits, '-' and '_'. */
bool cli_obj_bucket_ok(const char *b);

/* The libnats error of an object call: what failed and the library's last
 * error. */
int cli_obj_nats_err(natsStatus s, const char *what, char *errmsg);

/* in (n bytes) as padded base64url into out (4 * ceil(n / 3) + 1 bytes). */
void cli_obj_b64url(const unsigned char *in, size_t n, char *out);

/* The meta subject of object name in o's bucket into out (len bytes).
 * Returns 0 or KEEL_EUSAGE (empty name, or over CLI_OBJ_NAME_BYTES_MAX). */
int cli_obj_meta_subject(const struct cli_obj *o, const char *name, char *out,
                         size_t len, char *errmsg);

/* The latest meta of object name (STREAM.MSG.GET last_by_subj): *meta owns
 * the parsed JSON. A name never stored is KEEL_ENOENT naming 'keel object
 * ls'; a deleted object is returned (its "deleted" is true). */
int cli_obj_meta_get(struct cli_obj *o, const char *name, json_t **meta,
                     char *errmsg);

/* Publish meta as the object's only meta message (Nats-Rollup: sub). */
int cli_obj_meta_put(struct cli_obj *o, const json_t *meta, char *errmsg);

/* Purge the chunks of the object whose nuid is nuid. */
int cli_obj_purge_chunks(struct cli_obj *o, const char *nuid, char *errmsg);

/* An ordered consumer (no acks, flow control) on filter in o's stream,
 * from the first message, or the last of each subject when last. */
int cli_obj_subscribe(struct cli_obj *o, const char *filter, bool last,
                      natsSubscription **sub, char *errmsg);

/* "Object information for B > NAME" and its lines. */
void cli_obj_print_info(const json_t *meta);

/* keel object put / get (cli_obj_data.c), ls / watch (cli_obj_list.c):
 * run on an open o. */
int cli_obj_put(struct cli_obj *o, char *errmsg);
int cli_obj_get(struct cli_obj *o, char *errmsg);
int cli_obj_ls(struct cli_obj *o, char *errmsg);
int cli_obj_watch(struct cli_obj *o, char *errmsg);

/* keel object ... (the command table: cli_obj.c). */
int cli_obj(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg);

#endif
