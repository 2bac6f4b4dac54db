/* srv_js_config_mirror: a stream config's `mirror` and `sources`, each
 * {name, opt_start_seq, opt_start_time, filter_subject,
 * subject_transforms}: read, checked with nats-server 2.9's texts and
 * codes (2.10's for subject_transforms), encoded back with Go's omitempty
 * (docs/jetstream-config.md, docs/decisions/0032-mirrors-pull-into-the-log.md,
 * docs/decisions/0035-sources-share-the-mirror-pump.md), and `external`
 * {api, deliver} (docs/decisions/0039-external-origins-through-the-api.md).
 * Pure: no I/O, no clock. */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_consumer_cfg.h"
#include "srv_js_config.h"
#include "srv_js_json.h"
#include "srv_js_xform.h"

/* The codes of a mirror's and a source's transform errors (nats-server
 * 2.10's JSMirror* and JSSource* rows). */
struct xf_codes {
    enum srv_js_err multi, source, dest, overlap;
};
static const struct xf_codes mirror_codes = {
    SRV_JS_EMIRROR_MULTI_FILTERS, SRV_JS_EMIRROR_XFORM_SOURCE,
    SRV_JS_EMIRROR_XFORM_DEST, SRV_JS_EMIRROR_XFORM_OVERLAP};
static const struct xf_codes source_codes = {
    SRV_JS_ESOURCE_MULTI_FILTERS, SRV_JS_ESOURCE_XFORM_SOURCE,
    SRV_JS_ESOURCE_XFORM_DEST, SRV_JS_ESOURCE_XFORM_OVERLAP};

static const char *xf_src(const struct srv_feed_xform *t)
{
    return t->src[0] != '\0' ? t->src : ">";
}

/* The string members k1 and k2 of the object o into *v1 and *v2 (owned;
 * "" when absent). */
static int two_strs(const struct srv_js_json_rd *rd, const json_t *o,
                    const char *k1, char **v1, const char *k2, char **v2)
{
    const struct srv_js_json_rd m = {o, rd->bad, rd->jerr, rd->errmsg};
    int rv = srv_js_json_str(&m, k1, v1);
    if (rv == 0) {
        rv = srv_js_json_str(&m, k2, v2);
    }
    if (rv == 0 && *v1 == NULL) {
        *v1 = strdup("");
    }
    if (rv == 0 && *v2 == NULL) {
        *v2 = strdup("");
    }
    if (rv == 0 && (*v1 == NULL || *v2 == NULL)) {
        rv = keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
    }
    return rv;
}

/* One {src, dest}: copied, src checked, dest compiled when given. */
static int xform_one(const struct srv_js_json_rd *rd, const json_t *o,
                     struct srv_feed_xform *t, const struct xf_codes *codes)
{
    if (!json_is_object(o)) {
        return srv_js_json_fail(rd, "each subject transform must be an "
                                    "object {src, dest}");
    }
    int rv = two_strs(rd, o, "src", &t->src, "dest", &t->dest);
    if (rv != 0) {
        return rv;
    }
    if (!srv_js_subject_valid(xf_src(t), true)) {
        return SRV_JS_CFG_ERR(rd->jerr, codes->source, rd->errmsg,
                              "invalid subject %.200s", t->src);
    }
    if (t->dest[0] == '\0') {
        return 0; /* a filter only, as nats-server has an empty dest */
    }
    t->x = malloc(sizeof *t->x);
    if (t->x == NULL) {
        return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
    }
    char err[KEEL_ERRMSG_MAX];
    if (srv_js_xform_compile(xf_src(t), t->dest, t->x, err) != 0) {
        return SRV_JS_CFG_ERR(rd->jerr, codes->dest, rd->errmsg, "%s", err);
    }
    return 0;
}

/* `subject_transforms`: not with a filter_subject; a mirror's sources may
 * not overlap, a source's may not be a subset of one another (nats-server
 * 2.10's two rules). */
