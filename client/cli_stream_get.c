/* keel stream get NAME [SEQ] [--last-for SUBJECT]: one stored message via
 * $JS.API.STREAM.MSG.GET (headers and data come base64-encoded).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_js.h"
#include "cli_stream_cfg.h"

/* The value of one base64 digit of either alphabet (standard "+/", URL
 * "-_"), or -1. */
static int b64_value(unsigned char c)
{
    static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "abcdefghijklmnopqrstuvwxyz0123456789+/-_";
    const char *p = c != '\0' ? strchr(digits, c) : NULL;
    if (p == NULL) {
        return -1;
    }
    int v = (int)(p - digits);
    return v < 64 ? v : v - 2; /* '-' is '+', '_' is '/' */
}

int cli_b64_decode(const char *in, unsigned char *out, size_t cap, size_t *len)
{
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (size_t i = 0; in[i] != '\0' && in[i] != '='; i++) {
        int v = b64_value((unsigned char)in[i]);
        if (v < 0) {
            return KEEL_EPROTO;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap) {
                return KEEL_ETOOBIG;
            }
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    *len = n;
    return 0;
}

static int decode_field(const json_t *m, const char *key, unsigned char **out,
                        size_t *len, char *errmsg)
{
    const char *s = cli_js_str(m, key, "");
    size_t cap = strlen(s) / 4 * 3 + 3;
    *out = malloc(cap + 1);
    if (*out == NULL) {
        return KEEL_ENOMEM;
    }
    int rv = cli_b64_decode(s, *out, cap, len);
    if (rv != 0) {
        return keel_err(rv, errmsg, "stream get: the %s field is not base64",
                        key);
    }
    (*out)[*len] = '\0';
    return 0;
}

static void print_msg(const json_t *m, const unsigned char *hdr, size_t hlen,
                      const unsigned char *data, size_t dlen)
{
    char seq[32];
    cli_js_count(m, "seq", seq, sizeof seq);
    printf("Item: %s #%s received %s on Subject %s\n\n", "", seq,
           cli_js_str(m, "time", "?"), cli_js_str(m, "subject", "?"));
    if (hlen > 0) {
        /* Skip the "NATS/1.0" line; print the header lines as they are. */
        const char *h = memchr(hdr, '\n', hlen);
        h = h != NULL ? h + 1 : (const char *)hdr;
        printf("Headers:\n");
        fwrite(h, 1, hlen - (size_t)(h - (const char *)hdr), stdout);
    }
    fwrite(data, 1, dlen, stdout);
    printf("\n");
}

int cli_stream_get(const struct cli_cmd *cmd, int argc, char **argv,
                   char *errmsg)
{
    struct cli_js_run r;
    unsigned char *hdr = NULL, *data = NULL;
    size_t hlen = 0, dlen = 0;
    const char *last_for = NULL;
    struct cli_flag flags[] = {
        {"last-for", 0, CLI_FLAG_STR, &last_for, "SUBJECT",
         "the last message stored on SUBJECT"},
        {"json", 0, CLI_FLAG_BOOL, &r.json, NULL, "print the API reply"},
        CLI_FLAG_END,
    };
    char api[CLI_SUBJECT_BYTES_MAX];
    char body[CLI_SUBJECT_BYTES_MAX + 32];
    int rv = cli_js_parse(&r, cmd, flags, argc, argv, errmsg);
    if (rv != 0 || r.help) {
        return rv;
    }
    if ((r.args.count == 2) == (last_for != NULL)) {
        return keel_err(KEEL_EUSAGE, errmsg,
                        "give either a sequence number or --last-for SUBJECT");
    }
    if (last_for != NULL) {
        json_t *b = json_pack("{s:s}", "last_by_subj", last_for);
        char *t = b != NULL ? json_dumps(b, JSON_COMPACT) : NULL;
        snprintf(body, sizeof body, "%s", t != NULL ? t : "{}");
        free(t);
        json_decref(b);
    } else {
        snprintf(body, sizeof body, "{\"seq\":%lld", atoll(r.args.items[1]));
        strcat(body, "}");
    }
    rv = cli_js_connect(&r, errmsg);
    snprintf(api, sizeof api, "STREAM.MSG.GET.%s", r.args.items[0]);
    if (rv == 0) {
        rv = cli_js_request(r.nc, r.conn.timeout_ms, "stream get", api, body,
                            &r.reply, NULL, errmsg);
    }
    const json_t *m = json_object_get(r.reply, "message");
    if (rv == 0 && r.json) {
        cli_js_print_json(r.reply);
    } else if (rv == 0) {
        rv = decode_field(m, "hdrs", &hdr, &hlen, errmsg);
        if (rv == 0) {
            rv = decode_field(m, "data", &data, &dlen, errmsg);
        }
        if (rv == 0) {
            print_msg(m, hdr, hlen, data, dlen);
        }
    }
    free(hdr);
    free(data);
    cli_js_end(&r);
    return rv;
}
