/* meta.lmdb's pages checked one by one, without LMDB (meta_check.h).
 *
 * The on-disk format is liblmdb 0.9's (Debian 12: 0.9.24) on a 64-bit
 * little-endian machine without MDB_DEVEL: page 0 and page 1 are meta
 * pages; every page starts with a 16-byte header {pgno, pad, flags,
 * lower, upper} (an overflow page's lower and upper are its page count);
 * a branch or leaf page's node offsets follow the header up to `lower`,
 * its nodes are packed from `upper` to the page's end. A node is {lo, hi,
 * flags, ksize, key, data}: a leaf's data size is lo|hi<<16 (8 bytes of
 * overflow page number if F_BIGDATA), a branch's child page is
 * lo|hi<<16|flags<<32. A free-page list is a count then that many page
 * numbers (LMDB reads the count only: a reserved record may be longer).
 * LMDB uses the meta page with the larger transaction id; after a commit
 * every page up to its last_pg is in one tree or in one free-page list
 * (the last commit's freed pages are in its own list), whatever readers
 * did: that is what the leak check relies on.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <keel/assert.h>
#include <keel/error.h>

#include "meta_check.h"

#define LM_MAGIC 0xBEEFC0DEu
#define LM_VERSION 1u
#define LM_P_BRANCH 0x01u
#define LM_P_LEAF 0x02u
#define LM_P_OVERFLOW 0x04u
#define LM_P_META 0x08u
#define LM_F_BIGDATA 0x01u
#define LM_F_SUBDATA 0x02u
#define LM_F_DUPDATA 0x04u
#define LM_DB_REVERSEKEY 0x02u
#define LM_DB_INTEGERKEY 0x08u
#define LM_DB_DUPS 0x74u /* DUPSORT, DUPFIXED, INTEGERDUP, REVERSEDUP */
#define LM_INVALID UINT64_MAX
#define LM_DEPTH_MAX 32u /* CURSOR_STACK: LMDB cannot descend further */
#define LM_KEY_MAX 511u
#define LM_PSIZE_MIN 512u
#define LM_PSIZE_MAX 32768u       /* node offsets are 16-bit */
#define LM_PAGES_MAX (1ull << 26) /* far past Keel's 256 MiB map */

struct lm_page {
    uint64_t pgno;
    uint16_t pad;
    uint16_t flags;
    uint16_t lower; /* an overflow page: lower|upper<<16 pages */
    uint16_t upper;
};

struct lm_node {
    uint16_t lo;
    uint16_t hi;
    uint16_t flags;
    uint16_t ksize;
};

struct lm_db {
    uint32_t pad; /* the free db's: the page size */
    uint16_t flags;
    uint16_t depth;
    uint64_t branch_pages;
    uint64_t leaf_pages;
    uint64_t overflow_pages;
    uint64_t entries;
    uint64_t root;
};

struct lm_meta {
    uint32_t magic;
    uint32_t version;
    uint64_t address;
    uint64_t mapsize;
    struct lm_db dbs[2]; /* free, main */
    uint64_t last_pg;
    uint64_t txnid;
};

_Static_assert(sizeof(struct lm_page) == 16, "MDB_page header (PAGEHDRSZ)");
_Static_assert(sizeof(struct lm_node) == 8, "MDB_node header (NODESIZE)");
_Static_assert(sizeof(struct lm_db) == 48, "MDB_db");
_Static_assert(sizeof(struct lm_meta) == 136, "MDB_meta");
_Static_assert(sizeof(size_t) == 8, "LMDB's pgno_t and txnid_t are size_t");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "node fields are read as LMDB writes them on little-endian");

#define HDR ((uint64_t)sizeof(struct lm_page))
#define NODE ((uint64_t)sizeof(struct lm_node))

enum { SEEN_NONE, SEEN_TREE, SEEN_FREE };

struct key {
    const uint8_t *p; /* NULL: no bound */
    uint64_t n;
};

struct tree {
    char name[48];
    bool free_db;
    bool main_db;
    uint16_t flags;
    uint16_t depth;
    uint64_t branch, leaf, overflow, entries;
};