static int parse_xforms(const struct srv_js_json_rd *m,
                        struct srv_stream_mirror *mi,
                        const struct xf_codes *codes)
{
    const json_t *a = json_object_get(m->j, "subject_transforms");
    if (a != NULL && !json_is_null(a) && !json_is_array(a)) {
        return srv_js_json_fail(m, "subject_transforms must be an array");
    }
    size_t n = json_is_array(a) ? json_array_size(a) : 0;
    if (n == 0) {
        return 0;
    }
    if (mi->filter_subject != NULL && mi->filter_subject[0] != '\0') {
        return SRV_JS_CFG_ERR(m->jerr, codes->multi, m->errmsg, "%s",
                              srv_js_err_info(codes->multi)->description);
    }
    if (n > SRV_JS_FEED_XFORMS_MAX) {
        return srv_js_json_fail(m,
                                "too many subject transforms (%zu, at most "
                                "%d)",
                                n, SRV_JS_FEED_XFORMS_MAX);
    }
    mi->xf = calloc(n, sizeof *mi->xf);
    if (mi->xf == NULL) {
        return keel_err(KEEL_ENOMEM, m->errmsg, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        mi->nxf = (uint32_t)(i + 1); /* freed with the config */
        int rv = xform_one(m, json_array_get(a, i), &mi->xf[i], codes);
        if (rv != 0) {
            return rv;
        }
    }
    for (uint32_t i = 0; i < mi->nxf; i++) {
        for (uint32_t k = 0; k < mi->nxf; k++) {
            const char *x = xf_src(&mi->xf[i]), *y = xf_src(&mi->xf[k]);
            bool clash = codes == &mirror_codes ? srv_js_subjects_overlap(x, y)
                                                : srv_js_subject_subset(x, y);
            if (i != k && clash) {
                return SRV_JS_CFG_ERR(
                    m->jerr, codes->overlap, m->errmsg, "%s",
                    srv_js_err_info(codes->overlap)->description);
            }
        }
    }
    return 0;
}

/* A prefix of `external`: a subject without wildcards (nats-server
 * 2.9.10's IsValidPublishSubject). */
static bool prefix_valid(const char *p)
{
    return p[0] != '\0' && srv_js_subject_valid(p, false);
}

/* `external` {api, deliver}: nats-server 2.9.10's checks and codes. The
 * api prefix may not overlap $JS.API (10021: this cluster's own API is
 * reached as $JS.<domain>.API); the deliver prefix takes no wildcards
 * (10024). */
static int parse_external(const struct srv_js_json_rd *rd,
                          struct srv_stream_mirror *mi, const char *what)
{
    const json_t *e = json_object_get(rd->j, "external");
    if (e == NULL || json_is_null(e)) {
        return 0;
    }
    if (!json_is_object(e)) {
        return srv_js_json_fail(rd,
                                "%s external must be an object {api, "
                                "deliver}",
                                what);
    }
    int rv = two_strs(rd, e, "api", &mi->ext_api, "deliver", &mi->ext_deliver);
    if (rv != 0) {
        return rv;
    }
    const char *api = mi->ext_api, *dlv = mi->ext_deliver;
    if (api[0] != '\0' && !prefix_valid(api)) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_ESTREAM_CONFIG, rd->errmsg,
                              "stream external api prefix \"%.200s\" must be "
                              "a valid subject without wildcards",
                              api);
    }
    if (api[0] != '\0' && srv_js_subjects_overlap(api, "$JS.API")) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_EEXTERNAL_API_OVERLAP,
                              rd->errmsg,
                              "stream external api prefix %.200s must not "
                              "overlap with $JS.API",
                              api);
    }
    if (dlv != NULL && dlv[0] != '\0' && !prefix_valid(dlv)) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_EEXTERNAL_DELIVER, rd->errmsg,
                              "stream external delivery prefix %.200s must "
                              "not contain wildcards",
                              dlv);
    }
    return 0;
}

