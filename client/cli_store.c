/* keel store dump: the forensic view of a stopped node's data directory
 * (issue 8). The store is opened read-only (store_config.read_only: LMDB
 * MDB_RDONLY, segments O_RDONLY, nothing moved, zeroed or written), so the
 * dump can run on a damaged directory before keeld has touched it. Output
 * is JSON lines: one "node" line, then per group its "record" lines and
 * one "report" line (the store's recovery report: extent, faulty and lost
 * ranges, amnesia, torn tail). Stream names come from the meta group's
 * log; every group directory is dumped, named or not. The fault suite's
 * checker reads this output as each node's view of the stream.
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jansson.h>
#include <xxhash.h>

#include "cli.h"
#include "cli_store.h"
#include "raft.h"
#include "keel_stream_entry.h"
#include "store.h"

#define STORE_DIR_BYTES 4096

struct dump_stream {
    char *name;
    struct store_group_id gid;
    struct store_fsync fsync;
    bool deleted;
};

struct dump {
    char dir[STORE_DIR_BYTES]; /* the store directory (holds meta.lmdb) */
    struct store *s;
    const char *only_stream;
    const char *only_group;
    bool no_payload;
    struct dump_stream *streams;
    size_t nstreams;
    unsigned groups;
    unsigned damaged;
};

static void emit(json_t *o)
{
    if (o == NULL) {
        return;
    }
    char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (line != NULL) {
        fputs(line, stdout);
        fputc('\n', stdout);
        free(line);
    }
    json_decref(o);
}

static void hex16(const uint8_t b[16], char out[33])
{
    store_group_id_hex((const struct store_group_id *)b, out);
}

static int parse_hex16(const char *text, struct store_group_id *out)
{
    if (strlen(text) != 32) {
        return KEEL_EINVAL;
    }
    for (unsigned i = 0; i < 16; i++) {
        unsigned v = 0;
        if (sscanf(text + 2 * i, "%2x", &v) != 1) {
            return KEEL_EINVAL;
        }
        out->b[i] = (uint8_t)v;
    }
    return 0;
}

/* Group ids as keeld derives them (srv_js.c open_meta, srv_stream.c
 * stream_gid): XXH3-128 of a tag, canonical bytes. */
static void gid_of(const char *text, size_t len, struct store_group_id *gid)
{
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(text, len));
    memcpy(gid->b, c.digest, sizeof gid->b);
}

static void meta_gid(struct store_group_id *gid)
{
    static const char tag[] = "keel-js-meta";
    gid_of(tag, sizeof tag - 1, gid);
}

static void stream_gid(const char *name, uint64_t nonce,
                       struct store_group_id *gid)
{
    char buf[512];
    int n =
        snprintf(buf, sizeof buf, "keel-stream:%s:%016" PRIx64, name, nonce);
    gid_of(buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : 0, gid);
}

/* A directory given to --data may be keeld's -sd (the store is its js/)
 * or the store directory itself. */
static int resolve_dir(const char *data, char *out, size_t cap, char *errmsg)
{
    struct stat st;
    char probe[STORE_DIR_BYTES + 32];
    static const char *const subs[] = {"/js", ""};

    for (size_t i = 0; i < 2; i++) {
        snprintf(probe, sizeof probe, "%s%s/meta.lmdb", data, subs[i]);
        if (stat(probe, &st) == 0) {
            int n = snprintf(out, cap, "%s%s", data, subs[i]);
            if (n < 0 || (size_t)n >= cap) {
                return keel_err(KEEL_EINVAL, errmsg, "path too long: %s", data);
            }
            return 0;
        }
    }
    return keel_err(KEEL_ENOENT, errmsg,
                    "no meta.lmdb in %s or %s/js: pass keeld's -sd "
                    "directory (of a stopped node)",
                    data, data);
}

