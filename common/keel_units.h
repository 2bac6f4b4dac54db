/* keel_units: one reader of durations and one of sizes for keeld and
 * keel, each a decimal number and a unit.
 *
 * Durations: 500ms, 30s, 2m, 1h, a bare number being seconds (as
 * nats-server's config and the nats CLI have it). Callers choose what more
 * they take: a fraction (0.5s, keel's flags) and the units d and y (365
 * days, keel's stream limits).
 *
 * Sizes: 16, 64K, 1MB, powers of 1024 in any case; keeld also takes G and
 * T, keel KiB and MiB (what each has always taken).
 *
 * keeld reads both through srv_parse_duration_ms and srv_parse_size
 * (server/base/srv_units.h), keel through cli_opts.c and cli_stream_cfg.c.
 * Pure. */
#ifndef KEEL_UNITS_H
#define KEEL_UNITS_H

#include <stdbool.h>
#include <stddef.h>
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

/* What keel_size_parse takes besides none, b, k, kb, m and mb. */
enum keel_size_flags {
    KEEL_SIZE_IEC = 1u,   /* kib and mib */
    KEEL_SIZE_LARGE = 2u, /* g, gb, t and tb */
};

/* s as bytes in *out: digits, then one unit or none (bytes), any case.
 * False, *out untouched, for anything else or a value past UINT64_MAX. */
KEEL_MUST_USE bool keel_size_parse(const char *s, unsigned flags,
                                   uint64_t *out);

#endif