struct ck {
    const uint8_t *map;
    uint64_t psize;
    uint64_t last_pg;
    uint64_t file_pages; /* free pages past them were never written */
    uint64_t txnid;
    uint8_t *seen;
    struct store_meta_check_stats st;
    char *reason;
    size_t cap;
};

__attribute__((format(printf, 2, 3))) static int bad(struct ck *c,
                                                     const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(c->reason, c->cap, "meta.lmdb ");

    va_start(ap, fmt);
    if (n > 0 && (size_t)n < c->cap) {
        (void)vsnprintf(c->reason + n, c->cap - (size_t)n, fmt, ap);
    }
    va_end(ap);
    return KEEL_ECORRUPT;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static const uint8_t *page_ptr(const struct ck *c, uint64_t pg)
{
    return c->map + pg * c->psize;
}

static int key_cmp(const struct tree *t, struct key a, struct key b)
{
    uint64_t n = a.n < b.n ? a.n : b.n;
    int d = 0;

    if (t->flags & LM_DB_INTEGERKEY) {
        /* Equal sizes (4 or 8) checked by the caller: native integers. */
        uint64_t x = 0;
        uint64_t y = 0;
        memcpy(&x, a.p, a.n);
        memcpy(&y, b.p, b.n);
        return x < y ? -1 : x > y;
    }
    if (t->flags & LM_DB_REVERSEKEY) {
        for (uint64_t i = 1; d == 0 && i <= n; i++) {
            d = (int)a.p[a.n - i] - (int)b.p[b.n - i];
        }
    } else if (n > 0) {
        d = memcmp(a.p, b.p, n);
    }
    return d != 0 ? d : (a.n < b.n ? -1 : a.n > b.n);
}

/* Claim page pg for the walk of t: in bounds, not claimed before, its
 * header naming itself (mdb_page_touch frees the number the header
 * holds: a wrong one frees a live page). */
static int claim(struct ck *c, const struct tree *t, uint64_t pg,
                 const char *via, struct lm_page *h)
{
    if (pg < 2 || pg > c->last_pg || pg >= c->file_pages) {
        return bad(c,
                   "%s tree: %s names page %llu, outside pages 2..%llu (the "
                   "file holds %llu)",
                   t->name, via, (unsigned long long)pg,
                   (unsigned long long)c->last_pg,
                   (unsigned long long)c->file_pages);
    }
    if (c->seen[pg] != SEEN_NONE) {
        return bad(c,
                   "page %llu is reached twice (%s tree via %s, and %s): a "
                   "shared page or a cycle",
                   (unsigned long long)pg, t->name, via,
                   c->seen[pg] == SEEN_FREE ? "a free-page list" : "a tree");
    }
    c->seen[pg] = SEEN_TREE;
    c->st.pages++;
    memcpy(h, page_ptr(c, pg), sizeof *h);
    if (h->pgno != pg) {
        return bad(c, "page %llu (%s tree): its header's mp_pgno is %llu",
                   (unsigned long long)pg, t->name,
                   (unsigned long long)h->pgno);
    }
    return 0;
}

/* An overflow run holding dsz bytes of a record; *data its first byte. */
static int overflow(struct ck *c, struct tree *t, uint64_t from, uint64_t idx,
                    uint64_t opg, uint64_t dsz, const uint8_t **data)
{
    char via[64];
    struct lm_page h;
    uint64_t pages;
    int rv;

    snprintf(via, sizeof via, "node %llu of page %llu", (unsigned long long)idx,
             (unsigned long long)from);
    rv = claim(c, t, opg, via, &h);
    if (rv != 0) {
        return rv;
    }
    pages = (uint64_t)h.lower | (uint64_t)h.upper << 16;
    if (h.flags != LM_P_OVERFLOW) {
        return bad(c,
                   "page %llu (%s tree): flags 0x%x, an overflow page "
                   "expected",
                   (unsigned long long)opg, t->name, h.flags);
    }
    if (pages == 0 || pages > c->last_pg - opg + 1 ||
        pages > c->file_pages - opg || pages < (HDR - 1 + dsz) / c->psize + 1) {
        return bad(c,
                   "page %llu (%s tree): an overflow run of %llu pages for "
                   "%llu bytes (last page %llu)",
                   (unsigned long long)opg, t->name, (unsigned long long)pages,
                   (unsigned long long)dsz, (unsigned long long)c->last_pg);
    }
    for (uint64_t p = opg + 1; p < opg + pages; p++) {
        if (c->seen[p] != SEEN_NONE) {
            return bad(c,
                       "page %llu is reached twice (inside the overflow "
                       "run at page %llu, %s tree)",
                       (unsigned long long)p, (unsigned long long)opg, t->name);
        }
        c->seen[p] = SEEN_TREE;
        c->st.pages++;
    }
    t->overflow += pages;
    *data = page_ptr(c, opg) + HDR;
    return 0;
}

/* A free-page list (the free db's record of txn id): its pages are free. */
static int free_list(struct ck *c, uint64_t id, const uint8_t *d, uint64_t n)
{
    uint64_t count;

    if (n < 8 || n % 8 != 0 || (count = get64(d)) > n / 8 - 1) {
        return bad(c, "free-page list of txn %llu: %llu bytes for its count",
                   (unsigned long long)id, (unsigned long long)n);
    }
    for (uint64_t i = 1; i <= count; i++) {
        uint64_t pg = get64(d + 8 * i);
        if (pg < 2 || pg > c->last_pg) {
            return bad(c,
                       "free-page list of txn %llu names page %llu, outside "
                       "pages 2..%llu",
                       (unsigned long long)id, (unsigned long long)pg,
                       (unsigned long long)c->last_pg);
        }
        if (c->seen[pg] != SEEN_NONE) {
            return bad(c,
                       "free-page list of txn %llu names page %llu, which is "
                       "%s",
                       (unsigned long long)id, (unsigned long long)pg,
                       c->seen[pg] == SEEN_FREE ? "free already"
                                                : "in use in a tree");
        }
        c->seen[pg] = SEEN_FREE;
        c->st.pages++;
        c->st.free_pages++;
    }
    return 0;
}

static int walk_tree(struct ck *c, struct tree *t, const struct lm_db *db);

/* One record of a leaf: its data in bounds, then what it names. */
static int leaf_record(struct ck *c, struct tree *t, uint64_t pg, uint64_t i,
                       const struct lm_node *nd, struct key k,
                       const uint8_t *data)
{
    uint64_t dsz = (uint64_t)nd->lo | (uint64_t)nd->hi << 16;
    unsigned fl = nd->flags;
    int rv;

    if ((fl & ~(LM_F_BIGDATA | LM_F_SUBDATA | LM_F_DUPDATA)) != 0 ||
        (fl & LM_F_DUPDATA) != 0 ||
        (fl & LM_F_SUBDATA && (!t->main_db || fl & LM_F_BIGDATA))) {
        return bad(c, "page %llu (%s tree): node %llu has flags 0x%x",
                   (unsigned long long)pg, t->name, (unsigned long long)i, fl);
    }
    t->entries++;
    if (fl & LM_F_BIGDATA) {
        rv = overflow(c, t, pg, i, get64(data), dsz, &data);
        if (rv != 0) {
            return rv;
        }
    }
    if (t->free_db) {
        uint64_t id = k.n == 8 ? get64(k.p) : 0;
        if (id == 0 || id > c->txnid) {
            return bad(c,
                       "page %llu (free tree): node %llu's key is not a "
                       "txn id up to %llu",
                       (unsigned long long)pg, (unsigned long long)i,
                       (unsigned long long)c->txnid);
        }
        return free_list(c, id, data, dsz);
    }
    if (fl & LM_F_SUBDATA) {
        struct tree sub = {0};
        struct lm_db db;
        if (dsz != sizeof db) {
            return bad(c,
                       "page %llu (main tree): named database record of "
                       "%llu bytes",
                       (unsigned long long)pg, (unsigned long long)dsz);
        }
        memcpy(&db, data, sizeof db);
        snprintf(sub.name, sizeof sub.name, "named '");
        for (uint64_t j = 0; j < k.n && j < 24; j++) {
            char ch = (char)k.p[j];
            size_t l = strlen(sub.name);
            sub.name[l] = ch >= 0x20 && ch < 0x7f ? ch : '?';
            sub.name[l + 1] = 0;
        }
        strcat(sub.name, "'");
        return walk_tree(c, &sub, &db);
    }
    return 0;
}

/* First pass over a branch or leaf page: every node inside the page, the
 * nodes packed from upper to the end, keys in strict order and within
 * [lo, hi) (a branch's node 0 has no key LMDB compares). */
static int nodes_check(struct ck *c, const struct tree *t, uint64_t pg,
                       const struct lm_page *h, bool leaf, struct key lo,
                       struct key hi)
{
    const uint8_t *p = page_ptr(c, pg);
    uint64_t n = (uint64_t)(h->lower - HDR) / 2;
    uint64_t used = 0;
    struct key prev = {NULL, 0};

    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = get16(p + HDR + 2 * i);
        struct lm_node nd;
        uint64_t sz;
        struct key k;
        if (off < h->upper || off + NODE > c->psize) {
            return bad(c,
                       "page %llu (%s tree): node %llu at offset %llu, "
                       "outside %u..%llu",
                       (unsigned long long)pg, t->name, (unsigned long long)i,
                       (unsigned long long)off, h->upper,
                       (unsigned long long)(c->psize - NODE));
        }
        memcpy(&nd, p + off, sizeof nd);
        sz = NODE + nd.ksize;
        if (leaf) {
            sz += nd.flags & LM_F_BIGDATA
                      ? 8
                      : ((uint64_t)nd.lo | (uint64_t)nd.hi << 16);
        }
        if (off + sz > c->psize || nd.ksize > LM_KEY_MAX) {
            return bad(c,
                       "page %llu (%s tree): node %llu (offset %llu, "
                       "key %u bytes) ends past the page",
                       (unsigned long long)pg, t->name, (unsigned long long)i,
                       (unsigned long long)off, nd.ksize);
        }
        used += (sz + 1) & ~(uint64_t)1;
        if (!leaf && i == 0) {
            continue;
        }
        k = (struct key){p + off + NODE, nd.ksize};
        if ((t->flags & LM_DB_INTEGERKEY) &&
            (k.n != 8 && (k.n != 4 || t->free_db))) {
            return bad(c,
                       "page %llu (%s tree): node %llu has an integer key "
                       "of %llu bytes",
                       (unsigned long long)pg, t->name, (unsigned long long)i,
                       (unsigned long long)k.n);
        }
        if ((prev.p != NULL && key_cmp(t, prev, k) >= 0) ||
            (prev.p == NULL && lo.p != NULL && key_cmp(t, k, lo) < 0) ||
            (hi.p != NULL && key_cmp(t, k, hi) >= 0)) {
            return bad(c,
                       "page %llu (%s tree): node %llu's key is out of "
                       "order",
                       (unsigned long long)pg, t->name, (unsigned long long)i);
        }
        prev = k;
    }
    if (used != c->psize - h->upper) {
        return bad(c,
                   "page %llu (%s tree): its nodes fill %llu bytes, its "
                   "mp_upper %u leaves %llu",
                   (unsigned long long)pg, t->name, (unsigned long long)used,
                   h->upper, (unsigned long long)(c->psize - h->upper));
    }
    return 0;
}

