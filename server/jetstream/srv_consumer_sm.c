/* srv_consumer_sm: ack reply subjects and ack bodies. */
#include "srv_consumer_sm.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "keel/error.h"
#include "srv_js_config.h"
#include "srv_units.h"

int srv_ack_reply_build(const struct srv_ack_reply *r, char *buf, size_t len,
                        size_t *outlen, char *errmsg)
{
    *outlen = 0;
    if (!srv_js_name_valid(r->stream) || !srv_js_name_valid(r->consumer) ||
        r->delivered == 0 || r->ts_ns < 0) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "ack reply needs valid names, delivered >= 1 and a "
                        "non-negative timestamp");
    }
    int n = snprintf(buf, len,
                     "$JS.ACK.%s.%s.%" PRIu64 ".%" PRIu64 ".%" PRIu64
                     ".%" PRId64 ".%" PRIu64,
                     r->stream, r->consumer, r->delivered, r->stream_seq,
                     r->consumer_seq, r->ts_ns, r->pending);
    if (n < 0 || (size_t)n >= len) {
        return keel_err(KEEL_EINVAL, errmsg,
                        "ack reply buffer too small: pass "
                        "SRV_ACK_REPLY_BYTES_MAX bytes");
    }
    ASSERT(buf[n] == '\0');
    *outlen = (size_t)n;
    return 0;
}

static bool copy_name(char *dst, const char *s, size_t len)
{
    if (len == 0 || len > SRV_JS_NAME_BYTES_MAX) {
        return false;
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
    return srv_js_name_valid(dst);
}

int srv_ack_reply_parse(const char *subj, size_t len, struct srv_ack_reply *out,
                        char *errmsg)
{
    memset(out, 0, sizeof *out);
    const char *tok[9];
    size_t tlen[9];
    size_t nt = 0, start = 0;
    for (size_t i = 0; i <= len && len <= SRV_ACK_REPLY_BYTES_MAX; i++) {
        if (i < len && subj[i] != '.') {
            continue;
        }
        if (nt == 9) {
            nt = 10; /* too many tokens */
            break;
        }
        tok[nt] = subj + start;
        tlen[nt++] = i - start;
        start = i + 1;
    }
    uint64_t n[5] = {0};
    bool ok = nt == 9 && tlen[0] == 3 && memcmp(tok[0], "$JS", 3) == 0 &&
              tlen[1] == 3 && memcmp(tok[1], "ACK", 3) == 0 &&
              copy_name(out->stream, tok[2], tlen[2]) &&
              copy_name(out->consumer, tok[3], tlen[3]);
    for (size_t i = 0; ok && i < 5; i++) {
        ok = srv_parse_u64(tok[4 + i], tlen[4 + i], &n[i]);
    }
    if (!ok || n[0] == 0 || n[3] > INT64_MAX) {
        memset(out, 0, sizeof *out);
        return keel_err(KEEL_EINVAL, errmsg, "not a v1 $JS.ACK subject");
    }
    out->delivered = n[0];
    out->stream_seq = n[1];
    out->consumer_seq = n[2];
    out->ts_ns = (int64_t)n[3];
    out->pending = n[4];
    return 0;
}

/* "<n><unit>" → ns; also a bare JSON {"delay":<ns>}. */
static bool parse_delay(const char *s, size_t len, int64_t *ns)
{
    static const struct {
        const char *unit;
        int64_t mult;
    } units[] = {
        {"ns", 1},         {"us", 1000},         {"ms", 1000000},
        {"s", 1000000000}, {"m", 60000000000LL}, {"h", 3600000000000LL}};
    const char *key = "{\"delay\":";
    size_t klen = strlen(key);
    if (len > klen + 1 && memcmp(s, key, klen) == 0 && s[len - 1] == '}') {
        uint64_t v = 0;
        bool ok = srv_parse_u64(s + klen, len - klen - 1, &v) && v <= INT64_MAX;
        *ns = (int64_t)v;
        return ok;
    }
    size_t d = 0;
    while (d < len && d < 20 && s[d] >= '0' && s[d] <= '9') {
        d++;
    }
    uint64_t v = 0;
    if (!srv_parse_u64(s, d, &v)) {
        return false;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t ul = strlen(units[i].unit);
        if (len - d == ul && memcmp(s + d, units[i].unit, ul) == 0 &&
            v <= (uint64_t)(INT64_MAX / units[i].mult)) {
            *ns = (int64_t)v * units[i].mult;
            return true;
        }
    }
    return false;
}

int srv_ack_body_parse(const char *body, size_t len, struct srv_ack_body *out,
                       char *errmsg)
{
    static const struct {
        const char *verb;
        enum srv_ack_kind kind;
    } verbs[] = {{"+ACK", SRV_ACK_ACK},
                 {"-NAK", SRV_ACK_NAK},
                 {"+WPI", SRV_ACK_WPI},
                 {"+TERM", SRV_ACK_TERM},
                 {"+NXT", SRV_ACK_NXT}};
    memset(out, 0, sizeof *out);
    if (len == 0) {
        return 0; /* empty body is an ack */
    }
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        size_t vl = strlen(verbs[i].verb);
        if (len < vl || memcmp(body, verbs[i].verb, vl) != 0 ||
            (len > vl && body[vl] != ' ')) {
            continue;
        }
        out->kind = verbs[i].kind;
        out->arg = len > vl ? body + vl + 1 : NULL;
        out->arg_len = len > vl ? len - vl - 1 : 0;
        if (out->kind == SRV_ACK_NAK && out->arg_len > 0 &&
            !parse_delay(out->arg, out->arg_len, &out->delay_ns)) {
            memset(out, 0, sizeof *out);
            return keel_err(KEEL_EINVAL, errmsg,
                            "bad -NAK delay: send {\"delay\":<ns>} or "
                            "<n>ns|us|ms|s|m|h");
        }
        return 0;
    }
    return keel_err(KEEL_EINVAL, errmsg,
                    "unknown ack body: use +ACK, -NAK, +WPI, +TERM or +NXT");
}
