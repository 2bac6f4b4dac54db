/* srv_consumer_cfg: consumer config parse/validate/encode/update rules. */
#include "srv_consumer_cfg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "keel/error.h"
#include "srv_js_json.h"
#include "srv_consumer_pause.h"
#include "srv_js_config.h"

static const char *const deliver_names[] = {
    "all",           "last",
    "new",           "by_start_sequence",
    "by_start_time", "last_per_subject"};
static const char *const ack_names[] = {"none", "all", "explicit"};
static const char *const replay_names[] = {"instant", "original"};

void srv_consumer_config_free(struct srv_consumer_config *cfg)
{
    if (cfg == NULL) {
        return;
    }
    free(cfg->description);
    free(cfg->backoff_ns);
    free(cfg->filter_subject);
    srv_js_strv_free(cfg->filter_subjects, cfg->nfilter_subjects);
    free(cfg->deliver_subject);
    free(cfg->deliver_group);
    json_decref(cfg->metadata);
    memset(cfg, 0, sizeof *cfg);
}

static int parse_names(const struct srv_js_json_rd *rd,
                       struct srv_consumer_config *c)
{
    int rv = srv_js_json_name(rd, "durable_name", c->durable_name);
    if (rv == 0) {
        rv = srv_js_json_name(rd, "name", c->name);
    }
    if (rv == 0 && c->durable_name[0] != '\0' && c->name[0] != '\0' &&
        strcmp(c->durable_name, c->name) != 0) {
        rv = srv_js_json_fail(
            rd, "consumer name and durable_name must be equal when "
                "both are set");
    }
    if (rv == 0 && c->durable_name[0] != '\0') {
        memcpy(c->name, c->durable_name, sizeof c->name);
    }
    if (rv == 0) {
        rv = srv_js_json_str(rd, "description", &c->description);
    }
    return rv;
}

/* One of filter_subjects: a subject that overlaps none before it. */
static int filter_ok(const struct srv_js_json_rd *rd, char *const *before,
                     size_t n, const char *s)
{
    if (s == NULL || !srv_js_subject_valid(s, true)) {
        return srv_js_json_fail(rd, "invalid subject in filter_subjects: %s",
                                s != NULL ? s : "(not a string)");
    }
    for (size_t k = 0; k < n; k++) {
        if (srv_js_subjects_overlap(before[k], s)) {
            return srv_js_json_fail(
                rd, "consumer subject filters cannot overlap: %s and %s",
                before[k], s);
        }
    }
    return 0;
}

static int parse_filters(const struct srv_js_json_rd *rd,
                         struct srv_consumer_config *c)
{
    int rv = srv_js_json_str(rd, "filter_subject", &c->filter_subject);
    if (rv != 0) {
        return rv;
    }
    json_t *f = json_object_get(rd->j, "filter_subjects");
    if (f != NULL && !json_is_null(f) && !json_is_array(f)) {
        return srv_js_json_fail(rd,
                                "filter_subjects must be an array of strings");
    }
    size_t n = json_is_array(f) ? json_array_size(f) : 0;
    if (n > SRV_JS_SUBJECTS_MAX) {
        return srv_js_json_fail(rd, "too many filter_subjects (at most %d)",
                                SRV_JS_SUBJECTS_MAX);
    }
    if (n > 0 && c->filter_subject != NULL) {
        return srv_js_json_fail(rd,
                                "consumer can not have both filter_subject and "
                                "filter_subjects: use one of them");
    }
    if (c->filter_subject != NULL &&
        !srv_js_subject_valid(c->filter_subject, true)) {
        return srv_js_json_fail(rd, "invalid filter_subject %s",
                                c->filter_subject);
    }
    if (n == 0) {
        return 0;
    }
    return srv_js_json_subjects(rd, f, n, NULL, filter_ok, &c->filter_subjects,
                                &c->nfilter_subjects);
}

static int parse_start(const struct srv_js_json_rd *rd,
                       struct srv_consumer_config *c)
{
    int64_t seq = 0;
    int rv = srv_js_json_int(rd, "opt_start_seq", 0, &seq);
    if (rv != 0) {
        return rv;
    }
    c->opt_start_seq = (uint64_t)seq;
    json_t *t = json_object_get(rd->j, "opt_start_time");
    if (t != NULL && !json_is_null(t)) {
        const char *s = json_string_value(t);
        if (s == NULL || srv_js_time_parse(s, &c->opt_start_time_ns) != 0) {
            return srv_js_json_fail(rd,
                                    "opt_start_time must be an RFC3339 time");
        }
    }
    bool by_seq = c->deliver_policy == SRV_DELIVER_BY_START_SEQ;
    bool by_time = c->deliver_policy == SRV_DELIVER_BY_START_TIME;
    if (by_seq != (c->opt_start_seq > 0)) {
        return srv_js_json_fail(
            rd, "opt_start_seq is required by and only valid with "
                "deliver_policy by_start_sequence");
    }
    if (by_time != (c->opt_start_time_ns != 0)) {
        return srv_js_json_fail(
            rd, "opt_start_time is required by and only valid with "
                "deliver_policy by_start_time");
    }
    return 0;
}

