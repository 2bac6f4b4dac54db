/* srv_js_xform: compile and apply subject transforms. */
#include "srv_js_xform.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "keel/error.h"
#include "srv_js_config.h"

#define BAD_DEST "invalid mapping destination"

/* One '.'-separated token of s from *pos: its start and length. */
static bool take_token(const char *s, size_t *pos, const char **t, size_t *len)
{
    if (s[*pos] == '\0') {
        return false;
    }
    const char *p = s + *pos;
    const char *dot = strchr(p, '.');
    *len = dot != NULL ? (size_t)(dot - p) : strlen(p);
    *t = p;
    *pos += *len + (dot != NULL ? 1 : 0);
    return true;
}

static size_t trim(const char **s, size_t len)
{
    while (len > 0 && isspace((unsigned char)**s)) {
        (*s)++;
        len--;
    }
    while (len > 0 && isspace((unsigned char)(*s)[len - 1])) {
        len--;
    }
    return len;
}

/* A decimal integer (surrounding spaces allowed) in [0, max]. */
static bool parse_num(const char *s, size_t len, uint64_t max, uint64_t *v)
{
    len = trim(&s, len);
    uint64_t x = 0;
    if (len == 0 || len > 10) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) {
            return false;
        }
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return x <= max;
}

static int dest_err(char *errmsg, const char *why, const char *t, size_t len)
{
    return keel_err(KEEL_EINVAL, errmsg, BAD_DEST ": %s in %.*s", why,
                    (int)(len > 200 ? 200 : len), t);
}

/* A wildcard index N (1..npwcs) into the source token index. */
static int wildcard_arg(const uint8_t *pwc, uint32_t npwcs, const char *a,
                        size_t alen, const char *t, size_t len, uint8_t *out,
                        char *errmsg)
{
    uint64_t n = 0;
    if (!parse_num(a, alen, UINT32_MAX, &n)) {
        return dest_err(errmsg,
                        "function argument is invalid or in the wrong format",
                        t, len);
    }
    if (n == 0 || n > npwcs) {
        return dest_err(errmsg, "wildcard index out of range", t, len);
    }
    *out = pwc[n - 1];
    return 0;
}

