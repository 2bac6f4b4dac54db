#include "srv_parser.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "keel/error.h"
#include "srv_units.h"

void srv_parser_init(struct srv_parser *p, size_t max_payload)
{
    memset(p, 0, sizeof *p);
    p->state = SRV_PARSER_LINE;
    p->max_payload = max_payload;
}

void srv_parser_close(struct srv_parser *p)
{
    free(p->buf);
    p->buf = NULL;
    p->buf_cap = 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Split on runs of blanks (nats.c sends "SUB foo  5"). Returns the number of
 * arguments, or SRV_PROTO_ARGS_MAX + 1 when there are too many. */
static size_t split_args(const char *s, size_t len, struct srv_slice *args)
{
    size_t n = 0;
    size_t i = 0;

    while (i < len) {
        while (i < len && is_blank(s[i])) {
            i++;
        }
        if (i == len) {
            break;
        }
        if (n == SRV_PROTO_ARGS_MAX) {
            return SRV_PROTO_ARGS_MAX + 1;
        }
        size_t start = i;
        while (i < len && !is_blank(s[i])) {
            i++;
        }
        args[n].ptr = s + start;
        args[n].len = i - start;
        n++;
    }
    return n;
}

/* Case-insensitive verb match; name is upper case. OR-ing 0x20 folds
 * letters only, and no non-letter byte folds onto a letter. */
static inline bool verb_is(struct srv_slice v, const char *name)
{
    size_t n = strlen(name);

    if (v.len != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char)v.ptr[i] | 0x20) !=
            ((unsigned char)name[i] | 0x20)) {
            return false;
        }
    }
    return true;
}