static int parse_backoff(const struct srv_js_json_rd *rd,
                         struct srv_consumer_config *c)
{
    json_t *f = json_object_get(rd->j, "backoff");
    size_t n = json_is_array(f) ? json_array_size(f) : 0;
    if (n == 0) {
        return 0;
    }
    if (n > SRV_JS_BACKOFF_MAX) {
        return srv_js_json_fail(rd, "too many backoff durations (at most %d)",
                                SRV_JS_BACKOFF_MAX);
    }
    c->backoff_ns = calloc(n, sizeof *c->backoff_ns);
    if (c->backoff_ns == NULL) {
        return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(f, i);
        if (!json_is_integer(d) || json_integer_value(d) <= 0) {
            return srv_js_json_fail(
                rd, "backoff durations must be positive ns integers");
        }
        c->backoff_ns[i] = (int64_t)json_integer_value(d);
    }
    c->nbackoff = (uint32_t)n;
    return 0;
}

static int parse_policies(const struct srv_js_json_rd *rd,
                          struct srv_consumer_config *c)
{
    int v = 0;
    bool present = false;
    int rv =
        srv_js_json_enum(rd, "deliver_policy", deliver_names, 6, &v, &present);
    c->deliver_policy = (enum srv_deliver_policy)v;
    if (rv != 0) {
        return rv;
    }
    /* Absent ack_policy: explicit for pull (what nats.c defaults to), none
     * for push (the zero value clients send when they mean none). */
    v = c->deliver_subject == NULL ? SRV_ACKP_EXPLICIT : SRV_ACKP_NONE;
    rv = srv_js_json_enum(rd, "ack_policy", ack_names, 3, &v, &present);
    c->ack_policy = (enum srv_ack_policy)v;
    if (rv != 0) {
        return rv;
    }
    v = 0;
    rv = srv_js_json_enum(rd, "replay_policy", replay_names, 2, &v, &present);
    c->replay_policy = (enum srv_replay_policy)v;
    return rv;
}

static int parse_numbers(const struct srv_js_json_rd *rd,
                         struct srv_consumer_config *c)
{
    const struct srv_js_json_field f[] = {
        SRV_JS_JSON_INT("ack_wait", 0, &c->ack_wait_ns),
        SRV_JS_JSON_INT("max_deliver", -1, &c->max_deliver),
        SRV_JS_JSON_INT("max_ack_pending", -1, &c->max_ack_pending),
        SRV_JS_JSON_INT("max_waiting", 0, &c->max_waiting),
        SRV_JS_JSON_INT("inactive_threshold", 0, &c->inactive_threshold_ns),
        SRV_JS_JSON_INT("idle_heartbeat", 0, &c->idle_heartbeat_ns),
        SRV_JS_JSON_INT("max_batch", 0, &c->max_batch),
        SRV_JS_JSON_INT("max_expires", 0, &c->max_expires_ns),
        SRV_JS_JSON_INT("max_bytes", 0, &c->max_bytes),
        SRV_JS_JSON_INT("num_replicas", 0, &c->num_replicas),
        SRV_JS_JSON_INT("rate_limit_bps", 0, &c->rate_limit_bps),
        SRV_JS_JSON_BOOL("flow_control", &c->flow_control),
        SRV_JS_JSON_BOOL("headers_only", &c->headers_only),
        SRV_JS_JSON_BOOL("mem_storage", &c->mem_storage),
    };
    int rv = srv_js_json_fields(rd, f, SRV_JS_JSON_NFIELDS(f));
    if (rv != 0) {
        return rv;
    }
    json_t *md = json_object_get(rd->j, "metadata");
    if (json_is_object(md) && json_object_size(md) > 0) {
        c->metadata = json_deep_copy(md);
        if (c->metadata == NULL) {
            return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
        }
    }
    return 0;
}

