/* keel_duration: the duration reader keeld and keel share
 * (keel_units.h). */
#include "keel_units.h"

#include <ctype.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

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

static const struct {
    const char *unit;
    uint64_t mult;
    unsigned flag; /* 0: every caller's; else only with this flag */
} size_units[] = {
    {"", 1, 0},
    {"b", 1, 0},
    {"k", 1ULL << 10, 0},
    {"kb", 1ULL << 10, 0},
    {"kib", 1ULL << 10, KEEL_SIZE_IEC},
    {"m", 1ULL << 20, 0},
    {"mb", 1ULL << 20, 0},
    {"mib", 1ULL << 20, KEEL_SIZE_IEC},
    {"g", 1ULL << 30, KEEL_SIZE_LARGE},
    {"gb", 1ULL << 30, KEEL_SIZE_LARGE},
    {"t", 1ULL << 40, KEEL_SIZE_LARGE},
    {"tb", 1ULL << 40, KEEL_SIZE_LARGE},
};

bool keel_size_parse(const char *s, unsigned flags, uint64_t *out)
{
    const char *p = s;
    uint64_t v = 0;

    ASSERT(out != NULL);
    if (s == NULL || !isdigit((unsigned char)*p)) {
        return false;
    }
    for (; isdigit((unsigned char)*p); p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    for (size_t i = 0; i < sizeof size_units / sizeof size_units[0]; i++) {
        if (strcasecmp(p, size_units[i].unit) != 0 ||
            (size_units[i].flag != 0 && (flags & size_units[i].flag) == 0)) {
            continue;
        }
        if (v > UINT64_MAX / size_units[i].mult) {
            return false;
        }
        *out = v * size_units[i].mult;
        return true;
    }
    return false;
}
