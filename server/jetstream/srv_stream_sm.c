/* srv_stream_sm: header lookup and publish expectations. */
#include "srv_stream_sm.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <strings.h>

#include "keel/error.h"
#include "keel/grow.h"
#include "keel/limits.h"

static size_t trim(const char **s, size_t len)
{
    while (len > 0 && (**s == ' ' || **s == '\t')) {
        (*s)++;
        len--;
    }
    while (len > 0 && ((*s)[len - 1] == ' ' || (*s)[len - 1] == '\t')) {
        len--;
    }
    return len;
}

int srv_nats_hdr_get(const char *hdr, size_t len, const char *name,
                     const char **val, size_t *vlen)
{
    *val = NULL;
    *vlen = 0;
    if (len < 10 || memcmp(hdr, "NATS/1.0", 8) != 0) {
        return KEEL_EINVAL;
    }
    const char *end = hdr + len;
    const char *p = memmem(hdr, len, "\r\n", 2);
    size_t nlen = strlen(name);
    /* Each pass consumes at least one line (>= 2 bytes), so it ends. */
    while (p != NULL && (size_t)(end - p) >= 2) {
        p += 2;
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (eol == NULL) {
            return KEEL_EINVAL;
        }
        if (eol == p) {
            return KEEL_ENOENT; /* blank line: end of the block */
        }
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon == NULL) {
            return KEEL_EINVAL;
        }
        const char *k = p;
        size_t klen = trim(&k, (size_t)(colon - p));
        if (klen == nlen && strncasecmp(k, name, nlen) == 0) {
            const char *v = colon + 1;
            *vlen = trim(&v, (size_t)(eol - v));
            *val = v;
            return 0;
        }
        p = eol;
    }
    return p == NULL ? KEEL_EINVAL : KEEL_ENOENT;
}

int srv_nats_hdr_replace(const char *hdr, size_t len, const char *name,
                         const char *line, size_t line_len, char **out,
                         size_t *out_len)
{
    static const char empty[] = "NATS/1.0\r\n\r\n";
    if (len == 0) {
        hdr = empty;
        len = sizeof empty - 1;
    }
    *out = NULL;
    *out_len = 0;
    char *b = malloc(len + line_len + 1);
    if (b == NULL) {
        return KEEL_ENOMEM;
    }
    const char *p = hdr, *end = hdr + len;
    size_t n = 0, nlen = strlen(name);
    bool ended = false;
    /* Each pass copies or skips one CRLF-ended line; the new line goes
     * before the blank line that ends the block. */
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        size_t l = eol != NULL ? (size_t)(eol - p) + 2 : (size_t)(end - p);
        if (l == 2 && p != hdr && !ended) {
            memcpy(b + n, line, line_len);
            n += line_len;
            ended = true;
        }
        bool named = p != hdr && l > nlen && strncasecmp(p, name, nlen) == 0 &&
                     (p[nlen] == ':' || p[nlen] == ' ' || p[nlen] == '\t');
        if (!named) {
            memcpy(b + n, p, l);
            n += l;
        }
        p += l;
    }
    if (!ended) {
        free(b);
        return KEEL_EINVAL;
    }
    ASSERT(n <= len + line_len);
    *out = b;
    *out_len = n;
    return 0;
}

static bool parse_seq(const char *s, size_t len, uint64_t *v)
{
    uint64_t x = 0;
    if (len == 0 || len > 20) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9' || x > (UINT64_MAX - 9) / 10) {
            return false;
        }
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    *v = x;
    return true;
}

static bool same(const char *v, size_t vlen, const char *s)
{
    return s != NULL && strlen(s) == vlen && memcmp(v, s, vlen) == 0;
}

/* One numeric expectation; returns 0, 1 on mismatch, -1 when malformed. */
static int check_seq(const char *hdr, size_t len, const char *name,
                     uint64_t actual)
{
    const char *v = NULL;
    size_t vl = 0;
    int rv = srv_nats_hdr_get(hdr, len, name, &v, &vl);
    if (rv == KEEL_ENOENT) {
        return 0;
    }
    uint64_t want = 0;
    if (rv != 0 || !parse_seq(v, vl, &want)) {
        return -1;
    }
    return want == actual ? 0 : 1;
}

