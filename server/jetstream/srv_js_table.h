/* srv_js_table: every subject JetStream answers, in one declared table.
 *
 * srv_js_intercept looks a publish's subject up once; the entry says who
 * answers it (this node, the meta leader, the named stream's leader), what
 * runs before it (readiness) and which handler answers it. A subject not
 * starting with '$' costs one byte compare and reaches no entry.
 */
#ifndef SRV_JS_TABLE_H
#define SRV_JS_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srv_js_forward.h"

struct srv_js;
struct srv_cmd;

/* A request as the handlers get it. */
struct srv_js_req {
    const struct srv_cmd *cmd;
    const char *subject;
    size_t subject_len;
    const char *reply; /* NUL-terminated; "" when none */
    const char *body;  /* after the headers */
    size_t body_len;
};

/* Answer (or drop) q; false: not taken after all (the publish then goes
 * on to stream capture). */
typedef bool (*srv_js_api_fn)(struct srv_js *js, const struct srv_js_req *q);

enum srv_js_match {
    SRV_JS_MATCH_EXACT,   /* the subject itself */
    SRV_JS_MATCH_LONGER,  /* the prefix and at least one byte more */
    SRV_JS_MATCH_ATLEAST, /* the prefix, maybe nothing more */
};

/* Answered by every node itself, before the readiness check and
 * forwarding (status, orphans, lame duck). */
#define SRV_JS_API_LOCAL 0x01u
/* Clustered and no meta leader known yet: answered 503 "not ready". */
#define SRV_JS_API_READY 0x02u

struct srv_js_api_entry {
    const char *subject; /* or prefix (match) */
    uint8_t len;         /* strlen(subject) */
    uint8_t match;       /* enum srv_js_match */
    uint8_t flags;       /* SRV_JS_API_* */
    uint8_t route;       /* enum srv_js_fwd_target; a prefix entry routed
                          * to a stream has its name as the next token */
    srv_js_api_fn fn;
};

/* The first entry subject matches (table order), NULL when none. Pure. */
const struct srv_js_api_entry *srv_js_api_lookup(const char *subject,
                                                 size_t len);

/* Who answers subject, which matched e (may be NULL): for
 * SRV_JS_FWD_STREAM stream (SRV_JS_NAME_BYTES_MAX + 1 bytes) gets the
 * name; a routed subject naming no valid stream is answered here. Pure. */
enum srv_js_fwd_target srv_js_api_target(const struct srv_js_api_entry *e,
                                         const char *subject, size_t len,
                                         char *stream);

/* The table itself (for tests and docs). */
extern const struct srv_js_api_entry srv_js_api_table[];
extern const size_t srv_js_api_table_len;

#endif
