/* srv_js_err: JetStream API error table and error JSON. */
#include "srv_js_err.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "keel/error.h"
#include "keel/limits.h"

static const struct srv_js_err_info srv_js_err_table[SRV_JS_ERR_COUNT] = {
    [SRV_JS_OK] = {0, 0, ""},
#define SRV_JS_ERR_ROW(name, code, err_code, desc)                             \
    [name] = {code, err_code, desc},
    SRV_JS_ERRORS(SRV_JS_ERR_ROW)
#undef SRV_JS_ERR_ROW
};

const struct srv_js_err_info *srv_js_err_info(enum srv_js_err err)
{
    ASSERT(err > SRV_JS_OK && err < SRV_JS_ERR_COUNT);
    return &srv_js_err_table[err];
}

int srv_js_err_add(json_t *obj, enum srv_js_err err, const char *detail,
                   char *errmsg)
{
    if (obj == NULL || err <= SRV_JS_OK || err >= SRV_JS_ERR_COUNT) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "srv_js_err_add needs an object and a table error "
                        "(got %d)",
                        (int)err);
    }
    const struct srv_js_err_info *info = &srv_js_err_table[err];
    char desc[SRV_JS_ERR_DESC_BYTES_MAX];
    size_t n = strlen(info->description);
    bool is_template =
        n == 0 || (n >= 2 && strcmp(info->description + n - 2, ": ") == 0);
    if (detail != NULL && !is_template &&
        strncmp(detail, info->description, n) == 0) {
        /* The detail already says it (a parser that repeats the table's
         * sentence): once, not twice. */
        snprintf(desc, sizeof desc, "%s", detail);
    } else if (detail != NULL && !is_template) {
        /* Appending would glue two sentences into one ("bad requeststream
         * is sealed"). */
        snprintf(desc, sizeof desc, "%s (%s)", info->description, detail);
    } else {
        snprintf(desc, sizeof desc, "%s%s", info->description,
                 detail != NULL ? detail : "");
    }
    json_t *e = json_pack("{s:i, s:i, s:s}", "code", info->code, "err_code",
                          info->err_code, "description", desc);
    if (e == NULL || json_object_set_new(obj, "error", e) != 0) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory building error");
    }
    return 0;
}

int srv_js_err_json(const char *kind, enum srv_js_err err, const char *detail,
                    json_t **out, char *errmsg)
{
    *out = NULL;
    if (kind == NULL) {
        return keel_err(KEEL_EINVAL, errmsg, "error reply needs a kind");
    }
    char type[SRV_JS_ERR_DESC_BYTES_MAX];
    snprintf(type, sizeof type, "io.nats.jetstream.api.v1.%s", kind);
    json_t *obj = json_pack("{s:s}", "type", type);
    if (obj == NULL) {
        return keel_err(KEEL_ENOMEM, errmsg, "out of memory building error");
    }
    int rv = srv_js_err_add(obj, err, detail, errmsg);
    if (rv != 0) {
        json_decref(obj);
        return rv;
    }
    *out = obj;
    return 0;
}
