/* srv_tags: server and placement tags (srv_tags.h). */
#include "srv_tags.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "keel/error.h"

static bool has_tag(const struct srv_tags *t, const char *tag)
{
    for (uint32_t i = 0; i < t->n; i++) {
        if (strcmp(t->t[i], tag) == 0) {
            return true;
        }
    }
    return false;
}

static int add_tag(struct srv_tags *out, const json_t *v, char *errmsg)
{
    const char *s = json_string_value(v);
    size_t len = s != NULL ? strlen(s) : 0;
    if (s == NULL || len == 0 || len >= SRV_TAG_BYTES) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "tags: each tag is a string of 1 to %d bytes",
                        SRV_TAG_BYTES - 1);
    }
    char low[SRV_TAG_BYTES];
    for (size_t i = 0; i <= len; i++) {
        low[i] = (char)tolower((unsigned char)s[i]);
    }
    if (has_tag(out, low)) {
        return 0;
    }
    if (out->n == SRV_TAGS_MAX) {
        return keel_err(KEEL_EINVAL, errmsg, "tags: at most %d tags",
                        SRV_TAGS_MAX);
    }
    memcpy(out->t[out->n++], low, len + 1);
    return 0;
}

int srv_tags_parse(const json_t *v, struct srv_tags *out, char *errmsg)
{
    memset(out, 0, sizeof *out);
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_array(v)) {
        return add_tag(out, v, errmsg);
    }
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e)
    {
        int rv = add_tag(out, e, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

bool srv_tags_match(const struct srv_tags *have, const struct srv_tags *want)
{
    for (uint32_t i = 0; i < want->n; i++) {
        if (!has_tag(have, want->t[i])) {
            return false;
        }
    }
    return true;
}

void srv_tags_text(const struct srv_tags *t, char *out, size_t cap)
{
    ASSERT(cap > 0);
    int w = snprintf(out, cap, "[");
    size_t used = w > 0 ? (size_t)w : 0;
    for (uint32_t i = 0; i < t->n && used < cap; i++) {
        w = snprintf(out + used, cap - used, "%s'%s'", i > 0 ? ", " : "",
                     t->t[i]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < cap) {
        snprintf(out + used, cap - used, "]");
    }
}

json_t *srv_tags_json(const struct srv_tags *t)
{
    json_t *a = json_array();
    for (uint32_t i = 0; a != NULL && i < t->n; i++) {
        if (json_array_append_new(a, json_string(t->t[i])) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}
