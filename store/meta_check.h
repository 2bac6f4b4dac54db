/* A structural check of a whole meta.lmdb file (docs/decisions/0015).
 * LMDB 0.9 trusts every page header and record count it reads: a changed
 * byte that no read reaches (a page's own number, its free-space bounds, a
 * tree's counts, a page neither used nor free) made a later write abort on
 * an assertion or reuse a live page. This reads the file itself, never
 * through LMDB: every page of every tree the newest meta page names, each
 * free-page list, and that every page is accounted for exactly once.
 */
#ifndef KEEL_STORE_META_CHECK_H
#define KEEL_STORE_META_CHECK_H

#include <stddef.h>
#include <stdint.h>

struct store_meta_check_stats {
    uint64_t pages;      /* pages 2..last, each in a tree or a free list */
    uint64_t free_pages; /* of which named by a free-page list */
    uint64_t entries;    /* records in the main and named databases */
    uint64_t trees;      /* the free, main and named databases walked */
};

/* 0 when every page is sound (or the file is empty: LMDB creates it),
 * KEEL_ENOENT when it does not exist, KEEL_ECORRUPT with reason naming
 * the page and the field, KEEL_EIO (reason set) when it cannot be read.
 * stats may be NULL. */
int store_meta_check_file(const char *path, struct store_meta_check_stats *st,
                          char *reason, size_t cap);

#endif