static struct key node_key(const struct ck *c, uint64_t pg, uint64_t i)
{
    const uint8_t *p = page_ptr(c, pg);
    const uint8_t *nd = p + get16(p + HDR + 2 * i);
    return (struct key){nd + NODE, get16(nd + 6)};
}

static int walk(struct ck *c, struct tree *t, uint64_t pg, const char *via,
                unsigned level, struct key lo, struct key hi)
{
    bool leaf = level == t->depth;
    struct lm_page h;
    uint64_t n;
    int rv = claim(c, t, pg, via, &h);

    if (rv != 0) {
        return rv;
    }
    if (h.flags != (leaf ? LM_P_LEAF : LM_P_BRANCH)) {
        return bad(c,
                   "page %llu (%s tree): flags 0x%x, a %s page expected "
                   "at level %u of %u",
                   (unsigned long long)pg, t->name, h.flags,
                   leaf ? "leaf" : "branch", level, t->depth);
    }
    if (h.lower < HDR + 2 || (h.lower - HDR) % 2 != 0 || h.lower > h.upper ||
        h.upper > c->psize) {
        return bad(c,
                   "page %llu (%s tree): mp_lower %u and mp_upper %u (page "
                   "size %llu)",
                   (unsigned long long)pg, t->name, h.lower, h.upper,
                   (unsigned long long)c->psize);
    }
    rv = nodes_check(c, t, pg, &h, leaf, lo, hi);
    if (rv != 0) {
        return rv;
    }
    n = (uint64_t)(h.lower - HDR) / 2;
    if (leaf) {
        t->leaf++;
    } else {
        t->branch++;
    }
    for (uint64_t i = 0; rv == 0 && i < n; i++) {
        const uint8_t *p = page_ptr(c, pg);
        const uint8_t *ndp = p + get16(p + HDR + 2 * i);
        struct lm_node nd;
        char cvia[64];
        memcpy(&nd, ndp, sizeof nd);
        if (leaf) {
            rv = leaf_record(c, t, pg, i, &nd, node_key(c, pg, i),
                             ndp + NODE + nd.ksize);
            continue;
        }
        snprintf(cvia, sizeof cvia, "node %llu of branch page %llu",
                 (unsigned long long)i, (unsigned long long)pg);
        rv = walk(c, t,
                  (uint64_t)nd.lo | (uint64_t)nd.hi << 16 |
                      (uint64_t)nd.flags << 32,
                  cvia, level + 1, i == 0 ? lo : node_key(c, pg, i),
                  i + 1 < n ? node_key(c, pg, i + 1) : hi);
    }
    return rv;
}

