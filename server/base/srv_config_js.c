/* srv_config_js: the config file's jetstream key, spelled as nats-server
 * 2.9 spells it: `jetstream: enabled`, `jetstream: true` or a block of
 * { store_dir, max_memory_store, max_file_store, max_streams, domain }, plus
 * keeld's own scrub_pass (the background scrub). keeld always
 * runs JetStream (docs/decisions/0001-jetstream-always-on.md), so a setting
 * that turns it off, and every block key keeld does not implement, is
 * refused with the reason instead of being accepted and ignored. */
#include "srv_config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "keel/error.h"
#include "keel/limits.h"

#define JS_OFF_REFUSED                                                         \
    "keeld always runs JetStream (its streams live in store_dir) and "         \
    "cannot turn it off: remove this setting"

/* Keys nats-server accepts in the block that keeld does not implement. */
static const char *const unsupported_keys[] = {
    "key",
    "ek",
    "encryption_key",
    "prev_key",
    "prev_ek",
    "prev_encryption_key",
    "cipher",
    "extension_hint",
    "limits",
    "unique_tag",
    "max_outstanding_catchup",
    "max_buffered_msgs",
    "max_buffered_size",
    "max_catchup",
    "sync",
    "sync_interval",
    "strict",
    "tpm",
    "request_queue_limit",
};

/* A size as nats-server's getStorageSize reads it: an integer (negative
 * means no limit, -1 stored), or a string with a K, M, G or T suffix in
 * powers of 1024 (srv_parse_size also takes KB, MB, GB, TB). */
static int js_size(const json_t *v, const char *key, int64_t *out, char *errmsg)
{
    uint64_t n = 0;

    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        *out = i < 0 ? -1 : (int64_t)i;
        return 0;
    }
    if (json_is_string(v) && srv_parse_size(json_string_value(v), &n) &&
        n <= (uint64_t)INT64_MAX) {
        *out = (int64_t)n;
        return 0;
    }
    return keel_err(KEEL_EUSAGE, errmsg,
                    "%s: expected a size such as 1073741824, 1G or 512M "
                    "(-1 for no limit)",
                    key);
}

static int js_store_dir(struct srv_config *c, const json_t *v, char *errmsg)
{
    const char *s = json_string_value(v);

    if (s == NULL || s[0] == '\0') {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "store_dir: expected a non-empty path");
    }
    if (strlen(s) >= sizeof c->store_dir) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "store_dir is too long (max %zu bytes)",
                        sizeof c->store_dir - 1);
    }
    snprintf(c->store_dir, sizeof c->store_dir, "%s", s);
    return 0;
}

static int js_max_streams(struct srv_config *c, const json_t *v, char *errmsg)
{
    json_int_t n = json_integer_value(v);

    /* Server-wide stream limit, at most SRV_JS_STREAMS_MAX. */
    if (!json_is_integer(v) || n < 1 || n > SRV_JS_STREAMS_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg, "max_streams: expected 1..%d",
                        SRV_JS_STREAMS_MAX);
    }
    c->js_max_streams = (uint64_t)n;
    return 0;
}

int srv_config_set_scrub_pass(struct srv_config *c, const char *v, char *errmsg)
{
    uint64_t ms = 0;

    ASSERT(c != NULL);
    if (v != NULL && strcmp(v, "0") == 0) {
        c->scrub_pass_ms = 0;
        return 0;
    }
    /* Below a second the scrub would reread every log several times a
     * second: no operator wants that, and a typo is likelier. */
    if (v == NULL || !srv_parse_duration_ms(v, &ms) || ms < 1000) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "scrub_pass: expected a duration of at least 1s "
                        "such as 24h, 30m or 2s (0 turns the scrub off), "
                        "got '%s'",
                        v != NULL ? v : "");
    }
    c->scrub_pass_ms = ms;
    return 0;
}

/* nats-server 2.9.10's rule (validateJetStreamOptions): $JS.<domain>.API
 * must be a valid subject and the name holds no '.', '*' or '>'. The same
 * domain goes on every node of a cluster: each maps its own. */
