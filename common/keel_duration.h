/* keel_duration: one reader of durations for keeld and keel, a decimal
 * number and a unit: 500ms, 30s, 2m, 1h, a bare number being seconds (as
 * nats-server's config and the nats CLI have it). Callers choose what more
 * they take: a fraction (0.5s, keel's flags) and the units d and y (365
 * days, keel's stream limits). keeld's config values and flags read it
 * through srv_parse_duration_ms (server/base/srv_units.h), keel's through
 * cli_opts.c and cli_stream_cfg.c. Pure. */
#ifndef KEEL_DURATION_H
#define KEEL_DURATION_H

#include <stdbool.h>
#include <stdint.h>

#include "keel/assert.h"

/* What keel_duration_parse takes besides digits and ms, s, m, h. */
enum keel_duration_flags {
    KEEL_DURATION_FRACTION = 1u, /* a decimal point and digits: 0.5s, 1.5h */
    KEEL_DURATION_DAYS = 2u,     /* the units d (a day) and y (365 days) */
};

/* s as nanoseconds in *ns: digits (with KEEL_DURATION_FRACTION a '.' and
 * more digits, at least one digit in all), then exactly one unit or none
 * (seconds); case matters (m is a minute). False, *ns untouched, for
 * anything else or a value past UINT64_MAX ns. */
KEEL_MUST_USE bool keel_duration_parse(const char *s, unsigned flags,
                                       uint64_t *ns);

#endif
