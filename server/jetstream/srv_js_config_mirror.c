/* srv_js_config_mirror: a stream config's `mirror` {name, opt_start_seq,
 * opt_start_time, filter_subject}: read, checked with nats-server 2.9's
 * texts and codes, encoded back with Go's omitempty
 * (docs/jetstream-config.md, docs/decisions/0032-mirrors-pull-into-the-log.md).
 * `external` and `subject_transforms` are refused by name before this
 * (srv_js_unsupported.c). Pure: no I/O, no clock. */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_consumer_cfg.h"
#include "srv_js_config.h"
#include "srv_js_json.h"

static int mirror_fields(const struct srv_js_json_rd *m,
                         struct srv_stream_mirror *mi)
{
    const json_t *n = json_object_get(m->j, "name");
    if (n != NULL && !json_is_null(n) && !json_is_string(n)) {
        return srv_js_json_fail(m, "mirror name must be a string");
    }
    const char *name = json_string_value(n);
    /* nats-server accepts an empty origin name (the mirror waits, as for
     * a missing origin); any other must be a stream name. */
    if (name != NULL && name[0] != '\0' && !srv_js_name_valid(name)) {
        return srv_js_json_fail(
            m, "mirror name %.64s is not a valid stream name", name);
    }
    if (name != NULL) {
        strcpy(mi->name, name);
    }
    int64_t start = 0;
    int rv = srv_js_json_int(m, "opt_start_seq", 0, &start);
    if (rv != 0) {
        return rv;
    }
    mi->opt_start_seq = (uint64_t)start;
    const json_t *t = json_object_get(m->j, "opt_start_time");
    if (t != NULL && !json_is_null(t)) {
        const char *s = json_string_value(t);
        if (s == NULL || srv_js_time_parse(s, &mi->opt_start_time_ns) != 0) {
            return srv_js_json_fail(m, "mirror opt_start_time must be an "
                                       "RFC3339 time");
        }
    }
    rv = srv_js_json_str(m, "filter_subject", &mi->filter_subject);
    if (rv == 0 && mi->filter_subject != NULL &&
        !srv_js_subject_valid(mi->filter_subject, true)) {
        rv = srv_js_json_fail(m,
                              "mirror filter_subject %.64s is not a valid "
                              "subject",
                              mi->filter_subject);
    }
    return rv;
}

int srv_stream_config_parse_mirror(const struct srv_js_json_rd *rd,
                                   struct srv_stream_config *c)
{
    const json_t *f = json_object_get(rd->j, "mirror");
    if (f == NULL || json_is_null(f)) {
        if (c->mirror_direct) {
            return srv_js_json_fail(rd, "stream has no mirror but does have "
                                        "mirror direct");
        }
        return 0;
    }
    if (!json_is_object(f)) {
        return srv_js_json_fail(rd, "mirror must be an object");
    }
    const json_t *subj = json_object_get(rd->j, "subjects");
    if (json_is_array(subj) && json_array_size(subj) > 0) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_EMIRROR_SUBJECTS, rd->errmsg,
                              "stream mirrors can not contain subjects");
    }
    const json_t *src = json_object_get(rd->j, "sources");
    if (json_is_array(src) && json_array_size(src) > 0) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_EMIRROR_SOURCES, rd->errmsg,
                              "stream mirrors can not also contain other "
                              "sources");
    }
    const struct srv_js_json_rd m = {f, rd->bad, rd->jerr, rd->errmsg};
    c->has_mirror = true;
    return mirror_fields(&m, &c->mirror);
}

int srv_stream_config_mirror_json(const struct srv_stream_config *c, json_t *o)
{
    if (!c->has_mirror) {
        return 0;
    }
    const struct srv_stream_mirror *mi = &c->mirror;
    json_t *m = json_pack("{s:s}", "name", mi->name);
    int bad = m == NULL;
    if (m != NULL && mi->opt_start_seq > 0) {
        bad |= json_object_set_new(m, "opt_start_seq",
                                   json_integer((json_int_t)mi->opt_start_seq));
    }
    if (m != NULL && mi->opt_start_time_ns != 0) {
        char t[SRV_JS_TIME_BYTES];
        srv_js_time_format(mi->opt_start_time_ns, t);
        bad |= json_object_set_new(m, "opt_start_time", json_string(t));
    }
    if (m != NULL && mi->filter_subject != NULL) {
        bad |= json_object_set_new(m, "filter_subject",
                                   json_string(mi->filter_subject));
    }
    return bad | json_object_set_new(o, "mirror", m);
}

bool srv_stream_mirror_equal(const struct srv_stream_config *a,
                             const struct srv_stream_config *b)
{
    if (a->has_mirror != b->has_mirror) {
        return false;
    }
    if (!a->has_mirror) {
        return true;
    }
    const struct srv_stream_mirror *x = &a->mirror, *y = &b->mirror;
    const char *fx = x->filter_subject != NULL ? x->filter_subject : "";
    const char *fy = y->filter_subject != NULL ? y->filter_subject : "";
    return strcmp(x->name, y->name) == 0 &&
           x->opt_start_seq == y->opt_start_seq &&
           x->opt_start_time_ns == y->opt_start_time_ns && strcmp(fx, fy) == 0;
}
