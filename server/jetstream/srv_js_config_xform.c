/* srv_js_config_xform: a stream config's `republish` {src, dest,
 * headers_only} and `subject_transform` {src, dest}: read, checked with
 * nats-server's texts and compiled (srv_js_xform.h), encoded back
 * (docs/jetstream-config.md). Pure: no I/O, no clock. */
#include <stdlib.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_config.h"
#include "srv_js_json.h"
#include "srv_js_xform.h"

/* A string member of o (absent or null: ""); anything else fails. */
static int member(const struct srv_js_json_rd *rd, const json_t *o,
                  const char *obj, const char *key, const char **out)
{
    const json_t *f = json_object_get(o, key);
    *out = "";
    if (f == NULL || json_is_null(f)) {
        return 0;
    }
    if (!json_is_string(f)) {
        return srv_js_json_fail(rd, "%s %s must be a string", obj, key);
    }
    *out = json_string_value(f);
    return 0;
}

/* The {src, dest} object at key: *o NULL when absent or null; a
 * non-object or a non-string member fails. */
static int src_dest(const struct srv_js_json_rd *rd, const char *key,
                    const json_t **o, const char **src, const char **dest)
{
    const json_t *f = json_object_get(rd->j, key);
    *o = NULL;
    if (f == NULL || json_is_null(f)) {
        return 0;
    }
    if (!json_is_object(f)) {
        return srv_js_json_fail(rd, "%s must be an object", key);
    }
    *o = f;
    int rv = member(rd, f, key, "src", src);
    return rv == 0 ? member(rd, f, key, "dest", dest) : rv;
}

/* Compile into a new *out (owned by the config): 0, KEEL_ENOMEM (in
 * rd's errmsg) or KEEL_EINVAL with the reason in err. */
static int compile(const struct srv_js_json_rd *rd, const char *src,
                   const char *dest, struct srv_js_xform **out, char *err)
{
    *out = malloc(sizeof **out);
    if (*out == NULL) {
        return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
    }
    return srv_js_xform_compile(src, dest, *out, err);
}

/* Does s overlap a subject the stream takes, or one its
 * subject_transform stores? */
static bool collides(const struct srv_stream_config *c, const char *s)
{
    char dest[SRV_JS_SUBJECT_BYTES_MAX + 1];
    for (uint32_t i = 0; i < c->nsubjects; i++) {
        if (srv_js_subjects_overlap(s, c->subjects[i])) {
            return true;
        }
    }
    if (c->transform == NULL) {
        return false;
    }
    srv_js_xform_dest_pattern(c->transform, dest);
    return srv_js_subjects_overlap(s, dest);
}

/* republish, checked as nats-server 2.9.10 checks it (its texts). */
static int parse_republish(const struct srv_js_json_rd *rd,
                           struct srv_stream_config *c, const json_t *o,
                           const char *src, const char *dest)
{
    const json_t *ho = json_object_get(o, "headers_only");
    if (ho != NULL && !json_is_null(ho) && !json_is_boolean(ho)) {
        return srv_js_json_fail(rd, "republish headers_only must be a boolean");
    }
    c->republish_headers_only = json_is_true(ho);
    if (src[0] == '\0') {
        src = ">";
    }
    if (!srv_js_subject_valid(src, true) || !collides(c, src)) {
        return srv_js_json_fail(rd, "stream configuration for republish "
                                    "source is not valid subset of subjects");
    }
    if (collides(c, dest)) {
        return srv_js_json_fail(rd, "stream configuration for republish "
                                    "destination forms a cycle");
    }
    char err[KEEL_ERRMSG_MAX];
    int rv = compile(rd, src, dest, &c->republish, err);
    if (rv == KEEL_EINVAL) {
        return srv_js_json_fail(rd,
                                "stream configuration for republish not valid");
    }
    return rv;
}

/* subject_transform, with nats-server 2.10's codes 10155 and 10156. */
static int parse_transform(const struct srv_js_json_rd *rd,
                           struct srv_stream_config *c, const json_t *o,
                           const char *src, const char *dest)
{
    (void)o; /* only republish has more than src and dest */
    if (src[0] != '\0' && !srv_js_subject_valid(src, true)) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_ETRANSFORM_SOURCE, rd->errmsg,
                              "invalid subject %.200s", src);
    }
    if (dest[0] == '\0') {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_ETRANSFORM_DEST, rd->errmsg,
                              "invalid mapping destination: invalid "
                              "transform (set dest)");
    }
    char err[KEEL_ERRMSG_MAX];
    int rv = compile(rd, src, dest, &c->transform, err);
    if (rv == KEEL_EINVAL) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_ETRANSFORM_DEST, rd->errmsg,
                              "%s", err);
    }
    return rv;
}

int srv_stream_config_parse_xforms(const struct srv_js_json_rd *rd,
                                   struct srv_stream_config *c)
{
    /* subject_transform first: republish's checks see what it stores. */
    static const struct {
        const char *key;
        int (*parse)(const struct srv_js_json_rd *, struct srv_stream_config *,
                     const json_t *, const char *, const char *);
    } steps[] = {{"subject_transform", parse_transform},
                 {"republish", parse_republish}};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        const json_t *o = NULL;
        const char *src = NULL;
        const char *dest = NULL;
        int rv = src_dest(rd, steps[i].key, &o, &src, &dest);
        if (rv == 0 && o != NULL) {
            rv = steps[i].parse(rd, c, o, src, dest);
        }
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

int srv_stream_config_encode_xforms(const struct srv_stream_config *c,
                                    json_t *o)
{
    int bad = 0;
    if (c->republish != NULL) {
        json_t *r = json_pack("{s:s, s:s}", "src", c->republish->src, "dest",
                              c->republish->dest);
        if (r != NULL && c->republish_headers_only) {
            /* Only when set, as nats-server omits it (omitempty). */
            bad |= json_object_set_new(r, "headers_only", json_true());
        }
        bad |= r == NULL || json_object_set_new(o, "republish", r) != 0;
    }
    if (c->transform != NULL) {
        bad |= json_object_set_new(o, "subject_transform",
                                   json_pack("{s:s, s:s}", "src",
                                             c->transform->src, "dest",
                                             c->transform->dest)) != 0;
    }
    return bad;
}

void srv_stream_config_free_xforms(struct srv_stream_config *c)
{
    free(c->republish);
    free(c->transform);
    c->republish = NULL;
    c->transform = NULL;
}
