/* keel_duration: the duration reader keeld and keel share
 * (keel_duration.h). */
#include "keel_duration.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>

#define NS_PER_S 1000000000ULL

static const struct {
    const char *unit;
    uint64_t ns;
    bool days; /* only with KEEL_DURATION_DAYS */
} units[] = {
    {"", NS_PER_S, false},
    {"ms", 1000000ULL, false},
    {"s", NS_PER_S, false},
    {"m", 60 * NS_PER_S, false},
    {"h", 3600 * NS_PER_S, false},
    {"d", 86400 * NS_PER_S, true},
    {"y", 365 * 86400 * NS_PER_S, true},
};

bool keel_duration_parse(const char *s, unsigned flags, uint64_t *ns)
{
    const char *p = s;
    uint64_t whole = 0;
    double frac = 0.0;
    double scale = 0.1;
    size_t digits = 0;

    ASSERT(ns != NULL);
    if (s == NULL) {
        return false;
    }
    for (; isdigit((unsigned char)*p); p++, digits++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10) {
            return false;
        }
        whole = whole * 10 + d;
    }
    if ((flags & KEEL_DURATION_FRACTION) != 0 && *p == '.') {
        for (p++; isdigit((unsigned char)*p); p++, digits++) {
            frac += (double)(*p - '0') * scale;
            scale /= 10.0;
        }
    }
    if (digits == 0) {
        return false;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(p, units[i].unit) != 0 ||
            (units[i].days && (flags & KEEL_DURATION_DAYS) == 0)) {
            continue;
        }
        /* frac < 1: its part is less than one unit (a year is below 2^55
         * ns, which a double holds exactly). */
        uint64_t part = (uint64_t)(frac * (double)units[i].ns);
        if (whole > UINT64_MAX / units[i].ns ||
            whole * units[i].ns > UINT64_MAX - part) {
            return false;
        }
        *ns = whole * units[i].ns + part;
        return true;
    }
    return false;
}