static void set_defaults(struct srv_consumer_config *c)
{
    bool pull = c->deliver_subject == NULL;
    if (c->ack_wait_ns == 0) {
        c->ack_wait_ns = SRV_JS_ACK_WAIT_NS_DEFAULT;
    }
    if (c->max_deliver == 0) {
        c->max_deliver = -1;
    }
    if (c->max_ack_pending == 0 && c->ack_policy != SRV_ACKP_NONE) {
        c->max_ack_pending = SRV_JS_MAX_ACK_PENDING_DEFAULT;
    }
    if (c->max_ack_pending < 0) {
        c->max_ack_pending = 0; /* -1 means unlimited; stored as 0 */
    }
    if (pull && c->max_waiting == 0) {
        c->max_waiting = SRV_JS_MAX_WAITING_DEFAULT;
    }
    if (c->durable_name[0] == '\0' && c->inactive_threshold_ns == 0) {
        c->inactive_threshold_ns = SRV_JS_INACTIVE_NS_DEFAULT;
    }
}

/* Push-only and pull-only fields, heartbeats, groups. */
static int check_mode(const struct srv_js_json_rd *rd,
                      const struct srv_consumer_config *c)
{
    bool pull = c->deliver_subject == NULL;
    if (c->deliver_subject != NULL &&
        !srv_js_subject_valid(c->deliver_subject, false)) {
        return srv_js_json_fail(
            rd, "invalid deliver_subject %s: use a literal subject",
            c->deliver_subject);
    }
    if (c->idle_heartbeat_ns > 0 &&
        c->idle_heartbeat_ns < SRV_JS_HEARTBEAT_NS_MIN) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_EHEARTBEAT_MIN, rd->errmsg,
                              "consumer idle heartbeat needs to be >= 100ms");
    }
    if (!pull &&
        json_integer_value(json_object_get(rd->j, "max_waiting")) > 0) {
        return srv_js_json_fail(
            rd, "consumer in push mode can not set max_waiting");
    }
    if (pull && c->rate_limit_bps > 0) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_EPULL_RATE_LIMIT, rd->errmsg,
                              "consumer in pull mode can not have rate limit "
                              "set");
    }
    if (pull && (c->deliver_group != NULL || c->flow_control ||
                 c->idle_heartbeat_ns > 0)) {
        return srv_js_json_fail(
            rd, "deliver_group, flow_control and idle_heartbeat need "
                "a push consumer: set deliver_subject");
    }
    if (!pull &&
        (c->max_batch > 0 || c->max_expires_ns > 0 || c->max_bytes > 0)) {
        return srv_js_json_fail(
            rd, "max_batch, max_expires and max_bytes are for pull "
                "consumers only");
    }
    if (c->flow_control && c->idle_heartbeat_ns == 0) {
        return srv_js_json_fail(
            rd, "consumer with flow control also needs heartbeats");
    }
    if (c->nbackoff > 0 && c->max_deliver > 0 &&
        (int64_t)c->nbackoff > c->max_deliver) {
        return srv_js_json_fail(
            rd, "max_deliver must be at least the number of backoff "
                "durations");
    }
    if (c->max_deliver == 0 || c->max_deliver < -1) {
        return srv_js_json_fail(rd, "max_deliver must be -1 or >= 1");
    }
    return 0;
}

static int parse_deliver(const struct srv_js_json_rd *rd,
                         struct srv_consumer_config *c)
{
    int rv = srv_js_json_str(rd, "deliver_subject", &c->deliver_subject);
    return rv == 0 ? srv_js_json_str(rd, "deliver_group", &c->deliver_group)
                   : rv;
}

/* Defaults depend on the whole config (pull or push, durable or not);
 * the mode checks on the defaults. */
static int finish(const struct srv_js_json_rd *rd,
                  struct srv_consumer_config *c)
{
    set_defaults(c);
    return check_mode(rd, c);
}

int srv_consumer_config_parse(const json_t *j, struct srv_consumer_config *out,
                              enum srv_js_err *jerr, char *errmsg)
{
    static int (*const steps[])(const struct srv_js_json_rd *,
                                struct srv_consumer_config *) = {
        parse_names,   parse_deliver, parse_policies, parse_start,
        parse_filters, parse_numbers, parse_backoff,  srv_consumer_parse_pause,
        finish};
    const struct srv_js_json_rd rd = {j, SRV_JS_ECONSUMER_CONFIG, jerr, errmsg};

    memset(out, 0, sizeof *out);
    int rv = srv_js_json_begin(&rd, "consumer config");
    for (size_t i = 0; rv == 0 && i < sizeof steps / sizeof steps[0]; i++) {
        rv = steps[i](&rd, out);
    }
    if (rv != 0) {
        srv_js_json_end(&rd);
        srv_consumer_config_free(out);
    }
    return rv;
}

