/* Doubling arrays, one growth rule for every module that keeps one (the
 * subject trie's vectors, the store's index and segment arrays, the scan's
 * items): room for one more element, a first capacity, then twice the
 * last. Header-only; the caller bounds how many elements there may be. */
#ifndef KEEL_GROW_H
#define KEEL_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"

/* Make room for element n of the array *itemsp (a T ** passed as void *)
 * of *cap elements of elem bytes each: nothing when n < *cap, else a
 * realloc to first elements (an empty array) or to twice *cap. KEEL_ENOMEM
 * when that fails or would overflow; the array and *cap are untouched
 * then. */
static inline int keel_grow(void *itemsp, size_t *cap, size_t n, size_t elem,
                            size_t first)
{
    void *items;
    void *p;
    size_t ncap;

    ASSERT(itemsp != NULL && cap != NULL);
    ASSERT(elem > 0 && first > 0);
    ASSERT(n <= *cap);
    if (n < *cap) {
        return 0;
    }
    ncap = *cap == 0 ? first : *cap * 2;
    if (ncap < *cap || ncap > SIZE_MAX / elem) {
        return KEEL_ENOMEM;
    }
    /* memcpy, not a cast through void **: the caller's pointer is a T *. */
    memcpy(&items, itemsp, sizeof items);
    p = realloc(items, ncap * elem);
    if (p == NULL) {
        return KEEL_ENOMEM;
    }
    memcpy(itemsp, &p, sizeof p);
    *cap = ncap;
    return 0;
}

#endif