static int js_domain(struct srv_config *c, const json_t *v, char *errmsg)
{
    const char *s = json_string_value(v);
    size_t n = s != NULL ? strlen(s) : 0;

    if (s == NULL || n == 0) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "domain: expected a non-empty name such as HUB");
    }
    if (n > SRV_JS_DOMAIN_BYTES_MAX) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "domain is too long (max %d bytes)",
                        SRV_JS_DOMAIN_BYTES_MAX);
    }
    /* Also printable ASCII without '"' or '\\': a PubAck names it
     * unescaped (srv_stream.c answer_stored). */
    for (const unsigned char *p = (const unsigned char *)s; *p != 0; p++) {
        if (*p <= ' ' || *p >= 0x7f || strchr(".*>\"\\", *p) != NULL) {
            return keel_err(KEEL_EUSAGE, errmsg,
                            "invalid domain name: may not contain ., *, >, "
                            "quotes, backslashes, white space or non-ASCII "
                            "bytes, got '%s'",
                            s);
        }
    }
    memcpy(c->js_domain, s, n + 1);
    return 0;
}

static bool is_key(const char *key, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(key, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* One member of the jetstream { } block. */
static int js_block_key(struct srv_config *c, const char *key, const json_t *v,
                        char *errmsg)
{
    static const char *const dir[] = {"store", "store_dir", "storedir"};
    static const char *const mem[] = {"max_memory_store", "max_mem_store",
                                      "max_mem"};
    static const char *const file[] = {"max_file_store", "max_file"};
    static const char *const on[] = {"enable", "enabled"};

    if (is_key(key, dir, 3)) {
        return js_store_dir(c, v, errmsg);
    }
    if (is_key(key, mem, 3)) {
        return js_size(v, key, &c->js_max_memory, errmsg);
    }
    if (is_key(key, file, 2)) {
        return js_size(v, key, &c->js_max_file, errmsg);
    }
    if (strcasecmp(key, "max_streams") == 0) {
        return js_max_streams(c, v, errmsg);
    }
    if (strcasecmp(key, "domain") == 0) {
        return js_domain(c, v, errmsg);
    }
    if (strcasecmp(key, "scrub_pass") == 0) {
        bool off = json_is_integer(v) && json_integer_value(v) == 0;
        return srv_config_set_scrub_pass(c, off ? "0" : json_string_value(v),
                                         errmsg);
    }
    if (is_key(key, on, 2)) {
        if (!json_is_boolean(v)) {
            return keel_err(KEEL_EUSAGE, errmsg, "%s: expected true or false",
                            key);
        }
        return json_is_true(v) ? 0
                               : keel_err(KEEL_EUSAGE, errmsg, "%s: %s", key,
                                          JS_OFF_REFUSED);
    }
    if (is_key(key, unsupported_keys,
               sizeof unsupported_keys / sizeof unsupported_keys[0])) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "%s: not supported by keeld; remove it (keeld reads "
                        "store_dir, max_memory_store, max_file_store, "
                        "max_streams, domain and scrub_pass)",
                        key);
    }
    return keel_err(KEEL_EUSAGE, errmsg,
                    "unknown field '%s' (keeld reads store_dir, "
                    "max_memory_store, max_file_store, max_streams, domain "
                    "and scrub_pass)",
                    key);
}

int srv_config_apply_jetstream(struct srv_config *c, const json_t *v,
                               char *errmsg)
{
    ASSERT(c != NULL);
    ASSERT(v != NULL);
    if (json_is_boolean(v)) {
        return json_is_true(v)
                   ? 0
                   : keel_err(KEEL_EUSAGE, errmsg, "%s", JS_OFF_REFUSED);
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcasecmp(s, "enabled") == 0 || strcasecmp(s, "enable") == 0) {
            return 0;
        }
        if (strcasecmp(s, "disabled") == 0 || strcasecmp(s, "disable") == 0) {
            return keel_err(KEEL_EUSAGE, errmsg, "%s", JS_OFF_REFUSED);
        }
        return keel_err(KEEL_EUSAGE, errmsg,
                        "expected 'enabled' or 'disabled', got '%s'", s);
    }
    if (!json_is_object(v)) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "expected enabled, true or a { } block");
    }
    const char *key;
    const json_t *m;
    json_object_foreach((json_t *)v, key, m)
    {
        int rv = js_block_key(c, key, m, errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}
