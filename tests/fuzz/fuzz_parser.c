/* libFuzzer target for srv_parser: arbitrary bytes, split at points the
 * fuzzer chooses, must parse exactly like the unsplit input (same commands,
 * same error), without memory errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_parser.h"

#define FUZZ_INPUT_MAX (256 * 1024)
#define FUZZ_CUTS_MAX 16
#define FUZZ_MAX_PAYLOAD 4096

struct log {
    char *buf;
    size_t len;
    size_t cap;
};

static void log_put(struct log *l, const void *p, size_t n)
{
    if (l->len + n > l->cap) {
        size_t cap = (l->cap + n) * 2;
        char *b = realloc(l->buf, cap);
        if (b == NULL) {
            abort();
        }
        l->buf = b;
        l->cap = cap;
    }
    if (n > 0) { /* an empty slice may have a NULL ptr */
        memcpy(l->buf + l->len, p, n);
    }
    l->len += n;
}

static void put_slice(struct log *l, struct srv_slice s)
{
    log_put(l, &s.len, sizeof s.len);
    log_put(l, s.ptr, s.len);
}

static int record_cb(void *ud, const struct srv_cmd *c)
{
    struct log *l = ud;
    log_put(l, &c->op, sizeof c->op);
    put_slice(l, c->subject);
    put_slice(l, c->reply);
    put_slice(l, c->queue);
    put_slice(l, c->sid);
    put_slice(l, c->json);
    log_put(l, &c->max, sizeof c->max);
    log_put(l, &c->hdr_bytes, sizeof c->hdr_bytes);
    log_put(l, &c->total_bytes, sizeof c->total_bytes);
    if (c->op == SRV_OP_PUB || c->op == SRV_OP_HPUB) {
        log_put(l, c->payload, c->total_bytes);
    }
    return 0;
}

/* Feed pieces; return the first non-zero result. */
static int run(const uint8_t *d, size_t n, const size_t *cuts, size_t ncuts,
               struct log *l)
{
    struct srv_parser p;
    size_t at = 0;
    int rv = 0;

    srv_parser_init(&p, FUZZ_MAX_PAYLOAD);
    for (size_t i = 0; i <= ncuts && rv == 0; i++) {
        size_t end = i < ncuts ? cuts[i] : n;
        rv = srv_parser_feed(&p, (const char *)d + at, end - at, record_cb, l);
        at = end;
    }
    srv_parser_close(&p);
    return rv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t cuts[FUZZ_CUTS_MAX];
    size_t ncuts;
    struct log whole = {0};
    struct log split = {0};

    if (size < 1 || size > FUZZ_INPUT_MAX) {
        return 0;
    }
    /* Byte 0: number of cuts; the next bytes: where (as fractions). */
    ncuts = data[0] % FUZZ_CUTS_MAX;
    if (size < 1 + ncuts) {
        return 0;
    }
    const uint8_t *d = data + 1 + ncuts;
    size_t n = size - 1 - ncuts;
    size_t prev = 0;
    for (size_t i = 0; i < ncuts; i++) {
        size_t c = n * data[1 + i] / 255;
        cuts[i] = c < prev ? prev : c;
        prev = cuts[i];
    }
    int rv_whole = run(d, n, cuts, 0, &whole);
    int rv_split = run(d, n, cuts, ncuts, &split);
    if (rv_whole != rv_split || whole.len != split.len ||
        (whole.len > 0 && memcmp(whole.buf, split.buf, whole.len) != 0)) {
        fprintf(stderr, "split parse differs: rv %d vs %d, log %zu vs %zu\n",
                rv_whole, rv_split, whole.len, split.len);
        abort();
    }
    free(whole.buf);
    free(split.buf);
    return 0;
}
