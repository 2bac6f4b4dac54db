#include "srv_hmap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "keel/error.h"
#include "keel/limits.h"

#define HMAP_CAP_MIN 8

void srv_hmap_init(struct srv_hmap *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
}

void srv_hmap_close(struct srv_hmap *m)
{
    for (size_t i = 0; i < m->cap; i++) {
        free(m->slots[i].key);
    }
    free(m->slots);
    srv_hmap_init(m);
}

char *srv_hmap_memdupz(const char *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, p, n);
        d[n] = '\0';
    }
    return d;
}

uint64_t srv_hmap_hash(const char *key, size_t key_len)
{
    return XXH3_64bits(key, key_len);
}

static size_t find_slot(const struct srv_hmap *m, const char *key,
                        size_t key_len, uint64_t hash)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)hash & mask;

    /* The load factor stays below 3/4, so an empty slot always ends the
     * probe within cap steps. */
    for (size_t n = 0; n < m->cap; n++, i = (i + 1) & mask) {
        struct srv_hmap_slot *s = &m->slots[i];
        if (s->key == NULL) {
            return i;
        }
        if (s->hash == hash && s->key_len == key_len &&
            memcmp(s->key, key, key_len) == 0) {
            return i;
        }
    }
    ASSERT(0 && "hash map has no empty slot");
    return 0;
}

void *srv_hmap_get(const struct srv_hmap *m, const char *key, size_t key_len)
{
    if (m->count == 0) {
        return NULL;
    }
    size_t i = find_slot(m, key, key_len, srv_hmap_hash(key, key_len));
    return m->slots[i].key != NULL ? m->slots[i].value : NULL;
}

static int grow(struct srv_hmap *m)
{
    size_t cap = m->cap == 0 ? HMAP_CAP_MIN : m->cap * 2;
    struct srv_hmap old = *m;

    if (cap > SRV_HMAP_SLOTS_MAX) {
        return KEEL_ELIMIT;
    }
    m->slots = calloc(cap, sizeof *m->slots);
    if (m->slots == NULL) {
        m->slots = old.slots;
        return KEEL_ENOMEM;
    }
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        struct srv_hmap_slot *s = &old.slots[i];
        if (s->key != NULL) {
            m->slots[find_slot(m, s->key, s->key_len, s->hash)] = *s;
        }
    }
    free(old.slots);
    return 0;
}

int srv_hmap_put(struct srv_hmap *m, const char *key, size_t key_len,
                 void *value)
{
    uint64_t hash = srv_hmap_hash(key, key_len);
    int rv;

    if ((m->count + 1) * 4 > m->cap * 3) {
        rv = grow(m);
        if (rv != 0) {
            return rv;
        }
    }
    size_t i = find_slot(m, key, key_len, hash);
    struct srv_hmap_slot *s = &m->slots[i];
    if (s->key == NULL) {
        s->key = srv_hmap_memdupz(key, key_len);
        if (s->key == NULL) {
            return KEEL_ENOMEM;
        }
        s->key_len = key_len;
        s->hash = hash;
        m->count++;
    }
    s->value = value;
    ASSERT(m->count < m->cap);
    return 0;
}

void *srv_hmap_del(struct srv_hmap *m, const char *key, size_t key_len)
{
    if (m->count == 0) {
        return NULL;
    }
    size_t mask = m->cap - 1;
    size_t i = find_slot(m, key, key_len, srv_hmap_hash(key, key_len));
    if (m->slots[i].key == NULL) {
        return NULL;
    }
    void *value = m->slots[i].value;
    free(m->slots[i].key);
    m->slots[i].key = NULL;
    m->count--;
    /* Backward-shift deletion keeps probe chains intact without
     * tombstones: move later entries of the chain into the hole. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask, n = 0; n < m->cap;
         j = (j + 1) & mask, n++) {
        struct srv_hmap_slot *s = &m->slots[j];
        if (s->key == NULL) {
            break;
        }
        size_t home = (size_t)s->hash & mask;
        /* Entry at j may move to hole if its home is not in (hole, j]. */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            m->slots[hole] = *s;
            s->key = NULL;
            hole = j;
        }
    }
    return value;
}

struct srv_hmap_slot *srv_hmap_next(const struct srv_hmap *m, size_t *pos)
{
    while (*pos < m->cap) {
        struct srv_hmap_slot *s = &m->slots[(*pos)++];
        if (s->key != NULL) {
            return s;
        }
    }
    return NULL;
}

void srv_hmap_close_free(struct srv_hmap *m)
{
    size_t pos = 0;
    struct srv_hmap_slot *s;
    /* Bounded by the map's size. */
    while ((s = srv_hmap_next(m, &pos)) != NULL) {
        free(s->value);
    }
    srv_hmap_close(m);
}
