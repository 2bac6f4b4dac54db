/* Streaming parser for the client side of the NATS core protocol
 * (docs/protocol.md §1). Bytes may arrive split at any boundary; the parser
 * emits the same commands either way. Payloads that arrive in one read are
 * handed to the callback in place (no copy); split payloads are gathered in a
 * per-parser buffer that is reused across messages.
 */
#ifndef SRV_PARSER_H
#define SRV_PARSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"
#include "keel/limits.h"

enum srv_op {
    SRV_OP_CONNECT = 1,
    SRV_OP_PUB,
    SRV_OP_HPUB,
    SRV_OP_SUB,
    SRV_OP_UNSUB,
    SRV_OP_PING,
    SRV_OP_PONG,
    SRV_OP_INFO,
};

struct srv_slice {
    const char *ptr;
    size_t len;
};

/* One parsed command. Slices and payload are valid only during the callback. */
struct srv_cmd {
    enum srv_op op;
    struct srv_slice subject; /* PUB, HPUB, SUB */
    struct srv_slice reply;   /* PUB, HPUB; len 0 if absent */
    struct srv_slice queue;   /* SUB; len 0 if absent */
    struct srv_slice sid;     /* SUB, UNSUB */
    struct srv_slice json;    /* CONNECT, INFO: rest of the line */
    uint64_t max;             /* UNSUB: 0 if absent */
    size_t hdr_bytes;         /* HPUB: header block bytes; 0 for PUB */
    size_t total_bytes;       /* PUB, HPUB: headers + payload bytes */
    const char *payload;      /* PUB, HPUB: total_bytes bytes */
};

/* Called once per command; a non-zero return stops parsing and is returned
 * by srv_parser_feed. */
typedef int (*srv_parser_cb)(void *ud, const struct srv_cmd *cmd);

enum srv_parser_state {
    SRV_PARSER_LINE = 0,
    SRV_PARSER_PAYLOAD,
    SRV_PARSER_FAILED,
};

struct srv_parser {
    enum srv_parser_state state;
    size_t max_payload;
    size_t line_len;
    char line[SRV_CONTROL_LINE_BYTES_MAX + 2];
    struct srv_cmd pending; /* PAYLOAD state: its slices point into line */
    char *buf;              /* split payloads: total_bytes + CRLF */
    size_t buf_cap;
    size_t buf_len;
};

/* Initialise a parser that rejects payloads above max_payload bytes. */
void srv_parser_init(struct srv_parser *p, size_t max_payload);

/* Free the payload buffer. */
void srv_parser_close(struct srv_parser *p);

/* Feed len bytes. Calls cb for each complete command in order. Returns 0,
 * the callback's non-zero value, or on bad input (after which the parser
 * stays failed):
 *   KEEL_EPROTO  - unknown verb or malformed arguments or framing
 *                  (-ERR 'Unknown Protocol Operation');
 *   KEEL_ETOOBIG - control line over SRV_CONTROL_LINE_BYTES_MAX
 *                  (-ERR 'maximum control line exceeded');
 *   KEEL_ELIMIT  - payload over max_payload
 *                  (-ERR 'Maximum Payload Violation');
 *   KEEL_ENOMEM.
 */
int srv_parser_feed(struct srv_parser *p, const char *data, size_t len,
                    srv_parser_cb cb, void *ud);

#endif
