/* srv_js_config: stream config parse/validate/encode and subject helpers. */
#include "srv_js_config.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"
#include "keel/fsync.h"
#include "srv_js_json.h"

bool srv_js_name_valid(const char *name)
{
    size_t n = strnlen(name, SRV_JS_NAME_BYTES_MAX + 1);
    if (n == 0 || n > SRV_JS_NAME_BYTES_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c == '.' || c == '*' || c == '>' || c == '/' || c == '\\' ||
            isspace(c) || c < 0x20) {
            return false;
        }
    }
    return true;
}

bool srv_js_subject_valid(const char *subject, bool wild)
{
    size_t n = strnlen(subject, SRV_JS_SUBJECT_BYTES_MAX + 1);
    if (n == 0 || n > SRV_JS_SUBJECT_BYTES_MAX) {
        return false;
    }
    size_t tok_start = 0;
    uint32_t ntok = 0;
    for (size_t i = 0; i <= n; i++) {
        unsigned char c = i < n ? (unsigned char)subject[i] : '.';
        if (c != '.') {
            if (isspace(c) || c < 0x20) {
                return false;
            }
            continue;
        }
        size_t len = i - tok_start;
        if (len == 0 || ++ntok > SRV_SUBJECT_TOKENS_MAX) {
            return false;
        }
        const char *t = subject + tok_start;
        bool has_wild = memchr(t, '*', len) != NULL || memchr(t, '>', len);
        if (has_wild) {
            bool star = len == 1 && t[0] == '*';
            bool fwc = len == 1 && t[0] == '>' && i == n;
            if (!wild || !(star || fwc)) {
                return false;
            }
        }
        tok_start = i + 1;
    }
    return true;
}

/* Next token of *s (advances past it and its dot); returns its length. */
static size_t next_token(const char **s, const char **tok)
{
    const char *p = *s;
    const char *dot = strchr(p, '.');
    size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
    *tok = p;
    *s = dot != NULL ? dot + 1 : p + len;
    return len;
}

static bool tok_is(const char *t, size_t len, char c)
{
    return len == 1 && t[0] == c;
}

/* One walk for both questions: does some subject match a and b (overlap,
 * the symmetric case: a wildcard on either side), or does every subject
 * that matches a match b (subset: only b's wildcards cover a's tokens)?
 * Bounded by the token count of a valid subject. */
static bool tokens_cover(const char *a, const char *b, bool either)
{
    for (uint32_t i = 0; i <= SRV_SUBJECT_TOKENS_MAX; i++) {
        bool a_end = *a == '\0', b_end = *b == '\0';
        if (a_end || b_end) {
            return a_end && b_end;
        }
        const char *ta = NULL, *tb = NULL;
        size_t la = next_token(&a, &ta), lb = next_token(&b, &tb);
        if (tok_is(tb, lb, '>') || (either && tok_is(ta, la, '>'))) {
            return true; /* the other has >= 1 token here */
        }
        if (tok_is(ta, la, '>')) {
            return false; /* a matches more tokens than b's literal */
        }
        if (tok_is(tb, lb, '*') || (either && tok_is(ta, la, '*'))) {
            continue;
        }
        if (tok_is(ta, la, '*') || la != lb || memcmp(ta, tb, la) != 0) {
            return false;
        }
    }
    return false;
}

bool srv_js_subjects_overlap(const char *a, const char *b)
{
    return tokens_cover(a, b, true);
}

bool srv_js_subject_subset(const char *sub, const char *sup)
{
    return tokens_cover(sub, sup, false);
}

bool srv_js_subject_matches(const char *p, const char *s)
{
    return srv_js_subject_subset(s, p);
}

bool srv_js_subject_lists_overlap(char *const *a, uint32_t na, char *const *b,
                                  uint32_t nb)
{
    ASSERT(na <= SRV_JS_SUBJECTS_MAX && nb <= SRV_JS_SUBJECTS_MAX);
    for (uint32_t i = 0; i < na; i++) {
        for (uint32_t k = 0; k < nb; k++) {
            if (srv_js_subjects_overlap(a[i], b[k])) {
                return true;
            }
        }
    }
    return false;
}