/* One origin's fields; what ("mirror" or "source") names it in errors. */
static int mirror_fields(const struct srv_js_json_rd *m,
                         struct srv_stream_mirror *mi, const char *what)
{
    const json_t *n = json_object_get(m->j, "name");
    if (n != NULL && !json_is_null(n) && !json_is_string(n)) {
        return srv_js_json_fail(m, "%s name must be a string", what);
    }
    const char *name = json_string_value(n);
    /* nats-server accepts an empty origin name (the mirror waits, as for
     * a missing origin); any other must be a stream name. */
    if (name != NULL && name[0] != '\0' && !srv_js_name_valid(name)) {
        return srv_js_json_fail(m, "%s name %.64s is not a valid stream name",
                                what, name);
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
            return srv_js_json_fail(m,
                                    "%s opt_start_time must be an RFC3339 "
                                    "time",
                                    what);
        }
    }
    rv = srv_js_json_str(m, "filter_subject", &mi->filter_subject);
    if (rv == 0 && mi->filter_subject != NULL &&
        !srv_js_subject_valid(mi->filter_subject, true)) {
        rv = srv_js_json_fail(m,
                              "%s filter_subject %.64s is not a valid "
                              "subject",
                              what, mi->filter_subject);
    }
    rv = rv == 0 ? parse_xforms(m, mi,
                                strcmp(what, "mirror") == 0 ? &mirror_codes
                                                            : &source_codes)
                 : rv;
    return rv == 0 ? parse_external(m, mi, what) : rv;
}

/* `sources`: an array of origins, each named once (nats-server 2.9.10
 * keeps one of two with the same name; keeld refuses them as 2.10 does,
 * docs/jetstream-config.md "Sources"). */
static int parse_sources(const struct srv_js_json_rd *rd,
                         struct srv_stream_config *c)
{
    const json_t *f = json_object_get(rd->j, "sources");
    size_t n = json_is_array(f) ? json_array_size(f) : 0;
    if (f != NULL && !json_is_null(f) && !json_is_array(f)) {
        return srv_js_json_fail(rd, "sources must be an array");
    }
    if (n == 0) {
        return 0;
    }
    if (n > SRV_JS_SOURCES_MAX) {
        return srv_js_json_fail(rd, "too many sources (%zu, at most %d)", n,
                                SRV_JS_SOURCES_MAX);
    }
    c->sources = calloc(n, sizeof *c->sources);
    if (c->sources == NULL) {
        return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(f, i);
        if (!json_is_object(o)) {
            return srv_js_json_fail(rd, "each source must be an object");
        }
        const struct srv_js_json_rd m = {o, rd->bad, rd->jerr, rd->errmsg};
        struct srv_stream_mirror *si = &c->sources[i];
        c->nsources = (uint32_t)(i + 1); /* freed with the config */
        int rv = mirror_fields(&m, si, "source");
        if (rv != 0) {
            return rv;
        }
        if (si->name[0] == '\0') {
            return srv_js_json_fail(rd, "source name is required: name the "
                                        "stream to source from");
        }
        if (strcmp(si->name, c->name) == 0) {
            /* nats-server's cycle check starts at the stream itself. */
            return srv_js_json_fail(rd, "detected cycle");
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(c->sources[k].name, si->name) == 0) {
                return srv_js_json_fail(rd, "duplicate source configuration "
                                            "detected");
            }
        }
    }
    return 0;
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
        return parse_sources(rd, c);
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
    return mirror_fields(&m, &c->mirror, "mirror");
}

static json_t *origin_json(const struct srv_stream_mirror *mi)
{
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
    if (m != NULL && mi->nxf > 0) {
        bad |= json_object_set_new(m, "subject_transforms",
                                   srv_stream_mirror_xforms_json(mi));
    }
    if (m != NULL && mi->ext_api != NULL) {
        /* Both, as nats-server's ExternalStream has no omitempty. */
        bad |= json_object_set_new(
            m, "external",
            json_pack("{s:s, s:s}", "api", mi->ext_api, "deliver",
                      mi->ext_deliver != NULL ? mi->ext_deliver : ""));
    }
    if (bad && m != NULL) {
        json_decref(m);
        m = NULL;
    }
    return m;
}

