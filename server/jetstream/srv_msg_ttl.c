/* srv_msg_ttl: Nats-TTL values and subject delete marker headers, read and
 * written as nats-server 2.11 does (see srv_msg_ttl.h). */
#include "srv_msg_ttl.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keel/error.h"
#include "srv_stream_sm.h"

/* One unit of a Go duration and its length in ns. */
static int64_t unit_ns(const char *u, size_t n)
{
    static const struct {
        const char *s;
        int64_t ns;
    } units[] = {{"ns", 1},
                 {"us", 1000},
                 {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
                 {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
                 {"ms", 1000000},
                 {"s", 1000000000LL},
                 {"m", 60000000000LL},
                 {"h", 3600000000000LL}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].s) == n && memcmp(units[i].s, u, n) == 0) {
            return units[i].ns;
        }
    }
    return 0;
}

/* Go's time.ParseDuration: [sign] (number [. fraction] unit)+ or "0".
 * Returns false when s is not one or it overflows int64 ns. */
static bool go_duration(const char *s, size_t len, int64_t *ns)
{
    size_t i = 0;
    bool neg = false;
    if (i < len && (s[i] == '+' || s[i] == '-')) {
        neg = s[i] == '-';
        i++;
    }
    if (len - i == 1 && s[i] == '0') {
        *ns = 0;
        return true;
    }
    if (i == len) {
        return false;
    }
    double total = 0;
    /* Each pass consumes at least one digit and one unit byte. */
    while (i < len) {
        double v = 0, scale = 1;
        size_t d0 = i;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            v = v * 10 + (s[i++] - '0');
        }
        bool digits = i > d0;
        if (i < len && s[i] == '.') {
            size_t f0 = ++i;
            while (i < len && s[i] >= '0' && s[i] <= '9') {
                scale /= 10;
                v += (s[i++] - '0') * scale;
            }
            digits = digits || i > f0;
        }
        size_t u0 = i;
        while (i < len && s[i] != '.' && (s[i] < '0' || s[i] > '9')) {
            i++;
        }
        int64_t u = unit_ns(s + u0, i - u0);
        if (!digits || u == 0) {
            return false;
        }
        total += v * (double)u;
        if (total > 9.2e18) {
            return false;
        }
    }
    *ns = (int64_t)(neg ? -total : total);
    return true;
}

int srv_msg_ttl_parse(const char *v, size_t len, int64_t *secs)
{
    *secs = 0;
    if (len == 5 && strncasecmp(v, "never", 5) == 0) {
        *secs = SRV_MSG_TTL_NEVER;
        return 0;
    }
    int64_t ns = 0;
    if (go_duration(v, len, &ns)) {
        if (ns < SRV_MSG_TTL_NS_MIN) {
            return KEEL_EINVAL;
        }
        *secs = ns / 1000000000LL;
        return 0;
    }
    /* Plain seconds: digits only, as nats-server's integer reader (at
     * most 18 of them: no overflow). */
    char buf[20];
    if (len == 0 || len > 18) {
        return KEEL_EINVAL;
    }
    memcpy(buf, v, len);
    buf[len] = '\0';
    if (strspn(buf, "0123456789") != len) {
        return KEEL_EINVAL;
    }
    *secs = strtoll(buf, NULL, 10);
    return 0;
}

int srv_msg_ttl_of(const char *hdr, size_t len, int64_t *secs)
{
    const char *v = NULL;
    size_t vl = 0;
    *secs = 0;
    if (hdr == NULL || len == 0) {
        return 0;
    }
    int rv = srv_nats_hdr_get(hdr, len, SRV_MSG_TTL_HDR, &v, &vl);
    if (rv != 0 || vl == 0) {
        /* Absent, empty (no TTL, as on nats-server) or a malformed block,
         * which the expectation checks answer. */
        return 0;
    }
    return srv_msg_ttl_parse(v, vl, secs);
}

/* Go's Duration.String of whole seconds: "45s", "1m0s", "2h3m4s". */
static void go_secs(int64_t secs, char *buf, size_t n)
{
    int64_t h = secs / 3600, m = secs / 60 % 60, s = secs % 60;
    if (h > 0) {
        snprintf(buf, n, "%" PRId64 "h%" PRId64 "m%" PRId64 "s", h, m, s);
    } else if (m > 0) {
        snprintf(buf, n, "%" PRId64 "m%" PRId64 "s", m, s);
    } else {
        snprintf(buf, n, "%" PRId64 "s", s);
    }
}

size_t srv_msg_marker_hdr(int64_t ttl_secs, char *buf, size_t n)
{
    char d[48];
    ASSERT(ttl_secs > 0 && n >= SRV_MSG_MARKER_HDR_MAX);
    go_secs(ttl_secs, d, sizeof d);
    int w = snprintf(buf, n,
                     "NATS/1.0\r\n" SRV_MSG_MARKER_REASON_HDR
                     ": MaxAge\r\n" SRV_MSG_TTL_HDR ": %s\r\n"
                     "Nats-Rollup: sub\r\n\r\n",
                     d);
    ASSERT(w > 0 && (size_t)w < n);
    return (size_t)w;
}

int srv_msg_ttl_raise(const char *hdr, size_t len, int64_t marker_secs,
                      char **out, size_t *out_len)
{
    int64_t secs = 0;
    *out = NULL;
    *out_len = 0;
    if (marker_secs <= 0 || srv_msg_ttl_of(hdr, len, &secs) != 0 || secs <= 0 ||
        secs >= marker_secs) {
        return 0;
    }
    /* srv_msg_ttl_of read it, so the block is well formed. */
    char line[48];
    int ln = snprintf(line, sizeof line, SRV_MSG_TTL_HDR ": %lld\r\n",
                      (long long)marker_secs);
    return srv_nats_hdr_replace(hdr, len, SRV_MSG_TTL_HDR, line, (size_t)ln,
                                out, out_len);
}