void srv_js_time_format(int64_t unix_ns, char buf[SRV_JS_TIME_BYTES])
{
    if (unix_ns == 0) {
        snprintf(buf, SRV_JS_TIME_BYTES, "0001-01-01T00:00:00Z");
        return;
    }
    int64_t sec = unix_ns / 1000000000LL;
    int64_t nsec = unix_ns % 1000000000LL;
    if (nsec < 0) {
        nsec += 1000000000LL;
        sec -= 1;
    }
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    char date[24];
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, SRV_JS_TIME_BYTES, "%s.%09" PRId64 "Z", date, nsec);
}

void srv_stream_config_free(struct srv_stream_config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    free(cfg->description);
    srv_js_strv_free(cfg->subjects, cfg->nsubjects);
    json_decref(cfg->placement);
    json_decref(cfg->metadata);
    json_decref(cfg->consumer_limits);
    srv_stream_config_free_xforms(cfg);
    srv_stream_config_free_sources(cfg);
    memset(cfg, 0, sizeof *cfg);
}

static const char *const retention_names[] = {"limits", "interest",
                                              "workqueue"};
static const char *const discard_names[] = {"old", "new"};
static const char *const storage_names[] = {"file", "memory"};

static int parse_fsync(const struct srv_js_json_rd *rd,
                       struct srv_stream_config *c)
{
    static const enum srv_js_fsync policies[] = {
        [KEEL_FSYNC_GROUP] = SRV_JS_FSYNC_GROUP,
        [KEEL_FSYNC_ALWAYS] = SRV_JS_FSYNC_ALWAYS,
        [KEEL_FSYNC_INTERVAL] = SRV_JS_FSYNC_INTERVAL};
    json_t *f = json_object_get(rd->j, "keel_fsync");
    if (f == NULL || json_is_null(f)) {
        return 0;
    }
    const char *s = json_string_value(f);
    enum keel_fsync_policy p = KEEL_FSYNC_GROUP;
    if (s != NULL && keel_fsync_parse(s, SRV_JS_FSYNC_INTERVAL_MS_MAX, &p,
                                      &c->fsync_interval_ms)) {
        c->fsync = policies[p];
        return 0;
    }
    return srv_js_json_fail(rd,
                            "invalid keel_fsync: use \"group\", \"always\" or "
                            "\"interval:<ms>\" with 1..%d ms",
                            SRV_JS_FSYNC_INTERVAL_MS_MAX);
}

/* A mirror takes no subjects and keeps no dedupe window, as nats-server
 * has it (srv_js_config_mirror.c checks the rest). */
static bool mirror_given(const struct srv_js_json_rd *rd)
{
    return json_is_object(json_object_get(rd->j, "mirror"));
}

/* A stream with sources has only the subjects it is given (none is not
 * [name]), as nats-server 2.9.10 has it. */
static bool sources_given(const struct srv_js_json_rd *rd)
{
    const json_t *s = json_object_get(rd->j, "sources");
    return json_is_array(s) && json_array_size(s) > 0;
}

/* One of subjects: a subject none before it repeats. */
static int subject_ok(const struct srv_js_json_rd *rd, char *const *before,
                      size_t n, const char *s)
{
    if (s == NULL || !srv_js_subject_valid(s, true)) {
        return srv_js_json_fail(rd,
                                "invalid subject %s: use dot-separated tokens, "
                                "'*' and '>' only as whole tokens",
                                s != NULL ? s : "(not a string)");
    }
    for (size_t k = 0; k < n; k++) {
        if (strcmp(before[k], s) == 0) {
            return srv_js_json_fail(rd, "duplicate subjects detected");
        }
    }
    return 0;
}

static int parse_subjects(const struct srv_js_json_rd *rd,
                          struct srv_stream_config *c)
{
    json_t *f = json_object_get(rd->j, "subjects");
    size_t n = json_is_array(f) ? json_array_size(f) : 0;
    if (f != NULL && !json_is_null(f) && !json_is_array(f)) {
        return srv_js_json_fail(rd, "subjects must be an array of strings");
    }
    if (n == 0 && (mirror_given(rd) || sources_given(rd))) {
        return 0;
    }
    if (n > SRV_JS_SUBJECTS_MAX) {
        return srv_js_json_fail(rd, "too many subjects (%zu, at most %d)", n,
                                SRV_JS_SUBJECTS_MAX);
    }
    /* None given: the one subject [name], as nats-server has it. */
    return srv_js_json_subjects(rd, f, n, c->name, subject_ok, &c->subjects,
                                &c->nsubjects);
}