int srv_stream_check_expect(const struct srv_stream_expect_state *st,
                            const char *hdr, size_t len, enum srv_js_err *jerr,
                            char *detail)
{
    ASSERT(st->stream != NULL);
    *jerr = SRV_JS_OK;
    detail[0] = '\0';
    if (hdr == NULL || len == 0) {
        return 0;
    }
    const char *v = NULL;
    size_t vl = 0;
    int rv = srv_nats_hdr_get(hdr, len, "Nats-Expected-Stream", &v, &vl);
    if (rv == 0 && !same(v, vl, st->stream)) {
        *jerr = SRV_JS_EEXPECTED_STREAM;
        return KEEL_EINVAL;
    }
    int r1 =
        rv == KEEL_EINVAL
            ? -1
            : check_seq(hdr, len, "Nats-Expected-Last-Sequence", st->last_seq);
    int r2 = r1 != 0
                 ? r1
                 : check_seq(hdr, len, "Nats-Expected-Last-Subject-Sequence",
                             st->subject_last_seq);
    if (r1 < 0 || r2 < 0) {
        *jerr = SRV_JS_EBAD_REQUEST;
        return KEEL_EINVAL;
    }
    if (r1 > 0 || r2 > 0) {
        *jerr = SRV_JS_EWRONG_LAST_SEQ;
        snprintf(detail, SRV_JS_ERR_DESC_BYTES_MAX, "%" PRIu64,
                 r1 > 0 ? st->last_seq : st->subject_last_seq);
        return KEEL_EINVAL;
    }
    rv = srv_nats_hdr_get(hdr, len, "Nats-Expected-Last-Msg-Id", &v, &vl);
    if (rv == 0 && !same(v, vl, st->last_msg_id)) {
        *jerr = SRV_JS_EWRONG_LAST_MSG_ID;
        snprintf(detail, SRV_JS_ERR_DESC_BYTES_MAX, "%s",
                 st->last_msg_id != NULL ? st->last_msg_id : "");
        return KEEL_EINVAL;
    }
    return 0;
}

void srv_dedupe_init(struct srv_dedupe *d)
{
    memset(d, 0, sizeof *d);
    srv_hmap_init(&d->map);
}

void srv_dedupe_close(struct srv_dedupe *d)
{
    for (size_t i = 0; i < d->count; i++) {
        struct srv_dedupe_ent *e = d->ring[(d->head + i) % d->cap];
        free(e->id);
        free(e);
    }
    free(d->ring);
    srv_hmap_close(&d->map);
    memset(d, 0, sizeof *d);
}

static void dedupe_pop(struct srv_dedupe *d)
{
    ASSERT(d->count > 0);
    struct srv_dedupe_ent *e = d->ring[d->head];
    ASSERT(srv_hmap_get(&d->map, e->id, e->id_len) == e);
    (void)srv_hmap_del(&d->map, e->id, e->id_len);
    free(e->id);
    free(e);
    d->head = (d->head + 1) % d->cap;
    d->count--;
}

void srv_dedupe_expire(struct srv_dedupe *d, int64_t now_ns, int64_t window_ns)
{
    ASSERT(window_ns >= 0);
    /* Bounded by count <= SRV_JS_DEDUPE_IDS_MAX. */
    while (d->count > 0 && d->ring[d->head]->ts_ns <= now_ns - window_ns) {
        dedupe_pop(d);
    }
}

uint64_t srv_dedupe_find(const struct srv_dedupe *d, const char *id,
                         size_t id_len)
{
    const struct srv_dedupe_ent *e = srv_hmap_get(&d->map, id, id_len);
    return e != NULL ? e->seq : 0;
}

static int dedupe_grow(struct srv_dedupe *d)
{
    size_t ncap = d->cap == 0 ? 64 : d->cap * 2;
    if (ncap > SRV_JS_DEDUPE_IDS_MAX) {
        ncap = SRV_JS_DEDUPE_IDS_MAX;
    }
    return keel_ring_resize(&d->ring, sizeof *d->ring, &d->cap, &d->head,
                            d->count, ncap);
}

int srv_dedupe_add(struct srv_dedupe *d, const char *id, size_t id_len,
                   int64_t ts_ns, uint64_t seq)
{
    if (id_len == 0 || srv_hmap_get(&d->map, id, id_len) != NULL) {
        return KEEL_EINVAL;
    }
    if (d->count == SRV_JS_DEDUPE_IDS_MAX) {
        dedupe_pop(d);
    }
    if (d->count == d->cap && dedupe_grow(d) != 0) {
        return KEEL_ENOMEM;
    }
    struct srv_dedupe_ent *e = calloc(1, sizeof *e);
    char *copy = malloc(id_len);
    if (e == NULL || copy == NULL ||
        srv_hmap_put(&d->map, id, id_len, e) != 0) {
        free(e);
        free(copy);
        return KEEL_ENOMEM;
    }
    memcpy(copy, id, id_len);
    *e = (struct srv_dedupe_ent){copy, id_len, ts_ns, seq};
    d->ring[(d->head + d->count) % d->cap] = e;
    d->count++;
    ASSERT(d->count <= d->cap);
    return 0;
}
