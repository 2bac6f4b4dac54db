/* srv_tags: the tags of a server (`server_tags`) and the tags a stream's
 * placement asks for, matched as nats-server matches them: without regard
 * to case, every tag asked for among the server's (docs/cluster.md,
 * "Placement tags"). Pure. */
#ifndef KEEL_SRV_TAGS_H
#define KEEL_SRV_TAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "keel/assert.h"
#include "keel/limits.h"

/* Up to SRV_TAGS_MAX tags, each lowercased, 1 to SRV_TAG_BYTES - 1 bytes,
 * in the order given (a repeated tag kept once). */
struct srv_tags {
    uint32_t n;
    char t[SRV_TAGS_MAX][SRV_TAG_BYTES];
};

/* Parse v (an array of strings, or one string: one tag) into out.
 * NULL or an empty array gives no tags. Returns 0 or KEEL_EINVAL (errmsg
 * says which tag and why: not a string, empty, too long, too many). */
KEEL_MUST_USE int srv_tags_parse(const json_t *v, struct srv_tags *out,
                                 char *errmsg);

/* Does have hold every tag of want? (No tags wanted: always.) */
bool srv_tags_match(const struct srv_tags *have, const struct srv_tags *want);

/* The tags as nats-server prints them in a placement error, "['a', 'b']",
 * into out (cap bytes; cut short when it does not fit). */
void srv_tags_text(const struct srv_tags *t, char *out, size_t cap);

/* The tags as a new JSON array of strings, or NULL when out of memory. */
json_t *srv_tags_json(const struct srv_tags *t);

#endif
