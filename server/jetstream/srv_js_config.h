/* srv_js_config: JetStream stream config (docs/protocol.md §2.4) parsed from
 * JSON with every default filled, validated, and encoded back with every
 * field echoed and optional fields absent when empty (Go omitempty). Also
 * the subject helpers (syntax with wildcards, overlap of two subjects) and
 * RFC3339-with-nanoseconds time formatting. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_JS_CONFIG_H
#define KEEL_SRV_JS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "srv_js_err.h"

enum srv_js_retention {
    SRV_JS_RETENTION_LIMITS = 0,
    SRV_JS_RETENTION_INTEREST,
    SRV_JS_RETENTION_WORKQUEUE,
};

enum srv_js_discard { SRV_JS_DISCARD_OLD = 0, SRV_JS_DISCARD_NEW };

enum srv_js_storage { SRV_JS_STORAGE_FILE = 0, SRV_JS_STORAGE_MEMORY };

/* Keel's extension "keel_fsync": when a replica fdatasyncs (docs/design.md §3).
 */
enum srv_js_fsync {
    SRV_JS_FSYNC_GROUP = 0, /* group commit: sync before ack, batched */
    SRV_JS_FSYNC_ALWAYS,    /* one sync per entry */
    SRV_JS_FSYNC_INTERVAL,  /* every fsync_interval_ms */
};

/* One of a mirror's or source's `subject_transforms` {src, dest}
 * (srv_js_config_mirror.c): src selects what is read ("" is ">"), a
 * non-empty dest changes the subject the message is stored under. */
struct srv_feed_xform {
    char *src;              /* owned, as given */
    char *dest;             /* owned, as given; "" = a filter only */
    struct srv_js_xform *x; /* owned, compiled; NULL when dest is "" */
};

/* A stream's `mirror`, or one of its `sources` (srv_js_config_mirror.c,
 * docs/decisions/0032-mirrors-pull-into-the-log.md,
 * docs/decisions/0035-sources-share-the-mirror-pump.md). */
struct srv_stream_mirror {
    char name[SRV_JS_NAME_BYTES_MAX + 1]; /* the origin; "" is accepted */
    uint64_t opt_start_seq;               /* 0 = from the origin's first */
    int64_t opt_start_time_ns;            /* 0 = none */
    char *filter_subject;                 /* owned; NULL = every subject */
    struct srv_feed_xform *xf;            /* owned; nxf, none with a filter */
    uint32_t nxf;                         /* <= SRV_JS_FEED_XFORMS_MAX */
    /* `external` {api, deliver}: the origin is read through the JetStream
     * API under the prefix api (srv_stream_mirror_ext.c); both owned,
     * NULL without `external`, "" for a member it lacks. */
    char *ext_api;
    char *ext_deliver;
};

struct srv_stream_config {
    char name[SRV_JS_NAME_BYTES_MAX + 1];
    char *description; /* NULL when absent */
    char **subjects;   /* default [name]; empty (0, NULL) only for a mirror
                          or a stream with sources */
    uint32_t nsubjects;
    enum srv_js_retention retention;
    int64_t max_consumers;
    int64_t max_msgs;
    int64_t max_bytes;
    int64_t max_msgs_per_subject;
    int64_t max_msg_size;
    int64_t max_age_ns; /* 0 = forever */
    enum srv_js_discard discard;
    enum srv_js_storage storage;
    int64_t num_replicas;
    int64_t duplicate_window_ns;
    bool allow_direct, mirror_direct, sealed, deny_delete, deny_purge,
        allow_rollup_hdrs, no_ack;
    bool discard_new_per_subject; /* needs discard new, max_msgs_per_subject */
    uint64_t first_seq;           /* 0 = absent */
    /* Per-message TTL and subject delete markers (srv_js_config_ttl.c,
     * docs/decisions/0034-per-message-ttl-in-the-state-machine.md). */
    bool allow_msg_ttl;
    int64_t subject_delete_marker_ttl_ns; /* 0 = none */
    /* republish and subject_transform, compiled (srv_js_xform.h); owned,
     * NULL when absent (srv_js_config_xform.c). */
    struct srv_js_xform *republish;
    bool republish_headers_only;
    struct srv_js_xform *transform;
    bool has_mirror;
    struct srv_stream_mirror mirror;   /* when has_mirror */
    struct srv_stream_mirror *sources; /* owned; nsources, names unique */
    uint32_t nsources;                 /* <= SRV_JS_SOURCES_MAX */
    json_t *placement;                 /* owned; NULL when absent */
    json_t *metadata;                  /* owned; NULL when absent or empty */
    json_t *consumer_limits; /* owned; always an object ({} default) */
    enum srv_js_fsync fsync;
    uint32_t fsync_interval_ms; /* only for SRV_JS_FSYNC_INTERVAL */
};

