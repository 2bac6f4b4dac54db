#include "srv_confparse.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keel/error.h"
#include "keel/limits.h"
#include "srv_units.h"

struct cp {
    const char *s;
    size_t len;
    size_t i;
    size_t line;
    size_t items;
    char *errmsg;
    bool duration; /* the value being read is a duration key's */
};

static int fail(struct cp *p, const char *what)
{
    return keel_err(KEEL_ECONFIG, p->errmsg, "config line %zu: %s", p->line,
                    what);
}

static int peek(const struct cp *p)
{
    return p->i < p->len ? (unsigned char)p->s[p->i] : -1;
}

/* Skip blanks and comments; newlines too when `newlines`. */
static void skip_space(struct cp *p, bool newlines)
{
    while (p->i < p->len) {
        char c = p->s[p->i];
        if (c == '#' ||
            (c == '/' && p->i + 1 < p->len && p->s[p->i + 1] == '/')) {
            while (p->i < p->len && p->s[p->i] != '\n') {
                p->i++;
            }
            continue;
        }
        if (c == '\n' && newlines) {
            p->line++;
        } else if (c == '\n' || !isspace((unsigned char)c)) {
            return;
        }
        p->i++;
    }
}

static bool is_key_char(int c)
{
    return c > 0 &&
           (isalnum(c) || c == '_' || c == '-' || c == '.' || c == '$');
}