static int parse_name(const struct srv_js_json_rd *rd,
                      struct srv_stream_config *c)
{
    const char *name = json_string_value(json_object_get(rd->j, "name"));
    int rv;

    if (name == NULL || name[0] == '\0') {
        return srv_js_json_fail(rd, "stream name is required");
    }
    rv = srv_js_json_name(rd, "name", c->name);
    return rv == 0 ? srv_js_json_str(rd, "description", &c->description) : rv;
}

static void set_defaults(struct srv_stream_config *c)
{
    c->max_consumers = c->max_msgs = c->max_bytes = -1;
    c->max_msgs_per_subject = c->max_msg_size = -1;
    c->num_replicas = 1;
}

/* Limits: 0 means unlimited as well (what clients send for "unset"). */
static int parse_limits(const struct srv_js_json_rd *rd,
                        struct srv_stream_config *c)
{
    const struct srv_js_json_field lim[] = {
        SRV_JS_JSON_INT("max_consumers", -1, &c->max_consumers),
        SRV_JS_JSON_INT("max_msgs", -1, &c->max_msgs),
        SRV_JS_JSON_INT("max_bytes", -1, &c->max_bytes),
        SRV_JS_JSON_INT("max_msgs_per_subject", -1, &c->max_msgs_per_subject),
        SRV_JS_JSON_INT("max_msg_size", -1, &c->max_msg_size)};
    int rv = srv_js_json_fields(rd, lim, SRV_JS_JSON_NFIELDS(lim));
    for (size_t i = 0; rv == 0 && i < SRV_JS_JSON_NFIELDS(lim); i++) {
        if (*lim[i].i == 0) {
            *lim[i].i = -1;
        }
    }
    if (rv == 0) {
        rv = srv_js_json_int(rd, "max_age", 0, &c->max_age_ns);
    }
    if (rv == 0) {
        rv = srv_js_json_int(rd, "num_replicas", 0, &c->num_replicas);
    }
    if (rv != 0) {
        return rv;
    }
    if (c->num_replicas == 0) {
        c->num_replicas = 1;
    }
    if (c->num_replicas > SRV_JS_REPLICAS_MAX) {
        return srv_js_json_fail(rd, "replicas > %d not supported",
                                SRV_JS_REPLICAS_MAX);
    }
    return 0;
}

static int parse_window(const struct srv_js_json_rd *rd,
                        struct srv_stream_config *c)
{
    int64_t w = 0;
    int rv = srv_js_json_int(rd, "duplicate_window", 0, &w);
    if (rv != 0) {
        return rv;
    }
    if (w == 0 && mirror_given(rd)) {
        c->duplicate_window_ns = 0;
        return 0;
    }
    if (w == 0) {
        w = SRV_JS_DUPLICATE_WINDOW_NS_DEFAULT;
        if (c->max_age_ns > 0 && c->max_age_ns < w) {
            w = c->max_age_ns;
        }
    } else if (c->max_age_ns > 0 && w > c->max_age_ns) {
        return srv_js_json_fail(
            rd, "duplicates window can not be larger then max age");
    }
    c->duplicate_window_ns = w;
    return 0;
}