static int encode_lists(const struct srv_consumer_config *c, json_t *o)
{
    int bad = 0;
    if (c->nfilter_subjects > 0) {
        bad |= json_object_set_new(
            o, "filter_subjects",
            srv_js_json_strv(c->filter_subjects, c->nfilter_subjects));
    }
    if (c->nbackoff > 0) {
        json_t *a = json_array();
        for (uint32_t i = 0; a != NULL && i < c->nbackoff; i++) {
            bad |= json_array_append_new(
                a, json_integer((json_int_t)c->backoff_ns[i]));
        }
        bad |= json_object_set_new(o, "backoff", a);
    }
    if (c->metadata != NULL) {
        bad |= json_object_set(o, "metadata", c->metadata);
    }
    if (c->opt_start_time_ns != 0) {
        char t[SRV_JS_TIME_BYTES];
        srv_js_time_format(c->opt_start_time_ns, t);
        bad |= json_object_set_new(o, "opt_start_time", json_string(t));
    }
    return bad | srv_consumer_encode_pause(c, o);
}

static int encode_optional(const struct srv_consumer_config *c, json_t *o)
{
    const struct {
        const char *key;
        const char *v;
    } s[] = {{"durable_name", c->durable_name},
             {"name", c->name},
             {"description", c->description},
             {"filter_subject", c->filter_subject},
             {"deliver_subject", c->deliver_subject},
             {"deliver_group", c->deliver_group}};
    int bad = 0;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        if (s[i].v != NULL && s[i].v[0] != '\0') {
            bad |= json_object_set_new(o, s[i].key, json_string(s[i].v));
        }
    }
    /* max_ack_pending 0 with acks means "unlimited": echo it as -1 so the
     * encoding parses back to the same config. */
    int64_t map = c->max_ack_pending == 0 && c->ack_policy != SRV_ACKP_NONE
                      ? -1
                      : c->max_ack_pending;
    const struct {
        const char *key;
        int64_t v;
    } n[] = {{"opt_start_seq", (int64_t)c->opt_start_seq},
             {"max_waiting", c->max_waiting},
             {"max_ack_pending", map},
             {"inactive_threshold", c->inactive_threshold_ns},
             {"idle_heartbeat", c->idle_heartbeat_ns},
             {"max_batch", c->max_batch},
             {"max_expires", c->max_expires_ns},
             {"max_bytes", c->max_bytes},
             {"rate_limit_bps", c->rate_limit_bps}};
    for (size_t i = 0; i < sizeof n / sizeof n[0]; i++) {
        if (n[i].v != 0) {
            bad |= json_object_set_new(o, n[i].key,
                                       json_integer((json_int_t)n[i].v));
        }
    }
    const struct {
        const char *key;
        bool v;
    } b[] = {{"flow_control", c->flow_control},
             {"headers_only", c->headers_only},
             {"mem_storage", c->mem_storage}};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
        if (b[i].v) {
            bad |= json_object_set_new(o, b[i].key, json_true());
        }
    }
    return bad | encode_lists(c, o);
}

int srv_consumer_config_encode(const struct srv_consumer_config *c,
                               json_t **out, char *errmsg)
{
    ASSERT(c->deliver_policy <= SRV_DELIVER_LAST_PER_SUBJECT);
    ASSERT(c->ack_policy <= SRV_ACKP_EXPLICIT);
    *out = NULL;
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:s, s:I}", "deliver_policy",
                          deliver_names[c->deliver_policy], "ack_policy",
                          ack_names[c->ack_policy], "ack_wait",
                          (json_int_t)c->ack_wait_ns, "max_deliver",
                          (json_int_t)c->max_deliver, "replay_policy",
                          replay_names[c->replay_policy], "num_replicas",
                          (json_int_t)c->num_replicas);
    return srv_js_json_out(o, o != NULL && encode_optional(c, o) == 0, out,
                           errmsg);
}

bool srv_consumer_config_equal(const struct srv_consumer_config *a,
                               const struct srv_consumer_config *b)
{
    json_t *j[2] = {NULL, NULL};
    int rv = srv_consumer_config_encode(a, &j[0], NULL);
    return srv_js_json_same(rv | srv_consumer_config_encode(b, &j[1], NULL), j);
}

int srv_consumer_config_copy(struct srv_consumer_config *dst,
                             const struct srv_consumer_config *src,
                             char *errmsg)
{
    json_t *j = NULL;
    memset(dst, 0, sizeof *dst);
    int rv = srv_consumer_config_encode(src, &j, errmsg);
    if (rv != 0) {
        return rv;
    }
    enum srv_js_err jerr = SRV_JS_OK;
    rv = srv_consumer_config_parse(j, dst, &jerr, errmsg);
    json_decref(j);
    /* An encoded valid config always parses back; only memory can fail. */
    ASSERT(rv == 0 || rv == KEEL_ENOMEM);
    return rv;
}

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a != NULL ? a : "", b != NULL ? b : "") == 0;
}