static int walk_tree(struct ck *c, struct tree *t, const struct lm_db *db)
{
    const struct key none = {NULL, 0};
    int rv;

    t->flags = t->free_db ? (uint16_t)LM_DB_INTEGERKEY : db->flags;
    t->depth = db->depth;
    if (!t->free_db && (db->flags & LM_DB_DUPS) != 0) {
        return bad(c,
                   "%s tree: flags 0x%x (duplicate keys: Keel never "
                   "writes them)",
                   t->name, db->flags);
    }
    if (db->root == LM_INVALID) {
        if (db->depth != 0 || db->branch_pages != 0 || db->leaf_pages != 0 ||
            db->overflow_pages != 0 || db->entries != 0) {
            return bad(c,
                       "%s tree: empty, but its record counts depth %u, "
                       "%llu entries",
                       t->name, db->depth, (unsigned long long)db->entries);
        }
        return 0;
    }
    if (db->depth == 0 || db->depth > LM_DEPTH_MAX) {
        return bad(c, "%s tree: depth %u", t->name, db->depth);
    }
    c->st.trees++;
    rv = walk(c, t, db->root, "its root", 1, none, none);
    if (rv == 0 &&
        (t->branch != db->branch_pages || t->leaf != db->leaf_pages ||
         t->overflow != db->overflow_pages || t->entries != db->entries)) {
        rv = bad(c,
                 "%s tree: %llu branch, %llu leaf, %llu overflow pages and "
                 "%llu entries, its record says %llu, %llu, %llu and %llu",
                 t->name, (unsigned long long)t->branch,
                 (unsigned long long)t->leaf, (unsigned long long)t->overflow,
                 (unsigned long long)t->entries,
                 (unsigned long long)db->branch_pages,
                 (unsigned long long)db->leaf_pages,
                 (unsigned long long)db->overflow_pages,
                 (unsigned long long)db->entries);
    }
    if (!t->free_db) {
        c->st.entries += t->entries;
    }
    return rv;
}