static int parse_size(struct srv_parser *p, struct srv_slice s, size_t *out)
{
    uint64_t v;

    if (!srv_parse_u64(s.ptr, s.len, &v)) {
        return KEEL_EPROTO;
    }
    if (v > p->max_payload) {
        return KEEL_ELIMIT;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_pub(struct srv_parser *p, const struct srv_slice *a, size_t n,
                     struct srv_cmd *cmd)
{
    int rv;
    bool hpub = cmd->op == SRV_OP_HPUB;
    size_t sizes = hpub ? 2 : 1;

    cmd->subject = a[0];
    if (n == sizes + 2) {
        cmd->reply = a[1];
    }
    rv = parse_size(p, a[n - 1], &cmd->total_bytes);
    if (rv != 0) {
        return rv;
    }
    if (hpub) {
        uint64_t hdr;
        if (!srv_parse_u64(a[n - 2].ptr, a[n - 2].len, &hdr) ||
            hdr > cmd->total_bytes) {
            return KEEL_EPROTO;
        }
        cmd->hdr_bytes = (size_t)hdr;
    }
    return 0;
}

static int parse_sub(struct srv_parser *p, const struct srv_slice *a, size_t n,
                     struct srv_cmd *cmd)
{
    (void)p;
    cmd->subject = a[0];
    cmd->sid = a[n - 1];
    if (n == 3) {
        cmd->queue = a[1];
    }
    return 0;
}

static int parse_unsub(struct srv_parser *p, const struct srv_slice *a,
                       size_t n, struct srv_cmd *cmd)
{
    (void)p;
    cmd->sid = a[0];
    if (n == 2 && !srv_parse_u64(a[1].ptr, a[1].len, &cmd->max)) {
        return KEEL_EPROTO;
    }
    return 0;
}

/* The rest of the line is one argument (JSON), not split on blanks. */
#define ARGS_RAW SIZE_MAX

/* One row per verb: the dispatcher checks the arity, the handler only
 * parses. PUB comes first because it is nearly all of the traffic. */
static const struct verb {
    const char *name;
    enum srv_op op;
    size_t args_min;
    size_t args_max;
    int (*parse)(struct srv_parser *p, const struct srv_slice *a, size_t n,
                 struct srv_cmd *cmd);
} verbs[] = {
    {"PUB", SRV_OP_PUB, 2, 3, parse_pub},
    {"HPUB", SRV_OP_HPUB, 3, 4, parse_pub},
    {"SUB", SRV_OP_SUB, 2, 3, parse_sub},
    {"UNSUB", SRV_OP_UNSUB, 1, 2, parse_unsub},
    {"PING", SRV_OP_PING, 0, 0, NULL},
    {"PONG", SRV_OP_PONG, 0, 0, NULL},
    {"CONNECT", SRV_OP_CONNECT, ARGS_RAW, ARGS_RAW, NULL},
    {"INFO", SRV_OP_INFO, ARGS_RAW, ARGS_RAW, NULL},
};

static int parse_line(struct srv_parser *p, const char *s, size_t len,
                      struct srv_cmd *cmd)
{
    struct srv_slice a[SRV_PROTO_ARGS_MAX + 1];
    const struct verb *v = NULL;
    size_t i = 0;

    memset(cmd, 0, sizeof *cmd);
    while (i < len && is_blank(s[i])) {
        i++;
    }
    size_t vstart = i;
    while (i < len && !is_blank(s[i])) {
        i++;
    }
    struct srv_slice verb = {s + vstart, i - vstart};
    for (size_t k = 0; k < sizeof verbs / sizeof verbs[0] && v == NULL; k++) {
        if (verb_is(verb, verbs[k].name)) {
            v = &verbs[k];
        }
    }
    if (v == NULL) {
        return KEEL_EPROTO;
    }
    cmd->op = v->op;
    if (v->args_min == ARGS_RAW) {
        while (i < len && is_blank(s[i])) {
            i++;
        }
        cmd->json.ptr = s + i;
        cmd->json.len = len - i;
        return 0;
    }
    size_t n = split_args(s + i, len - i, a);
    if (n < v->args_min || n > v->args_max) {
        return KEEL_EPROTO;
    }
    return v->parse != NULL ? v->parse(p, a, n, cmd) : 0;
}

static void rebase(struct srv_slice *s, const char *from, size_t from_len,
                   const char *to)
{
    if (s->ptr >= from && s->ptr <= from + from_len) {
        s->ptr = to + (s->ptr - from);
    }
}

/* Keep a command whose payload continues in a later read: its control line
 * moves into p->line (if it is not there already) and the payload starts
 * gathering in p->buf. */
static int start_split_payload(struct srv_parser *p, struct srv_cmd *cmd,
                               const char *line, size_t line_len)
{
    size_t need = cmd->total_bytes + 2;

    if (line != p->line) {
        ASSERT(line_len <= SRV_CONTROL_LINE_BYTES_MAX);
        memcpy(p->line, line, line_len);
        rebase(&cmd->subject, line, line_len, p->line);
        rebase(&cmd->reply, line, line_len, p->line);
    }
    if (p->buf_cap < need) {
        char *b = realloc(p->buf, need);
        if (b == NULL) {
            return KEEL_ENOMEM;
        }
        p->buf = b;
        p->buf_cap = need;
    }
    p->pending = *cmd;
    p->buf_len = 0;
    p->state = SRV_PARSER_PAYLOAD;
    return 0;
}

static int payload_end_ok(const char *end)
{
    return end[0] == '\r' && end[1] == '\n' ? 0 : KEEL_EPROTO;
}

/* Consume one control line that ends at nl; *used gets the bytes taken
 * (line and, when complete, payload). */
static int take_line(struct srv_parser *p, const char *data, size_t len,
                     const char *nl, size_t *used, srv_parser_cb cb, void *ud)
{
    const char *line = data;
    size_t line_len = (size_t)(nl - data);
    struct srv_cmd cmd;
    int rv;

    if (p->line_len > 0) {
        if (p->line_len + line_len > SRV_CONTROL_LINE_BYTES_MAX + 1) {
            return KEEL_ETOOBIG;
        }
        memcpy(p->line + p->line_len, data, line_len);
        line = p->line;
        line_len += p->line_len;
        p->line_len = 0;
    }
    *used = (size_t)(nl - data) + 1;
    if (line_len > 0 && line[line_len - 1] == '\r') {
        line_len--;
    }
    if (line_len > SRV_CONTROL_LINE_BYTES_MAX) {
        return KEEL_ETOOBIG;
    }
    rv = parse_line(p, line, line_len, &cmd);
    if (rv != 0) {
        return rv;
    }
    if (cmd.op != SRV_OP_PUB && cmd.op != SRV_OP_HPUB) {
        return cb(ud, &cmd);
    }
    size_t avail = len - *used;
    if (avail >= cmd.total_bytes + 2) {
        cmd.payload = data + *used;
        rv = payload_end_ok(cmd.payload + cmd.total_bytes);
        if (rv != 0) {
            return rv;
        }
        *used += cmd.total_bytes + 2;
        return cb(ud, &cmd);
    }
    return start_split_payload(p, &cmd, line, line_len);
}

static int take_payload(struct srv_parser *p, const char *data, size_t len,
                        size_t *used, srv_parser_cb cb, void *ud)
{
    size_t need = p->pending.total_bytes + 2 - p->buf_len;
    size_t take = len < need ? len : need;
    int rv;

    memcpy(p->buf + p->buf_len, data, take);
    p->buf_len += take;
    *used = take;
    if (take < need) {
        return 0;
    }
    p->state = SRV_PARSER_LINE;
    rv = payload_end_ok(p->buf + p->pending.total_bytes);
    if (rv != 0) {
        return rv;
    }
    p->pending.payload = p->buf;
    return cb(ud, &p->pending);
}

static int keep_partial_line(struct srv_parser *p, const char *data, size_t len)
{
    if (p->line_len + len > SRV_CONTROL_LINE_BYTES_MAX + 1) {
        return KEEL_ETOOBIG;
    }
    memcpy(p->line + p->line_len, data, len);
    p->line_len += len;
    return 0;
}

int srv_parser_feed(struct srv_parser *p, const char *data, size_t len,
                    srv_parser_cb cb, void *ud)
{
    size_t i = 0;
    int rv = 0;

    if (p->state == SRV_PARSER_FAILED) {
        return KEEL_EPROTO;
    }
    while (i < len && rv == 0) {
        size_t used = 0;
        if (p->state == SRV_PARSER_PAYLOAD) {
            rv = take_payload(p, data + i, len - i, &used, cb, ud);
        } else {
            const char *nl = memchr(data + i, '\n', len - i);
            if (nl == NULL) {
                rv = keep_partial_line(p, data + i, len - i);
                used = len - i;
            } else {
                rv = take_line(p, data + i, len - i, nl, &used, cb, ud);
            }
        }
        i += used;
    }
    if (rv == KEEL_EPROTO || rv == KEEL_ETOOBIG || rv == KEEL_ELIMIT ||
        rv == KEEL_ENOMEM) {
        p->state = SRV_PARSER_FAILED;
    }
    return rv;
}