static int parse_quoted(struct cp *p, json_t **out)
{
    char q = p->s[p->i++];
    char buf[4096];
    size_t n = 0;

    while (p->i < p->len && p->s[p->i] != q) {
        char c = p->s[p->i++];
        if (c == '\n') {
            return fail(p, "unterminated string");
        }
        if (c == '\\' && q == '"' && p->i < p->len) {
            c = p->s[p->i++];
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        if (n + 1 >= sizeof buf) {
            return fail(p, "string too long (max 4095 bytes)");
        }
        buf[n++] = c;
    }
    if (p->i >= p->len) {
        return fail(p, "unterminated string");
    }
    p->i++;
    *out = json_stringn_nocheck(buf, n);
    return *out == NULL ? KEEL_ENOMEM : 0;
}

/* Keys whose values are durations: an unquoted 2m under one of them
 * stays the string "2m" (two minutes, for the key's reader), where
 * elsewhere it is the integer 2000000 (a size). nats-server 2.9.10 reads
 * an unquoted `ping_interval: 2m` as 2000000 seconds with a warning; an
 * operator writing 2m means two minutes. */
static const char *const duration_keys[] = {"ping_interval", "timeout"};

static bool is_duration_key(const char *key)
{
    for (size_t i = 0; i < sizeof duration_keys / sizeof duration_keys[0];
         i++) {
        if (strcasecmp(key, duration_keys[i]) == 0) {
            return true;
        }
    }
    return false;
}

static int parse_word(struct cp *p, json_t **out)
{
    size_t start = p->i;
    int64_t iv;

    while (p->i < p->len) {
        char c = p->s[p->i];
        /* "//" starts a comment only after a blank, so URLs such as
         * nats://host:4222 stay whole. */
        bool comment =
            c == '/' && p->i + 1 < p->len && p->s[p->i + 1] == '/' &&
            (p->i == start || isspace((unsigned char)p->s[p->i - 1]));
        if (c == '\n' || c == ',' || c == ';' || c == '}' || c == ']' ||
            c == '#' || comment) {
            break;
        }
        p->i++;
    }
    size_t end = p->i;
    while (end > start && isspace((unsigned char)p->s[end - 1])) {
        end--;
    }
    const char *w = p->s + start;
    size_t n = end - start;
    if (n == 0) {
        return fail(p, "missing value");
    }
    if (p->duration) {
        *out = json_stringn_nocheck(w, n);
    } else if (srv_parse_conf_int(w, n, &iv)) {
        *out = json_integer(iv);
    } else if ((n == 4 && strncasecmp(w, "true", 4) == 0) ||
               (n == 3 && strncasecmp(w, "yes", 3) == 0) ||
               (n == 2 && strncasecmp(w, "on", 2) == 0)) {
        *out = json_true();
    } else if ((n == 5 && strncasecmp(w, "false", 5) == 0) ||
               (n == 2 && strncasecmp(w, "no", 2) == 0) ||
               (n == 3 && strncasecmp(w, "off", 3) == 0)) {
        *out = json_false();
    } else {
        *out = json_stringn_nocheck(w, n);
    }
    return *out == NULL ? KEEL_ENOMEM : 0;
}

static int parse_value(struct cp *p, size_t depth, json_t **out);

static int count_item(struct cp *p)
{
    if (++p->items > SRV_CONFIG_KEYS_MAX) {
        return keel_err(KEEL_ELIMIT, p->errmsg,
                        "config has more than %d keys and values",
                        SRV_CONFIG_KEYS_MAX);
    }
    return 0;
}

static int parse_array(struct cp *p, size_t depth, json_t **out)
{
    json_t *arr = json_array();
    int rv;

    if (arr == NULL) {
        return KEEL_ENOMEM;
    }
    p->i++;              /* '[' */
    p->duration = false; /* durations are scalars */
    for (;;) {
        skip_space(p, true);
        while (peek(p) == ',') {
            p->i++;
            skip_space(p, true);
        }
        if (peek(p) == ']') {
            p->i++;
            *out = arr;
            return 0;
        }
        if (peek(p) < 0) {
            rv = fail(p, "unterminated array (missing ']')");
            goto err;
        }
        json_t *v = NULL;
        rv = count_item(p);
        if (rv == 0) {
            rv = parse_value(p, depth + 1, &v);
        }
        if (rv != 0) {
            goto err;
        }
        if (json_array_append_new(arr, v) != 0) {
            rv = KEEL_ENOMEM;
            goto err;
        }
    }
err:
    json_decref(arr);
    return rv;
}

static int parse_key(struct cp *p, char *key, size_t key_max)
{
    size_t n = 0;

    if (peek(p) == '"' || peek(p) == '\'') {
        json_t *s = NULL;
        int rv = parse_quoted(p, &s);
        if (rv != 0) {
            return rv;
        }
        snprintf(key, key_max, "%s", json_string_value(s));
        json_decref(s);
        return 0;
    }
    while (is_key_char(peek(p))) {
        if (n + 1 >= key_max) {
            return fail(p, "key too long");
        }
        key[n++] = p->s[p->i++];
    }
    key[n] = '\0';
    return n == 0 ? fail(p, "expected a key") : 0;
}

/* Body of a map: key/value pairs until `}` (nested) or the end (top). */
static int parse_map_body(struct cp *p, size_t depth, bool nested, json_t *obj)
{
    char key[256];
    int rv;

    for (;;) {
        skip_space(p, true);
        while (peek(p) == ',' || peek(p) == ';') {
            p->i++;
            skip_space(p, true);
        }
        if (peek(p) < 0) {
            return nested ? fail(p, "unterminated block (missing '}')") : 0;
        }
        if (peek(p) == '}') {
            if (!nested) {
                return fail(p, "unexpected '}'");
            }
            p->i++;
            return 0;
        }
        rv = parse_key(p, key, sizeof key);
        if (rv == 0) {
            rv = count_item(p);
        }
        if (rv != 0) {
            return rv;
        }
        skip_space(p, false);
        if (peek(p) == ':' || peek(p) == '=') {
            p->i++;
            skip_space(p, false);
        }
        json_t *v = NULL;
        p->duration = is_duration_key(key);
        rv = parse_value(p, depth + 1, &v);
        p->duration = false;
        if (rv != 0) {
            return rv;
        }
        if (json_object_set_new_nocheck(obj, key, v) != 0) {
            return KEEL_ENOMEM;
        }
    }
}

static int parse_value(struct cp *p, size_t depth, json_t **out)
{
    int c = peek(p);

    if (depth > SRV_CONFIG_DEPTH_MAX) {
        return keel_err(KEEL_ELIMIT, p->errmsg,
                        "config line %zu: nesting deeper than %d", p->line,
                        SRV_CONFIG_DEPTH_MAX);
    }
    if (c < 0 || c == '\n') {
        return fail(p, "missing value");
    }
    if (c == '"' || c == '\'') {
        return parse_quoted(p, out);
    }
    if (c == '[') {
        return parse_array(p, depth, out);
    }
    if (c == '{') {
        json_t *obj = json_object();
        if (obj == NULL) {
            return KEEL_ENOMEM;
        }
        p->i++;
        int rv = parse_map_body(p, depth, true, obj);
        if (rv != 0) {
            json_decref(obj);
            return rv;
        }
        *out = obj;
        return 0;
    }
    if (c == ']' || c == '}' || c == ',') {
        return fail(p, "missing value");
    }
    return parse_word(p, out);
}

int srv_confparse(const char *text, size_t len, json_t **out, char *errmsg)
{
    struct cp p = {text, len, 0, 1, 0, errmsg, false};
    json_t *root;
    int rv;

    if (len > SRV_CONFIG_BYTES_MAX) {
        return keel_err(KEEL_ELIMIT, errmsg, "config is larger than %d bytes",
                        SRV_CONFIG_BYTES_MAX);
    }
    root = json_object();
    if (root == NULL) {
        return KEEL_ENOMEM;
    }
    rv = parse_map_body(&p, 0, false, root);
    if (rv != 0) {
        json_decref(root);
        return rv;
    }
    *out = root;
    return 0;
}
