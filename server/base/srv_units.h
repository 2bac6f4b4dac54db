/* srv_units: numbers with a unit suffix, one parser for every reader of
 * them: sizes and durations of flags and config values, and the integers
 * of the config file format. Each is a decimal number followed by one
 * suffix of a table; a value that overflows is refused. Sizes and
 * durations are common/keel_units.c's, the readers keel shares. Pure. */
#ifndef KEEL_SRV_UNITS_H
#define KEEL_SRV_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"

/* s[0..len): a decimal without sign or suffix, 1 to 20 digits, that fits
 * in a uint64_t (the protocol's sizes and counts, the ack subjects'
 * sequences); false otherwise. */
KEEL_MUST_USE bool srv_parse_u64(const char *s, size_t len, uint64_t *out);

/* Sizes like 1048576, 1MB, 64K, 1T: powers of 1024, any case
 * (common/keel_units.h with G and T). */
KEEL_MUST_USE bool srv_parse_size(const char *s, uint64_t *out);

/* Durations like 2m, 30s, 500ms, 1h in milliseconds; a bare number is
 * seconds (common/keel_units.h, whole numbers only). */
KEEL_MUST_USE bool srv_parse_duration_ms(const char *s, uint64_t *out);

/* An unquoted config-file integer w[0..n), as nats-server's config reader
 * takes it: an optional '-', digits, and a size suffix where a bare K, M,
 * G, T, P or E is a power of 1000 and KB, KI, KIB (and so on) a power of
 * 1024, in any case. False when w is not one (the word is a string). */
KEEL_MUST_USE bool srv_parse_conf_int(const char *w, size_t n, int64_t *out);

#endif
