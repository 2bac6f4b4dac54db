/* libFuzzer target for the JetStream API request handlers' parsing, end
 * to end as a request reaches them: the first byte picks the handler, the
 * rest is "subject\nbody".
 *   0: consumer create ($JS.API.CONSUMER.CREATE...): subject parse, then
 *      the body's config; a parsed config must encode and parse back equal
 *   1: an ack ($JS.ACK...): the reply subject (it must rebuild to the same
 *      subject) and the ack body (+ACK, -NAK delay, +TERM, +NXT json)
 *   2: request times (opt_start_time as a client sends it)
 *   3: MSG.NEXT / MSG.GET / PURGE style bodies: any JSON, then as a config
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"
#include "srv_consumer_cfg.h"
#include "srv_consumer_sm.h"
#include "srv_js_config.h"

static void consumer_config(const char *body, size_t len)
{
    char errmsg[KEEL_ERRMSG_MAX];
    enum srv_js_err jerr = SRV_JS_OK;
    json_t *root = json_loadb(body, len, JSON_DECODE_ANY, NULL);
    if (root == NULL) {
        return;
    }
    const json_t *j = json_object_get(root, "config");
    struct srv_consumer_config cfg, again;
    json_t *enc = NULL;
    if (srv_consumer_config_parse(j != NULL ? j : root, &cfg, &jerr, errmsg) ==
        0) {
        ASSERT(srv_consumer_config_encode(&cfg, &enc, errmsg) == 0);
        ASSERT(srv_consumer_config_parse(enc, &again, &jerr, errmsg) == 0);
        ASSERT(srv_consumer_config_equal(&cfg, &again));
        srv_consumer_config_free(&again);
        json_decref(enc);
    } else {
        ASSERT(jerr != SRV_JS_OK);
    }
    srv_consumer_config_free(&cfg);
    json_decref(root);
}

static void ack(const char *subj, size_t slen, const char *body, size_t blen)
{
    char errmsg[KEEL_ERRMSG_MAX];
    struct srv_ack_reply r;
    struct srv_ack_body b;
    char buf[SRV_ACK_REPLY_BYTES_MAX + 1];
    size_t n = 0;

    if (srv_ack_reply_parse(subj, slen, &r, errmsg) == 0 &&
        srv_ack_reply_build(&r, buf, sizeof buf, &n, errmsg) == 0) {
        struct srv_ack_reply again;
        ASSERT(srv_ack_reply_parse(buf, n, &again, errmsg) == 0);
        ASSERT(strcmp(r.stream, again.stream) == 0 &&
               strcmp(r.consumer, again.consumer) == 0 &&
               r.delivered == again.delivered &&
               r.stream_seq == again.stream_seq &&
               r.consumer_seq == again.consumer_seq && r.ts_ns == again.ts_ns &&
               r.pending == again.pending);
    }
    if (srv_ack_body_parse(body, blen, &b, errmsg) == 0 && b.arg != NULL) {
        ASSERT(b.arg >= body && b.arg + b.arg_len <= body + blen);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char errmsg[KEEL_ERRMSG_MAX];
    if (size < 1) {
        return 0;
    }
    /* A NUL-terminated copy: subjects and times are C strings. */
    char *text = malloc(size);
    if (text == NULL) {
        return 0;
    }
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    size_t len = size - 1;
    char *nl = memchr(text, '\n', len);
    size_t slen = nl != NULL ? (size_t)(nl - text) : len;
    const char *body = nl != NULL ? nl + 1 : text + len;
    size_t blen = len - slen - (nl != NULL ? 1 : 0);

    switch (data[0] % 4) {
    case 0: {
        struct srv_consumer_create_subj s;
        (void)srv_consumer_create_subject_parse(text, slen, &s, errmsg);
        consumer_config(body, blen);
        break;
    }
    case 1:
        ack(text, slen, body, blen);
        break;
    case 2: {
        int64_t ns = 0;
        (void)srv_js_time_parse(text, &ns);
        break;
    }
    default:
        consumer_config(text, len);
        break;
    }
    free(text);
    return 0;
}