int srv_consumer_config_update_check(const struct srv_consumer_config *o,
                                     const struct srv_consumer_config *n,
                                     enum srv_js_err *jerr, char *errmsg)
{
    const char *field = NULL;
    if (o->deliver_policy != n->deliver_policy) {
        field = "deliver_policy";
    } else if (o->opt_start_seq != n->opt_start_seq) {
        field = "opt_start_seq";
    } else if (o->opt_start_time_ns != n->opt_start_time_ns) {
        field = "opt_start_time";
    } else if (o->ack_policy != n->ack_policy) {
        field = "ack_policy";
    } else if (o->replay_policy != n->replay_policy) {
        field = "replay_policy";
    } else if ((o->deliver_subject == NULL) != (n->deliver_subject == NULL)) {
        field = "deliver_subject (push vs pull)";
    } else if (strcmp(o->durable_name, n->durable_name) != 0) {
        field = "durable_name";
    } else if (!str_eq(o->deliver_group, n->deliver_group)) {
        field = "deliver_group";
    }
    if (field != NULL) {
        return SRV_JS_CFG_ERR(jerr, SRV_JS_ECONSUMER_CONFIG, errmsg,
                              "consumer update: %s can not be updated", field);
    }
    return 0;
}

void srv_consumer_config_filters(const struct srv_consumer_config *c,
                                 char *const **list, uint32_t *n)
{
    if (c->filter_subject != NULL) {
        *list = &c->filter_subject;
        *n = 1;
        return;
    }
    *list = c->filter_subjects;
    *n = c->nfilter_subjects;
}

bool srv_consumer_config_matches(const struct srv_consumer_config *c,
                                 const char *subj)
{
    char *const *list = NULL;
    uint32_t n = 0;
    srv_consumer_config_filters(c, &list, &n);
    ASSERT(n <= SRV_JS_SUBJECTS_MAX);
    if (n == 0) {
        return true;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (srv_js_subject_matches(list[i], subj)) {
            return true;
        }
    }
    return false;
}

/* Exactly n decimal digits at *p. */
static bool digits(const char **p, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        char ch = (*p)[i];
        if (ch < '0' || ch > '9') {
            return false;
        }
        x = x * 10 + (ch - '0');
    }
    *p += n;
    *v = x;
    return true;
}

static bool expect(const char **p, char ch)
{
    if (**p != ch) {
        return false;
    }
    (*p)++;
    return true;
}

int srv_js_time_parse(const char *s, int64_t *unix_ns)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *p = s;
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    bool ok = digits(&p, 4, &y) && expect(&p, '-') && digits(&p, 2, &mo) &&
              expect(&p, '-') && digits(&p, 2, &d) &&
              (expect(&p, 'T') || expect(&p, 't')) && digits(&p, 2, &h) &&
              expect(&p, ':') && digits(&p, 2, &mi) && expect(&p, ':') &&
              digits(&p, 2, &sec);
    if (!ok || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
        sec > 60) {
        return KEEL_EINVAL;
    }
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int nd = 0;
        for (; *p >= '0' && *p <= '9'; p++, nd++) {
            if (nd < 9) {
                frac = frac * 10 + (*p - '0');
            }
        }
        if (nd == 0) {
            return KEEL_EINVAL;
        }
        for (; nd < 9; nd++) {
            frac *= 10;
        }
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, oh = 0, om = 0;
        p++;
        if (!digits(&p, 2, &oh) || !expect(&p, ':') || !digits(&p, 2, &om)) {
            return KEEL_EINVAL;
        }
        off = sign * (oh * 3600 + om * 60);
    } else {
        return KEEL_EINVAL;
    }
    if (*p != '\0') {
        return KEEL_EINVAL;
    }
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    int64_t t = (int64_t)timegm(&tm) - off;
    if (y == 1 && mo == 1 && d == 1 && t < 0) {
        *unix_ns = 0; /* Go's zero time means "unset" */
        return 0;
    }
    /* Years past 2262 do not fit int64 nanoseconds (found by fuzz_js_api). */
    if (t > INT64_MAX / 1000000000LL - 1 || t < INT64_MIN / 1000000000LL + 1) {
        return KEEL_EINVAL;
    }
    *unix_ns = t * 1000000000LL + frac;
    return 0;
}