/* Parse a stream config object (the CREATE/UPDATE body or an info's
 * "config"). Unknown fields are ignored; defaults are filled. On an invalid
 * value returns KEEL_EINVAL, sets *jerr (SRV_JS_ESTREAM_CONFIG or
 * SRV_JS_EBAD_REQUEST) and writes the description for the client into
 * errmsg. On success *out owns its memory: free with
 * srv_stream_config_free. *out is zeroed first, so free is always safe. */
KEEL_MUST_USE int srv_stream_config_parse(const json_t *j,
                                          struct srv_stream_config *out,
                                          enum srv_js_err *jerr, char *errmsg);

/* Encode cfg to a new JSON object (caller json_decref's it); every field is
 * present except the optional ones that are empty. Returns 0 or
 * KEEL_ENOMEM. */
KEEL_MUST_USE int srv_stream_config_encode(const struct srv_stream_config *cfg,
                                           json_t **out, char *errmsg);

/* True when a and b are the same configuration (compared by their
 * encodings, so defaults filled either way compare equal): CREATE of an
 * existing stream with an equal config succeeds (docs/protocol.md §2.4). */
bool srv_stream_config_equal(const struct srv_stream_config *a,
                             const struct srv_stream_config *b);

void srv_stream_config_free(struct srv_stream_config *cfg);

/* The config steps of republish and subject_transform
 * (srv_js_config_xform.c): parse after the subjects (their checks need
 * them), encode into the config object o (non-zero when out of memory),
 * free. */
struct srv_js_json_rd;
KEEL_MUST_USE int
srv_stream_config_parse_xforms(const struct srv_js_json_rd *rd,
                               struct srv_stream_config *c);
KEEL_MUST_USE int
srv_stream_config_encode_xforms(const struct srv_stream_config *c, json_t *o);
void srv_stream_config_free_xforms(struct srv_stream_config *c);

/* allow_msg_ttl and subject_delete_marker_ttl (srv_js_config_ttl.c): the
 * parse step (after the mirror step: markers are refused on a mirror) and
 * the encoding into o (non-zero when out of memory). */
KEEL_MUST_USE int srv_stream_config_parse_ttl(const struct srv_js_json_rd *rd,
                                              struct srv_stream_config *c);
KEEL_MUST_USE int
srv_stream_config_encode_ttl(const struct srv_stream_config *c, json_t *o);

/* `mirror` and `sources` (srv_js_config_mirror.c): the parse step (after
 * the flags: mirror_direct needs a mirror; the subjects step leaves a
 * mirror, or a stream with sources and no subjects given, none),
 * its encoding into the config object o (non-zero when out of memory; its
 * filter_subject is freed with the config), and whether two configs have
 * the same mirror (an update may not change it, 10055). */
KEEL_MUST_USE int
srv_stream_config_parse_mirror(const struct srv_js_json_rd *rd,
                               struct srv_stream_config *c);
KEEL_MUST_USE int
srv_stream_config_mirror_json(const struct srv_stream_config *c, json_t *o);
/* Does a stream of config c read origins (a mirror or sources)? */
static inline bool srv_stream_pumps_cfg(const struct srv_stream_config *c)
{
    return c->has_mirror || c->nsources > 0;
}
/* The subjects a read of origin mi keeps (its filter_subject, or its
 * transforms' sources), into out (SRV_JS_FEED_XFORMS_MAX entries, owned
 * by mi): how many, 0 when it keeps every subject. */
uint32_t srv_stream_mirror_filters(const struct srv_stream_mirror *mi,
                                   const char **out);
/* The subject a message of origin mi with subject subj (len bytes) is
 * stored under: true with it in out (*outlen bytes, NUL terminated) when
 * the first of mi's subject_transforms whose source matches and whose
 * result fits changed it, false when it is stored as it is (nats-server
 * passes over a transform that fails the same way). */
