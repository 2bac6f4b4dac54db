/* Parser for the subset of the NATS server configuration format that Keel
 * reads: `key: value`, `key = value`, `key value`, nested `{}` blocks, `[]`
 * arrays, `#` and `//` comments, quoted strings, booleans, integers with
 * size suffixes as nats-server reads them (srv_parse_conf_int: 1K is 1000,
 * 1KB 1024). The value of a duration key (ping_interval, timeout) stays a
 * string, so that 2m is read as two minutes by the config layer.
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