int srv_stream_config_mirror_json(const struct srv_stream_config *c, json_t *o)
{
    if (c->has_mirror) {
        return json_object_set_new(o, "mirror", origin_json(&c->mirror));
    }
    if (c->nsources == 0) {
        return 0;
    }
    json_t *a = json_array();
    int bad = a == NULL;
    for (uint32_t i = 0; a != NULL && i < c->nsources; i++) {
        bad |= json_array_append_new(a, origin_json(&c->sources[i]));
    }
    return bad | json_object_set_new(o, "sources", a);
}

json_t *srv_stream_mirror_xforms_json(const struct srv_stream_mirror *mi)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a != NULL && i < mi->nxf; i++) {
        /* Both always, as nats-server's SubjectTransformConfig has them. */
        if (json_array_append_new(a,
                                  json_pack("{s:s, s:s}", "src", mi->xf[i].src,
                                            "dest", mi->xf[i].dest)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

bool srv_stream_mirror_xform(const struct srv_stream_mirror *mi,
                             const char *subj, size_t len,
                             char out[SRV_JS_SUBJECT_BYTES_MAX + 1],
                             size_t *outlen)
{
    for (uint32_t i = 0; i < mi->nxf; i++) {
        /* A filter only (no dest) is looked past, as nats-server does. */
        if (mi->xf[i].x != NULL &&
            srv_js_xform_apply(mi->xf[i].x, subj, len, out,
                               SRV_JS_SUBJECT_BYTES_MAX + 1, outlen) == 0) {
            return true;
        }
    }
    return false;
}

uint32_t srv_stream_mirror_filters(const struct srv_stream_mirror *mi,
                                   const char **out)
{
    if (mi->filter_subject != NULL && mi->filter_subject[0] != '\0') {
        out[0] = mi->filter_subject;
        return 1;
    }
    for (uint32_t i = 0; i < mi->nxf; i++) {
        out[i] = xf_src(&mi->xf[i]);
        if (strcmp(out[i], ">") == 0) {
            return 0; /* every subject: no filter */
        }
    }
    return mi->nxf;
}

static void free_origin(struct srv_stream_mirror *mi)
{
    free(mi->filter_subject);
    free(mi->ext_api);
    free(mi->ext_deliver);
    for (uint32_t i = 0; i < mi->nxf; i++) {
        free(mi->xf[i].src);
        free(mi->xf[i].dest);
        free(mi->xf[i].x);
    }
    free(mi->xf);
}

void srv_stream_config_free_sources(struct srv_stream_config *c)
{
    free_origin(&c->mirror);
    while (c->nsources > 0) {
        free_origin(&c->sources[--c->nsources]);
    }
    free(c->sources);
    c->sources = NULL;
}

bool srv_stream_mirror_ext_equal(const struct srv_stream_mirror *x,
                                 const struct srv_stream_mirror *y)
{
    const char *ax = x->ext_api != NULL ? x->ext_api : "";
    const char *ay = y->ext_api != NULL ? y->ext_api : "";
    const char *dx = x->ext_deliver != NULL ? x->ext_deliver : "";
    const char *dy = y->ext_deliver != NULL ? y->ext_deliver : "";
    return (x->ext_api == NULL) == (y->ext_api == NULL) &&
           strcmp(ax, ay) == 0 && strcmp(dx, dy) == 0;
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
    bool same =
        strcmp(x->name, y->name) == 0 && x->opt_start_seq == y->opt_start_seq &&
        x->opt_start_time_ns == y->opt_start_time_ns && strcmp(fx, fy) == 0 &&
        x->nxf == y->nxf && srv_stream_mirror_ext_equal(x, y);
    for (uint32_t i = 0; same && i < x->nxf; i++) {
        same = strcmp(x->xf[i].src, y->xf[i].src) == 0 &&
               strcmp(x->xf[i].dest, y->xf[i].dest) == 0;
    }
    return same;
}