bool srv_stream_mirror_xform(const struct srv_stream_mirror *mi,
                             const char *subj, size_t len,
                             char out[SRV_JS_SUBJECT_BYTES_MAX + 1],
                             size_t *outlen);
/* mi's subject_transforms as nats-server encodes them, [{src, dest}]
 * (NULL when out of memory). */
json_t *srv_stream_mirror_xforms_json(const struct srv_stream_mirror *mi);
/* Free the mirror's filter and the sources (srv_stream_config_free). */
void srv_stream_config_free_sources(struct srv_stream_config *c);
/* Are two origins' `external` the same (both absent, or api and deliver
 * equal)? */
bool srv_stream_mirror_ext_equal(const struct srv_stream_mirror *x,
                                 const struct srv_stream_mirror *y);
bool srv_stream_mirror_equal(const struct srv_stream_config *a,
                             const struct srv_stream_config *b);

/* A stream or consumer name: 1..SRV_JS_NAME_BYTES_MAX bytes, none of
 * `. * >`, whitespace, `/` or `\`. */
bool srv_js_name_valid(const char *name);

/* A subject (wildcards allowed when wild): non-empty tokens separated by
 * '.', no whitespace, '*' only as a whole token, '>' only as the whole last
 * token, at most SRV_JS_SUBJECT_BYTES_MAX bytes and SRV_SUBJECT_TOKENS_MAX
 * tokens. */
bool srv_js_subject_valid(const char *subject, bool wild);

/* True when some literal subject matches both a and b (both valid,
 * wildcards allowed). */
bool srv_js_subjects_overlap(const char *a, const char *b);

/* True when literal subject s matches pattern p. */
bool srv_js_subject_matches(const char *p, const char *s);

/* True when every subject matched by sub is also matched by sup. */
bool srv_js_subject_subset(const char *sub, const char *sup);

/* True when any subject of list a overlaps any of list b (two streams may
 * not share a subject, error 10065). */
bool srv_js_subject_lists_overlap(char *const *a, uint32_t na, char *const *b,
                                  uint32_t nb);

/* What a consumer create subject says (docs/protocol.md §2.6). */
struct srv_consumer_create_subj {
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    char consumer[SRV_JS_NAME_BYTES_MAX + 1];  /* "" for the legacy form */
    char filter[SRV_JS_SUBJECT_BYTES_MAX + 1]; /* "" when absent */
    bool durable_form; /* $JS.API.CONSUMER.DURABLE.CREATE.<s>.<d> */
};

/* Parse $JS.API.CONSUMER.CREATE.<stream>[.<consumer>[.<filter tokens>]] or
 * $JS.API.CONSUMER.DURABLE.CREATE.<stream>.<durable>. Returns 0 or
 * KEEL_EINVAL (another subject, an invalid name, a filter of ">" or with
 * invalid tokens). */
KEEL_MUST_USE int
srv_consumer_create_subject_parse(const char *subj, size_t len,
                                  struct srv_consumer_create_subj *out,
                                  char *errmsg);

/* The create request's fields against its subject: the body's stream_name
 * (NULL/"" = absent) must equal the subject's (10056); the legacy form
 * refuses a durable (10020); the named forms need durable_name/name, when
 * present (and durable_name always for DURABLE.CREATE), equal to the subject's
 * consumer (10017); the filter form needs filter_subject equal to the filter
 * (10131). Returns 0 or KEEL_EINVAL with *jerr and errmsg set. */
KEEL_MUST_USE int
srv_consumer_create_check(const struct srv_consumer_create_subj *s,
                          const char *stream_name, const char *durable_name,
                          const char *name, const char *filter_subject,
                          enum srv_js_err *jerr, char *errmsg);

/* Format Unix ns as RFC3339 UTC with nanoseconds,
 * "2026-12-01T01:02:03.000000004Z"; 0 formats as
 * "0001-01-01T00:00:00Z" (Go's zero time, what clients expect for "never").
 * buf needs SRV_JS_TIME_BYTES. */
#define SRV_JS_TIME_BYTES 40
void srv_js_time_format(int64_t unix_ns, char buf[SRV_JS_TIME_BYTES]);

#endif
