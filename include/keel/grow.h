/* Doubling arrays, one growth rule for every module that keeps one (the
 * subject trie's vectors, the store's index and segment arrays, the scan's
 * items, the consumer and repair buffers): room for one more element, a first
 * capacity, then twice the last. Header-only; the caller bounds how many
 * elements there may be. */
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

/* keel_grow for an array whose count and capacity are uint32_t (the
 * consumer and repair buffers): KEEL_ENOMEM past UINT32_MAX elements. */
static inline int keel_grow_u32(void *itemsp, uint32_t *cap, uint32_t n,
                                size_t elem, uint32_t first)
{
    size_t c = *cap;
    int rv;

    ASSERT(cap != NULL);
    if (n < *cap) {
        return 0;
    }
    if (*cap > UINT32_MAX / 2) {
        return KEEL_ENOMEM;
    }
    rv = keel_grow(itemsp, &c, n, elem, first);
    if (rv == 0) {
        *cap = (uint32_t)c;
    }
    return rv;
}

#endif
