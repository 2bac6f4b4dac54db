/* A small open-addressing hash map from byte-string keys to pointers, used
 * for sublist trie edges, the match cache and each conn's sid table. Keys are
 * copied and owned by the map; values are borrowed.
 */
#ifndef SRV_HMAP_H
#define SRV_HMAP_H

#include <stddef.h>
#include <stdint.h>

#include "keel/assert.h"

struct srv_hmap_slot {
    char *key; /* NULL = empty slot */
    size_t key_len;
    uint64_t hash;
    void *value;
};

struct srv_hmap {
    struct srv_hmap_slot *slots;
    size_t cap; /* power of two, or 0 before the first insert */
    size_t count;
};

/* Initialise an empty map; it allocates on the first put. */
void srv_hmap_init(struct srv_hmap *m);

/* Free the slots and the copied keys (not the values). */
void srv_hmap_close(struct srv_hmap *m);

/* srv_hmap_close for a map whose values are malloc'ed and owned by it:
 * free(3) every value first. */
void srv_hmap_close_free(struct srv_hmap *m);

/* Hash of a key, for callers that look the same key up several times. */
uint64_t srv_hmap_hash(const char *key, size_t key_len);

/* A NUL-terminated copy of the n bytes at p (they may hold a NUL: the
 * caller keeps n), as the map copies its keys; NULL when out of memory. */
char *srv_hmap_memdupz(const char *p, size_t n);

/* Value stored under key, or NULL. */
void *srv_hmap_get(const struct srv_hmap *m, const char *key, size_t key_len);

/* Store value under key (replacing any old value). Returns 0 or KEEL_ENOMEM
 * or KEEL_ELIMIT when the map would pass SRV_HMAP_SLOTS_MAX.
 */
KEEL_MUST_USE int srv_hmap_put(struct srv_hmap *m, const char *key,
                               size_t key_len, void *value);

/* Remove key; returns its value or NULL if absent. */
void *srv_hmap_del(struct srv_hmap *m, const char *key, size_t key_len);

/* Iterate: start with *pos = 0; returns the next occupied slot or NULL.
 * The map must not change during the iteration.
 */
struct srv_hmap_slot *srv_hmap_next(const struct srv_hmap *m, size_t *pos);

#endif
