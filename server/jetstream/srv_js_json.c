/* srv_js_json: JetStream config fields read from JSON (srv_js_json.h). */
#include "srv_js_json.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/limits.h"
#include "srv_js_config.h"

/* The field, or NULL when absent or null. */
static const json_t *field(const struct srv_js_json_rd *rd, const char *key)
{
    const json_t *f;

    ASSERT(rd != NULL);
    ASSERT(key != NULL);
    f = json_object_get(rd->j, key);
    return f == NULL || json_is_null(f) ? NULL : f;
}

int srv_js_json_fail(const struct srv_js_json_rd *rd, const char *fmt, ...)
{
    char msg[KEEL_ERRMSG_MAX];
    va_list ap;

    ASSERT(rd != NULL && rd->jerr != NULL);
    va_start(ap, fmt);
    (void)vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    *rd->jerr = rd->bad;
    return keel_err(KEEL_EINVAL, rd->errmsg, "%s", msg);
}

int srv_js_json_begin(const struct srv_js_json_rd *rd, const char *what)
{
    ASSERT(rd != NULL && rd->jerr != NULL);
    ASSERT(what != NULL);
    *rd->jerr = SRV_JS_OK;
    if (!json_is_object(rd->j)) {
        return SRV_JS_CFG_ERR(rd->jerr, SRV_JS_EBAD_REQUEST, rd->errmsg,
                              "%s must be a JSON object", what);
    }
    return 0;
}

void srv_js_json_end(const struct srv_js_json_rd *rd)
{
    ASSERT(rd != NULL && rd->jerr != NULL);
    if (*rd->jerr == SRV_JS_OK) {
        *rd->jerr = SRV_JS_EUNAVAILABLE; /* out of memory: retry later */
    }
}

int srv_js_json_int(const struct srv_js_json_rd *rd, const char *key,
                    int64_t min, int64_t *v)
{
    const json_t *f = field(rd, key);

    ASSERT(v != NULL);
    if (f == NULL) {
        return 0;
    }
    if (!json_is_integer(f) || json_integer_value(f) < min) {
        return srv_js_json_fail(rd, "%s must be an integer >= %" PRId64, key,
                                min);
    }
    *v = (int64_t)json_integer_value(f);
    return 0;
}

int srv_js_json_bool(const struct srv_js_json_rd *rd, const char *key, bool *v)
{
    const json_t *f = field(rd, key);

    ASSERT(v != NULL);
    if (f == NULL) {
        return 0;
    }
    if (!json_is_boolean(f)) {
        return srv_js_json_fail(rd, "%s must be true or false", key);
    }
    *v = json_is_true(f);
    return 0;
}

int srv_js_json_fields(const struct srv_js_json_rd *rd,
                       const struct srv_js_json_field *f, size_t n)
{
    ASSERT(f != NULL || n == 0);
    for (size_t i = 0; i < n; i++) {
        ASSERT((f[i].i == NULL) != (f[i].b == NULL));
        int rv = f[i].i != NULL
                     ? srv_js_json_int(rd, f[i].key, f[i].min, f[i].i)
                     : srv_js_json_bool(rd, f[i].key, f[i].b);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

int srv_js_json_enum(const struct srv_js_json_rd *rd, const char *key,
                     const char *const *names, int n, int *v, bool *present)
{
    const json_t *f = field(rd, key);
    const char *s = json_string_value(f);
    char list[256];
    size_t used = 0;

    ASSERT(names != NULL && v != NULL);
    ASSERT(n >= 1 && n <= 16);
    if (present != NULL) {
        *present = false;
    }
    if (f == NULL) {
        return 0;
    }
    for (int i = 0; s != NULL && i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            *v = i;
            if (present != NULL) {
                *present = true;
            }
            return 0;
        }
    }
    list[0] = '\0';
    for (int i = 0; i < n && used < sizeof list; i++) {
        int w = snprintf(list + used, sizeof list - used, "%s%s",
                         i > 0 ? ", " : "", names[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    return srv_js_json_fail(rd, "invalid %s %s: use one of %s", key,
                            s != NULL ? s : "(not a string)", list);
}

int srv_js_json_str(const struct srv_js_json_rd *rd, const char *key,
                    char **dst)
{
    const json_t *f = field(rd, key);
    const char *s = json_string_value(f);

    ASSERT(dst != NULL);
    if (f == NULL) {
        return 0;
    }
    if (s == NULL) {
        return srv_js_json_fail(rd, "%s must be a string", key);
    }
    if (s[0] == '\0') {
        return 0;
    }
    *dst = strdup(s);
    return *dst == NULL ? keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory")
                        : 0;
}

int srv_js_json_name(const struct srv_js_json_rd *rd, const char *key,
                     char *dst)
{
    const char *s = json_string_value(field(rd, key));

    ASSERT(dst != NULL);
    if (s == NULL || s[0] == '\0') {
        return 0;
    }
    if (!srv_js_name_valid(s)) {
        return srv_js_json_fail(rd,
                                "invalid %s: no '.', '*', '>', '/', '\\' or "
                                "whitespace, at most %d bytes",
                                key, SRV_JS_NAME_BYTES_MAX);
    }
    snprintf(dst, SRV_JS_NAME_BYTES_MAX + 1, "%s", s);
    return 0;
}

int srv_js_json_out(json_t *o, bool ok, json_t **out, char *errmsg)
{
    ASSERT(out != NULL);
    ASSERT(ok || o == NULL || json_is_object(o));
    if (!ok) {
        json_decref(o);
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory encoding config");
    }
    *out = o;
    return 0;
}

bool srv_js_json_same(int rv, json_t *j[2])
{
    bool eq = rv == 0 && json_equal(j[0], j[1]);

    ASSERT(rv != 0 || (j[0] != NULL && j[1] != NULL));
    json_decref(j[0]);
    json_decref(j[1]);
    return eq;
}

int srv_js_json_subjects(const struct srv_js_json_rd *rd, const json_t *f,
                         size_t n, const char *only,
                         srv_js_json_subject_check check, char ***v,
                         uint32_t *nv)
{
    size_t count = n == 0 ? 1 : n;

    ASSERT(n <= SRV_JS_SUBJECTS_MAX);
    ASSERT(n > 0 || only != NULL);
    ASSERT(*v == NULL && *nv == 0);
    *v = calloc(count, sizeof **v);
    if (*v == NULL) {
        return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
    }
    for (size_t i = 0; i < count; i++) {
        const char *s = n == 0 ? only : json_string_value(json_array_get(f, i));
        int rv = check(rd, *v, i, s);
        if (rv != 0) {
            return rv;
        }
        ASSERT(s != NULL); /* check refuses what is not a string */
        (*v)[i] = strdup(s);
        if ((*v)[i] == NULL) {
            return keel_err(KEEL_ENOMEM, rd->errmsg, "out of memory");
        }
        *nv = (uint32_t)(i + 1);
    }
    return 0;
}

json_t *srv_js_json_strv(char *const *v, uint32_t n)
{
    json_t *a = json_array();

    for (uint32_t i = 0; a != NULL && i < n; i++) {
        if (json_array_append_new(a, json_string(v[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

void srv_js_strv_free(char **v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}
