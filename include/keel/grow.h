/* Doubling arrays, one growth rule for every module that keeps one (the
 * subject trie's vectors, the store's index, segment and batch arrays, the
 * scan's items, the consumer and repair buffers, the cluster's frame
 * batches): a first capacity, then twice the last until what is needed
 * fits. Header-only; the caller bounds how many elements there may be. */
#ifndef KEEL_GROW_H
#define KEEL_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "keel/assert.h"
#include "keel/error.h"

/* The rule itself: make the array *itemsp (a T ** passed as void *) of *cap
 * elements of elem bytes hold need elements: nothing when it does, else a
 * realloc to first elements (an empty array) doubled until need fits.
 * KEEL_ENOMEM when that fails or would pass max elements; the array and
 * *cap are untouched then. */
static inline int keel__reserve(void *itemsp, size_t *cap, size_t need,
                                size_t elem, size_t first, size_t max)
{
    void *items;
    void *p;
    size_t ncap;

    ASSERT(itemsp != NULL && cap != NULL);
    ASSERT(elem > 0 && first > 0);
    if (need <= *cap) {
        return 0;
    }
    ncap = *cap == 0 ? first : *cap;
    while (ncap < need) {
        if (ncap > max / 2) {
            return KEEL_ENOMEM;
        }
        ncap *= 2;
    }
    if (ncap > max || ncap > SIZE_MAX / elem) {
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

/* Room for need elements in *itemsp (size_t capacity). */
static inline int keel_reserve(void *itemsp, size_t *cap, size_t need,
                               size_t elem, size_t first)
{
    return keel__reserve(itemsp, cap, need, elem, first, SIZE_MAX);
}

/* Room for element n (n <= *cap): one more. */
static inline int keel_grow(void *itemsp, size_t *cap, size_t n, size_t elem,
                            size_t first)
{
    ASSERT(cap != NULL && n <= *cap);
    return keel_reserve(itemsp, cap, n + 1, elem, first);
}

/* keel_reserve for an array whose capacity is a uint32_t (the consumer and
 * repair buffers): KEEL_ENOMEM past UINT32_MAX elements. */
static inline int keel_reserve_u32(void *itemsp, uint32_t *cap, uint64_t need,
                                   size_t elem, uint32_t first)
{
    size_t c = *cap;
    int rv;

    ASSERT(cap != NULL);
    if (need > UINT32_MAX) {
        return KEEL_ENOMEM;
    }
    rv = keel__reserve(itemsp, &c, (size_t)need, elem, first, UINT32_MAX);
    if (rv == 0) {
        *cap = (uint32_t)c;
    }
    return rv;
}

/* keel_grow for a uint32_t count and capacity. */
static inline int keel_grow_u32(void *itemsp, uint32_t *cap, uint32_t n,
                                size_t elem, uint32_t first)
{
    ASSERT(cap != NULL && n <= *cap);
    return keel_reserve_u32(itemsp, cap, (uint64_t)n + 1, elem, first);
}

/* A FIFO ring *ringp (a T ** passed as void *) of *cap elements of elem
 * bytes, holding count of them from slot *head: make it ncap (>= count)
 * elements, the count unrolled to slots 0.. (so *head becomes 0) and the
 * rest zeroed. KEEL_ENOMEM leaves the ring as it was. */
static inline int keel_ring_resize(void *ringp, size_t elem, size_t *cap,
                                   size_t *head, size_t count, size_t ncap)
{
    unsigned char *old;
    unsigned char *ring;

    ASSERT(ringp != NULL && cap != NULL && head != NULL && elem > 0);
    ASSERT(count <= ncap && (count == 0 || *cap > 0));
    ring = calloc(ncap, elem);
    if (ring == NULL) {
        return KEEL_ENOMEM;
    }
    memcpy(&old, ringp, sizeof old);
    for (size_t i = 0; i < count; i++) {
        memcpy(ring + i * elem, old + ((*head + i) % *cap) * elem, elem);
    }
    free(old);
    memcpy(ringp, &ring, sizeof ring);
    *cap = ncap;
    *head = 0;
    return 0;
}

#endif