static int parse_flags(const struct srv_js_json_rd *rd,
                       struct srv_stream_config *c)
{
    const struct srv_js_json_field fl[] = {
        SRV_JS_JSON_BOOL("allow_direct", &c->allow_direct),
        SRV_JS_JSON_BOOL("mirror_direct", &c->mirror_direct),
        SRV_JS_JSON_BOOL("sealed", &c->sealed),
        SRV_JS_JSON_BOOL("deny_delete", &c->deny_delete),
        SRV_JS_JSON_BOOL("deny_purge", &c->deny_purge),
        SRV_JS_JSON_BOOL("allow_rollup_hdrs", &c->allow_rollup_hdrs),
        SRV_JS_JSON_BOOL("no_ack", &c->no_ack),
        SRV_JS_JSON_BOOL("discard_new_per_subject",
                         &c->discard_new_per_subject)};
    int rv = srv_js_json_fields(rd, fl, SRV_JS_JSON_NFIELDS(fl));
    if (rv != 0) {
        return rv;
    }
    int r = 0, d = 0, s = 0;
    rv = srv_js_json_enum(rd, "retention", retention_names, 3, &r, NULL);
    if (rv == 0) {
        rv = srv_js_json_enum(rd, "discard", discard_names, 2, &d, NULL);
    }
    if (rv == 0) {
        rv = srv_js_json_enum(rd, "storage", storage_names, 2, &s, NULL);
    }
    c->retention = (enum srv_js_retention)r;
    c->discard = (enum srv_js_discard)d;
    c->storage = (enum srv_js_storage)s;
    return rv;
}

/* Objects echoed as given: placement, metadata, consumer_limits. */
static int parse_objects(const struct srv_js_json_rd *rd,
                         struct srv_stream_config *c)
{
    const char *keys[] = {"placement", "metadata", "consumer_limits"};
    json_t **dst[] = {&c->placement, &c->metadata, &c->consumer_limits};
    for (size_t i = 0; i < 3; i++) {
        json_t *f = json_object_get(rd->j, keys[i]);
        if (f == NULL || json_is_null(f)) {
            continue;
        }
        if (!json_is_object(f)) {
            return srv_js_json_fail(rd, "%s must be an object", keys[i]);
        }
        if (json_object_size(f) == 0 && dst[i] != &c->consumer_limits) {
            continue;
        }
        *dst[i] = json_deep_copy(f);
        if (*dst[i] == NULL) {
            return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
        }
    }
    if (c->consumer_limits == NULL) {
        c->consumer_limits = json_object();
        if (c->consumer_limits == NULL) {
            return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
        }
    }
    return 0;
}

static int parse_first_seq(const struct srv_js_json_rd *rd,
                           struct srv_stream_config *c)
{
    int64_t first_seq = 0;
    int rv = srv_js_json_int(rd, "first_seq", 0, &first_seq);

    c->first_seq = (uint64_t)first_seq;
    if (rv == 0 && c->max_msgs_per_subject > 0 && c->max_msgs > 0 &&
        c->max_msgs_per_subject > c->max_msgs) {
        rv = srv_js_json_fail(rd,
                              "max_msgs_per_subject can not exceed max_msgs");
    }
    return rv;
}

/* discard_new_per_subject refuses a publish to a subject that holds
 * max_msgs_per_subject messages: meaningless without both, so refused
 * with nats-server's texts rather than silently ignored. */
static int check_discard_new_per_subject(const struct srv_js_json_rd *rd,
                                         struct srv_stream_config *c)
{
    if (!c->discard_new_per_subject) {
        return 0;
    }
    if (c->discard != SRV_JS_DISCARD_NEW) {
        return srv_js_json_fail(rd, "discard new per subject requires "
                                    "discard new policy to be set");
    }
    if (c->max_msgs_per_subject <= 0) {
        return srv_js_json_fail(rd, "discard new per subject requires max "
                                    "msgs per subject > 0");
    }
    return 0;
}

int srv_stream_config_parse(const json_t *j, struct srv_stream_config *out,
                            enum srv_js_err *jerr, char *errmsg)
{
    static int (*const steps[])(const struct srv_js_json_rd *,
                                struct srv_stream_config *) = {
        parse_name,
        parse_subjects,
        parse_limits,
        parse_window,
        parse_flags,
        parse_objects,
        parse_fsync,
        parse_first_seq,
        check_discard_new_per_subject,
        srv_stream_config_parse_mirror,
        srv_stream_config_parse_ttl,
        srv_stream_config_parse_xforms};
    const struct srv_js_json_rd rd = {j, SRV_JS_ESTREAM_CONFIG, jerr, errmsg};