/* A string field, or its base64 when the bytes are not UTF-8 text. */
static void set_bytes(json_t *o, const char *key, const uint8_t *p, size_t n)
{
    static const char tbl[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    json_t *s = json_stringn((const char *)p, n);
    char k64[64];

    if (s != NULL) {
        json_object_set_new(o, key, s);
        return;
    }
    char *b = malloc(4 * (n / 3 + 1) + 1);
    size_t j = 0;
    if (b == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        v |= i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0;
        v |= i + 2 < n ? p[i + 2] : 0;
        b[j++] = tbl[(v >> 18) & 63];
        b[j++] = tbl[(v >> 12) & 63];
        b[j++] = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
        b[j++] = i + 2 < n ? tbl[v & 63] : '=';
    }
    b[j] = '\0';
    snprintf(k64, sizeof k64, "%s_b64", key);
    json_object_set_new(o, k64, json_string(b));
    free(b);
}

/* The Nats-Msg-Id header value of a NATS/1.0 header block, if any. */
static void set_msg_id(json_t *o, const uint8_t *hdr, size_t len)
{
    static const char key[] = "Nats-Msg-Id:";
    size_t kl = sizeof key - 1;
    size_t i = 0;

    while (i < len) {
        size_t e = i;
        while (e < len && hdr[e] != '\n') {
            e++;
        }
        if (e - i > kl && strncasecmp((const char *)hdr + i, key, kl) == 0) {
            size_t a = i + kl;
            size_t b = e;
            while (a < b && hdr[a] == ' ') {
                a++;
            }
            while (b > a && (hdr[b - 1] == '\r' || hdr[b - 1] == ' ')) {
                b--;
            }
            set_bytes(o, "msg_id", hdr + a, b - a);
            return;
        }
        i = e + 1;
    }
}

/* Decode a stream group's NORMAL entry (keel_stream_entry kinds; consumer
 * entries 0x40..0x7F are named by kind only). */
static void decode_stream_entry(const struct dump *d, json_t *o,
                                const uint8_t *p, size_t len)
{
    struct keel_stream_entry e;
    char err[KEEL_ERRMSG_MAX];
    static const char *const kinds[] = {
        [KEEL_STREAM_E_PUBLISH] = "publish", [KEEL_STREAM_E_PURGE] = "purge",
        [KEEL_STREAM_E_DELETE] = "delete",   [KEEL_STREAM_E_CONFIG] = "config",
        [KEEL_STREAM_E_TICK] = "tick",       [KEEL_STREAM_E_MIRROR] = "mirror",
        [KEEL_STREAM_E_SOURCE] = "source"};

    if (len == 0) {
        json_object_set_new(o, "entry", json_string("empty"));
        return;
    }
    if (p[0] >= 0x40 && p[0] <= 0x7f) {
        json_object_set_new(o, "entry", json_string("consumer"));
        json_object_set_new(o, "entry_kind", json_integer(p[0]));
        return;
    }
    if (keel_stream_entry_decode(p, len, &e, err) != 0) {
        json_object_set_new(o, "entry", json_string("undecodable"));
        json_object_set_new(o, "error", json_string(err));
        return;
    }
    json_object_set_new(o, "entry", json_string(kinds[e.kind]));
    if (e.kind == KEEL_STREAM_E_SOURCE) {
        set_bytes(o, "source", (const uint8_t *)e.source, e.source_len);
    }
    if (e.kind == KEEL_STREAM_E_MIRROR || e.kind == KEEL_STREAM_E_SOURCE) {
        json_object_set_new(o, "origin_seq", json_integer((json_int_t)e.seq));
        json_object_set_new(o, "lost", json_integer((json_int_t)e.lost));
    }
    if (e.kind == KEEL_STREAM_E_PUBLISH ||
        ((e.kind == KEEL_STREAM_E_MIRROR || e.kind == KEEL_STREAM_E_SOURCE) &&
         e.subject_len > 0)) {
        json_object_set_new(o, "ts", json_integer(e.ts_ns));
        set_bytes(o, "subject", (const uint8_t *)e.subject, e.subject_len);
        if (e.hdr_len > 0) {
            set_bytes(o, "headers", e.hdr, e.hdr_len);
            set_msg_id(o, e.hdr, e.hdr_len);
        }
        if (!d->no_payload) {
            set_bytes(o, "payload", e.data, e.data_len);
        }
        json_object_set_new(o, "payload_len",
                            json_integer((json_int_t)e.data_len));
    } else if (e.kind == KEEL_STREAM_E_DELETE ||
               e.kind == KEEL_STREAM_E_PURGE) {
        json_object_set_new(o, "seq", json_integer((json_int_t)e.seq));
    }
}

/* Remember what a meta entry says about a stream (create / delete). */
static void meta_learn(struct dump *d, const json_t *e)
{
    const char *op = json_string_value(json_object_get(e, "op"));
    const char *name = json_string_value(json_object_get(e, "name"));
    const char *ghex = json_string_value(json_object_get(e, "group"));
    const char *fs = json_string_value(
        json_object_get(json_object_get(e, "config"), "keel_fsync"));
    struct store_group_id gid;

    if (op == NULL || name == NULL) {
        return;
    }
    for (size_t i = 0; i < d->nstreams; i++) {
        if (strcmp(d->streams[i].name, name) == 0 && !d->streams[i].deleted) {
            d->streams[i].deleted = strcmp(op, "delete") == 0;
            return;
        }
    }
    if (strcmp(op, "create") != 0 || d->nstreams >= CLI_STORE_STREAMS_MAX) {
        return;
    }
    if (ghex == NULL || parse_hex16(ghex, &gid) != 0) {
        uint64_t nonce =
            (uint64_t)json_integer_value(json_object_get(e, "nonce"));
        stream_gid(name, nonce, &gid);
    }
    struct dump_stream *st = &d->streams[d->nstreams];
    memset(st, 0, sizeof *st);
    st->name = strdup(name);
    st->gid = gid;
    if (fs == NULL || store_fsync_parse(fs, &st->fsync, NULL) != 0) {
        st->fsync.policy = STORE_FSYNC_GROUP;
    }
    d->nstreams += st->name != NULL ? 1 : 0;
}

/* One intact record as a JSON line (decoded by the group's role). */
static json_t *record_json(struct dump *d, const char *ghex, const char *name,
                           bool is_meta, const struct store_entry *e)
{
    json_t *o =
        json_pack("{s:s, s:s, s:s?, s:I, s:I, s:s, s:s}", "kind", "record",
                  "group", ghex, "stream", name, "index", (json_int_t)e->index,
                  "term", (json_int_t)e->term, "type",
                  raft_entry_type_name(e->type), "checksum", "ok");
    if (o == NULL || e->type != RAFT_ENTRY_NORMAL) {
        return o;
    }
    if (is_meta) {
        json_error_t jerr;
        json_t *m = json_loadb((const char *)e->payload, e->len, 0, &jerr);
        if (m != NULL) {
            meta_learn(d, m);
            json_object_set_new(o, "meta", m);
        } else {
            set_bytes(o, "payload", e->payload, e->len);
        }
        return o;
    }
    decode_stream_entry(d, o, e->payload, e->len);
    return o;
}

static json_t *bad_record_json(struct store_group *g, const char *ghex,
                               const char *name, uint64_t index, int why)
{
    uint64_t term = 0;
    json_t *o =
        json_pack("{s:s, s:s, s:s?, s:I, s:s, s:s}", "kind", "record", "group",
                  ghex, "stream", name, "index", (json_int_t)index, "checksum",
                  "bad", "error", keel_errname(why));
    if (o != NULL && store_term_at(g, index, &term) == 0) {
        json_object_set_new(o, "term", json_integer((json_int_t)term));
    }
    return o;
}

static json_t *ranges_json(const struct store_range *r, unsigned n)
{
    json_t *a = json_array();
    for (unsigned i = 0; i < n && a != NULL; i++) {
        json_array_append_new(
            a, json_pack("[I, o]", (json_int_t)r[i].from,
                         r[i].to == UINT64_MAX
                             ? json_null()
                             : json_integer((json_int_t)r[i].to)));
    }
    return a;
}

static const char *amnesia_name(enum store_amnesia_reason r)
{
    static const char *const names[] = {
        [STORE_AMNESIA_NONE] = "none",
        [STORE_AMNESIA_RECORDED] = "recorded",
        [STORE_AMNESIA_LOST_RANGE] = "lost_range",
        [STORE_AMNESIA_SNAPSHOT_GAP] = "snapshot_gap",
        [STORE_AMNESIA_INTERVAL_CRASH] = "interval_crash",
        [STORE_AMNESIA_INTERVAL_TAIL] = "interval_tail",
        [STORE_AMNESIA_META_RESET] = "meta_reset",
        [STORE_AMNESIA_BAD_VALUE] = "bad_value"};
    return (unsigned)r < sizeof names / sizeof names[0] ? names[r] : "?";
}

/* The recovery report, with the flags an operator looks for first. */
static json_t *report_json(const char *ghex, const char *name,
                           const struct store_recovery *r, unsigned bad_reads)
{
    json_t *flags = json_array();
    if (r->n_faulty > 0 || bad_reads > 0) {
        json_array_append_new(flags, json_string("FAULTY"));
    }
    if (r->n_lost > 0) {
        json_array_append_new(flags, json_string("LOST"));
    }
    if (r->amnesia) {
        json_array_append_new(flags, json_string("AMNESIA"));
    }
    if (r->torn) {
        json_array_append_new(flags, json_string("TORN_TAIL"));
    }
    json_t *o = json_pack(
        "{s:s, s:s, s:s?, s:o, s:I, s:I, s:I, s:{s:I, s:I}, s:o, s:b, s:I, "
        "s:I, s:o, s:o, s:b, s:s, s:I, s:I, s:{s:I, s:I}, s:i, s:i}",
        "kind", "report", "group", ghex, "stream", name, "flags", flags,
        "first_index", (json_int_t)r->first_index, "last_index",
        (json_int_t)r->last_index, "last_term", (json_int_t)r->last_term,
        "extent", "index", (json_int_t)r->extent_index, "term",
        (json_int_t)r->extent_term, "marker",
        r->has_marker
            ? json_pack("{s:I, s:I}", "index", (json_int_t)r->marker_index,
                        "term", (json_int_t)r->marker_term)
            : json_null(),
        "torn", r->torn, "torn_from", (json_int_t)r->torn_from, "torn_bytes",
        (json_int_t)r->torn_bytes, "faulty",
        ranges_json(r->faulty, r->n_faulty), "lost",
        ranges_json(r->lost, r->n_lost), "amnesia", r->amnesia,
        "amnesia_reason", amnesia_name(r->amnesia_reason), "hard_term",
        (json_int_t)r->hard_term, "max_term_seen", (json_int_t)r->max_term_seen,
        "snapshot", "index", (json_int_t)r->snapshot_index, "term",
        (json_int_t)r->snapshot_term, "quarantined_files",
        (int)r->quarantined_files, "bad_reads", (int)bad_reads);
    return o;
}

/* Every record of one group, then its report. print=false (the meta group
 * when another group is selected) only learns the stream names. */
static int dump_group(struct dump *d, const struct store_group_id *gid,
                      const char *name, const struct store_fsync *pol,
                      bool is_meta, bool print, char *errmsg)
{
    struct store_group *g = NULL;
    struct store_recovery rep;
    struct store_group_info info;
    char ghex[33];
    unsigned bad = 0;
    int rv = store_group_open(d->s, gid, pol, &g, &rep, errmsg);

    store_group_id_hex(gid, ghex);
    if (rv != 0) {
        return rv;
    }
    store_group_info(g, &info);
    for (uint64_t i = info.first_index; i <= info.last_index && i > 0; i++) {
        struct store_entry e;
        memset(&e, 0, sizeof e);
        rv = store_read(g, i, &e, errmsg);
        json_t *o = NULL;
        if (rv == 0) {
            o = record_json(d, ghex, name, is_meta, &e);
            store_entry_free(&e);
        } else if (rv == KEEL_EFAULTY || rv == KEEL_ECORRUPT) {
            o = bad_record_json(g, ghex, name, i, rv);
            bad++;
        } else {
            store_group_close(g);
            return rv;
        }
        rv = 0;
        if (print) {
            emit(o);
        } else {
            json_decref(o);
        }
    }
    if (print) {
        emit(report_json(ghex, name, &rep, bad));
        d->groups++;
        d->damaged +=
            rep.n_faulty > 0 || rep.n_lost > 0 || rep.amnesia || bad > 0;
    }
    store_group_close(g);
    return 0;
}

static const struct dump_stream *stream_of(const struct dump *d,
                                           const struct store_group_id *gid)
{
    for (size_t i = d->nstreams; i-- > 0;) {
        if (memcmp(d->streams[i].gid.b, gid->b, 16) == 0) {
            return &d->streams[i];
        }
    }
    return NULL;
}

static bool wanted(const struct dump *d, const struct store_group_id *gid,
                   const char *name)
{
    char ghex[33];
    store_group_id_hex(gid, ghex);
    if (d->only_group != NULL && strcasecmp(d->only_group, ghex) != 0) {
        return false;
    }
    if (d->only_stream != NULL &&
        (name == NULL || strcmp(d->only_stream, name) != 0)) {
        return false;
    }
    return true;
}

/* Every group directory under groups/ except the meta group's. */
static int dump_others(struct dump *d, const struct store_group_id *meta,
                       char *errmsg)
{
    char path[STORE_DIR_BYTES + 16];
    struct dirent *de;
    unsigned n = 0;
    int rv = 0;

    snprintf(path, sizeof path, "%s/groups", d->dir);
    DIR *dir = opendir(path);
    if (dir == NULL) {
        return 0; /* no group was ever opened */
    }
    while (rv == 0 && (de = readdir(dir)) != NULL && n < CLI_STORE_GROUPS_MAX) {
        struct store_group_id gid;
        if (parse_hex16(de->d_name, &gid) != 0 ||
            memcmp(gid.b, meta->b, 16) == 0) {
            continue;
        }
        n++;
        const struct dump_stream *st = stream_of(d, &gid);
        const char *name = st != NULL ? st->name : NULL;
        struct store_fsync pol = {STORE_FSYNC_GROUP, 0};
        if (!wanted(d, &gid, name)) {
            continue;
        }
        rv = dump_group(d, &gid, name, st != NULL ? &st->fsync : &pol, false,
                        true, errmsg);
    }
    closedir(dir);
    return rv;
}

static int node_line(struct dump *d, char *errmsg)
{
    struct store_config cfg = {.data_dir = d->dir, .read_only = true};
    struct store_node_report rep;
    char inc[33];

    memset(&rep, 0, sizeof rep);
    int rv = store_open(&cfg, &d->s, &rep, errmsg);
    if (rv != 0) {
        emit(json_pack("{s:s, s:s, s:s, s:s}", "kind", "node", "store", d->dir,
                       "meta", "bad", "error", errmsg));
        return rv;
    }
    hex16(rep.incarnation, inc);
    /* meta_v1: values whose checksum leaves the key out (a directory
     * written before envelope version 2); keeld rewrites them at its next
     * start, the dump only reads. */
    emit(json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:I}", "kind", "node",
                   "store", d->dir, "meta", "ok", "incarnation", inc, "fresh",
                   rep.fresh, "os_crash", rep.os_crash, "meta_v1",
                   (json_int_t)rep.meta_v1));
    return 0;
}

