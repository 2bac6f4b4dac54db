/* Parser for the subset of the NATS server configuration format that Keel
 * reads: `key: value`, `key = value`, `key value`, nested `{}` blocks, `[]`
 * arrays, `#` and `//` comments, quoted strings, booleans, integers with
 * size suffixes (1K, 1KB, 1MB, 1GB: powers of 1024). Durations such as 2m
 * stay strings; the config layer interprets them per key.
 */
#ifndef SRV_CONFPARSE_H
#define SRV_CONFPARSE_H

#include <jansson.h>
#include <stddef.h>

#include "keel/assert.h"

/* Parse text (len bytes, need not be NUL-terminated) into a new JSON object
 * owned by the caller. Returns 0, KEEL_ECONFIG with errmsg naming the line
 * and the problem, KEEL_ELIMIT for input past SRV_CONFIG_BYTES_MAX,
 * SRV_CONFIG_DEPTH_MAX or SRV_CONFIG_KEYS_MAX, or KEEL_ENOMEM.
 */
KEEL_MUST_USE int srv_confparse(const char *text, size_t len, json_t **out,
                                char *errmsg);

#endif
