/* Binary search of an array sorted by a uint64_t key field, one copy for
 * every module that keeps one (the consumer's acked set, the store's
 * catalogue as the scan reads it). Header-only and pure. */
#ifndef KEEL_SORTED_H
#define KEEL_SORTED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "keel/assert.h"

/* Index of the element of base[0..n) (elem bytes each, ascending by the
 * uint64_t at byte key_off of each) whose key is key (*found true), or of
 * the first one above it, n when none is (*found false). */
static inline size_t keel_sorted_find(const void *base, size_t n, size_t elem,
                                      size_t key_off, uint64_t key, bool *found)
{
    const unsigned char *b = base;
    size_t lo = 0;
    size_t hi = n;

    ASSERT(base != NULL || n == 0);
    ASSERT(key_off + sizeof key <= elem);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, b + mid * elem + key_off, sizeof k);
        if (k == key) {
            *found = true;
            return mid;
        }
        if (k < key) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

#endif