static bool meta_ok(const uint8_t *page, struct lm_meta *m)
{
    struct lm_page h;
    memcpy(&h, page, sizeof h);
    memcpy(m, page + HDR, sizeof *m);
    return (h.flags & LM_P_META) != 0 && m->magic == LM_MAGIC &&
           m->version == LM_VERSION;
}

/* The meta page LMDB uses, then every tree and list it names. */
static int check_map(struct ck *c, uint64_t size)
{
    struct lm_meta m[2];
    const struct lm_meta *use;
    struct tree free_t = {.name = "free", .free_db = true};
    struct tree main_t = {.name = "main", .main_db = true};
    int rv;

    if (size < HDR + sizeof m[0] || !meta_ok(c->map, &m[0])) {
        return bad(c, "meta page 0 is not an LMDB 0.9 meta page");
    }
    c->psize = m[0].dbs[0].pad;
    if (c->psize < LM_PSIZE_MIN || c->psize > LM_PSIZE_MAX ||
        (c->psize & (c->psize - 1)) != 0 || size < 2 * c->psize) {
        return bad(c, "meta page 0 names page size %llu (file %llu bytes)",
                   (unsigned long long)c->psize, (unsigned long long)size);
    }
    if (!meta_ok(c->map + c->psize, &m[1]) || m[1].dbs[0].pad != c->psize) {
        return bad(c,
                   "meta page 1 is not an LMDB 0.9 meta page of page "
                   "size %llu",
                   (unsigned long long)c->psize);
    }
    use = &m[m[0].txnid < m[1].txnid]; /* as mdb_env_pick_meta */
    c->last_pg = use->last_pg;
    c->txnid = use->txnid;
    /* The file may end before last_pg: a page allocated and freed in
     * the same commit is never written. Only free pages may lie there. */
    c->file_pages = size / c->psize;
    if (c->last_pg < 1 || c->last_pg >= LM_PAGES_MAX) {
        return bad(c, "meta page %d: last page %llu (the file holds %llu)",
                   use == &m[1], (unsigned long long)c->last_pg,
                   (unsigned long long)c->file_pages);
    }
    c->seen = calloc(c->last_pg + 1, 1);
    if (c->seen == NULL) {
        snprintf(c->reason, c->cap, "meta.lmdb check: out of memory");
        return KEEL_ENOMEM;
    }
    rv = walk_tree(c, &free_t, &use->dbs[0]);
    rv = rv == 0 ? walk_tree(c, &main_t, &use->dbs[1]) : rv;
    for (uint64_t pg = 2; rv == 0 && pg <= c->last_pg; pg++) {
        if (c->seen[pg] == SEEN_NONE) {
            rv = bad(c,
                     "page %llu is neither in a tree nor in a free-page "
                     "list (leaked; last page %llu)",
                     (unsigned long long)pg, (unsigned long long)c->last_pg);
        }
    }
    free(c->seen);
    return rv;
}

int store_meta_check_file(const char *path, struct store_meta_check_stats *st,
                          char *reason, size_t cap)
{
    struct ck c = {.reason = reason, .cap = cap};
    struct stat sb;
    void *map;
    int fd;
    int rv;

    ASSERT(path != NULL);
    ASSERT(reason != NULL && cap > 0);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rv = errno == ENOENT ? KEEL_ENOENT : KEEL_EIO;
        snprintf(reason, cap, "open %s: %s", path, strerror(errno));
        return rv;
    }
    if (fstat(fd, &sb) != 0) {
        snprintf(reason, cap, "stat %s: %s", path, strerror(errno));
        close(fd);
        return KEEL_EIO;
    }
    if (sb.st_size == 0) {
        close(fd);
        return 0; /* LMDB writes the meta pages of an empty file */
    }
    map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(reason, cap, "mmap %s: %s", path, strerror(errno));
        return KEEL_EIO;
    }
    c.map = map;
    rv = check_map(&c, (uint64_t)sb.st_size);
    munmap(map, (size_t)sb.st_size);
    if (st != NULL) {
        *st = c.st;
    }
    return rv;
}
