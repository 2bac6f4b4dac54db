/* srv_units: config integers and protocol decimals; sizes and durations
 * through common/keel_units.c, which keel shares (srv_units.h). */
#include "srv_units.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "keel_units.h"

/* The multiplier of a nats-server config integer's suffix sfx[0..n): ""
 * is 1; a letter of "kmgtpe" alone is that power of 1000, followed by b, i
 * or ib that power of 1024 (any case). */
static bool conf_mult(const char *sfx, size_t n, uint64_t *mult)
{
    static const char letters[] = "kmgtpe";
    static const char *const tails[] = {"b", "i", "ib"};
    const char *l =
        n > 0 ? strchr(letters, tolower((unsigned char)sfx[0])) : NULL;
    bool binary = false;

    ASSERT(mult != NULL);
    if (n == 0) {
        *mult = 1;
        return true;
    }
    if (l == NULL || *l == '\0') {
        return false;
    }
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        binary = binary || (strlen(tails[i]) == n - 1 &&
                            strncasecmp(tails[i], sfx + 1, n - 1) == 0);
    }
    if (n > 1 && !binary) {
        return false;
    }
    *mult = 1;
    for (ptrdiff_t i = 0; i <= l - letters; i++) {
        *mult *= binary ? 1024 : 1000; /* at most 1024^6 = 2^60 */
    }
    return true;
}

/* s[0..n): digits, then the suffix; *v the number (at most max), *sfx
 * and *sn the suffix. */
static bool parse_digits(const char *s, size_t n, uint64_t max, uint64_t *v,
                         const char **sfx, size_t *sn)
{
    size_t i = 0;

    ASSERT(s != NULL || n == 0);
    ASSERT(v != NULL && sfx != NULL && sn != NULL);
    *v = 0;
    if (n == 0 || !isdigit((unsigned char)s[0])) {
        return false;
    }
    for (; i < n && isdigit((unsigned char)s[i]); i++) {
        uint64_t d = (uint64_t)(s[i] - '0');
        if (*v > (max - d) / 10) {
            return false;
        }
        *v = *v * 10 + d;
    }
    *sfx = s + i;
    *sn = n - i;
    return true;
}

bool srv_parse_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    ASSERT(out != NULL);
    if (s == NULL || len == 0 || len > 20) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

bool srv_parse_size(const char *s, uint64_t *out)
{
    /* Powers of 1024 up to T, as keeld has always read them. */
    return keel_size_parse(s, KEEL_SIZE_LARGE, out);
}

bool srv_parse_duration_ms(const char *s, uint64_t *out)
{
    uint64_t ns = 0;

    ASSERT(out != NULL);
    /* Whole numbers only and no days, as keeld has always read them. */
    if (!keel_duration_parse(s, 0, &ns)) {
        return false;
    }
    *out = ns / 1000000;
    return true;
}

bool srv_parse_conf_int(const char *w, size_t n, int64_t *out)
{
    bool neg = n > 0 && w[0] == '-';
    size_t skip = neg ? 1 : 0;
    const uint64_t max = (uint64_t)INT64_MAX;
    const char *sfx = NULL;
    size_t sn = 0;
    uint64_t v = 0;
    uint64_t mult = 0;

    ASSERT(out != NULL);
    if (!parse_digits(w + skip, n - skip, max, &v, &sfx, &sn) ||
        !conf_mult(sfx, sn, &mult) || v > max / mult) {
        return false;
    }
    *out = neg ? -(int64_t)(v * mult) : (int64_t)(v * mult);
    return true;
}