static int run_dump(struct dump *d, char *errmsg)
{
    struct store_group_id meta;
    struct store_fsync always = {STORE_FSYNC_ALWAYS, 0};
    int rv = node_line(d, errmsg);

    if (rv != 0) {
        return rv;
    }
    meta_gid(&meta);
    rv = dump_group(d, &meta, NULL, &always, true,
                    d->only_stream == NULL && wanted(d, &meta, NULL), errmsg);
    if (rv == 0) {
        rv = dump_others(d, &meta, errmsg);
    }
    if (rv == 0 && d->only_stream != NULL && d->groups == 0) {
        rv = keel_err(KEEL_ENOENT, errmsg,
                      "stream %s is not in the meta log of %s: run without "
                      "--stream to see every group",
                      d->only_stream, d->dir);
    }
    store_close(d->s, false);
    return rv;
}

int cli_store(const struct cli_cmd *cmd, int argc, char **argv, char *errmsg)
{
    struct cli_conn_opts conn;
    struct cli_args args;
    const char *data = NULL;
    bool help = false;
    struct dump d;
    memset(&d, 0, sizeof d);
    const struct cli_flag flags[] = {
        {"data", 0, CLI_FLAG_STR, &data, "DIR",
         "keeld's -sd directory (or its js/ store) of a STOPPED node"},
        {"stream", 0, CLI_FLAG_STR, &d.only_stream, "S",
         "only the group of stream S (named by the meta log)"},
        {"group", 0, CLI_FLAG_STR, &d.only_group, "HEX",
         "only the group with this 32-hex-digit id"},
        {"no-payload", 0, CLI_FLAG_BOOL, &d.no_payload, NULL,
         "leave message payloads out (payload_len stays)"},
        CLI_FLAG_END,
    };

    cli_conn_opts_init(&conn);
    int rv = cli_parse(cmd, flags, &conn, argc, argv, &args, &help, errmsg);
    if (rv != 0 || help) {
        return rv;
    }
    if (strcmp(args.items[0], "dump") != 0 || data == NULL) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "usage: keel store dump --data DIR [--stream S] "
                        "[--group HEX]");
    }
    rv = resolve_dir(data, d.dir, sizeof d.dir, errmsg);
    d.streams = calloc(CLI_STORE_STREAMS_MAX, sizeof *d.streams);
    if (rv == 0 && d.streams == NULL) {
        rv = keel_err(KEEL_ENOMEM, errmsg, "out of memory");
    }
    rv = rv == 0 ? run_dump(&d, errmsg) : rv;
    for (size_t i = 0; i < d.nstreams; i++) {
        free(d.streams[i].name);
    }
    free(d.streams);
    fflush(stdout);
    return rv;
}