    memset(out, 0, sizeof *out);
    set_defaults(out);
    int rv = srv_js_json_begin(&rd, "stream config");
    for (size_t i = 0; rv == 0 && i < sizeof steps / sizeof steps[0]; i++) {
        rv = steps[i](&rd, out);
    }
    if (rv != 0) {
        srv_js_json_end(&rd);
        srv_stream_config_free(out);
    }
    return rv;
}

static const char *fsync_string(const struct srv_stream_config *c, char *buf,
                                size_t len)
{
    switch (c->fsync) {
    case SRV_JS_FSYNC_ALWAYS:
        return "always";
    case SRV_JS_FSYNC_INTERVAL:
        snprintf(buf, len, "interval:%u", c->fsync_interval_ms);
        return buf;
    case SRV_JS_FSYNC_GROUP:
    default:
        return "group";
    }
}

static int encode_optional(const struct srv_stream_config *c, json_t *o)
{
    int bad = 0;
    if (c->description != NULL) {
        bad |=
            json_object_set_new(o, "description", json_string(c->description));
    }
    if (c->discard_new_per_subject) {
        /* Only when set, as nats-server omits it (omitempty). */
        bad |= json_object_set_new(o, "discard_new_per_subject", json_true());
    }
    if (c->first_seq > 0) {
        bad |= json_object_set_new(o, "first_seq",
                                   json_integer((json_int_t)c->first_seq));
    }
    if (c->placement != NULL) {
        bad |= json_object_set(o, "placement", c->placement);
    }
    if (c->metadata != NULL) {
        bad |= json_object_set(o, "metadata", c->metadata);
    }
    bad |= json_object_set(o, "consumer_limits", c->consumer_limits);
    bad |= srv_stream_config_mirror_json(c, o);
    bad |= srv_stream_config_encode_ttl(c, o);
    return bad | srv_stream_config_encode_xforms(c, o);
}

int srv_stream_config_encode(const struct srv_stream_config *c, json_t **out,
                             char *errmsg)
{
    ASSERT((c->nsubjects >= 1 || c->has_mirror || c->nsources > 0) &&
           c->consumer_limits != NULL);
    *out = NULL;
    json_t *subj = srv_js_json_strv(c->subjects, c->nsubjects);
    char fs[32];
    json_t *o = json_pack(
        "{s:s, s:o, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:I,"
        " s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:s, s:s}",
        "name", c->name, "subjects", subj, "retention",
        retention_names[c->retention], "max_consumers",
        (json_int_t)c->max_consumers, "max_msgs", (json_int_t)c->max_msgs,
        "max_bytes", (json_int_t)c->max_bytes, "max_age",
        (json_int_t)c->max_age_ns, "max_msgs_per_subject",
        (json_int_t)c->max_msgs_per_subject, "max_msg_size",
        (json_int_t)c->max_msg_size, "discard", discard_names[c->discard],
        "storage", storage_names[c->storage], "num_replicas",
        (json_int_t)c->num_replicas, "duplicate_window",
        (json_int_t)c->duplicate_window_ns, "allow_direct", c->allow_direct,
        "mirror_direct", c->mirror_direct, "sealed", c->sealed, "deny_delete",
        c->deny_delete, "deny_purge", c->deny_purge, "allow_rollup_hdrs",
        c->allow_rollup_hdrs, "no_ack", c->no_ack, "compression", "none",
        "keel_fsync", fsync_string(c, fs, sizeof fs));
    if (o != NULL && c->nsubjects == 0) {
        json_object_del(o, "subjects"); /* omitempty: a mirror, sources */
    }
    if (o != NULL && c->duplicate_window_ns == 0) {
        json_object_del(o, "duplicate_window");
    }
    return srv_js_json_out(o, o != NULL && encode_optional(c, o) == 0, out,
                           errmsg);
}

bool srv_stream_config_equal(const struct srv_stream_config *a,
                             const struct srv_stream_config *b)
{
    json_t *j[2] = {NULL, NULL};
    int rv = srv_stream_config_encode(a, &j[0], NULL);
    return srv_js_json_same(rv | srv_stream_config_encode(b, &j[1], NULL), j);
}