/* `{{name(args)}}`: wildcard or partition into tok. */
static int parse_function(const uint8_t *pwc, uint32_t npwcs, const char *t,
                          size_t len, struct srv_js_xform_tok *tok,
                          char *errmsg)
{
    static const char *const others[] = {
        "splitfromleft", "splitfromright", "slicefromleft", "slicefromright",
        "split",         "left",           "right",         "random"};
    const char *in = t + 2;
    size_t ilen = trim(&in, len - 4);
    size_t nlen = 0;
    while (nlen < ilen && isalpha((unsigned char)in[nlen])) {
        nlen++;
    }
    const char *rest = in + nlen;
    size_t rlen = trim(&rest, ilen - nlen);
    if (rlen < 2 || rest[0] != '(' || rest[rlen - 1] != ')') {
        return dest_err(errmsg, "unknown function", t, len);
    }
    const char *args = rest + 1;
    size_t alen = rlen - 2;
    bool wildcard = nlen == 8 && strncasecmp(in, "wildcard", 8) == 0;
    bool partition = nlen == 9 && strncasecmp(in, "partition", 9) == 0;
    if (!wildcard && !partition) {
        for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
            if (strlen(others[i]) == nlen &&
                strncasecmp(in, others[i], nlen) == 0) {
                return keel_err(KEEL_EINVAL, errmsg,
                                BAD_DEST ": function %.*s is not supported "
                                         "by keeld (use wildcard or "
                                         "partition) in %.*s",
                                (int)nlen, in, (int)(len > 200 ? 200 : len), t);
            }
        }
        return dest_err(errmsg, "unknown function", t, len);
    }
    /* Split the arguments at commas. */
    const char *a[SRV_JS_XFORM_ARGS_MAX + 2];
    size_t al[SRV_JS_XFORM_ARGS_MAX + 2];
    size_t na = 0;
    const char *p = args;
    const char *end = args + alen;
    while (na < SRV_JS_XFORM_ARGS_MAX + 2) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        a[na] = p;
        al[na] = (size_t)((c != NULL ? c : end) - p);
        na++;
        if (c == NULL) {
            break;
        }
        p = c + 1;
    }
    if (na == SRV_JS_XFORM_ARGS_MAX + 2) {
        return dest_err(errmsg, "too many arguments passed to the function", t,
                        len);
    }
    const char *a0 = a[0];
    if (trim(&a0, al[0]) == 0) {
        return dest_err(errmsg, "not enough arguments passed to the function",
                        t, len);
    }
    if (wildcard) {
        if (na > 1) {
            return dest_err(errmsg, "too many arguments passed to the function",
                            t, len);
        }
        tok->op = SRV_JS_XF_WILDCARD;
        tok->nargs = 1;
        return wildcard_arg(pwc, npwcs, a[0], al[0], t, len, &tok->args[0],
                            errmsg);
    }
    uint64_t n = 0;
    if (!parse_num(a[0], al[0], INT32_MAX, &n)) {
        return dest_err(errmsg,
                        "function argument is invalid or in the wrong format",
                        t, len);
    }
    tok->op = SRV_JS_XF_PARTITION;
    tok->buckets = (uint32_t)n;
    tok->nargs = (uint8_t)(na - 1);
    for (size_t i = 1; i < na; i++) {
        int rv = wildcard_arg(pwc, npwcs, a[i], al[i], t, len,
                              &tok->args[i - 1], errmsg);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

static int parse_dest_token(const struct srv_js_xform *x, const uint8_t *pwc,
                            uint32_t npwcs, const char *t, size_t len,
                            struct srv_js_xform_tok *tok, char *errmsg)
{
    memset(tok, 0, sizeof *tok);
    tok->op = SRV_JS_XF_LITERAL;
    tok->off = (uint16_t)(t - x->dest);
    tok->len = (uint16_t)len;
    if (len > 1 && t[0] == '$') {
        uint64_t n = 0;
        if (!parse_num(t + 1, len - 1, UINT32_MAX, &n) ||
            isspace((unsigned char)t[1])) {
            return 0; /* a literal that starts with '$', as nats-server */
        }
        tok->op = SRV_JS_XF_WILDCARD;
        tok->nargs = 1;
        return wildcard_arg(pwc, npwcs, t + 1, len - 1, t, len, &tok->args[0],
                            errmsg);
    }
    if (len > 4 && t[0] == '{' && t[1] == '{' && t[len - 2] == '}' &&
        t[len - 1] == '}') {
        return parse_function(pwc, npwcs, t, len, tok, errmsg);
    }
    if (len == 1 && t[0] == '>') {
        tok->op = SRV_JS_XF_FWC;
    }
    return 0;
}

int srv_js_xform_compile(const char *src, const char *dest,
                         struct srv_js_xform *out, char *errmsg)
{
    memset(out, 0, sizeof *out);
    if (src == NULL || src[0] == '\0') {
        src = ">";
    }
    if (dest == NULL || !srv_js_subject_valid(src, true) ||
        strlen(dest) > SRV_JS_SUBJECT_BYTES_MAX) {
        return keel_err(KEEL_EINVAL, errmsg, "invalid subject");
    }
    strcpy(out->src, src);
    strcpy(out->dest, dest);
    uint8_t pwc[SRV_SUBJECT_TOKENS_MAX];
    uint32_t npwcs = 0;
    bool src_fwc = false;
    size_t pos = 0;
    const char *t = NULL;
    size_t len = 0;
    while (take_token(out->src, &pos, &t, &len)) {
        if (len == 1 && t[0] == '*') {
            pwc[npwcs++] = (uint8_t)out->nsrc;
        }
        src_fwc = len == 1 && t[0] == '>';
        out->nsrc++;
    }
    pos = 0;
    bool dest_fwc = false;
    /* Bounded: a token per pass, at most SRV_SUBJECT_TOKENS_MAX. */
    while (take_token(out->dest, &pos, &t, &len)) {
        if (len == 0 || dest_fwc || out->ndest == SRV_SUBJECT_TOKENS_MAX ||
            (len == 1 && t[0] == '*')) {
            return keel_err(KEEL_EINVAL, errmsg, "invalid subject");
        }
        struct srv_js_xform_tok *tok = &out->tok[out->ndest++];
        int rv = parse_dest_token(out, pwc, npwcs, t, len, tok, errmsg);
        if (rv != 0) {
            return rv;
        }
        dest_fwc = tok->op == SRV_JS_XF_FWC;
    }
    if (out->ndest == 0 || out->dest[strlen(out->dest) - 1] == '.' ||
        src_fwc != dest_fwc) {
        return keel_err(KEEL_EINVAL, errmsg, "invalid subject");
    }
    out->identity = strcmp(out->src, ">") == 0 && strcmp(out->dest, ">") == 0;
    return 0;
}

struct obuf {
    char *p;
    size_t len, cap;
    bool full;
};

static void put(struct obuf *o, const char *s, size_t n)
{
    if (o->full || o->len + n >= o->cap) {
        o->full = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

/* FNV-1a, 32 bits, as nats-server's partition() hashes. */
static uint32_t fnv1a(uint32_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

int srv_js_xform_apply(const struct srv_js_xform *x, const char *subj,
                       size_t len, char *out, size_t cap, size_t *outlen)
{
    ASSERT(cap > 0);
    char s[SRV_JS_SUBJECT_BYTES_MAX + 1];
    const char *tk[SRV_SUBJECT_TOKENS_MAX];
    size_t tl[SRV_SUBJECT_TOKENS_MAX];
    uint32_t n = 0;
    *outlen = 0;
    out[0] = '\0';
    if (len == 0 || len > SRV_JS_SUBJECT_BYTES_MAX) {
        return KEEL_ENOENT;
    }
    memcpy(s, subj, len);
    s[len] = '\0';
    if (!srv_js_subject_valid(s, false) || !srv_js_subject_matches(x->src, s)) {
        return KEEL_ENOENT;
    }
    size_t pos = 0;
    while (n < SRV_SUBJECT_TOKENS_MAX && take_token(s, &pos, &tk[n], &tl[n])) {
        n++;
    }
    struct obuf o = {
        out, 0,
        cap < SRV_JS_SUBJECT_BYTES_MAX + 1 ? cap : SRV_JS_SUBJECT_BYTES_MAX + 1,
        false};
    if (x->identity) {
        put(&o, s, len);
    }
    for (uint32_t i = 0; !x->identity && i < x->ndest; i++) {
        const struct srv_js_xform_tok *t = &x->tok[i];
        if (i > 0) {
            put(&o, ".", 1);
        }
        switch (t->op) {
        case SRV_JS_XF_WILDCARD:
            put(&o, tk[t->args[0]], tl[t->args[0]]);
            break;
        case SRV_JS_XF_PARTITION: {
            uint32_t h = 2166136261u;
            if (t->nargs == 0) {
                h = fnv1a(h, s, len);
            }
            for (uint8_t k = 0; k < t->nargs; k++) {
                h = fnv1a(h, tk[t->args[k]], tl[t->args[k]]);
            }
            char num[16];
            int nn = snprintf(num, sizeof num, "%u",
                              t->buckets == 0 ? 0 : h % t->buckets);
            put(&o, num, (size_t)nn);
            break;
        }
        case SRV_JS_XF_FWC:
            /* What the source's '>' (its last token) matched. */
            for (uint32_t k = x->nsrc - 1; k < n; k++) {
                put(&o, tk[k], tl[k]);
                if (k + 1 < n) {
                    put(&o, ".", 1);
                }
            }
            break;
        case SRV_JS_XF_LITERAL:
        default:
            put(&o, x->dest + t->off, t->len);
            break;
        }
    }
    if (o.full) {
        out[0] = '\0';
        return KEEL_ELIMIT;
    }
    *outlen = o.len;
    return 0;
}

void srv_js_xform_dest_pattern(const struct srv_js_xform *x,
                               char out[SRV_JS_SUBJECT_BYTES_MAX + 1])
{
    struct obuf o = {out, 0, SRV_JS_SUBJECT_BYTES_MAX + 1, false};
    out[0] = '\0';
    for (uint32_t i = 0; i < x->ndest; i++) {
        const struct srv_js_xform_tok *t = &x->tok[i];
        if (i > 0) {
            put(&o, ".", 1);
        }
        if (t->op == SRV_JS_XF_WILDCARD || t->op == SRV_JS_XF_PARTITION) {
            put(&o, "*", 1);
        } else {
            put(&o, x->dest + t->off, t->len);
        }
    }
    /* Never longer than dest: each function token became one byte. */
    ASSERT(!o.full);
}
