/* The text of an fsync policy, "group", "always" or "interval:<ms>", one
 * reader for both that take it in that form: the store's policy
 * (store_fsync_parse, for keel store and the benches) and a stream's
 * "keel_fsync" (srv_js_config.c). Each bounds the interval itself, so the
 * bound is a parameter. (keeld's --fsync flag takes a suffixed duration
 * after "interval:" and reads it in server/base/srv_config.c.)
 * Header-only and pure. */
#ifndef KEEL_FSYNC_H
#define KEEL_FSYNC_H

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"

enum keel_fsync_policy {
    KEEL_FSYNC_GROUP = 0,
    KEEL_FSYNC_ALWAYS,
    KEEL_FSYNC_INTERVAL,
};

/* text as *policy and, for interval:<ms>, *interval_ms: decimal digits,
 * 1..interval_ms_max. False (nothing set) when text is none of them. */
static inline bool keel_fsync_parse(const char *text, uint32_t interval_ms_max,
                                    enum keel_fsync_policy *policy,
                                    uint32_t *interval_ms)
{
    ASSERT(text != NULL && policy != NULL && interval_ms != NULL);
    if (strcmp(text, "group") == 0 || strcmp(text, "always") == 0) {
        *policy = text[0] == 'g' ? KEEL_FSYNC_GROUP : KEEL_FSYNC_ALWAYS;
        *interval_ms = 0;
        return true;
    }
    if (strncmp(text, "interval:", 9) != 0 ||
        !isdigit((unsigned char)text[9])) {
        return false;
    }
    char *end = NULL;
    unsigned long ms = strtoul(text + 9, &end, 10);
    if (*end != '\0' || ms < 1 || ms > interval_ms_max) {
        return false;
    }
    *policy = KEEL_FSYNC_INTERVAL;
    *interval_ms = (uint32_t)ms;
    return true;
}

#endif