/* Copy the token at *p (up to the next '.' or end) into dst as a name. */
static bool take_name(const char **p, const char *end, char *dst)
{
    const char *dot = memchr(*p, '.', (size_t)(end - *p));
    size_t len = (size_t)((dot != NULL ? dot : end) - *p);
    if (len == 0 || len > SRV_JS_NAME_BYTES_MAX) {
        return false;
    }
    memcpy(dst, *p, len);
    dst[len] = '\0';
    *p = dot != NULL ? dot + 1 : end;
    return srv_js_name_valid(dst) && (dot == NULL || *p < end);
}

int srv_consumer_create_subject_parse(const char *subj, size_t len,
                                      struct srv_consumer_create_subj *out,
                                      char *errmsg)
{
    static const char create[] = "$JS.API.CONSUMER.CREATE.";
    static const char durable[] = "$JS.API.CONSUMER.DURABLE.CREATE.";
    memset(out, 0, sizeof *out);
    const char *end = subj + len;
    const char *p = NULL;
    if (len > sizeof durable - 1 &&
        memcmp(subj, durable, sizeof durable - 1) == 0) {
        out->durable_form = true;
        p = subj + sizeof durable - 1;
    } else if (len > sizeof create - 1 &&
               memcmp(subj, create, sizeof create - 1) == 0) {
        p = subj + sizeof create - 1;
    } else {
        return keel_err(KEEL_EINVAL, errmsg, "not a consumer create subject");
    }
    bool ok = take_name(&p, end, out->stream);
    if (ok && p < end) {
        ok = take_name(&p, end, out->consumer);
    }
    if (ok && p < end) {
        size_t flen = (size_t)(end - p);
        ok = !out->durable_form && flen <= SRV_JS_SUBJECT_BYTES_MAX;
        if (ok) {
            memcpy(out->filter, p, flen);
            out->filter[flen] = '\0';
            ok = srv_js_subject_valid(out->filter, true) &&
                 strcmp(out->filter, ">") != 0;
        }
    }
    if (!ok || (out->durable_form && out->consumer[0] == '\0')) {
        memset(out, 0, sizeof *out);
        return keel_err(KEEL_EINVAL, errmsg,
                        "bad consumer create subject: use "
                        "$JS.API.CONSUMER.CREATE.<stream>[.<consumer>"
                        "[.<filter>]] or "
                        "$JS.API.CONSUMER.DURABLE.CREATE.<stream>.<durable>");
    }
    return 0;
}

static bool present(const char *s)
{
    return s != NULL && s[0] != '\0';
}

int srv_consumer_create_check(const struct srv_consumer_create_subj *s,
                              const char *stream_name, const char *durable_name,
                              const char *name, const char *filter_subject,
                              enum srv_js_err *jerr, char *errmsg)
{
    ASSERT(s->stream[0] != '\0');
    ASSERT(!s->durable_form || s->consumer[0] != '\0');
    *jerr = SRV_JS_OK;
    if (present(stream_name) && strcmp(stream_name, s->stream) != 0) {
        return SRV_JS_CFG_ERR(jerr, SRV_JS_ESTREAM_NAME_MISMATCH, errmsg,
                              "stream name in subject does not match request");
    }
    if (s->consumer[0] == '\0') {
        if (present(durable_name)) {
            return SRV_JS_CFG_ERR(
                jerr, SRV_JS_EEPHEMERAL_DURABLE, errmsg,
                "consumer expected to be ephemeral but a durable "
                "name was set in request");
        }
        return 0;
    }
    bool bad =
        (present(durable_name) && strcmp(durable_name, s->consumer) != 0) ||
        (present(name) && strcmp(name, s->consumer) != 0) ||
        (s->durable_form && !present(durable_name));
    if (bad) {
        return SRV_JS_CFG_ERR(
            jerr, SRV_JS_EDURABLE_NAME_MISMATCH, errmsg,
            "consumer name in subject does not match durable name "
            "in request");
    }
    if (s->filter[0] != '\0' &&
        (filter_subject == NULL || strcmp(filter_subject, s->filter) != 0)) {
        return SRV_JS_CFG_ERR(jerr, SRV_JS_EFILTER_MISMATCH, errmsg,
                              "Consumer create request did not match filtered "
                              "subject from create subject");
    }
    return 0;
}
