/* srv_consumer_sm: consumer pieces of PROTOCOL.md §2.7 that the consumer
 * state machine and the wiring share. So far: the $JS.ACK reply subject (v1)
 * built and parsed, and the ack body (+ACK, -NAK [delay], +WPI, +TERM,
 * +NXT) parsed. Pure: no I/O, no clock. */
#ifndef KEEL_SRV_CONSUMER_SM_H
#define KEEL_SRV_CONSUMER_SM_H

#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"

/* $JS.ACK.<stream>.<consumer>.<delivered_count>.<stream_seq>.
 * <consumer_seq>.<timestamp_ns>.<num_pending> */
struct srv_ack_reply {
    char stream[SRV_JS_NAME_BYTES_MAX + 1];
    char consumer[SRV_JS_NAME_BYTES_MAX + 1];
    uint64_t delivered; /* starts at 1 */
    uint64_t stream_seq;
    uint64_t consumer_seq;
    int64_t ts_ns; /* stored time, Unix ns */
    uint64_t pending;
};

/* Longest v1 ack subject: two names and five 20-digit numbers. */
#define SRV_ACK_REPLY_BYTES_MAX (9 + 2 * SRV_JS_NAME_BYTES_MAX + 5 * 21 + 1)

/* Write the v1 ack subject of r into buf (NUL-terminated, *outlen without
 * the NUL). Names must be valid (srv_js_name_valid). Returns 0 or
 * KEEL_EINVAL (invalid name, delivered 0, ts < 0, buf too small). */
KEEL_MUST_USE int srv_ack_reply_build(const struct srv_ack_reply *r, char *buf,
                                      size_t len, size_t *outlen, char *errmsg);

/* Parse a v1 ack subject (9 tokens, numbers in decimal without sign, names
 * valid). Returns 0 or KEEL_EINVAL (not an ack subject of this form,
 * including the v2 form, which is LATER). */
KEEL_MUST_USE int srv_ack_reply_parse(const char *subj, size_t len,
                                      struct srv_ack_reply *out, char *errmsg);

enum srv_ack_kind {
    SRV_ACK_ACK = 0, /* empty body or +ACK */
    SRV_ACK_NAK,     /* -NAK, optional delay */
    SRV_ACK_WPI,     /* +WPI: reset ack_wait */
    SRV_ACK_TERM,    /* +TERM[ reason]: never redeliver */
    SRV_ACK_NXT,     /* +NXT[ pull json]: ack and pull */
};

struct srv_ack_body {
    enum srv_ack_kind kind;
    int64_t delay_ns; /* -NAK delay, 0 = redeliver now */
    const char *arg;  /* TERM reason / NXT request (points into body) */
    size_t arg_len;
};

/* Parse an ack body: "", "+ACK", "-NAK", "-NAK {\"delay\":<ns>}",
 * "-NAK <n><unit>" (unit ns|us|ms|s|m|h), "+WPI", "+TERM[ reason]",
 * "+NXT[ json]". Returns 0 or KEEL_EINVAL (unknown verb or bad delay). */
KEEL_MUST_USE int srv_ack_body_parse(const char *body, size_t len,
                                     struct srv_ack_body *out, char *errmsg);

#endif
